/*
 * compare.c - bootstrap intervals, Mann-Whitney U and regression rules for
 * two runs (see compare.h).
 */
#include "analysis/compare.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "base/strdist.h"

#define DEFAULT_RESAMPLES 2000
#define DEFAULT_ALPHA     0.05

/* ---- metrics ------------------------------------------------------------------ */

static const struct {
    const char *name;
    enum compare_scalar s;
} scalar_names[] = {
    {"throughput", CMP_THROUGHPUT},
    {"request_throughput", CMP_THROUGHPUT},
    {"output_throughput", CMP_OUTPUT_THROUGHPUT},
    {"output_tps", CMP_OUTPUT_THROUGHPUT},
    {"goodput", CMP_GOODPUT},
    {"request_goodput", CMP_GOODPUT},
    {"error_rate", CMP_ERROR_RATE},
    {"recall", CMP_RECALL},
    {"recall_mean", CMP_RECALL},
    {"recall_p5", CMP_RECALL_P5},
};

static const char *const scalar_canonical[CMP_SCALAR_COUNT] = {
    "throughput", "output_throughput", "goodput", "error_rate", "recall", "recall_p5",
};

static bool word_is(const char *s, size_t len, const char *word)
{
    return strlen(word) == len && strncasecmp(s, word, len) == 0;
}

/* A decimal number in exactly len bytes of s (no sign, no exponent). */
static int parse_plain_number(const char *s, size_t len, double *out)
{
    char tmp[32];
    char *end;
    bool digit = false;

    if (len == 0 || len >= sizeof(tmp))
        return -EINVAL;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i]) && s[i] != '.')
            return -EINVAL;
        digit |= isdigit((unsigned char)s[i]) != 0;
    }
    if (!digit)
        return -EINVAL;
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    *out = strtod(tmp, &end);
    return *end ? -EINVAL : 0;
}

int compare_metric_parse(const char *s, size_t len, struct compare_metric *out)
{
    const char *dot = memchr(s, '.', len);
    struct compare_metric m = {0};

    if (!dot) {
        for (size_t i = 0; i < sizeof(scalar_names) / sizeof(scalar_names[0]); i++) {
            if (word_is(s, len, scalar_names[i].name)) {
                m.metric = (int)scalar_names[i].s;
                *out = m;
                return 0;
            }
        }
        return -EINVAL;
    }
    char lower[32];
    size_t nl = (size_t)(dot - s);
    if (nl >= sizeof(lower))
        return -EINVAL;
    for (size_t i = 0; i < nl; i++)
        lower[i] = (char)tolower((unsigned char)s[i]);
    int lm = stat_metric_from_name(lower, nl);
    if (lm < 0)
        return -EINVAL;
    m.latency = true;
    m.metric = lm;
    const char *st = dot + 1;
    size_t sl = len - (size_t)(st - s);
    if (word_is(st, sl, "mean") || word_is(st, sl, "avg")) {
        m.mean = true;
    } else if (word_is(st, sl, "median")) {
        m.pct = 50;
    } else if (sl >= 2 && (st[0] == 'p' || st[0] == 'P')) {
        const char *point = memchr(st, '.', sl);
        if (parse_plain_number(st + 1, sl - 1, &m.pct) || !(m.pct >= 0 && m.pct <= 100) ||
            (point && (size_t)(st + sl - point - 1) > 9))
            return -EINVAL;
    } else {
        return -EINVAL;
    }
    *out = m;
    return 0;
}

char *compare_metric_name(const struct compare_metric *m, char *buf, size_t n)
{
    if (!m->latency)
        snprintf(buf, n, "%s",
                 (unsigned)m->metric < CMP_SCALAR_COUNT ? scalar_canonical[m->metric] : "unknown");
    else if (m->mean)
        snprintf(buf, n, "%s.mean", stat_metric_name((enum stat_metric)m->metric));
    else {
        /* at most 9 decimals were parsed: this reads back as the same number */
        char num[32];
        snprintf(num, sizeof(num), "%.9f", m->pct);
        char *end = num + strlen(num);
        while (end[-1] == '0')
            *--end = '\0';
        if (end[-1] == '.')
            end[-1] = '\0';
        snprintf(buf, n, "%s.p%s", stat_metric_name((enum stat_metric)m->metric), num);
    }
    return buf;
}

bool compare_metric_lower_is_better(const struct compare_metric *m)
{
    return m->latency || m->metric == CMP_ERROR_RATE;
}

const char *compare_metric_unit(const struct compare_metric *m)
{
    if (m->latency)
        return "ms";
    switch (m->metric) {
    case CMP_THROUGHPUT:
    case CMP_GOODPUT:
        return "req/s";
    case CMP_OUTPUT_THROUGHPUT:
        return "tok/s";
    case CMP_RECALL:
    case CMP_RECALL_P5:
        return "fraction";
    default:
        return "";
    }
}

bool compare_metric_equal(const struct compare_metric *a, const struct compare_metric *b)
{
    if (a->latency != b->latency || a->metric != b->metric)
        return false;
    if (!a->latency)
        return true;
    return a->mean == b->mean && (a->mean || a->pct == b->pct);
}

/* ---- rules -------------------------------------------------------------------- */

static int rule_error(char *err, size_t errlen, const char *expr, const char *what, size_t col)
{
    if (err && errlen)
        ts_errf(err, errlen, "--fail-on '%s': %s at column %zu", expr, what, col + 1);
    return -EINVAL;
}

/*
 * "unknown metric 'X' (did you mean 'Y'?)" for a misspelt name: the nearest
 * scalar, or latency metric (its statistic kept), within a typo or two.
 */
