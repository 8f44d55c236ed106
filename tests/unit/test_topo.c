/* The dependency graph: the scan's JSON, spans into nodes and edges, the
 * merge of code and traces, the risk flags and the writers. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "analysis/topo.c"
#include "analysis/topo_out.c"
#include "analysis/topo_trace.c"
#include "telemetry/otlp_read.h"

static int load(struct topo_graph *g, const char *json, char *err)
{
    return topo_load_scan(g, json, strlen(json), err, 256);
}

#define SCAN_HEAD "{\"tokenstorm_scan\":1,\"files\":2,\"errors\":[],"

static void test_scan_reads_nodes_edges_settings(void **state)
{
    struct topo_graph g;
    topo_init(&g);
    char err[256] = "";
    const char *doc =
        "{\"tokenstorm_scan\":1,\"files\":2,"
        "\"errors\":[{\"file\":\"bad.py\",\"line\":7,\"message\":\"invalid syntax\"}],"
        "\"nodes\":[{\"id\":\"function:a.f\",\"kind\":\"entry\",\"route\":\"POST /x\"},"
        "{\"id\":\"chat_model:a.llm\",\"kind\":\"chat_model\",\"label\":\"llm\","
        "\"models\":[\"m1\"],\"timeout_s\":0.8,\"max_retries\":3,\"file\":\"a.py\","
        "\"line\":4,\"unknown\":[1]}],"
        "\"edges\":[{\"from\":\"function:a.f\",\"to\":\"chat_model:a.llm\","
        "\"kind\":\"invokes\",\"method\":\"invoke\",\"sync\":true}]}";
    assert_int_equal(load(&g, doc, err), 0);
    assert_int_equal(g.n_nodes, 2);
    assert_int_equal(g.n_edges, 1);
    assert_int_equal(g.files, 2);
    assert_int_equal(g.n_errors, 1);
    assert_string_equal(g.errors[0].file, "bad.py");
    assert_int_equal(g.errors[0].line, 7);
    struct topo_node *n = &g.nodes[topo_find(&g, "chat_model:a.llm")];
    assert_int_equal(n->layer, TOPO_LAYER_MODEL);
    assert_true(fabs(n->timeout_s - 0.8) < 1e-9);
    assert_int_equal(n->max_retries, 3);
    assert_string_equal(n->models[0], "m1");
    assert_int_equal(n->origin, TOPO_CODE);
    assert_true(g.edges[0].sync);
    assert_string_equal(g.nodes[0].route, "POST /x");
    topo_release(&g);
}

static void test_scan_rejects_bad_fields(void **state)
{
    static const char *bad[] = {
        "not json",
        "{\"tokenstorm_scan\":2,\"files\":0,\"errors\":[],\"nodes\":[],\"edges\":[]}",
        SCAN_HEAD "\"nodes\":[{\"id\":3,\"kind\":\"entry\"}],\"edges\":[]}",
        SCAN_HEAD "\"nodes\":[{\"id\":\"a\",\"kind\":\"entry\",\"timeout_s\":\"5\"}],\"edges\":[]}",
        SCAN_HEAD "\"nodes\":[{\"id\":\"a\",\"kind\":\"entry\",\"timeout_s\":-1}],\"edges\":[]}",
        SCAN_HEAD "\"nodes\":[{\"id\":\"a\",\"kind\":\"entry\",\"models\":[1]}],\"edges\":[]}",
        SCAN_HEAD "\"nodes\":[{\"id\":\"a\",\"kind\":\"entry\"}],"
                  "\"edges\":[{\"from\":\"a\",\"to\":\"b\",\"kind\":\"calls\"}]}",
        ("{\"tokenstorm_scan\":1,\"files\":0,\"errors\":[{\"file\":\"x\"}],\"nodes\":[],"
         "\"edges\":[]}"),
    };
    static const char *why[] = {"not JSON",
                                "version 1",
                                "nodes[0]: needs an id",
                                "nodes[0]: timeout_s",
                                "nodes[0]: timeout_s",
                                "models[0] is not a string",
                                "edges[0]: names a node",
                                "errors[0]: needs"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct topo_graph g;
        topo_init(&g);
        char err[256] = "";
        assert_int_equal(load(&g, bad[i], err), TS_PARSE);
        if (!strstr(err, why[i]))
            fail_msg("case %zu: '%s' does not say '%s'", i, err, why[i]);
        topo_release(&g);
    }
}

/* A span with ids from small numbers: trace t, span s, parent p (0: root). */
static struct otlp_rspan span(int t, int s, int p, uint8_t kind, const char *svc, const char *name,
                              uint64_t start_ms, uint64_t end_ms)
{
    struct otlp_rspan sp;
    memset(&sp, 0, sizeof(sp));
    sp.trace_id[15] = (uint8_t)t;
    sp.span_id[7] = (uint8_t)s;
    sp.parent_id[7] = (uint8_t)p;
    sp.kind = kind;
    sp.server_port = -1;
    sp.start_ns = start_ms * 1000000;
    sp.end_ns = end_ms * 1000000;
    snprintf(sp.service, sizeof(sp.service), "%s", svc);
    snprintf(sp.name, sizeof(sp.name), "%s", name);
    return sp;
}

