/*
 * test_live_metrics.c - the live /metrics exposition: bucket derivation
 * from HDR histograms against hand counts, exact text of a fixture run,
 * OpenMetrics, content negotiation, and the endpoint on a real loop.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "analysis/stats.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "load/live_metrics.h"

static void test_genai_fixed_buckets(void **state)
{
    (void)state;
    assert_int_equal(genai_duration_bucket(0), 0);
    assert_int_equal(genai_duration_bucket(10000), 0); /* 0.01 s is <= 0.01 */
    assert_int_equal(genai_duration_bucket(10001), 1);
    assert_int_equal(genai_duration_bucket(20000), 1);
    assert_int_equal(genai_duration_bucket(1280000), 7);
    assert_int_equal(genai_duration_bucket(81920000), 13);
    assert_int_equal(genai_duration_bucket(81920001), 14);
    assert_int_equal(genai_token_bucket(0), 0);
    assert_int_equal(genai_token_bucket(1), 0);
    assert_int_equal(genai_token_bucket(2), 1);
    assert_int_equal(genai_token_bucket(4), 1);
    assert_int_equal(genai_token_bucket(5), 2);
    assert_int_equal(genai_token_bucket(256), 4);
    assert_int_equal(genai_token_bucket(257), 5);
    assert_int_equal(genai_token_bucket(67108864), 13);
    assert_int_equal(genai_token_bucket(67108865), 14);
}

static void test_buckets_from_hdr(void **state)
{
    (void)state;
    struct hdr *h;
    assert_int_equal(hdr_new_latency(&h), 0);
    /* lag bounds (us): 100 250 500 1000 2500 ... */
    static const int64_t v[] = {50, 100, 100, 101, 250, 251, 999, 1000, 1001, 2000000, 20000000};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        assert_int_equal(hdr_record(h, v[i]), 0);
    uint64_t cum[17];
    double sum;
    const struct live_bounds *b = &live_bounds_lag_seconds;
    assert_int_equal(b->n, 16);
    live_bounds_from_hdr(b, h, cum, &sum);
    static const uint64_t want[17] = {3, 5, 6, 8, 9, 9, 9, 9, 9, 9, 9, 9, 9, 10, 10, 10, 11};
    for (int i = 0; i < 17; i++)
        assert_int_equal(cum[i], want[i]);
    /* below 2048 us every value has a bucket of its own: exact sum */
    double small = 50 + 100 + 100 + 101 + 250 + 251 + 999 + 1000 + 1001;
    double big = (double)hdr_median_equivalent(h, 2000000) + hdr_median_equivalent(h, 20000000);
    assert_true(sum == small + big);

    /* GenAI bounds: 0.01 s = 10000 us is the lowest value of its HDR bucket
     * [10000, 10007]; 10008 starts the next one. */
    hdr_reset(h);
    assert_int_equal(hdr_record(h, 9999), 0);
    assert_int_equal(hdr_record(h, 10000), 0);
    assert_int_equal(hdr_record(h, 10007), 0);
    assert_int_equal(hdr_record(h, 10008), 0);
    assert_int_equal(hdr_record(h, 20000), 0);
    assert_int_equal(hdr_record(h, 90000000), 0);
    uint64_t c2[GENAI_BUCKETS + 1];
    live_bounds_from_hdr(&live_bounds_genai_seconds, h, c2, &sum);
    assert_int_equal(c2[0], 3);
    assert_int_equal(c2[1], 5);
    assert_int_equal(c2[12], 5);
    assert_int_equal(c2[13], 5);
    assert_int_equal(c2[14], 6);
    live_bounds_from_hdr(&live_bounds_genai_seconds, NULL, c2, &sum);
    assert_int_equal(c2[14], 0);
    assert_true(sum == 0);
    hdr_free(h);
}

/* A request of the fixture, intended at t0 = 1 s; times in us after t0. */
static void add(struct run_stats *s, enum req_outcome o, uint64_t start_us, uint64_t first_us,
                uint64_t end_us, uint32_t in, uint32_t out, int status)
{
    const uint64_t t0 = 1000000000ull;
    struct req_record r;
    memset(&r, 0, sizeof(r));
    r.outcome = o;
    r.http_status = status;
    r.flags = REQF_STREAM;
    r.intended_ns = t0;
    r.start_ns = t0 + start_us * 1000;
    r.first_chunk_ns = first_us ? t0 + first_us * 1000 : 0;
    r.first_token_ns = r.first_chunk_ns;
    r.last_chunk_ns = o == REQ_OK ? t0 + end_us * 1000 : 0;
    r.end_ns = t0 + end_us * 1000;
    r.prompt_tokens = in;
    r.usage_prompt_tokens = -1;
    r.usage_completion_tokens = -1;
    r.output_tokens = out;
    r.token_source = TOKENS_CHUNKS;
    run_stats_add_record(s, &r, NULL);
}

