/*
 * Fuzz `tokenstorm report` on a topology.json (report/docset.h reading it
 * with analysis/topo.h's topo_from_json, report/html.h drawing it with
 * topo_svg): a document refused must say why; one accepted is drawn into a
 * page that holds no markup from the input (no "<script" anywhere: names
 * and messages are escaped), and written back as JSON it reads again.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "report/docset.h"
#include "report/html.h"
#include "report/topo_svg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Written back and read again: the same numbers of nodes, edges and flags. */
static void round_trip(const struct topo_graph *g)
{
    json_t *doc = topo_to_json(g);
    struct topo_graph back;
    char err[256] = "";
    if (!doc)
        return; /* out of memory */
    topo_init(&back);
    int rc = topo_from_json(&back, doc, err, sizeof(err));
    /* ms -> s -> ms may round a timeout at the very bound over it */
    if (rc && !(rc == TS_PARSE && strstr(err, "timeout_ms")) && rc != -ENOMEM)
        abort();
    if (!rc &&
        (back.n_nodes != g->n_nodes || back.n_edges != g->n_edges || back.n_flags != g->n_flags))
        abort();
    topo_release(&back);
    json_decref(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct report_docset set;
    char err[512] = "";
    json_t *doc = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!doc)
        return 0;
    report_docset_init(&set);
    int rc = report_docset_add_json(&set, doc, "fuzz", "fuzz.json", NULL, err, sizeof(err));
    json_decref(doc);
    if (rc && !err[0])
        abort();
    if (!rc && set.docs[0].kind == REPORT_DOC_TOPOLOGY) {
        struct buf page;
        buf_init(&page, 64u << 20);
        rc = report_html_build(&set, NULL, &page);
        if (rc != 0 && rc != TS_TOOBIG && rc != -ENOMEM)
            abort();
        if (!rc && strstr(buf_cstr(&page), "<script"))
            abort();
        buf_release(&page);
        round_trip(set.docs[0].topo);
    }
    report_docset_release(&set);
    return 0;
}
