/*
 * Fuzz the vector file readers (llm/vecset.h). The first byte picks the
 * format: .fvecs, .ivecs, .npy as vectors, .npy as ids, or a gen: spec. A
 * file that loads must hold what its header says, with finite values or ids
 * of at least -1; a refused one must say why.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "llm/vecset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_vectors(const char *name, const uint8_t *d, size_t n)
{
    struct vecset s;
    char err[256] = "";
    int rc = vecset_load_mem(name, d, n, &s, err, sizeof(err));
    if (rc) {
        if (s.v || !err[0])
            abort();
        return;
    }
    if (s.n < 1 || s.dim < 1 || s.dim > VECSET_MAX_DIM || s.n * s.dim * 4 > n)
        abort();
    for (size_t i = 0; i < s.n * s.dim; i++)
        if (!isfinite(s.v[i]))
            abort();
    vecset_release(&s);
}

static void check_ids(const char *name, const uint8_t *d, size_t n)
{
    struct ivecset s;
    char err[256] = "";
    int rc = ivecset_load_mem(name, d, n, &s, err, sizeof(err));
    if (rc) {
        if (s.v || !err[0])
            abort();
        return;
    }
    if (s.n < 1 || s.k < 1 || s.k > VECSET_MAX_DIM)
        abort();
    for (size_t i = 0; i < s.n * s.k; i++)
        if (s.v[i] < -1)
            abort();
    ivecset_release(&s);
}

static void check_spec(const uint8_t *d, size_t n)
{
    char spec[64];
    if (n >= sizeof(spec))
        n = sizeof(spec) - 1;
    memcpy(spec, d, n);
    spec[n] = 0;
    struct vecgen g = {.seed = 1};
    char err[256] = "";
    if (vecgen_parse(spec, &g, err, sizeof(err))) {
        if (!err[0])
            abort();
        return;
    }
    if (g.n < 1 || g.dim < 1 || g.dim > VECSET_MAX_DIM || g.clusters < 1 || !(g.spread > 0))
        abort();
    struct vecset s;
    if (vecset_generate(&g, 1, g.n < 4 ? g.n : 4, &s) == 0)
        vecset_release(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    switch (data[0] % 5) {
    case 0:
        check_vectors("f.fvecs", data + 1, size - 1);
        break;
    case 1:
        check_ids("f.ivecs", data + 1, size - 1);
        break;
    case 2:
        check_vectors("f.npy", data + 1, size - 1);
        break;
    case 3:
        check_ids("f.npy", data + 1, size - 1);
        break;
    default:
        check_spec(data + 1, size - 1);
    }
    return 0;
}
