/*
 * profile.h - the numbers that describe one simulated model server.
 *
 * A struct sim_profile is a plain value (no pointers, copy it freely): the
 * served model id, the step-time coefficients of the engine model (see
 * engine.h and "The simulator's model" in DESIGN.md), the scheduler limits,
 * the KV-cache size (given directly or derived from GPU memory) and the noise
 * settings. It is filled from a named preset, then changed by a YAML file
 * and/or `--set key=value` overrides, then checked with sim_profile_validate().
 *
 * Every field has a key (its name below) that sim_profile_set() and the YAML
 * loader accept; sim_profile_keys() lists them and sim_profile_key_help()
 * describes them, so `--help` and error messages never go stale.
 *
 * Units: times in milliseconds (the step time is computed in double and
 * rounded to whole nanoseconds by the engine), sizes in GB = 1e9 bytes,
 * bandwidth in GB/s = 1e9 bytes/s, KV entries in bytes per token summed
 * over all GPUs of the tensor-parallel group.
 *
 * Two fields are "auto" by default and derived by sim_profile_derive():
 *  - k_kv_ms_per_token < 0 (key value "auto"): kv_bytes_per_token /
 *    (tensor_parallel * mem_bw_gbps), i.e. the time to stream one context
 *    token's K and V from memory once per decode step; the TP group reads its
 *    shards in parallel.
 *  - kv_capacity_tokens == 0 ("auto"): (gpu_mem_gb * tensor_parallel *
 *    gpu_memory_utilization - weight_gb - reserved_gb) * 1e9 /
 *    kv_bytes_per_token, like vLLM's profiling run (reserved_gb stands for
 *    activations, CUDA graphs and non-torch memory).
 * So overriding kv_bytes_per_token or gpu_mem_gb moves the derived numbers
 * with it, unless the derived field itself was set.
 *
 * Nothing here allocates or keeps state; all functions are thread-safe.
 */
#ifndef TS_SIM_PROFILE_H
#define TS_SIM_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define SIM_PROFILE_STR_MAX  128        /* name and model, including the NUL */
#define SIM_PROFILE_FILE_MAX (1u << 20) /* a profile YAML file may not be larger */
#define SIM_PROFILE_SEQS_MAX 65536u     /* upper bound of max_num_seqs */

/* How a step is composed and how requests are admitted (key sched_policy). */
enum sim_sched_policy {
    SIM_SCHED_MIXED = 0,         /* "mixed": decodes + chunked prefill in one step (vLLM V1) */
    SIM_SCHED_PREFILL_FIRST = 1, /* "prefill-first": a step of whole prefills pauses decodes (V0) */
    SIM_SCHED_RESERVE_MAX = 2,   /* "reserve-max": admit with prompt + output blocks reserved, never
                                    preempt (TensorRT-LLM GUARANTEED_NO_EVICT), steps mixed */
};

#define SIM_SCHED_STEPS_MAX 64u /* upper bound of num_scheduler_steps */

struct sim_profile {
    char name[SIM_PROFILE_STR_MAX];  /* "name": preset or user label, for reports */
    char model[SIM_PROFILE_STR_MAX]; /* "model": the served model id (/v1/models) */
    uint32_t max_model_len;          /* context length: prompt + output tokens */

    /* Step time: t_fix + max(t_w, b * N_new) + k_kv * sum(decode ctx) + c_pf * sum(chunk^2). */
    double t_fix_ms;          /* per-step fixed cost: launch, sampling, scheduling, all-reduce */
    double t_w_ms;            /* weight-read time: the floor of a memory-bound step */
    double b_ms_per_token;    /* compute per token processed in the step */
    double k_kv_ms_per_token; /* per context token of each decoding seq; < 0 = auto */
    double c_pf_ms;           /* attention cost per prefill chunk, times chunk^2 */

    /* Overheads beyond the roofline (all 0 = none; docs/SIMULATOR.md "Engine mechanisms"). */
    double t_sched_ms_per_seq;  /* CPU scheduling/input preparation per seq, once per round */
    double t_sample_ms_per_seq; /* sampling + detokenising per seq, every step */
    uint32_t
        cuda_graph_max_batch;  /* decode steps up to this batch pad to a captured size; 0 = off */
    double api_ms_per_request; /* API server: per request (parse, template, IPC), serial queue */
    double api_ms_per_prompt_token; /* API server: tokenising, per prompt token (same queue) */
    double api_ms_per_event;        /* API server: per streamed token event (same queue) */

    /* Scheduler (vLLM names). */
    uint32_t num_scheduler_steps; /* decode steps per scheduling round (vLLM multi-step); 0 = 1 */
    uint32_t sched_policy;        /* enum sim_sched_policy */
    uint32_t max_num_batched_tokens; /* token budget per step (decode + prefill chunks) */
    uint32_t max_num_seqs;           /* running sequences cap */
    uint32_t block_size;             /* tokens per KV block */
    double watermark;                /* fraction of blocks kept free at admission */
    uint32_t max_waiting;            /* waiting-queue bound; 0 = unbounded (full -> 429) */
    bool prefix_caching;             /* automatic prefix caching (engine.h, "Prefix caching") */

