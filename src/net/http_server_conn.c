/*
 * http_server_conn.c - one connection of the HTTP/1.1 server without its
 * socket: the request parsed with http-parser (head, body, pipelined
 * input), responses framed into the connection's output queue, keep-alive
 * and the handler's side of the API (http_respond, http_stream_*). Bytes
 * come in through hs_conn_on_data(); output leaves through the socket layer
 * (http_server.c), which also owns the timers and the close. See
 * http_server_int.h.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <http_parser.h>

#include "base/chars.h"
#include "base/alloc.h"
#include "base/buf.h"
#include "net/http_server.h"
#include "net/http_server_int.h"

#define IN_MAX          (64 * 1024) /* unparsed input held before reading pauses */
#define OUT_BLOCK_BYTES 4096
#define POOL_MAX        256
#define HEAD_KEEP       4096
#define BODY_KEEP       4096
#define SPANS_KEEP      32

#define OUT_BLOCK_CAP (OUT_BLOCK_BYTES - sizeof(struct out_block))
#define BIG_WRITE     (4 * OUT_BLOCK_CAP)

enum body_mode {
    BODY_LENGTH,
    BODY_CHUNKED,
    BODY_RAW, /* HTTP/1.0 stream: bytes as they come, then close */
    BODY_NONE,
};

static int on_message_begin(http_parser *p);
static int on_url(http_parser *p, const char *at, size_t len);
static int on_header_field(http_parser *p, const char *at, size_t len);
static int on_header_value(http_parser *p, const char *at, size_t len);
static int on_headers_complete(http_parser *p);
static int on_body(http_parser *p, const char *at, size_t len);
static int on_message_complete(http_parser *p);

static const http_parser_settings parser_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

const char *http_status_reason(int status)
{
    if (status < 100 || status > 599)
        return "Unknown";
    const char *r = http_status_str((enum http_status)status);
    return strcmp(r, "<unknown>") == 0 ? "Unknown" : r;
}

/* -------------------------------------------------------------- output */

static struct out_block *block_get(struct http_server *s, size_t hint)
{
    struct out_block *b;
    if (hint > (1u << 30))
        hint = 1u << 30;
    if (hint > BIG_WRITE) {
        b = ts_malloc(sizeof *b + hint);
        if (!b)
            return NULL;
        b->cap = hint;
        b->pooled = false;
    } else if (s->pool) {
        b = s->pool;
        s->pool = b->next;
        s->pool_count--;
    } else {
        b = ts_malloc(OUT_BLOCK_BYTES);
        if (!b)
            return NULL;
        b->cap = OUT_BLOCK_CAP;
        b->pooled = true;
    }
    b->next = NULL;
    b->start = 0;
    b->len = 0;
    return b;
}

static void block_put(struct http_server *s, struct out_block *b)
{
    if (b->pooled && s->pool_count < POOL_MAX && !s->finishing) {
        b->next = s->pool;
        s->pool = b;
        s->pool_count++;
        return;
    }
    ts_free(b);
}

/* Copies n bytes to the end of the connection's output. 0 or -ENOMEM. */
static int out_append(struct http_conn *c, const void *p, size_t n)
{
    const char *src = p;
    c->out_total += n;
    while (n > 0) {
        struct out_block *b = c->out_tail;
        if (!b || b->len == b->cap) {
            b = block_get(c->server, n);
            if (!b)
                return -ENOMEM;
            if (c->out_tail)
                c->out_tail->next = b;
            else
                c->out_head = b;
            c->out_tail = b;
        }
        size_t k = b->cap - b->len;
        if (k > n)
            k = n;
        memcpy(b->data + b->len, src, k);
        b->len += k;
        c->queued += k;
        src += k;
        n -= k;
    }
    return 0;
}

static int out_append_str(struct http_conn *c, const char *s)
{
    return out_append(c, s, strlen(s));
}

/* "<hex>\r\n" without printf. */
static int out_chunk_head(struct http_conn *c, size_t n)
{
    char tmp[24];
    char *p = tmp + sizeof tmp;
    *--p = '\n';
    *--p = '\r';
    do {
        *--p = "0123456789abcdef"[n & 15];
        n >>= 4;
    } while (n);
    return out_append(c, p, (size_t)(tmp + sizeof tmp - p));
}

