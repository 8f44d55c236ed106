/*
 * test_report_text.c - the end-of-run summary and the SLO verdict table.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "report/text.h"

#define MS   1000000ull
#define BASE (1000000ull * MS)

/* Requests with TTFT i ms and E2EL 10 i ms (i = 1..10), 10 output tokens each. */
static struct run_stats *sample(void)
{
    struct run_stats *s = NULL;
    assert_int_equal(run_stats_new(&s), 0);
    for (uint64_t i = 1; i <= 10; i++) {
        struct req_record r;
        memset(&r, 0, sizeof(r));
        r.outcome = REQ_OK;
        r.http_status = 200;
        r.flags = REQF_STREAM;
        r.intended_ns = r.start_ns = BASE;
        r.first_chunk_ns = r.first_token_ns = BASE + i * MS;
        r.last_chunk_ns = r.end_ns = BASE + 10 * i * MS;
        r.prompt_tokens = 20;
        r.usage_prompt_tokens = -1;
        r.output_tokens = 10;
        r.choice_chunks = 10;
        r.token_source = TOKENS_TOKENIZER;
        run_stats_add_record(s, &r, NULL);
    }
    struct req_record r;
    memset(&r, 0, sizeof(r));
    r.intended_ns = r.start_ns = BASE;
    r.outcome = REQ_HTTP_429;
    r.http_status = 429;
    run_stats_add_record(s, &r, NULL);
    r.outcome = REQ_TIMEOUT_TTFB;
    r.http_status = 0;
    run_stats_add_record(s, &r, NULL);
    run_stats_add_record(s, &r, NULL);
    r.outcome = REQ_CUT;
    run_stats_add_record(s, &r, NULL);
    r.flags = REQF_WARMUP;
    run_stats_add_record(s, &r, NULL);
    return s;
}

/* Runs fn into memory and returns what it printed (free it). */
static char *capture_summary(const struct run_stats *s, const struct run_summary *sum)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(report_text_summary(f, s, sum), 0);
    assert_int_equal(fclose(f), 0);
    return text;
}

/* The line of text that starts with prefix (static copy), or fails. */
static const char *line_starting(const char *text, const char *prefix)
{
    static char line[512];
    for (const char *p = text; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (strncmp(p, prefix, strlen(prefix)) == 0) {
            assert_true(n < sizeof(line));
            memcpy(line, p, n);
            line[n] = '\0';
            return line;
        }
        p = nl ? nl + 1 : NULL;
    }
    fail_msg("no line starts with '%s' in:\n%s", prefix, text);
    return NULL;
}

/* The quality line: only what was measured, shares as percentages. */
static void test_quality_line(void **state)
{
    (void)state;
    struct run_stats *s = sample();
    struct run_summary sum;
    run_summary_compute(&sum, s, 2.0, 35, NULL);
    char *text = capture_summary(s, &sum);
    assert_null(strstr(text, "quality")); /* nothing measured: no line */
    free(text);
    s->quality.requests = 10;
    s->quality.with_ref = 8;
    s->quality.truncated = 1;
    sum.quality.rouge_l = 0.5;
    sum.quality.exact_match = 0.25;
    sum.quality.dual_sla = 0.95;
    text = capture_summary(s, &sum);
    assert_string_equal(line_starting(text, "quality"),
                        "quality       rouge_l 0.500, exact 25.0%, dual_sla 95.0% (10 answers "
                        "scored, 8 with a reference, 1 cut; means and shares, docs/QUALITY.md)");
    free(text);
    run_stats_free(s);
}

/* The legend: first token, TTFT and lag for streams; lag alone without. */
static void test_legend(void **state)
{
    (void)state;
    struct run_stats *s = sample();
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    s->streams = 1;
    report_text_legend(f, s);
    s->streams = 0;
    report_text_legend(f, s);
    fclose(f);
    assert_string_equal(buf, "(first token: to the first content, reasoning or tool-call token "
                             "users see (ttfc); TTFT (vLLM): to the first chunk with choices; lag: "
                             "how late requests were sent after their intended time, already in "
                             "every latency above; docs/METRICS.md)\n"
                             "(lag: how late requests were sent after their intended time, already "
                             "in every latency above; docs/METRICS.md)\n");
    free(buf);
    run_stats_free(s);
}

