/*
 * test_stream_tap.c - every SSE/LLM/RAG fault of the stream tap on synthetic
 * upstream streams (built with openai_encode.h), in virtual time: upstream
 * event i arrives at i * gap, and the emitted bytes are parsed back with the
 * SSE parser and the OpenAI chunk decoder.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "chaos/fault.h"
#include "chaos/tap_int.h"
#include "llm/openai_chunk.h"
#include "llm/openai_encode.h"
#include "net/sse.h"

#define MS 1000000ull

/* ---- faults from specs (the real parser) ---- */

static struct fault *mk(const char *spec)
{
    json_error_t je;
    json_t *j = json_loads(spec, 0, &je);
    assert_non_null(j);
    struct fault f;
    char err[256];
    int rc = fault_parse_json(j, &f, err, sizeof err);
    if (rc != 0)
        fail_msg("spec %s: %s", spec, err);
    json_decref(j);
    struct fault *h = fault_new(&f);
    assert_non_null(h);
    return h;
}

/* A tap with the faults of up to 4 specs (NULL-terminated); the tap holds
 * the only references. */
static struct stream_tap *tap_of(uint64_t seed, const char *s1, const char *s2, const char *s3)
{
    struct fault *fs[3];
    size_t n = 0;
    if (s1)
        fs[n++] = mk(s1);
    if (s2)
        fs[n++] = mk(s2);
    if (s3)
        fs[n++] = mk(s3);
    struct stream_tap *tap = stream_tap_new(fs, n, seed, 0);
    assert_non_null(tap);
    for (size_t i = 0; i < n; i++)
        fault_unref(fs[i]);
    return tap;
}

/* ---- the upstream ---- */

struct up {
    char *data[4200];
    size_t len[4200];
    size_t n;
};

static void up_add(struct up *u, struct buf *b)
{
    /* strip "data: " and the blank line */
    assert_true(b->len > 8);
    assert_true(u->n < 4200);
    u->data[u->n] = ts_strndup(b->data + 6, b->len - 8);
    u->len[u->n] = b->len - 8;
    u->n++;
    buf_reset(b);
}

/* A chat stream: role, ntok content chunks (texts[i % ntexts] or " tokI"),
 * finish "stop", usage (if usage), [DONE]. */
static void up_chat(struct up *u, size_t ntok, bool usage, const char *const *texts, size_t ntexts)
{
    struct openai_stream_enc e;
    struct buf b;
    buf_init(&b, 1 << 20);
    memset(u, 0, sizeof(*u));
    assert_int_equal(openai_stream_enc_init(&e, OPENAI_CHAT, "chatcmpl-x", 1700000000, "m"), 0);
    assert_int_equal(openai_stream_enc_role(&e, &b), 0);
    up_add(u, &b);
    for (size_t i = 0; i < ntok; i++) {
        char t[32];
        const char *s = t;
        if (texts)
            s = texts[i % ntexts];
        else
            snprintf(t, sizeof t, " tok%zu", i);
        assert_int_equal(openai_stream_enc_content(&e, &b, s, strlen(s)), 0);
        up_add(u, &b);
    }
    assert_int_equal(openai_stream_enc_finish(&e, &b, "stop"), 0);
    up_add(u, &b);
    if (usage) {
        assert_int_equal(openai_stream_enc_usage(&e, &b, 11, (int64_t)ntok), 0);
        up_add(u, &b);
    }
    assert_int_equal(openai_stream_enc_done(&b), 0);
    up_add(u, &b);
    openai_stream_enc_release(&e);
    buf_release(&b);
}

static void up_free(struct up *u)
{
    for (size_t i = 0; i < u->n; i++)
        ts_free(u->data[i]);
    u->n = 0;
}

/* ---- the recorder ---- */

struct out_ev {
    char *data;
    size_t len;
    uint64_t at;
};

struct rec {
    struct buf all;
    uint64_t emit_at[20000];
    size_t emit_len[20000];
    size_t n_emits;
    uint64_t last_at;
    bool order_ok;
    int closes;
    enum fault_cut how;
    uint64_t close_at;
    bool emit_after_close;
    struct out_ev ev[9000];
    size_t n_ev;
};

static void rec_emit(void *ctx, const char *bytes, size_t n, uint64_t at)
{
    struct rec *r = ctx;
    if (r->n_emits > 0 && at < r->last_at)
        r->order_ok = false;
    if (r->closes)
        r->emit_after_close = true;
    r->last_at = at;
    assert_true(r->n_emits < 20000);
    r->emit_at[r->n_emits] = at;
    r->emit_len[r->n_emits] = n;
    r->n_emits++;
    assert_int_equal(buf_append(&r->all, bytes, n), 0);
}

static void rec_close(void *ctx, uint64_t at, enum fault_cut how)
{
    struct rec *r = ctx;
    if (at < r->last_at)
        r->order_ok = false;
    r->closes++;
    r->how = how;
    r->close_at = at;
}

static int rec_on_event(void *ctx, const struct sse_event *ev)
{
    struct rec *r = ctx;
    assert_true(r->n_ev < 9000);
    r->ev[r->n_ev].data = ts_strndup(ev->data, ev->data_len);
    r->ev[r->n_ev].len = ev->data_len;
    r->ev[r->n_ev].at = ev->arrival_ns;
    r->n_ev++;
    return 0;
}

static void rec_init(struct rec *r)
{
    memset(r, 0, sizeof(*r));
    buf_init(&r->all, 64 << 20);
    r->order_ok = true;
}

/* Parses what was emitted into r->ev (each event stamped with the time of
 * the emit that completed it). */
static void rec_parse(struct rec *r)
{
    struct sse_parser p;
    sse_parser_init(&p, 0, rec_on_event, r);
    size_t off = 0;
    for (size_t i = 0; i < r->n_emits; i++) {
        assert_int_equal(sse_parser_feed(&p, r->all.data + off, r->emit_len[i], r->emit_at[i]), 0);
        off += r->emit_len[i];
    }
    size_t discarded = 0;
    assert_int_equal(sse_parser_finish(&p, &discarded), 0);
    assert_int_equal(discarded, 0);
    sse_parser_release(&p);
}

static void rec_release(struct rec *r)
{
    for (size_t i = 0; i < r->n_ev; i++)
        ts_free(r->ev[i].data);
    buf_release(&r->all);
}

/* Feeds the upstream (event i at i * gap) and ends it at n * gap. */
static void run(struct stream_tap *tap, const struct up *u, uint64_t gap, struct rec *r)
{
    struct tap_out out = {.emit = rec_emit, .close = rec_close, .ctx = r};
    for (size_t i = 0; i < u->n; i++) {
        struct sse_event ev = {.type = "message",
                               .type_len = 7,
                               .data = u->data[i],
                               .data_len = u->len[i],
                               .id = "",
                               .retry_ms = -1,
                               .arrival_ns = i * gap};
        assert_int_equal(stream_tap_event(tap, &ev, i * gap, &out), 0);
    }
    assert_int_equal(stream_tap_end(tap, u->n * gap, &out), 0);
    rec_parse(r);
    assert_true(r->order_ok);
    assert_false(r->emit_after_close);
}

static bool is_done_ev(const struct out_ev *e)
{
    return e->len == 6 && memcmp(e->data, "[DONE]", 6) == 0;
}

