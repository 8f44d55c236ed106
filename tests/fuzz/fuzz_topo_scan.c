/*
 * Fuzz the reading of the topology scan's JSON (analysis/topo.h,
 * topo_load_scan: what the embedded Python helper writes on a pipe) and
 * everything downstream of it: merging, retry paths over arbitrary edges
 * (cycles, fan-out), flags and the writers. The JSON written must be JSON.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <jansson.h>

#include "analysis/topo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct topo_graph *g = calloc(1, sizeof(*g));
    if (!g)
        abort();
    topo_init(g);
    char err[256];
    int rc = topo_load_scan(g, (const char *)data, size, err, sizeof(err));
    if (rc != 0 && rc != TS_PARSE && rc != TS_TOOBIG && rc != -ENOMEM)
        abort();
    if (g->n_errors > TOPO_MAX_ERRORS || g->n_nodes > TOPO_MAX_NODES)
        abort();
    if (!topo_finish(g)) {
        json_t *doc = topo_to_json(g);
        char *text = doc ? json_dumps(doc, 0) : NULL;
        json_t *back = text ? json_loads(text, 0, NULL) : NULL;
        if (doc && !back)
            abort();
        json_decref(back);
        free(text);
        json_decref(doc);
        struct buf b;
        buf_init(&b, 64u << 20);
        (void)topo_write_dot(g, &b);
        (void)topo_write_mermaid(g, &b);
        (void)topo_write_text(g, &b);
        buf_release(&b);
    }
    topo_release(g);
    free(g);
    return 0;
}
