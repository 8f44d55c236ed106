/*
 * Tests of the HTTP server: a real loop and real sockets on 127.0.0.1 port 0
 * with a blocking client in a second thread (results recorded, asserted in
 * the main thread once it is joined), plus exact-output tests through the
 * socket-less "fake" connection. The .c is included to reach the internals.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net/http_server_conn.c"

#include "base/clock.h"

#define GUARD_MS 15000

static uint64_t now_ms(void)
{
    return ts_now_ns() / TS_NS_PER_MS;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* ------------------------------------------------------------ client side */

struct reader {
    int fd;
    size_t len;
    bool eof;
    char buf[1 << 16];
};

struct resp {
    int status;
    char head[8192];
    char *body;
    size_t body_len, body_cap;
    size_t chunks;
    size_t chunk_len[64];
    bool complete;
};

static int client_connect_buf(int port, int family, int rcvbuf)
{
    int fd = socket(family, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    if (rcvbuf > 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    if (family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        inet_pton(AF_INET6, "::1", &a->sin6_addr);
        len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *a;
    }
    if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int client_connect(int port, int family)
{
    return client_connect_buf(port, family, 0);
}

static bool send_all(int fd, const void *p, size_t n)
{
    const char *s = p;
    while (n > 0) {
        ssize_t k = send(fd, s, n, MSG_NOSIGNAL);
        if (k <= 0)
            return false;
        s += k;
        n -= (size_t)k;
    }
    return true;
}

static bool send_str(int fd, const char *s)
{
    return send_all(fd, s, strlen(s));
}

static int reader_fill(struct reader *r)
{
    if (r->len == sizeof r->buf)
        return -1;
    ssize_t n = recv(r->fd, r->buf + r->len, sizeof r->buf - r->len, 0);
    if (n == 0)
        r->eof = true;
    if (n <= 0)
        return -1;
    r->len += (size_t)n;
    return 0;
}

static void reader_drop(struct reader *r, size_t n)
{
    memmove(r->buf, r->buf + n, r->len - n);
    r->len -= n;
}

/* Waits for EOF (or a reset); true if it came without more bytes. */
static bool reader_expect_eof(struct reader *r)
{
    if (r->len > 0)
        return false;
    while (reader_fill(r) == 0)
        if (r->len > 0)
            return false;
    return true;
}

static bool body_add(struct resp *o, const char *p, size_t n)
{
    if (o->body_len + n + 1 > o->body_cap) {
        size_t cap = o->body_cap ? o->body_cap : 4096;
        while (cap < o->body_len + n + 1)
            cap *= 2;
        if (cap > (64u << 20))
            return false;
        char *b = realloc(o->body, cap);
        if (!b)
            return false;
        o->body = b;
        o->body_cap = cap;
    }
    memcpy(o->body + o->body_len, p, n);
    o->body_len += n;
    o->body[o->body_len] = '\0';
    return true;
}

static void resp_free(struct resp *o)
{
    free(o->body);
    memset(o, 0, sizeof *o);
}

static bool head_has(const struct resp *o, const char *line)
{
    return strcasestr(o->head, line) != NULL;
}

/* Waits until the buffer holds a CRLF; returns its offset or -1. */
static long reader_line(struct reader *r)
{
    for (;;) {
        char *p = memmem(r->buf, r->len, "\r\n", 2);
        if (p)
            return p - r->buf;
        if (reader_fill(r) != 0)
            return -1;
    }
}

/* Reads one response (status line to end of body); returns 0 or -1. */
static int read_response(struct reader *r, struct resp *o, bool no_body)
{
    resp_free(o);
    char *end;
    while (!(end = memmem(r->buf, r->len, "\r\n\r\n", 4)))
        if (reader_fill(r) != 0)
            return -1;
    size_t hl = (size_t)(end - r->buf) + 4;
    if (hl >= sizeof o->head)
        return -1;
    memcpy(o->head, r->buf, hl);
    o->head[hl] = '\0';
    reader_drop(r, hl);
    if (strncmp(o->head, "HTTP/1.1 ", 9) != 0)
        return -1;
    o->status = atoi(o->head + 9);
    if (!body_add(o, "", 0))
        return -1;
    if (no_body || o->status < 200 || o->status == 204 || o->status == 304) {
        o->complete = true;
        return 0;
    }
    if (head_has(o, "\r\nTransfer-Encoding: chunked\r\n")) {
        for (;;) {
            long eol = reader_line(r);
            if (eol < 0)
                return -1;
            size_t size = strtoul(r->buf, NULL, 16);
            reader_drop(r, (size_t)eol + 2);
            if (size == 0) {
                if (reader_line(r) != 0)
                    return -1;
                reader_drop(r, 2);
                o->complete = true;
                return 0;
            }
            if (o->chunks < 64)
                o->chunk_len[o->chunks] = size;
            o->chunks++;
            while (size > 0) {
                if (r->len == 0 && reader_fill(r) != 0)
                    return -1;
                size_t k = r->len < size ? r->len : size;
                if (!body_add(o, r->buf, k))
                    return -1;
                reader_drop(r, k);
                size -= k;
            }
            if (reader_line(r) != 0)
                return -1;
            reader_drop(r, 2);
        }
    }
    const char *cl = strcasestr(o->head, "\r\nContent-Length:");
    if (cl) {
        size_t want = strtoul(cl + 17, NULL, 10);
        while (want > 0) {
            if (r->len == 0 && reader_fill(r) != 0)
                return -1;
            size_t k = r->len < want ? r->len : want;
            if (!body_add(o, r->buf, k))
                return -1;
            reader_drop(r, k);
            want -= k;
        }
        o->complete = true;
        return 0;
    }
    for (;;) { /* until close */
        if (r->len > 0 && !body_add(o, r->buf, r->len))
            return -1;
        r->len = 0;
        if (reader_fill(r) != 0)
            break;
    }
    o->complete = r->eof;
    return 0;
}

/* ------------------------------------------------------------- harness */

struct harness;
typedef void (*client_fn)(struct harness *h);

struct job {
    struct harness *h;
    uv_timer_t timer;
    struct http_request *req;
    int n;
};

struct harness {
    uv_loop_t loop;
    struct http_server srv;
    uv_async_t done;
    uv_timer_t guard;
    pthread_t thread;
    client_fn client;
    int port;
    int family;
    uint64_t grace_ms;
    bool timed_out, closed, client_done, shutdown_called;
    uint64_t shutdown_at, closed_at;

    /* results of the client thread */
    int cerr; /* line of the first client failure, 0 if none */
    struct resp r[6];
    bool eof_after[6];
    uint64_t t_client[4];
    size_t sent;

    /* results of the handlers */
    int nreq;
    char paths[8][64];
    uint16_t remote_port[8];
    int remote_family;
    bool slow_done_before_fast;
    bool slow_done;
    int aborts;
    int rc_write_after_abort, rc_end_after_abort;
    bool closed_flag_after_abort;
    int first_again_at;
    size_t queued_before_again, queued_at_again;
    size_t produced;
    int drains;
    uint64_t last_drain_before_read, first_drain_after_read;
    atomic_int reading;
    atomic_ulong read_start_ms;
    int stream_end_rc;
};

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond) && !h->cerr)                                                                   \
            h->cerr = __LINE__;                                                                    \
    } while (0)

static void harness_maybe_end(struct harness *h)
{
    if (h->closed && h->client_done && !uv_is_closing((uv_handle_t *)&h->guard))
        uv_close((uv_handle_t *)&h->guard, NULL);
}

static void on_server_closed(struct http_server *s)
{
    struct harness *h = (struct harness *)((char *)s - offsetof(struct harness, srv));
    h->closed = true;
    h->closed_at = now_ms();
    harness_maybe_end(h);
}

