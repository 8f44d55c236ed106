/*
 * http_server.h - a small HTTP/1.1 server on libuv + http-parser.
 *
 * Used by the simulator (long SSE streams to thousands of clients), the chaos
 * proxy and the Prometheus /metrics endpoint. One struct http_server is
 * embedded by its owner and bound to one uv_loop_t; every function here must
 * be called on that loop's thread. Responses are written with libuv's
 * write(2), so the program must ignore SIGPIPE (src/main.c does): a client
 * that closed then gives EPIPE and the connection is dropped.
 *
 * Life cycle:
 *
 *     http_server_init(&s, loop, &cfg, on_request, ctx);   // no I/O yet
 *     http_server_listen(&s);                              // bind + listen
 *     ... uv_run(loop) ...
 *     http_server_shutdown(&s, grace_ms, on_closed);       // always, once
 *     ... the loop runs until on_closed(&s); then s may be freed ...
 *
 * After a successful http_server_init() the owner must end with
 * http_server_shutdown() and let the loop run until on_closed fires (even if
 * http_server_listen() failed or was never called): the server owns libuv
 * handles that close asynchronously. on_closed fires once every connection
 * handle is closed AND every request was finished by the handler (see
 * below), so after it the loop can end and uv_loop_close() returns 0. While
 * a request cut by shutdown is still held by the handler, nothing of the
 * server is active: uv_run() may return before on_closed; finishing the
 * request (e.g. from on_abort) completes the shutdown. http_server_shutdown()
 * may be called from any callback, on_request included.
 *
 * Requests. on_request(req, ctx) is called once per request, when its
 * headers and whole body are in. The request is owned by the server. The
 * handler must finish every request exactly once, by http_respond() or by
 * http_stream_end() (after http_stream_begin()), now or later from any
 * callback on the loop thread -- also after an abort, when those calls return
 * TS_CLOSED and only release the request. The request and everything it
 * points to (method, path, headers, body) stay valid until then and become
 * invalid during that call. Requests on one connection are handled strictly
 * one at a time, in order: pipelined requests wait, unparsed, until the
 * previous one is finished.
 *
 * Connections are HTTP/1.1 keep-alive by default; HTTP/1.0 only with
 * "Connection: keep-alive". "Connection: close" from the client makes the
 * server close after the response; the handler closes after its response by
 * putting "Connection: close\r\n" in extra_headers. Request bodies may come
 * with Content-Length or chunked (decoded). "Expect: 100-continue" is
 * answered with "100 Continue" before the body is read (unless the declared
 * Content-Length is over the limit: then 413). Upgrade and CONNECT requests
 * are handed to the handler like others, but the connection is closed after
 * the response (no protocol switch).
 *
 * Errors answered by the server itself, each followed by closing the
 * connection: 400 malformed request; 408 headers or body not complete within
 * their timeout (a connection that sent nothing is closed silently); 413 body over max_body_bytes (Content-Length checked up
 * front, chunked bodies counted as they come); 414 request target alone over
 * max_header_bytes; 431 header bytes (target + names + values) over
 * max_header_bytes or more than max_headers fields; 500 out of memory.
 * A close after a response is graceful: the server flushes, sends FIN, and
 * reads and drops what the client still sends for up to 1 s ("lingering
 * close") so the client gets the response instead of a reset.
 *
 * Timeouts: a new connection has header_timeout_ms from accept to complete
 * its first request's headers; later requests have header_timeout_ms from
 * their first byte (never extended by more bytes: slowloris-proof); between
 * requests an idle keep-alive connection is closed after idle_timeout_ms;
 * a body has body_timeout_ms from the end of its headers. No timeout runs
 * while the handler owns a request (long streams are the handler's business:
 * a client that stops reading shows as TS_AGAIN with no drain). Between
 * requests, output that makes no progress for idle_timeout_ms is cut.
 * A client that closes or half-closes (EOF) while its request is with the
 * handler aborts the request.
 *
 * Output. Responses are queued in a per-connection list of 4 KiB blocks
 * taken from a per-server pool, and flushed once per loop iteration (a uv_idle
 * pass: uv_try_write first, uv_write for what the kernel did not take), so
 * many small writes of one iteration become one system call. With
 * cfg.io_uring the sends go through one io_uring per server instead
 * (net/uring.h): one send per connection in flight, the sends of a loop
 * pass submitted together, a send that waits for room cancelled when its
 * connection is cut; where the ring cannot be set up, write(2) as above
 * (http_server_io_uring says which). Data passed to
 * http_respond/http_stream_write* is copied: the caller's buffer may be
 * reused on return. Backpressure: http_stream_write*() returns TS_AGAIN when
 * the connection's queued, unsent bytes exceed write_high_water (the data IS
 * queued); the handler should stop producing until the drain callback, which
 * fires once queued bytes fall to write_high_water / 2 or less. A stream
 * whose queue passes max_write_queue is cut (TS_CLOSED) to bound memory.
 *
 * Memory per connection: about 1.2 KiB of fixed state (struct http_conn,
 * with its libuv handles and request; 0.3 KiB more from the first send
 * with io_uring: its iovecs), plus the request's header bytes and
 * a header index of 48 bytes per field (16 fields at first; both kept for
 * the next request while small), plus the body while the request is held
 * (kept when under 4 KiB), plus output blocks only while bytes are unsent.
 * A typical SSE stream whose client keeps up costs about 2 KiB and holds no
 * output block. Pipelined input beyond the request being handled is held up
 * to 64 KiB, then reading pauses. Kernel socket buffers come on top.
 *
 * Callbacks never run inside the call that triggered them: on_drain and
 * on_abort come from libuv callbacks (read, timer, idle), never from within
 * http_stream_write() or http_respond(). Memory is never freed inside a
 * callback chain: connections are freed in the next idle pass.
 */
