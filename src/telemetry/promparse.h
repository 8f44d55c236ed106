/*
 * promparse.h - a reader of the Prometheus text exposition format (0.0.4),
 * the inverse of prom.h, for scraping a server's /metrics during a run.
 *
 * Accepted input (one sample or comment per '\n'-terminated line; a '\r'
 * before the '\n' and blank lines are tolerated):
 *   # HELP name text            ignored
 *   # TYPE name type            reported to on_type (counter, gauge, histogram,
 *                               summary, untyped, and OpenMetrics' unknown,
 *                               gaugehistogram, stateset, info)
 *   # EOF                       OpenMetrics end of input: the rest is ignored
 *   # anything else             a comment, ignored
 *   name{l1="v1",l2="v2",} value [timestamp] [# exemplar]
 * Metric names match [a-zA-Z_:][a-zA-Z0-9_:]*, label names
 * [a-zA-Z_][a-zA-Z0-9_]*; label values are quoted with the escapes \\ \" \n.
 * Values are floats as Go's ParseFloat reads them, including NaN, +Inf,
 * -Inf. The timestamp is reported as written (integer milliseconds in
 * 0.0.4, float seconds in OpenMetrics). An OpenMetrics exemplar (" # {..}
 * v") after the value is skipped. Prometheus 3's quoted UTF-8 metric names
 * ({"a.b"}) are not supported and are a parse error.
 *
 * Strictness: like Prometheus, one malformed line fails the whole text (a
 * partial scrape would mix series of two moments). The error names the line
 * and column: "line 12, column 7: expected '=' after a label name".
 *
 * Limits (outside input is bounded): a line is at most max_line bytes, a
 * sample has at most PROMPARSE_MAX_LABELS labels (no name twice), the text
 * holds at most max_samples samples; beyond them the parse fails with
 * TS_TOOBIG. Nothing is allocated except one scratch buffer of max_line
 * bytes per call (for unescaped label values).
 *
 * The parser never copies the text: names and label values point into it
 * (or into the scratch buffer) and are valid only during the callback.
 */
#ifndef TS_TELEMETRY_PROMPARSE_H
#define TS_TELEMETRY_PROMPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define PROMPARSE_MAX_LABELS        64
#define PROMPARSE_DEFAULT_MAX_LINE  (64 * 1024)
#define PROMPARSE_DEFAULT_MAX_SAMPL 200000

enum promparse_type {
    PROMPARSE_UNTYPED = 0, /* also OpenMetrics' "unknown" */
    PROMPARSE_COUNTER,
    PROMPARSE_GAUGE,
    PROMPARSE_HISTOGRAM,
    PROMPARSE_SUMMARY,
    PROMPARSE_GAUGEHISTOGRAM,
    PROMPARSE_STATESET,
    PROMPARSE_INFO,
};

/* A string that is not NUL-terminated. */
struct promparse_str {
    const char *p;
    size_t len;
};

struct promparse_label {
    struct promparse_str name;
    struct promparse_str value; /* unescaped */
};

struct promparse_sample {
    struct promparse_str name;
    const struct promparse_label *labels;
    size_t nlabels;
    double value;
    bool has_timestamp;
    double timestamp; /* as written; see above */
    size_t line;      /* 1-based */
};

struct promparse_ops {
    /* Required. One sample. Return 0 to go on; any other value stops the
     * parse, which then returns that value (use a negative code). */
    int (*on_sample)(const struct promparse_sample *s, void *arg);
    /* Optional. A "# TYPE" line; same return convention. */
    int (*on_type)(struct promparse_str name, enum promparse_type type, void *arg);
};

struct promparse_limits {
    size_t max_line;    /* bytes per line; 0 = PROMPARSE_DEFAULT_MAX_LINE */
    size_t max_samples; /* 0 = PROMPARSE_DEFAULT_MAX_SAMPL */
};

/*
 * Parses text[0..len) (need not be NUL-terminated) and calls ops for every
 * sample and TYPE line, in order. lim may be NULL for the defaults.
 * Returns 0; TS_PARSE (malformed line), TS_TOOBIG (a limit) or -ENOMEM with
 * a message in err; -EINVAL without on_sample; or a callback's nonzero
 * value (err then untouched). Samples before a failing line were already
 * reported.
 */
TS_MUST_CHECK int promparse_text(const char *text, size_t len, const struct promparse_limits *lim,
                                 const struct promparse_ops *ops, void *arg, char *err,
                                 size_t errlen);

/* true if s equals the C string z. */
bool promparse_str_eq(struct promparse_str s, const char *z);

/* The value of the label called name in s, or NULL. */
const struct promparse_str *promparse_label(const struct promparse_sample *s, const char *name);

/* "counter", "gauge", ...; "untyped" for values out of range. */
const char *promparse_type_name(enum promparse_type t);

#endif
