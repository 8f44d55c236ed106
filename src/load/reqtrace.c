/*
 * reqtrace.c - W3C trace context on every request and one OTLP span per
 * request (see reqtrace.h).
 */
#include "load/reqtrace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include <curl/curl.h>

#include "base/clock.h"
#include "base/rng.h"

/* One generator per thread: ids are drawn on the worker that sends the request. */
static _Thread_local struct rng id_rng;
static _Thread_local bool id_rng_seeded;

static uint64_t id_next(void)
{
    if (!id_rng_seeded) {
        uint64_t seed;
        if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed))
            seed = ts_wall_ns() ^ ((uint64_t)(uintptr_t)&id_rng << 17);
        rng_seed(&id_rng, seed);
        id_rng_seeded = true;
    }
    return rng_next_u64(&id_rng);
}

/* Fills n bytes (8 or 16) with random bits, never all zero. */
static void id_fill(uint8_t *id, size_t n)
{
    do {
        for (size_t i = 0; i < n; i += 8) {
            uint64_t v = id_next();
            memcpy(id + i, &v, 8);
        }
    } while (!trace_id_valid(id, n));
}

static const char *operation_of(enum workload_endpoint ep)
{
    switch (ep) {
    case WORKLOAD_CHAT:
        return "chat";
    case WORKLOAD_COMPLETIONS:
        return "text_completion";
    case WORKLOAD_EMBEDDINGS:
        return "embeddings";
    case WORKLOAD_VECTOR_SEARCH:
        return "vector_search";
    }
    return "chat";
}

/* server.address and server.port of the target URL (IPv6 without brackets). */
static void parse_server(struct reqtrace_run *t, const char *url)
{
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL;
    t->server_port = -1;
    if (u && !curl_url_set(u, CURLUPART_URL, url, 0) &&
        !curl_url_get(u, CURLUPART_HOST, &host, 0)) {
        size_t n = strlen(host);
        if (n >= 2 && host[0] == '[' && host[n - 1] == ']')
            snprintf(t->server_address, sizeof(t->server_address), "%.*s", (int)(n - 2), host + 1);
        else
            snprintf(t->server_address, sizeof(t->server_address), "%s", host);
        if (!curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT))
            t->server_port = (int32_t)strtol(port, NULL, 10);
    }
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
}

int reqtrace_run_init(struct reqtrace_run *t, const struct reqtrace_config *cfg, const char *url,
                      enum workload_endpoint ep, char *err, size_t errlen)
{
    memset(t, 0, sizeof(*t));
    t->cfg = cfg;
    t->operation = operation_of(ep);
    t->wall_minus_mono = (int64_t)ts_wall_ns() - (int64_t)ts_now_ns();
    parse_server(t, url);
    if (cfg->otlp && cfg->otlp->endpoint)
        return otlp_exporter_new(cfg->otlp, &t->exporter, err, errlen);
    return 0;
}

void reqtrace_run_finish(struct reqtrace_run *t, struct otlp_stats *stats, bool *enabled)
{
    struct otlp_stats st = {0};
    if (enabled)
        *enabled = t->exporter != NULL;
    if (t->exporter) {
        otlp_exporter_close(t->exporter, &st);
        t->exporter = NULL;
    }
    if (stats)
        *stats = st;
}

/* The members are small: only an oversized tenant or scenario name can fail,
 * and it is then left out of the header. */
static void bag_add(struct baggage *b, const char *key, const char *value)
{
    if (baggage_add(b, key, value))
        return;
}

size_t reqtrace_begin(struct reqtrace *rt, const struct reqtrace_run *t, uint64_t run_id,
                      uint64_t index, uint16_t tenant, struct reqtrace_headers *h, const char **out)
{
    const struct reqtrace_config *cfg = t->cfg;
    struct trace_context tc = {.flags = TRACE_FLAG_SAMPLED};
    if (cfg->has_parent)
        memcpy(rt->trace_id, cfg->parent.trace_id, TRACE_ID_LEN);
    else
        id_fill(rt->trace_id, TRACE_ID_LEN);
    id_fill(rt->span_id, SPAN_ID_LEN);
    rt->started = true;
    memcpy(tc.trace_id, rt->trace_id, TRACE_ID_LEN);
    memcpy(tc.span_id, rt->span_id, SPAN_ID_LEN);
    size_t n = 0;
    memcpy(h->traceparent, "traceparent: ", 13);
    if (!traceparent_format(&tc, h->traceparent + 13, sizeof(h->traceparent) - 13))
        out[n++] = h->traceparent; /* cannot fail: the ids are never zero */

    char value[64];
    struct baggage b;
    memcpy(h->baggage, "baggage: ", 9);
    baggage_init(&b, h->baggage + 9, sizeof(h->baggage) - 9);
    snprintf(value, sizeof(value), "ts-%016llx-%llu", (unsigned long long)run_id,
             (unsigned long long)index);
    bag_add(&b, "tokenstorm.request_id", value);
    const char *tname = tenant < cfg->n_tenants ? cfg->tenant_names[tenant] : NULL;
    if (!tname) {
        snprintf(value, sizeof(value), "%u", (unsigned)tenant);
        tname = value;
    }
    bag_add(&b, "tokenstorm.tenant", tname);
    bag_add(&b, "tokenstorm.scenario", cfg->scenario ? cfg->scenario : "run");
    if (b.n)
        out[n++] = h->baggage;
    return n;
}

