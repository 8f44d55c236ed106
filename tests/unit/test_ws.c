/* net/ws (wslay over memory), net/ws_client and the server's http_upgrade. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "base/buf.h"
#include "base/clock.h"
#include "net/http_server.h"
#include "net/ws.h"
#include "net/ws_client.h"

/* One side's received messages and written bytes. */
struct side {
    struct ws_conn ws;
    struct buf wire; /* what this side wrote */
    struct buf last; /* the last message received */
    int messages;
    int fail_writes;
};

static int side_write(struct ws_conn *ws, const void *p, size_t n, void *ctx)
{
    struct side *s = ctx;
    (void)ws;
    if (s->fail_writes)
        return -EIO;
    return buf_append(&s->wire, p, n);
}

static void side_msg(struct ws_conn *ws, int op, const uint8_t *p, size_t n, void *ctx)
{
    struct side *s = ctx;
    (void)ws;
    assert_int_equal(op, WS_OP_TEXT);
    buf_reset(&s->last);
    assert_int_equal(buf_append(&s->last, p, n), 0);
    s->messages++;
}

static const struct ws_conn_ops side_ops = {.on_message = side_msg, .write = side_write};

static void side_init(struct side *s, bool server, size_t max)
{
    memset(s, 0, sizeof(*s));
    buf_init(&s->wire, 1 << 20);
    buf_init(&s->last, 1 << 20);
    assert_int_equal(ws_conn_init(&s->ws, server, max, 42, &side_ops, s), 0);
}

static void side_release(struct side *s)
{
    ws_conn_release(&s->ws);
    buf_release(&s->wire);
    buf_release(&s->last);
}

/* Moves what from wrote into to, in pieces of step bytes (0: at once). */
static int pass(struct side *from, struct side *to, size_t step)
{
    int rc = 0;
    size_t off = 0, n = from->wire.len;
    while (off < n && (rc == 0)) {
        size_t k = step && step < n - off ? step : n - off;
        rc = ws_conn_feed(&to->ws, from->wire.data + off, k);
        off += k;
    }
    buf_reset(&from->wire);
    return rc;
}

static void test_accept_key_rfc_example(void **state)
{
    (void)state;
    char out[WS_ACCEPT_LEN + 1];
    const char *key = "dGhlIHNhbXBsZSBub25jZQ==";
    assert_int_equal(ws_accept_key(key, strlen(key), out), 0);
    assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    assert_true(ws_key_valid(key));
    assert_false(ws_key_valid("short"));
    assert_false(ws_key_valid("dGhlIHNhbXBsZSBub25jZQ=!"));
    struct rng r;
    rng_seed(&r, 1);
    char k[WS_KEY_LEN + 1];
    ws_client_key(&r, k);
    assert_true(ws_key_valid(k));
}

static void test_text_both_ways_byte_by_byte(void **state)
{
    (void)state;
    struct side c, s;
    side_init(&c, false, 1 << 16);
    side_init(&s, true, 1 << 16);
    const char *hello = "{\"type\":\"response.create\"}";
    assert_int_equal(ws_conn_send_text(&c.ws, hello, strlen(hello)), 0);
    /* a client frame is masked: the payload is not on the wire in clear */
    assert_null(memmem(c.wire.data, c.wire.len, hello, strlen(hello)));
    assert_int_equal(pass(&c, &s, 1), 0);
    assert_int_equal(s.messages, 1);
    assert_string_equal(buf_cstr(&s.last), hello);
    char big[70000];
    memset(big, 'x', sizeof(big));
    assert_int_equal(ws_conn_send_text(&s.ws, big, 60000), 0); /* 64-bit length form */
    assert_int_equal(pass(&s, &c, 777), 0);
    assert_int_equal(c.messages, 1);
    assert_int_equal(c.last.len, 60000);
    assert_int_equal(s.ws.msgs_in, 1);
    assert_int_equal(s.ws.msgs_out, 1);
    side_release(&c);
    side_release(&s);
}

