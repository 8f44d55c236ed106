/*
 * reqsample.c - the bottom-k sample of requests (see reqsample.h).
 */
#include "analysis/reqsample.h"

uint64_t reqsample_key(uint64_t index)
{
    uint64_t z = index + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (z ^ (z >> 31)) >> 11;
}

static void swap(struct reqsample_entry *a, struct reqsample_entry *b)
{
    struct reqsample_entry t = *a;
    *a = *b;
    *b = t;
}

static void sift_up(struct reqsample *s, uint32_t i)
{
    while (i && s->e[(i - 1) / 2].key < s->e[i].key) {
        swap(&s->e[(i - 1) / 2], &s->e[i]);
        i = (i - 1) / 2;
    }
}

static void sift_down(struct reqsample *s, uint32_t i)
{
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < s->n && s->e[l].key > s->e[m].key)
            m = l;
        if (r < s->n && s->e[r].key > s->e[m].key)
            m = r;
        if (m == i)
            return;
        swap(&s->e[i], &s->e[m]);
        i = m;
    }
}

/* Whether key is held: a linear scan, only for keys that would be kept. */
static bool holds(const struct reqsample *s, uint64_t key)
{
    for (uint32_t i = 0; i < s->n; i++)
        if (s->e[i].key == key)
            return true;
    return false;
}

void reqsample_add(struct reqsample *s, const struct reqsample_entry *e)
{
    if (s->n == REQSAMPLE_MAX && e->key >= s->e[0].key)
        return;
    if (holds(s, e->key))
        return;
    if (s->n < REQSAMPLE_MAX) {
        s->e[s->n] = *e;
        sift_up(s, s->n++);
        return;
    }
    s->e[0] = *e;
    sift_down(s, 0);
}

void reqsample_merge(struct reqsample *dst, const struct reqsample *src)
{
    for (uint32_t i = 0; i < src->n && i < REQSAMPLE_MAX; i++)
        reqsample_add(dst, &src->e[i]);
}
