/*
 * slo.h - thresholds for CI: the --slo expression grammar and its verdict.
 *
 * Grammar (blanks allowed between the parts; names are case-insensitive):
 *
 *   SLO    = METRIC [ "." STAT ] OP NUMBER [ UNIT ]
 *   METRIC = a latency metric (stat_metric_name(): ttft, ttft_uncorrected,
 *            ttfc, itl, tpot, tpot_incl_ttft, e2el, e2el_uncorrected, lag,
 *            dns, connect, tls, sent, ttfb, ttfa; and ttft_vllm), which
 *            needs a STAT. "ttft" judges what users feel, the first token
 *            with content, reasoning or a tool call (STAT_TTFC, also named
 *            "ttfc"); "ttft_vllm" is vLLM's first chunk with choices
 *            (STAT_TTFT, result.json's "ttft"),
 *          | a scalar: error_rate, goodput (= request_goodput),
 *            request_throughput (= throughput), output_throughput
 *            (= output_tps), total_token_throughput,
 *            max_output_tokens_per_s, requests, completed, failed, cut, good,
 *            total_input_tokens, total_output_tokens,
 *            answer quality: rouge_l, bleu4 (mean scores, 0..1), exact_match,
 *            json_valid, regex_match, dual_sla (attainment), consistency
 *            (a mean similarity, 0..1) (rates and scores are fractions; %
 *            allowed; scores print as scores: "0.412", rates as "41.200%"),
 *            what a chaos proxy sees (judged only by `tokenstorm chaos`, from
 *            its proxies' GET /chain; chaos/chain.h): amplification (upstream
 *            attempts per distinct request, a plain number), orphaned_tokens,
 *            orphaned_bytes (counts), orphaned_seconds (a plain number: the
 *            seconds upstream went on after clients left, summed)
 *            The aliases are the names `compare --fail-on` shows, so one
 *            vocabulary serves --slo, --fail-on, sweep and chaos hypotheses.
 *   STAT   = mean | avg | min | max | std | stddev | median | "p" PCT
 *            (PCT a decimal number in 0..100: p50, p99, p99.9, p99.99)
 *   OP     = "<" | "<=" | ">" | ">=" | "==" | "!="
 *   NUMBER = digits with an optional fraction and exponent (no sign)
 *   UNIT   = latencies: us (also µs, μs), ms, s; none means ms
 *            error_rate: % ; none means a fraction (0.003 = 0.3%)
 *            throughputs: /s, optional
 *            counts: none
 *
 * Examples: "ttft.p95<2100ms", "e2el.p99 <= 5s", "error_rate<0.3%",
 * "goodput>5/s", "output_throughput>=1000", "itl.mean<50ms", "completed>=100".
 *
 * Comparisons treat two values within a relative 1e-9 of each other as equal,
 * so "error_rate<=0.3%" holds for exactly 3 errors in 1000 despite binary
 * fractions.
 */
#ifndef TS_ANALYSIS_SLO_H
#define TS_ANALYSIS_SLO_H

#include <stdbool.h>
#include <stddef.h>

#include "analysis/summary.h"
#include "base/err.h"

#define SLO_EXPR_MAX 256 /* longest expression accepted, with its NUL */

enum slo_scalar {
    SLO_ERROR_RATE = 0,
    SLO_GOODPUT,
    SLO_REQUEST_THROUGHPUT,
    SLO_OUTPUT_THROUGHPUT,
    SLO_TOTAL_TOKEN_THROUGHPUT,
    SLO_MAX_OUTPUT_TOKENS_PER_S,
    SLO_REQUESTS,
    SLO_COMPLETED,
    SLO_FAILED,
    SLO_CUT,
    SLO_GOOD,
    SLO_TOTAL_INPUT_TOKENS,
    SLO_TOTAL_OUTPUT_TOKENS,
    SLO_ROUGE_L,          /* mean ROUGE-L F of scored answers, 0..1 */
    SLO_BLEU4,            /* mean BLEU-4, 0..1 */
    SLO_EXACT_MATCH,      /* share of exact matches, a rate */
    SLO_JSON_VALID,       /* share of valid JSON answers, a rate */
    SLO_REGEX_MATCH,      /* share of answers matching --quality-regex, a rate */
    SLO_DUAL_SLA,         /* windowed dual SLA attainment, a rate */
    SLO_CONSISTENCY,      /* mean pairwise similarity of repeated prompts' answers */
    SLO_AMPLIFICATION,    /* a proxy's attempts per distinct request (chaos only) */
    SLO_ORPHANED_TOKENS,  /* tokens upstream sent after clients left (chaos only) */
    SLO_ORPHANED_BYTES,   /* bytes, the same */
    SLO_ORPHANED_SECONDS, /* seconds upstream went on after clients left, summed */
    SLO_SCALAR_COUNT,
};

