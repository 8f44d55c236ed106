/*
 * html.h - the self-contained HTML report: one page, inline CSS, charts as
 * inline SVG (svg.h), no script and no external resource of any kind, so it
 * opens the same from a mail attachment, a CI artifact or an air-gapped box.
 *
 * The page, for the documents of a report_docset (docset.h):
 *  - overview: headline cards of one run, or a comparison table of several;
 *  - distributions of TTFT, ITL and E2EL from the HDR histograms: the CDF and
 *    the percentile spectrum (x = 1/(1-p) on a log axis, ticks 50% .. 99.99%),
 *    every run overlaid with a legend when there are several;
 *  - per run: SLO verdicts, the latency table, the timeline (offered and
 *    achieved request rate and errors, requests in flight, tokens/s and
 *    chunks/s, TTFT p50/p99; "faults" windows shaded; "server_timeline"
 *    drawn when present), the ITL-by-position heatmap ("itl_by_position"),
 *    outcomes by class, HTTP status classes, tokens and streams, answer
 *    quality ("quality"), group tables ("by_tenant", "by_intent",
 *    "by_perturbation", "by_flow_step"; see html_groups.h) and the
 *    run configuration;
 *  - per sweep: latency vs achieved throughput and vs offered load (knee
 *    marked, latency SLO limits and max goodput drawn), throughput vs load,
 *    error rate vs load with the fitted critical load, answer quality vs
 *    load, the steps' TTFT and E2EL CDFs overlaid, and the steps table.
 *
 * Every chart is an <svg class="ts-chart" id="..."> element; ids are
 * "dist-<metric>-cdf", "dist-<metric>-spectrum" (metric ttft, itl, e2el),
 * "run<N>-timeline-rate", "-inflight", "-tokens", "-ttft", "-server",
 * "-kv", "run<N>-itl-position" (a heatmap, class "ts-chart ts-heatmap"),
 * "sweep<N>-latency-throughput", "-latency-load", "-throughput",
 * "-errors", "-quality", "-ttft-cdf", "-e2el-cdf" (N counts from 1 in
 * page order), so tests and people can find them.
 */
#ifndef TS_REPORT_HTML_H
#define TS_REPORT_HTML_H

#include "base/buf.h"
#include "base/err.h"
#include "report/docset.h"

struct report_html_opts {
    const char *title;     /* page title; NULL = "tokenstorm report" */
    const char *generated; /* shown in the header ("generated 2026-..."), may be NULL */
};

/*
 * Appends the whole page (<!DOCTYPE html> .. </html>) for set to out; opts
 * may be NULL. A section whose data are missing from a document is left out
 * (or says so). Returns 0, -EINVAL (empty set), -ENOMEM or TS_TOOBIG (out's
 * cap; out then holds a partial page).
 */
TS_MUST_CHECK int report_html_build(const struct report_docset *set,
                                    const struct report_html_opts *opts, struct buf *out);

/*
 * The live dashboard of a run in progress (`run --ui`, app/live_ui.h) is
 * drawn by the same code as the report, from the result so far.
 * report_html_live_frame() appends the sections of the page (overview,
 * distributions, each run) without the page frame: what the dashboard
 * replaces every second. report_html_live_page() appends a whole page around
 * frame (already HTML): the report's style, a status line, a stop button,
 * and the one script of the dashboard (the report has none), which replaces
 * the frame from the server-sent events at `events` ("frame" events carry
 * a frame, "end" the last one) and posts to `stop` when the button is
 * pressed; both paths are relative to the page and get its query string (a
 * token, when the surface needs one). Return as report_html_build().
 */
TS_MUST_CHECK int report_html_live_frame(const struct report_docset *set, struct buf *out);
TS_MUST_CHECK int report_html_live_page(const char *title, const char *frame, const char *events,
                                        const char *stop, struct buf *out);

#endif
