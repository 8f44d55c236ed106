/*
 * exchange_rt.c - the realtime transport of one request: a WebSocket
 * connection to an OpenAI Realtime endpoint, one out-of-band
 * response.create made from the request's chat body, its events measured
 * by the same code as SSE chunks (exch_on_chunk), then a normal close.
 *
 * What is timed: the connection phases (TCP connect, the upgrade request
 * sent, the 101), the first text delta (TTFT), the gap between deltas
 * (ITL), response.done (the end of the answer; E2E ends when the close
 * completes). Integrity: deltas after response.done, events out of order
 * (a delta before response.created, a second response.done), a close code
 * other than 1000 (or none) from the server, and a connection that ends
 * without response.done (truncated).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "llm/errbody.h"
#include "llm/wsframes.h"
#include "load/runner_int.h"
#include "net/ws.h"

#define RT_MAX_MESSAGE (4u << 20)

static uint64_t since(uint64_t t, uint64_t start)
{
    return t > start ? t - start : 0;
}

static void rt_open(struct ws_call *c, void *user)
{
    struct exch *x = user;
    x->rec.http_status = 101;
    x->sse_mode = true; /* a stream began */
    char err[256];
    char rid[64];
    snprintf(rid, sizeof(rid), "ts-%016llx-%llu", (unsigned long long)x->w->run->run_id,
             (unsigned long long)x->rec.id);
    struct buf ev;
    buf_init(&ev, WORKLOAD_MAX_BODY + 4096);
    const struct wsframes_spec *wsf = x->w->run->cfg->wsframes;
    int rc = wsf ? wsframes_request(wsf, x->item.body, x->item.body_len, rid, &ev, err, sizeof(err))
                 : realtime_request_from_chat(x->item.body, x->item.body_len, rid, &ev, err,
                                              sizeof(err));
    x->rt_created = wsf != NULL; /* a gateway's frames have no response.created */
    if (!rc)
        rc = ws_call_send_text(c, ev.data, ev.len);
    buf_release(&ev);
    if (rc) {
        exch_set_error(x, "cannot send response.create: ", rc == TS_PARSE ? err : ts_strerror(rc));
        x->malformed = true;
        ws_call_close(c, WS_CLOSE_NORMAL, NULL);
    }
}

/* A text delta as a chunk with one choice carrying content. */
static void rt_delta(struct exch *x, const struct realtime_event *ev, uint64_t at)
{
    if (x->saw_done)
        x->rec.flags |= REQF_AFTER_DONE;
    if (!x->rt_created)
        x->rec.flags |= REQF_OUT_OF_ORDER;
    if (x->verifier)
        (void)chunk_verify(x->verifier, ev->sig, ev->sig ? strlen(ev->sig) : 0, ev->delta,
                           ev->delta_len);
    struct openai_choice ch;
    memset(&ch, 0, sizeof(ch));
    ch.index = 0;
    ch.content = ev->delta;
    ch.content_len = ev->delta_len;
    struct openai_chunk c;
    memset(&c, 0, sizeof(c));
    openai_usage_clear(&c.usage);
    c.flags = ev->delta_len ? OPENAI_CHUNK_CONTENT : 0;
    c.id = ev->response_id;
    c.created = -1;
    c.choices = &ch;
    c.n_choices = 1;
    exch_on_chunk(x, &c, at);
}

/* response.done: the finish reason, usage, and the end of the answer. */
static void rt_done(struct exch *x, const struct realtime_event *ev, uint64_t at)
{
    struct req_record *r = &x->rec;
    if (x->saw_done || !x->rt_created)
        r->flags |= REQF_OUT_OF_ORDER;
    const char *finish = realtime_finish_reason(ev);
    if (finish && (!strcmp(finish, "stop") || !strcmp(finish, "length"))) {
        x->saw_finish = true;
        snprintf(r->finish_reason, sizeof(r->finish_reason), "%s", finish);
    } else {
        x->saw_error = true;
        char msg[REQ_ERROR_MAX];
        snprintf(msg, sizeof(msg), "response %s%s%s%s", ev->status ? ev->status : "without status",
                 ev->reason ? " (" : "", ev->reason ? ev->reason : "", ev->reason ? ")" : "");
        exch_set_error(x, "", ev->error.message ? ev->error.message : msg);
    }
    struct openai_chunk c;
    memset(&c, 0, sizeof(c));
    c.usage = ev->usage;
    c.flags = ev->usage.present ? OPENAI_CHUNK_USAGE : 0;
    c.created = -1;
    exch_on_chunk(x, &c, at);
    x->saw_done = true;
    if (!x->rt_done_ns)
        x->rt_done_ns = at;
    r->last_chunk_ns = x->last_choice_ns;
    if (x->ws)
        ws_call_close(x->ws, WS_CLOSE_NORMAL, NULL);
}

