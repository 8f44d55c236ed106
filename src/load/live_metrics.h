/*
 * live_metrics.h - the live Prometheus view of a load run
 * (`tokenstorm run --metrics-listen HOST:PORT`, docs/OBSERVABILITY.md).
 *
 * Two parts:
 *  - struct live_metrics: what /metrics shows. The owner (the run's
 *    coordinator) points it at the merged measurements, updates the few
 *    counters that are not in them at each tick, and live_metrics_render()
 *    writes the exposition: the Prometheus text format 0.0.4, or OpenMetrics
 *    1.0 (`# EOF`, counter families without `_total`) when the scraper's
 *    Accept header asks for it (live_metrics_negotiate()).
 *  - struct live_metrics_server: an HTTP server (net/http_server.h) on the
 *    owner's libuv loop that answers GET /metrics by rendering on the loop
 *    thread. Nothing here locks: the owner must touch the live_metrics and
 *    the stats it points to only from that same loop thread.
 *
 * Names follow the OpenTelemetry GenAI client conventions mapped to
 * Prometheus (dots to underscores, unit `s` to the `_seconds` suffix, counters
 * with `_total`): gen_ai_client_operation_duration_seconds,
 * gen_ai_client_token_usage, gen_ai_client_operation_time_to_first_chunk_seconds,
 * gen_ai_client_operation_time_per_output_chunk_seconds, with the bucket
 * boundaries the conventions recommend; plus tokenstorm_* metrics. Labels are
 * the run's constants (operation, model, provider, server address and port)
 * and small fixed sets (outcome, token type, error type); never a prompt or a
 * request id.
 *
 * Histogram buckets are derived from the run's HDR histograms (microseconds):
 * a recorded HDR bucket counts towards `le=B` when its lowest equivalent value
 * is <= B. So a value equal to a boundary always lands in that boundary's
 * bucket, and values less than 0.1% above it (the HDR precision) may too.
 * _count is exact; _sum adds each HDR bucket's median equivalent value (exact
 * below 2.048 ms, within 0.1% above). Token usage and the durations of failed
 * requests come from the fixed buckets of struct run_stats and are exact.
 */
#ifndef TS_LOAD_LIVE_METRICS_H
#define TS_LOAD_LIVE_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "analysis/stats.h"
#include "base/buf.h"
#include "base/err.h"
#include "net/http_server.h"

#define LIVE_METRICS_TEXT_TYPE        "text/plain; version=0.0.4; charset=utf-8"
#define LIVE_METRICS_OPENMETRICS_TYPE "application/openmetrics-text; version=1.0.0; charset=utf-8"
/* An exposition larger than this fails with TS_TOOBIG (it is a few KiB). */
#define LIVE_METRICS_MAX_BYTES (1u << 20)

enum live_metrics_format {
    LIVE_METRICS_TEXT = 0,        /* Prometheus text format 0.0.4 */
    LIVE_METRICS_OPENMETRICS = 1, /* OpenMetrics 1.0.0 */
};

/* Who the run is: the constant labels. Strings are copied (and cut to fit). */
struct live_metrics_info {
    const char *model;    /* gen_ai_request_model; NULL = "" */
    const char *endpoint; /* "chat" (default), "completions" or "embeddings" */
    const char *url;      /* the target URL: server_address / server_port; NULL = none */
    const char *provider; /* gen_ai_provider_name; NULL = "openai" (the API's flavour) */
    const char *tenant;   /* NULL = "" */
    bool stream;          /* streamed requests: the chunk histograms are shown */
    bool goodput;         /* --goodput is set: tokenstorm_goodput_requests_total is shown */
};

struct live_metrics {
    /* identity, set by live_metrics_init() */
    char run_id[32];
    char model[256];
    char endpoint[16];
    const char *operation; /* gen_ai_operation_name: chat, text_completion, embeddings */
    char provider[64];
    char tenant[64];
    char server_address[256]; /* "" = unknown: server_address/server_port left out */
    char server_port[8];
    bool stream;
    bool goodput;

    /* the live state, written by the owner on the loop thread */
    const struct run_stats *stats; /* merged measurements so far, not owned; NULL = none yet */
    uint64_t sent;                 /* requests sent, warm-up included */
    uint64_t in_flight;            /* requests in flight */
    uint64_t scrapes;              /* /metrics answered (counted by the server) */
};

/*
 * Sets up lm from info (copied) with no measurements yet. Returns 0, or
 * -EINVAL for an unknown endpoint (lm is then unusable).
 */
TS_MUST_CHECK int live_metrics_init(struct live_metrics *lm, const struct live_metrics_info *info);
/* The run id label of tokenstorm_run_info: 16 hex digits. */
void live_metrics_set_run_id(struct live_metrics *lm, uint64_t run_id);