/* Fills up to max bufs with unsent output from the front; returns the count. */
unsigned hs_out_gather(struct http_conn *c, uv_buf_t *bufs, unsigned max, size_t *total)
{
    unsigned n = 0;
    *total = 0;
    for (struct out_block *b = c->out_head; b && n < max; b = b->next) {
        if (b->len == b->start)
            continue;
        bufs[n].base = b->data + b->start;
        bufs[n].len = b->len - b->start;
        n++;
        *total += b->len - b->start;
    }
    return n;
}

/* Forgets the first k bytes of output (the kernel took them). */
void hs_out_consume(struct http_conn *c, size_t k)
{
    c->sent_total += k;
    while (k > 0 && c->out_head) {
        struct out_block *b = c->out_head;
        size_t avail = b->len - b->start;
        if (k < avail) {
            b->start += k;
            c->queued -= k;
            return;
        }
        k -= avail;
        c->queued -= avail;
        c->out_head = b->next;
        if (!c->out_head)
            c->out_tail = NULL;
        block_put(c->server, b);
    }
}

static void out_release(struct http_conn *c)
{
    while (c->out_head) {
        struct out_block *b = c->out_head;
        c->out_head = b->next;
        block_put(c->server, b);
    }
    c->out_tail = NULL;
    c->queued = 0;
}

/* The server is closed: its pooled output blocks go. */
void hs_pool_free(struct http_server *s)
{
    while (s->pool) {
        struct out_block *b = s->pool;
        s->pool = b->next;
        ts_free(b);
    }
    s->pool_count = 0;
}

/* --------------------------------------------------------------- input */

void hs_in_clear(struct http_conn *c)
{
    ts_free(c->in);
    c->in = NULL;
    c->in_off = c->in_len = c->in_cap = 0;
}

/* Appends to the unparsed input, compacting first. 0, TS_TOOBIG or -ENOMEM. */
static int in_append(struct http_conn *c, const char *p, size_t n)
{
    if (n > 2 * IN_MAX - c->in_len)
        return TS_TOOBIG;
    if (c->in_off && c->in_off + c->in_len + n > c->in_cap) {
        memmove(c->in, c->in + c->in_off, c->in_len);
        c->in_off = 0;
    }
    if (c->in_len + n > c->in_cap) {
        size_t cap = c->in_cap ? c->in_cap : 1024;
        while (cap < c->in_len + n)
            cap *= 2;
        char *q = ts_realloc(c->in, cap);
        if (!q)
            return -ENOMEM;
        c->in = q;
        c->in_cap = cap;
    }
    memcpy(c->in + c->in_off + c->in_len, p, n);
    c->in_len += n;
    return 0;
}

/* The first n bytes of the unparsed input were parsed; reading resumes
 * once the input is under the mark. */
static void in_consume(struct http_conn *c, size_t n)
{
    if (n >= c->in_len) {
        hs_in_clear(c);
    } else {
        c->in_off += n;
        c->in_len -= n;
    }
    if (c->in_len < IN_MAX)
        hs_read_resume(c);
}

/* ------------------------------------------------------- request state */

static void request_clear(struct http_conn *c)
{
    if (c->head.cap > HEAD_KEEP)
        buf_release(&c->head);
    else
        buf_reset(&c->head);
    if (c->body.cap > BODY_KEEP)
        buf_release(&c->body);
    else
        buf_reset(&c->body);
    if (c->spans_cap > SPANS_KEEP) {
        ts_free(c->spans);
        ts_free(c->hdrs);
        c->spans = NULL;
        c->hdrs = NULL;
        c->spans_cap = 0;
    }
    c->nspans = 0;
    c->url_len = 0;
    c->head_bytes = 0;
    c->last_cb = CB_URL;
    c->error_status = 0;
    c->headers_done = false;

    struct http_request *r = &c->req;
    r->method = NULL;
    r->url = "";
    r->path = "";
    r->query = "";
    r->version_major = 1;
    r->version_minor = 1;
    r->keep_alive = false;
    r->headers = NULL;
    r->header_count = 0;
    r->body = "";
    r->body_len = 0;
    r->user = NULL;
    r->on_drain_ = NULL;
    r->on_abort_ = NULL;
    r->on_data_ = NULL;

    c->begun = false;
    c->upgrade_req = false;
    c->upgraded = false;
    c->chunked = false;
    c->sized = false;
    c->length_left = 0;
    c->head_only = false;
    c->resp_close = false;
    c->want_drain = false;
}

