/*
 * chars.h - the character classes the parsers here use, in the C locale and
 * whatever the locale: unlike <ctype.h>, each takes any char (negative ones
 * included) and is false for every byte >= 0x80.
 */
#ifndef TS_BASE_CHARS_H
#define TS_BASE_CHARS_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

/* '0'..'9'. */
static inline bool chars_is_digit(int c)
{
    return c >= '0' && c <= '9';
}

/* A space or a tab: what separates words on one line. */
static inline bool chars_is_blank(int c)
{
    return c == ' ' || c == '\t';
}

/* Whitespace as isspace() has it in the C locale: blank, \n, \r, \v, \f. */
static inline bool chars_is_space(int c)
{
    return chars_is_blank(c) || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Insignificant whitespace in JSON (RFC 8259): space, \t, \n, \r. */
static inline bool chars_is_json_space(int c)
{
    return chars_is_blank(c) || c == '\n' || c == '\r';
}

/* Whether s[0..len) (not NUL-ended) contains word, in any case. */
static inline bool chars_has_ci(const char *s, size_t len, const char *word)
{
    size_t wl = strlen(word);
    for (size_t i = 0; i + wl <= len; i++)
        if (!strncasecmp(s + i, word, wl))
            return true;
    return false;
}

#endif
