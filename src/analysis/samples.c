/*
 * samples.c - exact latency samples and numpy's statistics over them (see
 * samples.h).
 */
#include "analysis/samples.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

void samples_init(struct samples *s, size_t max)
{
    memset(s, 0, sizeof(*s));
    s->max = max ? max : SAMPLES_MAX;
}

void samples_release(struct samples *s)
{
    size_t max = s->max;
    ts_free(s->v);
    samples_init(s, max);
}

void samples_clear(struct samples *s)
{
    s->n = 0;
    s->dropped = 0;
    s->not_kept = false;
}

/* Room for at least want values (want <= max); false without memory. */
static bool samples_reserve(struct samples *s, size_t want)
{
    if (want <= s->alloc)
        return true;
    size_t alloc = s->alloc ? s->alloc : 256;
    while (alloc < want)
        alloc *= 2;
    if (alloc > s->max)
        alloc = s->max;
    int64_t *v = ts_realloc(s->v, alloc * sizeof(*v));
    if (!v)
        return false;
    s->v = v;
    s->alloc = alloc;
    return true;
}

void samples_add(struct samples *s, int64_t ns)
{
    if (s->n >= s->max || !samples_reserve(s, s->n + 1)) {
        s->dropped++;
        return;
    }
    s->v[s->n++] = ns;
}

void samples_mark_not_kept(struct samples *s)
{
    s->not_kept = true;
}

void samples_merge(struct samples *dst, const struct samples *src)
{
    size_t take = src->n;
    if (take > dst->max - dst->n)
        take = dst->max - dst->n;
    while (take && !samples_reserve(dst, dst->n + take))
        take /= 2;
    if (take)
        memcpy(dst->v + dst->n, src->v, take * sizeof(*src->v));
    dst->n += take;
    dst->dropped += src->dropped + (src->n - take);
    dst->not_kept |= src->not_kept;
}

enum samples_loss samples_loss(const struct samples *s)
{
    if (s->not_kept)
        return SAMPLES_NOT_KEPT;
    return s->dropped ? SAMPLES_OVER_CAP : SAMPLES_COMPLETE;
}

bool samples_exact(const struct samples *s)
{
    return samples_loss(s) == SAMPLES_COMPLETE;
}

const char *samples_loss_name(enum samples_loss l)
{
    switch (l) {
    case SAMPLES_COMPLETE:
        return "complete";
    case SAMPLES_OVER_CAP:
        return "over_cap";
    case SAMPLES_NOT_KEPT:
        return "not_kept";
    }
    return "unknown";
}

double samples_percentile_sorted(const double *v, size_t n, double p)
{
    double rank = p / 100.0 * (double)(n - 1);
    size_t lo = (size_t)floor(rank);
    if (lo >= n - 1)
        return v[n - 1];
    double t = rank - (double)lo;
    double a = v[lo], b = v[lo + 1], d = b - a;
    return t >= 0.5 ? b - d * (1.0 - t) : a + d * t;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int samples_compute_ms(const struct samples *s, const double *p, size_t npct,
                       struct samples_stats *st, double *pct)
{
    memset(st, 0, sizeof(*st));
    for (size_t i = 0; i < npct; i++)
        pct[i] = 0;
    if (!s->n)
        return 0;
    double *ms = ts_malloc(s->n * sizeof(*ms));
    if (!ms)
        return -ENOMEM;
    double sum = 0;
    for (size_t i = 0; i < s->n; i++) {
        ms[i] = (double)s->v[i] / 1e6;
        sum += ms[i];
    }
    double mean = sum / (double)s->n, dev = 0;
    for (size_t i = 0; i < s->n; i++)
        dev += (ms[i] - mean) * (ms[i] - mean);
    qsort(ms, s->n, sizeof(*ms), cmp_double);
    st->count = s->n;
    st->mean = mean;
    st->std = sqrt(dev / (double)s->n);
    st->min = ms[0];
    st->max = ms[s->n - 1];
    for (size_t i = 0; i < npct; i++)
        pct[i] = samples_percentile_sorted(ms, s->n, p[i]);
    ts_free(ms);
    return 0;
}
