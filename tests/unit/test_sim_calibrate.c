/*
 * sim calibrate: hidden parameters recovered from results a simulator made,
 * and an honest misfit on a server that works differently.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <unistd.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "../../src/app/sim_calibrate.c"

static char tmpdir[256];

static void mkdir_p(const char *path)
{
    assert_true(mkdir(path, 0700) == 0);
}

static void rm_rf(const char *path)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
    assert_int_equal(system(cmd), 0);
}

/* A result.json with what calibrate reads (the fields `tokenstorm run` writes). */
static void write_result(const char *dir, const struct sim_offline_load *l, double ttft,
                         double tpot, double tok_s, uint32_t completed)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/result.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    if (l->mode == SIM_LOAD_CLOSED)
        fprintf(f, "{\"schema\":\"tokenstorm.result/1\",\"run\":{\"mode\":\"closed\",\"users\":%u,",
                l->concurrency);
    else
        fprintf(f, "{\"schema\":\"tokenstorm.result/1\",\"run\":{\"mode\":\"open\",\"rate\":%g,",
                l->rate);
    fprintf(f,
            "\"input_len\":\"%g\",\"output_len\":\"%g\",\"stream\":true},"
            "\"summary\":{\"completed\":%u,\"total_input_tokens\":%.0f,"
            "\"total_output_tokens\":%.0f,\"median_ttft_ms\":%.4f,\"median_tpot_ms\":%.4f,"
            "\"output_throughput\":%.4f}}\n",
            l->in_mean, l->out_mean, completed, l->in_mean * completed, l->out_mean * completed,
            ttft, tpot, tok_s);
    assert_int_equal(fclose(f), 0);
}

/* The hidden server: tiny's scheduler, with step-time parameters the fit must find. */
static struct sim_profile hidden(void)
{
    struct sim_profile p;
    assert_int_equal(sim_profile_preset("tiny", &p), 0);
    p.t_fix_ms = 0.8;
    p.t_w_ms = 6;
    p.b_ms_per_token = 0.03;
    p.t_sample_ms_per_seq = 0.05;
    p.max_num_batched_tokens = 2048;
    p.max_num_seqs = 64;
    p.noise = true;
    p.jitter_sigma = 0.03;
    p.seed = 5;
    return p;
}

static const struct {
    uint32_t users, in, out;
} loads[] = {{1, 600, 80}, {8, 600, 80}, {32, 600, 80}, {1, 2000, 40}, {16, 2000, 40}};

/* Results of the hidden server: four runs, and a sweep of the two long-prompt ones. */
static void make_results(const struct sim_profile *h)
{
    char dir[512];
    for (size_t i = 0; i < sizeof(loads) / sizeof(loads[0]); i++) {
        struct sim_offline_load l = {.mode = SIM_LOAD_CLOSED,
                                     .concurrency = loads[i].users,
                                     .requests = loads[i].users * 6 < 40 ? 40 : loads[i].users * 6,
                                     .in_mean = loads[i].in,
                                     .out_mean = loads[i].out,
                                     .seed = 99};
        struct sim_offline_result r;
        char err[256];
        /* not a replay of what calibrate runs: another seed, step jitter on */
        assert_int_equal(sim_offline_run(h, &l, &r, err, sizeof(err)), 0);
        if (i < 3)
            snprintf(dir, sizeof(dir), "%s/run%zu", tmpdir, i);
        else
            snprintf(dir, sizeof(dir), "%s/sweep/step-%zu", tmpdir, i);
        mkdir_p(dir);
        write_result(dir, &l, r.ttft_med_ms, r.tpot_med_ms, r.out_tok_per_s, l.requests);
    }
    snprintf(dir, sizeof(dir), "%s/sweep/sweep.json", tmpdir);
    FILE *f = fopen(dir, "w");
    assert_non_null(f);
    fprintf(f, "{\"steps\":[{\"dir\":\"step-3\"},{\"dir\":\"step-4\"}]}\n");
    assert_int_equal(fclose(f), 0);
}

static int setup(void **state)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/ts-calib-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    char d[512];
    snprintf(d, sizeof(d), "%s/sweep", tmpdir);
    mkdir_p(d);
    return 0;
}

