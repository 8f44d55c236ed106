/*
 * shaper.h - byte shaping of one connection's output, shared by the HTTP
 * server (what it writes to a client), the HTTP client's own HTTP/1.1
 * engine (the request bytes it writes to a server) and the WebSocket client
 * (everything it writes to a server, ws_call_spec.send_shaper): the chaos
 * proxy's TCP faults in each direction.
 */
#ifndef TS_NET_SHAPER_H
#define TS_NET_SHAPER_H

#include <stdint.h>

/*
 * A shaper decides, for one connection, how many of the bytes queued for it may go to the kernel and
 * when, and may end the connection after a given byte count.
 *
 * allow() is called on the loop thread at every flush pass of the connection
 * (after bytes were queued, after a write completed, when the shaper's own
 * wake time passed): queued is the count of bytes ever queued on the
 * connection (head and framing included), sent the count ever handed to the
 * kernel, now_ns ts_now_ns(). It returns how many more bytes may be handed
 * over now (the server clamps it to queued - sent and hands them all over).
 * *wake_at_ns (0 on entry) is when to call again; leave it 0 to be called
 * only when more bytes are queued or a write completes. *then (MORE on
 * entry) set to CLOSE or RESET ends the connection once the allowed bytes are
 * written: CLOSE closes the socket (FIN), RESET resets it (RST); a request
 * held by the handler gets on_abort. allow must not call into the server.
 *
 * close_delay_ns delays an orderly close (FIN after a response with
 * "Connection: close", http_stream_abort, ...) by that long: slow close.
 * release(ctx) (may be NULL) runs once when the connection is freed.
 *
 * On the client (http_call_spec.send_shaper) the shaper covers one call:
 * queued is the request's size (head and body), sent what was written of it;
 * allow is also called at its wake times after the request was sent, so a
 * reset after a delay can cut the response; CLOSE and RESET end the call with
 * a send (or, once sent, a receive) error; close_delay_ns is ignored;
 * release(ctx) runs when the call ends.
 */
enum http_shape_then { HTTP_SHAPE_MORE = 0, HTTP_SHAPE_CLOSE, HTTP_SHAPE_RESET };

struct http_shaper {
    uint64_t (*allow)(void *ctx, uint64_t queued, uint64_t sent, uint64_t now_ns,
                      uint64_t *wake_at_ns, enum http_shape_then *then);
    uint64_t close_delay_ns;
    void (*release)(void *ctx);
    void *ctx;
};

#endif
