/*
 * topo_in.c - a topology.json document (topo_to_json()'s output) read back
 * into a graph, every field checked (topo.h, topo_from_json()).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/topo.h"
#include "base/alloc.h"

#define MS_MAX 1e12 /* latencies and timeouts in ms: a bit over 30 years */

/* One reader: where it is in the document (for errors) and the sorted ids. */
struct rd {
    struct topo_graph *g;
    char *err;
    size_t errlen;
    char where[48]; /* "nodes[3]" */
    size_t *by_id;  /* node indices sorted by id */
};

static int bad(struct rd *r, const char *key, const char *what)
{
    ts_errf(r->err, r->errlen, "%s%s%s: %s", r->where, *r->where && key ? "." : "", key ? key : "",
            what);
    return TS_PARSE;
}

/* A string of fewer than cap bytes into dst ("" when absent or null). */
static int get_str(struct rd *r, const json_t *o, const char *key, bool required, char *dst,
                   size_t cap)
{
    const json_t *v = json_object_get(o, key);
    char what[64];
    dst[0] = '\0';
    if (!v || json_is_null(v))
        return required ? bad(r, key, "missing (a string is required)") : 0;
    if (!json_is_string(v))
        return bad(r, key, "not a string");
    size_t n = json_string_length(v);
    if (n >= cap) {
        snprintf(what, sizeof(what), "longer than %zu bytes", cap - 1);
        return bad(r, key, what);
    }
    if (required && !n)
        return bad(r, key, "empty");
    memcpy(dst, json_string_value(v), n + 1);
    return 0;
}

/* A word of [a-z0-9_] (kinds): nothing in it needs escaping anywhere. */
static int get_word(struct rd *r, const json_t *o, const char *key, char *dst, size_t cap)
{
    int rc = get_str(r, o, key, true, dst, cap);
    if (!rc && dst[strspn(dst, "abcdefghijklmnopqrstuvwxyz0123456789_")])
        return bad(r, key, "not a word of a-z, 0-9 and _");
    return rc;
}

/* The index of s in names (n of them), or an error listing them. */
static int get_enum(struct rd *r, const json_t *o, const char *key, const char *const *names, int n,
                    int *out)
{
    char s[32], what[160];
    int rc = get_str(r, o, key, true, s, sizeof(s));
    if (rc && json_is_string(json_object_get(o, key)))
        s[0] = '\0', rc = 0; /* too long: not one of them either */
    if (rc)
        return rc;
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) {
            *out = i;
            return 0;
        }
    size_t w = (size_t)snprintf(what, sizeof(what), "expected");
    for (int i = 0; i < n && w < sizeof(what); i++)
        w += (size_t)snprintf(what + w, sizeof(what) - w, "%s %s",
                              i ? (i == n - 1 ? " or" : ",") : "", names[i]);
    return bad(r, key, what);
}

/* A number in lo..hi (an integer when integer), or absent/null (*dst untouched). */
static int get_num(struct rd *r, const json_t *o, const char *key, bool integer, double lo,
                   double hi, double *dst)
{
    const json_t *v = json_object_get(o, key);
    char what[80];
    if (!v || json_is_null(v))
        return 0;
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    if ((integer ? !json_is_integer(v) : !json_is_number(v)) || !(x >= lo && x <= hi)) {
        snprintf(what, sizeof(what), "not %s in %g..%g", integer ? "an integer" : "a number", lo,
                 hi);
        return bad(r, key, what);
    }
    *dst = x;
    return 0;
}

static int get_bool(struct rd *r, const json_t *o, const char *key, bool *dst)
{
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return bad(r, key, "not true or false");
    *dst = json_is_true(v);
    return 0;
}

/* calls, errors (at most calls), error_rate (checked only), p50_ms, p99_ms. */
static int get_lat(struct rd *r, const json_t *o, struct topo_lat *l)
{
    double calls = 0, errors = 0, rate = 0;
    int rc = get_num(r, o, "calls", true, 0, 9e15, &calls);
    rc = rc ? rc : get_num(r, o, "errors", true, 0, 9e15, &errors);
    rc = rc ? rc : get_num(r, o, "error_rate", false, 0, 1, &rate);
    rc = rc ? rc : get_num(r, o, "p50_ms", false, 0, MS_MAX, &l->p50_ms);
    rc = rc ? rc : get_num(r, o, "p99_ms", false, 0, MS_MAX, &l->p99_ms);
    if (!rc && errors > calls)
        rc = bad(r, "errors", "more than calls");
    l->calls = (uint64_t)calls;
    l->errors = (uint64_t)errors;
    return rc;
}

