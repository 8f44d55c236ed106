/*
 * llm_faults.c - the LLM-semantic faults: hallucinated entities and numbers
 * in answer text, broken JSON answers, the premature "length" finish chunk,
 * and noise or masks on embedding vectors.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "base/chars.h"
#include "base/alloc.h"
#include "base/base64.h"
#include "base/dist.h"
#include "chaos/tap_int.h"

/* Plausible but (almost surely) wrong replacements. */
static const char *const hallu_names[] = {
    "Paris",   "London",  "Einstein", "Tokyo",   "Microsoft", "Berlin",  "Newton",  "Amazon",
    "Madrid",  "Darwin",  "Oracle",   "Sydney",  "Curie",     "Toyota",  "Vienna",  "Tesla",
    "Chicago", "Lincoln", "Nairobi",  "Siemens", "Kepler",    "Toronto", "Samsung", "Geneva",
    "Mozart",  "Boston",  "Nokia",    "Lisbon",  "Galileo",   "Cairo",   "Intel",   "Oslo",
};
static const char *const hallu_acronyms[] = {
    "NATO", "IBM", "UNESCO", "FIFA", "CERN", "OPEC", "NASA", "WHO", "IMF", "MIT", "BBC", "EU",
};

#define N_NAMES    (sizeof(hallu_names) / sizeof(hallu_names[0]))
#define N_ACRONYMS (sizeof(hallu_acronyms) / sizeof(hallu_acronyms[0]))

static bool is_alpha(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static bool is_upper(unsigned char c)
{
    return c >= 'A' && c <= 'Z';
}

void llm_hallu_init(struct llm_hallu *h, uint64_t seed, double rate)
{
    memset(h, 0, sizeof(*h));
    h->seed = seed;
    h->rate = rate;
    h->sentence_start = true;
    h->hold = true;
}

/* A hash of (seed, candidate index, salt): decisions depend on nothing else. */
static uint64_t hallu_hash(const struct llm_hallu *h, uint64_t salt)
{
    return rng_mix64(h->seed ^ rng_mix64(h->candidates * 0x9e3779b97f4a7c15ULL + salt));
}

static bool hallu_roll(const struct llm_hallu *h)
{
    double u = (double)(hallu_hash(h, 1) >> 11) * 0x1.0p-53;
    return u < h->rate;
}

static bool all_upper(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!is_upper((unsigned char)s[i]))
            return false;
    return true;
}

static int hallu_word(const struct llm_hallu *h, const char *w, size_t n, struct buf *out)
{
    bool acr = all_upper(w, n);
    const char *const *list = acr ? hallu_acronyms : hallu_names;
    size_t len = acr ? N_ACRONYMS : N_NAMES;
    size_t k = (size_t)(hallu_hash(h, 2) % len);
    for (size_t tries = 0; tries < len; tries++, k = (k + 1) % len) {
        const char *r = list[k];
        if (strlen(r) != n || memcmp(r, w, n) != 0)
            return buf_append_str(out, r);
    }
    return buf_append(out, w, n); /* unreachable: the lists have distinct entries */
}

/* A plain run of digits (no leading zero unless it is "0", at most 15
 * digits): its value in *v. */
static bool plain_number(const char *d, size_t n, uint64_t *v)
{
    if (n == 0 || n > 15 || (d[0] == '0' && n > 1))
        return false;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (!chars_is_digit((unsigned char)d[i]))
            return false;
        x = x * 10 + (uint64_t)(d[i] - '0');
    }
    *v = x;
    return true;
}

/* A number of similar size: a year (1000..2099) becomes another year 1..40
 * years away, a single digit another digit, any other plain number that
 * number times 0.5..1.5 (never itself). */
