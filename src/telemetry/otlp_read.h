/*
 * otlp_read.h - reading OpenTelemetry traces in the OTLP JSON encoding: the
 * body of an OTLP/HTTP export (ExportTraceServiceRequest, as the npm
 * exporter-trace-otlp-http and the Collector's otlphttp exporter with
 * `encoding: json` send it) and the Collector's file exporter output (one
 * such document per line). Only what a dependency graph needs is kept of a
 * span: ids, kind, status, times, service name and a few semantic
 * attributes (docs/TOPOLOGY.md "What is read of a span").
 *
 * Bounds: a document is parsed by jansson (depth and size bounded by the
 * caller's cap on the input); at most OTLP_READ_MAX_DOCS documents per
 * input and `max` spans in a set (further spans are counted in `dropped`).
 * Strings are cut to the field sizes below. A span whose ids are not hex of
 * the right length, whose times are missing or whose end precedes its start
 * is skipped and counted in `rejected`, with the first such reason kept in
 * `first_error` ("resourceSpans[0].scopeSpans[1].spans[3]: traceId ...").
 */
#ifndef TS_TELEMETRY_OTLP_READ_H
#define TS_TELEMETRY_OTLP_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define OTLP_READ_MAX_DOCS  100000 /* JSON documents in one input (file lines) */
#define OTLP_READ_MAX_ATTRS 128    /* attributes read per span and resource */

/* One span as read. Absent strings are "", absent integers -1. */
struct otlp_rspan {
    uint8_t trace_id[16];
    uint8_t span_id[8];
    uint8_t parent_id[8]; /* all zero: a root span */
    uint8_t kind;         /* enum otlp_span_kind values (telemetry/otlp.h) */
    bool error;           /* status ERROR */
    uint64_t start_ns, end_ns;
    int32_t server_port;
    char service[64];     /* resource service.name */
    char name[128];       /* span name */
    char model[96];       /* gen_ai.request.model, else gen_ai.response.model */
    char system[48];      /* gen_ai.provider.name, else gen_ai.system */
    char operation[32];   /* gen_ai.operation.name */
    char db_system[48];   /* db.system.name, else db.system */
    char server_addr[96]; /* server.address, else net.peer.name, else peer.service */
    char url[192];        /* url.full, else http.url, else url.path (without query) */
    char route[96];       /* http.route */
    char entity[64];      /* traceloop.span.kind "." traceloop.entity.name */
};

struct otlp_spans {
    struct otlp_rspan *v;
    size_t n, cap;
    size_t max;         /* spans kept at most */
    uint64_t dropped;   /* over max */
    uint64_t rejected;  /* malformed spans skipped */
    uint64_t documents; /* JSON documents read */
    char first_error[192];
};

/* An empty set that keeps at most max spans (0: 1,000,000). */
void otlp_spans_init(struct otlp_spans *s, size_t max);
void otlp_spans_release(struct otlp_spans *s);

/*
 * Reads data[0..len): one OTLP JSON document, or several one after the
 * other (JSON lines), blank lines ignored. Spans are appended to s.
 * Returns 0; TS_PARSE when a document is not JSON or not an object with a
 * resourceSpans array, with "where: what" in err (where: "line N col M");
 * the spans of the documents before it are kept. -ENOMEM.
 */
TS_MUST_CHECK int otlp_read_json(struct otlp_spans *s, const char *data, size_t len, char *err,
                                 size_t errlen);

/* Lower-case hex of n bytes into out (2n + 1 bytes). */
void otlp_hex(const uint8_t *b, size_t n, char *out);

#endif
