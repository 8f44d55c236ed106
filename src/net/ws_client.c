/*
 * ws_client.c - a WebSocket client connection: uv_tcp, the upgrade
 * request, the 101 parsed by http-parser, then ws_conn. See ws_client.h.
 */
#include "net/ws_client.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>

#include <curl/curl.h>
#include <http_parser.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/chars.h"
#include "base/clock.h"
#include "base/rng.h"
#include "net/ws.h"
#include "net/ws_tls.h"

#define HEAD_MAX      (16 * 1024)
#define BODY_MAX      (16 * 1024)
#define READ_BUF      (64 * 1024)
#define CLOSE_WAIT_MS 2000

enum ws_call_state {
    ST_RESOLVE,
    ST_CONNECT,
    ST_HANDSHAKE,
    ST_OPEN,
    ST_CLOSING, /* our close frame sent, waiting for the peer's */
    ST_ENDING,  /* handles closing; on_done next */
};

struct ws_call {
    uv_loop_t *loop;
    const struct ws_call_ops *ops;
    void *user;
    enum ws_call_state st;
    uv_getaddrinfo_t gai;
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_timer_t shape_timer; /* the send shaper's wake-ups (data NULL until first armed) */
    uv_connect_t creq;
    uv_write_t wreq;
    int handles;
    bool gai_pending;
    bool writing;
    bool silent; /* ws_call_open failed: no on_done */
    bool fail_set;
    struct buf req;  /* the upgrade request */
    struct buf out;  /* frames not yet handed to uv_write */
    struct buf wbuf; /* the bytes of the uv_write in flight */
    struct buf body; /* a refusal's body */
    http_parser parser;
    char hfield[32]; /* the header name being read (only the ones we check) */
    size_t hfield_len;
    bool in_value;
    char accept[WS_ACCEPT_LEN + 1]; /* the value we expect */
    char got_accept[64];
    char hvalue[128]; /* the Upgrade or Connection value being read (pieces joined; hvalue_add) */
    size_t hvalue_len;
    bool upgrade_hdr, connection_hdr;
    bool head_done, msg_done;
    size_t head_bytes;
    struct ws_conn ws;
    bool ws_inited;
    struct http_shaper shaper;       /* spec's send shaper (allow NULL: none) */
    uint64_t shape_sent;             /* bytes handed to uv_write, ever */
    size_t out_off;                  /* out's first bytes already written (a shaped prefix) */
    enum http_shape_then shape_then; /* the shaper ends the connection after them */
    struct ws_tls *tls;              /* wss:// */
    bool tls_on, tls_ready, insecure;
    struct buf plain; /* wss://: what one read decrypted to */
    uint64_t read_at;
    size_t max_message;
    uint32_t connect_timeout_ms, total_timeout_ms, idle_timeout_ms;
    uint64_t total_deadline; /* uv_now() ms when the total timeout ends; 0: none */
    char host[256];
    char port[8];
    struct ws_call_result res;
    char error_text[256];
};

