#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

/* h2o style: the static functions (permute, synth_append) are reachable. */
#include "../../src/workload/workload.c"

static size_t count(const char *s)
{
    return text_count_tokens(s, strlen(s));
}

static void init_ok(struct workload *w, const struct workload_cfg *cfg)
{
    char err[512] = "";
    int rc = workload_init(w, cfg, err, sizeof(err));
    if (rc)
        fail_msg("workload_init: %d %s", rc, err);
}

static void init_fails(const struct workload_cfg *cfg, int want_rc, const char *want_msg)
{
    struct workload w;
    char err[512] = "";
    int rc = workload_init(&w, cfg, err, sizeof(err));
    if (rc != want_rc || strcmp(err, want_msg) != 0)
        fail_msg("workload_init: %d '%s', want %d '%s'", rc, err, want_rc, want_msg);
}

static json_t *item_json(const struct workload *w, uint64_t index, struct work_item *it)
{
    assert_int_equal(workload_item(w, index, it), 0);
    assert_int_equal(strlen(it->body), it->body_len);
    json_error_t je;
    json_t *j = json_loads(it->body, 0, &je);
    if (!j)
        fail_msg("body %llu is not JSON: %s: %s", (unsigned long long)index, je.text, it->body);
    return j;
}

/* The content of the last message of a chat body. */
static const char *last_content(const json_t *body)
{
    const json_t *msgs = json_object_get(body, "messages");
    assert_true(json_is_array(msgs));
    const json_t *c = json_object_get(json_array_get(msgs, json_array_size(msgs) - 1), "content");
    assert_true(json_is_string(c));
    return json_string_value(c);
}

static void test_chat_body(void **state)
{
    struct workload_cfg cfg;
    workload_cfg_init(&cfg);
    cfg.model = "m";
    cfg.input_tokens = "fixed:50";
    cfg.output_tokens = "77";
    struct workload w;
    init_ok(&w, &cfg);
    struct work_item it;
    json_t *j = item_json(&w, 0, &it);
    assert_string_equal(json_string_value(json_object_get(j, "model")), "m");
    const char *content = last_content(j);
    assert_int_equal(strncmp(content, "[r0] ", 5), 0);
    assert_int_equal(count(content), 50);
    assert_int_equal(json_array_size(json_object_get(j, "messages")), 1);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(j, "messages"), 0), "role")),
                        "user");
    assert_int_equal(json_integer_value(json_object_get(j, "max_tokens")), 77);
    assert_true(json_is_true(json_object_get(j, "ignore_eos")));
    assert_true(json_is_true(json_object_get(j, "stream")));
    assert_true(
        json_is_true(json_object_get(json_object_get(j, "stream_options"), "include_usage")));
    assert_int_equal(json_object_size(j), 6);
    /* the key order is part of the contract (byte-identical bodies) */
    const char *head = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"[r0] ";
    assert_int_equal(strncmp(it.body, head, strlen(head)), 0);
    const char *tail = "\"}],\"max_tokens\":77,\"ignore_eos\":true,\"stream\":true,"
                       "\"stream_options\":{\"include_usage\":true}}";
    assert_string_equal(it.body + it.body_len - strlen(tail), tail);
    assert_int_equal(it.prompt_tokens, 50 + 7); /* + message 3 + "user" 1 + reply 3 */
    assert_int_equal(it.max_tokens, 77);
    assert_true(it.stream);
    assert_null(it.reference);
    assert_int_equal(it.index, 0);
    json_decref(j);
    work_item_release(&it);
    assert_null(it.body);
    work_item_release(NULL);
    workload_release(&w);
}

static void test_same_seed_same_bodies(void **state)
{
    enum { N = 200 };
    struct workload_cfg cfg;
    workload_cfg_init(&cfg);
    cfg.model = "m";
    cfg.input_tokens = "uniform:10-300";
    cfg.output_tokens = "uniform:1-500";
    cfg.seed = 42;
    struct workload a, b, c;
    init_ok(&a, &cfg);
    init_ok(&b, &cfg);
    cfg.seed = 43;
    init_ok(&c, &cfg);
    char *bodies[N];
    size_t same_as_other_seed = 0;
    for (uint64_t i = 0; i < N; i++) {
        struct work_item x, y, z;
        /* build b's items in reverse order: an item depends on its index only */
        assert_int_equal(workload_item(&a, i, &x), 0);
        assert_int_equal(workload_item(&b, N - 1 - i, &y), 0);
        assert_int_equal(workload_item(&c, i, &z), 0);
        bodies[i] = x.body;
        x.body = NULL;
        if (strcmp(bodies[i], z.body) == 0)
            same_as_other_seed++;
        if (i >= N / 2) {
            assert_string_equal(y.body, bodies[N - 1 - i]);
        }
        work_item_release(&y);
        work_item_release(&z);
    }
    for (uint64_t i = N / 2; i < N; i++) {
        struct work_item y;
        assert_int_equal(workload_item(&b, i, &y), 0);
        assert_string_equal(y.body, bodies[i]);
        work_item_release(&y);
    }
    assert_int_equal(same_as_other_seed, 0);
    for (size_t i = 0; i < N; i++)
        for (size_t k = i + 1; k < N; k++)
            assert_int_not_equal(strcmp(bodies[i], bodies[k]), 0);
    for (size_t i = 0; i < N; i++)
        ts_free(bodies[i]);
    workload_release(&a);
    workload_release(&b);
    workload_release(&c);
}

