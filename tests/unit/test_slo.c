/*
 * test_slo.c - the --slo grammar: what it accepts (with the canonical value),
 * what it rejects (with the exact message), and the verdicts.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <math.h>
#include <string.h>
#include <cmocka.h>

#include "analysis/slo.h"

struct good_case {
    const char *expr;
    bool latency;
    int metric;
    enum slo_stat stat;
    double pct;
    enum slo_op op;
    double value;
    enum slo_kind kind;
};

static void test_parse_good(void **state)
{
    static const struct good_case cases[] = {
        {"ttft.p95<2100ms", true, STAT_TTFC, SLO_STAT_PCT, 95, SLO_LT, 2100, SLO_KIND_LATENCY},
        {"e2el.p99 <= 5s", true, STAT_E2EL, SLO_STAT_PCT, 99, SLO_LE, 5000, SLO_KIND_LATENCY},
        {"error_rate<0.3%", false, SLO_ERROR_RATE, SLO_STAT_NONE, 0, SLO_LT, 0.003, SLO_KIND_RATE},
        {"goodput>5/s", false, SLO_GOODPUT, SLO_STAT_NONE, 0, SLO_GT, 5, SLO_KIND_PER_S},
        {"output_throughput>=1000", false, SLO_OUTPUT_THROUGHPUT, SLO_STAT_NONE, 0, SLO_GE, 1000,
         SLO_KIND_PER_S},
        {"itl.mean<50ms", true, STAT_ITL, SLO_STAT_MEAN, 0, SLO_LT, 50, SLO_KIND_LATENCY},
        {"completed>=100", false, SLO_COMPLETED, SLO_STAT_NONE, 0, SLO_GE, 100, SLO_KIND_COUNT},
        {"ttft.p99.9 < 250", true, STAT_TTFC, SLO_STAT_PCT, 99.9, SLO_LT, 250, SLO_KIND_LATENCY},
        {"\t TTFT.P50 == 1.5e3us ", true, STAT_TTFC, SLO_STAT_PCT, 50, SLO_EQ, 1.5,
         SLO_KIND_LATENCY},
        {"lag.max!=0", true, STAT_LAG, SLO_STAT_MAX, 0, SLO_NE, 0, SLO_KIND_LATENCY},
        {"tpot.median<=.5", true, STAT_TPOT, SLO_STAT_PCT, 50, SLO_LE, 0.5, SLO_KIND_LATENCY},
        {"e2el.std<1\xc2\xb5s", true, STAT_E2EL, SLO_STAT_STD, 0, SLO_LT, 0.001, SLO_KIND_LATENCY},
        {"tpot_incl_ttft.avg < 20 ms", true, STAT_TPOT_INCL_TTFT, SLO_STAT_MEAN, 0, SLO_LT, 20,
         SLO_KIND_LATENCY},
        {"request_goodput>=1", false, SLO_GOODPUT, SLO_STAT_NONE, 0, SLO_GE, 1, SLO_KIND_PER_S},
        {"error_rate<=0.01", false, SLO_ERROR_RATE, SLO_STAT_NONE, 0, SLO_LE, 0.01, SLO_KIND_RATE},
        {"ttfc.p99.99<3s", true, STAT_TTFC, SLO_STAT_PCT, 99.99, SLO_LT, 3000, SLO_KIND_LATENCY},
        {"ttft.p0>=0", true, STAT_TTFC, SLO_STAT_PCT, 0, SLO_GE, 0, SLO_KIND_LATENCY},
        {"ttft_vllm.p99<1s", true, STAT_TTFT, SLO_STAT_PCT, 99, SLO_LT, 1000, SLO_KIND_LATENCY},
        {"ttfa.p50<2s", true, STAT_TTFA, SLO_STAT_PCT, 50, SLO_LT, 2000, SLO_KIND_LATENCY},
        {"ttft_uncorrected.p100<=10s", true, STAT_TTFT_UNCORRECTED, SLO_STAT_PCT, 100, SLO_LE,
         10000, SLO_KIND_LATENCY},
        {"tls.stddev<5", true, STAT_TLS, SLO_STAT_STD, 0, SLO_LT, 5, SLO_KIND_LATENCY},
        {"failed==0", false, SLO_FAILED, SLO_STAT_NONE, 0, SLO_EQ, 0, SLO_KIND_COUNT},
        {"max_output_tokens_per_s>2e3", false, SLO_MAX_OUTPUT_TOKENS_PER_S, SLO_STAT_NONE, 0,
         SLO_GT, 2000, SLO_KIND_PER_S},
    };
    char err[256];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct good_case *c = &cases[i];
        struct slo s;
        memset(&s, 0xa5, sizeof(s));
        int rc = slo_parse(c->expr, &s, err, sizeof(err));
        if (rc != 0)
            fail_msg("'%s' rejected: %s", c->expr, err);
        assert_string_equal(err, "");
        assert_string_equal(s.expr, c->expr);
        assert_int_equal(s.latency, c->latency);
        assert_int_equal(s.metric, c->metric);
        assert_int_equal(s.stat, c->stat);
        if (c->stat == SLO_STAT_PCT)
            assert_true(s.pct == c->pct);
        assert_int_equal(s.op, c->op);
        if (fabs(s.value - c->value) > 1e-12 * fabs(c->value))
            fail_msg("'%s': value %.17g, want %.17g", c->expr, s.value, c->value);
        assert_int_equal(s.kind, c->kind);
    }
}

struct bad_case {
    const char *expr;
    const char *message;
};

static void test_parse_bad(void **state)
{
    static const struct bad_case cases[] = {
        {"ttft.p95<<2s", "slo 'ttft.p95<<2s': expected a number at column 10"},
        {"tfft.p95<2s",
         "slo 'tfft.p95<2s': unknown metric 'tfft' at column 1 (did you mean 'ttft'?)"},
        {"goodptu>5", "slo 'goodptu>5': unknown metric 'goodptu' at column 1 (did you mean "
                      "'goodput'?)"},
        {"e2e.p99<1s", "slo 'e2e.p99<1s': unknown metric 'e2e' at column 1 (did you mean 'e2el'?)"},
        {"xyzzy<1", "slo 'xyzzy<1': unknown metric 'xyzzy' at column 1 (see the METRIC list in "
                    "docs/METRICS.md)"},
        {"", "slo '': expected a metric name at column 1"},
        {"  <5", "slo '  <5': expected a metric name at column 3"},
        {"ttft<2s", "slo 'ttft<2s': 'ttft' needs a statistic such as ttft.p95 or ttft.mean at "
                    "column 5"},
        {"error_rate.p95<1%",
         "slo 'error_rate.p95<1%': 'error_rate' takes no statistic at column 11"},
        {"ttft.p95 2s",
         "slo 'ttft.p95 2s': expected an operator (<, <=, >, >=, ==, !=) at column 10"},
        {"ttft.p95=2s",
         "slo 'ttft.p95=2s': expected an operator (<, <=, >, >=, ==, !=) at column 9"},
        {"ttft.p95<2GB",
         "slo 'ttft.p95<2GB': unknown unit 'GB' (use us, ms or s; no unit means ms) at column 11"},
        {"error_rate<0.3ms", "slo 'error_rate<0.3ms': unknown unit 'ms' (use % or no unit for a "
                             "fraction) at column 15"},
        {"goodput>5/m", "slo 'goodput>5/m': unknown unit '/m' (use /s or no unit) at column 10"},
        {"completed>=100/s",
         "slo 'completed>=100/s': unknown unit '/s' (a count takes no unit) at column 15"},
        {"ttft.p101<2s", "slo 'ttft.p101<2s': percentile 101 is above 100 at column 6"},
        {"ttft.pp95<2s", "slo 'ttft.pp95<2s': unknown statistic 'pp95' at column 6 (use mean, "
                         "min, max, std, median or pNN)"},
        {"ttft.meen<2s",
         "slo 'ttft.meen<2s': unknown statistic 'meen' at column 6 (did you mean 'mean'?)"},
        {"ttft.p9.9.9<1",
         "slo 'ttft.p9.9.9<1': bad percentile 'p9.9.9' (write p50, p99, p99.9) at column 6"},
        {"ttft.<1",
         "slo 'ttft.<1': expected a statistic (mean, min, max, std, median, pNN) at column 6"},
        {"ttft.p95<2s extra", "slo 'ttft.p95<2s extra': unexpected text after the value at "
                              "column 13"},
        {"ttft.p95<-2s", "slo 'ttft.p95<-2s': expected a number at column 10"},
        {"ttft.p95<", "slo 'ttft.p95<': expected a number at column 10"},
        {"ttft.p95<1e999", "slo 'ttft.p95<1e999': expected a number at column 10"},
        {"ttft.p95<inf", "slo 'ttft.p95<inf': expected a number at column 10"},
        {"ttft\x1b[31m.p95<1", "slo 'ttft?[31m.p95<1': 'ttft' needs a statistic such as "
                               "ttft.p95 or ttft.mean at column 5"},
    };
    char err[256];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct slo s, before;
        memset(&s, 0x5a, sizeof(s));
        before = s;
        assert_int_equal(slo_parse(cases[i].expr, &s, err, sizeof(err)), -EINVAL);
        if (strcmp(err, cases[i].message) != 0)
            fail_msg("'%s':\n got  %s\n want %s", cases[i].expr, err, cases[i].message);
        assert_memory_equal(&s, &before, sizeof(s));
    }
}

static void test_parse_limits(void **state)
{
    char expr[400];
    char err[512];
    struct slo s;

    memset(expr, 'a', sizeof(expr) - 1);
    expr[sizeof(expr) - 1] = '\0';
    assert_int_equal(slo_parse(expr, &s, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "slo expression longer than 255 characters");

    /* 255 characters are accepted as far as length goes. */
    memset(expr, ' ', 255);
    memcpy(expr + 255 - 11, "completed>1", 11);
    expr[255] = '\0';
    assert_int_equal(slo_parse(expr, &s, err, sizeof(err)), 0);

    /* A long unknown name is reported without a suggestion and without overflow. */
    memset(expr, 'x', 200);
    memcpy(expr + 200, "<1", 3);
    assert_int_equal(slo_parse(expr, &s, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "unknown metric 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' at"));

    assert_int_equal(slo_parse(NULL, &s, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "slo: no expression");
    /* A short buffer is truncated and terminated; none at all is fine. */
    assert_int_equal(slo_parse("ttft<", &s, err, 8), -EINVAL);
    assert_string_equal(err, "slo 'tt");
    assert_int_equal(slo_parse("ttft<", &s, NULL, 0), -EINVAL);
    assert_int_equal(slo_parse("ttft.p1<1", &s, NULL, 0), 0);
}

