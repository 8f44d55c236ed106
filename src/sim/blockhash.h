/*
 * blockhash.h - the chained hashes of a prompt's KV blocks, for prefix caching.
 *
 * The simulator feeds a prompt to a struct sim_block_hasher token by token,
 * in the order and with the token pieces the prompt is counted with (the
 * approximate counter of llm/text.h; chat template tokens as small fixed
 * pieces). Every block_size tokens a block is complete and gets the hash
 *
 *     h_i = fold of text_hash(piece, len, state) over the block's pieces,
 *           starting from state = h_{i-1} (h_{-1} = SIM_BLOCK_HASH_SEED)
 *
 * so h_i depends on every token up to the end of block i, and two prompts
 * get the same h_i exactly when (up to 64-bit collisions) their first
 * (i + 1) * block_size tokens are the same pieces. A partial last block gets
 * no hash. These are the hashes sim_engine_submit_prefix() takes.
 *
 * Token counting never fails: `tokens` is always the number of tokens fed.
 * Hashing stops for good (no more hashes, the ones made stay valid) after
 * tokens whose content is unknown (sim_block_hasher_opaque), when
 * max_blocks hashes are made, or when memory runs out. The hash array grows
 * by doubling up to max_blocks entries (8 bytes each).
 */
#ifndef TS_SIM_BLOCKHASH_H
#define TS_SIM_BLOCKHASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_BLOCK_HASH_SEED 0x70726566697863ull /* "prefix" */

struct sim_block_hasher {
    uint32_t block_size; /* tokens per block; 0: count only */
    uint32_t max_blocks; /* most hashes made */
    uint32_t in_block;   /* tokens of the block being hashed */
    bool stopped;        /* no more hashes */
    uint64_t tokens;     /* tokens fed so far */
    uint64_t state;      /* hash state of the block being hashed */
    uint64_t *hashes;    /* hashes[0..n): the full blocks so far; owned */
    uint32_t n, cap;
};

/* Starts an empty hasher (allocates nothing). block_size 0 or max_blocks 0: tokens are only
 * counted. */
void sim_block_hasher_init(struct sim_block_hasher *h, uint32_t block_size, uint32_t max_blocks);
/* Frees the hashes. */
void sim_block_hasher_release(struct sim_block_hasher *h);

/* One token whose text is p[0..n). */
void sim_block_hasher_piece(struct sim_block_hasher *h, const char *p, size_t n);
/* The tokens of s[0..len) as text_split_tokens() cuts them; returns how many (as
 * text_count_tokens()). */
uint64_t sim_block_hasher_text(struct sim_block_hasher *h, const char *s, size_t len);
/* n tokens whose content is unknown (a prompt of token ids): counted; hashing stops. */
void sim_block_hasher_opaque(struct sim_block_hasher *h, uint64_t n);

#endif
