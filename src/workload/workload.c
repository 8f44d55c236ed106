#include "workload.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/rng.h"
#include "llm/text.h"
#include "llm/tokcount.h"
#include "workload/corpus.h"

#define DEFAULT_INPUT_TOKENS  "1024" /* vLLM's random dataset defaults */
#define DEFAULT_OUTPUT_TOKENS "128"

/* Keys the workload writes itself; an override of one replaces it. */
enum gen_key {
    GEN_MODEL = 1 << 0,
    GEN_MAX_TOKENS = 1 << 1,
    GEN_IGNORE_EOS = 1 << 2,
    GEN_STREAM = 1 << 3,
    GEN_STREAM_OPTIONS = 1 << 4,
};

void workload_cfg_init(struct workload_cfg *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->endpoint = WORKLOAD_CHAT;
    cfg->ignore_eos = true;
    cfg->stream = true;
    cfg->include_usage = true;
    cfg->embed_batch = 1;
}

const char *workload_endpoint_path(enum workload_endpoint e)
{
    switch (e) {
    case WORKLOAD_CHAT:
        return "/v1/chat/completions";
    case WORKLOAD_COMPLETIONS:
        return "/v1/completions";
    case WORKLOAD_EMBEDDINGS:
        return "/v1/embeddings";
    case WORKLOAD_VECTOR_SEARCH:
        return "/v1/vectors/search";
    }
    return "/v1/chat/completions";
}

int workload_endpoint_parse(const char *s, enum workload_endpoint *out)
{
    if (!s)
        return -EINVAL;
    if (strcasecmp(s, "chat") == 0)
        *out = WORKLOAD_CHAT;
    else if (strcasecmp(s, "completions") == 0)
        *out = WORKLOAD_COMPLETIONS;
    else if (strcasecmp(s, "embeddings") == 0)
        *out = WORKLOAD_EMBEDDINGS;
    else if (strcasecmp(s, "vector-search") == 0 || strcasecmp(s, "vector_search") == 0)
        *out = WORKLOAD_VECTOR_SEARCH;
    else
        return -EINVAL;
    return 0;
}

/* {"vector":[row index mod n],"k":K: 9 significant digits give back the same float. */
static int vector_query(const struct workload *w, uint64_t index, struct buf *body)
{
    const struct vecset *v = w->vectors;
    const float *row = v->v + (index % v->n) * v->dim;
    int rc = w->vector_prefix ? 0 : buf_append_str(body, "\"vector\":");
    rc = rc ? rc : buf_append_char(body, '[');
    for (size_t d = 0; rc == 0 && d < v->dim; d++)
        rc = buf_appendf(body, d ? ",%.9g" : "%.9g", (double)row[d]);
    if (rc == 0)
        rc = buf_append_char(body, ']');
    if (rc == 0 && !w->vector_prefix)
        rc = buf_appendf(body, ",\"k\":%" PRIu32, w->vector_k);
    return rc;
}

/* Template mode: the template's text around the vector. */
static int vector_template_item(const struct workload *w, uint64_t index, struct work_item *out)
{
    struct buf body;
    buf_init(&body, WORKLOAD_MAX_BODY);
    int rc = buf_append_str(&body, w->vector_prefix);
    if (rc == 0)
        rc = vector_query(w, index, &body);
    if (rc == 0)
        rc = buf_append_str(&body, w->vector_suffix);
    if (rc) {
        buf_release(&body);
        memset(out, 0, sizeof(*out));
        return rc;
    }
    out->body = buf_take(&body, &out->body_len);
    return 0;
}

/* Whether e generates text (chat, completions): max tokens, streaming, ignore_eos. */
static bool is_gen(enum workload_endpoint e)
{
    return e == WORKLOAD_CHAT || e == WORKLOAD_COMPLETIONS;
}

/* The generator of item index: a function of (seed, index) only. */
static void item_rng(const struct workload *w, uint64_t index, struct rng *r)
{
    rng_seed(r, rng_mix64(rng_mix64(w->seed ^ 0x243f6a8885a308d3ull) + rng_mix64(index)));
}

/*
 * A keyed permutation of [0, n): a 4-round Feistel network on the smallest
 * even number of bits that holds n - 1, cycle-walking until the result is
 * below n (on average fewer than 4 walks: the domain is under 4n). Gives a
 * shuffled order without storing one.
 */
