#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "workload/arrival.h"

#define NS 1000000000ULL

static void assert_close(double got, double want, double tol, const char *what)
{
    if (!(fabs(got - want) <= tol))
        fail_msg("%s: got %.10g, want %.10g +- %.3g", what, got, want, tol);
}

static void test_process_parse(void **state)
{
    struct arrival_process p;
    char err[256], buf[32];
    assert_int_equal(arrival_process_parse(&p, "poisson", err, sizeof(err)), 0);
    assert_int_equal(p.kind, ARRIVAL_POISSON);
    assert_int_equal(arrival_process_parse(&p, "Constant", err, sizeof(err)), 0);
    assert_int_equal(p.kind, ARRIVAL_CONSTANT);
    assert_string_equal(arrival_process_format(&p, buf, sizeof(buf)), "constant");
    assert_int_equal(arrival_process_parse(&p, "gamma:0.5", err, sizeof(err)), 0);
    assert_int_equal(p.kind, ARRIVAL_GAMMA);
    assert_true(p.burstiness == 0.5);
    assert_string_equal(arrival_process_format(&p, buf, sizeof(buf)), "gamma:0.5");

    static const struct {
        const char *spec, *msg;
    } bad[] = {
        {"uniform", "unknown arrival process 'uniform' (expected poisson, constant or gamma:B)"},
        {"", "unknown arrival process '' (expected poisson, constant or gamma:B)"},
        {"poisson:2",
         "unknown arrival process 'poisson:2' (expected poisson, constant or gamma:B)"},
        {"gamma", "gamma: expected gamma:B with burstiness B > 0 (e.g. gamma:0.5)"},
        {"gamma:", "gamma: expected gamma:B with burstiness B > 0 (e.g. gamma:0.5)"},
        {"gamma:x", "gamma: expected gamma:B with burstiness B > 0 (e.g. gamma:0.5)"},
        {"gamma:1s", "gamma: expected gamma:B with burstiness B > 0 (e.g. gamma:0.5)"},
        {"gamma:0", "gamma: burstiness must be > 0 (got 0)"},
        {"gamma:-2", "gamma: burstiness must be > 0 (got -2)"},
        {"gammas:1", "unknown arrival process 'gammas:1' (expected poisson, constant or gamma:B)"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = arrival_process_parse(&p, bad[i].spec, err, sizeof(err));
        if (rc != -EINVAL || strcmp(err, bad[i].msg) != 0)
            fail_msg("'%s': rc %d '%s'", bad[i].spec, rc, err);
    }

    struct arrival a;
    assert_int_equal(arrival_parse(&a, "poisson", 0, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "arrival: rate must be > 0 (got 0)");
    assert_int_equal(arrival_parse(&a, "gamma:2", 10, err, sizeof(err)), 0);
    assert_int_equal(a.process.kind, ARRIVAL_GAMMA);
    assert_true(a.rate == 10);
    arrival_release(&a);
}

static void test_init_rejects(void **state)
{
    struct arrival a;
    assert_int_equal(arrival_init_constant(&a, 0), -EINVAL);
    assert_int_equal(arrival_init_poisson(&a, -1), -EINVAL);
    assert_int_equal(arrival_init_poisson(&a, NAN), -EINVAL);
    assert_int_equal(arrival_init_gamma(&a, 10, 0), -EINVAL);
    assert_int_equal(arrival_init_gamma(&a, 10, INFINITY), -EINVAL);
    struct arrival_process p = {ARRIVAL_POISSON, 1};
    struct arrival_stage st[2] = {{NS, 10}, {UINT64_MAX, 10}};
    assert_int_equal(arrival_init_stages(&a, &p, 0, st, 0), -EINVAL);
    assert_int_equal(arrival_init_stages(&a, &p, 0, st, 2), -EINVAL); /* duration overflow */
    st[1].duration_ns = NS;
    st[1].target = -1;
    assert_int_equal(arrival_init_stages(&a, &p, 0, st, 2), -EINVAL);
    st[1].target = INFINITY;
    assert_int_equal(arrival_init_stages(&a, &p, 0, st, 2), -EINVAL);
    assert_int_equal(arrival_init_ramp(&a, &p, -1, 10, NS), -EINVAL);
    ts_alloc_fail_after(0);
    assert_int_equal(arrival_init_ramp(&a, &p, 1, 10, NS), -ENOMEM);
    ts_alloc_fail_after(-1);
    arrival_release(&a);
    arrival_release(NULL);
}

static void test_constant_exact(void **state)
{
    struct arrival a;
    struct rng r;
    rng_seed(&r, 1);
    assert_int_equal(arrival_init_constant(&a, 1000), 0);
    for (uint64_t k = 0; k < 10000; k++) {
        uint64_t t;
        assert_int_equal(arrival_next(&a, &r, &t), 0);
        assert_true(t == k * 1000000ULL);
    }
    assert_int_equal(arrival_duration_ns(&a), 0);
    arrival_release(&a);

    /* 3/s: 333333333.33 ns gaps, rounded but never drifting. */
    assert_int_equal(arrival_init_constant(&a, 3), 0);
    uint64_t t = 0, prev = 0;
    for (uint64_t k = 0; k <= 30000; k++) {
        assert_int_equal(arrival_next(&a, &r, &t), 0);
        assert_true(t == (uint64_t)floor(k * (1e9 / 3) + 0.5));
        if (k > 0)
            assert_true(t - prev == 333333333 || t - prev == 333333334);
        prev = t;
    }
    assert_true(t == 10000ULL * NS);

    arrival_reset(&a);
    assert_int_equal(arrival_next(&a, &r, &t), 0);
    assert_true(t == 0);
    assert_int_equal(arrival_next(&a, &r, &t), 0);
    assert_true(t == 333333333);
    arrival_release(&a);
}

/* Mean and coefficient of variation of n gaps; checks monotonicity and t0 = 0. */
static void gap_stats(struct arrival *a, uint64_t seed, int n, double *mean, double *cv)
{
    struct rng r;
    rng_seed(&r, seed);
    uint64_t t, prev;
    assert_int_equal(arrival_next(a, &r, &prev), 0);
    assert_true(prev == 0);
    double sum = 0, sumsq = 0;
    for (int i = 0; i < n; i++) {
        assert_int_equal(arrival_next(a, &r, &t), 0);
        assert_true(t >= prev);
        double g = (double)(t - prev);
        sum += g;
        sumsq += g * g;
        prev = t;
    }
    *mean = sum / n;
    *cv = sqrt(sumsq / n - *mean * *mean) / *mean;
}

static void test_poisson(void **state)
{
    struct arrival a;
    assert_int_equal(arrival_init_poisson(&a, 100), 0);
    double mean, cv;
    gap_stats(&a, 2, 200000, &mean, &cv);
    /* 1/rate = 10 ms; sd of the mean 0.22%. */
    assert_close(mean / 1e7, 1.0, 0.01, "poisson mean gap");
    assert_close(cv, 1.0, 0.02, "poisson cv");
    arrival_release(&a);
}

static void test_gamma_burstiness(void **state)
{
    const double bs[] = {0.25, 1, 4};
    for (size_t i = 0; i < sizeof(bs) / sizeof(bs[0]); i++) {
        struct arrival a;
        double b = bs[i];
        assert_int_equal(arrival_init_gamma(&a, 50, b), 0);
        const int n = 200000;
        double mean, cv;
        gap_stats(&a, 3 + i, n, &mean, &cv);
        double want_cv = 1 / sqrt(b);
        char what[64];
        snprintf(what, sizeof(what), "gamma:%g mean gap", b);
        assert_close(mean / 2e7, 1.0, 5 * want_cv / sqrt(n), what);
        snprintf(what, sizeof(what), "gamma:%g cv", b);
        assert_close(cv / want_cv, 1.0, 5 * 0.5 * sqrt((2 + 6 / b) / n), what);
        arrival_release(&a);
    }
}

static void test_infinite_rate(void **state)
{
    struct arrival a;
    struct rng r;
    rng_seed(&r, 4);
    assert_int_equal(arrival_init_poisson(&a, INFINITY), 0);
    for (int i = 0; i < 100; i++) {
        uint64_t t = 1;
        assert_int_equal(arrival_next(&a, &r, &t), 0);
        assert_true(t == 0);
    }
    arrival_release(&a);
}

/* Counts arrivals per window [edges[i], edges[i+1]) until TS_CLOSED. */
static uint64_t count_windows(struct arrival *a, uint64_t seed, const uint64_t *edges, size_t nwin,
                              long *counts)
{
    struct rng r;
    rng_seed(&r, seed);
    memset(counts, 0, nwin * sizeof(*counts));
    uint64_t t, prev = 0, total = 0;
    int rc;
    while ((rc = arrival_next(a, &r, &t)) == 0) {
        assert_true(t >= prev);
        prev = t;
        total++;
        assert_true(total < 10000000); /* bounded */
        for (size_t i = 0; i < nwin; i++) {
            if (t >= edges[i] && (t < edges[i + 1] || (i + 1 == nwin && t == edges[i + 1])))
                counts[i]++;
        }
    }
    assert_int_equal(rc, TS_CLOSED);
    assert_int_equal(arrival_next(a, &r, &t), TS_CLOSED); /* stays closed */
    return total;
}

static void test_ramp(void **state)
{
    /* 0 -> 2000/s over 10 s: L(t) = 100 t^2, 10000 in all; the first tenth
     * holds 100, the last 10000 - 8100 = 1900. */
    struct arrival_process poisson = {ARRIVAL_POISSON, 1}, constant = {ARRIVAL_CONSTANT, 1};
    struct arrival a;
    const uint64_t edges[] = {0, NS, 9 * NS, 10 * NS};
    long c[3];

    assert_int_equal(arrival_init_ramp(&a, &poisson, 0, 2000, 10 * NS), 0);
    assert_true(arrival_duration_ns(&a) == 10 * NS);
    assert_close(arrival_rate_at(&a, 5 * NS / 2), 500, 1e-9, "rate at 2.5 s");
    assert_close(arrival_expected(&a, NS), 100, 1e-9, "expected by 1 s");
    assert_close(arrival_expected(&a, 10 * NS), 10000, 1e-9, "expected by 10 s");
    assert_close(arrival_expected(&a, 20 * NS), 10000, 1e-9, "expected after the end");
    assert_true(arrival_rate_at(&a, 10 * NS) == 0);
    uint64_t total = count_windows(&a, 5, edges, 3, c);
    assert_close((double)c[0], 100, 5 * 10, "poisson ramp first tenth");
    assert_close((double)c[2], 1900, 5 * sqrt(1900), "poisson ramp last tenth");
    assert_close((double)total, 10000, 5 * 100, "poisson ramp total");
    arrival_release(&a);

    /* The constant process puts the k-th arrival where L reaches k. */
    assert_int_equal(arrival_init_ramp(&a, &constant, 0, 2000, 10 * NS), 0);
    total = count_windows(&a, 5, edges, 3, c);
    assert_close((double)c[0], 100, 1, "constant ramp first tenth");
    assert_close((double)c[2], 1900, 1, "constant ramp last tenth");
    assert_close((double)total, 10000, 1, "constant ramp total");
    arrival_reset(&a);
    struct rng r;
    rng_seed(&r, 1);
    uint64_t t;
    assert_int_equal(arrival_next(&a, &r, &t), 0);
    assert_close((double)t, 0.1e9, 1, "first arrival: L(t) = 1 at t = 0.1 s");
    arrival_release(&a);

    /* Down from 1000/s to 0 over 2 s: 1000 arrivals, the last near the end. */
    assert_int_equal(arrival_init_ramp(&a, &constant, 1000, 0, 2 * NS), 0);
    const uint64_t e2[] = {0, NS, 2 * NS};
    total = count_windows(&a, 6, e2, 2, c);
    assert_close((double)total, 1000, 1, "ramp down total");
    assert_close((double)c[0], 750, 1, "ramp down first second");
    arrival_release(&a);
}

static void test_stages(void **state)
{
    /* k6-like: up to 100/s in 10 s, hold 20 s, down to 0 in 10 s, nothing for
     * 5 s, a step to 50/s, hold 10 s. Expected: 500, 2000, 500, 0, -, 500. */
    const struct arrival_stage st[] = {
        {10 * NS, 100}, {20 * NS, 100}, {10 * NS, 0}, {5 * NS, 0}, {0, 50}, {10 * NS, 50},
    };
    const uint64_t edges[] = {0, 10 * NS, 30 * NS, 40 * NS, 45 * NS, 55 * NS};
    const double want[] = {500, 2000, 500, 0, 500};
    struct arrival_process procs[] = {
        {ARRIVAL_POISSON, 1}, {ARRIVAL_CONSTANT, 1}, {ARRIVAL_GAMMA, 4}};
    for (size_t pi = 0; pi < 3; pi++) {
        struct arrival a;
        long c[5];
        assert_int_equal(arrival_init_stages(&a, &procs[pi], 0, st, 6), 0);
        assert_true(arrival_duration_ns(&a) == 55 * NS);
        assert_close(arrival_expected(&a, 55 * NS), 3500, 1e-9, "expected total");
        assert_true(arrival_rate_at(&a, 42 * NS) == 0);
        assert_true(arrival_rate_at(&a, 45 * NS) == 50);
        assert_true(arrival_rate_at(&a, 20 * NS) == 100);
        count_windows(&a, 7 + pi, edges, 5, c);
        for (int i = 0; i < 5; i++) {
            char what[64];
            snprintf(what, sizeof(what), "process %zu stage window %d", pi, i);
            /* Poisson: 5 sd; gamma:4 is smoother (variance ~ mean/4); constant: +-1. */
            double tol = procs[pi].kind == ARRIVAL_CONSTANT ? 1 : 5 * sqrt(want[i]) + 1;
            assert_close((double)c[i], want[i], tol, what);
        }
        assert_int_equal(c[3], 0); /* no arrival while the rate is 0 */
        arrival_release(&a);
    }
}

static void test_stages_start_at_zero_then_rise(void **state)
{
    /* A stage that holds 0 first: nothing until it rises. */
    const struct arrival_stage st[] = {{5 * NS, 0}, {1 * NS, 1000}};
    struct arrival_process p = {ARRIVAL_POISSON, 1};
    struct arrival a;
    assert_int_equal(arrival_init_stages(&a, &p, 0, st, 2), 0);
    struct rng r;
    rng_seed(&r, 8);
    uint64_t t;
    assert_int_equal(arrival_next(&a, &r, &t), 0);
    assert_true(t > 5 * NS && t <= 6 * NS);
    arrival_release(&a);
}

static void test_parse_stages(void **state)
{
    struct arrival a;
    struct arrival_process p = {ARRIVAL_CONSTANT, 1};
    char err[256];
    assert_int_equal(arrival_parse_stages(&a, &p, 5, "30s:10,1m:600/m, 10s : 0", err, sizeof(err)),
                     0);
    assert_int_equal(a.nstages, 3);
    assert_true(a.start_rate == 5);
    assert_true(a.stages[0].duration_ns == 30 * NS && a.stages[0].target == 10);
    assert_true(a.stages[1].duration_ns == 60 * NS && a.stages[1].target == 10);
    assert_true(a.stages[2].duration_ns == 10 * NS && a.stages[2].target == 0);
    arrival_release(&a);

    static const struct {
        const char *spec, *msg;
    } bad[] = {
        {"", "stages: expected DURATION:RATE[,DURATION:RATE...] (e.g. 30s:10,1m:50)"},
        {"30s", "stage 1: expected DURATION:RATE (e.g. 30s:10), got '30s'"},
        {"30s:10,1x:5", "stage 2: bad duration '1x' (e.g. 30s)"},
        {"30s:abc", "stage 1: bad rate 'abc' (e.g. 10 or 600/m)"},
        {"30s:10,", "stage 2: expected DURATION:RATE (e.g. 30s:10), got ''"},
        {"30s:-1", "stage 1: bad rate '-1' (e.g. 10 or 600/m)"},
        {"18446744073s:1,1s:1", "stages: total duration too long, or a bad start rate or process"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = arrival_parse_stages(&a, &p, 0, bad[i].spec, err, sizeof(err));
        if (rc != -EINVAL || strcmp(err, bad[i].msg) != 0)
            fail_msg("'%s': rc %d '%s'", bad[i].spec, rc, err);
        arrival_release(&a);
    }
    char big[400];
    memset(big, '1', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(arrival_parse_stages(&a, &p, 0, big, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "stage 1: longer than 255 characters");
}

static void test_deterministic(void **state)
{
    struct arrival a, b;
    assert_int_equal(arrival_init_gamma(&a, 20, 0.5), 0);
    assert_int_equal(arrival_init_gamma(&b, 20, 0.5), 0);
    struct rng ra, rb;
    rng_seed(&ra, 77);
    rng_seed(&rb, 77);
    for (int i = 0; i < 1000; i++) {
        uint64_t x, y;
        assert_int_equal(arrival_next(&a, &ra, &x), 0);
        assert_int_equal(arrival_next(&b, &rb, &y), 0);
        assert_true(x == y);
    }
    arrival_release(&a);
    arrival_release(&b);
}

/* Recorded times (run --replay): divided by the speed; they end, or repeat with --loop. */
static void test_times(void **state)
{
    (void)state;
    const uint64_t rec[] = {0, 100, 300};
    struct arrival a;
    struct rng r;
    uint64_t t;
    rng_seed(&r, 1);
    assert_int_equal(arrival_init_times(&a, rec, 3, 2.0, false), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(arrival_next(&a, &r, &t), 0);
        assert_int_equal(t, rec[i] / 2);
    }
    assert_int_equal(arrival_next(&a, &r, &t), TS_CLOSED);
    arrival_release(&a);
    assert_int_equal(arrival_init_times(&a, rec, 3, 1.0, true), 0);
    for (int i = 0; i < 7; i++) {
        assert_int_equal(arrival_next(&a, &r, &t), 0);
        assert_int_equal(t, rec[i % 3] + (uint64_t)(i / 3) * 450); /* period: 300 + mean gap 150 */
    }
    arrival_release(&a);
    const uint64_t unsorted[] = {5, 1};
    assert_int_equal(arrival_init_times(&a, unsorted, 2, 1.0, false), -EINVAL);
    assert_int_equal(arrival_init_times(&a, rec, 3, 0.0, false), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_process_parse),
        cmocka_unit_test(test_init_rejects),
        cmocka_unit_test(test_constant_exact),
        cmocka_unit_test(test_poisson),
        cmocka_unit_test(test_gamma_burstiness),
        cmocka_unit_test(test_infinite_rate),
        cmocka_unit_test(test_ramp),
        cmocka_unit_test(test_stages),
        cmocka_unit_test(test_stages_start_at_zero_then_rise),
        cmocka_unit_test(test_parse_stages),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_times),
    };
    return cmocka_run_group_tests_name("arrival", tests, NULL, NULL);
}