static void unknown_metric(const char *s, size_t len, char *out, size_t n)
{
    const char *dot = memchr(s, '.', len);
    size_t nl = dot ? (size_t)(dot - s) : len;
    const char *best = NULL;
    size_t best_d = SIZE_MAX;
    char lower[64];
    if (nl < sizeof(lower)) {
        for (size_t i = 0; i < nl; i++)
            lower[i] = (char)tolower((unsigned char)s[i]);
        lower[nl] = '\0';
        for (size_t i = 0; !dot && i < sizeof(scalar_names) / sizeof(scalar_names[0]); i++) {
            size_t d =
                str_edit_distance(lower, nl, scalar_names[i].name, strlen(scalar_names[i].name));
            if (d < best_d) {
                best_d = d;
                best = scalar_names[i].name;
            }
        }
        for (int i = 0; dot && i < STAT_METRIC_COUNT; i++) {
            const char *name = stat_metric_name((enum stat_metric)i);
            size_t d = str_edit_distance(lower, nl, name, strlen(name));
            if (d < best_d) {
                best_d = d;
                best = name;
            }
        }
    }
    int shown = (int)(len > 40 ? 40 : len);
    if (best && best_d > 0 && best_d <= (nl <= 4 ? 1u : 2u))
        snprintf(out, n, "unknown metric '%.*s' (did you mean '%s%.*s'?)", shown, s, best,
                 dot ? (int)(len - nl > 20 ? 20 : len - nl) : 0, dot ? dot : "");
    else
        snprintf(out, n,
                 "unknown metric '%.*s' (latency metrics take a statistic, e.g. ttft.p95; "
                 "scalars: request_throughput, output_throughput, request_goodput, error_rate)",
                 shown, s);
}

int compare_rule_parse(const char *expr, struct compare_rule *out, char *err, size_t errlen)
{
    struct compare_rule r;
    size_t i = 0, len = strlen(expr);

    memset(&r, 0, sizeof(r));
    if (len >= sizeof(r.expr))
        return rule_error(err, errlen, expr, "expression too long", 0);
    memcpy(r.expr, expr, len + 1);
    while (i < len && isspace((unsigned char)expr[i]))
        i++;
    size_t m0 = i;
    while (i < len && (isalnum((unsigned char)expr[i]) || expr[i] == '_' || expr[i] == '.'))
        i++;
    if (i == m0)
        return rule_error(err, errlen, expr, "expected a metric", m0);
    if (compare_metric_parse(expr + m0, i - m0, &r.metric)) {
        char what[160];
        unknown_metric(expr + m0, i - m0, what, sizeof(what));
        return rule_error(err, errlen, expr, what, m0);
    }
    while (i < len && isspace((unsigned char)expr[i]))
        i++;
    if (expr[i] == '>' || expr[i] == '<') {
        r.greater = expr[i] == '>';
        i++;
        if (expr[i] == '=') {
            r.inclusive = true;
            i++;
        }
    } else {
        return rule_error(err, errlen, expr, "expected '>', '>=', '<' or '<='", i);
    }
    while (i < len && isspace((unsigned char)expr[i]))
        i++;
    double sign = 1;
    if (expr[i] == '+' || expr[i] == '-') {
        sign = expr[i] == '-' ? -1 : 1;
        i++;
    }
    size_t n0 = i;
    while (i < len && (isdigit((unsigned char)expr[i]) || expr[i] == '.'))
        i++;
    double v;
    if (parse_plain_number(expr + n0, i - n0, &v))
        return rule_error(err, errlen, expr, "expected a number", n0);
    while (i < len && isspace((unsigned char)expr[i]))
        i++;
    size_t u0 = i;
    size_t ul = len - u0;
    while (ul && isspace((unsigned char)expr[u0 + ul - 1]))
        ul--;
    const char *u = expr + u0;
    double scale = 1;
    if (word_is(u, ul, "%")) {
        r.relative = true;
        scale = 0.01;
    } else if (r.metric.latency) {
        if (ul == 0 || word_is(u, ul, "ms"))
            scale = 1;
        else if (word_is(u, ul, "us") || word_is(u, ul, "\xc2\xb5s") || word_is(u, ul, "\xce\xbcs"))
            scale = 1e-3;
        else if (word_is(u, ul, "s"))
            scale = 1e3;
        else
            return rule_error(err, errlen, expr, "expected %, us, ms or s", u0);
    } else if (r.metric.metric == CMP_ERROR_RATE || r.metric.metric == CMP_RECALL ||
               r.metric.metric == CMP_RECALL_P5) {
        if (word_is(u, ul, "pp"))
            scale = 0.01;
        else if (ul)
            return rule_error(err, errlen, expr, "expected % or pp (percentage points)", u0);
    } else if (ul && !word_is(u, ul, "/s")) {
        return rule_error(err, errlen, expr, "expected % or /s", u0);
    }
    r.threshold = sign * v * scale;
    *out = r;
    return 0;
}

bool compare_rule_holds(const struct compare_rule *rule, const struct compare_row *row,
                        bool need_significance)
{
    double v = rule->relative ? row->rel_change : row->change;

    if (!compare_metric_equal(&rule->metric, &row->metric) || isnan(v))
        return false;
    bool over = rule->greater ? (rule->inclusive ? v >= rule->threshold : v > rule->threshold)
                              : (rule->inclusive ? v <= rule->threshold : v < rule->threshold);
    return over && (!need_significance || row->significant);
}

/* ---- per-request values ---------------------------------------------------------- */

static const enum stat_metric value_metric[CMP_V_COUNT] = {
    [CMP_V_TTFT] = STAT_TTFT, [CMP_V_TTFC] = STAT_TTFC, [CMP_V_TPOT] = STAT_TPOT,
    [CMP_V_E2EL] = STAT_E2EL, [CMP_V_LAG] = STAT_LAG,
};

enum stat_metric compare_value_metric(enum compare_value v)
{
    return value_metric[(unsigned)v < CMP_V_COUNT ? v : 0];
}

int compare_metric_value(enum stat_metric m)
{
    for (int v = 0; v < CMP_V_COUNT; v++)
        if (value_metric[v] == m)
            return v;
    return -1;
}

/* Whether stats.h counts value v of a request of this kind (lag: every request). */
static bool value_counts(int v, const struct compare_req *q)
{
    return !isnan(q->v[v]) && (v == CMP_V_LAG || q->kind == CMP_REQ_OK);
}

