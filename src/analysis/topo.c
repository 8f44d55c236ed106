/*
 * topo.c - the dependency graph: nodes, edges, samples, the static scan's
 * JSON, merging code with traces and the risk flags (topo.h).
 */
#include "analysis/topo.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/samples.h"
#include "base/alloc.h"

void topo_init(struct topo_graph *g)
{
    memset(g, 0, sizeof(*g));
    g->rng = 0x9e3779b97f4a7c15ull;
}

void topo_release(struct topo_graph *g)
{
    for (size_t i = 0; i < g->n_nodes; i++)
        ts_free(g->nodes[i].lat.ms);
    for (size_t i = 0; i < g->n_edges; i++)
        ts_free(g->edges[i].lat.ms);
    ts_free(g->nodes);
    ts_free(g->edges);
    memset(g, 0, sizeof(*g));
}

static void cut(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= cap)
        n = cap - 1;
    if (n)
        memcpy(dst, src, n);
    dst[n] = '\0';
}

size_t topo_find(const struct topo_graph *g, const char *id)
{
    for (size_t i = 0; i < g->n_nodes; i++) {
        if (!strncmp(g->nodes[i].id, id, sizeof(g->nodes[i].id) - 1)) {
            size_t k = i;
            for (int hop = 0; g->nodes[k].merged_into != SIZE_MAX && hop < 64; hop++)
                k = g->nodes[k].merged_into;
            return k;
        }
    }
    return SIZE_MAX;
}

int topo_node_get(struct topo_graph *g, const char *id, const char *kind, enum topo_layer layer,
                  size_t *out)
{
    size_t i = topo_find(g, id);
    if (i != SIZE_MAX) {
        *out = i;
        return 0;
    }
    if (g->n_nodes >= TOPO_MAX_NODES)
        return TS_TOOBIG;
    if (g->n_nodes == g->cap_nodes) {
        size_t cap = g->cap_nodes ? g->cap_nodes * 2 : 32;
        struct topo_node *v = ts_realloc(g->nodes, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        g->nodes = v;
        g->cap_nodes = cap;
    }
    struct topo_node *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof(*n));
    cut(n->id, sizeof(n->id), id);
    cut(n->label, sizeof(n->label), id);
    cut(n->kind, sizeof(n->kind), kind);
    n->layer = layer;
    n->timeout_s = -1;
    n->max_retries = -1;
    n->retry_attempts = -1;
    n->merged_into = SIZE_MAX;
    n->lat.p50_ms = n->lat.p99_ms = NAN;
    *out = g->n_nodes++;
    return 0;
}

