#include "sse.h"

#include <string.h>

#define SSE_DEFAULT_MAX (1u << 20)

static const unsigned char sse_bom[3] = {0xEF, 0xBB, 0xBF};

void sse_parser_init(struct sse_parser *p, size_t max_event_bytes,
                     int (*on_event)(void *ctx, const struct sse_event *ev), void *ctx)
{
    size_t max = max_event_bytes ? max_event_bytes : SSE_DEFAULT_MAX;
    p->on_event = on_event;
    p->on_comment = NULL;
    p->ctx = ctx;
    p->max_event_bytes = max;
    buf_init(&p->line, max);
    buf_init(&p->data, max);
    buf_init(&p->type, max);
    buf_init(&p->id, max);
    buf_init(&p->last_id, max);
    p->retry_ms = -1;
    p->block_retry = -1;
    p->bom_seen = 0;
    p->bom_done = false;
    p->skip_lf = false;
    p->id_dirty = false;
    p->err = 0;
    p->pend = NULL;
    p->pend_len = 0;
}

void sse_parser_set_comment_cb(struct sse_parser *p, int (*on_comment)(void *ctx, const char *text,
                                                                       size_t len, uint64_t now_ns))
{
    p->on_comment = on_comment;
}

void sse_parser_release(struct sse_parser *p)
{
    buf_release(&p->line);
    buf_release(&p->data);
    buf_release(&p->type);
    buf_release(&p->id);
    buf_release(&p->last_id);
}

/* True if a line of len bytes still fits in the current event. */
static bool fits(const struct sse_parser *p, size_t len)
{
    size_t used = p->data.len + p->pend_len + (p->pend ? 1 : 0) + p->type.len;
    return used <= p->max_event_bytes && len <= p->max_event_bytes - used;
}

/* Appends "value\n" to the data buffer. */
static int data_append(struct sse_parser *p, const char *v, size_t vlen)
{
    int rc = buf_reserve(&p->data, vlen + 1);
    if (rc)
        return rc;
    memcpy(p->data.data + p->data.len, v, vlen);
    p->data.len += vlen;
    p->data.data[p->data.len++] = '\n';
    p->data.data[p->data.len] = '\0';
    return 0;
}

/* Copies the data line left in the caller's bytes (sse_parser_feed_inplace)
 * into the data buffer, where the next line or feed can add to it. */
static int unpend(struct sse_parser *p)
{
    if (!p->pend)
        return 0;
    const char *v = p->pend;
    p->pend = NULL;
    int rc = data_append(p, v, p->pend_len);
    p->pend_len = 0;
    return rc;
}

/* Spec "dispatch the event", at a blank line. */
static int dispatch(struct sse_parser *p, uint64_t now_ns)
{
    int rc = 0;
    if (p->id_dirty) {
        buf_reset(&p->last_id);
        rc = buf_append(&p->last_id, p->id.data ? p->id.data : "", p->id.len);
        if (rc)
            return rc;
        p->id_dirty = false;
    }
    int64_t block_retry = p->block_retry;
    p->block_retry = -1;
    const char *data;
    size_t data_len;
    if (p->pend) {
        /* one data line, still in the caller's bytes: its terminator,
         * already read past, becomes the NUL */
        p->pend[p->pend_len] = '\0';
        data = p->pend;
        data_len = p->pend_len;
        p->pend = NULL;
        p->pend_len = 0;
    } else if (p->data.len == 0) {
        buf_reset(&p->type);
        return 0;
    } else {
        /* every data field appended "value\n": drop the last LF */
        p->data.len--;
        p->data.data[p->data.len] = '\0';
        data = p->data.data;
        data_len = p->data.len;
    }
    struct sse_event ev = {
        .type = p->type.len ? p->type.data : "message",
        .type_len = p->type.len ? p->type.len : 7,
        .data = data,
        .data_len = data_len,
        .id = buf_cstr(&p->last_id),
        .id_len = p->last_id.len,
        .retry_ms = block_retry,
        .arrival_ns = now_ns,
    };
    rc = p->on_event(p->ctx, &ev);
    buf_reset(&p->data);
    buf_reset(&p->type);
    return rc < 0 ? rc : 0;
}

static void set_retry(struct sse_parser *p, const char *v, size_t n)
{
    if (n == 0)
        return;
    int64_t ms = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return;
        int d = v[i] - '0';
        ms = ms > (INT64_MAX - d) / 10 ? INT64_MAX : ms * 10 + d;
    }
    p->retry_ms = ms;
    p->block_retry = ms;
}

/* Spec "process the field" for one complete, non-blank line. mut: the
 * same line in the caller's writable bytes (sse_parser_feed_inplace), its
 * terminator after it, or NULL. */
