#include "sim/profile.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libfyaml.h>

#include "base/alloc.h"
#include "base/strdist.h"
#include "base/utf8.h"
#include "base/file.h"

/*
 * Presets. Sources of the numbers (GB = 1e9 bytes):
 *
 * Llama 3.1 8B: 8.03e9 parameters, bf16 -> weight_gb 16.06. 32 layers, 8 KV
 * heads of dim 128: K+V = 2 * 32 * 8 * 128 * 2 bytes = 131072 B/token (128 KiB).
 * Llama 3.1 70B: 70.6e9 parameters -> 141.2 GB. 80 layers, 8 KV heads of 128:
 * 2 * 80 * 8 * 128 * 2 = 327680 B/token (320 KiB), split over the TP group
 * (each GPU holds 2 of the 8 KV heads), so k_kv = 327680 / (4 * 3350e9) s.
 * Context length of both: 131072 (the model card).
 *
 * GPUs: A100-SXM4-80GB and H100-SXM5-80GB both have 81920 MiB = 85.9 GB;
 * memory bandwidth 2039 GB/s (A100 80GB SXM) and 3350 GB/s (H100 SXM).
 *
 * t_w, b (DESIGN.md's indicative values for a 7-8B model): A100 9.3 ms and
 * 0.064 ms/token; H100 5.6 ms and 0.020 ms/token. They imply ~85% of peak
 * bandwidth (16.06 GB / 2039 GB/s = 7.9 ms vs 9.3; 16.06 / 3350 = 4.8 vs 5.6)
 * and an achieved 2 * 8.03e9 FLOP / b = 251 TFLOP/s (A100), 803 TFLOP/s (H100).
 * k_kv is derived (auto): 131072 B / 2039e9 B/s = 6.43e-5 ms per context
 * token on A100, 3.91e-5 ms on H100.
 *
 * c_pf: causal attention of a c-token chunk costs about 2 matmuls * 2 FLOP *
 * c^2 / 2 * d_model * layers = 2 * c^2 * 4096 * 32 = 262144 c^2 FLOP for 8B
 * (2 * 8192 * 80 = 1310720 c^2 for 70B), at the same achieved FLOP rate as b:
 * c_pf = 262144 * b / 16.06e9 -> 1.045e-6 ms (A100), 3.26e-7 ms (H100);
 * 70B: 1310720 * 0.049 / 141.2e9 = 4.55e-7 ms.
 *
 * 70B on 4x H100 (TP 4): weights read in parallel, 141.2 GB / (4 * 3350 GB/s)
 * = 10.5 ms ideal, 12.4 ms at the 85% the 8B presets imply. b: 141.2e9 FLOP per
 * token over 4 GPUs at 803 TFLOP/s each and 90% TP efficiency = 0.049 ms.
 * t_fix: 0.15 ms plus 2 all-reduces per layer * 80 layers * ~10 us on NVLink.
 *
 * reserved_gb (activation peak for a 2048-token batch, CUDA graphs, non-torch
 * memory): 3 GB for 8B, 2 GB per GPU for 70B TP 4. With utilization 0.9 this
 * gives about 444k KV tokens for 8B (vLLM reports ~27k blocks of 16) and
 * ~488k for 70B on 4x H100.
 *
 * Prefix caching: on for the GPU presets (vLLM V1 enables it by default), off
 * for tiny, whose exact timings the tests of other features rely on.
 *
 * Noise on GPU presets: 3% step jitter, and a 30 ms stall (GC pause, host
 * hiccup) once in 2000 steps. The tiny preset is exact (noise off).
 *
 * Presets fitted to published benchmarks (docs/SIMULATOR.md, "Presets that stand
 * for published systems", has the table and the derivation; tests/unit/
 * test_offline.c checks every figure within 15%):
 *
 * vllm060-llama31-8b-a100: the roofline numbers above (t_w 9.3, b 0.064, c_pf)
 * kept; what vLLM 0.6.0 adds is overhead: t_fix 2.5 ms per step (Python
 * scheduler, input preparation, launch; with 8 seqs a step is then 12.6 ms,
 * vLLM's perf suite measures ~12.3 ms at batch 8), t_sample 0.05 ms per seq
 * per step (sampling over the 128k vocabulary and detokenising in Python:
 * what makes a 256-seq step ~31 ms and caps the 5,000-prompt burst at ~4,000
 * tok/s), t_sched 0.2 ms per seq per round (block tables and inputs, paid
 * once per 10 steps), the API server 14 ms per request (HTTP, chat template,
 * ZMQ to the engine process: fitted to TTFT at 4 req/s) plus 2 us per prompt
 * token (fast tokenizer) and 0.02 ms per streamed event. num_scheduler_steps
 * 10, prefill-first, max_num_batched_tokens = max_model_len = 4096 and CUDA
 * graphs up to 256 are the published configuration and V0's defaults.
 *
 * nim-trtllm-llama33-70b-fp8-2xh100: FP8 weights 72 GB over TP 2:
 * t_w = 72 / (2 * 3350) = 10.7 ms ideal, 12.6 ms at the 85% above; b = 2 *
 * 70.6e9 FLOP / 0.077 ms = 1.83 PFLOP/s for the pair, 46% of FP8 dense peak;
 * c_pf = 1310720 * b / 141.2e9 = 7.1e-7; t_fix 5.5 ms (160 all-reduces per
 * step at ~25 us on NVLink plus launch); KV 163840 B/token (FP8 cache: 2 *
 * 80 layers * 8 KV heads * 128 * 1 B), reserved 3.5
 * GB: 87 sequences of 5,500 tokens fit (NIM's published knee: 88-94);
 * reserve-max admission (GUARANTEED_NO_EVICT); a 2048-token step budget
 * (chunked context: with 8192 the 5-50 user TTFTs come out 1.4-1.9x).
 *
 * tiny: a toy CPU-speed server for tests and benchmarks, not a real model:
 * 1 ms weight floor, 0.01 ms/token (knee 100 tokens), 100 B of KV per token
 * read at 100 GB/s (1 ns per context token), 2^20 tokens of KV and 4096
 * sequences, so thousands of streams of a few hundred tokens run at once.
 */
