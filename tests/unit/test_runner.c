/*
 * test_runner.c - the coordinator's failure paths. runner.c is included, and
 * its libuv and thread calls (uv_loop_init, uv_timer_init/start,
 * uv_async_init, uv_signal_init/start, pthread_create) go through fakes
 * that can fail the Nth one; uv_loop_close is watched. Every failure must
 * come back as a negative code with a message, leave nothing in the result,
 * and close every handle it opened (the coordinator's loop closes with 0).
 *
 * The runs are small and real: workers send to 127.0.0.1, to a port where
 * nothing listens (refused at once) or to a socket that accepts but never
 * answers.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

static int g_fail_at = -1; /* the counted call (from 0) that fails; -1: none */
static int g_calls;        /* counted calls since the last reset */
static bool g_fail_drain;  /* the drain timer's start fails (not counted) */
static int g_loops_open;   /* coordinator loops initialised and not closed yet */

static bool fail_now(void)
{
    return g_calls++ == g_fail_at;
}

static int fake_uv_loop_init(uv_loop_t *l)
{
    if (fail_now())
        return UV_ENOMEM;
    int rc = uv_loop_init(l);
    g_loops_open += !rc;
    return rc;
}

static int fake_uv_loop_close(uv_loop_t *l)
{
    int rc = uv_loop_close(l);
    g_loops_open -= !rc;
    return rc;
}

static int fake_uv_timer_init(uv_loop_t *l, uv_timer_t *h)
{
    return fail_now() ? UV_ENOMEM : uv_timer_init(l, h);
}

static void on_drain_timeout(uv_timer_t *h);

static int fake_uv_timer_start(uv_timer_t *h, uv_timer_cb cb, uint64_t timeout, uint64_t repeat)
{
    if (cb == on_drain_timeout ? g_fail_drain : fail_now())
        return UV_EINVAL;
    return uv_timer_start(h, cb, timeout, repeat);
}

static int fake_uv_async_init(uv_loop_t *l, uv_async_t *h, uv_async_cb cb)
{
    return fail_now() ? UV_EMFILE : uv_async_init(l, h, cb);
}

static int fake_uv_signal_init(uv_loop_t *l, uv_signal_t *h)
{
    return fail_now() ? UV_EMFILE : uv_signal_init(l, h);
}

static int fake_uv_signal_start(uv_signal_t *h, uv_signal_cb cb, int signum)
{
    return fail_now() ? UV_EINVAL : uv_signal_start(h, cb, signum);
}

static int fake_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *),
                               void *arg)
{
    return fail_now() ? EAGAIN : pthread_create(t, a, fn, arg);
}

#define uv_loop_init(l)            fake_uv_loop_init(l)
#define uv_loop_close(l)           fake_uv_loop_close(l)
#define uv_timer_init(l, h)        fake_uv_timer_init(l, h)
#define uv_timer_start(h, c, t, r) fake_uv_timer_start(h, c, t, r)
#define uv_async_init(l, h, c)     fake_uv_async_init(l, h, c)
#define uv_signal_init(l, h)       fake_uv_signal_init(l, h)
#define uv_signal_start(h, c, s)   fake_uv_signal_start(h, c, s)
#define pthread_create(t, a, f, p) fake_pthread_create(t, a, f, p)

#include "load/runner.c"

#include "base/alloc.h"
#include "base/clock.h"

static struct workload g_wl;
static char g_refused[64]; /* a URL where nothing listens */

/* A loopback port that was free a moment ago (bound, then closed). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* A loopback socket that completes connections (its backlog) but never
 * accepts them, so requests wait for an answer; *port gets its port. */
static int silent_listener(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 16), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* Two users on two workers, 4 requests in all, signals handled: every
 * handle the coordinator can open is opened. */
static void small_run(struct runner_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->url = g_refused;
    cfg->workload = &g_wl;
    cfg->mode = RUNNER_CLOSED;
    cfg->users = 2;
    cfg->max_requests = 4;
    cfg->workers = 2;
    cfg->seed = 7;
    cfg->drain_ns = 2 * TS_NS_PER_S;
    cfg->handle_signals = true;
    http_client_config_default(&cfg->client);
    cfg->client.connect_timeout_ms = 2000;
    cfg->client.total_timeout_ms = 5000;
}

static int run(const struct runner_config *cfg, int fail_at, struct runner_result *out, char *err,
               size_t errlen)
{
    g_calls = 0;
    g_fail_at = fail_at;
    err[0] = '\0';
    int rc = runner_run(cfg, out, err, errlen);
    g_fail_at = -1;
    assert_int_equal(g_loops_open, 0); /* the coordinator's loop closed with 0 */
    assert_null(stop_async);
    return rc;
}

