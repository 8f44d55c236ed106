/*
 * topo_svg.h - the dependency graph (analysis/topo.h) as a picture: an
 * inline SVG drawn by tokenstorm (no script, no external resource) and a
 * self-contained HTML page around it with the risk flags and the nodes'
 * numbers (docs/TOPOLOGY.md "The picture").
 *
 * Layout: nodes in columns by their longest path from a node nobody calls
 * (cycles cut), stacked in each column; boxes filled with their layer's
 * colour (gateway blue, model red, vector green, infrastructure brown),
 * dashed when seen only in traces; edges as curves, wider with more calls
 * (1 + 2 log10(1 + calls)), dashed when seen only in code, labelled with
 * their p99. At most TOPO_SVG_MAX_NODES nodes are drawn (the rest counted
 * in a note). Output appends to a capped struct buf: 0, -ENOMEM, TS_TOOBIG.
 */
#ifndef TS_REPORT_TOPO_SVG_H
#define TS_REPORT_TOPO_SVG_H

#include "analysis/topo.h"
#include "base/buf.h"
#include "base/err.h"

#define TOPO_SVG_MAX_NODES 400

/* The <svg> element (class "ts-topology"). */
TS_MUST_CHECK int topo_svg_render(const struct topo_graph *g, struct buf *out);

/* A whole HTML5 page: the picture, the flags, the nodes' table. */
TS_MUST_CHECK int topo_html_render(const struct topo_graph *g, struct buf *out);

#endif
