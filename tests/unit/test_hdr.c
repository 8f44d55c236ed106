/*
 * Tests of the HDR histogram. Known values come from HdrHistogram's own test
 * suites (cited at each use):
 *  - HdrHistogram_c test/hdr_histogram_test.c (load_histograms(): 10,000
 *    values of 1000 and one of 100,000,000, raw and corrected with an expected
 *    interval of 10,000; its percentile, count and iterator expectations);
 *  - HdrHistogram (Java) src/test/java/org/HdrHistogram/HistogramDataTest.java
 *    (the same data: expected mean and standard deviation within 0.1%);
 *  - HdrHistogram (Java) src/test/resources/org/HdrHistogram/
 *    jHiccup-2.0.7S.logV2.hlog and tagged-non-monotonic.hlog (histogram blobs
 *    written by the Java implementation, with their Interval_Max column).
 * hdr.c is included so the static varint and base64 helpers can be tested.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>
#include <cmocka.h>

#include "base/hdr.c"

#include "base/clock.h"

static struct hdr *raw_h, *cor_h;

/* HdrHistogram_c's load_histograms(). */
static int load_histograms(void **state)
{
    (void)state;
    if (hdr_new(1, INT64_C(3600) * 1000 * 1000, 3, &raw_h) ||
        hdr_new(1, INT64_C(3600) * 1000 * 1000, 3, &cor_h))
        return -1;
    for (int i = 0; i < 10000; i++) {
        if (hdr_record(raw_h, 1000) || hdr_record_corrected(cor_h, 1000, 10000))
            return -1;
    }
    if (hdr_record(raw_h, 100000000) || hdr_record_corrected(cor_h, 100000000, 10000))
        return -1;
    return 0;
}

static int free_histograms(void **state)
{
    (void)state;
    hdr_free(raw_h);
    hdr_free(cor_h);
    raw_h = cor_h = NULL;
    return 0;
}

static void assert_within(double actual, double expected, double rel)
{
    double tol = expected * rel;
    if (actual < expected - tol || actual > expected + tol)
        fail_msg("%.6f not within %.4f%% of %.6f", actual, rel * 100.0, expected);
}

/* Deterministic 64-bit LCG (Knuth MMIX), so tests do not depend on rand(). */
static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 11;
}

/* ---- Layout ---- */

static void test_layout(void **state)
{
    struct hdr h;
    assert_int_equal(hdr_init(&h, 1, INT64_C(3600000000), 3), 0);
    /* HdrHistogram_c test_create: counts_len 23552. */
    assert_int_equal(h.counts_len, 23552);
    assert_int_equal(h.sub_count, 2048);
    assert_int_equal(h.bucket_count, 22);
    assert_int_equal(h.unit_magnitude, 0);
    hdr_release(&h);
    hdr_release(&h); /* twice is safe */

    /* HdrHistogram_c test_invalid_init / test_invalid_significant_figures. */
    assert_int_equal(hdr_init(&h, 0, 64 * 1024, 2), -EINVAL);
    assert_int_equal(hdr_init(&h, 80, 110, 5), -EINVAL);
    assert_int_equal(hdr_init(&h, 1, 36000000, 0), -EINVAL);
    assert_int_equal(hdr_init(&h, 1, 36000000, 6), -EINVAL);
    assert_int_equal(hdr_init(&h, INT64_C(1) << 50, INT64_MAX, 5), -EINVAL);

    /* The widest layout still fits and records INT64_MAX. */
    assert_int_equal(hdr_init(&h, 1, INT64_MAX, 3), 0);
    assert_int_equal(hdr_record(&h, INT64_MAX), 0);
    assert_int_equal(h.saturated, 0);
    assert_int_equal(hdr_max(&h), INT64_MAX);
    assert_int_equal(hdr_value_at_percentile(&h, 100.0), INT64_MAX);
    hdr_release(&h);

    struct hdr *lat = NULL;
    assert_int_equal(hdr_new_latency(&lat), 0);
    assert_int_equal(lat->lowest, 1);
    assert_int_equal(lat->highest, INT64_C(3600000000));
    assert_int_equal(lat->sigfigs, 3);
    struct hdr *like = NULL;
    assert_int_equal(hdr_new_like(lat, &like), 0);
    assert_int_equal(like->counts_len, lat->counts_len);
    hdr_free(like);
    hdr_free(lat);
    hdr_free(NULL);
}

static void test_large_values(void **state)
{
    /* Java HdrHistogram HistogramTest.testConstructionWithLargeNumbers (the
     * current version; HdrHistogram_c's older copy expects 30,000,000 at
     * 83.33% because it rounds the rank to nearest, see hdr.h). With lowest
     * 20,000,000 the unit is 2^24, so 20M and 30M share a sub-bucket. */
    struct hdr *h = NULL;
    assert_int_equal(hdr_new(20000000, 100000000, 5, &h), 0);
    assert_int_equal(hdr_record(h, 100000000), 0);
    assert_int_equal(hdr_record(h, 20000000), 0);
    assert_int_equal(hdr_record(h, 30000000), 0);
    assert_true(hdr_values_are_equivalent(h, 20000000, hdr_value_at_percentile(h, 50.0)));
    assert_true(hdr_values_are_equivalent(h, 30000000, hdr_value_at_percentile(h, 50.0)));
    assert_true(hdr_values_are_equivalent(h, 100000000, hdr_value_at_percentile(h, 83.33)));
    assert_true(hdr_values_are_equivalent(h, 100000000, hdr_value_at_percentile(h, 83.34)));
    assert_true(hdr_values_are_equivalent(h, 100000000, hdr_value_at_percentile(h, 99.0)));
    hdr_free(h);

    /* Nearest rank, ceil(p / 100 * n), on 1, 2, 3. */
    assert_int_equal(hdr_new(1, 1000, 3, &h), 0);
    for (int v = 1; v <= 3; v++)
        assert_int_equal(hdr_record(h, v), 0);
    assert_int_equal(hdr_value_at_percentile(h, 33.33), 1);
    assert_int_equal(hdr_value_at_percentile(h, 33.34), 2);
    assert_int_equal(hdr_value_at_percentile(h, 40.0), 2); /* rank 1.2 -> 2 */
    assert_int_equal(hdr_value_at_percentile(h, 100.0 * 2 / 3), 2);
    assert_int_equal(hdr_value_at_percentile(h, 66.67), 3);
    hdr_free(h);
}

