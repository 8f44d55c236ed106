#include "arrival.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/units.h"

#define STAGE_TEXT_MAX 256
#define T_NS_LIMIT     1.8e19 /* below 2^64 */

int arrival_process_parse(struct arrival_process *p, const char *spec, char *err, size_t errlen)
{
    const char *s = spec ? spec : "";
    if (strcasecmp(s, "constant") == 0) {
        p->kind = ARRIVAL_CONSTANT;
        p->burstiness = 1.0;
        return 0;
    }
    if (strcasecmp(s, "poisson") == 0) {
        p->kind = ARRIVAL_POISSON;
        p->burstiness = 1.0;
        return 0;
    }
    if (strncasecmp(s, "gamma", 5) == 0 && (s[5] == '\0' || s[5] == ':')) {
        const char *end;
        double b;
        if (s[5] != ':' || units_scan_number(s + 6, &end, &b) < 0 || *end != '\0') {
            ts_errf(err, errlen, "gamma: expected gamma:B with burstiness B > 0 (e.g. gamma:0.5)");
            return -EINVAL;
        }
        if (!(b > 0)) {
            ts_errf(err, errlen, "gamma: burstiness must be > 0 (got %g)", b);
            return -EINVAL;
        }
        p->kind = ARRIVAL_GAMMA;
        p->burstiness = b;
        return 0;
    }
    ts_errf(err, errlen, "unknown arrival process '%.64s' (expected poisson, constant or gamma:B)",
            s);
    return -EINVAL;
}

char *arrival_process_format(const struct arrival_process *p, char *buf, size_t n)
{
    if (!buf || n == 0)
        return buf;
    switch (p->kind) {
    case ARRIVAL_CONSTANT:
        snprintf(buf, n, "constant");
        break;
    case ARRIVAL_POISSON:
        snprintf(buf, n, "poisson");
        break;
    case ARRIVAL_GAMMA:
        snprintf(buf, n, "gamma:%g", p->burstiness);
        break;
    default:
        snprintf(buf, n, "?");
        break;
    }
    return buf;
}

/* Sets the process and its unit-mean increment distribution. */
static int arrival_setup(struct arrival *a, const struct arrival_process *p)
{
    memset(a, 0, sizeof(*a));
    if (!p)
        return -EINVAL;
    a->process = *p;
    switch (p->kind) {
    case ARRIVAL_CONSTANT:
        a->process.burstiness = 1.0;
        return dist_init_fixed(&a->unit_gap, 1.0);
    case ARRIVAL_POISSON:
        a->process.burstiness = 1.0;
        return dist_init_exponential(&a->unit_gap, 1.0);
    case ARRIVAL_GAMMA:
        if (!isfinite(p->burstiness) || !(p->burstiness > 0))
            return -EINVAL;
        return dist_init_gamma(&a->unit_gap, p->burstiness, 1.0 / p->burstiness);
    }
    return -EINVAL;
}

int arrival_init(struct arrival *a, const struct arrival_process *p, double rate)
{
    int rc = arrival_setup(a, p);
    if (rc < 0)
        return rc;
    if (!(rate > 0)) /* also rejects NaN */
        return -EINVAL;
    a->rate = rate;
    return 0;
}

int arrival_init_constant(struct arrival *a, double rate)
{
    struct arrival_process p = {ARRIVAL_CONSTANT, 1.0};
    return arrival_init(a, &p, rate);
}

int arrival_init_poisson(struct arrival *a, double rate)
{
    struct arrival_process p = {ARRIVAL_POISSON, 1.0};
    return arrival_init(a, &p, rate);
}

int arrival_init_gamma(struct arrival *a, double rate, double burstiness)
{
    struct arrival_process p = {ARRIVAL_GAMMA, burstiness};
    return arrival_init(a, &p, rate);
}

static bool rate_ok(double r)
{
    return isfinite(r) && r >= 0;
}

int arrival_init_stages(struct arrival *a, const struct arrival_process *p, double start_rate,
                        const struct arrival_stage *stages, size_t n)
{
    int rc = arrival_setup(a, p);
    if (rc < 0)
        return rc;
    if (!stages || n == 0 || n > ARRIVAL_STAGES_MAX || !rate_ok(start_rate))
        return -EINVAL;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!rate_ok(stages[i].target) || stages[i].duration_ns > UINT64_MAX - total)
            return -EINVAL;
        total += stages[i].duration_ns;
    }
    a->stages = ts_malloc(n * sizeof(*stages));
    if (!a->stages)
        return -ENOMEM;
    memcpy(a->stages, stages, n * sizeof(*stages));
    a->nstages = n;
    a->start_rate = start_rate;
    return 0;
}

int arrival_init_ramp(struct arrival *a, const struct arrival_process *p, double r0, double r1,
                      uint64_t duration_ns)
{
    struct arrival_stage st = {duration_ns, r1};
    return arrival_init_stages(a, p, r0, &st, 1);
}

