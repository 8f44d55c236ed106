#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/buf.h"
#include "base/clock.h"
#include "telemetry/scrape.h"
#include "net/http_client.h"
#include "net/http_server.h"

static const char vllm_text[] =
    "# TYPE vllm:num_requests_running gauge\n"
    "vllm:num_requests_running{model_name=\"a\"} 3\n"
    "vllm:num_requests_running{model_name=\"b\"} 4\n"
    "vllm:num_requests_waiting{model_name=\"a\"} 10\n"
    "vllm:kv_cache_usage_perc{model_name=\"a\"} 0.25\n"
    "vllm:kv_cache_usage_perc{model_name=\"b\"} 0.75\n"
    "vllm:gpu_cache_usage_perc{model_name=\"a\"} 0.5\n"
    "vllm:num_preemptions_total{model_name=\"a\"} 5\n"
    "vllm:time_to_first_token_seconds_bucket{model_name=\"a\",le=\"0.1\"} 1\n"
    "vllm:time_to_first_token_seconds_bucket{model_name=\"a\",le=\"0.5\"} 3\n"
    "vllm:time_to_first_token_seconds_bucket{model_name=\"a\",le=\"1.0\"} 5\n"
    "vllm:time_to_first_token_seconds_bucket{model_name=\"a\",le=\"+Inf\"} 5\n"
    "vllm:time_to_first_token_seconds_bucket{model_name=\"b\",le=\"0.1\"} 1\n"
    "vllm:time_to_first_token_seconds_bucket{model_name=\"b\",le=\"0.5\"} 3\n"
    "vllm:time_to_first_token_seconds_bucket{model_name=\"b\",le=\"1.0\"} 5\n"
    "vllm:time_to_first_token_seconds_bucket{model_name=\"b\",le=\"+Inf\"} 5\n"
    "vllm:time_to_first_token_seconds_count{model_name=\"a\"} 5\n"
    "other_metric 1\n";

static void test_vllm_snapshot(void **state)
{
    struct scrape_snap s;
    char err[128] = "";
    assert_int_equal(scrape_snap_parse(&s, vllm_text, strlen(vllm_text), err, sizeof(err)), 0);
    assert_int_equal(s.flavor, SCRAPE_VLLM);
    assert_true(s.running == 7);        /* two models added up */
    assert_true(s.waiting == 10);       /* one series */
    assert_true(s.kv_usage == 0.75);    /* the fuller of the two */
    assert_true(s.kv_usage_old == 0.5); /* kept apart: the newer name wins */
    assert_true(s.preemptions_total == 5);
    assert_int_equal(s.ttft.n, 4); /* by bound, summed over models, sorted */
    assert_true(s.ttft.le[0] == 0.1 && s.ttft.count[0] == 2);
    assert_true(s.ttft.le[1] == 0.5 && s.ttft.count[1] == 6);
    assert_true(s.ttft.le[2] == 1.0 && s.ttft.count[2] == 10);
    assert_true(isinf(s.ttft.le[3]) && s.ttft.count[3] == 10);
    assert_int_equal(s.queue.n, 0);

    struct server_point p;
    scrape_point_compute(&p, NULL, &s, 1.5);
    assert_true(p.t_s == 1.5 && p.running == 7 && p.waiting == 10 && p.kv_usage == 0.75);
    assert_true(p.preemptions_total == 5);
    assert_true(isnan(p.preemptions)); /* nothing to compare with yet */
    assert_true(isnan(p.ttft_p50_ms) && isnan(p.ttft_count) && isnan(p.queue_p50_ms));
}

