#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "analysis/semantic.h"
#include "base/alloc.h"
#include "llm/embed.h"

static int add(struct semantic *s, const char *text)
{
    return semantic_add(s, text, strlen(text));
}

static struct semantic *make(double threshold, uint32_t max_clusters, uint32_t max_samples)
{
    struct semantic_cfg cfg = {
        .threshold = threshold, .max_clusters = max_clusters, .max_samples = max_samples};
    struct semantic *s = NULL;
    assert_int_equal(semantic_new(&cfg, &s), 0);
    assert_non_null(s);
    return s;
}

/* Four prompt families (templates); variant i changes names and numbers. */
static const char *const names[] = {"Alice",  "Bob", "Carol", "Dmitri", "Eve",
                                    "Fatima", "Gus", "Hiro",  "Ines",   "Jamal"};
static const char *const places[] = {"Paris", "Lagos", "Tokyo", "Lima",  "Oslo",
                                     "Cairo", "Perth", "Quito", "Seoul", "Dakar"};

static void family(char *b, size_t n, int f, int i)
{
    const char *who = names[i % 10], *where = places[(i * 7) % 10];
    int num = 1000 + i * 37;
    switch (f) {
    case 0:
        snprintf(b, n,
                 "Translate the following sentence into French: %s visited %s in %d and loved "
                 "the food.",
                 who, where, num);
        break;
    case 1:
        snprintf(b, n,
                 "Write a Python function that returns the sum of the first %d prime numbers, "
                 "and explain it to %s from %s.",
                 num % 90 + 5, who, where);
        break;
    case 2:
        snprintf(b, n,
                 "Summarize this customer review in one sentence: I bought the blender from %s "
                 "for $%d and %s says it broke after a week.",
                 where, num % 500, who);
        break;
    default:
        snprintf(b, n,
                 "What is the capital of %s? Answer in one word, then give %s a fun fact about "
                 "the year %d.",
                 where, who, num);
    }
}

static void test_one_prompt(void **state)
{
    struct semantic *s = make(0, 0, 0);
    for (int i = 0; i < 100; i++)
        assert_int_equal(add(s, "Explain how a transformer language model works."), 0);
    struct semantic_summary sum;
    semantic_get(s, &sum);
    assert_int_equal(sum.samples, 100);
    assert_int_equal(sum.ignored, 0);
    assert_int_equal(sum.clusters, 1);
    assert_true(sum.entropy_bits == 0);
    assert_true(sum.normalized == 0);
    assert_true(sum.top_share == 1);
    assert_true(sum.threshold == SEMANTIC_DEFAULT_THRESHOLD);
    assert_int_equal(sum.dims, SEMANTIC_DEFAULT_DIMS);
    semantic_free(s);
}

static void test_four_families(void **state)
{
    struct semantic *s = make(0, 0, 0);
    char b[256];
    for (int i = 0; i < 25; i++) {
        for (int f = 0; f < 4; f++) {
            family(b, sizeof(b), f, i);
            assert_int_equal(add(s, b), 0);
        }
    }
    struct semantic_summary sum;
    semantic_get(s, &sum);
    assert_int_equal(sum.samples, 100);
    assert_int_equal(sum.clusters, 4);
    assert_float_equal(sum.entropy_bits, 2.0, 1e-12);
    assert_float_equal(sum.normalized, 2.0 / log2(100), 1e-12);
    assert_float_equal(sum.top_share, 0.25, 1e-12);
    semantic_free(s);

    /* uneven use: 70 / 10 / 10 / 10 */
    s = make(0, 0, 0);
    for (int i = 0; i < 100; i++) {
        int f = i < 70 ? 0 : 1 + (i - 70) / 10;
        family(b, sizeof(b), f, i);
        assert_int_equal(add(s, b), 0);
    }
    semantic_get(s, &sum);
    assert_int_equal(sum.clusters, 4);
    double want = -(0.7 * log2(0.7) + 3 * 0.1 * log2(0.1));
    assert_float_equal(sum.entropy_bits, want, 1e-12);
    assert_float_equal(sum.top_share, 0.7, 1e-12);
    semantic_free(s);
}

