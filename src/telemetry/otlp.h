/*
 * otlp.h - OpenTelemetry traces: the span record, its OTLP/HTTP JSON
 * encoding, the exporter configuration from the standard OTEL_* variables,
 * and the batching exporter.
 *
 * Span model. struct otlp_span is a compact, fixed-size record of one
 * operation: ids, times, and the GenAI fields tokenstorm knows about a
 * request (semantic conventions for GenAI client spans). It holds no heap
 * memory; the few strings that are the same for a whole run (operation,
 * provider, request model, server address, outcome) are borrowed pointers
 * that must stay valid until otlp_exporter_close() returns; the per-request
 * strings are copied into the record. A span with a zero parent_span_id is a
 * root span; a non-zero one is a child of that span in the same trace (the
 * model for flow steps as children of a flow span: the flow span is a span of
 * its own with operation "invoke_workflow" or similar, kind INTERNAL, and each
 * step's CLIENT span carries its span_id as parent_span_id).
 *
 * Encoding. otlp_encode_request() writes an ExportTraceServiceRequest in
 * the OTLP JSON Protobuf encoding: lowerCamelCase keys, trace and span ids as
 * lower-case hex (32 and 16 digits), 64-bit integers (times, intValue) as
 * decimal strings, enums (kind, status code) as integers. Every string is
 * escaped as JSON, and bytes that are not valid UTF-8 become U+FFFD, so
 * nothing from a server can break the document. Attribute keys, event name
 * and status rules: see docs/OBSERVABILITY.md "Traces".
 *
 * Exporter. struct otlp_exporter owns a thread with its own libuv loop and
 * HTTP client (net/http_client.h). Producers (the load workers) call
 * otlp_exporter_push() from any thread: a copy into a bounded ring under a
 * mutex held for one memcpy; when the ring is full the span is dropped and
 * counted, the producer never waits. The exporter thread sends a batch when
 * max_batch spans are queued or every schedule_delay, at most
 * OTLP_MAX_INFLIGHT exports at a time, optionally gzip-compressed. Answers:
 * 2xx is success (a JSON partialSuccess.rejectedSpans counts those spans as
 * failed, no retry); 429, 502, 503, 504 and transport errors (connect, reset,
 * timeout) are retried with exponential backoff and jitter, or after the
 * server's Retry-After, up to max_attempts sends; 400, other 4xx and other
 * statuses fail the batch at once. otlp_exporter_close() flushes what is
 * queued and waits for it at most flush_timeout; what is still unsent then
 * counts as failed. After close, pushed = exported + dropped + failed.
 *
 * Secrets: header values (OTEL_EXPORTER_OTLP_HEADERS) are never logged; the
 * endpoint is logged without its user-info part.
 */
#ifndef TS_TELEMETRY_OTLP_H
#define TS_TELEMETRY_OTLP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/traceparent.h"

#define OTLP_MAX_HEADERS     32          /* from OTEL_EXPORTER_OTLP_*HEADERS */
#define OTLP_MAX_RESOURCE    32          /* attributes from OTEL_RESOURCE_ATTRIBUTES */
#define OTLP_MAX_INFLIGHT    4           /* concurrent exports */
#define OTLP_MAX_BODY        (20u << 20) /* an export's JSON, before compression */
#define OTLP_MAX_RETRY_AFTER 60          /* seconds: a longer Retry-After is cut to this */

enum otlp_span_kind {
    OTLP_KIND_UNSPECIFIED = 0,
    OTLP_KIND_INTERNAL = 1,
    OTLP_KIND_SERVER = 2,
    OTLP_KIND_CLIENT = 3,
    OTLP_KIND_PRODUCER = 4,
    OTLP_KIND_CONSUMER = 5,
};

#define OTLP_MAX_EVENTS      4   /* events of a span besides gen_ai.first_chunk */
#define OTLP_MAX_EVENT_ATTRS 12  /* attributes over all events of a span */
#define OTLP_EVENT_TEXT      320 /* bytes of attribute values over all events of a span */

