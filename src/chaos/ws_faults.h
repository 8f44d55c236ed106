/*
 * ws_faults.h - the WebSocket frame faults (ws_delay, ws_drop, ws_duplicate,
 * ws_truncate, ws_close, ws_stall) of one proxied WebSocket connection, as a
 * pure, I/O-free decision: for each whole message one side sends, what
 * goes to the other, when, and whether the connection is closed. A
 * connection has one tap per direction (a fault's direction: downstream,
 * the server's messages to the client, by default; upstream, the client's
 * to the server; or both, counted apart in each).
 * Driven by proxy_ws.c; testable in virtual time (tests/unit/test_ws_faults.c).
 *
 * Text messages are read as OpenAI Realtime events (their "type" member,
 * ws_event_type). Downstream, the faults that act "after N events" count
 * text deltas (response.output_text.delta, response.text.delta) of the
 * current response, from its response.created; upstream they count every
 * client message (session.update, response.create...) of the connection.
 * docs/CHAOS.md is the manual.
 */
#ifndef TS_CHAOS_WS_FAULTS_H
#define TS_CHAOS_WS_FAULTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/rng.h"
#include "chaos/fault.h"

#define WS_EVENT_PARSE_MAX (1u << 20)
#define WS_EVENT_TYPE_MAX  64

/*
 * The Realtime event type of the message data[0..len) (any bytes: parsed
 * by jansson, capped at WS_EVENT_PARSE_MAX bytes) into type (NUL-ended):
 * its "type" member when it is a JSON object with a string type shorter
 * than WS_EVENT_TYPE_MAX, else "". Returns type.
 */
const char *ws_event_type(const char *data, size_t len, char type[WS_EVENT_TYPE_MAX]);

enum {
    WS_FT_DELAY,
    WS_FT_DROP,
    WS_FT_DUPLICATE,
    WS_FT_TRUNCATE,
    WS_FT_CLOSE,
    WS_FT_STALL,
    WS_FT_N
};

struct ws_tap {
    struct fault *f[WS_FT_N]; /* referenced; NULL: not rolled */
    bool up;                  /* the client's messages (FAULT_DIR_UPSTREAM) */
    uint64_t after[WS_FT_N];  /* after_events sampled once */
    struct rng rng;
    uint64_t seen[WS_FT_N]; /* the events each fault targets, in the current response */
    uint64_t last_at;       /* the latest time given so far (order is kept) */
    uint64_t stall_until;   /* nothing goes out before */
    bool swallowing;        /* ws_truncate fired: the rest of the response is dropped */
    bool closed;            /* ws_close fired: nothing more goes out */
    bool stalled;           /* ws_stall fired (once per response) */
    uint64_t injected[WS_FT_N];
};

/* What to do with one message. */
struct ws_verdict {
    unsigned copies; /* 0 (dropped), 1 or 2 (duplicated) */
    uint64_t at;     /* when they go out (>= now, >= every earlier at) */
    bool close;      /* then close the receiving side with code and reason */
    uint16_t code;
    const char *reason; /* the fault's text, "" when none */
};

/* Takes the WS-family faults among faults[0..n) that act in direction dir
 * (FAULT_DIR_DOWNSTREAM or FAULT_DIR_UPSTREAM; the first of each type;
 * references taken) and samples their counts from seed. */
void ws_tap_init(struct ws_tap *t, struct fault *const *faults, size_t n, uint64_t seed,
                 enum fault_direction dir);
/* Drops the references. */
void ws_tap_release(struct ws_tap *t);
/* Whether any fault is held. */
bool ws_tap_active(const struct ws_tap *t);

/*
 * One message of event type (ws_event_type) arrived at now_ns: the
 * verdict. Each fault that acts is counted (fault_count_injection) once per
 * action. Downstream a response begins at response.created (the counts
 * restart, a truncation and a stall end); upstream nothing restarts.
 */
struct ws_verdict ws_tap_message(struct ws_tap *t, const char *type, uint64_t now_ns);

#endif
