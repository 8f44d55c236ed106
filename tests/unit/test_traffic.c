/*
 * test_traffic.c - scenario/traffic.h: the requests of a vector-search
 * class (the query row an iteration searches, the body with k, nprobe,
 * ef_search and the class's overrides, the URL and the query index kept for
 * the recall); a RAG flow's retrieval step and its answer step (the
 * reference given to the answer only, the recall the answer followed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "scenario/scenario.h"
#include "scenario/traffic.h"
#include "sim/vstore.h"

static const char scn_text[] = "classes:\n"
                               "  - name: v\n"
                               "    endpoint: vector-search\n"
                               "    users: 1\n"
                               "    body: {nprobe: 9, filter: {tag: \"a\\\"b\"}, vector: 0}\n"
                               "    vector: {k: 3, nprobe: 4, ef_search: 32}\n"
                               "  - name: w\n"
                               "    endpoint: vector-search\n"
                               "    users: 1\n";

/* Iteration session_no of class k: its request (1 ready, then none). */
static json_t *next_body(const struct traffic *t, uint64_t session_no, struct traffic_req *rq)
{
    struct traffic_actor *a = NULL;
    char err[256] = "";
    assert_int_equal(traffic_actor_new(t, 0, &a), 0);
    assert_int_equal(traffic_begin(a, session_no, NULL), 0);
    int rc = traffic_next(a, NULL, rq, err, sizeof(err));
    if (rc != 1)
        fail_msg("traffic_next: %d %s", rc, err);
    struct traffic_req none;
    assert_int_equal(traffic_next(a, NULL, &none, err, sizeof(err)), 0);
    json_error_t je;
    json_t *body = json_loadb(rq->item.body, rq->item.body_len, 0, &je);
    if (!body)
        fail_msg("body %s: %s", rq->item.body, je.text);
    traffic_done(a, rq, true, NULL, 0, "{}", 2);
    traffic_actor_free(a);
    return body;
}

static void test_vector_requests(void **state)
{
    (void)state;
    struct scenario s;
    struct traffic t[2];
    char err[512] = "";
    if (scenario_load_mem(&s, "t.yaml", NULL, scn_text, sizeof(scn_text) - 1, err, sizeof(err)))
        fail_msg("%s", err);
    for (uint32_t k = 0; k < 2; k++)
        if (traffic_init(&t[k], &s, k, "http://127.0.0.1:9/v1", "m", NULL, err, sizeof(err)))
            fail_msg("%s", err);
    float rows[3 * 2] = {0.5f, -1.25f, 3.0f, 0.1f, 1e-7f, -2.0f};
    struct vecset q = {.n = 3, .dim = 2, .v = rows};
    t[0].vectors = t[1].vectors = &q;

    struct traffic_req rq;
    json_t *b = next_body(&t[0], 4, &rq); /* iteration 4 searches row 4 mod 3 = 1 */
    assert_int_equal(rq.item.index, 1);
    assert_false(rq.item.stream);
    assert_string_equal(rq.url, "http://127.0.0.1:9/v1/vectors/search");
    assert_true(rq.openai);
    json_t *v = json_object_get(b, "vector");
    assert_int_equal(json_array_size(v), 2);
    assert_true((float)json_number_value(json_array_get(v, 0)) == 3.0f);
    assert_true((float)json_number_value(json_array_get(v, 1)) == 0.1f);
    assert_int_equal(json_integer_value(json_object_get(b, "k")), 3);
    assert_int_equal(json_integer_value(json_object_get(b, "nprobe")), 9); /* the body wins */
    assert_int_equal(json_integer_value(json_object_get(b, "ef_search")), 32);
    assert_string_equal(json_string_value(json_object_get(json_object_get(b, "filter"), "tag")),
                        "a\"b");
    assert_int_equal(json_object_size(b), 5); /* the body's "vector" does not replace the query */
    json_decref(b);
    traffic_req_release(&rq);

    b = next_body(&t[1], 2, &rq); /* defaults: k 10, no breadth */
    assert_int_equal(rq.item.index, 2);
    assert_true((float)json_number_value(json_array_get(json_object_get(b, "vector"), 0)) == 1e-7f);
    assert_int_equal(json_integer_value(json_object_get(b, "k")), 10);
    assert_null(json_object_get(b, "nprobe"));
    assert_null(json_object_get(b, "ef_search"));
    json_decref(b);
    traffic_req_release(&rq);
    assert_string_equal(traffic_step_name(&t[1], 0), "vector-search");

    /* no queries lent: the iteration fails with a reason */
    t[1].vectors = NULL;
    struct traffic_actor *a = NULL;
    assert_int_equal(traffic_actor_new(&t[1], 0, &a), 0);
    assert_int_equal(traffic_begin(a, 0, NULL), 0);
    assert_true(traffic_next(a, NULL, &rq, err, sizeof(err)) < 0);
    assert_string_equal(err, "no query vectors");
    traffic_actor_free(a);

    for (int k = 0; k < 2; k++)
        traffic_release(&t[k]);
    scenario_release(&s);
}

