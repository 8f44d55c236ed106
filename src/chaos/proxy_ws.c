/*
 * proxy_ws.c - WebSocket pass-through of the chaos proxy: an upgrade request
 * is forwarded to the upstream (ws:// for http://, wss:// for https://) by
 * net/ws_client; once the upstream answers 101 the client's upgrade is
 * accepted and whole messages (text or binary, each as it came) are relayed
 * both ways through wslay (net/ws.h on the client side, ws_client on the
 * upstream side). Messages go through the frame faults of ws_faults.h, one
 * tap per direction (the server's to the client by default, the client's
 * to the server for a fault of direction upstream or both): delayed,
 * dropped, duplicated, swallowed, or replaced by a close. An upstream that refuses the upgrade has its status
 * and body passed on. Runs on the worker's loop.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "chaos/proxy_int.h"
#include "chaos/ws_faults.h"
#include "net/ws.h"
#include "net/ws_client.h"

#define PXWS_MAX_MESSAGE (4u << 20)  /* a relayed message, either way */
#define PXWS_MAX_QUEUED  (16u << 20) /* messages held back by faults */
#define PXWS_HEAD_MAX    16384

/* A message held back by a fault (or a close), in order. */
struct pxws_msg {
    struct pxws_msg *next;
    uint64_t at;
    bool close;
    uint8_t opcode; /* WS_OP_TEXT or WS_OP_BINARY (a message) */
    uint16_t code;
    char reason[124];
    size_t len;
    char data[];
};

/* The messages of one direction held back, in order. */
struct pxws_q {
    struct pxws_msg *head, *tail;
    size_t bytes;
};

struct pxws {
    struct pxws *prev, *next; /* the worker's list */
    struct proxy *p;
    struct proxy_worker *w;
    struct http_request *req; /* the client's; NULL once finished */
    struct ws_call *call;     /* the upstream's; NULL once on_done ran */
    struct ws_conn cws;       /* the client side, after the upgrade */
    bool upgraded;
    struct ws_tap tap;  /* the server's messages to the client */
    struct ws_tap utap; /* the client's to the server */
    struct ptimer timer;
    bool timer_on, timer_closing;
    struct pxws_q down, up; /* held for the client, for the upstream */
    char accept[WS_ACCEPT_LEN + 1];
    struct pxws_rec rec;     /* --record: the session as it came, before any fault */
    const char *rec_outcome; /* its outcome: "ok", "cut" or "client_closed" */
};

static void pxws_flush(struct pxws *s);
static void pxws_pump(struct pxws *s);

static void pxws_q_release(struct pxws_q *q)
{
    while (q->head) {
        struct pxws_msg *m = q->head;
        q->head = m->next;
        ts_free(m);
    }
    q->tail = NULL;
    q->bytes = 0;
}

/* The first message of q, taken off it. */
static struct pxws_msg *pxws_q_pop(struct pxws_q *q)
{
    struct pxws_msg *m = q->head;
    q->head = m->next;
    if (!q->head)
        q->tail = NULL;
    q->bytes -= m->len;
    return m;
}

static void pxws_timer_closed(struct ptimer *t);

/* Frees s once the client's request is finished and the upstream call is
 * gone (closing the timer first). */
static void pxws_maybe_free(struct pxws *s)
{
    if (s->req || s->call)
        return;
    if (s->timer_on) {
        if (!s->timer_closing) {
            s->timer_closing = true;
            ptimer_close(&s->timer, pxws_timer_closed);
        }
        return;
    }
    if (s->prev)
        s->prev->next = s->next;
    else
        s->w->ws_sessions = s->next;
    if (s->next)
        s->next->prev = s->prev;
    px_record_ws_end(s->p, &s->rec, s->rec_outcome ? s->rec_outcome : "ok");
    ws_tap_release(&s->tap);
    ws_tap_release(&s->utap);
    ws_conn_release(&s->cws);
    pxws_q_release(&s->down);
    pxws_q_release(&s->up);
    atomic_fetch_sub_explicit(&s->p->in_flight, 1, memory_order_relaxed);
    struct proxy_worker *w = s->w;
    ts_free(s);
    proxy_worker_ws_gone(w);
}

