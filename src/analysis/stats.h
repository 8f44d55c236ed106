/*
 * stats.h - what a load run measured, in a form that merges exactly.
 *
 * A struct run_stats holds one HDR histogram per latency metric and a set of
 * counters. Each worker thread owns one and feeds it from its own loop
 * (run_stats_add_record() when a request ends, run_stats_add_itl() for each
 * gap between chunks while a stream runs); the owner merges the workers' stats
 * with run_stats_merge() when they are quiescent. Nothing here locks, reads a
 * clock or allocates after run_stats_new(): the add functions are a few
 * histogram increments and counter additions.
 *
 * Units. Histograms record MICROSECONDS (1 us .. 1 h, 3 significant digits,
 * hdr_new_latency()); nanosecond inputs are rounded to the nearest
 * microsecond. Values above 1 h are clamped to 1 h (hdr.h counts them as
 * saturated).
 *
 * What goes where (docs/METRICS.md is the full definition):
 *  - Requests flagged REQF_WARMUP only count in warmup_requests / warmup_ok.
 *  - ttft, ttft_uncorrected, ttfc, tpot, tpot_incl_ttft, e2el,
 *    e2el_uncorrected: successful requests (outcome ok) only, as vLLM does.
 *    Latencies run from the intended send time; the *_uncorrected twins run
 *    from the actual start (what vLLM and closed-loop tools report).
 *  - itl: every gap reported by run_stats_add_itl().
 *  - lag and the connection phases: every request that measured them.
 *  - Tokens (input, output, per method): successful requests; output tokens of
 *    every request are also summed in output_tokens_all.
 *  - errors: failed requests (req_outcome_is_error) by their error text.
 *  - no_done, no_finish: requests whose flags say so; the exchange sets those
 *    flags only on streams that began (a 2xx event stream) and were not cut.
 */
#ifndef TS_ANALYSIS_STATS_H
#define TS_ANALYSIS_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "base/err.h"
#include "base/hdr.h"
#include "analysis/errtally.h"
#include "analysis/reqsample.h"
#include "analysis/record.h"
#include "analysis/samples.h"

enum stat_metric {
    STAT_TTFT = 0,         /* intended send -> first chunk with choices */
    STAT_TTFT_UNCORRECTED, /* actual start -> first chunk with choices (vLLM's TTFT) */
    STAT_TTFC,             /* intended send -> first chunk with content, reasoning or a tool call:
                * the first token a user sees (what --slo ttft and --goodput judge) */
    STAT_ITL,              /* gap between consecutive chunks with choices */
    STAT_TPOT,             /* (last chunk - first chunk) / (output tokens - 1) */
    STAT_TPOT_INCL_TTFT,   /* e2el / output tokens */
    STAT_E2EL,             /* intended send -> last chunk with choices (or end) */
    STAT_E2EL_UNCORRECTED, /* actual start -> last chunk with choices (or end) */
    STAT_LAG,              /* actual start - intended send */
    STAT_DNS,              /* name resolution (new connections) */
    STAT_CONNECT,          /* TCP handshake after DNS (new connections) */
    STAT_TLS,              /* TLS handshake after TCP (new TLS connections) */
    STAT_SENT,             /* actual start -> request fully sent */
    STAT_TTFB,             /* actual start -> first response byte */
    STAT_TTFA,             /* intended send -> first content after reasoning */
    STAT_METRIC_COUNT,
};

/* Stable lower-case name ("ttft", "ttft_uncorrected", ...), "unknown" out of range. */
const char *stat_metric_name(enum stat_metric m);
/* The metric whose name is the first len bytes of name, or -EINVAL. */
int stat_metric_from_name(const char *name, size_t len);

/* HTTP status classes counted in run_stats.http_class[]. */
enum http_class {
    HTTP_CLASS_NONE = 0, /* no status received */
    HTTP_CLASS_1XX,
    HTTP_CLASS_2XX,
    HTTP_CLASS_3XX,
    HTTP_CLASS_4XX,
    HTTP_CLASS_5XX,
    HTTP_CLASS_OTHER, /* outside 100..599 */
    HTTP_CLASS_COUNT,
};

/* "none", "1xx", ..., "5xx", "other". */
const char *http_class_name(enum http_class c);
enum http_class http_class_of(int status);

#define TOKEN_SOURCE_COUNT 3

