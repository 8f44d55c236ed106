/*
 * recover.h - a result.json rebuilt from what a run that never finished
 * (SIGKILL, a crash, a full disk) left in its directory: latency.hlog,
 * written every second, and requests.jsonl, written as requests end (with
 * --save-requests). `tokenstorm report`, `merge` and `compare` use it when a
 * directory has these files but no result.json; nothing is written to the
 * directory.
 *
 * What the rebuilt document holds (docs/REPORTS.md, "Recovered runs"):
 *  - with requests.jsonl: every counter (requests, outcomes, HTTP classes,
 *    tokens, streams, warm-up) and every per-request histogram from its
 *    lines, exactly as the run would have counted them; ITL (per gap, not
 *    in the lines) from latency.hlog. Malformed lines (the last one may be
 *    cut) are skipped and counted;
 *  - with latency.hlog only: the ttft, itl, tpot, e2el and lag histograms
 *    summed over its intervals; the counts are the successful requests
 *    (the e2el count), failures are unknown;
 *  - run.started_at from the log's StartTime; duration_s from the last
 *    interval's end or the last request's end, whichever is later, minus
 *    the warm-up (the earliest intended send of a request not in warm-up,
 *    when the lines have warm-up requests); end_mode "cut" (what was in
 *    flight is lost);
 *  - "recovered": {"from": ["latency.hlog", "requests.jsonl"], "reason",
 *    "hlog_intervals", "request_lines", "skipped_lines"}, which readers
 *    show ("recovered from ..."). The run's configuration is not known.
 */
#ifndef TS_REPORT_RECOVER_H
#define TS_REPORT_RECOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "base/err.h"

/* True when dir has no result.json but a latency.hlog or requests.jsonl. */
bool recover_possible(const char *dir);

/*
 * Rebuilds the result document of the run in dir. Returns 0 and a new
 * reference in *out (json_decref it); -EBUSY when a process still holds
 * the directory's lock (the run is going on: its result.json will come);
 * -ENOENT when dir has neither file; TS_PARSE (a malformed latency.hlog),
 * TS_TOOBIG, -ENOMEM or an errno; with "dir: reason" in err.
 */
TS_MUST_CHECK int recover_result(const char *dir, json_t **out, char *err, size_t errlen);

/*
 * The same from open files: hlog (latency.hlog) and requests (requests.jsonl),
 * either NULL when absent; label (the directory) prefixes errors. Takes no
 * lock and never closes the files. Every line of requests is outside input:
 * lines over RUNFILES_LINE_MAX or that are not a request record are skipped
 * and counted. Returns as recover_result() (never -EBUSY or -ENOENT).
 */
TS_MUST_CHECK int recover_result_files(FILE *hlog, FILE *requests, const char *label, json_t **out,
                                       char *err, size_t errlen);

#endif
