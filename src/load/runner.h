/*
 * runner.h - the load engine: workers that send requests on a schedule (open
 * loop) or as users (closed loop), measure every stream, and a coordinator
 * that collects the measurements once a second.
 *
 * Threads. runner_run() runs on the caller's thread (the coordinator, with a
 * libuv loop of its own for the 1-second tick, signals and worker events)
 * and starts `workers` threads, each with its own libuv loop, HTTP client
 * (libcurl multi on libuv) and nanosecond timer. Requests are dealt to
 * workers deterministically: in the open loop, arrival i of the one global
 * schedule goes to worker i % workers; in the closed loop, user u lives on
 * worker u % workers. Measurements are recorded into the worker's own
 * struct run_stats (no locks on the hot path); once a second each worker
 * swaps it for an empty one on its own thread and posts the full one to the
 * coordinator, which merges it into the interval (timeline, .hlog) and the
 * total.
 *
 * Time. Every request has an intended send time: in the open loop the
 * schedule's, in the closed loop the moment its user became ready (after
 * its think time). Latencies are measured from it; the lag to the actual
 * send is a histogram of its own (see docs/METRICS.md). Requests whose
 * intended time falls in the warm-up window are sent but kept out of the
 * statistics.
 *
 * End. Sending stops when the duration is over, the request count is
 * reached, the open-loop schedule ends, or runner_stop() is called (SIGINT /
 * SIGTERM when handle_signals). Requests in flight are then waited for up to
 * `drain_ns` and cut after it (outcome "cut"); after a stop by signal they
 * are cut at once. Every request started appears in exactly one outcome.
 */
#ifndef TS_LOAD_RUNNER_H
#define TS_LOAD_RUNNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "analysis/quality.h"
#include "analysis/stats.h"
#include "load/cancel.h"
#include "base/asyncw.h"
#include "base/dist.h"
#include "base/hdr.h"
#include "llm/tokcount.h"
#include "base/err.h"
#include "workload/arrival.h"
#include "load/shard.h"
#include "load/reqtrace.h"
#include "telemetry/scrape.h"
#include "workload/workload.h"
#include "net/http_client.h"
#include "load/live_metrics.h"

#define RUNNER_MAX_WORKERS 64
#define RUNNER_MAX_USERS   1000000u
#define RUNNER_MAX_HEADERS 64

struct runner_progress;

/* --metrics-listen: a live Prometheus /metrics served from the coordinator's
 * loop while the run goes on (load/live_metrics.h). */
struct runner_metrics {
    const char *host;              /* an IP literal; NULL = no metrics endpoint */
    int port;                      /* 0 = any free port */
    uint64_t linger_ns;            /* keep serving this long after the last request */
    struct live_metrics_info info; /* the run's labels */
    /* Called on the coordinator's thread, with tick_arg, once listening. */
    void (*on_listen)(const char *host, int port, void *arg);
    /* The live dashboard (app/live_ui.h), or NULL: called on the
     * coordinator's thread, with tick_arg as ctx, for a request to any path
     * but /metrics; it must finish the request (http_server.h). */
    http_request_cb on_request;
    /* Called on the coordinator's thread, with tick_arg, when the run is
     * over (before the linger): the dashboard ends what it streams. */
    void (*on_end)(void *arg);
};

enum runner_mode {
    RUNNER_OPEN = 0,   /* requests arrive on a schedule */
    RUNNER_CLOSED = 1, /* N users, each sends, waits for the answer, thinks, sends again */
};

/* How the open-loop schedule is built (each worker builds the same one). */
struct runner_arrival {
    struct arrival_process process; /* constant, poisson, gamma:B */
    double rate;                    /* requests/s (start rate for a ramp) */
    double ramp_to;                 /* > 0: linear ramp from rate to ramp_to over ramp_ns */
    uint64_t ramp_ns;
    const char *stages; /* "30s:10,1m:50,30s:0" k6-like stages, or NULL */
    /* run --replay: recorded send times (ns from the start, ascending), or NULL */
    const uint64_t *times;
    size_t ntimes;
    double speed; /* times are divided by it (> 0) */
    bool loop;    /* the times repeat */
};

