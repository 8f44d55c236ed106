/*
 * test_sweep.c - the pure half of the sweep: a result.json into a step and
 * its saturation signals, the judgement against lower loads, the plan of the
 * next load, the findings and sweep.json, and the argument helpers. The
 * processes themselves are covered by tests/integration/sweep.test.mjs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <math.h>
#include <string.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "app/sweep.h"

static void assert_near(double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol))
        fail_msg("got %.9g, want %.9g (+- %g)", got, want, tol);
}

/*
 * A result document: 5 one-second points while sending 10/s, then one drain
 * point. ttft0/ttft_step: TTFT p50 of point i is ttft0 + i * ttft_step;
 * done: completions per second; inflight0/inflight_step likewise.
 */
static json_t *result_doc(double ttft0, double ttft_step, double done, double inflight0,
                          double inflight_step)
{
    json_t *tl = json_array();
    for (int i = 0; i < 5; i++)
        json_array_append_new(tl, json_pack("{s:f, s:i, s:f, s:i, s:f, s:f}", "t_s", 1.0 + i,
                                            "sent", 10, "completed", done, "errors", 0, "in_flight",
                                            inflight0 + i * inflight_step, "ttft_p50_ms",
                                            ttft0 + i * ttft_step));
    json_array_append_new(tl, json_pack("{s:f, s:i, s:i, s:f, s:f}", "t_s", 5.5, "sent", 0,
                                        "completed", 50, "in_flight", 0.0, "ttft_p50_ms", 9999.0));
    json_t *doc = json_pack(
        "{s:s, s:{s:f, s:f}, s:{s:f, s:f, s:f, s:n, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, "
        "s:f}, s:[{s:s, s:b}, {s:s, s:b}], s:o}",
        "schema", "tokenstorm.result/1", "run", "rate", 10.0, "warmup_s", 0.0, "summary",
        "request_throughput", 9.5, "duration", 5.5, "output_throughput", 190.0, "request_goodput",
        "requests", 50, "completed", 48, "failed", 2, "error_rate", 2.0 / 50, "p50_ttft_ms", 12.0,
        "p99_ttft_ms", 30.0, "p50_tpot_ms", 5.0, "p99_tpot_ms", 6.0, "p50_e2el_ms", 500.0,
        "p99_e2el_ms", 700.0, "slo", "expr", "a", "pass", 1, "expr", "b", "pass", 0, "timeline",
        tl);
    assert_non_null(doc);
    return doc;
}

static void test_read_summary(void **state)
{
    json_t *doc = result_doc(10, 0, 10, 5, 0);
    struct sweep_step st;
    char err[256];
    (void)state;
    memset(&st, 0, sizeof(st));
    assert_int_equal(sweep_step_read(doc, SWEEP_RATE, &st, err, sizeof(err)), 0);
    assert_near(st.offered, 10, 0);
    /* rates over the steady window (from one E2EL p50 of 0.5 s to the last
     * send: [0.5, 5] s), not the summary's 9.5 over 5.5 s with the drain;
     * sends over the sending window [0, 5] */
    assert_near(st.window_s, 4.5, 1e-12);
    assert_near(st.sent_rps, 10, 1e-12);
    assert_near(st.achieved_rps, 10, 1e-12);
    assert_near(st.output_tps, 190, 0); /* no tokens in the timeline: the summary's */
    assert_true(isnan(st.goodput_rps));
    assert_near(st.ttft_p99_ms, 30, 0);
    assert_near(st.e2el_p50_ms, 500, 0);
    assert_near(st.error_rate, 0.04, 1e-12);
    assert_int_equal(st.requests, 50);
    assert_int_equal(st.completed, 48);
    assert_int_equal(st.failed, 2);
    assert_int_equal(st.nslo, 2);
    assert_false(st.slo_pass);
    assert_false(st.has_quality);
    /* flat TTFT, flat in-flight, completions = sends: not saturated */
    assert_int_equal(st.saturation, 0);
    assert_near(st.ttft_slope_ms_s, 0, 1e-12);
    assert_near(st.completion_ratio, 1, 1e-12);
    /* closed loop: offered is what was sent over the window */
    assert_int_equal(sweep_step_read(doc, SWEEP_CONCURRENCY, &st, err, sizeof(err)), 0);
    assert_near(st.offered, 10, 1e-12);
    /* a configured sending time of 3.4 s: sending ends with the third
     * point, the steady window is [0.5, 3] s */
    st.send_s = 3.4;
    assert_int_equal(sweep_step_read(doc, SWEEP_RATE, &st, err, sizeof(err)), 0);
    assert_near(st.window_s, 2.5, 1e-12);
    assert_near(st.achieved_rps, 10, 1e-12);
    /* the run's own window, when result.json has it, is taken as it is */
    json_object_set_new(json_object_get(doc, "summary"), "window",
                        json_pack("{s:s, s:f, s:f, s:f, s:f, s:f}", "method", "steady_window",
                                  "sent_rps", 9.0, "start_s", 1.0, "end_s", 4.0,
                                  "request_throughput", 8.5, "output_throughput", 170.0));
    assert_int_equal(sweep_step_read(doc, SWEEP_RATE, &st, err, sizeof(err)), 0);
    assert_near(st.window_s, 3, 1e-12);
    assert_near(st.sent_rps, 9, 1e-12);
    assert_near(st.achieved_rps, 8.5, 1e-12);
    assert_near(st.output_tps, 170, 1e-12);
    /* a run without a steady window: the summary's whole-run rates */
    json_object_set_new(json_object_get(doc, "summary"), "window",
                        json_pack("{s:s, s:n}", "method", "whole_run", "sent_rps"));
    assert_int_equal(sweep_step_read(doc, SWEEP_RATE, &st, err, sizeof(err)), 0);
    assert_near(st.achieved_rps, 9.5, 1e-12);
    assert_true(isnan(st.window_s));
    json_object_del(json_object_get(doc, "summary"), "window");
    /* a server that sends its role chunk first: the step's TTFT (the knee's
     * and the table's) is the first token users see (ttfc), not vLLM's */
    json_t *sum = json_object_get(doc, "summary");
    json_object_set_new(sum, "p50_ttfc_ms", json_real(150.0));
    json_object_set_new(sum, "p99_ttfc_ms", json_real(180.0));
    assert_int_equal(sweep_step_read(doc, SWEEP_RATE, &st, err, sizeof(err)), 0);
    assert_near(st.ttft_p50_ms, 150, 0);
    assert_near(st.ttft_p99_ms, 180, 0);
    json_decref(doc);
}

