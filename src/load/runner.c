/*
 * runner.c - the coordinator of a load run: starts the workers, collects
 * their measurements once a second (timeline, interval log, progress), ends
 * the run and hands back the merged result.
 */
#include <signal.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/hlog.h"
#include "base/log.h"
#include "load/runner_int.h"

static atomic_bool stop_requested;
static uv_async_t *stop_async; /* set while a run is in progress */

void runner_stop(void)
{
    atomic_store(&stop_requested, true);
    uv_async_t *a = stop_async;
    if (a)
        (void)uv_async_send(a); /* async-signal-safe; a signal handler has no one to tell */
}

int runner_config_check(const struct runner_config *cfg, char *err, size_t errlen)
{
    if (cfg->integrity_key && (!*cfg->integrity_key || strlen(cfg->integrity_key) > SIGN_KEY_MAX)) {
        ts_errf(err, errlen, "the integrity key must be 1..%d bytes", SIGN_KEY_MAX);
        return -EINVAL;
    }
    if (cfg->n_headers > RUNNER_MAX_HEADERS) {
        ts_errf(err, errlen, "at most %d headers", RUNNER_MAX_HEADERS);
        return -EINVAL;
    }
    if (cfg->shard.count > SHARD_MAX ||
        (cfg->shard.count && cfg->shard.index >= cfg->shard.count)) {
        ts_errf(err, errlen, "shard %u/%u: need 0 <= i < N <= %u", cfg->shard.index,
                cfg->shard.count, SHARD_MAX);
        return -EINVAL;
    }
    for (size_t k = 0; k < cfg->nclasses; k++) {
        const struct runner_class *rc = &cfg->classes[k];
        if (!rc->traffic) {
            ts_errf(err, errlen, "class %zu: no traffic", k);
            return -EINVAL;
        }
        if (rc->mode == RUNNER_CLOSED && (rc->users < 1 || rc->users > RUNNER_MAX_USERS)) {
            ts_errf(err, errlen, "class '%s': users must be 1..%u", rc->name, RUNNER_MAX_USERS);
            return -EINVAL;
        }
        if (rc->mode == RUNNER_OPEN && !rc->times && !rc->arrival.stages &&
            !(rc->arrival.rate > 0)) {
            ts_errf(err, errlen, "class '%s': the open loop needs a rate > 0 or stages", rc->name);
            return -EINVAL;
        }
        if (!cfg->duration_ns && !rc->max_iterations && !rc->times && !rc->arrival.stages) {
            ts_errf(err, errlen, "class '%s' needs an end: a duration or a number of requests",
                    rc->name);
            return -EINVAL;
        }
    }
    if (cfg->nclasses) {
        if (cfg->workers < 1 || cfg->workers > RUNNER_MAX_WORKERS) {
            ts_errf(err, errlen, "workers must be 1..%d", RUNNER_MAX_WORKERS);
            return -EINVAL;
        }
        return 0;
    }
    if (!cfg->url || !cfg->workload) {
        ts_errf(err, errlen, "no target or no workload");
        return -EINVAL;
    }
    if (cfg->workers < 1 || cfg->workers > RUNNER_MAX_WORKERS) {
        ts_errf(err, errlen, "workers must be 1..%d", RUNNER_MAX_WORKERS);
        return -EINVAL;
    }
    if (cfg->mode == RUNNER_CLOSED && (cfg->users < 1 || cfg->users > RUNNER_MAX_USERS)) {
        ts_errf(err, errlen, "users (--concurrency) must be 1..%u", RUNNER_MAX_USERS);
        return -EINVAL;
    }
    if (cfg->mode == RUNNER_OPEN && !cfg->arrival.stages && !(cfg->arrival.rate > 0) &&
        !(cfg->arrival.ramp_to > 0)) {
        ts_errf(err, errlen, "the open loop needs a rate > 0 (--rate) or stages");
        return -EINVAL;
    }
    if (!cfg->duration_ns && !cfg->max_requests &&
        !(cfg->mode == RUNNER_OPEN && (cfg->arrival.stages || cfg->arrival.ramp_ns))) {
        ts_errf(err, errlen, "the run needs an end: a duration or a number of requests");
        return -EINVAL;
    }
    return 0;
}

/* The coordinator's handles, as bits of coord.open, in the order of
 * coord_close()'s table: set once initialised, cleared once closed. */
enum coord_handles {
    COORD_TICK = 1 << 0,
    COORD_DRAIN = 1 << 1,
    COORD_STOP = 1 << 2,
    COORD_EVENT = 1 << 3, /* run.worker_event */
    COORD_SIGINT = 1 << 4,
    COORD_SIGTERM = 1 << 5,
};

