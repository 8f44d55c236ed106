/*
 * html_overview.c - the overview section of the HTML report (see
 * html_overview.h).
 */
#include "report/html_overview.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/svg.h"

/* How many of a result's stored SLO verdicts passed, of how many. */
static void slo_counts(const json_t *doc, size_t *pass, size_t *total)
{
    const json_t *arr = report_json_arr(doc, "slo"), *v;
    size_t i;
    *pass = *total = 0;
    json_array_foreach(arr, i, v)
    {
        (*total)++;
        *pass += json_is_true(json_object_get(v, "pass"));
    }
}

/* What was run, from result.json's "run": the load model, and the endpoint, length, seed, model. */
static void config_card(struct html_page *p, const json_t *doc)
{
    const json_t *run = report_json_obj(doc, "run");
    const char *mode = report_json_str(run, "mode"), *endpoint = report_json_str(run, "endpoint");
    const char *model = report_json_str(run, "model");
    char v[64], unit[64] = "", sub[200], a[32];
    double dur = report_json_num(run, "requested_duration_s"), seed = report_json_num(run, "seed");
    double reqs = report_json_num(run, "requests");
    size_t n;

    if (!run)
        return;
    snprintf(v, sizeof(v), "%s", mode ? mode : "-");
    if (mode && !strcmp(mode, "open"))
        snprintf(unit, sizeof(unit), "%s req/s",
                 html_fmt_num(report_json_num(run, "rate"), 2, a, sizeof(a)));
    else if (mode && !strcmp(mode, "closed"))
        snprintf(unit, sizeof(unit), "%.0f users", report_json_num(run, "users"));
    if (!(dur > 0))
        dur = report_json_num(run, "duration_s");
    n = (size_t)snprintf(sub, sizeof(sub), "%s", endpoint ? endpoint : "scenario");
    if (dur > 0 && n < sizeof(sub))
        n += (size_t)snprintf(sub + n, sizeof(sub) - n, ", %.0f s", dur);
    if (reqs > 0 && n < sizeof(sub))
        n += (size_t)snprintf(sub + n, sizeof(sub) - n, ", %.0f requests", reqs);
    if (isfinite(seed) && n < sizeof(sub))
        n += (size_t)snprintf(sub + n, sizeof(sub) - n, ", seed %.0f", seed);
    if (model && n < sizeof(sub))
        snprintf(sub + n, sizeof(sub) - n, ", model %s", model);
    html_card(p, NULL, "configuration", v, unit[0] ? unit : NULL, sub);
}

/* The headline cards of one run: what was run, requests, throughput, tokens, goodput, errors,
 * latency, SLOs. */
static void run_cards(struct html_page *p, const struct report_doc *d)
{
    const struct run_summary *s = &d->sum;
    char v[64], sub[160], a[32], b[32];

    html_emit(p, "<div class=\"cards\">\n");
    config_card(p, d->doc);
    snprintf(v, sizeof(v), "%" PRIu64, s->requests);
    snprintf(sub, sizeof(sub), "%" PRIu64 " ok, %" PRIu64 " failed, %" PRIu64 " cut", s->completed,
             s->failed, s->cut);
    html_card(p, NULL, "requests", v, NULL, sub);
    snprintf(v, sizeof(v), "%.2f", run_summary_rps(s));
    if (s->window.valid)
        snprintf(sub, sizeof(sub), "steady window %.1f-%.1f s; whole run %.2f over %.1f s",
                 s->window.start_s, s->window.end_s, s->request_throughput, s->duration_s);
    else
        snprintf(sub, sizeof(sub), "over %.1f s", s->duration_s);
    html_card(p, NULL, "throughput", v, "req/s", sub);
    snprintf(v, sizeof(v), "%.0f", run_summary_output_tps(s));
    snprintf(sub, sizeof(sub), "peak %.0f tok/s, total %.0f tok/s", s->max_output_tokens_per_s,
             s->total_token_throughput);
    html_card(p, NULL, "output tokens", v, "tok/s", sub);
    if (s->goodput_enabled) {
        snprintf(v, sizeof(v), "%.2f", run_summary_goodput(s));
        snprintf(sub, sizeof(sub), "%" PRIu64 " good requests", s->good);
        html_card(p, NULL, "goodput", v, "req/s", sub);
    }
    html_card(p, s->failed ? "bad" : NULL, "error rate", html_fmt_pct(s->error_rate, v, sizeof(v)),
              NULL, s->failed ? "see outcomes below" : "no failed request");
    static const struct {
        enum stat_metric m;
        const char *label;
    } lat[] = {{STAT_TTFT, "TTFT p50"},
               {STAT_TPOT, "TPOT p50"},
               {STAT_ITL, "ITL p50"},
               {STAT_E2EL, "E2EL p50"}};
    for (size_t i = 0; i < sizeof(lat) / sizeof(lat[0]); i++) {
        const struct latency_summary *l = &s->lat[lat[i].m];
        snprintf(v, sizeof(v), "%s", l->count ? html_fmt_ms(l->pct[0], a, sizeof(a)) : "-");
        snprintf(sub, sizeof(sub), "p99 %s ms, max %s ms",
                 l->count ? html_fmt_ms(l->pct[3], a, sizeof(a)) : "-",
                 l->count ? html_fmt_ms(l->max, b, sizeof(b)) : "-");
        html_card(p, NULL, lat[i].label, v, l->count ? "ms" : NULL, sub);
    }
    size_t pass, total;
    slo_counts(d->doc, &pass, &total);
    if (total) {
        snprintf(v, sizeof(v), "%zu / %zu", pass, total);
        html_card(p, pass == total ? "good" : "bad", "SLOs passed", v, NULL,
                  pass == total ? "all hold" : "see the verdicts");
    }
    html_emit(p, "</div>\n");
}