static void end_call(struct ws_call *c, enum http_call_error e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Once nothing of the call is pending: on_done (unless it never started), then free. */
static void maybe_finish(struct ws_call *c)
{
    if (c->handles > 0 || c->gai_pending)
        return;
    if (c->silent)
        goto out_free;
    c->res.end_ns = ts_now_ns();
    c->res.error_text = c->error_text;
    c->res.body = buf_cstr(&c->body);
    c->res.body_len = c->body.len;
    if (c->ws_inited) {
        c->res.msgs_in = c->ws.msgs_in;
        c->res.msgs_out = c->ws.msgs_out;
        if (ws_conn_close_received(&c->ws))
            c->res.close_code = ws_conn_close_code(&c->ws);
    }
    c->ops->on_done(c, &c->res, c->user);
out_free:
    ws_tls_free(c->tls);
    buf_release(&c->plain);
    if (c->ws_inited)
        ws_conn_release(&c->ws);
    buf_release(&c->req);
    buf_release(&c->out);
    buf_release(&c->wbuf);
    buf_release(&c->body);
    if (c->shaper.release)
        c->shaper.release(c->shaper.ctx);
    ts_free(c);
}

static void on_handle_closed(uv_handle_t *h)
{
    struct ws_call *c = h->data;
    c->handles--;
    maybe_finish(c);
}

/* Ends the call with error e (the first one set counts); on_done follows
 * once the handles are closed. */
static void end_call(struct ws_call *c, enum http_call_error e, const char *fmt, ...)
{
    if (!c->fail_set) {
        c->fail_set = true;
        c->res.error = e;
        if (fmt) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(c->error_text, sizeof(c->error_text), fmt, ap);
            va_end(ap);
        }
    }
    if (c->st == ST_ENDING)
        return;
    c->st = ST_ENDING;
    if (c->gai_pending)
        (void)uv_cancel((uv_req_t *)&c->gai);
    if (c->timer.data && !uv_is_closing((uv_handle_t *)&c->timer))
        uv_close((uv_handle_t *)&c->timer, on_handle_closed);
    if (c->shape_timer.data && !uv_is_closing((uv_handle_t *)&c->shape_timer))
        uv_close((uv_handle_t *)&c->shape_timer, on_handle_closed);
    if (c->tcp.data && !uv_is_closing((uv_handle_t *)&c->tcp))
        uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
}

static void on_timer(uv_timer_t *t)
{
    struct ws_call *c = t->data;
    if (c->st == ST_CLOSING)
        end_call(c, HTTP_CALL_OK, NULL); /* the peer never answered our close */
    else if (c->st == ST_RESOLVE || c->st == ST_CONNECT)
        end_call(c, HTTP_CALL_ERR_TIMEOUT_CONNECT, "connect timeout");
    else if (c->total_deadline && uv_now(c->loop) >= c->total_deadline)
        end_call(c, HTTP_CALL_ERR_TIMEOUT_TOTAL, "total timeout");
    else
        end_call(c, HTTP_CALL_ERR_TIMEOUT_IDLE, "idle timeout: nothing for %u ms",
                 c->idle_timeout_ms);
}

/* Connected and not closing: the timer runs to the total deadline or to
 * idle_timeout_ms from now, whichever is first (none: stopped). */
static void arm_timer(struct ws_call *c)
{
    uint64_t now = uv_now(c->loop), due = 0;
    if (c->total_deadline)
        due = c->total_deadline > now ? c->total_deadline - now : 0;
    if (c->idle_timeout_ms && (!c->total_deadline || c->idle_timeout_ms < due))
        due = c->idle_timeout_ms;
    if (c->total_deadline || c->idle_timeout_ms)
        (void)uv_timer_start(&c->timer, on_timer, due, 0);
    else
        (void)uv_timer_stop(&c->timer);
}

/* ------------------------------------------------------------ writing */

static void start_write(struct ws_call *c);
static void shape_on_wake(uv_timer_t *t);

/* Calls the send shaper again at wake (monotonic ns). */
static void shape_arm(struct ws_call *c, uint64_t wake)
{
    if (c->st == ST_ENDING)
        return;
    if (!c->shape_timer.data) {
        if (uv_timer_init(c->loop, &c->shape_timer))
            return;
        c->shape_timer.data = c;
        c->handles++;
    }
    uint64_t now = ts_now_ns();
    uint64_t ms = wake > now ? (wake - now + TS_NS_PER_MS - 1) / TS_NS_PER_MS : 0;
    (void)uv_timer_start(&c->shape_timer, shape_on_wake, ms, 0);
}

