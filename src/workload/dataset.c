#include "dataset.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "workload/prompts.h"
#include "base/buf.h"
#include "base/file.h"
#include "base/strdist.h"
#include "base/utf8.h"

#define ARENA_CHUNK ((size_t)1 << 20)
#define JOIN        "\n\n"
#define JOIN_LEN    2

enum role { ROLE_NONE = 0, ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT };

/* Where a ShareGPT message goes once the turns are laid out. */
enum slot { SLOT_DROP = 0, SLOT_SYSTEM, SLOT_USER, SLOT_ASSISTANT };

struct msg {
    const char *s;
    size_t n;
    enum role role;
    enum slot slot;
    size_t turn;
};

struct ctx {
    struct dataset *d;
    const char *name;
    const struct dataset_opts *o;
    char *err;
    size_t errlen;
    const char *data; /* the whole input, after the BOM */
    size_t len;
    uint64_t line; /* line of the record being read, from 1 */
    uint64_t col;  /* its column, 0 when none is given */
    char rec[32];  /* "[i]: " while reading element i of a JSON array */
    struct msg *msgs;
    size_t msgs_cap;
    double *ts; /* TRACE: the timestamp of each conversation */
    char *empty;
};

static const struct {
    const char *name;
    enum role role;
} role_names[] = {
    {"human", ROLE_USER},          {"user", ROLE_USER},         {"gpt", ROLE_ASSISTANT},
    {"assistant", ROLE_ASSISTANT}, {"chatgpt", ROLE_ASSISTANT}, {"bing", ROLE_ASSISTANT},
    {"bard", ROLE_ASSISTANT},      {"model", ROLE_ASSISTANT},   {"system", ROLE_SYSTEM},
};
#define N_ROLES (sizeof(role_names) / sizeof(role_names[0]))

static const char *const format_names[] = {"sharegpt", "csv", "trace"};

int dataset_format_parse(const char *s, enum dataset_format *out)
{
    for (size_t i = 0; s && i < sizeof(format_names) / sizeof(format_names[0]); i++) {
        if (strcmp(s, format_names[i]) == 0) {
            *out = (enum dataset_format)i;
            return 0;
        }
    }
    return -EINVAL;
}

const char *dataset_format_name(enum dataset_format f)
{
    if ((unsigned)f < sizeof(format_names) / sizeof(format_names[0]))
        return format_names[f];
    return "unknown";
}

/* ---- errors ----------------------------------------------------------------- */

/* Writes "name:line:col: [i]: message" (parts left out when unknown) into
 * the caller's error buffer and returns code. */
__attribute__((format(printf, 5, 0))) static int vfail_at(struct ctx *c, int code, uint64_t line,
                                                          uint64_t col, const char *fmt, va_list ap)
{
    if (!c->err || c->errlen == 0)
        return code;
    int n;
    if (line == 0)
        n = snprintf(c->err, c->errlen, "%s: %s", c->name, c->rec);
    else if (col == 0)
        n = snprintf(c->err, c->errlen, "%s:%llu: %s", c->name, (unsigned long long)line, c->rec);
    else
        n = snprintf(c->err, c->errlen, "%s:%llu:%llu: %s", c->name, (unsigned long long)line,
                     (unsigned long long)col, c->rec);
    if (n >= 0 && (size_t)n < c->errlen)
        vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
    return code;
}

__attribute__((format(printf, 5, 6))) static int fail_at(struct ctx *c, int code, uint64_t line,
                                                         uint64_t col, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail_at(c, code, line, col, fmt, ap);
    va_end(ap);
    return code;
}

/* An error about the record being read (c->line, c->col). */
__attribute__((format(printf, 3, 4))) static int fail(struct ctx *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail_at(c, code, c->line, c->col, fmt, ap);
    va_end(ap);
    return code;
}

/* 1-based line and byte column of offset off in c->data. */
static void position(const struct ctx *c, size_t off, uint64_t *line, uint64_t *col)
{
    uint64_t l = 1;
    size_t start = 0;
    for (size_t i = 0; i < off && i < c->len; i++) {
        if (c->data[i] == '\n') {
            l++;
            start = i + 1;
        }
    }
    *line = l;
    *col = off - start + 1;
}

/* ---- storage ---------------------------------------------------------------- */

/* n bytes from the dataset's arena; an error names the record. */
static int mem_get(struct ctx *c, size_t n, void **out)
{
    struct arena *a = &c->d->mem;
    if (n > DATASET_MAX_STORED - 16 || a->used > DATASET_MAX_STORED - 16 - n)
        return fail(c, TS_TOOBIG, "the dataset takes more than %zu bytes", DATASET_MAX_STORED);
    *out = arena_alloc(a, n);
    if (!*out)
        return fail(c, -ENOMEM, "out of memory");
    return 0;
}

/* The slot for the next conversation, zeroed; counted only when the caller
 * increments d->n. */
