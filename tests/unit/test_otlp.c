/*
 * test_otlp.c - the OTLP JSON mapping of a fixture span (hex ids, int64 as
 * strings, enums as integers, required fields), escaping, the response and
 * configuration parsers, the request span built from a request record, and
 * the exporter against a loopback receiver (net/http_server.h on a thread of
 * its own, 127.0.0.1 port 0): batching, gzip, headers, retries of 503/429
 * with Retry-After and backoff, no retry of 400, partial success, a full
 * queue, a flush that times out, an unreachable receiver.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <cmocka.h>

#include <jansson.h>
#include <zlib.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "load/reqtrace.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "telemetry/otlp.h"

/* ---- helpers ---- */

static json_t *find_attr(json_t *attrs, const char *key)
{
    size_t i;
    json_t *a;
    json_array_foreach(attrs, i, a)
    {
        if (!strcmp(json_string_value(json_object_get(a, "key")), key))
            return json_object_get(a, "value");
    }
    return NULL;
}

static const char *attr_s(json_t *attrs, const char *key)
{
    json_t *v = find_attr(attrs, key);
    return v ? json_string_value(json_object_get(v, "stringValue")) : NULL;
}

static bool is_lower_hex(const char *s, size_t n)
{
    if (!s || strlen(s) != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

static bool is_decimal_string(json_t *v)
{
    const char *s = json_string_value(v);
    if (!s || !*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

/*
 * Checks one span object against the OTLP JSON rules; returns NULL or what is
 * wrong. Used on the fixture and on everything the receiver gets.
 */
static const char *span_mapping_error(json_t *sp)
{
    if (!json_is_object(sp))
        return "span is not an object";
    if (!is_lower_hex(json_string_value(json_object_get(sp, "traceId")), 32))
        return "traceId is not 32 hex digits";
    if (!is_lower_hex(json_string_value(json_object_get(sp, "spanId")), 16))
        return "spanId is not 16 hex digits";
    json_t *p = json_object_get(sp, "parentSpanId");
    if (p && !is_lower_hex(json_string_value(p), 16))
        return "parentSpanId is not 16 hex digits";
    if (!json_string_value(json_object_get(sp, "name")) ||
        !*json_string_value(json_object_get(sp, "name")))
        return "no name";
    if (!json_is_integer(json_object_get(sp, "kind")))
        return "kind is not an integer";
    if (!is_decimal_string(json_object_get(sp, "startTimeUnixNano")) ||
        !is_decimal_string(json_object_get(sp, "endTimeUnixNano")))
        return "times are not decimal strings";
    if (!json_is_integer(json_object_get(json_object_get(sp, "status"), "code")))
        return "status.code is not an integer";
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(sp, "attributes"), i, a)
    {
        json_t *v = json_object_get(a, "value");
        if (!json_is_string(json_object_get(a, "key")) || json_object_size(v) != 1)
            return "attribute without key or with not exactly one value";
        json_t *iv = json_object_get(v, "intValue");
        if (iv && !is_decimal_string(iv))
            return "intValue is not a decimal string";
    }
    json_array_foreach(json_object_get(sp, "events"), i, a)
    {
        if (!is_decimal_string(json_object_get(a, "timeUnixNano")) ||
            !json_is_string(json_object_get(a, "name")))
            return "event without time or name";
    }
    return NULL;
}

/* ---- the JSON mapping ---- */

static void fixture(struct otlp_span *s)
{
    otlp_span_init(s);
    assert_int_equal(trace_id_from_hex("4bf92f3577b34da6a3ce929d0e0e4736", s->trace_id, 16), 0);
    assert_int_equal(trace_id_from_hex("00f067aa0ba902b7", s->span_id, 8), 0);
    s->kind = OTLP_KIND_CLIENT;
    s->start_unix_ns = 1700000000123456789ull;
    s->end_unix_ns = 1700000002123456789ull;
    s->first_chunk_unix_ns = 1700000000323456789ull;
    s->stream = true;
    s->operation = "chat";
    s->provider = "openai";
    s->request_model = "meta-llama/Llama-3.1-8B-Instruct";
    s->server_address = "127.0.0.1";
    s->server_port = 8000;
    s->outcome = "http_5xx";
    s->http_status = 503;
    s->tenant = 0;
    s->max_tokens = 128;
    s->input_tokens = 512;
    s->output_tokens = 9223372036854775807ll; /* int64 max survives as a string */
    s->client_output_tokens = 100;
    s->temperature = 0.7;
    s->ttfc_s = 0.2;
    s->ttft_ms = 205.5;
    s->itl_mean_ms = 12.25;
    s->itl_max_ms = 40;
    s->lag_ms = 5.5;
    snprintf(s->request_id, sizeof(s->request_id), "ts-00000000000000ab-7");
    snprintf(s->response_id, sizeof(s->response_id), "chatcmpl-123");
    snprintf(s->response_model, sizeof(s->response_model), "llama-3.1-8b");
    snprintf(s->finish_reason, sizeof(s->finish_reason), "length");
    s->status = OTLP_STATUS_ERROR;
    snprintf(s->error_type, sizeof(s->error_type), "503");
    snprintf(s->status_message, sizeof(s->status_message), "overloaded");
}

static void test_mapping(void **state)
{
    struct otlp_config cfg;
    otlp_config_init(&cfg);
    cfg.service_name = "svc-under-test";
    struct otlp_kv res = {.key = "deployment.environment.name", .value = "ci"};
    cfg.resource[0] = res;
    cfg.n_resource = 1;
    struct otlp_span spans[2];
    fixture(&spans[0]);
    fixture(&spans[1]);
    /* the second is a child of the first (a flow step under a flow span) */
    assert_int_equal(trace_id_from_hex("1111111111111111", spans[1].span_id, 8), 0);
    memcpy(spans[1].parent_span_id, spans[0].span_id, 8);
    spans[1].status = OTLP_STATUS_UNSET;
    spans[1].error_type[0] = '\0';

    struct buf b;
    buf_init(&b, 1 << 20);
    assert_int_equal(otlp_encode_request(&b, &cfg, spans, 2), 0);
    json_error_t jerr;
    json_t *doc = json_loadb(b.data, b.len, 0, &jerr);
    if (!doc)
        fail_msg("not JSON: %s: %s", jerr.text, b.data);
    json_t *rs = json_array_get(json_object_get(doc, "resourceSpans"), 0);
    json_t *rattrs = json_object_get(json_object_get(rs, "resource"), "attributes");
    assert_string_equal(attr_s(rattrs, "service.name"), "svc-under-test");
    assert_string_equal(attr_s(rattrs, "deployment.environment.name"), "ci");
    json_t *ss = json_array_get(json_object_get(rs, "scopeSpans"), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(ss, "scope"), "name")),
                        "tokenstorm");
    json_t *arr = json_object_get(ss, "spans");
    assert_int_equal(json_array_size(arr), 2);
    json_t *sp = json_array_get(arr, 0);
    const char *why = span_mapping_error(sp);
    if (why)
        fail_msg("%s", why);
    assert_string_equal(json_string_value(json_object_get(sp, "traceId")),
                        "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_string_equal(json_string_value(json_object_get(sp, "spanId")), "00f067aa0ba902b7");
    assert_null(json_object_get(sp, "parentSpanId")); /* a root span has none */
    assert_string_equal(json_string_value(json_object_get(sp, "name")),
                        "chat meta-llama/Llama-3.1-8B-Instruct");
    assert_int_equal(json_integer_value(json_object_get(sp, "kind")), 3);
    assert_string_equal(json_string_value(json_object_get(sp, "startTimeUnixNano")),
                        "1700000000123456789");
    assert_string_equal(json_string_value(json_object_get(sp, "endTimeUnixNano")),
                        "1700000002123456789");
    json_t *st = json_object_get(sp, "status");
    assert_int_equal(json_integer_value(json_object_get(st, "code")), 2);
    assert_string_equal(json_string_value(json_object_get(st, "message")), "overloaded");

    json_t *at = json_object_get(sp, "attributes");
    assert_string_equal(attr_s(at, "gen_ai.operation.name"), "chat");
    assert_string_equal(attr_s(at, "gen_ai.provider.name"), "openai");
    assert_string_equal(attr_s(at, "gen_ai.request.model"), "meta-llama/Llama-3.1-8B-Instruct");
    assert_string_equal(attr_s(at, "gen_ai.response.id"), "chatcmpl-123");
    assert_string_equal(attr_s(at, "gen_ai.response.model"), "llama-3.1-8b");
    assert_string_equal(attr_s(at, "server.address"), "127.0.0.1");
    assert_string_equal(attr_s(at, "error.type"), "503");
    assert_string_equal(attr_s(at, "tokenstorm.outcome"), "http_5xx");
    assert_string_equal(attr_s(at, "tokenstorm.request_id"), "ts-00000000000000ab-7");
    json_t *v = find_attr(at, "gen_ai.request.max_tokens");
    assert_string_equal(json_string_value(json_object_get(v, "intValue")), "128");
    v = find_attr(at, "gen_ai.usage.output_tokens");
    assert_string_equal(json_string_value(json_object_get(v, "intValue")), "9223372036854775807");
    v = find_attr(at, "server.port");
    assert_string_equal(json_string_value(json_object_get(v, "intValue")), "8000");
    v = find_attr(at, "tokenstorm.tenant");
    assert_string_equal(json_string_value(json_object_get(v, "intValue")), "0");
    v = find_attr(at, "gen_ai.request.temperature");
    assert_true(json_is_real(json_object_get(v, "doubleValue")));
    assert_true(fabs(json_real_value(json_object_get(v, "doubleValue")) - 0.7) < 1e-12);
    v = find_attr(at, "tokenstorm.ttft_ms");
    assert_true(fabs(json_number_value(json_object_get(v, "doubleValue")) - 205.5) < 1e-12);
    v = find_attr(at, "gen_ai.response.time_to_first_chunk");
    assert_true(fabs(json_number_value(json_object_get(v, "doubleValue")) - 0.2) < 1e-12);
    v = find_attr(at, "tokenstorm.itl.mean_ms");
    assert_true(fabs(json_number_value(json_object_get(v, "doubleValue")) - 12.25) < 1e-12);
    v = find_attr(at, "gen_ai.request.stream");
    assert_true(json_is_true(json_object_get(v, "boolValue")));
    v = find_attr(at, "gen_ai.response.finish_reasons");
    json_t *vals = json_object_get(json_object_get(v, "arrayValue"), "values");
    assert_int_equal(json_array_size(vals), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(vals, 0), "stringValue")),
                        "length");
    assert_null(find_attr(at, "tokenstorm.warmup")); /* only written when true */
    json_t *ev = json_object_get(sp, "events");
    assert_int_equal(json_array_size(ev), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(ev, 0), "name")),
                        "gen_ai.first_chunk");
    assert_string_equal(json_string_value(json_object_get(json_array_get(ev, 0), "timeUnixNano")),
                        "1700000000323456789");

    json_t *child = json_array_get(arr, 1);
    assert_null(span_mapping_error(child));
    assert_string_equal(json_string_value(json_object_get(child, "parentSpanId")),
                        "00f067aa0ba902b7");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(child, "status"), "code")),
                     0);
    assert_null(json_object_get(json_object_get(child, "status"), "message"));
    assert_null(find_attr(json_object_get(child, "attributes"), "error.type"));
    json_decref(doc);
    buf_release(&b);
}

