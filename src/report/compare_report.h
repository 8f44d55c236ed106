/*
 * compare_report.h - `tokenstorm compare`'s inputs and outputs: loading a
 * run (result.json, and requests.jsonl when it is there) into a
 * struct compare_run, and writing a comparison (analysis/compare.h) as
 * text, JSON ("tokenstorm.compare/1", docs/COMPARE.md) or a self-contained
 * HTML page.
 */
#ifndef TS_REPORT_COMPARE_REPORT_H
#define TS_REPORT_COMPARE_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "analysis/compare.h"
#include "base/buf.h"
#include "base/err.h"
#include "report/runfiles.h"

#define COMPARE_SCHEMA "tokenstorm.compare/1"
/* Runs with more requests than this are compared from their histograms. */
#define COMPARE_REQUESTS_MAX 5000000u

struct compare_input {
    struct runfiles files;
    json_t *doc;              /* result.json, owned */
    struct run_stats *stats;  /* owned */
    struct compare_req *reqs; /* owned; NULL when not used */
    size_t nreqs;
    struct compare_run run; /* points into the above */
    char started_at[40];    /* run.started_at, "" when unknown */
    char note[256];         /* why requests.jsonl was not used, "" otherwise */
};

/*
 * Loads the run at path (a result.json or its directory, runfiles.h). With
 * want_requests, requests.jsonl is read when present; it is left out (with
 * the reason in in->note, not an error) when it is malformed, has more than
 * COMPARE_REQUESTS_MAX lines, or its counts disagree with result.json.
 * Returns 0, or an error from runfiles.h / result_read_stats() with the
 * reason in err (in holds nothing to release then).
 */
TS_MUST_CHECK int compare_input_load(struct compare_input *in, const char *path, bool want_requests,
                                     char *err, size_t errlen);
void compare_input_release(struct compare_input *in);

/*
 * How the two runs' configurations differ (docs/COMPARE.md): a new array of
 * {"key", "base", "new"} in *out, over every key of result.json's "run"
 * (nested objects as dotted keys, e.g. "timeouts.ttfb_s", "host.kernel";
 * arrays compared whole) and "tool.version", in base's order then new's. A
 * key one run lacks is null on that side (absent and null are the same). Left out: what differs between any
 * two runs of one configuration (started_at, the measured duration_s,
 * end_mode, run_id, start_mono_ns, command_line, interrupted, merged_from;
 * interrupted_by stays) and, when both runs used the built-in simulator,
 * target (its port).
 * Returns 0, or -ENOMEM (*out untouched).
 */
TS_MUST_CHECK int compare_config_diff(const struct compare_input *base,
                                      const struct compare_input *new_, json_t **out);

/*
 * The warning `compare` prints on stderr when diff (compare_config_diff) is
 * not empty: one line, then "  KEY: BASE -> NEW" per key (values as compact
 * JSON, cut at 80 bytes; null for a key a run lacks). Nothing when it is
 * empty. Returns 0 or -EIO.
 */
TS_MUST_CHECK int compare_write_config_warning(FILE *f, const json_t *diff);

/*
 * The text report: the inputs, the method, one line per row (base, new,
 * change, relative change, interval, Mann-Whitney p, verdict), the rules and
 * the verdict. Plain ASCII. Returns 0 or -EIO.
 */
TS_MUST_CHECK int compare_write_text(FILE *f, const struct compare_input *base,
                                     const struct compare_input *new_,
                                     const struct compare_result *res,
                                     const struct compare_rule *rules);

/* The JSON document (with "config_diff", compare_config_diff()); 0 and a new
 * reference in *out, or -ENOMEM. */
TS_MUST_CHECK int compare_build_json(const struct compare_input *base,
                                     const struct compare_input *new_,
                                     const struct compare_result *res,
                                     const struct compare_rule *rules, json_t **out);

/*
 * The HTML page (appended to out): inline CSS, no script, no external
 * resource. One table: metric, BASE and NEW side by side (with a bar each),
 * change, interval, p, verdict; rows coloured by verdict (regression red,
 * worse amber, better green); above it, when the configurations differ, a
 * warning table of the keys (compare_config_diff()). Returns 0 or a buf error.
 */
TS_MUST_CHECK int compare_build_html(const struct compare_input *base,
                                     const struct compare_input *new_,
                                     const struct compare_result *res,
                                     const struct compare_rule *rules, struct buf *out);

#endif