static void test_summary_text(void **state)
{
    struct run_stats *s = sample();
    struct run_summary sum;
    struct goodput_cfg cfg = {.ttft_ms = 5, .e2el_ms = 60};

    run_summary_compute(&sum, s, 2.0, 35, &cfg);
    sum.good = 5;
    sum.request_goodput = 2.5;
    char *text = capture_summary(s, &sum);

    assert_string_equal(
        line_starting(text, "requests"),
        "requests      14 sent: 10 ok, 3 failed (http_429 1, timeout_ttfb 2), 1 cut");
    assert_string_equal(line_starting(text, "warm-up"),
                        "warm-up       1 requests excluded from everything below");
    assert_string_equal(line_starting(text, "duration"), "duration      2.00 s");
    assert_string_equal(line_starting(text, "throughput"),
                        "throughput    5.00 req/s, output 50.00 tok/s (peak 35 tok/s), total "
                        "150.00 tok/s");
    assert_string_equal(line_starting(text, "goodput"),
                        "goodput       2.50 req/s, 5 good (ttft <= 5 ms, e2el <= 60 ms)");
    free(text);
    /* no peak known (a scenario's traffic class): none shown, never "peak 0" */
    run_summary_compute(&sum, s, 2.0, 0, &cfg);
    text = capture_summary(s, &sum);
    assert_string_equal(line_starting(text, "throughput"),
                        "throughput    5.00 req/s, output 50.00 tok/s, total 150.00 tok/s");
    free(text);
    run_summary_compute(&sum, s, 2.0, 35, &cfg);
    sum.good = 5;
    sum.request_goodput = 2.5;
    text = capture_summary(s, &sum);
    assert_string_equal(line_starting(text, "error rate"), "error rate    23.08%");
    assert_string_equal(line_starting(text, "tokens"),
                        "tokens        input 200, output 100 (counted by tokenizer; 0 usage "
                        "disagreements)");
    assert_string_equal(line_starting(text, "latency (ms)"),
                        "latency (ms)      mean       p50       p90       p95       p99     p99.9 "
                        "      max");
    assert_null(strstr(text, "latency below:")); /* a plain run: nothing to say */
    free(text);
    /* a flow's run: the table says what it counts, right above its header */
    sum.latency_scope = "every call of every flow step; each step apart below";
    text = capture_summary(s, &sum);
    const char *scope = strstr(text, "\nlatency below: every call of every flow step; each step "
                                     "apart below\nlatency (ms) ");
    assert_non_null(scope);
    sum.latency_scope = NULL;
    /*
     * TTFT 1..10 ms. Percentiles are the highest value of their histogram
     * bucket: 9000 us sits in [9000, 9007] and 10000 us in [10000, 10007]
     * (buckets 8 us wide above 8192 us), so p90 is 9.007 and max 10.007 ms.
     * The mean weighs bucket midpoints: 1000 + 2000 + 3001 + 4001 + 5002 +
     * 6002 + 7002 + 8002 + 9004 + 10004 = 55018 us / 10.
     */
    assert_string_equal(line_starting(text, "TTFT (vLLM)"),
                        "TTFT (vLLM)       5.50      5.00      9.01     10.01     10.01     10.01 "
                        "    10.01");
    /* E2EL 10..100 ms, 3 significant digits. */
    assert_non_null(strstr(line_starting(text, "E2EL"), "  55."));
    /* No ITL gaps were reported. */
    assert_string_equal(line_starting(text, "ITL"),
                        "ITL                  -         -         -         -         -         - "
                        "        -");
    /* TPOT = (10 i - i) / 9 ms = i ms. */
    assert_string_equal(line_starting(text, "TPOT"),
                        "TPOT              5.50      5.00      9.01     10.01     10.01     10.01 "
                        "    10.01");
    assert_non_null(line_starting(text, "first token"));
    assert_non_null(line_starting(text, "lag"));
    /* no reasoning: no first-answer row; first token and TTFT agree: no note */
    assert_null(strstr(text, "\nfirst answer"));
    assert_null(strstr(text, "after vLLM's TTFT"));
    /* Row order as documented: what users feel first. */
    assert_true(strstr(text, "\nfirst token") < strstr(text, "\nTTFT (vLLM)"));
    assert_true(strstr(text, "\nTTFT (vLLM)") < strstr(text, "\nITL"));
    assert_true(strstr(text, "\nITL") < strstr(text, "\nTPOT"));
    assert_true(strstr(text, "\nTPOT") < strstr(text, "\nE2EL"));
    assert_true(strstr(text, "\nE2EL") < strstr(text, "\nlag"));
    free(text);

    /* Without goodput there is no goodput line; without streams no streams line. */
    run_summary_compute(&sum, s, 2.0, 35, NULL);
    text = capture_summary(s, &sum);
    assert_null(strstr(text, "\ngoodput"));
    assert_non_null(strstr(text, "\nstreams       10 streamed: 0 without [DONE]"));
    free(text);
    run_stats_free(s);
}

