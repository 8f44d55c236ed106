/*
 * serve_sim.c - the simulator as a process (serve_sim.h): its loop, its
 * signals, its start, its wait and its shutdown.
 */
#include "app/serve_sim.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "base/err.h"
#include "base/log.h"
#include "net/stopsig.h"

struct sim_main {
    struct sim_server *server;
    struct stopsig signals; /* closed when the server is */
    uint64_t grace_ms;
};

/* The server is closed: the signal watchers go too, and the loop runs dry. */
static void on_server_closed(struct sim_server *s, void *arg)
{
    struct sim_main *m = arg;
    (void)s;
    stopsig_close(&m->signals);
}

/* The first SIGINT or SIGTERM starts the graceful shutdown. */
static void on_stop(struct stopsig *s, int signum)
{
    struct sim_main *m = s->data;
    ts_info("sim: %s: finishing streams (grace %llu ms)", signum == SIGINT ? "SIGINT" : "SIGTERM",
            (unsigned long long)m->grace_ms);
    sim_server_shutdown(m->server, m->grace_ms, on_server_closed, m);
}

/* Where it listens and what the profile holds, on stdout at once. */
static void print_started(const struct sim_main *m, const struct sim_server_config *cfg)
{
    const char *host = cfg->host;
    struct sim_profile_caps caps;
    if (sim_profile_derive(&cfg->profile, &caps) != 0)
        return;
    printf("tokenstorm sim: listening on http://%s%s%s:%d\n", strchr(host, ':') ? "[" : "", host,
           strchr(host, ':') ? "]" : "", sim_server_port(m->server));
    printf("  profile %s, model %s\n", cfg->profile.name, cfg->profile.model);
    printf("  KV cache %llu tokens (%llu blocks of %u), max_num_seqs %u, "
           "max_num_batched_tokens %u, max_model_len %u\n",
           (unsigned long long)caps.kv_tokens, (unsigned long long)caps.kv_blocks,
           cfg->profile.block_size, caps.max_seqs, cfg->profile.max_num_batched_tokens,
           cfg->profile.max_model_len);
    printf("  step >= %.3f ms, knee %.0f batch tokens, noise %s\n", caps.min_step_ms,
           caps.knee_tokens, cfg->profile.noise ? "on" : "off");
    fflush(stdout);
}

/*
 * The server on loop, from its start until its shutdown (a signal's, or
 * ours when the watchers fail) has closed everything; then frees it, with
 * its counters in *st. The loop is empty on return. Returns the exit code.
 */
static int serve(struct sim_main *m, uv_loop_t *loop, const struct sim_server_config *cfg,
                 struct sim_server_stats *st)
{
    char err[512];
    int code = TS_EXIT_OK;
    int rc = sim_server_start(loop, cfg, &m->server, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "tokenstorm sim: %s\n", err);
        return TS_EXIT_FAIL; /* nothing is left on the loop */
    }
    rc = stopsig_start(&m->signals, loop, on_stop, m);
    if (rc) {
        fprintf(stderr, "tokenstorm sim: cannot watch SIGINT/SIGTERM: %s\n", uv_strerror(rc));
        code = TS_EXIT_FAIL;
        sim_server_shutdown(m->server, 0, on_server_closed, m);
    } else if (!cfg->quiet) {
        print_started(m, cfg);
    }
    if (uv_run(loop, UV_RUN_DEFAULT) != 0) /* nobody calls uv_stop on it */
        ts_warn("sim: event loop stopped with handles active");
    sim_server_stats(m->server, st);
    sim_server_free(m->server);
    return code;
}

int serve_sim(const struct sim_server_config *cfg, uint64_t grace_ms)
{
    struct sim_main m = {.grace_ms = grace_ms};
    struct sim_server_stats st;
    uv_loop_t loop;
    int code;

    if (uv_loop_init(&loop)) {
        fprintf(stderr, "tokenstorm sim: cannot create the event loop\n");
        return TS_EXIT_FAIL;
    }
    code = serve(&m, &loop, cfg, &st);
    if (uv_loop_close(&loop))
        ts_warn("sim: event loop closed with handles open");
    if (code == TS_EXIT_OK && !cfg->quiet)
        printf("tokenstorm sim: stopped: %llu requests, %llu finished, %llu cancelled, "
               "%llu refused (429)\n",
               (unsigned long long)st.requests, (unsigned long long)st.finished,
               (unsigned long long)st.cancelled, (unsigned long long)st.rejected_429);
    return code;
}
