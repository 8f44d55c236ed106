/*
 * chain.h - what a proxy in the path sees of the chain around it: the
 * attempts that serve one client request linked together (retry
 * amplification), and the work that still arrives from upstream after the
 * client left (orphaned work). docs/CHAOS.md "Retry amplification" and
 * "Orphaned work" are the user's manual.
 *
 * Linking. Each request gets a key: the value of the request's
 * idempotency header (cfg.key_header, "Idempotency-Key" by default) when it
 * has one, else a hash of its method, path and body (what a client sends
 * again, unchanged, when it retries; headers that differ per attempt, such
 * as the openai SDK's x-stainless-retry-count, are left out). A request is
 * a retry of an earlier one with the same key seen within the window
 * (window_ns from that earlier attempt's end):
 *   - with an idempotency key, always (the client says it is the same
 *     request), also while the earlier attempt is still in flight;
 *   - by body hash, only when the earlier attempt has ended and did not
 *     succeed (a status outside 200..399, a cut, a client that closed), so
 *     that a load tool sending the same prompt twice, or a client sending
 *     it again after an answer, counts as two requests.
 * Else it is a new distinct request. The trigger of a retry is how the
 * attempt before it ended for the client: its HTTP status, "cut" (the
 * response was cut), "client_closed" (the client went away first) or
 * "in_flight" (idempotency keys only: it had not ended).
 *
 * Amplification = attempts / distinct requests; per trigger T it is
 * 1 + retries after T / distinct requests, so that the overall factor is
 * 1 + the sum of (factor_T - 1) over the triggers.
 *
 * Limits: CHAIN_TABLE recent keys are remembered (a full neighbourhood
 * forgets its oldest entry: a retry of it then counts as a new request);
 * two different requests whose hashes collide (64 bits) are one.
 * The time series keeps CHAIN_BUCKETS buckets of CHAIN_BUCKET_NS (one
 * hour) of monotonic time (CLOCK_MONOTONIC: comparable between processes
 * of one machine), CHAIN_TRIGGERS distinct triggers per bucket (more go to
 * "other").
 *
 * Thread safety: every function but chain_key takes c->mu; the proxy's
 * worker threads share one struct chain.
 */
#ifndef TS_CHAOS_CHAIN_H
#define TS_CHAOS_CHAIN_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/err.h"
#include "telemetry/prom.h"

#define CHAIN_TABLE     (1u << 16)
#define CHAIN_PROBE     32
#define CHAIN_BUCKET_NS (250ull * 1000 * 1000)
#define CHAIN_BUCKETS   14400
#define CHAIN_TRIGGERS  6
#define CHAIN_WINDOW_NS (60ull * 1000 * 1000 * 1000) /* default window */
#define CHAIN_KEY_HDR   "idempotency-key"

/* How an attempt ended, as a trigger code: an HTTP status (100..599) or one
 * of these. */
enum chain_code {
    CHAIN_CUT = 0,           /* the response was cut (proxy, fault or upstream) */
    CHAIN_CLIENT_CLOSED = 1, /* the client closed before the answer ended */
    CHAIN_IN_FLIGHT = 2,     /* not ended (idempotency keys only) */
    CHAIN_OTHER = 3,         /* a series bucket's overflow */
    CHAIN_CODES = 600,       /* codes are 0..599 */
};

struct chain_entry {
    uint64_t key;            /* 0: empty */
    uint64_t last_ns;        /* when the last attempt came, or ended */
    uint64_t retry_after_ns; /* the last attempt's Retry-After, 0: none */
    int16_t outcome;         /* an enum chain_code, or -1: in flight */
    bool explicit_key;
};

struct chain_trig {
    int16_t code;
    uint32_t n;
};

/* What one CHAIN_BUCKET_NS of time saw (attempts by arrival, orphans by when the client left). */
struct chain_bucket {
    uint64_t slot; /* monotonic ns / CHAIN_BUCKET_NS + 1; 0: empty */
    uint32_t attempts, distinct;
    struct chain_trig trig[CHAIN_TRIGGERS]; /* retries by trigger */
    uint32_t orphans;
    uint64_t orphan_bytes, orphan_tokens, orphan_ns;
};

struct chain {
    pthread_mutex_t mu;
    uint64_t window_ns;
    struct chain_entry *table;    /* CHAIN_TABLE */
    struct chain_bucket *buckets; /* CHAIN_BUCKETS */
    /* totals since the start (or chain_reset) */
    uint64_t attempts, distinct, early;
    uint64_t retries[CHAIN_CODES];
    struct prom_hist gap; /* seconds from an attempt's end to its retry */
    uint64_t orphans, orphan_bytes, orphan_tokens, orphan_ns;
    struct prom_hist orphan_s; /* seconds of upstream work after the client left */
};

/* window_ns 0: CHAIN_WINDOW_NS. Returns 0 or -ENOMEM (then nothing to release). */
TS_MUST_CHECK int chain_init(struct chain *c, uint64_t window_ns);
void chain_release(struct chain *c);
/* Forgets every key and zeroes the counters and the series. */
void chain_reset(struct chain *c);

/*
 * The key of a request: of idem (its idempotency header's value) when not
 * NULL (*explicit_key true), else of method, path and body. Never 0.
 */
uint64_t chain_key(const char *method, const char *path, const char *body, size_t len,
                   const char *idem, bool *explicit_key);

/*
 * A new attempt with key at now (monotonic ns). Returns true for a retry
 * (counted by its trigger; its gap from the previous attempt's end
 * observed, and counted early when it came before the Retry-After that
 * attempt was given), false for a new distinct request.
 */
bool chain_attempt(struct chain *c, uint64_t key, bool explicit_key, uint64_t now);

/* The attempt with key ended for the client with code (enum chain_code or
 * status) at now; retry_after_ns: the Retry-After it was told (0: none). */
void chain_outcome(struct chain *c, uint64_t key, int code, uint64_t retry_after_ns, uint64_t now);

/* One request's orphaned work: bytes and tokens that came from upstream
 * after the client left at left_at (monotonic ns), over ns. The series
 * counts it in the bucket of left_at (when the cascade happened), though it
 * is known only at its end. */
void chain_orphan(struct chain *c, uint64_t bytes, uint64_t tokens, uint64_t ns, uint64_t left_at);

/* The trigger's label: "429", "cut", "client_closed", "in_flight", "other". In buf. */
const char *chain_code_name(int code, char *buf, size_t n);

/* Appends the Prometheus text of the totals. 0 or a buf error. */
TS_MUST_CHECK int chain_metrics(struct chain *c, struct buf *out);

/*
 * The totals and the non-empty buckets that start at or after since_ns, as
 * JSON (docs/CHAOS.md "GET /chain"). NULL when out of memory.
 */
json_t *chain_json(struct chain *c, uint64_t since_ns);

#endif
