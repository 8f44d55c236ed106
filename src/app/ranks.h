/*
 * ranks.h - one run spread over several processes: deterministic shards of
 * the load (--shard i/N, or the rank of an MPI job), and the MPI glue that
 * starts the ranks together, shows one progress display and merges their
 * results exactly on rank 0. docs/DISTRIBUTED.md is the user's guide.
 *
 * Shards and --start-at are the engine's (load/shard.h); this module is the
 * part that composes whole processes.
 *
 * MPI (only in a build with -Dmpi=enabled). ranks_group_join() joins the job
 * when the process was started by an MPI launcher (mpirun/mpiexec, or srun
 * with PMI/PMIx): rank r of N then runs shard r/N. All MPI calls are made
 * from the thread that joined (MPI_THREAD_FUNNELED): the coordinator's; the
 * load threads never wait on MPI.
 *   - start: ranks_group_barrier() right before the schedule's time 0, so
 *     the ranks' time 0 differ by the barrier's exit skew only;
 *   - progress: once a second each rank > 0 sends its counters to rank 0
 *     without waiting (MPI_Isend; a send still pending skips a second), and
 *     rank 0 adds what arrived to its own for the display (the counters are
 *     at most a second old; the percentiles shown are approximations:
 *     request-weighted mean of the p50s, largest p99);
 *   - end: ranks_group_merge() gathers every rank's measurements to rank 0
 *     (histograms in their HdrHistogram encoding, as result.json holds
 *     them) and adds them: the merged histograms and counters are exactly
 *     those of one process that had sent every request.
 * Point-to-point progress (not a collective per tick) because ranks end at
 * different times and so tick a different number of times; collectives
 * must be matched one to one.
 */
#ifndef TS_APP_RANKS_H
#define TS_APP_RANKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "load/shard.h"

/* ---- merging the results of several processes ---- */

/*
 * One process's result as JSON text (free() it, it is jansson's): the
 * sections of result.json that result_read_stats() reads (histograms and
 * counters) plus "dist": {sent, duration_s, end_cut, interrupted, timeline:
 * [[t_s, sent, completed, errors, in_flight, output_tokens, chunks,
 * ttft_p50_ms, ttft_p99_ms, e2el_p50_ms, lag_p99_ms], ...]}. NULL when out
 * of memory.
 */
char *ranks_result_encode(const struct runner_result *res, const struct goodput_cfg *goodput);

/* Adds encoded results into one runner_result. */
struct ranks_merger {
    struct runner_result *into;
    double *w_ttft, *w_e2el; /* per point: sum of p50 x completed */
    size_t wlen;
};

/* Starts a merge into `into` (a result of runner_run, kept as the base).
 * 0 or -ENOMEM. */
TS_MUST_CHECK int ranks_merger_init(struct ranks_merger *m, struct runner_result *into);
/*
 * Adds one encoded result: histograms and counters exactly
 * (run_stats_merge), timelines point by point (counts summed, the p50s
 * weighted by completed requests, the p99s the largest), sent summed,
 * duration the longest, end_cut and interrupted or-ed. 0, TS_PARSE or
 * -ENOMEM with a message; on error the base may hold part of the result.
 */
TS_MUST_CHECK int ranks_merger_add(struct ranks_merger *m, const char *text, size_t len, char *err,
                                   size_t errlen);
/* Finishes the timeline's p50s and the peak token rate (from the merged
 * timeline, intervals after warmup_s), and releases m. */
void ranks_merger_finish(struct ranks_merger *m, double warmup_s);
/* Releases m without finishing (after an error). Safe twice. */
void ranks_merger_release(struct ranks_merger *m);

/* ---- MPI ---- */

/* true if this build has MPI (meson -Dmpi=enabled). */
bool ranks_mpi_built(void);

/*
 * Whether an MPI launcher started this process, from its environment:
 * Open MPI (OMPI_COMM_WORLD_SIZE), MPICH/Hydra and srun --mpi=pmi2
 * (PMI_SIZE), PMIx (PMIX_RANK) or srun (SLURM_STEP_NUM_TASKS). *size gets
 * the number of processes (0 if the launcher does not say before
 * MPI_Init). TOKENSTORM_MPI=0 makes this false, TOKENSTORM_MPI=1 true.
 */
bool ranks_launched(uint32_t *size);

/*
 * Joins the MPI job if ranks_launched() with a size other than 1. Returns 0
 * and *out = NULL for a single process (no launcher), 0 and a group, or
 * -ENOTSUP (launched by MPI but built without it: the message says to build
 * with -Dmpi=enabled or to use --shard) or -ENOMEM with a message. Call once,
 * early, from the thread that will run the coordinator.
 */
TS_MUST_CHECK int ranks_group_join(struct ranks_group **out, int *argc, char ***argv, char *err,
                                   size_t errlen);
/* 0 and 1 for NULL (a single process). */
uint32_t ranks_group_rank(const struct ranks_group *g);
uint32_t ranks_group_size(const struct ranks_group *g);
/* This rank's shard (the whole run for NULL). */
struct shard ranks_group_shard(const struct ranks_group *g);

/* Copies rank 0's len bytes at data to every rank (a collective: every rank
 * calls it at the same point). No-op for NULL. */
void ranks_group_bcast(struct ranks_group *g, void *data, size_t len);
/* Waits for every rank (a collective). arg is the group (or NULL); the
 * signature fits runner_config.before_start. */
void ranks_group_barrier(void *arg);

/*
 * Called from the coordinator's once-a-second tick with this rank's
 * progress p. Rank > 0: posts p to rank 0 and returns false (show nothing).
 * Rank 0: fills *agg (and *agg_last, which agg->last then points to) with
 * the sum over the ranks' newest reports and its own, and returns true.
 * Never blocks.
 */
bool ranks_group_progress(struct ranks_group *g, const struct runner_progress *p,
                          struct runner_progress *agg, struct runner_point *agg_last);

/*
 * Collective, once, after the run: gathers every rank's result to rank 0
 * and merges it into rank 0's *res (stats added exactly; timelines added
 * second by second -- see above for the percentiles; sent summed; duration
 * the longest; end_cut and interrupted if any rank's). Pass res = NULL on a
 * rank whose run failed. warmup_s and goodput are the run's. Returns 0;
 * -ECANCELED on rank 0 when another rank's run failed (err names it);
 * -ENOMEM or TS_PARSE with a message. Ranks > 0 keep their res as it was.
 */
TS_MUST_CHECK int ranks_group_merge(struct ranks_group *g, struct runner_result *res,
                                    double warmup_s, const struct goodput_cfg *goodput, char *err,
                                    size_t errlen);

/*
 * Leaves the job and frees g (NULL is a no-op): MPI_Finalize after a merge;
 * without one (this rank failed before it), MPI_Abort of the whole job with
 * exit_code, so that no other rank waits forever in a collective.
 */
void ranks_group_leave(struct ranks_group *g, int exit_code);

#endif
