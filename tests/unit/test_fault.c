#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "chaos/fault.h"

static int parse(const char *js, struct fault *f, char *err, size_t errlen)
{
    json_error_t je;
    json_t *j = json_loads(js, 0, &je);
    assert_non_null(j);
    int rc = fault_parse_json(j, f, err, errlen);
    json_decref(j);
    return rc;
}

static void test_good_abort(void **state)
{
    (void)state;
    struct fault f;
    char err[512];
    assert_int_equal(parse("{\"name\":\"storm\",\"type\":\"http_abort\",\"status\":429,"
                           "\"probability\":0.25,\"match\":{\"path\":\"/v1/chat\","
                           "\"method\":\"post\",\"header\":{\"x-a\":\"b\"},\"model\":\"m\","
                           "\"tenant\":\"acme\"},\"start\":\"2s\",\"duration\":\"1m\"}",
                           &f, err, sizeof err),
                     0);
    assert_string_equal(f.name, "storm");
    assert_int_equal(f.type, FAULT_HTTP_ABORT);
    assert_int_equal(f.dir, FAULT_DIR_UPSTREAM);
    assert_true(f.probability == 0.25);
    assert_string_equal(f.match.path, "/v1/chat");
    assert_false(f.match.path_glob);
    assert_string_equal(f.match.method, "POST");
    assert_string_equal(f.match.header_name, "x-a");
    assert_string_equal(f.match.header_value, "b");
    assert_string_equal(f.match.model, "m");
    assert_string_equal(f.match.tenant, "acme");
    assert_string_equal(f.match.tenant_header, "x-tenant-id");
    assert_int_equal(f.start_ns, 2000000000ull);
    assert_int_equal(f.duration_ns, 60000000000ull);
    assert_int_equal(f.params.status, 429);
    assert_int_equal(f.params.retry_after_ns, 1000000000ull); /* 429 default */
}

static void test_good_params(void **state)
{
    (void)state;
    struct fault f;
    char err[512];
    assert_int_equal(
        parse("{\"name\":\"j\",\"type\":\"sse_jitter\",\"delay\":\"normal:50ms,10ms\"}", &f, err,
              sizeof err),
        0);
    assert_int_equal(f.params.delay.kind, DIST_NORMAL);
    assert_true(f.params.delay.normal.mean == 50e6);
    assert_true(f.params.delay.normal.sd == 10e6);

    assert_int_equal(
        parse("{\"name\":\"u\",\"type\":\"sse_ttft_delay\",\"delay\":\"uniform:10ms-50ms\"}", &f,
              err, sizeof err),
        0);
    assert_int_equal(f.params.delay.kind, DIST_UNIFORM);
    assert_true(f.params.delay.uniform.lo == 10e6 && f.params.delay.uniform.hi == 50e6);

    assert_int_equal(parse("{\"name\":\"d\",\"type\":\"http_delay_request\",\"delay\":0.5}", &f,
                           err, sizeof err),
                     0);
    assert_int_equal(f.params.delay.kind, DIST_FIXED);
    assert_true(f.params.delay.fixed.value == 5e8);

    assert_int_equal(parse("{\"name\":\"t\",\"type\":\"sse_truncate\",\"after_tokens\":7,"
                           "\"cut\":\"close\"}",
                           &f, err, sizeof err),
                     0);
    assert_int_equal(f.params.unit, FAULT_UNIT_TOKENS);
    assert_true(f.params.count.kind == DIST_FIXED && f.params.count.fixed.value == 7);
    assert_int_equal(f.params.cut, FAULT_CUT_CLOSE);

    assert_int_equal(parse("{\"name\":\"t\",\"type\":\"sse_truncate\",\"after_events\":"
                           "\"uniform:5-10\"}",
                           &f, err, sizeof err),
                     0);
    assert_int_equal(f.params.unit, FAULT_UNIT_EVENTS);
    assert_int_equal(f.params.count.kind, DIST_UNIFORM);

    assert_int_equal(
        parse("{\"name\":\"b\",\"type\":\"tcp_bandwidth\",\"rate\":\"64K\"}", &f, err, sizeof err),
        0);
    assert_true(f.params.rate == 65536);
    assert_int_equal(parse("{\"name\":\"th\",\"type\":\"sse_throttle\",\"rate\":\"600/m\"}", &f,
                           err, sizeof err),
                     0);
    assert_true(f.params.rate == 10);
    assert_int_equal(parse("{\"name\":\"h\",\"type\":\"http_header_rewrite\",\"direction\":"
                           "\"upstream\",\"set\":{\"x-a\":\"1\"},\"remove\":[\"authorization\"]}",
                           &f, err, sizeof err),
                     0);
    assert_int_equal(f.dir, FAULT_DIR_UPSTREAM);
    assert_int_equal(f.params.n_headers, 2);
    assert_false(f.params.headers[0].remove);
    assert_string_equal(f.params.headers[1].name, "authorization");
    assert_true(f.params.headers[1].remove);
    assert_int_equal(parse("{\"name\":\"tr\",\"type\":\"http_truncate_response\",\"bytes\":\"1K\"}",
                           &f, err, sizeof err),
                     0);
    assert_int_equal(f.params.bytes, 1024);
    assert_int_equal(parse("{\"name\":\"g\",\"type\":\"sse_drop_done\",\"match\":{\"path\":"
                           "\"/v1/*/completions\"}}",
                           &f, err, sizeof err),
                     0);
    assert_true(f.match.path_glob);
    assert_int_equal(f.probability == 1, 1);
}

