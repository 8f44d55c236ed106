/*
 * html_sweep_charts.c - one sweep's charts in the HTML report (see
 * html_sweep_charts.h): the steps' points gathered once, then each chart
 * built by its own function from a fresh chart description.
 */
#include "report/html_sweep_charts.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis/knee.h"
#include "analysis/slo.h"
#include "report/html_dist.h"
#include "report/svg.h"

/* Horizontal rules for the sweep's latency SLOs on metric ttft (the first
 * token, what the steps' ttft figures are), ttft_vllm or e2el. */
static size_t slo_rules(const json_t *sweep, struct svg_rule *rules, size_t max,
                        char (*labels)[SLO_EXPR_MAX + 8])
{
    const json_t *arr = report_json_arr(sweep, "slo"), *v;
    size_t i, n = 0;
    json_array_foreach(arr, i, v)
    {
        struct slo s;
        if (n == max || !json_is_string(v) || slo_parse(json_string_value(v), &s, NULL, 0))
            continue;
        if (!s.latency || (s.metric != STAT_TTFT && s.metric != STAT_TTFC && s.metric != STAT_E2EL))
            continue;
        snprintf(labels[n], SLO_EXPR_MAX + 8, "SLO %s", s.expr);
        rules[n] = (struct svg_rule){.at = s.value, .label = labels[n], .color = 3};
        n++;
    }
    return n;
}

/* A sweep's steps as point lists owned by the page, and what its charts share. */
struct sweep_points {
    int sw;            /* the sweep's number, for element ids */
    const json_t *doc; /* sweep.json */
    const json_t *knee, *mg, *cl;
    bool conc;                                  /* closed loop: the loads are user counts */
    const char *load_label;                     /* x axis of the charts against the load */
    struct html_vec *t50, *t99, *e50, *e99;     /* latency (ms) vs achieved throughput */
    struct html_vec *lt50, *lt99, *le50, *le99; /* latency (ms) vs load */
    struct html_vec *ach, *good, *sat;          /* throughput vs load; sat: saturated steps */
    struct html_vec *err;                       /* error rate (%) vs load */
    struct html_vec *rouge, *bleu, *em;         /* answer quality vs load */
    struct html_vec *rq, *rq5, *rp, *rp5;       /* recall@k (mean, p5) vs QPS and vs E2EL p99 */
    double lmin, lmax;                          /* the loads; lmin infinite: no step has one */
    double lat_lo, lat_hi;                      /* the positive latencies */
    bool quality;                               /* some step has answer quality */
    bool recall;                                /* some step has vector searches' recall */
};

/* The sweep's point lists, owned by the page; false (p->rc set) when one failed. */
static bool sweep_points_init(struct html_page *p, struct sweep_points *sp, const json_t *doc,
                              int sw)
{
    const char *mode = report_json_str(doc, "mode");

    memset(sp, 0, sizeof(*sp));
    sp->sw = sw;
    sp->doc = doc;
    sp->knee = report_json_obj(doc, "knee");
    sp->mg = report_json_obj(doc, "max_goodput");
    sp->cl = report_json_obj(doc, "critical_load");
    sp->conc = mode && !strcmp(mode, "concurrency");
    sp->load_label = sp->conc ? "concurrency (users)" : "offered load (req/s)";
    if (mode && strcmp(mode, "rate") && !sp->conc)
        sp->load_label = mode; /* sweep --vary NAME: its values are the x axis */
    sp->lmin = sp->lat_lo = INFINITY;
    sp->lmax = -INFINITY;
    struct html_vec **all[] = {&sp->t50,  &sp->t99,  &sp->e50,   &sp->e99,  &sp->lt50,
                               &sp->lt99, &sp->le50, &sp->le99,  &sp->ach,  &sp->good,
                               &sp->sat,  &sp->err,  &sp->rouge, &sp->bleu, &sp->em,
                               &sp->rq,   &sp->rq5,  &sp->rp,    &sp->rp5};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        *all[i] = html_page_vec(p);
    return !p->rc;
}

