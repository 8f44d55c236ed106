/*
 * sse_faults.c - rewrites of single SSE chunks for the stream faults: what a
 * chunk carries, dropping finish reasons, invalid UTF-8 inside a content
 * string, cutting a chunk's JSON in half, the injected error event, and the
 * shuffles of reordered windows. The sequencing and timing live in
 * stream_tap.c.
 */
#include <string.h>

#include "base/buf.h"
#include "chaos/tap_int.h"
#include "llm/openai_memo.h"

const char SSE_ERROR_EVENT_DEFAULT[] =
    "{\"error\":{\"message\":\"tokenstorm chaos: injected server error mid-stream\","
    "\"type\":\"server_error\",\"param\":null,\"code\":500}}";

int sse_error_data(const struct fault_params *p, struct buf *out)
{
    buf_reset(out);
    if (!p->text[0])
        return buf_append_str(out, SSE_ERROR_EVENT_DEFAULT);
    if (p->raw)
        return buf_append_str(out, p->text);
    json_t *e = json_pack("{s:{s:s,s:s,s:n,s:i}}", "error", "message", p->text, "type",
                          "server_error", "param", "code", 500);
    if (!e)
        return -ENOMEM;
    int rc = tap_json_dump(out, e, 0);
    json_decref(e);
    return rc;
}

static bool nonempty_string(const json_t *v)
{
    return json_is_string(v) && json_string_length(v) > 0;
}

static bool present(const json_t *v)
{
    return v && !json_is_null(v);
}

/* A choice's streamed reasoning: reasoning_content (vLLM, DeepSeek) unless it
 * is absent or null, then reasoning; as llm/openai_chunk.c reads it. */
static const json_t *reasoning_of(const json_t *d)
{
    const json_t *r = json_object_get(d, "reasoning_content");
    return present(r) ? r : json_object_get(d, "reasoning");
}

unsigned tap_chunk_flags(const json_t *chunk)
{
    unsigned fl = 0;
    if (!json_is_object(chunk))
        return 0;
    const json_t *obj = json_object_get(chunk, "object");
    if (present(json_object_get(chunk, "error")) ||
        (json_is_string(obj) && strcmp(json_string_value(obj), "error") == 0))
        fl |= TAP_CHUNK_ERROR;
    if (present(json_object_get(chunk, "usage")))
        fl |= TAP_CHUNK_USAGE;
    const json_t *choices = json_object_get(chunk, "choices");
    size_t i;
    const json_t *c;
    json_array_foreach(choices, i, c)
    {
        if (!json_is_object(c))
            continue;
        if (present(json_object_get(c, "finish_reason")))
            fl |= TAP_CHUNK_FINISH;
        if (nonempty_string(json_object_get(c, "text")))
            fl |= TAP_CHUNK_TOKEN;
        const json_t *d = json_object_get(c, "delta");
        if (!json_is_object(d))
            d = json_object_get(c, "message");
        if (!json_is_object(d))
            continue;
        if (present(json_object_get(d, "role")))
            fl |= TAP_CHUNK_ROLE;
        const json_t *tc = json_object_get(d, "tool_calls");
        if (nonempty_string(json_object_get(d, "content")) || nonempty_string(reasoning_of(d)) ||
            (json_is_array(tc) && json_array_size(tc) > 0))
            fl |= TAP_CHUNK_TOKEN;
    }
    return fl;
}

unsigned tap_flags_of_chunk(const struct openai_chunk *ch)
{
    unsigned fl = 0;
    if (ch->flags & OPENAI_CHUNK_ERROR)
        fl |= TAP_CHUNK_ERROR;
    if (ch->flags & OPENAI_CHUNK_USAGE)
        fl |= TAP_CHUNK_USAGE;
    if (ch->flags & OPENAI_CHUNK_FINISH)
        fl |= TAP_CHUNK_FINISH;
    if (ch->flags & OPENAI_CHUNK_ROLE)
        fl |= TAP_CHUNK_ROLE;
    if (ch->flags & (OPENAI_CHUNK_CONTENT | OPENAI_CHUNK_REASONING | OPENAI_CHUNK_TOOL_CALLS |
                     OPENAI_CHUNK_TEXT))
        fl |= TAP_CHUNK_TOKEN;
    return fl;
}

