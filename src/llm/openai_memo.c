/*
 * openai_memo.c - a stream's chunks given from its last one's values when
 * only their text differs (openai_memo.h).
 */
#include "llm/openai_memo.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/chars.h"
#include "base/utf8.h"

enum memo_field { MF_CONTENT, MF_REASONING, MF_TEXT };

#define MEMO_STRIKES    3 /* misses in a row before a stream stops trying */
#define MEMO_CANDIDATES 4 /* places of the text checked when learning */

struct openai_memo {
    struct openai_chunk chunk;   /* the template's values; .choices is &choice */
    struct openai_choice choice; /* its choice; the text is set for each chunk given */
    uint32_t pre;                /* bytes before the text's string token */
    uint32_t suf;                /* bytes after it */
    uint8_t field;               /* enum memo_field: which text varies */
    uint8_t strikes;             /* misses and failed learns since the last hit */
    bool ready;                  /* pre, suf and the values are a template */
    bool off;                    /* gave up on this stream */
    char bytes[];                /* pre bytes, suf bytes, then the values' strings */
};

/* Whether s[0..n) is the inside of a JSON string without escapes: no '"',
 * '\\' or control character, valid UTF-8. Its value is then its bytes. */
static bool plain_text(const char *s, size_t n)
{
    bool ascii = true;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == '"' || c == '\\')
            return false;
        ascii &= c < 0x80;
    }
    return ascii || utf8_invalid_at(s, n) == n;
}

/* The varying text's slot in a choice. */
static const char **field_text(struct openai_choice *c, unsigned field, size_t **len)
{
    switch (field) {
    case MF_CONTENT:
        *len = &c->content_len;
        return &c->content;
    case MF_REASONING:
        *len = &c->reasoning_len;
        return &c->reasoning;
    default:
        *len = &c->text_len;
        return &c->text;
    }
}

static unsigned field_flag(unsigned field)
{
    return field == MF_CONTENT     ? OPENAI_CHUNK_CONTENT
           : field == MF_REASONING ? OPENAI_CHUNK_REASONING
                                   : OPENAI_CHUNK_TEXT;
}

/* Sets the varying text of chunk c (choice ch) to t (tn bytes, NUL after). */
static void set_text(struct openai_chunk *c, struct openai_choice *ch, unsigned field,
                     const char *t, size_t tn)
{
    size_t *len;
    const char **text = field_text(ch, field, &len);
    *text = t;
    *len = tn;
    c->flags = (c->flags & ~field_flag(field)) | (tn ? field_flag(field) : 0);
}

/* Gives the memo's values with text t (tn plain bytes) as *out, the text
 * copied to d's arena: what openai_decode_chunk() gives for that chunk. */
static int give(struct openai_decoder *d, struct openai_memo *m, const char *t, size_t tn,
                struct openai_chunk *out)
{
    if (d->arena_cap < tn + 1) {
        char *a = ts_realloc(d->arena, tn + 1);
        if (!a)
            return -ENOMEM;
        d->arena = a;
        d->arena_cap = tn + 1;
    }
    if (d->root) { /* the last decode's document, as decode() drops it */
        json_decref(d->root);
        d->root = NULL;
    }
    d->err[0] = '\0';
    memcpy(d->arena, t, tn);
    d->arena[tn] = '\0';
    d->arena_used = tn + 1;
    set_text(&m->chunk, &m->choice, m->field, d->arena, tn);
    *out = m->chunk;
    out->choices = &m->choice;
    return 0;
}

enum hit { HIT, MISS, MISS_TEXT };

/* Gives a chunk from the memo when its bytes fit the template (HIT); MISS
 * when they do not, MISS_TEXT when only its text does not (escapes, not a
 * string: the template stays, the chunk is decoded). */
