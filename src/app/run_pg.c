/*
 * run_pg.c - pgvector load through libpq (run_pg.h).
 */
#include "app/run_pg.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "analysis/stats.h"
#include "analysis/summary.h"
#include "base/alloc.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/file.h"
#include "report/outdir.h"
#include "report/result.h"
#include "report/text.h"

#if TS_HAVE_LIBPQ
#include <libpq-fe.h>
#endif

bool run_pg_target(const char *target)
{
    return target && (!strncmp(target, "postgres://", 11) || !strncmp(target, "postgresql://", 13));
}

#if TS_HAVE_LIBPQ

struct pg_run {
    const struct run_opts *o;
    struct run_vector vec;
    uint32_t k;
    uint64_t deadline_ns, max_requests;
    atomic_uint_fast64_t next;
    char sql[512];
};

struct pg_worker {
    struct pg_run *run;
    pthread_t thread;
    struct run_stats *stats;
    uint32_t index;
    char err[256];
};

/* "[a,b,...]": pgvector's text form of row i of the queries. */
static int vector_text(const struct vecset *q, uint64_t i, struct buf *b)
{
    const float *row = q->v + (i % q->n) * q->dim;
    buf_reset(b);
    int rc = buf_append_char(b, '[');
    for (size_t d = 0; !rc && d < q->dim; d++)
        rc = buf_appendf(b, d ? ",%.9g" : "%.9g", (double)row[d]);
    return rc ? rc : buf_append_char(b, ']');
}

/* Connects, sets the search breadth and prepares the query. */
static PGconn *pg_open(struct pg_worker *w)
{
    const struct run_opts *o = w->run->o;
    PGconn *pg = PQconnectdb(o->target);
    char set[64];
    if (PQstatus(pg) != CONNECTION_OK) {
        ts_errf(w->err, sizeof(w->err), "cannot connect: %s", PQerrorMessage(pg));
        PQfinish(pg);
        return NULL;
    }
    const char *sets[2] = {NULL, NULL};
    char set2[64];
    if (o->vector.has_nprobe) {
        snprintf(set, sizeof(set), "SET ivfflat.probes = %" PRId64, o->vector.nprobe);
        sets[0] = set;
    }
    if (o->vector.has_ef_search) {
        snprintf(set2, sizeof(set2), "SET hnsw.ef_search = %" PRId64, o->vector.ef_search);
        sets[1] = set2;
    }
    for (int i = 0; i < 2; i++) {
        if (!sets[i])
            continue;
        PGresult *r = PQexec(pg, sets[i]);
        bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
        if (!ok) {
            ts_errf(w->err, sizeof(w->err), "%s: %s", sets[i], PQerrorMessage(pg));
            PQfinish(pg);
            return NULL;
        }
    }
    /* the unnamed statement: PGlite serves every connection from one session,
     * where a named one would outlive the connection that made it */
    PGresult *r = PQprepare(pg, "", w->run->sql, 1, NULL);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!ok) {
        ts_errf(w->err, sizeof(w->err), "%s: %s", w->run->sql, PQerrorMessage(pg));
        PQfinish(pg);
        return NULL;
    }
    return pg;
}

/* One query: its record, with recall when it answered. */
static void pg_query(struct pg_worker *w, PGconn *pg, uint64_t i, struct buf *b)
{
    struct pg_run *run = w->run;
    struct req_record rec = {.id = i, .worker = w->index, .outcome = REQ_OK};
    rec.usage_prompt_tokens = rec.usage_completion_tokens = -1;
    const char *param[1] = {NULL};
    if (vector_text(&run->vec.queries, i, b)) {
        rec.outcome = REQ_OTHER;
        ts_errf(rec.error, sizeof(rec.error), "out of memory");
    }
    param[0] = buf_cstr(b);
    rec.intended_ns = rec.start_ns = ts_now_ns();
    PGresult *r = rec.outcome == REQ_OK ? PQexecPrepared(pg, "", 1, param, NULL, NULL, 0) : NULL;
    rec.end_ns = rec.last_chunk_ns = ts_now_ns();
    if (r && PQresultStatus(r) == PGRES_TUPLES_OK) {
        int64_t ids[VECSET_MAX_K];
        size_t n = 0;
        for (int t = 0; t < PQntuples(r) && n < VECSET_MAX_K; t++)
            ids[n++] = strtoll(PQgetvalue(r, t, 0), NULL, 10);
        const struct ivecset *truth = &run->vec.truth;
        size_t k = run->k < truth->k ? run->k : truth->k;
        rec.recall = vec_recall(ids, n < k ? n : k, truth->v + (i % truth->n) * truth->k, k);
        rec.recall_k = (uint16_t)k;
        rec.has_recall = true;
    } else if (r) {
        rec.outcome = REQ_OTHER;
        ts_errf(rec.error, sizeof(rec.error), "%s", PQresultErrorMessage(r));
    }
    PQclear(r);
    run_stats_add_record(w->stats, &rec, NULL);
}

static void *pg_worker_main(void *arg)
{
    struct pg_worker *w = arg;
    struct pg_run *run = w->run;
    PGconn *pg = pg_open(w);
    if (!pg)
        return NULL;
    struct buf b;
    buf_init(&b, 1u << 20);
    for (;;) {
        uint64_t i = atomic_fetch_add(&run->next, 1);
        if ((run->max_requests && i >= run->max_requests) ||
            (run->deadline_ns && ts_now_ns() >= run->deadline_ns))
            break;
        pg_query(w, pg, i, &b);
    }
    buf_release(&b);
    PQfinish(pg);
    return NULL;
}

