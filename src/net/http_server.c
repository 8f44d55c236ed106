/*
 * http_server.c - the HTTP/1.1 server's socket layer and the server itself,
 * on libuv: accept, read, write (try_write first, uv_write for the rest),
 * shutdown and close of each connection, its timers, output shaping (the
 * chaos proxy's TCP faults), and the server's init, listen and shutdown.
 * The connection without its socket (parsing, framing, keep-alive) is
 * http_server_conn.c; http_server_int.h says what the two share.
 *
 * Everything that must not happen inside a caller's call chain (flushing,
 * resuming pipelined input, firing on_drain, freeing a connection) is done
 * in one uv_idle pass over the server's list of "dirty" connections. The
 * idle handle is active only while that list is not empty, so the loop
 * never spins idle, and writes made during one loop iteration leave in one
 * system call per connection.
 */
#include "http_server.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/log.h"
#include "net/http_server_int.h"
#include "net/ptimer.h"

#define READ_BUF_SIZE (64 * 1024)
#define LINGER_MS     1000
#define FLUSH_BUFS    16
#define WRITE_BUFS    4 /* uv_write keeps up to 4 bufs without allocating */

static void conn_read_start(struct http_conn *c);
static void conn_close_handles(struct http_conn *c);
static void server_idle_cb(uv_idle_t *h);

/* -------------------------------------------------------------- timers */

static void conn_timer_cb(uv_timer_t *t);

void hs_timer_set(struct http_conn *c, enum conn_timer st)
{
    const struct http_server_config *cfg = &c->server->cfg;
    c->tstate = st;
    if (c->fake || c->closing)
        return;
    uint64_t ms;
    switch (st) {
    case T_FIRST:
    case T_HEAD:
        ms = cfg->header_timeout_ms;
        break;
    case T_BODY:
        ms = cfg->body_timeout_ms;
        break;
    case T_IDLE:
        ms = cfg->idle_timeout_ms;
        break;
    case T_LINGER:
        ms = LINGER_MS;
        break;
    default:
        uv_timer_stop(&c->timer);
        return;
    }
    if (uv_timer_start(&c->timer, conn_timer_cb, ms, 0) != 0)
        hs_conn_cut(c, true);
}

static void conn_timer_cb(uv_timer_t *t)
{
    struct http_conn *c = t->data;
    enum conn_timer st = c->tstate;
    c->tstate = T_NONE;
    if ((st == T_FIRST || st == T_HEAD || st == T_BODY) && c->in_message) {
        hs_conn_error(c, 408);
        return;
    }
    hs_conn_cut(c, true);
}

/* ------------------------------------------------------------- reading */

/* The connection's unparsed input is full: stop reading until it drains
 * (a fake connection has nothing to stop). */
void hs_read_pause(struct http_conn *c)
{
    if (c->fake || c->read_paused)
        return;
    c->read_paused = true;
    uv_read_stop((uv_stream_t *)&c->tcp);
}

/* The unparsed input drained below the mark: read again. */
void hs_read_resume(struct http_conn *c)
{
    if (!c->read_paused || c->closing)
        return;
    c->read_paused = false;
    if (!c->fake)
        conn_read_start(c);
}

static void conn_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    struct http_conn *c = h->data;
    *b = uv_buf_init(c->server->rbuf, READ_BUF_SIZE);
}

static void conn_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *b)
{
    struct http_conn *c = st->data;
    if (nread > 0)
        hs_conn_on_data(c, b->base, (size_t)nread);
    else if (nread < 0)
        hs_conn_on_eof(c, (int)nread);
}

static void conn_read_start(struct http_conn *c)
{
    if (uv_read_start((uv_stream_t *)&c->tcp, conn_alloc_cb, conn_read_cb) != 0)
        hs_conn_cut(c, true);
}

/* ------------------------------------------------------------- closing */

static void conn_close_cb(uv_handle_t *h)
{
    struct http_conn *c = h->data;
    if (--c->handles == 0 && !c->req_active) {
        c->free_pending = true;
        hs_conn_mark_dirty(c);
    }
}

static void shape_timer_closed(struct ptimer *t)
{
    struct conn_shape *sp = t->data;
    struct http_conn *c = sp->conn;
    if (--c->handles == 0 && !c->req_active) {
        c->free_pending = true;
        hs_conn_mark_dirty(c);
    }
}

