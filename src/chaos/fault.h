/*
 * fault.h - one chaos fault: its spec (type, direction, probability, match
 * selectors, time window, parameters), the one spec parser (JSON; YAML files
 * are turned into the same JSON value first), and the per-response stream
 * transform interface used by the SSE, LLM and RAG faults.
 *
 * docs/CHAOS.md is the user's manual of the spec format. Summary:
 *
 *   {
 *     "name": "cut7",                 required, [A-Za-z0-9_.-]{1,63}
 *     "type": "sse_truncate",         required, one of fault_type_name()
 *     "direction": "downstream",      optional: "upstream" (acts on the
 *                                     request) or "downstream" (on the
 *                                     response); default per type
 *                                     (fault_type_default_dir)
 *     "probability": 0.3,             optional, 0..1, default 1
 *     "match": {                      optional, all given selectors must hold
 *       "path": "/v1/chat",           glob (fnmatch, if it has * ? or [) or
 *                                     prefix ("/v1/chat" matches
 *                                     "/v1/chat/completions"); query excluded
 *       "method": "POST",             exact, case-insensitive
 *       "header": {"x-a": "b"},       one header NAME: VALUE (value "" or "*":
 *                                     the header is present with any value)
 *       "model": "gpt-x",             the "model" member of the JSON body
 *       "tenant": "acme",             the value of the tenant header
 *       "tenant_header": "x-tenant-id"   which header names the tenant
 *     },
 *     "start": "10s",                 optional: active from this long after
 *                                     the fault was added (default 0)
 *     "duration": "30s",              optional: active for this long
 *                                     (default 0 = forever)
 *     ...type parameters, flat: see "Parameters" below
 *   }
 *
 * Unknown fields are rejected with a did-you-mean; every error message names
 * the field and what was expected ("fault 'cut7': probability: expected a
 * number in [0, 1], got 1.5").
 *
 * Parameters (JSON name -> struct fault_params member). A "duration
 * distribution" is a duration ("250ms") or a distribution spec whose numbers
 * carry duration units: "normal:50ms,10ms", "exponential:30ms",
 * "uniform:10ms-50ms", "lognormal:40ms,0.5" (sigma is unitless),
 * "truncnormal:50ms,10ms,0s,200ms", "gamma:2,10ms" (shape unitless); stored
 * in nanoseconds. A "count" is a non-negative integer, or a distribution spec
 * of counts ("uniform:5-10", "exponential:20", ...), sampled once per response
 * with dist_sample_uint. Empirical distributions are not accepted.
 *
 *   tcp_latency         delay (duration dist, per write)             dir both
 *   tcp_bandwidth       rate (size per second, "64K": bytes/s)       dir downstream
 *   tcp_slicer          bytes (average slice size, size), delay (between slices)
 *   tcp_slow_close      delay (before the close is passed on)
 *   tcp_blackhole       delay (how long to swallow before closing; 0 = forever)
 *   tcp_reset           delay (RST after this long) and/or bytes (after N bytes)
 *   tcp_limit           bytes (close after N bytes in total)
 *   (TCP faults default to downstream: the bytes written to the client; with
 *   direction upstream, bandwidth, slicer, reset and limit act on each
 *   request's bytes written to the upstream, latency delays the forwarding;
 *   slow close and blackhole act on the client connection either way)
 *   http_abort          status (400..599, default 503), retry_after (duration,
 *                       429 default 1s: Retry-After header in whole seconds),
 *                       text (the error message of the OpenAI-style body)
 *   http_delay_request  delay (before the request is forwarded)    dir upstream
 *   http_timeout        delay (a gateway's timeout: when the upstream's
 *                       response has not ended this long after the request
 *                       was forwarded, the proxy gives up on it, closes the
 *                       upstream call and answers 504, or cuts a response
 *                       already begun)                              dir upstream
 *   http_delay_headers  delay (before response headers go out)    dir downstream
 *   http_truncate_request   bytes (keep only the first N body bytes) dir upstream
 *   http_truncate_response  bytes (the response ends after N body bytes;
 *                       cut: "end" sends a well-framed but short body, "close"
 *                       closes the connection) dir downstream
 *   http_header_rewrite set ({"name": "value", ...}), remove (["name", ...]);
 *                       on request headers (upstream) or response headers
 *                       (downstream)
 *   sse_ttft_delay      delay (before the first event)
 *   sse_jitter          delay (per event after the first), mode ("add",
 *                       the default: the delay is added to the upstream's
 *                       gap, and the delays add up over the stream; "floor":
 *                       each gap is at least the delay, max(gap, delay))
 *   sse_throttle        rate (tokens per second: "20/s" or 20)
 *   sse_stall           after_events | after_tokens (count), delay (stall length)
 *   sse_truncate        after_events | after_tokens (count), cut ("end":
 *                       terminate the response cleanly, "close": close the
 *                       connection, "reset": RST, "hang": keep it open silent)
 *   sse_drop_done       (none)
 *   sse_drop_finish     (none)
 *   sse_duplicate       rate (share of events duplicated, 0..1, default 1:
 *                       every event) or after_events (duplicate that one)
 *   sse_reorder         count (window of events shuffled, default 2), rate
 *   sse_malformed       after_events (count, default 0)
 *   sse_invalid_utf8    after_events (count, default 0)
 *   sse_error_event     after_events (count), text (the message of the OpenAI
 *                       error object sent as the event's data), raw (bool,
 *                       default false: true sends text itself as the data)
 *   sse_split           bytes (piece size, default 1), delay (between pieces)
 *   llm_hallucinate     rate (share of entities/numbers replaced, 0..1)
 *   llm_format_violation  rate (default 1)
 *   llm_premature_length  after_tokens (count)
 *   llm_embedding_noise norm (relative L2 norm of the Gaussian noise, >= 0)
 *   llm_embedding_mask  rate (share of dimensions zeroed, 0..1)
 *   rag_empty           pointer (JSON pointer of the result array, default "")
 *   rag_shuffle         pointer
 *   rag_irrelevant      pointer, text (replacement document text)
 *   rag_lower_scores    pointer, field (score member, default "score"),
 *                       factor (multiplier, 0..1, default 0.5)
 *   rag_latency         delay
 *   (WebSocket faults, on the server->client messages of a proxied
 *   WebSocket connection; "deltas" are response.output_text.delta and
 *   response.text.delta events, counted per response from response.created;
 *   a count is sampled once per connection; every ws_* fault takes event:
 *   the Realtime event type it acts on and counts, default the text deltas,
 *   "*" any message; ws_delay's default is "*")
 *   ws_delay            delay (per message, order kept: jitter is a spread
 *                       distribution)
 *   ws_drop             rate (share of deltas dropped, default 1) or
 *                       after_events (drop the delta after that many)
 *   ws_duplicate        rate (share of deltas sent twice, default 1) or
 *                       after_events (that one)
 *   ws_truncate         after_events (deltas passed; the rest of the
 *                       response, response.done included, is swallowed)
 *   ws_close            after_events (count, default 0), code (1000..4999,
 *                       default 1011), text (the close reason)
 *   ws_stall            after_events (count, default 0), delay (how long
 *                       nothing is passed on)
 *
 * Ownership: a struct fault owns no heap memory (fixed arrays, and
 * distributions that are never empirical), so it may be copied by value.
 * Heap-allocated faults (fault_new) are reference counted so a response that
 * started under a fault can finish with it after the fault was removed from
 * the set. Single-threaded refcounts: a fault is shared only on one loop;
 * the counters are atomic so /metrics may be read from anywhere.
 */
