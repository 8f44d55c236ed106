#include "rng.h"

#include <string.h>

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t rng_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t splitmix64_next(uint64_t *state)
{
    return rng_mix64(*state += 0x9e3779b97f4a7c15ULL);
}

void rng_seed(struct rng *r, uint64_t seed)
{
    uint64_t sm = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64_next(&sm);
}

uint64_t rng_next_u64(struct rng *r)
{
    uint64_t *s = r->s;
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double rng_uniform01(struct rng *r)
{
    return (double)(rng_next_u64(r) >> 11) * 0x1.0p-53;
}

uint64_t rng_range(struct rng *r, uint64_t lo, uint64_t hi)
{
    if (lo > hi) {
        uint64_t t = lo;
        lo = hi;
        hi = t;
    }
    uint64_t span = hi - lo;
    if (span == UINT64_MAX)
        return rng_next_u64(r);
    uint64_t n = span + 1;
    /* Lemire, "Fast random integer generation in an interval" (2019). */
    __uint128_t m = (__uint128_t)rng_next_u64(r) * n;
    uint64_t low = (uint64_t)m;
    if (low < n) {
        uint64_t threshold = -n % n;
        while (low < threshold) {
            m = (__uint128_t)rng_next_u64(r) * n;
            low = (uint64_t)m;
        }
    }
    return lo + (uint64_t)(m >> 64);
}

static void rng_apply_jump(struct rng *r, const uint64_t poly[4])
{
    uint64_t acc[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; i++) {
        for (int b = 0; b < 64; b++) {
            if (poly[i] & (UINT64_C(1) << b)) {
                acc[0] ^= r->s[0];
                acc[1] ^= r->s[1];
                acc[2] ^= r->s[2];
                acc[3] ^= r->s[3];
            }
            (void)rng_next_u64(r);
        }
    }
    memcpy(r->s, acc, sizeof(acc));
}

void rng_jump(struct rng *r)
{
    static const uint64_t jump[4] = {0x180ec6d33cfd0abaULL, 0xd5a61266f0c9392cULL,
                                     0xa9582618e03fc9aaULL, 0x39abdc4529b1661cULL};
    rng_apply_jump(r, jump);
}

void rng_long_jump(struct rng *r)
{
    static const uint64_t long_jump[4] = {0x76e15d3efefdcbbfULL, 0xc5004e441c522fb3ULL,
                                          0x77710069854ee241ULL, 0x39109bb02acbe635ULL};
    rng_apply_jump(r, long_jump);
}

void rng_fork(const struct rng *parent, uint64_t stream_index, struct rng *child)
{
    *child = *parent;
    rng_jump(child);
    for (uint64_t i = 0; i < stream_index; i++)
        rng_jump(child);
}