static uint64_t hallu_value(uint64_t v, uint64_t x)
{
    if (v >= 1000 && v <= 2099) {
        uint64_t off = 1 + x % 40;
        bool up = (x >> 8) & 1;
        if (up && v + off > 2099)
            up = false;
        if (!up && v - off < 1000)
            up = true;
        return up ? v + off : v - off;
    }
    if (v < 10)
        return v == 0 ? 1 + x % 9 : (v + x % 8) % 9 + 1;
    double f = 0.5 + (double)(x >> 11) * 0x1.0p-53;
    uint64_t r = (uint64_t)llround((double)v * f);
    return r == v ? v + 1 : r;
}

static int hallu_number(const struct llm_hallu *h, const char *d, size_t n, struct buf *out)
{
    uint64_t x = hallu_hash(h, 3);
    uint64_t v;
    if (plain_number(d, n, &v))
        return buf_appendf(out, "%" PRIu64, hallu_value(v, x));
    /* separators ("2,100,000", "3.14") or leading zeros ("007"): the same
     * shape and first digit, the other digits changed */
    size_t start = out->len;
    for (size_t i = 0; i < n; i++) {
        if (i % 16 == 15)
            x = rng_mix64(x + i);
        char c = d[i];
        if (i > 0 && chars_is_digit((unsigned char)c)) {
            c = (char)('0' + x % 10);
            x /= 10;
        }
        int rc = buf_append_char(out, c);
        if (rc < 0)
            return rc;
    }
    if (memcmp(out->data + start, d, n) == 0) {
        char *last = &out->data[out->len - 1];
        *last = (char)('0' + (*last - '0' + 1) % 10);
    }
    return 0;
}

/* The end of the number that starts at s[i] (a digit): digits, and groups
 * of digits after one '.' or ','. */
static size_t number_end(const unsigned char *u, size_t i, size_t n)
{
    while (i < n) {
        if (chars_is_digit(u[i]))
            i++;
        else if ((u[i] == '.' || u[i] == ',') && i + 1 < n && chars_is_digit(u[i + 1]))
            i += 2;
        else
            break;
    }
    return i;
}

/* Whether the run s[i..j) that reaches the end of a piece must wait for the
 * next piece: it may go on there (a number, or a capitalised word that is
 * a candidate so far), and it fits the hold buffer. */
static bool hallu_holds(const struct llm_hallu *h, const unsigned char *u, size_t i, size_t n,
                        bool digits)
{
    if (!h->hold || n - i >= LLM_HALLU_HOLD_MAX)
        return false;
    if (digits)
        return true;
    return is_upper(u[i]) && !h->sentence_start && !(i > 0 && u[i - 1] >= 0x80);
}

/* One letter or digit run at s[i..j): a candidate is replaced (or not) as a
 * whole. */
static int hallu_run(struct llm_hallu *h, const char *s, size_t i, size_t j, size_t n, bool digits,
                     struct buf *out)
{
    const unsigned char *u = (const unsigned char *)s;
    bool cont = i == 0 && (digits ? h->prev_digit || h->prev_word : h->prev_word);
    /* glued to non-ASCII, or letters to digits ("GPT4", "5G", "x86"): part
     * of a longer word */
    bool glued = (i > 0 && (u[i - 1] >= 0x80 || is_alpha(u[i - 1]) || chars_is_digit(u[i - 1]))) ||
                 (j < n && (u[j] >= 0x80 || is_alpha(u[j]) || chars_is_digit(u[j])));
    bool cand;
    if (digits)
        cand = !cont && !glued;
    else
        cand = !cont && !glued && j - i >= 2 && is_upper(u[i]) && !h->sentence_start;
    if (!cand)
        return buf_append(out, s + i, j - i);
    int rc;
    if (hallu_roll(h)) {
        rc = digits ? hallu_number(h, s + i, j - i, out) : hallu_word(h, s + i, j - i, out);
        h->replaced++;
    } else {
        rc = buf_append(out, s + i, j - i);
    }
    h->candidates++;
    return rc;
}

