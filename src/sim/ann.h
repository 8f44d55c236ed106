/*
 * ann.h - a real approximate nearest-neighbour index: FAISS (Debian's
 * libfaiss-dev, a static C++ library) behind this C interface. ann_faiss.cpp
 * is the project's only C++ file; without FAISS at build time ann_none.c
 * answers every call with -ENOTSUP and ann_available() is false.
 *
 * An index is described by FAISS's own factory string ("IVF256,Flat",
 * "IVF256,PQ16", "HNSW32", "Flat", "OPQ16,IVF256,PQ16", ...), built over n
 * vectors of dim floats (row-major) with the L2 metric: trained on the first
 * min(n, train_max) vectors when the type needs training, then every vector
 * added with id = its row. Building is blocking and may use every core
 * (OpenMP); do it at start-up.
 *
 * Searching takes the breadth per call: nprobe (inverted lists visited, IVF
 * indexes) and ef_search (HNSW's candidate list); 0 keeps the index's default
 * (FAISS's: nprobe 1, efSearch 16) or what ann_index_set_defaults() set.
 * An "IVFn,PQm" index is built without polysemous training (minutes of
 * simulated annealing that only Hamming pre-filtering, unused here, needs). The
 * IVF's nprobe travels with the call (FAISS SearchParametersIVF), so one
 * built index may be searched by several threads at once; FAISS 1.7.3's
 * HNSW ignores per-call parameters, so an HNSW search sets efSearch on the
 * index under a lock (HNSW searches of one index run one at a time). A search runs on the
 * calling thread only (OpenMP is held to one thread for it), so its time and
 * CPU are the caller's.
 */
#ifndef TS_SIM_ANN_H
#define TS_SIM_ANN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define ANN_MAX_FACTORY 128  /* bytes of a factory string */
#define ANN_MAX_K       1024 /* neighbours per query */
#define ANN_MAX_NPROBE  65536
#define ANN_MAX_EF      65536

#ifdef __cplusplus
extern "C" {
#endif

struct ann_index;

enum ann_kind {
    ANN_KIND_OTHER = 0,
    ANN_KIND_FLAT, /* exact */
    ANN_KIND_IVF,  /* takes nprobe */
    ANN_KIND_HNSW, /* takes ef_search */
};

/* true when this build has FAISS. */
bool ann_available(void);

/*
 * Builds an index of the n x dim vectors x (borrowed during the call). n >= 1,
 * dim 1..65536, train_max 0 means n. Returns 0 and *out; -EINVAL with a
 * message in err (factory string refused by FAISS, too few vectors to train,
 * ...); -ENOMEM; -ENOTSUP without FAISS.
 */
TS_MUST_CHECK int ann_index_build(const char *factory, size_t dim, const float *x, size_t n,
                                  size_t train_max, struct ann_index **out, char *err,
                                  size_t errlen);

/* Default breadth for searches that pass 0 (0 leaves FAISS's default). */
void ann_index_set_defaults(struct ann_index *ix, uint32_t nprobe, uint32_t ef_search);

/*
 * The k (1..ANN_MAX_K) nearest of each of the nq query vectors q (nq x dim):
 * ids[i*k + j] is the row of neighbour j of query i (nearest first, -1 when
 * fewer than k were found), dist[i*k + j] its squared L2 distance. nprobe
 * (0..ANN_MAX_NPROBE) and ef_search (0..ANN_MAX_EF) as above; one that the
 * index does not take is ignored. Returns 0, -EINVAL (with err) or -ENOMEM.
 */
TS_MUST_CHECK int ann_index_search(const struct ann_index *ix, const float *q, size_t nq, size_t k,
                                   uint32_t nprobe, uint32_t ef_search, float *dist, int64_t *ids,
                                   char *err, size_t errlen);

/* NULL is a no-op. */
void ann_index_free(struct ann_index *ix);

enum ann_kind ann_index_kind(const struct ann_index *ix);
size_t ann_index_count(const struct ann_index *ix);
size_t ann_index_dim(const struct ann_index *ix);
/* The IVF's number of lists (0 for other kinds). */
size_t ann_index_nlist(const struct ann_index *ix);
/* The factory string it was built from (owned by ix). */
const char *ann_index_factory(const struct ann_index *ix);

#ifdef __cplusplus
}
#endif

#endif
