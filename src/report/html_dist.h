/*
 * html_dist.h - latency distribution charts of the HTML report: for a
 * metric, the CDF and the percentile spectrum (x = 1/(1-p) on a log axis)
 * from the documents' HDR histograms, one series per document. Written on a
 * struct html_page (html_page.h).
 */
#ifndef TS_REPORT_HTML_DIST_H
#define TS_REPORT_HTML_DIST_H

#include <stddef.h>

#include "analysis/stats.h"
#include "report/docset.h"
#include "report/html_page.h"

/* Documents drawn in one distribution chart at most (the rest are left out). */
#define HTML_DIST_SERIES_MAX 24

/*
 * The charts "<idp>-<key>-cdf" and "<idp>-<key>-spectrum" of metric m for
 * the first n (at most HTML_DIST_SERIES_MAX) documents, series i in colour i
 * and named labels[i] (NULL: not in the legend); what names the metric in
 * titles ("TTFT"). A document without samples of m has no series. The
 * latency axis is logarithmic when the maximum is 20 times the median or more.
 */
void html_dist_charts(struct html_page *p, const char *idp, const struct report_doc *const *docs,
                      const char *const *labels, size_t n, enum stat_metric m, const char *key,
                      const char *what);

/*
 * The section "distributions": TTFT, ITL and E2EL charts (ids "dist-...")
 * of every run of set overlaid (no legend for one run). Nothing when set has
 * no run.
 */
void html_distributions_section(struct html_page *p, const struct report_docset *set);

#endif