static void pxws_timer_closed(struct ptimer *t)
{
    struct pxws *s = t->data;
    s->timer_on = false;
    pxws_maybe_free(s);
}

/* Over for the client: the connection is ended (abort: cut, else its
 * queued bytes go first) and the upstream is closed with up_code. */
static void pxws_end(struct pxws *s, bool abort, uint16_t up_code)
{
    struct http_request *req = s->req;
    s->req = NULL;
    if (req) {
        if (abort)
            (void)http_stream_abort(req);
        else
            (void)http_stream_end(req);
    }
    if (s->call && s->upgraded)
        ws_call_close(s->call, up_code ? up_code : WS_CLOSE_GOING_AWAY, NULL);
    else if (s->call)
        ws_call_cancel(s->call); /* no 101 yet: nothing to close */
}

static int pxws_client_write(struct ws_conn *ws, const void *data, size_t len, void *ctx)
{
    struct pxws *s = ctx;
    (void)ws;
    if (!s->req)
        return TS_CLOSED;
    int rc = http_stream_write(s->req, data, len);
    return rc == TS_AGAIN ? 0 : rc; /* bounded by the server's write queue */
}

static int pxws_queue(struct pxws_q *q, uint64_t at, int opcode, const char *data, size_t len,
                      bool close, uint16_t code, const char *reason);

/* Queues what verdict v says of one message (its copies, then a close).
 * Nonzero: the queue is full. */
static int pxws_take(struct pxws_q *q, const struct ws_verdict *v, int opcode, const char *data,
                     size_t len)
{
    int rc = 0;
    for (unsigned i = 0; !rc && i < v->copies; i++)
        rc = pxws_queue(q, v->at, opcode, data, len, false, 0, NULL);
    if (!rc && v->close)
        rc = pxws_queue(q, v->at, 0, NULL, 0, true, v->code, v->reason);
    return rc;
}

/* The Realtime event type of a message: "" for a binary one. */
static const char *pxws_type(int opcode, const char *data, size_t len, char type[WS_EVENT_TYPE_MAX])
{
    if (opcode == WS_OP_TEXT)
        return ws_event_type(data, len, type);
    type[0] = '\0';
    return type;
}

/* A client's message to the upstream as it is. */
static void pxws_send_up(struct pxws *s, int opcode, const char *data, size_t len)
{
    if (ws_call_send(s->call, opcode, data, len) != 0)
        (void)ws_conn_close(&s->cws, WS_CLOSE_SERVER_ERR, "upstream gone");
    else
        atomic_fetch_add_explicit(&s->p->ws_messages[0], 1, memory_order_relaxed);
}

/* A whole message of the client: to the upstream, through the upstream
 * faults when there are any. Runs inside ws_conn_feed: never frees s. */
static void pxws_client_message(struct ws_conn *ws, int opcode, const uint8_t *data, size_t len,
                                void *ctx)
{
    struct pxws *s = ctx;
    (void)ws;
    const char *d = (const char *)data;
    if (!s->call)
        return;
    px_record_ws_message(s->p, &s->rec, true, opcode, d, len, ts_now_ns());
    if (!ws_tap_active(&s->utap)) {
        pxws_send_up(s, opcode, d, len);
        return;
    }
    char type[WS_EVENT_TYPE_MAX];
    struct ws_verdict v = ws_tap_message(&s->utap, pxws_type(opcode, d, len, type), ts_now_ns());
    if (pxws_take(&s->up, &v, opcode, d, len) != 0) {
        (void)ws_conn_close(&s->cws, WS_CLOSE_TOO_BIG, "proxy queue full");
        pxws_end(s, false, WS_CLOSE_GOING_AWAY);
        return;
    }
    pxws_pump(s);
}

/* The client's close, answered: passed upstream, after the client's
 * messages still held back (then by the pump). */
static void pxws_client_closed(struct pxws *s, uint16_t code)
{
    if (!s->req || !s->up.head || !s->call || !s->upgraded) {
        pxws_end(s, false, code);
        return;
    }
    struct http_request *req = s->req;
    s->req = NULL;
    (void)http_stream_end(req);
    if (pxws_queue(&s->up, s->up.tail->at, 0, NULL, 0, true, code, NULL) != 0) {
        pxws_q_release(&s->up); /* nothing may follow the close */
        ws_call_close(s->call, code, NULL);
    }
    pxws_pump(s);
}