int topo_edge_get(struct topo_graph *g, size_t from, size_t to, const char *kind, size_t *out)
{
    for (size_t i = 0; i < g->n_edges; i++) {
        struct topo_edge *e = &g->edges[i];
        if (!e->dead && e->from == from && e->to == to && !strcmp(e->kind, kind)) {
            *out = i;
            return 0;
        }
    }
    if (g->n_edges >= TOPO_MAX_EDGES)
        return TS_TOOBIG;
    if (g->n_edges == g->cap_edges) {
        size_t cap = g->cap_edges ? g->cap_edges * 2 : 64;
        struct topo_edge *v = ts_realloc(g->edges, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        g->edges = v;
        g->cap_edges = cap;
    }
    struct topo_edge *e = &g->edges[g->n_edges];
    memset(e, 0, sizeof(*e));
    e->from = from;
    e->to = to;
    cut(e->kind, sizeof(e->kind), kind);
    e->timeout_s = -1;
    e->max_retries = -1;
    e->lat.p50_ms = e->lat.p99_ms = NAN;
    e->crit_share = NAN;
    *out = g->n_edges++;
    return 0;
}

static uint64_t next_rand(struct topo_graph *g)
{
    uint64_t z = (g->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int topo_lat_add(struct topo_graph *g, struct topo_lat *l, double dur_ns, bool error)
{
    l->calls++;
    l->errors += error;
    double ms = dur_ns / 1e6;
    l->seen++;
    if (l->n < TOPO_MAX_SAMPLES) {
        if (l->n == l->cap) {
            size_t cap = l->cap ? l->cap * 2 : 16;
            double *v = ts_realloc(l->ms, cap * sizeof(*v));
            if (!v)
                return -ENOMEM;
            l->ms = v;
            l->cap = cap;
        }
        l->ms[l->n++] = ms;
        return 0;
    }
    uint64_t k = next_rand(g) % l->seen; /* reservoir: each sample kept with n/seen */
    if (k < l->n)
        l->ms[k] = ms;
    return 0;
}

static int lat_merge(struct topo_graph *g, struct topo_lat *dst, const struct topo_lat *src)
{
    uint64_t calls = dst->calls + src->calls, errors = dst->errors + src->errors;
    for (size_t i = 0; i < src->n; i++) {
        int rc = topo_lat_add(g, dst, src->ms[i] * 1e6, false);
        if (rc)
            return rc;
    }
    dst->calls = calls;
    dst->errors = errors;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void lat_finish(struct topo_lat *l)
{
    if (!l->n) {
        l->p50_ms = l->p99_ms = NAN;
        return;
    }
    qsort(l->ms, l->n, sizeof(double), cmp_double);
    l->p50_ms = samples_percentile_sorted(l->ms, l->n, 50);
    l->p99_ms = samples_percentile_sorted(l->ms, l->n, 99);
}

enum topo_layer topo_kind_layer(const char *kind, const char *url)
{
    if (!strcmp(kind, "chat_model") || !strcmp(kind, "llm_client") || !strcmp(kind, "embeddings") ||
        !strcmp(kind, "model"))
        return TOPO_LAYER_MODEL;
    if (!strcmp(kind, "vector_store") || !strcmp(kind, "retriever"))
        return TOPO_LAYER_VECTOR;
    if (!strcmp(kind, "http") || !strcmp(kind, "http_client") || !strcmp(kind, "peer") ||
        !strcmp(kind, "db")) {
        if (url && (strstr(url, "vector") || strstr(url, "/search") || strstr(url, "retriev")))
            return TOPO_LAYER_VECTOR;
        if (url && (strstr(url, "/chat/completions") || strstr(url, "/embeddings") ||
                    strstr(url, "/completions")))
            return TOPO_LAYER_MODEL;
        return TOPO_LAYER_INFRA;
    }
    return TOPO_LAYER_GATEWAY;
}

const char *topo_layer_name(enum topo_layer l)
{
    static const char *names[] = {"gateway", "model", "vector", "infrastructure"};
    return (unsigned)l < 4 ? names[l] : "gateway";
}

const char *topo_origin_name(unsigned origin)
{
    if ((origin & (TOPO_CODE | TOPO_TRACE)) == (TOPO_CODE | TOPO_TRACE))
        return "both";
    return origin & TOPO_TRACE ? "traced" : "code";
}

/* "${VAR:-default}" -> the variable's value in this process's environment
 * when set, else "default" ("${VAR}" -> the value or ""); other text copied. */
static void expand_default(const char *in, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *p = in; *p && o + 1 < cap;) {
        const char *e = p[0] == '$' && p[1] == '{' ? strchr(p, '}') : NULL;
        if (!e) {
            out[o++] = *p++;
            continue;
        }
        const char *d = strstr(p, ":-");
        const char *name_end = d && d < e ? d : e;
        char name[64];
        snprintf(name, sizeof(name), "%.*s", (int)(name_end - p - 2), p + 2);
        const char *v = getenv(name);
        const char *from = v && *v ? v : (d && d < e ? d + 2 : "");
        const char *to = v && *v ? v + strlen(v) : (d && d < e ? e : from);
        for (const char *q = from; q < to && o + 1 < cap; q++)
            out[o++] = *q;
        p = e + 1;
    }
    out[o] = '\0';
}

/* ---- the static scan's JSON ------------------------------------------ */

/* A string field of at most cap-1 bytes, or absent; false when it is not a
 * string (the scan is ours, but nothing from a pipe is trusted). */
static bool opt_str(json_t *o, const char *key, char *dst, size_t cap, char *err, size_t errlen,
                    const char *where)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return true;
    if (!json_is_string(v)) {
        ts_errf(err, errlen, "scan: %s: %s is not a string", where, key);
        return false;
    }
    cut(dst, cap, json_string_value(v));
    return true;
}

static bool opt_num(json_t *o, const char *key, double lo, double hi, double *dst, char *err,
                    size_t errlen, const char *where)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return true;
    if (!json_is_number(v) || json_number_value(v) < lo || json_number_value(v) > hi) {
        ts_errf(err, errlen, "scan: %s: %s is not a number in %g..%g", where, key, lo, hi);
        return false;
    }
    *dst = json_number_value(v);
    return true;
}

static int scan_node(struct topo_graph *g, json_t *j, size_t idx, char *err, size_t errlen)
{
    char where[48];
    snprintf(where, sizeof(where), "nodes[%zu]", idx);
    const char *id = json_string_value(json_object_get(j, "id"));
    const char *kind = json_string_value(json_object_get(j, "kind"));
    if (!json_is_object(j) || !id || !*id || !kind || strlen(id) >= sizeof(g->nodes[0].id) ||
        strlen(kind) >= sizeof(g->nodes[0].kind)) {
        ts_errf(err, errlen, "scan: %s: needs an id and a kind (strings)", where);
        return TS_PARSE;
    }
    char url[192] = "";
    if (!opt_str(j, "url", url, sizeof(url), err, errlen, where))
        return TS_PARSE;
    size_t i;
    int rc = topo_node_get(g, id, kind, topo_kind_layer(kind, url), &i);
    if (rc)
        return rc;
    struct topo_node *n = &g->nodes[i];
    n->origin |= TOPO_CODE;
    cut(n->url, sizeof(n->url), url);
    double line = 0, timeout = -1, retries = -1, attempts = -1;
    if (!opt_str(j, "label", n->label, sizeof(n->label), err, errlen, where) ||
        !opt_str(j, "class", n->cls, sizeof(n->cls), err, errlen, where) ||
        !opt_str(j, "base_url", n->base_url, sizeof(n->base_url), err, errlen, where) ||
        !opt_str(j, "system", n->system, sizeof(n->system), err, errlen, where) ||
        !opt_str(j, "file", n->file, sizeof(n->file), err, errlen, where) ||
        !opt_str(j, "route", n->route, sizeof(n->route), err, errlen, where) ||
        !opt_str(j, "retry_lib", n->retry_lib, sizeof(n->retry_lib), err, errlen, where) ||
        !opt_num(j, "line", 0, 1e9, &line, err, errlen, where) ||
        !opt_num(j, "timeout_s", 0, 1e9, &timeout, err, errlen, where) ||
        !opt_num(j, "max_retries", 0, 1e6, &retries, err, errlen, where) ||
        !opt_num(j, "retry_attempts", 0, 1e6, &attempts, err, errlen, where))
        return TS_PARSE;
    char tmp[192];
    expand_default(n->url, tmp, sizeof(tmp));
    memcpy(n->url, tmp, sizeof(n->url));
    expand_default(n->base_url, tmp, sizeof(tmp));
    memcpy(n->base_url, tmp, sizeof(n->base_url));
    if (n->url[0] && !strcmp(n->kind, "http"))
        cut(n->label, sizeof(n->label), n->url);
    n->layer = topo_kind_layer(kind, n->url);
    n->line = (int)line;
    n->timeout_s = timeout;
    n->max_retries = (int)retries;
    n->retry_attempts = (int)attempts;
    n->breaker = json_is_true(json_object_get(j, "breaker"));
    n->streaming = json_is_true(json_object_get(j, "streaming"));
    n->is_async = json_is_true(json_object_get(j, "is_async"));
    n->fallbacks = json_is_true(json_object_get(j, "fallbacks"));
    json_t *models = json_object_get(j, "models"), *m;
    size_t k;
    json_array_foreach(models, k, m)
    {
        if (k >= TOPO_MAX_MODELS)
            break;
        if (!json_is_string(m)) {
            ts_errf(err, errlen, "scan: %s: models[%zu] is not a string", where, k);
            return TS_PARSE;
        }
        cut(n->models[k], sizeof(n->models[k]), json_string_value(m));
    }
    return 0;
}

static int scan_edge(struct topo_graph *g, json_t *j, size_t idx, char *err, size_t errlen)
{
    char where[48];
    snprintf(where, sizeof(where), "edges[%zu]", idx);
    const char *from = json_string_value(json_object_get(j, "from"));
    const char *to = json_string_value(json_object_get(j, "to"));
    const char *kind = json_string_value(json_object_get(j, "kind"));
    if (!from || !to || !kind || strlen(kind) >= sizeof(g->edges[0].kind)) {
        ts_errf(err, errlen, "scan: %s: needs from, to and kind (strings)", where);
        return TS_PARSE;
    }
    size_t a = topo_find(g, from), b = topo_find(g, to), i;
    if (a == SIZE_MAX || b == SIZE_MAX) {
        ts_errf(err, errlen, "scan: %s: names a node that is not in nodes", where);
        return TS_PARSE;
    }
    int rc = topo_edge_get(g, a, b, kind, &i);
    if (rc)
        return rc;
    struct topo_edge *e = &g->edges[i];
    e->origin |= TOPO_CODE;
    double timeout = -1, retries = -1;
    if (!opt_str(j, "method", e->method, sizeof(e->method), err, errlen, where) ||
        !opt_num(j, "timeout_s", 0, 1e9, &timeout, err, errlen, where) ||
        !opt_num(j, "max_retries", 0, 1e6, &retries, err, errlen, where))
        return TS_PARSE;
    e->timeout_s = timeout;
    e->max_retries = (int)retries;
    e->streaming = json_is_true(json_object_get(j, "streaming"));
    e->sync = json_is_true(json_object_get(j, "sync"));
    e->timeout_missing = json_is_true(json_object_get(j, "timeout_missing"));
    return 0;
}

static int scan_errors(struct topo_graph *g, json_t *errors, char *err, size_t errlen)
{
    size_t k;
    json_t *e;
    json_array_foreach(errors, k, e)
    {
        const char *file = json_string_value(json_object_get(e, "file"));
        const char *msg = json_string_value(json_object_get(e, "message"));
        json_t *line = json_object_get(e, "line");
        if (!file || !msg || !json_is_integer(line)) {
            ts_errf(err, errlen, "scan: errors[%zu]: needs file, line and message", k);
            return TS_PARSE;
        }
        g->errors_total++;
        if (g->n_errors >= TOPO_MAX_ERRORS)
            continue;
        struct topo_scan_error *se = &g->errors[g->n_errors++];
        cut(se->file, sizeof(se->file), file);
        cut(se->message, sizeof(se->message), msg);
        json_int_t l = json_integer_value(line);
        se->line = l < 0 || l > 1000000000 ? 0 : (int)l;
    }
    return 0;
}

int topo_load_scan(struct topo_graph *g, const char *json, size_t len, char *err, size_t errlen)
{
    if (len > TOPO_SCAN_MAX) {
        ts_errf(err, errlen, "scan: output over %u bytes", TOPO_SCAN_MAX);
        return TS_TOOBIG;
    }
    json_error_t je;
    json_t *doc = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!doc) {
        ts_errf(err, errlen, "scan: not JSON (line %d col %d: %s)", je.line, je.column, je.text);
        return TS_PARSE;
    }
    int rc = TS_PARSE;
    json_t *nodes = json_object_get(doc, "nodes"), *edges = json_object_get(doc, "edges");
    json_t *files = json_object_get(doc, "files");
    if (json_integer_value(json_object_get(doc, "tokenstorm_scan")) != 1 || !json_is_array(nodes) ||
        !json_is_array(edges) || !json_is_integer(files) ||
        !json_is_array(json_object_get(doc, "errors"))) {
        ts_errf(err, errlen,
                "scan: not a version 1 scan (tokenstorm_scan, files, errors, "
                "nodes, edges)");
        goto out;
    }
    g->files += json_integer_value(files) > 0 ? (uint64_t)json_integer_value(files) : 0;
    rc = scan_errors(g, json_object_get(doc, "errors"), err, errlen);
    size_t k;
    json_t *j;
    json_array_foreach(nodes, k, j)
    {
        if (rc)
            break;
        rc = scan_node(g, j, k, err, errlen);
    }
    json_array_foreach(edges, k, j)
    {
        if (rc)
            break;
        rc = scan_edge(g, j, k, err, errlen);
    }
out:
    json_decref(doc);
    return rc;
}