/* stats.c's goodput verdict, from the rounded per-request values. */
static bool req_good(const struct compare_req *q, const struct goodput_cfg *g)
{
    double e2el = q->v[CMP_V_E2EL];
    double ttft = isnan(q->v[CMP_V_TTFT]) ? e2el : q->v[CMP_V_TTFT];
    double tpot = isnan(q->v[CMP_V_TPOT]) ? 0 : q->v[CMP_V_TPOT];

    if (q->kind != CMP_REQ_OK || isnan(e2el))
        return false;
    return (g->ttft_ms <= 0 || ttft <= g->ttft_ms) && (g->tpot_ms <= 0 || tpot <= g->tpot_ms) &&
           (g->e2el_ms <= 0 || e2el <= g->e2el_ms);
}

/* ---- random counts ----------------------------------------------------------------- */

/*
 * A Poisson(lambda) sampler with its constants computed once, since every
 * group of values is drawn once per resample: Poisson(1) by inversion on a
 * 32-bit uniform against a table, lambda < 10 by inversion, larger lambda by
 * Hoermann's PTRS (transformed rejection with squeeze, 1993; numpy's method).
 */
#define POIS1_MAX 14

struct pois {
    double lambda;
    double e;                                    /* exp(-lambda), inversion */
    double slam, loglam, a, b, log_invalpha, vr; /* PTRS */
};

/* floor(P(X <= k) * 2^32) for X ~ Poisson(1), k = 0..13 (sum of e^-1 / j!). */
static const uint32_t pois1_cdf[POIS1_MAX] = {
    1580030168u, 3160060337u, 3950075421u, 4213413783u, 4279248373u, 4292415291u, 4294609777u,
    4294923276u, 4294962463u, 4294966817u, 4294967252u, 4294967292u, 4294967295u, 4294967295u,
};

static void pois_init(struct pois *p, uint64_t lambda)
{
    memset(p, 0, sizeof(*p));
    p->lambda = (double)lambda;
    if (lambda < 10) {
        p->e = exp(-p->lambda);
        return;
    }
    p->slam = sqrt(p->lambda);
    p->loglam = log(p->lambda);
    p->b = 0.931 + 2.53 * p->slam;
    p->a = -0.059 + 0.02483 * p->b;
    p->log_invalpha = log(1.1239 + 1.1328 / (p->b - 3.4));
    p->vr = 0.9277 - 3.6224 / (p->b - 2);
}

static uint64_t pois_draw(struct rng *r, const struct pois *p)
{
    if (p->lambda == 0)
        return 0;
    if (p->lambda == 1) {
        uint32_t u = (uint32_t)(rng_next_u64(r) >> 32);
        unsigned k = 0;
        while (k < POIS1_MAX && u >= pois1_cdf[k])
            k++;
        return k;
    }
    if (p->lambda < 10) {
        double q = p->e, cdf = q, u = rng_uniform01(r);
        uint64_t k = 0;
        while (u > cdf && k < 200) {
            k++;
            q *= p->lambda / (double)k;
            cdf += q;
        }
        return k;
    }
    for (;;) {
        double u = rng_uniform01(r) - 0.5, v = rng_uniform01(r);
        double us = 0.5 - fabs(u);
        double k = floor((2 * p->a / us + p->b) * u + p->lambda + 0.43);
        if (us >= 0.07 && v <= p->vr)
            return (uint64_t)k;
        if (k < 0 || (us < 0.013 && v > us))
            continue;
        if (log(v) + p->log_invalpha - log(p->a / (us * us) + p->b) <=
            -p->lambda + k * p->loglam - lgamma(k + 1))
            return (uint64_t)k;
    }
}

/* ---- statistics of weighted sorted values ----------------------------------------- */

/* hdr.c's nearest rank of percentile p among total. */
static uint64_t rank_of(double p, uint64_t total)
{
    double lowered = nextafter(p, -INFINITY);
    double want = ceil((lowered > 0.0 ? lowered : 0.0) / 100.0 * (double)total);
    if (want >= (double)total)
        return total;
    return want < 1.0 ? 1 : (uint64_t)want;
}

struct wtarget {
    size_t row;
    bool mean;
    double pct;
};

/*
 * Every target statistic of n weighted values vp, ascending, whose weights
 * add up to total and whose weighted mean values add up to sum (targets
 * ordered by pct, means last). Writes NAN when the total weight is 0.
 */
static void weighted_stats(const double *vp, const uint64_t *w, size_t n, uint64_t total,
                           double sum, const struct wtarget *t, size_t nt, double *out)
{
    size_t i = 0;
    uint64_t cum = 0;

    for (size_t j = 0; j < nt; j++) {
        if (!total) {
            out[t[j].row] = NAN;
        } else if (t[j].mean) {
            out[t[j].row] = sum / (double)total;
        } else {
            uint64_t rank = rank_of(t[j].pct, total);
            while (i < n && cum + w[i] < rank)
                cum += w[i++];
            out[t[j].row] = vp[i < n ? i : n - 1];
        }
    }
}

/* ---- one run prepared for resampling ----------------------------------------------- */

/*
 * One latency metric of one run as groups of equal values: the requests'
 * distinct values, or the histogram's non-empty buckets. The Poisson
 * bootstrap draws a group of c values at once: the sum of c independent
 * Poisson(1) weights is Poisson(c).
 */
struct metric_data {
    bool used;
    bool from_requests;
    size_t n;          /* groups */
    double *vp, *vm;   /* ascending values (requests: vm == vp) */
    uint64_t *count;   /* values in each group */
    struct pois *ps;   /* count's sampler */
    uint64_t *w;       /* scratch: weights of one resample */
    struct wtarget *t; /* this metric's rows, ascending pct, means last */
    size_t nt;
};

/* The rates' groups: completions by output tokens (requests) and the counters. */
struct rate_data {
    size_t ntok;
    uint32_t *tokens; /* distinct output token counts of ok requests */
    struct pois *tok; /* sampler of how many ok requests had tokens[i] */
    struct pois ok, failed, good;
    /* recall@k: the non-empty bins of the recall distribution (their lower
     * edges, ascending) and a sampler of each one's count */
    size_t nrec;
    double *rec_v;
    struct pois *rec;
};

struct side {
    const struct compare_run *run;
    bool reqs_mode; /* rates from the requests */
    struct rng rng;
    struct rate_data rd;
    struct metric_data md[STAT_METRIC_COUNT];
    double *stats; /* resamples x nrows */
};

