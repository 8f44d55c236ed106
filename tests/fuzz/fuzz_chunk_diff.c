/*
 * Differential fuzzing of the stream chunk decoder: openai_decode_chunk()
 * (the fast path, jansson for anything unusual), once with its parser
 * (simdjson when built in) and once with yajl, and
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
    static struct openai_decoder fast[2], full;
    static int ready;
    if (!ready) {
        openai_decoder_init(&fast[0]);
        openai_decoder_init(&fast[1]);
        fast[1].yajl_only = true;
        openai_decoder_init(&full);
        ready = 1;
    }
    struct openai_chunk a, b;
    int rb = openai_decode_chunk_full(&full, (const char *)data, size, &b);
    for (int i = 0; i < 2; i++) {
        int ra = openai_decode_chunk(&fast[i], (const char *)data, size, &a);
        if (ra != rb ||
            strcmp(openai_decoder_errmsg(&fast[i]), openai_decoder_errmsg(&full)) != 0) {
            fprintf(stderr, "decoders disagree (%s): rc %d vs %d, '%s' vs '%s'\n",
                    i ? "yajl" : "fast path's parser", ra, rb, openai_decoder_errmsg(&fast[i]),
                    openai_decoder_errmsg(&full));
            abort();
        }
        if (!openai_chunk_same(&a, &b)) {
            fprintf(stderr, "decoders disagree on the values (%s; fast path taken %llu times)\n",
                    i ? "yajl" : "fast path's parser", (unsigned long long)fast[i].n_fast);
            abort();
        }
    }
    return 0;
}
