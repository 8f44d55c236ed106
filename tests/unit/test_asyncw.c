#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/asyncw.h"

static void *write_lines(void *arg)
{
    struct asyncw *w = arg;
    char line[64];
    for (int i = 0; i < 50000; i++) {
        int n = snprintf(line, sizeof(line), "{\"i\":%d}\n", i);
        assert_int_equal(asyncw_write(w, line, (size_t)n), 0);
    }
    return NULL;
}

static void test_all_lines_arrive_whole(void **state)
{
    char path[] = "/tmp/ts-asyncw-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct asyncw *w;
    char err[256];
    assert_int_equal(asyncw_open(path, 0, &w, err, sizeof(err)), 0);
    pthread_t a, b;
    pthread_create(&a, NULL, write_lines, w);
    pthread_create(&b, NULL, write_lines, w);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    assert_int_equal(asyncw_dropped(w), 0);
    assert_int_equal(asyncw_close(w), 0);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[64];
    long sum = 0, lines = 0;
    while (fgets(line, sizeof(line), f)) {
        int i;
        assert_int_equal(sscanf(line, "{\"i\":%d}", &i), 1);
        sum += i;
        lines++;
    }
    fclose(f);
    unlink(path);
    assert_int_equal(lines, 100000);
    assert_int_equal(sum, 2L * (49999L * 50000L / 2));
}

static void test_bound_drops_whole_writes(void **state)
{
    char path[] = "/tmp/ts-asyncw-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    struct asyncw *w;
    char err[256];
    assert_int_equal(asyncw_open(path, 10, &w, err, sizeof(err)), 0);
    assert_int_equal(asyncw_write(w, "0123456789abc\n", 14), TS_AGAIN);
    assert_int_equal(asyncw_dropped(w), 14);
    assert_int_equal(asyncw_close(w), 0);
    unlink(path);
    assert_int_equal(asyncw_open("/nonexistent-dir/x", 0, &w, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "/nonexistent-dir/x"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_lines_arrive_whole),
        cmocka_unit_test(test_bound_drops_whole_writes),
    };
    return cmocka_run_group_tests_name("asyncw", tests, NULL, NULL);
}