static void metric_data_release(struct metric_data *d)
{
    if (d->vm != d->vp)
        ts_free(d->vm);
    ts_free(d->vp);
    ts_free(d->count);
    ts_free(d->ps);
    ts_free(d->w);
    d->vp = d->vm = NULL;
    d->count = NULL;
    d->ps = NULL;
    d->w = NULL;
    d->n = 0;
}

static void side_release(struct side *s)
{
    for (int m = 0; m < STAT_METRIC_COUNT; m++) {
        metric_data_release(&s->md[m]);
        ts_free(s->md[m].t);
    }
    ts_free(s->rd.tokens);
    ts_free(s->rd.tok);
    ts_free(s->rd.rec_v);
    ts_free(s->rd.rec);
    ts_free(s->stats);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

static int group_alloc(struct metric_data *d, size_t n)
{
    size_t k = n ? n : 1;
    d->count = ts_malloc(k * sizeof(*d->count));
    d->ps = ts_malloc(k * sizeof(*d->ps));
    d->w = ts_malloc(k * sizeof(*d->w));
    return d->count && d->ps && d->w ? 0 : -ENOMEM;
}

/*
 * The requests' values of metric v as groups. Returns 0, -ENOMEM, or -E2BIG
 * when there are more than max distinct values (nothing kept then).
 */
static int prepare_requests(const struct compare_run *run, int v, size_t max, struct metric_data *d)
{
    size_t n = 0, g = 0;

    for (size_t i = 0; i < run->nreqs; i++)
        n += value_counts(v, &run->reqs[i]);
    d->vp = ts_malloc((n ? n : 1) * sizeof(*d->vp));
    if (!d->vp)
        return -ENOMEM;
    n = 0;
    for (size_t i = 0; i < run->nreqs; i++)
        if (value_counts(v, &run->reqs[i]))
            d->vp[n++] = run->reqs[i].v[v];
    qsort(d->vp, n, sizeof(*d->vp), cmp_double);
    for (size_t k = 0; k < n; k++)
        g += k == 0 || d->vp[k] != d->vp[k - 1];
    if (g > max) {
        metric_data_release(d);
        return -E2BIG;
    }
    if (group_alloc(d, g))
        return -ENOMEM;
    g = 0;
    for (size_t k = 0; k < n; k++) {
        if (k == 0 || d->vp[k] != d->vp[k - 1]) {
            d->vp[g] = d->vp[k];
            d->count[g++] = 0;
        }
        d->count[g - 1]++;
    }
    d->vm = d->vp;
    d->n = g;
    for (size_t k = 0; k < g; k++)
        pois_init(&d->ps[k], d->count[k]);
    return 0;
}

static int prepare_histogram(const struct hdr *h, struct metric_data *d)
{
    struct hdr_iter it;
    size_t n = 0;

    hdr_iter_recorded_init(&it, h);
    while (hdr_iter_next(&it))
        n++;
    d->vp = ts_malloc((n ? n : 1) * sizeof(*d->vp));
    d->vm = ts_malloc((n ? n : 1) * sizeof(*d->vm));
    if (!d->vp || !d->vm || group_alloc(d, n))
        return -ENOMEM;
    n = 0;
    hdr_iter_recorded_init(&it, h);
    while (hdr_iter_next(&it)) {
        d->vp[n] = (double)it.highest_equivalent / 1000.0;
        d->vm[n] = (double)hdr_median_equivalent(h, it.value) / 1000.0;
        d->count[n] = (uint64_t)it.count;
        pois_init(&d->ps[n], d->count[n]);
        n++;
    }
    d->n = n;
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The rates' samplers: from the requests (reqs_mode) or from the counters. */
static int prepare_rates(struct side *s)
{
    const struct compare_run *run = s->run;
    struct rate_data *rd = &s->rd;
    uint64_t ok = 0, failed = 0, good = 0;

    if (!s->reqs_mode) {
        pois_init(&rd->ok, run->stats->outcomes[REQ_OK]);
        pois_init(&rd->failed, run_stats_failed(run->stats));
        pois_init(&rd->good, run->stats->good);
        return 0;
    }
    bool gp = goodput_cfg_enabled(&run->goodput);
    rd->tokens = ts_malloc((run->nreqs ? run->nreqs : 1) * sizeof(*rd->tokens));
    if (!rd->tokens)
        return -ENOMEM;
    for (size_t i = 0; i < run->nreqs; i++) {
        const struct compare_req *q = &run->reqs[i];
        if (q->kind == CMP_REQ_OK) {
            rd->tokens[ok++] = q->output_tokens;
            good += gp && req_good(q, &run->goodput);
        } else if (q->kind == CMP_REQ_ERROR) {
            failed++;
        }
    }
    qsort(rd->tokens, ok, sizeof(*rd->tokens), cmp_u32);
    size_t g = 0;
    for (size_t k = 0; k < ok; k++)
        g += k == 0 || rd->tokens[k] != rd->tokens[k - 1];
    rd->tok = ts_malloc((g ? g : 1) * sizeof(*rd->tok));
    if (!rd->tok)
        return -ENOMEM;
    for (size_t k = 0, j = 0; k < ok; j++) {
        size_t e = k;
        while (e < ok && rd->tokens[e] == rd->tokens[k])
            e++;
        rd->tokens[j] = rd->tokens[k];
        pois_init(&rd->tok[j], e - k);
        k = e;
    }
    rd->ntok = g;
    pois_init(&rd->failed, failed);
    pois_init(&rd->good, good);
    return 0;
}

/* The recall distribution's bins as weighted values (from the counters in both modes). */
static int prepare_recall(struct side *s)
{
    const struct quality_dist *d = &s->run->stats->recall;
    struct rate_data *rd = &s->rd;
    size_t n = 0;
    for (size_t i = 0; i <= QUALITY_BINS; i++)
        n += d->bins[i] != 0;
    if (!n)
        return 0;
    rd->rec_v = ts_malloc(n * sizeof(*rd->rec_v));
    rd->rec = ts_malloc(n * sizeof(*rd->rec));
    if (!rd->rec_v || !rd->rec)
        return -ENOMEM;
    for (size_t i = 0; i <= QUALITY_BINS; i++) {
        if (!d->bins[i])
            continue;
        rd->rec_v[rd->nrec] = (double)i / QUALITY_BINS;
        pois_init(&rd->rec[rd->nrec++], d->bins[i]);
    }
    return 0;
}

/* One resample's recall mean and 5th percentile (NAN without searches). */
static void resample_recall(struct side *s, double *mean, double *p5)
{
    struct rate_data *rd = &s->rd;
    uint64_t w[QUALITY_BINS + 1], total = 0;
    double sum = 0;
    *mean = *p5 = NAN;
    for (size_t i = 0; i < rd->nrec; i++) {
        w[i] = pois_draw(&s->rng, &rd->rec[i]);
        total += w[i];
        sum += (double)w[i] * rd->rec_v[i];
    }
    if (!total)
        return;
    *mean = sum / (double)total;
    uint64_t want = rank_of(5, total), seen = 0;
    for (size_t i = 0; i < rd->nrec; i++) {
        seen += w[i];
        if (seen >= want) {
            *p5 = rd->rec_v[i];
            break;
        }
    }
}

static int cmp_target(const void *a, const void *b)
{
    const struct wtarget *x = a, *y = b;
    if (x->mean != y->mean)
        return x->mean ? 1 : -1;
    return x->pct < y->pct ? -1 : x->pct > y->pct ? 1 : 0;
}

/* The resampling state of one run, but for its latency metrics' groups. */
static int side_prepare(struct side *s, const struct compare_run *run, bool reqs_mode,
                        const struct compare_row *rows, size_t nrows, uint32_t resamples)
{
    memset(s, 0, sizeof(*s));
    s->run = run;
    s->reqs_mode = reqs_mode;
    s->stats = ts_malloc((size_t)resamples * nrows * sizeof(*s->stats));
    if (!s->stats)
        return -ENOMEM;
    for (size_t r = 0; r < nrows; r++) {
        if (!rows[r].metric.latency)
            continue;
        struct metric_data *d = &s->md[rows[r].metric.metric];
        if (!d->used) {
            d->used = true;
            d->t = ts_malloc(nrows * sizeof(*d->t));
            if (!d->t)
                return -ENOMEM;
        }
        d->t[d->nt++] =
            (struct wtarget){.row = r, .mean = rows[r].metric.mean, .pct = rows[r].metric.pct};
    }
    for (int m = 0; m < STAT_METRIC_COUNT; m++)
        if (s->md[m].used)
            qsort(s->md[m].t, s->md[m].nt, sizeof(*s->md[m].t), cmp_target);
    int rc = prepare_rates(s);
    return rc ? rc : prepare_recall(s);
}

/*
 * The groups of metric m for both sides: the requests' values when both runs
 * have them and neither has more than COMPARE_EXACT_GROUPS distinct values,
 * else the histograms. Sets *from_requests.
 */
static int prepare_metric(struct side *a, struct side *b, enum stat_metric m, bool reqs_mode,
                          bool *from_requests)
{
    int v = compare_metric_value(m);
    int rc;

    *from_requests = false;
    if (reqs_mode && v >= 0) {
        rc = prepare_requests(a->run, v, COMPARE_EXACT_GROUPS, &a->md[m]);
        if (!rc)
            rc = prepare_requests(b->run, v, COMPARE_EXACT_GROUPS, &b->md[m]);
        if (!rc) {
            a->md[m].from_requests = b->md[m].from_requests = *from_requests = true;
            return 0;
        }
        metric_data_release(&a->md[m]);
        metric_data_release(&b->md[m]);
        if (rc != -E2BIG)
            return rc;
    }
    if ((rc = prepare_histogram(a->run->stats->hist[m], &a->md[m])))
        return rc;
    return prepare_histogram(b->run->stats->hist[m], &b->md[m]);
}

/* The rates of one resample. */
static void resample_rates(struct side *s, double rate[CMP_SCALAR_COUNT])
{
    const struct compare_run *run = s->run;
    const struct run_stats *st = run->stats;
    struct rate_data *rd = &s->rd;
    double T = run->duration_s;
    uint64_t ok = 0;
    double tokens = 0;

    if (s->reqs_mode) {
        for (size_t j = 0; j < rd->ntok; j++) {
            uint64_t c = pois_draw(&s->rng, &rd->tok[j]);
            ok += c;
            tokens += (double)c * rd->tokens[j];
        }
    } else {
        uint64_t done = st->outcomes[REQ_OK];
        ok = pois_draw(&s->rng, &rd->ok);
        tokens = done ? (double)ok * (double)st->output_tokens / (double)done : 0;
    }
    uint64_t failed = pois_draw(&s->rng, &rd->failed);
    uint64_t good = pois_draw(&s->rng, &rd->good);
    rate[CMP_THROUGHPUT] = T > 0 ? (double)ok / T : NAN;
    rate[CMP_OUTPUT_THROUGHPUT] = T > 0 ? tokens / T : NAN;
    rate[CMP_GOODPUT] = T > 0 && goodput_cfg_enabled(&run->goodput) ? (double)good / T : NAN;
    rate[CMP_ERROR_RATE] = ok + failed ? (double)failed / (double)(ok + failed) : NAN;
}

/* Poisson(1) from 32 random bits: branch-free up to 5 (99.94% of draws). */
static inline unsigned pois1_of(uint32_t u)
{
    unsigned k = (u >= pois1_cdf[0]) + (u >= pois1_cdf[1]) + (u >= pois1_cdf[2]) +
                 (u >= pois1_cdf[3]) + (u >= pois1_cdf[4]) + (u >= pois1_cdf[5]);
    if (k == 6)
        while (k < POIS1_MAX && u >= pois1_cdf[k])
            k++;
    return k;
}

/*
 * One resample's weights of d's groups, with their total and the weighted
 * sum of the mean values. Groups of one value (most of them for per-request
 * values) take a Poisson(1) from half a random word.
 */
static void draw_weights(struct rng *r, struct metric_data *d, uint64_t *total, double *sum)
{
    uint64_t bits = 0, t = 0;
    double acc = 0;
    bool half = false;

    for (size_t k = 0; k < d->n; k++) {
        uint64_t w;
        if (d->count[k] != 1) {
            w = pois_draw(r, &d->ps[k]);
        } else {
            if (!half)
                bits = rng_next_u64(r);
            w = pois1_of(half ? (uint32_t)bits : (uint32_t)(bits >> 32));
            half = !half;
        }
        d->w[k] = w;
        t += w;
        acc += (double)w * d->vm[k];
    }
    *total = t;
    *sum = acc;
}

static void side_resample(struct side *s, const struct compare_row *rows, size_t nrows, double *out)
{
    double rate[CMP_SCALAR_COUNT];

    resample_rates(s, rate);
    for (size_t r = 0; r < nrows; r++)
        if (!rows[r].metric.latency)
            out[r] = rate[rows[r].metric.metric];
    for (int m = 0; m < STAT_METRIC_COUNT; m++) {
        struct metric_data *d = &s->md[m];
        if (!d->used)
            continue;
        uint64_t total;
        double sum;
        draw_weights(&s->rng, d, &total, &sum);
        weighted_stats(d->vp, d->w, d->n, total, sum, d->t, d->nt, out);
    }
    /* recall last: runs without it draw the same numbers as before it existed */
    double rec[2];
    resample_recall(s, &rec[0], &rec[1]);
    for (size_t r = 0; r < nrows; r++)
        if (!rows[r].metric.latency && rows[r].metric.metric >= CMP_RECALL)
            out[r] = rec[rows[r].metric.metric - CMP_RECALL];
}

/* ---- Mann-Whitney U --------------------------------------------------------------- */

void compare_mwu_groups(const struct compare_group *a, size_t na, const struct compare_group *b,
                        size_t nb, struct compare_mwu *out)
{
    double n1 = 0, n2 = 0, rank_b = 0, ties = 0, below = 0;
    size_t i = 0, j = 0;

    memset(out, 0, sizeof(*out));
    for (size_t k = 0; k < na; k++)
        n1 += (double)a[k].count;
    for (size_t k = 0; k < nb; k++)
        n2 += (double)b[k].count;
    out->n_base = (uint64_t)n1;
    out->n_new = (uint64_t)n2;
    out->z = NAN;
    out->p = NAN;
    out->u = NAN;
    out->effect = NAN;
    if (n1 == 0 || n2 == 0)
        return;
    while (i < na || j < nb) {
        double v;
        if (j >= nb || (i < na && a[i].value < b[j].value))
            v = a[i].value;
        else
            v = b[j].value;
        double ca = i < na && a[i].value == v ? (double)a[i++].count : 0;
        double cb = j < nb && b[j].value == v ? (double)b[j++].count : 0;
        double t = ca + cb;
        rank_b += cb * (below + (t + 1) / 2); /* the tie group's average rank */
        ties += t * t * t - t;
        below += t;
    }
    double n = n1 + n2;
    double u = rank_b - n2 * (n2 + 1) / 2;
    double mu = n1 * n2 / 2;
    double var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)));
    out->valid = true;
    out->u = u;
    out->effect = u / (n1 * n2);
    if (!(var > 0)) { /* every value tied: no evidence of a shift */
        out->z = 0;
        out->p = 1;
        return;
    }
    double d = fabs(u - mu) - 0.5;
    out->z = (d > 0 ? d : 0) * (u < mu ? -1 : 1) / sqrt(var);
    out->p = erfc(fabs(out->z) / sqrt(2.0));
}