static void conn_close_handles(struct http_conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    c->dead = true;
    c->input_done = true;
    if (c->shape)
        ptimer_close(&c->shape->timer, shape_timer_closed);
    if (c->fake) {
        if (!c->req_active && c->handles == 0) {
            c->free_pending = true;
            hs_conn_mark_dirty(c);
        }
        return;
    }
    if (c->usending)
        ts_uring_cancel(c->server->uring, &c->usend->op); /* before the fd number is freed */
    if (!c->reset_on_close || uv_tcp_close_reset(&c->tcp, conn_close_cb) != 0)
        uv_close((uv_handle_t *)&c->tcp, conn_close_cb);
    uv_close((uv_handle_t *)&c->timer, conn_close_cb);
}

/* Drops the connection now; notify: tell a handler that holds a request. */
void hs_conn_cut(struct http_conn *c, bool notify)
{
    if (c->dead) {
        conn_close_handles(c);
        return;
    }
    c->dead = true;
    c->input_done = true;
    if (notify && c->req_active && c->req.on_abort_) {
        http_request_event_cb fn = c->req.on_abort_;
        c->req.on_abort_ = NULL;
        fn(&c->req);
    }
    conn_close_handles(c);
}

static void conn_shutdown_cb(uv_shutdown_t *req, int status)
{
    struct http_conn *c = req->data;
    if (!c->closing && status < 0)
        conn_close_handles(c);
}

/* Output is all sent and the connection is to close: FIN, then drain input. */
static void conn_end(struct http_conn *c)
{
    if (c->lingering)
        return;
    c->lingering = true;
    if (c->reset_after_flush) {
        c->reset_on_close = true;
        conn_close_handles(c);
        return;
    }
    if (c->fake || c->peer_eof) {
        conn_close_handles(c);
        return;
    }
    if (uv_shutdown(&c->sreq, (uv_stream_t *)&c->tcp, conn_shutdown_cb) != 0) {
        conn_close_handles(c);
        return;
    }
    if (c->read_paused) {
        c->read_paused = false;
        conn_read_start(c);
    }
    hs_timer_set(c, T_LINGER);
}

/* ------------------------------------------------------------- writing */

static void conn_write_cb(uv_write_t *w, int status)
{
    struct http_conn *c = w->data;
    c->writing = false;
    if (c->closing)
        return;
    if (status < 0) {
        hs_conn_cut(c, true);
        return;
    }
    hs_out_consume(c, c->inflight);
    c->inflight = 0;
    if (c->tstate == T_IDLE)
        hs_timer_set(c, T_IDLE); /* progress: the idle clock starts again */
    hs_conn_mark_dirty(c);
}

/* The connection's io_uring send is done: like conn_write_cb, and the send
 * held the connection as one of its handles. */
static void conn_usend_done(struct ts_uring_op *op, int res)
{
    struct http_conn *c = ((struct hs_usend *)op)->conn;
    c->writing = false;
    c->usending = false;
    size_t sent = c->inflight;
    c->inflight = 0;
    if (--c->handles == 0 && !c->req_active) {
        c->free_pending = true;
        hs_conn_mark_dirty(c);
        return;
    }
    if (c->closing)
        return;
    if (res < 0) {
        hs_conn_cut(c, true);
        return;
    }
    hs_out_consume(c, (size_t)res < sent ? (size_t)res : sent);
    if (c->tstate == T_IDLE)
        hs_timer_set(c, T_IDLE); /* progress: the idle clock starts again */
    /* a stream that keeps up needs no idle pass: nothing left, nothing waits */
    if (c->queued > 0 || c->want_drain || c->shape || !c->req_active || c->in_len > 0)
        hs_conn_mark_dirty(c);
}

/* Queues bufs as the connection's one send on the server's ring. 0, or a
 * negative errno (the caller writes with libuv instead). */
static int conn_usend(struct http_conn *c, const uv_buf_t *bufs, unsigned n, size_t total)
{
    struct hs_usend *us = c->usend;
    if (!us) {
        us = ts_calloc(1, sizeof *us);
        if (!us)
            return -ENOMEM;
        us->conn = c;
        us->op.done = conn_usend_done;
        c->usend = us;
    }
    uv_os_fd_t fd;
    int rc = uv_fileno((const uv_handle_t *)&c->tcp, &fd);
    if (rc)
        return rc;
    if (n > sizeof us->iov / sizeof us->iov[0])
        n = sizeof us->iov / sizeof us->iov[0];
    size_t k = 0;
    for (unsigned i = 0; i < n; i++) {
        us->iov[i].iov_base = bufs[i].base;
        us->iov[i].iov_len = bufs[i].len;
        k += bufs[i].len;
    }
    memset(&us->msg, 0, sizeof us->msg);
    us->msg.msg_iov = us->iov;
    us->msg.msg_iovlen = n;
    rc = ts_uring_sendmsg(c->server->uring, fd, &us->msg, &us->op);
    if (rc)
        return rc;
    c->writing = true;
    c->usending = true;
    c->inflight = k < total ? k : total;
    c->handles++;
    return 0;
}

