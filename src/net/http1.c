/*
 * http1.c - the client's own engine for plain http:// HTTP/1.1 calls: one
 * non-blocking socket per connection watched by a uv_poll, the request
 * written with one sendmsg, the response read with one recvmsg per readable
 * event (which also brings the kernel's receive timestamp, no extra peek)
 * and parsed by http-parser in response mode. Kept-alive connections wait in
 * a pool per target (host, port), newest first.
 *
 * Why not libcurl here: with thousands of streams, curl_multi_socket_action()
 * on one socket also runs every other transfer whose timer expired, and one
 * call took up to 46 ms with 5,000 streams (bench/README.md); curl's
 * machinery costs about a quarter of the client's CPU per SSE event. TLS,
 * HTTP/2, proxies and connection limits stay with libcurl.
 *
 * What it does as curl does: the same request headers (Host, User-Agent,
 * Accept, Content-Length and curl's default Content-Type for a body; a user
 * header replaces one of them, "Name:" removes it, "Name;" sends it empty),
 * dot segments removed from the path (curl's URL parser splits the URL), the
 * same error classes and CURLcode values, a request retried once on a new
 * connection when a kept-alive one turns out closed before any response byte.
 * Names that are not IP literals are resolved with uv_getaddrinfo and kept
 * for 60 s; the addresses are tried in order.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <http_parser.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/log.h"
#include "net/http_client_int.h"
#include "ts_config.h"

#define H1_USER_AGENT   "tokenstorm/" TS_VERSION
#define H1_MAX_ADDRS    8
#define H1_DNS_TTL_NS   (60ull * 1000000000ull)
#define H1_MAX_RH_BYTES (64 * 1024) /* response headers of one response */
#define H1_MAX_HOSTS    64          /* targets kept; beyond, unused ones go */
#define H1_MAX_NAME     255

struct h1_gai;
struct h1_host;
struct h1_conn;

/* The engine's per-client state (c->engine_state[HC_ENGINE_H1]). */
struct h1_client {
    struct http_client_list hosts; /* struct h1_host: targets, their names and pools */
    unsigned idle;                 /* kept-alive connections in all pools */
    bool proxy_env;                /* a proxy variable is set: curl for http:// */
    char *url;                     /* the last URL split, and what it gave */
    struct h1_host *url_host;
    char *url_path;
    unsigned sync;    /* > 0 inside http_client_request */
    uint64_t retries; /* calls moved off a kept-alive connection found closed */
};

/* A call on this engine. */
struct h1_call {
    struct http_call base;
    bool failed;  /* ended inside http_client_request: finished from idle */
    bool retried; /* already moved once off a stale kept-alive connection */
    bool head;    /* a HEAD request: the response has no body */
    struct h1_host *host;
    struct h1_conn *conn;              /* its connection, NULL while it waits */
    struct http_client_list wait_link; /* in host->waiting during resolution */
    char *req;                         /* the request head (heap) */
    size_t req_len;
    const void *body;
    size_t body_len;
    size_t sent; /* bytes of head + body written */
    long status;
    CURLcode code; /* how it ended, in curl's terms (classified alike) */
    struct buf rh; /* response headers: name\0value\0... */
    unsigned rh_n;
    bool rh_value;                               /* the last header bytes were a value */
    uint64_t dns_ns, connect_ns, pretransfer_ns; /* absolute, 0 = not reached */
    bool reused;
    bool shaped;               /* shaper paces the request bytes (the call owns its ctx) */
    struct http_shaper shaper; /* the spec's, copied */
    uv_timer_t *wake;          /* the shaper's wake-ups (heap, a counted handle) */
};

struct h1_host {
    struct http_client *client;
    struct http_client_list link;    /* in h1_client.hosts */
    struct http_client_list idle;    /* kept-alive connections, newest first */
    struct http_client_list waiting; /* calls waiting for the name */
    char name[H1_MAX_NAME + 1];      /* host without brackets */
    char *host_hdr;                  /* "Host: name[:port]" value */
    uint16_t port;
    bool literal;       /* an IP literal: never resolved */
    struct h1_gai *gai; /* the lookup in progress, or NULL */
    struct sockaddr_storage addr[H1_MAX_ADDRS];
    socklen_t addr_len[H1_MAX_ADDRS];
    unsigned naddr;
    uint64_t resolved_ns;
    unsigned users; /* calls and connections that point here */
    bool orphan;    /* the client closed: freed by the last user */
};

enum h1_state { H1_CONNECTING, H1_SENDING, H1_RECEIVING, H1_IDLE };

struct h1_conn {
    uv_poll_t poll;
    int fd;
    struct h1_host *host;
    struct http_client_list link; /* in host->idle while idle */
    struct h1_call *call;
    enum h1_state state;
    unsigned addr_i; /* the address being connected to */
    unsigned served; /* calls completed on it */
    bool msg_done;   /* the response ended */
    bool got_bytes;  /* the current call received any */
    bool closing;
    bool bad_status;  /* the status line's code is not 100..999 */
    bool half_closed; /* http_call_shutdown_write sent our FIN: never reused */
    int events;       /* what the poll watches */
    uint64_t rx_ns;   /* the time of the bytes being parsed */
    http_parser parser;
};

struct h1_gai {
    uv_getaddrinfo_t req;
    struct h1_host *host; /* NULL once the client closed */
    struct http_client *client;
};

static struct h1_client *h1_of(struct http_client *c)
{
    return c->engine_state[HC_ENGINE_H1];
}

static struct h1_call *h1_call_of(struct http_call *call)
{
    return CONTAINER_OF(call, struct h1_call, base);
}

static void conn_on_poll(uv_poll_t *h, int status, int events);
static void conn_connect(struct h1_conn *conn);
static void call_start_on_host(struct h1_call *call);

/* ---- ending a call ---------------------------------------------------------- */

/* Ends call with code (and text): on_done runs now. Only from the loop's
 * callbacks, never inside the parser. */