/* The threshold is the cosine needed to join: a pair whose cosine lies
 * between two thresholds is one cluster under the lower and two under the
 * higher. */
static void test_threshold(void **state)
{
    const char *a = "What is the capital of France?";
    const char *b = "Which city is the capital of France?";
    float va[SEMANTIC_DEFAULT_DIMS], vb[SEMANTIC_DEFAULT_DIMS];
    assert_int_equal(embed_text(a, strlen(a), va, SEMANTIC_DEFAULT_DIMS), 0);
    assert_int_equal(embed_text(b, strlen(b), vb, SEMANTIC_DEFAULT_DIMS), 0);
    double cos = embed_cosine(va, vb, SEMANTIC_DEFAULT_DIMS);
    assert_true(cos > 0.72 && cos < 0.8); /* measured: 0.762 */

    struct semantic_summary sum;
    double th[] = {cos - 0.01, cos + 0.01, 0.7, 0.8};
    uint32_t want[] = {1, 2, 1, 2};
    for (int k = 0; k < 4; k++) {
        struct semantic *s = make(th[k], 0, 0);
        assert_int_equal(add(s, a), 0);
        assert_int_equal(add(s, b), 0);
        semantic_get(s, &sum);
        assert_int_equal(sum.clusters, want[k]);
        semantic_free(s);
    }

    /* at threshold 1 only identical texts join */
    struct semantic *s = make(1.0, 0, 0);
    assert_int_equal(add(s, a), 0);
    assert_int_equal(add(s, a), 0);
    assert_int_equal(add(s, b), 0);
    semantic_get(s, &sum);
    assert_int_equal(sum.clusters, 2);
    assert_float_equal(sum.top_share, 2.0 / 3, 1e-12);
    semantic_free(s);

    /* unrelated prompts stay apart at the default */
    s = make(0, 0, 0);
    static const char *const unrelated[] = {
        "Write a haiku about autumn leaves.",
        "How do I reverse a list in Python?",
        "Explain how a transformer language model works.",
        "What is the capital of France?",
        "Give me a recipe for banana bread without eggs.",
        "Summarize the plot of Hamlet in three sentences.",
        "What are the symptoms of vitamin D deficiency?",
        "Draft a polite email asking my landlord to fix the heating.",
    };
    for (size_t i = 0; i < 8; i++)
        assert_int_equal(add(s, unrelated[i]), 0);
    semantic_get(s, &sum);
    assert_int_equal(sum.clusters, 8);
    assert_float_equal(sum.entropy_bits, 3.0, 1e-12);
    assert_float_equal(sum.normalized, 1.0, 1e-12);
    semantic_free(s);
}

/* A prompt is compared with the founding prompt of each cluster, not with
 * the members that joined later. */
static void test_leader(void **state)
{
    const char *a = "the quick brown fox jumps over the lazy dog";
    const char *b = "the quick brown fox jumps over the lazy cat today";
    const char *c = "a quick brown fox jumped over the lazy cat today again";
    float va[256], vb[256], vc[256];
    assert_int_equal(embed_text(a, strlen(a), va, 256), 0);
    assert_int_equal(embed_text(b, strlen(b), vb, 256), 0);
    assert_int_equal(embed_text(c, strlen(c), vc, 256), 0);
    double ab = embed_cosine(va, vb, 256), bc = embed_cosine(vb, vc, 256),
           ac = embed_cosine(va, vc, 256);
    /* pick a threshold between a-c and both a-b and b-c */
    double th = (ac + (ab < bc ? ab : bc)) / 2;
    assert_true(ac < th && th < ab && th < bc);
    struct semantic *s = make(th, 0, 0);
    assert_int_equal(add(s, a), 0);
    assert_int_equal(add(s, b), 0); /* joins a */
    assert_int_equal(add(s, c), 0); /* near b, but a leads: a new cluster */
    struct semantic_summary sum;
    semantic_get(s, &sum);
    assert_int_equal(sum.clusters, 2);
    assert_float_equal(sum.top_share, 2.0 / 3, 1e-12);
    semantic_free(s);
}

