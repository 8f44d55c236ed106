/*
 * proxy_trace.h - OpenTelemetry spans of the chaos proxy.
 *
 * When the proxy has an OTLP exporter (tokenstorm proxy --otlp-endpoint) and
 * a request carries a valid W3C traceparent, the proxy records one span for
 * its handling of that request: kind SERVER (the proxy is the server side of
 * the client's CLIENT span, per the OpenTelemetry span-kind rules), named
 * "tokenstorm.proxy {method} {path}", in the client's trace with the client's
 * span as parent. Each fault that applied to the request is a span event
 * "tokenstorm.fault" with tokenstorm.fault.name, tokenstorm.fault.type and
 * the fault's key parameters (status, delay, bytes, rate, when set). The
 * upstream gets a traceparent naming the proxy span as parent, so the
 * server's spans sit under the proxy span. Requests without a fault are
 * exported only when `all` is set (--otlp-all). Requests without a
 * (valid) traceparent are never traced and their traceparent, if any, is
 * forwarded unchanged.
 *
 * A tracer and its spans are used on one loop thread (the proxy has one
 * tracer per loop, proxy_tracer_init_from); the exporter's push is the only
 * cross-thread step (a copy into its ring; never blocks).
 */
#ifndef TS_CHAOS_PROXY_TRACE_H
#define TS_CHAOS_PROXY_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/rng.h"
#include "base/traceparent.h"
#include "chaos/fault.h"
#include "net/http_server.h"
#include "telemetry/otlp.h"

/* Shared by all requests of a proxy. */
struct proxy_tracer {
    struct otlp_exporter *exporter; /* borrowed; NULL: tracing off */
    bool all;                       /* export spans of requests without faults too */
    char server_address[256];       /* host of the upstream (server.address) */
    const char *address;            /* what spans point at (the exporter reads it when it
                                       sends): server_address, or the one of the tracer
                                       passed to proxy_tracer_init_from */
    int server_port;                /* its port (server.port) */
    struct rng ids;                 /* span ids */
    uint64_t spans;                 /* pushed to the exporter */
};

/* One request's span being built (embedded in the proxy's request). */
struct proxy_trace {
    bool on;                               /* a valid traceparent came with the request */
    int status;                            /* the response status sent; 0: none */
    char traceparent[TRACEPARENT_LEN + 1]; /* to send upstream (the proxy span as parent) */
    struct otlp_span span;
};

/*
 * Sets up tr for exporter e (NULL: off; borrowed, must outlive every
 * proxy_trace_finish) and the upstream base URL (its host and port become
 * server.address and server.port; an unparsable URL leaves them absent).
 */
void proxy_tracer_init(struct proxy_tracer *tr, struct otlp_exporter *e, bool all,
                       const char *upstream);

/*
 * Sets up tr like base (exporter, all, server address and port) with span
 * ids of its own, for another thread. Its spans borrow base's address
 * string: base must outlive every span tr pushes (until the exporter is
 * closed).
 */
void proxy_tracer_init_from(struct proxy_tracer *tr, const struct proxy_tracer *base);

/*
 * Starts t for req at wall time now_unix_ns: on only when tr has an exporter
 * and req has a valid traceparent header. Takes no resources (nothing to
 * release if the span is never finished).
 */
void proxy_trace_begin(struct proxy_trace *t, struct proxy_tracer *tr,
                       const struct http_request *req, uint64_t now_unix_ns);

/*
 * Records that fault f was injected at now_unix_ns: an event, once per fault
 * name (a fault applied twice to one request is one event). No-op when t is
 * off. Past OTLP_MAX_EVENTS events the span's dropped count grows.
 */
void proxy_trace_fault(struct proxy_trace *t, const struct fault *f, uint64_t now_unix_ns);

/*
 * Ends t at now_unix_ns: adds events for the faults of hits[0..n) not yet
 * recorded (timed at the span start, when they were rolled), sets the status
 * attributes (status: the response status, 0 or less: none sent; >= 500 or
 * none sets span status ERROR) and pushes the span if it has a fault or
 * tr->all. Idempotent: t is off afterwards. Returns true if a span was pushed.
 */
bool proxy_trace_finish(struct proxy_trace *t, struct proxy_tracer *tr, struct fault *const *hits,
                        size_t n, uint64_t now_unix_ns);

#endif
