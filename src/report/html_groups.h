/*
 * html_groups.h - a table of per-group summaries (per tenant, intent,
 * perturbation, flow step) as HTML, used by the run sections of the HTML
 * report (html.h) and usable on its own.
 */
#ifndef TS_REPORT_HTML_GROUPS_H
#define TS_REPORT_HTML_GROUPS_H

#include <jansson.h>

#include "base/buf.h"
#include "base/err.h"

/*
 * Appends a table of per-group summaries: groups is a JSON object
 * {group name: {key: value, ...}, ...}; one row per group (in the object's
 * order), one column per key seen in any group (first-seen order, at most
 * 16). The known keys are shown first and formatted: completed, requests,
 * failed (counts), error_rate (a fraction, shown in %), request_throughput,
 * goodput_rps (per second), ttft_p50_ms, ttft_p99_ms, tpot_p50_ms,
 * tpot_p99_ms, itl_p99_ms, e2el_p50_ms, e2el_p99_ms (ms), slo_pass (bool);
 * other numbers are printed as they are, strings escaped, nested values
 * skipped. id is the table's element id, title its caption (both may be
 * NULL). Appends nothing when groups is not a non-empty object. Returns 0 or
 * a buf error.
 */
TS_MUST_CHECK int report_html_group_table(struct buf *out, const char *id, const char *title,
                                          const json_t *groups);

#endif