/* One step's points: latencies against throughput and load, throughput, errors, quality. */
static void sweep_step_points(struct html_page *p, struct sweep_points *sp, const json_t *st)
{
    double load = report_json_num(st, "load"), x = report_json_num(st, "achieved_rps");
    sp->lmin = fmin(sp->lmin, load);
    sp->lmax = fmax(sp->lmax, load);
    double v[4] = {report_json_num(st, "ttft_p50_ms"), report_json_num(st, "ttft_p99_ms"),
                   report_json_num(st, "e2el_p50_ms"), report_json_num(st, "e2el_p99_ms")};
    for (int k = 0; k < 4; k++) {
        if (v[k] > 0) {
            sp->lat_lo = fmin(sp->lat_lo, v[k]);
            sp->lat_hi = fmax(sp->lat_hi, v[k]);
        }
    }
    html_vec_push(p, sp->t50, x, v[0]);
    html_vec_push(p, sp->t99, x, v[1]);
    html_vec_push(p, sp->e50, x, v[2]);
    html_vec_push(p, sp->e99, x, v[3]);
    html_vec_push(p, sp->lt50, load, v[0]);
    html_vec_push(p, sp->lt99, load, v[1]);
    html_vec_push(p, sp->le50, load, v[2]);
    html_vec_push(p, sp->le99, load, v[3]);
    html_vec_push(p, sp->ach, load, x);
    html_vec_push(p, sp->good, load, report_json_num(st, "goodput_rps"));
    if (json_is_true(json_object_get(st, "saturated")))
        html_vec_push(p, sp->sat, load, x);
    html_vec_push(p, sp->err, load, 100 * report_json_num(st, "error_rate"));
    const json_t *q = report_json_obj(st, "quality");
    if (q) {
        sp->quality = true;
        html_vec_push(p, sp->rouge, load, report_json_num(q, "rouge_l_mean"));
        html_vec_push(p, sp->bleu, load, report_json_num(q, "bleu4_mean"));
        html_vec_push(p, sp->em, load, report_json_num(q, "exact_match_rate"));
    }
    const json_t *vs = report_json_obj(st, "vector_search");
    double qps = report_json_num(vs, "qps"), r = report_json_num(vs, "recall_mean");
    if (vs && isfinite(qps) && isfinite(r)) {
        double r5 = report_json_num(vs, "recall_p5");
        sp->recall = true;
        html_vec_push(p, sp->rq, qps, r);
        html_vec_push(p, sp->rq5, qps, r5);
        html_vec_push(p, sp->rp, v[3], r);
        html_vec_push(p, sp->rp5, v[3], r5);
    }
}

#define CHART_ID_MAX 64

/*
 * A fresh latency chart "sweep<N>-<name>" of a sweep (its id written into
 * id): p99 (dots) and p50 (dashed) of TTFT and E2EL against x, on a log axis
 * when the latencies span more than 30 times.
 */
static struct svg_chart sweep_latency_chart(const struct sweep_points *sp, struct svg_series *s,
                                            char id[CHART_ID_MAX], const char *name,
                                            const char *title, const char *xlabel,
                                            const struct html_vec *t50, const struct html_vec *t99,
                                            const struct html_vec *e50, const struct html_vec *e99)
{
    snprintf(id, CHART_ID_MAX, "sweep%d-%s", sp->sw, name);
    struct svg_chart c = {
        .id = id,
        .title = title,
        .x = {.label = xlabel, .min = NAN, .max = NAN, .include_zero = true},
        .y = {.label = "latency (ms)", .min = NAN, .max = NAN, .include_zero = true},
        .series = s,
        .nseries = 4,
        .note = "no data",
    };
    if (sp->lat_hi / sp->lat_lo > 30) {
        c.y.scale = SVG_SCALE_LOG;
        c.y.include_zero = false;
    }
    html_series(&s[0], t99, "TTFT p99", 0, SVG_LINE_DOTS);
    html_series(&s[1], e99, "E2EL p99", 1, SVG_LINE_DOTS);
    html_series(&s[2], t50, "TTFT p50", 0, SVG_LINE);
    s[2].dashed = true;
    html_series(&s[3], e50, "E2EL p50", 1, SVG_LINE);
    s[3].dashed = true;
    for (int k = 0; k < 4; k++)
        s[k].unit = "ms";
    return c;
}

/*
 * A fresh chart "sweep<N>-<name>" of a sweep against the offered load (its id
 * written into id), y from 0. The caller sets nseries.
 */
