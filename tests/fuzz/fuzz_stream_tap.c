/*
 * Fuzz the stream tap: the input picks up to four SSE/LLM/RAG faults with
 * their parameters and a sequence of upstream events (OpenAI chunks made
 * with the encoder, or raw bytes), fed in virtual time; the rest of the
 * input also goes through body_tap. Checks: emit times never go back, nothing
 * is emitted after a close, the output parses as SSE, and when the upstream
 * was well-formed and no fault breaks chunks on purpose, every emitted event
 * decodes as an OpenAI chunk. The same events also go through a second tap
 * with the same faults and an embeddings fault, which changes no stream and
 * draws nothing but makes the tap parse every event into a DOM: its output
 * must be the same bytes at the same times (what a tap reads of an event,
 * nothing, its flags or its JSON, never changes what it writes).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "chaos/fault.h"
#include "llm/openai_chunk.h"
#include "llm/openai_encode.h"
#include "net/sse.h"

struct sink {
    struct buf all;
    uint64_t last;
    bool closed;
    uint64_t times; /* a hash of the emits' times and lengths, and the close */
};

static void sink_mix(struct sink *s, uint64_t v)
{
    s->times = (s->times ^ v) * 0x100000001b3ull;
}

static void sink_emit(void *ctx, const char *b, size_t n, uint64_t at)
{
    struct sink *s = ctx;
    if (at < s->last || s->closed)
        abort();
    s->last = at;
    sink_mix(s, at);
    sink_mix(s, n);
    if (buf_append(&s->all, b, n) != 0)
        abort();
}

static void sink_close(void *ctx, uint64_t at, enum fault_cut how)
{
    struct sink *s = ctx;
    if (at < s->last || s->closed || (unsigned)how > FAULT_CUT_HANG)
        abort();
    s->closed = true;
    sink_mix(s, at);
    sink_mix(s, 1000 + (uint64_t)how);
}

struct check {
    struct openai_decoder d;
    bool strict;
};

static int on_event(void *ctx, const struct sse_event *ev)
{
    struct check *c = ctx;
    struct openai_chunk ch;
    if (openai_decode_chunk(&c->d, ev->data, ev->data_len, &ch) != 0 && c->strict)
        abort();
    return 0;
}

static uint8_t take(const uint8_t **p, size_t *n)
{
    if (*n == 0)
        return 0;
    uint8_t v = **p;
    (*p)++;
    (*n)--;
    return v;
}

