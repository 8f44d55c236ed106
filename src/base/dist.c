#include "dist.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "units.h"

#define REJECT_TRIES_MAX 1000

static double clamp(double x, double lo, double hi)
{
    if (x < lo)
        return lo;
    if (x > hi)
        return hi;
    return x;
}

static void dist_reset(struct dist *d)
{
    memset(d, 0, sizeof(*d));
    d->kind = DIST_FIXED;
}

/* ---- constructors ------------------------------------------------------ */

int dist_init_fixed(struct dist *d, double value)
{
    dist_reset(d);
    if (!isfinite(value))
        return -EINVAL;
    d->fixed.value = value;
    return 0;
}

int dist_init_uniform(struct dist *d, double lo, double hi)
{
    dist_reset(d);
    if (!isfinite(lo) || !isfinite(hi) || lo > hi)
        return -EINVAL;
    d->kind = DIST_UNIFORM;
    d->uniform.lo = lo;
    d->uniform.hi = hi;
    return 0;
}

int dist_init_normal(struct dist *d, double mean, double sd)
{
    dist_reset(d);
    if (!isfinite(mean) || !isfinite(sd) || sd < 0)
        return -EINVAL;
    d->kind = DIST_NORMAL;
    d->normal.mean = mean;
    d->normal.sd = sd;
    return 0;
}

int dist_init_truncnormal(struct dist *d, double mean, double sd, double lo, double hi)
{
    dist_reset(d);
    if (!isfinite(mean) || !isfinite(sd) || sd < 0 || !isfinite(lo) || !isfinite(hi) || lo > hi)
        return -EINVAL;
    d->kind = DIST_TRUNCNORMAL;
    d->truncnormal.mean = mean;
    d->truncnormal.sd = sd;
    d->truncnormal.lo = lo;
    d->truncnormal.hi = hi;
    return 0;
}

int dist_init_lognormal(struct dist *d, double mean, double sigma)
{
    dist_reset(d);
    if (!isfinite(mean) || mean <= 0 || !isfinite(sigma) || sigma < 0)
        return -EINVAL;
    double mu = log(mean) - 0.5 * sigma * sigma;
    if (!isfinite(mu))
        return -EINVAL;
    d->kind = DIST_LOGNORMAL;
    d->lognormal.mean = mean;
    d->lognormal.sigma = sigma;
    d->lognormal.mu = mu;
    return 0;
}

int dist_init_exponential(struct dist *d, double mean)
{
    dist_reset(d);
    if (!isfinite(mean) || mean <= 0)
        return -EINVAL;
    d->kind = DIST_EXPONENTIAL;
    d->exponential.mean = mean;
    return 0;
}

int dist_init_gamma(struct dist *d, double shape, double scale)
{
    dist_reset(d);
    if (!isfinite(shape) || shape <= 0 || !isfinite(scale) || scale <= 0)
        return -EINVAL;
    d->kind = DIST_GAMMA;
    d->gamma.shape = shape;
    d->gamma.scale = scale;
    return 0;
}

/* ---- empirical --------------------------------------------------------- */

struct emp_bin {
    double lo, hi, w;
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_bin(const void *a, const void *b)
{
    const struct emp_bin *x = a, *y = b;
    if (x->lo != y->lo)
        return (x->lo > y->lo) - (x->lo < y->lo);
    return (x->hi > y->hi) - (x->hi < y->hi);
}

/* Takes ownership of x[0..n) (finite, n >= 1) and makes d fit it. */
static void emp_take_samples(struct dist *d, double *x, size_t n)
{
    qsort(x, n, sizeof(*x), cmp_double);
    dist_reset(d);
    d->kind = DIST_EMPIRICAL;
    d->empirical.x = x;
    d->empirical.n = n;
    if (n == 1) {
        d->empirical.mean = x[0];
        return;
    }
    /* The inverse CDF is linear between neighbours, each of the n - 1
     * segments carrying probability 1/(n - 1). */
    double sum = 0.0;
    for (size_t i = 0; i + 1 < n; i++)
        sum += 0.5 * x[i] + 0.5 * x[i + 1];
    d->empirical.mean = sum / (double)(n - 1);
}

/*
 * Makes d the histogram of bins[0..n) (validated: finite, lo <= hi, w >= 0,
 * total finite and > 0). Frees bins in every case. Returns 0 or -ENOMEM.
 */
static int emp_take_bins(struct dist *d, struct emp_bin *bins, size_t n)
{
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (bins[i].w > 0)
            bins[kept++] = bins[i];
    }
    qsort(bins, kept, sizeof(*bins), cmp_bin);
    double *block = ts_malloc(3 * kept * sizeof(double));
    if (!block) {
        ts_free(bins);
        return -ENOMEM;
    }
    dist_reset(d);
    d->kind = DIST_EMPIRICAL;
    d->empirical.lo = block;
    d->empirical.hi = block + kept;
    d->empirical.cum = block + 2 * kept;
    d->empirical.n = kept;
    double total = 0.0, moment = 0.0;
    for (size_t i = 0; i < kept; i++) {
        d->empirical.lo[i] = bins[i].lo;
        d->empirical.hi[i] = bins[i].hi;
        total += bins[i].w;
        d->empirical.cum[i] = total;
        moment += bins[i].w * (0.5 * bins[i].lo + 0.5 * bins[i].hi);
    }
    d->empirical.mean = moment / total;
    ts_free(bins);
    return 0;
}