static int teardown(void **state)
{
    rm_rf(tmpdir);
    return 0;
}

static size_t load_all(struct calib_point *pts)
{
    size_t n = 0;
    char err[512], d[512];
    for (int i = 0; i < 3; i++) {
        snprintf(d, sizeof(d), "%s/run%d", tmpdir, i);
        assert_int_equal(calib_load_dir(d, pts, &n, err, sizeof(err)), 0);
    }
    snprintf(d, sizeof(d), "%s/sweep", tmpdir);
    assert_int_equal(calib_load_dir(d, pts, &n, err, sizeof(err)), 0);
    return n;
}

static void test_recovers_hidden_parameters(void **state)
{
    struct sim_profile h = hidden();
    make_results(&h);
    static struct calib_point pts[CALIB_POINTS_MAX];
    size_t n = load_all(pts);
    assert_int_equal(n, 5);
    assert_int_equal(pts[3].load.in_mean, 2000);
    assert_int_equal(pts[3].load.concurrency, 1);

    /* start far from the truth: every key off by 2x one way or the other */
    struct sim_profile p = h;
    p.t_fix_ms = 1.6;
    p.t_w_ms = 3;
    p.b_ms_per_token = 0.06;
    p.t_sample_ms_per_seq = 0.025;
    struct calib_opts o = {
        .base = "tiny",
        .keys = {"t_fix_ms", "t_w_ms", "b_ms_per_token", "t_sample_ms_per_seq", NULL},
        .max_evals = 600};
    char err[256];
    assert_int_equal(calib_fit(&p, &o, pts, n, err, sizeof(err)), 0);
    printf("  recovered t_fix %.3f (0.8), t_w %.3f (6), b %.4f (0.03), t_sample %.4f (0.05)\n",
           p.t_fix_ms, p.t_w_ms, p.b_ms_per_token, p.t_sample_ms_per_seq);
    assert_float_equal(p.t_fix_ms, 0.8, 0.08);
    assert_float_equal(p.t_w_ms, 6, 0.6);
    assert_float_equal(p.b_ms_per_token, 0.03, 0.003);
    assert_float_equal(p.t_sample_ms_per_seq, 0.05, 0.005);

    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_int_equal(calib_print(out, &p, &o, NULL, pts, n), 0); /* no warnings */
    (void)h;
    fclose(out);
    printf("%s", text);
    assert_non_null(strstr(text, "base: tiny\nt_fix_ms: "));
    assert_non_null(strstr(text, "sweep/step-4 (16 users)"));
    /* the printed profile loads back as a --config file and gives the fitted numbers */
    struct sim_profile q;
    assert_int_equal(sim_profile_preset("llama3-8b-a100", &q), 0);
    assert_int_equal(sim_profile_load_yaml_mem(&q, "fit.yaml", text, len, err, sizeof(err)), 0);
    assert_float_equal(q.t_w_ms, p.t_w_ms, 1e-6);
    free(text);
}

/*
 * A llama.cpp-like server: every user is served at once in time-sliced slots
 * (no KV cap on the batch), so a token takes 8 + 1.5 ms per user and nobody
 * queues. The model, capped at 16 sequences, cannot follow it past 16 users.
 */
static void test_reports_misfit_honestly(void **state)
{
    static const uint32_t users[] = {1, 4, 16, 32, 64};
    char dir[512];
    for (size_t i = 0; i < 5; i++) {
        struct sim_offline_load l = {
            .mode = SIM_LOAD_CLOSED, .concurrency = users[i], .in_mean = 300, .out_mean = 100};
        double tpot = 8 + 1.5 * users[i];
        double ttft = 300 * 0.05 + tpot;
        double tok_s = users[i] * 100 / ((ttft + 99 * tpot) / 1000);
        snprintf(dir, sizeof(dir), "%s/llama%zu", tmpdir, i);
        mkdir_p(dir);
        write_result(dir, &l, ttft, tpot, tok_s, 50);
    }
    static struct calib_point pts[CALIB_POINTS_MAX];
    size_t n = 0;
    char err[512];
    for (size_t i = 0; i < 5; i++) {
        snprintf(dir, sizeof(dir), "%s/llama%zu", tmpdir, i);
        assert_int_equal(calib_load_dir(dir, pts, &n, err, sizeof(err)), 0);
    }
    struct sim_profile p;
    assert_int_equal(sim_profile_preset("tiny", &p), 0);
    p.max_num_seqs = 16;
    struct calib_opts o = {
        .base = "tiny",
        .keys = {"t_fix_ms", "t_w_ms", "b_ms_per_token", "t_sample_ms_per_seq", NULL},
        .max_evals = 300};
    assert_int_equal(calib_fit(&p, &o, pts, n, err, sizeof(err)), 0);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    int warnings = calib_print(out, &p, &o, NULL, pts, n);
    fclose(out);
    printf("%s", text);
    assert_true(warnings >= 2);
    assert_non_null(
        strstr(text, "measured TPOT keeps growing past the model's batch cap (16 seqs)"));
    assert_non_null(strstr(text, "llama4: the model's TTFT is off by"));
    free(text);
}