static int process_line(struct sse_parser *p, const char *line, size_t len, char *mut,
                        uint64_t now_ns)
{
    if (len == 0)
        return dispatch(p, now_ns);
    if (line[0] == ':') {
        if (!p->on_comment)
            return 0;
        int rc = p->on_comment(p->ctx, line + 1, len - 1, now_ns);
        return rc < 0 ? rc : 0;
    }
    const char *colon = memchr(line, ':', len);
    size_t nlen = colon ? (size_t)(colon - line) : len;
    const char *v = colon ? colon + 1 : line + len;
    size_t vlen = (size_t)(line + len - v);
    if (vlen && v[0] == ' ') {
        v++;
        vlen--;
    }
    switch (nlen) {
    case 4:
        if (memcmp(line, "data", 4) == 0) {
            if (mut && p->data.len == 0 && !p->pend) {
                /* the event's first data line: left where it is (most
                 * events have one, and their blank line in the same read) */
                p->pend = mut + (v - line);
                p->pend_len = vlen;
                return 0;
            }
            int rc = unpend(p);
            return rc ? rc : data_append(p, v, vlen);
        }
        return 0;
    case 5:
        if (memcmp(line, "event", 5) == 0) {
            buf_reset(&p->type);
            return buf_append(&p->type, v, vlen);
        }
        if (memcmp(line, "retry", 5) == 0)
            set_retry(p, v, vlen);
        return 0;
    case 2:
        if (memcmp(line, "id", 2) == 0 && !memchr(v, '\0', vlen)) {
            buf_reset(&p->id);
            p->id_dirty = true;
            return buf_append(&p->id, v, vlen);
        }
        return 0;
    default:
        return 0;
    }
}

/* Adds bytes of a line that is not terminated yet to the line buffer. */
static int hold_partial(struct sse_parser *p, const char *s, size_t n)
{
    if (!fits(p, p->line.len) || !fits(p, p->line.len + n))
        return TS_TOOBIG;
    return buf_append(&p->line, s, n);
}

/* Consumes the possible BOM at the start of the stream; returns the number
 * of bytes of s used, or a negative error. */
static int eat_bom(struct sse_parser *p, const char *s, size_t n)
{
    size_t i = 0;
    while (!p->bom_done && i < n) {
        if ((unsigned char)s[i] == sse_bom[p->bom_seen]) {
            i++;
            if (++p->bom_seen == 3)
                p->bom_done = true;
            continue;
        }
        p->bom_done = true;
        /* a partial match was content after all */
        if (p->bom_seen) {
            int rc = hold_partial(p, (const char *)sse_bom, p->bom_seen);
            if (rc)
                return rc;
        }
    }
    return (int)i;
}

static int feed(struct sse_parser *p, const char *bytes, char *mut, size_t n, uint64_t now_ns)
{
    if (p->err)
        return p->err;
    const char *s = bytes;
    const char *end = bytes + n;
    int rc = 0;
    if (!p->bom_done) {
        rc = eat_bom(p, s, n);
        if (rc < 0)
            goto fail;
        s += rc;
        rc = 0;
    }
    if (p->skip_lf && s < end) {
        if (*s == '\n')
            s++;
        p->skip_lf = false;
    }
    /* Next LF / CR at or after s; NULL once none is left in this feed. They
     * are searched again only when s has moved past them, so the scan is
     * linear and a stream without CR costs one memchr per line. */
    const char *lf = NULL, *cr = NULL;
    bool lf_known = false, cr_known = false;
    while (s < end) {
        if (!lf_known || (lf && lf < s)) {
            lf = memchr(s, '\n', (size_t)(end - s));
            lf_known = true;
        }
        if (!cr_known || (cr && cr < s)) {
            cr = memchr(s, '\r', (size_t)(end - s));
            cr_known = true;
        }
        const char *t = lf;
        if (!t || (cr && cr < t))
            t = cr;
        if (!t) {
            rc = hold_partial(p, s, (size_t)(end - s));
            if (rc)
                goto fail;
            break;
        }
        size_t len = (size_t)(t - s);
        if (p->line.len) {
            rc = hold_partial(p, s, len);
            if (rc)
                goto fail;
            rc = process_line(p, p->line.data, p->line.len, NULL, now_ns);
            buf_reset(&p->line);
        } else if (!fits(p, len)) {
            rc = TS_TOOBIG;
        } else {
            rc = process_line(p, s, len, mut ? mut + (s - bytes) : NULL, now_ns);
        }
        if (rc)
            goto fail;
        s = t + 1;
        if (*t == '\r') {
            if (s == end)
                p->skip_lf = true;
            else if (*s == '\n')
                s++;
        }
    }
    rc = unpend(p); /* the caller's bytes are not kept past the feed */
    if (rc)
        goto fail;
    return 0;
fail:
    p->pend = NULL;
    p->pend_len = 0;
    p->err = rc;
    return rc;
}

int sse_parser_feed(struct sse_parser *p, const char *bytes, size_t n, uint64_t now_ns)
{
    return feed(p, bytes, NULL, n, now_ns);
}

int sse_parser_feed_inplace(struct sse_parser *p, char *bytes, size_t n, uint64_t now_ns)
{
    return feed(p, bytes, bytes, n, now_ns);
}

int sse_parser_finish(struct sse_parser *p, size_t *discarded)
{
    size_t d = p->line.len + p->data.len + p->type.len;
    if (!p->bom_done)
        d += p->bom_seen;
    int err = p->err;
    buf_reset(&p->line);
    buf_reset(&p->data);
    buf_reset(&p->type);
    if (p->id_dirty) {
        /* the uncommitted id of the discarded block is dropped */
        buf_reset(&p->id);
        if (buf_append(&p->id, buf_cstr(&p->last_id), p->last_id.len) != 0)
            buf_reset(&p->id);
        p->id_dirty = p->id.len != p->last_id.len;
    }
    p->block_retry = -1;
    p->bom_seen = 0;
    p->bom_done = false;
    p->skip_lf = false;
    p->err = 0;
    if (discarded)
        *discarded = d;
    return err;
}

const char *sse_parser_last_event_id(const struct sse_parser *p)
{
    return buf_cstr(&p->last_id);
}

int64_t sse_parser_retry_ms(const struct sse_parser *p)
{
    return p->retry_ms;
}