static void test_absent_fields(void **state)
{
    struct otlp_span s;
    otlp_span_init(&s);
    s.trace_id[15] = 1;
    s.span_id[7] = 2;
    s.kind = OTLP_KIND_INTERNAL;
    s.operation = "invoke_workflow";
    struct buf b;
    buf_init(&b, 1 << 16);
    assert_int_equal(otlp_encode_span(&b, &s), 0);
    json_t *sp = json_loadb(b.data, b.len, 0, NULL);
    assert_non_null(sp);
    assert_null(span_mapping_error(sp));
    assert_string_equal(json_string_value(json_object_get(sp, "traceId")),
                        "00000000000000000000000000000001");
    assert_string_equal(json_string_value(json_object_get(sp, "name")), "invoke_workflow");
    assert_int_equal(json_integer_value(json_object_get(sp, "kind")), 1);
    /* only the operation: every -1, NAN and "" was left out */
    assert_int_equal(json_array_size(json_object_get(sp, "attributes")), 1);
    assert_int_equal(json_array_size(json_object_get(sp, "events")), 0);
    json_decref(sp);
    buf_release(&b);
}

static void test_escaping(void **state)
{
    struct otlp_span s;
    otlp_span_init(&s);
    s.trace_id[0] = s.span_id[0] = 1;
    s.operation = "chat";
    /* quotes, backslash, control bytes, an invalid byte, a cut 3-byte sequence */
    snprintf(s.response_id, sizeof(s.response_id), "a\"b\\c\n\x01\xff-\xe2\x82");
    snprintf(s.response_model, sizeof(s.response_model), "caf\xc3\xa9 \xf0\x9f\x98\x80");
    struct buf b;
    buf_init(&b, 1 << 16);
    assert_int_equal(otlp_encode_span(&b, &s), 0);
    json_t *sp = json_loadb(b.data, b.len, 0, NULL); /* jansson rejects invalid UTF-8 */
    assert_non_null(sp);
    json_t *at = json_object_get(sp, "attributes");
    assert_string_equal(attr_s(at, "gen_ai.response.id"),
                        "a\"b\\c\n\x01\xef\xbf\xbd-\xef\xbf\xbd\xef\xbf\xbd");
    assert_string_equal(attr_s(at, "gen_ai.response.model"), "caf\xc3\xa9 \xf0\x9f\x98\x80");
    json_decref(sp);
    buf_release(&b);

    /* copies are cut at a character boundary */
    char small[6];
    otlp_copy_str(small, sizeof(small), "abcd\xc3\xa9");
    assert_string_equal(small, "abcd");
    otlp_copy_str(small, sizeof(small), "ab\xe2\x82\xac");
    assert_string_equal(small, "ab\xe2\x82\xac");
    otlp_copy_str(small, sizeof(small), "abc\xe2\x82\xac");
    assert_string_equal(small, "abc");
}

