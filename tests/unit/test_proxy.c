/*
 * test_proxy.c - the chaos proxy in process: an upstream http_server, the
 * proxy and an http_client on one loop (127.0.0.1, port 0). Checks
 * passthrough (Content-Length and chunked bodies, request bodies and
 * headers), and the HTTP faults: abort, truncation of the request and of the
 * response (end / close), header rewrite, delays, header-triggered faults;
 * once with one loop and once with three loop threads (--threads), where a
 * burst of concurrent connections must be served by more than one of them.
 *
 * Upstream routes: /len (200, LEN_BODY with Content-Length), /stream (200,
 * three chunks), /echo (201, the request body; x-got-h: the x-h header;
 * x-drop: 1).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/clock.h"
#include "chaos/proxy.h"

#define LEN_BODY "0123456789abcdefghijklmnopqrstuvwxyz"
#define GUARD_MS 10000

struct step {
    const char *faults[3]; /* JSON specs added before the request */
    const char *method, *path, *body;
    const char *headers[3];
    int want_status;
    const char *want_body; /* NULL: not checked */
    enum http_call_error want_error;
    const char *want_header, *want_value; /* a response header (value NULL: absent) */
    uint64_t min_ms;                      /* the call took at least this long */
};

static const struct step steps[] = {
    {{NULL}, "GET", "/len", NULL, {NULL}, 200, LEN_BODY, HTTP_CALL_OK, "content-length", "36", 0},
    {{NULL},
     "GET",
     "/stream",
     NULL,
     {NULL},
     200,
     "one,two,three",
     HTTP_CALL_OK,
     "transfer-encoding",
     "chunked",
     0},
    {{NULL},
     "POST",
     "/echo?q=1",
     "abcdef",
     {"x-h: 1"},
     201,
     "abcdef",
     HTTP_CALL_OK,
     "x-got-h",
     "1",
     0},
    {{"{\"name\":\"a\",\"type\":\"http_abort\",\"status\":429,\"match\":{\"path\":\"/stream\"}}"},
     "GET",
     "/stream",
     NULL,
     {NULL},
     429,
     NULL,
     HTTP_CALL_OK,
     "retry-after",
     "1",
     0},
    {{NULL},
     "GET",
     "/len",
     NULL,
     {NULL},
     200,
     LEN_BODY,
     HTTP_CALL_OK,
     "x-tokenstorm-fault",
     NULL,
     0},
    {{"{\"name\":\"t1\",\"type\":\"http_truncate_response\",\"bytes\":5,\"cut\":\"close\","
      "\"match\":{\"path\":\"/len\"}}"},
     "GET",
     "/len",
     NULL,
     {NULL},
     200,
     "01234",
     HTTP_CALL_ERR_RECV,
     "content-length",
     "36",
     0},
    {{"{\"name\":\"t2\",\"type\":\"http_truncate_response\",\"bytes\":5,\"match\":{\"path\":"
      "\"/stream\"}}"},
     "GET",
     "/stream",
     "",
     {"x-tokenstorm-fault: t2"},
     200,
     "one,t",
     HTTP_CALL_OK,
     NULL,
     NULL,
     0},
    {{"{\"name\":\"tq\",\"type\":\"http_truncate_request\",\"bytes\":3}",
      "{\"name\":\"rw\",\"type\":\"http_header_rewrite\",\"direction\":\"upstream\",\"set\":"
      "{\"x-h\":\"2\"}}",
      "{\"name\":\"rd\",\"type\":\"http_header_rewrite\",\"remove\":[\"x-drop\"]}"},
     "POST",
     "/echo",
     "abcdef",
     {"x-h: 1"},
     201,
     "abc",
     HTTP_CALL_OK,
     "x-got-h",
     "2",
     0},
    {{"{\"name\":\"d1\",\"type\":\"http_delay_request\",\"delay\":\"60ms\"}",
      "{\"name\":\"d2\",\"type\":\"http_delay_headers\",\"delay\":\"60ms\"}"},
     "GET",
     "/len",
     NULL,
     {NULL},
     200,
     LEN_BODY,
     HTTP_CALL_OK,
     NULL,
     NULL,
     120},
    {{NULL},
     "GET",
     "/len",
     NULL,
     {"x-tokenstorm-fault-abort: 502"},
     502,
     NULL,
     HTTP_CALL_OK,
     "x-tokenstorm-fault",
     "x-tokenstorm-fault-abort",
     0},
    {{NULL},
     "GET",
     "/len",
     NULL,
     {"x-tokenstorm-fault-delay: 50ms"},
     200,
     LEN_BODY,
     HTTP_CALL_OK,
     NULL,
     NULL,
     50},
    {{NULL},
     "GET",
     "/len",
     NULL,
     {"x-tokenstorm-fault: nope"},
     400,
     NULL,
     HTTP_CALL_OK,
     NULL,
     NULL,
     0},
};
#define NSTEPS (sizeof steps / sizeof steps[0])