/* Two traces: POST /ask -> chat m (80 ms of 100) and a failing peer call. */
static void two_traces(struct otlp_spans *s, struct otlp_rspan *v)
{
    int k = 0;
    for (int t = 1; t <= 2; t++) {
        v[k++] = span(t, 1, 0, OTLP_KIND_SERVER, "gw", "POST /ask", 0, 100);
        v[k] = span(t, 2, 1, OTLP_KIND_CLIENT, "gw", "chat m", 15, 95);
        snprintf(v[k].model, sizeof(v[k].model), "m");
        k++;
        v[k] = span(t, 3, 1, OTLP_KIND_CLIENT, "gw", "GET", 0, t == 1 ? 10 : 14);
        snprintf(v[k].url, sizeof(v[k].url), "http://127.0.0.1:9/weather");
        v[k].error = true;
        k++;
        v[k++] = span(t, 4, 2, OTLP_KIND_INTERNAL, "gw", "json.parse", 90, 95); /* folded */
    }
    memset(s, 0, sizeof(*s));
    s->v = v;
    s->n = (size_t)k;
    s->max = 100;
}

static void test_spans_make_nodes_edges_and_numbers(void **state)
{
    struct topo_graph g;
    topo_init(&g);
    struct otlp_rspan v[8];
    struct otlp_spans s;
    two_traces(&s, v);
    assert_int_equal(topo_add_spans(&g, &s), 0);
    assert_int_equal(topo_finish(&g), 0);
    assert_int_equal(g.traces, 2);
    assert_int_equal(g.n_nodes, 3);
    size_t op = topo_find(&g, "op:gw:POST /ask"), m = topo_find(&g, "model:m"),
           peer = topo_find(&g, "peer:127.0.0.1:9/weather");
    assert_true(op != SIZE_MAX && m != SIZE_MAX && peer != SIZE_MAX);
    assert_int_equal(g.nodes[m].layer, TOPO_LAYER_MODEL);
    assert_int_equal(g.nodes[peer].layer, TOPO_LAYER_INFRA);
    assert_int_equal(g.nodes[op].lat.calls, 2);
    assert_int_equal(g.nodes[m].lat.calls, 2); /* the folded INTERNAL child adds nothing */
    assert_int_equal(g.n_edges, 2);
    size_t e;
    assert_int_equal(topo_edge_get(&g, op, peer, "traced", &e), 0);
    assert_int_equal(g.edges[e].lat.calls, 2);
    assert_int_equal(g.edges[e].lat.errors, 2);
    assert_true(fabs(g.edges[e].lat.p50_ms - 12) < 1e-9);
    /* the chat span is on the critical path for its 80 ms, the peer call only
     * before the chat began: 10 and 14 ms cut to 0..15 -> 10 + 14 */
    assert_int_equal(topo_edge_get(&g, op, m, "traced", &e), 0);
    assert_true(fabs(g.edges[e].crit_share - 0.8) < 1e-9);
    assert_int_equal(topo_edge_get(&g, op, peer, "traced", &e), 0);
    assert_true(fabs(g.edges[e].crit_share - 0.12) < 1e-9);
    topo_release(&g);
}

