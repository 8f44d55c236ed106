/*
 * html_run_charts.h - one run's charts in the HTML report:
 *  - the timeline from the result's "timeline" (per-second points):
 *    "run<N>-timeline-rate" (offered and achieved requests/s, errors),
 *    "-inflight", "-tokens" (output tokens/s and chunks/s), "-ttft" (p50,
 *    p99, and the server's p50 when scraped); from "server_timeline":
 *    "-server" (running, waiting, preemptions) and "-kv" (KV cache usage in
 *    %). The result's "faults" are shaded on every one;
 *  - the heatmap "run<N>-itl-position" of ITL percentiles by token position
 *    ("itl_by_position", at most 32 buckets; buckets with fewer than 20 gaps
 *    left empty);
 *  - from the sample of successful requests ("request_sample", reqsample.h):
 *    "run<N>-lengths" (input and output lengths, CDF), "run<N>-ttft-input"
 *    (time to first token against input length) and "run<N>-e2el-output"
 *    (E2EL against output length), as GenAI-Perf and guidellm show them.
 */
#ifndef TS_REPORT_HTML_RUN_CHARTS_H
#define TS_REPORT_HTML_RUN_CHARTS_H

#include "report/docset.h"
#include "report/html_page.h"

/*
 * Appends the "Timeline" heading and, in a <div class="charts">, the charts
 * the result has data for (a note when it has no timeline at all).
 */
void html_timeline_charts(struct html_page *p, const struct report_doc *d, int run);

/* Appends the lengths heading and charts; nothing when the run's sample is empty. */
void html_length_charts(struct html_page *p, const struct report_doc *d, int run);

/* Appends the ITL-by-position heading and heatmap; nothing when d has no "itl_by_position". */
void html_itl_position_heatmap(struct html_page *p, const struct report_doc *d, int run);

#endif