/* llm_hallu_text on s alone (no held text in front). */
static int hallu_piece(struct llm_hallu *h, const char *s, size_t n, struct buf *out)
{
    const unsigned char *u = (const unsigned char *)s;
    bool after_stop = false;
    size_t i = 0;
    int rc = 0;
    while (i < n && rc == 0) {
        unsigned char c = u[i];
        if (is_alpha(c) || chars_is_digit(c)) {
            bool digits = chars_is_digit(c);
            size_t j = i;
            if (digits)
                j = number_end(u, i, n);
            else
                while (j < n && is_alpha(u[j]))
                    j++;
            /* "1600." or "2," at the very end may go on in the next piece */
            size_t k = digits && j + 1 == n && (u[j] == '.' || u[j] == ',') ? n : j;
            if (k == n && hallu_holds(h, u, i, n, digits)) {
                memcpy(h->held, s + i, n - i);
                h->held_len = n - i;
                n = i; /* the state below describes the text before the hold */
                break;
            }
            rc = hallu_run(h, s, i, j, n, digits, out);
            h->sentence_start = false;
            after_stop = false;
            i = j;
            continue;
        }
        if (c == '.' || c == '!' || c == '?') {
            after_stop = true;
        } else if (c == '\n') {
            h->sentence_start = true;
        } else if (chars_is_json_space(c)) {
            if (after_stop)
                h->sentence_start = true;
            after_stop = false;
        } else if (c != '"' && c != '\'' && c != ')' && c != '*') {
            after_stop = false;
        }
        rc = buf_append_char(out, (char)c);
        i++;
    }
    if (rc < 0)
        return rc;
    /* a stop at the very end of a piece: the next piece starts a sentence if
     * it starts with a blank, and usually it does */
    if (after_stop)
        h->sentence_start = true;
    if (n > 0) {
        h->prev_word = is_alpha(u[n - 1]) || u[n - 1] >= 0x80;
        h->prev_digit = chars_is_digit(u[n - 1]);
    }
    return 0;
}

int llm_hallu_text(struct llm_hallu *h, const char *s, size_t n, struct buf *out)
{
    if (h->held_len == 0)
        return hallu_piece(h, s, n, out);
    /* the held run goes in front of the new piece, and the two are read as one */
    char *joined = ts_malloc(h->held_len + n + 1);
    if (!joined)
        return -ENOMEM;
    memcpy(joined, h->held, h->held_len);
    memcpy(joined + h->held_len, s, n);
    size_t len = h->held_len + n;
    h->held_len = 0;
    int rc = hallu_piece(h, joined, len, out);
    ts_free(joined);
    return rc;
}

int llm_hallu_flush(struct llm_hallu *h, struct buf *out)
{
    if (h->held_len == 0)
        return 0;
    bool hold = h->hold;
    h->hold = false;
    int rc = llm_hallu_text(h, "", 0, out);
    h->hold = hold;
    return rc;
}

/* The "index" of choice i of a chunk (i if absent). */
static json_int_t choice_index(const json_t *chunk, size_t i)
{
    const json_t *ix =
        json_object_get(json_array_get(json_object_get(chunk, "choices"), i), "index");
    return json_is_integer(ix) ? json_integer_value(ix) : (json_int_t)i;
}

bool llm_hallu_owes(const struct llm_hallu *h, json_t *chunk)
{
    if (h->held_len == 0)
        return false;
    if (json_array_size(json_object_get(chunk, "choices")) != 1)
        return true;
    return !tap_chunk_text(chunk, 0) || choice_index(chunk, 0) != h->held_index;
}

int llm_hallu_chunk(struct llm_hallu *h, json_t *chunk, struct buf *scratch, bool last)
{
    int changed = 0;
    size_t nch = json_array_size(json_object_get(chunk, "choices"));
    bool hold = h->hold;
    h->hold = hold && !last && nch == 1;
    int rc = 0;
    for (size_t i = 0; i < nch && rc >= 0; i++) {
        json_t *t = tap_chunk_text(chunk, i);
        if (!t || (json_string_length(t) == 0 && h->held_len == 0))
            continue;
        buf_reset(scratch);
        rc = llm_hallu_text(h, json_string_value(t), json_string_length(t), scratch);
        if (rc == 0 && last)
            rc = llm_hallu_flush(h, scratch);
        if (rc < 0)
            break;
        if (h->held_len > 0)
            h->held_index = choice_index(chunk, i);
        if (scratch->len == json_string_length(t) &&
            memcmp(scratch->data, json_string_value(t), scratch->len) == 0)
            continue;
        if (json_string_setn(t, scratch->data, scratch->len) != 0)
            rc = -ENOMEM;
        else
            changed++;
    }
    h->hold = hold;
    return rc < 0 ? rc : changed;
}

