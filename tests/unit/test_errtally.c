#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "analysis/errtally.c"

static void test_add_and_top(void **state)
{
    struct errtally t;
    memset(&t, 0, sizeof(t));
    errtally_add(&t, REQ_HTTP_429, 429, "slow down", 1);
    errtally_add(&t, REQ_HTTP_5XX, 500, "boom", 3);
    errtally_add(&t, REQ_HTTP_429, 429, "slow down", 2);
    errtally_add(&t, REQ_HTTP_5XX, 503, "boom", 1); /* another status: another key */
    errtally_add(&t, REQ_CONNECT, 0, NULL, 3);
    assert_int_equal(t.n, 4);
    assert_int_equal(errtally_total(&t), 10);
    size_t idx[ERRTALLY_SLOTS];
    assert_int_equal(errtally_top(&t, idx, ERRTALLY_SLOTS), 4);
    /* by count, ties in first-seen order */
    assert_string_equal(t.e[idx[0]].msg, "slow down");
    assert_int_equal(t.e[idx[0]].count, 3);
    assert_string_equal(t.e[idx[1]].msg, "boom");
    assert_int_equal(t.e[idx[1]].status, 500);
    assert_int_equal(t.e[idx[2]].outcome, REQ_CONNECT);
    assert_string_equal(t.e[idx[2]].msg, "");
    assert_int_equal(t.e[idx[3]].status, 503);
    assert_int_equal(errtally_top(&t, idx, 2), 2);
    assert_int_equal(t.e[idx[0]].count, 3);
    assert_int_equal(t.e[idx[1]].count, 3);
    assert_int_equal(errtally_top(&t, idx, 0), 0);
}

static void test_bounded(void **state)
{
    struct errtally t;
    char msg[32];
    memset(&t, 0, sizeof(t));
    for (int i = 0; i < ERRTALLY_SLOTS + 5; i++) {
        snprintf(msg, sizeof(msg), "m%d", i);
        errtally_add(&t, REQ_HTTP_5XX, 500, msg, (uint64_t)i + 1);
    }
    assert_int_equal(t.n, ERRTALLY_SLOTS);
    uint64_t other = 0;
    for (int i = ERRTALLY_SLOTS; i < ERRTALLY_SLOTS + 5; i++)
        other += (uint64_t)i + 1;
    assert_int_equal(t.other, other);
    /* a kept key still counts exactly */
    errtally_add(&t, REQ_HTTP_5XX, 500, "m0", 10);
    assert_int_equal(t.e[0].count, 11);
    /* a message longer than the slot is cut, and the cut text is the key */
    char longmsg[REQ_ERROR_MAX + 50];
    memset(longmsg, 'x', sizeof(longmsg) - 1);
    longmsg[sizeof(longmsg) - 1] = '\0';
    struct errtally u;
    memset(&u, 0, sizeof(u));
    errtally_add(&u, REQ_OTHER, 0, longmsg, 1);
    errtally_add(&u, REQ_OTHER, 0, longmsg, 1);
    assert_int_equal(u.n, 1);
    assert_int_equal(strlen(u.e[0].msg), REQ_ERROR_MAX - 1);
}

static void test_merge(void **state)
{
    struct errtally a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    errtally_add(&a, REQ_HTTP_429, 429, "slow", 2);
    errtally_add(&b, REQ_HTTP_429, 429, "slow", 3);
    errtally_add(&b, REQ_STREAM_ERROR, 200, "overloaded", 1);
    b.other = 4;
    errtally_merge(&a, &b);
    assert_int_equal(a.n, 2);
    assert_int_equal(a.e[0].count, 5);
    assert_int_equal(a.e[1].count, 1);
    assert_int_equal(a.other, 4);
    assert_int_equal(errtally_total(&a), 10);
}

static void test_json_round_trip(void **state)
{
    struct errtally a, b;
    char err[128] = "";
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    errtally_add(&a, REQ_HTTP_5XX, 500, "CUDA out of memory", 2);
    errtally_add(&a, REQ_CONNECT, 0, "connection refused", 5);
    a.other = 1;
    json_t *j = errtally_to_json(&a);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "distinct_kept")), 2);
    json_t *first = json_array_get(json_object_get(j, "top"), 0);
    assert_string_equal(json_string_value(json_object_get(first, "message")), "connection refused");
    assert_true(json_is_null(json_object_get(first, "status")));
    assert_string_equal(json_string_value(json_object_get(first, "outcome")), "connect");
    /* read twice: counts add, as when merging two processes */
    assert_int_equal(errtally_add_json(&b, j, err, sizeof(err)), 0);
    assert_int_equal(errtally_add_json(&b, j, err, sizeof(err)), 0);
    assert_int_equal(b.n, 2);
    assert_int_equal(errtally_total(&b), 16);
    assert_int_equal(b.other, 2);
    json_decref(j);
    assert_int_equal(errtally_add_json(&b, NULL, err, sizeof(err)), 0);

    static const char *const bad[] = {
        "[]",
        "{\"other\":0}",
        "{\"other\":-1,\"top\":[]}",
        "{\"other\":0,\"top\":[{\"count\":1,\"outcome\":\"nope\",\"status\":1,\"message\":\"\"}]}",
        "{\"other\":0,\"top\":[{\"count\":-1,\"outcome\":\"ok\",\"status\":1,\"message\":\"\"}]}",
        "{\"other\":0,\"top\":[{\"count\":1,\"outcome\":\"ok\",\"status\":1000,\"message\":\"\"}]}",
        "{\"other\":0,\"top\":[{\"count\":1,\"outcome\":\"ok\",\"status\":null,\"message\":1}]}",
        "{\"other\":0,\"top\":[7]}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *v = json_loads(bad[i], 0, NULL);
        assert_non_null(v);
        err[0] = '\0';
        assert_int_equal(errtally_add_json(&b, v, err, sizeof(err)), TS_PARSE);
        assert_true(strncmp(err, "errors", 6) == 0);
        json_decref(v);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_and_top),
        cmocka_unit_test(test_bounded),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_json_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
