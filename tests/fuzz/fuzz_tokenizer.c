/*
 * Fuzz the tokenizer: the first byte picks what the rest is.
 *   0: a tokenizer.json for the loader; if it loads, encode and decode a text;
 *   1: a tiktoken rank file for the loader (cl100k_base);
 *   2..: text for two fixed byte-level tokenizers (GPT-2 regex; Llama-3 style
 *        Split regex with ignore_merges): decode(encode(text)) must be text,
 *        with and without special tokens, and count must equal the ids.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/buf.h"
#include "llm/tokenizer.h"

static struct tokenizer *fixed[2];
static struct tokenizer_session *sess[2];

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

static struct tokenizer *build(int llama_style)
{
    json_t *vocab = json_object();
    for (int b = 0; b < 256; b++) {
        unsigned cp = b2u(b);
        char k[3] = {(char)cp, 0, 0};
        if (cp >= 0x80) {
            k[0] = (char)(0xc0 | (cp >> 6));
            k[1] = (char)(0x80 | (cp & 0x3f));
        }
        json_object_set_new(vocab, k, json_integer(b));
    }
    const char *merges[][2] = {
        {"t", "h"}, {"th", "e"},  {"\xc4\xa0", "the"},      {"i", "n"}, {"in", "g"},
        {"a", "a"}, {"aa", "aa"}, {"\xc4\xa0", "\xc4\xa0"}, {"1", "2"}, {"\xc3", "\xa9"}};
    json_t *m = json_array();
    int id = 256;
    for (size_t i = 0; i < sizeof(merges) / sizeof(merges[0]); i++) {
        char cat[16];
        snprintf(cat, sizeof(cat), "%s%s", merges[i][0], merges[i][1]);
        if (json_object_get(vocab, cat) == NULL)
            json_object_set_new(vocab, cat, json_integer(id++));
        json_array_append_new(m, json_pack("[ss]", merges[i][0], merges[i][1]));
    }
    json_t *pre =
        llama_style
            ? json_pack("{s:s,s:[{s:s,s:{s:s},s:s},{s:s,s:b}]}", "type", "Sequence",
                        "pretokenizers", "type", "Split", "pattern", "Regex",
                        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                        "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
                        "behavior", "Isolated", "type", "ByteLevel", "use_regex", 0)
            : json_pack("{s:s,s:b}", "type", "ByteLevel", "add_prefix_space", 1);
    json_t *root = json_pack("{s:[{s:i,s:s}],s:o,s:{s:s,s:b,s:o,s:o}}", "added_tokens", "id", 400,
                             "content", "<|x|>", "pre_tokenizer", pre, "model", "type", "BPE",
                             "ignore_merges", llama_style, "vocab", vocab, "merges", m);
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    struct tokenizer *t = NULL;
    char err[256];
    if (s == NULL || tokenizer_load_hf_json(s, strlen(s), &t, err, sizeof(err)) < 0) {
        fprintf(stderr, "fuzz_tokenizer: fixed tokenizer: %s\n", err);
        abort();
    }
    free(s);
    return t;
}

static void encode_decode(struct tokenizer_session *s, const struct tokenizer *t, const char *p,
                          size_t n, unsigned flags, int must_round_trip)
{
    struct tokenizer_ids ids;
    tokenizer_ids_init(&ids, 0);
    struct buf back;
    buf_init(&back, 1 << 24);
    int rc = tokenizer_encode(s, p, n, flags, &ids);
    if (rc == 0) {
        size_t count;
        if (tokenizer_count(s, p, n, flags, &count) != 0 || count != ids.len)
            abort();
        rc = tokenizer_decode(t, ids.v, ids.len, &back);
        if (must_round_trip && (rc != 0 || back.len != n || (n && memcmp(back.data, p, n) != 0)))
            abort();
    }
    buf_release(&back);
    tokenizer_ids_release(&ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fixed[0] == NULL) {
        for (int i = 0; i < 2; i++) {
            fixed[i] = build(i);
            sess[i] = tokenizer_session_new(fixed[i]);
            if (sess[i] == NULL)
                abort();
        }
    }
    if (size < 1)
        return 0;
    const char *p = (const char *)data + 1;
    size_t n = size - 1;
    char err[256];
    struct tokenizer *t = NULL;
    if (data[0] == 0 || data[0] == 1) {
        int rc = data[0] == 0
                     ? tokenizer_load_hf_json(p, n, &t, err, sizeof(err))
                     : tokenizer_load_tiktoken(p, n, TOKENIZER_CL100K, &t, err, sizeof(err));
        if (rc == 0) {
            struct tokenizer_session *s = tokenizer_session_new(t);
            if (s != NULL) {
                static const char text[] = "Hello wörld 123 <|x|> \xff\xfe 日本 🎉  \n\n x";
                encode_decode(s, t, text, sizeof(text) - 1, TOKENIZER_SPECIAL, 0);
                encode_decode(s, t, p, n < 256 ? n : 256, 0, 0);
            }
            tokenizer_session_free(s);
            tokenizer_free(t);
        }
        return 0;
    }
    for (int i = 0; i < 2; i++) {
        encode_decode(sess[i], fixed[i], p, n, 0, i == 1); /* prefix space: no round trip */
        encode_decode(sess[i], fixed[i], p, n, TOKENIZER_SPECIAL, i == 1);
    }
    return 0;
}