static void rt_cancel(struct exch *x);

/* Time first, decode later: the message waits with its arrival time for
 * the worker's check pass (exch_rx_parse), as SSE bytes do. */
static void rt_message(struct ws_call *call, int opcode, const char *data, size_t len, uint64_t at,
                       void *user)
{
    struct exch *x = user;
    (void)call;
    if (!x->rec.first_byte_ns)
        x->rec.first_byte_ns = at;
    if (opcode != WS_OP_TEXT) { /* as a malformed event: counted, the rest goes on */
        char what[64];
        snprintf(what, sizeof what, "a binary message (%zu bytes), not a text event", len);
        x->malformed = true;
        exch_set_error(x, "malformed event: ", what);
        return;
    }
    if (exch_rx_push(x, data, len, at, true))
        rt_cancel(x);
}

/* One realtime message, decoded and measured. */
/* --ws-frames: usage seen in any frame; the end marker on a delta frame. */
static void wsf_after(struct exch *x, const struct realtime_event *ev, bool end, uint64_t at)
{
    if (ev->usage.present) {
        struct openai_chunk c;
        memset(&c, 0, sizeof(c));
        c.usage = ev->usage;
        c.flags = OPENAI_CHUNK_USAGE;
        c.created = -1;
        exch_on_chunk(x, &c, at);
    }
    if (end && ev->kind == REALTIME_EV_DELTA) {
        struct realtime_event done = *ev;
        done.kind = REALTIME_EV_RESPONSE_DONE;
        done.status = "completed";
        rt_done(x, &done, at);
    }
}

static int rt_feed(struct exch *x, char *data, size_t len, uint64_t at)
{
    struct realtime_event ev;
    const struct wsframes_spec *wsf = x->w->run->cfg->wsframes;
    bool end = false;
    x->rec.last_event_ns = at;
    if (!x->rtdec) {
        if (!(x->rtdec = ts_malloc(sizeof(*x->rtdec)))) {
            exch_set_error(x, "", "out of memory");
            return -ENOMEM; /* the stream cannot be read further */
        }
        realtime_decoder_init(x->rtdec);
    }
    if (wsf ? wsframes_decode(wsf, x->rtdec, data, len, &ev, &end)
            : realtime_decode(x->rtdec, data, len, &ev)) {
        x->malformed = true;
        exch_set_error(x, "malformed event: ", x->rtdec->errmsg);
        return 0; /* go on: later events may still be fine */
    }
    switch (ev.kind) {
    case REALTIME_EV_RESPONSE_CREATED:
        if (x->rt_created || x->rec.choice_chunks)
            x->rec.flags |= REQF_OUT_OF_ORDER;
        x->rt_created = true;
        break;
    case REALTIME_EV_DELTA:
        rt_delta(x, &ev, at);
        break;
    case REALTIME_EV_RESPONSE_DONE:
        rt_done(x, &ev, at);
        break;
    case REALTIME_EV_ERROR: {
        struct openai_chunk c;
        memset(&c, 0, sizeof(c));
        openai_usage_clear(&c.usage);
        c.flags = OPENAI_CHUNK_ERROR;
        c.error = ev.error;
        c.created = -1;
        exch_on_chunk(x, &c, at);
        /* the response was refused (or a gateway's error): nothing more will come */
        if ((!x->rt_created || wsf) && x->ws)
            ws_call_close(x->ws, WS_CLOSE_NORMAL, NULL);
        break;
    }
    default:
        break;
    }
    if (wsf)
        wsf_after(x, &ev, end, at);
    return 0;
}

/* What the close said, when it says something went wrong. */
static void rt_close_check(struct exch *x, const struct ws_call_result *res)
{
    uint16_t code = res->close_code;
    if (res->status != 101 || x->cut)
        return;
    /* 1006 is no close frame at all: the cut itself is the failure (truncated) */
    if (code && code != WS_CLOSE_NORMAL && code != WS_CLOSE_NO_STATUS &&
        code != WS_CLOSE_ABNORMAL) {
        char msg[96];
        x->rec.flags |= REQF_BAD_CLOSE;
        snprintf(msg, sizeof(msg), "the server closed with %u%s", code,
                 x->saw_done ? " after response.done" : " before response.done");
        exch_set_error(x, "", msg);
    }
}