/* Decodes event i; returns its flags or -1 if it does not decode. */
static long ev_flags(struct openai_decoder *d, const struct out_ev *e, struct openai_chunk *c)
{
    if (openai_decode_chunk(d, e->data, e->len, c) != 0)
        return -1;
    return (long)c->flags;
}

static size_t count_content(const struct rec *r)
{
    struct openai_decoder d;
    struct openai_chunk c;
    openai_decoder_init(&d);
    size_t n = 0;
    for (size_t i = 0; i < r->n_ev; i++) {
        long fl = ev_flags(&d, &r->ev[i], &c);
        if (fl > 0 && (fl & OPENAI_CHUNK_CONTENT))
            n++;
    }
    openai_decoder_release(&d);
    return n;
}

static bool any_done(const struct rec *r)
{
    for (size_t i = 0; i < r->n_ev; i++)
        if (is_done_ev(&r->ev[i]))
            return true;
    return false;
}

/* ---- tests ---- */

static void test_passthrough(void **state)
{
    struct up u;
    up_chat(&u, 20, true, NULL, 0);
    struct stream_tap *tap = stream_tap_new(NULL, 0, 1, 0);
    assert_non_null(tap);
    struct rec *r = ts_calloc(1, sizeof(*r));
    rec_init(r);
    run(tap, &u, MS, r);
    assert_int_equal(r->n_ev, u.n);
    for (size_t i = 0; i < u.n; i++) {
        assert_int_equal(r->ev[i].len, u.len[i]);
        assert_memory_equal(r->ev[i].data, u.data[i], u.len[i]);
        assert_int_equal(r->ev[i].at, i * MS);
    }
    assert_int_equal(r->closes, 0);
    stream_tap_free(tap);
    rec_release(r);
    ts_free(r);
    up_free(&u);
}

static void test_truncate_tokens(void **state)
{
    static const struct {
        const char *spec;
        enum fault_cut how;
    } cases[] = {
        {"{\"name\":\"t\",\"type\":\"sse_truncate\",\"after_tokens\":7,\"cut\":\"close\"}",
         FAULT_CUT_CLOSE},
        {"{\"name\":\"t\",\"type\":\"sse_truncate\",\"after_tokens\":7,\"cut\":\"reset\"}",
         FAULT_CUT_RESET},
        {"{\"name\":\"t\",\"type\":\"sse_truncate\",\"after_tokens\":7}", FAULT_CUT_END},
        {"{\"name\":\"t\",\"type\":\"sse_truncate\",\"after_tokens\":7,\"cut\":\"hang\"}",
         FAULT_CUT_HANG},
    };
    struct up u;
    up_chat(&u, 30, true, NULL, 0);
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct stream_tap *tap = tap_of(3, cases[k].spec, NULL, NULL);
        struct rec *r = ts_calloc(1, sizeof(*r));
        rec_init(r);
        run(tap, &u, MS, r);
        /* role + 7 content chunks, then the cut right after the 7th */
        assert_int_equal(count_content(r), 7);
        assert_int_equal(r->n_ev, 8);
        assert_false(any_done(r));
        assert_int_equal(r->closes, 1);
        assert_int_equal(r->how, cases[k].how);
        assert_int_equal(r->close_at, 7 * MS);
        stream_tap_free(tap);
        rec_release(r);
        ts_free(r);
    }
    up_free(&u);
}

static void test_truncate_events_and_range(void **state)
{
    struct up u;
    up_chat(&u, 30, false, NULL, 0);
    struct stream_tap *tap =
        tap_of(3, "{\"name\":\"t\",\"type\":\"sse_truncate\",\"after_events\":5}", NULL, NULL);
    struct rec *r = ts_calloc(1, sizeof(*r));
    rec_init(r);
    run(tap, &u, MS, r);
    assert_int_equal(r->n_ev, 5);
    assert_int_equal(r->closes, 1);
    assert_int_equal(r->close_at, 4 * MS);
    stream_tap_free(tap);
    rec_release(r);

    /* a range: every k in [5, 10], several distinct over seeds */
    bool seen[11] = {false};
    for (uint64_t seed = 0; seed < 60; seed++) {
        tap = tap_of(seed,
                     "{\"name\":\"t\",\"type\":\"sse_truncate\",\"after_tokens\":\"uniform:5-10\"}",
                     NULL, NULL);
        rec_init(r);
        run(tap, &u, MS, r);
        size_t k = count_content(r);
        assert_in_range(k, 5, 10);
        seen[k] = true;
        stream_tap_free(tap);
        rec_release(r);
    }
    size_t distinct = 0;
    for (size_t k = 5; k <= 10; k++)
        distinct += seen[k];
    assert_true(distinct >= 5);

    /* k = 0 tokens: the role chunk passes, nothing else */
    tap =
        tap_of(3, "{\"name\":\"t\",\"type\":\"sse_truncate\",\"after_tokens\":0,\"cut\":\"close\"}",
               NULL, NULL);
    rec_init(r);
    run(tap, &u, MS, r);
    assert_int_equal(r->n_ev, 1);
    assert_int_equal(count_content(r), 0);
    assert_int_equal(r->closes, 1);
    assert_int_equal(r->close_at, 1 * MS);
    stream_tap_free(tap);
    rec_release(r);
    ts_free(r);
    up_free(&u);
}

static void test_drop_done_and_finish(void **state)
{
    struct up u;
    up_chat(&u, 10, true, NULL, 0);
    struct stream_tap *tap = tap_of(1, "{\"name\":\"a\",\"type\":\"sse_drop_done\"}", NULL, NULL);
    struct rec *r = ts_calloc(1, sizeof(*r));
    rec_init(r);
    run(tap, &u, MS, r);
    assert_int_equal(r->n_ev, u.n - 1);
    assert_false(any_done(r));
    for (size_t i = 0; i + 1 < u.n; i++)
        assert_memory_equal(r->ev[i].data, u.data[i], u.len[i]);
    assert_int_equal(r->closes, 0);
    stream_tap_free(tap);
    rec_release(r);

    tap = tap_of(1, "{\"name\":\"b\",\"type\":\"sse_drop_finish\"}", NULL, NULL);
    rec_init(r);
    run(tap, &u, MS, r);
    assert_int_equal(r->n_ev, u.n);
    struct openai_decoder d;
    struct openai_chunk c;
    openai_decoder_init(&d);
    size_t usage = 0;
    for (size_t i = 0; i < r->n_ev; i++) {
        long fl = ev_flags(&d, &r->ev[i], &c);
        assert_true(fl >= 0);
        assert_false(fl & OPENAI_CHUNK_FINISH);
        if (fl & OPENAI_CHUNK_USAGE)
            usage++;
    }
    assert_int_equal(usage, 1);
    assert_true(any_done(r));
    /* the finish chunk keeps OpenAI's member order */
    assert_string_equal(r->ev[11].data,
                        "{\"id\":\"chatcmpl-x\",\"object\":\"chat.completion.chunk\","
                        "\"created\":1700000000,\"model\":\"m\",\"choices\":[{\"index\":0,"
                        "\"delta\":{},\"logprobs\":null,\"finish_reason\":null}]}");
    openai_decoder_release(&d);
    stream_tap_free(tap);
    rec_release(r);
    ts_free(r);
    up_free(&u);
}

