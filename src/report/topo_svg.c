/*
 * topo_svg.c - the dependency graph as SVG and as an HTML page (topo_svg.h).
 */
#include "report/topo_svg.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "report/svg.h"

#define COL_W     230
#define ROW_H     58
#define BOX_W     180
#define BOX_H     40
#define MARGIN    30
#define LABEL_MAX 26

static const char *fill(enum topo_layer l)
{
    static const char *c[] = {"#4e79a7", "#e15759", "#59a14f", "#9c755f"};
    return (unsigned)l < 4 ? c[l] : c[0];
}

/* Columns: the longest path from a node with no caller, relaxed at most n
 * times (a cycle stops growing then). */
static void columns(const struct topo_graph *g, int *col)
{
    for (size_t i = 0; i < g->n_nodes; i++)
        col[i] = 0;
    for (size_t round = 0; round < g->n_nodes && round < 64; round++) {
        bool changed = false;
        for (size_t i = 0; i < g->n_edges; i++) {
            const struct topo_edge *e = &g->edges[i];
            if (e->dead || e->from == e->to)
                continue;
            if (col[e->to] < col[e->from] + 1 && col[e->from] + 1 < 24) {
                col[e->to] = col[e->from] + 1;
                changed = true;
            }
        }
        if (!changed)
            break;
    }
}

/* A label cut to LABEL_MAX bytes on a UTF-8 boundary, with "…" when cut. */
static int short_label(struct buf *out, const char *s)
{
    size_t n = strlen(s);
    if (n <= LABEL_MAX)
        return svg_escape(out, s);
    size_t k = LABEL_MAX - 1;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
        k--;
    char tmp[LABEL_MAX + 1];
    memcpy(tmp, s, k);
    tmp[k] = '\0';
    int rc = svg_escape(out, tmp);
    return rc ? rc : buf_append_str(out, "\xe2\x80\xa6");
}

struct layout {
    int *col;
    int *row; /* -1: not drawn */
    int cols, rows;
    size_t drawn, skipped;
};

static int place(const struct topo_graph *g, struct layout *L)
{
    L->col = ts_calloc(g->n_nodes ? g->n_nodes : 1, sizeof(int));
    L->row = ts_calloc(g->n_nodes ? g->n_nodes : 1, sizeof(int));
    int count[24] = {0};
    if (!L->col || !L->row)
        return -ENOMEM;
    columns(g, L->col);
    for (size_t i = 0; i < g->n_nodes; i++) {
        L->row[i] = -1;
        if (g->nodes[i].merged_into != SIZE_MAX)
            continue;
        if (L->drawn >= TOPO_SVG_MAX_NODES) {
            L->skipped++;
            continue;
        }
        int c = L->col[i];
        L->row[i] = count[c]++;
        L->drawn++;
        if (c + 1 > L->cols)
            L->cols = c + 1;
        if (count[c] > L->rows)
            L->rows = count[c];
    }
    return 0;
}

