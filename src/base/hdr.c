/*
 * hdr.c - HDR histogram (see hdr.h), written from the published HdrHistogram
 * algorithm: values are split into buckets by their power of two, and each
 * bucket into sub_count linear sub-buckets; the upper half of every bucket's
 * sub-buckets is stored (the lower half overlaps the previous bucket), so the
 * counts array holds (bucket_count + 1) * sub_half entries.
 */
#include "hdr.h"

#include <math.h>
#include <string.h>
#include <zlib.h>

#include "alloc.h"
#include "base64.h"

#define V2_ENCODING_COOKIE    UINT32_C(0x1c849303)
#define V2_COMPRESSION_COOKIE UINT32_C(0x1c849304)
#define COOKIE_WORD_SIZE_BITS UINT32_C(0xf0)
/* V2 blobs carry word size "1" (varints) in the cookie's second nibble. */
#define V2_WORD_SIZE_NIBBLE    UINT32_C(0x10)
#define ENCODING_HEADER_LEN    40
#define COMPRESSION_HEADER_LEN 8
#define MAX_VARINT_LEN         9

/* ---- Layout ---------------------------------------------------------- */

static int32_t ceil_log2(int64_t v)
{
    int32_t m = 0;
    while ((INT64_C(1) << m) < v)
        m++;
    return m;
}

/* Fills in the geometry of h (not counts); 0 or -EINVAL. */
static int hdr_layout(struct hdr *h, int64_t lowest, int64_t highest, int sigfigs)
{
    if (lowest < 1 || sigfigs < 1 || sigfigs > 5 || highest / 2 < lowest)
        return -EINVAL;

    int64_t single_unit_max = 2;
    for (int i = 0; i < sigfigs; i++)
        single_unit_max *= 10;
    int32_t sub_count_magnitude = ceil_log2(single_unit_max);
    int32_t half_magnitude = (sub_count_magnitude > 1 ? sub_count_magnitude : 1) - 1;
    int32_t unit = 63 - __builtin_clzll((unsigned long long)lowest);
    if (unit + half_magnitude > 61)
        return -EINVAL;

    memset(h, 0, sizeof(*h));
    h->lowest = lowest;
    h->highest = highest;
    h->sigfigs = sigfigs;
    h->unit_magnitude = unit;
    h->sub_half_magnitude = half_magnitude;
    h->sub_count = INT32_C(1) << (half_magnitude + 1);
    h->sub_half = h->sub_count / 2;
    h->sub_mask = ((int64_t)h->sub_count - 1) << unit;
    h->lz_base = 64 - unit - (half_magnitude + 1);

    /* Buckets needed so that the first untrackable value exceeds highest. */
    int64_t untrackable = (int64_t)h->sub_count << unit;
    int32_t buckets = 1;
    while (untrackable <= highest) {
        if (untrackable > INT64_MAX / 2) {
            buckets++;
            break;
        }
        untrackable <<= 1;
        buckets++;
    }
    h->bucket_count = buckets;
    h->counts_len = (buckets + 1) * h->sub_half;
    h->min_value = INT64_MAX;
    return 0;
}

static inline int32_t bucket_of(const struct hdr *h, int64_t v)
{
    return h->lz_base - __builtin_clzll((unsigned long long)v | (unsigned long long)h->sub_mask);
}

/* Index in counts of a value 0 <= v; < counts_len whenever v <= highest. */
static inline int32_t index_of(const struct hdr *h, int64_t v)
{
    int32_t b = bucket_of(h, v);
    int32_t sub = (int32_t)(v >> (b + h->unit_magnitude));
    return ((b + 1) << h->sub_half_magnitude) + sub - h->sub_half;
}

/* Lowest value of the bucket at index i (any i >= 0), saturating at INT64_MAX. */
static int64_t value_at_index(const struct hdr *h, int32_t i)
{
    int32_t b = (i >> h->sub_half_magnitude) - 1;
    int64_t sub = (i & (h->sub_half - 1)) + h->sub_half;
    if (b < 0) {
        sub -= h->sub_half;
        b = 0;
    }
    int shift = b + h->unit_magnitude;
    if (shift >= 63 || (uint64_t)sub > ((uint64_t)INT64_MAX >> shift))
        return INT64_MAX;
    return sub << shift;
}

