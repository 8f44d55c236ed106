/*
 * test_experiment.c - experiment files (parsing, validation, file:line:col
 * errors) and the judgement of a run from a requests.jsonl (app/experiment.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "app/experiment.h"

static const char *const good =
    "title: A test\n"
    "description: what it shows\n"
    "steady-state-hypothesis:\n"
    "  window: 3s\n"
    "  probes:\n"
    "    - slo: \"error_rate<1%\"\n"
    "      during: \"error_rate<20%\"\n"
    "    - {slo: \"ttft.p95<500ms\", name: fast}\n"
    "method:\n"
    "  - name: late\n"
    "    at: 8s\n"
    "    for: 2s\n"
    "    sim: http://127.0.0.1:8000/\n"
    "    fault: {type: stall}\n"
    "  - name: early\n"
    "    at: 2s\n"
    "    for: 3s\n"
    "    proxy: http://127.0.0.1:9001\n"
    "    fault: {type: http_abort, status: 503, probability: 1}\n"
    "rollbacks:\n"
    "  - {url: \"http://127.0.0.1:9001/reset\", method: POST}\n"
    "load: [\"--target\", \"http://127.0.0.1:9000/v1\", \"--duration\", \"15s\"]\n";

static void test_parse_good(void **state)
{
    (void)state;
    struct experiment *e;
    char err[512] = "";
    int rc = experiment_parse(good, strlen(good), "x.yaml", &e, err, sizeof(err));
    if (rc)
        fail_msg("%s", err);
    assert_string_equal(e->title, "A test");
    assert_string_equal(e->description, "what it shows");
    assert_int_equal(e->window_ns, 3 * TS_NS_PER_S);
    assert_int_equal(e->step_ns, TS_NS_PER_S);
    assert_int_equal(e->nprobes, 2);
    assert_string_equal(e->probes[0].slo.expr, "error_rate<1%");
    assert_string_equal(e->probes[0].during.expr, "error_rate<20%");
    assert_string_equal(e->probes[0].name, "error_rate<1%");
    assert_string_equal(e->probes[1].during.expr, "ttft.p95<500ms"); /* default: the slo */
    assert_string_equal(e->probes[1].name, "fast");
    assert_int_equal(e->nphases, 2);
    /* sorted by start */
    assert_string_equal(e->phases[0].name, "early");
    assert_int_equal(e->phases[0].target, EXP_TARGET_PROXY);
    assert_string_equal(json_string_value(json_object_get(e->phases[0].spec, "name")), "early");
    assert_string_equal(e->phases[0].remove_path, "/faults/early");
    assert_string_equal(e->phases[1].name, "late");
    assert_int_equal(e->phases[1].target, EXP_TARGET_SIM);
    assert_string_equal(e->phases[1].url, "http://127.0.0.1:8000"); /* trailing '/' dropped */
    assert_string_equal(e->phases[1].remove_path, "/admin/faults/stall");
    /* a stall lasts its phase unless it says otherwise */
    assert_string_equal(json_string_value(json_object_get(e->phases[1].spec, "for")), "2000ms");
    assert_int_equal(experiment_faults_end_ns(e), 10 * TS_NS_PER_S);
    assert_int_equal(e->nrollbacks, 1);
    assert_string_equal(e->rollbacks[0].method, "POST");
    assert_int_equal(e->nload, 4);
    assert_string_equal(e->load[3], "15s");
    experiment_free(e);
    experiment_free(NULL);
}

/* Replaces the first `from` of good by `to` and expects an error containing msg. */
static void expect_err(const char *from, const char *to, const char *msg)
{
    char text[4096];
    const char *at = strstr(good, from);
    assert_non_null(at);
    snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - good), good, to, at + strlen(from));
    struct experiment *e = NULL;
    char err[512] = "";
    int rc = experiment_parse(text, strlen(text), "x.yaml", &e, err, sizeof(err));
    if (rc == 0)
        fail_msg("'%s' -> '%s' was accepted", from, to);
    assert_null(e);
    if (!strstr(err, msg))
        fail_msg("'%s' -> '%s': got '%s', expected '%s'", from, to, err, msg);
}

