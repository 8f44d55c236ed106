#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "llm/openai_memo.h"

/* A stream's decoder and memo, checked chunk by chunk against jansson. */
struct stream {
    struct openai_decoder d, full;
    struct openai_memo *memo;
};

static void stream_init(struct stream *st)
{
    openai_decoder_init(&st->d);
    openai_decoder_init(&st->full);
    st->memo = NULL;
}

static void stream_release(struct stream *st)
{
    openai_decoder_release(&st->d);
    openai_decoder_release(&st->full);
    openai_memo_free(st->memo);
}

/* Decodes s with the memo and with jansson alone: the two must agree. */
static int feed_n(struct stream *st, const char *s, size_t n, struct openai_chunk *c)
{
    struct openai_chunk fc;
    int rc = openai_decode_chunk_memo(&st->d, &st->memo, s, n, c);
    int frc = openai_decode_chunk_full(&st->full, s, n, &fc);
    if (rc != frc || strcmp(openai_decoder_errmsg(&st->d), openai_decoder_errmsg(&st->full)) != 0 ||
        !openai_chunk_same(c, &fc))
        fail_msg("memo and full decoder disagree on '%.*s': rc %d/%d, '%s'/'%s'", (int)n, s, rc,
                 frc, openai_decoder_errmsg(&st->d), openai_decoder_errmsg(&st->full));
    return rc;
}

static int feed(struct stream *st, const char *s, struct openai_chunk *c)
{
    return feed_n(st, s, strlen(s), c);
}

#define CHAT_PRE                                                                                   \
    "{\"id\":\"chatcmpl-23c0\",\"object\":\"chat.completion.chunk\",\"created\":1796241667,"       \
    "\"model\":\"tokenstorm/tiny\",\"choices\":[{\"index\":0,\"delta\":"
#define CHAT_SUF ",\"logprobs\":null,\"finish_reason\":null}]}"

/* vLLM's stream: a role chunk, tokens, the finish, usage, [DONE]. Every
 * token after the second is given from the memo. */