/*
 * A saturated step: TTFT p50 100, 200, ... 500 ms (slope 100 ms/s, rise 400
 * >= 50); 7 completions per 10 sends (0.7 < 0.9; sends of points 0-3
 * against completions of points 1-4, one e2el p50 of 0.5 s apart rounded up
 * to an interval: 40 sent, 28 done, short by 12 > 2 * sqrt(2 * 40 / 4));
 * in flight 2, 4, .. 10 (points from t = 2 s: slope 2/s, rise 6 >= max(2,
 * 0.5 * 7)).
 */
static void test_read_saturated(void **state)
{
    json_t *doc = result_doc(100, 100, 7, 2, 2);
    struct sweep_step st;
    char err[256];
    (void)state;
    memset(&st, 0, sizeof(st));
    assert_int_equal(sweep_step_read(doc, SWEEP_RATE, &st, err, sizeof(err)), 0);
    assert_int_equal(st.saturation, SWEEP_SAT_TTFT | SWEEP_SAT_THROUGHPUT | SWEEP_SAT_QUEUE);
    assert_near(st.ttft_slope_ms_s, 100, 1e-9);
    assert_true(isinf(st.ttft_t));
    assert_near(st.inflight_slope_s, 2, 1e-9);
    assert_near(st.completion_ratio, 0.7, 1e-12);
    /* the closed loop has no queue or follow signal, only TTFT */
    assert_int_equal(sweep_step_read(doc, SWEEP_CONCURRENCY, &st, err, sizeof(err)), 0);
    assert_int_equal(st.saturation, SWEEP_SAT_TTFT);
    json_decref(doc);
    /* a small rise (4 ms over the window) is not saturation */
    doc = result_doc(10, 1, 10, 5, 0);
    assert_int_equal(sweep_step_read(doc, SWEEP_RATE, &st, err, sizeof(err)), 0);
    assert_int_equal(st.saturation, 0);
    json_decref(doc);
    /* nor is 20 -> 32 ms: significant, over 10 ms, but TTFT did not double */
    doc = result_doc(20, 3, 10, 5, 0);
    assert_int_equal(sweep_step_read(doc, SWEEP_RATE, &st, err, sizeof(err)), 0);
    assert_near(st.ttft_slope_ms_s, 3, 1e-9);
    assert_int_equal(st.saturation, 0);
    json_decref(doc);
    /* 20 -> 44 ms doubles it */
    doc = result_doc(20, 6, 10, 5, 0);
    assert_int_equal(sweep_step_read(doc, SWEEP_RATE, &st, err, sizeof(err)), 0);
    assert_int_equal(st.saturation, SWEEP_SAT_TTFT);
    json_decref(doc);
}

/* One timeline point: t, sent, completed, in flight, TTFT p50, send lag p99. */
static json_t *tl_point(double t, int sent, int done, int inflight, double ttft, double lag)
{
    return json_pack("{s:f, s:i, s:i, s:i, s:i, s:f, s:f}", "t_s", t, "sent", sent, "completed",
                     done, "errors", 0, "in_flight", inflight, "ttft_p50_ms", ttft, "lag_p99_ms",
                     lag);
}

static json_t *real_doc(json_t *tl, double rate, double e2el_p50)
{
    json_t *doc = json_pack("{s:s, s:{s:f, s:f, s:i}, s:{s:f, s:f, s:i, s:i, s:f, s:f, s:f}, s:o}",
                            "schema", "tokenstorm.result/1", "run", "rate", rate, "warmup_s", 0.0,
                            "seed", 77, "summary", "request_throughput", 1.0, "duration", 21.5,
                            "requests", 29, "completed", 29, "error_rate", 0.0, "p50_ttft_ms", 30.0,
                            "p50_e2el_ms", e2el_p50, "timeline", tl);
    assert_non_null(doc);
    return doc;
}

