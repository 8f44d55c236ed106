/*
 * arrival.h - arrival processes for the open-loop load generator: the
 * intended send time of each successive request, as an offset in
 * nanoseconds from the start of the run (time 0).
 *
 * Homogeneous processes run at a fixed rate R (requests per second) forever;
 * the runner stops them by --duration or --requests. Their first arrival is
 * at 0 (like vLLM's benchmark, which sends the first request at once), then:
 *   constant   t_k = k / R exactly (no drift: computed, not accumulated)
 *   poisson    gaps ~ Exponential(mean 1/R)
 *   gamma:B    gaps ~ Gamma(shape B, scale 1/(R*B)): mean 1/R, coefficient of
 *              variation 1/sqrt(B). B = 1 is Poisson, B < 1 is burstier,
 *              B > 1 is smoother (vLLM's --burstiness).
 * R may be +INFINITY: every arrival is at 0 (all requests at once).
 *
 * Staged processes (a linear ramp, or k6-like stages) have a rate that moves
 * linearly within each stage from the previous stage's target (the start
 * rate for the first one) to this stage's target; a stage of duration 0 is a
 * step. They end: arrival_next() returns TS_CLOSED once the last stage is
 * over. Method (time change): the integrated rate L(t) = integral of rate
 * over [0, t] is piecewise quadratic, and the k-th arrival is at
 * t_k = L^-1(s_k) with s_k = s_(k-1) + e_k, where the increments e_k are 1
 * (constant: the k-th request goes out when the expected count reaches k),
 * Exponential(1) (poisson: this is exactly a non-homogeneous Poisson process
 * with that rate) or Gamma(B, 1/B) (gamma: a renewal process in operational
 * time, burstiness B as above). While the rate is 0 there are no arrivals.
 * The inversion is closed-form (a root of a quadratic per stage).
 *
 * A struct arrival is embedded by its owner, initialised by one of the
 * arrival_init*() or arrival_parse*() functions and released with
 * arrival_release() (staged ones own a copy of their stages). It is not
 * thread-safe; the randomness comes from the struct rng passed to
 * arrival_next(), so one seed gives one schedule.
 */
#ifndef TS_WORKLOAD_ARRIVAL_H
#define TS_WORKLOAD_ARRIVAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/dist.h"
#include "base/err.h"
#include "base/rng.h"

#define ARRIVAL_STAGES_MAX 10000

enum arrival_kind {
    ARRIVAL_CONSTANT = 0,
    ARRIVAL_POISSON,
    ARRIVAL_GAMMA,
};

/* The shape of the gaps, independent of the rate. */
struct arrival_process {
    enum arrival_kind kind;
    double burstiness; /* ARRIVAL_GAMMA: B > 0; ignored otherwise */
};

/* One stage: over duration_ns the rate moves linearly to target (req/s). */
struct arrival_stage {
    uint64_t duration_ns;
    double target;
};

struct arrival {
    struct arrival_process process;
    struct dist unit_gap; /* increment of operational time, mean 1 */
    double rate;          /* homogeneous rate; 0 for staged processes */

    /* Recorded times (arrival_init_times): owned, ascending; NULL otherwise. */
    uint64_t *times;
    size_t ntimes;
    uint64_t period_ns; /* loop: the schedule repeats every period_ns; 0: it ends */

    /* Staged processes. */
    struct arrival_stage *stages; /* owned copy; NULL for homogeneous */
    size_t nstages;
    double start_rate;

    /* Progress. */
    uint64_t count;          /* arrivals produced so far */
    double t_ns;             /* poisson/gamma: the last arrival time */
    size_t stage;            /* current stage (== nstages: over) */
    uint64_t stage_start_ns; /* start of the current stage */
    double stage_pos_s;      /* time into the current stage of the last arrival */
};

/*
 * Parses --arrival: "constant", "poisson" or "gamma:B" with B > 0 (names
 * case-insensitive). Returns 0 or -EINVAL with a message in err, e.g.
 * "unknown arrival process 'x' (expected poisson, constant or gamma:B)".
 */
TS_MUST_CHECK int arrival_process_parse(struct arrival_process *p, const char *spec, char *err,
                                        size_t errlen);