static int64_t lowest_equiv(const struct hdr *h, int64_t v)
{
    int32_t shift = bucket_of(h, v) + h->unit_magnitude;
    return (v >> shift) << shift;
}

static int64_t range_of(const struct hdr *h, int64_t v)
{
    return INT64_C(1) << (bucket_of(h, v) + h->unit_magnitude);
}

/* Buckets are aligned to their width, so this never overflows. */
static int64_t highest_equiv(const struct hdr *h, int64_t v)
{
    return lowest_equiv(h, v) + (range_of(h, v) - 1);
}

static int64_t median_equiv(const struct hdr *h, int64_t v)
{
    return lowest_equiv(h, v) + (range_of(h, v) >> 1);
}

/* ---- Lifecycle ------------------------------------------------------- */

int hdr_init(struct hdr *h, int64_t lowest, int64_t highest, int sigfigs)
{
    struct hdr tmp;
    int rc = hdr_layout(&tmp, lowest, highest, sigfigs);
    if (rc)
        return rc;
    tmp.counts = ts_calloc((size_t)tmp.counts_len, sizeof(int64_t));
    if (!tmp.counts)
        return -ENOMEM;
    *h = tmp;
    return 0;
}

void hdr_release(struct hdr *h)
{
    ts_free(h->counts);
    h->counts = NULL;
}

int hdr_new(int64_t lowest, int64_t highest, int sigfigs, struct hdr **out)
{
    struct hdr *h = ts_malloc(sizeof(*h));
    if (!h)
        return -ENOMEM;
    int rc = hdr_init(h, lowest, highest, sigfigs);
    if (rc) {
        ts_free(h);
        return rc;
    }
    *out = h;
    return 0;
}

int hdr_new_latency(struct hdr **out)
{
    return hdr_new(HDR_LATENCY_LOWEST, HDR_LATENCY_HIGHEST, HDR_LATENCY_SIGFIGS, out);
}

int hdr_new_like(const struct hdr *proto, struct hdr **out)
{
    return hdr_new(proto->lowest, proto->highest, proto->sigfigs, out);
}

void hdr_free(struct hdr *h)
{
    if (!h)
        return;
    hdr_release(h);
    ts_free(h);
}

/* ---- Recording ------------------------------------------------------- */

/* Adds count at a value known to be in [0, highest]; the caller checked overflow. */
static void add_at(struct hdr *h, int64_t value, int64_t count)
{
    h->counts[index_of(h, value)] += count;
    h->total_count += count;
    if (value > h->max_value)
        h->max_value = value;
    if (value != 0 && value < h->min_value)
        h->min_value = value;
}

int hdr_record(struct hdr *h, int64_t value)
{
    if (__builtin_expect(value < 0, 0))
        return -EINVAL;
    if (__builtin_expect(value > h->highest, 0)) {
        value = h->highest;
        h->saturated++;
    }
    h->counts[index_of(h, value)]++;
    h->total_count++;
    if (__builtin_expect(value > h->max_value, 0))
        h->max_value = value;
    if (__builtin_expect(value < h->min_value && value != 0, 0))
        h->min_value = value;
    return 0;
}

int hdr_record_n(struct hdr *h, int64_t value, int64_t count)
{
    int64_t total;
    if (value < 0 || count < 0)
        return -EINVAL;
    if (count == 0)
        return 0;
    if (__builtin_add_overflow(h->total_count, count, &total))
        return -EOVERFLOW;
    if (value > h->highest) {
        value = h->highest;
        h->saturated += count;
    }
    add_at(h, value, count);
    return 0;
}

int hdr_record_corrected(struct hdr *h, int64_t value, int64_t expected_interval)
{
    return hdr_record_corrected_n(h, value, 1, expected_interval);
}