/*
 * The timeline of a real 20 s step at 1.95 req/s against the simulator's
 * llama3-8b-a100 profile, far below its capacity (E2EL p50 1.56 s): 29
 * sends, seconds with no send (whose completions were dropped), the drain.
 * The old rule read completions/sends 0.71 over the seconds with a send and
 * flagged it "throughput"; one request time apart over the whole window
 * they are 24/26, well inside the noise of the edges: not saturated.
 */
static void test_read_short_requests_window(void **state)
{
    static const double p[][6] = {
        {0.981, 4, 0, 4, 0, 0},        {1.981, 1, 2, 3, 25.3, 0.15},  {2.986, 1, 3, 1, 33.1, 0.13},
        {3.986, 3, 0, 4, 0, 0},        {4.987, 1, 3, 2, 30.9, 0.17},  {5.988, 3, 1, 4, 92.7, 0.14},
        {6.988, 2, 3, 3, 59.9, 0.16},  {7.99, 0, 1, 2, 69.1, 0.08},   {8.991, 2, 2, 2, 15.8, 0.12},
        {9.992, 0, 0, 2, 0, 0},        {10.992, 0, 2, 0, 22.0, 0.1},  {11.994, 1, 1, 0, 27.4, 0.13},
        {12.994, 1, 0, 1, 0, 0},       {13.996, 1, 0, 2, 0, 0},       {14.996, 2, 1, 3, 32.5, 0.15},
        {15.998, 1, 2, 2, 55.3, 50.8}, {16.998, 1, 1, 2, 24.3, 0.11}, {18.0, 2, 0, 4, 0, 0},
        {19.001, 0, 4, 0, 26.5, 0.11}, {20.002, 3, 0, 3, 0, 0},       {21.003, 0, 1, 2, 56.3, 0.08},
        {21.463, 0, 2, 0, 16.2, 0.18}};
    json_t *tl = json_array();
    struct sweep_step st;
    char err[256];
    (void)state;
    for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
        json_array_append_new(
            tl, tl_point(p[i][0], (int)p[i][1], (int)p[i][2], (int)p[i][3], p[i][4], p[i][5]));
    json_t *doc = real_doc(tl, 1.95, 1557.5);
    memset(&st, 0, sizeof(st));
    st.send_s = 20;
    assert_int_equal(sweep_step_read(doc, SWEEP_RATE, &st, err, sizeof(err)), 0);
    assert_int_equal(st.saturation, 0);
    assert_near(st.completion_ratio, 24.0 / 26, 1e-12); /* sends 0..17 against done 2..19 */
    /* the steady window: from one E2EL p50 (1.5575 s) to the last send; 24
     * completed in it, and 2 * 0.4235 of the interval the ramp ends in */
    assert_near(st.window_s, 20.002 - 1.5575, 1e-9);
    assert_near(st.sent_rps, 29 / 20.002, 1e-9); /* 1.45 sent of 1.95 asked */
    assert_near(st.achieved_rps, (24 + 2 * (1.981 - 1.5575)) / (20.002 - 1.5575), 1e-9);
    assert_int_equal(st.seed, 77);
    /* without the configured time: up to the last send, the same here */
    st.send_s = 0;
    assert_int_equal(sweep_step_read(doc, SWEEP_RATE, &st, err, sizeof(err)), 0);
    assert_near(st.window_s, 20.002 - 1.5575, 1e-9);
    json_decref(doc);
}

/*
 * A server that cannot keep up: 20 sends a second over 20 s, 16 completions
 * a second (from t = 2), E2EL p50 1.5 s: flagged "throughput", and the
 * achieved rate is what completed inside the window. A window shorter than 3
 * request times is not judged on it. A send lag that climbs (a --concurrency
 * cap full) is "send_lag".
 */
static void test_read_behind_and_lag(void **state)
{
    json_t *tl = json_array();
    struct sweep_step st;
    char err[256];
    (void)state;
    for (int i = 0; i < 20; i++)
        json_array_append_new(tl, tl_point(1.0 + i, 20, i >= 2 ? 16 : 0, 10, 50, 100.0 * i));
    json_array_append_new(tl, tl_point(21, 0, 30, 0, 50, 0));
    json_t *doc = real_doc(tl, 20, 1500);
    memset(&st, 0, sizeof(st));
    st.send_s = 20;
    assert_int_equal(sweep_step_read(doc, SWEEP_RATE, &st, err, sizeof(err)), 0);
    assert_true(st.saturation & SWEEP_SAT_THROUGHPUT);
    assert_true(st.saturation & SWEEP_SAT_SEND_LAG);
    assert_near(st.completion_ratio, 16.0 * 18 / (20 * 18), 1e-12);
    /* what the server kept up with: 16/s from t = 2 s, over the steady
     * window [1.5, 20] s (its first half second had none) */
    assert_near(st.achieved_rps, 16.0 * 18 / 18.5, 1e-12);
    assert_near(st.sent_rps, 20, 1e-12);
    assert_near(st.lag_slope_ms_s, 100, 1e-9);
    json_decref(doc);
    /* E2EL 8 s in a 20 s window: too short to tell what is still in flight */
    tl = json_array();
    for (int i = 0; i < 20; i++)
        json_array_append_new(tl, tl_point(1.0 + i, 20, i >= 8 ? 10 : 0, 10, 50, 0));
    doc = real_doc(tl, 20, 8000);
    memset(&st, 0, sizeof(st));
    st.send_s = 20;
    assert_int_equal(sweep_step_read(doc, SWEEP_RATE, &st, err, sizeof(err)), 0);
    assert_true(isnan(st.completion_ratio));
    assert_false(st.saturation & SWEEP_SAT_THROUGHPUT);
    json_decref(doc);
}

