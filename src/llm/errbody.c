/*
 * errbody.c - the reason a server gave for an error, as one printable line
 * (see errbody.h).
 */
#include "llm/errbody.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/chars.h"
#include "base/utf8.h"

#define ELLIPSIS "..."

/* Output being written: len bytes so far; fit is the last character boundary
 * at which "..." still fits, where the text is cut when it overflows. */
struct line {
    char *out;
    size_t cap, len, fit;
    bool space; /* a space is due before the next visible character */
    bool full;
};

static void line_init(struct line *l, char *out, size_t cap)
{
    *l = (struct line){.out = out, .cap = cap};
    if (cap)
        out[0] = '\0';
}

/* Appends one character of n bytes (a pending space first). */
static void line_put(struct line *l, const char *c, size_t n)
{
    if (l->full || !l->cap)
        return;
    size_t need = n + (l->space && l->len);
    if (l->len + need > l->cap - 1) {
        /* cut where "..." fits; a buffer too small for it keeps what it holds */
        if (sizeof(ELLIPSIS) - 1 <= l->cap - 1) {
            memcpy(l->out + l->fit, ELLIPSIS, sizeof(ELLIPSIS) - 1);
            l->len = l->fit + sizeof(ELLIPSIS) - 1;
            l->out[l->len] = '\0';
        }
        l->full = true;
        return;
    }
    if (l->space && l->len)
        l->out[l->len++] = ' ';
    l->space = false;
    memcpy(l->out + l->len, c, n);
    l->len += n;
    l->out[l->len] = '\0';
    if (l->len + sizeof(ELLIPSIS) - 1 <= l->cap - 1)
        l->fit = l->len;
}

/* Is the code point at s (n bytes of valid UTF-8) a C1 control or a line separator? */
static bool is_wide_space(const unsigned char *s, size_t n)
{
    if (n == 2 && s[0] == 0xc2 && s[1] < 0xa0)
        return true; /* U+0080..U+009F, and U+0085 NEL */
    if (n == 2 && s[0] == 0xc2 && s[1] == 0xa0)
        return true; /* no-break space */
    return n == 3 && s[0] == 0xe2 && s[1] == 0x80 && (s[2] == 0xa8 || s[2] == 0xa9);
}

static size_t seq_len(unsigned char c)
{
    if (c >= 0xc2 && c <= 0xdf)
        return 2;
    if (c >= 0xe0 && c <= 0xef)
        return 3;
    if (c >= 0xf0 && c <= 0xf4)
        return 4;
    return 1;
}

static void line_text(struct line *l, const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len && !l->full) {
        if (u[i] < 0x80) {
            if (u[i] <= 0x20 || u[i] == 0x7f)
                l->space = true;
            else
                line_put(l, s + i, 1);
            i++;
            continue;
        }
        size_t n = seq_len(u[i]);
        if (n == 1 || n > len - i || utf8_invalid_at(u + i, n) != n) {
            line_put(l, "?", 1);
            i++;
            continue;
        }
        if (is_wide_space(u + i, n))
            l->space = true;
        else
            line_put(l, s + i, n);
        i += n;
    }
}

static void line_str(struct line *l, const char *s)
{
    line_text(l, s, strlen(s));
}

/* A JSON string's text and length, or NULL when v is not a non-empty string. */
static const char *jstr(const json_t *v, size_t *n)
{
    if (!json_is_string(v) || !json_string_length(v))
        return NULL;
    *n = json_string_length(v);
    return json_string_value(v);
}

/* Writes a scalar JSON value (string, number, true/false) as text. */
static bool line_scalar(struct line *l, const json_t *v)
{
    char num[32];
    size_t n;
    const char *s = jstr(v, &n);
    if (s) {
        line_text(l, s, n);
        return true;
    }
    if (json_is_integer(v))
        snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(num, sizeof(num), "%g", json_real_value(v));
    else if (json_is_boolean(v))
        snprintf(num, sizeof(num), "%s", json_is_true(v) ? "true" : "false");
    else
        return false;
    line_str(l, num);
    return true;
}

static void line_compact_json(struct line *l, const json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (s) {
        line_str(l, s);
        free(s);
    }
}

