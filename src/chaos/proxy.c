/*
 * proxy.c - one request through the chaos proxy: its state machine, the
 * HTTP faults, the upstream call and the stream tap's output. TCP faults
 * are in proxy_shape.c, the loops and threads in proxy_workers.c.
 *
 * One struct pxreq per client request (proxy_int.h). Its progress is a
 * small state machine (enum px_state) driven by px_progress(), called after
 * every event (upstream headers, body, end; the timer; the tap's emits):
 * forward the request once its delay passed; send the response head once
 * the upstream's head arrived and a header delay passed; then write the
 * body (pass-through pieces, or the tap's queued events at their times) and
 * end when the upstream ended. px_set_state() is the one place the state
 * changes.
 */
#include "chaos/proxy.h"

#include <assert.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/rng.h"
#include "chaos/proxy_int.h"
#include "llm/openai_encode.h"
#include "net/ptimer.h"
#include "net/sse.h"

#define HEAD_MAX      (64 * 1024)
#define EMIT_MAX      (16u << 20) /* bytes of tap output waiting for their time */
#define FAULT_HDR     "x-tokenstorm-fault"
#define FAULT_HDR_LEN 18

static void px_progress(struct pxreq *x);
static void px_arm(struct pxreq *x, uint64_t at);

/* ------------------------------------------------------------ lifetime */

/* The states each state may go to (enum px_state in proxy_int.h). */
static const unsigned px_next[] = {
    [PX_WAIT_FORWARD] = 1u << PX_WAIT_HEAD | 1u << PX_BLACKHOLE | 1u << PX_DONE,
    [PX_BLACKHOLE] = 1u << PX_DONE,
    [PX_WAIT_HEAD] = 1u << PX_HOLD_HEAD | 1u << PX_DONE,
    [PX_HOLD_HEAD] = 1u << PX_STREAMING | 1u << PX_DONE,
    [PX_STREAMING] = 1u << PX_HANGING | 1u << PX_DONE,
    [PX_HANGING] = 1u << PX_DONE,
    [PX_DONE] = 0, /* final: px_done() on a finished request does nothing */
};

/* The one place x->state changes. */
static void px_set_state(struct pxreq *x, enum px_state to)
{
    assert(px_next[x->state] & 1u << to);
    x->state = to;
}

/* Frees x and what it holds (its hits, queued output, parser, tap, buffers). */
static void px_free(struct pxreq *x)
{
    px_record_end(x);
    for (size_t i = 0; i < x->nhits; i++)
        fault_unref(x->hits[i]);
    while (x->eq_head) {
        struct pxemit *e = x->eq_head;
        x->eq_head = e->next;
        ts_free(e);
    }
    if (x->sse_on)
        sse_parser_release(&x->sse);
    stream_tap_free(x->tap);
    buf_release(&x->head);
    buf_release(&x->pending);
    ts_free(x);
}

/* Frees x once it is DONE and neither its call nor its timer can call back. */
static void px_maybe_free(struct pxreq *x)
{
    if (x->state == PX_DONE && !x->call_running &&
        (x->tstate == TIMER_NONE || x->tstate == TIMER_CLOSED))
        px_free(x);
}

/* The timer closed (px_done): x may be freed now. */
static void px_timer_closed(struct ptimer *t)
{
    struct pxreq *x = t->data;
    x->tstate = TIMER_CLOSED;
    px_maybe_free(x);
}

/* Any state -> DONE: the request is over for the client; stops everything
 * else. Does not free. false (and nothing done) when it was over already. */
static bool px_done(struct pxreq *x)
{
    if (x->state == PX_DONE)
        return false; /* e.g. the SSE parser failing after an event already cut it */
    px_set_state(x, PX_DONE);
    atomic_fetch_sub_explicit(&x->p->in_flight, 1, memory_order_relaxed);
    chain_outcome(&x->p->chain, x->ckey, x->out_code < 0 ? CHAIN_CUT : x->out_code,
                  x->retry_after_ns, ts_now_ns());
    (void)proxy_trace_finish(&x->trace, &x->w->tracer, x->hits, x->nhits, ts_wall_ns());
    if (x->orphan && x->call_running) {
        px_arm(x, x->orphan_at + x->p->cfg.orphan_max_ns); /* the timer stays for the cap */
        if (x->tstate == TIMER_OPEN)
            return true;
        x->orphan = false; /* no timer: no cap, so no orphan */
    }
    if (x->call_running)
        http_call_cancel(x->call);
    if (x->tstate == TIMER_OPEN) {
        x->tstate = TIMER_CLOSING;
        ptimer_close(&x->timer, px_timer_closed);
    }
    return true;
}

/* DONE: ends the client's response cleanly. */
static void px_end(struct pxreq *x)
{
    if (x->out_code < 0)
        x->out_code = x->status;
    if (px_done(x))
        (void)http_stream_end(x->req);
}

/* DONE: aborts the client's response (the connection closes). */
static void px_cut(struct pxreq *x)
{
    if (px_done(x))
        (void)http_stream_abort(x->req);
}

/* DONE: answers the client with a whole response. */
static void px_respond(struct pxreq *x, int status, const char *ctype, const char *extra,
                       const char *body, size_t len)
{
    if (x->state == PX_DONE)
        return;
    x->trace.status = status; /* before px_done: it finishes the span */
    if (x->out_code < 0)
        x->out_code = status;
    (void)px_done(x);
    (void)http_respond(x->req, status, ctype, extra, body, len);
}

