/*
 * test_summary.c - summary numbers (throughputs, goodput, percentiles in ms)
 * from synthetic stats, checked against hand-computed values.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <math.h>
#include <string.h>
#include <cmocka.h>

#include "analysis/summary.h"

#define MS   1000000ull
#define US   1000ull
#define BASE (1000000ull * MS)

static void assert_near(double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol))
        fail_msg("got %.9g, want %.9g (+- %g)", got, want, tol);
}

/*
 * 100 successful streams: request i (1..100) has TTFT i * 10 us from its
 * intended time, E2EL i ms, 5 output tokens from usage, 100 prompt tokens,
 * 4 chunks with choices. Values below 2048 us sit in exact histogram buckets.
 */
static struct run_stats *hundred(const struct goodput_cfg *cfg)
{
    struct run_stats *s = NULL;
    assert_int_equal(run_stats_new(&s), 0);
    for (uint64_t i = 1; i <= 100; i++) {
        struct req_record r;
        memset(&r, 0, sizeof(r));
        r.outcome = REQ_OK;
        r.http_status = 200;
        r.flags = REQF_STREAM;
        r.intended_ns = BASE + i * 10 * MS;
        r.start_ns = r.intended_ns;
        r.first_chunk_ns = r.intended_ns + i * 10 * US;
        r.first_token_ns = r.first_chunk_ns;
        r.last_chunk_ns = r.intended_ns + i * MS;
        r.end_ns = r.last_chunk_ns;
        r.prompt_tokens = 100;
        r.usage_prompt_tokens = 100;
        r.output_tokens = 5;
        r.choice_chunks = 4;
        r.token_source = TOKENS_USAGE;
        run_stats_add_record(s, &r, cfg);
    }
    return s;
}

static void test_headline_numbers(void **state)
{
    struct goodput_cfg cfg = {.ttft_ms = 0.5}; /* TTFT <= 500 us: requests 1..50 */
    struct run_stats *s = hundred(&cfg);
    struct req_record r;
    struct run_summary sum;

    /* Plus one failure, one cut and one warm-up request. */
    memset(&r, 0, sizeof(r));
    r.outcome = REQ_HTTP_5XX;
    r.http_status = 500;
    r.intended_ns = r.start_ns = BASE;
    run_stats_add_record(s, &r, &cfg);
    r.outcome = REQ_CUT;
    run_stats_add_record(s, &r, &cfg);
    r.flags = REQF_WARMUP;
    run_stats_add_record(s, &r, &cfg);

    run_summary_compute(&sum, s, 10.0, 73.0, &cfg);
    assert_ptr_equal(sum.stats, s);
    assert_int_equal(sum.requests, 102);
    assert_int_equal(sum.completed, 100);
    assert_int_equal(sum.failed, 1);
    assert_int_equal(sum.cut, 1);
    assert_int_equal(sum.warmup_requests, 1);
    assert_int_equal(sum.total_input_tokens, 10000);
    assert_int_equal(sum.total_output_tokens, 500);
    assert_near(sum.duration_s, 10.0, 0);
    assert_near(sum.request_throughput, 10.0, 1e-12);
    assert_near(sum.output_throughput, 50.0, 1e-12);
    assert_near(sum.total_token_throughput, 1050.0, 1e-12);
    assert_true(sum.goodput_enabled);
    assert_int_equal(sum.good, 50);
    assert_near(sum.request_goodput, 5.0, 1e-12);
    assert_near(sum.goodput.ttft_ms, 0.5, 0);
    assert_near(sum.error_rate, 1.0 / 101.0, 1e-15);
    assert_near(sum.max_output_tokens_per_s, 73.0, 0);
    assert_string_equal(sum.token_method, "usage");
    assert_near(sum.tokens_per_chunk, 1.25, 1e-12);

    /* TTFT: 10, 20, ..., 1000 us. */
    const struct latency_summary *t = &sum.lat[STAT_TTFT];
    assert_int_equal(t->count, 100);
    assert_near(t->mean, 0.505, 1e-12);
    /* population std of 10..1000 step 10 = 10 * sqrt((100^2 - 1) / 12) us */
    assert_near(t->std, 0.01 * sqrt(9999.0 / 12.0), 1e-9);
    assert_near(t->min, 0.010, 1e-12);
    assert_near(t->max, 1.000, 1e-12);
    assert_near(t->pct[0], 0.500, 1e-12); /* p50: the 50th value */
    assert_near(t->pct[1], 0.900, 1e-12);
    assert_near(t->pct[2], 0.950, 1e-12);
    assert_near(t->pct[3], 0.990, 1e-12);
    assert_near(t->pct[4], 1.000, 1e-12); /* p99.9 of 100 values: the 100th */

    /* E2EL: 1..100 ms, in buckets of 1/1024..1/2048 of the value. */
    const struct latency_summary *e = &sum.lat[STAT_E2EL];
    assert_int_equal(e->count, 100);
    assert_near(e->mean, 50.5, 50.5 * 1e-3);
    assert_near(e->pct[0], 50.0, 0.05);
    assert_near(e->pct[3], 99.0, 0.1);
    assert_near(e->max, 100.0, 0.1);
    assert_near(e->pct[3], (double)hdr_highest_equivalent(s->hist[STAT_E2EL], 99000) / 1000.0, 0);

    /* TPOT = (E2EL - TTFT) / 4 for request i: (1000 i - 10 i) / 4 us. */
    assert_int_equal(sum.lat[STAT_TPOT].count, 100);
    assert_near(sum.lat[STAT_TPOT].min, 0.248, 1e-12); /* 247.5 us rounds to 248 */

    /* Nothing recorded: zeros. */
    assert_int_equal(sum.lat[STAT_ITL].count, 0);
    assert_near(sum.lat[STAT_ITL].pct[3], 0, 0);
    assert_near(sum.lat[STAT_ITL].max, 0, 0);

    /* Any percentile through the histogram; NAN where there is none. */
    assert_near(run_summary_percentile_ms(&sum, STAT_TTFT, 75), 0.750, 1e-12);
    assert_near(run_summary_percentile_ms(&sum, STAT_TTFT, 0), 0.010, 1e-12);
    assert_near(run_summary_percentile_ms(&sum, STAT_TTFT, 100), 1.0, 1e-12);
    assert_true(isnan(run_summary_percentile_ms(&sum, STAT_ITL, 50)));
    assert_true(isnan(run_summary_percentile_ms(&sum, STAT_TTFT, 101)));
    assert_true(isnan(run_summary_percentile_ms(&sum, STAT_METRIC_COUNT, 50)));

    /* Without the stats, only the fixed percentiles are known. */
    sum.stats = NULL;
    assert_near(run_summary_percentile_ms(&sum, STAT_TTFT, 99.9), 1.0, 1e-12);
    assert_near(run_summary_percentile_ms(&sum, STAT_TTFT, 95), 0.95, 1e-12);
    assert_true(isnan(run_summary_percentile_ms(&sum, STAT_TTFT, 75)));
    run_stats_free(s);
}