static void fake_sink(struct http_conn *c, const uv_buf_t *bufs, unsigned n, size_t total)
{
    if (!c->fake_out)
        return;
    for (unsigned i = 0; i < n && total > 0; i++) {
        size_t k = bufs[i].len < total ? bufs[i].len : total;
        if (buf_append(c->fake_out, bufs[i].base, k) != 0)
            return;
        total -= k;
    }
}

/* Cuts bufs to at most limit bytes in total; returns the new count. */
static unsigned bufs_clamp(uv_buf_t *bufs, unsigned n, size_t *total, uint64_t limit)
{
    if (*total <= limit)
        return n;
    size_t left = (size_t)limit;
    unsigned i = 0;
    for (; i < n && left > 0; i++) {
        if (bufs[i].len > left)
            bufs[i].len = left;
        left -= bufs[i].len;
    }
    *total = (size_t)limit;
    return i;
}

static void shape_timer_cb(struct ptimer *t)
{
    struct conn_shape *sp = t->data;
    hs_conn_mark_dirty(sp->conn);
}

static void shape_wake(struct http_conn *c, uint64_t at)
{
    if (ptimer_start_at(&c->shape->timer, at, shape_timer_cb) != 0)
        hs_conn_cut(c, true);
}

/* How many bytes the shaper lets go now (all when there is none). */
static uint64_t shape_allow(struct http_conn *c)
{
    struct conn_shape *sp = c->shape;
    if (!sp || !sp->sh.allow)
        return UINT64_MAX;
    if (sp->then != HTTP_SHAPE_MORE || c->writing)
        return sp->then != HTTP_SHAPE_MORE && sp->then_at > c->sent_total
                   ? sp->then_at - c->sent_total
                   : 0;
    uint64_t wake = 0;
    enum http_shape_then then = HTTP_SHAPE_MORE;
    uint64_t n = sp->sh.allow(sp->sh.ctx, c->out_total, c->sent_total, ts_now_ns(), &wake, &then);
    if (n > c->out_total - c->sent_total)
        n = c->out_total - c->sent_total;
    if (then != HTTP_SHAPE_MORE) {
        sp->then = then;
        sp->then_at = c->sent_total + n;
    } else if (wake) {
        shape_wake(c, wake);
    }
    return n;
}

/* The shaper asked to end the connection and its bytes are out: do it. */
static bool shape_ended(struct http_conn *c)
{
    struct conn_shape *sp = c->shape;
    if (!sp || sp->then == HTTP_SHAPE_MORE || c->writing || c->sent_total < sp->then_at)
        return false;
    c->reset_on_close = sp->then == HTTP_SHAPE_RESET;
    hs_conn_cut(c, true);
    return true;
}

/* Slow close: whether the FIN must wait still (the timer is armed). */
static bool shape_close_wait(struct http_conn *c)
{
    struct conn_shape *sp = c->shape;
    if (!sp || !sp->sh.close_delay_ns || c->reset_after_flush)
        return false;
    uint64_t now = ts_now_ns();
    if (!sp->close_at)
        sp->close_at = now + sp->sh.close_delay_ns;
    if (now >= sp->close_at)
        return false;
    shape_wake(c, sp->close_at);
    return true;
}

