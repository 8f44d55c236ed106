/*
 * test_result.c - result.json (keys, values, secrets dropped, a round trip
 * through jansson back into run_stats) and requests.jsonl lines.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <getopt.h>

#include "base/alloc.h"
#include "base/hostinfo.h"
#include "report/result.h"
#include "ts_config.h"

#define MS   1000000ull
#define US   1000ull
#define BASE (1000000ull * MS)

static struct req_record ok_record(uint64_t ttft_ms, uint64_t e2el_ms)
{
    struct req_record r;
    memset(&r, 0, sizeof(r));
    r.id = 7;
    r.worker = 2;
    r.outcome = REQ_OK;
    r.http_status = 200;
    r.flags = REQF_STREAM;
    r.intended_ns = BASE + 1 * MS;
    r.start_ns = r.intended_ns + 500 * US;
    r.first_byte_ns = r.intended_ns + (ttft_ms - 1) * MS;
    r.first_chunk_ns = r.intended_ns + ttft_ms * MS;
    r.first_token_ns = r.first_chunk_ns + 2 * MS;
    r.last_chunk_ns = r.intended_ns + e2el_ms * MS;
    r.end_ns = r.last_chunk_ns + 1 * MS;
    r.prompt_tokens = 50;
    r.max_tokens = 11;
    r.usage_prompt_tokens = 52;
    r.usage_completion_tokens = 11;
    r.client_tokens = 11;
    r.content_chunks = 11;
    r.choice_chunks = 12;
    r.output_tokens = 11;
    r.token_source = TOKENS_USAGE;
    r.itl_sum_ns = (e2el_ms - ttft_ms) * MS;
    r.itl_max_ns = 30 * MS;
    r.sent_us = 120;
    r.ttfb_us = (uint32_t)((ttft_ms - 1) * 1000 - 500);
    strcpy(r.finish_reason, "length");
    return r;
}

struct fixture {
    struct run_stats *stats;
    struct run_summary sum;
    struct slo slos[2];
    json_t *config;
    json_t *timeline;
    struct result_info info;
    json_t *doc;
};

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    struct goodput_cfg cfg = {.ttft_ms = 150};
    char err[256];

    assert_non_null(fx);
    assert_int_equal(run_stats_new(&fx->stats), 0);
    for (uint64_t i = 1; i <= 4; i++) {
        struct req_record r = ok_record(50 * i, 500 + 10 * i); /* TTFT 50..200 ms */
        run_stats_add_record(fx->stats, &r, &cfg);
        for (int k = 0; k < 11; k++)
            run_stats_add_itl(fx->stats, (40 + i) * MS);
    }
    struct req_record r = ok_record(50, 60);
    r.outcome = REQ_HTTP_5XX;
    r.http_status = 502;
    run_stats_add_record(fx->stats, &r, &cfg);
    r.flags |= REQF_WARMUP;
    run_stats_add_record(fx->stats, &r, &cfg);
    run_summary_compute(&fx->sum, fx->stats, 10.0, 42.0, &cfg);

    assert_int_equal(slo_parse("ttft.p95<2s", &fx->slos[0], err, sizeof(err)), 0);
    assert_int_equal(slo_parse("error_rate<1%", &fx->slos[1], err, sizeof(err)), 0);
    fx->config =
        json_pack("{s:s, s:s, s:{s:s, s:s}, s:f, s:[{s:s}]}", "target", "http://127.0.0.1:9/v1",
                  "api_key", "sk-secret", "headers", "Authorization", "Bearer sk-secret", "X-Trace",
                  "1", "rate", 5.0, "steps", "Token", "sk-also-secret");
    fx->timeline = json_pack("[{s:i, s:i}]", "t", 0, "sent", 3);
    assert_non_null(fx->config);
    assert_non_null(fx->timeline);
    fx->info = (struct result_info){
        .config = fx->config,
        .started_wall_ns = 1700000000123000000ull,
        .warmup_s = 5,
        .end_cut = false,
        .slos = fx->slos,
        .nslos = 2,
        .timeline = fx->timeline,
    };
    assert_int_equal(result_build(fx->stats, &fx->sum, &fx->info, &fx->doc), 0);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    json_decref(fx->doc);
    json_decref(fx->config);
    json_decref(fx->timeline);
    run_stats_free(fx->stats);
    free(fx);
    return 0;
}

static const json_t *path(const json_t *doc, const char *a, const char *b)
{
    const json_t *v = json_object_get(doc, a);
    if (v && b)
        v = json_object_get(v, b);
    if (!v)
        fail_msg("missing %s%s%s", a, b ? "." : "", b ? b : "");
    return v;
}

static double real(const json_t *doc, const char *a, const char *b)
{
    const json_t *v = path(doc, a, b);
    assert_true(json_is_number(v));
    return json_number_value(v);
}