static void test_parse_response(void **state)
{
    uint64_t r = 99;
    assert_int_equal(otlp_parse_response("", 0, &r), 0);
    assert_int_equal(r, 0);
    assert_int_equal(otlp_parse_response("{}", 2, &r), 0);
    assert_int_equal(r, 0);
    const char *s = "{\"partialSuccess\":{\"rejectedSpans\":\"3\",\"errorMessage\":\"x\"}}";
    assert_int_equal(otlp_parse_response(s, strlen(s), &r), 0);
    assert_int_equal(r, 3);
    s = "{\"partialSuccess\":{\"rejectedSpans\":2}}";
    assert_int_equal(otlp_parse_response(s, strlen(s), &r), 0);
    assert_int_equal(r, 2);
    s = "{\"partialSuccess\":{\"errorMessage\":\"warning only\"}}";
    assert_int_equal(otlp_parse_response(s, strlen(s), &r), 0);
    assert_int_equal(r, 0);
    s = "{\"partialSuccess\":{\"rejectedSpans\":\"-1\"}}";
    assert_int_equal(otlp_parse_response(s, strlen(s), &r), TS_PARSE);
    s = "{\"partialSuccess\":{\"rejectedSpans\":true}}";
    assert_int_equal(otlp_parse_response(s, strlen(s), &r), TS_PARSE);
    s = "\x0a\x02\x08\x01"; /* a protobuf answer: not read */
    assert_int_equal(otlp_parse_response(s, 4, &r), 0);
    assert_int_equal(r, 0);
}

/* ---- configuration ---- */

struct kv_seen {
    char text[256];
};

static int collect_kv(const char *k, const char *v, void *arg)
{
    struct kv_seen *s = arg;
    size_t n = strlen(s->text);
    snprintf(s->text + n, sizeof(s->text) - n, "[%s|%s]", k, v);
    return 0;
}

static void test_kv_list(void **state)
{
    struct kv_seen s = {""};
    assert_int_equal(otlp_parse_kv_list(" a=1 , b = x%20y%2Cz ,, c=,d=e=f", collect_kv, &s), 0);
    assert_string_equal(s.text, "[a|1][b|x y,z][c|][d|e=f]");
    assert_int_equal(otlp_parse_kv_list("novalue", collect_kv, &s), TS_PARSE);
    assert_int_equal(otlp_parse_kv_list("=v", collect_kv, &s), TS_PARSE);
    assert_int_equal(otlp_parse_kv_list("a=%zz", collect_kv, &s), TS_PARSE);
}

static const char *const otel_vars[] = {
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_COMPRESSION",
    "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_BSP_SCHEDULE_DELAY",
    "OTEL_BSP_MAX_QUEUE_SIZE",
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
};

static void clear_env(void)
{
    for (size_t i = 0; i < sizeof(otel_vars) / sizeof(otel_vars[0]); i++)
        unsetenv(otel_vars[i]);
}

/* The endpoint otlp_config_from_env() picks, or "" when off. */
static const char *endpoint_of(const char *cli, char *out, size_t n)
{
    struct otlp_config cfg;
    otlp_config_init(&cfg);
    char err[256];
    assert_int_equal(otlp_config_from_env(&cfg, cli, err, sizeof(err)), 0);
    snprintf(out, n, "%s", cfg.endpoint ? cfg.endpoint : "");
    otlp_config_release(&cfg);
    return out;
}