/* Hands queued output to the kernel: try_write, then uv_write for the rest. */
static void conn_flush(struct http_conn *c)
{
    uv_buf_t bufs[FLUSH_BUFS];
    uint64_t limit = shape_allow(c);
    while (c->queued > 0 && !c->writing && limit > 0) {
        size_t total;
        unsigned n = hs_out_gather(c, bufs, FLUSH_BUFS, &total);
        n = bufs_clamp(bufs, n, &total, limit);
        limit -= total;
        if (c->fake) {
            size_t k = c->fake_chunk && c->fake_chunk < total ? c->fake_chunk : total;
            fake_sink(c, bufs, n, k);
            hs_out_consume(c, k);
            if (k < total) {
                hs_conn_mark_dirty(c); /* as a write completing next iteration */
                return;
            }
            continue;
        }
        if (c->server->uring && conn_usend(c, bufs, n, total) == 0)
            return;
        int r = uv_try_write((uv_stream_t *)&c->tcp, bufs, n);
        if (r == UV_EAGAIN)
            r = 0;
        if (r < 0) {
            hs_conn_cut(c, true);
            return;
        }
        hs_out_consume(c, (size_t)r);
        if ((size_t)r < total) {
            limit += total - (size_t)r;
            n = hs_out_gather(c, bufs, WRITE_BUFS, &total);
            n = bufs_clamp(bufs, n, &total, limit);
            if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, bufs, n, conn_write_cb) != 0) {
                hs_conn_cut(c, true);
                return;
            }
            c->writing = true;
            c->inflight = total;
            return;
        }
    }
}

/*
 * Hands queued bytes to the kernel at once when nothing is in the way (no
 * write in progress, no shaper): a token reaches the client when it is
 * produced, not at the end of the loop pass, and the writer's timestamp is
 * the send time. Errors and leftovers are left to the idle pass, so no
 * callback runs inside the caller's write.
 */
void hs_conn_flush_now(struct http_conn *c)
{
    if (c->writing || c->fake || c->shape || c->dead || c->queued == 0)
        return;
    uv_buf_t bufs[FLUSH_BUFS];
    size_t total;
    unsigned n = hs_out_gather(c, bufs, FLUSH_BUFS, &total);
    if (c->server->uring && conn_usend(c, bufs, n, total) == 0)
        return;
    int r = uv_try_write((uv_stream_t *)&c->tcp, bufs, n);
    if (r > 0)
        hs_out_consume(c, (size_t)r);
}

/* ------------------------------------------------------- the idle pass */

/* One idle-pass step for a dirty connection. */
static void conn_process(struct http_conn *c)
{
    const struct http_server_config *cfg = &c->server->cfg;
    if (c->free_pending) {
        hs_conn_free(c);
        return;
    }
    if (c->closing)
        return;
    conn_flush(c);
    if (c->closing || shape_ended(c))
        return;
    if (c->want_drain && c->req_active && c->queued <= cfg->write_high_water / 2) {
        c->want_drain = false;
        if (c->req.on_drain_)
            c->req.on_drain_(&c->req);
        if (c->closing)
            return;
    }
    if (c->upgraded && c->in_len > 0) {
        hs_conn_upgraded_input(c);
        if (c->closing)
            return;
    }
    if (!c->req_active && c->in_len > 0 && !c->input_done && c->queued <= cfg->write_high_water) {
        hs_conn_parse(c, c->in + c->in_off, c->in_len, true);
        if (c->closing)
            return;
    }
    if (c->req_active || c->in_message)
        return;
    if (c->close_after_flush && !c->writing && c->queued == 0) {
        if (!shape_close_wait(c))
            conn_end(c);
    } else if (c->tstate == T_NONE && !c->lingering)
        hs_timer_set(c, T_IDLE);
}

void hs_conn_mark_dirty(struct http_conn *c)
{
    struct http_server *s = c->server;
    if (c->dirty)
        return;
    c->dirty = true;
    /* first marked, first served: streams queued first are flushed first */
    c->dirty_next = NULL;
    if (s->dirty_tail)
        s->dirty_tail->dirty_next = c;
    else
        s->dirty = c;
    s->dirty_tail = c;
    if (!s->finishing && uv_idle_start(&s->idle, server_idle_cb) != 0)
        ts_error("http_server: cannot start idle handle");
}

static void server_idle_cb(uv_idle_t *h)
{
    struct http_server *s = h->data;
    struct http_conn *list = s->dirty;
    s->dirty = NULL;
    s->dirty_tail = NULL;
    while (list) {
        struct http_conn *c = list;
        list = c->dirty_next;
        c->dirty_next = NULL;
        c->dirty = false;
        conn_process(c);
    }
    if (!s->dirty && !s->finishing)
        uv_idle_stop(&s->idle);
}

/* ------------------------------------------------------------- shaping */

void *http_request_shaper_ctx(const struct http_request *req)
{
    const struct http_conn *c = hs_conn_of_req(req);
    return c->shape ? c->shape->sh.ctx : NULL;
}

