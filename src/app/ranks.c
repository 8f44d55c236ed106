/*
 * ranks.c - a run spread over processes: the MPI glue (compiled in with
 * -Dmpi=enabled, which defines TS_HAVE_MPI for this file) and merging ranks' results.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "analysis/summary.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "base/hdr.h"
#include "base/log.h"
#include "app/ranks.h"
#include "base/tsjson.h"
#include "load/runner.h"
#include "report/result.h"

#ifdef TS_HAVE_MPI
#include <mpi.h>
#endif

/* ---- launch detection ---- */

bool ranks_mpi_built(void)
{
#ifdef TS_HAVE_MPI
    return true;
#else
    return false;
#endif
}

bool ranks_launched(uint32_t *size)
{
    static const char *const size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                            "SLURM_STEP_NUM_TASKS"};
    bool launched = false;
    *size = 0;
    for (size_t i = 0; i < sizeof(size_vars) / sizeof(size_vars[0]) && !launched; i++) {
        const char *v = getenv(size_vars[i]);
        if (!v || !*v)
            continue;
        char *end;
        unsigned long n = strtoul(v, &end, 10);
        launched = true;
        *size = (!*end && n <= UINT32_MAX) ? (uint32_t)n : 0;
    }
    if (!launched && getenv("PMIX_RANK"))
        launched = true;
    const char *force = getenv("TOKENSTORM_MPI");
    if (force && !strcmp(force, "0"))
        return false;
    if (force && !strcmp(force, "1"))
        return true;
    return launched;
}

/* ---- merging ranks' results ---- */