static void test_fragmented_message_and_ping(void **state)
{
    (void)state;
    struct side s;
    side_init(&s, true, 1 << 16);
    /* masked client frames (mask 0): "He" (text, no FIN), ping "p", "llo" (continuation, FIN) */
    static const uint8_t frames[] = {0x01, 0x82, 0, 0, 0, 0, 'H', 'e', /* */
                                     0x89, 0x81, 0, 0, 0, 0, 'p',      /* */
                                     0x80, 0x83, 0, 0, 0, 0, 'l', 'l', 'o'};
    assert_int_equal(ws_conn_feed(&s.ws, frames, sizeof(frames)), 0);
    assert_int_equal(s.messages, 1);
    assert_string_equal(buf_cstr(&s.last), "Hello");
    assert_int_equal(s.ws.pings_in, 1);
    /* the pong went out: unmasked, opcode 0xA, payload "p" */
    assert_int_equal(s.wire.len, 3);
    assert_int_equal((uint8_t)s.wire.data[0], 0x8a);
    assert_int_equal((uint8_t)s.wire.data[1], 0x01);
    assert_int_equal(s.wire.data[2], 'p');
    side_release(&s);
}

static void test_close_codes(void **state)
{
    (void)state;
    struct side c, s;
    side_init(&c, false, 1 << 16);
    side_init(&s, true, 1 << 16);
    assert_int_equal(ws_conn_close(&s.ws, 4001, "bye"), 0);
    assert_true(ws_conn_close_sent(&s.ws));
    assert_int_equal(ws_conn_close_code_sent(&s.ws), 4001);
    assert_int_equal(ws_conn_send_text(&s.ws, "x", 1), TS_CLOSED);
    assert_int_equal(pass(&s, &c, 0), TS_CLOSED);
    assert_true(ws_conn_close_received(&c.ws));
    assert_int_equal(ws_conn_close_code(&c.ws), 4001);
    /* the client answered the close */
    assert_true(ws_conn_close_sent(&c.ws));
    assert_int_equal(pass(&c, &s, 0), TS_CLOSED);
    assert_int_equal(ws_conn_close_code(&s.ws), 4001);
    side_release(&c);
    side_release(&s);
}

static void test_protocol_errors_close(void **state)
{
    (void)state;
    struct side s, big;
    side_init(&s, true, 16);
    /* an unmasked frame to a server: 1002 */
    static const uint8_t unmasked[] = {0x81, 0x01, 'x'};
    assert_int_equal(ws_conn_feed(&s.ws, unmasked, sizeof(unmasked)), TS_CLOSED);
    assert_int_equal(ws_conn_close_code_sent(&s.ws), WS_CLOSE_PROTOCOL);
    assert_int_equal(s.messages, 0);
    side_release(&s);
    /* a message over max_message: 1009 */
    side_init(&big, true, 4);
    static const uint8_t longer[] = {0x81, 0x85, 0, 0, 0, 0, 'a', 'b', 'c', 'd', 'e'};
    assert_int_equal(ws_conn_feed(&big.ws, longer, sizeof(longer)), TS_CLOSED);
    assert_int_equal(ws_conn_close_code_sent(&big.ws), WS_CLOSE_TOO_BIG);
    side_release(&big);
    /* a failing write is reported */
    struct side f;
    side_init(&f, true, 16);
    f.fail_writes = 1;
    assert_int_equal(ws_conn_send_text(&f.ws, "x", 1), TS_CLOSED);
    assert_true(ws_conn_failed(&f.ws));
    side_release(&f);
    assert_int_equal(ws_conn_init(&f.ws, true, 0, 0, &side_ops, &f), -EINVAL);
}

/* ---- the client against the server's upgrade on a real loop ---- */

/* A shaper (net/shaper.h) for either side: at most per bytes a call, the
 * next 1 ms later; a reset once cut_at bytes are out, or at reset_at (0:
 * never). */
struct slicer {
    uint64_t per, cut_at, reset_at, calls;
    bool released;
};