struct coord {
    struct runner run;
    uv_loop_t loop;
    uv_timer_t tick;
    uv_timer_t drain;
    uv_async_t stop;
    uv_signal_t sigint, sigterm;
    unsigned open;    /* enum coord_handles */
    uint32_t inited;  /* workers set up: each needs worker_release() */
    uint32_t started; /* worker threads started: each needs pthread_join() */
    struct run_stats *total;
    struct run_stats *interval;
    struct hlog_writer hlog;
    struct runner_point *timeline;
    size_t ntimeline, timeline_cap;
    uint64_t last_tick_ns;
    uint64_t last_sent;
    uint64_t last_chunks;
    uint64_t pending_close; /* end time of an interval waiting for the workers' stats */
    uint32_t delivered;     /* workers whose stats arrived since the last tick */
    double peak_tps;
    bool sending_over;
    bool cut_sent;
    bool quitting;
    bool end_cut;
    bool interrupted;
    int stop_signal;      /* SIGINT or SIGTERM when a signal stopped the run, else 0 */
    uint64_t last_end_ns; /* when the last request ended */
    char err[256];
    struct scraper *scraper; /* --server-metrics, or NULL */
    bool scraper_closed;
    uint64_t end_ns;              /* when the last request ended (collect_last) */
    struct otlp_stats otlp_stats; /* the spans' fate, after the final flush */
    bool otlp_on;
    struct qnotes notes;      /* taken from the workers, fed in completion order */
    struct dual_sla dual_sla; /* when cfg->quality.dual_sla */
    struct consistency *consistency;
    struct live_metrics live; /* --metrics-listen: what /metrics shows */
    struct live_metrics_server metrics;
};

/* Posts a command to every worker thread that was started (one that never
 * ran must not get one: its loop runs once more, in worker_release). */
static void broadcast(struct coord *c, unsigned bits)
{
    for (uint32_t i = 0; i < c->run.nworkers; i++) {
        if (c->run.workers[i].thread_started)
            worker_post(&c->run.workers[i], bits);
    }
}

static uint64_t total_sent(struct coord *c)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < c->run.nworkers; i++)
        n += atomic_load(&c->run.workers[i].sent);
    return n;
}

static uint64_t total_in_flight(struct coord *c)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < c->run.nworkers; i++)
        n += atomic_load(&c->run.workers[i].in_flight_now);
    return n;
}

static uint64_t total_chunks(struct coord *c)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < c->run.nworkers; i++)
        n += atomic_load_explicit(&c->run.workers[i].chunks_rx, memory_order_relaxed);
    return n;
}

static double pct_ms(const struct run_stats *s, enum stat_metric m, double p)
{
    const struct hdr *h = s->hist[m];
    if (!h || !hdr_total_count(h))
        return 0;
    return (double)hdr_value_at_percentile(h, p) / 1000.0;
}

/* The time to the first token users see (ttfc), else vLLM's TTFT (no ttfc
 * sample: nothing streamed content yet), at percentile p. */
static double first_token_pct_ms(const struct run_stats *s, double p)
{
    return pct_ms(s, hdr_total_count(s->hist[STAT_TTFC]) ? STAT_TTFC : STAT_TTFT, p);
}

/* Each class's content chunks in the interval just closed (len s long), and its peak rate. */
static void class_peaks(struct coord *c, double len)
{
    struct runner *run = &c->run;
    for (size_t k = 0; run->cls_last_chunks && k < run->cfg->nclasses; k++) {
        uint64_t n = 0;
        for (uint32_t i = 0; i < run->nworkers; i++)
            if (run->workers[i].cls)
                n += atomic_load_explicit(&run->workers[i].cls[k].chunks_rx, memory_order_relaxed);
        double rate = (double)(n - run->cls_last_chunks[k]) / len;
        run->cls_last_chunks[k] = n;
        if (len > 0.5 && c->last_tick_ns >= run->warmup_end_ns && rate > run->cls_peak_tps[k])
            run->cls_peak_tps[k] = rate;
    }
}