static const struct ws_conn_ops pxws_client_ops = {
    .on_message = pxws_client_message,
    .write = pxws_client_write,
};

static void pxws_on_data(struct http_request *req, const char *data, size_t len)
{
    struct pxws *s = req->user;
    int rc = ws_conn_feed(&s->cws, data, len);
    if (rc == TS_CLOSED && ws_conn_close_sent(&s->cws)) {
        /* the client's close as it came, or the one we sent it (an
         * oversized message, a protocol error) */
        bool got = ws_conn_close_received(&s->cws);
        uint16_t code = got ? ws_conn_close_code(&s->cws) : 0;
        px_record_ws_close(&s->rec, got ? "client" : "proxy",
                           !got                         ? ws_conn_close_code_sent(&s->cws)
                           : code == WS_CLOSE_NO_STATUS ? 0
                                                        : code,
                           ts_now_ns());
        if (code == WS_CLOSE_NO_STATUS || code == WS_CLOSE_ABNORMAL)
            code = WS_CLOSE_NORMAL;
        pxws_client_closed(s, code);
    } else if (rc && rc != TS_CLOSED) {
        pxws_end(s, true, WS_CLOSE_GOING_AWAY);
    }
    pxws_maybe_free(s);
}

static void pxws_on_abort(struct http_request *req)
{
    struct pxws *s = req->user;
    s->rec_outcome = "client_closed"; /* its connection ended without a close */
    pxws_end(s, true, WS_CLOSE_GOING_AWAY);
    pxws_maybe_free(s);
}

/* ---- held messages, both ways ---- */

static void pxws_timer_cb(struct ptimer *t)
{
    pxws_flush(t->data);
}

/* Sends the client's held messages that are due to the upstream: a close
 * among them closes the upstream, whose answer ends the connection
 * (up_on_done). */
static void pxws_pump_up(struct pxws *s, uint64_t now)
{
    while (s->call && s->up.head && s->up.head->at <= now) {
        struct pxws_msg *m = pxws_q_pop(&s->up);
        if (m->close)
            ws_call_close(s->call, m->code, m->reason[0] ? m->reason : NULL);
        else
            pxws_send_up(s, m->opcode, m->data, m->len);
        ts_free(m);
    }
}

/* Sends what is due both ways; arms the timer for the rest. Never frees s. */
static void pxws_pump(struct pxws *s)
{
    uint64_t now = ts_now_ns();
    pxws_pump_up(s, now);
    while (s->req && s->down.head && s->down.head->at <= now) {
        struct pxws_msg *m = pxws_q_pop(&s->down);
        bool close = m->close;
        int rc = close ? ws_conn_close(&s->cws, m->code, m->reason[0] ? m->reason : NULL)
                       : ws_conn_send(&s->cws, m->opcode, m->data, m->len);
        if (!close && !rc)
            atomic_fetch_add_explicit(&s->p->ws_messages[1], 1, memory_order_relaxed);
        ts_free(m);
        if (close || (rc && rc != TS_CLOSED) || ws_conn_failed(&s->cws)) {
            /* a close went out, or writing failed (the server cut a client
             * whose output passed its queue's limit): the connection ends
             * once its bytes are written; the upstream is let go */
            pxws_end(s, !close, close ? WS_CLOSE_GOING_AWAY : 0);
        }
    }
    uint64_t next = UINT64_MAX;
    if (s->req && s->down.head)
        next = s->down.head->at;
    if (s->call && s->up.head && s->up.head->at < next)
        next = s->up.head->at;
    if (next != UINT64_MAX && s->timer_on && !s->timer_closing &&
        ptimer_start_at(&s->timer, next, pxws_timer_cb) != 0)
        pxws_end(s, true, WS_CLOSE_GOING_AWAY);
}

/* pxws_pump, then frees s if it is over: only from the loop's callbacks. */
static void pxws_flush(struct pxws *s)
{
    pxws_pump(s);
    pxws_maybe_free(s);
}

