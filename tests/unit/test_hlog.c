/*
 * Tests of the .hlog interval log writer and reader. Known logs come from
 * HdrHistogram (Java) src/test/resources/org/HdrHistogram/:
 * tagged-non-monotonic.hlog (whole) and the first lines of
 * jHiccup-2.0.7S.logV2.hlog; both were written by the Java implementation,
 * whose Interval_Max column is max / 1e6 (nanoseconds to milliseconds).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/hdr.h"
#include "base/hlog.h"

static const char tagged_log[] =
    "#[Histogram log format version 1.2]\n"
    "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n"
    "Tag=A,2.133,1.001,0.426,HISTFAAAAD942pNpmSzMwMAgwwABTBDKT4GBgdnNYMcCBvsPEBE+Ph4OLgk5OSkeIS4+"
    "LgEeswIDo1+MbmdYNASYAA51CSo=\n"
    "Tag=A,3.134,1.001,0.426,HISTFAAAAD942pNpmSzMwMAgwwABTBDKT4GBgdnNYMcCBvsPEBExPiEpITEFGTkRKSEe"
    "OR6FkCg1hTeMXvNYlHhYABQ5CTo=\n"
    "Tag=B,0.127,1.007,2.769,HISTFAAAAEV42pNpmSzMwMCgyAABTBDKT4GBgdnNYMcCBvsPEBEJISEuATEZMQ4uASkh"
    "IR4nrxg9v2lMaxhvMekILGZkKmcCAEf2CsI=\n"
    "Tag=B,1.134,0.999,0.442,HISTFAAAAEJ42pNpmSzMwMAgxwABTBDKT4GBgdnNYMcCBvsPEBEWLj45FTExAT4pBSEB"
    "Ka6UkAgBi1uM7xjfMMlwMDABAC0CCjM=\n"
    "Tag=C,6.134,0.999,0.442,HISTFAAAAEF42pNpmSzMwMAgxwABTBDKT4GBgdnNYMcCBvsPEBEWIS4FITEhDiEJERE+"
    "GT6ZkhZGLbl7jEqrWHREmFgAIbAJMw==\n"
    "Tag=C,7.133,0.999,0.459,HISTFAAAAEJ42pNpmSzMwMCgwAABTBDKD8hndjPYsYDB/gNEhEtMQEBBTk5MQERCRkBE"
    "QEWlh9FJbg9jE+MS5ig1LhYmADkkCcE=\n";

static const char jhiccup_head[] =
    "#[Logged with jHiccup version 2.0.7-SNAPSHOT]\r\n"
    "#[Histogram log format version 1.2]\r\n"
    "#[StartTime: 1441753532.570 (seconds since epoch), Tue Sep 08 16:05:32 PDT 2015]\r\n"
    "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\r\n"
    "0.126,1.007,1.933,HISTFAAAAEB42pNpmSzMwMAgywABTBDKT4GBgdnNYMcCBvsPEBEjDT0FMTUxMT05LgEhPqmIeWx"
    "tTAKMTNxM6xmZmAAjcgjc\r\n"
    "1.133,1.000,0.377,HISTFAAAADx42pNpmSzMwMAgyQABTBDKT4GBgdnNYMcCBvsPEBEBDQUxCSkJMTEFOSExPhmbR6x"
    "fmPQ4GJmYAP4DCJg=\r\n";

/* A reader over a constant string; the FILE is returned for fclose. */
static FILE *open_text(const char *text)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    assert_non_null(f);
    return f;
}