static void rt_finished(struct ws_call *call, const struct ws_call_result *res, void *user)
{
    struct exch *x = user;
    struct req_record *r = &x->rec;
    (void)call;
    x->ws = NULL;
    if (x->nseg)
        exch_rx_parse(x); /* messages of this loop pass not parsed yet */
    long st = res->status;
    if (x->w->run->cfg->realtime_fallback && !x->cut &&
        (st == 400 || st == 404 || st == 405 || st == 426 || st == 501)) {
        exch_fallback_sse(x);
        return;
    }
    /* E2E ends with response.done: the close handshake after it is not the answer's */
    r->end_ns = x->rt_done_ns ? x->rt_done_ns : res->end_ns ? res->end_ns : ts_now_ns();
    if (!r->http_status)
        r->http_status = (int)res->status;
    uint64_t start = res->start_ns;
    r->connect_us = (uint32_t)(since(res->connect_ns, start) / 1000);
    r->sent_us = (uint32_t)(since(res->sent_ns, start) / 1000);
    r->tls_us = (uint32_t)(since(res->tls_ns, start) / 1000);
    r->ttfb_us = (uint32_t)(since(res->upgrade_ns, start) / 1000);
    if (res->status != 101 && res->body_len && buf_append(&x->body, res->body, res->body_len))
        buf_reset(&x->body);
    if (res->status != 101 && res->status) {
        char msg[REQ_ERROR_MAX];
        x->sse_mode = false;
        if (errbody_describe(buf_cstr(&x->body), x->body.len, msg, sizeof(msg)))
            exch_set_error(x, "upgrade refused: ", msg);
    }
    r->last_chunk_ns = x->last_choice_ns;
    if (res->status == 101)
        exch_sig_record(x);
    rt_close_check(x, res);
    struct http_call_result h;
    memset(&h, 0, sizeof(h));
    h.error = res->error;
    h.error_text = res->error_text;
    h.status = res->status;
    h.start_ns = res->start_ns;
    h.end_ns = res->end_ns;
    if (h.error == HTTP_CALL_OK && res->status == 101 && !x->saw_done && !x->saw_error && !x->cut) {
        /* closed cleanly before the answer ended: the user saw a cut answer */
        h.error = HTTP_CALL_ERR_RECV;
        h.error_text = "closed before response.done";
    }
    exch_complete(x, &h);
}

static const struct ws_call_ops rt_ops = {
    .on_open = rt_open,
    .on_message = rt_message,
    .on_done = rt_finished,
};

static int rt_start(struct exch *x, const struct http_call_spec *spec)
{
    /* the run's headers minus the body's Content-Type (an upgrade has no body) */
    const char *headers[2 * RUNNER_MAX_HEADERS + 8];
    size_t n = 0;
    for (size_t i = 0; i < spec->n_headers && n < sizeof(headers) / sizeof(headers[0]); i++)
        if (strncasecmp(spec->headers[i], "content-type:", 13))
            headers[n++] = spec->headers[i];
    /* a per-call timeout, else the run's --timeout, --timeout-idle and
       --timeout-connect (the HTTP client applies those itself; the
       WebSocket call is told) */
    const struct http_client_config *cc = &x->w->run->cfg->client;
    uint32_t total = spec->total_timeout_ms ? spec->total_timeout_ms : cc->total_timeout_ms;
    uint32_t idle = spec->idle_timeout_ms ? spec->idle_timeout_ms : cc->idle_timeout_ms;
    struct ws_call_spec ws = {
        .url = spec->url,
        .headers = headers,
        .n_headers = n,
        .connect_timeout_ms = cc->connect_timeout_ms,
        .total_timeout_ms = total == HTTP_CALL_TIMEOUT_NONE ? 0 : total,
        .idle_timeout_ms = idle == HTTP_CALL_TIMEOUT_NONE ? 0 : idle,
        .max_message = RT_MAX_MESSAGE,
        .mask_seed = x->w->run->run_id ^ (x->rec.id * 0x9e3779b97f4a7c15ull),
        .insecure = x->w->run->cfg->client.insecure,
    };
    return ws_call_open(&x->w->loop, &ws, &rt_ops, x, &x->ws);
}

static void rt_cancel(struct exch *x)
{
    if (x->ws)
        ws_call_cancel(x->ws);
}

const struct exch_transport exch_rt_transport = {
    .name = "realtime",
    .start = rt_start,
    .cancel = rt_cancel,
    .feed = rt_feed,
};
