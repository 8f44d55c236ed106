/*
 * Fuzz the OTLP JSON trace reader (telemetry/otlp_read.h) and what is built
 * from its spans: any bytes are read as OTLP documents (JSON lines), the
 * spans kept go into a dependency graph (parent lookups, the critical path,
 * repeated or cyclic ids), which is finished and written in every format.
 * Invariants: counts add up, strings stay NUL-terminated within their
 * fields, and the JSON written is JSON.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "analysis/topo.h"
#include "telemetry/otlp_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct otlp_spans s;
    otlp_spans_init(&s, 512);
    char err[256];
    (void)otlp_read_json(&s, (const char *)data, size, err, sizeof(err));
    if (s.n > 512 || (s.dropped && s.n != 512))
        abort();
    for (size_t i = 0; i < s.n; i++) {
        if (memchr(s.v[i].name, 0, sizeof(s.v[i].name)) == NULL ||
            memchr(s.v[i].url, 0, sizeof(s.v[i].url)) == NULL || s.v[i].end_ns < s.v[i].start_ns)
            abort();
    }
    struct topo_graph *g = calloc(1, sizeof(*g));
    if (!g)
        abort();
    topo_init(g);
    if (!topo_add_spans(g, &s) && !topo_finish(g)) {
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
    otlp_spans_release(&s);
    return 0;
}
