/*
 * engine.h - the model of one continuous-batching LLM server (vLLM-like).
 *
 * Pure and deterministic: no I/O, no clock, no threads. Time only enters
 * through the now_ns arguments, so tests drive it in virtual time and the
 * simulator's endpoints drive it in real time (monotonic ns, ts_now_ns()).
 * One engine belongs to one thread; nothing here locks.
 *
 * Requests are identified by the caller's pointer `req` (never dereferenced).
 * The engine keeps a small record per request from sim_engine_submit() until
 * on_finish returns or sim_engine_cancel(); it allocates nothing per token
 * or per step.
 *
 * Steps. The engine runs steps back to back while it has work:
 *
 *     d = sim_engine_step(e, now);      // returns ns until the next call, 0 = idle
 *     ... at now + d (or as soon as possible after), call sim_engine_step again
 *
 * sim_engine_step(now) completes the step in progress, if it is due (emitting
 * its tokens through the callbacks), then schedules the next one starting at
 * `now` (the real time given, not the planned end) and returns its duration.
 * Calling it before the step in progress is due changes nothing and returns
 * the time left, so calling sim_engine_step(now) after every submit is always
 * safe: that is how an idle engine is started.
 *
 * Scheduling of a step, sched_policy "mixed" (vLLM with chunked prefill):
 *  1. every decoding seq (in admission order) gets 1 token; if it needs a new
 *     KV block and none is free, the most recently admitted running seq is
 *     preempted (possibly itself) until one is;
 *  2. seqs still in prefill get chunks of their remaining prefill, in
 *     admission order, from what is left of the token budget
 *     (max_num_batched_tokens);
 *  3. if nothing was preempted in this step, waiting requests are admitted
 *     FCFS (the head blocks the rest) while running < max_num_seqs, budget is
 *     left and the request's blocks fit with free blocks after admission >=
 *     floor(watermark * kv_blocks); each gets a first chunk of the remaining
 *     budget.
 * "prefill-first" (vLLM V0 without chunked prefill): running seqs still in
 * prefill get their chunks, then waiting requests are admitted as above
 * while their whole remaining prefill fits in the budget left (the first
 * may be chunked); a step with any prefill holds no decode; only a step
 * with no prefill schedules the decodes (pass 1).
 * "reserve-max" (TensorRT-LLM GUARANTEED_NO_EVICT): as "mixed", but
 * admission needs and takes the blocks of prompt + output_tokens at once, so
 * a decode never needs a block and nothing is ever preempted.
 * Multi-step (num_scheduler_steps N > 1): a batch of decodes only (no
 * prefill chunk) becomes a round: each seq runs min(N, tokens left) steps
 * while free blocks allow (never preempting for it); its tokens are all
 * yielded when the round completes, and admissions happen only between rounds.
 * API server: a request waits in one serial queue for api_ms_per_request +
 * api_ms_per_prompt_token * prompt before it can be admitted (FCFS: the
 * head waits, the rest behind it); each yielded token takes api_ms_per_event
 * in the same queue, which gives on_token_at's deliver_ns.
 * A step with no tokens leaves the engine idle when nothing is running or
 * waiting; when only requests still in the API queue wait, the engine runs
 * an empty step until the first of them is ready (it yields nothing and is
 * not counted in steps_total).
 *
 * Step time: t_fix + max(t_w, b * N_new) + k_kv * sum(ctx) + c_pf * sum(chunk^2)
 * + t_sample * seqs in ms (a round: the sum over its steps, each with the seqs
 * still running in it, plus t_sched * seqs once; a decode-only step of up to
 * cuda_graph_max_batch seqs counts N_new padded to 1, 2, 4 or a multiple of 8), where N_new = all tokens scheduled (decode + prefill chunks), ctx of a
 * decoding seq = its prompt + generated tokens (the context the new token
 * attends over, itself included), and chunk = each prefill chunk. With noise
 * on it is multiplied by a truncated normal (1 + sigma * z, |z| <= 3) and, with
 * probability stall_prob, stall_ms is added. It is rounded to the nearest
 * ns, at least 1 ns.
 *
 * Tokens. A seq's known tokens are prompt + generated. When a step has
 * computed all known tokens of a seq, the step yields that seq's next output
 * token: the step that finishes a prefill yields the first token (TTFT), and
 * each decode step after yields one more. A request ends when it has produced
 * output_tokens tokens.
 *
 * KV cache: blocks of block_size tokens. Admission allocates the blocks of
 * all known tokens at once (sharing cached ones, see "Prefix caching"); a
 * decoding seq takes one more block when its next token starts a block.
 * Preemption is by recompute: the victim's blocks are freed (cached ones stay
 * cached, free), its computed tokens reset to 0, and it goes back to the head
 * of the waiting queue (several victims keep their admission order). Its
 * `generated` count is kept: tokens already delivered are never delivered
 * again. On readmission it prefills prompt + generated tokens (less what is
 * still cached; chunked like any prefill, costing c_pf * chunk^2) and the
 * step that completes that prefill yields output token number `generated`
 * (0-based), i.e. the next token the client has not seen. So every request
 * gets on_token exactly output_tokens times, with indexes 0, 1, ...,
 * output_tokens - 1.
 *
 * Prefix caching (profile prefix_caching; vLLM V1's automatic prefix
 * caching). A request may come with the chained hashes of its full prompt
 * blocks (sim_engine_submit_prefix): hash i stands for prompt tokens
 * [i * block_size, (i + 1) * block_size) and everything before them, so equal
 * hashes mean equal prefixes. The cache maps a hash to one KV block:
 *  - admission looks up the longest run of leading hashes in the cache, at
 *    most floor((known - 1) / block_size) blocks, so at least one token is
 *    always computed (with a fully cached 1024-token prompt, 1008 tokens hit
 *    and one block is recomputed, as in vLLM). Those `hit` blocks are shared:
 *    computed starts at hit * block_size, so the prefill (and its cost, see
 *    "Step time") covers only the rest. The request needs need - hit new
 *    blocks plus the cached blocks no running seq holds (they stop being
 *    free); admission compares that with the free blocks above the watermark.
 *  - when a step completes, the full prompt blocks a seq has computed enter
 *    the cache (its block becomes the cached one; if the same hash was cached
 *    meanwhile by another seq, it shares that one and frees its copy).
 *  - a cached block is held (reference counted) by the running seqs using
 *    it and counts once in kv_blocks_used. When the last one finishes, is
 *    preempted or cancelled, the block stays cached but is free: it is
 *    evicted, least recently released first, only when a new block is needed
 *    (admission, a decode's new block) and no empty block is left. A seq's
 *    blocks are released last-first, so the tail of a prompt is evicted
 *    before its head (vLLM's order). A block some running seq holds is never
 *    evicted. So cached blocks never exceed the KV capacity, and the hash
 *    table holds at most kv_blocks entries.
 *  - each admission (readmission after a preemption included) counts
 *    prompt + generated tokens as queried and hit * block_size as hit
 *    (vLLM's prefix_cache_queries / prefix_cache_hits); the hit of the first
 *    admission is the request's cached_tokens.
 * The attention of the uncached tokens over the cached prefix is not
 * charged, as the later chunks of a chunked prefill are not charged for the
 * earlier ones. Generated tokens are not cached. Without prefix_caching the
 * hashes are ignored and nothing above happens.
 *
 * Callbacks run inside sim_engine_step (and sim_engine_set_kv_capacity) after
 * the engine's state is updated, all with now = the time passed in, in this
 * order: tokens and finishes of the completed step, then preemptions and
 * admissions of the next step. From a callback the caller MAY call
 * sim_engine_cancel (any request, including the one called about; no more
 * callbacks for it follow), sim_engine_submit (picked up by the next
 * scheduling; if the engine was about to go idle, the same sim_engine_step
 * call starts a step for it), sim_engine_stats, sim_engine_req_info, sim_engine_ready,
 * sim_engine_stall_until. It must NOT call sim_engine_step,
 * sim_engine_set_kv_capacity (returns -EBUSY) or sim_engine_free.
 */
