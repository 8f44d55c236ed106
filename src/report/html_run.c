/*
 * html_run.c - one run's section of the HTML report (see html_run.h).
 */
#include "report/html_run.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis/slo.h"
#include "report/html_groups.h"
#include "report/html_run_charts.h"

/* The line under the run's title: target, model, load, start, measured window, file. */
static void run_meta(struct html_page *p, const struct report_doc *d)
{
    const json_t *run = report_json_obj(d->doc, "run");
    const char *target = report_json_str(run, "target"), *model = report_json_str(run, "model");
    const char *mode = report_json_str(run, "mode"), *started = report_json_str(run, "started_at");
    const char *profile = report_json_str(run, "simulator_profile");
    char a[32];

    html_emit(p, "<p class=\"sub\">");
    if (target) {
        html_emit(p, "target ");
        html_esc(p, target);
        if (profile) {
            html_emit(p, " (built-in simulator, profile ");
            html_esc(p, profile);
            html_emit(p, ")");
        }
    }
    if (model) {
        html_emit(p, " &middot; model ");
        html_esc(p, model);
    }
    if (mode && !strcmp(mode, "open")) {
        html_emitf(p, " &middot; open loop, %s req/s ",
                   html_fmt_num(report_json_num(run, "rate"), 2, a, sizeof(a)));
        html_esc(p, report_json_str(run, "arrival"));
    } else if (mode && !strcmp(mode, "closed")) {
        html_emitf(p, " &middot; closed loop, %s users",
                   html_fmt_num(report_json_num(run, "users"), 0, a, sizeof(a)));
    }
    if (started) {
        html_emit(p, " &middot; started ");
        html_esc(p, started);
    }
    html_emitf(p, " &middot; measured %.1f s", d->sum.duration_s);
    if (d->sum.warmup_requests)
        html_emitf(p, " (after %" PRIu64 " warm-up requests)", d->sum.warmup_requests);
    html_emit(p, " &middot; file ");
    html_esc(p, d->path);
    html_emit(p, "</p>\n");
}

/* The stored SLO verdicts, actual values in the SLO's own unit. */
static void slo_table(struct html_page *p, const struct report_doc *d)
{
    const json_t *arr = report_json_arr(d->doc, "slo"), *v;
    size_t i;
    char a[48];

    if (!json_array_size(arr))
        return;
    html_emit(p,
              "<h3>SLO verdicts</h3><div class=\"tablewrap\"><table class=\"slo\"><tr><th>SLO</th>"
              "<th>actual</th><th>verdict</th></tr>\n");
    json_array_foreach(arr, i, v)
    {
        const char *expr = report_json_str(v, "expr");
        double actual = report_json_num(v, "actual");
        bool pass = json_is_true(json_object_get(v, "pass"));
        struct slo slo;
        const char *text;
        if (expr && slo_parse(expr, &slo, NULL, 0) == 0)
            text = slo_format_value(&slo, actual, a, sizeof(a));
        else
            text = html_fmt_num(actual, 3, a, sizeof(a));
        html_emit(p, "<tr><td>");
        html_esc(p, expr ? expr : "?");
        html_emit(p, "</td><td>");
        html_esc(p, text);
        html_emitf(p, "</td><td class=\"%s\">%s</td></tr>\n", pass ? "pass" : "fail",
                   pass ? "pass" : "FAIL");
    }
    html_emit(p, "</table></div>\n");
}

static const struct {
    enum stat_metric m;
    const char *label;
    bool always;
} lat_rows[] = {
    {STAT_TTFT, "TTFT", true},
    {STAT_TTFT_UNCORRECTED, "TTFT, uncorrected", false},
    {STAT_TTFC, "first token (ttfc: content, reasoning or a tool call)", true},
    {STAT_TTFA, "first answer (ttfa: content after reasoning)", false},
    {STAT_ITL, "ITL", true},
    {STAT_TPOT, "TPOT", true},
    {STAT_TPOT_INCL_TTFT, "TPOT incl. TTFT", false},
    {STAT_E2EL, "E2EL", true},
    {STAT_E2EL_UNCORRECTED, "E2EL, uncorrected", false},
    {STAT_LAG, "lag (send delay)", true},
    {STAT_DNS, "DNS", false},
    {STAT_CONNECT, "TCP connect", false},
    {STAT_TLS, "TLS handshake", false},
    {STAT_SENT, "request sent", false},
    {STAT_TTFB, "first byte", false},
};

/* Gaps under this (µs) are chunks that reached the client in one read. */
#define ITL_SAME_READ_US 100

