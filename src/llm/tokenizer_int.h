/*
 * tokenizer_int.h - the tables of a struct tokenizer, shared by
 * tokenizer_load.c, which builds them from a file, and tokenizer.c, which
 * encodes and decodes with them. Internal to src/llm/: tokenizer.h is the manual.
 *
 * Every kind of file becomes the same tables: token bytes by id, a hash from
 * bytes to id, the initial id of every byte, and a hash from an adjacent pair
 * of ids to (merge rank, merged id). tiktoken has no merge list: its pairs are
 * derived from the ranks (a pair merges with the rank of its concatenation),
 * which is exactly what tiktoken's "lowest rank of any adjacent concatenation"
 * loop computes, because every part of a piece is always a token.
 */
#ifndef TS_LLM_TOKENIZER_INT_H
#define TS_LLM_TOKENIZER_INT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "llm/tokenizer.h"

#define NO_ID    UINT32_MAX
#define SP_SPACE "\xe2\x96\x81" /* U+2581 LOWER ONE EIGHTH BLOCK */

/* True when p[i..] starts with "▁". */
static inline bool is_sp_space(const char *p, size_t n, size_t i)
{
    return i + 3 <= n && memcmp(p + i, SP_SPACE, 3) == 0;
}

enum tok_mode {
    MODE_BYTE_LEVEL, /* HF byte-level BPE */
    MODE_TIKTOKEN,   /* tiktoken ranks: bytes are tokens */
    MODE_SP,         /* SentencePiece-style BPE on "▁"-joined text */
};

enum sp_prepend {
    SP_PREPEND_NONE,
    SP_PREPEND_ALWAYS, /* every span between special tokens */
    SP_PREPEND_FIRST,  /* only the span at the start of the text */
};

struct tok_entry {
    uint32_t off;
    uint32_t len; /* NO_ID when the id is unused */
};

struct pair_slot {
    uint64_t key; /* (left << 32 | right) + 1; 0 is empty */
    uint32_t rank;
    uint32_t id;
};

struct special {
    uint32_t id;
    uint32_t off; /* content in the blob */
    uint32_t len;
};

struct tokenizer {
    enum tok_mode mode;
    size_t n_ids;
    struct tok_entry *tok;
    char *blob;
    size_t blob_len, blob_cap;
    uint32_t *bmap; /* open addressing, ids, NO_ID empty */
    size_t bmap_mask;
    struct pair_slot *pairs;
    size_t pairs_mask, n_pairs;
    uint32_t byte_id[256];
    bool direct_lookup; /* a whole piece that is a token is that token */
    bool add_prefix_space;
    bool byte_fallback;
    bool fuse_unk; /* a run of unknown characters is one unk */
    enum sp_prepend sp_prepend;
    bool sp_words; /* no token has "▁" after another character: cut before each "▁" run */
    uint32_t unk_id;
    pcre2_code *re; /* NULL: a span is one piece */
    pcre2_general_context *gctx;
    struct special *specials; /* sorted by first byte, then longest first */
    size_t n_specials;
    uint32_t special_first[257]; /* specials[first[c]..first[c+1]) start with byte c */
};

/* FNV-1a with a final mix: the hash of token bytes (bmap) and of cached pieces. */
static inline uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

/* A 64-bit finalizer (murmur3's fmix64): the hash of a pair key. */
static inline uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* The key of the adjacent pair (a, b) in t->pairs; never 0 (an empty slot). */
static inline uint64_t pair_key(uint32_t a, uint32_t b)
{
    return ((uint64_t)a << 32 | b) + 1;
}

/* Id of the token spelt exactly as s[0..n), or -1. */
static inline long bmap_find(const struct tokenizer *t, const char *s, size_t n)
{
    if (t->bmap == NULL)
        return -1;
    for (size_t i = hash_bytes(s, n) & t->bmap_mask;; i = (i + 1) & t->bmap_mask) {
        uint32_t id = t->bmap[i];
        if (id == NO_ID)
            return -1;
        if (t->tok[id].len == n && memcmp(t->blob + t->tok[id].off, s, n) == 0)
            return id;
    }
}

#endif
