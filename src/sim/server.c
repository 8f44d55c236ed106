/*
 * server.c - lifecycle, routing and the simple endpoints of the simulator.
 * Generation requests (chat, completions) live in gen.c.
 */
#include "sim/replay.h"
#include "sim/server_int.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "llm/embed.h"
#include "llm/openai_encode.h"
#include "llm/text.h"
#include "net/ctlauth.h"
#include "telemetry/prom.h"

/* vLLM's buckets (vllm/engine/metrics.py), in seconds. */
static const double ttft_buckets[] = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                      0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                      20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
static const double tpot_buckets[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                      0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
static const double e2e_buckets[] = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                     5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                     60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
static const double lag_buckets[] = {1e-5,   2.5e-5, 5e-5, 1e-4,   2.5e-4, 5e-4, 1e-3,
                                     2.5e-3, 5e-3,   1e-2, 2.5e-2, 5e-2,   0.1,  1.0};

#define N(a) (sizeof(a) / sizeof((a)[0]))

int sim_send_error(struct http_request *req, const struct openai_error *e, const char *extra)
{
    struct buf b;
    buf_init(&b, 64 * 1024);
    int rc = openai_encode_error(&b, e);
    if (rc) {
        buf_release(&b);
        return http_respond(req, 500, "application/json", NULL, "{}", 2);
    }
    rc = http_respond(req, e->status, "application/json", extra, b.data, b.len);
    buf_release(&b);
    return rc;
}

static void send_json(struct http_request *req, int status, struct buf *b)
{
    (void)http_respond(req, status, "application/json", NULL, buf_cstr(b), b->len);
}

static void handle_models(struct sim_server *s, struct http_request *req)
{
    struct buf b;
    buf_init(&b, 64 * 1024);
    int rc = buf_append_str(&b, "{\"object\":\"list\",\"data\":[{\"id\":\"");
    if (!rc)
        rc = openai_json_escape(&b, s->profile.model, strlen(s->profile.model));
    if (!rc)
        rc = buf_appendf(&b,
                         "\",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"tokenstorm\","
                         "\"root\":\"",
                         (long long)(s->started_wall_ns / TS_NS_PER_S));
    if (!rc)
        rc = openai_json_escape(&b, s->profile.model, strlen(s->profile.model));
    if (!rc)
        rc = buf_appendf(&b, "\",\"max_model_len\":%u}]}", s->profile.max_model_len);
    if (rc)
        (void)http_respond(req, 500, NULL, NULL, NULL, 0);
    else
        send_json(req, 200, &b);
    buf_release(&b);
}

static int metrics_gauge(struct buf *b, const char *name, const char *help, const char *type,
                         const char *const *labels, double v)
{
    int rc = prom_header(b, name, help, type);
    return rc ? rc : prom_sample(b, name, labels, 1, v);
}

static int metrics_hist(struct buf *b, const char *name, const char *help,
                        const char *const *labels, const struct prom_hist *h)
{
    int rc = prom_header(b, name, help, "histogram");
    return rc ? rc : prom_histogram(b, name, labels, 1, h);
}

static void handle_metrics(struct sim_server *s, struct http_request *req)
{
    struct sim_engine_stats st;
    sim_engine_stats(s->engine, &st);
    const char *labels[] = {"model_name", s->profile.model};
    struct buf b;
    buf_init(&b, 4 << 20);
    int rc = 0;
    rc = rc ? rc
            : metrics_gauge(&b, "vllm:num_requests_running", "Number of requests in the batch.",
                            "gauge", labels, st.running);
    rc = rc ? rc
            : metrics_gauge(&b, "vllm:num_requests_waiting", "Number of requests waiting.", "gauge",
                            labels, st.waiting);
    rc = rc ? rc
            : metrics_gauge(&b, "vllm:kv_cache_usage_perc", "KV-cache usage, 1 means 100%.",
                            "gauge", labels, st.kv_usage);
    rc = rc ? rc
            : metrics_gauge(&b, "vllm:gpu_cache_usage_perc",
                            "KV-cache usage, 1 means 100% (older vLLM name).", "gauge", labels,
                            st.kv_usage);
    rc = rc ? rc
            : metrics_gauge(&b, "vllm:num_preemptions_total", "Cumulative preemptions.", "counter",
                            labels, (double)st.preemptions_total);
    rc = rc ? rc
            : metrics_gauge(&b, "vllm:prompt_tokens_total", "Prefill tokens processed.", "counter",
                            labels, (double)st.prompt_tokens_total);
    rc = rc ? rc
            : metrics_gauge(&b, "vllm:generation_tokens_total", "Generation tokens processed.",
                            "counter", labels, (double)st.generation_tokens_total);
    /* vLLM V1's prefix cache counters (tokens), and V0's hit-rate gauge, cumulative */
    rc = rc ? rc
            : metrics_gauge(&b, "vllm:prefix_cache_queries_total",
                            "Prefix cache queries, in terms of number of queried tokens.",
                            "counter", labels, (double)st.prefix_cache_queries);
    rc = rc ? rc
            : metrics_gauge(&b, "vllm:prefix_cache_hits_total",
                            "Prefix cache hits, in terms of number of cached tokens.", "counter",
                            labels, (double)st.prefix_cache_hits);
    rc = rc ? rc
            : metrics_gauge(&b, "vllm:gpu_prefix_cache_hit_rate",
                            "Prefix cache hit rate: hit tokens / queried tokens since start.",
                            "gauge", labels,
                            st.prefix_cache_queries
                                ? (double)st.prefix_cache_hits / (double)st.prefix_cache_queries
                                : 0);
    if (!rc)
        rc = prom_header(&b, "vllm:request_success_total", "Successfully finished requests.",
                         "counter");
    for (int i = 0; !rc && i < 2; i++) {
        const char *l[] = {"model_name", s->profile.model, "finished_reason",
                           i ? "length" : "stop"};
        rc = prom_sample(&b, "vllm:request_success_total", l, 2, (double)s->finished_by[i]);
    }
    rc = rc ? rc
            : metrics_hist(&b, "vllm:time_to_first_token_seconds", "Time to first token.", labels,
                           &s->h_ttft);
    rc = rc ? rc
            : metrics_hist(&b, "vllm:time_per_output_token_seconds",
                           "Time per output token (inter-token).", labels, &s->h_tpot);
    rc = rc ? rc
            : metrics_hist(&b, "vllm:inter_token_latency_seconds", "Inter-token latency.", labels,
                           &s->h_tpot);
    rc = rc ? rc
            : metrics_hist(&b, "vllm:e2e_request_latency_seconds", "End-to-end request latency.",
                           labels, &s->h_e2e);
    rc = rc ? rc
            : metrics_hist(&b, "vllm:request_queue_time_seconds",
                           "Time from arrival to first admission.", labels, &s->h_queue);
    rc = rc ? rc
            : metrics_hist(&b, "tokenstorm_sim_send_lag_seconds",
                           "Token write time minus the engine step's due time.", labels,
                           &s->h_send_lag);
    rc = rc ? rc
            : metrics_gauge(&b, "tokenstorm_sim_vector_searches_total",
                            "Vector store searches answered.", "counter", labels,
                            (double)s->stats.vector_searches);
    rc = rc ? rc
            : metrics_gauge(&b, "tokenstorm_sim_rejected_total",
                            "Requests refused with 429 (queue full).", "counter", labels,
                            (double)s->stats.rejected_429);
    rc =
        rc ? rc
           : metrics_gauge(&b, "tokenstorm_sim_cancelled_total", "Requests whose client went away.",
                           "counter", labels, (double)s->stats.cancelled);
    rc = rc ? rc
            : metrics_gauge(&b, "tokenstorm_sim_ignored_disconnects_total",
                            "Requests whose client went away and whose generation went on "
                            "(--ignore-disconnect).",
                            "counter", labels, (double)s->stats.ignored_gone);
    if (rc)
        (void)http_respond(req, 500, NULL, NULL, NULL, 0);
    else
        (void)http_respond(req, 200, PROM_CONTENT_TYPE, NULL, b.data, b.len);
    buf_release(&b);
}

static void handle_embeddings(struct sim_server *s, struct http_request *req)
{
    struct openai_request r;
    struct openai_error e;
    openai_request_init(&r);
    if (openai_request_parse(&r, OPENAI_EMBEDDINGS, req->body, req->body_len, NULL, &e)) {
        sim_send_error(req, &e, NULL);
        return;
    }
    if (!sim_model_ok(s, req, r.model)) {
        openai_request_release(&r);
        return;
    }
    size_t dims = r.dimensions > 0 ? (size_t)r.dimensions : s->embed_dims;
    if (dims > EMBED_MAX_DIMS) {
        openai_error_set(&e, 400, "invalid_request_error", "dimensions", "invalid_value",
                         "Invalid 'dimensions': at most %d are supported.", EMBED_MAX_DIMS);
        sim_send_error(req, &e, NULL);
        openai_request_release(&r);
        return;
    }
    float *vecs = ts_malloc(r.n_inputs * dims * sizeof(float));
    struct buf b;
    buf_init(&b, 256u << 20);
    int64_t tokens = 0;
    int rc = vecs ? 0 : -ENOMEM;
    for (size_t i = 0; !rc && i < r.n_inputs; i++) {
        const struct openai_input *in = &r.inputs[i];
        if (in->text) {
            tokens += (int64_t)text_count_tokens(in->text, in->len);
            rc = embed_text(in->text, in->len, vecs + i * dims, dims);
        } else {
            char tag[32];
            int n = snprintf(tag, sizeof(tag), "tokens:%lld", (long long)in->n_tokens);
            tokens += in->n_tokens;
            rc = embed_text(tag, (size_t)n, vecs + i * dims, dims);
        }
    }
    if (!rc)
        rc = openai_encode_embeddings(&b, r.model, vecs, r.n_inputs, dims, r.encoding_format,
                                      tokens);
    if (rc)
        (void)http_respond(req, 500, NULL, NULL, NULL, 0);
    else
        send_json(req, 200, &b);
    s->stats.embeddings++;
    buf_release(&b);
    ts_free(vecs);
    openai_request_release(&r);
}

bool sim_model_ok(struct sim_server *s, struct http_request *req, const char *model)
{
    if (s->any_model || !model || !strcmp(model, s->profile.model))
        return true;
    struct openai_error e;
    openai_error_set(&e, 404, "invalid_request_error", "model", "model_not_found",
                     "The model `%s` does not exist.", model);
    sim_send_error(req, &e, NULL);
    return false;
}

static void not_found(struct http_request *req)
{
    struct openai_error e;
    openai_error_set(&e, 404, "invalid_request_error", NULL, "not_found", "No route for %s %s.",
                     req->method, req->path);
    sim_send_error(req, &e, NULL);
}

static void wrong_method(struct http_request *req, const char *allow)
{
    struct openai_error e;
    char extra[64];
    snprintf(extra, sizeof(extra), "Allow: %s\r\n", allow);
    openai_error_set(&e, 405, "invalid_request_error", NULL, "method_not_allowed",
                     "Method %s is not allowed for %s.", req->method, req->path);
    sim_send_error(req, &e, extra);
}

static void on_request(struct http_request *req, void *ctx)
{
    struct sim_server *s = ctx;
    const char *p = req->path;
    bool get = !strcmp(req->method, "GET") || !strcmp(req->method, "HEAD");
    bool post = !strcmp(req->method, "POST");
    if (sim_admin_route(s, req))
        return;
    if (s->api_key && (!strncmp(p, "/v1/", 4) || !strcmp(p, "/realtime")) &&
        !ctlauth_allows(req, s->api_key)) {
        struct openai_error e;
        openai_error_set(&e, 401, "invalid_request_error", NULL, "invalid_api_key",
                         "Incorrect API key provided: send 'Authorization: Bearer KEY' with the "
                         "key the simulator was started with (--api-key).");
        sim_send_error(req, &e, "WWW-Authenticate: Bearer\r\n");
        return;
    }
    if (s->replay && post) {
        if (sim_admin_intercept(s, req, false))
            return;
        sim_replay_handle(s->replay, s->loop, req);
        return;
    }
    if (!strcmp(p, "/v1/chat/completions") || !strcmp(p, "/v1/completions")) {
        if (!post)
            return wrong_method(req, "POST");
        if (sim_admin_intercept(s, req, false))
            return;
        return sim_gen_handle(s, req,
                              p[4] == 'c' && p[5] == 'h' ? OPENAI_CHAT : OPENAI_COMPLETIONS);
    }
    if (!strcmp(p, "/v1/realtime") || !strcmp(p, "/realtime")) {
        if (strcmp(req->method, "GET"))
            return wrong_method(req, "GET");
        return sim_rt_handle(s, req);
    }
    if (!strcmp(p, "/v1/embeddings")) {
        if (!post)
            return wrong_method(req, "POST");
        if (sim_admin_intercept(s, req, false))
            return;
        return handle_embeddings(s, req);
    }
    if (sim_vecs_route(s, req, p, get, post))
        return;
    static const char vs_prefix[] = "/v1/vector_stores/";
    if (!strncmp(p, vs_prefix, sizeof(vs_prefix) - 1)) {
        const char *id = p + sizeof(vs_prefix) - 1;
        const char *slash = strchr(id, '/');
        if (slash && slash > id && !strcmp(slash, "/search")) {
            if (!post)
                return wrong_method(req, "POST");
            return sim_vsearch_handle(s, req, id, (size_t)(slash - id));
        }
    }
    if (!strcmp(p, "/v1/models") || !strcmp(p, "/health") || !strcmp(p, "/metrics") ||
        !strcmp(p, "/ping")) {
        if (!get)
            return wrong_method(req, "GET");
        if (p[1] == 'v')
            return handle_models(s, req);
        if (p[1] == 'm')
            return handle_metrics(s, req);
        if (p[1] == 'h' && sim_admin_intercept(s, req, true))
            return;
        (void)http_respond(req, 200, NULL, NULL, NULL, 0);
        return;
    }
    not_found(req);
}

/* The chunk-signing key and the /metrics histograms. 0 or -EINVAL (a bad key). */
static int sign_and_hists(struct sim_server *s, const struct sim_server_config *cfg, char *err,
                          size_t errlen)
{
    if (cfg->sign_key) {
        s->sign_key_len = strlen(cfg->sign_key);
        if (!s->sign_key_len || s->sign_key_len > sizeof(s->sign_key)) {
            ts_errf(err, errlen, "the signing key must be 1..%zu bytes", sizeof(s->sign_key));
            return -EINVAL;
        }
        memcpy(s->sign_key, cfg->sign_key, s->sign_key_len);
    }
    prom_hist_init(&s->h_ttft, ttft_buckets, N(ttft_buckets));
    prom_hist_init(&s->h_tpot, tpot_buckets, N(tpot_buckets));
    prom_hist_init(&s->h_e2e, e2e_buckets, N(e2e_buckets));
    prom_hist_init(&s->h_queue, e2e_buckets, N(e2e_buckets));
    prom_hist_init(&s->h_send_lag, lag_buckets, N(lag_buckets));
    return 0;
}

int sim_server_start(uv_loop_t *loop, const struct sim_server_config *cfg, struct sim_server **out,
                     char *err, size_t errlen)
{
    struct sim_server *s = ts_calloc(1, sizeof(*s));
    if (!s) {
        ts_errf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    s->loop = loop;
    s->profile = cfg->profile;
    s->any_model = cfg->any_model;
    s->api_key = cfg->api_key;
    s->quiet = cfg->quiet;
    s->ignore_disconnect = cfg->ignore_disconnect;
    if (cfg->replay_dir && sim_replay_open(cfg->replay_dir, &s->replay, err, errlen)) {
        ts_free(s);
        return -EINVAL;
    }
    s->embed_dims = cfg->embed_dims ? cfg->embed_dims : 1024;
    s->started_wall_ns = ts_wall_ns();
    s->id_seed = cfg->profile.seed ^ ts_wall_ns();
    buf_init(&s->sign_scratch, 64u << 20);
    int rc = sign_and_hists(s, cfg, err, errlen);
    if (rc) {
        sim_replay_free(s->replay);
        ts_free(s);
        return rc;
    }
    rc = dist_parse(&s->output_len, cfg->output_len ? cfg->output_len : "lognormal:180,0.7", err,
                    errlen);
    if (rc)
        goto out_free;
    if (cfg->answers_path && (rc = answers_load(cfg->answers_path, &s->answers, err, errlen)))
        goto out_dist;
    if (cfg->trace_log_path && (rc = asyncw_open(cfg->trace_log_path, 0, &s->trace, err, errlen)))
        goto out_answers;
    static const struct sim_engine_ops ops = {
        .on_admit = sim_gen_on_admit,
        .on_token = sim_gen_on_token,
        .on_finish = sim_gen_on_finish,
        .on_preempt = sim_gen_on_preempt,
    };
    /* with an API cost per event, tokens are written when the modelled server sends them */
    static const struct sim_engine_ops ops_at = {
        .on_admit = sim_gen_on_admit,
        .on_token_at = sim_gen_on_token_at,
        .on_finish = sim_gen_on_finish,
        .on_preempt = sim_gen_on_preempt,
    };
    s->engine = sim_engine_new(&s->profile, s->profile.api_ms_per_event > 0 ? &ops_at : &ops, s);
    if (!s->engine) {
        rc = -EINVAL;
        if (sim_profile_validate(&s->profile, err, errlen) == 0)
            ts_errf(err, errlen, "cannot create the engine: out of memory");
        goto out_trace;
    }
    sim_admin_init(s, cfg->admin);
    s->admin.token = cfg->admin_token;
    if ((rc = ptimer_init(loop, &s->step_timer))) {
        ts_errf(err, errlen, "timer: %s", uv_strerror(rc));
        goto out_engine;
    }
    s->step_timer.data = s;
    s->handles++;
    if ((rc = sim_gen_send_init(s))) {
        ts_errf(err, errlen, "timer: %s", uv_strerror(rc));
        goto out_timer;
    }
    if ((rc = sim_vsearch_init(s, cfg, err, errlen)))
        goto out_timer;
    if ((rc = sim_vecs_init(s, cfg, err, errlen)))
        goto out_timer;
    struct http_server_config hc = {
        .host = cfg->host ? cfg->host : "127.0.0.1",
        .port = cfg->port,
        .header_timeout_ms = cfg->header_timeout_ms,
        .idle_timeout_ms = cfg->idle_timeout_ms,
        .max_body_bytes = cfg->max_body_bytes,
        .eof_keeps_request = cfg->ignore_disconnect,
    };
    if ((rc = http_server_init(&s->http, loop, &hc, on_request, s))) {
        ts_errf(err, errlen, "http server: %s", rc == -EINVAL ? "bad host" : ts_strerror(rc));
        goto out_timer;
    }
    s->http_inited = true;
    if ((rc = http_server_listen(&s->http))) {
        ts_errf(err, errlen, "cannot listen on %s:%d: %s", hc.host, hc.port, uv_strerror(rc));
        goto out_close;
    }
    *out = s;
    return 0;

out_timer:
    sim_server_close_timer(s);
out_close:
    /* handles close asynchronously: run the (dedicated) loop until they have */
    sim_server_shutdown(s, 0, NULL, NULL);
    while (s->handles > 0)
        uv_run(loop, UV_RUN_ONCE);
    sim_server_free(s);
    *out = NULL;
    return rc;
out_engine:
    sim_engine_free(s->engine);
out_trace:
    (void)asyncw_close(s->trace);
out_answers:
    answers_free(s->answers);
out_dist:
    dist_release(&s->output_len);
out_free:
    buf_release(&s->sign_scratch);
    sim_replay_free(s->replay);
    ts_free(s);
    *out = NULL;
    return rc;
}

int sim_server_port(const struct sim_server *s)
{
    return http_server_port(&s->http);
}

static void maybe_closed(struct sim_server *s)
{
    if (s->handles > 0)
        return;
    if (s->on_closed) {
        void (*cb)(struct sim_server *, void *) = s->on_closed;
        s->on_closed = NULL;
        cb(s, s->on_closed_arg);
    }
}

static void on_http_closed(struct http_server *h)
{
    struct sim_server *s = (struct sim_server *)((char *)h - offsetof(struct sim_server, http));
    s->handles--;
    /* every request is finished: the engine has nothing left to step */
    sim_server_close_timer(s);
    maybe_closed(s);
}

static void on_admin_timer_closed(uv_handle_t *h)
{
    struct sim_server *s = h->data;
    s->handles--;
    maybe_closed(s);
}

static void on_timer_closed(struct ptimer *t)
{
    struct sim_server *s = t->data;
    s->handles--;
    maybe_closed(s);
}

void sim_server_shutdown(struct sim_server *s, uint64_t grace_ms,
                         void (*on_closed)(struct sim_server *s, void *arg), void *arg)
{
    if (s->shutting_down)
        return;
    s->shutting_down = true;
    s->on_closed = on_closed;
    s->on_closed_arg = arg;
    sim_rt_shutdown(s);
    if (s->admin.kv_timer_inited) {
        s->handles++;
        uv_close((uv_handle_t *)&s->admin.kv_timer, on_admin_timer_closed);
    }
    if (s->http_inited) {
        s->handles++;
        (void)http_server_shutdown(&s->http, grace_ms, on_http_closed);
    }
    /* the step timer keeps running so streams can finish within the grace;
     * it is closed when the HTTP server has finished every request */
    else
        sim_server_close_timer(s);
}

void sim_server_close_timer(struct sim_server *s)
{
    sim_vsearch_close(s, on_timer_closed);
    sim_gen_send_close(s, on_timer_closed);
    if (s->timer_closing || !s->step_timer.poll.loop)
        return;
    s->timer_closing = true;
    ptimer_close(&s->step_timer, on_timer_closed);
}

void sim_server_free(struct sim_server *s)
{
    if (!s)
        return;
    sim_gen_send_release(s);
    sim_engine_free(s->engine);
    (void)asyncw_close(s->trace);
    answers_free(s->answers);
    sim_vsearch_release(s);
    sim_vecs_release(s);
    dist_release(&s->output_len);
    buf_release(&s->sign_scratch);
    sim_replay_free(s->replay);
    ts_free(s);
}

void sim_server_stats(const struct sim_server *s, struct sim_server_stats *st)
{
    *st = s->stats;
}