    /* KV cache size. */
    uint64_t kv_capacity_tokens;   /* 0 = auto (derived from memory) */
    uint32_t tensor_parallel;      /* GPUs in the group */
    double gpu_mem_gb;             /* memory per GPU */
    double mem_bw_gbps;            /* memory bandwidth per GPU */
    double weight_gb;              /* model weights, whole group */
    double reserved_gb;            /* activations etc., whole group */
    double kv_bytes_per_token;     /* K+V bytes of one token, whole group */
    double gpu_memory_utilization; /* vLLM's fraction of GPU memory it may use */

    /* Noise: step time *= truncated normal (mean 1, sigma, cut at +-3 sigma); + stall. */
    bool noise;          /* false: timings are exact */
    double jitter_sigma; /* relative sigma, 0 .. 0.3 */
    double stall_prob;   /* probability per step of a stall */
    double stall_ms;     /* added to a stalled step */
    uint64_t seed;       /* the noise generator's seed */
};

/* Numbers that follow from a profile (sim_profile_derive). */
struct sim_profile_caps {
    uint64_t kv_tokens;        /* capacity, whole blocks: kv_blocks * block_size */
    uint64_t kv_blocks;        /* blocks of block_size tokens */
    uint64_t watermark_blocks; /* floor(watermark * kv_blocks), kept free at admission */
    uint32_t max_seqs;         /* most sequences that can run: min(max_num_seqs, kv_blocks) */
    double k_kv_ms_per_token;  /* effective (derived if auto) */
    double knee_tokens;        /* N* = t_w / b: batch tokens where compute overtakes weights */
    double min_step_ms;        /* t_fix + t_w: the fastest step (one decode, no context) */
};

/* NULL-terminated list of the preset names, in a stable order. Static storage. */
const char *const *sim_profile_names(void);

/* Copies preset `name` into *out. Returns 0, or -ENOENT for an unknown name. */
TS_MUST_CHECK int sim_profile_preset(const char *name, struct sim_profile *out);

/* NULL-terminated list of every settable key, in the struct's order. Static storage. */
const char *const *sim_profile_keys(void);
/* One-line description of a key with its unit, or NULL for an unknown key. */
const char *sim_profile_key_help(const char *key);

/*
 * Sets one field from its text form: integers in decimal, numbers as C
 * floats (finite), booleans as true/false/yes/no/on/off/1/0, and "auto" for
 * k_kv_ms_per_token and kv_capacity_tokens. Each field has a range (see the
 * key help); out-of-range values are errors. Returns 0; or -ENOENT for an
 * unknown key, -EINVAL for a bad value, with a message in err (always
 * NUL-terminated when errlen > 0; "did you mean ..." for near misses). On
 * error *p is unchanged. Cross-field checks are left to sim_profile_validate().
 */
TS_MUST_CHECK int sim_profile_set(struct sim_profile *p, const char *key, const char *value,
                                  char *err, size_t errlen);

/* Convenience for `--set key=value`: splits at the first '='; as sim_profile_set(). */
TS_MUST_CHECK int sim_profile_set_kv(struct sim_profile *p, const char *key_eq_value, char *err,
                                     size_t errlen);

/*
 * Writes the text form of a field into out (the form sim_profile_set()
 * accepts; "auto" for auto fields). Returns 0, -ENOENT for an unknown key, or
 * TS_TOOBIG when it does not fit in n bytes (out is still NUL-terminated).
 */
TS_MUST_CHECK int sim_profile_get(const struct sim_profile *p, const char *key, char *out,
                                  size_t n);

/*
 * Applies a YAML profile file on top of *p. The file is one mapping of
 * key: value pairs (scalars only, no aliases) with the keys above plus
 * `base: PRESET`, which first replaces *p with that preset wherever it
 * appears in the file. Files larger than SIM_PROFILE_FILE_MAX are refused.
 * Returns 0; a negative errno if the file cannot be read (-ENOENT when it
 * does not exist), TS_TOOBIG if too large, -ENOMEM, TS_PARSE for YAML syntax
 * errors (duplicate keys included), -EINVAL for an empty file, more than one
 * document, unknown keys or bad values.
 * err gets "path:line:column: message" (1-based) when the position is known.
 * On error *p is unchanged. Does not validate: call sim_profile_validate().
 */
TS_MUST_CHECK int sim_profile_load_yaml(struct sim_profile *p, const char *path, char *err,
                                        size_t errlen);
/* The same for YAML text in memory; `name` stands for the file in messages. */
TS_MUST_CHECK int sim_profile_load_yaml_mem(struct sim_profile *p, const char *name,
                                            const char *data, size_t len, char *err, size_t errlen);

/*
 * Computes the derived numbers into *caps. Returns 0, or -EINVAL when they
 * cannot be derived (memory does not hold the weights, zero block size,
 * zero bandwidth for an auto k_kv, ...). Does not write err: call
 * sim_profile_validate() for a message.
 */
TS_MUST_CHECK int sim_profile_derive(const struct sim_profile *p, struct sim_profile_caps *caps);

/*
 * Checks every field's range and the cross-field rules the engine relies on:
 * the profile derives; max_num_batched_tokens >= max_num_seqs (as vLLM
 * requires, so every decoding seq gets its token each step);
 * max_model_len fits in the cache above the watermark (so any accepted
 * request can run alone); t_fix_ms + t_w_ms > 0 (a step takes time).
 * Returns 0, or -EINVAL with a message naming the field in err.
 */
TS_MUST_CHECK int sim_profile_validate(const struct sim_profile *p, char *err, size_t errlen);

#endif