/* The send shaper ends the connection (a reset or a close): the call fails. */
static void shape_cut(struct ws_call *c)
{
    uv_os_fd_t fd;
    bool reset = c->shape_then == HTTP_SHAPE_RESET;
    if (reset && !uv_fileno((uv_handle_t *)&c->tcp, &fd)) {
        struct linger lg = {1, 0};
        (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    end_call(c, HTTP_CALL_ERR_SEND, "connection %s by the send shaper after %llu bytes",
             reset ? "reset" : "closed", (unsigned long long)c->shape_sent);
}

/* How many of the pending bytes may be written now (all without a
 * shaper); arms the shaper's wake-up, or notes that it ends the connection. */
static size_t shape_allow(struct ws_call *c, size_t pending)
{
    if (!c->shaper.allow)
        return pending;
    uint64_t wake = 0;
    enum http_shape_then then = HTTP_SHAPE_MORE;
    uint64_t n = c->shaper.allow(c->shaper.ctx, c->shape_sent + pending, c->shape_sent, ts_now_ns(),
                                 &wake, &then);
    if (n > pending)
        n = pending;
    if (then != HTTP_SHAPE_MORE)
        c->shape_then = then;
    else if (wake)
        shape_arm(c, wake);
    return (size_t)n;
}

static void shape_on_wake(uv_timer_t *t)
{
    struct ws_call *c = t->data;
    if (c->st == ST_ENDING || c->st == ST_RESOLVE || c->st == ST_CONNECT || c->writing)
        return; /* a write's end asks the shaper again */
    start_write(c);
}

static void on_written(uv_write_t *w, int status)
{
    struct ws_call *c = w->data;
    c->writing = false;
    buf_reset(&c->wbuf);
    if (c->st == ST_ENDING)
        return;
    if (status < 0) {
        end_call(c, HTTP_CALL_ERR_SEND, "write: %s", uv_strerror(status));
        return;
    }
    if (!c->res.sent_ns && (!c->tls_on || c->tls_ready)) /* on wss://, after the handshake */
        c->res.sent_ns = ts_now_ns();
    if (c->shape_then != HTTP_SHAPE_MORE) {
        shape_cut(c); /* what the shaper let go is out: now the end */
        return;
    }
    start_write(c);
}

/* Hands what it may of out to uv_write; with nothing to write, asks the
 * shaper anyway (a timed reset may be due on an idle connection). */
static void start_write(struct ws_call *c)
{
    if (c->writing || c->st == ST_ENDING)
        return;
    size_t pending = c->out.len - c->out_off;
    if (!pending && !c->shaper.allow)
        return;
    size_t n = shape_allow(c, pending);
    if (!n) {
        if (c->shape_then != HTTP_SHAPE_MORE)
            shape_cut(c);
        return; /* held back (or nothing to write): the shaper's wake-up comes back */
    }
    if (n == pending && !c->out_off) {
        struct buf t = c->wbuf;
        c->wbuf = c->out;
        c->out = t;
    } else {
        buf_reset(&c->wbuf);
        if (buf_append(&c->wbuf, c->out.data + c->out_off, n) != 0) {
            end_call(c, HTTP_CALL_ERR_OTHER, "out of memory");
            return;
        }
        c->out_off += n; /* out is compacted once half of it is written: linear in all */
        if (c->out_off > c->out.len / 2) {
            buf_consume(&c->out, c->out_off);
            c->out_off = 0;
        }
    }
    c->shape_sent += n;
    uv_buf_t b = uv_buf_init(c->wbuf.data, (unsigned)c->wbuf.len);
    int rc = uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_written);
    if (rc) {
        end_call(c, HTTP_CALL_ERR_SEND, "write: %s", uv_strerror(rc));
        return;
    }
    c->writing = true;
}

/* Bytes to send: encrypted first on wss://. 0 or a negative error. */
static int net_send(struct ws_call *c, const void *data, size_t len)
{
    int rc = c->tls ? ws_tls_write(c->tls, data, len, &c->out) : buf_append(&c->out, data, len);
    if (!rc)
        start_write(c);
    return rc;
}

static int ws_write(struct ws_conn *ws, const void *data, size_t len, void *ctx)
{
    struct ws_call *c = ctx;
    (void)ws;
    if (c->st == ST_ENDING)
        return TS_CLOSED;
    return net_send(c, data, len);
}

/* ------------------------------------------------------------ reading */

static void ws_message(struct ws_conn *ws, int opcode, const uint8_t *data, size_t len, void *ctx)
{
    struct ws_call *c = ctx;
    (void)ws;
    if (c->st == ST_OPEN || c->st == ST_CLOSING)
        c->ops->on_message(c, opcode, (const char *)data, len, c->read_at, c->user);
}

static const struct ws_conn_ops ws_ops = {.on_message = ws_message, .write = ws_write};

/* Checks the Upgrade or Connection value read so far for its word. */
static void header_check(struct ws_call *c)
{
    if (!strcasecmp(c->hfield, "upgrade"))
        c->upgrade_hdr |= chars_has_ci(c->hvalue, c->hvalue_len, "websocket");
    else if (!strcasecmp(c->hfield, "connection"))
        c->connection_hdr |= chars_has_ci(c->hvalue, c->hvalue_len, "upgrade");
}

/* A header's value is whole (the parser may give it in pieces, one per
 * read): Upgrade and Connection are checked now. */
static void header_done(struct ws_call *c)
{
    header_check(c);
    c->hvalue_len = 0;
}

/* More of an Upgrade or Connection value. A full buffer is checked and
 * keeps only its tail (longer than the words looked for), so a value of
 * any length is searched whole. */
static void hvalue_add(struct ws_call *c, const char *at, size_t len)
{
    enum { TAIL = 16 };
    while (len) {
        if (c->hvalue_len == sizeof(c->hvalue)) {
            header_check(c);
            memmove(c->hvalue, c->hvalue + sizeof(c->hvalue) - TAIL, TAIL);
            c->hvalue_len = TAIL;
        }
        size_t room = sizeof(c->hvalue) - c->hvalue_len;
        size_t n = len < room ? len : room;
        memcpy(c->hvalue + c->hvalue_len, at, n);
        c->hvalue_len += n;
        at += n;
        len -= n;
    }
}

static int on_hfield(http_parser *p, const char *at, size_t len)
{
    struct ws_call *c = p->data;
    if (c->in_value) {
        header_done(c);
        c->hfield_len = 0;
        c->in_value = false;
    }
    size_t room = sizeof(c->hfield) - 1 - c->hfield_len;
    size_t n = len < room ? len : room;
    memcpy(c->hfield + c->hfield_len, at, n);
    c->hfield_len += n;
    c->hfield[c->hfield_len] = '\0';
    return 0;
}

static int on_hvalue(http_parser *p, const char *at, size_t len)
{
    struct ws_call *c = p->data;
    c->in_value = true;
    if (!strcasecmp(c->hfield, "sec-websocket-accept")) {
        size_t have = strlen(c->got_accept);
        size_t n = len < sizeof(c->got_accept) - 1 - have ? len : sizeof(c->got_accept) - 1 - have;
        memcpy(c->got_accept + have, at, n);
        c->got_accept[have + n] = '\0';
    } else if (!strcasecmp(c->hfield, "upgrade") || !strcasecmp(c->hfield, "connection")) {
        hvalue_add(c, at, len);
    }
    return 0;
}

static int on_hdone(http_parser *p)
{
    struct ws_call *c = p->data;
    if (c->in_value)
        header_done(c);
    c->head_done = true;
    c->res.status = p->status_code;
    c->res.upgrade_ns = c->read_at;
    return 0;
}

static int on_hbody(http_parser *p, const char *at, size_t len)
{
    struct ws_call *c = p->data;
    size_t room = BODY_MAX - c->body.len;
    if (len > room)
        len = room;
    return len && buf_append(&c->body, at, len) ? -1 : 0;
}

static int on_hcomplete(http_parser *p)
{
    struct ws_call *c = p->data;
    c->msg_done = true;
    return 0;
}

static const http_parser_settings resp_settings = {
    .on_header_field = on_hfield,
    .on_header_value = on_hvalue,
    .on_headers_complete = on_hdone,
    .on_body = on_hbody,
    .on_message_complete = on_hcomplete,
};

/* The 101 came: checks it and switches to frames; rest: bytes after the head. */
static void upgraded(struct ws_call *c, const char *rest, size_t n)
{
    if (!c->upgrade_hdr || !c->connection_hdr || strcmp(c->got_accept, c->accept)) {
        end_call(c, HTTP_CALL_ERR_OTHER, "bad upgrade: %s",
                 strcmp(c->got_accept, c->accept) ? "Sec-WebSocket-Accept does not match the key"
                                                  : "no Upgrade: websocket / Connection: Upgrade");
        return;
    }
    c->st = ST_OPEN;
    c->ops->on_open(c, c->user);
    if (c->st == ST_ENDING || !n)
        return;
    int rc = ws_conn_feed(&c->ws, rest, n);
    if (rc && rc != TS_CLOSED)
        end_call(c, HTTP_CALL_ERR_RECV, "websocket: %s", ts_strerror(rc));
}

static void handshake_read(struct ws_call *c, const char *data, size_t len)
{
    size_t n = http_parser_execute(&c->parser, &resp_settings, data, len);
    c->head_bytes += n;
    if (!c->head_done && c->head_bytes > HEAD_MAX) {
        end_call(c, HTTP_CALL_ERR_RECV, "upgrade answer head over %d bytes", HEAD_MAX);
        return;
    }
    if (c->head_done && c->res.status == 101) {
        if (!c->parser.upgrade) {
            end_call(c, HTTP_CALL_ERR_OTHER, "bad upgrade: 101 without Upgrade");
            return;
        }
        upgraded(c, data + n, len - n);
        return;
    }
    if (HTTP_PARSER_ERRNO(&c->parser) != HPE_OK) {
        end_call(c, HTTP_CALL_ERR_RECV, "bad upgrade answer: %s",
                 http_errno_description(HTTP_PARSER_ERRNO(&c->parser)));
        return;
    }
    if (c->msg_done)
        end_call(c, HTTP_CALL_OK, "upgrade refused: HTTP %ld", c->res.status);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    static __thread char rbuf[READ_BUF];
    (void)h;
    (void)hint;
    *b = uv_buf_init(rbuf, sizeof(rbuf));
}

static void eof_now(struct ws_call *c, ssize_t nread)
{
    if (c->st == ST_HANDSHAKE && c->head_done && c->res.status != 101) {
        (void)http_parser_execute(&c->parser, &resp_settings, NULL, 0);
        end_call(c, HTTP_CALL_OK, "upgrade refused: HTTP %ld", c->res.status);
    } else if (c->ws_inited && ws_conn_close_received(&c->ws)) {
        end_call(c, HTTP_CALL_OK, NULL);
    } else {
        c->res.close_code = WS_CLOSE_ABNORMAL;
        end_call(c, HTTP_CALL_ERR_RECV, "connection closed without a close frame%s%s",
                 nread == UV_EOF ? "" : ": ", nread == UV_EOF ? "" : uv_strerror((int)nread));
    }
}

/*
 * When the kernel received the last packet read (SIOCGSTAMPNS, on the
 * monotonic clock), or now: a burst of messages on many connections is read
 * one connection after the other, and the kernel's stamp keeps the later
 * ones from being timed late, as the HTTP engine's recvmsg stamps do.
 */
static uint64_t read_time(struct ws_call *c)
{
    uint64_t now = ts_now_ns();
    uv_os_fd_t fd;
    struct timespec ts;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) || ioctl(fd, SIOCGSTAMPNS, &ts))
        return now;
    uint64_t real = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    uint64_t wall = ts_wall_ns();
    if (real > wall || wall - real > now)
        return now; /* the clocks moved: do not trust it */
    uint64_t stamp = now - (wall - real);
    return stamp <= now && stamp >= c->res.connect_ns ? stamp : now;
}

