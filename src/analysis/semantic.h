/*
 * semantic.h - the semantic mix of the prompts a run sent: how many kinds of
 * prompt there were and how evenly they were used.
 *
 * The contract (what the numbers in result files mean):
 *
 *  1. Each prompt is embedded with llm/embed.h (hashed character trigrams
 *     and words, cfg.dims dimensions, L2-normalised). A text longer than
 *     cfg.max_text bytes is embedded as its first max_text/2 bytes, a space
 *     and its last max_text/2 bytes (both cut back to whole UTF-8
 *     characters): the opening usually holds the instruction, the end the
 *     question, and without the cut long unrelated texts look alike (their
 *     common English trigrams dominate; see "Threshold" below).
 *  2. Leader clustering, single pass, in the order of semantic_add() calls:
 *     the first prompt founds cluster 0 and is its leader; each later prompt
 *     is compared with the leader (the founding prompt, never a centroid) of
 *     every cluster by cosine similarity and joins the cluster with the
 *     highest one if it is >= cfg.threshold (ties: the older cluster);
 *     otherwise it founds a new cluster, or, when cfg.max_clusters exist
 *     already, joins the one with the highest similarity whatever it is.
 *     Two empty texts (zero vectors) have similarity 1, an empty and a
 *     non-empty one 0. The same prompts in the same order always give the
 *     same clusters.
 *  3. With n_i prompts in cluster i out of N:
 *       entropy_bits = -sum_i (n_i / N) log2(n_i / N)
 *       normalized   = entropy_bits / log2(min(N, max_clusters)), the share
 *                      of the largest entropy N prompts could reach (1 when
 *                      every prompt founded its own cluster; 0 when N < 2)
 *       top_share    = max_i n_i / N (0 when N = 0)
 *     Prompts past cfg.max_samples are not clustered, only counted
 *     (ignored).
 *
 * Threshold. SEMANTIC_DEFAULT_THRESHOLD (0.7) comes from measuring the
 * embedding at 256 dimensions: prompts of one template that differ in names
 * and numbers ("Translate ...: Alice visited Paris in 1000 ...") have
 * cosines 0.79-0.95 (mean 0.87); prompts of different templates at most
 * 0.42 (mean 0.21); unrelated English sentences and 40-256 byte passages of
 * prose at most 0.68 (mean 0.1-0.4, rising with length: 0.58 at 512 bytes,
 * 0.78 at 1280, hence max_text); paraphrases ("What is the capital of
 * France?" / "Which city is the capital of France?") 0.40-0.79, so about
 * half of them join. A higher threshold splits templates into more
 * clusters, a lower one merges unrelated prose.
 *
 * Cost: one embedding (linear in the text, at most max_text bytes) and up to
 * max_clusters dot products of dims floats per prompt: about 65 k
 * multiply-adds at the defaults. Memory: dims floats per cluster, allocated
 * as clusters appear. A struct semantic is fed by one thread at a time.
 */
#ifndef TS_ANALYSIS_SEMANTIC_H
#define TS_ANALYSIS_SEMANTIC_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/err.h"

#define SEMANTIC_DEFAULT_DIMS         256
#define SEMANTIC_DEFAULT_THRESHOLD    0.7
#define SEMANTIC_DEFAULT_MAX_CLUSTERS 256
#define SEMANTIC_DEFAULT_MAX_SAMPLES  10000
#define SEMANTIC_DEFAULT_MAX_TEXT     256
#define SEMANTIC_MAX_CLUSTERS         16384
#define SEMANTIC_MAX_SAMPLES          100000000u
#define SEMANTIC_MAX_TEXT             65536

/* Every field 0 means its default. */
struct semantic_cfg {
    uint32_t dims;         /* 1..EMBED_MAX_DIMS (8192) */
    double threshold;      /* cosine to join a cluster, in (0, 1] */
    uint32_t max_clusters; /* 1..SEMANTIC_MAX_CLUSTERS */
    uint32_t max_samples;  /* 1..SEMANTIC_MAX_SAMPLES prompts clustered; later ones ignored */
    uint32_t max_text;     /* 2..SEMANTIC_MAX_TEXT bytes of a prompt embedded (see above) */
};

struct semantic;

/*
 * Creates an empty mix; cfg may be NULL (all defaults). Returns 0 with *out
 * set (free it with semantic_free()), -EINVAL for a value out of range, or
 * -ENOMEM.
 */
TS_MUST_CHECK int semantic_new(const struct semantic_cfg *cfg, struct semantic **out);

/* Frees s; NULL is a no-op. */
void semantic_free(struct semantic *s);

/*
 * Adds one prompt, text[0..len) (need not be NUL-terminated; text may be NULL
 * when len is 0). Past max_samples it is only counted as ignored. Returns 0,
 * -EINVAL (text NULL with len > 0) or -ENOMEM (s is unchanged).
 */
TS_MUST_CHECK int semantic_add(struct semantic *s, const char *text, size_t len);

struct semantic_summary {
    uint64_t samples; /* prompts clustered */
    uint64_t ignored; /* prompts past max_samples */
    uint32_t clusters;
    double entropy_bits;
    double normalized; /* entropy_bits / log2(min(samples, max_clusters)); 0 when samples < 2 */
    double top_share;  /* the largest cluster's share of samples */
    double threshold;  /* the configuration used, for the record */
    uint32_t dims;
};

/* Fills *out from what was added so far. */
void semantic_get(const struct semantic *s, struct semantic_summary *out);

/*
 * The "semantic_mix" object of result files:
 *   {"samples": N, "ignored": N, "clusters": N, "entropy_bits": x,
 *    "normalized": x, "top_share": x, "threshold": x, "dims": N}
 * A new reference (json_decref it), or NULL when out of memory.
 */
json_t *semantic_summary_json(const struct semantic_summary *s);

#endif