static void test_config_endpoint(void **state)
{
    char ep[256];
    clear_env();
    assert_string_equal(endpoint_of(NULL, ep, sizeof(ep)), "");
    setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/", 1);
    assert_string_equal(endpoint_of(NULL, ep, sizeof(ep)), "http://collector:4318/v1/traces");
    setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector/otlp", 1);
    assert_string_equal(endpoint_of(NULL, ep, sizeof(ep)), "https://collector/otlp/v1/traces");
    setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://other:9999/custom/path", 1);
    assert_string_equal(endpoint_of(NULL, ep, sizeof(ep)), "http://other:9999/custom/path");
    /* the option wins, and gets /v1/traces only when missing */
    assert_string_equal(endpoint_of("http://127.0.0.1:4318", ep, sizeof(ep)),
                        "http://127.0.0.1:4318/v1/traces");
    assert_string_equal(endpoint_of("http://127.0.0.1:4318/v1/traces", ep, sizeof(ep)),
                        "http://127.0.0.1:4318/v1/traces");
    /* disabled SDK or exporter "none": the variables are ignored, the option is not */
    setenv("OTEL_SDK_DISABLED", "true", 1);
    assert_string_equal(endpoint_of(NULL, ep, sizeof(ep)), "");
    assert_string_equal(endpoint_of("http://h:1/", ep, sizeof(ep)), "http://h:1/v1/traces");
    unsetenv("OTEL_SDK_DISABLED");
    setenv("OTEL_TRACES_EXPORTER", "none", 1);
    assert_string_equal(endpoint_of(NULL, ep, sizeof(ep)), "");
    clear_env();

    struct otlp_config cfg;
    otlp_config_init(&cfg);
    char err[256] = "";
    assert_int_equal(otlp_config_from_env(&cfg, "ftp://x", err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "--otlp-endpoint"));
    otlp_config_release(&cfg);
}

static void test_config_env(void **state)
{
    clear_env();
    setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", 1);
    setenv("OTEL_EXPORTER_OTLP_HEADERS", "api-key=s3cr%20et,x-team=a", 1);
    setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-team=b", 1);
    setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip", 1);
    setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "2500", 1);
    setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-res,deployment.environment.name=ci", 1);
    setenv("OTEL_BSP_SCHEDULE_DELAY", "250", 1);
    setenv("OTEL_BSP_MAX_QUEUE_SIZE", "100", 1);
    setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1000", 1);
    struct otlp_config cfg;
    otlp_config_init(&cfg);
    char err[256];
    assert_int_equal(otlp_config_from_env(&cfg, NULL, err, sizeof(err)), 0);
    assert_int_equal(cfg.n_headers, 2);
    bool key = false, team = false;
    for (size_t i = 0; i < cfg.n_headers; i++) {
        key |= !strcmp(cfg.headers[i], "api-key: s3cr et");
        team |= !strcmp(cfg.headers[i], "x-team: b");
    }
    assert_true(key && team);
    assert_true(cfg.gzip);
    assert_int_equal(cfg.timeout_ms, 2500);
    assert_int_equal(cfg.schedule_delay_ms, 250);
    assert_int_equal(cfg.max_queue, 100);
    assert_int_equal(cfg.max_batch, 100); /* never above the queue */
    assert_string_equal(cfg.service_name, "from-res");
    assert_int_equal(cfg.n_resource, 2);
    otlp_config_release(&cfg);

    setenv("OTEL_SERVICE_NAME", "svc", 1);
    otlp_config_init(&cfg);
    assert_int_equal(otlp_config_from_env(&cfg, NULL, err, sizeof(err)), 0);
    assert_string_equal(cfg.service_name, "svc");
    otlp_config_release(&cfg);

    /* a malformed header list fails, and the message holds no header value */
    setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20tok3n,garbage", 1);
    otlp_config_init(&cfg);
    err[0] = '\0';
    assert_int_equal(otlp_config_from_env(&cfg, NULL, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "OTEL_EXPORTER_OTLP_HEADERS"));
    assert_null(strstr(err, "tok3n"));
    assert_null(strstr(err, "Bearer"));
    otlp_config_release(&cfg);
    setenv("OTEL_EXPORTER_OTLP_HEADERS", "bad name=x", 1);
    otlp_config_init(&cfg);
    assert_int_equal(otlp_config_from_env(&cfg, NULL, err, sizeof(err)), -EINVAL);
    otlp_config_release(&cfg);
    unsetenv("OTEL_EXPORTER_OTLP_HEADERS");
    setenv("OTEL_BSP_MAX_QUEUE_SIZE", "0", 1);
    otlp_config_init(&cfg);
    assert_int_equal(otlp_config_from_env(&cfg, NULL, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "OTEL_BSP_MAX_QUEUE_SIZE"));
    otlp_config_release(&cfg);
    clear_env();
}

/* ---- the span of a request ---- */