static void test_caps(void **state)
{
    char b[256];
    /* max_clusters 2: each prompt of the third family joins the cluster
     * whose leader (variant 0 of family 0 or 1) is nearer */
    float l0[256], l1[256], v[256];
    family(b, sizeof(b), 0, 0);
    assert_int_equal(embed_text(b, strlen(b), l0, 256), 0);
    family(b, sizeof(b), 1, 0);
    assert_int_equal(embed_text(b, strlen(b), l1, 256), 0);
    int to0 = 0;
    for (int i = 0; i < 5; i++) {
        family(b, sizeof(b), 2, i);
        assert_int_equal(embed_text(b, strlen(b), v, 256), 0);
        double c0 = embed_cosine(v, l0, 256), c1 = embed_cosine(v, l1, 256);
        assert_true(c0 < 0.7 && c1 < 0.7 && c0 != c1);
        to0 += c0 > c1;
    }
    struct semantic *s = make(0, 2, 0);
    for (int f = 0; f < 3; f++) {
        for (int i = 0; i < 5; i++) {
            family(b, sizeof(b), f, i);
            assert_int_equal(add(s, b), 0);
        }
    }
    struct semantic_summary sum;
    semantic_get(s, &sum);
    assert_int_equal(sum.samples, 15);
    assert_int_equal(sum.clusters, 2);
    double p0 = (5.0 + to0) / 15, p1 = 1 - p0;
    assert_float_equal(sum.top_share, p0 > p1 ? p0 : p1, 1e-12);
    /* normalised by log2(max_clusters) = 1 */
    assert_float_equal(sum.normalized, -(p0 * log2(p0) + p1 * log2(p1)), 1e-12);
    semantic_free(s);

    /* max_samples 3: later prompts are counted, not clustered */
    s = make(0, 0, 3);
    for (int f = 0; f < 4; f++) {
        family(b, sizeof(b), f, 0);
        assert_int_equal(add(s, b), 0);
    }
    assert_int_equal(add(s, "x"), 0);
    semantic_get(s, &sum);
    assert_int_equal(sum.samples, 3);
    assert_int_equal(sum.ignored, 2);
    assert_int_equal(sum.clusters, 3);
    assert_float_equal(sum.normalized, 1.0, 1e-12);
    semantic_free(s);
}

static void test_empty_and_long(void **state)
{
    struct semantic *s = make(0, 0, 0);
    struct semantic_summary sum;
    semantic_get(s, &sum);
    assert_int_equal(sum.samples, 0);
    assert_int_equal(sum.clusters, 0);
    assert_true(sum.entropy_bits == 0 && sum.top_share == 0 && sum.normalized == 0);
    assert_int_equal(semantic_add(s, NULL, 0), 0);
    assert_int_equal(add(s, ""), 0);
    assert_int_equal(add(s, "hello"), 0);
    assert_int_equal(semantic_add(s, NULL, 0), 0);
    assert_int_equal(semantic_add(s, NULL, 3), -EINVAL);
    semantic_get(s, &sum);
    assert_int_equal(sum.samples, 4);
    assert_int_equal(sum.clusters, 2);
    assert_float_equal(sum.top_share, 0.75, 1e-12);
    semantic_free(s);

    /* texts past max_text are seen by head and tail: two texts that differ
     * only in the middle are one kind of prompt, whatever the middle is */
    char t1[2000], t2[2000];
    memset(t1, 'a', sizeof(t1));
    memset(t2, 'a', sizeof(t2));
    for (size_t i = 300; i < 1700; i++) {
        t1[i] = (char)('a' + i % 26);
        t2[i] = (char)('a' + (i * 7) % 23);
    }
    /* a multi-byte character across the cut points */
    memcpy(t1 + 127, "\xe2\x82\xac", 3);
    memcpy(t2 + 127, "\xe2\x82\xac", 3);
    memcpy(t1 + 2000 - 129, "\xe2\x82\xac", 3);
    memcpy(t2 + 2000 - 129, "\xe2\x82\xac", 3);
    s = make(1.0, 0, 0);
    assert_int_equal(semantic_add(s, t1, sizeof(t1)), 0);
    assert_int_equal(semantic_add(s, t2, sizeof(t2)), 0);
    semantic_get(s, &sum);
    assert_int_equal(sum.clusters, 1);
    semantic_free(s);
    /* with the whole texts embedded they differ */
    struct semantic_cfg cfg = {.threshold = 1.0, .max_text = 4096};
    assert_int_equal(semantic_new(&cfg, &s), 0);
    assert_int_equal(semantic_add(s, t1, sizeof(t1)), 0);
    assert_int_equal(semantic_add(s, t2, sizeof(t2)), 0);
    semantic_get(s, &sum);
    assert_int_equal(sum.clusters, 2);
    semantic_free(s);
}

