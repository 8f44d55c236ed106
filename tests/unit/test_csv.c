/*
 * test_csv.c - the CSV exports: Locust's stats header and hand-computed rows
 * (E2EL and TTFT from HDR histograms of known values), the timeline and the
 * sweep tables, quoting.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "report/csv.h"
#include "report/result.h"

#define MS   1000000ull
#define BASE (1000000ull * MS)

/* 10 ok requests with TTFT i ms and E2EL 10 i ms (i = 1..10), 10 output tokens
 * each; 3 failed, 1 cut; measured over 10 s. */
static json_t *fixture(bool with_ok)
{
    struct run_stats *s = NULL;
    struct run_summary sum;
    json_t *doc = NULL;
    json_error_t je;

    assert_int_equal(run_stats_new(&s), 0);
    for (uint64_t i = 1; with_ok && i <= 10; i++) {
        struct req_record r;
        memset(&r, 0, sizeof(r));
        r.outcome = REQ_OK;
        r.http_status = 200;
        r.flags = REQF_STREAM;
        r.intended_ns = r.start_ns = BASE;
        r.first_chunk_ns = r.first_token_ns = BASE + i * MS;
        r.last_chunk_ns = r.end_ns = BASE + 10 * i * MS;
        r.usage_prompt_tokens = -1;
        r.output_tokens = 10;
        r.choice_chunks = 10;
        run_stats_add_record(s, &r, NULL);
    }
    struct req_record r;
    memset(&r, 0, sizeof(r));
    r.intended_ns = r.start_ns = BASE;
    r.outcome = REQ_HTTP_5XX;
    r.http_status = 503;
    for (int k = 0; k < 3; k++)
        run_stats_add_record(s, &r, NULL);
    r.outcome = REQ_CUT;
    run_stats_add_record(s, &r, NULL);
    run_summary_compute(&sum, s, 10.0, 100, NULL);
    json_t *tl = json_loads("[{\"t_s\":1.0,\"sent\":5,\"completed\":3,\"errors\":1,\"in_flight\":2,"
                            "\"output_tokens\":30,\"chunks\":31,\"ttft_p50_ms\":3.25,"
                            "\"ttft_p99_ms\":5,\"e2el_p50_ms\":30,\"lag_p99_ms\":0.125}]",
                            0, &je);
    assert_non_null(tl);
    struct result_info info = {.timeline = tl};
    assert_int_equal(result_build(s, &sum, &info, &doc), 0);
    json_decref(tl);
    run_stats_free(s);
    return doc;
}

static char *capture(int (*fn)(FILE *, const struct report_docset *, enum stat_metric),
                     const struct report_docset *set, enum stat_metric m)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(fn(f, set, m), 0);
    assert_int_equal(fclose(f), 0);
    return text;
}

static int timeline_fn(FILE *f, const struct report_docset *set, enum stat_metric m)
{
    (void)m;
    return report_csv_timeline(f, set);
}

static int sweep_fn(FILE *f, const struct report_docset *set, enum stat_metric m)
{
    (void)m;
    return report_csv_sweep(f, set);
}

static void add(struct report_docset *set, json_t *doc, const char *name)
{
    char err[256];
    assert_int_equal(
        report_docset_add_json(set, doc, name, "/r/result.json", NULL, err, sizeof(err)), 0);
    json_decref(doc);
}

static const char header[] =
    "Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,"
    "Min Response Time,Max Response Time,Average Content Size,Requests/s,Failures/s,"
    "50%,66%,75%,80%,90%,95%,98%,99%,99.9%,99.99%,100%\n";

