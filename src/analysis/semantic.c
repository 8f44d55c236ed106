#include "analysis/semantic.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "base/alloc.h"
#include "llm/embed.h"

/* Cosines are dot products of float vectors normalised to about 1e-7, so
 * "at least the threshold" allows that much rounding (an identical text
 * joins even at threshold 1). */
#define SIM_SLACK 1e-6

struct semantic {
    struct semantic_cfg cfg;
    float *leaders;   /* cap vectors of dims floats */
    uint64_t *counts; /* prompts per cluster */
    bool *zero;       /* the leader's vector is zero (an empty text) */
    uint32_t n, cap;  /* clusters */
    uint64_t samples, ignored;
    float *vec; /* the vector of the prompt being added */
    char *text; /* the cut text (max_text + 1 bytes) */
};

int semantic_new(const struct semantic_cfg *cfg, struct semantic **out)
{
    struct semantic_cfg c = cfg ? *cfg : (struct semantic_cfg){0};
    *out = NULL;
    if (c.dims == 0)
        c.dims = SEMANTIC_DEFAULT_DIMS;
    if (c.threshold == 0)
        c.threshold = SEMANTIC_DEFAULT_THRESHOLD;
    if (c.max_clusters == 0)
        c.max_clusters = SEMANTIC_DEFAULT_MAX_CLUSTERS;
    if (c.max_samples == 0)
        c.max_samples = SEMANTIC_DEFAULT_MAX_SAMPLES;
    if (c.max_text == 0)
        c.max_text = SEMANTIC_DEFAULT_MAX_TEXT;
    if (c.dims > EMBED_MAX_DIMS || !(c.threshold > 0 && c.threshold <= 1) ||
        c.max_clusters > SEMANTIC_MAX_CLUSTERS || c.max_samples > SEMANTIC_MAX_SAMPLES ||
        c.max_text < 2 || c.max_text > SEMANTIC_MAX_TEXT)
        return -EINVAL;
    struct semantic *s = ts_calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->cfg = c;
    s->vec = ts_malloc(c.dims * sizeof(float));
    s->text = ts_malloc(c.max_text + 1);
    if (!s->vec || !s->text) {
        semantic_free(s);
        return -ENOMEM;
    }
    *out = s;
    return 0;
}

void semantic_free(struct semantic *s)
{
    if (!s)
        return;
    ts_free(s->leaders);
    ts_free(s->counts);
    ts_free(s->zero);
    ts_free(s->vec);
    ts_free(s->text);
    ts_free(s);
}

static bool is_cont(char ch)
{
    return ((unsigned char)ch & 0xc0) == 0x80;
}

/* The text to embed: all of it, or its head and tail around a space. */
static const char *cut(struct semantic *s, const char *text, size_t *len)
{
    size_t n = *len, half = s->cfg.max_text / 2;
    if (n <= s->cfg.max_text)
        return text;
    size_t head = half, tail = n - half;
    while (head > 0 && is_cont(text[head]))
        head--;
    while (tail < n && is_cont(text[tail]))
        tail++;
    memcpy(s->text, text, head);
    s->text[head] = ' ';
    memcpy(s->text + head + 1, text + tail, n - tail);
    *len = head + 1 + (n - tail);
    return s->text;
}

static int grow(struct semantic *s)
{
    uint32_t cap = s->cap ? s->cap * 2 : 16;
    if (cap > s->cfg.max_clusters)
        cap = s->cfg.max_clusters;
    size_t dims = s->cfg.dims;
    float *l = ts_realloc(s->leaders, (size_t)cap * dims * sizeof(*l));
    if (!l)
        return -ENOMEM;
    s->leaders = l;
    uint64_t *c = ts_realloc(s->counts, cap * sizeof(*c));
    if (!c)
        return -ENOMEM;
    s->counts = c;
    bool *z = ts_realloc(s->zero, cap * sizeof(*z));
    if (!z)
        return -ENOMEM;
    s->zero = z;
    s->cap = cap;
    return 0;
}

int semantic_add(struct semantic *s, const char *text, size_t len)
{
    if (!text && len > 0)
        return -EINVAL;
    if (s->samples >= s->cfg.max_samples) {
        s->ignored++;
        return 0;
    }
    size_t dims = s->cfg.dims;
    const char *t = len ? cut(s, text, &len) : "";
    int rc = embed_text(t, len, s->vec, dims);
    if (rc)
        return rc;
    bool zero = true;
    for (size_t k = 0; k < dims && zero; k++)
        zero = s->vec[k] == 0;

    uint32_t best_i = 0;
    double best = -2;
    for (uint32_t i = 0; i < s->n; i++) {
        double sim;
        if (zero || s->zero[i]) {
            sim = zero && s->zero[i] ? 1 : 0;
        } else {
            const float *l = s->leaders + (size_t)i * dims;
            sim = 0;
            for (size_t k = 0; k < dims; k++)
                sim += (double)l[k] * s->vec[k];
        }
        if (sim > best) {
            best = sim;
            best_i = i;
        }
    }
    if (s->n > 0 && (best >= s->cfg.threshold - SIM_SLACK || s->n == s->cfg.max_clusters)) {
        s->counts[best_i]++;
    } else {
        if (s->n == s->cap && (rc = grow(s)))
            return rc;
        memcpy(s->leaders + (size_t)s->n * dims, s->vec, dims * sizeof(float));
        s->counts[s->n] = 1;
        s->zero[s->n] = zero;
        s->n++;
    }
    s->samples++;
    return 0;
}

void semantic_get(const struct semantic *s, struct semantic_summary *out)
{
    memset(out, 0, sizeof(*out));
    out->samples = s->samples;
    out->ignored = s->ignored;
    out->clusters = s->n;
    out->threshold = s->cfg.threshold;
    out->dims = s->cfg.dims;
    if (s->samples == 0)
        return;
    double N = (double)s->samples, h = 0;
    uint64_t top = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        double p = (double)s->counts[i] / N;
        h -= p * log2(p);
        if (s->counts[i] > top)
            top = s->counts[i];
    }
    out->entropy_bits = h > 0 ? h : 0;
    out->top_share = (double)top / N;
    double most = N < s->cfg.max_clusters ? N : (double)s->cfg.max_clusters;
    out->normalized = most >= 2 ? out->entropy_bits / log2(most) : 0;
}

json_t *semantic_summary_json(const struct semantic_summary *s)
{
    return json_pack("{sI sI sI sf sf sf sf sI}", "samples", (json_int_t)s->samples, "ignored",
                     (json_int_t)s->ignored, "clusters", (json_int_t)s->clusters, "entropy_bits",
                     s->entropy_bits, "normalized", s->normalized, "top_share", s->top_share,
                     "threshold", s->threshold, "dims", (json_int_t)s->dims);
}
