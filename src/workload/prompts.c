#include "prompts.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "llm/text.h"

#define READ_CHUNK (64 * 1024)

struct parse_ctx {
    struct prompts *p;
    const char *name;
    unsigned flags;
    char *err;
    size_t errlen;
    uint64_t line; /* number of the line being parsed, from 1 */
};

void prompts_init(struct prompts *p)
{
    p->v = NULL;
    p->n = 0;
    p->cap = 0;
    buf_init(&p->pool, PROMPTS_MAX_BYTES);
}

void prompts_release(struct prompts *p)
{
    ts_free(p->v);
    buf_release(&p->pool);
    prompts_init(p);
}

/* Writes "name:line: message" (or "name:line:col: message" when col > 0) into
 * the caller's error buffer and returns code. */
__attribute__((format(printf, 4, 0))) static int vfail(struct parse_ctx *c, int code, int col,
                                                       const char *fmt, va_list ap)
{
    if (!c->err || c->errlen == 0)
        return code;
    int n;
    if (col > 0)
        n = snprintf(c->err, c->errlen, "%s:%llu:%d: ", c->name, (unsigned long long)c->line, col);
    else
        n = snprintf(c->err, c->errlen, "%s:%llu: ", c->name, (unsigned long long)c->line);
    if (n >= 0 && (size_t)n < c->errlen)
        vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
    return code;
}

__attribute__((format(printf, 3, 4))) static int fail(struct parse_ctx *c, int code,
                                                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(c, code, 0, fmt, ap);
    va_end(ap);
    return code;
}

__attribute__((format(printf, 4, 5))) static int fail_at(struct parse_ctx *c, int code, int col,
                                                         const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(c, code, col, fmt, ap);
    va_end(ap);
    return code;
}

const char *prompts_json_type(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "something else";
}

static size_t count_str(const json_t *s)
{
    return text_count_tokens(json_string_value(s), json_string_length(s));
}

/* Tokens of one message's content: a string, an array of parts (the "text" of
 * text parts counts; other parts count nothing), null or absent. */
static int content_tokens(struct parse_ctx *c, size_t i, const json_t *content, size_t *out)
{
    *out = 0;
    if (!content || json_is_null(content))
        return 0;
    if (json_is_string(content)) {
        *out = count_str(content);
        return 0;
    }
    if (!json_is_array(content))
        return fail(c, TS_PARSE, "\"messages\"[%zu].content must be a string, an array or null", i);
    size_t j;
    const json_t *part;
    json_array_foreach(content, j, part)
    {
        if (!json_is_object(part))
            return fail(c, TS_PARSE, "\"messages\"[%zu].content[%zu] must be an object", i, j);
        const json_t *text = json_object_get(part, "text");
        if (text && !json_is_string(text))
            return fail(c, TS_PARSE, "\"messages\"[%zu].content[%zu].text must be a string", i, j);
        if (text)
            *out += count_str(text);
    }
    return 0;
}

/* Checks a "messages" array and counts the whole chat request's tokens. */
static int messages_tokens(struct parse_ctx *c, const json_t *msgs, size_t *out)
{
    if (!json_is_array(msgs))
        return fail(c, TS_PARSE, "\"messages\" must be an array, got %s", prompts_json_type(msgs));
    size_t n = json_array_size(msgs);
    if (n == 0)
        return fail(c, TS_PARSE, "\"messages\" is empty");
    if (n > PROMPTS_MAX_MESSAGES)
        return fail(c, TS_TOOBIG, "\"messages\" has %zu messages, more than %u", n,
                    PROMPTS_MAX_MESSAGES);
    size_t total = CHAT_TOKENS_PER_REPLY;
    size_t i;
    const json_t *m;
    json_array_foreach(msgs, i, m)
    {
        if (!json_is_object(m))
            return fail(c, TS_PARSE, "\"messages\"[%zu] must be an object, got %s", i,
                        prompts_json_type(m));
        const json_t *role = json_object_get(m, "role");
        if (!json_is_string(role))
            return fail(c, TS_PARSE, "\"messages\"[%zu] needs a \"role\" string", i);
        const json_t *name = json_object_get(m, "name");
        if (name && !json_is_string(name))
            return fail(c, TS_PARSE, "\"messages\"[%zu].name must be a string", i);
        size_t ct;
        int rc = content_tokens(c, i, json_object_get(m, "content"), &ct);
        if (rc)
            return rc;
        total += CHAT_TOKENS_PER_MESSAGE + count_str(role) + ct;
        if (name)
            total += CHAT_TOKENS_PER_NAME + count_str(name);
    }
    *out = total;
    return 0;
}