int reqtrace_header_parent(const char *line, struct trace_context *parent)
{
    if (strncasecmp(line, "traceparent:", 12))
        return 0;
    const char *v = line + 12;
    while (*v == ' ' || *v == '\t')
        v++;
    size_t n = strlen(v);
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    return traceparent_parse(v, n, parent) ? TS_PARSE : 1;
}

bool reqtrace_note(struct reqtrace *rt, const char *id, const char *model)
{
    if (id && !rt->response_id[0])
        otlp_copy_str(rt->response_id, sizeof(rt->response_id), id);
    if (model && !rt->response_model[0])
        otlp_copy_str(rt->response_model, sizeof(rt->response_model), model);
    return rt->response_id[0] && rt->response_model[0];
}

static double ms_of(uint64_t ns)
{
    return (double)ns / 1e6;
}

void reqtrace_span_of(struct otlp_span *s, const struct reqtrace *rt, const struct reqtrace_run *t,
                      uint64_t run_id, const struct req_record *r)
{
    const struct reqtrace_config *cfg = t->cfg;
    otlp_span_init(s);
    memcpy(s->trace_id, rt->trace_id, TRACE_ID_LEN);
    memcpy(s->span_id, rt->span_id, SPAN_ID_LEN);
    if (cfg->has_parent)
        memcpy(s->parent_span_id, cfg->parent.span_id, SPAN_ID_LEN);
    s->kind = OTLP_KIND_CLIENT;
    s->start_unix_ns = (uint64_t)((int64_t)r->start_ns + t->wall_minus_mono);
    s->end_unix_ns =
        (uint64_t)((int64_t)(r->end_ns ? r->end_ns : r->start_ns) + t->wall_minus_mono);
    s->stream = (r->flags & REQF_STREAM) != 0;
    s->warmup = (r->flags & REQF_WARMUP) != 0;
    s->operation = t->operation;
    s->provider = cfg->provider ? cfg->provider : "openai";
    s->request_model = cfg->model;
    s->server_address = t->server_address[0] ? t->server_address : NULL;
    s->server_port = s->server_address ? t->server_port : -1;
    s->outcome = req_outcome_name(r->outcome);
    if (r->http_status > 0)
        s->http_status = r->http_status;
    s->tenant = r->tenant;
    if (r->max_tokens)
        s->max_tokens = r->max_tokens;
    if (r->usage_prompt_tokens >= 0)
        s->input_tokens = r->usage_prompt_tokens;
    if (r->usage_completion_tokens >= 0)
        s->output_tokens = r->usage_completion_tokens;
    s->client_output_tokens = r->output_tokens;
    if (cfg->has_temperature)
        s->temperature = cfg->temperature;
    if (s->stream && r->first_chunk_ns >= r->start_ns && r->first_chunk_ns) {
        s->first_chunk_unix_ns = (uint64_t)((int64_t)r->first_chunk_ns + t->wall_minus_mono);
        s->ttfc_s = (double)(r->first_chunk_ns - r->start_ns) / 1e9;
        if (r->first_chunk_ns >= r->intended_ns)
            s->ttft_ms = ms_of(r->first_chunk_ns - r->intended_ns);
    }
    if (r->choice_chunks >= 2) {
        s->itl_mean_ms = ms_of(r->itl_sum_ns) / (double)(r->choice_chunks - 1);
        s->itl_max_ms = ms_of(r->itl_max_ns);
    }
    if (r->start_ns >= r->intended_ns)
        s->lag_ms = ms_of(r->start_ns - r->intended_ns);
    snprintf(s->request_id, sizeof(s->request_id), "ts-%016llx-%llu", (unsigned long long)run_id,
             (unsigned long long)r->id);
    snprintf(s->response_id, sizeof(s->response_id), "%s", rt->response_id);
    snprintf(s->response_model, sizeof(s->response_model), "%s", rt->response_model);
    otlp_copy_str(s->finish_reason, sizeof(s->finish_reason), r->finish_reason);
    if (req_outcome_is_error(r->outcome)) {
        s->status = OTLP_STATUS_ERROR;
        bool http =
            r->outcome == REQ_HTTP_429 || r->outcome == REQ_HTTP_4XX || r->outcome == REQ_HTTP_5XX;
        if (http && r->http_status > 0)
            snprintf(s->error_type, sizeof(s->error_type), "%d", r->http_status);
        else
            snprintf(s->error_type, sizeof(s->error_type), "%s", s->outcome);
        otlp_copy_str(s->status_message, sizeof(s->status_message), r->error);
    }
}

void reqtrace_end(const struct reqtrace *rt, const struct reqtrace_run *t, uint64_t run_id,
                  const struct req_record *r)
{
    if (!t->exporter || !rt->started)
        return;
    struct otlp_span s;
    reqtrace_span_of(&s, rt, t, run_id, r);
    (void)otlp_exporter_push(t->exporter, &s); /* a full queue drops it, counted */
}
