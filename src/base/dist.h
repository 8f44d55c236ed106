/*
 * dist.h - probability distributions for lengths, think times, noise and
 * anything else tokenstorm draws at random, and their spec strings.
 *
 * A struct dist is embedded by its owner. Fill it with one dist_init_*() or
 * with dist_parse(); sample it with dist_sample(d, rng) (it is read-only while
 * sampling, so threads may share one struct dist, each with its own struct
 * rng); dist_release() frees what an empirical distribution owns (the other
 * kinds own nothing, releasing them is harmless). A zeroed struct dist is
 * fixed:0. Every init/parse overwrites *d without releasing it first, so
 * release before reusing one.
 *
 * Spec strings (command line and YAML); names are case-insensitive, blanks
 * around numbers and separators are ignored, numbers are plain decimals
 * (exponents allowed, no "inf"/"nan"):
 *
 *   128                  a bare number: fixed:128
 *   fixed:V              always V
 *   uniform:LO-HI        continuous uniform on [LO, HI] (also uniform:LO,HI);
 *                        LO <= HI. dist_sample_uint() draws integers
 *                        uniformly from [ceil(LO), floor(HI)].
 *   normal:MEAN,SD       Gaussian; SD >= 0
 *   truncnormal:MEAN,SD,LO,HI
 *                        Gaussian restricted to [LO, HI] (the shape of
 *                        normal:MEAN,SD, renormalised; MEAN need not lie in
 *                        [LO, HI]); SD >= 0, LO <= HI
 *   lognormal:MEAN,SIGMA exp(N(mu, SIGMA^2)) with mu = ln(MEAN) - SIGMA^2/2,
 *                        so MEAN is the mean of the distribution itself (not
 *                        of its logarithm) and SIGMA the standard deviation of
 *                        the underlying normal (the shape; the coefficient of
 *                        variation is sqrt(exp(SIGMA^2) - 1), e.g. 0.66 for
 *                        SIGMA 0.6). MEAN > 0, SIGMA >= 0. The median is
 *                        MEAN * exp(-SIGMA^2/2).
 *   exponential:MEAN     (also exp:MEAN) MEAN > 0
 *   gamma:SHAPE,SCALE    mean SHAPE*SCALE, variance SHAPE*SCALE^2; both > 0
 *   empirical:FILE       a text file, one record per line, '#' starts a
 *                        comment, blank lines are skipped, fields are
 *                        separated by a comma and/or blanks. Either every
 *                        record is one number (samples: the distribution is
 *                        fitted by sorting them and interpolating the
 *                        inverse CDF linearly between neighbours), or every
 *                        record is a histogram row: VALUE,WEIGHT (a point
 *                        mass) or LO,HI,WEIGHT (weight spread uniformly over
 *                        [LO, HI]); rows may mix these two forms. Weights are
 *                        >= 0 and not all 0. Limits: DIST_EMPIRICAL_MAX_LINES
 *                        lines of at most DIST_EMPIRICAL_MAX_LINE bytes.
 *
 * Error messages name what was wrong and, for files, the file and line:
 *   "normal: expected MEAN,SD (e.g. normal:512,64), got '512'"
 *   "lens.txt: line 3: expected a number, got 'abc'"
 */
#ifndef TS_BASE_DIST_H
#define TS_BASE_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "rng.h"

#define DIST_EMPIRICAL_MAX_LINES 1000000
#define DIST_EMPIRICAL_MAX_LINE  4096

enum dist_kind {
    DIST_FIXED = 0,
    DIST_UNIFORM,
    DIST_NORMAL,
    DIST_TRUNCNORMAL,
    DIST_LOGNORMAL,
    DIST_EXPONENTIAL,
    DIST_GAMMA,
    DIST_EMPIRICAL,
};

struct dist {
    enum dist_kind kind;
    union {
        struct {
            double value;
        } fixed;
        struct {
            double lo, hi;
        } uniform;
        struct {
            double mean, sd;
        } normal;
        struct {
            double mean, sd, lo, hi;
        } truncnormal;
        struct {
            double mean, sigma;
            double mu; /* derived: ln(mean) - sigma^2/2 */
        } lognormal;
        struct {
            double mean;
        } exponential;
        struct {
            double shape, scale;
        } gamma;
        struct {
            /* Samples: x = the sorted samples, lo = hi = cum = NULL.
             * Histogram: bins [lo[i], hi[i]] sorted by lo, cum[i] = sum of the
             * weights of bins 0..i (zero-weight bins dropped); x = NULL and
             * lo owns one block holding lo, hi and cum. */
            double *x;
            double *lo, *hi, *cum;
            size_t n;
            double mean;  /* of the fitted distribution */
            char *source; /* owned copy of the name it came from, or NULL */
        } empirical;
    };
};

/*
 * Constructors. Each returns 0, or -EINVAL when a parameter is not finite or
 * breaks the constraint listed above for its spec (then *d is fixed:0).
 */