struct ctx {
    uv_loop_t loop;
    struct http_server up;
    struct proxy proxy;
    struct http_client client;
    uv_timer_t guard;
    size_t step;
    long status;
    char body[4096];
    size_t body_len;
    char hval[256];
    bool hpresent;
    uint64_t t0;
    int closed;
    bool failed;
    int threads;
    int burst_done;
    uint64_t worker_requests[4]; /* read before the shutdown frees the workers */
    uint64_t forwarded;          /* forward_delay observations, all workers */
    double forward_s;            /* their sum */
    uint64_t elapsed_ns;         /* from the first request to finish */
};

#define BURST 24 /* concurrent connections when threads > 1 */

static void up_handle(struct http_request *req, void *arg)
{
    (void)arg;
    if (strcmp(req->path, "/len") == 0) {
        (void)http_respond(req, 200, "text/plain", NULL, LEN_BODY, strlen(LEN_BODY));
    } else if (strcmp(req->path, "/stream") == 0) {
        if (http_stream_begin(req, 200, "text/event-stream", NULL) == 0) {
            (void)http_stream_write(req, "one,", 4);
            (void)http_stream_write(req, "two,", 4);
            (void)http_stream_write(req, "three", 5);
        }
        (void)http_stream_end(req);
    } else if (strcmp(req->path, "/echo") == 0) {
        char extra[300];
        const char *h = http_request_header(req, "x-h");
        snprintf(extra, sizeof extra, "x-got-h: %s\r\nx-drop: 1\r\n", h ? h : "none");
        (void)http_respond(req, 201, "text/plain", extra, req->body, req->body_len);
    } else {
        (void)http_respond(req, 404, NULL, NULL, "", 0);
    }
}

static void start_step(struct ctx *c);
static void start_burst(struct ctx *c);

static void on_closed_part(struct ctx *c)
{
    if (++c->closed == 3)
        uv_close((uv_handle_t *)&c->guard, NULL);
}

static void proxy_closed(struct proxy *p)
{
    on_closed_part((struct ctx *)((char *)p - offsetof(struct ctx, proxy)));
}

static void up_closed(struct http_server *s)
{
    on_closed_part((struct ctx *)((char *)s - offsetof(struct ctx, up)));
}

static void client_closed(struct http_client *cl, void *arg)
{
    (void)cl;
    on_closed_part(arg);
}

static void finish(struct ctx *c)
{
    uv_timer_stop(&c->guard);
    for (int i = 0; i < c->proxy.n_workers && i < 4; i++)
        c->worker_requests[i] = atomic_load(&c->proxy.workers[i].requests);
    for (int i = 0; i < c->proxy.n_workers; i++) {
        struct proxy_worker *w = &c->proxy.workers[i];
        pthread_mutex_lock(&w->hist_mu);
        c->forwarded += w->forward_delay.count;
        c->forward_s += w->forward_delay.sum;
        pthread_mutex_unlock(&w->hist_mu);
    }
    c->elapsed_ns = ts_now_ns() - c->elapsed_ns;
    proxy_shutdown(&c->proxy, 100, proxy_closed);
    (void)http_server_shutdown(&c->up, 100, up_closed);
    http_client_close(&c->client, client_closed, c);
}