/* ---- merging code and traces ------------------------------------------ */

/* The host:port of a URL ("http://h:p/x" -> "h:p", default ports added)
 * and its path ("/x", "" when none). A URL without a scheme is host first. */
static void url_split(const char *url, char *hp, size_t cap, char *path, size_t pcap)
{
    char buf[192];
    expand_default(url, buf, sizeof(buf));
    const char *p = strstr(buf, "://");
    bool https = !strncmp(buf, "https", 5);
    p = p ? p + 3 : buf;
    size_t n = strcspn(p, "/?#");
    snprintf(hp, cap, "%.*s", (int)n, p);
    if (*hp && !strchr(hp, ':'))
        snprintf(hp + strlen(hp), cap - strlen(hp), ":%d", https ? 443 : 80);
    snprintf(path, pcap, "%.*s", (int)strcspn(p + n, "?#"), p + n);
}

static bool has_model(const struct topo_node *n, const char *model)
{
    for (int i = 0; i < TOPO_MAX_MODELS; i++)
        if (n->models[i][0] && !strcmp(n->models[i], model))
            return true;
    return false;
}

static bool contains_ci(const char *hay, const char *needle)
{
    return *needle && strcasestr(hay, needle) != NULL;
}

/* Whether the code node c and the traced node t are the same thing. */
static bool nodes_match(const struct topo_node *c, const struct topo_node *t)
{
    if (!strcmp(t->kind, "model"))
        return (c->layer == TOPO_LAYER_MODEL && has_model(c, t->models[0])) ||
               (!strcmp(c->kind, "http") && t->url[0] && !strcmp(c->url, t->url));
    if (!strcmp(t->kind, "db"))
        return (!strcmp(c->kind, "vector_store") && c->system[0] &&
                !strcasecmp(c->system, t->system)) ||
               (!strcmp(c->kind, "http") && c->layer == t->layer && t->url[0] &&
                strstr(c->url, t->url));
    if (!strcmp(t->kind, "operation") && c->route[0])
        return !strcmp(c->route, t->route) || !strcmp(c->route, t->label);
    if (!strcmp(t->kind, "peer") && !strcmp(c->kind, "http")) {
        char a[128], b[128], pa[192], pb[192];
        url_split(c->url, a, sizeof(a), pa, sizeof(pa));
        url_split(t->url[0] ? t->url : t->label, b, sizeof(b), pb, sizeof(pb));
        return *a && !strcmp(a, b) && (!*pa || !*pb || !strcmp(pa, pb));
    }
    if (!strcmp(t->kind, "step"))
        return (c->cls[0] && contains_ci(t->label, c->cls)) ||
               (!strcmp(c->kind, "tool") && contains_ci(t->label, c->label));
    return false;
}

