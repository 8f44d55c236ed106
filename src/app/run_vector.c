/*
 * run_vector.c - queries and ground truth of a vector-search run (run_vector.h).
 */
#include "app/run_vector.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "sim/ann.h"

void run_vector_opts_init(struct run_vector_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->nprobe = -1;
    o->ef_search = -1;
}

/* A spec or a file into *out; gen:N of a file corpus is refused. */
static int load_set(const char *what, const char *spec, const struct vecgen *base, uint64_t stream,
                    struct vecset *out, char *err, size_t errlen)
{
    char e2[300] = "";
    int rc;
    if (vecgen_is_spec(spec)) {
        struct vecgen g = {.seed = base ? base->seed : 0};
        rc = vecgen_parse(spec, &g, e2, sizeof(e2));
        if (!rc && base && stream) {
            /* queries follow the corpus's generator: only their count is theirs */
            size_t n = g.n;
            g = *base;
            g.n = n;
        } else if (!rc && !base && stream) {
            ts_errf(e2, sizeof(e2), "'gen:N' queries need a generated --vector-data");
            rc = -EINVAL;
        }
        if (!rc && (rc = vecset_generate(&g, stream, g.n, out)))
            ts_errf(e2, sizeof(e2), "%s", ts_strerror(rc));
    } else {
        rc = vecset_load(spec, out, e2, sizeof(e2));
    }
    if (rc)
        ts_errf(err, errlen, "--%s: %s", what, e2);
    return rc;
}

/* The exact k nearest of every query: FAISS's flat index when built in, else a scan. */
static int exact_truth(const struct vecset *base, struct run_vector *rv, size_t k, char *err,
                       size_t errlen)
{
    size_t nq = rv->queries.n;
    rv->truth.v = ts_malloc(nq * k * sizeof(int32_t));
    if (!rv->truth.v)
        return -ENOMEM;
    rv->truth.n = nq;
    rv->truth.k = k;
    uint64_t t0 = ts_now_ns();
    int rc;
    struct ann_index *flat = NULL;
    if (ann_available() &&
        !ann_index_build("Flat", base->dim, base->v, base->n, 0, &flat, err, errlen)) {
        int64_t *ids = ts_malloc(nq * k * sizeof(*ids));
        float *d = ts_malloc(nq * k * sizeof(*d));
        rc = ids && d ? ann_index_search(flat, rv->queries.v, nq, k, 0, 0, d, ids, err, errlen)
                      : -ENOMEM;
        for (size_t i = 0; !rc && i < nq * k; i++)
            rv->truth.v[i] = (int32_t)ids[i];
        ts_free(ids);
        ts_free(d);
        ann_index_free(flat);
        rv->truth_method = "faiss-flat";
    } else {
        rc = vecset_knn_exact(base, &rv->queries, k, rv->truth.v);
        rv->truth_method = "scan";
    }
    rv->truth_s = (double)(ts_now_ns() - t0) / 1e9;
    if (rc)
        ts_errf(err, errlen, "--vector-truth: the exact search failed: %s", ts_strerror(rc));
    return rc;
}

static int load_truth(const struct run_vector_opts *o, struct run_vector *rv, size_t k, char *err,
                      size_t errlen)
{
    char e2[300] = "";
    int rc = ivecset_load(o->truth, &rv->truth, e2, sizeof(e2));
    if (rc) {
        ts_errf(err, errlen, "--vector-truth: %s", e2);
        return rc;
    }
    if (rv->truth.n != rv->queries.n || rv->truth.k < k) {
        ts_errf(err, errlen,
                "--vector-truth %s: %zu rows of %zu ids; the run needs one row per query (%zu) "
                "of at least k = %zu ids",
                o->truth, rv->truth.n, rv->truth.k, rv->queries.n, k);
        return -EINVAL;
    }
    rv->truth_method = "file";
    return 0;
}

