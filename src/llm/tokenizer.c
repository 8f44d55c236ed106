/*
 * tokenizer.c - byte-level and SentencePiece BPE from tokenizer.json, tiktoken
 * rank files; encode with a PCRE2 pre-tokenizer and heap-ordered merges.
 *
 * Every kind of file becomes the same tables: token bytes by id, a hash from
 * bytes to id, the initial id of every byte, and a hash from an adjacent pair
 * of ids to (merge rank, merged id). tiktoken has no merge list: its pairs are
 * derived from the ranks (a pair merges with the rank of its concatenation),
 * which is exactly what tiktoken's "lowest rank of any adjacent concatenation"
 * loop computes, because every part of a piece is always a token.
 */
#include "llm/tokenizer.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "base/file.h"

#define NO_ID             UINT32_MAX
#define CACHE_SLOTS       16384
#define CACHE_WORD        24
#define CACHE_IDS         12
#define REGEX_MATCH_LIMIT 10000000u

static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char CL100K_PATTERN[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char O200K_PATTERN[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static const char SP_SPACE[] = "\xe2\x96\x81"; /* U+2581 LOWER ONE EIGHTH BLOCK */

static bool is_sp_space(const char *p, size_t n, size_t i)
{
    return i + 3 <= n && memcmp(p + i, SP_SPACE, 3) == 0;
}

enum tok_mode {
    MODE_BYTE_LEVEL, /* HF byte-level BPE */
    MODE_TIKTOKEN,   /* tiktoken ranks: bytes are tokens */
    MODE_SP,         /* SentencePiece-style BPE on "▁"-joined text */
};

enum sp_prepend {
    SP_PREPEND_NONE,
    SP_PREPEND_ALWAYS, /* every span between special tokens */
    SP_PREPEND_FIRST,  /* only the span at the start of the text */
};

struct tok_entry {
    uint32_t off;
    uint32_t len; /* NO_ID when the id is unused */
};

struct pair_slot {
    uint64_t key; /* (left << 32 | right) + 1; 0 is empty */
    uint32_t rank;
    uint32_t id;
};

struct special {
    uint32_t id;
    uint32_t off; /* content in the blob */
    uint32_t len;
};

struct tokenizer {
    enum tok_mode mode;
    size_t n_ids;
    struct tok_entry *tok;
    char *blob;
    size_t blob_len, blob_cap;
    uint32_t *bmap; /* open addressing, ids, NO_ID empty */
    size_t bmap_mask;
    struct pair_slot *pairs;
    size_t pairs_mask, n_pairs;
    uint32_t byte_id[256];
    bool direct_lookup; /* a whole piece that is a token is that token */
    bool add_prefix_space;
    bool byte_fallback;
    bool fuse_unk; /* a run of unknown characters is one unk */
    enum sp_prepend sp_prepend;
    bool sp_words; /* no token has "▁" after another character: cut before each "▁" run */
    uint32_t unk_id;
    pcre2_code *re; /* NULL: a span is one piece */
    pcre2_general_context *gctx;
    struct special *specials; /* sorted by first byte, then longest first */
    size_t n_specials;
    uint32_t special_first[257]; /* specials[first[c]..first[c+1]) start with byte c */
};

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

static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

/* ---- tables ------------------------------------------------------------ */

static long bmap_find(const struct tokenizer *t, const char *s, size_t n)
{
    if (t->bmap == NULL)
        return -1;
    for (size_t i = hash_bytes(s, n) & t->bmap_mask;; i = (i + 1) & t->bmap_mask) {
        uint32_t id = t->bmap[i];
        if (id == NO_ID)
            return -1;
        if (t->tok[id].len == n && memcmp(t->blob + t->tok[id].off, s, n) == 0)
            return id;
    }
}

/* Adds id under its bytes unless those bytes already have an id. */
static void bmap_add(struct tokenizer *t, uint32_t id)
{
    const char *s = t->blob + t->tok[id].off;
    size_t n = t->tok[id].len;
    size_t i = hash_bytes(s, n) & t->bmap_mask;
    for (;; i = (i + 1) & t->bmap_mask) {
        uint32_t o = t->bmap[i];
        if (o == NO_ID)
            break;
        if (t->tok[o].len == n && memcmp(t->blob + t->tok[o].off, s, n) == 0)
            return;
    }
    t->bmap[i] = id;
}

static int bmap_build(struct tokenizer *t)
{
    size_t cap = pow2_at_least(t->n_ids * 2 + 2);
    t->bmap = ts_malloc(cap * sizeof(*t->bmap));
    if (t->bmap == NULL)
        return -ENOMEM;
    memset(t->bmap, 0xff, cap * sizeof(*t->bmap));
    t->bmap_mask = cap - 1;
    for (size_t id = 0; id < t->n_ids; id++)
        if (t->tok[id].len != NO_ID)
            bmap_add(t, (uint32_t)id);
    return 0;
}

static bool pair_find(const struct tokenizer *t, uint32_t a, uint32_t b, uint32_t *rank,
                      uint32_t *id)
{
    if (t->pairs == NULL)
        return false;
    uint64_t key = ((uint64_t)a << 32 | b) + 1;
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

static int pairs_alloc(struct tokenizer *t, size_t n)
{
    size_t cap = pow2_at_least(n * 2 + 2);
    t->pairs = ts_calloc(cap, sizeof(*t->pairs));
    if (t->pairs == NULL)
        return -ENOMEM;
    t->pairs_mask = cap - 1;
    return 0;
}

/* Records the merge a + b -> id at rank, keeping the lowest rank of a pair. */
static void pair_add(struct tokenizer *t, uint32_t a, uint32_t b, uint32_t rank, uint32_t id)
{
    uint64_t key = ((uint64_t)a << 32 | b) + 1;
    size_t i = hash_u64(key) & t->pairs_mask;
    for (;; i = (i + 1) & t->pairs_mask) {
        if (t->pairs[i].key == 0)
            break;
        if (t->pairs[i].key == key) {
            if (rank < t->pairs[i].rank) {
                t->pairs[i].rank = rank;
                t->pairs[i].id = id;
            }
            return;
        }
    }
    t->pairs[i].key = key;
    t->pairs[i].rank = rank;
    t->pairs[i].id = id;
    t->n_pairs++;
}

static int blob_add(struct tokenizer *t, const void *p, size_t n, uint32_t *off)
{
    if (t->blob_len + n > UINT32_MAX - 1)
        return TS_TOOBIG;
    if (t->blob == NULL || t->blob_len + n > t->blob_cap) {
        size_t cap = t->blob_cap ? t->blob_cap : 4096;
        while (cap < t->blob_len + n)
            cap *= 2;
        char *nb = ts_realloc(t->blob, cap);
        if (nb == NULL)
            return -ENOMEM;
        t->blob = nb;
        t->blob_cap = cap;
    }
    memcpy(t->blob + t->blob_len, p, n);
    *off = (uint32_t)t->blob_len;
    t->blob_len += n;
    return 0;
}

static int tok_set(struct tokenizer *t, uint32_t id, const void *p, size_t n)
{
    uint32_t off;
    int rc = blob_add(t, p, n, &off);
    if (rc < 0)
        return rc;
    t->tok[id].off = off;
    t->tok[id].len = (uint32_t)n;
    return 0;
}

static struct tokenizer *tokenizer_alloc(size_t n_ids)
{
    struct tokenizer *t = ts_calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->n_ids = n_ids;
    t->tok = ts_malloc((n_ids ? n_ids : 1) * sizeof(*t->tok));
    if (t->tok == NULL) {
        ts_free(t);
        return NULL;
    }
    for (size_t i = 0; i < n_ids; i++)
        t->tok[i].len = NO_ID;
    for (int i = 0; i < 256; i++)
        t->byte_id[i] = NO_ID;
    t->unk_id = NO_ID;
    return t;
}

void tokenizer_free(struct tokenizer *t)
{
    if (t == NULL)
        return;
    ts_free(t->tok);
    ts_free(t->blob);
    ts_free(t->bmap);
    ts_free(t->pairs);
    ts_free(t->specials);
    pcre2_code_free(t->re);
    pcre2_general_context_free(t->gctx);
    ts_free(t);
}

static int compile_regex(struct tokenizer *t, const char *pat, size_t n, char *err, size_t errlen)
{
    if (n > TOKENIZER_MAX_PATTERN) {
        ts_errf(err, errlen, "pre-tokenizer regex: %zu bytes (limit %d)", n, TOKENIZER_MAX_PATTERN);
        return TS_TOOBIG;
    }
    t->gctx = pcre2_general_context_create(ts_malloc_hook, ts_free_hook, NULL);
    if (t->gctx == NULL)
        return -ENOMEM;
    pcre2_compile_context *cctx = pcre2_compile_context_create(t->gctx);
    if (cctx == NULL)
        return -ENOMEM;
    int ecode;
    PCRE2_SIZE eoff;
    t->re = pcre2_compile((PCRE2_SPTR)pat, n, PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF,
                          &ecode, &eoff, cctx);
    pcre2_compile_context_free(cctx);
    if (t->re == NULL && (ecode == PCRE2_ERROR_NOMEMORY || ecode == PCRE2_ERROR_HEAP_FAILED))
        return -ENOMEM;
    if (t->re == NULL) {
        PCRE2_UCHAR msg[128];
        pcre2_get_error_message(ecode, msg, sizeof(msg));
        ts_errf(err, errlen, "pre-tokenizer regex at offset %zu: %s", (size_t)eoff,
                (const char *)msg);
        return TS_PARSE;
    }
    (void)pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE); /* interpreted when JIT is missing */
    return 0;
}

static int special_cmp(const void *a, const void *b, void *blob)
{
    const struct special *x = a, *y = b;
    unsigned char cx = (unsigned char)((char *)blob)[x->off];
    unsigned char cy = (unsigned char)((char *)blob)[y->off];
    if (cx != cy)
        return cx < cy ? -1 : 1;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : (x->id > y->id);
}

static void specials_index(struct tokenizer *t)
{
    if (t->n_specials > 1)
        qsort_r(t->specials, t->n_specials, sizeof(*t->specials), special_cmp, t->blob);
    size_t j = 0;
    for (int c = 0; c < 256; c++) {
        t->special_first[c] = (uint32_t)j;
        while (j < t->n_specials && (unsigned char)t->blob[t->specials[j].off] == c)
            j++;
    }
    t->special_first[256] = (uint32_t)j;
}

static int special_add(struct tokenizer *t, size_t *cap, uint32_t id, const char *s, size_t n)
{
    if (n == 0)
        return 0;
    if (t->n_specials >= TOKENIZER_MAX_SPECIAL)
        return TS_TOOBIG;
    if (t->n_specials == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        struct special *ns = ts_realloc(t->specials, nc * sizeof(*ns));
        if (ns == NULL)
            return -ENOMEM;
        t->specials = ns;
        *cap = nc;
    }
    uint32_t off;
    int rc = blob_add(t, s, n, &off);
    if (rc < 0)
        return rc;
    t->specials[t->n_specials++] = (struct special){.id = id, .off = off, .len = (uint32_t)n};
    return 0;
}

/* ---- tiktoken ---------------------------------------------------------- */

int tokenizer_load_tiktoken(const char *data, size_t len, enum tokenizer_kind kind,
                            struct tokenizer **out, char *err, size_t errlen)
{
    static const struct {
        const char *s;
        uint32_t id;
    } cl100k_sp[] = {{"<|endoftext|>", 100257},
                     {"<|fim_prefix|>", 100258},
                     {"<|fim_middle|>", 100259},
                     {"<|fim_suffix|>", 100260},
                     {"<|endofprompt|>", 100276}},
      o200k_sp[] = {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}};
    if (kind != TOKENIZER_CL100K && kind != TOKENIZER_O200K) {
        ts_errf(err, errlen, "tiktoken: unknown encoding (cl100k_base or o200k_base)");
        return -EINVAL;
    }
    if (len > TOKENIZER_MAX_FILE) {
        ts_errf(err, errlen, "tiktoken: %zu bytes (limit %u)", len, TOKENIZER_MAX_FILE);
        return TS_TOOBIG;
    }
    /* First pass: the largest rank, so the id table is allocated once. */
    size_t max_id = kind == TOKENIZER_CL100K ? 100276 : 200018;
    size_t lines = 0;
    for (const char *p = data, *end = data + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        const char *sp = memchr(p, ' ', (size_t)(le - p));
        lines++;
        if (le > p && !(le == p + 1 && *p == '\r')) {
            char *e;
            unsigned long r = sp ? strtoul(sp + 1, &e, 10) : 0;
            if (sp == NULL || sp == p || e == sp + 1 || (e != le && !(e + 1 == le && *e == '\r'))) {
                ts_errf(err, errlen, "tiktoken line %zu: expected \"<base64> <rank>\"", lines);
                return TS_PARSE;
            }
            if (r >= TOKENIZER_MAX_VOCAB) {
                ts_errf(err, errlen, "tiktoken line %zu: rank %lu over the limit %u", lines, r,
                        TOKENIZER_MAX_VOCAB - 1);
                return TS_TOOBIG;
            }
            if (r > max_id)
                max_id = r;
        }
        p = le + 1;
    }
    struct tokenizer *t = tokenizer_alloc(max_id + 1);
    if (t == NULL)
        return -ENOMEM;
    t->mode = MODE_TIKTOKEN;
    t->direct_lookup = true;
    int rc = 0;
    char tokbuf[TOKENIZER_MAX_TOKEN_LEN / 4 * 3 + 4];
    lines = 0;
    for (const char *p = data, *end = data + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        lines++;
        if (le > p && !(le == p + 1 && *p == '\r')) {
            const char *sp = memchr(p, ' ', (size_t)(le - p));
            unsigned long r = strtoul(sp + 1, NULL, 10);
            size_t b64 = (size_t)(sp - p);
            long n = b64 <= TOKENIZER_MAX_TOKEN_LEN ? base64_decode(p, b64, tokbuf, 0) : TS_TOOBIG;
            if (n <= 0) {
                ts_errf(err, errlen, "tiktoken line %zu: bad base64 token", lines);
                rc = n == TS_TOOBIG ? TS_TOOBIG : TS_PARSE;
                goto out_free;
            }
            if (t->tok[r].len != NO_ID) {
                ts_errf(err, errlen, "tiktoken line %zu: rank %lu given twice", lines, r);
                rc = TS_PARSE;
                goto out_free;
            }
            if ((rc = tok_set(t, (uint32_t)r, tokbuf, (size_t)n)) < 0)
                goto out_free;
        }
        p = le + 1;
    }
    size_t spcap = 0;
    size_t nsp = kind == TOKENIZER_CL100K ? 5 : 2;
    for (size_t i = 0; i < nsp; i++) {
        const char *s = kind == TOKENIZER_CL100K ? cl100k_sp[i].s : o200k_sp[i].s;
        uint32_t id = kind == TOKENIZER_CL100K ? cl100k_sp[i].id : o200k_sp[i].id;
        if ((rc = special_add(t, &spcap, id, s, strlen(s))) < 0)
            goto out_free;
        if (t->tok[id].len == NO_ID && (rc = tok_set(t, id, s, strlen(s))) < 0)
            goto out_free;
    }
    specials_index(t);
    if ((rc = bmap_build(t)) < 0)
        goto out_free;
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        long id = bmap_find(t, &c, 1);
        if (id < 0) {
            ts_errf(err, errlen, "tiktoken: no token for the single byte 0x%02x", b);
            rc = TS_PARSE;
            goto out_free;
        }
        t->byte_id[b] = (uint32_t)id;
    }
    size_t npairs = 0;
    for (size_t id = 0; id < t->n_ids; id++)
        if (t->tok[id].len != NO_ID && t->tok[id].len > 1)
            npairs += t->tok[id].len - 1;
    if ((rc = pairs_alloc(t, npairs)) < 0)
        goto out_free;
    for (size_t id = 0; id < t->n_ids; id++) {
        uint32_t n = t->tok[id].len;
        if (n == NO_ID || n < 2)
            continue;
        const char *s = t->blob + t->tok[id].off;
        for (uint32_t k = 1; k < n; k++) {
            long a = bmap_find(t, s, k), b = bmap_find(t, s + k, n - k);
            if (a >= 0 && b >= 0)
                pair_add(t, (uint32_t)a, (uint32_t)b, (uint32_t)id, (uint32_t)id);
        }
    }
    rc = compile_regex(t, kind == TOKENIZER_CL100K ? CL100K_PATTERN : O200K_PATTERN,
                       strlen(kind == TOKENIZER_CL100K ? CL100K_PATTERN : O200K_PATTERN), err,
                       errlen);
    if (rc < 0)
        goto out_free;
    *out = t;
    return 0;
out_free:
    if (rc == -ENOMEM)
        ts_errf(err, errlen, "tiktoken: out of memory");
    tokenizer_free(t);
    return rc;
}

