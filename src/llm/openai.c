#include "openai.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *openai_endpoint_name(enum openai_endpoint ep)
{
    switch (ep) {
    case OPENAI_CHAT:
        return "chat";
    case OPENAI_COMPLETIONS:
        return "completions";
    case OPENAI_EMBEDDINGS:
        return "embeddings";
    }
    return "?";
}

void openai_usage_clear(struct openai_usage *u)
{
    u->present = false;
    u->prompt_tokens = -1;
    u->completion_tokens = -1;
    u->total_tokens = -1;
    u->cached_tokens = -1;
    u->reasoning_tokens = -1;
}

/* Copies s into dst[size], cutting at a UTF-8 character boundary. */
static void copy_cut(char *dst, size_t size, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n >= size) {
        n = size - 1;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
    }
    if (n)
        memcpy(dst, s, n);
    dst[n] = '\0';
}

void openai_error_set(struct openai_error *e, int status, const char *type, const char *param,
                      const char *code, const char *fmt, ...)
{
    char msg[sizeof(e->message) + 8];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n < 0)
        msg[0] = '\0';
    e->status = status;
    copy_cut(e->message, sizeof(e->message), msg);
    copy_cut(e->type, sizeof(e->type), type);
    copy_cut(e->param, sizeof(e->param), param);
    copy_cut(e->code, sizeof(e->code), code);
}

static const char b64_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t openai_base64_len(size_t n)
{
    return (n + 2) / 3 * 4;
}

size_t openai_base64_encode(const void *in, size_t n, char *out)
{
    const unsigned char *p = in;
    char *o = out;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *o++ = b64_chars[v >> 18];
        *o++ = b64_chars[(v >> 12) & 63];
        *o++ = b64_chars[(v >> 6) & 63];
        *o++ = b64_chars[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        *o++ = b64_chars[v >> 18];
        *o++ = b64_chars[(v >> 12) & 63];
        *o++ = i + 1 < n ? b64_chars[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    *o = '\0';
    return (size_t)(o - out);
}

static int b64_value(unsigned char c)
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

long openai_base64_decode(const char *in, size_t n, void *out)
{
    unsigned char *o = out;
    size_t pad = 0;
    while (n > 0 && pad < 2 && in[n - 1] == '=') {
        n--;
        pad++;
    }
    if (n % 4 == 1 || (pad && (n + pad) % 4 != 0))
        return TS_PARSE;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_value((unsigned char)in[i]);
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
