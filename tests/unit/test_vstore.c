/*
 * test_vstore.c - the simulator's vector store (sim/vstore.h): the built-in
 * passages, ranking, result counts and thresholds, the passages file, the
 * search request and the response page. The endpoint itself is tested
 * against the real binary in tests/integration/sim_rag.test.mjs.
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

#include "base/alloc.h"
#include "sim/vstore.h"

static struct vstore *builtin(void)
{
    struct vstore *v = NULL;
    assert_int_equal(vstore_new_builtin(VSTORE_DIMS_DEFAULT, &v), 0);
    assert_non_null(v);
    return v;
}

static size_t search(const struct vstore *v, const char *q, size_t max, double threshold,
                     struct vstore_hit *hits)
{
    size_t n = 99;
    assert_int_equal(vstore_search(v, q, strlen(q), max, threshold, hits, &n), 0);
    return n;
}

static void test_builtin_passages(void **state)
{
    (void)state;
    struct vstore *v = builtin();
    assert_int_equal(vstore_count(v), VSTORE_BUILTIN_DOCS);
    const struct vstore_doc *d = vstore_doc(v, 0);
    assert_string_equal(d->file_id, "file-sim000");
    assert_string_equal(d->filename, "volcanoes-1.txt");
    assert_string_equal(d->attributes, "{\"topic\":\"volcanoes\"}");
    assert_string_equal(d->text,
                        "An introduction to volcanoes: the basics start with magma and lava.");
    assert_int_equal(d->text_len, strlen(d->text));
    d = vstore_doc(v, 37); /* topic 3 (coffee), template 7, keywords 1 and 2 */
    assert_string_equal(d->file_id, "file-sim037");
    assert_string_equal(d->filename, "coffee-8.txt");
    assert_string_equal(d->text,
                        "Numbers worth knowing about coffee: beans can vary a lot, and so can "
                        "caffeine.");
    assert_string_equal(vstore_builtin_topic(199), "the Olympic Games");
    assert_null(vstore_builtin_topic(200));
    assert_null(vstore_doc(v, 200));
    vstore_free(v);
    vstore_free(NULL);
    assert_int_equal(vstore_new_builtin(0, &v), -EINVAL);
    assert_null(v);
}

/* A question about a topic ranks that topic's passages first. */
static void test_ranking_by_topic(void **state)
{
    (void)state;
    static const struct {
        const char *query;
        const char *topic;
    } cases[] = {
        {"How do volcanoes erupt?", "volcanoes"},
        {"what is photosynthesis", "photosynthesis"},
        {"tell me about black holes", "black holes"},
        {"best way to brew coffee", "coffee"},
        {"Who ruled the Roman Empire?", "the Roman Empire"},
        {"how does machine learning work", "machine learning"},
        {"do honeybees make honey", "honeybees"},
        {"electric cars battery range", "electric cars"},
        {"causes of climate change", "climate change"},
        {"amazon rainforest deforestation", "the Amazon rainforest"},
        {"olympic games history", "the Olympic Games"},
        {"how does the internet route packets", "the Internet"},
    };
    struct vstore *v = builtin();
    struct vstore_hit hits[VSTORE_MAX_RESULTS];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = search(v, cases[i].query, 10, 0, hits);
        assert_int_equal(n, 10);
        for (size_t k = 0; k < 3; k++) {
            if (strcmp(vstore_builtin_topic(hits[k].doc), cases[i].topic) != 0)
                fail_msg("'%s': hit %zu is about '%s'", cases[i].query, k,
                         vstore_builtin_topic(hits[k].doc));
        }
        for (size_t k = 1; k < n; k++)
            assert_true(hits[k - 1].score >= hits[k].score);
    }
    /* the best passages for two of them, by index */
    assert_int_equal(search(v, "amazon rainforest deforestation", 1, 0, hits), 1);
    assert_int_equal(hits[0].doc, 172);
    assert_true(hits[0].score > 0.55 && hits[0].score < 0.60);
    assert_int_equal(search(v, "do honeybees make honey", 1, 0, hits), 1);
    assert_int_equal(hits[0].doc, 69);
    /* a passage's own text finds it with a score of 1 */
    const struct vstore_doc *d = vstore_doc(v, 123);
    assert_int_equal(search(v, d->text, 3, 0, hits), 3);
    assert_int_equal(hits[0].doc, 123);
    assert_true(hits[0].score > 0.9999 && hits[0].score <= 1.0);
    assert_true(hits[1].score < 0.9);
    vstore_free(v);
}