static int cmp_id(const void *a, const void *b, void *g)
{
    const struct topo_node *n = ((struct topo_graph *)g)->nodes;
    return strcmp(n[*(const size_t *)a].id, n[*(const size_t *)b].id);
}

/* The node whose id is the string at o.key, or an error. */
static int get_ref(struct rd *r, const json_t *o, const char *key, size_t *out)
{
    char id[sizeof(r->g->nodes[0].id)];
    int rc = get_str(r, o, key, true, id, sizeof(id));
    if (rc)
        return rc;
    size_t lo = 0, hi = r->g->n_nodes;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(id, r->g->nodes[r->by_id[mid]].id);
        if (!c) {
            *out = r->by_id[mid];
            return 0;
        }
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return bad(r, key, "names no node of nodes");
}

static const char *const layer_names[] = {"gateway", "model", "vector", "infrastructure"};
static const char *const origin_names[] = {"code", "traced", "both"};
static const unsigned origin_bits[] = {TOPO_CODE, TOPO_TRACE, TOPO_CODE | TOPO_TRACE};

static int node_strings(struct rd *r, const json_t *o, struct topo_node *n)
{
    int rc = get_str(r, o, "id", true, n->id, sizeof(n->id));
    rc = rc ? rc : get_str(r, o, "label", false, n->label, sizeof(n->label));
    rc = rc ? rc : get_word(r, o, "kind", n->kind, sizeof(n->kind));
    rc = rc ? rc : get_str(r, o, "service", false, n->service, sizeof(n->service));
    rc = rc ? rc : get_str(r, o, "class", false, n->cls, sizeof(n->cls));
    rc = rc ? rc : get_str(r, o, "base_url", false, n->base_url, sizeof(n->base_url));
    rc = rc ? rc : get_str(r, o, "url", false, n->url, sizeof(n->url));
    rc = rc ? rc : get_str(r, o, "system", false, n->system, sizeof(n->system));
    rc = rc ? rc : get_str(r, o, "file", false, n->file, sizeof(n->file));
    rc = rc ? rc : get_str(r, o, "route", false, n->route, sizeof(n->route));
    rc = rc ? rc : get_str(r, o, "retry_lib", false, n->retry_lib, sizeof(n->retry_lib));
    if (!rc && !n->label[0])
        memcpy(n->label, n->id, sizeof(n->label) - 1);
    const json_t *models = json_object_get(o, "models"), *m;
    size_t k;
    if (rc || !models || json_is_null(models))
        return rc;
    if (!json_is_array(models) || json_array_size(models) > TOPO_MAX_MODELS)
        return bad(r, "models", "not an array of at most 4 strings");
    json_array_foreach(models, k, m)
    {
        if (!json_is_string(m) || json_string_length(m) >= sizeof(n->models[k]))
            return bad(r, "models", "not an array of strings of at most 63 bytes");
        memcpy(n->models[k], json_string_value(m), json_string_length(m) + 1);
    }
    return 0;
}

static int read_node(struct rd *r, const json_t *o, struct topo_node *n)
{
    int layer = 0, origin = 0;
    double line = 0, timeout = -1, retries = -1, attempts = -1;
    memset(n, 0, sizeof(*n));
    n->merged_into = SIZE_MAX;
    n->lat.p50_ms = n->lat.p99_ms = NAN;
    if (!json_is_object(o))
        return bad(r, NULL, "not an object");
    int rc = node_strings(r, o, n);
    rc = rc ? rc : get_enum(r, o, "layer", layer_names, 4, &layer);
    rc = rc ? rc : get_enum(r, o, "origin", origin_names, 3, &origin);
    rc = rc ? rc : get_num(r, o, "line", true, 0, 1e9, &line);
    rc = rc ? rc : get_num(r, o, "timeout_ms", false, 0, MS_MAX, &timeout);
    rc = rc ? rc : get_num(r, o, "max_retries", true, 0, 1e6, &retries);
    rc = rc ? rc : get_num(r, o, "retry_attempts", true, 0, 1e6, &attempts);
    rc = rc ? rc : get_bool(r, o, "circuit_breaker", &n->breaker);
    rc = rc ? rc : get_bool(r, o, "streaming", &n->streaming);
    rc = rc ? rc : get_bool(r, o, "async", &n->is_async);
    rc = rc ? rc : get_bool(r, o, "fallbacks", &n->fallbacks);
    rc = rc ? rc : get_lat(r, o, &n->lat);
    n->layer = (enum topo_layer)layer;
    n->origin = origin_bits[origin];
    n->line = (int)line;
    n->timeout_s = timeout < 0 ? -1 : timeout / 1e3;
    n->max_retries = (int)retries;
    n->retry_attempts = (int)attempts;
    return rc;
}

