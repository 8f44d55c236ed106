/*
 * topo_trace.c - traced spans into the dependency graph (topo.h,
 * docs/TOPOLOGY.md "From traces").
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/topo.h"
#include "base/alloc.h"
#include "telemetry/otlp.h"
#include "telemetry/otlp_read.h"

#define MAX_DEPTH 64

struct trace_ctx {
    struct topo_graph *g;
    const struct otlp_rspan *v;
    size_t n;
    size_t *by_id;     /* span indices sorted by (trace, span id) */
    size_t *by_parent; /* span indices sorted by (trace, parent id) */
    size_t *node;      /* node of each span; SIZE_MAX not yet known */
    size_t *edge;      /* edge a span entered by; SIZE_MAX none */
    bool *server_child;
    size_t budget; /* critical() calls left: bounds odd inputs (repeated ids) */
};

/* snprintf that may cut: names from outside are cut to the field's size. */
static void fmt(char *dst, size_t cap, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *dst, size_t cap, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    vsnprintf(dst, cap, f, ap);
    va_end(ap);
}

static const struct otlp_rspan *cmp_base;

static int cmp_id(const void *a, const void *b)
{
    const struct otlp_rspan *x = &cmp_base[*(const size_t *)a], *y = &cmp_base[*(const size_t *)b];
    int c = memcmp(x->trace_id, y->trace_id, 16);
    return c ? c : memcmp(x->span_id, y->span_id, 8);
}

static int cmp_parent(const void *a, const void *b)
{
    const struct otlp_rspan *x = &cmp_base[*(const size_t *)a], *y = &cmp_base[*(const size_t *)b];
    int c = memcmp(x->trace_id, y->trace_id, 16);
    return c ? c : memcmp(x->parent_id, y->parent_id, 8);
}

static bool zero_id(const uint8_t *b)
{
    for (int i = 0; i < 8; i++)
        if (b[i])
            return false;
    return true;
}

