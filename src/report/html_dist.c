/*
 * html_dist.c - latency distribution charts of the HTML report (see
 * html_dist.h): CDFs and percentile spectra drawn from HDR histograms.
 */
#include "report/html_dist.h"

#include <math.h>
#include <stdio.h>

#include "base/hdr.h"
#include "report/svg.h"

/* CDF points of a microsecond histogram in (ms, % of requests <= ms). */
static struct html_vec *cdf_of(struct html_page *p, const struct hdr *h)
{
    struct html_vec *v = html_page_vec(p);
    int64_t total = hdr_total_count(h);
    struct hdr_iter it;

    if (!v || total == 0)
        return v;
    html_vec_push(p, v, (double)hdr_lowest_equivalent(h, hdr_min(h)) / 1000.0, 0);
    hdr_iter_recorded_init(&it, h);
    while (hdr_iter_next(&it))
        html_vec_push(p, v, (double)it.highest_equivalent / 1000.0,
                      100.0 * (double)it.cumulative_count / (double)total);
    return v;
}

/* Percentile spectrum points: (percentile, ms), HdrHistogram's percentile iteration. */
static struct html_vec *spectrum_of(struct html_page *p, const struct hdr *h)
{
    struct html_vec *v = html_page_vec(p);
    struct hdr_iter it;

    if (!v || hdr_total_count(h) == 0)
        return v;
    if (hdr_iter_percentile_init(&it, h, 5)) {
        p->rc = -EINVAL;
        return v;
    }
    while (hdr_iter_next(&it))
        html_vec_push(p, v, it.percentile, (double)it.value_iterated_to / 1000.0);
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

/* One metric's distribution series, one per document with samples, and their x axis. */
struct dist_series {
    struct svg_series cdf[HTML_DIST_SERIES_MAX], spec[HTML_DIST_SERIES_MAX];
    size_t n;
    bool logx; /* a long tail: latency on a log axis from t.lo to t.hi */
    struct svg_ticks t;
};

/*
 * The CDF and spectrum series of metric m for up to HTML_DIST_SERIES_MAX documents
 * (legend names from labels, NULL for none), and whether the latency axis is
 * logarithmic: when the maximum is 20 times the median or more. That axis
 * starts at the 1st percentile (or 1% of the median), so a handful of
 * near-zero values do not waste decades of it.
 */
static void dist_series_of(struct html_page *p, const struct report_doc *const *docs,
                           const char *const *labels, size_t n, enum stat_metric m,
                           struct dist_series *ds)
{
    double lo = INFINITY, hi = 0, med = INFINITY;

    ds->n = 0;
    ds->logx = false;
    if (n > HTML_DIST_SERIES_MAX)
        n = HTML_DIST_SERIES_MAX;
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
        html_series(&ds->cdf[ds->n], cdf_of(p, h), labels[i], (int)i, SVG_STEP);
        html_series(&ds->spec[ds->n], spectrum_of(p, h), labels[i], (int)i, SVG_LINE);
        ds->n++;
    }
    ds->logx = ds->n && hi / med >= 20 && svg_ticks_log(lo, hi, 6, &ds->t) == 0;
}

/* The CDF chart "<idp>-<key>-cdf": latency on x, the share at or below it on y. */
static void dist_cdf_chart(struct html_page *p, const char *idp, enum stat_metric m,
                           const char *key, const char *what, struct dist_series *ds)
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
    html_chart(p, &c);
}

/* The spectrum chart "<idp>-<key>-spectrum": percentile on x (one step per nine), latency on y. */
static void dist_spectrum_chart(struct html_page *p, const char *idp, const char *key,
                                const char *what, struct dist_series *ds)
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
    html_chart(p, &c);
}

/*
 * CDF and spectrum of metric m for up to HTML_DIST_SERIES_MAX documents (legend names
 * from labels, NULL for none). idp is the id prefix ("dist", "sweep1"); what
 * is shown in titles.
 */
void html_dist_charts(struct html_page *p, const char *idp, const struct report_doc *const *docs,
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

void html_distributions_section(struct html_page *p, const struct report_docset *set)
{
    const struct report_doc *docs[HTML_DIST_SERIES_MAX];
    const char *labels[HTML_DIST_SERIES_MAX];
    size_t n = 0;

    for (size_t i = 0; i < set->n && n < HTML_DIST_SERIES_MAX; i++) {
        if (set->docs[i].kind != REPORT_DOC_RESULT)
            continue;
        docs[n] = &set->docs[i];
        labels[n++] = set->docs[i].name;
    }
    if (!n)
        return;
    if (n == 1)
        labels[0] = NULL; /* one run: no legend needed */
    html_emit(p, "<section id=\"distributions\"><h2>Latency distributions</h2><p class=\"sub\">");
    html_emit(p, "From the runs' HDR histograms (3 significant digits). TTFT and E2EL run from the "
                 "intended send time and cover successful requests; ITL covers every gap between "
                 "chunks. The percentile spectrum spreads the tail: each step right is one more "
                 "nine.");
    if (n > 1)
        html_emit(p, " Runs are overlaid, one colour each.");
    html_emit(p, "</p>\n<div class=\"charts\">\n");
    for (size_t k = 0; k < sizeof(dist_metrics) / sizeof(dist_metrics[0]); k++)
        html_dist_charts(p, "dist", docs, labels, n, dist_metrics[k].m, dist_metrics[k].key,
                         dist_metrics[k].label);
    html_emit(p, "</div></section>\n");
}
