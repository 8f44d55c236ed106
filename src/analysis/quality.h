/*
 * quality.h - answer quality: how good the answers were, not only how fast.
 *
 * Four parts, all pure computation (no I/O, no clock, no locks):
 *
 *  1. Scores of one answer (the candidate) against its reference answer:
 *     ROUGE-L F-measure exactly as Google's rouge-score package computes it
 *     (RougeScorer(['rougeL']), no stemmer), sentence BLEU-4 exactly as
 *     sacrebleu's sentence_bleu() computes it with its defaults (13a
 *     tokenizer, 'exp' smoothing, effective order), exact match after a
 *     whitespace normalisation, a PCRE2 regex search and a JSON validity
 *     check with required top-level keys. docs/QUALITY.md states every rule.
 *  2. struct quality_stats: a run's scores, mergeable across worker threads
 *     (counts, fixed-point sums and 0.001-wide histograms), and the
 *     "quality" object of result.json.
 *  3. struct dual_sla: windows of N requests in completion order, each
 *     meeting the SLA when both its quality and its latency pass rates reach
 *     their targets; fed one request at a time.
 *  4. struct consistency: repeated identical prompts, every later answer
 *     compared with the first one remembered for that prompt; the run is
 *     "semantically steady" when the mean similarity of the last k windows
 *     all reached a threshold.
 *
 * Threads. A struct quality_scratch belongs to one thread at a time; a
 * compiled struct quality_regex is read-only and may be shared by all
 * threads (each match uses the caller's scratch). quality_stats are owned by
 * one thread each and merged when quiescent. dual_sla and consistency are
 * fed by one thread (the runner's coordinator).
 *
 * Limits (so one huge answer cannot stall a worker): ROUGE-L and BLEU look
 * at the first QUALITY_MAX_TEXT bytes of each text and the first
 * QUALITY_MAX_TOKENS tokens after tokenization; anything past that is
 * ignored and the score is flagged truncated. ROUGE-L's LCS is computed
 * bit-parallel, O(n * m / 64) word operations: about 1 ms at the caps on one
 * core; BLEU and the tokenizers are linear (hash tables): a few ms at the
 * caps. A pair of answers of a hundred tokens takes about 10 us for both
 * scores. After the scratch has grown to the largest text seen, scoring
 * allocates nothing (the JSON check excepted: jansson builds the document it
 * parses).
 */
#ifndef TS_ANALYSIS_QUALITY_H
#define TS_ANALYSIS_QUALITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/err.h"

#define QUALITY_MAX_TEXT   (64 * 1024)   /* bytes of a text that ROUGE-L / BLEU read */
#define QUALITY_MAX_TOKENS 4096          /* tokens of a text that ROUGE-L / BLEU use */
#define QUALITY_MAX_JSON   (1024 * 1024) /* bytes of an answer the JSON check parses */
#define QUALITY_BLEU_ORDER 4

/* ---- scratch ---------------------------------------------------------------- */

/* Reusable working memory for the scorers; one per thread. Opaque. */
struct quality_scratch;

/*
 * Allocates a scratch with its fixed arrays (about 450 KiB). Two parts grow
 * on demand and are kept for the next call: the text buffers, to what the
 * longest text needs (usually about 3 x its bytes, at most about 24 x
 * QUALITY_MAX_TEXT for adversarial punctuation), and ROUGE-L's bit masks
 * (distinct tokens x tokens / 8 bytes of the shorter text: at most 2 MiB).
 * 0 and *out set (quality_scratch_free() it), or -ENOMEM.
 */
TS_MUST_CHECK int quality_scratch_new(struct quality_scratch **out);
/* Frees s; NULL is a no-op. */
void quality_scratch_free(struct quality_scratch *s);

/* ---- ROUGE-L ---------------------------------------------------------------- */

struct rouge_score {
    double precision; /* lcs / candidate tokens */
    double recall;    /* lcs / reference tokens */
    double fmeasure;  /* 2PR / (P + R); 0 when P + R is 0 */
    uint32_t lcs;     /* length of the longest common subsequence, in tokens */
    uint32_t cand_tokens, ref_tokens;
    bool truncated; /* a text was cut at QUALITY_MAX_TEXT or QUALITY_MAX_TOKENS */
};