static void test_parse_errors(void **state)
{
    (void)state;
    expect_err("title: A test", "titel: A test",
               "x.yaml:1:1: unknown key 'titel' in the experiment (did you mean 'title'?)");
    expect_err("title: A test\n", "", "needs a \"title\"");
    expect_err("  window: 3s", "  windw: 3s", "x.yaml:4:3: unknown key 'windw'");
    expect_err("  window: 3s", "  window: soon", "x.yaml:4:11: window: 'soon' is not a duration");
    expect_err("error_rate<1%\"\n", "eror_rate<1%\"\n", "did you mean 'error_rate'");
    expect_err("      during", "      durin", "x.yaml:7:7: unknown key 'durin' in a probe");
    expect_err("    at: 8s", "    at: 0s", "at must be > 0");
    expect_err("    for: 2s", "    fr: 2s", "(did you mean 'for'?)");
    expect_err("    sim: http://127.0.0.1:8000/", "    sim: 127.0.0.1:8000",
               "x.yaml:13:10: sim: '127.0.0.1:8000' is not an http");
    expect_err("    sim: http://127.0.0.1:8000/",
               "    sim: http://127.0.0.1:8000/\n    proxy: http://127.0.0.1:9001",
               "exactly one target");
    expect_err("{type: stall}", "{type: stal}", "(did you mean 'stall'?)");
    expect_err("status: 503", "status: 200", "phase 'early'");
    expect_err("type: http_abort", "type: http_abrt", "phase 'early'");
    expect_err("name: early", "name: late", "two phases are named 'late'");
    expect_err("name: early", "name: 'bad name'", "phase name 'bad name'");
    expect_err("\"--duration\", \"15s\"", "\"--duration\", \"10s\"",
               "the load runs 10.0 s but the faults end at 10.0 s");
    expect_err("\"--duration\"", "\"--out\", \"x\", \"--duration\"",
               "--out is set by the experiment");
    expect_err("load: [\"--target\", \"http://127.0.0.1:9000/v1\", \"--duration\", \"15s\"]",
               "load: []", "load must be a list");
    expect_err("method: POST", "method: PATCH", "one of GET, POST, PUT, DELETE");
    expect_err("  probes:\n    - slo: \"error_rate<1%\"\n      during: \"error_rate<20%\"\n"
               "    - {slo: \"ttft.p95<500ms\", name: fast}\n",
               "  probes: []\n", "at least one probe");
    expect_err("title: A test", "title: [A", "x.yaml:3:24: "); /* libfyaml: where it noticed */
}

static void test_parse_limits(void **state)
{
    (void)state;
    struct experiment *e = NULL;
    char err[512] = "";
    /* libfyaml would hang on some invalid UTF-8: refused before it */
    const char bad[] = "title: ok\ndescription: \xff\xfe\n";
    assert_int_equal(experiment_parse(bad, sizeof(bad) - 1, "u.yaml", &e, err, sizeof(err)),
                     -EINVAL);
    assert_string_equal(err, "u.yaml:2:14: not UTF-8 text");
    size_t big = EXP_FILE_MAX + 1;
    char *text = ts_malloc(big);
    assert_non_null(text);
    memset(text, ' ', big);
    assert_int_equal(experiment_parse(text, big, "b.yaml", &e, err, sizeof(err)), TS_TOOBIG);
    ts_free(text);
    assert_int_equal(experiment_parse("", 0, "e.yaml", &e, err, sizeof(err)), -EINVAL);
    assert_int_equal(experiment_load("/nonexistent/x.yaml", &e, err, sizeof(err)) < 0, 1);
    assert_null(e);
}

/* ---- judgement ---- */

static const char *const judged =
    "title: judged\n"
    "hypothesis:\n"
    "  probes:\n"
    "    - {slo: \"error_rate<1%\", during: \"error_rate<20%\"}\n"
    "    - {slo: \"ttft.p95<500ms\", during: \"ttft.p95<2s\"}\n"
    "method:\n"
    "  - {name: a, at: 5s, for: 3s, proxy: \"http://127.0.0.1:1\", fault: {type: http_abort}}\n"
    "load: [\"--duration\", \"20s\"]\n";

/* What a request sent at t ms looks like: an error, or ok with that TTFT. */
typedef int (*shape_fn)(double t, double *ttft);

