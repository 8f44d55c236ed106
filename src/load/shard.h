/*
 * shard.h - deterministic shards of a run's load (--shard i/N, or the rank
 * of an MPI job), and starting several processes at one instant
 * (--start-at). app/ranks.h composes these into distributed runs;
 * docs/DISTRIBUTED.md is the user's guide.
 *
 * Shards. The run's work is numbered globally: arrival i of the one seeded
 * open-loop schedule, user u of the closed loop. Process (shard) i of N
 * takes the numbers g with g % N == i; inside the process, the k-th of its
 * numbers (k = g / N) goes to worker k % workers. So N shards together send
 * exactly what one process sends, with the same request bodies
 * (workload_item(g) depends on the seed and g only), whatever the number
 * of workers of each. Closed-loop request indexes are not fixed in advance
 * (users take the next one when they send): shard i numbers its requests
 * i, i + N, i + 2N, ..., so request ids stay disjoint across shards.
 * A struct shard with count 0 or 1 is the whole run.
 */
#ifndef TS_LOAD_SHARD_H
#define TS_LOAD_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define SHARD_MAX 65536u

struct shard {
    uint32_t index; /* 0 .. count-1 */
    uint32_t count; /* 0 or 1 = the whole run */
};

/* Parses "i/N" (0 <= i < N <= SHARD_MAX). 0, or -EINVAL with a message. */
TS_MUST_CHECK int shard_parse(const char *s, struct shard *out, char *err, size_t errlen);
/* N, at least 1. */
uint32_t shard_n(const struct shard *s);
/* true if global number g belongs to shard s. */
bool shard_owns(const struct shard *s, uint64_t g);
/* The worker (0..workers-1) of the owning process that takes g. */
uint32_t shard_worker(const struct shard *s, uint64_t g, uint32_t workers);
/* The global number of the shard's k-th number: k * N + index. */
uint64_t shard_global(const struct shard *s, uint64_t k);

/* ---- starting several processes at one instant ---- */

#define START_AT_MAX_AHEAD_S (24 * 3600)

/*
 * Parses a --start-at instant: Unix seconds ("1767225600", "1767225600.25")
 * or RFC 3339 UTC ("2026-01-01T00:00:00Z", fractions allowed). Returns 0 and
 * the wall-clock time in ns, or -EINVAL with a message (also for an instant
 * more than START_AT_MAX_AHEAD_S ahead of now).
 */
TS_MUST_CHECK int start_at_parse(const char *s, uint64_t *wall_ns, char *err, size_t errlen);
/*
 * Sleeps until the wall clock (CLOCK_REALTIME) reads wall_ns; a signal ends
 * the wait early (so Ctrl-C is handled at once). Returns how late the call
 * came, in ns (0 when it waited or wall_ns is 0).
 */
uint64_t start_at_wait(uint64_t wall_ns);

struct ranks_group;
struct runner_progress;
struct runner_point;
struct runner_result;
struct goodput_cfg;

#endif