/* Queues a message (or a close: data NULL) to go out at at. */
static int pxws_queue(struct pxws_q *q, uint64_t at, int opcode, const char *data, size_t len,
                      bool close, uint16_t code, const char *reason)
{
    if (q->bytes + len > PXWS_MAX_QUEUED)
        return -ENOMEM;
    struct pxws_msg *m = ts_malloc(sizeof *m + len);
    if (!m)
        return -ENOMEM;
    *m = (struct pxws_msg){
        .at = at, .close = close, .opcode = (uint8_t)opcode, .code = code, .len = len};
    snprintf(m->reason, sizeof m->reason, "%s", reason ? reason : "");
    if (len)
        memcpy(m->data, data, len);
    if (q->tail)
        q->tail->next = m;
    else
        q->head = m;
    q->tail = m;
    q->bytes += len;
    return 0;
}

static void up_on_message(struct ws_call *c, int opcode, const char *data, size_t len, uint64_t at,
                          void *user)
{
    struct pxws *s = user;
    (void)c;
    px_record_ws_message(s->p, &s->rec, false, opcode, data, len, at);
    if (!s->req)
        return;
    uint64_t now = ts_now_ns();
    struct ws_verdict v = {.copies = 1, .at = now, .reason = ""};
    char type[WS_EVENT_TYPE_MAX];
    if (ws_tap_active(&s->tap))
        v = ws_tap_message(&s->tap, pxws_type(opcode, data, len, type), now);
    if (pxws_take(&s->down, &v, opcode, data, len) != 0) {
        (void)ws_conn_close(&s->cws, WS_CLOSE_TOO_BIG, "proxy queue full");
        pxws_end(s, false, WS_CLOSE_GOING_AWAY);
    }
    pxws_flush(s);
}

/* ---- the upstream's side ---- */

static void up_on_open(struct ws_call *c, void *user)
{
    struct pxws *s = user;
    char extra[160];
    (void)c;
    px_record_ws_status(&s->rec, 101, NULL, 0);
    if (!s->req)
        return;
    if (ws_conn_init(&s->cws, true, PXWS_MAX_MESSAGE, 0, &pxws_client_ops, s) != 0) {
        s->rec_outcome = "cut"; /* the upstream's session, never the client's */
        (void)http_respond(s->req, 500, NULL, NULL, NULL, 0);
        s->req = NULL;
        ws_call_cancel(s->call);
        return;
    }
    snprintf(extra, sizeof extra,
             "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n",
             s->accept);
    int rc = http_upgrade(s->req, extra, pxws_on_data);
    if (rc) {
        s->rec_outcome = "cut";
        if (rc == -EINVAL)
            (void)http_respond(s->req, 400, NULL, NULL, NULL, 0);
        else
            (void)http_stream_end(s->req);
        s->req = NULL;
        ws_call_cancel(s->call);
        return;
    }
    s->upgraded = true;
    atomic_fetch_add_explicit(&s->p->ws_connections, 1, memory_order_relaxed);
}

/* The upstream refused the upgrade or failed before it: the client gets
 * its status and body, or a 502. */
static void pxws_refused(struct pxws *s, const struct ws_call_result *res)
{
    struct http_request *req = s->req;
    s->req = NULL;
    if (res->status >= 200 && res->status != 101) {
        px_record_ws_status(&s->rec, (int)res->status, res->body, res->body_len);
        (void)http_respond(req, (int)res->status, "application/json", NULL, res->body,
                           res->body_len);
        return;
    }
    atomic_fetch_add_explicit(&s->p->upstream_errors, 1, memory_order_relaxed);
    static const char body[] = "{\"error\":{\"message\":\"the upstream's WebSocket upgrade "
                               "failed\",\"type\":\"server_error\",\"code\":null}}";
    (void)http_respond(req, 502, "application/json", NULL, body, sizeof body - 1);
}

