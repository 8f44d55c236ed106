#include "base64.h"

#include <stdint.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_len(size_t n)
{
    return (n + 2) / 3 * 4;
}

size_t base64_encode(const void *in, size_t n, char *out)
{
    const unsigned char *p = in;
    char *o = out;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        *o++ = alphabet[(v >> 18) & 63];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
        *o++ = i + 2 < n ? alphabet[v & 63] : '=';
    }
    *o = '\0';
    return (size_t)(o - out);
}

static int value_of(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

long base64_decode(const char *in, size_t n, void *out, unsigned flags)
{
    if ((flags & BASE64_STRICT) && (n == 0 || n % 4 != 0))
        return TS_PARSE;
    size_t pad = 0;
    while (n > 0 && pad < 2 && in[n - 1] == '=') {
        n--;
        pad++;
    }
    if (n % 4 == 1 || (pad && (n + pad) % 4 != 0))
        return TS_PARSE;
    unsigned char *o = out;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = value_of((unsigned char)in[i]);
        if (v < 0)
            return TS_PARSE;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            *o++ = (unsigned char)(acc >> bits);
        }
    }
    return (long)(o - (unsigned char *)out);
}
