#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/dist.h"

#define N_SAMPLES 200000

struct moments {
    double mean, var, min, max;
};

static struct moments sample_moments(const struct dist *d, uint64_t seed, int n)
{
    struct rng r;
    rng_seed(&r, seed);
    struct moments m = {0, 0, INFINITY, -INFINITY};
    double sum = 0, sumsq = 0;
    for (int i = 0; i < n; i++) {
        double x = dist_sample(d, &r);
        sum += x;
        sumsq += x * x;
        m.min = fmin(m.min, x);
        m.max = fmax(m.max, x);
    }
    m.mean = sum / n;
    m.var = sumsq / n - m.mean * m.mean;
    return m;
}

static void assert_close(double got, double want, double tol, const char *what)
{
    if (!(fabs(got - want) <= tol))
        fail_msg("%s: got %.10g, want %.10g +- %.3g", what, got, want, tol);
}

/* ---- parsing ------------------------------------------------------------ */

static void test_parse_good(void **state)
{
    static const struct {
        const char *spec;
        enum dist_kind kind;
        double p[4];
        const char *canon;
    } cases[] = {
        {"fixed:128", DIST_FIXED, {128}, "fixed:128"},
        {"128", DIST_FIXED, {128}, "fixed:128"},
        {" 2.5 ", DIST_FIXED, {2.5}, "fixed:2.5"},
        {"uniform:100-200", DIST_UNIFORM, {100, 200}, "uniform:100-200"},
        {"uniform:100,200", DIST_UNIFORM, {100, 200}, "uniform:100-200"},
        {"UNIFORM: 100 - 200", DIST_UNIFORM, {100, 200}, "uniform:100-200"},
        {"uniform:-5--1", DIST_UNIFORM, {-5, -1}, "uniform:-5--1"},
        {"uniform:7-7", DIST_UNIFORM, {7, 7}, "uniform:7-7"},
        {"normal:512,64", DIST_NORMAL, {512, 64}, "normal:512,64"},
        {"normal:0.1,0", DIST_NORMAL, {0.1, 0}, "normal:0.1,0"},
        {"truncnormal:512,64,1,1024",
         DIST_TRUNCNORMAL,
         {512, 64, 1, 1024},
         "truncnormal:512,64,1,1024"},
        {"lognormal:512,0.6", DIST_LOGNORMAL, {512, 0.6}, "lognormal:512,0.6"},
        {"exponential:2.5", DIST_EXPONENTIAL, {2.5}, "exponential:2.5"},
        {"exp:1e-3", DIST_EXPONENTIAL, {1e-3}, "exponential:0.001"},
        {"gamma:2,0.5", DIST_GAMMA, {2, 0.5}, "gamma:2,0.5"},
    };
    char err[256], buf[128];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct dist d;
        err[0] = '\0';
        int rc = dist_parse(&d, cases[i].spec, err, sizeof(err));
        if (rc != 0)
            fail_msg("'%s': rc %d: %s", cases[i].spec, rc, err);
        assert_int_equal(d.kind, cases[i].kind);
        const double *p = cases[i].p;
        switch (d.kind) {
        case DIST_FIXED:
            assert_true(d.fixed.value == p[0]);
            break;
        case DIST_UNIFORM:
            assert_true(d.uniform.lo == p[0] && d.uniform.hi == p[1]);
            break;
        case DIST_NORMAL:
            assert_true(d.normal.mean == p[0] && d.normal.sd == p[1]);
            break;
        case DIST_TRUNCNORMAL:
            assert_true(d.truncnormal.mean == p[0] && d.truncnormal.sd == p[1] &&
                        d.truncnormal.lo == p[2] && d.truncnormal.hi == p[3]);
            break;
        case DIST_LOGNORMAL:
            assert_true(d.lognormal.mean == p[0] && d.lognormal.sigma == p[1]);
            assert_close(d.lognormal.mu, log(512) - 0.18, 1e-12, "lognormal mu");
            break;
        case DIST_EXPONENTIAL:
            assert_true(d.exponential.mean == p[0]);
            break;
        case DIST_GAMMA:
            assert_true(d.gamma.shape == p[0] && d.gamma.scale == p[1]);
            break;
        default:
            fail();
        }
        assert_string_equal(dist_format(&d, buf, sizeof(buf)), cases[i].canon);
        /* The canonical form parses back to the same distribution. */
        struct dist again;
        assert_int_equal(dist_parse(&again, buf, err, sizeof(err)), 0);
        assert_memory_equal(&again, &d, sizeof(d));
        dist_release(&d);
    }
}