/* Folds traced node t into code node c; edges that named t now name c. */
static int merge_node(struct topo_graph *g, size_t c, size_t t)
{
    struct topo_node *cn = &g->nodes[c], *tn = &g->nodes[t];
    int rc = lat_merge(g, &cn->lat, &tn->lat);
    if (rc)
        return rc;
    cn->origin |= tn->origin;
    if (!cn->service[0])
        cut(cn->service, sizeof(cn->service), tn->service);
    tn->merged_into = c;
    for (size_t i = 0; i < g->n_edges; i++) {
        struct topo_edge *e = &g->edges[i];
        if (e->from == t)
            e->from = c;
        if (e->to == t)
            e->to = c;
    }
    return 0;
}

/* Folds duplicate edges (same ends after merging): one with both origins. */
static int merge_edges(struct topo_graph *g)
{
    for (size_t i = 0; i < g->n_edges; i++) {
        struct topo_edge *a = &g->edges[i];
        if (a->dead)
            continue;
        if (a->from == a->to) {
            a->dead = true;
            continue;
        }
        for (size_t j = i + 1; j < g->n_edges; j++) {
            struct topo_edge *b = &g->edges[j];
            if (b->dead || b->from != a->from || b->to != a->to)
                continue;
            int rc = lat_merge(g, &a->lat, &b->lat);
            if (rc)
                return rc;
            a->origin |= b->origin;
            a->crit_ns += b->crit_ns;
            if (a->timeout_s < 0)
                a->timeout_s = b->timeout_s;
            if (!strcmp(a->kind, "traced"))
                memcpy(a->kind, b->kind, sizeof(a->kind));
            a->sync |= b->sync;
            a->streaming |= b->streaming;
            b->dead = true;
        }
    }
    return 0;
}

