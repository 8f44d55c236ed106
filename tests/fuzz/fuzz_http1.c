/*
 * fuzz_http1 - arbitrary bytes as a server's answer to the client's own
 * HTTP/1.1 engine (net/http1.c).
 *
 * A server on 127.0.0.1 (same loop) reads each request and writes the input
 * back as the response, in two writes split where the first byte says, then
 * closes the connection. The first byte also picks GET or HEAD and whether
 * the call runs with a send shaper (one byte of the request per write).
 * Checked: no crash or leak, on_done exactly once, the body bytes handed
 * over add up to the result's count, callbacks in order, and the client
 * closes with every handle freed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "net/http_client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uv_loop_t loop;
static uv_tcp_t listener;
static int port;
static bool ready;

/* the input being served */
static const uint8_t *in_data;
static size_t in_size, in_split;

struct fz_conn {
    uv_tcp_t tcp;
    char buf[4096];
    bool answered;
};

struct fz_write {
    uv_write_t req;
    struct fz_conn *conn;
    bool last;
    char data[]; /* a copy: the write may end after the input is gone */
};

static int done_calls, header_calls;
static uint64_t body_bytes;
static bool client_closed, saw_body_before_headers;

static void conn_closed(uv_handle_t *h)
{
    free(h->data);
}

static void conn_written(uv_write_t *w, int status)
{
    struct fz_write *fw = (struct fz_write *)w;
    (void)status;
    if (fw->last && !uv_is_closing((uv_handle_t *)&fw->conn->tcp))
        uv_close((uv_handle_t *)&fw->conn->tcp, conn_closed);
    free(fw);
}

static void conn_send(struct fz_conn *c, const uint8_t *p, size_t n, bool last)
{
    struct fz_write *fw = calloc(1, sizeof(*fw) + n + 1);
    if (!fw)
        abort();
    fw->conn = c;
    fw->last = last;
    memcpy(fw->data, p, n);
    uv_buf_t b = uv_buf_init(fw->data, (unsigned)n);
    if (uv_write(&fw->req, (uv_stream_t *)&c->tcp, &b, 1, conn_written) != 0) {
        free(fw);
        if (!uv_is_closing((uv_handle_t *)&c->tcp))
            uv_close((uv_handle_t *)&c->tcp, conn_closed);
    }
}

static void conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    struct fz_conn *c = h->data;
    (void)suggested;
    *b = uv_buf_init(c->buf, sizeof(c->buf));
}

static void conn_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct fz_conn *c = s->data;
    (void)b;
    if (n < 0) {
        if (!uv_is_closing((uv_handle_t *)s))
            uv_close((uv_handle_t *)s, conn_closed);
        return;
    }
    if (n == 0 || c->answered)
        return;
    c->answered = true; /* the first bytes of the request: answer */
    conn_send(c, in_data, in_split, false);
    conn_send(c, in_data + in_split, in_size - in_split, true);
}

static void on_connection(uv_stream_t *l, int status)
{
    if (status < 0)
        return;
    struct fz_conn *c = calloc(1, sizeof(*c));
    if (!c)
        abort();
    uv_tcp_init(&loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(l, (uv_stream_t *)&c->tcp) != 0 ||
        uv_read_start((uv_stream_t *)&c->tcp, conn_alloc, conn_read) != 0)
        uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

static void on_headers(struct http_call *call, long status, void *user)
{
    (void)user;
    header_calls++;
    if (status < 200 || status > 999)
        abort();
    (void)http_call_header(call, "content-type");
}

static int on_body(struct http_call *call, const char *p, size_t n, uint64_t now, void *user)
{
    (void)call, (void)p, (void)now, (void)user;
    if (!header_calls)
        saw_body_before_headers = true;
    body_bytes += n;
    return 0;
}

static int each_header(void *ctx, const char *name, const char *value)
{
    (void)ctx;
    if (!name || !value)
        abort();
    return 0;
}

static void on_done(struct http_call *call, const struct http_call_result *res, void *user)
{
    (void)user;
    done_calls++;
    if (res->bytes != body_bytes || !res->error_text)
        abort();
    if (res->error == HTTP_CALL_OK && res->status == 0)
        abort();
    (void)http_call_headers_each(call, each_header, NULL);
}

static void on_closed(struct http_client *c, void *arg)
{
    (void)c, (void)arg;
    client_closed = true;
}

static uint64_t one_byte(void *ctx, uint64_t queued, uint64_t sent, uint64_t now, uint64_t *wake,
                         enum http_shape_then *then)
{
    (void)ctx, (void)queued, (void)sent, (void)now, (void)wake, (void)then;
    return 64;
}

static void setup(void)
{
    if (uv_loop_init(&loop) != 0 || http_client_global_init() != 0)
        abort();
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", 0, &a);
    uv_tcp_init(&loop, &listener);
    if (uv_tcp_bind(&listener, (const struct sockaddr *)&a, 0) != 0 ||
        uv_listen((uv_stream_t *)&listener, 64, on_connection) != 0)
        abort();
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    uv_tcp_getsockname(&listener, (struct sockaddr *)&ss, &len);
    port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    ready = true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    if (!ready)
        setup();
    uint8_t mode = data[0];
    in_data = data + 1;
    in_size = size - 1;
    in_split = in_size ? (size_t)(mode >> 2) * in_size / 63 : 0;
    if (in_split > in_size)
        in_split = in_size;
    done_calls = header_calls = 0;
    body_bytes = 0;
    client_closed = saw_body_before_headers = false;

    struct http_client c;
    struct http_client_config cfg;
    http_client_config_default(&cfg);
    cfg.rx_timestamps = mode & 2;
    cfg.total_timeout_ms = 2000;
    if (http_client_init(&c, &loop, &cfg) != 0)
        abort();
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/fuzz", port);
    static const char body[300] = {'b'};
    struct http_shaper sh = {one_byte, 0, NULL, NULL};
    struct http_call_spec spec = {
        .url = url,
        .method = (mode & 1) ? "HEAD" : NULL,
        .body = (mode & 1) ? NULL : body,
        .body_len = (mode & 1) ? 0 : sizeof(body),
        .send_shaper = (mode & 2) ? &sh : NULL,
    };
    static const struct http_call_ops ops = {on_headers, on_body, on_done};
    if (http_client_request(&c, &spec, &ops, NULL, NULL) != 0)
        abort();
    while (!done_calls)
        uv_run(&loop, UV_RUN_ONCE);
    http_client_close(&c, on_closed, NULL);
    while (!client_closed)
        uv_run(&loop, UV_RUN_ONCE);
    uv_run(&loop, UV_RUN_NOWAIT); /* the server side's closes */
    if (done_calls != 1 || saw_body_before_headers)
        abort();
    return 0;
}
