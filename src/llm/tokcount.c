/*
 * tokcount.c - token counts by the approximation or by a real tokenizer.
 */
#include "llm/tokcount.h"

#include <stdbool.h>

#include "base/alloc.h"
#include "base/log.h"
#include "llm/text.h"
#include "llm/tokenizer.h"

static size_t approx_count(const struct tokcount *tc, const char *s, size_t n)
{
    (void)tc;
    return text_count_tokens(s, n);
}

struct cut {
    const char *base;
    size_t left;
    size_t end;
};

static int cut_one(const char *piece, size_t n, void *ctx)
{
    struct cut *c = ctx;
    if (!c->left)
        return 1;
    c->left--;
    c->end = (size_t)(piece - c->base) + n;
    return 0;
}

static size_t approx_prefix(const struct tokcount *tc, const char *s, size_t n, size_t tokens)
{
    (void)tc;
    struct cut c = {.base = s, .left = tokens, .end = 0};
    if (!tokens)
        return 0;
    (void)text_split_tokens(s, n, cut_one, &c);
    return c.end;
}

static const struct tokcount approx = {
    .count = approx_count,
    .prefix = approx_prefix,
    .arg = NULL,
};

const struct tokcount *tokcount_approx(void)
{
    return &approx;
}

struct tk {
    struct tokcount tc; /* first: the public part */
    const struct tokenizer *t;
    struct tokenizer_session *s;
    struct tokenizer_ids ids;
    struct buf out;
    bool warned;
};

static void warn_once(struct tk *k, int rc)
{
    if (!k->warned)
        ts_warn("tokenizer: %s; counting by the approximation instead", ts_strerror(rc));
    k->warned = true;
}

static size_t tk_count(const struct tokcount *tc, const char *s, size_t n)
{
    struct tk *k = (struct tk *)tc;
    size_t count = 0;
    int rc = tokenizer_count(k->s, s, n, TOKENIZER_SPECIAL, &count);
    if (rc) {
        warn_once(k, rc);
        return text_count_tokens(s, n);
    }
    return count;
}

/*
 * Encodes, keeps the first `tokens` ids and decodes them: the decoded bytes
 * are a prefix of s for byte-level BPE (a SentencePiece decode may differ in
 * its leading space, so the length is clamped to n). A cut inside a UTF-8
 * sequence is moved back to the sequence's start.
 */
static size_t tk_prefix(const struct tokcount *tc, const char *s, size_t n, size_t tokens)
{
    struct tk *k = (struct tk *)tc;
    if (!tokens)
        return 0;
    k->ids.len = 0;
    int rc = tokenizer_encode(k->s, s, n, TOKENIZER_SPECIAL, &k->ids);
    if (rc) {
        warn_once(k, rc);
        return approx_prefix(tc, s, n, tokens);
    }
    if (k->ids.len <= tokens)
        return n;
    buf_reset(&k->out);
    if ((rc = tokenizer_decode(k->t, k->ids.v, tokens, &k->out))) {
        warn_once(k, rc);
        return approx_prefix(tc, s, n, tokens);
    }
    size_t end = k->out.len < n ? k->out.len : n;
    while (end > 0 && end < n && ((unsigned char)s[end] & 0xC0) == 0x80)
        end--;
    return end;
}

int tokcount_tokenizer_new(const struct tokenizer *t, struct tokcount **out)
{
    struct tk *k = ts_calloc(1, sizeof(*k));
    if (!k)
        return -ENOMEM;
    k->s = tokenizer_session_new(t);
    if (!k->s) {
        ts_free(k);
        return -ENOMEM;
    }
    k->t = t;
    tokenizer_ids_init(&k->ids, 0);
    buf_init(&k->out, TOKENIZER_MAX_TEXT);
    k->tc.count = tk_count;
    k->tc.prefix = tk_prefix;
    k->tc.arg = k;
    *out = &k->tc;
    return 0;
}

void tokcount_free(struct tokcount *tc)
{
    if (!tc || tc == &approx)
        return;
    struct tk *k = (struct tk *)tc;
    tokenizer_session_free(k->s);
    tokenizer_ids_release(&k->ids);
    buf_release(&k->out);
    ts_free(k);
}

size_t tokcount_count(const struct tokcount *tc, const char *s, size_t n)
{
    if (!tc)
        tc = &approx;
    return tc->count(tc, s, n);
}

size_t tokcount_prefix(const struct tokcount *tc, const char *s, size_t n, size_t tokens)
{
    if (!tc)
        tc = &approx;
    return tc->prefix(tc, s, n, tokens);
}
