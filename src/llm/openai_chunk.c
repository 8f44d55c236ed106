#include "openai_chunk.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/chars.h"
#include "base/base64.h"
#include "base/alloc.h"
#include "base/utf8.h"
#include "llm/json_simd.h"

#include <yajl/yajl_parse.h>

/*
 * Where a field sits, printed only when an error message is written:
 * a[i]b[j]c, with a negative index left out. Keeps the happy path free of
 * string formatting.
 */
struct where {
    const char *a;
    long i;
    const char *b;
    long j;
    const char *c;
};

#define WHERE_TOP ((struct where){"", -1, "", -1, ""})

static void fp_hash_ready(void);

void openai_decoder_init(struct openai_decoder *d)
{
    memset(d, 0, sizeof(*d));
    fp_hash_ready();
}

void openai_decoder_release(struct openai_decoder *d)
{
    if (d->root)
        json_decref(d->root);
    ts_free(d->choices);
    ts_free(d->calls);
    ts_free(d->embs);
    ts_free(d->floats);
    ts_free(d->arena);
#if TS_HAVE_SIMDJSON
    json_simd_free(d->simd);
#endif
    memset(d, 0, sizeof(*d));
}

const char *openai_decoder_errmsg(const struct openai_decoder *d)
{
    return d->err;
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "?";
}

static int fail(struct openai_decoder *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int fail(struct openai_decoder *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->err, sizeof(d->err), fmt, ap);
    va_end(ap);
    return TS_PARSE;
}

static int wrong_type(struct openai_decoder *d, struct where w, const char *key, const char *want,
                      const json_t *got)
{
    char ib[24] = "", jb[24] = "";
    if (w.i >= 0)
        snprintf(ib, sizeof(ib), "[%ld]", w.i);
    if (w.j >= 0)
        snprintf(jb, sizeof(jb), "[%ld]", w.j);
    return fail(d, "%s%s%s%s%s%s: expected %s, got %s", w.a, ib, w.b, jb, w.c, key, want,
                type_name(got));
}

/* Optional string field: absent or null gives NULL. */
static int get_str(struct openai_decoder *d, const json_t *obj, const char *key, struct where w,
                   const char **s, size_t *len)
{
    const json_t *v = json_object_get(obj, key);
    *s = NULL;
    if (len)
        *len = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return wrong_type(d, w, key, "a string or null", v);
    *s = json_string_value(v);
    if (len)
        *len = json_string_length(v);
    return 0;
}

static int int_value(const json_t *v, int64_t *out)
{
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_real(v)) {
        double x = json_real_value(v);
        if (x == floor(x) && x >= -9.2e18 && x <= 9.2e18) {
            *out = (int64_t)x;
            return 0;
        }
    }
    return -1;
}

/* Optional integer field (an integral real like 12.0 is accepted):
 * absent or null leaves -1. */
static int get_int(struct openai_decoder *d, const json_t *obj, const char *key, struct where w,
                   int64_t *out)
{
    const json_t *v = json_object_get(obj, key);
    *out = -1;
    if (!v || json_is_null(v))
        return 0;
    if (int_value(v, out) != 0)
        return wrong_type(d, w, key, "an integer or null", v);
    return 0;
}

/* Optional object field: absent or null gives NULL. */
static int get_obj(struct openai_decoder *d, const json_t *obj, const char *key, struct where w,
                   const json_t **out)
{
    const json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_object(v))
        return wrong_type(d, w, key, "an object or null", v);
    *out = v;
    return 0;
}

/* Optional array field: absent or null gives NULL. */
static int get_arr(struct openai_decoder *d, const json_t *obj, const char *key, struct where w,
                   const json_t **out)
{
    const json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_array(v))
        return wrong_type(d, w, key, "an array or null", v);
    *out = v;
    return 0;
}

/* Grows *p to hold need elements of size elem. */
static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 4;
    while (n < need)
        n = n > SIZE_MAX / 4 ? need : n * 2;
    if (n > SIZE_MAX / elem)
        return -ENOMEM;
    void *q = ts_realloc(*p, n * elem);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = n;
    return 0;
}

static int decode_usage(struct openai_decoder *d, const json_t *u, struct openai_usage *out)
{
    struct where w = {"usage.", -1, "", -1, ""};
    int rc;
    out->present = true;
    if ((rc = get_int(d, u, "prompt_tokens", w, &out->prompt_tokens)) ||
        (rc = get_int(d, u, "completion_tokens", w, &out->completion_tokens)) ||
        (rc = get_int(d, u, "total_tokens", w, &out->total_tokens)))
        return rc;
    const json_t *det;
    if ((rc = get_obj(d, u, "prompt_tokens_details", w, &det)))
        return rc;
    if (det) {
        w.a = "usage.prompt_tokens_details.";
        if ((rc = get_int(d, det, "cached_tokens", w, &out->cached_tokens)))
            return rc;
        w.a = "usage.";
    }
    if ((rc = get_obj(d, u, "completion_tokens_details", w, &det)))
        return rc;
    if (det) {
        w.a = "usage.completion_tokens_details.";
        if ((rc = get_int(d, det, "reasoning_tokens", w, &out->reasoning_tokens)))
            return rc;
    }
    return 0;
}

static int decode_error(struct openai_decoder *d, const json_t *e, const char *prefix,
                        struct openai_chunk_error *out)
{
    struct where w = {prefix, -1, "", -1, ""};
    int rc;
    if ((rc = get_str(d, e, "message", w, &out->message, NULL)) ||
        (rc = get_str(d, e, "type", w, &out->type, NULL)) ||
        (rc = get_str(d, e, "param", w, &out->param, NULL)))
        return rc;
    const json_t *code = json_object_get(e, "code");
    out->code = NULL;
    out->code_num = -1;
    if (!code || json_is_null(code))
        return 0;
    if (json_is_string(code)) {
        out->code = json_string_value(code);
        return 0;
    }
    if (json_is_integer(code)) {
        out->code_num = (int64_t)json_integer_value(code);
        snprintf(d->code_buf, sizeof(d->code_buf), "%lld", (long long)out->code_num);
        out->code = d->code_buf;
        return 0;
    }
    return wrong_type(d, w, "code", "a string, an integer or null", code);
}

