/* app/run_vector.c: --vector-api templates and presets, the target URL, the options. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "app/run_vector.c"

/* The body a template makes around a vector [1,2]. */
static json_t *body_of(const struct run_vector *rv)
{
    char text[4096];
    snprintf(text, sizeof(text), "%s[1,2]%s", rv->api.prefix, rv->api.suffix);
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    return j;
}

static void test_presets(void **state)
{
    struct run_vector_opts o;
    struct run_vector rv;
    char err[512], url[512];
    run_vector_opts_init(&o);
    o.k = 5;
    o.ef_search = 128;
    o.has_ef_search = true;
    o.collection = "docs";

    memset(&rv, 0, sizeof(rv));
    o.api = "qdrant";
    assert_int_equal(run_vector_api_load(&o, &rv, err, sizeof(err)), 0);
    assert_string_equal(rv.api.path, "/collections/docs/points/search");
    assert_string_equal(rv.api.results, "/result");
    json_t *b = body_of(&rv);
    assert_int_equal(json_array_size(json_object_get(b, "vector")), 2);
    assert_int_equal(json_integer_value(json_object_get(b, "limit")), 5);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(b, "params"), "hnsw_ef")),
                     128);
    json_decref(b);
    assert_int_equal(run_vector_api_url(&rv, "http://db:6333/v1", url, sizeof(url)), 0);
    assert_string_equal(url, "http://db:6333/collections/docs/points/search");
    run_vector_release(&rv);

    o.api = "milvus";
    assert_int_equal(run_vector_api_load(&o, &rv, err, sizeof(err)), 0);
    b = body_of(&rv);
    assert_string_equal(json_string_value(json_object_get(b, "collectionName")), "docs");
    assert_int_equal(json_array_size(json_array_get(json_object_get(b, "data"), 0)), 2);
    /* nprobe not given: null */
    assert_true(json_is_null(
        json_object_get(json_object_get(json_object_get(b, "searchParams"), "params"), "nprobe")));
    json_decref(b);
    run_vector_release(&rv);

    o.api = "chroma";
    assert_int_equal(run_vector_api_load(&o, &rv, err, sizeof(err)), 0);
    assert_string_equal(rv.api.path, "/api/v1/collections/docs/query");
    assert_string_equal(rv.api.results, "/ids/0");
    assert_string_equal(rv.api.id, "");
    run_vector_release(&rv);

    o.api = "pinecone";
    assert_int_equal(run_vector_api_load(&o, &rv, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "expected tokenstorm, qdrant, milvus, chroma or @FILE"));
}