/*
 * What the ITL row holds, said under the table: the share of 0-ms gaps
 * (chunks read at once), and, when requests failed or were cut, that ITL
 * counts their gaps too while TTFT, TPOT and E2EL count successful ones.
 */
static void itl_notes(struct html_page *p, const struct report_doc *d)
{
    const struct hdr *h = d->stats ? d->stats->hist[STAT_ITL] : NULL;
    int64_t total = h ? hdr_total_count(h) : 0, same = 0;
    struct hdr_iter it;

    if (!total)
        return;
    hdr_iter_recorded_init(&it, h);
    while (hdr_iter_next(&it) && it.value < ITL_SAME_READ_US)
        same += it.count;
    html_emit(p, "<p class=\"note itl\">ITL is the gap between two chunks with content as the "
                 "client read them. ");
    if (same)
        html_emitf(p,
                   "%.1f%% of the gaps are under 0.1 ms (shown as 0 ms): chunks that arrived "
                   "together and were read at once (the server or a proxy wrote them in one "
                   "burst, or the client was busy), not tokens generated that fast. ",
                   100.0 * (double)same / (double)total);
    if (d->sum.failed || d->sum.cut)
        html_emit(p, "ITL counts the gaps of every streamed request, failed and cut ones "
                     "included; TTFT, TPOT and E2EL count successful requests only (vLLM's "
                     "itl figures in result.json count successful ones too).");
    html_emit(p, "</p>\n");
}

/* Count, mean and percentiles of each latency metric measured (the main ones always). */
static void latency_table(struct html_page *p, const struct report_doc *d)
{
    char a[32];
    html_emit(p, "<h3>Latency (ms)</h3><div class=\"tablewrap\"><table class=\"latency\"><tr>"
                 "<th>metric</th><th>count</th><th>mean</th><th>p50</th><th>p90</th><th>p95</th>"
                 "<th>p99</th><th>p99.9</th><th>max</th></tr>\n");
    for (size_t i = 0; i < sizeof(lat_rows) / sizeof(lat_rows[0]); i++) {
        const struct latency_summary *l = &d->sum.lat[lat_rows[i].m];
        if (!l->count && !lat_rows[i].always)
            continue;
        if (lat_rows[i].m == STAT_DNS)
            html_emit(p, "<tr class=\"sep\"><td colspan=\"9\">connection phases (new connections)"
                         "</td></tr>\n");
        html_emit(p, "<tr><td>");
        html_esc(p, lat_rows[i].label);
        html_emitf(p, "</td><td>%" PRIu64 "</td>", l->count);
        html_emitf(p, "<td>%s</td>", l->count ? html_fmt_ms(l->mean, a, sizeof(a)) : "-");
        for (int k = 0; k < SUMMARY_NPCT; k++)
            html_emitf(p, "<td>%s</td>", l->count ? html_fmt_ms(l->pct[k], a, sizeof(a)) : "-");
        html_emitf(p, "<td>%s</td></tr>\n", l->count ? html_fmt_ms(l->max, a, sizeof(a)) : "-");
    }
    html_emit(p, "</table></div>\n");
}

/* The class an outcome is counted in, for the outcomes table. */
static const char *outcome_class(enum req_outcome o)
{
    switch (o) {
    case REQ_OK:
        return "ok";
    case REQ_HTTP_429:
    case REQ_HTTP_4XX:
    case REQ_HTTP_5XX:
        return "HTTP error";
    case REQ_CONNECT:
    case REQ_TLS:
    case REQ_RECV:
        return "connection";
    case REQ_TIMEOUT_CONNECT:
    case REQ_TIMEOUT_TTFB:
    case REQ_TIMEOUT_IDLE:
    case REQ_TIMEOUT_TOTAL:
        return "timeout";
    case REQ_TRUNCATED:
    case REQ_MALFORMED:
    case REQ_STREAM_ERROR:
        return "stream";
    case REQ_CUT:
        return "cut at the end";
    case REQ_CANCELLED:
        return "cancelled by the client";
    default:
        return "other";
    }
}

