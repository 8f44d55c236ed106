#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "llm/vecset.c"

static void test_gen_spec(void **state)
{
    struct vecgen g = {.seed = 7};
    char err[256];
    assert_int_equal(vecgen_parse("gen:20000x64", &g, err, sizeof(err)), 0);
    assert_int_equal(g.n, 20000);
    assert_int_equal(g.dim, 64);
    assert_int_equal(g.clusters, 64);
    assert_int_equal(g.seed, 7);
    assert_int_equal(vecgen_parse("gen:100x8:4:0.5", &g, err, sizeof(err)), 0);
    assert_int_equal(g.clusters, 4);
    assert_true(fabs(g.spread - 0.5) < 1e-12);
    assert_int_equal(vecgen_parse("gen:100", &g, err, sizeof(err)), 0);
    assert_int_equal(g.dim, 64);
    const char *bad[] = {"gen:",         "gen:0",         "gen:10x0", "gen:10x5000", "gen:10x8:0",
                         "gen:10x8:2:0", "gen:10x8:2:11", "gen:10y",  "file.fvecs",  "gen:-1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = 0;
        assert_int_equal(vecgen_parse(bad[i], &g, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "expected gen:N"));
    }
}

static void test_generate_deterministic(void **state)
{
    struct vecgen g = {.n = 500, .dim = 16, .clusters = 8, .spread = 0.1, .seed = 3};
    struct vecset a, b, q;
    assert_int_equal(vecset_generate(&g, 0, 500, &a), 0);
    assert_int_equal(vecset_generate(&g, 0, 200, &b), 0);
    assert_int_equal(vecset_generate(&g, 1, 200, &q), 0);
    /* a prefix of the same stream is the same rows; another stream differs */
    assert_memory_equal(a.v, b.v, 200 * 16 * sizeof(float));
    assert_true(memcmp(a.v, q.v, 16 * sizeof(float)) != 0);
    /* clustered: every vector lies near one of 8 centres (spread 0.1 in 16-d) */
    size_t near = 0;
    for (size_t i = 1; i < 500; i++) {
        float d = 0;
        for (size_t k = 0; k < 16; k++)
            d += (a.v[k] - a.v[i * 16 + k]) * (a.v[k] - a.v[i * 16 + k]);
        near += d < 16 * 0.1 * 0.1 * 4;
    }
    assert_true(near > 500 / 8 / 2 && near < 500 / 8 * 2);
    g.seed = 4;
    vecset_release(&b);
    assert_int_equal(vecset_generate(&g, 0, 200, &b), 0);
    assert_true(memcmp(a.v, b.v, 16 * sizeof(float)) != 0);
    vecset_release(&a);
    vecset_release(&b);
    vecset_release(&q);
}

/* The obvious O(n log n)-per-query exact search the scan must agree with. */
static void naive_knn(const struct vecset *base, const float *x, size_t k, int32_t *out)
{
    size_t n = base->n;
    double *d = malloc(n * sizeof(double));
    char *used = calloc(n, 1);
    for (size_t i = 0; i < n; i++) {
        d[i] = 0;
        for (size_t j = 0; j < base->dim; j++) {
            double t = (double)x[j] - base->v[i * base->dim + j];
            d[i] += t * t;
        }
    }
    for (size_t r = 0; r < k; r++) {
        size_t best = n;
        for (size_t i = 0; i < n; i++)
            if (!used[i] && (best == n || d[i] < d[best]))
                best = i;
        used[best] = 1;
        out[r] = (int32_t)best;
    }
    free(d);
    free(used);
}

