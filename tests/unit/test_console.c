/*
 * test_console.c - the run's header and progress lines: "–" before a value
 * exists, sent/N and an ETA with --requests, the line fitted to the
 * terminal's width, the header naming target, load, length and results.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "../../src/report/console.c"

static struct console_progress sample(void)
{
    return (struct console_progress){
        .elapsed_s = 4,
        .total_s = 20,
        .sent = 40,
        .completed = 30,
        .errors = 2,
        .in_flight = 8,
        .rate = 9.5,
        .tokens_per_s = 1234,
        .show_ttft = true,
        .ttft_p50_ms = 120,
        .ttft_p99_ms = 480,
    };
}

static void test_full_line(void **state)
{
    (void)state;
    struct console_progress p = sample();
    char line[256];
    size_t n = console_progress_line(&p, 0, line, sizeof line);
    assert_int_equal(n, strlen(line));
    assert_string_equal(line,
                        "   4s/20s  sent 40  done 30  err 2  in-flight 8  9.5 req/s  1234 tok/s  "
                        "TTFT p50 120 ms p99 480 ms");
}

static void test_no_value_yet_is_a_dash(void **state)
{
    (void)state;
    struct console_progress p = sample();
    p.ttft_p50_ms = p.ttft_p99_ms = 0;
    char line[256];
    console_progress_line(&p, 0, line, sizeof line);
    assert_non_null(strstr(line, "TTFT p50 \xe2\x80\x93 p99 \xe2\x80\x93"));
    assert_null(strstr(line, "0 ms"));
    p.show_ttft = false; /* --no-stream: no TTFT at all */
    console_progress_line(&p, 0, line, sizeof line);
    assert_null(strstr(line, "TTFT"));
}

static void test_requests_count_and_eta(void **state)
{
    (void)state;
    struct console_progress p = sample();
    p.requests_max = 100; /* 40 sent in 4 s: 60 more at 10/s */
    char line[256];
    console_progress_line(&p, 0, line, sizeof line);
    assert_non_null(strstr(line, "sent 40/100  ETA 6s  done 30"));
    assert_null(strstr(line, "/20s"));
    p.elapsed_s = 400;
    p.sent = 40; /* 0.1/s: 600 s more */
    console_progress_line(&p, 0, line, sizeof line);
    assert_non_null(strstr(line, "ETA 10m00s"));
    p.draining = true; /* all sent: no ETA */
    console_progress_line(&p, 0, line, sizeof line);
    assert_null(strstr(line, "ETA"));
    assert_non_null(strstr(line, "draining 6m40s"));
}

static void test_fits_the_width(void **state)
{
    (void)state;
    struct console_progress p = sample();
    p.requests_max = 100;
    char line[256];
    for (unsigned w = 20; w <= 140; w += 7) {
        console_progress_line(&p, w, line, sizeof line);
        assert_true(console_width(line) < w); /* time and sent/N take 18 columns */
        assert_non_null(strstr(line, "4s"));  /* the time is kept longest */
    }
    console_progress_line(&p, 80, line, sizeof line);
    assert_true(console_width(line) <= 79);
    assert_non_null(strstr(line, "sent 40/100"));
    assert_non_null(strstr(line, "err 2"));
    assert_null(strstr(line, "in-flight")); /* the least useful go first */
    /* the dash is one column, three bytes */
    assert_int_equal(console_width("p50 \xe2\x80\x93"), 5);
}

static void test_header(void **state)
{
    (void)state;
    char text[1024];
    struct console_header h = {
        .target = "http://127.0.0.1:8000/v1/chat/completions",
        .sim = "llama3-8b-a100",
        .model = "m",
        .endpoint = "chat",
        .open = true,
        .arrival = "poisson",
        .rate = 10,
        .duration_s = 20,
        .out_dir = "out",
    };
    console_header_text(&h, text, sizeof text);
    assert_string_equal(text,
                        "tokenstorm run: target http://127.0.0.1:8000/v1/chat/completions "
                        "(built-in simulator, llama3-8b-a100), model m, endpoint chat\n"
                        "tokenstorm run: load open loop, poisson arrivals, 10 req/s, for 20s\n"
                        "tokenstorm run: results in out/\n");
    h = (struct console_header){.target = "http://gpu/v1/completions",
                                .concurrency = 64,
                                .requests = 2000,
                                .warmup_s = 5,
                                .out_dir = "/"};
    console_header_text(&h, text, sizeof text);
    assert_non_null(strstr(text, "load closed loop, 64 users, 2000 requests after a 5s warm-up\n"));
    assert_non_null(strstr(text, "results in /\n"));
    assert_null(strstr(text, "simulator"));
    h = (struct console_header){.target = "t",
                                .open = true,
                                .arrival = "gamma:2",
                                .rate = 5,
                                .ramp_to = 50,
                                .concurrency = 8,
                                .duration_s = 90,
                                .requests = 7};
    console_header_text(&h, text, sizeof text);
    assert_non_null(strstr(text, "gamma:2 arrivals, 5 req/s rising to 50 req/s, at most 8 in "
                                 "flight, for 1m30s or 7 requests, whichever comes first"));
    h = (struct console_header){.target = "t", .scenario = "s.yaml", .classes = 1};
    console_header_text(&h, text, sizeof text);
    assert_non_null(strstr(text, "load scenario s.yaml, 1 traffic class with their own loads"));
    /* a small buffer: cut, terminated, never past it */
    char small[16];
    size_t n = console_header_text(&h, small, sizeof small);
    assert_true(n < sizeof small);
    assert_int_equal(strlen(small), n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_line),
        cmocka_unit_test(test_no_value_yet_is_a_dash),
        cmocka_unit_test(test_requests_count_and_eta),
        cmocka_unit_test(test_fits_the_width),
        cmocka_unit_test(test_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