int arrival_parse(struct arrival *a, const char *spec, double rate, char *err, size_t errlen)
{
    struct arrival_process p;
    memset(a, 0, sizeof(*a));
    int rc = arrival_process_parse(&p, spec, err, errlen);
    if (rc < 0)
        return rc;
    if (!(rate > 0)) {
        ts_errf(err, errlen, "arrival: rate must be > 0 (got %g)", rate);
        return -EINVAL;
    }
    return arrival_init(a, &p, rate);
}

/* Parses "DURATION:RATE" (item is modifiable, NUL-terminated). */
static int stage_parse(char *item, size_t index, struct arrival_stage *st, char *err, size_t errlen)
{
    char *colon = strchr(item, ':');
    if (!colon) {
        ts_errf(err, errlen, "stage %zu: expected DURATION:RATE (e.g. 30s:10), got '%s'", index,
                item);
        return -EINVAL;
    }
    *colon = '\0';
    if (units_parse_duration_ns(item, &st->duration_ns) < 0) {
        ts_errf(err, errlen, "stage %zu: bad duration '%s' (e.g. 30s)", index, item);
        return -EINVAL;
    }
    if (units_parse_rate(colon + 1, &st->target) < 0) {
        ts_errf(err, errlen, "stage %zu: bad rate '%s' (e.g. 10 or 600/m)", index, colon + 1);
        return -EINVAL;
    }
    return 0;
}

int arrival_parse_stages(struct arrival *a, const struct arrival_process *p, double start_rate,
                         const char *spec, char *err, size_t errlen)
{
    memset(a, 0, sizeof(*a));
    const char *s = spec ? spec : "";
    size_t n = 1;
    for (const char *q = s; *q; q++)
        n += *q == ',';
    if (!*s) {
        ts_errf(err, errlen,
                "stages: expected DURATION:RATE[,DURATION:RATE...] (e.g. 30s:10,1m:50)");
        return -EINVAL;
    }
    if (n > ARRIVAL_STAGES_MAX) {
        ts_errf(err, errlen, "stages: more than %d stages", ARRIVAL_STAGES_MAX);
        return -EINVAL;
    }
    struct arrival_stage *stages = ts_calloc(n, sizeof(*stages));
    if (!stages) {
        ts_errf(err, errlen, "stages: out of memory");
        return -ENOMEM;
    }
    int rc = 0;
    const char *q = s;
    for (size_t i = 0; i < n; i++) {
        const char *comma = strchr(q, ',');
        size_t len = comma ? (size_t)(comma - q) : strlen(q);
        char item[STAGE_TEXT_MAX];
        if (len >= sizeof(item)) {
            ts_errf(err, errlen, "stage %zu: longer than %d characters", i + 1, STAGE_TEXT_MAX - 1);
            rc = -EINVAL;
            goto out_free;
        }
        memcpy(item, q, len);
        item[len] = '\0';
        rc = stage_parse(item, i + 1, &stages[i], err, errlen);
        if (rc < 0)
            goto out_free;
        q = comma ? comma + 1 : q + len;
    }
    rc = arrival_init_stages(a, p, start_rate, stages, n);
    if (rc == -EINVAL)
        ts_errf(err, errlen, "stages: total duration too long, or a bad start rate or process");
    else if (rc < 0)
        ts_errf(err, errlen, "stages: out of memory");
out_free:
    ts_free(stages);
    return rc;
}

/* The rates at the start and end of stage i. */
static void stage_rates(const struct arrival *a, size_t i, double *r0, double *r1)
{
    *r0 = i == 0 ? a->start_rate : a->stages[i - 1].target;
    *r1 = a->stages[i].target;
}

/* Smallest x >= 0 with r*x + k*x^2/2 = mass (r >= 0, and the rate stays >= 0). */
static double ramp_solve(double r, double k, double mass)
{
    if (!(mass > 0))
        return 0.0;
    double disc = r * r + 2.0 * k * mass;
    if (disc < 0)
        disc = 0;
    double den = r + sqrt(disc);
    return den > 0 ? 2.0 * mass / den : 0.0;
}

static int staged_next(struct arrival *a, struct rng *r, uint64_t *t_ns)
{
    double need = dist_sample(&a->unit_gap, r);

    while (a->stage < a->nstages) {
        const struct arrival_stage *st = &a->stages[a->stage];
        double dur = (double)st->duration_ns * 1e-9;
        double r0, r1;
        stage_rates(a, a->stage, &r0, &r1);
        double k = dur > 0 ? (r1 - r0) / dur : 0.0;
        double x = a->stage_pos_s;
        double rx = r0 + k * x;
        if (rx < 0)
            rx = 0;
        double left = (dur - x) * 0.5 * (rx + r1);
        if (left > 0 && need <= left) {
            x += ramp_solve(rx, k, need);
            if (x > dur)
                x = dur;
            a->stage_pos_s = x;
            double off = floor(x * 1e9 + 0.5);
            uint64_t off_ns = off >= (double)st->duration_ns ? st->duration_ns : (uint64_t)off;
            *t_ns = a->stage_start_ns + off_ns;
            a->count++;
            return 0;
        }
        if (left > 0)
            need -= left;
        a->stage_start_ns += st->duration_ns;
        a->stage_pos_s = 0.0;
        a->stage++;
    }
    return TS_CLOSED;
}

