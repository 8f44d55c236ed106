/*
 * test_traceparent.c - W3C traceparent formatting and parsing (the
 * specification's validity rules), baggage encoding, limits and lookup.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/traceparent.h"

/* The example of the W3C specification. */
#define EX_TRACE "4bf92f3577b34da6a3ce929d0e0e4736"
#define EX_SPAN  "00f067aa0ba902b7"

static void example_ctx(struct trace_context *tc)
{
    memset(tc, 0, sizeof(*tc));
    assert_int_equal(trace_id_from_hex(EX_TRACE, tc->trace_id, TRACE_ID_LEN), 0);
    assert_int_equal(trace_id_from_hex(EX_SPAN, tc->span_id, SPAN_ID_LEN), 0);
    tc->flags = TRACE_FLAG_SAMPLED;
}

static int parse_str(const char *s, struct trace_context *tc)
{
    return traceparent_parse(s, strlen(s), tc);
}

static void test_format(void **state)
{
    struct trace_context tc;
    example_ctx(&tc);
    assert_int_equal(tc.trace_id[0], 0x4b);
    assert_int_equal(tc.trace_id[15], 0x36);
    assert_int_equal(tc.span_id[7], 0xb7);
    char out[TRACEPARENT_LEN + 1];
    assert_int_equal(traceparent_format(&tc, out, sizeof(out)), 0);
    assert_string_equal(out, "00-" EX_TRACE "-" EX_SPAN "-01");
    assert_int_equal(strlen(out), TRACEPARENT_LEN);
    tc.flags = 0x09;
    assert_int_equal(traceparent_format(&tc, out, sizeof(out)), 0);
    assert_string_equal(out + 52, "-09");
    /* too small a buffer, zero ids */
    assert_int_equal(traceparent_format(&tc, out, TRACEPARENT_LEN), TS_TOOBIG);
    struct trace_context zero = tc;
    memset(zero.trace_id, 0, TRACE_ID_LEN);
    assert_int_equal(traceparent_format(&zero, out, sizeof(out)), -EINVAL);
    zero = tc;
    memset(zero.span_id, 0, SPAN_ID_LEN);
    assert_int_equal(traceparent_format(&zero, out, sizeof(out)), -EINVAL);
}

static void test_parse_valid(void **state)
{
    struct trace_context want, got;
    example_ctx(&want);
    memset(&got, 0xaa, sizeof(got));
    assert_int_equal(parse_str("00-" EX_TRACE "-" EX_SPAN "-01", &got), 0);
    assert_memory_equal(got.trace_id, want.trace_id, TRACE_ID_LEN);
    assert_memory_equal(got.span_id, want.span_id, SPAN_ID_LEN);
    assert_int_equal(got.flags, 0x01);
    /* unknown flag bits are kept; not sampled is fine */
    assert_int_equal(parse_str("00-" EX_TRACE "-" EX_SPAN "-00", &got), 0);
    assert_int_equal(got.flags, 0x00);
    assert_int_equal(parse_str("00-" EX_TRACE "-" EX_SPAN "-ff", &got), 0);
    assert_int_equal(got.flags, 0xff);
    /* a higher version: read as 00, with room for more fields after a '-' */
    assert_int_equal(parse_str("cc-" EX_TRACE "-" EX_SPAN "-01", &got), 0);
    assert_int_equal(parse_str("01-" EX_TRACE "-" EX_SPAN "-01-what-the-future-holds", &got), 0);
    assert_memory_equal(got.trace_id, want.trace_id, TRACE_ID_LEN);
    /* round trip */
    char out[TRACEPARENT_LEN + 1];
    got.flags = 1;
    assert_int_equal(traceparent_format(&got, out, sizeof(out)), 0);
    assert_string_equal(out, "00-" EX_TRACE "-" EX_SPAN "-01");
}

static void test_parse_invalid(void **state)
{
    static const char *const bad[] = {
        /* version ff is forbidden; versions are two lower-case hex digits */
        "ff-" EX_TRACE "-" EX_SPAN "-01",
        "0g-" EX_TRACE "-" EX_SPAN "-01",
        "0A-" EX_TRACE "-" EX_SPAN "-01",
        "0-" EX_TRACE "-" EX_SPAN "-01",
        /* version 00 is exactly 55 characters */
        "00-" EX_TRACE "-" EX_SPAN "-01-",
        "00-" EX_TRACE "-" EX_SPAN "-01-extra",
        "00-" EX_TRACE "-" EX_SPAN "-1",
        /* a higher version must continue with '-' */
        "01-" EX_TRACE "-" EX_SPAN "-01x",
        /* upper-case hex */
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-" EX_SPAN "-01",
        "00-" EX_TRACE "-00F067AA0BA902B7-01",
        "00-" EX_TRACE "-" EX_SPAN "-0A",
        /* all-zero ids */
        "00-00000000000000000000000000000000-" EX_SPAN "-01",
        "00-" EX_TRACE "-0000000000000000-01",
        /* wrong lengths and separators */
        "00-4bf92f3577b34da6a3ce929d0e0e473-" EX_SPAN "-01",
        "00-" EX_TRACE "-00f067aa0ba902b-01",
        "00_" EX_TRACE "-" EX_SPAN "-01",
        "00-" EX_TRACE "_" EX_SPAN "-01",
        "00-" EX_TRACE "-" EX_SPAN "_01",
        "00-" EX_TRACE "-" EX_SPAN "-0z",
        "",
        "00",
    };
    struct trace_context tc;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&tc, 0x5a, sizeof(tc));
        if (parse_str(bad[i], &tc) != TS_PARSE)
            fail_msg("accepted: '%s'", bad[i]);
        assert_int_equal(tc.trace_id[0], 0x5a); /* untouched on error */
    }
}

