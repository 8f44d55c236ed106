/*
 * sweep.h - `tokenstorm sweep`: a series of real runs at rising loads, the
 * saturation checks between them, and the sweep's findings (the knee, the
 * maximum load meeting the SLOs, the critical load of the error rate, the
 * interference between two tenants). docs/SWEEP.md is the user's manual.
 *
 * Each step is a `tokenstorm run` in a child process of the same binary
 * (cfg->exe), with the user's run options passed through unchanged, then
 * the step's own --rate or --concurrency, --out DIR/<step> and -q; its
 * summary text goes to DIR/<step>/summary.txt and its result stays in
 * DIR/<step>/result.json, which the sweep reads back. Children run in their
 * own process group (a terminal's Ctrl-C reaches only the sweep, which
 * forwards SIGINT once, so each run stops and writes what it has) and die
 * with the sweep (PR_SET_PDEATHSIG). A child that outlives its deadline gets
 * SIGINT, then SIGKILL 15 s later.
 *
 * Two layers:
 *  - sweep_step.c, pure: a result.json into a struct sweep_step with its
 *    saturation signals (sweep_step_read, sweep_step_judge), the plan of the
 *    next load (sweep_plan_next), the findings (sweep_analyse) and the
 *    sweep.json document (sweep_json_build);
 *  - sweep.c: the processes (sweep_run, sweep_stop).
 *
 * sweep.json, schema "tokenstorm.sweep/1": see docs/SWEEP.md for every key.
 */
#ifndef TS_APP_SWEEP_H
#define TS_APP_SWEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "base/err.h"

#define SWEEP_SCHEMA      "tokenstorm.sweep/1"
#define SWEEP_MAX_STEPS   64  /* steps of one sweep, probes included */
#define SWEEP_MAX_ARGS    256 /* passed-through run arguments */
#define SWEEP_MAX_SLOS    64
#define SWEEP_DIR_MAX     64           /* a step's directory name, with the NUL */
#define SWEEP_RESULT_MAX  (256u << 20) /* largest result.json read back */
#define SWEEP_TENANTS     2            /* interference: exactly two tenants */
#define SWEEP_TENANT_ARGS 64           /* options of one tenant */

enum sweep_mode {
    SWEEP_RATE = 0,        /* load = requests/s, open loop */
    SWEEP_CONCURRENCY = 1, /* load = users, closed loop */
};

/* Why a step counts as saturated (flags). */
enum sweep_sat {
    SWEEP_SAT_TTFT = 1u << 0,       /* TTFT p50 grows over the step's window */
    SWEEP_SAT_QUEUE = 1u << 1,      /* requests in flight grow over the window */
    SWEEP_SAT_THROUGHPUT = 1u << 2, /* throughput no longer follows the offered load */
    SWEEP_SAT_ERRORS = 1u << 3,     /* the error rate rose above the lower loads' */
    SWEEP_SAT_SEND_LAG = 1u << 4,   /* the client's send lag grows over the window */
};
#define SWEEP_SAT_NFLAGS 5

/* Returns the name of one flag ("ttft_growth", ...), or "?" for anything else. */
const char *sweep_sat_name(enum sweep_sat flag);

/*
 * One step: the numbers of its result.json that the sweep works with.
 * Latencies in ms; a value the run did not produce is NAN (null in JSON).
 */
struct sweep_step {
    double load;             /* the rate or concurrency it was run at */
    int seq;                 /* order in which it ran, from 1 (0: never ran) */
    char dir[SWEEP_DIR_MAX]; /* its directory, relative to the sweep's */
    double send_s;           /* in: the configured sending time after warm-up, s (0: unknown) */
    uint64_t seed;           /* the run's --seed (run.seed of its result) */
    double offered;          /* rate mode: the rate asked; concurrency: sent_rps */
    double sent_rps;         /* requests sent per second of the sending window */
    double window_s;         /* the sending window's length in the timeline (NAN: no timeline) */
    double achieved_rps;     /* completed inside the window / window_s (else the summary's) */
    double output_tps;       /* output tokens of requests ended inside it / window_s (idem) */
    double goodput_rps;      /* summary.request_goodput, NAN without --goodput */
    double ttft_p50_ms, ttft_p99_ms, tpot_p50_ms, tpot_p99_ms, e2el_p50_ms, e2el_p99_ms;
    double error_rate; /* summary.error_rate, a fraction */
    uint64_t requests, completed, failed;
    size_t nslo;         /* SLO verdicts in the result */
    bool slo_pass;       /* every verdict passed (true when there are none) */
    bool interrupted;    /* the run was stopped early; kept out of the findings */
    unsigned saturation; /* enum sweep_sat flags; 0 = not saturated */
    /* the signals behind the flags (NAN when there were too few points) */
    double ttft_slope_ms_s;  /* least-squares slope of the per-second TTFT p50 */
    double ttft_t;           /* its t statistic */
    double inflight_slope_s; /* slope of requests in flight, per second */
    double completion_ratio; /* completed / sent, one request time apart (docs/SWEEP.md) */
    double lag_slope_ms_s;   /* slope of the per-second send lag p99 */
    /* answer quality, when the result has a "quality" section */
    bool has_quality;
    double rouge_l_mean, bleu4_mean, exact_match_rate;
    /* vector search, when the result has a "vector_search" section */
    bool has_vector;
    double recall_mean, recall_p5, vector_qps;
};

