#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "llm/openai_request.h"

static int parse(struct openai_request *r, enum openai_endpoint ep, const char *body,
                 struct openai_error *e)
{
    memset(e, 0, sizeof(*e));
    return openai_request_parse(r, ep, body, strlen(body), NULL, e);
}

static void test_chat_full(void **state)
{
    static const char body[] =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"You are\"},"
        "{\"role\":\"user\",\"name\":\"bob\",\"content\":[{\"type\":\"text\",\"text\":\"Hi\"},"
        "{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}},"
        "{\"type\":\"text\",\"text\":\" th\\u00e9re\"}]},"
        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[]},"
        "{\"role\":\"tool\",\"content\":\"42\",\"tool_call_id\":\"c\"}],"
        "\"stream\":true,\"stream_options\":{\"include_usage\":true},\"max_tokens\":100,"
        "\"max_completion_tokens\":50,\"min_tokens\":10,\"ignore_eos\":true,"
        "\"stop\":[\"a\",\"bc\"],\"seed\":42,\"temperature\":0.7,\"top_p\":1,\"n\":1,"
        "\"user\":\"u\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],\"tool_"
        "choice\":\"auto\","
        "\"logprobs\":false,\"unknown_field\":{\"x\":1}}";
    struct openai_request r;
    struct openai_error e;
    openai_request_init(&r);
    assert_int_equal(parse(&r, OPENAI_CHAT, body, &e), 0);
    assert_int_equal(r.endpoint, OPENAI_CHAT);
    assert_string_equal(r.model, "m");
    assert_true(r.stream);
    assert_true(r.include_usage);
    assert_int_equal(r.max_tokens, 50); /* max_completion_tokens wins */
    assert_int_equal(r.min_tokens, 10);
    assert_true(r.ignore_eos);
    assert_int_equal(r.n_stop, 2);
    assert_int_equal(r.stop[1].len, 2);
    assert_memory_equal(r.stop[1].s, "bc", 2);
    assert_true(r.has_seed);
    assert_int_equal(r.seed, 42);
    assert_true(r.has_temperature);
    assert_true(r.temperature > 0.69 && r.temperature < 0.71);
    assert_true(r.has_top_p);
    assert_true(r.top_p == 1.0);
    assert_string_equal(r.user, "u");
    assert_true(r.has_tools);
    assert_int_equal(r.n_messages, 4);
    assert_string_equal(r.messages[0].role, "system");
    assert_int_equal(r.messages[0].n_parts, 1);
    assert_string_equal(r.messages[0].parts[0].s, "You are");
    assert_string_equal(r.messages[1].role, "user");
    assert_string_equal(r.messages[1].name, "bob");
    assert_int_equal(r.messages[1].n_parts, 2);
    assert_string_equal(r.messages[1].parts[0].s, "Hi");
    assert_string_equal(r.messages[1].parts[1].s, " th\xc3\xa9re");
    assert_int_equal(r.messages[1].text_len, 2 + 7);
    assert_int_equal(r.messages[2].n_parts, 0);
    assert_string_equal(r.messages[3].parts[0].s, "42");
    assert_int_equal(r.text_bytes, 7 + 9 + 2);
    assert_int_equal(r.n_inputs, 0);
    openai_request_release(&r);
}

static void test_chat_minimal(void **state)
{
    struct openai_request r;
    struct openai_error e;
    openai_request_init(&r);
    assert_int_equal(parse(&r, OPENAI_CHAT,
                           "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                           "\"stream\":null,\"max_tokens\":null,\"stop\":\"END\","
                           "\"stream_options\":null,\"n\":null}",
                           &e),
                     0);
    assert_false(r.stream);
    assert_false(r.include_usage);
    assert_int_equal(r.max_tokens, -1);
    assert_int_equal(r.min_tokens, 0);
    assert_int_equal(r.n_stop, 1);
    assert_string_equal(r.stop[0].s, "END");
    assert_false(r.has_seed);
    assert_false(r.has_temperature);
    assert_null(r.user);
    /* parsing again into the same struct releases the old document */
    assert_int_equal(parse(&r, OPENAI_CHAT,
                           "{\"model\":\"m2\",\"messages\":[{\"role\":\"user\",\"content\":\"\"}],"
                           "\"max_tokens\":7}",
                           &e),
                     0);
    assert_string_equal(r.model, "m2");
    assert_int_equal(r.max_tokens, 7);
    assert_int_equal(r.n_stop, 0);
    openai_request_release(&r);
    openai_request_release(&r); /* twice is fine */
}