static int read_edge(struct rd *r, const json_t *o, struct topo_edge *e)
{
    int origin = 0;
    double timeout = -1;
    memset(e, 0, sizeof(*e));
    e->lat.p50_ms = e->lat.p99_ms = e->crit_share = NAN;
    e->max_retries = -1;
    if (!json_is_object(o))
        return bad(r, NULL, "not an object");
    int rc = get_ref(r, o, "from", &e->from);
    rc = rc ? rc : get_ref(r, o, "to", &e->to);
    rc = rc ? rc : get_word(r, o, "kind", e->kind, sizeof(e->kind));
    rc = rc ? rc : get_enum(r, o, "origin", origin_names, 3, &origin);
    rc = rc ? rc : get_str(r, o, "method", false, e->method, sizeof(e->method));
    rc = rc ? rc : get_bool(r, o, "streaming", &e->streaming);
    rc = rc ? rc : get_bool(r, o, "sync", &e->sync);
    rc = rc ? rc : get_bool(r, o, "timeout_missing", &e->timeout_missing);
    rc = rc ? rc : get_num(r, o, "timeout_ms", false, 0, MS_MAX, &timeout);
    rc = rc ? rc : get_num(r, o, "critical_path_share", false, 0, 1e6, &e->crit_share);
    rc = rc ? rc : get_lat(r, o, &e->lat);
    e->origin = origin_bits[origin];
    e->timeout_s = timeout < 0 ? -1 : timeout / 1e3;
    return rc;
}

static int read_flag(struct rd *r, const json_t *o, struct topo_flag *f)
{
    static const char *const sev[] = {"high", "medium", "low"};
    int s = 0;
    memset(f, 0, sizeof(*f));
    f->edge = SIZE_MAX;
    f->value = NAN;
    if (!json_is_object(o))
        return bad(r, NULL, "not an object");
    int rc = get_word(r, o, "kind", f->kind, sizeof(f->kind));
    rc = rc ? rc : get_enum(r, o, "severity", sev, 3, &s);
    rc = rc ? rc : get_ref(r, o, "node", &f->node);
    rc = rc ? rc : get_num(r, o, "value", false, -1e15, 1e15, &f->value);
    rc = rc ? rc : get_str(r, o, "message", true, f->message, sizeof(f->message));
    if (rc)
        return rc;
    snprintf(f->severity, sizeof(f->severity), "%s", sev[s]);
    bool has_from = json_object_get(o, "edge_from"), has_to = json_object_get(o, "edge_to");
    if (!has_from && !has_to)
        return 0;
    size_t a = 0, b = 0;
    rc = get_ref(r, o, "edge_from", &a);
    rc = rc ? rc : get_ref(r, o, "edge_to", &b);
    for (size_t i = 0; !rc && i < r->g->n_edges; i++)
        if (r->g->edges[i].from == a && r->g->edges[i].to == b) {
            f->edge = i;
            return 0;
        }
    return rc ? rc : bad(r, "edge_to", "no edge of edges goes from edge_from to it");
}

static int read_sources(struct rd *r, const json_t *s)
{
    struct topo_graph *g = r->g;
    double files = 0, spans = 0, traces = 0, rejected = 0, total = 0;
    snprintf(r->where, sizeof(r->where), "sources");
    if (!s)
        return 0;
    if (!json_is_object(s))
        return bad(r, NULL, "not an object");
    int rc = get_str(r, s, "code", false, g->source, sizeof(g->source));
    rc = rc ? rc : get_num(r, s, "files", true, 0, 9e15, &files);
    rc = rc ? rc : get_num(r, s, "spans", true, 0, 9e15, &spans);
    rc = rc ? rc : get_num(r, s, "traces", true, 0, 9e15, &traces);
    rc = rc ? rc : get_num(r, s, "spans_rejected", true, 0, 9e15, &rejected);
    rc = rc ? rc : get_num(r, s, "scan_errors_total", true, 0, 9e15, &total);
    g->files = (uint64_t)files, g->spans = (uint64_t)spans, g->traces = (uint64_t)traces;
    g->spans_rejected = (uint64_t)rejected;
    g->errors_total = (uint64_t)total;
    const json_t *errs = json_object_get(s, "scan_errors"), *e;
    size_t k;
    if (rc || !errs || json_is_null(errs))
        return rc;
    if (!json_is_array(errs) || json_array_size(errs) > TOPO_MAX_ERRORS)
        return bad(r, "scan_errors", "not an array of at most 256 objects");
    json_array_foreach(errs, k, e)
    {
        struct topo_scan_error *se = &g->errors[k];
        double line = 0;
        snprintf(r->where, sizeof(r->where), "sources.scan_errors[%zu]", k);
        if (!json_is_object(e))
            return bad(r, NULL, "not an object");
        rc = get_str(r, e, "file", true, se->file, sizeof(se->file));
        rc = rc ? rc : get_num(r, e, "line", true, 0, 1e9, &line);
        rc = rc ? rc : get_str(r, e, "message", true, se->message, sizeof(se->message));
        if (rc)
            return rc;
        se->line = (int)line;
        g->n_errors = k + 1;
    }
    if (g->errors_total < g->n_errors)
        g->errors_total = g->n_errors;
    return 0;
}

