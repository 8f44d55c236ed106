/*
 * test_compare.c - the statistics of `tokenstorm compare`: Mann-Whitney U
 * against hand-worked examples, percentile intervals, --fail-on rules, and
 * the bootstrap on synthetic runs (identical runs: nothing significant; a
 * shifted run: detected; the same seed: the same intervals).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include <unistd.h>

#include "analysis/compare.h"
#include "base/alloc.h"
#include "base/rng.h"
#include "report/compare_report.h"
#include "report/result.h"

#define MS 1000000ull
#define US 1000ull

/* cmocka 1.1 has no assert_double_equal: within tol, with the values on failure. */
#define assert_double_equal(got, want, tol) near_impl((got), (want), (tol), #got, __LINE__)

static void near_impl(double got, double want, double tol, const char *what, int line)
{
    if (!(fabs(got - want) <= tol) && !(got == want))
        fail_msg("line %d: %s = %.10g, want %.10g (+- %g)", line, what, got, want, tol);
}

/* ---- Mann-Whitney U -------------------------------------------------------------- */

/*
 * BASE = {1, 2, 2, 4}, NEW = {2, 3, 5, 6, 7}: n1 = 4, n2 = 5, N = 9.
 * Sorted: 1b 2b 2b 2n 3n 4b 5n 6n 7n; the three 2s share ranks 2, 3, 4 -> 3.
 *   R_new = 3 + 5 + 7 + 8 + 9 = 32, U_new = 32 - 5 * 6 / 2 = 17
 *   (pairs new > base: 2 -> 1 + 2 ties / 2 = 2; 3 -> 3; 5, 6, 7 -> 4 each: 17).
 *   mu = 4 * 5 / 2 = 10; one tie group t = 3: t^3 - t = 24;
 *   sigma^2 = 20 / 12 * (10 - 24 / (9 * 8)) = 5/3 * 29/3 = 145/9, sigma = 4.013865;
 *   z = (17 - 10 - 0.5) / sigma = 1.6193869; p = erfc(z / sqrt 2) = 0.1053641.
 */
static void test_mwu_hand_example(void **state)
{
    (void)state;
    const struct compare_group a[] = {{1, 1}, {2, 2}, {4, 1}};
    const struct compare_group b[] = {{2, 1}, {3, 1}, {5, 1}, {6, 1}, {7, 1}};
    struct compare_mwu m;

    compare_mwu_groups(a, 3, b, 5, &m);
    assert_true(m.valid);
    assert_int_equal(m.n_base, 4);
    assert_int_equal(m.n_new, 5);
    assert_double_equal(m.u, 17.0, 1e-12);
    assert_double_equal(m.z, 6.5 / (sqrt(145.0) / 3.0), 1e-12);
    assert_double_equal(m.z, 1.6193869, 1e-6);
    assert_double_equal(m.p, 0.1053641, 1e-6);
    assert_double_equal(m.effect, 17.0 / 20.0, 1e-12);

    /* swapped: U = 20 - 17 = 3, z negative, same p */
    compare_mwu_groups(b, 5, a, 3, &m);
    assert_double_equal(m.u, 3.0, 1e-12);
    assert_double_equal(m.z, -1.6193869, 1e-6);
    assert_double_equal(m.p, 0.1053641, 1e-6);
}

/*
 * No ties: BASE {1, 2, 3}, NEW {4, 5, 6}: U_new = 9 (every pair), mu = 4.5,
 * sigma^2 = 9 / 12 * 7 = 5.25, z = 4 / sqrt(5.25) = 1.7457431, p = 0.0808556.
 */
static void test_mwu_no_ties_and_all_ties(void **state)
{
    (void)state;
    const struct compare_group a[] = {{1, 1}, {2, 1}, {3, 1}};
    const struct compare_group b[] = {{4, 1}, {5, 1}, {6, 1}};
    const struct compare_group same_a[] = {{5, 3}};
    const struct compare_group same_b[] = {{5, 2}};
    struct compare_mwu m;

    compare_mwu_groups(a, 3, b, 3, &m);
    assert_double_equal(m.u, 9.0, 1e-12);
    assert_double_equal(m.z, 1.7457431, 1e-6);
    assert_double_equal(m.p, 0.0808556, 1e-6);

    /* every value tied: U = n1 n2 / 2, no evidence of a shift */
    compare_mwu_groups(same_a, 1, same_b, 1, &m);
    assert_true(m.valid);
    assert_double_equal(m.u, 3.0, 1e-12);
    assert_double_equal(m.z, 0.0, 0);
    assert_double_equal(m.p, 1.0, 0);

    /* an empty side: not valid */
    compare_mwu_groups(a, 3, NULL, 0, &m);
    assert_false(m.valid);
    assert_true(isnan(m.p));
}

/* ---- intervals and rules ------------------------------------------------------------ */

static void test_percentile_interval(void **state)
{
    (void)state;
    double v[103], lo, hi;

    /* 0..100 shuffled, plus two NANs that are dropped */
    for (int i = 0; i <= 100; i++)
        v[i] = (double)((i * 37) % 101);
    v[101] = NAN;
    v[102] = NAN;
    assert_int_equal(compare_percentile_interval(v, 103, 0.10, &lo, &hi), 101);
    assert_double_equal(lo, 5.0, 1e-12); /* h = 100 * 0.05 */
    assert_double_equal(hi, 95.0, 1e-12);
    /* interpolation: {0, 10}: alpha 0.5 -> quantiles 0.25 and 0.75 */
    double w[2] = {10, 0};
    assert_int_equal(compare_percentile_interval(w, 2, 0.5, &lo, &hi), 2);
    assert_double_equal(lo, 2.5, 1e-12);
    assert_double_equal(hi, 7.5, 1e-12);
    double one[1] = {3};
    assert_int_equal(compare_percentile_interval(one, 1, 0.05, &lo, &hi), 1);
    assert_true(isnan(lo) && isnan(hi));
}