/* Writes "constant", "poisson" or "gamma:B" into buf (NUL-terminated) and returns buf. */
char *arrival_process_format(const struct arrival_process *p, char *buf, size_t n);

/*
 * Homogeneous process at rate requests/s (> 0, finite or +INFINITY).
 * Returns 0 or -EINVAL (bad rate or burstiness).
 */
TS_MUST_CHECK int arrival_init(struct arrival *a, const struct arrival_process *p, double rate);

/* Shorthands for arrival_init() with that process. */
TS_MUST_CHECK int arrival_init_constant(struct arrival *a, double rate);
TS_MUST_CHECK int arrival_init_poisson(struct arrival *a, double rate);
TS_MUST_CHECK int arrival_init_gamma(struct arrival *a, double rate, double burstiness);

/*
 * Linear ramp from r0 to r1 (req/s, finite, >= 0) over duration_ns, then the
 * schedule ends. Returns 0, -EINVAL or -ENOMEM.
 */
TS_MUST_CHECK int arrival_init_ramp(struct arrival *a, const struct arrival_process *p, double r0,
                                    double r1, uint64_t duration_ns);

/*
 * k6-like stages: the rate starts at start_rate and moves linearly to
 * stages[i].target during stages[i]. 1 <= n <= ARRIVAL_STAGES_MAX, rates
 * finite and >= 0, total duration below 2^64 ns. stages is copied.
 * Returns 0, -EINVAL or -ENOMEM.
 */
TS_MUST_CHECK int arrival_init_stages(struct arrival *a, const struct arrival_process *p,
                                      double start_rate, const struct arrival_stage *stages,
                                      size_t n);

/*
 * Recorded send times (run --replay): times[0..n) in ns from the start,
 * ascending (copied), divided by speed (> 0). loop: the schedule repeats
 * every last time + the mean gap (1 s for one time), else it ends after n.
 * Returns 0, -EINVAL or -ENOMEM.
 */
TS_MUST_CHECK int arrival_init_times(struct arrival *a, const uint64_t *times, size_t n,
                                     double speed, bool loop);

/*
 * arrival_process_parse(spec) + arrival_init(rate), for --arrival with
 * --rate. Returns 0 or -EINVAL with a message.
 */
TS_MUST_CHECK int arrival_parse(struct arrival *a, const char *spec, double rate, char *err,
                                size_t errlen);

/*
 * Stages from text: "DURATION:RATE[,DURATION:RATE...]", durations as in
 * units_parse_duration_ns() and rates as in units_parse_rate(), e.g.
 * "30s:10,1m:50,30s:0" or "2m:600/m". Returns 0, -ENOMEM, or -EINVAL with a
 * message naming the stage, e.g. "stage 2: bad duration '1x' (e.g. 30s)".
 */
TS_MUST_CHECK int arrival_parse_stages(struct arrival *a, const struct arrival_process *p,
                                       double start_rate, const char *spec, char *err,
                                       size_t errlen);

/*
 * Stores the intended send time of the next request (ns since the start,
 * non-decreasing from call to call) in *t_ns and returns 0, or returns
 * TS_CLOSED when a staged schedule is over (then every later call does too)
 * or the time would pass 2^64 ns.
 */
TS_MUST_CHECK int arrival_next(struct arrival *a, struct rng *r, uint64_t *t_ns);

/* Starts the schedule again from time 0 (same configuration). */
void arrival_reset(struct arrival *a);

/* The rate (req/s) at t_ns; 0 after the last stage of a staged process. */
double arrival_rate_at(const struct arrival *a, uint64_t t_ns);

/*
 * The expected number of arrivals in [0, t_ns]: the integral of the rate
 * (for homogeneous processes rate * t; the arrival at 0 is not counted).
 */
double arrival_expected(const struct arrival *a, uint64_t t_ns);

/* Total length of a staged schedule in ns; 0 for homogeneous (no end). */
uint64_t arrival_duration_ns(const struct arrival *a);

/* Frees the stages. NULL is a no-op; releasing twice is harmless. */
void arrival_release(struct arrival *a);

#endif