static const struct sim_profile presets[] = {
    {
        .name = "llama3-8b-a100",
        .model = "meta-llama/Llama-3.1-8B-Instruct",
        .max_model_len = 131072,
        .t_fix_ms = 0.15,
        .t_w_ms = 9.3,
        .b_ms_per_token = 0.064,
        .k_kv_ms_per_token = -1,
        .c_pf_ms = 1.045e-6,
        .max_num_batched_tokens = 2048,
        .max_num_seqs = 256,
        .block_size = 16,
        .watermark = 0.01,
        .max_waiting = 0,
        .prefix_caching = true,
        .kv_capacity_tokens = 0,
        .tensor_parallel = 1,
        .gpu_mem_gb = 85.9,
        .mem_bw_gbps = 2039,
        .weight_gb = 16.06,
        .reserved_gb = 3.0,
        .kv_bytes_per_token = 131072,
        .gpu_memory_utilization = 0.9,
        .noise = true,
        .jitter_sigma = 0.03,
        .stall_prob = 0.0005,
        .stall_ms = 30,
        .seed = 1,
    },
    {
        .name = "llama3-8b-h100",
        .model = "meta-llama/Llama-3.1-8B-Instruct",
        .max_model_len = 131072,
        .t_fix_ms = 0.15,
        .t_w_ms = 5.6,
        .b_ms_per_token = 0.020,
        .k_kv_ms_per_token = -1,
        .c_pf_ms = 3.26e-7,
        .max_num_batched_tokens = 2048,
        .max_num_seqs = 256,
        .block_size = 16,
        .watermark = 0.01,
        .max_waiting = 0,
        .prefix_caching = true,
        .kv_capacity_tokens = 0,
        .tensor_parallel = 1,
        .gpu_mem_gb = 85.9,
        .mem_bw_gbps = 3350,
        .weight_gb = 16.06,
        .reserved_gb = 3.0,
        .kv_bytes_per_token = 131072,
        .gpu_memory_utilization = 0.9,
        .noise = true,
        .jitter_sigma = 0.03,
        .stall_prob = 0.0005,
        .stall_ms = 30,
        .seed = 1,
    },
    {
        .name = "llama3-70b-4xh100",
        .model = "meta-llama/Llama-3.1-70B-Instruct",
        .max_model_len = 131072,
        .t_fix_ms = 1.75,
        .t_w_ms = 12.4,
        .b_ms_per_token = 0.049,
        .k_kv_ms_per_token = -1,
        .c_pf_ms = 4.55e-7,
        .max_num_batched_tokens = 2048,
        .max_num_seqs = 256,
        .block_size = 16,
        .watermark = 0.01,
        .max_waiting = 0,
        .prefix_caching = true,
        .kv_capacity_tokens = 0,
        .tensor_parallel = 4,
        .gpu_mem_gb = 85.9,
        .mem_bw_gbps = 3350,
        .weight_gb = 141.2,
        .reserved_gb = 8.0,
        .kv_bytes_per_token = 327680,
        .gpu_memory_utilization = 0.9,
        .noise = true,
        .jitter_sigma = 0.03,
        .stall_prob = 0.0005,
        .stall_ms = 30,
        .seed = 1,
    },
    {
        /* vLLM 0.6.0 serving Llama-3.1-8B on one A100-80GB with --num-scheduler-steps 10 and
         * max_model_len 4096 (the V0 scheduler without chunked prefill). See "Presets fitted
         * to published benchmarks" above. */
        .name = "vllm060-llama31-8b-a100",
        .model = "meta-llama/Llama-3.1-8B-Instruct",
        .max_model_len = 4096,
        .t_fix_ms = 2.5,
        .t_w_ms = 9.3,
        .b_ms_per_token = 0.064,
        .k_kv_ms_per_token = -1,
        .c_pf_ms = 1.045e-6,
        .t_sched_ms_per_seq = 0.2,
        .t_sample_ms_per_seq = 0.05,
        .cuda_graph_max_batch = 256,
        .api_ms_per_request = 14,
        .api_ms_per_prompt_token = 0.002,
        .api_ms_per_event = 0.02,
        .num_scheduler_steps = 10,
        .sched_policy = SIM_SCHED_PREFILL_FIRST,
        .max_num_batched_tokens = 4096,
        .max_num_seqs = 256,
        .block_size = 16,
        .watermark = 0.01,
        .max_waiting = 0,
        .prefix_caching = false,
        .kv_capacity_tokens = 0,
        .tensor_parallel = 1,
        .gpu_mem_gb = 85.9,
        .mem_bw_gbps = 2039,
        .weight_gb = 16.06,
        .reserved_gb = 3.0,
        .kv_bytes_per_token = 131072,
        .gpu_memory_utilization = 0.9,
        .noise = true,
        .jitter_sigma = 0.03,
        .stall_prob = 0.0005,
        .stall_ms = 30,
        .seed = 1,
    },
    {
        /* NVIDIA NIM 1.8 (TensorRT-LLM) serving Llama-3.3-70B in FP8 on 2x H100-SXM with tensor
         * parallelism 2: in-flight batching with chunked context, GUARANTEED_NO_EVICT. */
        .name = "nim-trtllm-llama33-70b-fp8-2xh100",
        .model = "meta-llama/Llama-3.3-70B-Instruct",
        .max_model_len = 131072,
        .t_fix_ms = 5.5,
        .t_w_ms = 12.6,
        .b_ms_per_token = 0.077,
        .k_kv_ms_per_token = -1,
        .c_pf_ms = 7.1e-7,
        .t_sched_ms_per_seq = 0,
        .t_sample_ms_per_seq = 0.02,
        .cuda_graph_max_batch = 0,
        .api_ms_per_request = 0,
        .api_ms_per_prompt_token = 0.002,
        .api_ms_per_event = 0,
        .num_scheduler_steps = 1,
        .sched_policy = SIM_SCHED_RESERVE_MAX,
        .max_num_batched_tokens = 2048,
        .max_num_seqs = 256,
        .block_size = 32,
        .watermark = 0,
        .max_waiting = 0,
        .prefix_caching = false,
        .kv_capacity_tokens = 0,
        .tensor_parallel = 2,
        .gpu_mem_gb = 85.9,
        .mem_bw_gbps = 3350,
        .weight_gb = 72,
        .reserved_gb = 3.5,
        .kv_bytes_per_token = 163840,
        .gpu_memory_utilization = 0.9,
        .noise = true,
        .jitter_sigma = 0.03,
        .stall_prob = 0.0005,
        .stall_ms = 30,
        .seed = 1,
    },
    {
        .name = "tiny",
        .model = "tokenstorm/tiny",
        .max_model_len = 32768,
        .t_fix_ms = 0.05,
        .t_w_ms = 1.0,
        .b_ms_per_token = 0.01,
        .k_kv_ms_per_token = -1,
        .c_pf_ms = 0,
        .max_num_batched_tokens = 8192,
        .max_num_seqs = 4096,
        .block_size = 16,
        .watermark = 0.01,
        .max_waiting = 0,
        .prefix_caching = false,
        .kv_capacity_tokens = 1048576,
        .tensor_parallel = 1,
        .gpu_mem_gb = 16,
        .mem_bw_gbps = 100,
        .weight_gb = 1,
        .reserved_gb = 0,
        .kv_bytes_per_token = 100,
        .gpu_memory_utilization = 0.9,
        .noise = false,
        .jitter_sigma = 0.03,
        .stall_prob = 0,
        .stall_ms = 0,
        .seed = 1,
    },
};