static void test_hex(void **state)
{
    uint8_t id[SPAN_ID_LEN];
    char hex[2 * SPAN_ID_LEN + 1];
    assert_int_equal(trace_id_from_hex("00F067AA0BA902B7", id, SPAN_ID_LEN), 0);
    trace_id_hex(id, SPAN_ID_LEN, hex);
    assert_string_equal(hex, EX_SPAN);
    assert_int_equal(trace_id_from_hex("00f067aa0ba902bz", id, SPAN_ID_LEN), TS_PARSE);
    memset(id, 0, sizeof(id));
    assert_false(trace_id_valid(id, SPAN_ID_LEN));
    id[7] = 1;
    assert_true(trace_id_valid(id, SPAN_ID_LEN));
}

static void test_baggage_encoding(void **state)
{
    char storage[512];
    struct baggage b;
    baggage_init(&b, storage, sizeof(storage));
    assert_string_equal(b.data, "");
    assert_int_equal(baggage_add(&b, "tokenstorm.request_id", "ts-00000000000000ab-7"), 0);
    assert_int_equal(baggage_add(&b, "tokenstorm.tenant", "gold tier"), 0);
    /* every byte outside baggage-octet, and '%', is %XX; UTF-8 byte by byte */
    assert_int_equal(baggage_add(&b, "tokenstorm.scenario", "a,b;c%\"\\\xe2\x82\xac="), 0);
    assert_string_equal(storage, "tokenstorm.request_id=ts-00000000000000ab-7,"
                                 "tokenstorm.tenant=gold%20tier,"
                                 "tokenstorm.scenario=a%2Cb%3Bc%25%22%5C%E2%82%AC=");
    assert_int_equal(b.n, 3);
    assert_int_equal(b.len, strlen(storage));
    /* keys are tokens */
    size_t len = b.len;
    assert_int_equal(baggage_add(&b, "", "x"), -EINVAL);
    assert_int_equal(baggage_add(&b, "bad key", "x"), -EINVAL);
    assert_int_equal(baggage_add(&b, "a=b", "x"), -EINVAL);
    assert_int_equal(baggage_add(&b, "a,b", "x"), -EINVAL);
    assert_int_equal(b.len, len);
    assert_int_equal(b.n, 3);
    /* an empty value is allowed */
    assert_int_equal(baggage_add(&b, "empty", ""), 0);
    assert_string_equal(storage + len, ",empty=");

    char enc[8];
    assert_int_equal(baggage_encode_value("a b", 3, enc, sizeof(enc)), 5);
    assert_string_equal(enc, "a%20b");
    assert_int_equal(baggage_encode_value("ab c", 4, enc, 6), TS_TOOBIG);
}

static void test_baggage_member_limit(void **state)
{
    static char storage[BAGGAGE_MAX_BYTES + 1];
    struct baggage b;
    baggage_init(&b, storage, sizeof(storage));
    char key[16];
    for (int i = 0; i < BAGGAGE_MAX_MEMBERS; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        assert_int_equal(baggage_add(&b, key, "v"), 0);
    }
    assert_int_equal(b.n, 180);
    size_t len = b.len;
    assert_int_equal(baggage_add(&b, "one_more", "v"), TS_TOOBIG);
    assert_int_equal(b.len, len);
    assert_int_equal(strlen(storage), len);
    /* the last member is intact */
    assert_string_equal(storage + len - strlen(",k179=v"), ",k179=v");
}