/* Closes one interval: a timeline point, .hlog lines, the progress callback. */
static void close_interval(struct coord *c, uint64_t now)
{
    const struct runner_config *cfg = c->run.cfg;
    struct run_stats *iv = c->interval;
    double t0 = (double)(c->last_tick_ns - c->run.start_ns) / 1e9;
    double t1 = (double)(now - c->run.start_ns) / 1e9;
    uint64_t sent = total_sent(c);
    struct runner_point p = {
        .t_s = t1,
        .sent = sent - c->last_sent,
        .completed = iv->outcomes[REQ_OK] + iv->warmup_ok,
        .good = iv->good + iv->warmup_good,
        .errors = run_stats_failed(iv),
        .in_flight = total_in_flight(c),
        .output_tokens = iv->output_tokens_all + iv->warmup_output_tokens,
        .chunks = total_chunks(c) - c->last_chunks,
        .ttft_p50_ms = first_token_pct_ms(iv, 50),
        .ttft_p99_ms = first_token_pct_ms(iv, 99),
        .e2el_p50_ms = pct_ms(iv, STAT_E2EL, 50),
        .lag_p99_ms = pct_ms(iv, STAT_LAG, 99),
    };
    c->last_sent = sent;
    c->last_chunks += p.chunks;
    c->live.sent = sent;
    c->live.in_flight = p.in_flight;
    if (c->ntimeline == c->timeline_cap) {
        size_t cap = c->timeline_cap ? c->timeline_cap * 2 : 64;
        struct runner_point *tl = ts_realloc(c->timeline, cap * sizeof(*tl));
        if (tl) {
            c->timeline = tl;
            c->timeline_cap = cap;
        }
    }
    if (c->ntimeline < c->timeline_cap)
        c->timeline[c->ntimeline++] = p;
    double len = t1 - t0;
    if (len > 0.5 && (double)p.chunks / len > c->peak_tps &&
        c->last_tick_ns >= c->run.warmup_end_ns)
        c->peak_tps = (double)p.chunks / len;
    class_peaks(c, len);
    if (cfg->hlog) {
        static const struct {
            const char *tag;
            enum stat_metric m;
        } tags[] = {{"ttft", STAT_TTFT},
                    {"itl", STAT_ITL},
                    {"tpot", STAT_TPOT},
                    {"e2el", STAT_E2EL},
                    {"lag", STAT_LAG}};
        for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]); i++)
            if (iv->hist[tags[i].m] && hdr_total_count(iv->hist[tags[i].m]))
                if (hlog_write_interval(&c->hlog, tags[i].tag, t0, len, iv->hist[tags[i].m]))
                    ts_warn("latency.hlog: write failed");
        fflush(cfg->hlog);
    }
    c->last_tick_ns = now;
    run_stats_reset(iv);
    if (cfg->on_tick) {
        uint64_t done = c->total->outcomes[REQ_OK];
        struct runner_progress pr = {
            .elapsed_s = t1,
            .total_s = cfg->duration_ns ? (double)cfg->duration_ns / 1e9 : 0,
            .sent = sent,
            .completed = done,
            .errors = run_stats_failed(c->total),
            .in_flight = p.in_flight,
            .last = &c->timeline[c->ntimeline - 1],
            .rate = len > 0 ? (double)p.completed / len : 0,
            .tokens_per_s = len > 0 ? (double)p.chunks / len : 0,
            .draining = c->sending_over,
            .total = c->total,
            .timeline = c->timeline,
            .ntimeline = c->ntimeline,
        };
        cfg->on_tick(&pr, cfg->tick_arg);
    }
}

/*
 * When sending ended, in seconds since time 0 of the schedule: the end of the
 * sending window of a run by duration that was neither stopped nor ended by
 * its request count, else the intended time of the newest request sent (NAN
 * when none was).
 */
static double send_end_s(struct coord *c)
{
    const struct runner *run = &c->run;
    uint64_t last = 0;

    bool by_count = run->cfg->max_requests && total_sent(c) >= run->cfg->max_requests;
    if (run->end_send_ns != UINT64_MAX && !c->interrupted && !by_count)
        return (double)(run->end_send_ns - run->start_ns) / 1e9;
    for (uint32_t i = 0; i < run->nworkers; i++) {
        uint64_t t = atomic_load(&run->workers[i].last_send_ns);
        last = t > last ? t : last;
    }
    return last > run->start_ns ? (double)(last - run->start_ns) / 1e9 : NAN;
}

/* Takes the stats each worker posted, merges them, hands back empty ones. */
static int note_order(const void *a, const void *b)
{
    const struct qnote *x = a, *y = b;
    return x->end_ns < y->end_ns ? -1 : x->end_ns > y->end_ns;
}

/* Feeds the notes taken so far to the dual SLA and the consistency check,
 * in completion order. */
static void feed_notes(struct coord *c)
{
    if (!c->notes.n)
        return;
    qsort(c->notes.v, c->notes.n, sizeof(*c->notes.v), note_order);
    for (size_t i = 0; i < c->notes.n; i++) {
        const struct qnote *n = &c->notes.v[i];
        if (c->run.cfg->quality.dual_sla)
            dual_sla_feed(&c->dual_sla, n->quality_ok, n->latency_ok);
        if (c->consistency && n->answer &&
            consistency_feed(c->consistency, n->prompt_hash, n->answer, n->answer_len, NULL, 0))
            ts_warn("runner: out of memory in the consistency check");
    }
    qnotes_clear(&c->notes);
}

/* Moves a worker's notes to the coordinator's list. */
static void take_notes(struct coord *c, struct qnotes *from)
{
    for (size_t i = 0; i < from->n; i++) {
        if (qnotes_push(&c->notes, &from->v[i]))
            ts_warn("runner: out of memory keeping quality notes");
        from->v[i].answer = NULL; /* pushed (or freed by the push) */
    }
    qnotes_clear(from);
}

