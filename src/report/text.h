/*
 * text.h - the human summary printed at the end of a run.
 *
 * report_text_summary() prints headline lines (requests by outcome,
 * duration, throughput, goodput, error rate, token counts and how they were
 * counted, stream integrity) and a latency table with rows TTFT, TTFC, ITL,
 * TPOT, E2EL, lag and columns mean, p50, p90, p95, p99, p99.9, max in
 * milliseconds ("-" for a metric with no samples). report_text_slo() prints
 * the SLO verdict table. Both write plain ASCII to any FILE* (no colour, no
 * terminal control), so the output reads the same in a log.
 */
#ifndef TS_REPORT_TEXT_H
#define TS_REPORT_TEXT_H

#include <stddef.h>
#include <stdio.h>

#include "analysis/slo.h"
#include "analysis/stats.h"
#include "analysis/summary.h"
#include "base/err.h"

/*
 * One line under the latency table saying what its less obvious rows
 * measure: the first token (TTFC) against vLLM's TTFT, and lag. Printed
 * once per page of output (not per traffic class); the streaming rows are
 * left out when s streamed nothing.
 */
void report_text_legend(FILE *f, const struct run_stats *s);

/* Prints the summary of s (sum computed from it). Returns 0 or -EIO if f reported an error. */
TS_MUST_CHECK int report_text_summary(FILE *f, const struct run_stats *s,
                                      const struct run_summary *sum);

/*
 * Prints one row per SLO (expression, actual value, pass/FAIL) and stores the
 * number that failed in *failed (may be NULL). Prints nothing for n == 0.
 * Returns 0 or -EIO.
 */
TS_MUST_CHECK int report_text_slo(FILE *f, const struct slo *slos, size_t n,
                                  const struct run_summary *sum, size_t *failed);

#endif
