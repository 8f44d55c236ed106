/*
 * openai_memo.c - a stream's chunks given from its last one's values when
 * only their text differs (openai_memo.h).
 */
#include "llm/openai_memo.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/utf8.h"

enum memo_field { MF_CONTENT, MF_REASONING, MF_TEXT };

#define MEMO_STRIKES    3 /* misses in a row before a stream stops trying */
#define MEMO_CANDIDATES 4 /* places of the text checked when learning */

/*
 * What a chunk given from the memo reads, together and before the bytes it
 * compares: with a thousand streams a stream's memo has left the cache by
 * its next chunk, and each line read is a miss (a whole struct openai_chunk
 * and choice kept here made the client slower at 1,000 streams than
 * parsing, ~9 lines a chunk against ~5 now).
 */
struct openai_memo {
    uint16_t pre;    /* bytes before the text's string token */
    uint16_t suf;    /* bytes after it */
    uint8_t field;   /* enum memo_field: which text varies; the others are absent */
    uint8_t strikes; /* misses and failed learns since the last hit */
    bool ready;      /* the fields below and the bytes are a template */
    bool off;        /* gave up on this stream */
    unsigned flags;  /* the template's flags but the text's own */
    int object;      /* enum openai_object */
    int64_t created; /* -1 if absent */
    int64_t index;   /* choices[0].index */
    const char *object_str, *id, *model, *role; /* in bytes, after pre + suf */
    char bytes[];                               /* pre bytes, suf bytes, then the strings */
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

/* The decoder's first choice, or NULL without memory. */
static struct openai_choice *first_choice(struct openai_decoder *d)
{
    if (!d->choices_cap) {
        struct openai_choice *c = ts_realloc(d->choices, sizeof(*c));
        if (!c)
            return NULL;
        d->choices = c;
        d->choices_cap = 1;
    }
    return d->choices;
}

/* The memo's values with text t (tn bytes, NUL after) put in *out (cleared
 * already), its choice in *ch. */
static void fill(const struct openai_memo *m, const char *t, size_t tn, struct openai_chunk *out,
                 struct openai_choice *ch)
{
    static const struct openai_choice no_choice = {.index = -1};
    *ch = no_choice;
    ch->index = m->index;
    ch->role = m->role;
    out->flags = m->flags;
    out->object = (enum openai_object)m->object;
    out->object_str = m->object_str;
    out->id = m->id;
    out->model = m->model;
    out->created = m->created;
    out->choices = ch;
    out->n_choices = 1;
    set_text(out, ch, m->field, t, tn);
}

/* Gives the memo's values with text t (tn plain bytes) as *out, the text
 * copied to d's arena and the choice to d's: what openai_decode_chunk()
 * gives for that chunk. */
static int give(struct openai_decoder *d, const struct openai_memo *m, const char *t, size_t tn,
                struct openai_chunk *out)
{
    struct openai_choice *ch = first_choice(d);
    if (!ch)
        return -ENOMEM;
    if (d->arena_cap < tn + 1) {
        char *a = ts_realloc(d->arena, tn + 1);
        if (!a)
            return -ENOMEM;
        d->arena = a;
        d->arena_cap = tn + 1;
    }
    openai_decoder_clear(d, out);
    memcpy(d->arena, t, tn);
    d->arena[tn] = '\0';
    d->arena_used = tn + 1;
    fill(m, d->arena, tn, out, ch);
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
    if (!!ch->content + !!ch->reasoning + !!ch->text != 1)
        return -1; /* one text varies; the others are absent */
    return ch->content ? MF_CONTENT : ch->reasoning ? MF_REASONING : MF_TEXT;
}

/* Room the strings of c take in a memo. */
static size_t strings_size(const struct openai_chunk *c)
{
    const char *s[] = {c->object_str, c->id, c->model, c->choices[0].role};
    size_t z = 0;
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
        z += s[i] ? strlen(s[i]) + 1 : 0;
    return z;
}

static const char *put(char **at, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s);
    char *p = *at;
    memcpy(p, s, n + 1);
    *at += n + 1;
    return p;
}

/* Copies c's values into m, its strings from m->bytes + room on. */
static void keep_values(struct openai_memo *m, const struct openai_chunk *c, size_t room)
{
    char *at = m->bytes + room;
    m->flags = c->flags;
    m->object = (int)c->object;
    m->created = c->created;
    m->index = c->choices[0].index;
    m->object_str = put(&at, c->object_str);
    m->id = put(&at, c->id);
    m->model = put(&at, c->model);
    m->role = put(&at, c->choices[0].role);
}

/* Whether the chunk s (n bytes) with probe in place of the string token at
 * s + at (tn bytes of text between quotes) decodes to m's values with the
 * probe as the text. Uses d (its last result is lost). */
static bool probe_gives(struct openai_decoder *d, const struct openai_memo *m, const char *s,
                        size_t n, size_t at, size_t tn, const char *probe)
{
    char buf[OPENAI_MEMO_MAX_TEXT + 8];
    size_t pn = strlen(probe), rest = n - at - tn - 2;
    memcpy(buf, s, at);
    buf[at] = '"';
    memcpy(buf + at + 1, probe, pn);
    buf[at + 1 + pn] = '"';
    memcpy(buf + at + pn + 2, s + at + tn + 2, rest);
    struct openai_chunk r, want;
    struct openai_choice want_choice;
    if (openai_decode_chunk(d, buf, at + pn + 2 + rest, &r))
        return false;
    openai_chunk_clear(&want);
    fill(m, probe, pn, &want, &want_choice);
    return openai_chunk_same(&r, &want);
}

/*
 * Whether the text's token is at s + at (text t, tn bytes between quotes):
 * the chunk decoded with each of two other texts there must give m's
 * values with that text. Two, because one can pass at a key: with the
 * key renamed, a duplicate key or a fallback (reasoning for
 * reasoning_content) may hold the probe already, but not both probes.
 */
static bool token_at(struct openai_decoder *d, const struct openai_memo *m, const char *s, size_t n,
                     size_t at, const char *t, size_t tn)
{
    static const char *const probes[] = {"~", "~~", "~~~"};
    int checked = 0;
    for (size_t i = 0; i < 3 && checked < 2; i++) {
        if (strlen(probes[i]) == tn && memcmp(probes[i], t, tn) == 0)
            continue; /* the text itself */
        if (!probe_gives(d, m, s, n, at, tn, probes[i]))
            return false;
        checked++;
    }
    return true;
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
    const char *text = *field_text((struct openai_choice *)&out->choices[0], (unsigned)f, &tlen);
    size_t tn = *tlen;
    if (!plain_text(text, tn))
        return 0; /* its token has escapes: not here (and no check was paid for) */
    struct openai_memo *m = ts_realloc(*mp, sizeof(*m) + n + strings_size(out));
    if (!m)
        return 0;
    if (!*mp)
        memset(m, 0, sizeof(*m));
    *mp = m;
    m->field = (uint8_t)f;
    keep_values(m, out, n);
    char t[OPENAI_MEMO_MAX_TEXT + 1]; /* out's strings go with the checks */
    memcpy(t, text, tn);
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
        if (token_at(d, m, s, n, at, t, tn)) {
            memcpy(m->bytes, s, at);
            memmove(m->bytes + at, s + at + tn + 2, rest);
            m->pre = (uint16_t)at;
            m->suf = (uint16_t)rest;
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
    openai_chunk_trim(&s, &n);
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