static void test_request_span(void **state)
{
    struct reqtrace_config tc = {
        .model = "m1",
        .scenario = "smoke test",
        .temperature = 0.5,
        .has_temperature = true,
    };
    struct reqtrace_run run;
    char err[256];
    assert_int_equal(reqtrace_run_init(&run, &tc, "http://[::1]:8000/v1/chat/completions",
                                       WORKLOAD_CHAT, err, sizeof(err)),
                     0);
    assert_null(run.exporter);
    assert_string_equal(run.server_address, "::1");
    assert_int_equal(run.server_port, 8000);

    struct reqtrace rt;
    memset(&rt, 0, sizeof(rt));
    struct reqtrace_headers h;
    const char *hdrs[2];
    assert_int_equal(reqtrace_begin(&rt, &run, 0xab, 7, 2, &h, hdrs), 2);
    assert_true(rt.started);
    struct trace_context ctx;
    assert_int_equal(strncmp(hdrs[0], "traceparent: ", 13), 0);
    assert_int_equal(traceparent_parse(hdrs[0] + 13, strlen(hdrs[0] + 13), &ctx), 0);
    assert_memory_equal(ctx.trace_id, rt.trace_id, 16);
    assert_memory_equal(ctx.span_id, rt.span_id, 8);
    assert_int_equal(ctx.flags, TRACE_FLAG_SAMPLED);
    assert_string_equal(hdrs[1], "baggage: tokenstorm.request_id=ts-00000000000000ab-7,"
                                 "tokenstorm.tenant=2,tokenstorm.scenario=smoke%20test");
    /* the next request is another trace */
    struct reqtrace rt2;
    memset(&rt2, 0, sizeof(rt2));
    assert_int_equal(reqtrace_begin(&rt2, &run, 0xab, 8, 0, &h, hdrs), 2);
    assert_memory_not_equal(rt.trace_id, rt2.trace_id, 16);
    reqtrace_note(&rt, "chatcmpl-1", "m1-served");
    reqtrace_note(&rt, "chatcmpl-2", "other"); /* the first ones are kept */

    struct req_record r;
    memset(&r, 0, sizeof(r));
    r.id = 7;
    r.outcome = REQ_OK;
    r.http_status = 200;
    r.flags = REQF_STREAM;
    /* times a few seconds ago on this machine's monotonic clock (its origin is
     * the boot, so fixed small values would be hours in the past) */
    uint64_t t0 = ts_now_ns() - 5 * TS_NS_PER_S;
    r.intended_ns = t0;
    r.start_ns = t0 + 2 * TS_NS_PER_MS;
    r.first_chunk_ns = t0 + 252 * TS_NS_PER_MS;
    r.end_ns = t0 + 1002 * TS_NS_PER_MS;
    r.max_tokens = 64;
    r.usage_prompt_tokens = 100;
    r.usage_completion_tokens = 11;
    r.output_tokens = 11;
    r.choice_chunks = 11;
    r.itl_sum_ns = 750 * TS_NS_PER_MS; /* 10 gaps */
    r.itl_max_ns = 90 * TS_NS_PER_MS;
    snprintf(r.finish_reason, sizeof(r.finish_reason), "length");
    struct otlp_span s;
    reqtrace_span_of(&s, &rt, &run, 0xab, &r);
    assert_int_equal(s.kind, OTLP_KIND_CLIENT);
    assert_int_equal(s.status, OTLP_STATUS_UNSET);
    assert_int_equal((int64_t)s.end_unix_ns - (int64_t)s.start_unix_ns, 1000 * TS_NS_PER_MS);
    assert_int_equal((int64_t)s.first_chunk_unix_ns - (int64_t)s.start_unix_ns, 250 * TS_NS_PER_MS);
    uint64_t wall = ts_wall_ns();
    assert_true(s.start_unix_ns > wall - 3600 * TS_NS_PER_S && s.start_unix_ns < wall);
    assert_string_equal(s.operation, "chat");
    assert_string_equal(s.provider, "openai");
    assert_string_equal(s.request_model, "m1");
    assert_string_equal(s.response_id, "chatcmpl-1");
    assert_string_equal(s.response_model, "m1-served");
    assert_string_equal(s.request_id, "ts-00000000000000ab-7");
    assert_string_equal(s.outcome, "ok");
    assert_true(s.stream);
    assert_int_equal(s.max_tokens, 64);
    assert_int_equal(s.input_tokens, 100);
    assert_int_equal(s.output_tokens, 11);
    assert_true(fabs(s.temperature - 0.5) < 1e-12);
    assert_true(fabs(s.ttfc_s - 0.25) < 1e-9);
    assert_true(fabs(s.ttft_ms - 252) < 1e-9); /* from the intended time */
    assert_true(fabs(s.lag_ms - 2) < 1e-9);
    assert_true(fabs(s.itl_mean_ms - 75) < 1e-9);
    assert_true(fabs(s.itl_max_ms - 90) < 1e-9);
    assert_string_equal(s.error_type, "");
    assert_true(trace_id_valid(s.span_id, 8));
    assert_false(trace_id_valid(s.parent_span_id, 8));

    /* failures: an HTTP status, a transport outcome; a cut is not an error */
    r.outcome = REQ_HTTP_5XX;
    r.http_status = 503;
    snprintf(r.error, sizeof(r.error), "server overloaded");
    r.flags = 0;
    reqtrace_span_of(&s, &rt, &run, 0xab, &r);
    assert_int_equal(s.status, OTLP_STATUS_ERROR);
    assert_string_equal(s.error_type, "503");
    assert_string_equal(s.status_message, "server overloaded");
    assert_false(s.stream);
    assert_int_equal(s.first_chunk_unix_ns, 0); /* no first-chunk event without a stream */
    r.outcome = REQ_TIMEOUT_TTFB;
    r.http_status = 0;
    reqtrace_span_of(&s, &rt, &run, 0xab, &r);
    assert_string_equal(s.error_type, "timeout_ttfb");
    assert_int_equal(s.http_status, -1);
    r.outcome = REQ_CUT;
    reqtrace_span_of(&s, &rt, &run, 0xab, &r);
    assert_int_equal(s.status, OTLP_STATUS_UNSET);
    assert_string_equal(s.outcome, "cut");

    /* joining a given trace: same trace id, the given span as parent */
    tc.has_parent = true;
    assert_int_equal(trace_id_from_hex("4bf92f3577b34da6a3ce929d0e0e4736", tc.parent.trace_id, 16),
                     0);
    assert_int_equal(trace_id_from_hex("00f067aa0ba902b7", tc.parent.span_id, 8), 0);
    assert_int_equal(reqtrace_begin(&rt, &run, 1, 1, 0, &h, hdrs), 2);
    assert_memory_equal(rt.trace_id, tc.parent.trace_id, 16);
    assert_memory_not_equal(rt.span_id, tc.parent.span_id, 8);
    reqtrace_span_of(&s, &rt, &run, 1, &r);
    assert_memory_equal(s.parent_span_id, tc.parent.span_id, 8);
    reqtrace_run_finish(&run, NULL, NULL);
}

/* ---- a loopback receiver on its own thread ---- */

#define RX_MAX 64

struct rx_pending {
    struct rx *rx;
    struct http_request *req;
    uv_timer_t timer;
    int status;
    bool done;
    struct rx_pending *next;
};

struct rx {
    /* script: request i gets statuses[min(i, n - 1)] */
    int statuses[8];
    size_t nstatus;
    const char *retry_after; /* with 429/503 */
    const char *ok_body;     /* 2xx body ("{}" by default) */
    uint32_t delay_ms;       /* answer after this long */
    bool hold;               /* never answer (until the server stops) */