/* Bad specs and their exact messages. */
static void test_bad(void **state)
{
    (void)state;
    static const struct {
        const char *spec;
        const char *msg;
    } cases[] = {
        {"[]", "fault: expected an object (name, type, ...), got a list"},
        {"{}", "fault: name: required"},
        {"{\"name\":\"a b\"}",
         "fault: name: expected 1..63 characters of A-Z a-z 0-9 _ . -, got 'a b'"},
        {"{\"name\":\"x\"}", "fault 'x': type: required (e.g. http_abort, sse_truncate)"},
        {"{\"name\":\"x\",\"type\":\"sse_trunate\"}",
         "fault 'x': type: unknown type 'sse_trunate'; did you mean 'sse_truncate'?"},
        {"{\"name\":\"x\",\"type\":\"zzz\"}",
         "fault 'x': type: unknown type 'zzz' (see docs/CHAOS.md for the list)"},
        {"{\"name\":\"x\",\"type\":\"http_abort\",\"probability\":1.5}",
         "fault 'x': probability: expected a number in [0, 1], got 1.5"},
        {"{\"name\":\"x\",\"type\":\"http_abort\",\"probability\":\"high\"}",
         "fault 'x': probability: expected a number in [0, 1], got 'high'"},
        {"{\"name\":\"x\",\"type\":\"http_abort\",\"stauts\":503}",
         "fault 'x': unknown field 'stauts'; did you mean 'status'?"},
        {"{\"name\":\"x\",\"type\":\"http_abort\",\"bytes\":5}",
         "fault 'x': bytes: does not apply to type http_abort (its fields: status retry_after "
         "text)"},
        {"{\"name\":\"x\",\"type\":\"http_abort\",\"status\":200}",
         "fault 'x': status: expected an HTTP error status 400..599, got 200"},
        {"{\"name\":\"x\",\"type\":\"http_delay_request\"}",
         "fault 'x': delay: required for http_delay_request (e.g. \"200ms\")"},
        {"{\"name\":\"x\",\"type\":\"http_delay_request\",\"delay\":\"fast\"}",
         "fault 'x': delay: expected a duration (\"250ms\") or a distribution "
         "(\"normal:50ms,10ms\"), got 'fast'"},
        {"{\"name\":\"x\",\"type\":\"sse_jitter\",\"delay\":\"normal:50\"}",
         "fault 'x': delay: normal: expected 2 argument(s) (e.g. normal:50ms,10ms), got "
         "'normal:50'"},
        {"{\"name\":\"x\",\"type\":\"sse_jitter\",\"delay\":\"poisson:5ms\"}",
         "fault 'x': delay: unknown distribution 'poisson' (fixed, uniform, normal, "
         "truncnormal, lognormal, exponential, gamma), got 'poisson:5ms'"},
        {"{\"name\":\"x\",\"type\":\"http_delay_request\",\"delay\":\"1s\",\"direction\":"
         "\"downstream\"}",
         "fault 'x': direction: http_delay_request applies upstream only"},
        {"{\"name\":\"x\",\"type\":\"sse_jitter\",\"delay\":\"5ms\",\"mode\":\"max\"}",
         "fault 'x': mode: expected add or floor, got 'max'"},
        {"{\"name\":\"x\",\"type\":\"sse_error_event\",\"raw\":\"yes\"}",
         "fault 'x': raw: expected true or false, got 'yes'"},
        {"{\"name\":\"x\",\"type\":\"sse_stall\",\"delay\":\"5ms\",\"mode\":\"add\"}",
         "fault 'x': mode: does not apply to type sse_stall (its fields: after_events "
         "after_tokens delay)"},
        {"{\"name\":\"x\",\"type\":\"sse_truncate\"}",
         "fault 'x': after_tokens: required for sse_truncate (after_tokens or after_events)"},
        {"{\"name\":\"x\",\"type\":\"sse_truncate\",\"after_tokens\":-1}",
         "fault 'x': after_tokens: expected a count (7) or a distribution of counts "
         "(\"uniform:5-10\"), got -1"},
        {"{\"name\":\"x\",\"type\":\"sse_truncate\",\"after_tokens\":3,\"cut\":\"snap\"}",
         "fault 'x': cut: expected one of end, close, reset, hang, got 'snap'"},
        {"{\"name\":\"x\",\"type\":\"sse_truncate\",\"after_tokens\":3,\"after_events\":2}",
         "fault 'x': after_events: give after_events or after_tokens, not both"},
        {"{\"name\":\"x\",\"type\":\"http_abort\",\"match\":{\"pth\":\"/\"}}",
         "fault 'x': match: unknown selector 'pth'; did you mean 'path'?"},
        {"{\"name\":\"x\",\"type\":\"http_abort\",\"match\":{\"path\":\"v1\"}}",
         "fault 'x': match.path: expected a path starting with '/', got 'v1'"},
        {"{\"name\":\"x\",\"type\":\"http_abort\",\"match\":{\"header\":{\"a\":\"1\",\"b\":\"2\"}}"
         "}",
         "fault 'x': match.header: expected one {\"name\": \"value\"} pair, got an object"},
        {"{\"name\":\"x\",\"type\":\"http_abort\",\"start\":\"soon\"}",
         "fault 'x': start: expected a duration such as \"250ms\" or \"1.5s\", got 'soon'"},
        {"{\"name\":\"x\",\"type\":\"llm_hallucinate\",\"rate\":2}",
         "fault 'x': rate: expected a number in [0, 1], got 2"},
        {"{\"name\":\"x\",\"type\":\"rag_empty\",\"pointer\":\"results\"}",
         "fault 'x': pointer: expected a JSON pointer (\"\" or starting with '/'), got "
         "'results'"},
        {"{\"name\":\"x\",\"type\":\"http_header_rewrite\"}",
         "fault 'x': set: http_header_rewrite needs set and/or remove"},
        {"{\"name\":\"x\",\"type\":\"http_header_rewrite\",\"set\":{\"bad name\":\"v\"}}",
         "fault 'x': set: 'bad name' is not a valid header name"},
        {"{\"name\":\"x\",\"type\":\"sse_truncate\",\"after_tokens\":\"empirical:/etc/passwd\"}",
         "fault 'x': after_tokens: empirical distributions are not accepted here"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fault f;
        char err[512];
        json_error_t je;
        json_t *j = json_loads(cases[i].spec, JSON_DECODE_ANY, &je);
        assert_non_null(j);
        int rc = fault_parse_json(j, &f, err, sizeof err);
        json_decref(j);
        if (rc != -EINVAL || strcmp(err, cases[i].msg) != 0)
            fail_msg("case %zu: %s\n  got rc %d: %s\n  want: %s", i, cases[i].spec, rc, err,
                     cases[i].msg);
    }
}

/* fault_to_json gives back a spec that parses to the same fault. */
static void test_roundtrip(void **state)
{
    (void)state;
    static const char *specs[] = {
        "{\"name\":\"a\",\"type\":\"http_abort\",\"status\":429,\"retry_after\":\"2500ms\","
        "\"probability\":0.3,\"match\":{\"path\":\"/v1\",\"tenant\":\"t\",\"tenant_header\":"
        "\"x-t\"},\"start\":\"1s\",\"duration\":\"90s\"}",
        "{\"name\":\"b\",\"type\":\"sse_jitter\",\"delay\":\"lognormal:40ms,0.5\"}",
        "{\"name\":\"c\",\"type\":\"sse_truncate\",\"after_events\":\"uniform:5-10\",\"cut\":"
        "\"hang\"}",
        "{\"name\":\"d\",\"type\":\"http_header_rewrite\",\"set\":{\"x-a\":\"1\"},\"remove\":"
        "[\"x-b\"]}",
        "{\"name\":\"e\",\"type\":\"rag_lower_scores\",\"pointer\":\"/data\",\"factor\":0.25}",
        "{\"name\":\"f\",\"type\":\"tcp_reset\",\"bytes\":100,\"delay\":\"gamma:2,1500us\"}",
        "{\"name\":\"g\",\"type\":\"sse_jitter\",\"delay\":\"20ms\",\"mode\":\"floor\"}",
        "{\"name\":\"h\",\"type\":\"sse_error_event\",\"text\":\"x\",\"raw\":true}",
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        struct fault f1, f2;
        char err[512];
        assert_int_equal(parse(specs[i], &f1, err, sizeof err), 0);
        json_t *j = fault_to_json(&f1, 0);
        assert_non_null(j);
        int rc = fault_parse_json(j, &f2, err, sizeof err);
        if (rc) {
            char *s = json_dumps(j, 0);
            fail_msg("case %zu: %s -> %s: %s", i, specs[i], s, err);
        }
        json_decref(j);
        assert_memory_equal(&f1.params, &f2.params, sizeof f1.params);
        assert_memory_equal(&f1.match, &f2.match, sizeof f1.match);
        assert_true(f1.probability == f2.probability);
        assert_int_equal(f1.start_ns, f2.start_ns);
        assert_int_equal(f1.duration_ns, f2.duration_ns);
        assert_int_equal(f1.dir, f2.dir);
    }
}

static void test_yaml(void **state)
{
    (void)state;
    const char *y = "faults:\n"
                    "  - name: storm\n"
                    "    type: http_abort\n"
                    "    status: 429\n"
                    "    probability: 0.5\n"
                    "    match: {path: /v1/chat/completions}\n"
                    "  - name: cut\n"
                    "    type: sse_truncate\n"
                    "    after_tokens: 7\n"
                    "    cut: \"close\"\n";
    json_t *list = NULL;
    char err[512];
    assert_int_equal(fault_yaml_parse(y, strlen(y), "f.yaml", &list, err, sizeof err), 0);
    assert_int_equal(json_array_size(list), 2);
    struct fault f;
    assert_int_equal(fault_parse_json(json_array_get(list, 0), &f, err, sizeof err), 0);
    assert_int_equal(f.params.status, 429);
    assert_true(f.probability == 0.5);
    assert_string_equal(f.match.path, "/v1/chat/completions");
    assert_int_equal(fault_parse_json(json_array_get(list, 1), &f, err, sizeof err), 0);
    assert_int_equal(f.params.cut, FAULT_CUT_CLOSE);
    json_decref(list);

    /* quoted numbers stay strings: "429" is not a status */
    const char *q = "faults:\n  - {name: a, type: http_abort, status: \"429\"}\n";
    assert_int_equal(fault_yaml_parse(q, strlen(q), "q.yaml", &list, err, sizeof err), 0);
    assert_int_equal(fault_parse_json(json_array_get(list, 0), &f, err, sizeof err), -EINVAL);
    assert_string_equal(err,
                        "fault 'a': status: expected an HTTP error status 400..599, got '429'");
    json_decref(list);

    assert_int_equal(fault_yaml_parse("x: 1\n", 5, "b.yaml", &list, err, sizeof err), -EINVAL);
    assert_string_equal(err, "b.yaml: unknown key 'x'; expected faults: [ ... ]");
    assert_null(list);
    assert_int_equal(fault_yaml_parse("faults: 3\n", 10, "c.yaml", &list, err, sizeof err),
                     -EINVAL);
    assert_string_equal(err, "c.yaml: expected faults: [ spec, ... ] (a list of fault specs)");
    assert_int_equal(fault_yaml_parse("a\n\xff", 3, "u.yaml", &list, err, sizeof err), -EINVAL);
    assert_string_equal(err, "u.yaml:2:1: not UTF-8 text");
    /* the file is loaded by yamlwalk: aliases are followed, duplicate keys refused */
    const char *al = "faults:\n  - {name: a, type: http_abort, status: &s 503}\n"
                     "  - {name: b, type: http_abort, status: *s}\n";
    assert_int_equal(fault_yaml_parse(al, strlen(al), "a.yaml", &list, err, sizeof err), 0);
    assert_int_equal(fault_parse_json(json_array_get(list, 1), &f, err, sizeof err), 0);
    assert_int_equal(f.params.status, 503);
    json_decref(list);
    const char *dk = "faults:\n  - {name: a, name: b, type: sse_drop_done}\n";
    assert_int_equal(fault_yaml_parse(dk, strlen(dk), "d.yaml", &list, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "d.yaml:2:"));
    assert_null(list);
    assert_int_equal(fault_yaml_parse("faults: [\n", 10, "s.yaml", &list, err, sizeof err),
                     -EINVAL);
    assert_non_null(strstr(err, "s.yaml:"));
    assert_int_equal(fault_yaml_parse("", 0, "e.yaml", &list, err, sizeof err), -EINVAL);
    /* a bare list is accepted */
    const char *bl = "- {name: a, type: sse_drop_done}\n";
    assert_int_equal(fault_yaml_parse(bl, strlen(bl), "l.yaml", &list, err, sizeof err), 0);
    assert_int_equal(json_array_size(list), 1);
    json_decref(list);
}

static void test_window(void **state)
{
    (void)state;
    struct fault f;
    char err[256];
    assert_int_equal(parse("{\"name\":\"w\",\"type\":\"sse_drop_done\",\"start\":\"10s\","
                           "\"duration\":\"5s\"}",
                           &f, err, sizeof err),
                     0);
    f.added_ns = 1000;
    assert_false(fault_active(&f, 1000));
    assert_false(fault_active(&f, 1000 + 9999999999ull));
    assert_true(fault_active(&f, 1000 + 10000000000ull));
    assert_true(fault_active(&f, 1000 + 14999999999ull));
    assert_false(fault_active(&f, 1000 + 15000000000ull));
    f.duration_ns = 0;
    assert_true(fault_active(&f, UINT64_MAX));
}

static void test_names(void **state)
{
    (void)state;
    for (int t = 0; t < FAULT_TYPE_COUNT; t++) {
        enum fault_type back;
        assert_int_equal(fault_type_parse(fault_type_name((enum fault_type)t), &back), 0);
        assert_int_equal(back, t);
    }
    assert_int_equal(fault_type_family(FAULT_TCP_LIMIT), FAULT_TCP);
    assert_int_equal(fault_type_family(FAULT_RAG_LATENCY), FAULT_RAG);
    assert_int_equal(fault_type_family(FAULT_LLM_EMBEDDING_MASK), FAULT_LLM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_abort), cmocka_unit_test(test_good_params),
        cmocka_unit_test(test_bad),        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_yaml),       cmocka_unit_test(test_window),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