/* Outcomes by class, HTTP status classes, tokens and streams, stream integrity. */
static void outcome_tables(struct html_page *p, const struct report_doc *d)
{
    const struct run_stats *s = d->stats;
    char a[32];
    double total = (double)(s->requests ? s->requests : 1);

    html_emit(p, "<div class=\"two\"><div class=\"tablewrap\"><table class=\"outcomes\">"
                 "<caption>Outcomes by class</caption><tr><th>outcome</th><th>class</th>"
                 "<th>requests</th><th>share</th></tr>\n");
    for (int i = 0; i < REQ_OUTCOME_COUNT; i++) {
        if (!s->outcomes[i] && i != REQ_OK)
            continue;
        bool err = req_outcome_is_error((enum req_outcome)i);
        html_emitf(p, "<tr%s><td>", err ? " class=\"err\"" : "");
        html_esc(p, req_outcome_name((enum req_outcome)i));
        html_emit(p, "</td><td class=\"l\">");
        html_esc(p, outcome_class((enum req_outcome)i));
        html_emitf(p, "</td><td>%" PRIu64 "</td><td>%s</td></tr>\n", s->outcomes[i],
                   html_fmt_pct((double)s->outcomes[i] / total, a, sizeof(a)));
    }
    html_emitf(p, "<tr><td><b>all</b></td><td></td><td><b>%" PRIu64 "</b></td><td></td></tr>\n",
               s->requests);
    html_emit(p,
              "</table></div>\n<div class=\"tablewrap\"><table class=\"http\"><caption>HTTP status"
              "</caption><tr><th>class</th><th>responses</th></tr>\n");
    for (int i = 0; i < HTTP_CLASS_COUNT; i++) {
        if (!s->http_class[i])
            continue;
        html_emit(p, "<tr><td>");
        html_esc(p, http_class_name((enum http_class)i));
        html_emitf(p, "</td><td>%" PRIu64 "</td></tr>\n", s->http_class[i]);
    }
    html_emit(p, "</table></div>\n");

    html_emit(p, "<div class=\"tablewrap\"><table class=\"tokens\"><caption>Tokens and streams"
                 "</caption>\n");
    html_emitf(p, "<tr><td>input tokens (ok requests)</td><td>%" PRIu64 "</td></tr>\n",
               s->input_tokens);
    html_emitf(p, "<tr><td>output tokens (ok requests)</td><td>%" PRIu64 "</td></tr>\n",
               s->output_tokens);
    html_emitf(p, "<tr><td>output tokens (every request)</td><td>%" PRIu64 "</td></tr>\n",
               s->output_tokens_all);
    html_emit(p, "<tr><td>counted by</td><td>");
    html_esc(p, d->sum.token_method ? d->sum.token_method : "none");
    html_emitf(p, "</td></tr>\n<tr><td>tokens per chunk</td><td>%s</td></tr>\n",
               html_fmt_num(d->sum.tokens_per_chunk, 2, a, sizeof(a)));
    html_emitf(p, "<tr><td>usage disagreements</td><td>%" PRIu64 "</td></tr>\n", s->usage_mismatch);
    html_emitf(p, "<tr><td>streams</td><td>%" PRIu64 "</td></tr>\n", s->streams);
    html_emitf(p, "<tr><td>&nbsp; without [DONE]</td><td>%" PRIu64 "</td></tr>\n", s->no_done);
    html_emitf(p, "<tr><td>&nbsp; without finish_reason</td><td>%" PRIu64 "</td></tr>\n",
               s->no_finish);
    html_emitf(p, "<tr><td>&nbsp; with a changed id</td><td>%" PRIu64 "</td></tr>\n",
               s->id_changed);
    html_emitf(p, "<tr><td>reused connections</td><td>%" PRIu64 "</td></tr>\n", s->reused_conn);
    html_emit(p, "</table></div>\n");
    const json_t *integ = report_json_obj(d->doc, "integrity");
    if (integ)
        html_kv_table(p, "Stream integrity", integ);
    html_emit(p, "</div>\n");
}

/* The reasons for failure, most frequent first (result.json's "errors"). */
static void error_table(struct html_page *p, const struct report_doc *d)
{
    const struct errtally *t = &d->stats->errors;
    size_t idx[ERRTALLY_SLOTS];
    size_t n = errtally_top(t, idx, ERRTALLY_SLOTS);

    if (!n)
        return;
    html_emit(p, "<div class=\"tablewrap\"><table class=\"errors\"><caption>Why requests failed"
                 "</caption><tr><th>requests</th><th>outcome</th><th>class</th><th>status</th>"
                 "<th>message</th></tr>\n");
    for (size_t i = 0; i < n; i++) {
        const struct errtally_entry *e = &t->e[idx[i]];
        html_emitf(p, "<tr class=\"err\"><td>%" PRIu64 "</td><td>", e->count);
        html_esc(p, req_outcome_name(e->outcome));
        html_emit(p, "</td><td class=\"l\">");
        html_esc(p, outcome_class(e->outcome));
        if (e->status)
            html_emitf(p, "</td><td>%d</td><td class=\"l\">", e->status);
        else
            html_emit(p, "</td><td>-</td><td class=\"l\">");
        html_esc(p, e->msg[0] ? e->msg : "(no message)");
        html_emit(p, "</td></tr>\n");
    }
    if (t->other)
        html_emitf(p,
                   "<tr><td>%" PRIu64 "</td><td colspan=\"4\" class=\"l\">other messages (only "
                   "the first %d distinct ones are kept)</td></tr>\n",
                   t->other, ERRTALLY_SLOTS);
    html_emit(p, "</table></div>\n");
}