/* An OpenAI-style error response. */
static void px_error(struct pxreq *x, int status, const char *type, const char *code,
                     const char *msg, const char *extra)
{
    struct buf b;
    buf_init(&b, 4096);
    int rc = buf_append_str(&b, "{\"error\":{\"message\":\"");
    if (!rc)
        rc = openai_json_escape(&b, msg, strlen(msg));
    if (!rc)
        rc = buf_appendf(&b, "\",\"type\":\"%s\",\"param\":null,\"code\":", type);
    if (!rc)
        rc = code ? buf_appendf(&b, "\"%s\"}}", code) : buf_append_str(&b, "null}}");
    if (rc)
        px_respond(x, 500, NULL, extra, "", 0);
    else
        px_respond(x, status, "application/json", extra, b.data, b.len);
    buf_release(&b);
}

/* ------------------------------------------------------------ faults */

void px_count(struct pxreq *x, struct fault *f)
{
    fault_count_injection(f);
    proxy_trace_fault(&x->trace, f, ts_wall_ns());
    if (strncmp(f->name, FAULT_HDR, FAULT_HDR_LEN) == 0)
        atomic_fetch_add_explicit(&x->p->header_faults, 1, memory_order_relaxed);
}

uint64_t px_sample_ns(struct pxreq *x, const struct dist *d)
{
    double v = dist_sample(d, &x->rng);
    if (!(v > 0))
        return 0;
    if (v > 3.6e12) /* one hour */
        v = 3.6e12;
    return (uint64_t)v;
}

/* The http_abort fault f answers the request. */
static void px_abort(struct pxreq *x, struct fault *f)
{
    const struct fault_params *pa = &f->params;
    char extra[256];
    int n = snprintf(extra, sizeof extra, "x-tokenstorm-fault: %s\r\n", f->name);
    if (pa->retry_after_ns)
        snprintf(extra + n, sizeof extra - (size_t)n, "Retry-After: %llu\r\n",
                 (unsigned long long)((pa->retry_after_ns + 999999999ull) / 1000000000ull));
    px_count(x, f);
    x->retry_after_ns = pa->retry_after_ns;
    const char *msg = pa->text[0] ? pa->text : NULL;
    if (pa->status == 429)
        px_error(x, 429, "requests", "rate_limit_exceeded",
                 msg ? msg
                     : "Rate limit reached (injected by tokenstorm proxy). Please retry "
                       "after the time in the Retry-After header.",
                 extra);
    else if (pa->status >= 500)
        px_error(x, pa->status, "server_error", NULL,
                 msg ? msg
                     : "The server had an error while processing your request "
                       "(injected by tokenstorm proxy).",
                 extra);
    else
        px_error(x, pa->status, "invalid_request_error", NULL,
                 msg ? msg : "Injected error (tokenstorm proxy).", extra);
}

/* Whether f acts on the response's events or body (through a stream tap). */
static bool is_tap_family(const struct fault *f)
{
    enum fault_family fam = fault_type_family(f->type);
    return fam == FAULT_SSE || fam == FAULT_LLM || fam == FAULT_RAG;
}

/* Whether name is a hop-by-hop header (never forwarded either way). */
static bool hop_by_hop(const char *name)
{
    static const char *const names[] = {
        "connection", "keep-alive",        "proxy-connection", "te",
        "trailer",    "transfer-encoding", "upgrade",          NULL,
    };
    for (size_t i = 0; names[i]; i++)
        if (strcasecmp(name, names[i]) == 0)
            return true;
    return false;
}

/* Whether a header rewrite fault of direction dir touches name (set or remove). */
static bool rewritten(const struct pxreq *x, enum fault_direction dir, const char *name)
{
    for (size_t i = 0; i < x->nhits; i++) {
        const struct fault *f = x->hits[i];
        if (f->type != FAULT_HTTP_HEADER_REWRITE || !(f->dir & dir))
            continue;
        for (size_t k = 0; k < f->params.n_headers; k++)
            if (strcasecmp(f->params.headers[k].name, name) == 0)
                return true;
    }
    return false;
}

