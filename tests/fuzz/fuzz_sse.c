/*
 * Fuzz the SSE parser: the input is fed whole and again in pieces whose
 * sizes come from the first bytes, and in those pieces once more through
 * sse_parser_feed_inplace (each piece a heap copy freed after its feed);
 * all runs must dispatch exactly the same events (compared by hash) and end
 * with the same error and leftover.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/sse.h"

struct digest {
    uint64_t h;
    size_t n;
};

static void mix(struct digest *d, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        d->h = (d->h ^ s[i]) * 1099511628211ull;
    d->h = (d->h ^ 0xff) * 1099511628211ull;
}

static int on_event(void *ctx, const struct sse_event *ev)
{
    struct digest *d = ctx;
    d->n++;
    /* data and type may hold NUL bytes; the id never does */
    if (ev->data[ev->data_len] != '\0' || ev->type[ev->type_len] != '\0' ||
        strlen(ev->id) != ev->id_len)
        abort();
    mix(d, ev->type, ev->type_len);
    mix(d, ev->data, ev->data_len);
    mix(d, ev->id, ev->id_len);
    mix(d, &ev->retry_ms, sizeof(ev->retry_ms));
    return 0;
}

static int on_comment(void *ctx, const char *text, size_t len, uint64_t now_ns)
{
    mix(ctx, text, len);
    return 0;
}

static int run(const uint8_t *data, size_t size, size_t cap, const uint8_t *splits, size_t nsplits,
               bool inplace, struct digest *d, size_t *left)
{
    struct sse_parser p;
    sse_parser_init(&p, cap, on_event, d);
    sse_parser_set_comment_cb(&p, on_comment);
    size_t pos = 0, k = 0;
    int err = 0;
    while (pos < size && !err) {
        size_t step = nsplits ? (size_t)splits[k++ % nsplits] + 1 : size;
        if (step > size - pos)
            step = size - pos;
        if (inplace) {
            char *copy = malloc(step);
            if (!copy)
                abort();
            memcpy(copy, data + pos, step);
            err = sse_parser_feed_inplace(&p, copy, step, pos);
            free(copy);
        } else {
            err = sse_parser_feed(&p, (const char *)data + pos, step, pos);
        }
        pos += step;
    }
    int ferr = sse_parser_finish(&p, left);
    if (ferr != err)
        abort();
    /* the parser is reusable after finish */
    if (sse_parser_feed(&p, "data: x\n\n", 9, 0) != 0)
        abort();
    sse_parser_release(&p);
    return err;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t cap = data[0] < 128 ? 0 : (size_t)(data[0] - 120) * 4; /* default or small */
    size_t nsplits = data[1] % 8;
    if (size < 2 + nsplits)
        return 0;
    const uint8_t *splits = data + 2;
    data += 2 + nsplits;
    size -= 2 + nsplits;
    struct digest a = {14695981039346656037ull, 0}, b = a, c = a;
    size_t la = 0, lb = 0, lc = 0;
    int ea = run(data, size, cap, NULL, 0, false, &a, &la);
    int eb = run(data, size, cap, splits, nsplits ? nsplits : 1, false, &b, &lb);
    int ec = run(data, size, cap, splits, nsplits ? nsplits : 1, true, &c, &lc);
    if (ea != eb || a.h != b.h || a.n != b.n || (!ea && la != lb))
        abort();
    if (ec != eb || c.h != b.h || c.n != b.n || (!ec && lc != lb))
        abort();
    return 0;
}
