/*
 * recorder.h - `proxy --record DIR`: every exchange the proxy forwards,
 * written as one JSON line when it ends (the format is docs/CHAOS.md
 * "Recordings"; llm/recording.h reads it back), with secrets redacted and
 * the directory bounded in size.
 *
 * Files: DIR/rec-NNNNNN.jsonl, a new one when the current one passes
 * max_file bytes; the oldest are deleted while the files hold more than
 * max_total bytes. Lines are queued under a mutex and written by the
 * recorder's own thread (at least every 200 ms): no loop ever waits for the
 * disk. When more than 64 MiB wait, lines are dropped and counted.
 *
 * Memory: the exchanges in progress hold what they will write (a JSON
 * value each, about twice the bytes as written). Each reserves those bytes
 * as written from one budget (max_inflight, 256 MiB by default): its
 * request's part when it starts (not recorded at all if that does not
 * fit), then each event before it keeps it; an exchange that finds the budget spent keeps what it
 * had and leaves the rest out, as one past a line's cap does, so the
 * proxy's memory stays bounded however many streams it records at once.
 *
 * Redaction: request and response headers named Authorization,
 * Proxy-Authorization, Cookie, Set-Cookie, api-key, x-api-key (any case)
 * keep their name with the value "[redacted]"; each --redact pointer (RFC
 * 6901, where a "*" segment matches every member or element) replaces the
 * values it reaches in the request body with "[redacted]". The body hash a
 * replay matches requests by is taken before redaction.
 */
#ifndef TS_CHAOS_RECORDER_H
#define TS_CHAOS_RECORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/err.h"

#define RECORDER_MAX_REDACT  32
#define RECORDER_POINTER_MAX 256
#define RECORDER_PENDING_MAX (64u << 20)

struct recorder_config {
    const char *dir;           /* created if missing */
    uint64_t max_file;         /* 0: 64 MiB */
    uint64_t max_total;        /* 0: 1 GiB */
    uint64_t max_inflight;     /* 0: 256 MiB, the exchanges in progress as written */
    const char *const *redact; /* JSON pointers with "*" segments */
    size_t nredact;            /* <= RECORDER_MAX_REDACT */
};

struct recorder;

/*
 * Checks cfg (pointers must start with '/', at most RECORDER_POINTER_MAX
 * bytes), creates the directory, opens the first file after the ones it
 * holds and starts the thread. Returns 0 and *out, or -EINVAL / a negative
 * errno with a message naming the option or the path.
 */
TS_MUST_CHECK int recorder_open(const struct recorder_config *cfg, struct recorder **out, char *err,
                                size_t errlen);
/* Writes what is queued, stops the thread, frees r. 0 or the first write
 * error. NULL: 0. */
int recorder_close(struct recorder *r);

/* The recording's time 0 (monotonic ns): exchanges carry their offset. */
uint64_t recorder_start_ns(const struct recorder *r);

/* Whether header name is one whose value is never written. */
bool recorder_secret_header(const char *name);

/*
 * Replaces what pointer ptr reaches in root with "[redacted]" ("*" matches
 * every member of an object or element of an array). Returns how many
 * values were replaced.
 */
size_t recorder_redact(json_t *root, const char *ptr);

/* Whether r has --redact pointers. */
bool recorder_redacts(const struct recorder *r);

/* The redactions of r applied to root (a request body). */
void recorder_redact_all(const struct recorder *r, json_t *root);

/* Queues one exchange (a JSON object; stolen) as a line. 0, TS_AGAIN when
 * it was dropped (too much pending), -ENOMEM. Any thread. */
int recorder_write(struct recorder *r, json_t *exchange);

/*
 * Reserves n bytes of the in-progress budget for an exchange: true, or
 * false (nothing reserved) when they would pass it. Any thread.
 */
bool recorder_reserve(struct recorder *r, size_t n);
/* Gives back n bytes an exchange reserved (when it is written or dropped). */
void recorder_unreserve(struct recorder *r, size_t n);

/* Why an exchange's events or messages were left out from some point on. */
enum recorder_cut {
    RECORDER_CUT_LINE,   /* its line would pass what a reader takes */
    RECORDER_CUT_MEMORY, /* the exchanges in progress held max_inflight */
    RECORDER_CUT_COUNT,
};
/* Counts an exchange written with a part left out. */
void recorder_count_cut(struct recorder *r, enum recorder_cut why);
/* Counts an exchange not recorded at all: its request did not fit the
 * budget. */
void recorder_count_skip(struct recorder *r);

struct recorder_stats {
    uint64_t written, dropped;        /* lines: queued, and dropped (the disk was behind) */
    uint64_t skipped;                 /* exchanges not recorded (recorder_count_skip) */
    uint64_t cut[RECORDER_CUT_COUNT]; /* exchanges written with a part left out */
    uint64_t inflight, max_inflight;  /* bytes reserved now, and the budget */
};
void recorder_stats(struct recorder *r, struct recorder_stats *out);

#endif