/* A page of the built-in store's top n for query q, as the simulator answers. */
static char *store_page(const char *q, size_t n)
{
    struct vstore *v = NULL;
    assert_int_equal(vstore_new_builtin(VSTORE_DIMS_DEFAULT, &v), 0);
    struct vstore_query vq;
    struct openai_error e;
    char body[256];
    snprintf(body, sizeof(body), "{\"query\":\"%s\"}", q);
    vstore_query_init(&vq);
    assert_int_equal(vstore_query_parse(&vq, body, strlen(body), &e), 0);
    struct vstore_hit hits[8];
    size_t got;
    assert_int_equal(vstore_search(v, q, strlen(q), n, 0, hits, &got), 0);
    struct buf out;
    buf_init(&out, 1 << 20);
    assert_int_equal(vstore_encode_page(&out, v, &vq, hits, got), 0);
    char *s = strndup(out.data, out.len);
    buf_release(&out);
    vstore_query_release(&vq);
    vstore_free(v);
    return s;
}

static void test_rag_flow(void **state)
{
    (void)state;
    char dir[] = "/tmp/ts-traffic-XXXXXX", path[64], err[512] = "";
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/p.jsonl", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"prompt\": \"volcanoes magma\", \"reference\": \"lava flows\"}\n", f);
    fclose(f);
    char text[1024];
    snprintf(text, sizeof(text),
             "classes:\n  - name: rag\n    users: 1\n    prompts_file: %s\n    flow:\n"
             "      steps:\n"
             "        - {name: search, kind: http, url: \"{{target}}/vector_stores/v/search\",\n"
             "           body: {query: \"{{prompt}}\", max_num_results: 2}, retrieval: true,\n"
             "           capture: {passage: /data/0/content/0/text}}\n"
             "        - {name: answer, kind: chat, depends_on: [search],\n"
             "           body: {messages: [{role: user, content: \"{{passage}}\"}]}}\n",
             path);
    struct scenario s;
    struct traffic t;
    if (scenario_load_mem(&s, "t.yaml", NULL, text, strlen(text), err, sizeof(err)) ||
        traffic_init(&t, &s, 0, "http://127.0.0.1:9/v1", "m", NULL, err, sizeof(err)))
        fail_msg("%s", err);
    struct traffic_actor *a = NULL;
    struct traffic_req rq, none;
    struct traffic_recall led[4];
    double recall = -1;
    uint32_t k = 0;
    assert_int_equal(traffic_actor_new(&t, 0, &a), 0);
    assert_int_equal(traffic_begin(a, 0, NULL), 0);
    assert_int_equal(traffic_next(a, NULL, &rq, err, sizeof(err)), 1);
    assert_int_equal(rq.step, 0);
    assert_false(rq.answer);
    assert_null(rq.item.reference);
    assert_int_equal(traffic_next(a, NULL, &none, err, sizeof(err)), 0);
    /* the store's own top 2 for the query: recall 1 */
    char *page = store_page("volcanoes magma", 2);
    assert_int_equal(traffic_retrieval_done(a, &rq, rq.item.body, rq.item.body_len, page,
                                            strlen(page), &recall, &k),
                     1);
    assert_true(recall == 1.0);
    assert_int_equal(k, 2);
    traffic_done(a, &rq, true, NULL, 0, page, strlen(page));
    traffic_req_release(&rq);
    assert_int_equal(traffic_next(a, NULL, &rq, err, sizeof(err)), 1);
    assert_int_equal(rq.step, 1);
    assert_true(rq.answer);
    assert_string_equal(rq.item.reference, "lava flows");
    assert_int_equal(traffic_answer_recalls(a, 1, led, 4), 1);
    assert_int_equal(led[0].step, 0);
    assert_int_equal(led[0].k, 2);
    assert_true(led[0].recall == 1.0);
    assert_int_equal(traffic_answer_recalls(a, 0, led, 4), 0); /* not an answer step */
    traffic_done(a, &rq, true, "lava", 4, NULL, 0);
    traffic_req_release(&rq);
    /* the next iteration forgets the last one's recall */
    assert_int_equal(traffic_begin(a, 1, NULL), 0);
    assert_int_equal(traffic_next(a, NULL, &rq, err, sizeof(err)), 1);
    assert_int_equal(traffic_answer_recalls(a, 1, led, 4), 0);
    traffic_req_release(&rq);
    traffic_actor_free(a);
    free(page);
    traffic_release(&t);
    scenario_release(&s);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vector_requests),
        cmocka_unit_test(test_rag_flow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