static struct svg_chart sweep_load_chart(const struct sweep_points *sp, struct svg_series *s,
                                         char id[CHART_ID_MAX], const char *name, const char *title,
                                         const char *ylabel)
{
    snprintf(id, CHART_ID_MAX, "sweep%d-%s", sp->sw, name);
    return (struct svg_chart){
        .id = id,
        .title = title,
        .x = {.label = sp->load_label, .min = NAN, .max = NAN, .include_zero = true},
        .y = {.label = ylabel, .min = NAN, .max = NAN, .include_zero = true},
        .series = s,
        .note = "no data",
    };
}

/*
 * Vertical lines at the knee's load and at the load of the max goodput, when
 * the sweep found them, appended to rules; returns how many (0 to 2).
 */
static size_t load_rules(const struct sweep_points *sp, struct svg_rule *rules, char (*labels)[96])
{
    size_t n = 0;
    char a[32];

    if (sp->knee && isfinite(report_json_num(sp->knee, "load"))) {
        snprintf(labels[n], 96, "knee at %s",
                 html_fmt_num(report_json_num(sp->knee, "load"), 2, a, sizeof(a)));
        rules[n] = (struct svg_rule){.vertical = true,
                                     .at = report_json_num(sp->knee, "load"),
                                     .label = labels[n],
                                     .color = 3};
        n++;
    }
    if (sp->mg && isfinite(report_json_num(sp->mg, "load"))) {
        snprintf(labels[n], 96, "max goodput at %s",
                 html_fmt_num(report_json_num(sp->mg, "load"), 2, a, sizeof(a)));
        rules[n] = (struct svg_rule){.vertical = true,
                                     .at = report_json_num(sp->mg, "load"),
                                     .label = labels[n],
                                     .color = 2};
        n++;
    }
    return n;
}

/* Latency vs achieved throughput: the hockey stick, the knee marked, the max goodput drawn. */
static void sweep_latency_throughput_chart(struct html_page *p, const struct sweep_points *sp)
{
    struct svg_series s[4];
    struct svg_rule rules[9];
    char slo_labels[8][SLO_EXPR_MAX + 8], mg_label[96], id[CHART_ID_MAX], a[32];
    struct svg_marker km = {0};

    struct svg_chart c =
        sweep_latency_chart(sp, s, id, "latency-throughput", "Latency vs achieved throughput",
                            "achieved throughput (req/s)", sp->t50, sp->t99, sp->e50, sp->e99);
    size_t nr = slo_rules(sp->doc, rules, 8, slo_labels);
    if (sp->mg && isfinite(report_json_num(sp->mg, "goodput_rps"))) {
        snprintf(mg_label, sizeof(mg_label), "max goodput %s req/s",
                 html_fmt_num(report_json_num(sp->mg, "goodput_rps"), 2, a, sizeof(a)));
        rules[nr++] = (struct svg_rule){.vertical = true,
                                        .at = report_json_num(sp->mg, "goodput_rps"),
                                        .label = mg_label,
                                        .color = 2};
    }
    if (sp->knee) {
        km = (struct svg_marker){.x = report_json_num(sp->knee, "throughput"),
                                 .y = report_json_num(sp->knee, "latency_ms"),
                                 .label = "knee",
                                 .color = 3};
        c.markers = &km;
        c.nmarkers = 1;
    }
    c.rules = rules;
    c.nrules = nr;
    html_chart(p, &c);
}

/* The same against the offered load: the knee and max-goodput loads as vertical lines. */
static void sweep_latency_load_chart(struct html_page *p, const struct sweep_points *sp)
{
    struct svg_series s[4];
    struct svg_rule rules[10];
    char slo_labels[8][SLO_EXPR_MAX + 8], load_labels[2][96], id[CHART_ID_MAX];

    struct svg_chart c =
        sweep_latency_chart(sp, s, id, "latency-load", "Latency vs offered load", sp->load_label,
                            sp->lt50, sp->lt99, sp->le50, sp->le99);
    size_t nr = slo_rules(sp->doc, rules, 8, slo_labels);
    nr += load_rules(sp, rules + nr, load_labels);
    c.rules = rules;
    c.nrules = nr;
    html_chart(p, &c);
}

