/*
 * html_sweep.c - one sweep's section of the HTML report (see html_sweep.h).
 */
#include "report/html_sweep.h"

#include <stdio.h>
#include <string.h>

#include "report/html_sweep_charts.h"

/* The headline cards: the knee, the max goodput within the SLOs, the critical load. */
static void sweep_headline(struct html_page *p, const json_t *doc, const char *load_unit)
{
    const json_t *knee = report_json_obj(doc, "knee"), *mg = report_json_obj(doc, "max_goodput");
    const json_t *cl = report_json_obj(doc, "critical_load");
    char v[64], sub[200], a[32], b[32];

    html_emit(p, "<div class=\"cards wide\">\n");
    if (knee) {
        snprintf(v, sizeof(v), "%s", html_fmt_num(report_json_num(knee, "load"), 2, a, sizeof(a)));
        snprintf(sub, sizeof(sub), "%s req/s at %s ms %s (%s)",
                 html_fmt_num(report_json_num(knee, "throughput"), 2, a, sizeof(a)),
                 html_fmt_ms(report_json_num(knee, "latency_ms"), b, sizeof(b)),
                 report_json_str(knee, "metric") ? report_json_str(knee, "metric") : "",
                 report_json_str(knee, "method") ? report_json_str(knee, "method") : "");
        html_card(p, NULL, "knee of the latency curve", v, load_unit, sub);
    } else {
        html_card(p, NULL, "knee of the latency curve", "-", NULL, "not found");
    }
    if (mg) {
        const json_t *br = json_object_get(mg, "bracket");
        snprintf(v, sizeof(v), "%s",
                 html_fmt_num(report_json_num(mg, "goodput_rps"), 2, a, sizeof(a)));
        snprintf(sub, sizeof(sub), "at load %s",
                 html_fmt_num(report_json_num(mg, "load"), 2, b, sizeof(b)));
        if (report_json_str(mg, "from")) {
            size_t len = strlen(sub);
            snprintf(sub + len, sizeof(sub) - len, " (%s)", report_json_str(mg, "from"));
        }
        if (json_array_size(br) == 2) {
            char c0[32], c1[32];
            size_t len = strlen(sub);
            snprintf(sub + len, sizeof(sub) - len, "; passes at %s, fails at %s",
                     html_fmt_num(json_number_value(json_array_get(br, 0)), 2, c0, sizeof(c0)),
                     html_fmt_num(json_number_value(json_array_get(br, 1)), 2, c1, sizeof(c1)));
        }
        html_card(p, "good", "max goodput within SLOs", v, "req/s", sub);
    }
    const char *why = html_sweep_lc_not_meaningful(doc);
    if (cl && !why) {
        snprintf(v, sizeof(v), "%s",
                 html_fmt_num(report_json_num(cl, "lambda_c"), 2, a, sizeof(a)));
        snprintf(sub, sizeof(sub),
                 "error rate %.3g%% there, e-fold every %.3g; goodness of fit r\u00b2 %.3f over "
                 "%.0f steps",
                 100 * report_json_num(cl, "epsilon0"), report_json_num(cl, "delta_lambda"),
                 report_json_num(cl, "r2"), report_json_num(cl, "points"));
        html_card(p, NULL, "critical load \u03bbc (error fit)", v, load_unit, sub);
    } else if (cl) {
        snprintf(sub, sizeof(sub), "no meaningful fit: %s (r\u00b2 %.2f)", why,
                 report_json_num(cl, "r2"));
        html_card(p, NULL, "critical load \u03bbc (error fit)", "-", NULL, sub);
    }
    html_emit(p, "</div>\n");
}

