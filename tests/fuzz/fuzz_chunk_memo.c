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

#include "fuzz_lines.h"
#include "llm/openai_memo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct decoders {
    struct openai_decoder d, full;
};

static void one_line(void *ctx, int i, struct openai_memo **memo, const char *line, size_t len)
{
    struct decoders *x = ctx;
    struct openai_chunk a, b;
    /* from a copy scribbled over before the results are compared: no
     * result may point into the caller's bytes */
    char *copy = malloc(len ? len : 1);
    if (!copy)
        abort();
    memcpy(copy, line, len);
    int ra = openai_decode_chunk_memo(&x->d, memo, copy, len, &a);
    memset(copy, 0xAA, len);
    free(copy);
    int rb = openai_decode_chunk_full(&x->full, line, len, &b);
    if (ra != rb || strcmp(openai_decoder_errmsg(&x->d), openai_decoder_errmsg(&x->full)) != 0) {
        fprintf(stderr, "chunk %d: memo and jansson disagree: rc %d vs %d, '%s' vs '%s'\n", i, ra,
                rb, openai_decoder_errmsg(&x->d), openai_decoder_errmsg(&x->full));
        abort();
    }
    if (!openai_chunk_same(&a, &b)) {
        fprintf(stderr, "chunk %d: memo and jansson disagree on the values (%llu from memos)\n", i,
                (unsigned long long)x->d.n_memo);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct decoders x;
    static int ready;
    if (!ready) {
        openai_decoder_init(&x.d);
        openai_decoder_init(&x.full);
        ready = 1;
    }
    fuzz_each_line(data, size, one_line, &x);
    return 0;
}