static void call_fail(struct h1_call *call, CURLcode code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void call_fail(struct h1_call *call, CURLcode code, const char *fmt, ...)
{
    if (call->base.finished || call->failed)
        return;
    call->code = code;
    struct hc_errtext *t = fmt ? hc_call_errs(&call->base) : NULL;
    if (t && !t->errbuf[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(t->errbuf, sizeof(t->errbuf), fmt, ap);
        va_end(ap);
    }
    if (h1_of(call->base.client)->sync) { /* inside http_client_request: on_done runs later */
        call->failed = true;
        hc_client_defer(call->base.client, &call->base);
        return;
    }
    hc_call_finish(&call->base, code);
}

/* ---- connections -------------------------------------------------------------- */

static void conn_on_closed(uv_handle_t *h)
{
    struct h1_conn *conn = h->data;
    struct h1_host *host = conn->host;
    struct http_client *c = host->client;
    ts_free(conn);
    if (--host->users == 0 && host->orphan) {
        ts_free(host->host_hdr);
        ts_free(host);
    }
    hc_client_handle_closed(c);
}

static void conn_close(struct h1_conn *conn)
{
    if (conn->closing)
        return;
    conn->closing = true;
    if (conn->state == H1_IDLE) {
        hc_list_remove(&conn->link);
        h1_of(conn->host->client)->idle--;
    }
    if (conn->call) {
        conn->call->conn = NULL;
        conn->call = NULL;
    }
    /* uv_close stops the poll at once; the fd is closed right after it. */
    uv_close((uv_handle_t *)&conn->poll, conn_on_closed);
    close(conn->fd);
    conn->fd = -1;
}

static int conn_watch(struct h1_conn *conn, int events)
{
    if (conn->events == events)
        return 0;
    int rc = uv_poll_start(&conn->poll, events, conn_on_poll);
    if (rc == 0)
        conn->events = events;
    return rc;
}

static struct h1_conn *conn_new(struct h1_host *host, int fd)
{
    struct http_client *c = host->client;
    struct h1_conn *conn = ts_calloc(1, sizeof(*conn));
    if (!conn)
        return NULL;
    if (uv_poll_init_socket(c->loop, &conn->poll, fd)) {
        ts_free(conn);
        return NULL;
    }
    conn->poll.data = conn;
    conn->fd = fd;
    conn->host = host;
    hc_list_init(&conn->link);
    host->users++;
    c->open_handles++;
    return conn;
}

/* The connection is free again: keep it for the next call, or close it. */
static void conn_park(struct h1_conn *conn)
{
    struct http_client *c = conn->host->client;
    conn->call = NULL;
    conn->served++;
    if (c->closing || (c->cfg.max_connects && h1_of(c)->idle >= c->cfg.max_connects)) {
        conn_close(conn);
        return;
    }
    conn->state = H1_IDLE;
    /* Readable while idle: the server closed it (or talks out of turn). */
    if (conn_watch(conn, UV_READABLE)) {
        conn_close(conn);
        return;
    }
    hc_list_add_head(&conn->host->idle, &conn->link);
    h1_of(c)->idle++;
}

/* ---- the response parser ------------------------------------------------------------ */

static struct h1_call *parser_call(http_parser *p)
{
    struct h1_conn *conn = p->data;
    return conn->call;
}

static int rh_append(struct h1_call *call, const char *at, size_t len)
{
    return buf_append(&call->rh, at, len);
}

/* Ends the last header value: trailing blanks go, then its NUL. */
static int rh_end_value(struct h1_call *call)
{
    struct buf *b = &call->rh;
    size_t len = b->len;
    while (len && (b->data[len - 1] == ' ' || b->data[len - 1] == '\t'))
        len--;
    buf_truncate(b, len);
    call->rh_n++;
    return buf_append_char(b, '\0');
}

static int p_on_message_begin(http_parser *p)
{
    struct h1_call *call = parser_call(p);
    buf_reset(&call->rh);
    call->rh_n = 0;
    call->rh_value = false;
    return 0;
}

static int p_on_header_field(http_parser *p, const char *at, size_t len)
{
    struct h1_call *call = parser_call(p);
    if (call->rh_value) {
        if (rh_end_value(call))
            return 1;
        call->rh_value = false;
    }
    return rh_append(call, at, len) ? 1 : 0;
}

static int p_on_header_value(http_parser *p, const char *at, size_t len)
{
    struct h1_call *call = parser_call(p);
    if (!call->rh_value) {
        if (buf_append_char(&call->rh, '\0'))
            return 1;
        call->rh_value = true;
    }
    return rh_append(call, at, len) ? 1 : 0;
}

static int p_on_headers_complete(http_parser *p)
{
    struct h1_conn *conn = p->data;
    struct h1_call *call = conn->call;
    if (call->rh_value && rh_end_value(call))
        return -1;
    call->rh_value = false;
    call->status = p->status_code;
    if (p->status_code < 100 || p->status_code > 999) {
        conn->bad_status = true;
        return -1;
    }
    if (p->status_code >= 100 && p->status_code < 200)
        return 1; /* an interim response has no body (whatever it says); the final one follows */
    hc_call_headers(&call->base, p->status_code, conn->rx_ns);
    if (call->base.forced != HTTP_CALL_OK)
        return -1;
    return call->head ? 1 : 0; /* 1: no body follows */
}

static int p_on_body(http_parser *p, const char *at, size_t len)
{
    struct h1_conn *conn = p->data;
    return hc_call_body(&conn->call->base, at, len, conn->rx_ns) ? -1 : 0;
}

static int p_on_message_complete(http_parser *p)
{
    struct h1_conn *conn = p->data;
    if (p->status_code >= 100 && p->status_code < 200)
        return 0;
    conn->msg_done = true;
    http_parser_pause(p, 1); /* what follows is not this call's */
    return 0;
}

static const http_parser_settings parser_settings = {
    .on_message_begin = p_on_message_begin,
    .on_header_field = p_on_header_field,
    .on_header_value = p_on_header_value,
    .on_headers_complete = p_on_headers_complete,
    .on_body = p_on_body,
    .on_message_complete = p_on_message_complete,
};

/* ---- receiving ------------------------------------------------------------- */

/* A kept-alive connection failed before any byte of the response: the
 * server had closed it. Moves the call to a new connection, once. */
static bool call_retry_elsewhere(struct h1_call *call, struct h1_conn *conn)
{
    if (!conn->served || conn->got_bytes || call->retried || call->base.finished ||
        call->base.forced != HTTP_CALL_OK)
        return false;
    call->retried = true;
    call->sent = 0;
    h1_of(call->base.client)->retries++;
    conn_close(conn); /* detaches the call */
    call_start_on_host(call);
    return true;
}

static void conn_ended(struct h1_conn *conn, bool reusable)
{
    struct h1_call *call = conn->call;
    call->conn = NULL;
    if (reusable)
        conn_park(conn);
    else
        conn_close(conn);
    hc_call_finish(&call->base, CURLE_OK);
}

/* The peer closed the connection (or it broke) while call was on it. */
static void conn_eof(struct h1_conn *conn, int err)
{
    struct h1_call *call = conn->call;
    if (!err && conn->got_bytes) {
        /* A body that runs until the close ends here. */
        conn->rx_ns = ts_now_ns();
        http_parser_execute(&conn->parser, &parser_settings, NULL, 0);
        if (conn->msg_done) {
            conn_ended(conn, false);
            return;
        }
    }
    if (call_retry_elsewhere(call, conn))
        return;
    conn_close(conn);
    if (!conn->got_bytes && !err)
        call_fail(call, CURLE_GOT_NOTHING, "Empty reply from server");
    else if (err)
        call_fail(call, CURLE_RECV_ERROR, "Recv failure: %s", strerror(err));
    else
        call_fail(call, CURLE_PARTIAL_FILE, "transfer closed with outstanding read data remaining");
}

/* recvmsg(2) without glibc's wrapper, a cancellation point that switches
 * the thread's cancel type twice around every call (0.7% of the client's
 * CPU at 100 paced streams): no thread of ours is ever cancelled. */
static ssize_t rx_msg(int fd, struct msghdr *msg)
{
    return syscall(SYS_recvmsg, fd, msg, MSG_DONTWAIT);
}

/* Reads once. Returns 1 when bytes were taken and the call goes on, 0
 * when the socket had nothing (EAGAIN), -1 when the call or connection ended. */
static int conn_read(struct h1_conn *conn)
{
    struct http_client *c = conn->host->client;
    struct h1_call *call = conn->call;
    struct iovec iov = {c->rxbuf, sizeof(c->rxbuf)};
    union {
        char buf[CMSG_SPACE(sizeof(struct timespec))];
        struct cmsghdr align;
    } ctl;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (c->cfg.rx_timestamps) {
        msg.msg_control = ctl.buf;
        msg.msg_controllen = sizeof(ctl.buf);
    }
    ssize_t n = rx_msg(conn->fd, &msg);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    if (!call) { /* idle: closed by the server, or it spoke out of turn */
        conn_close(conn);
        return -1;
    }
    if (n <= 0) {
        conn_eof(conn, n < 0 ? errno : 0);
        return -1;
    }
    /* the kernel's receive time (never before the call started: a small
     * step of the wall clock can shift stamps, hc_msg_stamp); the clock
     * only without it */
    uint64_t stamp = c->cfg.rx_timestamps ? hc_msg_stamp(c, &msg) : 0;
    conn->rx_ns = !stamp ? ts_now_ns() : stamp < call->base.start_ns ? call->base.start_ns : stamp;
    c->read_ns = conn->rx_ns;
    bool first = !conn->got_bytes; /* the call's line with req is cold on later reads */
    conn->got_bytes = true;
    if (first && call->req && call->sent >= call->req_len + call->body_len) {
        /* answered: never sent again (call_retry_elsewhere), so a held
         * stream does not keep its request head */
        ts_free(call->req);
        call->req = NULL;
    }
    hc_call_rx(&call->base, conn->rx_ns);
    size_t used = http_parser_execute(&conn->parser, &parser_settings, c->rxbuf, (size_t)n);
    enum http_errno e = HTTP_PARSER_ERRNO(&conn->parser);
    if (call->base.finished)
        return -1;
    if (call->base.forced != HTTP_CALL_OK) {
        conn_close(conn);
        hc_call_finish(&call->base, CURLE_OK);
        return -1;
    }
    if (conn->msg_done) {
        bool reusable = used == (size_t)n && conn->state == H1_RECEIVING && !conn->half_closed &&
                        http_should_keep_alive(&conn->parser);
        conn_ended(conn, reusable);
        return -1;
    }
    if (e == HPE_OK)
        return 1;
    conn_close(conn);
    if (conn->bad_status)
        call_fail(call, CURLE_WEIRD_SERVER_REPLY, "malformed HTTP response: status %ld",
                  call->status);
    else if (e == HPE_CB_header_field || e == HPE_CB_header_value || e == HPE_CB_headers_complete)
        call_fail(call, CURLE_RECV_ERROR, "response headers over %d KiB", H1_MAX_RH_BYTES / 1024);
    else
        call_fail(call, CURLE_WEIRD_SERVER_REPLY, "malformed HTTP response: %s",
                  http_errno_description(e));
    return -1;
}

/*
 * libuv stopped the poll because the socket reported an error (POLLERR,
 * given as UV_EBADF): read what is still queued, then the read itself
 * reports the real error (a reset, a refused connection...).
 */
static void conn_on_error(struct h1_conn *conn)
{
    conn->events = 0;
    if (!conn->call) {
        conn_close(conn);
        return;
    }
    for (int i = 0; i < 64; i++) {
        int r = conn_read(conn);
        if (r < 0)
            return;
        if (r == 0)
            break;
    }
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(conn->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno;
    if (err) {
        conn_eof(conn, err);
        return;
    }
    if (conn_watch(conn, conn->state == H1_SENDING ? UV_READABLE | UV_WRITABLE : UV_READABLE)) {
        struct h1_call *call = conn->call;
        conn_close(conn);
        call_fail(call, CURLE_RECV_ERROR, "cannot watch the connection's socket");
    }
}

/* ---- sending --------------------------------------------------------------- */

static void conn_send(struct h1_conn *conn);

static void wake_on_closed(uv_handle_t *h)
{
    struct http_client *c = h->data;
    ts_free(h);
    hc_client_handle_closed(c);
}

static void shaper_on_wake(uv_timer_t *t);

/* Calls the shaper again at wake (monotonic ns). */
static void shaper_arm(struct h1_call *call, uint64_t wake)
{
    if (!call->wake) {
        call->wake = ts_malloc(sizeof(*call->wake));
        if (!call->wake)
            return;
        (void)uv_timer_init(call->base.client->loop, call->wake); /* cannot fail */
        call->base.client->open_handles++;
    }
    call->wake->data = call;
    uint64_t now = ts_now_ns();
    uint64_t ms = wake > now ? (wake - now + TS_NS_PER_MS - 1) / TS_NS_PER_MS : 0;
    (void)uv_timer_start(call->wake, shaper_on_wake, ms, 0);
}

/* The shaper ends the connection: a reset or a close, the call fails. */
static void shaper_cut(struct h1_conn *conn, enum http_shape_then then)
{
    struct h1_call *call = conn->call;
    bool sent = call->sent == call->req_len + call->body_len;
    if (then == HTTP_SHAPE_RESET) {
        struct linger lg = {1, 0};
        (void)setsockopt(conn->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    conn_close(conn);
    const char *how = then == HTTP_SHAPE_RESET ? "reset" : "closed";
    if (sent)
        call_fail(call, CURLE_RECV_ERROR, "connection %s by the send shaper", how);
    else
        call_fail(call, CURLE_SEND_ERROR, "connection %s by the send shaper after %zu bytes", how,
                  call->sent);
}

static void shaper_on_wake(uv_timer_t *t)
{
    struct h1_call *call = t->data;
    struct h1_conn *conn = call->conn;
    if (call->base.finished || !conn || conn->state == H1_CONNECTING)
        return;
    if (conn->state == H1_SENDING) {
        conn_send(conn);
        return;
    }
    size_t total = call->req_len + call->body_len;
    uint64_t wake = 0;
    enum http_shape_then then = HTTP_SHAPE_MORE;
    (void)call->shaper.allow(call->shaper.ctx, total, total, ts_now_ns(), &wake, &then);
    if (then != HTTP_SHAPE_MORE)
        shaper_cut(conn, then);
    else if (wake)
        shaper_arm(call, wake);
}

/* The next bytes of the request (head, then body) to write, at most room
 * of them: fills iov and returns how many entries it used (1 or 2). */
static int send_iov(const struct h1_call *call, size_t room, struct iovec iov[2])
{
    int n = 0;
    if (call->sent < call->req_len) {
        iov[n].iov_base = call->req + call->sent;
        iov[n++].iov_len = call->req_len - call->sent;
        if (call->body_len) {
            iov[n].iov_base = (void *)call->body;
            iov[n++].iov_len = call->body_len;
        }
    } else {
        size_t off = call->sent - call->req_len;
        iov[n].iov_base = (char *)call->body + off;
        iov[n++].iov_len = call->body_len - off;
    }
    size_t left = room;
    for (int i = 0; i < n; i++) {
        if (iov[i].iov_len > left)
            iov[i].iov_len = left;
        left -= iov[i].iov_len;
    }
    if (n == 2 && iov[1].iov_len == 0)
        n = 1;
    return n;
}

/* Writes what it may of the request: as much as the kernel and the shaper
 * take, then watches for writable (more to send) or readable (the answer). */
static void conn_send(struct h1_conn *conn)
{
    struct h1_call *call = conn->call;
    size_t total = call->req_len + call->body_len;
    bool held = false; /* the shaper holds the rest back for now */
    while (call->sent < total) {
        struct iovec iov[2];
        size_t room = total - call->sent;
        enum http_shape_then then = HTTP_SHAPE_MORE;
        if (call->shaped) {
            uint64_t wake = 0;
            uint64_t ok =
                call->shaper.allow(call->shaper.ctx, total, call->sent, ts_now_ns(), &wake, &then);
            if (ok < room)
                room = (size_t)ok;
            if (wake)
                shaper_arm(call, wake);
            if (!room) {
                if (then != HTTP_SHAPE_MORE) {
                    shaper_cut(conn, then);
                    return;
                }
                held = true;
                break;
            }
        }
        int n = send_iov(call, room, iov);
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(conn->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            int err = errno;
            if (call_retry_elsewhere(call, conn))
                return;
            conn_close(conn);
            call_fail(call, CURLE_SEND_ERROR, "Send failure: %s", strerror(err));
            return;
        }
        call->sent += (size_t)w;
        if (then != HTTP_SHAPE_MORE && (size_t)w == room) {
            shaper_cut(conn, then);
            return;
        }
        if (call->shaped && (size_t)w < room)
            break; /* the kernel is full: wait for writable */
    }
    bool done = call->sent == total;
    if (done)
        conn->state = H1_RECEIVING;
    if (conn_watch(conn, done || held ? UV_READABLE : UV_READABLE | UV_WRITABLE)) {
        conn_close(conn);
        call_fail(call, CURLE_FAILED_INIT, "cannot watch the connection's socket");
    }
}

/* Puts call on conn (connected) and starts sending. */
static void conn_begin_call(struct h1_conn *conn, struct h1_call *call)
{
    conn->call = call;
    conn->msg_done = false;
    conn->got_bytes = false;
    conn->bad_status = false;
    conn->state = H1_SENDING;
    call->conn = conn;
    call->reused = conn->served > 0;
    http_parser_init(&conn->parser, HTTP_RESPONSE);
    conn->parser.data = conn;
    uint64_t now = ts_now_ns();
    if (!call->dns_ns)
        call->dns_ns = now;
    if (!call->connect_ns)
        call->connect_ns = now;
    call->pretransfer_ns = now;
    conn_send(conn);
}

/* ---- connecting -------------------------------------------------------------- */

static void call_connect_from(struct h1_call *call, unsigned first, int err);

static void conn_connect_failed(struct h1_conn *conn, int err)
{
    struct h1_call *call = conn->call;
    unsigned next = conn->addr_i + 1;
    conn_close(conn);
    call_connect_from(call, next, err);
}

static void conn_connected(struct h1_conn *conn)
{
    struct h1_call *call = conn->call;
    call->connect_ns = ts_now_ns();
    conn_begin_call(conn, call);
}

static void conn_connect(struct h1_conn *conn)
{
    struct http_client *c = conn->host->client;
    struct h1_host *host = conn->host;
    int one = 1;
    conn->state = H1_CONNECTING;
    (void)setsockopt(conn->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (c->cfg.rx_timestamps && setsockopt(conn->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)))
        ts_debug("http_client: SO_TIMESTAMPNS: %s", strerror(errno));
    int rc = connect(conn->fd, (struct sockaddr *)&host->addr[conn->addr_i],
                     host->addr_len[conn->addr_i]);
    if (rc == 0) {
        conn_connected(conn);
        return;
    }
    if (errno != EINPROGRESS) {
        conn_connect_failed(conn, errno);
        return;
    }
    if (conn_watch(conn, UV_WRITABLE)) {
        struct h1_call *call = conn->call;
        conn_close(conn);
        call_fail(call, CURLE_FAILED_INIT, "cannot watch the connection's socket");
    }
}

static void conn_on_poll(uv_poll_t *h, int status, int events)
{
    struct h1_conn *conn = h->data;
    struct http_client *c = conn->host->client;
    if (conn->closing)
        return;
    if (conn->state == H1_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(conn->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (status < 0)
            conn->events = 0; /* libuv stopped the poll */
        if (!err && status < 0)
            err = ECONNREFUSED; /* POLLERR, yet no socket error: say refused */
        if (err)
            conn_connect_failed(conn, err);
        else if (events & UV_WRITABLE)
            conn_connected(conn);
        hc_between_reads(c, 0);
        return;
    }
    c->read_ns = 0;
    if (status < 0) {
        conn_on_error(conn);
    } else {
        if ((events & UV_WRITABLE) && conn->state == H1_SENDING)
            conn_send(conn);
        if ((events & UV_READABLE) && !conn->closing)
            (void)conn_read(conn);
    }
    hc_between_reads(c, c->read_ns);
}

/* A new connection for call to its host's first address from `first` on
 * that gives a socket; err: why the one before failed (0: none yet). */
static void call_connect_from(struct h1_call *call, unsigned first, int err)
{
    struct h1_host *host = call->host;
    for (unsigned i = first; i < host->naddr; i++) {
        int s = socket(host->addr[i].ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (s < 0) { /* e.g. no IPv6 in this kernel: the next address */
            err = errno;
            continue;
        }
        struct h1_conn *conn = conn_new(host, s);
        if (!conn) {
            close(s);
            call_fail(call, CURLE_OUT_OF_MEMORY, "out of memory for a connection");
            return;
        }
        conn->addr_i = i;
        conn->call = call;
        call->conn = conn;
        conn_connect(conn);
        return;
    }
    call_fail(call, CURLE_COULDNT_CONNECT, "Failed to connect to %s port %u: %s", host->name,
              host->port, strerror(err ? err : EADDRNOTAVAIL));
}

static void call_connect(struct h1_call *call)
{
    call_connect_from(call, 0, 0);
}

/* ---- names ------------------------------------------------------------------- */

static void host_resolved(struct h1_host *host, int status, struct addrinfo *res)
{
    host->naddr = 0;
    for (struct addrinfo *ai = res; ai && host->naddr < H1_MAX_ADDRS; ai = ai->ai_next) {
        if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) ||
            ai->ai_addrlen > sizeof(host->addr[0]))
            continue;
        memcpy(&host->addr[host->naddr], ai->ai_addr, ai->ai_addrlen);
        host->addr_len[host->naddr++] = ai->ai_addrlen;
    }
    host->resolved_ns = ts_now_ns();
    while (!hc_list_empty(&host->waiting)) {
        struct h1_call *call = CONTAINER_OF(host->waiting.next, struct h1_call, wait_link);
        hc_list_remove(&call->wait_link);
        if (!host->naddr) {
            call_fail(call, CURLE_COULDNT_RESOLVE_HOST, "Could not resolve host: %s (%s)",
                      host->name, status ? uv_strerror(status) : "no address");
        } else {
            call->dns_ns = host->resolved_ns;
            call_connect(call);
        }
    }
}

static void on_getaddrinfo(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    struct h1_gai *g = req->data;
    struct h1_host *host = g->host;
    struct http_client *c = g->client;
    if (host) {
        host->gai = NULL;
        host_resolved(host, status, res);
    }
    uv_freeaddrinfo(res);
    ts_free(g);
    hc_client_handle_closed(c);
}

static int host_resolve(struct h1_host *host)
{
    struct http_client *c = host->client;
    struct h1_gai *g = ts_calloc(1, sizeof(*g));
    if (!g)
        return -ENOMEM;
    g->req.data = g;
    g->host = host;
    g->client = c;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    char port[8];
    snprintf(port, sizeof(port), "%u", host->port);
    int rc = uv_getaddrinfo(c->loop, &g->req, on_getaddrinfo, host->name, port, &hints);
    if (rc) {
        ts_free(g);
        return rc;
    }
    c->open_handles++;
    host->gai = g;
    return 0;
}

static void call_start_on_host(struct h1_call *call)
{
    struct h1_host *host = call->host;
    if (host->literal && !call->dns_ns)
        call->dns_ns = ts_now_ns();
    if (!host->literal && !host->gai &&
        (!host->naddr || ts_now_ns() - host->resolved_ns > H1_DNS_TTL_NS)) {
        int rc = host_resolve(host);
        if (rc) {
            call_fail(call, CURLE_COULDNT_RESOLVE_HOST, "Could not resolve host: %s (%s)",
                      host->name, uv_strerror(rc));
            return;
        }
    }
    if (host->gai) {
        hc_list_add_tail(&host->waiting, &call->wait_link);
        return;
    }
    if (!call->dns_ns)
        call->dns_ns = ts_now_ns(); /* a name still in the cache */
    call_connect(call);
}

/* ---- targets ----------------------------------------------------------------- */

static void host_free(struct h1_host *host)
{
    hc_list_remove(&host->link);
    if (host->gai)
        host->gai->host = NULL;
    ts_free(host->host_hdr);
    ts_free(host);
}

/* "localhost" or a name under ".localhost" (RFC 6761), any case. */
static bool is_localhost(const char *name, size_t n)
{
    static const char tail[] = ".localhost";
    size_t t = sizeof(tail) - 1;
    return (n == t - 1 && strcasecmp(name, tail + 1) == 0) ||
           (n > t && strcasecmp(name + n - t, tail) == 0);
}

/* The target bare:port already kept, or NULL. */
static struct h1_host *host_find(struct h1_client *hc, const char *bare, unsigned port)
{
    for (struct http_client_list *l = hc->hosts.next; l != &hc->hosts; l = l->next) {
        struct h1_host *h = CONTAINER_OF(l, struct h1_host, link);
        if (h->port == port && strcmp(h->name, bare) == 0)
            return h;
    }
    return NULL;
}

/* Room for one more target: when H1_MAX_HOSTS are kept, the first one that
 * nobody uses goes (if there is one). */
static void hosts_evict(struct h1_client *hc)
{
    unsigned count = 0;
    for (struct http_client_list *l = hc->hosts.next; l != &hc->hosts; l = l->next)
        count++;
    if (count < H1_MAX_HOSTS)
        return;
    for (struct http_client_list *l = hc->hosts.next; l != &hc->hosts; l = l->next) {
        struct h1_host *h = CONTAINER_OF(l, struct h1_host, link);
        if (!h->users && !h->gai && hc_list_empty(&h->idle) && hc->url_host != h) {
            host_free(h);
            return;
        }
    }
}

static void addr_set4(struct sockaddr_storage *ss, socklen_t *len, unsigned port)
{
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    a4->sin_family = AF_INET;
    a4->sin_port = htons((uint16_t)port);
    *len = sizeof(*a4);
}

static void addr_set6(struct sockaddr_storage *ss, socklen_t *len, unsigned port)
{
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons((uint16_t)port);
    *len = sizeof(*a6);
}

/* The addresses a target has without asking the resolver: an IP literal,
 * or localhost. 0 (h->literal says whether it has them), or -EINVAL for a
 * bracketed name that is no IPv6 address. */
static int host_literal(struct h1_host *h, bool v6)
{
    struct sockaddr_in *a4 = (struct sockaddr_in *)&h->addr[0];
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&h->addr[0];
    if (!v6 && inet_pton(AF_INET, h->name, &a4->sin_addr) == 1) {
        addr_set4(&h->addr[0], &h->addr_len[0], h->port);
        h->naddr = 1;
    } else if (v6 && inet_pton(AF_INET6, h->name, &a6->sin6_addr) == 1) {
        addr_set6(&h->addr[0], &h->addr_len[0], h->port);
        h->naddr = 1;
    } else if (v6) {
        return -EINVAL;
    } else if (is_localhost(h->name, strlen(h->name))) {
        /* as curl (7.78 on): localhost is loopback without asking the resolver,
         * IPv4 and IPv6, whatever /etc/hosts says */
        addr_set4(&h->addr[0], &h->addr_len[0], h->port);
        a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr_set6(&h->addr[1], &h->addr_len[1], h->port);
        ((struct sockaddr_in6 *)&h->addr[1])->sin6_addr = in6addr_loopback;
        h->naddr = 2;
    } else {
        return 0;
    }
    h->literal = true;
    return 0;
}

/* A new target bare:port (bare: the name without brackets; v6: it had
 * them). 0 with *out, -ENOMEM or -EINVAL. */
static int host_new(struct http_client *c, const char *bare, bool v6, unsigned port,
                    struct h1_host **out)
{
    struct h1_host *h = NULL;
    size_t n = strlen(bare);
    size_t hl = n + 16;
    int rc;

    h = ts_calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    h->client = c;
    hc_list_init(&h->idle);
    hc_list_init(&h->waiting);
    memcpy(h->name, bare, n + 1);
    h->port = (uint16_t)port;
    h->host_hdr = ts_malloc(hl);
    if (!h->host_hdr) {
        rc = -ENOMEM;
        goto out_host;
    }
    if (port == 80)
        snprintf(h->host_hdr, hl, v6 ? "[%s]" : "%s", bare);
    else
        snprintf(h->host_hdr, hl, v6 ? "[%s]:%u" : "%s:%u", bare, port);
    rc = host_literal(h, v6);
    if (rc)
        goto out_hdr;
    hc_list_add_tail(&h1_of(c)->hosts, &h->link);
    *out = h;
    return 0;

out_hdr:
    ts_free(h->host_hdr);
out_host:
    ts_free(h);
    return rc;
}

/* Finds or makes the target name:port (name: curl's host part, [v6] with
 * brackets); making one may evict an unused target. 0 with *out, -EINVAL
 * or -ENOMEM. */
static int host_get(struct http_client *c, const char *name, unsigned port, struct h1_host **out)
{
    char bare[H1_MAX_NAME + 1];
    size_t n = strlen(name);
    bool v6 = n >= 2 && name[0] == '[' && name[n - 1] == ']';
    if (v6) {
        name++;
        n -= 2;
    }
    if (n == 0 || n > H1_MAX_NAME || port == 0 || port > 65535)
        return -EINVAL;
    memcpy(bare, name, n);
    bare[n] = '\0';
    *out = host_find(h1_of(c), bare, port);
    if (*out)
        return 0;
    hosts_evict(h1_of(c));
    return host_new(c, bare, v6, port, out);
}

/* ---- URLs ------------------------------------------------------------------- */

/* The parts of a URL the engine needs, from curl's URL parser. */
struct url_parts {
    char *scheme, *user, *host, *zone, *port, *path, *query;
};

static void url_parts_free(struct url_parts *p)
{
    curl_free(p->scheme);
    curl_free(p->user);
    curl_free(p->host);
    curl_free(p->port);
    curl_free(p->path);
    curl_free(p->query);
    curl_free(p->zone);
}

/* Parses url into p (url_parts_free it either way): 0, -ENOMEM, or -EINVAL
 * for a URL the engine leaves to curl (not http://, with a user or a zone
 * id, or one curl's parser refuses). */
static int url_parts_get(const char *url, struct url_parts *p)
{
    CURLU *u = curl_url();
    int rc = -EINVAL;
    if (!u)
        return -ENOMEM;
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &p->scheme, 0) != CURLUE_OK ||
        strcmp(p->scheme, "http") ||
        curl_url_get(u, CURLUPART_USER, &p->user, 0) != CURLUE_NO_USER ||
        curl_url_get(u, CURLUPART_HOST, &p->host, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_ZONEID, &p->zone, 0) == CURLUE_OK || /* left to curl */
        curl_url_get(u, CURLUPART_PORT, &p->port, CURLU_DEFAULT_PORT) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PATH, &p->path, 0) != CURLUE_OK)
        goto out;
    CURLUcode qrc = curl_url_get(u, CURLUPART_QUERY, &p->query, 0);
    if (qrc != CURLUE_OK && qrc != CURLUE_NO_QUERY)
        goto out;
    rc = 0;
out:
    curl_url_cleanup(u);
    return rc;
}

/* The port number of p: 0 with *port, or -EINVAL. */
static int url_port(const struct url_parts *p, unsigned *port)
{
    char *end = NULL;
    unsigned long pn = strtoul(p->port, &end, 10);
    if (!end || *end || pn == 0 || pn > 65535)
        return -EINVAL;
    *port = (unsigned)pn;
    return 0;
}

/* The request target: path, and '?' and query if there is one. 0 with
 * *out (heap), -ENOMEM, or -EINVAL when it holds a control byte or a blank
 * (curl would send it; we don't). */
static int url_target(const struct url_parts *p, char **out)
{
    size_t pl = strlen(p->path), ql = p->query ? strlen(p->query) : 0;
    char *target = ts_malloc(pl + ql + 2);
    if (!target)
        return -ENOMEM;
    memcpy(target, p->path, pl);
    if (p->query) {
        target[pl] = '?';
        memcpy(target + pl + 1, p->query, ql + 1);
    } else {
        target[pl] = '\0';
    }
    for (char *c = target; *c; c++) {
        if ((unsigned char)*c <= ' ' || *c == 0x7f) {
            ts_free(target);
            return -EINVAL;
        }
    }
    *out = target;
    return 0;
}

/* Forgets the last URL split. */
static void url_forget(struct h1_client *hc)
{
    ts_free(hc->url);
    ts_free(hc->url_path);
    hc->url = NULL;
    hc->url_path = NULL;
    hc->url_host = NULL;
}

/*
 * Splits url with curl's URL parser into the target (found or made, which
 * may evict an unused one) and the request target, kept in the engine's
 * url, url_host and url_path for h1_call_start (the same URL again is not
 * parsed again). 0, -ENOMEM, or -EINVAL when the engine should leave the URL
 * to curl.
 */
static int url_split(struct http_client *c, const char *url)
{
    struct h1_client *hc = h1_of(c);
    struct url_parts p = {0};
    struct h1_host *host = NULL;
    char *target = NULL, *copy = NULL;
    unsigned port = 0;
    int rc;

    if (hc->url && strcmp(hc->url, url) == 0)
        return hc->url_host ? 0 : -EINVAL;
    url_forget(hc);
    rc = url_parts_get(url, &p);
    if (!rc)
        rc = url_port(&p, &port);
    if (!rc)
        rc = host_get(c, p.host, port, &host);
    if (!rc)
        rc = url_target(&p, &target);
    if (rc)
        goto out_parts;
    copy = ts_strdup(url);
    if (!copy) {
        rc = -ENOMEM;
        goto out_target;
    }
    hc->url = copy;
    hc->url_host = host;
    hc->url_path = target;
    url_parts_free(&p);
    return 0;

out_target:
    ts_free(target);
out_parts:
    url_parts_free(&p);
    return rc;
}

/* ---- the request head ---------------------------------------------------- */

enum {
    HB_HOST = 1 << 0,
    HB_UA = 1 << 1,
    HB_ACCEPT = 1 << 2,
    HB_CTYPE = 1 << 3,
};

static const struct {
    const char *name;
    unsigned bit;
} builtin[] = {
    {"Host", HB_HOST},
    {"User-Agent", HB_UA},
    {"Accept", HB_ACCEPT},
    {"Content-Type", HB_CTYPE},
};

/* Length of a header's name (before ':' or ';'). */
static size_t hline_name_len(const char *h)
{
    return strcspn(h, ":;");
}

/* The value after the name and its mark, blanks skipped. */
static const char *hline_value(const char *h)
{
    const char *v = h + hline_name_len(h) + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    return v;
}

static bool hline_is(const char *h, const char *name)
{
    size_t n = hline_name_len(h);
    return strlen(name) == n && strncasecmp(h, name, n) == 0;
}

/*
 * Whether spec may run on this engine, by what the client and the call say
 * (it reads only; the URL is split by url_split): the own engine is on, no
 * HTTP/2 prior knowledge, no proxy variable, no connection limits, a plain
 * http:// URL, and headers that leave the framing to the engine.
 */
static bool h1_eligible(const struct http_client *c, const struct http_call_spec *spec)
{
    const struct h1_client *hc = c->engine_state[HC_ENGINE_H1];
    if (c->cfg.engine != HTTP_CLIENT_ENGINE_AUTO || c->cfg.version == HTTP_CLIENT_HTTP2_PRIOR ||
        hc->proxy_env || c->cfg.max_host_connections || c->cfg.max_total_connections)
        return false;
    if (strncasecmp(spec->url, "http://", 7) != 0)
        return false;
    for (size_t i = 0; i < spec->n_headers; i++) {
        const char *h = spec->headers[i];
        /* Framing and interim responses stay curl's business. */
        if (hline_is(h, "Content-Length") || hline_is(h, "Transfer-Encoding"))
            return false;
        if (hline_is(h, "Expect") && *hline_value(h))
            return false;
    }
    return true;
}

static int build_head(struct h1_call *call, const struct http_call_spec *spec, const char *m,
                      bool has_body)
{
    struct http_client *c = call->base.client;
    struct buf b;
    unsigned given = 0;
    int rc = 0;
    buf_init(&b, SIZE_MAX / 2);
    for (size_t i = 0; i < spec->n_headers; i++)
        for (size_t k = 0; k < sizeof(builtin) / sizeof(builtin[0]); k++)
            if (hline_is(spec->headers[i], builtin[k].name))
                given |= builtin[k].bit;
    rc = buf_appendf(&b, "%s %s HTTP/1.1\r\n", m, h1_of(c)->url_path);
    if (!rc && !(given & HB_HOST))
        rc = buf_appendf(&b, "Host: %s\r\n", call->host->host_hdr);
    if (!rc && !(given & HB_UA))
        rc = buf_append_str(&b, "User-Agent: " H1_USER_AGENT "\r\n");
    if (!rc && !(given & HB_ACCEPT))
        rc = buf_append_str(&b, "Accept: */*\r\n");
    for (size_t i = 0; i < spec->n_headers && !rc; i++) {
        const char *h = spec->headers[i];
        size_t n = hline_name_len(h);
        const char *v = hline_value(h);
        if (h[n] == ';') { /* "Name;": sent with an empty value, if nothing follows */
            if (!*v)
                rc = buf_appendf(&b, "%.*s:\r\n", (int)n, h);
            continue;
        }
        if (!*v)
            continue; /* "Name:": removes it */
        rc = buf_appendf(&b, "%s\r\n", h);
    }
    if (!rc && has_body) {
        rc = buf_appendf(&b, "Content-Length: %zu\r\n", spec->body_len);
        if (!rc && !(given & HB_CTYPE))
            rc = buf_append_str(&b, "Content-Type: application/x-www-form-urlencoded\r\n");
    }
    if (!rc)
        rc = buf_append_str(&b, "\r\n");
    if (rc) {
        buf_release(&b);
        return -ENOMEM;
    }
    call->req = buf_take(&b, &call->req_len);
    return 0;
}

/* ---- the engine's functions ---------------------------------------------- */

/* The engine takes spec when it is eligible and its URL splits: 0, or
 * -ENOTSUP, -EINVAL, -ENOMEM (then curl runs it). */
static int h1_route(struct http_client *c, const struct http_call_spec *spec)
{
    if (!h1_eligible(c, spec))
        return -ENOTSUP;
    return url_split(c, spec->url);
}

static size_t h1_call_size(const struct hc_request *req)
{
    (void)req; /* the request head is built on the heap */
    return sizeof(struct h1_call);
}

/* Builds the request (the URL was split by h1_route). 0 or -ENOMEM. */
static int h1_call_start(struct http_call *base, const struct hc_request *req, const void *body)
{
    struct h1_call *call = h1_call_of(base);
    const struct http_call_spec *spec = req->spec;
    const char *m = spec->method ? spec->method : (spec->body ? "POST" : "GET");
    bool is_post = strcmp(m, "POST") == 0;
    bool has_body = spec->body != NULL || is_post;

    hc_list_init(&call->wait_link);
    buf_init(&call->rh, H1_MAX_RH_BYTES);
    call->host = h1_of(base->client)->url_host;
    call->host->users++; /* h1_call_detach gives it back, also on failure */
    call->head = strcmp(m, "HEAD") == 0;
    call->body = has_body ? (body ? body : "") : NULL;
    call->body_len = has_body ? spec->body_len : 0;
    if (spec->send_shaper && spec->send_shaper->allow)
        call->shaper = *spec->send_shaper; /* owned once the call is launched */
    return build_head(call, spec, m, has_body);
}

/* Sends it: on a kept-alive connection, a new one, or after the name is
 * resolved. No callback runs inside; a failure is reported from the loop. */
static int h1_call_launch(struct http_call *base)
{
    struct h1_call *call = h1_call_of(base);
    struct h1_client *hc = h1_of(base->client);
    struct h1_host *host = call->host;

    call->shaped = call->shaper.allow != NULL; /* accepted: the call owns sh->ctx */
    hc->sync++;
    if (!hc_list_empty(&host->idle)) {
        struct h1_conn *conn = CONTAINER_OF(host->idle.next, struct h1_conn, link);
        hc_list_remove(&conn->link);
        hc->idle--;
        call->dns_ns = call->connect_ns = ts_now_ns();
        conn_begin_call(conn, call);
    } else {
        call_start_on_host(call);
    }
    hc->sync--;
    return 0;
}

/* A failure found inside http_client_request is reported now. */
static void h1_call_deferred(struct http_call *base)
{
    struct h1_call *call = h1_call_of(base);
    if (call->failed)
        hc_call_finish(base, call->code);
}

/* The own engine has no connect timeout of its own: the client's timer
 * ends a call still without a connection. */
static bool h1_call_connecting(const struct http_call *base)
{
    return !CONTAINER_OF(base, const struct h1_call, base)->connect_ns;
}

/* The call ends: its connection goes back to the pool or is closed. */
static void h1_call_detach(struct http_call *base)
{
    struct h1_call *call = h1_call_of(base);
    hc_list_remove(&call->wait_link);
    if (call->wake) {
        call->wake->data = base->client;
        uv_close((uv_handle_t *)call->wake, wake_on_closed);
        call->wake = NULL;
    }
    if (call->shaped) {
        call->shaped = false;
        if (call->shaper.release)
            call->shaper.release(call->shaper.ctx);
    }
    if (call->conn) {
        struct h1_conn *conn = call->conn;
        conn_close(conn); /* mid-call: the connection cannot be reused */
    }
    if (call->host) {
        call->host->users--;
        call->host = NULL;
    }
}

static void h1_call_free(struct http_call *base)
{
    struct h1_call *call = h1_call_of(base);
    ts_free(call->req);
    call->req = NULL;
    buf_release(&call->rh);
}

static int h1_call_headers_each(struct http_call *base,
                                int (*fn)(void *ctx, const char *name, const char *value),
                                void *ctx)
{
    struct h1_call *call = h1_call_of(base);
    if (!base->headers_done || !call->rh.data)
        return 0; /* no headers at all */
    const char *p = call->rh.data, *end = p + call->rh.len;
    for (unsigned i = 0; i < call->rh_n && p < end; i++) {
        const char *v = p + strlen(p) + 1; /* name\0value\0 */
        int rc = fn(ctx, p, v);
        if (rc)
            return rc;
        p = v + strlen(v) + 1;
    }
    return 0;
}

struct header_find {
    const char *name, *value;
};

static int header_match(void *ctx, const char *name, const char *value)
{
    struct header_find *f = ctx;
    if (strcasecmp(name, f->name) != 0)
        return 0;
    f->value = value;
    return 1;
}

/* http_call_shutdown_write: our FIN once the whole request is out. */
static int h1_call_shutdown_write(struct http_call *base)
{
    struct h1_call *call = (struct h1_call *)base;
    struct h1_conn *conn = call->conn;
    if (!conn || conn->fd < 0 || call->sent < call->req_len + call->body_len)
        return -EAGAIN;
    if (conn->half_closed)
        return 0;
    if (shutdown(conn->fd, SHUT_WR) != 0)
        return -errno;
    conn->half_closed = true;
    return 0;
}

static const char *h1_call_header(struct http_call *base, const char *name)
{
    struct header_find f = {name, NULL};
    (void)h1_call_headers_each(base, header_match, &f);
    return f.value;
}

static uint64_t since(uint64_t start, uint64_t t)
{
    if (!t)
        return 0;
    return t > start ? t - start : 1000; /* curl: at least 1 us for a phase reached */
}

static void h1_call_result(struct http_call *base, struct http_call_result *res)
{
    struct h1_call *call = h1_call_of(base);
    res->status = base->headers_done ? call->status : 0; /* a final response's */
    res->reused = call->reused;
    res->dns_ns = since(base->start_ns, call->dns_ns);
    res->connect_ns = since(base->start_ns, call->connect_ns);
    res->tls_ns = 0;
    res->pretransfer_ns = since(base->start_ns, call->pretransfer_ns);
    res->starttransfer_ns = since(base->start_ns, base->first_rx_ns);
    res->total_ns = since(base->start_ns, res->end_ns);
}

static int h1_client_init(struct http_client *c)
{
    struct h1_client *hc = ts_calloc(1, sizeof(*hc));
    if (!hc)
        return -ENOMEM;
    hc_list_init(&hc->hosts);
    const char *vars[] = {"http_proxy", "all_proxy", "ALL_PROXY"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            hc->proxy_env = true;
    }
    c->engine_state[HC_ENGINE_H1] = hc;
    return 0;
}

/* The client closes: every connection and name lookup goes. */
static void h1_client_close(struct http_client *c)
{
    struct h1_client *hc = h1_of(c);
    while (!hc_list_empty(&hc->hosts)) {
        struct h1_host *h = CONTAINER_OF(hc->hosts.next, struct h1_host, link);
        while (!hc_list_empty(&h->idle))
            conn_close(CONTAINER_OF(h->idle.next, struct h1_conn, link));
        if (h->gai)
            (void)uv_cancel((uv_req_t *)&h->gai->req);
        /* Closing connections still point at h until their close callback. */
        hc_list_remove(&h->link);
        if (h->gai)
            h->gai->host = NULL;
        h->gai = NULL;
        if (!h->users) {
            ts_free(h->host_hdr);
            ts_free(h);
        } else {
            h->orphan = true; /* freed by the last connection's close */
        }
    }
    url_forget(hc);
}

static void h1_client_free(struct http_client *c)
{
    ts_free(h1_of(c));
    c->engine_state[HC_ENGINE_H1] = NULL;
}

const struct http_engine_ops http_engine_h1 = {
    .name = "http1",
    .call_struct_size = sizeof(struct h1_call),
    .shapes_sends = true,
    .client_init = h1_client_init,
    .client_close = h1_client_close,
    .client_free = h1_client_free,
    .route = h1_route,
    .call_size = h1_call_size,
    .call_start = h1_call_start,
    .call_launch = h1_call_launch,
    .call_deferred = h1_call_deferred,
    .call_connecting = h1_call_connecting,
    .call_detach = h1_call_detach,
    .call_result = h1_call_result,
    .call_free = h1_call_free,
    .call_header = h1_call_header,
    .call_headers_each = h1_call_headers_each,
    .call_shutdown_write = h1_call_shutdown_write,
};