#ifndef TS_SIM_ENGINE_H
#define TS_SIM_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "sim/profile.h"

struct sim_engine;

struct sim_engine_ops {
    /* The request entered the running batch (again, after a preemption). Optional. */
    void (*on_admit)(void *ctx, void *req, uint64_t now_ns);
    /* Output token number `index` (0-based, each exactly once) is ready. Required. */
    void (*on_token)(void *ctx, void *req, uint32_t index, uint64_t now_ns);
    /* All output tokens were delivered; the engine forgets req when this returns. Required. */
    void (*on_finish)(void *ctx, void *req, uint64_t now_ns);
    /* The request was preempted and waits to be recomputed. Optional. */
    void (*on_preempt)(void *ctx, void *req, uint64_t now_ns);
    /*
     * Instead of on_token when set (then on_token may be NULL): also gives
     * deliver_ns, when the modelled API server has sent the token (now_ns
     * plus its queue and api_ms_per_event; = now_ns when that is 0). The
     * offline driver (sim/offline.h) uses it; the live server writes at once.
     */
    void (*on_token_at)(void *ctx, void *req, uint32_t index, uint64_t now_ns, uint64_t deliver_ns);
};

/*
 * Creates an engine for a copy of *p. ops->on_token and ops->on_finish are
 * required; ctx is passed to every callback. Returns NULL when p does not
 * pass sim_profile_validate() (call it first for the message), when a
 * required callback is missing, or when memory runs out. Free with
 * sim_engine_free(), never from a callback.
 */
