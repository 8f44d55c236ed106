/*
 * http_server.c - HTTP/1.1 server on libuv + http-parser.
 *
 * Shape: each connection (struct http_conn) is a small state machine fed by
 * conn_on_data() / conn_on_eof() and drained by conn_flush(). The socket
 * side (read, write, timers, close) is a thin layer around it; a "fake"
 * connection has no socket and no timer and sends its output to a buffer,
 * which lets the fuzz driver and unit tests drive the state machine directly.
 *
 * Everything that must not happen inside a caller's call chain (flushing,
 * resuming pipelined input, firing on_drain, freeing a connection) is done
 * in one uv_idle pass over the server's list of "dirty" connections. The
 * idle handle is active only while that list is not empty, so the loop
 * never spins idle, and writes made during one loop iteration leave in one
 * system call per connection.
 */
#include "http_server.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <http_parser.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/log.h"
#include "net/ptimer.h"

#define READ_BUF_SIZE   (64 * 1024)
#define IN_MAX          (64 * 1024) /* unparsed input held before reading pauses */
#define LINGER_MS       1000
#define OUT_BLOCK_BYTES 4096
#define POOL_MAX        256
#define FLUSH_BUFS      16
#define WRITE_BUFS      4 /* uv_write keeps up to 4 bufs without allocating */
#define HEAD_KEEP       4096
#define BODY_KEEP       4096
#define SPANS_KEEP      32

struct out_block {
    struct out_block *next;
    size_t cap;
    size_t start; /* first byte not yet written */
    size_t len;   /* bytes filled */
    bool pooled;
    char data[];
};

#define OUT_BLOCK_CAP (OUT_BLOCK_BYTES - sizeof(struct out_block))
#define BIG_WRITE     (4 * OUT_BLOCK_CAP)

enum conn_timer {
    T_NONE,
    T_FIRST,  /* new connection: header timeout from accept */
    T_HEAD,   /* later request: header timeout from its first byte */
    T_BODY,   /* body timeout from the end of headers */
    T_IDLE,   /* keep-alive between requests */
    T_LINGER, /* draining input after our FIN */
};

enum last_cb {
    CB_URL,
    CB_FIELD,
    CB_VALUE,
};

enum body_mode {
    BODY_LENGTH,
    BODY_CHUNKED,
    BODY_RAW, /* HTTP/1.0 stream: bytes as they come, then close */
    BODY_NONE,
};

struct hdr_span {
    uint32_t name_off, name_len, value_off, value_len;
};

/* A shaped connection's shaper and its timer (http_request_set_shaper). */
struct conn_shape {
    struct http_conn *conn;
    struct http_shaper sh;
    struct ptimer timer;
    enum http_shape_then then; /* what to do once sent reaches then_at */
    uint64_t then_at;
    uint64_t close_at; /* slow close: when the FIN may go (0: not started) */
};

struct http_conn {
    struct http_server *server;
    struct http_conn *prev, *next; /* all connections of the server */
    struct http_conn *dirty_next;
    struct http_request req;
    http_parser parser;
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wreq;
    uv_shutdown_t sreq;

    /* request being assembled: target, names and values, NUL-separated */
    struct buf head;
    struct buf body;
    struct hdr_span *spans;
    struct http_header *hdrs;
    uint32_t nspans, spans_cap;
    uint32_t url_len;
    size_t head_bytes; /* counted against max_header_bytes */
    enum last_cb last_cb;
    int error_status;

    /* input received but not parsed yet (pipelining) */
    char *in;
    size_t in_off, in_len, in_cap;

    /* output not yet taken by the kernel */
    struct out_block *out_head, *out_tail;
    size_t queued;
    size_t inflight; /* bytes handed to uv_write */

    struct conn_shape *shape; /* NULL: output is not shaped */
    uint64_t out_total;       /* bytes ever queued */
    uint64_t sent_total;      /* bytes ever handed to the kernel */
    uint64_t nreq;            /* requests dispatched */

    struct buf *fake_out; /* fake connection: output goes here (NULL: dropped) */
    size_t fake_chunk;    /* fake connection: most bytes taken per flush (0: all) */

