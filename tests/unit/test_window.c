/*
 * test_window.c - the steady window's rates on synthetic timelines with known
 * answers: an open loop whose drain and first request time must not dilute
 * the rate, a closed loop whose warm-up requests end inside the window, a run
 * by count whose end of sending is found from its sends, a window too short
 * to be steady, and points that are not points.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <math.h>
#include <string.h>
#include <cmocka.h>

#include "analysis/window.h"

static void assert_near(double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol))
        fail_msg("got %.9g, want %.9g (+- %g)", got, want, tol);
}

static json_t *point(double t, int sent, int completed, int good, int tokens)
{
    return json_pack("{s:f, s:i, s:i, s:i, s:i}", "t_s", t, "sent", sent, "completed", completed,
                     "good", good, "output_tokens", tokens);
}

/*
 * 10 req/s for 20 s, each request 2 s long (100 tokens): nothing completes in
 * the first two seconds, 10 a second after, and a 2-second drain completes the
 * last 20. Whole run: 200 / 22 s = 9.09 req/s; the steady window [2, 20.001]
 * s gives 180 completions: 10 req/s, 1000 tok/s (to 1e-4).
 */
static json_t *open_loop(void)
{
    json_t *tl = json_array();
    for (int s = 1; s <= 22; s++) {
        int sent = s <= 20 ? 10 : 0, done = s <= 2 ? 0 : 10;
        json_array_append_new(tl, point(s + 0.001, sent, done, done / 2, done * 100));
    }
    return tl;
}

static void test_open_loop_leaves_out_ramp_and_drain(void **state)
{
    struct run_window w;
    json_t *tl = open_loop();
    (void)state;

    run_window_compute(tl, 0, 20.0, 2.0, &w);
    assert_true(w.valid);
    assert_near(w.start_s, 2.0, 1e-12);
    assert_near(w.end_s, 20.001, 1e-9);
    assert_int_equal(w.sent, 200);
    assert_near(w.sent_rps, 200 / 20.001, 1e-9);
    assert_int_equal(w.completed, 180);
    assert_near(w.request_throughput, 180 / 18.001, 1e-9);
    assert_near(w.output_throughput, 18000 / 18.001, 1e-6);
    assert_near(w.request_goodput, 90 / 18.001, 1e-9);
    json_decref(tl);
}

/* Without the end of sending, the last interval that sent anything ends it. */
static void test_end_of_sending_from_the_sends(void **state)
{
    struct run_window w;
    json_t *tl = open_loop();
    (void)state;

    run_window_compute(tl, 0, NAN, 2.0, &w);
    assert_true(w.valid);
    assert_true(isnan(w.send_end_s));
    assert_near(w.end_s, 20.001, 1e-9);
    assert_near(w.request_throughput, 180 / 18.001, 1e-9);
    json_decref(tl);
}

/*
 * The ramp ends inside an interval: that interval counts for its share
 * after it. 10 completions a second from the start, E2EL 0.25 s: the window
 * [0.25, 4] holds 0.75 * 10 + 30 = 37.5 completions, 10 req/s.
 */
static void test_ramp_inside_an_interval(void **state)
{
    struct run_window w;
    json_t *tl = json_array();
    (void)state;

    for (int s = 1; s <= 4; s++)
        json_array_append_new(tl, point(s, 10, 10, 0, 100));
    run_window_compute(tl, 0, 4.0, 0.25, &w);
    assert_true(w.valid);
    assert_near(w.start_s, 0.25, 1e-12);
    assert_near(w.request_throughput, 10.0, 1e-12);
    assert_near(w.output_throughput, 100.0, 1e-12);
    assert_int_equal(w.completed, 38); /* 37.5, rounded */
    json_decref(tl);
}

/*
 * A closed loop with a 5-s warm-up: 8 users, 1-s requests, 8 completions a
 * second throughout. The timeline counts the requests sent in the warm-up
 * that end after it (as the runner does), so the window reads 8 req/s from
 * its first second; sends are counted from the end of the warm-up.
 */
