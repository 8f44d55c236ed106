#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "llm/openai_chunk.h"

/* Decodes s with the fast path and, on a decoder of its own, with jansson
 * alone: the two must agree (result, error message, every field). */
static int decode_n(struct openai_decoder *d, const char *s, size_t n, struct openai_chunk *c)
{
    struct openai_decoder full;
    struct openai_chunk fc;
    openai_decoder_init(&full);
    int rc = openai_decode_chunk(d, s, n, c);
    int frc = openai_decode_chunk_full(&full, s, n, &fc);
    if (rc != frc || strcmp(openai_decoder_errmsg(d), openai_decoder_errmsg(&full)) != 0 ||
        !openai_chunk_same(c, &fc))
        fail_msg("fast and full decoders disagree on '%.*s': rc %d/%d, '%s'/'%s'", (int)n, s, rc,
                 frc, openai_decoder_errmsg(d), openai_decoder_errmsg(&full));
    openai_decoder_release(&full);
    return rc;
}

static int decode(struct openai_decoder *d, const char *s, struct openai_chunk *c)
{
    return decode_n(d, s, strlen(s), c);
}

static int decode_body(struct openai_decoder *d, const char *s, struct openai_chunk *c)
{
    return openai_decode_body(d, s, strlen(s), c);
}

static void test_done(void **state)
{
    struct openai_decoder d;
    struct openai_chunk c;
    openai_decoder_init(&d);
    assert_int_equal(decode(&d, "[DONE]", &c), 0);
    assert_int_equal(c.flags, OPENAI_CHUNK_DONE);
    assert_int_equal(decode(&d, " [DONE]\r\n", &c), 0);
    assert_int_equal(c.flags, OPENAI_CHUNK_DONE);
    assert_int_equal(decode(&d, "[DONE", &c), TS_PARSE);
    assert_int_equal(decode(&d, "[DONE]x", &c), TS_PARSE);
    assert_int_equal(decode_body(&d, "[DONE]", &c), TS_PARSE);
    openai_decoder_release(&d);
}

static void test_chat_chunks(void **state)
{
    struct openai_decoder d;
    struct openai_chunk c;
    openai_decoder_init(&d);

    /* OpenAI's first chunk: role and empty content */
    assert_int_equal(
        decode(&d,
               "{\"id\":\"chatcmpl-123\",\"object\":\"chat.completion.chunk\",\"created\":"
               "1694268190,\"model\":\"gpt-4o-mini\",\"system_fingerprint\":\"fp_44709d6fcb\","
               "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
               "\"logprobs\":null,\"finish_reason\":null}]}",
               &c),
        0);
    assert_int_equal(c.flags, OPENAI_CHUNK_ROLE);
    assert_int_equal(c.object, OPENAI_OBJECT_CHAT_CHUNK);
    assert_string_equal(c.id, "chatcmpl-123");
    assert_string_equal(c.model, "gpt-4o-mini");
    assert_int_equal(c.created, 1694268190);
    assert_int_equal(c.n_choices, 1);
    assert_int_equal(c.choices[0].index, 0);
    assert_string_equal(c.choices[0].role, "assistant");
    assert_non_null(c.choices[0].content);
    assert_int_equal(c.choices[0].content_len, 0);
    assert_null(c.choices[0].finish_reason);
    assert_false(c.usage.present);

    /* content with escapes and a NUL */
    assert_int_equal(decode(&d,
                            "{\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
                            "\"delta\":{\"content\":\"H\\u00e9\\n\\\"\\u0000x\"},"
                            "\"finish_reason\":null}],\"usage\":null}",
                            &c),
                     0);
    assert_int_equal(c.flags, OPENAI_CHUNK_CONTENT);
    assert_int_equal(c.choices[0].content_len, 7);
    assert_memory_equal(c.choices[0].content, "H\xc3\xa9\n\"\0x", 7);
    assert_null(c.choices[0].role);
    assert_null(c.id);
    assert_int_equal(c.created, -1);

    /* finish with empty delta */
    assert_int_equal(decode(&d,
                            "{\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,"
                            "\"finish_reason\":\"length\"}]}",
                            &c),
                     0);
    assert_int_equal(c.flags, OPENAI_CHUNK_FINISH);
    assert_string_equal(c.choices[0].finish_reason, "length");
    assert_null(c.choices[0].content);
    assert_int_equal(c.object, OPENAI_OBJECT_NONE);

    /* usage-only chunk */
    assert_int_equal(
        decode(&d,
               "{\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
               "\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":12,"
               "\"total_tokens\":21,\"prompt_tokens_details\":{\"cached_tokens\":4},"
               "\"completion_tokens_details\":{\"reasoning_tokens\":3}}}",
               &c),
        0);
    assert_int_equal(c.flags, OPENAI_CHUNK_USAGE);
    assert_int_equal(c.n_choices, 0);
    assert_true(c.usage.present);
    assert_int_equal(c.usage.prompt_tokens, 9);
    assert_int_equal(c.usage.completion_tokens, 12);
    assert_int_equal(c.usage.total_tokens, 21);
    assert_int_equal(c.usage.cached_tokens, 4);
    assert_int_equal(c.usage.reasoning_tokens, 3);

    /* vLLM: usage with choices null, usage counts as 12.0 */
    assert_int_equal(decode(&d, "{\"choices\":null,\"usage\":{\"prompt_tokens\":12.0}}", &c), 0);
    assert_int_equal(c.flags, OPENAI_CHUNK_USAGE);
    assert_int_equal(c.usage.prompt_tokens, 12);
    assert_int_equal(c.usage.completion_tokens, -1);
    openai_decoder_release(&d);
}