static int draw_edges(const struct topo_graph *g, const struct layout *L, struct buf *out)
{
    int rc = 0;
    char p99[48];
    for (size_t i = 0; i < g->n_edges && !rc; i++) {
        const struct topo_edge *e = &g->edges[i];
        if (e->dead || L->row[e->from] < 0 || L->row[e->to] < 0)
            continue;
        double x1 = MARGIN + L->col[e->from] * COL_W + BOX_W,
               y1 = MARGIN + L->row[e->from] * ROW_H + BOX_H / 2.0;
        double x2 = MARGIN + L->col[e->to] * COL_W,
               y2 = MARGIN + L->row[e->to] * ROW_H + BOX_H / 2.0;
        if (x2 <= x1) /* a back edge: leave and enter from below */
            y1 += BOX_H / 2.0, y2 += BOX_H / 2.0;
        double w = 1 + 2 * log10(1 + (double)e->lat.calls);
        double dx = fabs(x2 - x1) / 2 + 20;
        rc = buf_appendf(
            out,
            "<path class=\"edge\" d=\"M%.1f %.1f C%.1f %.1f %.1f %.1f %.1f %.1f\" "
            "fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\"%s marker-end=\"url(#ts-arr)\">"
            "<title>",
            x1, y1, x1 + dx, y1, x2 - dx, y2, x2, y2, e->lat.errors ? "#d62728" : "#777", w,
            e->origin == TOPO_CODE ? " stroke-dasharray=\"5 4\"" : "");
        rc = rc ? rc : svg_escape(out, g->nodes[e->from].label);
        rc = rc ? rc : buf_appendf(out, " -> ");
        rc = rc ? rc : svg_escape(out, g->nodes[e->to].label);
        rc = rc ? rc
                : buf_appendf(out, " (%s, %s)</title></path>\n", e->kind,
                              topo_origin_name(e->origin));
        if (!rc && e->lat.calls && !isnan(e->lat.p99_ms)) {
            snprintf(p99, sizeof(p99), "p99 %.0f ms", e->lat.p99_ms);
            rc = buf_appendf(out,
                             "<text class=\"elabel\" x=\"%.1f\" y=\"%.1f\" font-size=\"10\" "
                             "text-anchor=\"middle\" fill=\"#333\">%s</text>\n",
                             (x1 + x2) / 2, (y1 + y2) / 2 - 3, p99);
        }
    }
    return rc;
}

static int draw_nodes(const struct topo_graph *g, const struct layout *L, struct buf *out)
{
    int rc = 0;
    for (size_t i = 0; i < g->n_nodes && !rc; i++) {
        const struct topo_node *n = &g->nodes[i];
        if (L->row[i] < 0)
            continue;
        int x = MARGIN + L->col[i] * COL_W, y = MARGIN + L->row[i] * ROW_H;
        rc =
            buf_appendf(out,
                        "<g class=\"node %s\"><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                        "rx=\"6\" fill=\"%s\"%s/><title>",
                        topo_layer_name(n->layer), x, y, BOX_W, BOX_H, fill(n->layer),
                        n->origin == TOPO_TRACE ? " stroke=\"#222\" stroke-dasharray=\"4 3\"" : "");
        rc = rc ? rc : svg_escape(out, n->id);
        rc = rc ? rc
                : buf_appendf(out,
                              "</title><text x=\"%d\" y=\"%d\" font-size=\"12\" "
                              "fill=\"#fff\">",
                              x + 8, y + 16);
        rc = rc ? rc : short_label(out, n->label);
        rc = rc ? rc
                : buf_appendf(out,
                              "</text><text x=\"%d\" y=\"%d\" font-size=\"10\" "
                              "fill=\"#fff\">%s, %s",
                              x + 8, y + 32, n->kind, topo_origin_name(n->origin));
        if (!rc && n->lat.calls && !isnan(n->lat.p99_ms))
            rc = buf_appendf(out, ", p99 %.0f ms", n->lat.p99_ms);
        rc = rc ? rc : buf_append_str(out, "</text></g>\n");
    }
    return rc;
}

int topo_svg_render(const struct topo_graph *g, struct buf *out)
{
    struct layout L = {0};
    int rc = place(g, &L);
    if (rc)
        goto out;
    int w = MARGIN * 2 + (L.cols ? L.cols : 1) * COL_W,
        h = MARGIN * 2 + (L.rows ? L.rows : 1) * ROW_H + 30;
    rc = buf_appendf(out,
                     "<svg class=\"ts-topology\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" "
                     "font-family=\"sans-serif\" role=\"img\">\n<defs><marker id=\"ts-arr\" "
                     "viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"6\" "
                     "markerHeight=\"6\" orient=\"auto-start-reverse\"><path d=\"M0 0L10 5L0 10z\" "
                     "fill=\"#777\"/></marker></defs>\n",
                     w, h, w, h);
    rc = rc ? rc : draw_edges(g, &L, out);
    rc = rc ? rc : draw_nodes(g, &L, out);
    for (int l = 0; l < 4 && !rc; l++)
        rc = buf_appendf(out,
                         "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                         "<text x=\"%d\" y=\"%d\" font-size=\"11\">%s</text>\n",
                         MARGIN + l * 140, h - 22, fill((enum topo_layer)l), MARGIN + l * 140 + 16,
                         h - 12, topo_layer_name((enum topo_layer)l));
    if (!rc && L.skipped)
        rc = buf_appendf(
            out, "<text x=\"%d\" y=\"%d\" font-size=\"11\">%zu more nodes not drawn</text>\n",
            MARGIN + 600, h - 12, L.skipped);
    rc = rc ? rc : buf_append_str(out, "</svg>\n");
out:
    ts_free(L.col);
    ts_free(L.row);
    return rc;
}

