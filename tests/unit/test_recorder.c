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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redact),
        cmocka_unit_test(test_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