json_t *llm_text_chunk(const json_t *tmpl, json_int_t index, const char *s, size_t n)
{
    json_t *c = json_deep_copy(tmpl);
    if (!c)
        return NULL;
    json_t *first = json_array_get(json_object_get(c, "choices"), 0);
    bool chat = !json_object_get(first, "text");
    json_t *text = json_stringn(s, n);
    json_t *choice = !text  ? NULL
                     : chat ? json_pack("{s:I,s:{s:o},s:n,s:n}", "index", index, "delta", "content",
                                        text, "logprobs", "finish_reason")
                            : json_pack("{s:I,s:o,s:n,s:n}", "index", index, "text", text,
                                        "logprobs", "finish_reason");
    json_t *arr = choice ? json_array() : NULL;
    if (!arr)
        json_decref(choice);
    /* the _new calls take their value, also when they fail */
    if (!arr || json_array_append_new(arr, choice) != 0 ||
        json_object_set_new(c, "choices", arr) != 0) {
        json_decref(c);
        return NULL;
    }
    json_object_del(c, "usage");
    return c;
}

bool llm_has_closer(const char *s, size_t n)
{
    return memchr(s, '}', n) || memchr(s, ']', n);
}

int llm_drop_last_closer(const char *s, size_t n, struct buf *out)
{
    size_t i = n;
    while (i > 0 && s[i - 1] != '}' && s[i - 1] != ']')
        i--;
    if (i == 0)
        return TS_AGAIN;
    int rc = buf_append(out, s, i - 1);
    if (rc == 0)
        rc = buf_append(out, s + i, n - i);
    return rc;
}

json_t *llm_length_chunk(const json_t *tmpl)
{
    json_t *c = json_deep_copy(tmpl);
    if (!c)
        return NULL;
    json_t *first = json_array_get(json_object_get(c, "choices"), 0);
    json_int_t index = json_integer_value(json_object_get(first, "index"));
    bool chat = !json_object_get(first, "text");
    const json_t *obj = json_object_get(c, "object");
    if (json_is_string(obj))
        chat = strcmp(json_string_value(obj), "text_completion") != 0;
    json_t *choice = chat ? json_pack("{s:I,s:{},s:n,s:s}", "index", index, "delta", "logprobs",
                                      "finish_reason", "length")
                          : json_pack("{s:I,s:s,s:n,s:s}", "index", index, "text", "", "logprobs",
                                      "finish_reason", "length");
    json_t *arr = json_array();
    if (!choice || !arr || json_array_append_new(arr, choice) != 0) {
        if (!arr)
            json_decref(choice);
        json_decref(arr);
        json_decref(c);
        return NULL;
    }
    if (json_object_set_new(c, "choices", arr) != 0) {
        json_decref(c);
        return NULL;
    }
    json_object_del(c, "usage");
    return c;
}

/* ---- embeddings ---- */

static void float_to_le(float f, unsigned char *b)
{
    uint32_t v;
    memcpy(&v, &f, sizeof(v));
    b[0] = (unsigned char)v;
    b[1] = (unsigned char)(v >> 8);
    b[2] = (unsigned char)(v >> 16);
    b[3] = (unsigned char)(v >> 24);
}

static float float_from_le(const unsigned char *b)
{
    uint32_t v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    float f;
    memcpy(&f, &v, sizeof(f));
    return f;
}