static long long integer(const json_t *doc, const char *a, const char *b)
{
    const json_t *v = path(doc, a, b);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

static void test_document_keys(void **state)
{
    struct fixture *fx = *state;
    const json_t *doc = fx->doc;

    assert_string_equal(json_string_value(path(doc, "schema", NULL)), "tokenstorm.result/1");
    assert_string_equal(json_string_value(path(doc, "tool", "name")), "tokenstorm");
    assert_string_equal(json_string_value(path(doc, "tool", "version")), TS_VERSION);

    /* run: the echo without credentials, plus the run's own facts. */
    const json_t *run = path(doc, "run", NULL);
    assert_string_equal(json_string_value(json_object_get(run, "target")), "http://127.0.0.1:9/v1");
    assert_null(json_object_get(run, "api_key"));
    assert_null(json_object_get(json_object_get(run, "headers"), "Authorization"));
    assert_non_null(json_object_get(json_object_get(run, "headers"), "X-Trace"));
    assert_int_equal(json_object_size(json_array_get(json_object_get(run, "steps"), 0)), 0);
    assert_string_equal(json_string_value(json_object_get(run, "started_at")),
                        "2023-11-14T22:13:20.123Z");
    assert_true(real(doc, "run", "duration_s") == 10.0);
    assert_true(real(doc, "run", "warmup_s") == 5.0);
    assert_string_equal(json_string_value(json_object_get(run, "end_mode")), "waited");
    /* The caller's object is untouched. */
    assert_non_null(json_object_get(fx->config, "api_key"));

    /* summary: vLLM's keys and values. */
    assert_int_equal(integer(doc, "summary", "completed"), 4);
    assert_int_equal(integer(doc, "summary", "failed"), 1);
    assert_true(real(doc, "summary", "duration") == 10.0);
    assert_int_equal(integer(doc, "summary", "total_input_tokens"), 4 * 52);
    assert_int_equal(integer(doc, "summary", "total_output_tokens"), 44);
    assert_true(real(doc, "summary", "request_throughput") == 0.4);
    /* goodput judges the first token (52, 102, 152, 202 ms), not the first
     * chunk (50 .. 200 ms): 2 of them <= 150 */
    assert_true(real(doc, "summary", "request_goodput") == 0.2);
    assert_true(real(doc, "summary", "output_throughput") == 4.4);
    assert_true(fabs(real(doc, "summary", "total_token_throughput") - 25.2) < 1e-12);
    assert_true(real(doc, "summary", "max_output_tokens_per_s") == 42.0);
    /* numpy over TTFT {50, 100, 150, 200} and E2EL {510, 520, 530, 540} ms */
    assert_true(fabs(real(doc, "summary", "mean_ttft_ms") - 125.0) < 1e-9);
    assert_true(fabs(real(doc, "summary", "median_ttft_ms") - 125.0) < 1e-9);
    assert_true(real(doc, "summary", "p50_ttft_ms") == fx->sum.vllm[STAT_TTFT].pct[0]);
    assert_true(fabs(real(doc, "summary", "p99.9_e2el_ms") - 539.97) < 1e-9);
    assert_true(fabs(real(doc, "summary", "p99_ttft_ms") - 198.5) < 1e-9);
    /* no chunk times in these records: itl falls back to the histogram */
    assert_true(fabs(real(doc, "summary", "mean_itl_ms") - 42.5) <= 0.05);
    assert_non_null(path(doc, "summary", "std_tpot_ms"));
    assert_non_null(path(doc, "summary", "mean_ttfc_ms"));
    assert_non_null(path(doc, "summary", "p99_lag_ms"));
    assert_int_equal(integer(doc, "summary", "requests"), 5);
    assert_int_equal(integer(doc, "summary", "cut"), 0);
    assert_int_equal(integer(doc, "summary", "good"), 2);
    /* first token 2 ms after the first chunk: within 5 ms, not apart */
    assert_true(json_is_false(path(path(doc, "summary", "first_token"), "differs", NULL)));
    assert_true(real(path(doc, "summary", "first_token"), "threshold_ms", NULL) == 5.0);
    assert_non_null(path(doc, "summary", "p50_ttfa_ms"));
    assert_true(real(doc, "summary", "error_rate") == 0.2);
    assert_string_equal(json_string_value(path(doc, "summary", "token_method")), "usage");
    assert_true(real(path(doc, "summary", "goodput_config"), "ttft_ms", NULL) == 150.0);

    /* latency: every metric, ms. */
    const json_t *lat = path(doc, "latency", NULL);
    assert_int_equal(json_object_size(lat), STAT_METRIC_COUNT);
    assert_int_equal(integer(lat, "ttft", "count"), 4);
    assert_true(fabs(real(lat, "ttft", "min") - 50.0) <= 0.05);
    assert_true(fabs(real(lat, "ttft", "max") - 200.0) <= 0.2);
    assert_non_null(path(lat, "e2el_uncorrected", "p99.9"));
    assert_int_equal(integer(lat, "itl", "count"), 44);
    assert_int_equal(integer(lat, "dns", "count"), 0);
    /* a metric with no sample was not measured: null, not 0 ms */
    assert_true(json_is_null(path(lat, "dns", "mean")));
    assert_true(json_is_null(path(lat, "dns", "p99")));
    assert_true(json_is_null(path(lat, "dns", "max")));

    /* counters */
    assert_int_equal(integer(doc, "outcomes", "ok"), 4);
    assert_int_equal(integer(doc, "outcomes", "http_5xx"), 1);
    assert_int_equal(integer(doc, "outcomes", "cut"), 0);
    assert_int_equal(json_object_size(path(doc, "outcomes", NULL)), REQ_OUTCOME_COUNT);
    assert_int_equal(integer(doc, "http_status", "2xx"), 4);
    assert_int_equal(integer(doc, "http_status", "5xx"), 1);
    assert_int_equal(integer(doc, "streams", "streamed"), 5);
    assert_string_equal(json_string_value(path(doc, "tokens", "method")), "usage");
    assert_int_equal(integer(path(doc, "tokens", "by_method"), "usage", NULL), 4);
    assert_int_equal(integer(doc, "tokens", "output_all"), 55);
    assert_int_equal(integer(doc, "warmup", "requests"), 1);

    /* slo verdicts */
    const json_t *slo = path(doc, "slo", NULL);
    assert_int_equal(json_array_size(slo), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(slo, 0), "expr")),
                        "ttft.p95<2s");
    assert_true(json_is_true(json_object_get(json_array_get(slo, 0), "pass")));
    assert_true(json_is_false(json_object_get(json_array_get(slo, 1), "pass")));
    assert_true(json_number_value(json_object_get(json_array_get(slo, 1), "actual")) == 0.2);

    /* timeline copied, histograms encoded */
    assert_true(json_equal(path(doc, "timeline", NULL), fx->timeline));
    /* one per metric, plus the array of ITL-by-position histograms */
    assert_int_equal(json_object_size(path(doc, "histograms", NULL)), STAT_METRIC_COUNT + 1);
    assert_int_equal(json_array_size(path(doc, "histograms", "itl_by_position")), ITL_POS_BUCKETS);
    assert_true(json_string_length(path(doc, "histograms", "ttft")) > 20);
}