/* Runs the workers and merges what they measured into *total. */
static int pg_load(struct pg_run *run, uint32_t conns, struct run_stats *total, double *secs,
                   char *err, size_t errlen)
{
    struct pg_worker *ws = ts_calloc(conns, sizeof(*ws));
    uint32_t started = 0;
    int rc = ws ? 0 : -ENOMEM;
    uint64_t t0 = ts_now_ns();
    if (run->o->duration_ns)
        run->deadline_ns = t0 + run->o->duration_ns;
    for (; !rc && started < conns; started++) {
        ws[started] = (struct pg_worker){.run = run, .index = started};
        if ((rc = run_stats_new(&ws[started].stats)))
            break;
        if (pthread_create(&ws[started].thread, NULL, pg_worker_main, &ws[started])) {
            run_stats_free(ws[started].stats);
            rc = -EAGAIN;
            break;
        }
    }
    for (uint32_t i = 0; i < started; i++) {
        pthread_join(ws[i].thread, NULL);
        if (ws[i].err[0] && !err[0])
            ts_errf(err, errlen, "%s", ws[i].err);
        if (!rc)
            rc = run_stats_merge(total, ws[i].stats);
        run_stats_free(ws[i].stats);
    }
    *secs = (double)(ts_now_ns() - t0) / 1e9;
    ts_free(ws);
    return rc;
}

/* result.json in --out (or a new directory) and the summary on stdout. */
static int pg_report(const struct run_opts *o, const struct pg_run *run, struct run_stats *total,
                     double secs)
{
    struct run_summary sum;
    char dir[1024], path[1100], err[512];
    run_summary_compute(&sum, total, secs, 0, NULL);
    json_t *conf =
        json_pack("{s:s,s:s,s:I,s:o}", "target", "postgresql (redacted)", "endpoint",
                  "vector-search", "users", (json_int_t)(o->concurrency ? o->concurrency : 1),
                  "vector", run_vector_config_json(&o->vector, &run->vec));
    struct result_info info = {.config = conf, .started_wall_ns = ts_wall_ns()};
    json_t *doc = NULL;
    int rc = conf ? result_build(total, &sum, &info, &doc) : -ENOMEM;
    json_decref(conf);
    if (o->out_dir)
        snprintf(dir, sizeof(dir), "%s", o->out_dir);
    else
        outdir_default_name(dir, sizeof(dir), "run");
    snprintf(path, sizeof(path), "%s/result.json", dir);
    if (!rc && !(rc = file_mkdirs(dir, err, sizeof(err))))
        rc = result_write_file(doc, path, err, sizeof(err));
    json_decref(doc);
    if (rc) {
        fprintf(stderr, "tokenstorm run: cannot write the result: %s\n",
                err[0] ? err : ts_strerror(rc));
        return TS_EXIT_FAIL;
    }
    if (!o->quiet && !o->json)
        if (report_text_summary(stdout, total, &sum))
            fprintf(stderr, "tokenstorm run: cannot print the summary\n");
    if (!o->quiet)
        fprintf(stderr, "results: %s/\n", dir);
    return sum.completed ? TS_EXIT_OK : TS_EXIT_FAIL;
}

/* The table, column and id names: identifiers of letters, digits and '_' only. */
static bool pg_ident(const char *s)
{
    size_t n = strlen(s);
    return n >= 1 && n <= 63 &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == n;
}

int run_pg(const struct run_opts *o)
{
    struct pg_run run = {.o = o, .k = o->vector.k ? o->vector.k : 10};
    const char *table = o->vector.pg_table ? o->vector.pg_table : "items";
    const char *col = o->vector.pg_column ? o->vector.pg_column : "embedding";
    const char *id = o->vector.pg_id ? o->vector.pg_id : "id";
    char err[1024] = "";
    if (o->rate > 0 || o->stages || o->vector.api || o->scenario) {
        fprintf(stderr, "tokenstorm run: a PostgreSQL target runs closed loop only "
                        "(--concurrency), without --rate, --stages, --vector-api or a scenario\n");
        return TS_EXIT_USAGE;
    }
    if (!pg_ident(table) || !pg_ident(col) || !pg_ident(id)) {
        fprintf(stderr, "tokenstorm run: --pg-table, --pg-column and --pg-id must be 1 to 63 "
                        "letters, digits or '_'\n");
        return TS_EXIT_USAGE;
    }
    snprintf(run.sql, sizeof(run.sql), "SELECT %s FROM %s ORDER BY %s <-> $1::vector LIMIT %u", id,
             table, col, run.k);
    run.max_requests = o->requests;
    if (run_vector_prepare(&o->vector, &run.vec, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm run: %s\n", err);
        return TS_EXIT_USAGE;
    }
    struct run_stats *total = NULL;
    double secs = 0;
    err[0] = 0;
    int rc = run_stats_new(&total);
    uint32_t conns = o->concurrency ? o->concurrency : 1;
    if (!rc)
        rc = pg_load(&run, conns > RUN_PG_MAX_CONNS ? RUN_PG_MAX_CONNS : conns, total, &secs, err,
                     sizeof(err));
    int code = TS_EXIT_FAIL;
    if (err[0])
        fprintf(stderr, "tokenstorm run: %s\n", err);
    if (!rc)
        code = pg_report(o, &run, total, secs);
    run_stats_free(total);
    run_vector_release(&run.vec);
    return code;
}

#else

int run_pg(const struct run_opts *o)
{
    fprintf(stderr, "tokenstorm run: this build has no libpq (install libpq-dev, rebuild) for a "
                    "PostgreSQL target\n");
    return TS_EXIT_USAGE;
}

#endif
