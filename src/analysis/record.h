/*
 * record.h - what the load engine knows about one request when it ends.
 *
 * Filled by the runner on a worker thread, handed to the recorder (which adds
 * it to the worker's histograms and counters) and optionally written to
 * requests.jsonl. Every request started ends in exactly one outcome.
 *
 * Times are monotonic nanoseconds (ts_now_ns()); 0 means "did not happen".
 * Latencies are measured from intended_ns (the schedule), so a client that
 * falls behind shows it; start_ns - intended_ns is the schedule lag.
 */
#ifndef TS_ANALYSIS_RECORD_H
#define TS_ANALYSIS_RECORD_H

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "analysis/quality.h"

/* Chunk arrival times kept per request (req_record.chunk_ns). */
#define REQ_CHUNK_TIMES_MAX 65536u

/* Bytes of req_record.error, its NUL included. */
#define REQ_ERROR_MAX 200

enum req_outcome {
    REQ_OK = 0,          /* complete: finish_reason seen and [DONE] (streams) or a 2xx body */
    REQ_TRUNCATED,       /* the stream ended without finish_reason or without [DONE] */
    REQ_MALFORMED,       /* a chunk was not valid JSON / not an OpenAI chunk */
    REQ_STREAM_ERROR,    /* an error object arrived in the stream */
    REQ_HTTP_429,        /* rate limited */
    REQ_HTTP_4XX,        /* other 4xx */
    REQ_HTTP_5XX,        /* 5xx */
    REQ_CONNECT,         /* DNS, refused, unreachable */
    REQ_TLS,             /* TLS handshake or verification */
    REQ_TIMEOUT_CONNECT, /* connect timeout */
    REQ_TIMEOUT_TTFB,    /* no first byte in time */
    REQ_TIMEOUT_IDLE,    /* stalled between chunks */
    REQ_TIMEOUT_TOTAL,   /* over the total deadline */
    REQ_RECV,            /* the connection broke mid-response */
    REQ_CUT,             /* still in flight when the run ended, not waited for */
    REQ_OTHER,           /* anything else (the error text says what) */
    REQ_CANCELLED,       /* abandoned by the client on purpose mid-way (run --cancel) */
    REQ_OUTCOME_COUNT,
};

/* Stable names used in files and metrics ("ok", "truncated", ...); "unknown"
 * for a value out of range. The string is static. */
const char *req_outcome_name(enum req_outcome o);
/* The outcome named name (as req_outcome_name() spells it), or -EINVAL. */
int req_outcome_from_name(const char *name);
/*
 * true for the outcomes that count as errors in error_rate: all but ok,
 * cut and cancelled (the client's own doing). A cut request was ended by the client when the run stopped, so it says
 * nothing about the service; it is reported on its own (see docs/METRICS.md).
 */
bool req_outcome_is_error(enum req_outcome o);

enum token_source {
    TOKENS_USAGE = 0,     /* server usage (stream_options.include_usage) */
    TOKENS_TOKENIZER = 1, /* the client tokenizer */
    TOKENS_CHUNKS = 2,    /* one token per content chunk */
};

/* "usage", "tokenizer", "chunks" ("unknown" out of range); static. */
const char *token_source_name(enum token_source s);

/*
 * A usage disagreement: the server's usage.completion_tokens and the client
 * tokenizer's count of the same answer differ by more than
 * REQ_TOKENS_SLACK tokens and by more than REQ_TOKENS_SLACK_REL of usage (a
 * stop token the text does not show, or a tokenizer that is not the model's
 * exact one, stays within). Only a tokenizer count is compared: a count of
 * chunks never disagrees by itself (a server may put several tokens in one
 * chunk). docs/METRICS.md, "Tokens".
 */
#define REQ_TOKENS_SLACK     2
#define REQ_TOKENS_SLACK_REL 0.05
bool req_tokens_disagree(uint32_t usage, uint32_t tokenizer);

enum req_flags {
    REQF_WARMUP = 1 << 0,         /* sent in the warm-up window: not in statistics */
    REQF_NO_DONE = 1 << 1,        /* the stream had no [DONE] */
    REQF_NO_FINISH = 1 << 2,      /* no finish_reason */
    REQF_ID_CHANGED = 1 << 3,     /* the completion id changed within the stream */
    REQF_USAGE_MISMATCH = 1 << 4, /* server usage and the client tokenizer disagree
                                   * (req_tokens_disagree) */
    REQF_STREAM = 1 << 5,         /* a streamed request */
    REQF_REUSED_CONN = 1 << 6,    /* sent on a kept-alive connection */
    REQF_SIGNED = 1 << 7,         /* chunk signatures were checked (--integrity hmac) */
    REQF_REASONING = 1 << 8,      /* the stream carried reasoning deltas */
    REQF_AFTER_DONE = 1 << 9,     /* realtime: a delta came after response.done */
    REQF_OUT_OF_ORDER = 1 << 10,  /* realtime: a delta before response.created, or a
                                   * second response.created / response.done */
    REQF_FELL_BACK = 1 << 12,     /* --transport auto: sent over SSE, the WebSocket
                                   * upgrade having been refused */
    REQF_BAD_CLOSE = 1 << 11,     /* realtime: the server closed with a code other
                                   * than 1000 (or none) */
};

