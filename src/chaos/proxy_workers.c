/*
 * proxy_workers.c - the chaos proxy's loops (see proxy.h): worker 0 on the
 * proxy's own loop, the others each with a loop on its own thread, all
 * listening on one port; and the proxy's init, listen and shutdown, which
 * start and stop them. A worker's requests are served by proxy.c.
 */
#include "chaos/proxy.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "analysis/quality.h"
#include "chaos/proxy_int.h"

/* ------------------------------------------------------------ workers */

/* Upper bounds of tokenstorm_proxy_forward_delay_seconds. */
static const double forward_buckets[] = {5e-6,   1e-5, 2.5e-5, 5e-5,   1e-4, 2.5e-4, 5e-4, 1e-3,
                                         2.5e-3, 5e-3, 1e-2,   2.5e-2, 5e-2, 0.1,    0.25, 1.0};

/* One part of the proxy (a worker, the API) closed; the last closes reaped. */
static void proxy_part_closed(struct proxy *p);

/* w's upstream client closed: worker 0 is one part of the proxy's close; a
 * thread's worker closes its last handle, so its loop ends. */
static void worker_client_closed(struct http_client *c, void *arg)
{
    (void)c;
    struct proxy_worker *w = arg;
    if (w->index == 0)
        proxy_part_closed(w->p);
    else
        uv_close((uv_handle_t *)&w->stop, NULL); /* the last handle: the thread's loop ends */
}

/*
 * w's upstream client closes once three things are over: its listener and
 * connections (front_closed), its mirror calls or their grace (mirrors_done),
 * and its relayed WebSocket connections (ws_sessions; their upstream side
 * closes on this loop after the client's). Each calls this when it ends.
 */
void proxy_worker_ws_gone(struct proxy_worker *w)
{
    if (w->front_closed && w->mirrors_done && !w->ws_sessions && !w->client_closing) {
        w->client_closing = true;
        http_client_close(&w->client, worker_client_closed, w);
    }
}

/* w's mirror calls ended (or their grace is over). */
static void worker_mirrors_done(struct proxy_worker *w)
{
    w->mirrors_done = true;
    proxy_worker_ws_gone(w);
}

/* w's listener and connections closed: the mirror calls may end, then the client closes. */
static void worker_front_closed(struct http_server *s)
{
    struct proxy_worker *w =
        (struct proxy_worker *)((char *)s - offsetof(struct proxy_worker, front));
    w->front_closed = true;
    proxy_mirror_drain(w, worker_mirrors_done);
}

/* On w's loop: stop accepting, let requests finish, close the client. */
static void worker_stop(struct proxy_worker *w, uint64_t grace_ms)
{
    w->stopping = true;
    w->stop_deadline_ns = ts_now_ns() + grace_ms * 1000000ull;
    proxy_ws_stop(w);
    (void)http_server_shutdown(&w->front, grace_ms, worker_front_closed);
}

/* On a thread's loop: proxy_shutdown asks it to stop. */
static void worker_stop_cb(uv_async_t *h)
{
    struct proxy_worker *w = h->data;
    if (!w->stopping)
        worker_stop(w, atomic_load(&w->grace_ms));
}

/* A worker thread: runs its loop until it is empty, then says so. */
static void worker_main(void *arg)
{
    struct proxy_worker *w = arg;
    (void)uv_run(w->loop, UV_RUN_DEFAULT);
    atomic_store(&w->exited, true);
    uv_async_send(&w->p->reaped);
}

/* The proxy loop joins the threads whose loop is empty. */
static void reaped_cb(uv_async_t *h)
{
    struct proxy *p = h->data;
    for (int i = 1; i < p->n_workers; i++) {
        struct proxy_worker *w = &p->workers[i];
        if (!w->started || w->joined || !atomic_load(&w->exited))
            continue;
        uv_thread_join(&w->thread);
        if (uv_loop_close(w->loop) != 0)
            ts_warn("proxy: worker %d's loop still had handles at exit", i);
        w->joined = true;
        if (p->shutting_down)
            proxy_part_closed(p);
    }
}

/*
 * Sets up worker index on loop: its upstream client and its listener on
 * port (no socket yet). On error, w owns nothing but closing handles on loop
 * (run it to let them close).
 */