static void test_reasoning_and_tools(void **state)
{
    struct openai_decoder d;
    struct openai_chunk c;
    openai_decoder_init(&d);
    assert_int_equal(decode(&d,
                            "{\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":"
                            "\"think\",\"content\":null}}]}",
                            &c),
                     0);
    assert_int_equal(c.flags, OPENAI_CHUNK_REASONING);
    assert_string_equal(c.choices[0].reasoning, "think");
    assert_int_equal(c.choices[0].reasoning_len, 5);
    assert_null(c.choices[0].content);
    assert_int_equal(decode(&d, "{\"choices\":[{\"delta\":{\"reasoning\":\"r2\"}}]}", &c), 0);
    assert_int_equal(c.flags, OPENAI_CHUNK_REASONING);
    assert_string_equal(c.choices[0].reasoning, "r2");
    assert_int_equal(c.choices[0].index, -1);

    /* two choices, tool calls in the second */
    assert_int_equal(
        decode(&d,
               "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}},"
               "{\"index\":1,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\","
               "\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}},"
               "{\"index\":1,\"function\":{\"arguments\":\"{\\\"lo\"}}]},"
               "\"finish_reason\":\"tool_calls\"}]}",
               &c),
        0);
    assert_int_equal(c.flags, OPENAI_CHUNK_CONTENT | OPENAI_CHUNK_TOOL_CALLS | OPENAI_CHUNK_FINISH);
    assert_int_equal(c.n_choices, 2);
    assert_int_equal(c.choices[0].n_tool_calls, 0);
    assert_int_equal(c.choices[1].n_tool_calls, 2);
    const struct openai_tool_call *t = c.choices[1].tool_calls;
    assert_int_equal(t[0].index, 0);
    assert_string_equal(t[0].id, "call_1");
    assert_string_equal(t[0].type, "function");
    assert_string_equal(t[0].name, "get_weather");
    assert_int_equal(t[0].arguments_len, 0);
    assert_int_equal(t[1].index, 1);
    assert_null(t[1].id);
    assert_null(t[1].name);
    assert_string_equal(t[1].arguments, "{\"lo");
    assert_string_equal(c.choices[1].finish_reason, "tool_calls");
    openai_decoder_release(&d);
}

static void test_completions_chunk(void **state)
{
    struct openai_decoder d;
    struct openai_chunk c;
    openai_decoder_init(&d);
    assert_int_equal(decode(&d,
                            "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":5,"
                            "\"choices\":[{\"text\":\" world\",\"index\":0,\"logprobs\":null,"
                            "\"finish_reason\":null}],\"model\":\"m\"}",
                            &c),
                     0);
    assert_int_equal(c.flags, OPENAI_CHUNK_TEXT);
    assert_int_equal(c.object, OPENAI_OBJECT_TEXT);
    assert_string_equal(c.choices[0].text, " world");
    assert_int_equal(c.choices[0].text_len, 6);
    assert_int_equal(decode(&d,
                            "{\"choices\":[{\"text\":\"\",\"index\":0,\"finish_reason\":"
                            "\"length\",\"stop_reason\":null}]}",
                            &c),
                     0);
    assert_int_equal(c.flags, OPENAI_CHUNK_FINISH);
    openai_decoder_release(&d);
}