static uint64_t permute(uint64_t x, uint64_t n, uint64_t key)
{
    if (n <= 1)
        return 0;
    unsigned bits = 64 - (unsigned)__builtin_clzll(n - 1);
    bits += bits & 1;
    unsigned half = bits / 2;
    uint64_t mask = (half == 32) ? 0xffffffffull : ((1ull << half) - 1);
    do {
        uint64_t l = x >> half, r = x & mask;
        for (uint64_t round = 0; round < 4; round++) {
            uint64_t f = rng_mix64(r ^ rng_mix64(key + round)) & mask;
            uint64_t t = l ^ f;
            l = r;
            r = t;
        }
        x = (l << half) | r;
    } while (x >= n);
    return x;
}

/* The prompts-file entry that the seq-th use of the file reads. */
static const struct prompt_entry *pick(const struct workload *w, uint64_t seq)
{
    uint64_t n = prompts_count(&w->prompts);
    uint64_t pos = seq % n;
    if (w->shuffle)
        pos = permute(pos, n, rng_mix64(w->seed ^ rng_mix64(seq / n + 0x13198a2e03707344ull)));
    return prompts_get(&w->prompts, (size_t)pos);
}

/* Appends s[0..n) as the inside of a JSON string (no quotes). */
static int json_escape(struct buf *b, const char *s, size_t n)
{
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        int rc = buf_append(b, s + run, i - run);
        if (rc)
            return rc;
        run = i + 1;
        switch (c) {
        case '"':
            rc = buf_append(b, "\\\"", 2);
            break;
        case '\\':
            rc = buf_append(b, "\\\\", 2);
            break;
        case '\n':
            rc = buf_append(b, "\\n", 2);
            break;
        case '\r':
            rc = buf_append(b, "\\r", 2);
            break;
        case '\t':
            rc = buf_append(b, "\\t", 2);
            break;
        default:
            rc = buf_appendf(b, "\\u%04x", c);
        }
        if (rc)
            return rc;
    }
    return buf_append(b, s + run, n - run);
}

struct cut {
    uint32_t want;
    uint32_t seen;
    size_t end; /* offset just past the want-th piece */
    const char *base;
};

static int cut_piece(const char *piece, size_t n, void *ctx)
{
    struct cut *c = ctx;
    c->seen++;
    c->end = (size_t)(piece - c->base) + n;
    return c->seen == c->want;
}

/*
 * Appends, JSON-escaped, the tag followed by the corpus from offset start on
 * (in a circle), cut after exactly `tokens` pieces of the token counter.
 * Cutting at a piece boundary keeps the count exact: the counter scans left
 * to right, and a prefix that ends on a piece boundary splits into exactly
 * the pieces before it (its look-ahead only decides where a piece ends, never
 * an earlier one). test_every_start_exact checks this from every start word.
 */
static int synth_append(const struct workload *w, const struct tokcount *tc, struct buf *body,
                        const char *tag, uint32_t tokens, size_t start)
{
    size_t tag_len = strlen(tag);
    size_t cap = tag_len + (size_t)tokens * 8 + 64;
    for (;;) {
        if (cap > WORKLOAD_MAX_BODY)
            return TS_TOOBIG;
        char *text = ts_malloc(cap);
        if (!text)
            return -ENOMEM;
        memcpy(text, tag, tag_len);
        size_t len = tag_len, off = start;
        while (len < cap) {
            size_t n = w->corpus_len - off;
            if (n > cap - len)
                n = cap - len;
            memcpy(text + len, w->corpus + off, n);
            len += n;
            off = (off + n) % w->corpus_len;
        }
        struct cut c = {tokens, 0, 0, text};
        int done;
        if (tc) { /* a real tokenizer: its longest prefix of `tokens` tokens */
            c.end = tokcount_prefix(tc, text, len, tokens);
            done = c.end < len; /* text was left over: the cut is final */
        } else {
            done = text_split_tokens(text, len, cut_piece, &c);
        }
        int rc = 0;
        if (done)
            rc = json_escape(body, text, c.end);
        ts_free(text);
        if (done || rc)
            return rc;
        cap *= 2;
    }
}

