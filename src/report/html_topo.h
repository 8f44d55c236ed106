/*
 * html_topo.h - one topology's section of the HTML report ("topo<N>", N
 * counting the topologies of the page from 1): what it was built from, the
 * picture drawn by topo_svg_render() (<svg id="topo<N>-graph"
 * class="ts-topology">), the risk flags as a table (id "topo<N>-flags",
 * one row per flag, class "high"/"medium"/"low") and the nodes' numbers in
 * a folded table. docs/TOPOLOGY.md "In the report".
 */
#ifndef TS_REPORT_HTML_TOPO_H
#define TS_REPORT_HTML_TOPO_H

#include "report/docset.h"
#include "report/html_page.h"

/* Appends the section of topology d (d->topo), numbered ++p->ntopo. */
void html_topo_section(struct html_page *p, const struct report_doc *d);

#endif
