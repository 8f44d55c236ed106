/*
 * traceparent.c - W3C traceparent and baggage headers (see traceparent.h).
 */
#include "base/traceparent.h"

#include <string.h>

static const char hex_digits[] = "0123456789abcdef";

/* The value of a hex digit, or -1. With lower_only, 'A'-'F' count as invalid. */
static int hex_value(unsigned char c, bool lower_only)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (!lower_only && c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

bool trace_id_valid(const uint8_t *id, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (id[i])
            return true;
    return false;
}

void trace_id_hex(const uint8_t *id, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex_digits[id[i] >> 4];
        out[2 * i + 1] = hex_digits[id[i] & 15];
    }
    out[2 * n] = '\0';
}

static int hex_read(const char *hex, uint8_t *id, size_t n, bool lower_only)
{
    for (size_t i = 0; i < n; i++) {
        int hi = hex_value((unsigned char)hex[2 * i], lower_only);
        int lo = hi < 0 ? -1 : hex_value((unsigned char)hex[2 * i + 1], lower_only);
        if (lo < 0)
            return TS_PARSE;
        id[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

int trace_id_from_hex(const char *hex, uint8_t *id, size_t n)
{
    return hex_read(hex, id, n, false);
}

int traceparent_format(const struct trace_context *tc, char *out, size_t n)
{
    if (n < TRACEPARENT_LEN + 1)
        return TS_TOOBIG;
    if (!trace_id_valid(tc->trace_id, TRACE_ID_LEN) || !trace_id_valid(tc->span_id, SPAN_ID_LEN))
        return -EINVAL;
    memcpy(out, "00-", 3);
    trace_id_hex(tc->trace_id, TRACE_ID_LEN, out + 3);
    out[35] = '-';
    trace_id_hex(tc->span_id, SPAN_ID_LEN, out + 36);
    out[52] = '-';
    out[53] = hex_digits[tc->flags >> 4];
    out[54] = hex_digits[tc->flags & 15];
    out[55] = '\0';
    return 0;
}

int traceparent_parse(const char *s, size_t len, struct trace_context *out)
{
    uint8_t version;
    struct trace_context tc;
    if (len < TRACEPARENT_LEN || hex_read(s, &version, 1, true) || version == 0xff)
        return TS_PARSE;
    if (version == 0 && len != TRACEPARENT_LEN)
        return TS_PARSE;
    if (len > TRACEPARENT_LEN && s[TRACEPARENT_LEN] != '-')
        return TS_PARSE;
    if (s[2] != '-' || s[35] != '-' || s[52] != '-')
        return TS_PARSE;
    if (hex_read(s + 3, tc.trace_id, TRACE_ID_LEN, true) ||
        hex_read(s + 36, tc.span_id, SPAN_ID_LEN, true) || hex_read(s + 53, &tc.flags, 1, true))
        return TS_PARSE;
    if (!trace_id_valid(tc.trace_id, TRACE_ID_LEN) || !trace_id_valid(tc.span_id, SPAN_ID_LEN))
        return TS_PARSE;
    *out = tc;
    return 0;
}

/* ---- baggage ---- */

bool http_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* baggage-octet = %x21 / %x23-2B / %x2D-3A / %x3C-5B / %x5D-7E */
static bool baggage_octet(unsigned char c)
{
    return c == 0x21 || (c >= 0x23 && c <= 0x2b) || (c >= 0x2d && c <= 0x3a) ||
           (c >= 0x3c && c <= 0x5b) || (c >= 0x5d && c <= 0x7e);
}

void baggage_init(struct baggage *b, char *storage, size_t cap)
{
    b->data = storage;
    b->len = 0;
    b->max = cap ? cap - 1 : 0;
    if (b->max > BAGGAGE_MAX_BYTES)
        b->max = BAGGAGE_MAX_BYTES;
    b->n = 0;
    if (cap)
        storage[0] = '\0';
}

long baggage_encode_value(const char *s, size_t n, char *out, size_t cap)
{
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool plain = baggage_octet(c) && c != '%';
        if (j + (plain ? 1 : 3) + 1 > cap)
            return TS_TOOBIG;
        if (plain) {
            out[j++] = (char)c;
        } else {
            out[j++] = '%';
            out[j++] = "0123456789ABCDEF"[c >> 4];
            out[j++] = "0123456789ABCDEF"[c & 15];
        }
    }
    if (j + 1 > cap)
        return TS_TOOBIG;
    out[j] = '\0';
    return (long)j;
}

int baggage_add(struct baggage *b, const char *key, const char *value)
{
    size_t klen = strlen(key);
    if (!klen)
        return -EINVAL;
    for (size_t i = 0; i < klen; i++)
        if (!http_tchar((unsigned char)key[i]))
            return -EINVAL;
    if (b->n >= BAGGAGE_MAX_MEMBERS)
        return TS_TOOBIG;
    size_t start = b->len + (b->n ? 1 : 0); /* after the ',' */
    if (start + klen + 1 > b->max)
        return TS_TOOBIG;
    /* encode straight into place; roll back on overflow */
    long vlen = baggage_encode_value(value, strlen(value), b->data + start + klen + 1,
                                     b->max - (start + klen + 1) + 1);
    if (vlen < 0) {
        b->data[b->len] = '\0';
        return TS_TOOBIG;
    }
    if (b->n)
        b->data[b->len] = ',';
    memcpy(b->data + start, key, klen);
    b->data[start + klen] = '=';
    b->len = start + klen + 1 + (size_t)vlen;
    b->n++;
    return 0;
}

long percent_decode(const char *s, size_t len, char *out, size_t cap)
{
    size_t j = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '%') {
            int hi = i + 2 < len ? hex_value((unsigned char)s[i + 1], false) : -1;
            int lo = hi >= 0 ? hex_value((unsigned char)s[i + 2], false) : -1;
            if (lo < 0)
                return TS_PARSE;
            c = (unsigned char)(hi << 4 | lo);
            i += 2;
        }
        if (j + 2 > cap)
            return TS_TOOBIG;
        out[j++] = (char)c;
    }
    if (!cap)
        return TS_TOOBIG;
    out[j] = '\0';
    return (long)j;
}