/* One synthetic text: draws its length and start word, appends it as a JSON
 * string and returns its token count. */
static int synth_string(const struct workload *w, const struct tokcount *tc, struct rng *r,
                        struct buf *body, const char *tag, uint32_t *tokens)
{
    uint32_t n = (uint32_t)dist_sample_uint(&w->input, r, 1, WORKLOAD_MAX_INPUT_TOKENS);
    size_t start = w->starts[rng_range(r, 0, w->nstarts - 1)];
    int rc = buf_append_char(body, '"');
    if (rc == 0)
        rc = synth_append(w, tc, body, tag, n, start);
    if (rc == 0)
        rc = buf_append_char(body, '"');
    *tokens = n;
    return rc;
}

static uint32_t add_sat(uint32_t a, uint32_t b)
{
    return a > UINT32_MAX - b ? UINT32_MAX : a + b;
}

static uint32_t user_msg_tokens(uint32_t content)
{
    return add_sat(content, CHAT_TOKENS_PER_MESSAGE + (uint32_t)text_count_tokens("user", 4));
}

/* The "messages" array of a chat body; returns the request's tokens. */
static int chat_messages(const struct workload *w, const struct tokcount *tc, uint64_t index,
                         struct rng *r, struct buf *body, struct work_item *out)
{
    int rc = buf_append_str(body, "\"messages\":");
    if (rc)
        return rc;
    const struct prompt_entry *e = w->has_prompts ? pick(w, index) : NULL;
    if (e && e->kind == PROMPT_MESSAGES) {
        out->prompt_tokens = e->tokens;
        return buf_append(body, prompts_json(&w->prompts, e), e->json_len);
    }
    rc = buf_append_char(body, '[');
    if (rc == 0 && w->system_msg)
        rc = buf_append(body, w->system_msg, w->system_msg_len);
    if (rc == 0)
        rc = buf_append_str(body, "{\"role\":\"user\",\"content\":");
    if (rc)
        return rc;
    uint32_t content;
    if (e) {
        content = e->tokens;
        rc = buf_append(body, prompts_json(&w->prompts, e), e->json_len);
    } else {
        char tag[32];
        snprintf(tag, sizeof(tag), "[r%" PRIu64 "] ", index);
        rc = synth_string(w, tc, r, body, tag, &content);
    }
    if (rc == 0)
        rc = buf_append_str(body, "}]");
    out->prompt_tokens =
        add_sat(add_sat(user_msg_tokens(content), w->system_tokens), CHAT_TOKENS_PER_REPLY);
    return rc;
}

static int completion_prompt(const struct workload *w, const struct tokcount *tc, uint64_t index,
                             struct rng *r, struct buf *body, struct work_item *out)
{
    int rc = buf_append_str(body, "\"prompt\":");
    if (rc)
        return rc;
    if (w->has_prompts) {
        const struct prompt_entry *e = pick(w, index);
        out->prompt_tokens = e->tokens;
        return buf_append(body, prompts_json(&w->prompts, e), e->json_len);
    }
    char tag[32];
    snprintf(tag, sizeof(tag), "[r%" PRIu64 "] ", index);
    return synth_string(w, tc, r, body, tag, &out->prompt_tokens);
}

static int embedding_input(const struct workload *w, const struct tokcount *tc, uint64_t index,
                           struct rng *r, struct buf *body, struct work_item *out)
{
    int rc = buf_append_str(body, "\"input\":[");
    for (uint32_t k = 0; rc == 0 && k < w->embed_batch; k++) {
        if (k > 0)
            rc = buf_append_char(body, ',');
        if (rc)
            break;
        uint32_t tokens;
        if (w->has_prompts) {
            const struct prompt_entry *e = pick(w, index * w->embed_batch + k);
            tokens = e->tokens;
            rc = buf_append(body, prompts_json(&w->prompts, e), e->json_len);
        } else {
            char tag[48];
            if (w->embed_batch == 1)
                snprintf(tag, sizeof(tag), "[r%" PRIu64 "] ", index);
            else
                snprintf(tag, sizeof(tag), "[r%" PRIu64 ".%" PRIu32 "] ", index, k);
            rc = synth_string(w, tc, r, body, tag, &tokens);
        }
        out->prompt_tokens = add_sat(out->prompt_tokens, tokens);
    }
    if (rc == 0)
        rc = buf_append_char(body, ']');
    return rc;
}

