#include "text.h"

#include <stdbool.h>

#include "base/chars.h"
#include "base/rng.h"

static const char *const words[] = {
    " the",   " of",    " and",   " to",    " in",    " is",    " that",  " it",    " for",
    " as",    " with",  " was",   " on",    " be",    " by",    " this",  " are",   " or",
    " from",  " at",    " which", " an",    " but",   " not",   " have",  " has",   " they",
    " can",   " more",  " its",   " one",   " all",   " their", " there", " been",  " would",
    " when",  " model", " data",  " token", " time",  " load",  " user",  " query", " cache",
    " queue", " batch", " value", " state", " first", " other", " such",  " each",  " some",
    " these", " into",  " most",  " used",  " also",  " over",  " only",  " new",   " what",
    " may",   " two",   " where", " after", " under", " while", " then",  " high",  " low",
    " fast",  " slow",  " small", " large", " long",  " short", " path",  " step",  " node",
    " graph", " score", " rate",  " limit", " peak",  " curve", " knee",  " point", " error",
    " text",  " word",  " input", " reply", " plan",  " tool",  " agent", " chunk", " index",
};
#define NWORDS (sizeof(words) / sizeof(words[0]))

const char *text_token(uint64_t seed, uint32_t i)
{
    uint64_t h = rng_mix64(seed ^ rng_mix64((uint64_t)i + 0x9e3779b97f4a7c15ull));
    if (i > 0 && h % 13 == 0)
        return (h >> 8) % 3 == 0 ? "," : ".";
    return words[(h >> 16) % NWORDS];
}

uint64_t text_hash(const char *s, size_t len, uint64_t seed)
{
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static bool is_alpha(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Length of the UTF-8 sequence starting at s (1 for invalid bytes). */
static size_t utf8_len(const unsigned char *s, size_t left)
{
    size_t n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 1;
    if (n > left)
        return 1;
    for (size_t k = 1; k < n; k++)
        if ((s[k] & 0xc0) != 0x80)
            return 1;
    return n;
}

/*
 * Walks the text piece by piece (see the header); `emit` gets each piece that
 * counts as one token. Letter and digit runs are cut into pieces of 5 and 3.
 */
int text_split_tokens(const char *s, size_t len, int (*fn)(const char *piece, size_t n, void *ctx),
                      void *ctx)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        size_t start = i;
        size_t lead = 0;
        if (p[i] == ' ' && i + 1 < len && (is_alpha(p[i + 1]) || chars_is_digit(p[i + 1])))
            lead = 1;
        unsigned char c = p[i + lead];
        size_t run, group;
        if (is_alpha(c) || chars_is_digit(c)) {
            bool alpha = is_alpha(c);
            group = alpha ? 5 : 3;
            run = i + lead;
            while (run < len && (alpha ? is_alpha(p[run]) : chars_is_digit(p[run])))
                run++;
            size_t pos = i + lead;
            bool first = true;
            while (pos < run) {
                size_t end = pos + group < run ? pos + group : run;
                size_t from = first ? start : pos;
                first = false;
                int rc = fn(s + from, end - from, ctx);
                if (rc)
                    return rc;
                pos = end;
            }
            i = run;
            continue;
        }
        if (chars_is_space(c)) {
            /* a whitespace run gives its last space to a following word */
            size_t j = i;
            while (j < len && chars_is_space(p[j]))
                j++;
            if (j < len && (is_alpha(p[j]) || chars_is_digit(p[j])) && p[j - 1] == ' ' && j - 1 > i)
                j--;
            i = j;
        } else if (c < 0x80) {
            i++;
        } else {
            i += utf8_len(p + i, len - i);
        }
        int rc = fn(s + start, i - start, ctx);
        if (rc)
            return rc;
    }
    return 0;
}

static int count_one(const char *piece, size_t n, void *ctx)
{
    (*(size_t *)ctx)++;
    return 0;
}

size_t text_count_tokens(const char *s, size_t len)
{
    size_t count = 0;
    (void)text_split_tokens(s, len, count_one, &count);
    return count;
}
