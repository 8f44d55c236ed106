/*
 * run_vector.c - queries and ground truth of a vector-search run (run_vector.h).
 */
#include "app/run_vector.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/file.h"
#include "llm/jsonptr.h"
#include "sim/ann.h"

void run_vector_opts_init(struct run_vector_opts *o)
{
    memset(o, 0, sizeof(*o));
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

/* "text:FILE" queries: embedded by the target. */
static int embed_queries(const struct run_vector_opts *o, struct run_vector *rv, char *err,
                         size_t errlen)
{
    char e2[400] = "";
    const char *path = o->queries + strlen(VECTOR_EMBED_PREFIX);
    int rc = -EINVAL;
    if (!o->embed)
        snprintf(e2, sizeof(e2),
                 "text queries need a target with an embeddings endpoint (not a PostgreSQL "
                 "target or --vector-api template)");
    else
        rc = vector_embed_file(path, o->embed, &rv->queries, &rv->embed_s, &rv->embed_requests, e2,
                               sizeof(e2));
    if (!rc && !(rv->embed_url = ts_strdup(o->embed->url)))
        rc = -ENOMEM;
    if (rc)
        ts_errf(err, errlen, "--vector-queries: %s", e2);
    return rc;
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
    if (vector_embed_is_spec(o->queries))
        rc = embed_queries(o, rv, err, errlen);
    else
        rc = load_set("vector-queries", o->queries ? o->queries : RUN_VECTOR_DEFAULT_QUERIES,
                      gen ? &g : NULL, 1, &rv->queries, err, errlen);
    if (!rc && o->truth) {
        rc = load_truth(o, rv, k, err, errlen);
    } else if (!rc) {
        rc = load_set("vector-data", data, NULL, 0, &base, err, errlen);
        if (!rc && (base.dim != rv->queries.dim || k > base.n)) {
            ts_errf(err, errlen,
                    "--vector-queries: %zu dimensions%s against a corpus of %zu x %zu (k %zu)",
                    rv->queries.dim, rv->embed_requests ? " (the target's embeddings)" : "", base.n,
                    base.dim, k);
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
    ts_free(rv->api.path);
    ts_free(rv->api.prefix);
    ts_free(rv->api.suffix);
    ts_free(rv->api.results);
    ts_free(rv->api.id);
    memset(&rv->api, 0, sizeof(rv->api));
    ts_free(rv->embed_url);
    rv->embed_url = NULL;
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
    if (!o->has_nprobe && !o->has_ef_search)
        return 0;
    if (!*ov && !(*ov = json_object()))
        return -ENOMEM;
    int rc = 0;
    if (o->has_nprobe && !json_object_get(*ov, "nprobe"))
        rc |= json_object_set_new(*ov, "nprobe", json_integer(o->nprobe));
    if (o->has_ef_search && !json_object_get(*ov, "ef_search"))
        rc |= json_object_set_new(*ov, "ef_search", json_integer(o->ef_search));
    return rc ? -ENOMEM : 0;
}

json_t *run_vector_config_json(const struct run_vector_opts *o, const struct run_vector *rv)
{
    json_t *c =
        json_pack("{s:s,s:s?,s:s,s:s?,s:I,s:o,s:o,s:I,s:I,s:s,s:f}", "data",
                  o->data ? o->data : RUN_VECTOR_DEFAULT_DATA, "index", o->index, "queries",
                  o->queries ? o->queries : RUN_VECTOR_DEFAULT_QUERIES, "truth", o->truth, "k",
                  (json_int_t)(o->k ? o->k : 10), "nprobe",
                  o->has_nprobe ? json_integer(o->nprobe) : json_null(), "ef_search",
                  o->has_ef_search ? json_integer(o->ef_search) : json_null(), "seed",
                  (json_int_t)o->seed, "query_count", (json_int_t)rv->queries.n, "truth_method",
                  rv->truth_method ? rv->truth_method : "none", "truth_seconds", rv->truth_s);
    if (c && rv->embed_requests)
        json_object_set_new(c, "embedded",
                            json_pack("{s:s?,s:I,s:I,s:f}", "url", rv->embed_url, "texts",
                                      (json_int_t)rv->queries.n, "requests",
                                      (json_int_t)rv->embed_requests, "seconds", rv->embed_s));
    if (c && o->api)
        json_object_set_new(c, "api",
                            json_pack("{s:s,s:s?,s:s?,s:s?}", "template", o->api, "path",
                                      rv->api.path, "results", rv->api.results, "id", rv->api.id));
    return c;
}

/* ---- template mode (--vector-api) ---------------------------------------- */

static const struct {
    const char *name, *doc;
} presets[] = {
    {"tokenstorm", "{\"path\":\"/v1/vectors/search\",\"body\":{\"vector\":\"{{vector}}\","
                   "\"k\":\"{{k}}\",\"nprobe\":\"{{nprobe}}\",\"ef_search\":\"{{ef_search}}\"},"
                   "\"results\":\"/data\",\"id\":\"/id\"}"},
    {"qdrant", "{\"path\":\"/collections/{{collection}}/points/search\",\"body\":{\"vector\":"
               "\"{{vector}}\",\"limit\":\"{{k}}\",\"params\":{\"hnsw_ef\":\"{{ef_search}}\","
               "\"exact\":false}},\"results\":\"/result\",\"id\":\"/id\"}"},
    {"milvus", "{\"path\":\"/v2/vectordb/entities/search\",\"body\":{\"collectionName\":"
               "\"{{collection}}\",\"data\":[\"{{vector}}\"],\"limit\":\"{{k}}\","
               "\"searchParams\":{\"params\":{\"nprobe\":\"{{nprobe}}\",\"ef\":"
               "\"{{ef_search}}\"}}},\"results\":\"/data\",\"id\":\"/id\"}"},
    {"chroma", "{\"path\":\"/api/v1/collections/{{collection}}/query\",\"body\":{"
               "\"query_embeddings\":[\"{{vector}}\"],\"n_results\":\"{{k}}\",\"include\":"
               "[\"distances\"]},\"results\":\"/ids/0\",\"id\":\"\"}"},
};

#define VEC_MARK "{{vector}}"

/* Replaces the placeholder strings of v (in place, recursively); counts "{{vector}}". */
static int fill_placeholders(json_t *v, const struct run_vector_opts *o, int *vectors)
{
    const char *key;
    json_t *child;
    size_t i;
    if (json_is_object(v)) {
        json_object_foreach(v, key, child)
        {
            if (json_is_string(child)) {
                json_t *r = NULL;
                const char *s = json_string_value(child);
                if (!strcmp(s, "{{k}}"))
                    r = json_integer(o->k ? o->k : 10);
                else if (!strcmp(s, "{{nprobe}}"))
                    r = o->has_nprobe ? json_integer(o->nprobe) : json_null();
                else if (!strcmp(s, "{{ef_search}}"))
                    r = o->has_ef_search ? json_integer(o->ef_search) : json_null();
                else if (!strcmp(s, "{{collection}}"))
                    r = json_string(o->collection ? o->collection : "bench");
                *vectors += !strcmp(s, VEC_MARK);
                if (r && json_object_set_new(v, key, r))
                    return -ENOMEM;
            } else if (fill_placeholders(child, o, vectors)) {
                return -ENOMEM;
            }
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, child)
        {
            if (json_is_string(child) && !strcmp(json_string_value(child), "{{collection}}")) {
                if (json_array_set_new(v, i, json_string(o->collection ? o->collection : "bench")))
                    return -ENOMEM;
            } else if (json_is_string(child)) {
                *vectors += !strcmp(json_string_value(child), VEC_MARK);
            } else if (fill_placeholders(child, o, vectors)) {
                return -ENOMEM;
            }
        }
    }
    return 0;
}

/* path with "{{collection}}" replaced, into rv->api.path. */
static int api_path(const struct run_vector_opts *o, const char *path, struct run_vector *rv)
{
    const char *coll = o->collection ? o->collection : "bench";
    const char *at = strstr(path, "{{collection}}");
    size_t n = strlen(path) + (at ? strlen(coll) : 0) + 1;
    rv->api.path = ts_malloc(n);
    if (!rv->api.path)
        return -ENOMEM;
    if (at)
        snprintf(rv->api.path, n, "%.*s%s%s", (int)(at - path), path, coll,
                 at + strlen("{{collection}}"));
    else
        snprintf(rv->api.path, n, "%s", path);
    return 0;
}

/* The body around its one "{{vector}}", from the filled template. */
static int api_body(const json_t *body, struct run_vector *rv, char *err, size_t errlen)
{
    char *text = json_dumps(body, JSON_COMPACT);
    if (!text)
        return -ENOMEM;
    char *at = strstr(text, "\"" VEC_MARK "\"");
    int rc = 0;
    if (!at) {
        ts_errf(err, errlen, "the body must hold the string \"{{vector}}\" once");
        rc = -EINVAL;
    } else {
        rv->api.prefix = ts_strndup(text, (size_t)(at - text));
        rv->api.suffix = ts_strdup(at + strlen(VEC_MARK) + 2);
        rc = rv->api.prefix && rv->api.suffix ? 0 : -ENOMEM;
    }
    free(text);
    return rc;
}

/* A template document (a preset's or a file's) into rv->api. */
static int api_from_doc(const struct run_vector_opts *o, json_t *doc, struct run_vector *rv,
                        char *err, size_t errlen)
{
    const char *path = json_string_value(json_object_get(doc, "path"));
    const char *res = json_string_value(json_object_get(doc, "results"));
    const char *id = json_string_value(json_object_get(doc, "id"));
    json_t *body = json_object_get(doc, "body");
    int vectors = 0;
    if (!path || path[0] != '/' || strlen(path) > 1024 || !res || !id ||
        !jsonptr_valid(res, strlen(res)) || !jsonptr_valid(id, strlen(id)) ||
        !(json_is_object(body) || json_is_array(body))) {
        ts_errf(err, errlen,
                "expected {\"path\": \"/...\", \"body\": {...}, \"results\": JSON pointer, "
                "\"id\": JSON pointer}");
        return -EINVAL;
    }
    int rc = fill_placeholders(body, o, &vectors);
    if (!rc && vectors != 1) {
        ts_errf(err, errlen, "the body must hold the string \"{{vector}}\" once, not %d times",
                vectors);
        return -EINVAL;
    }
    if (!rc)
        rc = api_path(o, path, rv);
    if (!rc)
        rc = api_body(body, rv, err, errlen);
    if (!rc) {
        rv->api.results = ts_strdup(res);
        rv->api.id = ts_strdup(id);
        rc = rv->api.results && rv->api.id ? 0 : -ENOMEM;
    }
    return rc;
}

int run_vector_api_load(const struct run_vector_opts *o, struct run_vector *rv, char *err,
                        size_t errlen)
{
    if (!o->api)
        return 0;
    json_error_t jerr;
    json_t *doc = NULL;
    char e2[300] = "";
    if (o->api[0] == '@') {
        char *data = NULL;
        size_t len = 0;
        int rc = file_read_all(o->api + 1, RUN_VECTOR_MAX_TEMPLATE, &data, &len, e2, sizeof(e2));
        if (rc) {
            ts_errf(err, errlen, "--vector-api: %s", e2);
            return rc;
        }
        doc = json_loadb(data, len, 0, &jerr);
        ts_free(data);
        if (!doc) {
            ts_errf(err, errlen, "--vector-api %s:%d:%d: %s", o->api + 1, jerr.line, jerr.column,
                    jerr.text);
            return TS_PARSE;
        }
    } else {
        for (size_t i = 0; !doc && i < sizeof(presets) / sizeof(presets[0]); i++)
            if (!strcmp(o->api, presets[i].name))
                doc = json_loads(presets[i].doc, 0, NULL);
        if (!doc) {
            ts_errf(err, errlen,
                    "--vector-api: expected tokenstorm, qdrant, milvus, chroma or @FILE, got "
                    "'%.80s'",
                    o->api);
            return -EINVAL;
        }
    }
    int rc = api_from_doc(o, doc, rv, e2, sizeof(e2));
    json_decref(doc);
    if (rc)
        ts_errf(err, errlen, "--vector-api %.200s: %s", o->api, e2);
    return rc;
}

int run_vector_api_url(const struct run_vector *rv, const char *target, char *url, size_t n)
{
    const char *scheme = strstr(target, "://");
    if (!scheme || !rv->api.path)
        return -EINVAL;
    const char *slash = strchr(scheme + 3, '/');
    size_t root = slash ? (size_t)(slash - target) : strlen(target);
    int w = snprintf(url, n, "%.*s%s", (int)root, target, rv->api.path);
    return w < 0 || (size_t)w >= n ? -ENAMETOOLONG : 0;
}