/* Why the rows are not a valid histogram, or NULL; totals only when whole. */
static const char *bins_check(const struct emp_bin *bins, size_t n, bool whole)
{
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(bins[i].lo) || !isfinite(bins[i].hi) || !isfinite(bins[i].w))
            return "values and weights must be finite";
        if (bins[i].lo > bins[i].hi)
            return "LO must be <= HI";
        if (bins[i].w < 0)
            return "weights must be >= 0";
        total += bins[i].w;
    }
    if (!whole)
        return NULL;
    if (!isfinite(total))
        return "the weights sum to infinity";
    if (!(total > 0))
        return "all weights are 0";
    return NULL;
}

int dist_init_empirical_samples(struct dist *d, const double *x, size_t n)
{
    dist_reset(d);
    if (!x || n == 0 || n > SIZE_MAX / sizeof(double))
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i]))
            return -EINVAL;
    }
    double *copy = ts_malloc(n * sizeof(double));
    if (!copy)
        return -ENOMEM;
    memcpy(copy, x, n * sizeof(double));
    emp_take_samples(d, copy, n);
    return 0;
}

int dist_init_empirical_hist(struct dist *d, const double *lo, const double *hi, const double *w,
                             size_t n)
{
    dist_reset(d);
    if (!lo || !w || n == 0 || n > SIZE_MAX / (3 * sizeof(double)))
        return -EINVAL;
    struct emp_bin *bins = ts_malloc(n * sizeof(*bins));
    if (!bins)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        bins[i].lo = lo[i];
        bins[i].hi = hi ? hi[i] : lo[i];
        bins[i].w = w[i];
    }
    if (bins_check(bins, n, true)) {
        ts_free(bins);
        return -EINVAL;
    }
    return emp_take_bins(d, bins, n);
}

/* Where lines come from: a FILE or a memory block. */
struct line_src {
    FILE *fp;
    const char *text;
    size_t len, pos;
};

static int src_getc(struct line_src *src)
{
    if (src->fp)
        return getc(src->fp);
    if (src->pos >= src->len)
        return EOF;
    return (unsigned char)src->text[src->pos++];
}

enum line_status { LINE_EOF, LINE_OK, LINE_TOO_LONG, LINE_NUL };

/* Reads one line (without its '\n' and a '\r' before it) into buf[cap]. */
static enum line_status line_next(struct line_src *src, char *buf, size_t cap)
{
    size_t n = 0;
    int c;
    bool any = false, too_long = false, nul = false;

    while ((c = src_getc(src)) != EOF) {
        any = true;
        if (c == '\n')
            break;
        if (c == '\0')
            nul = true;
        if (n + 1 < cap)
            buf[n++] = (char)c;
        else
            too_long = true;
    }
    if (!any)
        return LINE_EOF;
    if (n > 0 && buf[n - 1] == '\r' && !too_long)
        n--;
    buf[n] = '\0';
    if (nul)
        return LINE_NUL;
    return too_long ? LINE_TOO_LONG : LINE_OK;
}

/* Collects the records of an empirical file. */
struct emp_builder {
    double *vals;         /* samples mode */
    struct emp_bin *bins; /* histogram mode */
    size_t n, cap;
    int fields;        /* 0 before the first record, 1 samples, 2 histogram */
    size_t first_line; /* line of the first record */
};

