#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "llm/tokenizer.h"

/* GPT-2's bytes_to_unicode, written out from its definition. */
static unsigned b2u(int b)
{
    if ((b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff))
        return (unsigned)b;
    int n = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= '!' && c <= '~') || (c >= 0xa1 && c <= 0xac) || (c >= 0xae && c <= 0xff)))
            n++;
    return 256u + (unsigned)n;
}

static void b2u_str(int b, char *o)
{
    unsigned cp = b2u(b);
    if (cp < 0x80) {
        o[0] = (char)cp;
        o[1] = 0;
    } else {
        o[0] = (char)(0xc0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3f));
        o[2] = 0;
    }
}

/*
 * A byte-level tokenizer: ids 0..255 are the bytes, then
 * 256 he, 257 ll, 258 hell, 259 Ġw, 260 or, 261 Ġwor, 262 lo, 263 bc, 264 ab, 265 aa,
 * and added tokens 300 "<|end|>", 301 "<|end|>x". Merge ranks are the list order.
 */
static char *byte_level_json(const char *merge_style)
{
    json_t *vocab = json_object();
    for (int b = 0; b < 256; b++) {
        char k[4];
        b2u_str(b, k);
        json_object_set_new(vocab, k, json_integer(b));
    }
    const char *extra[] = {"he",          "ll", "hell", "\xc4\xa0w", "or",
                           "\xc4\xa0wor", "lo", "bc",   "ab",        "aa"};
    for (int i = 0; i < 10; i++)
        json_object_set_new(vocab, extra[i], json_integer(256 + i));
    const char *merges[][2] = {{"l", "l"}, {"h", "e"},          {"he", "ll"}, {"\xc4\xa0", "w"},
                               {"o", "r"}, {"\xc4\xa0w", "or"}, {"l", "o"},   {"b", "c"},
                               {"a", "b"}, {"a", "a"}};
    json_t *m = json_array();
    for (int i = 0; i < 10; i++) {
        if (strcmp(merge_style, "pairs") == 0) {
            json_array_append_new(m, json_pack("[ss]", merges[i][0], merges[i][1]));
        } else {
            char s[32];
            snprintf(s, sizeof(s), "%s %s", merges[i][0], merges[i][1]);
            json_array_append_new(m, json_string(s));
        }
    }
    json_t *root = json_pack(
        "{s:[{s:i,s:s,s:b},{s:i,s:s,s:b}],s:n,s:{s:s,s:b,s:b},s:{s:s,s:o,s:o}}", "added_tokens",
        "id", 300, "content", "<|end|>", "special", 1, "id", 301, "content", "<|end|>x", "special",
        1, "normalizer", "pre_tokenizer", "type", "ByteLevel", "add_prefix_space", 0, "use_regex",
        1, "model", "type", "BPE", "vocab", vocab, "merges", m);
    assert_non_null(root);
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

static struct tokenizer *load_json(const char *s)
{
    struct tokenizer *t = NULL;
    char err[256] = "";
    int rc = tokenizer_load_hf_json(s, strlen(s), &t, err, sizeof(err));
    if (rc != 0)
        print_error("load: %s\n", err);
    assert_int_equal(rc, 0);
    return t;
}

#define NO_ROUND_TRIP (1u << 30) /* test flag: decode need not give the text back */

/* Encodes text and compares with want[0..n). */
static void check_ids(struct tokenizer *t, const char *text, size_t len, unsigned flags,
                      const uint32_t *want, size_t n)
{
    bool round_trip = !(flags & NO_ROUND_TRIP);
    flags &= ~NO_ROUND_TRIP;
    struct tokenizer_session *s = tokenizer_session_new(t);
    assert_non_null(s);
    struct tokenizer_ids ids;
    tokenizer_ids_init(&ids, 0);
    for (int pass = 0; pass < 2; pass++) { /* the second pass runs from the cache */
        ids.len = 0;
        assert_int_equal(tokenizer_encode(s, text, len, flags, &ids), 0);
        assert_int_equal(ids.len, n);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(ids.v[i], want[i]);
        size_t count = 99;
        assert_int_equal(tokenizer_count(s, text, len, flags, &count), 0);
        assert_int_equal(count, n);
    }
    struct buf back;
    buf_init(&back, 1 << 20);
    assert_int_equal(tokenizer_decode(t, ids.v, ids.len, &back), 0);
    if (round_trip) {
        assert_int_equal(back.len, len);
        assert_memory_equal(back.len ? back.data : "", text, len);
    }
    buf_release(&back);
    tokenizer_ids_release(&ids);
    tokenizer_session_free(s);
}

#define CHECK(t, text, flags, ...)                                                                 \
    do {                                                                                           \
        const uint32_t want_[] = {__VA_ARGS__};                                                    \
        check_ids(t, text, strlen(text), flags, want_, sizeof(want_) / sizeof(want_[0]));          \
    } while (0)

static void test_byte_level_merges_by_rank(void **state)
{
    const char *styles[] = {"strings", "pairs"};
    for (int k = 0; k < 2; k++) {
        char *js = byte_level_json(styles[k]);
        struct tokenizer *t = load_json(js);
        free(js);
        assert_int_equal(tokenizer_vocab_size(t), 302);
        /* "hello" -> h e ll o -> he ll o -> hell o; " world" -> Ġwor l d */
        CHECK(t, "hello world", 0, 258, 'o', 261, 'l', 'd');
        /* b c (rank 7) beats a b (rank 8) although a b is on the left */
        CHECK(t, "abc", 0, 'a', 263);
        /* equal ranks merge leftmost first */
        CHECK(t, "aaa", 0, 265, 'a');
        CHECK(t, "aaaa", 0, 265, 265);
        /* bytes of UTF-8 and of invalid UTF-8 are byte tokens, and decode back */
        CHECK(t, "\xc3\xa9", 0, 0xc3, 0xa9);
        CHECK(t, "\xff\xfe a\xc3", 0, 0xff, 0xfe, ' ', 'a', 0xc3);
        /* GPT-2 pattern: contractions, digit runs, whitespace runs */
        CHECK(t, "it's  42", 0, 'i', 't', '\'', 's', ' ', ' ', '4', '2');
        assert_int_equal(tokenizer_token_id(t, "hell", 4), 258);
        assert_int_equal(tokenizer_token_id(t, "<|end|>", 7), 300);
        assert_int_equal(tokenizer_token_id(t, "zz", 2), -1);
        tokenizer_free(t);
    }
}

static void test_special_tokens_leftmost_longest(void **state)
{
    char *js = byte_level_json("strings");
    struct tokenizer *t = load_json(js);
    free(js);
    CHECK(t, "a<|end|>xb", TOKENIZER_SPECIAL, 'a', 301, 'b');
    CHECK(t, "<|end|><|end|>", TOKENIZER_SPECIAL, 300, 300);
    CHECK(t, "<|end|", TOKENIZER_SPECIAL, '<', '|', 'e', 'n', 'd', '|');
    /* without the flag the text is ordinary text */
    CHECK(t, "<|end|>", 0, '<', '|', 'e', 'n', 'd', '|', '>');
    uint32_t bad[] = {'a', 280};
    struct buf out;
    buf_init(&out, 64);
    assert_int_equal(tokenizer_decode(t, bad, 2, &out), -EINVAL);
    buf_release(&out);
    tokenizer_free(t);
}

static char *tiktoken_file(const char *extra)
{
    static char data[16384];
    size_t o = 0;
    for (int b = 0; b < 256; b++) {
        char b64[8];
        unsigned char c = (unsigned char)b;
        base64_encode(&c, 1, b64);
        o += (size_t)snprintf(data + o, sizeof(data) - o, "%s %d\n", b64, b);
    }
    snprintf(data + o, sizeof(data) - o, "%s", extra);
    return data;
}

static void test_tiktoken(void **state)
{
    /* ab 256, bc 257, abc 258 */
    const char *d = tiktoken_file("YWI= 256\nYmM= 257\nYWJj 258\n");
    struct tokenizer *t = NULL;
    char err[256];
    assert_int_equal(tokenizer_load_tiktoken(d, strlen(d), TOKENIZER_CL100K, &t, err, sizeof(err)),
                     0);
    assert_int_equal(tokenizer_vocab_size(t), 100277);
    CHECK(t, "abc", 0, 258);       /* a whole piece that is a token */
    CHECK(t, "abcb", 0, 258, 'b'); /* ab (256) first, then ab+c */
    CHECK(t, " abc", 0, ' ', 258); /* one cl100k piece */
    CHECK(t, "1234567", 0, '1', '2', '3', '4', '5', '6', '7');
    CHECK(t, "x<|endoftext|>", TOKENIZER_SPECIAL, 'x', 100257);
    tokenizer_free(t);
}

static void expect_error(int rc_want, const char *text, size_t len, int kind, const char *msg)
{
    struct tokenizer *t = NULL;
    char err[256] = "";
    int rc = kind ? tokenizer_load_tiktoken(text, len, kind, &t, err, sizeof(err))
                  : tokenizer_load_hf_json(text, len, &t, err, sizeof(err));
    assert_int_equal(rc, rc_want);
    assert_null(t);
    if (strstr(err, msg) == NULL)
        print_error("error \"%s\" lacks \"%s\"\n", err, msg);
    assert_non_null(strstr(err, msg));
}

static void test_load_errors(void **state)
{
    expect_error(TS_PARSE, "{", 1, 0, "tokenizer.json line 1 column 1");
    expect_error(TS_PARSE, "[]", 2, 0, "top level is array");
    const char *uni = "{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}";
    expect_error(TS_PARSE, uni, strlen(uni), 0, "model.type: \"Unigram\" is not supported");
    const char *ws = "{\"pre_tokenizer\":{\"type\":\"Whitespace\"},\"model\":{\"type\":\"BPE\","
                     "\"vocab\":{},\"merges\":[]}}";
    expect_error(TS_PARSE, ws, strlen(ws), 0, "pre_tokenizer: pre-tokenizer \"Whitespace\"");
    /* a merge whose parts are not in the vocab: the byte-level vocab plus "q z" */
    char *js = byte_level_json("strings");
    char *p = strstr(js, "\"merges\":[");
    assert_non_null(p);
    size_t n = strlen(js);
    char *bad = malloc(n + 16);
    size_t head = (size_t)(p - js) + 10;
    memcpy(bad, js, head);
    memcpy(bad + head, "\"q z\",", 6);
    memcpy(bad + head + 6, js + head, n - head + 1);
    expect_error(TS_PARSE, bad, strlen(bad), 0,
                 "model.merges[0]: \"q\" + \"z\" is not in the vocab");
    free(bad);
    free(js);
    const char *ids = "{\"pre_tokenizer\":{\"type\":\"ByteLevel\"},\"model\":{\"vocab\":{\"a\":-1},"
                      "\"merges\":[]}}";
    expect_error(TS_PARSE, ids, strlen(ids), 0, "model.vocab[\"a\"]: id must be an integer");
    const char *big = "{\"pre_tokenizer\":{\"type\":\"ByteLevel\"},\"model\":{\"vocab\":{\"a\":"
                      "99999999},\"merges\":[]}}";
    expect_error(TS_TOOBIG, big, strlen(big), 0, "model.vocab[\"a\"]");
    const char *re = "{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},"
                     "\"behavior\":\"Isolated\"},\"model\":{\"vocab\":{},\"merges\":[]}}";
    expect_error(TS_PARSE, re, strlen(re), 0, "neither byte-level nor SentencePiece");

    expect_error(TS_PARSE, "YQ== 0\nYg== 1\n!!! 2\n", 20, TOKENIZER_CL100K, "tiktoken line 3");
    expect_error(TS_PARSE, "YQ== 0\nYg==\n", 12, TOKENIZER_O200K, "tiktoken line 2");
    expect_error(TS_TOOBIG, "YQ== 99999999\n", 14, TOKENIZER_O200K, "tiktoken line 1: rank");
    expect_error(TS_PARSE, "YQ== 0\nYg== 0\n", 14, TOKENIZER_CL100K, "rank 0 given twice");
    expect_error(TS_PARSE, "YQ== 0\n", 7, TOKENIZER_CL100K, "no token for the single byte 0x00");
}

/* Llama-2 style: "▁" for spaces, prepended; byte fallback for unknown characters. */
static const char SP_JSON[] =
    "{\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\"},{\"id\":1,\"content\":\"<s>\"},"
    "{\"id\":2,\"content\":\"</s>\"}],"
    "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":"
    "\"\\u2581\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\\u2581\"}]},"
    "\"pre_tokenizer\":null,"
    "\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"byte_fallback\":true,\"vocab\":{%s"
    "\"\\u2581\":259,\"h\":260,\"i\":261,\"\\u2581h\":262,\"\\u2581hi\":263},"
    "\"merges\":[\"\\u2581 h\",\"\\u2581h i\"]}}";

static void test_sentencepiece_byte_fallback(void **state)
{
    char vocab[256 * 16] = "\"<unk>\":0,\"<s>\":1,\"</s>\":2,";
    size_t o = strlen(vocab);
    for (int b = 0; b < 256; b++)
        o += (size_t)snprintf(vocab + o, sizeof(vocab) - o, "\"<0x%02X>\":%d,", b, 3 + b);
    char js[sizeof(SP_JSON) + sizeof(vocab)];
    snprintf(js, sizeof(js), SP_JSON, vocab);
    struct tokenizer *t = load_json(js);
    CHECK(t, "hi hi", 0, 263, 263);
    CHECK(t, "h\xc3\xa9", 0, 262, 3 + 0xc3, 3 + 0xa9);
    CHECK(t, "i", 0, 259, 261);
    /* each span between special tokens gets its "▁"; decoding shows it */
    CHECK(t, "<s>hi", TOKENIZER_SPECIAL | NO_ROUND_TRIP, 1, 263);
    struct buf out;
    buf_init(&out, 64);
    const uint32_t ids[] = {1, 263, 262, 3 + 0xc3, 3 + 0xa9};
    assert_int_equal(tokenizer_decode(t, ids, 5, &out), 0);
    assert_string_equal(out.data, "<s> hi h\xc3\xa9");
    buf_reset(&out);
    assert_int_equal(tokenizer_decode(t, ids + 1, 2, &out), 0);
    assert_string_equal(out.data, "hi h");
    buf_release(&out);
    tokenizer_free(t);
}

/* Mistral style: Metaspace pre-tokenizer ("▁" only before the first span) and,
   without byte fallback, runs of unknown characters fused into one <unk>. */
static const char METASPACE_JSON[] =
    "{\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\"},{\"id\":1,\"content\":\"<s>\"}],"
    "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\","
    "\"prepend_scheme\":\"first\",\"split\":false},"
    "\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"fuse_unk\":true,\"vocab\":{"
    "\"<unk>\":0,\"<s>\":1,\"\\u2581\":2,\"h\":3,\"i\":4,\"\\u2581h\":5,\"\\u2581hi\":6},"
    "\"merges\":[[\"\\u2581\",\"h\"],[\"\\u2581h\",\"i\"]]}}";

static void test_sentencepiece_metaspace_unk(void **state)
{
    struct tokenizer *t = load_json(METASPACE_JSON);
    CHECK(t, "hi hi", 0, 6, 6);
    CHECK(t, "<s>hi hi", TOKENIZER_SPECIAL, 1, 3, 4, 6);
    CHECK(t, "hi\xc3\xa9\xe2\x82\xac hi", NO_ROUND_TRIP, 6, 0, 6);
    CHECK(t, "h\xc3\xa9i", NO_ROUND_TRIP, 5, 0, 4);
    tokenizer_free(t);
}

static void test_alloc_failures(void **state)
{
    char *js = byte_level_json("strings");
    int failures = 0;
    for (long n = 0;; n++) {
        struct tokenizer *t = NULL;
        char err[256];
        ts_alloc_fail_after(n);
        int rc = tokenizer_load_hf_json(js, strlen(js), &t, err, sizeof(err));
        struct tokenizer_session *s = rc == 0 ? tokenizer_session_new(t) : NULL;
        struct tokenizer_ids ids;
        tokenizer_ids_init(&ids, 0);
        int erc = s != NULL ? tokenizer_encode(s, "hello world abc", 15, 0, &ids) : -ENOMEM;
        ts_alloc_fail_after(-1);
        tokenizer_ids_release(&ids);
        tokenizer_session_free(s);
        tokenizer_free(t);
        if (rc == 0 && s != NULL && erc == 0)
            break;
        if ((rc == 0 ? erc : rc) != -ENOMEM)
            print_error("n=%ld rc=%d erc=%d err=%s\n", n, rc, erc, rc ? err : "");
        assert_int_equal(rc == 0 ? erc : rc, -ENOMEM);
        failures++;
        assert_true(n < 1000);
    }
    assert_true(failures > 3);
    free(js);
}

static void test_ids_cap(void **state)
{
    char *js = byte_level_json("strings");
    struct tokenizer *t = load_json(js);
    free(js);
    struct tokenizer_session *s = tokenizer_session_new(t);
    assert_non_null(s);
    struct tokenizer_ids ids;
    tokenizer_ids_init(&ids, 3);
    assert_int_equal(tokenizer_encode(s, "hello world", 11, 0, &ids), TS_TOOBIG);
    assert_int_equal(ids.len, 3);
    assert_int_equal(ids.v[0], 258);
    tokenizer_ids_release(&ids);
    /* the length is refused before any byte is read */
    size_t count = 7;
    assert_int_equal(tokenizer_count(s, "x", (size_t)TOKENIZER_MAX_TEXT + 1, 0, &count), TS_TOOBIG);
    /* a 3 MiB run of letters is merged in 1 MiB pieces (even cuts: same ids) */
    size_t n = 3u << 20;
    char *big = malloc(n);
    assert_non_null(big);
    memset(big, 'a', n);
    tokenizer_ids_init(&ids, 0);
    assert_int_equal(tokenizer_encode(s, big, n, 0, &ids), 0);
    assert_int_equal(ids.len, n / 2);
    assert_int_equal(ids.v[0], 265);
    assert_int_equal(ids.v[n / 2 - 1], 265);
    struct buf back;
    buf_init(&back, n);
    assert_int_equal(tokenizer_decode(t, ids.v, ids.len, &back), 0);
    assert_int_equal(back.len, n);
    assert_memory_equal(back.data, big, n);
    buf_release(&back);
    free(big);
    tokenizer_ids_release(&ids);
    tokenizer_session_free(s);
    tokenizer_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_byte_level_merges_by_rank),
        cmocka_unit_test(test_special_tokens_leftmost_longest),
        cmocka_unit_test(test_tiktoken),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_sentencepiece_byte_fallback),
        cmocka_unit_test(test_sentencepiece_metaspace_unk),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_ids_cap),
    };
    return cmocka_run_group_tests_name("tokenizer", tests, NULL, NULL);
}
