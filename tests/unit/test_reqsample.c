/*
 * test_reqsample.c - the bottom-k sample of requests: it keeps the smallest
 * keys, merging in any order gives the sample of the union exactly, a key
 * is never held twice, and the keys spread the sample uniformly over the
 * requests (a sample of 1000 of 100000 covers each tenth about equally).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "analysis/reqsample.h"

static struct reqsample_entry entry(uint64_t index)
{
    return (struct reqsample_entry){.key = reqsample_key(index),
                                    .input_tokens = (uint32_t)index,
                                    .output_tokens = 1,
                                    .ttft_ms = 1,
                                    .e2el_ms = 2};
}

static int cmp_key(const void *a, const void *b)
{
    uint64_t x = ((const struct reqsample_entry *)a)->key,
             y = ((const struct reqsample_entry *)b)->key;
    return (x > y) - (x < y);
}

/* The sample's entries sorted by key, for comparing two samples. */
static void sorted(const struct reqsample *s, struct reqsample_entry *out)
{
    memcpy(out, s->e, s->n * sizeof(*out));
    qsort(out, s->n, sizeof(*out), cmp_key);
}

static void test_keeps_the_smallest_keys(void **state)
{
    static struct reqsample s;
    static uint64_t keys[5000];
    (void)state;
    memset(&s, 0, sizeof(s));
    for (uint64_t i = 0; i < 5000; i++) {
        struct reqsample_entry e = entry(i);
        keys[i] = e.key;
        assert_true(e.key < (1ull << 53));
        reqsample_add(&s, &e);
    }
    assert_int_equal(s.n, REQSAMPLE_MAX);
    /* the k-th smallest key of all is the largest held */
    uint64_t max = 0;
    for (uint32_t i = 0; i < s.n; i++)
        max = s.e[i].key > max ? s.e[i].key : max;
    size_t below = 0;
    for (size_t i = 0; i < 5000; i++)
        below += keys[i] <= max;
    assert_int_equal(below, REQSAMPLE_MAX);
    /* the same entry again is not held twice */
    struct reqsample_entry again = entry(0);
    uint32_t n = s.n;
    if (again.key < max) {
        reqsample_add(&s, &again);
        assert_int_equal(s.n, n);
    }
}

static void test_merge_is_the_sample_of_the_union(void **state)
{
    static struct reqsample all, a, b, c, ab, ba;
    static struct reqsample_entry x[REQSAMPLE_MAX], y[REQSAMPLE_MAX];
    (void)state;
    memset(&all, 0, sizeof(all));
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    memset(&c, 0, sizeof(c));
    for (uint64_t i = 0; i < 7000; i++) {
        struct reqsample_entry e = entry(i);
        reqsample_add(&all, &e);
        reqsample_add(i % 3 == 0 ? &a : i % 3 == 1 ? &b : &c, &e);
    }
    ab = a;
    reqsample_merge(&ab, &b);
    reqsample_merge(&ab, &c);
    ba = c;
    reqsample_merge(&ba, &b);
    reqsample_merge(&ba, &a);
    sorted(&all, x);
    sorted(&ab, y);
    assert_int_equal(ab.n, all.n);
    assert_memory_equal(x, y, all.n * sizeof(*x));
    sorted(&ba, y);
    assert_memory_equal(x, y, all.n * sizeof(*x));
}

static void test_uniform_over_the_run(void **state)
{
    static struct reqsample s;
    size_t tenth[10] = {0};
    (void)state;
    memset(&s, 0, sizeof(s));
    for (uint64_t i = 0; i < 100000; i++) {
        struct reqsample_entry e = entry(i);
        reqsample_add(&s, &e);
    }
    for (uint32_t i = 0; i < s.n; i++)
        tenth[s.e[i].input_tokens / 10000]++;
    /* 100 expected per tenth; binomial sd ~9.5: 5 sd either way */
    for (int k = 0; k < 10; k++)
        if (tenth[k] < 52 || tenth[k] > 148)
            fail_msg("tenth %d holds %zu of 1000", k, tenth[k]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keeps_the_smallest_keys),
        cmocka_unit_test(test_merge_is_the_sample_of_the_union),
        cmocka_unit_test(test_uniform_over_the_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