struct traffic;

/*
 * A traffic class of a scenario (scenario/traffic.h): its own arrivals or users,
 * its requests built by its struct traffic, its own statistics. When a
 * config has classes, the top-level workload, mode, arrival, users, think,
 * ramp_users_ns, max_concurrency and max_requests are not used: every
 * request comes from a class.
 */
struct runner_class {
    const char *name;
    const struct traffic *traffic; /* read-only, shared by the workers */
    enum runner_mode mode;
    struct runner_arrival arrival; /* open loop */
    const uint64_t *times;         /* open loop: explicit offsets (trace replay), or NULL */
    size_t ntimes;
    uint32_t users;           /* closed loop */
    const struct dist *think; /* closed loop, between a user's sessions; NULL = none */
    uint64_t ramp_users_ns;   /* closed loop */
    uint32_t max_concurrency; /* open loop: iterations in flight; 0 = none */
    uint64_t max_iterations;  /* 0 = none */
    struct goodput_cfg goodput;
};

/* One class's results: its requests, each flow step's, and its iterations. */
struct runner_class_result {
    struct run_stats *stats;  /* every request of the class (owned) */
    struct run_stats **steps; /* per flow step when the class has a flow, else NULL */
    uint32_t nsteps;
    uint64_t iterations;      /* ended (not warm-up) */
    uint64_t iter_outcome[3]; /* ok, degraded, failed */
    /* failed iterations by why (traffic_iteration_why), counted under
     * outcome REQ_OTHER and status 0: the reason a flow failed when each of
     * its HTTP calls may have succeeded */
    struct errtally iter_why;
    struct hdr *iter_latency; /* iteration time, intended start -> last response (us) */
    uint64_t sessions;        /* sessions started */
    /* What was actually sent (every request, warm-up included): */
    uint64_t *intent_sent; /* per intent of the class's prompt schema, or NULL */
    uint32_t nintents;
    uint64_t perturb_sent[16]; /* per item of the class's perturbation set */
    uint64_t sent, with_prefix, trimmed;
    /* the highest 1-second rate of the class's content chunks after the
     * warm-up (its own peak, as runner_result.peak_output_tps for all) */
    double peak_output_tps;
};

struct runner_config {
    const char *url; /* the full endpoint URL */
    /* ws:// URL of an OpenAI Realtime endpoint: the plain run's requests go
     * over WebSocket (one response.create per connection) instead of SSE;
     * NULL = SSE at url */
    const char *realtime_url;
    /* --transport auto: a request whose upgrade is refused (400, 404, 405,
     * 426, 501) is sent again as SSE to url, and so is every later request
     * of that worker; each is flagged REQF_FELL_BACK */
    bool realtime_fallback;
    /* --ws-frames: the realtime transport speaks this generic JSON-frames
     * format (llm/wsframes.h) at realtime_url instead of OpenAI's events */
    const struct wsframes_spec *wsframes;
    const char *const *headers;
    size_t n_headers;
    const struct workload *workload; /* read-only, shared by the workers */
    /* Vector search (workload endpoint WORKLOAD_VECTOR_SEARCH): the true
     * neighbours of each query vector (row i of the workload's vectors), so
     * every ok answer's "data"[].id gets its recall@k, k = min(the
     * workload's k, vector_truth->k). NULL: recall is not measured. */
    const struct ivecset *vector_truth;
    /* where an answer holds its hits and each hit its id (JSON pointers,
     * RFC 6901; template mode); NULL: "/data" and "/id" (the simulator's) */
    const char *vector_results, *vector_id;
    const struct runner_class *classes; /* a scenario's classes, or NULL */
    size_t nclasses;
    /* Per-thread token counters (tokenizer-backed) for generating requests;
     * NULL = the approximate counter. Called once per worker. */
    int (*make_tokcount)(void *arg, struct tokcount **out);
    void *tokcount_arg;

