/*
 * quality.c - answer quality scores, their run statistics, the windowed dual
 * SLA and the consistency steady state (see quality.h, docs/QUALITY.md).
 */
#include "analysis/quality.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/chars.h"
#include "base/alloc.h"
#include "base/tsjson.h"

/* PCRE2 limits for one search of a user pattern. */
#define REGEX_MATCH_LIMIT    1000000u
#define REGEX_HEAP_LIMIT_KIB (16u * 1024u)
#define REGEX_MAX_PATTERN    (64u * 1024u)

/* ---- scratch ---------------------------------------------------------------- */

/* Text buffers: two to ping-pong the tokenizer's passes, one per side. */
enum { BUF_TMP0, BUF_TMP1, BUF_A, BUF_B, BUF_COUNT };

struct tok {
    const char *p;
    uint32_t len;
};

struct ngram {
    uint32_t w[QUALITY_BLEU_ORDER];
};

/* One n-gram of the hypothesis, with its counts on both sides. */
struct ngram_slot {
    struct ngram key;
    uint32_t hyp, ref; /* hyp 0: empty slot */
};

#define TOK_SLOTS   (4 * QUALITY_MAX_TOKENS) /* >= 2 * both sides' tokens */
#define NGRAM_SLOTS (2 * QUALITY_MAX_TOKENS) /* >= 2 * one side's n-grams */
#define LCS_WORDS   (QUALITY_MAX_TOKENS / 64)

struct quality_scratch {
    char *buf[BUF_COUNT];
    size_t cap[BUF_COUNT];
    struct tok *toks;         /* 2 * QUALITY_MAX_TOKENS */
    uint32_t *ids;            /* 2 * QUALITY_MAX_TOKENS, ids from 1 */
    uint32_t *tok_slot;       /* TOK_SLOTS: token index + 1, 0 empty */
    struct ngram_slot *ngram; /* NGRAM_SLOTS */
    uint32_t *mask_row;       /* 2 * QUALITY_MAX_TOKENS + 1: id -> mask row + 1 */
    uint64_t *v;              /* LCS_WORDS */
    uint64_t *masks;          /* grown on demand: rows of LCS_WORDS at most */
    size_t masks_cap;         /* in words */
    pcre2_general_context *gctx;
    pcre2_match_data *md;
};

int quality_scratch_new(struct quality_scratch **out)
{
    struct quality_scratch *s = ts_calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    s->toks = ts_malloc(2 * QUALITY_MAX_TOKENS * sizeof(*s->toks));
    s->ids = ts_malloc(2 * QUALITY_MAX_TOKENS * sizeof(*s->ids));
    s->tok_slot = ts_malloc(TOK_SLOTS * sizeof(*s->tok_slot));
    s->ngram = ts_malloc(NGRAM_SLOTS * sizeof(*s->ngram));
    s->mask_row = ts_calloc(2 * QUALITY_MAX_TOKENS + 1, sizeof(*s->mask_row));
    s->v = ts_malloc(LCS_WORDS * sizeof(*s->v));
    s->gctx = pcre2_general_context_create(ts_malloc_hook, ts_free_hook, NULL);
    if (s->gctx != NULL)
        s->md = pcre2_match_data_create(1, s->gctx);
    if (s->toks == NULL || s->ids == NULL || s->tok_slot == NULL || s->ngram == NULL ||
        s->mask_row == NULL || s->v == NULL || s->md == NULL) {
        quality_scratch_free(s);
        return -ENOMEM;
    }
    *out = s;
    return 0;
}

void quality_scratch_free(struct quality_scratch *s)
{
    if (s == NULL)
        return;
    for (int i = 0; i < BUF_COUNT; i++)
        ts_free(s->buf[i]);
    ts_free(s->toks);
    ts_free(s->ids);
    ts_free(s->tok_slot);
    ts_free(s->ngram);
    ts_free(s->mask_row);
    ts_free(s->v);
    ts_free(s->masks);
    pcre2_match_data_free(s->md);
    pcre2_general_context_free(s->gctx);
    ts_free(s);
}

/* Makes buffer k hold at least need bytes. 0 or -ENOMEM. */
static int buf_reserve(struct quality_scratch *s, int k, size_t need)
{
    if (need <= s->cap[k])
        return 0;
    size_t cap = s->cap[k] ? s->cap[k] : 4096;
    while (cap < need)
        cap *= 2;
    char *p = ts_realloc(s->buf[k], cap);
    if (p == NULL)
        return -ENOMEM;
    s->buf[k] = p;
    s->cap[k] = cap;
    return 0;
}

/* ---- characters ------------------------------------------------------------- */

/*
 * Length of the white-space character that starts at p (n > 0 bytes left),
 * or 0: the code points for which Python's str.isspace() is true, in UTF-8.
 * Only lead bytes can match, so stepping byte by byte is safe.
 */
static size_t space_at(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f))
        return 1;
    if (c < 0x80)
        return 0;
    if (c == 0xc2)
        return n >= 2 && (p[1] == 0x85 || p[1] == 0xa0) ? 2 : 0; /* U+0085, U+00A0 */
    if (n < 3)
        return 0;
    if (c == 0xe1)
        return p[1] == 0x9a && p[2] == 0x80 ? 3 : 0; /* U+1680 */
    if (c == 0xe2 && p[1] == 0x80) {
        unsigned char d = p[2]; /* U+2000..U+200A, U+2028, U+2029, U+202F */
        return (d >= 0x80 && d <= 0x8a) || d == 0xa8 || d == 0xa9 || d == 0xaf ? 3 : 0;
    }
    if (c == 0xe2 && p[1] == 0x81)
        return p[2] == 0x9f ? 3 : 0; /* U+205F */
    if (c == 0xe3)
        return p[1] == 0x80 && p[2] == 0x80 ? 3 : 0; /* U+3000 */
    return 0;
}

/* Length of the white-space character that ends at p + n, or 0. */
static size_t space_before(const unsigned char *p, size_t n)
{
    for (size_t w = 1; w <= 3 && w <= n; w++) {
        if (space_at(p + n - w, w) == w)
            return w;
    }
    return 0;
}

/* ---- tokens to ids ---------------------------------------------------------- */

/* The smallest power of two >= 2 * n (at least 16). */
static size_t table_size(size_t n)
{
    size_t t = 16;
    while (t < 2 * n)
        t *= 2;
    return t;
}