static void test_completions(void **state)
{
    struct openai_request r;
    struct openai_error e;
    openai_request_init(&r);
    assert_int_equal(parse(&r, OPENAI_COMPLETIONS,
                           "{\"model\":\"m\",\"prompt\":\"Once upon\",\"max_tokens\":16,"
                           "\"stream\":true,\"echo\":false}",
                           &e),
                     0);
    assert_int_equal(r.n_inputs, 1);
    assert_string_equal(r.inputs[0].text, "Once upon");
    assert_int_equal(r.inputs[0].len, 9);
    assert_int_equal(r.inputs[0].n_tokens, -1);
    assert_int_equal(r.max_tokens, 16);
    assert_int_equal(r.text_bytes, 9);

    assert_int_equal(
        parse(&r, OPENAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":[\"a\",\"bcd\"]}", &e), 0);
    assert_int_equal(r.n_inputs, 2);
    assert_int_equal(r.inputs[1].len, 3);
    assert_int_equal(r.text_bytes, 4);

    assert_int_equal(
        parse(&r, OPENAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":[1,2,3,50256]}", &e), 0);
    assert_int_equal(r.n_inputs, 1);
    assert_null(r.inputs[0].text);
    assert_int_equal(r.inputs[0].n_tokens, 4);

    assert_int_equal(parse(&r, OPENAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":[[1,2],[3]]}", &e),
                     0);
    assert_int_equal(r.n_inputs, 2);
    assert_int_equal(r.inputs[0].n_tokens, 2);
    assert_int_equal(r.inputs[1].n_tokens, 1);
    assert_int_equal(r.text_bytes, 0);
    openai_request_release(&r);
}

static void test_embeddings(void **state)
{
    struct openai_request r;
    struct openai_error e;
    openai_request_init(&r);
    assert_int_equal(parse(&r, OPENAI_EMBEDDINGS,
                           "{\"model\":\"e\",\"input\":[\"a\",\"bb\"],\"dimensions\":256,"
                           "\"encoding_format\":\"base64\",\"user\":\"u\"}",
                           &e),
                     0);
    assert_int_equal(r.n_inputs, 2);
    assert_int_equal(r.dimensions, 256);
    assert_int_equal(r.encoding_format, OPENAI_ENCODING_BASE64);
    assert_string_equal(r.user, "u");
    assert_int_equal(parse(&r, OPENAI_EMBEDDINGS, "{\"model\":\"e\",\"input\":\"x\"}", &e), 0);
    assert_int_equal(r.dimensions, -1);
    assert_int_equal(r.encoding_format, OPENAI_ENCODING_FLOAT);
    /* generation fields mean nothing to embeddings and are not checked */
    assert_int_equal(parse(&r, OPENAI_EMBEDDINGS,
                           "{\"model\":\"e\",\"input\":[5,6],\"n\":3,\"stream\":\"x\"}", &e),
                     0);
    assert_int_equal(r.inputs[0].n_tokens, 2);
    openai_request_release(&r);
}

struct bad_case {
    enum openai_endpoint ep;
    const char *body;
    const char *message;
    const char *param;
    const char *code;
};

#define MSG(x) "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]" x