static void test_errors_mid_stream(void **state)
{
    struct openai_decoder d;
    struct openai_chunk c;
    openai_decoder_init(&d);
    assert_int_equal(decode(&d,
                            "{\"error\":{\"message\":\"The server had an error\",\"type\":"
                            "\"server_error\",\"param\":null,\"code\":null}}",
                            &c),
                     0);
    assert_int_equal(c.flags, OPENAI_CHUNK_ERROR);
    assert_string_equal(c.error.message, "The server had an error");
    assert_string_equal(c.error.type, "server_error");
    assert_null(c.error.param);
    assert_null(c.error.code);
    assert_int_equal(c.error.code_num, -1);

    /* vLLM: nested object "error" with numeric code */
    assert_int_equal(decode(&d,
                            "{\"error\":{\"object\":\"error\",\"message\":\"boom\",\"type\":"
                            "\"BadRequestError\",\"param\":null,\"code\":400}}",
                            &c),
                     0);
    assert_int_equal(c.flags, OPENAI_CHUNK_ERROR);
    assert_int_equal(c.error.code_num, 400);
    assert_string_equal(c.error.code, "400");

    /* older vLLM: the error is the top-level object */
    assert_int_equal(decode(&d,
                            "{\"object\":\"error\",\"message\":\"too long\",\"type\":"
                            "\"invalid_request_error\",\"param\":\"messages\",\"code\":"
                            "\"context_length_exceeded\"}",
                            &c),
                     0);
    assert_int_equal(c.flags, OPENAI_CHUNK_ERROR);
    assert_int_equal(c.object, OPENAI_OBJECT_ERROR);
    assert_string_equal(c.error.message, "too long");
    assert_string_equal(c.error.param, "messages");
    assert_string_equal(c.error.code, "context_length_exceeded");

    assert_int_equal(decode(&d, "{\"error\":\"plain\"}", &c), 0);
    assert_int_equal(c.flags, OPENAI_CHUNK_ERROR);
    assert_string_equal(c.error.message, "plain");
    openai_decoder_release(&d);
}

static void test_malformed(void **state)
{
    static const struct {
        const char *in;
        const char *msg; /* expected start of the message */
    } cases[] = {
        {"", "invalid JSON"},
        {"{", "invalid JSON"},
        {"{\"choices\":[}", "invalid JSON"},
        {"\xff", "invalid JSON"},
        {"[1,2]", "expected a JSON object, got an array"},
        {"\"s\"", "invalid JSON"},
        {"{\"id\":5}", "id: expected a string or null, got an integer"},
        {"{\"created\":\"x\"}", "created: expected an integer or null, got a string"},
        {"{\"created\":1.5}", "created: expected an integer or null, got a number"},
        {"{\"choices\":{}}", "choices: expected an array or null, got an object"},
        {"{\"choices\":[1]}", "choices[0]: expected an object, got an integer"},
        {"{\"choices\":[{\"delta\":[]}]}", "choices[0].delta: expected an object or null"},
        {"{\"choices\":[{},{\"delta\":{\"content\":5}}]}",
         "choices[1].delta.content: expected a string or null, got an integer"},
        {"{\"choices\":[{\"finish_reason\":true}]}",
         "choices[0].finish_reason: expected a string or null, got a boolean"},
        {"{\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"name\":1}}]}}]}",
         "choices[0].delta.tool_calls[0].function.name: expected a string or null"},
        {"{\"choices\":[{\"delta\":{\"tool_calls\":{}}}]}",
         "choices[0].delta.tool_calls: expected an array or null"},
        {"{\"usage\":{\"prompt_tokens\":\"9\"}}",
         "usage.prompt_tokens: expected an integer or null, got a string"},
        {"{\"usage\":[]}", "usage: expected an object or null, got an array"},
        {"{\"error\":5}", "error: expected an object, a string or null"},
        {"{\"error\":{\"code\":[]}}", "error.code: expected a string, an integer or null"},
    };
    struct openai_decoder d;
    struct openai_chunk c;
    openai_decoder_init(&d);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = decode(&d, cases[i].in, &c);
        if (rc != TS_PARSE ||
            strncmp(openai_decoder_errmsg(&d), cases[i].msg, strlen(cases[i].msg)) != 0)
            fail_msg("case %zu: rc %d msg '%s', want '%s'", i, rc, openai_decoder_errmsg(&d),
                     cases[i].msg);
        assert_int_equal(c.flags, 0);
        assert_int_equal(c.n_choices, 0);
    }
    /* a success clears the message */
    assert_int_equal(decode(&d, "{}", &c), 0);
    assert_string_equal(openai_decoder_errmsg(&d), "");
    assert_int_equal(c.flags, 0);
    openai_decoder_release(&d);
}

