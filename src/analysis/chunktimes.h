/*
 * chunktimes.h - when each chunk of a stream arrived, in 4 bytes a chunk.
 *
 * vLLM's ITL list and requests.jsonl's chunk_us need every chunk's arrival
 * time, exact to the nanosecond, for as long as a stream lasts: 8 bytes a
 * chunk held by every open stream. A struct chunk_times keeps the first time
 * and then each gap as one 32-bit word of nanoseconds (gaps up to ~4.29 s);
 * a longer gap takes three words (UINT32_MAX, then the gap's high and low
 * words), so nothing is rounded or lost. Times that go backwards are kept as
 * a gap of 0. Memory grows by doubling. Not thread-safe: one owner.
 */
#ifndef TS_ANALYSIS_CHUNKTIMES_H
#define TS_ANALYSIS_CHUNKTIMES_H

#include <stdint.h>

struct chunk_times {
    uint64_t first_ns; /* the first time */
    uint64_t last_ns;  /* the last time kept */
    uint32_t *word;    /* the gaps, packed as above */
    uint32_t n;        /* times kept */
    uint32_t words, alloc;
};

/* An empty list (no memory held). */
void chunk_times_init(struct chunk_times *ct);
void chunk_times_release(struct chunk_times *ct);
/* Keeps at. 0, or -ENOMEM: not kept (the list is as before). */
int chunk_times_add(struct chunk_times *ct, uint64_t at);
/* Writes the ct->n times into out (room for ct->n of them). */
void chunk_times_unpack(const struct chunk_times *ct, uint64_t *out);

#endif
