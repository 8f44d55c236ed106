/*
 * summary.h - the numbers a run is judged by, computed from merged run_stats.
 *
 * Names follow vLLM's benchmark_serving result keys where it has them
 * (completed, request_throughput, output_throughput, total_token_throughput,
 * request_goodput, max_output_tokens_per_s, total_input_tokens,
 * total_output_tokens, mean/median/std/pNN_{ttft,tpot,itl,e2el}_ms);
 * docs/METRICS.md states each definition and where it differs from vLLM.
 *
 * Latency figures (lat[]) are milliseconds (doubles) read from the
 * microsecond HDR histograms: percentiles are the highest value equivalent to
 * the bucket that holds the percentile (HdrHistogram semantics, within 0.1%
 * of the value). The vLLM-named figures (vllm[]) are computed as vLLM does,
 * with numpy over the exact samples (samples.h), whenever every sample was
 * kept; otherwise they are the HDR ones and vllm_loss[] says why. An empty
 * set gives count 0 and zeros everywhere (as vLLM reports an empty list).
 */
#ifndef TS_ANALYSIS_SUMMARY_H
#define TS_ANALYSIS_SUMMARY_H

#include <stdbool.h>
#include <stdint.h>

#include "analysis/stats.h"
#include "analysis/window.h"

/* The percentiles every latency summary carries, ascending. */
#define SUMMARY_NPCT 5
extern const double summary_percentiles[SUMMARY_NPCT]; /* 50, 90, 95, 99, 99.9 */

struct latency_summary {
    uint64_t count;
    double mean, std, min, max; /* ms; std is the population standard deviation */
    double pct[SUMMARY_NPCT];   /* ms at summary_percentiles[] */
};

struct run_summary {
    /* Borrowed from the caller of run_summary_compute(), for percentiles
     * other than the fixed ones (SLOs like ttft.p75); may be NULL. */
    const struct run_stats *stats;
    /* What the latency table counts, printed above it (report/text.h); NULL:
     * nothing said (every request of a plain run). Set by the caller. */
    const char *latency_scope;

    uint64_t requests;        /* started after warm-up (every outcome) */
    uint64_t completed;       /* outcome ok */
    uint64_t failed;          /* neither ok nor cut */
    uint64_t cut;             /* still running when the run ended and not waited for */
    uint64_t warmup_requests; /* excluded from everything else */
    uint64_t good;            /* ok and within every goodput threshold */
    double duration_s;        /* measured duration, warm-up excluded */

    /* vLLM's whole-run rates: over the duration, drain included (window.h);
     * run_summary_rps() and friends give the steady window's when it has one */
    double request_throughput;     /* completed / duration */
    double output_throughput;      /* total_output_tokens / duration */
    double total_token_throughput; /* (total_input_tokens + total_output_tokens) / duration */
    bool goodput_enabled;
    struct goodput_cfg goodput;     /* thresholds used (zeros when off) */
    double request_goodput;         /* good / duration (0 when off) */
    double error_rate;              /* failed / (completed + failed), a fraction */
    double max_output_tokens_per_s; /* peak 1-second bucket, from the caller */

    uint64_t total_input_tokens;  /* ok requests: usage prompt tokens, else intended */
    uint64_t total_output_tokens; /* ok requests */
    const char *token_method;     /* run_stats_token_method(), static */
    double tokens_per_chunk;      /* ok requests: output tokens / chunks with choices (0 if none) */

    /* Answer quality (NAN where not measured): means of scored answers,
     * shares of checks passed, the dual-SLA attainment and the consistency
     * similarity. run_summary_compute fills the first five from the stats;
     * the caller sets dual_sla and consistency from the runner's result. */
    struct {
        double rouge_l, bleu4, exact_match, json_valid, regex_match, dual_sla, consistency;
    } quality;
    struct latency_summary lat[STAT_METRIC_COUNT];
    /* For the stat_metric_exact() metrics: the figures vLLM computes (numpy
     * over run_stats.exact[m]) when vllm_loss[m] is SAMPLES_COMPLETE, else a
     * copy of lat[m]; for the other metrics a copy of lat[m]. Note vllm[itl]
     * covers ok requests only, lat[itl] every gap. */
    struct latency_summary vllm[STAT_METRIC_COUNT];
    enum samples_loss vllm_loss[STAT_METRIC_COUNT];
    uint64_t input_tokens_intended; /* vLLM's total_input_tokens: intended prompt lengths */
    /* The steady window's rates (run_summary_set_window); valid false until set. */
    struct run_window window;
};

/*
 * Fills *out from s. duration_s is the measured time after warm-up (<= 0
 * gives throughputs of 0); peak_output_tokens_per_s is the highest 1-second
 * bucket of output tokens from the caller's timeline; goodput (may be NULL)
 * is the configuration s was recorded with. out->stats points to s, which
 * must outlive the summary's use of percentiles beyond the fixed ones.
 */
void run_summary_compute(struct run_summary *out, const struct run_stats *s, double duration_s,
                         double peak_output_tokens_per_s, const struct goodput_cfg *goodput);

/*
 * A server that sends its role chunk before prefill (llama.cpp) gives vLLM's
 * TTFT (first chunk with choices) long before the first token a user sees
 * (ttfc). The two are said to differ when their medians are more than
 * SUMMARY_TTFT_GAP_MS apart; returns true then and sets *gap_ms (ttfc p50 -
 * ttft p50). false when either has no samples.
 */
#define SUMMARY_TTFT_GAP_MS 5.0
bool run_summary_ttft_differs(const struct run_summary *sum, double *gap_ms);

/*
 * Sets sum->window from the run's timeline (window.h), with the summary's
 * E2EL p50 as the ramp. Call after run_summary_compute.
 */
void run_summary_set_window(struct run_summary *sum, const json_t *timeline, double warmup_s,
                            double send_end_s);
/* The achieved rates users are told: the steady window's when it has one,
 * else the whole run's. */
double run_summary_rps(const struct run_summary *sum);
double run_summary_output_tps(const struct run_summary *sum);
double run_summary_goodput(const struct run_summary *sum);
/* "steady window" or "whole run": how the three above were measured. */
const char *run_summary_rate_method(const struct run_summary *sum);

/* Fills one latency summary (ms) from a microsecond histogram. */
void latency_summary_from_hdr(struct latency_summary *out, const struct hdr *h);
/* Fills one latency summary (ms) from exact samples, numpy's way (mean,
 * population std, linear percentiles; median = p50). Returns 0 or -ENOMEM
 * (out zeroed). */
TS_MUST_CHECK int latency_summary_from_samples(struct latency_summary *out,
                                               const struct samples *s);

/*
 * The value in ms at percentile p (0..100) of metric m: from the summary's
 * stats when it has them, else from the fixed percentiles when p is one of
 * them. Returns NAN when the metric has no samples or p is not available.
 */
double run_summary_percentile_ms(const struct run_summary *sum, enum stat_metric m, double p);

#endif
