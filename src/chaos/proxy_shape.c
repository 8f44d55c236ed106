/*
 * proxy_shape.c - the chaos proxy's TCP faults (see proxy.h): rolled once
 * per client connection, at its first request, and applied by shaping the
 * bytes the proxy writes to the client (an http_server output shaper) and
 * the bytes of each request it forwards upstream (an http_client send
 * shaper). Upstream tcp_latency and blackhole act on the connection's
 * requests instead (px_tcp_request).
 */
#include "chaos/proxy_int.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/rng.h"

#define PXCONN_MARKS 256 /* latency marks of one connection (then merged) */

/*
 * The TCP faults of one client connection, rolled when its first request
 * arrives; the http_server output shaper's ctx (freed by its release).
 * Latency: every batch of bytes queued for the client is held until its
 * own sampled delay passed (in order: a batch never overtakes the one
 * before). Bandwidth: pacing by a virtual link free time, in writes of
 * 5 ms worth of bytes. Slicer: writes of about `bytes` with a sampled
 * delay between them. Reset/limit: the connection ends after N bytes
 * (RST / FIN), or (reset) at a time after the connection's first request.
 */
struct pxconn {
    struct rng rng;
    struct fault *hits[FAULTSET_HITS];
    size_t nhits;
    struct fault *lat, *slicer, *blackhole;
    double rate; /* bytes/s, 0: no cap */
    uint64_t bw_free_at, slice_next;
    uint64_t reset_at; /* 0: none */
    uint64_t end_bytes;
    enum http_shape_then end_then; /* MORE: no byte limit */
    struct {
        uint64_t end, at;
    } marks[PXCONN_MARKS];
    size_t mhead, mcount;
    uint64_t marked, released, last_at;
};

/* A sample of d from k's generator, in ns, clamped to 0..1 h. */
static uint64_t pxconn_sample(struct pxconn *k, const struct dist *d)
{
    double v = dist_sample(d, &k->rng);
    if (!(v > 0))
        return 0;
    return v > 3.6e12 ? (uint64_t)3.6e12 : (uint64_t)v;
}

/* The earlier of two wake-up times (0: none). */
static uint64_t wake_min(uint64_t a, uint64_t b)
{
    return !a ? b : !b ? a : a < b ? a : b;
}

/* Latency: the bytes whose delay passed (at least sent). */
static uint64_t pxconn_released(struct pxconn *k, uint64_t queued, uint64_t now, uint64_t *wake)
{
    if (queued > k->marked) {
        uint64_t at = now + pxconn_sample(k, &k->lat->params.delay);
        if (at < k->last_at)
            at = k->last_at;
        k->last_at = at;
        if (k->mcount == PXCONN_MARKS) {
            k->marks[(k->mhead + k->mcount - 1) % PXCONN_MARKS].end = queued;
        } else {
            size_t i = (k->mhead + k->mcount++) % PXCONN_MARKS;
            k->marks[i].end = queued;
            k->marks[i].at = at;
        }
        k->marked = queued;
    }
    while (k->mcount && k->marks[k->mhead].at <= now) {
        k->released = k->marks[k->mhead].end;
        k->mhead = (k->mhead + 1) % PXCONN_MARKS;
        k->mcount--;
    }
    if (k->mcount)
        *wake = wake_min(*wake, k->marks[k->mhead].at);
    return k->released;
}

/* The shaper's allow (net/shaper.h): how many of the queued bytes may be
 * written now, when to ask again, and whether the connection ends. */
