/*
 * server.h - the OpenAI-compatible simulator: HTTP endpoints over the engine.
 *
 * One struct sim_server runs on one libuv loop (its own thread in `run`, the
 * main thread in `tokenstorm sim`). It answers:
 *   POST /v1/chat/completions, /v1/completions   (streamed or not)
 *   POST /v1/embeddings
 *   POST /v1/vector_stores/{id}/search (sim/vstore.h; answered after a
 *        simulated search time, on a timer: the engine is not involved)
 *   GET  /v1/models, /health, /metrics (vLLM metric names)
 *   POST/GET/DELETE /admin/faults[/{type}]  with cfg->admin only (sim/admin.h)
 * and drives the engine in real time: a nanosecond timer fires at each step
 * boundary, and the tokens of the finished step are written to their streams
 * at once. The model's clock stays on its schedule while the loop keeps up
 * (each step starts when the previous one was due); when the loop is late by
 * more than 1 ms it restarts from the real time. The difference between the
 * time a token was due and the time it was written is kept as a histogram
 * (tokenstorm_sim_send_lag_seconds at /metrics).
 *
 * What is generated: see docs/SIMULATOR.md. Output length: max_tokens with
 * ignore_eos; otherwise the reference answer (--answers) or a natural length
 * drawn from output_len (seeded per request), cut to max_tokens (finish
 * "length") or at a stop string (finish "stop"), and at least min_tokens.
 *
 * Prefix caching (profile prefix_caching): the prompt is cut into blocks of
 * block_size tokens as it is counted (sim/blockhash.h) and the engine reuses
 * cached blocks (engine.h); the usage object then carries OpenAI's
 * "prompt_tokens_details":{"cached_tokens":N} (streamed and not), the trace
 * log's cached_tokens is N, and /metrics has vllm:prefix_cache_queries_total,
 * vllm:prefix_cache_hits_total and vllm:gpu_prefix_cache_hit_rate. Without
 * it the usage object has no prompt_tokens_details.
 *
 * Tool calls: a chat request with tools, tool_choice not "none" and a user
 * message last is answered with one call of the first tool (or the one
 * tool_choice names) instead of text: arguments fill the tool's required
 * parameters (strings get the first 8 words of that message), one output
 * token per piece of the arguments, finish "tool_calls" ("length" when cut
 * by max_tokens). After a "tool" message the answer is text again.
 */
#ifndef TS_SIM_SERVER_H
#define TS_SIM_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/err.h"
#include "sim/profile.h"

struct sim_server;

struct sim_server_config {
    struct sim_profile profile; /* validated by the caller */
    const char *host;           /* "127.0.0.1" */
    int port;                   /* 0 = any */
    bool any_model;             /* accept any model name instead of 404 */
    const char *answers_path;   /* NULL: no reference answers */
    const char *trace_log_path; /* NULL: no ground-truth log */
    const char *output_len;     /* natural output length distribution; NULL = "lognormal:180,0.7" */
    uint64_t header_timeout_ms; /* 0 = the HTTP server's default (10 s) */
    uint64_t idle_timeout_ms;   /* 0 = default (60 s) */
    size_t max_body_bytes;      /* 0 = default (16 MiB) */
    uint32_t embed_dims;        /* default embedding size, 0 = 1024 */
    bool quiet;                 /* no access log lines */
    const char *replay_dir;     /* --replay: answer POSTs from this recording (sim/replay.h) */
    bool ignore_disconnect;     /* a client that leaves does not stop its generation (as
                                   vLLM's abort would): a half-closed connection still gets
                                   the whole answer, a closed one's is generated and dropped */
    const char *sign_key;       /* sign every stream event (llm/sign.h); NULL = off */
    bool admin;                 /* the admin API for chaos faults (sim/admin.h) */
    const char *admin_token;    /* bearer token the admin API needs (net/ctlauth.h);
                                   NULL: none; borrowed */
    const char *api_key;        /* bearer token every /v1 request (and the realtime
                                   upgrade) needs, as OpenAI's API key; NULL: none; borrowed */
    /* the vector store (POST /v1/vector_stores/{id}/search, sim/vstore.h) */
    const char *vector_docs_path; /* passages instead of the built-in ones; NULL: built-in */
    const char *vector_store_id;  /* answered besides "vs_default" (1..64 of [A-Za-z0-9_-]) */
    /* simulated search time = vector_latency_ns + vector_doc_ns * passages; 0 means the
     * default (SIM_VECTOR_LATENCY_NS, SIM_VECTOR_DOC_NS), SIM_DURATION_ZERO zero */
    uint64_t vector_latency_ns;
    uint64_t vector_doc_ns;
    /* the raw-vector corpus (GET /v1/vectors, POST /v1/vectors/search): NULL,
     * a "gen:N[xD][:C[:S]]" spec (llm/vecset.h, generated from vector_seed)
     * or a .fvecs/.npy file; indexed by FAISS's factory string vector_index
     * (NULL: "Flat", exact; without FAISS an exact scan), searched with
     * nprobe / ef_search vector_nprobe / vector_ef when a request names none
     * (0: FAISS's defaults) */
    const char *vector_data;
    const char *vector_index;
    uint64_t vector_seed;
    uint32_t vector_nprobe;
    uint32_t vector_ef;
};

#define SIM_VECTOR_ID_MAX     64
#define SIM_VECTOR_LATENCY_NS 2000000ull /* 2 ms per search */
#define SIM_VECTOR_DOC_NS     1000ull    /* 1 us per passage */
#define SIM_DURATION_ZERO     UINT64_MAX /* a duration option set to 0 */

/*
 * Creates the server on loop and starts listening. Returns 0 and *out, or a
 * negative code with a message in err (bad option, answers file, trace log,
 * address in use...). On error nothing is left on the loop.
 */
TS_MUST_CHECK int sim_server_start(uv_loop_t *loop, const struct sim_server_config *cfg,
                                   struct sim_server **out, char *err, size_t errlen);

/* The port actually bound. */
int sim_server_port(const struct sim_server *s);

/*
 * Stops accepting; streams in progress may finish for grace_ms, then are cut.
 * on_closed(s, arg) runs on the loop when every handle is closed; then call
 * sim_server_free(). Calling it twice is a no-op.
 */
void sim_server_shutdown(struct sim_server *s, uint64_t grace_ms,
                         void (*on_closed)(struct sim_server *s, void *arg), void *arg);

/* Frees a server whose shutdown completed (or NULL). Flushes the trace log. */
void sim_server_free(struct sim_server *s);

/* Counters for tests and progress lines. */
struct sim_server_stats {
    uint64_t requests;          /* generation requests accepted by the engine */
    uint64_t finished;          /* completed */
    uint64_t cancelled;         /* client went away (its generation stopped) */
    uint64_t ignored_gone;      /* client went away, generation went on (ignore_disconnect) */
    uint64_t rejected_429;      /* waiting queue full */
    uint64_t rejected_400;      /* bad request or context too long */
    uint64_t tokens_sent;       /* content chunks written */
    uint64_t embeddings;        /* embedding requests answered */
    uint64_t vector_searches;   /* vector store searches answered */
    uint64_t realtime_sessions; /* /v1/realtime WebSocket sessions opened */
};
void sim_server_stats(const struct sim_server *s, struct sim_server_stats *st);

#endif