static void up_on_done(struct ws_call *c, const struct ws_call_result *res, void *user)
{
    struct pxws *s = user;
    (void)c;
    s->call = NULL;
    if (s->upgraded) {
        bool closed = res->error == HTTP_CALL_OK && res->close_code != WS_CLOSE_ABNORMAL;
        if (!closed && !s->rec_outcome)
            s->rec_outcome = "cut";
        if (closed)
            px_record_ws_close(&s->rec, "server",
                               res->close_code == WS_CLOSE_NO_STATUS ? 0 : res->close_code,
                               ts_now_ns());
    }
    if (s->req && !s->upgraded) {
        pxws_refused(s, res);
    } else if (s->req) {
        /* the upstream ended: its close (or the lack of one) follows the
         * messages still held back */
        uint16_t code = res->close_code;
        if (res->error == HTTP_CALL_OK && code != WS_CLOSE_ABNORMAL) {
            if (code == WS_CLOSE_NO_STATUS)
                code = 0;
            uint64_t at = s->down.tail ? s->down.tail->at : ts_now_ns();
            if (pxws_queue(&s->down, at, 0, NULL, 0, true, code, NULL) != 0)
                pxws_end(s, true, 0);
            pxws_flush(s);
        } else {
            pxws_end(s, true, 0); /* no close frame upstream: none to the client */
        }
    }
    pxws_maybe_free(s);
}

static const struct ws_call_ops up_ops = {
    .on_open = up_on_open,
    .on_message = up_on_message,
    .on_done = up_on_done,
};

/* ---- the upgrade request ---- */

bool proxy_ws_wanted(const struct http_request *req)
{
    const char *up = http_request_header(req, "upgrade");
    return up && strcasecmp(up, "websocket") == 0;
}

/* Request headers that go upstream: not the hop-by-hop ones nor those of
 * the handshake (ws_client makes its own). */
static bool ws_header_kept(const char *name)
{
    static const char *const names[] = {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "sec-websocket-key",
        "sec-websocket-version",
        "sec-websocket-extensions",
        "content-length",
        NULL,
    };
    for (size_t i = 0; names[i]; i++)
        if (strcasecmp(name, names[i]) == 0)
            return false;
    return true;
}

/* The upstream's URL of req: ws:// for http://, wss:// for https://. */
static int ws_url(const struct proxy *p, const struct http_request *req, char *out, size_t n)
{
    const char *u = p->upstream;
    const char *scheme = "ws://";
    if (!strncmp(u, "https://", 8)) {
        u += 8;
        scheme = "wss://";
    } else if (!strncmp(u, "http://", 7)) {
        u += 7;
    }
    int rc = snprintf(out, n, "%s%s%s", scheme, u, req->url[0] == '/' ? req->url : req->path);
    return rc < 0 || (size_t)rc >= n ? -EINVAL : 0;
}

static void pxws_error(struct http_request *req, int status, const char *msg)
{
    char body[320];
    int n = snprintf(body, sizeof body,
                     "{\"error\":{\"message\":\"%s\",\"type\":\"invalid_request_error\","
                     "\"code\":null}}",
                     msg);
    (void)http_respond(req, status, "application/json", NULL, body, (size_t)n);
}

/* Rolls the WS faults of the set for the connection's upgrade request;
 * seed: the session's, r: its generator for the other seeds. */
static void pxws_roll(struct pxws *s, struct http_request *req, uint64_t seed, struct rng *r)
{
    struct fault *hits[FAULTSET_HITS];
    struct fault_request fr = {
        .method = req->method,
        .path = req->path,
        .headers = req->headers,
        .n_headers = req->header_count,
    };
    pthread_mutex_lock(&s->p->faults_mu);
    size_t n = faultset_roll(&s->p->faults, &fr, 1u << FAULT_WS, ts_now_ns(), hits, FAULTSET_HITS);
    pthread_mutex_unlock(&s->p->faults_mu);
    ws_tap_init(&s->tap, hits, n, seed, FAULT_DIR_DOWNSTREAM);
    ws_tap_init(&s->utap, hits, n, rng_next_u64(r), FAULT_DIR_UPSTREAM);
    for (size_t i = 0; i < n; i++)
        fault_unref(hits[i]);
}

