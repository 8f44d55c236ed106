/*
 * compare.h - did NEW change against BASE, significantly, and is it a
 * regression? The statistics of `tokenstorm compare` (docs/COMPARE.md).
 *
 * Inputs. A struct compare_run is one run: its merged run_stats (histograms
 * and counters, as result_read_stats() rebuilds them), the measured duration,
 * the goodput thresholds it was recorded with, and optionally its per-request
 * values (from requests.jsonl). Nothing here reads files.
 *
 * Rows. A comparison has one row per metric: the latency metrics ttft, tpot,
 * itl, e2el at p50, p90, p99 and the mean, then throughput (completed / s),
 * output_throughput (output tokens / s), goodput (good / s) and error_rate,
 * plus any metric a --fail-on rule names that is not already there (e.g.
 * ttft.p95 or lag.p99). Each row has both point estimates, taken from the
 * histograms and counters exactly as the run's summary computes them, the
 * absolute and relative change, a confidence interval of the change and, for
 * latency rows, a Mann-Whitney U test of the two distributions.
 *
 * Confidence intervals: Poisson bootstrap. Each resample gives every
 * request of a run an independent weight drawn from Poisson(1) (instead of
 * the multinomial counts of the classic bootstrap: the same limit for
 * percentiles and means, and it also carries the count noise of a rate, so
 * throughput gets an honest interval), computes every statistic of both runs
 * on the weighted data (runs resampled independently, each from its own
 * rng_fork() stream of the seed), and takes the difference NEW - BASE. The
 * interval is the percentile interval of the differences at level
 * 1 - alpha (quantiles alpha/2 and 1 - alpha/2, linear interpolation between
 * order statistics). Percentiles of weighted data follow the histograms'
 * rule: nearest rank ceil(p/100 * total weight).
 *  - "requests" method: when both runs carry per-request values for the
 *    metric (ttft, ttfc, tpot, e2el, lag; the rates) and neither has more
 *    than COMPARE_EXACT_GROUPS distinct values of it: the units resampled
 *    are the requests. (Equal values are drawn together: the sum of c
 *    independent Poisson(1) weights is Poisson(c), so a resample costs one
 *    draw per distinct value, not per request; the rates likewise draw the
 *    completions by output token count, the failures and the good requests.)
 *  - "histogram" method otherwise (itl always: requests.jsonl has no single
 *    gaps): each non-empty bucket of count c gets weight Poisson(c), which is
 *    the Poisson bootstrap of the recorded values at the histogram's
 *    resolution (3 significant digits). Rates come from the counters:
 *    completed, good and failed as Poisson(count); output tokens scale with
 *    the resampled completions at the run's mean tokens per request (an
 *    approximation: the spread of tokens per request is not known).
 *
 * Mann-Whitney U: normal approximation with tie correction and a continuity
 * correction of 1/2 (scipy.stats.mannwhitneyu's "asymptotic" method):
 *   U_new = R_new - n_new (n_new + 1) / 2   (R_new: rank sum of NEW, ties
 *           averaged), the number of (base, new) pairs with new > base plus
 *           half the ties; scipy's U for x = BASE is n_base n_new - U_new.
 *   mu = n_base n_new / 2,
 *   sigma^2 = n_base n_new / 12 * ((N + 1) - sum(t^3 - t) / (N (N - 1))),
 *   z = sign(U - mu) max(|U - mu| - 1/2, 0) / sigma, p = erfc(|z| / sqrt 2).
 * Values are the requests' when the row's method is "requests", else the
 * histogram buckets (values in one bucket are ties).
 *
 * Significance (enum compare_test): by default a change is significant when
 * the confidence interval of the difference excludes 0. Rows without an
 * interval (no samples on one side) are never significant, and neither are
 * rows with too few samples for their statistic: the bootstrap cannot see
 * beyond the largest value it was given, so a percentile p needs at least
 * COMPARE_MIN_TAIL samples beyond it on each side, i.e. n >= MIN_TAIL /
 * (min(p, 100 - p) / 100): 10 for p50, 50 for p90, 500 for p99, 5000 for
 * p99.9; a mean needs MIN_TAIL samples. Such rows say few_samples.
 */
#ifndef TS_ANALYSIS_COMPARE_H
#define TS_ANALYSIS_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/stats.h"
#include "base/err.h"

#define COMPARE_MIN_TAIL 5

/* ---- metrics ---- */

