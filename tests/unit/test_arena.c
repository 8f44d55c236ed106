#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "base/arena.h"

static void test_alloc_aligned_and_capped(void **state)
{
    struct arena a;
    arena_init(&a, 64, 1000);
    for (int i = 0; i < 10; i++) {
        void *p = arena_alloc(&a, 33);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 16, 0);
        memset(p, 0xab, 33);
    }
    assert_int_equal(a.used, 480);
    assert_null(arena_alloc(&a, 600));
    char *s = arena_strndup(&a, "hello world", 5);
    assert_string_equal(s, "hello");
    arena_reset(&a);
    assert_int_equal(a.used, 0);
    assert_non_null(arena_alloc(&a, 900));
    arena_release(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_aligned_and_capped),
    };
    return cmocka_run_group_tests_name("arena", tests, NULL, NULL);
}
