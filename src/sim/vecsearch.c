/*
 * vecsearch.c - the simulator's raw-vector search, for benchmark corpora:
 *   GET  /v1/vectors          what the corpus and its index are
 *   POST /v1/vectors/search   {"vector":[...],"k":10,"nprobe":64,"ef_search":128}
 * over a generated corpus or a vector file (llm/vecset.h), indexed by FAISS
 * (sim/ann.h) when the build has it, else scanned exactly. The search runs
 * when the request arrives, on the server's loop: its time and CPU are real.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "sim/ann.h"
#include "sim/server_int.h"

#define VECS_MAX_ANSWER (64u << 10)

struct sim_vecs {
    struct vecset base;
    struct ann_index *ann; /* NULL: exact scan */
    char source[160];      /* the spec or file, for GET /v1/vectors */
};

static int load_base(const struct sim_server_config *cfg, struct vecset *out, char *err,
                     size_t errlen)
{
    if (!vecgen_is_spec(cfg->vector_data))
        return vecset_load(cfg->vector_data, out, err, errlen);
    struct vecgen g = {.seed = cfg->vector_seed};
    int rc = vecgen_parse(cfg->vector_data, &g, err, errlen);
    if (!rc && (rc = vecset_generate(&g, 0, g.n, out)))
        ts_errf(err, errlen, "%s: %s", cfg->vector_data, ts_strerror(rc));
    return rc;
}

int sim_vecs_init(struct sim_server *s, const struct sim_server_config *cfg, char *err,
                  size_t errlen)
{
    if (!cfg->vector_data)
        return 0; /* an index alone is over the text store's passages (vsearch.c) */
    struct sim_vecs *v = ts_calloc(1, sizeof(*v));
    if (!v)
        return -ENOMEM;
    char e2[200] = "";
    int rc = load_base(cfg, &v->base, e2, sizeof(e2));
    if (rc) {
        ts_errf(err, errlen, "--vector-data %s", e2);
        goto out_free;
    }
    snprintf(v->source, sizeof(v->source), "%s", cfg->vector_data);
    const char *factory = cfg->vector_index ? cfg->vector_index : (ann_available() ? "Flat" : NULL);
    if (factory) {
        rc =
            ann_index_build(factory, v->base.dim, v->base.v, v->base.n, 0, &v->ann, e2, sizeof(e2));
        if (rc) {
            ts_errf(err, errlen, "--vector-index '%.128s': %s", factory, e2);
            goto out_free;
        }
        ann_index_set_defaults(v->ann, cfg->vector_nprobe, cfg->vector_ef);
    }
    s->vecs = v;
    return 0;
out_free:
    vecset_release(&v->base);
    ts_free(v);
    return rc;
}

void sim_vecs_release(struct sim_server *s)
{
    if (!s->vecs)
        return;
    ann_index_free(s->vecs->ann);
    vecset_release(&s->vecs->base);
    ts_free(s->vecs);
    s->vecs = NULL;
}

static const char *kind_name(const struct sim_vecs *v)
{
    static const char *const names[] = {"other", "flat", "ivf", "hnsw"};
    return v->ann ? names[ann_index_kind(v->ann)] : "scan";
}

static void send_json(struct http_request *req, int status, json_t *doc)
{
    char *text = doc ? json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(7)) : NULL;
    if (!text) {
        (void)http_respond(req, 500, "application/json", NULL, "{}", 2);
    } else {
        (void)http_respond(req, status, "application/json", NULL, text, strlen(text));
        free(text);
    }
    json_decref(doc);
}

static void handle_info(struct sim_server *s, struct http_request *req)
{
    const struct sim_vecs *v = s->vecs;
    send_json(req, 200,
              json_pack("{s:s,s:s,s:I,s:I,s:s,s:s,s:I}", "object", "vector_corpus", "source",
                        v->source, "count", (json_int_t)v->base.n, "dim", (json_int_t)v->base.dim,
                        "index", v->ann ? ann_index_factory(v->ann) : "exact scan", "kind",
                        kind_name(v), "nlist", (json_int_t)(v->ann ? ann_index_nlist(v->ann) : 0)));
}

/* An optional integer field in lo..hi; false with *e set when it is wrong. */
static bool int_field(const json_t *root, const char *key, json_int_t lo, json_int_t hi,
                      json_int_t *out, struct openai_error *e)
{
    const json_t *j = json_object_get(root, key);
    if (!j || json_is_null(j))
        return true;
    if (!json_is_integer(j) || json_integer_value(j) < lo || json_integer_value(j) > hi) {
        openai_error_set(e, 400, "invalid_request_error", key, NULL,
                         "'%s' must be an integer from %lld to %lld.", key, (long long)lo,
                         (long long)hi);
        return false;
    }
    *out = json_integer_value(j);
    return true;
}

struct vec_query {
    float *x;
    json_int_t k, nprobe, ef;
};