static const struct bad_case bad_cases[] = {
    {OPENAI_CHAT, "{\"model\":\"m\"", "We could not parse the JSON body of your request.", "", ""},
    {OPENAI_CHAT, "[1]",
     "Invalid type for the request body: expected an object, but got an "
     "array instead.",
     "", "invalid_type"},
    {OPENAI_CHAT, "{" MSG("") "}", "'model' is a required property", "model",
     "missing_required_parameter"},
    {OPENAI_CHAT, "{\"model\":1," MSG("") "}",
     "Invalid type for 'model': expected a string, but got an integer instead.", "model",
     "invalid_type"},
    {OPENAI_CHAT, "{\"model\":\"m\"}", "'messages' is a required property", "messages",
     "missing_required_parameter"},
    {OPENAI_CHAT, "{\"model\":\"m\",\"messages\":{}}",
     "Invalid type for 'messages': expected an array, but got an object instead.", "messages",
     "invalid_type"},
    {OPENAI_CHAT, "{\"model\":\"m\",\"messages\":[]}",
     "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an "
     "empty array instead.",
     "messages", "empty_array"},
    {OPENAI_CHAT, "{\"model\":\"m\",\"messages\":[\"hi\"]}",
     "Invalid type for 'messages[0]': expected an object, but got a string instead.",
     "messages.[0]", "invalid_type"},
    {OPENAI_CHAT, "{\"model\":\"m\",\"messages\":[{\"content\":\"x\"}]}",
     "'messages[0].role' is a required property", "messages.[0].role",
     "missing_required_parameter"},
    {OPENAI_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"},"
     "{\"role\":\"bot\",\"content\":\"x\"}]}",
     "Invalid value: 'bot'. Supported values are: 'system', 'assistant', 'user', 'function', "
     "'tool', and 'developer'.",
     "messages.[1].role", "invalid_value"},
    {OPENAI_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}]}",
     "'messages[0].content' is a required property", "messages.[0].content",
     "missing_required_parameter"},
    {OPENAI_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":5}]}",
     "Invalid type for 'messages[0].content': expected one of a string or array of objects, but "
     "got an integer instead.",
     "messages.[0].content", "invalid_type"},
    {OPENAI_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}",
     "'messages[0].content[0].text' is a required property", "messages.[0].content.[0].text",
     "missing_required_parameter"},
    {OPENAI_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"video\"}]}]}",
     "Invalid value: 'video'. Supported values are: 'text', 'image_url', 'input_audio', "
     "'refusal', and 'file'.",
     "messages.[0].content.[0].type", "invalid_value"},
    {OPENAI_CHAT, "{\"model\":\"m\"," MSG(",\"max_tokens\":\"5\"}"),
     "Invalid type for 'max_tokens': expected an integer, but got a string instead.", "max_tokens",
     "invalid_type"},
    {OPENAI_CHAT, "{\"model\":\"m\"," MSG(",\"max_tokens\":2.5}"),
     "Invalid type for 'max_tokens': expected an integer, but got a decimal instead.", "max_tokens",
     "invalid_type"},
    {OPENAI_CHAT, "{\"model\":\"m\"," MSG(",\"max_tokens\":0}"),
     "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got 0 "
     "instead.",
     "max_tokens", "integer_below_min_value"},
    {OPENAI_CHAT, "{\"model\":\"m\"," MSG(",\"max_completion_tokens\":-3}"),
     "Invalid 'max_completion_tokens': integer below minimum value. Expected a value >= 1, but "
     "got -3 instead.",
     "max_completion_tokens", "integer_below_min_value"},
    {OPENAI_CHAT, "{\"model\":\"m\"," MSG(",\"max_tokens\":5,\"min_tokens\":6}"),
     "Invalid 'min_tokens': must be less than or equal to the maximum number of tokens (5), but "
     "got 6 instead.",
     "min_tokens", "invalid_value"},
    {OPENAI_CHAT, "{\"model\":\"m\"," MSG(",\"stream\":\"yes\"}"),
     "Invalid type for 'stream': expected a boolean, but got a string instead.", "stream",
     "invalid_type"},
    {OPENAI_CHAT, "{\"model\":\"m\"," MSG(",\"stream_options\":{\"include_usage\":true}}"),
     "The 'stream_options' parameter is only allowed when 'stream' is enabled.", "stream_options",
     ""},
    {OPENAI_CHAT,
     "{\"model\":\"m\"," MSG(",\"stream\":true,\"stream_options\":{\"include_usage\":1}}"),
     "Invalid type for 'stream_options.include_usage': expected a boolean, but got an integer "
     "instead.",
     "stream_options.include_usage", "invalid_type"},
    {OPENAI_CHAT, "{\"model\":\"m\"," MSG(",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}"),
     "Invalid 'stop': array too long. Expected an array with maximum length 4, but got an array "
     "with length 5 instead.",
     "stop", "array_above_max_length"},
    {OPENAI_CHAT, "{\"model\":\"m\"," MSG(",\"stop\":[\"a\",1]}"),
     "Invalid type for 'stop[1]': expected a string, but got an integer instead.", "stop.[1]",
     "invalid_type"},
    {OPENAI_CHAT, "{\"model\":\"m\"," MSG(",\"stop\":true}"),
     "Invalid type for 'stop': expected one of a string or array of strings, but got a boolean "
     "instead.",
     "stop", "invalid_type"},
    {OPENAI_CHAT, "{\"model\":\"m\"," MSG(",\"n\":2}"), "n must be 1", "n", "invalid_value"},
    {OPENAI_CHAT, "{\"model\":\"m\"," MSG(",\"temperature\":2.5}"),
     "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 2.5 "
     "instead.",
     "temperature", "decimal_above_max_value"},
    {OPENAI_CHAT, "{\"model\":\"m\"," MSG(",\"top_p\":-0.5}"),
     "Invalid 'top_p': decimal below minimum value. Expected a value >= 0, but got -0.5 instead.",
     "top_p", "decimal_below_min_value"},
    {OPENAI_CHAT, "{\"model\":\"m\"," MSG(",\"temperature\":\"hot\"}"),
     "Invalid type for 'temperature': expected a decimal, but got a string instead.", "temperature",
     "invalid_type"},
    {OPENAI_CHAT, "{\"model\":\"m\"," MSG(",\"seed\":true}"),
     "Invalid type for 'seed': expected an integer, but got a boolean instead.", "seed",
     "invalid_type"},
    {OPENAI_CHAT, "{\"model\":\"m\"," MSG(",\"user\":{}}"),
     "Invalid type for 'user': expected a string, but got an object instead.", "user",
     "invalid_type"},
    {OPENAI_CHAT, "{\"model\":\"m\"," MSG(",\"tools\":{}}"),
     "Invalid type for 'tools': expected an array, but got an object instead.", "tools",
     "invalid_type"},
    {OPENAI_COMPLETIONS, "{\"model\":\"m\"}", "'prompt' is a required property", "prompt",
     "missing_required_parameter"},
    {OPENAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":[]}",
     "Invalid 'prompt': empty array. Expected an array with minimum length 1, but got an empty "
     "array instead.",
     "prompt", "empty_array"},
    {OPENAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":{}}",
     "Invalid type for 'prompt': expected one of a string, array of strings, array of integers "
     "or array of arrays of integers, but got an object instead.",
     "prompt", "invalid_type"},
    {OPENAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":[\"a\",1]}",
     "Invalid type for 'prompt[1]': expected a string, but got an integer instead.", "prompt.[1]",
     "invalid_type"},
    {OPENAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":[1,\"a\"]}",
     "Invalid type for 'prompt[1]': expected an integer, but got a string instead.", "prompt.[1]",
     "invalid_type"},
    {OPENAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":[1,-2]}",
     "Invalid 'prompt[1]': integer below minimum value. Expected a value >= 0, but got -2 "
     "instead.",
     "prompt.[1]", "integer_below_min_value"},
    {OPENAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":[[1],[2,\"x\"]]}",
     "Invalid type for 'prompt[1][1]': expected an integer, but got a string instead.",
     "prompt.[1].[1]", "invalid_type"},
    {OPENAI_COMPLETIONS, "{\"model\":\"m\",\"prompt\":[[1],[]]}",
     "Invalid 'prompt[1]': empty array. Expected an array with minimum length 1, but got an "
     "empty array instead.",
     "prompt.[1]", "empty_array"},
    {OPENAI_EMBEDDINGS, "{\"model\":\"e\"}", "'input' is a required property", "input",
     "missing_required_parameter"},
    {OPENAI_EMBEDDINGS, "{\"model\":\"e\",\"input\":\"x\",\"encoding_format\":\"hex\"}",
     "Invalid value: 'hex'. Supported values are: 'float' and 'base64'.", "encoding_format",
     "invalid_value"},
    {OPENAI_EMBEDDINGS, "{\"model\":\"e\",\"input\":\"x\",\"dimensions\":0}",
     "Invalid 'dimensions': integer below minimum value. Expected a value >= 1, but got 0 "
     "instead.",
     "dimensions", "integer_below_min_value"},
};