unsigned tap_event_flags(struct openai_decoder *d, struct openai_memo **memo, const char *data,
                         size_t len)
{
    struct openai_chunk ch;
    if (openai_decode_chunk_memo(d, memo, data, len, &ch) == 0)
        return tap_flags_of_chunk(&ch);
    /* refused (a field of a type the decoder does not take) or out of
     * memory: what the chunk's JSON says, read leniently */
    json_t *root = tap_json_load(data, len);
    unsigned fl = tap_chunk_flags(root);
    json_decref(root);
    return fl;
}

json_t *tap_chunk_text(json_t *chunk, size_t i)
{
    json_t *c = json_array_get(json_object_get(chunk, "choices"), i);
    if (!json_is_object(c))
        return NULL;
    json_t *t = json_object_get(c, "text");
    if (json_is_string(t))
        return t;
    json_t *d = json_object_get(c, "delta");
    if (!json_is_object(d))
        d = json_object_get(c, "message");
    t = json_object_get(d, "content");
    return json_is_string(t) ? t : NULL;
}

size_t sse_drop_finish(json_t *chunk)
{
    size_t n = 0, i;
    json_t *c;
    json_array_foreach(json_object_get(chunk, "choices"), i, c)
    {
        json_t *fr = json_object_get(c, "finish_reason");
        if (fr && !json_is_null(fr)) {
            if (json_object_set_new(c, "finish_reason", json_null()) == 0)
                n++;
        }
    }
    return n;
}

/* U+FFFF, a valid but unused code point, marks where the raw bytes go. */
#define MARK     "\xef\xbf\xbf"
#define MARK_LEN 3

int sse_invalid_utf8(json_t *chunk, struct buf *out)
{
    json_t *t = NULL;
    size_t nch = json_array_size(json_object_get(chunk, "choices"));
    for (size_t i = 0; i < nch && !t; i++)
        t = tap_chunk_text(chunk, i);
    if (!t)
        return TS_AGAIN;
    const char *s = json_string_value(t);
    size_t n = json_string_length(t);
    /* the middle, moved back to the start of a UTF-8 character */
    size_t mid = n / 2;
    while (mid > 0 && ((unsigned char)s[mid] & 0xc0) == 0x80)
        mid--;
    struct buf tmp;
    buf_init(&tmp, n + MARK_LEN + 1);
    int rc = buf_append(&tmp, s, mid);
    if (rc == 0)
        rc = buf_append(&tmp, MARK, MARK_LEN);
    if (rc == 0)
        rc = buf_append(&tmp, s + mid, n - mid);
    if (rc == 0 && json_string_setn(t, tmp.data, tmp.len) != 0)
        rc = -ENOMEM;
    buf_release(&tmp);
    if (rc < 0)
        return rc;
    buf_reset(out);
    rc = tap_json_dump(out, chunk, 0);
    if (rc < 0)
        return rc;
    /* the mark is found where it was put: the content string is the only
     * place it is searched for when it occurs once; otherwise the first
     * occurrence still lies inside a JSON string, which is all that counts */
    char *p = memmem(out->data, out->len, MARK, MARK_LEN);
    if (!p)
        return TS_AGAIN;
    p[0] = (char)0xff;
    p[1] = (char)0xfe;
    memmove(p + 2, p + 3, out->len - (size_t)(p + 3 - out->data));
    buf_truncate(out, out->len - 1);
    return 0;
}

size_t sse_malformed_len(size_t len)
{
    if (len < 2)
        return len;
    return len / 2;
}

void sse_shuffle_perm(size_t *perm, size_t n, struct rng *r)
{
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    if (n < 2)
        return;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)rng_range(r, 0, i);
        size_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    bool ident = true;
    for (size_t i = 0; i < n && ident; i++)
        ident = perm[i] == i;
    if (ident) {
        perm[0] = 1;
        perm[1] = 0;
    }
}