int workload_item(const struct workload *w, uint64_t index, struct work_item *out)
{
    return workload_item_tc(w, index, NULL, out);
}

int workload_item_tc(const struct workload *w, uint64_t index, const struct tokcount *tc,
                     struct work_item *out)
{
    memset(out, 0, sizeof(*out));
    out->index = index;
    out->stream = w->stream;
    if (w->endpoint == WORKLOAD_VECTOR_SEARCH && w->vector_prefix)
        return vector_template_item(w, index, out);
    if (w->replay) {
        const struct replay_item *it = &w->replay[index % w->nreplay];
        out->body = ts_malloc(it->body_len + 1);
        if (!out->body)
            return -ENOMEM;
        memcpy(out->body, it->body, it->body_len + 1);
        out->body_len = it->body_len;
        out->stream = it->stream;
        out->max_tokens = it->max_tokens;
        out->prompt_tokens = it->prompt_tokens;
        out->reference = it->reference;
        return 0;
    }
    struct rng r;
    item_rng(w, index, &r);
    struct buf body;
    buf_init(&body, WORKLOAD_MAX_BODY);
    int rc = buf_append(&body, w->head, w->head_len);
    if (rc)
        goto out_free;
    switch (w->endpoint) {
    case WORKLOAD_CHAT:
        rc = chat_messages(w, tc, index, &r, &body, out);
        break;
    case WORKLOAD_COMPLETIONS:
        rc = completion_prompt(w, tc, index, &r, &body, out);
        break;
    case WORKLOAD_EMBEDDINGS:
        rc = embedding_input(w, tc, index, &r, &body, out);
        break;
    case WORKLOAD_VECTOR_SEARCH:
        rc = vector_query(w, index, &body);
        break;
    }
    if (rc)
        goto out_free;
    if (is_gen(w->endpoint)) {
        const struct prompt_entry *e = w->has_prompts ? pick(w, index) : NULL;
        if (w->fixed_max)
            out->max_tokens = w->max_tokens;
        else if (e && e->max_tokens)
            out->max_tokens = e->max_tokens;
        else
            out->max_tokens =
                (uint32_t)dist_sample_uint(&w->output, &r, 1, WORKLOAD_MAX_OUTPUT_TOKENS);
        if (w->max_key) {
            rc = buf_append(&body, w->max_key, w->max_key_len);
            if (rc == 0)
                rc = buf_appendf(&body, "%" PRIu32, out->max_tokens);
        }
        if (e)
            out->reference = prompts_reference(&w->prompts, e);
    }
    if (rc == 0)
        rc = buf_append(&body, w->tail, w->tail_len);
    if (rc)
        goto out_free;
    out->body = buf_take(&body, &out->body_len);
    return 0;

out_free:
    buf_release(&body);
    memset(out, 0, sizeof(*out));
    return rc;
}

void work_item_release(struct work_item *it)
{
    if (!it)
        return;
    ts_free(it->body);
    memset(it, 0, sizeof(*it));
}

/* ---- set-up ---- */