static void test_duplicate(void **state)
{
    struct up u;
    up_chat(&u, 10, false, NULL, 0);
    struct stream_tap *tap =
        tap_of(1, "{\"name\":\"a\",\"type\":\"sse_duplicate\",\"after_events\":3}", NULL, NULL);
    struct rec *r = ts_calloc(1, sizeof(*r));
    rec_init(r);
    run(tap, &u, MS, r);
    assert_int_equal(r->n_ev, u.n + 1);
    assert_string_equal(r->ev[3].data, u.data[3]);
    assert_string_equal(r->ev[4].data, u.data[3]);
    assert_string_equal(r->ev[5].data, u.data[4]);
    assert_int_equal(count_content(r), 11);
    stream_tap_free(tap);
    rec_release(r);

    /* the default rate 1: every event but [DONE] twice */
    tap = tap_of(1, "{\"name\":\"a\",\"type\":\"sse_duplicate\"}", NULL, NULL);
    rec_init(r);
    run(tap, &u, MS, r);
    assert_int_equal(r->n_ev, 2 * u.n - 1);
    assert_int_equal(count_content(r), 20);
    assert_true(is_done_ev(&r->ev[r->n_ev - 1]));
    stream_tap_free(tap);
    rec_release(r);
    ts_free(r);
    up_free(&u);
}

static void test_reorder(void **state)
{
    struct up u;
    up_chat(&u, 9, false, NULL, 0); /* role, 9 tokens, finish, DONE: 12 events */
    struct stream_tap *tap = tap_of(5, "{\"name\":\"a\",\"type\":\"sse_reorder\"}", NULL, NULL);
    struct rec *r = ts_calloc(1, sizeof(*r));
    rec_init(r);
    run(tap, &u, MS, r);
    assert_int_equal(r->n_ev, u.n);
    /* windows of 2 swapped: (0,1) (2,3) ... (10 = finish waits, flushed at DONE alone) */
    for (size_t i = 0; i + 1 < 10; i += 2) {
        assert_string_equal(r->ev[i].data, u.data[i + 1]);
        assert_string_equal(r->ev[i + 1].data, u.data[i]);
    }
    assert_string_equal(r->ev[10].data, u.data[10]);
    assert_true(is_done_ev(&r->ev[11]));
    /* a window is written when it fills: events 0,1 at 1 ms */
    assert_int_equal(r->ev[0].at, 1 * MS);
    assert_int_equal(r->ev[1].at, 1 * MS);
    stream_tap_free(tap);
    rec_release(r);

    /* a window of 4: every window is a non-identity permutation of its events */
    tap = tap_of(9, "{\"name\":\"a\",\"type\":\"sse_reorder\",\"count\":4}", NULL, NULL);
    rec_init(r);
    run(tap, &u, MS, r);
    assert_int_equal(r->n_ev, u.n);
    for (size_t w = 0; w + 4 <= 8; w += 4) {
        bool ident = true;
        for (size_t i = w; i < w + 4; i++) {
            bool found = false;
            for (size_t k = w; k < w + 4; k++)
                found |= strcmp(r->ev[i].data, u.data[k]) == 0;
            assert_true(found);
            ident &= strcmp(r->ev[i].data, u.data[i]) == 0;
        }
        assert_false(ident);
    }
    stream_tap_free(tap);
    rec_release(r);
    ts_free(r);
    up_free(&u);
}

static void test_malformed_and_utf8(void **state)
{
    struct up u;
    static const char *const texts[] = {" héllo wörld"};
    up_chat(&u, 6, false, texts, 1);
    struct stream_tap *tap =
        tap_of(1, "{\"name\":\"a\",\"type\":\"sse_malformed\",\"after_events\":2}", NULL, NULL);
    struct rec *r = ts_calloc(1, sizeof(*r));
    rec_init(r);
    run(tap, &u, MS, r);
    assert_int_equal(r->n_ev, u.n);
    struct openai_decoder d;
    struct openai_chunk c;
    openai_decoder_init(&d);
    for (size_t i = 0; i < r->n_ev; i++) {
        long fl = ev_flags(&d, &r->ev[i], &c);
        if (i == 2) {
            assert_int_equal(fl, -1);
            assert_int_equal(r->ev[i].len, u.len[i] / 2);
            assert_memory_equal(r->ev[i].data, u.data[i], r->ev[i].len);
        } else {
            assert_true(fl >= 0);
        }
    }
    stream_tap_free(tap);
    rec_release(r);

    tap =
        tap_of(1, "{\"name\":\"a\",\"type\":\"sse_invalid_utf8\",\"after_events\":3}", NULL, NULL);
    rec_init(r);
    run(tap, &u, MS, r);
    assert_int_equal(r->n_ev, u.n);
    for (size_t i = 0; i < r->n_ev; i++) {
        const char *p = memmem(r->ev[i].data, r->ev[i].len, "\xff\xfe", 2);
        if (i != 3) {
            assert_null(p);
            assert_string_equal(r->ev[i].data, u.data[i]);
            continue;
        }
        assert_non_null(p);
        assert_int_equal(r->ev[i].len, u.len[i] + 2);
        /* inside the content string: the rest is the original text around it */
        const char *q = strstr(r->ev[i].data, "\"content\":\" h\xc3\xa9llo");
        assert_non_null(q);
        assert_true(p > q && p < q + 30);
        /* jansson rejects it; without the two bytes it is the original */
        json_error_t je;
        json_t *j = json_loadb(r->ev[i].data, r->ev[i].len, 0, &je);
        assert_null(j);
        char tmp[512];
        size_t a = (size_t)(p - r->ev[i].data);
        memcpy(tmp, r->ev[i].data, a);
        memcpy(tmp + a, p + 2, r->ev[i].len - a - 2);
        assert_memory_equal(tmp, u.data[i], u.len[i]);
    }
    openai_decoder_release(&d);
    stream_tap_free(tap);
    rec_release(r);
    ts_free(r);
    up_free(&u);
}

