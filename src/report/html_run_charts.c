/*
 * html_run_charts.c - one run's charts in the HTML report (see
 * html_run_charts.h): each chart built by its own function from a fresh
 * chart description.
 */
#include "report/html_run_charts.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "report/svg.h"

/* Faults of a result as chart bands. */
static size_t fault_bands(const json_t *doc, struct svg_band *bands, size_t max)
{
    const json_t *arr = report_json_arr(doc, "faults"), *v;
    size_t i, n = 0;
    json_array_foreach(arr, i, v)
    {
        double a = report_json_num(v, "start_s"), b = report_json_num(v, "end_s");
        if (n == max || !isfinite(a))
            continue;
        bands[n].x0 = a;
        bands[n].x1 = isfinite(b) ? b : a;
        bands[n].label = report_json_str(v, "name");
        n++;
    }
    return n;
}

#define BANDS_MAX 64

/* A run's timeline as point lists owned by the page, and its fault windows. */
struct timeline {
    int run; /* the run's number, for element ids */
    struct svg_band bands[BANDS_MAX];
    size_t nbands;
    /* from "timeline": per-second rates (a gap where a second is missing) */
    struct html_vec *sent, *done, *errs, *inflight, *tok, *chunks;
    struct html_vec *t50, *t99; /* TTFT (ms); a gap where a second measured none */
    /* from "server_timeline" */
    struct html_vec *srun, *swait, *spre, *skv, *sttft;
    bool kv_percent; /* kv_usage came in percent, not as a fraction */
};

/* The points of the run's own timeline: counts per second turned into rates. */
static void timeline_points(struct html_page *p, const json_t *arr, struct timeline *tl)
{
    const json_t *pt;
    size_t i;
    double prev = 0;

    json_array_foreach(arr, i, pt)
    {
        double t = report_json_num(pt, "t_s");
        if (!isfinite(t))
            continue;
        double dt = t - prev;
        prev = t;
        if (!(dt > 0.05))
            dt = NAN;
        double completed = report_json_num(pt, "completed");
        html_vec_push(p, tl->sent, t, report_json_num(pt, "sent") / dt);
        html_vec_push(p, tl->done, t, completed / dt);
        html_vec_push(p, tl->errs, t, report_json_num(pt, "errors") / dt);
        html_vec_push(p, tl->inflight, t, report_json_num(pt, "in_flight"));
        html_vec_push(p, tl->tok, t, report_json_num(pt, "output_tokens") / dt);
        html_vec_push(p, tl->chunks, t, report_json_num(pt, "chunks") / dt);
        /* A second in which no TTFT was measured has 0 there: leave a gap. */
        double a = report_json_num(pt, "ttft_p50_ms"), b = report_json_num(pt, "ttft_p99_ms");
        html_vec_push(p, tl->t50, t, a > 0 ? a : NAN);
        html_vec_push(p, tl->t99, t, b > 0 ? b : NAN);
    }
}

/* The points of the server's scraped timeline. */
static void server_points(struct html_page *p, const json_t *arr, struct timeline *tl)
{
    const json_t *pt;
    size_t i;

    json_array_foreach(arr, i, pt)
    {
        double t = report_json_num(pt, "t_s");
        if (!isfinite(t))
            continue;
        html_vec_push(p, tl->srun, t, report_json_num(pt, "running"));
        html_vec_push(p, tl->swait, t, report_json_num(pt, "waiting"));
        html_vec_push(p, tl->spre, t, report_json_num(pt, "preemptions"));
        double kv = report_json_num(pt, "kv_usage");
        html_vec_push(p, tl->skv, t, kv);
        tl->kv_percent |= kv > 1.0;
        double st = report_json_num(pt, "ttft_p50_ms");
        html_vec_push(p, tl->sttft, t, st > 0 ? st : NAN);
    }
}

#define CHART_ID_MAX 64

/*
 * A fresh timeline chart "run<N>-timeline-<name>" (its id written into id)
 * of the series s: seconds from 0 on x, y from 0, the fault windows shaded.
 * The caller sets nseries.
 */
static struct svg_chart timeline_chart(const struct timeline *tl, struct svg_series *s,
                                       char id[CHART_ID_MAX], const char *name, const char *title,
                                       const char *ylabel)
{
    snprintf(id, CHART_ID_MAX, "run%d-timeline-%s", tl->run, name);
    return (struct svg_chart){
        .id = id,
        .title = title,
        .height = 300,
        .x = {.label = "time (s)", .min = 0, .max = NAN},
        .y = {.label = ylabel, .min = NAN, .max = NAN, .include_zero = true},
        .series = s,
        .bands = tl->bands,
        .nbands = tl->nbands,
        .band_legend = "fault window",
        .note = "no data",
    };
}