#ifndef TS_CHAOS_FAULT_H
#define TS_CHAOS_FAULT_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/dist.h"
#include "base/err.h"
#include "net/sse.h"

#define FAULT_NAME_MAX      64         /* including the NUL */
#define FAULT_MAX_HEADERS   8          /* header_rewrite set + remove entries */
#define FAULT_HDR_NAME_MAX  64         /* including the NUL */
#define FAULT_HDR_VALUE_MAX 256        /* including the NUL */
#define FAULT_TEXT_MAX      512        /* including the NUL */
#define FAULT_POINTER_MAX   128        /* including the NUL */
#define FAULT_PATH_MAX      256        /* including the NUL */
#define FAULT_SPEC_MAX      (1u << 20) /* a YAML/JSON fault file */

enum fault_family { FAULT_TCP, FAULT_HTTP, FAULT_SSE, FAULT_LLM, FAULT_RAG, FAULT_WS };

enum fault_type {
    FAULT_TCP_LATENCY,
    FAULT_TCP_BANDWIDTH,
    FAULT_TCP_SLICER,
    FAULT_TCP_SLOW_CLOSE,
    FAULT_TCP_BLACKHOLE,
    FAULT_TCP_RESET,
    FAULT_TCP_LIMIT,
    FAULT_HTTP_ABORT,
    FAULT_HTTP_DELAY_REQUEST,
    FAULT_HTTP_DELAY_HEADERS,
    FAULT_HTTP_TRUNCATE_REQUEST,
    FAULT_HTTP_TRUNCATE_RESPONSE,
    FAULT_HTTP_HEADER_REWRITE,
    FAULT_SSE_TTFT_DELAY,
    FAULT_SSE_JITTER,
    FAULT_SSE_THROTTLE,
    FAULT_SSE_STALL,
    FAULT_SSE_TRUNCATE,
    FAULT_SSE_DROP_DONE,
    FAULT_SSE_DROP_FINISH,
    FAULT_SSE_DUPLICATE,
    FAULT_SSE_REORDER,
    FAULT_SSE_MALFORMED,
    FAULT_SSE_INVALID_UTF8,
    FAULT_SSE_ERROR_EVENT,
    FAULT_SSE_SPLIT,
    FAULT_LLM_HALLUCINATE,
    FAULT_LLM_FORMAT_VIOLATION,
    FAULT_LLM_PREMATURE_LENGTH,
    FAULT_LLM_EMBEDDING_NOISE,
    FAULT_LLM_EMBEDDING_MASK,
    FAULT_RAG_EMPTY,
    FAULT_RAG_SHUFFLE,
    FAULT_RAG_IRRELEVANT,
    FAULT_RAG_LOWER_SCORES,
    FAULT_RAG_LATENCY,
    FAULT_HTTP_TIMEOUT,
    FAULT_WS_DELAY,
    FAULT_WS_DROP,
    FAULT_WS_DUPLICATE,
    FAULT_WS_TRUNCATE,
    FAULT_WS_CLOSE,
    FAULT_WS_STALL,
    FAULT_TYPE_COUNT
};