__attribute__((format(printf, 4, 5))) static int init_fail(char *err, size_t errlen, int code,
                                                           const char *fmt, ...)
{
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* Serialises v as compact JSON into a heap string (ts_free it). */
static int dump_json(const json_t *v, size_t flags, char **out, size_t *len)
{
    size_t n = json_dumpb(v, NULL, 0, flags);
    if (n == 0)
        return -EINVAL;
    char *s = ts_malloc(n + 1);
    if (!s)
        return -ENOMEM;
    if (json_dumpb(v, s, n, flags) != n) {
        ts_free(s);
        return -EINVAL;
    }
    s[n] = '\0';
    *out = s;
    *len = n;
    return 0;
}

/* Appends v as compact JSON, reals with 15 digits when they read back exactly
 * that way (0.7, not 0.69999999999999996), else with 17. */
static int append_json(struct buf *b, const json_t *v)
{
    const size_t flags = JSON_COMPACT | JSON_ENCODE_ANY;
    char *s;
    size_t n;
    int rc = dump_json(v, flags | JSON_REAL_PRECISION(15), &s, &n);
    if (rc)
        return rc;
    json_t *back = json_loadb(s, n, JSON_DECODE_ANY, NULL);
    bool same = back && json_equal(back, v);
    json_decref(back);
    if (!same) {
        ts_free(s);
        rc = dump_json(v, flags, &s, &n);
        if (rc)
            return rc;
    }
    rc = buf_append(b, s, n);
    ts_free(s);
    return rc;
}

/* Appends s as a JSON string (with quotes); -EINVAL if s is not UTF-8. */
static int append_json_str(struct buf *b, const char *s)
{
    json_t *v = json_string(s);
    if (!v)
        return -EINVAL;
    int rc = append_json(b, v);
    json_decref(v);
    return rc;
}

/* Moves a built fragment out of b into *out. */
static int take_fragment(struct buf *b, char **out, size_t *len)
{
    *out = buf_take(b, len);
    return *out ? 0 : -ENOMEM;
}

static bool is_content_key(const char *k)
{
    return strcmp(k, "messages") == 0 || strcmp(k, "prompt") == 0 || strcmp(k, "input") == 0 ||
           strcmp(k, "vector") == 0;
}

/*
 * Reads the overrides: which generated keys they replace (*replaced, enum
 * gen_key), and what they say about streaming and max tokens.
 */
static int read_overrides(struct workload *w, const json_t *ov, const char *max_key,
                          unsigned *replaced, char *err, size_t errlen)
{
    *replaced = 0;
    if (!ov)
        return 0;
    if (!json_is_object(ov))
        return init_fail(err, errlen, -EINVAL, "body overrides: expected a JSON object");
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)ov, k, v)
    {
        if (is_content_key(k))
            return init_fail(err, errlen, -EINVAL,
                             "body overrides: \"%s\" is written by the workload and cannot be "
                             "overridden",
                             k);
        if (strcmp(k, "model") == 0)
            *replaced |= GEN_MODEL;
        else if (strcmp(k, "ignore_eos") == 0)
            *replaced |= GEN_IGNORE_EOS;
        else if (strcmp(k, "stream_options") == 0)
            *replaced |= GEN_STREAM_OPTIONS;
        if (strcmp(k, "stream") == 0) {
            *replaced |= GEN_STREAM;
            if (!json_is_boolean(v) && !json_is_null(v))
                return init_fail(err, errlen, -EINVAL,
                                 "body overrides: \"stream\" must be true, false or null");
            w->stream = json_is_true(v);
        }
        if (strcmp(k, max_key) == 0 && is_gen(w->endpoint)) {
            *replaced |= GEN_MAX_TOKENS;
            w->fixed_max = true;
            if (json_is_null(v))
                w->max_tokens = 0;
            else if (json_is_integer(v) && json_integer_value(v) >= 0 &&
                     json_integer_value(v) <= (json_int_t)WORKLOAD_MAX_OUTPUT_TOKENS)
                w->max_tokens = (uint32_t)json_integer_value(v);
            else
                return init_fail(err, errlen, -EINVAL,
                                 "body overrides: \"%s\" must be null or an integer from 0 to %u",
                                 max_key, WORKLOAD_MAX_OUTPUT_TOKENS);
        }
    }
    return 0;
}