enum compare_scalar {
    CMP_THROUGHPUT = 0,    /* completed requests / duration, 1/s */
    CMP_OUTPUT_THROUGHPUT, /* output tokens of completed requests / duration, tokens/s */
    CMP_GOODPUT,           /* good requests / duration, 1/s (n/a when goodput was off) */
    CMP_ERROR_RATE,        /* failed / (completed + failed), a fraction */
    CMP_RECALL,            /* mean recall@k of vector searches (stats.h recall), a fraction */
    CMP_RECALL_P5,         /* its 5th percentile */
    CMP_SCALAR_COUNT,
};

struct compare_metric {
    bool latency; /* metric is an enum stat_metric, else an enum compare_scalar */
    int metric;
    bool mean; /* latency: the mean; else the percentile pct */
    double pct;
};

/*
 * Parses a metric name: a latency metric (stat_metric_name()) with a stat
 * ".pNN" (0..100, at most 9 decimals, e.g. p95, p99.9, p99.9999),
 * ".median" (= p50), ".mean" or ".avg";
 * or a scalar: throughput (also request_throughput), output_throughput
 * (also output_tps), goodput (also request_goodput), error_rate. Case
 * insensitive; exactly len bytes of s. Returns 0 or -EINVAL.
 */
TS_MUST_CHECK int compare_metric_parse(const char *s, size_t len, struct compare_metric *out);
/*
 * "ttft.p99", "ttft.p99.9", "itl.mean", "throughput", ...; the percentile
 * with up to 9 decimals and no trailing zeros, so the name parses back to the
 * same metric. Returns buf.
 */
char *compare_metric_name(const struct compare_metric *m, char *buf, size_t n);
/* Latencies and the error rate: lower is better; rates: higher is better. */
bool compare_metric_lower_is_better(const struct compare_metric *m);
/* "ms", "req/s", "tok/s" or "" (error rate, a fraction); static. */
const char *compare_metric_unit(const struct compare_metric *m);
bool compare_metric_equal(const struct compare_metric *a, const struct compare_metric *b);

/* ---- regression rules (--fail-on) ---- */

#define COMPARE_RULE_EXPR_MAX 128

/*
 * RULE   = METRIC OP CHANGE          (blanks allowed between the parts)
 * METRIC = as compare_metric_parse()
 * OP     = ">" | ">=" | "<" | "<="
 * CHANGE = [+|-] NUMBER ( "%" | UNIT )
 *   "%": relative change (new - base) / base, e.g. +10%
 *   UNIT: an absolute change new - base in the metric's unit: latencies
 *   us, ms (the default when no unit is given) or s; rates "/s" or none;
 *   error_rate "pp" (percentage points) or none (a fraction).
 * Examples: "ttft.p95>+10%", "e2el.p99>=+50ms", "throughput<-5%",
 * "error_rate>+1pp", "itl.mean>+0.002s".
 * The rule holds (a regression) when the change compares true against the
 * threshold, and (unless significance is not required) the row's change is
 * significant.
 */
struct compare_rule {
    char expr[COMPARE_RULE_EXPR_MAX];
    struct compare_metric metric;
    bool greater;   /* '>' / '>=' (else '<' / '<=') */
    bool inclusive; /* '>=' / '<=' */
    bool relative;  /* threshold is a fraction of the base value */
    double threshold;
};

/*
 * Parses expr. Returns 0, or -EINVAL with a one-line message naming the
 * column in err (NUL-terminated; err may be NULL when errlen is 0).
 */
TS_MUST_CHECK int compare_rule_parse(const char *expr, struct compare_rule *out, char *err,
                                     size_t errlen);

/* ---- runs ---- */

enum compare_value { CMP_V_TTFT = 0, CMP_V_TTFC, CMP_V_TPOT, CMP_V_E2EL, CMP_V_LAG, CMP_V_COUNT };

enum compare_req_kind {
    CMP_REQ_OK = 0, /* outcome ok */
    CMP_REQ_ERROR,  /* counts in the error rate */
    CMP_REQ_OTHER,  /* cut: in neither */
};

/* One request of requests.jsonl (warm-up requests are left out by the loader). */
struct compare_req {
    double v[CMP_V_COUNT]; /* ms as in requests.jsonl; NAN when absent */
    uint32_t output_tokens;
    enum compare_req_kind kind;
};

/* The metric of stats.h each per-request value is, and back (-1 when none). */
enum stat_metric compare_value_metric(enum compare_value v);
int compare_metric_value(enum stat_metric m);

