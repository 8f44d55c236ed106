/*
 * proxy_mirror_out.c - `proxy --mirror URL --mirror-out DIR`: the mirror's
 * pairs as files that `tokenstorm report` and `tokenstorm compare` read
 * (proxy.h, docs/CHAOS.md "Shadow traffic").
 *
 * Each compared pair is recorded twice, once per target, as a load run
 * records a request (proxy_mirror.c, side_record): both sides of a pair
 * share its start, so DIR/primary and DIR/mirror are two runs of the same
 * requests and `compare` reads them as such. A thread rewrites the files
 * every cfg.mirror_out_every_ns (each through a temporary file and a
 * rename: a reader never sees half a file, and a killed proxy loses at most
 * one period), and proxy_mirror_out_stop writes them a last time.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "analysis/stats.h"
#include "analysis/summary.h"
#include "base/clock.h"
#include "base/file.h"
#include "base/log.h"
#include "chaos/proxy_int.h"
#include "report/docset.h"
#include "report/result.h"

#define MIRROR_OUT_EVERY_NS (2ull * 1000 * 1000 * 1000)

/* url without a user:password@ part, into out. */
static const char *clean_url(const char *url, char *out, size_t n)
{
    const char *host = strstr(url, "://");
    host = host ? host + 3 : url;
    const char *at = strchr(host, '@'), *slash = strchr(host, '/');
    if (at && (!slash || at < slash))
        snprintf(out, n, "%.*s%s", (int)(host - url), url, at + 1);
    else
        snprintf(out, n, "%s", url);
    return out;
}

/* One side's result document. NULL when out of memory. */
static json_t *side_doc(const struct proxy *p, int i, const struct run_stats *st, double duration_s)
{
    char url[PROXY_UPSTREAM_MAX + 8];
    struct run_summary sum;
    json_t *doc = NULL;
    clean_url(i ? p->mirror_base : p->upstream, url, sizeof url);
    json_t *cfg = json_pack("{s:s,s:s,s:s,s:f,s:i}", "source", "proxy --mirror", "target",
                            i ? "mirror" : "primary", "url", url, "mirror_share",
                            p->cfg.mirror_share, "mirror_max", p->cfg.mirror_max);
    run_summary_compute(&sum, st, duration_s, 0, NULL);
    struct result_info info = {.config = cfg, .started_wall_ns = p->mirror.started_wall_ns};
    if (result_build(st, &sum, &info, &doc))
        doc = NULL;
    json_decref(cfg);
    return doc;
}

/* A prom_hist as {count, mean, buckets: [{le, count}]} (cumulative counts; le null: +Inf). */
static json_t *hist_json(const struct prom_hist *h)
{
    json_t *b = json_array();
    uint64_t cum = 0;
    for (size_t k = 0; b && k <= h->nbounds; k++) {
        cum += h->counts[k];
        json_array_append_new(b, json_pack("{s:o,s:I}", "le",
                                           k < h->nbounds ? json_real(h->bounds[k]) : json_null(),
                                           "count", (json_int_t)cum));
    }
    return json_pack("{s:I,s:o,s:o}", "count", (json_int_t)h->count, "mean",
                     h->count ? json_real(h->sum / (double)h->count) : json_null(), "buckets",
                     b ? b : json_null());
}

/* mirror.json's document (m->mu held). */
static json_t *mirror_doc(const struct proxy *p, double duration_s)
{
    const struct proxy_mirror_stats *m = &p->mirror;
    char u0[PROXY_UPSTREAM_MAX + 8], u1[PROXY_UPSTREAM_MAX + 8];
    json_t *sim = hist_json(&m->similarity);
    if (sim)
        json_object_set_new(sim, "min", m->sim_n ? json_real(m->sim_min) : json_null());
    return json_pack(
        "{s:s,s:s,s:s,s:f,s:i,s:f,s:I,s:I,s:I,s:I,s:I,s:{s:I,s:I,s:I},s:o,s:o,s:{s:s,s:s}}",
        "schema", REPORT_MIRROR_SCHEMA, "primary", clean_url(p->upstream, u0, sizeof u0), "mirror",
        clean_url(p->mirror_base, u1, sizeof u1), "mirror_share", p->cfg.mirror_share, "mirror_max",
        p->cfg.mirror_max, "duration_s", duration_s, "sampled",
        (json_int_t)atomic_load(&m->sampled), "mirrored", (json_int_t)atomic_load(&m->mirrored),
        "dropped", (json_int_t)atomic_load(&m->dropped), "compared", (json_int_t)m->compared, "cut",
        (json_int_t)m->cut, "errors", "primary_only", (json_int_t)m->errors_only[0], "mirror_only",
        (json_int_t)m->errors_only[1], "both", (json_int_t)m->errors_both, "latency_diff_s",
        hist_json(&m->diff), "similarity", sim ? sim : json_null(), "results", "primary",
        "primary/result.json", "mirror", "mirror/result.json");
}

/* Writes doc (NULL: out of memory) to DIR/name. 0 or a negative errno with err. */
static int write_doc(const struct proxy *p, json_t *doc, const char *name, char *err, size_t errlen)
{
    char path[4096];
    int rc;
    if (!doc) {
        ts_errf(err, errlen, "--mirror-out: out of memory");
        return -ENOMEM;
    }
    if ((size_t)snprintf(path, sizeof path, "%s/%s", p->cfg.mirror_out, name) >= sizeof path) {
        ts_errf(err, errlen, "--mirror-out: path too long");
        rc = -ENAMETOOLONG;
    } else {
        rc = result_write_file(doc, path, err, errlen);
    }
    json_decref(doc);
    return rc;
}