enum fault_direction {
    FAULT_DIR_UPSTREAM = 1 << 0,   /* on the request (client -> upstream) */
    FAULT_DIR_DOWNSTREAM = 1 << 1, /* on the response (upstream -> client) */
    FAULT_DIR_BOTH = FAULT_DIR_UPSTREAM | FAULT_DIR_DOWNSTREAM,
};

/* What a count (after_events / after_tokens / count) counts. */
enum fault_unit { FAULT_UNIT_NONE = 0, FAULT_UNIT_EVENTS, FAULT_UNIT_TOKENS };

/* How sse_jitter's delay combines with the upstream's gap between events. */
enum fault_jitter_mode {
    FAULT_JITTER_ADD = 0, /* emitted gap = upstream gap + delay */
    FAULT_JITTER_FLOOR,   /* emitted gap = max(upstream gap, delay) */
};

/* How a truncated response ends. */
enum fault_cut {
    FAULT_CUT_END = 0, /* a well-framed end of the HTTP response */
    FAULT_CUT_CLOSE,   /* the connection is closed (no final chunk) */
    FAULT_CUT_RESET,   /* the connection is reset (RST) */
    FAULT_CUT_HANG,    /* nothing more is sent; the connection stays open */
};

struct fault_match {
    char path[FAULT_PATH_MAX];              /* "" = any */
    bool path_glob;                         /* path has glob characters: fnmatch */
    char method[16];                        /* "" = any */
    char header_name[FAULT_HDR_NAME_MAX];   /* "" = no header selector */
    char header_value[FAULT_HDR_VALUE_MAX]; /* "" = present with any value */
    char model[128];                        /* "" = any */
    char tenant[128];                       /* "" = any */
    char tenant_header[FAULT_HDR_NAME_MAX]; /* default "x-tenant-id" */
};

struct fault_header_op {
    char name[FAULT_HDR_NAME_MAX];
    char value[FAULT_HDR_VALUE_MAX];
    bool remove; /* remove the header (value unused); else set it to value */
};

