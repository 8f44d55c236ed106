/*
 * tokenizer.c - encoding and decoding with a loaded tokenizer (tables in
 * tokenizer_int.h, built by tokenizer_load.c): special tokens, a PCRE2
 * pre-tokenizer, heap-ordered BPE merges with a per-session cache, counting.
 */
#include "llm/tokenizer.h"

#include <stdbool.h>
#include <string.h>

#include "base/alloc.h"
#include "llm/tokenizer_int.h"

#define CACHE_SLOTS       16384
#define CACHE_WORD        24
#define CACHE_IDS         12
#define REGEX_MATCH_LIMIT 10000000u

struct sym {
    uint32_t id;
    int32_t prev, next;
};

struct hent {
    uint32_t rank;
    uint32_t pos;
    uint32_t id;
};

struct cache_slot {
    uint8_t wlen; /* 0: empty */
    uint8_t nids;
    char word[CACHE_WORD];
    uint32_t ids[CACHE_IDS];
};

struct tokenizer_session {
    const struct tokenizer *t;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    struct sym *syms;
    size_t syms_cap;
    struct hent *heap;
    size_t heap_cap;
    struct cache_slot *cache;
    char *scratch;
    size_t scratch_cap;
};

/* Where ids go: a vector, or only a count. */
struct sink {
    struct tokenizer_ids *ids;
    size_t count;
};

/* The merge of the adjacent ids (a, b): its rank and the merged id. */
static bool pair_find(const struct tokenizer *t, uint32_t a, uint32_t b, uint32_t *rank,
                      uint32_t *id)
{
    if (t->pairs == NULL)
        return false;
    uint64_t key = pair_key(a, b);
    for (size_t i = hash_u64(key) & t->pairs_mask;; i = (i + 1) & t->pairs_mask) {
        if (t->pairs[i].key == 0)
            return false;
        if (t->pairs[i].key == key) {
            *rank = t->pairs[i].rank;
            *id = t->pairs[i].id;
            return true;
        }
    }
}

size_t tokenizer_vocab_size(const struct tokenizer *t)
{
    return t->n_ids;
}

long tokenizer_token_id(const struct tokenizer *t, const char *s, size_t n)
{
    return bmap_find(t, s, n);
}

/* ---- encode ------------------------------------------------------------ */

void tokenizer_ids_init(struct tokenizer_ids *ids, size_t max)
{
    memset(ids, 0, sizeof(*ids));
    ids->max = max ? max : TOKENIZER_MAX_TEXT;
}

void tokenizer_ids_release(struct tokenizer_ids *ids)
{
    ts_free(ids->v);
    ids->v = NULL;
    ids->len = ids->cap = 0;
}

static int sink_put(struct sink *k, uint32_t id)
{
    k->count++;
    struct tokenizer_ids *o = k->ids;
    if (o == NULL)
        return 0;
    if (o->len == o->cap) {
        if (o->len >= o->max)
            return TS_TOOBIG;
        size_t nc = o->cap ? o->cap * 2 : 64;
        if (nc > o->max)
            nc = o->max;
        uint32_t *nv = ts_realloc(o->v, nc * sizeof(*nv));
        if (nv == NULL)
            return -ENOMEM;
        o->v = nv;
        o->cap = nc;
    }
    o->v[o->len++] = id;
    return 0;
}

struct tokenizer_session *tokenizer_session_new(const struct tokenizer *t)
{
    struct tokenizer_session *s = ts_calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->t = t;
    s->cache = ts_calloc(CACHE_SLOTS, sizeof(*s->cache));
    if (t->re != NULL) {
        s->md = pcre2_match_data_create(1, t->gctx);
        s->mctx = pcre2_match_context_create(t->gctx);
        if (s->mctx != NULL)
            pcre2_set_match_limit(s->mctx, REGEX_MATCH_LIMIT);
    }
    if (s->cache == NULL || (t->re != NULL && (s->md == NULL || s->mctx == NULL))) {
        tokenizer_session_free(s);
        return NULL;
    }
    return s;
}

void tokenizer_session_free(struct tokenizer_session *s)
{
    if (s == NULL)
        return;
    pcre2_match_data_free(s->md);
    pcre2_match_context_free(s->mctx);
    ts_free(s->syms);
    ts_free(s->heap);
    ts_free(s->cache);
    ts_free(s->scratch);
    ts_free(s);
}

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 64;
    while (nc < need)
        nc *= 2;
    void *np = ts_realloc(*p, nc * size);
    if (np == NULL)
        return -ENOMEM;
    *p = np;
    *cap = nc;
    return 0;
}