static void test_stats(void **state)
{
    (void)state;
    struct report_docset set;
    report_docset_init(&set);
    add(&set, fixture(true), "run, \"one\"");
    add(&set, fixture(false), "no-ok");

    /*
     * E2EL 10..100 ms in microsecond HDR buckets (3 digits): 50000 us lies in
     * [49984, 50015] -> the median prints as 50.015; min 10000 is exact; max
     * 100000 lies in [99968, 100031]. Percentile ranks ceil(p/100 * 10): 66% ->
     * 7th (70000 in [69952, 70015]), 75% and 80% -> 8th ([80000, 80063]),
     * 90% -> 9th ([89984, 90047]), 95% and up -> 10th. The mean weighs bucket
     * midpoints: (10004 + 20008 + 30008 + 40016 + 50000 + 60016 + 69984 + 80032
     * + 90016 + 100000) / 10 = 55008.4 us. 13 finished requests (the cut one
     * is left out), 3 failed, in 10 s; 10 tokens per ok request.
     */
    char *csv = capture(report_csv_stats, &set, STAT_E2EL);
    const char *want_e2el =
        "POST,\"run, \"\"one\"\"\",13,3,50.015,55.008,10.000,100.031,10.00,1.3000,0.3000,"
        "50.015,70.015,80.063,80.063,90.047,100.031,100.031,100.031,100.031,100.031,100.031\n"
        "POST,no-ok,3,3,N/A,N/A,N/A,N/A,0.00,0.3000,0.3000,"
        "N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A\n";
    assert_true(!strncmp(csv, header, strlen(header)));
    assert_string_equal(csv + strlen(header), want_e2el);
    free(csv);

    /*
     * TTFT 1..10 ms: exact up to 2047 us, then buckets of 2 (3000 -> 3001),
     * 4 (5000 -> 5003) and 8 (9000 -> 9007, 10000 -> 10007) microseconds.
     * The mean weighs bucket midpoints (lowest + width / 2): 1000, 2000,
     * 3001, 4001, 5002, 6002, 7002, 8002, 9004, 10004 -> 5501.8 us.
     */
    csv = capture(report_csv_stats, &set, STAT_TTFT);
    const char *want_ttft = "POST,\"run, \"\"one\"\"\",13,3,5.003,5.502,1.000,10.007,10.00,1.3000,"
                            "0.3000,5.003,7.003,8.003,8.003,9.007,10.007,10.007,10.007,10.007,"
                            "10.007,10.007\n";
    assert_true(!strncmp(csv + strlen(header), want_ttft, strlen(want_ttft)));
    free(csv);

    csv = capture(timeline_fn, &set, 0);
    assert_string_equal(csv, "Name,t_s,sent,completed,errors,in_flight,output_tokens,chunks,"
                             "ttft_p50_ms,ttft_p99_ms,e2el_p50_ms,lag_p99_ms\n"
                             "\"run, \"\"one\"\"\",1.000,5,3,1,2,30,31,3.250,5.000,30.000,0.125\n"
                             "no-ok,1.000,5,3,1,2,30,31,3.250,5.000,30.000,0.125\n");
    free(csv);
    /* No sweep: just the header. */
    csv = capture(sweep_fn, &set, 0);
    assert_string_equal(csv, "Name,dir,load,offered,achieved_rps,output_tps,goodput_rps,"
                             "ttft_p50_ms,ttft_p99_ms,tpot_p50_ms,tpot_p99_ms,e2el_p50_ms,"
                             "e2el_p99_ms,error_rate,slo_pass,saturated,rouge_l_mean,bleu4_mean,"
                             "exact_match_rate\n");
    free(csv);
    report_docset_release(&set);
}

static void test_sweep(void **state)
{
    (void)state;
    struct report_docset set;
    json_error_t je;
    char err[256];
    json_t *doc = json_loads(
        "{\"schema\":\"tokenstorm.sweep/1\",\"mode\":\"rate\",\"steps\":["
        "{\"load\":2,\"dir\":\"step-01-rate-2\",\"offered\":2,\"achieved_rps\":1.5,"
        "\"output_tps\":150,\"goodput_rps\":null,\"ttft_p50_ms\":40,\"ttft_p99_ms\":90.5,"
        "\"tpot_p50_ms\":10,\"tpot_p99_ms\":12,\"e2el_p50_ms\":900,\"e2el_p99_ms\":1200,"
        "\"error_rate\":0.25,\"slo_pass\":false,\"saturated\":true,"
        "\"quality\":{\"rouge_l_mean\":0.5,\"bleu4_mean\":0.25,\"exact_match_rate\":0.125}},"
        "{\"load\":4}]}",
        0, &je);
    assert_non_null(doc);
    report_docset_init(&set);
    assert_int_equal(
        report_docset_add_json(&set, doc, "sw", "/s/sweep.json", NULL, err, sizeof(err)), 0);
    json_decref(doc);
    char *csv = capture(sweep_fn, &set, 0);
    const char *nl = strchr(csv, '\n');
    assert_non_null(nl);
    assert_string_equal(nl + 1,
                        "sw,step-01-rate-2,2.000000,2.000000,1.500000,150.000000,,40.000000,"
                        "90.500000,10.000000,12.000000,900.000000,1200.000000,0.250000,false,"
                        "true,0.500000,0.250000,0.125000\n"
                        "sw,,4.000000,,,,,,,,,,,,,,,,\n");
    free(csv);
    /* A sweep without step results has no stats rows. */
    csv = capture(report_csv_stats, &set, STAT_E2EL);
    assert_string_equal(csv, header);
    free(csv);
    report_docset_release(&set);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
