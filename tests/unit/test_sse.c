#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "net/sse.h"

/* Every event and comment is written into a log, one line each, with data
 * escaped, so whole runs can be compared as strings. */
struct rec {
    struct buf log;
    int n_events;
    int n_comments;
    uint64_t last_arrival;
    int fail_at; /* return -77 from the callback of this event number (1-based) */
};

static void log_escaped(struct buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n')
            assert_int_equal(buf_append_str(b, "\\n"), 0);
        else if (c == '\r')
            assert_int_equal(buf_append_str(b, "\\r"), 0);
        else if (c < 0x20 || c >= 0x7f)
            assert_int_equal(buf_appendf(b, "\\x%02x", c), 0);
        else
            assert_int_equal(buf_append_char(b, (char)c), 0);
    }
}

static int on_event(void *ctx, const struct sse_event *ev)
{
    struct rec *r = ctx;
    r->n_events++;
    assert_int_equal(ev->type[ev->type_len], 0);
    assert_int_equal(strlen(ev->id), ev->id_len);
    assert_int_equal(ev->data[ev->data_len], '\0');
    assert_int_equal(buf_append_str(&r->log, "E type="), 0);
    log_escaped(&r->log, ev->type, ev->type_len);
    assert_int_equal(buf_append_str(&r->log, " id="), 0);
    log_escaped(&r->log, ev->id, ev->id_len);
    if (ev->retry_ms >= 0)
        assert_int_equal(buf_appendf(&r->log, " retry=%lld", (long long)ev->retry_ms), 0);
    assert_int_equal(buf_append_str(&r->log, " data="), 0);
    log_escaped(&r->log, ev->data, ev->data_len);
    assert_int_equal(buf_append_char(&r->log, '\n'), 0);
    r->last_arrival = ev->arrival_ns;
    if (r->fail_at && r->n_events == r->fail_at)
        return -77;
    return 0;
}

static int on_comment(void *ctx, const char *text, size_t len, uint64_t now_ns)
{
    struct rec *r = ctx;
    r->n_comments++;
    assert_int_equal(buf_append_str(&r->log, "C "), 0);
    log_escaped(&r->log, text, len);
    assert_int_equal(buf_append_char(&r->log, '\n'), 0);
    return 0;
}

static void rec_init(struct rec *r)
{
    memset(r, 0, sizeof(*r));
    buf_init(&r->log, 1 << 24);
}

/* Every test runs twice: with sse_parser_feed and with
 * sse_parser_feed_inplace over a heap copy of the bytes, freed right after
 * the feed (ASan: nothing may point into it afterwards). */
static bool inplace;

static int feed(struct sse_parser *p, const char *s, size_t n, uint64_t now)
{
    if (!inplace)
        return sse_parser_feed(p, s, n, now);
    char *copy = malloc(n ? n : 1);
    assert_non_null(copy);
    memcpy(copy, s, n);
    int rc = sse_parser_feed_inplace(p, copy, n, now);
    free(copy);
    return rc;
}

static int group_copy(void **state)
{
    (void)state;
    inplace = false;
    return 0;
}

static int group_inplace(void **state)
{
    (void)state;
    inplace = true;
    return 0;
}

/* Parses s fed in pieces: splits[] are cut points (ascending), then finishes.
 * Returns the first error of feed (or 0) and the log in r. */
static int run_split(struct rec *r, const char *s, size_t n, const size_t *cuts, size_t ncuts,
                     size_t max, bool comments, size_t *discarded)
{
    struct sse_parser p;
    sse_parser_init(&p, max, on_event, r);
    if (comments)
        sse_parser_set_comment_cb(&p, on_comment);
    size_t pos = 0;
    int err = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t next = i < ncuts ? cuts[i] : n;
        int rc = feed(&p, s + pos, next - pos, 1000 + i);
        if (rc && !err)
            err = rc;
        if (err)
            assert_int_equal(rc, err); /* sticky */
        pos = next;
    }
    size_t d;
    int frc = sse_parser_finish(&p, &d);
    assert_int_equal(frc, err);
    if (discarded)
        *discarded = d;
    sse_parser_release(&p);
    return err;
}

static int run_whole(struct rec *r, const char *s, size_t n, size_t *discarded)
{
    return run_split(r, s, n, NULL, 0, 0, true, discarded);
}

#define RUN(r, lit, d) run_whole(r, lit, sizeof(lit) - 1, d)