/* Offered (sent) and achieved (completed) requests per second, and errors. */
static void timeline_rate_chart(struct html_page *p, const struct timeline *tl)
{
    struct svg_series s[3];
    char id[CHART_ID_MAX];

    struct svg_chart c =
        timeline_chart(tl, s, id, "rate", "Request rate: offered and achieved", "requests/s");
    html_series(&s[0], tl->sent, "offered (sent)", 7, SVG_LINE);
    s[0].dashed = true;
    html_series(&s[1], tl->done, "achieved (completed)", 0, SVG_LINE);
    html_series(&s[2], tl->errs, "errors", 3, SVG_LINE);
    c.nseries = 3;
    html_chart(p, &c);
}

/* Requests in flight at each second. */
static void timeline_inflight_chart(struct html_page *p, const struct timeline *tl)
{
    struct svg_series s[1];
    char id[CHART_ID_MAX];

    struct svg_chart c = timeline_chart(tl, s, id, "inflight", "Requests in flight", "requests");
    html_series(&s[0], tl->inflight, "in flight", 4, SVG_LINE);
    c.nseries = 1;
    html_chart(p, &c);
}

/* Output tokens and chunks per second. */
static void timeline_tokens_chart(struct html_page *p, const struct timeline *tl)
{
    struct svg_series s[2];
    char id[CHART_ID_MAX];

    struct svg_chart c =
        timeline_chart(tl, s, id, "tokens", "Output tokens and chunks per second", "per second");
    html_series(&s[0], tl->tok, "output tokens/s", 2, SVG_LINE);
    html_series(&s[1], tl->chunks, "chunks/s", 1, SVG_LINE);
    s[1].dashed = true;
    c.nseries = 2;
    html_chart(p, &c);
}

/* TTFT p50 and p99 per second, and the server's own p50 when it was scraped. */
static void timeline_ttft_chart(struct html_page *p, const struct timeline *tl)
{
    struct svg_series s[3];
    char id[CHART_ID_MAX];

    struct svg_chart c = timeline_chart(tl, s, id, "ttft", "TTFT over time", "TTFT (ms)");
    html_series(&s[0], tl->t50, "p50", 0, SVG_LINE);
    html_series(&s[1], tl->t99, "p99", 3, SVG_LINE);
    c.nseries = 2;
    if (tl->sttft->n) {
        html_series(&s[2], tl->sttft, "server p50", 2, SVG_LINE);
        s[2].dashed = true;
        c.nseries = 3;
    }
    html_chart(p, &c);
}

/* The server's batch (running), queue (waiting) and preemptions. */
static void timeline_server_chart(struct html_page *p, const struct timeline *tl)
{
    struct svg_series s[3];
    char id[CHART_ID_MAX];

    struct svg_chart c =
        timeline_chart(tl, s, id, "server", "Server: batch and queue (scraped)", "requests");
    html_series(&s[0], tl->srun, "running", 0, SVG_LINE);
    html_series(&s[1], tl->swait, "waiting", 1, SVG_LINE);
    html_series(&s[2], tl->spre, "preemptions", 3, SVG_LINE);
    s[2].dashed = true;
    c.nseries = 3;
    html_chart(p, &c);
}

/* The server's KV cache usage in percent (scaled from a fraction when it came as one). */
static void timeline_kv_chart(struct html_page *p, struct timeline *tl)
{
    struct svg_series s[1];
    char id[CHART_ID_MAX];

    if (!tl->kv_percent)
        for (size_t k = 0; k < tl->skv->n; k++)
            tl->skv->y[k] *= 100;
    struct svg_chart c =
        timeline_chart(tl, s, id, "kv", "Server: KV cache usage (scraped)", "KV cache used (%)");
    c.y.min = 0;
    c.y.max = 100;
    html_series(&s[0], tl->skv, "KV cache usage", 4, SVG_LINE);
    c.nseries = 1;
    html_chart(p, &c);
}

/* The point lists of a timeline, owned by the page; false (p->rc set) when one failed. */
static bool timeline_init(struct html_page *p, struct timeline *tl, const json_t *doc, int run)
{
    memset(tl, 0, sizeof(*tl));
    tl->run = run;
    tl->nbands = fault_bands(doc, tl->bands, BANDS_MAX);
    struct html_vec **all[] = {&tl->sent,   &tl->done, &tl->errs, &tl->inflight, &tl->tok,
                               &tl->chunks, &tl->t50,  &tl->t99,  &tl->srun,     &tl->swait,
                               &tl->spre,   &tl->skv,  &tl->sttft};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        *all[i] = html_page_vec(p);
    return !p->rc;
}

