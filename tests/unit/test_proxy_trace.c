/*
 * test_proxy_trace.c - the chaos proxy's spans: the upstream's host and port,
 * when a request is traced, the traceparent sent upstream, the fault events
 * and their OTLP JSON encoding, what is pushed (faults only / --otlp-all).
 * Includes proxy_trace.c to reach upstream_host().
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>

#include "../../src/chaos/proxy_trace.c"
#include "base/alloc.h"
#include "base/buf.h"
#include "net/http_client.h"

static void test_upstream_host(void **state)
{
    (void)state;
    static const struct {
        const char *url, *host;
        int port;
    } cases[] = {
        {"http://127.0.0.1:8000/v1", "127.0.0.1", 8000},
        {"https://user:pw@api.example.com/x?y", "api.example.com", 443},
        {"http://[::1]:9000", "::1", 9000},
        {"http://[::1]", "::1", 80},
        {"http://h", "h", 80},
        {"http://h:99999/", "h", 80},
        {"ftp:/x", "", -1},
        {"http://", "", -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char host[64];
        int port;
        upstream_host(cases[i].url, host, sizeof(host), &port);
        assert_string_equal(host, cases[i].host);
        assert_int_equal(port, cases[i].port);
    }
}

static void fault_make(struct fault *f, const char *name, enum fault_type type)
{
    memset(f, 0, sizeof(*f));
    snprintf(f->name, sizeof(f->name), "%s", name);
    f->type = type;
}

static struct otlp_exporter *exporter_new(void)
{
    struct otlp_config cfg;
    otlp_config_init(&cfg);
    cfg.endpoint = ts_strdup("http://127.0.0.1:1/v1/traces"); /* refused: counted failed */
    assert_non_null(cfg.endpoint);
    cfg.max_attempts = 1;
    cfg.flush_timeout_ms = 2000;
    cfg.timeout_ms = 1000;
    struct otlp_exporter *e = NULL;
    char err[256];
    assert_int_equal(otlp_exporter_new(&cfg, &e, err, sizeof(err)), 0);
    otlp_config_release(&cfg);
    return e;
}

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static void test_span(void **state)
{
    (void)state;
    struct otlp_exporter *e = exporter_new();
    struct proxy_tracer tr;
    proxy_tracer_init(&tr, e, false, "http://sim.local:8000/prefix");
    assert_string_equal(tr.server_address, "sim.local");

    struct http_header hs[2] = {{.name = "Content-Type", .value = "application/json"},
                                {.name = "TraceParent", .value = TP}};
    struct http_request req = {.method = "POST", .path = "/v1/chat/completions"};
    req.headers = hs;
    req.header_count = 1;

    /* no traceparent: not traced; an invalid one neither */
    struct proxy_trace *t = ts_calloc(1, sizeof(*t));
    assert_non_null(t);
    proxy_trace_begin(t, &tr, &req, 1000);
    assert_false(t->on);
    hs[1].value = "00-00000000000000000000000000000000-00f067aa0ba902b7-01";
    req.header_count = 2;
    proxy_trace_begin(t, &tr, &req, 1000);
    assert_false(t->on);

    /* traced without a fault: nothing pushed by default */
    hs[1].value = TP;
    proxy_trace_begin(t, &tr, &req, 1000);
    assert_true(t->on);
    t->status = 200;
    assert_false(proxy_trace_finish(t, &tr, NULL, 0, 2000));
    assert_false(t->on);

    /* traced with faults */
    proxy_trace_begin(t, &tr, &req, 1000000);
    assert_true(t->on);
    assert_int_equal(strlen(t->traceparent), TRACEPARENT_LEN);
    assert_memory_equal(t->traceparent, "00-4bf92f3577b34da6a3ce929d0e0e4736-", 36);
    char sid[2 * SPAN_ID_LEN + 1];
    trace_id_hex(t->span.span_id, SPAN_ID_LEN, sid);
    assert_memory_equal(t->traceparent + 36, sid, 16);
    assert_string_equal(t->traceparent + 52, "-01");
    assert_string_not_equal(sid, "00f067aa0ba902b7");

    struct fault ab, tr1;
    fault_make(&ab, "boom", FAULT_HTTP_ABORT);
    ab.params.status = 503;
    fault_make(&tr1, "cut", FAULT_HTTP_TRUNCATE_RESPONSE);
    tr1.params.bytes = 100;
    tr1.params.has_bytes = true;
    proxy_trace_fault(t, &ab, 1500000);
    proxy_trace_fault(t, &ab, 1600000); /* the same fault again: one event */
    struct fault *hits[2] = {&ab, &tr1};
    t->status = 503;
    assert_true(proxy_trace_finish(t, &tr, hits, 2, 3000000));
    assert_int_equal(tr.spans, 1);

    const struct otlp_span *s = &t->span;
    assert_int_equal(s->faults_count, 2);
    assert_int_equal(s->n_events, 2);
    assert_int_equal(s->status, OTLP_STATUS_ERROR);

    struct buf b;
    buf_init(&b, 1 << 20);
    assert_int_equal(otlp_encode_span(&b, s), 0);
    json_error_t jerr;
    json_t *j = json_loadb(b.data, b.len, 0, &jerr);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "name")),
                        "tokenstorm.proxy POST /v1/chat/completions");
    assert_int_equal(json_integer_value(json_object_get(j, "kind")), 2);
    assert_string_equal(json_string_value(json_object_get(j, "traceId")),
                        "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_string_equal(json_string_value(json_object_get(j, "parentSpanId")), "00f067aa0ba902b7");
    assert_string_equal(json_string_value(json_object_get(j, "startTimeUnixNano")), "1000000");
    assert_string_equal(json_string_value(json_object_get(j, "endTimeUnixNano")), "3000000");
    json_t *evs = json_object_get(j, "events");
    assert_int_equal(json_array_size(evs), 2);
    /* first: the abort, at its injection time, with the status as an integer */
    json_t *e0 = json_array_get(evs, 0);
    assert_string_equal(json_string_value(json_object_get(e0, "name")), "tokenstorm.fault");
    assert_string_equal(json_string_value(json_object_get(e0, "timeUnixNano")), "1500000");
    char *a0 = json_dumps(json_object_get(e0, "attributes"), JSON_COMPACT);
    assert_string_equal(
        a0, "[{\"key\":\"tokenstorm.fault.name\",\"value\":{\"stringValue\":\"boom\"}},"
            "{\"key\":\"tokenstorm.fault.type\",\"value\":{\"stringValue\":\"http_abort\"}},"
            "{\"key\":\"tokenstorm.fault.status\",\"value\":{\"intValue\":\"503\"}}]");
    free(a0);
    /* second: the truncation, only in hits, timed at the span start */
    json_t *e1 = json_array_get(evs, 1);
    assert_string_equal(json_string_value(json_object_get(e1, "timeUnixNano")), "1000000");
    char *a1 = json_dumps(json_object_get(e1, "attributes"), JSON_COMPACT);
    assert_string_equal(a1,
                        "[{\"key\":\"tokenstorm.fault.name\",\"value\":{\"stringValue\":\"cut\"}},"
                        "{\"key\":\"tokenstorm.fault.type\",\"value\":{\"stringValue\":\"http_"
                        "truncate_response\"}},"
                        "{\"key\":\"tokenstorm.fault.bytes\",\"value\":{\"intValue\":\"100\"}}]");
    free(a1);
    char *attrs = json_dumps(json_object_get(j, "attributes"), JSON_COMPACT);
    assert_non_null(strstr(attrs, "{\"key\":\"http.request.method\",\"value\":{\"stringValue\":"
                                  "\"POST\"}}"));
    assert_non_null(strstr(attrs, "{\"key\":\"server.address\",\"value\":{\"stringValue\":"
                                  "\"sim.local\"}},{\"key\":\"server.port\",\"value\":{"
                                  "\"intValue\":\"8000\"}}"));
    assert_non_null(strstr(attrs, "{\"key\":\"http.response.status_code\",\"value\":{"
                                  "\"intValue\":\"503\"}}"));
    assert_non_null(strstr(attrs, "{\"key\":\"tokenstorm.faults.count\",\"value\":{"
                                  "\"intValue\":\"2\"}}"));
    free(attrs);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "status"), "code")), 2);
    assert_null(json_object_get(j, "droppedEventsCount"));
    json_decref(j);
    buf_release(&b);

    /* --otlp-all: a traced request without a fault is pushed too */
    tr.all = true;
    proxy_trace_begin(t, &tr, &req, 1000);
    t->status = 200;
    assert_true(proxy_trace_finish(t, &tr, NULL, 0, 2000));
    assert_int_equal(t->span.status, OTLP_STATUS_UNSET);
    assert_int_equal(tr.spans, 2);

    /* another thread's tracer: same settings, its own ids, and its spans borrow
     * the base's address string (which the proxy keeps until the exporter closes) */
    struct proxy_tracer t2;
    proxy_tracer_init_from(&t2, &tr);
    assert_ptr_equal(t2.exporter, e);
    assert_true(t2.all);
    assert_int_equal(t2.server_port, 8000);
    proxy_trace_begin(t, &t2, &req, 1000);
    assert_true(t->on);
    assert_ptr_equal(t->span.server_address, tr.server_address);
    assert_int_equal(t->span.server_port, 8000);
    t->status = 200;
    assert_true(proxy_trace_finish(t, &t2, NULL, 0, 2000));
    assert_int_equal(t2.spans, 1);

    ts_free(t);
    struct otlp_stats st;
    otlp_exporter_close(e, &st);
    assert_int_equal(st.exported + st.dropped + st.failed, 3);
}