static void test_error_event(void **state)
{
    struct up u;
    up_chat(&u, 10, true, NULL, 0);
    struct stream_tap *tap =
        tap_of(1, "{\"name\":\"a\",\"type\":\"sse_error_event\",\"after_tokens\":4}", NULL, NULL);
    struct rec *r = ts_calloc(1, sizeof(*r));
    rec_init(r);
    run(tap, &u, MS, r);
    /* role + 4 tokens, the error, [DONE]; the response then ends cleanly */
    assert_int_equal(r->n_ev, 7);
    assert_int_equal(count_content(r), 4);
    struct openai_decoder d;
    struct openai_chunk c;
    openai_decoder_init(&d);
    assert_int_equal(openai_decode_chunk(&d, r->ev[5].data, r->ev[5].len, &c), 0);
    assert_true(c.flags & OPENAI_CHUNK_ERROR);
    assert_string_equal(c.error.type, "server_error");
    assert_int_equal(c.error.code_num, 500);
    assert_true(is_done_ev(&r->ev[6]));
    assert_int_equal(r->closes, 1);
    assert_int_equal(r->how, FAULT_CUT_END);
    assert_int_equal(r->ev[5].at, 5 * MS);
    openai_decoder_release(&d);
    stream_tap_free(tap);
    rec_release(r);

    /* a custom text at event 0: the message of an OpenAI error object,
     * JSON-escaped */
    tap = tap_of(1,
                 "{\"name\":\"a\",\"type\":\"sse_error_event\",\"after_events\":0,"
                 "\"text\":\"model \\\"x\\\" overloaded\\nretry\"}",
                 "{\"name\":\"b\",\"type\":\"sse_drop_done\"}", NULL);
    rec_init(r);
    run(tap, &u, MS, r);
    assert_int_equal(r->n_ev, 1);
    openai_decoder_init(&d);
    assert_int_equal(openai_decode_chunk(&d, r->ev[0].data, r->ev[0].len, &c), 0);
    assert_true(c.flags & OPENAI_CHUNK_ERROR);
    assert_string_equal(c.error.message, "model \"x\" overloaded\nretry");
    assert_string_equal(c.error.type, "server_error");
    openai_decoder_release(&d);
    json_error_t je;
    json_t *j = json_loadb(r->ev[0].data, r->ev[0].len, 0, &je);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "message")),
                        "model \"x\" overloaded\nretry");
    json_decref(j);
    stream_tap_free(tap);
    rec_release(r);

    /* raw: the text itself is the data */
    tap = tap_of(1,
                 "{\"name\":\"a\",\"type\":\"sse_error_event\",\"after_events\":0,"
                 "\"raw\":true,\"text\":\"upstream exploded\"}",
                 "{\"name\":\"b\",\"type\":\"sse_drop_done\"}", NULL);
    rec_init(r);
    run(tap, &u, MS, r);
    assert_int_equal(r->n_ev, 1);
    assert_string_equal(r->ev[0].data, "upstream exploded");
    stream_tap_free(tap);
    rec_release(r);
    ts_free(r);
    up_free(&u);
}

static void test_split(void **state)
{
    struct up u;
    up_chat(&u, 5, false, NULL, 0);
    struct stream_tap *tap = tap_of(
        1, "{\"name\":\"a\",\"type\":\"sse_split\",\"bytes\":7,\"delay\":\"1ms\"}", NULL, NULL);
    struct rec *r = ts_calloc(1, sizeof(*r));
    rec_init(r);
    run(tap, &u, 1000 * MS, r);
    assert_int_equal(r->n_ev, u.n);
    size_t expect_emits = 0;
    for (size_t i = 0; i < u.n; i++) {
        assert_string_equal(r->ev[i].data, u.data[i]);
        size_t wire = u.len[i] + 8;
        size_t pieces = (wire + 6) / 7;
        expect_emits += pieces;
        /* the event completes with its last piece, 1 ms per gap */
        assert_int_equal(r->ev[i].at, i * 1000 * MS + (pieces - 1) * MS);
    }
    assert_int_equal(r->n_emits, expect_emits);
    for (size_t i = 0; i < r->n_emits; i++)
        assert_true(r->emit_len[i] <= 7);
    stream_tap_free(tap);
    rec_release(r);
    ts_free(r);
    up_free(&u);
}

static void test_ttft_and_stall(void **state)
{
    struct up u;
    up_chat(&u, 20, false, NULL, 0);
    struct stream_tap *tap = tap_of(
        1, "{\"name\":\"a\",\"type\":\"sse_ttft_delay\",\"delay\":\"500ms\"}",
        "{\"name\":\"b\",\"type\":\"sse_stall\",\"after_tokens\":10,\"delay\":\"2s\"}", NULL);
    struct rec *r = ts_calloc(1, sizeof(*r));
    rec_init(r);
    run(tap, &u, 10 * MS, r);
    assert_int_equal(r->n_ev, u.n);
    assert_int_equal(r->ev[0].at, 0);                  /* the role chunk is not held */
    assert_int_equal(r->ev[1].at, 10 * MS + 500 * MS); /* the first token is */
    for (size_t i = 2; i <= 10; i++)
        assert_int_equal(r->ev[i].at - r->ev[i - 1].at, 10 * MS);
    /* after the 10th token (event 10) a 2 s stall */
    assert_int_equal(r->ev[11].at - r->ev[10].at, 10 * MS + 2000 * MS);
    for (size_t i = 12; i < u.n; i++)
        assert_int_equal(r->ev[i].at - r->ev[i - 1].at, 10 * MS);
    stream_tap_free(tap);
    rec_release(r);
    ts_free(r);
    up_free(&u);
}

static void gap_stats(const struct rec *r, size_t from, double *mean, double *sd)
{
    double s = 0, s2 = 0;
    size_t n = 0;
    for (size_t i = from + 1; i < r->n_ev; i++) {
        double g = (double)(r->ev[i].at - r->ev[i - 1].at) / 1e6;
        s += g;
        s2 += g * g;
        n++;
    }
    *mean = s / (double)n;
    *sd = sqrt(s2 / (double)n - *mean * *mean);
}

static void test_jitter(void **state)
{
    struct up u;
    up_chat(&u, 2000, false, NULL, 0);
    struct stream_tap *tap = tap_of(
        7, "{\"name\":\"a\",\"type\":\"sse_jitter\",\"delay\":\"normal:20ms,5ms\"}", NULL, NULL);
    struct rec *r = ts_calloc(1, sizeof(*r));
    rec_init(r);
    run(tap, &u, 1 * MS, r); /* upstream at 1 ms per event */
    assert_int_equal(r->n_ev, u.n);
    double mean, sd;
    gap_stats(r, 0, &mean, &sd);
    /* the default mode adds the delay to the upstream's gap */
    assert_true(fabs(mean - 21.0) < 0.5);
    assert_true(fabs(sd - 5.0) < 0.4);
    stream_tap_free(tap);
    rec_release(r);

    tap = tap_of(7, "{\"name\":\"a\",\"type\":\"sse_jitter\",\"delay\":\"exponential:20ms\"}", NULL,
                 NULL);
    rec_init(r);
    run(tap, &u, 1 * MS, r);
    gap_stats(r, 0, &mean, &sd);
    assert_true(fabs(mean - 21.0) < 1.5);
    assert_true(fabs(sd - 20.0) < 2.0);
    stream_tap_free(tap);
    rec_release(r);
    ts_free(r);
    up_free(&u);
}

static struct stream_tap *tap_ofv(uint64_t seed, const char *const *specs, size_t n)
{
    struct fault *fs[8];
    assert_true(n <= 8);
    for (size_t i = 0; i < n; i++)
        fs[i] = mk(specs[i]);
    struct stream_tap *tap = stream_tap_new(fs, n, seed, 0);
    assert_non_null(tap);
    for (size_t i = 0; i < n; i++)
        fault_unref(fs[i]);
    return tap;
}

static void rec_same(const struct rec *a, const struct rec *b)
{
    assert_int_equal(a->n_emits, b->n_emits);
    assert_int_equal(a->all.len, b->all.len);
    assert_memory_equal(a->all.data, b->all.data, a->all.len);
    for (size_t i = 0; i < a->n_emits; i++) {
        assert_true(a->emit_at[i] == b->emit_at[i]);
        assert_int_equal(a->emit_len[i], b->emit_len[i]);
    }
}

/* Faults that act only on times and framing pass the events without
 * reading them (the proxy's cost per event stays that of the bytes); faults
 * that need an event's flags (tokens, role) read them without a DOM; both
 * give what a tap that parses every event gives (an embeddings fault, which
 * changes no stream and draws nothing, makes a tap parse them). */
