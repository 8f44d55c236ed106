/*
 * scrape.h - the server's own metrics during a run: the target's Prometheus
 * endpoint (--server-metrics URL) scraped at an interval on the
 * coordinator's loop, reduced to a timeline the report draws next to the
 * client's view (result.json "server_timeline").
 *
 * Names understood (signal: names):
 *   running      vllm:num_requests_running, tgi_batch_current_size, sglang:num_running_reqs
 *   waiting      vllm:num_requests_waiting, tgi_queue_size, sglang:num_queue_reqs
 *   kv_usage     vllm:kv_cache_usage_perc, vllm:gpu_cache_usage_perc (older vLLM),
 *                sglang:token_usage (TGI has none)
 *   preemptions  vllm:num_preemptions_total
 *   ttft         histograms vllm:time_to_first_token_seconds,
 *                sglang:time_to_first_token_seconds (TGI has none)
 *   queue time   histograms vllm:request_queue_time_seconds, tgi_request_queue_duration
 * The simulator (tokenstorm sim) serves the vLLM names. Every series of a
 * signal is added up (several models or engines); kv_usage takes the
 * largest, and the newer vLLM name wins over the older. TGI's queue time
 * may also be a summary: its quantile="0.5" is then taken as it is.
 *
 * A point per successful scrape: gauges as read; preemptions, ttft and
 * queue-time percentiles over the requests the server counted since the
 * previous successful scrape (the difference of the two cumulative
 * histograms, interpolated within buckets as Prometheus' histogram_quantile
 * does; a counter that went down is taken as a server restart). A value the
 * server does not export, or that has no request behind it, is NaN (null in
 * JSON). t_s is the middle of the scrape's HTTP exchange, in seconds since
 * the schedule's time 0 -- the same axis as the run's own timeline.
 *
 * A scrape that fails (connection, status other than 200, a body over
 * SCRAPE_MAX_BODY, a parse error) is counted and skipped, never fatal. A
 * scrape still running when the next is due makes that one "skipped"; they
 * never overlap. Each scrape may take at most max(2 * interval, 2 s).
 * Scraping runs from time 0 until the run's last request ended. Messages and
 * result files show the URL without its user info and query (secrets).
 */
#ifndef TS_TELEMETRY_SCRAPE_H
#define TS_TELEMETRY_SCRAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "base/err.h"

#define SCRAPE_MAX_BODY        (16u << 20) /* bytes of one /metrics answer */
#define SCRAPE_MAX_POINTS      (1u << 20)  /* points kept; later ones are counted as dropped */
#define SCRAPE_MAX_BUCKETS     64          /* distinct histogram bounds kept per histogram */
#define SCRAPE_MIN_INTERVAL_NS (100ull * 1000 * 1000)

struct scrape_config {
    const char *url;      /* http(s)://host:port/metrics; NULL = no scraping */
    uint64_t interval_ns; /* 0 = 1 s; at least SCRAPE_MIN_INTERVAL_NS */
    bool insecure;        /* do not verify TLS certificates */
};

/* One scrape, reduced (see above for the meaning of each field). */
struct server_point {
    double t_s;
    double running;
    double waiting;
    double kv_usage;          /* 0..1 */
    double preemptions;       /* since the previous scrape */
    double preemptions_total; /* as the server counts them */
    double ttft_p50_ms;
    double ttft_p99_ms;
    double ttft_count; /* first tokens the server counted since the previous scrape */
    double queue_p50_ms;
};

/* What a run's scraping produced. */
struct scrape_summary {
    struct server_point *points; /* owned: scrape_summary_release() */
    size_t npoints;
    uint64_t scrapes;  /* attempted and ended (one abandoned at the end is not counted) */
    uint64_t failures; /* attempted and failed */
    uint64_t skipped;  /* not attempted: the previous one was still running */
    uint64_t dropped;  /* points over SCRAPE_MAX_POINTS */
    char flavor[16];   /* "vllm", "tgi", "sglang", or "" when nothing known was seen */
    char last_error[160];
};

void scrape_summary_release(struct scrape_summary *s);

/*
 * The "server_timeline" array of result.json: one object per point with the
 * keys of struct server_point (NaN and infinities as null). Returns a new reference or NULL
 * (out of memory).
 */