static int emp_push(struct emp_builder *eb, const double *f, size_t nf)
{
    if (eb->n == eb->cap) {
        size_t cap = eb->cap ? eb->cap * 2 : 256;
        if (eb->fields == 1) {
            double *p = ts_realloc(eb->vals, cap * sizeof(*p));
            if (!p)
                return -ENOMEM;
            eb->vals = p;
        } else {
            struct emp_bin *p = ts_realloc(eb->bins, cap * sizeof(*p));
            if (!p)
                return -ENOMEM;
            eb->bins = p;
        }
        eb->cap = cap;
    }
    if (eb->fields == 1) {
        eb->vals[eb->n++] = f[0];
    } else {
        struct emp_bin *b = &eb->bins[eb->n++];
        b->lo = f[0];
        b->hi = nf == 3 ? f[1] : f[0];
        b->w = f[nf - 1];
    }
    return 0;
}

/*
 * Parses one line (NUL-terminated, modifiable). Returns 0 (record stored or
 * nothing on the line), -EINVAL with a message, or -ENOMEM.
 */
static int emp_line(struct emp_builder *eb, char *line, size_t lineno, const char *name, char *err,
                    size_t errlen)
{
    char *hash = strchr(line, '#');
    if (hash)
        *hash = '\0';

    double f[3];
    size_t nf = 0;
    const char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\0')
            break;
        if (nf > 0) {
            if (*p == ',') {
                p++;
                while (*p == ' ' || *p == '\t')
                    p++;
            } else if (p[-1] != ' ' && p[-1] != '\t') {
                ts_errf(err, errlen,
                        "%s: line %zu: expected ',' or a blank after a number, got '%s'", name,
                        lineno, p);
                return -EINVAL;
            }
        }
        if (nf == 3) {
            ts_errf(err, errlen, "%s: line %zu: too many fields (at most 3: LO,HI,WEIGHT)", name,
                    lineno);
            return -EINVAL;
        }
        double v;
        if (units_scan_number(p, &p, &v) < 0) {
            ts_errf(err, errlen, "%s: line %zu: expected a number, got '%s'", name, lineno, p);
            return -EINVAL;
        }
        f[nf++] = v;
    }
    if (nf == 0)
        return 0;

    int fields = nf == 1 ? 1 : 2;
    if (eb->fields == 0) {
        eb->fields = fields;
        eb->first_line = lineno;
    } else if (eb->fields != fields) {
        ts_errf(err, errlen,
                "%s: line %zu: %s, but line %zu was %s (a file holds either samples or a "
                "histogram)",
                name, lineno, fields == 1 ? "one number" : "a histogram row", eb->first_line,
                eb->fields == 1 ? "one number" : "a histogram row");
        return -EINVAL;
    }
    struct emp_bin b = {f[0], nf == 3 ? f[1] : f[0], f[nf - 1]};
    if (fields == 2) {
        const char *why = bins_check(&b, 1, false);
        if (why) {
            ts_errf(err, errlen, "%s: line %zu: %s", name, lineno, why);
            return -EINVAL;
        }
    }
    return emp_push(eb, f, nf);
}

