/*
 * vsearch.c - the simulator's vector store endpoint: POST
 * /v1/vector_stores/{id}/search (the store itself is sim/vstore.h).
 *
 * A search is ranked when it arrives (bad requests are answered at once),
 * then waits its simulated search time: every search of a store takes the
 * same time, so pending searches are due in arrival order and wait in one
 * FIFO list, with one nanosecond timer armed for the head. The GPU engine is
 * not involved.
 */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "sim/ann.h"
#include "sim/server_int.h"
#include "sim/vstore.h"

#define VSEARCH_MAX_BODY (16u << 20)

struct sim_search {
    struct sim_server *s;
    struct http_request *http;
    struct sim_search *prev, *next;
    uint64_t arrival_ns, due_ns;
    size_t results;
    struct buf body;
    char id[40];
    char request_id[80];
    char traceparent[64];
};

int sim_vsearch_init(struct sim_server *s, const struct sim_server_config *cfg, char *err,
                     size_t errlen)
{
    const char *id = cfg->vector_store_id ? cfg->vector_store_id : "vs_default";
    size_t n = strlen(id);
    bool ok = n >= 1 && n <= SIM_VECTOR_ID_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = (id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
             (id[i] >= '0' && id[i] <= '9') || id[i] == '_' || id[i] == '-';
    if (!ok) {
        ts_errf(err, errlen, "vector store id '%.80s': expected 1 to %d of [A-Za-z0-9_-]", id,
                SIM_VECTOR_ID_MAX);
        return -EINVAL;
    }
    memcpy(s->vstore_id, id, n + 1);
    int rc = cfg->vector_docs_path
                 ? vstore_load(cfg->vector_docs_path, VSTORE_DIMS_DEFAULT, &s->vstore, err, errlen)
                 : vstore_new_builtin(VSTORE_DIMS_DEFAULT, &s->vstore);
    if (rc) {
        if (!cfg->vector_docs_path)
            ts_errf(err, errlen, "vector store: %s", ts_strerror(rc));
        return rc;
    }
    uint64_t fixed = cfg->vector_latency_ns ? cfg->vector_latency_ns : SIM_VECTOR_LATENCY_NS;
    uint64_t per_doc = cfg->vector_doc_ns ? cfg->vector_doc_ns : SIM_VECTOR_DOC_NS;
    fixed = fixed == SIM_DURATION_ZERO ? 0 : fixed;
    per_doc = per_doc == SIM_DURATION_ZERO ? 0 : per_doc;
    if (per_doc > (UINT64_MAX / 4 - fixed) / (vstore_count(s->vstore) + 1)) {
        ts_errf(err, errlen, "vector store: the search time is too long");
        vstore_free(s->vstore);
        s->vstore = NULL;
        return -EINVAL;
    }
    s->vsearch_ns = fixed + per_doc * vstore_count(s->vstore);
    if (cfg->vector_index && !cfg->vector_data) {
        /* a real index over the passages: the search's own time replaces the model's */
        size_t dims;
        const float *vecs = vstore_vectors(s->vstore, &dims);
        char e2[200] = "";
        rc = ann_index_build(cfg->vector_index, dims, vecs, vstore_count(s->vstore), 0, &s->vs_ann,
                             e2, sizeof(e2));
        if (rc) {
            ts_errf(err, errlen, "--vector-index '%.128s' over %zu passages: %s", cfg->vector_index,
                    vstore_count(s->vstore), e2);
            vstore_free(s->vstore);
            s->vstore = NULL;
            return rc;
        }
        ann_index_set_defaults(s->vs_ann, cfg->vector_nprobe, cfg->vector_ef);
        s->vsearch_ns = 0;
    }
    if ((rc = ptimer_init(s->loop, &s->vs_timer))) {
        ts_errf(err, errlen, "timer: %s", uv_strerror(rc));
        vstore_free(s->vstore);
        s->vstore = NULL;
        return rc;
    }
    s->vs_timer.data = s;
    s->vs_timer_inited = true;
    s->handles++;
    return 0;
}

void sim_vsearch_close(struct sim_server *s, void (*on_closed)(struct ptimer *t))
{
    if (!s->vs_timer_inited || s->vs_timer_closing)
        return;
    s->vs_timer_closing = true;
    ptimer_close(&s->vs_timer, on_closed);
}

void sim_vsearch_release(struct sim_server *s)
{
    vstore_free(s->vstore);
    s->vstore = NULL;
    ann_index_free(s->vs_ann);
    s->vs_ann = NULL;
}

/* An optional "nprobe" / "ef_search" of the search body: 0..max, default 0. */
static int breadth(const json_t *root, const char *key, uint32_t max, uint32_t *out,
                   struct openai_error *e)
{
    const json_t *j = json_object_get(root, key);
    *out = 0;
    if (!j || json_is_null(j))
        return 0;
    if (!json_is_integer(j) || json_integer_value(j) < 0 || json_integer_value(j) > max) {
        openai_error_set(e, 400, "invalid_request_error", key, NULL,
                         "'%s' must be an integer from 0 to %u.", key, max);
        return -EINVAL;
    }
    *out = (uint32_t)json_integer_value(j);
    return 0;
}

/*
 * The passages nearest the query by the FAISS index: on unit vectors the
 * squared L2 distance d gives the cosine 1 - d / 2 (clamped to [0, 1]).
 */
static int ann_rank(struct sim_server *s, const struct vstore_query *vq, struct vstore_hit *hits,
                    size_t *n, struct openai_error *e)
{
    uint32_t nprobe, ef;
    size_t dims,
        k = vq->max_results < vstore_count(s->vstore) ? vq->max_results : vstore_count(s->vstore);
    (void)vstore_vectors(s->vstore, &dims);
    if (breadth(vq->root, "nprobe", ANN_MAX_NPROBE, &nprobe, e) ||
        breadth(vq->root, "ef_search", ANN_MAX_EF, &ef, e))
        return TS_PARSE;
    float *q = ts_malloc(dims * sizeof(float));
    int rc = q ? vstore_embed_query(s->vstore, vq->text, vq->len, q) : -ENOMEM;
    int64_t ids[VSTORE_MAX_RESULTS];
    float d[VSTORE_MAX_RESULTS];
    char err[200];
    if (!rc)
        rc = ann_index_search(s->vs_ann, q, 1, k, nprobe, ef, d, ids, err, sizeof(err));
    ts_free(q);
    *n = 0;
    for (size_t i = 0; !rc && i < k; i++) {
        double score = 1.0 - (double)d[i] / 2;
        score = score < 0 ? 0 : score > 1 ? 1 : score;
        if (ids[i] >= 0 && score >= vq->score_threshold)
            hits[(*n)++] = (struct vstore_hit){(uint32_t)ids[i], score};
    }
    if (rc)
        openai_error_set(e, 500, "server_error", NULL, NULL, "Internal error: %s", ts_strerror(rc));
    return rc;
}

static void search_free(struct sim_search *q)
{
    buf_release(&q->body);
    ts_free(q);
}

static void unlink_search(struct sim_server *s, struct sim_search *q)
{
    if (q->prev)
        q->prev->next = q->next;
    else
        s->vs_head = q->next;
    if (q->next)
        q->next->prev = q->prev;
    else
        s->vs_tail = q->prev;
    q->prev = q->next = NULL;
}

static void trace_search(struct sim_server *s, const struct sim_search *q, const char *status,
                         uint64_t finish_ns)
{
    if (!s->trace)
        return;
    char line[512];
    int n = snprintf(line, sizeof(line),
                     "{\"request_id\":\"%s\",\"traceparent\":\"%s\",\"id\":\"%s\","
                     "\"endpoint\":\"vector_store.search\",\"stream\":false,\"status\":\"%s\","
                     "\"results\":%zu,\"arrival_ns\":%llu,\"finish_ns\":%llu}\n",
                     q->request_id, q->traceparent, q->id, status, q->results,
                     (unsigned long long)q->arrival_ns, (unsigned long long)finish_ns);
    if (n > 0 && (size_t)n < sizeof(line))
        (void)asyncw_write(s->trace, line, (size_t)n);
}

static void answer(struct sim_server *s, struct sim_search *q)
{
    (void)http_respond(q->http, 200, "application/json", NULL, q->body.data, q->body.len);
    q->http = NULL;
    s->stats.vector_searches++;
    trace_search(s, q, "finished", ts_now_ns());
}

static void on_search_abort(struct http_request *req)
{
    struct sim_search *q = req->user;
    struct sim_server *s = q->s;
    unlink_search(s, q);
    trace_search(s, q, "cancelled", ts_now_ns());
    (void)http_respond(req, 499, NULL, NULL, NULL, 0);
    search_free(q);
}

/* Answers the pending searches due by now (all of them with UINT64_MAX). */
static void answer_due(struct sim_server *s, uint64_t now)
{
    while (s->vs_head && s->vs_head->due_ns <= now) {
        struct sim_search *q = s->vs_head;
        unlink_search(s, q);
        answer(s, q);
        search_free(q);
    }
}

static void on_due(struct ptimer *t);

/* Arms the timer for the head; without a timer the searches are answered at once. */
static void arm(struct sim_server *s)
{
    if (!s->vs_head)
        return;
    int rc = s->vs_timer_closing ? -ECANCELED
                                 : ptimer_start_at(&s->vs_timer, s->vs_head->due_ns, on_due);
    if (rc) {
        ts_error("sim: cannot arm the vector search timer: %s", strerror(-rc));
        answer_due(s, UINT64_MAX);
    }
}

static void on_due(struct ptimer *t)
{
    struct sim_server *s = t->data;
    answer_due(s, ts_now_ns());
    arm(s);
}

static bool id_matches(const struct sim_server *s, const char *id, size_t n)
{
    return (n == strlen("vs_default") && !memcmp(id, "vs_default", n)) ||
           (n == strlen(s->vstore_id) && !memcmp(id, s->vstore_id, n));
}

void sim_vsearch_handle(struct sim_server *s, struct http_request *req, const char *store_id,
                        size_t id_len)
{
    struct openai_error e;
    if (!id_matches(s, store_id, id_len)) {
        openai_error_set(&e, 404, "invalid_request_error", NULL, NULL,
                         "No vector store found with id '%.*s'.", (int)(id_len > 64 ? 64 : id_len),
                         store_id);
        sim_send_error(req, &e, NULL);
        return;
    }
    struct vstore_query vq;
    vstore_query_init(&vq);
    if (vstore_query_parse(&vq, req->body, req->body_len, &e)) {
        sim_send_error(req, &e, NULL);
        return;
    }
    struct sim_search *q = ts_calloc(1, sizeof(*q));
    struct vstore_hit hits[VSTORE_MAX_RESULTS];
    size_t n = 0;
    int rc = q ? 0 : -ENOMEM;
    if (q) {
        buf_init(&q->body, VSEARCH_MAX_BODY);
        q->s = s;
        q->http = req;
        q->arrival_ns = ts_now_ns();
        q->due_ns = q->arrival_ns + s->vsearch_ns;
        snprintf(q->id, sizeof(q->id), "vsearch-%016llx",
                 (unsigned long long)rng_mix64(s->id_seed + ++s->next_id));
        sim_copy_header_safe(q->request_id, sizeof(q->request_id),
                             http_request_header(req, "x-request-id"));
        sim_copy_header_safe(q->traceparent, sizeof(q->traceparent),
                             http_request_header(req, "traceparent"));
        if (s->vs_ann && ann_rank(s, &vq, hits, &n, &e)) {
            vstore_query_release(&vq);
            sim_send_error(req, &e, NULL);
            search_free(q);
            return;
        }
        rc = s->vs_ann ? 0
                       : vstore_search(s->vstore, vq.text, vq.len, vq.max_results,
                                       vq.score_threshold, hits, &n);
    }
    if (!rc)
        rc = vstore_encode_page(&q->body, s->vstore, &vq, hits, n);
    vstore_query_release(&vq);
    if (rc) {
        openai_error_set(&e, 500, "server_error", NULL, NULL, "Internal error: %s",
                         ts_strerror(rc));
        sim_send_error(req, &e, NULL);
        if (q)
            search_free(q);
        return;
    }
    q->results = n;
    if (s->vsearch_ns == 0 || s->vs_timer_closing) {
        answer(s, q);
        search_free(q);
        return;
    }
    q->prev = s->vs_tail;
    if (s->vs_tail)
        s->vs_tail->next = q;
    else
        s->vs_head = q;
    s->vs_tail = q;
    req->user = q;
    http_request_on_abort(req, on_search_abort);
    if (s->vs_head == q)
        arm(s);
}