static uint64_t hash_bytes(const char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/*
 * Gives the n tokens s->toks[0..n) ids (s->ids[i], from 1, in order of first
 * appearance) so that equal strings get equal ids; returns the number of
 * distinct tokens. Linear: a hash table of token indexes.
 */
static uint32_t tokens_intern(struct quality_scratch *s, size_t n)
{
    size_t size = table_size(n), mask = size - 1;
    memset(s->tok_slot, 0, size * sizeof(*s->tok_slot));
    uint32_t next = 0;
    for (size_t i = 0; i < n; i++) {
        const struct tok *t = &s->toks[i];
        size_t h = hash_bytes(t->p, t->len) & mask;
        for (;;) {
            uint32_t e = s->tok_slot[h];
            if (e == 0) {
                s->tok_slot[h] = (uint32_t)i + 1;
                s->ids[i] = ++next;
                break;
            }
            const struct tok *o = &s->toks[e - 1];
            if (o->len == t->len && memcmp(o->p, t->p, t->len) == 0) {
                s->ids[i] = s->ids[e - 1];
                break;
            }
            h = (h + 1) & mask;
        }
    }
    return next;
}

/* ---- ROUGE-L ---------------------------------------------------------------- */

/*
 * rouge-score's tokenizer: lower-case, every non-[a-z0-9] character is a
 * separator. Writes the tokens' bytes into buffer k and appends up to
 * QUALITY_MAX_TOKENS tokens at s->toks[base..]; returns how many (or
 * -ENOMEM) and sets *cut when something was left out.
 */
static int rouge_tokenize(struct quality_scratch *s, int k, const char *text, size_t len,
                          uint32_t base, bool *cut)
{
    const unsigned char *p = (const unsigned char *)text;
    if (len > QUALITY_MAX_TEXT) {
        len = QUALITY_MAX_TEXT;
        *cut = true;
    }
    if (buf_reserve(s, k, len + 1) != 0)
        return -ENOMEM;
    char *out = s->buf[k];
    size_t o = 0, start = 0;
    uint32_t n = 0;
    bool in_tok = false;

    for (size_t i = 0; i < len;) {
        unsigned char c = p[i];
        char lc = 0;
        size_t adv = 1;
        bool brk_after = false;
        if (c >= 'a' && c <= 'z')
            lc = (char)c;
        else if (c >= 'A' && c <= 'Z')
            lc = (char)(c - 'A' + 'a');
        else if (chars_is_digit(c))
            lc = (char)c;
        else if (c == 0xe2 && i + 2 < len && p[i + 1] == 0x84 && p[i + 2] == 0xaa)
            lc = 'k', adv = 3; /* U+212A KELVIN SIGN lower-cases to "k" */
        else if (c == 0xc4 && i + 1 < len && p[i + 1] == 0xb0)
            lc = 'i', adv = 2, brk_after = true; /* U+0130 lower-cases to "i" U+0307 */

        if (lc != 0) {
            if (!in_tok) {
                if (n == QUALITY_MAX_TOKENS) {
                    *cut = true;
                    break;
                }
                in_tok = true;
                start = o;
            }
            out[o++] = lc;
        }
        if ((lc == 0 || brk_after) && in_tok) {
            s->toks[base + n] = (struct tok){out + start, (uint32_t)(o - start)};
            n++;
            in_tok = false;
        }
        i += adv;
    }
    if (in_tok) {
        s->toks[base + n] = (struct tok){out + start, (uint32_t)(o - start)};
        n++;
    }
    return (int)n;
}

/*
 * Length of the longest common subsequence of a[0..na) and b[0..nb) (ids in
 * 1..nids), by the bit-parallel algorithm of Allison-Dix / Crochemore et al.
 * (2001): bit i of V is 0 where a[i] ends a match of the LCS so far; for each
 * b[j], with M the positions of b[j] in a, U = V & M and V = (V + U) | (V - U)
 * (V - U = V & ~U, as U is a subset of V). The LCS is the number of zero bits.
 * O(nb * na / 64) word operations; one row of na bits per distinct id of a.
 */
static int lcs_length(struct quality_scratch *s, const uint32_t *a, size_t na, const uint32_t *b,
                      size_t nb, uint32_t nids, uint32_t *out)
{
    if (nb < na) { /* bits over the shorter sequence: fewer words and rows */
        const uint32_t *t = a;
        a = b, b = t;
        size_t tn = na;
        na = nb, nb = tn;
    }
    size_t words = (na + 63) / 64;
    uint32_t rows = 0;
    memset(s->mask_row, 0, ((size_t)nids + 1) * sizeof(*s->mask_row));
    for (size_t i = 0; i < na; i++) {
        if (s->mask_row[a[i]] == 0)
            s->mask_row[a[i]] = ++rows;
    }
    size_t need = (size_t)rows * words;
    if (need > s->masks_cap) {
        uint64_t *m = ts_realloc(s->masks, need * sizeof(*m));
        if (m == NULL)
            return -ENOMEM;
        s->masks = m;
        s->masks_cap = need;
    }
    memset(s->masks, 0, need * sizeof(*s->masks));
    for (size_t i = 0; i < na; i++)
        s->masks[(size_t)(s->mask_row[a[i]] - 1) * words + i / 64] |= 1ull << (i % 64);

    uint64_t *v = s->v;
    for (size_t w = 0; w < words; w++)
        v[w] = ~0ull;
    for (size_t j = 0; j < nb; j++) {
        uint32_t row = s->mask_row[b[j]];
        if (row == 0)
            continue; /* not in a: U = 0 leaves V as it is */
        const uint64_t *m = s->masks + (size_t)(row - 1) * words;
        uint64_t carry = 0;
        for (size_t w = 0; w < words; w++) {
            uint64_t x = v[w], u = x & m[w];
            uint64_t sum = x + u;
            uint64_t c = sum < x;
            sum += carry;
            c |= sum < carry;
            carry = c;
            v[w] = sum | (x & ~u);
        }
    }
    uint32_t zeros = 0;
    for (size_t w = 0; w < words; w++) {
        uint64_t z = ~v[w];
        if (w == words - 1 && na % 64)
            z &= (1ull << (na % 64)) - 1;
        zeros += (uint32_t)__builtin_popcountll(z);
    }
    *out = zeros;
    return 0;
}

int quality_rouge_l(struct quality_scratch *s, const char *cand, size_t cand_len, const char *ref,
                    size_t ref_len, struct rouge_score *out)
{
    if (s == NULL || out == NULL || (cand == NULL && cand_len) || (ref == NULL && ref_len))
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    int nc = rouge_tokenize(s, BUF_A, cand, cand_len, 0, &out->truncated);
    if (nc < 0)
        return nc;
    int nr = rouge_tokenize(s, BUF_B, ref, ref_len, (uint32_t)nc, &out->truncated);
    if (nr < 0)
        return nr;
    out->cand_tokens = (uint32_t)nc;
    out->ref_tokens = (uint32_t)nr;
    if (nc == 0 || nr == 0)
        return 0;
    uint32_t nids = tokens_intern(s, (size_t)nc + (size_t)nr);
    int rc = lcs_length(s, s->ids, (size_t)nc, s->ids + nc, (size_t)nr, nids, &out->lcs);
    if (rc != 0)
        return rc;
    /* The same expressions, in the same order, as rouge_scorer._score_lcs. */
    out->precision = (double)out->lcs / (double)nc;
    out->recall = (double)out->lcs / (double)nr;
    if (out->precision + out->recall > 0)
        out->fmeasure = 2 * out->precision * out->recall / (out->precision + out->recall);
    return 0;
}

/* ---- BLEU: the 13a tokenizer -------------------------------------------------- */

/* Replaces every from (non-overlapping, left to right) by the shorter to, in place. */
static size_t replace_all(char *s, size_t n, const char *from, const char *to)
{
    size_t fl = strlen(from), tl = strlen(to);
    size_t r = 0, w = 0;
    while (r < n) {
        const char *hit = n - r >= fl ? memmem(s + r, n - r, from, fl) : NULL;
        size_t upto = hit ? (size_t)(hit - s) : n;
        memmove(s + w, s + r, upto - r);
        w += upto - r;
        r = upto;
        if (hit) {
            memcpy(s + w, to, tl);
            w += tl;
            r += fl;
        }
    }
    return w;
}

/* mteval-v13a's class: !"#$%&()*+/:;<=>?@[\]^_`{|}~ and the space. */
static bool is_13a_punct(unsigned char c)
{
    return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
           (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

/* " " + in + " " with every is_13a_punct() byte spaced; out NULL only counts. */
static size_t pass_punct(const unsigned char *in, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i <= n + 1; i++) {
        unsigned char c = i == 0 || i == n + 1 ? ' ' : in[i - 1];
        if (is_13a_punct(c)) {
            if (out) {
                out[o] = ' ';
                out[o + 1] = (char)c;
                out[o + 2] = ' ';
            }
            o += 3;
        } else {
            if (out)
                out[o] = (char)c;
            o++;
        }
    }
    return o;
}

enum pair_rule {
    PAIR_NONDIGIT_DOT, /* ([^0-9])([\.,]) -> '\1 \2 ' */
    PAIR_DOT_NONDIGIT, /* ([\.,])([^0-9]) -> ' \1 \2' */
    PAIR_DIGIT_DASH,   /* ([0-9])(-)      -> '\1 \2 ' */
};

static bool pair_matches(enum pair_rule r, unsigned char a, unsigned char b)
{
    switch (r) {
    case PAIR_NONDIGIT_DOT:
        return !chars_is_digit(a) && (b == '.' || b == ',');
    case PAIR_DOT_NONDIGIT:
        return (a == '.' || a == ',') && !chars_is_digit(b);
    case PAIR_DIGIT_DASH:
        return chars_is_digit(a) && b == '-';
    }
    return false;
}

/*
 * One of the two-character substitutions, with re.sub's leftmost,
 * non-overlapping matching. Byte-wise matching gives the same result as
 * Python's code-point matching on UTF-8: the patterns' fixed characters are
 * ASCII and never continuation bytes. out NULL only counts.
 */
static size_t pass_pair(enum pair_rule r, const unsigned char *in, size_t n, char *out)
{
    size_t o = 0, i = 0;
    while (i < n) {
        if (i + 1 < n && pair_matches(r, in[i], in[i + 1])) {
            if (out) {
                if (r == PAIR_DOT_NONDIGIT) {
                    out[o] = ' ', out[o + 1] = (char)in[i], out[o + 2] = ' ';
                    out[o + 3] = (char)in[i + 1];
                } else {
                    out[o] = (char)in[i], out[o + 1] = ' ', out[o + 2] = (char)in[i + 1];
                    out[o + 3] = ' ';
                }
            }
            o += 4;
            i += 2;
        } else {
            if (out)
                out[o] = (char)in[i];
            o++;
            i++;
        }
    }
    return o;
}

/*
 * sacrebleu's 13a tokenizer (after the rstrip of _preprocess_segment) into
 * buffer k; the tokens are then the white-space separated runs of it.
 * Returns the length written or -ENOMEM.
 */
static long tokenize_13a(struct quality_scratch *s, int k, const char *text, size_t len)
{
    const unsigned char *u = (const unsigned char *)text;
    size_t w;
    while (len > 0 && (w = space_before(u, len)) > 0)
        len -= w;
    if (buf_reserve(s, BUF_TMP0, len + 1) != 0)
        return -ENOMEM;
    char *t = s->buf[BUF_TMP0];
    if (len)
        memcpy(t, text, len);
    size_t n = len;
    n = replace_all(t, n, "<skipped>", "");
    n = replace_all(t, n, "-\n", "");
    n = replace_all(t, n, "\n", " ");
    n = replace_all(t, n, "&quot;", "\"");
    n = replace_all(t, n, "&amp;", "&");
    n = replace_all(t, n, "&lt;", "<");
    n = replace_all(t, n, "&gt;", ">");

    size_t need = pass_punct((const unsigned char *)t, n, NULL);
    if (buf_reserve(s, BUF_TMP1, need) != 0)
        return -ENOMEM;
    n = pass_punct((const unsigned char *)s->buf[BUF_TMP0], n, s->buf[BUF_TMP1]);

    static const enum pair_rule rules[3] = {PAIR_NONDIGIT_DOT, PAIR_DOT_NONDIGIT, PAIR_DIGIT_DASH};
    const int dst[3] = {BUF_TMP0, BUF_TMP1, k};
    int src = BUF_TMP1;
    for (int i = 0; i < 3; i++) {
        need = pass_pair(rules[i], (const unsigned char *)s->buf[src], n, NULL);
        if (buf_reserve(s, dst[i], need + 1) != 0)
            return -ENOMEM;
        n = pass_pair(rules[i], (const unsigned char *)s->buf[src], n, s->buf[dst[i]]);
        src = dst[i];
    }
    return (long)n;
}

/* Splits buffer k (n bytes) on white space into s->toks[base..]; as rouge_tokenize. */
static uint32_t split_space(struct quality_scratch *s, int k, size_t n, uint32_t base, bool *cut)
{
    const unsigned char *p = (const unsigned char *)s->buf[k];
    uint32_t count = 0;
    size_t i = 0;
    while (i < n) {
        size_t w = space_at(p + i, n - i);
        if (w) {
            i += w;
            continue;
        }
        size_t start = i;
        while (i < n && space_at(p + i, n - i) == 0)
            i++;
        if (count == QUALITY_MAX_TOKENS) {
            *cut = true;
            break;
        }
        s->toks[base + count] = (struct tok){(const char *)p + start, (uint32_t)(i - start)};
        count++;
    }
    return count;
}

static uint64_t hash_ngram(const uint32_t *ids, int n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < n; i++) {
        h ^= ids[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h;
}

/*
 * The clipped matches of sacrebleu's _compute_segment_statistics for order
 * n: the sum over the hypothesis' distinct n-grams of min(count in hyp,
 * count in ref). A hash table of the hypothesis' n-grams.
 */
static uint32_t ngrams_clipped(struct quality_scratch *s, const uint32_t *hyp, size_t nh,
                               const uint32_t *ref, size_t nr, int n)
{
    if (nh < (size_t)n || nr < (size_t)n)
        return 0;
    size_t ch = nh - (size_t)n + 1, cr = nr - (size_t)n + 1;
    size_t size = table_size(ch), mask = size - 1;
    struct ngram_slot *t = s->ngram;
    memset(t, 0, size * sizeof(*t));
    for (size_t i = 0; i < ch; i++) {
        struct ngram key = {{0}};
        memcpy(key.w, hyp + i, (size_t)n * sizeof(uint32_t));
        size_t h = hash_ngram(key.w, n) & mask;
        while (t[h].hyp != 0 && memcmp(&t[h].key, &key, sizeof(key)) != 0)
            h = (h + 1) & mask;
        t[h].key = key;
        t[h].hyp++;
    }
    for (size_t i = 0; i < cr; i++) {
        struct ngram key = {{0}};
        memcpy(key.w, ref + i, (size_t)n * sizeof(uint32_t));
        size_t h = hash_ngram(key.w, n) & mask;
        while (t[h].hyp != 0 && memcmp(&t[h].key, &key, sizeof(key)) != 0)
            h = (h + 1) & mask;
        if (t[h].hyp != 0)
            t[h].ref++;
    }
    uint32_t matched = 0;
    for (size_t h = 0; h < size; h++)
        matched += t[h].hyp < t[h].ref ? t[h].hyp : t[h].ref;
    return matched;
}

/* sacrebleu's utils.my_log: log, with log(0) taken as -9999999999. */
static double my_log(double x)
{
    return x == 0.0 ? -9999999999.0 : log(x);
}

double quality_bleu_from_counts(const uint32_t correct[QUALITY_BLEU_ORDER],
                                const uint32_t total[QUALITY_BLEU_ORDER], uint64_t sys_len,
                                uint64_t ref_len, double precisions[QUALITY_BLEU_ORDER],
                                double *bp_out)
{
    double prec[QUALITY_BLEU_ORDER] = {0};
    double bp = 1.0;
    if (sys_len < ref_len)
        bp = sys_len > 0 ? exp(1 - (double)ref_len / (double)sys_len) : 0.0;
    if (bp_out)
        *bp_out = bp;

    bool any = false;
    for (int n = 0; n < QUALITY_BLEU_ORDER; n++)
        any |= correct[n] != 0;
    double score = 0.0;
    if (any) {
        double smooth = 1.0;
        int eff = QUALITY_BLEU_ORDER;
        for (int n = 1; n <= QUALITY_BLEU_ORDER; n++) {
            if (total[n - 1] == 0)
                break;
            eff = n;
            if (correct[n - 1] == 0) {
                smooth *= 2;
                prec[n - 1] = 100. / (smooth * total[n - 1]);
            } else {
                prec[n - 1] = 100. * correct[n - 1] / total[n - 1];
            }
        }
        double sum = 0;
        for (int n = 0; n < eff; n++)
            sum += my_log(prec[n]);
        score = bp * exp(sum / eff) / 100.0;
    }
    if (precisions)
        memcpy(precisions, prec, sizeof(prec));
    return score;
}

int quality_bleu(struct quality_scratch *s, const char *hyp, size_t hyp_len, const char *ref,
                 size_t ref_len, struct bleu_score *out)
{
    if (s == NULL || out == NULL || (hyp == NULL && hyp_len) || (ref == NULL && ref_len))
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    if (hyp_len > QUALITY_MAX_TEXT)
        hyp_len = QUALITY_MAX_TEXT, out->truncated = true;
    if (ref_len > QUALITY_MAX_TEXT)
        ref_len = QUALITY_MAX_TEXT, out->truncated = true;

    long nh = tokenize_13a(s, BUF_A, hyp, hyp_len);
    if (nh < 0)
        return (int)nh;
    long nr = tokenize_13a(s, BUF_B, ref, ref_len);
    if (nr < 0)
        return (int)nr;
    uint32_t th = split_space(s, BUF_A, (size_t)nh, 0, &out->truncated);
    uint32_t tr = split_space(s, BUF_B, (size_t)nr, th, &out->truncated);
    out->sys_len = th;
    out->ref_len = tr;
    if (tr == 0) /* sacrebleu refuses an empty reference; score 0 */
        return 0;
    (void)tokens_intern(s, (size_t)th + tr);
    for (int n = 1; n <= QUALITY_BLEU_ORDER; n++) {
        out->total[n - 1] = th >= (uint32_t)n ? th - (uint32_t)n + 1 : 0;
        out->correct[n - 1] = ngrams_clipped(s, s->ids, th, s->ids + th, tr, n);
    }
    out->score =
        quality_bleu_from_counts(out->correct, out->total, th, tr, out->precisions, &out->bp);
    return 0;
}

/* ---- exact match -------------------------------------------------------------- */

/* Reads a text as if trimmed, with every inner white-space run one space. */
struct norm_reader {
    const unsigned char *p;
    size_t n, i;
    bool gap;
};

static void norm_init(struct norm_reader *r, const char *p, size_t n)
{
    r->p = (const unsigned char *)p;
    r->n = n;
    r->i = 0;
    r->gap = false;
    size_t w;
    while (r->i < n && (w = space_at(r->p + r->i, n - r->i)) > 0)
        r->i += w;
}

/* The next byte, or -1 at the end. */
static int norm_next(struct norm_reader *r)
{
    while (r->i < r->n) {
        size_t w = space_at(r->p + r->i, r->n - r->i);
        if (w) {
            r->i += w;
            r->gap = true;
            continue;
        }
        if (r->gap) {
            r->gap = false;
            return ' ';
        }
        return r->p[r->i++];
    }
    return -1;
}

static int ascii_lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

bool quality_exact_match(const char *a, size_t a_len, const char *b, size_t b_len, bool nocase)
{
    struct norm_reader ra, rb;
    norm_init(&ra, a ? a : "", a ? a_len : 0);
    norm_init(&rb, b ? b : "", b ? b_len : 0);
    for (;;) {
        int x = norm_next(&ra), y = norm_next(&rb);
        if (nocase) {
            x = ascii_lower(x);
            y = ascii_lower(y);
        }
        if (x != y)
            return false;
        if (x < 0)
            return true;
    }
}

/* ---- regex ---------------------------------------------------------------------- */

struct quality_regex {
    pcre2_general_context *gctx;
    pcre2_code *code;
    pcre2_match_context *mctx;
};

void quality_regex_free(struct quality_regex *re)
{
    if (re == NULL)
        return;
    pcre2_match_context_free(re->mctx);
    pcre2_code_free(re->code);
    pcre2_general_context_free(re->gctx);
    ts_free(re);
}

static void set_err(char *err, size_t errlen, const char *msg)
{
    if (err != NULL && errlen > 0)
        ts_errf(err, errlen, "%s", msg);
}

int quality_regex_new(const char *pattern, unsigned flags, char *err, size_t errlen,
                      struct quality_regex **out)
{
    if (pattern == NULL || out == NULL) {
        set_err(err, errlen, "no pattern");
        return -EINVAL;
    }
    struct quality_regex *re = ts_calloc(1, sizeof(*re));
    pcre2_compile_context *cctx = NULL;
    int rc = -ENOMEM;
    if (re == NULL)
        goto out_nomem;
    re->gctx = pcre2_general_context_create(ts_malloc_hook, ts_free_hook, NULL);
    if (re->gctx == NULL)
        goto out_nomem;
    cctx = pcre2_compile_context_create(re->gctx);
    re->mctx = pcre2_match_context_create(re->gctx);
    if (cctx == NULL || re->mctx == NULL)
        goto out_nomem;
    if (pcre2_set_max_pattern_length(cctx, REGEX_MAX_PATTERN) != 0 ||
        pcre2_set_match_limit(re->mctx, REGEX_MATCH_LIMIT) != 0 ||
        pcre2_set_heap_limit(re->mctx, REGEX_HEAP_LIMIT_KIB) != 0) {
        rc = -EINVAL;
        set_err(err, errlen, "cannot set PCRE2 limits");
        goto out_free;
    }

    uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
    if (flags & QUALITY_REGEX_CASELESS)
        opts |= PCRE2_CASELESS;
    int code;
    PCRE2_SIZE off;
    re->code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, opts, &code, &off, cctx);
    if (re->code == NULL) {
        if (code == PCRE2_ERROR_HEAP_FAILED)
            goto out_nomem;
        PCRE2_UCHAR msg[160];
        if (pcre2_get_error_message(code, msg, sizeof(msg)) < 0)
            snprintf((char *)msg, sizeof(msg), "PCRE2 error %d", code);
        if (err != NULL && errlen > 0)
            ts_errf(err, errlen, "%s at offset %zu", (const char *)msg, (size_t)off);
        rc = TS_PARSE;
        goto out_free;
    }
    pcre2_compile_context_free(cctx);
    *out = re;
    return 0;

out_nomem:
    rc = -ENOMEM;
    set_err(err, errlen, "out of memory");
out_free:
    pcre2_compile_context_free(cctx);
    quality_regex_free(re);
    return rc;
}

int quality_regex_match(const struct quality_regex *re, struct quality_scratch *s,
                        const char *subject, size_t len)
{
    if (re == NULL || s == NULL || (subject == NULL && len))
        return -EINVAL;
    if (subject == NULL)
        subject = "";
    int rc = pcre2_match(re->code, (PCRE2_SPTR)subject, len, 0, 0, s->md, re->mctx);
    if (rc >= 0)
        return 1;
    switch (rc) {
    case PCRE2_ERROR_NOMATCH:
        return 0;
    case PCRE2_ERROR_MATCHLIMIT:
    case PCRE2_ERROR_DEPTHLIMIT:
    case PCRE2_ERROR_HEAPLIMIT:
        return TS_TOOBIG;
    case PCRE2_ERROR_NOMEMORY:
        return -ENOMEM;
    default:
        return -EINVAL;
    }
}

/* ---- JSON ------------------------------------------------------------------------ */

static bool starts_nocase(const char *p, size_t n, const char *word)
{
    size_t wl = strlen(word);
    if (n < wl)
        return false;
    for (size_t i = 0; i < wl; i++) {
        if (ascii_lower((unsigned char)p[i]) != word[i])
            return false;
    }
    return true;
}

/* Narrows [*p, *p + *n) to the inside of a ```json fence, if it is one. */
static void strip_fence(const char **p, size_t *n)
{
    const char *s = *p;
    size_t len = *n;
    if (len < 6 || memcmp(s, "```", 3) != 0 || memcmp(s + len - 3, "```", 3) != 0)
        return;
    const char *nl = memchr(s + 3, '\n', len - 3);
    if (nl == NULL || (size_t)(nl - s) > len - 3)
        return;
    /* The info string: blanks, optionally "json", blanks (a \r before \n too). */
    const char *q = s + 3;
    while (q < nl && (*q == ' ' || *q == '\t'))
        q++;
    if (starts_nocase(q, (size_t)(nl - q), "json"))
        q += 4;
    while (q < nl && (*q == ' ' || *q == '\t' || *q == '\r'))
        q++;
    if (q != nl)
        return;
    *p = nl + 1;
    *n = (size_t)((s + len - 3) - (nl + 1));
}

int quality_json_check(const char *answer, size_t len, const char *const *keys, size_t nkeys,
                       unsigned flags)
{
    if (answer == NULL) {
        if (len)
            return -EINVAL;
        answer = "";
    }
    const unsigned char *u = (const unsigned char *)answer;
    size_t w;
    if (flags & QUALITY_JSON_STRIP_FENCE) {
        while (len > 0 && (w = space_at(u, len)) > 0)
            u += w, len -= w;
        while (len > 0 && (w = space_before(u, len)) > 0)
            len -= w;
        answer = (const char *)u;
        strip_fence(&answer, &len);
    }
    if (len > QUALITY_MAX_JSON)
        return QUALITY_JSON_TOOBIG;

    json_error_t jerr;
    json_t *doc = json_loadb(answer, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    if (doc == NULL)
        return json_error_code(&jerr) == json_error_out_of_memory ? -ENOMEM : QUALITY_JSON_INVALID;
    int rc = QUALITY_JSON_VALID;
    if (nkeys > 0) {
        if (!json_is_object(doc)) {
            rc = QUALITY_JSON_NOT_OBJECT;
        } else {
            for (size_t i = 0; i < nkeys; i++) {
                if (keys[i] == NULL || json_object_get(doc, keys[i]) == NULL) {
                    rc = QUALITY_JSON_MISSING_KEY;
                    break;
                }
            }
        }
    }
    json_decref(doc);
    return rc;
}

/* ---- one answer ------------------------------------------------------------------ */

int quality_score(struct quality_scratch *s, const struct quality_cfg *cfg, const char *answer,
                  size_t len, const char *ref, size_t ref_len, struct quality_scores *out)
{
    if (s == NULL || out == NULL || (answer == NULL && len))
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    if (answer == NULL)
        answer = "";
    int rc;
    if (ref != NULL) {
        struct rouge_score rs;
        struct bleu_score bs;
        if ((rc = quality_rouge_l(s, answer, len, ref, ref_len, &rs)) != 0)
            return rc;
        if ((rc = quality_bleu(s, answer, len, ref, ref_len, &bs)) != 0)
            return rc;
        out->rouge_l = rs.fmeasure;
        out->bleu4 = bs.score;
        out->truncated = rs.truncated || bs.truncated;
        out->exact = quality_exact_match(answer, len, ref, ref_len, cfg && cfg->exact_nocase);
        out->have |= QUALITY_HAVE_REF;
    }
    if (cfg != NULL && cfg->regex != NULL) {
        rc = quality_regex_match(cfg->regex, s, answer, len);
        if (rc < 0 && rc != TS_TOOBIG)
            return rc;
        out->regex_match = rc == 1;
        out->regex_error = rc == TS_TOOBIG;
        out->have |= QUALITY_HAVE_REGEX;
    }
    if (cfg != NULL && cfg->json) {
        rc = quality_json_check(answer, len, cfg->json_keys, cfg->json_nkeys, cfg->json_flags);
        if (rc < 0)
            return rc;
        out->json_valid = rc == QUALITY_JSON_VALID;
        out->have |= QUALITY_HAVE_JSON;
    }
    return 0;
}

bool quality_scores_pass(const struct quality_scores *q, const struct quality_target *t)
{
    if (t == NULL)
        return true;
    if (q->have & QUALITY_HAVE_REF) {
        if (t->rouge_l_min > 0 && q->rouge_l < t->rouge_l_min)
            return false;
        if (t->bleu4_min > 0 && q->bleu4 < t->bleu4_min)
            return false;
        if (t->exact && !q->exact)
            return false;
    }
    if (t->regex && (q->have & QUALITY_HAVE_REGEX) && !q->regex_match)
        return false;
    if (t->json && (q->have & QUALITY_HAVE_JSON) && !q->json_valid)
        return false;
    return true;
}

/* ---- statistics ---------------------------------------------------------------- */

void quality_dist_reset(struct quality_dist *d)
{
    memset(d, 0, sizeof(*d));
    d->min_fix = UINT64_MAX;
}

void quality_stats_reset(struct quality_stats *qs)
{
    memset(qs, 0, sizeof(*qs));
    quality_dist_reset(&qs->rouge_l);
    quality_dist_reset(&qs->bleu4);
}

void quality_dist_add(struct quality_dist *d, double v)
{
    if (!(v > 0)) /* also NAN */
        v = 0;
    if (v > 1)
        v = 1;
    uint64_t fix = (uint64_t)llround(v * (double)QUALITY_FIX);
    d->count++;
    d->sum_fix += fix;
    if (fix < d->min_fix)
        d->min_fix = fix;
    if (fix > d->max_fix)
        d->max_fix = fix;
    d->bins[fix / (QUALITY_FIX / QUALITY_BINS)]++;
}

void quality_dist_merge(struct quality_dist *dst, const struct quality_dist *src)
{
    dst->count += src->count;
    dst->sum_fix += src->sum_fix;
    if (src->min_fix < dst->min_fix)
        dst->min_fix = src->min_fix;
    if (src->max_fix > dst->max_fix)
        dst->max_fix = src->max_fix;
    for (size_t i = 0; i <= QUALITY_BINS; i++)
        dst->bins[i] += src->bins[i];
}

void quality_stats_add(struct quality_stats *qs, const struct quality_scores *q)
{
    if (q->have == 0)
        return;
    qs->requests++;
    if (q->have & QUALITY_HAVE_REF) {
        qs->with_ref++;
        qs->exact += q->exact;
        qs->truncated += q->truncated;
        quality_dist_add(&qs->rouge_l, q->rouge_l);
        quality_dist_add(&qs->bleu4, q->bleu4);
    }
    if (q->have & QUALITY_HAVE_REGEX) {
        qs->regex_checked++;
        qs->regex_matched += q->regex_match;
        qs->regex_errors += q->regex_error;
    }
    if (q->have & QUALITY_HAVE_JSON) {
        qs->json_checked++;
        qs->json_valid += q->json_valid;
    }
}

void quality_stats_merge(struct quality_stats *dst, const struct quality_stats *src)
{
    dst->requests += src->requests;
    dst->with_ref += src->with_ref;
    dst->exact += src->exact;
    dst->truncated += src->truncated;
    dst->regex_checked += src->regex_checked;
    dst->regex_matched += src->regex_matched;
    dst->regex_errors += src->regex_errors;
    dst->json_checked += src->json_checked;
    dst->json_valid += src->json_valid;
    quality_dist_merge(&dst->rouge_l, &src->rouge_l);
    quality_dist_merge(&dst->bleu4, &src->bleu4);
}

double quality_dist_mean(const struct quality_dist *d)
{
    return d->count ? (double)d->sum_fix / (double)QUALITY_FIX / (double)d->count : 0.0;
}

double quality_dist_min(const struct quality_dist *d)
{
    return d->count ? (double)d->min_fix / (double)QUALITY_FIX : 0.0;
}

double quality_dist_max(const struct quality_dist *d)
{
    return d->count ? (double)d->max_fix / (double)QUALITY_FIX : 0.0;
}

double quality_dist_percentile(const struct quality_dist *d, double p)
{
    if (d->count == 0)
        return 0.0;
    double r = ceil(p / 100.0 * (double)d->count);
    uint64_t rank = r < 1 ? 1 : r > (double)d->count ? d->count : (uint64_t)r;
    uint64_t seen = 0;
    size_t i = 0;
    for (; i < QUALITY_BINS; i++) {
        seen += d->bins[i];
        if (seen >= rank)
            break;
    }
    double v = (double)i / QUALITY_BINS;
    double min = quality_dist_min(d), max = quality_dist_max(d);
    return v < min ? min : v > max ? max : v;
}

/* A JSON number, or null for NAN and infinities. */
static json_t *rate(uint64_t num, uint64_t den)
{
    return den ? json_real((double)num / (double)den) : json_null();
}

static json_t *dist_to_json(const struct quality_dist *d)
{
    if (d->count == 0)
        return json_null();
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    int rc = tsjson_put(o, "mean", json_real(quality_dist_mean(d)));
    rc |= tsjson_put(o, "p50", json_real(quality_dist_percentile(d, 50)));
    rc |= tsjson_put(o, "p10", json_real(quality_dist_percentile(d, 10)));
    rc |= tsjson_put(o, "min", json_real(quality_dist_min(d)));
    if (rc != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *quality_stats_to_json(const struct quality_stats *qs, const struct dual_sla *ds,
                              const struct consistency *cs)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    int rc = tsjson_put(o, "requests", tsjson_count(qs->requests));
    rc |= tsjson_put(o, "with_reference", tsjson_count(qs->with_ref));
    rc |= tsjson_put(o, "truncated", tsjson_count(qs->truncated));
    rc |= tsjson_put(o, "rouge_l", dist_to_json(&qs->rouge_l));
    rc |= tsjson_put(o, "bleu4", dist_to_json(&qs->bleu4));
    rc |= tsjson_put(o, "exact_match_rate", rate(qs->exact, qs->with_ref));
    rc |= tsjson_put(o, "regex_match_rate", rate(qs->regex_matched, qs->regex_checked));
    rc |= tsjson_put(o, "json_valid_rate", rate(qs->json_valid, qs->json_checked));
    rc |= tsjson_put(o, "dual_sla", ds ? dual_sla_to_json(ds) : json_null());
    rc |= tsjson_put(o, "consistency", cs ? consistency_to_json(cs) : json_null());
    if (rc != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- exact state, for results merged later ---------------------------------------- */

json_t *quality_dist_state_json(const struct quality_dist *d)
{
    json_t *bins = json_array();
    for (size_t i = 0; bins && i <= QUALITY_BINS; i++)
        if (d->bins[i] && json_array_append_new(
                              bins, json_pack("[I, o]", (json_int_t)i, tsjson_count(d->bins[i])))) {
            json_decref(bins);
            bins = NULL;
        }
    json_t *o = json_object();
    int rc = tsjson_put(o, "count", tsjson_count(d->count));
    rc |= tsjson_put(o, "sum_fix", tsjson_count(d->sum_fix));
    rc |= tsjson_put(o, "min_fix", tsjson_count(d->count ? d->min_fix : 0));
    rc |= tsjson_put(o, "max_fix", tsjson_count(d->max_fix));
    rc |= tsjson_put(o, "bins", bins);
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* A JSON integer in [0, max] into *out; false otherwise. */
static bool state_u64(const json_t *o, const char *key, uint64_t max, uint64_t *out)
{
    const json_t *v = key ? json_object_get(o, key) : o;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) > max)
        return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

int quality_dist_state_add(struct quality_dist *d, const json_t *o)
{
    struct quality_dist t;
    const json_t *bins = json_object_get(o, "bins"), *b;
    size_t i;
    quality_dist_reset(&t);
    if (!json_is_object(o) || !json_is_array(bins) || !state_u64(o, "count", INT64_MAX, &t.count) ||
        !state_u64(o, "sum_fix", INT64_MAX, &t.sum_fix) ||
        !state_u64(o, "min_fix", QUALITY_FIX, &t.min_fix) ||
        !state_u64(o, "max_fix", QUALITY_FIX, &t.max_fix))
        return -EINVAL;
    uint64_t total = 0;
    json_array_foreach(bins, i, b)
    {
        uint64_t at, c;
        if (!json_is_array(b) || json_array_size(b) != 2 ||
            !state_u64(json_array_get(b, 0), NULL, QUALITY_BINS, &at) ||
            !state_u64(json_array_get(b, 1), NULL, INT64_MAX, &c) || c > INT64_MAX - total)
            return -EINVAL;
        t.bins[at] += c;
        total += c;
    }
    /* every score is in [0, 1]: the sum is at most count whole scores */
    if (total != t.count || t.sum_fix / QUALITY_FIX > t.count ||
        (t.count && t.min_fix > t.max_fix) || d->count > UINT64_MAX - t.count ||
        d->sum_fix > UINT64_MAX - t.sum_fix)
        return -EINVAL;
    if (!t.count) {
        t.min_fix = UINT64_MAX;
        t.max_fix = 0;
    }
    quality_dist_merge(d, &t);
    return 0;
}

json_t *quality_stats_state_json(const struct quality_stats *qs)
{
    json_t *o = json_object();
    int rc = tsjson_put(o, "requests", tsjson_count(qs->requests));
    rc |= tsjson_put(o, "with_ref", tsjson_count(qs->with_ref));
    rc |= tsjson_put(o, "exact", tsjson_count(qs->exact));
    rc |= tsjson_put(o, "truncated", tsjson_count(qs->truncated));
    rc |= tsjson_put(o, "regex_checked", tsjson_count(qs->regex_checked));
    rc |= tsjson_put(o, "regex_matched", tsjson_count(qs->regex_matched));
    rc |= tsjson_put(o, "regex_errors", tsjson_count(qs->regex_errors));
    rc |= tsjson_put(o, "json_checked", tsjson_count(qs->json_checked));
    rc |= tsjson_put(o, "json_valid", tsjson_count(qs->json_valid));
    rc |= tsjson_put(o, "rouge_l", quality_dist_state_json(&qs->rouge_l));
    rc |= tsjson_put(o, "bleu4", quality_dist_state_json(&qs->bleu4));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int quality_stats_state_add(struct quality_stats *qs, const json_t *o)
{
    struct quality_stats t;
    quality_stats_reset(&t);
    if (!json_is_object(o) || !state_u64(o, "requests", INT64_MAX, &t.requests) ||
        !state_u64(o, "with_ref", t.requests, &t.with_ref) ||
        !state_u64(o, "exact", t.with_ref, &t.exact) ||
        !state_u64(o, "truncated", t.with_ref, &t.truncated) ||
        !state_u64(o, "regex_checked", t.requests, &t.regex_checked) ||
        !state_u64(o, "regex_matched", t.regex_checked, &t.regex_matched) ||
        !state_u64(o, "regex_errors", t.regex_checked, &t.regex_errors) ||
        !state_u64(o, "json_checked", t.requests, &t.json_checked) ||
        !state_u64(o, "json_valid", t.json_checked, &t.json_valid) ||
        quality_dist_state_add(&t.rouge_l, json_object_get(o, "rouge_l")) ||
        quality_dist_state_add(&t.bleu4, json_object_get(o, "bleu4")))
        return -EINVAL;
    quality_stats_merge(qs, &t);
    return 0;
}

/* ---- windowed dual SLA --------------------------------------------------------------- */

/* The smallest count c with c / window >= target (up to 1e-9 of rounding). */
static uint32_t need_count(double target, uint32_t window)
{
    double c = ceil(target * window - 1e-9);
    return c <= 0 ? 0 : (uint32_t)c;
}

int dual_sla_init(struct dual_sla *d, const struct dual_sla_cfg *cfg)
{
    if (d == NULL || cfg == NULL || cfg->window == 0 || !(cfg->quality_target >= 0) ||
        !(cfg->quality_target <= 1) || !(cfg->latency_target >= 0) || !(cfg->latency_target <= 1))
        return -EINVAL;
    memset(d, 0, sizeof(*d));
    d->cfg = *cfg;
    d->need_quality = need_count(cfg->quality_target, cfg->window);
    d->need_latency = need_count(cfg->latency_target, cfg->window);
    return 0;
}

void dual_sla_feed(struct dual_sla *d, bool quality_ok, bool latency_ok)
{
    d->requests++;
    d->in_window++;
    d->quality_ok += quality_ok;
    d->latency_ok += latency_ok;
    if (d->in_window < d->cfg.window)
        return;
    d->windows++;
    if (d->quality_ok >= d->need_quality && d->latency_ok >= d->need_latency)
        d->attained++;
    d->in_window = d->quality_ok = d->latency_ok = 0;
}

double dual_sla_attainment(const struct dual_sla *d)
{
    return d->windows ? (double)d->attained / (double)d->windows : NAN;
}

json_t *dual_sla_to_json(const struct dual_sla *d)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    int rc = tsjson_put(o, "window", tsjson_count(d->cfg.window));
    rc |= tsjson_put(o, "windows", tsjson_count(d->windows));
    rc |= tsjson_put(o, "attained", tsjson_count(d->attained));
    rc |= tsjson_put(o, "attainment_rate", tsjson_num(dual_sla_attainment(d)));
    rc |= tsjson_put(o, "quality_target", json_real(d->cfg.quality_target));
    rc |= tsjson_put(o, "latency_target", json_real(d->cfg.latency_target));
    if (rc != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- consistency ------------------------------------------------------------------ */

struct cons_slot {
    uint64_t hash;
    char *text; /* first answer, cut to max_answer_bytes */
    float *vec; /* its embedding, or NULL */
    uint32_t len, dims;
    bool used;
};

struct consistency {
    struct consistency_cfg cfg;
    struct cons_slot *slots;
    size_t mask; /* slots - 1 (a power of two) */
    uint32_t prompts;
    struct quality_scratch *scratch;
    uint64_t pairs;
    double sum;
    uint32_t win_pairs;
    double win_sum;
    uint64_t windows, held;
    uint32_t run;
    uint64_t untracked;
    unsigned methods;
};

int consistency_new(const struct consistency_cfg *cfg, struct consistency **out)
{
    if (cfg == NULL || out == NULL || !(cfg->threshold >= -1) || !(cfg->threshold <= 1) ||
        cfg->max_prompts > (1u << 20))
        return -EINVAL;
    struct consistency *c = ts_calloc(1, sizeof(*c));
    if (c == NULL)
        return -ENOMEM;
    c->cfg = *cfg;
    if (c->cfg.window == 0)
        c->cfg.window = 20;
    if (c->cfg.k == 0)
        c->cfg.k = 3;
    if (c->cfg.max_prompts == 0)
        c->cfg.max_prompts = 1024;
    if (c->cfg.max_answer_bytes == 0)
        c->cfg.max_answer_bytes = 4096;
    size_t n = 2;
    while (n < 2 * (size_t)c->cfg.max_prompts)
        n *= 2;
    c->slots = ts_calloc(n, sizeof(*c->slots));
    c->mask = n - 1;
    if (c->slots == NULL || quality_scratch_new(&c->scratch) != 0) {
        consistency_free(c);
        return -ENOMEM;
    }
    *out = c;
    return 0;
}

void consistency_free(struct consistency *c)
{
    if (c == NULL)
        return;
    if (c->slots != NULL) {
        for (size_t i = 0; i <= c->mask; i++) {
            ts_free(c->slots[i].text);
            ts_free(c->slots[i].vec);
        }
    }
    ts_free(c->slots);
    quality_scratch_free(c->scratch);
    ts_free(c);
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static double cosine(const float *a, const float *b, size_t n)
{
    double dot = 0, na = 0, nb = 0;
    for (size_t i = 0; i < n; i++) {
        dot += (double)a[i] * b[i];
        na += (double)a[i] * a[i];
        nb += (double)b[i] * b[i];
    }
    if (na == 0 || nb == 0)
        return 0;
    double c = dot / (sqrt(na) * sqrt(nb));
    return c > 1 ? 1 : c < -1 ? -1 : c;
}

static void add_pair(struct consistency *c, double sim, unsigned method)
{
    c->methods |= method;
    c->pairs++;
    c->sum += sim;
    c->win_pairs++;
    c->win_sum += sim;
    if (c->win_pairs < c->cfg.window)
        return;
    c->windows++;
    if (c->win_sum / c->cfg.window >= c->cfg.threshold) {
        c->held++;
        c->run++;
    } else {
        c->run = 0;
    }
    c->win_pairs = 0;
    c->win_sum = 0;
}

int consistency_feed(struct consistency *c, uint64_t prompt_hash, const char *answer, size_t len,
                     const float *vec, size_t dims)
{
    if (c == NULL || (answer == NULL && len) ||
        (vec != NULL && (dims == 0 || dims > CONSISTENCY_MAX_DIMS)))
        return -EINVAL;
    if (answer == NULL)
        answer = "";
    if (len > c->cfg.max_answer_bytes)
        len = c->cfg.max_answer_bytes;

    size_t i = mix64(prompt_hash) & c->mask;
    while (c->slots[i].used && c->slots[i].hash != prompt_hash)
        i = (i + 1) & c->mask;
    struct cons_slot *slot = &c->slots[i];

    if (slot->used) {
        if (vec != NULL && slot->vec != NULL && slot->dims == dims) {
            add_pair(c, cosine(vec, slot->vec, dims), CONSISTENCY_COSINE);
            return 0;
        }
        struct rouge_score rs;
        int rc = quality_rouge_l(c->scratch, answer, len, slot->text, slot->len, &rs);
        if (rc != 0)
            return rc;
        add_pair(c, rs.fmeasure, CONSISTENCY_LEXICAL);
        return 0;
    }
    if (c->prompts >= c->cfg.max_prompts) {
        c->untracked++;
        return 0;
    }
    char *text = ts_malloc(len + 1);
    float *copy = vec ? ts_malloc(dims * sizeof(float)) : NULL;
    if (text == NULL || (vec != NULL && copy == NULL)) {
        ts_free(text);
        ts_free(copy);
        return -ENOMEM;
    }
    if (len)
        memcpy(text, answer, len);
    text[len] = '\0';
    if (vec)
        memcpy(copy, vec, dims * sizeof(float));
    *slot =
        (struct cons_slot){prompt_hash, text, copy, (uint32_t)len, vec ? (uint32_t)dims : 0, true};
    c->prompts++;
    return 0;
}

void consistency_get(const struct consistency *c, struct consistency_summary *out)
{
    memset(out, 0, sizeof(*out));
    out->pairs = c->pairs;
    out->mean_similarity = c->pairs ? c->sum / (double)c->pairs : NAN;
    out->windows = c->windows;
    out->held = c->held;
    out->run = c->run;
    out->steady = c->run >= c->cfg.k;
    out->untracked = c->untracked;
    out->methods = c->methods;
}

json_t *consistency_to_json(const struct consistency *c)
{
    struct consistency_summary sum;
    consistency_get(c, &sum);
    const char *method = NULL;
    if (sum.methods == CONSISTENCY_LEXICAL)
        method = "lexical";
    else if (sum.methods == CONSISTENCY_COSINE)
        method = "cosine";
    else if (sum.methods != 0)
        method = "mixed";

    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    int rc = tsjson_put(o, "pairs", tsjson_count(sum.pairs));
    rc |= tsjson_put(o, "mean_similarity", tsjson_num(sum.mean_similarity));
    rc |= tsjson_put(o, "steady", json_boolean(sum.steady));
    rc |= tsjson_put(o, "windows", tsjson_count(sum.windows));
    rc |= tsjson_put(o, "windows_held", tsjson_count(sum.held));
    rc |= tsjson_put(o, "window", tsjson_count(c->cfg.window));
    rc |= tsjson_put(o, "threshold", json_real(c->cfg.threshold));
    rc |= tsjson_put(o, "k", tsjson_count(c->cfg.k));
    rc |= tsjson_put(o, "method", method ? json_string(method) : json_null());
    rc |= tsjson_put(o, "untracked", tsjson_count(sum.untracked));
    if (rc != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}
