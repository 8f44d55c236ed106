/*
 * test_html_topo.c - a topology in `tokenstorm report` (html_topo.c,
 * docset.c): topology.json found as a file, in a directory and beside a
 * run; a hostile one refused with the file and the field named; the page's
 * Topology section with its picture (svg id, layer colours, p99 labels),
 * its flags table and names escaped; nothing fetched from anywhere.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "report/docset.h"
#include "report/html.h"

static const char topo_doc[] =
    "{\"tokenstorm_topology\":1,"
    "\"sources\":{\"code\":\"app\",\"files\":3,\"scan_errors\":[],\"scan_errors_total\":0,"
    "\"spans\":40,\"traces\":8,\"spans_rejected\":0},"
    "\"nodes\":[{\"id\":\"function:app.ask\",\"label\":\"ask\",\"kind\":\"entry\","
    "\"layer\":\"gateway\",\"origin\":\"code\",\"file\":\"app/server.py\",\"line\":12},"
    "{\"id\":\"chat_model:app.llm\",\"label\":\"llm <b>x</b>\",\"kind\":\"chat_model\","
    "\"layer\":\"model\",\"origin\":\"both\",\"timeout_ms\":800.0,\"calls\":16,\"errors\":0,"
    "\"error_rate\":0.0,\"p50_ms\":1105.5,\"p99_ms\":1181.25},"
    "{\"id\":\"db:faiss\",\"label\":\"faiss\",\"kind\":\"db\",\"layer\":\"vector\","
    "\"origin\":\"traced\",\"calls\":8,\"errors\":1,\"p50_ms\":3.5,\"p99_ms\":9.75}],"
    "\"edges\":[{\"from\":\"function:app.ask\",\"to\":\"chat_model:app.llm\",\"kind\":\"invokes\","
    "\"origin\":\"both\",\"calls\":16,\"errors\":0,\"p50_ms\":1100.0,\"p99_ms\":1170.5},"
    "{\"from\":\"function:app.ask\",\"to\":\"db:faiss\",\"kind\":\"traced\",\"origin\":\"traced\","
    "\"calls\":8,\"errors\":1,\"p50_ms\":3.5,\"p99_ms\":9.75}],"
    "\"flags\":[{\"kind\":\"timeout_below_p99\",\"severity\":\"high\",\"node\":\"chat_model:app."
    "llm\","
    "\"value\":1181.25,\"message\":\"times out after 800 ms <script>alert(1)</script>\"},"
    "{\"kind\":\"missing_timeout\",\"severity\":\"medium\",\"node\":\"function:app.ask\","
    "\"edge_from\":\"function:app.ask\",\"edge_to\":\"db:faiss\",\"message\":\"no timeout\"}]}";

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* No script, no stylesheet or image from anywhere; every link and url() in the page. */
static void assert_offline(const char *page)
{
    assert_null(strstr(page, "<script"));
    assert_null(strstr(page, "<link"));
    assert_null(strstr(page, " src="));
    for (const char *p = strstr(page, "href=\""); p; p = strstr(p + 1, "href=\""))
        assert_true(p[6] == '#');
    for (const char *p = strstr(page, "url("); p; p = strstr(p + 1, "url("))
        assert_true(p[4] == '#');
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

static char *build_page(const struct report_docset *set)
{
    struct buf b;
    buf_init(&b, 16u << 20);
    assert_int_equal(report_html_build(set, NULL, &b), 0);
    return buf_take(&b, NULL);
}

static void test_page_has_the_topology(void **state)
{
    (void)state;
    struct report_docset set;
    char err[512];
    json_t *doc = json_loads(topo_doc, 0, NULL);
    assert_non_null(doc);
    report_docset_init(&set);
    assert_int_equal(
        report_docset_add_json(&set, doc, "topo", "/x/topo/topology.json", NULL, err, sizeof(err)),
        0);
    assert_int_equal(
        report_docset_add_json(&set, doc, "topo", "/y/topo/topology.json", NULL, err, sizeof(err)),
        0);
    json_decref(doc);
    assert_int_equal(set.docs[0].kind, REPORT_DOC_TOPOLOGY);
    assert_int_equal(report_docset_count(&set, REPORT_DOC_TOPOLOGY), 2);
    assert_int_equal(set.docs[0].topo->n_nodes, 3);
    char *page = build_page(&set);

    assert_offline(page);
    assert_non_null(strstr(page, "2 topologies: topo, topo#2"));
    assert_non_null(strstr(page, "<a href=\"#topo1\">Topology topo</a>"));
    assert_non_null(strstr(page, "<section id=\"topo1\"><h2>Topology: topo</h2>"));
    assert_non_null(strstr(page, "<section id=\"topo2\">"));
    assert_non_null(strstr(page, "<svg id=\"topo1-graph\" class=\"ts-topology\""));
    assert_non_null(strstr(page, "<svg id=\"topo2-graph\" class=\"ts-topology\""));
    /* Each picture's arrow is its own, so two pictures share the page. */
    assert_int_equal(count(page, "<marker id=\"topo1-graph-arr\""), 1);
    assert_int_equal(count(page, "url(#topo2-graph-arr)"), 2);
    /* Layer colours, a p99 label, a dashed traced-only node, a red failing edge. */
    assert_non_null(strstr(page, "fill=\"#e15759\""));
    assert_non_null(strstr(page, "fill=\"#59a14f\""));
    assert_non_null(strstr(page, ">p99 1170 ms</text>"));
    assert_non_null(strstr(page, "stroke=\"#d62728\""));
    /* The flags table: one row per flag, the message escaped. */
    const char *flags = strstr(page, "<table id=\"topo1-flags\">");
    assert_non_null(flags);
    const char *end = strstr(flags, "</table>");
    char *table = strndup(flags, (size_t)(end - flags));
    assert_int_equal(count(table, "<tr class=\"high\">"), 1);
    assert_int_equal(count(table, "<tr class=\"medium\">"), 1);
    assert_non_null(strstr(table, "timeout_below_p99"));
    assert_non_null(strstr(table, "&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert_non_null(strstr(table, "llm &lt;b&gt;x&lt;/b&gt;"));
    free(table);
    assert_null(strstr(page, "<b>x</b>"));
    /* No run: no overview and no distributions. */
    assert_null(strstr(page, "id=\"overview\""));
    free(page);
    report_docset_release(&set);
}

static void test_docset_finds_and_checks_topologies(void **state)
{
    (void)state;
    char root[] = "/tmp/ts-test-html-topo-XXXXXX", p[512], err[1024];
    struct report_docset set;
    assert_non_null(mkdtemp(root));
    snprintf(p, sizeof(p), "%s/topo", root);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/topo/topology.json", root);
    write_text(p, topo_doc);
    snprintf(p, sizeof(p), "%s/bad", root);
    assert_int_equal(mkdir(p, 0755), 0);

    report_docset_init(&set);
    /* The file, the directory holding it, the directory of directories. */
    snprintf(p, sizeof(p), "%s/topo/topology.json", root);
    assert_int_equal(report_docset_add_path(&set, p, err, sizeof(err)), 0);
    snprintf(p, sizeof(p), "%s/topo", root);
    assert_int_equal(report_docset_add_path(&set, p, err, sizeof(err)), 0);
    assert_int_equal(report_docset_add_path(&set, root, err, sizeof(err)), 0);
    assert_int_equal(set.n, 3);
    for (size_t i = 0; i < set.n; i++)
        assert_int_equal(set.docs[i].kind, REPORT_DOC_TOPOLOGY);
    assert_string_equal(set.docs[0].name, "topo");
    assert_string_equal(set.docs[1].name, "topo#2");

    /* A hostile one: refused, its file and field named, the set as it was. */
    snprintf(p, sizeof(p), "%s/bad/topology.json", root);
    char *bad = strdup(topo_doc);
    char *at = strstr(bad, "\"layer\":\"vector\"");
    memcpy(at, "\"layer\":\"VECTOR\"", 16);
    write_text(p, bad);
    free(bad);
    snprintf(p, sizeof(p), "%s/bad", root);
    assert_int_equal(report_docset_add_path(&set, p, err, sizeof(err)), TS_PARSE);
    assert_non_null(strstr(err, "bad/topology.json: nodes[2].layer: expected gateway"));
    assert_int_equal(set.n, 3);
    /* Neither a result nor a topology. */
    snprintf(p, sizeof(p), "%s/bad/topology.json", root);
    write_text(p, "{\"tokenstorm_scan\":1}");
    assert_int_equal(report_docset_add_path(&set, p, err, sizeof(err)), TS_PARSE);
    assert_non_null(strstr(err, "not a tokenstorm result, sweep, mirror or topology"));
    report_docset_release(&set);

    snprintf(p, sizeof(p), "rm -rf '%s'", root);
    assert_int_equal(system(p), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_page_has_the_topology),
        cmocka_unit_test(test_docset_finds_and_checks_topologies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
