/*
 * base64.h - standard base64 (RFC 4648 alphabet, '=' padding).
 *
 * Used for HdrHistogram blobs in result files and .hlog logs (strict, as
 * HdrHistogram writes them) and for embeddings with encoding_format=base64
 * (OpenAI pads; decoding accepts missing padding).
 */
#ifndef TS_BASE_BASE64_H
#define TS_BASE_BASE64_H

#include <stddef.h>

#include "err.h"

/* Characters (without NUL) that n bytes encode to. */
size_t base64_len(size_t n);

/* Writes the base64 of n bytes to out (base64_len(n) + 1 bytes of room),
 * NUL-terminated; returns the length. */
size_t base64_encode(const void *in, size_t n, char *out);

enum base64_flags {
    BASE64_STRICT = 1 << 0, /* length a multiple of 4; padding required */
};

/*
 * Decodes n characters (no whitespace) into out, which has room for
 * n / 4 * 3 + 2 bytes. Padding is optional unless BASE64_STRICT. Returns the
 * number of bytes written, or TS_PARSE for a bad character, bad padding or a
 * length no encoder produces.
 */
long base64_decode(const char *in, size_t n, void *out, unsigned flags);

#endif
