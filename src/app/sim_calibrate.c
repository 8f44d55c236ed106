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
#include "telemetry/scrape.h"

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
    if (rc == 0)
        rc = calib_server_from_result(doc, path, &pts[*n], err, errlen);
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

/* ---- server metrics ---- */

/* A scraped value: absent or null = NaN; a number in lo..hi; else false. */
static bool scraped_num(const json_t *obj, const char *key, double lo, double hi, double *v)
{
    const json_t *j = json_object_get(obj, key);
    *v = NAN;
    if (!j || json_is_null(j))
        return true;
    if (!json_is_number(j))
        return false;
    *v = json_number_value(j);
    return *v >= lo && *v <= hi;
}

static void server_add(struct calib_server *s, double running, double waiting, double kv)
{
    if (isnan(running))
        return;
    s->scrapes++;
    if (running > s->peak_running)
        s->peak_running = running;
    if (kv > s->kv_usage_max)
        s->kv_usage_max = kv;
    if (kv > 0 && running >= 1) {
        s->kv_scrapes++;
        s->kv_running_sum += running;
        s->kv_usage_sum += kv;
    }
    if (!(waiting >= 1) || !(running >= 1))
        return;
    if (kv >= CALIB_KV_BOUND) {
        s->kv_bound++;
        return;
    }
    s->queued++;
    if (running > s->peak_queued) {
        s->peak_queued = running;
        s->at_peak_queued = 0;
    }
    if (running == s->peak_queued)
        s->at_peak_queued++;
}

static int server_info(const json_t *doc, const char *file, struct calib_server *s, char *err,
                       size_t errlen)
{
    const json_t *info = json_object_get(doc, "server_metrics");
    if (!info || json_is_null(info))
        return 0;
    if (!json_is_object(info)) {
        ts_errf(err, errlen, "%s: server_metrics: expected an object", file);
        return TS_PARSE;
    }
    const json_t *fl = json_object_get(info, "flavor");
    if (fl && !json_is_null(fl)) {
        if (!json_is_string(fl) || json_string_length(fl) >= sizeof(s->flavor)) {
            ts_errf(err, errlen,
                    "%s: server_metrics.flavor: expected a string of at most %zu bytes", file,
                    sizeof(s->flavor) - 1);
            return TS_PARSE;
        }
        snprintf(s->flavor, sizeof(s->flavor), "%s", json_string_value(fl));
    }
    static const char *const counts[] = {"scrapes", "failures", "skipped", "dropped"};
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        double v;
        if (!scraped_num(info, counts[i], 0, 1e15, &v)) {
            ts_errf(err, errlen, "%s: server_metrics.%s: expected a count or null", file,
                    counts[i]);
            return TS_PARSE;
        }
    }
    return 0;
}

int calib_server_from_result(const json_t *doc, const char *file, struct calib_point *pt, char *err,
                             size_t errlen)
{
    struct calib_server *s = &pt->server;
    memset(s, 0, sizeof(*s));
    int rc = server_info(doc, file, s, err, errlen);
    if (rc)
        return rc;
    const json_t *tl = json_object_get(doc, "server_timeline");
    if (!tl || json_is_null(tl))
        return 0;
    if (!json_is_array(tl) || json_array_size(tl) > SCRAPE_MAX_POINTS) {
        ts_errf(err, errlen, "%s: server_timeline: expected an array of at most %u scrapes", file,
                SCRAPE_MAX_POINTS);
        memset(s, 0, sizeof(*s));
        return TS_PARSE;
    }
    size_t i;
    const json_t *pnt;
    json_array_foreach(tl, i, pnt)
    {
        double running, waiting, kv;
        const char *bad = !json_is_object(pnt)                                         ? ""
                          : !scraped_num(pnt, "running", 0, CALIB_COUNT_MAX, &running) ? ".running"
                          : !scraped_num(pnt, "waiting", 0, CALIB_COUNT_MAX, &waiting) ? ".waiting"
                          : !scraped_num(pnt, "kv_usage", 0, 1, &kv)                   ? ".kv_usage"
                                                                                       : NULL;
        if (bad) {
            ts_errf(err, errlen, "%s: server_timeline[%zu]%s: expected %s", file, i, bad,
                    !*bad           ? "an object"
                    : bad[1] == 'k' ? "a number 0 .. 1 or null"
                                    : "a count 0 .. 10000000 or null");
            memset(s, 0, sizeof(*s));
            return TS_PARSE;
        }
        server_add(s, running, waiting, kv);
    }
    return 0;
}