static void test_merge_and_timeout_flag(void **state)
{
    struct topo_graph g;
    topo_init(&g);
    char err[256];
    setenv("TOPO_TEST_URL", "http://127.0.0.1:9", 1);
    const char *doc = SCAN_HEAD
        "\"nodes\":[{\"id\":\"function:a.ask\",\"kind\":\"entry\",\"route\":\"POST /ask\"},"
        "{\"id\":\"chat_model:a.llm\",\"kind\":\"chat_model\",\"label\":\"llm\","
        "\"models\":[\"m\"],\"timeout_s\":0.05},"
        "{\"id\":\"http:w\",\"kind\":\"http\",\"url\":\"${TOPO_TEST_URL:-x}/weather\"}],"
        "\"edges\":[{\"from\":\"function:a.ask\",\"to\":\"http:w\",\"kind\":\"http\","
        "\"timeout_missing\":true}]}";
    assert_int_equal(load(&g, doc, err), 0);
    struct otlp_rspan v[8];
    struct otlp_spans s;
    two_traces(&s, v);
    assert_int_equal(topo_add_spans(&g, &s), 0);
    assert_int_equal(topo_finish(&g), 0);
    size_t llm = topo_find(&g, "chat_model:a.llm");
    assert_int_equal(topo_find(&g, "model:m"), llm);
    assert_string_equal(topo_origin_name(g.nodes[llm].origin), "both");
    assert_int_equal(g.nodes[llm].lat.calls, 2);
    size_t ask = topo_find(&g, "function:a.ask"), w = topo_find(&g, "http:w");
    assert_int_equal(topo_find(&g, "op:gw:POST /ask"), ask);
    assert_int_equal(topo_find(&g, "peer:127.0.0.1:9/weather"), w);
    size_t e;
    assert_int_equal(topo_edge_get(&g, ask, w, "http", &e), 0);
    assert_string_equal(topo_origin_name(g.edges[e].origin), "both");
    assert_int_equal(g.edges[e].lat.calls, 2);
    bool timeout = false, missing = false;
    for (size_t i = 0; i < g.n_flags; i++) {
        if (!strcmp(g.flags[i].kind, "timeout_below_p99") && g.flags[i].node == llm) {
            timeout = true;
            assert_non_null(strstr(g.flags[i].message, "times out after 50 ms, below the "
                                                       "traced p99 of 80 ms"));
        }
        missing |= !strcmp(g.flags[i].kind, "missing_timeout") && g.flags[i].edge == e;
    }
    assert_true(timeout);
    assert_true(missing);
    topo_release(&g);
}

