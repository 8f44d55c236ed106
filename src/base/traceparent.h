/*
 * traceparent.h - W3C Trace Context (the traceparent header) and W3C Baggage
 * (the baggage header): formatting what tokenstorm sends and parsing what it
 * receives. Pure string functions: no allocation, no global state.
 *
 * traceparent (https://www.w3.org/TR/trace-context/ section 3.2):
 *
 *     00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
 *     version-trace_id-parent_id-flags, all lower-case hex
 *
 * Parsing follows the specification's rules: the version is two lower-case
 * hex digits and "ff" is invalid; version 00 is exactly 55 characters; a
 * higher version is read as 00 is, provided it is at least 55 characters and
 * anything after the flags starts with '-' (room for future fields). Upper-case
 * hex is invalid; an all-zero trace id or parent id is invalid. Unknown flag
 * bits are kept as received.
 *
 * baggage (https://www.w3.org/TR/baggage/):
 *
 *     key1=value1,key2=value2;property
 *
 * A key is an RFC 7230 token. A value is percent-encoded: every byte outside
 * the baggage-octet range (0x21, 0x23-0x2B, 0x2D-0x3A, 0x3C-0x5B, 0x5D-0x7E)
 * and '%' itself become %XX, so any UTF-8 text can be carried. The header
 * grammar allows at most 180 list-members and the specification bounds a
 * baggage-string at 8192 bytes; the writer below never produces more than
 * either.
 */
#ifndef TS_BASE_TRACEPARENT_H
#define TS_BASE_TRACEPARENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define TRACE_ID_LEN        16 /* bytes; 32 hex digits */
#define SPAN_ID_LEN         8  /* bytes; 16 hex digits */
#define TRACEPARENT_LEN     55 /* characters of a version-00 value */
#define TRACE_FLAG_SAMPLED  0x01
#define BAGGAGE_MAX_BYTES   8192 /* of one baggage-string */
#define BAGGAGE_MAX_MEMBERS 180  /* list-members of one baggage-string */

struct trace_context {
    uint8_t trace_id[TRACE_ID_LEN];
    uint8_t span_id[SPAN_ID_LEN]; /* the parent-id field of the header */
    uint8_t flags;
};

/* true unless all n bytes are zero (an all-zero id is invalid in W3C and OTLP). */
bool trace_id_valid(const uint8_t *id, size_t n);

/* Writes the 2*n lower-case hex digits of id and a NUL into out (2*n+1 bytes). */
void trace_id_hex(const uint8_t *id, size_t n, char *out);

/*
 * Reads exactly 2*n lower-case or upper-case hex digits of hex into id.
 * Returns 0 or TS_PARSE (id is then unspecified).
 */
TS_MUST_CHECK int trace_id_from_hex(const char *hex, uint8_t *id, size_t n);

/*
 * Formats tc as a version-00 traceparent value (55 characters and a NUL) into
 * out. Returns 0, TS_TOOBIG when n < TRACEPARENT_LEN + 1, or -EINVAL when
 * the trace id or span id is all zero (nothing is written then).
 */
TS_MUST_CHECK int traceparent_format(const struct trace_context *tc, char *out, size_t n);

/*
 * Parses the len bytes of s (a header value, surrounding blanks already
 * removed) into *out. Returns 0 or TS_PARSE (invalid: the caller should
 * start a new trace, as the specification says); *out is untouched then.
 */
TS_MUST_CHECK int traceparent_parse(const char *s, size_t len, struct trace_context *out);

/* A baggage-string being built in the caller's storage. */
struct baggage {
    char *data; /* NUL-terminated baggage-string */
    size_t len; /* bytes, without the NUL */
    size_t max; /* the most len may be: min(storage - 1, BAGGAGE_MAX_BYTES) */
    unsigned n; /* list-members so far */
};

/*
 * Starts an empty baggage-string in storage (cap bytes, at least 1; the
 * string is capped at min(cap - 1, BAGGAGE_MAX_BYTES) bytes).
 */
void baggage_init(struct baggage *b, char *storage, size_t cap);

/*
 * Appends the list-member key=percent-encoded(value). Returns 0; -EINVAL when
 * key is empty or not a token (value may be anything, "" included); TS_TOOBIG
 * when the member would make the string longer than its cap or be member
 * number 181. On error b is unchanged.
 */
TS_MUST_CHECK int baggage_add(struct baggage *b, const char *key, const char *value);

/*
 * Percent-encodes the n bytes of s for a baggage value into out (cap bytes,
 * NUL-terminated). Returns the encoded length, or TS_TOOBIG if it does not fit
 * (out is then unspecified).
 */
TS_MUST_CHECK long baggage_encode_value(const char *s, size_t n, char *out, size_t cap);

/*
 * Looks up key in the baggage-string s (len bytes; several baggage headers
 * joined with ',' are one baggage-string) and writes its percent-decoded
 * value, NUL-terminated, to out (cap bytes). Properties after ';' are
 * ignored; blanks around keys, '=', values and ',' are allowed. Returns 0;
 * -ENOENT when no member has that key; TS_PARSE when s breaks the grammar
 * before the key is found (a member without '=', a key that is not a token, a
 * value with a byte outside baggage-octet, more than 180 members, more than
 * BAGGAGE_MAX_BYTES bytes) or when the value found has a bad %XX escape;
 * TS_TOOBIG when the value does not fit in out.
 */
TS_MUST_CHECK int baggage_get(const char *s, size_t len, const char *key, char *out, size_t cap);

/*
 * Percent-decodes the len bytes of s into out (cap bytes, NUL-terminated).
 * Used for baggage values and OTEL_* "k=v,k2=v2" lists. Returns the decoded
 * length, TS_PARSE for a '%' not followed by two hex digits, or TS_TOOBIG.
 */
TS_MUST_CHECK long percent_decode(const char *s, size_t len, char *out, size_t cap);

/* true if c may appear in an RFC 7230 token (tchar). */
bool http_tchar(unsigned char c);

#endif