/* ---- tokenizer.json ---------------------------------------------------- */

/* GPT-2's bytes_to_unicode: code point of each byte, and the way back. */
static uint32_t b2u_cp(int b)
{
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))
        return (uint32_t)b;
    int n = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255)))
            n++;
    return 256u + (uint32_t)n;
}

static size_t utf8_put(uint32_t cp, char *o)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    o[0] = (char)(0xc0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3f));
    return 2; /* byte-level code points are all below 0x800 */
}

/* Decodes a byte-level spelt token into bytes; false if a character is not a
   byte-level one (the token is then kept as its UTF-8). */
static bool byte_level_unmap(const int16_t *u2b, const char *s, size_t n, char *o, size_t *on)
{
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        uint32_t cp;
        if (c < 0x80) {
            cp = c;
            i++;
        } else if ((c & 0xe0) == 0xc0 && i + 1 < n) {
            cp = (uint32_t)(c & 0x1f) << 6 | ((unsigned char)s[i + 1] & 0x3f);
            i += 2;
        } else {
            return false;
        }
        if (cp >= 324 || u2b[cp] < 0)
            return false;
        o[k++] = (char)u2b[cp];
    }
    *on = k;
    return true;
}

static const char *json_type_name(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    case JSON_NULL:
        return "null";
    }
    return "?";
}