static void test_fixed_lengths_exact(void **state)
{
    static const uint32_t lens[] = {1, 2, 3, 4, 5, 6, 7, 10, 31, 100, 1000, 4096, 20000};
    static const uint64_t indexes[] = {0, 1, 9, 10, 999, 1000, 123456789012ull, UINT64_MAX};
    for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
        char spec[32];
        snprintf(spec, sizeof(spec), "fixed:%u", lens[l]);
        struct workload_cfg cfg;
        workload_cfg_init(&cfg);
        cfg.input_tokens = spec;
        cfg.system_prompt = "You are terse.";
        struct workload w;
        init_ok(&w, &cfg);
        for (size_t k = 0; k < sizeof(indexes) / sizeof(indexes[0]); k++) {
            for (uint64_t i = indexes[k]; i < indexes[k] + 3 && i >= indexes[k]; i++) {
                struct work_item it;
                json_t *j = item_json(&w, i, &it);
                const char *content = last_content(j);
                if (count(content) != lens[l])
                    fail_msg("index %llu: %zu tokens, want %u: '%s'", (unsigned long long)i,
                             count(content), lens[l], content);
                char tag[32];
                int tl = snprintf(tag, sizeof(tag), "[r%llu] ", (unsigned long long)i);
                if (lens[l] >= 10)
                    assert_int_equal(strncmp(content, tag, (size_t)tl), 0);
                /* system message: 3 + "system" 2 + "You are terse." 4 */
                assert_int_equal(it.prompt_tokens, lens[l] + 7 + 9);
                assert_string_equal(
                    json_string_value(json_object_get(
                        json_array_get(json_object_get(j, "messages"), 0), "content")),
                    "You are terse.");
                assert_int_equal(it.max_tokens, 128); /* the default output length */
                json_decref(j);
                work_item_release(&it);
            }
        }
        workload_release(&w);
    }
}

/* Unescapes a JSON string fragment (without quotes) built by synth_append. */
static char *unescape(const struct buf *b)
{
    size_t n = b->len + 2;
    char *q = malloc(n + 1);
    assert_non_null(q);
    q[0] = '"';
    memcpy(q + 1, b->data, b->len);
    q[n - 1] = '"';
    q[n] = '\0';
    json_t *s = json_loads(q, JSON_DECODE_ANY, NULL);
    assert_true(json_is_string(s));
    char *out = strdup(json_string_value(s));
    json_decref(s);
    free(q);
    return out;
}

/* From every start word, for short lengths and for lengths that wrap around
 * the corpus, the cut text has exactly the asked number of tokens. */
static void test_every_start_exact(void **state)
{
    struct workload_cfg cfg;
    workload_cfg_init(&cfg);
    struct workload w;
    init_ok(&w, &cfg);
    size_t corpus_tokens = text_count_tokens(w.corpus, w.corpus_len);
    assert_true(corpus_tokens > 1000);
    assert_true(w.nstarts > 1000);
    const uint32_t long_lens[] = {(uint32_t)corpus_tokens - 1, (uint32_t)corpus_tokens,
                                  (uint32_t)corpus_tokens + 1, (uint32_t)corpus_tokens * 3 + 5};
    struct buf b;
    buf_init(&b, WORKLOAD_MAX_BODY);
    for (size_t s = 0; s < w.nstarts; s++) {
        for (uint32_t n = 1; n <= 44; n++) {
            uint32_t want = n <= 40 ? n : long_lens[n - 41];
            if (n > 40 && s % 16 != 0)
                continue;
            buf_reset(&b);
            assert_int_equal(synth_append(&w, NULL, &b, "[r12345] ", want, w.starts[s]), 0);
            char *text = unescape(&b);
            if (count(text) != want)
                fail_msg("start %u, %u tokens: counted %zu in '%s'", w.starts[s], want, count(text),
                         text);
            free(text);
        }
    }
    buf_release(&b);
    workload_release(&w);
}