static int decode_tool_call(struct openai_decoder *d, const json_t *tc, long ci, long ti,
                            struct openai_tool_call *out)
{
    struct where w = {"choices", ci, ".delta.tool_calls", ti, ""};
    if (!json_is_object(tc))
        return wrong_type(d, w, "", "an object", tc);
    w.c = ".";
    int rc;
    if ((rc = get_int(d, tc, "index", w, &out->index)) ||
        (rc = get_str(d, tc, "id", w, &out->id, NULL)) ||
        (rc = get_str(d, tc, "type", w, &out->type, NULL)))
        return rc;
    const json_t *fn;
    if ((rc = get_obj(d, tc, "function", w, &fn)))
        return rc;
    out->name = NULL;
    out->arguments = NULL;
    out->arguments_len = 0;
    if (!fn)
        return 0;
    w.c = ".function.";
    if ((rc = get_str(d, fn, "name", w, &out->name, NULL)) ||
        (rc = get_str(d, fn, "arguments", w, &out->arguments, &out->arguments_len)))
        return rc;
    return 0;
}

/* The delta (streamed) or message (whole) object of a choice. */
static const json_t *choice_body(const json_t *c, const char **key)
{
    const json_t *v = json_object_get(c, "delta");
    *key = "delta";
    if (!v || json_is_null(v)) {
        v = json_object_get(c, "message");
        *key = "message";
    }
    return v;
}

static int decode_choice(struct openai_decoder *d, const json_t *c, long i, size_t *calls_used,
                         struct openai_choice *out, unsigned *flags)
{
    struct where w = {"choices", i, "", -1, ""};
    memset(out, 0, sizeof(*out));
    if (!json_is_object(c))
        return wrong_type(d, w, "", "an object", c);
    w.b = ".";
    int rc;
    if ((rc = get_int(d, c, "index", w, &out->index)) ||
        (rc = get_str(d, c, "finish_reason", w, &out->finish_reason, NULL)) ||
        (rc = get_str(d, c, "text", w, &out->text, &out->text_len)))
        return rc;
    if (out->finish_reason)
        *flags |= OPENAI_CHUNK_FINISH;
    if (out->text_len)
        *flags |= OPENAI_CHUNK_TEXT;
    const char *key;
    const json_t *delta = choice_body(c, &key);
    if (!delta || json_is_null(delta))
        return 0;
    if (!json_is_object(delta))
        return wrong_type(d, w, key, "an object or null", delta);
    w.b = strcmp(key, "delta") == 0 ? ".delta." : ".message.";
    if ((rc = get_str(d, delta, "role", w, &out->role, NULL)) ||
        (rc = get_str(d, delta, "content", w, &out->content, &out->content_len)) ||
        (rc = get_str(d, delta, "reasoning_content", w, &out->reasoning, &out->reasoning_len)))
        return rc;
    if (!out->reasoning &&
        (rc = get_str(d, delta, "reasoning", w, &out->reasoning, &out->reasoning_len)))
        return rc;
    if (out->role)
        *flags |= OPENAI_CHUNK_ROLE;
    if (out->content_len)
        *flags |= OPENAI_CHUNK_CONTENT;
    if (out->reasoning_len)
        *flags |= OPENAI_CHUNK_REASONING;
    const json_t *tcs;
    if ((rc = get_arr(d, delta, "tool_calls", w, &tcs)))
        return rc;
    if (!tcs || json_array_size(tcs) == 0)
        return 0;
    struct openai_tool_call *calls = d->calls + *calls_used;
    for (size_t t = 0; t < json_array_size(tcs); t++) {
        if ((rc = decode_tool_call(d, json_array_get(tcs, t), i, (long)t, &calls[t])))
            return rc;
    }
    out->tool_calls = calls;
    out->n_tool_calls = json_array_size(tcs);
    *calls_used += out->n_tool_calls;
    *flags |= OPENAI_CHUNK_TOOL_CALLS;
    return 0;
}

static int decode_choices(struct openai_decoder *d, const json_t *arr, struct openai_chunk *out)
{
    size_t n = json_array_size(arr);
    size_t n_calls = 0;
    for (size_t i = 0; i < n; i++) {
        const char *key;
        const json_t *body = choice_body(json_array_get(arr, i), &key);
        const json_t *tcs = json_is_object(body) ? json_object_get(body, "tool_calls") : NULL;
        if (json_is_array(tcs))
            n_calls += json_array_size(tcs);
    }
    int rc;
    if ((rc = grow((void **)&d->choices, &d->choices_cap, n, sizeof(*d->choices))) ||
        (rc = grow((void **)&d->calls, &d->calls_cap, n_calls, sizeof(*d->calls))))
        return rc;
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        rc = decode_choice(d, json_array_get(arr, i), (long)i, &used, &d->choices[i], &out->flags);
        if (rc)
            return rc;
    }
    out->choices = d->choices;
    out->n_choices = n;
    return 0;
}

static void float_from_le(const unsigned char *b, float *out)
{
    uint32_t v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    memcpy(out, &v, sizeof(v));
}

/* Decodes one base64 vector into floats at dst (room for n/4*3/4+1 floats). */
static int decode_b64_vector(struct openai_decoder *d, const json_t *v, long i, float *dst,
                             size_t *dims)
{
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    unsigned char *tmp = ts_malloc(n / 4 * 3 + 3);
    if (!tmp)
        return -ENOMEM;
    long got = base64_decode(s, n, tmp, 0);
    int rc = 0;
    if (got < 0 || got % 4 != 0) {
        rc = fail(d, "data[%ld].embedding: invalid base64 float32 vector", i);
        goto out_free_tmp;
    }
    *dims = (size_t)got / 4;
    for (size_t k = 0; k < *dims; k++)
        float_from_le(tmp + 4 * k, &dst[k]);
out_free_tmp:
    ts_free(tmp);
    return rc;
}