/*
 * ROUGE-L of cand (the prediction) against ref (the target), as rouge-score's
 * RougeScorer(['rougeL']).score(ref, cand) computes it. Tokens: the text is
 * lower-cased (ASCII A-Z, plus U+212A KELVIN SIGN -> "k" and U+0130 -> "i"
 * followed by a break, the only other characters whose Python lower() gives
 * an ASCII letter), every byte that is not [a-z0-9] separates tokens, and the
 * tokens are the remaining [a-z0-9]+ runs. No stemming. If either side has
 * no token, all three scores are 0. Lengths are in bytes; the texts need not
 * be NUL-terminated and may hold any bytes. Returns 0, -EINVAL on a NULL
 * argument (a NULL text with length 0 is an empty text), or -ENOMEM when a
 * scratch buffer could not grow.
 */
TS_MUST_CHECK int quality_rouge_l(struct quality_scratch *s, const char *cand, size_t cand_len,
                                  const char *ref, size_t ref_len, struct rouge_score *out);

/* ---- BLEU-4 ----------------------------------------------------------------- */

struct bleu_score {
    double score;                          /* sacrebleu's score / 100: 0..1 */
    double precisions[QUALITY_BLEU_ORDER]; /* percent, as sacrebleu reports them */
    double bp;                             /* brevity penalty */
    uint32_t correct[QUALITY_BLEU_ORDER];  /* clipped n-gram matches */
    uint32_t total[QUALITY_BLEU_ORDER];    /* candidate n-grams */
    uint32_t sys_len, ref_len;             /* tokens */
    bool truncated;
};

/*
 * Sentence BLEU of hyp against one reference, as sacrebleu's
 * sentence_bleu(hyp, [ref]) computes it with its defaults (tokenize '13a',
 * smooth_method 'exp', use_effective_order True, lowercase False,
 * max_ngram_order 4), except that the score is divided by 100. Tokenizer
 * (13a, on UTF-8 bytes): strip trailing white space; remove "<skipped>",
 * remove "-\n", turn "\n" into a space; replace &quot; &amp; &lt; &gt; (in
 * that order, each over the whole text); put spaces around each of
 * !"#$%&()*+/:;<=>?@[\]^_`{|}~; split "." and "," from a preceding non-digit
 * and from a following non-digit; split "-" after a digit; split on white
 * space (Python's str.split() set, including the Unicode spaces). Smoothing
 * 'exp' (mteval-v13a): the k-th n-gram order with no match gets precision
 * 100 / (2^k * total). An empty reference scores 0 (sacrebleu raises).
 * Returns 0, -EINVAL on a NULL argument, -ENOMEM if a text buffer could not
 * grow.
 */
TS_MUST_CHECK int quality_bleu(struct quality_scratch *s, const char *hyp, size_t hyp_len,
                               const char *ref, size_t ref_len, struct bleu_score *out);

/*
 * sacrebleu's BLEU.compute_bleu() with smooth_method 'exp' and
 * effective_order True, from sufficient statistics; returns the score / 100
 * (0..1). precisions (percent) and bp may be NULL.
 */
double quality_bleu_from_counts(const uint32_t correct[QUALITY_BLEU_ORDER],
                                const uint32_t total[QUALITY_BLEU_ORDER], uint64_t sys_len,
                                uint64_t ref_len, double precisions[QUALITY_BLEU_ORDER],
                                double *bp);

/* ---- exact match, regex, JSON ---------------------------------------------- */

/*
 * true if a and b are equal after normalisation: leading and trailing white
 * space removed and every inner run of white space made one space (white
 * space = the characters Python's str.split() splits on, including U+00A0,
 * U+2000..U+200A, U+3000 ...); with nocase, ASCII letters compare without
 * case (other characters byte for byte). Allocates nothing.
 */
bool quality_exact_match(const char *a, size_t a_len, const char *b, size_t b_len, bool nocase);

enum quality_regex_flags {
    QUALITY_REGEX_CASELESS = 1 << 0, /* PCRE2_CASELESS */
};

/* A compiled user pattern (PCRE2, UTF + UCP). Opaque; shareable read-only. */
struct quality_regex;

/*
 * Compiles pattern (NUL-terminated, UTF-8) with PCRE2_UTF, PCRE2_UCP and
 * PCRE2_MATCH_INVALID_UTF (answers that are not valid UTF-8 are still
 * searched). Matching is a search: the pattern may match anywhere in the
 * answer unless it anchors itself (^, $, \A, \z). Returns 0 and *out
 * (quality_regex_free() it), -ENOMEM, or TS_PARSE with a message such as
 * "missing closing parenthesis at offset 3" in err (always terminated when
 * errlen > 0).
 */
TS_MUST_CHECK int quality_regex_new(const char *pattern, unsigned flags, char *err, size_t errlen,
                                    struct quality_regex **out);