static void test_bodies(void **state)
{
    struct openai_decoder d;
    struct openai_chunk c;
    openai_decoder_init(&d);
    assert_int_equal(
        decode_body(&d,
                    "{\"id\":\"chatcmpl-9\",\"object\":\"chat.completion\",\"created\":7,"
                    "\"model\":\"m\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
                    "\"assistant\",\"content\":\"Hello there\",\"refusal\":null},"
                    "\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":{"
                    "\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7}}",
                    &c),
        0);
    assert_int_equal(c.object, OPENAI_OBJECT_CHAT);
    assert_int_equal(c.flags, OPENAI_CHUNK_ROLE | OPENAI_CHUNK_CONTENT | OPENAI_CHUNK_FINISH |
                                  OPENAI_CHUNK_USAGE);
    assert_string_equal(c.choices[0].content, "Hello there");
    assert_int_equal(c.usage.total_tokens, 7);

    assert_int_equal(decode_body(&d,
                                 "{\"object\":\"text_completion\",\"choices\":[{\"text\":\"abc\","
                                 "\"index\":0,\"finish_reason\":\"length\"}],\"usage\":{"
                                 "\"prompt_tokens\":1,\"completion_tokens\":3,\"total_tokens\":4}}",
                                 &c),
                     0);
    assert_int_equal(c.flags, OPENAI_CHUNK_TEXT | OPENAI_CHUNK_FINISH | OPENAI_CHUNK_USAGE);
    assert_string_equal(c.choices[0].text, "abc");

    /* embeddings, float arrays */
    assert_int_equal(decode_body(&d,
                                 "{\"object\":\"list\",\"data\":[{\"object\":\"embedding\","
                                 "\"index\":0,\"embedding\":[0.5,-1,2.25]},{\"object\":"
                                 "\"embedding\",\"index\":1,\"embedding\":[1e-3,0,3]}],"
                                 "\"model\":\"e\",\"usage\":{\"prompt_tokens\":8,"
                                 "\"total_tokens\":8}}",
                                 &c),
                     0);
    assert_int_equal(c.flags, OPENAI_CHUNK_EMBEDDINGS | OPENAI_CHUNK_USAGE);
    assert_int_equal(c.n_embeddings, 2);
    assert_int_equal(c.embeddings[0].dims, 3);
    assert_true(c.embeddings[0].values[0] == 0.5f);
    assert_true(c.embeddings[0].values[1] == -1.0f);
    assert_true(c.embeddings[0].values[2] == 2.25f);
    assert_int_equal(c.embeddings[1].index, 1);
    assert_true(c.embeddings[1].values[0] == 1e-3f);
    assert_int_equal(c.usage.prompt_tokens, 8);

    /* base64: 1.0f = 00 00 80 3f, -2.0f = 00 00 00 c0 -> "AACAPwAAAMA=" */
    assert_int_equal(decode_body(&d,
                                 "{\"object\":\"list\",\"data\":[{\"index\":0,\"embedding\":"
                                 "\"AACAPwAAAMA=\"}]}",
                                 &c),
                     0);
    assert_int_equal(c.embeddings[0].dims, 2);
    assert_true(c.embeddings[0].values[0] == 1.0f);
    assert_true(c.embeddings[0].values[1] == -2.0f);
    assert_int_equal(
        decode_body(&d, "{\"object\":\"list\",\"data\":[{\"embedding\":\"AACA\"}]}", &c), TS_PARSE);
    assert_int_equal(
        decode_body(&d, "{\"object\":\"list\",\"data\":[{\"embedding\":[1,\"x\"]}]}", &c),
        TS_PARSE);
    assert_string_equal(openai_decoder_errmsg(&d),
                        "data[0].embedding[1]: expected a number, got a string");

    /* error bodies */
    assert_int_equal(decode_body(&d,
                                 "{\"error\":{\"message\":\"Rate limit\",\"type\":\"requests\","
                                 "\"param\":null,\"code\":\"rate_limit_exceeded\"}}",
                                 &c),
                     0);
    assert_int_equal(c.flags, OPENAI_CHUNK_ERROR);
    assert_string_equal(c.error.code, "rate_limit_exceeded");
    assert_int_equal(decode_body(&d, "{\"detail\":\"Not Found\"}", &c), 0);
    assert_int_equal(c.flags, OPENAI_CHUNK_ERROR);
    assert_string_equal(c.error.message, "Not Found");
    /* detail means nothing in a stream chunk */
    assert_int_equal(decode(&d, "{\"detail\":\"Not Found\"}", &c), 0);
    assert_int_equal(c.flags, 0);
    openai_decoder_release(&d);
}

static void test_alloc_failure(void **state)
{
    static const char s[] = "{\"choices\":[{\"delta\":{\"content\":\"a\",\"tool_calls\":[{}]}}]}";
    struct openai_decoder d;
    struct openai_chunk c;
    /* jansson allocates with malloc; fail each of our own allocations */
    for (long n = 0; n < 3; n++) {
        openai_decoder_init(&d);
        ts_alloc_fail_after(n);
        int rc = decode(&d, s, &c);
        ts_alloc_fail_after(-1);
        assert_true(rc == 0 || rc == -ENOMEM);
        if (rc == -ENOMEM)
            assert_int_equal(c.flags, 0);
        else
            assert_int_equal(c.flags, OPENAI_CHUNK_CONTENT | OPENAI_CHUNK_TOOL_CALLS);
        openai_decoder_release(&d);
    }
}

/* SIMD: the fast path with simdjson, jansson with yajl (a value yajl
 * refuses and simdjson reads alike) */
enum path { FAST, FULL, SIMD };

/* Odd and hostile chunks: each decoded by both paths (decode_n() checks
 * they agree), with the path the fast decoder must take. */
/* Each case through the fast path's parser (simdjson when built in), and
 * through yajl. */
static void fast_path_agrees(bool yajl_only);

static void test_fast_path_agrees(void **state)
{
    (void)state;
    fast_path_agrees(false);
    fast_path_agrees(true);
}

static void fast_path_agrees(bool yajl_only)
{
    static const struct {
        const char *in;
        int rc;
        enum path path;
    } cases[] = {
        /* what servers send */
        {"{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
         "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"logprobs\":null,"
         "\"finish_reason\":null}]}",
         0, FAST},
        {"{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],"
         "\"usage\":null}",
         0, FAST},
        {"{\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":12,"
         "\"total_tokens\":21,\"prompt_tokens_details\":{\"cached_tokens\":3},"
         "\"completion_tokens_details\":{\"reasoning_tokens\":4,\"x\":[1]}}}",
         0, FAST},
        {"{\"object\":\"text_completion\",\"choices\":[{\"text\":\"a\",\"index\":0,"
         "\"logprobs\":{\"tokens\":[\"a\"],\"top_logprobs\":[{\"a\":-0.1}]}}]}",
         0, FAST},
        {"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}},"
         "{\"index\":1,\"delta\":{\"content\":\"b\"},\"finish_reason\":\"length\"}]}",
         0, FAST},
        {"{\"choices\":[{\"delta\":{\"reasoning_content\":null,\"reasoning\":\"r\"}}]}", 0, FAST},
        {"{\"choices\":[{\"delta\":{\"reasoning\":\"r\",\"reasoning_content\":\"rc\"}}]}", 0, FAST},
        {"{\"choices\":[{\"delta\":{\"tool_calls\":[]}}]}", 0, FAST},
        {"{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":"
         "{\"arguments\":\"{\\\"a\"}}]}}]}",
         0, FAST},
        /* tool call fragments in several choices (the array grows while they come) */
        {"{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\","
         "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}},{\"index\":1,"
         "\"function\":{\"name\":null,\"arguments\":\"{\\\"x\\\":\\u0000\"}},{},{},{}]}},"
         "{\"delta\":{\"tool_calls\":[]}},{\"delta\":{\"tool_calls\":[{\"id\":\"c\","
         "\"extra\":[1]},{\"function\":null},{\"index\":2}]}}]}",
         0, FAST},
        {"{\"choices\":[{\"delta\":{\"tool_calls\":[null]}}]}", TS_PARSE, FULL},
        {"{\"choices\":[{\"delta\":{\"tool_calls\":[1]}}]}", TS_PARSE, FULL},
        {"{\"choices\":[{\"delta\":{\"tool_calls\":[[]]}}]}", TS_PARSE, FULL},
        {"{\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":[]}]}}]}", TS_PARSE, FULL},
        {"{\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":1}}]}}]}",
         TS_PARSE, FULL},
        {"{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":\"0\"}]}}]}", TS_PARSE, FULL},
        {"{\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"a\",\"id\":\"b\"}]}}]}", 0, FULL},
        /* nulls everywhere a value may be null */
        {"{\"id\":null,\"object\":null,\"model\":null,\"created\":null,\"error\":null,"
         "\"usage\":null,\"choices\":null}",
         0, FAST},
        {"{\"choices\":[{\"index\":null,\"text\":null,\"finish_reason\":null,\"delta\":null}]}", 0,
         FAST},
        {"{\"choices\":[{\"delta\":{\"role\":null,\"content\":null,\"tool_calls\":null}}]}", 0,
         FAST},
        {"{\"usage\":{\"prompt_tokens\":null,\"prompt_tokens_details\":null}}", 0, FAST},
        /* escapes */
        {"{\"choices\":[{\"delta\":{\"content\":\"a\\\"b\\\\c\\/d\\n\\t\\r\\b\\f\\u00e9\"}}]}", 0,
         FAST},
        {"{\"choices\":[{\"delta\":{\"content\":\"a\\u0000b\"}}]}", 0, FAST},
        {"{\"choices\":[{\"delta\":{\"content\":\"\\ud83d\\ude00\"}}]}", 0, FAST},
        {"{\"choices\":[{\"delta\":{\"content\":\"\\uD83D\\uDE00x\"}}]}", 0, FAST},
        {"{\"choices\":[{\"delta\":{\"content\":\"\\ud83d\"}}]}", TS_PARSE, FULL},
        {"{\"choices\":[{\"delta\":{\"content\":\"\\ude00\"}}]}", TS_PARSE, FULL},
        {"{\"choices\":[{\"delta\":{\"content\":\"\\ud83d\\u0041\"}}]}", TS_PARSE, FULL},
        {"{\"choices\":[{\"delta\":{\"content\":\"\\ud83d\\ud83d\"}}]}", TS_PARSE, FULL},
        {"{\"choices\":[{\"delta\":{\"content\":\"\\\\ud83d\"}}]}", 0, FAST},
        {"{\"choices\":[{\"delta\":{\"content\":\"\\x\"}}]}", TS_PARSE, FULL},
        {"{\"choices\":[{\"delta\":{\"content\":\"\\u12\"}}]}", TS_PARSE, FULL},
        /* raw UTF-8: valid, overlong, a surrogate, past U+10FFFF, a NUL byte */
        {"{\"choices\":[{\"delta\":{\"content\":\"\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\"}}]}", 0,
         FAST},
        {"{\"choices\":[{\"delta\":{\"content\":\"\xc0\x80\"}}]}", TS_PARSE, FULL},
        {"{\"choices\":[{\"delta\":{\"content\":\"\xed\xa0\x80\"}}]}", TS_PARSE, FULL},
        {"{\"choices\":[{\"delta\":{\"content\":\"\xf5\x80\x80\x80\"}}]}", TS_PARSE, FULL},
        {"{\"x\":\"\xe4\xb8\"}", TS_PARSE, FULL},
        {"{\"choices\":[{\"delta\":{\"content\":\"a\tb\"}}]}", TS_PARSE, FULL},
        /* wrong types */
        {"{\"choices\":[{\"delta\":{\"content\":5}}]}", TS_PARSE, FULL},
        {"{\"choices\":[{\"index\":\"0\"}]}", TS_PARSE, FULL},
        {"{\"choices\":[null]}", TS_PARSE, FULL},
        {"{\"choices\":[[]]}", TS_PARSE, FULL},
        {"{\"choices\":\"x\"}", TS_PARSE, FULL},
        {"{\"object\":1}", TS_PARSE, FULL},
        {"{\"usage\":{\"completion_tokens_details\":5}}", TS_PARSE, FULL},
        {"{\"usage\":{\"total_tokens\":true}}", TS_PARSE, FULL},
        {"{\"created\":1.0}", 0, FULL},
        {"{\"created\":1.5}", TS_PARSE, FULL},
        {"{\"created\":9223372036854775807}", 0, FAST},
        {"{\"created\":9223372036854775808}", TS_PARSE, FULL},
        /* yajl refuses INT64_MIN, simdjson reads it: the same value either way */
        {"{\"created\":-9223372036854775808}", 0, SIMD},
        {"{\"x\":1e400}", TS_PARSE, FULL},
        {"{\"x\":1e-400,\"y\":-0,\"z\":[true,false,null,0.5]}", 0, FAST},
        {"{\"x\":01}", TS_PARSE, FULL},
        /* error events */
        {"{\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\",\"code\":503}}", 0,
         FULL},
        {"{\"object\":\"error\",\"message\":\"m\",\"code\":400}", 0, FULL},
        {"{\"error\":\"plain\"}", 0, FULL},
        {"{\"error\":5}", TS_PARSE, FULL},
        /* duplicate keys: jansson keeps the last */
        {"{\"choices\":[{\"delta\":{\"content\":\"a\",\"content\":null}}]}", 0, FULL},
        {"{\"id\":\"a\",\"id\":\"b\"}", 0, FULL},
        {"{\"x\":1,\"x\":2}", 0, FAST},
        /* keys with NUL, "message", odd documents */
        {"{\"choices\":[{\"delta\":{\"con\\u0000tent\":\"a\"}}]}", TS_PARSE, FULL},
        {"{\"x\":{\"a\\u0000\":1}}", TS_PARSE, FULL},
        {"{\"choices\":[{\"message\":{\"content\":\"a\"}}]}", 0, FULL},
        {"{}", 0, FAST},
        {"{}x", TS_PARSE, FULL},
        {"{\"a\":6}\"", TS_PARSE, FULL},
        {"{} \"}", TS_PARSE, FULL},
        {"{}1", TS_PARSE, FULL},
        {"{}{}", TS_PARSE, FULL},
        {"{\v}", TS_PARSE, FULL},
        {"{\f}", TS_PARSE, FULL},
        {"{\"a\":1,}", TS_PARSE, FULL},
        {"{\"a\" /* c */ :1}", TS_PARSE, FULL},
        {"[]", TS_PARSE, FULL},
        {"", TS_PARSE, FULL},
        {"{\"choices\":[{\"delta\":{\"content\":\"a\"}}]", TS_PARSE, FULL},
    };
    struct openai_decoder d;
    struct openai_chunk c;
    openai_decoder_init(&d);
    d.yajl_only = yajl_only;
    bool simd = TS_HAVE_SIMDJSON && !yajl_only;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t fast = d.n_fast;
        int rc = decode(&d, cases[i].in, &c);
        enum path path = d.n_fast > fast ? FAST : FULL;
        enum path want = cases[i].path == SIMD ? (simd ? FAST : FULL) : cases[i].path;
        if (rc != cases[i].rc || path != want)
            fail_msg("case %zu '%s' (%s): rc %d (want %d), %s path", i, cases[i].in,
                     simd ? "simdjson" : "yajl", rc, cases[i].rc, path == FAST ? "fast" : "full");
    }
    /* a NUL byte or invalid UTF-8 in the text itself, at every offset of an
     * otherwise ASCII chunk (the ASCII scan goes 8 bytes at a time) */
    static const char base[] = "{\"id\":\"abcdefghijklmnopqrstuvwxyz0123456789\"}";
    static const char bad[][3] = {"\0", "\xff", "\xc0\x80"};
    for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
        for (size_t at = 7; at < sizeof(base) - 3; at++) {
            char t[sizeof(base) + 2];
            size_t bl = b == 2 ? 2 : 1;
            memcpy(t, base, at);
            memcpy(t + at, bad[b], bl);
            memcpy(t + at + bl, base + at, sizeof(base) - 1 - at);
            uint64_t fb = d.n_fallback;
            assert_int_equal(decode_n(&d, t, sizeof(base) - 1 + bl, &c), TS_PARSE);
            assert_int_equal(d.n_fallback, fb + 1);
        }
    }
    openai_decoder_release(&d);
}

