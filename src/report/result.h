/*
 * result.h - the files a run leaves behind: result.json (the whole run in one
 * versioned document) and requests.jsonl (one line per request).
 *
 * result.json, schema "tokenstorm.result/1" (docs/METRICS.md lists every key):
 *   schema, tool {name, version},
 *   run        the caller's configuration echo, plus started_at (RFC 3339
 *              UTC), duration_s, warmup_s, end_mode ("waited" | "cut"),
 *              interrupted, interrupted_by, command_line (redacted), host,
 *   summary    vLLM's benchmark_serving keys (completed, failed, duration,
 *              request_throughput, request_goodput, output_throughput,
 *              total_token_throughput, max_output_tokens_per_s,
 *              total_input_tokens, total_output_tokens, mean_/median_/std_/
 *              p50_/p90_/p95_/p99_/p99.9_{ttft,tpot,itl,e2el}_ms) plus ours
 *              (requests, cut, good, error_rate, token_method, ttfc and lag),
 *   latency    {metric: {count, mean, std, min, p50, p90, p95, p99, p99.9,
 *              max}} in ms for every metric of stats.h,
 *   outcomes, http_status, streams, tokens, warmup: the counters,
 *   slo        [{expr, actual, pass}] (actual null when there was nothing to judge),
 *   errors     failed requests by outcome, status and message (analysis/errtally.h),
 *   timeline   the caller's per-second points,
 *   server_timeline, server_metrics  (only with --server-metrics) the
 *              target's own metrics scraped during the run (telemetry/scrape.h),
 *   histograms {metric: base64 of the HdrHistogram V2 encoding, in microseconds}.
 *
 * The histograms and counters are enough to rebuild the run_stats exactly
 * (result_read_stats), so results of several processes merge without loss.
 *
 * Secrets: the configuration echo is copied with every key named like a
 * credential (api_key, apikey, api-key, x-api-key, authorization,
 * proxy-authorization, password, secret, token; any case, at any depth)
 * removed; callers should still not pass them in. The command line keeps its
 * shape with the secret parts replaced by RESULT_REDACTED: the value of an
 * option named like a credential (--api-key, --integrity-key, --api-token,
 * any --*-key, --*-token, --*-secret, --*-password; abbreviations resolved
 * with the command's getopt table), the value of a --header whose name is
 * credential-like (result_secret_header()), keys named like credentials
 * inside --body, and the password and credential-named query values of any
 * URL. Last, every string in "run" has each of info->secrets replaced.
 */
#ifndef TS_REPORT_RESULT_H
#define TS_REPORT_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "analysis/slo.h"
#include "analysis/stats.h"
#include "analysis/summary.h"
#include "base/buf.h"
#include "base/err.h"
#include "analysis/record.h"

#define RESULT_SCHEMA   "tokenstorm.result/1"
#define RESULT_REDACTED "<redacted>"
/* info->secrets shorter than this are not searched for (they would match anything) */
#define RESULT_SECRET_MIN 4

/* Appends the query of a URL (q..end, after the '?') to b with the values
 * of credential-named parameters (result_secret_header(), and "sig")
 * replaced by RESULT_REDACTED. 0 or the buffer's error. */
int result_put_query(struct buf *b, const char *q, const char *end);

struct option;
struct host_info;

struct result_info {
    const char *tool_version; /* NULL: the build's TS_VERSION */
    const json_t *config;     /* object echoed under "run" (copied, secrets dropped); may be NULL */
    uint64_t started_wall_ns; /* ts_wall_ns() when the run started; 0 writes null */
    double warmup_s;
    bool end_cut;           /* in-flight requests at the end were cut, not waited for */
    const struct slo *slos; /* evaluated against the summary; may be NULL with nslos 0 */
    size_t nslos;
    const json_t *timeline; /* array of per-second points (copied); may be NULL */
    /* --server-metrics: array of scrape points and the scrape counts (copied);
     * both NULL = the sections are left out */
    const json_t *server_timeline;
    const json_t *server_metrics;
    /* answer quality (quality_stats_to_json), copied; NULL = left out */
    const json_t *quality;
    /* The command line, written redacted as run.command_line: argv[0] is the
     * command ("run"), recorded after "tokenstorm". argv NULL: left out.
     * options: the command's getopt_long table (NULL: names are matched
     * exactly, and unknown credential-like ones redacted). */
    int argc;
    char *const *argv;
    const struct option *options;
    /* Values that must not appear anywhere in "run" (the API key, secret
     * header values); may be NULL with nsecrets 0. */
    const char *const *secrets;
    size_t nsecrets;
    const char *interrupted_by;   /* NULL: not interrupted; else "SIGINT", "SIGTERM", "stop" */
    const struct host_info *host; /* the client machine, as run.host; NULL = left out */
};

/*
 * Whether a request header's name (len bytes) is credential-like, so its value
 * is never recorded: the names of the secret keys above, and any name that
 * contains auth, token, secret, passw, cookie, session, signature or
 * credential, or ends with key (any case).
 */
bool result_secret_header(const char *name, size_t len);

/*
 * Builds the result document of a run. stats is what sum was computed from
 * (counters and histograms). Returns 0 and a new reference in *out
 * (json_decref it), -ENOMEM, or -EINVAL (config or timeline of the wrong type).
 */
TS_MUST_CHECK int result_build(const struct run_stats *stats, const struct run_summary *sum,
                               const struct result_info *info, json_t **out);

/*
 * Writes doc to path (2-space indent, 12 significant digits), through a
 * temporary file renamed over path, so a reader never sees half a file.
 * Returns 0 or a negative errno with "path: reason" in err.
 */
TS_MUST_CHECK int result_write_file(const json_t *doc, const char *path, char *err, size_t errlen);

/*
 * Rebuilds run_stats from a result document (its "histograms" and counter
 * sections). Returns 0 and *out (run_stats_free it), TS_PARSE with a message
 * in err when the document is not a tokenstorm.result/1 or a section is
 * malformed, or -ENOMEM.
 */
TS_MUST_CHECK int result_read_stats(const json_t *doc, struct run_stats **out, char *err,
                                    size_t errlen);

#endif