/*
 * The synthesized values value - k * interval form an arithmetic sequence;
 * all terms inside one bucket land on the same count, so each bucket is
 * updated once with the number of its terms instead of term by term.
 */
int hdr_record_corrected_n(struct hdr *h, int64_t value, int64_t count, int64_t expected_interval)
{
    int rc = hdr_record_n(h, value, count);
    if (rc || count == 0 || expected_interval <= 0)
        return rc;
    if (value > h->highest)
        value = h->highest;
    if (value <= expected_interval)
        return 0;

    int64_t missing = value - expected_interval;
    while (missing >= expected_interval) {
        int64_t low = lowest_equiv(h, missing);
        int64_t floor = low > expected_interval ? low : expected_interval;
        int64_t terms = (missing - floor) / expected_interval + 1;
        int64_t added, total;
        if (__builtin_mul_overflow(terms, count, &added) ||
            __builtin_add_overflow(h->total_count, added, &total))
            return -EOVERFLOW;
        int64_t smallest = missing - (terms - 1) * expected_interval;
        add_at(h, smallest, added);
        missing = smallest - expected_interval;
    }
    return 0;
}

static bool same_geometry(const struct hdr *a, const struct hdr *b)
{
    return a->unit_magnitude == b->unit_magnitude && a->sub_half_magnitude == b->sub_half_magnitude;
}

int hdr_add(struct hdr *dst, const struct hdr *src)
{
    int64_t total;
    if (__builtin_add_overflow(dst->total_count, src->total_count, &total))
        return -EOVERFLOW;

    if (src->total_count == 0) {
        /* nothing to add */
    } else if (same_geometry(dst, src) && src->max_value <= dst->highest) {
        int32_t top = index_of(src, src->max_value);
        for (int32_t i = 0; i <= top; i++)
            dst->counts[i] += src->counts[i];
        dst->total_count = total;
        if (src->max_value > dst->max_value)
            dst->max_value = src->max_value;
        if (src->min_value < dst->min_value)
            dst->min_value = src->min_value;
    } else {
        for (int32_t i = 0; i < src->counts_len; i++) {
            int64_t count = src->counts[i];
            if (count == 0)
                continue;
            int64_t value = value_at_index(src, i);
            if (value > dst->highest) {
                value = dst->highest;
                dst->saturated += count;
            }
            add_at(dst, value, count);
        }
    }
    dst->saturated += src->saturated;
    return 0;
}

/* Only counts up to max_value's bucket can be set (every writer keeps
 * max_value, and hdr_add relies on it too): clearing just those keeps a
 * reset of a lightly used histogram (the runner resets ~20 of 190 KB each a
 * second) from writing, and faulting in, pages no value ever reached. */
void hdr_reset(struct hdr *h)
{
    int32_t top = h->max_value > 0 || h->total_count ? index_of(h, h->max_value) : 0;
    memset(h->counts, 0, (size_t)(top + 1) * sizeof(int64_t));
    h->total_count = 0;
    h->min_value = INT64_MAX;
    h->max_value = 0;
    h->saturated = 0;
}

bool hdr_equal(const struct hdr *a, const struct hdr *b)
{
    return a->lowest == b->lowest && a->highest == b->highest && a->sigfigs == b->sigfigs &&
           a->total_count == b->total_count &&
           memcmp(a->counts, b->counts, (size_t)a->counts_len * sizeof(int64_t)) == 0;
}

/* ---- Queries --------------------------------------------------------- */

int64_t hdr_total_count(const struct hdr *h)
{
    return h->total_count;
}

int64_t hdr_min(const struct hdr *h)
{
    if (h->total_count == 0 || h->counts[0] > 0 || h->min_value == INT64_MAX)
        return 0;
    return lowest_equiv(h, h->min_value);
}

int64_t hdr_max(const struct hdr *h)
{
    if (h->max_value == 0)
        return 0;
    return highest_equiv(h, h->max_value);
}

double hdr_mean(const struct hdr *h)
{
    if (h->total_count == 0)
        return 0.0;
    double sum = 0.0;
    for (int32_t i = 0; i < h->counts_len; i++) {
        if (h->counts[i])
            sum += (double)h->counts[i] * (double)median_equiv(h, value_at_index(h, i));
    }
    return sum / (double)h->total_count;
}