struct fixture {
    struct run_stats *s;
    struct live_metrics lm;
};

static int fixture_setup(void **state)
{
    struct fixture *f = ts_calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(run_stats_new(&f->s), 0);
    /* ok: durations (from the actual start) 5 ms, 30 ms, 3 s; ttft 1 ms, 2 ms and
     * 1000192 us, a median equivalent of the HDR (buckets 512 us wide there);
     * the third started 500 us late */
    add(f->s, REQ_OK, 0, 1000, 5000, 3, 1, 200);
    add(f->s, REQ_OK, 0, 2000, 30000, 16, 17, 200);
    add(f->s, REQ_OK, 500, 1000692, 3000500, 100, 256, 200);
    /* failures: a 500 after 12 ms, a ttfb timeout after 100 s, one cut */
    add(f->s, REQ_HTTP_5XX, 0, 0, 12000, 8, 0, 500);
    add(f->s, REQ_TIMEOUT_TTFB, 0, 0, 100000000, 8, 0, 0);
    add(f->s, REQ_CUT, 0, 2000, 40000, 8, 3, 200);
    run_stats_add_itl(f->s, 500000);  /* 0.5 ms */
    run_stats_add_itl(f->s, 1500000); /* 1.5 ms */
    struct live_metrics_info info = {
        .model = "m\"x",
        .endpoint = "chat",
        .url = "http://127.0.0.1:8000/v1/chat/completions",
        .stream = true,
    };
    assert_int_equal(live_metrics_init(&f->lm, &info), 0);
    live_metrics_set_run_id(&f->lm, 0xabcdefull);
    f->lm.stats = f->s;
    f->lm.sent = 7;
    f->lm.in_flight = 1;
    *state = f;
    return 0;
}

static int fixture_teardown(void **state)
{
    struct fixture *f = *state;
    run_stats_free(f->s);
    ts_free(f);
    return 0;
}

static char *render(const struct live_metrics *lm, enum live_metrics_format fmt)
{
    struct buf b;
    buf_init(&b, LIVE_METRICS_MAX_BYTES);
    assert_int_equal(live_metrics_render(lm, fmt, &b), 0);
    char *text = buf_take(&b, NULL);
    assert_non_null(text);
    return text;
}

#define GENAI_L                                                                                    \
    "gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"openai\",gen_ai_request_model="         \
    "\"m\\\"x\",server_address=\"127.0.0.1\",server_port=\"8000\""

static void assert_has(const char *text, const char *want)
{
    if (!strstr(text, want))
        fail_msg("missing from the exposition:\n%s\n--- in ---\n%s", want, text);
}