static void test_template_file(void **state)
{
    char path[] = "/tmp/ts_vapi_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *t = "{\"path\":\"/v1/vectors/search\",\"body\":{\"k\":\"{{k}}\",\"q\":{\"v\":"
                    "\"{{vector}}\"}},\"results\":\"/data\",\"id\":\"/id\"}";
    assert_int_equal(write(fd, t, strlen(t)), (ssize_t)strlen(t));
    close(fd);
    char api[64];
    snprintf(api, sizeof(api), "@%s", path);
    struct run_vector_opts o;
    struct run_vector rv;
    char err[512];
    run_vector_opts_init(&o);
    o.api = api;
    memset(&rv, 0, sizeof(rv));
    assert_int_equal(run_vector_api_load(&o, &rv, err, sizeof(err)), 0);
    json_t *b = body_of(&rv);
    assert_int_equal(json_integer_value(json_object_get(b, "k")), 10);
    assert_int_equal(json_array_size(json_object_get(json_object_get(b, "q"), "v")), 2);
    json_decref(b);
    run_vector_release(&rv);
    /* two vectors, none, a bad pointer, bad JSON: refused with the file named */
    const char *bad[] = {
        "{\"path\":\"/x\",\"body\":[\"{{vector}}\",\"{{vector}}\"],\"results\":\"\",\"id\":\"\"}",
        "{\"path\":\"/x\",\"body\":{},\"results\":\"/r\",\"id\":\"/id\"}",
        "{\"path\":\"/x\",\"body\":[\"{{vector}}\"],\"results\":\"r\",\"id\":\"/id\"}",
        "{\"path\":\"x\",\"body\":[\"{{vector}}\"],\"results\":\"/r\",\"id\":\"/id\"}",
        "{\"path\":",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        FILE *f = fopen(path, "w");
        fputs(bad[i], f);
        fclose(f);
        err[0] = 0;
        assert_true(run_vector_api_load(&o, &rv, err, sizeof(err)) < 0);
        assert_non_null(strstr(err, path));
        run_vector_release(&rv);
    }
    unlink(path);
}

/* An embeddings answer: rows placed by "index", one dimension, finite values;
 * base64 vectors decoded; what does not fit is refused with the reason. */
static void test_embed_answer(void **state)
{
    (void)state;
    struct vecset out = {.n = 4};
    char err[300] = "";
    const char *a = "{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"index\":1,"
                    "\"embedding\":[3,4]},{\"object\":\"embedding\",\"index\":0,"
                    "\"embedding\":[1,2]}],\"model\":\"m\"}";
    assert_int_equal(vector_embed_answer(a, strlen(a), 2, 2, &out, err, sizeof(err)), 0);
    assert_int_equal(out.dim, 2);
    assert_true(out.v[4] == 1 && out.v[5] == 2 && out.v[6] == 3 && out.v[7] == 4);
    /* base64 of the float32s 0.5 and -1 */
    const char *b = "{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"index\":0,"
                    "\"embedding\":\"AAAAPwAAgL8=\"}]}";
    assert_int_equal(vector_embed_answer(b, strlen(b), 0, 1, &out, err, sizeof(err)), 0);
    assert_true(out.v[0] == 0.5f && out.v[1] == -1.0f);
    static const struct {
        const char *body, *err;
    } bad[] = {
        {"{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"index\":0,"
         "\"embedding\":[1,2,3]}]}",
         "data[0]: expected an embedding of 2 dimensions (1..4096, as the first) with an index "
         "below 1, got 3 dimensions at index 0"},
        {"{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"index\":5,"
         "\"embedding\":[1,2]}]}",
         "data[0]: expected an embedding of 2 dimensions (1..4096, as the first) with an index "
         "below 1, got 2 dimensions at index 5"},
        {"{\"object\":\"list\",\"data\":[]}", "expected 1 embeddings in \"data\", got 0"},
        {"{\"choices\":[]}", "expected 1 embeddings in \"data\", got 0"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(
            vector_embed_answer(bad[i].body, strlen(bad[i].body), 0, 1, &out, err, sizeof(err)),
            TS_PARSE);
        assert_string_equal(err, bad[i].err);
    }
    assert_int_equal(vector_embed_answer("{", 1, 0, 1, &out, err, sizeof(err)), TS_PARSE);
    assert_non_null(strstr(err, "not JSON"));
    vecset_release(&out);
    /* an empty embedding (base64 "") is not a vector of 0 dimensions (fuzz_vector_embed) */
    struct vecset none = {.n = 1};
    static const char empty[] = "{\"object\":\"list\",\"data\":[{\"object\":\"embedding\","
                                "\"index\":0,\"embedding\":\"\"}]}";
    assert_int_equal(vector_embed_answer(empty, strlen(empty), 0, 1, &none, err, sizeof(err)),
                     TS_PARSE);
    assert_non_null(strstr(err, "got 0 dimensions"));
    vecset_release(&none);
    assert_true(vector_embed_is_spec("text:q.jsonl"));
    assert_false(vector_embed_is_spec("gen:10"));
    assert_false(vector_embed_is_spec(NULL));

    /* without a target to embed them, text queries are refused by name */
    struct run_vector_opts o;
    struct run_vector rv;
    run_vector_opts_init(&o);
    o.data = "gen:100x4";
    o.queries = "text:q.jsonl";
    assert_int_equal(run_vector_prepare(&o, &rv, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "--vector-queries: text queries need a target with an embeddings "
                             "endpoint (not a PostgreSQL target or --vector-api template)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_presets),
        cmocka_unit_test(test_embed_answer),
        cmocka_unit_test(test_template_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