static void test_knn_exact(void **state)
{
    struct vecgen g = {.n = 2000, .dim = 24, .clusters = 16, .spread = 0.3, .seed = 1};
    struct vecset base, qs;
    assert_int_equal(vecset_generate(&g, 0, 2000, &base), 0);
    assert_int_equal(vecset_generate(&g, 1, 20, &qs), 0);
    int32_t ids[20 * 10], want[10];
    assert_int_equal(vecset_knn_exact(&base, &qs, 10, ids), 0);
    for (size_t q = 0; q < 20; q++) {
        naive_knn(&base, qs.v + q * 24, 10, want);
        assert_memory_equal(ids + q * 10, want, sizeof(want));
    }
    /* a base row is its own nearest neighbour */
    struct vecset one = {.n = 1, .dim = 24, .v = base.v + 77 * 24};
    assert_int_equal(vecset_knn_exact(&base, &one, 1, ids), 0);
    assert_int_equal(ids[0], 77);
    assert_int_equal(vecset_knn_exact(&base, &qs, 0, ids), -EINVAL);
    assert_int_equal(vecset_knn_exact(&base, &qs, 2001, ids), -EINVAL);
    qs.dim = 23;
    assert_int_equal(vecset_knn_exact(&base, &qs, 1, ids), -EINVAL);
    qs.dim = 24;
    vecset_release(&base);
    vecset_release(&qs);
}

static void test_recall(void **state)
{
    int32_t truth[4] = {1, 2, 3, 4};
    int64_t got[4] = {4, 9, 1, 1};
    assert_true(fabs(vec_recall(got, 4, truth, 4) - 0.5) < 1e-12);
    int64_t all[5] = {3, 2, 1, 4, -1};
    assert_true(fabs(vec_recall(all, 5, truth, 4) - 1.0) < 1e-12);
    assert_true(fabs(vec_recall(all, 0, truth, 4)) < 1e-12);
}

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = v & 255, p[1] = v >> 8 & 255, p[2] = v >> 16 & 255, p[3] = v >> 24;
}

static void test_fvecs(void **state)
{
    unsigned char f[2 * (4 + 3 * 4)];
    float vals[6] = {1, 2, 3, -4, 5.5f, 6};
    for (int r = 0; r < 2; r++) {
        put32(f + r * 16, 3);
        memcpy(f + r * 16 + 4, vals + r * 3, 12);
    }
    struct vecset s;
    char err[256];
    assert_int_equal(vecset_load_mem("a.fvecs", f, sizeof(f), &s, err, sizeof(err)), 0);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.dim, 3);
    assert_memory_equal(s.v, vals, sizeof(vals));
    vecset_release(&s);
    /* truncated, mixed dims, zero dim, NaN, wrong ending */
    assert_int_equal(vecset_load_mem("a.fvecs", f, sizeof(f) - 2, &s, err, sizeof(err)), TS_PARSE);
    assert_non_null(strstr(err, "a.fvecs: "));
    put32(f + 16, 2);
    assert_int_equal(vecset_load_mem("a.fvecs", f, sizeof(f), &s, err, sizeof(err)), TS_PARSE);
    put32(f + 16, 3);
    float nan = NAN;
    memcpy(f + 16 + 8, &nan, 4);
    assert_int_equal(vecset_load_mem("a.fvecs", f, sizeof(f), &s, err, sizeof(err)), TS_PARSE);
    assert_non_null(strstr(err, "record 2: value 2 is not finite"));
    put32(f, 0);
    assert_int_equal(vecset_load_mem("a.fvecs", f, sizeof(f), &s, err, sizeof(err)), TS_PARSE);
    assert_int_equal(vecset_load_mem("a.bin", f, sizeof(f), &s, err, sizeof(err)), -EINVAL);
    assert_null(s.v);
}

static void test_ivecs(void **state)
{
    unsigned char f[2 * (4 + 2 * 4)];
    int32_t vals[4] = {5, 7, 0, -1};
    for (int r = 0; r < 2; r++) {
        put32(f + r * 12, 2);
        memcpy(f + r * 12 + 4, vals + r * 2, 8);
    }
    struct ivecset s;
    char err[256];
    assert_int_equal(ivecset_load_mem("gt.ivecs", f, sizeof(f), &s, err, sizeof(err)), 0);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.k, 2);
    assert_memory_equal(s.v, vals, sizeof(vals));
    ivecset_release(&s);
    put32(f + 12 + 4 + 4, (uint32_t)-2);
    assert_int_equal(ivecset_load_mem("gt.ivecs", f, sizeof(f), &s, err, sizeof(err)), TS_PARSE);
    assert_non_null(strstr(err, "id -2"));
}