static void test_format_shortest_roundtrip(void **state)
{
    struct dist d;
    char buf[128], err[128];
    assert_int_equal(dist_init_normal(&d, 0.1 + 0.2, 1.0 / 3.0), 0);
    assert_string_equal(dist_format(&d, buf, sizeof(buf)),
                        "normal:0.30000000000000004,0.3333333333333333");
    struct dist back;
    assert_int_equal(dist_parse(&back, buf, err, sizeof(err)), 0);
    assert_true(back.normal.mean == d.normal.mean && back.normal.sd == d.normal.sd);
    char small[8];
    assert_string_equal(dist_format(&d, small, sizeof(small)), "normal:");
}

static void test_parse_bad(void **state)
{
    static const struct {
        const char *spec;
        const char *msg; /* exact message, or NULL to only require -EINVAL */
    } cases[] = {
        {"", "empty distribution spec"},
        {NULL, "empty distribution spec"},
        {"   ", "empty distribution spec"},
        {"foo:1", "unknown distribution 'foo' (expected fixed, uniform, normal, truncnormal, "
                  "lognormal, exponential, gamma, empirical or a number)"},
        {"abc", "unknown distribution 'abc' (expected fixed, uniform, normal, truncnormal, "
                "lognormal, exponential, gamma, empirical or a number)"},
        {"normal:512", "normal: expected MEAN,SD (e.g. normal:512,64), got '512'"},
        {"normal", "normal: expected MEAN,SD (e.g. normal:512,64), got ''"},
        {"normal:512,-1", "normal: SD must be >= 0 (got -1)"},
        {"normal:512,64,3", "normal: expected MEAN,SD (e.g. normal:512,64), got '512,64,3'"},
        {"uniform:200-100", "uniform: LO must be <= HI (got 200 > 100)"},
        {"uniform:1", "uniform: expected LO-HI (e.g. uniform:100-200), got '1'"},
        {"lognormal:0,0.5", "lognormal: MEAN must be > 0 (got 0)"},
        {"lognormal:512,-0.5", "lognormal: SIGMA must be >= 0 (got -0.5)"},
        {"exponential:0", "exponential: MEAN must be > 0 (got 0)"},
        {"gamma:0,1", "gamma: SHAPE and SCALE must be > 0 (got 0, 1)"},
        {"truncnormal:1,1,5,4", "truncnormal: LO must be <= HI (got 5 > 4)"},
        {"fixed:abc", "fixed: expected V (e.g. fixed:128), got 'abc'"},
        {"empirical", "empirical: expected a file name (e.g. empirical:lengths.txt)"},
        {"empirical:", "empirical: expected a file name (e.g. empirical:lengths.txt)"},
        {"empirical:/nonexistent/x.txt",
         "empirical: cannot open '/nonexistent/x.txt': No such file or directory"},
        {"fixed:inf", NULL},
        {"fixed:nan", NULL},
        {"fixed:1e999", NULL},
        {"normal:1,,2", NULL},
        {"normal:1;2", NULL},
        {"fixed:0x10", NULL},
        {"128abc", NULL},
        {"lognormal:1,1e200", "lognormal: parameters out of range"},
    };
    char err[256];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct dist d;
        memset(&d, 0x5a, sizeof(d));
        strcpy(err, "untouched");
        int rc = dist_parse(&d, cases[i].spec, err, sizeof(err));
        if (rc != -EINVAL)
            fail_msg("'%s' gave %d", cases[i].spec ? cases[i].spec : "(null)", rc);
        if (cases[i].msg && strcmp(err, cases[i].msg) != 0)
            fail_msg("'%s': message '%s', want '%s'", cases[i].spec, err, cases[i].msg);
        if (!cases[i].msg && strcmp(err, "untouched") == 0)
            fail_msg("'%s': no message", cases[i].spec);
        assert_int_equal(d.kind, DIST_FIXED); /* left empty, safe to release */
        assert_true(d.fixed.value == 0.0);
        dist_release(&d);
    }
    /* A NULL or short error buffer is fine. */
    struct dist d;
    assert_int_equal(dist_parse(&d, "nope", NULL, 0), -EINVAL);
    char tiny[5];
    assert_int_equal(dist_parse(&d, "nope", tiny, sizeof(tiny)), -EINVAL);
    assert_string_equal(tiny, "unkn");
}

static void test_init_rejects(void **state)
{
    struct dist d;
    assert_int_equal(dist_init_fixed(&d, NAN), -EINVAL);
    assert_int_equal(dist_init_uniform(&d, 2, 1), -EINVAL);
    assert_int_equal(dist_init_normal(&d, 0, -1), -EINVAL);
    assert_int_equal(dist_init_normal(&d, INFINITY, 1), -EINVAL);
    assert_int_equal(dist_init_truncnormal(&d, 0, 1, 1, 0), -EINVAL);
    assert_int_equal(dist_init_lognormal(&d, -1, 1), -EINVAL);
    assert_int_equal(dist_init_exponential(&d, 0), -EINVAL);
    assert_int_equal(dist_init_gamma(&d, 1, 0), -EINVAL);
    double x[] = {1, NAN};
    assert_int_equal(dist_init_empirical_samples(&d, x, 2), -EINVAL);
    assert_int_equal(dist_init_empirical_samples(&d, x, 0), -EINVAL);
    double lo[] = {1, 2}, w[] = {0, 0}, wneg[] = {1, -1}, hi[] = {0, 3};
    assert_int_equal(dist_init_empirical_hist(&d, lo, NULL, w, 2), -EINVAL);
    assert_int_equal(dist_init_empirical_hist(&d, lo, NULL, wneg, 2), -EINVAL);
    assert_int_equal(dist_init_empirical_hist(&d, lo, hi, (double[]){1, 1}, 2), -EINVAL);
    assert_int_equal(d.kind, DIST_FIXED);
}

