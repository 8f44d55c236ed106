/*
 * vecset.h - sets of dense vectors for vector-search benchmarks: a seeded
 * generated corpus (clustered Gaussian data), the files of ann-benchmarks'
 * corpora (.fvecs, .ivecs) and NumPy's .npy, and the exact k nearest
 * neighbours by a brute-force scan, with recall@k.
 *
 * Generated sets. A struct vecgen describes a corpus: `clusters` centres
 * drawn uniformly in [-1, 1]^dim, each vector a centre (chosen uniformly)
 * plus Gaussian noise of standard deviation `spread` in every coordinate.
 * The centres depend only on seed; vectors of stream s (the corpus is stream
 * 0, queries stream 1) depend on (seed, s, row), so a client and a server
 * that share the spec and seed hold the same vectors, and queries follow the
 * corpus's distribution without being copies of its vectors.
 * A spec reads "gen:N[xD][:C[:S]]": N vectors (1..VECSET_MAX_N), D
 * dimensions (1..VECSET_MAX_DIM, default 64), C clusters (1..65536, default
 * 64; N x D x 4 bytes at most VECSET_MAX_FILE, C x D at most
 * VECSET_MAX_CENTRES), S the spread (0 < S <= 10, default 1: clusters that overlap, so an IVF
 * index's recall climbs gradually with nprobe, as on real embeddings).
 *
 * Files (a bounded read, VECSET_MAX_FILE bytes; every record checked):
 *   .fvecs: records of int32 dim (little-endian) then dim float32;
 *   .ivecs: the same with int32 values (ground truth: neighbour ids);
 *   .npy:   NumPy format 1.0/2.0/3.0, a C-order 2-D array of '<f4' (vectors)
 *           or '<i4' / '<i8' (ids). The header dictionary must be the form
 *           numpy writes: {'descr': '<f4', 'fortran_order': False,
 *           'shape': (N, D), } (keys in that order, spaces optional); it is
 *           matched as that fixed form, not parsed as Python.
 * Every record of a file has the same dim; values must be finite (vectors)
 * or >= -1 (ids). Errors name "file[:record N]: message".
 */
#ifndef TS_LLM_VECSET_H
#define TS_LLM_VECSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define VECSET_MAX_DIM     4096
#define VECSET_MAX_N       (16u << 20)
#define VECSET_MAX_FILE    ((size_t)2 << 30) /* bytes of one vector file */
#define VECSET_MAX_K       1024              /* neighbours per query */
#define VECSET_MAX_CENTRES (16u << 20)       /* CLUSTERS x D floats of a generated corpus */

/* n rows of dim floats, row-major; v owned (vecset_release). */
struct vecset {
    size_t n, dim;
    float *v;
};

/* n rows of k ids (ground truth); v owned (ivecset_release). */
struct ivecset {
    size_t n, k;
    int32_t *v;
};

struct vecgen {
    size_t n, dim, clusters;
    double spread;
    uint64_t seed;
};

/* true when spec starts with "gen:". */
bool vecgen_is_spec(const char *spec);
/* Parses a "gen:..." spec (seed left as given in *g). Returns 0 or -EINVAL with err. */
TS_MUST_CHECK int vecgen_parse(const char *spec, struct vecgen *g, char *err, size_t errlen);
/*
 * Generates n rows of stream `stream` of g's corpus into *out (release it).
 * Returns 0 or -ENOMEM / -EINVAL (n or g out of range).
 */
TS_MUST_CHECK int vecset_generate(const struct vecgen *g, uint64_t stream, size_t n,
                                  struct vecset *out);

/* Reads a .fvecs or .npy file (by its name's ending). Returns 0, -errno, TS_PARSE,
 * TS_TOOBIG or -ENOMEM with err. Blocking: call it at start-up. */
TS_MUST_CHECK int vecset_load(const char *path, struct vecset *out, char *err, size_t errlen);
/* The same from memory; name stands for the file (and its ending picks the format). */
TS_MUST_CHECK int vecset_load_mem(const char *name, const unsigned char *data, size_t len,
                                  struct vecset *out, char *err, size_t errlen);
/* Reads an .ivecs or .npy file of ids. */
TS_MUST_CHECK int ivecset_load(const char *path, struct ivecset *out, char *err, size_t errlen);
TS_MUST_CHECK int ivecset_load_mem(const char *name, const unsigned char *data, size_t len,
                                   struct ivecset *out, char *err, size_t errlen);

void vecset_release(struct vecset *s);
void ivecset_release(struct ivecset *s);

/*
 * Exact k nearest rows of base (squared L2, ties by lower row) for every row
 * of queries, by scanning: ids[i*k + j] (room for queries->n * k). k 1..
 * min(VECSET_MAX_K, base->n); dims must agree. O(nq * n * dim). Returns 0,
 * -EINVAL or -ENOMEM.
 */
TS_MUST_CHECK int vecset_knn_exact(const struct vecset *base, const struct vecset *queries,
                                   size_t k, int32_t *ids);

/*
 * recall@k of one answer: |got[0..ngot) ∩ truth[0..k)| / k, each true id
 * counted once (ids < 0 ignored). k >= 1.
 */
double vec_recall(const int64_t *got, size_t ngot, const int32_t *truth, size_t k);

#endif