static enum hit hit(struct openai_decoder *d, struct openai_memo *m, const char *s, size_t n,
                    struct openai_chunk *out)
{
    if (!m->ready || n > OPENAI_MEMO_MAX_TEXT || n < (size_t)m->pre + m->suf + 2)
        return MISS;
    if (memcmp(s, m->bytes, m->pre) != 0 || memcmp(s + n - m->suf, m->bytes + m->pre, m->suf) != 0)
        return MISS;
    const char *t = s + m->pre;
    size_t tn = n - m->pre - m->suf;
    if (t[0] != '"' || t[tn - 1] != '"' || !plain_text(t + 1, tn - 2) ||
        give(d, m, t + 1, tn - 2, out) != 0)
        return MISS_TEXT;
    return HIT;
}

/* The text that varies in a decoded chunk that can be a template, or -1. */
static int template_field(const struct openai_chunk *c, size_t n)
{
    const unsigned not_here = OPENAI_CHUNK_DONE | OPENAI_CHUNK_ERROR | OPENAI_CHUNK_TOOL_CALLS |
                              OPENAI_CHUNK_FINISH | OPENAI_CHUNK_USAGE | OPENAI_CHUNK_EMBEDDINGS;
    if (n > OPENAI_MEMO_MAX_TEXT || (c->flags & not_here) || c->n_choices != 1 || c->n_embeddings ||
        c->error.message || c->error.type || c->error.param || c->error.code ||
        c->choices[0].n_tool_calls || c->choices[0].finish_reason)
        return -1;
    const struct openai_choice *ch = &c->choices[0];
    return ch->content ? MF_CONTENT : ch->reasoning ? MF_REASONING : ch->text ? MF_TEXT : -1;
}

/* Room the strings of c take in a memo. */
static size_t strings_size(const struct openai_chunk *c)
{
    const struct openai_choice *ch = &c->choices[0];
    size_t z = 0;
    const char *s[] = {c->object_str, c->id, c->model, ch->role};
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
        z += s[i] ? strlen(s[i]) + 1 : 0;
    return z + (ch->content ? ch->content_len + 1 : 0) +
           (ch->reasoning ? ch->reasoning_len + 1 : 0) + (ch->text ? ch->text_len + 1 : 0);
}

static const char *put(char **at, const char *s, size_t n)
{
    if (!s)
        return NULL;
    char *p = *at;
    memcpy(p, s, n);
    p[n] = '\0';
    *at += n + 1;
    return p;
}

/* Copies c's values into m, from m->bytes + room on. */
static void keep_values(struct openai_memo *m, const struct openai_chunk *c, size_t room)
{
    const struct openai_choice *ch = &c->choices[0];
    char *at = m->bytes + room;
    m->chunk = *c;
    m->choice = *ch;
    m->chunk.choices = &m->choice;
    m->chunk.object_str = put(&at, c->object_str, c->object_str ? strlen(c->object_str) : 0);
    m->chunk.id = put(&at, c->id, c->id ? strlen(c->id) : 0);
    m->chunk.model = put(&at, c->model, c->model ? strlen(c->model) : 0);
    m->choice.role = put(&at, ch->role, ch->role ? strlen(ch->role) : 0);
    m->choice.content = put(&at, ch->content, ch->content_len);
    m->choice.reasoning = put(&at, ch->reasoning, ch->reasoning_len);
    m->choice.text = put(&at, ch->text, ch->text_len);
}

/*
 * Whether the text's token is at s + at (tn bytes of text between quotes):
 * the chunk decoded with another text there must give m's values with the
 * probe as the text. Uses d (its last result is lost).
 */
static bool token_at(struct openai_decoder *d, struct openai_memo *m, const char *s, size_t n,
                     size_t at, size_t tn)
{
    char buf[OPENAI_MEMO_MAX_TEXT + 8];
    const char *probe = tn == 1 && s[at + 1] == '~' ? "~~" : "~";
    size_t pn = strlen(probe), rest = n - at - tn - 2;
    memcpy(buf, s, at);
    buf[at] = '"';
    memcpy(buf + at + 1, probe, pn);
    buf[at + 1 + pn] = '"';
    memcpy(buf + at + pn + 2, s + at + tn + 2, rest);
    struct openai_chunk r;
    if (openai_decode_chunk(d, buf, at + pn + 2 + rest, &r) || r.n_choices != 1)
        return false;
    struct openai_choice ch = r.choices[0];
    size_t *len;
    const char **text = field_text(&ch, m->field, &len);
    if (!*text || *len != pn || memcmp(*text, probe, pn) != 0)
        return false;
    size_t *mlen;
    const char *mtext = *field_text(&m->choice, m->field, &mlen);
    set_text(&r, &ch, m->field, mtext, *mlen);
    r.choices = &ch;
    return openai_chunk_same(&r, &m->chunk);
}