struct http_conn *hs_conn_new(struct http_server *s)
{
    struct http_conn *c = ts_calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->server = s;
    const struct http_server_config *cfg = &s->cfg;
    buf_init(&c->head, 2 * cfg->max_header_bytes + 2 * cfg->max_headers + 64);
    buf_init(&c->body, cfg->max_body_bytes);
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    c->tcp.data = c;
    c->timer.data = c;
    c->wreq.data = c;
    c->sreq.data = c;
    request_clear(c);
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->conn_count++;
    return c;
}

void hs_conn_free(struct http_conn *c)
{
    struct http_server *s = c->server;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->conn_count--;
    ts_free(c->usend);
    out_release(c);
    hs_in_clear(c);
    ts_free(c->spans);
    ts_free(c->hdrs);
    buf_release(&c->head);
    buf_release(&c->body);
    if (c->shape) {
        if (c->shape->sh.release)
            c->shape->sh.release(c->shape->sh.ctx);
        ts_free(c->shape);
    }
    ts_free(c);
    hs_server_maybe_finish(s);
}

/* ---------------------------------------------------- parser callbacks */

static int fail_cb(struct http_conn *c, int rc, int status_toobig)
{
    c->error_status = rc == -ENOMEM ? 500 : status_toobig;
    return -1;
}

/* Appends request-head bytes; counted ones are held to max_header_bytes. */
static int head_add(struct http_conn *c, const char *at, size_t len, bool counted)
{
    if (counted) {
        if (len > c->server->cfg.max_header_bytes - c->head_bytes)
            return TS_TOOBIG;
        c->head_bytes += len;
    }
    return buf_append(&c->head, at, len);
}

static int head_nul(struct http_conn *c)
{
    return buf_append_char(&c->head, '\0');
}

static int on_message_begin(http_parser *p)
{
    struct http_conn *c = p->data;
    c->in_message = true;
    if (c->tstate != T_FIRST)
        hs_timer_set(c, T_HEAD);
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    struct http_conn *c = p->data;
    int rc = head_add(c, at, len, true);
    return rc ? fail_cb(c, rc, 414) : 0;
}

/* Ends the piece (target, name or value) being received. */
static int head_end_piece(struct http_conn *c)
{
    if (c->last_cb == CB_URL) {
        c->url_len = (uint32_t)c->head.len;
    } else if (c->last_cb == CB_FIELD) {
        struct field_span *sp = &c->spans[c->nspans - 1];
        sp->name_len = (uint32_t)c->head.len - sp->name_off;
    } else {
        struct field_span *sp = &c->spans[c->nspans - 1];
        sp->value_len = (uint32_t)c->head.len - sp->value_off;
    }
    return head_nul(c);
}

