/*
 * test_topo_in.c - a topology.json read back into the graph (topo_in.c):
 * what topo_to_json() wrote comes back the same; every field of a hostile
 * document is checked, with an error naming it; the graph is left empty
 * after a failure.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "analysis/topo.h"

/* Two code nodes and a traced one, an edge of each origin, two flags. */
static const char good_doc[] =
    "{\"tokenstorm_topology\":1,"
    "\"sources\":{\"code\":\"app\",\"files\":3,\"scan_errors\":[{\"file\":\"b.py\",\"line\":5,"
    "\"message\":\"invalid syntax: skipped\"}],\"scan_errors_total\":1,\"spans\":40,"
    "\"traces\":8,\"spans_rejected\":0},"
    "\"nodes\":[{\"id\":\"function:app.ask\",\"label\":\"ask\",\"kind\":\"entry\","
    "\"layer\":\"gateway\",\"origin\":\"code\",\"file\":\"app/server.py\",\"line\":12,"
    "\"route\":\"POST /ask\",\"streaming\":true,\"async\":true},"
    "{\"id\":\"chat_model:app.llm\",\"label\":\"llm <main>\",\"kind\":\"chat_model\","
    "\"layer\":\"model\",\"origin\":\"both\",\"class\":\"ChatOpenAI\",\"models\":[\"tiny-chat\"],"
    "\"base_url\":\"http://127.0.0.1:8000/v1\",\"timeout_ms\":800.0,\"max_retries\":3,"
    "\"calls\":16,\"errors\":2,\"error_rate\":0.125,\"p50_ms\":1105.5,\"p99_ms\":1181.25},"
    "{\"id\":\"db:faiss\",\"label\":\"faiss\",\"kind\":\"db\",\"layer\":\"vector\","
    "\"origin\":\"traced\",\"system\":\"faiss\",\"calls\":8,\"errors\":0,\"error_rate\":0.0,"
    "\"p50_ms\":3.5,\"p99_ms\":9.75}],"
    "\"edges\":[{\"from\":\"function:app.ask\",\"to\":\"chat_model:app.llm\",\"kind\":\"invokes\","
    "\"origin\":\"both\",\"method\":\"ainvoke\",\"timeout_ms\":500.0,\"calls\":16,\"errors\":2,"
    "\"error_rate\":0.125,\"p50_ms\":1100.0,\"p99_ms\":1170.5,\"critical_path_share\":0.75},"
    "{\"from\":\"function:app.ask\",\"to\":\"db:faiss\",\"kind\":\"traced\",\"origin\":\"traced\","
    "\"calls\":8,\"errors\":0,\"error_rate\":0.0,\"p50_ms\":3.5,\"p99_ms\":9.75,"
    "\"critical_path_share\":0.01},"
    "{\"from\":\"chat_model:app.llm\",\"to\":\"function:app.ask\",\"kind\":\"fallback\","
    "\"origin\":\"code\",\"sync\":true,\"timeout_missing\":true}],"
    "\"flags\":[{\"kind\":\"timeout_below_p99\",\"severity\":\"high\",\"node\":\"chat_model:app."
    "llm\","
    "\"value\":1181.25,\"message\":\"llm times out after 800 ms, below the traced p99 of 1181 "
    "ms\"},"
    "{\"kind\":\"missing_timeout\",\"severity\":\"medium\",\"node\":\"function:app.ask\","
    "\"edge_from\":\"function:app.ask\",\"edge_to\":\"db:faiss\",\"message\":\"no timeout\"}]}";

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *doc = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!doc)
        fail_msg("test document: %s (line %d)", je.text, je.line);
    return doc;
}