static void test_quantile_by_hand(void **state)
{
    /* 10 observations: 2 in (0, 0.1], 4 in (0.1, 0.5], 4 in (0.5, 1] */
    struct scrape_hist h = {.n = 4, .le = {0.1, 0.5, 1.0, INFINITY}, .count = {2, 6, 10, 10}};
    double n;
    /* p50: rank 5, the 3rd of 4 in (0.1, 0.5]: 0.1 + 0.4 * 3/4 */
    assert_true(fabs(scrape_hist_quantile(NULL, &h, 0.5, &n) - 0.4) < 1e-12);
    assert_true(n == 10);
    /* p10: rank 1, half of the first bucket from 0 */
    assert_true(fabs(scrape_hist_quantile(NULL, &h, 0.1, NULL) - 0.05) < 1e-12);
    assert_true(fabs(scrape_hist_quantile(NULL, &h, 1.0, NULL) - 1.0) < 1e-12);

    /* between two scrapes: 4 new observations, all in (0.5, 1] */
    struct scrape_hist later = {.n = 4, .le = {0.1, 0.5, 1.0, INFINITY}, .count = {2, 6, 14, 14}};
    assert_true(fabs(scrape_hist_quantile(&h, &later, 0.5, &n) - 0.75) < 1e-12);
    assert_true(n == 4);
    /* nothing new: NaN */
    assert_true(isnan(scrape_hist_quantile(&h, &h, 0.5, &n)));
    assert_true(n == 0);
    /* observations above the last finite bound: the bound is all we know */
    struct scrape_hist top = {.n = 2, .le = {1.0, INFINITY}, .count = {0, 3}};
    assert_true(scrape_hist_quantile(NULL, &top, 0.5, NULL) == 1.0);
    /* a counter that fell: the server restarted, the new counts are all there is */
    struct scrape_hist restarted = {.n = 4, .le = {0.1, 0.5, 1.0, INFINITY}, .count = {1, 1, 1, 1}};
    assert_true(fabs(scrape_hist_quantile(&later, &restarted, 0.5, &n) - 0.05) < 1e-12);
    assert_true(n == 1);
    assert_true(isnan(scrape_hist_quantile(NULL, &h, 1.5, NULL)));
}

/* One named histogram out of a whole /metrics text: its series added up,
 * everything else ignored. */
static void test_one_histogram(void **state)
{
    (void)state;
    static const char text[] = "# TYPE x_seconds histogram\n"
                               "x_seconds_bucket{le=\"0.1\",w=\"0\"} 3\n"
                               "x_seconds_bucket{le=\"+Inf\",w=\"0\"} 4\n"
                               "x_seconds_bucket{le=\"0.1\",w=\"1\"} 5\n"
                               "x_seconds_bucket{le=\"+Inf\",w=\"1\"} 6\n"
                               "x_seconds_count 10\n"
                               "y_seconds_bucket{le=\"0.5\"} 99\n";
    struct scrape_hist h;
    char err[256];
    assert_int_equal(
        scrape_hist_parse(&h, "x_seconds_bucket", text, strlen(text), err, sizeof(err)), 0);
    assert_int_equal(h.n, 2);
    assert_true(h.le[0] == 0.1 && isinf(h.le[1]));
    assert_true(h.count[0] == 8 && h.count[1] == 10);
    assert_int_equal(scrape_hist_parse(&h, "z_bucket", text, strlen(text), err, sizeof(err)), 0);
    assert_int_equal(h.n, 0);
    assert_int_equal(scrape_hist_parse(&h, "x_seconds_bucket", "x{", 2, err, sizeof(err)),
                     TS_PARSE);
}

static void test_deltas_between_scrapes(void **state)
{
    struct scrape_snap a, b;
    char err[128] = "";
    const char *t1 = "vllm:num_preemptions_total 5\n"
                     "vllm:gpu_cache_usage_perc 0.5\n"
                     "vllm:request_queue_time_seconds_bucket{le=\"0.01\"} 10\n"
                     "vllm:request_queue_time_seconds_bucket{le=\"+Inf\"} 10\n";
    const char *t2 = "vllm:num_preemptions_total 8\n"
                     "vllm:gpu_cache_usage_perc 0.625\n"
                     "vllm:request_queue_time_seconds_bucket{le=\"0.01\"} 10\n"
                     "vllm:request_queue_time_seconds_bucket{le=\"0.02\"} 12\n"
                     "vllm:request_queue_time_seconds_bucket{le=\"+Inf\"} 12\n";
    assert_int_equal(scrape_snap_parse(&a, t1, strlen(t1), err, sizeof(err)), 0);
    assert_int_equal(scrape_snap_parse(&b, t2, strlen(t2), err, sizeof(err)), 0);
    struct server_point p;
    scrape_point_compute(&p, &a, &b, 2);
    assert_true(p.preemptions == 3 && p.preemptions_total == 8);
    assert_true(p.kv_usage == 0.625); /* the older name when the newer is absent */
    /* two new waits, both in (0.01, 0.02]: the median is the middle of it */
    assert_true(fabs(p.queue_p50_ms - 15) < 1e-9);
    assert_true(isnan(p.running) && isnan(p.waiting) && isnan(p.ttft_p50_ms));
    /* the preemption counter fell: a restart, the new value is the count */
    scrape_point_compute(&p, &b, &a, 3);
    assert_true(p.preemptions == 5);
}

