/*
 * Differential fuzzing of a stream's memo (llm/openai_memo.h): the input is
 * chunks, one per line, of two streams that share one decoder as a
 * worker's streams do (a line that starts with byte 0x01 is the second
 * stream's, without that byte); each goes through
 * openai_decode_chunk_memo() with its stream's memo, and through
 * openai_decode_chunk_full() (jansson only), which must give the same
 * result code, error message and values (openai_chunk_same) for every
 * chunk of the sequence (the memo's result read after its input was
 * overwritten and freed). Memos live for one input; the decoders are kept
 * from input to input, as a worker keeps its own.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/openai_memo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_CHUNKS 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct openai_decoder d, full;
    static int ready;
    if (!ready) {
        openai_decoder_init(&d);
        openai_decoder_init(&full);
        ready = 1;
    }
    struct openai_memo *memo[2] = {NULL, NULL};
    const char *s = (const char *)data, *end = s + size;
    for (int i = 0; i < MAX_CHUNKS && s < end; i++) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
        const char *line = s;
        int which = n && line[0] == 1;
        line += which;
        struct openai_chunk a, b;
        /* from a copy scribbled over before the results are compared: no
         * result may point into the caller's bytes */
        size_t len = n - (size_t)which;
        char *copy = malloc(len ? len : 1);
        if (!copy)
            abort();
        memcpy(copy, line, len);
        int ra = openai_decode_chunk_memo(&d, &memo[which], copy, len, &a);
        memset(copy, 0xAA, len);
        free(copy);
        int rb = openai_decode_chunk_full(&full, line, len, &b);
        if (ra != rb || strcmp(openai_decoder_errmsg(&d), openai_decoder_errmsg(&full)) != 0) {
            fprintf(stderr, "chunk %d: memo and jansson disagree: rc %d vs %d, '%s' vs '%s'\n", i,
                    ra, rb, openai_decoder_errmsg(&d), openai_decoder_errmsg(&full));
            abort();
        }
        if (!openai_chunk_same(&a, &b)) {
            fprintf(stderr, "chunk %d: memo and jansson disagree on the values (%llu from memos)\n",
                    i, (unsigned long long)d.n_memo);
            abort();
        }
        s += n + 1;
    }
    openai_memo_free(memo[0]);
    openai_memo_free(memo[1]);
    return 0;
}