static int spans_grow(struct http_conn *c)
{
    uint32_t cap = c->spans_cap ? c->spans_cap * 2 : 16;
    if (cap > c->server->cfg.max_headers)
        cap = (uint32_t)c->server->cfg.max_headers;
    struct field_span *sp = ts_realloc(c->spans, cap * sizeof *sp);
    if (!sp)
        return -ENOMEM;
    c->spans = sp;
    struct http_header *h = ts_realloc(c->hdrs, cap * sizeof *h);
    if (!h)
        return -ENOMEM;
    c->hdrs = h;
    c->spans_cap = cap;
    return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
    struct http_conn *c = p->data;
    if (c->headers_done)
        return 0; /* trailer fields are dropped */
    int rc;
    if (c->last_cb != CB_FIELD) {
        rc = head_end_piece(c);
        if (rc)
            return fail_cb(c, rc, 431);
        if (c->nspans >= c->server->cfg.max_headers)
            return fail_cb(c, TS_TOOBIG, 431);
        if (c->nspans == c->spans_cap && (rc = spans_grow(c)) != 0)
            return fail_cb(c, rc, 431);
        struct field_span *sp = &c->spans[c->nspans++];
        memset(sp, 0, sizeof *sp);
        sp->name_off = (uint32_t)c->head.len;
        c->last_cb = CB_FIELD;
    }
    rc = head_add(c, at, len, true);
    return rc ? fail_cb(c, rc, 431) : 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    struct http_conn *c = p->data;
    if (c->headers_done)
        return 0;
    int rc;
    if (c->last_cb != CB_VALUE) {
        if (c->last_cb != CB_FIELD)
            return fail_cb(c, TS_PARSE, 400);
        rc = head_end_piece(c);
        if (rc)
            return fail_cb(c, rc, 431);
        c->spans[c->nspans - 1].value_off = (uint32_t)c->head.len;
        c->last_cb = CB_VALUE;
    }
    rc = head_add(c, at, len, true);
    return rc ? fail_cb(c, rc, 431) : 0;
}

/* Copies the path and query of the target after the head; sets the request's strings. */
static int split_target(struct http_conn *c, bool is_connect)
{
    const char *url = c->head.data;
    size_t len = c->url_len;
    size_t po = 0, pl = len, qo = 0, ql = 0;
    struct http_parser_url u;
    http_parser_url_init(&u);
    if (len > 0 && http_parser_parse_url(url, len, is_connect, &u) == 0 && !is_connect) {
        if (u.field_set & (1 << UF_PATH)) {
            po = u.field_data[UF_PATH].off;
            pl = u.field_data[UF_PATH].len;
        } else {
            pl = 0;
        }
        if (u.field_set & (1 << UF_QUERY)) {
            qo = u.field_data[UF_QUERY].off;
            ql = u.field_data[UF_QUERY].len;
        }
    }
    int rc = buf_reserve(&c->head, pl + ql + 4);
    if (rc)
        return rc;
    url = c->head.data; /* stable from here on: no more growth */
    size_t path_at = c->head.len;
    if (pl == 0)
        rc = buf_append_char(&c->head, '/');
    else
        rc = buf_append(&c->head, url + po, pl);
    if (!rc)
        rc = head_nul(c);
    size_t query_at = c->head.len;
    if (!rc)
        rc = buf_append(&c->head, url + qo, ql);
    if (!rc)
        rc = head_nul(c);
    if (rc)
        return rc;
    c->req.url = c->head.data;
    c->req.path = c->head.data + path_at;
    c->req.query = c->head.data + query_at;
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    struct http_conn *c = p->data;
    struct http_request *r = &c->req;
    const struct http_server_config *cfg = &c->server->cfg;
    int rc = head_end_piece(c);
    if (rc)
        return fail_cb(c, rc, 431);
    c->headers_done = true;
    if (c->last_cb == CB_FIELD) /* a name without value cannot pass the parser */
        return fail_cb(c, TS_PARSE, 400);
    rc = split_target(c, p->method == HTTP_CONNECT);
    if (rc)
        return fail_cb(c, rc, 431);

    char *base = c->head.data;
    for (uint32_t i = 0; i < c->nspans; i++) {
        const struct field_span *sp = &c->spans[i];
        char *v = base + sp->value_off;
        size_t vl = sp->value_len;
        while (vl > 0 && chars_is_blank(v[vl - 1]))
            v[--vl] = '\0';
        while (vl > 0 && chars_is_blank(*v)) {
            v++;
            vl--;
        }
        c->hdrs[i] = (struct http_header){base + sp->name_off, v, sp->name_len, vl};
    }
    r->headers = c->hdrs;
    r->header_count = c->nspans;
    r->method = http_method_str((enum http_method)p->method);
    r->version_major = p->http_major;
    r->version_minor = p->http_minor;
    r->keep_alive = http_should_keep_alive(p) && !p->upgrade;
    c->upgrade_req = p->upgrade && p->method != HTTP_CONNECT;
    c->head_only = p->method == HTTP_HEAD;

    bool has_length = p->content_length != ULLONG_MAX;
    if (has_length && p->content_length > cfg->max_body_bytes)
        return fail_cb(c, TS_TOOBIG, 413);
    if (has_length && p->content_length > 0) {
        rc = buf_reserve(&c->body, (size_t)p->content_length);
        if (rc)
            return fail_cb(c, rc, 413);
    }
    bool has_body = (p->flags & F_CHUNKED) || (has_length && p->content_length > 0);
    const char *expect = http_request_header(r, "expect");
    if (has_body && expect && p->http_major == 1 && p->http_minor >= 1 &&
        strcasecmp(expect, "100-continue") == 0) {
        rc = out_append_str(c, "HTTP/1.1 100 Continue\r\n\r\n");
        if (rc)
            return fail_cb(c, rc, 500);
        hs_conn_mark_dirty(c);
    }
    if (has_body)
        hs_timer_set(c, T_BODY);
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    struct http_conn *c = p->data;
    int rc = buf_append(&c->body, at, len);
    return rc ? fail_cb(c, rc, 413) : 0;
}

