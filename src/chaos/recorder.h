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

/* Lines dropped so far; lines written. */
uint64_t recorder_dropped(struct recorder *r);
uint64_t recorder_written(struct recorder *r);

#endif