    int handles; /* open libuv handles */
    enum conn_timer tstate;
    bool fake;
    bool dirty;
    bool writing;
    bool read_paused;
    bool in_message;   /* bytes of a request seen, request not complete */
    bool headers_done; /* header callbacks after this are trailers */
    bool msg_done;     /* parser paused on a complete request */
    bool req_active;   /* request is with the handler */
    bool begun;        /* response head queued by http_stream_begin */
    bool chunked;
    bool sized; /* http_stream_begin_length: body bytes left in length_left */
    uint64_t length_left;
    bool head_only; /* HEAD request: no body bytes */
    bool resp_close;
    bool want_drain;
    bool input_done; /* drop any further input */
    bool close_after_flush;
    bool peer_eof;
    bool lingering;
    bool dead;    /* no more output; handles closing or closed */
    bool closing; /* uv_close called */
    bool free_pending;
    bool reset_on_close;    /* close with RST (uv_tcp_close_reset) */
    bool reset_after_flush; /* http_request_reset: RST instead of FIN */
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

static void conn_mark_dirty(struct http_conn *c);
static void conn_read_start(struct http_conn *c);
static void conn_cut(struct http_conn *c, bool notify);
static void conn_close_handles(struct http_conn *c);
static void conn_error(struct http_conn *c, int status);
static void server_maybe_finish(struct http_server *s);
static void server_idle_cb(uv_idle_t *h);

static struct http_conn *conn_of_req(const struct http_request *req)
{
    return (struct http_conn *)((char *)req - offsetof(struct http_conn, req));
}

const char *http_status_reason(int status)
{
    if (status < 100 || status > 599)
        return "Unknown";
    const char *r = http_status_str((enum http_status)status);
    return strcmp(r, "<unknown>") == 0 ? "Unknown" : r;
}

/* ---------------------------------------------------------------- output */

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
static unsigned out_gather(struct http_conn *c, uv_buf_t *bufs, unsigned max, size_t *total)
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
static void out_consume(struct http_conn *c, size_t k)
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

/* ----------------------------------------------------------------- input */

static void in_clear(struct http_conn *c)
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

static void conn_read_resume(struct http_conn *c)
{
    if (!c->read_paused || c->closing || c->in_len >= IN_MAX)
        return;
    c->read_paused = false;
    if (!c->fake)
        conn_read_start(c);
}

static void in_consume(struct http_conn *c, size_t n)
{
    if (n >= c->in_len) {
        in_clear(c);
    } else {
        c->in_off += n;
        c->in_len -= n;
    }
    conn_read_resume(c);
}

/* ---------------------------------------------------------------- timers */

static void conn_timer_cb(uv_timer_t *t);

static void timer_set(struct http_conn *c, enum conn_timer st)
{
    const struct http_server_config *cfg = &c->server->cfg;
    c->tstate = st;
    if (c->fake || c->closing)
        return;
    uint64_t ms;
    switch (st) {
    case T_FIRST:
    case T_HEAD:
        ms = cfg->header_timeout_ms;
        break;
    case T_BODY:
        ms = cfg->body_timeout_ms;
        break;
    case T_IDLE:
        ms = cfg->idle_timeout_ms;
        break;
    case T_LINGER:
        ms = LINGER_MS;
        break;
    default:
        uv_timer_stop(&c->timer);
        return;
    }
    if (uv_timer_start(&c->timer, conn_timer_cb, ms, 0) != 0)
        conn_cut(c, true);
}

static void conn_timer_cb(uv_timer_t *t)
{
    struct http_conn *c = t->data;
    enum conn_timer st = c->tstate;
    c->tstate = T_NONE;
    if ((st == T_FIRST || st == T_HEAD || st == T_BODY) && c->in_message) {
        conn_error(c, 408);
        return;
    }
    conn_cut(c, true);
}

/* -------------------------------------------------------- request state */

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

    c->begun = false;
    c->chunked = false;
    c->sized = false;
    c->length_left = 0;
    c->head_only = false;
    c->resp_close = false;
    c->want_drain = false;
}

static struct http_conn *conn_new(struct http_server *s)
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

static void conn_free(struct http_conn *c)
{
    struct http_server *s = c->server;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->conn_count--;
    out_release(c);
    in_clear(c);
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
    server_maybe_finish(s);
}

/* ------------------------------------------------------ parser callbacks */

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
        timer_set(c, T_HEAD);
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
        struct hdr_span *sp = &c->spans[c->nspans - 1];
        sp->name_len = (uint32_t)c->head.len - sp->name_off;
    } else {
        struct hdr_span *sp = &c->spans[c->nspans - 1];
        sp->value_len = (uint32_t)c->head.len - sp->value_off;
    }
    return head_nul(c);
}

