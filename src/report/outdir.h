/*
 * outdir.h - a result directory owned by one process: `tokenstorm run`,
 * `sweep` and `chaos` claim their --out before they send anything.
 *
 * Claiming DIR:
 *  - creates it (and its parents, mode 0755) when it does not exist, and
 *    refuses a path that is not a directory or not writable;
 *  - takes an exclusive flock() on DIR/.tokenstorm.lock (created, mode 0644;
 *    the holder's pid written into it; never removed) for as long as the
 *    struct outdir is held. The descriptor is close-on-exec, so child
 *    processes (a sweep's steps, a chaos experiment's load) do not inherit
 *    the lock; they claim their own subdirectories. The kernel drops the
 *    lock when the process ends, however it ends (SIGKILL included);
 *  - refuses a DIR that already holds results (any owned entry below),
 *    unless OUTDIR_FORCE, which first removes exactly the owned entries:
 *
 *      files       result.json, requests.jsonl, latency.hlog, sweep.json,
 *                  experiment.json, run.txt, and the ".tmp" of each
 *      directories rank-N, step-*, interference-*, run: inside them the
 *                  same files plus summary.txt and .tokenstorm.lock, and
 *                  the same directories (at most OUTDIR_DEPTH_MAX deep);
 *                  a directory is removed only when nothing else is left
 *                  in it (it is kept, and named in the note, otherwise).
 *
 *    Any other file (a user's notes, report.html, ...) is never touched. A
 *    subdirectory whose own lock is held by a live process is not cleared:
 *    the claim fails with -EBUSY.
 */
#ifndef TS_REPORT_OUTDIR_H
#define TS_REPORT_OUTDIR_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

#define OUTDIR_LOCK_NAME ".tokenstorm.lock"
#define OUTDIR_PATH_MAX  1024
#define OUTDIR_DEPTH_MAX 4
#define OUTDIR_NOTE_MAX  512
#define OUTDIR_SCAN_MAX  100000 /* entries looked at in one directory */

enum outdir_flags {
    OUTDIR_FORCE = 1 << 0, /* clear the owned entries instead of refusing */
};

struct outdir {
    int lock_fd;                /* -1 when nothing is held */
    char path[OUTDIR_PATH_MAX]; /* the directory */
    size_t removed;             /* OUTDIR_FORCE: files and directories removed */
    char note[OUTDIR_NOTE_MAX]; /* OUTDIR_FORCE: "result.json, step-01/ ..." (capped) */
};

/* An outdir that holds nothing (outdir_release is then a no-op). */
void outdir_init(struct outdir *od);

/*
 * Claims path as described above. Returns 0 with the lock held in od, or,
 * with the reason (naming path) in err and nothing held:
 *   -EEXIST       path holds results (err names the first few) and no OUTDIR_FORCE;
 *   -EBUSY        another process holds the lock of path or of an owned subdirectory
 *                 (err names its pid when it wrote one);
 *   -ENOTDIR      path (or a parent) is not a directory;
 *   -ENAMETOOLONG, or the errno of mkdir/open/flock/unlink (-EACCES, -EROFS, ...).
 */
TS_MUST_CHECK int outdir_claim(struct outdir *od, const char *path, unsigned flags, char *err,
                               size_t errlen);

/* Drops the lock (the lock file stays). */
void outdir_release(struct outdir *od);

/*
 * Whether another process holds the lock of dir right now: 1 (with its pid
 * in *pid when it wrote one, else 0), 0 (no lock file, or nobody holds it),
 * or a negative errno when the lock file cannot be opened.
 */
int outdir_busy(const char *dir, long *pid);

/*
 * The default result directory of a command: "tokenstorm-results/<UTC
 * time>Z-<kind>" ("tokenstorm-results/2026-11-29T17-31-48Z-run"; ':' made
 * '-' for every file system), relative to the working directory.
 */
void outdir_default_name(char *buf, size_t n, const char *kind);

#endif
