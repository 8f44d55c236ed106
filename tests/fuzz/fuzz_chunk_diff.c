/*
 * Differential fuzzing of the stream chunk decoder: openai_decode_chunk()
 * (yajl fast path, jansson for anything unusual) and
 * openai_decode_chunk_full() (jansson only) on the same bytes must give the
 * same result code, the same error message and the same values
 * (openai_chunk_same). The decoders are kept from input to input, as a
 * worker keeps its own, so reuse of their buffers is fuzzed too.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/openai_chunk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct openai_decoder fast, full;
    static int ready;
    if (!ready) {
        openai_decoder_init(&fast);
        openai_decoder_init(&full);
        ready = 1;
    }
    struct openai_chunk a, b;
    int ra = openai_decode_chunk(&fast, (const char *)data, size, &a);
    int rb = openai_decode_chunk_full(&full, (const char *)data, size, &b);
    if (ra != rb || strcmp(openai_decoder_errmsg(&fast), openai_decoder_errmsg(&full)) != 0) {
        fprintf(stderr, "decoders disagree: rc %d vs %d, '%s' vs '%s'\n", ra, rb,
                openai_decoder_errmsg(&fast), openai_decoder_errmsg(&full));
        abort();
    }
    if (!openai_chunk_same(&a, &b)) {
        fprintf(stderr, "decoders disagree on the values (fast path taken %llu times)\n",
                (unsigned long long)fast.n_fast);
        abort();
    }
    return 0;
}