static void test_run_ok(void **state)
{
    struct runner_config cfg;
    struct runner_result out;
    char err[256];
    (void)state;
    small_run(&cfg);
    assert_int_equal(run(&cfg, -1, &out, err, sizeof(err)), 0);
    assert_int_equal(out.sent, 4);
    assert_int_equal(out.total->requests, 4);
    assert_false(out.interrupted);
    /* loop, 2 timers, 2 asyncs, 2 signals and their starts, 2 threads, the tick */
    assert_int_equal(g_calls, 12);
    runner_result_release(&out);
}

/* Each libuv call and each thread start fails in turn. */
static void test_each_call_fails(void **state)
{
    static const char *const what[] = {
        "event loop: ",
        "timer: ",
        "timer: ",
        "async: ",
        "async: ",
        "signal: ",
        "signal: ",
        "signal: ",
        "signal: ",
        "cannot start worker thread",
        "cannot start worker thread",
        "timer: ",
    };
    struct runner_config cfg;
    struct runner_result out;
    char err[256];
    (void)state;
    small_run(&cfg);
    for (int k = 0; k < (int)(sizeof(what) / sizeof(what[0])); k++) {
        int rc = run(&cfg, k, &out, err, sizeof(err));
        if (rc >= 0)
            fail_msg("call %d failed but the run returned %d", k, rc);
        if (strncmp(err, what[k], strlen(what[k])))
            fail_msg("call %d: message '%s', expected '%s...'", k, err, what[k]);
        assert_null(out.total); /* nothing in *out */
        assert_null(out.timeline);
        assert_int_equal(out.nclasses, 0);
    }
}

/* Allocation failures, the Nth and every later one, until a run succeeds. */
static void test_alloc_fails(void **state)
{
    struct runner_config cfg;
    struct runner_result out;
    char err[256];
    int rc = -ENOMEM;
    long n = 0;
    (void)state;
    small_run(&cfg);
    for (; rc && n < 1000; n++) {
        ts_alloc_fail_after(n);
        rc = run(&cfg, -1, &out, err, sizeof(err));
        ts_alloc_fail_after(-1);
        if (rc) {
            assert_true(rc < 0);
            assert_true(err[0] != '\0');
            assert_null(out.total);
        }
    }
    assert_int_equal(rc, 0);
    assert_true(n > 10); /* it did fail a good number of allocations first */
    runner_result_release(&out);
}

/* A drain timer that cannot start cuts the requests in flight at once
 * rather than waiting for them (here: forever). */
static void test_drain_timer_fails(void **state)
{
    struct runner_config cfg;
    struct runner_result out;
    char err[256], url[64];
    int port;
    int fd = silent_listener(&port);
    (void)state;
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/chat/completions", port);
    small_run(&cfg);
    cfg.url = url;
    cfg.mode = RUNNER_OPEN;
    cfg.arrival.process.kind = ARRIVAL_CONSTANT;
    cfg.arrival.rate = 20;
    cfg.max_requests = 0;
    cfg.duration_ns = 100 * TS_NS_PER_MS;
    cfg.drain_ns = 60 * TS_NS_PER_S;
    cfg.workers = 1;
    cfg.client.total_timeout_ms = 0; /* the requests wait until cut */
    uint64_t t0 = ts_now_ns();
    g_fail_drain = true;
    int rc = run(&cfg, -1, &out, err, sizeof(err));
    g_fail_drain = false;
    close(fd);
    assert_int_equal(rc, 0);
    assert_true(out.sent >= 1);
    assert_true(out.end_cut);
    assert_int_equal(out.total->outcomes[REQ_CUT], out.sent);
    assert_true(ts_now_ns() - t0 < 20 * TS_NS_PER_S);
    runner_result_release(&out);
}

int main(void)
{
    struct workload_cfg wcfg;
    char err[256];
    workload_cfg_init(&wcfg);
    wcfg.model = "m";
    wcfg.input_tokens = "fixed:8";
    wcfg.output_tokens = "fixed:4";
    if (workload_init(&g_wl, &wcfg, err, sizeof(err)) || http_client_global_init())
        return 1;
    snprintf(g_refused, sizeof(g_refused), "http://127.0.0.1:%d/v1/chat/completions", free_port());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_ok),
        cmocka_unit_test(test_each_call_fails),
        cmocka_unit_test(test_alloc_fails),
        cmocka_unit_test(test_drain_timer_fails),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    workload_release(&g_wl);
    http_client_global_cleanup();
    return rc;
}
