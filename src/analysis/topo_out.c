/*
 * topo_out.c - the dependency graph written as JSON, DOT, Mermaid and text,
 * and read back from its JSON (topo.h).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis/topo.h"
#include "base/tsjson.h"

static int put_str(json_t *o, const char *k, const char *v)
{
    return *v ? tsjson_put(o, k, json_string(v)) : 0;
}

static int put_lat(json_t *o, const struct topo_lat *l)
{
    if (!l->calls)
        return 0;
    int rc = tsjson_put(o, "calls", tsjson_count(l->calls));
    rc |= tsjson_put(o, "errors", tsjson_count(l->errors));
    rc |= tsjson_put(o, "error_rate", tsjson_num((double)l->errors / (double)l->calls));
    rc |= tsjson_put(o, "p50_ms", tsjson_num(l->p50_ms));
    rc |= tsjson_put(o, "p99_ms", tsjson_num(l->p99_ms));
    return rc;
}

static json_t *node_json(const struct topo_node *n)
{
    json_t *o = json_object();
    int rc = put_str(o, "id", n->id);
    rc |= put_str(o, "label", n->label);
    rc |= put_str(o, "kind", n->kind);
    rc |= put_str(o, "layer", topo_layer_name(n->layer));
    rc |= put_str(o, "origin", topo_origin_name(n->origin));
    rc |= put_str(o, "service", n->service);
    rc |= put_str(o, "class", n->cls);
    json_t *models = json_array();
    for (int i = 0; i < TOPO_MAX_MODELS; i++)
        if (n->models[i][0])
            rc |= json_array_append_new(models, json_string(n->models[i]));
    rc |= json_array_size(models) ? tsjson_put(o, "models", models) : (json_decref(models), 0);
    rc |= put_str(o, "base_url", n->base_url);
    rc |= put_str(o, "url", n->url);
    rc |= put_str(o, "system", n->system);
    rc |= put_str(o, "file", n->file);
    if (n->file[0])
        rc |= tsjson_put(o, "line", json_integer(n->line));
    rc |= put_str(o, "route", n->route);
    if (n->timeout_s >= 0)
        rc |= tsjson_put(o, "timeout_ms", tsjson_num(n->timeout_s * 1e3));
    if (n->max_retries >= 0)
        rc |= tsjson_put(o, "max_retries", json_integer(n->max_retries));
    if (n->retry_attempts >= 0)
        rc |= tsjson_put(o, "retry_attempts", json_integer(n->retry_attempts));
    rc |= put_str(o, "retry_lib", n->retry_lib);
    if (n->breaker)
        rc |= tsjson_put(o, "circuit_breaker", json_true());
    if (n->streaming)
        rc |= tsjson_put(o, "streaming", json_true());
    if (n->is_async)
        rc |= tsjson_put(o, "async", json_true());
    if (n->fallbacks)
        rc |= tsjson_put(o, "fallbacks", json_true());
    rc |= put_lat(o, &n->lat);
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *edge_json(const struct topo_graph *g, const struct topo_edge *e)
{
    json_t *o = json_object();
    int rc = put_str(o, "from", g->nodes[e->from].id);
    rc |= put_str(o, "to", g->nodes[e->to].id);
    rc |= put_str(o, "kind", e->kind);
    rc |= put_str(o, "origin", topo_origin_name(e->origin));
    rc |= put_str(o, "method", e->method);
    if (e->streaming)
        rc |= tsjson_put(o, "streaming", json_true());
    if (e->sync)
        rc |= tsjson_put(o, "sync", json_true());
    if (e->timeout_s >= 0)
        rc |= tsjson_put(o, "timeout_ms", tsjson_num(e->timeout_s * 1e3));
    if (e->timeout_missing)
        rc |= tsjson_put(o, "timeout_missing", json_true());
    rc |= put_lat(o, &e->lat);
    if (!isnan(e->crit_share))
        rc |= tsjson_put(o, "critical_path_share", tsjson_num(e->crit_share));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *flag_json(const struct topo_graph *g, const struct topo_flag *f)
{
    json_t *o = json_object();
    int rc = put_str(o, "kind", f->kind);
    rc |= put_str(o, "severity", f->severity);
    rc |= put_str(o, "node", g->nodes[f->node].id);
    if (f->edge != SIZE_MAX) {
        rc |= put_str(o, "edge_from", g->nodes[g->edges[f->edge].from].id);
        rc |= put_str(o, "edge_to", g->nodes[g->edges[f->edge].to].id);
    }
    if (!isnan(f->value))
        rc |= tsjson_put(o, "value", tsjson_num(f->value));
    rc |= put_str(o, "message", f->message);
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *sources_json(const struct topo_graph *g)
{
    json_t *s = json_object(), *errs = json_array();
    int rc = 0;
    for (size_t i = 0; i < g->n_errors; i++) {
        json_t *e = json_object();
        rc |= tsjson_put(e, "file", json_string(g->errors[i].file));
        rc |= tsjson_put(e, "line", json_integer(g->errors[i].line));
        rc |= tsjson_put(e, "message", json_string(g->errors[i].message));
        rc |= json_array_append_new(errs, e);
    }
    rc |= tsjson_put(s, "code", g->source[0] ? json_string(g->source) : json_null());
    rc |= tsjson_put(s, "files", tsjson_count(g->files));
    rc |= tsjson_put(s, "scan_errors", errs);
    rc |= tsjson_put(s, "scan_errors_total", tsjson_count(g->errors_total));
    rc |= tsjson_put(s, "spans", tsjson_count(g->spans));
    rc |= tsjson_put(s, "traces", tsjson_count(g->traces));
    rc |= tsjson_put(s, "spans_rejected", tsjson_count(g->spans_rejected));
    if (rc) {
        json_decref(s);
        return NULL;
    }
    return s;
}

json_t *topo_to_json(const struct topo_graph *g)
{
    json_t *doc = json_object(), *nodes = json_array(), *edges = json_array(),
           *flags = json_array();
    int rc = tsjson_put(doc, "tokenstorm_topology", json_integer(1));
    rc |= tsjson_put(doc, "sources", sources_json(g));
    for (size_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].merged_into == SIZE_MAX)
            rc |= json_array_append_new(nodes, node_json(&g->nodes[i]));
    for (size_t i = 0; i < g->n_edges; i++)
        if (!g->edges[i].dead)
            rc |= json_array_append_new(edges, edge_json(g, &g->edges[i]));
    for (size_t i = 0; i < g->n_flags; i++)
        rc |= json_array_append_new(flags, flag_json(g, &g->flags[i]));
    rc |= tsjson_put(doc, "nodes", nodes);
    rc |= tsjson_put(doc, "edges", edges);
    rc |= tsjson_put(doc, "flags", flags);
    if (rc) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

static const char *layer_color(enum topo_layer l)
{
    static const char *c[] = {"#4e79a7", "#e15759", "#59a14f", "#9c755f"};
    return (unsigned)l < 4 ? c[l] : c[0];
}

/* A label safe inside a DOT or Mermaid double-quoted string. */
static void safe(const char *in, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *p = in; *p && o + 1 < cap; p++)
        out[o++] = (*p == '"' || *p == '\\' || *p == '\n' || *p == '\r' || *p == '<' || *p == '>' ||
                    *p == '|' || *p == '{' || *p == '}' || *p == '[' || *p == ']' || *p == '`' ||
                    *p == '#')
                       ? '\''
                       : *p;
    out[o] = '\0';
}