/* ---- sampling statistics ------------------------------------------------ */

static void test_fixed_and_uniform(void **state)
{
    struct dist d;
    assert_int_equal(dist_init_fixed(&d, 42.5), 0);
    struct moments m = sample_moments(&d, 1, 1000);
    assert_true(m.min == 42.5 && m.max == 42.5);
    assert_true(dist_mean(&d) == 42.5);

    assert_int_equal(dist_init_uniform(&d, 100, 200), 0);
    m = sample_moments(&d, 2, N_SAMPLES);
    /* sd of the mean 0.065; of the variance ~1.3 */
    assert_close(m.mean, 150, 0.33, "uniform mean");
    assert_close(m.var, 10000.0 / 12, 7, "uniform var");
    assert_true(m.min >= 100 && m.max <= 200);
    assert_true(m.min < 100.01 && m.max > 199.99);
    assert_true(dist_mean(&d) == 150);
}

static void test_normal(void **state)
{
    struct dist d;
    assert_int_equal(dist_init_normal(&d, 512, 64), 0);
    struct moments m = sample_moments(&d, 3, N_SAMPLES);
    /* sd of the mean 0.143, of the variance 4096*sqrt(2/n) = 13 */
    assert_close(m.mean, 512, 0.72, "normal mean");
    assert_close(m.var, 4096, 65, "normal var");
    assert_true(dist_mean(&d) == 512);

    /* Fraction within one sd: 0.6827 (sd 0.001). */
    struct rng r;
    rng_seed(&r, 4);
    int in = 0;
    for (int i = 0; i < N_SAMPLES; i++)
        in += fabs(dist_sample(&d, &r) - 512) < 64;
    assert_close((double)in / N_SAMPLES, 0.682689, 0.005, "normal within 1 sd");
}

static void test_lognormal(void **state)
{
    struct dist d;
    assert_int_equal(dist_init_lognormal(&d, 512, 0.6), 0);
    struct moments m = sample_moments(&d, 5, N_SAMPLES);
    double var = (exp(0.36) - 1) * 512.0 * 512.0;     /* 113588, sd 337 */
    assert_close(m.mean, 512, 3.8, "lognormal mean"); /* 5 sd of the mean */
    assert_close(m.var / var, 1.0, 0.04, "lognormal var ratio");
    assert_true(m.min > 0);
    assert_true(dist_mean(&d) == 512);

    /* The median is mean * exp(-sigma^2/2) = 427.66. */
    struct rng r;
    rng_seed(&r, 6);
    int below = 0;
    for (int i = 0; i < N_SAMPLES; i++)
        below += dist_sample(&d, &r) < 512.0 * exp(-0.18);
    assert_close((double)below / N_SAMPLES, 0.5, 0.0056, "lognormal median");
}

static void test_exponential(void **state)
{
    struct dist d;
    assert_int_equal(dist_init_exponential(&d, 2.5), 0);
    struct moments m = sample_moments(&d, 7, N_SAMPLES);
    assert_close(m.mean, 2.5, 0.028, "exp mean"); /* sd 0.0056 */
    assert_close(m.var / 6.25, 1.0, 0.025, "exp var ratio");
    assert_true(m.min >= 0);
    assert_true(dist_mean(&d) == 2.5);
}

static void test_gamma(void **state)
{
    static const struct {
        double shape, scale;
    } cases[] = {{2, 0.5}, {0.3, 2}, {50, 0.1}, {1, 3}, {0.05, 1}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct dist d;
        double k = cases[i].shape, th = cases[i].scale;
        assert_int_equal(dist_init_gamma(&d, k, th), 0);
        struct moments m = sample_moments(&d, 8 + i, N_SAMPLES);
        double mean = k * th, var = k * th * th;
        /* sd of the mean: sqrt(var/n); of the variance: var*sqrt((2 + 6/k)/n). */
        double tol_mean = 5 * sqrt(var / N_SAMPLES);
        double tol_var = 5 * var * sqrt((2 + 6 / k) / N_SAMPLES);
        char what[64];
        snprintf(what, sizeof(what), "gamma(%g,%g) mean", k, th);
        assert_close(m.mean, mean, tol_mean, what);
        snprintf(what, sizeof(what), "gamma(%g,%g) var", k, th);
        assert_close(m.var, var, tol_var, what);
        assert_true(m.min >= 0);
        assert_true(dist_mean(&d) == mean);
    }
}