static void test_corpus(void **state)
{
    size_t len;
    const char *c = corpus_text(&len);
    assert_int_equal(strlen(c), len);
    assert_true(len >= 6000 && len <= 10240);
    assert_int_equal(c[len - 1], '\n');
    for (size_t i = 0; i < len; i++)
        assert_true((c[i] >= 0x20 && c[i] < 0x7f) || c[i] == '\n');
    assert_ptr_equal(corpus_text(NULL), c);
}

static void test_length_distributions(void **state)
{
    struct workload_cfg cfg;
    workload_cfg_init(&cfg);
    cfg.input_tokens = "uniform:100-200";
    cfg.output_tokens = "uniform:10-20";
    cfg.seed = 7;
    struct workload w;
    init_ok(&w, &cfg);
    uint32_t lo = UINT32_MAX, hi = 0;
    uint64_t sum = 0;
    unsigned seen_out[21] = {0};
    enum { N = 1000 };
    for (uint64_t i = 0; i < N; i++) {
        struct work_item it;
        json_t *j = item_json(&w, i, &it);
        uint32_t n = (uint32_t)count(last_content(j));
        assert_int_equal(n, it.prompt_tokens - 7);
        assert_true(n >= 100 && n <= 200);
        lo = n < lo ? n : lo;
        hi = n > hi ? n : hi;
        sum += n;
        assert_true(it.max_tokens >= 10 && it.max_tokens <= 20);
        assert_int_equal(json_integer_value(json_object_get(j, "max_tokens")), it.max_tokens);
        seen_out[it.max_tokens]++;
        json_decref(j);
        work_item_release(&it);
    }
    assert_true(lo <= 102 && hi >= 198);
    /* mean 150, sd of the mean 29/sqrt(1000) = 0.92: a 5-sigma band */
    assert_true(sum > 145400 && sum < 154600);
    for (int v = 10; v <= 20; v++)
        assert_true(seen_out[v] > 40); /* 1000 / 11 = 91 expected each */
    workload_release(&w);

    /* a lognormal: every length still exact, and they vary */
    cfg.input_tokens = "lognormal:300,0.5";
    init_ok(&w, &cfg);
    lo = UINT32_MAX;
    hi = 0;
    for (uint64_t i = 0; i < 200; i++) {
        struct work_item it;
        json_t *j = item_json(&w, i, &it);
        uint32_t n = (uint32_t)count(last_content(j));
        assert_int_equal(n, it.prompt_tokens - 7);
        lo = n < lo ? n : lo;
        hi = n > hi ? n : hi;
        json_decref(j);
        work_item_release(&it);
    }
    assert_true(lo < 200 && hi > 450);
    workload_release(&w);
}

static void test_completions_body(void **state)
{
    struct workload_cfg cfg;
    workload_cfg_init(&cfg);
    cfg.endpoint = WORKLOAD_COMPLETIONS;
    cfg.model = "m\"x"; /* escaped */
    cfg.input_tokens = "33";
    cfg.output_tokens = "5";
    struct workload w;
    init_ok(&w, &cfg);
    struct work_item it;
    json_t *j = item_json(&w, 3, &it);
    assert_string_equal(json_string_value(json_object_get(j, "model")), "m\"x");
    const char *prompt = json_string_value(json_object_get(j, "prompt"));
    assert_non_null(prompt);
    assert_int_equal(strncmp(prompt, "[r3] ", 5), 0);
    assert_int_equal(count(prompt), 33);
    assert_int_equal(it.prompt_tokens, 33);
    assert_int_equal(json_integer_value(json_object_get(j, "max_tokens")), 5);
    assert_true(json_is_true(json_object_get(j, "ignore_eos")));
    assert_true(json_is_true(json_object_get(j, "stream")));
    assert_non_null(json_object_get(j, "stream_options"));
    assert_int_equal(json_object_size(j), 6);
    assert_null(json_object_get(j, "messages"));
    json_decref(j);
    work_item_release(&it);
    workload_release(&w);
    assert_string_equal(workload_endpoint_path(WORKLOAD_COMPLETIONS), "/v1/completions");
}