static void test_metric_names(void **state)
{
    (void)state;
    struct compare_metric m;
    char name[40];

    assert_int_equal(compare_metric_parse("ttft.p95", 8, &m), 0);
    assert_true(m.latency);
    assert_int_equal(m.metric, STAT_TTFT);
    assert_false(m.mean);
    assert_double_equal(m.pct, 95, 0);
    assert_string_equal(compare_metric_name(&m, name, sizeof(name)), "ttft.p95");
    assert_int_equal(compare_metric_parse("E2EL.p99.9", 10, &m), 0);
    assert_string_equal(compare_metric_name(&m, name, sizeof(name)), "e2el.p99.9");
    assert_int_equal(compare_metric_parse("itl.median", 10, &m), 0);
    assert_string_equal(compare_metric_name(&m, name, sizeof(name)), "itl.p50");
    assert_int_equal(compare_metric_parse("tpot.avg", 8, &m), 0);
    assert_string_equal(compare_metric_name(&m, name, sizeof(name)), "tpot.mean");
    assert_int_equal(compare_metric_parse("request_throughput", 18, &m), 0);
    assert_false(m.latency);
    assert_int_equal(m.metric, CMP_THROUGHPUT);
    assert_string_equal(compare_metric_name(&m, name, sizeof(name)), "throughput");
    assert_false(compare_metric_lower_is_better(&m));
    assert_int_equal(compare_metric_parse("error_rate", 10, &m), 0);
    assert_true(compare_metric_lower_is_better(&m));
    assert_string_equal(compare_metric_unit(&m), "");
    /* the length is honoured: "ttft.p95" out of "ttft.p95>+10%" */
    assert_int_equal(compare_metric_parse("ttft.p95>+10%", 8, &m), 0);

    assert_int_equal(compare_metric_parse("ttft", 4, &m), -EINVAL);      /* needs a stat */
    assert_int_equal(compare_metric_parse("ttft.p101", 9, &m), -EINVAL); /* out of range */
    assert_int_equal(compare_metric_parse("ttft.q50", 8, &m), -EINVAL);
    assert_int_equal(compare_metric_parse("tfft.p50", 8, &m), -EINVAL);
    assert_int_equal(compare_metric_parse("throughput.p50", 14, &m), -EINVAL);
    assert_int_equal(compare_metric_parse("ttft.p", 6, &m), -EINVAL);
    assert_int_equal(compare_metric_parse("ttft.p99.9999999999", 19, &m),
                     -EINVAL); /* 10 decimals */
    /* names read back as the same metric */
    assert_int_equal(compare_metric_parse("ttft.p.490999999", 16, &m), 0);
    assert_string_equal(compare_metric_name(&m, name, sizeof(name)), "ttft.p0.490999999");
    assert_int_equal(compare_metric_parse("ttft.p099.999999", 16, &m), 0);
    assert_string_equal(compare_metric_name(&m, name, sizeof(name)), "ttft.p99.999999");
}