static int spans_grow(struct http_conn *c)
{
    uint32_t cap = c->spans_cap ? c->spans_cap * 2 : 16;
    if (cap > c->server->cfg.max_headers)
        cap = (uint32_t)c->server->cfg.max_headers;
    struct hdr_span *sp = ts_realloc(c->spans, cap * sizeof *sp);
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
        struct hdr_span *sp = &c->spans[c->nspans++];
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

static bool is_blank(char ch)
{
    return ch == ' ' || ch == '\t';
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
        const struct hdr_span *sp = &c->spans[i];
        char *v = base + sp->value_off;
        size_t vl = sp->value_len;
        while (vl > 0 && is_blank(v[vl - 1]))
            v[--vl] = '\0';
        while (vl > 0 && is_blank(*v)) {
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
        conn_mark_dirty(c);
    }
    if (has_body)
        timer_set(c, T_BODY);
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
    timer_set(c, T_NONE);
    c->req.body = buf_cstr(&c->body);
    c->req.body_len = c->body.len;
    c->req.conn_index = c->nreq++;
    if (!c->req.keep_alive) {
        c->input_done = true;
        in_clear(c);
    }
    s->requests++;
    s->on_request(&c->req, s->ctx);
}

/*
 * Runs the parser over data; on a complete request keeps what follows it
 * unparsed and hands the request to the handler. from_in: data is c->in.
 */
static void conn_parse(struct http_conn *c, const char *data, size_t len, bool from_in)
{
    size_t n = http_parser_execute(&c->parser, &parser_settings, data, len);
    if (c->msg_done) {
        http_parser_pause(&c->parser, 0);
        if (from_in) {
            in_consume(c, n);
        } else if (n < len && in_append(c, data + n, len - n) != 0) {
            conn_cut(c, false);
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
        conn_error(c, status);
    }
}

/* Bytes arrived from the client. */
static void conn_on_data(struct http_conn *c, const char *data, size_t len)
{
    if (c->dead || c->input_done)
        return;
    if (c->req_active || c->in_len > 0) {
        if (in_append(c, data, len) != 0) {
            conn_cut(c, true);
            return;
        }
        if (c->in_len >= IN_MAX && !c->fake && !c->read_paused) {
            c->read_paused = true;
            uv_read_stop((uv_stream_t *)&c->tcp);
        }
        return;
    }
    conn_parse(c, data, len, false);
}

/* The client closed its side (UV_EOF) or the read failed. */
static void conn_on_eof(struct http_conn *c, int err)
{
    if (c->closing)
        return;
    c->peer_eof = true;
    if (c->req_active || c->lingering || err != UV_EOF) {
        conn_cut(c, true);
        return;
    }
    if (c->queued > 0 || c->writing) {
        /* Half-closed after a request we already answered: send it, then close. */
        c->input_done = true;
        c->close_after_flush = true;
        in_clear(c);
        conn_mark_dirty(c);
        return;
    }
    conn_cut(c, false);
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
static void conn_error(struct http_conn *c, int status)
{
    c->input_done = true;
    c->in_message = false;
    in_clear(c);
    timer_set(c, T_NONE);
    if (queue_simple(c, status) != 0) {
        conn_cut(c, false);
        return;
    }
    c->close_after_flush = true;
    conn_mark_dirty(c);
}

static void conn_close_cb(uv_handle_t *h)
{
    struct http_conn *c = h->data;
    if (--c->handles == 0 && !c->req_active) {
        c->free_pending = true;
        conn_mark_dirty(c);
    }
}

static void shape_timer_closed(struct ptimer *t)
{
    struct conn_shape *sp = t->data;
    struct http_conn *c = sp->conn;
    if (--c->handles == 0 && !c->req_active) {
        c->free_pending = true;
        conn_mark_dirty(c);
    }
}

static void conn_close_handles(struct http_conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    c->dead = true;
    c->input_done = true;
    if (c->shape)
        ptimer_close(&c->shape->timer, shape_timer_closed);
    if (c->fake) {
        if (!c->req_active && c->handles == 0) {
            c->free_pending = true;
            conn_mark_dirty(c);
        }
        return;
    }
    if (!c->reset_on_close || uv_tcp_close_reset(&c->tcp, conn_close_cb) != 0)
        uv_close((uv_handle_t *)&c->tcp, conn_close_cb);
    uv_close((uv_handle_t *)&c->timer, conn_close_cb);
}

/* Drops the connection now; notify: tell a handler that holds a request. */
static void conn_cut(struct http_conn *c, bool notify)
{
    if (c->dead) {
        conn_close_handles(c);
        return;
    }
    c->dead = true;
    c->input_done = true;
    if (notify && c->req_active && c->req.on_abort_) {
        http_request_event_cb fn = c->req.on_abort_;
        c->req.on_abort_ = NULL;
        fn(&c->req);
    }
    conn_close_handles(c);
}

static void conn_shutdown_cb(uv_shutdown_t *req, int status)
{
    struct http_conn *c = req->data;
    if (!c->closing && status < 0)
        conn_close_handles(c);
}

/* Output is all sent and the connection is to close: FIN, then drain input. */
static void conn_end(struct http_conn *c)
{
    if (c->lingering)
        return;
    c->lingering = true;
    if (c->reset_after_flush) {
        c->reset_on_close = true;
        conn_close_handles(c);
        return;
    }
    if (c->fake || c->peer_eof) {
        conn_close_handles(c);
        return;
    }
    if (uv_shutdown(&c->sreq, (uv_stream_t *)&c->tcp, conn_shutdown_cb) != 0) {
        conn_close_handles(c);
        return;
    }
    if (c->read_paused) {
        c->read_paused = false;
        conn_read_start(c);
    }
    timer_set(c, T_LINGER);
}

static void conn_write_cb(uv_write_t *w, int status)
{
    struct http_conn *c = w->data;
    c->writing = false;
    if (c->closing)
        return;
    if (status < 0) {
        conn_cut(c, true);
        return;
    }
    out_consume(c, c->inflight);
    c->inflight = 0;
    if (c->tstate == T_IDLE)
        timer_set(c, T_IDLE); /* progress: the idle clock starts again */
    conn_mark_dirty(c);
}

static void fake_sink(struct http_conn *c, const uv_buf_t *bufs, unsigned n, size_t total)
{
    if (!c->fake_out)
        return;
    for (unsigned i = 0; i < n && total > 0; i++) {
        size_t k = bufs[i].len < total ? bufs[i].len : total;
        if (buf_append(c->fake_out, bufs[i].base, k) != 0)
            return;
        total -= k;
    }
}

/* Cuts bufs to at most limit bytes in total; returns the new count. */
static unsigned bufs_clamp(uv_buf_t *bufs, unsigned n, size_t *total, uint64_t limit)
{
    if (*total <= limit)
        return n;
    size_t left = (size_t)limit;
    unsigned i = 0;
    for (; i < n && left > 0; i++) {
        if (bufs[i].len > left)
            bufs[i].len = left;
        left -= bufs[i].len;
    }
    *total = (size_t)limit;
    return i;
}

static void shape_timer_cb(struct ptimer *t)
{
    struct conn_shape *sp = t->data;
    conn_mark_dirty(sp->conn);
}

static void shape_wake(struct http_conn *c, uint64_t at)
{
    if (ptimer_start_at(&c->shape->timer, at, shape_timer_cb) != 0)
        conn_cut(c, true);
}

/* How many bytes the shaper lets go now (all when there is none). */
static uint64_t shape_allow(struct http_conn *c)
{
    struct conn_shape *sp = c->shape;
    if (!sp || !sp->sh.allow)
        return UINT64_MAX;
    if (sp->then != HTTP_SHAPE_MORE || c->writing)
        return sp->then != HTTP_SHAPE_MORE && sp->then_at > c->sent_total
                   ? sp->then_at - c->sent_total
                   : 0;
    uint64_t wake = 0;
    enum http_shape_then then = HTTP_SHAPE_MORE;
    uint64_t n = sp->sh.allow(sp->sh.ctx, c->out_total, c->sent_total, ts_now_ns(), &wake, &then);
    if (n > c->out_total - c->sent_total)
        n = c->out_total - c->sent_total;
    if (then != HTTP_SHAPE_MORE) {
        sp->then = then;
        sp->then_at = c->sent_total + n;
    } else if (wake) {
        shape_wake(c, wake);
    }
    return n;
}

/* The shaper asked to end the connection and its bytes are out: do it. */
static bool shape_ended(struct http_conn *c)
{
    struct conn_shape *sp = c->shape;
    if (!sp || sp->then == HTTP_SHAPE_MORE || c->writing || c->sent_total < sp->then_at)
        return false;
    c->reset_on_close = sp->then == HTTP_SHAPE_RESET;
    conn_cut(c, true);
    return true;
}

/* Slow close: whether the FIN must wait still (the timer is armed). */
static bool shape_close_wait(struct http_conn *c)
{
    struct conn_shape *sp = c->shape;
    if (!sp || !sp->sh.close_delay_ns || c->reset_after_flush)
        return false;
    uint64_t now = ts_now_ns();
    if (!sp->close_at)
        sp->close_at = now + sp->sh.close_delay_ns;
    if (now >= sp->close_at)
        return false;
    shape_wake(c, sp->close_at);
    return true;
}

/* Hands queued output to the kernel: try_write, then uv_write for the rest. */
static void conn_flush(struct http_conn *c)
{
    uv_buf_t bufs[FLUSH_BUFS];
    uint64_t limit = shape_allow(c);
    while (c->queued > 0 && !c->writing && limit > 0) {
        size_t total;
        unsigned n = out_gather(c, bufs, FLUSH_BUFS, &total);
        n = bufs_clamp(bufs, n, &total, limit);
        limit -= total;
        if (c->fake) {
            size_t k = c->fake_chunk && c->fake_chunk < total ? c->fake_chunk : total;
            fake_sink(c, bufs, n, k);
            out_consume(c, k);
            if (k < total) {
                conn_mark_dirty(c); /* as a write completing next iteration */
                return;
            }
            continue;
        }
        int r = uv_try_write((uv_stream_t *)&c->tcp, bufs, n);
        if (r == UV_EAGAIN)
            r = 0;
        if (r < 0) {
            conn_cut(c, true);
            return;
        }
        out_consume(c, (size_t)r);
        if ((size_t)r < total) {
            limit += total - (size_t)r;
            n = out_gather(c, bufs, WRITE_BUFS, &total);
            n = bufs_clamp(bufs, n, &total, limit);
            if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, bufs, n, conn_write_cb) != 0) {
                conn_cut(c, true);
                return;
            }
            c->writing = true;
            c->inflight = total;
            return;
        }
    }
}

/*
 * Hands queued bytes to the kernel at once when nothing is in the way (no
 * write in progress, no shaper): a token reaches the client when it is
 * produced, not at the end of the loop pass, and the writer's timestamp is
 * the send time. Errors and leftovers are left to the idle pass, so no
 * callback runs inside the caller's write.
 */
static void conn_flush_now(struct http_conn *c)
{
    if (c->writing || c->fake || c->shape || c->dead || c->queued == 0)
        return;
    uv_buf_t bufs[FLUSH_BUFS];
    size_t total;
    unsigned n = out_gather(c, bufs, FLUSH_BUFS, &total);
    int r = uv_try_write((uv_stream_t *)&c->tcp, bufs, n);
    if (r > 0)
        out_consume(c, (size_t)r);
}

/* One idle-pass step for a dirty connection. */
static void conn_process(struct http_conn *c)
{
    const struct http_server_config *cfg = &c->server->cfg;
    if (c->free_pending) {
        conn_free(c);
        return;
    }
    if (c->closing)
        return;
    conn_flush(c);
    if (c->closing || shape_ended(c))
        return;
    if (c->want_drain && c->req_active && c->queued <= cfg->write_high_water / 2) {
        c->want_drain = false;
        if (c->req.on_drain_)
            c->req.on_drain_(&c->req);
        if (c->closing)
            return;
    }
    if (!c->req_active && c->in_len > 0 && !c->input_done && c->queued <= cfg->write_high_water) {
        conn_parse(c, c->in + c->in_off, c->in_len, true);
        if (c->closing)
            return;
    }
    if (c->req_active || c->in_message)
        return;
    if (c->close_after_flush && !c->writing && c->queued == 0) {
        if (!shape_close_wait(c))
            conn_end(c);
    } else if (c->tstate == T_NONE && !c->lingering)
        timer_set(c, T_IDLE);
}

static void conn_mark_dirty(struct http_conn *c)
{
    struct http_server *s = c->server;
    if (c->dirty)
        return;
    c->dirty = true;
    /* first marked, first served: streams queued first are flushed first */
    c->dirty_next = NULL;
    if (s->dirty_tail)
        s->dirty_tail->dirty_next = c;
    else
        s->dirty = c;
    s->dirty_tail = c;
    if (!s->finishing && uv_idle_start(&s->idle, server_idle_cb) != 0)
        ts_error("http_server: cannot start idle handle");
}

static void server_idle_cb(uv_idle_t *h)
{
    struct http_server *s = h->data;
    struct http_conn *list = s->dirty;
    s->dirty = NULL;
    s->dirty_tail = NULL;
    while (list) {
        struct http_conn *c = list;
        list = c->dirty_next;
        c->dirty_next = NULL;
        c->dirty = false;
        conn_process(c);
    }
    if (!s->dirty && !s->finishing)
        uv_idle_stop(&s->idle);
}

/* ------------------------------------------------------- finishing requests */

/* The handler is done with the request (response queued or not). */
static void conn_finish(struct http_conn *c)
{
    bool close = c->resp_close || c->server->closing;
    c->req_active = false;
    request_clear(c);
    if (c->closing) {
        if (c->handles == 0) {
            c->free_pending = true;
            conn_mark_dirty(c);
        }
        return;
    }
    if (c->dead)
        return;
    if (close) {
        c->close_after_flush = true;
        c->input_done = true;
        in_clear(c);
    }
    conn_mark_dirty(c);
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
    struct http_conn *c = conn_of_req(req);
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
    conn_cut(c, false);
out_finish:
    conn_finish(c);
    return rc;
}

int http_stream_begin(struct http_request *req, int status, const char *content_type,
                      const char *extra_headers)
{
    struct http_conn *c = conn_of_req(req);
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
        conn_cut(c, false);
        return rc;
    }
    conn_mark_dirty(c);
    return 0;
}

