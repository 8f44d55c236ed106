/*
 * html.c - the self-contained HTML report page (see html.h).
 *
 * The page is built into one buffer by a "page" whose error is sticky: each
 * emit does nothing once something failed, and report_html_build() returns
 * the first error. Arrays made for charts belong to the page and are freed
 * when it is done.
 */
#include "report/html.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "analysis/slo.h"
#include "base/alloc.h"
#include "base/hdr.h"
#include "report/svg.h"
#include "ts_config.h"

/* ---- the page builder ------------------------------------------------------------- */

struct vec {
    double *x, *y;
    size_t n, cap;
};

struct page {
    struct buf *out;
    int rc;
    struct vec **vecs; /* owned, freed by page_release */
    size_t nvecs, capvecs;
    int nrun, nsweep; /* sections so far, for element ids */
};

static void emit(struct page *p, const char *s)
{
    if (!p->rc)
        p->rc = buf_append_str(p->out, s);
}

static void emitf(struct page *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emitf(struct page *p, const char *fmt, ...)
{
    va_list ap;
    if (p->rc)
        return;
    va_start(ap, fmt);
    p->rc = buf_vappendf(p->out, fmt, ap);
    va_end(ap);
}

static void esc(struct page *p, const char *s)
{
    if (!p->rc)
        p->rc = svg_escape(p->out, s);
}

/* A new empty point list owned by the page; NULL (and p->rc set) on failure. */
static struct vec *page_vec(struct page *p)
{
    if (p->rc)
        return NULL;
    if (p->nvecs == p->capvecs) {
        size_t cap = p->capvecs ? p->capvecs * 2 : 32;
        struct vec **grown = ts_realloc(p->vecs, cap * sizeof(*grown));
        if (!grown) {
            p->rc = -ENOMEM;
            return NULL;
        }
        p->vecs = grown;
        p->capvecs = cap;
    }
    struct vec *v = ts_calloc(1, sizeof(*v));
    if (!v) {
        p->rc = -ENOMEM;
        return NULL;
    }
    p->vecs[p->nvecs++] = v;
    return v;
}

static void vec_push(struct page *p, struct vec *v, double x, double y)
{
    if (p->rc || !v)
        return;
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        double *nx = ts_realloc(v->x, cap * sizeof(double));
        if (!nx) {
            p->rc = -ENOMEM;
            return;
        }
        v->x = nx;
        double *ny = ts_realloc(v->y, cap * sizeof(double));
        if (!ny) {
            p->rc = -ENOMEM;
            return;
        }
        v->y = ny;
        v->cap = cap;
    }
    v->x[v->n] = x;
    v->y[v->n] = y;
    v->n++;
}

static void page_release(struct page *p)
{
    for (size_t i = 0; i < p->nvecs; i++) {
        ts_free(p->vecs[i]->x);
        ts_free(p->vecs[i]->y);
        ts_free(p->vecs[i]);
    }
    ts_free(p->vecs);
    p->vecs = NULL;
    p->nvecs = p->capvecs = 0;
}

static void chart(struct page *p, const struct svg_chart *c)
{
    if (p->rc)
        return;
    emit(p, "<figure class=\"chart\">");
    if (!p->rc)
        p->rc = svg_chart_render(c, p->out);
    emit(p, "</figure>\n");
}

static void series_of(struct svg_series *s, const struct vec *v, const char *name, int color,
                      enum svg_series_kind kind)
{
    memset(s, 0, sizeof(*s));
    s->name = name;
    s->color = color;
    s->kind = kind;
    if (v) {
        s->x = v->x;
        s->y = v->y;
        s->n = v->n;
    }
}

/* ---- formatting ------------------------------------------------------------------- */

/* Milliseconds with precision that suits their size; "-" for none. */
static const char *fmt_ms(double v, char *buf, size_t n)
{
    if (!isfinite(v))
        snprintf(buf, n, "-");
    else if (fabs(v) < 1)
        snprintf(buf, n, "%.3f", v);
    else if (fabs(v) < 10)
        snprintf(buf, n, "%.2f", v);
    else if (fabs(v) < 1000)
        snprintf(buf, n, "%.1f", v);
    else
        snprintf(buf, n, "%.0f", v);
    return buf;
}

static const char *fmt_num(double v, int decimals, char *buf, size_t n)
{
    if (!isfinite(v))
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%.*f", decimals, v);
    return buf;
}

/* A fraction as a percentage. */
static const char *fmt_pct(double frac, char *buf, size_t n)
{
    if (!isfinite(frac))
        snprintf(buf, n, "-");
    else if (frac != 0 && fabs(frac) < 0.001)
        snprintf(buf, n, "%.3f%%", frac * 100);
    else
        snprintf(buf, n, "%.2f%%", frac * 100);
    return buf;
}

/* A JSON scalar as text (numbers compactly); NULL for non-scalars. */
static const char *fmt_scalar(const json_t *v, char *buf, size_t n)
{
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_integer(v))
        snprintf(buf, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, n, "%.6g", json_real_value(v));
    else if (json_is_true(v))
        snprintf(buf, n, "yes");
    else if (json_is_false(v))
        snprintf(buf, n, "no");
    else if (json_is_null(v))
        snprintf(buf, n, "-");
    else
        return NULL;
    return buf;
}

/* ---- page frame -------------------------------------------------------------------- */

static const char page_css[] =
    ":root{--fg:#1f2328;--muted:#59636e;--line:#d8dee4;--bg:#f4f6f8;--ok:#1a7f37;--bad:#c62828}\n"
    "*{box-sizing:border-box}\n"
    "body{margin:0;font:14px/1.45 'DejaVu Sans',Helvetica,Arial,sans-serif;color:var(--fg);"
    "background:var(--bg)}\n"
    "header{background:#1f2937;color:#fff;padding:18px 28px}\n"
    "header h1{margin:0;font-size:22px;font-weight:600}\n"
    "header .meta{color:#cbd5e1;font-size:13px;margin-top:4px}\n"
    "nav{background:#fff;border-bottom:1px solid var(--line);padding:8px 28px;font-size:13px}\n"
    "nav a{color:#0b62c4;text-decoration:none;margin-right:16px;white-space:nowrap}\n"
    "main{max-width:1320px;margin:0 auto;padding:8px 24px 40px}\n"
    "section{background:#fff;border:1px solid var(--line);border-radius:8px;padding:16px 20px;"
    "margin:18px 0}\n"
    "h2{font-size:19px;margin:0 0 6px}\n"
    "h3{font-size:15px;margin:18px 0 8px}\n"
    ".sub{color:var(--muted);font-size:13px;margin:0 0 12px}\n"
    ".cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(128px,1fr));gap:8px;"
    "margin:8px 0 4px}\n"
    ".cards.wide{grid-template-columns:repeat(auto-fill,minmax(250px,1fr))}\n"
    ".card{border:1px solid var(--line);border-radius:6px;padding:9px 12px;background:#fafbfc}\n"
    ".card .k{font-size:12px;color:var(--muted)}\n"
    ".card .v{font-size:21px;font-weight:600;margin:2px 0;white-space:nowrap}\n"
    ".card .u{font-size:13px;font-weight:400;color:var(--muted)}\n"
    ".card .s{font-size:12px;color:var(--muted)}\n"
    ".card.bad .v{color:var(--bad)} .card.good .v{color:var(--ok)}\n"
    ".charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(500px,1fr));gap:14px}\n"
    "figure.chart{margin:0}\n"
    ".ts-chart{width:100%;height:auto;display:block;border:1px solid #eceff2;border-radius:4px}\n"
    ".tablewrap{overflow-x:auto}\n"
    "table{border-collapse:collapse;font-size:13px;margin:6px 0 12px}\n"
    "caption{text-align:left;font-weight:600;padding:4px 0}\n"
    "caption.note{font-weight:400}\n"
    "th,td{padding:4px 10px;border-bottom:1px solid #eceff2;text-align:right;white-space:nowrap}\n"
    "th{background:#f3f4f6;font-weight:600;white-space:normal;vertical-align:bottom}\n"
    "td:first-child,th:first-child{text-align:left}\n"
    "td.l,th.l{text-align:left}\n"
    "tr.sep td{background:#fafbfc;color:var(--muted);font-size:12px}\n"
    ".pass{color:var(--ok);font-weight:600} .fail{color:var(--bad);font-weight:600}\n"
    ".err{color:var(--bad)}\n"
    ".note{color:var(--muted);font-size:13px}\n"
    "details{margin-top:10px} details summary{cursor:pointer;color:var(--muted)}\n"
    ".two{display:flex;flex-wrap:wrap;gap:28px;align-items:flex-start}\n";