static void test_reads_every_field(void **state)
{
    (void)state;
    struct topo_graph g;
    char err[256] = "";
    json_t *doc = parse(good_doc);
    topo_init(&g);
    assert_int_equal(topo_from_json(&g, doc, err, sizeof(err)), 0);
    assert_int_equal(g.n_nodes, 3);
    assert_int_equal(g.n_edges, 3);
    assert_int_equal(g.n_flags, 2);
    assert_string_equal(g.source, "app");
    assert_int_equal(g.files, 3);
    assert_int_equal(g.spans, 40);
    assert_int_equal(g.traces, 8);
    assert_int_equal(g.n_errors, 1);
    assert_int_equal(g.errors_total, 1);
    assert_string_equal(g.errors[0].file, "b.py");
    assert_int_equal(g.errors[0].line, 5);

    const struct topo_node *ask = &g.nodes[0], *llm = &g.nodes[1], *db = &g.nodes[2];
    assert_string_equal(ask->route, "POST /ask");
    assert_int_equal(ask->line, 12);
    assert_true(ask->streaming && ask->is_async && !ask->breaker);
    assert_int_equal(ask->origin, TOPO_CODE);
    assert_true(isnan(ask->lat.p99_ms));
    assert_int_equal(ask->timeout_s, -1);
    assert_int_equal(ask->max_retries, -1);
    assert_int_equal(ask->merged_into, SIZE_MAX);
    assert_string_equal(llm->label, "llm <main>");
    assert_int_equal(llm->layer, TOPO_LAYER_MODEL);
    assert_int_equal(llm->origin, TOPO_CODE | TOPO_TRACE);
    assert_string_equal(llm->models[0], "tiny-chat");
    assert_true(fabs(llm->timeout_s - 0.8) < 1e-12);
    assert_int_equal(llm->max_retries, 3);
    assert_int_equal(llm->lat.calls, 16);
    assert_int_equal(llm->lat.errors, 2);
    assert_true(llm->lat.p99_ms == 1181.25);
    assert_int_equal(db->layer, TOPO_LAYER_VECTOR);
    assert_int_equal(db->origin, TOPO_TRACE);

    assert_int_equal(g.edges[0].from, 0);
    assert_int_equal(g.edges[0].to, 1);
    assert_string_equal(g.edges[0].method, "ainvoke");
    assert_true(g.edges[0].crit_share == 0.75);
    assert_true(fabs(g.edges[0].timeout_s - 0.5) < 1e-12);
    assert_int_equal(g.edges[2].from, 1); /* a back edge */
    assert_true(g.edges[2].sync && g.edges[2].timeout_missing);
    assert_true(isnan(g.edges[2].crit_share));

    assert_string_equal(g.flags[0].severity, "high");
    assert_int_equal(g.flags[0].node, 1);
    assert_int_equal(g.flags[0].edge, SIZE_MAX);
    assert_true(g.flags[0].value == 1181.25);
    assert_int_equal(g.flags[1].edge, 1);
    assert_true(isnan(g.flags[1].value));

    /* Written again, the document is the same. */
    json_t *again = topo_to_json(&g);
    assert_non_null(again);
    if (!json_equal(doc, again)) {
        char *a = json_dumps(again, JSON_SORT_KEYS);
        fail_msg("written back differently: %s", a);
    }
    /* A second read into a graph in use is refused. */
    assert_int_equal(topo_from_json(&g, doc, err, sizeof(err)), -EINVAL);
    json_decref(again);
    json_decref(doc);
    topo_release(&g);
}

