/*
 * test_knee.c - the sweep's math on synthetic curves with known answers:
 * least squares against a hand-worked example, the knee of hockey-stick
 * curves (exact and noisy, even and geometric grids), the critical load of
 * an exponential error curve (exact and with multiplicative noise), the SLO
 * bracket and bisection.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <math.h>
#include <string.h>
#include <cmocka.h>

#include "analysis/knee.h"
#include "base/dist.h"
#include "base/rng.h"

static void assert_near(double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol))
        fail_msg("got %.9g, want %.9g (+- %g)", got, want, tol);
}

/* ---- least squares ---- */

/*
 * Hand-worked: x = 1..5, y = 2 4 5 4 5. Means 3 and 4; Sxx = 10, Sxy = 6,
 * Syy = 6; slope 0.6, intercept 2.2; SSE = 6 - 0.6 * 6 = 2.4, R^2 = 0.6;
 * se(slope) = sqrt(2.4 / 3 / 10) = 0.28284, t = 2.12132.
 */
static void test_linfit_hand_worked(void **state)
{
    const double x[] = {1, 2, 3, 4, 5}, y[] = {2, 4, 5, 4, 5};
    struct linfit f;
    (void)state;
    assert_int_equal(linfit_compute(x, y, 5, &f), 0);
    assert_near(f.slope, 0.6, 1e-12);
    assert_near(f.intercept, 2.2, 1e-12);
    assert_near(f.r2, 0.6, 1e-12);
    assert_near(f.slope_se, sqrt(0.08), 1e-12);
    assert_near(f.t, 0.6 / sqrt(0.08), 1e-9);
    assert_int_equal(f.n, 5);
    /* t = 2.12 on 3 degrees of freedom is no evidence of a rise at 0.5% */
    assert_false(linfit_rising(&f));
}

/* Student's t, one-sided 99.5%: the textbook table (e.g. NIST/SEMATECH 1.3.6.7.2). */
static void test_student_t(void **state)
{
    (void)state;
    assert_near(student_t_995(1), 63.657, 0);
    assert_near(student_t_995(3), 5.841, 0);
    assert_near(student_t_995(10), 3.169, 0);
    assert_near(student_t_995(11), 3.169, 0); /* between entries: the stricter one */
    assert_near(student_t_995(30), 2.750, 0);
    assert_near(student_t_995(5000), 2.576, 0);
    assert_true(isnan(student_t_995(0)));
}

static void test_linfit_exact_and_degenerate(void **state)
{
    const double x[] = {0, 1, 2, 3}, y[] = {3, 5, 7, 9}, flat[] = {4, 4, 4, 4};
    const double same[] = {2, 2, 2}, bad[] = {1, NAN, 3};
    struct linfit f;
    (void)state;
    assert_int_equal(linfit_compute(x, y, 4, &f), 0);
    assert_near(f.slope, 2, 1e-12);
    assert_near(f.intercept, 3, 1e-12);
    assert_near(f.r2, 1, 1e-12);
    assert_true(isinf(f.t) && f.t > 0);
    assert_true(linfit_rising(&f));
    assert_int_equal(linfit_compute(x, flat, 4, &f), 0);
    assert_near(f.slope, 0, 1e-12);
    assert_true(f.t == 0);
    assert_false(linfit_rising(&f));
    assert_int_equal(linfit_compute(x, y, 2, &f), 0);
    assert_near(f.slope, 2, 1e-12);
    assert_true(isnan(f.t) && isnan(f.slope_se));
    assert_false(linfit_rising(&f)); /* two points prove nothing */
    assert_int_equal(linfit_compute(same, y, 3, &f), -EINVAL);
    assert_int_equal(linfit_compute(x, bad, 3, &f), -EINVAL);
    assert_int_equal(linfit_compute(x, y, 1, &f), -EINVAL);
}

/* ---- knee ---- */

