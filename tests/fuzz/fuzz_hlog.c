/*
 * libFuzzer driver for the HdrHistogram decoders. The first byte picks the
 * target: 0 = hdr_decode() on raw compressed bytes, 1 = hdr_decode_base64(),
 * 2 = the .hlog reader over the rest of the input (via fmemopen), 3 = the
 * rest deflated here and wrapped as a V2 blob, so that the fuzzer reaches the
 * encoding header and varint checks behind zlib's checksum. Every
 * histogram that decodes must survive the queries and re-encode to itself.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>

#include "base/alloc.h"
#include "base/hdr.h"
#include "base/hlog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void exercise(const struct hdr *h)
{
    /* unsigned: values near INT64_MAX must not overflow the driver's own sum */
    volatile uint64_t sink =
        (uint64_t)hdr_value_at_percentile(h, 99.9) + (uint64_t)hdr_min(h) + (uint64_t)hdr_max(h);
    volatile double dsink = hdr_mean(h) + hdr_stddev(h);
    (void)sink;
    (void)dsink;

    struct hdr_iter it;
    int steps = 0;
    if (hdr_iter_percentile_init(&it, h, 5) == 0) {
        while (hdr_iter_next(&it) && steps < 100000)
            steps++;
    }

    uint8_t *blob;
    size_t n;
    if (hdr_encode(h, &blob, &n) != 0)
        abort();
    struct hdr *back = NULL;
    if (hdr_decode(blob, n, &back) != 0 || !hdr_equal(h, back))
        abort();
    hdr_free(back);
    ts_free(blob);

    struct hdr *sum = NULL;
    if (hdr_new_latency(&sum) != 0)
        abort();
    if (hdr_add(sum, h) != 0 || hdr_total_count(sum) != hdr_total_count(h))
        abort();
    hdr_free(sum);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint8_t mode = data[0] % 4;
    data++;
    size--;
    struct hdr *h = NULL;
    if (mode == 0) {
        if (hdr_decode(data, size, &h) == 0)
            exercise(h);
        hdr_free(h);
    } else if (mode == 1) {
        if (hdr_decode_base64((const char *)data, size, &h) == 0)
            exercise(h);
        hdr_free(h);
    } else if (mode == 3) {
        uLongf zlen = compressBound((uLong)size);
        uint8_t *blob = malloc(8 + zlen);
        if (!blob || compress2(blob + 8, &zlen, data, (uLong)size, 1) != Z_OK)
            abort();
        const uint8_t head[4] = {0x1c, 0x84, 0x93, 0x14};
        for (int i = 0; i < 4; i++) {
            blob[i] = head[i];
            blob[4 + i] = (uint8_t)(zlen >> (24 - 8 * i));
        }
        if (hdr_decode(blob, 8 + zlen, &h) == 0)
            exercise(h);
        hdr_free(h);
        free(blob);
    } else {
        FILE *f = fmemopen((void *)data, size, "r");
        if (!f)
            return 0;
        struct hlog_reader r;
        hlog_reader_init(&r, f, 4096);
        struct hlog_entry e;
        for (int i = 0; i < 64 && hlog_reader_next(&r, &e) == 1; i++) {
            exercise(e.hist);
            hdr_free(e.hist);
        }
        hlog_reader_release(&r);
        fclose(f);
    }
    return 0;
}