static void test_max_results_and_threshold(void **state)
{
    (void)state;
    struct vstore *v = builtin();
    struct vstore_hit hits[VSTORE_MAX_RESULTS], top[VSTORE_MAX_RESULTS];
    const char *q = "what is photosynthesis";
    assert_int_equal(search(v, q, 50, 0, top), 50);
    assert_int_equal(search(v, q, 1, 0, hits), 1);
    assert_int_equal(hits[0].doc, top[0].doc);
    assert_int_equal(search(v, q, 7, 0, hits), 7);
    for (size_t k = 0; k < 7; k++) {
        assert_int_equal(hits[k].doc, top[k].doc); /* the same order, cut */
        assert_true(hits[k].score == top[k].score);
    }
    /* a threshold keeps exactly the hits at or above it */
    double th = (top[3].score + top[4].score) / 2;
    assert_int_equal(search(v, q, 50, th, hits), 4);
    for (size_t k = 0; k < 4; k++)
        assert_int_equal(hits[k].doc, top[k].doc);
    assert_int_equal(search(v, q, 50, top[0].score, hits), 1);
    assert_int_equal(search(v, q, 50, 1.0, hits), 0);
    /* a query sharing nothing with the passages */
    assert_int_equal(search(v, "", 5, 0.01, hits), 0);
    size_t n;
    assert_int_equal(vstore_search(v, q, strlen(q), 0, 0, hits, &n), -EINVAL);
    assert_int_equal(vstore_search(v, q, strlen(q), 51, 0, hits, &n), -EINVAL);
    vstore_free(v);
}

static int load(const char *text, struct vstore **v, char *err, size_t errlen)
{
    err[0] = '\0';
    return vstore_load_mem("kb.jsonl", text, strlen(text), 64, v, err, errlen);
}