/* max_num_seqs from the batch peaks at which requests waited. */
static void pin_seqs(struct sim_profile *p, const struct calib_point *pts, size_t n,
                     struct calib_pins *out)
{
    double cap = 0, peak = 0;
    uint32_t queued = 0, kv_bound = 0, at = 0;
    for (size_t i = 0; i < n; i++) {
        const struct calib_server *s = &pts[i].server;
        queued += s->queued;
        kv_bound += s->kv_bound;
        if (s->peak_running > peak)
            peak = s->peak_running;
        if (s->at_peak_queued >= 2 && s->peak_queued > cap) {
            cap = s->peak_queued;
            at = s->at_peak_queued;
        }
    }
    if (cap < 1 || (kv_bound && kv_bound >= queued)) {
        if (kv_bound && kv_bound >= queued)
            snprintf(out->seqs_why, sizeof(out->seqs_why),
                     "requests waited with the KV cache at least 90%% full at %u of %u scrapes "
                     "with a queue: the KV cache, not max_num_seqs, capped the batch",
                     kv_bound, kv_bound + queued);
        else
            snprintf(out->seqs_why, sizeof(out->seqs_why), "%s",
                     queued ? "requests waited at no batch size twice in one run (too few "
                              "scrapes, or queues in passing)"
                            : "no scrape saw requests waiting: the runs never reached the "
                              "batch cap");
        return;
    }
    if (peak > cap) {
        snprintf(out->seqs_why, sizeof(out->seqs_why),
                 "requests waited at %.0f running, but %.0f ran at another scrape: the waits "
                 "were not the batch cap",
                 cap, peak);
        return;
    }
    struct sim_profile q = *p;
    char verr[160];
    q.max_num_seqs = (uint32_t)cap;
    if (sim_profile_validate(&q, verr, sizeof(verr)) != 0) {
        snprintf(out->seqs_why, sizeof(out->seqs_why), "%.0f seqs do not fit the profile: %s", cap,
                 verr);
        return;
    }
    *p = q;
    out->seqs = true;
    snprintf(out->seqs_why, sizeof(out->seqs_why),
             "the batch held %.0f sequences while requests waited (%u scrapes at that peak in "
             "one run) and never more",
             cap, at);
}

/* kv_capacity_tokens from the KV usage of the sequences in flight. */
static void pin_kv(struct sim_profile *p, const struct calib_point *pts, size_t n,
                   struct calib_pins *out)
{
    double tokens = 0, usage = 0, umax = 0;
    uint32_t scrapes = 0;
    bool whole = p->sched_policy == SIM_SCHED_RESERVE_MAX; /* output reserved at admission */
    for (size_t i = 0; i < n; i++) {
        const struct calib_server *s = &pts[i].server;
        double per_seq =
            pts[i].load.in_mean + pts[i].load.out_mean * (whole ? 1 : 0.5) + p->block_size / 2.0;
        tokens += s->kv_running_sum * per_seq;
        usage += s->kv_usage_sum;
        scrapes += s->kv_scrapes;
        if (s->kv_usage_max > umax)
            umax = s->kv_usage_max;
    }
    if (scrapes < CALIB_KV_MIN_SCRAPES || umax < 0.01) {
        snprintf(out->kv_why, sizeof(out->kv_why),
                 "%u scrapes reported a KV usage with sequences running, at most %.1f%%: too "
                 "little to measure (%d scrapes and 1%% needed)",
                 scrapes, umax * 100, CALIB_KV_MIN_SCRAPES);
        return;
    }
    double cap = round(tokens / usage);
    struct sim_profile q = *p;
    char verr[160];
    q.kv_capacity_tokens = cap < 1 ? 1 : (uint64_t)cap;
    if (sim_profile_validate(&q, verr, sizeof(verr)) != 0) {
        snprintf(out->kv_why, sizeof(out->kv_why),
                 "the estimate (%.0f tokens) does not fit the profile: %s", cap, verr);
        return;
    }
    *p = q;
    out->kv = true;
    snprintf(out->kv_why, sizeof(out->kv_why),
             "running sequences of the measured lengths against the KV usage they showed, over %u "
             "scrapes (usage up to %.0f%%)",
             scrapes, umax * 100);
}

void calib_pin(struct sim_profile *p, const struct calib_opts *o, const struct calib_point *pts,
               size_t n, struct calib_pins *out)
{
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < n; i++)
        out->with_metrics += pts[i].server.scrapes > 0;
    const char *none = o->no_server             ? "--no-server-metrics"
                       : out->with_metrics == 0 ? "no result has server metrics (run with "
                                                  "--server-metrics)"
                                                : NULL;
    if (none || o->keep_seqs)
        snprintf(out->seqs_why, sizeof(out->seqs_why), "%s",
                 none && !o->keep_seqs ? none : "--set");
    else
        pin_seqs(p, pts, n, out);
    if (none || o->keep_kv)
        snprintf(out->kv_why, sizeof(out->kv_why), "%s", none && !o->keep_kv ? none : "--set");
    else
        pin_kv(p, pts, n, out);
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