static void page_head(struct page *p, const struct report_docset *set,
                      const struct report_html_opts *opts)
{
    const char *title = opts && opts->title ? opts->title : "tokenstorm report";
    emit(p, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>");
    esc(p, title);
    if (set->n == 1) {
        emit(p, " - ");
        esc(p, set->docs[0].name);
    }
    emitf(p, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<header><h1>", page_css);
    esc(p, title);
    emit(p, "</h1><div class=\"meta\">");
    size_t nres = report_docset_count(set, REPORT_DOC_RESULT);
    size_t nsw = report_docset_count(set, REPORT_DOC_SWEEP);
    if (nres)
        emitf(p, "%zu run%s", nres, nres == 1 ? "" : "s");
    if (nsw)
        emitf(p, "%s%zu sweep%s", nres ? ", " : "", nsw, nsw == 1 ? "" : "s");
    emit(p, ": ");
    for (size_t i = 0; i < set->n; i++) {
        if (i)
            emit(p, ", ");
        esc(p, set->docs[i].name);
    }
    emitf(p, " &middot; tokenstorm %s", TS_VERSION);
    if (opts && opts->generated) {
        emit(p, " &middot; generated ");
        esc(p, opts->generated);
    }
    emit(p, "</div></header>\n");
}

static void page_nav(struct page *p, const struct report_docset *set)
{
    size_t nres = report_docset_count(set, REPORT_DOC_RESULT);
    int run = 0, sweep = 0;
    emit(p, "<nav>");
    if (nres)
        emit(p, "<a href=\"#overview\">Overview</a><a href=\"#distributions\">Distributions</a>");
    for (size_t i = 0; i < set->n; i++) {
        const struct report_doc *d = &set->docs[i];
        if (d->kind == REPORT_DOC_SWEEP)
            emitf(p, "<a href=\"#sweep%d\">Sweep ", ++sweep);
        else
            emitf(p, "<a href=\"#run%d\">Run ", ++run);
        esc(p, d->name);
        emit(p, "</a>");
    }
    emit(p, "</nav>\n<main>\n");
}

/* ---- small tables ------------------------------------------------------------------ */

/* A headline figure: key above, value (and its unit, smaller; may be NULL) big, sub below. */
static void card(struct page *p, const char *cls, const char *key, const char *value,
                 const char *unit, const char *sub)
{
    emitf(p, "<div class=\"card%s%s\"><div class=\"k\">", cls ? " " : "", cls ? cls : "");
    esc(p, key);
    emit(p, "</div><div class=\"v\">");
    esc(p, value);
    if (unit) {
        emit(p, " <span class=\"u\">");
        esc(p, unit);
        emit(p, "</span>");
    }
    emit(p, "</div>");
    if (sub) {
        emit(p, "<div class=\"s\">");
        esc(p, sub);
        emit(p, "</div>");
    }
    emit(p, "</div>\n");
}

/* A two-column table of a JSON object's scalars, nested objects flattened to a.b. */
static void kv_rows(struct page *p, const json_t *obj, const char *prefix, int depth)
{
    const char *key;
    const json_t *v;
    char buf[64], name[256];

    json_object_foreach((json_t *)obj, key, v)
    {
        snprintf(name, sizeof(name), "%s%s%s", prefix, *prefix ? "." : "", key);
        if (json_is_object(v) && depth < 3) {
            kv_rows(p, v, name, depth + 1);
            continue;
        }
        const char *text = fmt_scalar(v, buf, sizeof(buf));
        if (!text)
            continue;
        emit(p, "<tr><td>");
        esc(p, name);
        emit(p, "</td><td class=\"l\">");
        esc(p, text);
        emit(p, "</td></tr>\n");
    }
}

static void kv_table(struct page *p, const char *caption, const json_t *obj)
{
    emit(p, "<div class=\"tablewrap\"><table>");
    if (caption) {
        emit(p, "<caption>");
        esc(p, caption);
        emit(p, "</caption>");
    }
    kv_rows(p, obj, "", 0);
    emit(p, "</table></div>\n");
}

/* ---- group tables -------------------------------------------------------------------- */

enum col_fmt { COL_COUNT, COL_RATE, COL_PER_S, COL_MS, COL_BOOL, COL_RAW };

static const struct {
    const char *key, *title;
    enum col_fmt fmt;
} known_cols[] = {
    {"requests", "requests", COL_COUNT},
    {"completed", "completed", COL_COUNT},
    {"failed", "failed", COL_COUNT},
    {"error_rate", "error rate", COL_RATE},
    {"request_throughput", "req/s", COL_PER_S},
    {"goodput_rps", "goodput req/s", COL_PER_S},
    {"ttft_p50_ms", "TTFT p50 (ms)", COL_MS},
    {"ttft_p99_ms", "TTFT p99 (ms)", COL_MS},
    {"tpot_p50_ms", "TPOT p50 (ms)", COL_MS},
    {"tpot_p99_ms", "TPOT p99 (ms)", COL_MS},
    {"itl_p99_ms", "ITL p99 (ms)", COL_MS},
    {"e2el_p50_ms", "E2EL p50 (ms)", COL_MS},
    {"e2el_p99_ms", "E2EL p99 (ms)", COL_MS},
    {"slo_pass", "SLO", COL_BOOL},
};

#define GROUP_COLS_MAX 16

static int group_cell(struct buf *b, const json_t *v, enum col_fmt fmt)
{
    char buf[64];
    const char *text = NULL;
    const char *cls = "";

    if (!v || json_is_null(v)) {
        text = "-";
    } else if (fmt == COL_BOOL && json_is_boolean(v)) {
        text = json_is_true(v) ? "pass" : "FAIL";
        cls = json_is_true(v) ? " class=\"pass\"" : " class=\"fail\"";
    } else if (json_is_number(v)) {
        double x = json_number_value(v);
        switch (fmt) {
        case COL_RATE:
            text = fmt_pct(x, buf, sizeof(buf));
            break;
        case COL_PER_S:
            text = fmt_num(x, 2, buf, sizeof(buf));
            break;
        case COL_MS:
            text = fmt_ms(x, buf, sizeof(buf));
            break;
        default:
            text = fmt_scalar(v, buf, sizeof(buf));
        }
    } else {
        text = fmt_scalar(v, buf, sizeof(buf));
    }
    if (!text)
        text = "";
    int rc = buf_appendf(b, "<td%s>", cls);
    rc = rc ? rc : svg_escape(b, text);
    return rc ? rc : buf_append_str(b, "</td>");
}

int report_html_group_table(struct buf *out, const char *id, const char *title,
                            const json_t *groups)
{
    const char *cols[GROUP_COLS_MAX];
    enum col_fmt fmts[GROUP_COLS_MAX];
    size_t ncols = 0;
    const char *gname, *key;
    const json_t *g, *v;
    int rc;

    if (!json_is_object(groups) || json_object_size(groups) == 0)
        return 0;
    /* Known keys first, in their order, when any group has them. */
    for (size_t k = 0; k < sizeof(known_cols) / sizeof(known_cols[0]); k++) {
        json_object_foreach((json_t *)groups, gname, g)
        {
            if (json_is_object(g) && json_object_get(g, known_cols[k].key) &&
                ncols < GROUP_COLS_MAX) {
                cols[ncols] = known_cols[k].key;
                fmts[ncols++] = known_cols[k].fmt;
                break;
            }
        }
    }
    json_object_foreach((json_t *)groups, gname, g)
    {
        if (!json_is_object(g))
            continue;
        json_object_foreach((json_t *)g, key, v)
        {
            bool seen = false;
            if (json_is_object(v) || json_is_array(v))
                continue;
            for (size_t i = 0; i < ncols && !seen; i++)
                seen = !strcmp(cols[i], key);
            if (!seen && ncols < GROUP_COLS_MAX) {
                cols[ncols] = key;
                fmts[ncols++] = COL_RAW;
            }
        }
    }
    rc = buf_append_str(out, "<div class=\"tablewrap\"><table class=\"groups\"");
    if (!rc && id) {
        rc = buf_append_str(out, " id=\"");
        rc = rc ? rc : svg_escape(out, id);
        rc = rc ? rc : buf_append_char(out, '"');
    }
    rc = rc ? rc : buf_append_char(out, '>');
    if (!rc && title) {
        rc = buf_append_str(out, "<caption>");
        rc = rc ? rc : svg_escape(out, title);
        rc = rc ? rc : buf_append_str(out, "</caption>");
    }
    rc = rc ? rc : buf_append_str(out, "<tr><th>group</th>");
    for (size_t i = 0; !rc && i < ncols; i++) {
        const char *t = cols[i];
        for (size_t k = 0; k < sizeof(known_cols) / sizeof(known_cols[0]); k++)
            if (!strcmp(known_cols[k].key, cols[i]))
                t = known_cols[k].title;
        rc = buf_append_str(out, "<th>");
        rc = rc ? rc : svg_escape(out, t);
        rc = rc ? rc : buf_append_str(out, "</th>");
    }
    rc = rc ? rc : buf_append_str(out, "</tr>\n");
    json_object_foreach((json_t *)groups, gname, g)
    {
        if (rc)
            break;
        rc = buf_append_str(out, "<tr><td>");
        rc = rc ? rc : svg_escape(out, gname);
        rc = rc ? rc : buf_append_str(out, "</td>");
        for (size_t i = 0; !rc && i < ncols; i++)
            rc = group_cell(out, json_is_object(g) ? json_object_get(g, cols[i]) : NULL, fmts[i]);
        rc = rc ? rc : buf_append_str(out, "</tr>\n");
    }
    return rc ? rc : buf_append_str(out, "</table></div>\n");
}

/* ---- distributions ---------------------------------------------------------------------- */

/* CDF points of a microsecond histogram in (ms, % of requests <= ms). */
static struct vec *cdf_of(struct page *p, const struct hdr *h)
{
    struct vec *v = page_vec(p);
    int64_t total = hdr_total_count(h);
    struct hdr_iter it;

    if (!v || total == 0)
        return v;
    vec_push(p, v, (double)hdr_lowest_equivalent(h, hdr_min(h)) / 1000.0, 0);
    hdr_iter_recorded_init(&it, h);
    while (hdr_iter_next(&it))
        vec_push(p, v, (double)it.highest_equivalent / 1000.0,
                 100.0 * (double)it.cumulative_count / (double)total);
    return v;
}

/* Percentile spectrum points: (percentile, ms), HdrHistogram's percentile iteration. */
static struct vec *spectrum_of(struct page *p, const struct hdr *h)
{
    struct vec *v = page_vec(p);
    struct hdr_iter it;

    if (!v || hdr_total_count(h) == 0)
        return v;
    if (hdr_iter_percentile_init(&it, h, 5)) {
        p->rc = -EINVAL;
        return v;
    }
    while (hdr_iter_next(&it))
        vec_push(p, v, it.percentile, (double)it.value_iterated_to / 1000.0);
    return v;
}

static const struct {
    enum stat_metric m;
    const char *key, *label;
} dist_metrics[] = {
    {STAT_TTFT, "ttft", "TTFT"},
    {STAT_ITL, "itl", "ITL"},
    {STAT_E2EL, "e2el", "E2EL"},
};

#define SERIES_MAX 24

/* One metric's distribution series, one per document with samples, and their x axis. */
struct dist_series {
    struct svg_series cdf[SERIES_MAX], spec[SERIES_MAX];
    size_t n;
    bool logx; /* a long tail: latency on a log axis from t.lo to t.hi */
    struct svg_ticks t;
};

/*
 * The CDF and spectrum series of metric m for up to SERIES_MAX documents
 * (legend names from labels, NULL for none), and whether the latency axis is
 * logarithmic: when the maximum is 20 times the median or more. That axis
 * starts at the 1st percentile (or 1% of the median), so a handful of
 * near-zero values do not waste decades of it.
 */
static void dist_series_of(struct page *p, const struct report_doc *const *docs,
                           const char *const *labels, size_t n, enum stat_metric m,
                           struct dist_series *ds)
{
    double lo = INFINITY, hi = 0, med = INFINITY;

    ds->n = 0;
    ds->logx = false;
    if (n > SERIES_MAX)
        n = SERIES_MAX;
    for (size_t i = 0; i < n && !p->rc; i++) {
        const struct hdr *h = docs[i]->stats->hist[m];
        if (hdr_total_count(h) == 0)
            continue;
        double p1 = (double)hdr_value_at_percentile(h, 1) / 1000.0;
        double mx = (double)hdr_max(h) / 1000.0;
        double p50 = (double)hdr_value_at_percentile(h, 50) / 1000.0;
        if (p50 <= 0)
            p50 = 0.001;
        lo = fmin(lo, fmax(p1, p50 / 100)); /* a few zero gaps do not stretch a log axis */
        hi = fmax(hi, mx);
        med = fmin(med, p50);
        series_of(&ds->cdf[ds->n], cdf_of(p, h), labels[i], (int)i, SVG_STEP);
        series_of(&ds->spec[ds->n], spectrum_of(p, h), labels[i], (int)i, SVG_LINE);
        ds->n++;
    }
    ds->logx = ds->n && hi / med >= 20 && svg_ticks_log(lo, hi, 6, &ds->t) == 0;
}

/* The CDF chart "<idp>-<key>-cdf": latency on x, the share at or below it on y. */
static void dist_cdf_chart(struct page *p, const char *idp, enum stat_metric m, const char *key,
                           const char *what, struct dist_series *ds)
{
    char id[96], title[128], xlabel[64];

    snprintf(id, sizeof(id), "%s-%s-cdf", idp, key);
    snprintf(title, sizeof(title), "%s distribution (CDF)", what);
    snprintf(xlabel, sizeof(xlabel), "%s (ms)", what);
    struct svg_chart c = {
        .id = id,
        .title = title,
        .x = {.label = xlabel, .min = NAN, .max = NAN, .include_zero = true},
        .y = {.label = "requests at or below (%)", .min = 0, .max = 100},
        .series = ds->cdf,
        .nseries = ds->n,
        .note = "no samples",
    };
    if (m == STAT_ITL)
        c.y.label = "gaps at or below (%)";
    if (ds->logx) {
        c.x.scale = SVG_SCALE_LOG;
        c.x.include_zero = false;
        c.x.min = ds->t.lo;
        c.x.max = ds->t.hi;
    }
    chart(p, &c);
}

/* The spectrum chart "<idp>-<key>-spectrum": percentile on x (one step per nine), latency on y. */
static void dist_spectrum_chart(struct page *p, const char *idp, const char *key, const char *what,
                                struct dist_series *ds)
{
    char id[96], title[128], ylabel[64];

    snprintf(id, sizeof(id), "%s-%s-spectrum", idp, key);
    snprintf(title, sizeof(title), "%s percentile spectrum", what);
    snprintf(ylabel, sizeof(ylabel), "%s (ms)", what);
    struct svg_chart c = {
        .id = id,
        .title = title,
        .x = {.label = "percentile", .scale = SVG_SCALE_SPECTRUM, .min = NAN, .max = NAN},
        .y = {.label = ylabel, .min = NAN, .max = NAN, .include_zero = true},
        .series = ds->spec,
        .nseries = ds->n,
        .note = "no samples",
    };
    if (ds->logx) {
        c.y.scale = SVG_SCALE_LOG;
        c.y.include_zero = false;
        c.y.min = ds->t.lo;
        c.y.max = ds->t.hi;
    }
    chart(p, &c);
}

/*
 * CDF and spectrum of metric m for up to SERIES_MAX documents (legend names
 * from labels, NULL for none). idp is the id prefix ("dist", "sweep1"); what
 * is shown in titles.
 */
static void dist_charts(struct page *p, const char *idp, const struct report_doc *const *docs,
                        const char *const *labels, size_t n, enum stat_metric m, const char *key,
                        const char *what)
{
    struct dist_series ds;

    dist_series_of(p, docs, labels, n, m, &ds);
    if (p->rc)
        return;
    dist_cdf_chart(p, idp, m, key, what, &ds);
    dist_spectrum_chart(p, idp, key, what, &ds);
}

static void distributions_section(struct page *p, const struct report_docset *set)
{
    const struct report_doc *docs[SERIES_MAX];
    const char *labels[SERIES_MAX];
    size_t n = 0;

    for (size_t i = 0; i < set->n && n < SERIES_MAX; i++) {
        if (set->docs[i].kind != REPORT_DOC_RESULT)
            continue;
        docs[n] = &set->docs[i];
        labels[n++] = set->docs[i].name;
    }
    if (!n)
        return;
    if (n == 1)
        labels[0] = NULL; /* one run: no legend needed */
    emit(p, "<section id=\"distributions\"><h2>Latency distributions</h2><p class=\"sub\">");
    emit(p, "From the runs' HDR histograms (3 significant digits). TTFT and E2EL run from the "
            "intended send time and cover successful requests; ITL covers every gap between "
            "chunks. The percentile spectrum spreads the tail: each step right is one more "
            "nine.");
    if (n > 1)
        emit(p, " Runs are overlaid, one colour each.");
    emit(p, "</p>\n<div class=\"charts\">\n");
    for (size_t k = 0; k < sizeof(dist_metrics) / sizeof(dist_metrics[0]); k++)
        dist_charts(p, "dist", docs, labels, n, dist_metrics[k].m, dist_metrics[k].key,
                    dist_metrics[k].label);
    emit(p, "</div></section>\n");
}

/* ---- overview ------------------------------------------------------------------------- */

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

static void run_cards(struct page *p, const struct report_doc *d)
{
    const struct run_summary *s = &d->sum;
    char v[64], sub[160], a[32], b[32];

    emit(p, "<div class=\"cards\">\n");
    snprintf(v, sizeof(v), "%" PRIu64, s->requests);
    snprintf(sub, sizeof(sub), "%" PRIu64 " ok, %" PRIu64 " failed, %" PRIu64 " cut", s->completed,
             s->failed, s->cut);
    card(p, NULL, "requests", v, NULL, sub);
    snprintf(v, sizeof(v), "%.2f", s->request_throughput);
    snprintf(sub, sizeof(sub), "over %.1f s", s->duration_s);
    card(p, NULL, "throughput", v, "req/s", sub);
    snprintf(v, sizeof(v), "%.0f", s->output_throughput);
    snprintf(sub, sizeof(sub), "peak %.0f tok/s, total %.0f tok/s", s->max_output_tokens_per_s,
             s->total_token_throughput);
    card(p, NULL, "output tokens", v, "tok/s", sub);
    if (s->goodput_enabled) {
        snprintf(v, sizeof(v), "%.2f", s->request_goodput);
        snprintf(sub, sizeof(sub), "%" PRIu64 " good requests", s->good);
        card(p, NULL, "goodput", v, "req/s", sub);
    }
    card(p, s->failed ? "bad" : NULL, "error rate", fmt_pct(s->error_rate, v, sizeof(v)), NULL,
         s->failed ? "see outcomes below" : "no failed request");
    static const struct {
        enum stat_metric m;
        const char *label;
    } lat[] = {{STAT_TTFT, "TTFT p50"}, {STAT_ITL, "ITL p50"}, {STAT_E2EL, "E2EL p50"}};
    for (size_t i = 0; i < sizeof(lat) / sizeof(lat[0]); i++) {
        const struct latency_summary *l = &s->lat[lat[i].m];
        snprintf(v, sizeof(v), "%s", l->count ? fmt_ms(l->pct[0], a, sizeof(a)) : "-");
        snprintf(sub, sizeof(sub), "p99 %s ms, max %s ms",
                 l->count ? fmt_ms(l->pct[3], a, sizeof(a)) : "-",
                 l->count ? fmt_ms(l->max, b, sizeof(b)) : "-");
        card(p, NULL, lat[i].label, v, l->count ? "ms" : NULL, sub);
    }
    size_t pass, total;
    slo_counts(d->doc, &pass, &total);
    if (total) {
        snprintf(v, sizeof(v), "%zu / %zu", pass, total);
        card(p, pass == total ? "good" : "bad", "SLOs passed", v, NULL,
             pass == total ? "all hold" : "see the verdicts");
    }
    emit(p, "</div>\n");
}

static void compare_table(struct page *p, const struct report_docset *set)
{
    char a[32];
    emit(p, "<div class=\"tablewrap\"><table id=\"runs-table\"><tr><th>run</th><th>requests</th>"
            "<th>ok</th><th>failed</th><th>duration (s)</th><th>req/s</th><th>output tok/s</th>"
            "<th>error rate</th><th>TTFT p50 (ms)</th><th>TTFT p99 (ms)</th><th>ITL p99 (ms)</th>"
            "<th>E2EL p50 (ms)</th><th>E2EL p99 (ms)</th><th>SLOs</th></tr>\n");
    int color = 0;
    for (size_t i = 0; i < set->n; i++) {
        const struct report_doc *d = &set->docs[i];
        if (d->kind != REPORT_DOC_RESULT)
            continue;
        const struct run_summary *s = &d->sum;
        emitf(p, "<tr><td><span style=\"color:%s\">&#9632;</span> ", svg_color(color++));
        esc(p, d->name);
        emitf(p, "</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td><td%s>%" PRIu64 "</td>", s->requests,
              s->completed, s->failed ? " class=\"err\"" : "", s->failed);
        emitf(p, "<td>%.1f</td><td>%.2f</td><td>%.0f</td>", s->duration_s, s->request_throughput,
              s->output_throughput);
        emitf(p, "<td>%s</td>", fmt_pct(s->error_rate, a, sizeof(a)));
        const double cells[5] = {s->lat[STAT_TTFT].pct[0], s->lat[STAT_TTFT].pct[3],
                                 s->lat[STAT_ITL].pct[3], s->lat[STAT_E2EL].pct[0],
                                 s->lat[STAT_E2EL].pct[3]};
        const enum stat_metric cm[5] = {STAT_TTFT, STAT_TTFT, STAT_ITL, STAT_E2EL, STAT_E2EL};
        for (int k = 0; k < 5; k++)
            emitf(p, "<td>%s</td>", s->lat[cm[k]].count ? fmt_ms(cells[k], a, sizeof(a)) : "-");
        size_t pass, total;
        slo_counts(d->doc, &pass, &total);
        if (total)
            emitf(p, "<td class=\"%s\">%zu/%zu</td></tr>\n", pass == total ? "pass" : "fail", pass,
                  total);
        else
            emit(p, "<td>-</td></tr>\n");
    }
    emit(p, "</table></div>\n");
}

static void overview_section(struct page *p, const struct report_docset *set)
{
    size_t nres = report_docset_count(set, REPORT_DOC_RESULT);
    if (!nres)
        return;
    emit(p, "<section id=\"overview\"><h2>Overview</h2>\n");
    if (nres == 1) {
        for (size_t i = 0; i < set->n; i++)
            if (set->docs[i].kind == REPORT_DOC_RESULT)
                run_cards(p, &set->docs[i]);
    } else {
        emit(p, "<p class=\"sub\">One row per run; latencies in milliseconds, E2EL and TTFT from "
                "the intended send time.</p>\n");
        compare_table(p, set);
    }
    emit(p, "</section>\n");
}

/* ---- one run ---------------------------------------------------------------------------- */

static void run_meta(struct page *p, const struct report_doc *d)
{
    const json_t *run = report_json_obj(d->doc, "run");
    const char *target = report_json_str(run, "target"), *model = report_json_str(run, "model");
    const char *mode = report_json_str(run, "mode"), *started = report_json_str(run, "started_at");
    const char *profile = report_json_str(run, "simulator_profile");
    char a[32];

    emit(p, "<p class=\"sub\">");
    if (target) {
        emit(p, "target ");
        esc(p, target);
        if (profile) {
            emit(p, " (built-in simulator, profile ");
            esc(p, profile);
            emit(p, ")");
        }
    }
    if (model) {
        emit(p, " &middot; model ");
        esc(p, model);
    }
    if (mode && !strcmp(mode, "open")) {
        emitf(p, " &middot; open loop, %s req/s ",
              fmt_num(report_json_num(run, "rate"), 2, a, sizeof(a)));
        esc(p, report_json_str(run, "arrival"));
    } else if (mode && !strcmp(mode, "closed")) {
        emitf(p, " &middot; closed loop, %s users",
              fmt_num(report_json_num(run, "users"), 0, a, sizeof(a)));
    }
    if (started) {
        emit(p, " &middot; started ");
        esc(p, started);
    }
    emitf(p, " &middot; measured %.1f s", d->sum.duration_s);
    if (d->sum.warmup_requests)
        emitf(p, " (after %" PRIu64 " warm-up requests)", d->sum.warmup_requests);
    emit(p, " &middot; file ");
    esc(p, d->path);
    emit(p, "</p>\n");
}

static void slo_table(struct page *p, const struct report_doc *d)
{
    const json_t *arr = report_json_arr(d->doc, "slo"), *v;
    size_t i;
    char a[48];

    if (!json_array_size(arr))
        return;
    emit(p, "<h3>SLO verdicts</h3><div class=\"tablewrap\"><table class=\"slo\"><tr><th>SLO</th>"
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
            text = fmt_num(actual, 3, a, sizeof(a));
        emit(p, "<tr><td>");
        esc(p, expr ? expr : "?");
        emit(p, "</td><td>");
        esc(p, text);
        emitf(p, "</td><td class=\"%s\">%s</td></tr>\n", pass ? "pass" : "fail",
              pass ? "pass" : "FAIL");
    }
    emit(p, "</table></div>\n");
}

static const struct {
    enum stat_metric m;
    const char *label;
    bool always;
} lat_rows[] = {
    {STAT_TTFT, "TTFT", true},
    {STAT_TTFT_UNCORRECTED, "TTFT, uncorrected", false},
    {STAT_TTFC, "TTFC (first content)", false},
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

static void latency_table(struct page *p, const struct report_doc *d)
{
    char a[32];
    emit(p, "<h3>Latency (ms)</h3><div class=\"tablewrap\"><table class=\"latency\"><tr>"
            "<th>metric</th><th>count</th><th>mean</th><th>p50</th><th>p90</th><th>p95</th>"
            "<th>p99</th><th>p99.9</th><th>max</th></tr>\n");
    for (size_t i = 0; i < sizeof(lat_rows) / sizeof(lat_rows[0]); i++) {
        const struct latency_summary *l = &d->sum.lat[lat_rows[i].m];
        if (!l->count && !lat_rows[i].always)
            continue;
        if (lat_rows[i].m == STAT_DNS)
            emit(p, "<tr class=\"sep\"><td colspan=\"9\">connection phases (new connections)"
                    "</td></tr>\n");
        emit(p, "<tr><td>");
        esc(p, lat_rows[i].label);
        emitf(p, "</td><td>%" PRIu64 "</td>", l->count);
        emitf(p, "<td>%s</td>", l->count ? fmt_ms(l->mean, a, sizeof(a)) : "-");
        for (int k = 0; k < SUMMARY_NPCT; k++)
            emitf(p, "<td>%s</td>", l->count ? fmt_ms(l->pct[k], a, sizeof(a)) : "-");
        emitf(p, "<td>%s</td></tr>\n", l->count ? fmt_ms(l->max, a, sizeof(a)) : "-");
    }
    emit(p, "</table></div>\n");
}

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
    default:
        return "other";
    }
}

static void outcome_tables(struct page *p, const struct report_doc *d)
{
    const struct run_stats *s = d->stats;
    char a[32];
    double total = (double)(s->requests ? s->requests : 1);

    emit(p, "<div class=\"two\"><div class=\"tablewrap\"><table class=\"outcomes\">"
            "<caption>Outcomes by class</caption><tr><th>outcome</th><th>class</th>"
            "<th>requests</th><th>share</th></tr>\n");
    for (int i = 0; i < REQ_OUTCOME_COUNT; i++) {
        if (!s->outcomes[i] && i != REQ_OK)
            continue;
        bool err = req_outcome_is_error((enum req_outcome)i);
        emitf(p, "<tr%s><td>", err ? " class=\"err\"" : "");
        esc(p, req_outcome_name((enum req_outcome)i));
        emit(p, "</td><td class=\"l\">");
        esc(p, outcome_class((enum req_outcome)i));
        emitf(p, "</td><td>%" PRIu64 "</td><td>%s</td></tr>\n", s->outcomes[i],
              fmt_pct((double)s->outcomes[i] / total, a, sizeof(a)));
    }
    emitf(p, "<tr><td><b>all</b></td><td></td><td><b>%" PRIu64 "</b></td><td></td></tr>\n",
          s->requests);
    emit(p, "</table></div>\n<div class=\"tablewrap\"><table class=\"http\"><caption>HTTP status"
            "</caption><tr><th>class</th><th>responses</th></tr>\n");
    for (int i = 0; i < HTTP_CLASS_COUNT; i++) {
        if (!s->http_class[i])
            continue;
        emit(p, "<tr><td>");
        esc(p, http_class_name((enum http_class)i));
        emitf(p, "</td><td>%" PRIu64 "</td></tr>\n", s->http_class[i]);
    }
    emit(p, "</table></div>\n");

    emit(p, "<div class=\"tablewrap\"><table class=\"tokens\"><caption>Tokens and streams"
            "</caption>\n");
    emitf(p, "<tr><td>input tokens (ok requests)</td><td>%" PRIu64 "</td></tr>\n", s->input_tokens);
    emitf(p, "<tr><td>output tokens (ok requests)</td><td>%" PRIu64 "</td></tr>\n",
          s->output_tokens);
    emitf(p, "<tr><td>output tokens (every request)</td><td>%" PRIu64 "</td></tr>\n",
          s->output_tokens_all);
    emit(p, "<tr><td>counted by</td><td>");
    esc(p, d->sum.token_method ? d->sum.token_method : "none");
    emitf(p, "</td></tr>\n<tr><td>tokens per chunk</td><td>%s</td></tr>\n",
          fmt_num(d->sum.tokens_per_chunk, 2, a, sizeof(a)));
    emitf(p, "<tr><td>usage disagreements</td><td>%" PRIu64 "</td></tr>\n", s->usage_mismatch);
    emitf(p, "<tr><td>streams</td><td>%" PRIu64 "</td></tr>\n", s->streams);
    emitf(p, "<tr><td>&nbsp; without [DONE]</td><td>%" PRIu64 "</td></tr>\n", s->no_done);
    emitf(p, "<tr><td>&nbsp; without finish_reason</td><td>%" PRIu64 "</td></tr>\n", s->no_finish);
    emitf(p, "<tr><td>&nbsp; with a changed id</td><td>%" PRIu64 "</td></tr>\n", s->id_changed);
    emitf(p, "<tr><td>reused connections</td><td>%" PRIu64 "</td></tr>\n", s->reused_conn);
    emit(p, "</table></div>\n");
    const json_t *integ = report_json_obj(d->doc, "integrity");
    if (integ)
        kv_table(p, "Stream integrity", integ);
    emit(p, "</div>\n");
}

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
    struct vec *sent, *done, *errs, *inflight, *tok, *chunks;
    struct vec *t50, *t99; /* TTFT (ms); a gap where a second measured none */
    /* from "server_timeline" */
    struct vec *srun, *swait, *spre, *skv, *sttft;
    bool kv_percent; /* kv_usage came in percent, not as a fraction */
};