/* The parameters of every type; each type uses the members listed at the top
 * and the parser zeroes/defaults the rest. Durations are in nanoseconds. */
struct fault_params {
    struct dist delay; /* duration distribution, ns; fixed:0 if unset */
    bool has_delay;
    struct dist count;    /* after_events / after_tokens / count */
    enum fault_unit unit; /* what count counts; NONE if no count given */
    uint64_t bytes;       /* sizes: slice, reset/limit/truncate after N */
    bool has_bytes;
    double rate; /* bytes/s, tokens/s or a share 0..1 (per type) */
    bool has_rate;
    double norm;                        /* llm_embedding_noise */
    double factor;                      /* rag_lower_scores */
    int status;                         /* http_abort */
    uint64_t retry_after_ns;            /* http_abort; 0 = no Retry-After */
    enum fault_cut cut;                 /* sse_truncate, http_truncate_response */
    enum fault_jitter_mode jitter_mode; /* sse_jitter */
    bool raw;                           /* sse_error_event: text is the data itself */
    uint16_t code;                      /* ws_close: the close code (default 1011) */
    char event[64]; /* ws_*: the Realtime event type acted on ("" = the text deltas, "*" = any) */
    char text[FAULT_TEXT_MAX];
    char pointer[FAULT_POINTER_MAX];
    char field[64];
    struct fault_header_op headers[FAULT_MAX_HEADERS];
    size_t n_headers;
};

struct fault {
    char name[FAULT_NAME_MAX];
    enum fault_type type;
    enum fault_direction dir;
    double probability; /* 0..1 */
    struct fault_match match;
    uint64_t start_ns;    /* relative to added_ns; 0 = at once */
    uint64_t duration_ns; /* 0 = forever */
    uint64_t added_ns;    /* ts_now_ns() when added to a set (faultset) */
    struct fault_params params;
    /* counters */
    _Atomic uint64_t matched;  /* requests that matched (before the roll) */
    _Atomic uint64_t injected; /* times the fault was injected */
    /* heap faults only (fault_new); atomic: the proxy's loop threads share faults */
    _Atomic int refs;
};

/* The spec name of a type ("sse_truncate") / of a direction ("upstream"). */
const char *fault_type_name(enum fault_type t);
const char *fault_dir_name(enum fault_direction d);
/* The type of a spec name; returns 0 and sets *t, or -EINVAL. */
TS_MUST_CHECK int fault_type_parse(const char *name, enum fault_type *t);
enum fault_family fault_type_family(enum fault_type t);
enum fault_direction fault_type_default_dir(enum fault_type t);

/*
 * Parses one spec object into *out (overwritten; owns nothing afterwards).
 * Returns 0, or -EINVAL with a one-line message in err (NUL-terminated,
 * truncated to errlen) naming the fault, the field and what was expected.
 * Counters and added_ns are zero, refs is 0.
 */
TS_MUST_CHECK int fault_parse_json(const json_t *spec, struct fault *out, char *err, size_t errlen);

/*
 * The spec of f as a JSON object (the canonical form: fault_parse_json of it
 * gives back an equal fault) plus read-only "injected" and "matched"
 * counters and "active" (whether f is in its window at now). Returns a new
 * reference or NULL on -ENOMEM.
 */
json_t *fault_to_json(const struct fault *f, uint64_t now_ns);

/*
 * Reads a YAML (or JSON, a subset) fault file: {faults: [spec, ...]} (a bare
 * list of specs is accepted too). The file is capped at FAULT_SPEC_MAX and
 * must be UTF-8. On success *out is a new reference to the JSON array of the
 * specs (not yet parsed: call fault_parse_json on each) and 0 is returned;
 * else -EINVAL / -EIO / -ENOMEM with a message in err ("faults.yaml: line 3:
 * ..." where libfyaml tells the line).
 */
TS_MUST_CHECK int fault_file_load(const char *path, json_t **out, char *err, size_t errlen);
/* The same on text held in memory (name is used in messages). */
TS_MUST_CHECK int fault_yaml_parse(const char *text, size_t len, const char *name, json_t **out,
                                   char *err, size_t errlen);

/* Heap faults: fault_new copies *src (counters zeroed), refs = 1. NULL on
 * -ENOMEM. fault_unref frees at zero; NULL is a no-op. Both are atomic, so a
 * fault may be referenced and dropped from several threads. */