static int decode_embeddings(struct openai_decoder *d, const json_t *arr, struct openai_chunk *out)
{
    size_t n = json_array_size(arr);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *item = json_array_get(arr, i);
        const json_t *e = json_is_object(item) ? json_object_get(item, "embedding") : NULL;
        if (json_is_array(e))
            total += json_array_size(e);
        else if (json_is_string(e))
            total += json_string_length(e) / 4 * 3 / 4 + 1;
    }
    int rc;
    if ((rc = grow((void **)&d->embs, &d->embs_cap, n, sizeof(*d->embs))) ||
        (rc = grow((void **)&d->floats, &d->floats_cap, total, sizeof(*d->floats))))
        return rc;
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        struct where w = {"data", (long)i, ".", -1, ""};
        const json_t *item = json_array_get(arr, i);
        struct openai_embedding *em = &d->embs[i];
        if (!json_is_object(item))
            return wrong_type(d, (struct where){"data", (long)i, "", -1, ""}, "", "an object",
                              item);
        if ((rc = get_int(d, item, "index", w, &em->index)))
            return rc;
        const json_t *e = json_object_get(item, "embedding");
        em->values = d->floats ? d->floats + used : NULL;
        em->dims = 0;
        if (e && json_is_string(e)) {
            if ((rc = decode_b64_vector(d, e, (long)i, d->floats + used, &em->dims)))
                return rc;
        } else if (e && json_is_array(e)) {
            for (size_t k = 0; k < json_array_size(e); k++) {
                const json_t *x = json_array_get(e, k);
                if (!json_is_number(x))
                    return wrong_type(d, (struct where){"data", (long)i, ".embedding", (long)k, ""},
                                      "", "a number", x);
                d->floats[used + k] = (float)json_number_value(x);
            }
            em->dims = json_array_size(e);
        } else {
            return wrong_type(d, w, "embedding", "an array of numbers or a base64 string",
                              e ? e : json_null());
        }
        used += em->dims;
    }
    out->embeddings = d->embs;
    out->n_embeddings = n;
    out->flags |= OPENAI_CHUNK_EMBEDDINGS;
    return 0;
}

static enum openai_object classify(const char *s)
{
    if (!s)
        return OPENAI_OBJECT_NONE;
    if (strcmp(s, "chat.completion.chunk") == 0)
        return OPENAI_OBJECT_CHAT_CHUNK;
    if (strcmp(s, "chat.completion") == 0)
        return OPENAI_OBJECT_CHAT;
    if (strcmp(s, "text_completion") == 0)
        return OPENAI_OBJECT_TEXT;
    if (strcmp(s, "list") == 0)
        return OPENAI_OBJECT_LIST;
    if (strcmp(s, "error") == 0)
        return OPENAI_OBJECT_ERROR;
    return OPENAI_OBJECT_OTHER;
}

static int decode_errors(struct openai_decoder *d, const json_t *root, bool body,
                         struct openai_chunk *out)
{
    const json_t *e = json_object_get(root, "error");
    int rc = 0;
    if (e && !json_is_null(e)) {
        if (json_is_object(e))
            rc = decode_error(d, e, "error.", &out->error);
        else if (json_is_string(e))
            out->error.message = json_string_value(e);
        else
            return wrong_type(d, WHERE_TOP, "error", "an object, a string or null", e);
        out->flags |= OPENAI_CHUNK_ERROR;
    } else if (out->object == OPENAI_OBJECT_ERROR) {
        rc = decode_error(d, root, "", &out->error);
        out->flags |= OPENAI_CHUNK_ERROR;
    } else if (body) {
        const json_t *detail = json_object_get(root, "detail");
        if (json_is_string(detail)) {
            out->error.message = json_string_value(detail);
            out->flags |= OPENAI_CHUNK_ERROR;
        }
    }
    return rc;
}

static int decode_json(struct openai_decoder *d, const char *s, size_t n, bool body,
                       struct openai_chunk *out)
{
    json_error_t je;
    json_t *root = json_loadb(s, n, JSON_ALLOW_NUL, &je);
    if (!root) {
        if (json_error_code(&je) == json_error_out_of_memory)
            return -ENOMEM;
        return fail(d, "invalid JSON at line %d column %d: %s", je.line, je.column, je.text);
    }
    d->root = root;
    if (!json_is_object(root))
        return fail(d, "expected a JSON object, got %s", type_name(root));
    int rc;
    struct where w = WHERE_TOP;
    if ((rc = get_str(d, root, "object", w, &out->object_str, NULL)))
        return rc;
    out->object = classify(out->object_str);
    if ((rc = decode_errors(d, root, body, out)) ||
        (rc = get_str(d, root, "id", w, &out->id, NULL)) ||
        (rc = get_str(d, root, "model", w, &out->model, NULL)) ||
        (rc = get_int(d, root, "created", w, &out->created)))
        return rc;
    const json_t *u;
    if ((rc = get_obj(d, root, "usage", w, &u)))
        return rc;
    if (u) {
        if ((rc = decode_usage(d, u, &out->usage)))
            return rc;
        out->flags |= OPENAI_CHUNK_USAGE;
    }
    const json_t *choices;
    if ((rc = get_arr(d, root, "choices", w, &choices)))
        return rc;
    if (choices && (rc = decode_choices(d, choices, out)))
        return rc;
    if (body && (out->object == OPENAI_OBJECT_LIST || out->object == OPENAI_OBJECT_NONE)) {
        const json_t *data = json_object_get(root, "data");
        if (json_is_array(data) && (rc = decode_embeddings(d, data, out)))
            return rc;
    }
    return 0;
}

/*
 * The fast path for stream chunks: yajl's callback parser fills the result
 * as the bytes go by, without a DOM, and knows only the common shape of a
 * chunk: id, object, model, created, usage, and per choice index, text,
 * finish_reason and the delta's role, content, reasoning and tool call
 * fragments. Whenever something is not plainly that shape (a known field
 * of a wrong type or given twice, an error, a "message", a number where an
 * integer is expected, invalid UTF-8, a surrogate escape that is not a
 * valid pair, deep nesting, invalid JSON) it gives up and the jansson
 * decoder above decodes the chunk instead, so every refusal and every
 * error message comes from one place and the two agree on every input
 * (tests/fuzz/fuzz_chunk_diff.c checks that).
 */

/* Nesting the fast path follows; deeper documents go to jansson, whose own
 * limit (JSON_PARSER_MAX_DEPTH) yajl does not have. */
#define FP_MAX_SKIP 64

