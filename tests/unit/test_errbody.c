#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/utf8.h"
#include "llm/errbody.c"

static const char *describe(const char *body, char *out, size_t cap)
{
    size_t n = errbody_describe(body, strlen(body), out, cap);
    assert_int_equal(n, strlen(out));
    assert_true(n < cap);
    return out;
}

static void test_openai(void **state)
{
    char o[200];
    assert_string_equal(describe("{\"error\":{\"message\":\"Rate limit reached\",\"type\":"
                                 "\"requests\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}",
                                 o, sizeof(o)),
                        "Rate limit reached (type: requests, code: rate_limit_exceeded)");
    assert_string_equal(
        describe("{\"error\":{\"message\":\"no type\",\"code\":null}}", o, sizeof(o)), "no type");
    assert_string_equal(describe("{\"error\":{\"code\":\"only_code\"}}", o, sizeof(o)),
                        "(code: only_code)");
    assert_string_equal(describe(" {\"error\":\"just text\"}\n", o, sizeof(o)), "just text");
}

static void test_vllm(void **state)
{
    char o[200];
    assert_string_equal(describe("{\"object\":\"error\",\"message\":\"The model `x` does not "
                                 "exist.\",\"type\":\"NotFoundError\",\"param\":null,\"code\":404}",
                                 o, sizeof(o)),
                        "The model `x` does not exist. (type: NotFoundError, code: 404)");
}

static void test_fastapi(void **state)
{
    char o[200];
    assert_string_equal(describe("{\"detail\":\"Not Found\"}", o, sizeof(o)), "Not Found");
    assert_string_equal(
        describe("{\"detail\":[{\"loc\":[\"body\",\"messages\",0,\"role\"],\"msg\":\"field "
                 "required\",\"type\":\"value_error.missing\"},{\"loc\":[\"body\"],\"msg\":\"x\"},"
                 "{\"msg\":\"y\"}]}",
                 o, sizeof(o)),
        "body.messages.0.role: field required (+2 more)");
    assert_string_equal(describe("{\"detail\":[{\"msg\":\"only msg\"}]}", o, sizeof(o)),
                        "only msg");
    assert_string_equal(describe("{\"detail\":{\"a\":1}}", o, sizeof(o)), "{\"a\":1}");
    assert_string_equal(describe("{\"detail\":[1,2]}", o, sizeof(o)), "[1,2]");
}

static void test_other(void **state)
{
    char o[200];
    /* a gateway's own JSON */
    assert_string_equal(describe("{\"message\":\"Unauthorized\"}", o, sizeof(o)), "Unauthorized");
    /* JSON we do not know, and broken JSON: their first bytes */
    assert_string_equal(describe("{\"status\":\"bad\"}", o, sizeof(o)), "{\"status\":\"bad\"}");
    assert_string_equal(describe("{\"error\":", o, sizeof(o)), "{\"error\":");
    /* text made printable: controls and white space runs are one space */
    assert_string_equal(describe("  upstream\r\n\tconnect\x01\x7f error  \n", o, sizeof(o)),
                        "upstream connect error");
    assert_string_equal(describe("<html><body>502 Bad Gateway</body></html>", o, sizeof(o)),
                        "<html><body>502 Bad Gateway</body></html>");
    assert_string_equal(describe("", o, sizeof(o)), "");
    assert_string_equal(describe(" \n\t", o, sizeof(o)), "");
    /* not UTF-8: '?' per byte; valid UTF-8 kept; C1 controls and NBSP are spaces */
    assert_string_equal(describe("a\xff\xc3(b \xc3\xa9t\xc3\xa9\xc2\x85z\xc2\xa0!", o, sizeof(o)),
                        "a?"
                        "?(b \xc3\xa9t\xc3\xa9 z !");
    /* a JSON string holding \u0000 and a newline */
    assert_string_equal(describe("{\"detail\":\"a\\u0000b\\nc\"}", o, sizeof(o)), "a b c");
}

static void test_bounds(void **state)
{
    char o[16];
    /* cut at a character boundary with "..." */
    assert_string_equal(describe("0123456789abcdefghij", o, sizeof(o)), "0123456789ab...");
    assert_string_equal(describe("0123456789abcd", o, sizeof(o)), "0123456789abcd");
    assert_string_equal(describe("0123456789abcde", o, sizeof(o)), "0123456789abcde");
    assert_string_equal(describe("0123456789\xc3\xa9\xc3\xa9\xc3\xa9xyz", o, sizeof(o)),
                        "0123456789\xc3\xa9...");
    char tiny[3];
    assert_string_equal(describe("abcdef", tiny, sizeof(tiny)), "ab");
    char one[1];
    assert_string_equal(describe("abcdef", one, sizeof(one)), "");
    assert_int_equal(errbody_describe("abc", 3, NULL, 0), 0);
    /* not NUL-terminated input is read only to len */
    char big[64];
    assert_int_equal(errbody_describe("abcdef", 3, big, sizeof(big)), 3);
    assert_string_equal(big, "abc");
    /* JSON over the parse limit is described as text */
    static char huge[ERRBODY_MAX_PARSE + 64];
    memset(huge, ' ', sizeof(huge) - 1);
    memcpy(huge, "{\"detail\":\"x\"", 13);
    huge[sizeof(huge) - 2] = '}';
    huge[sizeof(huge) - 1] = '\0';
    assert_string_equal(describe(huge, big, 20), "{\"detail\":\"x\" }");
}

static void test_format(void **state)
{
    char o[200];
    struct openai_chunk_error e = {
        .message = "overloaded", .type = "server_error", .code = "503", .code_num = 503};
    size_t n = errbody_format(&e, o, sizeof(o));
    assert_int_equal(n, strlen(o));
    assert_string_equal(o, "overloaded (type: server_error, code: 503)");
    struct openai_chunk_error none = {.code_num = -1};
    assert_int_equal(errbody_format(&none, o, sizeof(o)), 0);
    assert_string_equal(o, "");
    struct openai_chunk_error nl = {.message = "line\none"};
    errbody_format(&nl, o, sizeof(o));
    assert_string_equal(o, "line one");
    assert_int_equal(errbody_printable("a\tb", 3, o, sizeof(o)), 3);
    assert_string_equal(o, "a b");
}

/* Whatever the bytes, the output is valid UTF-8 without control characters. */
static void test_always_printable(void **state)
{
    char in[64], o[24];
    uint32_t x = 12345;
    for (int round = 0; round < 20000; round++) {
        size_t n = (size_t)(round % (int)sizeof(in));
        for (size_t i = 0; i < n; i++) {
            x = x * 1103515245u + 12345u;
            in[i] = (char)(x >> 16);
        }
        if (n && round % 3 == 0)
            in[0] = '{';
        size_t len = errbody_describe(in, n, o, sizeof(o));
        assert_true(len < sizeof(o));
        assert_int_equal(len, strlen(o));
        assert_int_equal(utf8_invalid_at(o, len), len);
        for (size_t i = 0; i < len; i++)
            assert_true((unsigned char)o[i] > 0x20 || o[i] == ' ');
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openai),           cmocka_unit_test(test_vllm),
        cmocka_unit_test(test_fastapi),          cmocka_unit_test(test_other),
        cmocka_unit_test(test_bounds),           cmocka_unit_test(test_format),
        cmocka_unit_test(test_always_printable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