static void test_embeddings_body(void **state)
{
    struct workload_cfg cfg;
    workload_cfg_init(&cfg);
    cfg.endpoint = WORKLOAD_EMBEDDINGS;
    cfg.model = "e";
    cfg.input_tokens = "20";
    cfg.embed_batch = 3;
    struct workload w;
    init_ok(&w, &cfg);
    struct work_item it;
    json_t *j = item_json(&w, 5, &it);
    assert_int_equal(json_object_size(j), 2);
    const json_t *input = json_object_get(j, "input");
    assert_int_equal(json_array_size(input), 3);
    for (size_t k = 0; k < 3; k++) {
        const char *s = json_string_value(json_array_get(input, k));
        char tag[16];
        snprintf(tag, sizeof(tag), "[r5.%zu] ", k);
        assert_int_equal(strncmp(s, tag, strlen(tag)), 0);
        assert_int_equal(count(s), 20);
    }
    assert_int_equal(it.prompt_tokens, 60);
    assert_int_equal(it.max_tokens, 0);
    assert_false(it.stream);
    json_decref(j);
    work_item_release(&it);
    workload_release(&w);

    cfg.embed_batch = 1;
    init_ok(&w, &cfg);
    j = item_json(&w, 5, &it);
    assert_int_equal(
        strncmp(json_string_value(json_array_get(json_object_get(j, "input"), 0)), "[r5] ", 5), 0);
    json_decref(j);
    work_item_release(&it);
    workload_release(&w);
    assert_string_equal(workload_endpoint_path(WORKLOAD_EMBEDDINGS), "/v1/embeddings");
}

/* {"vector":[row i mod n],"k":K} + overrides; floats survive the text exactly. */
static void test_vector_search_body(void **state)
{
    float rows[2][3] = {{0.1f, -2.5f, 3.14159274f}, {1e-7f, 0, 123456.789f}};
    struct vecset v = {.n = 2, .dim = 3, .v = &rows[0][0]};
    json_t *ov = json_pack("{s:i}", "nprobe", 64);
    struct workload_cfg cfg;
    workload_cfg_init(&cfg);
    cfg.endpoint = WORKLOAD_VECTOR_SEARCH;
    cfg.model = "ignored";
    cfg.vectors = &v;
    cfg.vector_k = 7;
    cfg.body_overrides = ov;
    struct workload w;
    init_ok(&w, &cfg);
    struct work_item it;
    for (uint64_t i = 0; i < 4; i++) {
        json_t *j = item_json(&w, i, &it);
        assert_int_equal(json_object_size(j), 3); /* vector, k, nprobe: no model, no stream */
        assert_int_equal(json_integer_value(json_object_get(j, "k")), 7);
        assert_int_equal(json_integer_value(json_object_get(j, "nprobe")), 64);
        const json_t *a = json_object_get(j, "vector");
        assert_int_equal(json_array_size(a), 3);
        for (size_t d = 0; d < 3; d++)
            assert_true((float)json_number_value(json_array_get(a, d)) == rows[i % 2][d]);
        assert_false(it.stream);
        assert_int_equal(it.max_tokens, 0);
        json_decref(j);
        work_item_release(&it);
    }
    workload_release(&w);
    assert_string_equal(workload_endpoint_path(WORKLOAD_VECTOR_SEARCH), "/v1/vectors/search");
    enum workload_endpoint e;
    assert_int_equal(workload_endpoint_parse("vector-search", &e), 0);
    assert_int_equal(e, WORKLOAD_VECTOR_SEARCH);
    /* no vectors, or k out of range: refused */
    char err[256];
    cfg.vectors = NULL;
    assert_int_equal(workload_init(&w, &cfg, err, sizeof(err)), -EINVAL);
    cfg.vectors = &v;
    cfg.vector_k = VECSET_MAX_K + 1;
    assert_int_equal(workload_init(&w, &cfg, err, sizeof(err)), -EINVAL);
    /* the vector is the workload's: an override of it is refused */
    cfg.vector_k = 1;
    json_object_set_new(ov, "vector", json_array());
    assert_int_equal(workload_init(&w, &cfg, err, sizeof(err)), -EINVAL);
    json_decref(ov);
}

static void test_flags_off(void **state)
{
    struct workload_cfg cfg;
    workload_cfg_init(&cfg);
    cfg.input_tokens = "12";
    cfg.output_tokens = "9";
    cfg.ignore_eos = false;
    cfg.stream = false;
    cfg.max_tokens_key = "max_completion_tokens";
    struct workload w;
    init_ok(&w, &cfg);
    struct work_item it;
    json_t *j = item_json(&w, 0, &it);
    assert_int_equal(strncmp(it.body, "{\"messages\":[", 13), 0); /* no model */
    assert_int_equal(json_object_size(j), 2);
    assert_int_equal(json_integer_value(json_object_get(j, "max_completion_tokens")), 9);
    assert_false(it.stream);
    json_decref(j);
    work_item_release(&it);
    workload_release(&w);

    cfg.stream = true;
    cfg.include_usage = false;
    init_ok(&w, &cfg);
    j = item_json(&w, 0, &it);
    assert_true(json_is_true(json_object_get(j, "stream")));
    assert_null(json_object_get(j, "stream_options"));
    assert_int_equal(json_object_size(j), 3);
    assert_true(it.stream);
    json_decref(j);
    work_item_release(&it);
    workload_release(&w);
}

