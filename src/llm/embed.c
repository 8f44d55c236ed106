#include "embed.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "text.h"

static void add_feature(const char *s, size_t n, uint64_t salt, float *out, size_t dims)
{
    uint64_t h = text_hash(s, n, salt);
    size_t idx = (size_t)(h % dims);
    out[idx] += (h >> 63) ? -1.0f : 1.0f;
}

static char lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

int embed_text(const char *s, size_t len, float *out, size_t dims)
{
    if (dims == 0 || dims > EMBED_MAX_DIMS)
        return -EINVAL;
    memset(out, 0, dims * sizeof(*out));
    char gram[3];
    char prev2 = ' ', prev1 = ' ';
    size_t word_start = 0;
    for (size_t i = 0; i <= len; i++) {
        char c = i < len ? lower(s[i]) : ' ';
        gram[0] = prev2;
        gram[1] = prev1;
        gram[2] = c;
        add_feature(gram, 3, 0x3, out, dims);
        prev2 = prev1;
        prev1 = c;
        if (c == ' ' || c == '\n' || c == '\t') {
            if (i > word_start)
                add_feature(s + word_start, i - word_start, 0x77, out, dims);
            word_start = i + 1;
        }
    }
    double norm = 0;
    for (size_t i = 0; i < dims; i++)
        norm += (double)out[i] * out[i];
    if (len == 0 || norm == 0) {
        memset(out, 0, dims * sizeof(*out));
        return 0;
    }
    float inv = (float)(1.0 / sqrt(norm));
    for (size_t i = 0; i < dims; i++)
        out[i] *= inv;
    return 0;
}

double embed_cosine(const float *a, const float *b, size_t n)
{
    double dot = 0, na = 0, nb = 0;
    for (size_t i = 0; i < n; i++) {
        dot += (double)a[i] * b[i];
        na += (double)a[i] * a[i];
        nb += (double)b[i] * b[i];
    }
    if (na == 0 || nb == 0)
        return 0;
    return dot / (sqrt(na) * sqrt(nb));
}