static int merge_all(struct topo_graph *g)
{
    for (size_t t = 0; t < g->n_nodes; t++) {
        struct topo_node *tn = &g->nodes[t];
        if (!(tn->origin & TOPO_TRACE) || (tn->origin & TOPO_CODE) || tn->merged_into != SIZE_MAX)
            continue;
        for (size_t c = 0; c < g->n_nodes; c++) {
            struct topo_node *cn = &g->nodes[c];
            if (!(cn->origin & TOPO_CODE) || cn->merged_into != SIZE_MAX)
                continue;
            if (nodes_match(cn, tn)) {
                int rc = merge_node(g, c, t);
                if (rc)
                    return rc;
                break;
            }
        }
    }
    return merge_edges(g);
}

/* ---- risk flags --------------------------------------------------------- */

static void flag(struct topo_graph *g, const char *kind, const char *sev, size_t node, size_t edge,
                 double value, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static void flag(struct topo_graph *g, const char *kind, const char *sev, size_t node, size_t edge,
                 double value, const char *fmt, ...)
{
    if (g->n_flags >= TOPO_MAX_FLAGS)
        return;
    struct topo_flag *f = &g->flags[g->n_flags++];
    cut(f->kind, sizeof(f->kind), kind);
    cut(f->severity, sizeof(f->severity), sev);
    f->node = node;
    f->edge = edge;
    f->value = value;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->message, sizeof(f->message), fmt, ap);
    va_end(ap);
}

