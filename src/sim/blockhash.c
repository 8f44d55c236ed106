#include "sim/blockhash.h"

#include <string.h>

#include "base/alloc.h"
#include "llm/text.h"

void sim_block_hasher_init(struct sim_block_hasher *h, uint32_t block_size, uint32_t max_blocks)
{
    memset(h, 0, sizeof(*h));
    h->block_size = block_size;
    h->max_blocks = max_blocks;
    h->stopped = block_size == 0 || max_blocks == 0;
    h->state = SIM_BLOCK_HASH_SEED;
}

void sim_block_hasher_release(struct sim_block_hasher *h)
{
    ts_free(h->hashes);
    h->hashes = NULL;
    h->n = h->cap = 0;
}

/* Keeps the hash of the block just completed; false when hashing must stop. */
static bool keep(struct sim_block_hasher *h)
{
    if (h->n == h->cap) {
        uint32_t cap = h->cap ? h->cap * 2 : 64;
        if (cap > h->max_blocks)
            cap = h->max_blocks;
        uint64_t *p = ts_realloc(h->hashes, (size_t)cap * sizeof(*p));
        if (!p)
            return false;
        h->hashes = p;
        h->cap = cap;
    }
    h->hashes[h->n++] = h->state;
    return h->n < h->max_blocks;
}

void sim_block_hasher_piece(struct sim_block_hasher *h, const char *p, size_t n)
{
    h->tokens++;
    if (h->stopped)
        return;
    h->state = text_hash(p, n, h->state);
    if (++h->in_block == h->block_size) {
        h->in_block = 0;
        if (!keep(h))
            h->stopped = true;
    }
}

static int feed_piece(const char *p, size_t n, void *ctx)
{
    sim_block_hasher_piece(ctx, p, n);
    return 0;
}

uint64_t sim_block_hasher_text(struct sim_block_hasher *h, const char *s, size_t len)
{
    uint64_t before = h->tokens;
    (void)text_split_tokens(s, len, feed_piece, h); /* feed_piece never stops it */
    return h->tokens - before;
}

void sim_block_hasher_opaque(struct sim_block_hasher *h, uint64_t n)
{
    h->tokens += n;
    if (n)
        h->stopped = true;
}