static void assert_stats_equal(const struct run_stats *a, const struct run_stats *b)
{
    for (int m = 0; m < STAT_METRIC_COUNT; m++)
        assert_true(hdr_equal(a->hist[m], b->hist[m]));
    for (int m = 0; m < ITL_POS_BUCKETS; m++)
        assert_true(hdr_equal(a->itl_pos[m], b->itl_pos[m]));
    size_t off = offsetof(struct run_stats, requests);
    assert_memory_equal((const char *)a + off, (const char *)b + off,
                        offsetof(struct run_stats, errors) - off);
    /* the error tally keeps keys in first-seen order, which merging may change */
    assert_true(errtally_equal(&a->errors, &b->errors));
}

static void test_round_trip(void **state)
{
    struct fixture *fx = *state;
    char err[256];
    json_error_t jerr;
    struct run_stats *back = NULL;

    char *text = json_dumps(fx->doc, JSON_INDENT(2) | JSON_REAL_PRECISION(12));
    assert_non_null(text);
    json_t *again = json_loads(text, 0, &jerr);
    free(text);
    assert_non_null(again);
    assert_int_equal(result_read_stats(again, &back, err, sizeof(err)), 0);
    assert_stats_equal(back, fx->stats);

    /* The same summary comes out of the rebuilt stats. */
    struct run_summary sum2;
    run_summary_compute(&sum2, back, 10.0, 42.0, &(struct goodput_cfg){.ttft_ms = 150});
    for (int m = 0; m < STAT_METRIC_COUNT; m++) {
        assert_int_equal(sum2.lat[m].count, fx->sum.lat[m].count);
        assert_true(sum2.lat[m].pct[3] == fx->sum.lat[m].pct[3]);
        assert_true(sum2.lat[m].max == fx->sum.lat[m].max);
    }
    assert_true(sum2.request_goodput == fx->sum.request_goodput);

    /* Merging two read-back results doubles every count. */
    struct run_stats *twice = NULL;
    assert_int_equal(result_read_stats(again, &twice, err, sizeof(err)), 0);
    assert_int_equal(run_stats_merge(twice, back), 0);
    assert_int_equal(twice->requests, 10);
    assert_int_equal(hdr_total_count(twice->hist[STAT_ITL]), 88);
    run_stats_free(twice);
    run_stats_free(back);
    json_decref(again);
}

/*
 * The vLLM-named fields are numpy's over the exact samples: 152 ok requests
 * with TTFT 1..152 ms give p99_ttft_ms 150.49 (rank 149.49, between 150 and
 * 151 ms), median 76.5, mean 76.5, std sqrt((152^2 - 1) / 12), where the
 * histogram's p99 is the 151 ms bucket (latency.ttft.p99). Read back from
 * the file, the values are gone: the fields fall back to the histograms and
 * "vllm.fields" says so.
 */