static void test_spec_stock_example(void **state)
{
    static const char s[] = "data: YHOO\ndata: +2\ndata: 10\n\n";
    struct rec r;
    rec_init(&r);
    size_t d;
    assert_int_equal(RUN(&r, s, &d), 0);
    assert_string_equal(buf_cstr(&r.log), "E type=message id= data=YHOO\\n+2\\n10\n");
    assert_int_equal(d, 0);
    buf_release(&r.log);
}

static void test_spec_first_second_third(void **state)
{
    static const char s[] = ": test stream\n"
                            "\n"
                            "data: first event\n"
                            "id: 1\n"
                            "\n"
                            "data:second event\n"
                            "id\n"
                            "\n"
                            "data:  third event\n"
                            "\n";
    struct rec r;
    rec_init(&r);
    assert_int_equal(RUN(&r, s, NULL), 0);
    assert_string_equal(buf_cstr(&r.log), "C  test stream\n"
                                          "E type=message id=1 data=first event\n"
                                          "E type=message id= data=second event\n"
                                          "E type=message id= data= third event\n");
    buf_release(&r.log);

    /* the end of the stream is not enough to dispatch the last event */
    rec_init(&r);
    size_t d = 0;
    assert_int_equal(run_whole(&r, s, sizeof(s) - 2, &d), 0);
    assert_int_equal(r.n_events, 2);
    assert_int_equal(d, strlen(" third event\n"));
    buf_release(&r.log);
}

static void test_spec_data_only_lines(void **state)
{
    static const char s[] = "data\n"
                            "\n"
                            "data\n"
                            "data\n"
                            "\n"
                            "data:";
    struct rec r;
    rec_init(&r);
    size_t d;
    assert_int_equal(RUN(&r, s, &d), 0);
    assert_string_equal(buf_cstr(&r.log), "E type=message id= data=\n"
                                          "E type=message id= data=\\n\n");
    assert_int_equal(d, 5); /* "data:" was never terminated */
    buf_release(&r.log);
}

static void test_spec_space_after_colon(void **state)
{
    static const char s[] = "data:test\n\ndata: test\n\ndata:  two\n\n";
    struct rec r;
    rec_init(&r);
    assert_int_equal(RUN(&r, s, NULL), 0);
    assert_string_equal(buf_cstr(&r.log), "E type=message id= data=test\n"
                                          "E type=message id= data=test\n"
                                          "E type=message id= data= two\n");
    buf_release(&r.log);
}

static void test_spec_event_types(void **state)
{
    static const char s[] = "event: add\ndata: 73857293\n\n"
                            "event: remove\ndata: 2153\n\n"
                            "event: add\ndata: 113411\n\n"
                            "data: plain\n\n"
                            "event\ndata: reset\n\n";
    struct rec r;
    rec_init(&r);
    assert_int_equal(RUN(&r, s, NULL), 0);
    assert_string_equal(buf_cstr(&r.log), "E type=add id= data=73857293\n"
                                          "E type=remove id= data=2153\n"
                                          "E type=add id= data=113411\n"
                                          "E type=message id= data=plain\n"
                                          "E type=message id= data=reset\n");
    buf_release(&r.log);
}

static void test_line_endings(void **state)
{
    static const char *const variants[] = {
        "event: e\ndata: a\ndata: b\n\ndata: c\n\n",
        "event: e\r\ndata: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n",
        "event: e\rdata: a\rdata: b\r\rdata: c\r\r",
        "event: e\r\ndata: a\rdata: b\n\r\ndata: c\r\r\n",
    };
    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
        struct rec r;
        rec_init(&r);
        assert_int_equal(run_whole(&r, variants[i], strlen(variants[i]), NULL), 0);
        assert_string_equal(buf_cstr(&r.log), "E type=e id= data=a\\nb\n"
                                              "E type=message id= data=c\n");
        buf_release(&r.log);
    }
}

/* A CR ending one feed and an LF starting the next are one line end. */
static void test_crlf_split_across_feeds(void **state)
{
    static const char s[] = "data: a\r\ndata: b\r\n\r\n";
    struct rec r;
    rec_init(&r);
    size_t cut = 8; /* right after the first CR */
    assert_int_equal(s[cut - 1], '\r');
    assert_int_equal(run_split(&r, s, sizeof(s) - 1, &cut, 1, 0, false, NULL), 0);
    assert_string_equal(buf_cstr(&r.log), "E type=message id= data=a\\nb\n");
    buf_release(&r.log);

    /* but CR, CR is two line ends even across feeds */
    static const char s2[] = "data: a\r\rdata: b\r\r";
    rec_init(&r);
    assert_int_equal(run_split(&r, s2, sizeof(s2) - 1, &cut, 1, 0, false, NULL), 0);
    assert_string_equal(buf_cstr(&r.log), "E type=message id= data=a\n"
                                          "E type=message id= data=b\n");
    buf_release(&r.log);
}