static int emp_parse(struct dist *d, struct line_src *src, const char *name, char *err,
                     size_t errlen)
{
    struct emp_builder eb = {0};
    char line[DIST_EMPIRICAL_MAX_LINE + 2];
    size_t lineno = 0;
    int rc = 0;

    dist_reset(d);
    for (;;) {
        enum line_status st = line_next(src, line, sizeof(line) - 1);
        if (st == LINE_EOF)
            break;
        if (++lineno > DIST_EMPIRICAL_MAX_LINES) {
            ts_errf(err, errlen, "%s: more than %d lines", name, DIST_EMPIRICAL_MAX_LINES);
            rc = -EINVAL;
            goto out_free;
        }
        if (st == LINE_TOO_LONG) {
            ts_errf(err, errlen, "%s: line %zu: longer than %d bytes", name, lineno,
                    DIST_EMPIRICAL_MAX_LINE);
            rc = -EINVAL;
            goto out_free;
        }
        if (st == LINE_NUL) {
            ts_errf(err, errlen, "%s: line %zu: contains a NUL byte", name, lineno);
            rc = -EINVAL;
            goto out_free;
        }
        rc = emp_line(&eb, line, lineno, name, err, errlen);
        if (rc < 0) {
            if (rc == -ENOMEM)
                ts_errf(err, errlen, "%s: out of memory", name);
            goto out_free;
        }
    }
    if (src->fp && ferror(src->fp)) {
        ts_errf(err, errlen, "%s: read error", name);
        rc = -EIO;
        goto out_free;
    }
    if (eb.n == 0) {
        ts_errf(err, errlen, "%s: no values", name);
        rc = -EINVAL;
        goto out_free;
    }
    char *source = ts_strdup(name);
    if (!source) {
        ts_errf(err, errlen, "%s: out of memory", name);
        rc = -ENOMEM;
        goto out_free;
    }
    if (eb.fields == 1) {
        emp_take_samples(d, eb.vals, eb.n);
        eb.vals = NULL;
    } else {
        const char *why = bins_check(eb.bins, eb.n, true);
        if (why) {
            ts_errf(err, errlen, "%s: %s", name, why);
            ts_free(source);
            rc = -EINVAL;
            goto out_free;
        }
        rc = emp_take_bins(d, eb.bins, eb.n);
        eb.bins = NULL;
        if (rc < 0) {
            ts_errf(err, errlen, "%s: out of memory", name);
            ts_free(source);
            goto out_free;
        }
    }
    d->empirical.source = source;
    return 0;

out_free:
    ts_free(eb.vals);
    ts_free(eb.bins);
    dist_reset(d);
    return rc;
}

int dist_parse_empirical_text(struct dist *d, const char *text, size_t len, const char *name,
                              char *err, size_t errlen)
{
    struct line_src src = {.fp = NULL, .text = text ? text : "", .len = text ? len : 0};
    return emp_parse(d, &src, name ? name : "<memory>", err, errlen);
}

int dist_load_empirical(struct dist *d, const char *path, char *err, size_t errlen)
{
    dist_reset(d);
    if (!path || !*path) {
        ts_errf(err, errlen, "empirical: expected a file name (e.g. empirical:lengths.txt)");
        return -EINVAL;
    }
    FILE *fp = fopen(path, "r");
    if (!fp) {
        int e = errno;
        ts_errf(err, errlen, "empirical: cannot open '%s': %s", path, ts_strerror(-e));
        return -EINVAL;
    }
    struct line_src src = {.fp = fp};
    int rc = emp_parse(d, &src, path, err, errlen);
    fclose(fp);
    return rc;
}

/* ---- spec strings ------------------------------------------------------ */

struct spec_kind {
    const char *name;
    enum dist_kind kind;
    size_t nparams;
    const char *usage;
};

static const struct spec_kind spec_kinds[] = {
    {"fixed", DIST_FIXED, 1, "V (e.g. fixed:128)"},
    {"uniform", DIST_UNIFORM, 2, "LO-HI (e.g. uniform:100-200)"},
    {"normal", DIST_NORMAL, 2, "MEAN,SD (e.g. normal:512,64)"},
    {"truncnormal", DIST_TRUNCNORMAL, 4, "MEAN,SD,LO,HI (e.g. truncnormal:512,64,1,1024)"},
    {"lognormal", DIST_LOGNORMAL, 2, "MEAN,SIGMA (e.g. lognormal:512,0.6)"},
    {"exponential", DIST_EXPONENTIAL, 1, "MEAN (e.g. exponential:2.5)"},
    {"exp", DIST_EXPONENTIAL, 1, "MEAN (e.g. exp:2.5)"},
    {"gamma", DIST_GAMMA, 2, "SHAPE,SCALE (e.g. gamma:2,0.5)"},
};

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* Reads n numbers separated by ',' (or '-' between two, for uniform). */
static int params_scan(const char *s, double *out, size_t n, bool dash_ok)
{
    const char *p = s;
    for (size_t i = 0; i < n; i++) {
        p = skip_ws(p);
        if (i > 0) {
            if (*p == ',' || (dash_ok && *p == '-'))
                p = skip_ws(p + 1);
            else
                return -EINVAL;
        }
        if (units_scan_number(p, &p, &out[i]) < 0)
            return -EINVAL;
    }
    p = skip_ws(p);
    return *p ? -EINVAL : 0;
}