static void process(struct ws_call *c, const char *data, size_t len);

/* wss://: ciphertext in; the handshake's end sends the upgrade request; the
 * plaintext goes on to process(). */
static void tls_read(struct ws_call *c, const char *data, size_t len)
{
    char err[256];
    bool ready = false;
    buf_reset(&c->plain);
    int rc = ws_tls_feed(c->tls, data, len, &c->plain, &c->out, &ready, err, sizeof(err));
    start_write(c);
    if (rc == TS_CLOSED) {
        eof_now(c, UV_EOF);
        return;
    }
    if (rc) {
        end_call(c, HTTP_CALL_ERR_TLS, "%s", err);
        return;
    }
    if (ready && !c->tls_ready) {
        c->tls_ready = true;
        c->res.tls_ns = ts_now_ns();
        if ((rc = net_send(c, c->req.data, c->req.len))) {
            end_call(c, HTTP_CALL_ERR_SEND, "cannot send the upgrade: %s", ts_strerror(rc));
            return;
        }
    }
    if (c->plain.len)
        process(c, c->plain.data, c->plain.len);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    struct ws_call *c = s->data;
    if (c->st == ST_ENDING)
        return;
    if (nread < 0) {
        eof_now(c, nread);
        return;
    }
    if (!nread)
        return;
    c->read_at = read_time(c);
    if (c->idle_timeout_ms && (c->st == ST_HANDSHAKE || c->st == ST_OPEN))
        arm_timer(c); /* the silence starts again */
    if (c->tls)
        tls_read(c, b->base, (size_t)nread);
    else
        process(c, b->base, (size_t)nread);
}