static int conv_next(struct ctx *c, struct dataset_conv **out)
{
    struct dataset *d = c->d;
    if (d->n >= DATASET_MAX_CONVS)
        return fail(c, TS_TOOBIG, "more than %u conversations", DATASET_MAX_CONVS);
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 256;
        if (cap > DATASET_MAX_CONVS)
            cap = DATASET_MAX_CONVS;
        struct dataset_conv *v = ts_realloc(d->convs, cap * sizeof(*v));
        if (!v)
            return fail(c, -ENOMEM, "out of memory");
        d->convs = v;
        if (d->format == DATASET_TRACE) {
            double *ts = ts_realloc(c->ts, cap * sizeof(*ts));
            if (!ts)
                return fail(c, -ENOMEM, "out of memory");
            c->ts = ts;
        }
        d->cap = cap;
    }
    *out = &d->convs[d->n];
    memset(*out, 0, sizeof(**out));
    return 0;
}

/* The per-turn arrays of cv for nt turns, zeroed, in one block. */
static int turns_alloc(struct ctx *c, struct dataset_conv *cv, size_t nt)
{
    const size_t per = 2 * sizeof(char *) + 2 * sizeof(size_t) + sizeof(uint32_t);
    void *p;
    int rc = mem_get(c, nt * per, &p);
    if (rc)
        return rc;
    memset(p, 0, nt * per);
    char *at = p;
    cv->user = (char **)(void *)at;
    at += nt * sizeof(char *);
    cv->assistant = (char **)(void *)at;
    at += nt * sizeof(char *);
    cv->user_len = (size_t *)(void *)at;
    at += nt * sizeof(size_t);
    cv->assistant_len = (size_t *)(void *)at;
    at += nt * sizeof(size_t);
    cv->output_tokens = (uint32_t *)(void *)at;
    cv->nturns = nt;
    return 0;
}

static int str_copy(struct ctx *c, const char *s, size_t n, char **out)
{
    void *p;
    int rc = mem_get(c, n + 1, &p);
    if (rc)
        return rc;
    memcpy(p, s, n);
    ((char *)p)[n] = '\0';
    *out = p;
    return 0;
}

/* ---- JSONL ------------------------------------------------------------------ */