static int on_message_complete(http_parser *p)
{
    struct http_conn *c = p->data;
    c->msg_done = true;
    http_parser_pause(p, 1);
    return 0;
}

/* ------------------------------------------------------- state machine */

static void conn_dispatch(struct http_conn *c)
{
    struct http_server *s = c->server;
    c->msg_done = false;
    c->in_message = false;
    c->req_active = true;
    hs_timer_set(c, T_NONE);
    c->req.body = buf_cstr(&c->body);
    c->req.body_len = c->body.len;
    c->req.conn_index = c->nreq++;
    if (!c->req.keep_alive && !c->upgrade_req) {
        c->input_done = true;
        hs_in_clear(c);
    }
    s->requests++;
    s->on_request(&c->req, s->ctx);
}

/*
 * Runs the parser over data; on a complete request keeps what follows it
 * unparsed and hands the request to the handler. from_in: data is c->in.
 */
void hs_conn_parse(struct http_conn *c, const char *data, size_t len, bool from_in)
{
    size_t n = http_parser_execute(&c->parser, &parser_settings, data, len);
    if (c->msg_done) {
        http_parser_pause(&c->parser, 0);
        if (from_in) {
            in_consume(c, n);
        } else if (n < len && in_append(c, data + n, len - n) != 0) {
            hs_conn_cut(c, false);
            return;
        }
        conn_dispatch(c);
        return;
    }
    enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
    if (from_in)
        in_consume(c, len);
    if (e != HPE_OK) {
        int status = c->error_status;
        if (!status)
            status = e == HPE_HEADER_OVERFLOW ? 431 : 400;
        hs_conn_error(c, status);
    }
}

/* Bytes arrived from the client. */
void hs_conn_on_data(struct http_conn *c, const char *data, size_t len)
{
    if (c->dead || c->input_done)
        return;
    if (c->upgraded) {
        hs_conn_upgraded_input(c); /* what came first goes first */
        if (c->req_active && !c->dead && c->req.on_data_)
            c->req.on_data_(&c->req, data, len);
        return;
    }
    if (c->req_active || c->in_len > 0) {
        if (in_append(c, data, len) != 0) {
            hs_conn_cut(c, true);
            return;
        }
        if (c->in_len >= IN_MAX)
            hs_read_pause(c);
        return;
    }
    hs_conn_parse(c, data, len, false);
}