    pthread_t thread;
    uv_loop_t loop;
    uv_async_t stop;
    struct http_server http;
    int port;
    int loop_close_rc;
    struct rx_pending *pending;

    /* what arrived (read after the thread ended) */
    size_t nreq;
    size_t spans[RX_MAX];
    bool gzip[RX_MAX];
    char api_key[64];
    char content_type[64];
    char path[64];
    const char *mapping_error;
    size_t bad_json;
    uint32_t body_crc[RX_MAX];
};

/* Inflates a gzip body; *out is heap (ts_free) and NUL-terminated. */
static int gunzip(const char *in, size_t n, char **out, size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (inflateInit2(&z, 15 + 32) != Z_OK)
        return -1;
    size_t cap = 1 << 20;
    char *o = ts_malloc(cap);
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    z.next_out = (Bytef *)o;
    z.avail_out = (uInt)cap - 1;
    int rc = inflate(&z, Z_FINISH);
    *out_len = cap - 1 - z.avail_out;
    inflateEnd(&z);
    if (rc != Z_STREAM_END) {
        ts_free(o);
        return -1;
    }
    o[*out_len] = '\0';
    *out = o;
    return 0;
}

static void rx_record(struct rx *rx, struct http_request *req)
{
    size_t i = rx->nreq++;
    if (i >= RX_MAX)
        return;
    snprintf(rx->path, sizeof(rx->path), "%s", req->path);
    const char *ct = http_request_header(req, "content-type");
    snprintf(rx->content_type, sizeof(rx->content_type), "%s", ct ? ct : "");
    const char *key = http_request_header(req, "api-key");
    snprintf(rx->api_key, sizeof(rx->api_key), "%s", key ? key : "");
    const char *ce = http_request_header(req, "content-encoding");
    rx->gzip[i] = ce && !strcasecmp(ce, "gzip");
    rx->body_crc[i] = (uint32_t)crc32(0, (const Bytef *)req->body, (uInt)req->body_len);
    char *plain = NULL;
    size_t plain_len = req->body_len;
    if (rx->gzip[i] && gunzip(req->body, req->body_len, &plain, &plain_len)) {
        rx->bad_json++;
        return;
    }
    json_t *doc = json_loadb(plain ? plain : req->body, plain_len, 0, NULL);
    ts_free(plain);
    if (!doc) {
        rx->bad_json++;
        return;
    }
    size_t a, b, c;
    json_t *rs, *ss, *sp;
    json_array_foreach(json_object_get(doc, "resourceSpans"), a, rs)
    {
        json_array_foreach(json_object_get(rs, "scopeSpans"), b, ss)
        {
            json_array_foreach(json_object_get(ss, "spans"), c, sp)
            {
                const char *why = span_mapping_error(sp);
                if (why && !rx->mapping_error)
                    rx->mapping_error = why;
                rx->spans[i]++;
            }
        }
    }
    json_decref(doc);
}

static void rx_answer(struct rx_pending *p)
{
    if (p->done)
        return;
    p->done = true;
    struct rx *rx = p->rx;
    char extra[128] = "";
    if ((p->status == 429 || p->status == 503) && rx->retry_after)
        snprintf(extra, sizeof(extra), "Retry-After: %s\r\n", rx->retry_after);
    const char *body = p->status >= 200 && p->status < 300
                           ? (rx->ok_body ? rx->ok_body : "{}")
                           : "{\"code\":14,\"message\":\"try later\"}";
    (void)http_respond(p->req, p->status, "application/json", extra[0] ? extra : NULL, body,
                       strlen(body));
}

static void rx_on_timer(uv_timer_t *t)
{
    rx_answer(t->data);
}

static void rx_on_abort(struct http_request *req)
{
    rx_answer(req->user);
}

static void rx_on_request(struct http_request *req, void *ctx)
{
    struct rx *rx = ctx;
    size_t i = rx->nreq;
    rx_record(rx, req);
    struct rx_pending *p = ts_calloc(1, sizeof(*p));
    assert_non_null(p);
    p->rx = rx;
    p->req = req;
    p->status = rx->statuses[i < rx->nstatus ? i : rx->nstatus - 1];
    p->next = rx->pending;
    rx->pending = p;
    req->user = p;
    http_request_on_abort(req, rx_on_abort);
    uv_timer_init(&rx->loop, &p->timer);
    p->timer.data = p;
    if (rx->hold)
        return;
    if (rx->delay_ms)
        uv_timer_start(&p->timer, rx_on_timer, rx->delay_ms, 0);
    else
        rx_answer(p);
}

static void rx_free_pending(uv_handle_t *h)
{
    ts_free(h->data);
}

static void rx_on_stop(uv_async_t *a)
{
    struct rx *rx = a->data;
    for (struct rx_pending *p = rx->pending, *next; p; p = next) {
        next = p->next;
        rx_answer(p);
        uv_close((uv_handle_t *)&p->timer, rx_free_pending);
    }
    rx->pending = NULL;
    assert_int_equal(http_server_shutdown(&rx->http, 0, NULL), 0);
    uv_close((uv_handle_t *)&rx->stop, NULL);
}

static void *rx_main(void *arg)
{
    struct rx *rx = arg;
    uv_run(&rx->loop, UV_RUN_DEFAULT);
    rx->loop_close_rc = uv_loop_close(&rx->loop);
    return NULL;
}

static void rx_start(struct rx *rx)
{
    if (!rx->nstatus) {
        rx->statuses[0] = 200;
        rx->nstatus = 1;
    }
    assert_int_equal(uv_loop_init(&rx->loop), 0);
    struct http_server_config hc = {.host = "127.0.0.1", .port = 0};
    assert_int_equal(http_server_init(&rx->http, &rx->loop, &hc, rx_on_request, rx), 0);
    assert_int_equal(http_server_listen(&rx->http), 0);
    rx->port = http_server_port(&rx->http);
    assert_int_equal(uv_async_init(&rx->loop, &rx->stop, rx_on_stop), 0);
    rx->stop.data = rx;
    assert_int_equal(pthread_create(&rx->thread, NULL, rx_main, rx), 0);
}