static void test_load_jsonl_and_text(void **state)
{
    (void)state;
    char err[256];
    struct vstore *v;
    assert_int_equal(load("\n{\"text\":\"Paris is the capital of France.\",\"id\":\"file-a\","
                          "\"filename\":\"france.md\",\"attributes\":{\"lang\":\"en\",\"year\":"
                          "2024,\"ok\":true}}\r\n"
                          "   \n"
                          "{\"text\":\"Berlin is the capital of Germany.\"}\n",
                          &v, err, sizeof(err)),
                     0);
    assert_int_equal(vstore_count(v), 2);
    const struct vstore_doc *d = vstore_doc(v, 0);
    assert_string_equal(d->file_id, "file-a");
    assert_string_equal(d->filename, "france.md");
    assert_string_equal(d->attributes, "{\"lang\":\"en\",\"year\":2024,\"ok\":true}");
    d = vstore_doc(v, 1);
    assert_string_equal(d->file_id, "file-00002");
    assert_string_equal(d->filename, "passage-2.txt");
    assert_string_equal(d->attributes, "{}");
    struct vstore_hit hits[2];
    size_t n;
    assert_int_equal(vstore_search(v, "capital of Germany", 18, 2, 0, hits, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(hits[0].doc, 1);
    vstore_free(v);

    /* plain text: a passage a line; "{" later in the file is just text */
    assert_int_equal(
        load("alpha beta\n\ngamma delta\nalpha beta\n{not json}", &v, err, sizeof(err)), 0);
    assert_int_equal(vstore_count(v), 4);
    assert_string_equal(vstore_doc(v, 1)->text, "gamma delta");
    assert_string_equal(vstore_doc(v, 3)->text, "{not json}");
    assert_string_equal(vstore_doc(v, 3)->file_id, "file-00004");
    /* equal scores: the earlier passage first */
    assert_int_equal(vstore_search(v, "alpha beta", 10, 2, 0, hits, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(hits[0].doc, 0);
    assert_int_equal(hits[1].doc, 2);
    assert_true(hits[0].score == hits[1].score);
    vstore_free(v);
}

static void expect_error(const char *text, int rc, const char *msg)
{
    char err[256];
    struct vstore *v = (struct vstore *)1;
    assert_int_equal(load(text, &v, err, sizeof(err)), rc);
    assert_null(v);
    if (!strstr(err, msg))
        fail_msg("error '%s' lacks '%s'", err, msg);
}

static void test_load_errors(void **state)
{
    (void)state;
    expect_error("", TS_PARSE, "kb.jsonl: no passages");
    expect_error("\n  \n", TS_PARSE, "no passages");
    expect_error("{\"text\":\"a\"}\n{\"text\": }\n", TS_PARSE, "kb.jsonl:2:");
    expect_error("{\"text\":\"a\",\"txt\":\"b\"}", TS_PARSE, "kb.jsonl:1: unknown key \"txt\"");
    expect_error("{\"id\":\"x\"}", TS_PARSE, "kb.jsonl:1: \"text\" must be a string");
    expect_error("{\"text\":\"\"}", TS_PARSE, "\"text\" must be a string of 1 to");
    expect_error("{\"text\":\"a\",\"id\":7}", TS_PARSE, "\"id\" must be a string");
    expect_error("{\"text\":\"a\",\"attributes\":[1]}", TS_PARSE,
                 "\"attributes\" must be an object");
    expect_error("{\"text\":\"a\",\"attributes\":{\"k\":{}}}", TS_PARSE, "attribute \"k\" must be");
    expect_error("{\"text\":\"a\"}\n[1]\n", TS_PARSE, "kb.jsonl:2: expected a JSON object");
    expect_error("fine\nbad \xc3\x28 byte\n", TS_PARSE, "kb.jsonl:2:5: not valid UTF-8");

    char err[256];
    struct vstore *v;
    static const char nul[] = "a\0b";
    assert_int_equal(vstore_load_mem("kb", nul, 3, 64, &v, err, sizeof(err)), TS_PARSE);
    assert_non_null(strstr(err, "kb:1:2:"));
    assert_int_equal(vstore_load_mem("kb", "a", 1, 0, &v, err, sizeof(err)), -EINVAL);

    /* limits: a passage, a line, the number of passages */
    size_t big = VSTORE_MAX_TEXT + 1;
    char *s = malloc(VSTORE_MAX_LINE + 2);
    assert_non_null(s);
    memset(s, 'a', big);
    s[big] = '\0';
    expect_error(s, TS_TOOBIG, "kb.jsonl:1: passage longer than");
    memset(s, 'a', VSTORE_MAX_LINE + 1);
    s[VSTORE_MAX_LINE + 1] = '\0';
    expect_error(s, TS_TOOBIG, "kb.jsonl:1: line longer than");
    free(s);
    size_t n = (VSTORE_MAX_DOCS + 1) * 2;
    s = malloc(n + 1);
    assert_non_null(s);
    for (size_t i = 0; i < n; i += 2) {
        s[i] = 'x';
        s[i + 1] = '\n';
    }
    s[n] = '\0';
    expect_error(s, TS_TOOBIG, "kb.jsonl:10001: more than 10000 passages");
    s[n - 2] = '\0'; /* exactly the maximum */
    assert_int_equal(load(s, &v, err, sizeof(err)), 0);
    assert_int_equal(vstore_count(v), VSTORE_MAX_DOCS);
    vstore_free(v);
    free(s);
}

static void test_load_file(void **state)
{
    (void)state;
    char path[] = "/tmp/ts-vstore-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static const char text[] = "The tide comes in twice a day.\nThe Moon pulls the sea.\n";
    assert_int_equal(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
    close(fd);
    char err[256];
    struct vstore *v;
    assert_int_equal(vstore_load(path, 32, &v, err, sizeof(err)), 0);
    assert_int_equal(vstore_count(v), 2);
    vstore_free(v);
    unlink(path);
    assert_int_equal(vstore_load(path, 32, &v, err, sizeof(err)), -ENOENT);
    assert_null(v);
    assert_non_null(strstr(err, path));
}

static int parse(struct vstore_query *q, const char *body, struct openai_error *e)
{
    memset(e, 0, sizeof(*e));
    return vstore_query_parse(q, body, strlen(body), e);
}

static void test_query_parse(void **state)
{
    (void)state;
    struct vstore_query q;
    struct openai_error e;
    vstore_query_init(&q);
    assert_int_equal(parse(&q, "{\"query\":\"hello world\"}", &e), 0);
    assert_string_equal(q.text, "hello world");
    assert_int_equal(q.len, 11);
    assert_int_equal(q.max_results, 10);
    assert_true(q.score_threshold == 0);
    assert_int_equal(parse(&q,
                           "{\"query\":[\"a b\",\"c\"],\"max_num_results\":50,\"rewrite_query\":"
                           "true,\"filters\":{\"type\":\"eq\",\"key\":\"k\",\"value\":1},"
                           "\"ranking_options\":{\"ranker\":\"auto\",\"score_threshold\":0.25}}",
                           &e),
                     0);
    assert_string_equal(q.text, "a b c");
    assert_int_equal(q.max_results, 50);
    assert_true(q.score_threshold == 0.25);
    vstore_query_release(&q);

    static const struct {
        const char *body;
        int status;
        const char *param; /* "" = null */
        const char *msg;
    } bad[] = {
        {"{\"query\": ", 400, "", "We could not parse the JSON body"},
        {"[1]", 400, "", "expected an object"},
        {"{}", 400, "query", "Missing required parameter: 'query'."},
        {"{\"query\":null}", 400, "query", "Missing required parameter"},
        {"{\"query\":7}", 400, "query", "expected one of a string or array of strings"},
        {"{\"query\":\"\"}", 400, "query", "empty string"},
        {"{\"query\":[]}", 400, "query", "array of 1 to 16 strings, but got 0"},
        {"{\"query\":[\"a\",3]}", 400, "query.[1]", "Invalid type for 'query[1]'"},
        {"{\"query\":\"a\",\"max_num_results\":0}", 400, "max_num_results", "from 1 to 50"},
        {"{\"query\":\"a\",\"max_num_results\":51}", 400, "max_num_results", "but got 51"},
        {"{\"query\":\"a\",\"max_num_results\":\"5\"}", 400, "max_num_results", "an integer"},
        {"{\"query\":\"a\",\"rewrite_query\":1}", 400, "rewrite_query", "a boolean"},
        {"{\"query\":\"a\",\"filters\":[]}", 400, "filters", "an object"},
        {"{\"query\":\"a\",\"ranking_options\":1}", 400, "ranking_options", "an object"},
        {"{\"query\":\"a\",\"ranking_options\":{\"score_threshold\":1.5}}", 400,
         "ranking_options.score_threshold", "from 0 to 1"},
        {"{\"query\":\"a\",\"ranking_options\":{\"score_threshold\":\"x\"}}", 400,
         "ranking_options.score_threshold", "a decimal"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (parse(&q, bad[i].body, &e) != TS_PARSE)
            fail_msg("accepted %s", bad[i].body);
        assert_null(q.root);
        assert_null(q.text);
        assert_int_equal(e.status, bad[i].status);
        assert_string_equal(e.type, "invalid_request_error");
        assert_string_equal(e.param, bad[i].param);
        if (!strstr(e.message, bad[i].msg))
            fail_msg("%s: message '%s' lacks '%s'", bad[i].body, e.message, bad[i].msg);
    }
    char *big = malloc(VSTORE_MAX_QUERY + 64);
    assert_non_null(big);
    int n = snprintf(big, 32, "{\"query\":\"");
    memset(big + n, 'q', VSTORE_MAX_QUERY + 1);
    strcpy(big + n + VSTORE_MAX_QUERY + 1, "\"}");
    assert_int_equal(parse(&q, big, &e), TS_PARSE);
    assert_string_equal(e.code, "string_above_max_length");
    free(big);
    vstore_query_release(&q);
}

static void test_encode_page(void **state)
{
    (void)state;
    char err[256];
    struct vstore *v;
    assert_int_equal(load("{\"text\":\"Say \\\"hi\\\"\\nthere\",\"id\":\"file-q\",\"filename\":"
                          "\"q.txt\",\"attributes\":{\"n\":1}}\n{\"text\":\"other words\"}",
                          &v, err, sizeof(err)),
                     0);
    struct vstore_query q;
    struct openai_error e;
    vstore_query_init(&q);
    assert_int_equal(parse(&q, "{\"query\":[\"say hi\",\"there\"],\"max_num_results\":2}", &e), 0);
    struct vstore_hit hits[2];
    size_t n;
    assert_int_equal(vstore_search(v, q.text, q.len, q.max_results, 0, hits, &n), 0);
    struct buf b;
    buf_init(&b, 1 << 20);
    assert_int_equal(vstore_encode_page(&b, v, &q, hits, n), 0);
    json_error_t je;
    json_t *page = json_loadb(b.data, b.len, 0, &je);
    if (!page)
        fail_msg("not JSON: %s: %s", je.text, b.data);
    assert_string_equal(json_string_value(json_object_get(page, "object")),
                        "vector_store.search_results.page");
    json_t *sq = json_object_get(page, "search_query");
    assert_int_equal(json_array_size(sq), 2);
    assert_string_equal(json_string_value(json_array_get(sq, 1)), "there");
    assert_true(json_is_false(json_object_get(page, "has_more")));
    assert_true(json_is_null(json_object_get(page, "next_page")));
    json_t *data = json_object_get(page, "data");
    assert_int_equal(json_array_size(data), n);
    json_t *r0 = json_array_get(data, 0);
    assert_string_equal(json_string_value(json_object_get(r0, "file_id")), "file-q");
    assert_string_equal(json_string_value(json_object_get(r0, "filename")), "q.txt");
    double score = json_number_value(json_object_get(r0, "score"));
    assert_true(score > 0 && score <= 1);
    assert_true(score - hits[0].score < 0.0001 && hits[0].score - score < 0.0001);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(r0, "attributes"), "n")),
                     1);
    json_t *c = json_array_get(json_object_get(r0, "content"), 0);
    assert_string_equal(json_string_value(json_object_get(c, "type")), "text");
    assert_string_equal(json_string_value(json_object_get(c, "text")), "Say \"hi\"\nthere");
    json_decref(page);

    /* no hits: an empty data array; a full buffer leaves out as it was */
    buf_reset(&b);
    assert_int_equal(vstore_encode_page(&b, v, &q, hits, 0), 0);
    assert_non_null(strstr(b.data, "\"data\":[],\"has_more\":false"));
    struct buf small;
    buf_init(&small, 40);
    assert_int_equal(vstore_encode_page(&small, v, &q, hits, n), TS_TOOBIG);
    assert_int_equal(small.len, 0);
    buf_release(&small);
    buf_release(&b);
    vstore_query_release(&q);
    vstore_free(v);
}

/* Every allocation failure is reported and leaks nothing (ASan checks). */
static void test_alloc_failures(void **state)
{
    (void)state;
    static const char text[] =
        "{\"text\":\"one\",\"attributes\":{\"a\":\"b\"}}\n{\"text\":\"two\"}";
    int rc = -1;
    for (long k = 0; k < 200 && rc; k++) {
        char err[128];
        struct vstore *v = NULL;
        ts_alloc_fail_after(k);
        rc = vstore_load_mem("kb", text, sizeof(text) - 1, 16, &v, err, sizeof(err));
        ts_alloc_fail_after(-1);
        if (rc) {
            assert_int_equal(rc, -ENOMEM);
            assert_null(v);
        } else {
            assert_int_equal(vstore_count(v), 2);
            vstore_free(v);
        }
    }
    assert_int_equal(rc, 0);
    rc = -1;
    for (long k = 0; k < 2000 && rc; k++) {
        struct vstore *v = NULL;
        ts_alloc_fail_after(k);
        rc = vstore_new_builtin(16, &v);
        ts_alloc_fail_after(-1);
        if (rc) {
            assert_int_equal(rc, -ENOMEM);
            assert_null(v);
        } else {
            struct vstore_hit hits[5];
            size_t n;
            ts_alloc_fail_after(0);
            assert_int_equal(vstore_search(v, "coffee", 6, 5, 0, hits, &n), -ENOMEM);
            ts_alloc_fail_after(-1);
            vstore_free(v);
        }
    }
    assert_int_equal(rc, 0);
}

/* The file_ids of hits, as an answer lists them. */
static void ids_of(const struct vstore *v, const struct vstore_hit *hits, size_t n,
                   const char **ids)
{
    for (size_t i = 0; i < n; i++)
        ids[i] = vstore_doc(v, hits[i].doc)->file_id;
}

/* recall@k against the exact ranking: vstore_search's own answer is 1, a
 * worse one is hits / k; order inside the k, unknown and repeated ids. */
static void test_recall(void **state)
{
    (void)state;
    struct vstore *v = builtin();
    const char *q = "volcanoes magma lava eruptions";
    struct vstore_hit hits[20];
    size_t n = search(v, q, 20, 0, hits), k = 0;
    assert_int_equal(n, 20);
    const char *ids[20];
    ids_of(v, hits, n, ids);
    double r = -1;
    assert_int_equal(vstore_recall(v, q, strlen(q), ids, 5, 5, &r, &k), 0);
    assert_true(r == 1.0);
    assert_int_equal(k, 5);
    /* the same five in reverse order: still all of the true five */
    const char *rev[5] = {ids[4], ids[3], ids[2], ids[1], ids[0]};
    assert_int_equal(vstore_recall(v, q, strlen(q), rev, 5, 5, &r, &k), 0);
    assert_true(r == 1.0);
    /* two of the true five replaced by the 19th and 20th (strictly worse scores) */
    assert_true(hits[18].score < hits[4].score - 1e-3);
    const char *worse[5] = {ids[0], ids[19], ids[2], ids[18], ids[4]};
    assert_int_equal(vstore_recall(v, q, strlen(q), worse, 5, 5, &r, &k), 0);
    assert_float_equal(r, 0.6, 1e-12);
    /* an id the store does not hold and a repeated one are misses; NULL is skipped */
    const char *odd[6] = {"file-nope", ids[0], ids[0], NULL, ids[1], ids[2]};
    assert_int_equal(vstore_recall(v, q, strlen(q), odd, 6, 3, &r, &k), 0);
    assert_float_equal(r, 2.0 / 3.0, 1e-12); /* judged: nope, ids[0], ids[1] */
    /* fewer answers than k */
    assert_int_equal(vstore_recall(v, q, strlen(q), ids, 2, 4, &r, &k), 0);
    assert_float_equal(r, 0.5, 1e-12);
    assert_int_equal(vstore_recall(v, q, strlen(q), NULL, 0, 4, &r, &k), 0);
    assert_true(r == 0.0);
    assert_int_equal(vstore_recall(v, q, strlen(q), ids, 5, 0, &r, &k), -EINVAL);
    assert_int_equal(vstore_recall(v, q, strlen(q), ids, 5, VSTORE_MAX_RESULTS + 1, &r, &k),
                     -EINVAL);
    assert_int_equal(vstore_recall(v, q, strlen(q), NULL, 2, 4, &r, &k), -EINVAL);
    vstore_free(v);
}

/* Ties with the k-th best count as hits; k is cut to the passages held. */
static void test_recall_ties(void **state)
{
    (void)state;
    char err[256];
    struct vstore *v = NULL;
    /* b, c and d are the same text: tied for the second place behind a */
    const char *text = "{\"id\":\"a\",\"text\":\"red apple pie\"}\n"
                       "{\"id\":\"b\",\"text\":\"red apple\"}\n"
                       "{\"id\":\"c\",\"text\":\"red apple\"}\n"
                       "{\"id\":\"d\",\"text\":\"red apple\"}\n"
                       "{\"id\":\"e\",\"text\":\"blue whale song\"}\n";
    assert_int_equal(vstore_load_mem("kb", text, strlen(text), 64, &v, err, sizeof(err)), 0);
    const char *q = "red apple pie";
    double r;
    size_t k;
    const char *tied[2] = {"a", "d"}; /* the exact ranking's second is b; d ties with it */
    assert_int_equal(vstore_recall(v, q, strlen(q), tied, 2, 2, &r, &k), 0);
    assert_true(r == 1.0);
    const char *miss[2] = {"a", "e"};
    assert_int_equal(vstore_recall(v, q, strlen(q), miss, 2, 2, &r, &k), 0);
    assert_float_equal(r, 0.5, 1e-12);
    const char *all[5] = {"e", "d", "c", "b", "a"};
    assert_int_equal(vstore_recall(v, q, strlen(q), all, 5, 10, &r, &k), 0);
    assert_int_equal(k, 5);
    assert_true(r == 1.0);
    vstore_free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_passages),
        cmocka_unit_test(test_ranking_by_topic),
        cmocka_unit_test(test_max_results_and_threshold),
        cmocka_unit_test(test_load_jsonl_and_text),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_query_parse),
        cmocka_unit_test(test_encode_page),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_recall),
        cmocka_unit_test(test_recall_ties),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
