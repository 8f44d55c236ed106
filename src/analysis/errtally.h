/*
 * errtally.h - why requests failed, counted by distinct message.
 *
 * A struct errtally counts failed requests by (outcome, HTTP status, error
 * text of req_record). It keeps at most ERRTALLY_SLOTS distinct keys, in the
 * order they were first seen; a request whose key finds no free slot is
 * counted in `other`. So the kept counts are exact, and kept + other is every
 * request added. Plain data: it embeds in struct run_stats, is reset by
 * memset, and adds or merges without allocating (a linear search of at most
 * ERRTALLY_SLOTS keys, only for failed requests).
 *
 * Merging is exact while the union of keys fits; past that the keys of src
 * that find no slot go to dst's `other`.
 */
#ifndef TS_ANALYSIS_ERRTALLY_H
#define TS_ANALYSIS_ERRTALLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/err.h"
#include "analysis/record.h"

#define ERRTALLY_SLOTS 20

struct errtally_entry {
    uint64_t count;
    enum req_outcome outcome;
    int status;              /* HTTP status, 0 if none */
    char msg[REQ_ERROR_MAX]; /* the record's error text ("" if it had none) */
};

struct errtally {
    size_t n;       /* slots in use */
    uint64_t other; /* requests whose key found no free slot */
    struct errtally_entry e[ERRTALLY_SLOTS];
};

/* Counts n requests of outcome o, status and msg (NULL = ""; cut to fit). */
void errtally_add(struct errtally *t, enum req_outcome o, int status, const char *msg, uint64_t n);
/* Adds every count of src to dst. */
void errtally_merge(struct errtally *dst, const struct errtally *src);
/* True when a and b hold the same keys with the same counts, in any order. */
bool errtally_equal(const struct errtally *a, const struct errtally *b);
/* Every request counted: kept entries and other. */
uint64_t errtally_total(const struct errtally *t);
/*
 * Fills idx[0..] with the indexes of t->e in order of count, largest first
 * (ties: first seen first), at most max of them. Returns how many.
 */
size_t errtally_top(const struct errtally *t, size_t *idx, size_t max);

/*
 * The result.json section (docs/METRICS.md, "errors"): {"distinct_kept",
 * "other", "top": [{"count", "outcome", "status" (null if none), "message"}]}
 * with every kept entry, by count. Returns a new reference or NULL (out of
 * memory).
 */
json_t *errtally_to_json(const struct errtally *t);
/*
 * Adds the counts of such a section to t (so results of several processes
 * merge). v NULL (an older result) adds nothing. Returns 0, or TS_PARSE with
 * "errors...: what" in err when v is malformed.
 */
TS_MUST_CHECK int errtally_add_json(struct errtally *t, const json_t *v, char *err, size_t errlen);

#endif