/* Closed-form truncated normal moments (fine away from the far tails). */
static void truncnormal_exact(double mu, double sd, double lo, double hi, double *mean, double *var)
{
    double a = (lo - mu) / sd, b = (hi - mu) / sd;
    double pa = exp(-0.5 * a * a) / sqrt(2 * M_PI), pb = exp(-0.5 * b * b) / sqrt(2 * M_PI);
    double z = a > 0 ? 0.5 * (erfc(a / M_SQRT2) - erfc(b / M_SQRT2))
                     : 0.5 * (erfc(-b / M_SQRT2) - erfc(-a / M_SQRT2));
    double h = (pa - pb) / z;
    *mean = mu + sd * h;
    *var = sd * sd * (1 + (a * pa - b * pb) / z - h * h);
}

static void test_truncnormal(void **state)
{
    static const struct {
        double mu, sd, lo, hi;
    } cases[] = {
        {512, 64, 400, 600},   /* central */
        {512, 64, 500, 524},   /* narrow, uniform proposal */
        {0, 1, 2, 10},         /* upper tail */
        {0, 1, 8, 9},          /* far upper tail */
        {0, 1, -9, -8},        /* far lower tail */
        {10, 2, -100, 100},    /* hardly truncated */
        {0, 1, 0, 1e6},        /* half-normal */
        {5, 1, 0, 4.9},        /* mean outside on the right: tail on the other side */
        {1, 1, -0.001, 0.001}, /* tiny, off-centre */
        {0, 1, -1, 1.2},       /* straddles 0, narrower than 2.5: uniform proposal */
        {3, 2, 2, 6.8},        /* the same shape, shifted and scaled */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct dist d;
        assert_int_equal(
            dist_init_truncnormal(&d, cases[i].mu, cases[i].sd, cases[i].lo, cases[i].hi), 0);
        double mean, var;
        truncnormal_exact(cases[i].mu, cases[i].sd, cases[i].lo, cases[i].hi, &mean, &var);
        struct moments m = sample_moments(&d, 20 + i, N_SAMPLES);
        char what[96];
        snprintf(what, sizeof(what), "truncnormal(%g,%g,%g,%g)", cases[i].mu, cases[i].sd,
                 cases[i].lo, cases[i].hi);
        if (m.min < cases[i].lo || m.max > cases[i].hi)
            fail_msg("%s: out of bounds [%g, %g]", what, m.min, m.max);
        assert_close(m.mean, mean, 5 * sqrt(var / N_SAMPLES) + 1e-12, what);
        assert_close(m.var / var, 1.0, 0.03, what);
        /* dist_mean integrates numerically; compare with the closed form. */
        assert_close(dist_mean(&d), mean, 1e-9 * (fabs(mean) + cases[i].sd), what);
    }
}

static void test_truncnormal_extremes(void **state)
{
    struct dist d;
    struct rng r;
    rng_seed(&r, 99);
    /* 50 sd below the mean: the mass hugs hi; E = hi - 1/50 (1 - 2/2500 ...). */
    assert_int_equal(dist_init_truncnormal(&d, 100, 1, 0, 50), 0);
    double sum = 0;
    for (int i = 0; i < 20000; i++) {
        double x = dist_sample(&d, &r);
        assert_true(x >= 0 && x <= 50);
        sum += x;
    }
    double expect = 50 - (1.0 / 50) * (1 - 2.0 / 2500);
    assert_close(dist_mean(&d), expect, 1e-5, "far tail mean");
    assert_close(sum / 20000, expect, 0.001, "far tail sample mean");

    /* 1e5 sd away: the exponential limit; never loops, stays in bounds. */
    assert_int_equal(dist_init_truncnormal(&d, 0, 1e-5, 1, 2), 0);
    for (int i = 0; i < 1000; i++) {
        double x = dist_sample(&d, &r);
        assert_true(x >= 1 && x < 1 + 1e-8);
    }
    assert_close(dist_mean(&d), 1 + 1e-10, 1e-14, "1e5 sd mean");

    /* Degenerate cases. */
    assert_int_equal(dist_init_truncnormal(&d, 3, 0, 0, 2), 0);
    assert_true(dist_sample(&d, &r) == 2 && dist_mean(&d) == 2);
    assert_int_equal(dist_init_truncnormal(&d, 3, 5, 1, 1), 0);
    assert_true(dist_sample(&d, &r) == 1 && dist_mean(&d) == 1);
    assert_int_equal(dist_init_truncnormal(&d, 0, 1e-300, 1e300, 1.5e300), 0);
    assert_true(dist_sample(&d, &r) == 1e300);
    assert_int_equal(dist_init_truncnormal(&d, -1e308, 1, -1e308, 1e308), 0);
    double x = dist_sample(&d, &r);
    assert_true(x >= -1e308 && x <= 1e308);
}