static int spec_check(const struct spec_kind *k, const double *v, char *err, size_t errlen)
{
    switch (k->kind) {
    case DIST_UNIFORM:
        if (v[0] > v[1]) {
            ts_errf(err, errlen, "uniform: LO must be <= HI (got %g > %g)", v[0], v[1]);
            return -EINVAL;
        }
        return 0;
    case DIST_NORMAL:
    case DIST_TRUNCNORMAL:
        if (v[1] < 0) {
            ts_errf(err, errlen, "%s: SD must be >= 0 (got %g)", k->name, v[1]);
            return -EINVAL;
        }
        if (k->kind == DIST_TRUNCNORMAL && v[2] > v[3]) {
            ts_errf(err, errlen, "truncnormal: LO must be <= HI (got %g > %g)", v[2], v[3]);
            return -EINVAL;
        }
        return 0;
    case DIST_LOGNORMAL:
        if (v[0] <= 0) {
            ts_errf(err, errlen, "lognormal: MEAN must be > 0 (got %g)", v[0]);
            return -EINVAL;
        }
        if (v[1] < 0) {
            ts_errf(err, errlen, "lognormal: SIGMA must be >= 0 (got %g)", v[1]);
            return -EINVAL;
        }
        return 0;
    case DIST_EXPONENTIAL:
        if (v[0] <= 0) {
            ts_errf(err, errlen, "%s: MEAN must be > 0 (got %g)", k->name, v[0]);
            return -EINVAL;
        }
        return 0;
    case DIST_GAMMA:
        if (v[0] <= 0 || v[1] <= 0) {
            ts_errf(err, errlen, "gamma: SHAPE and SCALE must be > 0 (got %g, %g)", v[0], v[1]);
            return -EINVAL;
        }
        return 0;
    default:
        return 0;
    }
}

static int spec_init(struct dist *d, enum dist_kind kind, const double *v)
{
    switch (kind) {
    case DIST_FIXED:
        return dist_init_fixed(d, v[0]);
    case DIST_UNIFORM:
        return dist_init_uniform(d, v[0], v[1]);
    case DIST_NORMAL:
        return dist_init_normal(d, v[0], v[1]);
    case DIST_TRUNCNORMAL:
        return dist_init_truncnormal(d, v[0], v[1], v[2], v[3]);
    case DIST_LOGNORMAL:
        return dist_init_lognormal(d, v[0], v[1]);
    case DIST_EXPONENTIAL:
        return dist_init_exponential(d, v[0]);
    case DIST_GAMMA:
        return dist_init_gamma(d, v[0], v[1]);
    default:
        return -EINVAL;
    }
}

int dist_parse(struct dist *d, const char *spec, char *err, size_t errlen)
{
    dist_reset(d);
    const char *p = spec ? skip_ws(spec) : "";
    if (!*p) {
        ts_errf(err, errlen, "empty distribution spec");
        return -EINVAL;
    }

    /* A bare number is fixed. */
    double v[4];
    if (params_scan(p, v, 1, false) == 0)
        return dist_init_fixed(d, v[0]);

    const char *colon = strchr(p, ':');
    size_t namelen = colon ? (size_t)(colon - p) : strlen(p);
    while (namelen > 0 && (p[namelen - 1] == ' ' || p[namelen - 1] == '\t'))
        namelen--;

    if (namelen == strlen("empirical") && strncasecmp(p, "empirical", namelen) == 0) {
        if (!colon) {
            ts_errf(err, errlen, "empirical: expected a file name (e.g. empirical:lengths.txt)");
            return -EINVAL;
        }
        return dist_load_empirical(d, skip_ws(colon + 1), err, errlen);
    }

    const struct spec_kind *k = NULL;
    for (size_t i = 0; i < sizeof(spec_kinds) / sizeof(spec_kinds[0]); i++) {
        if (strlen(spec_kinds[i].name) == namelen &&
            strncasecmp(spec_kinds[i].name, p, namelen) == 0)
            k = &spec_kinds[i];
    }
    if (!k) {
        ts_errf(err, errlen,
                "unknown distribution '%.*s' (expected fixed, uniform, normal, truncnormal, "
                "lognormal, exponential, gamma, empirical or a number)",
                (int)(namelen > 64 ? 64 : namelen), p);
        return -EINVAL;
    }
    const char *params = colon ? colon + 1 : "";
    if (params_scan(params, v, k->nparams, k->kind == DIST_UNIFORM) < 0) {
        ts_errf(err, errlen, "%s: expected %s, got '%s'", k->name, k->usage, params);
        return -EINVAL;
    }
    int rc = spec_check(k, v, err, errlen);
    if (rc < 0)
        return rc;
    rc = spec_init(d, k->kind, v);
    if (rc < 0)
        ts_errf(err, errlen, "%s: parameters out of range", k->name);
    return rc;
}