static void test_bad_results(void **state)
{
    static struct calib_point pts[4];
    size_t n = 0;
    char err[512], dir[512];
    snprintf(dir, sizeof(dir), "%s/nothing", tmpdir);
    assert_true(calib_load_dir(dir, pts, &n, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "nothing"));
    json_error_t je;
    json_t *doc = json_loads("{\"run\":{\"mode\":\"scenario\"},\"summary\":{\"completed\":3,"
                             "\"total_input_tokens\":30,\"total_output_tokens\":30}}",
                             0, &je);
    assert_int_equal(calib_point_from_result(doc, "x", &pts[0], err, sizeof(err)), TS_PARSE);
    assert_non_null(strstr(err, "x: a scenario run cannot be calibrated"));
    json_decref(doc);
    doc = json_loads("{\"run\":{\"mode\":\"open\",\"rate\":2,\"arrival\":\"gamma:2\"},"
                     "\"summary\":{\"completed\":3,\"total_input_tokens\":30,"
                     "\"total_output_tokens\":30,\"median_ttft_ms\":1}}",
                     0, &je);
    assert_int_equal(calib_point_from_result(doc, "g", &pts[0], err, sizeof(err)), TS_PARSE);
    assert_non_null(strstr(err, "only Poisson arrivals"));
    json_decref(doc);
    doc = json_loads("{\"run\":{\"mode\":\"open\",\"rate\":2,\"stream\":false},\"summary\":{}}", 0,
                     &je);
    assert_int_equal(calib_point_from_result(doc, "y", &pts[0], err, sizeof(err)), TS_PARSE);
    assert_non_null(strstr(err, "non-streamed"));
    json_decref(doc);
    snprintf(dir, sizeof(dir), "%s/badsweep", tmpdir);
    mkdir_p(dir);
    snprintf(dir, sizeof(dir), "%s/badsweep/sweep.json", tmpdir);
    FILE *f = fopen(dir, "w");
    fprintf(f, "{\"steps\":[{\"dir\":\"../etc\"}]}");
    fclose(f);
    snprintf(dir, sizeof(dir), "%s/badsweep", tmpdir);
    assert_int_equal(calib_load_dir(dir, pts, &n, err, sizeof(err)), TS_PARSE);
    assert_non_null(strstr(err, "bad dir"));
    /* --fit of a key that is not a number */
    struct sim_profile p;
    assert_int_equal(sim_profile_preset("tiny", &p), 0);
    struct calib_opts o = {.base = "tiny", .keys = {"max_num_seqs", NULL}};
    assert_int_equal(calib_fit(&p, &o, pts, 0, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "max_num_seqs"));
}

/* A closed-loop result (16 users, 500 in / 60 out) with a server section (may be ""). */
static json_t *doc_with(const char *server)
{
    char text[4096];
    snprintf(text, sizeof(text),
             "{\"schema\":\"tokenstorm.result/"
             "1\",\"run\":{\"mode\":\"closed\",\"users\":16,\"input_len\":\"500\","
             "\"output_len\":\"60\",\"stream\":true},\"summary\":{\"completed\":64,"
             "\"total_input_tokens\":32000,\"total_output_tokens\":3840,\"median_ttft_ms\":90,"
             "\"median_tpot_ms\":7,\"output_throughput\":900}%s%s}",
             *server ? "," : "", server);
    json_error_t je;
    json_t *doc = json_loads(text, 0, &je);
    if (!doc)
        fail_msg("%s: %s", text, je.text);
    return doc;
}