/* ---- The classic data set ---- */

static void test_counts_min_max(void **state)
{
    /* HdrHistogram_c test_total_count, test_get_min_value, test_get_max_value. */
    assert_int_equal(hdr_total_count(raw_h), 10001);
    assert_int_equal(hdr_total_count(cor_h), 20000);
    assert_int_equal(hdr_min(raw_h), 1000);
    assert_int_equal(hdr_min(cor_h), 1000);
    assert_true(hdr_values_are_equivalent(raw_h, hdr_max(raw_h), 100000000));
    assert_true(hdr_values_are_equivalent(cor_h, hdr_max(cor_h), 100000000));
    /* By hand: 100,000,000 is in the bucket of width 65536 starting at
     * 1525 * 65536 = 99,942,400, so the max is 99,942,400 + 65,535. */
    assert_int_equal(hdr_max(raw_h), 100007935);
    /* HistogramDataTest.testGetCountAtValue. */
    assert_int_equal(hdr_count_at_value(raw_h, 1000), 10000);
    assert_int_equal(hdr_count_at_value(cor_h, 1000), 10000);
    assert_int_equal(hdr_count_at_value(raw_h, 100000000), 1);
    assert_int_equal(hdr_count_at_value(raw_h, 5000), 0);
    assert_int_equal(hdr_count_at_value(raw_h, -1), 0);
    assert_int_equal(raw_h->saturated, 0);
}