static void test_overrides(void **state)
{
    json_error_t je;
    json_t *ov = json_loads("{\"temperature\":0.7,\"ignore_eos\":null,\"max_tokens\":64,"
                            "\"stream\":false,\"model\":\"other\",\"top_p\":1,\"seed\":0.1}",
                            0, &je);
    assert_non_null(ov);
    struct workload_cfg cfg;
    workload_cfg_init(&cfg);
    cfg.model = "m";
    cfg.input_tokens = "12";
    cfg.body_overrides = ov;
    struct workload w;
    init_ok(&w, &cfg);
    json_decref(ov); /* borrowed during init only */
    struct work_item it;
    json_t *j = item_json(&w, 0, &it);
    assert_string_equal(json_string_value(json_object_get(j, "model")), "other");
    assert_null(json_object_get(j, "ignore_eos"));
    assert_null(json_object_get(j, "stream_options"));
    assert_true(json_is_false(json_object_get(j, "stream")));
    assert_int_equal(json_integer_value(json_object_get(j, "max_tokens")), 64);
    assert_int_equal(json_integer_value(json_object_get(j, "top_p")), 1);
    assert_int_equal(json_object_size(j), 7);
    assert_false(it.stream);
    assert_int_equal(it.max_tokens, 64);
    const char *tail = "\"}],\"temperature\":0.7,\"max_tokens\":64,\"stream\":false,"
                       "\"model\":\"other\",\"top_p\":1,\"seed\":0.1}";
    assert_string_equal(it.body + it.body_len - strlen(tail), tail);
    json_decref(j);
    work_item_release(&it);
    workload_release(&w);

    /* null removes max_tokens: no limit is sent */
    ov = json_loads("{\"max_tokens\":null,\"stream_options\":{\"continuous_usage_stats\":true}}", 0,
                    &je);
    cfg.body_overrides = ov;
    init_ok(&w, &cfg);
    j = item_json(&w, 0, &it);
    assert_null(json_object_get(j, "max_tokens"));
    assert_int_equal(it.max_tokens, 0);
    assert_true(json_is_true(
        json_object_get(json_object_get(j, "stream_options"), "continuous_usage_stats")));
    assert_null(json_object_get(json_object_get(j, "stream_options"), "include_usage"));
    json_decref(j);
    work_item_release(&it);
    workload_release(&w);
    json_decref(ov);

    /* a real that needs 17 digits keeps them */
    ov = json_pack("{s:f}", "temperature", 0.1 + 0.2);
    cfg.body_overrides = ov;
    init_ok(&w, &cfg);
    j = item_json(&w, 0, &it);
    assert_true(json_real_value(json_object_get(j, "temperature")) == 0.1 + 0.2);
    json_decref(j);
    work_item_release(&it);
    workload_release(&w);
    json_decref(ov);

    static const struct {
        const char *json;
        const char *msg;
    } bad[] = {
        {"{\"messages\":[]}",
         "body overrides: \"messages\" is written by the workload and cannot be overridden"},
        {"{\"prompt\":\"x\"}",
         "body overrides: \"prompt\" is written by the workload and cannot be overridden"},
        {"{\"stream\":\"yes\"}", "body overrides: \"stream\" must be true, false or null"},
        {"{\"max_tokens\":-1}",
         "body overrides: \"max_tokens\" must be null or an integer from 0 to 16777216"},
        {"[1]", "body overrides: expected a JSON object"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ov = json_loads(bad[i].json, 0, &je);
        assert_non_null(ov);
        cfg.body_overrides = ov;
        init_fails(&cfg, -EINVAL, bad[i].msg);
        json_decref(ov);
    }
}

static const char prompts_text[] =
    "{\"prompt\":\"Hello world\"}\n"
    "# the second prompt is a conversation\n"
    "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi there\"}],\"output_tokens\":4}\n"
    "{\"prompt\":\"What is 2+2?\",\"max_tokens\":9,\"reference\":\"4\"}\n";

static void test_prompts_file_cycles(void **state)
{
    struct workload_cfg cfg;
    workload_cfg_init(&cfg);
    cfg.output_tokens = "33";
    cfg.system_prompt = "You are terse.";
    cfg.prompts_data = prompts_text;
    cfg.prompts_len = sizeof(prompts_text) - 1;
    struct workload w;
    init_ok(&w, &cfg);
    for (uint64_t i = 0; i < 9; i++) {
        struct work_item it;
        json_t *j = item_json(&w, i, &it);
        const json_t *msgs = json_object_get(j, "messages");
        switch (i % 3) {
        case 0:
            assert_int_equal(json_array_size(msgs), 2); /* system + user */
            assert_string_equal(last_content(j), "Hello world");
            /* "Hello world" 2 + user 4 + system 9 + reply 3 */
            assert_int_equal(it.prompt_tokens, 18);
            assert_int_equal(it.max_tokens, 33);
            assert_null(it.reference);
            break;
        case 1:
            /* sent as written: no system message added */
            {
                const char *want = "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi there\"}],"
                                   "\"max_tokens\":4,";
                assert_int_equal(strncmp(it.body, want, strlen(want)), 0);
            }
            assert_int_equal(it.prompt_tokens, 3 + 3 + 1 + 2);
            assert_int_equal(it.max_tokens, 4);
            break;
        case 2:
            assert_string_equal(last_content(j), "What is 2+2?");
            /* What, " is", " 2", +, 2, ? = 6 */
            assert_int_equal(it.prompt_tokens, 6 + 4 + 9 + 3);
            assert_int_equal(it.max_tokens, 9);
            assert_string_equal(it.reference, "4");
            break;
        }
        assert_int_equal(json_integer_value(json_object_get(j, "max_tokens")), it.max_tokens);
        json_decref(j);
        work_item_release(&it);
    }
    workload_release(&w);

    /* the same lines from a file give the same bodies */
    char path[] = "/tmp/test_workload_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, prompts_text, sizeof(prompts_text) - 1),
                     (ssize_t)sizeof(prompts_text) - 1);
    assert_int_equal(close(fd), 0);
    struct workload f;
    init_ok(&w, &cfg);
    cfg.prompts_data = NULL;
    cfg.prompts_path = path;
    init_ok(&f, &cfg);
    for (uint64_t i = 0; i < 6; i++) {
        struct work_item a, b;
        assert_int_equal(workload_item(&w, i, &a), 0);
        assert_int_equal(workload_item(&f, i, &b), 0);
        assert_string_equal(a.body, b.body);
        work_item_release(&a);
        work_item_release(&b);
    }
    workload_release(&w);
    workload_release(&f);
    assert_int_equal(unlink(path), 0);

    /* completions: the prompt as is */
    cfg.endpoint = WORKLOAD_COMPLETIONS;
    cfg.system_prompt = NULL;
    cfg.prompts_path = NULL;
    cfg.prompts_data = "{\"prompt\":\"one\"}\n{\"prompt\":\"two two\"}\n";
    cfg.prompts_len = strlen(cfg.prompts_data);
    init_ok(&w, &cfg);
    struct work_item it;
    json_t *j = item_json(&w, 3, &it);
    assert_string_equal(json_string_value(json_object_get(j, "prompt")), "two two");
    assert_int_equal(it.prompt_tokens, 2);
    json_decref(j);
    work_item_release(&it);
    workload_release(&w);

    /* embeddings: consecutive lines fill a batch */
    cfg.endpoint = WORKLOAD_EMBEDDINGS;
    cfg.embed_batch = 3;
    init_ok(&w, &cfg);
    j = item_json(&w, 1, &it); /* lines 3, 4, 5 mod 2 */
    const json_t *input = json_object_get(j, "input");
    assert_string_equal(json_string_value(json_array_get(input, 0)), "two two");
    assert_string_equal(json_string_value(json_array_get(input, 1)), "one");
    assert_string_equal(json_string_value(json_array_get(input, 2)), "two two");
    assert_int_equal(it.prompt_tokens, 5);
    json_decref(j);
    work_item_release(&it);
    workload_release(&w);
}