int http_stream_begin_length(struct http_request *req, int status, const char *content_type,
                             const char *extra_headers, uint64_t length)
{
    struct http_conn *c = conn_of_req(req);
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
        conn_cut(c, false);
        return rc;
    }
    conn_mark_dirty(c);
    return 0;
}

int http_stream_abort(struct http_request *req)
{
    struct http_conn *c = conn_of_req(req);
    if (!c->req_active)
        return -EINVAL;
    int rc = c->dead ? TS_CLOSED : 0;
    c->resp_close = true;
    conn_finish(c);
    return rc;
}

int http_stream_writev(struct http_request *req, const uv_buf_t *bufs, size_t n)
{
    struct http_conn *c = conn_of_req(req);
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
            conn_cut(c, false);
            return TS_CLOSED;
        }
        int rc = c->chunked ? out_chunk_head(c, total) : 0;
        for (size_t i = 0; i < n && !rc; i++)
            rc = out_append(c, bufs[i].base, bufs[i].len);
        if (!rc && c->chunked)
            rc = out_append(c, "\r\n", 2);
        if (rc) {
            conn_cut(c, false);
            return rc;
        }
        conn_flush_now(c);
        conn_mark_dirty(c);
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
    struct http_conn *c = conn_of_req(req);
    int rc = 0;
    if (!c->req_active)
        return -EINVAL;
    if (c->dead) {
        rc = TS_CLOSED;
    } else if (!c->begun) {
        rc = -EINVAL;
        conn_cut(c, false);
    } else if (c->chunked && !c->head_only) {
        rc = out_append(c, "0\r\n\r\n", 5);
        if (rc)
            conn_cut(c, false);
    } else if (c->sized && c->length_left > 0) {
        c->resp_close = true; /* a short body: the close tells the client */
    }
    conn_finish(c);
    return rc;
}