static const char *const group_keys[][2] = {
    {"by_tenant", "Per tenant"},
    {"by_intent", "Per intent"},
    {"by_perturbation", "Per perturbation"},
    {"by_flow_step", "Per flow step"},
};

/* A number of a class's summary: the first token users see (ttfc) where the
 * class measured it, else key as it is. */
static json_t *class_num(const json_t *sum, const char *key, const char *ttfc_key)
{
    double v = ttfc_key ? report_json_num(sum, ttfc_key) : NAN;
    if (!isfinite(v))
        v = report_json_num(sum, key);
    return isfinite(v) ? json_real(v) : json_null();
}

/*
 * A scenario's classes (result "classes"), one row each, as a group table:
 * the same columns as the tenants' and steps' tables.
 */
static json_t *classes_table(const json_t *classes)
{
    json_t *t = json_object(), *c;
    size_t i;

    json_array_foreach(classes, i, c)
    {
        const json_t *sum = report_json_obj(c, "summary"), *slo = report_json_arr(c, "slo"), *v;
        const char *name = report_json_str(c, "name");
        size_t k, nslo = 0, pass = 0;
        json_array_foreach(slo, k, v)
        {
            nslo++;
            pass += json_is_true(json_object_get(v, "pass"));
        }
        json_t *row = json_pack(
            "{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "requests",
            class_num(sum, "requests", NULL), "completed", class_num(sum, "completed", NULL),
            "failed", class_num(sum, "failed", NULL), "error_rate",
            class_num(sum, "error_rate", NULL), "request_throughput",
            class_num(sum, "request_throughput", NULL), "ttft_p50_ms",
            class_num(sum, "p50_ttft_ms", "p50_ttfc_ms"), "ttft_p99_ms",
            class_num(sum, "p99_ttft_ms", "p99_ttfc_ms"), "tpot_p50_ms",
            class_num(sum, "p50_tpot_ms", NULL), "tpot_p99_ms", class_num(sum, "p99_tpot_ms", NULL),
            "e2el_p50_ms", class_num(sum, "p50_e2el_ms", NULL), "e2el_p99_ms",
            class_num(sum, "p99_e2el_ms", NULL), "slo_pass",
            nslo ? json_boolean(pass == nslo) : json_null());
        if (!t || !row || !name || json_object_set_new(t, name, row)) {
            json_decref(row);
            json_decref(t);
            return NULL;
        }
    }
    return t;
}

/* A number of a retrieval row with 3 decimals, or "-" for null. */
static void retr_cell(struct html_page *p, const json_t *o, const char *key)
{
    double v = report_json_num(o, key);
    if (isfinite(v))
        html_emitf(p, "<td>%.3f</td>", v);
    else
        html_emit(p, "<td>-</td>");
}

/* One row of the retrieval table: a step (name) or one of its recall values. */
static void retr_row(struct html_page *p, const char *cls, const char *name, const json_t *o,
                     const json_t *quality)
{
    html_emitf(p, "<tr%s><td>", cls);
    html_esc(p, name);
    html_emitf(p, "</td><td>%.0f</td>", report_json_num(o, "searches"));
    if (quality) { /* a step: recall mean and p5; its answers' ROUGE-L mean */
        retr_cell(p, o, "recall_mean");
        retr_cell(p, o, "recall_p5");
        html_emitf(p, "<td>%.0f</td>", report_json_num(o, "answers"));
        retr_cell(p, report_json_obj(quality, "rouge_l"), "mean");
        retr_cell(p, quality, "exact_match_rate");
    } else {
        retr_cell(p, o, "recall");
        html_emitf(p, "<td></td><td>%.0f</td>", report_json_num(o, "answers"));
        retr_cell(p, o, "rouge_l_mean");
        retr_cell(p, o, "exact_match_rate");
    }
    retr_cell(p, o, "quality_ok_rate");
    html_emit(p, "</tr>\n");
}

