#include "sim/offline.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/dist.h"
#include "base/rng.h"
#include "sim/engine.h"

struct oreq {
    uint32_t prompt, output;
    uint32_t user;
    uint64_t arrival_ns, first_ns, last_ns;
    bool done;
};

struct orun {
    const struct sim_offline_load *l;
    struct sim_engine *e;
    struct oreq *reqs;
    uint32_t sent;
    uint64_t *user_next; /* closed loop: next send time per user, UINT64_MAX = none */
    uint64_t next_arrival;
    uint32_t finished;
    uint64_t last_delivery;
    uint64_t first_wave_end; /* closed loop: every user's first request done */
    uint32_t first_wave_left;
    uint64_t window_end; /* closed loop: first time a user had nothing left to send */
    struct rng rng;
    struct dist in, out;
    uint32_t max_len;
    uint32_t max_running;
};

static void on_token_at(void *ctx, void *req, uint32_t index, uint64_t now, uint64_t deliver)
{
    (void)ctx;
    (void)now;
    struct oreq *r = req;
    if (index == 0)
        r->first_ns = deliver;
    r->last_ns = deliver;
}

static void on_finish(void *ctx, void *req, uint64_t now)
{
    (void)now;
    struct orun *o = ctx;
    struct oreq *r = req;
    r->done = true;
    o->finished++;
    if (r->last_ns > o->last_delivery)
        o->last_delivery = r->last_ns;
    if (o->l->mode != SIM_LOAD_CLOSED)
        return;
    if ((uint32_t)(r - o->reqs) < o->l->concurrency && --o->first_wave_left == 0)
        o->first_wave_end = r->last_ns;
    if (o->sent < o->l->requests)
        o->user_next[r->user] = r->last_ns;
    else if (!o->window_end)
        o->window_end = r->last_ns;
}

static uint32_t draw_len(struct orun *o, struct dist *d, double sigma, double mean)
{
    double v = sigma > 0 ? dist_sample(d, &o->rng) : mean;
    v = nearbyint(v);
    return v < 1 ? 1 : v > 16777216.0 ? 16777216u : (uint32_t)v;
}

static void draw_lengths(struct orun *o, struct oreq *r)
{
    const struct sim_offline_load *l = o->l;
    for (int tries = 0;; tries++) {
        r->prompt = draw_len(o, &o->in, l->in_sigma, l->in_mean);
        r->output = draw_len(o, &o->out, l->out_sigma, l->out_mean);
        uint64_t total = (uint64_t)r->prompt + r->output;
        bool ok = (!l->in_max || r->prompt <= l->in_max) &&
                  (!l->total_max || total <= l->total_max) && total <= o->max_len;
        if (ok || tries >= 1000)
            return;
    }
}

/* Sends request number o->sent at `now` for `user`. */
static int send_one(struct orun *o, uint32_t user, uint64_t now, char *err, size_t errlen)
{
    struct oreq *r = &o->reqs[o->sent++];
    r->user = user;
    r->arrival_ns = now;
    int rc = sim_engine_submit(o->e, r, r->prompt, r->output, now);
    if (rc != 0) {
        ts_errf(err, errlen, "request %u (%u prompt + %u output tokens) refused by the engine: %s",
                o->sent, r->prompt, r->output, rc == -E2BIG ? "too big for the KV cache" : "error");
        return rc == -E2BIG ? -E2BIG : -ENOMEM;
    }
    sim_engine_step(o->e, now);
    return 0;
}

/* The next send: its time and user, or UINT64_MAX when nothing is left to send. */
static uint64_t next_send(const struct orun *o, uint32_t *user)
{
    if (o->sent >= o->l->requests)
        return UINT64_MAX;
    if (o->l->mode != SIM_LOAD_CLOSED) {
        *user = 0;
        return o->next_arrival;
    }
    uint64_t best = UINT64_MAX;
    for (uint32_t u = 0; u < o->l->concurrency; u++) {
        if (o->user_next[u] < best) {
            best = o->user_next[u];
            *user = u;
        }
    }
    return best;
}