static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

struct hf_conf {
    bool byte_level;
    bool sp;
    bool add_prefix_space;
    enum sp_prepend sp_prepend;
    const char *pattern;
    size_t pattern_len;
};

static int hf_pretok(const json_t *p, struct hf_conf *c, const char *where, char *err,
                     size_t errlen)
{
    const char *type = jstr(p, "type");
    if (type == NULL) {
        ts_errf(err, errlen, "%s: no \"type\"", where);
        return TS_PARSE;
    }
    if (strcmp(type, "Sequence") == 0) {
        const json_t *arr = json_object_get(p, "pretokenizers");
        if (!json_is_array(arr)) {
            ts_errf(err, errlen, "%s.pretokenizers: not an array", where);
            return TS_PARSE;
        }
        for (size_t i = 0; i < json_array_size(arr); i++) {
            char w[96];
            snprintf(w, sizeof(w), "%s.pretokenizers[%zu]", where, i);
            int rc = hf_pretok(json_array_get(arr, i), c, w, err, errlen);
            if (rc < 0)
                return rc;
        }
        return 0;
    }
    if (strcmp(type, "ByteLevel") == 0) {
        c->byte_level = true;
        c->add_prefix_space = json_is_true(json_object_get(p, "add_prefix_space"));
        const json_t *ur = json_object_get(p, "use_regex");
        if (ur == NULL || json_is_true(ur)) {
            if (c->pattern != NULL) {
                ts_errf(err, errlen, "%s: a second regex split is not supported", where);
                return TS_PARSE;
            }
            c->pattern = GPT2_PATTERN;
            c->pattern_len = strlen(GPT2_PATTERN);
        }
        return 0;
    }
    if (strcmp(type, "Split") == 0) {
        const json_t *pat = json_object_get(p, "pattern");
        const char *beh = jstr(p, "behavior");
        const json_t *re = json_object_get(pat, "Regex");
        if (!json_is_string(re) || beh == NULL || strcmp(beh, "Isolated") != 0 ||
            json_is_true(json_object_get(p, "invert"))) {
            ts_errf(err, errlen,
                    "%s: only Split with a \"Regex\" pattern, behavior \"Isolated\" and no "
                    "invert is supported",
                    where);
            return TS_PARSE;
        }
        if (c->pattern != NULL) {
            ts_errf(err, errlen, "%s: a second regex split is not supported", where);
            return TS_PARSE;
        }
        c->pattern = json_string_value(re);
        c->pattern_len = json_string_length(re);
        return 0;
    }
    if (strcmp(type, "Metaspace") == 0) {
        const char *rep = jstr(p, "replacement");
        const char *scheme = jstr(p, "prepend_scheme");
        if (rep == NULL || strcmp(rep, SP_SPACE) != 0 ||
            json_is_false(json_object_get(p, "split")) == 0) {
            ts_errf(err, errlen,
                    "%s: only Metaspace with replacement \"\\u2581\" and split false is supported",
                    where);
            return TS_PARSE;
        }
        c->sp = true;
        c->sp_prepend = scheme != NULL && strcmp(scheme, "never") == 0   ? SP_PREPEND_NONE
                        : scheme != NULL && strcmp(scheme, "first") == 0 ? SP_PREPEND_FIRST
                                                                         : SP_PREPEND_ALWAYS;
        return 0;
    }
    ts_errf(err, errlen, "%s: pre-tokenizer \"%s\" is not supported", where, type);
    return TS_PARSE;
}

