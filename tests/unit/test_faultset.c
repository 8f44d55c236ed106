#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "chaos/faultset.h"

static void spec(const char *js, struct fault *f)
{
    char err[512];
    json_t *j = json_loads(js, 0, NULL);
    assert_non_null(j);
    int rc = fault_parse_json(j, f, err, sizeof err);
    json_decref(j);
    if (rc)
        fail_msg("%s: %s", js, err);
}

static void test_add_remove(void **state)
{
    (void)state;
    struct faultset fs;
    struct fault f;
    faultset_init(&fs, 1);
    spec("{\"name\":\"a\",\"type\":\"http_abort\"}", &f);
    assert_int_equal(faultset_add(&fs, &f, 5), 0);
    assert_int_equal(faultset_add(&fs, &f, 5), -EEXIST);
    spec("{\"name\":\"b\",\"type\":\"sse_drop_done\"}", &f);
    assert_int_equal(faultset_add(&fs, &f, 5), 0);
    assert_int_equal(fs.n, 2);
    assert_int_equal(faultset_get(&fs, "a")->added_ns, 5);

    /* a response holds "a" while it is replaced and removed */
    struct fault *held[4];
    size_t n = faultset_roll(&fs, NULL, 1u << FAULT_HTTP, 10, held, 4);
    assert_int_equal(n, 1);
    assert_ptr_equal(held[0], faultset_get(&fs, "a"));
    fault_count_injection(held[0]);
    spec("{\"name\":\"a\",\"type\":\"http_abort\",\"status\":502}", &f);
    assert_int_equal(faultset_replace(&fs, &f, 20), 0);
    struct fault *now_a = faultset_get(&fs, "a");
    assert_int_equal(now_a->params.status, 502);
    assert_int_equal(now_a->added_ns, 20);
    assert_int_equal(atomic_load(&now_a->injected), 1); /* counters kept */
    assert_int_equal(held[0]->params.status, 503);      /* the old one lives on */
    fault_unref(held[0]);
    spec("{\"name\":\"zz\",\"type\":\"http_abort\"}", &f);
    assert_int_equal(faultset_replace(&fs, &f, 20), -ENOENT);
    assert_int_equal(faultset_remove(&fs, "a"), 0);
    assert_int_equal(faultset_remove(&fs, "a"), -ENOENT);
    assert_int_equal(fs.n, 1);
    assert_string_equal(fs.v[0]->name, "b");
    faultset_reset(&fs);
    assert_int_equal(fs.n, 0);
    faultset_release(&fs);
}

static void test_match(void **state)
{
    (void)state;
    struct fault f;
    struct http_header hs[] = {
        {"X-Tenant-Id", "acme", 11, 4},
        {"x-debug", "1", 7, 1},
    };
    struct fault_request r = {"POST", "/v1/chat/completions", hs, 2, "gpt-x"};
    spec("{\"name\":\"a\",\"type\":\"http_abort\"}", &f);
    assert_true(fault_matches(&f, &r));
    spec("{\"name\":\"a\",\"type\":\"http_abort\",\"match\":{\"path\":\"/v1/chat\"}}", &f);
    assert_true(fault_matches(&f, &r));
    spec("{\"name\":\"a\",\"type\":\"http_abort\",\"match\":{\"path\":\"/v1/emb\"}}", &f);
    assert_false(fault_matches(&f, &r));
    spec("{\"name\":\"a\",\"type\":\"http_abort\",\"match\":{\"path\":\"/v1/*/completions\"}}", &f);
    assert_true(fault_matches(&f, &r));
    spec("{\"name\":\"a\",\"type\":\"http_abort\",\"match\":{\"path\":\"/v1/*\"}}", &f);
    assert_true(fault_matches(&f, &r)); /* '*' also matches '/' (no FNM_PATHNAME) */
    spec("{\"name\":\"a\",\"type\":\"http_abort\",\"match\":{\"method\":\"get\"}}", &f);
    assert_false(fault_matches(&f, &r));
    spec("{\"name\":\"a\",\"type\":\"http_abort\",\"match\":{\"method\":\"post\"}}", &f);
    assert_true(fault_matches(&f, &r));
    spec("{\"name\":\"a\",\"type\":\"http_abort\",\"match\":{\"header\":{\"X-DEBUG\":\"*\"}}}", &f);
    assert_true(fault_matches(&f, &r));
    spec("{\"name\":\"a\",\"type\":\"http_abort\",\"match\":{\"header\":{\"x-debug\":\"2\"}}}", &f);
    assert_false(fault_matches(&f, &r));
    spec("{\"name\":\"a\",\"type\":\"http_abort\",\"match\":{\"model\":\"gpt-x\"}}", &f);
    assert_true(fault_matches(&f, &r));
    spec("{\"name\":\"a\",\"type\":\"http_abort\",\"match\":{\"model\":\"gpt-y\"}}", &f);
    assert_false(fault_matches(&f, &r));
    spec("{\"name\":\"a\",\"type\":\"http_abort\",\"match\":{\"tenant\":\"acme\"}}", &f);
    assert_true(fault_matches(&f, &r));
    spec("{\"name\":\"a\",\"type\":\"http_abort\",\"match\":{\"tenant\":\"acme\","
         "\"tenant_header\":\"x-org\"}}",
         &f);
    assert_false(fault_matches(&f, &r));
    assert_true(fault_matches(&f, NULL)); /* connection level: selectors ignored */
}

