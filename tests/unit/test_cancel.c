#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "../../src/load/cancel.c"

static void test_parse(void **state)
{
    (void)state;
    struct run_cancel c;
    char err[256];
    assert_int_equal(run_cancel_parse(&c, "after:uniform:0.5s-3s,share:20%", err, sizeof err), 0);
    assert_true(c.share == 0.2);
    assert_int_equal(c.after.kind, DIST_UNIFORM);
    assert_true(c.after.uniform.lo == 0.5 && c.after.uniform.hi == 3);
    run_cancel_release(&c);
    /* share first; a distribution whose parameters hold a comma; ms */
    assert_int_equal(run_cancel_parse(&c, "share:5%,after:normal:800ms,100ms", err, sizeof err), 0);
    assert_true(c.share == 0.05);
    assert_true(c.after.normal.mean == 0.8 && c.after.normal.sd == 0.1);
    run_cancel_release(&c);
    assert_int_equal(run_cancel_parse(&c, "after:fixed:2", err, sizeof err), 0);
    assert_true(c.share == 1 && c.after.fixed.value == 2);
    run_cancel_release(&c);

    assert_int_equal(run_cancel_parse(&c, "share:20%", err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "after:DIST"));
    assert_int_equal(run_cancel_parse(&c, "after:fixed:1s,share:120%", err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "share"));
    assert_int_equal(run_cancel_parse(&c, "after:fixed:1parsec", err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "not a duration"));
    assert_int_equal(run_cancel_parse(&c, "after:bogus:1s", err, sizeof err), -EINVAL);
    assert_int_equal(run_cancel_parse(&c, "after:1s", err, sizeof err), -EINVAL);
}

/* The share is kept (binomial margins) and each request's roll repeats. */
static void test_rolls(void **state)
{
    (void)state;
    struct run_cancel c;
    char err[256];
    assert_int_equal(run_cancel_parse(&c, "after:uniform:0.5s-3s,share:20%", err, sizeof err), 0);
    int n = 0;
    for (uint64_t i = 0; i < 10000; i++) {
        uint64_t a = run_cancel_after_ns(&c, 7, i);
        assert_int_equal(a, run_cancel_after_ns(&c, 7, i));
        if (a) {
            n++;
            assert_true(a >= 500000000ull && a <= 3000000001ull);
        }
    }
    assert_true(n > 1800 && n < 2200);
    run_cancel_release(&c);
    struct run_cancel off = {0};
    assert_int_equal(run_cancel_after_ns(&off, 7, 1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_rolls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