/* Counts a miss or failed learn; off after MEMO_STRIKES, the memo shrunk. */
static void strike(struct openai_memo **mp)
{
    struct openai_memo *m = *mp;
    m->ready = false;
    if (++m->strikes < MEMO_STRIKES)
        return;
    m->off = true;
    struct openai_memo *small = ts_realloc(m, sizeof(*m));
    if (small)
        *mp = small;
}

/*
 * Makes a template of the chunk s (n bytes) that decoded to *out (text
 * field f), and gives *out again from it; when no place of the text checks
 * out, *out is decoded again (the checks used d). Returns that decode's
 * code.
 */
static int learn(struct openai_decoder *d, struct openai_memo **mp, const char *s, size_t n,
                 struct openai_chunk *out, int f)
{
    size_t *tlen;
    const char *t = *field_text((struct openai_choice *)&out->choices[0], (unsigned)f, &tlen);
    if (!plain_text(t, *tlen)) { /* its token has escapes: not here */
        if (*mp)
            strike(mp);
        return 0;
    }
    struct openai_memo *m = ts_realloc(*mp, sizeof(*m) + n + strings_size(out));
    if (!m)
        return 0;
    if (!*mp)
        memset(m, 0, sizeof(*m));
    *mp = m;
    m->field = (uint8_t)f;
    keep_values(m, out, n);
    t = *field_text(&m->choice, (unsigned)f, &tlen); /* out's strings go with the checks */
    size_t tn = *tlen;
    const char *end = s + n, *q = s;
    int tries = 0;
    while (tries < MEMO_CANDIDATES && (q = memchr(q, '"', (size_t)(end - q))) != NULL &&
           (size_t)(end - q) >= tn + 2) {
        if (memcmp(q + 1, t, tn) != 0 || q[tn + 1] != '"') {
            q++;
            continue;
        }
        tries++;
        size_t at = (size_t)(q - s), rest = n - at - tn - 2;
        if (token_at(d, m, s, n, at, tn)) {
            memcpy(m->bytes, s, at);
            memmove(m->bytes + at, s + at + tn + 2, rest);
            m->pre = (uint32_t)at;
            m->suf = (uint32_t)rest;
            m->ready = true;
            if (give(d, m, s + at + 1, tn, out) == 0)
                return 0;
            m->ready = false;
            return openai_decode_chunk(d, s, n, out);
        }
        q++;
    }
    strike(mp);
    return tries ? openai_decode_chunk(d, s, n, out) : 0;
}

int openai_decode_chunk_memo(struct openai_decoder *d, struct openai_memo **memo, const char *data,
                             size_t len, struct openai_chunk *out)
{
    const char *s = data;
    size_t n = len;
    while (n && chars_is_json_space(*s)) {
        s++;
        n--;
    }
    while (n && chars_is_json_space(s[n - 1]))
        n--;
    struct openai_memo *m = *memo;
    enum hit h = m ? hit(d, m, s, n, out) : MISS;
    if (h == HIT) {
        m->strikes = 0;
        d->n_memo++;
        return 0;
    }
    int rc = openai_decode_chunk(d, data, len, out);
    if (rc || h == MISS_TEXT || (m && m->off))
        return rc;
    int f = template_field(out, n);
    if (f < 0)
        return 0; /* usage, finish, ...: no miss, the template stays */
    if (m && m->ready) {
        strike(memo);
        if ((*memo)->off)
            return 0;
    }
    return learn(d, memo, s, n, out, f);
}

void openai_memo_free(struct openai_memo *memo)
{
    ts_free(memo);
}