#define N_PRESETS (sizeof(presets) / sizeof(presets[0]))

static const char *const preset_names[] = {
    "llama3-8b-a100",
    "llama3-8b-h100",
    "llama3-70b-4xh100",
    "vllm060-llama31-8b-a100",
    "nim-trtllm-llama33-70b-fp8-2xh100",
    "tiny",
    NULL,
};

const char *const *sim_profile_names(void)
{
    return preset_names;
}

int sim_profile_preset(const char *name, struct sim_profile *out)
{
    if (!name)
        return -ENOENT;
    for (size_t i = 0; i < N_PRESETS; i++) {
        if (strcmp(presets[i].name, name) == 0) {
            *out = presets[i];
            return 0;
        }
    }
    return -ENOENT;
}

/* ---- fields ---- */

enum field_type {
    FIELD_STR,
    FIELD_U32,
    FIELD_U64,
    FIELD_DOUBLE,
    FIELD_BOOL,
    FIELD_ENUM, /* uint32_t, one of enum_names (sched_policy) */
};

static const char *const policy_names[] = {"mixed", "prefill-first", "reserve-max", NULL};
#define N_POLICIES 3

enum field_flags {
    FIELD_AUTO = 1 << 0,    /* accepts "auto" (double: -1, integer: 0) */
    FIELD_MIN_OPEN = 1 << 1 /* the minimum itself is not allowed (> min) */
};

struct field {
    const char *key;
    enum field_type type;
    unsigned flags;
    size_t off;
    double min, max;
    const char *help;
};