/* Frees re; NULL is a no-op. */
void quality_regex_free(struct quality_regex *re);
/*
 * Searches subject. Returns 1 on a match, 0 on none, TS_TOOBIG when PCRE2's
 * match limit (1 M steps) or heap limit (16 MiB of backtracking memory) stopped a
 * runaway pattern, -ENOMEM, or -EINVAL. Uses the scratch's match data.
 */
TS_MUST_CHECK int quality_regex_match(const struct quality_regex *re, struct quality_scratch *s,
                                      const char *subject, size_t len);

enum quality_json_flags {
    QUALITY_JSON_STRIP_FENCE = 1 << 0, /* accept a ```json ... ``` (or ``` ... ```) fence */
};

enum quality_json_result {
    QUALITY_JSON_VALID = 0,   /* parses, and has every required key */
    QUALITY_JSON_INVALID,     /* not one JSON value (after the fence, if stripped) */
    QUALITY_JSON_NOT_OBJECT,  /* keys were required but the value is not an object */
    QUALITY_JSON_MISSING_KEY, /* an object without some required key */
    QUALITY_JSON_TOOBIG,      /* longer than QUALITY_MAX_JSON bytes */
};

/*
 * Checks that answer is one JSON value (any type; surrounding white space
 * allowed; duplicate keys allowed, as in RFC 8259) and, when nkeys > 0, an
 * object holding each of keys[0..nkeys-1] at its top level. With
 * QUALITY_JSON_STRIP_FENCE, an answer whose trimmed text starts with ``` and
 * an optional info string "json" (any case) up to the end of that line, and
 * ends with ```, is checked without the fence. Returns an enum
 * quality_json_result (>= 0) or -ENOMEM.
 */
TS_MUST_CHECK int quality_json_check(const char *answer, size_t len, const char *const *keys,
                                     size_t nkeys, unsigned flags);

/* ---- one answer, all checks -------------------------------------------------- */

enum quality_have {
    QUALITY_HAVE_REF = 1 << 0,   /* rouge_l, bleu4, exact were computed */
    QUALITY_HAVE_REGEX = 1 << 1, /* regex_match (and regex_error) were computed */
    QUALITY_HAVE_JSON = 1 << 2,  /* json_valid was computed */
};

struct quality_scores {
    unsigned have;    /* enum quality_have */
    double rouge_l;   /* ROUGE-L F, 0..1 */
    double bleu4;     /* BLEU-4 / 100, 0..1 */
    bool exact;       /* quality_exact_match() */
    bool regex_match; /* false also when the regex search failed */
    bool regex_error; /* the search hit a PCRE2 limit */
    bool json_valid;  /* quality_json_check() == QUALITY_JSON_VALID */
    bool truncated;   /* ROUGE-L or BLEU was computed on a cut text */
};

/* What to check for every answer of a run. Zeroed = reference metrics only. */
struct quality_cfg {
    const struct quality_regex *regex; /* NULL: no regex check */
    bool json;                         /* check JSON validity */
    const char *const *json_keys;      /* required top-level keys (borrowed) */
    size_t json_nkeys;
    unsigned json_flags; /* enum quality_json_flags */
    bool exact_nocase;   /* exact match ignores ASCII case */
};

/*
 * Scores one answer: with a reference (ref != NULL), ROUGE-L, BLEU-4 and
 * exact match; the regex and JSON checks that cfg asks for. cfg may be NULL.
 * Fills *out (have says what was computed). Returns 0 or -ENOMEM (*out then
 * holds what was computed before the failure).
 */
TS_MUST_CHECK int quality_score(struct quality_scratch *s, const struct quality_cfg *cfg,
                                const char *answer, size_t len, const char *ref, size_t ref_len,
                                struct quality_scores *out);

/*
 * When one request's answer is "quality-ok" (for the dual SLA): every
 * criterion that is set and was measured for it holds. rouge_l_min and
 * bleu4_min are set when > 0; the booleans when true. A set criterion that
 * was not measured (no reference, no regex) is skipped. With nothing set,
 * every answer passes.
 */
struct quality_target {
    double rouge_l_min;
    double bleu4_min;
    bool exact;
    bool regex;
    bool json;
};

bool quality_scores_pass(const struct quality_scores *q, const struct quality_target *t);

/* ---- a run's statistics ------------------------------------------------------ */

#define QUALITY_BINS 1000          /* bins of width 1/QUALITY_BINS; bin QUALITY_BINS holds 1.0 */
#define QUALITY_FIX  1000000000ull /* scores are summed as round(score * 1e9) */