static void test_rule_parse(void **state)
{
    (void)state;
    struct compare_rule r;
    char err[256];

    assert_int_equal(compare_rule_parse("ttft.p95>+10%", &r, err, sizeof(err)), 0);
    assert_true(r.metric.latency && r.metric.metric == STAT_TTFT && r.metric.pct == 95);
    assert_true(r.greater && !r.inclusive && r.relative);
    assert_double_equal(r.threshold, 0.10, 1e-15);

    assert_int_equal(compare_rule_parse(" e2el.p99 >= +50ms ", &r, err, sizeof(err)), 0);
    assert_true(r.greater && r.inclusive && !r.relative);
    assert_double_equal(r.threshold, 50, 1e-12);
    assert_int_equal(compare_rule_parse("itl.mean>0.002s", &r, err, sizeof(err)), 0);
    assert_double_equal(r.threshold, 2, 1e-12);
    assert_int_equal(compare_rule_parse("itl.mean>250us", &r, err, sizeof(err)), 0);
    assert_double_equal(r.threshold, 0.25, 1e-12);
    assert_int_equal(compare_rule_parse("tpot.p50>7", &r, err, sizeof(err)), 0); /* ms */
    assert_double_equal(r.threshold, 7, 1e-12);
    assert_int_equal(compare_rule_parse("throughput<-5%", &r, err, sizeof(err)), 0);
    assert_false(r.greater);
    assert_double_equal(r.threshold, -0.05, 1e-15);
    assert_int_equal(compare_rule_parse("goodput<=-2/s", &r, err, sizeof(err)), 0);
    assert_true(!r.greater && r.inclusive && !r.relative);
    assert_double_equal(r.threshold, -2, 1e-12);
    assert_int_equal(compare_rule_parse("error_rate>+1pp", &r, err, sizeof(err)), 0);
    assert_double_equal(r.threshold, 0.01, 1e-15);
    assert_int_equal(compare_rule_parse("error_rate>0.005", &r, err, sizeof(err)), 0);
    assert_double_equal(r.threshold, 0.005, 1e-15);

    assert_int_equal(compare_rule_parse("ttft.p95=+10%", &r, err, sizeof(err)), -EINVAL);
    assert_string_equal(err,
                        "--fail-on 'ttft.p95=+10%': expected '>', '>=', '<' or '<=' at column 9");
    assert_int_equal(compare_rule_parse("ttft.p95>+%", &r, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "--fail-on 'ttft.p95>+%': expected a number at column 11");
    assert_int_equal(compare_rule_parse("tfft.p95>+10%", &r, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "unknown metric"));
    assert_int_equal(compare_rule_parse("ttft.p95>+10parsecs", &r, err, sizeof(err)), -EINVAL);
    assert_int_equal(compare_rule_parse("error_rate>+1ms", &r, err, sizeof(err)), -EINVAL);
    assert_int_equal(compare_rule_parse("throughput<-5ms", &r, err, sizeof(err)), -EINVAL);
    assert_int_equal(compare_rule_parse("", &r, NULL, 0), -EINVAL);
}

static void test_rule_holds(void **state)
{
    (void)state;
    struct compare_rule r;
    struct compare_row row;

    memset(&row, 0, sizeof(row));
    assert_int_equal(compare_rule_parse("ttft.p50>+10%", &r, NULL, 0), 0);
    row.metric = r.metric;
    row.base = 100;
    row.new_ = 120;
    row.change = 20;
    row.rel_change = 0.2;
    row.significant = true;
    assert_true(compare_rule_holds(&r, &row, true));
    row.significant = false;
    assert_false(compare_rule_holds(&r, &row, true));
    assert_true(compare_rule_holds(&r, &row, false)); /* --no-significance */
    row.rel_change = 0.1;                             /* not above +10% */
    assert_false(compare_rule_holds(&r, &row, false));
    row.rel_change = NAN;
    assert_false(compare_rule_holds(&r, &row, false));
    assert_int_equal(compare_rule_parse("ttft.p50>=+10%", &r, NULL, 0), 0);
    row.rel_change = 0.1;
    assert_true(compare_rule_holds(&r, &row, false));
    /* another metric's row is never judged */
    assert_int_equal(compare_rule_parse("ttft.p99>=+10%", &r, NULL, 0), 0);
    assert_false(compare_rule_holds(&r, &row, false));
}

/* ---- synthetic runs ------------------------------------------------------------------ */

#define NREQ 400

struct synth {
    struct run_stats *stats;
    struct compare_req reqs[NREQ];
    size_t nreqs;
    struct compare_run run;
};

/*
 * n requests with TTFT spread between 80 and 200 ms (scaled by ttft_scale),
 * 16 output tokens, E2EL = TTFT + 15 gaps of 20 ms, the first n_err failing
 * with a 500; 40 s long. The per-request values match what requests.jsonl
 * would say.
 */
static void synth_make(struct synth *s, uint64_t seed, double ttft_scale, size_t n, size_t n_err)
{
    struct rng r;
    const uint64_t base = 1000000 * MS;

    memset(s, 0, sizeof(*s));
    assert_int_equal(run_stats_new(&s->stats), 0);
    rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) {
        struct req_record rec;
        double u = rng_uniform01(&r);
        uint64_t ttft_us = (uint64_t)((80000 + 120000 * u * u) * ttft_scale);
        memset(&rec, 0, sizeof(rec));
        rec.id = i;
        rec.flags = REQF_STREAM;
        rec.outcome = i < n_err ? REQ_HTTP_5XX : REQ_OK;
        rec.http_status = i < n_err ? 500 : 200;
        rec.intended_ns = base + i * 100 * MS;
        rec.start_ns = rec.intended_ns + 500 * US;
        rec.first_chunk_ns = rec.intended_ns + ttft_us * US;
        rec.first_token_ns = rec.first_chunk_ns;
        rec.last_chunk_ns = rec.first_chunk_ns + 15 * 20 * MS;
        rec.end_ns = rec.last_chunk_ns + MS;
        rec.output_tokens = 16;
        rec.usage_completion_tokens = 16;
        rec.usage_prompt_tokens = 10;
        rec.choice_chunks = 16;
        rec.content_chunks = 16;
        run_stats_add_record(s->stats, &rec, NULL);
        struct compare_req *q = &s->reqs[s->nreqs++];
        for (int v = 0; v < CMP_V_COUNT; v++)
            q->v[v] = NAN;
        q->kind = rec.outcome == REQ_OK ? CMP_REQ_OK : CMP_REQ_ERROR;
        q->v[CMP_V_LAG] = 0.5;
        q->v[CMP_V_TTFT] = (double)ttft_us / 1000.0;
        q->v[CMP_V_TTFC] = q->v[CMP_V_TTFT];
        q->v[CMP_V_E2EL] = q->v[CMP_V_TTFT] + 300.0;
        q->v[CMP_V_TPOT] = 20.0;
        q->output_tokens = 16;
        if (rec.outcome == REQ_OK)
            for (int k = 0; k < 15; k++)
                run_stats_add_itl(s->stats, 20 * MS + (uint64_t)(k * 100 * US * ttft_scale));
    }
    s->run = (struct compare_run){
        .stats = s->stats,
        .duration_s = 40,
        .reqs = s->reqs,
        .nreqs = s->nreqs,
    };
}

static void synth_free(struct synth *s)
{
    run_stats_free(s->stats);
}

static const struct compare_row *row_named(const struct compare_result *res, const char *name)
{
    for (size_t i = 0; i < res->nrows; i++)
        if (!strcmp(res->rows[i].name, name))
            return &res->rows[i];
    fail_msg("no row %s", name);
    return NULL;
}