/* Plaintext from the server: the upgrade's answer, then frames. */
static void process(struct ws_call *c, const char *data, size_t len)
{
    if (c->st == ST_HANDSHAKE) {
        handshake_read(c, data, len);
        return;
    }
    int rc = ws_conn_feed(&c->ws, data, len);
    if (rc == TS_CLOSED && ws_conn_close_received(&c->ws)) {
        if (!c->res.close_by_peer && c->st == ST_OPEN)
            c->res.close_by_peer = true;
        end_call(c, HTTP_CALL_OK, NULL);
    } else if (rc == TS_CLOSED) {
        end_call(c, HTTP_CALL_ERR_RECV, "websocket protocol error: closed with %u",
                 ws_conn_close_code_sent(&c->ws));
    } else if (rc) {
        end_call(c, HTTP_CALL_ERR_RECV, "websocket: %s", ts_strerror(rc));
    }
}

/* ------------------------------------------------------------ connecting */

static void on_connect(uv_connect_t *r, int status)
{
    struct ws_call *c = r->data;
    if (c->st == ST_ENDING)
        return;
    if (status < 0) {
        end_call(c, HTTP_CALL_ERR_CONNECT, "connect: %s", uv_strerror(status));
        return;
    }
    c->res.connect_ns = ts_now_ns();
    c->st = ST_HANDSHAKE;
    (void)uv_tcp_nodelay(&c->tcp, 1); /* small frames must not wait for ACKs (Nagle) */
    uv_os_fd_t fd;
    int one = 1;
    if (!uv_fileno((uv_handle_t *)&c->tcp, &fd))
        (void)setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)); /* see read_time */
    c->total_deadline = c->total_timeout_ms ? uv_now(c->loop) + c->total_timeout_ms : 0;
    arm_timer(c);
    int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    char err[256] = "";
    if (!rc && c->tls_on)
        rc = ws_tls_new(c->host, c->insecure, &c->out, &c->tls, err, sizeof(err));
    else if (!rc)
        rc = buf_append(&c->out, c->req.data, c->req.len);
    if (rc) {
        end_call(c, c->tls_on ? HTTP_CALL_ERR_TLS : HTTP_CALL_ERR_OTHER, "cannot start: %s",
                 err[0] ? err : ts_strerror(rc));
        return;
    }
    start_write(c);
}

