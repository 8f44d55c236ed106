/*
 * test_run_job.c - run_job()'s early exits: what it holds is freed on every
 * one of them, and what the caller holds is left alone. run_job.c is
 * included so that http_client_global_init() can be made to fail. Leaks and
 * double frees show under AddressSanitizer (the ASan build).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>

#include "net/http_client.h"

static bool g_curl_fails;

static int fake_global_init(void)
{
    return g_curl_fails ? -EIO : http_client_global_init();
}

#define http_client_global_init() fake_global_init()

#include "app/run_job.c"

/* Options with everything that holds memory in the job: --think, --body
 * (JSON), the OTLP settings and a quality regex. */
static void opts_with_resources(struct run_opts *o)
{
    memset(o, 0, sizeof(*o));
    run_quality_init(&o->quality);
    o->think = "uniform:0.1-0.5";
    o->body = "{\"temperature\": 0.5}";
    o->otlp_endpoint = "http://127.0.0.1:4318";
    o->quality.regex = "^ok";
    o->quiet = true;
}

/* libcurl cannot start: --think's distribution and --body's JSON are freed
 * too (they leaked). */
static void test_curl_init_fails(void **state)
{
    struct run_opts o;
    int argc = 1;
    char *args[] = {"tokenstorm", NULL};
    char **argv = args;
    (void)state;
    opts_with_resources(&o);
    g_curl_fails = true;
    assert_int_equal(run_job(&o, &argc, &argv), TS_EXIT_FAIL);
    g_curl_fails = false;
}

/* A regex the caller compiled into its options stays the caller's: run_job
 * neither frees it (it did, through its copy) nor replaces it. */
static void test_caller_keeps_quality(void **state)
{
    struct run_opts o;
    struct runner_config cfg;
    char err[256];
    int argc = 1;
    char *args[] = {"tokenstorm", NULL};
    char **argv = args;
    (void)state;
    opts_with_resources(&o);
    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(run_quality_apply(&o.quality, &cfg, err, sizeof(err)), 0);
    struct quality_regex *mine = o.quality.compiled;
    assert_non_null(mine);
    o.scenario = "/nonexistent/tokenstorm-test.yaml"; /* fails after the options are set up */
    assert_int_equal(run_job(&o, &argc, &argv), TS_EXIT_USAGE);
    assert_ptr_equal(o.quality.compiled, mine);
    run_quality_release(&o.quality); /* a double free if run_job had freed it */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_curl_init_fails),
        cmocka_unit_test(test_caller_keeps_quality),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
