/* Reading OTLP JSON traces: export bodies and file-exporter lines. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "telemetry/otlp_read.c"

#define RES                                                                                        \
    "{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":\"gw\"}}" \
    "]},"
#define T32 "0af7651916cd43dd8448eb211c80319c"

static const char two_lines[] =
    "{\"resourceSpans\":[" RES "\"scopeSpans\":[{\"spans\":["
    "{\"traceId\":\"" T32 "\",\"spanId\":\"b7ad6b7169203331\",\"name\":\"POST /ask\","
    "\"kind\":2,\"startTimeUnixNano\":\"1000\",\"endTimeUnixNano\":\"5000\","
    "\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":\"not-this\"}},"
    "{\"key\":\"http.route\",\"value\":{\"stringValue\":\"/ask\"}}],\"status\":{}}]}]}]}\n"
    "\n"
    "{\"resourceSpans\":[" RES "\"scopeSpans\":[{\"spans\":["
    "{\"traceId\":\"" T32 "\",\"spanId\":\"00f067aa0ba902b7\",\"parentSpanId\":"
    "\"b7ad6b7169203331\",\"name\":\"chat m\",\"kind\":\"SPAN_KIND_CLIENT\","
    "\"startTimeUnixNano\":2000,\"endTimeUnixNano\":\"4000\",\"status\":{\"code\":2},"
    "\"attributes\":[{\"key\":\"gen_ai.response.model\",\"value\":{\"stringValue\":\"m-2\"}},"
    "{\"key\":\"gen_ai.request.model\",\"value\":{\"stringValue\":\"m\"}},"
    "{\"key\":\"server.port\",\"value\":{\"intValue\":\"8000\"}},"
    "{\"key\":\"url.full\",\"value\":{\"stringValue\":\"http://h/v1/x?key=secret\"}}]},"
    "{\"traceId\":\"zz\",\"spanId\":\"00f067aa0ba902b7\",\"startTimeUnixNano\":\"1\","
    "\"endTimeUnixNano\":\"2\"},"
    "{\"traceId\":\"" T32 "\",\"spanId\":\"00f067aa0ba902b8\",\"startTimeUnixNano\":\"9\","
    "\"endTimeUnixNano\":\"2\"}]}]}]}\n";

static void test_reads_lines_and_fields(void **state)
{
    struct otlp_spans s;
    otlp_spans_init(&s, 0);
    char err[256] = "";
    assert_int_equal(otlp_read_json(&s, two_lines, strlen(two_lines), err, sizeof(err)), 0);
    assert_int_equal(s.documents, 2);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.rejected, 2);
    assert_string_equal(s.first_error, "resourceSpans[0].scopeSpans[0].spans[1]: traceId is not "
                                       "32 hex digits");
    assert_string_equal(s.v[0].service, "gw");
    assert_string_equal(s.v[0].route, "/ask");
    assert_int_equal(s.v[0].kind, 2);
    assert_int_equal(s.v[0].end_ns, 5000);
    assert_int_equal(s.v[1].kind, 3);
    assert_true(s.v[1].error);
    assert_string_equal(s.v[1].model, "m"); /* the request model wins */
    assert_int_equal(s.v[1].server_port, 8000);
    assert_string_equal(s.v[1].url, "http://h/v1/x"); /* no query: it may hold secrets */
    assert_int_equal(s.v[1].parent_id[7], 0x31);
    char hex[33];
    otlp_hex(s.v[1].trace_id, 16, hex);
    assert_string_equal(hex, T32);
    otlp_spans_release(&s);
}

static void test_errors_and_caps(void **state)
{
    struct otlp_spans s;
    otlp_spans_init(&s, 1);
    char err[256] = "";
    assert_int_equal(otlp_read_json(&s, two_lines, strlen(two_lines), err, sizeof(err)), 0);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.dropped, 1);
    assert_int_equal(otlp_read_json(&s, "{\"resourceSpans\":[]} [1]", 24, err, sizeof(err)),
                     TS_PARSE);
    assert_non_null(strstr(err, "document 4 (byte 21): not an object with a resourceSpans"));
    assert_int_equal(otlp_read_json(&s, "{\"resourceSpans\":[", 18, err, sizeof(err)), TS_PARSE);
    assert_non_null(strstr(err, "document"));
    otlp_spans_release(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_lines_and_fields),
        cmocka_unit_test(test_errors_and_caps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