static int drive(struct orun *o, char *err, size_t errlen)
{
    for (uint64_t guard = 0;; guard++) {
        if (guard > 4000000000ull) {
            ts_errf(err, errlen, "offline run did not end");
            return -EINVAL;
        }
        uint32_t user = 0;
        uint64_t ts = next_send(o, &user);
        uint64_t te = sim_engine_next_due(o->e);
        if (ts == UINT64_MAX && te == 0)
            return 0;
        if (ts != UINT64_MAX && (te == 0 || ts <= te)) {
            if (o->l->mode == SIM_LOAD_CLOSED)
                o->user_next[user] = UINT64_MAX;
            int rc = send_one(o, user, ts, err, errlen);
            if (rc)
                return rc;
            if (o->l->mode == SIM_LOAD_POISSON)
                o->next_arrival += (uint64_t)llround(dist_exp1(&o->rng) / o->l->rate * 1e9);
        } else {
            sim_engine_step(o->e, te);
        }
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* numpy's median of v[0..n) (sorts v); 0 for n = 0. */
static double median(double *v, size_t n)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double mean(const double *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i];
    return n ? s / (double)n : 0;
}

/* Fills the latency numbers from the requests in [from, to) (arrival times). */
static int summarise(struct orun *o, uint64_t from, uint64_t to, struct sim_offline_result *out)
{
    uint32_t n = o->l->requests;
    double *v = ts_malloc(3 * (size_t)n * sizeof(double));
    if (!v)
        return -ENOMEM;
    double *ttft = v, *tpot = v + n, *e2e = v + 2 * (size_t)n;
    size_t m = 0, mt = 0;
    for (uint32_t i = 0; i < o->sent; i++) {
        struct oreq *r = &o->reqs[i];
        if (!r->done || r->arrival_ns < from || r->arrival_ns >= to)
            continue;
        ttft[m] = (double)(r->first_ns - r->arrival_ns) / 1e6;
        e2e[m] = (double)(r->last_ns - r->arrival_ns) / 1e6;
        if (r->output > 1)
            tpot[mt++] = (e2e[m] - ttft[m]) / (r->output - 1);
        m++;
    }
    out->measured = (uint32_t)m;
    out->ttft_mean_ms = mean(ttft, m);
    out->tpot_mean_ms = mean(tpot, mt);
    out->e2e_mean_ms = mean(e2e, m);
    out->ttft_med_ms = median(ttft, m);
    out->tpot_med_ms = median(tpot, mt);
    out->e2e_med_ms = median(e2e, m);
    ts_free(v);
    return 0;
}

/* Closed loop: output tokens delivered in [from, to), counted again by request. */
static double tokens_between(const struct orun *o, uint64_t from, uint64_t to)
{
    /* tokens of a request are spread evenly between its first and last delivery */
    double tok = 0;
    for (uint32_t i = 0; i < o->sent; i++) {
        const struct oreq *r = &o->reqs[i];
        if (!r->done)
            continue;
        if (r->output == 1 || r->last_ns == r->first_ns) {
            tok += (r->last_ns >= from && r->last_ns < to) ? r->output : 0;
            continue;
        }
        double a = (double)r->first_ns, b = (double)r->last_ns;
        double lo = fmax(a, (double)from), hi = fmin(b, (double)to);
        if (hi > lo)
            tok += (r->output - 1) * (hi - lo) / (b - a);
        if (r->first_ns >= from && r->first_ns < to)
            tok += 1;
    }
    return tok;
}

static int check_load(const struct sim_offline_load *l, char *err, size_t errlen)
{
    if (l->requests < 1 || l->requests > SIM_OFFLINE_REQUESTS_MAX) {
        ts_errf(err, errlen, "requests: %u is out of range (1 .. %u)", l->requests,
                SIM_OFFLINE_REQUESTS_MAX);
        return -EINVAL;
    }
    if (l->mode == SIM_LOAD_POISSON && !(l->rate > 0 && l->rate <= 1e6)) {
        ts_errf(err, errlen, "rate: must be > 0 and <= 1e6 requests/s");
        return -EINVAL;
    }
    if (l->mode == SIM_LOAD_CLOSED && (l->concurrency < 1 || l->concurrency > l->requests)) {
        ts_errf(err, errlen, "concurrency: must be 1 .. requests (%u)", l->requests);
        return -EINVAL;
    }
    if (!(l->in_mean >= 1 && l->in_mean < 1e7 && l->out_mean >= 1 && l->out_mean < 1e7) ||
        !(l->in_sigma >= 0 && l->in_sigma <= 5 && l->out_sigma >= 0 && l->out_sigma <= 5)) {
        ts_errf(err, errlen, "lengths: means must be 1 .. 1e7 tokens and sigmas 0 .. 5");
        return -EINVAL;
    }
    return 0;
}

static void result_throughput(struct orun *o, struct sim_offline_result *out)
{
    const struct sim_offline_load *l = o->l;
    if (l->mode == SIM_LOAD_CLOSED) {
        uint64_t from = o->first_wave_end, to = o->window_end ? o->window_end : o->last_delivery;
        double secs = to > from ? (double)(to - from) / 1e9 : 0;
        out->out_tok_per_s = secs > 0 ? tokens_between(o, from, to) / secs : 0;
        out->req_per_s = out->out_tok_per_s / l->out_mean;
        return;
    }
    double secs = (double)o->last_delivery / 1e9;
    uint64_t tok = 0;
    for (uint32_t i = 0; i < o->sent; i++)
        tok += o->reqs[i].done ? o->reqs[i].output : 0;
    out->req_per_s = secs > 0 ? o->finished / secs : 0;
    out->out_tok_per_s = secs > 0 ? (double)tok / secs : 0;
}

static void on_admit(void *ctx, void *req, uint64_t now)
{
    (void)req;
    (void)now;
    struct orun *o = ctx;
    struct sim_engine_stats st;
    sim_engine_stats(o->e, &st);
    if (st.running > o->max_running)
        o->max_running = st.running;
}

static const struct sim_engine_ops offline_ops = {
    .on_admit = on_admit,
    .on_token_at = on_token_at,
    .on_finish = on_finish,
};

static int orun_setup(struct orun *o, const struct sim_profile *p, const struct sim_offline_load *l,
                      char *err, size_t errlen)
{
    o->l = l;
    o->max_len = p->max_model_len;
    rng_seed(&o->rng, l->seed);
    if ((l->in_sigma > 0 && dist_init_lognormal(&o->in, l->in_mean, l->in_sigma) != 0) ||
        (l->out_sigma > 0 && dist_init_lognormal(&o->out, l->out_mean, l->out_sigma) != 0)) {
        ts_errf(err, errlen, "lengths: bad lognormal parameters");
        return -EINVAL;
    }
    o->reqs = ts_calloc(l->requests, sizeof(*o->reqs));
    if (!o->reqs)
        return -ENOMEM;
    for (uint32_t i = 0; i < l->requests; i++)
        draw_lengths(o, &o->reqs[i]);
    if (l->mode == SIM_LOAD_CLOSED) {
        o->user_next = ts_calloc(l->concurrency, sizeof(*o->user_next));
        if (!o->user_next)
            return -ENOMEM;
        o->first_wave_left = l->concurrency;
    }
    o->e = sim_engine_new(p, &offline_ops, o);
    return o->e ? 0 : -ENOMEM;
}

int sim_offline_run(const struct sim_profile *p, const struct sim_offline_load *l,
                    struct sim_offline_result *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (sim_profile_validate(p, err, errlen) != 0)
        return -EINVAL;
    int rc = check_load(l, err, errlen);
    if (rc)
        return rc;
    struct orun o = {0};
    rc = orun_setup(&o, p, l, err, errlen);
    if (rc == 0)
        rc = drive(&o, err, errlen);
    if (rc == 0) {
        struct sim_engine_stats st;
        sim_engine_stats(o.e, &st);
        out->preemptions = st.preemptions_total;
        out->max_running = o.max_running;
        out->duration_s = (double)o.last_delivery / 1e9;
        uint64_t from = 0, to = UINT64_MAX;
        if (l->mode == SIM_LOAD_CLOSED) {
            from = o.first_wave_end;
            to = o.window_end ? o.window_end : UINT64_MAX;
        }
        rc = summarise(&o, from, to, out);
        result_throughput(&o, out);
    }
    sim_engine_free(o.e);
    ts_free(o.user_next);
    ts_free(o.reqs);
    return rc;
}