static void test_uniform_overflow_safe(void **state)
{
    struct dist d;
    struct rng r;
    rng_seed(&r, 5);
    assert_int_equal(dist_init_uniform(&d, -1e308, 1e308), 0);
    for (int i = 0; i < 1000; i++)
        assert_true(isfinite(dist_sample(&d, &r)));
}

/* ---- empirical ---------------------------------------------------------- */

static void test_empirical_samples_interpolate(void **state)
{
    /* Samples 0, 10, 20, 30 (given unsorted): the fitted inverse CDF is
     * linear from 0 to 30, i.e. uniform on [0, 30]. */
    double x[] = {30, 0, 20, 10};
    struct dist d;
    assert_int_equal(dist_init_empirical_samples(&d, x, 4), 0);
    assert_true(d.empirical.x[0] == 0 && d.empirical.x[3] == 30);
    assert_close(dist_mean(&d), 15, 1e-12, "mean");
    struct moments m = sample_moments(&d, 30, N_SAMPLES);
    assert_close(m.mean, 15, 0.1, "interp mean");
    assert_close(m.var, 900.0 / 12, 1.2, "interp var");
    assert_true(m.min >= 0 && m.max <= 30);
    char buf[64];
    assert_string_equal(dist_format(&d, buf, sizeof(buf)), "empirical:<4 samples>");
    dist_release(&d);
    assert_int_equal(d.kind, DIST_FIXED);
    dist_release(&d); /* twice is harmless */
    dist_release(NULL);

    /* Uneven samples: mean of the piecewise-linear fit, not the sample mean. */
    double y[] = {0, 1, 10};
    assert_int_equal(dist_init_empirical_samples(&d, y, 3), 0);
    assert_close(dist_mean(&d), (0.5 + 5.5) / 2, 1e-12, "uneven mean");
    dist_release(&d);

    double one = 7;
    assert_int_equal(dist_init_empirical_samples(&d, &one, 1), 0);
    struct rng r;
    rng_seed(&r, 1);
    assert_true(dist_sample(&d, &r) == 7 && dist_mean(&d) == 7);
    dist_release(&d);
}

/* Chi-square of observed bucket counts against expected probabilities. */
static double chi_square(const long *obs, const double *p, int k, long n)
{
    double chi = 0;
    for (int i = 0; i < k; i++) {
        double e = p[i] * n;
        chi += (obs[i] - e) * (obs[i] - e) / e;
    }
    return chi;
}

static void test_empirical_points(void **state)
{
    double v[] = {512, 128, 1024, 256, 4096};
    double w[] = {4, 1, 2, 2, 0}; /* a zero weight is dropped */
    struct dist d;
    assert_int_equal(dist_init_empirical_hist(&d, v, NULL, w, 5), 0);
    assert_int_equal(d.empirical.n, 4);
    assert_close(dist_mean(&d), (512 * 4 + 128 + 1024 * 2 + 256 * 2) / 9.0, 1e-9, "points mean");
    struct rng r;
    rng_seed(&r, 31);
    long obs[4] = {0};
    const double vals[4] = {128, 256, 512, 1024}, p[4] = {1 / 9.0, 2 / 9.0, 4 / 9.0, 2 / 9.0};
    for (long i = 0; i < N_SAMPLES; i++) {
        uint64_t x = dist_sample_uint(&d, &r, 0, 100000);
        int k;
        for (k = 0; k < 4 && vals[k] != (double)x; k++)
            ;
        if (k == 4)
            fail_msg("value %llu is not one of the points", (unsigned long long)x);
        obs[k]++;
    }
    /* 3 degrees of freedom: 99.99th percentile 21.1 */
    assert_true(chi_square(obs, p, 4, N_SAMPLES) < 21.1);
    dist_release(&d);
}

static void test_empirical_bins(void **state)
{
    /* Two bins: [0, 10) weight 1, [10, 30) weight 3: density 0.025 then 0.0375. */
    double lo[] = {10, 0}, hi[] = {30, 10}, w[] = {3, 1};
    struct dist d;
    assert_int_equal(dist_init_empirical_hist(&d, lo, hi, w, 2), 0);
    assert_close(dist_mean(&d), (5 * 1 + 20 * 3) / 4.0, 1e-12, "bins mean");
    struct rng r;
    rng_seed(&r, 32);
    long obs[6] = {0}; /* 5-wide buckets over [0, 30) */
    for (long i = 0; i < N_SAMPLES; i++) {
        double x = dist_sample(&d, &r);
        assert_true(x >= 0 && x <= 30);
        int k = (int)(x / 5);
        obs[k > 5 ? 5 : k]++;
    }
    const double p[6] = {0.125, 0.125, 0.1875, 0.1875, 0.1875, 0.1875};
    assert_true(chi_square(obs, p, 6, N_SAMPLES) < 25.7); /* 5 dof, 99.99% */
    dist_release(&d);
}