static int hf_normalizer(const json_t *n, struct hf_conf *c, const char *where, char *err,
                         size_t errlen)
{
    const char *type = jstr(n, "type");
    if (type == NULL) {
        ts_errf(err, errlen, "%s: no \"type\"", where);
        return TS_PARSE;
    }
    if (strcmp(type, "Sequence") == 0) {
        const json_t *arr = json_object_get(n, "normalizers");
        if (!json_is_array(arr)) {
            ts_errf(err, errlen, "%s.normalizers: not an array", where);
            return TS_PARSE;
        }
        for (size_t i = 0; i < json_array_size(arr); i++) {
            char w[96];
            snprintf(w, sizeof(w), "%s.normalizers[%zu]", where, i);
            int rc = hf_normalizer(json_array_get(arr, i), c, w, err, errlen);
            if (rc < 0)
                return rc;
        }
        return 0;
    }
    if (strcmp(type, "NFC") == 0)
        return 0; /* text is taken as already NFC (see tokenizer.h) */
    if (strcmp(type, "Prepend") == 0) {
        const char *s = jstr(n, "prepend");
        if (s != NULL && strcmp(s, SP_SPACE) == 0) {
            c->sp = true;
            c->sp_prepend = SP_PREPEND_ALWAYS;
            return 0;
        }
    }
    if (strcmp(type, "Replace") == 0) {
        const char *from = jstr(json_object_get(n, "pattern"), "String");
        const char *to = jstr(n, "content");
        if (from != NULL && to != NULL && strcmp(from, " ") == 0 && strcmp(to, SP_SPACE) == 0) {
            c->sp = true;
            return 0;
        }
    }
    ts_errf(err, errlen, "%s: normalizer \"%s\" is not supported", where, type);
    return TS_PARSE;
}