static void test_percentiles(void **state)
{
    /* HdrHistogram_c test_percentiles (within 0.1%). */
    assert_within((double)hdr_value_at_percentile(raw_h, 30.0), 1000.0, 0.001);
    assert_within((double)hdr_value_at_percentile(raw_h, 99.0), 1000.0, 0.001);
    assert_within((double)hdr_value_at_percentile(raw_h, 99.99), 1000.0, 0.001);
    assert_within((double)hdr_value_at_percentile(raw_h, 99.999), 100000000.0, 0.001);
    assert_within((double)hdr_value_at_percentile(raw_h, 100.0), 100000000.0, 0.001);

    assert_within((double)hdr_value_at_percentile(cor_h, 30.0), 1000.0, 0.001);
    assert_within((double)hdr_value_at_percentile(cor_h, 50.0), 1000.0, 0.001);
    assert_within((double)hdr_value_at_percentile(cor_h, 75.0), 50000000.0, 0.001);
    assert_within((double)hdr_value_at_percentile(cor_h, 90.0), 80000000.0, 0.001);
    assert_within((double)hdr_value_at_percentile(cor_h, 99.0), 98000000.0, 0.001);
    assert_within((double)hdr_value_at_percentile(cor_h, 99.999), 100000000.0, 0.001);
    assert_within((double)hdr_value_at_percentile(cor_h, 100.0), 100000000.0, 0.001);

    /* Exact semantics: highest equivalent of the bucket reaching the rank;
     * percentile 0 is the min, out-of-range percentiles clamp. */
    assert_int_equal(hdr_value_at_percentile(raw_h, 30.0), 1000);
    assert_int_equal(hdr_value_at_percentile(raw_h, 100.0), 100007935);
    assert_int_equal(hdr_value_at_percentile(raw_h, 0.0), 1000);
    assert_int_equal(hdr_value_at_percentile(raw_h, -5.0), 1000);
    assert_int_equal(hdr_value_at_percentile(raw_h, 250.0), 100007935);
    assert_int_equal(hdr_value_at_percentile(raw_h, NAN), 1000);

    /* HdrHistogram_c test_percentiles_by_value_at_percentiles. */
    const double ps[5] = {30.0, 99.0, 99.99, 99.999, 100.0};
    int64_t vs[5];
    assert_int_equal(hdr_values_at_percentiles(raw_h, ps, vs, 5), 0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(vs[i], hdr_value_at_percentile(raw_h, ps[i]));
    const double bad[2] = {50.0, 10.0};
    assert_int_equal(hdr_values_at_percentiles(raw_h, bad, vs, 2), -EINVAL);
}

static void test_mean_stddev(void **state)
{
    /* HistogramDataTest.testGetMean / testGetStdDeviation (within 0.1%). */
    double raw_mean = ((10000.0 * 1000) + (1.0 * 100000000)) / 10001;
    double raw_sd =
        sqrt(((10000.0 * pow(1000.0 - raw_mean, 2)) + pow(100000000.0 - raw_mean, 2)) / 10001);
    double mean = (1000.0 + 50000000.0) / 2;
    double sq = 10000 * pow(1000.0 - mean, 2);
    for (long v = 10000; v <= 100000000; v += 10000)
        sq += pow((double)v - mean, 2);
    double sd = sqrt(sq / 20000);
    assert_within(hdr_mean(raw_h), raw_mean, 0.001);
    assert_within(hdr_stddev(raw_h), raw_sd, 0.001);
    assert_within(hdr_mean(cor_h), mean, 0.001);
    assert_within(hdr_stddev(cor_h), sd, 0.001);
    /* Exact by hand: median equivalents are 1000 and 99,942,400 + 32,768. */
    assert_true(fabs(hdr_mean(raw_h) - (10000.0 * 1000 + 99975168.0) / 10001) < 1e-6);
}

static void test_iter_recorded(void **state)
{
    /* HdrHistogram_c test_recorded_values. */
    struct hdr_iter it;
    int index = 0;
    hdr_iter_recorded_init(&it, raw_h);
    while (hdr_iter_next(&it)) {
        assert_int_equal(it.count_added, index == 0 ? 10000 : 1);
        index++;
    }
    assert_int_equal(index, 2);

    int64_t total = 0;
    index = 0;
    hdr_iter_recorded_init(&it, cor_h);
    while (hdr_iter_next(&it)) {
        if (index == 0)
            assert_int_equal(it.count_added, 10000);
        assert_int_not_equal(it.count, 0);
        assert_int_equal(it.count, it.count_added);
        assert_int_equal(it.value_iterated_to, it.value);
        total += it.count_added;
        index++;
    }
    assert_int_equal(total, 20000);
}

static void test_iter_linear(void **state)
{
    /* HdrHistogram_c test_linear_values. */
    struct hdr_iter it;
    int index = 0;
    assert_int_equal(hdr_iter_linear_init(&it, raw_h, 100000), 0);
    while (hdr_iter_next(&it)) {
        if (index == 0)
            assert_int_equal(it.count_added, 10000);
        else if (index == 999)
            assert_int_equal(it.count_added, 1);
        else
            assert_int_equal(it.count_added, 0);
        assert_int_equal(it.value_iterated_to, (int64_t)(index + 1) * 100000);
        index++;
    }
    assert_int_equal(index, 1000);

    int64_t total = 0;
    index = 0;
    assert_int_equal(hdr_iter_linear_init(&it, cor_h, 10000), 0);
    while (hdr_iter_next(&it)) {
        if (index == 0)
            assert_int_equal(it.count_added, 10001);
        total += it.count_added;
        index++;
    }
    assert_int_equal(index, 10000);
    assert_int_equal(total, 20000);
    assert_int_equal(hdr_iter_linear_init(&it, cor_h, 0), -EINVAL);

    /* HdrHistogram_c test_linear_iter_buckets_correctly: 4 steps, 6 counts. */
    struct hdr *h = NULL;
    assert_int_equal(hdr_new(1, 255, 2, &h), 0);
    const int64_t values[] = {193, 255, 0, 1, 64, 128};
    for (size_t i = 0; i < 6; i++)
        assert_int_equal(hdr_record(h, values[i]), 0);
    assert_int_equal(hdr_iter_linear_init(&it, h, 64), 0);
    index = 0;
    total = 0;
    while (hdr_iter_next(&it)) {
        total += it.count_added;
        index++;
    }
    assert_int_equal(index, 4);
    assert_int_equal(total, 6);
    hdr_free(h);
}

static void test_iter_log(void **state)
{
    /* HdrHistogram_c test_logarithmic_values. */
    struct hdr_iter it;
    int index = 0;
    assert_int_equal(hdr_iter_log_init(&it, raw_h, 10000, 2.0), 0);
    while (hdr_iter_next(&it)) {
        if (index == 0)
            assert_int_equal(it.count_added, 10000);
        else if (index == 14)
            assert_int_equal(it.count_added, 1);
        else
            assert_int_equal(it.count_added, 0);
        assert_int_equal(it.value_iterated_to, INT64_C(10000) << index);
        index++;
    }
    assert_int_equal(index - 1, 14);

    int64_t total = 0;
    index = 0;
    assert_int_equal(hdr_iter_log_init(&it, cor_h, 10000, 2.0), 0);
    while (hdr_iter_next(&it)) {
        if (index == 0)
            assert_int_equal(it.count_added, 10001);
        total += it.count_added;
        index++;
    }
    assert_int_equal(index - 1, 14);
    assert_int_equal(total, 20000);
    assert_int_equal(hdr_iter_log_init(&it, cor_h, 10000, 1.0), -EINVAL);
}

static void test_iter_percentile(void **state)
{
    /* HistogramDataTest.testPercentiles: every step's value is the highest
     * equivalent of the value at that step's percentile. */
    struct hdr_iter it;
    assert_int_equal(hdr_iter_percentile_init(&it, cor_h, 5), 0);
    int steps = 0;
    double last = -1.0;
    while (hdr_iter_next(&it)) {
        assert_true(it.percentile >= last);
        last = it.percentile;
        if (it.percentile < 100.0)
            assert_int_equal(
                it.value_iterated_to,
                hdr_highest_equivalent(cor_h, hdr_value_at_percentile(cor_h, it.percentile)));
        steps++;
        assert_true(steps < 100000);
    }
    assert_true(last == 100.0);
    assert_int_equal(it.cumulative_count, 20000);
    assert_true(steps > 20);

    /* Levels by hand for ticks 1: 0, 50, 75, 87.5, ... on 1000 distinct values. */
    struct hdr *h = NULL;
    assert_int_equal(hdr_new(1, 100000, 3, &h), 0);
    for (int v = 1; v <= 1000; v++)
        assert_int_equal(hdr_record(h, v), 0);
    assert_int_equal(hdr_iter_percentile_init(&it, h, 1), 0);
    const double want[] = {0.0, 50.0, 75.0, 87.5, 93.75};
    for (size_t i = 0; i < 5; i++) {
        assert_true(hdr_iter_next(&it));
        assert_true(fabs(it.percentile - want[i]) < 1e-9);
    }
    assert_int_equal(it.value_iterated_to, 938); /* rank ceil(93.75% of 1000) */
    hdr_free(h);

    struct hdr *empty = NULL;
    assert_int_equal(hdr_new(1, 1000, 2, &empty), 0);
    assert_int_equal(hdr_iter_percentile_init(&it, empty, 5), 0);
    assert_false(hdr_iter_next(&it));
    assert_int_equal(hdr_iter_percentile_init(&it, empty, 0), -EINVAL);
    hdr_free(empty);
}

static void test_reset(void **state)
{
    /* HdrHistogram_c test_reset. */
    struct hdr *h = NULL;
    assert_int_equal(hdr_new_like(cor_h, &h), 0);
    assert_int_equal(hdr_add(h, cor_h), 0);
    assert_int_not_equal(hdr_value_at_percentile(h, 99.0), 0);
    hdr_reset(h);
    assert_int_equal(hdr_total_count(h), 0);
    assert_int_equal(hdr_value_at_percentile(h, 99.0), 0);
    assert_int_equal(hdr_min(h), 0);
    assert_int_equal(hdr_max(h), 0);
    assert_true(hdr_mean(h) == 0.0);
    assert_true(hdr_stddev(h) == 0.0);
    struct hdr_iter it;
    hdr_iter_recorded_init(&it, h);
    assert_false(hdr_iter_next(&it));
    hdr_free(h);
}

/* A reset clears only up to max_value's bucket: every count must still be
 * zero afterwards, whatever filled it (the largest value, a saturated one,
 * zeros, an add, a decode). */
static void assert_all_zero(const struct hdr *h)
{
    for (int32_t i = 0; i < h->counts_len; i++)
        if (h->counts[i])
            fail_msg("counts[%d] = %lld after a reset", i, (long long)h->counts[i]);
}

static void test_reset_range(void **state)
{
    (void)state;
    struct hdr *h = NULL, *g = NULL;
    assert_int_equal(hdr_new(1, 3600000000LL, 3, &h), 0);
    assert_int_equal(hdr_new(1, 3600000000LL, 3, &g), 0);
    int64_t vals[] = {0, 1, 2047, 2048, 1000000, 3600000000LL, 9000000000LL};
    for (size_t k = 0; k < sizeof(vals) / sizeof(vals[0]); k++) {
        assert_int_equal(hdr_record(h, vals[k]), 0);
        assert_int_equal(hdr_record(g, vals[k]), 0);
        assert_int_equal(hdr_add(h, g), 0);
        hdr_reset(h);
        assert_all_zero(h);
        assert_int_equal(hdr_total_count(h), 0);
        hdr_reset(g);
    }
    /* only zeros: max_value stays 0, counts[0] must still be cleared */
    assert_int_equal(hdr_record_n(h, 0, 5), 0);
    hdr_reset(h);
    assert_all_zero(h);
    /* a histogram read back from its encoding */
    assert_int_equal(hdr_record(g, 123456), 0);
    assert_int_equal(hdr_record(g, 7), 0);
    uint8_t *enc = NULL;
    size_t enc_len = 0;
    struct hdr *d = NULL;
    assert_int_equal(hdr_encode(g, &enc, &enc_len), 0);
    assert_int_equal(hdr_decode(enc, enc_len, &d), 0);
    assert_int_equal(hdr_total_count(d), 2);
    hdr_reset(d);
    assert_all_zero(d);
    hdr_free(d);
    ts_free(enc);
    hdr_free(h);
    hdr_free(g);
}

static void test_scaling_equivalence(void **state)
{
    /* HdrHistogram_c test_scaling_equivalence: lowest 1000, values * 512. */
    struct hdr *scaled = NULL;
    assert_int_equal(hdr_new(1000, INT64_C(3600) * 1000 * 1000 * 512, 3, &scaled), 0);
    for (int i = 0; i < 10000; i++)
        assert_int_equal(hdr_record_corrected(scaled, 1000 * 512, 10000 * 512), 0);
    assert_int_equal(hdr_record_corrected(scaled, INT64_C(100000000) * 512, 10000 * 512), 0);
    assert_within(hdr_mean(scaled), hdr_mean(cor_h) * 512, 0.000001);
    assert_int_equal(hdr_total_count(scaled), hdr_total_count(cor_h));
    int64_t expected_99 = hdr_value_at_percentile(cor_h, 99.0) * 512;
    int64_t scaled_99 = hdr_value_at_percentile(scaled, 99.0);
    assert_int_equal(hdr_lowest_equivalent(cor_h, expected_99),
                     hdr_lowest_equivalent(scaled, scaled_99));
    hdr_free(scaled);
}

/* ---- Recording edge cases ---- */

static void test_saturation_and_rejects(void **state)
{
    struct hdr *h = NULL;
    assert_int_equal(hdr_new(1, 1000, 4, &h), 0);
    assert_int_equal(hdr_record(h, 1000), 0);
    assert_int_equal(h->saturated, 0);
    assert_int_equal(hdr_record(h, 1001), 0);
    assert_int_equal(hdr_record_n(h, 5000000, 3), 0);
    assert_int_equal(h->saturated, 4);
    assert_int_equal(hdr_total_count(h), 5);
    assert_int_equal(hdr_count_at_value(h, 1000), 5);
    assert_int_equal(hdr_count_at_value(h, 99999), 5); /* looked up as highest */
    assert_int_equal(hdr_max(h), 1000);

    assert_int_equal(hdr_record(h, -1), -EINVAL);
    assert_int_equal(hdr_record_n(h, 5, -1), -EINVAL);
    assert_int_equal(hdr_record_n(h, -5, 1), -EINVAL);
    assert_int_equal(hdr_record_corrected(h, -5, 10), -EINVAL);
    assert_int_equal(hdr_record_n(h, 5, 0), 0);
    assert_int_equal(hdr_total_count(h), 5);
    assert_int_equal(hdr_min(h), 1000);

    /* Zero is a value like any other. */
    assert_int_equal(hdr_record(h, 0), 0);
    assert_int_equal(hdr_min(h), 0);
    assert_int_equal(hdr_value_at_percentile(h, 0.0), 0);

    assert_int_equal(hdr_record_n(h, 7, INT64_MAX), -EOVERFLOW);
    assert_int_equal(hdr_total_count(h), 6);
    hdr_free(h);
}

/* The definition, one value at a time, to check the bucket-wise shortcut. */
static void naive_corrected(struct hdr *h, int64_t value, int64_t count, int64_t interval)
{
    assert_int_equal(hdr_record_n(h, value, count), 0);
    if (value > h->highest)
        value = h->highest;
    if (interval <= 0 || value <= interval)
        return;
    for (int64_t missing = value - interval; missing >= interval; missing -= interval)
        assert_int_equal(hdr_record_n(h, missing, count), 0);
}

static void test_corrected_matches_definition(void **state)
{
    struct hdr *fast = NULL, *slow = NULL;
    assert_int_equal(hdr_new(1, INT64_C(3600000000), 3, &fast), 0);
    assert_int_equal(hdr_new_like(fast, &slow), 0);
    uint64_t seed = 42;
    for (int i = 0; i < 300; i++) {
        int64_t value = (int64_t)(lcg(&seed) % 20000000);
        int64_t interval = (int64_t)(lcg(&seed) % 50000) - 10;
        int64_t count = 1 + (int64_t)(lcg(&seed) % 3);
        assert_int_equal(hdr_record_corrected_n(fast, value, count, interval), 0);
        naive_corrected(slow, value, count, interval);
    }
    /* A saturated value is clamped before the correction. */
    assert_int_equal(hdr_record_corrected(fast, INT64_C(3600000000) + 5, INT64_C(1000000000)), 0);
    naive_corrected(slow, INT64_C(3600000000) + 5, 1, INT64_C(1000000000));
    assert_true(hdr_equal(fast, slow));
    assert_int_equal(fast->min_value, slow->min_value);
    assert_int_equal(fast->max_value, slow->max_value);
    assert_int_equal(fast->saturated, 1);

    /* Cost is per bucket: a 1 h stall at a 1 µs interval is 3.6e9 terms. */
    hdr_reset(fast);
    uint64_t t0 = ts_now_ns();
    assert_int_equal(hdr_record_corrected(fast, INT64_C(3600000000), 1), 0);
    assert_true(ts_now_ns() - t0 < 1000000000ull);
    assert_int_equal(hdr_total_count(fast), INT64_C(3600000000));
    hdr_free(fast);
    hdr_free(slow);
}

static void test_merge_equals_union(void **state)
{
    struct hdr *a = NULL, *b = NULL, *all = NULL;
    assert_int_equal(hdr_new_latency(&a), 0);
    assert_int_equal(hdr_new_latency(&b), 0);
    assert_int_equal(hdr_new_latency(&all), 0);
    uint64_t seed = 7;
    for (int i = 0; i < 100000; i++) {
        int64_t v = (int64_t)(lcg(&seed) % 100000000);
        assert_int_equal(hdr_record(i % 3 ? a : b, v), 0);
        assert_int_equal(hdr_record(all, v), 0);
    }
    assert_int_equal(hdr_add(a, b), 0);
    assert_true(hdr_equal(a, all));
    assert_int_equal(hdr_min(a), hdr_min(all));
    assert_int_equal(hdr_max(a), hdr_max(all));
    for (double p = 0.0; p <= 100.0; p += 0.5)
        assert_int_equal(hdr_value_at_percentile(a, p), hdr_value_at_percentile(all, p));

    /* Another layout: re-recorded by value, within the coarser precision. */
    struct hdr *coarse = NULL;
    assert_int_equal(hdr_new(1000, INT64_C(3600000000), 2, &coarse), 0);
    assert_int_equal(hdr_add(coarse, all), 0);
    assert_int_equal(hdr_total_count(coarse), 100000);
    for (double p = 1.0; p < 100.0; p += 7.0)
        assert_within((double)hdr_value_at_percentile(coarse, p),
                      (double)hdr_value_at_percentile(all, p), 0.01);

    /* Saturation carries over: the smaller histogram clamps. */
    struct hdr *small = NULL;
    assert_int_equal(hdr_new(1, 1000000, 3, &small), 0);
    assert_int_equal(hdr_add(small, all), 0);
    assert_int_equal(hdr_total_count(small), 100000);
    int64_t above = 0;
    struct hdr_iter it;
    hdr_iter_recorded_init(&it, all);
    while (hdr_iter_next(&it)) {
        if (it.value > 1000000)
            above += it.count;
    }
    assert_true(above > 0);
    assert_int_equal(small->saturated, above);

    /* Overflowing totals are refused and leave dst unchanged. */
    struct hdr *huge = NULL;
    assert_int_equal(hdr_new_latency(&huge), 0);
    assert_int_equal(hdr_record_n(huge, 5, INT64_MAX - 10), 0);
    assert_int_equal(hdr_add(a, huge), -EOVERFLOW);
    assert_int_equal(hdr_total_count(a), 100000);

    hdr_free(huge);
    hdr_free(small);
    hdr_free(coarse);
    hdr_free(a);
    hdr_free(b);
    hdr_free(all);
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

static void test_uniform_sample_percentiles(void **state)
{
    enum { N = 1000000 };
    int64_t *vals = malloc(N * sizeof(*vals));
    assert_non_null(vals);
    struct hdr *h = NULL;
    assert_int_equal(hdr_new_latency(&h), 0);
    uint64_t seed = 1234;
    for (int i = 0; i < N; i++) {
        vals[i] = 1 + (int64_t)(lcg(&seed) % 10000000);
        assert_int_equal(hdr_record(h, vals[i]), 0);
    }
    qsort(vals, N, sizeof(*vals), cmp_i64);
    const double ps[] = {0.1, 1, 10, 25, 50, 75, 90, 99, 99.9, 99.99, 100};
    for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
        /* Nearest-rank percentile of the sorted sample. */
        size_t rank = (size_t)ceil(ps[i] / 100.0 * N);
        double exact = (double)vals[rank - 1];
        assert_within((double)hdr_value_at_percentile(h, ps[i]), exact, 0.001);
    }
    assert_int_equal(hdr_min(h), vals[0]);
    assert_within((double)hdr_max(h), (double)vals[N - 1], 0.001);
    hdr_free(h);
    free(vals);
}

static void test_equivalence(void **state)
{
    struct hdr *h = NULL;
    assert_int_equal(hdr_new(1, INT64_C(3600000000), 3, &h), 0);
    /* By hand: 8192..16383 is bucket 3, sub-buckets of width 8. */
    assert_int_equal(hdr_lowest_equivalent(h, 10007), 10000);
    assert_int_equal(hdr_highest_equivalent(h, 10007), 10007);
    assert_int_equal(hdr_median_equivalent(h, 10001), 10004);
    assert_int_equal(hdr_next_non_equivalent(h, 10000), 10008);
    assert_int_equal(hdr_equivalent_range(h, 10000), 8);
    assert_int_equal(hdr_equivalent_range(h, 2047), 1);
    assert_int_equal(hdr_equivalent_range(h, 2048), 2);
    assert_true(hdr_values_are_equivalent(h, 10000, 10007));
    assert_false(hdr_values_are_equivalent(h, 10007, 10008));
    assert_int_equal(hdr_lowest_equivalent(h, -5), 0);
    assert_int_equal(hdr_next_non_equivalent(h, INT64_MAX), INT64_MAX);
    assert_int_equal(hdr_highest_equivalent(h, INT64_MAX), INT64_MAX);
    /* Every bucket's relative width is below 10^-3 above 2048. */
    for (int64_t v = 2048; v < INT64_C(3600000000); v = v * 3 / 2)
        assert_true((double)hdr_equivalent_range(h, v) / (double)v <= 1.0 / 1024);
    hdr_free(h);
}

static void test_record_is_fast_and_allocation_free(void **state)
{
    struct hdr *h = NULL;
    assert_int_equal(hdr_new_latency(&h), 0);
    enum { N = 2000000 };
    uint64_t seed = 99;
    int64_t *vals = malloc(4096 * sizeof(*vals));
    assert_non_null(vals);
    for (int i = 0; i < 4096; i++)
        vals[i] = (int64_t)(lcg(&seed) % 5000000);
    ts_alloc_fail_after(0); /* any allocation now would fail */
    uint64_t t0 = ts_now_ns();
    int rc = 0;
    for (int i = 0; i < N; i++)
        rc |= hdr_record(h, vals[i & 4095]);
    uint64_t dt = ts_now_ns() - t0;
    ts_alloc_fail_after(-1);
    assert_int_equal(rc, 0);
    assert_int_equal(hdr_total_count(h), N);
    print_message("hdr_record: %.2f ns per value\n", (double)dt / N);
    /* A loose bound that still catches an accidental O(n) or a syscall
     * (typically ~2 ns, ~10 ns under sanitizers). */
    assert_true(dt < 2000000000ull);
    free(vals);
    hdr_free(h);
}

/* ---- Encoding internals ---- */

static void test_zigzag(void **state)
{
    struct {
        int64_t v;
        size_t len;
        uint8_t first;
    } cases[] = {
        {0, 1, 0x00},         {1, 1, 0x02},         {-1, 1, 0x01},
        {63, 1, 0x7e},        {-64, 1, 0x7f},       {64, 2, 0x80},
        {INT64_MAX, 9, 0xfe}, {INT64_MIN, 9, 0xff}, {INT64_C(1) << 55, 9, 0x80},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t buf[16];
        size_t n = zigzag_put(buf, cases[i].v);
        assert_int_equal(n, cases[i].len);
        assert_int_equal(buf[0], cases[i].first);
        size_t pos = 0;
        int64_t back;
        assert_int_equal(zigzag_get(buf, n, &pos, &back), 0);
        assert_int_equal(pos, n);
        assert_true(back == cases[i].v);
        pos = 0;
        if (n > 1)
            assert_int_equal(zigzag_get(buf, n - 1, &pos, &back), TS_PARSE);
    }
    /* 64 -> zigzag 128 -> 0x80 0x01. */
    uint8_t buf[16];
    assert_int_equal(zigzag_put(buf, 64), 2);
    assert_int_equal(buf[1], 0x01);
}

/* ---- V2 encoding ---- */

/* Blobs written by Java HdrHistogram (jHiccup 2.0.7), with the total count
 * (counted independently from the decoded payload) and the Interval_Max
 * column the Java writer put next to them (max / 1e6, 3 decimals). */
static const struct {
    const char *blob;
    int64_t total;
    const char *interval_max;
} java_blobs[] = {
    {"HISTFAAAAEB42pNpmSzMwMAgywABTBDKT4GBgdnNYMcCBvsPEBEjDT0FMTUxMT05LgEhPqmIeWxtTAKMTNxM6xmZmAAjc"
     "g"
     "jc",
     802, "1.933"},
    {"HISTFAAAAJV42pNpmSzMwMDUwAABTBDKT4GBgdnNYMcCBvsPEBEWLi4eNkY2PiYOPhYOLgGOLuZjTGLrGZnKgTCYyZrJE"
     "o"
     "h1mWSZpMFQFkpyM/"
     "GCMTKJzOdkYoVCZjgLmc1MhDwzEyMQggl0SH1BbEJIgIUJC2AhUoxchSwsLGwsMIBgYRUkQyFBaQ4g"
     "4EIl0PlcpKtB4wMAh5wT+Q==",
     1397, "960.496"},
    {"HISTFAAAAEV42pNpmSzMwMCgyAABTBDKT4GBgdnNYMcCBvsPEBEJISEuATEZMQ4uASkhIR4nrxg9v2lMaxhvMekILGZkK"
     "m"
     "cCAEf2CsI=",
     741, "2.769"},
};

static void test_decode_java_blobs(void **state)
{
    for (size_t i = 0; i < sizeof(java_blobs) / sizeof(java_blobs[0]); i++) {
        const char *blob = java_blobs[i].blob;
        struct hdr *h = NULL;
        assert_int_equal(hdr_decode_base64(blob, strlen(blob), &h), 0);
        assert_int_equal(h->lowest, 20000);
        assert_int_equal(h->highest, INT64_C(3600000000000));
        assert_int_equal(h->sigfigs, 2);
        assert_int_equal(hdr_total_count(h), java_blobs[i].total);
        char max[32];
        snprintf(max, sizeof(max), "%.3f", (double)hdr_max(h) / 1e6);
        assert_string_equal(max, java_blobs[i].interval_max);
        /* Our encoder writes the very same bytes as the Java one. */
        char *again;
        size_t again_len;
        assert_int_equal(hdr_encode_base64(h, &again, &again_len), 0);
        assert_int_equal(again_len, strlen(blob));
        assert_string_equal(again, blob);
        ts_free(again);
        hdr_free(h);
    }
}

static void assert_roundtrip(const struct hdr *h)
{
    uint8_t *blob;
    size_t n;
    assert_int_equal(hdr_encode(h, &blob, &n), 0);
    struct hdr *back = NULL;
    assert_int_equal(hdr_decode(blob, n, &back), 0);
    assert_true(hdr_equal(h, back));
    assert_int_equal(hdr_min(back), hdr_min(h));
    assert_int_equal(hdr_max(back), hdr_max(h));
    assert_true(hdr_mean(back) == hdr_mean(h));
    /* HdrHistogram_c test_bounds_check_on_decode: one byte short fails. */
    struct hdr *none = NULL;
    assert_int_equal(hdr_decode(blob, n - 1, &none), TS_PARSE);
    assert_null(none);
    hdr_free(back);
    ts_free(blob);

    char *text;
    size_t text_len;
    assert_int_equal(hdr_encode_base64(h, &text, &text_len), 0);
    assert_int_equal(strlen(text), text_len);
    assert_memory_equal(text, "HISTFAAA", 8);
    assert_int_equal(hdr_decode_base64(text, text_len, &back), 0);
    assert_true(hdr_equal(h, back));
    hdr_free(back);
    ts_free(text);
}

static void test_encode_roundtrip(void **state)
{
    assert_roundtrip(raw_h);
    assert_roundtrip(cor_h);

    struct hdr *h = NULL;
    assert_int_equal(hdr_new_latency(&h), 0);
    assert_roundtrip(h); /* empty */
    assert_int_equal(hdr_record(h, 0), 0);
    assert_roundtrip(h); /* only zero */
    hdr_free(h);

    /* HdrHistogram_c test_encode_and_decode_compressed_large: 4 digits. */
    assert_int_equal(hdr_new(1, INT64_C(3600000000), 4, &h), 0);
    uint64_t seed = 5;
    for (int i = 0; i < 8070; i++)
        assert_int_equal(hdr_record(h, (int64_t)(lcg(&seed) % INT64_C(3600000000))), 0);
    assert_roundtrip(h);
    hdr_free(h);

    /* HdrHistogram_c test_string_encode_decode_2: every value below 1000. */
    assert_int_equal(hdr_new(1, 1000, 3, &h), 0);
    for (int i = 1; i < 1000; i++)
        assert_int_equal(hdr_record(h, i), 0);
    assert_roundtrip(h);
    hdr_free(h);

    /* Huge counts and values need 9-byte varints. */
    assert_int_equal(hdr_new(1, INT64_MAX, 2, &h), 0);
    assert_int_equal(hdr_record_n(h, INT64_MAX, INT64_MAX / 2), 0);
    assert_int_equal(hdr_record_n(h, 3, INT64_MAX / 2), 0);
    assert_roundtrip(h);
    hdr_free(h);
}

/* Builds a compressed blob from an encoding header and a raw payload. */
static size_t craft(uint8_t *out, size_t cap, uint32_t cookie, int32_t payload_len, int32_t sigfigs,
                    int64_t lowest, int64_t highest, const uint8_t *payload, size_t n)
{
    uint8_t raw[512];
    assert_true(ENCODING_HEADER_LEN + n <= sizeof(raw));
    double one = 1.0;
    uint64_t bits;
    memcpy(&bits, &one, sizeof(bits));
    put32(raw, cookie);
    put32(raw + 4, (uint32_t)payload_len);
    put32(raw + 8, 0);
    put32(raw + 12, (uint32_t)sigfigs);
    put64(raw + 16, (uint64_t)lowest);
    put64(raw + 24, (uint64_t)highest);
    put64(raw + 32, bits);
    memcpy(raw + ENCODING_HEADER_LEN, payload, n);
    uLongf zlen = (uLongf)(cap - 8);
    assert_int_equal(compress2(out + 8, &zlen, raw, ENCODING_HEADER_LEN + n, 9), Z_OK);
    put32(out, 0x1c849314);
    put32(out + 4, (uint32_t)zlen);
    return 8 + zlen;
}

static void assert_rejected(const uint8_t *blob, size_t n, int code)
{
    struct hdr *h = NULL;
    assert_int_equal(hdr_decode(blob, n, &h), code);
    assert_null(h);
}

static void test_decode_rejects(void **state)
{
    uint8_t blob[1024];
    uint8_t payload[64];
    size_t n, p;

    /* A valid baseline: counts 5 at index 0, 7 at index 3. */
    p = zigzag_put(payload, 5);
    p += zigzag_put(payload + p, -2);
    p += zigzag_put(payload + p, 7);
    n = craft(blob, sizeof(blob), 0x1c849313, (int32_t)p, 3, 1, 1000000, payload, p);
    struct hdr *h = NULL;
    assert_int_equal(hdr_decode(blob, n, &h), 0);
    assert_int_equal(hdr_total_count(h), 12);
    assert_int_equal(hdr_count_at_value(h, 3), 7);
    assert_int_equal(hdr_min(h), 0);
    assert_int_equal(hdr_max(h), 3);
    hdr_free(h);

    /* Cookies. */
    n = craft(blob, sizeof(blob), 0x1c849301, (int32_t)p, 3, 1, 1000000, payload, p);
    assert_rejected(blob, n, TS_PARSE);
    n = craft(blob, sizeof(blob), 0x1c849313, (int32_t)p, 3, 1, 1000000, payload, p);
    put32(blob, 0x1c849302); /* V1 compression cookie */
    assert_rejected(blob, n, TS_PARSE);
    /* Lengths: payload_len off by one either way, negative, or trailing bytes. */
    n = craft(blob, sizeof(blob), 0x1c849313, (int32_t)p + 1, 3, 1, 1000000, payload, p);
    assert_rejected(blob, n, TS_PARSE);
    n = craft(blob, sizeof(blob), 0x1c849313, (int32_t)p - 1, 3, 1, 1000000, payload, p);
    assert_rejected(blob, n, TS_PARSE);
    n = craft(blob, sizeof(blob), 0x1c849313, -5, 3, 1, 1000000, payload, p);
    assert_rejected(blob, n, TS_PARSE);
    n = craft(blob, sizeof(blob), 0x1c849313, (int32_t)p, 3, 1, 1000000, payload, p);
    blob[n] = 0;
    assert_rejected(blob, n + 1, TS_PARSE);
    put32(blob + 4, 0x80000001u);
    assert_rejected(blob, n, TS_PARSE);
    assert_rejected(blob, 7, TS_PARSE);
    /* Layouts. */
    n = craft(blob, sizeof(blob), 0x1c849313, (int32_t)p, 6, 1, 1000000, payload, p);
    assert_rejected(blob, n, TS_PARSE);
    n = craft(blob, sizeof(blob), 0x1c849313, (int32_t)p, 3, 0, 1000000, payload, p);
    assert_rejected(blob, n, TS_PARSE);
    n = craft(blob, sizeof(blob), 0x1c849313, (int32_t)p, 3, 600000, 1000000, payload, p);
    assert_rejected(blob, n, TS_PARSE);
    n = craft(blob, sizeof(blob), 0x1c849313, (int32_t)p, 5, 1, INT64_MAX, payload, p);
    assert_rejected(blob, n, TS_TOOBIG);

    /* Payloads: a run past the end, a count past the end, a cut varint,
     * a total that overflows, INT64_MIN as a run. */
    struct {
        int64_t v[3];
        int nv;
    } bad[] = {
        {{-3000, 0, 0}, 1},             /* counts_len is 2048 for 1..2000 at 3 digits */
        {{-2048, 1, 0}, 2},             /* a count after all counts */
        {{INT64_MAX, INT64_MAX, 0}, 2}, /* total overflow */
        {{INT64_MIN, 0, 0}, 1},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        p = 0;
        for (int k = 0; k < bad[i].nv; k++)
            p += zigzag_put(payload + p, bad[i].v[k]);
        n = craft(blob, sizeof(blob), 0x1c849313, (int32_t)p, 3, 1, 2000, payload, p);
        assert_rejected(blob, n, TS_PARSE);
    }
    payload[0] = 0x80; /* continuation bit with nothing after */
    n = craft(blob, sizeof(blob), 0x1c849313, 1, 3, 1, 2000, payload, 1);
    assert_rejected(blob, n, TS_PARSE);
    /* A payload exactly filling the counts decodes. */
    p = zigzag_put(payload, -2047);
    p += zigzag_put(payload + p, 9);
    n = craft(blob, sizeof(blob), 0x1c849313, (int32_t)p, 3, 1, 2000, payload, p);
    assert_int_equal(hdr_decode(blob, n, &h), 0);
    assert_int_equal(hdr_total_count(h), 9);
    assert_int_equal(hdr_max(h), hdr_highest_equivalent(h, value_at_index(h, 2047)));
    hdr_free(h);

    /* Crafted inputs from HdrHistogram_c's
     * test_decode_rejects_crafted_bounds_attacks (V1/V0 ones are refused as
     * unsupported; the V2 one has a negative payload length). */
    const char *attacks[] = {
        "HISTBAAAABl4nJNpmcz8HwgYIIARjWay/8CAAgD0TwZm",
        "HISTAgAAABl42pNpmdz4////HwwQwIhGMzGgAQD3VgWu",
        "HISTAgAAAB54nJNpmSzIwMDAyAABzFAawmdsWwDlMzQAAD9AAvE=",
        "HISTCQAAACd4nJNpmSzBwMDAzAABjFCaiQHGGAWjYBSMglEwCkbBSAMNAMTQEdA=",
        "HISTAgAAABp4nJNpmdzIwFDLAAWMaDST/QcGFAAAdaEDZQ==",
    };
    for (size_t i = 0; i < sizeof(attacks) / sizeof(attacks[0]); i++) {
        h = NULL;
        assert_int_equal(hdr_decode_base64(attacks[i], strlen(attacks[i]), &h), TS_PARSE);
        assert_null(h);
    }
}

/* Every truncation and every single-byte change of a valid blob either
 * decodes or fails cleanly (run under ASan this checks the bounds). */
static void test_decode_mutations(void **state)
{
    uint8_t *blob;
    size_t n;
    assert_int_equal(hdr_encode(cor_h, &blob, &n), 0);
    int ok = 0, failed = 0;
    for (size_t cut = 0; cut < n; cut++) {
        struct hdr *h = NULL;
        assert_int_equal(hdr_decode(blob, cut, &h), TS_PARSE);
    }
    for (size_t i = 0; i < n; i++) {
        for (int bit = 0; bit < 8; bit++) {
            blob[i] ^= (uint8_t)(1u << bit);
            struct hdr *h = NULL;
            int rc = hdr_decode(blob, n, &h);
            if (rc == 0) {
                ok++;
                hdr_free(h);
            } else {
                assert_true(rc == TS_PARSE || rc == TS_TOOBIG);
                assert_null(h);
                failed++;
            }
            blob[i] ^= (uint8_t)(1u << bit);
        }
    }
    /* zlib's adler32 catches almost every change; the cookie nibble does not. */
    assert_true(failed > ok);
    ts_free(blob);
}

static void test_allocation_failures(void **state)
{
    /* Each allocation of new, encode and decode fails in turn: a clean error. */
    int hits = 0;
    for (long k = 0; k < 64; k++) {
        struct hdr *h = NULL;
        char *text = NULL;
        struct hdr *back = NULL;
        ts_alloc_fail_after(k);
        int rc = hdr_new_latency(&h);
        if (rc == 0) {
            assert_int_equal(hdr_record(h, 12345), 0);
            rc = hdr_encode_base64(h, &text, NULL);
        }
        if (rc == 0)
            rc = hdr_decode_base64(text, strlen(text), &back);
        ts_alloc_fail_after(-1);
        if (rc == 0) {
            assert_true(hdr_equal(h, back));
            hits++;
        } else {
            assert_int_equal(rc, -ENOMEM);
            assert_null(back);
        }
        hdr_free(back);
        ts_free(text);
        hdr_free(h);
    }
    assert_true(hits > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_large_values),
        cmocka_unit_test(test_counts_min_max),
        cmocka_unit_test(test_percentiles),
        cmocka_unit_test(test_mean_stddev),
        cmocka_unit_test(test_iter_recorded),
        cmocka_unit_test(test_iter_linear),
        cmocka_unit_test(test_iter_log),
        cmocka_unit_test(test_iter_percentile),
        cmocka_unit_test(test_reset),
        cmocka_unit_test(test_reset_range),
        cmocka_unit_test(test_scaling_equivalence),
        cmocka_unit_test(test_saturation_and_rejects),
        cmocka_unit_test(test_corrected_matches_definition),
        cmocka_unit_test(test_merge_equals_union),
        cmocka_unit_test(test_uniform_sample_percentiles),
        cmocka_unit_test(test_equivalence),
        cmocka_unit_test(test_record_is_fast_and_allocation_free),
        cmocka_unit_test(test_zigzag),
        cmocka_unit_test(test_decode_java_blobs),
        cmocka_unit_test(test_encode_roundtrip),
        cmocka_unit_test(test_decode_rejects),
        cmocka_unit_test(test_decode_mutations),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests_name("hdr", tests, load_histograms, free_histograms);
}