static const char mixed_stream[] = "\xEF\xBB\xBF: hello\r\n"
                                   "retry: 2500\n"
                                   "id: 42\n"
                                   "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\r\n"
                                   "\r\n"
                                   "event: ping\r"
                                   "data\r"
                                   "\r"
                                   ":keep-alive\n"
                                   "bogus: field\n"
                                   "data:a:b:c\n"
                                   "data: \xEF\xBB\xBF\n"
                                   "id: x\x00y\n"
                                   "\n"
                                   "id\n"
                                   "data: [DONE]\r\n"
                                   "data: 2\n"
                                   "\n"
                                   "data: tail";

static const char mixed_expected[] =
    "C  hello\n"
    "E type=message id=42 retry=2500 data={\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n"
    "E type=ping id=42 data=\n"
    "C keep-alive\n"
    "E type=message id=42 data=a:b:c\\n\\xef\\xbb\\xbf\n"
    "E type=message id= data=[DONE]\\n2\n";

static void test_mixed_whole(void **state)
{
    struct rec r;
    rec_init(&r);
    size_t d;
    assert_int_equal(run_whole(&r, mixed_stream, sizeof(mixed_stream) - 1, &d), 0);
    assert_string_equal(buf_cstr(&r.log), mixed_expected);
    assert_int_equal(d, strlen("data: tail"));
    buf_release(&r.log);
}

static void test_every_split_point(void **state)
{
    size_t n = sizeof(mixed_stream) - 1;
    for (size_t cut = 0; cut <= n; cut++) {
        struct rec r;
        rec_init(&r);
        size_t d;
        assert_int_equal(run_split(&r, mixed_stream, n, &cut, 1, 0, true, &d), 0);
        assert_string_equal(buf_cstr(&r.log), mixed_expected);
        assert_int_equal(d, strlen("data: tail"));
        buf_release(&r.log);
    }
    /* every pair of cut points */
    for (size_t a = 0; a <= n; a += 3) {
        for (size_t b = a; b <= n; b += 5) {
            size_t cuts[2] = {a, b};
            struct rec r;
            rec_init(&r);
            assert_int_equal(run_split(&r, mixed_stream, n, cuts, 2, 0, true, NULL), 0);
            assert_string_equal(buf_cstr(&r.log), mixed_expected);
            buf_release(&r.log);
        }
    }
}

static void test_single_bytes(void **state)
{
    size_t n = sizeof(mixed_stream) - 1;
    size_t *cuts = malloc(n * sizeof(*cuts));
    assert_non_null(cuts);
    for (size_t i = 0; i < n; i++)
        cuts[i] = i;
    struct rec r;
    rec_init(&r);
    assert_int_equal(run_split(&r, mixed_stream, n, cuts, n, 0, true, NULL), 0);
    assert_string_equal(buf_cstr(&r.log), mixed_expected);
    free(cuts);
    buf_release(&r.log);
}