/* Flat at 10 up to x = 12, then rising 5 per unit: the elbow is at 12. */
static void test_knee_hockey_stick(void **state)
{
    double x[20], y[20];
    struct knee k;
    (void)state;
    for (int i = 0; i < 20; i++) {
        x[i] = i + 1;
        y[i] = x[i] <= 12 ? 10 : 10 + 5 * (x[i] - 12);
    }
    assert_int_equal(knee_find(x, y, 20, KNEE_MIN_SCORE, &k), 0);
    assert_int_equal(k.index, 11);
    assert_near(k.x, 12, 0);
    assert_near(k.y, 10, 0);
    assert_near(k.score, 11.0 / 19.0, 1e-12); /* x_n = 11/19, y_n = 0 */
}

/* The same stick with Gaussian noise (sigma 0.5 ms on 10 ms): within one point. */
static void test_knee_hockey_stick_noisy(void **state)
{
    double x[20], y[20];
    struct knee k;
    struct rng r;
    (void)state;
    for (uint64_t seed = 1; seed <= 50; seed++) {
        rng_seed(&r, seed);
        for (int i = 0; i < 20; i++) {
            x[i] = i + 1;
            y[i] = (x[i] <= 12 ? 10 : 10 + 5 * (x[i] - 12)) + 0.5 * dist_normal01(&r);
        }
        assert_int_equal(knee_find(x, y, 20, KNEE_MIN_SCORE, &k), 0);
        if (fabs(k.x - 12) > 1)
            fail_msg("seed %llu: knee at %g, want 12 +- 1", (unsigned long long)seed, k.x);
    }
}

/* A geometric ladder 1, 2, 4, ... 64 over a stick with its elbow at 16. */
static void test_knee_geometric_grid(void **state)
{
    const double x[] = {1, 2, 4, 8, 16, 32, 64};
    double y[7];
    struct knee k;
    (void)state;
    for (int i = 0; i < 7; i++)
        y[i] = x[i] <= 16 ? 50 : 50 + 40 * (x[i] - 16);
    assert_int_equal(knee_find(x, y, 7, KNEE_MIN_SCORE, &k), 0);
    assert_near(k.x, 16, 0);
}

/*
 * A queue's latency 1 / (mu - lambda), mu = 10, on lambda = 1 .. 9.5 by 0.5:
 * the documented answer of the method is the point farthest below the chord
 * from (1, 1/9) to (9.5, 2): where the slope 1 / (10 - l)^2 equals the
 * chord's (2 - 1/9) / 8.5 = 0.22222, i.e. l = 10 - 1 / sqrt(0.22222) = 7.879,
 * so the grid point 8.0 (d is flat near the maximum; 7.5 and 8.0 are the
 * neighbours, 8.0 is nearer).
 */
static void test_knee_queue_curve(void **state)
{
    double x[18], y[18];
    struct knee k;
    (void)state;
    for (int i = 0; i < 18; i++) {
        x[i] = 1 + 0.5 * i;
        y[i] = 1 / (10 - x[i]);
    }
    assert_int_equal(knee_find(x, y, 18, KNEE_MIN_SCORE, &k), 0);
    assert_near(k.x, 8.0, 0);
}

/*
 * y = x^2 on [0, 1]: d = x - x^2 peaks at x = 0.5 (the tangent parallel to
 * the chord), which is what Kneedle reports; the curvature of x^2 itself is
 * largest at 0. docs/SWEEP.md states this limit.
 */
static void test_knee_parabola(void **state)
{
    double x[11], y[11];
    struct knee k;
    (void)state;
    for (int i = 0; i <= 10; i++) {
        x[i] = i / 10.0;
        y[i] = x[i] * x[i];
    }
    assert_int_equal(knee_find(x, y, 11, KNEE_MIN_SCORE, &k), 0);
    assert_near(k.x, 0.5, 1e-12);
    assert_near(k.score, 0.25, 1e-12);
}