/* One span event; its attributes are event_attrs[first_attr..+n_attrs) of the span. */
struct otlp_event {
    uint64_t time_unix_ns;
    const char *name; /* borrowed: a string constant */
    uint8_t first_attr, n_attrs;
    uint8_t dropped_attrs; /* droppedAttributesCount: did not fit */
};

/* One event attribute: a string, or an integer when is_int. */
struct otlp_event_attr {
    const char *key; /* borrowed: a string constant */
    uint16_t off;    /* of the NUL-terminated value in the span's event_text */
    bool is_int;     /* the value is a decimal integer, written as intValue */
};

enum otlp_status_code {
    OTLP_STATUS_UNSET = 0,
    OTLP_STATUS_OK = 1,
    OTLP_STATUS_ERROR = 2,
};

/*
 * One span. Integers set to -1 and doubles set to NAN are left out of the
 * encoding; empty strings and NULL pointers likewise. otlp_span_init() sets
 * every optional field to "absent".
 */
struct otlp_span {
    uint8_t trace_id[TRACE_ID_LEN];
    uint8_t span_id[SPAN_ID_LEN];
    uint8_t parent_span_id[SPAN_ID_LEN]; /* all zero: a root span */
    uint8_t kind;                        /* enum otlp_span_kind */
    uint8_t status;                      /* enum otlp_status_code */
    bool stream;                         /* gen_ai.request.stream (only written when true) */
    bool warmup;                         /* tokenstorm.warmup (only written when true) */
    uint64_t start_unix_ns, end_unix_ns;
    uint64_t first_chunk_unix_ns; /* 0: no first-chunk event */

    /* borrowed, run-wide (see the top of this file) */
    const char *operation;      /* gen_ai.operation.name: "chat", "text_completion", ... */
    const char *provider;       /* gen_ai.provider.name */
    const char *request_model;  /* gen_ai.request.model */
    const char *server_address; /* server.address */
    const char *outcome;        /* tokenstorm.outcome */
    int32_t server_port;        /* server.port; -1 none */
    int32_t http_status;        /* http.response.status_code; -1 none */
    int32_t tenant;             /* tokenstorm.tenant; -1 none */

    int64_t max_tokens;           /* gen_ai.request.max_tokens */
    int64_t input_tokens;         /* gen_ai.usage.input_tokens (server usage) */
    int64_t output_tokens;        /* gen_ai.usage.output_tokens (server usage) */
    int64_t client_output_tokens; /* tokenstorm.output_tokens (what the metrics use) */
    double temperature;           /* gen_ai.request.temperature */
    double ttfc_s;                /* gen_ai.response.time_to_first_chunk (from the send) */
    double ttft_ms;               /* tokenstorm.ttft_ms (from the intended time) */
    double itl_mean_ms;           /* tokenstorm.itl.mean_ms */
    double itl_max_ms;            /* tokenstorm.itl.max_ms */
    double lag_ms;                /* tokenstorm.schedule_lag_ms */

    char request_id[48];     /* tokenstorm.request_id */
    char response_id[64];    /* gen_ai.response.id */
    char response_model[96]; /* gen_ai.response.model */
    char finish_reason[16];  /* gen_ai.response.finish_reasons: ["..."] */
    char error_type[32];     /* error.type (with status ERROR) */
    char status_message[96]; /* status.message (with status ERROR) */

    /* generic fields (the proxy's spans; NULL / "" / -1 / 0: absent) */
    const char *name_prefix; /* borrowed: the name is "{name_prefix} {http_method} {url_path}"
                                instead of "{operation} {request model}" */
    char http_method[16];    /* http.request.method */
    char url_path[128];      /* url.path */
    int32_t faults_count;    /* tokenstorm.faults.count; -1 none */
    uint32_t dropped_events; /* droppedEventsCount: events that did not fit */
    uint8_t n_events;        /* events[0..n_events) after the first-chunk event */
    uint8_t n_event_attrs;
    uint16_t event_text_len;
    struct otlp_event events[OTLP_MAX_EVENTS];
    struct otlp_event_attr event_attrs[OTLP_MAX_EVENT_ATTRS];
    char event_text[OTLP_EVENT_TEXT];
};

/* Zeroes s and marks every optional field absent (-1, NAN, ""). */
void otlp_span_init(struct otlp_span *s);

