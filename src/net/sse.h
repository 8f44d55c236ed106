/*
 * sse.h - incremental parser for text/event-stream (Server-Sent Events).
 *
 * Follows the WHATWG HTML "Interpreting an event stream" algorithm (9.2.6):
 *
 *   - Lines end with CRLF, LF or CR. A CR that ends one feed and an LF that
 *     starts the next count as one CRLF.
 *   - One UTF-8 BOM (EF BB BF) at the very start of the stream is skipped,
 *     even when it arrives split across feeds; a BOM anywhere else is content.
 *   - A line starting with ':' is a comment; it is passed to the optional
 *     comment callback (useful to see keep-alives) and otherwise ignored.
 *   - "name:value" lines: one space right after the colon is removed; a line
 *     without a colon is a field with that whole line as name and an empty
 *     value. Fields: data (appended plus LF to the data buffer), event (sets
 *     the event type), id (sets the last event ID unless the value contains a
 *     NUL byte), retry (sets the reconnection time if the value is ASCII
 *     digits only). Any other field is ignored.
 *   - A blank line dispatches: the last event ID is committed; if the data
 *     buffer is empty nothing is dispatched (per spec); else the final LF is
 *     removed and the event goes to the callback with type "message" unless
 *     an event field set another one. Data and type are then cleared; the
 *     last event ID stays until an id field changes it.
 *   - At end of stream (sse_parser_finish) an unterminated event is discarded.
 *
 * The parser works on bytes: it does not decode UTF-8 or replace invalid
 * sequences with U+FFFD as a browser would; bytes pass through unchanged
 * (including NUL bytes inside data: use data_len).
 *
 * Limits: there is no line-length limit of its own. Instead one event may
 * hold at most max_event_bytes: the data buffer plus the event type plus the
 * line being read (its full length, terminator excluded) may never exceed it.
 * The check depends only on the bytes of the stream, never on how they were
 * split into feeds. Exceeding it makes sse_parser_feed() return TS_TOOBIG and
 * leaves the parser in an error state: within that stream it cannot recover
 * (it cannot know where the oversized event ends safely), every later feed
 * returns the same code without reading anything. sse_parser_finish() clears
 * the error and readies the parser for a new stream (a reconnection).
 *
 * Allocation: the parser keeps three growable buffers (partial line, data,
 * event type) and the last event ID; they are reused from event to event, so
 * a steady stream allocates nothing per event. Lines that arrive whole inside
 * one feed are parsed in place, without copying.
 *
 * Not thread-safe: one parser per stream, used from one thread.
 */
#ifndef TS_NET_SSE_H
#define TS_NET_SSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

/* One dispatched event. Every pointer is owned by the parser and valid only
 * during the callback; copy what must outlive it. Strings are NUL-terminated;
 * data and type may also contain NUL bytes (use the lengths), the id never
 * does. */
struct sse_event {
    const char *type; /* "message" unless an event field set another type */
    size_t type_len;
    const char *data; /* data lines joined with "\n", no trailing "\n" */
    size_t data_len;
    const char *id; /* the last event ID at dispatch time; "" if none */
    size_t id_len;
    int64_t retry_ms; /* retry value seen in this event's block, or -1 */
    /* now_ns of the sse_parser_feed() call that delivered the blank line
     * ending this event */
    uint64_t arrival_ns;
};

/*
 * Callbacks. on_event gets each dispatched event. on_comment gets the text
 * of a comment line after the ':' (not NUL-terminated, nothing stripped),
 * valid during the call, and now_ns of the feed that completed the line.
 * Both return 0 to go on; a negative value stops the feed at once:
 * sse_parser_feed() returns that value and the parser is in the error state
 * (as after TS_TOOBIG). They must not call sse_parser_* on the same parser.
 */