static void test_knee_none(void **state)
{
    const double x[] = {1, 2, 3, 4, 5};
    const double line[] = {10, 20, 30, 40, 50}, flat[] = {7, 7, 7, 7, 7};
    const double concave[] = {0, 1, 1.41, 1.73, 2}, falling[] = {50, 40, 30, 20, 10};
    const double unsorted[] = {1, 3, 2, 4, 5}, nan_y[] = {1, 2, NAN, 4, 5};
    const double slight[] = {10, 10.85, 12.1, 13.4, 15}; /* convex, but d max = 0.08 < 0.1 */
    struct knee k;
    (void)state;
    assert_int_equal(knee_find(x, line, 5, KNEE_MIN_SCORE, &k), -ENOENT);
    assert_int_equal(knee_find(x, flat, 5, KNEE_MIN_SCORE, &k), -ENOENT);
    assert_int_equal(knee_find(x, concave, 5, KNEE_MIN_SCORE, &k), -ENOENT);
    assert_int_equal(knee_find(x, falling, 5, KNEE_MIN_SCORE, &k), -ENOENT);
    assert_int_equal(knee_find(x, slight, 5, KNEE_MIN_SCORE, &k), -ENOENT);
    assert_int_equal(knee_find(x, slight, 5, 0.05, &k), 0);
    assert_int_equal(knee_find(unsorted, line, 5, KNEE_MIN_SCORE, &k), -EINVAL);
    assert_int_equal(knee_find(x, nan_y, 5, KNEE_MIN_SCORE, &k), -EINVAL);
    assert_int_equal(knee_find(x, line, 2, KNEE_MIN_SCORE, &k), -EINVAL);
}

/* ---- critical load ---- */

/* eps = 0.01 * exp((l - 30) / 2) on l = 20..34, plus a 0 and a 1 that must be ignored. */
static void test_critical_exact(void **state)
{
    double l[10], e[10];
    struct critical_fit f;
    (void)state;
    for (int i = 0; i < 8; i++) {
        l[i] = 20 + 2 * i;
        e[i] = 0.01 * exp((l[i] - 30) / 2);
    }
    l[8] = 10, e[8] = 0;
    l[9] = 50, e[9] = 1;
    assert_int_equal(critical_fit_compute(l, e, 10, 0.01, 3, &f), 0);
    assert_near(f.lambda_c, 30, 1e-9);
    assert_near(f.delta_lambda, 2, 1e-9);
    assert_near(f.epsilon0, 0.01, 0);
    assert_near(f.r2, 1, 1e-12);
    assert_int_equal(f.points, 8);
    /* another level: eps reaches 5% at 30 + 2 ln 5 */
    assert_int_equal(critical_fit_compute(l, e, 10, 0.05, 3, &f), 0);
    assert_near(f.lambda_c, 30 + 2 * log(5), 1e-9);
}

/*
 * With multiplicative log-normal noise (sigma 0.2 in log space) the slope's
 * standard error is 0.2 / sqrt(Sxx) = 0.2 / sqrt(168) = 0.0154 (b = 0.5) and
 * lambda_c's about 0.2 * sqrt(1/8 + 3^2/168) / 0.5 = 0.17: +-1 and +-20% are
 * far outside chance for every seed.
 */
static void test_critical_noisy(void **state)
{
    double l[8], e[8];
    struct critical_fit f;
    struct rng r;
    (void)state;
    for (uint64_t seed = 1; seed <= 50; seed++) {
        rng_seed(&r, seed);
        for (int i = 0; i < 8; i++) {
            l[i] = 20 + 2 * i;
            e[i] = 0.01 * exp((l[i] - 30) / 2 + 0.2 * dist_normal01(&r));
        }
        assert_int_equal(critical_fit_compute(l, e, 8, 0.01, 3, &f), 0);
        if (fabs(f.lambda_c - 30) > 1 || fabs(f.delta_lambda - 2) > 0.4 || f.r2 < 0.9)
            fail_msg("seed %llu: lambda_c %g delta %g r2 %g", (unsigned long long)seed, f.lambda_c,
                     f.delta_lambda, f.r2);
    }
}