static void test_empirical_fit_reproduces_histogram(void **state)
{
    /* Draw 100k samples from a histogram, fit an empirical distribution to
     * them, draw again from the fit: the bin frequencies come back. */
    double lo[] = {0, 100, 200, 400}, hi[] = {100, 200, 400, 1000}, w[] = {1, 5, 3, 1};
    struct dist src;
    assert_int_equal(dist_init_empirical_hist(&src, lo, hi, w, 4), 0);
    const size_t n = 100000;
    double *xs = ts_malloc(n * sizeof(double));
    assert_non_null(xs);
    struct rng r;
    rng_seed(&r, 33);
    for (size_t i = 0; i < n; i++)
        xs[i] = dist_sample(&src, &r);
    struct dist fit;
    assert_int_equal(dist_init_empirical_samples(&fit, xs, n), 0);
    ts_free(xs);
    long obs[4] = {0};
    const long m = N_SAMPLES;
    for (long i = 0; i < m; i++) {
        double x = dist_sample(&fit, &r);
        int k = x < 100 ? 0 : x < 200 ? 1 : x < 400 ? 2 : 3;
        obs[k]++;
    }
    const double p[4] = {0.1, 0.5, 0.3, 0.1};
    for (int k = 0; k < 4; k++) {
        /* Two sampling stages: sd about sqrt(p(1-p)(1/n + 1/m)) <= 0.0019. */
        assert_close((double)obs[k] / m, p[k], 0.01, "fitted bin frequency");
    }
    assert_close(dist_mean(&fit), dist_mean(&src), 3.0, "fitted mean"); /* src mean 250 */
    dist_release(&fit);
    dist_release(&src);
}

static void test_empirical_text_formats(void **state)
{
    char err[256], buf[128];
    struct dist d;

    const char *samples = "# prompt lengths\n"
                          "10\n"
                          "\n"
                          "  30   # trailing comment\r\n"
                          "20";
    assert_int_equal(
        dist_parse_empirical_text(&d, samples, strlen(samples), "lens", err, sizeof(err)), 0);
    assert_non_null(d.empirical.x);
    assert_int_equal(d.empirical.n, 3);
    assert_true(d.empirical.x[0] == 10 && d.empirical.x[1] == 20 && d.empirical.x[2] == 30);
    assert_string_equal(dist_format(&d, buf, sizeof(buf)), "empirical:lens");
    dist_release(&d);

    const char *hist = "128,1\n"
                       "256 3\n"
                       "512 , 1024 ,\t4\n"
                       "2048,0\n";
    assert_int_equal(dist_parse_empirical_text(&d, hist, strlen(hist), NULL, err, sizeof(err)), 0);
    assert_null(d.empirical.x);
    assert_int_equal(d.empirical.n, 3);
    assert_true(d.empirical.lo[2] == 512 && d.empirical.hi[2] == 1024);
    assert_true(d.empirical.cum[2] == 8);
    assert_close(dist_mean(&d), (128 + 256 * 3 + 768 * 4) / 8.0, 1e-9, "text hist mean");
    assert_string_equal(dist_format(&d, buf, sizeof(buf)), "empirical:<memory>");
    dist_release(&d);
}