/* The one list of fields: X(key, type, flags, min, max, help). */
#define PROFILE_FIELDS(X)                                                                          \
    X(name, FIELD_STR, 0, 0, 0, "profile label shown in reports")                                  \
    X(model, FIELD_STR, 0, 0, 0, "served model id (what /v1/models lists)")                        \
    X(max_model_len, FIELD_U32, 0, 1, 16777216, "context length in tokens (prompt + output)")      \
    X(t_fix_ms, FIELD_DOUBLE, 0, 0, 60000, "fixed cost of every step, ms")                         \
    X(t_w_ms, FIELD_DOUBLE, 0, 0, 60000, "weight-read time per step (memory-bound floor), ms")     \
    X(b_ms_per_token, FIELD_DOUBLE, 0, 0, 1000, "compute per token processed in a step, ms")       \
    X(k_kv_ms_per_token, FIELD_DOUBLE, FIELD_AUTO, 0, 1000,                                        \
      "per context token of each decoding seq per step, ms; auto = kv bytes / bandwidth")          \
    X(c_pf_ms, FIELD_DOUBLE, 0, 0, 1000, "attention cost per prefill chunk squared, ms/token^2")   \
    X(t_sched_ms_per_seq, FIELD_DOUBLE, 0, 0, 1000,                                                \
      "scheduling/input preparation per seq in a round (once per num_scheduler_steps), ms")        \
    X(t_sample_ms_per_seq, FIELD_DOUBLE, 0, 0, 1000,                                               \
      "sampling and detokenising per seq in a step, ms")                                           \
    X(cuda_graph_max_batch, FIELD_U32, 0, 0, SIM_PROFILE_SEQS_MAX,                                 \
      "decode steps of up to this many seqs pad to a CUDA-graph size (1,2,4,8,16,..); 0 = off")    \
    X(api_ms_per_request, FIELD_DOUBLE, 0, 0, 60000,                                               \
      "API server cost per request before the engine sees it (one serial queue), ms")              \
    X(api_ms_per_prompt_token, FIELD_DOUBLE, 0, 0, 1000,                                           \
      "API server cost per prompt token before the engine sees it (same queue), ms")               \
    X(api_ms_per_event, FIELD_DOUBLE, 0, 0, 1000,                                                  \
      "API server cost per streamed token event (same queue; offline model only), ms")             \
    X(num_scheduler_steps, FIELD_U32, 0, 0, SIM_SCHED_STEPS_MAX,                                   \
      "decode steps per scheduling round (vLLM multi-step); 0 or 1 = every step")                  \
    X(sched_policy, FIELD_ENUM, 0, 0, N_POLICIES - 1,                                              \
      "mixed (vLLM V1), prefill-first (vLLM V0), reserve-max (TensorRT-LLM no-evict)")             \
    X(max_num_batched_tokens, FIELD_U32, 0, 1, 1048576, "token budget of one step")                \
    X(max_num_seqs, FIELD_U32, 0, 1, SIM_PROFILE_SEQS_MAX, "most sequences running at once")       \
    X(block_size, FIELD_U32, 0, 1, 1024, "tokens per KV-cache block")                              \
    X(watermark, FIELD_DOUBLE, 0, 0, 0.5, "fraction of KV blocks kept free when admitting")        \
    X(max_waiting, FIELD_U32, 0, 0, 16777216,                                                      \
      "waiting-queue bound, 0 = unbounded; when full new requests get 429")                        \
    X(prefix_caching, FIELD_BOOL, 0, 0, 1,                                                         \
      "automatic prefix caching: reuse the KV blocks of identical prompt prefixes")                \
    X(kv_capacity_tokens, FIELD_U64, FIELD_AUTO, 1, 1099511627776.0,                               \
      "KV-cache size in tokens; auto = derived from GPU memory")                                   \
    X(tensor_parallel, FIELD_U32, 0, 1, 1024, "GPUs in the tensor-parallel group")                 \
    X(gpu_mem_gb, FIELD_DOUBLE, FIELD_MIN_OPEN, 0, 1e6, "memory per GPU, GB (1e9 bytes)")          \
    X(mem_bw_gbps, FIELD_DOUBLE, FIELD_MIN_OPEN, 0, 1e7, "memory bandwidth per GPU, GB/s")         \
    X(weight_gb, FIELD_DOUBLE, 0, 0, 1e7, "model weights over the whole group, GB")                \
    X(reserved_gb, FIELD_DOUBLE, 0, 0, 1e7,                                                        \
      "memory for activations and runtime over the whole group, GB")                               \
    X(kv_bytes_per_token, FIELD_DOUBLE, FIELD_MIN_OPEN, 0, 1e9,                                    \
      "K+V bytes of one token over the whole group")                                               \
    X(gpu_memory_utilization, FIELD_DOUBLE, FIELD_MIN_OPEN, 0, 1,                                  \
      "fraction of GPU memory the server may use")                                                 \
    X(noise, FIELD_BOOL, 0, 0, 1, "step-time jitter and stalls on/off")                            \
    X(jitter_sigma, FIELD_DOUBLE, 0, 0, 0.3,                                                       \
      "relative sigma of the step-time multiplier (truncated at 3 sigma)")                         \
    X(stall_prob, FIELD_DOUBLE, 0, 0, 1, "probability of a stall per step")                        \
    X(stall_ms, FIELD_DOUBLE, 0, 0, 600000, "length of a stall, ms")                               \
    X(seed, FIELD_U64, 0, 0, 18446744073709551615.0, "seed of the noise generator")

#define FIELD_ENTRY(k, t, fl, lo, hi, h) {#k, t, fl, offsetof(struct sim_profile, k), lo, hi, h},
#define FIELD_KEY(k, t, fl, lo, hi, h)   #k,

static const struct field fields[] = {PROFILE_FIELDS(FIELD_ENTRY)};
static const char *const field_keys[] = {PROFILE_FIELDS(FIELD_KEY) NULL};

#undef FIELD_ENTRY
#undef FIELD_KEY

#define N_FIELDS (sizeof(fields) / sizeof(fields[0]))

const char *const *sim_profile_keys(void)
{
    return field_keys;
}

static const struct field *field_find(const char *key, size_t len)
{
    for (size_t i = 0; i < N_FIELDS; i++) {
        if (strlen(fields[i].key) == len && memcmp(fields[i].key, key, len) == 0)
            return &fields[i];
    }
    return NULL;
}

const char *sim_profile_key_help(const char *key)
{
    const struct field *f = key ? field_find(key, strlen(key)) : NULL;
    return f ? f->help : NULL;
}