enum fp_frame {
    FR_TOP,
    FR_USAGE,
    FR_PTD,
    FR_CTD,
    FR_CHOICES,
    FR_CHOICE,
    FR_DELTA,
    FR_TOOLS,
    FR_CALL,
    FR_FN,
};

enum fp_field {
    F_UNKNOWN,
    F_OBJECT,
    F_ERROR,
    F_ID,
    F_MODEL,
    F_CREATED,
    F_USAGE,
    F_CHOICES,
    F_PROMPT,
    F_COMPLETION,
    F_TOTAL,
    F_PTD,
    F_CTD,
    F_CACHED,
    F_RTOKENS,
    F_INDEX,
    F_FINISH,
    F_TEXT,
    F_DELTA,
    F_MESSAGE,
    F_ROLE,
    F_CONTENT,
    F_RCONTENT,
    F_REASONING,
    F_TOOL_CALLS,
    F_CALL_INDEX,
    F_CALL_ID,
    F_CALL_TYPE,
    F_FUNCTION,
    F_FN_NAME,
    F_FN_ARGS,
};

struct fp_key {
    const char *name;
    size_t len;
    enum fp_field field;
};

#define FP_KEY(name, field)                                                                        \
    {                                                                                              \
        name, sizeof(name) - 1, field                                                              \
    }

/* The known keys of each kind of object, looked up per frame. */
static const struct fp_key fp_top_keys[] = {
    FP_KEY("object", F_OBJECT),   FP_KEY("error", F_ERROR),     FP_KEY("id", F_ID),
    FP_KEY("model", F_MODEL),     FP_KEY("created", F_CREATED), FP_KEY("usage", F_USAGE),
    FP_KEY("choices", F_CHOICES),
};
static const struct fp_key fp_usage_keys[] = {
    FP_KEY("prompt_tokens", F_PROMPT),
    FP_KEY("completion_tokens", F_COMPLETION),
    FP_KEY("total_tokens", F_TOTAL),
    FP_KEY("prompt_tokens_details", F_PTD),
    FP_KEY("completion_tokens_details", F_CTD),
};
static const struct fp_key fp_ptd_keys[] = {FP_KEY("cached_tokens", F_CACHED)};
static const struct fp_key fp_ctd_keys[] = {FP_KEY("reasoning_tokens", F_RTOKENS)};
static const struct fp_key fp_choice_keys[] = {
    FP_KEY("index", F_INDEX), FP_KEY("finish_reason", F_FINISH), FP_KEY("text", F_TEXT),
    FP_KEY("delta", F_DELTA), FP_KEY("message", F_MESSAGE),
};
static const struct fp_key fp_delta_keys[] = {
    FP_KEY("role", F_ROLE),
    FP_KEY("content", F_CONTENT),
    FP_KEY("reasoning_content", F_RCONTENT),
    FP_KEY("reasoning", F_REASONING),
    FP_KEY("tool_calls", F_TOOL_CALLS),
};
static const struct fp_key fp_call_keys[] = {
    FP_KEY("index", F_CALL_INDEX),
    FP_KEY("id", F_CALL_ID),
    FP_KEY("type", F_CALL_TYPE),
    FP_KEY("function", F_FUNCTION),
};
static const struct fp_key fp_fn_keys[] = {FP_KEY("name", F_FN_NAME),
                                           FP_KEY("arguments", F_FN_ARGS)};

#define FP_SET(keys)                                                                               \
    {                                                                                              \
        keys, sizeof(keys) / sizeof(keys[0])                                                       \
    }

static const struct fp_key_set {
    const struct fp_key *keys;
    size_t n;
} fp_key_sets[] = {
    [FR_TOP] = FP_SET(fp_top_keys),       [FR_USAGE] = FP_SET(fp_usage_keys),
    [FR_PTD] = FP_SET(fp_ptd_keys),       [FR_CTD] = FP_SET(fp_ctd_keys),
    [FR_CHOICE] = FP_SET(fp_choice_keys), [FR_DELTA] = FP_SET(fp_delta_keys),
    [FR_CALL] = FP_SET(fp_call_keys),     [FR_FN] = FP_SET(fp_fn_keys),
};

#define FP_FRAMES 7 /* top, choices, choice, delta, tools, call, function */

struct fp {
    yajl_handle h;
    struct openai_decoder *d;
    struct openai_chunk *out;
    enum fp_frame frame[FP_FRAMES];
    uint32_t seen[FP_FRAMES]; /* known fields met in each open object */
    int depth;                /* open known frames */
    unsigned skip;            /* open containers inside an unknown field */
    enum fp_field field;      /* the key whose value comes next */
    bool top_done;
    /* strings stay where the parser put them, NUL-terminated, until the
     * decoder's next chunk (simdjson's), so they are not copied */
    bool strings_kept;
    size_t top_end; /* bytes up to the object's closing brace */
    size_t n_choices;
    size_t n_calls;            /* tool call fragments, all choices */
    const char *reasoning_alt; /* delta.reasoning of the open choice */
    size_t reasoning_alt_len;
};

/* Copies a string into the arena; NULL when it would not fit (it always
 * does: decoded strings are shorter than their JSON text). */
static const char *fp_copy(struct openai_decoder *d, const unsigned char *s, size_t n)
{
    if (d->arena_used > d->arena_cap || n >= d->arena_cap - d->arena_used)
        return NULL;
    char *p = d->arena + d->arena_used;
    memcpy(p, s, n);
    p[n] = '\0';
    d->arena_used += n + 1;
    return p;
}

static struct openai_choice *fp_choice(struct fp *f)
{
    return &f->d->choices[f->n_choices - 1];
}

static struct openai_tool_call *fp_call(struct fp *f)
{
    return &f->d->calls[f->n_calls - 1];
}

static enum fp_frame fp_top(const struct fp *f)
{
    return f->frame[f->depth - 1];
}

/* Takes the pending field; a field in an unknown container is F_UNKNOWN. */
static enum fp_field fp_take(struct fp *f)
{
    enum fp_field k = f->field;
    f->field = F_UNKNOWN;
    return k;
}