/* A vector run's recall comes back from result.json exactly (the state), so
 * merged files and ranks keep mean and p5; a broken state is an error. */
static void test_recall_round_trip(void **state)
{
    (void)state;
    struct run_stats *s = NULL, *back = NULL;
    assert_int_equal(run_stats_new(&s), 0);
    for (int i = 0; i < 30; i++) {
        struct req_record r = ok_record(10, 20);
        r.has_recall = true;
        r.recall_k = 7;
        r.recall = (double)(i % 8) / 7.0;
        run_stats_add_record(s, &r, NULL);
    }
    struct run_summary sum;
    run_summary_compute(&sum, s, 10.0, 0, NULL);
    struct result_info info = {0};
    json_t *doc = NULL;
    char err[256];
    assert_int_equal(result_build(s, &sum, &info, &doc), 0);
    const json_t *vs = json_object_get(doc, "vector_search");
    assert_non_null(json_object_get(vs, "state"));
    assert_int_equal(result_read_stats(doc, &back, err, sizeof(err)), 0);
    assert_memory_equal(&back->recall, &s->recall, sizeof(s->recall));
    assert_int_equal(back->recall_k, 7);
    run_stats_free(back);
    json_object_set_new(json_object_get(json_object_get(doc, "vector_search"), "state"), "recall",
                        json_string("x"));
    assert_int_equal(result_read_stats(doc, &back, err, sizeof(err)), TS_PARSE);
    assert_non_null(strstr(err, "vector_search.state"));
    json_decref(doc);
    run_stats_free(s);
}

static void test_vllm_fields_exact(void **state)
{
    (void)state;
    struct run_stats *st = NULL, *back = NULL;
    struct run_summary sum, sum2;
    struct result_info info = {0};
    json_t *doc = NULL;
    char err[256];

    assert_int_equal(run_stats_new(&st), 0);
    for (uint64_t i = 1; i <= 152; i++) {
        struct req_record r = ok_record(i, 200 + i);
        r.chunk_ns = NULL; /* no chunk times: itl is not exact */
        run_stats_add_record(st, &r, NULL);
    }
    run_summary_compute(&sum, st, 10.0, 0, NULL);
    assert_int_equal(result_build(st, &sum, &info, &doc), 0);
    assert_true(fabs(real(doc, "summary", "p99_ttft_ms") - 150.49) < 1e-9);
    assert_true(fabs(real(doc, "summary", "median_ttft_ms") - 76.5) < 1e-9);
    assert_true(fabs(real(doc, "summary", "mean_ttft_ms") - 76.5) < 1e-9);
    assert_true(fabs(real(doc, "summary", "std_ttft_ms") - sqrt((152.0 * 152 - 1) / 12)) < 1e-9);
    double hdr_p99 = json_number_value(json_object_get(path(doc, "latency", "ttft"), "p99"));
    assert_true(hdr_p99 >= 151.0 && hdr_p99 < 151.2);
    const json_t *f = path(path(doc, "vllm", "fields"), "ttft", NULL);
    assert_string_equal(json_string_value(json_object_get(f, "method")), "exact");
    assert_int_equal(json_integer_value(json_object_get(f, "samples")), 152);
    f = path(path(doc, "vllm", "fields"), "itl", NULL);
    assert_string_equal(json_string_value(json_object_get(f, "method")), "hdr");
    assert_string_equal(json_string_value(json_object_get(f, "why")), "not_kept");
    const json_t *in = path(path(doc, "vllm", "differences"), "total_input_tokens", NULL);
    assert_int_equal(json_integer_value(json_object_get(in, "tokenstorm")), 152 * 52);
    assert_int_equal(json_integer_value(json_object_get(in, "vllm")), 152 * 50);
    assert_int_equal(integer(doc, "tokens", "input_intended"), 152 * 50);

    assert_int_equal(result_read_stats(doc, &back, err, sizeof(err)), 0);
    assert_int_equal(back->input_tokens_intended, 152 * 50);
    run_summary_compute(&sum2, back, 10.0, 0, NULL);
    assert_int_equal(sum2.vllm_loss[STAT_TTFT], SAMPLES_NOT_KEPT);
    assert_true(sum2.vllm[STAT_TTFT].pct[3] == sum2.lat[STAT_TTFT].pct[3]);
    json_decref(doc);
    run_stats_free(back);
    run_stats_free(st);
}