static bool live(const struct topo_graph *g, size_t i)
{
    return g->nodes[i].merged_into == SIZE_MAX;
}

static void where(const struct topo_node *n, char *out, size_t cap)
{
    if (n->file[0])
        snprintf(out, cap, " (%s:%d)", n->file, n->line);
    else
        out[0] = '\0';
}

static void flag_timeouts(struct topo_graph *g)
{
    char at[200];
    for (size_t i = 0; i < g->n_nodes; i++) {
        struct topo_node *n = &g->nodes[i];
        if (!live(g, i) || !(n->origin & TOPO_CODE))
            continue;
        where(n, at, sizeof(at));
        if (n->timeout_s >= 0 && !isnan(n->lat.p99_ms) && n->timeout_s * 1e3 < n->lat.p99_ms)
            flag(g, "timeout_below_p99", "high", i, SIZE_MAX, n->lat.p99_ms,
                 "%s%s times out after %.0f ms, below the traced p99 of %.0f ms: slow calls "
                 "fail (and are retried) instead of answering",
                 n->label, at, n->timeout_s * 1e3, n->lat.p99_ms);
        if (n->timeout_s < 0 && (!strcmp(n->kind, "chat_model") || !strcmp(n->kind, "llm_client") ||
                                 !strcmp(n->kind, "embeddings")))
            flag(g, "missing_timeout", "medium", i, SIZE_MAX, NAN,
                 "%s%s sets no timeout: the client's default (minutes, or none) holds a caller "
                 "as long as a stuck model does",
                 n->label, at);
        if (n->retry_attempts == 0)
            flag(g, "unbounded_retry", "high", i, SIZE_MAX, NAN,
                 "%s%s retries (%s) with no stop: a failing dependency is called forever", n->label,
                 at, n->retry_lib);
    }
    for (size_t i = 0; i < g->n_edges; i++) {
        struct topo_edge *e = &g->edges[i];
        if (e->dead)
            continue;
        struct topo_node *a = &g->nodes[e->from], *b = &g->nodes[e->to];
        where(a, at, sizeof(at));
        if (e->timeout_missing)
            flag(g, "missing_timeout", "high", e->from, i, NAN,
                 "%s%s calls %s with no timeout: a hung %s holds the caller forever", a->label, at,
                 b->label, b->label);
        else if (e->timeout_s >= 0 && !isnan(b->lat.p99_ms) && e->timeout_s * 1e3 < b->lat.p99_ms)
            flag(g, "timeout_below_p99", "high", e->from, i, b->lat.p99_ms,
                 "%s%s gives %s %.0f ms, below its traced p99 of %.0f ms", a->label, at, b->label,
                 e->timeout_s * 1e3, b->lat.p99_ms);
        if (e->sync && (a->streaming || a->is_async))
            flag(g, "sync_in_stream", "medium", e->from, i, NAN,
                 "%s%s is %s but calls %s synchronously (%s): the event loop or the stream "
                 "stalls for the whole call",
                 a->label, at, a->streaming ? "a streaming path" : "async", b->label, e->method);
    }
}