/* The parent span's index, or SIZE_MAX (a root, or its parent was not seen). */
static size_t parent_of(const struct trace_ctx *t, size_t i)
{
    if (zero_id(t->v[i].parent_id))
        return SIZE_MAX;
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const struct otlp_rspan *m = &t->v[t->by_id[mid]];
        int c = memcmp(m->trace_id, t->v[i].trace_id, 16);
        if (!c)
            c = memcmp(m->span_id, t->v[i].parent_id, 8);
        if (!c)
            return t->by_id[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return SIZE_MAX;
}

static bool is_vector_db(const char *sys)
{
    static const char *names[] = {
        "faiss",      "chroma",   "chromadb", "milvus",  "qdrant", "pgvector",     "elasticsearch",
        "opensearch", "pinecone", "weaviate", "lancedb", "vespa",  "mongodb_atlas"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcasecmp(sys, names[i]))
            return true;
    return false;
}

/* LangChain / OpenLLMetry / LlamaIndex step spans: "ChatOpenAI.chat",
 * "VectorStoreRetriever.retrieve", "weather.tool", "RetrievalQA.workflow". */
static bool is_step(const struct otlp_rspan *sp)
{
    if (sp->entity[0])
        return true;
    static const char *words[] = {".task", ".workflow", ".tool", ".agent",   "Retriever",
                                  "Chain", "Agent",     "Tool",  "retrieve", "Runnable"};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (strstr(sp->name, words[i]))
            return true;
    return false;
}

static void peer_key(const struct otlp_rspan *sp, char *out, size_t cap)
{
    const char *u = sp->url;
    const char *p = strstr(u, "://");
    if (p)
        fmt(out, cap, "%s", p + 3);
    else if (sp->server_addr[0] && sp->server_port > 0)
        fmt(out, cap, "%s:%d", sp->server_addr, (int)sp->server_port);
    else if (sp->server_addr[0])
        fmt(out, cap, "%s", sp->server_addr);
    else
        fmt(out, cap, "%s", sp->name);
}

/* Makes (or finds) the node a span belongs to, other than "its parent's". */
static int own_node(struct trace_ctx *t, size_t i, size_t parent_node, size_t *out)
{
    const struct otlp_rspan *sp = &t->v[i];
    char id[192], label[128];
    const char *kind;
    enum topo_layer layer;
    if ((sp->model[0] || sp->system[0]) && !t->server_child[i]) {
        fmt(id, sizeof(id), "model:%s", sp->model[0] ? sp->model : sp->system);
        fmt(label, sizeof(label), "%s", sp->model[0] ? sp->model : sp->system);
        kind = "model";
        layer = TOPO_LAYER_MODEL;
    } else if (sp->db_system[0]) {
        fmt(id, sizeof(id), "db:%s", sp->db_system);
        fmt(label, sizeof(label), "%s", sp->db_system);
        kind = "db";
        layer = is_vector_db(sp->db_system) ? TOPO_LAYER_VECTOR : TOPO_LAYER_INFRA;
    } else if (sp->kind == OTLP_KIND_SERVER || (parent_node == SIZE_MAX && !sp->url[0]) ||
               (parent_node == SIZE_MAX && t->server_child[i])) {
        /* a service's operation; a root CLIENT span whose callee is traced
         * is its caller's operation, the edge goes to the callee's */
        fmt(id, sizeof(id), "op:%s:%s", sp->service, sp->name);
        fmt(label, sizeof(label), "%s %s", sp->service, sp->name);
        kind = "operation";
        layer = sp->kind == OTLP_KIND_SERVER && sp->url[0] ? topo_kind_layer("peer", sp->url)
                                                           : TOPO_LAYER_GATEWAY;
    } else if ((sp->kind == OTLP_KIND_CLIENT || sp->url[0] || sp->server_addr[0]) &&
               !t->server_child[i]) {
        char key[160];
        peer_key(sp, key, sizeof(key));
        fmt(id, sizeof(id), "peer:%s", key);
        fmt(label, sizeof(label), "%s", key);
        kind = "peer";
        layer = topo_kind_layer("peer", sp->url);
    } else if (sp->kind == OTLP_KIND_INTERNAL && is_step(sp)) {
        fmt(id, sizeof(id), "step:%s:%s", sp->service, sp->entity[0] ? sp->entity : sp->name);
        fmt(label, sizeof(label), "%s", sp->entity[0] ? sp->entity : sp->name);
        kind = "step";
        layer = strcasestr(sp->name, "retriev") || strcasestr(sp->name, "vector") ||
                        strcasestr(sp->name, "search")
                    ? TOPO_LAYER_VECTOR
                    : TOPO_LAYER_GATEWAY;
    } else {
        *out = parent_node;
        return 0;
    }
    int rc = topo_node_get(t->g, id, kind, layer, out);
    if (rc)
        return rc;
    struct topo_node *n = &t->g->nodes[*out];
    if (!(n->origin & TOPO_TRACE)) {
        n->origin |= TOPO_TRACE;
        fmt(n->label, sizeof(n->label), "%s", label);
        fmt(n->service, sizeof(n->service), "%s", sp->service);
        fmt(n->models[0], sizeof(n->models[0]), "%s", sp->model);
        fmt(n->system, sizeof(n->system), "%s", sp->db_system[0] ? sp->db_system : sp->system);
        fmt(n->url, sizeof(n->url), "%s", sp->url);
        if (sp->kind == OTLP_KIND_SERVER)
            fmt(n->route, sizeof(n->route), "%s", sp->name);
    }
    return 0;
}

static int node_of(struct trace_ctx *t, size_t i, int depth)
{
    if (t->node[i] != SIZE_MAX)
        return 0;
    size_t p = depth < MAX_DEPTH ? parent_of(t, i) : SIZE_MAX;
    size_t pn = SIZE_MAX;
    if (p != SIZE_MAX) {
        int rc = node_of(t, p, depth + 1);
        if (rc)
            return rc;
        pn = t->node[p];
        if (t->node[i] != SIZE_MAX)
            return 0; /* a cycle of parents came back here and placed it */
    }
    size_t n;
    int rc = own_node(t, i, pn, &n);
    if (rc)
        return rc;
    t->node[i] = n;
    double dur = (double)(t->v[i].end_ns - t->v[i].start_ns);
    if (pn != n) {
        rc = topo_lat_add(t->g, &t->g->nodes[n].lat, dur, t->v[i].error);
        if (!rc && pn != SIZE_MAX) {
            size_t e;
            rc = topo_edge_get(t->g, pn, n, "traced", &e);
            if (!rc) {
                t->g->edges[e].origin |= TOPO_TRACE;
                t->edge[i] = e;
                rc = topo_lat_add(t->g, &t->g->edges[e].lat, dur, t->v[i].error);
            }
        }
    }
    return rc;
}

/* Children of span p: the range [*lo, *hi) of by_parent. */
static void children(const struct trace_ctx *t, size_t p, size_t *lo_out, size_t *hi_out)
{
    size_t lo = 0, hi = t->n;
    const struct otlp_rspan *ps = &t->v[p];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const struct otlp_rspan *m = &t->v[t->by_parent[mid]];
        int c = memcmp(m->trace_id, ps->trace_id, 16);
        if (!c)
            c = memcmp(m->parent_id, ps->span_id, 8);
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t end = lo;
    while (end < t->n && !memcmp(t->v[t->by_parent[end]].trace_id, ps->trace_id, 16) &&
           !memcmp(t->v[t->by_parent[end]].parent_id, ps->span_id, 8))
        end++;
    *lo_out = lo;
    *hi_out = end;
}

/* The critical path under span s up to `until`: the last-finishing child,
 * then the last one finishing before that child started, and so on. The time
 * each span spends on it is added to the edge it entered by. */
static void critical(struct trace_ctx *t, size_t s, uint64_t until, int depth)
{
    const struct otlp_rspan *sp = &t->v[s];
    if (!t->budget)
        return;
    t->budget--;
    uint64_t end = sp->end_ns < until ? sp->end_ns : until;
    if (end <= sp->start_ns)
        return;
    if (t->edge[s] != SIZE_MAX)
        t->g->edges[t->edge[s]].crit_ns += (double)(end - sp->start_ns);
    if (depth >= MAX_DEPTH)
        return;
    size_t lo, hi;
    children(t, s, &lo, &hi);
    uint64_t cursor = end;
    for (int guard = 0; guard < 4096; guard++) {
        size_t best = SIZE_MAX;
        for (size_t k = lo; k < hi; k++) {
            const struct otlp_rspan *c = &t->v[t->by_parent[k]];
            if (c->start_ns >= cursor || c->start_ns < sp->start_ns)
                continue;
            if (best == SIZE_MAX || c->end_ns > t->v[best].end_ns)
                best = t->by_parent[k];
        }
        if (best == SIZE_MAX)
            break;
        critical(t, best, cursor, depth + 1);
        cursor = t->v[best].start_ns;
    }
}

static int add_all(struct trace_ctx *t)
{
    for (size_t i = 0; i < t->n; i++) {
        t->node[i] = t->edge[i] = SIZE_MAX;
    }
    for (size_t i = 0; i < t->n; i++) {
        const struct otlp_rspan *sp = &t->v[i];
        size_t p = sp->kind == OTLP_KIND_SERVER ? parent_of(t, i) : SIZE_MAX;
        /* the callee's side of a call: of another service, or of a CLIENT span */
        if (p != SIZE_MAX &&
            (strcmp(t->v[p].service, sp->service) || t->v[p].kind == OTLP_KIND_CLIENT))
            t->server_child[p] = true;
    }
    for (size_t i = 0; i < t->n; i++) {
        int rc = node_of(t, i, 0);
        if (rc)
            return rc;
    }
    for (size_t i = 0; i < t->n; i++) {
        if (parent_of(t, i) != SIZE_MAX)
            continue;
        t->g->traces++;
        t->g->root_ns += (double)(t->v[i].end_ns - t->v[i].start_ns);
        critical(t, i, UINT64_MAX, 0);
    }
    return 0;
}

int topo_add_spans(struct topo_graph *g, const struct otlp_spans *spans)
{
    struct trace_ctx t = {.g = g, .v = spans->v, .n = spans->n, .budget = 4 * spans->n + 1024};
    g->spans += spans->n;
    g->spans_rejected += spans->rejected;
    if (!spans->n)
        return 0;
    int rc = -ENOMEM;
    t.by_id = ts_malloc(t.n * sizeof(size_t));
    t.by_parent = ts_malloc(t.n * sizeof(size_t));
    t.node = ts_malloc(t.n * sizeof(size_t));
    t.edge = ts_malloc(t.n * sizeof(size_t));
    t.server_child = ts_calloc(t.n, sizeof(bool));
    if (!t.by_id || !t.by_parent || !t.node || !t.edge || !t.server_child)
        goto out;
    for (size_t i = 0; i < t.n; i++)
        t.by_id[i] = t.by_parent[i] = i;
    cmp_base = t.v;
    qsort(t.by_id, t.n, sizeof(size_t), cmp_id);
    qsort(t.by_parent, t.n, sizeof(size_t), cmp_parent);
    rc = add_all(&t);
out:
    ts_free(t.by_id);
    ts_free(t.by_parent);
    ts_free(t.node);
    ts_free(t.edge);
    ts_free(t.server_child);
    return rc;
}
