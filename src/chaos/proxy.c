/*
 * proxy.c - the chaos proxy's forwarding path and HTTP faults.
 *
 * One struct pxreq per client request. Its progress is a small state
 * machine driven by px_progress(), called after every event (upstream
 * headers, body, end; the timer; the tap's emits): forward the request once
 * its delay passed; send the response head once the upstream's head arrived
 * and a header delay passed; then write the body (pass-through pieces, or
 * the tap's queued events at their times) and end when the upstream ended.
 */
#include "chaos/proxy.h"

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
#include "llm/openai_encode.h"
#include "net/ptimer.h"
#include "net/sse.h"

#define HEAD_MAX      (64 * 1024)
#define EMIT_MAX      (16u << 20) /* bytes of tap output waiting for their time */
#define FAULT_HDR     "x-tokenstorm-fault"
#define FAULT_HDR_LEN 18

#define PXCONN_MARKS 256 /* latency marks of one connection (then merged) */

enum px_mode { MODE_PASS, MODE_SSE, MODE_BODY };

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
enum px_timer { TIMER_NONE, TIMER_OPEN, TIMER_CLOSING, TIMER_CLOSED };

struct pxemit {
    struct pxemit *next;
    uint64_t at;
    size_t len;
    char data[];
};

struct pxreq {
    struct proxy *p;
    struct proxy_worker *w; /* the loop it runs on */
    struct http_request *req;
    struct http_call *call;
    struct rng rng;
    struct fault *hits[FAULTSET_HITS];
    size_t nhits;
    struct fault *f_abort, *f_trunc_resp;
    enum px_mode mode;
    struct stream_tap *tap;
    struct sse_parser sse;
    bool sse_on;
    struct buf head;    /* upstream headers as "Name: value\r\n" lines */
    struct buf pending; /* body before the head went out / the tapped body */
    int status;
    bool have_len;
    uint64_t clen;
    uint64_t trunc_left;
    uint64_t fwd_at, hdr_at;
    struct ptimer timer;
    enum px_timer tstate;
    struct pxemit *eq_head, *eq_tail;
    size_t eq_bytes;
    uint64_t close_at;
    enum fault_cut close_how;
    bool close_pending;
    bool forwarded, call_running, have_head, head_sent, upstream_done, body_ready;
    bool finished, hanging, trunc_done;
    bool blackhole;
    uint64_t bh_until; /* 0: swallow forever */
    struct proxy_trace trace;
};

static void px_progress(struct pxreq *x);
static struct pxconn *px_tcp_upstream(struct pxreq *x, uint64_t now);
static uint64_t pxconn_allow(void *ctx, uint64_t queued, uint64_t sent, uint64_t now,
                             uint64_t *wake_at, enum http_shape_then *then);
static void pxconn_release(void *ctx);

/* ------------------------------------------------------------ lifetime */

