/*
 * knee.c - knee, critical-load fit, SLO bracket and least squares (knee.h).
 */
#include "analysis/knee.h"

#include <math.h>

static bool all_finite(const double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return false;
    return true;
}

/* Two-pass sums about the means: stable for loads in the thousands. */
int linfit_compute(const double *x, const double *y, size_t n, struct linfit *out)
{
    double mx = 0, my = 0, sxx = 0, sxy = 0, syy = 0, sse;

    if (n < 2 || !all_finite(x, n) || !all_finite(y, n))
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        mx += x[i];
        my += y[i];
    }
    mx /= (double)n;
    my /= (double)n;
    for (size_t i = 0; i < n; i++) {
        double dx = x[i] - mx, dy = y[i] - my;
        sxx += dx * dx;
        sxy += dx * dy;
        syy += dy * dy;
    }
    if (!(sxx > 0))
        return -EINVAL;
    out->n = n;
    out->slope = sxy / sxx;
    out->intercept = my - out->slope * mx;
    sse = syy - out->slope * sxy;
    if (sse < 0 || sse < 1e-12 * syy)
        sse = 0; /* rounding of an exact fit */
    out->r2 = syy > 0 ? 1 - sse / syy : 1;
    if (n == 2) {
        out->slope_se = NAN;
        out->t = NAN;
        return 0;
    }
    out->slope_se = sqrt(sse / (double)(n - 2) / sxx);
    if (out->slope_se > 0)
        out->t = out->slope / out->slope_se;
    else
        out->t = out->slope > 0 ? INFINITY : out->slope < 0 ? -INFINITY : 0;
    return 0;
}

double student_t_995(size_t dof)
{
    static const struct {
        size_t dof;
        double t;
    } table[] = {
        {1, 63.657}, {2, 9.925},  {3, 5.841},  {4, 4.604},  {5, 4.032},  {6, 3.707},
        {7, 3.499},  {8, 3.355},  {9, 3.250},  {10, 3.169}, {12, 3.055}, {15, 2.947},
        {20, 2.845}, {25, 2.787}, {30, 2.750}, {40, 2.704}, {60, 2.660}, {120, 2.617},
    };
    size_t n = sizeof(table) / sizeof(table[0]);

    if (dof == 0)
        return NAN;
    if (dof > 1000)
        return 2.576;
    for (size_t i = n; i-- > 0;)
        if (table[i].dof <= dof)
            return table[i].t;
    return table[0].t;
}

bool linfit_rising(const struct linfit *f)
{
    return f->n > 2 && f->slope > 0 && f->t >= student_t_995(f->n - 2);
}

int knee_find(const double *x, const double *y, size_t n, double min_score, struct knee *out)
{
    double ymin, ymax, xr, yr, best = -INFINITY;
    size_t at = 0;

    if (n < 3 || !all_finite(x, n) || !all_finite(y, n) || !isfinite(min_score))
        return -EINVAL;
    ymin = ymax = y[0];
    for (size_t i = 1; i < n; i++) {
        if (!(x[i] > x[i - 1]))
            return -EINVAL;
        ymin = y[i] < ymin ? y[i] : ymin;
        ymax = y[i] > ymax ? y[i] : ymax;
    }
    xr = x[n - 1] - x[0];
    yr = ymax - ymin;
    if (!(yr > 0) || !(y[n - 1] > y[0]))
        return -ENOENT;
    for (size_t i = 1; i + 1 < n; i++) {
        double d = (x[i] - x[0]) / xr - (y[i] - ymin) / yr;
        if (d > best) {
            best = d;
            at = i;
        }
    }
    if (!(best >= min_score))
        return -ENOENT;
    out->index = at;
    out->x = x[at];
    out->y = y[at];
    out->score = best;
    return 0;
}

#define CRITICAL_MAX_POINTS 1024

int critical_fit_compute(const double *load, const double *eps, size_t n, double epsilon0,
                         size_t min_points, struct critical_fit *out)
{
    double lx[CRITICAL_MAX_POINTS], ly[CRITICAL_MAX_POINTS];
    struct linfit f;
    size_t m = 0;

    if (!(epsilon0 > 0 && epsilon0 < 1) || min_points < 2 || n > CRITICAL_MAX_POINTS ||
        !all_finite(load, n) || !all_finite(eps, n))
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (eps[i] > 0 && eps[i] < 1) {
            lx[m] = load[i];
            ly[m] = log(eps[i]);
            m++;
        }
    }
    if (m < min_points || linfit_compute(lx, ly, m, &f) || !(f.slope > 0))
        return -ENOENT;
    out->delta_lambda = 1 / f.slope;
    out->lambda_c = (log(epsilon0) - f.intercept) / f.slope;
    out->epsilon0 = epsilon0;
    out->r2 = f.r2;
    out->points = m;
    return 0;
}

int goodput_bracket_find(const double *load, const bool *pass, size_t n,
                         struct goodput_bracket *out)
{
    if (n == 0 || !all_finite(load, n))
        return -EINVAL;
    for (size_t i = 1; i < n; i++)
        if (!(load[i] > load[i - 1]))
            return -EINVAL;
    out->pass = -1;
    out->fail = -1;
    for (size_t i = 0; i < n; i++) {
        if (!pass[i]) {
            out->fail = (long)i;
            break;
        }
        out->pass = (long)i;
    }
    return 0;
}

bool bisect_next(double lo, double hi, double rel_tol, double *next)
{
    if (!isfinite(lo) || !isfinite(hi) || !isfinite(rel_tol) || !(lo < hi))
        return false;
    if (hi - lo <= rel_tol * fabs(hi))
        return false;
    *next = lo + (hi - lo) / 2;
    return true;
}

const char *critical_fit_not_meaningful(double lambda_c, double r2, double lmax)
{
    if (!isfinite(lambda_c) || !isfinite(r2))
        return "no fit";
    if (r2 < CRITICAL_MIN_R2)
        return "the error rate does not follow an exponential (R^2 below 0.8)";
    if (lambda_c <= 0)
        return "the fit puts it at no load at all (lambda_c <= 0)";
    if (isfinite(lmax) && lmax > 0 && lambda_c > CRITICAL_MAX_REACH * lmax)
        return "the fit puts it far beyond the loads measured";
    return NULL;
}