static int fp_on_null(void *ctx)
{
    struct fp *f = ctx;
    if (f->skip)
        return 1;
    if (f->depth == 0 || fp_top(f) == FR_CHOICES || fp_top(f) == FR_TOOLS)
        return 0;
    return fp_take(f) != F_MESSAGE; /* every known field may be null but this one */
}

static int fp_on_scalar(void *ctx)
{
    struct fp *f = ctx;
    if (f->skip)
        return 1;
    if (f->depth == 0 || fp_top(f) == FR_CHOICES || fp_top(f) == FR_TOOLS)
        return 0;
    return fp_take(f) == F_UNKNOWN;
}

static int fp_on_bool(void *ctx, int v)
{
    (void)v;
    return fp_on_scalar(ctx);
}

static int fp_on_double(void *ctx, double v)
{
    (void)v;
    return fp_on_scalar(ctx); /* an integral real in an integer field: jansson decides */
}

static int fp_on_integer(void *ctx, long long v)
{
    struct fp *f = ctx;
    if (f->skip)
        return 1;
    if (f->depth == 0 || fp_top(f) == FR_CHOICES || fp_top(f) == FR_TOOLS)
        return 0;
    struct openai_usage *u = &f->out->usage;
    switch (fp_take(f)) {
    case F_UNKNOWN:
        return 1;
    case F_CREATED:
        f->out->created = v;
        return 1;
    case F_PROMPT:
        u->prompt_tokens = v;
        return 1;
    case F_COMPLETION:
        u->completion_tokens = v;
        return 1;
    case F_TOTAL:
        u->total_tokens = v;
        return 1;
    case F_CACHED:
        u->cached_tokens = v;
        return 1;
    case F_RTOKENS:
        u->reasoning_tokens = v;
        return 1;
    case F_INDEX:
        fp_choice(f)->index = v;
        return 1;
    case F_CALL_INDEX:
        fp_call(f)->index = v;
        return 1;
    default:
        return 0;
    }
}

/* A string field of a tool call fragment or its function. */
static int fp_call_string(struct fp *f, enum fp_field k, const char *p, size_t n)
{
    switch (k) {
    case F_CALL_ID:
        fp_call(f)->id = p;
        return 1;
    case F_CALL_TYPE:
        fp_call(f)->type = p;
        return 1;
    case F_FN_NAME:
        fp_call(f)->name = p;
        return 1;
    case F_FN_ARGS:
        fp_call(f)->arguments = p;
        fp_call(f)->arguments_len = n;
        return 1;
    default:
        return 0;
    }
}

static int fp_on_string(void *ctx, const unsigned char *s, size_t n)
{
    struct fp *f = ctx;
    if (f->skip)
        return 1;
    if (f->depth == 0 || fp_top(f) == FR_CHOICES || fp_top(f) == FR_TOOLS)
        return 0;
    enum fp_field k = fp_take(f);
    if (k == F_UNKNOWN)
        return 1;
    const char *p = f->strings_kept ? (const char *)s : fp_copy(f->d, s, n);
    if (!p)
        return 0;
    struct openai_choice *c = f->n_choices ? fp_choice(f) : NULL;
    switch (k) {
    case F_OBJECT:
        f->out->object_str = p;
        return 1;
    case F_ID:
        f->out->id = p;
        return 1;
    case F_MODEL:
        f->out->model = p;
        return 1;
    case F_FINISH:
        c->finish_reason = p;
        return 1;
    case F_TEXT:
        c->text = p;
        c->text_len = n;
        return 1;
    case F_ROLE:
        c->role = p;
        return 1;
    case F_CONTENT:
        c->content = p;
        c->content_len = n;
        return 1;
    case F_RCONTENT:
        c->reasoning = p;
        c->reasoning_len = n;
        return 1;
    case F_REASONING:
        f->reasoning_alt = p;
        f->reasoning_alt_len = n;
        return 1;
    default:
        return fp_call_string(f, k, p, n);
    }
}

static int fp_push(struct fp *f, enum fp_frame fr)
{
    if (f->depth >= FP_FRAMES)
        return 0;
    f->frame[f->depth] = fr;
    f->seen[f->depth] = 0;
    f->depth++;
    return 1;
}

/* A new element of "choices": cleared as decode_choice() clears it. */
static int fp_new_choice(struct fp *f)
{
    struct openai_decoder *d = f->d;
    if (grow((void **)&d->choices, &d->choices_cap, f->n_choices + 1, sizeof(*d->choices)))
        return 0;
    struct openai_choice *c = &d->choices[f->n_choices++];
    memset(c, 0, sizeof(*c));
    c->index = -1;
    f->reasoning_alt = NULL;
    f->reasoning_alt_len = 0;
    return fp_push(f, FR_CHOICE);
}

/* A new tool call fragment in the open choice's delta, cleared as
 * decode_tool_call() leaves an empty one. */
static int fp_new_call(struct fp *f)
{
    struct openai_decoder *d = f->d;
    if (grow((void **)&d->calls, &d->calls_cap, f->n_calls + 1, sizeof(*d->calls)))
        return 0;
    struct openai_tool_call *t = &d->calls[f->n_calls++];
    memset(t, 0, sizeof(*t));
    t->index = -1;
    fp_choice(f)->n_tool_calls++;
    return fp_push(f, FR_CALL);
}

static int fp_on_start_map(void *ctx)
{
    struct fp *f = ctx;
    if (f->skip)
        return ++f->skip <= FP_MAX_SKIP;
    if (f->depth == 0)
        return !f->top_done && fp_push(f, FR_TOP);
    if (fp_top(f) == FR_CHOICES)
        return fp_new_choice(f);
    if (fp_top(f) == FR_TOOLS)
        return fp_new_call(f);
    switch (fp_take(f)) {
    case F_UNKNOWN:
        f->skip = 1;
        return 1;
    case F_USAGE:
        f->out->usage.present = true;
        f->out->flags |= OPENAI_CHUNK_USAGE;
        return fp_push(f, FR_USAGE);
    case F_PTD:
        return fp_push(f, FR_PTD);
    case F_CTD:
        return fp_push(f, FR_CTD);
    case F_DELTA:
        return fp_push(f, FR_DELTA);
    case F_FUNCTION:
        return fp_push(f, FR_FN);
    default:
        return 0;
    }
}

