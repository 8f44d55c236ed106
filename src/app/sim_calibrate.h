/*
 * sim_calibrate.h - `tokenstorm sim calibrate`: a simulator profile fitted to
 * measurements of a real server.
 *
 * Points come from result directories: a run's (result.json: one point) or a
 * sweep's (sweep.json: one point per step directory). A point is the load
 * (open loop at `run.rate` requests/s with Poisson arrivals, or a closed loop
 * of `run.users`), the lengths (the measured means of prompt and output
 * tokens, with the spread of `run.input_len` / `run.output_len`, approximated
 * by a lognormal of the same coefficient of variation), and what was
 * measured: median TTFT, median TPOT and, for a closed loop, output tokens/s
 * (an open loop's throughput is the offered load). Scenario runs and
 * non-streamed runs are refused (no TTFT to fit).
 *
 * The fit: the chosen profile keys (default t_fix_ms, t_w_ms, b_ms_per_token,
 * t_sample_ms_per_seq) are moved by Nelder-Mead in log space to minimise the
 * sum over points of the squared log ratio model / measured of the three
 * numbers, each point simulated by the offline driver (sim/offline.h) with
 * noise off. Every other key stays as the base profile has it.
 *
 * The report (YAML, loadable by `tokenstorm sim --config`): `base:`, the
 * fitted keys, then as comments the error of the model at every point and
 * metric, and warnings where the model cannot fit: an error over 15% after
 * fitting, a measured TPOT that keeps growing where the model's batch is
 * already capped, fewer points than keys fitted.
 */
#ifndef TS_APP_SIM_CALIBRATE_H
#define TS_APP_SIM_CALIBRATE_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "base/err.h"
#include "sim/offline.h"
#include "sim/profile.h"

#define CALIB_POINTS_MAX 256
#define CALIB_KEYS_MAX   8

struct calib_point {
    char label[160]; /* "DIR: 8 users" */
    struct sim_offline_load load;
    double ttft_ms, tpot_ms, tok_s;       /* measured; <= 0 = not measured */
    double m_ttft_ms, m_tpot_ms, m_tok_s; /* the model's, after calib_fit */
    uint32_t m_running;                   /* most seqs the model ran at once */
};

struct calib_opts {
    const char *base;                     /* preset name the profile started from (for `base:`) */
    const char *keys[CALIB_KEYS_MAX + 1]; /* keys to fit, NULL-terminated */
    unsigned max_evals;                   /* bound of model evaluations (0 = 400) */
};

/*
 * Appends the points of one result directory (a run or a sweep) to pts[*n]
 * (at most CALIB_POINTS_MAX in all). Returns 0, or an error with "DIR: why"
 * in err (TS_PARSE for a result that cannot be used).
 */
TS_MUST_CHECK int calib_load_dir(const char *dir, struct calib_point *pts, size_t *n, char *err,
                                 size_t errlen);

/* One point from a parsed result.json; label names it. As calib_load_dir. */
TS_MUST_CHECK int calib_point_from_result(const json_t *doc, const char *label,
                                          struct calib_point *pt, char *err, size_t errlen);

/*
 * Fits o->keys of *p to the points; on return *p holds the best profile and
 * each point its model numbers. Returns 0, or -EINVAL with a message (a key
 * that is not a number, a profile that does not validate).
 */
TS_MUST_CHECK int calib_fit(struct sim_profile *p, const struct calib_opts *o,
                            struct calib_point *pts, size_t n, char *err, size_t errlen);

/* Writes the YAML report; returns the number of warnings written. */
int calib_print(FILE *out, const struct sim_profile *p, const struct calib_opts *o,
                const struct calib_point *pts, size_t n);

#endif
