/*
 * tokenizer_load.c - loading tokenizers: Hugging Face tokenizer.json (byte-level
 * and SentencePiece BPE) and tiktoken rank files, into the tables of
 * tokenizer_int.h.
 */
#include "llm/tokenizer.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "base/file.h"
#include "llm/tokenizer_int.h"

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

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

/* ---- tables ------------------------------------------------------------ */

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
    uint64_t key = pair_key(a, b);
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

struct tiktoken_special {
    const char *s;
    uint32_t id;
};

static const struct tiktoken_special cl100k_specials[] = {{"<|endoftext|>", 100257},
                                                          {"<|fim_prefix|>", 100258},
                                                          {"<|fim_middle|>", 100259},
                                                          {"<|fim_suffix|>", 100260},
                                                          {"<|endofprompt|>", 100276}};
static const struct tiktoken_special o200k_specials[] = {{"<|endoftext|>", 199999},
                                                         {"<|endofprompt|>", 200018}};

/* First pass over a rank file: checks the shape and the rank of every line and
   raises *max_id to the largest rank, so the id table is allocated once. */
static int tiktoken_scan(const char *data, size_t len, size_t *max_id, char *err, size_t errlen)
{
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
            if (r > *max_id)
                *max_id = r;
        }
        p = le + 1;
    }
    return 0;
}

/* Second pass (every line is known well formed): the bytes of each rank's token. */
static int tiktoken_read_ranks(struct tokenizer *t, const char *data, size_t len, char *err,
                               size_t errlen)
{
    char tokbuf[TOKENIZER_MAX_TOKEN_LEN / 4 * 3 + 4];
    size_t lines = 0;
    int rc;
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
                return n == TS_TOOBIG ? TS_TOOBIG : TS_PARSE;
            }
            if (t->tok[r].len != NO_ID) {
                ts_errf(err, errlen, "tiktoken line %zu: rank %lu given twice", lines, r);
                return TS_PARSE;
            }
            if ((rc = tok_set(t, (uint32_t)r, tokbuf, (size_t)n)) < 0)
                return rc;
        }
        p = le + 1;
    }
    return 0;
}

/* The encoding's special tokens (fixed by its kind, not in the file); each is
   also a token when the file gives its id no bytes. */
static int tiktoken_add_specials(struct tokenizer *t, enum tokenizer_kind kind)
{
    bool cl100k = kind == TOKENIZER_CL100K;
    const struct tiktoken_special *sp = cl100k ? cl100k_specials : o200k_specials;
    size_t nsp = cl100k ? sizeof(cl100k_specials) / sizeof(cl100k_specials[0])
                        : sizeof(o200k_specials) / sizeof(o200k_specials[0]);
    size_t spcap = 0;
    int rc;
    for (size_t i = 0; i < nsp; i++) {
        size_t n = strlen(sp[i].s);
        if ((rc = special_add(t, &spcap, sp[i].id, sp[i].s, n)) < 0)
            return rc;
        if (t->tok[sp[i].id].len == NO_ID && (rc = tok_set(t, sp[i].id, sp[i].s, n)) < 0)
            return rc;
    }
    return 0;
}

/* tiktoken starts a piece from its bytes: every single byte must be a token. */
static int tiktoken_byte_ids(struct tokenizer *t, char *err, size_t errlen)
{
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        long id = bmap_find(t, &c, 1);
        if (id < 0) {
            ts_errf(err, errlen, "tiktoken: no token for the single byte 0x%02x", b);
            return TS_PARSE;
        }
        t->byte_id[b] = (uint32_t)id;
    }
    return 0;
}

/* tiktoken has no merge list: every split of a token into two tokens is a pair
   that merges into it, at the token's rank. */
static int tiktoken_derive_pairs(struct tokenizer *t)
{
    size_t npairs = 0;
    for (size_t id = 0; id < t->n_ids; id++)
        if (t->tok[id].len != NO_ID && t->tok[id].len > 1)
            npairs += t->tok[id].len - 1;
    int rc = pairs_alloc(t, npairs);
    if (rc < 0)
        return rc;
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
    return 0;
}

/* Checks the file in a first pass, then fills the tables in the order each
   step needs them: tokens, specials, the bytes-to-id hash, byte ids, pairs. */