/* ---- sampling ---------------------------------------------------------- */

double dist_normal01(struct rng *r)
{
    double u1 = 1.0 - rng_uniform01(r); /* (0, 1] */
    double u2 = rng_uniform01(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

double dist_exp1(struct rng *r)
{
    return -log1p(-rng_uniform01(r));
}

/* Gamma(shape, 1): Marsaglia and Tsang (2000), with U^(1/shape) for shape < 1. */
static double gamma1(struct rng *r, double shape)
{
    double boost = 1.0;
    if (shape < 1.0) {
        boost = pow(1.0 - rng_uniform01(r), 1.0 / shape);
        shape += 1.0;
    }
    double dd = shape - 1.0 / 3.0;
    double c = 1.0 / sqrt(9.0 * dd);
    for (int tries = 0; tries < REJECT_TRIES_MAX; tries++) {
        double x = dist_normal01(r);
        double v = 1.0 + c * x;
        if (v <= 0.0)
            continue;
        v = v * v * v;
        double u = rng_uniform01(r);
        double x2 = x * x;
        if (u < 1.0 - 0.0331 * x2 * x2)
            return dd * v * boost;
        if (log(u) < 0.5 * x2 + dd * (1.0 - v + log(v)))
            return dd * v * boost;
    }
    return dd * boost;
}

/*
 * Standard normal restricted to [a, b] with 0 <= a < b (b may be +inf):
 * exponential proposal with rate lam = (a + sqrt(a^2 + 4)) / 2, truncated to
 * [a, b] by inversion, accepted with exp(-(z - lam)^2 / 2) (Robert 1995).
 * The acceptance rate is above 0.6 for every a and b.
 */
static double tail_sample(struct rng *r, double a, double b)
{
    double lam = a > 1e8 ? a : 0.5 * (a + sqrt(a * a + 4.0));
    double mass = -expm1(-lam * (b - a)); /* proposal mass inside [a, b] */
    for (int tries = 0; tries < REJECT_TRIES_MAX; tries++) {
        double z = a - log1p(-rng_uniform01(r) * mass) / lam;
        if (z > b)
            z = b;
        double dz = z - lam;
        if (rng_uniform01(r) < exp(-0.5 * dz * dz))
            return z;
    }
    return a;
}

/*
 * Standard normal restricted to [a, b] with a < 0 < b: plain rejection when
 * the interval is wide (it then holds at least 49% of the mass), else a
 * uniform proposal accepted with exp(-z^2/2) (acceptance above 49% too).
 */
static double center_sample(struct rng *r, double a, double b)
{
    for (int tries = 0; tries < REJECT_TRIES_MAX; tries++) {
        if (b - a >= 2.5) {
            double z = dist_normal01(r);
            if (z >= a && z <= b)
                return z;
        } else {
            double u = rng_uniform01(r);
            double z = a * (1.0 - u) + b * u;
            if (rng_uniform01(r) < exp(-0.5 * z * z))
                return z;
        }
    }
    return 0.0;
}

static double truncnormal_sample(const struct dist *d, struct rng *r)
{
    double mean = d->truncnormal.mean, sd = d->truncnormal.sd;
    double lo = d->truncnormal.lo, hi = d->truncnormal.hi;
    if (!(sd > 0) || !(lo < hi))
        return clamp(mean, lo, hi);
    double a = (lo - mean) / sd, b = (hi - mean) / sd;
    if (a > 1e150)
        return lo; /* all the mass lies within sd/a of lo */
    if (b < -1e150)
        return hi;
    double z;
    if (a >= 0)
        z = tail_sample(r, a, b);
    else if (b <= 0)
        z = -tail_sample(r, -b, -a);
    else
        z = center_sample(r, a, b);
    double x = mean + sd * z;
    if (isnan(x))
        return clamp(mean, lo, hi);
    return clamp(x, lo, hi);
}

static double empirical_sample(const struct dist *d, struct rng *r)
{
    size_t n = d->empirical.n;
    double u = rng_uniform01(r);
    if (d->empirical.x) {
        const double *x = d->empirical.x;
        if (n == 1)
            return x[0];
        double pos = u * (double)(n - 1);
        size_t i = (size_t)pos;
        double f = pos - (double)i;
        if (i >= n - 1) {
            i = n - 2;
            f = 1.0;
        }
        return x[i] * (1.0 - f) + x[i + 1] * f;
    }
    const double *cum = d->empirical.cum;
    double t = u * cum[n - 1];
    size_t lo = 0, hi = n - 1; /* find the first k with cum[k] > t */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cum[mid] > t)
            hi = mid;
        else
            lo = mid + 1;
    }
    double start = lo ? cum[lo - 1] : 0.0;
    double f = clamp((t - start) / (cum[lo] - start), 0.0, 1.0);
    return d->empirical.lo[lo] * (1.0 - f) + d->empirical.hi[lo] * f;
}

