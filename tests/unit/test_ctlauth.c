/*
 * test_ctlauth.c - who may use a control surface (net/ctlauth.h): loopback
 * hosts, the bind decision with and without a token, and the token check.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "net/ctlauth.c"

static void test_loopback(void **state)
{
    const char *yes[] = {"127.0.0.1", "127.1.2.3", "::1",
                         "localhost", "LocalHost", "::ffff:127.0.0.1"};
    const char *no[] = {"0.0.0.0",     "::", "10.0.0.1",        "192.168.1.1",          "128.0.0.1",
                        "example.com", "",   "::ffff:10.0.0.1", "127.0.0.1.example.com"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(*yes); i++)
        assert_true(ctlauth_is_loopback(yes[i]));
    for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++)
        assert_false(ctlauth_is_loopback(no[i]));
    assert_false(ctlauth_is_loopback(NULL));
}

static void test_setup(void **state)
{
    char err[512], warn[512];
    const char *tok = "x";
    unsetenv(CTLAUTH_TOKEN_ENV);
    /* loopback: no token needed, none enforced */
    assert_int_equal(ctlauth_setup("the API", "127.0.0.1", NULL, false, &tok, warn, sizeof warn,
                                   err, sizeof err),
                     0);
    assert_null(tok);
    assert_string_equal(warn, "");
    /* routable, no token: refused, and the message names the ways out */
    assert_int_equal(
        ctlauth_setup("the API", "0.0.0.0", NULL, false, &tok, warn, sizeof warn, err, sizeof err),
        -EINVAL);
    assert_non_null(strstr(err, "--api-token"));
    assert_non_null(strstr(err, "--api-insecure"));
    assert_non_null(strstr(err, CTLAUTH_TOKEN_ENV));
    /* routable, insecure: allowed, with a warning */
    assert_int_equal(
        ctlauth_setup("the API", "0.0.0.0", NULL, true, &tok, warn, sizeof warn, err, sizeof err),
        0);
    assert_null(tok);
    assert_non_null(strstr(warn, "warning"));
    /* a token: enforced anywhere; the environment's when none is given; empty is none */
    assert_int_equal(ctlauth_setup("the API", "0.0.0.0", "s3cret", false, &tok, warn, sizeof warn,
                                   err, sizeof err),
                     0);
    assert_string_equal(tok, "s3cret");
    setenv(CTLAUTH_TOKEN_ENV, "from-env", 1);
    assert_int_equal(ctlauth_setup("the API", "127.0.0.1", NULL, false, &tok, warn, sizeof warn,
                                   err, sizeof err),
                     0);
    assert_string_equal(tok, "from-env");
    setenv(CTLAUTH_TOKEN_ENV, "", 1);
    assert_int_equal(
        ctlauth_setup("the API", "::", NULL, false, &tok, warn, sizeof warn, err, sizeof err),
        -EINVAL);
    unsetenv(CTLAUTH_TOKEN_ENV);
    /* tokens are visible ASCII without spaces, 1..CTLAUTH_TOKEN_MAX bytes */
    const char *bad[] = {"a b", "a\tb", "caf\xc3\xa9"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        assert_int_equal(ctlauth_setup("the API", "127.0.0.1", bad[i], false, &tok, warn,
                                       sizeof warn, err, sizeof err),
                         -EINVAL);
    char longtok[CTLAUTH_TOKEN_MAX + 2];
    memset(longtok, 'a', sizeof longtok - 1);
    longtok[sizeof longtok - 1] = '\0';
    assert_int_equal(ctlauth_setup("the API", "127.0.0.1", longtok, false, &tok, warn, sizeof warn,
                                   err, sizeof err),
                     -EINVAL);
    longtok[CTLAUTH_TOKEN_MAX] = '\0';
    assert_int_equal(ctlauth_setup("the API", "127.0.0.1", longtok, false, &tok, warn, sizeof warn,
                                   err, sizeof err),
                     0);
}

static void test_secret_equal(void **state)
{
    assert_true(secret_equal("abc", 3, "abc", 3));
    assert_false(secret_equal("abd", 3, "abc", 3));
    assert_false(secret_equal("ab", 2, "abc", 3));
    assert_false(secret_equal("abcd", 4, "abc", 3));
    assert_false(secret_equal("", 0, "abc", 3));
    /* a guess that is the secret followed by NULs is still a different length */
    assert_false(secret_equal("abc\0", 4, "abc", 3));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loopback),
        cmocka_unit_test(test_setup),
        cmocka_unit_test(test_secret_equal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
