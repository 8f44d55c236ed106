#include "openai_encode.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base64.h"
#include "base/alloc.h"

#define LIT(s) s, sizeof(s) - 1

/* 1 for the ASCII bytes JSON strings cannot hold raw. */
static const unsigned char needs_escape[128] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,         1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, ['"'] = 1, ['\\'] = 1,
};

/* Length of the valid UTF-8 sequence starting at s (n > 0 bytes left), or
 * 0 if s does not start one (Unicode 15, table 3-7). */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c >= 0xC2 && c <= 0xDF)
        return n >= 2 && (s[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (n < 3 || (s[2] & 0xC0) != 0x80)
            return 0;
        unsigned char lo = c == 0xE0 ? 0xA0 : 0x80;
        unsigned char hi = c == 0xED ? 0x9F : 0xBF;
        return s[1] >= lo && s[1] <= hi ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (n < 4 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        unsigned char lo = c == 0xF0 ? 0x90 : 0x80;
        unsigned char hi = c == 0xF4 ? 0x8F : 0xBF;
        return s[1] >= lo && s[1] <= hi ? 4 : 0;
    }
    return 0;
}

static int append_escape(struct buf *out, unsigned char c)
{
    switch (c) {
    case '"':
        return buf_append(out, LIT("\\\""));
    case '\\':
        return buf_append(out, LIT("\\\\"));
    case '\n':
        return buf_append(out, LIT("\\n"));
    case '\r':
        return buf_append(out, LIT("\\r"));
    case '\t':
        return buf_append(out, LIT("\\t"));
    case '\b':
        return buf_append(out, LIT("\\b"));
    case '\f':
        return buf_append(out, LIT("\\f"));
    default:
        break;
    }
    if (c >= 0x80) /* not valid UTF-8 */
        return buf_append(out, LIT("\\ufffd"));
    static const char hex[] = "0123456789abcdef";
    char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
    return buf_append(out, u, sizeof(u));
}

int openai_json_escape(struct buf *out, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t mark = out->len;
    int rc = buf_reserve(out, n); /* enough unless something needs escaping */
    if (rc)
        return rc;
    size_t i = 0, run = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c < 0x80) {
            if (!needs_escape[c]) {
                i++;
                continue;
            }
        } else {
            size_t k = utf8_seq_len(p + i, n - i);
            if (k) {
                i += k;
                continue;
            }
        }
        if ((rc = buf_append(out, s + run, i - run)) || (rc = append_escape(out, c)))
            goto fail;
        run = ++i;
    }
    if ((rc = buf_append(out, s + run, n - run)))
        goto fail;
    return 0;
fail:
    buf_truncate(out, mark);
    return rc;
}

static int append_json_str(struct buf *out, const char *s)
{
    int rc;
    if ((rc = buf_append_char(out, '"')) || (rc = openai_json_escape(out, s, strlen(s))) ||
        (rc = buf_append_char(out, '"')))
        return rc;
    return 0;
}

static const char chat_text_open[] = "{\"index\":0,\"delta\":{\"content\":\"";
static const char chat_text_close[] = "\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n";
static const char cmpl_text_open[] = "{\"index\":0,\"text\":\"";
static const char cmpl_text_close[] = "\",\"logprobs\":null,\"finish_reason\":null}]}\n\n";

int openai_stream_enc_init(struct openai_stream_enc *e, enum openai_endpoint ep, const char *id,
                           int64_t created, const char *model)
{
    e->endpoint = ep;
    buf_init(&e->head, 1u << 20);
    e->prefix_len = 0;
    if (ep != OPENAI_CHAT && ep != OPENAI_COMPLETIONS)
        return -EINVAL;
    const char *object = ep == OPENAI_CHAT ? "chat.completion.chunk" : "text_completion";
    const char *open = ep == OPENAI_CHAT ? chat_text_open : cmpl_text_open;
    int rc;
    if ((rc = buf_append(&e->head, LIT("data: {\"id\":"))) ||
        (rc = append_json_str(&e->head, id)) ||
        (rc = buf_appendf(&e->head, ",\"object\":\"%s\",\"created\":%" PRId64 ",\"model\":", object,
                          created)) ||
        (rc = append_json_str(&e->head, model)) ||
        (rc = buf_append(&e->head, LIT(",\"choices\":["))))
        goto fail;
    e->prefix_len = e->head.len;
    if ((rc = buf_append_str(&e->head, open)))
        goto fail;
    return 0;
fail:
    buf_release(&e->head);
    return rc;
}