static bool ows(char c)
{
    return c == ' ' || c == '\t';
}

int baggage_get(const char *s, size_t len, const char *key, char *out, size_t cap)
{
    if (len > BAGGAGE_MAX_BYTES)
        return TS_PARSE;
    size_t klen = strlen(key);
    unsigned members = 0;
    size_t i = 0;
    for (;;) {
        while (i < len && ows(s[i]))
            i++;
        if (++members > BAGGAGE_MAX_MEMBERS)
            return TS_PARSE;
        size_t k0 = i;
        while (i < len && http_tchar((unsigned char)s[i]))
            i++;
        size_t k1 = i;
        while (i < len && ows(s[i]))
            i++;
        if (k1 == k0 || i == len || s[i] != '=')
            return TS_PARSE;
        i++;
        while (i < len && ows(s[i]))
            i++;
        size_t v0 = i;
        while (i < len && baggage_octet((unsigned char)s[i]))
            i++;
        size_t v1 = i;
        while (i < len && ows(s[i]))
            i++;
        if (i < len && s[i] == ';') {
            /* properties: skipped up to the ',' that ends the member */
            while (i < len && s[i] != ',') {
                unsigned char c = (unsigned char)s[i++];
                if (c != ';' && c != '=' && !ows((char)c) && !baggage_octet(c))
                    return TS_PARSE;
            }
        } else if (i < len && s[i] != ',') {
            return TS_PARSE;
        }
        if (k1 - k0 == klen && !memcmp(s + k0, key, klen)) {
            long n = percent_decode(s + v0, v1 - v0, out, cap);
            return n < 0 ? (int)n : 0;
        }
        if (i == len)
            return -ENOENT;
        i++; /* the ',' */
    }
}