static int hf_id(const json_t *vocab, const char *s, size_t n, uint32_t *id)
{
    const json_t *v = json_object_getn(vocab, s, n);
    if (!json_is_integer(v))
        return -1;
    *id = (uint32_t)json_integer_value(v);
    return 0;
}

static int hf_merges(struct tokenizer *t, const json_t *vocab, const json_t *merges, char *err,
                     size_t errlen)
{
    size_t n = json_array_size(merges);
    int rc = pairs_alloc(t, n);
    if (rc < 0)
        return rc;
    char cat[2 * TOKENIZER_MAX_TOKEN_LEN];
    for (size_t i = 0; i < n; i++) {
        const json_t *m = json_array_get(merges, i);
        const char *a, *b;
        size_t an, bn;
        if (json_is_string(m)) {
            a = json_string_value(m);
            const char *sp = strchr(a, ' ');
            if (sp == NULL || strchr(sp + 1, ' ') != NULL) {
                ts_errf(err, errlen, "model.merges[%zu]: \"%.40s\" is not \"a b\"", i, a);
                return TS_PARSE;
            }
            an = (size_t)(sp - a);
            b = sp + 1;
            bn = json_string_length(m) - an - 1;
        } else if (json_is_array(m) && json_array_size(m) == 2 &&
                   json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0));
            an = json_string_length(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1));
            bn = json_string_length(json_array_get(m, 1));
        } else {
            ts_errf(err, errlen, "model.merges[%zu]: not a string or a pair of strings", i);
            return TS_PARSE;
        }
        if (an + bn > sizeof(cat)) {
            ts_errf(err, errlen, "model.merges[%zu]: token over %d bytes", i,
                    TOKENIZER_MAX_TOKEN_LEN);
            return TS_TOOBIG;
        }
        memcpy(cat, a, an);
        memcpy(cat + an, b, bn);
        uint32_t ia, ib, ic;
        if (hf_id(vocab, a, an, &ia) < 0 || hf_id(vocab, b, bn, &ib) < 0 ||
            hf_id(vocab, cat, an + bn, &ic) < 0) {
            ts_errf(err, errlen, "model.merges[%zu]: \"%.*s\" + \"%.*s\" is not in the vocab", i,
                    (int)(an > 40 ? 40 : an), a, (int)(bn > 40 ? 40 : bn), b);
            return TS_PARSE;
        }
        pair_add(t, ia, ib, (uint32_t)i, ic);
    }
    return 0;
}

