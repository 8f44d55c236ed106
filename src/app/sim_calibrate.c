#include "app/sim_calibrate.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/dist.h"
#include "base/file.h"
#include "base/rng.h"
#include "report/runfiles.h"

#define SWEEP_JSON_MAX ((size_t)64 << 20)
#define FIT_TOLERANCE  0.15 /* an error past this after fitting is a warning */

/* ---- points ---- */

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static double num_at(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_number(v) ? json_number_value(v) : -1;
}

/* The lognormal sigma with the spread of a length spec (its coefficient of variation). */
static double spec_sigma(const char *spec)
{
    struct dist d;
    if (!spec || dist_parse(&d, spec, NULL, 0) != 0)
        return 0.5;
    struct rng r;
    rng_seed(&r, 1);
    double s = 0, s2 = 0;
    const int n = 4000;
    for (int i = 0; i < n; i++) {
        double v = dist_sample(&d, &r);
        s += v;
        s2 += v * v;
    }
    dist_release(&d);
    double mean = s / n, var = s2 / n - mean * mean;
    if (!(mean > 0) || !(var > 0))
        return 0;
    double sigma = sqrt(log(1 + var / (mean * mean)));
    return sigma > 3 ? 3 : sigma;
}

int calib_point_from_result(const json_t *doc, const char *label, struct calib_point *pt, char *err,
                            size_t errlen)
{
    memset(pt, 0, sizeof(*pt));
    snprintf(pt->label, sizeof(pt->label), "%s", label);
    const json_t *run = json_object_get(doc, "run"), *sum = json_object_get(doc, "summary");
    const char *mode = json_string_value(json_object_get(run, "mode"));
    if (!json_is_object(run) || !json_is_object(sum) || !mode) {
        ts_errf(err, errlen, "%s: not a run result (no run.mode or summary)", label);
        return TS_PARSE;
    }
    if (json_is_false(json_object_get(run, "stream"))) {
        ts_errf(err, errlen, "%s: a non-streamed run has no TTFT to fit", label);
        return TS_PARSE;
    }
    double completed = num_at(sum, "completed");
    double in = num_at(sum, "total_input_tokens"), out = num_at(sum, "total_output_tokens");
    if (!(completed >= 1) || !(in >= completed) || !(out >= completed)) {
        ts_errf(err, errlen, "%s: no completed requests with token counts", label);
        return TS_PARSE;
    }
    struct sim_offline_load *l = &pt->load;
    l->in_mean = in / completed;
    l->out_mean = out / completed;
    l->in_sigma = spec_sigma(json_string_value(json_object_get(run, "input_len")));
    l->out_sigma = spec_sigma(json_string_value(json_object_get(run, "output_len")));
    l->seed = 7;
    if (strcmp(mode, "closed") == 0) {
        double users = num_at(run, "users");
        if (!(users >= 1 && users <= 10000)) {
            ts_errf(err, errlen, "%s: run.users must be 1 .. 10000", label);
            return TS_PARSE;
        }
        l->mode = SIM_LOAD_CLOSED;
        l->concurrency = (uint32_t)users;
        l->requests = l->concurrency * 6 < 40 ? 40 : l->concurrency * 6;
    } else if (strcmp(mode, "open") == 0) {
        double rate = num_at(run, "rate");
        const char *arrival = json_string_value(json_object_get(run, "arrival"));
        if (!(rate > 0 && rate <= 1e5) || json_object_get(run, "stages") ||
            json_object_get(run, "ramp_to")) {
            ts_errf(err, errlen, "%s: an open loop needs a constant run.rate (no stages)", label);
            return TS_PARSE;
        }
        if ((arrival && strcmp(arrival, "poisson") != 0) ||
            json_object_get(run, "max_concurrency")) {
            ts_errf(err, errlen,
                    "%s: only Poisson arrivals without a concurrency cap are replayed (this run "
                    "has %s)",
                    label, json_object_get(run, "max_concurrency") ? "a cap" : arrival);
            return TS_PARSE;
        }
        l->mode = SIM_LOAD_POISSON;
        l->rate = rate;
        l->requests = completed < 200 ? 200 : completed > 2000 ? 2000 : (uint32_t)completed;
    } else {
        ts_errf(err, errlen, "%s: a %s run cannot be calibrated against (open or closed only)",
                label, mode);
        return TS_PARSE;
    }
    pt->ttft_ms = num_at(sum, "median_ttft_ms");
    pt->tpot_ms = num_at(sum, "median_tpot_ms");
    /* an open loop's throughput is its offered load (its saturation shows in TTFT) */
    pt->tok_s = l->mode == SIM_LOAD_CLOSED ? num_at(sum, "output_throughput") : -1;
    if (!(pt->ttft_ms > 0) && !(pt->tpot_ms > 0)) {
        ts_errf(err, errlen, "%s: no TTFT or TPOT measured", label);
        return TS_PARSE;
    }
    return 0;
}