static uint64_t pxconn_allow(void *ctx, uint64_t queued, uint64_t sent, uint64_t now,
                             uint64_t *wake_at, enum http_shape_then *then)
{
    struct pxconn *k = ctx;
    uint64_t wake = 0;
    if (k->reset_at) {
        if (now >= k->reset_at) {
            *then = HTTP_SHAPE_RESET;
            return 0;
        }
        wake = k->reset_at;
    }
    uint64_t upto = k->lat ? pxconn_released(k, queued, now, &wake) : queued;
    uint64_t n = upto > sent ? upto - sent : 0;
    if (k->end_then != HTTP_SHAPE_MORE && sent + n > k->end_bytes)
        n = k->end_bytes > sent ? k->end_bytes - sent : 0;
    if (n && k->rate > 0) {
        if (now < k->bw_free_at) {
            wake = wake_min(wake, k->bw_free_at);
            n = 0;
        } else {
            uint64_t q = (uint64_t)(k->rate * 0.005);
            if (n > (q ? q : 1))
                n = q ? q : 1;
        }
    }
    if (n && k->slicer) {
        if (now < k->slice_next) {
            wake = wake_min(wake, k->slice_next);
            n = 0;
        } else {
            uint64_t b = k->slicer->params.has_bytes ? k->slicer->params.bytes : 1;
            uint64_t sz = b / 2 + rng_next_u64(&k->rng) % (b + 1);
            if (n > (sz ? sz : 1))
                n = sz ? sz : 1;
        }
    }
    if (n) {
        if (k->rate > 0)
            k->bw_free_at =
                (k->bw_free_at > now ? k->bw_free_at : now) + (uint64_t)((double)n * 1e9 / k->rate);
        if (k->slicer)
            k->slice_next = now + pxconn_sample(k, &k->slicer->params.delay);
    }
    if (k->end_then != HTTP_SHAPE_MORE && sent + n >= k->end_bytes) {
        *then = k->end_then;
        return n;
    }
    if (sent + n < queued) { /* times already past would wake at once, and again */
        if (k->rate > 0 && k->bw_free_at > now)
            wake = wake_min(wake, k->bw_free_at);
        if (k->slicer && k->slice_next > now)
            wake = wake_min(wake, k->slice_next);
    }
    *wake_at = wake;
    return n;
}

/* The shaper's release: drops k's faults and frees it. */
static void pxconn_release(void *ctx)
{
    struct pxconn *k = ctx;
    for (size_t i = 0; i < k->nhits; i++)
        fault_unref(k->hits[i]);
    ts_free(k);
}

/*
 * Takes the TCP faults of k->hits that act in direction dir: latency (when
 * latency is set), bandwidth, slicer, reset and limit (slow close and
 * blackhole act on the client connection whatever their direction; an HTTP
 * request's upstream latency delays the forwarding instead, see
 * px_tcp_request).
 */
static void pxconn_setup(struct pxconn *k, enum fault_direction dir, bool latency, uint64_t now,
                         uint64_t *close_delay_ns)
{
    for (size_t i = 0; i < k->nhits; i++) {
        struct fault *f = k->hits[i];
        const struct fault_params *pa = &f->params;
        bool on = (f->dir & dir) != 0;
        switch (f->type) {
        case FAULT_TCP_LATENCY:
            if (on && latency && !k->lat)
                k->lat = f;
            break;
        case FAULT_TCP_BANDWIDTH:
            if (!on)
                break;
            if (pa->rate > 0 && (k->rate == 0 || pa->rate < k->rate))
                k->rate = pa->rate;
            break;
        case FAULT_TCP_SLICER:
            if (on && !k->slicer)
                k->slicer = f;
            break;
        case FAULT_TCP_SLOW_CLOSE:
            if (close_delay_ns)
                *close_delay_ns = pxconn_sample(k, &pa->delay);
            break;
        case FAULT_TCP_BLACKHOLE:
            if (close_delay_ns && !k->blackhole)
                k->blackhole = f;
            break;
        case FAULT_TCP_RESET:
        case FAULT_TCP_LIMIT:
            if (!on)
                break;
            if (f->type == FAULT_TCP_RESET && pa->has_delay) {
                uint64_t at = now + pxconn_sample(k, &pa->delay);
                k->reset_at = k->reset_at ? (at < k->reset_at ? at : k->reset_at) : at;
            }
            if (pa->has_bytes && (k->end_then == HTTP_SHAPE_MORE || pa->bytes < k->end_bytes)) {
                k->end_bytes = pa->bytes;
                k->end_then = f->type == FAULT_TCP_RESET ? HTTP_SHAPE_RESET : HTTP_SHAPE_CLOSE;
            }
            break;
        default:
            break;
        }
    }
}

/* Rolls the TCP faults of req's connection and shapes its output with
 * them; seed is drawn only when one hit. Each hit is counted on x, or
 * without x (a WebSocket session) as injected, but for tcp_blackhole, which
 * swallows HTTP requests only. */