static void test_read_errors(void **state)
{
    struct fixture *fx = *state;
    char err[256];
    struct run_stats *s = NULL;
    json_t *doc;

    doc = json_pack("{s:s}", "schema", "something/2");
    assert_int_equal(result_read_stats(doc, &s, err, sizeof(err)), TS_PARSE);
    assert_string_equal(err, "result: not a tokenstorm.result/1 document");
    json_decref(doc);
    assert_int_equal(result_read_stats(NULL, &s, err, sizeof(err)), TS_PARSE);

    doc = json_deep_copy(fx->doc);
    json_object_set_new(json_object_get(doc, "outcomes"), "ok", json_string("x"));
    assert_int_equal(result_read_stats(doc, &s, err, sizeof(err)), TS_PARSE);
    assert_string_equal(err, "result: not a count: 'outcomes.ok'");
    json_decref(doc);

    doc = json_deep_copy(fx->doc);
    json_object_set_new(json_object_get(doc, "tokens"), "input", json_integer(-1));
    assert_int_equal(result_read_stats(doc, &s, err, sizeof(err)), TS_PARSE);
    assert_string_equal(err, "result: not a count: 'tokens.input'");
    json_decref(doc);

    doc = json_deep_copy(fx->doc);
    json_object_set_new(json_object_get(doc, "histograms"), "tpot", json_string("AAAA"));
    assert_int_equal(result_read_stats(doc, &s, err, sizeof(err)), TS_PARSE);
    assert_string_equal(err, "result: histogram does not decode: tpot");
    json_decref(doc);
    assert_null(s);

    /* Sections that are missing count as zero (older or hand-made documents). */
    doc = json_pack("{s:s}", "schema", RESULT_SCHEMA);
    assert_int_equal(result_read_stats(doc, &s, NULL, 0), 0);
    assert_int_equal(s->requests, 0);
    run_stats_free(s);
    json_decref(doc);
}

static void test_build_rejects_wrong_types(void **state)
{
    struct fixture *fx = *state;
    struct result_info info = fx->info;
    json_t *doc = NULL;
    json_t *arr = json_array();

    info.config = arr;
    assert_int_equal(result_build(fx->stats, &fx->sum, &info, &doc), -EINVAL);
    info.config = NULL;
    info.timeline = fx->config;
    assert_int_equal(result_build(fx->stats, &fx->sum, &info, &doc), -EINVAL);
    assert_null(doc);

    /* Minimal: no config, no timeline, no SLOs, goodput off, end cut. */
    struct run_summary sum = fx->sum;
    sum.goodput_enabled = false;
    info = (struct result_info){.end_cut = true, .tool_version = "9.9"};
    assert_int_equal(result_build(fx->stats, &sum, &info, &doc), 0);
    assert_true(json_is_null(json_object_get(json_object_get(doc, "summary"), "request_goodput")));
    assert_true(json_is_null(json_object_get(json_object_get(doc, "run"), "started_at")));
    assert_string_equal(json_string_value(path(doc, "run", "end_mode")), "cut");
    assert_string_equal(json_string_value(path(doc, "tool", "version")), "9.9");
    assert_int_equal(json_array_size(path(doc, "slo", NULL)), 0);
    assert_int_equal(json_array_size(path(doc, "timeline", NULL)), 0);
    json_decref(doc);
    json_decref(arr);
}

static void test_build_out_of_memory(void **state)
{
    struct fixture *fx = *state;
    /* Fail each allocation in turn (histogram encoding allocates through ts_malloc). */
    for (long n = 0; n < 200; n++) {
        json_t *doc = NULL;
        ts_alloc_fail_after(n);
        int rc = result_build(fx->stats, &fx->sum, &fx->info, &doc);
        ts_alloc_fail_after(-1);
        if (rc == 0) {
            json_decref(doc);
            return;
        }
        assert_int_equal(rc, -ENOMEM);
        assert_null(doc);
    }
    fail_msg("result_build never succeeded");
}

static void test_write_file(void **state)
{
    struct fixture *fx = *state;
    char dir[] = "/tmp/test_result.XXXXXX";
    char file[128], tmp[160], err[256];
    json_error_t jerr;

    assert_non_null(mkdtemp(dir));
    snprintf(file, sizeof(file), "%s/result.json", dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", file);
    assert_int_equal(result_write_file(fx->doc, file, err, sizeof(err)), 0);
    assert_int_equal(access(tmp, F_OK), -1);
    json_t *back = json_load_file(file, 0, &jerr);
    assert_non_null(back);
    assert_string_equal(json_string_value(json_object_get(back, "schema")), RESULT_SCHEMA);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(back, "summary"), "completed")), 4);
    json_decref(back);
    assert_int_equal(unlink(file), 0);

    snprintf(file, sizeof(file), "%s/missing/result.json", dir);
    assert_true(result_write_file(fx->doc, file, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "missing/result.json.tmp: "));
    assert_int_equal(rmdir(dir), 0);
}

static char *line_of(const struct req_record *r, uint64_t start)
{
    struct buf b;
    buf_init(&b, 4096);
    assert_int_equal(req_record_append_json(&b, r, start), 0);
    char *s = buf_take(&b, NULL);
    buf_release(&b);
    return s;
}

/* --save-chunk-times: chunk_us holds each chunk's offset from start in whole
 * microseconds (rounded), says whether every chunk was kept, is null when
 * none were, and is absent without the flag. */