int http_request_set_shaper(struct http_request *req, const struct http_shaper *sh)
{
    struct http_conn *c = hs_conn_of_req(req);
    if (!c->req_active || c->shape)
        return -EINVAL;
    if (c->dead)
        return TS_CLOSED;
    struct conn_shape *sp = ts_calloc(1, sizeof *sp);
    if (!sp)
        return -ENOMEM;
    int rc = ptimer_init(c->server->loop, &sp->timer);
    if (rc) {
        ts_free(sp);
        return rc;
    }
    sp->timer.data = sp;
    sp->conn = c;
    sp->sh = *sh;
    c->shape = sp;
    c->handles++;
    hs_conn_mark_dirty(c);
    return 0;
}

/* -------------------------------------------------------------- server */

static void server_on_connection(uv_stream_t *ls, int status)
{
    struct http_server *s = ls->data;
    if (status < 0) {
        ts_warn("http_server: accept: %s", uv_strerror(status));
        return;
    }
    struct http_conn *c = hs_conn_new(s);
    if (!c) {
        /* The pending socket stays in libuv; accepting resumes with the next conn. */
        ts_error("http_server: out of memory for a connection");
        return;
    }
    if (uv_tcp_init(s->loop, &c->tcp) != 0 || uv_timer_init(s->loop, &c->timer) != 0) {
        /* cannot happen with libuv 1.x: neither creates a socket */
        ts_error("http_server: handle init failed");
        c->fake = true;
        conn_close_handles(c);
        return;
    }
    c->handles = 2;
    if (uv_accept(ls, (uv_stream_t *)&c->tcp) != 0) {
        conn_close_handles(c);
        return;
    }
    s->conns_accepted++;
    if (s->conn_count > s->cfg.max_connections || s->closing) {
        s->conns_rejected++;
        conn_close_handles(c);
        return;
    }
    int len = (int)sizeof c->req.remote;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&c->req.remote, &len) != 0 ||
        uv_tcp_nodelay(&c->tcp, 1) != 0) {
        conn_close_handles(c);
        return;
    }
    hs_timer_set(c, T_FIRST);
    if (!c->closing)
        conn_read_start(c);
}

static void config_fill(struct http_server_config *c)
{
    if (!c->host)
        c->host = "127.0.0.1";
    if (!c->backlog)
        c->backlog = 511;
    if (!c->max_connections)
        c->max_connections = 65536;
    if (!c->max_header_bytes)
        c->max_header_bytes = 16 * 1024;
    if (!c->max_headers)
        c->max_headers = 100;
    if (c->max_headers > 100000)
        c->max_headers = 100000;
    if (!c->max_body_bytes)
        c->max_body_bytes = 16 * 1024 * 1024;
    if (!c->header_timeout_ms)
        c->header_timeout_ms = 10000;
    if (!c->idle_timeout_ms)
        c->idle_timeout_ms = 60000;
    if (!c->body_timeout_ms)
        c->body_timeout_ms = 60000;
    if (!c->write_high_water)
        c->write_high_water = 256 * 1024;
    if (!c->max_write_queue)
        c->max_write_queue = 64 * c->write_high_water;
}

int http_server_init(struct http_server *s, uv_loop_t *loop, const struct http_server_config *cfg,
                     http_request_cb on_request, void *ctx)
{
    if (!s || !loop || !on_request)
        return -EINVAL;
    memset(s, 0, sizeof *s);
    if (cfg)
        s->cfg = *cfg;
    config_fill(&s->cfg);
    if (s->cfg.port < 0 || s->cfg.port > 65535 || s->cfg.max_header_bytes > UINT32_MAX / 4 ||
        strlen(s->cfg.host) >= sizeof s->host)
        return -EINVAL;
    strcpy(s->host, s->cfg.host);
    s->cfg.host = s->host;
    int rc;
    if (strchr(s->cfg.host, ':'))
        rc = uv_ip6_addr(s->cfg.host, s->cfg.port, (struct sockaddr_in6 *)&s->addr);
    else
        rc = uv_ip4_addr(s->cfg.host, s->cfg.port, (struct sockaddr_in *)&s->addr);
    if (rc)
        return -EINVAL;
    s->rbuf = ts_malloc(READ_BUF_SIZE);
    if (!s->rbuf)
        return -ENOMEM;
    s->loop = loop;
    s->on_request = on_request;
    s->ctx = ctx;
    /* None of these can fail in libuv 1.x (no socket is created yet). */
    rc = uv_tcp_init(loop, &s->tcp);
    if (rc) {
        ts_free(s->rbuf);
        return rc;
    }
    if (uv_idle_init(loop, &s->idle) != 0 || uv_timer_init(loop, &s->grace) != 0)
        ts_error("http_server: handle init failed"); /* unreachable in libuv 1.x */
    s->tcp.data = s;
    s->idle.data = s;
    s->grace.data = s;
    s->handles_open = 3;
    if (s->cfg.io_uring) {
        if (ts_uring_open(&s->uring, loop, s->cfg.io_uring_batch, &s->uring_stats, s->uring_why,
                          sizeof s->uring_why) == 0)
            s->handles_open++;
        else
            s->uring = NULL; /* the reason is in uring_why: write(2) it is */
    }
    return 0;
}