static void test_step_seed(void **state)
{
    const char *none[] = {"--duration", "2s"}, *given[] = {"--seed", "42"}, *eq[] = {"--seed=42"};
    uint64_t seen[64];
    (void)state;
    for (int i = 1; i <= 64; i++) {
        seen[i - 1] = sweep_step_seed(none, 2, i);
        assert_true(seen[i - 1] < (1ull << 53));
        for (int k = 0; k < i - 1; k++)
            assert_true(seen[k] != seen[i - 1]);
    }
    assert_true(sweep_step_seed(none, 2, 3) == seen[2]); /* the same sweep, the same seeds */
    assert_true(sweep_step_seed(given, 2, 3) != seen[2]);
    assert_true(sweep_step_seed(given, 2, 3) == sweep_step_seed(eq, 1, 3));
}

static void test_read_bad_and_quality(void **state)
{
    struct sweep_step st;
    char err[256];
    (void)state;
    memset(&st, 0, sizeof(st));
    json_t *doc = json_pack("{s:s}", "schema", "tokenstorm.sweep/1");
    assert_int_equal(sweep_step_read(doc, SWEEP_RATE, &st, err, sizeof(err)), TS_PARSE);
    json_decref(doc);
    doc = json_pack("{s:s, s:{s:f}}", "schema", "tokenstorm.result/1", "summary", "duration", 1.0);
    assert_int_equal(sweep_step_read(doc, SWEEP_RATE, &st, err, sizeof(err)), TS_PARSE);
    json_decref(doc);
    /* nothing completed: latencies are unknown, not 0 */
    doc = json_pack("{s:s, s:{s:f, s:f, s:i, s:f, s:f}, s:{s:{s:f}, s:{s:f}, s:f}}", "schema",
                    "tokenstorm.result/1", "summary", "request_throughput", 0.0, "duration", 2.0,
                    "completed", 0, "p99_ttft_ms", 0.0, "error_rate", 1.0, "quality", "rouge_l",
                    "mean", 0.75, "bleu4", "mean", 0.5, "exact_match_rate", 0.25);
    assert_int_equal(sweep_step_read(doc, SWEEP_RATE, &st, err, sizeof(err)), 0);
    assert_true(isnan(st.ttft_p99_ms));
    assert_true(st.slo_pass); /* no verdicts */
    assert_int_equal(st.nslo, 0);
    assert_true(st.has_quality);
    assert_near(st.rouge_l_mean, 0.75, 0);
    assert_near(st.bleu4_mean, 0.5, 0);
    assert_near(st.exact_match_rate, 0.25, 0);
    json_decref(doc);
}

static struct sweep_step mkstep(double load, double achieved, double err_rate, uint64_t n)
{
    struct sweep_step s;
    memset(&s, 0, sizeof(s));
    s.load = load;
    s.achieved_rps = achieved;
    s.error_rate = err_rate;
    s.completed = n - (uint64_t)llround(err_rate * (double)n);
    s.failed = n - s.completed;
    s.slo_pass = true;
    s.ttft_p99_ms = s.ttft_p50_ms = s.tpot_p99_ms = s.e2el_p99_ms = s.e2el_p50_ms = NAN;
    s.rouge_l_mean = s.bleu4_mean = s.exact_match_rate = s.goodput_rps = NAN;
    return s;
}

