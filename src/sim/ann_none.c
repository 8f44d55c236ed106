/*
 * ann_none.c - sim/ann.h in a build without FAISS: nothing is available, and
 * every call says so (-ENOTSUP), so callers keep their modelled path.
 */
#include "sim/ann.h"

#include <stdio.h>

bool ann_available(void)
{
    return false;
}

int ann_index_build(const char *factory, size_t dim, const float *x, size_t n, size_t train_max,
                    struct ann_index **out, char *err, size_t errlen)
{
    if (err && errlen)
        snprintf(err, errlen, "index: this build has no FAISS (install libfaiss-dev, rebuild)");
    return -ENOTSUP;
}

void ann_index_set_defaults(struct ann_index *ix, uint32_t nprobe, uint32_t ef_search)
{
}

int ann_index_search(const struct ann_index *ix, const float *q, size_t nq, size_t k,
                     uint32_t nprobe, uint32_t ef_search, float *dist, int64_t *ids, char *err,
                     size_t errlen)
{
    return -ENOTSUP;
}

void ann_index_free(struct ann_index *ix)
{
}

enum ann_kind ann_index_kind(const struct ann_index *ix)
{
    return ANN_KIND_OTHER;
}

size_t ann_index_count(const struct ann_index *ix)
{
    return 0;
}

size_t ann_index_dim(const struct ann_index *ix)
{
    return 0;
}

size_t ann_index_nlist(const struct ann_index *ix)
{
    return 0;
}

const char *ann_index_factory(const struct ann_index *ix)
{
    return "";
}