/*
 * Fills *st (except load, seq, dir and send_s, which the caller sets) from a
 * tokenstorm.result/1 document: the summary's numbers, the rates over the
 * sending window of its timeline (its whole one-second points up to
 * warm-up + send_s, or up to the last one that sent anything when send_s is
 * 0: the drain after it is left out), and the in-step saturation signals (TTFT trend, send-lag trend;
 * in the rate mode also the in-flight trend and completions following
 * sends; see docs/SWEEP.md for the thresholds). mode tells how to read
 * "offered". Returns 0, or TS_PARSE with a message in err when doc is not a
 * result document or its summary lacks a number the sweep needs.
 */
TS_MUST_CHECK int sweep_step_read(const json_t *doc, enum sweep_mode mode, struct sweep_step *st,
                                  char *err, size_t errlen);

/*
 * Adds the saturation signals that compare st with the earlier steps (at
 * lower loads; others are ignored): the error rate rising above the lowest
 * seen, by more than 1 point and 3 binomial standard errors; in the
 * concurrency mode, throughput that grew by less than a tenth of the
 * relative concurrency increase over the best lower step.
 */
void sweep_step_judge(struct sweep_step *st, const struct sweep_step *earlier, size_t n,
                      enum sweep_mode mode);

/* ---- the plan -------------------------------------------------------------- */

struct sweep_plan {
    enum sweep_mode mode;
    double grid[SWEEP_MAX_STEPS]; /* loads to climb, ascending, distinct */
    size_t ngrid;
    unsigned past_saturation; /* grid loads still run above the first saturated one */
    size_t refine;            /* bisection steps after the grid (0 = none) */
    double tolerance;         /* stop bisecting when (hi - lo) <= tolerance * hi */
    double extend;            /* > 1: climb on past the grid by this factor (see below) */
};

/*
 * The next load to run given the steps so far (any order; interrupted ones
 * count as run), or false when the plan is done:
 *  1. the lowest grid load not run yet, unless it lies above the saturation
 *     onset (the lowest saturated load with no unsaturated step above it: a
 *     flag contradicted by a higher load is not the onset) and
 *     past_saturation grid steps above it already ran (the sweep stops
 *     climbing);
 *  2. then, up to `refine` times (counting every load not on the grid):
 *     when extend > 1 and no step is saturated or failed its SLOs, the
 *     highest load run times extend (the grid stopped short of the
 *     saturation point); otherwise the midpoint of the wider (relative to its
 *     upper end) of two brackets: the highest SLO-passing load below the
 *     lowest failing one (only when some step has SLO verdicts), and the
 *     highest unsaturated load below the lowest saturated one (the knee's
 *     neighbourhood). In the concurrency mode midpoints are whole numbers
 *     strictly inside the bracket. A load already run is never proposed.
 */
bool sweep_plan_next(const struct sweep_plan *plan, const struct sweep_step *steps, size_t n,
                     double *load);

/*
 * Fills plan->grid: a geometric ladder start, start*factor, ... <= max
 * (start > 0, factor > 1; at most SWEEP_MAX_STEPS loads; whole numbers in
 * the concurrency mode, duplicates dropped). Returns 0 or -EINVAL.
 */
TS_MUST_CHECK int sweep_plan_ladder(struct sweep_plan *plan, double start, double factor,
                                    double max);

/*
 * Fills plan->grid (and sets extend to 1.25) for the adaptive search from the two probes: k loads
 * spaced geometrically from lo to hi (rate mode: lo = max(sync, hi / 10),
 * capped at hi / 2, hi = the saturated throughput; concurrency mode: 1 to
 * twice the concurrency Little's law gives for the saturated throughput,
 * sat_rps * e2el_s). Returns 0 or -EINVAL (a probe measured nothing).
 */
TS_MUST_CHECK int sweep_plan_adaptive(struct sweep_plan *plan, size_t k, double sync_rps,
                                      double sat_rps, double e2el_s);

/* ---- findings and sweep.json ------------------------------------------------ */

