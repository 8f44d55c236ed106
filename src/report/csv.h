/*
 * csv.h - CSV exports of a report_docset, for people who already chart
 * Locust's files or load numbers into a spreadsheet.
 *
 * report_csv_stats() writes Locust's stats CSV header exactly:
 *   Type,Name,Request Count,Failure Count,Median Response Time,
 *   Average Response Time,Min Response Time,Max Response Time,
 *   Average Content Size,Requests/s,Failures/s,50%,66%,75%,80%,90%,95%,98%,
 *   99%,99.9%,99.99%,100%
 * with one row per run and one per sweep step that has its result.json:
 *  - Type is "POST" (every request is one), Name the run's name, or
 *    "SWEEP/STEP-DIR" for a step;
 *  - Request Count = ok + failed requests (requests cut at the end of a run
 *    are left out, they have no response time), Failure Count = failed;
 *  - the response-time columns are the latency metric asked for, in
 *    milliseconds with microsecond precision, over successful requests (the
 *    run's histograms hold nothing else): E2EL for the Locust-like file,
 *    TTFT for its companion; "N/A" when there is no sample (as Locust);
 *  - Average Content Size is the mean number of output tokens of an ok
 *    request (Locust has bytes there);
 *  - Requests/s and Failures/s divide by the measured duration.
 * Unlike Locust there is no "Aggregated" row: runs are separate experiments.
 *
 * report_csv_timeline() writes one row per timeline point of every run (and
 * sweep step): Name,t_s,sent,completed,errors,in_flight,output_tokens,chunks,
 * ttft_p50_ms,ttft_p99_ms,e2el_p50_ms,lag_p99_ms.
 *
 * report_csv_sweep() writes one row per sweep step: Name,dir,load,offered,
 * achieved_rps,output_tps,goodput_rps,ttft_p50_ms,ttft_p99_ms,tpot_p50_ms,
 * tpot_p99_ms,e2el_p50_ms,e2el_p99_ms,error_rate,slo_pass,saturated,
 * rouge_l_mean,bleu4_mean,exact_match_rate (empty cells for absent values).
 *
 * Fields are quoted only when they hold a comma, quote or line break
 * (Python's csv.QUOTE_MINIMAL, what Locust uses); lines end with "\n". Each
 * function returns 0 or -EIO when the stream reported an error.
 */
#ifndef TS_REPORT_CSV_H
#define TS_REPORT_CSV_H

#include <stdio.h>

#include "analysis/stats.h"
#include "base/err.h"
#include "report/docset.h"

TS_MUST_CHECK int report_csv_stats(FILE *f, const struct report_docset *set, enum stat_metric m);
TS_MUST_CHECK int report_csv_timeline(FILE *f, const struct report_docset *set);
TS_MUST_CHECK int report_csv_sweep(FILE *f, const struct report_docset *set);

#endif