struct fault *fault_new(const struct fault *src);
struct fault *fault_ref(struct fault *f);
void fault_unref(struct fault *f);

/* Whether now_ns lies in f's start/duration window (relative to added_ns). */
bool fault_active(const struct fault *f, uint64_t now_ns);

/* Counts one injection of f (atomic). */
static inline void fault_count_injection(struct fault *f)
{
    atomic_fetch_add_explicit(&f->injected, 1, memory_order_relaxed);
}

/* ---- the per-response stream transform (SSE / LLM / RAG faults) ----
 *
 * Implemented in src/chaos/sse_faults.c (with llm_faults.c, rag_faults.c);
 * driven by src/chaos/proxy.c, which parses the upstream SSE with
 * src/net/sse.h, calls stream_tap_event for each event and writes the bytes
 * emitted at their times. Pure and I/O-free: testable in virtual time.
 */
struct stream_tap;

struct tap_out {
    /* Bytes exactly as they go on the wire ("data: ...\n\n"), to be written
     * at at_ns (>= the now_ns of the call; emits are in non-decreasing
     * at_ns order). bytes are only valid during the call. */
    void (*emit)(void *ctx, const char *bytes, size_t n, uint64_t at_ns);
    /* Ask to end the response at at_ns: how (FAULT_CUT_*). After close,
     * later emits are ignored by the driver. */
    void (*close)(void *ctx, uint64_t at_ns, enum fault_cut how);
    void *ctx;
};

/*
 * A tap for one response with the n faults rolled for it (each of family
 * SSE, LLM or RAG; the tap takes a reference on each), a seed for its rng,
 * and now_ns when the response starts (the request was sent). Returns NULL
 * on -ENOMEM.
 */
struct stream_tap *stream_tap_new(struct fault *const *faults, size_t n, uint64_t seed,
                                  uint64_t now_ns);
/* Drops the references and frees. NULL is a no-op. */
void stream_tap_free(struct stream_tap *tap);
/*
 * Lends the tap a decoder for the events it reads without a DOM (see
 * stream_tap_parsed), to call before its first event; d must outlive the
 * tap and is used by one thread at a time (a worker's taps can share one).
 * Without it a tap that needs one makes its own (~5 KB).
 */
struct openai_decoder;
void stream_tap_use_decoder(struct stream_tap *tap, struct openai_decoder *d);

/*
 * One upstream event arrived at now_ns. Emits zero or more events through
 * out. Returns 0 or a negative code (-ENOMEM); then the driver ends the
 * response with FAULT_CUT_CLOSE.
 */
TS_MUST_CHECK int stream_tap_event(struct stream_tap *tap, const struct sse_event *ev,
                                   uint64_t now_ns, const struct tap_out *out);
/*
 * How many events' JSON the tap has parsed into a DOM. A tap whose faults
 * act only on times and framing (sse_jitter, sse_split, sse_reorder,
 * sse_duplicate, sse_drop_done; sse_stall, sse_truncate, sse_error_event
 * counted in events) reads nothing of the events: they pass at the cost of
 * their bytes. One whose faults need only what an event carries (the same
 * counted in tokens, sse_throttle, sse_ttft_delay) reads its flags with
 * llm/openai_chunk.h's decoder and the stream's memo, without a DOM either.
 * Faults that rewrite chunks parse each one.
 */
uint64_t stream_tap_parsed(const struct stream_tap *tap);
/* Upstream ended at now_ns: flush buffered events, etc. Returns 0 or < 0. */
TS_MUST_CHECK int stream_tap_end(struct stream_tap *tap, uint64_t now_ns,
                                 const struct tap_out *out);
/*
 * A non-streamed JSON body (RAG retriever responses, embeddings, non-streamed
 * completions): appends the rewritten body to out (capped by out's max).
 * Returns 0, TS_TOOBIG, -ENOMEM; a body that is not JSON is copied unchanged.
 * *delay_ns (may be NULL) receives extra latency to add before sending
 * (rag_latency).
 */
TS_MUST_CHECK int body_tap(struct stream_tap *tap, const char *body, size_t len, struct buf *out,
                           uint64_t *delay_ns);

#endif