struct sim_engine *sim_engine_new(const struct sim_profile *p, const struct sim_engine_ops *ops,
                                  void *ctx);
/* Frees the engine and its records without any callback. NULL is a no-op. */
void sim_engine_free(struct sim_engine *e);

/*
 * Queues a request: prompt_tokens to prefill, then exactly output_tokens to
 * generate. Returns 0 (queued; on_admit/on_token/on_finish follow), or
 *   -EINVAL  prompt_tokens or output_tokens is 0 (caller: 400),
 *   -E2BIG   prompt + output > max_model_len, or it could never fit in the
 *            KV cache (caller: OpenAI 400 context_length_exceeded),
 *   -EBUSY   the waiting queue is bounded and full (caller: 429),
 *   -EAGAIN  not ready: a cold start is in progress (caller: 503),
 *   -EEXIST  req is already in the engine,
 *   -ENOMEM.
 * On error no callback ever runs for req. To start an idle engine, call
 * sim_engine_step(now) afterwards (always safe, see above).
 */
TS_MUST_CHECK int sim_engine_submit(struct sim_engine *e, void *req, uint32_t prompt_tokens,
                                    uint32_t output_tokens, uint64_t now_ns);

/*
 * sim_engine_submit with the chained hashes of the request's first n_hashes
 * full prompt blocks (see "Prefix caching"; n_hashes <= prompt_tokens /
 * block_size, else -EINVAL). The engine copies them (n_hashes * 16 bytes
 * while it holds the request), only when the profile has prefix_caching.
 * n_hashes 0 (block_hashes may be NULL) is sim_engine_submit. Errors as
 * sim_engine_submit.
 */
TS_MUST_CHECK int sim_engine_submit_prefix(struct sim_engine *e, void *req, uint32_t prompt_tokens,
                                           uint32_t output_tokens, const uint64_t *block_hashes,
                                           uint32_t n_hashes, uint64_t now_ns);

/*
 * The most output tokens req may produce (its max_tokens, or the context
 * left), which "reserve-max" reserves KV blocks for at admission instead of
 * output_tokens (the engine knows the real length; TensorRT-LLM does not).
 * Capped at max_model_len - prompt, so it always fits; less than
 * output_tokens counts as output_tokens. Call after submit, before the
 * request is admitted. Returns 0, -ENOENT (unknown req) or -EBUSY (admitted
 * already).
 */
TS_MUST_CHECK int sim_engine_set_reserve(struct sim_engine *e, void *req, uint32_t max_output);

/*
 * The client went away: drops req wherever it is (waiting or running), frees
 * its KV blocks at once, and guarantees no further callback for it. Unknown
 * req (finished, never submitted) is a no-op.
 */
void sim_engine_cancel(struct sim_engine *e, void *req);

/*
 * Completes the step in progress if now_ns >= its end (see "Steps" above),
 * schedules the next, and returns the ns until sim_engine_step should be
 * called again: the new step's duration, the time left of a step not yet due,
 * or 0 when idle (nothing running or waiting; call again after a submit).
 */
uint64_t sim_engine_step(struct sim_engine *e, uint64_t now_ns);

