/*
 * body_decode.c - gzip and deflate response bodies, decoded as they arrive
 * (see body_decode.h).
 */
#include "net/body_decode.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <zlib.h>

#include "base/alloc.h"
#include "base/chars.h"

#define OUT_CHUNK (16u << 10)

struct body_decoder {
    z_stream z;
    bool deflate; /* "deflate": zlib-wrapped, or raw after the first try fails */
    bool raw;     /* reading raw deflate */
    bool started; /* output or a complete header was seen: no more retry as raw */
    bool ended;   /* Z_STREAM_END */
    bool failed;
    uint64_t out_total;
    /* "deflate" bytes read before any output, to read again as raw deflate */
    unsigned char head[16];
    size_t nhead;
};

static voidpf z_alloc(voidpf opaque, uInt items, uInt size)
{
    (void)opaque;
    return ts_calloc(items, size);
}

static void z_free(voidpf opaque, voidpf p)
{
    (void)opaque;
    ts_free(p);
}

static int z_start(struct body_decoder *d)
{
    memset(&d->z, 0, sizeof(d->z));
    d->z.zalloc = z_alloc;
    d->z.zfree = z_free;
    /* 15 + 32: a gzip or zlib header, detected; -15: raw deflate */
    int rc = inflateInit2(&d->z, d->raw ? -15 : 15 + 32);
    return rc == Z_OK ? 0 : -ENOMEM;
}

int body_decoder_new(const char *enc, struct body_decoder **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!enc)
        return 0;
    while (chars_is_blank(*enc))
        enc++;
    size_t n = strlen(enc);
    while (n && chars_is_blank(enc[n - 1]))
        n--;
    bool gzip =
        (n == 4 && !strncasecmp(enc, "gzip", 4)) || (n == 6 && !strncasecmp(enc, "x-gzip", 6));
    bool deflate = n == 7 && !strncasecmp(enc, "deflate", 7);
    if (!n || (n == 8 && !strncasecmp(enc, "identity", 8)))
        return 0;
    if (!gzip && !deflate) {
        ts_errf(err, errlen, "content-encoding %.*s is not supported", (int)(n > 40 ? 40 : n), enc);
        return -ENOTSUP;
    }
    struct body_decoder *d = ts_calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    d->deflate = deflate;
    if (z_start(d)) {
        ts_free(d);
        return -ENOMEM;
    }
    *out = d;
    return 0;
}

void body_decoder_free(struct body_decoder *d)
{
    if (!d)
        return;
    inflateEnd(&d->z);
    ts_free(d);
}

const char *body_decoder_name(const struct body_decoder *d)
{
    return d->deflate ? "deflate" : "gzip";
}

bool body_decoder_complete(const struct body_decoder *d)
{
    return d->ended;
}

static int decode_fail(struct body_decoder *d, int rc, char *err, size_t errlen, const char *what)
{
    d->failed = true;
    ts_errf(err, errlen, "%s: %s", body_decoder_name(d), what);
    return rc;
}

/* A "deflate" body that is not zlib-wrapped: start over reading it raw. */
static int retry_raw(struct body_decoder *d)
{
    inflateEnd(&d->z);
    d->raw = true;
    return z_start(d);
}

int body_decoder_feed(struct body_decoder *d, const char *in, size_t len, body_decode_emit_fn emit,
                      void *ctx, char *err, size_t errlen)
{
    char out[OUT_CHUNK];
    const char *first = in;
    size_t first_len = len, prior = d->nhead;

    if (d->failed)
        return decode_fail(d, TS_PARSE, err, errlen, "invalid compressed data");
    for (;;) {
        if (d->ended) {
            if (len)
                return decode_fail(d, TS_PARSE, err, errlen,
                                   "data after the end of the compressed body");
            break;
        }
        d->z.next_in = (Bytef *)(uintptr_t)in;
        d->z.avail_in = len > UINT_MAX ? UINT_MAX : (uInt)len;
        size_t given = d->z.avail_in;
        d->z.next_out = (Bytef *)out;
        d->z.avail_out = sizeof(out);
        int zr = inflate(&d->z, Z_NO_FLUSH);
        size_t used = given - d->z.avail_in;
        size_t made = sizeof(out) - d->z.avail_out;
        if (zr == Z_DATA_ERROR && d->deflate && !d->raw && !d->started &&
            d->nhead < sizeof(d->head)) {
            if (retry_raw(d))
                return decode_fail(d, -ENOMEM, err, errlen, "out of memory");
            int rc = body_decoder_feed(d, (const char *)d->head, prior, emit, ctx, err, errlen);
            if (rc)
                return rc;
            in = first;
            len = first_len;
            continue;
        }
        if (d->deflate && !d->raw && used) {
            size_t keep = used < sizeof(d->head) - d->nhead ? used : sizeof(d->head) - d->nhead;
            memcpy(d->head + d->nhead, in, keep);
            d->nhead += keep;
        }
        if (zr == Z_MEM_ERROR)
            return decode_fail(d, -ENOMEM, err, errlen, "out of memory");
        if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
            char what[160];
            snprintf(what, sizeof(what), "invalid compressed data (%s)",
                     d->z.msg ? d->z.msg : "inflate failed");
            return decode_fail(d, TS_PARSE, err, errlen, what);
        }
        d->started = d->started || made;
        d->ended = zr == Z_STREAM_END;
        in += used;
        len -= used;
        if (made) {
            d->out_total += made;
            if (d->out_total > BODY_DECODE_MAX)
                return decode_fail(d, TS_TOOBIG, err, errlen, "decoded body over 256 MiB");
            int rc = emit(ctx, out, made);
            if (rc)
                return rc;
        }
        /* a full output buffer may leave more output inside zlib */
        if (!d->ended && d->z.avail_out && (!len || (!used && !made)))
            break;
    }
    return 0;
}