bool http_server_io_uring(const struct http_server *s, const char **why)
{
    if (why)
        *why = s->uring_why;
    return s->uring != NULL;
}

/* The listening socket made here (libuv 1.44 has no UV_TCP_REUSEPORT) with
 * SO_REUSEPORT set before uv_tcp_bind binds it. */
static int open_reuse_port(struct http_server *s)
{
    int fd = socket(s->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int on = 1;
    int rc = 0;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0)
        rc = -errno;
    else
        rc = uv_tcp_open(&s->tcp, fd);
    if (rc)
        close(fd);
    return rc;
}

int http_server_listen(struct http_server *s)
{
    if (s->closing || s->listening)
        return -EINVAL;
    int rc;
    if (s->cfg.reuse_port && (rc = open_reuse_port(s)) != 0)
        return rc;
    rc = uv_tcp_bind(&s->tcp, (const struct sockaddr *)&s->addr, 0);
    if (rc)
        return rc;
    rc = uv_listen((uv_stream_t *)&s->tcp, s->cfg.backlog, server_on_connection);
    if (rc)
        return rc;
    struct sockaddr_storage ss;
    int len = (int)sizeof ss;
    rc = uv_tcp_getsockname(&s->tcp, (struct sockaddr *)&ss, &len);
    if (rc)
        return rc;
    if (ss.ss_family == AF_INET6)
        s->port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    else
        s->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    s->listening = true;
    return 0;
}

int http_server_port(const struct http_server *s)
{
    return s->listening ? s->port : 0;
}

static void server_handle_closed(struct http_server *s)
{
    if (--s->handles_open > 0)
        return;
    hs_pool_free(s);
    ts_free(s->rbuf);
    s->rbuf = NULL;
    if (s->on_closed)
        s->on_closed(s);
}

static void server_close_cb(uv_handle_t *h)
{
    server_handle_closed(h->data);
}

static void server_uring_closed(void *arg)
{
    server_handle_closed(arg);
}

static void server_listener_close_cb(uv_handle_t *h)
{
    struct http_server *s = h->data;
    s->listening = false;
    s->tcp_closed = true;
    server_close_cb(h);
    hs_server_maybe_finish(s);
}

void hs_server_maybe_finish(struct http_server *s)
{
    if (!s->closing || s->finishing || s->conn_count > 0 || !s->tcp_closed)
        return;
    s->finishing = true;
    if (s->uring) {
        /* no send is in flight: each holds its connection, and none is left */
        ts_uring_close(s->uring, server_uring_closed, s);
        s->uring = NULL;
    }
    uv_close((uv_handle_t *)&s->idle, server_close_cb);
    uv_close((uv_handle_t *)&s->grace, server_close_cb);
}

static void server_grace_cb(uv_timer_t *t)
{
    struct http_server *s = t->data;
    for (struct http_conn *c = s->conns; c; c = c->next)
        if (!c->closing)
            hs_conn_cut(c, true);
}

int http_server_shutdown(struct http_server *s, uint64_t grace_ms, http_server_closed_cb on_closed)
{
    if (s->closing)
        return -EINVAL;
    s->closing = true;
    s->on_closed = on_closed;
    uv_close((uv_handle_t *)&s->tcp, server_listener_close_cb);
    for (struct http_conn *c = s->conns; c; c = c->next) {
        if (c->closing)
            continue;
        c->input_done = true;
        hs_in_clear(c);
        if (c->req_active)
            continue;
        if (c->queued > 0 || c->writing || c->lingering) {
            c->close_after_flush = true;
            hs_conn_mark_dirty(c);
            continue;
        }
        hs_conn_cut(c, false);
    }
    if (uv_timer_start(&s->grace, server_grace_cb, grace_ms, 0) != 0)
        ts_error("http_server: cannot start the grace timer");
    return 0;
}