/*
 * Distribution of a score in [0, 1]. Sums are fixed point so merging in any
 * order gives identical results.
 */
struct quality_dist {
    uint64_t count;
    uint64_t sum_fix; /* sum of round(score * QUALITY_FIX) */
    uint64_t min_fix, max_fix;
    uint64_t bins[QUALITY_BINS + 1];
};

struct quality_stats {
    uint64_t requests;  /* answers scored (have != 0) */
    uint64_t with_ref;  /* answers with a reference */
    uint64_t exact;     /* of those, exact matches */
    uint64_t truncated; /* of those, scored on a cut text */
    uint64_t regex_checked, regex_matched, regex_errors;
    uint64_t json_checked, json_valid;
    struct quality_dist rouge_l, bleu4;
};

/* Forgets everything (also how to initialise one). */
void quality_stats_reset(struct quality_stats *qs);
/* Accounts one answer's scores (nothing if q->have is 0). No allocation. */
void quality_stats_add(struct quality_stats *qs, const struct quality_scores *q);
/* Adds src into dst. Exact: merging equals adding every answer to one. */
void quality_stats_merge(struct quality_stats *dst, const struct quality_stats *src);

/* Empties d (min set so that the first score becomes the minimum). */
void quality_dist_reset(struct quality_dist *d);
/* Adds one score, clamped to [0, 1] (NAN counts as 0). */
void quality_dist_add(struct quality_dist *d, double v);
/* Adds src into dst, exactly. */
void quality_dist_merge(struct quality_dist *dst, const struct quality_dist *src);

/* Mean of d (0 when empty). */
double quality_dist_mean(const struct quality_dist *d);
/*
 * The p-th percentile (0 < p <= 100) of d: the lower edge of the bin that
 * holds the ceil(p/100 * count)-th smallest score, kept within [min, max];
 * so at most 1/QUALITY_BINS below the exact order statistic, and exact for
 * multiples of 1/QUALITY_BINS and when all scores are equal. 0 when empty.
 */
double quality_dist_percentile(const struct quality_dist *d, double p);
double quality_dist_min(const struct quality_dist *d);
double quality_dist_max(const struct quality_dist *d);

struct dual_sla;
struct consistency;

/*
 * The "quality" object of result.json:
 *   {"requests": n, "with_reference": n, "truncated": n,
 *    "rouge_l": {"mean","p50","p10","min"} | null (no reference),
 *    "bleu4": {...} | null, "exact_match_rate": r | null,
 *    "regex_match_rate": r | null (no regex check), "json_valid_rate": r | null,
 *    "dual_sla": dual_sla_to_json() | null (ds NULL),
 *    "consistency": consistency_to_json() | null (cs NULL)}
 * Rates are fractions. ds and cs may be NULL. Returns a new reference, or
 * NULL when out of memory.
 */
json_t *quality_stats_to_json(const struct quality_stats *qs, const struct dual_sla *ds,
                              const struct consistency *cs);

/*
 * The exact state of d, for result files that are merged later (ranks,
 * `merge`, `compare`): {"count": n, "sum_fix": s, "min_fix": m, "max_fix":
 * M, "bins": [[bin, count], ...] (non-empty bins only)}. New reference, or
 * NULL when out of memory.
 */
json_t *quality_dist_state_json(const struct quality_dist *d);
/*
 * Adds a state quality_dist_state_json() wrote to d, exactly as
 * quality_dist_merge() would. Returns 0, or -EINVAL (d unchanged) when o is
 * not such a state: a count, bin or fixed-point value out of range, bins
 * that do not add up to count, a sum beyond count whole scores, min > max.
 */
TS_MUST_CHECK int quality_dist_state_add(struct quality_dist *d, const json_t *o);
/* The same for a whole quality_stats: its counters and both distributions
 * ({"requests", "with_ref", "exact", ..., "rouge_l": state, "bleu4": state});
 * a counter above the one it is part of is -EINVAL. */
json_t *quality_stats_state_json(const struct quality_stats *qs);
TS_MUST_CHECK int quality_stats_state_add(struct quality_stats *qs, const json_t *o);

/* ---- windowed dual SLA ---------------------------------------------------------- */

struct dual_sla_cfg {
    uint32_t window;       /* requests per window, >= 1 */
    double quality_target; /* share of quality-ok requests a window needs, 0..1 */
    double latency_target; /* share of latency-ok requests a window needs, 0..1 */
};

