/*
 * rng.h - the one pseudo-random generator of tokenstorm: xoshiro256**
 * (Blackman and Vigna, https://prng.di.unimi.it/), seeded through splitmix64.
 *
 * A struct rng is a plain value (32 bytes) owned and embedded by its user; it
 * holds no resources, so there is no _release. It is not thread-safe: give
 * every thread (worker, rank) its own stream with rng_fork(). Everything that
 * is random in a run derives from one --seed, so a run is reproducible.
 *
 * Not for cryptography.
 */
#ifndef TS_BASE_RNG_H
#define TS_BASE_RNG_H

#include <stdint.h>

struct rng {
    uint64_t s[4];
};

/*
 * Advances a splitmix64 state and returns its next output. Exposed because it
 * is the seeding function (and handy for hashing a seed into a seed). From
 * state 0 the first outputs are 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, ...
 */
/* The splitmix64 finaliser: a bijection of 64-bit values that mixes well
 * (hashing seeds and indexes into independent-looking values). */
uint64_t rng_mix64(uint64_t x);
uint64_t splitmix64_next(uint64_t *state);

/*
 * Seeds r from one 64-bit value: the four state words are the first four
 * outputs of splitmix64 started at seed. Any seed (0 included) gives a valid,
 * non-zero state.
 */
void rng_seed(struct rng *r, uint64_t seed);

/* Returns the next 64 random bits (xoshiro256**). */
uint64_t rng_next_u64(struct rng *r);

/* Returns a double uniform in [0, 1) with 53 random bits (never 1.0). */
double rng_uniform01(struct rng *r);

/*
 * Returns an integer uniform in [lo, hi], both inclusive, without modulo bias
 * (Lemire's multiply-and-reject; on average fewer than 2 draws, almost always
 * 1). If lo > hi the bounds are swapped. rng_range(r, 0, UINT64_MAX) is one
 * rng_next_u64().
 */
uint64_t rng_range(struct rng *r, uint64_t lo, uint64_t hi);

/*
 * Advances r by 2^128 steps (the reference xoshiro256 jump). Streams that
 * start 2^128 steps apart never overlap in any realistic run.
 */
void rng_jump(struct rng *r);

/* Advances r by 2^192 steps (the reference long jump): 2^64 families of jumps. */
void rng_long_jump(struct rng *r);

/*
 * Makes child an independent stream number stream_index of parent: a copy of
 * parent advanced by (stream_index + 1) jumps, so stream i never overlaps
 * parent's own stream or any other stream j != i (for fewer than 2^128 draws
 * each). parent is not modified; child may not alias parent. Costs
 * (stream_index + 1) * 256 generator steps: about a microsecond per stream,
 * fine for thousands of workers; for much larger indexes combine
 * rng_long_jump() with a small index.
 */
void rng_fork(const struct rng *parent, uint64_t stream_index, struct rng *child);

#endif
