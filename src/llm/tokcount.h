/*
 * tokcount.h - how many tokens a text is, and where to cut it: the one
 * question prompt generation asks, answered either by the approximate
 * counter of llm/text.h or by a real tokenizer (llm/tokenizer.h).
 *
 * A struct tokcount is a small vtable. tokcount_approx() is static, stateless
 * and thread-safe. tokcount_tokenizer_new() wraps a loaded tokenizer with one
 * encoding session: it is NOT thread-safe, so give each thread its own (the
 * tokenizer itself may be shared). A tokenizer counts the text of its
 * special tokens ("<|eot_id|>") as those tokens, as a server does when it
 * tokenizes the rendered chat template.
 */
#ifndef TS_LLM_TOKCOUNT_H
#define TS_LLM_TOKCOUNT_H

#include <stddef.h>

#include "base/err.h"

struct tokenizer;

struct tokcount {
    /* Tokens of s[0..n). */
    size_t (*count)(const struct tokcount *tc, const char *s, size_t n);
    /*
     * Bytes of the longest prefix of s[0..n) that counts at most `tokens`
     * tokens and ends at a token boundary (never inside a UTF-8 sequence of
     * valid input). 0 when tokens is 0.
     */
    size_t (*prefix)(const struct tokcount *tc, const char *s, size_t n, size_t tokens);
    void *arg;
};

/* The approximate counter of llm/text.h (the default). */
const struct tokcount *tokcount_approx(void);

/*
 * A counter backed by tokenizer t (which must outlive it). Returns 0 and sets
 * *out (tokcount_free() it) or -ENOMEM. A tokenizer error while counting is
 * counted by the approximation instead (and logged once).
 */
TS_MUST_CHECK int tokcount_tokenizer_new(const struct tokenizer *t, struct tokcount **out);
/* Frees a counter from tokcount_tokenizer_new(); NULL and tokcount_approx() are no-ops. */
void tokcount_free(struct tokcount *tc);

/* Shorthands: tc NULL means tokcount_approx(). */
size_t tokcount_count(const struct tokcount *tc, const char *s, size_t n);
size_t tokcount_prefix(const struct tokcount *tc, const char *s, size_t n, size_t tokens);

#endif
