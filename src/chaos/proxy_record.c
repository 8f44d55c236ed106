/*
 * proxy_record.c - one exchange into the proxy's recording (`--record`,
 * chaos/recorder.h): the request as it came (secrets redacted), what the
 * upstream answered (status, headers, each event with its offset, or the
 * body), written as one line when the request is freed.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "base/clock.h"
#include "chaos/proxy_int.h"
#include "chaos/recorder.h"
#include "llm/recording.h"
#include "report/result.h"
#include "net/ws.h"

/* A Sec-WebSocket-Protocol value with its API-key tokens redacted: browser
 * clients of OpenAI's Realtime API send the key as the subprotocol
 * "openai-insecure-api-key.<key>". */
static json_t *ws_protocol_json(const char *v)
{
    static const char tok[] = "openai-insecure-api-key.";
    struct buf b;
    buf_init(&b, 1u << 16);
    int rc = 0;
    const char *k;
    while (!rc && (k = strstr(v, tok)) != NULL) {
        rc = buf_append(&b, v, (size_t)(k - v) + sizeof tok - 1);
        rc = rc ? rc : buf_append_str(&b, "[redacted]");
        v = k + sizeof tok - 1;
        v += strcspn(v, ", ");
    }
    rc = rc ? rc : buf_append_str(&b, v);
    json_t *j = rc ? NULL : json_stringn(b.data ? b.data : "", b.len);
    buf_release(&b);
    return j;
}

/* Headers as an object, secret values redacted. */
static json_t *headers_json(const struct http_header *h, size_t n)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < n; i++)
        json_object_set_new(o, h[i].name,
                            recorder_secret_header(h[i].name) ? json_string("[redacted]")
                            : !strcasecmp(h[i].name, "sec-websocket-protocol")
                                ? ws_protocol_json(h[i].value)
                                : json_string(h[i].value));
    return o;
}

/* The request's path with credential-named query values redacted
 * (`?api-key=`, `?token=`...: report/result.h). */
static json_t *path_json(const char *url)
{
    const char *q = strchr(url, '?');
    if (!q)
        return json_string(url);
    struct buf b;
    buf_init(&b, 1u << 20);
    const char *end = q + strcspn(q, "#");
    json_t *j = NULL;
    if (buf_append(&b, url, (size_t)(q - url) + 1) == 0 && result_put_query(&b, q + 1, end) == 0 &&
        buf_append_str(&b, end) == 0)
        j = json_stringn(b.data, b.len);
    buf_release(&b);
    return j;
}

/* A body as a JSON value (redacted by the recorder's pointers), or a string. */
static json_t *body_json(const struct recorder *r, const char *body, size_t len)
{
    if (!len)
        return json_null();
    json_t *j = json_loadb(body, len, JSON_DECODE_ANY, NULL);
    if (j) {
        if (r)
            recorder_redact_all(r, j);
        return j;
    }
    return json_stringn_nocheck(body, len);
}

/* The request's part of a line, at now. */
static json_t *request_json(struct proxy *p, const struct http_request *req, uint64_t now)
{
    char hash[17];
    uint64_t start = recorder_start_ns(p->recorder);
    recording_body_hash(req->body, req->body_len, hash);
    return json_pack("{s:i,s:I,s:f,s:I,s:s,s:o,s:o,s:o,s:s}", "v", 1, "id",
                     (json_int_t)atomic_fetch_add(&p->rec_seq, 1), "offset_ms",
                     now > start ? (double)(now - start) / 1e6 : 0.0, "wall_ms",
                     (json_int_t)(ts_wall_ns() / 1000000), "method", req->method, "path",
                     path_json(req->url), "headers", headers_json(req->headers, req->header_count),
                     "body", body_json(p->recorder, req->body, req->body_len), "body_hash", hash);
}

/* What one exchange's events or one session's messages may take in its
 * line, as written (escaped, base64), so that the line stays under a
 * reader's RECORDING_LINE_MAX with 1 MiB left for the request's part; each
 * event or message also counts PX_REC_EACH for its time, type or direction
 * and brackets. Past it nothing more is recorded (body_too_large). */