static void on_resolved(uv_getaddrinfo_t *g, int status, struct addrinfo *ai)
{
    struct ws_call *c = g->data;
    c->gai_pending = false;
    if (c->st == ST_ENDING) {
        uv_freeaddrinfo(ai);
        maybe_finish(c);
        return;
    }
    if (status < 0 || !ai) {
        end_call(c, HTTP_CALL_ERR_DNS, "cannot resolve %s: %s", c->host, uv_strerror(status));
        uv_freeaddrinfo(ai);
        return;
    }
    c->st = ST_CONNECT;
    int rc = uv_tcp_connect(&c->creq, &c->tcp, ai->ai_addr, on_connect);
    uv_freeaddrinfo(ai);
    if (rc)
        end_call(c, HTTP_CALL_ERR_CONNECT, "connect: %s", uv_strerror(rc));
}

/* host, port and "path?query" of a ws:// URL. 0, -EINVAL or -EPROTONOSUPPORT. */
static int split_url(struct ws_call *c, const char *url, struct buf *target)
{
    CURLU *u = curl_url();
    if (!u)
        return -ENOMEM;
    char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL, *query = NULL;
    int rc = curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) ? -EINVAL : 0;
    if (!rc &&
        (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) ||
         curl_url_get(u, CURLUPART_HOST, &host, 0) || curl_url_get(u, CURLUPART_PATH, &path, 0)))
        rc = -EINVAL;
    if (!rc && strcasecmp(scheme, "ws") && strcasecmp(scheme, "wss"))
        rc = -EINVAL;
    c->tls_on = !rc && !strcasecmp(scheme, "wss");
    if (!rc && curl_url_get(u, CURLUPART_PORT, &port, 0))
        port = NULL;
    (void)curl_url_get(u, CURLUPART_QUERY, &query, 0);
    if (!rc) {
        size_t hl = strlen(host);
        if (hl >= 2 && host[0] == '[') /* an IPv6 literal: without brackets for getaddrinfo */
            snprintf(c->host, sizeof(c->host), "%.*s", (int)(hl - 2), host + 1);
        else
            snprintf(c->host, sizeof(c->host), "%s", host);
        snprintf(c->port, sizeof(c->port), "%s", port ? port : c->tls_on ? "443" : "80");
        rc = buf_appendf(target, "%s%s%s", path, query ? "?" : "", query ? query : "");
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(path);
    curl_free(query);
    curl_url_cleanup(u);
    return rc;
}