/* " (type: T, code: C)" with the parts that are given (NULL or "" = absent). */
static void line_type_code(struct line *l, const char *type, const char *code)
{
    type = type && type[0] ? type : NULL;
    code = code && code[0] ? code : NULL;
    if (!type && !code)
        return;
    l->space = l->len > 0;
    line_put(l, "(", 1);
    if (type) {
        line_str(l, "type:");
        l->space = true;
        line_str(l, type);
    }
    if (code) {
        if (type)
            line_put(l, ",", 1);
        l->space = type != NULL;
        line_str(l, "code:");
        l->space = true;
        line_str(l, code);
    }
    line_put(l, ")", 1);
}

/* "message (type: T, code: C)" from an OpenAI error object or a vLLM error body. */
static void line_error_object(struct line *l, const json_t *e)
{
    const json_t *msg = json_object_get(e, "message");
    const json_t *type = json_object_get(e, "type");
    const json_t *code = json_object_get(e, "code");
    char num[24] = "";
    if (!line_scalar(l, msg) && msg && !json_is_null(msg))
        line_compact_json(l, msg); /* a message that is an object or array */
    if (json_is_integer(code))
        snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(code));
    line_type_code(l, json_is_string(type) ? json_string_value(type) : NULL,
                   json_is_string(code) ? json_string_value(code) : num);
}

/* FastAPI validation errors: "body.messages: field required (+1 more)". */
static void line_detail_list(struct line *l, const json_t *list)
{
    const json_t *first = json_array_get(list, 0);
    const json_t *loc = json_object_get(first, "loc");
    const json_t *msg = json_object_get(first, "msg");
    if (!json_is_object(first) || !jstr(msg, &(size_t){0})) {
        line_compact_json(l, list);
        return;
    }
    if (json_is_array(loc) && json_array_size(loc)) {
        size_t i;
        const json_t *part;
        json_array_foreach(loc, i, part)
        {
            if (i)
                line_put(l, ".", 1);
            if (!line_scalar(l, part))
                line_put(l, "?", 1);
        }
        line_put(l, ":", 1);
        l->space = true;
    }
    line_scalar(l, msg);
    size_t more = json_array_size(list) - 1;
    if (more) {
        char tail[40];
        snprintf(tail, sizeof(tail), "(+%zu more)", more);
        l->space = true;
        line_str(l, tail);
    }
}

/* Writes what a JSON error document says; false if it is not one we know. */
static bool line_json(struct line *l, const json_t *root)
{
    if (!json_is_object(root))
        return false;
    const json_t *e = json_object_get(root, "error");
    const json_t *obj = json_object_get(root, "object");
    const json_t *detail = json_object_get(root, "detail");
    size_t n;
    if (json_is_object(e)) {
        line_error_object(l, e);
    } else if (jstr(e, &n)) {
        line_scalar(l, e);
    } else if (json_is_string(obj) && !strcmp(json_string_value(obj), "error")) {
        line_error_object(l, root);
    } else if (detail && !json_is_null(detail)) {
        if (json_is_array(detail) && json_array_size(detail))
            line_detail_list(l, detail);
        else if (!line_scalar(l, detail))
            line_compact_json(l, detail);
    } else if (jstr(json_object_get(root, "message"), &n)) {
        line_scalar(l, json_object_get(root, "message"));
    } else {
        return false;
    }
    return true;
}

size_t errbody_describe(const char *body, size_t len, char *out, size_t cap)
{
    struct line l;
    line_init(&l, out, cap);
    if (!cap || !body)
        return 0;
    while (len && chars_is_json_space(*body)) {
        body++;
        len--;
    }
    if (len && *body == '{' && len <= ERRBODY_MAX_PARSE) {
        json_error_t je;
        json_t *root = json_loadb(body, len, JSON_ALLOW_NUL, &je);
        bool known = root && line_json(&l, root);
        json_decref(root);
        if (known && l.len)
            return l.len;
        line_init(&l, out, cap);
    }
    line_text(&l, body, len);
    return l.len;
}

size_t errbody_format(const struct openai_chunk_error *e, char *out, size_t cap)
{
    struct line l;
    line_init(&l, out, cap);
    if (!cap || !e)
        return 0;
    if (e->message)
        line_str(&l, e->message);
    line_type_code(&l, e->type, e->code);
    return l.len;
}

size_t errbody_printable(const char *s, size_t len, char *out, size_t cap)
{
    struct line l;
    line_init(&l, out, cap);
    if (cap && s)
        line_text(&l, s, len);
    return l.len;
}