static void test_reads_java_tagged_log(void **state)
{
    const char *tags[] = {"A", "A", "B", "B", "C", "C"};
    const double starts[] = {2.133, 3.134, 0.127, 1.134, 6.134, 7.133};
    const char *maxes[] = {"0.426", "0.426", "2.769", "0.442", "0.442", "0.459"};
    FILE *f = open_text(tagged_log);
    struct hlog_reader r;
    hlog_reader_init(&r, f, 0);
    struct hlog_entry e;
    for (int i = 0; i < 6; i++) {
        assert_int_equal(hlog_reader_next(&r, &e), 1);
        assert_string_equal(e.tag, tags[i]);
        assert_true(e.start == starts[i]);
        assert_non_null(e.hist);
        /* The Java writer's column is max / 1e6 with 3 decimals. */
        char max[32];
        snprintf(max, sizeof(max), "%.3f", (double)hdr_max(e.hist) / 1e6);
        assert_string_equal(max, maxes[i]);
        assert_true(hdr_total_count(e.hist) > 0);
        hdr_free(e.hist);
    }
    assert_int_equal(hlog_reader_next(&r, &e), 0);
    assert_null(e.hist);
    assert_int_equal(hlog_reader_next(&r, &e), 0);
    assert_int_equal(r.major, 1);
    assert_int_equal(r.minor, 2);
    assert_false(r.has_start_time);
    assert_int_equal(r.line_no, 8);
    hlog_reader_release(&r);
    fclose(f);
}

static void test_reads_jhiccup_header_crlf(void **state)
{
    FILE *f = open_text(jhiccup_head);
    struct hlog_reader r;
    hlog_reader_init(&r, f, 0);
    struct hlog_entry e;
    assert_int_equal(hlog_reader_next(&r, &e), 1);
    assert_true(r.has_start_time);
    assert_true(r.start_time == 1441753532.570);
    assert_false(r.has_base_time);
    assert_string_equal(e.tag, "");
    assert_true(e.start == 0.126);
    assert_true(e.length == 1.007);
    assert_true(e.max == 1.933);
    assert_int_equal(hdr_total_count(e.hist), 802); /* see test_hdr.c */
    hdr_free(e.hist);
    assert_int_equal(hlog_reader_next(&r, &e), 1);
    assert_true(e.start == 1.133);
    hdr_free(e.hist);
    assert_int_equal(hlog_reader_next(&r, &e), 0);
    hlog_reader_release(&r);
    fclose(f);
}

/* Fills h with n pseudo-random latencies in microseconds. */
static void fill(struct hdr *h, uint64_t seed, int n, int64_t range)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        assert_int_equal(hdr_record(h, (int64_t)((seed >> 11) % (uint64_t)range)), 0);
    }
}

static void test_write_then_read(void **state)
{
    char *text = NULL;
    size_t text_len = 0;
    FILE *out = open_memstream(&text, &text_len);
    assert_non_null(out);
    struct hlog_writer w;
    hlog_writer_init(&w, out, HLOG_RATIO_US_TO_MS);
    assert_int_equal(hlog_write_header(&w, "tokenstorm test", 1441753532.570, 1441753532.0), 0);

    const char *tags[] = {"ttft", "itl", "e2el", NULL};
    struct hdr *written[8] = {0};
    for (int i = 0; i < 8; i++) {
        assert_int_equal(hdr_new_latency(&written[i]), 0);
        fill(written[i], (uint64_t)i + 1, 1000 * (i + 1), INT64_C(1) << (10 + 2 * i));
        assert_int_equal(hlog_write_interval(&w, tags[i % 4], 0.5 + i, 1.0, written[i]), 0);
    }
    assert_int_equal(fclose(out), 0);

    /* The header and the first line as the format wants them. */
    const char *expect_head =
        "#[tokenstorm test]\n"
        "#[Histogram log format version 1.3]\n"
        "#[StartTime: 1441753532.570 (seconds since epoch), Tue Sep 08 23:05:32 UTC 2015]\n"
        "#[BaseTime: 1441753532.000 (seconds since epoch)]\n"
        "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_"
        "Histogram\"\n"
        "Tag=ttft,0.500,1.000,";
    assert_memory_equal(text, expect_head, strlen(expect_head));
    char first_max[32];
    snprintf(first_max, sizeof(first_max), "%.3f,HIST", (double)hdr_max(written[0]) / 1000.0);
    assert_memory_equal(text + strlen(expect_head), first_max, strlen(first_max));
    assert_non_null(strstr(text, "\n3.500,1.000,"));

    FILE *in = fmemopen(text, text_len, "r");
    assert_non_null(in);
    struct hlog_reader r;
    hlog_reader_init(&r, in, 0);
    struct hlog_entry e;
    for (int i = 0; i < 8; i++) {
        assert_int_equal(hlog_reader_next(&r, &e), 1);
        assert_string_equal(e.tag, tags[i % 4] ? tags[i % 4] : "");
        assert_true(e.start == 0.5 + i);
        assert_true(e.length == 1.0);
        assert_true(e.max * 1000.0 - (double)hdr_max(written[i]) < 1.0);
        assert_true(hdr_equal(e.hist, written[i]));
        hdr_free(e.hist);
    }
    assert_int_equal(hlog_reader_next(&r, &e), 0);
    assert_int_equal(r.major, 1);
    assert_int_equal(r.minor, 3);
    assert_true(r.has_start_time && r.start_time == 1441753532.570);
    assert_true(r.has_base_time && r.base_time == 1441753532.0);
    hlog_reader_release(&r);
    fclose(in);
    for (int i = 0; i < 8; i++)
        hdr_free(written[i]);
    free(text);
}

