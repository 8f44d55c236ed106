/*
 * summary.c - run_stats to headline numbers (see summary.h).
 */
#include "analysis/summary.h"

#include <math.h>
#include <string.h>

const double summary_percentiles[SUMMARY_NPCT] = {50.0, 90.0, 95.0, 99.0, 99.9};

void latency_summary_from_hdr(struct latency_summary *out, const struct hdr *h)
{
    int64_t v[SUMMARY_NPCT];

    memset(out, 0, sizeof(*out));
    out->count = (uint64_t)hdr_total_count(h);
    if (!out->count)
        return;
    out->mean = hdr_mean(h) / 1000.0;
    out->std = hdr_stddev(h) / 1000.0;
    out->min = (double)hdr_min(h) / 1000.0;
    out->max = (double)hdr_max(h) / 1000.0;
    if (hdr_values_at_percentiles(h, summary_percentiles, v, SUMMARY_NPCT) == 0) {
        for (int i = 0; i < SUMMARY_NPCT; i++)
            out->pct[i] = (double)v[i] / 1000.0;
    }
}

int latency_summary_from_samples(struct latency_summary *out, const struct samples *s)
{
    struct samples_stats st;

    memset(out, 0, sizeof(*out));
    int rc = samples_compute_ms(s, summary_percentiles, SUMMARY_NPCT, &st, out->pct);
    if (rc < 0) {
        memset(out, 0, sizeof(*out));
        return rc;
    }
    out->count = st.count;
    out->mean = st.mean;
    out->std = st.std;
    out->min = st.min;
    out->max = st.max;
    return 0;
}

/* vllm[m]: numpy over the samples when all were kept, else the HDR figures. */
static void vllm_figures(struct run_summary *out, const struct run_stats *s, enum stat_metric m)
{
    out->vllm[m] = out->lat[m];
    out->vllm_loss[m] = SAMPLES_COMPLETE;
    if (!stat_metric_exact(m))
        return;
    out->vllm_loss[m] = samples_loss(&s->exact[m]);
    if (out->vllm_loss[m] != SAMPLES_COMPLETE)
        return;
    if (latency_summary_from_samples(&out->vllm[m], &s->exact[m]) < 0) {
        out->vllm[m] = out->lat[m];
        out->vllm_loss[m] = SAMPLES_OVER_CAP; /* no memory for the sorted copy */
    }
}

void run_summary_compute(struct run_summary *out, const struct run_stats *s, double duration_s,
                         double peak_output_tokens_per_s, const struct goodput_cfg *goodput)
{
    memset(out, 0, sizeof(*out));
    out->stats = s;
    out->requests = s->requests;
    out->completed = s->outcomes[REQ_OK];
    out->failed = run_stats_failed(s);
    out->cut = s->outcomes[REQ_CUT];
    out->warmup_requests = s->warmup_requests;
    out->good = s->good;
    out->duration_s = duration_s > 0 ? duration_s : 0;
    const struct quality_stats *q = &s->quality;
    out->quality.rouge_l = q->rouge_l.count ? quality_dist_mean(&q->rouge_l) : NAN;
    out->quality.bleu4 = q->bleu4.count ? quality_dist_mean(&q->bleu4) : NAN;
    out->quality.exact_match = q->with_ref ? (double)q->exact / (double)q->with_ref : NAN;
    out->quality.json_valid =
        q->json_checked ? (double)q->json_valid / (double)q->json_checked : NAN;
    out->quality.regex_match =
        q->regex_checked ? (double)q->regex_matched / (double)q->regex_checked : NAN;
    out->quality.dual_sla = NAN;
    out->quality.consistency = NAN;
    out->total_input_tokens = s->input_tokens;
    out->total_output_tokens = s->output_tokens;
    out->goodput_enabled = goodput_cfg_enabled(goodput);
    if (out->goodput_enabled)
        out->goodput = *goodput;
    if (duration_s > 0) {
        out->request_throughput = (double)out->completed / duration_s;
        out->output_throughput = (double)s->output_tokens / duration_s;
        out->total_token_throughput = (double)(s->input_tokens + s->output_tokens) / duration_s;
        if (out->goodput_enabled)
            out->request_goodput = (double)s->good / duration_s;
    }
    out->error_rate = run_stats_error_rate(s);
    out->max_output_tokens_per_s = peak_output_tokens_per_s > 0 ? peak_output_tokens_per_s : 0;
    out->token_method = run_stats_token_method(s);
    if (s->choice_chunks)
        out->tokens_per_chunk = (double)s->output_tokens / (double)s->choice_chunks;
    out->input_tokens_intended = s->input_tokens_intended;
    for (int i = 0; i < STAT_METRIC_COUNT; i++) {
        latency_summary_from_hdr(&out->lat[i], s->hist[i]);
        vllm_figures(out, s, (enum stat_metric)i);
    }
}

bool run_summary_ttft_differs(const struct run_summary *sum, double *gap_ms)
{
    const struct latency_summary *t = &sum->lat[STAT_TTFT], *c = &sum->lat[STAT_TTFC];
    if (!t->count || !c->count)
        return false;
    double gap = c->pct[0] - t->pct[0];
    if (gap_ms)
        *gap_ms = gap;
    return fabs(gap) > SUMMARY_TTFT_GAP_MS;
}

double run_summary_percentile_ms(const struct run_summary *sum, enum stat_metric m, double p)
{
    if ((unsigned)m >= STAT_METRIC_COUNT || !(p >= 0 && p <= 100))
        return NAN;
    if (sum->stats) {
        const struct hdr *h = sum->stats->hist[m];
        if (!hdr_total_count(h))
            return NAN;
        return (double)hdr_value_at_percentile(h, p) / 1000.0;
    }
    if (!sum->lat[m].count)
        return NAN;
    for (int i = 0; i < SUMMARY_NPCT; i++) {
        if (summary_percentiles[i] == p)
            return sum->lat[m].pct[i];
    }
    return NAN;
}

void run_summary_set_window(struct run_summary *sum, const json_t *timeline, double warmup_s,
                            double send_end_s)
{
    double e2el_s = sum->lat[STAT_E2EL].count ? sum->lat[STAT_E2EL].pct[0] / 1000 : NAN;
    run_window_compute(timeline, warmup_s, send_end_s, e2el_s, &sum->window);
}

double run_summary_rps(const struct run_summary *sum)
{
    return sum->window.valid ? sum->window.request_throughput : sum->request_throughput;
}

double run_summary_output_tps(const struct run_summary *sum)
{
    return sum->window.valid ? sum->window.output_throughput : sum->output_throughput;
}

double run_summary_goodput(const struct run_summary *sum)
{
    return sum->window.valid ? sum->window.request_goodput : sum->request_goodput;
}

const char *run_summary_rate_method(const struct run_summary *sum)
{
    return sum->window.valid ? "steady window" : "whole run";
}