static void test_bom_only_at_start(void **state)
{
    struct rec r;
    size_t d;

    rec_init(&r);
    assert_int_equal(RUN(&r,
                         "\xEF\xBB\xBF"
                         "data: x\n\n",
                         NULL),
                     0);
    assert_string_equal(buf_cstr(&r.log), "E type=message id= data=x\n");
    buf_release(&r.log);

    /* a second BOM is part of the first line's field name: ignored field */
    rec_init(&r);
    assert_int_equal(RUN(&r,
                         "\xEF\xBB\xBF\xEF\xBB\xBF"
                         "data: x\n\ndata: y\n\n",
                         NULL),
                     0);
    assert_string_equal(buf_cstr(&r.log), "E type=message id= data=y\n");
    buf_release(&r.log);

    /* a BOM after the first event is content too */
    rec_init(&r);
    assert_int_equal(RUN(&r,
                         "data: a\n\n\xEF\xBB\xBF"
                         "data: b\n\n",
                         NULL),
                     0);
    assert_string_equal(buf_cstr(&r.log), "E type=message id= data=a\n");
    buf_release(&r.log);

    /* a partial BOM is content: counted among the discarded bytes */
    rec_init(&r);
    assert_int_equal(RUN(&r,
                         "\xEF\xBB"
                         "ab",
                         &d),
                     0);
    assert_int_equal(d, 4);
    buf_release(&r.log);
    rec_init(&r);
    assert_int_equal(RUN(&r,
                         "\xEF\xBB\xBF"
                         "ab",
                         &d),
                     0);
    assert_int_equal(d, 2);
    buf_release(&r.log);
    rec_init(&r);
    assert_int_equal(RUN(&r, "\xEF", &d), 0);
    assert_int_equal(d, 1);
    buf_release(&r.log);

    /* a BOM split over three feeds is still skipped */
    static const char s[] = "\xEF\xBB\xBF"
                            "data: z\n\n";
    size_t cuts[2] = {1, 2};
    rec_init(&r);
    assert_int_equal(run_split(&r, s, sizeof(s) - 1, cuts, 2, 0, false, NULL), 0);
    assert_string_equal(buf_cstr(&r.log), "E type=message id= data=z\n");
    buf_release(&r.log);
}

static void test_ids_and_retry(void **state)
{
    static const char s[] = "id: 1\n\n"               /* no data: no event, id committed */
                            "data: a\n\n"             /* carries id 1 */
                            "id: 2\x00x\ndata: b\n\n" /* NUL: ignored */
                            "retry: 15x\nretry:\nretry: 0300\ndata: c\n\n"
                            "data: d\n\n" /* retry is per block */
                            "retry: 99999999999999999999999\ndata: e\n\n"
                            "id:\ndata: f\n\n"; /* empty id resets */
    struct rec r;
    rec_init(&r);
    struct sse_parser p;
    sse_parser_init(&p, 0, on_event, &r);
    assert_int_equal(feed(&p, s, 7, 1), 0);
    assert_int_equal(r.n_events, 0);
    assert_string_equal(sse_parser_last_event_id(&p), "1");
    assert_int_equal(feed(&p, s + 7, sizeof(s) - 1 - 7, 2), 0);
    assert_string_equal(buf_cstr(&r.log), "E type=message id=1 data=a\n"
                                          "E type=message id=1 data=b\n"
                                          "E type=message id=1 retry=300 data=c\n"
                                          "E type=message id=1 data=d\n"
                                          "E type=message id=1 retry=9223372036854775807 data=e\n"
                                          "E type=message id= data=f\n");
    assert_int_equal(sse_parser_retry_ms(&p), INT64_MAX);
    assert_string_equal(sse_parser_last_event_id(&p), "");

    /* the id of an unterminated block is not committed; after finish the
     * new stream starts from the committed id */
    assert_int_equal(feed(&p, "id: 7\n\nid: 8\ndata: x\n", 21, 3), 0);
    assert_string_equal(sse_parser_last_event_id(&p), "7");
    assert_int_equal(sse_parser_finish(&p, NULL), 0);
    buf_reset(&r.log);
    assert_int_equal(feed(&p, "data: y\n\n", 9, 4), 0);
    assert_string_equal(buf_cstr(&r.log), "E type=message id=7 data=y\n");
    sse_parser_release(&p);
    buf_release(&r.log);
}

static void test_not_dispatched_without_data(void **state)
{
    struct rec r;
    rec_init(&r);
    size_t d;
    assert_int_equal(RUN(&r, "event: foo\n\nunknown: 1\n\n: c\n\nevent: bar\ndata: x\n\n", &d), 0);
    assert_string_equal(buf_cstr(&r.log), "C  c\nE type=bar id= data=x\n");
    assert_int_equal(d, 0);
    buf_release(&r.log);

    /* trailing comment or id-only block is a clean end */
    rec_init(&r);
    assert_int_equal(RUN(&r, "data: x\n\n: bye\nid: 3\n", &d), 0);
    assert_int_equal(d, 0);
    buf_release(&r.log);
    rec_init(&r);
    assert_int_equal(RUN(&r, "data: abc\n", &d), 0);
    assert_int_equal(d, 4);
    buf_release(&r.log);
    rec_init(&r);
    assert_int_equal(RUN(&r, "event: e\n", &d), 0);
    assert_int_equal(d, 1);
    buf_release(&r.log);
}