static void test_request_line_chunk_times(void **state)
{
    (void)state;
    struct req_record r = ok_record(100, 500);
    uint64_t t[3] = {r.start_ns + 99 * MS + 400, r.start_ns + 120 * MS + 600,
                     r.start_ns + 499 * MS};
    struct buf b;
    json_error_t jerr;

    r.choice_chunks = 3;
    r.chunk_ns = t;
    r.n_chunk_ns = 3;
    buf_init(&b, 1 << 16);
    assert_int_equal(req_record_append_json_ex(&b, &r, BASE, REQ_JSON_CHUNK_TIMES), 0);
    assert_non_null(strstr(buf_cstr(&b), ",\"chunk_us\":[99000,120001,499000],"
                                         "\"chunk_us_complete\":true}\n"));
    json_t *o = json_loads(buf_cstr(&b), 0, &jerr);
    assert_non_null(o);
    json_decref(o);
    buf_reset(&b);
    r.choice_chunks = 5; /* more chunks than were kept */
    assert_int_equal(req_record_append_json_ex(&b, &r, BASE, REQ_JSON_CHUNK_TIMES), 0);
    assert_non_null(strstr(buf_cstr(&b), "499000],\"chunk_us_complete\":false}"));
    buf_reset(&b);
    r.chunk_ns = NULL;
    assert_int_equal(req_record_append_json_ex(&b, &r, BASE, REQ_JSON_CHUNK_TIMES), 0);
    assert_non_null(strstr(buf_cstr(&b), ",\"chunk_us\":null}"));
    buf_reset(&b);
    r.chunk_ns = t;
    assert_int_equal(req_record_append_json(&b, &r, BASE), 0);
    assert_null(strstr(buf_cstr(&b), "chunk_us"));
    buf_release(&b);
}

static void test_request_line(void **state)
{
    json_error_t jerr;
    struct req_record r = ok_record(100, 500);
    char *line = line_of(&r, BASE);

    /* One line, exactly. */
    assert_non_null(strchr(line, '\n'));
    assert_int_equal(strchr(line, '\n')[1], '\0');
    /* Times relative to the run start, ms with 3 decimals. */
    assert_non_null(strstr(line, "\"intended_ms\":1.000,"));
    assert_non_null(strstr(line, "\"start_ms\":1.500,"));
    assert_non_null(strstr(line, "\"first_chunk_ms\":101.000,"));
    assert_non_null(strstr(line, "\"lag_ms\":0.500,"));
    assert_non_null(strstr(line, "\"ttft_ms\":100.000,"));
    assert_non_null(strstr(line, "\"ttfc_ms\":102.000,"));
    assert_non_null(strstr(line, "\"e2el_ms\":500.000,"));
    assert_non_null(strstr(line, "\"tpot_ms\":40.000,"));
    assert_non_null(strstr(line, "\"dns_ms\":null,"));
    assert_non_null(strstr(line, "\"sent_ms\":0.120,"));
    assert_non_null(strstr(line, "\"itl_mean_ms\":36.364,")); /* 400 ms / 11 gaps */

    json_t *o = json_loads(line, 0, &jerr);
    assert_non_null(o);
    assert_int_equal(json_integer_value(json_object_get(o, "id")), 7);
    assert_int_equal(json_integer_value(json_object_get(o, "worker")), 2);
    assert_string_equal(json_string_value(json_object_get(o, "outcome")), "ok");
    assert_string_equal(json_string_value(json_object_get(o, "token_source")), "usage");
    assert_string_equal(json_string_value(json_object_get(o, "finish_reason")), "length");
    assert_true(json_is_null(json_object_get(o, "error")));
    assert_true(json_is_true(json_object_get(o, "stream")));
    assert_true(json_is_false(json_object_get(o, "warmup")));
    assert_int_equal(json_integer_value(json_object_get(o, "usage_prompt_tokens")), 52);
    assert_true(json_number_value(json_object_get(o, "end_ms")) == 502.0);
    assert_null(json_object_get(o, "recall")); /* not a search */
    json_decref(o);
    free(line);
    /* a search's recall@k: its value and k */
    r.has_recall = true;
    r.recall = 2.0 / 3.0;
    r.recall_k = 3;
    line = line_of(&r, BASE);
    assert_non_null(strstr(line, ",\"recall\":0.666666667,\"recall_k\":3,"));
    free(line);
}