/* The values the fast path hands out, beyond agreeing with jansson. */
static void test_fast_path_values(void **state)
{
    struct openai_decoder d;
    struct openai_chunk c;
    openai_decoder_init(&d);
    assert_int_equal(decode(&d,
                            "{\"choices\":[{\"delta\":{\"content\":\"a\\u0000\\ud83d\\ude00\\n\"}},"
                            "{\"index\":1,\"delta\":{\"reasoning\":\"r\",\"role\":\"assistant\"},"
                            "\"finish_reason\":\"stop\"}],\"usage\":{\"total_tokens\":7}}",
                            &c),
                     0);
    assert_int_equal(d.n_fast, 1);
    assert_int_equal(c.n_choices, 2);
    assert_int_equal(c.choices[0].content_len, 7);
    assert_memory_equal(c.choices[0].content, "a\0\xf0\x9f\x98\x80\n", 8);
    assert_int_equal(c.choices[0].index, -1);
    assert_string_equal(c.choices[1].reasoning, "r");
    assert_string_equal(c.choices[1].role, "assistant");
    assert_string_equal(c.choices[1].finish_reason, "stop");
    assert_int_equal(c.flags, OPENAI_CHUNK_CONTENT | OPENAI_CHUNK_REASONING | OPENAI_CHUNK_ROLE |
                                  OPENAI_CHUNK_FINISH | OPENAI_CHUNK_USAGE);
    assert_true(c.usage.present);
    assert_int_equal(c.usage.total_tokens, 7);
    assert_int_equal(c.usage.prompt_tokens, -1);
    /* known keys are found by hash; a name of the same length, first and
     * last byte as a known one ("inbex", "index") is not it, nor is a known
     * name in another kind of object */
    assert_true(openai_decoder_keys_hashed());
    assert_int_equal(
        decode(&d, "{\"choices\":[{\"inbex\":5,\"index\":2,\"id\":\"x\"}],\"index\":9}", &c), 0);
    assert_int_equal(c.n_choices, 1);
    assert_int_equal(c.choices[0].index, 2);
    assert_null(c.id);
    /* a chunk longer than simdjson's buffer (JSON_SIMD_MAX_TEXT) still
     * takes the fast path, through yajl */
    static char huge[70000 + 64];
    int bn = snprintf(huge, sizeof(huge), "{\"choices\":[{\"delta\":{\"content\":\"");
    memset(huge + bn, 'x', 70000);
    snprintf(huge + bn + 70000, sizeof(huge) - (size_t)bn - 70000, "\"}}]}");
    uint64_t fast_before = d.n_fast;
    assert_int_equal(decode(&d, huge, &c), 0);
    assert_int_equal(d.n_fast, fast_before + 1);
    assert_int_equal(c.choices[0].content_len, 70000);
    /* deep nesting in a field nobody reads: yajl has no depth limit, jansson
     * refuses past 2048 levels; the fast path hands both to jansson */
    static char deep[2 * 3000 + 16];
    for (int depth = 100; depth <= 3000; depth += 2900) {
        size_t n = 0;
        n += (size_t)snprintf(deep, sizeof(deep), "{\"x\":");
        for (int k = 0; k < depth; k++)
            deep[n++] = '[';
        for (int k = 0; k < depth; k++)
            deep[n++] = ']';
        deep[n++] = '}';
        uint64_t fb = d.n_fallback;
        int rc = decode_n(&d, deep, n, &c);
        assert_int_equal(rc, depth == 100 ? 0 : TS_PARSE);
        assert_int_equal(d.n_fallback, fb + 1);
    }
    /* yajl's memory comes from the decoder's 4 KiB yheap: a string of 12,000
     * escapes outgrows it (its decode buffer moves to malloc mid-string), and
     * the next chunk starts from an empty yheap again */
    static char big[12000 * 2 + 64];
    size_t n = (size_t)snprintf(big, sizeof(big), "{\"choices\":[{\"delta\":{\"content\":\"");
    for (int k = 0; k < 12000; k++) {
        big[n++] = '\\';
        big[n++] = k % 2 ? 'n' : 't';
    }
    n += (size_t)snprintf(big + n, sizeof(big) - n, "\"}}]}");
    for (int round = 0; round < 2; round++) {
        uint64_t fast = d.n_fast;
        assert_int_equal(decode_n(&d, big, n, &c), 0);
        assert_int_equal(d.n_fast, fast + 1);
        assert_int_equal(c.choices[0].content_len, 12000);
        assert_int_equal(c.choices[0].content[0], '\t');
        assert_int_equal(c.choices[0].content[11999], '\n');
        assert_int_equal(decode(&d, "{\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}", &c), 0);
        assert_string_equal(c.choices[0].content, "ok");
    }
    openai_decoder_release(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_done),
        cmocka_unit_test(test_chat_chunks),
        cmocka_unit_test(test_reasoning_and_tools),
        cmocka_unit_test(test_completions_chunk),
        cmocka_unit_test(test_errors_mid_stream),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_bodies),
        cmocka_unit_test(test_alloc_failure),
        cmocka_unit_test(test_fast_path_agrees),
        cmocka_unit_test(test_fast_path_values),
    };
    return cmocka_run_group_tests_name("openai_chunk", tests, NULL, NULL);
}