static void test_critical_none(void **state)
{
    const double l[] = {10, 20, 30, 40}, falling[] = {0.1, 0.05, 0.02, 0.01};
    const double two[] = {0, 0, 0.01, 0.02}, ones[] = {0, 1, 1, 1};
    const double rising[] = {0.01, 0.02, 0.04, 0.08};
    struct critical_fit f;
    (void)state;
    assert_int_equal(critical_fit_compute(l, falling, 4, 0.01, 3, &f), -ENOENT);
    assert_int_equal(critical_fit_compute(l, two, 4, 0.01, 3, &f), -ENOENT);
    assert_int_equal(critical_fit_compute(l, ones, 4, 0.01, 2, &f), -ENOENT);
    /* two points are allowed when asked for: the line through them */
    assert_int_equal(critical_fit_compute(l, two, 4, 0.01, 2, &f), 0);
    assert_near(f.lambda_c, 30, 1e-9);
    assert_near(f.delta_lambda, 10 / log(2), 1e-9);
    assert_int_equal(critical_fit_compute(l, rising, 4, 0, 3, &f), -EINVAL);
    assert_int_equal(critical_fit_compute(l, rising, 4, 1, 3, &f), -EINVAL);
    assert_int_equal(critical_fit_compute(l, rising, 4, 0.01, 1, &f), -EINVAL);
}

/* ---- SLO bracket and bisection ---- */

static void test_goodput_bracket(void **state)
{
    const double l[] = {2, 4, 6, 8, 10};
    const bool mixed[] = {true, true, true, false, true}, all[] = {true, true, true, true, true};
    const bool none[] = {false, false, true, false, false};
    const double unsorted[] = {2, 4, 4, 8, 10};
    struct goodput_bracket b;
    (void)state;
    assert_int_equal(goodput_bracket_find(l, mixed, 5, &b), 0);
    assert_int_equal(b.pass, 2);
    assert_int_equal(b.fail, 3);
    assert_int_equal(goodput_bracket_find(l, all, 5, &b), 0);
    assert_int_equal(b.pass, 4);
    assert_int_equal(b.fail, -1);
    assert_int_equal(goodput_bracket_find(l, none, 5, &b), 0);
    assert_int_equal(b.pass, -1);
    assert_int_equal(b.fail, 0);
    assert_int_equal(goodput_bracket_find(unsorted, all, 5, &b), -EINVAL);
    assert_int_equal(goodput_bracket_find(l, all, 0, &b), -EINVAL);
}

/* Capacity 18.2 between a pass at 10 and a fail at 20, tolerance 10% of hi. */
static void test_bisect_converges(void **state)
{
    double lo = 10, hi = 20, next = -1;
    int probes = 0;
    (void)state;
    while (bisect_next(lo, hi, 0.1, &next)) {
        if (next <= 18.2)
            lo = next;
        else
            hi = next;
        assert_true(++probes < 10);
    }
    /* 15 pass, 17.5 pass, 18.75 fail: bracket [17.5, 18.75] is 1.25 <= 1.875 */
    assert_int_equal(probes, 3);
    assert_near(lo, 17.5, 0);
    assert_near(hi, 18.75, 0);
    next = -1;
    assert_false(bisect_next(20, 10, 0.1, &next));
    assert_false(bisect_next(10, NAN, 0.1, &next));
    assert_near(next, -1, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linfit_hand_worked),
        cmocka_unit_test(test_linfit_exact_and_degenerate),
        cmocka_unit_test(test_student_t),
        cmocka_unit_test(test_knee_hockey_stick),
        cmocka_unit_test(test_knee_hockey_stick_noisy),
        cmocka_unit_test(test_knee_geometric_grid),
        cmocka_unit_test(test_knee_queue_curve),
        cmocka_unit_test(test_knee_parabola),
        cmocka_unit_test(test_knee_none),
        cmocka_unit_test(test_critical_exact),
        cmocka_unit_test(test_critical_noisy),
        cmocka_unit_test(test_critical_none),
        cmocka_unit_test(test_goodput_bracket),
        cmocka_unit_test(test_bisect_converges),
    };
    return cmocka_run_group_tests_name("knee", tests, NULL, NULL);
}