/* A point from a hand-built doc; returns calib_server_from_result's code. */
static int point_with(const char *server, struct calib_point *pt, char *err, size_t errlen)
{
    json_t *doc = doc_with(server);
    assert_int_equal(calib_point_from_result(doc, "r", pt, err, errlen), 0);
    int rc = calib_server_from_result(doc, "r/result.json", pt, err, errlen);
    json_decref(doc);
    return rc;
}

/* The tiny preset pinned from one result whose server section is `server`. */
static struct sim_profile pinned(const char *server, struct calib_pins *pins)
{
    struct calib_point pt;
    char err[512];
    struct sim_profile p;
    struct calib_opts o = {.base = "tiny", .keys = {"t_w_ms", NULL}};
    assert_int_equal(sim_profile_preset("tiny", &p), 0);
    assert_int_equal(point_with(server, &pt, err, sizeof(err)), 0);
    calib_pin(&p, &o, &pt, 1, pins);
    return p;
}

/* Six sequences at the cap while ten wait, KV 30% full; a scrape in passing at the start. */
#define AT_CAP                                                                                     \
    "\"server_metrics\":{\"url\":\"http://h/metrics\",\"interval_s\":1,\"flavor\":\"vllm\","       \
    "\"scrapes\":5,\"failures\":0,\"skipped\":0,\"dropped\":0,\"last_error\":null},"               \
    "\"server_timeline\":[{\"t_s\":0,\"running\":1,\"waiting\":15,\"kv_usage\":0.05},"             \
    "{\"t_s\":1,\"running\":6,\"waiting\":10,\"kv_usage\":0.31},"                                  \
    "{\"t_s\":2,\"running\":6,\"waiting\":10,\"kv_usage\":0.29},"                                  \
    "{\"t_s\":3,\"running\":6,\"waiting\":9,\"kv_usage\":0.30},"                                   \
    "{\"t_s\":4,\"running\":6,\"waiting\":10,\"kv_usage\":null,\"ttft_p50_ms\":null}]"

static void test_server_metrics_pin(void **state)
{
    struct calib_point pts[2];
    char err[512];
    assert_int_equal(point_with(AT_CAP, &pts[0], err, sizeof(err)), 0);
    assert_string_equal(pts[0].server.flavor, "vllm");
    assert_int_equal(pts[0].server.scrapes, 5);
    assert_int_equal(pts[0].server.at_peak_queued, 4);
    assert_int_equal(pts[0].server.kv_scrapes, 4);
    /* a second result without server metrics adds nothing and changes nothing */
    assert_int_equal(point_with("", &pts[1], err, sizeof(err)), 0);
    assert_int_equal(pts[1].server.scrapes, 0);

    struct sim_profile p;
    assert_int_equal(sim_profile_preset("tiny", &p), 0);
    p.max_model_len = 2048;
    struct calib_opts o = {.base = "tiny", .keys = {"t_w_ms", NULL}, .max_evals = 40};
    struct calib_pins pins;
    calib_pin(&p, &o, pts, 2, &pins);
    assert_true(pins.seqs && pins.kv);
    assert_int_equal(pins.with_metrics, 1);
    assert_int_equal(p.max_num_seqs, 6);
    /* 19 running-scrapes of 500 + 60/2 + 16/2 tokens over a usage of 0.05 + 0.31 + 0.29 + 0.30 */
    double want = (1 + 6 + 6 + 6) * (500 + 30 + 8) / 0.95;
    assert_float_equal((double)p.kv_capacity_tokens, want, 1);

    /* the YAML carries the pinned keys and says where each key came from, and loads back */
    assert_int_equal(calib_fit(&p, &o, pts, 2, err, sizeof(err)), 0);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    (void)calib_print(out, &p, &o, &pins, pts, 2);
    fclose(out);
    printf("%s", text);
    assert_non_null(strstr(text, "\nmax_num_seqs: 6\nkv_capacity_tokens: "));
    assert_non_null(strstr(text, "# server metrics: 1 of 2 results"));
    assert_non_null(strstr(text, "# fitted: t_w_ms\n"));
    assert_non_null(
        strstr(text, "# from server metrics: max_num_seqs: the batch held 6 sequences"));
    assert_non_null(strstr(text, "# from server metrics: kv_capacity_tokens: "));
    struct sim_profile q;
    assert_int_equal(sim_profile_preset("llama3-8b-a100", &q), 0);
    assert_int_equal(sim_profile_load_yaml_mem(&q, "fit.yaml", text, len, err, sizeof(err)), 0);
    assert_int_equal(sim_profile_validate(&q, err, sizeof(err)), 0);
    assert_int_equal(q.max_model_len, 2048); /* what the fit started from is in it too */
    assert_non_null(strstr(text, "# as you set them (--set, --config; not the base profile's):\n"
                                 "max_model_len: 2048\n"));
    assert_int_equal(q.max_num_seqs, 6);
    assert_int_equal(q.kv_capacity_tokens, p.kv_capacity_tokens);
    free(text);

    /* what the user --set is kept; --no-server-metrics pins nothing */
    assert_int_equal(sim_profile_preset("tiny", &p), 0);
    p.max_model_len = 2048;
    o.keep_seqs = true;
    calib_pin(&p, &o, pts, 2, &pins);
    assert_false(pins.seqs);
    assert_true(pins.kv);
    assert_int_equal(p.max_num_seqs, 4096);
    assert_string_equal(pins.seqs_why, "--set");
    assert_int_equal(sim_profile_preset("tiny", &p), 0);
    o.keep_seqs = false;
    o.no_server = true;
    calib_pin(&p, &o, pts, 2, &pins);
    assert_false(pins.seqs || pins.kv);
    assert_int_equal(p.kv_capacity_tokens, 1048576);
}