/* The groups of metric d (already merged by value). */
static int groups_of(const struct metric_data *d, struct compare_group **out, size_t *nout)
{
    struct compare_group *g = ts_malloc((d->n ? d->n : 1) * sizeof(*g));

    if (!g)
        return -ENOMEM;
    for (size_t k = 0; k < d->n; k++)
        g[k] = (struct compare_group){.value = d->vp[k], .count = d->count[k]};
    *out = g;
    *nout = d->n;
    return 0;
}

static int metric_mwu(const struct metric_data *a, const struct metric_data *b,
                      struct compare_mwu *out)
{
    struct compare_group *ga = NULL, *gb = NULL;
    size_t na = 0, nb = 0;
    int rc = groups_of(a, &ga, &na);

    if (!rc)
        rc = groups_of(b, &gb, &nb);
    if (!rc)
        compare_mwu_groups(ga, na, gb, nb, out);
    ts_free(ga);
    ts_free(gb);
    return rc;
}

/* ---- intervals ---------------------------------------------------------------------- */

static double quantile_sorted(const double *v, size_t n, double q)
{
    double h = (double)(n - 1) * q;
    size_t lo = (size_t)floor(h);
    if (lo + 1 >= n)
        return v[n - 1];
    return v[lo] + (h - (double)lo) * (v[lo + 1] - v[lo]);
}