static void test_arrival_time(void **state)
{
    struct rec r;
    rec_init(&r);
    struct sse_parser p;
    sse_parser_init(&p, 0, on_event, &r);
    assert_int_equal(feed(&p, "data: a\n", 8, 100), 0);
    assert_int_equal(r.n_events, 0);
    assert_int_equal(feed(&p, "\ndata: b\n\r", 10, 200), 0);
    assert_int_equal(r.n_events, 2);
    assert_int_equal(r.last_arrival, 200);
    /* the LF after the CR belongs to the same line end: no new event */
    assert_int_equal(feed(&p, "\ndata: c\n", 9, 300), 0);
    assert_int_equal(r.n_events, 2);
    assert_int_equal(feed(&p, "\n", 1, 400), 0);
    assert_int_equal(r.n_events, 3);
    assert_int_equal(r.last_arrival, 400);
    assert_string_equal(buf_cstr(&r.log), "E type=message id= data=a\n"
                                          "E type=message id= data=b\n"
                                          "E type=message id= data=c\n");
    sse_parser_release(&p);
    buf_release(&r.log);
}

static void test_cap(void **state)
{
    struct rec r;
    struct sse_parser p;

    /* exactly at the cap: a 16-byte line with an empty event */
    rec_init(&r);
    sse_parser_init(&p, 16, on_event, &r);
    assert_int_equal(feed(&p, "data: 0123456789\n\n", 18, 1), 0);
    assert_string_equal(buf_cstr(&r.log), "E type=message id= data=0123456789\n");
    /* 17 bytes: too big */
    assert_int_equal(feed(&p, "data: 01234567890\n", 18, 2), TS_TOOBIG);
    assert_int_equal(feed(&p, "data: x\n\n", 9, 3), TS_TOOBIG);
    assert_int_equal(r.n_events, 1);
    assert_int_equal(sse_parser_finish(&p, NULL), TS_TOOBIG);
    /* a new stream after finish works */
    assert_int_equal(feed(&p, "data: y\n\n", 9, 4), 0);
    assert_int_equal(r.n_events, 2);
    /* data accumulated over lines counts: 8 + 8 = 16 fits, then + 9 does not */
    assert_int_equal(feed(&p, "data: 0123456\ndata: 01\n", 23, 5), 0);
    assert_int_equal(feed(&p, "data: 012\n", 10, 6), TS_TOOBIG);
    assert_int_equal(r.n_events, 2);
    assert_int_equal(sse_parser_finish(&p, NULL), TS_TOOBIG);
    sse_parser_release(&p);
    buf_release(&r.log);

    /* the same outcome byte by byte, and the event type counts too */
    static const char s[] = "data: a\n\nevent: 0123456789\ndata: 01234\n\n";
    size_t n = sizeof(s) - 1;
    size_t cuts[64];
    for (size_t i = 0; i < n; i++)
        cuts[i] = i;
    rec_init(&r);
    assert_int_equal(run_split(&r, s, n, NULL, 0, 20, false, NULL), TS_TOOBIG);
    assert_string_equal(buf_cstr(&r.log), "E type=message id= data=a\n");
    buf_release(&r.log);
    rec_init(&r);
    assert_int_equal(run_split(&r, s, n, cuts, n, 20, false, NULL), TS_TOOBIG);
    assert_string_equal(buf_cstr(&r.log), "E type=message id= data=a\n");
    buf_release(&r.log);
    rec_init(&r);
    assert_int_equal(run_split(&r, s, n, cuts, n, 21, false, NULL), 0);
    assert_int_equal(r.n_events, 2);
    buf_release(&r.log);
}

static void test_huge_event(void **state)
{
    size_t big = 3u << 20;
    char *s = malloc(big + 16);
    assert_non_null(s);
    memcpy(s, "data: ", 6);
    memset(s + 6, 'x', big);
    memcpy(s + 6 + big, "\n\n", 2);
    struct rec r;
    rec_init(&r);
    /* default cap 1 MiB: whole, and in 4 KiB reads */
    assert_int_equal(run_split(&r, s, big + 8, NULL, 0, 0, false, NULL), TS_TOOBIG);
    size_t cuts[1000];
    size_t nc = 0;
    for (size_t c = 4096; c < big + 8 && nc < 1000; c += 4096)
        cuts[nc++] = c;
    assert_int_equal(run_split(&r, s, big + 8, cuts, nc, 0, false, NULL), TS_TOOBIG);
    assert_int_equal(r.n_events, 0);
    /* a 4 MiB cap takes it, in pieces */
    assert_int_equal(run_split(&r, s, big + 8, cuts, nc, 4u << 20, false, NULL), 0);
    assert_int_equal(r.n_events, 1);
    free(s);
    buf_release(&r.log);
}