static void test_request_line_edge_cases(void **state)
{
    json_error_t jerr;
    struct req_record r;
    memset(&r, 0, sizeof(r));
    r.outcome = REQ_STREAM_ERROR;
    r.http_status = 200;
    r.intended_ns = BASE - 500 * US; /* scheduled before the run start mark */
    r.start_ns = BASE + 1499;        /* rounds to 0.001 ms */
    r.usage_prompt_tokens = -1;
    r.usage_completion_tokens = -1;
    r.token_source = TOKENS_CHUNKS;
    /* Quotes, a newline, a control byte, and UTF-8: valid, truncated, invalid. */
    strcpy(r.error, "bad \"x\"\n\x01 caf\xc3\xa9 \xe2\x82 \xff end");
    memcpy(r.finish_reason, "0123456789abcdef", 16); /* no NUL: bounded by the array */

    char *line = line_of(&r, BASE);
    assert_non_null(strstr(line, "\"intended_ms\":-0.500,"));
    assert_non_null(strstr(line, "\"start_ms\":0.001,"));
    assert_non_null(strstr(line, "\"first_chunk_ms\":null,"));
    assert_non_null(strstr(line, "\"ttft_ms\":null,"));
    assert_non_null(strstr(line, "\"tpot_ms\":null,"));
    assert_non_null(strstr(line, "\"itl_mean_ms\":null,"));
    assert_non_null(strstr(line, "\"usage_prompt_tokens\":null,"));
    assert_non_null(strstr(line, "\"error\":\"bad \\\"x\\\"\\u000a\\u0001 caf\xc3\xa9 "
                                 "\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd end\"}"));

    json_t *o = json_loads(line, 0, &jerr);
    if (!o)
        fail_msg("not JSON: %s (%s)", jerr.text, line);
    assert_string_equal(json_string_value(json_object_get(o, "outcome")), "stream_error");
    assert_string_equal(json_string_value(json_object_get(o, "finish_reason")), "0123456789abcdef");
    assert_string_equal(json_string_value(json_object_get(o, "error")),
                        "bad \"x\"\n\x01 caf\xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd end");
    json_decref(o);
    free(line);

    /* A full buffer fails and leaves what was there. */
    struct buf b;
    buf_init(&b, 64);
    assert_int_equal(buf_append_str(&b, "keep"), 0);
    assert_int_equal(req_record_append_json(&b, &r, BASE), TS_TOOBIG);
    assert_string_equal(buf_cstr(&b), "keep");
    buf_release(&b);
}

/* ---- what was run: command line, interruption, host ---- */

static const struct option test_options[] = {
    {"api-key", required_argument, NULL, 1},       {"api-insecure", no_argument, NULL, 2},
    {"header", required_argument, NULL, 3},        {"body", required_argument, NULL, 4},
    {"target", required_argument, NULL, 5},        {"integrity", required_argument, NULL, 6},
    {"integrity-key", required_argument, NULL, 7}, {"rate", required_argument, NULL, 8},
    {"tokenizer", required_argument, NULL, 9},     {NULL, 0, NULL, 0},
};

static char *dump(const json_t *doc)
{
    char *text = json_dumps(doc, JSON_COMPACT);
    assert_non_null(text);
    return text;
}

/* Every way a secret reaches the command line is redacted, and nothing else is
 * changed; none of the secrets is anywhere in the document. */
static void test_command_line_redacted(void **state)
{
    struct fixture *fx = *state;
    char *argv[] = {"run",
                    "--api-key",
                    "sk-live-123456",
                    "--header",
                    "Authorization: Bearer x",
                    "--header",
                    "X-Tenant: t1",
                    "--api-k=sk-live-123456",
                    "--header=X-Goog-Api-Key: gk-999999",
                    "--integrity",
                    "hmac",
                    "--integrity-key",
                    "hmackey99",
                    "--body",
                    "{\"temperature\":0,\"password\":\"pw123456\"}",
                    "--target",
                    "https://user:pa55word@h.example/v1?api-key=qs-secret-1&x=1#f",
                    "--tokenizer",
                    "tok.json",
                    "--rate",
                    "5",
                    "scenario.yaml",
                    "--",
                    "--api-key"};
    const char *secrets[] = {"sk-live-123456", "Bearer x", "x"};
    const char *want[] = {"tokenstorm",
                          "run",
                          "--api-key",
                          RESULT_REDACTED,
                          "--header",
                          "Authorization: " RESULT_REDACTED,
                          "--header",
                          "X-Tenant: t1",
                          "--api-k=" RESULT_REDACTED,
                          "--header=X-Goog-Api-Key: " RESULT_REDACTED,
                          "--integrity",
                          "hmac",
                          "--integrity-key",
                          RESULT_REDACTED,
                          "--body",
                          "{\"temperature\":0}",
                          "--target",
                          "https://user:" RESULT_REDACTED "@h.example/v1?api-key=" RESULT_REDACTED
                          "&x=1#f",
                          "--tokenizer",
                          "tok.json",
                          "--rate",
                          "5",
                          "scenario.yaml",
                          "--",
                          "--api-key"};
    json_t *doc = NULL;

    fx->info.argc = (int)(sizeof(argv) / sizeof(argv[0]));
    fx->info.argv = argv;
    fx->info.options = test_options;
    fx->info.secrets = secrets;
    fx->info.nsecrets = 3; /* "x" is too short to search for */
    assert_int_equal(result_build(fx->stats, &fx->sum, &fx->info, &doc), 0);
    const json_t *cl = json_object_get(json_object_get(doc, "run"), "command_line");
    assert_int_equal(json_array_size(cl), sizeof(want) / sizeof(want[0]));
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        assert_string_equal(json_string_value(json_array_get(cl, i)), want[i]);
    char *text = dump(doc);
    const char *never[] = {"sk-live-123456", "Bearer x", "gk-999999",   "hmackey99",
                           "pw123456",       "pa55word", "qs-secret-1", "sk-secret"};
    for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
        assert_null(strstr(text, never[i]));
    free(text);
    json_decref(doc);
}