struct compare_run {
    const struct run_stats *stats;  /* required; borrowed */
    double duration_s;              /* measured duration (summary.duration) */
    struct goodput_cfg goodput;     /* thresholds of the run (zeros: goodput off) */
    const struct compare_req *reqs; /* borrowed; NULL: histograms only */
    size_t nreqs;
};

enum compare_test {
    CMP_TEST_CI = 0, /* the confidence interval of the difference excludes 0 (default) */
    CMP_TEST_MWU,    /* Mann-Whitney p < alpha (rates: the interval) */
    CMP_TEST_BOTH,   /* both (rates: the interval) */
    CMP_TEST_EITHER, /* either */
};

enum compare_method {
    CMP_METHOD_AUTO = 0, /* requests where both runs have them, else histograms */
    CMP_METHOD_HISTOGRAMS,
};

struct compare_cfg {
    uint32_t resamples; /* 0 means 2000; at most COMPARE_MAX_RESAMPLES */
    uint64_t seed;
    double alpha; /* 0 means 0.05; else in (0, 0.5] */
    enum compare_test test;
    enum compare_method method;
    bool no_significance; /* rules trigger on the change alone */
};

#define COMPARE_MAX_RESAMPLES 100000
/* Metrics with more distinct per-request values than this use the histograms. */
#define COMPARE_EXACT_GROUPS 20000

/* ---- results ---- */

struct compare_mwu {
    bool valid; /* both sides have samples */
    uint64_t n_base, n_new;
    double u;      /* U of NEW */
    double z, p;   /* normal approximation, continuity corrected; two-sided p */
    double effect; /* U / (n_base n_new): P(new > base) + P(tie) / 2 */
};

struct compare_row {
    struct compare_metric metric;
    char name[48];
    bool from_requests;     /* the interval resampled requests, else histograms/counters */
    double base, new_;      /* point estimates; NAN when a side has no samples */
    double change;          /* new - base */
    double rel_change;      /* change / base; +-INFINITY for base 0, 0 when both are 0 */
    double ci_lo, ci_hi;    /* interval of new - base; NAN when not computed */
    uint32_t resamples;     /* resamples where both sides had samples */
    struct compare_mwu mwu; /* latency rows; valid false otherwise */
    bool few_samples;       /* too few samples for the statistic: never significant */
    bool significant;
    int direction;   /* significant: +1 worse, -1 better; else 0 */
    bool regression; /* a rule holds on this row */
};

struct compare_result {
    struct compare_row *rows; /* owned */
    size_t nrows;
    bool *rule_hit;   /* per rule given: it holds; owned */
    size_t *rule_row; /* per rule: the row it judged; owned */
    size_t nrules;
    bool regression;    /* any rule holds */
    bool requests_used; /* both runs had per-request values (rates and eligible metrics) */
    double alpha;
    uint32_t resamples;
    uint64_t seed;
    enum compare_test test;
};

/*
 * Compares new_ against base: the rows described at the top, significance by
 * cfg->test, and the rules (may be NULL with nrules 0). Deterministic for a
 * given cfg->seed. Returns 0 and fills *out (compare_result_release() it),
 * -EINVAL (bad cfg, no stats), or -ENOMEM (nothing to release then).
 * Cost: resamples x (distinct values + histogram buckets) per run and metric.
 */
TS_MUST_CHECK int compare_runs(const struct compare_run *base, const struct compare_run *new_,
                               const struct compare_cfg *cfg, const struct compare_rule *rules,
                               size_t nrules, struct compare_result *out);
void compare_result_release(struct compare_result *r);

/*
 * Whether rule holds on row (see compare_rule). need_significance false
 * ignores the row's significance. A NAN change never holds.
 */
bool compare_rule_holds(const struct compare_rule *rule, const struct compare_row *row,
                        bool need_significance);

/* ---- building blocks, exposed for tests and other analyses ---- */

/* A value and how many samples have it; lists are strictly ascending by value. */
struct compare_group {
    double value;
    uint64_t count;
};

/* Mann-Whitney U of NEW (b) against BASE (a), as described at the top. */
void compare_mwu_groups(const struct compare_group *a, size_t na, const struct compare_group *b,
                        size_t nb, struct compare_mwu *out);

/*
 * The 1 - alpha percentile interval of n values (sorted in place; NANs are
 * dropped first). Returns the number of finite values used; *lo and *hi are
 * NAN when there are fewer than 2.
 */
size_t compare_percentile_interval(double *v, size_t n, double alpha, double *lo, double *hi);

#endif