static void test_identical_runs_no_change(void **state)
{
    (void)state;
    struct synth *a = malloc(sizeof(*a));
    struct compare_cfg cfg = {.seed = 7, .resamples = 500};
    struct compare_result res;

    assert_non_null(a);
    synth_make(a, 1, 1.0, NREQ, 4);
    for (int method = 0; method < 2; method++) {
        cfg.method = method ? CMP_METHOD_HISTOGRAMS : CMP_METHOD_AUTO;
        assert_int_equal(compare_runs(&a->run, &a->run, &cfg, NULL, 0, &res), 0);
        assert_int_equal(res.nrows, 20); /* 4 latency metrics x 4 stats + 4 rates */
        assert_int_equal(res.requests_used, method == 0);
        for (size_t i = 0; i < res.nrows; i++) {
            const struct compare_row *row = &res.rows[i];
            if (row->metric.latency == false && row->metric.metric == CMP_GOODPUT) {
                assert_true(isnan(row->base)); /* goodput was off */
                assert_false(row->significant);
                continue;
            }
            assert_double_equal(row->change, 0, 0);
            assert_double_equal(row->rel_change, 0, 0);
            assert_false(row->significant);
            assert_int_equal(row->direction, 0);
            assert_true(row->ci_lo <= 0 && row->ci_hi >= 0);
            assert_int_equal(row->resamples, 500);
            if (row->metric.latency) {
                assert_true(row->mwu.valid);
                assert_double_equal(row->mwu.p, 1.0, 0);
            }
        }
        /* 400 samples: too few for a p99 (500 needed), enough for a p90 (50) */
        assert_true(row_named(&res, "ttft.p99")->few_samples);
        assert_false(row_named(&res, "ttft.p90")->few_samples);
        assert_false(row_named(&res, "itl.p99")->few_samples); /* 15 gaps per request */
        /* itl always from the histograms; ttft from the requests when present */
        assert_false(row_named(&res, "itl.p50")->from_requests);
        assert_int_equal(row_named(&res, "ttft.p50")->from_requests, method == 0);
        assert_double_equal(row_named(&res, "throughput")->base, 396.0 / 40.0, 1e-12);
        assert_double_equal(row_named(&res, "error_rate")->base, 0.01, 1e-12);
        assert_false(res.regression);
        compare_result_release(&res);
    }
    synth_free(a);
    free(a);
}

static void test_shifted_run_detected(void **state)
{
    (void)state;
    struct synth *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
    struct compare_cfg cfg = {.seed = 3};
    struct compare_rule rules[3];
    struct compare_result res;

    assert_non_null(a);
    assert_non_null(b);
    synth_make(a, 1, 1.0, NREQ, 0);
    synth_make(b, 2, 1.25, NREQ, 0); /* another sample, TTFT 25% slower */
    assert_int_equal(compare_rule_parse("ttft.p50>+10%", &rules[0], NULL, 0), 0);
    assert_int_equal(compare_rule_parse("ttft.p50>+40%", &rules[1], NULL, 0), 0);
    assert_int_equal(compare_rule_parse("ttft.p95>+10%", &rules[2], NULL, 0), 0);
    for (int method = 0; method < 2; method++) {
        cfg.method = method ? CMP_METHOD_HISTOGRAMS : CMP_METHOD_AUTO;
        assert_int_equal(compare_runs(&a->run, &b->run, &cfg, rules, 3, &res), 0);
        assert_int_equal(res.nrows, 21); /* ttft.p95 added by the third rule */
        const struct compare_row *p50 = row_named(&res, "ttft.p50");
        assert_true(p50->rel_change > 0.15 && p50->rel_change < 0.35);
        assert_true(p50->significant);
        assert_int_equal(p50->direction, 1);
        assert_true(p50->ci_lo > 0);
        assert_true(p50->ci_lo < p50->change && p50->change < p50->ci_hi);
        assert_true(p50->mwu.valid && p50->mwu.p < 1e-6 && p50->mwu.z > 5);
        assert_true(p50->mwu.effect > 0.6);
        assert_true(row_named(&res, "ttft.mean")->significant);
        assert_true(row_named(&res, "e2el.p50")->significant);
        assert_true(row_named(&res, "ttft.p95")->significant);
        /* tpot did not move: 20 ms for every request */
        const struct compare_row *tpot = row_named(&res, "tpot.p50");
        assert_double_equal(tpot->change, 0, 0);
        assert_false(tpot->significant);
        /* the same completions in the same time: throughput unchanged */
        assert_false(row_named(&res, "throughput")->significant);
        assert_true(res.rule_hit[0]);
        assert_false(res.rule_hit[1]);
        assert_true(res.rule_hit[2]);
        assert_true(res.regression);
        assert_true(p50->regression);
        assert_string_equal(res.rows[res.rule_row[2]].name, "ttft.p95");
        compare_result_release(&res);
    }
    /* reversed, it is an improvement: not a regression */
    assert_int_equal(compare_runs(&b->run, &a->run, &cfg, rules, 1, &res), 0);
    assert_int_equal(row_named(&res, "ttft.p50")->direction, -1);
    assert_false(res.regression);
    compare_result_release(&res);
    synth_free(a);
    synth_free(b);
    free(a);
    free(b);
}