/* "unknown key 'x'" plus a suggestion when one key is close. */
static void err_unknown_key(char *err, size_t errlen, const char *prefix, const char *key,
                            size_t len)
{
    const char *best = NULL;
    size_t best_d = 3; /* suggest within 2 edits, or a key that starts with it */
    for (size_t i = 0; i < N_FIELDS; i++) {
        size_t d = str_edit_distance(key, len, fields[i].key, strlen(fields[i].key));
        if (d >= 3 && len >= 3 && strncmp(fields[i].key, key, len) == 0)
            d = 2;
        if (d < best_d) {
            best_d = d;
            best = fields[i].key;
        }
    }
    int klen = len > 64 ? 64 : (int)len;
    if (best)
        ts_errf(err, errlen, "%sunknown profile key '%.*s' (did you mean '%s'?)", prefix, klen, key,
                best);
    else
        ts_errf(err, errlen, "%sunknown profile key '%.*s' (see `tokenstorm sim --help` for keys)",
                prefix, klen, key);
}

static bool parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return true;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return true;
        }
    }
    return false;
}

static bool parse_u64(const char *s, uint64_t *out)
{
    if (*s < '0' || *s > '9')
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end != '\0')
        return false;
    *out = v;
    return true;
}

static bool parse_double(const char *s, double *out)
{
    if (*s == '\0' || *s == ' ' || *s == '\t')
        return false;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end != '\0' || !isfinite(v))
        return false;
    *out = v;
    return true;
}

static bool in_range(const struct field *f, double v)
{
    if (f->flags & FIELD_MIN_OPEN)
        return v > f->min && v <= f->max;
    return v >= f->min && v <= f->max;
}

static void err_range(char *err, size_t errlen, const struct field *f, const char *value)
{
    char lo[32], hi[32];
    snprintf(lo, sizeof(lo), "%.15g", f->min);
    snprintf(hi, sizeof(hi), "%.15g", f->max);
    ts_errf(err, errlen, "%s: '%.64s' is out of range (%s%s .. %s%s)", f->key, value,
            (f->flags & FIELD_MIN_OPEN) ? "> " : "", lo, hi,
            (f->flags & FIELD_AUTO) ? ", or auto" : "");
}

static int field_set(struct sim_profile *p, const struct field *f, const char *value, char *err,
                     size_t errlen)
{
    char *base = (char *)p + f->off;
    bool is_auto = (f->flags & FIELD_AUTO) && strcmp(value, "auto") == 0;

    switch (f->type) {
    case FIELD_STR: {
        size_t len = strlen(value);
        if (len == 0 || len >= SIM_PROFILE_STR_MAX) {
            ts_errf(err, errlen, "%s: must be 1 to %d characters", f->key, SIM_PROFILE_STR_MAX - 1);
            return -EINVAL;
        }
        memcpy(base, value, len + 1);
        return 0;
    }
    case FIELD_ENUM:
        for (uint32_t i = 0; policy_names[i]; i++) {
            if (strcmp(value, policy_names[i]) == 0) {
                *(uint32_t *)base = i;
                return 0;
            }
        }
        ts_errf(err, errlen, "%s: '%.64s' is not one of mixed, prefill-first, reserve-max", f->key,
                value);
        return -EINVAL;
    case FIELD_BOOL: {
        bool b;
        if (!parse_bool(value, &b)) {
            ts_errf(err, errlen, "%s: '%.64s' is not a boolean (true/false)", f->key, value);
            return -EINVAL;
        }
        *(bool *)base = b;
        return 0;
    }
    case FIELD_U32:
    case FIELD_U64: {
        uint64_t v = 0;
        if (!is_auto) {
            if (!parse_u64(value, &v)) {
                ts_errf(err, errlen, "%s: '%.64s' is not a whole number%s", f->key, value,
                        (f->flags & FIELD_AUTO) ? " or auto" : "");
                return -EINVAL;
            }
            if ((double)v < f->min || (double)v > f->max) {
                err_range(err, errlen, f, value);
                return -EINVAL;
            }
        }
        if (f->type == FIELD_U32)
            *(uint32_t *)base = (uint32_t)v;
        else
            *(uint64_t *)base = v;
        return 0;
    }
    case FIELD_DOUBLE: {
        double v = -1;
        if (!is_auto) {
            if (!parse_double(value, &v)) {
                ts_errf(err, errlen, "%s: '%.64s' is not a number%s", f->key, value,
                        (f->flags & FIELD_AUTO) ? " or auto" : "");
                return -EINVAL;
            }
            if (!in_range(f, v)) {
                err_range(err, errlen, f, value);
                return -EINVAL;
            }
        }
        *(double *)base = v;
        return 0;
    }
    }
    return -EINVAL;
}

int sim_profile_set(struct sim_profile *p, const char *key, const char *value, char *err,
                    size_t errlen)
{
    if (!key || !value) {
        ts_errf(err, errlen, "profile key and value are required");
        return -EINVAL;
    }
    const struct field *f = field_find(key, strlen(key));
    if (!f) {
        err_unknown_key(err, errlen, "", key, strlen(key));
        return -ENOENT;
    }
    return field_set(p, f, value, err, errlen);
}

int sim_profile_set_kv(struct sim_profile *p, const char *key_eq_value, char *err, size_t errlen)
{
    const char *eq = key_eq_value ? strchr(key_eq_value, '=') : NULL;
    if (!eq) {
        ts_errf(err, errlen, "expected key=value, got '%.64s'", key_eq_value ? key_eq_value : "");
        return -EINVAL;
    }
    size_t klen = (size_t)(eq - key_eq_value);
    char key[64];
    if (klen >= sizeof(key)) {
        err_unknown_key(err, errlen, "", key_eq_value, klen);
        return -ENOENT;
    }
    memcpy(key, key_eq_value, klen);
    key[klen] = '\0';
    return sim_profile_set(p, key, eq + 1, err, errlen);
}