/* A server that sends its role chunk at once and the first token 150 ms
 * later (llama.cpp): the console leads with the first token and says that
 * vLLM's TTFT is apart; a reasoning model's first answer gets its own row. */
static void test_first_token_apart(void **state)
{
    struct run_stats *s = NULL;
    assert_int_equal(run_stats_new(&s), 0);
    for (uint64_t i = 1; i <= 10; i++) {
        struct req_record r;
        memset(&r, 0, sizeof(r));
        r.outcome = REQ_OK;
        r.http_status = 200;
        r.flags = REQF_STREAM | REQF_REASONING;
        r.intended_ns = r.start_ns = BASE;
        r.first_chunk_ns = BASE + 2 * MS;
        r.first_token_ns = BASE + 150 * MS;
        r.first_answer_ns = BASE + 400 * MS;
        r.last_chunk_ns = r.end_ns = BASE + 500 * MS;
        r.output_tokens = 10;
        r.choice_chunks = 11;
        r.token_source = TOKENS_USAGE;
        run_stats_add_record(s, &r, NULL);
    }
    struct run_summary sum;
    run_summary_compute(&sum, s, 2.0, 0, NULL);
    double gap = 0;
    assert_true(run_summary_ttft_differs(&sum, &gap));
    assert_true(gap > 147 && gap < 149);
    char *text = capture_summary(s, &sum);
    assert_non_null(strstr(text, "\nnote          first token p50 150.0"));
    assert_non_null(strstr(text, "from vLLM's TTFT p50 2.00 ms"));
    assert_non_null(strstr(line_starting(text, "first token "), " 150.0"));
    assert_non_null(strstr(line_starting(text, "first answer"), " 400."));
    assert_true(strstr(text, "\nfirst token") < strstr(text, "\nTTFT (vLLM)"));
    free(text);
    run_stats_free(s);
    (void)state;
}

static void test_slo_table(void **state)
{
    struct run_stats *s = sample();
    struct run_summary sum;
    struct slo slos[3];
    char err[256];
    char *text = NULL;
    size_t len = 0, failed = 99;

    run_summary_compute(&sum, s, 2.0, 35, NULL);
    assert_int_equal(slo_parse("ttft.p95<11ms", &slos[0], err, sizeof(err)), 0);
    assert_int_equal(slo_parse("error_rate < 5%", &slos[1], err, sizeof(err)), 0);
    assert_int_equal(slo_parse("goodput>1/s", &slos[2], err, sizeof(err)), 0);

    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(report_text_slo(f, slos, 3, &sum, &failed), 0);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(failed, 2);
    assert_string_equal(text, "\n"
                              "SLO              actual         verdict\n"
                              "ttft.p95<11ms    10.01 ms       pass\n"
                              "error_rate < 5%  23.077%        FAIL\n"
                              "goodput>1/s      n/a            FAIL\n");
    free(text);

    /* No SLOs: nothing printed, nothing failed. */
    text = NULL;
    f = open_memstream(&text, &len);
    assert_int_equal(report_text_slo(f, NULL, 0, &sum, &failed), 0);
    assert_int_equal(fclose(f), 0);
    assert_string_equal(text, "");
    assert_int_equal(failed, 0);
    free(text);
    run_stats_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_summary_text), cmocka_unit_test(test_legend),
        cmocka_unit_test(test_quality_line), cmocka_unit_test(test_first_token_apart),
        cmocka_unit_test(test_slo_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