/* Without the getopt table: exact names, and unknown credential-like ones
 * take their value with them. */
static void test_command_line_without_table(void **state)
{
    struct fixture *fx = *state;
    char *argv[] = {"run", "--api-token", "tok-abcdef", "--foo-secret=s3cr3t", "--rate", "5"};
    json_t *doc = NULL;

    fx->info.argc = 6;
    fx->info.argv = argv;
    assert_int_equal(result_build(fx->stats, &fx->sum, &fx->info, &doc), 0);
    char *text = dump(json_object_get(json_object_get(doc, "run"), "command_line"));
    assert_string_equal(text, "[\"tokenstorm\",\"run\",\"--api-token\",\"<redacted>\","
                              "\"--foo-secret=<redacted>\",\"--rate\",\"5\"]");
    free(text);
    json_decref(doc);
}

/* A known secret hidden in any string of the configuration echo is replaced;
 * URLs anywhere in it lose their credentials. */
static void test_run_strings_scrubbed(void **state)
{
    struct fixture *fx = *state;
    json_t *config = json_pack("{s:s, s:s, s:[s]}", "target", "http://u:pw@127.0.0.1:9/v1", "note",
                               "key is sk-live-123456!", "list", "sk-live-123456");
    const char *secrets[] = {"sk-live-123456"};
    json_t *doc = NULL;

    fx->info.config = config;
    fx->info.secrets = secrets;
    fx->info.nsecrets = 1;
    assert_int_equal(result_build(fx->stats, &fx->sum, &fx->info, &doc), 0);
    const json_t *run = json_object_get(doc, "run");
    assert_string_equal(json_string_value(json_object_get(run, "target")),
                        "http://u:" RESULT_REDACTED "@127.0.0.1:9/v1");
    assert_string_equal(json_string_value(json_object_get(run, "note")),
                        "key is " RESULT_REDACTED "!");
    assert_string_equal(json_string_value(json_array_get(json_object_get(run, "list"), 0)),
                        RESULT_REDACTED);
    assert_null(json_object_get(run, "command_line")); /* no argv given */
    json_decref(doc);
    json_decref(config);
}

static void test_interrupted_and_host(void **state)
{
    struct fixture *fx = *state;
    struct host_info h = {.cpu_model = "Test CPU", .cores = 3, .kernel = "6.1.0", .os = "Linux"};
    const json_t *run = json_object_get(fx->doc, "run");
    json_t *doc = NULL;

    assert_true(json_is_false(json_object_get(run, "interrupted")));
    assert_true(json_is_null(json_object_get(run, "interrupted_by")));
    assert_null(json_object_get(run, "host"));
    fx->info.interrupted_by = "SIGTERM";
    fx->info.host = &h;
    assert_int_equal(result_build(fx->stats, &fx->sum, &fx->info, &doc), 0);
    run = json_object_get(doc, "run");
    assert_true(json_is_true(json_object_get(run, "interrupted")));
    assert_string_equal(json_string_value(json_object_get(run, "interrupted_by")), "SIGTERM");
    const json_t *host = json_object_get(run, "host");
    assert_string_equal(json_string_value(json_object_get(host, "cpu_model")), "Test CPU");
    assert_int_equal(json_integer_value(json_object_get(host, "cores")), 3);
    assert_string_equal(json_string_value(json_object_get(host, "kernel")), "6.1.0");
    assert_true(json_is_null(json_object_get(host, "arch")));
    json_decref(doc);
}

static void test_secret_header_names(void **state)
{
    (void)state;
    const char *secret[] = {"Authorization",
                            "proxy-authorization",
                            "X-Api-Key",
                            "api-key",
                            "X-Auth-Token",
                            "Cookie",
                            "X-Amz-Security-Token",
                            "Ocp-Apim-Subscription-Key"};
    const char *plain[] = {"X-Tenant", "Content-Type", "X-Request-Id", "Accept"};
    for (size_t i = 0; i < sizeof(secret) / sizeof(secret[0]); i++)
        assert_true(result_secret_header(secret[i], strlen(secret[i])));
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
        assert_false(result_secret_header(plain[i], strlen(plain[i])));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recall_round_trip),
        cmocka_unit_test(test_vllm_fields_exact),
        cmocka_unit_test(test_request_line_chunk_times),
        cmocka_unit_test_setup_teardown(test_document_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_build_rejects_wrong_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_build_out_of_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_file, setup, teardown),
        cmocka_unit_test(test_request_line),
        cmocka_unit_test(test_request_line_edge_cases),
        cmocka_unit_test_setup_teardown(test_command_line_redacted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_command_line_without_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_run_strings_scrubbed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interrupted_and_host, setup, teardown),
        cmocka_unit_test(test_secret_header_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