double hdr_stddev(const struct hdr *h)
{
    if (h->total_count == 0)
        return 0.0;
    double mean = hdr_mean(h);
    double sum = 0.0;
    for (int32_t i = 0; i < h->counts_len; i++) {
        if (h->counts[i]) {
            double dev = (double)median_equiv(h, value_at_index(h, i)) - mean;
            sum += dev * dev * (double)h->counts[i];
        }
    }
    return sqrt(sum / (double)h->total_count);
}

int64_t hdr_count_at_value(const struct hdr *h, int64_t value)
{
    if (value < 0)
        return 0;
    if (value > h->highest)
        value = h->highest;
    return h->counts[index_of(h, value)];
}

static double clamp_percentile(double p)
{
    if (!(p > 0.0))
        return 0.0;
    return p > 100.0 ? 100.0 : p;
}

/*
 * The nearest rank (1-based) of the percentile: the smallest count whose share
 * of the total reaches it. As in Java's HdrHistogram, the percentile is first
 * lowered by one ulp so that 0.29 * 100 style rounding cannot add a rank.
 */
static int64_t rank_of(double p, int64_t total)
{
    double lowered = nextafter(p, -INFINITY);
    double want = ceil((lowered > 0.0 ? lowered : 0.0) / 100.0 * (double)total);
    if (want >= (double)total)
        return total;
    return want < 1.0 ? 1 : (int64_t)want;
}

static int64_t value_for_rank(const struct hdr *h, double p, int32_t index)
{
    int64_t v = value_at_index(h, index);
    return p == 0.0 ? v : highest_equiv(h, v);
}

int64_t hdr_value_at_percentile(const struct hdr *h, double percentile)
{
    if (h->total_count == 0)
        return 0;
    double p = clamp_percentile(percentile);
    int64_t rank = rank_of(p, h->total_count);
    int64_t cumulative = 0;
    for (int32_t i = 0; i < h->counts_len; i++) {
        cumulative += h->counts[i];
        if (cumulative >= rank)
            return value_for_rank(h, p, i);
    }
    return 0;
}

int hdr_values_at_percentiles(const struct hdr *h, const double *percentiles, int64_t *values,
                              size_t n)
{
    for (size_t k = 1; k < n; k++) {
        if (clamp_percentile(percentiles[k]) < clamp_percentile(percentiles[k - 1]))
            return -EINVAL;
    }
    size_t k = 0;
    if (h->total_count > 0) {
        int64_t cumulative = 0;
        for (int32_t i = 0; i < h->counts_len && k < n; i++) {
            cumulative += h->counts[i];
            while (k < n) {
                double p = clamp_percentile(percentiles[k]);
                if (cumulative < rank_of(p, h->total_count))
                    break;
                values[k++] = value_for_rank(h, p, i);
            }
        }
    }
    for (; k < n; k++)
        values[k] = 0;
    return 0;
}

/* ---- Equivalence ----------------------------------------------------- */

static int64_t non_negative(int64_t v)
{
    return v < 0 ? 0 : v;
}

int64_t hdr_lowest_equivalent(const struct hdr *h, int64_t value)
{
    return lowest_equiv(h, non_negative(value));
}

int64_t hdr_highest_equivalent(const struct hdr *h, int64_t value)
{
    return highest_equiv(h, non_negative(value));
}

int64_t hdr_median_equivalent(const struct hdr *h, int64_t value)
{
    return median_equiv(h, non_negative(value));
}

int64_t hdr_next_non_equivalent(const struct hdr *h, int64_t value)
{
    int64_t top = highest_equiv(h, non_negative(value));
    return top == INT64_MAX ? INT64_MAX : top + 1;
}

int64_t hdr_equivalent_range(const struct hdr *h, int64_t value)
{
    return range_of(h, non_negative(value));
}