static int shape_steady(double t, double *ttft)
{
    (void)t;
    *ttft = 10;
    return 1;
}
/* errors during the fault, slow until 10 s */
static int shape_deviated(double t, double *ttft)
{
    *ttft = t >= 8000 && t < 10000 ? 900 : 10;
    return !(t >= 5000 && t < 8000);
}
/* no errors, within tolerance during the fault, slow until 10 s */
static int shape_recovered(double t, double *ttft)
{
    *ttft = t >= 5000 && t < 10000 ? 900 : 10;
    return 1;
}
static int shape_never(double t, double *ttft)
{
    *ttft = 10;
    return t < 5000;
}
static int shape_unsteady(double t, double *ttft)
{
    *ttft = 10;
    return t >= 2000;
}

static char *write_requests(shape_fn shape)
{
    static char path[] = "/tmp/ts-exp-XXXXXX";
    strcpy(path, "/tmp/ts-exp-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fprintf(f, "{\"id\":0,\"outcome\":\"http_5xx\",\"warmup\":true,\"intended_ms\":0}\n");
    fprintf(f, "not json\n\n");
    for (int i = 0; i < 200; i++) {
        double t = i * 100.0, ttft;
        if (shape(t, &ttft))
            fprintf(f,
                    "{\"id\":%d,\"outcome\":\"ok\",\"http_status\":200,\"stream\":true,"
                    "\"warmup\":false,\"intended_ms\":%.3f,\"start_ms\":%.3f,"
                    "\"first_chunk_ms\":%.3f,\"first_token_ms\":%.3f,\"last_chunk_ms\":%.3f,"
                    "\"end_ms\":%.3f,\"output_tokens\":10,\"choice_chunks\":10,"
                    "\"content_chunks\":10,\"itl_mean_ms\":5,\"itl_max_ms\":6,"
                    "\"token_source\":\"usage\",\"usage_prompt_tokens\":20,"
                    "\"usage_completion_tokens\":10,\"finish_reason\":\"length\"}\n",
                    i + 1, t, t, t + ttft, t + ttft, t + ttft + 45, t + ttft + 46);
        else
            fprintf(f,
                    "{\"id\":%d,\"outcome\":\"http_5xx\",\"http_status\":503,\"warmup\":false,"
                    "\"intended_ms\":%.3f,\"start_ms\":%.3f,\"end_ms\":%.3f,"
                    "\"first_chunk_ms\":null,\"output_tokens\":0}\n",
                    i + 1, t, t, t + 1);
    }
    fclose(f);
    return path;
}

static json_t *judge(shape_fn shape, enum exp_verdict *v)
{
    struct experiment *e;
    struct exp_requests *r;
    char err[512] = "";
    char *path = write_requests(shape);
    assert_int_equal(experiment_parse(judged, strlen(judged), "j.yaml", &e, err, sizeof(err)), 0);
    int rc = exp_requests_load(path, &r, err, sizeof(err));
    unlink(path);
    if (rc)
        fail_msg("%s", err);
    assert_int_equal(exp_requests_count(r), 200); /* the warm-up and malformed lines left out */
    assert_true(exp_requests_last_ms(r) == 19900);
    struct exp_window w[1] = {{5000, 8000}};
    json_t *rep = NULL;
    assert_int_equal(experiment_judge(e, r, w, 0, v, &rep), 0);
    exp_requests_free(r);
    experiment_free(e);
    assert_string_equal(json_string_value(json_object_get(rep, "verdict")), exp_verdict_name(*v));
    return rep;
}

static double recovery(const json_t *rep)
{
    const json_t *r = json_object_get(rep, "recovery_s");
    return json_is_number(r) ? json_number_value(r) : -1;
}

static void test_judge(void **state)
{
    (void)state;
    enum exp_verdict v;
    json_t *rep = judge(shape_steady, &v);
    assert_int_equal(v, EXP_STEADY);
    assert_true(recovery(rep) == 0);
    const json_t *base = json_object_get(rep, "baseline");
    /* 0..4800 ms: the request at 4900 is within EXP_BASELINE_GUARD_MS of the fault */
    assert_int_equal(json_integer_value(json_object_get(base, "requests")), 49);
    assert_true(json_is_true(json_object_get(base, "holds")));
    json_decref(rep);

    rep = judge(shape_deviated, &v);
    assert_int_equal(v, EXP_DEVIATED);
    assert_true(json_is_true(json_object_get(rep, "deviated")));
    /* windows [8,10) and [9,11) hold TTFT of 900 ms; [10,12) is the first to hold */
    assert_true(recovery(rep) == 2.0);
    assert_int_equal(json_array_size(json_object_get(rep, "recovery")), 3);
    const json_t *ph = json_array_get(json_object_get(rep, "phases"), 0);
    assert_string_equal(json_string_value(json_object_get(ph, "name")), "a");
    const json_t *p0 = json_array_get(json_object_get(ph, "probes"), 0);
    assert_string_equal(json_string_value(json_object_get(p0, "slo")), "error_rate<20%");
    assert_true(json_number_value(json_object_get(p0, "actual")) == 1.0);
    assert_int_equal(exp_verdict_exit(v), 0);
    json_decref(rep);

    rep = judge(shape_recovered, &v);
    assert_int_equal(v, EXP_RECOVERED);
    assert_false(json_is_true(json_object_get(rep, "deviated")));
    assert_true(recovery(rep) == 2.0);
    json_decref(rep);

    rep = judge(shape_never, &v);
    assert_int_equal(v, EXP_NOT_RECOVERED);
    assert_true(json_is_null(json_object_get(rep, "recovery_s")));
    /* windows from 8 s while a whole one fits before the last request (19.9 s) */
    assert_int_equal(json_array_size(json_object_get(rep, "recovery")), 10);
    assert_int_equal(exp_verdict_exit(v), 1);
    json_decref(rep);

    rep = judge(shape_unsteady, &v);
    assert_int_equal(v, EXP_UNSTEADY);
    assert_int_equal(exp_verdict_exit(v), 1);
    json_decref(rep);
    assert_string_equal(exp_verdict_name(EXP_VERDICT_COUNT), "unknown");
}

/* The load's --goodput judges goodput probes per window. */
static void test_goodput(void **state)
{
    (void)state;
    static const char *const text =
        "title: g\n"
        "hypothesis: {probes: [{slo: \"goodput>=9/s\", during: \"goodput>=0/s\"}]}\n"
        "method: [{name: a, at: 5s, for: 3s, sim: \"http://127.0.0.1:1\",\n"
        "          fault: {type: error_rate, rate: 1}}]\n"
        "load: [\"--goodput\", \"ttft:500\", \"--duration=20s\"]\n";
    struct experiment *e;
    struct exp_requests *r;
    char err[512] = "";
    assert_int_equal(experiment_parse(text, strlen(text), "g.yaml", &e, err, sizeof(err)), 0);
    assert_true(e->has_goodput);
    assert_true(e->goodput.ttft_ms == 500);
    char *path = write_requests(shape_recovered); /* TTFT 900 ms from 5 s to 10 s */
    assert_int_equal(exp_requests_load(path, &r, err, sizeof(err)), 0);
    unlink(path);
    struct exp_window w[1] = {{5000, 8000}};
    enum exp_verdict v;
    json_t *rep = NULL;
    assert_int_equal(experiment_judge(e, r, w, 0, &v, &rep), 0);
    /* 10 good requests/s before; none between 5 and 10 s; [10,12) holds again */
    const json_t *p0 =
        json_array_get(json_object_get(json_object_get(rep, "baseline"), "probes"), 0);
    assert_true(fabs(json_number_value(json_object_get(p0, "actual")) - 10.0) < 1e-9);
    assert_int_equal(v, EXP_RECOVERED);
    assert_true(recovery(rep) == 2.0);
    json_decref(rep);
    exp_requests_free(r);
    experiment_free(e);
    expect_err("\"--duration\", \"15s\"", "\"--duration\", \"15s\", \"--goodput\", \"ttft:x\"",
               "load: --goodput: expected 'ttft:MS tpot:MS e2el:MS', got 'ttft:x'");
    expect_err("\"--duration\", \"15s\"", "\"--duration\", \"15s\", \"--goodput=itl:5\"",
               "unknown metric 'itl'");
}

static void test_apply_unreachable(void **state)
{
    (void)state;
    struct experiment *e;
    char err[512] = "";
    assert_int_equal(experiment_parse(judged, strlen(judged), "j.yaml", &e, err, sizeof(err)), 0);
    assert_int_equal(experiment_apply(&e->phases[0], err, sizeof(err)), -EIO);
    assert_non_null(strstr(err, "POST http://127.0.0.1:1/faults"));
    assert_int_equal(experiment_remove(&e->phases[0], err, sizeof(err)), -EIO);
    experiment_free(e);
}

/* The proxy's forward delay between two readings: quantiles interpolated
 * within the buckets (scrape_hist_quantile). */
static void test_delay(void **state)
{
    (void)state;
    struct scrape_hist b = {4, {1e-4, 1e-3, 1e-2, INFINITY}, {10, 20, 20, 20}, NAN};
    struct scrape_hist a = {4, {1e-4, 1e-3, 1e-2, INFINITY}, {60, 118, 119, 120}, NAN};
    /* 100 pieces in between: 50 <= 100 us, 48 more <= 1 ms, 1 <= 10 ms, 1 above */
    json_t *j = exp_delay_json(&b, &a);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "pieces")), 100);
    assert_true(fabs(json_real_value(json_object_get(j, "p50_s")) - 1e-4) < 1e-12);
    assert_true(fabs(json_real_value(json_object_get(j, "p99_s")) - 1e-2) < 1e-12);
    /* in the +Inf bucket: its lower bound, the highest finite one */
    assert_true(fabs(json_real_value(json_object_get(j, "p999_s")) - 1e-2) < 1e-12);
    json_decref(j);
    /* nothing forwarded: no quantiles */
    j = exp_delay_json(&a, &a);
    assert_int_equal(json_integer_value(json_object_get(j, "pieces")), 0);
    assert_true(json_is_null(json_object_get(j, "p50_s")));
    json_decref(j);
    /* the proxy restarted (counts went down): its counts since the restart */
    j = exp_delay_json(&a, &b);
    assert_int_equal(json_integer_value(json_object_get(j, "pieces")), 20);
    assert_true(fabs(json_real_value(json_object_get(j, "p50_s")) - 1e-4) < 1e-12);
    json_decref(j);
    /* no reading after: nothing */
    struct scrape_hist none = {0};
    j = exp_delay_json(&b, &none);
    assert_int_equal(json_integer_value(json_object_get(j, "pieces")), 0);
    json_decref(j);
    /* a proxy that does not answer */
    char err[256];
    assert_int_equal(experiment_proxy_delay("http://127.0.0.1:1", &none, err, sizeof(err)), -EIO);
    assert_non_null(strstr(err, "GET http://127.0.0.1:1/metrics"));
    assert_int_equal(none.n, 0);
}