#define PX_REC_BYTES ((size_t)RECORDING_LINE_MAX - (1u << 20))
#define PX_REC_EACH  64

/* The bytes data takes in a line: text as the recorder writes it (ASCII
 * only: a control byte as \u00XX, a code point past U+007F as one \uXXXX,
 * two past U+FFFF), anything else as base64. */
static size_t rec_written_len(bool text, const char *data, size_t len)
{
    if (!text)
        return base64_len(len);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)data[i];
        n += c < 0x20                ? 6
             : c == '"' || c == '\\' ? 2
             : c < 0x80              ? 1
             : c >= 0xf0             ? 12
             : c >= 0xc0             ? 6
                                     : 0;
    }
    return n;
}

/* Whether an event or message of cost bytes still fits a line that holds
 * count of them in *used bytes, and the recorder's budget for the
 * exchanges in progress (else *full); then reserved and counted in *used. */
static bool rec_fits(struct recorder *rc, size_t *used, size_t count, size_t cost, bool *full)
{
    if (count >= RECORDING_EVENTS_MAX || *used > PX_REC_BYTES || cost > PX_REC_BYTES - *used)
        return false;
    if (!recorder_reserve(rc, cost)) {
        *full = true;
        return false;
    }
    *used += cost;
    return true;
}

/* What a request's part of a line takes, about, as written: its path,
 * headers and body (escapes counted) and the fields around them. */
static size_t request_cost(const struct http_request *req)
{
    size_t n = 256 + strlen(req->url) + rec_written_len(true, req->body, req->body_len);
    for (size_t i = 0; i < req->header_count; i++)
        n += strlen(req->headers[i].name) + strlen(req->headers[i].value) + 8;
    return n;
}

/* The request's part of a line, started at *t0, with its cost reserved
 * in the recorder's budget (in *bytes). NULL when it does not fit (counted
 * as skipped) or on -ENOMEM; nothing is then reserved. */
static json_t *request_begin(struct proxy *p, const struct http_request *req, uint64_t *t0,
                             size_t *bytes)
{
    size_t cost = request_cost(req);
    if (!recorder_reserve(p->recorder, cost)) {
        recorder_count_skip(p->recorder);
        return NULL;
    }
    *t0 = ts_now_ns();
    json_t *rec = request_json(p, req, *t0);
    if (!rec)
        recorder_unreserve(p->recorder, cost);
    else
        *bytes = cost;
    return rec;
}

/* An exchange's line is queued (written true) or dropped: its bytes go
 * back to the budget, and a cut is counted for a line queued with a part
 * left out (a dropped one is counted as dropped). */
static void rec_done(struct recorder *rc, size_t *used, bool written, bool cut, bool full)
{
    recorder_unreserve(rc, *used);
    *used = 0;
    if (written && cut)
        recorder_count_cut(rc, full ? RECORDER_CUT_MEMORY : RECORDER_CUT_LINE);
}

void px_record_begin(struct pxreq *x)
{
    struct proxy *p = x->p;
    if (!p->recorder || !(x->rec = request_begin(p, x->req, &x->rec_t0, &x->rec_bytes)))
        return;
    buf_init(&x->rec_body, p->cfg.max_body_bytes);
}

/* One upstream event into the record. */
static int rec_on_event(void *ctx, const struct sse_event *ev)
{
    struct pxreq *x = ctx;
    json_t *events = json_object_get(x->rec, "events");
    if (!events || x->rec_body_cut)
        return 0;
    size_t cost = rec_written_len(true, ev->data, ev->data_len) + ev->type_len + PX_REC_EACH;
    if (!rec_fits(x->p->recorder, &x->rec_bytes, json_array_size(events), cost, &x->rec_full)) {
        x->rec_body_cut = true; /* past what a reader takes, or the budget */
        return 0;
    }
    double ms = ev->arrival_ns > x->rec_t0 ? (double)(ev->arrival_ns - x->rec_t0) / 1e6 : 0;
    json_t *e = json_pack("[f,s#]", ms, ev->data, (int)ev->data_len);
    if (e && ev->type_len && strncmp(ev->type, "message", ev->type_len) != 0)
        json_array_append_new(e, json_stringn_nocheck(ev->type, ev->type_len));
    json_array_append_new(events, e);
    return 0;
}