static void test_bad_requests(void **state)
{
    struct openai_request r;
    struct openai_error e;
    openai_request_init(&r);
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        const struct bad_case *c = &bad_cases[i];
        int rc = parse(&r, c->ep, c->body, &e);
        if (rc != TS_PARSE)
            fail_msg("case %zu: rc %d", i, rc);
        if (strncmp(e.message, c->message, strlen(c->message)) != 0)
            fail_msg("case %zu: message\n  got  '%s'\n  want '%s'", i, e.message, c->message);
        if (strcmp(e.param, c->param) != 0 || strcmp(e.code, c->code) != 0)
            fail_msg("case %zu: param '%s' code '%s', want '%s' '%s'", i, e.param, e.code, c->param,
                     c->code);
        assert_int_equal(e.status, 400);
        assert_string_equal(e.type, "invalid_request_error");
        assert_null(r.root);
        assert_int_equal(r.n_messages, 0);
    }
    openai_request_release(&r);
}

static void test_limits(void **state)
{
    struct openai_request_limits lim;
    openai_request_limits_default(&lim);
    assert_int_equal(lim.max_messages, 4096);
    lim.max_messages = 2;
    lim.max_text_bytes = 10;
    lim.max_inputs = 2;
    lim.max_parts = 3;
    struct openai_request r;
    struct openai_error e;
    openai_request_init(&r);
    const char *b =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":"
        "\"user\",\"content\":\"b\"},{\"role\":\"user\",\"content\":\"c\"}]}";
    assert_int_equal(openai_request_parse(&r, OPENAI_CHAT, b, strlen(b), &lim, &e), TS_PARSE);
    assert_string_equal(e.message, "Invalid 'messages': array too long. Expected an array with "
                                   "maximum length 2, but got an array with length 3 instead.");
    b = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"0123456789\"}]}";
    assert_int_equal(openai_request_parse(&r, OPENAI_CHAT, b, strlen(b), &lim, &e), 0);
    b = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"0123456789x\"}]}";
    assert_int_equal(openai_request_parse(&r, OPENAI_CHAT, b, strlen(b), &lim, &e), TS_PARSE);
    assert_string_equal(e.code, "request_too_large");
    b = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
        "\"text\":\"a\"},{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"a\"},"
        "{\"type\":\"text\",\"text\":\"a\"}]}]}";
    assert_int_equal(openai_request_parse(&r, OPENAI_CHAT, b, strlen(b), &lim, &e), TS_PARSE);
    assert_string_equal(e.code, "array_above_max_length");
    b = "{\"model\":\"m\",\"prompt\":[\"a\",\"b\",\"c\"]}";
    assert_int_equal(openai_request_parse(&r, OPENAI_COMPLETIONS, b, strlen(b), &lim, &e),
                     TS_PARSE);
    assert_string_equal(e.param, "prompt");
    assert_string_equal(e.code, "array_above_max_length");
    /* a single token-id prompt is one item, however long */
    b = "{\"model\":\"m\",\"prompt\":[1,2,3,4,5]}";
    assert_int_equal(openai_request_parse(&r, OPENAI_COMPLETIONS, b, strlen(b), &lim, &e), 0);
    assert_int_equal(r.inputs[0].n_tokens, 5);
    assert_int_equal(openai_request_parse(&r, 99, b, strlen(b), &lim, &e), -EINVAL);
    openai_request_release(&r);
}

static void test_alloc_failure(void **state)
{
    static const char b[] =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}";
    struct openai_request r;
    struct openai_error e;
    openai_request_init(&r);
    ts_alloc_fail_after(0);
    int rc = openai_request_parse(&r, OPENAI_CHAT, b, sizeof(b) - 1, NULL, &e);
    ts_alloc_fail_after(-1);
    assert_int_equal(rc, -ENOMEM);
    assert_int_equal(e.status, 500);
    assert_string_equal(e.type, "server_error");
    assert_null(r.root);
    openai_request_release(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_full),     cmocka_unit_test(test_chat_minimal),
        cmocka_unit_test(test_completions),   cmocka_unit_test(test_embeddings),
        cmocka_unit_test(test_bad_requests),  cmocka_unit_test(test_limits),
        cmocka_unit_test(test_alloc_failure),
    };
    return cmocka_run_group_tests_name("openai_request", tests, NULL, NULL);
}
