/*
 * hlog.h - HdrHistogram interval logs (.hlog), format version 1.3, the files
 * that HistogramLogProcessor, HdrHistogramVisualizer and jHiccup read.
 *
 *   #[Histogram log format version 1.3]
 *   #[StartTime: 1441753532.570 (seconds since epoch), Tue Sep 08 23:05:32 UTC 2015]
 *   #[BaseTime: 1441753532.570 (seconds since epoch)]            (optional)
 *   "StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"
 *   Tag=ttft,0.127,1.007,2.769,HISTFAAAAEV42pNp...
 *
 * Each interval line has an optional "Tag=<tag>," prefix, the interval start
 * in seconds (relative to BaseTime when the log has one; tools also accept
 * absolute epoch seconds), its length in seconds, the interval's max value
 * divided by the log's "max value unit ratio", and the histogram in the V2
 * compressed encoding, base64 (hdr.h). Other "#" lines are comments.
 *
 * Units: tokenstorm records latencies in microseconds (hdr.h), and writes
 * Interval_Max in milliseconds, i.e. max / HLOG_RATIO_US_TO_MS, the same unit
 * the standard tools show for jHiccup's nanosecond logs with their default
 * ratio of 1e6. The histograms themselves keep their integer values; a reader
 * of our logs must use a ratio of 1000 (HistogramLogProcessor -outputValueUnitRatio
 * 1000) to see milliseconds.
 *
 * Numbers are written and parsed with the C locale's '.' decimal point; the
 * process must not have changed LC_NUMERIC.
 */
#ifndef TS_BASE_HLOG_H
#define TS_BASE_HLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "buf.h"
#include "err.h"
#include "hdr.h"

#define HLOG_FORMAT_VERSION "1.3"
/* Interval_Max = max / ratio: microseconds to milliseconds. */
#define HLOG_RATIO_US_TO_MS 1000.0
/* Tags: 1..HLOG_TAG_MAX printable ASCII bytes, no ',' and no space. */
#define HLOG_TAG_MAX 64
/* Default cap on one line of a log being read. */
#define HLOG_LINE_MAX_DEFAULT (1u << 20)

/* True if tag can be written: see HLOG_TAG_MAX. */
bool hlog_tag_valid(const char *tag);

struct hlog_writer {
    FILE *f;               /* borrowed: the caller opens, flushes and closes it */
    double max_unit_ratio; /* Interval_Max = hdr_max() / max_unit_ratio */
};

/* max_unit_ratio <= 0 (or not finite) means HLOG_RATIO_US_TO_MS. */
void hlog_writer_init(struct hlog_writer *w, FILE *f, double max_unit_ratio);

/*
 * Writes the header: "#[comment]" if comment is not NULL, the version line,
 * the StartTime line if start_time >= 0 (seconds since the epoch), the
 * BaseTime line if base_time >= 0, and the legend line. Returns 0, -EINVAL
 * (comment with a line break or ']', a time that is not finite or beyond year
 * 9999), or -EIO.
 */
TS_MUST_CHECK int hlog_write_header(struct hlog_writer *w, const char *comment, double start_time,
                                    double base_time);

/*
 * Writes one interval line. tag may be NULL or "" for none. start and length
 * are seconds (>= 0, finite), written with millisecond precision. Returns 0,
 * -EINVAL (bad tag or times), -ENOMEM, or -EIO.
 */
TS_MUST_CHECK int hlog_write_interval(struct hlog_writer *w, const char *tag, double start,
                                      double length, const struct hdr *h);

struct hlog_entry {
    char tag[HLOG_TAG_MAX + 1]; /* "" when the line has no tag */
    double start;               /* Interval start, seconds, as written */
    double length;              /* Interval length, seconds */
    double max;                 /* Interval_Max column, as written */
    struct hdr *hist;           /* owned by the caller after a read: hdr_free() it */
};

struct hlog_reader {
    FILE *f;      /* borrowed */
    long line_no; /* of the last line read, 1-based */
    /* Header facts, filled in as their lines are met. */
    int major, minor; /* format version; 0.0 until a version line is read */
    bool has_start_time, has_base_time;
    double start_time, base_time; /* seconds since the epoch */
    /* After an error: a message with the line number, e.g. "line 7: bad histogram". */
    char err[192];
    /* Private. */
    int failed_;
    struct buf line_;
};

/* max_line caps one line in bytes; 0 means HLOG_LINE_MAX_DEFAULT. */
void hlog_reader_init(struct hlog_reader *r, FILE *f, size_t max_line);
void hlog_reader_release(struct hlog_reader *r);

/*
 * Reads up to the next interval line, taking in header and comment lines on
 * the way. Returns 1 with *e filled (e->hist is new; the caller frees it),
 * 0 at the end of the file, or a negative code with r->err set and e->hist
 * NULL: TS_PARSE (malformed line, bad histogram, unsupported version: only
 * major version 1, minor 0..3, is read), TS_TOOBIG (a line longer than the
 * cap, or a histogram layout hdr_decode() refuses), -ENOMEM, or -EIO. Errors
 * are final: later calls return the same code.
 */
TS_MUST_CHECK int hlog_reader_next(struct hlog_reader *r, struct hlog_entry *e);

#endif
