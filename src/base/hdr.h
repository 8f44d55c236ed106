/*
 * hdr.h - HDR histogram: fixed-memory, constant-time recording of integer
 * values with a bounded relative error (Gil Tene's HdrHistogram layout), and
 * its standard "V2" compressed encoding used in .hlog interval logs.
 *
 * Layout. A histogram tracks values from 0 to `highest` with `sigfigs`
 * significant decimal digits (1..5): any two values in the same bucket differ
 * by at most 1 part in 10^sigfigs of the value. Values below `lowest` (the
 * lowest discernible value, >= 1) share buckets of width 2^floor(log2(lowest)).
 * Memory is one int64 count per bucket, allocated once by hdr_init()/hdr_new();
 * 1 .. 3,600,000,000 at 3 digits is 23,552 counts (184 KiB).
 *
 * Units. The histogram stores plain integers and does not know their unit.
 * Project convention: latencies are recorded in MICROSECONDS in histograms
 * made by hdr_new_latency() (1 µs .. 1 h at 3 significant digits), and .hlog
 * files write Interval_Max in milliseconds (hlog.h, ratio 1000).
 *
 * Out-of-range values. Negative values are rejected with -EINVAL. Values above
 * `highest` are clamped to `highest` and counted both normally and in
 * h->saturated, so no sample is lost from the totals but the caller can tell
 * the range was too small.
 *
 * Threads. A histogram has one writer and no internal locking. Each worker
 * records into its own histogram; the owner merges them with hdr_add() when
 * the workers are quiescent (or on copies handed over at interval ends).
 * Readers (percentiles, iterators, encoding) must not run concurrently with a
 * writer of the same histogram.
 *
 * Query semantics follow HdrHistogram: hdr_value_at_percentile() returns the
 * highest value equivalent to the bucket where the cumulative count first
 * reaches the percentile (the lowest equivalent for percentile 0). The rank
 * is the nearest rank, ceil(p / 100 * total) (Java HdrHistogram's rule, which
 * also makes it agree with the percentile iterator; HdrHistogram_c rounds
 * p / 100 * total + 0.5 instead, which can be one rank lower). hdr_min()
 * and hdr_max() return the lowest/highest equivalent of the recorded extremes,
 * hdr_mean() and hdr_stddev() weigh each bucket by its median equivalent value.
 */
#ifndef TS_BASE_HDR_H
#define TS_BASE_HDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* The project's default latency range: microseconds, 1 µs .. 1 h, 3 digits. */
#define HDR_LATENCY_LOWEST  INT64_C(1)
#define HDR_LATENCY_HIGHEST INT64_C(3600000000)
#define HDR_LATENCY_SIGFIGS 3

/* hdr_decode() refuses layouts with more counts than this (32 MiB). */
#define HDR_DECODE_MAX_COUNTS (1 << 22)

struct hdr {
    int64_t lowest;  /* lowest discernible value, >= 1 */
    int64_t highest; /* highest trackable value; larger values are clamped to it */
    int32_t sigfigs; /* significant decimal digits, 1..5 */
    /* Bucket geometry (read-only after init). */
    int32_t unit_magnitude;     /* floor(log2(lowest)) */
    int32_t sub_half_magnitude; /* log2(sub_count) - 1 */
    int32_t sub_count;          /* sub-buckets per bucket, a power of two */
    int32_t sub_half;           /* sub_count / 2 */
    int32_t bucket_count;
    int32_t counts_len;
    int32_t lz_base; /* 64 - unit_magnitude - log2(sub_count), for the bucket index */
    int64_t sub_mask;
    /* State. */
    int64_t total_count;
    int64_t min_value; /* smallest non-zero value recorded, INT64_MAX if none */
    int64_t max_value; /* largest value recorded (after clamping), 0 if none */
    int64_t saturated; /* how many recorded counts were clamped to highest */
    int64_t *counts;   /* counts_len entries, owned */
};

/*
 * Initializes an embedded histogram. Returns 0, -EINVAL (lowest < 1,
 * highest < 2 * lowest, sigfigs outside 1..5, or a layout whose values would
 * not fit 64 bits), or -ENOMEM. On failure *h holds nothing to release.
 */
TS_MUST_CHECK int hdr_init(struct hdr *h, int64_t lowest, int64_t highest, int sigfigs);
/* Frees the counts of an initialized histogram; safe to call twice. */
void hdr_release(struct hdr *h);