/* The client closed its side (UV_EOF) or the read failed. */
void hs_conn_on_eof(struct http_conn *c, int err)
{
    if (c->closing)
        return;
    c->peer_eof = true;
    if (c->req_active && !c->lingering && err == UV_EOF && c->server->cfg.eof_keeps_request) {
        /* a half-close mid-request: the handler goes on (a server that does
         * not notice its client left); the connection closes after it */
        c->input_done = true;
        c->resp_close = true;
        c->req.keep_alive = false;
        hs_in_clear(c);
        return;
    }
    if (c->req_active || c->lingering || err != UV_EOF) {
        hs_conn_cut(c, true);
        return;
    }
    if (c->queued > 0 || c->writing) {
        /* Half-closed after a request we already answered: send it, then close. */
        c->input_done = true;
        c->close_after_flush = true;
        hs_in_clear(c);
        hs_conn_mark_dirty(c);
        return;
    }
    hs_conn_cut(c, false);
}

static int queue_simple(struct http_conn *c, int status)
{
    const char *reason = http_status_reason(status);
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nServer: tokenstorm\r\nContent-Type: text/plain\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s\n",
                     status, reason, strlen(reason) + 1, reason);
    if (n < 0 || (size_t)n >= sizeof head)
        return -EINVAL;
    return out_append(c, head, (size_t)n);
}

/* Answers with an error status the server chose itself, then closes. */
void hs_conn_error(struct http_conn *c, int status)
{
    c->input_done = true;
    c->in_message = false;
    hs_in_clear(c);
    hs_timer_set(c, T_NONE);
    if (queue_simple(c, status) != 0) {
        hs_conn_cut(c, false);
        return;
    }
    c->close_after_flush = true;
    hs_conn_mark_dirty(c);
}

/* -------------------------------------------------- finishing requests */

/* The handler is done with the request (response queued or not). */
static void conn_finish(struct http_conn *c)
{
    bool close = c->resp_close || c->server->closing;
    c->req_active = false;
    request_clear(c);
    if (c->closing) {
        if (c->handles == 0) {
            c->free_pending = true;
            hs_conn_mark_dirty(c);
        }
        return;
    }
    if (c->dead)
        return;
    if (close) {
        c->close_after_flush = true;
        c->input_done = true;
        hs_in_clear(c);
    }
    hs_conn_mark_dirty(c);
}

static int check_head_args(int status, const char *ctype, const char *extra)
{
    if (status < 200 || status > 999)
        return -EINVAL;
    if (ctype && strpbrk(ctype, "\r\n"))
        return -EINVAL;
    if (extra && *extra) {
        size_t n = strlen(extra);
        if (n < 2 || extra[n - 2] != '\r' || extra[n - 1] != '\n')
            return -EINVAL;
    }
    return 0;
}

/* Whether extra has a Connection field; *close when its value says close. */
static bool extra_connection(const char *extra, bool *close)
{
    bool has = false;
    *close = false;
    const char *p = extra;
    while (p && *p) {
        const char *eol = strstr(p, "\r\n");
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        if (n >= 11 && strncasecmp(p, "connection:", 11) == 0) {
            has = true;
            for (const char *v = p + 11; v + 5 <= p + n; v++)
                if (strncasecmp(v, "close", 5) == 0)
                    *close = true;
        }
        if (!eol)
            break;
        p = eol + 2;
    }
    return has;
}

static int queue_head(struct http_conn *c, int status, const char *ctype, const char *extra,
                      enum body_mode mode, size_t clen)
{
    bool extra_close;
    bool has_conn = extra_connection(extra, &extra_close);
    c->resp_close = !c->req.keep_alive || c->server->closing || extra_close || mode == BODY_RAW;
    char line[160];
    int n = snprintf(line, sizeof line, "HTTP/1.1 %d %s\r\nServer: tokenstorm\r\n", status,
                     http_status_reason(status));
    if (n < 0 || (size_t)n >= sizeof line)
        return -EINVAL;
    int rc = out_append(c, line, (size_t)n);
    if (!rc && ctype) {
        rc = out_append_str(c, "Content-Type: ");
        if (!rc)
            rc = out_append_str(c, ctype);
        if (!rc)
            rc = out_append(c, "\r\n", 2);
    }
    if (!rc && extra)
        rc = out_append_str(c, extra);
    n = 0;
    if (mode == BODY_LENGTH)
        n = snprintf(line, sizeof line, "Content-Length: %zu\r\n", clen);
    else if (mode == BODY_CHUNKED)
        n = snprintf(line, sizeof line, "Transfer-Encoding: chunked\r\n");
    if (!rc && n > 0)
        rc = out_append(c, line, (size_t)n);
    if (!rc && !has_conn) {
        if (c->resp_close)
            rc = out_append_str(c, "Connection: close\r\n");
        else if (c->req.version_major == 1 && c->req.version_minor == 0)
            rc = out_append_str(c, "Connection: keep-alive\r\n");
    }
    if (!rc)
        rc = out_append(c, "\r\n", 2);
    return rc;
}