static int worker_init(struct proxy *p, int index, uv_loop_t *loop, int port, char *err,
                       size_t errlen)
{
    struct proxy_worker *w = &p->workers[index];
    w->p = p;
    w->index = index;
    w->loop = loop;
    proxy_tracer_init_from(&w->tracer, &p->tracer);
    struct http_client_config cc;
    http_client_config_default(&cc);
    cc.connect_timeout_ms = p->cfg.connect_timeout_ms;
    cc.insecure = p->cfg.insecure;
    cc.ca_file = p->cfg.ca_file;
    /* the receive time of upstream bytes, for forward_delay (free on the own engine) */
    cc.rx_timestamps = strncmp(p->upstream, "http://", 7) == 0;
    prom_hist_init(&w->forward_delay, forward_buckets, sizeof forward_buckets / sizeof(double));
    int rc = http_client_init(&w->client, loop, &cc);
    if (rc) {
        ts_errf(err, errlen, "upstream client: %s", ts_strerror(rc));
        return rc;
    }
    struct http_server_config sc = {
        .host = p->cfg.listen_host,
        .port = port,
        .max_body_bytes = p->cfg.max_body_bytes,
        .reuse_port = p->n_workers > 1,
        .io_uring = !p->cfg.no_io_uring,
    };
    rc = http_server_init(&w->front, loop, &sc, proxy_on_request, w);
    if (rc) {
        ts_errf(err, errlen, "--listen: invalid host '%s'", p->cfg.listen_host);
        http_client_close(&w->client, NULL, NULL);
        return rc;
    }
    return 0;
}

/* Worker index (> 0) on its own loop and thread, listening on port. */
static int worker_start(struct proxy *p, int index, int port, char *err, size_t errlen)
{
    struct proxy_worker *w = &p->workers[index];
    int rc = uv_loop_init(&w->own_loop);
    if (!rc && (rc = uv_async_init(&w->own_loop, &w->stop, worker_stop_cb)) != 0)
        (void)uv_loop_close(&w->own_loop);
    if (rc) {
        ts_errf(err, errlen, "worker %d: %s", index, uv_strerror(rc));
        return rc;
    }
    w->stop.data = w;
    rc = worker_init(p, index, &w->own_loop, port, err, errlen);
    if (rc) {
        uv_close((uv_handle_t *)&w->stop, NULL);
        (void)uv_run(&w->own_loop, UV_RUN_DEFAULT);
        (void)uv_loop_close(&w->own_loop);
        return rc;
    }
    int lrc = http_server_listen(&w->front);
    if (lrc)
        ts_errf(err, errlen, "--listen %s:%d (worker %d): %s", p->cfg.listen_host, port, index,
                ts_strerror(lrc));
    /* started even when it cannot listen: proxy_shutdown then stops it like the others */
    rc = uv_thread_create(&w->thread, worker_main, w);
    if (rc) {
        ts_errf(err, errlen, "worker %d: cannot start its thread: %s", index, uv_strerror(rc));
        worker_stop(w, 0); /* closes the stop handle last */
        (void)uv_run(w->loop, UV_RUN_DEFAULT);
        (void)uv_loop_close(w->loop);
        return rc;
    }
    w->started = true;
    return lrc;
}

/* ------------------------------------------------------------ proxy */

/* The fault set's and the workers' mutexes. */
static void destroy_mutexes(struct proxy *p)
{
    pthread_mutex_destroy(&p->faults_mu);
    for (int i = 0; i < p->n_workers; i++)
        pthread_mutex_destroy(&p->workers[i].hist_mu);
}

/* What the workers shared: faults, the chain, the mirror's output, the
 * recorder, the mutexes and the workers' array (after them all). */
static void release_shared(struct proxy *p)
{
    faultset_release(&p->faults);
    chain_release(&p->chain);
    for (int i = 0; i < p->n_workers; i++) {
        quality_scratch_free(p->workers[i].qs);
        if (p->workers[i].dec) {
            openai_decoder_release(p->workers[i].dec);
            ts_free(p->workers[i].dec);
        }
    }
    proxy_mirror_out_stop(p); /* the workers are gone: the last pairs are in */
    pthread_mutex_destroy(&p->mirror.mu);
    if (p->recorder) {
        struct recorder_stats st;
        recorder_stats(p->recorder, &st);
        if (st.dropped || st.skipped || st.cut[RECORDER_CUT_MEMORY] || st.cut[RECORDER_CUT_LINE])
            ts_warn("proxy: --record: %llu exchanges left out (the disk was behind), %llu left "
                    "out and %llu with their later events left out past --record-memory-max, "
                    "%llu past a line's cap",
                    (unsigned long long)st.dropped, (unsigned long long)st.skipped,
                    (unsigned long long)st.cut[RECORDER_CUT_MEMORY],
                    (unsigned long long)st.cut[RECORDER_CUT_LINE]);
    }
    if (recorder_close(p->recorder) != 0)
        ts_warn("proxy: --record: a write failed; the recording is incomplete");
    p->recorder = NULL;
    destroy_mutexes(p);
    ts_free(p->workers);
    p->workers = NULL;
}