#ifndef TS_NET_HTTP_SERVER_H
#define TS_NET_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <uv.h>

#include "base/err.h"
#include "net/shaper.h"
#include "net/uring.h"

struct http_server;
struct http_request;
struct http_conn;
struct out_block;

/* Zero fields take the defaults shown. The struct is copied by init. */
struct http_server_config {
    const char *host;           /* "127.0.0.1"; an IPv4 or IPv6 literal ("::1") */
    int port;                   /* 0: any free port, see http_server_port() */
    int backlog;                /* listen backlog, 511 */
    size_t max_connections;     /* 65536; beyond it new connections are closed at once */
    size_t max_header_bytes;    /* 16 KiB: target + header names + values */
    size_t max_headers;         /* 100 header fields */
    size_t max_body_bytes;      /* 16 MiB */
    uint64_t header_timeout_ms; /* 10000 */
    uint64_t idle_timeout_ms;   /* 60000: keep-alive between requests */
    uint64_t body_timeout_ms;   /* 60000: from end of headers to end of body */
    size_t write_high_water;    /* 256 KiB: TS_AGAIN above it */
    size_t max_write_queue;     /* 64 * write_high_water: a stream beyond is cut */
    bool eof_keeps_request;     /* the client's half-close (EOF) during a request does not
                                   abort it: the response goes on and the connection
                                   closes after it (a server that ignores disconnects) */
    bool reuse_port;            /* SO_REUSEPORT: servers on several loops (threads) may
                                   listen on the same host:port; the kernel spreads new
                                   connections over them by a hash of the addresses */
    bool io_uring;              /* send responses through one io_uring per server (net/uring.h):
                                a loop pass's writes leave in one system call per batch
                                instead of one write(2) each; where the ring cannot be
                                set up the server keeps write(2), see http_server_io_uring() */
    unsigned io_uring_batch;    /* sends per submission at most (0: 32) */
};

struct http_header {
    const char *name;  /* NUL-terminated, as sent (compare case-insensitively) */
    const char *value; /* NUL-terminated, surrounding blanks removed */
    size_t name_len;
    size_t value_len;
};

typedef void (*http_request_cb)(struct http_request *req, void *ctx);
typedef void (*http_request_event_cb)(struct http_request *req);
typedef void (*http_request_data_cb)(struct http_request *req, const char *data, size_t len);
typedef void (*http_server_closed_cb)(struct http_server *s);

/*
 * One request. All pointers are owned by the server and valid until the
 * request is finished (http_respond / http_stream_end). Read-only for the
 * handler except `user`.
 */
struct http_request {
    const char *method; /* "GET", "POST", ... (static string) */
    const char *url;    /* request target as sent, NUL-terminated */
    const char *path;   /* path part of the target, not percent-decoded; "*" or an
                           authority for OPTIONS * / CONNECT */
    const char *query;  /* after '?', without it; "" when none */
    int version_major;  /* 1 */
    int version_minor;  /* 0 or 1 */
    bool keep_alive;    /* the client allows reusing the connection */
    const struct http_header *headers;
    size_t header_count;
    const char *body; /* NUL-terminated for convenience; never NULL ("" when empty) */
    size_t body_len;
    struct sockaddr_storage remote; /* the peer's address */
    uint64_t conn_index;            /* requests on this connection before this one */
    void *user;                     /* free for the handler; NULL at first */

