/*
 * proxy_mirror.c - shadow traffic (`proxy --mirror URL`): a share of the
 * requests also goes to a second target; the client only ever gets the
 * primary's answer. Both sides are timed and their answers compared when
 * both ended (struct mirror_pair, on the request's worker loop).
 *
 * The mirror never slows the primary path: its call is started after the
 * primary's, runs on the same loop without being waited for, and at most
 * cfg.mirror_max mirror calls are in flight (over it the request is not
 * mirrored and the drop is counted).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "analysis/quality.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "chaos/proxy_int.h"

#define MIRROR_TEXT_MAX (1u << 20) /* bytes of each side's body kept for the comparison */

struct mirror_side {
    uint64_t end_ns;
    int status;
    bool failed; /* no complete answer: a transport error, a cut, a status outside 2xx */
    struct buf body;
};

struct mirror_pair {
    struct proxy_worker *w;
    uint64_t start_ns;
    int running;                /* sides not ended */
    struct mirror_side side[2]; /* 0: primary, 1: mirror */
};

static const double lat_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                    1,     2.5,  5,     10,   30,  60};
static const double diff_bounds[] = {-10,  -5,   -2,  -1,  -0.5, -0.2, -0.1, -0.05, -0.01, 0,
                                     0.01, 0.05, 0.1, 0.2, 0.5,  1,    2,    5,     10};
static const double sim_bounds[] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1};

void proxy_mirror_stats_init(struct proxy_mirror_stats *m)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    for (int i = 0; i < 2; i++)
        prom_hist_init(&m->latency[i], lat_bounds, sizeof lat_bounds / sizeof *lat_bounds);
    prom_hist_init(&m->diff, diff_bounds, sizeof diff_bounds / sizeof *diff_bounds);
    prom_hist_init(&m->similarity, sim_bounds, sizeof sim_bounds / sizeof *sim_bounds);
}

/* Appends what fits of data (each side keeps up to MIRROR_TEXT_MAX bytes). */
static void keep(struct buf *b, const char *data, size_t len)
{
    int rc = buf_append(b, data, len);
    (void)rc; /* full: the rest is not compared */
}

/* The answer text of a body: the content deltas of an event stream, or
 * choices[0].message.content / .text of a JSON body. */
static void answer_text(const struct buf *b, struct buf *out)
{
    const char *s = b->data ? b->data : "";
    if (b->len >= 5 && (!strncmp(s, "data:", 5) || strstr(s, "\ndata:"))) {
        for (const char *p = s; p && p < s + b->len;) {
            const char *nl = memchr(p, '\n', (size_t)(s + b->len - p));
            size_t n = nl ? (size_t)(nl - p) : (size_t)(s + b->len - p);
            if (n > 5 && !strncmp(p, "data:", 5)) {
                json_t *j = json_loadb(p + 5, n - 5, 0, NULL);
                json_t *c = json_array_get(json_object_get(j, "choices"), 0);
                json_t *t = json_object_get(json_object_get(c, "delta"), "content");
                if (!json_is_string(t))
                    t = json_object_get(c, "text");
                if (json_is_string(t) &&
                    buf_append(out, json_string_value(t), json_string_length(t)))
                    n = (size_t)(s + b->len - p); /* full: stop */
                json_decref(j);
            }
            p = nl ? nl + 1 : NULL;
        }
        return;
    }
    json_t *j = json_loadb(s, b->len, 0, NULL);
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    json_t *t = json_object_get(json_object_get(c, "message"), "content");
    if (!json_is_string(t))
        t = json_object_get(c, "text");
    if (json_is_string(t))
        keep(out, json_string_value(t), json_string_length(t));
    json_decref(j);
}