/* The points of the run's own timeline: counts per second turned into rates. */
static void timeline_points(struct page *p, const json_t *arr, struct timeline *tl)
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
        vec_push(p, tl->sent, t, report_json_num(pt, "sent") / dt);
        vec_push(p, tl->done, t, completed / dt);
        vec_push(p, tl->errs, t, report_json_num(pt, "errors") / dt);
        vec_push(p, tl->inflight, t, report_json_num(pt, "in_flight"));
        vec_push(p, tl->tok, t, report_json_num(pt, "output_tokens") / dt);
        vec_push(p, tl->chunks, t, report_json_num(pt, "chunks") / dt);
        /* A second in which no TTFT was measured has 0 there: leave a gap. */
        double a = report_json_num(pt, "ttft_p50_ms"), b = report_json_num(pt, "ttft_p99_ms");
        vec_push(p, tl->t50, t, a > 0 ? a : NAN);
        vec_push(p, tl->t99, t, b > 0 ? b : NAN);
    }
}

/* The points of the server's scraped timeline. */
static void server_points(struct page *p, const json_t *arr, struct timeline *tl)
{
    const json_t *pt;
    size_t i;

    json_array_foreach(arr, i, pt)
    {
        double t = report_json_num(pt, "t_s");
        if (!isfinite(t))
            continue;
        vec_push(p, tl->srun, t, report_json_num(pt, "running"));
        vec_push(p, tl->swait, t, report_json_num(pt, "waiting"));
        vec_push(p, tl->spre, t, report_json_num(pt, "preemptions"));
        double kv = report_json_num(pt, "kv_usage");
        vec_push(p, tl->skv, t, kv);
        tl->kv_percent |= kv > 1.0;
        double st = report_json_num(pt, "ttft_p50_ms");
        vec_push(p, tl->sttft, t, st > 0 ? st : NAN);
    }
}

