#include "arena.h"

#include <string.h>

#include "alloc.h"

struct arena_block {
    struct arena_block *next;
    size_t size;
    size_t off;
    _Alignas(16) unsigned char mem[];
};

void arena_init(struct arena *a, size_t chunk, size_t cap)
{
    a->head = NULL;
    a->used = 0;
    a->cap = cap;
    a->chunk = chunk ? chunk : 4096;
}

void arena_release(struct arena *a)
{
    struct arena_block *b = a->head;
    while (b) {
        struct arena_block *next = b->next;
        ts_free(b);
        b = next;
    }
    a->head = NULL;
    a->used = 0;
}

void arena_reset(struct arena *a)
{
    struct arena_block *keep = a->head;
    if (!keep)
        return;
    /* keep the oldest block: walk to the tail of the list */
    struct arena_block *prev = NULL;
    while (keep->next) {
        prev = keep;
        keep = keep->next;
    }
    if (prev)
        prev->next = NULL;
    struct arena_block *b = a->head;
    while (b && b != keep) {
        struct arena_block *next = b->next;
        ts_free(b);
        b = next;
    }
    keep->off = 0;
    keep->next = NULL;
    a->head = keep;
    a->used = 0;
}

void *arena_alloc(struct arena *a, size_t n)
{
    size_t rounded = (n + 15) & ~(size_t)15;
    if (rounded < n || rounded > a->cap || a->used > a->cap - rounded)
        return NULL;
    struct arena_block *b = a->head;
    if (!b || b->size - b->off < rounded) {
        size_t size = rounded > a->chunk ? rounded : a->chunk;
        b = ts_malloc(sizeof(*b) + size);
        if (!b)
            return NULL;
        b->size = size;
        b->off = 0;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->mem + b->off;
    b->off += rounded;
    a->used += rounded;
    return p;
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
    char *d = arena_alloc(a, n + 1);
    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}