int http_request_reset(struct http_request *req)
{
    struct http_conn *c = conn_of_req(req);
    if (!c->req_active)
        return -EINVAL;
    int rc = c->dead ? TS_CLOSED : 0;
    c->resp_close = true;
    c->reset_after_flush = true;
    conn_finish(c);
    return rc;
}

void *http_request_shaper_ctx(const struct http_request *req)
{
    const struct http_conn *c = conn_of_req(req);
    return c->shape ? c->shape->sh.ctx : NULL;
}

int http_request_set_shaper(struct http_request *req, const struct http_shaper *sh)
{
    struct http_conn *c = conn_of_req(req);
    if (!c->req_active || c->shape)
        return -EINVAL;
    if (c->dead)
        return TS_CLOSED;
    struct conn_shape *sp = ts_calloc(1, sizeof *sp);
    if (!sp)
        return -ENOMEM;
    int rc = ptimer_init(c->server->loop, &sp->timer);
    if (rc) {
        ts_free(sp);
        return rc;
    }
    sp->timer.data = sp;
    sp->conn = c;
    sp->sh = *sh;
    c->shape = sp;
    c->handles++;
    conn_mark_dirty(c);
    return 0;
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
    return conn_of_req(req)->dead;
}

const char *http_request_header(const struct http_request *req, const char *name)
{
    for (size_t i = 0; i < req->header_count; i++)
        if (strcasecmp(req->headers[i].name, name) == 0)
            return req->headers[i].value;
    return NULL;
}

