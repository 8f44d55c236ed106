#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "../../src/chaos/chain.c"

#define S 1000000000ull

static uint64_t body_key(const char *body)
{
    bool ex;
    uint64_t k = chain_key("POST", "/v1/chat/completions", body, strlen(body), NULL, &ex);
    assert_false(ex);
    return k;
}

/* A client that retries a 429 twice (the openai SDK with maxRetries 2): three
 * attempts, one distinct request, both retries triggered by 429. */
static void test_retries_by_body(void **state)
{
    (void)state;
    struct chain c;
    assert_int_equal(chain_init(&c, 10 * S), 0);
    uint64_t k = body_key("{\"a\":1}");
    assert_false(chain_attempt(&c, k, false, 1 * S));
    chain_outcome(&c, k, 429, 1 * S, 1 * S + 1000);
    assert_true(chain_attempt(&c, k, false, 2 * S + 1000)); /* 1 s later: on time */
    chain_outcome(&c, k, 429, 1 * S, 2 * S + 2000);
    assert_true(chain_attempt(&c, k, false, 2 * S + 500000000)); /* 0.5 s: early */
    chain_outcome(&c, k, 429, 0, 3 * S);
    assert_int_equal(c.attempts, 3);
    assert_int_equal(c.distinct, 1);
    assert_int_equal(c.retries[429], 2);
    assert_int_equal(c.early, 1);
    assert_int_equal(c.gap.count, 2);
    /* a different body is another request */
    assert_false(chain_attempt(&c, body_key("{\"a\":2}"), false, 3 * S));
    assert_int_equal(c.distinct, 2);
    chain_release(&c);
}

/* The same body after a success, while in flight, or after the window is a
 * new request; with an idempotency key the same key always links. */
static void test_not_retries(void **state)
{
    (void)state;
    struct chain c;
    assert_int_equal(chain_init(&c, 10 * S), 0);
    uint64_t k = body_key("same prompt");
    assert_false(chain_attempt(&c, k, false, 1 * S));
    assert_false(chain_attempt(&c, k, false, 1 * S)); /* concurrent: two users */
    chain_outcome(&c, k, 200, 0, 2 * S);
    assert_false(chain_attempt(&c, k, false, 3 * S)); /* after a success */
    chain_outcome(&c, k, 503, 0, 4 * S);
    assert_false(chain_attempt(&c, k, false, 15 * S)); /* past the window */
    assert_int_equal(c.distinct, 4);
    assert_int_equal(c.attempts, 4);

    bool ex;
    uint64_t ik = chain_key("POST", "/x", "a", 1, "key-1", &ex);
    assert_true(ex);
    assert_int_not_equal(ik, chain_key("POST", "/x", "a", 1, "key-2", &ex));
    assert_false(chain_attempt(&c, ik, true, 20 * S));
    assert_true(chain_attempt(&c, ik, true, 20 * S + 1)); /* in flight: a hedge */
    chain_outcome(&c, ik, 200, 0, 21 * S);
    assert_true(chain_attempt(&c, ik, true, 22 * S)); /* the answer was lost */
    assert_int_equal(c.retries[CHAIN_IN_FLIGHT], 1);
    assert_int_equal(c.retries[200], 1);
    chain_release(&c);
}

/* Metrics and JSON: the factor overall and per trigger, and the series. */
static void test_report(void **state)
{
    (void)state;
    struct chain c;
    struct buf b;
    assert_int_equal(chain_init(&c, 0), 0);
    for (int i = 0; i < 4; i++) {
        char body[16];
        snprintf(body, sizeof body, "r%d", i);
        uint64_t k = body_key(body);
        assert_false(chain_attempt(&c, k, false, 10 * S));
        chain_outcome(&c, k, i < 2 ? 503 : CHAIN_CLIENT_CLOSED, 0, 10 * S);
        assert_true(chain_attempt(&c, k, false, 11 * S));
    }
    chain_orphan(&c, 1000, 20, S / 2, 12 * S);
    buf_init(&b, 1 << 20);
    assert_int_equal(chain_metrics(&c, &b), 0);
    const char *t = buf_cstr(&b);
    assert_non_null(strstr(t, "tokenstorm_proxy_retry_amplification 2\n"));
    assert_non_null(strstr(t, "tokenstorm_proxy_retry_amplification{trigger=\"503\"} 1.5\n"));
    assert_non_null(
        strstr(t, "tokenstorm_proxy_retry_amplification{trigger=\"client_closed\"} 1.5\n"));
    assert_non_null(strstr(t, "tokenstorm_proxy_orphaned_tokens_total 20\n"));
    buf_release(&b);

    json_t *j = chain_json(&c, 11 * S);
    assert_non_null(j);
    json_t *series = json_object_get(j, "series");
    assert_int_equal(json_array_size(series), 2); /* the retries' bucket and the orphan's */
    json_t *b0 = json_array_get(series, 0);
    assert_int_equal(json_integer_value(json_object_get(b0, "attempts")), 4);
    assert_int_equal(json_integer_value(json_object_get(b0, "distinct")), 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(b0, "retries"), "503")), 2);
    json_t *tot = json_object_get(j, "totals");
    assert_true(json_real_value(json_object_get(tot, "amplification")) == 2.0);
    json_decref(j);
    chain_reset(&c);
    assert_int_equal(c.attempts, 0);
    chain_release(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retries_by_body),
        cmocka_unit_test(test_not_retries),
        cmocka_unit_test(test_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