static void test_judge(void **state)
{
    struct sweep_step e[3] = {mkstep(5, 5, 0.0, 1000), mkstep(10, 10, 0.002, 1000),
                              mkstep(40, 10, 0.0, 1000)};
    struct sweep_step st = mkstep(20, 19, 0.05, 1000);
    (void)state;
    /* 5% vs 0% over 1000 requests: 5 points and ~7 standard errors */
    sweep_step_judge(&st, e, 3, SWEEP_RATE);
    assert_int_equal(st.saturation, SWEEP_SAT_ERRORS);
    /* 0.8%: below the 1-point floor */
    st = mkstep(20, 19, 0.008, 1000);
    sweep_step_judge(&st, e, 3, SWEEP_RATE);
    assert_int_equal(st.saturation, 0);
    /* 3% over 40 requests: 1.2 requests, within noise (se 2.7 points) */
    st = mkstep(20, 19, 0.03, 40);
    sweep_step_judge(&st, e, 3, SWEEP_RATE);
    assert_int_equal(st.saturation, 0);
    /* the closed loop: 8 users after 4 gave 40 req/s; 41 is a plateau, 70 is not */
    struct sweep_step c[2] = {mkstep(2, 20, 0, 100), mkstep(4, 40, 0, 100)};
    st = mkstep(8, 41, 0, 100);
    sweep_step_judge(&st, c, 2, SWEEP_CONCURRENCY);
    assert_int_equal(st.saturation, SWEEP_SAT_THROUGHPUT);
    st = mkstep(8, 70, 0, 100);
    sweep_step_judge(&st, c, 2, SWEEP_CONCURRENCY);
    assert_int_equal(st.saturation, 0);
    /* no lower step: nothing to compare with */
    st = mkstep(1, 1, 0.5, 100);
    sweep_step_judge(&st, c, 2, SWEEP_CONCURRENCY);
    assert_int_equal(st.saturation, 0);
    /* rate mode: a step whose sends rose 25% over the best lower step while
     * its completions stayed flat (a 3 s step: too short to compare them one
     * request time apart) is a plateau; completions that rose with the sends,
     * or a rise within noise, are not */
    struct sweep_step r[2] = {mkstep(15, 14.1, 0, 100), mkstep(20, 18.8, 0, 100)};
    r[1].sent_rps = 20.1;
    st = mkstep(25, 18.8, 0, 100);
    st.sent_rps = 25.1;
    sweep_step_judge(&st, r, 2, SWEEP_RATE);
    assert_int_equal(st.saturation, SWEEP_SAT_THROUGHPUT);
    st = mkstep(25, 23.4, 0, 100);
    st.sent_rps = 25.1;
    sweep_step_judge(&st, r, 2, SWEEP_RATE);
    assert_int_equal(st.saturation, 0);
    st = mkstep(21, 18.8, 0, 100);
    sweep_step_judge(&st, r, 2, SWEEP_RATE);
    assert_int_equal(st.saturation, 0);
}

static void test_plan_grid_and_stop(void **state)
{
    struct sweep_plan p = {
        .mode = SWEEP_RATE, .grid = {5, 10, 15, 20}, .ngrid = 4, .tolerance = 0.1};
    struct sweep_step s[8];
    double load = 0;
    (void)state;
    memset(s, 0, sizeof(s));
    assert_true(sweep_plan_next(&p, s, 0, &load));
    assert_near(load, 5, 0);
    s[0] = mkstep(5, 5, 0, 100);
    s[1] = mkstep(10, 9, 0, 100);
    assert_true(sweep_plan_next(&p, s, 2, &load));
    assert_near(load, 15, 0);
    s[1].saturation = SWEEP_SAT_TTFT; /* 10 saturated: stop climbing */
    assert_false(sweep_plan_next(&p, s, 2, &load));
    p.past_saturation = 1; /* one more grid step above it */
    assert_true(sweep_plan_next(&p, s, 2, &load));
    assert_near(load, 15, 0);
    s[2] = mkstep(15, 9, 0, 100);
    s[2].saturation = SWEEP_SAT_QUEUE;
    assert_false(sweep_plan_next(&p, s, 3, &load));
    /* 15 unsaturated above a saturated 10: 10's flag was not the onset, so
     * the climb goes on (a false alarm low down cannot end the sweep) */
    s[2].saturation = 0;
    assert_true(sweep_plan_next(&p, s, 3, &load));
    assert_near(load, 20, 0);
    p.past_saturation = 0;
    assert_true(sweep_plan_next(&p, s, 3, &load));
    assert_near(load, 20, 0);
    /* refinement: bisect the saturation bracket [5, 10] */
    p.past_saturation = 0;
    p.refine = 2;
    assert_true(sweep_plan_next(&p, s, 2, &load));
    assert_near(load, 7.5, 0);
    s[2] = mkstep(7.5, 7.5, 0, 100);
    assert_true(sweep_plan_next(&p, s, 3, &load));
    assert_near(load, 8.75, 0); /* 8.75: three significant digits already */
    s[3] = mkstep(8.75, 8.7, 0, 100);
    assert_false(sweep_plan_next(&p, s, 4, &load)); /* refine budget used */
    p.refine = 5;
    /* [8.75, 10] is 12.5% of 10 > 10%: one more, 9.375 -> 9.38 */
    assert_true(sweep_plan_next(&p, s, 4, &load));
    assert_near(load, 9.38, 1e-12);
    s[4] = mkstep(9.38, 9.3, 0, 100);
    assert_false(sweep_plan_next(&p, s, 5, &load)); /* converged */
}