bool hdr_values_are_equivalent(const struct hdr *h, int64_t a, int64_t b)
{
    return hdr_lowest_equivalent(h, a) == hdr_lowest_equivalent(h, b);
}

/* ---- Iterators ------------------------------------------------------- */

static void iter_start(struct hdr_iter *it, const struct hdr *h, enum hdr_iter_kind kind)
{
    memset(it, 0, sizeof(*it));
    it->h_ = h;
    it->kind_ = kind;
    it->index_ = -1;
    it->total_ = h->total_count;
}

/* Steps to the next bucket; false at the end of the counts. */
static bool iter_move(struct hdr_iter *it)
{
    const struct hdr *h = it->h_;
    if (it->index_ + 1 >= h->counts_len)
        return false;
    it->index_++;
    it->count = h->counts[it->index_];
    it->cumulative_count += it->count;
    it->value = value_at_index(h, it->index_);
    it->highest_equivalent = highest_equiv(h, it->value);
    return true;
}

static void iter_report(struct hdr_iter *it, int64_t to)
{
    it->value_iterated_from = it->value_iterated_to;
    it->value_iterated_to = to;
}

void hdr_iter_recorded_init(struct hdr_iter *it, const struct hdr *h)
{
    iter_start(it, h, HDR_ITER_RECORDED);
}

int hdr_iter_percentile_init(struct hdr_iter *it, const struct hdr *h,
                             int32_t ticks_per_half_distance)
{
    if (ticks_per_half_distance < 1)
        return -EINVAL;
    iter_start(it, h, HDR_ITER_PERCENTILE);
    it->ticks_ = ticks_per_half_distance;
    return 0;
}

int hdr_iter_linear_init(struct hdr_iter *it, const struct hdr *h, int64_t value_units_per_step)
{
    if (value_units_per_step < 1)
        return -EINVAL;
    iter_start(it, h, HDR_ITER_LINEAR);
    it->step_ = value_units_per_step;
    it->level_ = value_units_per_step;
    it->level_low_ = lowest_equiv(h, value_units_per_step);
    return 0;
}

int hdr_iter_log_init(struct hdr_iter *it, const struct hdr *h, int64_t value_units_first_step,
                      double log_base)
{
    if (value_units_first_step < 1 || !(log_base > 1.0) || isinf(log_base))
        return -EINVAL;
    iter_start(it, h, HDR_ITER_LOG);
    it->log_base_ = log_base;
    it->level_ = value_units_first_step;
    it->level_low_ = lowest_equiv(h, value_units_first_step);
    return 0;
}

static bool recorded_next(struct hdr_iter *it)
{
    while (it->cumulative_count < it->total_ && iter_move(it)) {
        if (it->count != 0) {
            iter_report(it, it->value);
            it->count_added = it->count;
            return true;
        }
    }
    return false;
}

static bool percentile_next(struct hdr_iter *it)
{
    if (it->total_ == 0)
        return false;
    if (it->cumulative_count >= it->total_) {
        if (it->seen_last_)
            return false;
        it->seen_last_ = true;
        it->percentile = 100.0;
        return true;
    }
    if (it->index_ == -1 && !iter_move(it))
        return false;
    do {
        double current = 100.0 * (double)it->cumulative_count / (double)it->total_;
        if (it->count != 0 && it->percentile_to_ <= current) {
            iter_report(it, it->highest_equivalent);
            it->percentile = it->percentile_to_;
            /* Ticks double every time the distance to 100% halves. */
            double remaining = 100.0 - it->percentile_to_;
            int halvings = remaining > 0.0 ? (int)log2(100.0 / remaining) + 1 : 62;
            if (halvings > 62)
                halvings = 62;
            double ticks = (double)it->ticks_ * ldexp(1.0, halvings);
            it->percentile_to_ += 100.0 / ticks;
            return true;
        }
    } while (it->cumulative_count < it->total_ && iter_move(it));
    return false;
}

