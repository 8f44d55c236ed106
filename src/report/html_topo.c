/*
 * html_topo.c - one topology's section of the HTML report (see html_topo.h).
 */
#include "report/html_topo.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/topo_svg.h"

/* Files, spans and the numbers of nodes, edges and flags. */
static void topo_sub(struct html_page *p, const struct topo_graph *g)
{
    size_t nodes = 0, edges = 0;
    for (size_t i = 0; i < g->n_nodes; i++)
        nodes += g->nodes[i].merged_into == SIZE_MAX;
    for (size_t i = 0; i < g->n_edges; i++)
        edges += !g->edges[i].dead;
    html_emitf(p, "<p class=\"sub\">%zu nodes and %zu edges", nodes, edges);
    if (g->source[0]) {
        html_emit(p, " from the code in <code>");
        html_esc(p, g->source);
        html_emitf(p, "</code> (%llu Python files", (unsigned long long)g->files);
        if (g->errors_total)
            html_emitf(p, ", %llu skipped as unparseable", (unsigned long long)g->errors_total);
        html_emit(p, ")");
    }
    if (g->spans)
        html_emitf(p, "%s %llu spans in %llu traces", g->source[0] ? " and" : " from",
                   (unsigned long long)g->spans, (unsigned long long)g->traces);
    html_emit(p, ". Boxes are coloured by layer (gateway blue, model red, vector green, "
                 "infrastructure brown) and dashed when seen only in traces; edges are wider "
                 "with more calls, dashed when seen only in code, red when some calls failed, "
                 "and labelled with their p99. See docs/TOPOLOGY.md.</p>\n");
}

/* The picture, drawn straight into the page's buffer. */
static void topo_picture(struct html_page *p, const struct topo_graph *g, int n)
{
    char id[32];
    snprintf(id, sizeof(id), "topo%d-graph", n);
    html_emit(p, "<div class=\"tablewrap\">\n");
    if (!p->rc)
        p->rc = topo_svg_render(g, id, p->out);
    html_emit(p, "</div>\n");
}

static void topo_flags(struct html_page *p, const struct topo_graph *g, int n)
{
    char v[32];
    if (!g->n_flags) {
        html_emit(p, "<h3>Risks</h3>\n<p class=\"note\">No risk found along the chain.</p>\n");
        return;
    }
    html_emitf(p,
               "<h3>Risks (%zu)</h3>\n<div class=\"tablewrap\"><table id=\"topo%d-flags\">"
               "<tr><th>severity</th><th class=\"l\">kind</th><th class=\"l\">node</th>"
               "<th>value</th><th class=\"l\">what</th></tr>\n",
               g->n_flags, n);
    for (size_t i = 0; i < g->n_flags; i++) {
        const struct topo_flag *f = &g->flags[i];
        bool high = f->severity[0] == 'h';
        html_emit(p, "<tr class=\"");
        html_esc(p, f->severity);
        html_emitf(p, "\"><td%s>", high ? " class=\"fail\"" : "");
        html_esc(p, f->severity);
        html_emit(p, "</td><td class=\"l\">");
        html_esc(p, f->kind);
        html_emit(p, "</td><td class=\"l\">");
        html_esc(p, f->node < g->n_nodes ? g->nodes[f->node].label : "?");
        html_emitf(p, "</td><td>%s%s</td><td class=\"l\" style=\"white-space:normal\">",
                   html_fmt_num(f->value, 0, v, sizeof(v)),
                   isnan(f->value)                           ? ""
                   : !strcmp(f->kind, "retry_amplification") ? " calls"
                                                             : " ms");
        html_esc(p, f->message);
        html_emit(p, "</td></tr>\n");
    }
    html_emit(p, "</table></div>\n");
}

static void topo_nodes(struct html_page *p, const struct topo_graph *g)
{
    char a[32], b[32], c[32];
    html_emit(p, "<details><summary>Nodes</summary>\n<div class=\"tablewrap\"><table>"
                 "<caption class=\"note\">Latencies in milliseconds, from traces.</caption>"
                 "<tr><th>node</th><th class=\"l\">kind</th><th class=\"l\">layer</th>"
                 "<th class=\"l\">seen in</th><th>calls</th><th>p50</th><th>p99</th>"
                 "<th>errors</th><th>timeout</th><th class=\"l\">where</th></tr>\n");
    for (size_t i = 0; i < g->n_nodes; i++) {
        const struct topo_node *n = &g->nodes[i];
        if (n->merged_into != SIZE_MAX)
            continue;
        html_emit(p, "<tr><td>");
        html_esc(p, n->label);
        html_emit(p, "</td><td class=\"l\">");
        html_esc(p, n->kind);
        html_emitf(p, "</td><td class=\"l\">%s</td><td class=\"l\">%s</td>",
                   topo_layer_name(n->layer), topo_origin_name(n->origin));
        if (n->lat.calls)
            html_emitf(p, "<td>%llu</td><td>%s</td><td>%s</td><td>%s</td>",
                       (unsigned long long)n->lat.calls, html_fmt_ms(n->lat.p50_ms, a, sizeof(a)),
                       html_fmt_ms(n->lat.p99_ms, b, sizeof(b)),
                       html_fmt_pct((double)n->lat.errors / (double)n->lat.calls, c, sizeof(c)));
        else
            html_emit(p, "<td>-</td><td>-</td><td>-</td><td>-</td>");
        html_emitf(p, "<td>%s</td><td class=\"l\">",
                   n->timeout_s >= 0 ? html_fmt_ms(n->timeout_s * 1e3, a, sizeof(a)) : "-");
        if (n->file[0]) {
            html_esc(p, n->file);
            html_emitf(p, ":%d", n->line);
        }
        html_emit(p, "</td></tr>\n");
    }
    html_emit(p, "</table></div></details>\n");
}

void html_topo_section(struct html_page *p, const struct report_doc *d)
{
    int n = ++p->ntopo;
    if (!d->topo)
        return;
    html_emitf(p, "<section id=\"topo%d\"><h2>Topology: ", n);
    html_esc(p, d->name);
    html_emit(p, "</h2>\n");
    topo_sub(p, d->topo);
    topo_picture(p, d->topo, n);
    topo_flags(p, d->topo, n);
    topo_nodes(p, d->topo);
    html_emit(p, "</section>\n");
}