static void test_text_exposition(void **state)
{
    struct fixture *f = *state;
    char *t = render(&f->lm, LIVE_METRICS_TEXT);

    assert_has(t, "# HELP tokenstorm_run_info The load run: id, model, endpoint, tenant.\n"
                  "# TYPE tokenstorm_run_info gauge\n"
                  "tokenstorm_run_info{run_id=\"0000000000abcdef\",model=\"m\\\"x\","
                  "endpoint=\"chat\",tenant=\"\"} 1\n");
    assert_has(t, "# TYPE tokenstorm_requests_total counter\n");
    assert_has(t, "tokenstorm_requests_total{outcome=\"ok\"} 3\n"
                  "tokenstorm_requests_total{outcome=\"truncated\"} 0\n");
    assert_has(t, "tokenstorm_requests_total{outcome=\"http_5xx\"} 1\n");
    assert_has(t, "tokenstorm_requests_total{outcome=\"cut\"} 1\n");
    assert_has(t, "tokenstorm_requests_sent_total 7\n");
    assert_has(t, "tokenstorm_requests_in_flight 1\n");
    assert_has(t, "tokenstorm_output_tokens_total 277\n");
    assert_has(t, "# TYPE tokenstorm_faults_injected_total counter\n# HELP tokenstorm_ttft");
    assert_null(strstr(t, "tokenstorm_goodput")); /* no --goodput */
    assert_null(strstr(t, "# EOF"));

    /* ok durations 5 ms, 30 ms, 3 s (actual start -> last chunk) */
    assert_has(t, "gen_ai_client_operation_duration_seconds_bucket{" GENAI_L ",le=\"0.01\"} 1\n"
                  "gen_ai_client_operation_duration_seconds_bucket{" GENAI_L ",le=\"0.02\"} 1\n"
                  "gen_ai_client_operation_duration_seconds_bucket{" GENAI_L ",le=\"0.04\"} 2\n");
    assert_has(t, "gen_ai_client_operation_duration_seconds_bucket{" GENAI_L ",le=\"2.56\"} 2\n"
                  "gen_ai_client_operation_duration_seconds_bucket{" GENAI_L ",le=\"5.12\"} 3\n");
    assert_has(t, "gen_ai_client_operation_duration_seconds_count{" GENAI_L "} 3\n");
    /* failures by error_type, exact: 12 ms, 100 s, 40 ms */
    assert_has(t, "gen_ai_client_operation_duration_seconds_bucket{" GENAI_L
                  ",error_type=\"http_5xx\",le=\"0.01\"} 0\n"
                  "gen_ai_client_operation_duration_seconds_bucket{" GENAI_L
                  ",error_type=\"http_5xx\",le=\"0.02\"} 1\n");
    assert_has(t, "gen_ai_client_operation_duration_seconds_sum{" GENAI_L
                  ",error_type=\"http_5xx\"} 0.012\n");
    assert_has(t, "gen_ai_client_operation_duration_seconds_bucket{" GENAI_L
                  ",error_type=\"timeout_ttfb\",le=\"81.92\"} 0\n"
                  "gen_ai_client_operation_duration_seconds_bucket{" GENAI_L
                  ",error_type=\"timeout_ttfb\",le=\"+Inf\"} 1\n"
                  "gen_ai_client_operation_duration_seconds_sum{" GENAI_L
                  ",error_type=\"timeout_ttfb\"} 100\n");
    assert_has(t, "gen_ai_client_operation_duration_seconds_count{" GENAI_L
                  ",error_type=\"cut\"} 1\n");
    assert_null(strstr(t, "error_type=\"ok\""));
    assert_null(strstr(t, "error_type=\"truncated\""));

    /* tokens: input 3, 16, 100; output 1, 17, 256 */
    assert_has(
        t,
        "gen_ai_client_token_usage_bucket{" GENAI_L ",gen_ai_token_type=\"input\",le=\"1.0\"} 0\n"
        "gen_ai_client_token_usage_bucket{" GENAI_L ",gen_ai_token_type=\"input\",le=\"4.0\"} 1\n"
        "gen_ai_client_token_usage_bucket{" GENAI_L ",gen_ai_token_type=\"input\",le=\"16.0\"} 2\n"
        "gen_ai_client_token_usage_bucket{" GENAI_L ",gen_ai_token_type=\"input\",le=\"64.0\"} 2\n"
        "gen_ai_client_token_usage_bucket{" GENAI_L
        ",gen_ai_token_type=\"input\",le=\"256.0\"} 3\n");
    assert_has(t, "gen_ai_client_token_usage_sum{" GENAI_L ",gen_ai_token_type=\"input\"} 119\n"
                  "gen_ai_client_token_usage_count{" GENAI_L ",gen_ai_token_type=\"input\"} 3\n");
    assert_has(t, "gen_ai_client_token_usage_bucket{" GENAI_L
                  ",gen_ai_token_type=\"output\",le=\"1.0\"} 1\n");
    assert_has(t, "gen_ai_client_token_usage_sum{" GENAI_L ",gen_ai_token_type=\"output\"} 274\n");

    /* streams: ttft from the actual start; chunk gaps 0.5 ms, 1.5 ms */
    assert_has(t, "gen_ai_client_operation_time_to_first_chunk_seconds_bucket{" GENAI_L
                  ",le=\"0.01\"} 2\n");
    assert_has(t, "gen_ai_client_operation_time_to_first_chunk_seconds_bucket{" GENAI_L
                  ",le=\"0.64\"} 2\n"
                  "gen_ai_client_operation_time_to_first_chunk_seconds_bucket{" GENAI_L
                  ",le=\"1.28\"} 3\n");
    assert_has(t,
               "gen_ai_client_operation_time_to_first_chunk_seconds_sum{" GENAI_L "} 1.003192\n");
    assert_has(t, "gen_ai_client_operation_time_per_output_chunk_seconds_sum{" GENAI_L "} 0.002\n"
                  "gen_ai_client_operation_time_per_output_chunk_seconds_count{" GENAI_L "} 2\n");
    /* tokenstorm's own: from the intended time, 1000692 us for the third, whose
     * HDR bucket [1000448, 1000959] has the median 1000704 */
    assert_has(t, "tokenstorm_ttft_seconds_sum 1.003704\ntokenstorm_ttft_seconds_count 3\n");
    assert_has(t, "tokenstorm_schedule_lag_seconds_bucket{le=\"0.0001\"} 5\n"
                  "tokenstorm_schedule_lag_seconds_bucket{le=\"0.00025\"} 5\n"
                  "tokenstorm_schedule_lag_seconds_bucket{le=\"0.0005\"} 6\n");
    assert_has(t, "tokenstorm_schedule_lag_seconds_count 6\n");
    ts_free(t);
}