static void px_free(struct pxreq *x)
{
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

static void px_maybe_free(struct pxreq *x)
{
    if (x->finished && !x->call_running && (x->tstate == TIMER_NONE || x->tstate == TIMER_CLOSED))
        px_free(x);
}

static void px_timer_closed(struct ptimer *t)
{
    struct pxreq *x = t->data;
    x->tstate = TIMER_CLOSED;
    px_maybe_free(x);
}

/* The request is over for the client: stop everything else. Does not free. */
static void px_done(struct pxreq *x)
{
    x->finished = true;
    atomic_fetch_sub_explicit(&x->p->in_flight, 1, memory_order_relaxed);
    (void)proxy_trace_finish(&x->trace, &x->w->tracer, x->hits, x->nhits, ts_wall_ns());
    if (x->call_running)
        http_call_cancel(x->call);
    if (x->tstate == TIMER_OPEN) {
        x->tstate = TIMER_CLOSING;
        ptimer_close(&x->timer, px_timer_closed);
    }
}

static void px_end(struct pxreq *x)
{
    px_done(x);
    (void)http_stream_end(x->req);
}

static void px_cut(struct pxreq *x)
{
    px_done(x);
    (void)http_stream_abort(x->req);
}

static void px_respond(struct pxreq *x, int status, const char *ctype, const char *extra,
                       const char *body, size_t len)
{
    x->trace.status = status;
    px_done(x);
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

static void px_arm(struct pxreq *x, uint64_t at);

/* ------------------------------------------------------------ faults */

static void px_count(struct pxreq *x, struct fault *f)
{
    fault_count_injection(f);
    proxy_trace_fault(&x->trace, f, ts_wall_ns());
    if (strncmp(f->name, FAULT_HDR, FAULT_HDR_LEN) == 0)
        atomic_fetch_add_explicit(&x->p->header_faults, 1, memory_order_relaxed);
}

static uint64_t px_sample_ns(struct pxreq *x, const struct dist *d)
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

static bool is_tap_family(const struct fault *f)
{
    enum fault_family fam = fault_type_family(f->type);
    return fam == FAULT_SSE || fam == FAULT_LLM || fam == FAULT_RAG;
}

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
    return buf_appendf(&x->head, "%s: %s\r\n", name, value);
}

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

static void tap_emit(void *ctx, const char *bytes, size_t n, uint64_t at_ns)
{
    struct pxreq *x = ctx;
    if (x->finished || x->close_pending || x->hanging || n == 0)
        return;
    if (x->head_sent && !x->eq_head && at_ns <= ts_now_ns()) {
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

static void tap_close(void *ctx, uint64_t at_ns, enum fault_cut how)
{
    struct pxreq *x = ctx;
    if (x->finished || x->close_pending)
        return;
    x->close_pending = true;
    x->close_at = at_ns;
    x->close_how = how;
}

static int sse_on_event(void *ctx, const struct sse_event *ev)
{
    struct pxreq *x = ctx;
    struct tap_out out = {tap_emit, tap_close, x};
    if (x->finished || x->close_pending)
        return 0;
    return stream_tap_event(x->tap, ev, ev->arrival_ns, &out);
}

/* ---- curl callbacks ---- */

static void up_on_headers(struct http_call *call, long status, void *user)
{
    struct pxreq *x = user;
    if (x->finished)
        return;
    x->status = (int)status;
    x->have_head = true;
    if (http_call_headers_each(call, up_header, x) != 0 ||
        add_rewrites(x, FAULT_DIR_DOWNSTREAM, &x->head, "\r\n") != 0) {
        px_error(x, 502, "server_error", NULL, "upstream response headers too large", NULL);
        return;
    }
    if (x->f_abort && (x->f_abort->dir & FAULT_DIR_DOWNSTREAM)) {
        px_abort(x, x->f_abort);
        return;
    }
    struct fault *tapf[FAULTSET_HITS];
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
    if (ntap) {
        x->tap = stream_tap_new(tapf, ntap, rng_next_u64(&x->rng), ts_now_ns());
        if (!x->tap) {
            px_error(x, 500, "server_error", NULL, "out of memory", NULL);
            return;
        }
        if (head_has_sse(x)) {
            x->mode = MODE_SSE;
            sse_parser_init(&x->sse, 1u << 20, sse_on_event, x);
            x->sse_on = true;
        } else {
            x->mode = MODE_BODY;
        }
        x->have_len = false;
    }
    if (x->f_trunc_resp && x->f_trunc_resp->params.cut != FAULT_CUT_CLOSE)
        x->have_len = false; /* a clean short end needs chunked framing */
    px_progress(x);
}

static int up_on_body(struct http_call *call, const char *data, size_t len, uint64_t now_ns,
                      void *user)
{
    struct pxreq *x = user;
    (void)call;
    if (x->finished || x->hanging)
        return 1;
    if (x->mode == MODE_SSE) {
        if (sse_parser_feed(&x->sse, data, len, now_ns) != 0) {
            px_cut(x);
            return 1;
        }
        px_progress(x);
        return x->finished ? 1 : 0;
    }
    if (x->mode == MODE_BODY) {
        if (buf_append(&x->pending, data, len) != 0) {
            px_error(x, 502, "server_error", NULL, "upstream body too large for the body tap",
                     NULL);
            return 1;
        }
        return 0;
    }
    if (!x->head_sent) {
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
    if (x->close_pending && !x->finished)
        px_progress(x);
    return x->finished || x->close_pending ? 1 : 0;
}

static void up_on_done(struct http_call *call, const struct http_call_result *res, void *user)
{
    struct pxreq *x = user;
    (void)call;
    x->call_running = false;
    x->call = NULL;
    if (x->finished || x->hanging || x->close_pending) {
        if (!x->finished)
            px_progress(x);
        px_maybe_free(x);
        return;
    }
    if (res->error != HTTP_CALL_OK) {
        atomic_fetch_add_explicit(&x->p->upstream_errors, 1, memory_order_relaxed);
        char msg[320];
        snprintf(msg, sizeof msg, "upstream %s error: %s", http_call_error_name(res->error),
                 res->error_text);
        bool timeout = res->error >= HTTP_CALL_ERR_TIMEOUT_CONNECT &&
                       res->error <= HTTP_CALL_ERR_TIMEOUT_TOTAL;
        if (!x->head_sent)
            px_error(x, timeout ? 504 : 502, "server_error", NULL, msg, NULL);
        else
            px_cut(x);
        px_maybe_free(x);
        return;
    }
    x->upstream_done = true;
    uint64_t now = ts_now_ns();
    if (x->mode == MODE_SSE) {
        struct tap_out out = {tap_emit, tap_close, x};
        int rc = sse_parser_finish(&x->sse, NULL);
        if (!rc)
            rc = stream_tap_end(x->tap, now, &out);
        if (rc && !x->finished)
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
            px_maybe_free(x);
            return;
        }
        if (delay && now + delay > x->hdr_at)
            x->hdr_at = now + delay;
        x->body_ready = true;
    }
    if (!x->finished)
        px_progress(x);
    px_maybe_free(x);
}

static const struct http_call_ops up_ops = {
    .on_headers = up_on_headers,
    .on_body = up_on_body,
    .on_done = up_on_done,
};

/* Builds the upstream call for x and starts it. */
static void px_forward(struct pxreq *x)
{
    struct http_request *req = x->req;
    struct proxy *p = x->p;
    x->forwarded = true;
    if (x->f_abort && (x->f_abort->dir & FAULT_DIR_UPSTREAM)) {
        px_abort(x, x->f_abort);
        return;
    }
    struct buf hb;
    buf_init(&hb, HEAD_MAX);
    size_t nh = 0;
    int rc = 0;
    for (size_t i = 0; i < req->header_count && !rc; i++) {
        const char *n = req->headers[i].name;
        if (hop_by_hop(n) || strcasecmp(n, "host") == 0 || strcasecmp(n, "content-length") == 0 ||
            strcasecmp(n, "expect") == 0 || strncasecmp(n, FAULT_HDR, FAULT_HDR_LEN) == 0 ||
            rewritten(x, FAULT_DIR_UPSTREAM, n) ||
            (x->trace.on && strcasecmp(n, "traceparent") == 0))
            continue;
        /* "Name;" sends an empty header through curl; "Name: " would remove it */
        if (req->headers[i].value_len == 0)
            rc = buf_appendf(&hb, "%s;", n);
        else
            rc = buf_appendf(&hb, "%s: %s", n, req->headers[i].value);
        if (!rc)
            rc = buf_append_char(&hb, '\0');
        nh++;
    }
    /* the proxy span is the upstream's parent (unless a fault rewrites the header) */
    if (!rc && x->trace.on && !rewritten(x, FAULT_DIR_UPSTREAM, "traceparent")) {
        rc = buf_appendf(&hb, "traceparent: %s", x->trace.traceparent);
        if (!rc)
            rc = buf_append_char(&hb, '\0');
        nh++;
    }
    size_t before = hb.len;
    if (!rc)
        rc = add_rewrites(x, FAULT_DIR_UPSTREAM, &hb, "\n");
    for (size_t i = before; !rc && i < hb.len; i++)
        if (hb.data[i] == '\n') {
            hb.data[i] = '\0';
            nh++;
        }
    if (rc || nh > HTTP_CALL_MAX_HEADERS) {
        buf_release(&hb);
        px_error(x, 431, "invalid_request_error", NULL, "too many request headers", NULL);
        return;
    }
    const char *hv[HTTP_CALL_MAX_HEADERS];
    const char *s = hb.data;
    for (size_t i = 0; i < nh; i++) {
        hv[i] = s;
        s += strlen(s) + 1;
    }
    size_t body_len = req->body_len;
    for (size_t i = 0; i < x->nhits; i++) {
        struct fault *f = x->hits[i];
        if (f->type == FAULT_HTTP_TRUNCATE_REQUEST) {
            px_count(x, f);
            if (f->params.bytes < body_len)
                body_len = (size_t)f->params.bytes;
        }
    }
    char url[PROXY_UPSTREAM_MAX + 8192];
    const char *target = req->url[0] == '/' ? req->url : req->path;
    int un = snprintf(url, sizeof url, "%s%s", p->upstream, target);
    if (un < 0 || (size_t)un >= sizeof url) {
        buf_release(&hb);
        px_error(x, 414, "invalid_request_error", NULL, "request target too long", NULL);
        return;
    }
    struct http_call_spec spec = {
        .method = req->method,
        .url = url,
        .headers = hv,
        .n_headers = nh,
        .body = body_len ? req->body : NULL,
        .body_len = body_len,
        .copy_body = true,
    };
    struct pxconn *up = px_tcp_upstream(x, ts_now_ns());
    struct http_shaper upsh = {pxconn_allow, 0, pxconn_release, up};
    if (up)
        spec.send_shaper = &upsh;
    rc = http_client_request(&x->w->client, &spec, &up_ops, x, &x->call);
    if (rc == -ENOTSUP && up) { /* an upstream the own engine does not serve (TLS...) */
        pxconn_release(up);
        up = NULL;
        spec.send_shaper = NULL;
        if (!atomic_exchange(&p->warned_up_shaping, true)) {
            ts_warn("proxy: upstream-direction TCP faults need a plain http:// upstream; "
                    "not applied");
        }
        rc = http_client_request(&x->w->client, &spec, &up_ops, x, &x->call);
    } else if (rc && up) {
        pxconn_release(up);
    }
    buf_release(&hb);
    if (rc) {
        atomic_fetch_add_explicit(&p->upstream_errors, 1, memory_order_relaxed);
        px_error(x, 502, "server_error", NULL, "cannot start the upstream request", NULL);
        return;
    }
    x->call_running = true;
}

/* ------------------------------------------------------------ progress */

static void px_timer_cb(struct ptimer *t)
{
    struct pxreq *x = t->data;
    if (!x->finished)
        px_progress(x);
}

static void px_arm(struct pxreq *x, uint64_t at)
{
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

static void px_send_head(struct pxreq *x)
{
    const char *extra = x->head.len ? x->head.data : NULL;
    int rc;
    x->head_sent = true;
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
    if (x->mode == MODE_BODY && !x->finished && !x->close_pending)
        px_end(x);
}

static void px_do_close(struct pxreq *x)
{
    switch (x->close_how) {
    case FAULT_CUT_END:
        px_end(x);
        break;
    case FAULT_CUT_HANG:
        x->hanging = true;
        if (x->call_running)
            http_call_cancel(x->call);
        break;
    case FAULT_CUT_RESET:
        px_done(x);
        (void)http_request_reset(x->req);
        break;
    default:
        px_cut(x);
        break;
    }
}

static void px_progress(struct pxreq *x)
{
    if (x->finished || x->hanging)
        return;
    uint64_t now = ts_now_ns();
    if (x->blackhole) {
        if (!x->bh_until)
            return;
        if (now < x->bh_until)
            px_arm(x, x->bh_until);
        else
            px_cut(x);
        return;
    }
    if (!x->forwarded) {
        if (now < x->fwd_at)
            px_arm(x, x->fwd_at);
        else
            px_forward(x);
        return;
    }
    if (!x->have_head)
        return;
    if (!x->head_sent) {
        if (x->mode == MODE_BODY && !x->body_ready)
            return;
        if (now < x->hdr_at) {
            px_arm(x, x->hdr_at);
            return;
        }
        if (x->mode == MODE_BODY) {
            /* a clean short end (truncation) needs chunked framing */
            x->have_len = !x->f_trunc_resp || x->f_trunc_resp->params.cut == FAULT_CUT_CLOSE;
            x->clen = x->pending.len;
        }
        px_send_head(x);
        if (x->finished)
            return;
    }
    while (x->eq_head && x->eq_head->at <= now && !x->finished) {
        struct pxemit *e = x->eq_head;
        x->eq_head = e->next;
        if (!x->eq_head)
            x->eq_tail = NULL;
        x->eq_bytes -= e->len;
        px_write(x, e->data, e->len);
        ts_free(e);
    }
    if (x->finished)
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

/* ------------------------------------------------------------ TCP faults */

static uint64_t pxconn_sample(struct pxconn *k, const struct dist *d)
{
    double v = dist_sample(d, &k->rng);
    if (!(v > 0))
        return 0;
    return v > 3.6e12 ? (uint64_t)3.6e12 : (uint64_t)v;
}

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
    if (sent + n < queued) {
        if (k->rate > 0)
            wake = wake_min(wake, k->bw_free_at);
        if (k->slicer)
            wake = wake_min(wake, k->slice_next);
    }
    *wake_at = wake;
    return n;
}

static void pxconn_release(void *ctx)
{
    struct pxconn *k = ctx;
    for (size_t i = 0; i < k->nhits; i++)
        fault_unref(k->hits[i]);
    ts_free(k);
}

static void pxconn_setup(struct pxconn *k, enum fault_direction dir, uint64_t now,
                         uint64_t *close_delay_ns);

/* Rolls the TCP faults of x's connection (its first request) and shapes
 * the connection's output with them. */
static void px_tcp_roll(struct pxreq *x, uint64_t now)
{
    struct proxy *p = x->p;
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
    rng_seed(&k->rng, rng_next_u64(&x->rng));
    struct http_shaper sh = {pxconn_allow, 0, pxconn_release, k};
    for (size_t i = 0; i < n; i++)
        px_count(x, hits[i]);
    pxconn_setup(k, FAULT_DIR_DOWNSTREAM, now, &sh.close_delay_ns);
    if (http_request_set_shaper(x->req, &sh) != 0)
        pxconn_release(k);
}

/*
 * Takes the TCP faults of k->hits that act in direction dir: latency,
 * bandwidth, slicer, reset and limit (slow close and blackhole act on the
 * client connection whatever their direction; upstream latency delays the
 * forwarding instead, see px_tcp_request).
 */
static void pxconn_setup(struct pxconn *k, enum fault_direction dir, uint64_t now,
                         uint64_t *close_delay_ns)
{
    for (size_t i = 0; i < k->nhits; i++) {
        struct fault *f = k->hits[i];
        const struct fault_params *pa = &f->params;
        bool on = (f->dir & dir) != 0;
        switch (f->type) {
        case FAULT_TCP_LATENCY:
            if (on && dir == FAULT_DIR_DOWNSTREAM && !k->lat)
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

/*
 * A shaper for the request bytes x forwards upstream, from the TCP faults of
 * its client connection that act upstream (bandwidth, slicer, reset, limit;
 * each request's bytes are counted alone). NULL when there are none.
 */
static struct pxconn *px_tcp_upstream(struct pxreq *x, uint64_t now)
{
    const struct pxconn *kc = http_request_shaper_ctx(x->req);
    if (!kc)
        return NULL;
    bool any = false;
    for (size_t i = 0; i < kc->nhits; i++) {
        enum fault_type t = kc->hits[i]->type;
        if ((kc->hits[i]->dir & FAULT_DIR_UPSTREAM) &&
            (t == FAULT_TCP_BANDWIDTH || t == FAULT_TCP_SLICER || t == FAULT_TCP_RESET ||
             t == FAULT_TCP_LIMIT))
            any = true;
    }
    if (!any)
        return NULL;
    struct pxconn *k = ts_calloc(1, sizeof *k);
    if (!k)
        return NULL;
    for (size_t i = 0; i < kc->nhits; i++)
        k->hits[k->nhits++] = fault_ref(kc->hits[i]);
    rng_seed(&k->rng, rng_next_u64(&x->rng));
    pxconn_setup(k, FAULT_DIR_UPSTREAM, now, NULL);
    return k;
}

/* The per-connection TCP faults that act on this request: blackhole, and
 * tcp_latency in the upstream direction (delays forwarding). */
static void px_tcp_request(struct pxreq *x, uint64_t now)
{
    const struct pxconn *k = http_request_shaper_ctx(x->req);
    if (!k)
        return;
    for (size_t i = 0; i < k->nhits; i++) {
        const struct fault *f = k->hits[i];
        if (f->type == FAULT_TCP_LATENCY && (f->dir & FAULT_DIR_UPSTREAM))
            x->fwd_at += px_sample_ns(x, &f->params.delay);
    }
    if (k->blackhole) {
        x->blackhole = true;
        uint64_t d = px_sample_ns(x, &k->blackhole->params.delay);
        x->bh_until = d ? now + d : 0;
    }
}

/* ------------------------------------------------------------ requests */

static void px_on_abort(struct http_request *req)
{
    struct pxreq *x = req->user;
    if (!x->finished)
        px_cut(x);
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

static void proxy_on_request(struct http_request *req, void *ctx)
{
    struct proxy_worker *w = ctx;
    struct proxy *p = w->p;
    atomic_fetch_add_explicit(&p->requests_total, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&w->requests, 1, memory_order_relaxed);
    struct pxreq *x = ts_calloc(1, sizeof *x);
    if (!x) {
        (void)http_respond(req, 503, NULL, NULL, "", 0);
        return;
    }
    atomic_fetch_add_explicit(&p->in_flight, 1, memory_order_relaxed);
    x->p = p;
    x->w = w;
    x->req = req;
    req->user = x;
    buf_init(&x->head, HEAD_MAX);
    buf_init(&x->pending, p->cfg.max_body_bytes);
    uint64_t seq = atomic_fetch_add_explicit(&p->req_seq, 1, memory_order_relaxed) + 1;
    rng_seed(&x->rng, rng_mix64(p->cfg.seed ^ rng_mix64(seq)));
    http_request_on_abort(req, px_on_abort);

    uint64_t now = ts_now_ns();
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
    proxy_trace_begin(&x->trace, &w->tracer, req, ts_wall_ns());
    char err[320];
    if (px_header_faults(x, now, err, sizeof err) != 0) {
        px_error(x, 400, "invalid_request_error", NULL, err, NULL);
        px_maybe_free(x);
        return;
    }
    x->fwd_at = now;
    if (req->conn_index == 0 && !w->stopping)
        px_tcp_roll(x, now);
    px_tcp_request(x, now);
    for (size_t i = 0; i < x->nhits; i++) {
        struct fault *f = x->hits[i];
        if (f->type == FAULT_HTTP_ABORT && !x->f_abort)
            x->f_abort = f;
        else if (f->type == FAULT_HTTP_TRUNCATE_RESPONSE && !x->f_trunc_resp) {
            x->f_trunc_resp = f;
            x->trunc_left = f->params.bytes;
        } else if (f->type == FAULT_HTTP_DELAY_REQUEST) {
            px_count(x, f);
            x->fwd_at += px_sample_ns(x, &f->params.delay);
        }
    }
    px_progress(x);
    px_maybe_free(x);
}

/* ------------------------------------------------------------ workers */

/* Upper bounds of tokenstorm_proxy_forward_delay_seconds. */
static const double forward_buckets[] = {5e-6,   1e-5, 2.5e-5, 5e-5,   1e-4, 2.5e-4, 5e-4, 1e-3,
                                         2.5e-3, 5e-3, 1e-2,   2.5e-2, 5e-2, 0.1,    0.25, 1.0};

static void proxy_part_closed(struct proxy *p);

static void worker_client_closed(struct http_client *c, void *arg)
{
    (void)c;
    struct proxy_worker *w = arg;
    if (w->index == 0)
        proxy_part_closed(w->p);
    else
        uv_close((uv_handle_t *)&w->stop, NULL); /* the last handle: the thread's loop ends */
}

static void worker_front_closed(struct http_server *s)
{
    struct proxy_worker *w =
        (struct proxy_worker *)((char *)s - offsetof(struct proxy_worker, front));
    http_client_close(&w->client, worker_client_closed, w);
}

/* On w's loop: stop accepting, let requests finish, close the client. */
static void worker_stop(struct proxy_worker *w, uint64_t grace_ms)
{
    w->stopping = true;
    (void)http_server_shutdown(&w->front, grace_ms, worker_front_closed);
}

static void worker_stop_cb(uv_async_t *h)
{
    struct proxy_worker *w = h->data;
    if (!w->stopping)
        worker_stop(w, atomic_load(&w->grace_ms));
}

static void worker_main(void *arg)
{
    struct proxy_worker *w = arg;
    (void)uv_run(w->loop, UV_RUN_DEFAULT);
    atomic_store(&w->exited, true);
    uv_async_send(&w->p->reaped);
}

/* The proxy loop joins the threads whose loop is empty. */
static void reaped_cb(uv_async_t *h)
{
    struct proxy *p = h->data;
    for (int i = 1; i < p->n_workers; i++) {
        struct proxy_worker *w = &p->workers[i];
        if (!w->started || w->joined || !atomic_load(&w->exited))
            continue;
        uv_thread_join(&w->thread);
        if (uv_loop_close(w->loop) != 0)
            ts_warn("proxy: worker %d's loop still had handles at exit", i);
        w->joined = true;
        if (p->shutting_down)
            proxy_part_closed(p);
    }
}

/*
 * Sets up worker index on loop: its upstream client and its listener on
 * port (no socket yet). On error, w owns nothing but closing handles on loop
 * (run it to let them close).
 */
static int worker_init(struct proxy *p, int index, uv_loop_t *loop, int port, char *err,
                       size_t errlen)
{
    struct proxy_worker *w = &p->workers[index];
    w->p = p;
    w->index = index;
    w->loop = loop;
    proxy_tracer_init_from(&w->tracer, &p->tracer);
    struct http_client_config cc;
    http_client_config_default(&cc);
    cc.connect_timeout_ms = p->cfg.connect_timeout_ms;
    cc.insecure = p->cfg.insecure;
    cc.ca_file = p->cfg.ca_file;
    /* the receive time of upstream bytes, for forward_delay (free on the own engine) */
    cc.rx_timestamps = strncmp(p->upstream, "http://", 7) == 0;
    prom_hist_init(&w->forward_delay, forward_buckets, sizeof forward_buckets / sizeof(double));
    int rc = http_client_init(&w->client, loop, &cc);
    if (rc) {
        ts_errf(err, errlen, "upstream client: %s", ts_strerror(rc));
        return rc;
    }
    struct http_server_config sc = {
        .host = p->cfg.listen_host,
        .port = port,
        .max_body_bytes = p->cfg.max_body_bytes,
        .reuse_port = p->n_workers > 1,
    };
    rc = http_server_init(&w->front, loop, &sc, proxy_on_request, w);
    if (rc) {
        ts_errf(err, errlen, "--listen: invalid host '%s'", p->cfg.listen_host);
        http_client_close(&w->client, NULL, NULL);
        return rc;
    }
    return 0;
}

/* Worker index (> 0) on its own loop and thread, listening on port. */
static int worker_start(struct proxy *p, int index, int port, char *err, size_t errlen)
{
    struct proxy_worker *w = &p->workers[index];
    int rc = uv_loop_init(&w->own_loop);
    if (!rc && (rc = uv_async_init(&w->own_loop, &w->stop, worker_stop_cb)) != 0)
        (void)uv_loop_close(&w->own_loop);
    if (rc) {
        ts_errf(err, errlen, "worker %d: %s", index, uv_strerror(rc));
        return rc;
    }
    w->stop.data = w;
    rc = worker_init(p, index, &w->own_loop, port, err, errlen);
    if (rc) {
        uv_close((uv_handle_t *)&w->stop, NULL);
        (void)uv_run(&w->own_loop, UV_RUN_DEFAULT);
        (void)uv_loop_close(&w->own_loop);
        return rc;
    }
    int lrc = http_server_listen(&w->front);
    if (lrc)
        ts_errf(err, errlen, "--listen %s:%d (worker %d): %s", p->cfg.listen_host, port, index,
                ts_strerror(lrc));
    /* started even when it cannot listen: proxy_shutdown then stops it like the others */
    rc = uv_thread_create(&w->thread, worker_main, w);
    if (rc) {
        ts_errf(err, errlen, "worker %d: cannot start its thread: %s", index, uv_strerror(rc));
        worker_stop(w, 0); /* closes the stop handle last */
        (void)uv_run(w->loop, UV_RUN_DEFAULT);
        (void)uv_loop_close(w->loop);
        return rc;
    }
    w->started = true;
    return lrc;
}

/* ------------------------------------------------------------ proxy */

static void destroy_mutexes(struct proxy *p)
{
    pthread_mutex_destroy(&p->faults_mu);
    for (int i = 0; i < p->n_workers; i++)
        pthread_mutex_destroy(&p->workers[i].hist_mu);
}

int proxy_init(struct proxy *p, uv_loop_t *loop, const struct proxy_config *cfg, char *err,
               size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->loop = loop;
    p->cfg = *cfg;
    if (!p->cfg.listen_host)
        p->cfg.listen_host = "127.0.0.1";
    if (!p->cfg.api_host)
        p->cfg.api_host = "127.0.0.1";
    if (!p->cfg.max_body_bytes)
        p->cfg.max_body_bytes = 16u << 20;
    if (!p->cfg.connect_timeout_ms)
        p->cfg.connect_timeout_ms = 10000;
    if (!p->cfg.threads)
        p->cfg.threads = 1;
    if (p->cfg.threads < 1 || p->cfg.threads > PROXY_THREADS_MAX) {
        ts_errf(err, errlen, "--threads: expected 1..%d, got %d", PROXY_THREADS_MAX,
                p->cfg.threads);
        return -EINVAL;
    }
    const char *u = cfg->upstream;
    if (!u || (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0)) {
        ts_errf(err, errlen, "--upstream: expected an http:// or https:// URL, got '%s'",
                u ? u : "");
        return -EINVAL;
    }
    size_t n = strlen(u);
    while (n > 8 && u[n - 1] == '/')
        n--;
    if (n >= sizeof p->upstream || strpbrk(u, " \r\n")) {
        ts_errf(err, errlen, "--upstream: invalid or too long URL");
        return -EINVAL;
    }
    memcpy(p->upstream, u, n);
    p->upstream[n] = '\0';
    p->cfg.upstream = p->upstream;
    proxy_tracer_init(&p->tracer, cfg->otlp, cfg->otlp_all, p->upstream);
    p->n_workers = p->cfg.threads;
    p->workers = ts_calloc((size_t)p->n_workers, sizeof *p->workers);
    if (!p->workers) {
        ts_errf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    pthread_mutex_init(&p->faults_mu, NULL);
    for (int i = 0; i < p->n_workers; i++)
        pthread_mutex_init(&p->workers[i].hist_mu, NULL);
    faultset_init(&p->faults, cfg->seed);
    int rc = uv_async_init(loop, &p->reaped, reaped_cb);
    if (rc) {
        ts_errf(err, errlen, "cannot create an async handle: %s", uv_strerror(rc));
    } else {
        p->reaped.data = p;
        rc = worker_init(p, 0, loop, p->cfg.listen_port, err, errlen);
        if (rc)
            uv_close((uv_handle_t *)&p->reaped, NULL);
    }
    if (rc) {
        faultset_release(&p->faults);
        destroy_mutexes(p);
        ts_free(p->workers);
        p->workers = NULL;
        return rc;
    }
    if (p->cfg.api) {
        struct http_server_config ac = {.host = p->cfg.api_host, .port = p->cfg.api_port};
        rc = http_server_init(&p->api, loop, &ac, proxy_api_handle, p);
        if (rc) {
            ts_errf(err, errlen, "--api: invalid host '%s'", p->cfg.api_host);
            /* worker 0 owns handles now: close them the usual way */
            p->closing_parts = 1;
            p->shutting_down = true;
            worker_stop(&p->workers[0], 0);
            return rc;
        }
        p->api_inited = true;
    }
    return 0;
}

int proxy_listen(struct proxy *p, char *err, size_t errlen)
{
    int rc = http_server_listen(&p->workers[0].front);
    if (rc) {
        ts_errf(err, errlen, "--listen %s:%d: %s", p->cfg.listen_host, p->cfg.listen_port,
                ts_strerror(rc));
        return rc;
    }
    if (p->api_inited) {
        rc = http_server_listen(&p->api);
        if (rc) {
            ts_errf(err, errlen, "--api %s:%d: %s", p->cfg.api_host, p->cfg.api_port,
                    ts_strerror(rc));
            return rc;
        }
    }
    int port = http_server_port(&p->workers[0].front);
    for (int i = 1; i < p->n_workers && !rc; i++)
        rc = worker_start(p, i, port, err, errlen);
    return rc;
}

int proxy_port(const struct proxy *p)
{
    return http_server_port(&p->workers[0].front);
}

int proxy_api_port(const struct proxy *p)
{
    return p->api_inited ? http_server_port(&p->api) : 0;
}

static void reaped_closed(uv_handle_t *h)
{
    struct proxy *p = h->data;
    faultset_release(&p->faults);
    destroy_mutexes(p);
    ts_free(p->workers);
    p->workers = NULL;
    if (p->on_closed)
        p->on_closed(p);
}

static void proxy_part_closed(struct proxy *p)
{
    if (--p->closing_parts > 0)
        return;
    uv_close((uv_handle_t *)&p->reaped, reaped_closed);
}

static void api_closed(struct http_server *s)
{
    struct proxy *p = (struct proxy *)((char *)s - offsetof(struct proxy, api));
    proxy_part_closed(p);
}

void proxy_shutdown(struct proxy *p, uint64_t grace_ms, void (*on_closed)(struct proxy *p))
{
    if (p->shutting_down)
        return;
    p->shutting_down = true;
    p->on_closed = on_closed;
    p->closing_parts = 1 + (p->api_inited ? 1 : 0);
    for (int i = 1; i < p->n_workers; i++) {
        struct proxy_worker *w = &p->workers[i];
        if (!w->started || w->joined)
            continue;
        p->closing_parts++;
        atomic_store(&w->grace_ms, grace_ms);
        uv_async_send(&w->stop);
    }
    worker_stop(&p->workers[0], grace_ms);
    if (p->api_inited)
        (void)http_server_shutdown(&p->api, 0, api_closed);
}