/* One row per step: load, throughput, latencies, errors, SLO verdict, saturation, quality. */
static void sweep_steps_table(struct html_page *p, const json_t *steps, bool quality)
{
    const json_t *st;
    size_t i;
    char a[32];
    html_emit(
        p,
        "<div class=\"tablewrap\"><table class=\"steps\"><caption class=\"note\">Latencies in "
        "milliseconds.</caption><tr><th>step</th><th>load</th>"
        "<th>achieved req/s</th><th>output tok/s</th><th>goodput req/s</th>"
        "<th>TTFT p50</th><th>TTFT p99</th><th>TPOT p50</th><th>TPOT p99</th>"
        "<th>E2EL p50</th><th>E2EL p99</th><th>error rate</th><th>SLO</th><th class=\"l\">saturated"
        "</th>");
    if (quality)
        html_emit(p, "<th>ROUGE-L</th><th>BLEU-4</th><th>exact match</th>");
    html_emit(p, "</tr>\n");
    json_array_foreach(steps, i, st)
    {
        const char *dir = report_json_str(st, "dir");
        html_emit(p, "<tr><td>");
        html_esc(p, dir ? dir : "");
        html_emitf(p, "</td><td>%s</td>",
                   html_fmt_num(report_json_num(st, "load"), 2, a, sizeof(a)));
        html_emitf(p, "<td>%s</td>",
                   html_fmt_num(report_json_num(st, "achieved_rps"), 2, a, sizeof(a)));
        html_emitf(p, "<td>%s</td>",
                   html_fmt_num(report_json_num(st, "output_tps"), 0, a, sizeof(a)));
        html_emitf(p, "<td>%s</td>",
                   html_fmt_num(report_json_num(st, "goodput_rps"), 2, a, sizeof(a)));
        static const char *const ms[] = {"ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms",
                                         "tpot_p99_ms", "e2el_p50_ms", "e2el_p99_ms"};
        for (size_t k = 0; k < 6; k++)
            html_emitf(p, "<td>%s</td>", html_fmt_ms(report_json_num(st, ms[k]), a, sizeof(a)));
        html_emitf(p, "<td>%s</td>", html_fmt_pct(report_json_num(st, "error_rate"), a, sizeof(a)));
        const json_t *pass = json_object_get(st, "slo_pass");
        if (json_is_boolean(pass))
            html_emitf(p, "<td class=\"%s\">%s</td>", json_is_true(pass) ? "pass" : "fail",
                       json_is_true(pass) ? "pass" : "FAIL");
        else
            html_emit(p, "<td>-</td>");
        bool sat = json_is_true(json_object_get(st, "saturated"));
        const json_t *why = report_json_arr(st, "saturation"), *w;
        size_t k;
        html_emitf(p, "<td class=\"l%s\">%s", sat ? " err" : "", sat ? "yes" : "no");
        json_array_foreach(why, k, w)
        {
            if (!json_is_string(w))
                continue;
            html_emit(p, k ? ", " : ": ");
            html_esc(p, json_string_value(w));
        }
        html_emit(p, "</td>");
        if (quality) {
            const json_t *q = report_json_obj(st, "quality");
            html_emitf(p, "<td>%s</td>",
                       html_fmt_num(report_json_num(q, "rouge_l_mean"), 3, a, sizeof(a)));
            html_emitf(p, "<td>%s</td>",
                       html_fmt_num(report_json_num(q, "bleu4_mean"), 3, a, sizeof(a)));
            html_emitf(p, "<td>%s</td>",
                       html_fmt_pct(report_json_num(q, "exact_match_rate"), a, sizeof(a)));
        }
        html_emit(p, "</tr>\n");
    }
    html_emit(p, "</table></div>\n");
}

/* How much each tenant's p99 grew when the other ran beside it. */
static void interference_table(struct html_page *p, const json_t *arr)
{
    const json_t *v;
    size_t i;
    char a[32];
    if (!json_array_size(arr))
        return;
    html_emit(p,
              "<h3>Interference between traffic classes</h3><div class=\"tablewrap\"><table>"
              "<tr><th>victim</th><th>aggressor</th><th>p99 alone (ms)</th><th>p99 with (ms)</th>"
              "<th>&Delta;p99 / p99 alone</th></tr>\n");
    json_array_foreach(arr, i, v)
    {
        html_emit(p, "<tr><td>");
        html_esc(p, report_json_str(v, "victim"));
        html_emit(p, "</td><td class=\"l\">");
        html_esc(p, report_json_str(v, "aggressor"));
        html_emitf(p, "</td><td>%s</td>",
                   html_fmt_ms(report_json_num(v, "p99_alone_ms"), a, sizeof(a)));
        html_emitf(p, "<td>%s</td>", html_fmt_ms(report_json_num(v, "p99_with_ms"), a, sizeof(a)));
        html_emitf(p, "<td>%s</td></tr>\n",
                   html_fmt_pct(report_json_num(v, "delta"), a, sizeof(a)));
    }
    html_emit(p, "</table></div>\n");
}

/* Whether some step of the sweep has answer quality (the steps table shows it then). */
static bool steps_have_quality(const json_t *steps)
{
    const json_t *st;
    size_t i;

    json_array_foreach(steps, i, st) if (report_json_obj(st, "quality")) return true;
    return false;
}

void html_sweep_section(struct html_page *p, const struct report_doc *d)
{
    int sw = ++p->nsweep;
    const json_t *doc = d->doc, *steps = report_json_arr(doc, "steps");
    const char *mode = report_json_str(doc, "mode");
    bool conc = mode && !strcmp(mode, "concurrency");

    if (p->rc)
        return;
    html_emitf(p, "<section class=\"sweep\" id=\"sweep%d\"><h2>Sweep ", sw);
    html_esc(p, d->name);
    html_emit(p, "</h2>\n<p class=\"sub\">");
    html_emitf(p, "%zu steps, %s", json_array_size(steps),
               conc ? "closed loop (concurrency)" : "open loop (rate)");
    if (report_json_str(doc, "target")) {
        html_emit(p, " &middot; target ");
        html_esc(p, report_json_str(doc, "target"));
    }
    html_emit(p, " &middot; file ");
    html_esc(p, d->path);
    html_emit(p, "</p>\n");
    sweep_headline(p, doc, conc ? "users" : "req/s offered");
    if (!html_sweep_charts(p, d, sw)) {
        html_emit(p, "<p class=\"note\">This sweep has no steps.</p></section>\n");
        return;
    }
    html_emit(p, "<h3>Steps</h3>\n");
    sweep_steps_table(p, steps, steps_have_quality(steps));
    interference_table(p, report_json_arr(doc, "interference"));
    html_emit(p, "</section>\n");
}