int sim_profile_get(const struct sim_profile *p, const char *key, char *out, size_t n)
{
    const struct field *f = key ? field_find(key, strlen(key)) : NULL;
    if (!f)
        return -ENOENT;
    const char *base = (const char *)p + f->off;
    int w = 0;
    switch (f->type) {
    case FIELD_STR:
        w = snprintf(out, n, "%s", base);
        break;
    case FIELD_BOOL:
        w = snprintf(out, n, "%s", *(const bool *)base ? "true" : "false");
        break;
    case FIELD_ENUM: {
        uint32_t v = *(const uint32_t *)base;
        w = snprintf(out, n, "%s", v < N_POLICIES ? policy_names[v] : "?");
        break;
    }
    case FIELD_U32: {
        uint32_t v = *(const uint32_t *)base;
        w = (f->flags & FIELD_AUTO) && v == 0 ? snprintf(out, n, "auto")
                                              : snprintf(out, n, "%" PRIu32, v);
        break;
    }
    case FIELD_U64: {
        uint64_t v = *(const uint64_t *)base;
        w = (f->flags & FIELD_AUTO) && v == 0 ? snprintf(out, n, "auto")
                                              : snprintf(out, n, "%" PRIu64, v);
        break;
    }
    case FIELD_DOUBLE: {
        double v = *(const double *)base;
        if ((f->flags & FIELD_AUTO) && v < 0) {
            w = snprintf(out, n, "auto");
            break;
        }
        /* The shortest of %.15g / %.17g that reads back exactly. */
        char tmp[40];
        snprintf(tmp, sizeof(tmp), "%.15g", v);
        if (strtod(tmp, NULL) != v)
            snprintf(tmp, sizeof(tmp), "%.17g", v);
        w = snprintf(out, n, "%s", tmp);
        break;
    }
    }
    if (w < 0 || (size_t)w >= n)
        return TS_TOOBIG;
    return 0;
}

/* ---- derived numbers and validation ---- */

int sim_profile_derive(const struct sim_profile *p, struct sim_profile_caps *caps)
{
    memset(caps, 0, sizeof(*caps));
    if (p->block_size == 0)
        return -EINVAL;

    double k_kv = p->k_kv_ms_per_token;
    if (k_kv < 0) {
        double bw = p->mem_bw_gbps * 1e9 * (double)p->tensor_parallel; /* bytes/s */
        if (!(bw > 0) || !(p->kv_bytes_per_token > 0))
            return -EINVAL;
        k_kv = p->kv_bytes_per_token / bw * 1e3;
    }
    if (!isfinite(k_kv))
        return -EINVAL;

    uint64_t tokens = p->kv_capacity_tokens;
    if (tokens == 0) {
        double avail = p->gpu_mem_gb * (double)p->tensor_parallel * p->gpu_memory_utilization -
                       p->weight_gb - p->reserved_gb;
        if (!(avail > 0) || !(p->kv_bytes_per_token > 0))
            return -EINVAL;
        double t = floor(avail * 1e9 / p->kv_bytes_per_token);
        if (!(t >= 1) || t > 1099511627776.0)
            return -EINVAL;
        tokens = (uint64_t)t;
    }
    caps->kv_blocks = tokens / p->block_size;
    if (caps->kv_blocks == 0)
        return -EINVAL;
    caps->kv_tokens = caps->kv_blocks * p->block_size;
    caps->watermark_blocks = (uint64_t)floor(p->watermark * (double)caps->kv_blocks);
    caps->max_seqs = p->max_num_seqs;
    if ((uint64_t)caps->max_seqs > caps->kv_blocks)
        caps->max_seqs = (uint32_t)caps->kv_blocks;
    caps->k_kv_ms_per_token = k_kv;
    caps->knee_tokens = p->b_ms_per_token > 0 ? p->t_w_ms / p->b_ms_per_token : INFINITY;
    caps->min_step_ms = p->t_fix_ms + p->t_w_ms;
    return 0;
}

