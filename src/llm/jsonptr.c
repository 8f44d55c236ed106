/*
 * jsonptr.c - RFC 6901 lookups. Tokens without escapes are looked up
 * directly; a token with "~0"/"~1" escapes is compared with each key of the
 * object while decoding, so no lookup ever allocates.
 */
#include "llm/jsonptr.h"

#include <string.h>

/* Whether the "~" escapes of tok[0..n) are all "~0" or "~1"; *escaped tells
 * whether there was any. */
static bool token_valid(const char *tok, size_t n, bool *escaped)
{
    *escaped = false;
    for (size_t i = 0; i < n; i++) {
        if (tok[i] != '~')
            continue;
        if (i + 1 >= n || (tok[i + 1] != '0' && tok[i + 1] != '1'))
            return false;
        *escaped = true;
        i++;
    }
    return true;
}

/* Whether the (valid) escaped token tok[0..n) decodes to key[0..klen). */
static bool token_eq(const char *tok, size_t n, const char *key, size_t klen)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++, k++) {
        char c = tok[i];
        if (c == '~')
            c = tok[++i] == '0' ? '~' : '/';
        if (k >= klen || key[k] != c)
            return false;
    }
    return k == klen;
}

static json_t *member_escaped(json_t *obj, const char *tok, size_t n)
{
    for (void *it = json_object_iter(obj); it; it = json_object_iter_next(obj, it)) {
        if (token_eq(tok, n, json_object_iter_key(it), json_object_iter_key_len(it)))
            return json_object_iter_value(it);
    }
    return NULL;
}

static bool array_index(const char *tok, size_t n, size_t *idx)
{
    if (n == 0 || n > 18 || (n > 1 && tok[0] == '0'))
        return false;
    size_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (tok[i] < '0' || tok[i] > '9')
            return false;
        v = v * 10 + (size_t)(tok[i] - '0');
    }
    *idx = v;
    return true;
}

json_t *jsonptr_get(json_t *root, const char *ptr, size_t len)
{
    if (len == 0)
        return root;
    if (ptr[0] != '/')
        return NULL;
    json_t *cur = root;
    size_t i = 1;
    for (;;) {
        size_t j = i;
        while (j < len && ptr[j] != '/')
            j++;
        const char *tok = ptr + i;
        size_t n = j - i;
        bool escaped;
        if (!token_valid(tok, n, &escaped))
            return NULL;
        if (json_is_object(cur)) {
            cur = escaped ? member_escaped(cur, tok, n) : json_object_getn(cur, tok, n);
        } else if (json_is_array(cur)) {
            size_t idx;
            cur = array_index(tok, n, &idx) ? json_array_get(cur, idx) : NULL;
        } else {
            cur = NULL;
        }
        if (!cur || j >= len)
            return cur;
        i = j + 1;
    }
}

bool jsonptr_valid(const char *ptr, size_t len)
{
    if (len == 0)
        return true;
    if (ptr[0] != '/')
        return false;
    bool escaped;
    /* '/' separates tokens and is never part of an escape, so the whole
     * string can be checked as one token. */
    return token_valid(ptr, len, &escaped);
}