static void collect(struct coord *c)
{
    for (uint32_t i = 0; i < c->run.nworkers; i++) {
        struct worker *w = &c->run.workers[i];
        pthread_mutex_lock(&w->mail_lock);
        struct run_stats *full = w->mailbox;
        w->mailbox = NULL;
        if (full)
            take_notes(c, &w->mail_notes);
        pthread_mutex_unlock(&w->mail_lock);
        if (!full)
            continue;
        if (run_stats_merge(c->total, full) || run_stats_merge(c->interval, full))
            ts_warn("runner: out of memory merging measurements");
        run_stats_reset(full);
        pthread_mutex_lock(&w->mail_lock);
        if (!w->spare)
            w->spare = full;
        else
            run_stats_free(full);
        pthread_mutex_unlock(&w->mail_lock);
        c->delivered++;
    }
}

/* Closes the scraper and every coordinator handle still open (at the end of
 * the run, or after a failure to set them up); the loop must then run for
 * the closes to complete. Calling it again does nothing. */
static void coord_close(struct coord *c)
{
    uv_handle_t *const handles[] = {
        (uv_handle_t *)&c->tick,   (uv_handle_t *)&c->drain,
        (uv_handle_t *)&c->stop,   (uv_handle_t *)&c->run.worker_event,
        (uv_handle_t *)&c->sigint, (uv_handle_t *)&c->sigterm,
    };
    if (c->scraper && !c->scraper_closed) {
        c->scraper_closed = true;
        scraper_close(c->scraper);
    }
    for (size_t i = 0; i < sizeof(handles) / sizeof(handles[0]); i++) {
        if (c->open & (1u << i))
            uv_close(handles[i], NULL);
    }
    c->open = 0;
}

static void on_worker_event(uv_async_t *h)
{
    struct coord *c = h->data;
    collect(c);
    feed_notes(c);
    if (c->pending_close && c->delivered >= c->run.nworkers) {
        close_interval(c, c->pending_close);
        c->pending_close = 0;
    }
    if (!c->quitting && atomic_load(&c->run.workers_done) == c->run.nworkers) {
        c->quitting = true;
        c->last_end_ns = ts_now_ns();
        uv_timer_stop(&c->tick);
        uv_timer_stop(&c->drain);
        broadcast(c, WCMD_QUIT);
        if (c->run.cfg->metrics.host) /* it keeps the loop: merge the last stats first */
            uv_stop(&c->loop);
        coord_close(c);
    }
}

static void on_drain_timeout(uv_timer_t *h)
{
    struct coord *c = h->data;
    if (!c->cut_sent) {
        c->cut_sent = true;
        c->end_cut = total_in_flight(c) > 0;
        broadcast(c, WCMD_CUT);
    }
}

static void begin_end(struct coord *c)
{
    if (c->sending_over)
        return;
    c->sending_over = true;
    broadcast(c, WCMD_STOP);
    uint64_t drain_ms = c->run.cfg->drain_ns / TS_NS_PER_MS;
    if (c->interrupted)
        drain_ms = 0;
    int rc = uv_timer_start(&c->drain, on_drain_timeout, drain_ms, 0);
    if (rc) {
        ts_warn("runner: drain timer: %s; cutting the requests in flight now", uv_strerror(rc));
        on_drain_timeout(&c->drain);
    }
}

static void on_tick(uv_timer_t *h)
{
    struct coord *c = h->data;
    uint64_t now = ts_now_ns();
    collect(c);
    if (c->pending_close) /* a worker was too busy to answer within a second */
        close_interval(c, c->pending_close);
    c->pending_close = now;
    c->delivered = 0;
    broadcast(c, WCMD_ROTATE);
    if (now >= c->run.end_send_ns)
        begin_end(c);
}

static void on_stop(uv_async_t *h)
{
    struct coord *c = h->data;
    if (!atomic_load(&stop_requested) || c->interrupted)
        return;
    c->interrupted = true;
    atomic_store(&c->run.stop, true);
    c->sending_over = false; /* begin_end again with no drain */
    begin_end(c);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct coord *c = h->data;
    if (!c->stop_signal)
        c->stop_signal = signum; /* the first one names the stop (130 or 143) */
    ts_info("%s: stopping; results so far are kept", signum == SIGINT ? "SIGINT" : "SIGTERM");
    runner_stop();
}

/* --metrics-listen: serves c->live from the coordinator's loop (no locks needed). */
static int metrics_start(struct coord *c, char *err, size_t errlen)
{
    const struct runner_metrics *m = &c->run.cfg->metrics;
    int rc = live_metrics_init(&c->live, &m->info);
    if (rc) {
        ts_errf(err, errlen, "metrics: unknown endpoint");
        return rc;
    }
    c->live.stats = c->total;
    rc = live_metrics_server_start(&c->metrics, &c->loop, m->host, m->port, &c->live, err, errlen);
    c->metrics.extra = m->on_request;
    c->metrics.extra_arg = c->run.cfg->tick_arg;
    if (rc)
        live_metrics_server_linger(&c->metrics, 0, false);
    else if (m->on_listen)
        m->on_listen(m->host, live_metrics_server_port(&c->metrics), c->run.cfg->tick_arg);
    return rc;
}

