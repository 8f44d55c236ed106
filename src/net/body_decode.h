/*
 * body_decode.h - undoing a response's Content-Encoding (gzip, deflate) as its
 * bytes arrive, so a compressed event stream is parsed read by read.
 *
 * The HTTP client (http_client.c) makes one decoder per call whose response
 * names a Content-Encoding other than identity, for both engines, and hands
 * on_body the decoded bytes with the arrival time of the read that carried
 * them. Output is bounded: at most BODY_DECODE_MAX bytes per response (a
 * "zip bomb" ends the call instead of filling memory). tokenstorm does not ask
 * for compression (it sends no Accept-Encoding); this is for servers and
 * gateways that compress anyway.
 */
#ifndef TS_NET_BODY_DECODE_H
#define TS_NET_BODY_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define BODY_DECODE_MAX (256ull << 20) /* decoded bytes of one response */

struct body_decoder;

/*
 * A decoder for the Content-Encoding value enc ("gzip", "x-gzip", "deflate";
 * any case, surrounding blanks ignored). Returns 0 and *out; 0 and *out NULL
 * for NULL, "" or "identity" (nothing to undo); -ENOTSUP for any other coding
 * (br, zstd, a list of codings) with "content-encoding X is not supported" in
 * err; -ENOMEM.
 */
TS_MUST_CHECK int body_decoder_new(const char *enc, struct body_decoder **out, char *err,
                                   size_t errlen);
/* Frees d; NULL is a no-op. */
void body_decoder_free(struct body_decoder *d);

/* Receives a piece of decoded output; nonzero stops the feed (returned as is). */
typedef int (*body_decode_emit_fn)(void *ctx, const char *data, size_t len);

/*
 * Decodes in[0..len) and calls emit for each piece of output (up to 16 KiB
 * each). Returns 0; emit's nonzero value; TS_PARSE with "gzip: invalid
 * compressed data (...)" (or "...: data after the end of the compressed
 * body") in err; TS_TOOBIG past BODY_DECODE_MAX; -ENOMEM. After an error the
 * decoder accepts nothing more. A "deflate" body may be zlib-wrapped
 * (RFC 9110) or raw deflate (as some servers send it); both are read.
 */
TS_MUST_CHECK int body_decoder_feed(struct body_decoder *d, const char *in, size_t len,
                                    body_decode_emit_fn emit, void *ctx, char *err, size_t errlen);

/* True when the compressed body reached its end (a complete gzip member or
 * zlib/deflate stream). A response that ends before it is cut. */
bool body_decoder_complete(const struct body_decoder *d);

/* The coding's name as the decoder spells it ("gzip" or "deflate"). */
const char *body_decoder_name(const struct body_decoder *d);

#endif