/* Achieved throughput and goodput vs load, the ideal line (open loop), saturated steps. */
static void sweep_throughput_chart(struct html_page *p, const struct sweep_points *sp)
{
    struct svg_series s[4];
    struct svg_rule rules[2];
    char load_labels[2][96], id[CHART_ID_MAX];

    struct svg_chart c =
        sweep_load_chart(sp, s, id, "throughput", "Throughput vs offered load", "requests/s");
    html_series(&s[0], sp->ach, "achieved", 0, SVG_LINE_DOTS);
    html_series(&s[1], sp->good, "goodput (within SLOs)", 2, SVG_LINE_DOTS);
    s[0].unit = s[1].unit = "req/s";
    c.nseries = 2;
    if (!sp->conc) {
        struct html_vec *ideal = html_page_vec(p);
        html_vec_push(p, ideal, sp->lmin, sp->lmin);
        html_vec_push(p, ideal, sp->lmax, sp->lmax);
        html_series(&s[c.nseries], ideal, "offered (ideal)", 7, SVG_LINE);
        s[c.nseries++].dashed = true;
    }
    if (sp->sat->n) {
        html_series(&s[c.nseries], sp->sat, "saturated step", 3, SVG_POINTS);
        s[c.nseries++].unit = "req/s";
    }
    c.rules = rules;
    c.nrules = load_rules(sp, rules, load_labels);
    html_chart(p, &c);
}

const char *html_sweep_lc_not_meaningful(const json_t *doc)
{
    const json_t *cl = report_json_obj(doc, "critical_load"), *st;
    const json_t *flag = json_object_get(cl, "meaningful");
    double lmax = 0;
    size_t i;

    if (!cl)
        return "no fit";
    if (json_is_boolean(flag)) {
        const char *why = report_json_str(cl, "not_meaningful_because");
        return json_is_true(flag) ? NULL : why ? why : "not meaningful";
    }
    json_array_foreach(report_json_arr(doc, "steps"), i, st)
    {
        double l = report_json_num(st, "load");
        lmax = isfinite(l) && l > lmax ? l : lmax;
    }
    return critical_fit_not_meaningful(report_json_num(cl, "lambda_c"), report_json_num(cl, "r2"),
                                       lmax);
}

/* Error rate vs load, with the exponential fit and its critical load when it is meaningful. */
static void sweep_errors_chart(struct html_page *p, const struct sweep_points *sp)
{
    struct svg_series s[2];
    struct svg_rule rule;
    char lc_label[96], id[CHART_ID_MAX], a[32];

    struct svg_chart c =
        sweep_load_chart(sp, s, id, "errors", "Error rate vs offered load", "error rate (%)");
    html_series(&s[0], sp->err, "error rate", 3, SVG_LINE_DOTS);
    s[0].unit = "%";
    c.nseries = 1;
    if (sp->cl && !html_sweep_lc_not_meaningful(sp->doc)) {
        double lc = report_json_num(sp->cl, "lambda_c"), e0 = report_json_num(sp->cl, "epsilon0");
        double dl = report_json_num(sp->cl, "delta_lambda");
        if (isfinite(lc) && isfinite(e0) && dl > 0) {
            struct html_vec *fit = html_page_vec(p);
            for (int k = 0; k <= 80; k++) {
                double l = sp->lmin + (sp->lmax - sp->lmin) * k / 80.0;
                double e = 100 * e0 * exp((l - lc) / dl);
                html_vec_push(p, fit, l, e > 100 ? NAN : e);
            }
            html_series(&s[1], fit, "fit \u03b5\u2080\u00b7exp((\u03bb\u2212\u03bbc)/\u0394\u03bb)",
                        7, SVG_LINE);
            s[1].dashed = true;
            c.nseries = 2;
            snprintf(lc_label, sizeof(lc_label), "\u03bbc = %s", html_fmt_num(lc, 2, a, sizeof(a)));
            rule = (struct svg_rule){.vertical = true, .at = lc, .label = lc_label, .color = 3};
            c.rules = &rule;
            c.nrules = 1;
        }
    }
    html_chart(p, &c);
}

/* ROUGE-L, BLEU-4 and exact match vs load (0 to 1). */
static void sweep_quality_chart(struct html_page *p, const struct sweep_points *sp)
{
    struct svg_series s[3];
    char id[CHART_ID_MAX];

    struct svg_chart c =
        sweep_load_chart(sp, s, id, "quality", "Answer quality vs offered load", "score (0 to 1)");
    c.y.min = 0;
    c.y.max = 1;
    html_series(&s[0], sp->rouge, "ROUGE-L", 0, SVG_LINE_DOTS);
    html_series(&s[1], sp->bleu, "BLEU-4", 1, SVG_LINE_DOTS);
    html_series(&s[2], sp->em, "exact match", 2, SVG_LINE_DOTS);
    c.nseries = 3;
    html_chart(p, &c);
}