int runner_class_result_add(struct runner_class_result *dst, const struct runner_class_result *src)
{
    if (!dst->stats || !src->stats || dst->nsteps != src->nsteps)
        return -EINVAL;
    if (run_stats_merge(dst->stats, src->stats))
        return -ENOMEM;
    if (dst->iter_latency && src->iter_latency && hdr_add(dst->iter_latency, src->iter_latency))
        return -ENOMEM;
    for (uint32_t s = 0; s < dst->nsteps; s++) {
        if (run_stats_merge(dst->steps[s], src->steps[s]))
            return -ENOMEM;
    }
    dst->iterations += src->iterations;
    for (int o = 0; o < 3; o++)
        dst->iter_outcome[o] += src->iter_outcome[o];
    errtally_merge(&dst->iter_why, &src->iter_why);
    dst->sessions += src->sessions;
    for (uint32_t n = 0; n < dst->nintents && n < src->nintents; n++)
        dst->intent_sent[n] += src->intent_sent[n];
    for (size_t n = 0; n < 16; n++)
        dst->perturb_sent[n] += src->perturb_sent[n];
    dst->sent += src->sent;
    dst->with_prefix += src->with_prefix;
    dst->trimmed += src->trimmed;
    return 0;
}

/* Each class's results: the sum of the workers' shares (taken from them). */
static int merge_classes(struct runner *run, struct runner_result *out)
{
    const struct runner_config *cfg = run->cfg;
    out->classes = ts_calloc(cfg->nclasses, sizeof(*out->classes));
    if (!out->classes)
        return -ENOMEM;
    out->nclasses = cfg->nclasses;
    for (size_t k = 0; k < cfg->nclasses; k++) {
        struct runner_class_result *dst = &out->classes[k];
        for (uint32_t i = 0; i < run->nworkers; i++) {
            struct runner_class_result *src = &run->workers[i].cls[k].res;
            if (!dst->stats) { /* the first worker's becomes the sum */
                *dst = *src;
                memset(src, 0, sizeof(*src));
                continue;
            }
            int rc = runner_class_result_add(dst, src);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* Reports a libuv failure the runner's way: the message in err, the code back. */
static int loop_fail(char *err, size_t errlen, const char *what, int rc)
{
    ts_errf(err, errlen, "%s: %s", what, uv_strerror(rc));
    return rc;
}

/* The coordinator's memory: the workers, the merged stats, the trace
 * context, the classes' counters. c is zeroed; coord_free() undoes it. */
static int coord_alloc(struct coord *c, const struct runner_config *cfg, char *err, size_t errlen)
{
    struct runner *run = &c->run;
    run->cfg = cfg;
    run->nworkers = cfg->workers;
    atomic_store(&stop_requested, false);
    run->workers = ts_calloc(cfg->workers, sizeof(*run->workers));
    if (!run->workers || run_stats_new(&c->total) || run_stats_new(&c->interval)) {
        ts_errf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    c->interval->hist_only = true; /* a timeline point needs no exact values */
    int rc = reqtrace_run_init(
        &run->trace, &cfg->trace, cfg->url,
        cfg->nclasses ? cfg->classes[0].traffic->endpoint : cfg->workload->endpoint, err, errlen);
    if (rc)
        return rc;
    if (cfg->nclasses) {
        run->cls_iter = ts_calloc(cfg->nclasses, sizeof(*run->cls_iter));
        run->cls_session = ts_calloc(cfg->nclasses, sizeof(*run->cls_session));
        run->cls_last_chunks = ts_calloc(cfg->nclasses, sizeof(*run->cls_last_chunks));
        run->cls_peak_tps = ts_calloc(cfg->nclasses, sizeof(*run->cls_peak_tps));
        if (!run->cls_iter || !run->cls_session || !run->cls_last_chunks || !run->cls_peak_tps) {
            ts_errf(err, errlen, "out of memory");
            return -ENOMEM;
        }
    }
    return 0;
}

/* Frees the coordinator and what it still holds (a run hands its results out first). */
static void coord_free(struct coord *c)
{
    qnotes_release(&c->notes);
    consistency_free(c->consistency);
    reqtrace_run_finish(&c->run.trace, NULL, NULL);
    run_stats_free(c->total);
    run_stats_free(c->interval);
    ts_free(c->timeline);
    ts_free(c->run.workers);
    ts_free((void *)c->run.cls_iter);
    ts_free((void *)c->run.cls_session);
    ts_free(c->run.cls_last_chunks);
    ts_free(c->run.cls_peak_tps);
    ts_free(c);
}

/* Sets up every worker (its loop, client, timer, stats), and the dual SLA
 * and the consistency check the coordinator feeds. c->inited counts the
 * workers to release, the one that failed included. */
static int workers_init(struct coord *c, char *err, size_t errlen)
{
    const struct runner_config *cfg = c->run.cfg;
    int rc;
    while (c->inited < cfg->workers) {
        struct worker *w = &c->run.workers[c->inited];
        rc = worker_init(w, &c->run, c->inited, err, errlen);
        c->inited++;
        if (rc)
            return rc;
    }
    if (cfg->quality.dual_sla && (rc = dual_sla_init(&c->dual_sla, &cfg->quality.dual))) {
        ts_errf(err, errlen, "dual SLA: a window of 1 or more requests and targets in 0..1");
        return rc;
    }
    if (cfg->quality.consistency && (rc = consistency_new(&cfg->quality.cons, &c->consistency))) {
        ts_errf(err, errlen, "consistency check: bad settings");
        return rc;
    }
    return 0;
}

/* The coordinator's handles on its loop: the 1-second tick, the drain
 * timer, runner_stop()'s async, the workers' event and (handle_signals)
 * SIGINT and SIGTERM. Each one set up is marked in c->open for coord_close(). */
static int coord_open(struct coord *c, char *err, size_t errlen)
{
    int rc;
    if ((rc = uv_timer_init(&c->loop, &c->tick)))
        return loop_fail(err, errlen, "timer", rc);
    c->open |= COORD_TICK;
    if ((rc = uv_timer_init(&c->loop, &c->drain)))
        return loop_fail(err, errlen, "timer", rc);
    c->open |= COORD_DRAIN;
    if ((rc = uv_async_init(&c->loop, &c->stop, on_stop)))
        return loop_fail(err, errlen, "async", rc);
    c->open |= COORD_STOP;
    if ((rc = uv_async_init(&c->loop, &c->run.worker_event, on_worker_event)))
        return loop_fail(err, errlen, "async", rc);
    c->open |= COORD_EVENT;
    c->tick.data = c->drain.data = c->stop.data = c->run.worker_event.data = c;
    if (!c->run.cfg->handle_signals)
        return 0;
    if ((rc = uv_signal_init(&c->loop, &c->sigint)))
        return loop_fail(err, errlen, "signal", rc);
    c->open |= COORD_SIGINT;
    if ((rc = uv_signal_init(&c->loop, &c->sigterm)))
        return loop_fail(err, errlen, "signal", rc);
    c->open |= COORD_SIGTERM;
    c->sigint.data = c->sigterm.data = c;
    if ((rc = uv_signal_start(&c->sigint, on_signal, SIGINT)) ||
        (rc = uv_signal_start(&c->sigterm, on_signal, SIGTERM)))
        return loop_fail(err, errlen, "signal", rc);
    return 0;
}

/* Closes what is left on the coordinator's loop (everything, after a
 * failure to set it up; after a run, nothing but the loop), runs it until
 * the closes complete, and closes it. */
static void coord_close_loop(struct coord *c)
{
    stop_async = NULL;
    coord_close(c);
    live_metrics_server_linger(&c->metrics, 0, false); /* a no-op if stopped or never started */
    uv_run(&c->loop, UV_RUN_DEFAULT);
    scraper_free(c->scraper);
    c->scraper = NULL;
    if (uv_loop_close(&c->loop))
        ts_warn("runner: coordinator loop closed with open handles");
}

/* --server-metrics: a scraper on the coordinator's loop; the run goes on without one. */
static void scraper_open(struct coord *c)
{
    const struct runner_config *cfg = c->run.cfg;
    char why[256];
    if (cfg->server_metrics.url &&
        scraper_new(&c->loop, &cfg->server_metrics, &c->scraper, why, sizeof(why)))
        ts_warn("%s; going on without server metrics", why);
}

/* After before_start (the MPI barrier), time 0: a little ahead, so every
 * worker is running when it comes; the run id, the end of sending, the
 * scraper's start and the .hlog header follow from it. */
static void set_time_zero(struct coord *c, struct runner_result *out)
{
    const struct runner_config *cfg = c->run.cfg;
    struct runner *run = &c->run;
    if (cfg->before_start) {
        cfg->before_start(cfg->before_start_arg);
        uv_update_time(&c->loop); /* it may have waited: timers count from now */
    }
    out->started_wall_ns = ts_wall_ns();
    run->start_ns = ts_now_ns() + 20 * TS_NS_PER_MS;
    run->warmup_end_ns = run->start_ns + cfg->warmup_ns;
    run->run_id =
        cfg->run_id ? cfg->run_id : splitmix64_next(&(uint64_t){ts_wall_ns() ^ run->start_ns});
    live_metrics_set_run_id(&c->live, run->run_id);
    run->end_send_ns =
        cfg->duration_ns ? run->start_ns + cfg->warmup_ns + cfg->duration_ns : UINT64_MAX;
    c->last_tick_ns = run->start_ns;
    if (c->scraper)
        scraper_start(c->scraper, run->start_ns);
    if (cfg->hlog) {
        hlog_writer_init(&c->hlog, cfg->hlog, HLOG_RATIO_US_TO_MS);
        /* interval starts are seconds from the schedule's time 0, which is
         * 20 ms after started_wall_ns: that instant is the log's BaseTime */
        double base = (double)(out->started_wall_ns + 20 * TS_NS_PER_MS) / 1e9;
        if (hlog_write_header(&c->hlog, "tokenstorm run: latencies in microseconds",
                              (double)out->started_wall_ns / 1e9, base))
            ts_warn("latency.hlog: write failed");
    }
}

/* Ends a run that failed once workers may be running: sending stops, the
 * started workers cut what is in flight, and the ones never started count
 * as done, so the loop ends as soon as the started ones are. */
static void workers_abort(struct coord *c)
{
    struct runner *run = &c->run;
    atomic_store(&run->stop, true);
    broadcast(c, WCMD_CUT);
    atomic_fetch_add(&run->workers_done, run->nworkers - c->started);
    (void)uv_async_send(&run->worker_event); /* 0 started: nobody else will */
}

/* Starts the worker threads; if one cannot start, the run is aborted (the
 * loop still runs, to end the ones that did). */
static int workers_start(struct coord *c, char *err, size_t errlen)
{
    for (; c->started < c->run.nworkers; c->started++) {
        struct worker *w = &c->run.workers[c->started];
        int rc = pthread_create(&w->thread, NULL, worker_main, w);
        if (rc) {
            ts_errf(err, errlen, "cannot start worker thread: %s", strerror(rc));
            workers_abort(c);
            return -rc;
        }
        w->thread_started = true;
    }
    return 0;
}

/* Runs the coordinator's loop (the tick, the workers' events, the end)
 * until every worker is done, and joins the threads. rc: the run's error
 * so far, returned, or the tick's if it cannot start. */
static int coord_run(struct coord *c, int rc, char *err, size_t errlen)
{
    int trc = uv_timer_start(&c->tick, on_tick, 1000, 1000);
    if (trc && !rc) {
        rc = loop_fail(err, errlen, "timer", trc);
        workers_abort(c);
    }
    uv_run(&c->loop, UV_RUN_DEFAULT);
    stop_async = NULL;
    for (uint32_t i = 0; i < c->started; i++) {
        int jrc = pthread_join(c->run.workers[i].thread, NULL);
        if (jrc)
            ts_warn("runner: worker %u: join: %s", i, strerror(jrc));
    }
    return rc;
}

/* With the threads ended: the spans flushed (a bounded wait), the
 * measurements and notes the workers still held, the last interval, and
 * when the run ended (c->end_ns). */
static void collect_last(struct coord *c)
{
    reqtrace_run_finish(&c->run.trace, &c->otlp_stats, &c->otlp_on);
    for (uint32_t i = 0; i < c->run.nworkers; i++) {
        struct worker *w = &c->run.workers[i];
        struct run_stats *held[] = {w->mailbox, w->active};
        for (size_t k = 0; k < 2; k++) {
            if (!held[k])
                continue;
            if (run_stats_merge(c->interval, held[k]) || run_stats_merge(c->total, held[k]))
                ts_warn("runner: out of memory merging measurements");
            run_stats_reset(held[k]);
        }
        take_notes(c, &w->mail_notes);
        take_notes(c, &w->notes);
    }
    feed_notes(c);
    uint64_t end = c->last_end_ns ? c->last_end_ns : ts_now_ns();
    if (c->pending_close)
        close_interval(c, c->pending_close);
    if (end > c->last_tick_ns + 50 * TS_NS_PER_MS || c->interval->requests)
        close_interval(c, end > c->last_tick_ns ? end : c->last_tick_ns + 1);
    c->end_ns = end;
    c->live.sent = total_sent(c);
    c->live.in_flight = 0;
}

/* --metrics-listen keeps serving its linger (not after a failure or a
 * stop); the loop runs until that is over and the last handles closed.
 * Then the server's timeline, kept only when the run succeeded. */
static void wind_down(struct coord *c, int rc, struct runner_result *out)
{
    const struct runner_config *cfg = c->run.cfg;
    if (cfg->metrics.on_end && c->metrics.inited)
        cfg->metrics.on_end(cfg->tick_arg);
    live_metrics_server_linger(&c->metrics,
                               rc || c->interrupted ? 0 : cfg->metrics.linger_ns / TS_NS_PER_MS,
                               cfg->handle_signals);
    uv_run(&c->loop, UV_RUN_DEFAULT); /* the linger, if any, and the last close callbacks */
    if (c->scraper) {
        scraper_take(c->scraper, &out->server);
        if (rc)
            scrape_summary_release(&out->server); /* nothing in *out after a failure */
    }
}

/* Moves the run's results from c into *out; 0, or -ENOMEM with a message
 * (and nothing in *out). */
static int hand_out(struct coord *c, struct runner_result *out, char *err, size_t errlen)
{
    const struct runner *run = &c->run;
    out->total = c->total;
    c->total = NULL;
    out->timeline = c->timeline;
    c->timeline = NULL;
    out->ntimeline = c->ntimeline;
    out->sent = total_sent(c);
    out->users_lost = atomic_load(&run->users_lost);
    if (out->users_lost)
        ts_warn("%" PRIu64 " closed-loop users stopped early: out of memory", out->users_lost);
    out->start_mono_ns = run->start_ns;
    out->run_id = run->run_id;
    out->duration_s =
        c->end_ns > run->warmup_end_ns ? (double)(c->end_ns - run->warmup_end_ns) / 1e9 : 0;
    out->peak_output_tps = c->peak_tps;
    out->send_end_s = send_end_s(c);
    out->interrupted = c->interrupted;
    out->stop_signal = c->interrupted ? c->stop_signal : 0;
    out->end_cut = c->end_cut || c->interrupted;
    out->dual_sla = c->dual_sla;
    out->consistency = c->consistency;
    c->consistency = NULL;
    out->otlp_enabled = c->otlp_on;
    out->otlp = c->otlp_stats;
    int rc = run->cfg->nclasses ? merge_classes(&c->run, out) : 0;
    for (size_t k = 0; !rc && k < out->nclasses; k++)
        out->classes[k].peak_output_tps = c->run.cls_peak_tps ? c->run.cls_peak_tps[k] : 0;
    if (rc) {
        ts_errf(err, errlen, "out of memory merging the classes' measurements");
        runner_result_release(out);
    }
    return rc;
}

/* The steps in order; the labels below undo what they set up, in reverse. */
int runner_run(const struct runner_config *cfg, struct runner_result *out, char *err, size_t errlen)
{
    struct coord *c;
    int rc;

    if ((rc = runner_config_check(cfg, err, errlen)))
        return rc;
    memset(out, 0, sizeof(*out));
    if (!(c = ts_calloc(1, sizeof(*c)))) {
        ts_errf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    if ((rc = coord_alloc(c, cfg, err, errlen)))
        goto out_free;
    if ((rc = workers_init(c, err, errlen)))
        goto out_workers;
    if ((rc = uv_loop_init(&c->loop))) {
        loop_fail(err, errlen, "event loop", rc);
        goto out_workers;
    }
    if ((cfg->metrics.host && (rc = metrics_start(c, err, errlen))) ||
        (rc = coord_open(c, err, errlen)))
        goto out_loop;
    stop_async = &c->stop;
    scraper_open(c);
    set_time_zero(c, out);
    rc = workers_start(c, err, errlen);
    rc = coord_run(c, rc, err, errlen);
    collect_last(c);
    wind_down(c, rc, out);
    if (!rc)
        rc = hand_out(c, out, err, errlen);
out_loop:
    coord_close_loop(c);
out_workers:
    for (uint32_t i = 0; i < c->inited; i++)
        worker_release(&c->run.workers[i]);
out_free:
    coord_free(c);
    return rc;
}

void runner_class_result_release(struct runner_class_result *r)
{
    run_stats_free(r->stats);
    for (uint32_t i = 0; r->steps && i < r->nsteps; i++)
        run_stats_free(r->steps[i]);
    ts_free(r->steps);
    hdr_free(r->iter_latency);
    ts_free(r->intent_sent);
    memset(r, 0, sizeof(*r));
}

void runner_result_release(struct runner_result *r)
{
    for (size_t k = 0; r->classes && k < r->nclasses; k++)
        runner_class_result_release(&r->classes[k]);
    ts_free(r->classes);
    scrape_summary_release(&r->server);
    consistency_free(r->consistency);
    run_stats_free(r->total);
    ts_free(r->timeline);
    memset(r, 0, sizeof(*r));
}

json_t *runner_timeline_json(const struct runner_point *pts, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        const struct runner_point *p = &pts[i];
        json_t *o =
            json_pack("{s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f}", "t_s", p->t_s,
                      "sent", (json_int_t)p->sent, "completed", (json_int_t)p->completed, "good",
                      (json_int_t)p->good, "errors", (json_int_t)p->errors, "in_flight",
                      (json_int_t)p->in_flight, "output_tokens", (json_int_t)p->output_tokens,
                      "chunks", (json_int_t)p->chunks, "ttft_p50_ms", p->ttft_p50_ms, "ttft_p99_ms",
                      p->ttft_p99_ms, "e2el_p50_ms", p->e2el_p50_ms, "lag_p99_ms", p->lag_p99_ms);
        if (!o || json_array_append_new(a, o)) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}