int tokenizer_load_tiktoken(const char *data, size_t len, enum tokenizer_kind kind,
                            struct tokenizer **out, char *err, size_t errlen)
{
    const char *pattern = kind == TOKENIZER_CL100K ? CL100K_PATTERN : O200K_PATTERN;
    size_t max_id = kind == TOKENIZER_CL100K ? 100276 : 200018; /* the specials' ids */
    struct tokenizer *t;
    int rc;
    if (kind != TOKENIZER_CL100K && kind != TOKENIZER_O200K) {
        ts_errf(err, errlen, "tiktoken: unknown encoding (cl100k_base or o200k_base)");
        return -EINVAL;
    }
    if (len > TOKENIZER_MAX_FILE) {
        ts_errf(err, errlen, "tiktoken: %zu bytes (limit %u)", len, TOKENIZER_MAX_FILE);
        return TS_TOOBIG;
    }
    if ((rc = tiktoken_scan(data, len, &max_id, err, errlen)) < 0)
        return rc;
    t = tokenizer_alloc(max_id + 1);
    if (t == NULL)
        return -ENOMEM;
    t->mode = MODE_TIKTOKEN;
    t->direct_lookup = true;
    if ((rc = tiktoken_read_ranks(t, data, len, err, errlen)) < 0 ||
        (rc = tiktoken_add_specials(t, kind)) < 0)
        goto out_free;
    specials_index(t);
    if ((rc = bmap_build(t)) < 0 || (rc = tiktoken_byte_ids(t, err, errlen)) < 0 ||
        (rc = tiktoken_derive_pairs(t)) < 0 ||
        (rc = compile_regex(t, pattern, strlen(pattern), err, errlen)) < 0)
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

/* The parts of a tokenizer.json the build reads, borrowed from its root. */
struct hf_parts {
    const json_t *model;
    const json_t *vocab;
    const json_t *merges;
    const json_t *added; /* NULL, null or an array */
};

/* Finds the model's parts and refuses what is not a plain BPE model: another
   type, word affixes, no vocab or merges, added_tokens that is not a list. */
static int hf_parts_get(const json_t *root, struct hf_parts *hp, char *err, size_t errlen)
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
    hp->model = model;
    hp->vocab = json_object_get(model, "vocab");
    hp->merges = json_object_get(model, "merges");
    if (!json_is_object(hp->vocab) || !json_is_array(hp->merges)) {
        ts_errf(err, errlen, "model.vocab (object) and model.merges (array) are required");
        return TS_PARSE;
    }
    hp->added = json_object_get(root, "added_tokens");
    if (hp->added != NULL && !json_is_array(hp->added) && !json_is_null(hp->added)) {
        ts_errf(err, errlen, "added_tokens: %s, not an array", json_type_name(hp->added));
        return TS_PARSE;
    }
    return 0;
}

/* Reads the normalizer and pre-tokenizer into conf; exactly one of byte-level
   and SentencePiece-style must come out of them. */
static int hf_conf_read(const json_t *root, struct hf_conf *conf, char *err, size_t errlen)
{
    const json_t *nz = json_object_get(root, "normalizer");
    const json_t *pt = json_object_get(root, "pre_tokenizer");
    int rc;
    if (nz != NULL && !json_is_null(nz) &&
        (rc = hf_normalizer(nz, conf, "normalizer", err, errlen)) < 0)
        return rc;
    if (pt != NULL && !json_is_null(pt) &&
        (rc = hf_pretok(pt, conf, "pre_tokenizer", err, errlen)) < 0)
        return rc;
    if (conf->sp && conf->byte_level) {
        ts_errf(err, errlen, "tokenizer mixes byte-level and SentencePiece (\\u2581) parts");
        return TS_PARSE;
    }
    if (!conf->sp && !conf->byte_level) {
        ts_errf(err, errlen,
                "pre_tokenizer: neither byte-level nor SentencePiece-style; not supported");
        return TS_PARSE;
    }
    return 0;
}

/* The largest id of the vocab and the added tokens, checking each id's range
   (and that each added token has content) before anything is allocated. */
static int hf_max_id(const struct hf_parts *hp, size_t *max_id, char *err, size_t errlen)
{
    const char *key;
    const json_t *val;
    *max_id = 0;
    json_object_foreach((json_t *)hp->vocab, key, val)
    {
        json_int_t v = json_integer_value(val);
        if (!json_is_integer(val) || v < 0 || v >= TOKENIZER_MAX_VOCAB) {
            ts_errf(err, errlen, "model.vocab[\"%.40s\"]: id must be an integer in [0, %u)", key,
                    TOKENIZER_MAX_VOCAB);
            return json_is_integer(val) && v >= 0 ? TS_TOOBIG : TS_PARSE;
        }
        if ((size_t)v > *max_id)
            *max_id = (size_t)v;
    }
    for (size_t i = 0; i < json_array_size(hp->added); i++) {
        const json_t *a = json_array_get(hp->added, i);
        const json_t *idj = json_object_get(a, "id");
        json_int_t v = json_integer_value(idj);
        if (!json_is_integer(idj) || v < 0 || v >= TOKENIZER_MAX_VOCAB ||
            !json_is_string(json_object_get(a, "content"))) {
            ts_errf(err, errlen, "added_tokens[%zu]: needs \"id\" in [0, %u) and \"content\"", i,
                    TOKENIZER_MAX_VOCAB);
            return TS_PARSE;
        }
        if ((size_t)v > *max_id)
            *max_id = (size_t)v;
    }
    return 0;
}

/* The vocab's tokens by id: byte-level ones are stored as the bytes they
   spell (GPT-2's byte-to-unicode mapping undone), the others as their UTF-8. */
