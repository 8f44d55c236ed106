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
#include "analysis/record.h"
#include "analysis/stats.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "chaos/proxy_int.h"

#define MIRROR_TEXT_MAX (1u << 20) /* bytes of each side's body kept for the comparison */

#define MIRROR_PIECES_MAX 8192u /* body pieces whose arrival time is kept, per side */

struct mirror_side {
    uint64_t first_ns, last_ns; /* first and last body bytes (0: none) */
    uint64_t end_ns;
    /* when each body piece came: piece_ns[k] for the bytes up to piece_end[k] */
    uint64_t *piece_ns;
    uint32_t *piece_end;
    uint32_t npieces, cap;
    int status;
    bool failed; /* no complete answer: a transport error, a cut, a status outside 2xx */
    struct buf body;
};

struct mirror_pair {
    struct proxy_worker *w;
    uint64_t start_ns;
    bool cut;                   /* a side was cut by the proxy's shutdown */
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

/* A body piece of side sd came at now: kept with its time. */
static void side_body(struct mirror_side *sd, const char *data, size_t len, uint64_t now)
{
    if (!sd->first_ns)
        sd->first_ns = now;
    sd->last_ns = now;
    size_t before = sd->body.len;
    keep(&sd->body, data, len);
    if (sd->body.len == before)
        return; /* full (or empty): the bytes, and so their times, are not kept */
    if (sd->npieces == sd->cap && sd->cap < MIRROR_PIECES_MAX) {
        uint32_t cap = sd->cap ? 2 * sd->cap : 64;
        uint64_t *ns = ts_realloc(sd->piece_ns, cap * sizeof *ns);
        if (ns)
            sd->piece_ns = ns;
        uint32_t *end = ns ? ts_realloc(sd->piece_end, cap * sizeof *end) : NULL;
        if (end) {
            sd->piece_end = end;
            sd->cap = cap;
        }
    }
    if (sd->npieces < sd->cap) {
        sd->piece_ns[sd->npieces] = now;
        sd->piece_end[sd->npieces++] = (uint32_t)sd->body.len;
    } else if (sd->npieces) {
        sd->piece_end[sd->npieces - 1] = (uint32_t)sd->body.len; /* later bytes: the last time */
        sd->piece_ns[sd->npieces - 1] = now;
    }
}

static void side_release(struct mirror_side *sd)
{
    buf_release(&sd->body);
    ts_free(sd->piece_ns);
    ts_free(sd->piece_end);
    sd->piece_ns = NULL;
    sd->piece_end = NULL;
    sd->npieces = sd->cap = 0;
}

/* What a body said: its answer text and how it came. */
struct answer {
    bool stream;
    uint32_t choice_chunks, content_chunks;
    int32_t usage_tokens; /* usage.completion_tokens, -1: none */
    int32_t usage_prompt; /* usage.prompt_tokens, -1: none */
    /* with the side's piece times (a stream): when its events came */
    uint64_t first_chunk_ns, first_token_ns, last_chunk_ns;
    uint64_t *chunk_ns; /* each event with choices, up to chunk_cap (caller's; NULL: none) */
    uint32_t chunk_cap, nchunk;
};

/* The time the byte before offset end came (sd's pieces; 0: not known). *k
 * is where the search starts and ends: offsets only grow. */
static uint64_t time_at(const struct mirror_side *sd, size_t end, uint32_t *k)
{
    while (*k + 1 < sd->npieces && sd->piece_end[*k] < end)
        (*k)++;
    return *k < sd->npieces ? sd->piece_ns[*k] : 0;
}

/* usage.completion_tokens and prompt_tokens of j into a (when there). */
static void take_usage(const json_t *j, struct answer *a)
{
    const json_t *us = json_object_get(j, "usage");
    json_t *u = json_object_get(us, "completion_tokens");
    if (json_is_integer(u) && json_integer_value(u) >= 0 && json_integer_value(u) <= INT32_MAX)
        a->usage_tokens = (int32_t)json_integer_value(u);
    u = json_object_get(us, "prompt_tokens");
    if (json_is_integer(u) && json_integer_value(u) >= 0 && json_integer_value(u) <= INT32_MAX)
        a->usage_prompt = (int32_t)json_integer_value(u);
}

/* The answer text of a body (into out when not NULL): the content deltas of
 * an event stream, or choices[0].message.content / .text of a JSON body.
 * With sd (the side whose body b is), the events' times too (a->chunk_ns:
 * the caller's array of a->chunk_cap, or NULL). */
static void answer_text(const struct buf *b, struct buf *out, struct answer *a,
                        const struct mirror_side *sd)
{
    const char *s = b->data ? b->data : "";
    uint64_t *chunk_ns = a->chunk_ns;
    uint32_t chunk_cap = a->chunk_cap, k = 0;
    memset(a, 0, sizeof *a);
    a->chunk_ns = chunk_ns;
    a->chunk_cap = chunk_cap;
    a->usage_tokens = a->usage_prompt = -1;
    if (b->len >= 5 && (!strncmp(s, "data:", 5) || strstr(s, "\ndata:"))) {
        a->stream = true;
        for (const char *p = s; p && p < s + b->len;) {
            const char *nl = memchr(p, '\n', (size_t)(s + b->len - p));
            size_t n = nl ? (size_t)(nl - p) : (size_t)(s + b->len - p);
            if (n > 5 && !strncmp(p, "data:", 5)) {
                json_t *j = json_loadb(p + 5, n - 5, 0, NULL);
                json_t *c = json_array_get(json_object_get(j, "choices"), 0);
                json_t *t = json_object_get(json_object_get(c, "delta"), "content");
                if (!json_is_string(t))
                    t = json_object_get(c, "text");
                uint64_t at = sd && c ? time_at(sd, (size_t)(p + n - s), &k) : 0;
                a->choice_chunks += c != NULL;
                if (at) {
                    a->first_chunk_ns = a->first_chunk_ns ? a->first_chunk_ns : at;
                    a->last_chunk_ns = at;
                    if (a->chunk_ns && a->nchunk < a->chunk_cap)
                        a->chunk_ns[a->nchunk++] = at;
                }
                if (json_is_string(t) && json_string_length(t)) {
                    if (at && !a->first_token_ns)
                        a->first_token_ns = at;
                    a->content_chunks++;
                    if (out)
                        keep(out, json_string_value(t), json_string_length(t));
                }
                take_usage(j, a);
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
    if (json_is_string(t) && out)
        keep(out, json_string_value(t), json_string_length(t));
    take_usage(j, a);
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
    struct answer ia = {0}, ib = {0};
    answer_text(&mp->side[1].body, &a, &ia, NULL);
    answer_text(&mp->side[0].body, &b, &ib, NULL);
    if ((a.len || b.len) &&
        quality_rouge_l(w->qs, a.data ? a.data : "", a.len, b.data ? b.data : "", b.len, &rs) == 0)
        v = rs.fmeasure;
    buf_release(&a);
    buf_release(&b);
    return v;
}

/* One side's request as the load engine would have recorded it (for
 * --mirror-out's result.json): from the common start to its events (the
 * arrival of the body piece that completed each; chunk_buf holds their
 * times, cap of them, and r->chunk_ns points to it) or, for a JSON body,
 * its last byte; tokens from usage, else one per content chunk. */
static void side_record(const struct mirror_pair *mp, int i, struct req_record *r,
                        uint64_t *chunk_buf, uint32_t cap)
{
    const struct mirror_side *sd = &mp->side[i];
    struct answer a = {.chunk_ns = chunk_buf, .chunk_cap = chunk_buf ? cap : 0};
    memset(r, 0, sizeof *r);
    r->http_status = sd->status;
    r->intended_ns = r->start_ns = mp->start_ns;
    r->end_ns = sd->end_ns;
    r->prefix = -1;
    r->usage_prompt_tokens = -1;
    if (sd->failed) {
        r->usage_completion_tokens = -1;
        r->outcome = sd->status == 429                        ? REQ_HTTP_429
                     : sd->status >= 400 && sd->status <= 499 ? REQ_HTTP_4XX
                     : sd->status >= 500                      ? REQ_HTTP_5XX
                     : sd->status == 0                        ? REQ_CONNECT
                                                              : REQ_RECV;
        snprintf(r->error, sizeof r->error, "%s: %s%d", i ? "mirror" : "primary",
                 sd->status ? "HTTP " : "no complete answer, status ", sd->status);
        return;
    }
    answer_text(&sd->body, NULL, &a, sd);
    r->outcome = REQ_OK;
    r->first_byte_ns = sd->first_ns;
    r->last_chunk_ns = r->last_event_ns = sd->last_ns ? sd->last_ns : sd->end_ns;
    if (a.stream) {
        r->flags |= REQF_STREAM;
        r->first_chunk_ns = a.first_chunk_ns;
        r->first_token_ns = a.first_token_ns;
        if (a.last_chunk_ns)
            r->last_chunk_ns = a.last_chunk_ns;
        r->chunk_ns = a.chunk_ns;
        r->n_chunk_ns = a.nchunk;
        for (uint32_t k = 1; k < a.nchunk; k++) {
            uint64_t gap = a.chunk_ns[k] - a.chunk_ns[k - 1];
            r->itl_sum_ns += gap;
            r->itl_max_ns = gap > r->itl_max_ns ? gap : r->itl_max_ns;
        }
    }
    r->choice_chunks = a.choice_chunks;
    r->content_chunks = a.content_chunks;
    r->usage_completion_tokens = a.usage_tokens;
    r->usage_prompt_tokens = a.usage_prompt;
    r->prompt_tokens = a.usage_prompt > 0 ? (uint32_t)a.usage_prompt : 0;
    r->client_tokens = a.content_chunks;
    r->token_source = a.usage_tokens >= 0 ? TOKENS_USAGE : TOKENS_CHUNKS;
    r->output_tokens = a.usage_tokens >= 0 ? (uint32_t)a.usage_tokens : a.content_chunks;
}

/* Both sides ended: the comparison into the proxy's stats; frees mp. */
static void pair_done(struct mirror_pair *mp)
{
    struct proxy_mirror_stats *m = &mp->w->p->mirror;
    bool f0 = mp->side[0].failed, f1 = mp->side[1].failed;
    if (mp->cut) {
        pthread_mutex_lock(&m->mu);
        m->cut++;
        pthread_mutex_unlock(&m->mu);
        goto out_free;
    }
    double sim = !f0 && !f1 ? similarity(mp) : -1;
    struct req_record rec[2];
    uint64_t *chunks[2] = {NULL, NULL};
    if (m->stats[0])
        for (int i = 0; i < 2; i++) {
            chunks[i] = ts_malloc(MIRROR_PIECES_MAX * sizeof *chunks[i]);
            side_record(mp, i, &rec[i], chunks[i], MIRROR_PIECES_MAX);
        }
    pthread_mutex_lock(&m->mu);
    if (m->stats[0]) {
        for (int i = 0; i < 2; i++) {
            run_stats_add_record(m->stats[i], &rec[i], NULL);
            for (uint32_t k = 1; k < rec[i].n_chunk_ns; k++)
                run_stats_add_itl(m->stats[i], rec[i].chunk_ns[k] - rec[i].chunk_ns[k - 1]);
        }
        if (!m->first_ns || mp->start_ns < m->first_ns)
            m->first_ns = mp->start_ns;
        for (int i = 0; i < 2; i++)
            m->last_ns = mp->side[i].end_ns > m->last_ns ? mp->side[i].end_ns : m->last_ns;
        if (sim >= 0) {
            m->sim_min = m->sim_n && m->sim_min < sim ? m->sim_min : sim;
            m->sim_n++;
        }
    }
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
        ts_free(chunks[i]);
out_free:
    for (int i = 0; i < 2; i++)
        side_release(&mp->side[i]);
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

/* The wait of proxy_mirror_drain. */
struct mirror_wait {
    uv_timer_t timer;
    void (*done)(struct proxy_worker *w);
};

static void wait_closed(uv_handle_t *h)
{
    ts_free(h->data);
}

/* The wait is over (the calls ended, or the grace): done. */
static void drain_done(struct proxy_worker *w)
{
    struct mirror_wait *mw = w->mirror_wait;
    w->mirror_wait = NULL;
    uv_timer_stop(&mw->timer);
    mw->timer.data = mw;
    void (*done)(struct proxy_worker *) = mw->done;
    uv_close((uv_handle_t *)&mw->timer, wait_closed);
    done(w);
}

static void wait_fired(uv_timer_t *t)
{
    struct proxy_worker *w = t->data;
    drain_done(w);
}

void proxy_mirror_drain(struct proxy_worker *w, void (*done)(struct proxy_worker *w))
{
    uint64_t now = ts_now_ns();
    struct mirror_wait *mw = NULL;
    if (w->mirror_calls > 0 && w->stop_deadline_ns > now && (mw = ts_calloc(1, sizeof *mw))) {
        if (uv_timer_init(w->loop, &mw->timer) == 0) {
            mw->done = done;
            mw->timer.data = w;
            w->mirror_wait = mw;
            if (uv_timer_start(&mw->timer, wait_fired,
                               (w->stop_deadline_ns - now + 999999) / 1000000, 0) == 0)
                return;
            drain_done(w); /* closes the timer, frees mw */
            return;
        }
        ts_free(mw);
    }
    done(w);
}

static int mirror_on_body(struct http_call *call, const char *data, size_t len, uint64_t now_ns,
                          void *user)
{
    struct mirror_pair *mp = user;
    (void)call;
    side_body(&mp->side[1], data, len, now_ns);
    return 0;
}

static void mirror_on_done(struct http_call *call, const struct http_call_result *res, void *user)
{
    struct mirror_pair *mp = user;
    struct proxy_worker *w = mp->w;
    (void)call;
    atomic_fetch_sub_explicit(&w->p->mirror.in_flight, 1, memory_order_relaxed);
    w->mirror_calls--;
    if (res->error == HTTP_CALL_ERR_ABORTED && w->stopping)
        mp->cut = true;
    side_done(mp, 1, (int)res->status, res->error != HTTP_CALL_OK);
    if (w->mirror_wait && w->mirror_calls == 0)
        drain_done(w);
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
            side_release(&mp->side[0]);
            side_release(&mp->side[1]);
            ts_free(mp);
        }
        return;
    }
    atomic_fetch_add_explicit(&m->mirrored, 1, memory_order_relaxed);
    x->w->mirror_calls++;
    x->mp = mp;
}

void px_mirror_primary_body(struct pxreq *x, const char *data, size_t len)
{
    if (x->mp)
        side_body(&x->mp->side[0], data, len, ts_now_ns());
}

void px_mirror_primary_done(struct pxreq *x, const struct http_call_result *res)
{
    if (!x->mp)
        return;
    struct mirror_pair *mp = x->mp;
    x->mp = NULL;
    if (res->error == HTTP_CALL_ERR_ABORTED && x->w->stopping)
        mp->cut = true;
    side_done(mp, 0, (int)res->status, res->error != HTTP_CALL_OK);
}

/* The Prometheus text of the mirror's stats. 0 or a buf error. */
int proxy_mirror_metrics(struct proxy *p, struct buf *out)
{
    struct proxy_mirror_stats *m = &p->mirror;
    static const char *const cn[] = {
        "tokenstorm_proxy_mirror_sampled_total", "tokenstorm_proxy_mirror_requests_total",
        "tokenstorm_proxy_mirror_dropped_total", "tokenstorm_proxy_mirror_compared_total",
        "tokenstorm_proxy_mirror_cut_total"};
    static const char *const ch[] = {
        "Requests chosen for the mirror (--mirror-share).", "Requests also sent to the mirror.",
        "Requests not mirrored: the mirror's queue was full (--mirror-max) or the call failed.",
        "Pairs where both targets answered 2xx: latency difference and similarity observed.",
        "Pairs cut by the proxy's shutdown (a side still running when its grace ended)."};
    if (!p->cfg.mirror_url)
        return 0;
    pthread_mutex_lock(&m->mu);
    const uint64_t v[] = {atomic_load(&m->sampled), atomic_load(&m->mirrored),
                          atomic_load(&m->dropped), m->compared, m->cut};
    int rc = 0;
    for (int k = 0; k < 5 && !rc; k++) {
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