/* A fresh timeline chart: seconds from 0 on x, y from 0, the fault windows shaded. */
static struct svg_chart timeline_chart(const struct timeline *tl, const char *id, const char *title,
                                       const char *ylabel)
{
    return (struct svg_chart){
        .id = id,
        .title = title,
        .height = 300,
        .x = {.label = "time (s)", .min = 0, .max = NAN},
        .y = {.label = ylabel, .min = NAN, .max = NAN, .include_zero = true},
        .bands = tl->bands,
        .nbands = tl->nbands,
        .band_legend = "fault window",
        .note = "no data",
    };
}

/* Offered (sent) and achieved (completed) requests per second, and errors. */
static void timeline_rate_chart(struct page *p, const struct timeline *tl)
{
    struct svg_series s[3];
    char id[64];

    snprintf(id, sizeof(id), "run%d-timeline-rate", tl->run);
    struct svg_chart c = timeline_chart(tl, id, "Request rate: offered and achieved", "requests/s");
    series_of(&s[0], tl->sent, "offered (sent)", 7, SVG_LINE);
    s[0].dashed = true;
    series_of(&s[1], tl->done, "achieved (completed)", 0, SVG_LINE);
    series_of(&s[2], tl->errs, "errors", 3, SVG_LINE);
    c.series = s;
    c.nseries = 3;
    chart(p, &c);
}