/* A probe on a proxy's retry amplification: judged from its GET /chain
 * buckets by run time (the run started at 100 s of monotonic time), its
 * proxy defaulting to the phases' first; without any proxy it is refused. */
static void test_chain_probe(void **state)
{
    (void)state;
    static const char *const text =
        "title: amp\n"
        "hypothesis:\n"
        "  probes:\n"
        "    - {slo: \"amplification<1.5\", during: \"amplification<2.5\"}\n"
        "    - {slo: \"orphaned_tokens<=0\", proxy: \"http://127.0.0.1:2/\"}\n"
        "method:\n"
        "  - {name: a, at: 5s, for: 3s, proxy: \"http://127.0.0.1:1\", fault: {type: http_abort}}\n"
        "load: [\"--duration\", \"20s\"]\n";
    struct experiment *e;
    struct exp_requests *r;
    char err[512] = "";
    assert_int_equal(experiment_parse(text, strlen(text), "a.yaml", &e, err, sizeof(err)), 0);
    assert_string_equal(e->probes[0].proxy, "http://127.0.0.1:1");
    assert_string_equal(e->probes[1].proxy, "http://127.0.0.1:2");
    /* the buckets: 2 attempts per request during 5-8 s (within 2.5, not 1.5),
     * 3 from 8 to 10 s, 1 after; tokens orphaned at 6 s on the second proxy */
    json_t *s1 = json_array(), *s2 = json_array();
    for (int i = 0; i < 80; i++) {
        double t = i * 250.0;
        int att = t >= 5000 && t < 8000 ? 2 : t >= 8000 && t < 10000 ? 3 : 1;
        json_array_append_new(
            s1, json_pack("{s:f,s:i,s:i,s:{s:i},s:{s:i,s:i,s:i,s:f}}", "t_mono_ns", 100e9 + t * 1e6,
                          "attempts", 4 * att, "distinct", 4, "retries", "429", 4 * (att - 1),
                          "orphaned", "requests", 0, "bytes", 0, "tokens", 0, "seconds", 0.0));
        json_array_append_new(s2, json_pack("{s:f,s:i,s:i,s:{s:i,s:i,s:i,s:f}}", "t_mono_ns",
                                            100e9 + t * 1e6, "attempts", 1, "distinct", 1,
                                            "orphaned", "requests", t == 6000, "bytes", 0, "tokens",
                                            t == 6000 ? 50 : 0, "seconds", 0.0));
    }
    json_t *d1 = json_pack("{s:o}", "series", s1), *d2 = json_pack("{s:o}", "series", s2);
    struct exp_chains ch = {.run_start_ns = 100000000000ull, .n = 2};
    ch.url[0] = "http://127.0.0.1:1";
    ch.url[1] = "http://127.0.0.1:2";
    ch.doc[0] = d1;
    ch.doc[1] = d2;
    assert_true(exp_chain_actual(&ch, &e->probes[0], &e->probes[0].slo, 5000, 8000) == 2.0);
    assert_true(exp_chain_actual(&ch, &e->probes[1], &e->probes[1].slo, 5000, 8000) == 50.0);
    assert_true(isnan(exp_chain_actual(NULL, &e->probes[0], &e->probes[0].slo, 0, 1000)));

    char *path = write_requests(shape_steady);
    assert_int_equal(exp_requests_load(path, &r, err, sizeof(err)), 0);
    unlink(path);
    struct exp_window w[1] = {{5000, 8000}};
    json_t *rep = NULL;
    enum exp_verdict v;
    assert_int_equal(experiment_judge_chains(e, r, w, 0, &ch, &v, &rep), 0);
    /* broke during (50 tokens orphaned), then 3 attempts per request until 10 s */
    assert_int_equal(v, EXP_DEVIATED);
    double rec = json_number_value(json_object_get(rep, "recovery_s"));
    assert_true(rec >= 2.0 && rec <= 3.0);
    json_t *ph = json_array_get(json_object_get(rep, "phases"), 0);
    json_t *px = json_array_get(json_object_get(ph, "proxies"), 0);
    assert_true(json_real_value(json_object_get(px, "amplification")) == 2.0);
    assert_true(json_real_value(json_object_get(json_object_get(px, "amplification_by_trigger"),
                                                "429")) == 2.0);
    json_decref(rep);
    /* the same without the documents: the proxy probes never hold */
    assert_int_equal(experiment_judge(e, r, w, 0, &v, &rep), 0);
    assert_int_equal(v, EXP_UNSTEADY);
    json_decref(rep);
    json_decref(d1);
    json_decref(d2);
    exp_requests_free(r);
    experiment_free(e);

    static const char *const noproxy =
        "title: amp\n"
        "hypothesis:\n"
        "  probes: [{slo: \"amplification<1.5\"}]\n"
        "method:\n"
        "  - {name: a, at: 5s, for: 3s, sim: \"http://127.0.0.1:1\", fault: {type: stall}}\n"
        "load: [\"--duration\", \"20s\"]\n";
    assert_int_not_equal(experiment_parse(noproxy, strlen(noproxy), "b.yaml", &e, err, sizeof(err)),
                         0);
    assert_non_null(strstr(err, "proxy: URL"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delay),
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_parse_limits),
        cmocka_unit_test(test_judge),
        cmocka_unit_test(test_goodput),
        cmocka_unit_test(test_apply_unreachable),
        cmocka_unit_test(test_chain_probe),
    };
    return cmocka_run_group_tests_name("experiment", tests, NULL, NULL);
}