static void test_baggage_byte_limit(void **state)
{
    static char storage[BAGGAGE_MAX_BYTES + 100];
    static char value[BAGGAGE_MAX_BYTES + 1];
    struct baggage b;
    /* "k=" + 8190 bytes is exactly 8192: fits */
    memset(value, 'a', BAGGAGE_MAX_BYTES - 2);
    value[BAGGAGE_MAX_BYTES - 2] = '\0';
    baggage_init(&b, storage, sizeof(storage));
    assert_int_equal(b.max, BAGGAGE_MAX_BYTES); /* capped at 8192 even with more storage */
    assert_int_equal(baggage_add(&b, "k", value), 0);
    assert_int_equal(b.len, BAGGAGE_MAX_BYTES);
    assert_int_equal(baggage_add(&b, "x", ""), TS_TOOBIG);
    assert_int_equal(strlen(storage), BAGGAGE_MAX_BYTES);
    /* one byte more does not */
    value[BAGGAGE_MAX_BYTES - 2] = 'a';
    value[BAGGAGE_MAX_BYTES - 1] = '\0';
    baggage_init(&b, storage, sizeof(storage));
    assert_int_equal(baggage_add(&b, "k", value), TS_TOOBIG);
    assert_int_equal(b.len, 0);
    assert_string_equal(storage, "");
    /* the limit counts encoded bytes: 2731 spaces encode to 8193 bytes */
    memset(value, ' ', 2731);
    value[2731] = '\0';
    assert_int_equal(baggage_add(&b, "k", value), TS_TOOBIG);
    value[2730] = '\0'; /* 8190 + 2 */
    assert_int_equal(baggage_add(&b, "k", value), 0);
    assert_int_equal(b.len, BAGGAGE_MAX_BYTES);
    /* a small storage caps it too */
    char small[16];
    baggage_init(&b, small, sizeof(small));
    assert_int_equal(baggage_add(&b, "a", "1234567890123"), 0); /* 15 bytes */
    assert_int_equal(baggage_add(&b, "b", ""), TS_TOOBIG);
    assert_string_equal(small, "a=1234567890123");
}

static void test_baggage_get(void **state)
{
    char storage[256];
    struct baggage b;
    baggage_init(&b, storage, sizeof(storage));
    assert_int_equal(baggage_add(&b, "tokenstorm.request_id", "ts-1-2"), 0);
    assert_int_equal(baggage_add(&b, "tokenstorm.tenant", "gold tier"), 0);
    assert_int_equal(baggage_add(&b, "tokenstorm.scenario", "a,b;c%\xe2\x82\xac"), 0);
    char out[64];
    assert_int_equal(baggage_get(b.data, b.len, "tokenstorm.tenant", out, sizeof(out)), 0);
    assert_string_equal(out, "gold tier");
    assert_int_equal(baggage_get(b.data, b.len, "tokenstorm.scenario", out, sizeof(out)), 0);
    assert_string_equal(out, "a,b;c%\xe2\x82\xac");
    assert_int_equal(baggage_get(b.data, b.len, "tokenstorm.request_id", out, sizeof(out)), 0);
    assert_string_equal(out, "ts-1-2");
    assert_int_equal(baggage_get(b.data, b.len, "nope", out, sizeof(out)), -ENOENT);
    assert_int_equal(baggage_get(b.data, b.len, "tokenstorm.tenant", out, 4), TS_TOOBIG);

    /* blanks and properties, as other producers write them */
    const char *s = " a = 1 ;prop1;p2=x , b=2,c=%41%42";
    assert_int_equal(baggage_get(s, strlen(s), "a", out, sizeof(out)), 0);
    assert_string_equal(out, "1");
    assert_int_equal(baggage_get(s, strlen(s), "b", out, sizeof(out)), 0);
    assert_string_equal(out, "2");
    assert_int_equal(baggage_get(s, strlen(s), "c", out, sizeof(out)), 0);
    assert_string_equal(out, "AB");
    /* keys are case-sensitive */
    assert_int_equal(baggage_get(s, strlen(s), "A", out, sizeof(out)), -ENOENT);

    static const char *const bad[] = {"novalue",   "=v",    "a=1,,b=2", "a=\"q\"",
                                      "a=1 x,b=2", "a b=1", "a=\\"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = baggage_get(bad[i], strlen(bad[i]), "b", out, sizeof(out));
        if (rc != TS_PARSE)
            fail_msg("'%s': %d", bad[i], rc);
    }
    /* escapes are checked in the value looked up */
    assert_int_equal(baggage_get("a=%zz", 5, "a", out, sizeof(out)), TS_PARSE);
    /* a key found before the broken part is still found */
    assert_int_equal(baggage_get("b=ok,broken", 11, "b", out, sizeof(out)), 0);
    assert_string_equal(out, "ok");
}

static void test_percent_decode(void **state)
{
    char out[16];
    assert_int_equal(percent_decode("a%20b%2c", 8, out, sizeof(out)), 4);
    assert_string_equal(out, "a b,");
    assert_int_equal(percent_decode("%", 1, out, sizeof(out)), TS_PARSE);
    assert_int_equal(percent_decode("%4", 2, out, sizeof(out)), TS_PARSE);
    assert_int_equal(percent_decode("%4g", 3, out, sizeof(out)), TS_PARSE);
    assert_int_equal(percent_decode("abcd", 4, out, 4), TS_TOOBIG);
    assert_int_equal(percent_decode("abc", 3, out, 4), 3);
    assert_true(http_tchar('a') && http_tchar('~') && http_tchar('.'));
    assert_false(http_tchar(' ') || http_tchar('=') || http_tchar(',') || http_tchar(0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_parse_valid),
        cmocka_unit_test(test_parse_invalid),
        cmocka_unit_test(test_hex),
        cmocka_unit_test(test_baggage_encoding),
        cmocka_unit_test(test_baggage_member_limit),
        cmocka_unit_test(test_baggage_byte_limit),
        cmocka_unit_test(test_baggage_get),
        cmocka_unit_test(test_percent_decode),
    };
    return cmocka_run_group_tests_name("traceparent", tests, NULL, NULL);
}