/* Moves the reporting level of a linear or log iterator one step up. */
static void level_advance(struct hdr_iter *it)
{
    int64_t next;
    if (it->kind_ == HDR_ITER_LINEAR) {
        if (__builtin_add_overflow(it->level_, it->step_, &next)) {
            it->seen_last_ = true; /* no int64 level beyond this one */
            return;
        }
    } else {
        double d = (double)it->level_ * it->log_base_;
        if (d >= 9.2e18) {
            it->seen_last_ = true;
            return;
        }
        next = (int64_t)d;
        if (next <= it->level_)
            next = it->level_ + 1; /* a base near 1 must still make progress */
    }
    it->level_ = next;
    it->level_low_ = lowest_equiv(it->h_, next);
}

static bool stepped_next(struct hdr_iter *it)
{
    it->count_added = 0;
    if (it->seen_last_)
        return false;
    bool more_counts = it->cumulative_count < it->total_;
    if (!more_counts && value_at_index(it->h_, it->index_ + 1) <= it->level_low_)
        return false;
    for (;;) {
        if (it->value >= it->level_low_) {
            iter_report(it, it->level_);
            level_advance(it);
            return true;
        }
        if (!iter_move(it)) {
            /* The level lies beyond the counts: report what was gathered, once. */
            iter_report(it, it->level_);
            it->seen_last_ = true;
            return true;
        }
        it->count_added += it->count;
    }
}

bool hdr_iter_next(struct hdr_iter *it)
{
    switch (it->kind_) {
    case HDR_ITER_RECORDED:
        return recorded_next(it);
    case HDR_ITER_PERCENTILE:
        return percentile_next(it);
    case HDR_ITER_LINEAR:
    case HDR_ITER_LOG:
        return stepped_next(it);
    }
    return false;
}

/* ---- V2 encoding ----------------------------------------------------- */

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) << 32 | get32(p + 4);
}

/* ZigZag LEB128 as HdrHistogram writes it: 7 bits per byte, a 9th byte of 8 bits. */
static size_t zigzag_put(uint8_t *p, int64_t v)
{
    uint64_t u = ((uint64_t)v << 1) ^ (v < 0 ? UINT64_MAX : 0);
    size_t n = 0;
    while (n < MAX_VARINT_LEN - 1) {
        if (u < 0x80) {
            p[n++] = (uint8_t)u;
            return n;
        }
        p[n++] = (uint8_t)((u & 0x7f) | 0x80);
        u >>= 7;
    }
    p[n++] = (uint8_t)u;
    return n;
}

/* Reads one varint at *pos of p[0..len); TS_PARSE if it runs past len. */
static int zigzag_get(const uint8_t *p, size_t len, size_t *pos, int64_t *out)
{
    uint64_t u = 0;
    for (int i = 0; i < MAX_VARINT_LEN; i++) {
        if (*pos >= len)
            return TS_PARSE;
        uint8_t b = p[(*pos)++];
        if (i == MAX_VARINT_LEN - 1) {
            u |= (uint64_t)b << 56;
            break;
        }
        u |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80))
            break;
    }
    *out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
    return 0;
}

static voidpf zlib_alloc(voidpf opaque, uInt items, uInt size)
{
    (void)opaque;
    return ts_calloc(items, size);
}

static void zlib_free(voidpf opaque, voidpf p)
{
    (void)opaque;
    ts_free(p);
}

static void zlib_stream_init(z_stream *zs)
{
    memset(zs, 0, sizeof(*zs));
    zs->zalloc = zlib_alloc;
    zs->zfree = zlib_free;
}