json_t *scrape_timeline_json(const struct scrape_summary *s);
/*
 * The "server_metrics" object: {url (without user info and query), interval_s,
 * flavor, scrapes, failures, skipped, dropped, last_error}. New reference or NULL.
 */
json_t *scrape_info_json(const struct scrape_summary *s, const struct scrape_config *cfg);

/*
 * The usual metrics URL of a target: its scheme, host and port with the
 * path /metrics (vLLM, TGI, SGLang and the simulator serve it there).
 * 0, or -EINVAL (not an http(s) URL) / TS_TOOBIG (out too small).
 */
TS_MUST_CHECK int scrape_url_from_target(const char *target_url, char *out, size_t n);

/* ---- the scraper on a loop ---- */

struct scraper;

/*
 * Creates a scraper on loop (its thread only). Call http_client_global_init()
 * first. Returns 0 and *out, -EINVAL (no URL, not http(s)://, interval too
 * short), -ENOMEM or a libuv/curl error with a message; on error the caller
 * releases nothing (the HTTP client, if it had started, closes itself the
 * next time the loop runs). Nothing is sent until scraper_start().
 */
TS_MUST_CHECK int scraper_new(uv_loop_t *loop, const struct scrape_config *cfg,
                              struct scraper **out, char *err, size_t errlen);
/* Scrapes at start_ns (monotonic, ts_now_ns; the timeline's time 0) and then
 * every interval, until scraper_close(). */
void scraper_start(struct scraper *s, uint64_t start_ns);
/*
 * Stops: the scrape in flight is abandoned (not counted as failed), the
 * timer and the HTTP client are closed. The loop must run for the handles
 * to close; after that (uv_run returned) call scraper_take and scraper_free.
 * Call once.
 */
void scraper_close(struct scraper *s);
/* Moves the results into *out (release it with scrape_summary_release). */
void scraper_take(struct scraper *s, struct scrape_summary *out);
/* Frees a scraper that was never started, or whose close has completed. NULL is a no-op. */
void scraper_free(struct scraper *s);

/* ---- the reduction, exposed for tests ---- */

struct scrape_hist {
    size_t n;                      /* distinct bounds seen */
    double le[SCRAPE_MAX_BUCKETS]; /* upper bounds (+Inf included), in seconds */
    double count[SCRAPE_MAX_BUCKETS];
    double q50; /* a summary's quantile="0.5" (seconds), NaN if none */
};

enum scrape_flavor {
    SCRAPE_UNKNOWN = 0,
    SCRAPE_VLLM,
    SCRAPE_TGI,
    SCRAPE_SGLANG,
};

/* The cumulative state of a server at one scrape. */
struct scrape_snap {
    enum scrape_flavor flavor; /* of the first known name seen */
    double running, waiting, kv_usage, kv_usage_old, preemptions_total; /* NaN = absent */
    struct scrape_hist ttft, queue;
};

/*
 * Reads a /metrics text into snap (which it resets first). Returns 0, or a
 * promparse_text() error with a message.
 */
TS_MUST_CHECK int scrape_snap_parse(struct scrape_snap *snap, const char *text, size_t len,
                                    char *err, size_t errlen);
/*
 * Reads one histogram, the series named `bucket` ("NAME_bucket"; every
 * series of it added up), from a /metrics text into h (reset first; h->n is
 * 0 when the text has none). Returns 0, or a promparse_text() error with a
 * message.
 */
TS_MUST_CHECK int scrape_hist_parse(struct scrape_hist *h, const char *bucket, const char *text,
                                    size_t len, char *err, size_t errlen);
/* One point from two successive snapshots (prev may be NULL: the first scrape). */
void scrape_point_compute(struct server_point *out, const struct scrape_snap *prev,
                          const struct scrape_snap *cur, double t_s);
/*
 * The q-quantile (0..1) of the observations between two cumulative
 * histograms (prev may be NULL = all of cur), in the histogram's unit, by
 * linear interpolation within the bucket; NaN if there are none. *count gets
 * the number of observations (may be NULL).
 */
double scrape_hist_quantile(const struct scrape_hist *prev, const struct scrape_hist *cur, double q,
                            double *count);

#endif