/*
 * The run's timeline charts: rate, in flight, tokens and TTFT from its own
 * timeline, the server's batch and KV cache when it was scraped.
 */
void html_timeline_charts(struct html_page *p, const struct report_doc *d, int run)
{
    const json_t *arr = report_json_arr(d->doc, "timeline"),
                 *srv = report_json_arr(d->doc, "server_timeline");
    struct timeline tl;

    if (!timeline_init(p, &tl, d->doc, run))
        return;
    html_emit(p, "<h3>Timeline</h3>");
    if (!json_array_size(arr) && !json_array_size(srv)) {
        html_emit(p, "<p class=\"note\">This result has no timeline.</p>\n");
        return;
    }
    html_emit(p, "<p class=\"sub\">Per-second points from the start of the measured window.");
    if (tl.nbands)
        html_emit(p, " Shaded: fault windows.");
    html_emit(p, "</p>\n<div class=\"charts\">\n");
    timeline_points(p, arr, &tl);
    server_points(p, srv, &tl);
    if (p->rc)
        return;
    if (json_array_size(arr)) {
        timeline_rate_chart(p, &tl);
        timeline_inflight_chart(p, &tl);
        timeline_tokens_chart(p, &tl);
        timeline_ttft_chart(p, &tl);
    }
    if (tl.srun->n) {
        timeline_server_chart(p, &tl);
        timeline_kv_chart(p, &tl);
    }
    html_emit(p, "</div>\n");
}

/* Position buckets with fewer gaps than this are left empty: their percentiles are noise. */
#define ITL_POS_MIN_COUNT 20

/* Rows of the ITL heatmap: the percentiles, and their keys in "itl_by_position". */
static const char *const itl_rows[3] = {"p50", "p90", "p99"};
static const char *const itl_keys[3] = {"p50_ms", "p90_ms", "p99_ms"};

/*
 * The first n buckets of "itl_by_position" as heatmap columns: their labels
 * ("0-15", "256+") into labels and cols, their percentiles into vals (row
 * major, NAN for a bucket with too few gaps), and the positive values'
 * range into *lo and *hi.
 */
static void itl_cells(const json_t *arr, size_t n, char (*labels)[32], const char **cols,
                      double *vals, double *lo, double *hi)
{
    const json_t *v;
    size_t i;

    json_array_foreach(arr, i, v)
    {
        if (i >= n)
            break;
        double from = report_json_num(v, "from"), to = report_json_num(v, "to");
        double count = report_json_num(v, "count");
        if (isfinite(to))
            snprintf(labels[i], sizeof(labels[i]), "%.0f-%.0f", from, to);
        else
            snprintf(labels[i], sizeof(labels[i]), "%.0f+", from);
        cols[i] = labels[i];
        for (int r = 0; r < 3; r++) {
            double x = count >= ITL_POS_MIN_COUNT ? report_json_num(v, itl_keys[r]) : NAN;
            vals[r * n + i] = x;
            if (x > 0) {
                *lo = fmin(*lo, x);
                *hi = fmax(*hi, x);
            }
        }
    }
}

/* The heatmap "run<N>-itl-position" of the cells, log-coloured when they span over 20 times. */
static void itl_heatmap_chart(struct html_page *p, int run, const char *const *cols, size_t n,
                              const double *vals, double lo, double hi)
{
    char id[64];

    snprintf(id, sizeof(id), "run%d-itl-position", run);
    struct svg_heatmap h = {
        .id = id,
        .title = "Inter-token latency by token position",
        .width = 1000,
        .height = 250,
        .row_labels = itl_rows,
        .nrows = 3,
        .col_labels = cols,
        .ncols = n,
        .values = vals,
        .x_label = "token position in the answer (bucket)",
        .y_label = "percentile",
        .value_label = "ITL (ms)",
        .log_scale = hi / lo > 20,
    };
    html_emit(p,
              "<h3>Inter-token latency by position</h3><p class=\"sub\">Each column is a range of "
              "token positions in the answers; a slowdown late in long answers shows up as a "
              "brighter right side. Buckets with fewer than 20 gaps are left empty.</p>\n<figure "
              "class=\"chart wide\">");
    if (!p->rc)
        p->rc = svg_heatmap_render(&h, p->out);
    html_emit(p, "</figure>\n");
}

