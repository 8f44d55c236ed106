/*
 * utf8.h - checking text from outside before a parser sees it.
 */
#ifndef TS_BASE_UTF8_H
#define TS_BASE_UTF8_H

#include <stddef.h>

/*
 * The offset of the first byte of s[0..len) that is not valid UTF-8 text
 * (overlong forms, surrogates, code points past U+10FFFF and NUL count as
 * invalid), or len when all of it is valid. libfyaml 0.7.12 can loop forever
 * on some invalid UTF-8, so every YAML loader checks its input with this
 * first.
 */
size_t utf8_invalid_at(const void *s, size_t len);

/* 1-based line and column (in bytes) of offset off in s. */
void text_position(const char *s, size_t off, int *line, int *col);

#endif