size_t compare_percentile_interval(double *v, size_t n, double alpha, double *lo, double *hi)
{
    size_t m = 0;

    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i]))
            v[m++] = v[i];
    *lo = *hi = NAN;
    if (m < 2)
        return m;
    qsort(v, m, sizeof(*v), cmp_double);
    *lo = quantile_sorted(v, m, alpha / 2);
    *hi = quantile_sorted(v, m, 1 - alpha / 2);
    return m;
}

/* ---- the comparison ------------------------------------------------------------------ */

static const enum stat_metric default_latency[] = {STAT_TTFT, STAT_TPOT, STAT_ITL, STAT_E2EL};
static const double default_pcts[] = {50, 90, 99};

static double point_estimate(const struct compare_run *run, const struct compare_metric *m)
{
    const struct run_stats *s = run->stats;
    double T = run->duration_s;

    if (m->latency) {
        const struct hdr *h = s->hist[m->metric];
        if (!hdr_total_count(h))
            return NAN;
        return m->mean ? hdr_mean(h) / 1000.0 : (double)hdr_value_at_percentile(h, m->pct) / 1000.0;
    }
    switch (m->metric) {
    case CMP_THROUGHPUT:
        return T > 0 ? (double)s->outcomes[REQ_OK] / T : NAN;
    case CMP_OUTPUT_THROUGHPUT:
        return T > 0 ? (double)s->output_tokens / T : NAN;
    case CMP_GOODPUT:
        return T > 0 && goodput_cfg_enabled(&run->goodput) ? (double)s->good / T : NAN;
    case CMP_RECALL:
        return s->recall.count ? quality_dist_mean(&s->recall) : NAN;
    case CMP_RECALL_P5:
        return s->recall.count ? quality_dist_percentile(&s->recall, 5) : NAN;
    default: {
        uint64_t judged = s->outcomes[REQ_OK] + run_stats_failed(s);
        return judged ? (double)run_stats_failed(s) / (double)judged : NAN;
    }
    }
}