static void test_rates(void **state)
{
    (void)state;
    struct synth *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
    struct compare_cfg cfg = {.seed = 5};
    struct compare_result res;

    assert_non_null(a);
    assert_non_null(b);
    synth_make(a, 1, 1.0, NREQ, 0); /* 400 ok in 40 s: 10/s, no error */
    synth_make(b, 1, 1.0, 300, 30); /* 270 ok in 40 s: 6.75/s, 10% errors */
    for (int method = 0; method < 2; method++) {
        cfg.method = method ? CMP_METHOD_HISTOGRAMS : CMP_METHOD_AUTO;
        assert_int_equal(compare_runs(&a->run, &b->run, &cfg, NULL, 0, &res), 0);
        const struct compare_row *t = row_named(&res, "throughput");
        assert_double_equal(t->base, 10.0, 1e-12);
        assert_double_equal(t->new_, 6.75, 1e-12);
        assert_double_equal(t->rel_change, -0.325, 1e-12);
        /* Poisson: sd of the difference = sqrt(400 + 270) / 40 = 0.647 */
        assert_true(t->ci_hi < 0 && t->ci_lo > -3.25 - 2 * 0.647 * 1.5);
        assert_true(t->significant);
        assert_int_equal(t->direction, 1); /* lower throughput is worse */
        const struct compare_row *o = row_named(&res, "output_throughput");
        assert_double_equal(o->base, 160.0, 1e-12);
        assert_double_equal(o->new_, 108.0, 1e-12);
        assert_true(o->significant);
        const struct compare_row *e = row_named(&res, "error_rate");
        assert_double_equal(e->base, 0.0, 0);
        assert_double_equal(e->new_, 0.1, 1e-12);
        assert_true(isinf(e->rel_change) && e->rel_change > 0);
        assert_true(e->significant);
        assert_int_equal(e->direction, 1);
        compare_result_release(&res);
    }
    synth_free(a);
    synth_free(b);
    free(a);
    free(b);
}

/* recall@k rows: only when a run has recall; mean and p5 from the
 * distribution; a drop is worse and a rule on it fires; units pp or %. */
static void test_recall_rows(void **state)
{
    (void)state;
    struct synth *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
    struct compare_cfg cfg = {.seed = 3};
    struct compare_result res;
    char err[256];
    assert_non_null(a);
    assert_non_null(b);
    synth_make(a, 1, 1.0, NREQ, 0);
    synth_make(b, 1, 1.0, NREQ, 0);
    assert_int_equal(compare_runs(&a->run, &b->run, &cfg, NULL, 0, &res), 0);
    for (size_t i = 0; i < res.nrows; i++)
        assert_null(strstr(res.rows[i].name, "recall")); /* no search: no recall rows */
    compare_result_release(&res);
    /* base: 400 searches at 0.9; new: 200 at 0.9 and 200 at 0.5 (k 10) */
    for (int i = 0; i < NREQ; i++) {
        struct req_record r = {.outcome = REQ_OK, .has_recall = true, .recall_k = 10};
        r.recall = 0.9;
        run_stats_add_record(a->stats, &r, NULL);
        r.recall = i % 2 ? 0.5 : 0.9;
        run_stats_add_record(b->stats, &r, NULL);
    }
    struct compare_rule rules[2];
    assert_int_equal(compare_rule_parse("recall<-2pp", &rules[0], err, sizeof(err)), 0);
    assert_double_equal(rules[0].threshold, -0.02, 1e-15);
    assert_int_equal(compare_rule_parse("recall_p5 < -10%", &rules[1], err, sizeof(err)), 0);
    assert_true(rules[1].relative);
    assert_int_equal(compare_runs(&a->run, &b->run, &cfg, rules, 2, &res), 0);
    const struct compare_row *m = row_named(&res, "recall"), *p5 = row_named(&res, "recall_p5");
    assert_double_equal(m->base, 0.9, 1e-12);
    assert_double_equal(m->new_, 0.7, 1e-12);
    assert_double_equal(p5->base, 0.9, 1e-12);
    assert_double_equal(p5->new_, 0.5, 1e-12);
    assert_true(m->significant && p5->significant);
    assert_int_equal(m->direction, 1); /* lower recall is worse */
    assert_true(m->ci_lo > -0.3 && m->ci_hi < -0.1);
    assert_true(res.regression && res.rule_hit[0] && res.rule_hit[1]);
    assert_string_equal(compare_metric_unit(&m->metric), "fraction");
    compare_result_release(&res);
    /* the same recall: no rule fires */
    assert_int_equal(compare_runs(&a->run, &a->run, &cfg, rules, 2, &res), 0);
    assert_false(res.regression);
    compare_result_release(&res);
    assert_int_equal(compare_rule_parse("recall<-5ms", &rules[0], err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "pp"));
    synth_free(a);
    synth_free(b);
    free(a);
    free(b);
}

static void test_seed_reproducible(void **state)
{
    (void)state;
    struct synth *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
    struct compare_cfg cfg = {.seed = 11, .resamples = 300};
    struct compare_result r1, r2, r3;

    assert_non_null(a);
    assert_non_null(b);
    synth_make(a, 1, 1.0, NREQ, 2);
    synth_make(b, 2, 1.05, NREQ, 3);
    assert_int_equal(compare_runs(&a->run, &b->run, &cfg, NULL, 0, &r1), 0);
    assert_int_equal(compare_runs(&a->run, &b->run, &cfg, NULL, 0, &r2), 0);
    cfg.seed = 12;
    assert_int_equal(compare_runs(&a->run, &b->run, &cfg, NULL, 0, &r3), 0);
    size_t differ = 0;
    for (size_t i = 0; i < r1.nrows; i++) {
        if (isnan(r1.rows[i].ci_lo)) {
            assert_true(isnan(r2.rows[i].ci_lo));
            continue;
        }
        assert_memory_equal(&r1.rows[i].ci_lo, &r2.rows[i].ci_lo, sizeof(double));
        assert_memory_equal(&r1.rows[i].ci_hi, &r2.rows[i].ci_hi, sizeof(double));
        differ += r1.rows[i].ci_lo != r3.rows[i].ci_lo || r1.rows[i].ci_hi != r3.rows[i].ci_hi;
    }
    assert_true(differ >= 5); /* another seed, other resamples */
    compare_result_release(&r1);
    compare_result_release(&r2);
    compare_result_release(&r3);
    synth_free(a);
    synth_free(b);
    free(a);
    free(b);
}