static int hf_build(const json_t *root, struct tokenizer **out, char *err, size_t errlen)
{
    const json_t *model = json_object_get(root, "model");
    if (!json_is_object(model)) {
        ts_errf(err, errlen, "model: missing or not an object");
        return TS_PARSE;
    }
    const char *mtype = jstr(model, "type");
    if (mtype != NULL && strcmp(mtype, "BPE") != 0) {
        ts_errf(err, errlen, "model.type: \"%s\" is not supported (only BPE)", mtype);
        return TS_PARSE;
    }
    const char *cp = jstr(model, "continuing_subword_prefix");
    const char *ews = jstr(model, "end_of_word_suffix");
    if ((cp != NULL && *cp) || (ews != NULL && *ews)) {
        ts_errf(err, errlen,
                "model: continuing_subword_prefix / end_of_word_suffix are not supported");
        return TS_PARSE;
    }
    const json_t *vocab = json_object_get(model, "vocab");
    const json_t *merges = json_object_get(model, "merges");
    if (!json_is_object(vocab) || !json_is_array(merges)) {
        ts_errf(err, errlen, "model.vocab (object) and model.merges (array) are required");
        return TS_PARSE;
    }
    const json_t *added = json_object_get(root, "added_tokens");
    if (added != NULL && !json_is_array(added) && !json_is_null(added)) {
        ts_errf(err, errlen, "added_tokens: %s, not an array", json_type_name(added));
        return TS_PARSE;
    }
    struct hf_conf conf = {0};
    const json_t *nz = json_object_get(root, "normalizer");
    const json_t *pt = json_object_get(root, "pre_tokenizer");
    int rc;
    if (nz != NULL && !json_is_null(nz) &&
        (rc = hf_normalizer(nz, &conf, "normalizer", err, errlen)) < 0)
        return rc;
    if (pt != NULL && !json_is_null(pt) &&
        (rc = hf_pretok(pt, &conf, "pre_tokenizer", err, errlen)) < 0)
        return rc;
    if (conf.sp && conf.byte_level) {
        ts_errf(err, errlen, "tokenizer mixes byte-level and SentencePiece (\\u2581) parts");
        return TS_PARSE;
    }
    if (!conf.sp && !conf.byte_level) {
        ts_errf(err, errlen,
                "pre_tokenizer: neither byte-level nor SentencePiece-style; not supported");
        return TS_PARSE;
    }
    /* Ids: the largest of vocab and added tokens. */
    size_t max_id = 0;
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)vocab, key, val)
    {
        json_int_t v = json_integer_value(val);
        if (!json_is_integer(val) || v < 0 || v >= TOKENIZER_MAX_VOCAB) {
            ts_errf(err, errlen, "model.vocab[\"%.40s\"]: id must be an integer in [0, %u)", key,
                    TOKENIZER_MAX_VOCAB);
            return json_is_integer(val) && v >= 0 ? TS_TOOBIG : TS_PARSE;
        }
        if ((size_t)v > max_id)
            max_id = (size_t)v;
    }
    for (size_t i = 0; i < json_array_size(added); i++) {
        const json_t *a = json_array_get(added, i);
        const json_t *idj = json_object_get(a, "id");
        json_int_t v = json_integer_value(idj);
        if (!json_is_integer(idj) || v < 0 || v >= TOKENIZER_MAX_VOCAB ||
            !json_is_string(json_object_get(a, "content"))) {
            ts_errf(err, errlen, "added_tokens[%zu]: needs \"id\" in [0, %u) and \"content\"", i,
                    TOKENIZER_MAX_VOCAB);
            return TS_PARSE;
        }
        if ((size_t)v > max_id)
            max_id = (size_t)v;
    }
    struct tokenizer *t = tokenizer_alloc(max_id + 1);
    if (t == NULL)
        return -ENOMEM;
    t->mode = conf.sp ? MODE_SP : MODE_BYTE_LEVEL;
    t->direct_lookup = json_is_true(json_object_get(model, "ignore_merges"));
    t->byte_fallback = json_is_true(json_object_get(model, "byte_fallback"));
    t->fuse_unk = json_is_true(json_object_get(model, "fuse_unk"));
    t->add_prefix_space = conf.add_prefix_space;
    t->sp_prepend = conf.sp_prepend;
    int16_t u2b[324];
    for (int i = 0; i < 324; i++)
        u2b[i] = -1;
    for (int b = 0; b < 256; b++)
        u2b[b2u_cp(b)] = (int16_t)b;
    json_object_foreach((json_t *)vocab, key, val)
    {
        uint32_t id = (uint32_t)json_integer_value(val);
        size_t kn = strlen(key);
        char bytes[TOKENIZER_MAX_TOKEN_LEN];
        size_t bn;
        if (kn > TOKENIZER_MAX_TOKEN_LEN) {
            ts_errf(err, errlen, "model.vocab[\"%.40s...\"]: token over %d bytes", key,
                    TOKENIZER_MAX_TOKEN_LEN);
            rc = TS_TOOBIG;
            goto out_free;
        }
        if (t->tok[id].len != NO_ID) {
            ts_errf(err, errlen, "model.vocab[\"%.40s\"]: id %u used twice", key, id);
            rc = TS_PARSE;
            goto out_free;
        }
        if (conf.byte_level && byte_level_unmap(u2b, key, kn, bytes, &bn))
            rc = tok_set(t, id, bytes, bn);
        else
            rc = tok_set(t, id, key, kn);
        if (rc < 0)
            goto out_free;
    }
    size_t spcap = 0;
    for (size_t i = 0; i < json_array_size(added); i++) {
        const json_t *a = json_array_get(added, i);
        uint32_t id = (uint32_t)json_integer_value(json_object_get(a, "id"));
        const json_t *c = json_object_get(a, "content");
        if (json_string_length(c) > TOKENIZER_MAX_TOKEN_LEN) {
            ts_errf(err, errlen, "added_tokens[%zu]: content over %d bytes", i,
                    TOKENIZER_MAX_TOKEN_LEN);
            rc = TS_TOOBIG;
            goto out_free;
        }
        if ((rc = tok_set(t, id, json_string_value(c), json_string_length(c))) < 0 ||
            (rc = special_add(t, &spcap, id, json_string_value(c), json_string_length(c))) < 0)
            goto out_free;
    }
    specials_index(t);
    if ((rc = bmap_build(t)) < 0)
        goto out_free;
    if (conf.byte_level) {
        for (int b = 0; b < 256; b++) {
            char s[2];
            uint32_t id;
            if (hf_id(vocab, s, utf8_put(b2u_cp(b), s), &id) < 0) {
                ts_errf(err, errlen, "model.vocab: no byte-level token for byte 0x%02x", b);
                rc = TS_PARSE;
                goto out_free;
            }
            t->byte_id[b] = id;
        }
    } else if (t->byte_fallback) {
        for (int b = 0; b < 256; b++) {
            char s[8];
            uint32_t id;
            snprintf(s, sizeof(s), "<0x%02X>", b);
            if (hf_id(vocab, s, 6, &id) < 0) {
                ts_errf(err, errlen, "model.vocab: byte_fallback without the token %s", s);
                rc = TS_PARSE;
                goto out_free;
            }
            t->byte_id[b] = id;
        }
    }
    if (conf.sp) {
        t->sp_words = true;
        for (size_t id = 0; id < t->n_ids && t->sp_words; id++) {
            const char *v = t->blob + t->tok[id].off;
            size_t l = t->tok[id].len, i = 0;
            if (l == NO_ID)
                continue;
            while (is_sp_space(v, l, i))
                i += 3;
            if (i < l && memmem(v + i, l - i, SP_SPACE, 3) != NULL)
                t->sp_words = false;
        }
    }
    const char *unk = jstr(model, "unk_token");
    if (unk != NULL && hf_id(vocab, unk, strlen(unk), &t->unk_id) < 0) {
        ts_errf(err, errlen, "model.unk_token \"%.40s\" is not in the vocab", unk);
        rc = TS_PARSE;
        goto out_free;
    }
    if ((rc = hf_merges(t, vocab, merges, err, errlen)) < 0)
        goto out_free;
    if (conf.pattern != NULL &&
        (rc = compile_regex(t, conf.pattern, conf.pattern_len, err, errlen)) < 0)
        goto out_free;
    *out = t;
    return 0;
