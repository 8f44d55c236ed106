/*
 * chain.c - retries linked to the requests they serve, and orphaned work
 * (chain.h). One mutex guards everything: each request takes it twice
 * (arrival, end), for a few probes of an open-addressed table.
 */
#include "chaos/chain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/rng.h"

static const double gap_bounds[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64};
static const double orphan_bounds[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300};

int chain_init(struct chain *c, uint64_t window_ns)
{
    memset(c, 0, sizeof *c);
    c->window_ns = window_ns ? window_ns : CHAIN_WINDOW_NS;
    c->table = ts_calloc(CHAIN_TABLE, sizeof *c->table);
    c->buckets = ts_calloc(CHAIN_BUCKETS, sizeof *c->buckets);
    if (!c->table || !c->buckets) {
        ts_free(c->table);
        ts_free(c->buckets);
        return -ENOMEM;
    }
    prom_hist_init(&c->gap, gap_bounds, sizeof gap_bounds / sizeof *gap_bounds);
    prom_hist_init(&c->orphan_s, orphan_bounds, sizeof orphan_bounds / sizeof *orphan_bounds);
    pthread_mutex_init(&c->mu, NULL);
    return 0;
}

void chain_release(struct chain *c)
{
    if (!c->table)
        return;
    pthread_mutex_destroy(&c->mu);
    ts_free(c->table);
    ts_free(c->buckets);
    c->table = NULL;
    c->buckets = NULL;
}

void chain_reset(struct chain *c)
{
    pthread_mutex_lock(&c->mu);
    memset(c->table, 0, CHAIN_TABLE * sizeof *c->table);
    memset(c->buckets, 0, CHAIN_BUCKETS * sizeof *c->buckets);
    c->attempts = c->distinct = c->early = 0;
    memset(c->retries, 0, sizeof c->retries);
    c->orphans = c->orphan_bytes = c->orphan_tokens = c->orphan_ns = 0;
    prom_hist_init(&c->gap, gap_bounds, sizeof gap_bounds / sizeof *gap_bounds);
    prom_hist_init(&c->orphan_s, orphan_bounds, sizeof orphan_bounds / sizeof *orphan_bounds);
    pthread_mutex_unlock(&c->mu);
}

/* FNV-1a over n bytes, continuing from h. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t chain_key(const char *method, const char *path, const char *body, size_t len,
                   const char *idem, bool *explicit_key)
{
    uint64_t h = 0xcbf29ce484222325ull;
    *explicit_key = idem != NULL;
    if (idem) {
        h = fnv(h, "K", 1);
        h = fnv(h, idem, strlen(idem));
    } else {
        h = fnv(h, method, strlen(method) + 1);
        h = fnv(h, path, strlen(path) + 1);
        if (len)
            h = fnv(h, body, len);
    }
    h = rng_mix64(h);
    return h ? h : 1;
}

/* Whether e is free for reuse at now (empty, or idle past the window). */
static bool entry_stale(const struct chain *c, const struct chain_entry *e, uint64_t now)
{
    return !e->key || (e->outcome >= 0 && now > e->last_ns + c->window_ns) ||
           now > e->last_ns + 4 * c->window_ns; /* an attempt that never ended */
}

/* The entry of key (found: *found), else the slot to put it in (a stale
 * one, or the oldest of the neighbourhood). Never NULL. */
static struct chain_entry *entry_find(struct chain *c, uint64_t key, uint64_t now, bool *found)
{
    size_t i0 = (size_t)(key & (CHAIN_TABLE - 1));
    struct chain_entry *spare = NULL, *oldest = NULL;
    for (size_t k = 0; k < CHAIN_PROBE; k++) {
        struct chain_entry *e = &c->table[(i0 + k) & (CHAIN_TABLE - 1)];
        if (e->key == key) {
            *found = !entry_stale(c, e, now);
            return e;
        }
        if (!spare && entry_stale(c, e, now))
            spare = e;
        if (!oldest || e->last_ns < oldest->last_ns)
            oldest = e;
    }
    *found = false;
    return spare ? spare : oldest;
}

/* The series bucket of now (emptied when it held an older slot). */
static struct chain_bucket *bucket_at(struct chain *c, uint64_t now)
{
    uint64_t slot = now / CHAIN_BUCKET_NS + 1;
    struct chain_bucket *b = &c->buckets[slot % CHAIN_BUCKETS];
    if (b->slot != slot) {
        memset(b, 0, sizeof *b);
        b->slot = slot;
    }
    return b;
}

static void bucket_trigger(struct chain_bucket *b, int code)
{
    for (size_t i = 0; i < CHAIN_TRIGGERS; i++) {
        if (b->trig[i].n && b->trig[i].code == code) {
            b->trig[i].n++;
            return;
        }
        if (!b->trig[i].n) {
            b->trig[i].code = (int16_t)code;
            b->trig[i].n = 1;
            return;
        }
    }
    /* full: the last slot becomes "other" */
    b->trig[CHAIN_TRIGGERS - 1].code = CHAIN_OTHER;
    b->trig[CHAIN_TRIGGERS - 1].n++;
}