/* The uncompressed V2 form into a new buffer; 0 or -ENOMEM. */
static int encode_raw(const struct hdr *h, uint8_t **out, size_t *out_len)
{
    int32_t limit = index_of(h, h->max_value) + 1;
    uint8_t *raw = ts_malloc(ENCODING_HEADER_LEN + (size_t)MAX_VARINT_LEN * (size_t)limit);
    if (!raw)
        return -ENOMEM;
    size_t pos = ENCODING_HEADER_LEN;
    for (int32_t i = 0; i < limit;) {
        int64_t count = h->counts[i++];
        if (count == 0) {
            int64_t zeros = 1;
            while (i < limit && h->counts[i] == 0) {
                zeros++;
                i++;
            }
            pos += zigzag_put(raw + pos, -zeros);
        } else {
            pos += zigzag_put(raw + pos, count);
        }
    }
    double ratio = 1.0;
    uint64_t ratio_bits;
    memcpy(&ratio_bits, &ratio, sizeof(ratio_bits));
    put32(raw, V2_ENCODING_COOKIE | V2_WORD_SIZE_NIBBLE);
    put32(raw + 4, (uint32_t)(pos - ENCODING_HEADER_LEN));
    put32(raw + 8, 0); /* normalizing index offset */
    put32(raw + 12, (uint32_t)h->sigfigs);
    put64(raw + 16, (uint64_t)h->lowest);
    put64(raw + 24, (uint64_t)h->highest);
    put64(raw + 32, ratio_bits);
    *out = raw;
    *out_len = pos;
    return 0;
}

int hdr_encode(const struct hdr *h, uint8_t **out, size_t *out_len)
{
    uint8_t *raw, *blob = NULL;
    size_t raw_len;
    int rc = encode_raw(h, &raw, &raw_len);
    if (rc)
        return rc;

    z_stream zs;
    zlib_stream_init(&zs);
    if (deflateInit(&zs, Z_BEST_COMPRESSION) != Z_OK) {
        rc = -ENOMEM;
        goto out_free_raw;
    }
    uLong bound = deflateBound(&zs, (uLong)raw_len);
    blob = ts_malloc(COMPRESSION_HEADER_LEN + (size_t)bound);
    if (!blob) {
        rc = -ENOMEM;
        goto out_end;
    }
    zs.next_in = raw;
    zs.avail_in = (uInt)raw_len;
    zs.next_out = blob + COMPRESSION_HEADER_LEN;
    zs.avail_out = (uInt)bound;
    int zrc = deflate(&zs, Z_FINISH);
    if (zrc != Z_STREAM_END) {
        /* deflateBound() guarantees one call; only memory can fail here. */
        rc = -ENOMEM;
        ts_free(blob);
        blob = NULL;
        goto out_end;
    }
    put32(blob, V2_COMPRESSION_COOKIE | V2_WORD_SIZE_NIBBLE);
    put32(blob + 4, (uint32_t)zs.total_out);
    *out = blob;
    *out_len = COMPRESSION_HEADER_LEN + (size_t)zs.total_out;
out_end:
    deflateEnd(&zs);
out_free_raw:
    ts_free(raw);
    return rc;
}

/* Inflates until out is full or the stream ends; *ended tells which. */
static int inflate_into(z_stream *zs, uint8_t *out, size_t len, bool *ended)
{
    zs->next_out = out;
    zs->avail_out = (uInt)len;
    *ended = false;
    while (zs->avail_out > 0) {
        int zrc = inflate(zs, Z_NO_FLUSH);
        if (zrc == Z_STREAM_END) {
            *ended = true;
            return 0;
        }
        if (zrc == Z_MEM_ERROR)
            return -ENOMEM;
        if (zrc != Z_OK)
            return TS_PARSE; /* corrupt, truncated, or asks for a dictionary */
    }
    return 0;
}

/* Fills h->counts from the varint payload; every bound is checked. */
static int decode_counts(struct hdr *h, const uint8_t *p, size_t len)
{
    size_t pos = 0;
    int64_t idx = 0, total = 0;
    int32_t first = -1, last = -1;
    while (pos < len) {
        int64_t v;
        if (zigzag_get(p, len, &pos, &v))
            return TS_PARSE;
        if (v < 0) {
            if (v == INT64_MIN || -v > h->counts_len - idx)
                return TS_PARSE;
            idx += -v;
            continue;
        }
        if (idx >= h->counts_len)
            return TS_PARSE;
        if (v > 0) {
            if (__builtin_add_overflow(total, v, &total))
                return TS_PARSE;
            h->counts[idx] = v;
            if (first < 0 && idx != 0)
                first = (int32_t)idx;
            last = (int32_t)idx;
        }
        idx++;
    }
    h->total_count = total;
    h->min_value = first >= 0 ? value_at_index(h, first) : INT64_MAX;
    h->max_value = last >= 0 ? highest_equiv(h, value_at_index(h, last)) : 0;
    return 0;
}