/* What topology --out writes from the scan (code only, flags computed) reads back the same. */
static void test_round_trip_from_scan(void **state)
{
    (void)state;
    const char *scan =
        "{\"tokenstorm_scan\":1,\"files\":2,\"errors\":[],"
        "\"nodes\":[{\"id\":\"function:a.f\",\"kind\":\"entry\",\"is_async\":true,"
        "\"streaming\":true},"
        "{\"id\":\"http:http://h/x\",\"kind\":\"http\",\"url\":\"http://h/x\"},"
        "{\"id\":\"chat_model:a.llm\",\"kind\":\"chat_model\",\"models\":[\"m\"],"
        "\"max_retries\":3,\"file\":\"a.py\",\"line\":4},"
        "{\"id\":\"function:a.g\",\"kind\":\"tool\",\"retry_attempts\":0,\"retry_lib\":"
        "\"tenacity\"}],"
        "\"edges\":[{\"from\":\"function:a.f\",\"to\":\"http:http://h/x\",\"kind\":\"http\","
        "\"method\":\"post\",\"sync\":true,\"timeout_missing\":true},"
        "{\"from\":\"function:a.f\",\"to\":\"chat_model:a.llm\",\"kind\":\"invokes\","
        "\"timeout_s\":0.25},"
        "{\"from\":\"function:a.f\",\"to\":\"function:a.g\",\"kind\":\"calls\"}]}";
    struct topo_graph g, back;
    char err[256] = "";
    topo_init(&g);
    topo_init(&back);
    assert_int_equal(topo_load_scan(&g, scan, strlen(scan), err, sizeof(err)), 0);
    assert_int_equal(topo_finish(&g), 0);
    assert_true(g.n_flags >= 2);
    json_t *doc = topo_to_json(&g);
    assert_non_null(doc);
    if (topo_from_json(&back, doc, err, sizeof(err)))
        fail_msg("read back: %s", err);
    json_t *again = topo_to_json(&back);
    assert_true(json_equal(doc, again));
    assert_int_equal(back.n_flags, g.n_flags);
    json_decref(again);
    json_decref(doc);
    topo_release(&back);
    topo_release(&g);
}

/* good_doc with the text `from` replaced by `to` (once). */
static json_t *mutate(const char *from, const char *to)
{
    const char *at = strstr(good_doc, from);
    if (!at)
        fail_msg("test: '%s' is not in the document", from);
    size_t n = strlen(good_doc) + strlen(to) + 1;
    char *s = malloc(n);
    assert_non_null(s);
    snprintf(s, n, "%.*s%s%s", (int)(at - good_doc), good_doc, to, at + strlen(from));
    json_t *doc = parse(s);
    free(s);
    return doc;
}

