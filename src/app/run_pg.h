/*
 * run_pg.h - `tokenstorm run --endpoint vector-search --target postgresql://...`:
 * vector search load on PostgreSQL with pgvector through libpq (an optional
 * dependency: without it such a target is refused).
 *
 * Closed loop only: --concurrency connections (default 1), each on its own
 * thread, each sending `SELECT <id> FROM <table> ORDER BY <column> <-> $1
 * ::vector LIMIT k` (prepared once per connection) with the query vectors of
 * app/run_vector.h in turn, until --requests or --duration. --nprobe becomes
 * `SET ivfflat.probes`, --ef-search `SET hnsw.ef_search`, on every
 * connection before the first query. Every answer's ids give recall@k
 * against the ground truth; the run's result.json and summary have the same
 * vector_search figures as an HTTP run (no timeline, no open loop). The
 * connection string is libpq's (URI or key=value); its password never
 * reaches the result.
 */
#ifndef TS_APP_RUN_PG_H
#define TS_APP_RUN_PG_H

#include <stdbool.h>

#include "app/run_job.h"

#define RUN_PG_MAX_CONNS 256

/* true when target names a PostgreSQL server (postgres:// or postgresql://). */
bool run_pg_target(const char *target);

/* Runs the load described by o against o->target; returns the exit code. */
int run_pg(const struct run_opts *o);

#endif