/*
 * Span events (kept in the record: no heap). otlp_span_add_event() appends
 * an event named name (a string constant, borrowed) at time_unix_ns; it
 * returns 0, or TS_TOOBIG when s has OTLP_MAX_EVENTS events already (then
 * s->dropped_events grows). otlp_span_event_str() / _int() add an attribute
 * (key a string constant, borrowed) to the last event added: 0; -EINVAL when
 * s has no event (or the last one was dropped); TS_TOOBIG when the span's
 * attribute slots or value bytes are used up (the event's dropped_attrs
 * grows). A string value is cut at a UTF-8 boundary to at most 63 bytes; an
 * empty or NULL value adds nothing (0).
 */
int otlp_span_add_event(struct otlp_span *s, const char *name, uint64_t time_unix_ns);
int otlp_span_event_str(struct otlp_span *s, const char *key, const char *value);
int otlp_span_event_int(struct otlp_span *s, const char *key, int64_t value);

/* Copies the C string src into dst (cap bytes) cut at a UTF-8 character
 * boundary, so a cut never leaves half a character. */
void otlp_copy_str(char *dst, size_t cap, const char *src);

/* One resource attribute (string valued). */
struct otlp_kv {
    char *key;
    char *value;
};

/* What the exporter sends and where; built by otlp_config_from_env(). */
struct otlp_config {
    char *endpoint; /* full URL of the traces endpoint (owned) */
    char **headers; /* "Name: value" (owned), n_headers of them */
    size_t n_headers;
    char *ca_file;                              /* OTEL_EXPORTER_OTLP_CERTIFICATE or NULL (owned) */
    char *service_name;                         /* resource service.name (owned) */
    struct otlp_kv resource[OTLP_MAX_RESOURCE]; /* more resource attributes (owned) */
    size_t n_resource;
    bool gzip;
    uint32_t timeout_ms;         /* per export attempt (OTEL_EXPORTER_OTLP_TIMEOUT, 10000) */
    uint32_t schedule_delay_ms;  /* OTEL_BSP_SCHEDULE_DELAY, 1000 */
    uint32_t max_queue;          /* OTEL_BSP_MAX_QUEUE_SIZE, 8192 */
    uint32_t max_batch;          /* OTEL_BSP_MAX_EXPORT_BATCH_SIZE, 512 */
    uint32_t max_attempts;       /* sends of one batch, 5 */
    uint32_t backoff_initial_ms; /* 500; doubles per retry, jittered 0.5-1.5x */
    uint32_t backoff_max_ms;     /* 8000 */
    uint32_t flush_timeout_ms;   /* bounded wait of otlp_exporter_close(), 5000 */
};

/* Sets the defaults above; no endpoint (tracing off), service "tokenstorm". */
void otlp_config_init(struct otlp_config *cfg);
/* Frees what cfg owns and re-initialises it. */
void otlp_config_release(struct otlp_config *cfg);

/*
 * Fills cfg (initialised with otlp_config_init) from the command line and the
 * environment. The endpoint is, in this order: cli_endpoint (NULL: none; a
 * URL whose path does not already end in /v1/traces gets it appended);
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as is);
 * OTEL_EXPORTER_OTLP_ENDPOINT (+ "/v1/traces", without a double slash). The
 * variables are ignored when OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER
 * is "none". Also read: OTEL_EXPORTER_OTLP_HEADERS then _TRACES_HEADERS
 * ("k=v,k2=v2", values percent-decoded, the traces list wins for the same
 * key), _COMPRESSION / _TRACES_COMPRESSION ("gzip" or "none"),
 * _TIMEOUT / _TRACES_TIMEOUT (ms), _CERTIFICATE / _TRACES_CERTIFICATE,
 * _PROTOCOL / _TRACES_PROTOCOL (only http/json is spoken: anything else is
 * warned about), OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
 * OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_MAX_QUEUE_SIZE,
 * OTEL_BSP_MAX_EXPORT_BATCH_SIZE. Returns 0 (cfg->endpoint is NULL when
 * tracing stays off), -EINVAL with a message in err (a URL that is not http
 * or https, a malformed list; the message never contains a header value), or
 * -ENOMEM.
 */