static uint64_t slicer_allow(void *ctx, uint64_t queued, uint64_t sent, uint64_t now,
                             uint64_t *wake_at, enum http_shape_then *then)
{
    struct slicer *k = ctx;
    k->calls++;
    if (k->reset_at && now >= k->reset_at) {
        *then = HTTP_SHAPE_RESET;
        return 0;
    }
    uint64_t n = queued - sent < k->per ? queued - sent : k->per;
    if (k->cut_at && sent + n >= k->cut_at) {
        *then = HTTP_SHAPE_RESET;
        return k->cut_at > sent ? k->cut_at - sent : 0;
    }
    if (sent + n < queued)
        *wake_at = now + TS_NS_PER_MS;
    else if (k->reset_at)
        *wake_at = k->reset_at;
    return n;
}

static void slicer_release(void *ctx)
{
    ((struct slicer *)ctx)->released = true;
}

struct echo {
    struct ws_conn ws;
    struct http_request *req;
    bool refuse;
    struct slicer *slice; /* shapes the server's output when set */
};

static struct echo echo_srv;
static struct http_server srv;
static int server_closed;

static int echo_write(struct ws_conn *ws, const void *p, size_t n, void *ctx)
{
    struct echo *e = ctx;
    (void)ws;
    int rc = http_stream_write(e->req, p, n);
    return rc == TS_AGAIN ? 0 : rc;
}

static void echo_msg(struct ws_conn *ws, int op, const uint8_t *p, size_t n, void *ctx)
{
    (void)ctx;
    if (n == 5 && !memcmp(p, "close", 5))
        (void)ws_conn_close(ws, 4000, "asked");
    else
        assert_int_equal(ws_conn_send(ws, op, p, n), 0); /* as it came: text or binary */
}

static const struct ws_conn_ops echo_ops = {.on_message = echo_msg, .write = echo_write};

static void echo_data(struct http_request *req, const char *p, size_t n)
{
    struct echo *e = req->user;
    int rc = ws_conn_feed(&e->ws, p, n);
    if (rc == TS_CLOSED && ws_conn_close_received(&e->ws) && ws_conn_close_sent(&e->ws)) {
        ws_conn_release(&e->ws);
        (void)http_stream_end(req);
    }
}

static void echo_abort(struct http_request *req)
{
    struct echo *e = req->user;
    ws_conn_release(&e->ws);
    (void)http_stream_end(req);
}

static void echo_request(struct http_request *req, void *ctx)
{
    (void)ctx;
    const char *key = http_request_header(req, "sec-websocket-key");
    if (echo_srv.refuse || !ws_key_valid(key)) {
        (void)http_respond(req, 401, "text/plain", NULL, "no", 2);
        return;
    }
    char accept[WS_ACCEPT_LEN + 1], extra[512];
    assert_int_equal(ws_accept_key(key, strlen(key), accept), 0);
    /* sliced: a Connection value longer than the client's value buffer,
     * its word at the end */
    snprintf(extra, sizeof(extra),
             "Upgrade: websocket\r\nConnection: %s%sUpgrade\r\nSec-WebSocket-Accept: %s\r\n",
             echo_srv.slice ? "x-a-long-token-list-0123456789-0123456789-0123456789-0123456789-"
                              "0123456789-0123456789-0123456789-0123456789-0123456789-0123456789"
                            : "",
             echo_srv.slice ? ", " : "", accept);
    if (echo_srv.slice) {
        struct http_shaper sh = {slicer_allow, 0, slicer_release, echo_srv.slice};
        assert_int_equal(http_request_set_shaper(req, &sh), 0);
    }
    echo_srv.req = req;
    req->user = &echo_srv;
    assert_int_equal(ws_conn_init(&echo_srv.ws, true, 1 << 16, 0, &echo_ops, &echo_srv), 0);
    http_request_on_abort(req, echo_abort);
    assert_int_equal(http_upgrade(req, extra, echo_data), 0);
}

