#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/buf.h"

static void test_append_and_take(void **state)
{
    struct buf b;
    buf_init(&b, 1024);
    assert_string_equal(buf_cstr(&b), "");
    assert_int_equal(buf_append_str(&b, "hello"), 0);
    assert_int_equal(buf_appendf(&b, " %d", 42), 0);
    assert_string_equal(buf_cstr(&b), "hello 42");
    assert_int_equal(b.len, 8);
    size_t len;
    char *s = buf_take(&b, &len);
    assert_int_equal(len, 8);
    assert_string_equal(s, "hello 42");
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    ts_free(s);
    buf_release(&b);
}

static void test_cap_is_hard(void **state)
{
    struct buf b;
    buf_init(&b, 10);
    assert_int_equal(buf_append_str(&b, "0123456789"), 0);
    assert_int_equal(buf_append_char(&b, 'x'), TS_TOOBIG);
    assert_int_equal(b.len, 10);
    assert_string_equal(buf_cstr(&b), "0123456789");
    assert_int_equal(buf_appendf(&b, "%s", "y"), TS_TOOBIG);
    buf_consume(&b, 4);
    assert_string_equal(buf_cstr(&b), "456789");
    assert_int_equal(buf_append_str(&b, "abcd"), 0);
    assert_string_equal(buf_cstr(&b), "456789abcd");
    buf_truncate(&b, 3);
    assert_string_equal(buf_cstr(&b), "456");
    buf_release(&b);
}

static void test_alloc_failure_leaves_buffer_intact(void **state)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    assert_int_equal(buf_append_str(&b, "keep"), 0);
    ts_alloc_fail_after(0);
    char big[200];
    memset(big, 'z', sizeof(big));
    assert_int_equal(buf_append(&b, big, sizeof(big)), -ENOMEM);
    ts_alloc_fail_after(-1);
    assert_string_equal(buf_cstr(&b), "keep");
    buf_release(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_and_take),
        cmocka_unit_test(test_cap_is_hard),
        cmocka_unit_test(test_alloc_failure_leaves_buffer_intact),
    };
    return cmocka_run_group_tests_name("buf", tests, NULL, NULL);
}