double dist_sample(const struct dist *d, struct rng *r)
{
    switch (d->kind) {
    case DIST_FIXED:
        return d->fixed.value;
    case DIST_UNIFORM: {
        double u = rng_uniform01(r);
        double x = d->uniform.lo * (1.0 - u) + d->uniform.hi * u;
        return clamp(x, d->uniform.lo, d->uniform.hi);
    }
    case DIST_NORMAL:
        return d->normal.mean + d->normal.sd * dist_normal01(r);
    case DIST_TRUNCNORMAL:
        return truncnormal_sample(d, r);
    case DIST_LOGNORMAL:
        return exp(d->lognormal.mu + d->lognormal.sigma * dist_normal01(r));
    case DIST_EXPONENTIAL:
        return d->exponential.mean * dist_exp1(r);
    case DIST_GAMMA:
        return d->gamma.scale * gamma1(r, d->gamma.shape);
    case DIST_EMPIRICAL:
        return empirical_sample(d, r);
    }
    return 0.0;
}

uint64_t dist_sample_uint(const struct dist *d, struct rng *r, uint64_t min, uint64_t max)
{
    if (max < min)
        max = min;
    if (d->kind == DIST_UNIFORM) {
        double lo = ceil(d->uniform.lo), hi = floor(d->uniform.hi);
        /* Intersect with [min, max] in doubles; 2^64 is exactly representable. */
        double fmin = (double)min, fmax = (double)max;
        if (lo < fmin)
            lo = fmin;
        if (hi > fmax)
            hi = fmax;
        if (lo <= hi && hi < 0x1p64) {
            uint64_t ilo = (uint64_t)lo, ihi = (uint64_t)hi;
            if (ilo < min)
                ilo = min;
            if (ihi > max)
                ihi = max;
            if (ilo <= ihi)
                return rng_range(r, ilo, ihi);
        }
    }
    double x = dist_sample(d, r);
    if (isnan(x))
        return min;
    x = floor(x + 0.5);
    if (x <= (double)min)
        return min;
    if (x >= (double)max)
        return max;
    return (uint64_t)x;
}

/* ---- moments and formatting -------------------------------------------- */

/*
 * Mean of N(0,1) restricted to [a, b]: Simpson's rule over the part of the
 * interval where the density is within e^-40 of its peak, computed relative
 * to the peak so that far tails neither underflow nor lose precision. Far
 * one-sided tails (beyond 1e4 sd) use the exponential limit.
 */
static double truncnormal_mean01(double a, double b)
{
    double m = a > 0 ? a : (b < 0 ? -b : 0.0); /* distance of the peak from 0 */
    if (m > 1e4) {
        /* Density ~ exp(-m x) for x = distance into the interval. */
        double w = b - a;
        double e = -expm1(-m * w);
        double into = 1.0 / m - (isfinite(w) ? w * exp(-m * w) / e : 0.0);
        return a > 0 ? a + into : b - into;
    }
    double reach = 80.0 / (m + sqrt(m * m + 80.0)); /* z^2 - m^2 <= 80 */
    double lo, hi;
    if (a > 0) {
        lo = a;
        hi = fmin(b, a + reach);
    } else if (b < 0) {
        lo = fmax(a, b - reach);
        hi = b;
    } else {
        lo = fmax(a, -sqrt(80.0));
        hi = fmin(b, sqrt(80.0));
    }
    const int steps = 4096;
    double h = (hi - lo) / steps, s0 = 0.0, s1 = 0.0;
    for (int i = 0; i <= steps; i++) {
        double z = lo + h * i;
        double wgt = (i == 0 || i == steps) ? 1.0 : (i % 2 ? 4.0 : 2.0);
        double dz = fabs(z) - m;
        double f = exp(-0.5 * dz * (fabs(z) + m));
        s0 += wgt * f;
        s1 += wgt * f * z;
    }
    return s1 / s0;
}

