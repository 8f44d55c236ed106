/*
 * cancel.h - `run --cancel SPEC`: impatient users who abandon a share of
 * their streams mid-way (docs/USAGE.md "Cancelled streams").
 *
 * SPEC = "after:DIST[,share:P%]" (the two parts in either order): a streamed
 * request is abandoned with probability P (default 100%) when DIST (a
 * base/dist.h spec whose numbers are durations: us, ms, s, m; no unit means
 * seconds) has elapsed since it was sent, unless it ended before. Examples:
 * "after:uniform:0.5s-3s,share:20%", "after:fixed:800ms", "share:5%,after:
 * lognormal:2s,0.5". The roll and the time of request i depend only on the
 * run's seed and i, so a run repeats its cancels.
 */
#ifndef TS_LOAD_CANCEL_H
#define TS_LOAD_CANCEL_H

#include <stdbool.h>
#include <stdint.h>

#include "base/dist.h"
#include "base/err.h"

#define RUN_CANCEL_SPEC_MAX 256

struct run_cancel {
    bool on;
    double share;      /* 0..1 */
    struct dist after; /* seconds */
};

/* Parses spec into c. Returns 0, or -EINVAL with "--cancel: ..." in err. On
 * success release c with run_cancel_release. */
TS_MUST_CHECK int run_cancel_parse(struct run_cancel *c, const char *spec, char *err,
                                   size_t errlen);
void run_cancel_release(struct run_cancel *c);

/* When request index (sent with a stream) is abandoned, in ns after it was
 * sent, or 0 when it is not. */
uint64_t run_cancel_after_ns(const struct run_cancel *c, uint64_t seed, uint64_t index);

#endif