    enum runner_mode mode;
    struct runner_arrival arrival; /* RUNNER_OPEN */
    uint32_t users;                /* RUNNER_CLOSED */
    const struct dist *think;      /* RUNNER_CLOSED, seconds; NULL = none */
    uint64_t ramp_users_ns;        /* start users evenly over this long */
    uint32_t max_concurrency;      /* open loop: cap on requests in flight; 0 = none */

    uint64_t duration_ns;  /* sending window; 0 = until max_requests */
    uint64_t max_requests; /* 0 = no limit */
    uint64_t warmup_ns;
    uint64_t drain_ns; /* wait this long for in-flight requests at the end */
    /* --cancel: streams abandoned mid-way (load/cancel.h); NULL: none */
    const struct run_cancel *cancel;
    uint32_t workers; /* 1..RUNNER_MAX_WORKERS */
    uint64_t seed;

    struct http_client_config client;
    struct goodput_cfg goodput;

    const char *integrity_key; /* verify chained chunk signatures (llm/sign.h); NULL = off */
    /*
     * Answer quality: answers are kept (up to QUALITY_MAX_TEXT) and scored
     * when the request has a reference or a regex / JSON check is set.
     * A request is "quality-ok" when it meets quality.target, "latency-ok"
     * when it is ok and meets the goodput thresholds (if any); both feed the
     * windowed dual SLA; repeated identical prompts feed the consistency check.
     */
    struct {
        struct quality_cfg cfg;
        struct quality_target target;
        bool checks; /* a regex or JSON check is set: score every answer */
        bool dual_sla;
        struct dual_sla_cfg dual;
        bool consistency;
        struct consistency_cfg cons;
    } quality;
    struct asyncw *requests_out; /* NULL, or requests.jsonl: one line per request */
    bool chunk_times;            /* requests.jsonl lines carry chunk_us (--save-chunk-times) */
    FILE *hlog;                  /* NULL, or the interval log (the runner writes the header) */
    bool handle_signals;         /* SIGINT/SIGTERM stop the run */

    /* Scrape the target's Prometheus endpoint on the coordinator's loop
     * (telemetry/scrape.h); server_metrics.url NULL = off. */
    struct scrape_config server_metrics;
    /* Send only this process's share of the run (load/shard.h); {0, 0} = all. */
    struct shard shard;
    uint64_t run_id; /* 0 = a random one */
    /* Called on the coordinator's thread right before time 0 is set (the
     * workers are ready): an MPI barrier, so that ranks start together. */
    void (*before_start)(void *arg);
    void *before_start_arg;

    /* Called on the coordinator's thread once a second with the newest point. */
    void (*on_tick)(const struct runner_progress *p, void *arg);
    void *tick_arg;

    struct runner_metrics metrics;

    /* W3C trace context on every request; with trace.otlp, one OTLP span
     * per request (load/reqtrace.h). */
    struct reqtrace_config trace;
};

/* One second of the run, as the timeline and the progress display show it. */
struct runner_point {
    double t_s;    /* end of the interval, seconds since the start */
    uint64_t sent; /* requests sent in the interval */
    /* ended ok in the interval, warm-up requests included (the timeline is
     * what happened when: a warm-up request that ends after the warm-up is
     * work done in the measured window) */
    uint64_t completed;
    uint64_t good;          /* of those, within every goodput threshold (0 when goodput is off) */
    uint64_t errors;        /* ended with any other outcome but cut */
    uint64_t in_flight;     /* at the end of the interval */
    uint64_t output_tokens; /* tokens of the requests that ended in the interval (warm-up too) */
    uint64_t chunks;        /* content chunks received in the interval (live tokens) */
    /* the time to the first token users see (ttfc: content, reasoning or a
     * tool call; vLLM's TTFT when no request streamed content) of requests
     * that ended in the interval; 0 if none */
    double ttft_p50_ms;
    double ttft_p99_ms;
    double e2el_p50_ms;
    double lag_p99_ms;
};