    /* private */
    http_request_event_cb on_drain_;
    http_request_event_cb on_abort_;
    http_request_data_cb on_data_; /* after http_upgrade */
};

struct http_server {
    /* read-only for the owner */
    uv_loop_t *loop;
    struct http_server_config cfg; /* with defaults filled in */
    size_t conn_count;             /* open connections, including ones being closed */
    uint64_t conns_accepted;
    uint64_t conns_rejected; /* closed at once: over max_connections */
    uint64_t requests;       /* handed to on_request */

    /* private */
    http_request_cb on_request;
    void *ctx;
    http_server_closed_cb on_closed;
    struct sockaddr_storage addr;
    char host[64]; /* cfg.host points here */
    uv_tcp_t tcp;
    uv_idle_t idle;
    uv_timer_t grace;
    struct ts_uring *uring;            /* NULL: write(2) */
    struct ts_uring_stats uring_stats; /* readable from any thread (atomics) */
    char uring_why[160]; /* why cfg.io_uring is not in use ("" when it is or was not asked) */
    char *rbuf;          /* shared read buffer: reads are processed synchronously */
    struct http_conn *conns;
    struct http_conn *dirty;
    struct http_conn *dirty_tail;
    struct out_block *pool;
    size_t pool_count;
    int handles_open;
    int port;
    bool listening;
    bool tcp_closed;
    bool closing;
    bool finishing;
};

/*
 * Whether s sends through io_uring. When cfg.io_uring asked for it and the
 * ring could not be set up (no liburing in the build, an old kernel,
 * io_uring disabled by sysctl or a seccomp filter), *why (if not NULL) gets
 * the reason, a static string of s; otherwise "".
 */
bool http_server_io_uring(const struct http_server *s, const char **why);

/*
 * Prepares s on loop; no socket is opened yet. cfg may be NULL (all
 * defaults). Returns 0, -EINVAL (host is not an IP literal) or -ENOMEM;
 * on error nothing needs undoing.
 */
TS_MUST_CHECK int http_server_init(struct http_server *s, uv_loop_t *loop,
                                   const struct http_server_config *cfg, http_request_cb on_request,
                                   void *ctx);

/* Binds and listens. Returns 0 or a negative errno (e.g. -EADDRINUSE). */
TS_MUST_CHECK int http_server_listen(struct http_server *s);

/* The port actually bound (useful with port 0), or 0 before listening. */
int http_server_port(const struct http_server *s);

/*
 * Stops accepting at once, closes idle keep-alive connections, lets
 * requests in progress finish (their connections close after the response)
 * for up to grace_ms, then cuts what is left (handlers get on_abort).
 * on_closed(s) (may be NULL) fires from the loop once everything is closed
 * and released. Returns 0, or -EINVAL if shutdown was already called.
 */
int http_server_shutdown(struct http_server *s, uint64_t grace_ms, http_server_closed_cb on_closed);

/* The first header named `name` (case-insensitive), or NULL. */
const char *http_request_header(const struct http_request *req, const char *name);

/* True once the connection is gone (writes would return TS_CLOSED). */
bool http_request_closed(const struct http_request *req);

/*
 * Sends a whole response with Content-Length and finishes the request.
 * content_type may be NULL (no Content-Type). extra_headers is NULL or
 * complete "Name: value\r\n" lines (the caller vouches for them); a
 * "Connection: close" among them closes the connection after the response.
 * body is copied (not sent for HEAD, 1xx, 204, 304).
 * Always finishes the request, whatever it returns: 0; TS_CLOSED if the client
 * is gone; -EINVAL for a status outside 200..999 (1xx are not final), a
 * content_type with CR or LF, extra_headers not ending in CRLF, or a stream
 * already begun; -ENOMEM. After an error other than TS_CLOSED the connection
 * is cut.
 */
int http_respond(struct http_request *req, int status, const char *content_type,
                 const char *extra_headers, const void *body, size_t len);

/*
 * Sends the status line and headers of a streamed response (chunked
 * transfer encoding; for an HTTP/1.0 client plain bytes then close).
 * Returns 0, TS_CLOSED (client gone), -EINVAL (status outside 200..999 or 204
 * or 304, bad headers as for http_respond(), already begun: nothing sent) or -ENOMEM (connection cut). Either way the request
 * must still be finished with http_stream_end() (or http_respond() if this
 * returned -EINVAL).
 */
int http_stream_begin(struct http_request *req, int status, const char *content_type,
                      const char *extra_headers);