static void test_rejects_bad_fields(void **state)
{
    (void)state;
    static const struct {
        const char *from, *to, *err;
    } cases[] = {
        {"\"tokenstorm_topology\":1", "\"tokenstorm_topology\":2", "tokenstorm_topology: not 1"},
        {"\"nodes\":[", "\"nodez\":[", "nodes: missing or not an array"},
        {"\"edges\":[", "\"edges\":{\"x\":1},\"e\":[", "edges: missing or not an array"},
        {"\"flags\":[", "\"flags\":3,\"f\":[", "flags: missing or not an array"},
        {"\"layer\":\"vector\"", "\"layer\":\"cloud\"",
         "nodes[2].layer: expected gateway, model, vector or infrastructure"},
        {"\"layer\":\"gateway\"", "\"layer\":7", "nodes[0].layer: not a string"},
        {"\"origin\":\"traced\",\"system\"", "\"origin\":\"maybe\",\"system\"",
         "nodes[2].origin: expected code, traced or both"},
        {"\"id\":\"db:faiss\",", "", "nodes[2].id: missing"},
        {"\"id\":\"db:faiss\"", "\"id\":\"chat_model:app.llm\"", "nodes[2].id: repeats"},
        {"\"kind\":\"chat_model\"", "\"kind\":\"<script>\"", "nodes[1].kind: not a word"},
        {"\"label\":\"faiss\"",
         "\"label\":"
         "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"",
         "nodes[2].label: longer than 127 bytes"},
        {"\"calls\":8,\"errors\":0,\"error_rate\":0.0,\"p50_ms\":3.5,\"p99_ms\":9.75}]",
         "\"calls\":-8}]", "nodes[2].calls: not an integer in 0.."},
        {"\"calls\":16,\"errors\":2", "\"calls\":1,\"errors\":2",
         "nodes[1].errors: more than calls"},
        {"\"p99_ms\":1181.25", "\"p99_ms\":\"slow\"", "nodes[1].p99_ms: not a number"},
        {"\"p99_ms\":1181.25", "\"p99_ms\":1e300", "nodes[1].p99_ms: not a number in 0.."},
        {"\"line\":12", "\"line\":1.5", "nodes[0].line: not an integer"},
        {"\"models\":[\"tiny-chat\"]", "\"models\":[1]",
         "nodes[1].models: not an array of strings"},
        {"\"models\":[\"tiny-chat\"]", "\"models\":[\"a\",\"b\",\"c\",\"d\",\"e\"]",
         "nodes[1].models: not an array of at most 4"},
        {"\"streaming\":true", "\"streaming\":\"yes\"", "nodes[0].streaming: not true or false"},
        {"{\"id\":\"db:faiss\"", "7,{\"id\":\"db:faiss\"", "nodes[2]: not an object"},
        {"\"to\":\"db:faiss\",\"kind\":\"traced\"", "\"to\":\"db:elsewhere\",\"kind\":\"traced\"",
         "edges[1].to: names no node of nodes"},
        {"\"kind\":\"fallback\"", "\"kind\":\"fall back\"", "edges[2].kind: not a word"},
        {"\"critical_path_share\":0.75", "\"critical_path_share\":-1",
         "edges[0].critical_path_share: not a number"},
        {"\"edges\":[", "\"edges\":[null,", "edges[0]: not an object"},
        {"\"severity\":\"high\"", "\"severity\":\"critical\"",
         "flags[0].severity: expected high, medium or low"},
        {"\"node\":\"chat_model:app.llm\"", "\"node\":\"nowhere\"",
         "flags[0].node: names no node of nodes"},
        {"\"edge_to\":\"db:faiss\"", "\"edge_to\":\"function:app.ask\"",
         "flags[1].edge_to: no edge of edges goes from edge_from to it"},
        {"\"edge_from\":\"function:app.ask\",", "", "flags[1].edge_from: missing"},
        {",\"message\":\"no timeout\"", "", "flags[1].message: missing"},
        {"\"files\":3", "\"files\":\"3\"", "sources.files: not an integer"},
        {"\"line\":5,", "\"line\":-5,", "sources.scan_errors[0].line: not an integer"},
        {"\"sources\":{", "\"sources\":[],\"s\":{", "sources: not an object"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct topo_graph g;
        char err[256] = "";
        json_t *doc = mutate(cases[i].from, cases[i].to);
        topo_init(&g);
        int rc = topo_from_json(&g, doc, err, sizeof(err));
        if (rc != TS_PARSE || !strstr(err, cases[i].err))
            fail_msg("case %zu: rc %d, error '%s', expected '%s'", i, rc, err, cases[i].err);
        assert_int_equal(g.n_nodes, 0);
        assert_null(g.nodes);
        assert_null(g.edges);
        json_decref(doc);
        topo_release(&g);
    }
}

static void test_rejects_shapes_and_sizes(void **state)
{
    (void)state;
    struct topo_graph g;
    char err[256] = "";
    json_t *arr = json_array();
    topo_init(&g);
    assert_int_equal(topo_from_json(&g, arr, err, sizeof(err)), TS_PARSE);
    assert_non_null(strstr(err, "not a JSON object"));
    json_decref(arr);

    /* One node over the bound: refused before anything is allocated for them. */
    json_t *doc = json_pack("{s:i, s:[], s:[]}", "tokenstorm_topology", 1, "edges", "flags");
    json_t *nodes = json_array();
    for (int i = 0; i <= TOPO_MAX_NODES; i++)
        assert_int_equal(json_array_append_new(nodes, json_object()), 0);
    assert_int_equal(json_object_set_new(doc, "nodes", nodes), 0);
    assert_int_equal(topo_from_json(&g, doc, err, sizeof(err)), TS_TOOBIG);
    assert_non_null(strstr(err, "4097 nodes"));
    assert_null(g.nodes);
    json_decref(doc);

    /* Empty arrays: an empty graph, fine. */
    doc = json_pack("{s:i, s:[], s:[], s:[]}", "tokenstorm_topology", 1, "nodes", "edges", "flags");
    assert_int_equal(topo_from_json(&g, doc, err, sizeof(err)), 0);
    assert_int_equal(g.n_nodes, 0);
    json_decref(doc);
    topo_release(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_every_field),
        cmocka_unit_test(test_round_trip_from_scan),
        cmocka_unit_test(test_rejects_bad_fields),
        cmocka_unit_test(test_rejects_shapes_and_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