static void test_vllm_stream(void **state)
{
    struct stream st;
    struct openai_chunk c;
    stream_init(&st);
    assert_int_equal(feed(&st, CHAT_PRE "{\"role\":\"assistant\",\"content\":\"\"}" CHAT_SUF, &c),
                     0);
    assert_string_equal(c.choices[0].role, "assistant");
    static const char *const tok[] = {" then",        " batch", "x", "",
                                      " caf\xc3\xa9", " ~",     "~", " 1/2"};
    char buf[512];
    for (size_t i = 0; i < sizeof(tok) / sizeof(tok[0]); i++) {
        snprintf(buf, sizeof(buf), CHAT_PRE "{\"content\":\"%s\"}" CHAT_SUF, tok[i]);
        assert_int_equal(feed(&st, buf, &c), 0);
        assert_int_equal(c.choices[0].content_len, strlen(tok[i]));
        assert_string_equal(c.choices[0].content, tok[i]);
        assert_null(c.choices[0].role);
        assert_string_equal(c.id, "chatcmpl-23c0");
        assert_string_equal(c.model, "tokenstorm/tiny");
        assert_int_equal(c.created, 1796241667);
        assert_int_equal(c.object, OPENAI_OBJECT_CHAT_CHUNK);
        assert_int_equal(!!(c.flags & OPENAI_CHUNK_CONTENT), tok[i][0] != '\0');
    }
    /* the first token after the role chunk learns, the rest hit */
    assert_int_equal(st.d.n_memo, sizeof(tok) / sizeof(tok[0]) - 1);
    /* whitespace around the data, as SSE may leave it */
    assert_int_equal(feed(&st, "  " CHAT_PRE "{\"content\":\"ws\"}" CHAT_SUF "\r\n", &c), 0);
    assert_string_equal(c.choices[0].content, "ws");
    uint64_t hits = st.d.n_memo;
    assert_int_equal(hits, sizeof(tok) / sizeof(tok[0]));
    /* escapes in the text: decoded, and the template stays */
    assert_int_equal(feed(&st, CHAT_PRE "{\"content\":\"a\\nb\\\"c\\u00e9\"}" CHAT_SUF, &c), 0);
    assert_string_equal(c.choices[0].content, "a\nb\"c\xc3\xa9");
    assert_int_equal(feed(&st, CHAT_PRE "{\"content\":\"next\"}" CHAT_SUF, &c), 0);
    assert_int_equal(st.d.n_memo, hits + 1);
    /* not a string where the text was, or bytes that are not text */
    assert_int_equal(feed(&st, CHAT_PRE "{\"content\":null}" CHAT_SUF, &c), 0);
    assert_null(c.choices[0].content);
    assert_int_equal(feed(&st, CHAT_PRE "{\"content\":\"\x01\"}" CHAT_SUF, &c), TS_PARSE);
    assert_int_equal(feed(&st, CHAT_PRE "{\"content\":\"\xc3\"}" CHAT_SUF, &c), TS_PARSE);
    assert_int_equal(feed(&st, CHAT_PRE "{\"content\":\"a\"\"}" CHAT_SUF, &c), TS_PARSE);
    assert_int_equal(feed(&st, CHAT_PRE "{\"content\":\"a\",\"x\":\"}" CHAT_SUF, &c), TS_PARSE);
    assert_int_equal(feed(&st, CHAT_PRE "{\"content\":\"a\"}" CHAT_SUF "x", &c), TS_PARSE);
    /* finish and usage leave the template be */
    assert_int_equal(feed(&st,
                          CHAT_PRE "{}"
                                   ",\"logprobs\":null,\"finish_reason\":\"length\"}]}",
                          &c),
                     0);
    assert_string_equal(c.choices[0].finish_reason, "length");
    assert_int_equal(feed(&st,
                          "{\"id\":\"chatcmpl-23c0\",\"choices\":[],\"usage\":{\"prompt_tokens\":7,"
                          "\"completion_tokens\":4,\"total_tokens\":11}}",
                          &c),
                     0);
    assert_int_equal(c.usage.completion_tokens, 4);
    assert_int_equal(feed(&st, "[DONE]", &c), 0);
    assert_int_equal(c.flags, OPENAI_CHUNK_DONE);
    hits = st.d.n_memo;
    assert_int_equal(feed(&st, CHAT_PRE "{\"content\":\"again\"}" CHAT_SUF, &c), 0);
    assert_int_equal(st.d.n_memo, hits + 1);
    stream_release(&st);
}

/* The text's bytes elsewhere in the chunk (the id, a key, an earlier
 * duplicate key, after an escaped quote): only its own token is taken. The
 * third chunk of each changes what a template taken at the wrong place
 * would take for the text. */