static void test_closed_loop_after_warmup(void **state)
{
    struct run_window w;
    json_t *tl = json_array();
    (void)state;

    for (int s = 1; s <= 16; s++)
        json_array_append_new(tl, point(s, s <= 15 ? 8 : 0, s == 1 ? 0 : 8, 8, 800));
    run_window_compute(tl, 5.0, 15.0, 1.0, &w);
    assert_true(w.valid);
    assert_near(w.send_start_s, 5.0, 1e-12);
    assert_near(w.start_s, 6.0, 1e-12);
    assert_near(w.end_s, 15.0, 1e-12);
    assert_int_equal(w.sent, 80);
    assert_near(w.sent_rps, 8.0, 1e-12);
    assert_near(w.request_throughput, 8.0, 1e-12);
    assert_near(w.output_throughput, 800.0, 1e-9);
    json_decref(tl);
}

/*
 * The warm-up ends inside an interval (ticks at 0.5, 1.5, ...; warm-up 1 s):
 * that interval counts for its half after the warm-up. 10 sends and 10
 * completions a second; E2EL 0.25 s: sends over [1, 6.5], completions over
 * [1.25, 6.5].
 */
static void test_warmup_inside_an_interval(void **state)
{
    struct run_window w;
    json_t *tl = json_array();
    (void)state;

    for (int s = 0; s <= 6; s++)
        json_array_append_new(tl, point(s + 0.5, 10, 10, 0, 100));
    run_window_compute(tl, 1.0, 6.5, 0.25, &w);
    assert_true(w.valid);
    assert_near(w.send_start_s, 1.0, 1e-12);
    assert_near(w.sent_rps, 10.0, 1e-12);
    assert_int_equal(w.sent, 55);
    assert_near(w.start_s, 1.25, 1e-12);
    assert_near(w.end_s, 6.5, 1e-12);
    assert_near(w.request_throughput, 10.0, 1e-12);
    json_decref(tl);
}

/* Two seconds of sending with 2-s (then 1.5-s) requests: no steady window, no rates. */
static void test_too_short_is_not_steady(void **state)
{
    struct run_window w;
    json_t *tl = json_array();
    (void)state;

    for (int s = 1; s <= 4; s++)
        json_array_append_new(tl, point(s, s <= 2 ? 10 : 0, s <= 2 ? 0 : 10, 0, 0));
    run_window_compute(tl, 0, 2.0, 2.0, &w);
    assert_false(w.valid);
    run_window_compute(tl, 0, 2.0, 1.5, &w); /* 0.5 s left: under WINDOW_MIN_S */
    assert_false(w.valid);
    assert_true(isnan(w.request_throughput));
    assert_near(w.sent_rps, 10.0, 1e-12); /* the sends are still known */
    /* nothing completed: no E2EL, no window either */
    run_window_compute(tl, 0, 2.0, NAN, &w);
    assert_false(w.valid);
    json_decref(tl);
}

/* Junk points are skipped; a stub interval at the end is not a whole one. */
static void test_bad_points_and_stub(void **state)
{
    struct run_window w;
    json_t *tl = open_loop();
    (void)state;

    json_array_insert_new(tl, 3, json_string("x"));
    json_array_insert_new(tl, 5, json_pack("{s:s}", "t_s", "soon"));
    json_array_insert_new(tl, 7, point(1.0, 1000, 1000, 0, 0)); /* goes back in time */
    run_window_compute(tl, 0, 20.0, 2.0, &w);
    assert_true(w.valid);
    assert_near(w.request_throughput, 180 / 18.001, 1e-9);
    json_decref(tl);

    /* sending stopped mid-interval at 5.3 s: the stub [5, 5.3] is left out */
    tl = json_array();
    for (int s = 1; s <= 5; s++)
        json_array_append_new(tl, point(s, 10, s == 1 ? 0 : 10, 0, 0));
    json_array_append_new(tl, point(5.3, 3, 3, 0, 0));
    run_window_compute(tl, 0, NAN, 1.0, &w);
    assert_true(w.valid);
    assert_near(w.end_s, 5.0, 1e-12);
    assert_near(w.request_throughput, 10.0, 1e-12);
    json_decref(tl);
    run_window_compute(NULL, 0, 1, 1, &w);
    assert_false(w.valid);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_loop_leaves_out_ramp_and_drain),
        cmocka_unit_test(test_end_of_sending_from_the_sends),
        cmocka_unit_test(test_closed_loop_after_warmup),
        cmocka_unit_test(test_ramp_inside_an_interval),
        cmocka_unit_test(test_warmup_inside_an_interval),
        cmocka_unit_test(test_too_short_is_not_steady),
        cmocka_unit_test(test_bad_points_and_stub),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
