/*
 * ws.h - WebSocket (RFC 6455) framing over memory, on wslay.
 *
 * A struct ws_conn is one side of a WebSocket connection whose socket is
 * owned by someone else (the HTTP server after an upgrade, or the realtime
 * client): bytes read from the socket go in with ws_conn_feed(), frames to
 * send come out through the write callback, which hands them to the socket.
 * Frames are parsed and built by wslay (libwslay, Debian's libwslay-dev):
 * this module holds no frame parser of its own.
 *
 * What wslay does for us, and so for every user of ws_conn:
 *   - masking: a client masks every frame (with a mask from a seeded
 *     xoshiro stream, see ws_conn_init), a server refuses unmasked frames
 *     and a client refuses masked ones (close 1002);
 *   - fragmentation: a fragmented message is reassembled before on_message;
 *     control frames between fragments are handled;
 *   - ping is answered with pong (queued and written at once); pong is
 *     ignored;
 *   - close: a received close frame is answered with a close of the same
 *     code; ws_conn_close() sends ours; after both the connection is done;
 *   - bad frames (reserved bits, bad opcodes, a control frame over 125
 *     bytes, text that is not UTF-8 is NOT checked by wslay) end in a close
 *     with 1002, an over-long message in a close with 1009.
 *
 * Limits: a message (all its fragments) is at most max_message bytes
 * (wslay keeps it until the last fragment): a longer one closes with 1009.
 *
 * Callbacks run inside ws_conn_feed() (on_message, write) and inside the
 * send calls (write only). A callback must not release the ws_conn; it may
 * call ws_conn_send_text() and ws_conn_close().
 */
#ifndef TS_NET_WS_H
#define TS_NET_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/rng.h"

#define WS_OP_TEXT   0x1
#define WS_OP_BINARY 0x2
#define WS_OP_CLOSE  0x8

#define WS_CLOSE_NORMAL     1000
#define WS_CLOSE_GOING_AWAY 1001
#define WS_CLOSE_PROTOCOL   1002
#define WS_CLOSE_NO_STATUS  1005 /* a close frame without a code */
#define WS_CLOSE_ABNORMAL   1006 /* no close frame at all (never sent) */
#define WS_CLOSE_POLICY     1008
#define WS_CLOSE_TOO_BIG    1009
#define WS_CLOSE_SERVER_ERR 1011

#define WS_ACCEPT_LEN 28 /* characters of a Sec-WebSocket-Accept value */
#define WS_KEY_LEN    24 /* characters of a Sec-WebSocket-Key value */

struct ws_conn;

struct ws_conn_ops {
    /* A whole text or binary message of the peer (opcode WS_OP_TEXT or
     * WS_OP_BINARY), data valid during the call only. May be NULL. */
    void (*on_message)(struct ws_conn *ws, int opcode, const uint8_t *data, size_t len, void *ctx);
    /* Frame bytes to send, in order. Returns 0, or a negative error: the
     * connection then counts as failed (ws_conn_failed). Required. */
    int (*write)(struct ws_conn *ws, const void *data, size_t len, void *ctx);
};

struct ws_conn {
    /* read-only for the owner */
    uint64_t msgs_in, msgs_out; /* text and binary messages received, queued */
    uint64_t pings_in;

    /* private */
    void *wslay; /* struct wslay_event_context */
    const struct ws_conn_ops *ops;
    void *ctx;
    const uint8_t *in;
    size_t in_len;
    struct rng mask_rng;
    bool failed;
    bool server;
};

/*
 * Prepares ws as the server side (server true) or the client side of a
 * connection whose handshake is done. mask_seed seeds the client's masks
 * (ignored for a server). Returns 0, -EINVAL (no write callback or
 * max_message 0) or -ENOMEM.
 */
TS_MUST_CHECK int ws_conn_init(struct ws_conn *ws, bool server, size_t max_message,
                               uint64_t mask_seed, const struct ws_conn_ops *ops, void *ctx);

/* Frees what ws holds. A zeroed or released ws_conn may be released again. */
void ws_conn_release(struct ws_conn *ws);

/*
 * Feeds bytes read from the socket: whole messages go to on_message, and
 * answers wslay owes the peer (pong, the close reply) are written. Returns
 * 0; TS_CLOSED once no more can be read (a close frame came, or a protocol
 * error made us send one: see ws_conn_close_received/ws_conn_close_sent);
 * -EIO if a write failed; -ENOMEM.
 */
TS_MUST_CHECK int ws_conn_feed(struct ws_conn *ws, const void *data, size_t len);

/* Queues one message, opcode WS_OP_TEXT or WS_OP_BINARY, and writes its
 * frame. Returns 0, TS_CLOSED (a close was sent or writing failed),
 * -EINVAL (another opcode) or -ENOMEM. */
TS_MUST_CHECK int ws_conn_send(struct ws_conn *ws, int opcode, const void *data, size_t len);

/* ws_conn_send(ws, WS_OP_TEXT, data, len). */
TS_MUST_CHECK int ws_conn_send_text(struct ws_conn *ws, const void *data, size_t len);

/*
 * Sends a close frame with code (1000..4999; 0: none) and reason (NULL or
 * at most 123 bytes, cut there). Returns 0, TS_CLOSED (already sent) or a
 * negative error.
 */
int ws_conn_close(struct ws_conn *ws, uint16_t code, const char *reason);

/* Whether the peer's close frame came; its code (WS_CLOSE_NO_STATUS if it
 * had none, 0 before it came). */
bool ws_conn_close_received(const struct ws_conn *ws);
uint16_t ws_conn_close_code(const struct ws_conn *ws);
/* Whether we sent a close frame; its code. */
bool ws_conn_close_sent(const struct ws_conn *ws);
uint16_t ws_conn_close_code_sent(const struct ws_conn *ws);
/* Whether a write failed. */
bool ws_conn_failed(const struct ws_conn *ws);

/* The Sec-WebSocket-Accept value for a Sec-WebSocket-Key (RFC 6455 4.2.2):
 * base64(SHA-1(key + GUID)), written to out with a NUL. Returns 0 or
 * -EINVAL (key longer than 256 bytes). */
TS_MUST_CHECK int ws_accept_key(const char *key, size_t key_len, char out[WS_ACCEPT_LEN + 1]);

/* A Sec-WebSocket-Key: base64 of 16 bytes from r, with a NUL. */
void ws_client_key(struct rng *r, char out[WS_KEY_LEN + 1]);

/* Whether a Sec-WebSocket-Key value is well formed: base64 of 16 bytes. */
bool ws_key_valid(const char *key);

#endif
