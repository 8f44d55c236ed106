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
#include "fuzz_lines.h"
#include "llm/openai_memo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one_line(void *ctx, int i, struct openai_memo **memo, const char *line, size_t len)
{
    unsigned fast = tap_event_flags(ctx, memo, line, len);
    json_t *root = tap_json_load(line, len);
    unsigned dom = tap_chunk_flags(root);
    json_decref(root);
    if (fast != dom) {
        fprintf(stderr, "chunk %d: flags without a DOM 0x%x, from the DOM 0x%x: %.*s\n", i, fast,
                dom, (int)(len > 300 ? 300 : len), line);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct openai_decoder d;
    static int ready;
    if (!ready) {
        openai_decoder_init(&d);
        ready = 1;
    }
    fuzz_each_line(data, size, one_line, &d);
    return 0;
}