static void test_empirical_text_errors(void **state)
{
    static const struct {
        const char *text;
        const char *msg;
    } cases[] = {
        {"1\n2\nabc\n", "f: line 3: expected a number, got 'abc'"},
        {"1\n2,3\n", "f: line 2: a histogram row, but line 1 was one number (a file holds "
                     "either samples or a histogram)"},
        {"# c\n5,1\n7\n", "f: line 3: one number, but line 2 was a histogram row (a file holds "
                          "either samples or a histogram)"},
        {"1,2,3,4\n", "f: line 1: too many fields (at most 3: LO,HI,WEIGHT)"},
        {"5,-1\n", "f: line 1: weights must be >= 0"},
        {"9,3,1\n", "f: line 1: LO must be <= HI"},
        {"", "f: no values"},
        {"# only\n\n   \n", "f: no values"},
        {"5,0\n6,0\n", "f: all weights are 0"},
        {"1e308,1e308\n1,1e308\n", "f: the weights sum to infinity"},
        {"1,\n", "f: line 1: expected a number, got ''"},
        {"1x\n", "f: line 1: expected ',' or a blank after a number, got 'x'"},
        {"inf\n", "f: line 1: expected a number, got 'inf'"},
    };
    char err[256];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct dist d;
        int rc = dist_parse_empirical_text(&d, cases[i].text, strlen(cases[i].text), "f", err,
                                           sizeof(err));
        if (rc != -EINVAL || strcmp(err, cases[i].msg) != 0)
            fail_msg("case %zu: rc %d, '%s', want '%s'", i, rc, err, cases[i].msg);
        assert_int_equal(d.kind, DIST_FIXED);
    }

    struct dist d;
    const char nul[] = "1\n2\0\n3\n";
    assert_int_equal(dist_parse_empirical_text(&d, nul, sizeof(nul) - 1, "f", err, sizeof(err)),
                     -EINVAL);
    assert_string_equal(err, "f: line 2: contains a NUL byte");

    /* A line of exactly DIST_EMPIRICAL_MAX_LINE bytes is fine, one more is not. */
    size_t len = DIST_EMPIRICAL_MAX_LINE + 8;
    char *text = ts_malloc(len);
    assert_non_null(text);
    memset(text, ' ', len);
    memcpy(text, "1\n", 2);
    text[2 + DIST_EMPIRICAL_MAX_LINE - 1] = '5';
    text[2 + DIST_EMPIRICAL_MAX_LINE] = '\n';
    assert_int_equal(
        dist_parse_empirical_text(&d, text, 3 + DIST_EMPIRICAL_MAX_LINE, "f", err, sizeof(err)), 0);
    assert_int_equal(d.empirical.n, 2);
    dist_release(&d);
    text[2 + DIST_EMPIRICAL_MAX_LINE] = '6';
    text[3 + DIST_EMPIRICAL_MAX_LINE] = '\n';
    assert_int_equal(
        dist_parse_empirical_text(&d, text, 4 + DIST_EMPIRICAL_MAX_LINE, "f", err, sizeof(err)),
        -EINVAL);
    assert_string_equal(err, "f: line 2: longer than 4096 bytes");
    ts_free(text);
}

static void test_empirical_line_limit(void **state)
{
    size_t lines = DIST_EMPIRICAL_MAX_LINES;
    char *text = ts_malloc(2 * (lines + 1));
    assert_non_null(text);
    for (size_t i = 0; i < lines + 1; i++) {
        text[2 * i] = (char)('0' + i % 10);
        text[2 * i + 1] = '\n';
    }
    char err[128];
    struct dist d;
    assert_int_equal(dist_parse_empirical_text(&d, text, 2 * lines, "f", err, sizeof(err)), 0);
    assert_int_equal(d.empirical.n, lines);
    assert_close(dist_mean(&d), 4.5, 1e-3, "1M samples mean");
    dist_release(&d);
    assert_int_equal(dist_parse_empirical_text(&d, text, 2 * (lines + 1), "f", err, sizeof(err)),
                     -EINVAL);
    assert_string_equal(err, "f: more than 1000000 lines");
    ts_free(text);
}

static void test_empirical_file(void **state)
{
    char path[] = "/tmp/tokenstorm-test-dist-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *fp = fdopen(fd, "w");
    assert_non_null(fp);
    fputs("# value,weight\n100,1\n200,3\n", fp);
    assert_int_equal(fclose(fp), 0);

    char spec[128], err[256], buf[128];
    snprintf(spec, sizeof(spec), "empirical:%s", path);
    struct dist d;
    assert_int_equal(dist_parse(&d, spec, err, sizeof(err)), 0);
    assert_int_equal(d.kind, DIST_EMPIRICAL);
    assert_close(dist_mean(&d), 175, 1e-12, "file mean");
    assert_string_equal(dist_format(&d, buf, sizeof(buf)), spec);
    dist_release(&d);

    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs("100,1\n200,x\n", fp);
    assert_int_equal(fclose(fp), 0);
    assert_int_equal(dist_parse(&d, spec, err, sizeof(err)), -EINVAL);
    char want[256];
    snprintf(want, sizeof(want), "%s: line 2: expected a number, got 'x'", path);
    assert_string_equal(err, want);
    unlink(path);
}

static void test_empirical_alloc_failure(void **state)
{
    char err[128];
    struct dist d;
    const char *text = "1\n2\n3\n";
    /* Two allocations: the sample array and the source name. */
    for (long n = 0; n < 2; n++) {
        ts_alloc_fail_after(n);
        int rc = dist_parse_empirical_text(&d, text, strlen(text), "f", err, sizeof(err));
        ts_alloc_fail_after(-1);
        assert_int_equal(rc, -ENOMEM);
        assert_string_equal(err, "f: out of memory");
        assert_int_equal(d.kind, DIST_FIXED);
    }
    ts_alloc_fail_after(2);
    assert_int_equal(dist_parse_empirical_text(&d, text, strlen(text), "f", err, sizeof(err)), 0);
    ts_alloc_fail_after(-1);
    dist_release(&d);
    /* Histogram: rows, source name, then the final block. */
    const char *hist = "1,1\n2,1\n";
    for (long n = 0; n < 3; n++) {
        ts_alloc_fail_after(n);
        int rc = dist_parse_empirical_text(&d, hist, strlen(hist), "f", err, sizeof(err));
        ts_alloc_fail_after(-1);
        assert_int_equal(rc, -ENOMEM);
        assert_int_equal(d.kind, DIST_FIXED);
    }
    ts_alloc_fail_after(0);
    double lo[] = {1};
    assert_int_equal(dist_init_empirical_hist(&d, lo, NULL, lo, 1), -ENOMEM);
    assert_int_equal(dist_init_empirical_samples(&d, lo, 1), -ENOMEM);
    ts_alloc_fail_after(-1);
}