static int pxws_open(struct pxws *s, struct http_request *req, uint64_t seed, struct rng *r)
{
    char url[PROXY_UPSTREAM_MAX + 8192];
    const char *hv[64];
    size_t nh = 0;
    static _Thread_local char hbuf[PXWS_HEAD_MAX];
    size_t off = 0;
    if (ws_url(s->p, req, url, sizeof url) != 0)
        return -EINVAL;
    for (size_t i = 0; i < req->header_count; i++) {
        const struct http_header *h = &req->headers[i];
        if (!ws_header_kept(h->name))
            continue;
        int k = snprintf(hbuf + off, sizeof hbuf - off, "%s: %s", h->name, h->value);
        if (k < 0 || (size_t)k >= sizeof hbuf - off || nh == 64)
            return -E2BIG;
        hv[nh++] = hbuf + off;
        off += (size_t)k + 1;
    }
    struct ws_call_spec spec = {
        .url = url,
        .headers = hv,
        .n_headers = nh,
        .connect_timeout_ms =
            (uint32_t)(s->p->cfg.connect_timeout_ms ? s->p->cfg.connect_timeout_ms : 10000),
        .max_message = PXWS_MAX_MESSAGE,
        .mask_seed = seed,
        .insecure = s->p->cfg.insecure,
    };
    struct http_shaper sh;
    if (px_tcp_upstream_ws(req, r, ts_now_ns(), &sh)) /* the connection's upstream TCP faults */
        spec.send_shaper = &sh;
    int rc = ws_call_open(s->w->loop, &spec, &up_ops, s, &s->call);
    if (rc && spec.send_shaper && sh.release)
        sh.release(sh.ctx); /* not taken */
    return rc;
}

void proxy_ws_handle(struct proxy_worker *w, struct http_request *req)
{
    struct proxy *p = w->p;
    const char *key = http_request_header(req, "sec-websocket-key");
    const char *version = http_request_header(req, "sec-websocket-version");
    if (!ws_key_valid(key) || !version || strcmp(version, "13") != 0) {
        pxws_error(req, 400,
                   "Bad WebSocket handshake: Sec-WebSocket-Key and Sec-WebSocket-Version 13 "
                   "are required.");
        return;
    }
    struct pxws *s = ts_calloc(1, sizeof *s);
    if (!s || ws_accept_key(key, strlen(key), s->accept) != 0) {
        ts_free(s);
        (void)http_respond(req, 503, NULL, NULL, NULL, 0);
        return;
    }
    atomic_fetch_add_explicit(&p->in_flight, 1, memory_order_relaxed);
    s->p = p;
    s->w = w;
    s->next = w->ws_sessions;
    if (s->next)
        s->next->prev = s;
    w->ws_sessions = s;
    s->req = req;
    px_record_ws_begin(p, req, &s->rec);
    uint64_t seq = atomic_fetch_add_explicit(&p->req_seq, 1, memory_order_relaxed) + 1;
    uint64_t seed = rng_mix64(p->cfg.seed ^ rng_mix64(seq));
    struct rng r; /* the session's other seeds */
    rng_seed(&r, seed);
    pxws_roll(s, req, seed, &r);
    if (req->conn_index == 0 && !w->stopping) /* the connection's TCP faults */
        px_tcp_roll_ws(p, req, &r, ts_now_ns());
    if (ptimer_init(w->loop, &s->timer) == 0) {
        s->timer.data = s;
        s->timer_on = true;
    }
    int rc = s->timer_on ? pxws_open(s, req, seed, &r) : -ENOMEM;
    if (rc != 0) {
        s->req = NULL;
        if (rc == -E2BIG)
            pxws_error(req, 431, "too many request headers");
        else
            pxws_error(req, rc == -EINVAL ? 414 : 502, "cannot forward the WebSocket upgrade");
        pxws_end(s, false, 0);
        pxws_maybe_free(s);
        return;
    }
    req->user = s;
    http_request_on_abort(req, pxws_on_abort);
}

void proxy_ws_stop(struct proxy_worker *w)
{
    for (struct pxws *s = w->ws_sessions, *next; s; s = next) {
        next = s->next;
        if (s->req && s->upgraded) {
            (void)ws_conn_close(&s->cws, WS_CLOSE_GOING_AWAY, "proxy shutting down");
            pxws_end(s, false, WS_CLOSE_GOING_AWAY);
        } else if (s->call && s->upgraded) {
            /* the client has closed; its held messages are given up */
            pxws_q_release(&s->up);
            ws_call_close(s->call, WS_CLOSE_GOING_AWAY, "proxy shutting down");
        }
    }
}