/* The upgrade request in c->req. */
static int build_request(struct ws_call *c, const struct ws_call_spec *spec, const char *target)
{
    struct rng r;
    rng_seed(&r, spec->mask_seed ^ 0x6b6579ull);
    char key[WS_KEY_LEN + 1];
    ws_client_key(&r, key);
    int rc = ws_accept_key(key, strlen(key), c->accept);
    bool v6 = strchr(c->host, ':') != NULL;
    if (!rc)
        rc = buf_appendf(&c->req,
                         "GET %s HTTP/1.1\r\nHost: %s%s%s:%s\r\nUpgrade: websocket\r\n"
                         "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                         "Sec-WebSocket-Version: 13\r\n",
                         target, v6 ? "[" : "", c->host, v6 ? "]" : "", c->port, key);
    for (size_t i = 0; !rc && i < spec->n_headers; i++) {
        if (strpbrk(spec->headers[i], "\r\n"))
            return -EINVAL;
        rc = buf_appendf(&c->req, "%s\r\n", spec->headers[i]);
    }
    return rc ? rc : buf_append_str(&c->req, "\r\n");
}

static int call_init(struct ws_call *c, uv_loop_t *loop, const struct ws_call_spec *spec)
{
    struct buf target;
    buf_init(&target, 8192);
    buf_init(&c->req, 64 * 1024);
    buf_init(&c->out, SIZE_MAX / 4);
    buf_init(&c->wbuf, SIZE_MAX / 4);
    buf_init(&c->body, BODY_MAX + 1);
    int rc = split_url(c, spec->url, &target);
    if (!rc)
        rc = build_request(c, spec, buf_cstr(&target));
    buf_release(&target);
    if (!rc)
        rc = ws_conn_init(&c->ws, false, c->max_message, spec->mask_seed, &ws_ops, c);
    c->ws_inited = !rc;
    if (rc)
        return rc;
    http_parser_init(&c->parser, HTTP_RESPONSE);
    c->parser.data = c;
    if ((rc = uv_tcp_init(loop, &c->tcp)))
        return rc;
    c->tcp.data = c;
    c->handles++;
    if ((rc = uv_timer_init(loop, &c->timer)))
        return rc;
    c->timer.data = c;
    c->handles++;
    return 0;
}

