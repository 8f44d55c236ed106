/*
 * reqsample.h - a bounded, mergeable sample of successful requests' sizes
 * and latencies, for the report's length distributions and the scatter of
 * TTFT against input length and E2EL against output length (as GenAI-Perf
 * and guidellm show them).
 *
 * The sample is a bottom-k sketch: each request gets a key, a hash of its
 * index in the run (reqsample_key), and the sample keeps the REQSAMPLE_MAX
 * requests with the smallest keys. The hash makes it a uniform random sample
 * of the requests; keeping the smallest keys makes it mergeable exactly: the
 * sample of two sets merged is the sample of their union, whatever the
 * order (workers, ranks, result files). Keys are 53 bits, so JSON numbers
 * carry them exactly.
 */
#ifndef TS_ANALYSIS_REQSAMPLE_H
#define TS_ANALYSIS_REQSAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REQSAMPLE_MAX 1000u

struct reqsample_entry {
    uint64_t key; /* < 2^53 */
    uint32_t input_tokens, output_tokens;
    float ttft_ms; /* NAN when the request had no first token (not streamed) */
    float e2el_ms;
};

/* A max-heap on key of at most REQSAMPLE_MAX entries; zeroed = empty. */
struct reqsample {
    uint32_t n;
    struct reqsample_entry e[REQSAMPLE_MAX];
};

/* The key of the request with this index in the run (splitmix64, 53 bits). */
uint64_t reqsample_key(uint64_t index);
/* Offers one entry: kept when the sample has room or its key is below the
 * largest held (which then leaves). An entry whose key is already held is
 * not added twice. */
void reqsample_add(struct reqsample *s, const struct reqsample_entry *e);
/* Offers every entry of src to dst. */
void reqsample_merge(struct reqsample *dst, const struct reqsample *src);

#endif