struct sweep_findings {
    bool has_knee;
    double knee_load, knee_throughput, knee_latency_ms, knee_score;
    bool has_goodput;
    double goodput_load, goodput_rps;
    bool goodput_from_throughput;      /* no --goodput: the request throughput of that step */
    double bracket_pass, bracket_fail; /* bracket_fail NAN when no step failed */
    bool has_critical;
    double lambda_c, epsilon0, delta_lambda, r2;
    size_t critical_points;
    const char *critical_why; /* NULL: the fit is meaningful; else why not (static) */
    bool has_quality_drop;    /* ROUGE-L fell by >= 0.05 from its best at a lower load */
    double quality_from_load, quality_from, quality_to_load, quality_to;
    /* vector search: the knee of the cost of a query (1 / QPS) against recall@k */
    bool has_recall_knee;
    double recall_knee_load, recall_knee_recall, recall_knee_qps, recall_knee_p99_ms;
    double recall_knee_score;
};

enum sweep_knee_metric {
    SWEEP_KNEE_TTFT_P99 = 0,
    SWEEP_KNEE_TTFT_P50,
    SWEEP_KNEE_TPOT_P99,
    SWEEP_KNEE_E2EL_P99,
    SWEEP_KNEE_E2EL_P50,
    SWEEP_KNEE_METRIC_COUNT,
};

/* "ttft_p99_ms", ...; NULL for a bad value. */
const char *sweep_knee_metric_name(enum sweep_knee_metric m);
/* Parses "ttft_p99_ms" or its short form "ttft.p99"; 0 or -EINVAL. */
TS_MUST_CHECK int sweep_knee_metric_parse(const char *s, enum sweep_knee_metric *out);

struct sweep_analysis_cfg {
    enum sweep_knee_metric knee_metric;
    double knee_min_score; /* knee.h KNEE_MIN_SCORE */
    double epsilon0;       /* critical level, CRITICAL_EPSILON0 */
    size_t fit_min_points; /* CRITICAL_MIN_POINTS */
    bool has_slos;         /* no SLOs: no maximum goodput */
};

/*
 * The findings over the steps that were not interrupted (any order): the
 * knee of the metric against load (analysis/knee.h, Kneedle), the SLO
 * bracket (the passing load reported with its goodput, or its throughput
 * when the runs had no --goodput), the critical-load fit of the error
 * rates, a fall of ROUGE-L, and for vector-search steps the recall knee:
 * Kneedle over (recall_mean, 1 / QPS) of the steps in load order whose
 * recall rises (a step that gains no recall is left out), the point past
 * which each point of recall costs disproportionately much throughput.
 * Each part is absent when it cannot be found.
 */
void sweep_analyse(const struct sweep_step *steps, size_t n, const struct sweep_analysis_cfg *cfg,
                   struct sweep_findings *out);

struct sweep_interference {
    char victim[32], aggressor[32];
    const char *metric; /* "ttft_p99_ms", ... (static) */
    double p99_alone_ms, p99_with_ms;
    double delta; /* (with - alone) / alone */
    char dir_alone[SWEEP_DIR_MAX], dir_with[SWEEP_DIR_MAX];
};

/* What a sweep did: the input of sweep_json_build. */
struct sweep_outcome {
    enum sweep_mode mode;
    const char *vary;   /* --vary's option name (sweep.json's mode), or NULL */
    const char *plan;   /* "list", "ladder", "adaptive" or "none" */
    const char *target; /* the URL passed through, or "simulator:<profile>" */
    const char *const *slos;
    size_t nslos;
    struct sweep_step steps[SWEEP_MAX_STEPS]; /* in the order run */
    size_t nsteps;
    bool has_probes;                        /* adaptive: the two probes below ran */
    struct sweep_step baseline, saturation; /* concurrency 1; the saturation concurrency */
    struct sweep_analysis_cfg acfg;
    struct sweep_findings findings;
    struct sweep_interference interference[SWEEP_TENANTS];
    size_t ninterference;
    bool interrupted;
    uint64_t started_wall_ns;
};

/*
 * Builds sweep.json: steps sorted by load, findings, probes, interference.
 * Returns 0 and a new reference in *out (json_decref it), or -ENOMEM.
 */
TS_MUST_CHECK int sweep_json_build(const struct sweep_outcome *o, json_t **out);

/* ---- running ----------------------------------------------------------------- */

struct sweep_tenant {
    const char *name; /* label in sweep.json and the directories: [A-Za-z0-9_-], <= 31 chars */
    const char *opts; /* run options, split like a shell: blanks, '...', "...", backslash */
};

