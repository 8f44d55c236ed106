#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "llm/openai_chunk.h"
#include "llm/openai_encode.h"

#define PFX_CHAT                                                                                   \
    "data: {\"id\":\"chatcmpl-abc\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,"  \
    "\"model\":\"llama\",\"choices\":["
#define PFX_TEXT                                                                                   \
    "data: {\"id\":\"cmpl-abc\",\"object\":\"text_completion\",\"created\":1700000000,"            \
    "\"model\":\"llama\",\"choices\":["

static void test_chat_stream_bytes(void **state)
{
    struct openai_stream_enc e;
    struct buf out;
    buf_init(&out, 1 << 20);
    assert_int_equal(openai_stream_enc_init(&e, OPENAI_CHAT, "chatcmpl-abc", 1700000000, "llama"),
                     0);
    assert_int_equal(openai_stream_enc_role(&e, &out), 0);
    assert_string_equal(buf_cstr(&out),
                        PFX_CHAT "{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                                 "\"logprobs\":null,\"finish_reason\":null}]}\n\n");
    buf_reset(&out);
    assert_int_equal(openai_stream_enc_content(&e, &out, "Hello", 5), 0);
    assert_string_equal(buf_cstr(&out), PFX_CHAT "{\"index\":0,\"delta\":{\"content\":\"Hello\"},"
                                                 "\"logprobs\":null,\"finish_reason\":null}]}\n\n");
    buf_reset(&out);
    assert_int_equal(openai_stream_enc_finish(&e, &out, "length"), 0);
    assert_string_equal(buf_cstr(&out), PFX_CHAT "{\"index\":0,\"delta\":{},\"logprobs\":null,"
                                                 "\"finish_reason\":\"length\"}]}\n\n");
    buf_reset(&out);
    assert_int_equal(openai_stream_enc_usage(&e, &out, 9, 12), 0);
    assert_string_equal(buf_cstr(&out),
                        PFX_CHAT "],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":12,"
                                 "\"total_tokens\":21}}\n\n");
    buf_reset(&out);
    assert_int_equal(openai_stream_enc_done(&out), 0);
    assert_string_equal(buf_cstr(&out), "data: [DONE]\n\n");
    openai_stream_enc_release(&e);
    buf_release(&out);
}

static void test_text_stream_bytes(void **state)
{
    struct openai_stream_enc e;
    struct buf out;
    buf_init(&out, 1 << 20);
    assert_int_equal(
        openai_stream_enc_init(&e, OPENAI_COMPLETIONS, "cmpl-abc", 1700000000, "llama"), 0);
    assert_int_equal(openai_stream_enc_role(&e, &out), 0);
    assert_int_equal(out.len, 0);
    assert_int_equal(openai_stream_enc_content(&e, &out, " a\tb", 4), 0);
    assert_int_equal(openai_stream_enc_finish(&e, &out, NULL), 0);
    assert_string_equal(buf_cstr(&out),
                        PFX_TEXT "{\"index\":0,\"text\":\" a\\tb\",\"logprobs\":null,"
                                 "\"finish_reason\":null}]}\n\n" PFX_TEXT
                                 "{\"index\":0,\"text\":\"\",\"logprobs\":null,"
                                 "\"finish_reason\":\"stop\"}]}\n\n");
    openai_stream_enc_release(&e);
    assert_int_equal(openai_stream_enc_init(&e, OPENAI_EMBEDDINGS, "x", 0, "m"), -EINVAL);
    openai_stream_enc_release(&e);
    buf_release(&out);
}

static void check_escape(const char *in, size_t n, const char *want)
{
    struct buf out;
    buf_init(&out, 1 << 16);
    assert_int_equal(openai_json_escape(&out, in, n), 0);
    assert_string_equal(buf_cstr(&out), want);
    buf_release(&out);
}