/* Whether an attempt that ended with code succeeded (no retry expected). */
static bool code_ok(int code)
{
    return code >= 200 && code < 400;
}

bool chain_attempt(struct chain *c, uint64_t key, bool explicit_key, uint64_t now)
{
    bool found;
    pthread_mutex_lock(&c->mu);
    struct chain_entry *e = entry_find(c, key, now, &found);
    struct chain_bucket *b = bucket_at(c, now);
    c->attempts++;
    b->attempts++;
    bool retry = found && (explicit_key || (e->outcome >= 0 && !code_ok(e->outcome)));
    if (retry) {
        int trig = e->outcome < 0 ? CHAIN_IN_FLIGHT : e->outcome;
        c->retries[trig]++;
        bucket_trigger(b, trig);
        if (e->outcome >= 0) {
            uint64_t gap = now > e->last_ns ? now - e->last_ns : 0;
            prom_hist_observe(&c->gap, (double)gap / 1e9);
            if (e->retry_after_ns && gap < e->retry_after_ns)
                c->early++;
        }
    } else {
        c->distinct++;
        b->distinct++;
        e->key = key;
        e->explicit_key = explicit_key;
    }
    e->outcome = -1;
    e->last_ns = now;
    e->retry_after_ns = 0;
    pthread_mutex_unlock(&c->mu);
    return retry;
}

void chain_outcome(struct chain *c, uint64_t key, int code, uint64_t retry_after_ns, uint64_t now)
{
    bool found;
    if (code < 0 || code >= CHAIN_CODES)
        code = CHAIN_CUT;
    pthread_mutex_lock(&c->mu);
    struct chain_entry *e = entry_find(c, key, now, &found);
    if (found) {
        e->outcome = (int16_t)code;
        e->last_ns = now;
        e->retry_after_ns = retry_after_ns;
    }
    pthread_mutex_unlock(&c->mu);
}

void chain_orphan(struct chain *c, uint64_t bytes, uint64_t tokens, uint64_t ns, uint64_t left_at)
{
    pthread_mutex_lock(&c->mu);
    struct chain_bucket *b = bucket_at(c, left_at);
    c->orphans++;
    c->orphan_bytes += bytes;
    c->orphan_tokens += tokens;
    c->orphan_ns += ns;
    prom_hist_observe(&c->orphan_s, (double)ns / 1e9);
    b->orphans++;
    b->orphan_bytes += bytes;
    b->orphan_tokens += tokens;
    b->orphan_ns += ns;
    pthread_mutex_unlock(&c->mu);
}

const char *chain_code_name(int code, char *buf, size_t n)
{
    static const char *const names[] = {"cut", "client_closed", "in_flight", "other"};
    if (code >= 0 && code <= CHAIN_OTHER)
        snprintf(buf, n, "%s", names[code]);
    else
        snprintf(buf, n, "%d", code);
    return buf;
}

/* The amplification lines of chain_metrics (c->mu held). */
static int metrics_amp(struct chain *c, struct buf *out)
{
    double d = c->distinct ? (double)c->distinct : 1;
    int rc = prom_metric(out, "tokenstorm_proxy_attempts_total",
                         "Requests forwarded or answered: every attempt, retries included.",
                         "counter", (double)c->attempts);
    if (!rc)
        rc = prom_metric(out, "tokenstorm_proxy_distinct_requests_total",
                         "Distinct client requests (attempts linked by idempotency key or body "
                         "hash within the retry window count once).",
                         "counter", (double)c->distinct);
    if (!rc)
        rc = prom_header(out, "tokenstorm_proxy_retries_total",
                         "Retries, by how the attempt before ended (status, cut, client_closed, "
                         "in_flight).",
                         "counter");
    for (int k = 0; k < CHAIN_CODES && !rc; k++) {
        char name[16];
        const char *labels[] = {"trigger", chain_code_name(k, name, sizeof name)};
        if (c->retries[k])
            rc = prom_sample(out, "tokenstorm_proxy_retries_total", labels, 1,
                             (double)c->retries[k]);
    }
    if (!rc)
        rc = prom_metric(out, "tokenstorm_proxy_retry_amplification",
                         "Attempts per distinct request (1 without retries); with trigger: 1 + "
                         "retries after that trigger per distinct request.",
                         "gauge", c->distinct ? (double)c->attempts / d : 1.0);
    for (int k = 0; k < CHAIN_CODES && !rc; k++) {
        char name[16];
        const char *labels[] = {"trigger", chain_code_name(k, name, sizeof name)};
        if (c->retries[k])
            rc = prom_sample(out, "tokenstorm_proxy_retry_amplification", labels, 1,
                             1.0 + (double)c->retries[k] / d);
    }
    if (!rc)
        rc = prom_metric(out, "tokenstorm_proxy_retries_early_total",
                         "Retries that came sooner than the Retry-After the attempt before was "
                         "given.",
                         "counter", (double)c->early);
    if (!rc)
        rc = prom_header(out, "tokenstorm_proxy_retry_gap_seconds",
                         "From the end of an attempt to the retry that followed it.", "histogram");
    if (!rc)
        rc = prom_histogram(out, "tokenstorm_proxy_retry_gap_seconds", NULL, 0, &c->gap);
    return rc;
}

