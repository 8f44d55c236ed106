#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "base/base64.h"

static void test_rfc4648_examples(void **state)
{
    /* RFC 4648 examples, as in HdrHistogram_c's hdr_histogram_log_test.c. */
    const char *plain[] = {"any carnal pleasur",
                           "any carnal pleasure.",
                           "any carnal pleasure",
                           "Man",
                           "f",
                           "fo",
                           "foo",
                           "foob",
                           "fooba",
                           "foobar"};
    const char *coded[] = {"YW55IGNhcm5hbCBwbGVhc3Vy",
                           "YW55IGNhcm5hbCBwbGVhc3VyZS4=",
                           "YW55IGNhcm5hbCBwbGVhc3VyZQ==",
                           "TWFu",
                           "Zg==",
                           "Zm8=",
                           "Zm9v",
                           "Zm9vYg==",
                           "Zm9vYmE=",
                           "Zm9vYmFy"};
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
        char out[64];
        size_t n = base64_encode(plain[i], strlen(plain[i]), out);
        assert_int_equal(n, strlen(coded[i]));
        assert_int_equal(n, base64_len(strlen(plain[i])));
        assert_string_equal(out, coded[i]);
        unsigned char back[64];
        long m = base64_decode(coded[i], strlen(coded[i]), back, BASE64_STRICT);
        assert_int_equal(m, (long)strlen(plain[i]));
        assert_memory_equal(back, plain[i], (size_t)m);
    }
}

static void test_padding_rules(void **state)
{
    unsigned char back[64];
    /* lenient: missing padding is fine; strict: it is not */
    assert_int_equal(base64_decode("Zm8", 3, back, 0), 2);
    assert_int_equal(base64_decode("Zm8", 3, back, BASE64_STRICT), TS_PARSE);
    const char *bad[] = {"", "TWF", "TW=u", "T===", "TWFu\n", "TW u", "TWF*", "=WFu"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(base64_decode(bad[i], strlen(bad[i]), back, BASE64_STRICT), TS_PARSE);
    assert_int_equal(base64_decode("T", 1, back, 0), TS_PARSE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc4648_examples),
        cmocka_unit_test(test_padding_rules),
    };
    return cmocka_run_group_tests_name("base64", tests, NULL, NULL);
}