void openai_stream_enc_release(struct openai_stream_enc *e)
{
    buf_release(&e->head);
}

/* prefix + a + escaped(s) + b, all or nothing. */
static int put_chunk(const struct openai_stream_enc *e, struct buf *out, const char *a, size_t alen,
                     const char *s, size_t slen, const char *b, size_t blen)
{
    size_t mark = out->len;
    int rc = buf_reserve(out, e->prefix_len + alen + slen + blen);
    if (rc)
        return rc;
    memcpy(out->data + out->len, e->head.data, e->prefix_len);
    out->len += e->prefix_len;
    if ((rc = buf_append(out, a, alen)) || (s && (rc = openai_json_escape(out, s, slen))) ||
        (rc = buf_append(out, b, blen))) {
        buf_truncate(out, mark);
        return rc;
    }
    return 0;
}

int openai_stream_enc_role(const struct openai_stream_enc *e, struct buf *out)
{
    if (e->endpoint != OPENAI_CHAT)
        return 0;
    static const char role[] = "{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                               "\"logprobs\":null,\"finish_reason\":null}]}\n\n";
    return put_chunk(e, out, LIT(role), NULL, 0, "", 0);
}

int openai_stream_enc_content(const struct openai_stream_enc *e, struct buf *out, const char *text,
                              size_t len)
{
    const char *close = e->endpoint == OPENAI_CHAT ? chat_text_close : cmpl_text_close;
    size_t close_len =
        e->endpoint == OPENAI_CHAT ? sizeof(chat_text_close) - 1 : sizeof(cmpl_text_close) - 1;
    size_t mark = out->len;
    int rc = buf_reserve(out, e->head.len + len + close_len);
    if (rc)
        return rc;
    /* the head already ends with the opening of the text field */
    memcpy(out->data + out->len, e->head.data, e->head.len);
    out->len += e->head.len;
    if ((rc = openai_json_escape(out, text, len)) || (rc = buf_append(out, close, close_len))) {
        buf_truncate(out, mark);
        return rc;
    }
    return 0;
}

int openai_stream_enc_tool_call(const struct openai_stream_enc *e, struct buf *out, int index,
                                const char *call_id, const char *name)
{
    if (e->endpoint != OPENAI_CHAT)
        return -EINVAL;
    size_t mark = out->len;
    int rc;
    if ((rc = buf_append(out, e->head.data, e->prefix_len)) ||
        (rc = buf_appendf(out,
                          "{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,"
                          "\"tool_calls\":[{\"index\":%d,\"id\":",
                          index)) ||
        (rc = append_json_str(out, call_id)) ||
        (rc = buf_append_str(out, ",\"type\":\"function\",\"function\":{\"name\":")) ||
        (rc = append_json_str(out, name)) ||
        (rc = buf_append_str(out, ",\"arguments\":\"\"}}]},\"logprobs\":null,"
                                  "\"finish_reason\":null}]}\n\n"))) {
        buf_truncate(out, mark);
        return rc;
    }
    return 0;
}

int openai_stream_enc_tool_args(const struct openai_stream_enc *e, struct buf *out, int index,
                                const char *args, size_t len)
{
    static const char close[] = "\"}}]},\"logprobs\":null,\"finish_reason\":null}]}\n\n";
    if (e->endpoint != OPENAI_CHAT)
        return -EINVAL;
    char open[96];
    int n = snprintf(open, sizeof(open),
                     "{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":%d,"
                     "\"function\":{\"arguments\":\"",
                     index);
    if (n < 0 || (size_t)n >= sizeof(open))
        return -EINVAL;
    return put_chunk(e, out, open, (size_t)n, args, len, LIT(close));
}

int openai_stream_enc_finish(const struct openai_stream_enc *e, struct buf *out,
                             const char *finish_reason)
{
    static const char chat_open[] =
        "{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"";
    static const char cmpl_open[] =
        "{\"index\":0,\"text\":\"\",\"logprobs\":null,\"finish_reason\":\"";
    static const char close[] = "\"}]}\n\n";
    const char *reason = finish_reason ? finish_reason : "stop";
    if (e->endpoint == OPENAI_CHAT)
        return put_chunk(e, out, LIT(chat_open), reason, strlen(reason), LIT(close));
    return put_chunk(e, out, LIT(cmpl_open), reason, strlen(reason), LIT(close));
}

