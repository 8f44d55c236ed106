/*
 * faultset.h - the set of active faults of one proxy: add, replace, remove,
 * list, reset; and, per request, which faults apply (match selectors, the
 * start/duration window, the probability roll).
 *
 * Probabilities are rolled with one seeded generator (src/base/rng.h) owned
 * by the set: for each request, the faults that match and are in their
 * window are visited in the order they were added, and each fault with
 * 0 < probability < 1 consumes one draw (probability 1 and 0 consume none).
 * So for a given --seed, the same sequence of requests against the same
 * faults gives the same injections. HTTP, SSE, LLM and RAG faults are rolled
 * per request; TCP faults per connection (faultset_roll with r == NULL, when
 * the connection is accepted): their HTTP selectors cannot be evaluated then
 * and are ignored.
 *
 * The set itself is not locked: the proxy's loop threads and its control
 * API share it under the proxy's faults_mu (struct proxy). Faults are heap
 * objects with an atomic reference count: a fault removed or replaced while
 * a response holds it (from faultset_roll) lives until that response drops
 * it, on whichever thread.
 */
#ifndef TS_CHAOS_FAULTSET_H
#define TS_CHAOS_FAULTSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/rng.h"
#include "chaos/fault.h"
#include "net/http_server.h"

#define FAULTSET_MAX  256 /* faults in one set */
#define FAULTSET_HITS 16  /* faults applied to one request at most */

struct faultset {
    struct fault **v; /* in insertion order */
    size_t n, cap;
    struct rng rng;
    uint64_t generation; /* bumped by every change */
};

/* The request as the matcher sees it. model is the "model" member of the
 * JSON body or NULL (see faultset_wants_model). */
struct fault_request {
    const char *method;
    const char *path; /* without the query */
    const struct http_header *headers;
    size_t n_headers;
    const char *model;
};

void faultset_init(struct faultset *fs, uint64_t seed);
/* Drops the set's references (faults held by responses live on). */
void faultset_release(struct faultset *fs);

/*
 * Adds a copy of spec (counters zeroed, added_ns = now_ns). Returns 0,
 * -EEXIST (a fault of that name exists), TS_TOOBIG (FAULTSET_MAX reached)
 * or -ENOMEM.
 */
TS_MUST_CHECK int faultset_add(struct faultset *fs, const struct fault *spec, uint64_t now_ns);

/*
 * Replaces the fault named spec->name by a copy of spec, keeping its place
 * and its counters; its window restarts at now_ns. Returns 0, -ENOENT or
 * -ENOMEM.
 */
TS_MUST_CHECK int faultset_replace(struct faultset *fs, const struct fault *spec, uint64_t now_ns);

/* Removes the fault called name. Returns 0 or -ENOENT. */
TS_MUST_CHECK int faultset_remove(struct faultset *fs, const char *name);

/* Removes every fault. */
void faultset_reset(struct faultset *fs);

/* The fault called name (owned by the set), or NULL. */
struct fault *faultset_get(const struct faultset *fs, const char *name);

/* Whether any fault has a model selector (then the caller extracts the
 * model from request bodies; otherwise it need not parse them). */
bool faultset_wants_model(const struct faultset *fs);

/* Whether f's selectors accept r (r == NULL: selectors are ignored). */
bool fault_matches(const struct fault *f, const struct fault_request *r);

/*
 * The faults for one request (r) or one connection (r == NULL), restricted
 * to the families in the bit mask `families` (1u << FAULT_TCP, ...): those
 * in their window at now_ns that match, each counted as matched, and then
 * kept if their probability roll succeeds. Writes at most max references
 * into out (the caller owns them: fault_unref each) and returns how many.
 */
size_t faultset_roll(struct faultset *fs, const struct fault_request *r, unsigned families,
                     uint64_t now_ns, struct fault **out, size_t max);

#endif