/* The orphaned-work lines of chain_metrics (c->mu held). */
static int metrics_orphan(struct chain *c, struct buf *out)
{
    static const char *const names[] = {
        "tokenstorm_proxy_orphaned_requests_total",
        "tokenstorm_proxy_orphaned_bytes_total",
        "tokenstorm_proxy_orphaned_tokens_total",
    };
    static const char *const helps[] = {
        "Requests whose upstream still sent something after the client left.",
        "Response bytes that came from upstream after the client left.",
        "Stream events with content (tokens) that came from upstream after the client left.",
    };
    const uint64_t v[] = {c->orphans, c->orphan_bytes, c->orphan_tokens};
    int rc = 0;
    for (int k = 0; k < 3 && !rc; k++) {
        rc = prom_header(out, names[k], helps[k], "counter");
        if (!rc)
            rc = prom_sample(out, names[k], NULL, 0, (double)v[k]);
    }
    if (!rc)
        rc = prom_header(out, "tokenstorm_proxy_orphaned_seconds",
                         "Per request: how long upstream went on after the client left.",
                         "histogram");
    if (!rc)
        rc = prom_histogram(out, "tokenstorm_proxy_orphaned_seconds", NULL, 0, &c->orphan_s);
    return rc;
}

int chain_metrics(struct chain *c, struct buf *out)
{
    pthread_mutex_lock(&c->mu);
    int rc = metrics_amp(c, out);
    if (!rc)
        rc = metrics_orphan(c, out);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* One bucket as JSON. */
static json_t *bucket_json(const struct chain_bucket *b)
{
    json_t *trig = json_object();
    for (size_t i = 0; trig && i < CHAIN_TRIGGERS && b->trig[i].n; i++) {
        char name[16];
        json_object_set_new(trig, chain_code_name(b->trig[i].code, name, sizeof name),
                            json_integer(b->trig[i].n));
    }
    return json_pack("{s:I,s:I,s:I,s:o,s:{s:I,s:I,s:I,s:f}}", "t_mono_ns",
                     (json_int_t)((b->slot - 1) * CHAIN_BUCKET_NS), "attempts",
                     (json_int_t)b->attempts, "distinct", (json_int_t)b->distinct, "retries",
                     trig ? trig : json_null(), "orphaned", "requests", (json_int_t)b->orphans,
                     "bytes", (json_int_t)b->orphan_bytes, "tokens", (json_int_t)b->orphan_tokens,
                     "seconds", (double)b->orphan_ns / 1e9);
}

/* The totals as JSON (c->mu held). */
static json_t *totals_json(struct chain *c)
{
    json_t *trig = json_object();
    for (int k = 0; trig && k < CHAIN_CODES; k++) {
        char name[16];
        if (c->retries[k])
            json_object_set_new(trig, chain_code_name(k, name, sizeof name),
                                json_integer((json_int_t)c->retries[k]));
    }
    return json_pack("{s:I,s:I,s:f,s:o,s:I,s:{s:I,s:I,s:I,s:f}}", "attempts",
                     (json_int_t)c->attempts, "distinct", (json_int_t)c->distinct, "amplification",
                     c->distinct ? (double)c->attempts / (double)c->distinct : 1.0, "retries",
                     trig ? trig : json_null(), "early_retries", (json_int_t)c->early, "orphaned",
                     "requests", (json_int_t)c->orphans, "bytes", (json_int_t)c->orphan_bytes,
                     "tokens", (json_int_t)c->orphan_tokens, "seconds", (double)c->orphan_ns / 1e9);
}

/* Orders buckets by slot. */
static int by_slot(const void *x, const void *y)
{
    const struct chain_bucket *a = *(const struct chain_bucket *const *)x;
    const struct chain_bucket *b = *(const struct chain_bucket *const *)y;
    return a->slot < b->slot ? -1 : a->slot > b->slot;
}

json_t *chain_json(struct chain *c, uint64_t since_ns)
{
    const struct chain_bucket **v = ts_malloc(CHAIN_BUCKETS * sizeof *v);
    json_t *series = json_array(), *out = NULL;
    size_t n = 0;
    if (!v || !series)
        goto out_free;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < CHAIN_BUCKETS; i++) {
        const struct chain_bucket *b = &c->buckets[i];
        if (b->slot && (b->slot - 1) * CHAIN_BUCKET_NS >= since_ns)
            v[n++] = b;
    }
    qsort(v, n, sizeof *v, by_slot);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        rc = json_array_append_new(series, bucket_json(v[i]));
    json_t *tot = totals_json(c);
    pthread_mutex_unlock(&c->mu);
    if (!rc && tot)
        out = json_pack("{s:f,s:f,s:o,s:O}", "bucket_s", (double)CHAIN_BUCKET_NS / 1e9, "window_s",
                        (double)c->window_ns / 1e9, "totals", tot, "series", series);
    else
        json_decref(tot);
out_free:
    json_decref(series);
    ts_free(v);
    return out;
}
