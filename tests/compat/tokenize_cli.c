/*
 * tokenize_cli - test helper for tokenizer.test.mjs: loads a tokenizer file and
 * encodes each stdin line, a JSON string, printing its ids space-separated on
 * one line. With --roundtrip it exits 1 when decode(encode(line)) is not the
 * line again. --special encodes special-token text as special tokens.
 *
 *   tokenize_cli FILE [hf|cl100k|o200k] [--special] [--roundtrip]
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "llm/tokenizer.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: tokenize_cli FILE [hf|cl100k|o200k] [--special] [--roundtrip]\n");
        return 2;
    }
    enum tokenizer_kind kind = TOKENIZER_AUTO;
    unsigned flags = 0;
    int round_trip = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "hf") == 0)
            kind = TOKENIZER_HF_JSON;
        else if (strcmp(argv[i], "cl100k") == 0)
            kind = TOKENIZER_CL100K;
        else if (strcmp(argv[i], "o200k") == 0)
            kind = TOKENIZER_O200K;
        else if (strcmp(argv[i], "--special") == 0)
            flags |= TOKENIZER_SPECIAL;
        else if (strcmp(argv[i], "--roundtrip") == 0)
            round_trip = 1;
    }
    char err[512];
    struct tokenizer *t;
    if (tokenizer_load_file(argv[1], kind, &t, err, sizeof(err)) < 0) {
        fprintf(stderr, "tokenize_cli: %s\n", err);
        return 2;
    }
    struct tokenizer_session *s = tokenizer_session_new(t);
    if (s == NULL) {
        fprintf(stderr, "tokenize_cli: out of memory\n");
        tokenizer_free(t);
        return 2;
    }
    int status = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    struct tokenizer_ids ids;
    tokenizer_ids_init(&ids, 0);
    struct buf back;
    buf_init(&back, TOKENIZER_MAX_TEXT);
    while ((n = getline(&line, &cap, stdin)) > 0) {
        json_error_t jerr;
        json_t *j = json_loadb(line, (size_t)n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
        if (!json_is_string(j)) {
            fprintf(stderr, "tokenize_cli: input line is not a JSON string\n");
            json_decref(j);
            status = 2;
            break;
        }
        const char *text = json_string_value(j);
        size_t len = json_string_length(j);
        ids.len = 0;
        buf_reset(&back);
        int rc = tokenizer_encode(s, text, len, flags, &ids);
        if (rc < 0) {
            fprintf(stderr, "tokenize_cli: encode: %s\n", ts_strerror(rc));
            json_decref(j);
            status = 2;
            break;
        }
        for (size_t i = 0; i < ids.len; i++)
            printf(i ? " %u" : "%u", ids.v[i]);
        printf("\n");
        rc = tokenizer_decode(t, ids.v, ids.len, &back);
        if (rc < 0 || (round_trip && (back.len != len || memcmp(back.data, text, len) != 0))) {
            fprintf(stderr, "tokenize_cli: decode differs for %s", line);
            status = 1;
        }
        json_decref(j);
    }
    fflush(stdout);
    free(line);
    buf_release(&back);
    tokenizer_ids_release(&ids);
    tokenizer_session_free(s);
    tokenizer_free(t);
    return status;
}
