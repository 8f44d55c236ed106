/*
 * reqtrace.h - tracing of the load engine's requests: W3C trace context on
 * every request, and one OpenTelemetry CLIENT span per request handed to the
 * OTLP exporter (telemetry/otlp.h).
 *
 * Every request gets a fresh random trace id and span id (a per-thread
 * generator seeded from getrandom(): not from --seed, so two runs never share
 * trace ids) and carries them as a `traceparent` header (sampled flag set),
 * plus a `baggage` header with tokenstorm.request_id (the X-Request-Id
 * value), tokenstorm.tenant and tokenstorm.scenario, percent-encoded. A
 * server that continues the W3C context (vLLM with OpenTelemetry enabled)
 * puts its spans into the same trace, under the request's span. When the
 * configuration carries a parent context (a --header traceparent given by
 * the user), every request joins that trace as a child of its parent-id.
 *
 * With an exporter, when a request ends its span is built from the request's
 * record (analysis/record.h) and pushed; the worker never waits on it. Headers
 * are sent whether or not spans are exported.
 *
 * Threads: struct reqtrace_run is set up by the coordinator before the
 * workers start and read-only while they run; struct reqtrace lives in one
 * request and is used by its worker only.
 */
#ifndef TS_LOAD_REQTRACE_H
#define TS_LOAD_REQTRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/traceparent.h"
#include "analysis/record.h"
#include "workload/workload.h"
#include "telemetry/otlp.h"

#define REQTRACE_BAGGAGE_MAX 1024 /* bytes of tokenstorm's baggage header value */

/* What the runner's caller says about tracing (part of struct runner_config). */
struct reqtrace_config {
    const struct otlp_config *otlp;  /* NULL or no endpoint: no spans are exported */
    const char *model;               /* gen_ai.request.model (NULL: none) */
    const char *provider;            /* gen_ai.provider.name (NULL: "openai") */
    const char *scenario;            /* baggage tokenstorm.scenario (NULL: "run") */
    const char *const *tenant_names; /* tenant index -> name; beyond: the index */
    size_t n_tenants;
    double temperature; /* gen_ai.request.temperature; NAN (or 0 with !has_temperature): none */
    bool has_temperature;
    bool has_parent; /* join this trace instead of starting one per request */
    struct trace_context parent;
};

/* Run-wide state (in struct runner). */
struct reqtrace_run {
    const struct reqtrace_config *cfg;
    struct otlp_exporter *exporter; /* NULL: spans are not exported */
    const char *operation;          /* gen_ai.operation.name of the endpoint */
    int64_t wall_minus_mono;        /* ns: converts ts_now_ns() times to Unix time */
    int32_t server_port;
    char server_address[256];
};

/* One request's ids and what its response said (in struct exch). */
struct reqtrace {
    uint8_t trace_id[TRACE_ID_LEN];
    uint8_t span_id[SPAN_ID_LEN];
    bool started;
    char response_id[64];
    char response_model[96];
};

/* The header lines of one request (storage for reqtrace_begin). */
struct reqtrace_headers {
    char traceparent[sizeof("traceparent: ") + TRACEPARENT_LEN];
    char baggage[sizeof("baggage: ") + REQTRACE_BAGGAGE_MAX];
};

/*
 * Sets up t for a run against url (the full endpoint URL) of endpoint ep:
 * parses the server address and port, and starts the exporter when
 * cfg->otlp has an endpoint. cfg must outlive t. Returns 0, or a negative
 * code with a message in err (t then needs no finish).
 */
TS_MUST_CHECK int reqtrace_run_init(struct reqtrace_run *t, const struct reqtrace_config *cfg,
                                    const char *url, enum workload_endpoint ep, char *err,
                                    size_t errlen);

/*
 * Flushes and stops the exporter (a bounded wait, see otlp_exporter_close)
 * once every request has ended. Fills *stats and *enabled when not NULL.
 * Safe to call twice (the second call finds nothing to do and reports
 * "not enabled").
 */
void reqtrace_run_finish(struct reqtrace_run *t, struct otlp_stats *stats, bool *enabled);

/*
 * Starts request `index` of run run_id: new ids in rt, and the two header
 * lines "traceparent: ..." and "baggage: ..." written to h and appended to
 * out (room for 2 pointers). Returns how many pointers were appended: 2
 * (baggage is left out only if it could not hold even the request id).
 */
size_t reqtrace_begin(struct reqtrace *rt, const struct reqtrace_run *t, uint64_t run_id,
                      uint64_t index, uint16_t tenant, struct reqtrace_headers *h,
                      const char **out);

/*
 * A user's "--header 'traceparent: ...'" line: returns 1 and fills *parent
 * when line is a traceparent header with a valid value (the run then joins
 * that trace instead of sending the header as is), 0 when line is another
 * header, TS_PARSE when it is a traceparent header with an invalid value.
 */
TS_MUST_CHECK int reqtrace_header_parent(const char *line, struct trace_context *parent);

/* Notes the response's id and model (the first ones seen are kept); NULLs
 * are ignored. Returns whether both are known now (later calls can stop). */
bool reqtrace_note(struct reqtrace *rt, const char *id, const char *model);

/*
 * Builds the request's span from its final record and pushes it to the
 * exporter. A no-op without an exporter or when reqtrace_begin never ran.
 * run_id and r->id name the request (tokenstorm.request_id).
 */
void reqtrace_end(const struct reqtrace *rt, const struct reqtrace_run *t, uint64_t run_id,
                  const struct req_record *r);

/* Fills s from a finished request (the part reqtrace_end does; for tests). */
void reqtrace_span_of(struct otlp_span *s, const struct reqtrace *rt, const struct reqtrace_run *t,
                      uint64_t run_id, const struct req_record *r);

#endif
