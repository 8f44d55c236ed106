/*
 * fuzz_quality.c - the answer scorers on arbitrary bytes: the input is split
 * at its first NUL into a candidate and a reference (no NUL: in the middle).
 * ROUGE-L and BLEU must stay within [0, 1] with consistent counts, ROUGE-L's
 * F must not depend on the order of the texts, a text must match itself
 * exactly, and the JSON check (with and without fence stripping, with
 * required keys) and a regex search must accept or reject without error.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/quality.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct quality_scratch *scratch;
static struct quality_regex *regex;

static void check_unit(double v)
{
    if (!(v >= 0 && v <= 1 + 1e-12))
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (scratch == NULL) {
        if (quality_scratch_new(&scratch) != 0 ||
            quality_regex_new("^\\s*\\{.*\"answer\"\\s*:", QUALITY_REGEX_CASELESS, NULL, 0,
                              &regex) != 0)
            abort();
    }
    const char *text = (const char *)data;
    const uint8_t *nul = memchr(data, 0, size);
    size_t a_len = nul ? (size_t)(nul - data) : size / 2;
    const char *a = text, *b = text + a_len + (nul ? 1 : 0);
    size_t b_len = size - a_len - (nul ? 1 : 0);

    struct rouge_score r1, r2;
    if (quality_rouge_l(scratch, a, a_len, b, b_len, &r1) != 0 ||
        quality_rouge_l(scratch, b, b_len, a, a_len, &r2) != 0)
        __builtin_trap();
    check_unit(r1.fmeasure);
    check_unit(r1.precision);
    check_unit(r1.recall);
    if (fabs(r1.fmeasure - r2.fmeasure) > 1e-12 || r1.lcs != r2.lcs)
        __builtin_trap();
    if (r1.lcs > r1.cand_tokens || r1.lcs > r1.ref_tokens || r1.cand_tokens > QUALITY_MAX_TOKENS)
        __builtin_trap();

    struct bleu_score bl;
    if (quality_bleu(scratch, a, a_len, b, b_len, &bl) != 0)
        __builtin_trap();
    check_unit(bl.score);
    for (int n = 0; n < QUALITY_BLEU_ORDER; n++) {
        if (bl.correct[n] > bl.total[n])
            __builtin_trap();
    }
    /* A text against itself: ROUGE-L 1 when it has a token, BLEU 1 when it has one. */
    if (quality_rouge_l(scratch, a, a_len, a, a_len, &r1) != 0 ||
        quality_bleu(scratch, a, a_len, a, a_len, &bl) != 0)
        __builtin_trap();
    if (r1.cand_tokens > 0 && fabs(r1.fmeasure - 1) > 1e-12)
        __builtin_trap();
    if (bl.sys_len > 0 && fabs(bl.score - 1) > 1e-9)
        __builtin_trap();
    if (!quality_exact_match(a, a_len, a, a_len, false) ||
        quality_exact_match(a, a_len, b, b_len, false) !=
            quality_exact_match(b, b_len, a, a_len, false))
        __builtin_trap();

    static const char *const keys[] = {"answer", "score"};
    for (unsigned flags = 0; flags <= QUALITY_JSON_STRIP_FENCE; flags++) {
        for (size_t nkeys = 0; nkeys <= 2; nkeys++) {
            int rc = quality_json_check(text, size, keys, nkeys, flags);
            if (rc < QUALITY_JSON_VALID || rc > QUALITY_JSON_TOOBIG)
                __builtin_trap();
        }
    }
    int m = quality_regex_match(regex, scratch, text, size);
    if (m != 0 && m != 1 && m != TS_TOOBIG)
        __builtin_trap();
    return 0;
}