/*
 * vLLM's --goodput: a request is good when it succeeded and each threshold
 * that is set (> 0) holds: ttft <= ttft_ms, tpot <= tpot_ms (tpot counts as 0
 * for outputs of one token), e2el <= e2el_ms. All thresholds 0 = goodput off.
 * TTFT and E2EL are measured from the intended send time; a non-streamed
 * request's TTFT is its E2EL (nothing is seen before the body).
 */
struct goodput_cfg {
    double ttft_ms;
    double tpot_ms;
    double e2el_ms;
};

/* true if any threshold of cfg (which may be NULL) is set. */
bool goodput_cfg_enabled(const struct goodput_cfg *cfg);
/* true if cfg (which may be NULL) has a TTFT or TPOT threshold: one that only
 * streamed requests can meet. */
bool goodput_cfg_needs_stream(const struct goodput_cfg *cfg);
/* True when rec is ok and within every threshold of cfg (vLLM's goodput rule;
 * with no threshold set, every ok request meets it). A request with no first
 * chunk (not streamed) has no TTFT or TPOT and fails a threshold on either. */
bool goodput_meets(const struct goodput_cfg *cfg, const struct req_record *rec);

/*
 * Inter-token latency by token position: gap k (between chunk k-1 and chunk
 * k of a stream) falls in bucket 0 for k < 16, else in bucket
 * floor(log2(k / 16)) + 1, so the buckets are 0-15, 16-31, 32-63, ...,
 * 2048+ (the last is open). These histograms keep 2 significant digits
 * (1% precision), which is plenty for a heatmap and keeps them small.
 */
#define ITL_POS_BUCKETS 9
/* The bucket of gap position k, and the first position of bucket b. */
unsigned itl_pos_bucket(uint64_t k);
uint64_t itl_pos_bucket_from(unsigned b);

/*
 * Fixed buckets, with the boundaries the OpenTelemetry GenAI conventions
 * recommend, for what the live /metrics (load/live_metrics.h) shows exactly
 * and the HDR histograms do not hold: the durations of requests that did not
 * end ok (gen_ai.client.operation.duration: 0.01 s * 2^k, k = 0..13, compared
 * in whole microseconds) and the tokens of each ok request
 * (gen_ai.client.token.usage: 4^k, k = 0..13). Slot i counts the values in
 * (bound[i-1], bound[i]]; slot GENAI_BUCKETS those above the last bound.
 */
#define GENAI_BUCKETS 14
unsigned genai_duration_bucket(uint64_t us);
unsigned genai_token_bucket(uint64_t tokens);

/*
 * Whether metric m also keeps exact samples (run_stats.exact[m]): ttft, ttfc,
 * tpot, itl, e2el and lag, the metrics whose vLLM-named summary fields
 * (mean_ttft_ms, p99_itl_ms, ...) are computed numpy's way.
 */
bool stat_metric_exact(enum stat_metric m);

#define STATS_LED_K_MAX 50 /* k of a retrieval step whose answers are kept by hits */

struct run_stats {
    struct hdr *hist[STAT_METRIC_COUNT]; /* microseconds, owned */
    /* Exact values in ns of the stat_metric_exact() metrics, each bounded at
     * SAMPLES_MAX (the others stay empty). They hold what the histogram of
     * the same metric holds, but for itl: vLLM's ITL list, the gaps of ok
     * requests only, taken from each record's chunk_ns when it ends (a record
     * without them marks the set not kept). */
    struct samples exact[STAT_METRIC_COUNT];
    struct hdr *itl_pos[ITL_POS_BUCKETS]; /* ITL by position, microseconds, owned */
    /* Set by the owner: run_stats_merge() into this one leaves exact empty
     * (the runner's one-second interval reads only the histograms, and
     * copying a second's exact values in, ~1 MB at 100,000+ events/s, held
     * up the workers sharing its core); kept by run_stats_reset(). */
    bool hist_only;