static void test_tgi_and_sglang(void **state)
{
    struct scrape_snap s;
    char err[128] = "";
    const char *tgi = "tgi_queue_size 12\n"
                      "tgi_batch_current_size 32\n"
                      "tgi_batch_current_max_tokens 4096\n"
                      "tgi_request_queue_duration{quantile=\"0.5\"} 0.25\n"
                      "tgi_request_queue_duration{quantile=\"0.99\"} 2\n";
    assert_int_equal(scrape_snap_parse(&s, tgi, strlen(tgi), err, sizeof(err)), 0);
    assert_int_equal(s.flavor, SCRAPE_TGI);
    struct server_point p;
    scrape_point_compute(&p, NULL, &s, 0);
    assert_true(p.running == 32 && p.waiting == 12);
    assert_true(isnan(p.kv_usage) && isnan(p.preemptions_total));
    assert_true(p.queue_p50_ms == 250); /* a summary's own median */

    const char *sg = "sglang:num_running_reqs{model_name=\"m\"} 5\n"
                     "sglang:num_queue_reqs{model_name=\"m\"} 1\n"
                     "sglang:token_usage{model_name=\"m\"} 0.5\n";
    assert_int_equal(scrape_snap_parse(&s, sg, strlen(sg), err, sizeof(err)), 0);
    assert_int_equal(s.flavor, SCRAPE_SGLANG);
    assert_true(s.running == 5 && s.waiting == 1 && s.kv_usage == 0.5);

    assert_int_equal(scrape_snap_parse(&s, "bad line\n", 9, err, sizeof(err)), TS_PARSE);
    assert_string_equal(err, "line 1, column 5: bad value 'line'");
}

