/*
 * tokenizer_bench - encode throughput of src/llm/tokenizer on one core.
 *
 *   tokenizer_bench TOKENIZER_FILE [hf|cl100k|o200k] TEXT_FILE...
 *
 * Concatenates the text files (English prose: the licences in
 * /usr/share/common-licenses, the docs), then encodes the whole text with a
 * fresh session (cold: empty piece cache) and again for at least 2 s (warm),
 * in 64 KiB calls as a load generator would, and prints MB/s, tokens/s and
 * bytes per token. Build: ninja -C build tests/unit/tokenizer_bench.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/file.h"
#include "llm/tokenizer.h"

#define CALL_BYTES (64u << 10)

/* Encodes text in CALL_BYTES calls (cut at a space); returns tokens or -1. */
static long encode_all(struct tokenizer_session *s, const char *text, size_t len,
                       struct tokenizer_ids *ids)
{
    long total = 0;
    for (size_t off = 0; off < len;) {
        size_t n = len - off < CALL_BYTES ? len - off : CALL_BYTES;
        while (off + n < len && n > 1 && text[off + n] != ' ')
            n--;
        ids->len = 0;
        if (tokenizer_encode(s, text + off, n, 0, ids) < 0)
            return -1;
        total += (long)ids->len;
        off += n;
    }
    return total;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: tokenizer_bench TOKENIZER_FILE hf|cl100k|o200k TEXT_FILE...\n");
        return 2;
    }
    enum tokenizer_kind kind = strcmp(argv[2], "cl100k") == 0  ? TOKENIZER_CL100K
                               : strcmp(argv[2], "o200k") == 0 ? TOKENIZER_O200K
                                                               : TOKENIZER_HF_JSON;
    char err[512];
    size_t len = 0, cap = 1 << 20;
    char *text = ts_malloc(cap);
    if (text == NULL)
        return 2;
    for (int i = 3; i < argc; i++) {
        char *d;
        size_t n;
        if (file_read_all(argv[i], 64u << 20, &d, &n, err, sizeof(err)) < 0) {
            fprintf(stderr, "tokenizer_bench: %s\n", err);
            return 2;
        }
        while (len + n > cap)
            cap *= 2;
        char *nt = ts_realloc(text, cap);
        if (nt == NULL)
            return 2;
        text = nt;
        memcpy(text + len, d, n);
        len += n;
        ts_free(d);
    }
    uint64_t t0 = ts_now_ns();
    struct tokenizer *t;
    if (tokenizer_load_file(argv[1], kind, &t, err, sizeof(err)) < 0) {
        fprintf(stderr, "tokenizer_bench: %s\n", err);
        return 2;
    }
    uint64_t t1 = ts_now_ns();
    struct tokenizer_session *s = tokenizer_session_new(t);
    struct tokenizer_ids ids;
    tokenizer_ids_init(&ids, 0);
    if (s == NULL || tokenizer_encode(s, "Hello", 5, 0, &ids) < 0)
        return 2;
    uint64_t tf = ts_now_ns();
    printf("session and first encode of 5 bytes: %.2f ms\n", (tf - t1) / 1e6);
    tokenizer_session_free(s);
    t1 = ts_now_ns();
    s = tokenizer_session_new(t);
    long tokens = s ? encode_all(s, text, len, &ids) : -1;
    uint64_t t2 = ts_now_ns();
    if (tokens < 0) {
        fprintf(stderr, "tokenizer_bench: encode failed\n");
        return 2;
    }
    int rounds = 0;
    uint64_t t3 = ts_now_ns(), t4;
    do {
        if (encode_all(s, text, len, &ids) != tokens)
            return 2;
        rounds++;
        t4 = ts_now_ns();
    } while (t4 - t3 < 2000000000ull);
    double cold = (double)(t2 - t1) / 1e9, warm = (double)(t4 - t3) / 1e9 / rounds;
    printf("load %.0f ms; text %zu bytes, %ld tokens (%.2f bytes/token)\n", (t1 - t0) / 1e6, len,
           tokens, (double)len / (double)tokens);
    printf("encode cold %.1f MB/s, warm %.1f MB/s (%.2f M tokens/s), %d rounds\n", len / cold / 1e6,
           len / warm / 1e6, tokens / warm / 1e6, rounds);
    tokenizer_ids_release(&ids);
    tokenizer_session_free(s);
    tokenizer_free(t);
    ts_free(text);
    return 0;
}
