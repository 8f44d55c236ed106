/*
 * chars.h - the character classes the parsers here use, in the C locale and
 * whatever the locale: unlike <ctype.h>, each takes any char (negative ones
 * included) and is false for every byte >= 0x80.
 */
#ifndef TS_BASE_CHARS_H
#define TS_BASE_CHARS_H

#include <stdbool.h>

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

#endif