static void test_server_metrics_unused(void **state)
{
    struct calib_point pt;
    char err[512];
    struct sim_profile p, base;
    assert_int_equal(sim_profile_preset("tiny", &base), 0);
    struct calib_opts o = {.base = "tiny", .keys = {"t_w_ms", NULL}};
    struct calib_pins pins;

    /* no section: nothing pinned, and the YAML says so */
    assert_int_equal(point_with("", &pt, err, sizeof(err)), 0);
    p = base;
    calib_pin(&p, &o, &pt, 1, &pins);
    assert_false(pins.seqs || pins.kv);
    assert_memory_equal(&p, &base, sizeof(p));
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    (void)calib_print(out, &p, &o, &pins, &pt, 1);
    fclose(out);
    assert_non_null(strstr(text, "# left at the base profile: max_num_seqs: no result has server "
                                 "metrics (run with --server-metrics)"));
    assert_null(strstr(text, "\nmax_num_seqs:"));
    free(text);

    /* partial: only the info object, or scrapes without a usage, or an empty timeline */
    assert_int_equal(point_with("\"server_metrics\":{\"flavor\":null}", &pt, err, sizeof(err)), 0);
    assert_int_equal(pt.server.scrapes, 0);
    assert_int_equal(point_with("\"server_timeline\":[]", &pt, err, sizeof(err)), 0);
    assert_int_equal(pt.server.scrapes, 0);
    p = pinned("\"server_timeline\":[{\"running\":4,\"waiting\":3},{\"running\":4,"
               "\"waiting\":2},{\"t_s\":9}]",
               &pins);
    assert_true(pins.seqs);
    assert_false(pins.kv);
    assert_int_equal(p.max_num_seqs, 4);
    assert_non_null(strstr(pins.kv_why, "too little to measure"));

    /* a queue with the KV cache full is the KV cache's cap, not max_num_seqs */
    p = pinned("\"server_timeline\":[{\"running\":4,\"waiting\":3,\"kv_usage\":0.97},"
               "{\"running\":4,\"waiting\":3,\"kv_usage\":0.96}]",
               &pins);
    assert_false(pins.seqs);
    assert_non_null(strstr(pins.seqs_why, "the KV cache, not max_num_seqs"));
    /* ... also when a few of the queued scrapes caught the cache just under 90% */
    p = pinned("\"server_timeline\":[{\"running\":4,\"waiting\":3,\"kv_usage\":0.85},"
               "{\"running\":4,\"waiting\":3,\"kv_usage\":0.86},{\"running\":4,"
               "\"waiting\":3,\"kv_usage\":0.95},{\"running\":4,\"waiting\":3,"
               "\"kv_usage\":0.97},{\"running\":4,\"waiting\":3,\"kv_usage\":0.99}]",
               &pins);
    assert_false(pins.seqs);
    assert_non_null(strstr(pins.seqs_why, "at 3 of 5 scrapes with a queue"));
    /* waits at a batch smaller than one seen elsewhere are not the cap */
    p = pinned("\"server_timeline\":[{\"running\":2,\"waiting\":1},{\"running\":2,"
               "\"waiting\":1},{\"running\":9,\"waiting\":0}]",
               &pins);
    assert_false(pins.seqs);
    assert_non_null(strstr(pins.seqs_why, "but 9 ran at another scrape"));
    /* a KV estimate below max_model_len is not pinned, and says why */
    p = pinned("\"server_timeline\":[{\"running\":1,\"kv_usage\":0.5},{\"running\":1,"
               "\"kv_usage\":0.5},{\"running\":1,\"kv_usage\":0.5}]",
               &pins);
    assert_false(pins.kv);
    assert_non_null(strstr(pins.kv_why, "does not fit the profile"));
    assert_int_equal(p.kv_capacity_tokens, base.kv_capacity_tokens);
}