struct client_log {
    int opened, messages, done;
    bool binary_echoed; /* the binary message came back as binary, byte for byte */
    char last[64];
    struct ws_call_result res;
    char error[256];
    char body[64];
};

static void cl_open(struct ws_call *c, void *user)
{
    struct client_log *l = user;
    l->opened++;
    assert_int_equal(ws_call_send_text(c, "hello", 5), 0);
}

static const char bin[] = {'\xff', '\0', '\x80', 'b'}; /* not UTF-8 */

static bool client_idle; /* after the first echo the client sends nothing more */

static void cl_msg(struct ws_call *c, int op, const char *p, size_t n, uint64_t at, void *user)
{
    struct client_log *l = user;
    assert_true(at > 0);
    if (++l->messages == 1 && client_idle)
        return;
    if (l->messages == 1) {
        assert_int_equal(op, WS_OP_TEXT);
        snprintf(l->last, sizeof(l->last), "%.*s", (int)n, p);
        assert_int_equal(ws_call_send(c, 7, bin, sizeof bin), -EINVAL);
        assert_int_equal(ws_call_send(c, WS_OP_BINARY, bin, sizeof bin), 0);
    } else {
        l->binary_echoed = op == WS_OP_BINARY && n == sizeof bin && !memcmp(p, bin, n);
        assert_int_equal(ws_call_send_text(c, "close", 5), 0);
    }
}

static void cl_done(struct ws_call *c, const struct ws_call_result *res, void *user)
{
    struct client_log *l = user;
    (void)c;
    l->done++;
    l->res = *res;
    snprintf(l->error, sizeof(l->error), "%s", res->error_text);
    snprintf(l->body, sizeof(l->body), "%.*s", (int)res->body_len, res->body);
}

static const struct ws_call_ops cl_ops = {
    .on_open = cl_open, .on_message = cl_msg, .on_done = cl_done};

static void on_srv_closed(struct http_server *s)
{
    (void)s;
    server_closed = 1;
}