/*
 * recall@k against QPS and against E2EL p99 (a sweep over a search breadth:
 * each point one step), the recall knee marked: the trade-off a vector
 * index makes, read left to right as the breadth grows.
 */
static void sweep_recall_charts(struct html_page *p, const struct sweep_points *sp)
{
    const json_t *rk = report_json_obj(sp->doc, "recall_knee");
    static const struct {
        const char *name, *title, *xlabel, *key;
    } kinds[] = {
        {"recall-qps", "Recall@k vs queries per second", "queries/s", "qps"},
        {"recall-p99", "Recall@k vs latency p99", "E2EL p99 (ms)", "e2el_p99_ms"},
    };
    for (int k = 0; k < 2; k++) {
        struct svg_series s[2];
        struct svg_marker km;
        char id[CHART_ID_MAX];
        snprintf(id, sizeof(id), "sweep%d-%s", sp->sw, kinds[k].name);
        struct svg_chart c = {
            .id = id,
            .title = kinds[k].title,
            .x = {.label = kinds[k].xlabel, .min = NAN, .max = NAN, .include_zero = true},
            .y = {.label = "recall@k", .min = 0, .max = 1},
            .series = s,
            .nseries = 2,
            .note = "no data",
        };
        html_series(&s[0], k ? sp->rp : sp->rq, "recall mean", 0, SVG_LINE_DOTS);
        html_series(&s[1], k ? sp->rp5 : sp->rq5, "recall p5", 1, SVG_LINE);
        s[1].dashed = true;
        double kx = report_json_num(rk, kinds[k].key), ky = report_json_num(rk, "recall_mean");
        if (isfinite(kx) && isfinite(ky)) {
            km = (struct svg_marker){.x = kx, .y = ky, .label = "recall knee", .color = 3};
            c.markers = &km;
            c.nmarkers = 1;
        }
        html_chart(p, &c);
    }
}

/* Each step's own TTFT and E2EL distributions overlaid, when its result is there. */
static void sweep_step_dists(struct html_page *p, const struct report_doc *d, const json_t *steps,
                             int sw)
{
    const struct report_doc *docs[HTML_DIST_SERIES_MAX];
    const char *labels[HTML_DIST_SERIES_MAX];
    char names[HTML_DIST_SERIES_MAX][48], a[32];
    size_t n = 0;

    for (size_t k = 0; k < d->nsteps && n < HTML_DIST_SERIES_MAX; k++) {
        if (!d->steps[k].doc)
            continue;
        docs[n] = &d->steps[k];
        snprintf(names[n], sizeof(names[n]), "load %s",
                 html_fmt_num(report_json_num(json_array_get(steps, k), "load"), 2, a, sizeof(a)));
        /* "8.00" -> "8" */
        char *dot = strchr(names[n], '.');
        if (dot && !strcmp(dot, ".00"))
            *dot = '\0';
        labels[n] = names[n];
        n++;
    }
    if (n) {
        char idp[32];
        snprintf(idp, sizeof(idp), "sweep%d", sw);
        html_dist_charts(p, idp, docs, labels, n, STAT_TTFT, "ttft", "TTFT");
        html_dist_charts(p, idp, docs, labels, n, STAT_E2EL, "e2el", "E2EL");
    }
}

/*
 * The sweep's charts in a <div class="charts">. Returns false, drawing
 * nothing, when no step has a load (or p->rc is set).
 */
bool html_sweep_charts(struct html_page *p, const struct report_doc *d, int sw)
{
    const json_t *steps = report_json_arr(d->doc, "steps"), *st;
    struct sweep_points sp;
    size_t i;

    if (!sweep_points_init(p, &sp, d->doc, sw))
        return false;
    json_array_foreach(steps, i, st) sweep_step_points(p, &sp, st);
    if (p->rc || !isfinite(sp.lmin))
        return false;
    html_emit(p, "<div class=\"charts\">\n");
    sweep_latency_throughput_chart(p, &sp);
    sweep_latency_load_chart(p, &sp);
    sweep_throughput_chart(p, &sp);
    sweep_errors_chart(p, &sp);
    if (sp.quality)
        sweep_quality_chart(p, &sp);
    if (sp.recall)
        sweep_recall_charts(p, &sp);
    sweep_step_dists(p, d, steps, sw);
    html_emit(p, "</div>\n");
    return true;
}