/* p->cfg from cfg with its defaults; checks the thread count and the
 * upstream URL, copied without its trailing '/'s into p->upstream. 0 or
 * -EINVAL with a message. */
static int proxy_config(struct proxy *p, const struct proxy_config *cfg, char *err, size_t errlen)
{
    p->cfg = *cfg;
    if (!p->cfg.listen_host)
        p->cfg.listen_host = "127.0.0.1";
    if (!p->cfg.api_host)
        p->cfg.api_host = "127.0.0.1";
    if (!p->cfg.max_body_bytes)
        p->cfg.max_body_bytes = 16u << 20;
    if (!p->cfg.connect_timeout_ms)
        p->cfg.connect_timeout_ms = 10000;
    if (!p->cfg.threads)
        p->cfg.threads = 1;
    if (!p->cfg.retry_key)
        p->cfg.retry_key = CHAIN_KEY_HDR;
    if (p->cfg.mirror_url) {
        const char *m = p->cfg.mirror_url;
        size_t n = strlen(m);
        while (n > 8 && m[n - 1] == '/')
            n--;
        if ((strncmp(m, "http://", 7) && strncmp(m, "https://", 8)) || n >= sizeof p->mirror_base ||
            strpbrk(m, " \r\n")) {
            ts_errf(err, errlen, "--mirror: expected an http:// or https:// URL, got '%.200s'", m);
            return -EINVAL;
        }
        memcpy(p->mirror_base, m, n);
        p->mirror_base[n] = '\0';
        if (!(p->cfg.mirror_share > 0) || p->cfg.mirror_share > 1)
            p->cfg.mirror_share = 1;
        if (p->cfg.mirror_max <= 0)
            p->cfg.mirror_max = 64;
    }
    if (!p->cfg.orphan_max_ns)
        p->cfg.orphan_max_ns = 60ull * 1000 * 1000 * 1000;
    if (p->cfg.threads < 1 || p->cfg.threads > PROXY_THREADS_MAX) {
        ts_errf(err, errlen, "--threads: expected 1..%d, got %d", PROXY_THREADS_MAX,
                p->cfg.threads);
        return -EINVAL;
    }
    const char *u = cfg->upstream;
    if (!u || (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0)) {
        ts_errf(err, errlen, "--upstream: expected an http:// or https:// URL, got '%s'",
                u ? u : "");
        return -EINVAL;
    }
    size_t n = strlen(u);
    while (n > 8 && u[n - 1] == '/')
        n--;
    if (n >= sizeof p->upstream || strpbrk(u, " \r\n")) {
        ts_errf(err, errlen, "--upstream: invalid or too long URL");
        return -EINVAL;
    }
    memcpy(p->upstream, u, n);
    p->upstream[n] = '\0';
    p->cfg.upstream = p->upstream;
    return 0;
}