static int hf_vocab_read(struct tokenizer *t, const json_t *vocab, bool byte_level, char *err,
                         size_t errlen)
{
    int16_t u2b[324];
    const char *key;
    const json_t *val;
    int rc;
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
            return TS_TOOBIG;
        }
        if (t->tok[id].len != NO_ID) {
            ts_errf(err, errlen, "model.vocab[\"%.40s\"]: id %u used twice", key, id);
            return TS_PARSE;
        }
        if (byte_level && byte_level_unmap(u2b, key, kn, bytes, &bn))
            rc = tok_set(t, id, bytes, bn);
        else
            rc = tok_set(t, id, key, kn);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Added tokens are tokens (an added id may replace a vocab one) and specials. */
static int hf_added_read(struct tokenizer *t, const json_t *added, char *err, size_t errlen)
{
    size_t spcap = 0;
    int rc;
    for (size_t i = 0; i < json_array_size(added); i++) {
        const json_t *a = json_array_get(added, i);
        uint32_t id = (uint32_t)json_integer_value(json_object_get(a, "id"));
        const json_t *c = json_object_get(a, "content");
        if (json_string_length(c) > TOKENIZER_MAX_TOKEN_LEN) {
            ts_errf(err, errlen, "added_tokens[%zu]: content over %d bytes", i,
                    TOKENIZER_MAX_TOKEN_LEN);
            return TS_TOOBIG;
        }
        if ((rc = tok_set(t, id, json_string_value(c), json_string_length(c))) < 0 ||
            (rc = special_add(t, &spcap, id, json_string_value(c), json_string_length(c))) < 0)
            return rc;
    }
    return 0;
}

/* The initial id of every byte: its byte-level token, or with byte_fallback
   its <0xNN> token (SentencePiece without byte_fallback has none). */
static int hf_byte_ids(struct tokenizer *t, const json_t *vocab, bool byte_level, char *err,
                       size_t errlen)
{
    if (byte_level) {
        for (int b = 0; b < 256; b++) {
            char s[2];
            uint32_t id;
            if (hf_id(vocab, s, utf8_put(b2u_cp(b), s), &id) < 0) {
                ts_errf(err, errlen, "model.vocab: no byte-level token for byte 0x%02x", b);
                return TS_PARSE;
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
                return TS_PARSE;
            }
            t->byte_id[b] = id;
        }
    }
    return 0;
}

/* True when no token has a "▁" after another character, so SentencePiece
   text can be cut before each "▁" run (see encode_sp_words). */
static bool hf_sp_words(const struct tokenizer *t)
{
    for (size_t id = 0; id < t->n_ids; id++) {
        const char *v = t->blob + t->tok[id].off;
        size_t l = t->tok[id].len, i = 0;
        if (l == NO_ID)
            continue;
        while (is_sp_space(v, l, i))
            i += 3;
        if (i < l && memmem(v + i, l - i, SP_SPACE, 3) != NULL)
            return false;
    }
    return true;
}

/* Checks the model as a whole, then fills the tables in the order each step
   needs them: tokens, specials, the bytes-to-id hash, byte ids, merges, regex. */
static int hf_build(const json_t *root, struct tokenizer **out, char *err, size_t errlen)
{
    struct hf_parts hp;
    struct hf_conf conf = {0};
    size_t max_id;
    struct tokenizer *t;
    const char *unk;
    int rc;
    if ((rc = hf_parts_get(root, &hp, err, errlen)) < 0 ||
        (rc = hf_conf_read(root, &conf, err, errlen)) < 0 ||
        (rc = hf_max_id(&hp, &max_id, err, errlen)) < 0)
        return rc;
    t = tokenizer_alloc(max_id + 1);
    if (t == NULL)
        return -ENOMEM;
    t->mode = conf.sp ? MODE_SP : MODE_BYTE_LEVEL;
    t->direct_lookup = json_is_true(json_object_get(hp.model, "ignore_merges"));
    t->byte_fallback = json_is_true(json_object_get(hp.model, "byte_fallback"));
    t->fuse_unk = json_is_true(json_object_get(hp.model, "fuse_unk"));
    t->add_prefix_space = conf.add_prefix_space;
    t->sp_prepend = conf.sp_prepend;
    if ((rc = hf_vocab_read(t, hp.vocab, conf.byte_level, err, errlen)) < 0 ||
        (rc = hf_added_read(t, hp.added, err, errlen)) < 0)
        goto out_free;
    specials_index(t);
    if ((rc = bmap_build(t)) < 0 ||
        (rc = hf_byte_ids(t, hp.vocab, conf.byte_level, err, errlen)) < 0)
        goto out_free;
    t->sp_words = conf.sp && hf_sp_words(t);
    unk = jstr(hp.model, "unk_token");
    if (unk != NULL && hf_id(hp.vocab, unk, strlen(unk), &t->unk_id) < 0) {
        ts_errf(err, errlen, "model.unk_token \"%.40s\" is not in the vocab", unk);
        rc = TS_PARSE;
        goto out_free;
    }
    if ((rc = hf_merges(t, hp.vocab, hp.merges, err, errlen)) < 0)
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