/* Serialises the fixed parts of every body. */
static int build_fragments(struct workload *w, const struct workload_cfg *cfg, const char *max_key,
                           unsigned replaced, char *err, size_t errlen)
{
    struct buf b;
    buf_init(&b, WORKLOAD_MAX_BODY);
    int rc = buf_append_char(&b, '{');
    if (rc == 0 && cfg->model && !(replaced & GEN_MODEL) &&
        cfg->endpoint != WORKLOAD_VECTOR_SEARCH) {
        rc = buf_append_str(&b, "\"model\":");
        if (rc == 0 && (rc = append_json_str(&b, cfg->model)) == -EINVAL)
            rc = init_fail(err, errlen, -EINVAL, "the model name is not valid UTF-8");
        if (rc == 0)
            rc = buf_append_char(&b, ',');
    }
    if (rc == 0)
        rc = take_fragment(&b, &w->head, &w->head_len);

    if (rc == 0 && cfg->system_prompt) {
        rc = buf_append_str(&b, "{\"role\":\"system\",\"content\":");
        if (rc == 0 && (rc = append_json_str(&b, cfg->system_prompt)) == -EINVAL)
            rc = init_fail(err, errlen, -EINVAL, "the system prompt is not valid UTF-8");
        if (rc == 0)
            rc = buf_append_str(&b, "},");
        if (rc == 0)
            rc = take_fragment(&b, &w->system_msg, &w->system_msg_len);
        size_t t = CHAT_TOKENS_PER_MESSAGE + text_count_tokens("system", 6) +
                   text_count_tokens(cfg->system_prompt, strlen(cfg->system_prompt));
        w->system_tokens = t > UINT32_MAX ? UINT32_MAX : (uint32_t)t;
    }

    if (rc == 0 && is_gen(w->endpoint) && !(replaced & GEN_MAX_TOKENS)) {
        rc = buf_append_char(&b, ',');
        if (rc == 0 && (rc = append_json_str(&b, max_key)) == -EINVAL)
            rc = init_fail(err, errlen, -EINVAL, "the max tokens key is not valid UTF-8");
        if (rc == 0)
            rc = buf_append_char(&b, ':');
        if (rc == 0)
            rc = take_fragment(&b, &w->max_key, &w->max_key_len);
    }

    if (rc == 0 && is_gen(w->endpoint)) {
        if (cfg->ignore_eos && !(replaced & GEN_IGNORE_EOS))
            rc = buf_append_str(&b, ",\"ignore_eos\":true");
        if (rc == 0 && w->stream && !(replaced & GEN_STREAM))
            rc = buf_append_str(&b, ",\"stream\":true");
        if (rc == 0 && w->stream && cfg->include_usage && !(replaced & GEN_STREAM_OPTIONS))
            rc = buf_append_str(&b, ",\"stream_options\":{\"include_usage\":true}");
    }
    if (rc == 0 && cfg->body_overrides) {
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)cfg->body_overrides, k, v)
        {
            if (json_is_null(v))
                continue;
            rc = buf_append_char(&b, ',');
            if (rc == 0 && (rc = append_json_str(&b, k)) == -EINVAL)
                rc = init_fail(err, errlen, -EINVAL, "body overrides: a key is not valid UTF-8");
            if (rc == 0)
                rc = buf_append_char(&b, ':');
            if (rc == 0)
                rc = append_json(&b, v);
            if (rc)
                break;
        }
    }
    if (rc == 0)
        rc = buf_append_char(&b, '}');
    if (rc == 0)
        rc = take_fragment(&b, &w->tail, &w->tail_len);
    buf_release(&b);
    if (rc == -ENOMEM)
        init_fail(err, errlen, rc, "out of memory");
    else if (rc == TS_TOOBIG)
        init_fail(err, errlen, rc, "the body overrides are larger than %zu bytes",
                  WORKLOAD_MAX_BODY);
    return rc;
}

/* Finds the start of every word of the corpus: synthetic texts begin there. */
static int index_corpus(struct workload *w)
{
    w->corpus = corpus_text(&w->corpus_len);
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        n = 0;
        for (size_t i = 0; i < w->corpus_len; i++) {
            char c = w->corpus[i];
            char prev = i ? w->corpus[i - 1] : '\n';
            bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
            if (alpha && (prev == ' ' || prev == '\n')) {
                if (pass == 1)
                    w->starts[n] = (uint32_t)i;
                n++;
            }
        }
        if (pass == 0) {
            w->starts = ts_malloc(n * sizeof(*w->starts));
            if (!w->starts)
                return -ENOMEM;
        }
    }
    w->nstarts = n;
    return 0;
}

static int load_prompts(struct workload *w, const struct workload_cfg *cfg, char *err,
                        size_t errlen)
{
    unsigned flags = w->endpoint == WORKLOAD_CHAT ? 0 : PROMPTS_TEXT_ONLY;
    int rc;
    if (cfg->prompts_data)
        rc = prompts_parse(&w->prompts, cfg->prompts_data, cfg->prompts_len, cfg->prompts_path,
                           flags, err, errlen);
    else
        rc = prompts_load(&w->prompts, cfg->prompts_path, flags, err, errlen);
    if (rc == 0)
        w->has_prompts = true;
    return rc;
}