struct runner_progress {
    double elapsed_s;
    double total_s; /* planned sending window, 0 if unknown */
    uint64_t sent, completed, errors, in_flight;
    const struct runner_point *last; /* the newest interval */
    double rate;                     /* completed/s over the last interval */
    double tokens_per_s;             /* content chunks received per second */
    bool draining;                   /* sending is over, waiting for in-flight requests */
    /* Everything so far, borrowed for the callback's duration (the
     * coordinator's thread owns it): the merged measurements (warm-up
     * excluded, as in the result) and the timeline. */
    const struct run_stats *total;
    const struct runner_point *timeline;
    size_t ntimeline;
};

/* The timeline as result.json has it ("timeline": one object a second). NULL: out of memory. */
json_t *runner_timeline_json(const struct runner_point *p, size_t n);

struct runner_result {
    struct run_stats *total;       /* owned: run_stats_free() */
    struct runner_point *timeline; /* owned: ts_free() */
    size_t ntimeline;
    uint64_t started_wall_ns;
    uint64_t start_mono_ns; /* time 0 of the schedule, monotonic (ts_now_ns) */
    uint64_t run_id;        /* in every request's X-Request-Id: ts-<run_id hex>-<index> */
    uint64_t sent;
    uint64_t users_lost;      /* closed-loop users that stopped early: out of memory */
    double duration_s;        /* from the end of warm-up to the end of the last request */
    double peak_output_tps;   /* highest 1-second rate of content chunks received */
    double send_end_s;        /* when sending ended, s since start_mono_ns (NAN: nothing sent) */
    bool interrupted;         /* stopped by runner_stop() / a signal */
    int stop_signal;          /* SIGINT or SIGTERM when handle_signals caught it, else 0 */
    bool end_cut;             /* requests were still in flight and were cut */
    struct dual_sla dual_sla; /* valid when the config asked for it */
    struct consistency *consistency;     /* owned; NULL unless asked for */
    struct scrape_summary server;        /* --server-metrics: the server's timeline */
    bool otlp_enabled;                   /* spans were exported (trace.otlp had an endpoint) */
    struct otlp_stats otlp;              /* what became of them, after the final flush */
    struct runner_class_result *classes; /* one per config class (owned), or NULL */
    size_t nclasses;
};

/* Checks a config; 0 or -EINVAL with a message. */
TS_MUST_CHECK int runner_config_check(const struct runner_config *cfg, char *err, size_t errlen);

/*
 * Runs the load to its end. Returns 0 and fills *out (release it with
 * runner_result_release) -- also when stopped by a signal, which sets
 * out->interrupted; or a negative code with a message in err when the run
 * could not be carried out (nothing in *out then). Whatever fails, it
 * returns with every thread it started joined and every handle it opened
 * closed: after a failure once workers run (a thread that cannot start, a
 * timer that cannot), the started workers' requests are cut first.
 */
TS_MUST_CHECK int runner_run(const struct runner_config *cfg, struct runner_result *out, char *err,
                             size_t errlen);

/* Asks the running run to stop (thread-safe, async-signal-safe). */
void runner_stop(void);

void runner_result_release(struct runner_result *r);
/* Frees what a class result owns and zeroes it. */
void runner_class_result_release(struct runner_class_result *r);
/* Adds src's measurements and counts to dst (the same class of another
 * worker or rank). 0, -EINVAL (different shapes), or -ENOMEM. */
TS_MUST_CHECK int runner_class_result_add(struct runner_class_result *dst,
                                          const struct runner_class_result *src);

#endif
