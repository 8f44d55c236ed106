/*
 * ws_client.h - one WebSocket client connection on libuv: TCP connect, the
 * HTTP/1.1 upgrade (parsed with http-parser), then frames through ws_conn
 * (wslay). Used by the load engine's realtime transport.
 *
 *     ws_call_open(loop, &spec, &ops, user, &call);   // connects
 *     ... on_open(call)          the 101 came: send with ws_call_send_text()
 *     ... on_message(call, ...)  each whole text message, with its read time
 *     ... ws_call_close(call, 1000, NULL) when done, or ws_call_cancel(call)
 *     ... on_done(call, &res)    once, always last; the call is freed after
 *
 * ws:// and wss:// (TLS by OpenSSL over memory BIOs, net/ws_tls.h: SNI,
 * the certificate's chain and name checked unless spec->insecure). Every
 * callback runs from a libuv callback, never inside a ws_call_* call; after
 * on_done returns the call is gone. Limits: the response head 16 KiB, a
 * refusal's body 16 KiB (kept for the error text), a message
 * spec->max_message (default 4 MiB; longer: the call closes with 1009).
 */
#ifndef TS_NET_WS_CLIENT_H
#define TS_NET_WS_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "base/err.h"
#include "net/http_client.h"

struct ws_call;

struct ws_call_spec {
    const char *url;            /* ws://host:port/path?query */
    const char *const *headers; /* "Name: value" lines added to the upgrade request */
    size_t n_headers;
    uint32_t connect_timeout_ms; /* 0: 10000 */
    uint32_t total_timeout_ms;   /* 0: none */
    uint32_t idle_timeout_ms;    /* silence (nothing read) from the connect on; 0: none */
    size_t max_message;          /* 0: 4 MiB */
    uint64_t mask_seed;          /* seeds the frame masks and the key */
    bool insecure;               /* wss://: do not check the server's certificate */
    /* Optional: paces or cuts the bytes written to the server (net/shaper.h;
     * the whole connection: upgrade request, TLS, frames), copied. allow is
     * also called at its wake times when nothing waits, so a reset after a
     * delay cuts an idle connection; CLOSE and RESET end the call with
     * HTTP_CALL_ERR_SEND; close_delay_ns is ignored. With allow set, the call
     * owns ctx once ws_call_open returns 0 (release runs when it ends); on an
     * error, or with allow NULL (no shaper: ignored), the caller still does. */
    const struct http_shaper *send_shaper;
};

struct ws_call_result {
    enum http_call_error error; /* HTTP_CALL_OK: closed by either side with a close frame */
    const char *error_text;     /* "" when none */
    long status;                /* the upgrade's answer: 101, or the refusing status */
    const char *body;           /* a refusal's body (capped), "" otherwise */
    size_t body_len;
    uint16_t close_code; /* the peer's close code; WS_CLOSE_ABNORMAL without a frame */
    bool close_by_peer;  /* the peer sent its close first */
    uint64_t start_ns;   /* ws_call_open */
    uint64_t connect_ns; /* TCP connected (absolute, ts_now_ns clock) */
    uint64_t tls_ns;     /* wss://: the TLS handshake done (0 for ws://) */
    uint64_t sent_ns;    /* upgrade request handed to the kernel */
    uint64_t upgrade_ns; /* the 101 head arrived */
    uint64_t end_ns;
    uint64_t msgs_in, msgs_out;
};

struct ws_call_ops {
    void (*on_open)(struct ws_call *c, void *user);
    /* a whole message, opcode WS_OP_TEXT or WS_OP_BINARY; at: when its
     * last bytes were read */
    void (*on_message)(struct ws_call *c, int opcode, const char *data, size_t len, uint64_t at,
                       void *user);
    void (*on_done)(struct ws_call *c, const struct ws_call_result *res, void *user);
};

/*
 * Starts a connection. Returns 0 with *out, or -EINVAL (bad URL, too many
 * headers, not ws:// or wss://) or -ENOMEM; on error no callback runs.
 */
TS_MUST_CHECK int ws_call_open(uv_loop_t *loop, const struct ws_call_spec *spec,
                               const struct ws_call_ops *ops, void *user, struct ws_call **out);

/* Sends one text message (after on_open). 0, TS_CLOSED or -ENOMEM. */
TS_MUST_CHECK int ws_call_send_text(struct ws_call *c, const char *data, size_t len);
/* Sends one message of opcode WS_OP_TEXT or WS_OP_BINARY (after on_open).
 * 0, TS_CLOSED, -EINVAL (another opcode) or -ENOMEM. */
TS_MUST_CHECK int ws_call_send(struct ws_call *c, int opcode, const char *data, size_t len);

/* Sends a close frame with code and reason (NULL: none; cut at 123 bytes)
 * and ends the call once the peer answers (or within 2 s). Safe to call
 * more than once. */
void ws_call_close(struct ws_call *c, uint16_t code, const char *reason);

/* Ends the call now (HTTP_CALL_ERR_ABORTED unless it ended already); on_done follows. */
void ws_call_cancel(struct ws_call *c);

#endif