static int load_one(const char *path, const char *label, struct calib_point *pts, size_t *n,
                    char *err, size_t errlen)
{
    if (*n >= CALIB_POINTS_MAX) {
        ts_errf(err, errlen, "%s: more than %d points", label, CALIB_POINTS_MAX);
        return -E2BIG;
    }
    json_t *doc = NULL;
    int rc = runfiles_load_result(path, &doc, err, errlen);
    if (rc)
        return rc;
    rc = calib_point_from_result(doc, label, &pts[*n], err, errlen);
    json_decref(doc);
    if (rc == 0)
        (*n)++;
    return rc;
}

static int load_sweep(const char *dir, const char *path, struct calib_point *pts, size_t *n,
                      char *err, size_t errlen)
{
    char *data = NULL;
    size_t len = 0;
    int rc = file_read_all(path, SWEEP_JSON_MAX, &data, &len, err, errlen);
    if (rc)
        return rc;
    json_error_t je;
    json_t *doc = json_loadb(data ? data : "", len, JSON_REJECT_DUPLICATES, &je);
    ts_free(data);
    if (!doc) {
        ts_errf(err, errlen, "%s:%d:%d: %s", path, je.line, je.column, je.text);
        return TS_PARSE;
    }
    const json_t *steps = json_object_get(doc, "steps");
    if (!json_is_array(steps)) {
        ts_errf(err, errlen, "%s: not a sweep (no steps)", path);
        json_decref(doc);
        return TS_PARSE;
    }
    size_t i;
    const json_t *st;
    rc = 0;
    json_array_foreach(steps, i, st)
    {
        const char *sd = json_string_value(json_object_get(st, "dir"));
        char p[RUNFILES_PATH_MAX], label[160];
        if (!sd || strchr(sd, '/') || strcmp(sd, "..") == 0 ||
            snprintf(p, sizeof(p), "%s/%s/result.json", dir, sd) >= (int)sizeof(p)) {
            ts_errf(err, errlen, "%s: step %zu has a bad dir", path, i + 1);
            rc = TS_PARSE;
            break;
        }
        snprintf(label, sizeof(label), "%s/%s", dir, sd);
        if ((rc = load_one(p, label, pts, n, err, errlen)) != 0)
            break;
    }
    json_decref(doc);
    return rc;
}

int calib_load_dir(const char *dir, struct calib_point *pts, size_t *n, char *err, size_t errlen)
{
    char p[RUNFILES_PATH_MAX];
    if (snprintf(p, sizeof(p), "%s/sweep.json", dir) >= (int)sizeof(p)) {
        ts_errf(err, errlen, "%s: path too long", dir);
        return -ENAMETOOLONG;
    }
    if (file_exists(p))
        return load_sweep(dir, p, pts, n, err, errlen);
    snprintf(p, sizeof(p), "%s/result.json", dir);
    return load_one(file_exists(p) ? p : dir, dir, pts, n, err, errlen);
}

/* ---- the fit ---- */

struct fit {
    struct sim_profile base;
    const struct calib_opts *o;
    size_t nkeys;
    struct calib_point *pts;
    size_t n;
    unsigned evals;
};

static double log_ratio2(double model, double measured)
{
    if (!(measured > 0))
        return 0;
    if (!(model > 0))
        return 25; /* (ln 150)^2: nothing came out */
    double r = log(model / measured);
    return r * r;
}

/* Sets the keys to exp(x); false when a value is out of range or the profile is invalid. */
static bool apply(const struct fit *f, const double *x, struct sim_profile *p)
{
    *p = f->base;
    for (size_t k = 0; k < f->nkeys; k++) {
        char v[40];
        snprintf(v, sizeof(v), "%.9g", exp(x[k]));
        if (sim_profile_set(p, f->o->keys[k], v, NULL, 0) != 0)
            return false;
    }
    return sim_profile_validate(p, NULL, 0) == 0;
}

static double cost(struct fit *f, const double *x, bool keep)
{
    struct sim_profile p;
    f->evals++;
    if (!apply(f, x, &p))
        return 1e9;
    double c = 0;
    for (size_t i = 0; i < f->n; i++) {
        struct calib_point *pt = &f->pts[i];
        struct sim_offline_result r;
        if (sim_offline_run(&p, &pt->load, &r, NULL, 0) != 0)
            return 1e9;
        c += log_ratio2(r.ttft_med_ms, pt->ttft_ms) + log_ratio2(r.tpot_med_ms, pt->tpot_ms) +
             log_ratio2(r.out_tok_per_s, pt->tok_s);
        if (keep) {
            pt->m_ttft_ms = r.ttft_med_ms;
            pt->m_tpot_ms = r.tpot_med_ms;
            pt->m_tok_s = r.out_tok_per_s;
            pt->m_running = r.max_running;
        }
    }
    return c;
}

