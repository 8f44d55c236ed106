/*
 * workload.h - the minimal workload: what each request of a run sends.
 *
 * A struct workload is set up once from a struct workload_cfg, then builds
 * request number `index` on demand: workload_item(w, index, &item) returns
 * its JSON body, the approximate prompt length sent and the max_tokens asked
 * for. An item is a function of (cfg, seed, index) only, so any worker thread
 * can build any item in any order, and the same seed gives byte-identical
 * bodies in every run. After workload_init() the workload is read-only:
 * workload_item() may be called from many threads at once.
 *
 * Synthetic prompts (no prompts file). For item i, a generator seeded from
 * (seed, i) draws, in this order: the input length N from cfg.input_tokens,
 * a start word in the built-in corpus (workload/corpus.h) and the output length
 * from cfg.output_tokens. The text is the request tag "[r<i>] " followed by
 * the corpus from that word on (read in a circle), cut at a piece boundary of
 * the approximate token counter (llm/text.h) so that
 * text_count_tokens(text) == N exactly, tag included. The tag makes every
 * request start differently, so requests never share a prefix cache by
 * accident (a later shared-prefix feature does that on purpose). When N is
 * smaller than the tag's own tokens (4 for i < 1000, one more for every three
 * more digits), the text is the first N tokens of the tag and such prompts
 * can repeat. In an embeddings batch of more than one input, input k carries
 * the tag "[r<i>.<k>] " and draws its own length and start.
 *
 * Prompts file (workload/prompts.h). Item i uses line i mod count, in file order
 * or, with cfg.shuffle, in a seeded order that is a fresh permutation of the
 * file for every pass (i / count), so every line is used once per pass. A
 * line's "max_tokens"/"output_tokens" sets the output length, else it is
 * drawn from cfg.output_tokens. An embeddings request takes lines
 * i*batch .. i*batch+batch-1 (mod count). "messages" lines need the chat
 * endpoint. "prompt" lines on the chat endpoint become one user message,
 * after the system prompt when one is set; "messages" lines are sent as
 * written.
 *
 * Bodies (keys in this order; the system message only with a system prompt):
 *   chat:        {"model":M,"messages":[{"role":"system","content":S},
 *                 {"role":"user","content":T}],"max_tokens":O,"ignore_eos":true,
 *                 "stream":true,"stream_options":{"include_usage":true}}
 *   completions: {"model":M,"prompt":T,"max_tokens":O,"ignore_eos":true,"stream":true,
 *                 "stream_options":{"include_usage":true}}
 *   embeddings:  {"model":M,"input":[T1,...,Tb]}
 * "model" is left out when cfg.model is NULL (for servers that allow it, such
 * as recent vLLM, which then use their default model).
 * "ignore_eos" is left out when false (OpenAI itself rejects the key);
 * "stream" and "stream_options" when not streaming; "stream_options" when
 * include_usage is false. cfg.max_tokens_key renames "max_tokens" (OpenAI's
 * reasoning models want "max_completion_tokens").
 *
 * Body overrides: each top-level key of cfg.body_overrides replaces the
 * generated key of that name (appended after the generated keys, in the
 * overrides' order), or is added; a null value removes the key. An override
 * of "stream" (true/false/null) decides whether the request streams; an
 * integer override of the max-tokens key becomes item.max_tokens, a null one
 * makes it 0 (no limit sent). The keys that carry the prompt ("messages",
 * "prompt", "input") cannot be overridden.
 *
 * prompt_tokens: the approximate tokens of what was sent. Completions and
 * embeddings: the text(s) as counted by text_count_tokens(). Chat: counted
 * the way OpenAI's cookbook counts a chat request (workload/prompts.h): each
 * message adds CHAT_TOKENS_PER_MESSAGE (3) + the tokens of its role
 * ("user" and "system" are 1 and 2), and the request adds
 * CHAT_TOKENS_PER_REPLY (3). So a synthetic chat prompt of N tokens without
 * a system prompt has prompt_tokens = N + 7.
 */
#ifndef TS_WORKLOAD_WORKLOAD_H
#define TS_WORKLOAD_WORKLOAD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dist.h"
#include "base/err.h"
#include "llm/vecset.h"
#include "workload/prompts.h"

#define WORKLOAD_MAX_INPUT_TOKENS  (1u << 20) /* a synthetic text's length is clamped to 1..this */
#define WORKLOAD_MAX_OUTPUT_TOKENS PROMPTS_MAX_OUTPUT_TOKENS /* output lengths: 1..this */
#define WORKLOAD_MAX_EMBED_BATCH   2048u                     /* OpenAI's limit of inputs */
#define WORKLOAD_MAX_BODY          ((size_t)64 << 20)        /* bytes of one request body */

enum workload_endpoint {
    WORKLOAD_CHAT = 0,    /* /v1/chat/completions */
    WORKLOAD_COMPLETIONS, /* /v1/completions */
    WORKLOAD_EMBEDDINGS,  /* /v1/embeddings */
    /* /v1/vectors/search (the simulator's raw-vector search):
     * {"vector":[...],"k":K} + the overrides (e.g. "nprobe", "ef_search");
     * item i searches row i mod n of cfg.vectors */
    WORKLOAD_VECTOR_SEARCH,
};