static void test_parse_tiers(void **state)
{
    (void)state;
    struct up u;
    up_chat(&u, 50, true, NULL, 0);
    const char *specs[] = {
        "{\"name\":\"a\",\"type\":\"sse_jitter\",\"delay\":\"0ms\"}",
        "{\"name\":\"s\",\"type\":\"sse_split\",\"bytes\":7}",
        /* these need the tokens: a throttle far above the upstream's rate
         * (it changes no time), a stall after the 5th token, a late first token */
        "{\"name\":\"t\",\"type\":\"sse_throttle\",\"rate\":1000000}",
        "{\"name\":\"st\",\"type\":\"sse_stall\",\"after_tokens\":5,\"delay\":\"30ms\"}",
        "{\"name\":\"tt\",\"type\":\"sse_ttft_delay\",\"delay\":\"20ms\"}",
    };
    const char *dom = "{\"name\":\"e\",\"type\":\"llm_embedding_noise\",\"norm\":0.1}";
    const size_t cases[] = {2, 3, 5}; /* specs[0..n) */
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        const char *with[8];
        memcpy(with, specs, cases[k] * sizeof(*with));
        with[cases[k]] = dom;
        struct rec *a = ts_calloc(1, sizeof(*a)), *b = ts_calloc(1, sizeof(*b));
        struct stream_tap *tap = tap_ofv(3, specs, cases[k]);
        rec_init(a);
        run(tap, &u, 1 * MS, a);
        assert_int_equal(stream_tap_parsed(tap), 0);
        stream_tap_free(tap);

        tap = tap_ofv(3, with, cases[k] + 1);
        rec_init(b);
        run(tap, &u, 1 * MS, b);
        assert_int_equal(stream_tap_parsed(tap), u.n - 1); /* every event but [DONE] */
        stream_tap_free(tap);
        assert_int_equal(a->n_ev, u.n);
        rec_same(a, b);
        if (cases[k] == 5) { /* the stall and the late first token moved the times */
            assert_true(a->emit_at[a->n_emits - 1] >= (u.n - 1) * MS + 30 * MS + 20 * MS);
        }
        rec_release(a);
        rec_release(b);
        ts_free(a);
        ts_free(b);
    }
    up_free(&u);
}

/* A fixed delay on an upstream slower and faster than it: "add" adds it to
 * every gap, "floor" makes every gap at least the delay. */
static void test_jitter_modes(void **state)
{
    struct up u;
    up_chat(&u, 20, false, NULL, 0);
    static const struct {
        const char *spec;
        uint64_t gap, want;
    } cases[] = {
        {"{\"name\":\"a\",\"type\":\"sse_jitter\",\"delay\":\"20ms\"}", 30, 50},
        {"{\"name\":\"a\",\"type\":\"sse_jitter\",\"delay\":\"20ms\",\"mode\":\"add\"}", 5, 25},
        {"{\"name\":\"a\",\"type\":\"sse_jitter\",\"delay\":\"20ms\",\"mode\":\"floor\"}", 30, 30},
        {"{\"name\":\"a\",\"type\":\"sse_jitter\",\"delay\":\"20ms\",\"mode\":\"floor\"}", 5, 20},
    };
    struct rec *r = ts_calloc(1, sizeof(*r));
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct stream_tap *tap = tap_of(7, cases[k].spec, NULL, NULL);
        rec_init(r);
        run(tap, &u, cases[k].gap * MS, r);
        assert_int_equal(r->n_ev, u.n);
        assert_int_equal(r->ev[0].at, 0);
        for (size_t i = 1; i < r->n_ev; i++)
            if (r->ev[i].at - r->ev[i - 1].at != cases[k].want * MS)
                fail_msg("%s at %" PRIu64 " ms: gap %zu is %.3f ms, want %" PRIu64, cases[k].spec,
                         cases[k].gap, i, (double)(r->ev[i].at - r->ev[i - 1].at) / 1e6,
                         cases[k].want);
        stream_tap_free(tap);
        rec_release(r);
    }
    ts_free(r);
    up_free(&u);
}

static void test_throttle(void **state)
{
    struct up u;
    up_chat(&u, 100, false, NULL, 0);
    struct stream_tap *tap =
        tap_of(1, "{\"name\":\"a\",\"type\":\"sse_throttle\",\"rate\":50}", NULL, NULL);
    struct rec *r = ts_calloc(1, sizeof(*r));
    rec_init(r);
    run(tap, &u, 1 * MS, r);
    assert_int_equal(r->n_ev, u.n);
    /* tokens are events 1..100: exactly 20 ms apart, 50 per second */
    for (size_t i = 2; i <= 100; i++)
        assert_int_equal(r->ev[i].at - r->ev[i - 1].at, 20 * MS);
    double secs = (double)(r->ev[100].at - r->ev[1].at) / 1e9;
    assert_true(fabs(99.0 / secs - 50.0) < 1e-6);
    stream_tap_free(tap);
    rec_release(r);

    /* a slower upstream is not sped up */
    tap = tap_of(1, "{\"name\":\"a\",\"type\":\"sse_throttle\",\"rate\":50}", NULL, NULL);
    rec_init(r);
    run(tap, &u, 30 * MS, r);
    for (size_t i = 0; i < u.n; i++)
        assert_int_equal(r->ev[i].at, i * 30 * MS);
    stream_tap_free(tap);
    rec_release(r);
    ts_free(r);
    up_free(&u);
}

static bool valid_utf8(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t k = c < 0x80             ? 0
                   : (c & 0xe0) == 0xc0 ? 1
                   : (c & 0xf0) == 0xe0 ? 2
                   : (c & 0xf8) == 0xf0 ? 3
                                        : 9;
        if (k == 9 || (k == 1 && c < 0xc2) || i + k >= n + (k == 0))
            return k == 0;
        for (size_t j = 1; j <= k; j++)
            if ((s[i + j] & 0xc0) != 0x80)
                return false;
        i += k + 1;
    }
    return true;
}

/* The answer text of a stream, joined. */
static void answer(const struct rec *r, struct buf *out)
{
    struct openai_decoder d;
    struct openai_chunk c;
    openai_decoder_init(&d);
    for (size_t i = 0; i < r->n_ev; i++) {
        if (ev_flags(&d, &r->ev[i], &c) < 0)
            continue;
        for (size_t k = 0; k < c.n_choices; k++)
            if (c.choices[k].content)
                assert_int_equal(buf_append(out, c.choices[k].content, c.choices[k].content_len),
                                 0);
    }
    openai_decoder_release(&d);
}

/* The words of got against those of orig (split on blanks, trailing
 * ".,?" and "'s" set aside): a capitalised word not at a sentence start is
 * another capitalised word of letters only; a year (1000..2099) another year
 * at most 40 away; another number one within 0.5..1.5 times it; every other
 * word unchanged. */
