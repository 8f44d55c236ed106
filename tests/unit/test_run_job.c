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
#include <getopt.h>
#include <stdbool.h>
#include <stdlib.h>

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

/* The configuration block of result.json: every effective option from a job
 * set up as run_job sets it up, header names without their values, and
 * neither the --api-key nor "Authorization: Bearer x" anywhere in the
 * document built from it with the process's command line. */
static void test_config_block_redacted(void **state)
{
    static const struct option opts[] = {
        {"api-key", required_argument, NULL, 1},
        {"header", required_argument, NULL, 2},
        {"rate", required_argument, NULL, 3},
        {"body", required_argument, NULL, 4},
        {NULL, 0, NULL, 0},
    };
    char *argv[] = {"run",
                    "--rate",
                    "5",
                    "--api-key",
                    "sk-unit-key-1",
                    "--header",
                    "Authorization: Bearer x",
                    "--header",
                    "X-Tenant: t1",
                    "--body",
                    "{\"temperature\":0.5}"};
    struct job *j = calloc(1, sizeof(*j));
    struct runner_result res;
    struct run_stats *stats = NULL;
    struct run_summary sum;
    (void)state;
    assert_non_null(j);

    struct run_opts o;
    opts_with_resources(&o);
    o.think = NULL;
    o.otlp_endpoint = NULL;
    o.quality.regex = NULL;
    o.rate = 5;
    o.api_key = "sk-unit-key-1";
    o.headers[0] = "Authorization: Bearer x";
    o.headers[1] = "X-Tenant: t1";
    o.nheaders = 2;
    o.slos[0] = "ttft.p99<2s";
    o.nslos = 1;
    o.goodput = "ttft:500 e2el:3000";
    o.duration_ns = 7 * TS_NS_PER_S;
    o.warmup_ns = 2 * TS_NS_PER_S;
    o.drain_ns = 4 * TS_NS_PER_S;
    o.t_connect = 3 * TS_NS_PER_S;
    o.t_ttfb = 60 * TS_NS_PER_S;
    o.seed = 9;
    o.workers = 2;
    o.options = opts;
    job_init(j, &o);
    j->target = "http://127.0.0.1:9/v1";
    snprintf(j->model, sizeof(j->model), "m");
    assert_int_equal(parse_checks(j), 0);
    assert_int_equal(parse_resources(j), 0);
    assert_int_equal(
        target_resolve(j->target, j->ep, j->url, j->models_url, j->err, sizeof(j->err)), 0);
    assert_int_equal(build_headers(j), 0);
    j->rcfg.workers = 2;
    j->argc = (int)(sizeof(argv) / sizeof(argv[0]));
    j->argv = argv;

    memset(&res, 0, sizeof(res));
    res.run_id = 0x1234;
    json_t *conf = report_config(j, &res);
    assert_non_null(conf);
    assert_string_equal(json_string_value(json_object_get(conf, "mode")), "open");
    assert_true(json_real_value(json_object_get(conf, "rate")) == 5.0);
    assert_true(json_real_value(json_object_get(conf, "requested_duration_s")) == 7.0);
    assert_true(json_real_value(json_object_get(conf, "drain_s")) == 4.0);
    const json_t *t = json_object_get(conf, "timeouts");
    assert_true(json_real_value(json_object_get(t, "connect_s")) == 3.0);
    assert_true(json_real_value(json_object_get(t, "ttfb_s")) == 60.0);
    assert_true(json_is_null(json_object_get(t, "total_s")));
    char *names = json_dumps(json_object_get(conf, "headers"), JSON_COMPACT);
    assert_string_equal(names, "[\"Authorization\",\"X-Tenant\"]");
    free(names);
    assert_true(json_is_true(json_object_get(conf, "api_key_set")));
    assert_true(json_real_value(json_object_get(json_object_get(conf, "body"), "temperature")) ==
                0.5);
    assert_string_equal(json_string_value(json_array_get(json_object_get(conf, "slo"), 0)),
                        "ttft.p99<2s");
    const json_t *g = json_object_get(conf, "goodput");
    assert_true(json_real_value(json_object_get(g, "ttft_ms")) == 500.0);
    assert_true(json_real_value(json_object_get(g, "e2el_ms")) == 3000.0);
    assert_null(json_object_get(g, "tpot_ms"));
    assert_int_equal(json_integer_value(json_object_get(conf, "seed")), 9);
    assert_int_equal(json_integer_value(json_object_get(conf, "workers")), 2);
    assert_string_equal(json_string_value(json_object_get(conf, "http_engine")), "auto");

    /* the document, as report_write builds it */
    const char *secrets[RUN_MAX_HEADERS + 2];
    struct host_info host;
    host_info_get(&host, NULL);
    res.stop_signal = SIGINT;
    res.interrupted = true;
    assert_int_equal(run_stats_new(&stats), 0);
    run_summary_compute(&sum, stats, 1.0, 0, &j->goodput);
    struct result_info info = {
        .config = conf,
        .argc = j->argc,
        .argv = j->argv,
        .options = j->o.options,
        .secrets = secrets,
        .nsecrets = report_secrets(j, secrets, sizeof(secrets) / sizeof(secrets[0])),
        .interrupted_by = interrupted_by(&res),
        .host = &host,
    };
    assert_int_equal(info.nsecrets, 2);
    json_t *doc = NULL;
    assert_int_equal(result_build(stats, &sum, &info, &doc), 0);
    const json_t *run = json_object_get(doc, "run");
    assert_string_equal(json_string_value(json_object_get(run, "interrupted_by")), "SIGINT");
    assert_true(json_integer_value(json_object_get(json_object_get(run, "host"), "cores")) > 0);
    char *text = json_dumps(doc, JSON_COMPACT);
    assert_non_null(text);
    assert_null(strstr(text, "sk-unit-key-1"));
    assert_null(strstr(text, "Bearer x"));
    assert_non_null(strstr(text, "\"Authorization: <redacted>\""));
    assert_non_null(strstr(text, "\"X-Tenant: t1\""));
    free(text);
    json_decref(doc);
    run_stats_free(stats);
    json_decref(conf);
    json_decref(j->overrides);
    run_quality_release(&j->o.quality);
    otlp_config_release(&j->otlp);
    free(j);
}

/* Why a run stopped, as run.interrupted_by says it. */
static void test_interrupted_by(void **state)
{
    struct runner_result r;
    (void)state;
    memset(&r, 0, sizeof(r));
    assert_null(interrupted_by(&r));
    r.interrupted = true;
    assert_string_equal(interrupted_by(&r), "stop");
    r.stop_signal = SIGTERM;
    assert_string_equal(interrupted_by(&r), "SIGTERM");
    r.stop_signal = SIGINT;
    assert_string_equal(interrupted_by(&r), "SIGINT");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_curl_init_fails),
        cmocka_unit_test(test_caller_keeps_quality),
        cmocka_unit_test(test_config_block_redacted),
        cmocka_unit_test(test_interrupted_by),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