static void test_plan_slo_bracket_and_extend(void **state)
{
    struct sweep_plan p = {.mode = SWEEP_RATE,
                           .grid = {10, 20, 40},
                           .ngrid = 3,
                           .tolerance = 0.1,
                           .refine = 3,
                           .extend = 1.25};
    struct sweep_step s[6];
    double load = 0;
    (void)state;
    s[0] = mkstep(10, 10, 0, 100);
    s[1] = mkstep(20, 20, 0, 100);
    s[2] = mkstep(40, 35, 0, 100);
    /* nothing saturated, nothing failed: climb on from 40 */
    assert_true(sweep_plan_next(&p, s, 3, &load));
    assert_near(load, 50, 0);
    /* SLO verdicts: pass at 10, fail at 20 (bracket 50% wide); saturation
     * bracket [20, 40] (50%): the SLO one goes first on a tie */
    for (int i = 0; i < 3; i++)
        s[i].nslo = 1;
    s[1].slo_pass = s[2].slo_pass = false;
    s[2].saturation = SWEEP_SAT_THROUGHPUT;
    assert_true(sweep_plan_next(&p, s, 3, &load));
    assert_near(load, 15, 0);
    s[3] = mkstep(15, 15, 0, 100);
    s[3].nslo = 1;
    /* SLO bracket [15, 20] is 25%, saturation [20, 40] 50%: the latter */
    assert_true(sweep_plan_next(&p, s, 4, &load));
    assert_near(load, 30, 0);
    /* concurrency: whole midpoints strictly inside */
    struct sweep_plan c = {
        .mode = SWEEP_CONCURRENCY, .grid = {4, 5}, .ngrid = 2, .tolerance = 0.01, .refine = 3};
    s[0] = mkstep(4, 40, 0, 100);
    s[1] = mkstep(5, 40, 0, 100);
    s[1].saturation = SWEEP_SAT_THROUGHPUT;
    assert_false(sweep_plan_next(&c, s, 2, &load));
    s[1].load = 8;
    c.grid[1] = 8;
    assert_true(sweep_plan_next(&c, s, 2, &load));
    assert_near(load, 6, 0);
}

static void test_plan_ladder_and_adaptive(void **state)
{
    struct sweep_plan p = {.mode = SWEEP_RATE};
    (void)state;
    assert_int_equal(sweep_plan_ladder(&p, 1, 2, 16), 0);
    assert_int_equal(p.ngrid, 5);
    assert_near(p.grid[4], 16, 0);
    p.mode = SWEEP_CONCURRENCY;
    assert_int_equal(sweep_plan_ladder(&p, 1, 1.5, 8), 0);
    /* 1, 1.5->2, 2.25->2 (dropped), 3.375->3, 5.06->5, 7.59->8 */
    assert_int_equal(p.ngrid, 5);
    const double want[] = {1, 2, 3, 5, 8};
    for (int i = 0; i < 5; i++)
        assert_near(p.grid[i], want[i], 0);
    assert_int_equal(sweep_plan_ladder(&p, 1, 1, 8), -EINVAL);
    assert_int_equal(sweep_plan_ladder(&p, 0, 2, 8), -EINVAL);
    assert_int_equal(sweep_plan_ladder(&p, 1, 1.001, 1e9), -EINVAL); /* > 64 loads */

    p.mode = SWEEP_RATE;
    assert_int_equal(sweep_plan_adaptive(&p, 3, 9.6, 19.2, 0.1), 0);
    assert_int_equal(p.ngrid, 3);
    assert_near(p.grid[0], 9.6, 1e-12);
    assert_near(p.grid[1], 13.58, 1e-12); /* 9.6 * sqrt(2) = 13.576 */
    assert_near(p.grid[2], 19.2, 1e-12);
    assert_near(p.extend, 1.25, 0);
    /* a tiny sync rate: the grid starts at a tenth of the saturated one */
    assert_int_equal(sweep_plan_adaptive(&p, 2, 0.5, 100, 1), 0);
    assert_near(p.grid[0], 10, 0);
    p.mode = SWEEP_CONCURRENCY;
    /* Little: 20 req/s * 0.1 s = 2 users at saturation; the grid goes to 4 */
    assert_int_equal(sweep_plan_adaptive(&p, 3, 10, 20, 0.1), 0);
    assert_int_equal(p.ngrid, 3);
    assert_near(p.grid[0], 1, 0);
    assert_near(p.grid[1], 2, 0);
    assert_near(p.grid[2], 4, 0);
    assert_int_equal(sweep_plan_adaptive(&p, 3, 10, 0, 0.1), -EINVAL);
}

/* Five steps whose answers are known: knee, SLO bracket, lambda_c, quality. */
static void five_steps(struct sweep_step *s)
{
    const double ttft[] = {10, 10, 10, 12, 500}, eps[] = {0, 0, 0.002, 0.01, 0.05};
    const double rouge[] = {0.8, 0.8, 0.79, 0.7, 0.6};
    for (int i = 0; i < 5; i++) {
        s[i] = mkstep(5.0 * (i + 1), 5.0 * (i + 1) * 0.98, eps[i], 1000);
        s[i].ttft_p99_ms = ttft[i];
        s[i].nslo = 1;
        s[i].slo_pass = i < 4;
        s[i].has_quality = true;
        s[i].rouge_l_mean = rouge[i];
        snprintf(s[i].dir, sizeof(s[i].dir), "step-%02d-rate-%d", i + 1, 5 * (i + 1));
        s[i].seq = i + 1;
    }
    s[4].saturation = SWEEP_SAT_TTFT | SWEEP_SAT_ERRORS;
}