static void test_merge_per_tag(void **state)
{
    /* Intervals of one tag, merged as they are read, equal one histogram of
     * everything recorded under that tag. */
    char *text = NULL;
    size_t text_len = 0;
    FILE *out = open_memstream(&text, &text_len);
    assert_non_null(out);
    struct hlog_writer w;
    hlog_writer_init(&w, out, 0);
    assert_int_equal(hlog_write_header(&w, NULL, -1, -1), 0);
    struct hdr *all_ttft = NULL, *interval = NULL, *merged = NULL;
    assert_int_equal(hdr_new_latency(&all_ttft), 0);
    assert_int_equal(hdr_new_latency(&interval), 0);
    for (int i = 0; i < 5; i++) {
        hdr_reset(interval);
        fill(interval, 100 + (uint64_t)i, 5000, 2000000);
        assert_int_equal(hdr_add(all_ttft, interval), 0);
        assert_int_equal(hlog_write_interval(&w, "ttft", i, 1, interval), 0);
        hdr_reset(interval);
        fill(interval, 200 + (uint64_t)i, 700, 50000);
        assert_int_equal(hlog_write_interval(&w, "itl", i, 1, interval), 0);
    }
    assert_int_equal(fclose(out), 0);
    assert_null(strstr(text, "#[StartTime")); /* not asked for */

    FILE *in = fmemopen(text, text_len, "r");
    assert_non_null(in);
    struct hlog_reader r;
    hlog_reader_init(&r, in, 0);
    assert_int_equal(hdr_new_latency(&merged), 0);
    struct hlog_entry e;
    int n = 0, rc;
    while ((rc = hlog_reader_next(&r, &e)) == 1) {
        if (strcmp(e.tag, "ttft") == 0)
            assert_int_equal(hdr_add(merged, e.hist), 0);
        hdr_free(e.hist);
        n++;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(n, 10);
    assert_true(hdr_equal(merged, all_ttft));
    assert_int_equal(hdr_value_at_percentile(merged, 99.0),
                     hdr_value_at_percentile(all_ttft, 99.0));
    hlog_reader_release(&r);
    fclose(in);
    hdr_free(merged);
    hdr_free(interval);
    hdr_free(all_ttft);
    free(text);
}

static void test_writer_rejects(void **state)
{
    char *text = NULL;
    size_t text_len = 0;
    FILE *out = open_memstream(&text, &text_len);
    assert_non_null(out);
    struct hlog_writer w;
    hlog_writer_init(&w, out, 1000.0);
    struct hdr *h = NULL;
    assert_int_equal(hdr_new_latency(&h), 0);
    assert_int_equal(hlog_write_header(&w, "two\nlines", -1, -1), -EINVAL);
    assert_int_equal(hlog_write_header(&w, "bracket]", -1, -1), -EINVAL);
    assert_int_equal(hlog_write_header(&w, NULL, 1e300, -1), -EINVAL);
    assert_int_equal(hlog_write_header(&w, NULL, -1, NAN), -EINVAL);
    assert_int_equal(hlog_write_interval(&w, "a,b", 0, 1, h), -EINVAL);
    assert_int_equal(hlog_write_interval(&w, "a b", 0, 1, h), -EINVAL);
    assert_int_equal(hlog_write_interval(&w, "x\n", 0, 1, h), -EINVAL);
    char long_tag[HLOG_TAG_MAX + 2];
    memset(long_tag, 't', sizeof(long_tag) - 1);
    long_tag[sizeof(long_tag) - 1] = '\0';
    assert_int_equal(hlog_write_interval(&w, long_tag, 0, 1, h), -EINVAL);
    long_tag[HLOG_TAG_MAX] = '\0';
    assert_true(hlog_tag_valid(long_tag));
    assert_int_equal(hlog_write_interval(&w, "ok", -1, 1, h), -EINVAL);
    assert_int_equal(hlog_write_interval(&w, "ok", 0, INFINITY, h), -EINVAL);
    assert_int_equal(fflush(out), 0);
    assert_int_equal(text_len, 0);                             /* nothing was written */
    assert_int_equal(hlog_write_interval(&w, "", 0, 1, h), 0); /* "" is no tag */
    assert_int_equal(fclose(out), 0);
    /* The empty 1 us .. 1 h histogram, as computed independently with Python zlib. */
    assert_string_equal(text,
                        "0.000,1.000,0.000,HISTFAAAAB942pNpmSzMwMDAyAABzFAazL82eQmD/QeoAABVhASJ\n");
    free(text);
    hdr_free(h);
}

/* Reads text to the first error and checks its code and message. */
static void assert_read_error(const char *text, size_t max_line, int code, const char *msg)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    assert_non_null(f);
    struct hlog_reader r;
    hlog_reader_init(&r, f, max_line);
    struct hlog_entry e;
    int rc;
    while ((rc = hlog_reader_next(&r, &e)) == 1)
        hdr_free(e.hist);
    assert_int_equal(rc, code);
    assert_null(e.hist);
    if (strncmp(r.err, msg, strlen(msg)) != 0)
        fail_msg("error \"%s\" does not start with \"%s\"", r.err, msg);
    /* Errors are final. */
    assert_int_equal(hlog_reader_next(&r, &e), code);
    hlog_reader_release(&r);
    fclose(f);
}