struct req_record {
    uint64_t id;     /* run-wide sequence number */
    uint32_t worker; /* worker thread index */
    uint32_t flags;  /* enum req_flags */
    enum req_outcome outcome;
    int http_status; /* 0 if none was received */

    uint64_t intended_ns;     /* scheduled send time (closed loop: = start_ns) */
    uint64_t start_ns;        /* handed to the HTTP client */
    uint64_t first_byte_ns;   /* first response body byte */
    uint64_t first_chunk_ns;  /* first SSE event with choices (vLLM's TTFT point) */
    uint64_t first_token_ns;  /* first chunk with content, reasoning or a tool call */
    uint64_t first_answer_ns; /* first content after reasoning (0: no reasoning seen) */
    uint64_t last_chunk_ns;   /* last event with choices (vLLM's latency end) */
    uint64_t end_ns;          /* the call finished */
    uint64_t last_event_ns;   /* last data event before [DONE], a usage-only chunk included
                               * (where vLLM's chat benchmark ends its latency) */

    /* from libcurl, in microseconds since start_ns (0 if not measured) */
    uint32_t dns_us, connect_us, tls_us, sent_us, ttfb_us;

    uint32_t prompt_tokens; /* what the workload intended to send */
    uint32_t max_tokens;
    int32_t usage_prompt_tokens;     /* server usage, -1 when absent */
    int32_t usage_completion_tokens; /* server usage, -1 when absent */
    uint32_t client_tokens;          /* counted by the client (tokenizer or chunks) */
    uint32_t content_chunks;         /* chunks with non-empty content */
    uint32_t choice_chunks;          /* chunks with choices (ITL gaps = this - 1) */
    uint32_t output_tokens;          /* the count used for metrics (see token_source) */
    enum token_source token_source;

    uint64_t itl_sum_ns; /* sum and max of gaps between choice chunks */
    uint64_t itl_max_ns;
    /* When each chunk with choices arrived (monotonic ns; chunk_ns[0] is
     * first_chunk_ns), the first REQ_CHUNK_TIMES_MAX of them: n_chunk_ns <
     * choice_chunks means the rest were not kept. Borrowed from the exchange,
     * valid only while the record is accounted and written; NULL when not
     * kept (records rebuilt from files). vLLM's ITL list of the request is
     * the differences of consecutive entries. */
    const uint64_t *chunk_ns;
    uint32_t n_chunk_ns;

    /* --integrity hmac: what the chunk signatures said (llm/sign.h) */
    struct {
        uint32_t ok, missing, duplicates, reorders, forged, unsigned_events;
    } sig;

    /* answer quality (when the request had a reference or a check is on) */
    struct quality_scores quality;
    /* a vector search's recall@k against the ground truth (run --endpoint
     * vector-search, or a flow's retrieval step): has_recall when measured
     * (an ok answer) */
    double recall;
    uint16_t recall_k;
    bool has_recall;

    char finish_reason[16];
    /* why it failed, one printable line, "" if none: the server's message of a
     * non-2xx body or an error event (llm/errbody.h), else the client's error */
    char error[REQ_ERROR_MAX];
    uint16_t tenant; /* traffic class index */

    /* Scenario classes (scenario/traffic.h): labels of the request, for
     * requests.jsonl and per-label splits. The names are owned by the run's
     * traffic classes (NULL outside a scenario). */
    const char *class_name;
    const char *step_name; /* flow step, or NULL for a plain request */
    const char *intent_name;
    int32_t prefix;        /* shared prefix entry, -1 none */
    uint32_t perturb_mask; /* bits of the class's perturbation set */
    char perturb[96];      /* their names, comma-separated ("" none) */
    uint64_t session;      /* session number + 1; 0 = not in a session */
    uint32_t turn;
    uint32_t trimmed; /* history messages dropped + context tokens cut to fit the window */
};

/*
 * Appends one requests.jsonl line (a JSON object and '\n') for rec to out.
 * Times are milliseconds since run_start_ns with microsecond precision
 * (null for "did not happen"); derived latencies (lag, ttft, ttfc, e2el,
 * tpot) follow stats.h; outcome and token source by name; strings are
 * escaped and invalid UTF-8 replaced by U+FFFD. "quality" is null when the
 * answer was not scored, else {"truncated", and what rec->quality.have says
 * was computed: "rouge_l", "bleu4" (9 decimals), "exact"; "regex_match";
 * "json_valid"}. A measured recall@k (has_recall) adds "recall" (9
 * significant digits) and "recall_k". The record holds no secret, and none
 * is added. Returns 0 or
 * a buf error (out keeps what it had).
 */
TS_MUST_CHECK int req_record_append_json(struct buf *out, const struct req_record *rec,
                                         uint64_t run_start_ns);

enum req_json_flags {
    /* add "chunk_us": [offsets of each chunk with choices from start, in whole
     * microseconds], and "chunk_us_complete": false when the request had more
     * chunks than were kept (REQ_CHUNK_TIMES_MAX); null when none were kept */
    REQ_JSON_CHUNK_TIMES = 1 << 0,
};

/* req_record_append_json() with the extras of flags (enum req_json_flags). */
TS_MUST_CHECK int req_record_append_json_ex(struct buf *out, const struct req_record *rec,
                                            uint64_t run_start_ns, unsigned flags);

#endif
