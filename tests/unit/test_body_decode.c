#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <zlib.h>

#include "net/body_decode.c"

struct sink {
    char data[1 << 20];
    size_t len;
    unsigned calls;
    int stop_after; /* >0: return 1 at that call */
};

static int sink_emit(void *ctx, const char *p, size_t n)
{
    struct sink *s = ctx;
    assert_true(s->len + n <= sizeof(s->data));
    memcpy(s->data + s->len, p, n);
    s->len += n;
    s->calls++;
    return s->stop_after && (int)s->calls >= s->stop_after;
}

/* Compresses in with windowBits wb (31 gzip, 15 zlib, -15 raw). */
static size_t squeeze(const char *in, size_t n, int wb, unsigned char *out, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, wb, 8, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    size_t len = cap - z.avail_out;
    deflateEnd(&z);
    return len;
}

static const char text[] =
    "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n";

static void roundtrip(const char *enc, int wb, size_t piece)
{
    unsigned char z[512];
    char err[128] = "";
    size_t zn = squeeze(text, sizeof(text) - 1, wb, z, sizeof(z));
    struct body_decoder *d = NULL;
    static struct sink s;
    memset(&s, 0, sizeof(s));
    assert_int_equal(body_decoder_new(enc, &d, err, sizeof(err)), 0);
    assert_non_null(d);
    for (size_t i = 0; i < zn; i += piece) {
        size_t n = zn - i < piece ? zn - i : piece;
        assert_int_equal(
            body_decoder_feed(d, (const char *)z + i, n, sink_emit, &s, err, sizeof(err)), 0);
        assert_true(i + n == zn || !body_decoder_complete(d));
    }
    assert_true(body_decoder_complete(d));
    assert_int_equal(s.len, sizeof(text) - 1);
    assert_memory_equal(s.data, text, s.len);
    body_decoder_free(d);
}

static void test_codings(void **state)
{
    size_t pieces[] = {1, 3, 7, 512};
    for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
        roundtrip("gzip", 31, pieces[i]);
        roundtrip(" X-GZIP ", 31, pieces[i]);
        roundtrip("deflate", 15, pieces[i]);
        roundtrip("Deflate", -15, pieces[i]); /* raw deflate, as some servers send it */
    }
}

static void test_names(void **state)
{
    struct body_decoder *d = (void *)1;
    char err[128];
    assert_int_equal(body_decoder_new(NULL, &d, err, sizeof(err)), 0);
    assert_null(d);
    assert_int_equal(body_decoder_new("identity", &d, err, sizeof(err)), 0);
    assert_null(d);
    assert_int_equal(body_decoder_new(" ", &d, err, sizeof(err)), 0);
    assert_null(d);
    assert_int_equal(body_decoder_new("br", &d, err, sizeof(err)), -ENOTSUP);
    assert_string_equal(err, "content-encoding br is not supported");
    assert_int_equal(body_decoder_new("gzip, br", &d, err, sizeof(err)), -ENOTSUP);
    body_decoder_free(NULL);
}

static void test_errors(void **state)
{
    unsigned char z[512];
    char err[128] = "";
    static struct sink s;
    struct body_decoder *d;
    size_t zn = squeeze(text, sizeof(text) - 1, 31, z, sizeof(z));

    /* corrupt data */
    memset(&s, 0, sizeof(s));
    assert_int_equal(body_decoder_new("gzip", &d, err, sizeof(err)), 0);
    assert_int_equal(body_decoder_feed(d, "not gzip at all", 15, sink_emit, &s, err, sizeof(err)),
                     TS_PARSE);
    assert_true(strncmp(err, "gzip: invalid compressed data", 29) == 0);
    assert_int_equal(body_decoder_feed(d, (const char *)z, zn, sink_emit, &s, err, sizeof(err)),
                     TS_PARSE);
    body_decoder_free(d);

    /* data after the end */
    memset(&s, 0, sizeof(s));
    assert_int_equal(body_decoder_new("gzip", &d, err, sizeof(err)), 0);
    unsigned char twice[1024];
    memcpy(twice, z, zn);
    memcpy(twice + zn, "xyz", 3);
    assert_int_equal(
        body_decoder_feed(d, (const char *)twice, zn + 3, sink_emit, &s, err, sizeof(err)),
        TS_PARSE);
    assert_string_equal(err, "gzip: data after the end of the compressed body");
    body_decoder_free(d);

    /* cut short: not complete */
    memset(&s, 0, sizeof(s));
    assert_int_equal(body_decoder_new("gzip", &d, err, sizeof(err)), 0);
    assert_int_equal(body_decoder_feed(d, (const char *)z, zn - 4, sink_emit, &s, err, sizeof(err)),
                     0);
    assert_false(body_decoder_complete(d));
    body_decoder_free(d);

    /* the receiver stops: its value comes back */
    memset(&s, 0, sizeof(s));
    s.stop_after = 1;
    assert_int_equal(body_decoder_new("gzip", &d, err, sizeof(err)), 0);
    assert_int_equal(body_decoder_feed(d, (const char *)z, zn, sink_emit, &s, err, sizeof(err)), 1);
    body_decoder_free(d);
}

/* A small input that inflates past the bound ends with TS_TOOBIG, in 16 KiB pieces. */
static void test_bomb(void **state)
{
    static unsigned char zeros[1 << 20], z[1 << 16];
    char err[128];
    size_t zn = squeeze((const char *)zeros, sizeof(zeros), 31, z, sizeof(z));
    struct body_decoder *d;
    static struct sink s;
    assert_int_equal(body_decoder_new("gzip", &d, err, sizeof(err)), 0);
    d->out_total = BODY_DECODE_MAX - (512u << 10); /* as if most had been decoded already */
    memset(&s, 0, sizeof(s));
    int rc = body_decoder_feed(d, (const char *)z, zn, sink_emit, &s, err, sizeof(err));
    assert_int_equal(rc, TS_TOOBIG);
    assert_string_equal(err, "gzip: decoded body over 256 MiB");
    body_decoder_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codings),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_bomb),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