/* The flows' retrieval steps: recall@k next to the quality of the answers it led to. */
static void retrieval_table(struct html_page *p, const json_t *classes)
{
    bool head = false;
    const json_t *c, *st, *b;
    size_t i, k, j;
    json_array_foreach(classes, i, c) json_array_foreach(report_json_arr(c, "steps"), k, st)
    {
        const json_t *r = report_json_obj(st, "retrieval");
        if (!r)
            continue;
        if (!head) {
            html_emit(p, "<h3>Retrieval steps: recall@k and the answers it led to</h3>\n"
                         "<p class=\"sub\">Each retrieval step's searches judged against the "
                         "exact ranking of the same passages, and the answers of the flow that "
                         "followed them, scored against the reference; by recall below each "
                         "step.</p>\n<div class=\"tablewrap\"><table class=\"retrieval\"><tr>"
                         "<th>class/step, recall</th><th>searches</th><th>recall@k</th>"
                         "<th>p5</th><th>answers</th><th>ROUGE-L</th><th>exact match</th>"
                         "<th>quality-ok</th></tr>\n");
            head = true;
        }
        char name[256];
        const char *cn = report_json_str(c, "name"), *sn = report_json_str(st, "name");
        snprintf(name, sizeof(name), "%s/%s (k %.0f)", cn ? cn : "?", sn ? sn : "?",
                 report_json_num(r, "k"));
        const json_t *q = report_json_obj(r, "quality");
        retr_row(p, "", name, r, q ? q : r);
        json_array_foreach(report_json_arr(r, "by_recall"), j, b)
        {
            snprintf(name, sizeof(name), "recall %.3f (%.0f hits)", report_json_num(b, "recall"),
                     report_json_num(b, "hits"));
            retr_row(p, " class=\"sub\"", name, b, NULL);
        }
    }
    if (head)
        html_emit(p, "</table></div>\n");
}

void html_run_section(struct html_page *p, const struct report_doc *d)
{
    int run = ++p->nrun;
    html_emitf(p, "<section class=\"run\" id=\"run%d\"><h2>Run ", run);
    html_esc(p, d->name);
    html_emit(p, "</h2>\n");
    run_meta(p, d);
    slo_table(p, d);
    latency_table(p, d);
    itl_notes(p, d);
    html_timeline_charts(p, d, run);
    html_length_charts(p, d, run);
    html_itl_position_heatmap(p, d, run);
    html_emit(p, "<h3>Outcomes, tokens and streams</h3>\n");
    outcome_tables(p, d);
    error_table(p, d);
    const json_t *q = report_json_obj(d->doc, "quality");
    if (q) {
        html_emit(p, "<h3>Answer quality</h3>\n");
        html_kv_table(p, NULL, q);
    }
    const json_t *classes = report_json_arr(d->doc, "classes");
    if (json_array_size(classes)) {
        char id[64];
        json_t *t = classes_table(classes);
        snprintf(id, sizeof(id), "run%d-classes", run);
        html_emit(p, "<h3>Per class</h3>\n<p class=\"sub\">Each class of the scenario file on its "
                     "own: TTFT is the first token users see; a class of flows or RAG steps "
                     "counts every HTTP call it made.</p>\n");
        if (!t)
            p->rc = p->rc ? p->rc : -ENOMEM;
        else if (!p->rc)
            p->rc = report_html_group_table(p->out, id, NULL, t);
        json_decref(t);
    }
    retrieval_table(p, classes);
    const json_t *vs = report_json_obj(d->doc, "vector_search");
    if (vs) {
        html_emit(p, "<h3>Vector search: recall@k under load</h3>\n");
        html_kv_table(p, NULL, vs);
    }
    for (size_t k = 0; k < sizeof(group_keys) / sizeof(group_keys[0]); k++) {
        const json_t *g = report_json_obj(d->doc, group_keys[k][0]);
        char id[64];
        if (!g || !json_object_size(g))
            continue;
        snprintf(id, sizeof(id), "run%d-%s", run, group_keys[k][0]);
        html_emitf(p, "<h3>%s</h3>\n", group_keys[k][1]);
        if (!p->rc)
            p->rc = report_html_group_table(p->out, id, NULL, g);
    }
    const json_t *cfg = report_json_obj(d->doc, "run");
    if (cfg) {
        html_emit(p, "<details><summary>Run configuration</summary>\n");
        html_kv_table(p, NULL, cfg);
        html_emit(p, "</details>\n");
    }
    html_emit(p, "</section>\n");
}