static int on_body(struct http_call *call, const char *data, size_t len, uint64_t now, void *u)
{
    struct ctx *c = u;
    (void)call;
    (void)now;
    if (c->body_len + len < sizeof c->body) {
        memcpy(c->body + c->body_len, data, len);
        c->body_len += len;
    }
    return 0;
}

static void on_done(struct http_call *call, const struct http_call_result *res, void *u)
{
    struct ctx *c = u;
    const struct step *s = &steps[c->step];
    uint64_t ms = (ts_now_ns() - c->t0) / 1000000;
    c->body[c->body_len] = '\0';
    if (s->want_header) {
        const char *v = http_call_header(call, s->want_header);
        c->hpresent = v != NULL;
        snprintf(c->hval, sizeof c->hval, "%s", v ? v : "");
    }
    bool ok = res->status == s->want_status && res->error == s->want_error &&
              (!s->want_body || strcmp(c->body, s->want_body) == 0) && ms >= s->min_ms;
    if (s->want_header)
        ok = ok &&
             (s->want_value ? c->hpresent && strcmp(c->hval, s->want_value) == 0 : !c->hpresent);
    if (!ok) {
        print_error("step %zu (%s %s): status %ld (want %d), error %s (want %s), body '%s', "
                    "header %s='%s' (present %d), %llu ms\n",
                    c->step, s->method, s->path, res->status, s->want_status,
                    http_call_error_name(res->error), http_call_error_name(s->want_error), c->body,
                    s->want_header ? s->want_header : "-", c->hval, c->hpresent,
                    (unsigned long long)ms);
        c->failed = true;
    }
    pthread_mutex_lock(&c->proxy.faults_mu);
    faultset_reset(&c->proxy.faults);
    pthread_mutex_unlock(&c->proxy.faults_mu);
    if (++c->step == NSTEPS && c->threads > 1 && !c->failed)
        start_burst(c);
    else if (c->step == NSTEPS || c->failed)
        finish(c);
    else
        start_step(c);
}

static const struct http_call_ops ops = {NULL, on_body, on_done};

static void burst_done(struct http_call *call, const struct http_call_result *res, void *u)
{
    struct ctx *c = u;
    (void)call;
    if (res->status != 200 || res->error != HTTP_CALL_OK) {
        print_error("burst: status %ld, error %s\n", res->status, http_call_error_name(res->error));
        c->failed = true;
    }
    if (++c->burst_done == BURST)
        finish(c);
}

static const struct http_call_ops burst_ops = {NULL, NULL, burst_done};

/* BURST requests at once: each needs its own connection. */
static void start_burst(struct ctx *c)
{
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/len", proxy_port(&c->proxy));
    struct http_call_spec spec = {.method = "GET", .url = url};
    for (int i = 0; i < BURST; i++)
        assert_int_equal(http_client_request(&c->client, &spec, &burst_ops, c, NULL), 0);
}

static void start_step(struct ctx *c)
{
    const struct step *s = &steps[c->step];
    char err[512];
    for (int i = 0; i < 3 && s->faults[i]; i++) {
        struct fault f;
        json_t *j = json_loads(s->faults[i], 0, NULL);
        assert_non_null(j);
        int rc = fault_parse_json(j, &f, err, sizeof err);
        json_decref(j);
        if (rc)
            fail_msg("%s", err);
        pthread_mutex_lock(&c->proxy.faults_mu);
        rc = faultset_add(&c->proxy.faults, &f, ts_now_ns());
        pthread_mutex_unlock(&c->proxy.faults_mu);
        assert_int_equal(rc, 0);
    }
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", proxy_port(&c->proxy), s->path);
    size_t nh = 0;
    while (nh < 3 && s->headers[nh])
        nh++;
    struct http_call_spec spec = {
        .method = s->method,
        .url = url,
        .headers = s->headers,
        .n_headers = nh,
        .body = s->body,
        .body_len = s->body ? strlen(s->body) : 0,
        .copy_body = true,
    };
    c->body_len = 0;
    c->hpresent = false;
    c->hval[0] = '\0';
    c->t0 = ts_now_ns();
    assert_int_equal(http_client_request(&c->client, &spec, &ops, c, NULL), 0);
}