    uint64_t requests;                     /* records added (not warm-up) */
    uint64_t outcomes[REQ_OUTCOME_COUNT];  /* by outcome; sums to requests */
    uint64_t http_class[HTTP_CLASS_COUNT]; /* by status class; sums to requests */
    uint64_t good;                         /* ok and within every goodput threshold */
    uint64_t streams;                      /* REQF_STREAM requests */
    uint64_t no_done;                      /* REQF_NO_DONE */
    uint64_t no_finish;                    /* REQF_NO_FINISH */
    uint64_t id_changed;                   /* REQF_ID_CHANGED */
    uint64_t after_done;                   /* REQF_AFTER_DONE (realtime) */
    uint64_t out_of_order;                 /* REQF_OUT_OF_ORDER (realtime) */
    uint64_t bad_close;                    /* REQF_BAD_CLOSE (realtime) */
    uint64_t fell_back;                    /* REQF_FELL_BACK (realtime, --transport auto) */
    uint64_t usage_mismatch;               /* REQF_USAGE_MISMATCH */
    uint64_t reused_conn;                  /* REQF_REUSED_CONN */
    uint64_t warmup_requests;              /* REQF_WARMUP records (kept out of the rest) */
    uint64_t warmup_ok;
    /* Of the warm-up records: the good ones and every one's output tokens.
     * Only the timeline uses them: a warm-up request that ends after the
     * warm-up is still work done in the measured window (closed loops). */
    uint64_t warmup_good;
    uint64_t warmup_output_tokens;

    /* Successful requests only (as vLLM sums them). */
    uint64_t input_tokens;          /* usage prompt_tokens when given, else the intended count */
    uint64_t input_tokens_intended; /* the intended counts (vLLM's sum of prompt lengths) */
    uint64_t output_tokens;         /* req_record.output_tokens */
    uint64_t token_source[TOKEN_SOURCE_COUNT]; /* ok requests by the method of their count */
    uint64_t usage_input;                      /* ok requests whose input came from usage */
    uint64_t content_chunks;
    uint64_t choice_chunks;
    /* ok streams whose last event (a usage-only chunk) came after the last
     * chunk with choices, and the sum of those tails in microseconds: what
     * vLLM's chat benchmark adds to E2EL (and spreads over TPOT) */
    uint64_t usage_tail_n;
    uint64_t usage_tail_us;
    /* --integrity hmac: signed streams and what their chunks showed. */
    struct {
        uint64_t streams;  /* requests whose chunks were verified */
        uint64_t violated; /* of those, streams with any problem below */
        uint64_t ok, missing, duplicates, reorders, forged, unsigned_events;
    } integrity;
    /* Every request, whatever its outcome: tokens the service produced. */
    uint64_t output_tokens_all;
    /* GenAI fixed buckets (above): durations (actual start -> end) of requests
     * by outcome, every outcome but ok, and their sums in microseconds; input
     * [0] and output [1] tokens of ok requests. */
    uint64_t fail_duration[REQ_OUTCOME_COUNT][GENAI_BUCKETS + 1];
    uint64_t fail_duration_us[REQ_OUTCOME_COUNT];
    uint64_t token_usage[2][GENAI_BUCKETS + 1];
    /* Answer quality of ok requests that were scored (not warm-up). */
    struct quality_stats quality;
    /* Vector searches (run --endpoint vector-search): recall@k of each ok
     * answer (not warm-up), and k (the largest seen). */
    struct quality_dist recall;
    uint32_t recall_k;
    /* A flow's retrieval step (the stats of that step): the answers it led
     * to, i.e. the scored ok answers (not warm-up) of the flow's answer steps
     * in the iterations where it measured recall (run_stats_add_led). led
     * holds them all; by_hits[j] the searches that found j of k true
     * neighbours and the answers that followed them (k <= STATS_LED_K_MAX;
     * recall@k of larger k is only in recall). */
    struct quality_stats led;
    struct stats_led {
        uint64_t searches;   /* searches with j hits */
        uint64_t answers;    /* scored answers after them */
        uint64_t quality_ok; /* of those, quality-ok (quality_scores_pass) */
        uint64_t with_ref, exact;
        uint64_t rouge_fix, bleu_fix; /* sums of round(score * QUALITY_FIX), with_ref answers */
    } by_hits[STATS_LED_K_MAX + 1];
    /* Failed requests (neither ok nor cut) by outcome, status and error text. */
    struct errtally errors;
    /* A uniform sample of ok requests: sizes, TTFT and E2EL (reqsample.h). */
    struct reqsample sample;
};

/*
 * Allocates empty stats with one latency histogram per metric. Returns 0 and
 * sets *out (run_stats_free() it), or -ENOMEM (*out untouched). Memory: about
 * 184 KiB per histogram, 2.6 MiB in all.
 */