/* ---- integers ----------------------------------------------------------- */

static void test_sample_uint(void **state)
{
    struct dist d;
    struct rng r;
    rng_seed(&r, 40);

    assert_int_equal(dist_init_fixed(&d, 127.5), 0);
    assert_int_equal(dist_sample_uint(&d, &r, 0, 1000), 128); /* halves up */
    assert_int_equal(dist_init_fixed(&d, 127.49), 0);
    assert_int_equal(dist_sample_uint(&d, &r, 0, 1000), 127);
    assert_int_equal(dist_sample_uint(&d, &r, 200, 1000), 200); /* clamped up */
    assert_int_equal(dist_sample_uint(&d, &r, 0, 100), 100);    /* clamped down */
    assert_int_equal(dist_sample_uint(&d, &r, 5, 3), 5);        /* min > max: min */
    assert_int_equal(dist_init_fixed(&d, -3), 0);
    assert_int_equal(dist_sample_uint(&d, &r, 1, 10), 1);
    assert_int_equal(dist_init_fixed(&d, 1e300), 0);
    assert_true(dist_sample_uint(&d, &r, 1, UINT64_MAX) == UINT64_MAX);

    /* Integer uniform: each of 1, 2, 3 a third of the time (continuous
     * rounding would give 1 and 3 only a sixth each... not here). */
    assert_int_equal(dist_init_uniform(&d, 1, 3), 0);
    long obs[3] = {0};
    for (long i = 0; i < 90000; i++) {
        uint64_t v = dist_sample_uint(&d, &r, 0, 100);
        assert_true(v >= 1 && v <= 3);
        obs[v - 1]++;
    }
    const double third[3] = {1 / 3.0, 1 / 3.0, 1 / 3.0};
    assert_true(chi_square(obs, third, 3, 90000) < 18.4); /* 2 dof, 99.99% */

    /* Intersected with [min, max]. */
    for (int i = 0; i < 1000; i++) {
        uint64_t v = dist_sample_uint(&d, &r, 2, 100);
        assert_true(v == 2 || v == 3);
    }
    /* Non-integer bounds: uniform:0.5-2.5 gives 1 or 2. */
    assert_int_equal(dist_init_uniform(&d, 0.5, 2.5), 0);
    for (int i = 0; i < 1000; i++) {
        uint64_t v = dist_sample_uint(&d, &r, 0, 100);
        assert_true(v == 1 || v == 2);
    }
    /* No integer in range: falls back to rounding and clamping. */
    assert_int_equal(dist_init_uniform(&d, -5, -1), 0);
    assert_int_equal(dist_sample_uint(&d, &r, 0, 100), 0);
    assert_int_equal(dist_init_uniform(&d, 1.2, 1.4), 0);
    assert_int_equal(dist_sample_uint(&d, &r, 0, 100), 1);
}

static void test_deterministic(void **state)
{
    struct dist d;
    char err[128];
    assert_int_equal(dist_parse(&d, "gamma:0.7,3", err, sizeof(err)), 0);
    struct rng a, b;
    rng_seed(&a, 1234);
    rng_seed(&b, 1234);
    for (int i = 0; i < 1000; i++)
        assert_true(dist_sample(&d, &a) == dist_sample(&d, &b));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_format_shortest_roundtrip),
        cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_init_rejects),
        cmocka_unit_test(test_fixed_and_uniform),
        cmocka_unit_test(test_normal),
        cmocka_unit_test(test_lognormal),
        cmocka_unit_test(test_exponential),
        cmocka_unit_test(test_gamma),
        cmocka_unit_test(test_truncnormal),
        cmocka_unit_test(test_truncnormal_extremes),
        cmocka_unit_test(test_uniform_overflow_safe),
        cmocka_unit_test(test_empirical_samples_interpolate),
        cmocka_unit_test(test_empirical_points),
        cmocka_unit_test(test_empirical_bins),
        cmocka_unit_test(test_empirical_fit_reproduces_histogram),
        cmocka_unit_test(test_empirical_text_formats),
        cmocka_unit_test(test_empirical_text_errors),
        cmocka_unit_test(test_empirical_line_limit),
        cmocka_unit_test(test_empirical_file),
        cmocka_unit_test(test_empirical_alloc_failure),
        cmocka_unit_test(test_sample_uint),
        cmocka_unit_test(test_deterministic),
    };
    return cmocka_run_group_tests_name("dist", tests, NULL, NULL);
}