static void test_retries_multiply_along_a_path(void **state)
{
    struct topo_graph g;
    topo_init(&g);
    char err[256];
    const char *doc = SCAN_HEAD
        "\"nodes\":[{\"id\":\"e\",\"kind\":\"entry\"},"
        "{\"id\":\"gw\",\"kind\":\"http_client\",\"max_retries\":3},"
        "{\"id\":\"llm\",\"kind\":\"chat_model\",\"max_retries\":3,\"timeout_s\":5},"
        "{\"id\":\"t\",\"kind\":\"tool\",\"retry_attempts\":0,\"retry_lib\":\"tenacity\"}],"
        "\"edges\":[{\"from\":\"e\",\"to\":\"gw\",\"kind\":\"calls\"},"
        "{\"from\":\"gw\",\"to\":\"llm\",\"kind\":\"calls\"},"
        "{\"from\":\"llm\",\"to\":\"e\",\"kind\":\"calls\"}]}"; /* a cycle too */
    assert_int_equal(load(&g, doc, err), 0);
    assert_int_equal(topo_finish(&g), 0);
    int amp = 0, unbounded = 0;
    for (size_t i = 0; i < g.n_flags; i++) {
        if (!strcmp(g.flags[i].kind, "retry_amplification")) {
            amp++;
            assert_true(g.flags[i].value == 16); /* 3 retries over 2 hops */
            assert_non_null(strstr(g.flags[i].message, "up to 16 calls"));
        }
        unbounded += !strcmp(g.flags[i].kind, "unbounded_retry");
    }
    assert_int_equal(unbounded, 1);
    (void)amp; /* the cycle has no node without callers: e has one (llm) */
    topo_release(&g);

    topo_init(&g);
    const char *chain = SCAN_HEAD "\"nodes\":[{\"id\":\"e\",\"kind\":\"entry\"},"
                                  "{\"id\":\"gw\",\"kind\":\"http_client\",\"max_retries\":3},"
                                  "{\"id\":\"llm\",\"kind\":\"chat_model\",\"max_retries\":3}],"
                                  "\"edges\":[{\"from\":\"e\",\"to\":\"gw\",\"kind\":\"calls\"},"
                                  "{\"from\":\"gw\",\"to\":\"llm\",\"kind\":\"calls\"}]}";
    assert_int_equal(load(&g, chain, err), 0);
    assert_int_equal(topo_finish(&g), 0);
    amp = 0;
    for (size_t i = 0; i < g.n_flags; i++)
        if (!strcmp(g.flags[i].kind, "retry_amplification")) {
            amp++;
            assert_true(g.flags[i].value == 16);
            assert_string_equal(g.flags[i].severity, "high");
        }
    assert_int_equal(amp, 1);
    topo_release(&g);
}

static void test_writers_escape_labels(void **state)
{
    struct topo_graph g;
    topo_init(&g);
    char err[256];
    const char *doc = SCAN_HEAD "\"nodes\":[{\"id\":\"a\",\"kind\":\"entry\",\"label\":"
                                "\"x\\\"]|{evil}\\n\"},{\"id\":\"b\",\"kind\":\"retriever\"}],"
                                "\"edges\":[{\"from\":\"a\",\"to\":\"b\",\"kind\":\"uses\"}]}";
    assert_int_equal(load(&g, doc, err), 0);
    assert_int_equal(topo_finish(&g), 0);
    struct buf b;
    buf_init(&b, 1 << 20);
    assert_int_equal(topo_write_mermaid(&g, &b), 0);
    assert_non_null(strstr(buf_cstr(&b), "n0[\"x''''evil'' (entry)\"]:::gateway"));
    assert_non_null(strstr(buf_cstr(&b), "n1[\"b (retriever)\"]:::vector"));
    assert_non_null(strstr(buf_cstr(&b), "n0 -.->|\"uses\"| n1"));
    buf_reset(&b);
    assert_int_equal(topo_write_dot(&g, &b), 0);
    assert_non_null(strstr(buf_cstr(&b), "n0 -> n1 [label=\"uses\""));
    assert_null(strstr(buf_cstr(&b), "\\\""));
    buf_release(&b);
    json_t *j = topo_to_json(&g);
    assert_non_null(j);
    assert_int_equal(json_array_size(json_object_get(j, "nodes")), 2);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(j, "nodes"), 1), "layer")),
        "vector");
    json_decref(j);
    topo_release(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan_reads_nodes_edges_settings),
        cmocka_unit_test(test_scan_rejects_bad_fields),
        cmocka_unit_test(test_spans_make_nodes_edges_and_numbers),
        cmocka_unit_test(test_merge_and_timeout_flag),
        cmocka_unit_test(test_retries_multiply_along_a_path),
        cmocka_unit_test(test_writers_escape_labels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
