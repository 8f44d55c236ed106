/*
 * text.c - the end-of-run summary for people (see text.h).
 */
#include "report/text.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

static const struct {
    enum stat_metric metric;
    const char *label;
} rows[] = {
    {STAT_TTFC, "first token"}, {STAT_TTFT, "TTFT (vLLM)"}, {STAT_TTFA, "first answer"},
    {STAT_ITL, "ITL"},          {STAT_TPOT, "TPOT"},        {STAT_E2EL, "E2EL"},
    {STAT_LAG, "lag"},
};

/* When vLLM's TTFT (first chunk with choices) and the first token a user sees
 * are apart, says so: SLOs, goodput and the sweep judge the first token. */
static void print_ttft_note(FILE *f, const struct run_summary *sum)
{
    double gap = 0;
    if (!run_summary_ttft_differs(sum, &gap))
        return;
    fprintf(f,
            "note          first token p50 %.2f ms is %.2f ms from vLLM's TTFT p50 %.2f ms "
            "(first chunk with choices; apart: over %.0f ms): --slo ttft, --goodput and sweep "
            "judge the first token (ttfc); ttft_vllm is vLLM's\n",
            sum->lat[STAT_TTFC].pct[0], gap, sum->lat[STAT_TTFT].pct[0], SUMMARY_TTFT_GAP_MS);
}

static void print_outcomes(FILE *f, const struct run_stats *s, const struct run_summary *sum)
{
    fprintf(f, "requests      %" PRIu64 " sent: %" PRIu64 " ok, %" PRIu64 " failed", sum->requests,
            sum->completed, sum->failed);
    if (sum->failed) {
        const char *sep = " (";
        for (int i = 0; i < REQ_OUTCOME_COUNT; i++) {
            if (!req_outcome_is_error((enum req_outcome)i) || !s->outcomes[i])
                continue;
            fprintf(f, "%s%s %" PRIu64, sep, req_outcome_name((enum req_outcome)i), s->outcomes[i]);
            sep = ", ";
        }
        fputc(')', f);
    }
    fprintf(f, ", %" PRIu64 " cut\n", sum->cut);
    if (sum->warmup_requests)
        fprintf(f, "warm-up       %" PRIu64 " requests excluded from everything below\n",
                sum->warmup_requests);
}

#define TEXT_TOP_ERRORS 5

/* The most frequent reasons for failure: count, outcome, status, message. */
static void print_errors(FILE *f, const struct run_stats *s)
{
    const struct errtally *t = &s->errors;
    size_t idx[TEXT_TOP_ERRORS];
    size_t n = errtally_top(t, idx, TEXT_TOP_ERRORS);
    uint64_t shown = 0;

    if (!n)
        return;
    fprintf(f, "errors        count  outcome          status  message\n");
    for (size_t i = 0; i < n; i++) {
        const struct errtally_entry *e = &t->e[idx[i]];
        char st[16] = "-";
        if (e->status)
            snprintf(st, sizeof(st), "%d", e->status);
        fprintf(f, "              %5" PRIu64 "  %-16s %-6s  %s\n", e->count,
                req_outcome_name(e->outcome), st, e->msg[0] ? e->msg : "(no message)");
        shown += e->count;
    }
    uint64_t rest = errtally_total(t) - shown;
    if (rest)
        fprintf(f, "              %5" PRIu64 "  with %s messages (result.json has up to %d)\n",
                rest, t->other ? "other" : "less frequent", ERRTALLY_SLOTS);
}