static void test_escape(void **state)
{
    check_escape("plain", 5, "plain");
    check_escape("\"q\" \\ /", 7, "\\\"q\\\" \\\\ /");
    check_escape("\n\r\t\b\f\x01\x1f\x7f", 8, "\\n\\r\\t\\b\\f\\u0001\\u001f\x7f");
    check_escape("a\0b", 3, "a\\u0000b");
    /* valid UTF-8 passes: 2, 3 and 4 byte sequences */
    check_escape("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    /* invalid: lone continuation, overlong, surrogate, too big, cut short */
    check_escape("\x80", 1, "\\ufffd");
    check_escape("\xc0\x80", 2, "\\ufffd\\ufffd");
    check_escape("\xed\xa0\x80", 3, "\\ufffd\\ufffd\\ufffd");
    check_escape("\xf4\x90\x80\x80", 4, "\\ufffd\\ufffd\\ufffd\\ufffd");
    check_escape("x\xe2\x82", 3, "x\\ufffd\\ufffd");
    check_escape("\xe2\x82x", 3, "\\ufffd\\ufffdx");
}

/* Strips "data: " and "\n\n" and checks the chunk is one JSON object. */
static const char *chunk_json(const char *chunk, size_t len, size_t *json_len)
{
    assert_true(len > 8);
    assert_memory_equal(chunk, "data: ", 6);
    assert_memory_equal(chunk + len - 2, "\n\n", 2);
    *json_len = len - 8;
    return chunk + 6;
}

static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Encoder and decoder (and jansson) agree on every chunk of streams with
 * random texts: ASCII with control characters, valid UTF-8, and raw bytes. */
static void test_round_trip(void **state)
{
    static const char *const pieces[] = {
        "a", " ", "\"", "\\",  "\n", "\t", "\x01", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
        "{", "}", "/",  "\x7f"};
    struct openai_decoder d;
    openai_decoder_init(&d);
    for (int ep = OPENAI_CHAT; ep <= OPENAI_COMPLETIONS; ep++) {
        struct openai_stream_enc e;
        assert_int_equal(openai_stream_enc_init(&e, ep, "id-\"x\"", 42, "m\\odel"), 0);
        for (int iter = 0; iter < 400; iter++) {
            char text[256];
            size_t n = 0;
            bool raw = iter % 4 == 3;
            while (n < 200) {
                if (raw) {
                    text[n++] = (char)rnd();
                } else {
                    const char *p = pieces[rnd() % (sizeof(pieces) / sizeof(pieces[0]))];
                    memcpy(text + n, p, strlen(p));
                    n += strlen(p);
                }
                if (rnd() % 16 == 0)
                    break;
            }
            struct buf out;
            buf_init(&out, 1 << 16);
            assert_int_equal(openai_stream_enc_content(&e, &out, text, n), 0);
            size_t jl;
            const char *js = chunk_json(out.data, out.len, &jl);
            struct openai_chunk c;
            assert_int_equal(openai_decode_chunk(&d, js, jl, &c), 0);
            assert_string_equal(c.id, "id-\"x\"");
            assert_string_equal(c.model, "m\\odel");
            assert_int_equal(c.created, 42);
            assert_int_equal(c.n_choices, 1);
            assert_null(c.choices[0].finish_reason);
            const char *got = ep == OPENAI_CHAT ? c.choices[0].content : c.choices[0].text;
            size_t got_len = ep == OPENAI_CHAT ? c.choices[0].content_len : c.choices[0].text_len;
            assert_int_equal(c.object,
                             ep == OPENAI_CHAT ? OPENAI_OBJECT_CHAT_CHUNK : OPENAI_OBJECT_TEXT);
            if (!raw) {
                assert_int_equal(got_len, n);
                assert_memory_equal(got, text, n);
            }
            /* jansson agrees */
            json_error_t je;
            json_t *j = json_loadb(js, jl, JSON_ALLOW_NUL, &je);
            assert_non_null(j);
            json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
            json_t *s = ep == OPENAI_CHAT ? json_object_get(json_object_get(ch, "delta"), "content")
                                          : json_object_get(ch, "text");
            assert_int_equal(json_string_length(s), got_len);
            assert_memory_equal(json_string_value(s), got, got_len);
            assert_true(json_is_null(json_object_get(ch, "logprobs")));
            json_decref(j);
            buf_release(&out);
        }
        /* role, finish, usage, done */
        struct buf out;
        buf_init(&out, 1 << 16);
        struct openai_chunk c;
        size_t jl;
        const char *js;
        if (ep == OPENAI_CHAT) {
            assert_int_equal(openai_stream_enc_role(&e, &out), 0);
            js = chunk_json(out.data, out.len, &jl);
            assert_int_equal(openai_decode_chunk(&d, js, jl, &c), 0);
            assert_int_equal(c.flags, OPENAI_CHUNK_ROLE);
            assert_string_equal(c.choices[0].role, "assistant");
            buf_reset(&out);
        }
        assert_int_equal(openai_stream_enc_finish(&e, &out, "stop"), 0);
        js = chunk_json(out.data, out.len, &jl);
        assert_int_equal(openai_decode_chunk(&d, js, jl, &c), 0);
        assert_int_equal(c.flags, OPENAI_CHUNK_FINISH);
        assert_string_equal(c.choices[0].finish_reason, "stop");
        buf_reset(&out);
        assert_int_equal(openai_stream_enc_usage(&e, &out, 100, 250), 0);
        js = chunk_json(out.data, out.len, &jl);
        assert_int_equal(openai_decode_chunk(&d, js, jl, &c), 0);
        assert_int_equal(c.flags, OPENAI_CHUNK_USAGE);
        assert_int_equal(c.n_choices, 0);
        assert_int_equal(c.usage.prompt_tokens, 100);
        assert_int_equal(c.usage.completion_tokens, 250);
        assert_int_equal(c.usage.total_tokens, 350);
        buf_reset(&out);
        assert_int_equal(openai_stream_enc_done(&out), 0);
        js = chunk_json(out.data, out.len, &jl);
        assert_int_equal(openai_decode_chunk(&d, js, jl, &c), 0);
        assert_int_equal(c.flags, OPENAI_CHUNK_DONE);
        buf_release(&out);
        openai_stream_enc_release(&e);
    }
    openai_decoder_release(&d);
}

static void test_responses(void **state)
{
    struct openai_decoder d;
    struct openai_chunk c;
    struct buf out;
    openai_decoder_init(&d);
    buf_init(&out, 1 << 16);
    assert_int_equal(openai_encode_response(&out, OPENAI_CHAT, "chatcmpl-1", 5, "m", "Hi \"you\"",
                                            8, "stop", 3, 4),
                     0);
    assert_string_equal(buf_cstr(&out),
                        "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":5,"
                        "\"model\":\"m\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
                        "\"assistant\",\"content\":\"Hi \\\"you\\\"\"},\"logprobs\":null,"
                        "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,"
                        "\"completion_tokens\":4,\"total_tokens\":7}}");
    assert_int_equal(openai_decode_body(&d, out.data, out.len, &c), 0);
    assert_int_equal(c.object, OPENAI_OBJECT_CHAT);
    assert_string_equal(c.choices[0].content, "Hi \"you\"");
    assert_int_equal(c.usage.total_tokens, 7);
    buf_reset(&out);
    assert_int_equal(openai_encode_response(&out, OPENAI_COMPLETIONS, "cmpl-1", 5, "m", "abc", 3,
                                            "length", 1, 3),
                     0);
    assert_string_equal(buf_cstr(&out),
                        "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":5,"
                        "\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\"abc\","
                        "\"logprobs\":null,\"finish_reason\":\"length\"}],\"usage\":{"
                        "\"prompt_tokens\":1,\"completion_tokens\":3,\"total_tokens\":4}}");
    assert_int_equal(openai_decode_body(&d, out.data, out.len, &c), 0);
    assert_int_equal(c.flags, OPENAI_CHUNK_TEXT | OPENAI_CHUNK_FINISH | OPENAI_CHUNK_USAGE);
    assert_int_equal(
        openai_encode_response(&out, OPENAI_EMBEDDINGS, "x", 0, "m", "", 0, NULL, 0, 0), -EINVAL);
    buf_release(&out);
    openai_decoder_release(&d);
}

static void test_embeddings(void **state)
{
    const float v[6] = {0.5f, -1.0f, 3.14159274f, 1e-7f, INFINITY, 0.1f};
    struct openai_decoder d;
    struct openai_chunk c;
    struct buf out;
    openai_decoder_init(&d);
    buf_init(&out, 1 << 16);
    assert_int_equal(openai_encode_embeddings(&out, "emb", v, 2, 3, OPENAI_ENCODING_FLOAT, 11), 0);
    assert_string_equal(buf_cstr(&out),
                        "{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"index\":0,"
                        "\"embedding\":[0.5,-1,3.14159274]},{\"object\":\"embedding\",\"index\":1,"
                        "\"embedding\":[1.00000001e-07,0,0.100000001]}],\"model\":\"emb\","
                        "\"usage\":{\"prompt_tokens\":11,\"total_tokens\":11}}");
    assert_int_equal(openai_decode_body(&d, out.data, out.len, &c), 0);
    assert_int_equal(c.n_embeddings, 2);
    for (int i = 0; i < 6; i++) {
        float want = isfinite(v[i]) ? v[i] : 0.0f;
        assert_true(c.embeddings[i / 3].values[i % 3] == want);
    }
    buf_reset(&out);
    /* base64 of 0.5f, -1.0f: 00 00 00 3f 00 00 80 bf */
    assert_int_equal(openai_encode_embeddings(&out, "emb", v, 1, 2, OPENAI_ENCODING_BASE64, 1), 0);
    assert_non_null(strstr(buf_cstr(&out), "\"embedding\":\"AAAAPwAAgL8=\""));
    buf_reset(&out);
    assert_int_equal(openai_encode_embeddings(&out, "emb", v, 2, 3, OPENAI_ENCODING_BASE64, 1), 0);
    assert_int_equal(openai_decode_body(&d, out.data, out.len, &c), 0);
    assert_int_equal(c.n_embeddings, 2);
    assert_int_equal(c.embeddings[1].dims, 3);
    for (int i = 0; i < 6; i++) {
        float got = c.embeddings[i / 3].values[i % 3];
        if (isfinite(v[i]))
            assert_true(got == v[i]);
        else
            assert_true(isinf(got)); /* base64 keeps the bits */
    }
    buf_release(&out);
    openai_decoder_release(&d);
}

static void test_error_body(void **state)
{
    struct openai_error e;
    struct buf out;
    buf_init(&out, 1 << 16);
    openai_error_set(&e, 400, "invalid_request_error", "max_tokens", "invalid_type",
                     "Invalid type for '%s': expected an integer, but got a string instead.",
                     "max_tokens");
    assert_int_equal(openai_encode_error(&out, &e), 0);
    assert_string_equal(buf_cstr(&out),
                        "{\"error\":{\"message\":\"Invalid type for 'max_tokens': expected an "
                        "integer, but got a string instead.\",\"type\":\"invalid_request_error\","
                        "\"param\":\"max_tokens\",\"code\":\"invalid_type\"}}");
    buf_reset(&out);
    openai_error_set(&e, 429, "requests", NULL, NULL, "Too many \"requests\"");
    assert_int_equal(openai_encode_error(&out, &e), 0);
    assert_string_equal(buf_cstr(&out), "{\"error\":{\"message\":\"Too many \\\"requests\\\"\","
                                        "\"type\":\"requests\",\"param\":null,\"code\":null}}");
    struct openai_decoder d;
    struct openai_chunk c;
    openai_decoder_init(&d);
    assert_int_equal(openai_decode_body(&d, out.data, out.len, &c), 0);
    assert_int_equal(c.flags, OPENAI_CHUNK_ERROR);
    assert_string_equal(c.error.message, "Too many \"requests\"");
    assert_null(c.error.param);
    openai_decoder_release(&d);
    /* long messages are cut at a character boundary */
    char longmsg[700];
    memset(longmsg, 'a', sizeof(longmsg));
    memcpy(longmsg + 510, "\xe2\x82\xac", 3);
    longmsg[sizeof(longmsg) - 1] = '\0';
    openai_error_set(&e, 400, NULL, NULL, NULL, "%s", longmsg);
    assert_int_equal(strlen(e.message), 510);
    assert_string_equal(e.type, "");
    buf_reset(&out);
    assert_int_equal(openai_encode_error(&out, &e), 0);
    assert_non_null(strstr(buf_cstr(&out), "\"type\":\"invalid_request_error\""));
    buf_release(&out);
}

static void test_caps_and_failures(void **state)
{
    struct openai_stream_enc e;
    assert_int_equal(openai_stream_enc_init(&e, OPENAI_CHAT, "chatcmpl-abc", 1, "m"), 0);
    /* room for [DONE], one chunk's fixed bytes and 20 bytes of text */
    const size_t close_len = strlen("\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n");
    assert_int_equal(close_len, 44);
    struct buf out;
    buf_init(&out, 14 + e.head.len + close_len + 20);
    assert_int_equal(openai_stream_enc_done(&out), 0);
    char big[300];
    memset(big, 'x', sizeof(big));
    assert_int_equal(openai_stream_enc_content(&e, &out, big, 21), TS_TOOBIG);
    assert_string_equal(buf_cstr(&out), "data: [DONE]\n\n");
    /* escaping can overflow where the raw text fits: 11 newlines take 22 */
    memset(big, '\n', 40);
    assert_int_equal(openai_stream_enc_content(&e, &out, big, 11), TS_TOOBIG);
    assert_string_equal(buf_cstr(&out), "data: [DONE]\n\n");
    assert_int_equal(openai_stream_enc_content(&e, &out, big, 10), 0);
    assert_int_equal(out.len, out.max);
    buf_release(&out);

    buf_init(&out, 1 << 16);
    ts_alloc_fail_after(0);
    int rc = openai_stream_enc_content(&e, &out, "x", 1);
    ts_alloc_fail_after(-1);
    assert_int_equal(rc, -ENOMEM);
    assert_int_equal(out.len, 0);
    openai_stream_enc_release(&e);
    ts_alloc_fail_after(0);
    rc = openai_stream_enc_init(&e, OPENAI_CHAT, "a", 1, "m");
    ts_alloc_fail_after(-1);
    assert_int_equal(rc, -ENOMEM);
    openai_stream_enc_release(&e);
    buf_release(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_stream_bytes),
        cmocka_unit_test(test_text_stream_bytes),
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_responses),
        cmocka_unit_test(test_embeddings),
        cmocka_unit_test(test_error_body),
        cmocka_unit_test(test_caps_and_failures),
    };
    return cmocka_run_group_tests_name("openai_encode", tests, NULL, NULL);
}