/* 1,000 rolls at p = 0.3 give 300 +- 45 (3 sigma is 43.5), deterministically per seed. */
static void test_probability(void **state)
{
    (void)state;
    struct fault f;
    size_t first = 0;
    for (uint64_t seed = 1; seed <= 5; seed++) {
        for (int again = 0; again < 2; again++) {
            struct faultset fs;
            faultset_init(&fs, seed);
            spec("{\"name\":\"p\",\"type\":\"http_abort\",\"probability\":0.3}", &f);
            assert_int_equal(faultset_add(&fs, &f, 0), 0);
            size_t hits = 0;
            for (int i = 0; i < 1000; i++) {
                struct fault *out[2];
                size_t n = faultset_roll(&fs, NULL, 1u << FAULT_HTTP, 1, out, 2);
                for (size_t k = 0; k < n; k++)
                    fault_unref(out[k]);
                hits += n;
            }
            assert_in_range(hits, 255, 345);
            assert_int_equal(atomic_load(&faultset_get(&fs, "p")->matched), 1000);
            if (again == 0)
                first = hits;
            else
                assert_int_equal(hits, first); /* same seed, same outcome */
            faultset_release(&fs);
        }
    }
}

static void test_window_and_family(void **state)
{
    (void)state;
    struct faultset fs;
    struct fault f;
    struct fault *out[4];
    faultset_init(&fs, 3);
    spec("{\"name\":\"w\",\"type\":\"http_abort\",\"start\":\"1s\",\"duration\":\"2s\"}", &f);
    assert_int_equal(faultset_add(&fs, &f, 1000000000ull), 0);
    spec("{\"name\":\"t\",\"type\":\"tcp_limit\",\"bytes\":10}", &f);
    assert_int_equal(faultset_add(&fs, &f, 0), 0);
    assert_int_equal(faultset_roll(&fs, NULL, 1u << FAULT_HTTP, 1999999999ull, out, 4), 0);
    assert_int_equal(faultset_roll(&fs, NULL, 1u << FAULT_HTTP, 2000000000ull, out, 4), 1);
    fault_unref(out[0]);
    assert_int_equal(faultset_roll(&fs, NULL, 1u << FAULT_HTTP, 4000000000ull, out, 4), 0);
    assert_int_equal(faultset_roll(&fs, NULL, 1u << FAULT_TCP, 4000000000ull, out, 4), 1);
    assert_string_equal(out[0]->name, "t");
    fault_unref(out[0]);
    spec("{\"name\":\"z\",\"type\":\"http_abort\",\"probability\":0}", &f);
    assert_int_equal(faultset_add(&fs, &f, 0), 0);
    assert_int_equal(faultset_roll(&fs, NULL, 1u << FAULT_HTTP, 4000000000ull, out, 4), 0);
    assert_int_equal(atomic_load(&faultset_get(&fs, "z")->matched), 1);
    assert_false(faultset_wants_model(&fs));
    spec("{\"name\":\"m\",\"type\":\"http_abort\",\"match\":{\"model\":\"q\"}}", &f);
    assert_int_equal(faultset_add(&fs, &f, 0), 0);
    assert_true(faultset_wants_model(&fs));
    faultset_release(&fs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_remove),
        cmocka_unit_test(test_match),
        cmocka_unit_test(test_probability),
        cmocka_unit_test(test_window_and_family),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
