/*
 * chunktimes.c - chunk arrival times in 4 bytes a chunk (see chunktimes.h).
 */
#include "analysis/chunktimes.h"

#include <errno.h>
#include <string.h>

#include "base/alloc.h"

void chunk_times_init(struct chunk_times *ct)
{
    memset(ct, 0, sizeof(*ct));
}

void chunk_times_release(struct chunk_times *ct)
{
    ts_free(ct->word);
    chunk_times_init(ct);
}

int chunk_times_add(struct chunk_times *ct, uint64_t at)
{
    if (!ct->n) {
        ct->first_ns = ct->last_ns = at;
        ct->n = 1;
        return 0;
    }
    if (ct->n == UINT32_MAX)
        return -ENOMEM;
    uint64_t gap = at > ct->last_ns ? at - ct->last_ns : 0;
    uint32_t need = gap < UINT32_MAX ? 1 : 3;
    if (ct->alloc - ct->words < need) {
        if (ct->alloc > UINT32_MAX / 2)
            return -ENOMEM;
        uint32_t n = ct->alloc ? 2 * ct->alloc : 16;
        uint32_t *v = ts_realloc(ct->word, (size_t)n * sizeof(*v));
        if (!v)
            return -ENOMEM;
        ct->word = v;
        ct->alloc = n;
    }
    uint32_t *p = ct->word + ct->words;
    if (need == 1) {
        p[0] = (uint32_t)gap;
    } else {
        p[0] = UINT32_MAX;
        p[1] = (uint32_t)(gap >> 32);
        p[2] = (uint32_t)gap;
    }
    ct->words += need;
    ct->last_ns = at > ct->last_ns ? at : ct->last_ns;
    ct->n++;
    return 0;
}

void chunk_times_unpack(const struct chunk_times *ct, uint64_t *out)
{
    if (!ct->n)
        return;
    uint64_t t = ct->first_ns;
    out[0] = t;
    for (uint32_t i = 1, k = 0; i < ct->n; i++) {
        uint64_t gap = ct->word[k++];
        if (gap == UINT32_MAX) {
            gap = (uint64_t)ct->word[k] << 32 | ct->word[k + 1];
            k += 2;
        }
        t += gap;
        out[i] = t;
    }
}
