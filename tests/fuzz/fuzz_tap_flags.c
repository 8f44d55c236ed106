/*
 * Differential fuzzing of what the stream tap reads of an event without a
 * DOM (chaos/tap_int.h): the input is chunks, one per line, of two streams
 * that share one decoder as a proxy worker's taps do (a line that starts
 * with byte 0x01 is the second stream's, without that byte). Each line goes
 * through tap_event_flags() with its stream's memo (the decoder's fast path
 * or memo, jansson where the decoder refuses) and through tap_chunk_flags()
 * of its jansson DOM, the reading of taps whose faults rewrite chunks: the
 * two must give the same flags for every chunk of the sequence, or a stall
 * or truncation counted in tokens would fire at another event depending on
 * which other faults share the tap.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chaos/tap_int.h"
#include "llm/openai_memo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_CHUNKS 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct openai_decoder d;
    static int ready;
    if (!ready) {
        openai_decoder_init(&d);
        ready = 1;
    }
    struct openai_memo *memo[2] = {NULL, NULL};
    const char *s = (const char *)data, *end = s + size;
    for (int i = 0; i < MAX_CHUNKS && s < end; i++) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
        int which = n && s[0] == 1;
        const char *line = s + which;
        size_t len = n - (size_t)which;
        unsigned fast = tap_event_flags(&d, &memo[which], line, len);
        json_t *root = tap_json_load(line, len);
        unsigned dom = tap_chunk_flags(root);
        json_decref(root);
        if (fast != dom) {
            fprintf(stderr, "chunk %d: flags without a DOM 0x%x, from the DOM 0x%x: %.*s\n", i,
                    fast, dom, (int)(len > 300 ? 300 : len), line);
            abort();
        }
        s += n + 1;
    }
    openai_memo_free(memo[0]);
    openai_memo_free(memo[1]);
    return 0;
}