static int add_row(struct compare_row *rows, size_t *n, const struct compare_metric *m)
{
    for (size_t i = 0; i < *n; i++)
        if (compare_metric_equal(&rows[i].metric, m))
            return (int)i;
    memset(&rows[*n], 0, sizeof(rows[*n]));
    rows[*n].metric = *m;
    compare_metric_name(m, rows[*n].name, sizeof(rows[*n].name));
    return (int)(*n)++;
}

/* Where a row's metric goes: the default latency metrics in their order, other latency metrics, the rates. */
static int group_of(const struct compare_metric *m)
{
    if (!m->latency)
        return 2 * STAT_METRIC_COUNT + m->metric;
    for (size_t i = 0; i < sizeof(default_latency) / sizeof(default_latency[0]); i++)
        if ((int)default_latency[i] == m->metric)
            return (int)i;
    return STAT_METRIC_COUNT + m->metric;
}

/* Rows grouped by metric; within a metric percentiles ascending, then the mean. */
static int cmp_row_order(const void *a, const void *b)
{
    const struct compare_metric *x = &((const struct compare_row *)a)->metric;
    const struct compare_metric *y = &((const struct compare_row *)b)->metric;
    int gx = group_of(x), gy = group_of(y);

    if (gx != gy)
        return gx < gy ? -1 : 1;
    if (x->mean != y->mean)
        return x->mean ? 1 : -1;
    return x->pct < y->pct ? -1 : x->pct > y->pct ? 1 : 0;
}

static void fill_change(struct compare_row *row)
{
    row->change = row->new_ - row->base;
    if (isnan(row->change))
        row->rel_change = NAN;
    else if (row->base != 0)
        row->rel_change = row->change / fabs(row->base);
    else
        row->rel_change = row->change > 0 ? INFINITY : row->change < 0 ? -INFINITY : 0;
}

/* Whether a side has enough samples for the row's statistic (compare.h). */
static bool enough_samples(const struct compare_run *run, const struct compare_metric *m)
{
    if (!m->latency && m->metric >= CMP_RECALL) /* a mean, or the 5th percentile */
        return (double)run->stats->recall.count * (m->metric == CMP_RECALL ? 1 : 0.05) >=
               COMPARE_MIN_TAIL;
    if (!m->latency)
        return true;
    double n = (double)hdr_total_count(run->stats->hist[m->metric]);
    double tail = m->mean ? 1 : fmin(m->pct, 100 - m->pct) / 100;
    return n * tail >= COMPARE_MIN_TAIL;
}

static bool is_significant(const struct compare_row *row, enum compare_test test, double alpha)
{
    bool ci = isfinite(row->ci_lo) && isfinite(row->ci_hi) && (row->ci_lo > 0 || row->ci_hi < 0);
    bool mwu = row->mwu.valid && row->mwu.p < alpha;

    if (!row->metric.latency || !row->mwu.valid)
        return ci;
    switch (test) {
    case CMP_TEST_MWU:
        return mwu;
    case CMP_TEST_BOTH:
        return ci && mwu;
    case CMP_TEST_EITHER:
        return ci || mwu;
    default:
        return ci;
    }
}

/* out zeroed, its arrays allocated for cap rows and nrules rules, and the settings noted. */
static int result_init(struct compare_result *out, size_t cap, size_t nrules,
                       const struct compare_cfg *cfg, double alpha, uint32_t resamples)
{
    memset(out, 0, sizeof(*out));
    out->rows = ts_calloc(cap, sizeof(*out->rows));
    out->rule_hit = ts_calloc(nrules ? nrules : 1, sizeof(*out->rule_hit));
    out->rule_row = ts_calloc(nrules ? nrules : 1, sizeof(*out->rule_row));
    if (!out->rows || !out->rule_hit || !out->rule_row)
        return -ENOMEM;
    out->nrules = nrules;
    out->alpha = alpha;
    out->resamples = resamples;
    out->seed = cfg->seed;
    out->test = cfg->test;
    return 0;
}

/*
 * The rows: p50, p90, p99 and the mean of the default latency metrics, the
 * rates, then each rule's metric; sorted for display (cmp_row_order), and
 * the row each rule judges noted. out->rows has room for all of them.
 */
static void add_rows(struct compare_result *out, const struct compare_rule *rules, size_t nrules,
                     bool recall)
{
    for (size_t i = 0; i < sizeof(default_latency) / sizeof(default_latency[0]); i++) {
        for (size_t k = 0; k < sizeof(default_pcts) / sizeof(default_pcts[0]); k++) {
            struct compare_metric m = {
                .latency = true, .metric = default_latency[i], .pct = default_pcts[k]};
            add_row(out->rows, &out->nrows, &m);
        }
        struct compare_metric m = {.latency = true, .metric = default_latency[i], .mean = true};
        add_row(out->rows, &out->nrows, &m);
    }
    for (int s = 0; s < (recall ? CMP_SCALAR_COUNT : CMP_RECALL); s++) {
        struct compare_metric m = {.metric = s};
        add_row(out->rows, &out->nrows, &m);
    }
    for (size_t i = 0; i < nrules; i++)
        add_row(out->rows, &out->nrows, &rules[i].metric);
    qsort(out->rows, out->nrows, sizeof(*out->rows), cmp_row_order);
    for (size_t i = 0; i < nrules; i++)
        out->rule_row[i] = (size_t)add_row(out->rows, &out->nrows, &rules[i].metric);
}

/*
 * The bootstrap: both sides' groups (from_req[m]: metric m from the
 * requests), then B resamples of every row into each side's stats, from two
 * streams forked off one seed so that the result depends only on it.
 */