int arrival_init_times(struct arrival *a, const uint64_t *times, size_t n, double speed, bool loop)
{
    memset(a, 0, sizeof *a);
    if (!n || !(speed > 0) || !isfinite(speed))
        return -EINVAL;
    a->times = ts_malloc(n * sizeof *a->times);
    if (!a->times)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (i && times[i] < times[i - 1]) {
            ts_free(a->times);
            a->times = NULL;
            return -EINVAL;
        }
        a->times[i] = (uint64_t)((double)times[i] / speed);
    }
    a->ntimes = n;
    if (loop) {
        uint64_t last = a->times[n - 1];
        a->period_ns = last + (n > 1 ? last / (n - 1) : 1000000000ull);
        if (!a->period_ns)
            a->period_ns = 1;
    }
    return dist_init_fixed(&a->unit_gap, 1.0);
}

int arrival_next(struct arrival *a, struct rng *r, uint64_t *t_ns)
{
    if (a->times) {
        if (!a->period_ns && a->count >= a->ntimes)
            return TS_CLOSED;
        uint64_t lap = a->count / a->ntimes;
        double t = (double)a->times[a->count % a->ntimes] + (double)lap * (double)a->period_ns;
        if (!(t < T_NS_LIMIT))
            return TS_CLOSED;
        a->count++;
        *t_ns = (uint64_t)t;
        return 0;
    }
    if (a->stages)
        return staged_next(a, r, t_ns);

    double t;
    if (isinf(a->rate) || a->count == 0) {
        t = 0.0;
    } else if (a->process.kind == ARRIVAL_CONSTANT) {
        t = floor((double)a->count * (1e9 / a->rate) + 0.5);
    } else {
        t = a->t_ns + dist_sample(&a->unit_gap, r) * (1e9 / a->rate);
    }
    if (!(t < T_NS_LIMIT))
        return TS_CLOSED;
    a->t_ns = t;
    a->count++;
    *t_ns = (uint64_t)floor(t + 0.5);
    return 0;
}

void arrival_reset(struct arrival *a)
{
    a->count = 0;
    a->t_ns = 0.0;
    a->stage = 0;
    a->stage_start_ns = 0;
    a->stage_pos_s = 0.0;
}

/*
 * Finds the stage holding t_ns: its index, the seconds into it, and the
 * expected count before it. False (and the whole expected count) past the end.
 */
static bool stage_find(const struct arrival *a, uint64_t t_ns, size_t *index, double *x_s,
                       double *expected_before)
{
    uint64_t start = 0;
    double before = 0.0;
    for (size_t i = 0; i < a->nstages; i++) {
        uint64_t dur = a->stages[i].duration_ns;
        double r0, r1;
        stage_rates(a, i, &r0, &r1);
        if (t_ns - start < dur) {
            *index = i;
            *x_s = (double)(t_ns - start) * 1e-9;
            *expected_before = before;
            return true;
        }
        before += (double)dur * 1e-9 * 0.5 * (r0 + r1);
        start += dur;
    }
    *expected_before = before;
    return false;
}

double arrival_rate_at(const struct arrival *a, uint64_t t_ns)
{
    if (!a->stages)
        return a->rate;
    size_t i;
    double x, before;
    if (!stage_find(a, t_ns, &i, &x, &before))
        return 0.0;
    double r0, r1;
    stage_rates(a, i, &r0, &r1);
    double dur = (double)a->stages[i].duration_ns * 1e-9;
    return r0 + (r1 - r0) * (x / dur);
}

double arrival_expected(const struct arrival *a, uint64_t t_ns)
{
    if (!a->stages)
        return a->rate * (double)t_ns * 1e-9;
    size_t i;
    double x, before;
    if (!stage_find(a, t_ns, &i, &x, &before))
        return before;
    double r0, r1;
    stage_rates(a, i, &r0, &r1);
    double dur = (double)a->stages[i].duration_ns * 1e-9;
    double rx = r0 + (r1 - r0) * (x / dur);
    return before + x * 0.5 * (r0 + rx);
}

uint64_t arrival_duration_ns(const struct arrival *a)
{
    uint64_t total = 0;
    for (size_t i = 0; i < a->nstages; i++)
        total += a->stages[i].duration_ns;
    return total;
}

void arrival_release(struct arrival *a)
{
    if (!a)
        return;
    ts_free(a->stages);
    a->stages = NULL;
    a->nstages = 0;
    ts_free(a->times);
    a->times = NULL;
    a->ntimes = 0;
    dist_release(&a->unit_gap);
}