static void test_config(void **state)
{
    struct semantic *s = (struct semantic *)1;
    struct semantic_cfg bad[] = {
        {.dims = EMBED_MAX_DIMS + 1},
        {.threshold = 1.5},
        {.threshold = -0.2},
        {.threshold = NAN},
        {.max_clusters = SEMANTIC_MAX_CLUSTERS + 1},
        {.max_samples = SEMANTIC_MAX_SAMPLES + 1},
        {.max_text = 1},
        {.max_text = SEMANTIC_MAX_TEXT + 1},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(semantic_new(&bad[i], &s), -EINVAL);
        assert_null(s);
    }
    assert_int_equal(semantic_new(NULL, &s), 0);
    semantic_free(s);
    semantic_free(NULL);

    struct semantic_cfg cfg = {.dims = 64, .threshold = 0.9};
    assert_int_equal(semantic_new(&cfg, &s), 0);
    assert_int_equal(add(s, "a"), 0);
    struct semantic_summary sum;
    semantic_get(s, &sum);
    assert_int_equal(sum.dims, 64);
    assert_true(sum.threshold == 0.9);
    semantic_free(s);
}

static void test_json(void **state)
{
    struct semantic_summary sum = {.samples = 100,
                                   .ignored = 5,
                                   .clusters = 4,
                                   .entropy_bits = 2,
                                   .normalized = 0.25,
                                   .top_share = 0.5,
                                   .threshold = 0.7,
                                   .dims = 256};
    json_t *j = semantic_summary_json(&sum);
    assert_non_null(j);
    char *text = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(text,
                        "{\"clusters\":4,\"dims\":256,\"entropy_bits\":2.0,\"ignored\":5,"
                        "\"normalized\":0.25,\"samples\":100,\"threshold\":0.69999999999999996,"
                        "\"top_share\":0.5}");
    free(text);
    json_decref(j);
}

/* Every allocation failure is -ENOMEM and leaves the mix as it was. */
static void test_alloc_failures(void **state)
{
    char b[256];
    for (long n = 0; n < 8; n++) {
        struct semantic *s = NULL;
        ts_alloc_fail_after(n);
        int rc = semantic_new(NULL, &s);
        if (rc == 0) {
            for (int f = 0; f < 4 && rc == 0; f++) {
                family(b, sizeof(b), f, 1);
                rc = add(s, b);
            }
        }
        ts_alloc_fail_after(-1);
        assert_true(rc == 0 || rc == -ENOMEM);
        if (s) {
            struct semantic_summary sum;
            semantic_get(s, &sum);
            assert_true(rc != 0 || sum.clusters == 4);
            semantic_free(s);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_prompt),     cmocka_unit_test(test_four_families),
        cmocka_unit_test(test_threshold),      cmocka_unit_test(test_leader),
        cmocka_unit_test(test_caps),           cmocka_unit_test(test_empty_and_long),
        cmocka_unit_test(test_config),         cmocka_unit_test(test_json),
        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests_name("semantic", tests, NULL, NULL);
}
