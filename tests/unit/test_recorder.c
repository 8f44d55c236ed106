#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "../../src/chaos/recorder.c"

static void test_redact(void **state)
{
    (void)state;
    json_t *j = json_loads("{\"messages\":[{\"role\":\"user\",\"content\":\"secret 1\"},"
                           "{\"role\":\"assistant\",\"content\":\"secret 2\"}],"
                           "\"a/b\":{\"x\":1},\"user\":\"bob\"}",
                           0, NULL);
    assert_non_null(j);
    assert_int_equal(recorder_redact(j, "/messages/*/content"), 2);
    assert_int_equal(recorder_redact(j, "/a~1b/x"), 1);
    assert_int_equal(recorder_redact(j, "/user"), 1);
    assert_int_equal(recorder_redact(j, "/missing/*"), 0);
    assert_int_equal(recorder_redact(j, "/messages/1/role"), 1);
    assert_int_equal(recorder_redact(j, "nopointer"), 0);
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(s,
                        "{\"a/b\":{\"x\":\"[redacted]\"},\"messages\":[{\"content\":\"[redacted]\","
                        "\"role\":\"user\"},{\"content\":\"[redacted]\",\"role\":\"[redacted]\"}],"
                        "\"user\":\"[redacted]\"}");
    free(s);
    json_decref(j);
    assert_true(recorder_secret_header("AUTHORIZATION"));
    assert_true(recorder_secret_header("x-api-key"));
    assert_false(recorder_secret_header("content-type"));
}

static void test_options(void **state)
{
    (void)state;
    struct recorder *r;
    char err[256];
    const char *bad[] = {"messages"};
    struct recorder_config cfg = {.dir = "/tmp", .redact = bad, .nredact = 1};
    assert_int_equal(recorder_open(&cfg, &r, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "--redact"));
    cfg = (struct recorder_config){.dir = ""};
    assert_int_equal(recorder_open(&cfg, &r, err, sizeof err), -EINVAL);
}

/* The budget of the exchanges in progress: reservations past it are
 * refused whole, give-backs make room again, cuts are counted by reason. */
static void test_budget(void **state)
{
    (void)state;
    struct recorder r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.mu, NULL);
    r.max_inflight = 10000;
    assert_true(recorder_reserve(&r, 6000));
    assert_false(recorder_reserve(&r, 4001)); /* 10,001 */
    assert_true(recorder_reserve(&r, 4000));  /* exactly the budget */
    assert_false(recorder_reserve(&r, 1));
    assert_false(recorder_reserve(&r, SIZE_MAX)); /* no wrap-around */
    recorder_unreserve(&r, 6000);
    assert_true(recorder_reserve(&r, 5999));
    recorder_count_cut(&r, RECORDER_CUT_MEMORY);
    recorder_count_cut(&r, RECORDER_CUT_MEMORY);
    recorder_count_cut(&r, RECORDER_CUT_LINE);
    recorder_count_cut(&r, RECORDER_CUT_COUNT); /* not a reason: ignored */
    recorder_count_skip(&r);
    struct recorder_stats st;
    recorder_stats(&r, &st);
    assert_int_equal(st.inflight, 9999);
    assert_int_equal(st.max_inflight, 10000);
    assert_int_equal(st.cut[RECORDER_CUT_MEMORY], 2);
    assert_int_equal(st.cut[RECORDER_CUT_LINE], 1);
    assert_int_equal(st.skipped, 1);
    pthread_mutex_destroy(&r.mu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redact),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