TS_MUST_CHECK int run_stats_new(struct run_stats **out);
/* Frees s and its histograms; NULL is a no-op. */
void run_stats_free(struct run_stats *s);
/* Forgets everything recorded; keeps the memory. */
void run_stats_reset(struct run_stats *s);
/* Marks every exact sample set not kept: for stats rebuilt from histograms
 * (result files, other processes), whose values are not all here. */
void run_stats_exact_not_kept(struct run_stats *s);
/*
 * Adds everything of src to dst (histograms, exact samples up to dst's
 * bound, and counters). Returns 0, or -EOVERFLOW if a histogram's total
 * count would overflow (dst is then partly merged). Merging is exact:
 * merging a and b equals recording both into one (for the samples, as a set).
 */
TS_MUST_CHECK int run_stats_merge(struct run_stats *dst, const struct run_stats *src);

/*
 * Accounts one finished request. cfg may be NULL (no goodput). Cheap: at most
 * 13 histogram increments and some counter additions, no allocation. Records
 * with REQF_WARMUP only count in warmup_requests / warmup_ok. Timestamps that
 * are 0 ("did not happen") or earlier than the point they are measured from
 * skip the metric that needs them.
 */
void run_stats_add_record(struct run_stats *s, const struct req_record *rec,
                          const struct goodput_cfg *cfg);

/*
 * Accounts one scored answer (q->have != 0) of a flow's answer step to the
 * stats of a retrieval step it followed, whose recall@k in that iteration
 * was recall (k hits of k: by_hits[round(recall * k)] when k <=
 * STATS_LED_K_MAX). quality_ok: the answer met the run's quality target.
 * Warm-up answers should not be passed. No allocation.
 */
void run_stats_add_led(struct run_stats *s, double recall, uint32_t k,
                       const struct quality_scores *q, bool quality_ok);

/*
 * The exact state of s's recall (recall, recall_k, by_hits, led), so that a
 * result file carries it through merging (result.json's
 * vector_search.state): {"k": K, "recall": quality_dist_state_json(),
 * "by_hits": [[j, searches, answers, quality_ok, with_ref, exact,
 * rouge_fix, bleu_fix], ...] (non-empty rows), "led":
 * quality_stats_state_json()}. New reference or NULL (out of memory).
 */
json_t *run_stats_recall_state_json(const struct run_stats *s);
/* Adds such a state to s (exactly as run_stats_merge would). Returns 0, or
 * -EINVAL (s unchanged) when o is not one. */
TS_MUST_CHECK int run_stats_recall_state_add(struct run_stats *s, const json_t *o);

/*
 * Records one inter-token gap (between two consecutive chunks with choices)
 * as it happens. Call it only for requests that are not warm-up; the first
 * chunk of a stream has no gap.
 */
void run_stats_add_itl(struct run_stats *s, uint64_t gap_ns);
/* Records one gap (also into the ITL histogram) at its position k >= 1. */
void run_stats_add_itl_at(struct run_stats *s, uint64_t k, uint64_t gap_ns);

/* Requests that failed: neither ok nor cut. */
uint64_t run_stats_failed(const struct run_stats *s);
/* failed / (ok + failed); 0 when there were none. */
double run_stats_error_rate(const struct run_stats *s);
/*
 * Whether no measured request ended ok, so the run did not show that the
 * service works: then writes why into why (NUL-terminated, truncated to n;
 * may be NULL when n is 0) and returns true. Otherwise returns false and
 * leaves why alone. The cases, in words a CI log can act on:
 *   no request was sent
 *   no request was measured: all 12 requests were sent during the warm-up (0 ok)
 *   no request succeeded: 120 of 120 failed, most as connect (120): Failed to
 *     connect to 127.0.0.1 port 9: Connection refused
 *   no request succeeded: all 8 requests were cut when the run ended (a longer
 *     --duration or --drain lets them finish)
 * The dominant outcome is the error outcome with the most requests (the
 * first in req_outcome order on a tie); its text is the most frequent message
 * the error tally (errors) holds for it, control characters shown as '?'.
 */
bool run_stats_none_ok(const struct run_stats *s, char *why, size_t n);

/*
 * How ok requests' output tokens were counted: "usage", "tokenizer",
 * "chunks", "mixed" (more than one method), or "none" (no ok request).
 */
const char *run_stats_token_method(const struct run_stats *s);

#endif
