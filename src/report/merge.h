/*
 * merge.h - one exact result from the results of several processes or
 * machines that ran one load together (`tokenstorm merge`, docs/COMPARE.md).
 *
 * Inputs are result directories (or result.json files, whose latency.hlog and
 * requests.jsonl are looked for next to them). The merged result:
 *  - run_stats: every histogram added (hdr_add) and every counter summed, so
 *    the merged percentiles, means and counts are those of one run over the
 *    union of the requests (result_read_stats() rebuilds each input exactly);
 *  - duration: the measure of the union of the inputs' measured wall-clock
 *    spans [started_at + warmup_s, + duration_s] (overlapping processes
 *    count once, a gap between sequential runs not at all); throughputs are
 *    recomputed over it (run_summary_compute);
 *  - timeline: aligned on wall-clock time in whole seconds from the earliest
 *    started_at. Each input point (an interval ending at t_s) goes to the
 *    second that holds the middle of its interval; counts (sent, completed,
 *    errors, in_flight, output_tokens, chunks) are summed; the percentiles
 *    (ttft_p50_ms, ttft_p99_ms, e2el_p50_ms, lag_p99_ms) cannot be summed
 *    and come from the merged interval histograms of the latency.hlog files
 *    (null when an input has no latency.hlog). t_s is the end of the second;
 *    max_output_tokens_per_s is the highest merged second after the earliest
 *    warm-up end;
 *  - latency.hlog (when every input has one): the interval logs merged
 *    interval by interval on absolute time (the log's StartTime plus the
 *    interval start; BaseTime when it is set and not 0; absolute starts
 *    as they are), per tag, into one-second intervals bucketed like the
 *    timeline, written with StartTime = BaseTime = the earliest start;
 *  - requests.jsonl (when every input has one): the lines of input i, in
 *    input order, with "id" rewritten to the string "<i>-<id>" (unique across
 *    inputs), "input": i added, and the time points (intended_ms, start_ms,
 *    first_byte_ms, first_chunk_ms, first_token_ms, first_answer_ms,
 *    last_chunk_ms, end_ms)
 *    shifted to the merged start (started_at_i - earliest, ms precision);
 *    spans (ttft_ms, ...) are unchanged. Malformed lines are skipped and
 *    counted;
 *  - run: the configuration keys all inputs agree on, plus "merged_from"
 *    (path, run_id, started_at, duration_s, requests of each input);
 *    warmup_s is the longest warm-up, end_mode "cut" if any input was cut;
 *  - goodput: the thresholds when every input used the same ones (else off,
 *    with a note); --slo expressions are evaluated on the merged summary.
 */
#ifndef TS_REPORT_MERGE_H
#define TS_REPORT_MERGE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "analysis/slo.h"
#include "analysis/stats.h"
#include "analysis/summary.h"
#include "base/err.h"

#define MERGE_INPUTS_MAX 1024
#define MERGE_SPAN_MAX_S (7 * 86400) /* inputs further apart are refused */
#define MERGE_NOTES_MAX  8

struct merge_cfg {
    const struct slo *slos; /* evaluated into the result; may be NULL with nslos 0 */
    size_t nslos;
    bool force; /* overwrite OUT_DIR/result.json when it exists */
};

struct merge_result {
    struct run_stats *stats; /* merged; owned */
    struct run_summary sum;  /* of stats (sum.stats == stats) */
    json_t *doc;             /* the document written to result.json; owned */
    size_t inputs;
    bool wrote_hlog;
    bool wrote_requests;
    uint64_t request_lines;           /* written to requests.jsonl */
    uint64_t skipped_lines;           /* malformed requests.jsonl lines left out */
    char notes[MERGE_NOTES_MAX][256]; /* what was left out and why */
    size_t nnotes;
};

/*
 * Merges the runs at paths[0..n) into out_dir (created if needed; it may not
 * be the directory of an input): result.json, and latency.hlog and
 * requests.jsonl as described above, each written to a temporary file
 * renamed into place. Returns 0 and fills *out (merge_result_release() it);
 * or, with a message in err and nothing to release: -EINVAL (n < 2 or over
 * MERGE_INPUTS_MAX, out_dir is an input's directory, a run given twice, inputs further apart
 * than MERGE_SPAN_MAX_S or without run.started_at), -EEXIST (result.json
 * exists and !cfg->force), errors of runfiles.h and result_read_stats()
 * (bad input), TS_PARSE (a malformed latency.hlog), a negative errno
 * (cannot write), or -ENOMEM.
 */
TS_MUST_CHECK int merge_runs(const char *const *paths, size_t n, const char *out_dir,
                             const struct merge_cfg *cfg, struct merge_result *out, char *err,
                             size_t errlen);
void merge_result_release(struct merge_result *r);

#endif
