/*
 * sim/ann.h against the real FAISS (skipped in a build without it): the
 * flat index equals the brute-force scan, IVF recall rises with nprobe to
 * exactness at nprobe = nlist, HNSW recall rises with efSearch, and FAISS's
 * refusals come back as errors with its message.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "llm/vecset.h"
#include "sim/ann.h"

#define NB  5000
#define NQ  100
#define DIM 32
#define K   10

static struct vecset base, queries;
static int32_t truth[NQ * K];

static int setup(void **state)
{
    struct vecgen g = {.n = NB, .dim = DIM, .clusters = 64, .spread = 1.0, .seed = 11};
    if (vecset_generate(&g, 0, NB, &base) || vecset_generate(&g, 1, NQ, &queries) ||
        vecset_knn_exact(&base, &queries, K, truth))
        return -1;
    return 0;
}

static int teardown(void **state)
{
    vecset_release(&base);
    vecset_release(&queries);
    return 0;
}

/* Mean recall@K of ix over the queries at this breadth. */
static double mean_recall(const struct ann_index *ix, uint32_t nprobe, uint32_t ef)
{
    static int64_t ids[NQ * K];
    static float dist[NQ * K];
    char err[256];
    assert_int_equal(
        ann_index_search(ix, queries.v, NQ, K, nprobe, ef, dist, ids, err, sizeof(err)), 0);
    double sum = 0;
    for (size_t q = 0; q < NQ; q++)
        sum += vec_recall(ids + q * K, K, truth + q * K, K);
    return sum / NQ;
}

static bool no_faiss(void)
{
    if (ann_available())
        return false;
    char err[128];
    struct ann_index *ix = NULL;
    assert_int_equal(ann_index_build("Flat", DIM, base.v, NB, 0, &ix, err, sizeof(err)), -ENOTSUP);
    return true;
}

static void test_flat_is_exact(void **state)
{
    if (no_faiss())
        skip();
    struct ann_index *ix;
    char err[256];
    assert_int_equal(ann_index_build("Flat", DIM, base.v, NB, 0, &ix, err, sizeof(err)), 0);
    assert_int_equal(ann_index_kind(ix), ANN_KIND_FLAT);
    assert_int_equal(ann_index_count(ix), NB);
    assert_int_equal(ann_index_dim(ix), DIM);
    assert_true(mean_recall(ix, 0, 0) == 1.0);
    ann_index_free(ix);
}

static void test_ivf_recall_rises_with_nprobe(void **state)
{
    if (no_faiss())
        skip();
    struct ann_index *ix;
    char err[256];
    assert_int_equal(ann_index_build("IVF64,Flat", DIM, base.v, NB, 0, &ix, err, sizeof(err)), 0);
    assert_int_equal(ann_index_kind(ix), ANN_KIND_IVF);
    assert_int_equal(ann_index_nlist(ix), 64);
    assert_string_equal(ann_index_factory(ix), "IVF64,Flat");
    double r1 = mean_recall(ix, 1, 0), r4 = mean_recall(ix, 4, 0), r16 = mean_recall(ix, 16, 0);
    double r64 = mean_recall(ix, 64, 0);
    print_message("IVF64,Flat recall@10: nprobe 1 %.3f, 4 %.3f, 16 %.3f, 64 %.3f\n", r1, r4, r16,
                  r64);
    assert_true(r1 < r4 && r4 < r16 && r16 <= r64);
    assert_true(r1 < 0.9);
    assert_true(r64 == 1.0); /* every list visited: exact */
    /* the default breadth is FAISS's nprobe 1 until set */
    assert_true(mean_recall(ix, 0, 0) == r1);
    ann_index_set_defaults(ix, 16, 0);
    assert_true(mean_recall(ix, 0, 0) == r16);
    ann_index_free(ix);
}

static void test_ivfpq_and_hnsw(void **state)
{
    if (no_faiss())
        skip();
    struct ann_index *ix;
    char err[256];
    assert_int_equal(ann_index_build("IVF64,PQ8", DIM, base.v, NB, 0, &ix, err, sizeof(err)), 0);
    assert_int_equal(ann_index_kind(ix), ANN_KIND_IVF);
    double pq = mean_recall(ix, 64, 0);
    assert_true(pq > 0.05 && pq < 1.0); /* compressed codes: never exact */
    ann_index_free(ix);
    assert_int_equal(ann_index_build("HNSW16", DIM, base.v, NB, 0, &ix, err, sizeof(err)), 0);
    assert_int_equal(ann_index_kind(ix), ANN_KIND_HNSW);
    double lo = mean_recall(ix, 0, 10), hi = mean_recall(ix, 0, 256);
    assert_true(mean_recall(ix, 0, 10) == lo); /* the breadth of each call, not the last one */
    print_message("HNSW16 recall@10: efSearch 10 %.3f, 256 %.3f\n", lo, hi);
    assert_true(lo < hi);
    assert_true(hi > 0.95);
    ann_index_free(ix);
}

static void test_errors(void **state)
{
    if (no_faiss())
        skip();
    struct ann_index *ix = NULL;
    char err[256] = "";
    assert_int_equal(ann_index_build("NoSuchIndex7", DIM, base.v, NB, 0, &ix, err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "FAISS"));
    assert_null(ix);
    /* fewer training vectors than lists */
    assert_int_equal(ann_index_build("IVF256,Flat", DIM, base.v, 100, 0, &ix, err, sizeof(err)),
                     -EINVAL);
    assert_int_equal(ann_index_build("", DIM, base.v, NB, 0, &ix, err, sizeof(err)), -EINVAL);
    assert_int_equal(ann_index_build("Flat", DIM, base.v, NB, 0, &ix, err, sizeof(err)), 0);
    int64_t ids[1];
    float d[1];
    assert_int_equal(ann_index_search(ix, queries.v, 1, 0, 0, 0, d, ids, err, sizeof(err)),
                     -EINVAL);
    assert_int_equal(
        ann_index_search(ix, queries.v, 1, ANN_MAX_K + 1, 0, 0, d, ids, err, sizeof(err)), -EINVAL);
    ann_index_free(ix);
    ann_index_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flat_is_exact),
        cmocka_unit_test(test_ivf_recall_rises_with_nprobe),
        cmocka_unit_test(test_ivfpq_and_hnsw),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