static void harness_shutdown(struct harness *h)
{
    if (h->shutdown_called)
        return;
    h->shutdown_called = true;
    h->shutdown_at = now_ms();
    assert_int_equal(http_server_shutdown(&h->srv, h->grace_ms, on_server_closed), 0);
}

static void on_client_done(uv_async_t *a)
{
    struct harness *h = a->data;
    h->client_done = true;
    uv_close((uv_handle_t *)&h->done, NULL);
    harness_shutdown(h);
    harness_maybe_end(h);
}

static void on_guard(uv_timer_t *t)
{
    struct harness *h = t->data;
    h->timed_out = true;
    uv_stop(&h->loop);
}

static void *client_main(void *arg)
{
    struct harness *h = arg;
    h->client(h);
    uv_async_send(&h->done);
    return NULL;
}

static struct harness *harness_new(void)
{
    struct harness *h = calloc(1, sizeof *h);
    assert_non_null(h);
    h->family = AF_INET;
    h->first_again_at = -1;
    return h;
}

static void harness_start(struct harness *h, const struct http_server_config *cfg,
                          http_request_cb on_req, client_fn client)
{
    assert_int_equal(uv_loop_init(&h->loop), 0);
    assert_int_equal(http_server_init(&h->srv, &h->loop, cfg, on_req, h), 0);
    assert_int_equal(http_server_listen(&h->srv), 0);
    h->port = http_server_port(&h->srv);
    assert_true(h->port > 0);
    assert_int_equal(uv_async_init(&h->loop, &h->done, on_client_done), 0);
    h->done.data = h;
    assert_int_equal(uv_timer_init(&h->loop, &h->guard), 0);
    h->guard.data = h;
    assert_int_equal(uv_timer_start(&h->guard, on_guard, GUARD_MS, 0), 0);
    h->client = client;
    assert_int_equal(pthread_create(&h->thread, NULL, client_main, h), 0);
}

static void harness_finish(struct harness *h)
{
    uv_run(&h->loop, UV_RUN_DEFAULT);
    pthread_join(h->thread, NULL);
    assert_false(h->timed_out);
    assert_true(h->closed);
    assert_int_equal(h->srv.conn_count, 0);
    assert_int_equal(uv_loop_close(&h->loop), 0);
    assert_int_equal(h->cerr, 0);
}

static void harness_free(struct harness *h)
{
    for (size_t i = 0; i < 6; i++)
        resp_free(&h->r[i]);
    free(h);
}

static void job_close_cb(uv_handle_t *t)
{
    ts_free(t->data);
}

static struct job *job_new(struct harness *h, struct http_request *req)
{
    struct job *j = ts_calloc(1, sizeof *j);
    assert_non_null(j);
    j->h = h;
    j->req = req;
    assert_int_equal(uv_timer_init(&h->loop, &j->timer), 0);
    j->timer.data = j;
    return j;
}

static void job_done(struct job *j)
{
    uv_close((uv_handle_t *)&j->timer, job_close_cb);
}

/* ------------------------------------------------------------- handlers */

static void record(struct harness *h, struct http_request *req)
{
    if (h->nreq < 8) {
        snprintf(h->paths[h->nreq], sizeof h->paths[0], "%s", req->path);
        if (req->remote.ss_family == AF_INET6)
            h->remote_port[h->nreq] = ntohs(((struct sockaddr_in6 *)&req->remote)->sin6_port);
        else
            h->remote_port[h->nreq] = ntohs(((struct sockaddr_in *)&req->remote)->sin_port);
    }
    h->remote_family = req->remote.ss_family;
    h->nreq++;
}

static void echo(struct http_request *req)
{
    char out[2048];
    const char *ua = http_request_header(req, "user-agent");
    const char *ct = http_request_header(req, "CONTENT-TYPE");
    int n = snprintf(out, sizeof out, "%s %s ?%s ua=%s ct=%s len=%zu body=%s", req->method,
                     req->path, req->query, ua ? ua : "-", ct ? ct : "-", req->body_len, req->body);
    assert_int_equal(http_respond(req, 200, "text/plain", "X-Test: yes\r\n", out, (size_t)n), 0);
}

static void echo_handler(struct http_request *req, void *ctx)
{
    record(ctx, req);
    echo(req);
}

/* ---------------------------------------------------------- keep-alive GET */

