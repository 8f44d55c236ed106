/*
 * http_server_int.h - what the server's two halves share. Not for other
 * users; the manual is http_server.h.
 *
 *   http_server_conn.c - a connection without its socket: the request
 *       parsed with http-parser, responses framed into the output queue,
 *       keep-alive and pipelining state, the handler's API (http_respond,
 *       http_stream_*). Everything there can run on a "fake" connection
 *       that has no socket and no timer.
 *   http_server.c - the socket layer and the server: libuv accept, read,
 *       write, shutdown and close, the per-connection timers, output
 *       shaping, the idle pass that flushes dirty connections, and the
 *       server's init, listen and shutdown.
 *
 * A connection (struct http_conn) is a small state machine fed by
 * hs_conn_on_data() / hs_conn_on_eof() and drained by the idle pass. A
 * fake connection (fake = true) sends its output to fake_out (a buffer, or
 * nowhere) instead of a socket, which lets the fuzz driver and the unit
 * tests drive the state machine directly.
 */
#ifndef TS_NET_HTTP_SERVER_INT_H
#define TS_NET_HTTP_SERVER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <http_parser.h>
#include <uv.h>

#include "base/buf.h"
#include "net/http_server.h"
#include "net/ptimer.h"
#include "net/uring.h"

/* One block of a connection's output queue (4 KiB from the server's pool,
 * or bigger for a big write). */
struct out_block {
    struct out_block *next;
    size_t cap;
    size_t start; /* first byte not yet written */
    size_t len;   /* bytes filled */
    bool pooled;
    char data[];
};

/* Which timeout the connection's timer runs. */
enum conn_timer {
    T_NONE,
    T_FIRST,  /* new connection: header timeout from accept */
    T_HEAD,   /* later request: header timeout from its first byte */
    T_BODY,   /* body timeout from the end of headers */
    T_IDLE,   /* keep-alive between requests */
    T_LINGER, /* draining input after our FIN */
};

/* The last piece of the request head the parser handed over. */
enum last_cb {
    CB_URL,
    CB_FIELD,
    CB_VALUE,
};

/* Where a header field's name and value sit in the connection's head. */
struct field_span {
    uint32_t name_off, name_len, value_off, value_len;
};

/* A shaped connection's shaper and its timer (http_request_set_shaper). */
struct conn_shape {
    struct http_conn *conn;
    struct http_shaper sh;
    struct ptimer timer;
    enum http_shape_then then; /* what to do once sent reaches then_at */
    uint64_t then_at;
    uint64_t close_at; /* slow close: when the FIN may go (0: not started) */
};

/* A connection's send in flight on the server's io_uring: the kernel reads
 * msg and iov when the batch is submitted. */
struct hs_usend {
    struct ts_uring_op op;
    struct http_conn *conn;
    struct msghdr msg;
    struct iovec iov[16];
};

struct http_conn {
    struct http_server *server;
    struct http_conn *prev, *next; /* all connections of the server */
    struct http_conn *dirty_next;
    struct http_request req;
    http_parser parser;
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wreq;
    uv_shutdown_t sreq;

    /* request being assembled: target, names and values, NUL-separated */
    struct buf head;
    struct buf body;
    struct field_span *spans;
    struct http_header *hdrs;
    uint32_t nspans, spans_cap;
    uint32_t url_len;
    size_t head_bytes; /* counted against max_header_bytes */
    enum last_cb last_cb;
    int error_status;

    /* input received but not parsed yet (pipelining) */
    char *in;
    size_t in_off, in_len, in_cap;

    /* output not yet taken by the kernel */
    struct out_block *out_head, *out_tail;
    size_t queued;
    size_t inflight; /* bytes handed to uv_write */

    struct conn_shape *shape; /* NULL: output is not shaped */
    uint64_t out_total;       /* bytes ever queued */
    uint64_t sent_total;      /* bytes ever handed to the kernel */
    uint64_t nreq;            /* requests dispatched */

    struct hs_usend *usend; /* io_uring: made at the first send, kept until freed */

    struct buf *fake_out; /* fake connection: output goes here (NULL: dropped) */
    size_t fake_chunk;    /* fake connection: most bytes taken per flush (0: all) */