/* Parses the body into q (q->x owned by the caller). */
static bool parse_query(const struct sim_vecs *v, const json_t *root, struct vec_query *q,
                        struct openai_error *e)
{
    const json_t *vec = json_object_get(root, "vector");
    if (!json_is_object(root) || !json_is_array(vec) || json_array_size(vec) != v->base.dim) {
        openai_error_set(e, 400, "invalid_request_error", "vector", NULL,
                         "'vector' must be an array of %zu numbers.", v->base.dim);
        return false;
    }
    q->k = 10;
    if (!int_field(root, "k", 1, ANN_MAX_K < v->base.n ? ANN_MAX_K : (json_int_t)v->base.n, &q->k,
                   e) ||
        !int_field(root, "nprobe", 0, ANN_MAX_NPROBE, &q->nprobe, e) ||
        !int_field(root, "ef_search", 0, ANN_MAX_EF, &q->ef, e))
        return false;
    for (size_t i = 0; i < v->base.dim; i++) {
        const json_t *n = json_array_get(vec, i);
        double d = json_is_number(n) ? json_number_value(n) : NAN;
        if (!isfinite(d) || fabs(d) > 3e38) {
            openai_error_set(e, 400, "invalid_request_error", "vector", NULL,
                             "'vector' item %zu is not a finite number.", i);
            return false;
        }
        q->x[i] = (float)d;
    }
    return true;
}

/* The k nearest into ids/dist, by the index or by a scan. */
static int run_search(const struct sim_vecs *v, const struct vec_query *q, int64_t *ids,
                      float *dist, char *err, size_t errlen)
{
    if (v->ann)
        return ann_index_search(v->ann, q->x, 1, (size_t)q->k, (uint32_t)q->nprobe, (uint32_t)q->ef,
                                dist, ids, err, errlen);
    struct vecset one = {.n = 1, .dim = v->base.dim, .v = q->x};
    int32_t *i32 = ts_malloc((size_t)q->k * sizeof(*i32));
    int rc = i32 ? vecset_knn_exact(&v->base, &one, (size_t)q->k, i32) : -ENOMEM;
    for (json_int_t j = 0; !rc && j < q->k; j++) {
        const float *y = v->base.v + (size_t)i32[j] * v->base.dim;
        float s = 0;
        for (size_t d = 0; d < v->base.dim; d++)
            s += (q->x[d] - y[d]) * (q->x[d] - y[d]);
        ids[j] = i32[j];
        dist[j] = s;
    }
    ts_free(i32);
    return rc;
}

static json_t *encode_hits(const struct vec_query *q, const int64_t *ids, const float *dist,
                           uint64_t took_ns)
{
    json_t *data = json_array();
    for (json_int_t j = 0; data && j < q->k && ids[j] >= 0; j++)
        if (json_array_append_new(data, json_pack("{s:I,s:f}", "id", (json_int_t)ids[j], "distance",
                                                  (double)dist[j])))
            break;
    return json_pack("{s:s,s:I,s:I,s:I,s:f,s:o*}", "object", "vector_search.result", "k",
                     (json_int_t)q->k, "nprobe", (json_int_t)q->nprobe, "ef_search",
                     (json_int_t)q->ef, "search_ms", (double)took_ns / 1e6, "data", data);
}

static void handle_search(struct sim_server *s, struct http_request *req)
{
    const struct sim_vecs *v = s->vecs;
    struct openai_error e;
    json_error_t jerr;
    json_t *root = json_loadb(req->body, req->body_len, 0, &jerr);
    struct vec_query q = {.x = ts_malloc(v->base.dim * sizeof(float))};
    int64_t *ids = ts_malloc(ANN_MAX_K * sizeof(*ids));
    float *dist = ts_malloc(ANN_MAX_K * sizeof(*dist));
    if (!root) {
        openai_error_set(
            &e, 400, "invalid_request_error", NULL, NULL,
            "We could not parse the JSON body of your request: %s (line %d, column %d).", jerr.text,
            jerr.line, jerr.column);
        sim_send_error(req, &e, NULL);
    } else if (!q.x || !ids || !dist) {
        openai_error_set(&e, 500, "server_error", NULL, NULL, "Out of memory.");
        sim_send_error(req, &e, NULL);
    } else if (parse_query(v, root, &q, &e)) {
        char err[200] = "";
        uint64_t t0 = ts_now_ns();
        int rc = run_search(v, &q, ids, dist, err, sizeof(err));
        uint64_t took = ts_now_ns() - t0;
        if (rc) {
            openai_error_set(&e, rc == -EINVAL ? 400 : 500, "invalid_request_error", NULL, NULL,
                             "%s", err[0] ? err : ts_strerror(rc));
            sim_send_error(req, &e, NULL);
        } else {
            s->stats.vector_searches++;
            send_json(req, 200, encode_hits(&q, ids, dist, took));
        }
    } else {
        sim_send_error(req, &e, NULL);
    }
    json_decref(root);
    ts_free(q.x);
    ts_free(ids);
    ts_free(dist);
}

bool sim_vecs_route(struct sim_server *s, struct http_request *req, const char *path, bool get,
                    bool post)
{
    bool info = !strcmp(path, "/v1/vectors"), search = !strcmp(path, "/v1/vectors/search");
    if (!info && !search)
        return false;
    if (!s->vecs) {
        struct openai_error e;
        openai_error_set(&e, 404, "invalid_request_error", NULL, NULL,
                         "This simulator has no vector corpus (start it with --vector-data).");
        sim_send_error(req, &e, NULL);
    } else if (info && get) {
        handle_info(s, req);
    } else if (search && post) {
        handle_search(s, req);
    } else {
        struct openai_error e;
        openai_error_set(&e, 405, "invalid_request_error", NULL, NULL, "Use %s.",
                         info ? "GET" : "POST");
        sim_send_error(req, &e, NULL);
    }
    return true;
}