static void rx_stop(struct rx *rx)
{
    uv_async_send(&rx->stop);
    pthread_join(rx->thread, NULL);
    assert_int_equal(rx->loop_close_rc, 0);
}

static size_t rx_total_spans(const struct rx *rx)
{
    size_t n = 0;
    for (size_t i = 0; i < rx->nreq && i < RX_MAX; i++)
        n += rx->spans[i];
    return n;
}

/* ---- the exporter ---- */

static void cfg_for(struct otlp_config *cfg, const struct rx *rx, char *url, size_t n)
{
    otlp_config_init(cfg);
    snprintf(url, n, "http://127.0.0.1:%d/v1/traces", rx->port);
    cfg->endpoint = url;
    cfg->service_name = "test";
    cfg->schedule_delay_ms = 60000; /* only full batches and the close send */
    cfg->backoff_initial_ms = 20;
    cfg->backoff_max_ms = 100;
    cfg->flush_timeout_ms = 3000;
}

static void push_n(struct otlp_exporter *e, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct otlp_span s;
        fixture(&s);
        s.span_id[0] = (uint8_t)(i + 1);
        assert_int_equal(otlp_exporter_push(e, &s), 0);
    }
}

/* Runs one exporter against rx: pushes n spans, closes, returns the stats. */
static struct otlp_stats export_n(struct rx *rx, struct otlp_config *cfg, size_t n)
{
    struct otlp_exporter *e;
    char err[256];
    assert_int_equal(otlp_exporter_new(cfg, &e, err, sizeof(err)), 0);
    push_n(e, n);
    struct otlp_stats st;
    otlp_exporter_close(e, &st);
    return st;
}

static void test_export_basic(void **state)
{
    struct rx rx = {0};
    rx_start(&rx);
    struct otlp_config cfg;
    char url[128];
    cfg_for(&cfg, &rx, url, sizeof(url));
    char *hdr = "api-key: abc123";
    cfg.headers = &hdr;
    cfg.n_headers = 1;
    struct otlp_stats st = export_n(&rx, &cfg, 5);
    rx_stop(&rx);
    assert_int_equal(st.exported, 5);
    assert_int_equal(st.dropped, 0);
    assert_int_equal(st.failed, 0);
    assert_int_equal(st.retries, 0);
    assert_int_equal(rx.nreq, 1);
    assert_int_equal(rx.spans[0], 5);
    assert_int_equal(rx.bad_json, 0);
    assert_null(rx.mapping_error);
    assert_string_equal(rx.path, "/v1/traces");
    assert_string_equal(rx.content_type, "application/json");
    assert_string_equal(rx.api_key, "abc123");
    assert_false(rx.gzip[0]);
}

static void test_export_batches_gzip(void **state)
{
    struct rx rx = {0};
    rx_start(&rx);
    struct otlp_config cfg;
    char url[128];
    cfg_for(&cfg, &rx, url, sizeof(url));
    cfg.max_batch = 4;
    cfg.gzip = true;
    struct otlp_stats st = export_n(&rx, &cfg, 10);
    rx_stop(&rx);
    assert_int_equal(st.exported, 10);
    assert_int_equal(st.failed + st.dropped, 0);
    assert_int_equal(rx_total_spans(&rx), 10);
    assert_int_equal(rx.bad_json, 0);
    assert_null(rx.mapping_error);
    assert_true(rx.nreq >= 3); /* batches of at most 4 */
    for (size_t i = 0; i < rx.nreq; i++) {
        assert_true(rx.gzip[i]);
        assert_true(rx.spans[i] >= 1 && rx.spans[i] <= 4);
    }
}

static void test_export_retry_503(void **state)
{
    struct rx rx = {.statuses = {503, 503, 200}, .nstatus = 3, .retry_after = "0"};
    rx_start(&rx);
    struct otlp_config cfg;
    char url[128];
    cfg_for(&cfg, &rx, url, sizeof(url));
    cfg.backoff_initial_ms = 5000; /* Retry-After: 0 must win over this */
    uint64_t t0 = ts_now_ns();
    struct otlp_stats st = export_n(&rx, &cfg, 5);
    uint64_t took = ts_now_ns() - t0;
    rx_stop(&rx);
    assert_int_equal(st.exported, 5);
    assert_int_equal(st.failed, 0);
    assert_int_equal(st.retries, 2);
    assert_int_equal(rx.nreq, 3);
    assert_int_equal(rx.spans[0], 5);
    assert_int_equal(rx.spans[2], 5);
    assert_int_equal(rx.body_crc[0], rx.body_crc[2]); /* the same batch again */
    assert_true(took < 2 * TS_NS_PER_S);
}

static void test_export_retry_429_backoff(void **state)
{
    struct rx rx = {.statuses = {429, 502, 504, 200}, .nstatus = 4};
    rx_start(&rx);
    struct otlp_config cfg;
    char url[128];
    cfg_for(&cfg, &rx, url, sizeof(url));
    struct otlp_stats st = export_n(&rx, &cfg, 3);
    rx_stop(&rx);
    assert_int_equal(st.exported, 3);
    assert_int_equal(st.retries, 3);
    assert_int_equal(rx.nreq, 4);
}

static void test_export_retries_run_out(void **state)
{
    struct rx rx = {.statuses = {503}, .nstatus = 1};
    rx_start(&rx);
    struct otlp_config cfg;
    char url[128];
    cfg_for(&cfg, &rx, url, sizeof(url));
    cfg.max_attempts = 3;
    struct otlp_stats st = export_n(&rx, &cfg, 4);
    rx_stop(&rx);
    assert_int_equal(st.exported, 0);
    assert_int_equal(st.failed, 4);
    assert_int_equal(st.retries, 2);
    assert_int_equal(rx.nreq, 3);
}