/*
 * Coverage check of the interval: two independent samples of one
 * distribution, 40 times; a 90% interval of ttft.mean should exclude 0 in
 * about 4 of them. Accept 0..10 (binomial(40, 0.1): P(> 10) < 0.2%).
 */
static void test_false_positive_rate(void **state)
{
    (void)state;
    struct synth *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
    struct compare_cfg cfg = {.seed = 1, .resamples = 400, .alpha = 0.10};
    int hits = 0;

    assert_non_null(a);
    assert_non_null(b);
    for (uint64_t k = 0; k < 40; k++) {
        struct compare_result res;
        synth_make(a, 100 + 2 * k, 1.0, 200, 0);
        synth_make(b, 101 + 2 * k, 1.0, 200, 0);
        cfg.seed = k;
        assert_int_equal(compare_runs(&a->run, &b->run, &cfg, NULL, 0, &res), 0);
        hits += row_named(&res, "ttft.mean")->significant;
        compare_result_release(&res);
        synth_free(a);
        synth_free(b);
    }
    assert_true(hits <= 10);
    free(a);
    free(b);
}

static void test_bad_config(void **state)
{
    (void)state;
    struct synth *a = malloc(sizeof(*a));
    struct compare_cfg cfg = {.alpha = 0.7};
    struct compare_result res;

    assert_non_null(a);
    synth_make(a, 1, 1.0, 10, 0);
    assert_int_equal(compare_runs(&a->run, &a->run, &cfg, NULL, 0, &res), -EINVAL);
    cfg.alpha = 0;
    cfg.resamples = COMPARE_MAX_RESAMPLES + 1;
    assert_int_equal(compare_runs(&a->run, &a->run, &cfg, NULL, 0, &res), -EINVAL);
    struct compare_run none = {0};
    cfg.resamples = 10;
    assert_int_equal(compare_runs(&a->run, &none, &cfg, NULL, 0, &res), -EINVAL);
    synth_free(a);
    free(a);
}

/* Every allocation of compare_runs failing in turn: -ENOMEM and nothing leaked, then success. */
static void test_alloc_failures(void **state)
{
    (void)state;
    struct synth *a = malloc(sizeof(*a));
    struct compare_cfg cfg = {.seed = 1, .resamples = 100};
    struct compare_rule rule;
    struct compare_result res;
    int rc = -ENOMEM;
    long n = 0;

    assert_non_null(a);
    synth_make(a, 1, 1.0, 50, 2);
    assert_int_equal(compare_rule_parse("ttft.p95>+10%", &rule, NULL, 0), 0);
    for (; rc == -ENOMEM && n < 200; n++) {
        ts_alloc_fail_after(n);
        rc = compare_runs(&a->run, &a->run, &cfg, &rule, 1, &res);
        ts_alloc_fail_after(-1);
    }
    assert_int_equal(rc, 0);
    assert_true(n > 10); /* it did fail a good number of allocations first */
    compare_result_release(&res);
    synth_free(a);
    free(a);
}

/* ---- loading and writing (report/compare_report.h) ------------------------------------- */

/*
 * A result directory made through the real APIs: n requests (the first n_err
 * failing), TTFT scaled by scale, result.json and requests.jsonl.
 */
static void write_run_dir(const char *dir, uint64_t seed, double scale, size_t n, size_t n_err)
{
    struct run_stats *st;
    struct run_summary sum;
    struct buf lines;
    struct rng r;
    char path[512], err[256];
    const uint64_t origin = 1000000 * MS;
    json_t *doc;

    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(run_stats_new(&st), 0);
    buf_init(&lines, 16 << 20);
    rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) {
        struct req_record rec;
        double u = rng_uniform01(&r);
        memset(&rec, 0, sizeof(rec));
        rec.id = i;
        rec.flags = REQF_STREAM | (i == n - 1 ? REQF_WARMUP : 0);
        rec.outcome = i < n_err ? REQ_HTTP_5XX : REQ_OK;
        rec.http_status = i < n_err ? 500 : 200;
        rec.intended_ns = origin + i * 10 * MS;
        rec.start_ns = rec.intended_ns + 300 * US;
        rec.first_chunk_ns = rec.intended_ns + (uint64_t)((80000 + 40000 * u) * scale) * US;
        rec.first_token_ns = rec.first_chunk_ns;
        rec.last_chunk_ns = rec.first_chunk_ns + 7 * 10 * MS;
        rec.end_ns = rec.last_chunk_ns;
        rec.output_tokens = 8;
        rec.choice_chunks = 8;
        run_stats_add_record(st, &rec, NULL);
        assert_int_equal(req_record_append_json(&lines, &rec, origin), 0);
    }
    run_summary_compute(&sum, st, 10.0, 0, NULL);
    struct result_info info = {.started_wall_ns = 1700000000000000000ull};
    assert_int_equal(result_build(st, &sum, &info, &doc), 0);
    snprintf(path, sizeof(path), "%s/result.json", dir);
    assert_int_equal(result_write_file(doc, path, err, sizeof(err)), 0);
    snprintf(path, sizeof(path), "%s/requests.jsonl", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(lines.data, 1, lines.len, f), lines.len);
    assert_int_equal(fclose(f), 0);
    json_decref(doc);
    buf_release(&lines);
    run_stats_free(st);
}

static void remove_run_dir(const char *dir)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/result.json", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/requests.jsonl", dir);
    unlink(path);
    rmdir(dir);
}