static void test_json(void **state)
{
    struct server_point pts[2] = {
        {.t_s = 0.5,
         .running = 2,
         .waiting = NAN,
         .kv_usage = 0.5,
         .preemptions = NAN,
         .preemptions_total = 0,
         .ttft_p50_ms = NAN,
         .ttft_p99_ms = NAN,
         .ttft_count = NAN,
         .queue_p50_ms = INFINITY},
        {.t_s = 1.5,
         .running = 3,
         .waiting = 1,
         .kv_usage = 0.6,
         .preemptions = 0,
         .preemptions_total = 0,
         .ttft_p50_ms = 12.5,
         .ttft_p99_ms = 40,
         .ttft_count = 4,
         .queue_p50_ms = 1},
    };
    struct scrape_summary sum = {.points = pts, .npoints = 2, .scrapes = 3, .failures = 1};
    snprintf(sum.flavor, sizeof(sum.flavor), "vllm");
    snprintf(sum.last_error, sizeof(sum.last_error), "x: HTTP status 500");
    json_t *a = scrape_timeline_json(&sum);
    assert_non_null(a);
    char *text = json_dumps(a, JSON_COMPACT | JSON_REAL_PRECISION(6));
    assert_string_equal(
        text,
        "[{\"t_s\":0.5,\"running\":2.0,\"waiting\":null,\"kv_usage\":0.5,\"preemptions\":null,"
        "\"preemptions_total\":0.0,\"ttft_p50_ms\":null,\"ttft_p99_ms\":null,"
        "\"ttft_count\":null,\"queue_p50_ms\":null},"
        "{\"t_s\":1.5,\"running\":3.0,\"waiting\":1.0,\"kv_usage\":0.6,\"preemptions\":0.0,"
        "\"preemptions_total\":0.0,\"ttft_p50_ms\":12.5,\"ttft_p99_ms\":40.0,"
        "\"ttft_count\":4.0,\"queue_p50_ms\":1.0}]");
    free(text);
    json_decref(a);
    struct scrape_config cfg = {.url = "https://user:secret@gpu:8000/metrics?token=abc",
                                .interval_ns = 500 * TS_NS_PER_MS};
    json_t *info = scrape_info_json(&sum, &cfg);
    assert_non_null(info);
    text = json_dumps(info, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(text,
                        "{\"dropped\":0,\"failures\":1,\"flavor\":\"vllm\",\"interval_s\":0.5,"
                        "\"last_error\":\"x: HTTP status 500\",\"scrapes\":3,\"skipped\":0,"
                        "\"url\":\"https://gpu:8000/metrics\"}");
    free(text);
    json_decref(info);
}

static void test_url_from_target(void **state)
{
    char out[64];
    assert_int_equal(
        scrape_url_from_target("http://127.0.0.1:8000/v1/chat/completions", out, sizeof(out)), 0);
    assert_string_equal(out, "http://127.0.0.1:8000/metrics");
    assert_int_equal(scrape_url_from_target("https://gpu.example:443?x=1", out, sizeof(out)), 0);
    assert_string_equal(out, "https://gpu.example:443/metrics");
    assert_int_equal(scrape_url_from_target("ftp://x/", out, sizeof(out)), -EINVAL);
    assert_int_equal(scrape_url_from_target("http://127.0.0.1:8000/v1", out, 20), TS_TOOBIG);
}

/* ---- a live scraper against a loopback server ---- */

struct live {
    uv_loop_t loop;
    struct http_server server;
    struct scraper *good, *bad;
    uv_timer_t stop, guard;
    int served;
    bool timed_out;
};

static void on_request(struct http_request *req, void *ctx)
{
    struct live *l = ctx;
    if (strcmp(req->path, "/metrics")) {
        (void)http_respond(req, 404, "text/plain", NULL, "no", 2);
        return;
    }
    /* each scrape: one more running request, two more first tokens in (0.1, 0.2] */
    l->served++;
    char body[512];
    int n = snprintf(body, sizeof(body),
                     "vllm:num_requests_running %d\n"
                     "vllm:time_to_first_token_seconds_bucket{le=\"0.1\"} 0\n"
                     "vllm:time_to_first_token_seconds_bucket{le=\"0.2\"} %d\n"
                     "vllm:time_to_first_token_seconds_bucket{le=\"+Inf\"} %d\n",
                     l->served, 2 * l->served, 2 * l->served);
    (void)http_respond(req, 200, "text/plain; version=0.0.4", NULL, body, (size_t)n);
}

static void on_stop(uv_timer_t *t)
{
    struct live *l = t->data;
    scraper_close(l->good);
    scraper_close(l->bad);
    (void)http_server_shutdown(&l->server, 0, NULL);
    uv_close((uv_handle_t *)&l->stop, NULL);
    uv_close((uv_handle_t *)&l->guard, NULL);
}

static void on_guard(uv_timer_t *t)
{
    struct live *l = t->data;
    l->timed_out = true;
    on_stop(&l->stop);
}

static void test_live_scraper(void **state)
{
    struct live l = {0};
    char err[160] = "";
    assert_int_equal(uv_loop_init(&l.loop), 0);
    struct http_server_config scfg = {.host = "127.0.0.1"};
    assert_int_equal(http_server_init(&l.server, &l.loop, &scfg, on_request, &l), 0);
    assert_int_equal(http_server_listen(&l.server), 0);
    char url[128], bad_url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", http_server_port(&l.server));
    snprintf(bad_url, sizeof(bad_url), "http://127.0.0.1:%d/nope", http_server_port(&l.server));
    struct scrape_config good = {.url = url, .interval_ns = 100 * TS_NS_PER_MS};
    struct scrape_config bad = {.url = bad_url, .interval_ns = 100 * TS_NS_PER_MS};
    assert_int_equal(scraper_new(&l.loop, &good, &l.good, err, sizeof(err)), 0);
    assert_int_equal(scraper_new(&l.loop, &bad, &l.bad, err, sizeof(err)), 0);
    uint64_t t0 = ts_now_ns();
    scraper_start(l.good, t0);
    scraper_start(l.bad, t0);
    uv_timer_init(&l.loop, &l.stop);
    uv_timer_init(&l.loop, &l.guard);
    l.stop.data = l.guard.data = &l;
    uv_timer_start(&l.stop, on_stop, 550, 0);
    uv_timer_start(&l.guard, on_guard, 10000, 0); /* never needed: the test fails if it is */
    uv_run(&l.loop, UV_RUN_DEFAULT);
    assert_false(l.timed_out);

    struct scrape_summary s;
    scraper_take(l.good, &s);
    assert_true(s.npoints >= 3 && s.npoints <= 7);
    assert_int_equal(s.failures, 0);
    assert_string_equal(s.flavor, "vllm");
    for (size_t i = 0; i < s.npoints; i++) {
        const struct server_point *p = &s.points[i];
        assert_true(p->running == (double)(i + 1));
        if (i == 0) {
            assert_true(isnan(p->ttft_p50_ms));
            assert_true(p->t_s >= 0 && p->t_s < 0.3);
            continue;
        }
        /* two new first tokens in (0.1, 0.2]: the median is 150 ms */
        assert_true(fabs(p->ttft_p50_ms - 150) < 1e-9);
        assert_true(p->ttft_count == 2);
        double dt = p->t_s - s.points[i - 1].t_s;
        assert_true(dt > 0.05 && dt < 0.5);
    }
    scrape_summary_release(&s);

    scraper_take(l.bad, &s);
    assert_int_equal(s.npoints, 0);
    assert_true(s.scrapes >= 3);
    assert_int_equal(s.failures, s.scrapes);
    assert_non_null(strstr(s.last_error, "HTTP status 404"));
    scrape_summary_release(&s);

    scraper_free(l.good);
    scraper_free(l.bad);
    assert_int_equal(uv_loop_close(&l.loop), 0);
}

static void test_refused_connection_and_bad_config(void **state)
{
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    char err[160] = "";
    struct scraper *s = NULL;
    struct scrape_config c = {.url = "ftp://x/metrics"};
    assert_int_equal(scraper_new(&loop, &c, &s, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "server metrics: expected an http:// or https:// URL");
    c.url = "http://127.0.0.1:1/metrics";
    c.interval_ns = 10 * TS_NS_PER_MS;
    assert_int_equal(scraper_new(&loop, &c, &s, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "server metrics: the interval must be at least 100ms");

    /* port 1 on loopback refuses: one scrape, one failure, nothing else */
    c.interval_ns = 5 * TS_NS_PER_S;
    c.url = "http://user:secret@127.0.0.1:1/metrics";
    assert_int_equal(scraper_new(&loop, &c, &s, err, sizeof(err)), 0);
    scraper_start(s, ts_now_ns());
    struct scrape_summary peek = {0};
    for (int i = 0; i < 2000 && !peek.scrapes; i++) { /* bounded: 2000 x 1 ms at most */
        uv_run(&loop, UV_RUN_NOWAIT);
        uv_sleep(1);
        scraper_take(s, &peek);
        if (!peek.failures) {
            scrape_summary_release(&peek);
            memset(&peek, 0, sizeof(peek));
        }
    }
    assert_int_equal(peek.scrapes, 1);
    assert_int_equal(peek.failures, 1);
    assert_int_equal(peek.npoints, 0);
    assert_non_null(strstr(peek.last_error, "connect"));
    assert_null(strstr(peek.last_error, "secret")); /* user info never shown */
    scrape_summary_release(&peek);
    scraper_close(s);
    uv_run(&loop, UV_RUN_DEFAULT);
    scraper_free(s);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    /* as the program does (src/main.c): a peer that closed makes write(2) fail
     * with EPIPE instead of killing the process */
    signal(SIGPIPE, SIG_IGN);
    if (http_client_global_init())
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vllm_snapshot),
        cmocka_unit_test(test_quantile_by_hand),
        cmocka_unit_test(test_one_histogram),
        cmocka_unit_test(test_deltas_between_scrapes),
        cmocka_unit_test(test_tgi_and_sglang),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_url_from_target),
        cmocka_unit_test(test_live_scraper),
        cmocka_unit_test(test_refused_connection_and_bad_config),
    };
    int rc = cmocka_run_group_tests_name("scrape", tests, NULL, NULL);
    http_client_global_cleanup();
    return rc;
}