static void check_words(const char *orig, const char *got)
{
    char a[512], b[512];
    snprintf(a, sizeof a, "%s", orig);
    snprintf(b, sizeof b, "%s", got);
    char *sa, *sb;
    char *wa = strtok_r(a, " ", &sa), *wb = strtok_r(b, " ", &sb);
    bool start = true;
    for (; wa && wb; wa = strtok_r(NULL, " ", &sa), wb = strtok_r(NULL, " ", &sb)) {
        size_t la = strcspn(wa, ".,?'"), lb = strcspn(wb, ".,?'");
        if (strcmp(wa + la, wb + lb) != 0)
            fail_msg("'%s' -> '%s' in '%s'", wa, wb, got);
        bool ascii = true;
        for (size_t i = 0; i < la; i++)
            ascii &= (unsigned char)wa[i] < 0x80;
        bool cap = wa[0] >= 'A' && wa[0] <= 'Z' && la >= 2 && !start && ascii;
        bool num = wa[0] >= '0' && wa[0] <= '9';
        start = wa[la] == '.' || wa[la] == '?';
        if (!cap && !num) {
            if (la != lb || memcmp(wa, wb, la) != 0)
                fail_msg("'%s' changed to '%s' in '%s'", wa, wb, got);
            continue;
        }
        if (la == lb && memcmp(wa, wb, la) == 0)
            fail_msg("'%s' kept in '%s'", wa, got);
        if (cap) {
            if (!(wb[0] >= 'A' && wb[0] <= 'Z'))
                fail_msg("'%s' -> '%s' in '%s'", wa, wb, got);
            for (size_t i = 0; i < lb; i++)
                if (!((wb[i] >= 'A' && wb[i] <= 'Z') || (wb[i] >= 'a' && wb[i] <= 'z')))
                    fail_msg("'%s' -> '%s' in '%s'", wa, wb, got);
            continue;
        }
        if (strspn(wb, "0123456789") != lb)
            fail_msg("'%s' -> '%s' in '%s'", wa, wb, got);
        double va = atof(wa), vb = atof(wb);
        if (va >= 1000 && va <= 2099) {
            if (!(vb >= 1000 && vb <= 2099 && fabs(vb - va) <= 40))
                fail_msg("year '%s' -> '%s' in '%s'", wa, wb, got);
        } else if (va >= 10 && !(vb >= 0.5 * va - 1 && vb <= 1.5 * va + 1)) {
            fail_msg("'%s' -> '%s' in '%s'", wa, wb, got);
        }
    }
    if (wa || wb)
        fail_msg("'%s' and '%s' differ in words", orig, got);
}

static void test_hallucinate_stream(void **state)
{
    static const char *const texts[] = {
        "The",  " Eiffel", " tower", " in",   " Paris",   " is",     " 330", " metres", " tall.",
        " It",  " was",    " built", " by",   " Gustave", " Eiffel", " in",  " 1889",   " for",
        " the", " World",  "'s",     " Fair", " in",      " Zürich", "?",
    };
    size_t nt = sizeof(texts) / sizeof(texts[0]);
    struct up u;
    up_chat(&u, nt, false, texts, nt);
    struct buf a1, a2, a3;
    buf_init(&a1, 1 << 20);
    buf_init(&a2, 1 << 20);
    buf_init(&a3, 1 << 20);
    struct buf *outs[3] = {&a1, &a2, &a3};
    uint64_t seeds[3] = {42, 42, 43};
    struct rec *r = ts_calloc(1, sizeof(*r));
    for (int t = 0; t < 3; t++) {
        struct stream_tap *tap = tap_of(
            seeds[t], "{\"name\":\"h\",\"type\":\"llm_hallucinate\",\"rate\":1}", NULL, NULL);
        rec_init(r);
        run(tap, &u, MS, r);
        assert_int_equal(r->n_ev, u.n);
        for (size_t i = 0; i < r->n_ev; i++) {
            assert_true(valid_utf8((const unsigned char *)r->ev[i].data, r->ev[i].len));
            struct openai_decoder d;
            struct openai_chunk c;
            openai_decoder_init(&d);
            assert_true(ev_flags(&d, &r->ev[i], &c) >= 0);
            openai_decoder_release(&d);
        }
        answer(r, outs[t]);
        stream_tap_free(tap);
        rec_release(r);
    }
    ts_free(r);
    /* deterministic for a seed, another seed differs */
    assert_string_equal(a1.data, a2.data);
    assert_string_not_equal(a1.data, a3.data);
    /* every entity and number changed as a whole, the rest kept: word by word */
    char orig[512] = "";
    for (size_t i = 0; i < nt; i++)
        strcat(orig, texts[i]);
    check_words(orig, a1.data);
    check_words(orig, a3.data);
    buf_release(&a1);
    buf_release(&a2);
    buf_release(&a3);
    up_free(&u);
}

/* One stream through llm_hallucinate (rate 1, seed): its answer in out;
 * returns the number of events. */
static size_t hallu_run(uint64_t seed, const char *const *texts, size_t nt, struct buf *out)
{
    struct up u;
    up_chat(&u, nt, true, texts, nt);
    struct rec *r = ts_calloc(1, sizeof(*r));
    struct stream_tap *tap =
        tap_of(seed, "{\"name\":\"h\",\"type\":\"llm_hallucinate\",\"rate\":1}", NULL, NULL);
    rec_init(r);
    run(tap, &u, MS, r);
    struct openai_decoder d;
    struct openai_chunk c;
    openai_decoder_init(&d);
    bool finished = false;
    for (size_t i = 0; i < r->n_ev; i++) {
        long fl = ev_flags(&d, &r->ev[i], &c);
        if (is_done_ev(&r->ev[i]))
            continue;
        assert_true(fl >= 0);
        /* no content after the finish chunk */
        if (fl & OPENAI_CHUNK_CONTENT)
            assert_false(finished);
        if (c.n_choices > 0 && c.choices[0].finish_reason)
            finished = true;
    }
    openai_decoder_release(&d);
    answer(r, out);
    size_t n = r->n_ev;
    stream_tap_free(tap);
    rec_release(r);
    ts_free(r);
    up_free(&u);
    return n;
}

/* Entities split over two chunks are judged and replaced whole; a year stays
 * a nearby year, a number one of similar size; an entity at the end of the
 * last chunk is written in a chunk of its own before the finish. */
static void test_hallucinate_split_words(void **state)
{
    static const char *const texts[] = {
        "The", " capital", " of",  " Fr",   "ance", " is", " Par",   "is",  ",",    " built",
        " in", " 18",      "89",   " with", " 3",   "30",  " steps", " by", " Eif", "fel",
        ".",   " Ask",     " the", " NA",   "SA",   " in", " Par",   "is",
    };
    size_t nt = sizeof(texts) / sizeof(texts[0]);
    char orig[512] = "";
    for (size_t i = 0; i < nt; i++)
        strcat(orig, texts[i]);
    for (uint64_t seed = 1; seed <= 40; seed++) {
        struct buf a;
        buf_init(&a, 1 << 16);
        /* role, nt content chunks, one for the held "Paris", finish, usage, [DONE] */
        assert_int_equal(hallu_run(seed, texts, nt, &a), 1 + nt + 1 + 3);
        check_words(orig, a.data);
        buf_release(&a);
    }
}