/*
 * Like http_stream_begin() but for a body of a known length: sends
 * "Content-Length: length" and no chunked framing; writes then go out as raw
 * bytes, and a write that would exceed the length in total is refused with
 * -EINVAL (nothing queued). http_stream_end() before length bytes were
 * written closes the connection after them (the client sees a short body).
 * Returns as http_stream_begin() (also -EINVAL for length > SIZE_MAX / 2).
 */
int http_stream_begin_length(struct http_request *req, int status, const char *content_type,
                             const char *extra_headers, uint64_t length);

/*
 * Finishes a request without completing its response: the bytes queued so
 * far are sent, then the connection is closed (FIN) without the terminating
 * chunk (or before the announced length), so the client sees a cut body. The
 * head need not have been sent (then the client sees a closed connection).
 * Returns 0, TS_CLOSED (the client was already gone; the request is
 * released) or -EINVAL (the request is not active).
 */
int http_stream_abort(struct http_request *req);

/*
 * Queues len bytes as one chunk (copied; len 0 sends nothing). Returns 0;
 * TS_AGAIN when the queued bytes now exceed write_high_water (the data is
 * queued: pause until on_drain); TS_CLOSED when the client is gone or the
 * queue passed max_write_queue (connection cut); -EINVAL before
 * http_stream_begin(); -ENOMEM (connection cut).
 */
int http_stream_write(struct http_request *req, const void *data, size_t len);

/* Like http_stream_write() for the concatenation of n buffers: one chunk. */
int http_stream_writev(struct http_request *req, const uv_buf_t *bufs, size_t n);

/*
 * Ends the stream (the terminating chunk) and finishes the request. Always
 * finishes it. Returns 0, TS_CLOSED (the client was gone: the request is
 * just released), -EINVAL (no stream begun: the connection is cut) or -ENOMEM.
 */
int http_stream_end(struct http_request *req);

/*
 * Switches the connection of an upgrade request (one with "Connection:
 * Upgrade" and an "Upgrade" field, e.g. WebSocket) to another protocol:
 * queues "101 Switching Protocols" with extra_headers (complete "Name:
 * value\r\n" lines: the caller gives Upgrade, Connection and the protocol's
 * own fields) and from then on every byte the client sends goes to
 * on_data(req, data, len), from the read callback or the idle pass (bytes
 * that came with the request), never inside this call; http_stream_write*()
 * sends raw bytes. The request stays with the handler until
 * http_stream_end() (the queued bytes are sent, then the connection is
 * closed), http_stream_abort() or http_request_reset(); a client that
 * closes or fails aborts it (on_abort). There is no read backpressure:
 * on_data must consume or bound what it gets. Returns 0, -EINVAL (not an
 * upgrade request, already begun, bad extra_headers, no on_data: nothing
 * sent, answer with http_respond), TS_CLOSED (client gone) or -ENOMEM
 * (connection cut); after TS_CLOSED or -ENOMEM finish with http_stream_end.
 */
int http_upgrade(struct http_request *req, const char *extra_headers, http_request_data_cb on_data);

/* Sets the drain callback (NULL to clear): queued bytes fell to half the mark. */
void http_request_on_drain(struct http_request *req, http_request_event_cb fn);

/*
 * Sets the abort callback (NULL to clear): the client disconnected, an I/O
 * error happened, or shutdown's grace ran out while the request is with the
 * handler. It fires at most once. The handler must still finish the request.
 */
void http_request_on_abort(struct http_request *req, http_request_event_cb fn);

/* Output shaping (the chaos proxy's TCP faults): struct http_shaper, see
 * net/shaper.h. */

/*
 * Shapes the output of req's connection with *sh (copied) from now until the
 * connection closes; bytes already queued are shaped too. allow may be NULL
 * (only the slow close applies). Returns 0; -EINVAL if the request is not
 * with the handler or the connection already has a shaper; TS_CLOSED if the
 * connection is gone; -ENOMEM or a timer error. On error release is not
 * called: the caller still owns ctx. Costs one timerfd per shaped connection.
 */
TS_MUST_CHECK int http_request_set_shaper(struct http_request *req, const struct http_shaper *sh);

/* The ctx of the shaper of req's connection, or NULL if it has none. */
void *http_request_shaper_ctx(const struct http_request *req);

/*
 * Finishes the request like http_stream_abort(), but the connection ends
 * with a reset (RST, SO_LINGER 0) instead of a FIN once the bytes queued so
 * far were handed to the kernel. Returns 0, TS_CLOSED (the client was
 * already gone; the request is released) or -EINVAL (not active).
 */
int http_request_reset(struct http_request *req);

/* The reason phrase of a status code ("OK", "Not Found"); "Unknown" if none. */
const char *http_status_reason(int status);

#endif