static void edge_label(const struct topo_edge *e, char *out, size_t cap)
{
    if (e->lat.calls && !isnan(e->lat.p99_ms))
        snprintf(out, cap, "%llu calls, p99 %.0f ms%s", (unsigned long long)e->lat.calls,
                 e->lat.p99_ms, e->lat.errors ? ", errors" : "");
    else
        snprintf(out, cap, "%s", e->method[0] ? e->method : e->kind);
}

int topo_write_dot(const struct topo_graph *g, struct buf *out)
{
    int rc = buf_append_str(out, "digraph topology {\n  rankdir=LR;\n  node [shape=box, "
                                 "style=\"rounded,filled\", fontcolor=white];\n");
    char label[160], el[96];
    for (size_t i = 0; i < g->n_nodes && !rc; i++) {
        const struct topo_node *n = &g->nodes[i];
        if (n->merged_into != SIZE_MAX)
            continue;
        safe(n->label, label, sizeof(label));
        rc = buf_appendf(out, "  n%zu [label=\"%s\\n%s, %s\", fillcolor=\"%s\"%s];\n", i, label,
                         n->kind, topo_origin_name(n->origin), layer_color(n->layer),
                         n->origin == TOPO_TRACE ? ", style=\"rounded,filled,dashed\"" : "");
    }
    for (size_t i = 0; i < g->n_edges && !rc; i++) {
        const struct topo_edge *e = &g->edges[i];
        if (e->dead)
            continue;
        edge_label(e, el, sizeof(el));
        double w = e->lat.calls ? 1 + log10((double)e->lat.calls) : 1;
        rc = buf_appendf(out, "  n%zu -> n%zu [label=\"%s\", penwidth=%.1f%s];\n", e->from, e->to,
                         el, w, e->origin == TOPO_CODE ? ", style=dashed" : "");
    }
    return rc ? rc : buf_append_str(out, "}\n");
}

