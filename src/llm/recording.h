/*
 * recording.h - reading the recordings `tokenstorm proxy --record DIR`
 * writes (chaos/recorder.h writes them; docs/CHAOS.md "Recordings" is the
 * format): one JSON object a line, one line per exchange.
 *
 * A line (fields the reader needs are marked *):
 *   {"v": 1*, "id": N, "offset_ms": F* (from the recording's start),
 *    "method": "POST"*, "path": "/v1/chat/completions"*, "headers": {...},
 *    "body": JSON value, or a string when the body was not JSON,
 *    "body_hash": "16 hex digits"* (recording_body_hash, before redaction),
 *    "status": 200* (0: no response), "response_headers": {...},
 *    "events": [[t_ms, "data"] or [t_ms, "data", "type"], ...] (an event
 *    stream: each event from the request's arrival) or "response_body": a JSON
 *    value or a string, "end_ms": F (from the request's arrival), "outcome"}
 * A WebSocket session the proxy relayed has "websocket": true and
 * "messages" instead of "events" (docs/CHAOS.md); it is not replayed.
 *
 * Limits: a line of at most RECORDING_LINE_MAX bytes, RECORDING_EVENTS_MAX
 * events an exchange, RECORDING_MAX exchanges a recording, files of at most
 * RECORDING_FILE_MAX bytes. Errors name "file:line: field".
 */
#ifndef TS_LLM_RECORDING_H
#define TS_LLM_RECORDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define RECORDING_LINE_MAX   (16u << 20)
#define RECORDING_EVENTS_MAX 200000
#define RECORDING_MAX        (1u << 20)
#define RECORDING_FILE_MAX   (1ull << 31)

struct rec_event {
    uint64_t t_ns; /* from the request's arrival */
    char *data;    /* NUL-terminated (owned by the exchange) */
    size_t len;
    char *type; /* NULL: "message" */
};

struct rec_exchange {
    uint64_t offset_ns; /* arrival, from the recording's start */
    char method[16];
    char *path;
    char *body; /* the request body as sent again: compact JSON, or the string */
    size_t body_len;
    char body_hash[17];
    char model[128]; /* the body's "model", or "" */
    int status;
    char *content_type; /* the response's, or NULL */
    struct rec_event *ev;
    size_t nev;
    char *resp_body; /* non-stream responses: compact JSON or the string; else NULL */
    size_t resp_len;
    uint64_t end_ns; /* from the request's arrival; 0: unknown */
    bool websocket;  /* a WebSocket session ("websocket": true): only offset_ns is read */
};

struct recording {
    struct rec_exchange *v; /* by offset_ns */
    size_t n;
    uint64_t skipped;   /* lines that could not be read (recording_load_dir: warned) */
    uint64_t websocket; /* WebSocket sessions: kept out, not replayed */
};

/*
 * Parses one line into *x (zeroed first; rec_exchange_release it). Returns
 * 0, or TS_PARSE / TS_TOOBIG / -ENOMEM with the reason (naming the field) in
 * err.
 */
TS_MUST_CHECK int rec_exchange_parse(const char *line, size_t len, struct rec_exchange *x,
                                     char *err, size_t errlen);
void rec_exchange_release(struct rec_exchange *x);

/*
 * Reads every rec-*.jsonl of dir (or dir itself when it is a file) in name
 * order. A line that cannot be read is skipped and counted (the first
 * reason in err stays available as a warning when it returns 0); a
 * WebSocket session is counted in websocket and kept out. Returns 0
 * and *out (recording_free it), or a negative errno / TS_PARSE (no
 * exchange at all) with "path: reason" in err.
 */
TS_MUST_CHECK int recording_load(const char *dir, struct recording **out, char *err, size_t errlen);
void recording_free(struct recording *r);

/* The FNV-1a 64 hash of a body's canonical form (compact JSON with sorted
 * keys; the bytes themselves when it is not JSON), as 16 hex digits. */
void recording_body_hash(const char *body, size_t len, char out[17]);

#endif