static void run_client_shaped(struct client_log *log, bool refuse, struct slicer *k)
{
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    struct http_server_config cfg = {.host = "127.0.0.1", .port = 0};
    assert_int_equal(http_server_init(&srv, &loop, &cfg, echo_request, NULL), 0);
    assert_int_equal(http_server_listen(&srv), 0);
    echo_srv.refuse = refuse;
    char url[128];
    snprintf(url, sizeof(url), "ws://127.0.0.1:%d/v1/realtime?model=m", http_server_port(&srv));
    const char *hdr[] = {"Authorization: Bearer sk-test"};
    struct http_shaper sh = {slicer_allow, 0, slicer_release, k};
    struct ws_call_spec spec = {.url = url,
                                .headers = hdr,
                                .n_headers = 1,
                                .total_timeout_ms = 10000,
                                .send_shaper = k ? &sh : NULL};
    struct ws_call *call;
    memset(log, 0, sizeof(*log));
    assert_int_equal(ws_call_open(&loop, &spec, &cl_ops, log, &call), 0);
    uint64_t until = ts_now_ns() + 15 * TS_NS_PER_S;
    while (!log->done && ts_now_ns() < until)
        uv_run(&loop, UV_RUN_ONCE);
    server_closed = 0;
    assert_int_equal(http_server_shutdown(&srv, 0, on_srv_closed), 0);
    while (!server_closed && ts_now_ns() < until)
        uv_run(&loop, UV_RUN_ONCE);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void run_client(struct client_log *log, bool refuse)
{
    run_client_shaped(log, refuse, NULL);
}

/* The send shaper paces every byte to the server (the upgrade request
 * included, 7 bytes a millisecond), then, in a second run, resets the
 * connection after 100 bytes of the upgrade request. */
static void test_client_send_shaper(void **state)
{
    (void)state;
    struct client_log log;
    struct slicer k = {.per = 7};
    run_client_shaped(&log, false, &k);
    assert_int_equal(log.res.error, HTTP_CALL_OK);
    assert_int_equal(log.messages, 2);
    assert_true(log.binary_echoed);
    assert_true(k.calls > 20); /* the upgrade request alone is over 140 bytes */
    assert_true(k.released);
    struct slicer cut = {.per = 1 << 20, .cut_at = 100};
    run_client_shaped(&log, false, &cut);
    assert_int_equal(log.opened, 0);
    assert_int_equal(log.res.error, HTTP_CALL_ERR_SEND);
    assert_non_null(strstr(log.error, "reset by the send shaper after 100 bytes"));
    assert_true(cut.released);
    /* a timed reset cuts a connection with nothing to send */
    struct slicer timed = {.per = 1 << 20, .reset_at = ts_now_ns() + 300 * TS_NS_PER_MS};
    client_idle = true;
    run_client_shaped(&log, false, &timed);
    client_idle = false;
    assert_int_equal(log.messages, 1);
    assert_int_equal(log.res.error, HTTP_CALL_ERR_SEND);
    assert_non_null(strstr(log.error, "reset by the send shaper"));
    assert_true(ts_now_ns() >= timed.reset_at);
}

/* The server's bytes come one at a time (its output shaped), so the 101's
 * header values reach the client in pieces, one per read: joined. */
static void test_client_upgrade_in_pieces(void **state)
{
    (void)state;
    struct client_log log;
    struct slicer k = {.per = 1};
    echo_srv.slice = &k;
    run_client(&log, false);
    echo_srv.slice = NULL;
    assert_int_equal(log.res.error, HTTP_CALL_OK);
    assert_int_equal(log.opened, 1);
    assert_true(log.binary_echoed);
    assert_true(k.calls > 100); /* the 101 head alone is over 100 bytes */
}

static void test_client_round_trip_and_close_code(void **state)
{
    (void)state;
    struct client_log log;
    run_client(&log, false);
    assert_int_equal(log.done, 1);
    assert_int_equal(log.opened, 1);
    assert_int_equal(log.messages, 2);
    assert_string_equal(log.last, "hello");
    assert_true(log.binary_echoed);
    assert_int_equal(log.res.status, 101);
    assert_int_equal(log.res.error, HTTP_CALL_OK);
    assert_int_equal(log.res.close_code, 4000);
    assert_true(log.res.close_by_peer);
    assert_true(log.res.connect_ns >= log.res.start_ns);
    assert_true(log.res.upgrade_ns >= log.res.connect_ns);
}

static void test_client_refused_upgrade(void **state)
{
    (void)state;
    struct client_log log;
    run_client(&log, true);
    assert_int_equal(log.done, 1);
    assert_int_equal(log.opened, 0);
    assert_int_equal(log.res.status, 401);
    assert_string_equal(log.body, "no");
    assert_non_null(strstr(log.error, "refused"));
}

static void test_client_bad_urls(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    struct client_log log;
    struct ws_call *call;
    struct ws_call_spec spec = {.url = "http://127.0.0.1:1/x"};
    assert_int_equal(ws_call_open(&loop, &spec, &cl_ops, &log, &call), -EINVAL);
    /* nothing listens: a connect error, on_done once */
    memset(&log, 0, sizeof(log));
    spec.url = "ws://127.0.0.1:1/x";
    assert_int_equal(ws_call_open(&loop, &spec, &cl_ops, &log, &call), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(log.done, 1);
    assert_int_equal(log.res.error, HTTP_CALL_ERR_CONNECT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accept_key_rfc_example),
        cmocka_unit_test(test_text_both_ways_byte_by_byte),
        cmocka_unit_test(test_fragmented_message_and_ping),
        cmocka_unit_test(test_close_codes),
        cmocka_unit_test(test_protocol_errors_close),
        cmocka_unit_test(test_client_round_trip_and_close_code),
        cmocka_unit_test(test_client_send_shaper),
        cmocka_unit_test(test_client_upgrade_in_pieces),
        cmocka_unit_test(test_client_refused_upgrade),
        cmocka_unit_test(test_client_bad_urls),
    };
    return cmocka_run_group_tests_name("ws", tests, NULL, NULL);
}
