/*
 * fuzz_lines.h - the input of the drivers that feed chunks of two streams
 * one per line (fuzz_chunk_memo, fuzz_tap_flags): a line that starts with
 * byte 0x01 belongs to the second stream, without that byte.
 */
#ifndef TS_FUZZ_LINES_H
#define TS_FUZZ_LINES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "llm/openai_memo.h"

#define FUZZ_LINES_MAX 256

/* The line at *s (before end, which *s must not have reached): *line and
 * *len without its '\n' and stream byte; *s moves past it. Returns its
 * stream, 0 or 1. */
static inline int fuzz_next_line(const char **s, const char *end, const char **line, size_t *len)
{
    const char *nl = memchr(*s, '\n', (size_t)(end - *s));
    size_t n = nl ? (size_t)(nl - *s) : (size_t)(end - *s);
    int which = n && (*s)[0] == 1;
    *line = *s + which;
    *len = n - (size_t)which;
    *s += n + 1;
    return which;
}

/* One line i of stream memo's (the stream's memo, NULL before it has one). */
typedef void (*fuzz_line_fn)(void *ctx, int i, struct openai_memo **memo, const char *line,
                             size_t len);

/* Calls fn for each line of the input (at most FUZZ_LINES_MAX), with the
 * memo of the line's stream; the memos live for this input. */
static inline void fuzz_each_line(const uint8_t *data, size_t size, fuzz_line_fn fn, void *ctx)
{
    struct openai_memo *memo[2] = {NULL, NULL};
    const char *s = (const char *)data, *end = s + size;
    for (int i = 0; i < FUZZ_LINES_MAX && s < end; i++) {
        const char *line;
        size_t len;
        int which = fuzz_next_line(&s, end, &line, &len);
        fn(ctx, i, &memo[which], line, len);
    }
    openai_memo_free(memo[0]);
    openai_memo_free(memo[1]);
}

#endif
