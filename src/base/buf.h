/*
 * buf.h - growable byte buffers with a hard maximum (curl's dynbuf, git's strbuf).
 *
 * A struct buf is embedded by its owner: buf_init() sets the cap, buf_release()
 * frees the bytes. The content is always NUL-terminated (the terminator is not
 * counted in len and not counted against max), so buf.data can be used as a C
 * string once anything was appended; before that buf_cstr() returns "".
 * Appends that would grow len past max fail with TS_TOOBIG and leave the
 * buffer as it was. buf_take() hands the bytes to the caller (ts_free them)
 * and leaves the buffer empty and reusable.
 */
#ifndef TS_BASE_BUF_H
#define TS_BASE_BUF_H

#include <stdarg.h>
#include <stddef.h>

#include "err.h"

struct buf {
    char *data;
    size_t len;
    size_t cap; /* allocated bytes, including room for the NUL */
    size_t max; /* the most len may ever be */
};

void buf_init(struct buf *b, size_t max);
void buf_release(struct buf *b);
/* Empties the buffer but keeps its memory. */
void buf_reset(struct buf *b);

/* 0, -ENOMEM, or TS_TOOBIG. */
TS_MUST_CHECK int buf_append(struct buf *b, const void *p, size_t n);
TS_MUST_CHECK int buf_append_str(struct buf *b, const char *s);
TS_MUST_CHECK int buf_append_char(struct buf *b, char c);
TS_MUST_CHECK int buf_appendf(struct buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
TS_MUST_CHECK int buf_vappendf(struct buf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* Makes room for at least n more bytes without changing len. */
TS_MUST_CHECK int buf_reserve(struct buf *b, size_t n);

/* Drops the first n bytes (n > len drops all). */
void buf_consume(struct buf *b, size_t n);
/* Cuts len to n if it is longer. */
void buf_truncate(struct buf *b, size_t n);

/* Returns the content as a C string; never NULL. Owned by the buffer. */
const char *buf_cstr(const struct buf *b);
/*
 * Hands the content to the caller, who must ts_free() it. Returns NULL if
 * nothing was ever allocated (len 0), else a NUL-terminated heap string.
 * The buffer is left empty, with the same max.
 */
char *buf_take(struct buf *b, size_t *len_out);

#endif
