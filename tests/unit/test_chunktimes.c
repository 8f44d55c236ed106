/*
 * test_chunktimes.c - chunk times packed into 4 bytes a chunk come back
 * exact: short gaps, gaps of 4.29 s and more (three words), the boundary
 * around UINT32_MAX, times that go backwards, growth, and running out of
 * memory.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "analysis/chunktimes.c"
#include "base/alloc.h"

static void check_roundtrip(const uint64_t *t, uint32_t n, const uint64_t *want)
{
    struct chunk_times ct;
    chunk_times_init(&ct);
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(chunk_times_add(&ct, t[i]), 0);
    assert_int_equal(ct.n, n);
    uint64_t out[64];
    chunk_times_unpack(&ct, out);
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(out[i], want ? want[i] : t[i]);
    chunk_times_release(&ct);
    assert_null(ct.word);
    assert_int_equal(ct.n, 0);
}

static void test_exact(void **state)
{
    (void)state;
    const uint64_t B = 5000000000000ull; /* ns, far from 0 */
    const uint64_t t[] = {B,
                          B + 1,
                          B + 1 + 20000000ull,                 /* 20 ms */
                          B + 1 + 20000000ull + 4294967294ull, /* the largest one-word gap */
                          B + 1 + 20000000ull + 8589934589ull, /* UINT32_MAX: three words */
                          B + 1 + 20000000ull + 8589934589ull + 3600000000000ull, /* 1 h */
                          B + 1 + 20000000ull + 8589934589ull + 3600000000000ull + 7};
    check_roundtrip(t, sizeof(t) / sizeof(t[0]), NULL);

    struct chunk_times ct;
    chunk_times_init(&ct);
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        assert_int_equal(chunk_times_add(&ct, t[i]), 0);
    assert_int_equal(ct.words, 1 + 1 + 1 + 3 + 3 + 1); /* the long gaps take three */
    chunk_times_release(&ct);
}

static void test_backwards_and_growth(void **state)
{
    (void)state;
    const uint64_t t[] = {1000, 900, 2000, 2000};
    const uint64_t want[] = {1000, 1000, 2000, 2000}; /* a step back is a gap of 0 */
    check_roundtrip(t, 4, want);

    struct chunk_times ct;
    chunk_times_init(&ct);
    uint64_t at = 77;
    for (uint32_t i = 0; i < 50000; i++, at += 1000 + i % 7)
        assert_int_equal(chunk_times_add(&ct, at), 0);
    assert_int_equal(ct.n, 50000);
    assert_true(ct.alloc * sizeof(uint32_t) <= 2 * 50000 * sizeof(uint32_t)); /* 4 B a chunk */
    uint64_t *out = ts_malloc(50000 * sizeof(*out));
    assert_non_null(out);
    chunk_times_unpack(&ct, out);
    at = 77;
    for (uint32_t i = 0; i < 50000; i++, at += 1000 + i % 7)
        assert_int_equal(out[i], at);
    ts_free(out);
    chunk_times_release(&ct);
}

static void test_out_of_memory(void **state)
{
    (void)state;
    struct chunk_times ct;
    chunk_times_init(&ct);
    assert_int_equal(chunk_times_add(&ct, 10), 0); /* the first needs no memory */
    ts_alloc_fail_after(0);
    assert_int_equal(chunk_times_add(&ct, 20), -ENOMEM);
    ts_alloc_fail_after(-1);
    assert_int_equal(ct.n, 1);
    assert_int_equal(chunk_times_add(&ct, 30), 0);
    uint64_t out[2];
    chunk_times_unpack(&ct, out);
    assert_int_equal(out[0], 10);
    assert_int_equal(out[1], 30);
    chunk_times_release(&ct);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact),
        cmocka_unit_test(test_backwards_and_growth),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