static void test_permute_is_bijection(void **state)
{
    unsigned char *seen = malloc(5000);
    assert_non_null(seen);
    for (uint64_t n = 1; n <= 300; n++) {
        for (uint64_t key = 0; key < 4; key++) {
            memset(seen, 0, n);
            for (uint64_t x = 0; x < n; x++) {
                uint64_t y = permute(x, n, key * 0x9e3779b97f4a7c15ull);
                assert_true(y < n);
                assert_int_equal(seen[y], 0);
                seen[y] = 1;
            }
        }
    }
    uint64_t n = 4097; /* odd bit counts round up */
    memset(seen, 0, n);
    size_t fixed = 0;
    for (uint64_t x = 0; x < n; x++) {
        uint64_t y = permute(x, n, 99);
        assert_true(y < n && !seen[y]);
        seen[y] = 1;
        fixed += y == x;
    }
    assert_true(fixed < 20); /* a random permutation fixes 1 point on average */
    free(seen);
}

static void test_prompts_file_shuffle(void **state)
{
    enum { LINES = 50, PASSES = 4 };
    char text[LINES * 24];
    size_t len = 0;
    for (int i = 0; i < LINES; i++)
        len += (size_t)snprintf(text + len, sizeof(text) - len, "{\"prompt\":\"p%d\"}\n", i);
    struct workload_cfg cfg;
    workload_cfg_init(&cfg);
    cfg.endpoint = WORKLOAD_COMPLETIONS;
    cfg.prompts_data = text;
    cfg.prompts_len = len;
    cfg.shuffle = true;
    cfg.seed = 3;
    struct workload w, again, other;
    init_ok(&w, &cfg);
    init_ok(&again, &cfg);
    cfg.seed = 4;
    init_ok(&other, &cfg);
    int order[PASSES][LINES];
    size_t differ_other = 0;
    for (int pass = 0; pass < PASSES; pass++) {
        int seen[LINES] = {0};
        for (int k = 0; k < LINES; k++) {
            uint64_t i = (uint64_t)pass * LINES + (uint64_t)k;
            struct work_item a, b, c;
            json_t *j = item_json(&w, i, &a);
            int line = atoi(json_string_value(json_object_get(j, "prompt")) + 1);
            assert_true(line >= 0 && line < LINES);
            seen[line]++;
            order[pass][k] = line;
            assert_int_equal(workload_item(&again, i, &b), 0);
            assert_string_equal(a.body, b.body);
            assert_int_equal(workload_item(&other, i, &c), 0);
            differ_other += strcmp(a.body, c.body) != 0;
            json_decref(j);
            work_item_release(&a);
            work_item_release(&b);
            work_item_release(&c);
        }
        for (int l = 0; l < LINES; l++)
            assert_int_equal(seen[l], 1); /* every line once per pass */
    }
    size_t in_place = 0;
    for (int k = 0; k < LINES; k++)
        in_place += order[0][k] == k;
    assert_true(in_place < 10);
    assert_true(memcmp(order[0], order[1], sizeof(order[0])) != 0); /* a new order per pass */
    assert_true(differ_other > LINES);
    workload_release(&w);
    workload_release(&again);
    workload_release(&other);
}

