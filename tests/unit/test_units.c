#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "base/units.h"

static void test_duration_good(void **state)
{
    static const struct {
        const char *in;
        uint64_t ns;
    } cases[] = {
        {"250ms", 250000000ULL},
        {"30s", 30000000000ULL},
        {"5m", 300000000000ULL},
        {"5min", 300000000000ULL},
        {"1h", 3600000000000ULL},
        {"1d", 86400000000000ULL},
        {"1.5s", 1500000000ULL},
        {"100us", 100000ULL},
        {"100\xc2\xb5s", 100000ULL},
        {"100\xce\xbcs", 100000ULL},
        {"10ns", 10ULL},
        {"2", 2000000000ULL},
        {"0.25", 250000000ULL},
        {".5s", 500000000ULL},
        {"0", 0ULL},
        {"0s", 0ULL},
        {"0.1s", 100000000ULL},
        {"1.0000000005s", 1000000001ULL}, /* half a ns rounds up */
        {"1.0000000004s", 1000000000ULL},
        {"1h30m", 5400000000000ULL},
        {"1m 30.5s", 90500000000ULL},
        {"  30 s  ", 30000000000ULL},
        {"1.5ms", 1500000ULL},
        {"18446744073709551615ns", UINT64_MAX},
        {"18446744073.709551615s", UINT64_MAX},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t ns = 12345;
        int rc = units_parse_duration_ns(cases[i].in, &ns);
        if (rc != 0 || ns != cases[i].ns)
            fail_msg("'%s': rc %d ns %llu, want %llu", cases[i].in, rc, (unsigned long long)ns,
                     (unsigned long long)cases[i].ns);
    }
}

static void test_duration_bad(void **state)
{
    static const char *bad[] = {
        "",
        "   ",
        "s",
        "-1s",
        "+1s",
        "1x",
        "1 s x",
        "1sm",
        "abc",
        "1.s",
        ".s",
        "1e3s",
        "1M",
        "1S",
        "1h30",
        "30 1s",
        "inf",
        "nan",
        "0x10s",
        "1,5s",
        "1..5s",
        "5 m5",
        "1s-1",
        "1/s",
        "1 ms1",
        "ms",
        "18446744073709551616ns", /* 2^64 */
        "18446744073.709551616s",
        "213503982335d", /* > 2^64 ns */
        "99999999999999999999999s",
        "10000000000h",
        "9223372036854775807s1s",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t ns = 777;
        int rc = units_parse_duration_ns(bad[i], &ns);
        if (rc != -EINVAL || ns != 777)
            fail_msg("'%s' accepted (rc %d, ns %llu)", bad[i], rc, (unsigned long long)ns);
    }
    uint64_t ns;
    assert_int_equal(units_parse_duration_ns(NULL, &ns), -EINVAL);
}

static void test_size(void **state)
{
    static const struct {
        const char *in;
        uint64_t bytes;
    } cases[] = {
        {"0", 0},
        {"4096", 4096},
        {"64K", 65536},
        {"64k", 65536},
        {"64KB", 65536},
        {"64KiB", 65536},
        {"64 kib", 65536},
        {"1M", 1048576},
        {"1MiB", 1048576},
        {"2G", 2147483648ULL},
        {"1T", 1099511627776ULL},
        {"1.5K", 1536},
        {"512B", 512},
        {"0.5", 1}, /* half a byte rounds up */
        {"16383.99999999999999999T", 18014398509481984ULL},
        {"18446744073709551615", UINT64_MAX},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t b = 1;
        int rc = units_parse_size(cases[i].in, &b);
        if (rc != 0 || b != cases[i].bytes)
            fail_msg("'%s': rc %d, %llu, want %llu", cases[i].in, rc, (unsigned long long)b,
                     (unsigned long long)cases[i].bytes);
    }
    static const char *bad[] = {
        "",     "K",       "-1K", "1X", "1KK", "1 K B", "1e3", "16777216T", "18446744073709551616",
        "0x10", "1K junk", "inf"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t b = 9;
        int rc = units_parse_size(bad[i], &b);
        if (rc != -EINVAL || b != 9)
            fail_msg("'%s' accepted (rc %d)", bad[i], rc);
    }
}