/* Calls take() on each JSON line; blank lines and '#' lines are skipped. */
static int each_line(struct ctx *c, int (*take)(struct ctx *c, const json_t *obj))
{
    size_t pos = 0;
    while (pos < c->len) {
        const char *s = c->data + pos;
        const char *nl = memchr(s, '\n', c->len - pos);
        size_t n = nl ? (size_t)(nl - s) : c->len - pos;
        pos += n + 1;
        c->line++;
        if (n > 0 && s[n - 1] == '\r')
            n--;
        if (n > DATASET_MAX_RECORD)
            return fail(c, TS_TOOBIG, "line longer than %zu bytes", DATASET_MAX_RECORD);
        size_t i = 0;
        while (i < n && (s[i] == ' ' || s[i] == '\t'))
            i++;
        if (i == n || s[i] == '#')
            continue;
        json_error_t je;
        json_t *obj = json_loadb(s, n, JSON_REJECT_DUPLICATES, &je);
        if (!obj)
            return fail_at(c, TS_PARSE, c->line, (uint64_t)(je.column > 0 ? je.column : 1),
                           "invalid JSON: %s", je.text);
        int rc = take(c, obj);
        json_decref(obj);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- ShareGPT --------------------------------------------------------------- */

static enum role role_parse(const char *s, size_t n)
{
    for (size_t i = 0; i < N_ROLES; i++) {
        if (strlen(role_names[i].name) == n && strncasecmp(s, role_names[i].name, n) == 0)
            return role_names[i].role;
    }
    return ROLE_NONE;
}

/* Reads message i of the array under key into *out (its role and text). */
static int message_get(struct ctx *c, const char *key, size_t i, const json_t *m, struct msg *out)
{
    if (!json_is_object(m))
        return fail(c, TS_PARSE, "%s[%zu] must be an object, got %s", key, i, prompts_json_type(m));
    const json_t *from = json_object_get(m, "from");
    const json_t *role = json_object_get(m, "role");
    if (from && role)
        return fail(c, TS_PARSE, "%s[%zu]: give \"from\" or \"role\", not both", key, i);
    const char *rkey = from ? "from" : "role";
    const json_t *r = from ? from : role;
    if (!r)
        return fail(c, TS_PARSE, "%s[%zu] needs a \"from\" or \"role\" string", key, i);
    if (!json_is_string(r))
        return fail(c, TS_PARSE, "%s[%zu].%s must be a string, got %s", key, i, rkey,
                    prompts_json_type(r));
    out->role = role_parse(json_string_value(r), json_string_length(r));
    if (out->role == ROLE_NONE) {
        const char *cand[N_ROLES];
        for (size_t k = 0; k < N_ROLES; k++)
            cand[k] = role_names[k].name;
        const char *near =
            str_closest(json_string_value(r), json_string_length(r), cand, N_ROLES, 2);
        return fail(c, TS_PARSE,
                    "%s[%zu]: unknown role '%.64s'%s%s%s (known: human, user, gpt, assistant, "
                    "chatgpt, bing, bard, model, system)",
                    key, i, json_string_value(r), near ? " (did you mean '" : "", near ? near : "",
                    near ? "'?)" : "");
    }
    const json_t *value = json_object_get(m, "value");
    const json_t *content = json_object_get(m, "content");
    if (value && content)
        return fail(c, TS_PARSE, "%s[%zu]: give \"value\" or \"content\", not both", key, i);
    const char *tkey = value ? "value" : "content";
    const json_t *t = value ? value : content;
    if (!t)
        return fail(c, TS_PARSE, "%s[%zu] needs a \"value\" or \"content\" string", key, i);
    out->s = "";
    out->n = 0;
    if (json_is_string(t)) {
        out->s = json_string_value(t);
        out->n = json_string_length(t);
    } else if (!json_is_null(t)) {
        return fail(c, TS_PARSE, "%s[%zu].%s must be a string or null, got %s", key, i, tkey,
                    prompts_json_type(t));
    }
    return 0;
}

/* Decides where each message goes (see dataset.h); returns the turn count. */
static int lay_out(struct ctx *c, struct msg *m, size_t nm, size_t *nturns)
{
    bool started = false, open = false;
    size_t nt = 0;
    for (size_t i = 0; i < nm; i++) {
        m[i].slot = SLOT_DROP;
        if (m[i].n == 0)
            continue;
        switch (m[i].role) {
        case ROLE_SYSTEM:
            if (!started)
                m[i].slot = SLOT_SYSTEM;
            break;
        case ROLE_USER:
            started = true;
            if (nt == 0 || !open) {
                if (nt == DATASET_MAX_TURNS)
                    return fail(c, TS_TOOBIG, "more than %u turns", DATASET_MAX_TURNS);
                nt++;
                open = true;
            }
            m[i].slot = SLOT_USER;
            m[i].turn = nt - 1;
            break;
        case ROLE_ASSISTANT:
            started = true;
            if (nt > 0) {
                m[i].slot = SLOT_ASSISTANT;
                m[i].turn = nt - 1;
                open = false;
            }
            break;
        case ROLE_NONE:
            break;
        }
    }
    *nturns = nt;
    return 0;
}

/* Appends s[0..n) to the string at *dst of *len bytes, after "\n\n" when it
 * is not empty (room was counted beforehand). */
static void join(char *dst, size_t *len, const char *s, size_t n)
{
    if (*len > 0) {
        memcpy(dst + *len, JOIN, JOIN_LEN);
        *len += JOIN_LEN;
    }
    memcpy(dst + *len, s, n);
    *len += n;
    dst[*len] = '\0';
}

static void grow_len(size_t *len, size_t n)
{
    *len += (*len > 0 ? JOIN_LEN : 0) + n;
}

/* Builds conversation cv from the laid-out messages. */
static int conv_build(struct ctx *c, struct dataset_conv *cv, const struct msg *m, size_t nm,
                      size_t nt)
{
    int rc = turns_alloc(c, cv, nt);
    if (rc)
        return rc;
    /* first the lengths, then one allocation per string, then the copies */
    size_t sys_len = 0;
    for (size_t i = 0; i < nm; i++) {
        if (m[i].slot == SLOT_SYSTEM)
            grow_len(&sys_len, m[i].n);
        else if (m[i].slot == SLOT_USER)
            grow_len(&cv->user_len[m[i].turn], m[i].n);
        else if (m[i].slot == SLOT_ASSISTANT)
            grow_len(&cv->assistant_len[m[i].turn], m[i].n);
    }
    void *p;
    if (sys_len > 0) {
        if ((rc = mem_get(c, sys_len + 1, &p)))
            return rc;
        cv->system = p;
    }
    for (size_t t = 0; t < nt; t++) {
        if ((rc = mem_get(c, cv->user_len[t] + 1, &p)))
            return rc;
        cv->user[t] = p;
        cv->user_len[t] = 0;
        if (cv->assistant_len[t] > 0) {
            if ((rc = mem_get(c, cv->assistant_len[t] + 1, &p)))
                return rc;
            cv->assistant[t] = p;
            cv->assistant_len[t] = 0;
        }
    }
    for (size_t i = 0; i < nm; i++) {
        size_t t = m[i].turn;
        if (m[i].slot == SLOT_SYSTEM)
            join(cv->system, &cv->system_len, m[i].s, m[i].n);
        else if (m[i].slot == SLOT_USER)
            join(cv->user[t], &cv->user_len[t], m[i].s, m[i].n);
        else if (m[i].slot == SLOT_ASSISTANT)
            join(cv->assistant[t], &cv->assistant_len[t], m[i].s, m[i].n);
    }
    return 0;
}

static int take_sharegpt(struct ctx *c, const json_t *obj)
{
    if (!json_is_object(obj))
        return fail(c, TS_PARSE, "expected a JSON object, got %s", prompts_json_type(obj));
    static const char *const keys[] = {"conversations", "conversation", "messages"};
    const char *key = NULL;
    const json_t *conv = NULL;
    for (size_t k = 0; k < 3; k++) {
        const json_t *v = json_object_get(obj, keys[k]);
        if (!v)
            continue;
        if (conv)
            return fail(c, TS_PARSE, "give one of \"%s\" and \"%s\", not both", key, keys[k]);
        conv = v;
        key = keys[k];
    }
    if (!conv)
        return fail(c, TS_PARSE,
                    "needs a \"conversations\" array (or \"conversation\", \"messages\")");
    if (!json_is_array(conv))
        return fail(c, TS_PARSE, "\"%s\" must be an array, got %s", key, prompts_json_type(conv));
    size_t nm = json_array_size(conv);
    if (nm > c->msgs_cap) {
        struct msg *v = ts_realloc(c->msgs, nm * sizeof(*v));
        if (!v)
            return fail(c, -ENOMEM, "out of memory");
        c->msgs = v;
        c->msgs_cap = nm;
    }
    size_t i;
    const json_t *m;
    json_array_foreach(conv, i, m)
    {
        int rc = message_get(c, key, i, m, &c->msgs[i]);
        if (rc)
            return rc;
    }
    size_t nt = 0;
    int rc = lay_out(c, c->msgs, nm, &nt);
    if (rc)
        return rc;
    if (nt == 0) {
        c->d->skipped++;
        return 0;
    }
    struct dataset_conv *cv;
    if ((rc = conv_next(c, &cv)))
        return rc;
    if ((rc = conv_build(c, cv, c->msgs, nm, nt)))
        return rc;
    c->d->n++;
    return 0;
}

/* A light scan of a JSON array: finds each element's bytes without
 * building the whole document. */
struct scan {
    const char *p;
    size_t len, pos;
    size_t mark; /* offset where line was counted to */
    uint64_t line;
    size_t line_start;
};

/* Moves the line count of w forward to offset off (off >= w->off) and makes
 * it the position of the record being read. */
static void scan_at(struct ctx *c, struct scan *w, size_t off)
{
    const char *q = c->data + w->mark, *end = c->data + off;
    while (q < end && (q = memchr(q, '\n', (size_t)(end - q)))) {
        w->line++;
        w->line_start = (size_t)(q - c->data) + 1;
        q++;
    }
    w->mark = off;
    c->line = w->line;
    c->col = off - w->line_start + 1;
}

static bool is_ws(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n';
}

static void skip_ws(struct scan *s)
{
    while (s->pos < s->len) {
        if (!is_ws(s->p[s->pos]))
            break;
        s->pos++;
    }
}

/* The end of the JSON string starting at p[i] == '"' (past its closing
 * quote), or len when it is not closed. */
static size_t string_end(const char *p, size_t len, size_t i)
{
    for (i++; i < len; i++) {
        if (p[i] == '\\')
            i++;
        else if (p[i] == '"')
            return i + 1;
    }
    return len;
}

/* The end of the value starting at s->pos. Exact for valid JSON; for
 * anything else jansson gets a slice that it rejects with a message. */
static size_t value_end(const struct scan *s)
{
    const char *p = s->p;
    size_t i = s->pos;
    char ch = p[i];
    if (ch == '"')
        return string_end(p, s->len, i);
    if (ch == '{' || ch == '[') {
        size_t depth = 0;
        while (i < s->len) {
            ch = p[i];
            if (ch == '"') {
                i = string_end(p, s->len, i);
                continue;
            }
            if (ch == '{' || ch == '[') {
                depth++;
            } else if (ch == '}' || ch == ']') {
                if (--depth == 0)
                    return i + 1;
            }
            i++;
        }
        return s->len;
    }
    while (i < s->len && p[i] != ',' && p[i] != ']' && !is_ws(p[i]))
        i++;
    return i;
}

static int sharegpt_array(struct ctx *c)
{
    struct scan s = {.p = c->data, .len = c->len, .line = 1};
    skip_ws(&s);
    s.pos++; /* the '[' */
    skip_ws(&s);
    if (s.pos < s.len && s.p[s.pos] == ']') {
        s.pos++;
    } else {
        for (size_t idx = 0;; idx++) {
            if (s.pos == s.len) {
                scan_at(c, &s, s.len);
                return fail(c, TS_PARSE, "the array is not closed (expected a value)");
            }
            size_t start = s.pos;
            size_t end = value_end(&s);
            scan_at(c, &s, start);
            snprintf(c->rec, sizeof(c->rec), "[%zu]: ", idx);
            if (end - start > DATASET_MAX_RECORD)
                return fail(c, TS_TOOBIG, "element longer than %zu bytes", DATASET_MAX_RECORD);
            json_error_t je;
            json_t *obj =
                json_loadb(s.p + start, end - start, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
            if (!obj) {
                uint64_t line, col;
                size_t off = start + (je.position > 0 ? (size_t)je.position - 1 : 0);
                position(c, off < s.len ? off : s.len, &line, &col);
                return fail_at(c, TS_PARSE, line, col, "invalid JSON: %s", je.text);
            }
            int rc = take_sharegpt(c, obj);
            json_decref(obj);
            if (rc)
                return rc;
            c->rec[0] = '\0';
            s.pos = end;
            skip_ws(&s);
            if (s.pos < s.len && s.p[s.pos] == ',') {
                s.pos++;
                skip_ws(&s);
                if (s.pos < s.len && s.p[s.pos] == ']') {
                    scan_at(c, &s, s.pos);
                    return fail(c, TS_PARSE, "a ',' before ']' (expected a value)");
                }
                continue;
            }
            if (s.pos < s.len && s.p[s.pos] == ']') {
                s.pos++;
                break;
            }
            scan_at(c, &s, s.pos);
            if (s.pos == s.len)
                return fail(c, TS_PARSE, "the array is not closed (expected ',' or ']')");
            return fail(c, TS_PARSE, "expected ',' or ']' after element [%zu]", idx);
        }
    }
    skip_ws(&s);
    if (s.pos < s.len) {
        scan_at(c, &s, s.pos);
        return fail(c, TS_PARSE, "unexpected data after the array");
    }
    return 0;
}

static int load_sharegpt(struct ctx *c)
{
    struct scan s = {.p = c->data, .len = c->len};
    skip_ws(&s);
    if (s.pos < s.len && s.p[s.pos] == '[')
        return sharegpt_array(c);
    return each_line(c, take_sharegpt);
}

/* ---- TRACE ------------------------------------------------------------------ */

/* An optional integer from 1 to DATASET_MAX_TOKENS under key (0 if absent). */
static int tokens_get(struct ctx *c, const json_t *obj, const char *key, uint32_t *out)
{
    const json_t *v = json_object_get(obj, key);
    *out = 0;
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 1 ||
        json_integer_value(v) > (json_int_t)DATASET_MAX_TOKENS)
        return fail(c, TS_PARSE, "\"%s\" must be an integer from 1 to %u", key, DATASET_MAX_TOKENS);
    *out = (uint32_t)json_integer_value(v);
    return 0;
}

static int take_trace(struct ctx *c, const json_t *obj)
{
    if (!json_is_object(obj))
        return fail(c, TS_PARSE, "expected a JSON object, got %s", prompts_json_type(obj));
    const json_t *ts = json_object_get(obj, "timestamp");
    if (!ts)
        return fail(c, TS_PARSE, "needs a \"timestamp\" (milliseconds)");
    double ms = json_is_number(ts) ? json_number_value(ts) : -1;
    if (!(ms >= 0 && ms <= DATASET_MAX_TIMESTAMP_MS))
        return fail(c, TS_PARSE, "\"timestamp\" must be a number of milliseconds from 0 to %.0f",
                    DATASET_MAX_TIMESTAMP_MS);
    const json_t *prompt = json_object_get(obj, "prompt");
    uint32_t input, output;
    int rc = tokens_get(c, obj, "input_length", &input);
    if (rc == 0)
        rc = tokens_get(c, obj, "output_length", &output);
    if (rc)
        return rc;
    if (prompt && input)
        return fail(c, TS_PARSE, "give \"prompt\" or \"input_length\", not both");
    if (!prompt && !input)
        return fail(c, TS_PARSE, "needs \"prompt\" (a string) or \"input_length\" (tokens)");
    if (prompt && !json_is_string(prompt))
        return fail(c, TS_PARSE, "\"prompt\" must be a string, got %s", prompts_json_type(prompt));
    if (prompt && json_string_length(prompt) == 0)
        return fail(c, TS_PARSE, "\"prompt\" is empty");
    const json_t *hash = json_object_get(obj, "hash_ids");
    size_t nhash = 0;
    if (hash) {
        if (!json_is_array(hash))
            return fail(c, TS_PARSE, "\"hash_ids\" must be an array, got %s",
                        prompts_json_type(hash));
        nhash = json_array_size(hash);
        if (nhash > DATASET_MAX_HASH_IDS)
            return fail(c, TS_TOOBIG, "\"hash_ids\" has %zu ids, more than %u", nhash,
                        DATASET_MAX_HASH_IDS);
        size_t i;
        const json_t *h;
        json_array_foreach(hash, i, h)
        {
            if (!json_is_integer(h) || json_integer_value(h) < 0)
                return fail(c, TS_PARSE, "\"hash_ids\"[%zu] must be an integer >= 0", i);
        }
    }

    struct dataset_conv *cv;
    if ((rc = conv_next(c, &cv)) || (rc = turns_alloc(c, cv, 1)))
        return rc;
    if (prompt) {
        rc = str_copy(c, json_string_value(prompt), json_string_length(prompt), &cv->user[0]);
        if (rc)
            return rc;
        cv->user_len[0] = json_string_length(prompt);
    } else {
        if (!c->empty && (rc = str_copy(c, "", 0, &c->empty)))
            return rc;
        cv->user[0] = c->empty;
        cv->input_tokens = input;
    }
    cv->output_tokens[0] = output;
    if (nhash > 0) {
        void *p;
        if ((rc = mem_get(c, nhash * sizeof(uint64_t), &p)))
            return rc;
        cv->hash_ids = p;
        cv->nhash = nhash;
        for (size_t i = 0; i < nhash; i++)
            cv->hash_ids[i] = (uint64_t)json_integer_value(json_array_get(hash, i));
    }
    c->ts[c->d->n] = ms;
    c->d->n++;
    return 0;
}

struct ts_order {
    double ms;
    size_t i;
};

static int ts_order_cmp(const void *a, const void *b)
{
    const struct ts_order *x = a, *y = b;
    if (x->ms != y->ms)
        return x->ms < y->ms ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* Sorts the requests by timestamp (stably) and sets their offsets. */
static int trace_order(struct ctx *c)
{
    struct dataset *d = c->d;
    if (d->n == 0)
        return 0;
    double scale = c->o->time_scale > 0 ? c->o->time_scale : 1.0;
    struct ts_order *ord = ts_malloc(d->n * sizeof(*ord));
    struct dataset_conv *v = ts_malloc(d->n * sizeof(*v));
    int rc = 0;
    if (!ord || !v) {
        rc = fail_at(c, -ENOMEM, 0, 0, "out of memory");
        goto out_free;
    }
    for (size_t i = 0; i < d->n; i++)
        ord[i] = (struct ts_order){c->ts[i], i};
    qsort(ord, d->n, sizeof(*ord), ts_order_cmp);
    for (size_t k = 0; k < d->n; k++) {
        double ns = (ord[k].ms - ord[0].ms) * 1e6 * scale;
        if (!(ns < 9.2e18)) {
            rc = fail_at(c, TS_TOOBIG, 0, 0,
                         "the trace lasts more than 9.2e18 ns after time_scale %g", scale);
            goto out_free;
        }
        v[k] = d->convs[ord[k].i];
        v[k].at_ns = (uint64_t)(ns + 0.5);
    }
    ts_free(d->convs);
    d->convs = v;
    d->cap = d->n;
    v = NULL;
out_free:
    ts_free(v);
    ts_free(ord);
    return rc;
}

static int load_trace(struct ctx *c)
{
    int rc = each_line(c, take_trace);
    return rc ? rc : trace_order(c);
}

/* ---- CSV -------------------------------------------------------------------- */

struct csv_field {
    size_t off, len;
    bool quoted;
};

struct csv {
    const char *p;
    size_t len, pos;
    uint64_t line; /* line at pos */
    size_t line_start;
    struct csv_field *f;
    size_t nf, cap;
};

static void csv_lines(struct csv *s, size_t from, size_t to)
{
    for (const char *q = s->p + from; (q = memchr(q, '\n', (size_t)(s->p + to - q)));) {
        s->line++;
        s->line_start = (size_t)(q - s->p) + 1;
        q++;
    }
}

static int csv_push(struct ctx *c, struct csv *s, size_t off, size_t len, bool quoted)
{
    if (s->nf == DATASET_MAX_COLUMNS)
        return fail(c, TS_TOOBIG, "more than %u fields", DATASET_MAX_COLUMNS);
    if (s->nf == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        struct csv_field *v = ts_realloc(s->f, cap * sizeof(*v));
        if (!v)
            return fail(c, -ENOMEM, "out of memory");
        s->f = v;
        s->cap = cap;
    }
    s->f[s->nf++] = (struct csv_field){off, len, quoted};
    return 0;
}

/* Reads the record at s->pos into s->f; c->line is set to its first line. */
static int csv_record(struct ctx *c, struct csv *s)
{
    const char *p = s->p;
    size_t start = s->pos;
    int rc;
    c->line = s->line;
    c->col = 0;
    s->nf = 0;
    for (;;) {
        if (s->pos < s->len && p[s->pos] == '"') {
            uint64_t qline = s->line, qcol = s->pos - s->line_start + 1;
            size_t from = ++s->pos;
            for (;;) {
                const char *q = memchr(p + s->pos, '"', s->len - s->pos);
                if (!q)
                    return fail_at(c, TS_PARSE, qline, qcol, "a quoted field is not closed");
                s->pos = (size_t)(q - p) + 1;
                if (s->pos < s->len && p[s->pos] == '"') {
                    s->pos++;
                    continue;
                }
                break;
            }
            csv_lines(s, from, s->pos);
            if ((rc = csv_push(c, s, from, s->pos - 1 - from, true)))
                return rc;
            if (s->pos == s->len)
                break;
            char ch = p[s->pos];
            if (ch == ',') {
                s->pos++;
                continue;
            }
            if (ch == '\n' || (ch == '\r' && s->pos + 1 < s->len && p[s->pos + 1] == '\n')) {
                s->pos += ch == '\n' ? 1 : 2;
                s->line++;
                s->line_start = s->pos;
                break;
            }
            return fail_at(c, TS_PARSE, s->line, s->pos - s->line_start + 1,
                           "unexpected character after a closing quote (expected ',' or the end "
                           "of the line)");
        }
        size_t from = s->pos;
        while (s->pos < s->len && p[s->pos] != ',' && p[s->pos] != '\n')
            s->pos++;
        size_t end = s->pos;
        bool more = s->pos < s->len && p[s->pos] == ',';
        if (!more && end > from && p[end - 1] == '\r')
            end--;
        if ((rc = csv_push(c, s, from, end - from, false)))
            return rc;
        if (s->pos == s->len)
            break;
        s->pos++;
        if (!more) {
            s->line++;
            s->line_start = s->pos;
            break;
        }
    }
    if (s->pos - start > DATASET_MAX_RECORD)
        return fail(c, TS_TOOBIG, "record longer than %zu bytes", DATASET_MAX_RECORD);
    return 0;
}

/* Copies field f, with '""' turned into '"', to dst (room for f->len + 1);
 * returns the length. */
static size_t csv_unescape(const struct csv *s, const struct csv_field *f, char *dst)
{
    const char *src = s->p + f->off;
    size_t n = 0;
    for (size_t i = 0; i < f->len; i++) {
        dst[n++] = src[i];
        if (f->quoted && src[i] == '"')
            i++;
    }
    dst[n] = '\0';
    return n;
}

static bool csv_blank(const struct csv *s)
{
    return s->nf == 1 && !s->f[0].quoted && s->f[0].len == 0;
}

/* The header names, unescaped, NUL-terminated, in one block (*block). */
static int csv_names(struct ctx *c, const struct csv *s, char **block, const char ***names)
{
    size_t total = 0;
    for (size_t i = 0; i < s->nf; i++)
        total += s->f[i].len + 1;
    *block = ts_malloc(total ? total : 1);
    *names = ts_malloc(s->nf * sizeof(**names));
    if (!*block || !*names)
        return fail(c, -ENOMEM, "out of memory");
    char *at = *block;
    for (size_t i = 0; i < s->nf; i++) {
        (*names)[i] = at;
        at += csv_unescape(s, &s->f[i], at) + 1;
    }
    return 0;
}

/* The index of column want in the header, or an error naming the columns. */
static int csv_column(struct ctx *c, const char *const *names, size_t nf, const char *want,
                      size_t *out)
{
    size_t found = 0;
    for (size_t i = 0; i < nf; i++) {
        if (strcmp(names[i], want) == 0) {
            if (found++ == 0)
                *out = i;
        }
    }
    if (found == 1)
        return 0;
    if (found > 1)
        return fail(c, TS_PARSE, "column '%s' appears %zu times in the header", want, found);
    struct buf list;
    buf_init(&list, 512);
    for (size_t i = 0; i < nf; i++) {
        if (buf_appendf(&list, "%s%s", i ? ", " : "", names[i]))
            break;
    }
    const char *near = str_closest(want, strlen(want), names, nf, 2);
    int rc =
        fail(c, TS_PARSE, "no column '%s'%s%s%s; the header has: %s", want,
             near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "", buf_cstr(&list));
    buf_release(&list);
    return rc;
}

/* Reads an output token count: empty (0) or 1..DATASET_MAX_TOKENS in digits. */
static int csv_tokens(struct ctx *c, const struct csv *s, const struct csv_field *f,
                      const char *col, uint32_t *out)
{
    const char *v = s->p + f->off;
    uint64_t n = 0;
    bool ok = true;
    for (size_t i = 0; i < f->len && ok; i++) {
        if (v[i] < '0' || v[i] > '9')
            ok = false;
        else if ((n = n * 10 + (uint64_t)(v[i] - '0')) > DATASET_MAX_TOKENS)
            ok = false;
    }
    if (f->len > 0 && (!ok || n == 0))
        return fail(c, TS_PARSE, "column '%s' must be an integer from 1 to %u, got '%.*s'", col,
                    DATASET_MAX_TOKENS, (int)(f->len > 32 ? 32 : f->len), v);
    *out = (uint32_t)n;
    return 0;
}

static int csv_row(struct ctx *c, const struct csv *s, size_t pcol, size_t ocol, const char *oname)
{
    const struct csv_field *f = &s->f[pcol];
    uint32_t output = 0;
    int rc;
    if (ocol != SIZE_MAX && (rc = csv_tokens(c, s, &s->f[ocol], oname, &output)))
        return rc;
    if (f->len == 0) {
        c->d->skipped++;
        return 0;
    }
    struct dataset_conv *cv;
    void *p;
    if ((rc = conv_next(c, &cv)) || (rc = turns_alloc(c, cv, 1)) ||
        (rc = mem_get(c, f->len + 1, &p)))
        return rc;
    cv->user[0] = p;
    cv->user_len[0] = csv_unescape(s, f, p);
    cv->output_tokens[0] = output;
    c->d->n++;
    return 0;
}

static int load_csv(struct ctx *c)
{
    struct csv s = {.p = c->data, .len = c->len, .line = 1};
    char *block = NULL;
    const char **names = NULL;
    int rc = 0;
    do {
        if (s.pos == s.len) {
            rc = fail_at(c, TS_PARSE, 0, 0, "no header row (the file is empty)");
            goto out_free;
        }
        if ((rc = csv_record(c, &s)))
            goto out_free;
    } while (csv_blank(&s));
    const char *pname = c->o->column ? c->o->column : "prompt";
    const char *oname = c->o->output_column;
    size_t pcol, ocol = SIZE_MAX, nf = s.nf;
    if ((rc = csv_names(c, &s, &block, &names)) || (rc = csv_column(c, names, nf, pname, &pcol)))
        goto out_free;
    if (oname) {
        if ((rc = csv_column(c, names, nf, oname, &ocol)))
            goto out_free;
    } else {
        for (size_t i = 0; i < nf; i++) {
            if (strcmp(names[i], "max_tokens") == 0) {
                oname = "max_tokens";
                if ((rc = csv_column(c, names, nf, oname, &ocol)))
                    goto out_free;
                break;
            }
        }
    }
    while (s.pos < s.len) {
        if ((rc = csv_record(c, &s)))
            goto out_free;
        if (csv_blank(&s))
            continue;
        if (s.nf != nf) {
            rc = fail(c, TS_PARSE, "%zu field%s, the header has %zu", s.nf, s.nf == 1 ? "" : "s",
                      nf);
            goto out_free;
        }
        if ((rc = csv_row(c, &s, pcol, ocol, oname)))
            goto out_free;
    }
out_free:
    ts_free(names);
    ts_free(block);
    ts_free(s.f);
    return rc;
}

/* ---- entry points ----------------------------------------------------------- */

static void dataset_empty(struct dataset *d, enum dataset_format f)
{
    memset(d, 0, sizeof(*d));
    d->format = f;
    arena_init(&d->mem, ARENA_CHUNK, DATASET_MAX_STORED);
}

void dataset_release(struct dataset *d)
{
    enum dataset_format f = d->format;
    ts_free(d->convs);
    arena_release(&d->mem);
    dataset_empty(d, f);
}

int dataset_load_mem(struct dataset *d, const char *name, const char *data, size_t len,
                     enum dataset_format f, const struct dataset_opts *o, char *err, size_t errlen)
{
    static const struct dataset_opts defaults = {0};
    struct ctx c = {
        .d = d,
        .name = name ? name : "<memory>",
        .o = o ? o : &defaults,
        .err = err,
        .errlen = err ? errlen : 0,
    };
    dataset_empty(d, f);
    if (c.err && c.errlen)
        c.err[0] = '\0';
    int rc;
    if ((unsigned)f > DATASET_TRACE) {
        rc = fail_at(&c, -EINVAL, 0, 0, "unknown dataset format %d", (int)f);
        goto out;
    }
    if (!isfinite(c.o->time_scale) || c.o->time_scale < 0) {
        rc = fail_at(&c, -EINVAL, 0, 0, "time_scale must be a finite number >= 0, got %g",
                     c.o->time_scale);
        goto out;
    }
    if (len > DATASET_MAX_FILE) {
        rc = fail_at(&c, TS_TOOBIG, 0, 0, "larger than %zu bytes", DATASET_MAX_FILE);
        goto out;
    }
    if (len >= 3 && memcmp(data, "\xef\xbb\xbf", 3) == 0) {
        data += 3;
        len -= 3;
    }
    c.data = data;
    c.len = len;
    size_t bad = len ? utf8_invalid_at(data, len) : 0;
    if (bad < len) {
        uint64_t line, col;
        position(&c, bad, &line, &col);
        rc = fail_at(&c, TS_PARSE, line, col, "%s", data[bad] ? "invalid UTF-8" : "NUL byte");
        goto out;
    }
    if (len == 0) {
        rc = 0;
    } else if (f == DATASET_SHAREGPT) {
        rc = load_sharegpt(&c);
    } else if (f == DATASET_CSV) {
        rc = load_csv(&c);
    } else {
        rc = load_trace(&c);
    }
    c.rec[0] = '\0';
    if (rc == 0 && d->n == 0) {
        if (d->skipped)
            rc = fail_at(&c, TS_PARSE, 0, 0,
                         "no conversations (%zu record%s without a user turn skipped)", d->skipped,
                         d->skipped == 1 ? "" : "s");
        else
            rc = fail_at(&c, TS_PARSE, 0, 0, "no conversations (the file is empty)");
    }
out:
    ts_free(c.msgs);
    ts_free(c.ts);
    if (rc)
        dataset_release(d);
    return rc;
}

int dataset_load(struct dataset *d, const char *path, enum dataset_format f,
                 const struct dataset_opts *o, char *err, size_t errlen)
{
    char *data = NULL;
    size_t len = 0;
    dataset_empty(d, f);
    int rc = file_read_all(path, DATASET_MAX_FILE, &data, &len, err, err ? errlen : 0);
    if (rc)
        return rc;
    rc = dataset_load_mem(d, path, data, len, f, o, err, errlen);
    ts_free(data);
    return rc;
}