static int fp_on_start_array(void *ctx)
{
    struct fp *f = ctx;
    if (f->skip)
        return ++f->skip <= FP_MAX_SKIP;
    if (f->depth == 0 || fp_top(f) == FR_CHOICES || fp_top(f) == FR_TOOLS)
        return 0;
    switch (fp_take(f)) {
    case F_UNKNOWN:
        f->skip = 1;
        return 1;
    case F_CHOICES:
        f->out->choices = f->d->choices;
        return fp_push(f, FR_CHOICES);
    case F_TOOL_CALLS:
        return fp_push(f, FR_TOOLS);
    default:
        return 0;
    }
}

/* The flags decode_choice() sets for a finished choice. */
static void fp_end_choice(struct fp *f)
{
    struct openai_choice *c = fp_choice(f);
    unsigned *flags = &f->out->flags;
    if (!c->reasoning) {
        c->reasoning = f->reasoning_alt;
        c->reasoning_len = f->reasoning_alt_len;
    }
    if (c->finish_reason)
        *flags |= OPENAI_CHUNK_FINISH;
    if (c->text_len)
        *flags |= OPENAI_CHUNK_TEXT;
    if (c->role)
        *flags |= OPENAI_CHUNK_ROLE;
    if (c->content_len)
        *flags |= OPENAI_CHUNK_CONTENT;
    if (c->reasoning_len)
        *flags |= OPENAI_CHUNK_REASONING;
    if (c->n_tool_calls)
        *flags |= OPENAI_CHUNK_TOOL_CALLS;
}

/* Points each choice at its tool call fragments: d->calls may have moved
 * while it grew, and the fragments lie in it choice after choice. */
static void fp_link_calls(struct fp *f)
{
    size_t at = 0;
    for (size_t i = 0; i < f->n_choices; i++) {
        struct openai_choice *c = &f->d->choices[i];
        c->tool_calls = c->n_tool_calls ? f->d->calls + at : NULL;
        at += c->n_tool_calls;
    }
}

static int fp_on_end(void *ctx)
{
    struct fp *f = ctx;
    if (f->skip) {
        f->skip--;
        return 1;
    }
    enum fp_frame fr = fp_top(f);
    f->depth--;
    if (fr == FR_CHOICE)
        fp_end_choice(f);
    else if (fr == FR_CHOICES)
        f->out->choices = f->d->choices; /* grown since the array opened */
    else if (fr == FR_TOP) {
        f->top_done = true;
        f->top_end = f->h ? yajl_get_bytes_consumed(f->h) : 0; /* no handle: simdjson's */
    }
    return 1;
}

/*
 * The known keys by a hash of (frame, length, first and last byte), so a key
 * is found with one probe and one compare: scanning a frame's list took a
 * mispredicted branch or two per key, and the client decodes between the
 * kernel's receives, which leave the branch predictor cold (as many samples
 * as simdjson's stage 2 at 100 paced streams). The hash has no collision
 * among the known keys (test_openai_chunk checks the table is in use); were
 * one added that collides, the table is not used and the lists are scanned.
 */
#define FP_HASH_SIZE 128

static struct {
    pthread_once_t once;
    bool usable;
    const struct fp_key *key[FP_HASH_SIZE];
    enum fp_frame frame[FP_HASH_SIZE];
} fp_hash = {.once = PTHREAD_ONCE_INIT};

static unsigned fp_hash_of(enum fp_frame fr, const unsigned char *key, size_t n)
{
    return ((unsigned)fr * 7u + (unsigned)n * 3u + key[0] + key[n - 1] * 3u) & (FP_HASH_SIZE - 1);
}

static void fp_hash_build(void)
{
    for (size_t fr = 0; fr < sizeof(fp_key_sets) / sizeof(fp_key_sets[0]); fr++) {
        for (size_t i = 0; i < fp_key_sets[fr].n; i++) {
            const struct fp_key *k = &fp_key_sets[fr].keys[i];
            unsigned h = fp_hash_of((enum fp_frame)fr, (const unsigned char *)k->name, k->len);
            if (fp_hash.key[h])
                return; /* a collision: fp_find scans the lists */
            fp_hash.key[h] = k;
            fp_hash.frame[h] = (enum fp_frame)fr;
        }
    }
    fp_hash.usable = true;
}

static void fp_hash_ready(void)
{
    (void)pthread_once(&fp_hash.once, fp_hash_build);
}

bool openai_decoder_keys_hashed(void)
{
    fp_hash_ready();
    return fp_hash.usable;
}

/* The known key of frame fr named key (n bytes), or NULL. */
static const struct fp_key *fp_find(enum fp_frame fr, const unsigned char *key, size_t n)
{
    if (n == 0)
        return NULL;
    if (fp_hash.usable) {
        unsigned h = fp_hash_of(fr, key, n);
        const struct fp_key *k = fp_hash.key[h];
        return k && fp_hash.frame[h] == fr && k->len == n && memcmp(k->name, key, n) == 0 ? k
                                                                                          : NULL;
    }
    const struct fp_key_set *set = &fp_key_sets[fr]; /* FR_CHOICES, FR_TOOLS: none */
    for (size_t i = 0; i < set->n; i++)
        if (set->keys[i].len == n && memcmp(set->keys[i].name, key, n) == 0)
            return &set->keys[i];
    return NULL;
}

static int fp_on_key(void *ctx, const unsigned char *key, size_t n)
{
    struct fp *f = ctx;
    f->field = F_UNKNOWN;
    const struct fp_key *k = f->skip ? NULL : fp_find(fp_top(f), key, n);
    if (!k) /* a known name has no NUL; jansson refuses these, wherever they are */
        return memchr(key, '\0', n) == NULL;
    uint32_t bit = 1u << k->field;
    if (f->seen[f->depth - 1] & bit)
        return 0; /* jansson keeps the last of duplicate keys */
    f->seen[f->depth - 1] |= bit;
    f->field = k->field;
    return 1;
}

/*
 * yajl's allocator: a bump allocator over the decoder's yheap, reset for
 * each chunk; what does not fit (a chunk with long escaped strings) comes
 * from malloc. yajl 2.1 does not check what its allocator returns, so this
 * never fails short of malloc itself, and it uses malloc, not ts_malloc,
 * whose test hooks make allocations fail.
 */