static void test_analyse(void **state)
{
    struct sweep_step s[6];
    struct sweep_analysis_cfg cfg = {.knee_metric = SWEEP_KNEE_TTFT_P99,
                                     .knee_min_score = 0.1,
                                     .epsilon0 = 0.01,
                                     .fit_min_points = 3,
                                     .has_slos = true};
    struct sweep_findings f;
    (void)state;
    five_steps(s);
    /* out of order on purpose */
    struct sweep_step t = s[0];
    s[0] = s[3];
    s[3] = t;
    sweep_analyse(s, 5, &cfg, &f);
    assert_true(f.has_knee);
    assert_near(f.knee_load, 20, 0); /* x_n 0.75, y_n 0.004: d = 0.746 */
    assert_near(f.knee_latency_ms, 12, 0);
    assert_near(f.knee_throughput, 19.6, 1e-12);
    assert_true(f.has_goodput);
    assert_near(f.goodput_load, 20, 0);
    assert_true(f.goodput_from_throughput);
    assert_near(f.goodput_rps, 19.6, 1e-12);
    assert_near(f.bracket_pass, 20, 0);
    assert_near(f.bracket_fail, 25, 0);
    /* 0.002, 0.01, 0.05 at 15, 20, 25: x5 per 5 req/s, 1% at 20 */
    assert_true(f.has_critical);
    assert_near(f.lambda_c, 20, 1e-9);
    assert_near(f.delta_lambda, 5 / log(5), 1e-9);
    assert_int_equal(f.critical_points, 3);
    assert_true(f.has_quality_drop);
    assert_near(f.quality_from, 0.8, 0);
    assert_near(f.quality_from_load, 5, 0);
    assert_near(f.quality_to, 0.6, 0);
    assert_near(f.quality_to_load, 25, 0);
    /* an interrupted step is left out; without SLOs there is no goodput */
    s[0].interrupted = true; /* the step at 20 */
    cfg.has_slos = false;
    sweep_analyse(s, 5, &cfg, &f);
    assert_false(f.has_goodput);
    assert_near(f.knee_load, 15, 0);
    assert_false(f.has_critical); /* 2 points < 3 */
}

static void test_json(void **state)
{
    struct sweep_outcome *o = ts_calloc(1, sizeof(*o));
    const char *slos[] = {"ttft.p99<100ms"};
    json_t *doc = NULL;
    (void)state;
    assert_non_null(o);
    five_steps(o->steps);
    struct sweep_step t = o->steps[0];
    o->steps[0] = o->steps[4];
    o->steps[4] = t;
    o->nsteps = 5;
    o->mode = SWEEP_RATE;
    o->plan = "list";
    o->target = "simulator:tiny";
    o->slos = slos;
    o->nslos = 1;
    o->acfg = (struct sweep_analysis_cfg){SWEEP_KNEE_TTFT_P99, 0.1, 0.01, 3, true};
    o->started_wall_ns = 1000000000ull * 1700000000ull;
    sweep_analyse(o->steps, o->nsteps, &o->acfg, &o->findings);
    o->ninterference = 1;
    snprintf(o->interference[0].victim, 32, "a");
    snprintf(o->interference[0].aggressor, 32, "b");
    o->interference[0].metric = "ttft_p99_ms";
    o->interference[0].p99_alone_ms = 10;
    o->interference[0].p99_with_ms = 15;
    o->interference[0].delta = 0.5;
    assert_int_equal(sweep_json_build(o, &doc), 0);
    assert_string_equal(json_string_value(json_object_get(doc, "schema")), "tokenstorm.sweep/1");
    assert_string_equal(json_string_value(json_object_get(doc, "mode")), "rate");
    assert_string_equal(json_string_value(json_object_get(doc, "started_at")),
                        "2023-11-14T22:13:20.000Z");
    json_t *steps = json_object_get(doc, "steps");
    assert_int_equal(json_array_size(steps), 5);
    for (size_t i = 0; i < 5; i++) /* sorted by load */
        assert_near(json_number_value(json_object_get(json_array_get(steps, i), "load")),
                    5.0 * (double)(i + 1), 0);
    json_t *last = json_array_get(steps, 4);
    assert_string_equal(json_string_value(json_object_get(last, "dir")), "step-05-rate-25");
    assert_true(json_is_true(json_object_get(last, "saturated")));
    assert_true(json_is_false(json_object_get(last, "slo_pass")));
    assert_true(json_is_null(json_object_get(last, "goodput_rps")));
    assert_true(json_is_null(json_object_get(last, "ttft_p50_ms")));
    json_t *sat = json_object_get(last, "saturation");
    assert_int_equal(json_array_size(sat), 2);
    assert_string_equal(json_string_value(json_array_get(sat, 0)), "ttft_growth");
    assert_string_equal(json_string_value(json_array_get(sat, 1)), "errors");
    /* how its rates were measured, and what was really sent with which seed */
    assert_int_equal(json_integer_value(json_object_get(last, "seed")), 0);
    assert_true(json_is_number(json_object_get(last, "sent_rps")));
    assert_true(json_is_null(json_object_get(last, "window_s")));
    assert_string_equal(json_string_value(json_object_get(last, "rates_from")), "summary");
    assert_true(json_object_get(json_object_get(last, "signals"), "send_lag_slope_ms_per_s"));
    assert_near(
        json_number_value(json_object_get(json_object_get(last, "quality"), "rouge_l_mean")), 0.6,
        0);
    json_t *knee = json_object_get(doc, "knee");
    assert_near(json_number_value(json_object_get(knee, "load")), 20, 0);
    assert_string_equal(json_string_value(json_object_get(knee, "method")), "max-curvature");
    assert_string_equal(json_string_value(json_object_get(knee, "metric")), "ttft_p99_ms");
    json_t *mg = json_object_get(doc, "max_goodput");
    json_t *br = json_object_get(mg, "bracket");
    assert_near(json_number_value(json_array_get(br, 0)), 20, 0);
    assert_near(json_number_value(json_array_get(br, 1)), 25, 0);
    json_t *cl = json_object_get(doc, "critical_load");
    assert_near(json_number_value(json_object_get(cl, "lambda_c")), 20, 1e-9);
    assert_int_equal(json_integer_value(json_object_get(cl, "points")), 3);
    json_t *inf = json_array_get(json_object_get(doc, "interference"), 0);
    assert_near(json_number_value(json_object_get(inf, "delta")), 0.5, 0);
    assert_true(json_is_null(json_object_get(doc, "adaptive")));
    json_decref(doc);
    ts_free(o);
}