/* Nelder-Mead over nkeys dimensions (standard coefficients); best vertex into x[0]. */
static void nelder_mead(struct fit *f, double x[][CALIB_KEYS_MAX], unsigned max_evals)
{
    size_t d = f->nkeys;
    double fx[CALIB_KEYS_MAX + 1];
    for (size_t i = 0; i <= d; i++)
        fx[i] = cost(f, x[i], false);
    while (f->evals < max_evals) {
        /* order: best first */
        for (size_t i = 1; i <= d; i++)
            for (size_t j = i; j > 0 && fx[j] < fx[j - 1]; j--) {
                double t = fx[j];
                fx[j] = fx[j - 1];
                fx[j - 1] = t;
                for (size_t k = 0; k < d; k++) {
                    double u = x[j][k];
                    x[j][k] = x[j - 1][k];
                    x[j - 1][k] = u;
                }
            }
        if (fx[d] - fx[0] < 1e-7 * (1 + fx[0]))
            break;
        double c[CALIB_KEYS_MAX] = {0}, xr[CALIB_KEYS_MAX], xe[CALIB_KEYS_MAX];
        for (size_t i = 0; i < d; i++)
            for (size_t k = 0; k < d; k++)
                c[k] += x[i][k] / (double)d;
        for (size_t k = 0; k < d; k++)
            xr[k] = c[k] + (c[k] - x[d][k]);
        double fr = cost(f, xr, false);
        if (fr < fx[0]) {
            for (size_t k = 0; k < d; k++)
                xe[k] = c[k] + 2 * (c[k] - x[d][k]);
            double fe = cost(f, xe, false);
            memcpy(x[d], fe < fr ? xe : xr, d * sizeof(double));
            fx[d] = fe < fr ? fe : fr;
        } else if (fr < fx[d - 1]) {
            memcpy(x[d], xr, d * sizeof(double));
            fx[d] = fr;
        } else {
            for (size_t k = 0; k < d; k++)
                xe[k] = c[k] + 0.5 * (x[d][k] - c[k]); /* inside contraction */
            double fc = cost(f, xe, false);
            if (fc < fx[d]) {
                memcpy(x[d], xe, d * sizeof(double));
                fx[d] = fc;
            } else {
                for (size_t i = 1; i <= d; i++) { /* shrink towards the best */
                    for (size_t k = 0; k < d; k++)
                        x[i][k] = x[0][k] + 0.5 * (x[i][k] - x[0][k]);
                    fx[i] = cost(f, x[i], false);
                }
            }
        }
    }
}

int calib_fit(struct sim_profile *p, const struct calib_opts *o, struct calib_point *pts, size_t n,
              char *err, size_t errlen)
{
    struct fit f = {.base = *p, .o = o, .pts = pts, .n = n};
    f.base.noise = false;
    double x[CALIB_KEYS_MAX + 1][CALIB_KEYS_MAX];
    while (f.nkeys < CALIB_KEYS_MAX && o->keys[f.nkeys])
        f.nkeys++;
    if (f.nkeys == 0 || o->keys[f.nkeys]) {
        ts_errf(err, errlen, "--fit: 1 to %d keys", CALIB_KEYS_MAX);
        return -EINVAL;
    }
    for (size_t k = 0; k < f.nkeys; k++) {
        char v[64];
        double val;
        if (sim_profile_get(p, o->keys[k], v, sizeof(v)) != 0 ||
            sim_profile_set(&f.base, o->keys[k], "0.001", NULL, 0) != 0 ||
            sscanf(v, "%lf", &val) != 1) {
            ts_errf(err, errlen, "--fit: '%s' is not a numeric profile key in milliseconds",
                    o->keys[k]);
            return -EINVAL;
        }
        if (!(val > 1e-3))
            val = 0.01; /* start a key that is 0 (off) from a small cost */
        for (size_t i = 0; i <= f.nkeys; i++)
            x[i][k] = log(val) + (i == k + 1 ? log(3.0) : 0);
    }
    f.base = *p;
    f.base.noise = false;
    char verr[256];
    if (sim_profile_validate(&f.base, verr, sizeof(verr)) != 0) {
        ts_errf(err, errlen, "base profile: %s", verr);
        return -EINVAL;
    }
    /* Restarts around the best vertex get a simplex that collapsed on a plateau
     * (a key far below its true value changes nothing) moving again. */
    unsigned max_evals = o->max_evals ? o->max_evals : 400;
    for (int restart = 0; restart < 4 && f.evals < max_evals; restart++) {
        if (restart)
            for (size_t i = 1; i <= f.nkeys; i++)
                for (size_t k = 0; k < f.nkeys; k++)
                    x[i][k] = x[0][k] + (i == k + 1 ? log(3.0) : 0);
        nelder_mead(&f, x, max_evals);
    }
    cost(&f, x[0], true);
    struct sim_profile best;
    if (!apply(&f, x[0], &best)) {
        ts_errf(err, errlen, "the fit left the profile's ranges");
        return -EINVAL;
    }
    best.noise = p->noise;
    *p = best;
    return 0;
}