/* ------------------------------------------------------------- sockets */

static void conn_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    struct http_conn *c = h->data;
    *b = uv_buf_init(c->server->rbuf, READ_BUF_SIZE);
}

static void conn_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *b)
{
    struct http_conn *c = st->data;
    if (nread > 0)
        conn_on_data(c, b->base, (size_t)nread);
    else if (nread < 0)
        conn_on_eof(c, (int)nread);
}

static void conn_read_start(struct http_conn *c)
{
    if (uv_read_start((uv_stream_t *)&c->tcp, conn_alloc_cb, conn_read_cb) != 0)
        conn_cut(c, true);
}

static void server_on_connection(uv_stream_t *ls, int status)
{
    struct http_server *s = ls->data;
    if (status < 0) {
        ts_warn("http_server: accept: %s", uv_strerror(status));
        return;
    }
    struct http_conn *c = conn_new(s);
    if (!c) {
        /* The pending socket stays in libuv; accepting resumes with the next conn. */
        ts_error("http_server: out of memory for a connection");
        return;
    }
    if (uv_tcp_init(s->loop, &c->tcp) != 0 || uv_timer_init(s->loop, &c->timer) != 0) {
        /* cannot happen with libuv 1.x: neither creates a socket */
        ts_error("http_server: handle init failed");
        c->fake = true;
        conn_close_handles(c);
        return;
    }
    c->handles = 2;
    if (uv_accept(ls, (uv_stream_t *)&c->tcp) != 0) {
        conn_close_handles(c);
        return;
    }
    s->conns_accepted++;
    if (s->conn_count > s->cfg.max_connections || s->closing) {
        s->conns_rejected++;
        conn_close_handles(c);
        return;
    }
    int len = (int)sizeof c->req.remote;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&c->req.remote, &len) != 0 ||
        uv_tcp_nodelay(&c->tcp, 1) != 0) {
        conn_close_handles(c);
        return;
    }
    timer_set(c, T_FIRST);
    if (!c->closing)
        conn_read_start(c);
}