/* Appends the "set" headers of rewrite faults of direction dir; counts them. */
static int add_rewrites(struct pxreq *x, enum fault_direction dir, struct buf *out, const char *sep)
{
    for (size_t i = 0; i < x->nhits; i++) {
        struct fault *f = x->hits[i];
        if (f->type != FAULT_HTTP_HEADER_REWRITE || !(f->dir & dir))
            continue;
        px_count(x, f);
        for (size_t k = 0; k < f->params.n_headers; k++) {
            const struct fault_header_op *op = &f->params.headers[k];
            if (op->remove)
                continue;
            int rc = buf_appendf(out, "%s: %s%s", op->name, op->value, sep);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ upstream */

/* Keeps an upstream response header for the client's head (http_call_headers_each). */
static int up_header(void *ctx, const char *name, const char *value)
{
    struct pxreq *x = ctx;
    if (hop_by_hop(name) || strcasecmp(name, "server") == 0 ||
        rewritten(x, FAULT_DIR_DOWNSTREAM, name))
        return 0;
    if (strcasecmp(name, "content-length") == 0) {
        char *end;
        unsigned long long v = strtoull(value, &end, 10);
        if (*value && !*end) {
            x->have_len = true;
            x->clen = v;
        }
        return 0;
    }
    if (strpbrk(name, "\r\n") || strpbrk(value, "\r\n"))
        return 0;
    if (strcasecmp(name, "retry-after") == 0) {
        char *end;
        double s = strtod(value, &end);
        if (end != value && !*end && s > 0 && s < 86400)
            x->retry_after_ns = (uint64_t)(s * 1e9);
    }
    return buf_appendf(&x->head, "%s: %s\r\n", name, value);
}

/* Whether the kept upstream headers say text/event-stream. */
static bool head_has_sse(const struct pxreq *x)
{
    const char *s = buf_cstr(&x->head);
    for (const char *p = s; (p = strcasestr(p, "content-type:")) != NULL; p += 13) {
        if (p != s && p[-1] != '\n')
            continue;
        const char *eol = strstr(p, "\r\n");
        const char *hit = strcasestr(p, "text/event-stream");
        if (hit && eol && hit < eol)
            return true;
    }
    return false;
}

/* ---- tap output ---- */

/* Writes body bytes to the client; applies http_truncate_response: past its
 * byte count nothing more goes out and the response is to end (close_pending). */
static void px_write(struct pxreq *x, const char *data, size_t len)
{
    bool cut_now = false;
    if (x->f_trunc_resp) {
        if (x->trunc_done)
            return;
        if (len > x->trunc_left) {
            len = (size_t)x->trunc_left;
            cut_now = true;
        }
        x->trunc_left -= len;
    }
    if (len) {
        int rc = http_stream_write(x->req, data, len);
        if (rc == TS_CLOSED || rc == -ENOMEM || rc == -EINVAL) {
            px_cut(x);
            return;
        }
    }
    if (cut_now) {
        x->trunc_done = true;
        px_count(x, x->f_trunc_resp);
        x->close_pending = true;
        x->close_at = 0;
        x->close_how = x->f_trunc_resp->params.cut;
    }
}

/* The tap's output bytes for at_ns: written now when due and nothing waits
 * before them, else queued (cut past EMIT_MAX). */
static void tap_emit(void *ctx, const char *bytes, size_t n, uint64_t at_ns)
{
    struct pxreq *x = ctx;
    if (x->state == PX_DONE || x->state == PX_HANGING || x->close_pending || n == 0)
        return;
    if (x->state == PX_STREAMING && !x->eq_head && at_ns <= ts_now_ns()) {
        px_write(x, bytes, n);
        return;
    }
    if (x->eq_bytes + n > EMIT_MAX) {
        px_cut(x);
        return;
    }
    struct pxemit *e = ts_malloc(sizeof *e + n);
    if (!e) {
        px_cut(x);
        return;
    }
    e->next = NULL;
    e->at = at_ns;
    e->len = n;
    memcpy(e->data, bytes, n);
    if (x->eq_tail)
        x->eq_tail->next = e;
    else
        x->eq_head = e;
    x->eq_tail = e;
    x->eq_bytes += n;
}

/* The tap asks for the response to end at at_ns, the how way. */
static void tap_close(void *ctx, uint64_t at_ns, enum fault_cut how)
{
    struct pxreq *x = ctx;
    if (x->state == PX_DONE || x->close_pending)
        return;
    x->close_pending = true;
    x->close_at = at_ns;
    x->close_how = how;
}

/* Whether an event carries a token: a non-empty "content" or "text" string
 * (an OpenAI chat or completion chunk). */
static bool event_has_token(const struct sse_event *ev)
{
    static const char *const keys[] = {"\"content\":\"", "\"text\":\""};
    for (size_t k = 0; k < 2; k++) {
        size_t kl = strlen(keys[k]);
        const char *p = ev->data, *end = ev->data + ev->data_len;
        while (p < end && (p = memmem(p, (size_t)(end - p), keys[k], kl)) != NULL) {
            p += kl;
            if (p < end && *p != '"')
                return true;
        }
    }
    return false;
}

/* One upstream SSE event into the tap (MODE_SSE), or counted (an orphan). */
static int sse_on_event(void *ctx, const struct sse_event *ev)
{
    struct pxreq *x = ctx;
    struct tap_out out = {tap_emit, tap_close, x};
    if (x->orphan) {
        if (event_has_token(ev))
            x->orphan_tokens++;
        return 0;
    }
    if (x->state == PX_DONE || x->close_pending)
        return 0;
    return stream_tap_event(x->tap, ev, ev->arrival_ns, &out);
}

/* ---- curl callbacks ---- */

/* Sorts x's hits when the upstream's head came: the tap families into
 * tapf (returns how many), header delays into hdr_at (counted). */
static size_t px_head_faults(struct pxreq *x, struct fault **tapf)
{
    size_t ntap = 0;
    for (size_t i = 0; i < x->nhits; i++) {
        struct fault *f = x->hits[i];
        if (is_tap_family(f))
            tapf[ntap++] = f;
        else if (f->type == FAULT_HTTP_DELAY_HEADERS) {
            px_count(x, f);
            x->hdr_at = ts_now_ns() + px_sample_ns(x, &f->params.delay);
        }
    }
    return ntap;
}

/* Routes the response through a stream tap of tapf[0..ntap): an event
 * stream event by event (MODE_SSE), any other body whole (MODE_BODY); the
 * length changes, so it goes out chunked. 0 or -ENOMEM. */
static int px_tap_open(struct pxreq *x, struct fault **tapf, size_t ntap)
{
    x->tap = stream_tap_new(tapf, ntap, rng_next_u64(&x->rng), ts_now_ns());
    if (!x->tap)
        return -ENOMEM;
    struct proxy_worker *w = x->w;
    if (!w->dec && (w->dec = ts_malloc(sizeof(*w->dec))) != NULL)
        openai_decoder_init(w->dec);
    stream_tap_use_decoder(x->tap, w->dec); /* without it the tap makes its own */
    if (head_has_sse(x)) {
        x->mode = MODE_SSE;
        sse_parser_init(&x->sse, 1u << 20, sse_on_event, x);
        x->sse_on = true;
    } else {
        x->mode = MODE_BODY;
    }
    x->have_len = false;
    return 0;
}

/* WAIT_HEAD -> HOLD_HEAD: keeps the upstream's headers for the client's
 * head and applies the faults that act on the response. */
static void up_on_headers(struct http_call *call, long status, void *user)
{
    struct pxreq *x = user;
    struct fault *tapf[FAULTSET_HITS];
    size_t ntap;
    px_record_head(x, call, (int)status);
    if (x->state == PX_DONE)
        return;
    px_set_state(x, PX_HOLD_HEAD);
    x->status = (int)status;
    if (http_call_headers_each(call, up_header, x) != 0 ||
        add_rewrites(x, FAULT_DIR_DOWNSTREAM, &x->head, "\r\n") != 0) {
        px_error(x, 502, "server_error", NULL, "upstream response headers too large", NULL);
        return;
    }
    if (x->f_abort && (x->f_abort->dir & FAULT_DIR_DOWNSTREAM)) {
        px_abort(x, x->f_abort);
        return;
    }
    ntap = px_head_faults(x, tapf);
    if (ntap && px_tap_open(x, tapf, ntap) != 0) {
        px_error(x, 500, "server_error", NULL, "out of memory", NULL);
        return;
    }
    if (x->f_trunc_resp && x->f_trunc_resp->params.cut != FAULT_CUT_CLOSE)
        x->have_len = false; /* a clean short end needs chunked framing */
    px_progress(x);
}

/* What an orphan's upstream still sends: counted (bytes; tokens through an
 * event-stream parser). Nonzero stops the call. */
static int px_orphan_body(struct pxreq *x, struct http_call *call, const char *data, size_t len,
                          uint64_t now_ns)
{
    x->orphan_bytes += len;
    x->orphan_last = now_ns > x->orphan_at ? now_ns : x->orphan_at;
    if (!x->sse_on) {
        const char *ct = http_call_header(call, "content-type");
        if (!ct || !strcasestr(ct, "text/event-stream"))
            return 0;
        sse_parser_init(&x->sse, 1u << 20, sse_on_event, x);
        x->sse_on = true;
        x->mode = MODE_SSE;
    }
    return sse_parser_feed(&x->sse, data, len, now_ns) != 0;
}

/* A piece of the upstream body: parsed (MODE_SSE), collected (MODE_BODY, or
 * before the head went out) or written through. Nonzero stops the call. */
static int up_on_body(struct http_call *call, const char *data, size_t len, uint64_t now_ns,
                      void *user)
{
    struct pxreq *x = user;
    px_record_body(x, data, len, now_ns);
    px_mirror_primary_body(x, data, len);
    if (x->orphan)
        return px_orphan_body(x, call, data, len, now_ns);
    if (x->state == PX_DONE || x->state == PX_HANGING)
        return 1;
    if (x->mode == MODE_SSE) {
        if (sse_parser_feed(&x->sse, data, len, now_ns) != 0) {
            px_cut(x);
            return 1;
        }
        px_progress(x);
        return x->state == PX_DONE ? 1 : 0;
    }
    if (x->mode == MODE_BODY) {
        if (buf_append(&x->pending, data, len) != 0) {
            px_error(x, 502, "server_error", NULL, "upstream body too large for the body tap",
                     NULL);
            return 1;
        }
        return 0;
    }
    if (x->state != PX_STREAMING) {
        if (buf_append(&x->pending, data, len) != 0) {
            px_cut(x);
            return 1;
        }
        return 0;
    }
    px_write(x, data, len);
    uint64_t done = ts_now_ns();
    struct proxy_worker *w = x->w;
    pthread_mutex_lock(&w->hist_mu);
    prom_hist_observe(&w->forward_delay, done > now_ns ? (double)(done - now_ns) / 1e9 : 0.0);
    pthread_mutex_unlock(&w->hist_mu);
    if (x->close_pending && x->state != PX_DONE)
        px_progress(x);
    return x->state == PX_DONE || x->close_pending ? 1 : 0;
}

/* The upstream call failed: a 502 (504 on a timeout) while the client's
 * head is not out, else a cut. */
static void px_upstream_failed(struct pxreq *x, const struct http_call_result *res)
{
    char msg[320];
    atomic_fetch_add_explicit(&x->p->upstream_errors, 1, memory_order_relaxed);
    snprintf(msg, sizeof msg, "upstream %s error: %s", http_call_error_name(res->error),
             res->error_text);
    bool timeout =
        res->error >= HTTP_CALL_ERR_TIMEOUT_CONNECT && res->error <= HTTP_CALL_ERR_TIMEOUT_TOTAL;
    if (x->state != PX_STREAMING)
        px_error(x, timeout ? 504 : 502, "server_error", NULL, msg, NULL);
    else
        px_cut(x);
}

/* The upstream call ended well: the stream tap's end (MODE_SSE), or the
 * body tap's rewrite of the whole body, whose delay holds the head back
 * (MODE_BODY). */
static void px_upstream_ended(struct pxreq *x)
{
    x->upstream_done = true;
    uint64_t now = ts_now_ns();
    if (x->mode == MODE_SSE) {
        struct tap_out out = {tap_emit, tap_close, x};
        int rc = sse_parser_finish(&x->sse, NULL);
        if (!rc)
            rc = stream_tap_end(x->tap, now, &out);
        if (rc && x->state != PX_DONE)
            px_cut(x);
    } else if (x->mode == MODE_BODY) {
        struct buf out;
        uint64_t delay = 0;
        buf_init(&out, x->p->cfg.max_body_bytes);
        int rc =
            body_tap(x->tap, x->pending.data ? x->pending.data : "", x->pending.len, &out, &delay);
        buf_release(&x->pending);
        x->pending = out;
        if (rc) {
            px_error(x, 502, "server_error", NULL, "body tap failed", NULL);
            return;
        }
        if (delay && now + delay > x->hdr_at)
            x->hdr_at = now + delay;
    }
}

/* An orphan's upstream call ended (or was cut at the cap): its work counted
 * when anything came, its timer closed. */
static void px_orphan_end(struct pxreq *x)
{
    if (x->orphan_bytes)
        chain_orphan(&x->p->chain, x->orphan_bytes, x->orphan_tokens, x->orphan_last - x->orphan_at,
                     x->orphan_at); /* in the bucket of when the client left */
    x->orphan = false;
    if (x->tstate == TIMER_OPEN) {
        x->tstate = TIMER_CLOSING;
        ptimer_close(&x->timer, px_timer_closed);
    }
}

/* The upstream call is over (and freed after this returns). */
static void up_on_done(struct http_call *call, const struct http_call_result *res, void *user)
{
    struct pxreq *x = user;
    (void)call;
    x->call_running = false;
    x->call = NULL;
    px_mirror_primary_done(x, res);
    if (x->orphan) {
        px_orphan_end(x);
    } else if (x->state == PX_DONE || x->state == PX_HANGING || x->close_pending) {
        if (x->state != PX_DONE)
            px_progress(x);
    } else if (res->error != HTTP_CALL_OK) {
        px_upstream_failed(x, res);
    } else {
        px_upstream_ended(x);
        if (x->state != PX_DONE)
            px_progress(x);
    }
    px_maybe_free(x);
}

static const struct http_call_ops up_ops = {
    .on_headers = up_on_headers,
    .on_body = up_on_body,
    .on_done = up_on_done,
};

/* Whether the client's request header name stays behind: hop-by-hop, the
 * ones curl sets itself, the fault headers, and those a fault or the
 * proxy's span replaces. */
static bool px_header_dropped(const struct pxreq *x, const char *name)
{
    return hop_by_hop(name) || strcasecmp(name, "host") == 0 ||
           strcasecmp(name, "content-length") == 0 || strcasecmp(name, "expect") == 0 ||
           strncasecmp(name, FAULT_HDR, FAULT_HDR_LEN) == 0 ||
           rewritten(x, FAULT_DIR_UPSTREAM, name) ||
           (x->trace.on && strcasecmp(name, "traceparent") == 0);
}

/* Appends the upstream request's headers to hb, each NUL-terminated: the
 * client's that are forwarded, the span's traceparent, the rewrite faults'
 * (counted). *nh is their number. 0 or a buf error. */
static int px_upstream_headers(struct pxreq *x, struct buf *hb, size_t *nh)
{
    const struct http_request *req = x->req;
    int rc = 0;
    *nh = 0;
    for (size_t i = 0; i < req->header_count && !rc; i++) {
        const char *n = req->headers[i].name;
        if (px_header_dropped(x, n))
            continue;
        /* "Name;" sends an empty header through curl; "Name: " would remove it */
        if (req->headers[i].value_len == 0)
            rc = buf_appendf(hb, "%s;", n);
        else
            rc = buf_appendf(hb, "%s: %s", n, req->headers[i].value);
        if (!rc)
            rc = buf_append_char(hb, '\0');
        (*nh)++;
    }
    /* the proxy span is the upstream's parent (unless a fault rewrites the header) */
    if (!rc && x->trace.on && !rewritten(x, FAULT_DIR_UPSTREAM, "traceparent")) {
        rc = buf_appendf(hb, "traceparent: %s", x->trace.traceparent);
        if (!rc)
            rc = buf_append_char(hb, '\0');
        (*nh)++;
    }
    size_t before = hb->len;
    if (!rc)
        rc = add_rewrites(x, FAULT_DIR_UPSTREAM, hb, "\n");
    for (size_t i = before; !rc && i < hb->len; i++)
        if (hb->data[i] == '\n') {
            hb->data[i] = '\0';
            (*nh)++;
        }
    return rc;
}

/* The length of the request body forwarded: cut by http_truncate_request
 * faults (counted). */
static size_t px_body_len(struct pxreq *x)
{
    size_t body_len = x->req->body_len;
    for (size_t i = 0; i < x->nhits; i++) {
        struct fault *f = x->hits[i];
        if (f->type == FAULT_HTTP_TRUNCATE_REQUEST) {
            px_count(x, f);
            if (f->params.bytes < body_len)
                body_len = (size_t)f->params.bytes;
        }
    }
    return body_len;
}

/* Starts the upstream call of spec, its request bytes shaped by the
 * connection's upstream TCP faults; an upstream the own engine does not
 * serve (TLS...) gets the call without them (said once). Returns what
 * http_client_request returns. */
static int px_start_call(struct pxreq *x, struct http_call_spec *spec)
{
    struct http_shaper upsh;
    bool up = px_tcp_upstream(x, ts_now_ns(), &upsh);
    if (up)
        spec->send_shaper = &upsh;
    int rc = http_client_request(&x->w->client, spec, &up_ops, x, &x->call);
    if (rc == -ENOTSUP && up) {
        upsh.release(upsh.ctx);
        spec->send_shaper = NULL;
        if (!atomic_exchange(&x->p->warned_up_shaping, true)) {
            ts_warn("proxy: upstream-direction TCP faults need a plain http:// upstream; "
                    "not applied");
        }
        rc = http_client_request(&x->w->client, spec, &up_ops, x, &x->call);
    } else if (rc && up) {
        upsh.release(upsh.ctx);
    }
    return rc;
}

/* WAIT_FORWARD -> WAIT_HEAD: builds the upstream call for x and starts it
 * (or answers for an upstream-direction abort, or a request that cannot
 * be forwarded). */
static void px_forward(struct pxreq *x)
{
    struct http_request *req = x->req;
    const char *hv[HTTP_CALL_MAX_HEADERS];
    char url[PROXY_UPSTREAM_MAX + 8192];
    struct http_call_spec spec;
    struct buf hb;
    const char *h;
    size_t nh, body_len;
    int rc;

    px_set_state(x, PX_WAIT_HEAD);
    if (x->f_abort && (x->f_abort->dir & FAULT_DIR_UPSTREAM)) {
        px_abort(x, x->f_abort);
        return;
    }
    buf_init(&hb, HEAD_MAX);
    if (px_upstream_headers(x, &hb, &nh) != 0 || nh > HTTP_CALL_MAX_HEADERS) {
        px_error(x, 431, "invalid_request_error", NULL, "too many request headers", NULL);
        goto out_release_headers;
    }
    h = hb.data;
    for (size_t i = 0; i < nh; i++, h += strlen(h) + 1)
        hv[i] = h;
    body_len = px_body_len(x);
    rc = snprintf(url, sizeof url, "%s%s", x->p->upstream,
                  req->url[0] == '/' ? req->url : req->path);
    if (rc < 0 || (size_t)rc >= sizeof url) {
        px_error(x, 414, "invalid_request_error", NULL, "request target too long", NULL);
        goto out_release_headers;
    }
    spec = (struct http_call_spec){
        .method = req->method,
        .url = url,
        .headers = hv,
        .n_headers = nh,
        .body = body_len ? req->body : NULL,
        .body_len = body_len,
        .copy_body = true,
    };
    if (px_start_call(x, &spec) != 0) {
        atomic_fetch_add_explicit(&x->p->upstream_errors, 1, memory_order_relaxed);
        px_error(x, 502, "server_error", NULL, "cannot start the upstream request", NULL);
        goto out_release_headers;
    }
    x->call_running = true;
    px_mirror_start(x, &spec);
    if (x->f_timeout) {
        x->gw_at = ts_now_ns() + px_sample_ns(x, &x->f_timeout->params.delay);
        px_arm(x, x->gw_at);
    }
out_release_headers:
    buf_release(&hb);
}

/* ------------------------------------------------------------ progress */

/* The timer armed by px_arm fired. */
static void px_timer_cb(struct ptimer *t)
{
    struct pxreq *x = t->data;
    if (x->state != PX_DONE)
        px_progress(x);
    else if (x->orphan && x->call_running)
        http_call_cancel(x->call); /* the cap: up_on_done ends the orphan */
}

/* Wakes px_progress at at (cuts x when the timer fails). */
static void px_arm(struct pxreq *x, uint64_t at)
{
    if (x->gw_at && x->gw_at < at && x->state != PX_DONE)
        at = x->gw_at; /* the gateway timeout comes first */
    if (x->tstate == TIMER_NONE) {
        if (ptimer_init(x->w->loop, &x->timer) != 0) {
            px_cut(x);
            return;
        }
        x->timer.data = x;
        x->tstate = TIMER_OPEN;
    }
    if (x->tstate != TIMER_OPEN || ptimer_start_at(&x->timer, at, px_timer_cb) != 0)
        px_cut(x);
}

/* HOLD_HEAD -> STREAMING: the client's head, then the body held so far. */
static void px_send_head(struct pxreq *x)
{
    const char *extra = x->head.len ? x->head.data : NULL;
    int rc;
    px_set_state(x, PX_STREAMING);
    if (x->status == 204 || x->status == 304 || x->status < 200) {
        px_respond(x, x->status < 200 ? 502 : x->status, NULL, extra, "", 0);
        return;
    }
    if (x->have_len)
        rc = http_stream_begin_length(x->req, x->status, NULL, extra, x->clen);
    else
        rc = http_stream_begin(x->req, x->status, NULL, extra);
    if (rc == -EINVAL) {
        px_respond(x, 502, NULL, NULL, "", 0);
        return;
    }
    if (rc) {
        px_cut(x);
        return;
    }
    x->trace.status = x->status;
    if (x->pending.len)
        px_write(x, x->pending.data, x->pending.len);
    buf_release(&x->pending);
    if (x->mode == MODE_BODY && x->state != PX_DONE && !x->close_pending)
        px_end(x);
}

/* A due close_pending end, the close_how way. */
static void px_do_close(struct pxreq *x)
{
    switch (x->close_how) {
    case FAULT_CUT_END:
        px_end(x);
        break;
    case FAULT_CUT_HANG:
        px_set_state(x, PX_HANGING);
        if (x->call_running)
            http_call_cancel(x->call);
        break;
    case FAULT_CUT_RESET:
        (void)px_done(x);
        (void)http_request_reset(x->req);
        break;
    default:
        px_cut(x);
        break;
    }
}

/* BLACKHOLE: nothing is answered; the request is cut at bh_until (0: never). */
static void px_progress_blackhole(struct pxreq *x, uint64_t now)
{
    if (!x->bh_until)
        return;
    if (now < x->bh_until)
        px_arm(x, x->bh_until);
    else
        px_cut(x);
}

/* HOLD_HEAD: sends the head once a body tap is done and the header delay
 * passed. Returns whether the request went on to STREAMING. */
static bool px_progress_head(struct pxreq *x, uint64_t now)
{
    if (x->mode == MODE_BODY && !x->upstream_done)
        return false;
    if (now < x->hdr_at) {
        px_arm(x, x->hdr_at);
        return false;
    }
    if (x->mode == MODE_BODY) {
        /* a clean short end (truncation) needs chunked framing */
        x->have_len = !x->f_trunc_resp || x->f_trunc_resp->params.cut == FAULT_CUT_CLOSE;
        x->clen = x->pending.len;
    }
    px_send_head(x);
    return x->state == PX_STREAMING;
}

/* STREAMING: writes the tap's output that is due, then ends the response
 * when a close is due or the upstream ended (else waits for the next). */
static void px_progress_body(struct pxreq *x, uint64_t now)
{
    while (x->eq_head && x->eq_head->at <= now && x->state != PX_DONE) {
        struct pxemit *e = x->eq_head;
        x->eq_head = e->next;
        if (!x->eq_head)
            x->eq_tail = NULL;
        x->eq_bytes -= e->len;
        px_write(x, e->data, e->len);
        ts_free(e);
    }
    if (x->state == PX_DONE)
        return;
    if (x->close_pending && !x->eq_head) {
        if (x->close_at > now) {
            px_arm(x, x->close_at);
            return;
        }
        px_do_close(x);
        return;
    }
    if (x->eq_head) {
        px_arm(x, x->eq_head->at);
        return;
    }
    if (x->upstream_done)
        px_end(x);
}

/* http_timeout: the upstream's response did not end by gw_at; the proxy
 * gives up on it like a gateway (504, or a cut once the head went out).
 * Returns whether it did. */
static bool px_gateway_timeout(struct pxreq *x, uint64_t now)
{
    if (!x->gw_at || now < x->gw_at || x->upstream_done ||
        (x->state != PX_WAIT_HEAD && x->state != PX_HOLD_HEAD && x->state != PX_STREAMING))
        return false;
    px_count(x, x->f_timeout);
    x->gw_at = 0;
    if (x->state == PX_STREAMING) {
        px_cut(x);
    } else {
        char extra[160];
        snprintf(extra, sizeof extra, "x-tokenstorm-fault: %s\r\n", x->f_timeout->name);
        px_error(x, 504, "server_error", NULL,
                 "Gateway timeout: the upstream did not answer in time (injected by tokenstorm "
                 "proxy).",
                 extra);
    }
    return true;
}

/* Takes x as far as it can go now; arms the timer for what is due later. */
static void px_progress(struct pxreq *x)
{
    uint64_t now = ts_now_ns();
    if (px_gateway_timeout(x, now))
        return;
    switch (x->state) {
    case PX_WAIT_FORWARD:
        if (now < x->fwd_at)
            px_arm(x, x->fwd_at);
        else
            px_forward(x);
        break;
    case PX_BLACKHOLE:
        px_progress_blackhole(x, now);
        break;
    case PX_HOLD_HEAD:
        if (px_progress_head(x, now))
            px_progress_body(x, now);
        break;
    case PX_STREAMING:
        px_progress_body(x, now);
        break;
    case PX_WAIT_HEAD:
    case PX_HANGING:
    case PX_DONE:
        break;
    }
}

/* ------------------------------------------------------------ requests */

/* The client left while x's upstream call runs: half-closes the call so
 * the upstream sees its client gone, as it would without the proxy, and
 * keeps reading what it still sends (orphaned work). An engine that cannot
 * half-close (TLS upstreams) cancels the call as before. */
static void px_orphan_begin(struct pxreq *x)
{
    if (!x->call_running ||
        (x->state != PX_WAIT_HEAD && x->state != PX_HOLD_HEAD && x->state != PX_STREAMING))
        return;
    if (http_call_shutdown_write(x->call) != 0)
        return;
    x->orphan = true;
    x->orphan_at = ts_now_ns();
    x->orphan_last = x->orphan_at;
}

/* The client went away (http_server's abort hook). */
static void px_on_abort(struct http_request *req)
{
    struct pxreq *x = req->user;
    if (x->out_code < 0)
        x->out_code = CHAIN_CLIENT_CLOSED;
    if (x->state != PX_DONE) {
        px_orphan_begin(x);
        px_cut(x);
    }
    px_maybe_free(x);
}

/* An ad-hoc fault from a request header; NULL with a message if invalid. */
static struct fault *header_fault(const char *type, const char *field, const char *value, char *err,
                                  size_t errlen)
{
    struct fault f;
    json_t *spec =
        json_pack("{s:s, s:s}", "name", type[5] == 'a' ? FAULT_HDR "-abort" : FAULT_HDR "-delay",
                  "type", type);
    if (!spec)
        return NULL;
    int rc = 0;
    if (strcmp(field, "status") == 0) {
        char *end;
        long st = strtol(value, &end, 10);
        if (*value && !*end)
            rc = json_object_set_new(spec, "status", json_integer(st));
        else
            rc = json_object_set_new(spec, "status", json_string(value));
    } else {
        rc = json_object_set_new(spec, field, json_string(value));
    }
    struct fault *out = NULL;
    if (!rc && fault_parse_json(spec, &f, err, errlen) == 0)
        out = fault_new(&f);
    json_decref(spec);
    return out;
}

/* Adds the faults asked for by x-tokenstorm-fault* headers. Returns 0 or
 * -EINVAL with a message. */
static int px_header_faults(struct pxreq *x, uint64_t now, char *err, size_t errlen)
{
    const char *name = http_request_header(x->req, FAULT_HDR);
    const char *ab = http_request_header(x->req, FAULT_HDR "-abort");
    const char *dl = http_request_header(x->req, FAULT_HDR "-delay");
    (void)now;
    if (name) {
        pthread_mutex_lock(&x->p->faults_mu);
        struct fault *f = fault_ref(faultset_get(&x->p->faults, name));
        pthread_mutex_unlock(&x->p->faults_mu);
        if (!f) {
            ts_errf(err, errlen, "x-tokenstorm-fault: no fault named '%.64s'", name);
            return -EINVAL;
        }
        bool have = false;
        for (size_t i = 0; i < x->nhits; i++)
            have |= x->hits[i] == f;
        if (!have && x->nhits < FAULTSET_HITS) {
            atomic_fetch_add_explicit(&f->matched, 1, memory_order_relaxed);
            x->hits[x->nhits++] = f;
        } else {
            fault_unref(f);
        }
    }
    const char *vals[2] = {ab, dl};
    const char *types[2] = {"http_abort", "http_delay_request"};
    const char *fields[2] = {"status", "delay"};
    for (int k = 0; k < 2; k++) {
        if (!vals[k])
            continue;
        char msg[256];
        struct fault *f = header_fault(types[k], fields[k], vals[k], msg, sizeof msg);
        if (!f) {
            const char *colon = strstr(msg, ": ");
            ts_errf(err, errlen, "%s-%s: %s", FAULT_HDR, k ? "delay" : "abort",
                    colon ? colon + 2 : "out of memory");
            return -EINVAL;
        }
        if (x->nhits < FAULTSET_HITS)
            x->hits[x->nhits++] = f;
        else
            fault_unref(f);
    }
    return 0;
}

/* The "model" member of a JSON body, into out (empty if none). */
static void body_model(const struct http_request *req, char *out, size_t n)
{
    out[0] = '\0';
    if (!req->body_len)
        return;
    json_t *j = json_loadb(req->body, req->body_len, JSON_DISABLE_EOF_CHECK, NULL);
    json_t *m = json_is_object(j) ? json_object_get(j, "model") : NULL;
    if (json_is_string(m))
        snprintf(out, n, "%s", json_string_value(m));
    json_decref(j);
}

/* Links x to the attempts before it (chain.h): its key from the
 * idempotency header, else method, path and body. */
static void px_chain_attempt(struct pxreq *x, uint64_t now)
{
    const struct http_request *req = x->req;
    bool ex;
    x->ckey = chain_key(req->method, req->path, req->body, req->body_len,
                        http_request_header(req, x->p->cfg.retry_key), &ex);
    (void)chain_attempt(&x->p->chain, x->ckey, ex, now);
}

/* A new request of worker w (in WAIT_FORWARD, counted in flight), or NULL
 * when memory runs out. */
static struct pxreq *px_new(struct proxy_worker *w, struct http_request *req)
{
    struct proxy *p = w->p;
    struct pxreq *x = ts_calloc(1, sizeof *x);
    if (!x)
        return NULL;
    atomic_fetch_add_explicit(&p->in_flight, 1, memory_order_relaxed);
    x->p = p;
    x->w = w;
    x->req = req;
    x->out_code = -1;
    req->user = x;
    buf_init(&x->head, HEAD_MAX);
    buf_init(&x->pending, p->cfg.max_body_bytes);
    uint64_t seq = atomic_fetch_add_explicit(&p->req_seq, 1, memory_order_relaxed) + 1;
    rng_seed(&x->rng, rng_mix64(p->cfg.seed ^ rng_mix64(seq)));
    http_request_on_abort(req, px_on_abort);
    return x;
}

/* Rolls the HTTP, SSE, LLM and RAG faults of the set for x (matching the
 * body's model only when a fault asks for one). */
static void px_roll(struct pxreq *x, uint64_t now)
{
    struct proxy *p = x->p;
    struct http_request *req = x->req;
    char model[128] = "";
    pthread_mutex_lock(&p->faults_mu);
    bool wants_model = faultset_wants_model(&p->faults);
    pthread_mutex_unlock(&p->faults_mu);
    if (wants_model)
        body_model(req, model, sizeof model);
    struct fault_request fr = {
        .method = req->method,
        .path = req->path,
        .headers = req->headers,
        .n_headers = req->header_count,
        .model = model[0] ? model : NULL,
    };
    unsigned fams = 1u << FAULT_HTTP | 1u << FAULT_SSE | 1u << FAULT_LLM | 1u << FAULT_RAG;
    pthread_mutex_lock(&p->faults_mu);
    x->nhits = faultset_roll(&p->faults, &fr, fams, now, x->hits, FAULTSET_HITS);
    pthread_mutex_unlock(&p->faults_mu);
}

/* Notes the HTTP faults that act later (abort, response truncation) and
 * adds the request delays to fwd_at (counted). */
static void px_take_faults(struct pxreq *x)
{
    for (size_t i = 0; i < x->nhits; i++) {
        struct fault *f = x->hits[i];
        if (f->type == FAULT_HTTP_ABORT && !x->f_abort)
            x->f_abort = f;
        else if (f->type == FAULT_HTTP_TRUNCATE_RESPONSE && !x->f_trunc_resp) {
            x->f_trunc_resp = f;
            x->trunc_left = f->params.bytes;
        } else if (f->type == FAULT_HTTP_TIMEOUT && !x->f_timeout) {
            x->f_timeout = f;
        } else if (f->type == FAULT_HTTP_DELAY_REQUEST) {
            px_count(x, f);
            x->fwd_at += px_sample_ns(x, &f->params.delay);
        }
    }
}

void proxy_on_request(struct http_request *req, void *ctx)
{
    struct proxy_worker *w = ctx;
    struct pxreq *x;
    uint64_t now;
    char err[320];

    atomic_fetch_add_explicit(&w->p->requests_total, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&w->requests, 1, memory_order_relaxed);
    if (proxy_ws_wanted(req)) {
        proxy_ws_handle(w, req);
        return;
    }
    x = px_new(w, req);
    if (!x) {
        (void)http_respond(req, 503, NULL, NULL, "", 0);
        return;
    }
    now = ts_now_ns();
    px_chain_attempt(x, now);
    px_record_begin(x);
    px_roll(x, now);
    proxy_trace_begin(&x->trace, &w->tracer, req, ts_wall_ns());
    if (px_header_faults(x, now, err, sizeof err) != 0) {
        px_error(x, 400, "invalid_request_error", NULL, err, NULL);
        goto out_maybe_free;
    }
    x->fwd_at = now;
    if (req->conn_index == 0 && !w->stopping)
        px_tcp_roll(x, now);
    if (px_tcp_request(x, now))
        px_set_state(x, PX_BLACKHOLE);
    px_take_faults(x);
    px_progress(x);
out_maybe_free:
    px_maybe_free(x); /* freed here when it is already over */
}