/* Replaces line k (0-based) of dir/requests.jsonl with text (NULL: drops it). */
static void edit_line(const char *dir, size_t k, const char *text)
{
    char path[512], tmp[520], line[4096];
    snprintf(path, sizeof(path), "%s/requests.jsonl", dir);
    snprintf(tmp, sizeof(tmp), "%s.new", path);
    FILE *in = fopen(path, "r"), *out = fopen(tmp, "w");
    assert_non_null(in);
    assert_non_null(out);
    for (size_t i = 0; fgets(line, sizeof(line), in); i++) {
        if (i != k)
            fputs(line, out);
        else if (text)
            fprintf(out, "%s\n", text);
    }
    fclose(in);
    assert_int_equal(fclose(out), 0);
    assert_int_equal(rename(tmp, path), 0);
}

static void test_load_and_write(void **state)
{
    (void)state;
    char root[] = "/tmp/ts-test-compare-XXXXXX", a[64], b[64], err[512];
    struct compare_input in_a, in_b;
    struct compare_cfg cfg = {.seed = 1, .resamples = 400};
    struct compare_rule rule;
    struct compare_result res;

    assert_non_null(mkdtemp(root));
    snprintf(a, sizeof(a), "%s/a", root);
    snprintf(b, sizeof(b), "%s/b", root);
    write_run_dir(a, 1, 1.0, 301, 3); /* 300 counted (one is warm-up), 3 failed */
    write_run_dir(b, 2, 1.3, 301, 3);

    /* a directory, with its requests */
    assert_int_equal(compare_input_load(&in_a, a, true, err, sizeof(err)), 0);
    assert_int_equal(in_a.nreqs, 300); /* the warm-up line is left out */
    assert_string_equal(in_a.note, "");
    assert_string_equal(in_a.started_at, "2023-11-14T22:13:20.000Z");
    assert_true(fabs(in_a.run.duration_s - 10.0) < 1e-12);
    size_t ok = 0, failed = 0;
    for (size_t i = 0; i < in_a.nreqs; i++) {
        ok += in_a.reqs[i].kind == CMP_REQ_OK;
        failed += in_a.reqs[i].kind == CMP_REQ_ERROR;
        if (in_a.reqs[i].kind == CMP_REQ_OK) {
            assert_true(in_a.reqs[i].v[CMP_V_TTFT] >= 80 && in_a.reqs[i].v[CMP_V_TTFT] <= 120);
            assert_true(fabs(in_a.reqs[i].v[CMP_V_E2EL] - in_a.reqs[i].v[CMP_V_TTFT] - 70) < 0.002);
            assert_true(fabs(in_a.reqs[i].v[CMP_V_LAG] - 0.3) < 1e-9);
            assert_int_equal(in_a.reqs[i].output_tokens, 8);
        }
    }
    assert_int_equal(ok, 297);
    assert_int_equal(failed, 3);

    /* the file, without its requests (want_requests false) */
    char path[128];
    snprintf(path, sizeof(path), "%s/result.json", b);
    assert_int_equal(compare_input_load(&in_b, path, false, err, sizeof(err)), 0);
    assert_int_equal(in_b.nreqs, 0);
    compare_input_release(&in_b);
    assert_int_equal(compare_input_load(&in_b, b, true, err, sizeof(err)), 0);

    assert_int_equal(compare_rule_parse("ttft.p50>+10%", &rule, err, sizeof(err)), 0);
    assert_int_equal(compare_runs(&in_a.run, &in_b.run, &cfg, &rule, 1, &res), 0);
    assert_true(res.requests_used);
    assert_true(res.regression);

    /* JSON */
    json_t *doc;
    assert_int_equal(compare_build_json(&in_a, &in_b, &res, &rule, &doc), 0);
    assert_string_equal(json_string_value(json_object_get(doc, "schema")), COMPARE_SCHEMA);
    assert_true(json_is_true(json_object_get(doc, "regression")));
    const json_t *rows = json_object_get(doc, "metrics");
    assert_int_equal(json_array_size(rows), res.nrows);
    const json_t *r0 = json_array_get(rows, 0);
    assert_string_equal(json_string_value(json_object_get(r0, "name")), "ttft.p50");
    assert_string_equal(json_string_value(json_object_get(r0, "verdict")), "worse");
    assert_string_equal(json_string_value(json_object_get(r0, "method")), "requests");
    assert_true(json_is_true(json_object_get(r0, "regression")));
    assert_true(json_is_array(json_object_get(r0, "ci")));
    const json_t *gp = json_array_get(rows, res.nrows - 2);
    assert_string_equal(json_string_value(json_object_get(gp, "name")), "goodput");
    assert_true(json_is_null(json_object_get(gp, "base"))); /* no goodput: null, not NaN */
    assert_true(json_is_null(json_object_get(gp, "ci")));
    json_decref(doc);

    /* text */
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    assert_non_null(mem);
    assert_int_equal(compare_write_text(mem, &in_a, &in_b, &res, &rule), 0);
    fclose(mem);
    assert_non_null(strstr(text, "verdict: REGRESSION (1 of 1 rules)"));
    assert_non_null(strstr(text, "resampled from the histograms: itl"));
    free(text);

    /* HTML */
    struct buf html;
    buf_init(&html, 8 << 20);
    assert_int_equal(compare_build_html(&in_a, &in_b, &res, &rule, &html), 0);
    assert_non_null(
        strstr(buf_cstr(&html), "<tr class=\"regression\"><td class=\"m\">ttft.p50 (ms)"));
    assert_non_null(strstr(buf_cstr(&html), "id=\"cmp-e2el-cdf\""));
    assert_null(strstr(buf_cstr(&html), "<script"));
    buf_release(&html);
    compare_result_release(&res);
    compare_input_release(&in_b);

    /* a lost line: the counts disagree, the requests are left out */
    edit_line(b, 10, NULL);
    assert_int_equal(compare_input_load(&in_b, b, true, err, sizeof(err)), 0);
    assert_int_equal(in_b.nreqs, 0);
    assert_null(in_b.reqs);
    assert_string_equal(in_b.note,
                        "requests.jsonl has 296 ok / 3 failed requests, result.json 297 / 3");
    compare_input_release(&in_b);
    /* a malformed line */
    edit_line(b, 4, "{\"outcome\": \"no such outcome\", \"output_tokens\": 1}");
    assert_int_equal(compare_input_load(&in_b, b, true, err, sizeof(err)), 0);
    assert_int_equal(in_b.nreqs, 0);
    assert_string_equal(in_b.note, "requests.jsonl line 5: not a request record");
    compare_input_release(&in_b);

    /* not a result */
    assert_int_equal(compare_input_load(&in_b, root, true, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "no result.json"));
    compare_input_release(&in_a);
    remove_run_dir(a);
    remove_run_dir(b);
    rmdir(root);
}