/* The keys server metrics can pin, and whether each was (k = 0, 1). */
static const char *const pin_keys[2] = {"max_num_seqs", "kv_capacity_tokens"};

static bool pinned_key(const struct calib_pins *pins, int k)
{
    return pins && (k ? pins->kv : pins->seqs);
}

static bool is_fitted(const struct calib_opts *o, const char *key)
{
    for (size_t k = 0; o->keys[k]; k++)
        if (strcmp(o->keys[k], key) == 0)
            return true;
    return false;
}

/* A YAML scalar: plain when it is safe, else a JSON string (jansson's
 * escaping), which YAML reads as a double-quoted scalar. */
static void print_scalar(FILE *out, const char *v)
{
    json_t *j = NULL;
    if (*v && strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._/+-") ==
                  strlen(v))
        fputs(v, out);
    else if ((j = json_string(v)) == NULL || json_dumpf(j, out, JSON_ENCODE_ANY) != 0)
        fputs("\"\"", out); /* not UTF-8, or no memory */
    json_decref(j);
    fputc('\n', out);
}

/* The keys the fit started from that are not the base preset's (--set, --config). */
static void print_kept(FILE *out, const struct sim_profile *p, const struct calib_opts *o,
                       const struct calib_pins *pins)
{
    struct sim_profile b;
    if (sim_profile_preset(o->base, &b) != 0)
        return;
    bool header = false;
    for (const char *const *k = sim_profile_keys(); *k; k++) {
        char v[SIM_PROFILE_STR_MAX + 8], bv[SIM_PROFILE_STR_MAX + 8];
        if (is_fitted(o, *k) || (pinned_key(pins, 0) && strcmp(*k, pin_keys[0]) == 0) ||
            (pinned_key(pins, 1) && strcmp(*k, pin_keys[1]) == 0) ||
            sim_profile_get(p, *k, v, sizeof(v)) != 0 ||
            sim_profile_get(&b, *k, bv, sizeof(bv)) != 0 || strcmp(v, bv) == 0)
            continue;
        if (!header)
            fprintf(out, "# as you set them (--set, --config; not the base profile's):\n");
        header = true;
        fprintf(out, "%s: ", *k);
        print_scalar(out, v);
    }
}

/* Where every key came from. */
static void print_sources(FILE *out, const struct calib_opts *o, const struct calib_pins *pins,
                          size_t n)
{
    const bool kept[2] = {o->keep_seqs, o->keep_kv};
    const char *const why[2] = {pins->seqs_why, pins->kv_why};
    if (pins->with_metrics)
        fprintf(out, "# server metrics: %zu of %zu results scraped the server's /metrics\n",
                pins->with_metrics, n);
    fprintf(out, "# fitted:");
    for (size_t k = 0; o->keys[k]; k++)
        fprintf(out, "%s %s", k ? "," : "", o->keys[k]);
    fprintf(out, "\n");
    for (int k = 0; k < 2; k++) {
        if (pinned_key(pins, k))
            fprintf(out, "# from server metrics: %s: %s\n", pin_keys[k], why[k]);
        else if (kept[k])
            fprintf(out, "# kept as you set it (--set, --config): %s\n", pin_keys[k]);
        else
            fprintf(out, "# left at the base profile: %s: %s\n", pin_keys[k], why[k]);
    }
    fprintf(out, "# left at the base profile (%s): every other key\n", o->base);
}

int calib_print(FILE *out, const struct sim_profile *p, const struct calib_opts *o,
                const struct calib_pins *pins, const struct calib_point *pts, size_t n)
{
    fprintf(out, "# tokenstorm sim calibrate: %zu point%s; load with tokenstorm sim --config\n", n,
            n == 1 ? "" : "s");
    fprintf(out, "base: %s\n", o->base);
    for (size_t k = 0; o->keys[k]; k++) {
        char v[64];
        if (sim_profile_get(p, o->keys[k], v, sizeof(v)) == 0)
            fprintf(out, "%s: %s\n", o->keys[k], v);
    }
    for (int k = 0; k < 2; k++) {
        char v[64];
        if (pinned_key(pins, k) && sim_profile_get(p, pin_keys[k], v, sizeof(v)) == 0)
            fprintf(out, "%s: %s\n", pin_keys[k], v);
    }
    print_kept(out, p, o, pins);
    if (pins)
        print_sources(out, o, pins, n);
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
