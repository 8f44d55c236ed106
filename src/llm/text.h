/*
 * text.h - synthetic text and the approximate token count.
 *
 * Until a real tokenizer is configured, tokens are counted by a documented
 * approximation (docs/METRICS.md, "Token counts"): the text is split the way
 * GPT-style pre-tokenizers split it, and
 *   - a run of ASCII letters, with at most one leading space, counts
 *     ceil(len / 5) tokens;
 *   - a run of ASCII digits counts ceil(len / 3) tokens (numbers are split in
 *     groups of three);
 *   - any other non-space ASCII character counts 1;
 *   - whitespace not attached to a word counts 1 per run;
 *   - each non-ASCII code point counts 1 (CJK is about one token a character).
 * For English prose this lands within about 15% of cl100k_base.
 *
 * The simulator's answers come from a seeded word model: output token i of a
 * stream with seed s is text_token(s, i), a short word with a leading space
 * (and now and then a lone "." or ","), so the approximation above counts
 * exactly one token per generated piece.
 */
#ifndef TS_LLM_TEXT_H
#define TS_LLM_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* Approximate token count of s[0..len). */
size_t text_count_tokens(const char *s, size_t len);

/* The i-th output piece of stream `seed`; returns a static string. */
const char *text_token(uint64_t seed, uint32_t i);

/* Splits s[0..len) into pieces the approximation counts as one token each.
 * Calls fn(piece, piece_len, ctx) for each; stops early if fn returns nonzero
 * and returns that value, else 0. */
int text_split_tokens(const char *s, size_t len, int (*fn)(const char *piece, size_t n, void *ctx),
                      void *ctx);

/* 64-bit FNV-1a of s[0..len), mixed with seed; used to seed streams from prompts. */
uint64_t text_hash(const char *s, size_t len, uint64_t seed);

#endif