TS_MUST_CHECK int otlp_config_from_env(struct otlp_config *cfg, const char *cli_endpoint, char *err,
                                       size_t errlen);

/*
 * Parses a "k=v,k2=v2" list (OTEL_EXPORTER_OTLP_HEADERS, _RESOURCE_ATTRIBUTES
 * syntax: blanks around items allowed, values percent-decoded, keys taken as
 * written) calling fn(key, value, arg) for each pair with NUL-terminated
 * copies valid during the call. Returns 0, what fn returned if not 0, TS_PARSE
 * for an item without '=' or with an empty key or a bad %XX, or TS_TOOBIG for
 * an item over 8 KiB.
 */
TS_MUST_CHECK int otlp_parse_kv_list(const char *list,
                                     int (*fn)(const char *key, const char *value, void *arg),
                                     void *arg);

/*
 * Appends one span as an OTLP JSON Span object to out. Returns 0, -ENOMEM or
 * TS_TOOBIG (out's cap); on error out may hold a partial object.
 */
TS_MUST_CHECK int otlp_encode_span(struct buf *out, const struct otlp_span *s);

/*
 * Appends a whole ExportTraceServiceRequest holding spans[0..n) under one
 * resource (service.name and cfg's resource attributes) and one scope
 * ("tokenstorm", version) to out. Returns 0, -ENOMEM or TS_TOOBIG.
 */
TS_MUST_CHECK int otlp_encode_request(struct buf *out, const struct otlp_config *cfg,
                                      const struct otlp_span *spans, size_t n);

/*
 * Reads an OTLP/HTTP JSON response body: *rejected is
 * partialSuccess.rejectedSpans (0 when absent, or when the body is empty or
 * not JSON: a server that accepted the request). Returns 0 or TS_PARSE for a
 * rejectedSpans that is not a non-negative integer (number or string).
 */
TS_MUST_CHECK int otlp_parse_response(const char *body, size_t len, uint64_t *rejected);

/* Counters of an exporter; after close, exported + dropped + failed = spans pushed. */
struct otlp_stats {
    uint64_t exported; /* accepted by the receiver */
    uint64_t dropped;  /* the queue was full when pushed */
    uint64_t failed;   /* rejected (4xx, partial success), out of retries, or unsent at close */
    uint64_t retries;  /* re-sends of batches */
    uint64_t batches;  /* export requests that got an answer or failed for good */
};

/* The counters as the "otlp" object of result.json: {"exported", "dropped",
 * "failed", "retries", "batches"}; a new reference, NULL when out of memory. */
json_t *otlp_stats_json(const struct otlp_stats *st);

/* The one-line text summary ("traces (OTLP): 20 exported, 0 dropped, 0 failed")
 * into out (n bytes, NUL-terminated). */
void otlp_stats_format(const struct otlp_stats *st, char *out, size_t n);

struct otlp_exporter;

/*
 * Starts an exporter for cfg (which must have an endpoint; copied, cfg need
 * not outlive the call) with its thread. http_client_global_init() must have
 * run. Returns 0 and *out, or -EINVAL / -ENOMEM / a libuv or pthread error
 * with a message in err.
 */
TS_MUST_CHECK int otlp_exporter_new(const struct otlp_config *cfg, struct otlp_exporter **out,
                                    char *err, size_t errlen);

/*
 * Queues a copy of s for export. Thread-safe, never blocks beyond a short
 * mutex. Returns 0, or TS_AGAIN when the queue was full or the exporter is
 * closing (the span is dropped and counted).
 */
int otlp_exporter_push(struct otlp_exporter *e, const struct otlp_span *s);

/* A snapshot of the counters (thread-safe; exact only after close). */
void otlp_exporter_stats(struct otlp_exporter *e, struct otlp_stats *out);

/*
 * Flushes what is queued, waits at most cfg.flush_timeout_ms for the exports
 * (retries included) to finish, cuts what is left (counted as failed), stops
 * the thread and frees e. Fills *stats when not NULL. NULL e is a no-op.
 * Blocks the caller for up to flush_timeout_ms plus a little.
 */
void otlp_exporter_close(struct otlp_exporter *e, struct otlp_stats *stats);

#endif