#define YHEAP_HDR 16 /* each block's size, kept before it for realloc */

static bool in_yheap(const struct openai_decoder *d, const void *p)
{
    const unsigned char *c = p;
    return c >= d->yheap && c < d->yheap + sizeof(d->yheap);
}

static void *yheap_malloc(void *ctx, size_t n)
{
    struct openai_decoder *d = ctx;
    size_t need = YHEAP_HDR + ((n + 15) & ~(size_t)15);
    if (n <= sizeof(d->yheap) && need <= sizeof(d->yheap) - d->yheap_used) {
        unsigned char *b = d->yheap + d->yheap_used;
        d->yheap_used += need;
        memcpy(b, &n, sizeof(n));
        return b + YHEAP_HDR;
    }
    return malloc(n);
}

static void yheap_free(void *ctx, void *p)
{
    if (p && !in_yheap(ctx, p))
        free(p); /* a block in yheap goes with the chunk */
}

static void *yheap_realloc(void *ctx, void *p, size_t n)
{
    struct openai_decoder *d = ctx;
    if (!p)
        return yheap_malloc(ctx, n);
    if (!in_yheap(d, p))
        return realloc(p, n);
    size_t old;
    memcpy(&old, (unsigned char *)p - YHEAP_HDR, sizeof(old));
    if (n <= old)
        return p;
    void *q = yheap_malloc(ctx, n);
    if (q)
        memcpy(q, p, old);
    return q;
}

static const yajl_callbacks fp_callbacks = {
    .yajl_null = fp_on_null,
    .yajl_boolean = fp_on_bool,
    .yajl_integer = fp_on_integer,
    .yajl_double = fp_on_double,
    .yajl_string = fp_on_string,
    .yajl_start_map = fp_on_start_map,
    .yajl_map_key = fp_on_key,
    .yajl_end_map = fp_on_end,
    .yajl_start_array = fp_on_start_array,
    .yajl_end_array = fp_on_end,
};

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* 1 for \uD800-\uDBFF, 2 for \uDC00-\uDFFF, 0 for other text at s. */
static int surrogate_at(const char *s, size_t left)
{
    if (left < 6 || s[0] != '\\' || s[1] != 'u' || (s[2] != 'd' && s[2] != 'D') || !is_hex(s[3]) ||
        !is_hex(s[4]) || !is_hex(s[5]))
        return 0;
    char c = s[3];
    if (c == '8' || c == '9' || c == 'a' || c == 'A' || c == 'b' || c == 'B')
        return 1;
    if (c >= '0' && c <= '7')
        return 0;
    return 2;
}

/* The length of the leading run of s that is ASCII without NUL, taken 8
 * bytes at a time (most chunks are all ASCII; utf8_invalid_at() goes byte
 * by byte). */
static size_t ascii_prefix(const char *s, size_t n)
{
    const uint64_t high = 0x8080808080808080ull, ones = 0x0101010101010101ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, sizeof(w));
        if ((w & high) || ((w - ones) & ~w & high)) /* a high bit, or a zero byte */
            break;
    }
    return i;
}

/*
 * Whether the text is something yajl and jansson read alike: valid UTF-8
 * without NUL bytes (yajl checks only the shape of a UTF-8 sequence), no
 * vertical tab or form feed (whitespace to yajl, not to JSON), and
 * surrogate escapes only as high-low pairs (yajl turns a lone one into
 * '?' or invalid UTF-8 where jansson refuses it). Stepping over each
 * escape whole keeps an escaped backslash before "u" from counting.
 */
static bool fp_text_ok(const char *s, size_t n)
{
    size_t a = ascii_prefix(s, n);
    if (utf8_invalid_at(s + a, n - a) != n - a || memchr(s, '\v', n) || memchr(s, '\f', n))
        return false;
    const char *p = s, *end = s + n;
    while ((p = memchr(p, '\\', (size_t)(end - p))) != NULL) {
        int k = surrogate_at(p, (size_t)(end - p));
        if (k == 2 || (k == 1 && surrogate_at(p + 6, (size_t)(end - p - 6)) != 2))
            return false;
        p += k ? 12 : 2;
        if (p >= end)
            break;
    }
    return true;
}

/*
 * simdjson's parse of the text replayed as the same callbacks (json_simd.h):
 * 1 decoded, 0 not (jansson decides), -1 when simdjson cannot be used here
 * (not built in, the text too long, no memory): yajl parses it then.
 * simdjson refuses what fp_text_ok() guards yajl against (invalid UTF-8,
 * lone surrogates, vertical tab and form feed as whitespace), and anything
 * after the object, so neither check is needed.
 */
static int parse_simd(struct openai_decoder *d, const char *s, size_t n, struct fp *f)
{
#if TS_HAVE_SIMDJSON
    if (n > JSON_SIMD_MAX_TEXT || d->yajl_only)
        return -1;
    f->strings_kept = true; /* simdjson's strings: NUL-terminated, kept until its next parse */
    int rc = json_simd_walk(&d->simd, s, n, &fp_callbacks, f);
    if (rc < 0)
        return -1;
    return rc && f->top_done;
#else
    (void)d, (void)s, (void)n, (void)f;
    return -1;
#endif
}

/* yajl's parse of the text into the callbacks: true when it decoded. */
static bool parse_yajl(struct openai_decoder *d, const char *s, size_t n, struct fp *f)
{
    if (!fp_text_ok(s, n))
        return false;
    d->yheap_used = 0;
    yajl_alloc_funcs af = {
        .malloc = yheap_malloc, .realloc = yheap_realloc, .free = yheap_free, .ctx = d};
    yajl_handle h = yajl_alloc(&fp_callbacks, &af, f);
    if (!h)
        return false;
    f->h = h;
    /* yajl takes the start of a string after the object for a token still
     * arriving and accepts the text: the brace must end it */
    bool ok = yajl_parse(h, (const unsigned char *)s, n) == yajl_status_ok &&
              yajl_complete_parse(h) == yajl_status_ok && f->top_done && f->top_end == n;
    yajl_free(h);
    return ok;
}