/* ------------------------------------------------------------- server */

static void config_fill(struct http_server_config *c)
{
    if (!c->host)
        c->host = "127.0.0.1";
    if (!c->backlog)
        c->backlog = 511;
    if (!c->max_connections)
        c->max_connections = 65536;
    if (!c->max_header_bytes)
        c->max_header_bytes = 16 * 1024;
    if (!c->max_headers)
        c->max_headers = 100;
    if (c->max_headers > 100000)
        c->max_headers = 100000;
    if (!c->max_body_bytes)
        c->max_body_bytes = 16 * 1024 * 1024;
    if (!c->header_timeout_ms)
        c->header_timeout_ms = 10000;
    if (!c->idle_timeout_ms)
        c->idle_timeout_ms = 60000;
    if (!c->body_timeout_ms)
        c->body_timeout_ms = 60000;
    if (!c->write_high_water)
        c->write_high_water = 256 * 1024;
    if (!c->max_write_queue)
        c->max_write_queue = 64 * c->write_high_water;
}

int http_server_init(struct http_server *s, uv_loop_t *loop, const struct http_server_config *cfg,
                     http_request_cb on_request, void *ctx)
{
    if (!s || !loop || !on_request)
        return -EINVAL;
    memset(s, 0, sizeof *s);
    if (cfg)
        s->cfg = *cfg;
    config_fill(&s->cfg);
    if (s->cfg.port < 0 || s->cfg.port > 65535 || s->cfg.max_header_bytes > UINT32_MAX / 4 ||
        strlen(s->cfg.host) >= sizeof s->host)
        return -EINVAL;
    strcpy(s->host, s->cfg.host);
    s->cfg.host = s->host;
    int rc;
    if (strchr(s->cfg.host, ':'))
        rc = uv_ip6_addr(s->cfg.host, s->cfg.port, (struct sockaddr_in6 *)&s->addr);
    else
        rc = uv_ip4_addr(s->cfg.host, s->cfg.port, (struct sockaddr_in *)&s->addr);
    if (rc)
        return -EINVAL;
    s->rbuf = ts_malloc(READ_BUF_SIZE);
    if (!s->rbuf)
        return -ENOMEM;
    s->loop = loop;
    s->on_request = on_request;
    s->ctx = ctx;
    /* None of these can fail in libuv 1.x (no socket is created yet). */
    rc = uv_tcp_init(loop, &s->tcp);
    if (rc) {
        ts_free(s->rbuf);
        return rc;
    }
    if (uv_idle_init(loop, &s->idle) != 0 || uv_timer_init(loop, &s->grace) != 0)
        ts_error("http_server: handle init failed"); /* unreachable in libuv 1.x */
    s->tcp.data = s;
    s->idle.data = s;
    s->grace.data = s;
    s->handles_open = 3;
    return 0;
}