static void test_openmetrics_exposition(void **state)
{
    struct fixture *f = *state;
    f->lm.goodput = true;
    char *t = render(&f->lm, LIVE_METRICS_OPENMETRICS);
    size_t n = strlen(t);
    assert_true(n > 6);
    assert_string_equal(t + n - 6, "# EOF\n");
    assert_ptr_equal(strstr(t, "# EOF"), t + n - 6); /* once, at the end */
    assert_has(t, "# HELP tokenstorm_requests Requests that ended, by outcome (warm-up "
                  "excluded).\n# TYPE tokenstorm_requests counter\n"
                  "tokenstorm_requests_total{outcome=\"ok\"} 3\n");
    assert_has(t, "# TYPE tokenstorm_run info\ntokenstorm_run_info{");
    assert_has(t, "# TYPE gen_ai_client_operation_duration_seconds histogram\n"
                  "# UNIT gen_ai_client_operation_duration_seconds seconds\n");
    assert_has(t, "# TYPE gen_ai_client_token_usage histogram\ngen_ai_client_token_usage_bucket{");
    assert_has(t, "# TYPE tokenstorm_requests_in_flight gauge\ntokenstorm_requests_in_flight 1\n");
    assert_has(t, "# TYPE tokenstorm_goodput_requests counter\n"
                  "tokenstorm_goodput_requests_total 0\n");
    assert_null(strstr(t, "# TYPE tokenstorm_requests_total"));
    assert_null(strstr(t, "# UNIT gen_ai_client_token_usage"));
    ts_free(t);
}

static void test_render_without_stats(void **state)
{
    (void)state;
    struct live_metrics lm;
    struct live_metrics_info info = {.model = "x", .endpoint = "embeddings"};
    assert_int_equal(live_metrics_init(&lm, &info), 0);
    char *t = render(&lm, LIVE_METRICS_TEXT);
    assert_has(t, "gen_ai_client_operation_duration_seconds_count{gen_ai_operation_name="
                  "\"embeddings\",gen_ai_provider_name=\"openai\",gen_ai_request_model=\"x\"} 0\n");
    assert_has(t, "tokenstorm_requests_total{outcome=\"ok\"} 0\n");
    assert_null(strstr(t, "gen_ai_token_type=\"output\"")); /* embeddings: input only */
    assert_null(strstr(t, "time_to_first_chunk"));          /* not streamed */
    ts_free(t);
    info.endpoint = "images";
    assert_int_equal(live_metrics_init(&lm, &info), -EINVAL);
}