int hdr_decode(const uint8_t *data, size_t len, struct hdr **out)
{
    if (len < COMPRESSION_HEADER_LEN ||
        (get32(data) & ~COOKIE_WORD_SIZE_BITS) != V2_COMPRESSION_COOKIE ||
        get32(data + 4) > INT32_MAX || get32(data + 4) != len - COMPRESSION_HEADER_LEN)
        return TS_PARSE;

    int rc;
    bool ended;
    uint8_t head[ENCODING_HEADER_LEN];
    uint8_t *payload = NULL;
    struct hdr *h = NULL;
    z_stream zs;
    zlib_stream_init(&zs);
    if (inflateInit(&zs) != Z_OK)
        return -ENOMEM;
    zs.next_in = (Bytef *)(uintptr_t)(data + COMPRESSION_HEADER_LEN);
    zs.avail_in = (uInt)(len - COMPRESSION_HEADER_LEN);

    rc = inflate_into(&zs, head, sizeof(head), &ended);
    if (rc)
        goto out;
    rc = TS_PARSE;
    if (zs.avail_out != 0 || (get32(head) & ~COOKIE_WORD_SIZE_BITS) != V2_ENCODING_COOKIE)
        goto out;
    uint32_t payload_len = get32(head + 4);
    int32_t sigfigs = (int32_t)get32(head + 12);
    int64_t lowest = (int64_t)get64(head + 16);
    int64_t highest = (int64_t)get64(head + 24);
    struct hdr layout;
    if (payload_len > INT32_MAX || hdr_layout(&layout, lowest, highest, sigfigs))
        goto out;
    if (layout.counts_len > HDR_DECODE_MAX_COUNTS) {
        rc = TS_TOOBIG;
        goto out;
    }
    if (payload_len > (uint64_t)MAX_VARINT_LEN * (uint64_t)layout.counts_len ||
        (ended && payload_len != 0))
        goto out;

    /* One spare byte so that a stream longer than payload_len is caught. */
    payload = ts_malloc((size_t)payload_len + 1);
    if (!payload) {
        rc = -ENOMEM;
        goto out;
    }
    if (!ended) {
        rc = inflate_into(&zs, payload, (size_t)payload_len + 1, &ended);
        if (rc)
            goto out;
        rc = TS_PARSE;
        if (!ended || zs.avail_out != 1 || zs.avail_in != 0)
            goto out;
    } else if (zs.avail_in != 0) {
        goto out;
    }

    rc = hdr_new(lowest, highest, sigfigs, &h);
    if (rc)
        goto out;
    rc = decode_counts(h, payload, payload_len);
    if (rc)
        goto out;
    *out = h;
    h = NULL;
out:
    hdr_free(h);
    ts_free(payload);
    inflateEnd(&zs);
    return rc;
}

/* ---- Base64 (strict, as HdrHistogram writes it) ---- */

int hdr_encode_base64(const struct hdr *h, char **out, size_t *out_len)
{
    uint8_t *blob;
    size_t n;
    int rc = hdr_encode(h, &blob, &n);
    if (rc)
        return rc;
    char *text = ts_malloc(base64_len(n) + 1);
    if (!text) {
        ts_free(blob);
        return -ENOMEM;
    }
    size_t text_len = base64_encode(blob, n, text);
    ts_free(blob);
    *out = text;
    if (out_len)
        *out_len = text_len;
    return 0;
}

int hdr_decode_base64(const char *text, size_t len, struct hdr **out)
{
    uint8_t *blob = ts_malloc(len / 4 * 3 + 2);
    if (!blob)
        return -ENOMEM;
    long n = base64_decode(text, len, blob, BASE64_STRICT);
    int rc = n < 0 ? TS_PARSE : hdr_decode(blob, (size_t)n, out);
    ts_free(blob);
    return rc;
}