/* An .npy file as numpy.save writes it (format 1.0, header padded to 64). */
static size_t make_npy(unsigned char *out, const char *descr, size_t r, size_t c, const void *data,
                       size_t esz)
{
    char hdr[128];
    int n = snprintf(hdr, sizeof(hdr),
                     "{'descr': '%s', 'fortran_order': False, 'shape': (%zu, %zu), }", descr, r, c);
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (unsigned char)((size_t)n + 1 + pad);
    out[9] = 0;
    memcpy(out + 10, hdr, (size_t)n);
    memset(out + 10 + n, ' ', pad);
    out[10 + n + pad] = '\n';
    memcpy(out + total + pad, data, r * c * esz);
    return total + pad + r * c * esz;
}

static void test_npy(void **state)
{
    unsigned char buf[512];
    float vals[6] = {1, 2, 3, 4, 5, 6};
    size_t len = make_npy(buf, "<f4", 2, 3, vals, 4);
    struct vecset s;
    char err[256];
    assert_int_equal(vecset_load_mem("x.npy", buf, len, &s, err, sizeof(err)), 0);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.dim, 3);
    assert_memory_equal(s.v, vals, sizeof(vals));
    vecset_release(&s);
    /* size disagrees with the shape */
    assert_int_equal(vecset_load_mem("x.npy", buf, len - 4, &s, err, sizeof(err)), TS_PARSE);
    assert_non_null(strstr(err, "shape (2, 3)"));
    /* ids as int64 */
    int64_t ids[4] = {3, 1, 0, 2};
    struct ivecset iv;
    len = make_npy(buf, "<i8", 2, 2, ids, 8);
    assert_int_equal(ivecset_load_mem("gt.npy", buf, len, &iv, err, sizeof(err)), 0);
    assert_int_equal(iv.v[0], 3);
    assert_int_equal(iv.v[3], 2);
    ivecset_release(&iv);
    /* float data where ids are wanted, and the other way round */
    assert_int_equal(vecset_load_mem("gt.npy", buf, len, &s, err, sizeof(err)), TS_PARSE);
    len = make_npy(buf, "<f8", 2, 3, vals, 4);
    assert_int_equal(vecset_load_mem("x.npy", buf, len, &s, err, sizeof(err)), TS_PARSE);
    assert_non_null(strstr(err, "header: expected"));
    memcpy(buf, "\x93NUMPZ", 6);
    assert_int_equal(vecset_load_mem("x.npy", buf, len, &s, err, sizeof(err)), TS_PARSE);
}

static void test_load_file(void **state)
{
    char path[] = "/tmp/ts_vecset_XXXXXX.fvecs";
    int fd = mkstemps(path, 6);
    assert_true(fd >= 0);
    unsigned char f[4 + 8];
    float v[2] = {0.5f, -0.25f};
    put32(f, 2);
    memcpy(f + 4, v, 8);
    assert_int_equal(write(fd, f, sizeof(f)), (ssize_t)sizeof(f));
    close(fd);
    struct vecset s;
    char err[256];
    assert_int_equal(vecset_load(path, &s, err, sizeof(err)), 0);
    assert_int_equal(s.n, 1);
    vecset_release(&s);
    unlink(path);
    assert_true(vecset_load(path, &s, err, sizeof(err)) < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gen_spec),  cmocka_unit_test(test_generate_deterministic),
        cmocka_unit_test(test_knn_exact), cmocka_unit_test(test_recall),
        cmocka_unit_test(test_fvecs),     cmocka_unit_test(test_ivecs),
        cmocka_unit_test(test_npy),       cmocka_unit_test(test_load_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