/*
 * Splits a target URL into server_address and server_port (the scheme's
 * default port when none is given; userinfo, brackets, path and query
 * dropped). Returns 0, or -EINVAL for something that is not
 * scheme://host[:port][/...] (the fields are then emptied).
 */
int live_metrics_parse_url(const char *url, char *host, size_t hostlen, char port[8]);

/*
 * The format a scraper asked for in its Accept header (NULL = none):
 * OpenMetrics when `application/openmetrics-text` (version 1.0.0, 0.0.1 or
 * none) has the highest q of the acceptable types, else the text format
 * (also when nothing offered is acceptable). Ties go to the earlier entry.
 */
enum live_metrics_format live_metrics_negotiate(const char *accept);

/* The Content-Type of a format. Static string. */
const char *live_metrics_content_type(enum live_metrics_format fmt);

/*
 * Appends the whole exposition of lm to out (whose max should be at least
 * LIVE_METRICS_MAX_BYTES). Returns 0, -ENOMEM or TS_TOOBIG (out may then
 * hold part of it).
 */
TS_MUST_CHECK int live_metrics_render(const struct live_metrics *lm, enum live_metrics_format fmt,
                                      struct buf *out);

/*
 * Upper bounds used for the exposition, in the unit recorded (microseconds
 * for latencies, tokens for token counts), as le label text. Exposed for
 * tests.
 */
struct live_bounds {
    const int64_t *bound; /* ascending */
    const char *const *le;
    size_t n;
};
extern const struct live_bounds live_bounds_genai_seconds; /* 0.01 s * 2^k, k = 0..13 */
extern const struct live_bounds live_bounds_genai_tokens;  /* 4^k, k = 0..13 */
extern const struct live_bounds live_bounds_lag_seconds;   /* 100 us .. 10 s */

/*
 * Derives the cumulative bucket counts of h for the bounds b (see the top
 * of this file): cum[i] = values <= b->bound[i], cum[b->n] = all values, and
 * *sum the sum of the values (median equivalents). cum has b->n + 1 slots.
 * h may be NULL (all zero).
 */
void live_bounds_from_hdr(const struct live_bounds *b, const struct hdr *h, uint64_t *cum,
                          double *sum);

/*
 * result.json keeps the fixed GenAI buckets of struct run_stats (stats.h)
 * too, so a result read back (result_read_stats) holds everything merged:
 *   "genai_buckets": {"input_tokens": [15 counts], "output_tokens": [15 counts],
 *                     "failed_duration": {"<outcome>": {"counts": [15 counts],
 *                                                       "sum_us": N}, ...}}
 * (outcomes with no request are left out). live_metrics_buckets_put() adds
 * that key to doc: 0 or -ENOMEM (doc may then hold part of it).
 * live_metrics_buckets_read() sets the fields of s from doc's key (a missing
 * key, as in older files, leaves them alone): 0, or TS_PARSE with a message
 * in err.
 */
TS_MUST_CHECK int live_metrics_buckets_put(json_t *doc, const struct run_stats *s);
TS_MUST_CHECK int live_metrics_buckets_read(const json_t *doc, struct run_stats *s, char *err,
                                            size_t errlen);

/* ---- the endpoint ---- */

struct live_metrics_server {
    struct http_server http;
    struct live_metrics *lm;
    uv_timer_t linger;
    uv_signal_t sigint, sigterm;
    bool inited, stopping;
    bool timer_open, signals_open; /* the linger's handles */
    /* Set by the owner after start (NULL: 404): takes the requests to paths
     * other than /metrics, with extra_arg as ctx, and must finish them. */
    http_request_cb extra;
    void *extra_arg;
};

/*
 * Starts serving lm on host:port (host an IP literal; port 0 = any free
 * port) on loop. Returns 0, or a negative code with a message in err:
 * -EINVAL (host not an IP literal), -ENOMEM, or the listen error
 * (-EADDRINUSE, ...). After any return the owner must end with
 * live_metrics_server_linger() (which is a no-op if the server never
 * started) and run the loop until it has nothing left, before
 * uv_loop_close(). lm must outlive that.
 */
TS_MUST_CHECK int live_metrics_server_start(struct live_metrics_server *s, uv_loop_t *loop,
                                            const char *host, int port, struct live_metrics *lm,
                                            char *err, size_t errlen);
/* The port bound, or 0. */
int live_metrics_server_port(const struct live_metrics_server *s);

/*
 * Keeps serving for linger_ms more (0: none), then shuts the server down
 * (connections closed, handles released while the loop runs). With
 * handle_signals, SIGINT or SIGTERM during the linger end it at once. Call
 * it once, then run the loop until it returns.
 */
void live_metrics_server_linger(struct live_metrics_server *s, uint64_t linger_ms,
                                bool handle_signals);

#endif