static void timeline_inflight_chart(struct page *p, const struct timeline *tl)
{
    struct svg_series s[1];
    char id[64];

    snprintf(id, sizeof(id), "run%d-timeline-inflight", tl->run);
    struct svg_chart c = timeline_chart(tl, id, "Requests in flight", "requests");
    series_of(&s[0], tl->inflight, "in flight", 4, SVG_LINE);
    c.series = s;
    c.nseries = 1;
    chart(p, &c);
}

static void timeline_tokens_chart(struct page *p, const struct timeline *tl)
{
    struct svg_series s[2];
    char id[64];

    snprintf(id, sizeof(id), "run%d-timeline-tokens", tl->run);
    struct svg_chart c =
        timeline_chart(tl, id, "Output tokens and chunks per second", "per second");
    series_of(&s[0], tl->tok, "output tokens/s", 2, SVG_LINE);
    series_of(&s[1], tl->chunks, "chunks/s", 1, SVG_LINE);
    s[1].dashed = true;
    c.series = s;
    c.nseries = 2;
    chart(p, &c);
}

/* TTFT p50 and p99 per second, and the server's own p50 when it was scraped. */
static void timeline_ttft_chart(struct page *p, const struct timeline *tl)
{
    struct svg_series s[3];
    char id[64];

    snprintf(id, sizeof(id), "run%d-timeline-ttft", tl->run);
    struct svg_chart c = timeline_chart(tl, id, "TTFT over time", "TTFT (ms)");
    series_of(&s[0], tl->t50, "p50", 0, SVG_LINE);
    series_of(&s[1], tl->t99, "p99", 3, SVG_LINE);
    c.series = s;
    c.nseries = 2;
    if (tl->sttft->n) {
        series_of(&s[2], tl->sttft, "server p50", 2, SVG_LINE);
        s[2].dashed = true;
        c.nseries = 3;
    }
    chart(p, &c);
}

/* The server's batch (running), queue (waiting) and preemptions. */
static void timeline_server_chart(struct page *p, const struct timeline *tl)
{
    struct svg_series s[3];
    char id[64];

    snprintf(id, sizeof(id), "run%d-timeline-server", tl->run);
    struct svg_chart c = timeline_chart(tl, id, "Server: batch and queue (scraped)", "requests");
    series_of(&s[0], tl->srun, "running", 0, SVG_LINE);
    series_of(&s[1], tl->swait, "waiting", 1, SVG_LINE);
    series_of(&s[2], tl->spre, "preemptions", 3, SVG_LINE);
    s[2].dashed = true;
    c.series = s;
    c.nseries = 3;
    chart(p, &c);
}