/* Calls made per call of node n: its attempts (1 + retries, or the retry
 * decorator's attempts). */
static double attempts(const struct topo_node *n)
{
    double a = 1;
    if (n->max_retries > 0)
        a *= 1 + n->max_retries;
    if (n->retry_attempts > 1)
        a *= n->retry_attempts;
    return a;
}

struct path_walk {
    struct topo_graph *g;
    size_t start;
    size_t stack[16];
    int depth;
    int budget; /* paths left to look at */
    double worst;
    size_t worst_end;
    int worst_hops;
    char path[512];
};

static void walk_paths(struct path_walk *w, size_t at, double mult, int hops)
{
    if (w->budget-- <= 0 || w->depth >= 16)
        return;
    for (int i = 0; i < w->depth; i++)
        if (w->stack[i] == at)
            return; /* a cycle */
    w->stack[w->depth++] = at;
    double a = attempts(&w->g->nodes[at]);
    if (a > 1) {
        mult *= a;
        hops++;
    }
    if (hops >= 2 && mult > w->worst) {
        w->worst = mult;
        w->worst_end = at;
        w->worst_hops = hops;
        size_t o = 0;
        w->path[0] = '\0';
        for (int i = 0; i < w->depth && o < sizeof(w->path); i++)
            o += (size_t)snprintf(w->path + o, sizeof(w->path) - o, "%s%s", i ? " -> " : "",
                                  w->g->nodes[w->stack[i]].label);
    }
    for (size_t i = 0; i < w->g->n_edges; i++) {
        struct topo_edge *e = &w->g->edges[i];
        if (!e->dead && e->from == at && strcmp(e->kind, "fallback"))
            walk_paths(w, e->to, mult, hops);
    }
    w->depth--;
}

static void flag_retries(struct topo_graph *g)
{
    for (size_t s = 0; s < g->n_nodes; s++) {
        bool has_in = false;
        for (size_t i = 0; i < g->n_edges && !has_in; i++)
            has_in = !g->edges[i].dead && g->edges[i].to == s;
        if (!live(g, s) || has_in)
            continue;
        struct path_walk w = {.g = g, .start = s, .budget = 20000, .worst = 0};
        walk_paths(&w, s, 1, 0);
        if (w.worst > 1)
            flag(g, "retry_amplification", w.worst >= 8 ? "high" : "medium", w.worst_end, SIZE_MAX,
                 w.worst,
                 "retries multiply along %s: %d retrying hops, one call of %s can become up "
                 "to %.0f calls past %s",
                 w.path, w.worst_hops, g->nodes[s].label, w.worst, g->nodes[w.worst_end].label);
    }
}

int topo_finish(struct topo_graph *g)
{
    int rc = merge_all(g);
    if (rc)
        return rc;
    for (size_t i = 0; i < g->n_nodes; i++)
        lat_finish(&g->nodes[i].lat);
    for (size_t i = 0; i < g->n_edges; i++) {
        struct topo_edge *e = &g->edges[i];
        lat_finish(&e->lat);
        e->crit_share = g->root_ns > 0 && (e->origin & TOPO_TRACE) ? e->crit_ns / g->root_ns : NAN;
    }
    g->n_flags = 0;
    flag_timeouts(g);
    flag_retries(g);
    return 0;
}