int sim_profile_validate(const struct sim_profile *p, char *err, size_t errlen)
{
    for (size_t i = 0; i < N_FIELDS; i++) {
        const struct field *f = &fields[i];
        const char *base = (const char *)p + f->off;
        char text[64];
        if (sim_profile_get(p, f->key, text, sizeof(text)) == TS_TOOBIG)
            text[0] = '\0';
        double v;
        switch (f->type) {
        case FIELD_STR: {
            size_t len = strnlen(base, SIM_PROFILE_STR_MAX);
            if (len == 0 || len >= SIM_PROFILE_STR_MAX) {
                ts_errf(err, errlen, "%s: must be 1 to %d characters", f->key,
                        SIM_PROFILE_STR_MAX - 1);
                return -EINVAL;
            }
            continue;
        }
        case FIELD_BOOL:
            continue;
        case FIELD_ENUM:
        case FIELD_U32:
            v = (double)*(const uint32_t *)base;
            if ((f->flags & FIELD_AUTO) && v == 0)
                continue;
            break;
        case FIELD_U64:
            v = (double)*(const uint64_t *)base;
            if ((f->flags & FIELD_AUTO) && v == 0)
                continue;
            break;
        case FIELD_DOUBLE:
        default:
            v = *(const double *)base;
            if ((f->flags & FIELD_AUTO) && v < 0)
                continue;
            break;
        }
        bool ok = (f->type == FIELD_DOUBLE) ? (isfinite(v) && in_range(f, v))
                                            : (v >= f->min && v <= f->max);
        if (!ok) {
            err_range(err, errlen, f, text);
            return -EINVAL;
        }
    }

    struct sim_profile_caps caps;
    if (sim_profile_derive(p, &caps) != 0) {
        if (p->kv_capacity_tokens == 0)
            ts_errf(err, errlen,
                    "kv_capacity_tokens: auto, but gpu_mem_gb * tensor_parallel * "
                    "gpu_memory_utilization - weight_gb - reserved_gb leaves no room for one "
                    "block of KV cache");
        else
            ts_errf(err, errlen,
                    "kv_capacity_tokens: %" PRIu64 " is less than one block of %" PRIu32,
                    p->kv_capacity_tokens, p->block_size);
        return -EINVAL;
    }
    if (p->max_num_batched_tokens < p->max_num_seqs) {
        ts_errf(err, errlen,
                "max_num_batched_tokens (%" PRIu32 ") must be >= max_num_seqs (%" PRIu32 ")",
                p->max_num_batched_tokens, p->max_num_seqs);
        return -EINVAL;
    }
    uint64_t mml_blocks = ((uint64_t)p->max_model_len + p->block_size - 1) / p->block_size;
    if (mml_blocks + caps.watermark_blocks > caps.kv_blocks) {
        ts_errf(err, errlen,
                "max_model_len (%" PRIu32 ") does not fit in the KV cache (%" PRIu64
                " tokens, %" PRIu64 " kept free by the watermark): lower max_model_len or raise "
                "kv_capacity_tokens",
                p->max_model_len, caps.kv_tokens, caps.watermark_blocks * p->block_size);
        return -EINVAL;
    }
    if (!(p->t_fix_ms + p->t_w_ms > 0)) {
        ts_errf(err, errlen, "t_fix_ms + t_w_ms must be > 0 (a step must take time)");
        return -EINVAL;
    }
    return 0;
}

/* ---- YAML ---- */

struct yaml_err {
    char *err;
    size_t errlen;
    const char *name;
};