enum slo_stat {
    SLO_STAT_NONE = 0, /* scalars */
    SLO_STAT_MEAN,
    SLO_STAT_MIN,
    SLO_STAT_MAX,
    SLO_STAT_STD,
    SLO_STAT_PCT, /* slo.pct */
};

enum slo_op { SLO_LT, SLO_LE, SLO_GT, SLO_GE, SLO_EQ, SLO_NE };

/* How a value is expressed: the canonical unit of slo.value and actuals. */
enum slo_kind {
    SLO_KIND_LATENCY, /* milliseconds */
    SLO_KIND_RATE,    /* a fraction 0..1 */
    SLO_KIND_PER_S,   /* per second */
    SLO_KIND_COUNT,   /* a count */
    SLO_KIND_SCORE,   /* a score in 0..1 (ROUGE-L, BLEU-4, consistency); % allowed */
    SLO_KIND_NUMBER,  /* a plain number, no unit (amplification, seconds summed) */
};

/* What a run must be given for an SLO to have a value (slo_needs()). */
enum slo_needs {
    SLO_NEEDS_GOODPUT = 1 << 0,     /* goodput thresholds (goodput, good) */
    SLO_NEEDS_REFERENCE = 1 << 1,   /* reference answers (rouge_l, bleu4, exact_match) */
    SLO_NEEDS_REGEX = 1 << 2,       /* a quality regex (regex_match) */
    SLO_NEEDS_JSON = 1 << 3,        /* the JSON check (json_valid) */
    SLO_NEEDS_DUAL_SLA = 1 << 4,    /* the windowed dual SLA (dual_sla) */
    SLO_NEEDS_CONSISTENCY = 1 << 5, /* the consistency check (consistency) */
    SLO_NEEDS_PROXY = 1 << 7,       /* a chaos proxy's GET /chain (amplification, orphaned_*) */
    SLO_NEEDS_STREAM = 1 << 6,      /* streamed requests (ttft, ttft_uncorrected, ttfc, itl, tpot):
                                       a non-streamed answer arrives whole and has none of them */
};

struct slo {
    char expr[SLO_EXPR_MAX]; /* the expression as given */
    bool latency;            /* metric is an enum stat_metric, else an enum slo_scalar */
    int metric;
    enum slo_stat stat;
    double pct; /* for SLO_STAT_PCT */
    enum slo_op op;
    double value; /* in the canonical unit of kind */
    enum slo_kind kind;
};

/*
 * Parses expr into *out. Returns 0, or -EINVAL with a one-line message in err
 * (NUL-terminated, truncated to errlen) that names the column (1-based, in
 * bytes) where the expression went wrong and, for an unknown name, the
 * nearest known one:
 *   slo 'ttft.p95<<2s': expected a number at column 10
 *   slo 'tfft.p95<2s': unknown metric 'tfft' at column 1 (did you mean 'ttft'?)
 * err may be NULL when errlen is 0. *out is written only on success.
 */
TS_MUST_CHECK int slo_parse(const char *expr, struct slo *out, char *err, size_t errlen);

/*
 * Evaluates slo against sum: stores the actual value in *actual (canonical
 * unit; NAN when there is nothing to judge, e.g. a latency with no samples, or
 * a percentile other than the summary's fixed ones without sum->stats) and
 * returns true when the threshold holds. A NAN actual fails.
 */
bool slo_eval(const struct slo *slo, const struct run_summary *sum, double *actual);

/* Whether actual (in slo's canonical unit) meets slo; a NAN fails. */
bool slo_holds(const struct slo *slo, double actual);

/*
 * Formats v in slo's unit for people ("1834.21 ms", "0.300%", "5.20/s",
 * "100"; "n/a" for NAN) into buf; always NUL-terminates when n > 0; returns buf.
 */
char *slo_format_value(const struct slo *slo, double v, char *buf, size_t n);

/* The enum slo_needs flags slo's metric needs; 0 for what every run measures. */
unsigned slo_needs(const struct slo *slo);

/* The canonical name of slo's metric ("ttft", "request_throughput", ...); static. */
const char *slo_metric_name(const struct slo *slo);
/* The metric's name as the expression wrote it (an alias stays an alias:
 * "ttft" judges ttfc's samples but reads "ttft"), for messages; in buf
 * (at least 1 byte), returned. */
const char *slo_metric_written(const struct slo *slo, char *buf, size_t n);

/* "<", "<=", ...; static. */
const char *slo_op_name(enum slo_op op);

#endif