static void test_negotiate(void **state)
{
    (void)state;
    /* what Prometheus 2.x sends */
    assert_int_equal(live_metrics_negotiate("application/openmetrics-text;version=1.0.0,"
                                            "application/openmetrics-text;version=0.0.1;q=0.75,"
                                            "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
                     LIVE_METRICS_OPENMETRICS);
    assert_int_equal(live_metrics_negotiate(NULL), LIVE_METRICS_TEXT);
    assert_int_equal(live_metrics_negotiate(""), LIVE_METRICS_TEXT);
    assert_int_equal(live_metrics_negotiate("*/*"), LIVE_METRICS_TEXT);
    assert_int_equal(live_metrics_negotiate("text/plain; version=0.0.4"), LIVE_METRICS_TEXT);
    assert_int_equal(live_metrics_negotiate("Application/OpenMetrics-Text"),
                     LIVE_METRICS_OPENMETRICS);
    assert_int_equal(live_metrics_negotiate("application/openmetrics-text; version=\"1.0.0\""),
                     LIVE_METRICS_OPENMETRICS);
    assert_int_equal(live_metrics_negotiate("application/openmetrics-text;version=2.0.0"),
                     LIVE_METRICS_TEXT);
    assert_int_equal(live_metrics_negotiate("application/openmetrics-text;q=0.3, text/plain;q=0.5"),
                     LIVE_METRICS_TEXT);
    assert_int_equal(live_metrics_negotiate("text/plain;q=0.2 , application/openmetrics-text ;"
                                            " q=0.9"),
                     LIVE_METRICS_OPENMETRICS);
    assert_int_equal(live_metrics_negotiate("application/openmetrics-text;q=0"), LIVE_METRICS_TEXT);
    assert_int_equal(live_metrics_negotiate("application/openmetrics-text;q=abc"),
                     LIVE_METRICS_TEXT);
    assert_int_equal(live_metrics_negotiate("application/json"), LIVE_METRICS_TEXT);
    assert_string_equal(live_metrics_content_type(LIVE_METRICS_TEXT),
                        "text/plain; version=0.0.4; charset=utf-8");
    assert_string_equal(live_metrics_content_type(LIVE_METRICS_OPENMETRICS),
                        "application/openmetrics-text; version=1.0.0; charset=utf-8");
}

static void test_parse_url(void **state)
{
    (void)state;
    char host[64], port[8];
    assert_int_equal(live_metrics_parse_url("http://127.0.0.1:8000/v1/chat/completions", host,
                                            sizeof(host), port),
                     0);
    assert_string_equal(host, "127.0.0.1");
    assert_string_equal(port, "8000");
    assert_int_equal(live_metrics_parse_url("https://api.example.com/v1", host, sizeof(host), port),
                     0);
    assert_string_equal(host, "api.example.com");
    assert_string_equal(port, "443");
    assert_int_equal(live_metrics_parse_url("HTTP://user:pw@gpu", host, sizeof(host), port), 0);
    assert_string_equal(host, "gpu");
    assert_string_equal(port, "80");
    assert_int_equal(live_metrics_parse_url("http://[::1]:9/x?y", host, sizeof(host), port), 0);
    assert_string_equal(host, "::1");
    assert_string_equal(port, "9");
    assert_int_equal(live_metrics_parse_url("gpu:8000", host, sizeof(host), port), -EINVAL);
    assert_int_equal(live_metrics_parse_url("http://h:99999/", host, sizeof(host), port), -EINVAL);
    assert_int_equal(live_metrics_parse_url("http://h:8a/", host, sizeof(host), port), -EINVAL);
    assert_int_equal(live_metrics_parse_url("http://:80/", host, sizeof(host), port), -EINVAL);
    assert_int_equal(live_metrics_parse_url("ftp://h/", host, sizeof(host), port), -EINVAL);
    assert_int_equal(live_metrics_parse_url("http://[::1/", host, sizeof(host), port), -EINVAL);
    assert_string_equal(host, "");
}

/* ---- the endpoint on a real loop, with a blocking client thread ---- */

struct harness {
    uv_loop_t loop;
    uv_async_t done;
    uv_timer_t guard;
    struct live_metrics_server srv;
    struct live_metrics lm;
    pthread_t client;
    int port;
    uint64_t linger_ms;
    char resp[3][65536]; /* what each request got */
    bool timed_out;
};

static void fetch(int port, const char *request, char *out, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct timeval tv = {.tv_sec = 5};
    out[0] = '\0';
    if (fd < 0)
        return;
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        write(fd, request, strlen(request)) == (ssize_t)strlen(request)) {
        size_t n = 0;
        ssize_t r;
        while (n + 1 < cap && (r = read(fd, out + n, cap - 1 - n)) > 0)
            n += (size_t)r;
        out[n] = '\0';
    }
    close(fd);
}

static void *client_main(void *arg)
{
    struct harness *h = arg;
    fetch(h->port,
          "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text;"
          "version=1.0.0,text/plain;version=0.0.4;q=0.5\r\nConnection: close\r\n\r\n",
          h->resp[0], sizeof(h->resp[0]));
    fetch(h->port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", h->resp[1],
          sizeof(h->resp[1]));
    fetch(h->port, "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", h->resp[2],
          sizeof(h->resp[2]));
    uv_async_send(&h->done);
    return NULL;
}

