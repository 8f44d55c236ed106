#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "llm/sign.h"

#define N 6
static char ids[N][SIGN_ID_MAX];
static const char *data[N] = {"{\"a\":0}", "{\"a\":1}", "{\"a\":2}", "{\"a\":3}", "[DONE]", "x"};

static void sign_all(const char *key)
{
    struct chunk_signer s;
    assert_int_equal(chunk_signer_init(&s, key, strlen(key)), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(chunk_sign(&s, data[i], strlen(data[i]), ids[i]), 0);
}

static enum chunk_verdict check(struct chunk_verifier *v, int i)
{
    return chunk_verify(v, ids[i], strlen(ids[i]), data[i], strlen(data[i]));
}

static void test_in_order_all_ok(void **state)
{
    sign_all("k3y");
    assert_memory_equal(ids[0],
                        "0.0000000000000000000000000000000000000000000000000000000000000000.", 67);
    struct chunk_verifier v;
    assert_int_equal(chunk_verifier_init(&v, "k3y", 3), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(check(&v, i), CHUNK_OK);
    assert_int_equal(v.ok, N);
    assert_int_equal(v.forged + v.gaps + v.duplicates + v.reorders + v.unsigned_events, 0);
}

static void test_gap_duplicate_reorder(void **state)
{
    sign_all("k3y");
    struct chunk_verifier v;
    assert_int_equal(chunk_verifier_init(&v, "k3y", 3), 0);
    assert_int_equal(check(&v, 0), CHUNK_OK);
    assert_int_equal(check(&v, 2), CHUNK_GAP); /* 1 is missing */
    assert_int_equal(v.missing, 1);
    assert_int_equal(check(&v, 1), CHUNK_REORDER); /* ...it came late */
    assert_int_equal(v.missing, 0);
    assert_int_equal(check(&v, 1), CHUNK_DUPLICATE);
    assert_int_equal(check(&v, 3), CHUNK_OK);
    assert_int_equal(check(&v, 5), CHUNK_GAP);
    assert_int_equal(v.missing, 1);
    assert_int_equal(v.ok, 2);
}

static void test_forged_and_unsigned(void **state)
{
    sign_all("k3y");
    struct chunk_verifier v;
    assert_int_equal(chunk_verifier_init(&v, "k3y", 3), 0);
    assert_int_equal(chunk_verify(&v, ids[0], strlen(ids[0]), "{\"a\":9}", 7), CHUNK_FORGED);
    assert_int_equal(chunk_verify(&v, "", 0, data[0], strlen(data[0])), CHUNK_UNSIGNED);
    assert_int_equal(chunk_verify(&v, "12", 2, data[0], strlen(data[0])), CHUNK_UNSIGNED);
    struct chunk_verifier other;
    assert_int_equal(chunk_verifier_init(&other, "other", 5), 0);
    assert_int_equal(check(&other, 0), CHUNK_FORGED);
    assert_int_equal(v.forged, 1);
    assert_int_equal(v.unsigned_events, 2);
    assert_int_equal(chunk_verifier_init(&other, "", 0), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_order_all_ok),
        cmocka_unit_test(test_gap_duplicate_reorder),
        cmocka_unit_test(test_forged_and_unsigned),
    };
    return cmocka_run_group_tests_name("sign", tests, NULL, NULL);
}