/* The server's KV cache usage in percent (scaled from a fraction when it came as one). */
static void timeline_kv_chart(struct page *p, struct timeline *tl)
{
    struct svg_series s[1];
    char id[64];

    if (!tl->kv_percent)
        for (size_t k = 0; k < tl->skv->n; k++)
            tl->skv->y[k] *= 100;
    snprintf(id, sizeof(id), "run%d-timeline-kv", tl->run);
    struct svg_chart c =
        timeline_chart(tl, id, "Server: KV cache usage (scraped)", "KV cache used (%)");
    c.y.min = 0;
    c.y.max = 100;
    series_of(&s[0], tl->skv, "KV cache usage", 4, SVG_LINE);
    c.series = s;
    c.nseries = 1;
    chart(p, &c);
}

/* The point lists of a timeline, owned by the page; false (p->rc set) when one failed. */
static bool timeline_init(struct page *p, struct timeline *tl, const json_t *doc, int run)
{
    memset(tl, 0, sizeof(*tl));
    tl->run = run;
    tl->nbands = fault_bands(doc, tl->bands, BANDS_MAX);
    struct vec **all[] = {&tl->sent,   &tl->done, &tl->errs, &tl->inflight, &tl->tok,
                          &tl->chunks, &tl->t50,  &tl->t99,  &tl->srun,     &tl->swait,
                          &tl->spre,   &tl->skv,  &tl->sttft};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        *all[i] = page_vec(p);
    return !p->rc;
}

/*
 * The run's timeline charts: rate, in flight, tokens and TTFT from its own
 * timeline, the server's batch and KV cache when it was scraped.
 */
static void timeline_charts(struct page *p, const struct report_doc *d, int run)
{
    const json_t *arr = report_json_arr(d->doc, "timeline"),
                 *srv = report_json_arr(d->doc, "server_timeline");
    struct timeline tl;

    if (!timeline_init(p, &tl, d->doc, run))
        return;
    emit(p, "<h3>Timeline</h3>");
    if (!json_array_size(arr) && !json_array_size(srv)) {
        emit(p, "<p class=\"note\">This result has no timeline.</p>\n");
        return;
    }
    emit(p, "<p class=\"sub\">Per-second points from the start of the measured window.");
    if (tl.nbands)
        emit(p, " Shaded: fault windows.");
    emit(p, "</p>\n<div class=\"charts\">\n");
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
    emit(p, "</div>\n");
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
static void itl_heatmap_chart(struct page *p, int run, const char *const *cols, size_t n,
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
    emit(p, "<h3>Inter-token latency by position</h3><p class=\"sub\">Each column is a range of "
            "token positions in the answers; a slowdown late in long answers shows up as a "
            "brighter right side. Buckets with fewer than 20 gaps are left empty.</p>\n<figure "
            "class=\"chart wide\">");
    if (!p->rc)
        p->rc = svg_heatmap_render(&h, p->out);
    emit(p, "</figure>\n");
}

/* The ITL-by-position heatmap of a run that has "itl_by_position" (its first 32 buckets). */
static void itl_position_heatmap(struct page *p, const struct report_doc *d, int run)
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

static const char *const group_keys[][2] = {
    {"by_tenant", "Per tenant"},
    {"by_intent", "Per intent"},
    {"by_perturbation", "Per perturbation"},
    {"by_flow_step", "Per flow step"},
};

static void run_section(struct page *p, const struct report_doc *d)
{
    int run = ++p->nrun;
    emitf(p, "<section class=\"run\" id=\"run%d\"><h2>Run ", run);
    esc(p, d->name);
    emit(p, "</h2>\n");
    run_meta(p, d);
    slo_table(p, d);
    latency_table(p, d);
    timeline_charts(p, d, run);
    itl_position_heatmap(p, d, run);
    emit(p, "<h3>Outcomes, tokens and streams</h3>\n");
    outcome_tables(p, d);
    const json_t *q = report_json_obj(d->doc, "quality");
    if (q) {
        emit(p, "<h3>Answer quality</h3>\n");
        kv_table(p, NULL, q);
    }
    for (size_t k = 0; k < sizeof(group_keys) / sizeof(group_keys[0]); k++) {
        const json_t *g = report_json_obj(d->doc, group_keys[k][0]);
        char id[64];
        if (!g || !json_object_size(g))
            continue;
        snprintf(id, sizeof(id), "run%d-%s", run, group_keys[k][0]);
        emitf(p, "<h3>%s</h3>\n", group_keys[k][1]);
        if (!p->rc)
            p->rc = report_html_group_table(p->out, id, NULL, g);
    }
    const json_t *cfg = report_json_obj(d->doc, "run");
    if (cfg) {
        emit(p, "<details><summary>Run configuration</summary>\n");
        kv_table(p, NULL, cfg);
        emit(p, "</details>\n");
    }
    emit(p, "</section>\n");
}

/* ---- sweeps --------------------------------------------------------------------------------- */

/* Horizontal rules for the sweep's latency SLOs on metric ttft or e2el. */
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
        if (!s.latency || (s.metric != STAT_TTFT && s.metric != STAT_E2EL))
            continue;
        snprintf(labels[n], SLO_EXPR_MAX + 8, "SLO %s", s.expr);
        rules[n] = (struct svg_rule){.at = s.value, .label = labels[n], .color = 3};
        n++;
    }
    return n;
}

static void sweep_headline(struct page *p, const json_t *doc, const char *load_unit)
{
    const json_t *knee = report_json_obj(doc, "knee"), *mg = report_json_obj(doc, "max_goodput");
    const json_t *cl = report_json_obj(doc, "critical_load");
    char v[64], sub[200], a[32], b[32];

    emit(p, "<div class=\"cards wide\">\n");
    if (knee) {
        snprintf(v, sizeof(v), "%s", fmt_num(report_json_num(knee, "load"), 2, a, sizeof(a)));
        snprintf(sub, sizeof(sub), "%s req/s at %s ms %s (%s)",
                 fmt_num(report_json_num(knee, "throughput"), 2, a, sizeof(a)),
                 fmt_ms(report_json_num(knee, "latency_ms"), b, sizeof(b)),
                 report_json_str(knee, "metric") ? report_json_str(knee, "metric") : "",
                 report_json_str(knee, "method") ? report_json_str(knee, "method") : "");
        card(p, NULL, "knee of the latency curve", v, load_unit, sub);
    } else {
        card(p, NULL, "knee of the latency curve", "-", NULL, "not found");
    }
    if (mg) {
        const json_t *br = json_object_get(mg, "bracket");
        snprintf(v, sizeof(v), "%s", fmt_num(report_json_num(mg, "goodput_rps"), 2, a, sizeof(a)));
        snprintf(sub, sizeof(sub), "at load %s",
                 fmt_num(report_json_num(mg, "load"), 2, b, sizeof(b)));
        if (report_json_str(mg, "from")) {
            size_t len = strlen(sub);
            snprintf(sub + len, sizeof(sub) - len, " (%s)", report_json_str(mg, "from"));
        }
        if (json_array_size(br) == 2) {
            char c0[32], c1[32];
            size_t len = strlen(sub);
            snprintf(sub + len, sizeof(sub) - len, "; passes at %s, fails at %s",
                     fmt_num(json_number_value(json_array_get(br, 0)), 2, c0, sizeof(c0)),
                     fmt_num(json_number_value(json_array_get(br, 1)), 2, c1, sizeof(c1)));
        }
        card(p, "good", "max goodput within SLOs", v, "req/s", sub);
    }
    if (cl) {
        snprintf(v, sizeof(v), "%s", fmt_num(report_json_num(cl, "lambda_c"), 2, a, sizeof(a)));
        snprintf(sub, sizeof(sub),
                 "\u03b5\u2080 %.3g, \u0394\u03bb %.3g, r\u00b2 %.3f, %.0f points",
                 report_json_num(cl, "epsilon0"), report_json_num(cl, "delta_lambda"),
                 report_json_num(cl, "r2"), report_json_num(cl, "points"));
        card(p, NULL, "critical load \u03bbc (error fit)", v, NULL, sub);
    }
    emit(p, "</div>\n");
}