/* Decodes a stream chunk without a DOM; false when jansson must decode it
 * (out and the decoder are then left for openai_decoder_clear()). */
static bool decode_fast(struct openai_decoder *d, const char *s, size_t n, struct openai_chunk *out)
{
    if (n == 0 || s[0] != '{')
        return false;
    if (d->arena_cap < n + 1) {
        char *a = ts_realloc(d->arena, n + 1);
        if (!a)
            return false;
        d->arena = a;
        d->arena_cap = n + 1;
    }
    d->arena_used = 0;
    struct fp f = {.d = d, .out = out};
    int rc = parse_simd(d, s, n, &f);
    if (rc < 0) { /* yajl, from a fresh state (simdjson ran no callback) */
        f = (struct fp){.d = d, .out = out};
        rc = parse_yajl(d, s, n, &f);
    }
    if (!rc)
        return false;
    out->object = classify(out->object_str);
    if (out->object == OPENAI_OBJECT_ERROR)
        return false; /* errors are rare: jansson */
    out->n_choices = f.n_choices;
    fp_link_calls(&f);
    return true;
}

void openai_chunk_clear(struct openai_chunk *out)
{
    memset(out, 0, sizeof(*out));
    out->created = -1;
    out->error.code_num = -1;
    openai_usage_clear(&out->usage);
}

void openai_decoder_clear(struct openai_decoder *d, struct openai_chunk *out)
{
    if (d->root) {
        json_decref(d->root);
        d->root = NULL;
    }
    d->err[0] = '\0';
    openai_chunk_clear(out);
}

void openai_chunk_trim(const char **data, size_t *len)
{
    while (*len && chars_is_json_space(**data)) {
        (*data)++;
        (*len)--;
    }
    while (*len && chars_is_json_space((*data)[*len - 1]))
        (*len)--;
}

static int decode(struct openai_decoder *d, const char *s, size_t n, bool body, bool fast,
                  struct openai_chunk *out)
{
    openai_decoder_clear(d, out);
    openai_chunk_trim(&s, &n);
    int rc;
    if (n == 6 && memcmp(s, "[DONE]", 6) == 0) {
        if (!body) {
            out->flags = OPENAI_CHUNK_DONE;
            return 0;
        }
        rc = fail(d, "unexpected [DONE] in a response body");
    } else if (fast && decode_fast(d, s, n, out)) {
        d->n_fast++;
        return 0;
    } else {
        if (fast) {
            openai_decoder_clear(d, out);
            d->n_fallback++;
        }
        rc = decode_json(d, s, n, body, out);
    }
    if (rc) {
        if (rc == -ENOMEM && !d->err[0])
            snprintf(d->err, sizeof(d->err), "out of memory");
        char keep[sizeof(d->err)];
        memcpy(keep, d->err, sizeof(keep));
        openai_decoder_clear(d, out);
        memcpy(d->err, keep, sizeof(keep));
    }
    return rc;
}

int openai_decode_chunk(struct openai_decoder *d, const char *data, size_t len,
                        struct openai_chunk *out)
{
    return decode(d, data, len, false, true, out);
}

int openai_decode_chunk_full(struct openai_decoder *d, const char *data, size_t len,
                             struct openai_chunk *out)
{
    return decode(d, data, len, false, false, out);
}

int openai_decode_body(struct openai_decoder *d, const char *body, size_t len,
                       struct openai_chunk *out)
{
    return decode(d, body, len, true, false, out);
}

static bool str_same(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool text_same(const char *a, size_t an, const char *b, size_t bn)
{
    if (!a || !b)
        return !a && !b && an == bn;
    return an == bn && memcmp(a, b, an) == 0 && a[an] == '\0' && b[bn] == '\0';
}

static bool call_same(const struct openai_tool_call *a, const struct openai_tool_call *b)
{
    return a->index == b->index && str_same(a->id, b->id) && str_same(a->type, b->type) &&
           str_same(a->name, b->name) &&
           text_same(a->arguments, a->arguments_len, b->arguments, b->arguments_len);
}

static bool choice_same(const struct openai_choice *a, const struct openai_choice *b)
{
    if (a->index != b->index || !str_same(a->role, b->role) ||
        !text_same(a->content, a->content_len, b->content, b->content_len) ||
        !text_same(a->reasoning, a->reasoning_len, b->reasoning, b->reasoning_len) ||
        !text_same(a->text, a->text_len, b->text, b->text_len) ||
        !str_same(a->finish_reason, b->finish_reason) || a->n_tool_calls != b->n_tool_calls)
        return false;
    for (size_t t = 0; t < a->n_tool_calls; t++)
        if (!call_same(&a->tool_calls[t], &b->tool_calls[t]))
            return false;
    return true;
}

bool openai_chunk_same(const struct openai_chunk *a, const struct openai_chunk *b)
{
    const struct openai_usage *ua = &a->usage, *ub = &b->usage;
    if (a->flags != b->flags || a->object != b->object || !str_same(a->object_str, b->object_str) ||
        !str_same(a->id, b->id) || !str_same(a->model, b->model) || a->created != b->created ||
        a->n_choices != b->n_choices || a->n_embeddings != b->n_embeddings)
        return false;
    if (ua->present != ub->present || ua->prompt_tokens != ub->prompt_tokens ||
        ua->completion_tokens != ub->completion_tokens || ua->total_tokens != ub->total_tokens ||
        ua->cached_tokens != ub->cached_tokens || ua->reasoning_tokens != ub->reasoning_tokens)
        return false;
    if (!str_same(a->error.message, b->error.message) || !str_same(a->error.type, b->error.type) ||
        !str_same(a->error.param, b->error.param) || !str_same(a->error.code, b->error.code) ||
        a->error.code_num != b->error.code_num)
        return false;
    for (size_t i = 0; i < a->n_choices; i++)
        if (!choice_same(&a->choices[i], &b->choices[i]))
            return false;
    for (size_t i = 0; i < a->n_embeddings; i++) {
        const struct openai_embedding *x = &a->embeddings[i], *y = &b->embeddings[i];
        if (x->index != y->index || x->dims != y->dims ||
            (x->dims && memcmp(x->values, y->values, x->dims * sizeof(float)) != 0))
            return false;
    }
    return true;
}