    int handles; /* open libuv handles, and the io_uring send in flight */
    enum conn_timer tstate;
    bool fake;
    bool dirty;
    bool writing;  /* a uv_write or an io_uring send is in flight */
    bool usending; /* it is the io_uring send (usend) */
    bool read_paused;
    bool in_message;   /* bytes of a request seen, request not complete */
    bool headers_done; /* header callbacks after this are trailers */
    bool msg_done;     /* parser paused on a complete request */
    bool req_active;   /* request is with the handler */
    bool begun;        /* response head queued by http_stream_begin */
    bool chunked;
    bool sized; /* http_stream_begin_length: body bytes left in length_left */
    uint64_t length_left;
    bool head_only; /* HEAD request: no body bytes */
    bool resp_close;
    bool want_drain;
    bool input_done; /* drop any further input */
    bool close_after_flush;
    bool peer_eof;
    bool lingering;
    bool dead;    /* no more output; handles closing or closed */
    bool closing; /* uv_close called */
    bool free_pending;
    bool reset_on_close;    /* close with RST (uv_tcp_close_reset) */
    bool reset_after_flush; /* http_request_reset: RST instead of FIN */
    bool upgrade_req;       /* the request asks for a protocol switch */
    bool upgraded;          /* http_upgrade: input goes to req.on_data_ */
};

static inline struct http_conn *hs_conn_of_req(const struct http_request *req)
{
    return (struct http_conn *)((char *)req - offsetof(struct http_conn, req));
}

/* ---- http_server_conn.c: the connection without its socket ---- */

/* A new connection of s (in s->conns, counted in conn_count), or NULL.
 * Its libuv handles are not initialised. */
struct http_conn *hs_conn_new(struct http_server *s);
/* Frees c (its request state, input, output, shaper); the server may then
 * finish its shutdown. Only from the idle pass. */
void hs_conn_free(struct http_conn *c);
/* Bytes arrived from the client: parsed, held (pipelining) or dropped. */
void hs_conn_on_data(struct http_conn *c, const char *data, size_t len);
/* The client closed its side (err UV_EOF) or the read failed (err < 0). */
void hs_conn_on_eof(struct http_conn *c, int err);
/* Runs the parser over data; on a complete request keeps what follows it
 * unparsed and hands the request to the handler. from_in: data is c->in. */
void hs_conn_parse(struct http_conn *c, const char *data, size_t len, bool from_in);
/* Answers with an error status the server chose itself, then closes. */
void hs_conn_error(struct http_conn *c, int status);
/* Hands the input held behind an upgraded request to its on_data. */
void hs_conn_upgraded_input(struct http_conn *c);
/* Drops the input not parsed yet. */
void hs_in_clear(struct http_conn *c);
/* Fills up to max bufs with unsent output from the front; returns the
 * count, *total their bytes. */
unsigned hs_out_gather(struct http_conn *c, uv_buf_t *bufs, unsigned max, size_t *total);
/* Forgets the first k bytes of output (the kernel took them). */
void hs_out_consume(struct http_conn *c, size_t k);
/* Frees the server's pool of output blocks. */
void hs_pool_free(struct http_server *s);

/* ---- http_server.c: the socket layer ---- */

/* Runs the connection's timer for st (T_NONE stops it). */
void hs_timer_set(struct http_conn *c, enum conn_timer st);
/* Queues c for the next idle pass (flush, pipelined input, drain, free). */
void hs_conn_mark_dirty(struct http_conn *c);
/* Drops the connection now; notify: tell a handler that holds a request
 * (on_abort). */
void hs_conn_cut(struct http_conn *c, bool notify);
/* Stops reading from the socket (the unparsed input is full). */
void hs_read_pause(struct http_conn *c);
/* Reads again after hs_read_pause. */
void hs_read_resume(struct http_conn *c);
/* Hands queued bytes to the kernel at once when nothing is in the way. */
void hs_conn_flush_now(struct http_conn *c);
/* The server finishes its shutdown once nothing is left. */
void hs_server_maybe_finish(struct http_server *s);

#endif