double dist_mean(const struct dist *d)
{
    switch (d->kind) {
    case DIST_FIXED:
        return d->fixed.value;
    case DIST_UNIFORM:
        return 0.5 * d->uniform.lo + 0.5 * d->uniform.hi;
    case DIST_NORMAL:
        return d->normal.mean;
    case DIST_TRUNCNORMAL: {
        double mean = d->truncnormal.mean, sd = d->truncnormal.sd;
        double lo = d->truncnormal.lo, hi = d->truncnormal.hi;
        if (!(sd > 0) || !(lo < hi))
            return clamp(mean, lo, hi);
        double a = (lo - mean) / sd, b = (hi - mean) / sd;
        if (a > 1e150)
            return lo;
        if (b < -1e150)
            return hi;
        return clamp(mean + sd * truncnormal_mean01(a, b), lo, hi);
    }
    case DIST_LOGNORMAL:
        return d->lognormal.mean;
    case DIST_EXPONENTIAL:
        return d->exponential.mean;
    case DIST_GAMMA:
        return d->gamma.shape * d->gamma.scale;
    case DIST_EMPIRICAL:
        return d->empirical.mean;
    }
    return 0.0;
}

/* The shortest "%.*g" that reads back as v; whole numbers without exponent. */
static const char *num(double v, char *buf, size_t n)
{
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(buf, n, "%.0f", v);
        return buf;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

char *dist_format(const struct dist *d, char *buf, size_t n)
{
    char a[32], b[32], c[32], e[32];

    if (!buf || n == 0)
        return buf;
    switch (d->kind) {
    case DIST_FIXED:
        snprintf(buf, n, "fixed:%s", num(d->fixed.value, a, sizeof(a)));
        break;
    case DIST_UNIFORM:
        snprintf(buf, n, "uniform:%s-%s", num(d->uniform.lo, a, sizeof(a)),
                 num(d->uniform.hi, b, sizeof(b)));
        break;
    case DIST_NORMAL:
        snprintf(buf, n, "normal:%s,%s", num(d->normal.mean, a, sizeof(a)),
                 num(d->normal.sd, b, sizeof(b)));
        break;
    case DIST_TRUNCNORMAL:
        snprintf(buf, n, "truncnormal:%s,%s,%s,%s", num(d->truncnormal.mean, a, sizeof(a)),
                 num(d->truncnormal.sd, b, sizeof(b)), num(d->truncnormal.lo, c, sizeof(c)),
                 num(d->truncnormal.hi, e, sizeof(e)));
        break;
    case DIST_LOGNORMAL:
        snprintf(buf, n, "lognormal:%s,%s", num(d->lognormal.mean, a, sizeof(a)),
                 num(d->lognormal.sigma, b, sizeof(b)));
        break;
    case DIST_EXPONENTIAL:
        snprintf(buf, n, "exponential:%s", num(d->exponential.mean, a, sizeof(a)));
        break;
    case DIST_GAMMA:
        snprintf(buf, n, "gamma:%s,%s", num(d->gamma.shape, a, sizeof(a)),
                 num(d->gamma.scale, b, sizeof(b)));
        break;
    case DIST_EMPIRICAL:
        if (d->empirical.source)
            snprintf(buf, n, "empirical:%s", d->empirical.source);
        else
            snprintf(buf, n, "empirical:<%zu %s>", d->empirical.n,
                     d->empirical.x ? "samples" : "bins");
        break;
    default:
        snprintf(buf, n, "?");
        break;
    }
    return buf;
}

void dist_release(struct dist *d)
{
    if (!d)
        return;
    if (d->kind == DIST_EMPIRICAL) {
        ts_free(d->empirical.x);
        ts_free(d->empirical.lo);
        ts_free(d->empirical.source);
    }
    dist_reset(d);
}