/* ROUGE-L F of the two sides' answers, or -1 when it cannot be computed. */
static double similarity(struct mirror_pair *mp)
{
    struct proxy_worker *w = mp->w;
    struct buf a, b;
    struct rouge_score rs;
    double v = -1;
    if (!w->qs && quality_scratch_new(&w->qs) != 0)
        return -1;
    buf_init(&a, MIRROR_TEXT_MAX);
    buf_init(&b, MIRROR_TEXT_MAX);
    answer_text(&mp->side[1].body, &a);
    answer_text(&mp->side[0].body, &b);
    if ((a.len || b.len) &&
        quality_rouge_l(w->qs, a.data ? a.data : "", a.len, b.data ? b.data : "", b.len, &rs) == 0)
        v = rs.fmeasure;
    buf_release(&a);
    buf_release(&b);
    return v;
}

/* Both sides ended: the comparison into the proxy's stats; frees mp. */
static void pair_done(struct mirror_pair *mp)
{
    struct proxy_mirror_stats *m = &mp->w->p->mirror;
    bool f0 = mp->side[0].failed, f1 = mp->side[1].failed;
    double sim = !f0 && !f1 ? similarity(mp) : -1;
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < 2; i++)
        if (!mp->side[i].failed)
            prom_hist_observe(&m->latency[i], (double)(mp->side[i].end_ns - mp->start_ns) / 1e9);
    if (!f0 && !f1) {
        m->compared++;
        prom_hist_observe(&m->diff,
                          ((double)mp->side[1].end_ns - (double)mp->side[0].end_ns) / 1e9);
        if (sim >= 0)
            prom_hist_observe(&m->similarity, sim);
    } else if (f0 != f1) {
        m->errors_only[f0 ? 0 : 1]++;
    } else {
        m->errors_both++;
    }
    pthread_mutex_unlock(&m->mu);
    for (int i = 0; i < 2; i++)
        buf_release(&mp->side[i].body);
    ts_free(mp);
}

/* One side ended. */
static void side_done(struct mirror_pair *mp, int i, int status, bool failed)
{
    mp->side[i].end_ns = ts_now_ns();
    mp->side[i].status = status;
    mp->side[i].failed = failed || status < 200 || status > 299;
    if (--mp->running == 0)
        pair_done(mp);
}

/* ---- the mirror's call ---- */

static int mirror_on_body(struct http_call *call, const char *data, size_t len, uint64_t now_ns,
                          void *user)
{
    struct mirror_pair *mp = user;
    (void)call;
    (void)now_ns;
    keep(&mp->side[1].body, data, len);
    return 0;
}

static void mirror_on_done(struct http_call *call, const struct http_call_result *res, void *user)
{
    struct mirror_pair *mp = user;
    (void)call;
    atomic_fetch_sub_explicit(&mp->w->p->mirror.in_flight, 1, memory_order_relaxed);
    side_done(mp, 1, (int)res->status, res->error != HTTP_CALL_OK);
}

static const struct http_call_ops mirror_ops = {
    .on_body = mirror_on_body,
    .on_done = mirror_on_done,
};

void px_mirror_start(struct pxreq *x, const struct http_call_spec *primary)
{
    struct proxy *p = x->p;
    struct proxy_mirror_stats *m = &p->mirror;
    char url[PROXY_UPSTREAM_MAX + 8192];
    if (!p->cfg.mirror_url || rng_uniform01(&x->rng) >= p->cfg.mirror_share)
        return;
    atomic_fetch_add_explicit(&m->sampled, 1, memory_order_relaxed);
    if (atomic_fetch_add_explicit(&m->in_flight, 1, memory_order_relaxed) >= p->cfg.mirror_max) {
        atomic_fetch_sub_explicit(&m->in_flight, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&m->dropped, 1, memory_order_relaxed);
        return;
    }
    struct mirror_pair *mp = ts_calloc(1, sizeof *mp);
    int rc = mp ? 0 : -ENOMEM;
    if (!rc) {
        mp->w = x->w;
        mp->start_ns = ts_now_ns();
        mp->running = 2;
        buf_init(&mp->side[0].body, MIRROR_TEXT_MAX);
        buf_init(&mp->side[1].body, MIRROR_TEXT_MAX);
        struct http_call_spec spec = *primary;
        spec.send_shaper = NULL;
        snprintf(url, sizeof url, "%s%s", p->mirror_base,
                 x->req->url[0] == '/' ? x->req->url : x->req->path);
        spec.url = url;
        rc = http_client_request(&x->w->client, &spec, &mirror_ops, mp, NULL);
    }
    if (rc) {
        atomic_fetch_sub_explicit(&m->in_flight, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&m->dropped, 1, memory_order_relaxed);
        if (mp) {
            buf_release(&mp->side[0].body);
            buf_release(&mp->side[1].body);
            ts_free(mp);
        }
        return;
    }
    atomic_fetch_add_explicit(&m->mirrored, 1, memory_order_relaxed);
    x->mp = mp;
}

