/*
 * knee.h - the math of a load sweep: where a latency curve bends (the knee),
 * where the error rate takes off (the critical load), which load is the
 * highest that still meets the SLOs (bisection), and the straight-line fit
 * the other three and the saturation checks are built on.
 *
 * Pure functions on caller-owned arrays: nothing allocates, nothing keeps
 * state, everything is thread-safe. docs/SWEEP.md explains each method, its
 * assumptions and where it fails.
 */
#ifndef TS_ANALYSIS_KNEE_H
#define TS_ANALYSIS_KNEE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

/* ---- least squares ------------------------------------------------------- */

struct linfit {
    double slope, intercept;
    double slope_se; /* standard error of the slope; 0 for a perfect fit, NAN when n == 2 */
    double t;        /* slope / slope_se: +-INFINITY for a perfect sloped fit, 0 for a perfect
                        flat one, NAN when n == 2 (no degrees of freedom left) */
    double r2;       /* coefficient of determination; 1 when y is constant and fitted exactly */
    size_t n;
};

/*
 * Ordinary least squares y = intercept + slope * x over n points. Returns 0,
 * or -EINVAL when n < 2, a value is not finite, or every x is the same.
 */
TS_MUST_CHECK int linfit_compute(const double *x, const double *y, size_t n, struct linfit *out);

/*
 * The one-sided 99.5% quantile of Student's t with dof degrees of freedom
 * (63.657 for 1, 9.925 for 2, ... 2.576 in the limit; tabulated, the next
 * smaller tabulated dof is used between entries, which errs on the strict
 * side). NAN for dof 0.
 */
double student_t_995(size_t dof);

/*
 * True when the fit's slope is positive and significant: t >= student_t_995(n - 2)
 * (a chance of at most 0.5% that a flat series shows such a rise).
 */
bool linfit_rising(const struct linfit *f);

/* ---- the knee of a rising curve ------------------------------------------ */

struct knee {
    size_t index; /* of the point chosen, into the caller's arrays */
    double x, y;
    double score; /* the difference curve's maximum, in 0..1 (see below) */
};

#define KNEE_MIN_SCORE 0.1 /* default: a bend smaller than this is not a knee */

/*
 * The knee ("elbow") of a rising, convex curve such as latency against load,
 * by Kneedle (Satopaa, Albrecht, Irwin, Raghavan, 2011), the discrete
 * stand-in for the point of maximum curvature:
 *   1. normalise x and y to [0, 1] by their ranges (x is the first to last
 *      point, y is min to max);
 *   2. form the difference curve d_i = x_n,i - y_n,i: the vertical distance
 *      of each point below the diagonal, i.e. below the chord from the
 *      flattest to the steepest part;
 *   3. the knee is the interior point (neither end) where d is largest; it
 *      is reported when that maximum is at least min_score (the bend is
 *      real, not a straight line or a concave curve, where d <= 0).
 * The curve must rise overall (last y above the first).
 * No smoothing: sweep points are few, and each is already a percentile over
 * many requests. x must be strictly ascending; y may be noisy.
 *
 * Returns 0 and *out; -EINVAL when n < 3, a value is not finite or x is not
 * strictly ascending; -ENOENT when y is constant, does not end above where
 * it starts, or no interior point scores min_score (no knee: the curve is
 * straight, concave or falls).
 */
TS_MUST_CHECK int knee_find(const double *x, const double *y, size_t n, double min_score,
                            struct knee *out);

/* ---- the critical load of the error rate --------------------------------- */

/*
 * The fit of a rising error rate to
 *
 *     eps(lambda) = eps0 * exp((lambda - lambda_c) / delta_lambda)
 *
 * In this form eps0 and lambda_c cannot both be fitted (only
 * eps0 * exp(-lambda_c / delta_lambda) is identified), so eps0 is fixed by
 * the caller to the error level that defines "critical" (1% by default):
 * lambda_c is the load at which the fitted error rate reaches eps0, and
 * delta_lambda is the load it takes for errors to grow e-fold.
 * The fit is least squares of ln(eps) = a + b * lambda over the points with
 * 0 < eps < 1 (a rate of 0 has no logarithm; a rate of 1 is the ceiling the
 * exponential cannot describe), unweighted; then delta_lambda = 1 / b,
 * lambda_c = (ln(eps0) - a) / b, and r2 is the fit's R^2 in log space.
 * lambda_c may lie outside the loads measured (an extrapolation).
 */
struct critical_fit {
    double lambda_c;
    double epsilon0;
    double delta_lambda;
    double r2;
    size_t points; /* points used: 0 < eps < 1 */
};

#define CRITICAL_EPSILON0   0.01
#define CRITICAL_MIN_POINTS 3

/*
 * Fits n (load, error rate) pairs, in any order. epsilon0 must be in (0, 1);
 * min_points >= 2 (with exactly 2 the "fit" is the line through them and r2
 * is 1). Returns 0 and *out; -EINVAL for bad arguments or non-finite values;
 * -ENOENT when fewer than min_points usable points, all at one load, or the
 * error rate does not rise with load (b <= 0).
 */
TS_MUST_CHECK int critical_fit_compute(const double *load, const double *eps, size_t n,
                                       double epsilon0, size_t min_points,
                                       struct critical_fit *out);

/*
 * Whether a fit says something about the loads measured (up to lmax): its
 * log-space R^2 at least CRITICAL_MIN_R2, and lambda_c a load at all (> 0)
 * no further beyond the loads than CRITICAL_MAX_REACH times the highest. A
 * fit that fails this (lambda_c -24 req/s, or an R^2 of 0.3) is reported as
 * not meaningful, not as a headline. Returns NULL when meaningful, else
 * why not (static text).
 */
#define CRITICAL_MIN_R2    0.8
#define CRITICAL_MAX_REACH 2.0
const char *critical_fit_not_meaningful(double lambda_c, double r2, double lmax);

/* ---- maximum load meeting the SLOs ---------------------------------------- */

struct goodput_bracket {
    long pass; /* index of the highest passing load below the first failure; -1 if none */
    long fail; /* index of the lowest failing load; -1 if none failed */
};

/*
 * For n steps sorted by ascending load with their SLO verdicts, finds the
 * lowest failing load and the highest passing load below it. A pass above
 * the first failure is not counted (capacity is where it first fails, not a
 * lucky step beyond it). Returns 0, or -EINVAL when n == 0 or the loads are
 * not strictly ascending.
 */
TS_MUST_CHECK int goodput_bracket_find(const double *load, const bool *pass, size_t n,
                                       struct goodput_bracket *out);

/*
 * One bisection step between a passing load lo and a failing load hi:
 * returns true with *next = (lo + hi) / 2 while the bracket is wider than
 * rel_tol * hi; false when it has converged (or lo >= hi, or a value is not
 * finite), leaving *next untouched.
 */
bool bisect_next(double lo, double hi, double rel_tol, double *next);

#endif