int http_respond(struct http_request *req, int status, const char *content_type,
                 const char *extra_headers, const void *body, size_t len)
{
    struct http_conn *c = hs_conn_of_req(req);
    enum body_mode mode = status == 204 || status == 304 ? BODY_NONE : BODY_LENGTH;
    int rc = 0;
    if (!c->req_active)
        return -EINVAL;
    if (c->dead) {
        rc = TS_CLOSED;
        goto out_finish;
    }
    rc = c->begun ? -EINVAL : check_head_args(status, content_type, extra_headers);
    if (rc)
        goto out_cut;
    rc = queue_head(c, status, content_type, extra_headers, mode, len);
    if (!rc && mode == BODY_LENGTH && !c->head_only && len > 0)
        rc = out_append(c, body, len);
    if (rc)
        goto out_cut;
    goto out_finish;
out_cut:
    hs_conn_cut(c, false);
out_finish:
    conn_finish(c);
    return rc;
}

int http_stream_begin(struct http_request *req, int status, const char *content_type,
                      const char *extra_headers)
{
    struct http_conn *c = hs_conn_of_req(req);
    if (!c->req_active || c->begun || status == 204 || status == 304)
        return -EINVAL;
    int rc = check_head_args(status, content_type, extra_headers);
    if (rc)
        return rc;
    if (c->dead)
        return TS_CLOSED;
    bool old = c->req.version_major == 1 && c->req.version_minor == 0;
    enum body_mode mode = old ? BODY_RAW : BODY_CHUNKED;
    c->begun = true;
    c->chunked = mode == BODY_CHUNKED;
    rc = queue_head(c, status, content_type, extra_headers, mode, 0);
    if (rc) {
        hs_conn_cut(c, false);
        return rc;
    }
    hs_conn_mark_dirty(c);
    return 0;
}

int http_stream_begin_length(struct http_request *req, int status, const char *content_type,
                             const char *extra_headers, uint64_t length)
{
    struct http_conn *c = hs_conn_of_req(req);
    if (!c->req_active || c->begun || status == 204 || status == 304 || length > SIZE_MAX / 2)
        return -EINVAL;
    int rc = check_head_args(status, content_type, extra_headers);
    if (rc)
        return rc;
    if (c->dead)
        return TS_CLOSED;
    c->begun = true;
    c->chunked = false;
    c->sized = true;
    c->length_left = c->head_only ? 0 : length;
    rc = queue_head(c, status, content_type, extra_headers, BODY_LENGTH, (size_t)length);
    if (rc) {
        hs_conn_cut(c, false);
        return rc;
    }
    hs_conn_mark_dirty(c);
    return 0;
}

int http_upgrade(struct http_request *req, const char *extra_headers, http_request_data_cb on_data)
{
    struct http_conn *c = hs_conn_of_req(req);
    if (!c->req_active || c->begun || !c->upgrade_req || !on_data ||
        check_head_args(200, NULL, extra_headers))
        return -EINVAL;
    if (c->dead)
        return TS_CLOSED;
    c->begun = true;
    c->upgraded = true;
    c->resp_close = true;
    req->on_data_ = on_data;
    int rc = out_append_str(c, "HTTP/1.1 101 Switching Protocols\r\nServer: tokenstorm\r\n");
    if (!rc && extra_headers)
        rc = out_append_str(c, extra_headers);
    if (!rc)
        rc = out_append(c, "\r\n", 2);
    if (rc) {
        hs_conn_cut(c, false);
        return rc;
    }
    hs_conn_flush_now(c);
    hs_conn_mark_dirty(c); /* also hands over bytes that came with the request */
    return 0;
}