int proxy_init(struct proxy *p, uv_loop_t *loop, const struct proxy_config *cfg, char *err,
               size_t errlen)
{
    int rc;

    memset(p, 0, sizeof *p);
    p->loop = loop;
    rc = proxy_config(p, cfg, err, errlen);
    if (rc)
        return rc;
    proxy_tracer_init(&p->tracer, cfg->otlp, cfg->otlp_all, p->upstream);
    p->n_workers = p->cfg.threads;
    proxy_mirror_stats_init(&p->mirror);
    if ((rc = proxy_mirror_out_start(p, err, errlen)) != 0)
        return rc;
    if (p->cfg.record && (rc = recorder_open(p->cfg.record, &p->recorder, err, errlen))) {
        proxy_mirror_out_stop(p);
        return rc;
    }
    if (chain_init(&p->chain, p->cfg.retry_window_ns) != 0) {
        proxy_mirror_out_stop(p);
        (void)recorder_close(p->recorder);
        ts_errf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    p->workers = ts_calloc((size_t)p->n_workers, sizeof *p->workers);
    if (!p->workers) {
        proxy_mirror_out_stop(p);
        chain_release(&p->chain);
        (void)recorder_close(p->recorder);
        ts_errf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    pthread_mutex_init(&p->faults_mu, NULL);
    for (int i = 0; i < p->n_workers; i++)
        pthread_mutex_init(&p->workers[i].hist_mu, NULL);
    faultset_init(&p->faults, cfg->seed);
    rc = uv_async_init(loop, &p->reaped, reaped_cb);
    if (rc) {
        ts_errf(err, errlen, "cannot create an async handle: %s", uv_strerror(rc));
        goto out_release_faults;
    }
    p->reaped.data = p;
    rc = worker_init(p, 0, loop, p->cfg.listen_port, err, errlen);
    if (rc)
        goto out_close_reaped;
    if (p->cfg.api) {
        struct http_server_config ac = {.host = p->cfg.api_host, .port = p->cfg.api_port};
        rc = http_server_init(&p->api, loop, &ac, proxy_api_handle, p);
        if (rc) {
            ts_errf(err, errlen, "--api: invalid host '%s'", p->cfg.api_host);
            /* worker 0 owns handles now: close them the usual way, whose
             * end (reaped_closed) releases the rest */
            p->closing_parts = 1;
            p->shutting_down = true;
            worker_stop(&p->workers[0], 0);
            return rc;
        }
        p->api_inited = true;
    }
    return 0;

out_close_reaped:
    uv_close((uv_handle_t *)&p->reaped, NULL);
out_release_faults:
    release_shared(p);
    return rc;
}

int proxy_listen(struct proxy *p, char *err, size_t errlen)
{
    int rc = http_server_listen(&p->workers[0].front);
    if (rc) {
        ts_errf(err, errlen, "--listen %s:%d: %s", p->cfg.listen_host, p->cfg.listen_port,
                ts_strerror(rc));
        return rc;
    }
    if (p->api_inited) {
        rc = http_server_listen(&p->api);
        if (rc) {
            ts_errf(err, errlen, "--api %s:%d: %s", p->cfg.api_host, p->cfg.api_port,
                    ts_strerror(rc));
            return rc;
        }
    }
    int port = http_server_port(&p->workers[0].front);
    for (int i = 1; i < p->n_workers && !rc; i++)
        rc = worker_start(p, i, port, err, errlen);
    return rc;
}

int proxy_port(const struct proxy *p)
{
    return http_server_port(&p->workers[0].front);
}

int proxy_api_port(const struct proxy *p)
{
    return p->api_inited ? http_server_port(&p->api) : 0;
}

bool proxy_io_uring(const struct proxy *p, const char **why)
{
    if (p->cfg.no_io_uring) {
        if (why)
            *why = "--no-io-uring";
        return false;
    }
    for (int i = 1; i < p->n_workers; i++)
        if (!http_server_io_uring(&p->workers[i].front, why))
            return false;
    return http_server_io_uring(&p->workers[0].front, why);
}

void proxy_io_uring_counts(const struct proxy *p, uint64_t *sends, uint64_t *submits)
{
    *sends = *submits = 0;
    for (int i = 0; i < p->n_workers; i++) {
        const struct ts_uring_stats *st = &p->workers[i].front.uring_stats;
        *sends += atomic_load_explicit(&st->sends, memory_order_relaxed);
        *submits += atomic_load_explicit(&st->submits, memory_order_relaxed);
    }
}

/* The last part closed: release what the workers shared, then on_closed. */
static void reaped_closed(uv_handle_t *h)
{
    struct proxy *p = h->data;
    release_shared(p);
    if (p->on_closed)
        p->on_closed(p);
}

/* One part of the proxy (a worker, the API) closed; the last closes reaped. */
static void proxy_part_closed(struct proxy *p)
{
    if (--p->closing_parts > 0)
        return;
    uv_close((uv_handle_t *)&p->reaped, reaped_closed);
}

/* The control API closed. */
static void api_closed(struct http_server *s)
{
    struct proxy *p = (struct proxy *)((char *)s - offsetof(struct proxy, api));
    proxy_part_closed(p);
}

void proxy_shutdown(struct proxy *p, uint64_t grace_ms, void (*on_closed)(struct proxy *p))
{
    if (p->shutting_down)
        return;
    p->shutting_down = true;
    p->on_closed = on_closed;
    p->closing_parts = 1 + (p->api_inited ? 1 : 0);
    for (int i = 1; i < p->n_workers; i++) {
        struct proxy_worker *w = &p->workers[i];
        if (!w->started || w->joined)
            continue;
        p->closing_parts++;
        atomic_store(&w->grace_ms, grace_ms);
        uv_async_send(&w->stop);
    }
    worker_stop(&p->workers[0], grace_ms);
    if (p->api_inited)
        (void)http_server_shutdown(&p->api, 0, api_closed);
}
