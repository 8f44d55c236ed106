/*
 * ann_faiss.cpp - sim/ann.h over FAISS: the only C++ in tokenstorm, kept to
 * the calls the simulator needs (factory, train, add, search with per-call
 * parameters, free). Every FAISS exception stops here and becomes an error
 * code with its text; nothing C++ crosses the interface.
 */
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <string>

#include <omp.h>

#include <faiss/IVFlib.h>
#include <faiss/Index.h>
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVF.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/index_factory.h>
#include <faiss/impl/FaissException.h>

#include "sim/ann.h"

struct ann_index {
    faiss::Index *index;
    faiss::IndexIVF *ivf;   /* the IVF inside index, or NULL */
    faiss::IndexHNSW *hnsw; /* index itself when it is an HNSW, or NULL */
    enum ann_kind kind;
    /* FAISS 1.7.3's IndexHNSW::search ignores SearchParametersHNSW: efSearch
     * is set on the index under this lock for each HNSW search */
    std::mutex hnsw_lock;
    uint32_t nprobe, ef_search; /* defaults for calls passing 0 */
    char factory[ANN_MAX_FACTORY + 1];
};

static void set_err(char *err, size_t errlen, const char *what, const char *detail)
{
    if (err && errlen)
        snprintf(err, errlen, "%s%s", what, detail ? detail : "");
}

/* FAISS's messages carry "Error in ... at file:line: "; keep what follows. */
static const char *short_what(const char *w)
{
    const char *p = strstr(w, ": ");
    const char *at = strstr(w, " at ");
    return (at && p && p > at) ? p + 2 : w;
}

extern "C" bool ann_available(void)
{
    return true;
}

static void classify(struct ann_index *ix)
{
    ix->ivf = faiss::ivflib::try_extract_index_ivf(ix->index);
    ix->hnsw = dynamic_cast<faiss::IndexHNSW *>(ix->index);
    if (ix->ivf)
        ix->kind = ANN_KIND_IVF;
    else if (ix->hnsw)
        ix->kind = ANN_KIND_HNSW;
    else if (dynamic_cast<faiss::IndexFlat *>(ix->index))
        ix->kind = ANN_KIND_FLAT;
    else
        ix->kind = ANN_KIND_OTHER;
}

extern "C" int ann_index_build(const char *factory, size_t dim, const float *x, size_t n,
                               size_t train_max, struct ann_index **out, char *err, size_t errlen)
{
    if (!factory || !*factory || strlen(factory) > ANN_MAX_FACTORY || dim < 1 || dim > 65536 ||
        n < 1 || !x) {
        set_err(err, errlen, "index: expected a factory string of 1..128 bytes and vectors", NULL);
        return -EINVAL;
    }
    struct ann_index *ix = new (std::nothrow) ann_index();
    if (!ix)
        return -ENOMEM;
    snprintf(ix->factory, sizeof(ix->factory), "%s", factory);
    try {
        ix->index = faiss::index_factory((int)dim, factory, faiss::METRIC_L2);
        /* polysemous training (minutes of simulated annealing) only serves
         * Hamming pre-filtering, which nothing here turns on */
        faiss::IndexIVFPQ *pq =
            dynamic_cast<faiss::IndexIVFPQ *>(faiss::ivflib::try_extract_index_ivf(ix->index));
        if (pq)
            pq->do_polysemous_training = false;
        if (!ix->index->is_trained)
            ix->index->train((faiss::Index::idx_t)(train_max && train_max < n ? train_max : n), x);
        ix->index->add((faiss::Index::idx_t)n, x);
    } catch (const std::bad_alloc &) {
        delete ix->index;
        delete ix;
        return -ENOMEM;
    } catch (const std::exception &e) {
        set_err(err, errlen, "index: FAISS: ", short_what(e.what()));
        delete ix->index;
        delete ix;
        return -EINVAL;
    }
    classify(ix);
    *out = ix;
    return 0;
}

extern "C" void ann_index_set_defaults(struct ann_index *ix, uint32_t nprobe, uint32_t ef_search)
{
    ix->nprobe = nprobe;
    ix->ef_search = ef_search;
}

extern "C" int ann_index_search(const struct ann_index *ix, const float *q, size_t nq, size_t k,
                                uint32_t nprobe, uint32_t ef_search, float *dist, int64_t *ids,
                                char *err, size_t errlen)
{
    if (k < 1 || k > ANN_MAX_K || nprobe > ANN_MAX_NPROBE || ef_search > ANN_MAX_EF) {
        set_err(err, errlen, "search: k, nprobe or ef_search out of range", NULL);
        return -EINVAL;
    }
    if (nq == 0)
        return 0;
    nprobe = nprobe ? nprobe : ix->nprobe;
    ef_search = ef_search ? ef_search : ix->ef_search;
    faiss::SearchParametersIVF pivf;
    const faiss::SearchParameters *params = nullptr;
    if (ix->kind == ANN_KIND_IVF) {
        pivf.nprobe = nprobe ? nprobe : ix->ivf->nprobe;
        params = &pivf;
    }
    std::unique_lock<std::mutex> hold(const_cast<struct ann_index *>(ix)->hnsw_lock,
                                      std::defer_lock);
    if (ix->kind == ANN_KIND_HNSW) {
        hold.lock();
        ix->hnsw->hnsw.efSearch = ef_search ? (int)ef_search : 16;
    }
    /* one query per call is the server's case: keep it on this thread */
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    int rc = 0;
    try {
        ix->index->search((faiss::Index::idx_t)nq, q, (faiss::Index::idx_t)k, dist,
                          (faiss::Index::idx_t *)ids, params);
    } catch (const std::bad_alloc &) {
        rc = -ENOMEM;
    } catch (const std::exception &e) {
        set_err(err, errlen, "search: FAISS: ", short_what(e.what()));
        rc = -EINVAL;
    }
    omp_set_num_threads(threads);
    return rc;
}

extern "C" void ann_index_free(struct ann_index *ix)
{
    if (!ix)
        return;
    delete ix->index;
    delete ix;
}

extern "C" enum ann_kind ann_index_kind(const struct ann_index *ix)
{
    return ix->kind;
}

extern "C" size_t ann_index_count(const struct ann_index *ix)
{
    return (size_t)ix->index->ntotal;
}

extern "C" size_t ann_index_dim(const struct ann_index *ix)
{
    return (size_t)ix->index->d;
}

extern "C" size_t ann_index_nlist(const struct ann_index *ix)
{
    return ix->ivf ? ix->ivf->nlist : 0;
}

extern "C" const char *ann_index_factory(const struct ann_index *ix)
{
    return ix->factory;
}