struct sse_parser {
    /* what every event touches first (a client holds thousands of parsers,
     * each cold in the cache by its next event) */
    int err;             /* sticky error, 0 if none */
    uint8_t bom_seen;    /* BOM bytes matched so far (0..3) */
    bool bom_done;       /* past the possible BOM */
    bool skip_lf;        /* the previous feed ended with CR */
    bool id_dirty;       /* id changed since it was last committed */
    int64_t block_retry; /* retry seen since the last blank line, -1 none */
    /* during sse_parser_feed_inplace: the event's only data line so far,
     * still in the caller's bytes (not in data), or NULL */
    char *pend;
    size_t pend_len;
    int (*on_event)(void *ctx, const struct sse_event *ev);
    void *ctx;
    struct buf line;    /* a line not yet terminated at the end of a feed */
    struct buf data;    /* the data buffer */
    struct buf type;    /* the event type buffer */
    struct buf last_id; /* the committed last event ID string */
    struct buf id;      /* the last event ID buffer */
    /* NULL: comments are dropped */
    int (*on_comment)(void *ctx, const char *text, size_t len, uint64_t now_ns);
    size_t max_event_bytes;
    int64_t retry_ms; /* the reconnection time (stream-level), -1 unset */
};

/*
 * Prepares p for a stream. max_event_bytes caps one event as described at the
 * top (e.g. 1 MiB; 0 means 1 MiB). on_event must not be NULL. No allocation
 * happens here; the buffers grow on demand up to the cap.
 */
void sse_parser_init(struct sse_parser *p, size_t max_event_bytes,
                     int (*on_event)(void *ctx, const struct sse_event *ev), void *ctx);

/* Sets (or with NULL clears) the comment callback. */
void sse_parser_set_comment_cb(struct sse_parser *p,
                               int (*on_comment)(void *ctx, const char *text, size_t len,
                                                 uint64_t now_ns));

/*
 * Parses n more bytes of the stream, calling on_event for every event whose
 * blank line is among them (in stream order), each stamped with now_ns.
 * Returns 0 once all n bytes are consumed (partial lines are kept for the
 * next feed); TS_TOOBIG if an event exceeds max_event_bytes; -ENOMEM if a
 * buffer could not grow; or the negative value a callback returned. After any
 * error the parser is in the error state and later feeds return that error.
 * Events dispatched before the error stay dispatched.
 */
TS_MUST_CHECK int sse_parser_feed(struct sse_parser *p, const char *bytes, size_t n,
                                  uint64_t now_ns);
/*
 * sse_parser_feed() over bytes the parser may write to: an event whose only
 * data line and blank line are both in these bytes is handed to on_event
 * straight from them, the line's terminator overwritten with the NUL,
 * instead of through the data buffer (one copy of every event fewer, and
 * the buffer's cache lines untouched). Events, errors and limits are
 * exactly those of sse_parser_feed(); nothing points into bytes after it
 * returns.
 */
TS_MUST_CHECK int sse_parser_feed_inplace(struct sse_parser *p, char *bytes, size_t n,
                                          uint64_t now_ns);

/*
 * Ends the stream. Per spec an event without its closing blank line is
 * discarded. If discarded is not NULL it receives the number of bytes thrown
 * away: an unterminated line plus the data and event type of an incomplete
 * event; it is 0 when the stream ended at an event boundary (also after a
 * trailing comment or a block of id/retry fields only). A non-zero value
 * means the stream was most likely cut short.
 *
 * Returns the parser's sticky error (0 if none). Either way the parser is
 * then reset for a new stream on the same object (BOM, buffers, error state);
 * the last event ID and the reconnection time are kept, as an EventSource
 * keeps them across reconnections (the new stream's last event ID buffer
 * starts from the committed last event ID, as browsers do).
 */
int sse_parser_finish(struct sse_parser *p, size_t *discarded);

/* The last event ID string (committed at the last blank line); "" if none.
 * Owned by the parser, valid until the next feed/finish/release. */
const char *sse_parser_last_event_id(const struct sse_parser *p);

/* The reconnection time in ms set by the latest valid retry field, or -1. */
int64_t sse_parser_retry_ms(const struct sse_parser *p);

/* Frees the parser's buffers. p may be initialised again afterwards. */
void sse_parser_release(struct sse_parser *p);

#endif
