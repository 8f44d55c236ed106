/*
 * test_exp_quality.c - answer quality scores through requests.jsonl into an
 * experiment's judgement: req_record_append_json() writes them, the
 * experiment's reader (parse_req, reached by including experiment.c) reads
 * them back, and quality probes are judged per window.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../src/app/experiment.c"
#include "report/result.h"

#define MS    1000000ull
#define START (1000ull * 1000 * MS) /* the run's start mark */

static struct req_record ok_at(double t_ms)
{
    struct req_record r;
    memset(&r, 0, sizeof(r));
    r.outcome = REQ_OK;
    r.http_status = 200;
    r.flags = REQF_STREAM;
    r.intended_ns = START + (uint64_t)(t_ms * 1e6);
    r.start_ns = r.intended_ns;
    r.first_chunk_ns = r.first_token_ns = r.intended_ns + 20 * MS;
    r.last_chunk_ns = r.intended_ns + 60 * MS;
    r.end_ns = r.intended_ns + 61 * MS;
    r.output_tokens = r.choice_chunks = r.content_chunks = 5;
    r.usage_prompt_tokens = r.usage_completion_tokens = -1;
    return r;
}

/* Writes the lines to a new temporary file; returns its path (static). */
static const char *write_file(const char *text)
{
    static char path[32];
    strcpy(path, "/tmp/ts-expq-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t len = strlen(text);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
    return path;
}

static void test_round_trip(void **state)
{
    (void)state;
    struct req_record in[5];
    in[0] = ok_at(0); /* everything, cut */
    in[0].quality = (struct quality_scores){
        .have = QUALITY_HAVE_REF | QUALITY_HAVE_REGEX | QUALITY_HAVE_JSON,
        .rouge_l = 0.8125,
        .bleu4 = 0.123456789,
        .exact = false,
        .regex_match = true,
        .json_valid = false,
        .truncated = true,
    };
    in[1] = ok_at(100); /* not scored */
    in[2] = ok_at(200); /* a reference only, exact */
    in[2].quality =
        (struct quality_scores){.have = QUALITY_HAVE_REF, .rouge_l = 1, .bleu4 = 1, .exact = true};
    in[3] = ok_at(300); /* the JSON check only */
    in[3].quality = (struct quality_scores){.have = QUALITY_HAVE_JSON, .json_valid = true};
    in[4] = ok_at(400); /* the regex check only, no match */
    in[4].quality = (struct quality_scores){.have = QUALITY_HAVE_REGEX, .regex_match = false};

    struct buf b;
    buf_init(&b, 1 << 16);
    for (size_t i = 0; i < N(in); i++)
        assert_int_equal(req_record_append_json(&b, &in[i], START), 0);
    /* a hand-written line with scores out of range: not taken */
    assert_int_equal(buf_append_str(&b, "{\"outcome\":\"ok\",\"intended_ms\":500,\"quality\":"
                                        "{\"truncated\":true,\"rouge_l\":1.5,\"bleu4\":0.5,"
                                        "\"exact\":false}}\n"),
                     0);
    const char *text = buf_cstr(&b);
    assert_non_null(strstr(text, "\"quality\":{\"truncated\":true,\"rouge_l\":0.812500000,"
                                 "\"bleu4\":0.123456789,\"exact\":false,\"regex_match\":true,"
                                 "\"json_valid\":false}"));
    assert_non_null(strstr(text, "\"quality\":null"));
    assert_non_null(strstr(text, "\"quality\":{\"truncated\":false,\"json_valid\":true}"));

    const char *path = write_file(text);
    buf_release(&b);
    struct exp_requests *r = NULL;
    char err[256] = "";
    int rc = exp_requests_load(path, &r, err, sizeof(err));
    unlink(path);
    if (rc)
        fail_msg("%s", err);
    assert_int_equal(r->n, 6);
    assert_int_equal(r->malformed, 0);
    for (size_t i = 0; i < N(in); i++) {
        const struct quality_scores *want = &in[i].quality, *got = &r->v[i].rec.quality;
        assert_int_equal(got->have, want->have);
        assert_true(fabs(got->rouge_l - want->rouge_l) < 1e-9);
        assert_true(fabs(got->bleu4 - want->bleu4) < 1e-9);
        assert_int_equal(got->exact, want->exact);
        assert_int_equal(got->regex_match, want->regex_match);
        assert_int_equal(got->json_valid, want->json_valid);
        assert_int_equal(got->truncated, want->truncated);
    }
    assert_int_equal(r->v[5].rec.quality.have, 0);
    assert_false(r->v[5].rec.quality.truncated);
    exp_requests_free(r);
}

/* consistency needs the answers: refused; every other probe needs what its
 * metric is computed from in the load's options (dual_sla its --dual-sla,
 * goodput its --goodput, references a --prompts file or a scenario, ...). */
static void test_whole_run_probes_refused(void **state)
{
    (void)state;
    static const char *const head = "title: q\nhypothesis: {probes: [";
    static const char *const mid =
        "]}\n"
        "method: [{name: a, at: 5s, for: 3s, sim: \"http://127.0.0.1:1\",\n"
        "          fault: {type: error_rate, rate: 1}}]\n"
        "load: [\"--duration=20s\"";
    static const char *const probes[][3] = {
        {"{slo: \"dual_sla>=95%\"}", "",
         "probe 'dual_sla>=95%': dual_sla needs the load's --dual-sla"},
        {"{slo: \"rouge_l>0.9\", during: \"consistency>=0.5\"}", ", \"--prompts=p.jsonl\"",
         "consistency is not supported in experiments"},
        {"{slo: \"rouge_l>0.9\", during: \"bleu4>0.1\"}", ", \"--prompts=p.jsonl\"", NULL},
        {"{slo: \"rouge_l>0.9\"}", ", s.yaml", NULL},
        {"{slo: \"ttft.p95<1s\", during: \"bleu4>0.1\"}", "",
         "probe 'bleu4>0.1': bleu4 needs the load's reference answers"},
        {"{slo: \"goodput>1\"}", "", "probe 'goodput>1': goodput needs the load's --goodput"},
        {"{slo: \"goodput>1\"}", ", \"--goodput\", \"ttft:500\"", NULL},
        {"{slo: \"regex_match>=90%\"}", "", "regex_match needs the load's --quality-regex"},
        {"{slo: \"json_valid>=90%\"}", "", "json_valid needs the load's --quality-json"},
        {"{slo: \"json_valid>=90%\"}", ", \"--quality-json\"", NULL},
    };
    for (size_t i = 0; i < N(probes); i++) {
        char text[1024], err[512] = "";
        struct experiment *e = NULL;
        snprintf(text, sizeof(text), "%s%s%s%s]\n", head, probes[i][0], mid, probes[i][1]);
        int rc = experiment_parse(text, strlen(text), "q.yaml", &e, err, sizeof(err));
        if (!probes[i][2]) {
            if (rc)
                fail_msg("case %zu: %s", i, err);
            experiment_free(e);
            continue;
        }
        assert_int_equal(rc, -EINVAL);
        if (!strstr(err, probes[i][2]))
            fail_msg("case %zu: message: %s", i, err);
    }
}

/*
 * dual_sla per window: windows of 4 requests in completion order attain when
 * 3 of 4 are quality-ok (rouge_l >= 0.5 by default) and all are latency-ok.
 * Quality is bad in [5 s, 8 s): the hypothesis breaks there and comes back.
 */
static void test_judge_dual_sla(void **state)
{
    (void)state;
    static const char *const text =
        "title: q\n"
        "hypothesis: {probes: [{slo: \"dual_sla>=90%\"}]}\n"
        "method: [{name: a, at: 5s, for: 3s, sim: \"http://127.0.0.1:1\",\n"
        "          fault: {type: error_rate, rate: 1}}]\n"
        "load: [\"--duration=20s\", \"--dual-sla\", \"window=4,quality=0.75,latency=1\"]\n";
    struct experiment *e = NULL;
    char err[512] = "";
    if (experiment_parse(text, strlen(text), "q.yaml", &e, err, sizeof(err)))
        fail_msg("%s", err);
    assert_true(e->has_dual_sla);
    assert_int_equal(e->dual.window, 4);
    struct buf b;
    buf_init(&b, 1 << 20);
    for (int i = 0; i < 200; i++) {
        double t = i * 100.0;
        bool bad = t >= 5000 && t < 8000;
        struct req_record r = ok_at(t);
        r.quality = (struct quality_scores){.have = QUALITY_HAVE_REF, .rouge_l = bad ? 0.2 : 1};
        assert_int_equal(req_record_append_json(&b, &r, START), 0);
    }
    const char *path = write_file(buf_cstr(&b));
    buf_release(&b);
    struct exp_requests *reqs = NULL;
    assert_int_equal(exp_requests_load(path, &reqs, err, sizeof(err)), 0);
    struct exp_window w[1] = {{5000, 8000}};
    enum exp_verdict v;
    json_t *rep = NULL;
    assert_int_equal(experiment_judge(e, reqs, w, 0, &v, &rep), 0);
    assert_int_equal(v, EXP_DEVIATED);
    const json_t *base = json_object_get(json_object_get(rep, "baseline"), "probes");
    assert_true(json_number_value(json_object_get(json_array_get(base, 0), "actual")) == 1.0);
    const json_t *ph = json_object_get(json_array_get(json_object_get(rep, "phases"), 0), "probes");
    assert_true(json_number_value(json_object_get(json_array_get(ph, 0), "actual")) == 0.0);
    assert_true(json_number_value(json_object_get(rep, "recovery_s")) == 0.0);
    json_decref(rep);
    exp_requests_free(reqs);
    experiment_free(e);
    unlink(path);
}

/* rouge_l is 1 except while the fault is on ([5 s, 8 s)): deviated, then back. */
static void test_judge_rouge(void **state)
{
    (void)state;
    static const char *const text =
        "title: q\n"
        "hypothesis: {probes: [{slo: \"rouge_l>0.9\"}, {slo: \"exact_match>=50%\"}]}\n"
        "method: [{name: a, at: 5s, for: 3s, sim: \"http://127.0.0.1:1\",\n"
        "          fault: {type: error_rate, rate: 1}}]\n"
        "load: [\"--duration=20s\", \"--prompts=refs.jsonl\"]\n";
    struct buf b;
    buf_init(&b, 1 << 20);
    for (int i = 0; i < 200; i++) {
        double t = i * 100.0;
        bool bad = t >= 5000 && t < 8000;
        struct req_record r = ok_at(t);
        r.quality = (struct quality_scores){.have = QUALITY_HAVE_REF,
                                            .rouge_l = bad ? 0.25 : 1,
                                            .bleu4 = bad ? 0 : 1,
                                            .exact = !bad};
        assert_int_equal(req_record_append_json(&b, &r, START), 0);
    }
    const char *path = write_file(buf_cstr(&b));
    buf_release(&b);
    struct exp_requests *r = NULL;
    struct experiment *e = NULL;
    char err[512] = "";
    assert_int_equal(exp_requests_load(path, &r, err, sizeof(err)), 0);
    unlink(path);
    assert_int_equal(experiment_parse(text, strlen(text), "q.yaml", &e, err, sizeof(err)), 0);
    struct exp_window w[1] = {{5000, 8000}};
    enum exp_verdict v;
    json_t *rep = NULL;
    assert_int_equal(experiment_judge(e, r, w, 0, &v, &rep), 0);
    assert_int_equal(v, EXP_DEVIATED);
    const json_t *base = json_object_get(json_object_get(rep, "baseline"), "probes");
    assert_true(json_number_value(json_object_get(json_array_get(base, 0), "actual")) == 1.0);
    assert_true(json_number_value(json_object_get(json_array_get(base, 1), "actual")) == 1.0);
    const json_t *ph = json_object_get(json_array_get(json_object_get(rep, "phases"), 0), "probes");
    assert_true(json_number_value(json_object_get(json_array_get(ph, 0), "actual")) == 0.25);
    assert_true(json_number_value(json_object_get(json_array_get(ph, 1), "actual")) == 0.0);
    assert_false(json_is_true(json_object_get(json_array_get(ph, 0), "holds")));
    /* the first window after the fault ([8 s, 10 s)) holds again */
    assert_true(json_number_value(json_object_get(rep, "recovery_s")) == 0.0);
    json_decref(rep);
    experiment_free(e);
    exp_requests_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_whole_run_probes_refused),
        cmocka_unit_test(test_judge_rouge),
        cmocka_unit_test(test_judge_dual_sla),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