static void test_config_errors(void **state)
{
    struct workload_cfg cfg;
    workload_cfg_init(&cfg);
    cfg.input_tokens = "normal:512";
    init_fails(&cfg, -EINVAL,
               "input tokens: normal: expected MEAN,SD (e.g. normal:512,64), got '512'");
    cfg.input_tokens = NULL;
    cfg.output_tokens = "bogus:1";
    struct workload w;
    char err[256];
    assert_int_equal(workload_init(&w, &cfg, err, sizeof(err)), -EINVAL);
    assert_int_equal(strncmp(err, "output tokens: ", 15), 0);
    cfg.output_tokens = NULL;

    cfg.endpoint = WORKLOAD_COMPLETIONS;
    cfg.system_prompt = "x";
    init_fails(&cfg, -EINVAL, "a system prompt needs the chat endpoint");
    cfg.system_prompt = NULL;
    cfg.prompts_path = "chat.jsonl";
    cfg.prompts_data = "{\"prompt\":\"a\"}\n{\"messages\":[{\"role\":\"user\",\"content\":\"b\"}]}";
    cfg.prompts_len = strlen(cfg.prompts_data);
    init_fails(&cfg, TS_PARSE,
               "chat.jsonl:2: \"messages\" needs the chat endpoint (use \"prompt\" for this one)");
    cfg.prompts_data = NULL;
    cfg.prompts_path = "/nonexistent/x.jsonl";
    init_fails(&cfg, -ENOENT, "/nonexistent/x.jsonl: No such file or directory");
    cfg.prompts_path = NULL;

    cfg.endpoint = WORKLOAD_EMBEDDINGS;
    cfg.embed_batch = 2049;
    init_fails(&cfg, -EINVAL, "embeddings batch 2049 is over 2048");
    cfg.embed_batch = 1;
    cfg.model = "\xff";
    init_fails(&cfg, -EINVAL, "the model name is not valid UTF-8");
    cfg.model = NULL;
    cfg.endpoint = (enum workload_endpoint)7;
    init_fails(&cfg, -EINVAL, "unknown endpoint 7");

    enum workload_endpoint e;
    assert_int_equal(workload_endpoint_parse("Chat", &e), 0);
    assert_int_equal(e, WORKLOAD_CHAT);
    assert_int_equal(workload_endpoint_parse("embeddings", &e), 0);
    assert_int_equal(e, WORKLOAD_EMBEDDINGS);
    assert_int_equal(workload_endpoint_parse("completion", &e), -EINVAL);
    assert_int_equal(workload_endpoint_parse(NULL, &e), -EINVAL);
}