static void client_keepalive(struct harness *h)
{
    struct reader *r = calloc(1, sizeof *r);
    r->fd = client_connect(h->port, h->family);
    CHECK(r->fd >= 0);
    CHECK(
        send_str(r->fd, "GET /a/b?x=1&y=2 HTTP/1.1\r\nHost: t\r\nUser-Agent:  ts-test  \r\n\r\n"));
    CHECK(read_response(r, &h->r[0], false) == 0);
    CHECK(send_str(r->fd, "GET /second HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(read_response(r, &h->r[1], false) == 0);
    CHECK(send_str(r->fd, "GET /third HTTP/1.0\r\n\r\n"));
    CHECK(read_response(r, &h->r[2], false) == 0);
    h->eof_after[2] = reader_expect_eof(r);
    close(r->fd);
    free(r);
}

static void test_keepalive_get(void **state)
{
    struct harness *h = harness_new();
    harness_start(h, NULL, echo_handler, client_keepalive);
    harness_finish(h);
    assert_int_equal(h->nreq, 3);
    assert_int_equal(h->r[0].status, 200);
    assert_string_equal(h->r[0].body, "GET /a/b ?x=1&y=2 ua=ts-test ct=- len=0 body=");
    assert_true(head_has(&h->r[0], "\r\nX-Test: yes\r\n"));
    assert_true(head_has(&h->r[0], "\r\nContent-Type: text/plain\r\n"));
    assert_true(head_has(&h->r[0], "HTTP/1.1 200 OK\r\n"));
    assert_false(head_has(&h->r[0], "Connection:"));
    assert_string_equal(h->r[1].body, "GET /second ? ua=- ct=- len=0 body=");
    /* the same connection served both */
    assert_int_equal(h->remote_port[0], h->remote_port[1]);
    assert_int_equal(h->remote_family, AF_INET);
    /* HTTP/1.0 without keep-alive: Connection: close, then EOF */
    assert_true(head_has(&h->r[2], "\r\nConnection: close\r\n"));
    assert_true(h->eof_after[2]);
    assert_int_equal(h->srv.requests, 3);
    harness_free(h);
}

/* ----------------------------------------------------------- POST bodies */

static void client_post(struct harness *h)
{
    struct reader *r = calloc(1, sizeof *r);
    r->fd = client_connect(h->port, h->family);
    CHECK(r->fd >= 0);
    CHECK(send_str(r->fd, "POST /p HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                          "Content-Length: 11\r\n\r\nhello world"));
    CHECK(read_response(r, &h->r[0], false) == 0);
    CHECK(send_str(r->fd, "POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"));
    CHECK(read_response(r, &h->r[1], false) == 0);
    /* Expect: 100-continue is answered before the body is sent */
    CHECK(send_str(r->fd, "POST /e HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
                          "Content-Length: 3\r\n\r\n"));
    CHECK(read_response(r, &h->r[2], false) == 0);
    CHECK(send_str(r->fd, "abc"));
    CHECK(read_response(r, &h->r[3], false) == 0);
    close(r->fd);
    free(r);
}

static void test_post_bodies(void **state)
{
    struct harness *h = harness_new();
    harness_start(h, NULL, echo_handler, client_post);
    harness_finish(h);
    assert_int_equal(h->r[0].status, 200);
    assert_string_equal(h->r[0].body, "POST /p ? ua=- ct=application/json len=11 body=hello world");
    assert_string_equal(h->r[1].body, "POST /c ? ua=- ct=- len=11 body=hello world");
    assert_int_equal(h->r[2].status, 100);
    assert_int_equal(h->r[3].status, 200);
    assert_string_equal(h->r[3].body, "POST /e ? ua=- ct=- len=3 body=abc");
    assert_int_equal(h->remote_port[0], h->remote_port[2]);
    harness_free(h);
}

/* ------------------------------------------------------------ pipelining */

static void slow_timer_cb(uv_timer_t *t)
{
    struct job *j = t->data;
    j->h->slow_done = true;
    assert_int_equal(http_respond(j->req, 200, "text/plain", NULL, "slow", 4), 0);
    job_done(j);
}

static void pipeline_handler(struct http_request *req, void *ctx)
{
    struct harness *h = ctx;
    record(h, req);
    if (strcmp(req->path, "/slow") == 0) {
        struct job *j = job_new(h, req);
        assert_int_equal(uv_timer_start(&j->timer, slow_timer_cb, 50, 0), 0);
        return;
    }
    h->slow_done_before_fast = h->slow_done;
    assert_int_equal(http_respond(req, 200, "text/plain", NULL, "fast", 4), 0);
}

static void client_pipeline(struct harness *h)
{
    struct reader *r = calloc(1, sizeof *r);
    r->fd = client_connect(h->port, h->family);
    CHECK(r->fd >= 0);
    CHECK(send_str(r->fd, "GET /slow HTTP/1.1\r\nHost: t\r\n\r\n"
                          "GET /fast HTTP/1.1\r\nHost: t\r\n\r\n"
                          "GET /fast2 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"));
    CHECK(read_response(r, &h->r[0], false) == 0);
    CHECK(read_response(r, &h->r[1], false) == 0);
    CHECK(read_response(r, &h->r[2], false) == 0);
    h->eof_after[2] = reader_expect_eof(r);
    close(r->fd);
    free(r);
}

static void test_pipelined(void **state)
{
    struct harness *h = harness_new();
    harness_start(h, NULL, pipeline_handler, client_pipeline);
    harness_finish(h);
    assert_int_equal(h->nreq, 3);
    assert_string_equal(h->paths[0], "/slow");
    assert_string_equal(h->paths[1], "/fast");
    assert_string_equal(h->paths[2], "/fast2");
    assert_true(h->slow_done_before_fast);
    assert_string_equal(h->r[0].body, "slow");
    assert_string_equal(h->r[1].body, "fast");
    assert_string_equal(h->r[2].body, "fast");
    assert_true(head_has(&h->r[2], "\r\nConnection: close\r\n"));
    assert_true(h->eof_after[2]);
    harness_free(h);
}

/* ------------------------------------------------------------- streaming */

static void stream_tick(uv_timer_t *t)
{
    struct job *j = t->data;
    char ev[32];
    int n = snprintf(ev, sizeof ev, "data: %d\n\n", j->n);
    if (j->n == 2) {
        uv_buf_t b[2] = {uv_buf_init("data: ", 6), uv_buf_init("two\n\n", 5)};
        assert_int_equal(http_stream_writev(j->req, b, 2), 0);
    } else {
        assert_int_equal(http_stream_write(j->req, ev, (size_t)n), 0);
    }
    assert_int_equal(http_stream_write(j->req, "", 0), 0); /* no empty chunk */
    if (++j->n == 5) {
        assert_int_equal(http_stream_end(j->req), 0);
        uv_timer_stop(&j->timer);
        job_done(j);
    }
}

static void stream_handler(struct http_request *req, void *ctx)
{
    struct harness *h = ctx;
    record(h, req);
    if (strcmp(req->path, "/stream") != 0) {
        echo(req);
        return;
    }
    assert_int_equal(http_stream_write(req, "x", 1), -EINVAL); /* not begun */
    assert_int_equal(
        http_stream_begin(req, 200, "text/event-stream", "Cache-Control: no-cache\r\n"), 0);
    assert_int_equal(http_stream_begin(req, 200, NULL, NULL), -EINVAL);
    struct job *j = job_new(h, req);
    assert_int_equal(uv_timer_start(&j->timer, stream_tick, 10, 10), 0);
}

static void client_stream(struct harness *h)
{
    struct reader *r = calloc(1, sizeof *r);
    r->fd = client_connect(h->port, h->family);
    CHECK(r->fd >= 0);
    CHECK(send_str(r->fd, "GET /stream HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(read_response(r, &h->r[0], false) == 0);
    CHECK(send_str(r->fd, "GET /after HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(read_response(r, &h->r[1], false) == 0);
    /* HTTP/1.0: no chunked encoding, body until close */
    CHECK(send_str(r->fd, "GET /stream HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    CHECK(read_response(r, &h->r[2], false) == 0);
    close(r->fd);
    free(r);
}

static void test_stream_chunks(void **state)
{
    struct harness *h = harness_new();
    harness_start(h, NULL, stream_handler, client_stream);
    harness_finish(h);
    struct resp *o = &h->r[0];
    assert_int_equal(o->status, 200);
    assert_true(o->complete);
    assert_true(head_has(o, "\r\nTransfer-Encoding: chunked\r\n"));
    assert_true(head_has(o, "\r\nContent-Type: text/event-stream\r\n"));
    assert_true(head_has(o, "\r\nCache-Control: no-cache\r\n"));
    assert_string_equal(o->body, "data: 0\n\ndata: 1\n\ndata: two\n\ndata: 3\n\ndata: 4\n\n");
    assert_int_equal(o->chunks, 5);
    assert_int_equal(o->chunk_len[0], 9);
    assert_int_equal(o->chunk_len[2], 11); /* the writev is one chunk */
    assert_string_equal(h->r[1].body, "GET /after ? ua=- ct=- len=0 body=");
    assert_int_equal(h->remote_port[0], h->remote_port[1]);
    assert_false(head_has(&h->r[2], "Transfer-Encoding"));
    assert_true(head_has(&h->r[2], "\r\nConnection: close\r\n"));
    assert_true(h->r[2].complete);
    assert_string_equal(h->r[2].body, "data: 0\n\ndata: 1\n\ndata: two\n\ndata: 3\n\ndata: 4\n\n");
    harness_free(h);
}

/* ---------------------------------------------------------- backpressure */

#define BP_HWM   (64 * 1024)
#define BP_CHUNK (16 * 1024)

static void bp_produce(struct http_request *req)
{
    struct harness *h = req->user;
    static char block[BP_CHUNK];
    memset(block, 'z', sizeof block);
    struct http_conn *c = hs_conn_of_req(req);
    for (int i = 0; i < 100000; i++) {
        size_t before = c->queued;
        int rc = http_stream_write(req, block, sizeof block);
        h->produced += sizeof block;
        if (h->produced > (256u << 20)) {
            h->first_again_at = -2; /* never blocked: fail */
            assert_int_equal(http_stream_end(req), 0);
            return;
        }
        if (rc == TS_AGAIN) {
            if (h->first_again_at == -1) {
                h->first_again_at = i;
                h->queued_before_again = before;
                h->queued_at_again = c->queued;
            }
            return;
        }
        assert_int_equal(rc, 0);
    }
}

static void bp_drain(struct http_request *req)
{
    struct harness *h = req->user;
    uint64_t t = now_ms();
    h->drains++;
    if (atomic_load(&h->reading)) {
        if (!h->first_drain_after_read)
            h->first_drain_after_read = t;
        h->stream_end_rc = http_stream_end(req);
        return;
    }
    h->last_drain_before_read = t;
    bp_produce(req);
}

static void bp_handler(struct http_request *req, void *ctx)
{
    struct harness *h = ctx;
    req->user = h;
    http_request_on_drain(req, bp_drain);
    assert_int_equal(http_stream_begin(req, 200, "application/octet-stream", NULL), 0);
    h->last_drain_before_read = now_ms();
    bp_produce(req);
}

static void client_backpressure(struct harness *h)
{
    struct reader *r = calloc(1, sizeof *r);
    r->fd = client_connect_buf(h->port, AF_INET, 8192);
    CHECK(r->fd >= 0);
    CHECK(send_str(r->fd, "GET /bp HTTP/1.1\r\nHost: t\r\n\r\n"));
    sleep_ms(700);
    atomic_store(&h->read_start_ms, now_ms());
    atomic_store(&h->reading, 1);
    CHECK(read_response(r, &h->r[0], false) == 0);
    close(r->fd);
    free(r);
}

static void test_backpressure(void **state)
{
    struct harness *h = harness_new();
    struct http_server_config cfg = {.write_high_water = BP_HWM};
    harness_start(h, &cfg, bp_handler, client_backpressure);
    harness_finish(h);
    /* The first TS_AGAIN comes with the write that takes the queue over the mark. */
    assert_true(h->first_again_at >= 0);
    assert_true(h->queued_before_again <= BP_HWM);
    assert_true(h->queued_at_again > BP_HWM);
    /* writes go to the kernel at once while its socket buffer takes them, so the
     * queue passes the mark (head + 4 x (16 KiB + 8) > 64 KiB) at the 4th
     * write at the earliest, later by what the socket buffers held */
    assert_true(h->first_again_at >= 3);
    /* While the client did not read, no drain came for a long time... */
    uint64_t rs = atomic_load(&h->read_start_ms);
    assert_true(h->last_drain_before_read + 300 < rs);
    /* ...and once it read, one came and the stream ended. */
    assert_true(h->first_drain_after_read >= rs);
    assert_int_equal(h->stream_end_rc, 0);
    assert_true(h->r[0].complete);
    assert_int_equal(h->r[0].body_len, h->produced);
    assert_true(h->produced > BP_HWM);
    harness_free(h);
}

/* ------------------------------------------------------------ limits */

static void client_limits(struct harness *h)
{
    struct reader *r = calloc(1, sizeof *r);
    /* 431: one header over 16 KiB */
    r->fd = client_connect(h->port, h->family);
    CHECK(r->fd >= 0);
    size_t big = 20000;
    char *req = malloc(big + 100);
    int n = sprintf(req, "GET / HTTP/1.1\r\nHost: t\r\nX-Big: ");
    memset(req + n, 'a', big);
    memcpy(req + n + big, "\r\n\r\n", 5);
    CHECK(send_str(r->fd, req));
    CHECK(read_response(r, &h->r[0], false) == 0);
    h->eof_after[0] = reader_expect_eof(r);
    close(r->fd);
    /* 431: too many header fields */
    r->len = 0;
    r->fd = client_connect(h->port, h->family);
    n = sprintf(req, "GET / HTTP/1.1\r\n");
    for (int i = 0; i < 101; i++)
        n += sprintf(req + n, "X-%d: v\r\n", i);
    strcpy(req + n, "\r\n");
    CHECK(send_str(r->fd, req));
    CHECK(read_response(r, &h->r[1], false) == 0);
    close(r->fd);
    free(req);
    /* 413: Content-Length over the limit; the body is sent anyway */
    r->len = 0;
    r->fd = client_connect(h->port, h->family);
    char *body = calloc(1, 100000);
    memset(body, 'b', 100000);
    CHECK(send_str(r->fd, "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n"));
    CHECK(send_all(r->fd, body, 100000));
    CHECK(read_response(r, &h->r[2], false) == 0);
    h->eof_after[2] = reader_expect_eof(r);
    close(r->fd);
    /* 413: chunked body counted as it comes */
    r->len = 0;
    r->fd = client_connect(h->port, h->family);
    CHECK(send_str(r->fd, "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"));
    for (int i = 0; i < 3; i++) {
        CHECK(send_str(r->fd, "258\r\n")); /* 600 bytes */
        CHECK(send_all(r->fd, body, 600));
        CHECK(send_str(r->fd, "\r\n"));
    }
    CHECK(read_response(r, &h->r[3], false) == 0);
    close(r->fd);
    /* exactly at the limit passes */
    r->len = 0;
    r->fd = client_connect(h->port, h->family);
    CHECK(send_str(r->fd, "POST /ok HTTP/1.1\r\nHost: t\r\nContent-Length: 1024\r\n\r\n"));
    CHECK(send_all(r->fd, body, 1024));
    CHECK(read_response(r, &h->r[4], false) == 0);
    close(r->fd);
    /* 400: garbage, and a header line without colon */
    r->len = 0;
    r->fd = client_connect(h->port, h->family);
    CHECK(send_str(r->fd, "\x01\x02 garbage\r\n\r\n"));
    CHECK(read_response(r, &h->r[5], false) == 0);
    h->eof_after[5] = reader_expect_eof(r);
    close(r->fd);
    r->len = 0;
    r->fd = client_connect(h->port, h->family);
    CHECK(send_str(r->fd, "GET / HTTP/1.1\r\nBad Header\r\n\r\n"));
    struct resp bad = {0};
    CHECK(read_response(r, &bad, false) == 0);
    CHECK(bad.status == 400);
    resp_free(&bad);
    close(r->fd);
    free(body);
    free(r);
}

static void test_limits(void **state)
{
    struct harness *h = harness_new();
    struct http_server_config cfg = {.max_body_bytes = 1024};
    harness_start(h, &cfg, echo_handler, client_limits);
    harness_finish(h);
    assert_int_equal(h->r[0].status, 431);
    assert_true(head_has(&h->r[0], "\r\nConnection: close\r\n"));
    assert_true(h->eof_after[0]);
    assert_int_equal(h->r[1].status, 431);
    assert_int_equal(h->r[2].status, 413);
    assert_true(h->eof_after[2]);
    assert_int_equal(h->r[3].status, 413);
    assert_int_equal(h->r[4].status, 200);
    assert_int_equal(h->r[5].status, 400);
    assert_true(h->eof_after[5]);
    assert_int_equal(h->nreq, 1); /* only the good request reached the handler */
    harness_free(h);
}

/* --------------------------------------------------------------- timeouts */

/* Trickles header bytes every 100 ms; returns ms from connect to the server's close. */
static long trickle(struct harness *h, struct reader *r, struct resp *o, const char *first,
                    const char *rest, uint64_t t0)
{
    CHECK(send_str(r->fd, first));
    for (int i = 0; i < 40 && rest[i]; i++) {
        struct pollfd p = {r->fd, POLLIN, 0};
        if (poll(&p, 1, 100) > 0)
            break;
        if (!send_all(r->fd, rest + i, 1))
            break;
        h->sent++;
    }
    long dt = (long)(now_ms() - t0);
    CHECK(read_response(r, o, false) == 0);
    return dt;
}

static void client_slowloris(struct harness *h)
{
    struct reader *r = calloc(1, sizeof *r);
    r->fd = client_connect(h->port, h->family);
    CHECK(r->fd >= 0);
    uint64_t t0 = now_ms();
    h->t_client[0] = (uint64_t)trickle(h, r, &h->r[0], "GET / HTTP/1.1\r\nHost: t\r\nX-Slow: ",
                                       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", t0);
    h->eof_after[0] = reader_expect_eof(r);
    close(r->fd);
    /* a later request on a keep-alive connection: the clock starts at its first byte */
    r->len = 0;
    r->fd = client_connect(h->port, h->family);
    CHECK(send_str(r->fd, "GET /one HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(read_response(r, &h->r[1], false) == 0);
    sleep_ms(150);
    t0 = now_ms();
    h->t_client[1] = (uint64_t)trickle(h, r, &h->r[2], "G",
                                       "ET / HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaa", t0);
    close(r->fd);
    /* idle keep-alive connection closed after idle_timeout_ms */
    r->len = 0;
    r->fd = client_connect(h->port, h->family);
    CHECK(send_str(r->fd, "GET /two HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(read_response(r, &h->r[3], false) == 0);
    t0 = now_ms();
    h->eof_after[3] = reader_expect_eof(r);
    h->t_client[2] = now_ms() - t0;
    close(r->fd);
    /* a body that does not complete within body_timeout_ms */
    r->len = 0;
    r->fd = client_connect(h->port, h->family);
    CHECK(send_str(r->fd, "POST /b HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n12345"));
    t0 = now_ms();
    CHECK(read_response(r, &h->r[4], false) == 0);
    h->t_client[3] = now_ms() - t0;
    close(r->fd);
    free(r);
}

static void test_slowloris(void **state)
{
    struct harness *h = harness_new();
    struct http_server_config cfg = {
        .header_timeout_ms = 300, .idle_timeout_ms = 400, .body_timeout_ms = 300};
    harness_start(h, &cfg, echo_handler, client_slowloris);
    harness_finish(h);
    assert_int_equal(h->r[0].status, 408);
    assert_true(h->eof_after[0]);
    assert_true(h->t_client[0] >= 250 && h->t_client[0] <= 1200);
    assert_true(h->sent >= 2);
    assert_int_equal(h->r[1].status, 200);
    assert_int_equal(h->r[2].status, 408);
    /* 300 ms from the first byte, although the connection was idle 150 ms before */
    assert_true(h->t_client[1] >= 250 && h->t_client[1] <= 1200);
    assert_true(h->eof_after[3]);
    assert_true(h->t_client[2] >= 300 && h->t_client[2] <= 1500);
    assert_int_equal(h->r[4].status, 408);
    assert_true(h->t_client[3] >= 250 && h->t_client[3] <= 1200);
    assert_int_equal(h->nreq, 2);
    harness_free(h);
}

/* ------------------------------------------------------ disconnect mid-stream */

static void abort_cb(struct http_request *req)
{
    struct job *j = req->user;
    j->h->aborts++;
    j->h->closed_flag_after_abort = http_request_closed(req);
}

static void abort_tick(uv_timer_t *t)
{
    struct job *j = t->data;
    struct harness *h = j->h;
    if (h->aborts == 0) {
        assert_int_equal(http_stream_write(j->req, "data: tick\n\n", 12), 0);
        if (++j->n > 500) /* 10 s without abort: give up */
            h->rc_write_after_abort = 1;
        else
            return;
    }
    h->rc_write_after_abort = http_stream_write(j->req, "late", 4);
    h->rc_end_after_abort = http_stream_end(j->req);
    uv_timer_stop(&j->timer);
    job_done(j);
}

static void abort_handler(struct http_request *req, void *ctx)
{
    struct harness *h = ctx;
    struct job *j = job_new(h, req);
    req->user = j;
    http_request_on_abort(req, abort_cb);
    assert_int_equal(http_stream_begin(req, 200, "text/event-stream", NULL), 0);
    assert_int_equal(uv_timer_start(&j->timer, abort_tick, 20, 20), 0);
}

static void client_abort(struct harness *h)
{
    struct reader *r = calloc(1, sizeof *r);
    r->fd = client_connect(h->port, h->family);
    CHECK(r->fd >= 0);
    CHECK(send_str(r->fd, "GET /s HTTP/1.1\r\nHost: t\r\n\r\n"));
    while (!memmem(r->buf, r->len, "data: tick", 10))
        if (reader_fill(r) != 0)
            break;
    CHECK(memmem(r->buf, r->len, "data: tick", 10) != NULL);
    close(r->fd);
    free(r);
}

static void test_client_abort(void **state)
{
    struct harness *h = harness_new();
    h->grace_ms = 5000;
    harness_start(h, NULL, abort_handler, client_abort);
    harness_finish(h);
    assert_int_equal(h->aborts, 1);
    assert_true(h->closed_flag_after_abort);
    assert_int_equal(h->rc_write_after_abort, TS_CLOSED);
    assert_int_equal(h->rc_end_after_abort, TS_CLOSED);
    harness_free(h);
}

/* --------------------------------------------------------------- shutdown */

static void shutdown_tick(uv_timer_t *t)
{
    struct job *j = t->data;
    struct harness *h = j->h;
    char ev[32];
    int n = snprintf(ev, sizeof ev, "data: %d\n\n", j->n);
    assert_int_equal(http_stream_write(j->req, ev, (size_t)n), 0);
    if (j->n == 0)
        harness_shutdown(h); /* in flight: it must be allowed to finish */
    if (++j->n == 5) {
        h->stream_end_rc = http_stream_end(j->req);
        uv_timer_stop(&j->timer);
        job_done(j);
    }
}

static void shutdown_handler(struct http_request *req, void *ctx)
{
    struct harness *h = ctx;
    record(h, req);
    if (strcmp(req->path, "/long") != 0) {
        echo(req);
        return;
    }
    struct job *j = job_new(h, req);
    req->user = j;
    http_request_on_abort(req, abort_cb);
    assert_int_equal(http_stream_begin(req, 200, "text/event-stream", NULL), 0);
    assert_int_equal(uv_timer_start(&j->timer, shutdown_tick, 40, 40), 0);
}

static void client_shutdown(struct harness *h)
{
    struct reader *a = calloc(1, sizeof *a);
    struct reader *b = calloc(1, sizeof *b);
    b->fd = client_connect(h->port, h->family);
    CHECK(b->fd >= 0);
    CHECK(send_str(b->fd, "GET /idle HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(read_response(b, &h->r[1], false) == 0);
    a->fd = client_connect(h->port, h->family);
    CHECK(a->fd >= 0);
    CHECK(send_str(a->fd, "GET /long HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(read_response(a, &h->r[0], false) == 0);
    h->eof_after[0] = reader_expect_eof(a);
    /* by now the idle keep-alive connection was closed by the shutdown */
    struct pollfd p = {b->fd, POLLIN, 0};
    CHECK(poll(&p, 1, 0) == 1);
    h->eof_after[1] = reader_expect_eof(b);
    /* and nobody is listening any more */
    int fd = client_connect(h->port, h->family);
    h->t_client[0] = fd < 0;
    if (fd >= 0)
        close(fd);
    close(a->fd);
    close(b->fd);
    free(a);
    free(b);
}

static void test_shutdown_grace(void **state)
{
    struct harness *h = harness_new();
    h->grace_ms = 3000;
    harness_start(h, NULL, shutdown_handler, client_shutdown);
    harness_finish(h);
    assert_true(h->shutdown_called);
    assert_int_equal(h->aborts, 0);
    assert_int_equal(h->stream_end_rc, 0);
    assert_true(h->r[0].complete);
    assert_int_equal(h->r[0].chunks, 5);
    assert_true(h->eof_after[0]); /* closed after the response */
    assert_true(h->eof_after[1]);
    assert_true(h->t_client[0]); /* connect refused */
    assert_true(h->closed_at - h->shutdown_at < 3000);
    assert_true(h->closed_at - h->shutdown_at >= 100); /* 4 more ticks of 40 ms */
    harness_free(h);
}

static void forever_abort(struct http_request *req)
{
    struct harness *h = req->user;
    h->aborts++;
    h->rc_end_after_abort = http_stream_end(req);
}

static void forever_handler(struct http_request *req, void *ctx)
{
    struct harness *h = ctx;
    req->user = h;
    http_request_on_abort(req, forever_abort);
    assert_int_equal(http_stream_begin(req, 200, "text/event-stream", NULL), 0);
    assert_int_equal(http_stream_write(req, "data: 0\n\n", 9), 0);
    h->grace_ms = 100;
    harness_shutdown(h);
}

static void client_forever(struct harness *h)
{
    struct reader *r = calloc(1, sizeof *r);
    r->fd = client_connect(h->port, h->family);
    CHECK(r->fd >= 0);
    CHECK(send_str(r->fd, "GET /forever HTTP/1.1\r\nHost: t\r\n\r\n"));
    h->t_client[0] = read_response(r, &h->r[0], false) != 0; /* cut: incomplete */
    close(r->fd);
    free(r);
}

static void test_shutdown_cuts_after_grace(void **state)
{
    struct harness *h = harness_new();
    harness_start(h, NULL, forever_handler, client_forever);
    harness_finish(h);
    assert_int_equal(h->aborts, 1);
    assert_int_equal(h->rc_end_after_abort, TS_CLOSED);
    assert_true(h->t_client[0]);
    assert_false(h->r[0].complete);
    assert_true(h->closed_at - h->shutdown_at >= 90);
    assert_true(h->closed_at - h->shutdown_at < 2000);
    harness_free(h);
}

/* ------------------------------------------------------ IPv6, max connections */

static void client_ipv6(struct harness *h)
{
    struct reader *r = calloc(1, sizeof *r);
    r->fd = client_connect(h->port, AF_INET6);
    CHECK(r->fd >= 0);
    CHECK(send_str(r->fd, "GET /v6 HTTP/1.1\r\nHost: [::1]\r\n\r\n"));
    CHECK(read_response(r, &h->r[0], false) == 0);
    close(r->fd);
    free(r);
}

static void test_ipv6(void **state)
{
    uv_loop_t loop;
    struct http_server probe;
    struct http_server_config cfg = {.host = "::1"};
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(http_server_init(&probe, &loop, &cfg, echo_handler, NULL), 0);
    int rc = http_server_listen(&probe);
    assert_int_equal(http_server_shutdown(&probe, 0, NULL), 0);
    assert_int_equal(http_server_shutdown(&probe, 0, NULL), -EINVAL);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    if (rc != 0)
        skip(); /* no IPv6 loopback here */

    struct harness *h = harness_new();
    h->family = AF_INET6;
    harness_start(h, &cfg, echo_handler, client_ipv6);
    harness_finish(h);
    assert_int_equal(h->r[0].status, 200);
    assert_int_equal(h->remote_family, AF_INET6);
    harness_free(h);
}

static void client_maxconn(struct harness *h)
{
    struct reader *a = calloc(1, sizeof *a);
    struct reader *b = calloc(1, sizeof *b);
    a->fd = client_connect(h->port, h->family);
    CHECK(send_str(a->fd, "GET /a HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(read_response(a, &h->r[0], false) == 0);
    b->fd = client_connect(h->port, h->family);
    CHECK(b->fd >= 0);
    h->eof_after[1] = reader_expect_eof(b);
    CHECK(send_str(a->fd, "GET /a2 HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(read_response(a, &h->r[2], false) == 0);
    close(a->fd);
    close(b->fd);
    free(a);
    free(b);
}

static void test_max_connections(void **state)
{
    struct harness *h = harness_new();
    struct http_server_config cfg = {.max_connections = 1};
    harness_start(h, &cfg, echo_handler, client_maxconn);
    harness_finish(h);
    assert_int_equal(h->r[0].status, 200);
    assert_true(h->eof_after[1]);
    assert_int_equal(h->r[2].status, 200);
    assert_int_equal(h->srv.conns_rejected, 1);
    assert_int_equal(h->srv.conns_accepted, 2);
    harness_free(h);
}

/* ------------------------------------------------- fake connection, exact bytes */

struct fake {
    uv_loop_t loop;
    struct http_server srv;
    struct buf out;
    struct http_conn *c;
    bool closed;
    struct http_request *held;
};

static void fake_handler(struct http_request *req, void *ctx)
{
    struct fake *f = ctx;
    char body[64];
    if (strcmp(req->path, "/204") == 0) {
        assert_int_equal(http_respond(req, 204, NULL, NULL, "ignored", 7), 0);
    } else if (strcmp(req->path, "/hold") == 0) {
        f->held = req;
    } else if (strcmp(req->path, "/bye") == 0) {
        assert_int_equal(http_respond(req, 404, "text/plain", "Connection: close\r\n", "no", 2), 0);
    } else {
        int n = snprintf(body, sizeof body, "hi %s", req->path);
        assert_int_equal(http_respond(req, 200, "text/plain", NULL, body, (size_t)n), 0);
    }
}

static void fake_closed(struct http_server *s)
{
    struct fake *f = (struct fake *)((char *)s - offsetof(struct fake, srv));
    f->closed = true;
}

static void fake_start_cfg(struct fake *f, const struct http_server_config *cfg,
                           http_request_cb handler)
{
    memset(f, 0, sizeof *f);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(http_server_init(&f->srv, &f->loop, cfg, handler, f), 0);
    buf_init(&f->out, 1 << 20);
    f->c = hs_conn_new(&f->srv);
    assert_non_null(f->c);
    f->c->fake = true;
    f->c->fake_out = &f->out;
}

static void fake_start(struct fake *f)
{
    fake_start_cfg(f, NULL, fake_handler);
}

static void fake_feed(struct fake *f, const char *s)
{
    hs_conn_on_data(f->c, s, strlen(s));
    for (int i = 0; i < 100 && uv_is_active((uv_handle_t *)&f->srv.idle); i++)
        uv_run(&f->loop, UV_RUN_NOWAIT);
}

static void fake_finish(struct fake *f)
{
    assert_int_equal(http_server_shutdown(&f->srv, 0, fake_closed), 0);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_true(f->closed);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    buf_release(&f->out);
}

#define RESP_HEAD "HTTP/1.1 200 OK\r\nServer: tokenstorm\r\nContent-Type: text/plain\r\n"

static void test_fake_exact_output(void **state)
{
    struct fake f;
    fake_start(&f);
    fake_feed(&f, "GET /a HTTP/1.1\r\nHost: x\r\n\r\nHEAD /b HTTP/1.1\r\n\r\n"
                  "GET /k HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /204 HTTP/1.1\r\n\r\n"
                  "POST /e HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
    assert_string_equal(buf_cstr(&f.out),
                        RESP_HEAD "Content-Length: 5\r\n\r\nhi /a" /* */
                        RESP_HEAD "Content-Length: 5\r\n\r\n"      /* HEAD: no body */
                        RESP_HEAD "Content-Length: 5\r\nConnection: keep-alive\r\n\r\nhi /k"
                                  "HTTP/1.1 204 No Content\r\nServer: tokenstorm\r\n\r\n"
                                  "HTTP/1.1 100 Continue\r\n\r\n");
    buf_reset(&f.out);
    fake_feed(&f, "abc");
    assert_string_equal(buf_cstr(&f.out), RESP_HEAD "Content-Length: 5\r\n\r\nhi /e");
    buf_reset(&f.out);
    /* the handler closes with Connection: close; what follows is dropped */
    fake_feed(&f, "GET /bye HTTP/1.1\r\n\r\nGET /never HTTP/1.1\r\n\r\n");
    assert_string_equal(buf_cstr(&f.out), "HTTP/1.1 404 Not Found\r\nServer: tokenstorm\r\n"
                                          "Content-Type: text/plain\r\nConnection: close\r\n"
                                          "Content-Length: 2\r\n\r\nno");
    assert_int_equal(f.srv.conn_count, 0); /* closed and freed */
    assert_int_equal(f.srv.requests, 6);
    fake_finish(&f);
}

static void test_fake_errors_and_held_request(void **state)
{
    struct fake f;
    /* a request target alone over the limit: 414 */
    fake_start(&f);
    char *big = malloc(20000);
    memcpy(big, "GET /", 5);
    memset(big + 5, 'u', 19000);
    strcpy(big + 19005, " HTTP/1.1\r\n\r\n");
    fake_feed(&f, big);
    free(big);
    assert_non_null(strstr(buf_cstr(&f.out), "HTTP/1.1 414 URI Too Long\r\n"));
    fake_finish(&f);

    /* a held request is aborted by shutdown and released by the handler */
    fake_start(&f);
    fake_feed(&f, "GET /hold HTTP/1.1\r\n\r\nGET /next HTTP/1.1\r\n\r\n");
    assert_non_null(f.held);
    assert_string_equal(buf_cstr(&f.out), "");
    assert_int_equal(f.srv.requests, 1); /* /next waits for /hold */
    assert_int_equal(http_server_shutdown(&f.srv, 0, fake_closed), 0);
    /* grace 0: the held request is cut; nothing is active until the handler releases it */
    assert_int_equal(uv_run(&f.loop, UV_RUN_NOWAIT), 0);
    assert_true(http_request_closed(f.held));
    assert_false(f.closed); /* the held request keeps the server open */
    assert_int_equal(http_respond(f.held, 200, NULL, NULL, "x", 1), TS_CLOSED);
    assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
    assert_true(f.closed);
    assert_int_equal(f.srv.requests, 1);
    assert_int_equal(uv_loop_close(&f.loop), 0);
    buf_release(&f.out);
}

static void torture_handler(struct http_request *req, void *ctx)
{
    if (strcmp(req->path, "/b") == 0) {
        if (http_stream_begin(req, 200, "text/plain", NULL) == 0)
            (void)http_stream_write(req, req->body, req->body_len);
        (void)http_stream_end(req);
        return;
    }
    (void)http_respond(req, 200, "text/plain", NULL, req->path, strlen(req->path));
}

static int fake_drains;

static void fake_drain(struct http_request *req)
{
    fake_drains++;
}

static void fake_stream_handler(struct http_request *req, void *ctx)
{
    struct fake *f = ctx;
    f->held = req;
    http_request_on_drain(req, fake_drain);
    assert_int_equal(http_stream_begin(req, 200, NULL, NULL), 0);
}

/* TS_AGAIN over the mark, drain at half of it, cut past max_write_queue. */
static void test_fake_backpressure(void **state)
{
    struct fake f;
    struct http_server_config cfg = {.write_high_water = 1000, .max_write_queue = 3000};
    fake_start_cfg(&f, &cfg, fake_stream_handler);
    f.c->fake_chunk = 100; /* the fake socket takes 100 bytes per loop iteration */
    fake_drains = 0;
    hs_conn_on_data(f.c, "GET / HTTP/1.1\r\n\r\n", 18);
    assert_non_null(f.held);
    char block[400];
    memset(block, 'q', sizeof block);
    /* head (~70 bytes) + 2 x 406 < 1000; the third write crosses the mark */
    assert_int_equal(http_stream_write(f.held, block, sizeof block), 0);
    assert_int_equal(http_stream_write(f.held, block, sizeof block), 0);
    assert_int_equal(http_stream_write(f.held, block, sizeof block), TS_AGAIN);
    size_t q = f.c->queued;
    assert_true(q > 1000 && q < 1400);
    /* drained 100 bytes per iteration: the drain comes once queued <= 500 */
    for (int i = 0; i < 100 && fake_drains == 0; i++)
        uv_run(&f.loop, UV_RUN_NOWAIT);
    assert_int_equal(fake_drains, 1);
    assert_true(f.c->queued <= 500 && f.c->queued > 400);
    assert_int_equal(f.out.len, q - f.c->queued);
    /* ignoring TS_AGAIN until the queue passes max_write_queue cuts the stream */
    int rc = 0;
    for (int i = 0; i < 20 && rc != TS_CLOSED; i++)
        rc = http_stream_write(f.held, block, sizeof block);
    assert_int_equal(rc, TS_CLOSED);
    assert_true(http_request_closed(f.held));
    assert_int_equal(http_stream_end(f.held), TS_CLOSED);
    fake_finish(&f);
    assert_int_equal(fake_drains, 1);
}

/* Every allocation failing in turn: no crash, no leak (ASan checks the latter). */
static void test_fake_alloc_failures(void **state)
{
    for (long n = 0; n < 400; n++) {
        uv_loop_t loop;
        struct http_server s;
        assert_int_equal(uv_loop_init(&loop), 0);
        ts_alloc_fail_after(n);
        int rc = http_server_init(&s, &loop, NULL, torture_handler, NULL);
        if (rc != 0) {
            ts_alloc_fail_after(-1);
            assert_int_equal(rc, -ENOMEM);
            assert_int_equal(uv_loop_close(&loop), 0);
            continue;
        }
        struct fake f = {0};
        f.c = hs_conn_new(&s);
        if (f.c) {
            f.c->fake = true;
            const char *in = "GET /a HTTP/1.1\r\nHost: x\r\nA: b\r\n\r\n"
                             "POST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "3\r\nabc\r\n0\r\n\r\nGET /c HTTP/1.1\r\n\r\n";
            hs_conn_on_data(f.c, in, strlen(in));
            for (int i = 0; i < 50; i++)
                uv_run(&loop, UV_RUN_NOWAIT);
        }
        ts_alloc_fail_after(-1);
        assert_int_equal(http_server_shutdown(&s, 0, NULL), 0);
        assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
        assert_int_equal(s.conn_count, 0);
        assert_int_equal(uv_loop_close(&loop), 0);
    }
}

static void test_reasons_and_sizes(void **state)
{
    assert_string_equal(http_status_reason(200), "OK");
    assert_string_equal(http_status_reason(404), "Not Found");
    assert_string_equal(http_status_reason(431), "Request Header Fields Too Large");
    assert_string_equal(http_status_reason(429), "Too Many Requests");
    assert_string_equal(http_status_reason(799), "Unknown");
    /* keep the fixed per-connection state small (see the header) */
    print_message("sizeof(struct http_conn) = %zu\n", sizeof(struct http_conn));
    assert_true(sizeof(struct http_conn) < 1600);
}

/* ------------------------------------------------------- output shaping */

/* A test shaper: `slice` bytes every `gap_ns`; after `end_at` bytes in total
 * the connection ends with `then`. */
struct tshape {
    uint64_t slice, gap_ns, end_at;
    enum http_shape_then then;
    uint64_t next_at;
    int calls, releases;
};

static uint64_t tshape_allow(void *ctx, uint64_t queued, uint64_t sent, uint64_t now,
                             uint64_t *wake, enum http_shape_then *then)
{
    struct tshape *t = ctx;
    t->calls++;
    uint64_t n = queued - sent;
    if (t->end_at && sent + n >= t->end_at) {
        n = t->end_at - sent;
        *then = t->then;
        return n;
    }
    if (!t->slice || n == 0)
        return n;
    if (now < t->next_at) {
        *wake = t->next_at;
        return 0;
    }
    if (n > t->slice) {
        n = t->slice;
        *wake = now + t->gap_ns;
    }
    t->next_at = now + t->gap_ns;
    return n;
}

static void tshape_release(void *ctx)
{
    struct tshape *t = ctx;
    t->releases++;
}

static struct tshape g_shape;
static uint64_t g_close_delay_ns;
static int g_set_rc[4], g_conn_index[4];

static void shape_handler(struct http_request *req, void *ctx)
{
    struct harness *h = ctx;
    int i = h->nreq < 4 ? h->nreq : 3;
    g_conn_index[i] = (int)req->conn_index;
    struct http_shaper sh = {g_shape.slice || g_shape.end_at ? tshape_allow : NULL,
                             g_close_delay_ns, tshape_release, &g_shape};
    g_set_rc[i] = http_request_set_shaper(req, &sh);
    record(h, req);
    if (strcmp(req->path, "/reset") == 0) {
        assert_int_equal(http_stream_begin(req, 200, "text/plain", NULL), 0);
        assert_int_equal(http_stream_write(req, "hello", 5), 0);
        assert_int_equal(http_request_reset(req), 0);
        return;
    }
    char body[100];
    memset(body, 'x', sizeof body);
    assert_int_equal(http_respond(req, 200, "text/plain", NULL, body, sizeof body), 0);
}

/* Reads until EOF or an error; returns the byte count; *reset: ECONNRESET. */
static size_t read_to_end(int fd, bool *reset, char *out, size_t cap)
{
    size_t total = 0;
    *reset = false;
    for (;;) {
        char b[4096];
        ssize_t n = recv(fd, b, sizeof b, 0);
        if (n < 0) {
            *reset = errno == ECONNRESET;
            return total;
        }
        if (n == 0)
            return total;
        if (out && total + (size_t)n <= cap)
            memcpy(out + total, b, (size_t)n);
        total += (size_t)n;
    }
}

static void client_paced(struct harness *h)
{
    struct reader *r = calloc(1, sizeof *r);
    r->fd = client_connect(h->port, h->family);
    CHECK(r->fd >= 0);
    uint64_t t0 = ts_now_ns();
    CHECK(send_str(r->fd, "GET /a HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(read_response(r, &h->r[0], false) == 0);
    h->t_client[0] = ts_now_ns() - t0;
    CHECK(send_str(r->fd, "GET /b HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"));
    CHECK(read_response(r, &h->r[1], false) == 0);
    h->eof_after[1] = reader_expect_eof(r);
    close(r->fd);
    free(r);
}

/* A shaper paces the output: 100 bytes of body plus a head of ~80 bytes at
 * 40 bytes per 20 ms take at least 4 gaps; it is set once per connection
 * and released once. */
static void test_shaper_paces(void **state)
{
    (void)state;
    memset(&g_shape, 0, sizeof g_shape);
    g_shape.slice = 40;
    g_shape.gap_ns = 20 * TS_NS_PER_MS;
    g_close_delay_ns = 0;
    struct harness *h = harness_new();
    harness_start(h, NULL, shape_handler, client_paced);
    harness_finish(h);
    assert_int_equal(h->nreq, 2);
    assert_int_equal(g_set_rc[0], 0);
    assert_int_equal(g_set_rc[1], -EINVAL); /* one shaper per connection */
    assert_int_equal(g_conn_index[0], 0);
    assert_int_equal(g_conn_index[1], 1);
    assert_int_equal(h->r[0].status, 200);
    assert_int_equal(h->r[0].body_len, 100);
    size_t bytes = strlen(h->r[0].head) + 100;
    uint64_t min_ns = (bytes / 40 - (bytes % 40 ? 0 : 1)) * 20 * TS_NS_PER_MS;
    assert_true(bytes > 160 && bytes < 240);
    print_message("paced %zu bytes in %llu ms (>= %llu)\n", bytes,
                  (unsigned long long)(h->t_client[0] / TS_NS_PER_MS),
                  (unsigned long long)(min_ns / TS_NS_PER_MS));
    assert_true(h->t_client[0] >= min_ns - TS_NS_PER_MS);
    assert_true(h->t_client[0] < 2000 * TS_NS_PER_MS);
    assert_true(h->eof_after[1]);
    assert_int_equal(g_shape.releases, 1);
    assert_true(g_shape.calls >= 5);
    harness_free(h);
}

static void client_end_after(struct harness *h)
{
    int fd = client_connect(h->port, h->family);
    CHECK(fd >= 0);
    CHECK(send_str(fd, "GET /a HTTP/1.1\r\nHost: t\r\n\r\n"));
    bool reset;
    char got[256];
    h->sent = read_to_end(fd, &reset, got, sizeof got);
    h->eof_after[0] = reset;
    h->r[0].status = strncmp(got, "HTTP/1.1 200 OK\r\n", 17) == 0 ? 200 : -1;
    close(fd);
}

/* A shaper ends the connection after exactly 30 bytes: RST or FIN. */
static void test_shaper_ends(void **state)
{
    (void)state;
    enum http_shape_then how[2] = {HTTP_SHAPE_RESET, HTTP_SHAPE_CLOSE};
    for (int k = 0; k < 2; k++) {
        memset(&g_shape, 0, sizeof g_shape);
        g_shape.end_at = 30;
        g_shape.then = how[k];
        g_close_delay_ns = 0;
        struct harness *h = harness_new();
        harness_start(h, NULL, shape_handler, client_end_after);
        harness_finish(h);
        assert_int_equal(h->r[0].status, 200);
        assert_int_equal(h->sent, 30);
        assert_int_equal(h->eof_after[0], k == 0); /* ECONNRESET only for RESET */
        assert_int_equal(g_shape.releases, 1);
        harness_free(h);
    }
}

static void client_reset(struct harness *h)
{
    int fd = client_connect(h->port, h->family);
    CHECK(fd >= 0);
    CHECK(send_str(fd, "GET /reset HTTP/1.1\r\nHost: t\r\n\r\n"));
    bool reset;
    char got[512] = "";
    size_t n = read_to_end(fd, &reset, got, sizeof got - 1);
    got[n < sizeof got ? n : sizeof got - 1] = '\0';
    h->eof_after[0] = reset;
    CHECK(strstr(got, "\r\n\r\n5\r\nhello\r\n") != NULL);
    CHECK(strstr(got, "0\r\n\r\n") == NULL);
    close(fd);
}

/* http_request_reset: the queued bytes go out, then an RST (not a FIN). */
static void test_request_reset(void **state)
{
    (void)state;
    memset(&g_shape, 0, sizeof g_shape);
    g_close_delay_ns = 0;
    struct harness *h = harness_new();
    harness_start(h, NULL, shape_handler, client_reset);
    harness_finish(h);
    assert_true(h->eof_after[0]);
    assert_int_equal(g_shape.releases, 1);
    harness_free(h);
}

static void client_slow_close(struct harness *h)
{
    struct reader *r = calloc(1, sizeof *r);
    r->fd = client_connect(h->port, h->family);
    CHECK(r->fd >= 0);
    CHECK(send_str(r->fd, "GET /a HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"));
    CHECK(read_response(r, &h->r[0], false) == 0);
    uint64_t t0 = ts_now_ns();
    h->eof_after[0] = reader_expect_eof(r);
    h->t_client[0] = ts_now_ns() - t0;
    close(r->fd);
    free(r);
}

/* Slow close: the FIN after a "Connection: close" response waits 200 ms. */
static void test_shaper_slow_close(void **state)
{
    (void)state;
    memset(&g_shape, 0, sizeof g_shape);
    g_close_delay_ns = 200 * TS_NS_PER_MS;
    struct harness *h = harness_new();
    harness_start(h, NULL, shape_handler, client_slow_close);
    harness_finish(h);
    g_close_delay_ns = 0;
    assert_int_equal(h->r[0].body_len, 100);
    assert_true(h->eof_after[0]);
    print_message("FIN after %llu ms\n", (unsigned long long)(h->t_client[0] / TS_NS_PER_MS));
    assert_true(h->t_client[0] >= 190 * TS_NS_PER_MS);
    assert_true(h->t_client[0] < 2000 * TS_NS_PER_MS);
    assert_int_equal(g_shape.releases, 1);
    harness_free(h);
}

int main(void)
{
    /* as the program does (src/main.c): a peer that closed makes write(2) fail
     * with EPIPE instead of killing the process */
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reasons_and_sizes),
        cmocka_unit_test(test_fake_exact_output),
        cmocka_unit_test(test_fake_errors_and_held_request),
        cmocka_unit_test(test_fake_backpressure),
        cmocka_unit_test(test_fake_alloc_failures),
        cmocka_unit_test(test_keepalive_get),
        cmocka_unit_test(test_post_bodies),
        cmocka_unit_test(test_pipelined),
        cmocka_unit_test(test_stream_chunks),
        cmocka_unit_test(test_backpressure),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_slowloris),
        cmocka_unit_test(test_client_abort),
        cmocka_unit_test(test_shutdown_grace),
        cmocka_unit_test(test_shutdown_cuts_after_grace),
        cmocka_unit_test(test_ipv6),
        cmocka_unit_test(test_max_connections),
        cmocka_unit_test(test_shaper_paces),
        cmocka_unit_test(test_shaper_ends),
        cmocka_unit_test(test_request_reset),
        cmocka_unit_test(test_shaper_slow_close),
    };
    return cmocka_run_group_tests_name("http_server", tests, NULL, NULL);
}