static void sweep_steps_table(struct page *p, const json_t *steps, bool quality)
{
    const json_t *st;
    size_t i;
    char a[32];
    emit(
        p,
        "<div class=\"tablewrap\"><table class=\"steps\"><caption class=\"note\">Latencies in "
        "milliseconds.</caption><tr><th>step</th><th>load</th>"
        "<th>achieved req/s</th><th>output tok/s</th><th>goodput req/s</th>"
        "<th>TTFT p50</th><th>TTFT p99</th><th>TPOT p50</th><th>TPOT p99</th>"
        "<th>E2EL p50</th><th>E2EL p99</th><th>error rate</th><th>SLO</th><th class=\"l\">saturated"
        "</th>");
    if (quality)
        emit(p, "<th>ROUGE-L</th><th>BLEU-4</th><th>exact match</th>");
    emit(p, "</tr>\n");
    json_array_foreach(steps, i, st)
    {
        const char *dir = report_json_str(st, "dir");
        emit(p, "<tr><td>");
        esc(p, dir ? dir : "");
        emitf(p, "</td><td>%s</td>", fmt_num(report_json_num(st, "load"), 2, a, sizeof(a)));
        emitf(p, "<td>%s</td>", fmt_num(report_json_num(st, "achieved_rps"), 2, a, sizeof(a)));
        emitf(p, "<td>%s</td>", fmt_num(report_json_num(st, "output_tps"), 0, a, sizeof(a)));
        emitf(p, "<td>%s</td>", fmt_num(report_json_num(st, "goodput_rps"), 2, a, sizeof(a)));
        static const char *const ms[] = {"ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms",
                                         "tpot_p99_ms", "e2el_p50_ms", "e2el_p99_ms"};
        for (size_t k = 0; k < 6; k++)
            emitf(p, "<td>%s</td>", fmt_ms(report_json_num(st, ms[k]), a, sizeof(a)));
        emitf(p, "<td>%s</td>", fmt_pct(report_json_num(st, "error_rate"), a, sizeof(a)));
        const json_t *pass = json_object_get(st, "slo_pass");
        if (json_is_boolean(pass))
            emitf(p, "<td class=\"%s\">%s</td>", json_is_true(pass) ? "pass" : "fail",
                  json_is_true(pass) ? "pass" : "FAIL");
        else
            emit(p, "<td>-</td>");
        bool sat = json_is_true(json_object_get(st, "saturated"));
        const json_t *why = report_json_arr(st, "saturation"), *w;
        size_t k;
        emitf(p, "<td class=\"l%s\">%s", sat ? " err" : "", sat ? "yes" : "no");
        json_array_foreach(why, k, w)
        {
            if (!json_is_string(w))
                continue;
            emit(p, k ? ", " : ": ");
            esc(p, json_string_value(w));
        }
        emit(p, "</td>");
        if (quality) {
            const json_t *q = report_json_obj(st, "quality");
            emitf(p, "<td>%s</td>", fmt_num(report_json_num(q, "rouge_l_mean"), 3, a, sizeof(a)));
            emitf(p, "<td>%s</td>", fmt_num(report_json_num(q, "bleu4_mean"), 3, a, sizeof(a)));
            emitf(p, "<td>%s</td>", fmt_pct(report_json_num(q, "exact_match_rate"), a, sizeof(a)));
        }
        emit(p, "</tr>\n");
    }
    emit(p, "</table></div>\n");
}

static void interference_table(struct page *p, const json_t *arr)
{
    const json_t *v;
    size_t i;
    char a[32];
    if (!json_array_size(arr))
        return;
    emit(p, "<h3>Interference between traffic classes</h3><div class=\"tablewrap\"><table>"
            "<tr><th>victim</th><th>aggressor</th><th>p99 alone (ms)</th><th>p99 with (ms)</th>"
            "<th>&Delta;p99 / p99 alone</th></tr>\n");
    json_array_foreach(arr, i, v)
    {
        emit(p, "<tr><td>");
        esc(p, report_json_str(v, "victim"));
        emit(p, "</td><td class=\"l\">");
        esc(p, report_json_str(v, "aggressor"));
        emitf(p, "</td><td>%s</td>", fmt_ms(report_json_num(v, "p99_alone_ms"), a, sizeof(a)));
        emitf(p, "<td>%s</td>", fmt_ms(report_json_num(v, "p99_with_ms"), a, sizeof(a)));
        emitf(p, "<td>%s</td></tr>\n", fmt_pct(report_json_num(v, "delta"), a, sizeof(a)));
    }
    emit(p, "</table></div>\n");
}

/* A sweep's steps as point lists owned by the page, and what its charts share. */
struct sweep_points {
    int sw;            /* the sweep's number, for element ids */
    const json_t *doc; /* sweep.json */
    const json_t *knee, *mg, *cl;
    bool conc;                             /* closed loop: the loads are user counts */
    const char *load_label;                /* x axis of the charts against the load */
    struct vec *t50, *t99, *e50, *e99;     /* latency (ms) vs achieved throughput */
    struct vec *lt50, *lt99, *le50, *le99; /* latency (ms) vs load */
    struct vec *ach, *good, *sat;          /* throughput vs load; sat: saturated steps */
    struct vec *err;                       /* error rate (%) vs load */
    struct vec *rouge, *bleu, *em;         /* answer quality vs load */
    double lmin, lmax;                     /* the loads; lmin infinite: no step has one */
    double lat_lo, lat_hi;                 /* the positive latencies */
    bool quality;                          /* some step has answer quality */
};

/* The sweep's point lists, owned by the page; false (p->rc set) when one failed. */
static bool sweep_points_init(struct page *p, struct sweep_points *sp, const json_t *doc, int sw)
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
    sp->lmin = sp->lat_lo = INFINITY;
    sp->lmax = -INFINITY;
    struct vec **all[] = {&sp->t50,  &sp->t99,  &sp->e50,   &sp->e99,  &sp->lt50,
                          &sp->lt99, &sp->le50, &sp->le99,  &sp->ach,  &sp->good,
                          &sp->sat,  &sp->err,  &sp->rouge, &sp->bleu, &sp->em};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        *all[i] = page_vec(p);
    return !p->rc;
}

/* One step's points: latencies against throughput and load, throughput, errors, quality. */
static void sweep_step_points(struct page *p, struct sweep_points *sp, const json_t *st)
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
    vec_push(p, sp->t50, x, v[0]);
    vec_push(p, sp->t99, x, v[1]);
    vec_push(p, sp->e50, x, v[2]);
    vec_push(p, sp->e99, x, v[3]);
    vec_push(p, sp->lt50, load, v[0]);
    vec_push(p, sp->lt99, load, v[1]);
    vec_push(p, sp->le50, load, v[2]);
    vec_push(p, sp->le99, load, v[3]);
    vec_push(p, sp->ach, load, x);
    vec_push(p, sp->good, load, report_json_num(st, "goodput_rps"));
    if (json_is_true(json_object_get(st, "saturated")))
        vec_push(p, sp->sat, load, x);
    vec_push(p, sp->err, load, 100 * report_json_num(st, "error_rate"));
    const json_t *q = report_json_obj(st, "quality");
    if (q) {
        sp->quality = true;
        vec_push(p, sp->rouge, load, report_json_num(q, "rouge_l_mean"));
        vec_push(p, sp->bleu, load, report_json_num(q, "bleu4_mean"));
        vec_push(p, sp->em, load, report_json_num(q, "exact_match_rate"));
    }
}

/*
 * A fresh latency chart of a sweep: p99 (dots) and p50 (dashed) of TTFT and
 * E2EL against x, on a log axis when the latencies span more than 30 times.
 */
static struct svg_chart sweep_latency_chart(const struct sweep_points *sp, struct svg_series *s,
                                            const char *id, const char *title, const char *xlabel,
                                            const struct vec *t50, const struct vec *t99,
                                            const struct vec *e50, const struct vec *e99)
{
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
    series_of(&s[0], t99, "TTFT p99", 0, SVG_LINE_DOTS);
    series_of(&s[1], e99, "E2EL p99", 1, SVG_LINE_DOTS);
    series_of(&s[2], t50, "TTFT p50", 0, SVG_LINE);
    s[2].dashed = true;
    series_of(&s[3], e50, "E2EL p50", 1, SVG_LINE);
    s[3].dashed = true;
    for (int k = 0; k < 4; k++)
        s[k].unit = "ms";
    return c;
}

/* A fresh chart of a sweep against the offered load, y from 0. */
static struct svg_chart sweep_load_chart(const struct sweep_points *sp, struct svg_series *s,
                                         const char *id, const char *title, const char *ylabel)
{
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
                 fmt_num(report_json_num(sp->knee, "load"), 2, a, sizeof(a)));
        rules[n] = (struct svg_rule){.vertical = true,
                                     .at = report_json_num(sp->knee, "load"),
                                     .label = labels[n],
                                     .color = 3};
        n++;
    }
    if (sp->mg && isfinite(report_json_num(sp->mg, "load"))) {
        snprintf(labels[n], 96, "max goodput at %s",
                 fmt_num(report_json_num(sp->mg, "load"), 2, a, sizeof(a)));
        rules[n] = (struct svg_rule){.vertical = true,
                                     .at = report_json_num(sp->mg, "load"),
                                     .label = labels[n],
                                     .color = 2};
        n++;
    }
    return n;
}

