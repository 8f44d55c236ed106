/*
 * html_sweep_charts.h - one sweep's charts in the HTML report, ids
 * "sweep<N>-...": "-latency-throughput" (TTFT and E2EL p50/p99 vs achieved
 * throughput, the knee marked, latency SLOs and the max goodput drawn),
 * "-latency-load" (the same vs offered load, knee and max-goodput loads
 * drawn), "-throughput" (achieved, goodput, ideal, saturated steps),
 * "-errors" (error rate with the fitted critical load), "-quality" (when a
 * step has answer quality), and the steps' own distributions overlaid
 * ("-ttft-cdf", "-e2el-cdf" and their spectra; html_dist.h).
 */
#ifndef TS_REPORT_HTML_SWEEP_CHARTS_H
#define TS_REPORT_HTML_SWEEP_CHARTS_H

#include <stdbool.h>

#include "report/docset.h"
#include "report/html_page.h"

/*
 * Appends the charts of sweep d, numbered sw, in a <div class="charts">.
 * Returns false, appending nothing, when no step has a load (or p->rc is set).
 */
bool html_sweep_charts(struct html_page *p, const struct report_doc *d, int sw);

/*
 * Why the sweep's critical load (sweep.json "critical_load") is not shown:
 * NULL when it is meaningful, else a reason (static or borrowed from doc).
 * A sweep.json that says (meaningful, not_meaningful_because) is taken at
 * its word; an older one is judged by critical_fit_not_meaningful over its
 * steps' loads.
 */
const char *html_sweep_lc_not_meaningful(const json_t *doc);

#endif