void px_mirror_primary_body(struct pxreq *x, const char *data, size_t len)
{
    if (x->mp)
        keep(&x->mp->side[0].body, data, len);
}

void px_mirror_primary_done(struct pxreq *x, int status, bool failed)
{
    if (!x->mp)
        return;
    struct mirror_pair *mp = x->mp;
    x->mp = NULL;
    side_done(mp, 0, status, failed);
}

/* The Prometheus text of the mirror's stats. 0 or a buf error. */
int proxy_mirror_metrics(struct proxy *p, struct buf *out)
{
    struct proxy_mirror_stats *m = &p->mirror;
    static const char *const cn[] = {
        "tokenstorm_proxy_mirror_sampled_total", "tokenstorm_proxy_mirror_requests_total",
        "tokenstorm_proxy_mirror_dropped_total", "tokenstorm_proxy_mirror_compared_total"};
    static const char *const ch[] = {
        "Requests chosen for the mirror (--mirror-share).", "Requests also sent to the mirror.",
        "Requests not mirrored: the mirror's queue was full (--mirror-max) or the call failed.",
        "Pairs where both targets answered 2xx: latency difference and similarity observed."};
    if (!p->cfg.mirror_url)
        return 0;
    pthread_mutex_lock(&m->mu);
    const uint64_t v[] = {atomic_load(&m->sampled), atomic_load(&m->mirrored),
                          atomic_load(&m->dropped), m->compared};
    int rc = 0;
    for (int k = 0; k < 4 && !rc; k++) {
        rc = prom_header(out, cn[k], ch[k], "counter");
        if (!rc)
            rc = prom_sample(out, cn[k], NULL, 0, (double)v[k]);
    }
    if (!rc)
        rc = prom_header(out, "tokenstorm_proxy_mirror_errors_total",
                         "Pairs where only one side failed (side=primary|mirror), or both.",
                         "counter");
    const char *sides[] = {"primary", "mirror", "both"};
    for (int k = 0; k < 3 && !rc; k++) {
        const char *labels[] = {"side", sides[k]};
        rc = prom_sample(out, "tokenstorm_proxy_mirror_errors_total", labels, 1,
                         (double)(k < 2 ? m->errors_only[k] : m->errors_both));
    }
    if (!rc)
        rc = prom_header(out, "tokenstorm_proxy_target_seconds",
                         "From the request's forwarding to each target's last byte (2xx answers).",
                         "histogram");
    for (int k = 0; k < 2 && !rc; k++) {
        const char *labels[] = {"target", sides[k]};
        rc = prom_histogram(out, "tokenstorm_proxy_target_seconds", labels, 1, &m->latency[k]);
    }
    if (!rc)
        rc = prom_header(out, "tokenstorm_proxy_mirror_latency_diff_seconds",
                         "Mirror's end minus primary's end, per compared pair.", "histogram");
    if (!rc)
        rc = prom_histogram(out, "tokenstorm_proxy_mirror_latency_diff_seconds", NULL, 0, &m->diff);
    if (!rc)
        rc = prom_header(out, "tokenstorm_proxy_mirror_similarity",
                         "ROUGE-L F of the mirror's answer against the primary's.", "histogram");
    if (!rc)
        rc = prom_histogram(out, "tokenstorm_proxy_mirror_similarity", NULL, 0, &m->similarity);
    pthread_mutex_unlock(&m->mu);
    return rc;
}