static void test_premature_length(void **state)
{
    struct up u;
    up_chat(&u, 20, true, NULL, 0);
    struct stream_tap *tap = tap_of(
        1, "{\"name\":\"p\",\"type\":\"llm_premature_length\",\"after_tokens\":5}", NULL, NULL);
    struct rec *r = ts_calloc(1, sizeof(*r));
    rec_init(r);
    run(tap, &u, MS, r);
    /* role, 5 tokens, finish length, usage, [DONE] */
    assert_int_equal(r->n_ev, 9);
    assert_int_equal(count_content(r), 5);
    struct openai_decoder d;
    struct openai_chunk c;
    openai_decoder_init(&d);
    assert_int_equal(openai_decode_chunk(&d, r->ev[6].data, r->ev[6].len, &c), 0);
    assert_true(c.flags & OPENAI_CHUNK_FINISH);
    assert_string_equal(c.choices[0].finish_reason, "length");
    assert_string_equal(c.id, "chatcmpl-x");
    assert_int_equal(r->ev[6].at, 5 * MS);
    assert_string_equal(r->ev[6].data,
                        "{\"id\":\"chatcmpl-x\",\"object\":\"chat.completion.chunk\","
                        "\"created\":1700000000,\"model\":\"m\",\"choices\":[{\"index\":0,"
                        "\"delta\":{},\"logprobs\":null,\"finish_reason\":\"length\"}]}");
    assert_int_equal(openai_decode_chunk(&d, r->ev[7].data, r->ev[7].len, &c), 0);
    assert_true(c.flags & OPENAI_CHUNK_USAGE);
    assert_int_equal(c.usage.prompt_tokens, 11);
    assert_int_equal(c.usage.completion_tokens, 5);
    assert_int_equal(c.usage.total_tokens, 16);
    assert_true(is_done_ev(&r->ev[8]));
    assert_int_equal(r->closes, 0);
    openai_decoder_release(&d);
    stream_tap_free(tap);
    rec_release(r);

    /* without usage upstream: no usage chunk */
    up_free(&u);
    up_chat(&u, 20, false, NULL, 0);
    tap = tap_of(1, "{\"name\":\"p\",\"type\":\"llm_premature_length\",\"after_tokens\":3}", NULL,
                 NULL);
    rec_init(r);
    run(tap, &u, MS, r);
    assert_int_equal(r->n_ev, 6);
    assert_int_equal(count_content(r), 3);
    assert_true(is_done_ev(&r->ev[5]));
    stream_tap_free(tap);
    rec_release(r);
    ts_free(r);
    up_free(&u);
}

static void test_format_violation(void **state)
{
    static const char *const texts[] = {"{\"", "a", "\":", " 1", ",", " \"b\"",
                                        ": [", "1", ",",   " 2", "]", "}"};
    size_t nt = sizeof(texts) / sizeof(texts[0]);
    struct up u;
    up_chat(&u, nt, true, texts, nt);
    struct stream_tap *tap =
        tap_of(1, "{\"name\":\"f\",\"type\":\"llm_format_violation\"}", NULL, NULL);
    struct rec *r = ts_calloc(1, sizeof(*r));
    rec_init(r);
    run(tap, &u, MS, r);
    struct buf a;
    buf_init(&a, 1 << 20);
    answer(r, &a);
    assert_string_equal(a.data, "{\"a\": 1, \"b\": [1, 2]");
    json_error_t je;
    assert_null(json_loads(a.data, 0, &je));
    /* the chunk that carried the last '}' is now empty */
    assert_int_equal(count_content(r), nt - 1);
    assert_true(any_done(r));
    stream_tap_free(tap);
    rec_release(r);
    up_free(&u);

    /* an answer without closers gets a stray quote */
    static const char *const t2[] = {"[1", ", 2"};
    up_chat(&u, 2, false, t2, 2);
    tap = tap_of(1, "{\"name\":\"f\",\"type\":\"llm_format_violation\"}", NULL, NULL);
    rec_init(r);
    run(tap, &u, MS, r);
    buf_reset(&a);
    answer(r, &a);
    assert_string_equal(a.data, "[1, 2\"");
    stream_tap_free(tap);
    rec_release(r);
    up_free(&u);

    /* rate 0: unchanged */
    up_chat(&u, nt, false, texts, nt);
    tap = tap_of(1, "{\"name\":\"f\",\"type\":\"llm_format_violation\",\"rate\":0}", NULL, NULL);
    rec_init(r);
    run(tap, &u, MS, r);
    buf_reset(&a);
    answer(r, &a);
    assert_string_equal(a.data, "{\"a\": 1, \"b\": [1, 2]}");
    stream_tap_free(tap);
    rec_release(r);
    ts_free(r);
    buf_release(&a);
    up_free(&u);
}

static void test_combined_order(void **state)
{
    /* many faults at once: times stay ordered, the stream stays parseable */
    struct up u;
    up_chat(&u, 300, true, NULL, 0);
    struct stream_tap *tap = tap_of(
        11, "{\"name\":\"a\",\"type\":\"sse_jitter\",\"delay\":\"exponential:5ms\"}",
        "{\"name\":\"b\",\"type\":\"sse_reorder\",\"count\":3,\"rate\":0.3}",
        "{\"name\":\"c\",\"type\":\"sse_split\",\"bytes\":13,\"delay\":\"uniform:0ms-2ms\"}");
    struct rec *r = ts_calloc(1, sizeof(*r));
    rec_init(r);
    run(tap, &u, MS, r);
    assert_int_equal(r->n_ev, u.n);
    assert_int_equal(count_content(r), 300);
    stream_tap_free(tap);
    rec_release(r);
    ts_free(r);
    up_free(&u);
}

/* ---- bodies: RAG and embeddings ---- */

static char *tap_body(const char *spec1, const char *spec2, const char *body, uint64_t *delay)
{
    struct stream_tap *tap = tap_of(5, spec1, spec2, NULL);
    struct buf out;
    buf_init(&out, 1 << 20);
    assert_int_equal(body_tap(tap, body, strlen(body), &out, delay), 0);
    stream_tap_free(tap);
    char *s = buf_take(&out, NULL);
    return s ? s : ts_strdup("");
}

static const char QDRANT[] =
    "{\"result\":[{\"id\":1,\"version\":3,\"score\":0.9,\"payload\":{\"text\":\"alpha\"}},"
    "{\"id\":2,\"version\":3,\"score\":0.8,\"payload\":{\"text\":\"beta\"}},"
    "{\"id\":3,\"version\":3,\"score\":0.75,\"payload\":{\"text\":\"gamma\"}},"
    "{\"id\":4,\"version\":3,\"score\":0.5,\"payload\":{\"text\":\"delta\"}}],"
    "\"status\":\"ok\",\"time\":0.0012}";