static void test_no_duration_no_goodput(void **state)
{
    struct run_stats *s = hundred(NULL);
    struct run_summary sum;

    run_summary_compute(&sum, s, 0.0, -1.0, NULL);
    assert_near(sum.duration_s, 0, 0);
    assert_near(sum.request_throughput, 0, 0);
    assert_near(sum.output_throughput, 0, 0);
    assert_near(sum.total_token_throughput, 0, 0);
    assert_false(sum.goodput_enabled);
    assert_near(sum.request_goodput, 0, 0);
    assert_near(sum.max_output_tokens_per_s, 0, 0);
    assert_int_equal(sum.completed, 100);

    /* A configuration with every threshold 0 is goodput off, as in vLLM without --goodput. */
    struct goodput_cfg off = {0};
    run_summary_compute(&sum, s, 4.0, 0, &off);
    assert_false(sum.goodput_enabled);
    assert_near(sum.request_throughput, 25.0, 1e-12);
    run_stats_free(s);
}

static void test_empty(void **state)
{
    struct run_stats *s = NULL;
    struct run_summary sum;
    assert_int_equal(run_stats_new(&s), 0);
    run_summary_compute(&sum, s, 20.0, 0, NULL);
    assert_int_equal(sum.requests, 0);
    assert_int_equal(sum.completed, 0);
    assert_near(sum.error_rate, 0, 0);
    assert_string_equal(sum.token_method, "none");
    assert_near(sum.tokens_per_chunk, 0, 0);
    for (int m = 0; m < STAT_METRIC_COUNT; m++) {
        assert_int_equal(sum.lat[m].count, 0);
        assert_near(sum.lat[m].mean, 0, 0);
    }
    run_stats_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_headline_numbers),
        cmocka_unit_test(test_no_duration_no_goodput),
        cmocka_unit_test(test_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