static void test_text_elsewhere(void **state)
{
    static const char *const cases[][3] = {
        {"{\"id\":\"tok\",\"choices\":[{\"delta\":{\"content\":\"tok\"}}]}",
         "{\"id\":\"tok\",\"choices\":[{\"delta\":{\"content\":\"new\"}}]}",
         "{\"id\":\"zzz\",\"choices\":[{\"delta\":{\"content\":\"tok\"}}]}"},
        {"{\"x\":{\"tok\":1},\"choices\":[{\"delta\":{\"content\":\"tok\"}}]}",
         "{\"x\":{\"tok\":1},\"choices\":[{\"delta\":{\"content\":\"two\"}}]}",
         "{\"x\":{\"zz\":1},\"choices\":[{\"delta\":{\"content\":\"tok\"}}]}"},
        /* jansson keeps the last of duplicate keys */
        {"{\"choices\":[{\"delta\":{\"content\":\"a\",\"content\":\"a\"}}]}",
         "{\"choices\":[{\"delta\":{\"content\":\"a\",\"content\":\"b\"}}]}",
         "{\"choices\":[{\"delta\":{\"content\":\"q\",\"content\":\"a\"}}]}"},
        {"{\"choices\":[{\"delta\":{\"content\":\"content\"}}]}",
         "{\"choices\":[{\"delta\":{\"content\":\"k\"}}]}",
         "{\"choices\":[{\"delta\":{\"zz\":\"content\"}}]}"},
        {"{\"id\":\"x\\\"tok\",\"choices\":[{\"delta\":{\"content\":\"tok\"}}]}",
         "{\"id\":\"x\\\"tok\",\"choices\":[{\"delta\":{\"content\":\"y\"}}]}",
         "{\"id\":\"x\\\"zz\",\"choices\":[{\"delta\":{\"content\":\"tok\"}}]}"},
        {"{\"choices\":[{\"text\":\"t\",\"index\":0}],\"object\":\"text_completion\"}",
         "{\"choices\":[{\"text\":\"u\",\"index\":0}],\"object\":\"text_completion\"}",
         "{\"choices\":[{\"text\":\"t\",\"index\":1}],\"object\":\"text_completion\"}"},
        {"{\"choices\":[{\"delta\":{\"reasoning_content\":\"r\",\"reasoning\":\"r\"}}]}",
         "{\"choices\":[{\"delta\":{\"reasoning_content\":\"s\",\"reasoning\":\"r\"}}]}",
         "{\"choices\":[{\"delta\":{\"reasoning_content\":\"zz\",\"reasoning\":\"r\"}}]}"},
        {"{\"choices\":[{\"delta\":{\"reasoning\":\"r\",\"reasoning_content\":\"r\"}}]}",
         "{\"choices\":[{\"delta\":{\"reasoning\":\"r\",\"reasoning_content\":\"s\"}}]}",
         "{\"choices\":[{\"delta\":{\"reasoning\":\"zz\",\"reasoning_content\":\"r\"}}]}"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct stream st;
        struct openai_chunk c;
        stream_init(&st);
        assert_int_equal(feed(&st, cases[i][0], &c), 0);
        assert_int_equal(feed(&st, cases[i][2], &c), 0);
        for (int k = 0; k < 2; k++)
            assert_int_equal(feed(&st, cases[i][1], &c), 0);
        assert_int_equal(feed(&st, cases[i][0], &c), 0);
        assert_true(st.d.n_memo >= 2);
        stream_release(&st);
    }
}

/* Renaming a key whose name is the text can make a duplicate key or a
 * fallback field give the probe: each place is checked with two probes, so
 * no key is taken for the text (a review found these). Each second chunk
 * renames that key again; feed() checks the memo agrees with jansson,
 * errors included. */
static void test_probe_at_key(void **state)
{
    static const char *const seqs[][3] = {
        {"{\"choices\":[{\"delta\":{\"content\":\"~\",\"content\":\"content\"}}]}",
         "{\"choices\":[{\"delta\":{\"content\":\"~\",\"tool_calls\":\"content\"}}]}",
         "{\"choices\":[{\"delta\":{\"content\":\"~\",\"role\":\"content\"}}]}"},
        {"{\"choices\":[{\"delta\":{\"reasoning\":\"~\",\"reasoning_content\":"
         "\"reasoning_content\"}}]}",
         "{\"choices\":[{\"delta\":{\"reasoning\":\"~\",\"xyz\":\"reasoning_content\"}}]}",
         "{\"choices\":[{\"delta\":{\"reasoning\":\"~\",\"\":\"reasoning_content\"}}]}"},
        {"{\"choices\":[{\"message\":{\"content\":\"~\"},\"delta\":{\"content\":\"delta\"}}]}",
         "{\"choices\":[{\"message\":{\"content\":\"~\"},\"finish_reason\":{\"content\":"
         "\"delta\"}}]}",
         "{\"choices\":[{\"message\":{\"content\":\"~\"},\"zz\":{\"content\":\"delta\"}}]}"},
        {"{\"choices\":[{\"text\":\"~\",\"text\":\"text\"}],\"object\":\"text_completion\"}",
         "{\"choices\":[{\"text\":\"~\",\"delta\":\"text\"}],\"object\":\"text_completion\"}",
         "{\"choices\":[{\"text\":\"~\",\"q\":\"text\"}],\"object\":\"text_completion\"}"},
        {"{\"choices\":[{\"delta\":{\"content\":\"~~\",\"content\":\"content\"}}]}",
         "{\"choices\":[{\"delta\":{\"content\":\"~~\",\"x\":\"content\"}}]}",
         "{\"choices\":[{\"delta\":{\"content\":\"~~\",\"content\":\"y\"}}]}"},
    };
    for (size_t i = 0; i < sizeof(seqs) / sizeof(seqs[0]); i++) {
        struct stream st;
        struct openai_chunk c;
        stream_init(&st);
        for (int k = 0; k < 3; k++)
            (void)feed(&st, seqs[i][k], &c);
        stream_release(&st);
    }
}

/* A text with escapes costs no strike: a reasoning stream that opens with
 * newlines keeps its memo for the tokens after them. */
static void test_escapes_keep_memo(void **state)
{
    struct stream st;
    struct openai_chunk c;
    char buf[256];
    stream_init(&st);
    assert_int_equal(feed(&st, CHAT_PRE "{\"role\":\"assistant\",\"content\":\"\"}" CHAT_SUF, &c),
                     0);
    static const char *const tok[] = {"\\n", "\\n\\n", "\\n", "a", "b", "\\n", "c", "d"};
    for (size_t i = 0; i < sizeof(tok) / sizeof(tok[0]); i++) {
        snprintf(buf, sizeof(buf), CHAT_PRE "{\"reasoning_content\":\"%s\"}" CHAT_SUF, tok[i]);
        assert_int_equal(feed(&st, buf, &c), 0);
    }
    /* "a" learns; "b", "c", "d" hit ("\n" after "a": decoded, no miss) */
    assert_int_equal(st.d.n_memo, 3);
    stream_release(&st);
}

/* A server that varies a field in every chunk (OpenAI's "obfuscation"):
 * the memo gives up after a few, and each chunk is decoded. */
static void test_gives_up(void **state)
{
    struct stream st;
    struct openai_chunk c;
    char buf[256];
    stream_init(&st);
    for (int i = 0; i < 40; i++) {
        snprintf(buf, sizeof(buf),
                 "{\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"t%d\"}}],"
                 "\"obfuscation\":\"%08x\"}",
                 i, (unsigned)i * 2654435761u);
        assert_int_equal(feed(&st, buf, &c), 0);
    }
    assert_int_equal(st.d.n_memo, 0);
    /* chunks too long for a template, and with tool calls: decoded */
    static char big[OPENAI_MEMO_MAX_TEXT + 64];
    int n = snprintf(big, sizeof(big), "{\"choices\":[{\"delta\":{\"content\":\"");
    memset(big + n, 'a', OPENAI_MEMO_MAX_TEXT);
    strcpy(big + n + OPENAI_MEMO_MAX_TEXT, "\"}}]}");
    struct stream st2;
    stream_init(&st2);
    for (int i = 0; i < 3; i++)
        assert_int_equal(feed(&st2, big, &c), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            feed(&st2, "{\"choices\":[{\"delta\":{\"content\":\"a\",\"tool_calls\":[{}]}}]}", &c),
            0);
    assert_int_equal(st2.d.n_memo, 0);
    stream_release(&st);
    stream_release(&st2);
}

/* Allocation failures leave the memo out, never the chunk. */
static void test_alloc_failure(void **state)
{
    for (long k = 0; k < 6; k++) {
        struct stream st;
        struct openai_chunk c;
        stream_init(&st);
        ts_alloc_fail_after(k);
        for (int i = 0; i < 4; i++) {
            char buf[256];
            snprintf(buf, sizeof(buf), CHAT_PRE "{\"content\":\"t%d\"}" CHAT_SUF, i);
            int rc = openai_decode_chunk_memo(&st.d, &st.memo, buf, strlen(buf), &c);
            assert_true(rc == 0 || rc == -ENOMEM);
            if (rc == 0) {
                char want[8];
                snprintf(want, sizeof(want), "t%d", i);
                assert_string_equal(c.choices[0].content, want);
            }
        }
        ts_alloc_fail_after(-1);
        stream_release(&st);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vllm_stream),  cmocka_unit_test(test_text_elsewhere),
        cmocka_unit_test(test_probe_at_key), cmocka_unit_test(test_escapes_keep_memo),
        cmocka_unit_test(test_gives_up),     cmocka_unit_test(test_alloc_failure),
    };
    return cmocka_run_group_tests_name("openai_memo", tests, NULL, NULL);
}