struct sweep_config {
    const char *exe; /* the tokenstorm binary to run (resolved /proc/self/exe) */
    /* --vary NAME=LIST: each step passes --NAME <load> to its run instead of
     * --rate / --concurrency (the load comes from run_args); NULL: off */
    const char *vary;
    const char *out_dir; /* created if missing */
    enum sweep_mode mode;
    const char *plan_name;  /* for sweep.json: "list", "ladder", "adaptive"; NULL = none */
    struct sweep_plan plan; /* grid etc.; ignored when adaptive (built from the probes) */
    bool adaptive;
    size_t adaptive_points;      /* grid size of the adaptive search */
    uint32_t sat_concurrency;    /* adaptive: users of the saturation probe */
    size_t max_steps;            /* runs of the load plan, probes included */
    const char *const *run_args; /* passed to every run, before the sweep's own options */
    size_t nrun_args;
    const char *const *slos; /* passed to every step as --slo */
    size_t nslos;
    const char *target; /* for sweep.json (see sweep_outcome) */
    struct sweep_analysis_cfg acfg;
    uint64_t step_timeout_ns; /* deadline of one run */
    /* interference: two tenants against target_url (a shared target) */
    const struct sweep_tenant *tenants; /* NULL or SWEEP_TENANTS of them */
    const char *shared_target;          /* --target for the tenants' runs; NULL: in run_args */
    enum sweep_knee_metric interference_metric;
    /* called after each step of the load plan and each probe (may be NULL) */
    void (*on_step)(const struct sweep_step *st, bool probe, void *arg);
    void (*on_start)(const char *what, double load, void *arg); /* before each run */
    /*
     * --ui: when set, each step of the load plan gets its own dashboard,
     * `run --ui step_ui_host:PORT` on a free port, told to on_step_ui before
     * the step starts (and 0 once it ended); and sweep.json is rewritten
     * after every step with the steps and findings so far.
     */
    const char *step_ui_host;
    void (*on_step_ui)(int port, void *arg);
    void *arg;
};

/* What sweep_run returns besides 0. */
enum sweep_failure {
    SWEEP_FAIL_USAGE = -20001, /* a run rejected its options (exit code 2) */
    SWEEP_FAIL_RUN = -20002,   /* a run failed, crashed, timed out or left no result */
};

/*
 * Runs the sweep: probes and steps (stopping when interrupted), the
 * interference runs, the findings, and writes out_dir/sweep.json (also after
 * an interruption or a failed step, with the steps done so far). *out must
 * stay valid until the caller is done with it (it is large: allocate it).
 * Returns 0 (check out->interrupted), SWEEP_FAIL_USAGE, SWEEP_FAIL_RUN, or a
 * negative errno (the directory or sweep.json could not be written), with a
 * message in err.
 */
TS_MUST_CHECK int sweep_run(const struct sweep_config *cfg, struct sweep_outcome *out, char *err,
                            size_t errlen);

/*
 * Starts argv (argv[0] the binary's path, NULL-terminated) in its own
 * process group (a terminal's Ctrl-C does not reach it: forward it with
 * kill(-pid, SIGINT)), dying with the caller (PR_SET_PDEATHSIG), with
 * stdout to stdout_path (created or truncated; NULL: inherited). Safe with
 * threads. Returns 0 and *pid, or a negative errno with a message in err.
 */
TS_MUST_CHECK int sweep_spawn(const char *const *argv, const char *stdout_path, pid_t *pid,
                              char *err, size_t errlen);

/* Asks a running sweep to stop: async-signal-safe; the children get SIGINT. */
void sweep_stop(void);

/*
 * The value of option opt ("--duration") in argv[0..n), as "--opt VALUE" or
 * "--opt=VALUE"; the last one wins. NULL when absent. Points into argv.
 */
const char *sweep_args_find(const char *const *argv, size_t n, const char *opt);

/*
 * The --seed of step seq (from 1, in the order run, probes included): a mix
 * of seq and the --seed in argv[0..n) (1 when absent), below 2^53. Distinct
 * steps get distinct seeds; the same sweep gets the same ones again.
 */
uint64_t sweep_step_seed(const char *const *argv, size_t n, int seq);

/*
 * How long a `tokenstorm run` with these arguments may take: 1.5 times its
 * warm-up + duration + drain (run's defaults where absent: 0, 20 s, 30 s)
 * plus 30 s; 30 minutes when it has --requests but no --duration.
 */
uint64_t sweep_run_deadline_ns(const char *const *argv, size_t n);

/*
 * Splits opts into at most max words (shell-like: blanks separate; '...'
 * keeps everything literally; "..." and bare words take backslash escapes).
 * The words point into *storage (ts_free it; set even on error).
 * Returns the count, or -EINVAL (unbalanced quote, too many words), -ENOMEM.
 */
TS_MUST_CHECK int sweep_split_args(const char *opts, char **words, size_t max, char **storage);

#endif