/* Reads "max_tokens" / "output_tokens" into *out (0 when neither is given). */
static int output_tokens(struct parse_ctx *c, const json_t *obj, uint32_t *out)
{
    const json_t *mt = json_object_get(obj, "max_tokens");
    const json_t *ot = json_object_get(obj, "output_tokens");
    *out = 0;
    if (mt && ot)
        return fail(c, TS_PARSE, "give \"max_tokens\" or \"output_tokens\", not both");
    const char *key = mt ? "max_tokens" : "output_tokens";
    const json_t *v = mt ? mt : ot;
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 1 ||
        json_integer_value(v) > (json_int_t)PROMPTS_MAX_OUTPUT_TOKENS)
        return fail(c, TS_PARSE, "\"%s\" must be an integer from 1 to %u", key,
                    PROMPTS_MAX_OUTPUT_TOKENS);
    *out = (uint32_t)json_integer_value(v);
    return 0;
}

/* Appends s[0..n) and a NUL to the pool; stores where it went. */
static int pool_add(struct parse_ctx *c, const char *s, size_t n, uint64_t *off)
{
    struct buf *pool = &c->p->pool;
    size_t at = pool->len;
    int rc = buf_append(pool, s, n);
    if (rc == 0)
        rc = buf_append_char(pool, '\0');
    if (rc == TS_TOOBIG) {
        buf_truncate(pool, at);
        return fail(c, TS_TOOBIG, "the prompts take more than %zu bytes", PROMPTS_MAX_BYTES);
    }
    if (rc)
        return fail(c, rc, "out of memory");
    *off = at;
    return 0;
}

/* Stores value as compact JSON in the pool. */
static int pool_add_json(struct parse_ctx *c, const json_t *value, uint64_t *off, uint32_t *len)
{
    const size_t flags = JSON_COMPACT | JSON_ENCODE_ANY;
    size_t n = json_dumpb(value, NULL, 0, flags);
    if (n == 0)
        return fail(c, TS_PARSE, "cannot serialise the prompt");
    if (n > UINT32_MAX)
        return fail(c, TS_TOOBIG, "the prompt is too large");
    char *tmp = ts_malloc(n);
    if (!tmp)
        return fail(c, -ENOMEM, "out of memory");
    int rc = 0;
    if (json_dumpb(value, tmp, n, flags) != n)
        rc = fail(c, TS_PARSE, "cannot serialise the prompt");
    else
        rc = pool_add(c, tmp, n, off);
    ts_free(tmp);
    if (rc == 0)
        *len = (uint32_t)n;
    return rc;
}

static int entry_push(struct parse_ctx *c, const struct prompt_entry *e)
{
    struct prompts *p = c->p;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        struct prompt_entry *v = ts_realloc(p->v, cap * sizeof(*v));
        if (!v)
            return fail(c, -ENOMEM, "out of memory");
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n++] = *e;
    return 0;
}

/* Checks one decoded line and keeps what the workload needs of it. */
static int take_object(struct parse_ctx *c, const json_t *obj)
{
    if (!json_is_object(obj))
        return fail(c, TS_PARSE, "expected a JSON object, got %s", prompts_json_type(obj));
    const json_t *prompt = json_object_get(obj, "prompt");
    const json_t *msgs = json_object_get(obj, "messages");
    if (prompt && msgs)
        return fail(c, TS_PARSE, "give \"prompt\" or \"messages\", not both");
    if (!prompt && !msgs)
        return fail(c, TS_PARSE, "needs \"prompt\" (a string) or \"messages\" (an array)");

    struct prompt_entry e = {.line = (uint32_t)c->line};
    size_t tokens = 0;
    if (prompt) {
        if (!json_is_string(prompt))
            return fail(c, TS_PARSE, "\"prompt\" must be a string, got %s",
                        prompts_json_type(prompt));
        e.kind = PROMPT_TEXT;
        tokens = count_str(prompt);
    } else {
        if (c->flags & PROMPTS_TEXT_ONLY)
            return fail(c, TS_PARSE,
                        "\"messages\" needs the chat endpoint (use \"prompt\" for this one)");
        e.kind = PROMPT_MESSAGES;
        int rc = messages_tokens(c, msgs, &tokens);
        if (rc)
            return rc;
    }
    e.tokens = tokens > UINT32_MAX ? UINT32_MAX : (uint32_t)tokens;

    int rc = output_tokens(c, obj, &e.max_tokens);
    if (rc)
        return rc;
    const json_t *ref = json_object_get(obj, "reference");
    if (ref && !json_is_string(ref))
        return fail(c, TS_PARSE, "\"reference\" must be a string, got %s", prompts_json_type(ref));

    size_t pool_len = c->p->pool.len;
    rc = pool_add_json(c, prompt ? prompt : msgs, &e.json_off, &e.json_len);
    if (rc == 0 && ref) {
        e.has_ref = true;
        e.ref_len = (uint32_t)json_string_length(ref);
        rc = pool_add(c, json_string_value(ref), e.ref_len, &e.ref_off);
    }
    if (rc == 0)
        rc = entry_push(c, &e);
    if (rc)
        buf_truncate(&c->p->pool, pool_len);
    return rc;
}