static void test_huge_prompt_and_body_cap(void **state)
{
    struct workload_cfg cfg;
    workload_cfg_init(&cfg);
    cfg.input_tokens = "fixed:1e9"; /* clamped to WORKLOAD_MAX_INPUT_TOKENS */
    struct workload w;
    init_ok(&w, &cfg);
    struct work_item it;
    json_t *j = item_json(&w, 0, &it);
    assert_int_equal(count(last_content(j)), WORKLOAD_MAX_INPUT_TOKENS);
    json_decref(j);
    work_item_release(&it);
    workload_release(&w);

    cfg.endpoint = WORKLOAD_EMBEDDINGS;
    cfg.embed_batch = 20; /* 20 texts of about 4.1 MB each: over 64 MiB */
    init_ok(&w, &cfg);
    assert_int_equal(workload_item(&w, 0, &it), TS_TOOBIG);
    assert_null(it.body);
    workload_release(&w);
}

struct thread_arg {
    const struct workload *w;
    char **want;
    size_t n;
    size_t mismatches;
};

static void *build_all(void *p)
{
    struct thread_arg *a = p;
    for (size_t i = 0; i < a->n; i++) {
        size_t k = (i * 7 + (size_t)(uintptr_t)a % 13) % a->n; /* each thread its own order */
        struct work_item it;
        if (workload_item(a->w, k, &it) != 0 || strcmp(it.body, a->want[k]) != 0)
            a->mismatches++;
        work_item_release(&it);
    }
    return NULL;
}

static void test_threads(void **state)
{
    enum { N = 300, T = 4 };
    struct workload_cfg cfg;
    workload_cfg_init(&cfg);
    cfg.input_tokens = "uniform:1-400";
    cfg.prompts_data = NULL;
    struct workload w;
    init_ok(&w, &cfg);
    char *want[N];
    for (size_t i = 0; i < N; i++) {
        struct work_item it;
        assert_int_equal(workload_item(&w, i, &it), 0);
        want[i] = it.body;
    }
    pthread_t th[T];
    struct thread_arg args[T];
    for (int t = 0; t < T; t++) {
        args[t] = (struct thread_arg){&w, want, N, 0};
        assert_int_equal(pthread_create(&th[t], NULL, build_all, &args[t]), 0);
    }
    for (int t = 0; t < T; t++) {
        assert_int_equal(pthread_join(th[t], NULL), 0);
        assert_int_equal(args[t].mismatches, 0);
    }
    for (size_t i = 0; i < N; i++)
        ts_free(want[i]);
    workload_release(&w);
}

/* Failing each allocation in turn: -ENOMEM and nothing leaked (ASan checks). */
static void test_out_of_memory(void **state)
{
    json_t *ov = json_pack("{s:f}", "temperature", 0.5);
    struct workload_cfg cfg;
    workload_cfg_init(&cfg);
    cfg.model = "m";
    cfg.system_prompt = "Be brief.";
    cfg.body_overrides = ov;
    cfg.input_tokens = "40";
    int rc = -1;
    long n;
    for (int with_file = 0; with_file < 2; with_file++) {
        cfg.prompts_data = with_file ? prompts_text : NULL;
        cfg.prompts_len = with_file ? sizeof(prompts_text) - 1 : 0;
        for (n = 0; n < 200; n++) {
            struct workload w;
            char err[256];
            ts_alloc_fail_after(n);
            rc = workload_init(&w, &cfg, err, sizeof(err));
            ts_alloc_fail_after(-1);
            if (rc == 0) {
                workload_release(&w);
                break;
            }
            assert_int_equal(rc, -ENOMEM);
        }
        assert_int_equal(rc, 0);
        assert_true(n > 3);
    }
    struct workload w;
    init_ok(&w, &cfg);
    for (n = 0; n < 200; n++) {
        struct work_item it;
        ts_alloc_fail_after(n);
        rc = workload_item(&w, 1, &it);
        ts_alloc_fail_after(-1);
        if (rc == 0) {
            work_item_release(&it);
            break;
        }
        assert_int_equal(rc, -ENOMEM);
        assert_null(it.body);
    }
    assert_int_equal(rc, 0);
    assert_true(n > 0);
    workload_release(&w);
    json_decref(ov);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_body),
        cmocka_unit_test(test_same_seed_same_bodies),
        cmocka_unit_test(test_fixed_lengths_exact),
        cmocka_unit_test(test_every_start_exact),
        cmocka_unit_test(test_corpus),
        cmocka_unit_test(test_length_distributions),
        cmocka_unit_test(test_completions_body),
        cmocka_unit_test(test_embeddings_body),
        cmocka_unit_test(test_vector_search_body),
        cmocka_unit_test(test_flags_off),
        cmocka_unit_test(test_overrides),
        cmocka_unit_test(test_prompts_file_cycles),
        cmocka_unit_test(test_permute_is_bijection),
        cmocka_unit_test(test_prompts_file_shuffle),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_huge_prompt_and_body_cap),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