int openai_stream_enc_usage(const struct openai_stream_enc *e, struct buf *out,
                            int64_t prompt_tokens, int64_t completion_tokens)
{
    char tail[160];
    int n = snprintf(tail, sizeof(tail),
                     "],\"usage\":{\"prompt_tokens\":%" PRId64 ",\"completion_tokens\":%" PRId64
                     ",\"total_tokens\":%" PRId64 "}}\n\n",
                     prompt_tokens, completion_tokens, prompt_tokens + completion_tokens);
    if (n < 0 || (size_t)n >= sizeof(tail))
        return -EINVAL;
    return put_chunk(e, out, "", 0, NULL, 0, tail, (size_t)n);
}

int openai_stream_enc_done(struct buf *out)
{
    return buf_append(out, LIT("data: [DONE]\n\n"));
}

static int append_usage(struct buf *out, int64_t prompt, int64_t completion)
{
    return buf_appendf(out,
                       "\"usage\":{\"prompt_tokens\":%" PRId64 ",\"completion_tokens\":%" PRId64
                       ",\"total_tokens\":%" PRId64 "}",
                       prompt, completion, prompt + completion);
}

int openai_encode_response(struct buf *out, enum openai_endpoint ep, const char *id,
                           int64_t created, const char *model, const char *text, size_t len,
                           const char *finish_reason, int64_t prompt_tokens,
                           int64_t completion_tokens)
{
    if (ep != OPENAI_CHAT && ep != OPENAI_COMPLETIONS)
        return -EINVAL;
    bool chat = ep == OPENAI_CHAT;
    size_t mark = out->len;
    int rc;
    if ((rc = buf_append(out, LIT("{\"id\":"))) || (rc = append_json_str(out, id)) ||
        (rc = buf_appendf(out, ",\"object\":\"%s\",\"created\":%" PRId64 ",\"model\":",
                          chat ? "chat.completion" : "text_completion", created)) ||
        (rc = append_json_str(out, model)) ||
        (rc = buf_append_str(out, chat ? ",\"choices\":[{\"index\":0,\"message\":{\"role\":"
                                         "\"assistant\",\"content\":\""
                                       : ",\"choices\":[{\"index\":0,\"text\":\"")) ||
        (rc = openai_json_escape(out, text, len)) ||
        (rc = buf_append_str(out, chat ? "\"},\"logprobs\":null,\"finish_reason\":"
                                       : "\",\"logprobs\":null,\"finish_reason\":")) ||
        (rc = append_json_str(out, finish_reason ? finish_reason : "stop")) ||
        (rc = buf_append(out, LIT("}],"))) ||
        (rc = append_usage(out, prompt_tokens, completion_tokens)) ||
        (rc = buf_append_char(out, '}')))
        goto fail;
    return 0;
fail:
    buf_truncate(out, mark);
    return rc;
}