/* Bytes the client sent right behind its upgrade request go to the handler. */
void hs_conn_upgraded_input(struct http_conn *c)
{
    if (!c->upgraded || !c->req_active || !c->in_len || c->dead)
        return;
    size_t n = c->in_len;
    char *copy = ts_malloc(n);
    if (!copy) {
        hs_conn_cut(c, true);
        return;
    }
    memcpy(copy, c->in + c->in_off, n);
    hs_in_clear(c);
    hs_read_resume(c);
    c->req.on_data_(&c->req, copy, n);
    ts_free(copy);
}

int http_stream_abort(struct http_request *req)
{
    struct http_conn *c = hs_conn_of_req(req);
    if (!c->req_active)
        return -EINVAL;
    int rc = c->dead ? TS_CLOSED : 0;
    c->resp_close = true;
    conn_finish(c);
    return rc;
}

int http_stream_writev(struct http_request *req, const uv_buf_t *bufs, size_t n)
{
    struct http_conn *c = hs_conn_of_req(req);
    const struct http_server_config *cfg = &c->server->cfg;
    if (!c->req_active || !c->begun)
        return -EINVAL;
    if (c->dead)
        return TS_CLOSED;
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += bufs[i].len;
    if (c->sized && !c->head_only) {
        if (total > c->length_left)
            return -EINVAL;
        c->length_left -= total;
    }
    if (total > 0 && !c->head_only) {
        if (c->queued > cfg->max_write_queue) {
            hs_conn_cut(c, false);
            return TS_CLOSED;
        }
        int rc = c->chunked ? out_chunk_head(c, total) : 0;
        for (size_t i = 0; i < n && !rc; i++)
            rc = out_append(c, bufs[i].base, bufs[i].len);
        if (!rc && c->chunked)
            rc = out_append(c, "\r\n", 2);
        if (rc) {
            hs_conn_cut(c, false);
            return rc;
        }
        hs_conn_flush_now(c);
        hs_conn_mark_dirty(c);
    }
    if (c->queued > cfg->write_high_water) {
        c->want_drain = true;
        return TS_AGAIN;
    }
    return 0;
}

int http_stream_write(struct http_request *req, const void *data, size_t len)
{
    uv_buf_t b;
    b.base = (char *)data;
    b.len = len;
    return http_stream_writev(req, &b, 1);
}

int http_stream_end(struct http_request *req)
{
    struct http_conn *c = hs_conn_of_req(req);
    int rc = 0;
    if (!c->req_active)
        return -EINVAL;
    if (c->dead) {
        rc = TS_CLOSED;
    } else if (!c->begun) {
        rc = -EINVAL;
        hs_conn_cut(c, false);
    } else if (c->chunked && !c->head_only) {
        rc = out_append(c, "0\r\n\r\n", 5);
        if (rc)
            hs_conn_cut(c, false);
    } else if (c->sized && c->length_left > 0) {
        c->resp_close = true; /* a short body: the close tells the client */
    }
    conn_finish(c);
    return rc;
}

int http_request_reset(struct http_request *req)
{
    struct http_conn *c = hs_conn_of_req(req);
    if (!c->req_active)
        return -EINVAL;
    int rc = c->dead ? TS_CLOSED : 0;
    c->resp_close = true;
    c->reset_after_flush = true;
    conn_finish(c);
    return rc;
}

void http_request_on_drain(struct http_request *req, http_request_event_cb fn)
{
    req->on_drain_ = fn;
}

void http_request_on_abort(struct http_request *req, http_request_event_cb fn)
{
    req->on_abort_ = fn;
}

bool http_request_closed(const struct http_request *req)
{
    return hs_conn_of_req(req)->dead;
}

const char *http_request_header(const struct http_request *req, const char *name)
{
    for (size_t i = 0; i < req->header_count; i++)
        if (strcasecmp(req->headers[i].name, name) == 0)
            return req->headers[i].value;
    return NULL;
}
