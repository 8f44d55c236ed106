/*
 * samples.h - exact latency samples, for the figures vLLM computes with numpy.
 *
 * vLLM's serving benchmark keeps every TTFT, TPOT, ITL and E2EL value and
 * takes the mean, the population standard deviation and the percentiles
 * (numpy's default "linear" method) over them. An HDR histogram answers
 * within its bucket width, which at small sample counts is not the same
 * number (p99 of 152 values is an interpolation between the two largest; the
 * histogram gives the larger's bucket). A struct samples keeps the values
 * themselves, in nanoseconds, up to a bound; beyond the bound the caller
 * falls back to the histogram, and samples_exact() says which holds.
 *
 * Memory grows by doubling as values arrive, up to max values (8 bytes
 * each): adding is amortised O(1) and allocates only when the array grows.
 * A value that does not fit (the bound, or no memory) is counted in dropped,
 * never silently lost. Not thread-safe: one owner, merged when quiescent.
 */
#ifndef TS_ANALYSIS_SAMPLES_H
#define TS_ANALYSIS_SAMPLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* The default bound: values per metric per run. */
#define SAMPLES_MAX 1000000u

enum samples_loss {
    SAMPLES_COMPLETE = 0, /* every value is here */
    SAMPLES_OVER_CAP,     /* more values than max (or memory ran out) */
    SAMPLES_NOT_KEPT,     /* some values were never given (rebuilt from files, merged
                           * from other processes, a record without its chunk times) */
};

struct samples {
    int64_t *v;       /* the values, unsorted; owned */
    size_t n, alloc;  /* values held, slots allocated */
    size_t max;       /* the bound */
    uint64_t dropped; /* values not kept because of the bound or memory */
    bool not_kept;    /* samples_mark_not_kept() was called */
};

/* An empty set bounded at max values (0: SAMPLES_MAX). Allocates nothing. */
void samples_init(struct samples *s, size_t max);
/* Frees the values; s is empty afterwards (and may be reused). */
void samples_release(struct samples *s);
/* Forgets every value and loss; keeps the memory and the bound. */
void samples_clear(struct samples *s);
/* Adds one value (ns); past the bound or without memory it is counted in dropped. */
void samples_add(struct samples *s, int64_t ns);
/* Records that values exist which were never added (see SAMPLES_NOT_KEPT). */
void samples_mark_not_kept(struct samples *s);
/* Appends src's values to dst (as far as dst's bound allows) and its losses. */
void samples_merge(struct samples *dst, const struct samples *src);
/* Why the set is not every value, or SAMPLES_COMPLETE. */
enum samples_loss samples_loss(const struct samples *s);
/* samples_loss() == SAMPLES_COMPLETE. */
bool samples_exact(const struct samples *s);
/* "complete", "over_cap", "not_kept" (static). */
const char *samples_loss_name(enum samples_loss l);

/*
 * numpy.percentile(v, p) with the default method ("linear"), for v sorted
 * ascending, n >= 1, p in 0..100: the value at rank p/100 * (n - 1),
 * interpolated between the two samples around it (numpy's _lerp, which
 * computes from the upper sample when the fraction is >= 0.5).
 */
double samples_percentile_sorted(const double *v, size_t n, double p);

/*
 * The statistics of the set in milliseconds, numpy's way: count, mean,
 * population std (numpy.std's default ddof=0), min, max and the percentiles
 * pct[0..npct) at the levels p[]. An empty set gives count 0 and zeros (as
 * vLLM writes for an empty list). Returns 0, or -ENOMEM (a sorted copy is
 * made; nothing is written then).
 */
struct samples_stats {
    uint64_t count;
    double mean, std, min, max;
};
TS_MUST_CHECK int samples_compute_ms(const struct samples *s, const double *p, size_t npct,
                                     struct samples_stats *st, double *pct);

#endif
