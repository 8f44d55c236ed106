/*
 * serve_proxy.c - the chaos proxy as a process (serve_proxy.h): its loop,
 * its signals, its start, its wait and its shutdown.
 */
#include "app/serve_proxy.h"

#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "base/err.h"
#include "base/log.h"
#include "net/http_client.h"
#include "net/stopsig.h"

struct proxy_main {
    struct proxy proxy;
    struct stopsig signals; /* closed when the proxy is */
    uint64_t grace_ms;
};

/* The proxy is closed: the signal watchers go too, and the loop runs dry. */
static void on_proxy_closed(struct proxy *p)
{
    struct proxy_main *m = (struct proxy_main *)((char *)p - offsetof(struct proxy_main, proxy));
    stopsig_close(&m->signals);
}

/* The first SIGINT or SIGTERM starts the graceful shutdown. */
static void on_stop(struct stopsig *s, int signum)
{
    struct proxy_main *m = s->data;
    ts_info("proxy: %s: finishing requests (grace %llu ms)",
            signum == SIGINT ? "SIGINT" : "SIGTERM", (unsigned long long)m->grace_ms);
    proxy_shutdown(&m->proxy, m->grace_ms, on_proxy_closed);
}

/* Runs loop until nothing is left on it (nobody calls uv_stop on it). */
static void run_loop(uv_loop_t *loop)
{
    if (uv_run(loop, UV_RUN_DEFAULT) != 0)
        ts_warn("proxy: event loop stopped with handles active");
}

/*
 * Gets an initialised proxy serving: the signal watchers, the start
 * faults, the listeners. Returns 0, or the exit code with the message
 * printed (the proxy must then be shut down).
 */
static int start(struct proxy_main *m, const struct serve_proxy_opts *o)
{
    char err[1024];
    int rc = stopsig_start(&m->signals, m->proxy.loop, on_stop, m);
    if (rc) {
        fprintf(stderr, "tokenstorm proxy: cannot watch SIGINT/SIGTERM: %s\n", uv_strerror(rc));
        return TS_EXIT_FAIL;
    }
    if (o->faults && proxy_add_faults(&m->proxy, o->faults, err, sizeof err) != 0) {
        fprintf(stderr, "tokenstorm proxy: %s: %s\n", o->faults_path, err);
        return TS_EXIT_USAGE;
    }
    if (proxy_listen(&m->proxy, err, sizeof err) != 0) {
        fprintf(stderr, "tokenstorm proxy: %s\n", err);
        return TS_EXIT_FAIL;
    }
    return 0;
}

/* "[" and "]" around an IPv6 host in a URL, nothing around others. */
static const char *bracket(const char *host, int open)
{
    return strchr(host, ':') ? (open ? "[" : "]") : "";
}

/* The bound URLs, the faults and the seed, on stdout at once (a parent may wait for them). */
static void print_started(const struct proxy_main *m, const struct proxy_config *cfg)
{
    const char *host = cfg->listen_host, *api_host = cfg->api_host;
    char thr[48] = "";
    if (m->proxy.n_workers > 1)
        snprintf(thr, sizeof thr, " (%d loop threads)", m->proxy.n_workers);
    printf("tokenstorm proxy: listening on http://%s%s%s:%d -> %s%s\n", bracket(host, 1), host,
           bracket(host, 0), proxy_port(&m->proxy), m->proxy.upstream, thr);
    if (cfg->api)
        printf("tokenstorm proxy: control API on http://%s%s%s:%d\n", bracket(api_host, 1),
               api_host, bracket(api_host, 0), proxy_api_port(&m->proxy));
    printf("tokenstorm proxy: %zu fault(s) loaded, seed %" PRIu64 "\n", m->proxy.faults.n,
           cfg->seed);
    const char *why = "";
    if (proxy_io_uring(&m->proxy, &why))
        printf("tokenstorm proxy: sends to clients through io_uring\n");
    else
        printf("tokenstorm proxy: sends to clients with write(2): io_uring off (%s)\n", why);
    fflush(stdout);
}

/*
 * The proxy on loop, from proxy_init until its shutdown (a signal's, or
 * ours after a failed start) has closed everything: the loop is empty on
 * return. Returns the exit code.
 */
static int serve(struct proxy_main *m, uv_loop_t *loop, const struct proxy_config *cfg,
                 const struct serve_proxy_opts *o)
{
    char err[1024];
    int code;
    if (proxy_init(&m->proxy, loop, cfg, err, sizeof err)) {
        fprintf(stderr, "tokenstorm proxy: %s\n", err);
        run_loop(loop); /* the handles a failed init leaves closing */
        return TS_EXIT_USAGE;
    }
    code = start(m, o);
    if (code)
        proxy_shutdown(&m->proxy, 0, on_proxy_closed);
    else if (!o->quiet)
        print_started(m, cfg);
    run_loop(loop);
    if (!code && !o->quiet)
        printf("tokenstorm proxy: stopped: %llu requests, %llu upstream errors\n",
               (unsigned long long)m->proxy.requests_total,
               (unsigned long long)m->proxy.upstream_errors);
    return code;
}

/* Flushes and closes the exporter (NULL: none); its counters on stdout when asked. */
static void exporter_close(struct otlp_exporter *e, bool print)
{
    struct otlp_stats st;
    char line[256];
    if (!e)
        return;
    otlp_exporter_close(e, &st);
    if (print) {
        otlp_stats_format(&st, line, sizeof line);
        printf("tokenstorm proxy: %s\n", line);
    }
}

int serve_proxy(const struct serve_proxy_opts *o)
{
    struct proxy_config cfg = o->cfg;
    struct proxy_main m = {.grace_ms = o->grace_ms};
    uv_loop_t loop;
    bool print_spans = false;
    char err[1024];
    int code = TS_EXIT_FAIL;

    cfg.otlp = NULL;
    if (http_client_global_init()) {
        fprintf(stderr, "tokenstorm proxy: cannot initialise libcurl\n");
        goto out;
    }
    if (o->otlp && o->otlp->endpoint &&
        otlp_exporter_new(o->otlp, &cfg.otlp, err, sizeof err) != 0) {
        fprintf(stderr, "tokenstorm proxy: OTLP exporter: %s\n", err);
        goto out_curl;
    }
    if (uv_loop_init(&loop)) {
        fprintf(stderr, "tokenstorm proxy: cannot create the event loop\n");
        goto out_exporter;
    }
    code = serve(&m, &loop, &cfg, o);
    if (uv_loop_close(&loop))
        ts_warn("proxy: event loop closed with handles open");
    print_spans = !o->quiet;
out_exporter:
    exporter_close(cfg.otlp, print_spans); /* after the loop: no request pushes any more */
out_curl:
    http_client_global_cleanup();
out:
    return code;
}