static struct slo parse(const char *expr)
{
    struct slo s;
    char err[256];
    if (slo_parse(expr, &s, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    return s;
}

static bool eval(const char *expr, const struct run_summary *sum, double *actual)
{
    struct slo s = parse(expr);
    return slo_eval(&s, sum, actual);
}

static void test_eval(void **state)
{
    struct run_summary sum;
    double a = 0;

    memset(&sum, 0, sizeof(sum));
    /* --slo ttft judges the first token users see (ttfc); ttft_vllm is
     * vLLM's first chunk (a role chunk at 5 ms here) */
    sum.lat[STAT_TTFT] = (struct latency_summary){.count = 10, .pct = {5, 5, 5, 5, 5}};
    sum.lat[STAT_TTFC] = (struct latency_summary){.count = 10,
                                                  .mean = 100,
                                                  .std = 20,
                                                  .min = 10,
                                                  .max = 500,
                                                  .pct = {90, 150, 180, 250, 400}};
    sum.error_rate = 3.0 / 1000.0;
    sum.completed = 100;
    sum.request_goodput = 5.2;
    sum.output_throughput = 999.5;

    assert_true(eval("ttft.p95<2100ms", &sum, &a));
    assert_true(a == 180);
    assert_false(eval("ttft.p95<100ms", &sum, NULL));
    assert_true(eval("ttft_vllm.p95<100ms", &sum, &a));
    assert_true(a == 5);
    assert_false(eval("ttft.p95<180", &sum, NULL));
    assert_true(eval("ttft.p95<=180", &sum, NULL));
    assert_true(eval("ttft.p95==0.18s", &sum, NULL));
    assert_false(eval("ttft.p95!=180000us", &sum, NULL));
    assert_false(eval("ttft.p95>180", &sum, NULL));
    assert_true(eval("ttft.p95>=180", &sum, NULL));
    assert_true(eval("ttft.p99.9<0.5s", &sum, &a));
    assert_true(a == 400);
    assert_true(eval("ttft.median>=90", &sum, NULL));
    assert_false(eval("ttft.max<0.5s", &sum, &a));
    assert_true(a == 500);
    assert_true(eval("ttft.max<=0.5s", &sum, NULL));
    assert_true(eval("ttft.min>9.99", &sum, NULL));
    assert_true(eval("ttft.mean==100", &sum, NULL));
    assert_true(eval("ttft.std<21", &sum, NULL));
    /* Not in the summary and no histograms to ask: nothing to judge, so it fails. */
    assert_false(eval("ttft.p75<1s", &sum, &a));
    assert_true(isnan(a));
    /* No samples at all. */
    assert_false(eval("itl.mean<50", &sum, &a));
    assert_true(isnan(a));

    /* 3 errors in 1000 is exactly 0.3%, although 0.3 / 100 is not 0.003 in binary. */
    assert_true(eval("error_rate<=0.3%", &sum, &a));
    assert_true(a == 0.003);
    assert_false(eval("error_rate<0.3%", &sum, NULL));
    assert_true(eval("error_rate<0.31%", &sum, NULL));
    assert_true(eval("error_rate==0.003", &sum, NULL));

    /* Goodput without --goodput is not a number. */
    assert_false(eval("goodput>5/s", &sum, &a));
    assert_true(isnan(a));
    sum.goodput_enabled = true;
    assert_true(eval("goodput>5/s", &sum, &a));
    assert_true(a == 5.2);
    assert_false(eval("output_throughput>=1000", &sum, NULL));
    assert_true(eval("completed>=100", &sum, NULL));
    assert_false(eval("completed>100", &sum, NULL));
    assert_true(eval("failed==0", &sum, NULL));
}

static void test_eval_any_percentile_from_stats(void **state)
{
    struct run_stats *st = NULL;
    struct run_summary sum;
    double a = 0;

    assert_int_equal(run_stats_new(&st), 0);
    for (uint64_t i = 1; i <= 100; i++)
        run_stats_add_itl(st, i * 10000); /* 10 us .. 1000 us */
    run_summary_compute(&sum, st, 1.0, 0, NULL);
    assert_true(eval("itl.p75<=0.75", &sum, &a));
    assert_true(a == 0.75);
    assert_false(eval("itl.p75<750us", &sum, NULL));
    assert_true(eval("itl.p99.99<=1ms", &sum, &a));
    assert_true(a == 1.0);
    run_stats_free(st);
}

static void test_format(void **state)
{
    char buf[32];
    struct slo s = parse("ttft.p95<1s");
    assert_string_equal(slo_format_value(&s, 180, buf, sizeof(buf)), "180.00 ms");
    assert_string_equal(slo_format_value(&s, NAN, buf, sizeof(buf)), "n/a");
    s = parse("error_rate<1%");
    assert_string_equal(slo_format_value(&s, 0.003, buf, sizeof(buf)), "0.300%");
    s = parse("goodput>1");
    assert_string_equal(slo_format_value(&s, 5.2, buf, sizeof(buf)), "5.20/s");
    s = parse("completed>1");
    assert_string_equal(slo_format_value(&s, 100, buf, sizeof(buf)), "100");
    assert_string_equal(slo_format_value(&s, 100, buf, 3), "10");
    assert_string_equal(slo_op_name(SLO_LE), "<=");
    assert_string_equal(slo_op_name(SLO_NE), "!=");
}

/* One vocabulary: compare's names are accepted as aliases of the SLO names. */
static void test_aliases_of_compare(void **state)
{
    struct slo a, b;
    (void)state;
    assert_int_equal(slo_parse("throughput>5/s", &a, NULL, 0), 0);
    assert_int_equal(slo_parse("request_throughput>5/s", &b, NULL, 0), 0);
    assert_int_equal(a.metric, b.metric);
    assert_string_equal(slo_metric_name(&a), "request_throughput");
    assert_int_equal(slo_parse("output_tps>=100", &a, NULL, 0), 0);
    assert_int_equal(a.metric, SLO_OUTPUT_THROUGHPUT);
    char err[256];
    assert_int_equal(slo_parse("throughputt>5", &a, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "did you mean 'throughput'?"));
}

/* What an SLO needs the run to be given, so it can be refused at start. */
static void test_needs(void **state)
{
    static const struct {
        const char *expr;
        unsigned needs;
    } cases[] = {
        {"ttft.p95<2s", SLO_NEEDS_STREAM},
        {"ttft_uncorrected.p50<1s", SLO_NEEDS_STREAM},
        {"ttfc.p99<2s", SLO_NEEDS_STREAM},
        {"itl.p99<50ms", SLO_NEEDS_STREAM},
        {"tpot.p99<1ms", SLO_NEEDS_STREAM},
        {"e2el.p99<10s", 0},
        {"tpot_incl_ttft.p99<100ms", 0}, /* e2el / tokens: a whole answer has it too */
        {"lag.p99<10ms", 0},
        {"error_rate<1%", 0},
        {"goodput>5", SLO_NEEDS_GOODPUT},
        {"good>=10", SLO_NEEDS_GOODPUT},
        {"request_goodput>1", SLO_NEEDS_GOODPUT},
        {"rouge_l>=0.3", SLO_NEEDS_REFERENCE},
        {"bleu4>=0.2", SLO_NEEDS_REFERENCE},
        {"exact_match>=50%", SLO_NEEDS_REFERENCE},
        {"regex_match>=90%", SLO_NEEDS_REGEX},
        {"json_valid>=99%", SLO_NEEDS_JSON},
        {"dual_sla>=95%", SLO_NEEDS_DUAL_SLA},
        {"consistency>0.8", SLO_NEEDS_CONSISTENCY},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct slo s;
        assert_int_equal(slo_parse(cases[i].expr, &s, NULL, 0), 0);
        if (slo_needs(&s) != cases[i].needs)
            fail_msg("%s: needs %u, expected %u", cases[i].expr, slo_needs(&s), cases[i].needs);
    }
}

/* Scores in 0..1 print as scores; rates as percents. */
static void test_format_scores(void **state)
{
    struct slo s;
    char buf[32];
    (void)state;
    assert_int_equal(slo_parse("rouge_l>=0.3", &s, NULL, 0), 0);
    assert_string_equal(slo_format_value(&s, 0.4123, buf, sizeof(buf)), "0.412");
    assert_int_equal(slo_parse("bleu4>=30%", &s, NULL, 0), 0); /* % still read */
    assert_true(s.value > 0.2999 && s.value < 0.3001);
    assert_string_equal(slo_format_value(&s, 0.25, buf, sizeof(buf)), "0.250");
    assert_int_equal(slo_parse("consistency>0.8", &s, NULL, 0), 0);
    assert_string_equal(slo_format_value(&s, 0.9, buf, sizeof(buf)), "0.900");
    assert_int_equal(slo_parse("exact_match>=50%", &s, NULL, 0), 0);
    assert_string_equal(slo_format_value(&s, 0.5, buf, sizeof(buf)), "50.000%");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_parse_limits),
        cmocka_unit_test(test_eval),
        cmocka_unit_test(test_eval_any_percentile_from_stats),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_aliases_of_compare),
        cmocka_unit_test(test_needs),
        cmocka_unit_test(test_format_scores),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