static void test_rate(void **state)
{
    static const struct {
        const char *in;
        double per_sec;
    } cases[] = {
        {"10", 10},       {"10/s", 10},     {"600/m", 10},   {"600/min", 10},
        {"36000/h", 10},  {"0.5 / s", 0.5}, {"1e3/s", 1000}, {"0", 0},
        {"2.5/sec", 2.5}, {"7200/hour", 2}, {" 3 ", 3},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        double v = -1;
        int rc = units_parse_rate(cases[i].in, &v);
        if (rc != 0 || fabs(v - cases[i].per_sec) > 1e-12)
            fail_msg("'%s': rc %d, %g, want %g", cases[i].in, rc, v, cases[i].per_sec);
    }
    static const char *bad[] = {"",         "/s",  "-1/s", "+1",    "10/",    "10/x", "10/ms",
                                "10 per s", "inf", "nan",  "1e999", "10/s/s", "10s"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        double v = 42;
        int rc = units_parse_rate(bad[i], &v);
        if (rc != -EINVAL || v != 42)
            fail_msg("'%s' accepted (rc %d, %g)", bad[i], rc, v);
    }
}

static void test_scan_number(void **state)
{
    const char *end;
    double v;
    assert_int_equal(units_scan_number("12.5,3", &end, &v), 0);
    assert_true(v == 12.5);
    assert_string_equal(end, ",3");
    assert_int_equal(units_scan_number("-1e-3-2", &end, &v), 0);
    assert_true(v == -1e-3);
    assert_string_equal(end, "-2");
    assert_int_equal(units_scan_number("1e", &end, &v), 0); /* 'e' without digits is not eaten */
    assert_true(v == 1.0);
    assert_string_equal(end, "e");
    assert_int_equal(units_scan_number(".5x", &end, &v), 0);
    assert_true(v == 0.5);
    assert_string_equal(end, "x");
    static const char *bad[] = {"", "-", ".", "1.", "inf", "nan", "0x1p3", " 1", "1e999", "e5"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        end = NULL;
        v = 3;
        int rc = units_scan_number(bad[i], &end, &v);
        if (strcmp(bad[i], "0x1p3") == 0) {
            /* reads the leading 0 and stops at 'x' */
            assert_int_equal(rc, 0);
            assert_true(v == 0.0);
            assert_string_equal(end, "x1p3");
            continue;
        }
        if (rc != -EINVAL || v != 3 || end != NULL)
            fail_msg("'%s' accepted", bad[i]);
    }
    char longnum[80];
    memset(longnum, '1', 70);
    longnum[70] = '\0';
    assert_int_equal(units_scan_number(longnum, &end, &v), -EINVAL);
}

static void test_format_duration(void **state)
{
    static const struct {
        uint64_t ns;
        const char *out;
    } cases[] = {
        {0, "0 ns"},
        {850, "850 ns"},
        {999, "999 ns"},
        {1000, "1 us"},
        {1250, "1.25 us"},
        {999400, "999 us"},
        {999600, "1 ms"},
        {1250000, "1.25 ms"},
        {3400000000ULL, "3.4 s"},
        {59000000000ULL, "59 s"},
        {150000000000ULL, "2.5 min"},
        {5400000000000ULL, "1.5 h"},
        {3600000000000000ULL, "1000 h"},
    };
    char buf[32];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *got = units_format_duration(cases[i].ns, buf, sizeof(buf));
        assert_ptr_equal(got, buf);
        if (strcmp(got, cases[i].out) != 0)
            fail_msg("%llu ns: '%s', want '%s'", (unsigned long long)cases[i].ns, got,
                     cases[i].out);
    }
    char tiny[4];
    assert_string_equal(units_format_duration(1250000, tiny, sizeof(tiny)), "1.2");
}

static void test_format_size(void **state)
{
    char buf[32];
    assert_string_equal(units_format_size(0, buf, sizeof(buf)), "0 B");
    assert_string_equal(units_format_size(512, buf, sizeof(buf)), "512 B");
    assert_string_equal(units_format_size(1536, buf, sizeof(buf)), "1.5 KiB");
    assert_string_equal(units_format_size(2ULL << 30, buf, sizeof(buf)), "2 GiB");
    assert_string_equal(units_format_size(UINT64_MAX, buf, sizeof(buf)), "16 EiB");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_duration_good), cmocka_unit_test(test_duration_bad),
        cmocka_unit_test(test_size),          cmocka_unit_test(test_rate),
        cmocka_unit_test(test_scan_number),   cmocka_unit_test(test_format_duration),
        cmocka_unit_test(test_format_size),
    };
    return cmocka_run_group_tests_name("units", tests, NULL, NULL);
}
