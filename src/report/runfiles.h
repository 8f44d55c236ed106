/*
 * runfiles.h - the files of one run's result directory, found from a path
 * on the command line, and a capped line reader for its .jsonl files. Used
 * by `tokenstorm compare` and `tokenstorm merge`.
 *
 * A path names a run either as its result.json file (any name: the run's
 * other files are looked for next to it) or as the directory holding
 * result.json. A directory without result.json but with latency.hlog or
 * requests.jsonl is a run that never finished: its result is rebuilt from
 * them (report/recover.h) when it is loaded.
 */
#ifndef TS_REPORT_RUNFILES_H
#define TS_REPORT_RUNFILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/err.h"

#define RUNFILES_PATH_MAX 4096
#define RUNFILES_JSON_MAX ((size_t)256 << 20) /* largest result.json read */
#define RUNFILES_LINE_MAX ((size_t)1 << 20)   /* longest .jsonl line read */

struct runfiles {
    char dir[RUNFILES_PATH_MAX];      /* the directory of the run's files */
    char result[RUNFILES_PATH_MAX];   /* result.json (or the file given) */
    char requests[RUNFILES_PATH_MAX]; /* DIR/requests.jsonl, "" when there is none */
    char hlog[RUNFILES_PATH_MAX];     /* DIR/latency.hlog, "" when there is none */
    bool recovered; /* no result.json: result holds DIR, runfiles_load rebuilds it */
};

/*
 * Finds the files of the run at path. Returns 0, or -ENOENT / a negative
 * errno / -ENAMETOOLONG with "path: reason" in err when there is no
 * result.json there.
 */
TS_MUST_CHECK int runfiles_locate(const char *path, struct runfiles *out, char *err, size_t errlen);

/*
 * Reads and parses a tokenstorm.result/1 document (at most RUNFILES_JSON_MAX
 * bytes). Returns 0 and a new reference in *out (json_decref it), a negative
 * errno, TS_TOOBIG, TS_PARSE (not JSON: "file:line:column: reason"; or not
 * a result document) or -ENOMEM, with the reason in err.
 */
TS_MUST_CHECK int runfiles_load_result(const char *path, json_t **out, char *err, size_t errlen);

/*
 * The result document of a located run: runfiles_load_result(f->result), or
 * for a recovered run recover_result(f->dir) (-EBUSY while a process still
 * writes the directory). Returns as they do.
 */
TS_MUST_CHECK int runfiles_load(const struct runfiles *f, json_t **out, char *err, size_t errlen);

/*
 * Parses an RFC 3339 UTC time as result.json writes it
 * ("2026-11-29T17:31:48.123Z"; fraction optional, up to 9 digits) into
 * nanoseconds since the epoch. Returns 0 or -EINVAL.
 */
TS_MUST_CHECK int runfiles_parse_time(const char *s, uint64_t *out_ns);

/* Reads a file line by line; lines are capped. */
struct line_reader {
    FILE *f; /* borrowed */
    long line_no;
    struct buf line;
};

/* max 0 means RUNFILES_LINE_MAX. */
void line_reader_init(struct line_reader *r, FILE *f, size_t max);
void line_reader_release(struct line_reader *r);
/*
 * Reads the next line (without its '\n'; a last line without one counts;
 * NUL bytes are part of the line, so *len may exceed strlen(*line)).
 * Returns 1 with *line (owned by the reader, valid until the next call) and
 * *len, 0 at the end, TS_TOOBIG for a line longer than the cap (the whole
 * line is consumed and counted once), -EIO, or -ENOMEM.
 */
TS_MUST_CHECK int line_reader_next(struct line_reader *r, const char **line, size_t *len);

#endif