/* Appends a response header (http_call_headers_each). */
static int rec_header(void *ctx, const char *name, const char *value)
{
    json_t *o = ctx;
    json_object_set_new(o, name, json_string(recorder_secret_header(name) ? "[redacted]" : value));
    return 0;
}

void px_record_head(struct pxreq *x, struct http_call *call, int status)
{
    if (!x->rec)
        return;
    json_t *h = json_object();
    if (h)
        (void)http_call_headers_each(call, rec_header, h);
    json_object_set_new(x->rec, "status", json_integer(status));
    json_object_set_new(x->rec, "response_headers", h ? h : json_object());
    const char *ct = http_call_header(call, "content-type");
    if (ct && strcasestr(ct, "text/event-stream")) {
        sse_parser_init(&x->rec_sse, 1u << 20, rec_on_event, x);
        x->rec_sse_on = true;
        json_object_set_new(x->rec, "events", json_array());
    }
}

void px_record_body(struct pxreq *x, const char *data, size_t len, uint64_t now_ns)
{
    if (!x->rec)
        return;
    x->rec_last = now_ns;
    if (x->rec_sse_on) {
        if (sse_parser_feed(&x->rec_sse, data, len, now_ns) != 0)
            x->rec_body_cut = true; /* an event over 1 MiB */
    } else if (!x->rec_body_cut) {
        size_t cost = rec_written_len(true, data, len);
        if (!recorder_reserve(x->p->recorder, cost)) {
            x->rec_full = x->rec_body_cut = true;
            return;
        }
        x->rec_bytes += cost;
        if (buf_append(&x->rec_body, data, len) != 0)
            x->rec_body_cut = true;
    }
}

void px_record_end(struct pxreq *x)
{
    struct proxy *p = x->p;
    if (!x->rec)
        return;
    if (x->rec_sse_on) {
        (void)sse_parser_finish(&x->rec_sse, NULL);
        sse_parser_release(&x->rec_sse);
    }
    if (json_object_get(x->rec, "status")) { /* the upstream answered */
        if (!x->rec_sse_on && !x->rec_body_cut &&
            rec_written_len(true, x->rec_body.data, x->rec_body.len) > PX_REC_BYTES)
            x->rec_body_cut = true; /* the line would be past what a reader takes */
        if (!x->rec_sse_on && !x->rec_body_cut)
            json_object_set_new(x->rec, "response_body",
                                body_json(NULL, x->rec_body.data, x->rec_body.len));
        uint64_t end = x->rec_last > x->rec_t0 ? x->rec_last : x->rec_t0;
        json_object_set_new(x->rec, "end_ms", json_real((double)(end - x->rec_t0) / 1e6));
        json_object_set_new(x->rec, "outcome",
                            json_string(x->rec_full                          ? "recorder_full"
                                        : x->rec_body_cut                    ? "body_too_large"
                                        : x->upstream_done                   ? "ok"
                                        : x->out_code == CHAIN_CLIENT_CLOSED ? "client_closed"
                                                                             : "cut"));
        bool written = recorder_write(p->recorder, x->rec) == 0;
        rec_done(p->recorder, &x->rec_bytes, written, x->rec_body_cut, x->rec_full);
    } else {
        json_decref(x->rec); /* never reached the upstream: nothing to replay */
        rec_done(p->recorder, &x->rec_bytes, false, false, false);
    }
    x->rec = NULL;
    buf_release(&x->rec_body);
}

/* ---- WebSocket sessions ---- */

void px_record_ws_begin(struct proxy *p, const struct http_request *req, struct pxws_rec *r)
{
    memset(r, 0, sizeof *r);
    if (!p->recorder || !(r->rec = request_begin(p, req, &r->t0, &r->bytes)))
        return;
    r->last = r->t0;
    json_object_set_new(r->rec, "websocket", json_true());
}

