/*
 * test_jsonptr.c - RFC 6901 lookups: the examples of the RFC's section 5,
 * then what must not be found.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>

#include "llm/jsonptr.h"

/* RFC 6901 section 5, plus "~1" (decoded after "~0": "~01" is "~1") and a
 * key holding a NUL byte (added by load_doc). */
static const char rfc_doc[] = "{\"foo\": [\"bar\", \"baz\"], \"\": 0, \"a/b\": 1, \"c%d\": 2,"
                              " \"e^f\": 3, \"g|h\": 4, \"i\\\\j\": 5, \"k\\\"l\": 6, \" \": 7,"
                              " \"m~n\": 8, \"~1\": 9,"
                              " \"deep\": {\"x/y\": [{\"z~\": \"found\"}]}}";

static json_t *load_doc(void)
{
    json_error_t e;
    json_t *j = json_loads(rfc_doc, 0, &e);
    assert_non_null(j);
    /* jansson parses no NUL in keys, but holds them */
    assert_int_equal(json_object_setn_new(j, "n\0l", 3, json_integer(10)), 0);
    return j;
}

static json_t *get(json_t *j, const char *p)
{
    return jsonptr_get(j, p, strlen(p));
}

static void test_rfc6901_section5(void **state)
{
    (void)state;
    json_t *j = load_doc();
    assert_ptr_equal(get(j, ""), j);
    json_t *foo = get(j, "/foo");
    assert_true(json_is_array(foo));
    assert_int_equal(json_array_size(foo), 2);
    assert_ptr_equal(foo, json_object_get(j, "foo"));
    assert_string_equal(json_string_value(get(j, "/foo/0")), "bar");
    assert_string_equal(json_string_value(get(j, "/foo/1")), "baz");
    static const struct {
        const char *p;
        json_int_t v;
    } ints[] = {
        {"/", 0},     {"/a~1b", 1}, {"/c%d", 2}, {"/e^f", 3},  {"/g|h", 4},
        {"/i\\j", 5}, {"/k\"l", 6}, {"/ ", 7},   {"/m~0n", 8}, {"/~01", 9},
    };
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
        json_t *v = get(j, ints[i].p);
        if (!json_is_integer(v))
            fail_msg("%s: not found", ints[i].p);
        assert_int_equal(json_integer_value(v), ints[i].v);
    }
    /* A key with a NUL: the pointer is given with its length. */
    json_t *nul = jsonptr_get(j, "/n\0l", 4);
    assert_true(json_is_integer(nul));
    assert_int_equal(json_integer_value(nul), 10);
    /* Escaped tokens deeper down, through an array. */
    assert_string_equal(json_string_value(get(j, "/deep/x~1y/0/z~0")), "found");
    json_decref(j);
}

static void test_not_found(void **state)
{
    (void)state;
    json_t *j = load_doc();
    static const char *const bad[] = {
        "foo",     /* not starting with '/' */
        "/foo/2",  /* out of range */
        "/foo/-",  /* the element after the last */
        "/foo/01", /* leading zero */
        "/foo/+1",  "/foo/ 1", "/foo/", "/foo/1x", "/foo/1234567890123456789", /* 19 digits */
        "/m~2n",                                                               /* bad escape */
        "/m~",      /* escape cut short */
        "/a/b",     /* "a/b" must be written a~1b */
        "/1",       /* member "1" does not exist */
        "/foo/0/x", /* into a string */
        "/ /x",     /* into a number */
        "/missing", "//",      "/~1/x",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (get(j, bad[i]))
            fail_msg("%s: found something", bad[i]);
    assert_null(jsonptr_get(NULL, "/a", 2));
    assert_null(jsonptr_get(NULL, "", 0));
    /* "/~1" names the key "/"; it does not exist here, "~1" does. */
    assert_null(get(j, "/~1"));
    json_decref(j);
}

static void test_valid(void **state)
{
    (void)state;
    static const char *const ok[] = {"", "/", "/a", "/a~0b~1c", "//", "/0/-", "/~0~1"};
    static const char *const bad[] = {"a", "/~", "/~2", "/a~/b", "~0"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        assert_true(jsonptr_valid(ok[i], strlen(ok[i])));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (jsonptr_valid(bad[i], strlen(bad[i])))
            fail_msg("%s: valid", bad[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc6901_section5),
        cmocka_unit_test(test_not_found),
        cmocka_unit_test(test_valid),
    };
    return cmocka_run_group_tests_name("jsonptr", tests, NULL, NULL);
}