static void on_done(uv_async_t *a)
{
    struct harness *h = a->data;
    uv_close((uv_handle_t *)&h->done, NULL);
    live_metrics_server_linger(&h->srv, h->linger_ms, false);
}

static void on_guard(uv_timer_t *t)
{
    struct harness *h = t->data;
    h->timed_out = true;
    uv_stop(&h->loop);
}

static void test_endpoint(void **state)
{
    (void)state;
    struct harness *h = ts_calloc(1, sizeof(*h));
    assert_non_null(h);
    struct live_metrics_info info = {.model = "m", .stream = true};
    assert_int_equal(live_metrics_init(&h->lm, &info), 0);
    h->lm.sent = 42;
    h->linger_ms = 150;
    assert_int_equal(uv_loop_init(&h->loop), 0);
    char err[128];
    assert_int_equal(
        live_metrics_server_start(&h->srv, &h->loop, "127.0.0.1", 0, &h->lm, err, sizeof(err)), 0);
    h->port = live_metrics_server_port(&h->srv);
    assert_true(h->port > 0);
    assert_int_equal(uv_async_init(&h->loop, &h->done, on_done), 0);
    h->done.data = h;
    assert_int_equal(uv_timer_init(&h->loop, &h->guard), 0);
    h->guard.data = h;
    assert_int_equal(uv_timer_start(&h->guard, on_guard, 10000, 0), 0);
    uv_unref((uv_handle_t *)&h->guard); /* the loop ends when the server is gone */
    assert_int_equal(pthread_create(&h->client, NULL, client_main, h), 0);
    uint64_t t0 = ts_now_ns();
    uv_run(&h->loop, UV_RUN_DEFAULT);
    uint64_t took_ms = (ts_now_ns() - t0) / 1000000;
    pthread_join(h->client, NULL);
    assert_false(h->timed_out);
    assert_true(took_ms >= 140); /* it lingered */

    assert_non_null(strstr(h->resp[0], "HTTP/1.1 200 OK\r\n"));
    assert_non_null(
        strstr(h->resp[0],
               "Content-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\n"));
    assert_non_null(strstr(h->resp[0], "tokenstorm_requests_sent_total 42\n# HELP"));
    size_t n = strlen(h->resp[0]);
    assert_true(n > 6 && !strcmp(h->resp[0] + n - 6, "# EOF\n"));
    assert_non_null(strstr(h->resp[1], "HTTP/1.1 200 OK\r\n"));
    assert_non_null(
        strstr(h->resp[1], "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
    assert_null(strstr(h->resp[1], "# EOF"));
    assert_non_null(strstr(h->resp[2], "HTTP/1.1 404 "));
    assert_int_equal(h->lm.scrapes, 2);

    uv_close((uv_handle_t *)&h->guard, NULL);
    uv_run(&h->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&h->loop), 0);
    ts_free(h);
}

static void test_endpoint_listen_error(void **state)
{
    (void)state;
    uv_loop_t loop;
    struct live_metrics lm;
    struct live_metrics_info info = {0};
    assert_int_equal(live_metrics_init(&lm, &info), 0);
    assert_int_equal(uv_loop_init(&loop), 0);
    struct live_metrics_server a, b, c;
    char err[128];
    assert_int_equal(live_metrics_server_start(&a, &loop, "127.0.0.1", 0, &lm, err, sizeof(err)),
                     0);
    int rc = live_metrics_server_start(&b, &loop, "127.0.0.1", live_metrics_server_port(&a), &lm,
                                       err, sizeof(err));
    assert_int_equal(rc, UV_EADDRINUSE);
    assert_non_null(strstr(err, "cannot listen on 127.0.0.1:"));
    assert_int_equal(live_metrics_server_start(&c, &loop, "localhost", 0, &lm, err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "not an IP address"));
    live_metrics_server_linger(&a, 0, false);
    live_metrics_server_linger(&b, 0, false);
    live_metrics_server_linger(&c, 0, false); /* never started: nothing */
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_genai_fixed_buckets),
        cmocka_unit_test(test_buckets_from_hdr),
        cmocka_unit_test_setup_teardown(test_text_exposition, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_openmetrics_exposition, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test(test_render_without_stats),
        cmocka_unit_test(test_negotiate),
        cmocka_unit_test(test_parse_url),
        cmocka_unit_test(test_endpoint),
        cmocka_unit_test(test_endpoint_listen_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