static void guard_cb(uv_timer_t *t)
{
    struct ctx *c = t->data;
    print_error("guard timer fired at step %zu\n", c->step);
    c->failed = true;
    finish(c);
}

static void test_proxy_http(void **state)
{
    struct ctx *c = calloc(1, sizeof *c);
    char err[512];
    assert_non_null(c);
    c->threads = *(int *)*state;
    assert_int_equal(uv_loop_init(&c->loop), 0);
    struct http_server_config sc = {.host = "127.0.0.1"};
    assert_int_equal(http_server_init(&c->up, &c->loop, &sc, up_handle, c), 0);
    assert_int_equal(http_server_listen(&c->up), 0);
    char upstream[64];
    snprintf(upstream, sizeof upstream, "http://127.0.0.1:%d/", http_server_port(&c->up));
    struct proxy_config pc = {.upstream = upstream, .seed = 1, .threads = c->threads};
    assert_int_equal(proxy_init(&c->proxy, &c->loop, &pc, err, sizeof err), 0);
    assert_int_equal(proxy_listen(&c->proxy, err, sizeof err), 0);
    upstream[strlen(upstream) - 1] = '\0'; /* the trailing '/' is dropped */
    assert_string_equal(c->proxy.upstream, upstream);
    assert_int_equal(http_client_init(&c->client, &c->loop, NULL), 0);
    uv_timer_init(&c->loop, &c->guard);
    c->guard.data = c;
    uv_timer_start(&c->guard, guard_cb, GUARD_MS, 0);
    c->elapsed_ns = ts_now_ns();
    start_step(c);
    uv_run(&c->loop, UV_RUN_DEFAULT);
    assert_false(c->failed);
    assert_int_equal(c->step, NSTEPS);
    size_t want = NSTEPS + (c->threads > 1 ? BURST : 0);
    assert_int_equal(c->proxy.requests_total, want);
    assert_int_equal(c->proxy.in_flight, 0);
    assert_int_equal(c->proxy.header_faults, 2);
    uint64_t sum = 0;
    int busy = 0;
    for (int i = 0; i < c->threads; i++) {
        sum += c->worker_requests[i];
        busy += c->worker_requests[i] > 0;
    }
    assert_int_equal(sum, want);
    /* 24 connections all hashed to one of 3 listeners: p = 3^-23 */
    if (c->threads > 1)
        assert_true(busy >= 2);
    /* pass-through pieces were timed (/len, /stream, /echo and the burst at least),
     * each delay inside the test's time */
    assert_true(c->forwarded >= 3 + (c->threads > 1 ? BURST : 0));
    assert_true(c->forward_s > 0 &&
                c->forward_s * 1e9 < (double)c->elapsed_ns * (double)c->forwarded);
    assert_int_equal(uv_loop_close(&c->loop), 0);
    free(c);
}

static void test_proxy_bad_config(void **state)
{
    (void)state;
    uv_loop_t loop;
    struct proxy p;
    char err[256];
    assert_int_equal(uv_loop_init(&loop), 0);
    struct proxy_config pc = {.upstream = "ftp://x"};
    assert_int_equal(proxy_init(&p, &loop, &pc, err, sizeof err), -EINVAL);
    assert_string_equal(err, "--upstream: expected an http:// or https:// URL, got 'ftp://x'");
    struct proxy_config pt = {.upstream = "http://127.0.0.1:1", .threads = PROXY_THREADS_MAX + 1};
    assert_int_equal(proxy_init(&p, &loop, &pt, err, sizeof err), -EINVAL);
    assert_string_equal(err, "--threads: expected 1..64, got 65");
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    static int one = 1, three = 3;
    /* as the program does (src/main.c): a peer that closed makes write(2) fail
     * with EPIPE instead of killing the process */
    signal(SIGPIPE, SIG_IGN);
    if (http_client_global_init() != 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_prestate(test_proxy_http, &one),
        cmocka_unit_test_prestate(test_proxy_http, &three),
        cmocka_unit_test(test_proxy_bad_config),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    http_client_global_cleanup();
    return rc;
}