/* The listening socket made here (libuv 1.44 has no UV_TCP_REUSEPORT) with
 * SO_REUSEPORT set before uv_tcp_bind binds it. */
static int open_reuse_port(struct http_server *s)
{
    int fd = socket(s->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int on = 1;
    int rc = 0;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0)
        rc = -errno;
    else
        rc = uv_tcp_open(&s->tcp, fd);
    if (rc)
        close(fd);
    return rc;
}

int http_server_listen(struct http_server *s)
{
    if (s->closing || s->listening)
        return -EINVAL;
    int rc;
    if (s->cfg.reuse_port && (rc = open_reuse_port(s)) != 0)
        return rc;
    rc = uv_tcp_bind(&s->tcp, (const struct sockaddr *)&s->addr, 0);
    if (rc)
        return rc;
    rc = uv_listen((uv_stream_t *)&s->tcp, s->cfg.backlog, server_on_connection);
    if (rc)
        return rc;
    struct sockaddr_storage ss;
    int len = (int)sizeof ss;
    rc = uv_tcp_getsockname(&s->tcp, (struct sockaddr *)&ss, &len);
    if (rc)
        return rc;
    if (ss.ss_family == AF_INET6)
        s->port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    else
        s->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    s->listening = true;
    return 0;
}

int http_server_port(const struct http_server *s)
{
    return s->listening ? s->port : 0;
}

static void server_close_cb(uv_handle_t *h)
{
    struct http_server *s = h->data;
    if (--s->handles_open > 0)
        return;
    while (s->pool) {
        struct out_block *b = s->pool;
        s->pool = b->next;
        ts_free(b);
    }
    s->pool_count = 0;
    ts_free(s->rbuf);
    s->rbuf = NULL;
    if (s->on_closed)
        s->on_closed(s);
}

static void server_listener_close_cb(uv_handle_t *h)
{
    struct http_server *s = h->data;
    s->listening = false;
    s->tcp_closed = true;
    server_close_cb(h);
    server_maybe_finish(s);
}

static void server_maybe_finish(struct http_server *s)
{
    if (!s->closing || s->finishing || s->conn_count > 0 || !s->tcp_closed)
        return;
    s->finishing = true;
    uv_close((uv_handle_t *)&s->idle, server_close_cb);
    uv_close((uv_handle_t *)&s->grace, server_close_cb);
}

static void server_grace_cb(uv_timer_t *t)
{
    struct http_server *s = t->data;
    for (struct http_conn *c = s->conns; c; c = c->next)
        if (!c->closing)
            conn_cut(c, true);
}

int http_server_shutdown(struct http_server *s, uint64_t grace_ms, http_server_closed_cb on_closed)
{
    if (s->closing)
        return -EINVAL;
    s->closing = true;
    s->on_closed = on_closed;
    uv_close((uv_handle_t *)&s->tcp, server_listener_close_cb);
    for (struct http_conn *c = s->conns; c; c = c->next) {
        if (c->closing)
            continue;
        c->input_done = true;
        in_clear(c);
        if (c->req_active)
            continue;
        if (c->queued > 0 || c->writing || c->lingering) {
            c->close_after_flush = true;
            conn_mark_dirty(c);
            continue;
        }
        conn_cut(c, false);
    }
    if (uv_timer_start(&s->grace, server_grace_cb, grace_ms, 0) != 0)
        ts_error("http_server: cannot start the grace timer");
    return 0;
}