/* The top level: the version and the three arrays, their sizes; storage for them. */
static int read_top(struct rd *r, const json_t *doc, const json_t **nodes, const json_t **edges,
                    const json_t **flags)
{
    struct topo_graph *g = r->g;
    r->where[0] = '\0';
    if (!json_is_object(doc))
        return bad(r, NULL, "not a JSON object");
    const json_t *v = json_object_get(doc, "tokenstorm_topology");
    if (!json_is_integer(v) || json_integer_value(v) != 1)
        return bad(r, "tokenstorm_topology", "not 1 (not a version 1 topology)");
    *nodes = json_object_get(doc, "nodes");
    *edges = json_object_get(doc, "edges");
    *flags = json_object_get(doc, "flags");
    if (!json_is_array(*nodes))
        return bad(r, "nodes", "missing or not an array");
    if (!json_is_array(*edges))
        return bad(r, "edges", "missing or not an array");
    if (!json_is_array(*flags))
        return bad(r, "flags", "missing or not an array");
    size_t nn = json_array_size(*nodes), ne = json_array_size(*edges);
    if (nn > TOPO_MAX_NODES || ne > TOPO_MAX_EDGES || json_array_size(*flags) > TOPO_MAX_FLAGS) {
        ts_errf(r->err, r->errlen, "%zu nodes, %zu edges, %zu flags: over %d, %d or %d", nn, ne,
                json_array_size(*flags), TOPO_MAX_NODES, TOPO_MAX_EDGES, TOPO_MAX_FLAGS);
        return TS_TOOBIG;
    }
    g->nodes = ts_calloc(nn ? nn : 1, sizeof(*g->nodes));
    g->edges = ts_calloc(ne ? ne : 1, sizeof(*g->edges));
    r->by_id = ts_calloc(nn ? nn : 1, sizeof(*r->by_id));
    if (!g->nodes || !g->edges || !r->by_id) {
        ts_errf(r->err, r->errlen, "out of memory");
        return -ENOMEM;
    }
    g->cap_nodes = nn ? nn : 1;
    g->cap_edges = ne ? ne : 1;
    return 0;
}

static int read_all(struct rd *r, const json_t *doc)
{
    struct topo_graph *g = r->g;
    const json_t *nodes, *edges, *flags, *o;
    size_t k;
    int rc = read_top(r, doc, &nodes, &edges, &flags);
    rc = rc ? rc : read_sources(r, json_object_get(doc, "sources"));
    if (rc)
        return rc;
    json_array_foreach(nodes, k, o)
    {
        snprintf(r->where, sizeof(r->where), "nodes[%zu]", k);
        if (rc || (rc = read_node(r, o, &g->nodes[k])))
            return rc;
        r->by_id[k] = g->n_nodes++;
    }
    qsort_r(r->by_id, g->n_nodes, sizeof(*r->by_id), cmp_id, g);
    for (size_t i = 1; !rc && i < g->n_nodes; i++) {
        size_t a = r->by_id[i - 1], b = r->by_id[i];
        if (!strcmp(g->nodes[a].id, g->nodes[b].id)) {
            snprintf(r->where, sizeof(r->where), "nodes[%zu]", a > b ? a : b);
            rc = bad(r, "id", "repeats the id of another node");
        }
    }
    json_array_foreach(edges, k, o)
    {
        snprintf(r->where, sizeof(r->where), "edges[%zu]", k);
        if (rc || (rc = read_edge(r, o, &g->edges[k])))
            return rc;
        g->n_edges++;
    }
    json_array_foreach(flags, k, o)
    {
        snprintf(r->where, sizeof(r->where), "flags[%zu]", k);
        if (rc || (rc = read_flag(r, o, &g->flags[k])))
            return rc;
        g->n_flags++;
    }
    return rc;
}

int topo_from_json(struct topo_graph *g, const json_t *doc, char *err, size_t errlen)
{
    struct rd r = {.g = g, .err = err, .errlen = errlen};
    if (g->n_nodes || g->n_edges || g->nodes || g->edges) {
        ts_errf(err, errlen, "the graph is not empty");
        return -EINVAL;
    }
    int rc = read_all(&r, doc);
    ts_free(r.by_id);
    if (rc) {
        topo_release(g);
        topo_init(g);
    }
    return rc;
}