/* More faults than OTLP_MAX_EVENTS: the rest is counted as dropped; so are
 * attributes past the span's slots or value bytes. */
static void test_events_dropped(void **state)
{
    (void)state;
    struct otlp_span s;
    otlp_span_init(&s);
    s.trace_id[0] = s.span_id[0] = 1;
    assert_int_equal(otlp_span_event_str(&s, "k", "v"), -EINVAL); /* no event yet */
    char big[100];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    for (int i = 0; i < OTLP_MAX_EVENTS; i++) {
        assert_int_equal(otlp_span_add_event(&s, "e", 5), 0);
        assert_int_equal(otlp_span_event_str(&s, "s", big), 0); /* cut to 63 bytes */
        assert_int_equal(otlp_span_event_int(&s, "i", -i), 0);
        assert_int_equal(otlp_span_event_str(&s, "k", ""), 0); /* nothing added */
    }
    /* 4 x 64 + "0" + 3 x "-N" = 267 of 320 bytes, 8 of 12 slots: the last
     * event gets "-4" (3 bytes: 270), then 63 + 1 more bytes do not fit */
    assert_int_equal(otlp_span_event_int(&s, "j", -4), 0);
    assert_int_equal(otlp_span_event_str(&s, "t", big), TS_TOOBIG);
    assert_int_equal(otlp_span_add_event(&s, "e", 5), TS_TOOBIG);
    assert_int_equal(otlp_span_add_event(&s, "e", 5), TS_TOOBIG);
    assert_int_equal(otlp_span_event_int(&s, "i", 1), -EINVAL); /* the last event was dropped */
    struct buf b;
    buf_init(&b, 1 << 16);
    assert_int_equal(otlp_encode_span(&b, &s), 0);
    json_t *j = json_loadb(b.data, b.len, 0, NULL);
    assert_non_null(j);
    json_t *evs = json_object_get(j, "events");
    assert_int_equal(json_array_size(evs), OTLP_MAX_EVENTS);
    assert_int_equal(json_integer_value(json_object_get(j, "droppedEventsCount")), 2);
    json_t *last = json_array_get(evs, OTLP_MAX_EVENTS - 1);
    assert_int_equal(json_integer_value(json_object_get(last, "droppedAttributesCount")), 1);
    json_t *la = json_object_get(last, "attributes");
    assert_int_equal(json_array_size(la), 3);
    assert_int_equal(strlen(json_string_value(json_object_get(
                         json_object_get(json_array_get(la, 0), "value"), "stringValue"))),
                     63);
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(la, 1), "value"), "intValue")),
                        "-3");
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(la, 2), "value"), "intValue")),
                        "-4");
    assert_null(json_object_get(json_array_get(evs, 0), "droppedAttributesCount"));
    json_decref(j);
    buf_release(&b);
}

static int setup(void **state)
{
    (void)state;
    return http_client_global_init();
}

static int teardown(void **state)
{
    (void)state;
    http_client_global_cleanup();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_upstream_host),
        cmocka_unit_test(test_span),
        cmocka_unit_test(test_events_dropped),
    };
    return cmocka_run_group_tests_name("proxy_trace", tests, setup, teardown);
}
