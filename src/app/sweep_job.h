/*
 * sweep_job.h - `tokenstorm sweep` as a library call: the options the
 * command parsed and checked, and the job that carries them out. The
 * command file (cmd/cmd_sweep.c) turns argv into struct sweep_job_opts;
 * sweep_job_run() does the rest around app/sweep.h's sweep_run():
 *  - names the sweep directory (--out, or
 *    tokenstorm-results/<UTC time>Z-sweep) and finds its own binary for the
 *    steps (/proc/self/exe);
 *  - for --interference without a --target in the run options, starts one
 *    built-in simulator on 127.0.0.1 (the runs' --sim-profile and --sim-set)
 *    that both tenants' runs share;
 *  - prints "sweep: running ..." lines on stderr before each run (unless
 *    quiet or json) and a table row on stdout after each step (unless json);
 *  - turns SIGINT and SIGTERM into sweep_stop() while it runs (the previous
 *    handlers are put back);
 *  - with ui_host, serves the live page while it runs;
 *  - ends with the findings on stdout, or sweep.json with json.
 * Errors go to stderr prefixed "tokenstorm sweep: ".
 */
#ifndef TS_APP_SWEEP_JOB_H
#define TS_APP_SWEEP_JOB_H

#include <stdbool.h>

#include "app/sweep.h"

struct sweep_job_opts {
    /*
     * The sweep as app/sweep.h runs it: plan_name, mode, plan (mode, grid
     * of a list or ladder, refine, tolerance, past_saturation), adaptive,
     * adaptive_points, sat_concurrency, max_steps, run_args, slos,
     * step_timeout_ns, acfg, tenants and interference_metric. Leave exe,
     * out_dir, target, shared_target and the callbacks zero:
     * sweep_job_run() sets them.
     */
    struct sweep_config cfg;
    const char *out_dir; /* --out, or NULL for the default name */
    bool force;          /* --force: clear the results already in out_dir (report/outdir.h) */
    bool json;           /* sweep.json on stdout instead of the table and findings */
    bool quiet;          /* no progress lines on stderr */
    /* --ui HOST:PORT: the sweep's live page (app/live_host.h): the sweep
     * section of the steps so far and the running step's own dashboard
     * (each step a `run --ui` on ui_host); ui_token enforced (net/ctlauth.h),
     * NULL for none; a stop button that stops the sweep as Ctrl-C does. */
    const char *ui_host; /* NULL: no page */
    int ui_port;
    const char *ui_token;
};

/*
 * Carries out the sweep; o and everything it points to must stay valid
 * until it returns. Returns the process exit code: TS_EXIT_OK,
 * TS_EXIT_SLO (SLOs were given and no step met them), TS_EXIT_USAGE (a
 * run rejected its options, or the shared simulator's profile is wrong),
 * TS_EXIT_FAIL (a run failed, or the sweep could not start or write
 * sweep.json), TS_EXIT_INTERRUPTED (sweep.json holds the steps so far).
 */
int sweep_job_run(const struct sweep_job_opts *o);

#endif
