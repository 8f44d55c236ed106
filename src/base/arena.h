/*
 * arena.h - per-request memory released all at once (nginx pools, h2o_mem_pool).
 *
 * struct arena is embedded by its owner. arena_alloc() returns 16-byte aligned
 * memory valid until arena_reset() or arena_release(); there is no per-object
 * free. A cap bounds the total bytes an arena may hand out, so a request from
 * outside cannot make it grow without limit: beyond the cap arena_alloc()
 * returns NULL as it does when memory runs out.
 */
#ifndef TS_BASE_ARENA_H
#define TS_BASE_ARENA_H

#include <stddef.h>

struct arena_block;

struct arena {
    struct arena_block *head;
    size_t used;  /* bytes handed out since the last reset */
    size_t cap;   /* the most that may be handed out */
    size_t chunk; /* default block size */
};

void arena_init(struct arena *a, size_t chunk, size_t cap);
/* Frees every block. */
void arena_release(struct arena *a);
/* Forgets every allocation but keeps the first block for reuse. */
void arena_reset(struct arena *a);
/* Returns aligned memory owned by the arena, or NULL (out of memory or over cap). */
void *arena_alloc(struct arena *a, size_t n);
/* Returns a NUL-terminated copy of s[0..n) in the arena, or NULL. */
char *arena_strndup(struct arena *a, const char *s, size_t n);

#endif