out_free:
    if (rc == -ENOMEM)
        ts_errf(err, errlen, "tokenizer.json: out of memory");
    tokenizer_free(t);
    return rc;
}

int tokenizer_load_hf_json(const char *data, size_t len, struct tokenizer **out, char *err,
                           size_t errlen)
{
    if (len > TOKENIZER_MAX_FILE) {
        ts_errf(err, errlen, "tokenizer.json: %zu bytes (limit %u)", len, TOKENIZER_MAX_FILE);
        return TS_TOOBIG;
    }
    json_error_t jerr;
    json_t *root = json_loadb(data, len, JSON_ALLOW_NUL, &jerr);
    if (root == NULL) {
        ts_errf(err, errlen, "tokenizer.json line %d column %d: %s", jerr.line, jerr.column,
                jerr.text);
        return TS_PARSE;
    }
    int rc;
    if (!json_is_object(root)) {
        ts_errf(err, errlen, "tokenizer.json: top level is %s, not an object",
                json_type_name(root));
        rc = TS_PARSE;
    } else {
        rc = hf_build(root, out, err, errlen);
    }
    json_decref(root);
    return rc;
}

int tokenizer_load_file(const char *path, enum tokenizer_kind kind, struct tokenizer **out,
                        char *err, size_t errlen)
{
    char *data;
    size_t len;
    int rc = file_read_all(path, TOKENIZER_MAX_FILE, &data, &len, err, errlen);
    if (rc < 0)
        return rc;
    if (kind == TOKENIZER_AUTO) {
        size_t i = 0;
        while (i < len && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t'))
            i++;
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        if (i < len && data[i] == '{')
            kind = TOKENIZER_HF_JSON;
        else if (strstr(base, "o200k") != NULL)
            kind = TOKENIZER_O200K;
        else if (strstr(base, "cl100k") != NULL)
            kind = TOKENIZER_CL100K;
        else {
            ts_errf(err, errlen,
                    "%s: not JSON, and the name says neither cl100k nor o200k (give the kind)",
                    path);
            ts_free(data);
            return -EINVAL;
        }
    }
    char e2[256] = "";
    if (kind == TOKENIZER_HF_JSON)
        rc = tokenizer_load_hf_json(data, len, out, e2, sizeof(e2));
    else
        rc = tokenizer_load_tiktoken(data, len, kind, out, e2, sizeof(e2));
    if (rc < 0)
        ts_errf(err, errlen, "%s: %s", path, e2);
    ts_free(data);
    return rc;
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