static int parse_dist(struct dist *d, const char *spec, const char *what, char *err, size_t errlen)
{
    char msg[256] = "";
    int rc = dist_parse(d, spec, msg, sizeof(msg));
    if (rc)
        init_fail(err, errlen, rc, "%s: %s", what, rc == -ENOMEM ? "out of memory" : msg);
    return rc;
}

int workload_init(struct workload *w, const struct workload_cfg *cfg, char *err, size_t errlen)
{
    memset(w, 0, sizeof(*w));
    prompts_init(&w->prompts);
    w->endpoint = cfg->endpoint;
    w->seed = cfg->seed;
    w->shuffle = cfg->shuffle;
    w->embed_batch = cfg->embed_batch ? cfg->embed_batch : 1;
    w->stream = cfg->stream && is_gen(cfg->endpoint);
    w->vectors = cfg->vectors;
    w->vector_k = cfg->vector_k ? cfg->vector_k : 10;
    w->vector_prefix = cfg->vector_suffix ? cfg->vector_prefix : NULL;
    w->vector_suffix = cfg->vector_prefix ? cfg->vector_suffix : NULL;
    const char *max_key = cfg->max_tokens_key ? cfg->max_tokens_key : "max_tokens";

    int rc;
    if (cfg->endpoint != WORKLOAD_CHAT && cfg->endpoint != WORKLOAD_COMPLETIONS &&
        cfg->endpoint != WORKLOAD_EMBEDDINGS && cfg->endpoint != WORKLOAD_VECTOR_SEARCH)
        return init_fail(err, errlen, -EINVAL, "unknown endpoint %d", (int)cfg->endpoint);
    if (cfg->endpoint == WORKLOAD_VECTOR_SEARCH &&
        (!cfg->vectors || !cfg->vectors->n || !cfg->vectors->v || w->vector_k > VECSET_MAX_K))
        return init_fail(err, errlen, -EINVAL,
                         "vector search needs query vectors and k from 1 to %u", VECSET_MAX_K);
    if (w->embed_batch > WORKLOAD_MAX_EMBED_BATCH)
        return init_fail(err, errlen, -EINVAL, "embeddings batch %" PRIu32 " is over %u",
                         w->embed_batch, WORKLOAD_MAX_EMBED_BATCH);
    if (cfg->system_prompt && cfg->endpoint != WORKLOAD_CHAT)
        return init_fail(err, errlen, -EINVAL, "a system prompt needs the chat endpoint");

    rc = parse_dist(&w->input, cfg->input_tokens ? cfg->input_tokens : DEFAULT_INPUT_TOKENS,
                    "input tokens", err, errlen);
    if (rc)
        goto out_release;
    rc = parse_dist(&w->output, cfg->output_tokens ? cfg->output_tokens : DEFAULT_OUTPUT_TOKENS,
                    "output tokens", err, errlen);
    if (rc)
        goto out_release;
    unsigned replaced;
    rc = read_overrides(w, cfg->body_overrides, max_key, &replaced, err, errlen);
    if (rc)
        goto out_release;
    rc = build_fragments(w, cfg, max_key, replaced, err, errlen);
    if (rc)
        goto out_release;
    if (cfg->prompts_path || cfg->prompts_data) {
        rc = load_prompts(w, cfg, err, errlen);
        if (rc)
            goto out_release;
    }
    rc = index_corpus(w);
    if (rc) {
        init_fail(err, errlen, rc, "out of memory");
        goto out_release;
    }
    return 0;

out_release:
    workload_release(w);
    return rc;
}

void workload_release(struct workload *w)
{
    for (size_t i = 0; i < w->nreplay; i++) {
        ts_free(w->replay[i].body);
        ts_free(w->replay[i].reference);
    }
    ts_free(w->replay);
    dist_release(&w->input);
    dist_release(&w->output);
    ts_free(w->head);
    ts_free(w->system_msg);
    ts_free(w->max_key);
    ts_free(w->tail);
    ts_free(w->starts);
    prompts_release(&w->prompts);
    memset(w, 0, sizeof(*w));
    prompts_init(&w->prompts);
}