/* One row per run, in the colours the distribution charts give them. */
static void compare_table(struct html_page *p, const struct report_docset *set)
{
    char a[32];
    html_emit(p,
              "<div class=\"tablewrap\"><table id=\"runs-table\"><tr><th>run</th><th>requests</th>"
              "<th>ok</th><th>failed</th><th>duration (s)</th><th>req/s</th><th>output tok/s</th>"
              "<th>error rate</th><th>TTFT p50 (ms)</th><th>TTFT p99 (ms)</th><th>ITL p99 (ms)</th>"
              "<th>E2EL p50 (ms)</th><th>E2EL p99 (ms)</th><th>SLOs</th></tr>\n");
    int color = 0;
    for (size_t i = 0; i < set->n; i++) {
        const struct report_doc *d = &set->docs[i];
        if (d->kind != REPORT_DOC_RESULT)
            continue;
        const struct run_summary *s = &d->sum;
        html_emitf(p, "<tr><td><span style=\"color:%s\">&#9632;</span> ", svg_color(color++));
        html_esc(p, d->name);
        html_emitf(p, "</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td><td%s>%" PRIu64 "</td>",
                   s->requests, s->completed, s->failed ? " class=\"err\"" : "", s->failed);
        html_emitf(p, "<td>%.1f</td><td>%.2f</td><td>%.0f</td>", s->duration_s, run_summary_rps(s),
                   run_summary_output_tps(s));
        html_emitf(p, "<td>%s</td>", html_fmt_pct(s->error_rate, a, sizeof(a)));
        const double cells[5] = {s->lat[STAT_TTFT].pct[0], s->lat[STAT_TTFT].pct[3],
                                 s->lat[STAT_ITL].pct[3], s->lat[STAT_E2EL].pct[0],
                                 s->lat[STAT_E2EL].pct[3]};
        const enum stat_metric cm[5] = {STAT_TTFT, STAT_TTFT, STAT_ITL, STAT_E2EL, STAT_E2EL};
        for (int k = 0; k < 5; k++)
            html_emitf(p, "<td>%s</td>",
                       s->lat[cm[k]].count ? html_fmt_ms(cells[k], a, sizeof(a)) : "-");
        size_t pass, total;
        slo_counts(d->doc, &pass, &total);
        if (total)
            html_emitf(p, "<td class=\"%s\">%zu/%zu</td></tr>\n", pass == total ? "pass" : "fail",
                       pass, total);
        else
            html_emit(p, "<td>-</td></tr>\n");
    }
    html_emit(p, "</table></div>\n");
}

void html_overview_section(struct html_page *p, const struct report_docset *set)
{
    size_t nres = report_docset_count(set, REPORT_DOC_RESULT);
    if (!nres)
        return;
    html_emit(p, "<section id=\"overview\"><h2>Overview</h2>\n");
    if (nres == 1) {
        for (size_t i = 0; i < set->n; i++)
            if (set->docs[i].kind == REPORT_DOC_RESULT)
                run_cards(p, &set->docs[i]);
    } else {
        html_emit(p,
                  "<p class=\"sub\">One row per run; latencies in milliseconds, E2EL and TTFT from "
                  "the intended send time.</p>\n");
        compare_table(p, set);
    }
    html_emit(p, "</section>\n");
}