/*
 * Requests in completion order are cut into consecutive windows of
 * cfg.window; a window "attains" when (quality-ok / window) >= quality_target
 * AND (latency-ok / window) >= latency_target (a tolerance of 1e-9 absorbs
 * the rounding of target * window). A last, incomplete window is not
 * counted. Plain data: embed it, no release needed.
 */
struct dual_sla {
    struct dual_sla_cfg cfg;
    uint32_t need_quality, need_latency; /* ok requests a window needs */
    uint32_t in_window, quality_ok, latency_ok;
    uint64_t requests; /* fed so far */
    uint64_t windows;  /* complete windows */
    uint64_t attained; /* complete windows that met both targets */
};

/* Sets up d for cfg. 0, or -EINVAL (window 0, a target outside [0, 1]). */
TS_MUST_CHECK int dual_sla_init(struct dual_sla *d, const struct dual_sla_cfg *cfg);
/* Accounts the next request to complete. */
void dual_sla_feed(struct dual_sla *d, bool quality_ok, bool latency_ok);
/* attained / windows, or NAN before the first complete window. */
double dual_sla_attainment(const struct dual_sla *d);
/*
 * {"window": N, "windows": W, "attained": A, "attainment_rate": r | null,
 *  "quality_target": q, "latency_target": l}; NULL when out of memory.
 */
json_t *dual_sla_to_json(const struct dual_sla *d);

/* ---- consistency steady state ------------------------------------------------ */

#define CONSISTENCY_MAX_DIMS 8192 /* longest embedding kept */

struct consistency_cfg {
    uint32_t window;           /* pairs per window (default 20 when 0) */
    double threshold;          /* mean similarity a window must reach, -1..1 */
    uint32_t k;                /* consecutive windows for "steady" (default 3 when 0) */
    uint32_t max_prompts;      /* prompts remembered (default 1024 when 0, at most 1 << 20) */
    uint32_t max_answer_bytes; /* bytes of an answer kept and compared (default 4096 when 0) */
};

enum consistency_method {
    CONSISTENCY_NONE = 0, /* no pair yet */
    CONSISTENCY_LEXICAL = 1 << 0,
    CONSISTENCY_COSINE = 1 << 1,
};

/*
 * The first answer for each prompt hash is remembered (its first
 * max_answer_bytes bytes, and its embedding when one is given); each later
 * answer for the same hash forms one pair with it. The pair's similarity is
 * the cosine of the two embeddings when both have one of the same length,
 * else the ROUGE-L F-measure of the two texts (both cut to max_answer_bytes).
 * Pairs fill consecutive windows of cfg.window; a window's mean similarity
 * "holds" when it is >= threshold. The run is steady when the last k
 * complete windows all held. Once max_prompts prompts are remembered, the
 * answers of new prompts are counted in `untracked` and otherwise ignored.
 * Memory: at most max_prompts * (max_answer_bytes + 4 * dims) plus a table
 * of 2 * max_prompts slots.
 */
struct consistency;

/* 0 and *out (consistency_free() it), -EINVAL on a bad cfg, -ENOMEM. */
TS_MUST_CHECK int consistency_new(const struct consistency_cfg *cfg, struct consistency **out);
/* Frees c and what it remembered; NULL is a no-op. */
void consistency_free(struct consistency *c);
/*
 * Feeds one answer of the prompt whose hash is prompt_hash (any 64-bit
 * digest of the exact prompt; equal prompts must give equal hashes). vec
 * (dims floats, 1..CONSISTENCY_MAX_DIMS) may be NULL. Returns 0, -EINVAL, or
 * -ENOMEM (the answer is then not remembered; counts are unchanged).
 */
TS_MUST_CHECK int consistency_feed(struct consistency *c, uint64_t prompt_hash, const char *answer,
                                   size_t len, const float *vec, size_t dims);

struct consistency_summary {
    uint64_t pairs;
    double mean_similarity; /* over all pairs; NAN when none */
    uint64_t windows;       /* complete windows */
    uint64_t held;          /* complete windows whose mean reached the threshold */
    uint32_t run;           /* trailing consecutive windows that held */
    bool steady;            /* run >= k */
    uint64_t untracked;     /* answers of prompts beyond max_prompts */
    unsigned methods;       /* enum consistency_method bits of the pairs seen */
};

void consistency_get(const struct consistency *c, struct consistency_summary *out);
/*
 * {"pairs": n, "mean_similarity": s | null, "steady": b, "windows": W,
 *  "windows_held": H, "window": N, "threshold": t, "k": k,
 *  "method": "lexical" | "cosine" | "mixed" | null, "untracked": u};
 * NULL when out of memory.
 */
json_t *consistency_to_json(const struct consistency *c);

#endif