static void test_callback_abort(void **state)
{
    struct rec r;
    rec_init(&r);
    r.fail_at = 2;
    struct sse_parser p;
    sse_parser_init(&p, 0, on_event, &r);
    assert_int_equal(feed(&p, "data: 1\n\ndata: 2\n\ndata: 3\n\n", 27, 1), -77);
    assert_int_equal(r.n_events, 2);
    assert_int_equal(feed(&p, "data: 4\n\n", 9, 2), -77);
    assert_int_equal(r.n_events, 2);
    assert_int_equal(sse_parser_finish(&p, NULL), -77);
    sse_parser_release(&p);
    buf_release(&r.log);
}

static void test_alloc_failure(void **state)
{
    struct rec r;
    rec_init(&r);
    struct sse_parser p;
    sse_parser_init(&p, 0, on_event, &r);
    ts_alloc_fail_after(0);
    /* two data lines: in place, too, the second needs the data buffer */
    int rc = feed(&p, "data: 1\ndata: 2\n\n", 17, 1);
    ts_alloc_fail_after(-1);
    assert_int_equal(rc, -ENOMEM);
    assert_int_equal(feed(&p, "data: 1\n\n", 9, 1), -ENOMEM);
    assert_int_equal(sse_parser_finish(&p, NULL), -ENOMEM);
    assert_int_equal(feed(&p, "data: 1\n\n", 9, 1), 0);
    assert_int_equal(r.n_events, 1);
    sse_parser_release(&p);
    buf_release(&r.log);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Random bytes drawn mostly from SSE-relevant ones: whole and split runs
 * must agree exactly. */
static void test_garbage(void **state)
{
    static const char alphabet[] = "data:event:id:retry: \n\r\n\r:123\xEF\xBB\xBF\0x";
    char s[600];
    for (int iter = 0; iter < 300; iter++) {
        size_t n = rng_next() % sizeof(s);
        for (size_t i = 0; i < n; i++)
            s[i] = (iter & 1) ? (char)rng_next() : alphabet[rng_next() % (sizeof(alphabet) - 1)];
        size_t cap = (iter % 3 == 0) ? 64 : 0;
        struct rec whole, split;
        rec_init(&whole);
        rec_init(&split);
        size_t dw, ds;
        int rw = run_split(&whole, s, n, NULL, 0, cap, true, &dw);
        size_t cuts[8];
        size_t nc = n ? 1 + rng_next() % 7 : 0;
        for (size_t i = 0; i < nc; i++)
            cuts[i] = rng_next() % (n + 1);
        for (size_t i = 1; i < nc; i++) /* insertion sort */
            for (size_t j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
                size_t t = cuts[j];
                cuts[j] = cuts[j - 1];
                cuts[j - 1] = t;
            }
        int rs = run_split(&split, s, n, cuts, nc, cap, true, &ds);
        assert_int_equal(rw, rs);
        assert_string_equal(buf_cstr(&whole.log), buf_cstr(&split.log));
        if (!rw)
            assert_int_equal(dw, ds);
        buf_release(&whole.log);
        buf_release(&split.log);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_stock_example),
        cmocka_unit_test(test_spec_first_second_third),
        cmocka_unit_test(test_spec_data_only_lines),
        cmocka_unit_test(test_spec_space_after_colon),
        cmocka_unit_test(test_spec_event_types),
        cmocka_unit_test(test_line_endings),
        cmocka_unit_test(test_crlf_split_across_feeds),
        cmocka_unit_test(test_mixed_whole),
        cmocka_unit_test(test_every_split_point),
        cmocka_unit_test(test_single_bytes),
        cmocka_unit_test(test_bom_only_at_start),
        cmocka_unit_test(test_ids_and_retry),
        cmocka_unit_test(test_not_dispatched_without_data),
        cmocka_unit_test(test_arrival_time),
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_huge_event),
        cmocka_unit_test(test_callback_abort),
        cmocka_unit_test(test_alloc_failure),
        cmocka_unit_test(test_garbage),
    };
    int failed = cmocka_run_group_tests_name("sse", tests, group_copy, NULL);
    return failed + cmocka_run_group_tests_name("sse in place", tests, group_inplace, NULL);
}