static int flags_table(const struct topo_graph *g, struct buf *out)
{
    int rc = buf_appendf(out,
                         "<h2>Risks (%zu)</h2>\n<table><tr><th>severity</th><th>kind</th>"
                         "<th>what</th></tr>\n",
                         g->n_flags);
    for (size_t i = 0; i < g->n_flags && !rc; i++) {
        rc = buf_appendf(out, "<tr class=\"%s\"><td>%s</td><td>%s</td><td>", g->flags[i].severity,
                         g->flags[i].severity, g->flags[i].kind);
        rc = rc ? rc : svg_escape(out, g->flags[i].message);
        rc = rc ? rc : buf_append_str(out, "</td></tr>\n");
    }
    return rc ? rc : buf_append_str(out, "</table>\n");
}

static int nodes_table(const struct topo_graph *g, struct buf *out)
{
    int rc = buf_append_str(out, "<h2>Nodes</h2>\n<table><tr><th>node</th><th>kind</th>"
                                 "<th>layer</th><th>seen in</th><th>calls</th><th>p50 ms</th>"
                                 "<th>p99 ms</th><th>errors</th><th>where</th></tr>\n");
    for (size_t i = 0; i < g->n_nodes && !rc; i++) {
        const struct topo_node *n = &g->nodes[i];
        if (n->merged_into != SIZE_MAX)
            continue;
        rc = buf_append_str(out, "<tr><td>");
        rc = rc ? rc : svg_escape(out, n->label);
        rc = rc ? rc
                : buf_appendf(out, "</td><td>%s</td><td>%s</td><td>%s</td>", n->kind,
                              topo_layer_name(n->layer), topo_origin_name(n->origin));
        if (!rc && n->lat.calls)
            rc = buf_appendf(out, "<td>%llu</td><td>%.1f</td><td>%.1f</td><td>%.1f%%</td>",
                             (unsigned long long)n->lat.calls, n->lat.p50_ms, n->lat.p99_ms,
                             100.0 * (double)n->lat.errors / (double)n->lat.calls);
        else if (!rc)
            rc = buf_append_str(out, "<td></td><td></td><td></td><td></td>");
        rc = rc ? rc : buf_append_str(out, "<td>");
        if (!rc && n->file[0]) {
            rc = svg_escape(out, n->file);
            rc = rc ? rc : buf_appendf(out, ":%d", n->line);
        }
        rc = rc ? rc : buf_append_str(out, "</td></tr>\n");
    }
    return rc ? rc : buf_append_str(out, "</table>\n");
}

int topo_html_render(const struct topo_graph *g, struct buf *out)
{
    int rc = buf_append_str(
        out, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
             "<title>tokenstorm topology</title><style>body{font-family:sans-serif;margin:2em}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;"
             "text-align:left}tr.high td:first-child{color:#c00;font-weight:bold}"
             ".ts-topology{max-width:100%;height:auto}</style></head><body>\n"
             "<h1>Dependency topology</h1>\n");
    rc = rc ? rc
            : buf_appendf(out, "<p>%llu Python files, %llu spans in %llu traces.</p>\n",
                          (unsigned long long)g->files, (unsigned long long)g->spans,
                          (unsigned long long)g->traces);
    rc = rc ? rc : topo_svg_render(g, out);
    rc = rc ? rc : flags_table(g, out);
    rc = rc ? rc : nodes_table(g, out);
    return rc ? rc : buf_append_str(out, "</body></html>\n");
}