TS_MUST_CHECK int dist_init_fixed(struct dist *d, double value);
TS_MUST_CHECK int dist_init_uniform(struct dist *d, double lo, double hi);
TS_MUST_CHECK int dist_init_normal(struct dist *d, double mean, double sd);
TS_MUST_CHECK int dist_init_truncnormal(struct dist *d, double mean, double sd, double lo,
                                        double hi);
TS_MUST_CHECK int dist_init_lognormal(struct dist *d, double mean, double sigma);
TS_MUST_CHECK int dist_init_exponential(struct dist *d, double mean);
TS_MUST_CHECK int dist_init_gamma(struct dist *d, double shape, double scale);

/*
 * Empirical distribution fitted from n >= 1 finite samples (copied; the
 * caller keeps x). Returns 0, -EINVAL or -ENOMEM.
 */
TS_MUST_CHECK int dist_init_empirical_samples(struct dist *d, const double *x, size_t n);

/*
 * Empirical distribution from a histogram of n rows: weight w[i] >= 0 spread
 * uniformly over [lo[i], hi[i]], or a point mass at lo[i] when hi is NULL or
 * hi[i] == lo[i]. All finite, lo[i] <= hi[i], sum of weights finite and > 0.
 * The arrays are copied. Returns 0, -EINVAL or -ENOMEM.
 */
TS_MUST_CHECK int dist_init_empirical_hist(struct dist *d, const double *lo, const double *hi,
                                           const double *w, size_t n);

/*
 * Parses a spec (see the top of this file) into *d. Returns 0, or -EINVAL
 * with a message in err (when err is not NULL and errlen > 0; truncated to
 * errlen), -ENOMEM, or -EIO when reading FILE fails midway. A file that cannot
 * be opened is -EINVAL ("empirical: cannot open 'x': No such file or
 * directory"). "empirical:FILE" reads FILE now (blocking file I/O: call this
 * while setting up, not on a loop thread). On error *d is fixed:0 and owns
 * nothing; on success with empirical, release it.
 */
TS_MUST_CHECK int dist_parse(struct dist *d, const char *spec, char *err, size_t errlen);

/*
 * Fits an empirical distribution from the text of an empirical file held in
 * memory (len bytes, need not be NUL-terminated; a NUL byte inside is an
 * error). name is used in error messages and kept as the source (may be NULL:
 * "<memory>"). Same format, limits and returns as dist_parse.
 */
TS_MUST_CHECK int dist_parse_empirical_text(struct dist *d, const char *text, size_t len,
                                            const char *name, char *err, size_t errlen);

/* Reads an empirical file; the same as dist_parse(d, "empirical:" path). */
TS_MUST_CHECK int dist_load_empirical(struct dist *d, const char *path, char *err, size_t errlen);

/*
 * Draws one value. Never loops unboundedly: the rejection samplers
 * (truncated normal, gamma) give up after 1000 rejections in a row, which
 * has a probability below 1e-290, and then return a fixed central value.
 * Results of truncnormal and uniform always lie in [LO, HI]. A normal can
 * return any real number; values are finite unless the parameters are huge
 * (normal:1e308,1e308 can overflow to +-inf).
 */
double dist_sample(const struct dist *d, struct rng *r);

/*
 * Draws an integer for counts such as token lengths: the sample rounded to
 * the nearest integer (halves up) and clamped to [min, max] (min > max is
 * treated as min == max == min). A NaN sample gives min. For uniform the
 * draw is a uniform integer in [ceil(LO), floor(HI)] intersected with
 * [min, max] (each integer equally likely) when that set is not empty.
 */
uint64_t dist_sample_uint(const struct dist *d, struct rng *r, uint64_t min, uint64_t max);

/*
 * The mean of the distribution: exact for every kind (for truncnormal by
 * numeric integration, relative error < 1e-9; for empirical the mean of the
 * fitted distribution, which for samples is the mean of the piecewise-linear
 * inverse CDF, not exactly the sample mean).
 */
double dist_mean(const struct dist *d);

/*
 * Writes the canonical spec of d ("normal:512,64"; numbers printed with the
 * fewest digits that read back exactly) into buf, NUL-terminated and
 * truncated to n bytes, and returns buf. An empirical distribution prints as
 * "empirical:SOURCE", or "empirical:<N samples>" / "<N bins>" without one.
 */
char *dist_format(const struct dist *d, char *buf, size_t n);

/* Frees what d owns and makes it fixed:0. NULL is a no-op. */
void dist_release(struct dist *d);

/* A standard normal variate (Box-Muller, one cosine branch; |z| < 8.6). */
double dist_normal01(struct rng *r);

/* A unit-mean exponential variate, -ln(1 - U); finite, in [0, 36.8]. */
double dist_exp1(struct rng *r);

#endif