static void test_export_400_not_retried(void **state)
{
    struct rx rx = {.statuses = {400, 200}, .nstatus = 2};
    rx_start(&rx);
    struct otlp_config cfg;
    char url[128];
    cfg_for(&cfg, &rx, url, sizeof(url));
    struct otlp_stats st = export_n(&rx, &cfg, 6);
    rx_stop(&rx);
    assert_int_equal(st.exported, 0);
    assert_int_equal(st.failed, 6);
    assert_int_equal(st.retries, 0);
    assert_int_equal(rx.nreq, 1);
}

static void test_export_partial_success(void **state)
{
    struct rx rx = {.ok_body = "{\"partialSuccess\":{\"rejectedSpans\":\"2\","
                               "\"errorMessage\":\"2 spans too old\"}}"};
    rx_start(&rx);
    struct otlp_config cfg;
    char url[128];
    cfg_for(&cfg, &rx, url, sizeof(url));
    struct otlp_stats st = export_n(&rx, &cfg, 5);
    rx_stop(&rx);
    assert_int_equal(st.exported, 3);
    assert_int_equal(st.failed, 2);
    assert_int_equal(st.retries, 0);
    assert_int_equal(rx.nreq, 1);
}

static void test_export_queue_full(void **state)
{
    struct rx rx = {.delay_ms = 100};
    rx_start(&rx);
    struct otlp_config cfg;
    char url[128];
    cfg_for(&cfg, &rx, url, sizeof(url));
    cfg.max_queue = 2;
    cfg.max_batch = 1;
    struct otlp_exporter *e;
    char err[256];
    assert_int_equal(otlp_exporter_new(&cfg, &e, err, sizeof(err)), 0);
    size_t accepted = 0, refused = 0;
    for (int i = 0; i < 40; i++) {
        struct otlp_span s;
        fixture(&s);
        int rc = otlp_exporter_push(e, &s);
        assert_true(rc == 0 || rc == TS_AGAIN);
        accepted += rc == 0;
        refused += rc == TS_AGAIN;
    }
    struct otlp_stats st;
    otlp_exporter_close(e, &st);
    rx_stop(&rx);
    /* at most 2 queued + OTLP_MAX_INFLIGHT batches of 1 in flight */
    assert_true(accepted >= 2 && accepted <= 2 + OTLP_MAX_INFLIGHT);
    assert_int_equal(st.dropped, refused);
    assert_int_equal(st.exported, accepted);
    assert_int_equal(st.exported + st.dropped + st.failed, 40);
    assert_int_equal(rx_total_spans(&rx), accepted);
}

static void test_export_flush_timeout(void **state)
{
    struct rx rx = {.hold = true};
    rx_start(&rx);
    struct otlp_config cfg;
    char url[128];
    cfg_for(&cfg, &rx, url, sizeof(url));
    cfg.flush_timeout_ms = 300;
    uint64_t t0 = ts_now_ns();
    struct otlp_stats st = export_n(&rx, &cfg, 7);
    uint64_t took = ts_now_ns() - t0;
    rx_stop(&rx);
    assert_int_equal(st.exported, 0);
    assert_int_equal(st.failed, 7);
    assert_true(took >= 250 * TS_NS_PER_MS && took < 2 * TS_NS_PER_S);
}

static void test_export_unreachable(void **state)
{
    /* a port that was just free: connection refused */
    struct rx rx = {0};
    rx_start(&rx);
    int port = rx.port;
    rx_stop(&rx);
    struct otlp_config cfg;
    char url[128];
    otlp_config_init(&cfg);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
    cfg.endpoint = url;
    cfg.backoff_initial_ms = 10;
    cfg.backoff_max_ms = 20;
    cfg.max_attempts = 3;
    cfg.schedule_delay_ms = 60000;
    struct otlp_exporter *e;
    char err[256];
    assert_int_equal(otlp_exporter_new(&cfg, &e, err, sizeof(err)), 0);
    push_n(e, 2);
    struct otlp_stats st;
    otlp_exporter_close(e, &st);
    assert_int_equal(st.exported, 0);
    assert_int_equal(st.failed, 2);
    assert_int_equal(st.retries, 2);
}

static void test_export_nothing(void **state)
{
    struct otlp_config cfg;
    otlp_config_init(&cfg);
    cfg.endpoint = "http://127.0.0.1:9/v1/traces";
    struct otlp_exporter *e;
    char err[256];
    assert_int_equal(otlp_exporter_new(&cfg, &e, err, sizeof(err)), 0);
    struct otlp_stats st;
    uint64_t t0 = ts_now_ns();
    otlp_exporter_close(e, &st);
    assert_true(ts_now_ns() - t0 < TS_NS_PER_S);
    assert_int_equal(st.exported + st.failed + st.dropped, 0);
    otlp_exporter_close(NULL, NULL);
    /* no endpoint: refused */
    cfg.endpoint = NULL;
    assert_int_equal(otlp_exporter_new(&cfg, &e, err, sizeof(err)), -EINVAL);
    assert_null(e);
}

static int setup(void **state)
{
    return http_client_global_init();
}

static int teardown(void **state)
{
    http_client_global_cleanup();
    return 0;
}

int main(void)
{
    /* as the program does (src/main.c): a peer that closed makes write(2) fail
     * with EPIPE instead of killing the process */
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mapping),
        cmocka_unit_test(test_absent_fields),
        cmocka_unit_test(test_escaping),
        cmocka_unit_test(test_parse_response),
        cmocka_unit_test(test_kv_list),
        cmocka_unit_test(test_config_endpoint),
        cmocka_unit_test(test_config_env),
        cmocka_unit_test(test_request_span),
        cmocka_unit_test(test_export_basic),
        cmocka_unit_test(test_export_batches_gzip),
        cmocka_unit_test(test_export_retry_503),
        cmocka_unit_test(test_export_retry_429_backoff),
        cmocka_unit_test(test_export_retries_run_out),
        cmocka_unit_test(test_export_400_not_retried),
        cmocka_unit_test(test_export_partial_success),
        cmocka_unit_test(test_export_queue_full),
        cmocka_unit_test(test_export_flush_timeout),
        cmocka_unit_test(test_export_unreachable),
        cmocka_unit_test(test_export_nothing),
    };
    return cmocka_run_group_tests_name("otlp", tests, setup, teardown);
}