int ws_call_open(uv_loop_t *loop, const struct ws_call_spec *spec, const struct ws_call_ops *ops,
                 void *user, struct ws_call **out)
{
    *out = NULL;
    if (!spec->url || !ops || !ops->on_done || !ops->on_message || !ops->on_open)
        return -EINVAL;
    struct ws_call *c = ts_calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->loop = loop;
    c->ops = ops;
    c->user = user;
    c->max_message = spec->max_message ? spec->max_message : (4u << 20);
    c->connect_timeout_ms = spec->connect_timeout_ms ? spec->connect_timeout_ms : 10000;
    c->total_timeout_ms = spec->total_timeout_ms;
    c->idle_timeout_ms = spec->idle_timeout_ms;
    c->insecure = spec->insecure;
    buf_init(&c->plain, SIZE_MAX / 4);
    c->res.start_ns = ts_now_ns();
    c->creq.data = c;
    c->wreq.data = c;
    c->gai.data = c;
    int rc = call_init(c, loop, spec);
    if (!rc)
        rc = uv_timer_start(&c->timer, on_timer, c->connect_timeout_ms, 0);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    if (!rc)
        rc = uv_getaddrinfo(loop, &c->gai, on_resolved, c->host, c->port, &hints);
    if (rc) {
        /* nothing reached the network: close what was opened, without on_done */
        c->silent = true;
        if (!c->handles) {
            maybe_finish(c);
            return rc > 0 ? -rc : rc;
        }
        end_call(c, HTTP_CALL_ERR_OTHER, NULL); /* frees c from the close callbacks */
        return rc > 0 ? -rc : rc;
    }
    c->gai_pending = true;
    if (spec->send_shaper && spec->send_shaper->allow)
        c->shaper = *spec->send_shaper; /* owned from here */
    *out = c;
    return 0;
}

int ws_call_send_text(struct ws_call *c, const char *data, size_t len)
{
    return ws_call_send(c, WS_OP_TEXT, data, len);
}

int ws_call_send(struct ws_call *c, int opcode, const char *data, size_t len)
{
    if (c->st != ST_OPEN)
        return TS_CLOSED;
    return ws_conn_send(&c->ws, opcode, data, len);
}

void ws_call_close(struct ws_call *c, uint16_t code, const char *reason)
{
    if (c->st != ST_OPEN)
        return;
    c->st = ST_CLOSING;
    if (ws_conn_close(&c->ws, code, reason) < 0) {
        end_call(c, HTTP_CALL_OK, NULL);
        return;
    }
    if (c->st == ST_ENDING)
        return; /* the send shaper ended the connection while the close was written */
    (void)uv_timer_start(&c->timer, on_timer, CLOSE_WAIT_MS, 0);
}

void ws_call_cancel(struct ws_call *c)
{
    end_call(c, HTTP_CALL_ERR_ABORTED, "cancelled");
}