/* Handles line number c->line + 1: s[0..len) without its '\n'. */
static int parse_line(struct parse_ctx *c, const char *s, size_t len)
{
    c->line++;
    if (c->line > PROMPTS_MAX_LINES)
        return fail(c, TS_TOOBIG, "more than %u lines", PROMPTS_MAX_LINES);
    if (len > 0 && s[len - 1] == '\r')
        len--;
    if (len > PROMPTS_MAX_LINE)
        return fail(c, TS_TOOBIG, "line longer than %u bytes", PROMPTS_MAX_LINE);
    if (c->line == 1 && len >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0) {
        s += 3;
        len -= 3;
    }
    size_t i = 0;
    while (i < len && (s[i] == ' ' || s[i] == '\t'))
        i++;
    if (i == len || s[i] == '#')
        return 0;
    const char *nul = memchr(s, '\0', len);
    if (nul)
        return fail_at(c, TS_PARSE, (int)(nul - s) + 1, "NUL byte");

    json_error_t je;
    json_t *obj = json_loadb(s, len, JSON_REJECT_DUPLICATES, &je);
    if (!obj) {
        return fail_at(c, TS_PARSE, je.column, "invalid JSON: %s", je.text);
    }
    int rc = take_object(c, obj);
    json_decref(obj);
    return rc;
}

static int finish(struct parse_ctx *c, int rc)
{
    if (rc == 0 && c->p->n == 0) {
        if (c->err && c->errlen > 0)
            snprintf(c->err, c->errlen,
                     "%s: no prompts (the file is empty or has only blank and comment lines)",
                     c->name);
        rc = TS_PARSE;
    }
    if (rc)
        prompts_release(c->p);
    return rc;
}

int prompts_parse(struct prompts *p, const char *data, size_t len, const char *name, unsigned flags,
                  char *err, size_t errlen)
{
    struct parse_ctx c = {p, name ? name : "<memory>", flags, err, errlen, 0};
    int rc = 0;
    size_t pos = 0;
    while (rc == 0 && pos < len) {
        const char *nl = memchr(data + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - data) : len;
        rc = parse_line(&c, data + pos, end - pos);
        pos = end + 1;
    }
    return finish(&c, rc);
}

/* Feeds one block read from the file; partial lines wait in *line. */
static int feed_block(struct parse_ctx *c, struct buf *line, const char *s, size_t n)
{
    while (n > 0) {
        const char *nl = memchr(s, '\n', n);
        size_t take = nl ? (size_t)(nl - s) : n;
        int rc;
        if (nl && line->len == 0) {
            rc = parse_line(c, s, take);
        } else {
            rc = buf_append(line, s, take);
            if (rc == TS_TOOBIG) {
                c->line++;
                return fail(c, TS_TOOBIG, "line longer than %u bytes", PROMPTS_MAX_LINE);
            }
            if (rc)
                return fail(c, rc, "out of memory");
            if (nl) {
                rc = parse_line(c, line->data, line->len);
                buf_reset(line);
            }
        }
        if (rc)
            return rc;
        if (!nl)
            break;
        s += take + 1;
        n -= take + 1;
    }
    return 0;
}

int prompts_load(struct prompts *p, const char *path, unsigned flags, char *err, size_t errlen)
{
    struct parse_ctx c = {p, path, flags, err, errlen, 0};
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        if (err && errlen > 0)
            ts_errf(err, errlen, "%s: %s", path, strerror(e));
        return -e;
    }
    int rc = 0;
    char *block = ts_malloc(READ_CHUNK);
    struct buf line;
    /* room for a line of the maximum length and its '\r' */
    buf_init(&line, PROMPTS_MAX_LINE + 1);
    if (!block) {
        rc = -ENOMEM;
        if (err && errlen > 0)
            ts_errf(err, errlen, "%s: out of memory", path);
        goto out_close;
    }
    for (;;) {
        size_t n = fread(block, 1, READ_CHUNK, f);
        if (n > 0)
            rc = feed_block(&c, &line, block, n);
        if (rc || n < READ_CHUNK)
            break;
    }
    if (rc == 0 && ferror(f)) {
        rc = -EIO;
        if (err && errlen > 0)
            ts_errf(err, errlen, "%s: read error after line %llu", path,
                    (unsigned long long)c.line);
    } else if (rc == 0 && line.len > 0) {
        rc = parse_line(&c, line.data, line.len);
    }
out_close:
    buf_release(&line);
    ts_free(block);
    fclose(f);
    return finish(&c, rc);
}