static void print_headlines(FILE *f, const struct run_stats *s, const struct run_summary *sum)
{
    const struct run_window *w = &sum->window;

    fprintf(f, "duration      %.2f s\n", sum->duration_s);
    fprintf(f, "throughput    %.2f req/s, output %.2f tok/s", run_summary_rps(sum),
            run_summary_output_tps(sum));
    /* the peak counts chunks: nothing to count without a stream; 0 (a flow
     * step has no 1-second series of its own): no peak rather than 0 */
    if (s->streams && sum->max_output_tokens_per_s > 0)
        fprintf(f, " (peak %.0f tok/s)", sum->max_output_tokens_per_s);
    if (w->valid)
        fprintf(f, ", steady window %.1f-%.1f s\n", w->start_s, w->end_s);
    else
        fprintf(f, ", total %.2f tok/s\n", sum->total_token_throughput);
    if (w->valid)
        fprintf(f,
                "              sent %.2f req/s; whole run with its drain (vLLM's): %.2f req/s, "
                "%.2f tok/s\n",
                w->sent_rps, sum->request_throughput, sum->output_throughput);
    if (sum->goodput_enabled) {
        const char *sep = "";
        fprintf(f, "goodput       %.2f req/s, %" PRIu64 " good (", run_summary_goodput(sum),
                sum->good);
        if (sum->goodput.ttft_ms > 0) {
            fprintf(f, "%sttft <= %g ms", sep, sum->goodput.ttft_ms);
            sep = ", ";
        }
        if (sum->goodput.tpot_ms > 0) {
            fprintf(f, "%stpot <= %g ms", sep, sum->goodput.tpot_ms);
            sep = ", ";
        }
        if (sum->goodput.e2el_ms > 0)
            fprintf(f, "%se2el <= %g ms", sep, sum->goodput.e2el_ms);
        fputs(")\n", f);
    }
    fprintf(f, "error rate    %.2f%%\n", sum->error_rate * 100.0);
    if (s->recall.count)
        fprintf(f,
                "vector search %" PRIu64 " searches at %.2f/s: recall@%" PRIu32
                " mean %.4f, p5 %.4f, min %.4f; latency p50 %.2f ms, p99 %.2f ms\n",
                s->recall.count, sum->request_throughput, s->recall_k,
                quality_dist_mean(&s->recall), quality_dist_percentile(&s->recall, 5),
                quality_dist_min(&s->recall), sum->lat[STAT_E2EL].pct[0],
                sum->lat[STAT_E2EL].pct[3]);
    fprintf(f,
            "tokens        input %" PRIu64 ", output %" PRIu64 " (counted by %s; %" PRIu64
            " usage disagreements)\n",
            sum->total_input_tokens, sum->total_output_tokens, sum->token_method,
            s->usage_mismatch);
    if (s->streams)
        fprintf(f,
                "streams       %" PRIu64 " streamed: %" PRIu64 " without [DONE], %" PRIu64
                " without finish_reason, %" PRIu64 " with a changed id\n",
                s->streams, s->no_done, s->no_finish, s->id_changed);
    if (s->after_done || s->out_of_order || s->bad_close)
        fprintf(f,
                "realtime      %" PRIu64 " with deltas after response.done, %" PRIu64
                " with events out of order, %" PRIu64 " closed with an unexpected code\n",
                s->after_done, s->out_of_order, s->bad_close);
    if (s->fell_back)
        fprintf(f,
                "transport     %" PRIu64
                " requests went over SSE: the WebSocket upgrade was refused (--transport auto)\n",
                s->fell_back);
    if (s->integrity.streams)
        fprintf(f,
                "integrity     %" PRIu64 " signed streams, %" PRIu64 " with problems: %" PRIu64
                " chunks ok, %" PRIu64 " missing, %" PRIu64 " duplicated, %" PRIu64
                " reordered, %" PRIu64 " forged, %" PRIu64 " unsigned\n",
                s->integrity.streams, s->integrity.violated, s->integrity.ok, s->integrity.missing,
                s->integrity.duplicates, s->integrity.reorders, s->integrity.forged,
                s->integrity.unsigned_events);
}

static void print_cell(FILE *f, double v, bool have)
{
    if (have)
        fprintf(f, " %9.2f", v);
    else
        fprintf(f, " %9s", "-");
}

/* A metric only a stream has (TTFT, TTFC, ITL, TPOT). */
static bool stream_metric(enum stat_metric m)
{
    return m == STAT_TTFT || m == STAT_TTFC || m == STAT_ITL || m == STAT_TPOT;
}