/* Latency vs achieved throughput: the hockey stick, the knee marked, the max goodput drawn. */
static void sweep_latency_throughput_chart(struct page *p, const struct sweep_points *sp)
{
    struct svg_series s[4];
    struct svg_rule rules[9];
    char slo_labels[8][SLO_EXPR_MAX + 8], mg_label[96], id[64], a[32];
    struct svg_marker km = {0};

    snprintf(id, sizeof(id), "sweep%d-latency-throughput", sp->sw);
    struct svg_chart c =
        sweep_latency_chart(sp, s, id, "Latency vs achieved throughput",
                            "achieved throughput (req/s)", sp->t50, sp->t99, sp->e50, sp->e99);
    size_t nr = slo_rules(sp->doc, rules, 8, slo_labels);
    if (sp->mg && isfinite(report_json_num(sp->mg, "goodput_rps"))) {
        snprintf(mg_label, sizeof(mg_label), "max goodput %s req/s",
                 fmt_num(report_json_num(sp->mg, "goodput_rps"), 2, a, sizeof(a)));
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
    chart(p, &c);
}

/* The same against the offered load: the knee and max-goodput loads as vertical lines. */
static void sweep_latency_load_chart(struct page *p, const struct sweep_points *sp)
{
    struct svg_series s[4];
    struct svg_rule rules[10];
    char slo_labels[8][SLO_EXPR_MAX + 8], load_labels[2][96], id[64];

    snprintf(id, sizeof(id), "sweep%d-latency-load", sp->sw);
    struct svg_chart c = sweep_latency_chart(sp, s, id, "Latency vs offered load", sp->load_label,
                                             sp->lt50, sp->lt99, sp->le50, sp->le99);
    size_t nr = slo_rules(sp->doc, rules, 8, slo_labels);
    nr += load_rules(sp, rules + nr, load_labels);
    c.rules = rules;
    c.nrules = nr;
    chart(p, &c);
}

/* Achieved throughput and goodput vs load, the ideal line (open loop), saturated steps. */
static void sweep_throughput_chart(struct page *p, const struct sweep_points *sp)
{
    struct svg_series s[4];
    struct svg_rule rules[2];
    char load_labels[2][96], id[64];

    snprintf(id, sizeof(id), "sweep%d-throughput", sp->sw);
    struct svg_chart c = sweep_load_chart(sp, s, id, "Throughput vs offered load", "requests/s");
    series_of(&s[0], sp->ach, "achieved", 0, SVG_LINE_DOTS);
    series_of(&s[1], sp->good, "goodput (within SLOs)", 2, SVG_LINE_DOTS);
    s[0].unit = s[1].unit = "req/s";
    c.nseries = 2;
    if (!sp->conc) {
        struct vec *ideal = page_vec(p);
        vec_push(p, ideal, sp->lmin, sp->lmin);
        vec_push(p, ideal, sp->lmax, sp->lmax);
        series_of(&s[c.nseries], ideal, "offered (ideal)", 7, SVG_LINE);
        s[c.nseries++].dashed = true;
    }
    if (sp->sat->n) {
        series_of(&s[c.nseries], sp->sat, "saturated step", 3, SVG_POINTS);
        s[c.nseries++].unit = "req/s";
    }
    c.rules = rules;
    c.nrules = load_rules(sp, rules, load_labels);
    chart(p, &c);
}

/* Error rate vs load, with the exponential fit and its critical load when there is one. */
static void sweep_errors_chart(struct page *p, const struct sweep_points *sp)
{
    struct svg_series s[2];
    struct svg_rule rule;
    char lc_label[96], id[64], a[32];

    snprintf(id, sizeof(id), "sweep%d-errors", sp->sw);
    struct svg_chart c =
        sweep_load_chart(sp, s, id, "Error rate vs offered load", "error rate (%)");
    series_of(&s[0], sp->err, "error rate", 3, SVG_LINE_DOTS);
    s[0].unit = "%";
    c.nseries = 1;
    if (sp->cl) {
        double lc = report_json_num(sp->cl, "lambda_c"), e0 = report_json_num(sp->cl, "epsilon0");
        double dl = report_json_num(sp->cl, "delta_lambda");
        if (isfinite(lc) && isfinite(e0) && dl > 0) {
            struct vec *fit = page_vec(p);
            for (int k = 0; k <= 80; k++) {
                double l = sp->lmin + (sp->lmax - sp->lmin) * k / 80.0;
                double e = 100 * e0 * exp((l - lc) / dl);
                vec_push(p, fit, l, e > 100 ? NAN : e);
            }
            series_of(&s[1], fit, "fit \u03b5\u2080\u00b7exp((\u03bb\u2212\u03bbc)/\u0394\u03bb)",
                      7, SVG_LINE);
            s[1].dashed = true;
            c.nseries = 2;
            snprintf(lc_label, sizeof(lc_label), "\u03bbc = %s", fmt_num(lc, 2, a, sizeof(a)));
            rule = (struct svg_rule){.vertical = true, .at = lc, .label = lc_label, .color = 3};
            c.rules = &rule;
            c.nrules = 1;
        }
    }
    chart(p, &c);
}

/* ROUGE-L, BLEU-4 and exact match vs load (0 to 1). */
static void sweep_quality_chart(struct page *p, const struct sweep_points *sp)
{
    struct svg_series s[3];
    char id[64];

    snprintf(id, sizeof(id), "sweep%d-quality", sp->sw);
    struct svg_chart c =
        sweep_load_chart(sp, s, id, "Answer quality vs offered load", "score (0 to 1)");
    c.y.min = 0;
    c.y.max = 1;
    series_of(&s[0], sp->rouge, "ROUGE-L", 0, SVG_LINE_DOTS);
    series_of(&s[1], sp->bleu, "BLEU-4", 1, SVG_LINE_DOTS);
    series_of(&s[2], sp->em, "exact match", 2, SVG_LINE_DOTS);
    c.nseries = 3;
    chart(p, &c);
}

/* Each step's own TTFT and E2EL distributions overlaid, when its result is there. */
static void sweep_step_dists(struct page *p, const struct report_doc *d, const json_t *steps,
                             int sw)
{
    const struct report_doc *docs[SERIES_MAX];
    const char *labels[SERIES_MAX];
    char names[SERIES_MAX][48], a[32];
    size_t n = 0;

    for (size_t k = 0; k < d->nsteps && n < SERIES_MAX; k++) {
        if (!d->steps[k].doc)
            continue;
        docs[n] = &d->steps[k];
        snprintf(names[n], sizeof(names[n]), "load %s",
                 fmt_num(report_json_num(json_array_get(steps, k), "load"), 2, a, sizeof(a)));
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
        dist_charts(p, idp, docs, labels, n, STAT_TTFT, "ttft", "TTFT");
        dist_charts(p, idp, docs, labels, n, STAT_E2EL, "e2el", "E2EL");
    }
}

/*
 * The sweep's charts in a <div class="charts">. Returns false, drawing
 * nothing, when no step has a load (or p->rc is set).
 */
static bool sweep_charts(struct page *p, const struct report_doc *d, int sw)
{
    const json_t *steps = report_json_arr(d->doc, "steps"), *st;
    struct sweep_points sp;
    size_t i;

    if (!sweep_points_init(p, &sp, d->doc, sw))
        return false;
    json_array_foreach(steps, i, st) sweep_step_points(p, &sp, st);
    if (p->rc || !isfinite(sp.lmin))
        return false;
    emit(p, "<div class=\"charts\">\n");
    sweep_latency_throughput_chart(p, &sp);
    sweep_latency_load_chart(p, &sp);
    sweep_throughput_chart(p, &sp);
    sweep_errors_chart(p, &sp);
    if (sp.quality)
        sweep_quality_chart(p, &sp);
    sweep_step_dists(p, d, steps, sw);
    emit(p, "</div>\n");
    return true;
}

/* Whether some step of the sweep has answer quality (the steps table shows it then). */
static bool steps_have_quality(const json_t *steps)
{
    const json_t *st;
    size_t i;

    json_array_foreach(steps, i, st) if (report_json_obj(st, "quality")) return true;
    return false;
}

static void sweep_section(struct page *p, const struct report_doc *d)
{
    int sw = ++p->nsweep;
    const json_t *doc = d->doc, *steps = report_json_arr(doc, "steps");
    const char *mode = report_json_str(doc, "mode");
    bool conc = mode && !strcmp(mode, "concurrency");

    if (p->rc)
        return;
    emitf(p, "<section class=\"sweep\" id=\"sweep%d\"><h2>Sweep ", sw);
    esc(p, d->name);
    emit(p, "</h2>\n<p class=\"sub\">");
    emitf(p, "%zu steps, %s", json_array_size(steps),
          conc ? "closed loop (concurrency)" : "open loop (rate)");
    if (report_json_str(doc, "target")) {
        emit(p, " &middot; target ");
        esc(p, report_json_str(doc, "target"));
    }
    emit(p, " &middot; file ");
    esc(p, d->path);
    emit(p, "</p>\n");
    sweep_headline(p, doc, conc ? "users" : "req/s offered");
    if (!sweep_charts(p, d, sw)) {
        emit(p, "<p class=\"note\">This sweep has no steps.</p></section>\n");
        return;
    }
    emit(p, "<h3>Steps</h3>\n");
    sweep_steps_table(p, steps, steps_have_quality(steps));
    interference_table(p, report_json_arr(doc, "interference"));
    emit(p, "</section>\n");
}

/* ---- the page ------------------------------------------------------------------------------- */

int report_html_build(const struct report_docset *set, const struct report_html_opts *opts,
                      struct buf *out)
{
    struct page p = {.out = out};

    if (!set->n)
        return -EINVAL;
    page_head(&p, set, opts);
    page_nav(&p, set);
    overview_section(&p, set);
    distributions_section(&p, set);
    for (size_t i = 0; i < set->n; i++)
        if (set->docs[i].kind == REPORT_DOC_SWEEP)
            sweep_section(&p, &set->docs[i]);
    for (size_t i = 0; i < set->n; i++)
        if (set->docs[i].kind == REPORT_DOC_RESULT)
            run_section(&p, &set->docs[i]);
    emit(&p, "</main>\n<footer style=\"text-align:center;color:#59636e;font-size:12px;"
             "padding:0 0 24px\">Made by <code>tokenstorm report</code>. Latencies are measured "
             "from each request's intended send time (coordinated omission corrected); see "
             "docs/METRICS.md for every definition.</footer>\n</body>\n</html>\n");
    page_release(&p);
    return p.rc;
}