/* Heap versions: *out is set on success only; hdr_free() it. hdr_free(NULL) is a no-op. */
TS_MUST_CHECK int hdr_new(int64_t lowest, int64_t highest, int sigfigs, struct hdr **out);
/* hdr_new(HDR_LATENCY_LOWEST, HDR_LATENCY_HIGHEST, HDR_LATENCY_SIGFIGS): microseconds. */
TS_MUST_CHECK int hdr_new_latency(struct hdr **out);
/* A new, empty histogram with the same lowest/highest/sigfigs as proto. */
TS_MUST_CHECK int hdr_new_like(const struct hdr *proto, struct hdr **out);
void hdr_free(struct hdr *h);

/*
 * Records one value: O(1), no allocation, no system call. Returns 0, or
 * -EINVAL for value < 0 (nothing recorded). Values above highest are clamped
 * (see the top of this file).
 */
int hdr_record(struct hdr *h, int64_t value);
/* Records count occurrences of value. -EINVAL for value < 0 or count < 0,
 * -EOVERFLOW if the total count would overflow int64 (nothing recorded). */
int hdr_record_n(struct hdr *h, int64_t value, int64_t count);
/*
 * Records value and corrects for coordinated omission exactly as HdrHistogram
 * defines it: when value > expected_interval > 0, also records
 * value - expected_interval, value - 2 * expected_interval, ... down to and
 * including the last one >= expected_interval. Values above highest are
 * clamped before the correction. Cost is O(buckets touched), not O(value /
 * expected_interval). Returns as hdr_record_n(); on -EOVERFLOW part of the
 * synthesized counts may have been recorded.
 */
int hdr_record_corrected(struct hdr *h, int64_t value, int64_t expected_interval);
int hdr_record_corrected_n(struct hdr *h, int64_t value, int64_t count, int64_t expected_interval);

/*
 * Adds every count of src to dst. With the same bucket geometry this is an
 * exact element-wise sum; otherwise each src bucket is re-recorded at its
 * lowest equivalent value (values above dst->highest clamp and count as
 * saturated). dst->saturated also gains src->saturated. Returns 0, or
 * -EOVERFLOW (dst unchanged) if the total count would overflow.
 */
int hdr_add(struct hdr *dst, const struct hdr *src);
/* Forgets every recorded value; keeps the layout and memory. */
void hdr_reset(struct hdr *h);
/* True if a and b have the same layout and the same counts. */
bool hdr_equal(const struct hdr *a, const struct hdr *b);

/* Queries. All return 0 (0.0) for an empty histogram. */
int64_t hdr_total_count(const struct hdr *h);
int64_t hdr_min(const struct hdr *h);
int64_t hdr_max(const struct hdr *h);
double hdr_mean(const struct hdr *h);
double hdr_stddev(const struct hdr *h);
/* Count in the bucket holding value (values above highest are looked up as
 * highest, as when recording; negative values have count 0). */
int64_t hdr_count_at_value(const struct hdr *h, int64_t value);
/* percentile in [0, 100]; below 0 (or NaN) means 0, above 100 means 100. */
int64_t hdr_value_at_percentile(const struct hdr *h, double percentile);
/* n percentiles in one pass; percentiles must be ascending (-EINVAL if not). */
int hdr_values_at_percentiles(const struct hdr *h, const double *percentiles, int64_t *values,
                              size_t n);

/*
 * Value equivalence: two values are equivalent when they fall in the same
 * bucket. Negative arguments are treated as 0; results saturate at INT64_MAX.
 */
int64_t hdr_lowest_equivalent(const struct hdr *h, int64_t value);
int64_t hdr_highest_equivalent(const struct hdr *h, int64_t value);
int64_t hdr_median_equivalent(const struct hdr *h, int64_t value);
int64_t hdr_next_non_equivalent(const struct hdr *h, int64_t value);
/* Width of the bucket holding value. */
int64_t hdr_equivalent_range(const struct hdr *h, int64_t value);
bool hdr_values_are_equivalent(const struct hdr *h, int64_t a, int64_t b);

/*
 * Iterators. Init one of the four kinds on a histogram, then call
 * hdr_iter_next() until it returns false; the public fields describe the
 * current step. The histogram must not change during the iteration.
 *  - recorded: one step per non-zero bucket; value_iterated_to = value.
 *  - percentile: steps at percentile levels that get ticks_per_half_distance
 *    times denser each time the remaining distance to 100% halves (the
 *    classic HdrHistogram percentile distribution), then one last step at
 *    100%; percentile is the level, value_iterated_to its highest equivalent.
 *  - linear: one step per value_units_per_step of value, count_added summing
 *    the buckets reached in the step; value_iterated_to = the reporting level.
 *  - log: like linear, with levels first, first * base, first * base^2, ...
 */