static int bootstrap(struct side *sb, struct side *sn, const struct compare_run *base,
                     const struct compare_run *new_, const struct compare_result *out, bool reqs,
                     uint64_t seed, bool from_req[STAT_METRIC_COUNT])
{
    uint32_t B = out->resamples;
    struct rng root;
    int rc;

    if ((rc = side_prepare(sb, base, reqs, out->rows, out->nrows, B)) ||
        (rc = side_prepare(sn, new_, reqs, out->rows, out->nrows, B)))
        return rc;
    for (int m = 0; m < STAT_METRIC_COUNT; m++)
        if (sb->md[m].used &&
            (rc = prepare_metric(sb, sn, (enum stat_metric)m, reqs, &from_req[m])))
            return rc;
    rng_seed(&root, seed);
    rng_fork(&root, 0, &sb->rng);
    rng_fork(&root, 1, &sn->rng);
    for (uint32_t b = 0; b < B; b++) {
        side_resample(sb, out->rows, out->nrows, sb->stats + (size_t)b * out->nrows);
        side_resample(sn, out->rows, out->nrows, sn->stats + (size_t)b * out->nrows);
    }
    return 0;
}

/*
 * Row r's Mann-Whitney test: one test per metric, computed by the metric's
 * first row and copied by the others.
 */
static int row_mwu(struct compare_result *out, size_t r, const struct side *sb,
                   const struct side *sn)
{
    struct compare_row *row = &out->rows[r];
    const struct compare_metric *m = &row->metric;
    size_t first = 0;

    row->mwu.z = row->mwu.p = row->mwu.u = row->mwu.effect = NAN;
    if (!m->latency)
        return 0;
    while (!(out->rows[first].metric.latency && out->rows[first].metric.metric == m->metric))
        first++;
    if (first < r) {
        row->mwu = out->rows[first].mwu;
        return 0;
    }
    return metric_mwu(&sb->md[m->metric], &sn->md[m->metric], &row->mwu);
}

/*
 * Row r judged: both point estimates and their change, the interval of the
 * change from the resampled differences (diff: scratch for B of them), the
 * test, and whether the change is significant and which way.
 */
static int judge_row(struct compare_result *out, size_t r, const struct compare_run *base,
                     const struct compare_run *new_, const struct side *sb, const struct side *sn,
                     const struct compare_cfg *cfg, const bool from_req[STAT_METRIC_COUNT],
                     double *diff)
{
    struct compare_row *row = &out->rows[r];
    const struct compare_metric *m = &row->metric;
    uint32_t B = out->resamples;
    int rc;

    row->base = point_estimate(base, m);
    row->new_ = point_estimate(new_, m);
    fill_change(row);
    row->from_requests = m->latency ? from_req[m->metric] : out->requests_used;
    for (uint32_t b = 0; b < B; b++)
        diff[b] = sn->stats[(size_t)b * out->nrows + r] - sb->stats[(size_t)b * out->nrows + r];
    if (isnan(row->change)) {
        row->ci_lo = row->ci_hi = NAN;
    } else {
        row->resamples =
            (uint32_t)compare_percentile_interval(diff, B, out->alpha, &row->ci_lo, &row->ci_hi);
    }
    if ((rc = row_mwu(out, r, sb, sn)))
        return rc;
    row->few_samples = !enough_samples(base, m) || !enough_samples(new_, m);
    row->significant = !row->few_samples && is_significant(row, cfg->test, out->alpha);
    if (row->significant)
        row->direction = (row->change > 0) == compare_metric_lower_is_better(m) ? 1 : -1;
    return 0;
}

/* The rules' verdicts on their rows, and whether any regression holds. */
static void apply_rules(struct compare_result *out, const struct compare_rule *rules, size_t nrules,
                        bool need_significance)
{
    for (size_t i = 0; i < nrules; i++) {
        struct compare_row *row = &out->rows[out->rule_row[i]];
        out->rule_hit[i] = compare_rule_holds(&rules[i], row, need_significance);
        row->regression |= out->rule_hit[i];
        out->regression |= out->rule_hit[i];
    }
}

int compare_runs(const struct compare_run *base, const struct compare_run *new_,
                 const struct compare_cfg *cfg, const struct compare_rule *rules, size_t nrules,
                 struct compare_result *out)
{
    uint32_t B = cfg->resamples ? cfg->resamples : DEFAULT_RESAMPLES;
    double alpha = cfg->alpha > 0 ? cfg->alpha : DEFAULT_ALPHA;
    size_t cap =
        sizeof(default_latency) / sizeof(default_latency[0]) * 4 + CMP_SCALAR_COUNT + nrules;
    struct side sb, sn;
    bool from_req[STAT_METRIC_COUNT] = {false};
    double *diff = NULL;
    int rc;

    if (!base || !new_ || !base->stats || !new_->stats || B > COMPARE_MAX_RESAMPLES ||
        !(alpha > 0 && alpha <= 0.5))
        return -EINVAL;
    memset(&sb, 0, sizeof(sb));
    memset(&sn, 0, sizeof(sn));
    if ((rc = result_init(out, cap, nrules, cfg, alpha, B)))
        goto out_free_scratch;
    add_rows(out, rules, nrules, base->stats->recall.count || new_->stats->recall.count);
    out->requests_used =
        cfg->method == CMP_METHOD_AUTO && base->reqs && base->nreqs && new_->reqs && new_->nreqs;
    if ((rc = bootstrap(&sb, &sn, base, new_, out, out->requests_used, cfg->seed, from_req)))
        goto out_free_scratch;
    diff = ts_malloc((size_t)B * sizeof(*diff));
    if (!diff) {
        rc = -ENOMEM;
        goto out_free_scratch;
    }
    for (size_t r = 0; r < out->nrows; r++)
        if ((rc = judge_row(out, r, base, new_, &sb, &sn, cfg, from_req, diff)))
            goto out_free_scratch;
    apply_rules(out, rules, nrules, !cfg->no_significance);
out_free_scratch:
    /* the scratch always goes; the result only when it is not handed back */
    ts_free(diff);
    side_release(&sn);
    side_release(&sb);
    if (rc)
        compare_result_release(out);
    return rc;
}

void compare_result_release(struct compare_result *r)
{
    ts_free(r->rows);
    ts_free(r->rule_hit);
    ts_free(r->rule_row);
    r->rows = NULL;
    r->rule_hit = NULL;
    r->rule_row = NULL;
    r->nrows = r->nrules = 0;
}