static void yaml_err_at(const struct yaml_err *ye, struct fy_node *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes "name:line:col: message" (1-based) for the position of node `at`. */
static void yaml_err_at(const struct yaml_err *ye, struct fy_node *at, const char *fmt, ...)
{
    if (!ye->err || ye->errlen == 0)
        return;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    struct fy_token *t = at ? fy_node_get_scalar_token(at) : NULL;
    const struct fy_mark *m = t ? fy_token_start_mark(t) : NULL;
    if (m)
        ts_errf(ye->err, ye->errlen, "%s:%d:%d: %s", ye->name, m->line + 1, m->column + 1, msg);
    else
        ts_errf(ye->err, ye->errlen, "%s: %s", ye->name, msg);
}

static void diag_discard(struct fy_diag *diag, void *user, const char *buf, size_t len)
{
}

/* Text of a scalar node as a NUL-terminated copy in out; false if not a plain scalar. */
static bool scalar_text(struct fy_node *n, char *out, size_t outlen, size_t *lenp)
{
    if (!n || !fy_node_is_scalar(n) || fy_node_get_style(n) == FYNS_ALIAS)
        return false;
    size_t len;
    const char *s = fy_node_get_scalar(n, &len);
    if (!s)
        return false;
    *lenp = len;
    if (len >= outlen)
        return true; /* too long: caller reports it */
    memcpy(out, s, len);
    out[len] = '\0';
    return true;
}

static int apply_mapping(struct sim_profile *p, struct fy_node *root, const struct yaml_err *ye)
{
    char key[128], val[SIM_PROFILE_STR_MAX + 64];
    size_t klen, vlen;
    void *it = NULL;
    struct fy_node_pair *pair;

    /* base first, wherever it is. */
    while ((pair = fy_node_mapping_iterate(root, &it)) != NULL) {
        struct fy_node *k = fy_node_pair_key(pair), *v = fy_node_pair_value(pair);
        if (!scalar_text(k, key, sizeof(key), &klen) || klen >= sizeof(key) ||
            strcmp(key, "base") != 0)
            continue;
        if (!scalar_text(v, val, sizeof(val), &vlen) || vlen >= sizeof(val) ||
            sim_profile_preset(val, p) != 0) {
            yaml_err_at(ye, v && fy_node_is_scalar(v) ? v : k,
                        "base: not a preset name (one of %s, %s, %s, %s)", preset_names[0],
                        preset_names[1], preset_names[2], preset_names[3]);
            return -EINVAL;
        }
    }

    it = NULL;
    while ((pair = fy_node_mapping_iterate(root, &it)) != NULL) {
        struct fy_node *k = fy_node_pair_key(pair), *v = fy_node_pair_value(pair);
        if (!scalar_text(k, key, sizeof(key), &klen)) {
            yaml_err_at(ye, k, "profile keys must be plain scalars");
            return -EINVAL;
        }
        if (klen >= sizeof(key)) {
            yaml_err_at(ye, k, "unknown profile key (too long)");
            return -EINVAL;
        }
        if (strcmp(key, "base") == 0)
            continue;
        const struct field *f = field_find(key, klen);
        if (!f) {
            char msg[200];
            err_unknown_key(msg, sizeof(msg), "", key, klen);
            yaml_err_at(ye, k, "%s", msg);
            return -EINVAL;
        }
        if (!v) {
            yaml_err_at(ye, k, "%s: needs a value", f->key);
            return -EINVAL;
        }
        if (!scalar_text(v, val, sizeof(val), &vlen)) {
            yaml_err_at(ye, k, "%s: the value must be a scalar (no lists, maps or aliases)",
                        f->key);
            return -EINVAL;
        }
        if (vlen >= sizeof(val) || memchr(val, '\0', vlen)) {
            yaml_err_at(ye, v, "%s: value too long or not text", f->key);
            return -EINVAL;
        }
        char msg[200] = "";
        if (field_set(p, f, val, msg, sizeof(msg)) != 0) {
            yaml_err_at(ye, v, "%s", msg);
            return -EINVAL;
        }
    }
    return 0;
}

/* The first collected diagnostic as "name:line:col: msg" (libfyaml's positions are 1-based). */
static void diag_first_error(struct fy_diag *diag, const struct yaml_err *ye)
{
    void *it = NULL;
    struct fy_diag_error *de = fy_diag_errors_iterate(diag, &it);
    if (de && de->line > 0)
        ts_errf(ye->err, ye->errlen, "%s:%d:%d: %s", ye->name, de->line, de->column,
                de->msg ? de->msg : "YAML syntax error");
    else
        ts_errf(ye->err, ye->errlen, "%s: %s", ye->name,
                de && de->msg ? de->msg : "YAML syntax error");
}

int sim_profile_load_yaml_mem(struct sim_profile *p, const char *name, const char *data, size_t len,
                              char *err, size_t errlen)
{
    struct yaml_err ye = {err, errlen, name ? name : "<profile>"};
    if (err && errlen)
        err[0] = '\0';
    if (len > SIM_PROFILE_FILE_MAX) {
        ts_errf(err, errlen, "%s: larger than %u bytes", ye.name, SIM_PROFILE_FILE_MAX);
        return TS_TOOBIG;
    }
    if (len == 0) {
        ts_errf(err, errlen, "%s: empty; expected a mapping of profile keys (key: value)", ye.name);
        return -EINVAL;
    }

    size_t bad = utf8_invalid_at((const void *)data, len);
    if (bad < len) {
        int line, col;
        text_position(data, bad, &line, &col);
        ts_errf(err, errlen, "%s:%d:%d: not UTF-8 text", ye.name, line, col);
        return TS_PARSE;
    }

    struct fy_diag_cfg dcfg;
    fy_diag_cfg_default(&dcfg);
    dcfg.fp = NULL;
    dcfg.output_fn = diag_discard;
    dcfg.colorize = false;
    struct fy_diag *diag = fy_diag_create(&dcfg);
    if (!diag) {
        ts_errf(err, errlen, "%s: out of memory", ye.name);
        return -ENOMEM;
    }
    fy_diag_set_collect_errors(diag, true);

    struct fy_parse_cfg cfg = {
        .search_path = "",
        .flags = FYPCF_QUIET | FYPCF_DISABLE_RECYCLING,
        .userdata = NULL,
        .diag = diag,
    };
    int rc = 0;
    struct fy_parser *fyp = fy_parser_create(&cfg);
    if (!fyp || fy_parser_set_string(fyp, data, len) != 0) {
        ts_errf(err, errlen, "%s: out of memory", ye.name);
        rc = -ENOMEM;
        goto out_parser;
    }
    struct fy_document *fyd = fy_parse_load_document(fyp);
    if (!fyd || fy_parser_get_stream_error(fyp)) {
        if (fy_diag_got_error(diag) || fy_parser_get_stream_error(fyp)) {
            diag_first_error(diag, &ye);
            rc = TS_PARSE;
        } else {
            ts_errf(err, errlen, "%s: no content; expected a mapping of profile keys (key: value)",
                    ye.name);
            rc = -EINVAL;
        }
        goto out_doc;
    }

    struct fy_node *root = fy_document_root(fyd);
    if (!root || fy_node_get_type(root) != FYNT_MAPPING) {
        yaml_err_at(&ye, root, "expected a mapping of profile keys (key: value)");
        rc = -EINVAL;
        goto out_doc;
    }
    struct fy_document *extra = fy_parse_load_document(fyp);
    if (extra || fy_parser_get_stream_error(fyp)) {
        if (extra) {
            yaml_err_at(&ye, NULL, "more than one YAML document (---); a profile is one mapping");
            fy_parse_document_destroy(fyp, extra);
            rc = -EINVAL;
        } else {
            diag_first_error(diag, &ye);
            rc = TS_PARSE;
        }
        goto out_doc;
    }
    struct sim_profile tmp = *p;
    rc = apply_mapping(&tmp, root, &ye);
    if (rc == 0)
        *p = tmp;

out_doc:
    if (fyd)
        fy_parse_document_destroy(fyp, fyd);
out_parser:
    if (fyp)
        fy_parser_destroy(fyp);
    fy_diag_destroy(diag);
    return rc;
}

int sim_profile_load_yaml(struct sim_profile *p, const char *path, char *err, size_t errlen)
{
    char *data = NULL;
    size_t len = 0;
    int rc = file_read_all(path, SIM_PROFILE_FILE_MAX, &data, &len, err, errlen);
    if (rc != 0)
        return rc;
    rc = sim_profile_load_yaml_mem(p, path, data, len, err, errlen);
    ts_free(data);
    return rc;
}