/* Noise then mask on v[0..d), in doubles. */
static int perturb_vector(double *v, size_t d, double norm, double mask_rate, struct rng *r)
{
    if (norm > 0 && d > 0) {
        double *g = ts_malloc(d * sizeof(*g));
        if (!g)
            return -ENOMEM;
        double vn = 0, gn = 0;
        for (size_t i = 0; i < d; i++) {
            g[i] = dist_normal01(r);
            vn += v[i] * v[i];
            gn += g[i] * g[i];
        }
        if (gn > 0) {
            double scale = norm * sqrt(vn) / sqrt(gn);
            for (size_t i = 0; i < d; i++)
                v[i] += g[i] * scale;
        }
        ts_free(g);
    }
    if (mask_rate > 0 && d > 0) {
        size_t m = (size_t)llround(mask_rate * (double)d);
        if (m > d)
            m = d;
        size_t *idx = ts_malloc(d * sizeof(*idx));
        if (!idx)
            return -ENOMEM;
        for (size_t i = 0; i < d; i++)
            idx[i] = i;
        for (size_t i = 0; i < m; i++) {
            size_t j = i + (size_t)rng_range(r, 0, d - 1 - i);
            size_t t = idx[i];
            idx[i] = idx[j];
            idx[j] = t;
            v[idx[i]] = 0;
        }
        ts_free(idx);
    }
    return 0;
}

static int perturb_array(json_t *e, double norm, double mask_rate, struct rng *r)
{
    size_t d = json_array_size(e);
    for (size_t i = 0; i < d; i++)
        if (!json_is_number(json_array_get(e, i)))
            return 0;
    double *v = ts_malloc((d ? d : 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < d; i++)
        v[i] = json_number_value(json_array_get(e, i));
    int rc = perturb_vector(v, d, norm, mask_rate, r);
    for (size_t i = 0; i < d && rc == 0; i++)
        if (json_array_set_new(e, i, json_real((double)(float)v[i])) != 0)
            rc = -ENOMEM;
    ts_free(v);
    return rc < 0 ? rc : 1;
}

static int perturb_base64(json_t *e, double norm, double mask_rate, struct rng *r)
{
    size_t n = json_string_length(e);
    unsigned char *raw = ts_malloc(n / 4 * 3 + 3);
    if (!raw)
        return -ENOMEM;
    int rc = 0;
    double *v = NULL;
    char *txt = NULL;
    long got = base64_decode(json_string_value(e), n, raw, 0);
    if (got <= 0 || got % 4 != 0)
        goto out_free_raw; /* not a float32 vector: left alone */
    size_t d = (size_t)got / 4;
    v = ts_malloc(d * sizeof(*v));
    txt = ts_malloc(base64_len((size_t)got) + 1);
    if (!v || !txt) {
        rc = -ENOMEM;
        goto out_free_raw;
    }
    for (size_t i = 0; i < d; i++)
        v[i] = float_from_le(raw + 4 * i);
    rc = perturb_vector(v, d, norm, mask_rate, r);
    if (rc < 0)
        goto out_free_raw;
    for (size_t i = 0; i < d; i++)
        float_to_le((float)v[i], raw + 4 * i);
    size_t tn = base64_encode(raw, (size_t)got, txt);
    rc = json_string_setn(e, txt, tn) == 0 ? 1 : -ENOMEM;
out_free_raw:
    ts_free(txt);
    ts_free(v);
    ts_free(raw);
    return rc;
}

int llm_embeddings_perturb(json_t *root, double norm, double mask_rate, struct rng *r)
{
    int changed = 0;
    size_t i;
    json_t *item;
    json_array_foreach(json_object_get(root, "data"), i, item)
    {
        json_t *e = json_object_get(item, "embedding");
        int rc = 0;
        if (json_is_array(e))
            rc = perturb_array(e, norm, mask_rate, r);
        else if (json_is_string(e))
            rc = perturb_base64(e, norm, mask_rate, r);
        if (rc < 0)
            return rc;
        changed += rc;
    }
    return changed;
}