#define GOOD_HIST "HISTFAAAAB942pNpmSzMwMDAyAABzFAazL82eQmD/QeoAABVhASJ"

static void test_reader_errors(void **state)
{
    assert_read_error("#[Histogram log format version 1.04]\n", 0, TS_PARSE,
                      "line 1: unsupported log format version 1.4");
    assert_read_error("#[Histogram log format version 2.0]\n", 0, TS_PARSE,
                      "line 1: unsupported log format version 2.0");
    assert_read_error("#[Histogram log format version x]\n", 0, TS_PARSE,
                      "line 1: malformed version line");
    assert_read_error("#[StartTime: soon]\n", 0, TS_PARSE, "line 1: malformed StartTime");
    assert_read_error("#[BaseTime: -5 (seconds since epoch)]\n", 0, TS_PARSE,
                      "line 1: malformed BaseTime");
    assert_read_error("# c\n\"Nope\"\n", 0, TS_PARSE, "line 2: unknown legend line");
    assert_read_error("0.1,1.0,2.0," GOOD_HIST "\n0.1,1.0," GOOD_HIST "\n", 0, TS_PARSE,
                      "line 2: malformed interval");
    assert_read_error("\n\n-1.0,1.0,2.0," GOOD_HIST "\n", 0, TS_PARSE,
                      "line 3: malformed interval");
    assert_read_error("0.1,nan,2.0," GOOD_HIST "\n", 0, TS_PARSE, "line 1: malformed interval");
    assert_read_error("0.1,1e999,2.0," GOOD_HIST "\n", 0, TS_PARSE, "line 1: malformed interval");
    assert_read_error("0.1, 1.0,2.0," GOOD_HIST "\n", 0, TS_PARSE, "line 1: malformed interval");
    assert_read_error("0.1,1.0,2.0,HISTFAAAABx42pNp\n", 0, TS_PARSE, "line 1: bad histogram");
    assert_read_error("0.1,1.0,2.0,\n", 0, TS_PARSE, "line 1: bad histogram");
    assert_read_error("0.1,1.0,2.0," GOOD_HIST ",extra\n", 0, TS_PARSE, "line 1: bad histogram");
    assert_read_error("Tag=,0.1,1.0,2.0," GOOD_HIST "\n", 0, TS_PARSE, "line 1: bad tag");
    assert_read_error("Tag=a b,0.1,1.0,2.0," GOOD_HIST "\n", 0, TS_PARSE, "line 1: bad tag");
    assert_read_error("Tag=abc\n", 0, TS_PARSE, "line 1: bad tag");
    assert_read_error("# ok\n0.1,1.0,2.0," GOOD_HIST "\n", 40, TS_TOOBIG,
                      "line 2: line longer than 40 bytes");
    static const char with_nul[] = "# a\n0.1,1.0\0,2.0\n";
    FILE *f = fmemopen((void *)with_nul, sizeof(with_nul) - 1, "r");
    assert_non_null(f);
    struct hlog_reader r;
    hlog_reader_init(&r, f, 0);
    struct hlog_entry e;
    assert_int_equal(hlog_reader_next(&r, &e), TS_PARSE);
    assert_string_equal(r.err, "line 2: NUL byte in line");
    hlog_reader_release(&r);
    fclose(f);

    /* Empty input and a header-only log end cleanly. */
    f = fmemopen((void *)"", 0, "r");
    assert_non_null(f);
    hlog_reader_init(&r, f, 0);
    assert_int_equal(hlog_reader_next(&r, &e), 0);
    hlog_reader_release(&r);
    fclose(f);
    f = open_text("#[Histogram log format version 1.3]\n");
    hlog_reader_init(&r, f, 0);
    assert_int_equal(hlog_reader_next(&r, &e), 0);
    assert_int_equal(r.minor, 3);
    hlog_reader_release(&r);
    fclose(f);

    /* A last line without '\n' still counts. */
    f = open_text("0.1,1.0,2.0," GOOD_HIST);
    hlog_reader_init(&r, f, 0);
    assert_int_equal(hlog_reader_next(&r, &e), 1);
    assert_true(e.start == 0.1);
    hdr_free(e.hist);
    assert_int_equal(hlog_reader_next(&r, &e), 0);
    hlog_reader_release(&r);
    fclose(f);
}

static void test_reader_allocation_failures(void **state)
{
    int ok = 0;
    for (long k = 0; k < 40; k++) {
        FILE *f = open_text(tagged_log);
        struct hlog_reader r;
        hlog_reader_init(&r, f, 0);
        struct hlog_entry e;
        ts_alloc_fail_after(k);
        int rc, n = 0;
        while ((rc = hlog_reader_next(&r, &e)) == 1) {
            hdr_free(e.hist);
            n++;
        }
        ts_alloc_fail_after(-1);
        if (rc == 0) {
            assert_int_equal(n, 6);
            ok++;
        } else {
            assert_int_equal(rc, -ENOMEM);
            assert_non_null(strstr(r.err, "out of memory"));
        }
        hlog_reader_release(&r);
        fclose(f);
    }
    assert_true(ok > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_java_tagged_log),
        cmocka_unit_test(test_reads_jhiccup_header_crlf),
        cmocka_unit_test(test_write_then_read),
        cmocka_unit_test(test_merge_per_tag),
        cmocka_unit_test(test_writer_rejects),
        cmocka_unit_test(test_reader_errors),
        cmocka_unit_test(test_reader_allocation_failures),
    };
    return cmocka_run_group_tests_name("hlog", tests, NULL, NULL);
}