/* ---- the report ---- */

static double pct(double model, double measured)
{
    return measured > 0 ? (model / measured - 1) * 100 : 0;
}

static int warn_points(FILE *out, const struct calib_point *pts, size_t n)
{
    int warnings = 0;
    for (size_t i = 0; i < n; i++) {
        const struct calib_point *pt = &pts[i];
        const double e[3] = {pct(pt->m_ttft_ms, pt->ttft_ms), pct(pt->m_tpot_ms, pt->tpot_ms),
                             pct(pt->m_tok_s, pt->tok_s)};
        static const char *const names[3] = {"TTFT", "TPOT", "output tokens/s"};
        for (int m = 0; m < 3; m++) {
            if (fabs(e[m]) > FIT_TOLERANCE * 100) {
                fprintf(out, "# warning: %s: the model's %s is off by %+.0f%% after fitting\n",
                        pt->label, names[m], e[m]);
                warnings++;
            }
        }
    }
    /* TPOT still growing where the model's batch stopped growing */
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < n; j++) {
            const struct calib_point *a = &pts[i], *b = &pts[j];
            if (a->load.mode != SIM_LOAD_CLOSED || b->load.mode != SIM_LOAD_CLOSED ||
                b->load.concurrency <= a->load.concurrency || a->m_running == 0 ||
                a->m_running >= a->load.concurrency || b->m_running != a->m_running)
                continue;
            if (b->tpot_ms > 1.2 * a->tpot_ms && b->m_tpot_ms < 1.1 * a->m_tpot_ms) {
                fprintf(out,
                        "# warning: measured TPOT keeps growing past the model's batch cap "
                        "(%u seqs): %.1f ms at %u users, %.1f ms at %u; the server does not cap "
                        "its batch the way the model does (time-sliced slots, llama.cpp-like?), "
                        "so this profile understates its latency beyond %u users\n",
                        a->m_running, a->tpot_ms, a->load.concurrency, b->tpot_ms,
                        b->load.concurrency, a->m_running);
                return warnings + 1;
            }
        }
    }
    return warnings;
}

int calib_print(FILE *out, const struct sim_profile *p, const struct calib_opts *o,
                const struct calib_point *pts, size_t n)
{
    fprintf(out, "# tokenstorm sim calibrate: %zu point%s; load with tokenstorm sim --config\n", n,
            n == 1 ? "" : "s");
    fprintf(out, "base: %s\n", o->base);
    for (size_t k = 0; o->keys[k]; k++) {
        char v[64];
        if (sim_profile_get(p, o->keys[k], v, sizeof(v)) == 0)
            fprintf(out, "%s: %s\n", o->keys[k], v);
    }
    fprintf(out, "# %-44s %-16s %10s %10s %7s\n", "point", "metric", "measured", "model", "error");
    for (size_t i = 0; i < n; i++) {
        const struct calib_point *pt = &pts[i];
        char where[200];
        if (pt->load.mode == SIM_LOAD_CLOSED)
            snprintf(where, sizeof(where), "%.100s (%u users)", pt->label, pt->load.concurrency);
        else
            snprintf(where, sizeof(where), "%.100s (%g req/s)", pt->label, pt->load.rate);
        const double meas[3] = {pt->ttft_ms, pt->tpot_ms, pt->tok_s};
        const double mod[3] = {pt->m_ttft_ms, pt->m_tpot_ms, pt->m_tok_s};
        static const char *const names[3] = {"ttft_p50_ms", "tpot_p50_ms", "output_tok_s"};
        for (int m = 0; m < 3; m++) {
            if (meas[m] > 0)
                fprintf(out, "# %-44.44s %-16s %10.2f %10.2f %+6.1f%%\n", where, names[m], meas[m],
                        mod[m], pct(mod[m], meas[m]));
        }
    }
    int warnings = 0;
    size_t nkeys = 0;
    while (o->keys[nkeys])
        nkeys++;
    if (n * 3 < nkeys + 1) {
        fprintf(out,
                "# warning: %zu points for %zu keys: the fit is not determined; measure "
                "more loads\n",
                n, nkeys);
        warnings++;
    }
    return warnings + warn_points(out, pts, n);
}
