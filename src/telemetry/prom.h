/*
 * prom.h - the Prometheus text exposition format (version 0.0.4).
 *
 * Used by every /metrics endpoint of tokenstorm (simulator, proxy, load run).
 * Writers append to a caller's struct buf. Metric and label names are the
 * caller's constants; label VALUES are escaped here (backslash, quote,
 * newline), so a value from outside cannot break the format.
 *
 * struct prom_hist is a fixed-bucket histogram (Prometheus buckets are
 * cumulative upper bounds; +Inf is implied). It is single-writer: observe from
 * one thread, or under the owner's lock.
 */
#ifndef TS_TELEMETRY_PROM_H
#define TS_TELEMETRY_PROM_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define PROM_MAX_BUCKETS  32

struct prom_hist {
    const double *bounds;                  /* ascending upper bounds, not owned */
    size_t nbounds;                        /* <= PROM_MAX_BUCKETS */
    uint64_t counts[PROM_MAX_BUCKETS + 1]; /* per bucket, last = above all bounds */
    double sum;
    uint64_t count;
};

/* bounds must outlive h; nbounds is clamped to PROM_MAX_BUCKETS. */
void prom_hist_init(struct prom_hist *h, const double *bounds, size_t nbounds);
void prom_hist_observe(struct prom_hist *h, double v);

/* "# HELP name help\n# TYPE name type\n". 0 or a buf error. */
TS_MUST_CHECK int prom_header(struct buf *out, const char *name, const char *help,
                              const char *type);
/*
 * One sample line: name{labels} value. `labels` is NULL or an array of
 * 2*nlabels strings (name, value, name, value, ...).
 */
TS_MUST_CHECK int prom_sample(struct buf *out, const char *name, const char *const *labels,
                              size_t nlabels, double value);
/* A metric of one unlabelled sample: its header, then "name value". */
TS_MUST_CHECK int prom_metric(struct buf *out, const char *name, const char *help, const char *type,
                              double value);
/* The _bucket/_sum/_count lines of a histogram (without the header). */
TS_MUST_CHECK int prom_histogram(struct buf *out, const char *name, const char *const *labels,
                                 size_t nlabels, const struct prom_hist *h);

#endif