static bool hent_less(const struct hent *a, const struct hent *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(struct hent *h, size_t *n, struct hent e)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!hent_less(&e, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static struct hent heap_pop(struct hent *h, size_t *n)
{
    struct hent top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && hent_less(&h[c + 1], &h[c]))
            c++;
        if (!hent_less(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = last;
    return top;
}

static void push_pair(const struct tokenizer *t, struct tokenizer_session *s, size_t *hn, int32_t i)
{
    int32_t j = s->syms[i].next;
    uint32_t rank, id;
    if (j >= 0 && pair_find(t, s->syms[i].id, s->syms[j].id, &rank, &id))
        heap_push(s->heap, hn, (struct hent){.rank = rank, .pos = (uint32_t)i, .id = id});
}

/* Merges the m symbols in s->syms by rank; the result is the live list from 0. */
static int merge_syms(struct tokenizer_session *s, size_t m)
{
    const struct tokenizer *t = s->t;
    int rc = grow((void **)&s->heap, &s->heap_cap, 3 * m + 1, sizeof(*s->heap));
    if (rc < 0)
        return rc;
    size_t hn = 0;
    for (size_t i = 0; i + 1 < m; i++)
        push_pair(t, s, &hn, (int32_t)i);
    while (hn > 0) {
        struct hent e = heap_pop(s->heap, &hn);
        int32_t i = (int32_t)e.pos;
        struct sym *a = &s->syms[i];
        if (a->id == NO_ID || a->next < 0)
            continue;
        uint32_t rank, id;
        if (!pair_find(t, a->id, s->syms[a->next].id, &rank, &id) || rank != e.rank || id != e.id)
            continue;
        int32_t j = a->next;
        a->id = id;
        a->next = s->syms[j].next;
        if (a->next >= 0)
            s->syms[a->next].prev = i;
        s->syms[j].id = NO_ID;
        if (a->prev >= 0)
            push_pair(t, s, &hn, a->prev);
        push_pair(t, s, &hn, i);
    }
    return 0;
}

static size_t utf8_char_len(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    size_t l = c < 0x80             ? 1
               : (c & 0xe0) == 0xc0 ? 2
               : (c & 0xf0) == 0xe0 ? 3
               : (c & 0xf8) == 0xf0 ? 4
                                    : 1;
    if (l > n)
        return 1;
    for (size_t i = 1; i < l; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 1;
    return l;
}

static int encode_piece_bounded(struct tokenizer_session *s, const char *p, size_t n,
                                struct sink *k);

/* Encodes one pre-tokenized piece; one over TOKENIZER_MAX_PIECE bytes is cut
   into pieces of at most that size at UTF-8 character starts. */
static int encode_piece(struct tokenizer_session *s, const char *p, size_t n, struct sink *k)
{
    while (n > TOKENIZER_MAX_PIECE) {
        size_t cut = TOKENIZER_MAX_PIECE;
        while (cut > TOKENIZER_MAX_PIECE - 4 && ((unsigned char)p[cut] & 0xc0) == 0x80)
            cut--;
        int rc = encode_piece_bounded(s, p, cut, k);
        if (rc < 0)
            return rc;
        p += cut;
        n -= cut;
    }
    return encode_piece_bounded(s, p, n, k);
}

static int encode_piece_bounded(struct tokenizer_session *s, const char *p, size_t n,
                                struct sink *k)
{
    const struct tokenizer *t = s->t;
    int rc;
    if (n == 0)
        return 0;
    struct cache_slot *slot = NULL;
    if (n <= CACHE_WORD) {
        size_t h = hash_bytes(p, n) & (CACHE_SLOTS - 1);
        for (size_t w = 0; w < 2; w++) {
            struct cache_slot *c = &s->cache[h ^ w];
            if (c->wlen == n && memcmp(c->word, p, n) == 0) {
                for (size_t i = 0; i < c->nids; i++)
                    if ((rc = sink_put(k, c->ids[i])) < 0)
                        return rc;
                return 0;
            }
        }
        /* the newest word takes slot h; the one it displaces moves to h ^ 1 */
        slot = &s->cache[h];
        if (slot->wlen != 0)
            s->cache[h ^ 1] = *slot;
    }
    if (t->direct_lookup) {
        long id = bmap_find(t, p, n);
        if (id >= 0) {
            if (slot != NULL) {
                memcpy(slot->word, p, n);
                slot->wlen = (uint8_t)n;
                slot->nids = 1;
                slot->ids[0] = (uint32_t)id;
            }
            return sink_put(k, (uint32_t)id);
        }
    }
    if ((rc = grow((void **)&s->syms, &s->syms_cap, n, sizeof(*s->syms))) < 0)
        return rc;
    size_t m = 0;
    if (t->mode != MODE_SP) {
        for (size_t i = 0; i < n; i++)
            s->syms[m++].id = t->byte_id[(unsigned char)p[i]];
    } else {
        for (size_t i = 0; i < n;) {
            size_t l = utf8_char_len((const unsigned char *)p + i, n - i);
            long id = bmap_find(t, p + i, l);
            if (id >= 0) {
                s->syms[m++].id = (uint32_t)id;
            } else if (t->byte_fallback) {
                for (size_t j = 0; j < l; j++)
                    s->syms[m++].id = t->byte_id[(unsigned char)p[i + j]];
            } else if (t->unk_id != NO_ID &&
                       !(t->fuse_unk && m > 0 && s->syms[m - 1].id == t->unk_id)) {
                s->syms[m++].id = t->unk_id;
            }
            i += l;
        }
    }
    for (size_t i = 0; i < m; i++) {
        s->syms[i].prev = (int32_t)i - 1;
        s->syms[i].next = i + 1 < m ? (int32_t)i + 1 : -1;
    }
    if (m > 1 && (rc = merge_syms(s, m)) < 0)
        return rc;
    size_t nids = 0;
    for (int32_t i = m ? 0 : -1; i >= 0; i = s->syms[i].next) {
        if ((rc = sink_put(k, s->syms[i].id)) < 0)
            return rc;
        if (slot != NULL && nids < CACHE_IDS)
            slot->ids[nids] = s->syms[i].id;
        nids++;
    }
    if (slot != NULL && nids <= CACHE_IDS) {
        memcpy(slot->word, p, n);
        slot->wlen = (uint8_t)n;
        slot->nids = (uint8_t)nids;
    } else if (slot != NULL) {
        slot->wlen = 0;
    }
    return 0;
}

/*
 * SentencePiece text is one piece, but when no token has a "▁" after another
 * character no merge can cross the start of a "▁" run, so the pieces between
 * those starts merge independently: same ids, and short pieces hit the cache.
 */
static int encode_sp_words(struct tokenizer_session *s, const char *p, size_t n, struct sink *k)
{
    size_t start = 0;
    int rc;
    for (size_t i = 1; i < n; i++) {
        if (is_sp_space(p, n, i) && !(i >= 3 && is_sp_space(p, n, i - 3))) {
            if ((rc = encode_piece(s, p + start, i - start, k)) < 0)
                return rc;
            start = i;
        }
    }
    return encode_piece(s, p + start, n - start, k);
}

/* Cuts a span (text between special tokens) with the regex; gaps are pieces too. */
static int encode_span(struct tokenizer_session *s, const char *p, size_t n, struct sink *k,
                       char *err, size_t errlen)
{
    const struct tokenizer *t = s->t;
    if (t->re == NULL && t->sp_words)
        return encode_sp_words(s, p, n, k);
    if (t->re == NULL)
        return encode_piece(s, p, n, k);
    size_t off = 0, done = 0;
    int rc;
    while (off < n) {
        int r = pcre2_match(t->re, (PCRE2_SPTR)p, n, off, 0, s->md, s->mctx);
        if (r == PCRE2_ERROR_NOMATCH)
            break;
        if (r == PCRE2_ERROR_NOMEMORY)
            return -ENOMEM;
        if (r < 0) {
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(r, msg, sizeof(msg));
            ts_errf(err, errlen, "pre-tokenizer regex at byte %zu: %s", off, (const char *)msg);
            return TS_PARSE;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) { /* an empty match: step over one character */
            off = ms + utf8_char_len((const unsigned char *)p + ms, n - ms);
            continue;
        }
        if (ms > done && (rc = encode_piece(s, p + done, ms - done, k)) < 0)
            return rc;
        if ((rc = encode_piece(s, p + ms, me - ms, k)) < 0)
            return rc;
        done = off = me;
    }
    if (done < n)
        return encode_piece(s, p + done, n - done, k);
    return 0;
}

/* Applies the span-level rewrites (prefix space, "▁") into scratch when needed. */
static int encode_text_span(struct tokenizer_session *s, const char *p, size_t n, bool first,
                            struct sink *k, char *err, size_t errlen)
{
    const struct tokenizer *t = s->t;
    int rc;
    if (t->mode == MODE_SP) {
        bool prepend =
            t->sp_prepend == SP_PREPEND_ALWAYS || (t->sp_prepend == SP_PREPEND_FIRST && first);
        size_t need = 3 * n + 3;
        if ((rc = grow((void **)&s->scratch, &s->scratch_cap, need, 1)) < 0)
            return rc;
        size_t o = 0;
        if (prepend) {
            memcpy(s->scratch, SP_SPACE, 3);
            o = 3;
        }
        for (size_t i = 0; i < n; i++) {
            if (p[i] == ' ') {
                memcpy(s->scratch + o, SP_SPACE, 3);
                o += 3;
            } else {
                s->scratch[o++] = p[i];
            }
        }
        return encode_span(s, s->scratch, o, k, err, errlen);
    }
    if (t->add_prefix_space && n > 0 && p[0] != ' ') {
        if ((rc = grow((void **)&s->scratch, &s->scratch_cap, n + 1, 1)) < 0)
            return rc;
        s->scratch[0] = ' ';
        memcpy(s->scratch + 1, p, n);
        return encode_span(s, s->scratch, n + 1, k, err, errlen);
    }
    return encode_span(s, p, n, k, err, errlen);
}

/* Finds the leftmost-longest special token in p[from..n); returns its index or -1. */
static long find_special(const struct tokenizer *t, const char *p, size_t n, size_t from,
                         size_t *at)
{
    for (size_t i = from; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        for (uint32_t j = t->special_first[c]; j < t->special_first[c + 1]; j++) {
            const struct special *sp = &t->specials[j];
            if (sp->len <= n - i && memcmp(t->blob + sp->off, p + i, sp->len) == 0) {
                *at = i;
                return (long)j;
            }
        }
    }
    return -1;
}

static int encode_all(struct tokenizer_session *s, const char *text, size_t len, unsigned flags,
                      struct sink *k)
{
    const struct tokenizer *t = s->t;
    char err[160];
    if (len > TOKENIZER_MAX_TEXT)
        return TS_TOOBIG;
    size_t pos = 0;
    int rc;
    if ((flags & TOKENIZER_SPECIAL) && t->n_specials > 0) {
        for (;;) {
            size_t at;
            long j = find_special(t, text, len, pos, &at);
            if (j < 0)
                break;
            if (at > pos &&
                (rc = encode_text_span(s, text + pos, at - pos, pos == 0, k, err, sizeof(err))) < 0)
                return rc;
            if ((rc = sink_put(k, t->specials[j].id)) < 0)
                return rc;
            pos = at + t->specials[j].len;
        }
    }
    if (pos < len || len == 0)
        return len == 0 ? 0
                        : encode_text_span(s, text + pos, len - pos, pos == 0, k, err, sizeof(err));
    return 0;
}

int tokenizer_encode(struct tokenizer_session *s, const char *text, size_t len, unsigned flags,
                     struct tokenizer_ids *out)
{
    struct sink k = {.ids = out};
    return encode_all(s, text, len, flags, &k);
}

int tokenizer_count(struct tokenizer_session *s, const char *text, size_t len, unsigned flags,
                    size_t *count)
{
    struct sink k = {0};
    int rc = encode_all(s, text, len, flags, &k);
    *count = k.count;
    return rc;
}

/* ---- decode ------------------------------------------------------------ */

static int sp_hex(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int decode_sp_token(const char *s, size_t n, struct buf *out)
{
    int rc;
    if (n == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' && sp_hex(s[3]) >= 0 && sp_hex(s[4]) >= 0)
        return buf_append_char(out, (char)(sp_hex(s[3]) * 16 + sp_hex(s[4])));
    size_t i = 0;
    while (i < n) {
        const char *m = n - i >= 3 ? memmem(s + i, n - i, SP_SPACE, 3) : NULL;
        size_t upto = m ? (size_t)(m - s) : n;
        if (upto > i && (rc = buf_append(out, s + i, upto - i)) < 0)
            return rc;
        if (m == NULL)
            break;
        if ((rc = buf_append_char(out, ' ')) < 0)
            return rc;
        i = upto + 3;
    }
    return 0;
}

int tokenizer_decode(const struct tokenizer *t, const uint32_t *ids, size_t n, struct buf *out)
{
    size_t start = out->len;
    int rc;
    for (size_t i = 0; i < n; i++) {
        uint32_t id = ids[i];
        if (id >= t->n_ids || t->tok[id].len == NO_ID)
            return -EINVAL;
        const char *s = t->blob + t->tok[id].off;
        size_t l = t->tok[id].len;
        if (t->mode == MODE_SP)
            rc = decode_sp_token(s, l, out);
        else
            rc = buf_append(out, s, l);
        if (rc < 0)
            return rc;
    }
    if (t->mode == MODE_SP && t->sp_prepend != SP_PREPEND_NONE && out->len > start &&
        out->data[start] == ' ') {
        memmove(out->data + start, out->data + start + 1, out->len - start - 1);
        buf_truncate(out, out->len - 1);
    }
    return 0;
}