struct workload_cfg {
    enum workload_endpoint endpoint;
    const char *model; /* NULL: no "model" key */
    /* Length distributions, as specs of base/dist.h ("fixed:128",
     * "uniform:100-200", "lognormal:512,0.6", ...): the synthetic prompt's
     * tokens (NULL: "1024") and max_tokens (NULL: "128"), clamped to
     * 1..WORKLOAD_MAX_INPUT_TOKENS and 1..WORKLOAD_MAX_OUTPUT_TOKENS. */
    const char *input_tokens;
    const char *output_tokens;
    bool ignore_eos;            /* default true */
    bool stream;                /* default true (ignored for embeddings) */
    bool include_usage;         /* default true: "stream_options":{"include_usage":true} */
    const char *system_prompt;  /* NULL: none; chat only */
    const char *max_tokens_key; /* NULL: "max_tokens" */
    /* A JSONL prompts file (workload/prompts.h): a path, or the text itself in
     * prompts_data/prompts_len (then prompts_path only names it in messages).
     * Neither: synthetic prompts. */
    const char *prompts_path;
    const char *prompts_data;
    size_t prompts_len;
    bool shuffle;                 /* visit the file in a seeded order */
    const json_t *body_overrides; /* NULL or an object; borrowed during init only */
    uint64_t seed;
    /* inputs per embeddings request, 1..WORKLOAD_MAX_EMBED_BATCH (0 means 1) */
    uint32_t embed_batch;
    /* vector search: the query vectors (borrowed: they must outlive the
     * workload) and the neighbours asked for, 1..VECSET_MAX_K (0 means 10) */
    const struct vecset *vectors;
    uint32_t vector_k;
    /* vector search in template mode: the body is vector_prefix + the vector
     * as a JSON array + vector_suffix (borrowed, must outlive the workload;
     * body overrides do not apply); NULL: the simulator's native body */
    const char *vector_prefix, *vector_suffix;
};

/* A recorded request (run --replay, workload/replay.h). */
struct replay_item {
    char *body; /* owned */
    size_t body_len;
    bool stream;
    uint32_t max_tokens, prompt_tokens;
    char *reference; /* the recorded answer, or NULL; owned */
};

struct workload {
    enum workload_endpoint endpoint;
    struct replay_item *replay; /* run --replay: item i is replay[i % nreplay]; else NULL */
    size_t nreplay;
    struct dist input, output;
    uint64_t seed;
    uint32_t embed_batch;
    const struct vecset *vectors; /* borrowed (vector search) */
    uint32_t vector_k;
    const char *vector_prefix, *vector_suffix; /* borrowed (template mode) */
    bool stream;
    bool shuffle;
    bool has_prompts;
    bool fixed_max;      /* max_tokens comes from the overrides */
    uint32_t max_tokens; /* its value when fixed_max (0: no limit sent) */
    char *head;          /* `{"model":...,` or `{` */
    char *system_msg;    /* `{"role":"system","content":...},` or NULL */
    char *max_key;       /* `,"max_tokens":` or NULL when overridden */
    char *tail;          /* the constant keys, the overrides and `}` */
    size_t head_len, system_msg_len, max_key_len, tail_len;
    uint32_t system_tokens; /* of the system message, overheads included */
    struct prompts prompts;
    const char *corpus;
    size_t corpus_len;
    uint32_t *starts; /* offsets of the corpus's words */
    size_t nstarts;
};

/* One request. body is a heap string owned by the item (work_item_release). */
struct work_item {
    uint64_t index;
    char *body; /* NUL-terminated JSON */
    size_t body_len;
    uint32_t prompt_tokens; /* approximate, see the top of this file */
    uint32_t max_tokens;    /* asked for; 0 for embeddings or when no limit is sent */
    bool stream;            /* the response is an SSE stream */
    const char *reference;  /* the line's "reference" or NULL; owned by the workload */
};

/* Fills cfg with the defaults: chat, synthetic 1024 -> 128 tokens,
 * ignore_eos, stream, include_usage, seed 0, batch 1. */
void workload_cfg_init(struct workload_cfg *cfg);

/*
 * Sets up w from cfg (which need not outlive the call): parses the length
 * distributions, loads the prompts file, serialises the fixed parts of the
 * bodies. Returns 0, or -EINVAL / TS_PARSE / TS_TOOBIG / -errno with a
 * message in err (truncated to errlen; may be NULL), or -ENOMEM. On error w
 * owns nothing. Reading a prompts file is blocking I/O: call this while
 * setting up, not on a loop thread.
 */
TS_MUST_CHECK int workload_init(struct workload *w, const struct workload_cfg *cfg, char *err,
                                size_t errlen);

/* Frees what w owns. Items already built stay valid except their reference. */
void workload_release(struct workload *w);

/*
 * Builds request number index into *out. Thread-safe. Returns 0, -ENOMEM,
 * or TS_TOOBIG when the body would exceed WORKLOAD_MAX_BODY; on error *out
 * owns nothing.
 */
TS_MUST_CHECK int workload_item(const struct workload *w, uint64_t index, struct work_item *out);

struct tokcount;
/*
 * The same, with synthetic texts cut to exactly their drawn length by the
 * token counter tc (a tokenizer, --tokenizer; NULL: the approximation above).
 * The counts of a prompts file's lines stay approximate. tc is used by this
 * thread only while the call runs.
 */
TS_MUST_CHECK int workload_item_tc(const struct workload *w, uint64_t index,
                                   const struct tokcount *tc, struct work_item *out);

/* Frees the item's body; the item is zeroed. NULL is a no-op. */
void work_item_release(struct work_item *it);

/* The endpoint's path under the OpenAI base URL: "/v1/chat/completions", ... */
const char *workload_endpoint_path(enum workload_endpoint e);

/* Parses "chat", "completions", "embeddings" or "vector-search" into *out; returns 0 or
 * -EINVAL. */
TS_MUST_CHECK int workload_endpoint_parse(const char *s, enum workload_endpoint *out);

#endif
