/*
 * fuzz_http_server - arbitrary bytes as one connection's input.
 *
 * The connection is a socket-less "fake" one (http_server_conn.c is
 * included to reach it): the bytes go through hs_conn_on_data() in pieces,
 * the server's idle pass runs between pieces, and output is dropped. The
 * first byte picks the piece size, how many bytes the fake socket takes per
 * flush (to exercise backpressure) and whether the client half-closes at
 * the end. The handler holds, streams or answers depending on the path, so
 * every way of finishing a request is driven. Checked: no crash, no leak,
 * and shutdown completes with every connection freed.
 */
#include <stdint.h>
#include <stdlib.h>

#include "net/http_server_conn.c"

enum fz_kind {
    FZ_HOLD = 1,  /* kept until abort */
    FZ_DRAIN = 2, /* streams until TS_AGAIN, more on each drain */
};

static uv_loop_t fz_loop;
static bool fz_loop_ready;
static bool fz_closed;

static uintptr_t fz_kind(struct http_request *req)
{
    return (uintptr_t)req->user & 0xf;
}

static void fz_fill(struct http_request *req)
{
    static const char block[600] = {'x'};
    for (int i = 0; i < 20; i++)
        if (http_stream_write(req, block, sizeof block) != 0)
            return;
}

static void fz_drain(struct http_request *req)
{
    uintptr_t n = (uintptr_t)req->user >> 4;
    if (n >= 3) {
        (void)http_stream_end(req);
        return;
    }
    req->user = (void *)(((n + 1) << 4) | FZ_DRAIN);
    fz_fill(req);
}

static void fz_abort(struct http_request *req)
{
    if (fz_kind(req) == FZ_DRAIN)
        (void)http_stream_end(req);
    else
        (void)http_respond(req, 200, NULL, NULL, NULL, 0);
}

static void fz_handler(struct http_request *req, void *ctx)
{
    const char *p = req->path;
    char c = p[0] == '/' ? p[1] : p[0];
    if (c == 'h') {
        req->user = (void *)FZ_HOLD;
        http_request_on_abort(req, fz_abort);
    } else if (c == 'd') {
        req->user = (void *)FZ_DRAIN;
        http_request_on_abort(req, fz_abort);
        http_request_on_drain(req, fz_drain);
        if (http_stream_begin(req, 200, "text/event-stream", NULL) == 0)
            fz_fill(req);
    } else if (c == 's') {
        uv_buf_t b[2] = {uv_buf_init((char *)req->path, (unsigned)strlen(req->path)),
                         uv_buf_init((char *)req->query, (unsigned)strlen(req->query))};
        if (http_stream_begin(req, 200, "text/plain", "X-A: b\r\n") == 0) {
            (void)http_stream_write(req, req->body, req->body_len);
            (void)http_stream_writev(req, b, 2);
        }
        (void)http_stream_end(req);
    } else {
        static const int codes[] = {200, 204, 304, 404, 500};
        const char *ct = http_request_header(req, "content-type");
        int code = codes[req->header_count % 5];
        (void)http_respond(req, code, ct, c == 'c' ? "Connection: close\r\n" : NULL, req->body,
                           req->body_len);
    }
}

static void fz_on_closed(struct http_server *s)
{
    fz_closed = true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fz_loop_ready) {
        if (uv_loop_init(&fz_loop) != 0)
            abort();
        fz_loop_ready = true;
    }
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    data++;
    size--;

    struct http_server s;
    struct http_server_config cfg = {
        .max_header_bytes = 1024,
        .max_headers = 16,
        .max_body_bytes = 4096,
        .write_high_water = 2048,
    };
    if (http_server_init(&s, &fz_loop, &cfg, fz_handler, NULL) != 0)
        abort();
    struct http_conn *c = hs_conn_new(&s);
    if (!c)
        abort();
    c->fake = true;
    c->fake_chunk = (size_t)(mode & 3) * 700; /* 0: the fake socket takes everything */
    size_t piece = 1 + (size_t)((mode >> 2) & 0x1f) * 13;

    for (size_t off = 0; off < size && s.conn_count > 0; off += piece) {
        size_t n = size - off < piece ? size - off : piece;
        hs_conn_on_data(c, (const char *)data + off, n);
        uv_run(&fz_loop, UV_RUN_NOWAIT);
    }
    if ((mode & 0x80) && s.conn_count > 0)
        hs_conn_on_eof(c, UV_EOF);
    for (int i = 0; i < 4; i++)
        uv_run(&fz_loop, UV_RUN_NOWAIT);

    fz_closed = false;
    if (http_server_shutdown(&s, 0, fz_on_closed) != 0)
        abort();
    uv_run(&fz_loop, UV_RUN_DEFAULT);
    if (!fz_closed || s.conn_count != 0)
        abort();
    return 0;
}
