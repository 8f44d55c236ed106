/*
 * test_samples.c - exact samples and numpy's statistics over them, checked
 * against values worked out by hand with numpy.percentile's default
 * ("linear") definition: the value at rank p/100 * (n - 1), interpolated
 * between the samples on either side; mean; population std (ddof=0).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <math.h>
#include <string.h>
#include <cmocka.h>

#include "analysis/samples.c"

#define MS 1000000ll /* ns */

static void assert_near(double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol))
        fail_msg("got %.12g, want %.12g (+- %g)", got, want, tol);
}

/*
 * {15, 20, 35, 40, 50} ms, added out of order. By hand:
 * p50: rank 2 -> 35; p90: rank 3.6 -> 40 + 0.6 * 10 = 46; p95: 3.8 -> 48;
 * p99: 3.96 -> 49.6; p99.9: 3.996 -> 49.96; p25: rank 1 -> 20; p0 -> 15,
 * p100 -> 50. mean 160 / 5 = 32; deviations -17 -12 3 8 18, squares sum 830,
 * std = sqrt(830 / 5) = sqrt(166).
 */
static void test_numpy_linear_odd(void **state)
{
    (void)state;
    static const int64_t in[] = {40, 15, 50, 20, 35};
    static const double p[] = {50, 90, 95, 99, 99.9, 25, 0, 100};
    static const double want[] = {35, 46, 48, 49.6, 49.96, 20, 15, 50};
    double pct[8];
    struct samples s;
    struct samples_stats st;

    samples_init(&s, 0);
    assert_int_equal(s.max, SAMPLES_MAX);
    for (size_t i = 0; i < 5; i++)
        samples_add(&s, in[i] * MS);
    assert_true(samples_exact(&s));
    assert_int_equal(samples_compute_ms(&s, p, 8, &st, pct), 0);
    assert_int_equal(st.count, 5);
    assert_near(st.mean, 32, 1e-9);
    assert_near(st.std, sqrt(166.0), 1e-9);
    assert_near(st.min, 15, 1e-12);
    assert_near(st.max, 50, 1e-12);
    for (size_t i = 0; i < 8; i++)
        assert_near(pct[i], want[i], 1e-9);
    samples_release(&s);
}

/* {1, 2, 3, 4} ms: the median is the mean of the middle two (numpy.median):
 * rank 1.5 -> 2.5; p99: rank 2.97 -> 3.97; p90: 2.7 -> 3.7. std: deviations
 * +-1.5, +-0.5, squares 5 / 4 = 1.25. One sample: every percentile is it. */
static void test_numpy_linear_even_and_one(void **state)
{
    (void)state;
    static const double p[] = {50, 99, 90};
    double pct[3];
    struct samples s;
    struct samples_stats st;

    samples_init(&s, 0);
    for (int64_t v = 4; v >= 1; v--)
        samples_add(&s, v * MS);
    assert_int_equal(samples_compute_ms(&s, p, 3, &st, pct), 0);
    assert_near(pct[0], 2.5, 1e-12);
    assert_near(pct[1], 3.97, 1e-12);
    assert_near(pct[2], 3.7, 1e-12);
    assert_near(st.std, sqrt(1.25), 1e-12);
    samples_clear(&s);
    samples_add(&s, 7 * MS + 250000);
    assert_int_equal(samples_compute_ms(&s, p, 3, &st, pct), 0);
    for (int i = 0; i < 3; i++)
        assert_near(pct[i], 7.25, 1e-12);
    assert_near(st.std, 0, 0);
    samples_clear(&s);
    assert_int_equal(samples_compute_ms(&s, p, 3, &st, pct), 0);
    assert_int_equal(st.count, 0);
    assert_near(pct[0] + st.mean + st.std, 0, 0);
    samples_release(&s);
}

/* 152 values of 1..152 ms (the sample count): p99 at rank 149.49
 * lies between 150 and 151 ms -> 150.49, where a histogram answers 151. */
static void test_small_count_p99(void **state)
{
    (void)state;
    static const double p[] = {99};
    double pct[1];
    struct samples s;
    struct samples_stats st;

    samples_init(&s, 0);
    for (int64_t v = 1; v <= 152; v++)
        samples_add(&s, v * MS);
    assert_int_equal(samples_compute_ms(&s, p, 1, &st, pct), 0);
    assert_near(pct[0], 150.49, 1e-9);
    assert_near(st.mean, 76.5, 1e-9);
    assert_near(st.std, sqrt((152.0 * 152.0 - 1) / 12.0), 1e-9);
    samples_release(&s);
}

/* The bound: values beyond it are counted, never kept; a merge keeps what
 * fits and carries the losses; a set marked not kept says so. */
static void test_bound_and_merge(void **state)
{
    (void)state;
    struct samples a, b;

    samples_init(&a, 3);
    samples_init(&b, 3);
    samples_add(&a, 1);
    samples_add(&a, 2);
    samples_add(&b, 3);
    samples_add(&b, 4);
    samples_merge(&a, &b);
    assert_int_equal(a.n, 3);
    assert_int_equal(a.dropped, 1);
    assert_int_equal(samples_loss(&a), SAMPLES_OVER_CAP);
    assert_string_equal(samples_loss_name(samples_loss(&a)), "over_cap");
    samples_add(&b, 5);
    samples_add(&b, 6);
    assert_int_equal(b.n, 3);
    assert_int_equal(b.dropped, 1);
    samples_clear(&b);
    samples_add(&b, 9);
    assert_true(samples_exact(&b));
    samples_mark_not_kept(&b);
    assert_int_equal(samples_loss(&b), SAMPLES_NOT_KEPT);
    samples_clear(&a);
    samples_merge(&a, &b);
    assert_int_equal(a.n, 1);
    assert_int_equal(samples_loss(&a), SAMPLES_NOT_KEPT);
    samples_release(&a);
    samples_release(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numpy_linear_odd),
        cmocka_unit_test(test_numpy_linear_even_and_one),
        cmocka_unit_test(test_small_count_p99),
        cmocka_unit_test(test_bound_and_merge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