static double ws_ms(const struct pxws_rec *r, uint64_t at)
{
    return at > r->t0 ? (double)(at - r->t0) / 1e6 : 0.0;
}

/* at as the session's next time, in ms: never before the last one (the two
 * sides are timed apart, and the list stays in order). */
static double ws_stamp(struct pxws_rec *r, uint64_t at)
{
    if (at > r->last)
        r->last = at;
    return ws_ms(r, r->last);
}

/* A text message as recorded: as it came, or with --redact pointers, when
 * it is JSON, redacted (and compact again). NULL when it is not UTF-8. */
static json_t *ws_text(const struct recorder *rc, const char *data, size_t len)
{
    json_t *j = recorder_redacts(rc) ? json_loadb(data, len, JSON_DECODE_ANY, NULL) : NULL;
    if (!j)
        return json_stringn(data, len); /* NULL: not UTF-8 */
    recorder_redact_all(rc, j);
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(j);
    json_t *out = s ? json_string_nocheck(s) : NULL;
    free(s);
    return out;
}

void px_record_ws_message(struct proxy *p, struct pxws_rec *r, bool from_client, int opcode,
                          const char *data, size_t len, uint64_t at)
{
    if (!r->rec || r->cut) /* past the cap nothing more: no holes in the list */
        return;
    json_t *msgs = json_object_get(r->rec, "messages");
    if (!msgs) {
        msgs = json_array();
        json_object_set_new(r->rec, "messages", msgs);
    }
    size_t cost = rec_written_len(opcode != WS_OP_BINARY, data, len) + PX_REC_EACH;
    if (!msgs || !rec_fits(p->recorder, &r->bytes, json_array_size(msgs), cost, &r->full)) {
        r->cut = true;
        return;
    }
    json_t *m = json_pack("[f,s]", ws_stamp(r, at), from_client ? "client" : "server");
    json_t *text = opcode == WS_OP_BINARY ? NULL : ws_text(p->recorder, data, len);
    if (!m) {
        json_decref(text);
        return;
    }
    if (text) {
        json_array_append_new(m, text);
    } else { /* binary, or text that is not UTF-8: base64, marked */
        char *b = ts_malloc(base64_len(len) + 1);
        json_array_append_new(m, b ? json_stringn_nocheck(b, base64_encode(data, len, b))
                                   : json_null());
        json_array_append_new(m, json_string(opcode == WS_OP_BINARY ? "binary" : "text_base64"));
        ts_free(b);
    }
    json_array_append_new(msgs, m);
}

void px_record_ws_status(struct pxws_rec *r, int status, const char *body, size_t len)
{
    if (!r->rec)
        return;
    json_object_set_new(r->rec, "status", json_integer(status));
    if (status != 101)
        json_object_set_new(r->rec, "response_body", body_json(NULL, body, len));
}

void px_record_ws_close(struct pxws_rec *r, const char *by, unsigned code, uint64_t at)
{
    if (!r->rec || json_object_get(r->rec, "close"))
        return; /* the first close is the one that ended the session */
    json_object_set_new(r->rec, "close",
                        json_pack("{s:f,s:s,s:o}", "t_ms", ws_stamp(r, at), "by", by, "code",
                                  code ? json_integer(code) : json_null()));
}

void px_record_ws_end(struct proxy *p, struct pxws_rec *r, const char *outcome)
{
    if (!r->rec)
        return;
    if (json_object_get(r->rec, "status")) { /* the upstream answered */
        json_object_set_new(r->rec, "end_ms", json_real(ws_ms(r, r->last)));
        json_object_set_new(r->rec, "outcome",
                            json_string(r->full  ? "recorder_full"
                                        : r->cut ? "body_too_large"
                                                 : outcome));
        bool written = recorder_write(p->recorder, r->rec) == 0;
        rec_done(p->recorder, &r->bytes, written, r->cut, r->full);
    } else {
        json_decref(r->rec);
        rec_done(p->recorder, &r->bytes, false, false, false);
    }
    r->rec = NULL;
}