/* Absolute time the step in progress is due (including a stall), or 0 if idle. */
uint64_t sim_engine_next_due(const struct sim_engine *e);

struct sim_engine_stats {
    uint32_t running; /* seqs in the running batch */
    uint32_t waiting; /* seqs waiting (new or preempted) */
    uint64_t kv_blocks_used;
    uint64_t kv_blocks_total;
    double kv_usage; /* used / total, 0..1 */
    uint64_t preemptions_total;
    uint64_t generation_tokens_total; /* output tokens produced */
    uint64_t prompt_tokens_total;     /* prompt tokens of requests that got their first token */
    uint64_t prefill_tokens_total;    /* tokens prefilled, recomputation included */
    uint64_t steps_total;             /* steps completed */
    uint64_t requests_finished;
    uint64_t requests_cancelled;
    uint64_t requests_rejected;    /* submits refused with -E2BIG, -EBUSY or -EAGAIN */
    uint64_t prefix_cache_queries; /* tokens of admitted requests looked up (prompt + generated) */
    uint64_t prefix_cache_hits;    /* of those, tokens found cached */
    uint64_t prefix_cache_blocks;  /* blocks in the prefix cache (held or idle) */
    uint64_t prefix_cache_evictions; /* idle cached blocks evicted for new blocks */
    uint32_t batch_tokens;           /* tokens in the step in progress (N_new) */
    uint32_t batch_seqs;             /* seqs in the step in progress */
    uint64_t step_ns;                /* duration of the step in progress, 0 if idle */
};

/* Fills *st with a snapshot; O(1). */
void sim_engine_stats(const struct sim_engine *e, struct sim_engine_stats *st);

enum sim_req_state {
    SIM_REQ_WAITING = 1,
    SIM_REQ_RUNNING = 2,
    SIM_REQ_FINISHED = 3, /* only seen from inside on_finish or an earlier callback of its step */
};

struct sim_req_info {
    enum sim_req_state state;
    uint32_t prompt_tokens;
    uint32_t output_tokens;
    uint32_t generated; /* output tokens delivered so far */
    uint32_t preemptions;
    uint32_t cached_tokens;  /* prompt tokens found in the prefix cache at the first admission */
    uint64_t arrival_ns;     /* submit time */
    uint64_t admitted_ns;    /* first admission, 0 before */
    uint64_t first_token_ns; /* 0 before */
    uint64_t last_token_ns;  /* 0 before */
};

/* Fills *info for a request the engine holds. Returns 0 or -ENOENT. */
TS_MUST_CHECK int sim_engine_req_info(const struct sim_engine *e, const void *req,
                                      struct sim_req_info *info);

/* ---- admin hooks (chaos) ---- */

/*
 * Resizes the KV cache to `tokens` (rounded down to whole blocks; 0 restores
 * the profile's capacity). When shrinking below what is in use, running seqs
 * are preempted from the most recently admitted (on_preempt runs now). It may
 * not go below max_model_len plus the watermark, so every accepted request
 * can still run alone. Returns 0, -EINVAL (too small), or -EBUSY from a
 * callback.
 */
TS_MUST_CHECK int sim_engine_set_kv_capacity(struct sim_engine *e, uint64_t tokens,
                                             uint64_t now_ns);

/*
 * The engine hangs until until_ns: the step in progress is not due before
 * it, and a step started while stalled (now < until_ns) ends at until_ns +
 * its duration. A caller whose timer fires early just gets the time left
 * back from sim_engine_step. 0 (or a past time) ends a stall; a step started
 * during it then ends at max(its start, until_ns) + its duration (the caller
 * re-arms its timer from sim_engine_next_due).
 */
void sim_engine_stall_until(struct sim_engine *e, uint64_t until_ns);

/* Cold start: until ready_ns, sim_engine_ready() is false and submits get -EAGAIN. */
void sim_engine_set_ready_at(struct sim_engine *e, uint64_t ready_ns);
bool sim_engine_ready(const struct sim_engine *e, uint64_t now_ns);

/* The engine's copy of its profile and the derived numbers in effect. */
const struct sim_profile *sim_engine_profile(const struct sim_engine *e);
void sim_engine_caps(const struct sim_engine *e, struct sim_profile_caps *caps);

#endif