int run_vector_prepare(const struct run_vector_opts *o, struct run_vector *rv, char *err,
                       size_t errlen)
{
    memset(rv, 0, sizeof(*rv));
    const char *data = o->data ? o->data : RUN_VECTOR_DEFAULT_DATA;
    size_t k = o->k ? o->k : 10;
    struct vecgen g = {.seed = o->seed};
    bool gen = vecgen_is_spec(data);
    struct vecset base = {0};
    int rc = gen ? vecgen_parse(data, &g, err, errlen) : 0;
    if (rc) {
        char e2[300];
        snprintf(e2, sizeof(e2), "%s", err);
        ts_errf(err, errlen, "--vector-data: %s", e2);
        return rc;
    }
    rc = load_set("vector-queries", o->queries ? o->queries : RUN_VECTOR_DEFAULT_QUERIES,
                  gen ? &g : NULL, 1, &rv->queries, err, errlen);
    if (!rc && o->truth) {
        rc = load_truth(o, rv, k, err, errlen);
    } else if (!rc) {
        rc = load_set("vector-data", data, NULL, 0, &base, err, errlen);
        if (!rc && (base.dim != rv->queries.dim || k > base.n)) {
            ts_errf(err, errlen,
                    "--vector-queries: %zu dimensions against a corpus of %zu x %zu (k %zu)",
                    rv->queries.dim, base.n, base.dim, k);
            rc = -EINVAL;
        }
        if (!rc)
            rc = exact_truth(&base, rv, k, err, errlen);
        vecset_release(&base);
    }
    if (rc)
        run_vector_release(rv);
    return rc;
}

void run_vector_release(struct run_vector *rv)
{
    vecset_release(&rv->queries);
    ivecset_release(&rv->truth);
}

int run_vector_write_truth(const struct run_vector *rv, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        int rc = -errno;
        ts_errf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return rc;
    }
    int32_t k = (int32_t)rv->truth.k;
    bool ok = true;
    for (size_t i = 0; ok && i < rv->truth.n; i++)
        ok = fwrite(&k, 4, 1, f) == 1 &&
             fwrite(rv->truth.v + i * rv->truth.k, 4, rv->truth.k, f) == rv->truth.k;
    if (fclose(f) || !ok) {
        ts_errf(err, errlen, "cannot write %s", path);
        return -EIO;
    }
    return 0;
}

int run_vector_overrides(const struct run_vector_opts *o, json_t **ov)
{
    if (o->nprobe < 0 && o->ef_search < 0)
        return 0;
    if (!*ov && !(*ov = json_object()))
        return -ENOMEM;
    int rc = 0;
    if (o->nprobe >= 0 && !json_object_get(*ov, "nprobe"))
        rc |= json_object_set_new(*ov, "nprobe", json_integer(o->nprobe));
    if (o->ef_search >= 0 && !json_object_get(*ov, "ef_search"))
        rc |= json_object_set_new(*ov, "ef_search", json_integer(o->ef_search));
    return rc ? -ENOMEM : 0;
}

json_t *run_vector_config_json(const struct run_vector_opts *o, const struct run_vector *rv)
{
    return json_pack("{s:s,s:s?,s:s,s:s?,s:I,s:I,s:I,s:I,s:I,s:s,s:f}", "data",
                     o->data ? o->data : RUN_VECTOR_DEFAULT_DATA, "index", o->index, "queries",
                     o->queries ? o->queries : RUN_VECTOR_DEFAULT_QUERIES, "truth", o->truth, "k",
                     (json_int_t)(o->k ? o->k : 10), "nprobe", (json_int_t)o->nprobe, "ef_search",
                     (json_int_t)o->ef_search, "seed", (json_int_t)o->seed, "query_count",
                     (json_int_t)rv->queries.n, "truth_method",
                     rv->truth_method ? rv->truth_method : "none", "truth_seconds", rv->truth_s);
}