static void test_server_metrics_bad(void **state)
{
    static const struct {
        const char *section, *msg;
    } bad[] = {
        {"\"server_timeline\":{}", "r/result.json: server_timeline: expected an array"},
        {"\"server_timeline\":[{\"running\":1},7]",
         "r/result.json: server_timeline[1]: expected an object"},
        {"\"server_timeline\":[{\"running\":-1}]", "server_timeline[0].running: expected a count"},
        {"\"server_timeline\":[{\"running\":1e9}]", "server_timeline[0].running: expected a count"},
        {"\"server_timeline\":[{\"waiting\":\"3\"}]",
         "server_timeline[0].waiting: expected a count"},
        {"\"server_timeline\":[{\"running\":1},{\"kv_usage\":1.5}]",
         "server_timeline[1].kv_usage: expected a number 0 .. 1 or null"},
        {"\"server_timeline\":[{\"kv_usage\":true}]", "server_timeline[0].kv_usage"},
        {"\"server_metrics\":[]", "r/result.json: server_metrics: expected an object"},
        {"\"server_metrics\":{\"flavor\":3}", "server_metrics.flavor: expected a string"},
        {"\"server_metrics\":{\"flavor\":\"a-flavor-name-too-long\"}", "server_metrics.flavor"},
        {"\"server_metrics\":{\"scrapes\":-2}", "server_metrics.scrapes: expected a count"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct calib_point pt;
        char err[512] = "";
        int rc = point_with(bad[i].section, &pt, err, sizeof(err));
        if (rc != TS_PARSE || !strstr(err, bad[i].msg))
            fail_msg("%s: rc %d, '%s'", bad[i].section, rc, err);
        assert_int_equal(pt.server.scrapes, 0);
    }
    /* through calib_load_dir: the message names the file */
    char dir[512], path[600];
    snprintf(dir, sizeof(dir), "%s/badserver", tmpdir);
    mkdir_p(dir);
    snprintf(path, sizeof(path), "%s/result.json", dir);
    json_t *doc = doc_with("\"server_timeline\":[{\"running\":1,\"kv_usage\":\"full\"}]");
    assert_int_equal(json_dump_file(doc, path, 0), 0);
    json_decref(doc);
    struct calib_point pts[2];
    size_t n = 0;
    char err[512];
    assert_int_equal(calib_load_dir(dir, pts, &n, err, sizeof(err)), TS_PARSE);
    assert_int_equal(n, 0);
    if (!strstr(err, "badserver/result.json: server_timeline[0].kv_usage"))
        fail_msg("%s", err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recovers_hidden_parameters),
        cmocka_unit_test(test_reports_misfit_honestly),
        cmocka_unit_test(test_bad_results),
        cmocka_unit_test(test_server_metrics_pin),
        cmocka_unit_test(test_server_metrics_unused),
        cmocka_unit_test(test_server_metrics_bad),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