int openai_encode_tool_call_response(struct buf *out, const char *id, int64_t created,
                                     const char *model, const char *call_id, const char *name,
                                     const char *args, size_t args_len, const char *finish_reason,
                                     int64_t prompt_tokens, int64_t completion_tokens)
{
    size_t mark = out->len;
    int rc;
    if ((rc = buf_append(out, LIT("{\"id\":"))) || (rc = append_json_str(out, id)) ||
        (rc = buf_appendf(
             out, ",\"object\":\"chat.completion\",\"created\":%" PRId64 ",\"model\":", created)) ||
        (rc = append_json_str(out, model)) ||
        (rc = buf_append_str(out, ",\"choices\":[{\"index\":0,\"message\":{\"role\":"
                                  "\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":")) ||
        (rc = append_json_str(out, call_id)) ||
        (rc = buf_append_str(out, ",\"type\":\"function\",\"function\":{\"name\":")) ||
        (rc = append_json_str(out, name)) || (rc = buf_append_str(out, ",\"arguments\":\"")) ||
        (rc = openai_json_escape(out, args, args_len)) ||
        (rc = buf_append_str(out, "\"}}]},\"logprobs\":null,\"finish_reason\":")) ||
        (rc = append_json_str(out, finish_reason ? finish_reason : "tool_calls")) ||
        (rc = buf_append(out, LIT("}],"))) ||
        (rc = append_usage(out, prompt_tokens, completion_tokens)) ||
        (rc = buf_append_char(out, '}')))
        goto fail;
    return 0;
fail:
    buf_truncate(out, mark);
    return rc;
}

static int append_float(struct buf *out, float f)
{
    if (!isfinite(f))
        return buf_append_char(out, '0');
    char tmp[32];
    int n = snprintf(tmp, sizeof(tmp), "%.9g", (double)f);
    if (n < 0 || (size_t)n >= sizeof(tmp))
        return -EINVAL;
    return buf_append(out, tmp, (size_t)n);
}

static int append_b64_vector(struct buf *out, const float *v, size_t dims, unsigned char *tmp)
{
    for (size_t k = 0; k < dims; k++) {
        uint32_t u;
        memcpy(&u, &v[k], sizeof(u));
        tmp[4 * k] = (unsigned char)u;
        tmp[4 * k + 1] = (unsigned char)(u >> 8);
        tmp[4 * k + 2] = (unsigned char)(u >> 16);
        tmp[4 * k + 3] = (unsigned char)(u >> 24);
    }
    size_t n = base64_len(dims * 4);
    int rc = buf_reserve(out, n + 2);
    if (rc)
        return rc;
    out->data[out->len++] = '"';
    out->len += base64_encode(tmp, dims * 4, out->data + out->len);
    out->data[out->len++] = '"';
    out->data[out->len] = '\0';
    return 0;
}

int openai_encode_embeddings(struct buf *out, const char *model, const float *vecs, size_t n,
                             size_t dims, enum openai_encoding fmt, int64_t prompt_tokens)
{
    size_t mark = out->len;
    unsigned char *tmp = NULL;
    if (dims > SIZE_MAX / 8)
        return -EINVAL;
    if (fmt == OPENAI_ENCODING_BASE64) {
        tmp = ts_malloc(dims * 4 + 1);
        if (!tmp)
            return -ENOMEM;
    }
    int rc = buf_append(out, LIT("{\"object\":\"list\",\"data\":["));
    for (size_t i = 0; i < n && !rc; i++) {
        rc = buf_appendf(
            out, "%s{\"object\":\"embedding\",\"index\":%zu,\"embedding\":", i ? "," : "", i);
        const float *v = vecs + i * dims;
        if (!rc && tmp) {
            rc = append_b64_vector(out, v, dims, tmp);
        } else if (!rc) {
            rc = buf_append_char(out, '[');
            for (size_t k = 0; k < dims && !rc; k++) {
                if (k)
                    rc = buf_append_char(out, ',');
                if (!rc)
                    rc = append_float(out, v[k]);
            }
            if (!rc)
                rc = buf_append_char(out, ']');
        }
        if (!rc)
            rc = buf_append_char(out, '}');
    }
    if (!rc && !(rc = buf_append(out, LIT("],\"model\":"))) && !(rc = append_json_str(out, model)))
        rc = buf_appendf(out,
                         ",\"usage\":{\"prompt_tokens\":%" PRId64 ",\"total_tokens\":%" PRId64 "}}",
                         prompt_tokens, prompt_tokens);
    ts_free(tmp);
    if (rc)
        buf_truncate(out, mark);
    return rc;
}

static int append_str_or_null(struct buf *out, const char *s)
{
    if (!s || !*s)
        return buf_append(out, LIT("null"));
    return append_json_str(out, s);
}

int openai_encode_error(struct buf *out, const struct openai_error *err)
{
    size_t mark = out->len;
    int rc;
    if ((rc = buf_append(out, LIT("{\"error\":{\"message\":"))) ||
        (rc = append_json_str(out, err->message)) || (rc = buf_append(out, LIT(",\"type\":"))) ||
        (rc = append_json_str(out, err->type[0] ? err->type : "invalid_request_error")) ||
        (rc = buf_append(out, LIT(",\"param\":"))) || (rc = append_str_or_null(out, err->param)) ||
        (rc = buf_append(out, LIT(",\"code\":"))) || (rc = append_str_or_null(out, err->code)) ||
        (rc = buf_append(out, LIT("}}")))) {
        buf_truncate(out, mark);
        return rc;
    }
    return 0;
}