int topo_write_mermaid(const struct topo_graph *g, struct buf *out)
{
    int rc = buf_append_str(out, "flowchart LR\n");
    char label[160], el[96];
    for (size_t i = 0; i < g->n_nodes && !rc; i++) {
        const struct topo_node *n = &g->nodes[i];
        if (n->merged_into != SIZE_MAX)
            continue;
        safe(n->label, label, sizeof(label));
        rc = buf_appendf(out, "  n%zu[\"%s (%s)\"]:::%s\n", i, label, n->kind,
                         topo_layer_name(n->layer));
    }
    for (size_t i = 0; i < g->n_edges && !rc; i++) {
        const struct topo_edge *e = &g->edges[i];
        if (e->dead)
            continue;
        edge_label(e, el, sizeof(el));
        safe(el, label, sizeof(label));
        rc = buf_appendf(out, "  n%zu %s|\"%s\"| n%zu\n", e->from,
                         e->origin == TOPO_CODE ? "-.->" : "-->", label, e->to);
    }
    for (int l = 0; l < 4 && !rc; l++)
        rc = buf_appendf(out, "  classDef %s fill:%s,color:#fff\n",
                         topo_layer_name((enum topo_layer)l), layer_color((enum topo_layer)l));
    return rc;
}

int topo_write_text(const struct topo_graph *g, struct buf *out)
{
    size_t nodes = 0, edges = 0;
    for (size_t i = 0; i < g->n_nodes; i++)
        nodes += g->nodes[i].merged_into == SIZE_MAX;
    for (size_t i = 0; i < g->n_edges; i++)
        edges += !g->edges[i].dead;
    int rc = buf_appendf(out, "topology: %zu nodes, %zu edges", nodes, edges);
    rc |= buf_appendf(out, " (code: %llu files; traces: %llu spans, %llu traces)\n",
                      (unsigned long long)g->files, (unsigned long long)g->spans,
                      (unsigned long long)g->traces);
    for (size_t i = 0; i < g->n_errors && !rc; i++)
        rc = buf_appendf(out, "  unparseable: %s:%d: %s\n", g->errors[i].file, g->errors[i].line,
                         g->errors[i].message);
    for (int l = 0; l < 4 && !rc; l++) {
        rc = buf_appendf(out, "%s\n", topo_layer_name((enum topo_layer)l));
        for (size_t i = 0; i < g->n_nodes && !rc; i++) {
            const struct topo_node *n = &g->nodes[i];
            if (n->merged_into != SIZE_MAX || n->layer != (enum topo_layer)l)
                continue;
            rc = buf_appendf(out, "  %-40s %-12s %-6s", n->label, n->kind,
                             topo_origin_name(n->origin));
            if (!rc && n->lat.calls)
                rc = buf_appendf(out, " %llu calls p50 %.1f ms p99 %.1f ms errors %.1f%%",
                                 (unsigned long long)n->lat.calls, n->lat.p50_ms, n->lat.p99_ms,
                                 100.0 * (double)n->lat.errors / (double)n->lat.calls);
            rc |= buf_append_char(out, '\n');
        }
    }
    for (size_t i = 0; i < g->n_flags && !rc; i++)
        rc = buf_appendf(out, "risk [%s] %s: %s\n", g->flags[i].severity, g->flags[i].kind,
                         g->flags[i].message);
    return rc;
}