static struct fault *fuzz_fault(const uint8_t **p, size_t *n, bool *breaks)
{
    struct fault f;
    memset(&f, 0, sizeof(f));
    int span = FAULT_RAG_LATENCY - FAULT_SSE_TTFT_DELAY + 1;
    f.type = (enum fault_type)(FAULT_SSE_TTFT_DELAY + take(p, n) % span);
    snprintf(f.name, sizeof f.name, "f%d", (int)f.type);
    f.dir = FAULT_DIR_DOWNSTREAM;
    f.probability = 1;
    struct fault_params *pr = &f.params;
    uint8_t a = take(p, n), b = take(p, n), c = take(p, n);
    int rc = 0;
    switch (a % 3) {
    case 0:
        rc = dist_init_fixed(&pr->delay, (double)b * 1e6);
        break;
    case 1:
        rc = dist_init_uniform(&pr->delay, 0, (double)b * 1e6);
        break;
    default:
        rc = dist_init_exponential(&pr->delay, 1 + (double)b * 1e6);
        break;
    }
    pr->has_delay = true;
    rc |= (c & 1) ? dist_init_uniform(&pr->count, 0, c % 41) : dist_init_fixed(&pr->count, c % 41);
    if (rc != 0)
        abort();
    pr->unit = (enum fault_unit)(a / 3 % 3);
    pr->cut = (enum fault_cut)(b % 4);
    pr->bytes = 1 + c % 23;
    pr->rate = (double)take(p, n) / 255.0;
    pr->has_rate = a & 0x80;
    if (f.type == FAULT_SSE_THROTTLE)
        pr->rate = 1 + pr->rate * 1000;
    pr->norm = (double)b / 64.0;
    pr->factor = (double)c / 255.0;
    snprintf(pr->pointer, sizeof pr->pointer, "%s", (a & 0x40) ? "/data" : "/result,/r/0");
    snprintf(pr->field, sizeof pr->field, "%s", (a & 0x20) ? "score" : "/m/s");
    pr->jitter_mode = (b & 0x40) ? FAULT_JITTER_FLOOR : FAULT_JITTER_ADD;
    if (f.type == FAULT_SSE_ERROR_EVENT && (c & 0x80)) {
        snprintf(pr->text, sizeof pr->text, "boom \"%u\"\n\\", (unsigned)b);
        pr->raw = c & 0x40;
    }
    if (f.type == FAULT_SSE_MALFORMED || f.type == FAULT_SSE_INVALID_UTF8 ||
        (f.type == FAULT_SSE_ERROR_EVENT && pr->raw))
        *breaks = true;
    return fault_new(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data;
    size_t n = size;
    uint64_t seed = take(&p, &n) | (uint64_t)take(&p, &n) << 8;
    size_t nf = take(&p, &n) % 5;
    struct fault *fs[5];
    bool breaks = false;
    for (size_t i = 0; i < nf; i++)
        fs[i] = fuzz_fault(&p, &n, &breaks);
    struct stream_tap *tap = stream_tap_new(fs, nf, seed, 0);
    struct fault dom_spec;
    memset(&dom_spec, 0, sizeof(dom_spec));
    dom_spec.type = FAULT_LLM_EMBEDDING_NOISE;
    snprintf(dom_spec.name, sizeof dom_spec.name, "dom");
    dom_spec.dir = FAULT_DIR_DOWNSTREAM;
    dom_spec.probability = 1;
    dom_spec.params.norm = 0.1;
    fs[nf] = fault_new(&dom_spec);
    struct stream_tap *tap2 = fs[nf] ? stream_tap_new(fs, nf + 1, seed, 0) : NULL;
    for (size_t i = 0; i <= nf; i++)
        fault_unref(fs[i]);
    if (!tap || !tap2) {
        stream_tap_free(tap);
        stream_tap_free(tap2);
        return 0;
    }

    struct sink s = {.last = 0}, s2 = {.last = 0};
    buf_init(&s.all, 64u << 20);
    buf_init(&s2.all, 64u << 20);
    struct tap_out out = {.emit = sink_emit, .close = sink_close, .ctx = &s};
    struct tap_out out2 = {.emit = sink_emit, .close = sink_close, .ctx = &s2};
    bool failed = false, failed2 = false;
    struct openai_stream_enc enc;
    if (openai_stream_enc_init(&enc, (seed & 1) ? OPENAI_CHAT : OPENAI_COMPLETIONS, "id-1", 1,
                               "m") != 0)
        abort();
    struct buf ev;
    buf_init(&ev, 1 << 20);
    bool wellformed = true;
    uint64_t now = 0;
    const uint8_t *body = p;
    size_t body_len = n;
    for (int k = 0; k < 200 && n > 0; k++) {
        uint8_t kind = take(&p, &n);
        size_t len = take(&p, &n) % 32;
        if (len > n)
            len = n;
        buf_reset(&ev);
        int rc = 0;
        switch (kind % 8) {
        case 0:
        case 1:
        case 2:
            rc = openai_stream_enc_content(&enc, &ev, (const char *)p, len);
            break;
        case 3:
            rc = openai_stream_enc_finish(&enc, &ev, (kind & 8) ? "length" : "stop");
            break;
        case 4:
            rc = openai_stream_enc_usage(&enc, &ev, kind, len);
            break;
        case 5:
            rc = openai_stream_enc_done(&ev);
            break;
        case 6:
            rc = openai_stream_enc_role(&enc, &ev);
            break;
        default:
            /* raw data: what the SSE parser can hand over (no CR, non-empty);
             * without the 'x' it can be JSON of any shape */
            rc = (kind & 8) ? buf_append(&ev, "data: ", 6) : buf_append(&ev, "data: x", 7);
            for (size_t i = 0; i < len && rc == 0; i++)
                rc = buf_append_char(&ev, p[i] == '\r' ? ' ' : (char)p[i]);
            if (rc == 0)
                rc = buf_append(&ev, "\n\n", 2);
            wellformed = false;
            break;
        }
        p += len;
        n -= len;
        if (rc != 0)
            abort();
        if (ev.len < 8)
            continue;
        /* the event's data: the encoder's bytes without "data: " and "\n\n" */
        struct sse_event e = {.type = (kind & 0x10) ? "custom" : "message",
                              .type_len = (kind & 0x10) ? 6 : 7,
                              .data = ev.data + 6,
                              .data_len = ev.len - 8,
                              .id = "",
                              .retry_ms = -1};
        ev.data[ev.len - 2] = '\0';
        now += (uint64_t)(kind >> 5) * 1000000;
        if (!failed2 && stream_tap_event(tap2, &e, now, &out2) != 0)
            failed2 = true;
        if (stream_tap_event(tap, &e, now, &out) != 0) {
            failed = true;
            break;
        }
    }
    if (stream_tap_end(tap, now + 1, &out) != 0)
        wellformed = false;
    if (!failed2 && stream_tap_end(tap2, now + 1, &out2) != 0)
        failed2 = true;
    if (!failed && !failed2 &&
        (s.all.len != s2.all.len || s.times != s2.times || s.closed != s2.closed ||
         (s.all.len && memcmp(s.all.data, s2.all.data, s.all.len) != 0))) {
        fprintf(stderr, "a tap that parses every event wrote other bytes or times\n");
        abort();
    }
    stream_tap_free(tap2);
    buf_release(&s2.all);

    struct check c = {.strict = wellformed && !breaks};
    openai_decoder_init(&c.d);
    struct sse_parser sp;
    sse_parser_init(&sp, 0, on_event, &c);
    if (sse_parser_feed(&sp, s.all.data ? s.all.data : "", s.all.len, 0) != 0)
        abort();
    size_t discarded = 0;
    if (sse_parser_finish(&sp, &discarded) != 0 || discarded != 0)
        abort();
    sse_parser_release(&sp);
    openai_decoder_release(&c.d);

    struct buf bo;
    buf_init(&bo, 64u << 20);
    uint64_t delay = 0;
    if (body_tap(tap, (const char *)body, body_len, &bo, &delay) != 0)
        abort();
    buf_release(&bo);

    stream_tap_free(tap);
    openai_stream_enc_release(&enc);
    buf_release(&ev);
    buf_release(&s.all);
    return 0;
}