static void test_split_args(void **state)
{
    char *w[8], *storage = NULL;
    (void)state;
    int n = sweep_split_args("--rate 5  --body '{\"a\": 1}' \"x \\\"y\\\"\" a\\ b", w, 8, &storage);
    assert_int_equal(n, 6);
    assert_string_equal(w[5], "a b");
    assert_string_equal(w[0], "--rate");
    assert_string_equal(w[1], "5");
    assert_string_equal(w[2], "--body");
    assert_string_equal(w[3], "{\"a\": 1}");
    assert_string_equal(w[4], "x \"y\"");
    ts_free(storage);
    n = sweep_split_args("a\\ b c'd e'f", w, 8, &storage);
    assert_int_equal(n, 2);
    assert_string_equal(w[0], "a b");
    assert_string_equal(w[1], "cd ef");
    ts_free(storage);
    assert_int_equal(sweep_split_args("--x 'open", w, 8, &storage), -EINVAL);
    ts_free(storage);
    assert_int_equal(sweep_split_args("a b c", w, 2, &storage), -EINVAL);
    ts_free(storage);
    assert_int_equal(sweep_split_args("   ", w, 2, &storage), 0);
    ts_free(storage);
}

static void test_args_and_deadline(void **state)
{
    const char *a[] = {"--duration", "10s", "--drain=2s", "--duration=12s", "--target"};
    const char *b[] = {"--requests", "5"};
    const char *c[] = {"--requests", "5", "--duration", "4s", "--warmup", "2s"};
    (void)state;
    assert_string_equal(sweep_args_find(a, 5, "--duration"), "12s");
    assert_string_equal(sweep_args_find(a, 5, "--drain"), "2s");
    assert_null(sweep_args_find(a, 5, "--target")); /* no value */
    assert_null(sweep_args_find(a, 5, "--dur"));
    /* 1.5 * (12 + 2) + 30 = 51 s */
    assert_int_equal(sweep_run_deadline_ns(a, 4), 51 * TS_NS_PER_S);
    assert_int_equal(sweep_run_deadline_ns(b, 2), 30 * 60 * TS_NS_PER_S);
    /* 1.5 * (4 + 2 + 30) + 30 = 84 s */
    assert_int_equal(sweep_run_deadline_ns(c, 6), 84 * TS_NS_PER_S);
    /* run's defaults: 1.5 * (20 + 30) + 30 = 105 s */
    assert_int_equal(sweep_run_deadline_ns(NULL, 0), 105 * TS_NS_PER_S);
}

static void test_names(void **state)
{
    enum sweep_knee_metric m;
    (void)state;
    assert_int_equal(sweep_knee_metric_parse("tpot.p99", &m), 0);
    assert_int_equal(m, SWEEP_KNEE_TPOT_P99);
    assert_int_equal(sweep_knee_metric_parse("e2el_p50_ms", &m), 0);
    assert_int_equal(m, SWEEP_KNEE_E2EL_P50);
    assert_int_equal(sweep_knee_metric_parse("itl.p99", &m), -EINVAL);
    assert_string_equal(sweep_knee_metric_name(SWEEP_KNEE_TTFT_P99), "ttft_p99_ms");
    assert_null(sweep_knee_metric_name(SWEEP_KNEE_METRIC_COUNT));
    assert_string_equal(sweep_sat_name(SWEEP_SAT_QUEUE), "queue_growth");
    assert_string_equal(sweep_sat_name(SWEEP_SAT_TTFT | SWEEP_SAT_QUEUE), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_summary),
        cmocka_unit_test(test_read_saturated),
        cmocka_unit_test(test_read_short_requests_window),
        cmocka_unit_test(test_read_behind_and_lag),
        cmocka_unit_test(test_step_seed),
        cmocka_unit_test(test_read_bad_and_quality),
        cmocka_unit_test(test_judge),
        cmocka_unit_test(test_plan_grid_and_stop),
        cmocka_unit_test(test_plan_slo_bracket_and_extend),
        cmocka_unit_test(test_plan_ladder_and_adaptive),
        cmocka_unit_test(test_analyse),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_split_args),
        cmocka_unit_test(test_args_and_deadline),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests_name("sweep", tests, NULL, NULL);
}
