/*
 * test_html.c - the HTML report page and its inputs: a result.json made with
 * the analysis and report APIs (plus the optional sections other parts add)
 * gives a page with every section and chart; several runs are compared;
 * sweeps get their curves; names are escaped; the page asks for nothing from
 * the network; the docset finds and checks files and directories.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "report/docset.h"
#include "report/html.h"
#include "report/html_groups.h"
#include "report/result.h"

#define MS       1000000ull
#define BASE     (1000000ull * MS)
#define PAGE_CAP (64u << 20)

/* 10 ok requests (TTFT i ms, E2EL 10 i ms, 10 tokens), a 429, two TTFB timeouts, one cut. */
static struct run_stats *fixture_stats(void)
{
    struct run_stats *s = NULL;
    assert_int_equal(run_stats_new(&s), 0);
    for (uint64_t i = 1; i <= 10; i++) {
        struct req_record r;
        memset(&r, 0, sizeof(r));
        r.id = i;
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
        for (int k = 0; k < 9; k++)
            run_stats_add_itl(s, (i + (uint64_t)k) * MS);
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
    return s;
}

static json_t *load_json(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    if (!j)
        fail_msg("fixture JSON: %s at %d:%d", je.text, je.line, je.column);
    return j;
}

/* A complete result document, with the optional sections of other parts. */
static json_t *fixture_result(bool extras)
{
    struct run_stats *s = fixture_stats();
    struct run_summary sum;
    struct slo slos[2];
    char err[256];
    json_t *doc = NULL;

    run_summary_compute(&sum, s, 10.0, 500, NULL);
    assert_int_equal(slo_parse("ttft.p99<5ms", &slos[0], err, sizeof(err)), 0);
    assert_int_equal(slo_parse("error_rate<50%", &slos[1], err, sizeof(err)), 0);
    json_t *tl = load_json(
        "[{\"t_s\":1.0,\"sent\":5,\"completed\":3,\"errors\":1,\"in_flight\":2,\"output_tokens\":"
        "30,"
        "\"chunks\":30,\"ttft_p50_ms\":3.0,\"ttft_p99_ms\":5.0,\"e2el_p50_ms\":30,\"lag_p99_ms\":0."
        "1},"
        "{\"t_s\":2.0,\"sent\":5,\"completed\":4,\"errors\":2,\"in_flight\":1,\"output_tokens\":40,"
        "\"chunks\":40,\"ttft_p50_ms\":6.0,\"ttft_p99_ms\":9.0,\"e2el_p50_ms\":60,\"lag_p99_ms\":0."
        "1},"
        "{\"t_s\":3.0,\"sent\":4,\"completed\":3,\"errors\":0,\"in_flight\":0,\"output_tokens\":30,"
        "\"chunks\":30,\"ttft_p50_ms\":0,\"ttft_p99_ms\":0,\"e2el_p50_ms\":0,\"lag_p99_ms\":0}]");
    json_t *cfg = load_json("{\"target\":\"http://127.0.0.1:9/v1/chat/completions\",\"model\":"
                            "\"m\",\"mode\":\"open\",\"rate\":5,\"arrival\":\"poisson\"}");
    struct result_info info = {
        .config = cfg, .slos = slos, .nslos = 2, .timeline = tl, .started_wall_ns = BASE};
    assert_int_equal(result_build(s, &sum, &info, &doc), 0);
    json_decref(tl);
    json_decref(cfg);
    run_stats_free(s);
    if (!extras)
        return doc;
    static const char *const sections[][2] = {
        {"faults", "[{\"name\":\"kill-gpu\",\"start_s\":1.2,\"end_s\":2.1}]"},
        {"server_timeline",
         "[{\"t_s\":1,\"running\":4,\"waiting\":2,\"kv_usage\":0.4,\"preemptions\":0,"
         "\"ttft_p50_ms\":2.5},{\"t_s\":2,\"running\":6,\"waiting\":5,\"kv_usage\":0.9,"
         "\"preemptions\":1,\"ttft_p50_ms\":5.5}]"},
        {"itl_by_position",
         "[{\"from\":0,\"to\":15,\"count\":40,\"mean_ms\":5,\"p50_ms\":5,\"p90_ms\":8,"
         "\"p99_ms\":9},{\"from\":16,\"to\":31,\"count\":30,\"mean_ms\":6,\"p50_ms\":6,"
         "\"p90_ms\":9,\"p99_ms\":12},{\"from\":32,\"to\":null,\"count\":20,\"mean_ms\":7,"
         "\"p50_ms\":7,\"p90_ms\":11,\"p99_ms\":30}]"},
        {"quality", "{\"requests\":10,\"rouge_l\":{\"mean\":0.61,\"p50\":0.6},"
                    "\"exact_match_rate\":0.3,\"dual_sla\":null}"},
        {"by_tenant", "{\"gold\":{\"completed\":6,\"error_rate\":0.0,\"ttft_p99_ms\":4.5},"
                      "\"free<tier>\":{\"completed\":4,\"error_rate\":0.25,\"ttft_p99_ms\":9.9}}"},
        {"by_flow_step", "{\"login\":{\"completed\":5,\"e2el_p99_ms\":80}}"},
    };
    for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++)
        assert_int_equal(json_object_set_new(doc, sections[i][0], load_json(sections[i][1])), 0);
    return doc;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* No script, no stylesheet or image from anywhere, every link in the page. */
static void assert_offline(const char *page)
{
    assert_null(strstr(page, "<script"));
    assert_null(strstr(page, "<link"));
    assert_null(strstr(page, "@import"));
    assert_null(strstr(page, " src="));
    assert_null(strstr(page, "url(http"));
    for (const char *p = strstr(page, "href=\""); p; p = strstr(p + 1, "href=\""))
        assert_true(p[6] == '#');
    for (const char *p = strstr(page, "url("); p; p = strstr(p + 1, "url("))
        assert_true(p[4] == '#');
}

static char *build_page(const struct report_docset *set)
{
    struct buf b;
    struct report_html_opts o = {.title = "test report", .generated = "now"};
    buf_init(&b, PAGE_CAP);
    assert_int_equal(report_html_build(set, &o, &b), 0);
    const char *dump = getenv("TS_TEST_HTML_DUMP"); /* look at the page: a directory */
    if (dump) {
        static int n;
        char path[512];
        snprintf(path, sizeof(path), "%s/page-%d.html", dump, ++n);
        FILE *f = fopen(path, "w");
        if (f) {
            fputs(buf_cstr(&b), f);
            fclose(f);
        }
    }
    return buf_take(&b, NULL);
}

static void add_doc(struct report_docset *set, json_t *doc, const char *name)
{
    char err[512];
    int rc =
        report_docset_add_json(set, doc, name, "/results/x/result.json", NULL, err, sizeof(err));
    if (rc)
        fail_msg("add_json: %s", err);
    json_decref(doc);
}

static void test_page_sections(void **state)
{
    (void)state;
    struct report_docset set;
    report_docset_init(&set);
    add_doc(&set, fixture_result(true), "fixture-run");
    assert_int_equal(set.docs[0].sum.completed, 10);
    assert_int_equal(set.docs[0].sum.failed, 3);
    char *page = build_page(&set);

    assert_true(!strncmp(page, "<!DOCTYPE html>", 15));
    assert_non_null(strstr(page, "</html>"));
    assert_non_null(strstr(page, "<title>test report - fixture-run</title>"));
    assert_offline(page);
    /* Sections. */
    static const char *const ids[] = {
        "id=\"overview\"",           "id=\"distributions\"",          "id=\"run1\"",
        "id=\"dist-ttft-cdf\"",      "id=\"dist-ttft-spectrum\"",     "id=\"dist-itl-cdf\"",
        "id=\"dist-itl-spectrum\"",  "id=\"dist-e2el-cdf\"",          "id=\"dist-e2el-spectrum\"",
        "id=\"run1-timeline-rate\"", "id=\"run1-timeline-inflight\"", "id=\"run1-timeline-tokens\"",
        "id=\"run1-timeline-ttft\"", "id=\"run1-timeline-server\"",   "id=\"run1-timeline-kv\"",
        "id=\"run1-itl-position\"",  "id=\"run1-by_tenant\"",         "id=\"run1-by_flow_step\"",
    };
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
        if (!strstr(page, ids[i]))
            fail_msg("the page has no %s", ids[i]);
    assert_int_equal(count(page, "<svg class=\"ts-chart"), 16); /* 13 and the three of lengths */
    assert_int_equal(count(page, "<svg class=\"ts-chart ts-heatmap\""), 1);
    /* Headline cards and tables. */
    assert_non_null(strstr(page, "<div class=\"k\">requests</div><div class=\"v\">14</div>"));
    assert_non_null(strstr(page, "10 ok, 3 failed, 1 cut"));
    assert_non_null(strstr(page, "<div class=\"k\">SLOs passed</div><div class=\"v\">1 / 2</div>"));
    assert_non_null(
        strstr(page, "<td>ttft.p99&lt;5ms</td><td>10.01 ms</td><td class=\"fail\">FAIL"));
    assert_non_null(strstr(page, "<td>error_rate&lt;50%</td>"));
    assert_non_null(strstr(page, "<td class=\"pass\">pass</td>"));
    /* Latency table: E2EL p50 of 10..100 ms is 50 ms (HDR bucket top 50.015). */
    assert_non_null(strstr(page, "<tr><td>E2EL</td><td>10</td>"));
    assert_non_null(strstr(page, "<td>50.0</td>"));
    /* Outcomes by class. */
    assert_non_null(strstr(page, "<td>http_429</td><td class=\"l\">HTTP error</td><td>1</td>"));
    assert_non_null(strstr(page, "<td>timeout_ttfb</td><td class=\"l\">timeout</td><td>2</td>"));
    /* Timeline: fault band and its name, the rate (5 sent in the first second). */
    assert_non_null(strstr(page, "class=\"band\""));
    assert_non_null(strstr(page, ">kill-gpu</text>"));
    assert_non_null(strstr(page, ">fault window</text>"));
    assert_non_null(strstr(page, ">offered (sent)</text>"));
    assert_non_null(strstr(page, ">server p50</text>"));
    assert_non_null(strstr(page, ">KV cache used (%)</text>"));
    /* Heatmap: an open last bucket, the colour scale title. */
    assert_non_null(strstr(page, ">32+</text>"));
    assert_non_null(strstr(page, ">ITL (ms)</text>"));
    /* Quality, groups (escaped), configuration. */
    assert_non_null(strstr(page, "Answer quality"));
    assert_non_null(strstr(page, "<td>rouge_l.mean</td><td class=\"l\">0.61</td>"));
    assert_non_null(
        strstr(page, "<td>free&lt;tier&gt;</td><td>4</td><td>25.00%</td><td>9.90</td>"));
    assert_null(strstr(page, "free<tier>"));
    assert_non_null(strstr(page, "Run configuration"));
    /* What was run and TPOT have cards of their own; ITL is explained, and a
     * run with failures says ITL counts them while TTFT does not. */
    assert_non_null(strstr(page, "<div class=\"k\">configuration</div>"));
    assert_non_null(strstr(page, "<div class=\"k\">TPOT p50</div>"));
    assert_non_null(strstr(page, "<p class=\"note itl\">"));
    assert_non_null(strstr(page, "failed and cut ones included"));
    /* lengths and latency, from the sample of successful requests */
    assert_non_null(strstr(page, "id=\"run1-lengths\""));
    assert_non_null(strstr(page, "id=\"run1-ttft-input\""));
    assert_non_null(strstr(page, "id=\"run1-e2el-output\""));
    assert_non_null(strstr(page, "A uniform sample of 10 successful requests (of 10)"));
    /* Axis titles carry units. */
    assert_non_null(strstr(page, ">TTFT (ms)</text>"));
    assert_non_null(strstr(page, ">time (s)</text>"));
    assert_non_null(strstr(page, ">requests/s</text>"));
    assert_non_null(strstr(page, ">99%</text>"));
    ts_free(page);
    report_docset_release(&set);
}

static void test_page_minimal_result(void **state)
{
    (void)state;
    struct report_docset set;
    report_docset_init(&set);
    add_doc(&set, fixture_result(false), "plain");
    char *page = build_page(&set);
    assert_offline(page);
    assert_null(strstr(page, "run1-timeline-server"));
    assert_null(strstr(page, "run1-itl-position\""));
    assert_null(strstr(page, "class=\"band\""));
    assert_null(strstr(page, "Answer quality"));
    assert_non_null(strstr(page, "id=\"run1-timeline-rate\""));
    /* An empty histogram (no TTFB measured) still makes valid charts. */
    assert_int_equal(count(page, "<svg"), count(page, "</svg>"));
    ts_free(page);
    report_docset_release(&set);
}

static void test_page_several_runs(void **state)
{
    (void)state;
    struct report_docset set;
    report_docset_init(&set);
    add_doc(&set, fixture_result(false), "baseline");
    add_doc(&set, fixture_result(true), "<new&run>");
    add_doc(&set, fixture_result(false), "baseline");
    assert_int_equal(set.n, 3);
    assert_string_equal(set.docs[2].name, "baseline#2");
    char *page = build_page(&set);
    assert_offline(page);
    assert_non_null(strstr(page, "id=\"runs-table\""));
    assert_null(strstr(page, "<new&run>"));
    assert_non_null(strstr(page, "&lt;new&amp;run&gt;"));
    /* Each distribution chart overlays the three runs, named in its legend. */
    const char *cdf = strstr(page, "id=\"dist-e2el-cdf\"");
    assert_non_null(cdf);
    const char *end = strstr(cdf, "</svg>");
    size_t len = (size_t)(end - cdf);
    char *one = ts_strndup(cdf, len);
    assert_non_null(strstr(one, ">baseline</text>"));
    assert_non_null(strstr(one, ">&lt;new&amp;run&gt;</text>"));
    assert_non_null(strstr(one, ">baseline#2</text>"));
    assert_int_equal(count(one, "<path fill=\"none\""), 3);
    ts_free(one);
    assert_non_null(strstr(page, "id=\"run3-timeline-rate\""));
    assert_int_equal(count(page, "<svg class=\"ts-chart"), 6 + 4 + 7 + 4 + 3 * 3); /* + lengths */
    ts_free(page);
    report_docset_release(&set);
}

static const char sweep_json[] =
    "{\"schema\":\"tokenstorm.sweep/1\",\"mode\":\"rate\",\"target\":\"sim\","
    "\"slo\":[\"ttft.p99<500ms\",\"error_rate<1%\"],\"steps\":["
    "{\"load\":2,\"dir\":\"step-01-rate-2\",\"offered\":2,\"achieved_rps\":2,\"output_tps\":200,"
    "\"goodput_rps\":2,\"ttft_p50_ms\":40,\"ttft_p99_ms\":90,\"tpot_p50_ms\":10,"
    "\"tpot_p99_ms\":12,\"e2el_p50_ms\":900,\"e2el_p99_ms\":1200,\"error_rate\":0,"
    "\"slo_pass\":true,\"saturated\":false,\"quality\":{\"rouge_l_mean\":0.7,\"bleu4_mean\":0.4,"
    "\"exact_match_rate\":0.2}},"
    "{\"load\":4,\"dir\":\"step-02-rate-4\",\"offered\":4,\"achieved_rps\":4,\"output_tps\":400,"
    "\"goodput_rps\":4,\"ttft_p50_ms\":45,\"ttft_p99_ms\":120,\"tpot_p50_ms\":11,"
    "\"tpot_p99_ms\":14,\"e2el_p50_ms\":950,\"e2el_p99_ms\":1300,\"error_rate\":0.001,"
    "\"slo_pass\":true,\"saturated\":false,\"quality\":{\"rouge_l_mean\":0.69,\"bleu4_mean\":0.4,"
    "\"exact_match_rate\":0.2}},"
    "{\"load\":8,\"dir\":\"step-03-rate-8\",\"offered\":8,\"achieved_rps\":7.9,"
    "\"output_tps\":790,\"goodput_rps\":6,\"ttft_p50_ms\":80,\"ttft_p99_ms\":400,"
    "\"tpot_p50_ms\":15,\"tpot_p99_ms\":25,\"e2el_p50_ms\":1500,\"e2el_p99_ms\":2500,"
    "\"error_rate\":0.01,\"slo_pass\":false,\"saturated\":false,\"quality\":null},"
    "{\"load\":16,\"dir\":\"step-04-rate-16\",\"offered\":16,\"achieved_rps\":10,"
    "\"output_tps\":1000,\"goodput_rps\":null,\"ttft_p50_ms\":900,\"ttft_p99_ms\":3000,"
    "\"tpot_p50_ms\":40,\"tpot_p99_ms\":90,\"e2el_p50_ms\":6000,\"e2el_p99_ms\":9000,"
    "\"error_rate\":0.2,\"slo_pass\":false,\"saturated\":true,\"quality\":{\"rouge_l_mean\":0.5,"
    "\"bleu4_mean\":0.2,\"exact_match_rate\":0.1}}],"
    "\"knee\":{\"load\":8,\"throughput\":7.9,\"latency_ms\":400,\"metric\":\"ttft_p99_ms\","
    "\"method\":\"max-curvature\"},"
    "\"max_goodput\":{\"load\":4,\"goodput_rps\":4,\"bracket\":[4,8]},"
    "\"critical_load\":{\"lambda_c\":9.5,\"epsilon0\":0.01,\"delta_lambda\":2.3,\"r2\":0.97,"
    "\"points\":3},"
    "\"interference\":[{\"victim\":\"chat\",\"aggressor\":\"batch\",\"p99_alone_ms\":100,"
    "\"p99_with_ms\":150,\"delta\":0.5}]}";

static void test_page_sweep(void **state)
{
    (void)state;
    struct report_docset set;
    char err[512];
    report_docset_init(&set);
    json_t *doc = load_json(sweep_json);
    assert_int_equal(
        report_docset_add_json(&set, doc, "sw", "/x/sweep.json", NULL, err, sizeof(err)), 0);
    json_decref(doc);
    assert_int_equal(set.docs[0].kind, REPORT_DOC_SWEEP);
    assert_int_equal(set.docs[0].nsteps, 4);
    assert_null(set.docs[0].steps[0].doc); /* no directory: no step results */
    char *page = build_page(&set);
    assert_offline(page);
    static const char *const ids[] = {
        "id=\"sweep1\"",
        "id=\"sweep1-latency-throughput\"",
        "id=\"sweep1-latency-load\"",
        "id=\"sweep1-throughput\"",
        "id=\"sweep1-errors\"",
        "id=\"sweep1-quality\"",
    };
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
        if (!strstr(page, ids[i]))
            fail_msg("the page has no %s", ids[i]);
    assert_null(strstr(page, "sweep1-ttft-cdf"));
    assert_null(strstr(page, "id=\"distributions\""));
    assert_int_equal(count(page, "<svg class=\"ts-chart"), 5);
    /* The knee as a marker, the SLO and max goodput as lines, the fitted critical load. */
    assert_int_equal(count(page, "class=\"marker\""), 1);
    assert_non_null(strstr(page, ">knee</text>"));
    assert_non_null(strstr(page, ">SLO ttft.p99&lt;500ms</text>"));
    assert_non_null(strstr(page, ">max goodput 4.00 req/s</text>"));
    assert_non_null(strstr(page, ">knee at 8.00</text>"));
    assert_non_null(strstr(page, "\xce\xbb"
                                 "c = 9.50</text>"));
    assert_non_null(strstr(page, ">saturated step</text>"));
    assert_non_null(strstr(page, ">offered load (req/s)</text>"));
    assert_non_null(strstr(page, ">achieved throughput (req/s)</text>"));
    /* Cards and tables. */
    assert_non_null(
        strstr(page, "<div class=\"v\">8.00 <span class=\"u\">req/s offered</span></div>"));
    assert_non_null(strstr(page, "<div class=\"v\">4.00 <span class=\"u\">req/s</span></div>"));
    assert_int_equal(count(page, "<tr><td>step-0"), 4);
    assert_non_null(strstr(page, "<td>step-04-rate-16</td><td>16.00</td><td>10.00</td>"));
    assert_non_null(strstr(page, "<td>chat</td><td class=\"l\">batch</td>"));
    /* the critical load is a headline with its unit and goodness of fit */
    assert_non_null(strstr(page, "9.50 <span class=\"u\">req/s offered</span>"));
    assert_non_null(strstr(page, "goodness of fit r\xc2\xb2 0.970 over 3 steps"));
    ts_free(page);
    report_docset_release(&set);
}

/* A sweep over nprobe whose steps have recall: recall@k against QPS and
 * against E2EL p99, the recall knee marked on both; a sweep without recall
 * (above) has neither chart. */
static const char vary_json[] =
    "{\"schema\":\"tokenstorm.sweep/1\",\"mode\":\"nprobe\",\"target\":\"sim\",\"steps\":["
    "{\"load\":1,\"dir\":\"s1\",\"achieved_rps\":1900,\"ttft_p50_ms\":0.1,\"ttft_p99_ms\":0.3,"
    "\"e2el_p50_ms\":0.1,\"e2el_p99_ms\":0.3,\"error_rate\":0,\"quality\":null,"
    "\"vector_search\":{\"recall_mean\":0.34,\"recall_p5\":0.1,\"qps\":1900}},"
    "{\"load\":8,\"dir\":\"s2\",\"achieved_rps\":1500,\"ttft_p50_ms\":0.2,\"ttft_p99_ms\":0.6,"
    "\"e2el_p50_ms\":0.2,\"e2el_p99_ms\":0.6,\"error_rate\":0,\"quality\":null,"
    "\"vector_search\":{\"recall_mean\":0.72,\"recall_p5\":0.4,\"qps\":1500}},"
    "{\"load\":64,\"dir\":\"s3\",\"achieved_rps\":900,\"ttft_p50_ms\":0.3,\"ttft_p99_ms\":1.1,"
    "\"e2el_p50_ms\":0.3,\"e2el_p99_ms\":1.1,\"error_rate\":0,\"quality\":null,"
    "\"vector_search\":{\"recall_mean\":0.95,\"recall_p5\":0.8,\"qps\":900}}],"
    "\"recall_knee\":{\"load\":8,\"recall_mean\":0.72,\"qps\":1500,\"e2el_p99_ms\":0.6,"
    "\"score\":0.3}}";

static void test_page_sweep_recall(void **state)
{
    (void)state;
    struct report_docset set;
    char err[512];
    report_docset_init(&set);
    json_t *doc = load_json(vary_json);
    assert_int_equal(
        report_docset_add_json(&set, doc, "sw", "/x/sweep.json", NULL, err, sizeof(err)), 0);
    json_decref(doc);
    char *page = build_page(&set);
    assert_offline(page);
    assert_non_null(strstr(page, "id=\"sweep1-recall-qps\""));
    assert_non_null(strstr(page, "id=\"sweep1-recall-p99\""));
    assert_non_null(strstr(page, ">Recall@k vs queries per second</text>"));
    assert_non_null(strstr(page, ">Recall@k vs latency p99</text>"));
    assert_non_null(strstr(page, ">E2EL p99 (ms)</text>"));
    assert_int_equal(count(page, ">recall knee</text>"), 2);
    assert_non_null(strstr(page, ">recall p5</text>"));
    ts_free(page);
    report_docset_release(&set);

    report_docset_init(&set);
    doc = load_json(sweep_json);
    assert_int_equal(
        report_docset_add_json(&set, doc, "sw", "/x/sweep.json", NULL, err, sizeof(err)), 0);
    json_decref(doc);
    page = build_page(&set);
    assert_null(strstr(page, "recall-qps"));
    ts_free(page);
    report_docset_release(&set);
}

/*
 * A critical load that means nothing (lambda_c -24.41 from a poor fit, as
 * docs/example-report.html once showed) is neither a headline nor a line on
 * the errors chart; the fit is said to be not meaningful, and why. A step
 * of a sweep without SLOs has no verdict, not a green pass.
 */
static void test_page_sweep_meaningless_fit(void **state)
{
    static const char *const fits[] = {
        /* an older sweep.json without the flag: judged by the rule */
        "{\"lambda_c\":-24.41,\"epsilon0\":0.01,\"delta_lambda\":2.3,\"r2\":0.97,\"points\":3}",
        "{\"lambda_c\":9.5,\"epsilon0\":0.01,\"delta_lambda\":2.3,\"r2\":0.31,\"points\":3}",
        /* a newer one says so itself */
        ("{\"lambda_c\":9.5,\"epsilon0\":0.01,\"delta_lambda\":2.3,\"r2\":0.97,\"points\":3,"
         "\"meaningful\":false,\"not_meaningful_because\":\"the fit puts it far beyond\"}"),
    };
    char err[512];
    (void)state;
    for (size_t i = 0; i < sizeof(fits) / sizeof(fits[0]); i++) {
        struct report_docset set;
        report_docset_init(&set);
        json_t *doc = load_json(sweep_json);
        json_object_set_new(doc, "critical_load", load_json(fits[i]));
        json_object_set_new(json_array_get(json_object_get(doc, "steps"), 0), "slo_pass",
                            json_null());
        assert_int_equal(
            report_docset_add_json(&set, doc, "sw", "/x/sweep.json", NULL, err, sizeof(err)), 0);
        json_decref(doc);
        char *page = build_page(&set);
        assert_null(strstr(page, "\xce\xbb"
                                 "c = "));
        assert_null(strstr(page, "-24.41"));
        assert_non_null(strstr(page, "no meaningful fit: "));
        assert_non_null(strstr(page, "<td>step-01-rate-2</td>"));
        assert_int_equal(count(page, "<td class=\"pass\">pass</td>"), 1); /* step 2 only */
        ts_free(page);
        report_docset_release(&set);
    }
}

static void test_group_table(void **state)
{
    (void)state;
    struct buf b;
    json_t *g = load_json("{\"a\":{\"custom\":\"x\",\"completed\":10,\"error_rate\":0.05,"
                          "\"ttft_p99_ms\":12.5,\"nested\":{\"k\":1}},"
                          "\"b\":{\"completed\":3,\"slo_pass\":false}}");
    buf_init(&b, 1 << 20);
    assert_int_equal(report_html_group_table(&b, "g1", "Per tenant", g), 0);
    const char *t = buf_cstr(&b);
    assert_non_null(strstr(t, "<table class=\"groups\" id=\"g1\"><caption>Per tenant</caption>"));
    /* Known keys first, in their order, then the others as they come; nested values skipped. */
    assert_non_null(strstr(t, "<tr><th>group</th><th>completed</th><th>error rate</th>"
                              "<th>TTFT p99 (ms)</th><th>SLO</th><th>custom</th></tr>"));
    assert_non_null(strstr(t, "<tr><td>a</td><td>10</td><td>5.00%</td><td>12.5</td><td>-</td>"
                              "<td>x</td></tr>"));
    assert_non_null(strstr(t, "<tr><td>b</td><td>3</td><td>-</td><td>-</td>"
                              "<td class=\"fail\">FAIL</td><td>-</td></tr>"));
    assert_null(strstr(t, "nested"));
    buf_reset(&b);
    json_t *empty = json_object();
    assert_int_equal(report_html_group_table(&b, "g2", NULL, empty), 0);
    assert_int_equal(report_html_group_table(&b, "g2", NULL, NULL), 0);
    assert_int_equal(b.len, 0);
    json_decref(empty);
    json_decref(g);
    buf_release(&b);
}

static void test_docset_rejects(void **state)
{
    (void)state;
    struct report_docset set;
    char err[512];
    report_docset_init(&set);
    static const struct {
        const char *json, *msg;
    } bad[] = {
        {"{\"schema\":\"something/1\"}",
         "not a tokenstorm result, sweep, mirror or topology (schema \"something/1\""},
        {"{\"summary\":{}}", "schema missing"},
        {"{\"schema\":\"tokenstorm.sweep/1\"}", "sweep has no \"steps\" array"},
        {"{\"schema\":\"tokenstorm.sweep/1\",\"steps\":[{\"dir\":\"a\"}]}",
         "sweep step 1 is not an object with a numeric \"load\""},
        {"{\"schema\":\"tokenstorm.sweep/1\",\"steps\":[{\"load\":1,\"dir\":\"../etc\"}]}",
         "\"dir\" must be a plain directory name"},
        {"{\"schema\":\"tokenstorm.result/1\"}", "result has no \"summary\" object"},
        {"{\"schema\":\"tokenstorm.result/1\",\"summary\":{},\"timeline\":{}}",
         "\"timeline\" is not an array"},
        {"{\"schema\":\"tokenstorm.result/1\",\"summary\":{},\"histograms\":{\"ttft\":\"AAAA\"}}",
         "histogram does not decode: ttft"},
        {"[1,2]", "not a JSON object"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *doc = load_json(bad[i].json);
        int rc = report_docset_add_json(&set, doc, "n", "/p/file.json", NULL, err, sizeof(err));
        json_decref(doc);
        assert_true(rc < 0);
        if (!strstr(err, bad[i].msg) || strncmp(err, "/p/file.json: ", 14))
            fail_msg("case %zu: message '%s' lacks '%s'", i, err, bad[i].msg);
        assert_int_equal(set.n, 0);
    }
    report_docset_release(&set);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

static void write_doc(const char *path, json_t *doc)
{
    char err[256];
    assert_int_equal(result_write_file(doc, path, err, sizeof(err)), 0);
    json_decref(doc);
}

static void test_docset_paths(void **state)
{
    (void)state;
    char root[] = "/tmp/ts-test-html-XXXXXX", p[512], err[1024];
    struct report_docset set;
    assert_non_null(mkdtemp(root));
    static const char *const dirs[] = {"a", "b", "notes", "s", "s/step-01-rate-2", "bad"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
        assert_int_equal(mkdir(p, 0755), 0);
    }
    snprintf(p, sizeof(p), "%s/a/result.json", root);
    write_doc(p, fixture_result(true));
    snprintf(p, sizeof(p), "%s/b/result.json", root);
    write_doc(p, fixture_result(false));
    snprintf(p, sizeof(p), "%s/s/step-01-rate-2/result.json", root);
    write_doc(p, fixture_result(false));
    snprintf(p, sizeof(p), "%s/s/sweep.json", root);
    write_text(p, sweep_json);
    snprintf(p, sizeof(p), "%s/notes/readme.txt", root);
    write_text(p, "nothing here\n");
    snprintf(p, sizeof(p), "%s/bad/result.json", root);
    write_text(p, "{\"schema\": \"tokenstorm.result/1\",\n  \"summary\": {,}\n}\n");

    report_docset_init(&set);
    /* A run directory, the same run's file (a repeated name), a file under another name. */
    snprintf(p, sizeof(p), "%s/a", root);
    assert_int_equal(report_docset_add_path(&set, p, err, sizeof(err)), 0);
    snprintf(p, sizeof(p), "%s/a/result.json", root);
    assert_int_equal(report_docset_add_path(&set, p, err, sizeof(err)), 0);
    assert_int_equal(set.n, 2);
    assert_string_equal(set.docs[0].name, "a");
    assert_string_equal(set.docs[1].name, "a#2");
    assert_non_null(strstr(set.docs[0].path, "/a/result.json"));
    assert_int_equal(set.docs[0].sum.completed, 10);
    report_docset_release(&set);

    /* A directory of result directories: a, b, s (the sweep with its one step result); bad
     * is invalid and stops everything. */
    report_docset_init(&set);
    snprintf(p, sizeof(p), "%s/bad", root);
    int rc = report_docset_add_path(&set, p, err, sizeof(err));
    assert_int_equal(rc, TS_PARSE);
    assert_non_null(strstr(err, "/bad/result.json: not valid JSON: line 2"));
    assert_int_equal(set.n, 0);
    assert_int_equal(report_docset_add_path(&set, root, err, sizeof(err)), TS_PARSE);
    assert_int_equal(set.n, 0);
    snprintf(p, sizeof(p), "%s/bad/result.json", root);
    assert_int_equal(unlink(p), 0);
    assert_int_equal(report_docset_add_path(&set, root, err, sizeof(err)), 0);
    assert_int_equal(set.n, 3);
    assert_string_equal(set.docs[0].name, "a");
    assert_string_equal(set.docs[1].name, "b");
    assert_string_equal(set.docs[2].name, "s");
    assert_int_equal(set.docs[2].kind, REPORT_DOC_SWEEP);
    assert_int_equal(set.docs[2].nsteps, 4);
    assert_non_null(set.docs[2].steps[0].doc);
    assert_string_equal(set.docs[2].steps[0].name, "step-01-rate-2");
    assert_null(set.docs[2].steps[1].doc);
    char *page = build_page(&set);
    assert_non_null(strstr(page, "id=\"sweep1-ttft-cdf\""));
    assert_non_null(strstr(page, "id=\"sweep1-e2el-spectrum\""));
    assert_non_null(strstr(page, ">load 2</text>"));
    assert_non_null(strstr(page, "id=\"run2-timeline-rate\""));
    ts_free(page);

    /* Nothing to read: the set is left as it was. */
    snprintf(p, sizeof(p), "%s/notes", root);
    assert_int_equal(report_docset_add_path(&set, p, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "/notes: no result.json, sweep.json or topology.json"));
    snprintf(p, sizeof(p), "%s/missing.json", root);
    assert_true(report_docset_add_path(&set, p, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "missing.json"));
    snprintf(p, sizeof(p), "%s/notes/readme.txt", root);
    assert_int_equal(report_docset_add_path(&set, p, err, sizeof(err)), TS_PARSE);
    assert_non_null(strstr(err, "readme.txt: not valid JSON: line 1"));
    assert_int_equal(set.n, 3);
    report_docset_release(&set);

    static const char *const files[] = {"a/result.json", "b/result.json",
                                        "s/step-01-rate-2/result.json", "s/sweep.json",
                                        "notes/readme.txt"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", root, files[i]);
        assert_int_equal(unlink(p), 0);
    }
    for (size_t i = sizeof(dirs) / sizeof(dirs[0]); i-- > 0;) {
        snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
        assert_int_equal(rmdir(p), 0);
    }
    assert_int_equal(rmdir(root), 0);
}

static void test_page_limits(void **state)
{
    (void)state;
    struct report_docset set;
    struct buf b;
    report_docset_init(&set);
    buf_init(&b, 1 << 20);
    assert_int_equal(report_html_build(&set, NULL, &b), -EINVAL);
    add_doc(&set, fixture_result(true), "r");
    buf_release(&b);
    buf_init(&b, 20000); /* far too small for the page */
    assert_int_equal(report_html_build(&set, NULL, &b), TS_TOOBIG);
    buf_release(&b);
    /* Allocation failures anywhere give -ENOMEM, never a crash or a leak. */
    for (long n = 0; n < 400; n += 7) {
        buf_init(&b, PAGE_CAP);
        ts_alloc_fail_after(n);
        int rc = report_html_build(&set, NULL, &b);
        ts_alloc_fail_after(-1);
        assert_true(rc == 0 || rc == -ENOMEM);
        buf_release(&b);
    }
    report_docset_release(&set);
}

/* The live dashboard of a sweep (`sweep --ui`): the frame is the report's
 * sweep section alone (no overview of runs it has not got); the page keeps a
 * place for the running step's own dashboard outside the frame, which the
 * script fills from the "inner" event. */
static void test_live_sweep_frame(void **state)
{
    (void)state;
    struct report_docset set;
    struct buf frame, page;
    char err[512];
    report_docset_init(&set);
    json_t *doc = load_json(sweep_json);
    assert_int_equal(
        report_docset_add_json(&set, doc, "sw", "/x/sweep.json", NULL, err, sizeof(err)), 0);
    json_decref(doc);
    buf_init(&frame, 8u << 20);
    assert_int_equal(report_html_live_frame(&set, &frame), 0);
    const char *f = buf_cstr(&frame);
    assert_non_null(strstr(f, "id=\"sweep1\""));
    assert_non_null(strstr(f, "id=\"sweep1-latency-load\""));
    assert_null(strstr(f, "id=\"overview\""));
    assert_null(strstr(f, "<script"));
    buf_init(&page, 16u << 20);
    assert_int_equal(report_html_live_page("tokenstorm sweep", f, "events", "stop", &page), 0);
    const char *pg = buf_cstr(&page);
    const char *main_end = strstr(pg, "</main>"),
               *inner = strstr(pg, "<section id=\"inner\" hidden>");
    assert_non_null(main_end);
    assert_non_null(inner);
    assert_true(inner > main_end); /* outside the frame the events replace */
    assert_non_null(strstr(pg, "addEventListener('inner'"));
    /* the one script asks only for its own server's paths and the step's port on the same host */
    assert_int_equal(count(pg, "<script"), 1);
    assert_null(strstr(pg, "<link"));
    assert_null(strstr(pg, "http://"));
    assert_non_null(strstr(pg, "location.protocol+'//'+location.hostname+':'+p"));
    buf_release(&page);
    buf_release(&frame);
    report_docset_release(&set);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_live_sweep_frame),
        cmocka_unit_test(test_page_sections),
        cmocka_unit_test(test_page_minimal_result),
        cmocka_unit_test(test_page_several_runs),
        cmocka_unit_test(test_page_sweep),
        cmocka_unit_test(test_page_sweep_recall),
        cmocka_unit_test(test_page_sweep_meaningless_fit),
        cmocka_unit_test(test_group_table),
        cmocka_unit_test(test_docset_rejects),
        cmocka_unit_test(test_docset_paths),
        cmocka_unit_test(test_page_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