static json_t *timeline_arrays(const struct runner_result *res)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < res->ntimeline; i++) {
        const struct runner_point *p = &res->timeline[i];
        json_t *e =
            json_pack("[f, I, I, I, I, I, I, f, f, f, f, I]", p->t_s, (json_int_t)p->sent,
                      (json_int_t)p->completed, (json_int_t)p->errors, (json_int_t)p->in_flight,
                      (json_int_t)p->output_tokens, (json_int_t)p->chunks, p->ttft_p50_ms,
                      p->ttft_p99_ms, p->e2el_p50_ms, p->lag_p99_ms, (json_int_t)p->good);
        if (!e || json_array_append_new(a, e)) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* A result document of stats alone (what result_read_stats reads back). */
static json_t *stats_doc(const struct run_stats *st, const struct runner_result *res,
                         const struct goodput_cfg *goodput)
{
    struct run_summary sum;
    run_summary_compute(&sum, st, res->duration_s, res->peak_output_tps, goodput);
    struct result_info info = {0};
    json_t *doc = NULL;
    return result_build(st, &sum, &info, &doc) ? NULL : doc;
}

static json_t *u64_array(const uint64_t *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_integer((json_int_t)v[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* A scenario's classes, as ranks_merger_add reads them back. */
static json_t *classes_encode(const struct runner_result *res, const struct goodput_cfg *goodput)
{
    json_t *a = json_array();
    for (size_t k = 0; a && k < res->nclasses; k++) {
        const struct runner_class_result *c = &res->classes[k];
        json_t *steps = json_array();
        for (uint32_t i = 0; steps && i < c->nsteps; i++)
            if (json_array_append_new(steps, stats_doc(c->steps[i], res, goodput))) {
                json_decref(steps);
                steps = NULL;
            }
        char *lat = NULL;
        size_t lat_len = 0;
        if (c->iter_latency && hdr_encode_base64(c->iter_latency, &lat, &lat_len))
            lat = NULL;
        json_t *o = json_pack("{s:o?, s:o?, s:I, s:o?, s:I, s:o?, s:o?, s:I, s:I, s:I, s:s?}",
                              "stats", c->stats ? stats_doc(c->stats, res, goodput) : NULL, "steps",
                              steps, "iterations", (json_int_t)c->iterations, "iter_outcome",
                              u64_array(c->iter_outcome, 3), "sessions", (json_int_t)c->sessions,
                              "intent_sent", u64_array(c->intent_sent, c->nintents), "perturb_sent",
                              u64_array(c->perturb_sent, 16), "sent", (json_int_t)c->sent,
                              "with_prefix", (json_int_t)c->with_prefix, "trimmed",
                              (json_int_t)c->trimmed, "iter_latency", lat);
        ts_free(lat);
        if (!o || json_array_append_new(a, o)) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static uint64_t jcount(const json_t *v)
{
    json_int_t n = json_integer_value(v);
    return n > 0 ? (uint64_t)n : 0;
}

/* Adds one rank's class k (o, from classes_encode) to dst. */
static int class_add(struct runner_class_result *dst, const json_t *o, char *err, size_t errlen)
{
    struct runner_class_result t = {0};
    const json_t *steps = json_object_get(o, "steps");
    const json_t *lat = json_object_get(o, "iter_latency");
    int rc = 0;
    if (!json_is_object(o) || !json_is_array(steps) || json_array_size(steps) != dst->nsteps) {
        ts_errf(err, errlen, "bad result: its classes differ from this rank's");
        return TS_PARSE;
    }
    rc = result_read_stats(json_object_get(o, "stats"), &t.stats, err, errlen);
    if (!rc && dst->nsteps) {
        t.steps = ts_calloc(dst->nsteps, sizeof(*t.steps));
        if (!t.steps)
            rc = -ENOMEM;
        t.nsteps = dst->nsteps;
        for (uint32_t i = 0; !rc && i < dst->nsteps; i++)
            rc = result_read_stats(json_array_get(steps, i), &t.steps[i], err, errlen);
    }
    if (!rc && json_is_string(lat) &&
        hdr_decode_base64(json_string_value(lat), json_string_length(lat), &t.iter_latency)) {
        ts_errf(err, errlen, "bad result: a class's iteration histogram");
        rc = TS_PARSE;
    }
    if (!rc) {
        t.iterations = jcount(json_object_get(o, "iterations"));
        for (size_t i = 0; i < 3; i++)
            t.iter_outcome[i] = jcount(json_array_get(json_object_get(o, "iter_outcome"), i));
        t.sessions = jcount(json_object_get(o, "sessions"));
        const json_t *is = json_object_get(o, "intent_sent");
        t.nintents =
            (uint32_t)(json_array_size(is) < dst->nintents ? json_array_size(is) : dst->nintents);
        if (t.nintents && !(t.intent_sent = ts_calloc(t.nintents, sizeof(*t.intent_sent))))
            rc = -ENOMEM;
        for (uint32_t i = 0; !rc && i < t.nintents; i++)
            t.intent_sent[i] = jcount(json_array_get(is, i));
        for (size_t i = 0; i < 16; i++)
            t.perturb_sent[i] = jcount(json_array_get(json_object_get(o, "perturb_sent"), i));
        t.sent = jcount(json_object_get(o, "sent"));
        t.with_prefix = jcount(json_object_get(o, "with_prefix"));
        t.trimmed = jcount(json_object_get(o, "trimmed"));
    }
    if (!rc && (rc = runner_class_result_add(dst, &t)))
        ts_errf(err, errlen, "merging a class: %s", ts_strerror(rc));
    if (rc == -ENOMEM)
        ts_errf(err, errlen, "out of memory");
    runner_class_result_release(&t);
    return rc;
}

char *ranks_result_encode(const struct runner_result *res, const struct goodput_cfg *goodput)
{
    struct run_summary sum;
    run_summary_compute(&sum, res->total, res->duration_s, res->peak_output_tps, goodput);
    struct result_info info = {0};
    json_t *doc = NULL;
    if (result_build(res->total, &sum, &info, &doc))
        return NULL;
    json_t *d =
        json_pack("{s:I, s:f, s:o, s:b, s:b, s:o}", "sent", (json_int_t)res->sent, "duration_s",
                  res->duration_s, "send_end_s", tsjson_num(res->send_end_s), "end_cut",
                  res->end_cut, "interrupted", res->interrupted, "timeline", timeline_arrays(res));
    char *text = NULL;
    if (d && res->nclasses) {
        json_t *cl = classes_encode(res, goodput);
        if (!cl || json_object_set_new(d, "classes", cl)) {
            json_decref(d);
            d = NULL;
        }
    }
    if (d && !json_object_set_new(doc, "dist", d))
        text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return text;
}

/* Grows an array of n doubles to m (new ones zero). */
static int grow_doubles(double **a, size_t n, size_t m)
{
    double *p = ts_realloc(*a, (m ? m : 1) * sizeof(*p));
    if (!p)
        return -ENOMEM;
    memset(p + n, 0, (m - n) * sizeof(*p));
    *a = p;
    return 0;
}

/* Grows the result's timeline (and the weights) to n points. */
static int merger_grow(struct ranks_merger *m, size_t n)
{
    struct runner_result *res = m->into;
    if (n > res->ntimeline) {
        struct runner_point *tl = ts_realloc(res->timeline, n * sizeof(*tl));
        if (!tl)
            return -ENOMEM;
        memset(tl + res->ntimeline, 0, (n - res->ntimeline) * sizeof(*tl));
        res->timeline = tl;
        res->ntimeline = n;
    }
    if (n > m->wlen) {
        if (grow_doubles(&m->w_ttft, m->wlen, n) || grow_doubles(&m->w_e2el, m->wlen, n))
            return -ENOMEM;
        m->wlen = n;
    }
    return 0;
}

int ranks_merger_init(struct ranks_merger *m, struct runner_result *into)
{
    memset(m, 0, sizeof(*m));
    m->into = into;
    if (merger_grow(m, into->ntimeline)) {
        ranks_merger_release(m);
        return -ENOMEM;
    }
    for (size_t i = 0; i < into->ntimeline; i++) {
        const struct runner_point *p = &into->timeline[i];
        m->w_ttft[i] = p->ttft_p50_ms * (double)p->completed;
        m->w_e2el[i] = p->e2el_p50_ms * (double)p->completed;
    }
    return 0;
}

int ranks_merger_add(struct ranks_merger *m, const char *text, size_t len, char *err, size_t errlen)
{
    struct runner_result *res = m->into;
    json_error_t jerr;
    json_t *doc = json_loadb(text, len, 0, &jerr);
    if (!doc) {
        ts_errf(err, errlen, "bad result: %s", jerr.text);
        return TS_PARSE;
    }
    json_t *d = json_object_get(doc, "dist");
    json_t *tl = json_object_get(d, "timeline");
    struct run_stats *stats = NULL;
    int rc = 0;
    if (!json_is_object(d) || !json_is_array(tl)) {
        ts_errf(err, errlen, "bad result: no dist section");
        rc = TS_PARSE;
    }
    if (!rc)
        rc = result_read_stats(doc, &stats, err, errlen);
    if (!rc && (rc = merger_grow(m, json_array_size(tl))))
        ts_errf(err, errlen, "out of memory");
    const json_t *cl = json_object_get(d, "classes");
    if (!rc && (res->nclasses || cl) && json_array_size(cl) != res->nclasses) {
        ts_errf(err, errlen, "bad result: %zu classes, this rank has %zu", json_array_size(cl),
                res->nclasses);
        rc = TS_PARSE;
    }
    if (!rc && (rc = run_stats_merge(res->total, stats)))
        ts_errf(err, errlen, "merging the histograms: %s", ts_strerror(rc));
    for (size_t k = 0; !rc && k < res->nclasses; k++)
        rc = class_add(&res->classes[k], json_array_get(cl, k), err, errlen);
    run_stats_free(stats);
    if (rc) {
        json_decref(doc);
        return rc;
    }
    res->sent += (uint64_t)json_integer_value(json_object_get(d, "sent"));
    double dur = json_number_value(json_object_get(d, "duration_s"));
    if (dur > res->duration_s)
        res->duration_s = dur;
    double send_end = json_number_value(json_object_get(d, "send_end_s")); /* 0 when null */
    if (send_end > 0 && !(send_end <= res->send_end_s))
        res->send_end_s = send_end; /* the last rank to stop sending (NAN: none yet) */
    res->end_cut |= json_is_true(json_object_get(d, "end_cut"));
    res->interrupted |= json_is_true(json_object_get(d, "interrupted"));
    for (size_t i = 0; i < json_array_size(tl); i++) {
        json_t *e = json_array_get(tl, i);
        struct runner_point *p = &res->timeline[i];
        double v[12];
        for (size_t k = 0; k < 12; k++) {
            v[k] = json_number_value(json_array_get(e, k));
            if (!(v[k] >= 0 && v[k] < 1e15)) /* a count or a time; nothing else is sane */
                v[k] = 0;
        }
        if (v[0] > p->t_s)
            p->t_s = v[0];
        p->sent += (uint64_t)v[1];
        p->completed += (uint64_t)v[2];
        p->errors += (uint64_t)v[3];
        p->in_flight += (uint64_t)v[4];
        p->output_tokens += (uint64_t)v[5];
        p->chunks += (uint64_t)v[6];
        p->good += (uint64_t)v[11];
        m->w_ttft[i] += v[7] * v[2];
        m->w_e2el[i] += v[9] * v[2];
        if (v[8] > p->ttft_p99_ms)
            p->ttft_p99_ms = v[8];
        if (v[10] > p->lag_p99_ms)
            p->lag_p99_ms = v[10];
    }
    json_decref(doc);
    return 0;
}

void ranks_merger_finish(struct ranks_merger *m, double warmup_s)
{
    struct runner_result *res = m->into;
    double peak = 0;
    for (size_t i = 0; i < res->ntimeline; i++) {
        struct runner_point *p = &res->timeline[i];
        if (i < m->wlen && p->completed) {
            p->ttft_p50_ms = m->w_ttft[i] / (double)p->completed;
            p->e2el_p50_ms = m->w_e2el[i] / (double)p->completed;
        }
        double t0 = i ? res->timeline[i - 1].t_s : 0;
        double len = p->t_s - t0;
        if (len > 0.5 && t0 >= warmup_s - 1e-9 && (double)p->chunks / len > peak)
            peak = (double)p->chunks / len;
    }
    if (peak > res->peak_output_tps)
        res->peak_output_tps = peak;
    ranks_merger_release(m);
}

void ranks_merger_release(struct ranks_merger *m)
{
    ts_free(m->w_ttft);
    ts_free(m->w_e2el);
    m->w_ttft = m->w_e2el = NULL;
    m->wlen = 0;
}

/* ---- the group ---- */

#define PROGRESS_RING 8
#define TAG_PROGRESS  7

/* One rank's progress as it travels to rank 0 (same build on every rank). */
struct progress_msg {
    double elapsed_s, rate, tokens_per_s, ttft_p50_ms, ttft_p99_ms;
    uint64_t sent, completed, errors, in_flight, last_completed;
    uint32_t draining;
    uint32_t pad;
};

struct ranks_group {
    uint32_t rank, size;
    bool merged;
#ifdef TS_HAVE_MPI
    MPI_Comm comm;               /* progress messages only; collectives use MPI_COMM_WORLD */
    struct progress_msg *latest; /* rank 0: each rank's newest */
    uint64_t *received;          /* rank 0: messages received from each rank */
    struct {
        MPI_Request req;
        struct progress_msg msg;
    } ring[PROGRESS_RING];
    unsigned ring_next;
    uint64_t posted; /* messages sent to rank 0 */
#endif
};

uint32_t ranks_group_rank(const struct ranks_group *g)
{
    return g ? g->rank : 0;
}

uint32_t ranks_group_size(const struct ranks_group *g)
{
    return g ? g->size : 1;
}

struct shard ranks_group_shard(const struct ranks_group *g)
{
    struct shard s = {0, 0};
    if (g && g->size > 1) {
        s.index = g->rank;
        s.count = g->size;
    }
    return s;
}

#ifdef TS_HAVE_MPI

int ranks_group_join(struct ranks_group **out, int *argc, char ***argv, char *err, size_t errlen)
{
    uint32_t size;
    *out = NULL;
    if (!ranks_launched(&size) || size == 1)
        return 0;
    int provided, rank, n;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        ts_errf(err, errlen, "MPI_Init_thread failed");
        return -EIO;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (size > 1 && n != (int)size) {
        ts_errf(err, errlen,
                "the launcher started %u processes but MPI sees %d (with srun, pass --mpi=pmix "
                "or --mpi=pmi2)",
                size, n);
        MPI_Finalize();
        return -EINVAL;
    }
    if (n > (int)SHARD_MAX) {
        ts_errf(err, errlen, "at most %u ranks", SHARD_MAX);
        MPI_Finalize();
        return -EINVAL;
    }
    struct ranks_group *g = ts_calloc(1, sizeof(*g));
    if (g) {
        g->latest = ts_calloc((size_t)n, sizeof(*g->latest));
        g->received = ts_calloc((size_t)n, sizeof(*g->received));
    }
    if (!g || !g->latest || !g->received) {
        if (g) {
            ts_free(g->latest);
            ts_free(g->received);
        }
        ts_free(g);
        ts_errf(err, errlen, "out of memory");
        MPI_Abort(MPI_COMM_WORLD, 3);
        return -ENOMEM;
    }
    g->rank = (uint32_t)rank;
    g->size = (uint32_t)n;
    for (unsigned i = 0; i < PROGRESS_RING; i++)
        g->ring[i].req = MPI_REQUEST_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &g->comm);
    *out = g;
    return 0;
}

void ranks_group_bcast(struct ranks_group *g, void *data, size_t len)
{
    if (!g || g->size < 2)
        return;
    MPI_Bcast(data, (int)len, MPI_BYTE, 0, MPI_COMM_WORLD);
}

void ranks_group_barrier(void *arg)
{
    struct ranks_group *g = arg;
    if (g && g->size > 1)
        MPI_Barrier(MPI_COMM_WORLD);
}

static void progress_post(struct ranks_group *g, const struct runner_progress *p)
{
    unsigned slot = g->ring_next;
    int done = 1;
    MPI_Test(&g->ring[slot].req, &done, MPI_STATUS_IGNORE);
    if (!done)
        return; /* rank 0 has not taken the oldest yet: skip a second rather than wait */
    struct progress_msg *m = &g->ring[slot].msg;
    memset(m, 0, sizeof(*m));
    m->elapsed_s = p->elapsed_s;
    m->rate = p->rate;
    m->tokens_per_s = p->tokens_per_s;
    m->ttft_p50_ms = p->last ? p->last->ttft_p50_ms : 0;
    m->ttft_p99_ms = p->last ? p->last->ttft_p99_ms : 0;
    m->sent = p->sent;
    m->completed = p->completed;
    m->errors = p->errors;
    m->in_flight = p->in_flight;
    m->last_completed = p->last ? p->last->completed : 0;
    m->draining = p->draining;
    MPI_Isend(m, (int)sizeof(*m), MPI_BYTE, 0, TAG_PROGRESS, g->comm, &g->ring[slot].req);
    g->posted++;
    g->ring_next = (slot + 1) % PROGRESS_RING;
}

static void progress_receive(struct ranks_group *g, bool wait_for_all, const uint64_t *expected)
{
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (wait_for_all) {
            uint32_t r = 1;
            while (r < g->size && g->received[r] >= expected[r])
                r++;
            if (r == g->size)
                return;
            MPI_Probe((int)r, TAG_PROGRESS, g->comm, &st);
            flag = 1;
        } else {
            MPI_Iprobe(MPI_ANY_SOURCE, TAG_PROGRESS, g->comm, &flag, &st);
            if (!flag)
                return;
        }
        struct progress_msg m;
        MPI_Recv(&m, (int)sizeof(m), MPI_BYTE, st.MPI_SOURCE, TAG_PROGRESS, g->comm,
                 MPI_STATUS_IGNORE);
        if (st.MPI_SOURCE > 0 && (uint32_t)st.MPI_SOURCE < g->size) {
            g->latest[st.MPI_SOURCE] = m;
            g->received[st.MPI_SOURCE]++;
        }
    }
}

bool ranks_group_progress(struct ranks_group *g, const struct runner_progress *p,
                          struct runner_progress *agg, struct runner_point *agg_last)
{
    if (!g || g->size < 2) {
        *agg = *p;
        return true;
    }
    if (g->rank) {
        progress_post(g, p);
        return false;
    }
    progress_receive(g, false, NULL);
    *agg = *p;
    memset(agg_last, 0, sizeof(*agg_last));
    if (p->last)
        *agg_last = *p->last;
    agg->last = agg_last;
    double w = (double)agg_last->completed, p50 = agg_last->ttft_p50_ms * w;
    for (uint32_t r = 1; r < g->size; r++) {
        const struct progress_msg *m = &g->latest[r];
        if (!g->received[r]) {
            agg->draining = false; /* not heard of yet: still starting */
            continue;
        }
        agg->sent += m->sent;
        agg->completed += m->completed;
        agg->errors += m->errors;
        agg->in_flight += m->in_flight;
        agg->rate += m->rate;
        agg->tokens_per_s += m->tokens_per_s;
        agg->draining = agg->draining && m->draining;
        agg_last->completed += m->last_completed;
        p50 += m->ttft_p50_ms * (double)m->last_completed;
        w += (double)m->last_completed;
        if (m->ttft_p99_ms > agg_last->ttft_p99_ms)
            agg_last->ttft_p99_ms = m->ttft_p99_ms;
    }
    agg_last->ttft_p50_ms = w > 0 ? p50 / w : 0;
    return true;
}

/* What each rank tells rank 0 before its payload. */
struct merge_head {
    int64_t len;     /* payload bytes */
    uint64_t posted; /* progress messages it sent */
    int32_t failed;  /* its run failed: no payload */
    int32_t pad;
};

int ranks_group_merge(struct ranks_group *g, struct runner_result *res, double warmup_s,
                      const struct goodput_cfg *goodput, char *err, size_t errlen)
{
    if (!g || g->size < 2) {
        if (g)
            g->merged = true;
        return 0;
    }
    g->merged = true;
    char *payload = NULL;
    struct merge_head head = {.posted = g->posted, .failed = !res};
    if (g->rank && res) {
        payload = ranks_result_encode(res, goodput);
        if (!payload || strlen(payload) > INT_MAX / 2)
            head.failed = 1;
        else
            head.len = (int64_t)strlen(payload);
    }
    struct merge_head *heads = NULL;
    int *counts = NULL, *displs = NULL;
    char *all = NULL;
    int rc = 0;
    if (!g->rank) {
        heads = ts_calloc(g->size, sizeof(*heads));
        counts = ts_calloc(g->size, sizeof(*counts));
        displs = ts_calloc(g->size, sizeof(*displs));
        if (!heads || !counts || !displs) {
            ts_errf(err, errlen, "out of memory");
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    MPI_Gather(&head, (int)sizeof(head), MPI_BYTE, heads, (int)sizeof(head), MPI_BYTE, 0,
               MPI_COMM_WORLD);
    size_t total = 0;
    if (!g->rank) {
        for (uint32_t r = 0; r < g->size; r++) {
            if (total + (size_t)heads[r].len > INT_MAX) {
                ts_errf(err, errlen, "the ranks' results are over 2 GiB");
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
            counts[r] = (int)heads[r].len;
            displs[r] = (int)total;
            total += (size_t)heads[r].len;
        }
        all = ts_malloc(total + 1);
        if (!all) {
            ts_errf(err, errlen, "out of memory");
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    MPI_Gatherv(payload, (int)head.len, MPI_BYTE, all, counts, displs, MPI_BYTE, 0, MPI_COMM_WORLD);
    free(payload); /* jansson's allocation */
    if (g->rank) {
        MPI_Request reqs[PROGRESS_RING];
        for (unsigned i = 0; i < PROGRESS_RING; i++)
            reqs[i] = g->ring[i].req;
        MPI_Waitall(PROGRESS_RING, reqs, MPI_STATUSES_IGNORE);
        for (unsigned i = 0; i < PROGRESS_RING; i++)
            g->ring[i].req = MPI_REQUEST_NULL;
        return 0;
    }
    uint64_t *expected = ts_calloc(g->size, sizeof(*expected));
    if (!expected) {
        ts_errf(err, errlen, "out of memory");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    for (uint32_t r = 0; r < g->size; r++)
        expected[r] = heads[r].posted;
    progress_receive(g, true, expected); /* so every rank's sends complete */
    ts_free(expected);
    struct ranks_merger m = {0};
    if (!res || heads[0].failed) {
        ts_errf(err, errlen, "rank 0's run failed");
        rc = -ECANCELED;
    } else if ((rc = ranks_merger_init(&m, res))) {
        ts_errf(err, errlen, "out of memory");
    }
    for (uint32_t r = 1; !rc && r < g->size; r++) {
        if (heads[r].failed) {
            ts_errf(err, errlen, "rank %u's run failed", r);
            rc = -ECANCELED;
            break;
        }
        char what[200];
        if ((rc = ranks_merger_add(&m, all + displs[r], (size_t)counts[r], what, sizeof(what))))
            ts_errf(err, errlen, "rank %u: %s", r, what);
    }
    if (!rc)
        ranks_merger_finish(&m, warmup_s);
    else
        ranks_merger_release(&m);
    ts_free(all);
    ts_free(heads);
    ts_free(counts);
    ts_free(displs);
    return rc;
}

void ranks_group_leave(struct ranks_group *g, int exit_code)
{
    if (!g)
        return;
    if (!g->merged && g->size > 1) {
        /* a collective the other ranks are in (or will enter) would never end */
        MPI_Abort(MPI_COMM_WORLD, exit_code ? exit_code : 3);
    }
    MPI_Comm_free(&g->comm);
    MPI_Finalize();
    ts_free(g->latest);
    ts_free(g->received);
    ts_free(g);
}

#else /* no MPI in this build */

int ranks_group_join(struct ranks_group **out, int *argc, char ***argv, char *err, size_t errlen)
{
    uint32_t size;
    *out = NULL;
    if (!ranks_launched(&size) || size == 1)
        return 0;
    ts_errf(err, errlen,
            "started by an MPI launcher, but this tokenstorm was built without MPI: build with "
            "'meson setup -Dmpi=enabled', or run each process with --shard i/N (TOKENSTORM_MPI=0 "
            "runs each process as a whole run)");
    return -ENOTSUP;
}

void ranks_group_bcast(struct ranks_group *g, void *data, size_t len)
{
}

void ranks_group_barrier(void *arg)
{
}

bool ranks_group_progress(struct ranks_group *g, const struct runner_progress *p,
                          struct runner_progress *agg, struct runner_point *agg_last)
{
    *agg = *p;
    return true;
}

int ranks_group_merge(struct ranks_group *g, struct runner_result *res, double warmup_s,
                      const struct goodput_cfg *goodput, char *err, size_t errlen)
{
    return 0;
}

void ranks_group_leave(struct ranks_group *g, int exit_code)
{
}

#endif