static void print_latency(FILE *f, const struct run_stats *s, const struct run_summary *sum)
{
    bool none_streamed = !s->streams && s->requests;
    if (sum->latency_scope)
        fprintf(f, "\nlatency below: %s", sum->latency_scope);
    fprintf(f, "\n%-12s %9s %9s %9s %9s %9s %9s %9s\n", "latency (ms)", "mean", "p50", "p90", "p95",
            "p99", "p99.9", "max");
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const struct latency_summary *l = &sum->lat[rows[i].metric];
        bool have = l->count > 0;
        if (none_streamed && !have && stream_metric(rows[i].metric))
            continue;
        if (rows[i].metric == STAT_TTFA && !have)
            continue; /* no reasoning: no time to first answer */
        fprintf(f, "%-12s", rows[i].label);
        print_cell(f, l->mean, have);
        for (int p = 0; p < SUMMARY_NPCT; p++)
            print_cell(f, l->pct[p], have);
        print_cell(f, l->max, have);
        fputc('\n', f);
    }
    if (none_streamed)
        fprintf(f, "(no request was streamed: an answer that arrives whole has no TTFT, TTFC, ITL "
                   "or TPOT)\n");
}

void report_text_legend(FILE *f, const struct run_stats *s)
{
    if (s->streams)
        fprintf(f, "(first token: to the first content, reasoning or tool-call token users see "
                   "(ttfc); TTFT (vLLM): to the first chunk with choices; lag: how late requests "
                   "were sent after their intended time, already in every latency above; "
                   "docs/METRICS.md)\n");
    else
        fprintf(f, "(lag: how late requests were sent after their intended time, already in "
                   "every latency above; docs/METRICS.md)\n");
}

/* A ratio as a percentage, or a score, into the quality line when measured. */
static void quality_part(FILE *f, const char **sep, const char *name, double v, bool pct)
{
    if (!isfinite(v))
        return;
    if (pct)
        fprintf(f, "%s%s %.1f%%", *sep, name, v * 100);
    else
        fprintf(f, "%s%s %.3f", *sep, name, v);
    *sep = ", ";
}

/* "quality": the answer-quality means and rates, when any was measured. */
static void print_quality(FILE *f, const struct run_stats *s, const struct run_summary *sum)
{
    const char *sep = "";
    const struct quality_stats *q = &s->quality;
    double v[] = {sum->quality.rouge_l,     sum->quality.bleu4,      sum->quality.exact_match,
                  sum->quality.regex_match, sum->quality.json_valid, sum->quality.dual_sla,
                  sum->quality.consistency};
    bool any = false;
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        any |= isfinite(v[i]);
    if (!any)
        return;
    fprintf(f, "quality       ");
    quality_part(f, &sep, "rouge_l", sum->quality.rouge_l, false);
    quality_part(f, &sep, "bleu4", sum->quality.bleu4, false);
    quality_part(f, &sep, "exact", sum->quality.exact_match, true);
    quality_part(f, &sep, "regex", sum->quality.regex_match, true);
    quality_part(f, &sep, "json", sum->quality.json_valid, true);
    quality_part(f, &sep, "dual_sla", sum->quality.dual_sla, true);
    quality_part(f, &sep, "consistency", sum->quality.consistency, false);
    fprintf(f, " (%" PRIu64 " answers scored, %" PRIu64 " with a reference", q->requests,
            q->with_ref);
    if (q->truncated)
        fprintf(f, ", %" PRIu64 " cut", q->truncated);
    fprintf(f, "; means and shares, docs/QUALITY.md)\n");
}

int report_text_summary(FILE *f, const struct run_stats *s, const struct run_summary *sum)
{
    print_outcomes(f, s, sum);
    print_errors(f, s);
    print_headlines(f, s, sum);
    print_quality(f, s, sum);
    print_ttft_note(f, sum);
    print_latency(f, s, sum);
    return ferror(f) ? -EIO : 0;
}

int report_text_slo(FILE *f, const struct slo *slos, size_t n, const struct run_summary *sum,
                    size_t *failed)
{
    size_t width = 3, nfailed = 0;
    char actual[48];

    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(slos[i].expr);
        if (len > width)
            width = len > 60 ? 60 : len;
    }
    if (n)
        fprintf(f, "\n%-*s  %-14s %s\n", (int)width, "SLO", "actual", "verdict");
    for (size_t i = 0; i < n; i++) {
        double v = NAN;
        bool pass = slo_eval(&slos[i], sum, &v);
        nfailed += !pass;
        fprintf(f, "%-*.*s  %-14s %s\n", (int)width, (int)width, slos[i].expr,
                slo_format_value(&slos[i], v, actual, sizeof(actual)), pass ? "pass" : "FAIL");
    }
    if (failed)
        *failed = nfailed;
    return ferror(f) ? -EIO : 0;
}