static void pxconn_roll(struct proxy *p, struct http_request *req, struct pxreq *x,
                        struct rng *seed, uint64_t now)
{
    struct fault *hits[FAULTSET_HITS];
    pthread_mutex_lock(&p->faults_mu);
    size_t n = faultset_roll(&p->faults, NULL, 1u << FAULT_TCP, now, hits, FAULTSET_HITS);
    pthread_mutex_unlock(&p->faults_mu);
    if (!n)
        return;
    struct pxconn *k = ts_calloc(1, sizeof *k);
    if (!k) {
        for (size_t i = 0; i < n; i++)
            fault_unref(hits[i]);
        return;
    }
    memcpy(k->hits, hits, n * sizeof hits[0]);
    k->nhits = n;
    rng_seed(&k->rng, rng_next_u64(seed));
    struct http_shaper sh = {pxconn_allow, 0, pxconn_release, k};
    for (size_t i = 0; i < n; i++) {
        if (x)
            px_count(x, hits[i]);
        else if (hits[i]->type != FAULT_TCP_BLACKHOLE)
            fault_count_injection(hits[i]);
    }
    pxconn_setup(k, FAULT_DIR_DOWNSTREAM, true, now, &sh.close_delay_ns);
    if (http_request_set_shaper(req, &sh) != 0)
        pxconn_release(k);
}

void px_tcp_roll(struct pxreq *x, uint64_t now)
{
    pxconn_roll(x->p, x->req, x, &x->rng, now);
}

void px_tcp_roll_ws(struct proxy *p, struct http_request *req, struct rng *seed, uint64_t now)
{
    pxconn_roll(p, req, NULL, seed, now);
}

/* The ctx of a shaper for the request bytes x forwards upstream (see
 * px_tcp_upstream), or NULL when no TCP fault of its connection acts
 * upstream. */
static struct pxconn *pxconn_upstream(const struct http_request *req, struct rng *seed,
                                      bool latency, uint64_t now)
{
    const struct pxconn *kc = http_request_shaper_ctx(req);
    if (!kc)
        return NULL;
    bool any = false;
    for (size_t i = 0; i < kc->nhits; i++) {
        enum fault_type t = kc->hits[i]->type;
        if ((kc->hits[i]->dir & FAULT_DIR_UPSTREAM) &&
            (t == FAULT_TCP_BANDWIDTH || t == FAULT_TCP_SLICER || t == FAULT_TCP_RESET ||
             t == FAULT_TCP_LIMIT || (latency && t == FAULT_TCP_LATENCY)))
            any = true;
    }
    if (!any)
        return NULL;
    struct pxconn *k = ts_calloc(1, sizeof *k);
    if (!k)
        return NULL;
    for (size_t i = 0; i < kc->nhits; i++)
        k->hits[k->nhits++] = fault_ref(kc->hits[i]);
    rng_seed(&k->rng, rng_next_u64(seed));
    pxconn_setup(k, FAULT_DIR_UPSTREAM, latency, now, NULL);
    return k;
}

/* k as a shaper in *sh; false when there is none. */
static bool as_shaper(struct pxconn *k, struct http_shaper *sh)
{
    if (!k)
        return false;
    *sh = (struct http_shaper){pxconn_allow, 0, pxconn_release, k};
    return true;
}

bool px_tcp_upstream(struct pxreq *x, uint64_t now, struct http_shaper *sh)
{
    return as_shaper(pxconn_upstream(x->req, &x->rng, false, now), sh);
}

bool px_tcp_upstream_ws(const struct http_request *req, struct rng *seed, uint64_t now,
                        struct http_shaper *sh)
{
    return as_shaper(pxconn_upstream(req, seed, true, now), sh);
}

bool px_tcp_request(struct pxreq *x, uint64_t now)
{
    const struct pxconn *k = http_request_shaper_ctx(x->req);
    if (!k)
        return false;
    for (size_t i = 0; i < k->nhits; i++) {
        const struct fault *f = k->hits[i];
        if (f->type == FAULT_TCP_LATENCY && (f->dir & FAULT_DIR_UPSTREAM))
            x->fwd_at += px_sample_ns(x, &f->params.delay);
    }
    if (!k->blackhole)
        return false;
    uint64_t d = px_sample_ns(x, &k->blackhole->params.delay);
    x->bh_until = d ? now + d : 0;
    return true;
}
