/*
 * chaos_run.h - `tokenstorm chaos EXPERIMENT.yaml` as a library call: the
 * run of an experiment (the file's model, the fault calls and the
 * judgement are app/experiment.h). docs/CHAOS.md "Experiments" is the
 * user's manual.
 *
 * The run, in order:
 *  - each distinct proxy of the phases is asked for its own forward delay
 *    (experiment_proxy_delay; a proxy that does not answer is warned about
 *    and left out of "proxies");
 *  - the load is a child `tokenstorm run` of the same binary (the file's
 *    load arguments, then --save-requests --out DIR/run -q), in its own
 *    process group (sweep_spawn), its stdout in DIR/run.txt;
 *  - the phases are applied and removed at their offsets from the start of
 *    the load, with a line on stderr for each (unless quiet);
 *  - the rollbacks always run (also after an error or an interruption),
 *    before the load is waited for: every applied phase's fault is deleted,
 *    then the file's own rollback actions;
 *  - the load is waited for until its deadline (sweep_run_deadline_ns), or
 *    for 15 s after it was asked to stop (SIGINT to its group, then
 *    SIGKILL);
 *  - the judgement of DIR/run/requests.jsonl; the fault windows are added
 *    to DIR/run/result.json ("faults"); DIR/experiment.json (schema
 *    "tokenstorm.chaos/1") gets the verdict, the windows, the rollbacks and
 *    each proxy's forward delay; the report goes to stdout.
 *
 * With ui_host, the live page is served from before the load starts until
 * a second after the verdict.
 * While it runs, SIGINT and SIGTERM of this process stop the phases and the
 * load (the previous handlers are restored before chaos_run returns).
 * Blocking: it polls the child every 10 ms on the caller's thread.
 */
#ifndef TS_APP_CHAOS_RUN_H
#define TS_APP_CHAOS_RUN_H

#include <stdbool.h>

struct chaos_opts {
    const char *file;    /* the experiment file (YAML or JSON); required */
    const char *out_dir; /* results: DIR/experiment.json, DIR/run/, DIR/run.txt; NULL:
                          * tokenstorm-results/<UTC time>Z-chaos */
    bool force;          /* clear the results already in out_dir (report/outdir.h) */
    bool check;          /* only validate the file and print a one-line summary */
    bool quiet;          /* print only the verdict (and errors) */
    /* --ui HOST:PORT: a live page (app/live_host.h): the phases as they are
     * applied and removed, the load's own dashboard (`run --ui` on the same
     * host, a free port), the windows and the verdict once judged; a stop
     * button that stops the experiment as Ctrl-C does. ui_token enforced
     * (net/ctlauth.h; NULL: none). NULL ui_host: no page. */
    const char *ui_host;
    int ui_port;
    const char *ui_token;
};

/*
 * Loads o->file and, unless o->check, runs it. Messages go to stderr
 * ("tokenstorm chaos: ..."), the report and the verdict to stdout. Returns
 * the exit code: 0 steady, deviated or recovered (or a file that checks);
 * 1 not recovered, or not steady before the faults; 2 a bad file; 3 the
 * experiment could not run (a fault not applied, the load failed or ended
 * early, results not written); 130 interrupted. experiment.json is written
 * whenever the load was started.
 */
int chaos_run(const struct chaos_opts *o);

#endif