int proxy_mirror_out_write(struct proxy *p, char *err, size_t errlen)
{
    struct proxy_mirror_stats *m = &p->mirror;
    struct run_stats *snap[2] = {NULL, NULL};
    int rc = 0;
    if (!m->stats[0])
        return 0;
    for (int i = 0; i < 2 && !rc; i++)
        rc = run_stats_new(&snap[i]);
    pthread_mutex_lock(&m->mu);
    /* from the first pair's start to the last one's end, as a run's measured time */
    double duration_s =
        m->first_ns && m->last_ns > m->first_ns ? (double)(m->last_ns - m->first_ns) / 1e9 : 0;
    for (int i = 0; i < 2 && !rc; i++)
        rc = run_stats_merge(snap[i], m->stats[i]);
    json_t *mdoc = rc ? NULL : mirror_doc(p, duration_s);
    pthread_mutex_unlock(&m->mu);
    if (rc) {
        ts_errf(err, errlen, "--mirror-out: out of memory");
    } else {
        rc = write_doc(p, side_doc(p, 0, snap[0], duration_s), "primary/result.json", err, errlen);
        if (!rc)
            rc = write_doc(p, side_doc(p, 1, snap[1], duration_s), "mirror/result.json", err,
                           errlen);
        if (!rc)
            rc = write_doc(p, mdoc, "mirror.json", err, errlen);
        else
            json_decref(mdoc);
    }
    for (int i = 0; i < 2; i++)
        run_stats_free(snap[i]);
    return rc;
}

/* The writer thread: the files every period until told to stop. */
static void *writer_main(void *arg)
{
    struct proxy *p = arg;
    struct proxy_mirror_stats *m = &p->mirror;
    uint64_t every = p->cfg.mirror_out_every_ns ? p->cfg.mirror_out_every_ns : MIRROR_OUT_EVERY_NS;
    bool warned = false;
    pthread_mutex_lock(&m->mu);
    while (!m->writer_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t t = (uint64_t)ts.tv_nsec + every;
        ts.tv_sec += (time_t)(t / 1000000000ull);
        ts.tv_nsec = (long)(t % 1000000000ull);
        if (pthread_cond_timedwait(&m->wake, &m->mu, &ts) != ETIMEDOUT || m->writer_stop)
            continue;
        pthread_mutex_unlock(&m->mu);
        char err[512];
        if (proxy_mirror_out_write(p, err, sizeof err) && !warned) {
            ts_warn("proxy: %s", err);
            warned = true;
        }
        pthread_mutex_lock(&m->mu);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

int proxy_mirror_out_start(struct proxy *p, char *err, size_t errlen)
{
    struct proxy_mirror_stats *m = &p->mirror;
    char dir[4096];
    int rc = 0;
    if (!p->cfg.mirror_out || !p->cfg.mirror_url)
        return 0;
    for (int i = 0; i < 2 && !rc; i++) {
        if ((size_t)snprintf(dir, sizeof dir, "%s/%s", p->cfg.mirror_out,
                             i ? "mirror" : "primary") >= sizeof dir) {
            ts_errf(err, errlen, "--mirror-out: path too long");
            return -ENAMETOOLONG;
        }
        char why[512];
        if ((rc = file_mkdirs(dir, why, sizeof why)) != 0)
            ts_errf(err, errlen, "--mirror-out: %s", why);
    }
    for (int i = 0; i < 2 && !rc; i++)
        if (run_stats_new(&m->stats[i])) {
            ts_errf(err, errlen, "--mirror-out: out of memory");
            rc = -ENOMEM;
        }
    m->started_wall_ns = ts_wall_ns();
    if (!rc)
        rc = proxy_mirror_out_write(p, err, errlen); /* an empty result at once: DIR works */
    if (!rc && (rc = -pthread_cond_init(&m->wake, NULL)) != 0)
        ts_errf(err, errlen, "--mirror-out: cannot make a condition variable");
    if (!rc && (rc = -pthread_create(&m->writer, NULL, writer_main, p)) != 0) {
        pthread_cond_destroy(&m->wake);
        ts_errf(err, errlen, "--mirror-out: cannot start a thread: %s", strerror(-rc));
    }
    if (rc) {
        for (int i = 0; i < 2; i++) {
            run_stats_free(m->stats[i]);
            m->stats[i] = NULL;
        }
        return rc;
    }
    m->writer_on = true;
    return 0;
}

void proxy_mirror_out_stop(struct proxy *p)
{
    struct proxy_mirror_stats *m = &p->mirror;
    char err[512];
    if (m->writer_on) {
        pthread_mutex_lock(&m->mu);
        m->writer_stop = true;
        pthread_cond_signal(&m->wake);
        pthread_mutex_unlock(&m->mu);
        pthread_join(m->writer, NULL);
        pthread_cond_destroy(&m->wake);
        m->writer_on = false;
        if (proxy_mirror_out_write(p, err, sizeof err))
            ts_warn("proxy: %s", err);
    }
    for (int i = 0; i < 2; i++) {
        run_stats_free(m->stats[i]);
        m->stats[i] = NULL;
    }
}