enum hdr_iter_kind {
    HDR_ITER_RECORDED,
    HDR_ITER_PERCENTILE,
    HDR_ITER_LINEAR,
    HDR_ITER_LOG,
};

struct hdr_iter {
    /* Valid after hdr_iter_next() returned true. */
    int64_t value;               /* lowest equivalent value of the current bucket */
    int64_t highest_equivalent;  /* highest equivalent value of the current bucket */
    int64_t count;               /* count in the current bucket */
    int64_t cumulative_count;    /* counts up to and including the current bucket */
    int64_t count_added;         /* counts added by this step (recorded, linear, log) */
    int64_t value_iterated_to;   /* see the kinds above */
    int64_t value_iterated_from; /* the previous step's value_iterated_to */
    double percentile;           /* percentile iterator: the level of this step */
    /* Private. */
    const struct hdr *h_;
    enum hdr_iter_kind kind_;
    int32_t index_;
    int64_t total_;
    bool seen_last_;
    int32_t ticks_;
    double percentile_to_;
    int64_t step_;
    double log_base_;
    int64_t level_;
    int64_t level_low_;
};

void hdr_iter_recorded_init(struct hdr_iter *it, const struct hdr *h);
/* -EINVAL if ticks_per_half_distance < 1. */
TS_MUST_CHECK int hdr_iter_percentile_init(struct hdr_iter *it, const struct hdr *h,
                                           int32_t ticks_per_half_distance);
/* -EINVAL if value_units_per_step < 1. */
TS_MUST_CHECK int hdr_iter_linear_init(struct hdr_iter *it, const struct hdr *h,
                                       int64_t value_units_per_step);
/* -EINVAL if value_units_first_step < 1 or log_base <= 1. */
TS_MUST_CHECK int hdr_iter_log_init(struct hdr_iter *it, const struct hdr *h,
                                    int64_t value_units_first_step, double log_base);
bool hdr_iter_next(struct hdr_iter *it);

/*
 * V2 compressed encoding (HdrHistogram's histogram blob, as in .hlog files):
 * a big-endian header {cookie 0x1c849314 (0x1c849304 | word-size nibble),
 * int32 length} and a zlib stream of {cookie 0x1c849313, int32 payload length,
 * int32 normalizing index offset (0), int32 sigfigs, int64 lowest, int64
 * highest, float64 conversion ratio (1.0)} followed by the counts up to the
 * max bucket as ZigZag LEB128 varints (at most 9 bytes; negative n = n empty
 * buckets). Deflate runs at level 9 like Java's HistogramLogWriter, so the
 * bytes match what the Java implementation writes for the same counts.
 *
 * hdr_encode() sets *out to a heap buffer (ts_free it) of *out_len bytes.
 * hdr_encode_base64() sets *out to a NUL-terminated heap string (standard
 * alphabet, '=' padding); out_len may be NULL. Both return 0 or -ENOMEM.
 *
 * hdr_decode() validates everything (cookies, lengths, the layout, varint
 * bounds, runs past the end, trailing bytes, total count overflow) and returns
 * 0 with a new histogram in *out (hdr_free it), TS_PARSE for malformed input,
 * TS_TOOBIG for a layout with more than HDR_DECODE_MAX_COUNTS counts, or
 * -ENOMEM. Only V2 blobs are accepted (what every HdrHistogram since 2015
 * writes); the normalizing offset and conversion ratio (used by Java's
 * DoubleHistogram) are read but ignored. The decoded histogram's min/max are
 * the lowest/highest equivalents of its first/last non-empty buckets.
 * hdr_decode_base64() does the same for base64 text of len bytes (no
 * whitespace accepted).
 */
TS_MUST_CHECK int hdr_encode(const struct hdr *h, uint8_t **out, size_t *out_len);
TS_MUST_CHECK int hdr_encode_base64(const struct hdr *h, char **out, size_t *out_len);
TS_MUST_CHECK int hdr_decode(const uint8_t *data, size_t len, struct hdr **out);
TS_MUST_CHECK int hdr_decode_base64(const char *text, size_t len, struct hdr **out);

#endif