static void test_rag_qdrant(void **state)
{
    uint64_t delay = 1;
    char *s = tap_body("{\"name\":\"e\",\"type\":\"rag_empty\",\"pointer\":\"/result\"}", NULL,
                       QDRANT, &delay);
    assert_string_equal(s, "{\"result\":[],\"status\":\"ok\",\"time\":0.0012}");
    assert_int_equal(delay, 0);
    ts_free(s);

    s = tap_body("{\"name\":\"l\",\"type\":\"rag_lower_scores\",\"pointer\":\"/result\","
                 "\"factor\":0.5}",
                 "{\"name\":\"d\",\"type\":\"rag_latency\",\"delay\":\"300ms\"}", QDRANT, &delay);
    assert_int_equal(delay, 300 * MS);
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    assert_non_null(j);
    double expect[] = {0.45, 0.4, 0.375, 0.25};
    for (size_t i = 0; i < 4; i++) {
        json_t *sc = json_object_get(json_array_get(json_object_get(j, "result"), i), "score");
        assert_true(fabs(json_real_value(sc) - expect[i]) < 1e-12);
    }
    json_decref(j);
    assert_non_null(strstr(s, "\"time\":0.0012}")); /* other numbers as they were */
    ts_free(s);

    s = tap_body("{\"name\":\"s\",\"type\":\"rag_shuffle\",\"pointer\":\"/result\"}", NULL, QDRANT,
                 NULL);
    j = json_loads(s, 0, &je);
    assert_non_null(j);
    json_t *res = json_object_get(j, "result");
    assert_int_equal(json_array_size(res), 4);
    int ids = 0;
    bool moved = false;
    for (size_t i = 0; i < 4; i++) {
        json_int_t id = json_integer_value(json_object_get(json_array_get(res, i), "id"));
        ids |= 1 << id;
        moved |= id != (json_int_t)i + 1;
    }
    assert_int_equal(ids, 0x1e);
    assert_true(moved);
    json_decref(j);
    ts_free(s);

    s = tap_body("{\"name\":\"i\",\"type\":\"rag_irrelevant\",\"pointer\":\"/result\"}", NULL,
                 QDRANT, NULL);
    assert_null(strstr(s, "alpha"));
    assert_null(strstr(s, "gamma"));
    assert_non_null(strstr(s, "\"score\":0.9,"));
    ts_free(s);
    s = tap_body("{\"name\":\"i\",\"type\":\"rag_irrelevant\",\"pointer\":\"/result\","
                 "\"text\":\"nothing useful\"}",
                 NULL, QDRANT, NULL);
    j = json_loads(s, 0, &je);
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(
            json_string_value(json_pointer_get(json_array_get(json_object_get(j, "result"), i),
                                               "/payload/text", 13)),
            "nothing useful");
    json_decref(j);
    ts_free(s);

    /* a pointer that addresses nothing, and a body that is not JSON: unchanged */
    s = tap_body("{\"name\":\"e\",\"type\":\"rag_empty\",\"pointer\":\"/results\"}", NULL, QDRANT,
                 NULL);
    assert_string_equal(s, QDRANT);
    ts_free(s);
    s = tap_body("{\"name\":\"e\",\"type\":\"rag_empty\"}", NULL, "not json {", NULL);
    assert_string_equal(s, "not json {");
    ts_free(s);
}

static void test_rag_chroma_weaviate(void **state)
{
    static const char chroma[] =
        "{\"ids\":[[\"a\",\"b\",\"c\",\"d\",\"e\"]],"
        "\"documents\":[[\"doc a\",\"doc b\",\"doc c\",\"doc d\",\"doc e\"]],"
        "\"distances\":[[0.1,0.2,0.3,0.4,0.5]]}";
    char *s = tap_body("{\"name\":\"s\",\"type\":\"rag_shuffle\","
                       "\"pointer\":\"/ids/0,/documents/0,/distances/0\"}",
                       NULL, chroma, NULL);
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    assert_non_null(j);
    bool moved = false;
    for (size_t i = 0; i < 5; i++) {
        const char *id = json_string_value(json_array_get(json_pointer_get(j, "/ids/0", 6), i));
        const char *doc =
            json_string_value(json_array_get(json_pointer_get(j, "/documents/0", 12), i));
        double dist = json_real_value(json_array_get(json_pointer_get(j, "/distances/0", 12), i));
        assert_non_null(id);
        assert_non_null(doc);
        /* the parallel arrays stay aligned */
        assert_int_equal(doc[4], id[0]);
        assert_true(fabs(dist - 0.1 * (id[0] - 'a' + 1)) < 1e-12);
        moved |= id[0] != (char)('a' + i);
    }
    assert_true(moved);
    json_decref(j);
    ts_free(s);

    s = tap_body("{\"name\":\"e\",\"type\":\"rag_empty\","
                 "\"pointer\":\"/ids/0,/documents/0,/distances/0\"}",
                 NULL, chroma, NULL);
    assert_string_equal(s, "{\"ids\":[[]],\"documents\":[[]],\"distances\":[[]]}");
    ts_free(s);

    static const char weaviate[] =
        "{\"data\":{\"Get\":{\"Article\":[{\"content\":\"x\",\"_additional\":{\"certainty\":0.8}},"
        "{\"content\":\"y\",\"_additional\":{\"certainty\":0.6}}]}}}";
    s = tap_body("{\"name\":\"l\",\"type\":\"rag_lower_scores\",\"pointer\":\"/data/Get/Article\","
                 "\"field\":\"/_additional/certainty\",\"factor\":0.25}",
                 NULL, weaviate, NULL);
    assert_string_equal(s, "{\"data\":{\"Get\":{\"Article\":[{\"content\":\"x\",\"_additional\":"
                           "{\"certainty\":0.2}},{\"content\":\"y\",\"_additional\":"
                           "{\"certainty\":0.15}}]}}}");
    ts_free(s);
}

static void test_json_pointer(void **state)
{
    /* RFC 6901 section 5 */
    static const char doc[] = "{\"foo\":[\"bar\",\"baz\"],\"\":0,\"a/b\":1,\"c%d\":2,\"e^f\":3,"
                              "\"g|h\":4,\"i\\\\j\":5,\"k\\\"l\":6,\" \":7,\"m~n\":8}";
    json_error_t je;
    json_t *j = json_loads(doc, 0, &je);
    assert_non_null(j);
    static const struct {
        const char *p;
        int v;
    } cases[] = {{"/", 0},     {"/a~1b", 1}, {"/c%d", 2}, {"/e^f", 3}, {"/g|h", 4},
                 {"/i\\j", 5}, {"/k\"l", 6}, {"/ ", 7},   {"/m~0n", 8}};
    assert_ptr_equal(json_pointer_get(j, "", 0), j);
    assert_ptr_equal(json_pointer_get(j, "/foo", 4), json_object_get(j, "foo"));
    assert_string_equal(json_string_value(json_pointer_get(j, "/foo/0", 6)), "bar");
    assert_string_equal(json_string_value(json_pointer_get(j, "/foo/1", 6)), "baz");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *v = json_pointer_get(j, cases[i].p, strlen(cases[i].p));
        assert_non_null(v);
        assert_int_equal(json_integer_value(v), cases[i].v);
    }
    static const char *const bad[] = {"foo", "/foo/2", "/foo/01",  "/foo/-", "/m~2n",
                                      "/m~", "/nope",  "/foo/0/x", "/foo/+1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_null(json_pointer_get(j, bad[i], strlen(bad[i])));
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_passthrough),
        cmocka_unit_test(test_truncate_tokens),
        cmocka_unit_test(test_truncate_events_and_range),
        cmocka_unit_test(test_drop_done_and_finish),
        cmocka_unit_test(test_duplicate),
        cmocka_unit_test(test_reorder),
        cmocka_unit_test(test_malformed_and_utf8),
        cmocka_unit_test(test_error_event),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_ttft_and_stall),
        cmocka_unit_test(test_jitter),
        cmocka_unit_test(test_jitter_modes),
        cmocka_unit_test(test_parse_tiers),
        cmocka_unit_test(test_throttle),
        cmocka_unit_test(test_hallucinate_stream),
        cmocka_unit_test(test_hallucinate_split_words),
        cmocka_unit_test(test_premature_length),
        cmocka_unit_test(test_format_violation),
        cmocka_unit_test(test_combined_order),
        cmocka_unit_test(test_rag_qdrant),
        cmocka_unit_test(test_rag_chroma_weaviate),
        cmocka_unit_test(test_json_pointer),
    };
    return cmocka_run_group_tests_name("stream_tap", tests, NULL, NULL);
}