/* Two runs' configurations: what differs, old -> new, and what is left out
 * (times, ids, the command line; the simulator's port). */
static void test_config_diff(void **state)
{
    struct compare_input a, b;
    json_t *diff = NULL;
    (void)state;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    a.doc =
        json_pack("{s:{s:s}, s:{s:s, s:s, s:f, s:i, s:s, s:s, s:{s:f, s:f}, s:[s], s:o}}", "tool",
                  "version", "0.1.0", "run", "target", "http://127.0.0.1:1/v1", "simulator_profile",
                  "p", "rate", 5.0, "seed", 1, "started_at", "t1", "run_id", "aa", "timeouts",
                  "connect_s", 10.0, "ttfb_s", 300.0, "command_line", "x", "goodput", json_null());
    b.doc =
        json_pack("{s:{s:s}, s:{s:s, s:s, s:f, s:i, s:s, s:s, s:{s:f, s:f}, s:[s], s:s}}", "tool",
                  "version", "0.2.0", "run", "target", "http://127.0.0.1:2/v1", "simulator_profile",
                  "p", "rate", 10.0, "seed", 1, "started_at", "t2", "run_id", "bb", "timeouts",
                  "connect_s", 10.0, "ttfb_s", 60.0, "command_line", "y", "arrival", "constant");
    assert_non_null(a.doc);
    assert_non_null(b.doc);
    assert_int_equal(compare_config_diff(&a, &b, &diff), 0);
    char *text = json_dumps(diff, JSON_COMPACT);
    assert_string_equal(text, "[{\"key\":\"rate\",\"base\":5.0,\"new\":10.0},"
                              "{\"key\":\"timeouts.ttfb_s\",\"base\":300.0,\"new\":60.0},"
                              "{\"key\":\"tool.version\",\"base\":\"0.1.0\",\"new\":\"0.2.0\"},"
                              "{\"key\":\"arrival\",\"base\":null,\"new\":\"constant\"}]");
    free(text);

    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    assert_int_equal(compare_write_config_warning(f, diff), 0);
    fclose(f);
    assert_non_null(strstr(out, "differ in 4 keys"));
    assert_non_null(strstr(out, "  rate: 5.0 -> 10.0\n"));
    assert_non_null(strstr(out, "  arrival: null -> \"constant\"\n"));
    free(out);
    json_decref(diff);

    /* the same configuration: nothing to say; a target that is not the
     * simulator's counts */
    assert_int_equal(compare_config_diff(&a, &a, &diff), 0);
    assert_int_equal(json_array_size(diff), 0);
    f = open_memstream(&out, &len);
    assert_int_equal(compare_write_config_warning(f, diff), 0);
    fclose(f);
    assert_int_equal(len, 0);
    free(out);
    json_decref(diff);
    json_object_del(json_object_get(b.doc, "run"), "simulator_profile");
    assert_int_equal(compare_config_diff(&a, &b, &diff), 0);
    text = json_dumps(diff, JSON_COMPACT);
    assert_non_null(strstr(text, "\"key\":\"target\""));
    free(text);
    json_decref(diff);
    json_decref(a.doc);
    json_decref(b.doc);
}

/* A misspelt --fail-on metric gets the nearest name, its statistic kept. */
static void test_rule_did_you_mean(void **state)
{
    struct compare_rule r;
    char err[256];
    (void)state;
    assert_int_equal(compare_rule_parse("throughputt<-5%", &r, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "unknown metric 'throughputt' (did you mean 'throughput'?)"));
    assert_int_equal(compare_rule_parse("ttfr.p95>+10%", &r, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "(did you mean 'ttft.p95'?)"));
    assert_int_equal(compare_rule_parse("zzzzzzzz>1", &r, err, sizeof(err)), -EINVAL);
    assert_null(strstr(err, "did you mean"));
    assert_int_equal(compare_rule_parse("request_throughput<-5%", &r, err, sizeof(err)), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mwu_hand_example),
        cmocka_unit_test(test_mwu_no_ties_and_all_ties),
        cmocka_unit_test(test_percentile_interval),
        cmocka_unit_test(test_metric_names),
        cmocka_unit_test(test_rule_parse),
        cmocka_unit_test(test_rule_holds),
        cmocka_unit_test(test_identical_runs_no_change),
        cmocka_unit_test(test_shifted_run_detected),
        cmocka_unit_test(test_rates),
        cmocka_unit_test(test_recall_rows),
        cmocka_unit_test(test_seed_reproducible),
        cmocka_unit_test(test_false_positive_rate),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_rule_did_you_mean),
        cmocka_unit_test(test_load_and_write),
        cmocka_unit_test(test_config_diff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