/* The ITL-by-position heatmap of a run that has "itl_by_position" (its first 32 buckets). */
void html_itl_position_heatmap(struct html_page *p, const struct report_doc *d, int run)
{
    const json_t *arr = report_json_arr(d->doc, "itl_by_position");
    size_t n = json_array_size(arr);
    char(*labels)[32] = NULL;
    const char **cols = NULL;
    double *vals = NULL;
    double lo = INFINITY, hi = 0;

    if (!n)
        return;
    if (n > 32)
        n = 32;
    labels = ts_calloc(n, sizeof(*labels));
    cols = ts_calloc(n, sizeof(*cols));
    vals = ts_calloc(3 * n, sizeof(*vals));
    if (!labels || !cols || !vals) {
        p->rc = -ENOMEM;
        goto out_free;
    }
    itl_cells(arr, n, labels, cols, vals, &lo, &hi);
    itl_heatmap_chart(p, run, cols, n, vals, lo, hi);
out_free:
    ts_free(vals);
    ts_free(cols);
    ts_free(labels);
}

/* ---- lengths, from the sample of requests ---------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The CDF of n values (sorted in place) as a step series' points. */
static struct html_vec *cdf_points(struct html_page *p, double *v, size_t n)
{
    struct html_vec *vec = html_page_vec(p);
    qsort(v, n, sizeof(*v), cmp_double);
    for (size_t i = 0; vec && i < n; i++)
        html_vec_push(p, vec, v[i], 100.0 * (double)(i + 1) / (double)n);
    return vec;
}

static void lengths_cdf_chart(struct html_page *p, const struct reqsample *sm, int run)
{
    double *in = ts_malloc(sm->n * sizeof(*in)), *out = ts_malloc(sm->n * sizeof(*out));
    struct svg_series s[2];
    char id[CHART_ID_MAX];

    if (!in || !out) {
        ts_free(in);
        ts_free(out);
        p->rc = p->rc ? p->rc : -ENOMEM;
        return;
    }
    for (uint32_t i = 0; i < sm->n; i++) {
        in[i] = sm->e[i].input_tokens;
        out[i] = sm->e[i].output_tokens;
    }
    snprintf(id, sizeof(id), "run%d-lengths", run);
    struct svg_chart c = {
        .id = id,
        .title = "Input and output lengths (CDF)",
        .height = 300,
        .x = {.label = "tokens", .min = NAN, .max = NAN, .include_zero = true},
        .y = {.label = "requests at or below (%)", .min = 0, .max = 100},
        .series = s,
        .nseries = 2,
        .note = "no data",
    };
    html_series(&s[0], cdf_points(p, in, sm->n), "input", 0, SVG_STEP);
    html_series(&s[1], cdf_points(p, out, sm->n), "output", 2, SVG_STEP);
    if (!p->rc)
        html_chart(p, &c);
    ts_free(in);
    ts_free(out);
}

/* A scatter of the sample: x its input (or output) length, y its TTFT (or E2EL). */
static void lengths_scatter(struct html_page *p, const struct reqsample *sm, int run, bool ttft)
{
    struct html_vec *v = html_page_vec(p);
    struct svg_series s[1];
    char id[CHART_ID_MAX];

    for (uint32_t i = 0; v && i < sm->n; i++) {
        const struct reqsample_entry *e = &sm->e[i];
        html_vec_push(p, v, ttft ? e->input_tokens : e->output_tokens,
                      ttft ? e->ttft_ms : e->e2el_ms);
    }
    snprintf(id, sizeof(id), "run%d-%s", run, ttft ? "ttft-input" : "e2el-output");
    struct svg_chart c = {
        .id = id,
        .title = ttft ? "Time to first token against input length" : "E2EL against output length",
        .height = 300,
        .x = {.label = ttft ? "input tokens" : "output tokens",
              .min = NAN,
              .max = NAN,
              .include_zero = true},
        .y = {.label = ttft ? "TTFT (ms)" : "E2EL (ms)",
              .min = NAN,
              .max = NAN,
              .include_zero = true},
        .series = s,
        .nseries = 1,
        .note = "no request with this measure",
    };
    html_series(&s[0], v, ttft ? "request (first token users see)" : "request", ttft ? 0 : 4,
                SVG_POINTS);
    html_chart(p, &c);
}

void html_length_charts(struct html_page *p, const struct report_doc *d, int run)
{
    const struct reqsample *sm = d->stats ? &d->stats->sample : NULL;

    if (!sm || !sm->n || p->rc)
        return;
    html_emitf(p,
               "<h3>Lengths and latency</h3><p class=\"sub\">A uniform sample of %u successful "
               "requests (of %" PRIu64 "): their input and output lengths, and their latency "
               "against them.</p>\n<div class=\"charts\">\n",
               sm->n, d->sum.completed);
    lengths_cdf_chart(p, sm, run);
    lengths_scatter(p, sm, run, true);
    lengths_scatter(p, sm, run, false);
    html_emit(p, "</div>\n");
}
