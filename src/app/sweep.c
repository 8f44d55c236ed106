/*
 * sweep.c - the processes of a sweep (sweep.h): every step is a child
 * `tokenstorm run`; this file starts them, waits for them with a deadline,
 * passes Ctrl-C on, reads their results back and writes sweep.json.
 */
#include "app/sweep.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/clock.h"
#include "base/file.h"
#include "base/rng.h"
#include "base/units.h"
#include "app/live_host.h"
#include "report/result.h"

#define JOB_ARGS     (SWEEP_MAX_ARGS + 2 * SWEEP_MAX_SLOS + SWEEP_TENANT_ARGS + 16)
#define KILL_GRACE   (15 * TS_NS_PER_S) /* SIGINT, then this long before SIGKILL */
#define POLL_NS      (20 * TS_NS_PER_MS)
#define RUN_DURATION (20 * TS_NS_PER_S) /* tokenstorm run's defaults */
#define RUN_DRAIN    (30 * TS_NS_PER_S)
#define NO_DEADLINE  (30 * 60 * TS_NS_PER_S) /* --requests without --duration */

static volatile sig_atomic_t stop_requested;

void sweep_stop(void)
{
    stop_requested = 1;
}

/* ---- arguments ------------------------------------------------------------------ */

int sweep_split_args(const char *opts, char **words, size_t max, char **storage)
{
    size_t len = strlen(opts), n = 0;
    char *out = ts_malloc(len + 1);
    const char *p = opts;

    *storage = out;
    if (!out)
        return -ENOMEM;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == '\n')
            p++;
        if (!*p)
            break;
        if (n == max)
            return -EINVAL;
        words[n++] = out;
        while (*p && *p != ' ' && *p != '\t' && *p != '\n') {
            if (*p == '\'') {
                const char *end = strchr(p + 1, '\'');
                if (!end)
                    return -EINVAL;
                memcpy(out, p + 1, (size_t)(end - p - 1));
                out += end - p - 1;
                p = end + 1;
            } else if (*p == '"') {
                for (p++; *p && *p != '"'; p++) {
                    if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
                        p++;
                    *out++ = *p;
                }
                if (*p != '"')
                    return -EINVAL;
                p++;
            } else {
                if (*p == '\\' && p[1])
                    p++;
                *out++ = *p++;
            }
        }
        *out++ = '\0';
    }
    return (int)n;
}

const char *sweep_args_find(const char *const *argv, size_t n, const char *opt)
{
    size_t ol = strlen(opt);
    const char *found = NULL;

    for (size_t i = 0; i < n; i++) {
        if (!strcmp(argv[i], opt) && i + 1 < n)
            found = argv[++i];
        else if (!strncmp(argv[i], opt, ol) && argv[i][ol] == '=')
            found = argv[i] + ol + 1;
    }
    return found;
}

uint64_t sweep_run_deadline_ns(const char *const *argv, size_t n)
{
    const char *d = sweep_args_find(argv, n, "--duration");
    const char *w = sweep_args_find(argv, n, "--warmup");
    const char *r = sweep_args_find(argv, n, "--drain");
    uint64_t duration = RUN_DURATION, warmup = 0, drain = RUN_DRAIN;

    if (d && units_parse_duration_ns(d, &duration))
        duration = RUN_DURATION;
    else if (!d && sweep_args_find(argv, n, "--requests"))
        return NO_DEADLINE;
    if (w && units_parse_duration_ns(w, &warmup))
        warmup = 0;
    if (r && units_parse_duration_ns(r, &drain))
        drain = RUN_DRAIN;
    double total = 1.5 * ((double)duration + (double)warmup + (double)drain) + 30e9;
    return total > 1e18 ? (uint64_t)1e18 : (uint64_t)total;
}

/* ---- jobs: one child run each ------------------------------------------------------ */

struct job {
    const char *argv[JOB_ARGS];
    size_t argc;
    char dir[SWEEP_DIR_MAX];
    char path[PATH_MAX];
    char num[32];
    char vary_opt[40]; /* --vary: "--NAME" */
    char ui[80];       /* --ui: "HOST:PORT" of the step's own dashboard */
    char *storage;     /* a tenant's split options */
    pid_t pid;
    int status;
    bool started, done, forwarded, timed_out;
};

static void job_init(struct job *j, const struct sweep_config *cfg, const char *dir)
{
    memset(j, 0, sizeof(*j));
    snprintf(j->dir, sizeof(j->dir), "%s", dir);
    snprintf(j->path, sizeof(j->path), "%s/%s", cfg->out_dir, dir);
    j->argv[j->argc++] = cfg->exe;
    j->argv[j->argc++] = "run";
    for (size_t i = 0; i < cfg->nrun_args; i++)
        j->argv[j->argc++] = cfg->run_args[i];
}

static void job_add(struct job *j, const char *a)
{
    if (j->argc < JOB_ARGS - 4)
        j->argv[j->argc++] = a;
}

static void job_finish(struct job *j)
{
    j->argv[j->argc++] = "--out";
    j->argv[j->argc++] = j->path;
    j->argv[j->argc++] = "-q";
    j->argv[j->argc] = NULL;
}

static void job_release(struct job *j)
{
    ts_free(j->storage);
    j->storage = NULL;
}

int sweep_spawn(const char *const *argv, const char *stdout_path, pid_t *pid_out, char *err,
                size_t errlen)
{
    sigset_t all, old;
    pid_t parent = getpid(), pid;
    int fd = -1, rc;

    if (stdout_path) {
        fd = open(stdout_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            rc = -errno;
            ts_errf(err, errlen, "cannot write %.200s: %s", stdout_path, strerror(errno));
            return rc;
        }
    }
    /* between fork and exec only async-signal-safe calls: the caller may have threads */
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(127);
        if (fd >= 0 && dup2(fd, STDOUT_FILENO) < 0)
            _exit(127);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    rc = pid < 0 ? -errno : 0;
    if (pid > 0)
        setpgid(pid, pid); /* also here: no race with the first kill(-pid) */
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (fd >= 0)
        close(fd);
    if (rc) {
        ts_errf(err, errlen, "cannot start a run: %s", strerror(-rc));
        return rc;
    }
    *pid_out = pid;
    return 0;
}

/* Starts j in its own process group with stdout to DIR/summary.txt. */
static int job_spawn(struct job *j, char *err, size_t errlen)
{
    char out[PATH_MAX + 16];
    int rc;

    if ((rc = file_mkdirs(j->path, err, errlen)) < 0)
        return rc;
    snprintf(out, sizeof(out), "%s/summary.txt", j->path);
    if ((rc = sweep_spawn(j->argv, out, &j->pid, err, errlen)))
        return rc;
    j->started = true;
    return 0;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / TS_NS_PER_S), (long)(ns % TS_NS_PER_S)};
    nanosleep(&ts, NULL); /* an early wake-up by a signal is fine */
}

/* Waits for every started job: forwards a stop once, and enforces the deadline. */
static void jobs_wait(struct job *jobs, size_t n, uint64_t deadline_ns)
{
    uint64_t kill_at = 0;

    for (;;) {
        bool all = true;
        for (size_t i = 0; i < n; i++) {
            struct job *j = &jobs[i];
            if (!j->started || j->done)
                continue;
            int st;
            pid_t r = waitpid(j->pid, &st, WNOHANG);
            if (r == j->pid || (r < 0 && errno != EINTR)) {
                j->done = true;
                j->status = r == j->pid ? st : -1;
            } else {
                all = false;
            }
        }
        if (all)
            return;
        uint64_t now = ts_now_ns();
        for (size_t i = 0; i < n; i++) {
            struct job *j = &jobs[i];
            if (!j->started || j->done)
                continue;
            if ((stop_requested || now >= deadline_ns) && !j->forwarded) {
                kill(-j->pid, SIGINT);
                j->forwarded = true;
                j->timed_out = !stop_requested;
                if (!kill_at)
                    kill_at = now + KILL_GRACE;
            } else if (kill_at && now >= kill_at) {
                kill(-j->pid, SIGKILL);
            }
        }
        sleep_ns(POLL_NS);
    }
}

/* Reads DIR/result.json of a finished job into *st. */
static int job_read(const struct job *j, enum sweep_mode mode, struct sweep_step *st, char *err,
                    size_t errlen)
{
    char path[PATH_MAX + 16], msg[256];
    char *data = NULL;
    size_t len;
    json_error_t jerr;
    json_t *doc;
    int rc;

    snprintf(path, sizeof(path), "%s/result.json", j->path);
    if ((rc = file_read_all(path, SWEEP_RESULT_MAX, &data, &len, err, errlen)) < 0)
        return rc;
    doc = json_loadb(data, len, 0, &jerr);
    ts_free(data);
    if (!doc) {
        ts_errf(err, errlen, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
        return TS_PARSE;
    }
    rc = sweep_step_read(doc, mode, st, msg, sizeof(msg));
    json_decref(doc);
    if (rc)
        ts_errf(err, errlen, "%s: %s", path, msg);
    snprintf(st->dir, sizeof(st->dir), "%s", j->dir);
    return rc;
}

/*
 * Runs jobs[0..n) at once and reads their results into steps[0..n).
 * Returns 0 (a job stopped by the sweep's stop has interrupted set),
 * SWEEP_FAIL_USAGE, SWEEP_FAIL_RUN or a negative errno, with err.
 */
static int jobs_run(const struct sweep_config *cfg, struct job *jobs, size_t n,
                    struct sweep_step *steps, char *err, size_t errlen)
{
    uint64_t deadline = 0, now = ts_now_ns();
    int rc = 0;

    for (size_t i = 0; i < n; i++) {
        job_finish(&jobs[i]);
        uint64_t d = cfg->step_timeout_ns
                         ? cfg->step_timeout_ns
                         : sweep_run_deadline_ns(jobs[i].argv + 2, jobs[i].argc - 2);
        deadline = d > deadline ? d : deadline;
    }
    deadline += now;
    for (size_t i = 0; i < n && !rc; i++)
        rc = job_spawn(&jobs[i], err, errlen);
    if (rc) { /* do not leave the others running to their end */
        for (size_t i = 0; i < n; i++) {
            if (jobs[i].started) {
                kill(-jobs[i].pid, SIGINT);
                jobs[i].forwarded = true;
            }
        }
    }
    jobs_wait(jobs, n, deadline);
    if (rc)
        return rc;
    for (size_t i = 0; i < n && !rc; i++) {
        struct job *j = &jobs[i];
        int st = j->status, code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        if (j->timed_out) {
            ts_errf(err, errlen, "%s: the run did not finish in time (see --step-timeout)", j->dir);
            return SWEEP_FAIL_RUN;
        }
        if (j->status == -1 || code == 127 || (code < 0 && !stop_requested) ||
            (code > 3 && code != 130 && code != 143)) {
            if (code == 127)
                ts_errf(err, errlen, "%s: could not execute %s", j->dir, j->argv[0]);
            else if (j->status == -1 || !WIFSIGNALED(st))
                ts_errf(err, errlen, "%s: the run failed (exit code %d)", j->dir, code);
            else
                ts_errf(err, errlen, "%s: the run died of signal %d", j->dir, WTERMSIG(st));
            return SWEEP_FAIL_RUN;
        }
        if (code == 2) {
            ts_errf(err, errlen, "%s: the run rejected its options (see above)", j->dir);
            return SWEEP_FAIL_USAGE;
        }
        steps[i].interrupted = code == 130 || code == 143 || code < 0;
        rc = job_read(j, cfg->mode, &steps[i], err, errlen);
        if (code == 3) { /* no request succeeded: a step that says so, when it has a result */
            if (rc) {
                ts_errf(err, errlen, "%s: the run failed (exit code 3)", j->dir);
                return SWEEP_FAIL_RUN;
            }
            ts_warn("%s: no request succeeded at this load", j->dir);
            continue;
        }
        if (rc && steps[i].interrupted) {
            steps[i].dir[0] = '\0'; /* stopped before it had a result: nothing to keep */
            return 0;
        }
        if (rc)
            return SWEEP_FAIL_RUN;
    }
    return 0;
}

/* ---- the sweep ------------------------------------------------------------------------ */

static void fmt_load(char *out, size_t n, double v)
{
    snprintf(out, n, "%.6g", v);
}

/*
 * The seed of step seq: every step gets its own, derived from the --seed
 * passed through (run's default 1), so the steps' Poisson schedules are not
 * one shape scaled by the rate. Below 2^53, so JSON carries it exactly.
 */
uint64_t sweep_step_seed(const char *const *argv, size_t n, int seq)
{
    const char *s = sweep_args_find(argv, n, "--seed");
    uint64_t base = 1;
    char *end;

    if (s && *s) {
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (!errno && !*end)
            base = v;
    }
    return rng_mix64(base + (uint64_t)seq * 0x9E3779B97F4A7C15ull) & ((1ull << 53) - 1);
}

/* The sending time after warm-up of a run with these arguments, s; 0 when unknown. */
static double send_seconds(const char *const *argv, size_t n)
{
    const char *d = sweep_args_find(argv, n, "--duration");
    uint64_t ns = RUN_DURATION;

    if (d ? units_parse_duration_ns(d, &ns) != 0 : sweep_args_find(argv, n, "--requests") != NULL)
        return 0;
    return (double)ns / 1e9;
}

/* One run of the load plan (or a probe) at `load`, as --rate or --concurrency. */
static int run_step(const struct sweep_config *cfg, struct sweep_outcome *o, int seq,
                    enum sweep_mode mode, double load, bool probe, const char *label,
                    struct sweep_step *st, char *err, size_t errlen)
{
    struct job *j = ts_malloc(sizeof(*j));
    char dir[SWEEP_DIR_MAX], l[32], seed[24];
    int rc;

    if (!j) {
        ts_errf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    fmt_load(l, sizeof(l), load);
    snprintf(dir, sizeof(dir), "step-%02d-%s%s%s", seq, label, probe ? "" : "-", l);
    job_init(j, cfg, dir);
    for (size_t i = 0; i < cfg->nslos; i++) {
        job_add(j, "--slo");
        job_add(j, cfg->slos[i]);
    }
    memcpy(j->num, l, sizeof(l));
    if (cfg->vary && !probe) {
        snprintf(j->vary_opt, sizeof(j->vary_opt), "--%s", cfg->vary);
        job_add(j, j->vary_opt);
    } else {
        job_add(j, mode == SWEEP_RATE ? "--rate" : "--concurrency");
    }
    job_add(j, j->num);
    snprintf(seed, sizeof(seed), "%llu",
             (unsigned long long)sweep_step_seed(cfg->run_args, cfg->nrun_args, seq));
    job_add(j, "--seed");
    job_add(j, seed);
    int ui_port = cfg->step_ui_host ? live_host_free_port(cfg->step_ui_host) : 0;
    if (ui_port) {
        bool v6 = strchr(cfg->step_ui_host, ':') != NULL;
        snprintf(j->ui, sizeof(j->ui), "%s%s%s:%d", v6 ? "[" : "", cfg->step_ui_host, v6 ? "]" : "",
                 ui_port);
        job_add(j, "--ui");
        job_add(j, j->ui);
    }
    if (cfg->on_start)
        cfg->on_start(label, load, cfg->arg);
    if (cfg->on_step_ui && ui_port)
        cfg->on_step_ui(ui_port, cfg->arg);
    memset(st, 0, sizeof(*st));
    st->send_s = send_seconds(cfg->run_args, cfg->nrun_args);
    rc = jobs_run(cfg, j, 1, st, err, errlen);
    if (cfg->on_step_ui && ui_port)
        cfg->on_step_ui(0, cfg->arg);
    st->load = load;
    st->seq = seq;
    if (!rc && st->interrupted)
        o->interrupted = true;
    job_release(j);
    ts_free(j);
    return rc;
}

/* The adaptive search's two probes; fills cfg's plan grid into *plan. */
static int run_probes(const struct sweep_config *cfg, struct sweep_outcome *o,
                      struct sweep_plan *plan, int *seq, char *err, size_t errlen)
{
    int rc;

    rc = run_step(cfg, o, ++*seq, SWEEP_CONCURRENCY, 1, true, "baseline-c", &o->baseline, err,
                  errlen);
    if (rc || o->interrupted)
        return rc;
    if (cfg->on_step)
        cfg->on_step(&o->baseline, true, cfg->arg);
    if (cfg->mode == SWEEP_CONCURRENCY) {
        o->steps[o->nsteps++] = o->baseline; /* c = 1 is also the curve's first point */
    }
    rc = run_step(cfg, o, ++*seq, SWEEP_CONCURRENCY, cfg->sat_concurrency, true, "saturation-c",
                  &o->saturation, err, errlen);
    if (rc || o->interrupted)
        return rc;
    o->has_probes = true;
    if (cfg->on_step)
        cfg->on_step(&o->saturation, true, cfg->arg);
    if (sweep_plan_adaptive(plan, cfg->adaptive_points, o->baseline.achieved_rps,
                            o->saturation.achieved_rps, o->baseline.e2el_p50_ms / 1000)) {
        ts_errf(err, errlen,
                "the probes measured no throughput (baseline %.3g req/s, saturated "
                "%.3g req/s): nothing to place the loads by",
                o->baseline.achieved_rps, o->saturation.achieved_rps);
        return SWEEP_FAIL_RUN;
    }
    return 0;
}

static void write_partial(const struct sweep_config *cfg, struct sweep_outcome *o);

static int run_plan(const struct sweep_config *cfg, struct sweep_outcome *o, char *err,
                    size_t errlen)
{
    struct sweep_plan plan = cfg->plan;
    const char *label = cfg->vary ? cfg->vary : cfg->mode == SWEEP_RATE ? "rate" : "concurrency";
    size_t runs = 0;
    int seq = 0, rc = 0;
    double load;

    plan.mode = cfg->mode;
    if (cfg->adaptive) {
        rc = run_probes(cfg, o, &plan, &seq, err, errlen);
        if (rc || o->interrupted)
            return rc;
        runs = 2;
    }
    while (!stop_requested && runs < cfg->max_steps && o->nsteps < SWEEP_MAX_STEPS &&
           sweep_plan_next(&plan, o->steps, o->nsteps, &load)) {
        struct sweep_step *st = &o->steps[o->nsteps];
        rc = run_step(cfg, o, ++seq, cfg->mode, load, false, label, st, err, errlen);
        runs++;
        if (rc)
            return rc;
        if (st->dir[0] == '\0')
            break; /* interrupted before it had a result */
        o->nsteps++;
        sweep_step_judge(st, o->steps, o->nsteps - 1, cfg->mode);
        write_partial(cfg, o);
        if (cfg->on_step)
            cfg->on_step(st, false, cfg->arg);
        if (o->interrupted)
            break;
    }
    return 0;
}

static int write_json(const struct sweep_outcome *o, const char *dir, char *err, size_t errlen);

/* --ui: sweep.json with the steps and findings so far, after each step. */
static void write_partial(const struct sweep_config *cfg, struct sweep_outcome *o)
{
    char err[512];
    if (!cfg->step_ui_host)
        return;
    sweep_analyse(o->steps, o->nsteps, &o->acfg, &o->findings);
    if (write_json(o, cfg->out_dir, err, sizeof(err)))
        ts_warn("tokenstorm sweep: %s", err);
}

static double metric_of(const struct sweep_step *s, enum sweep_knee_metric m)
{
    switch (m) {
    case SWEEP_KNEE_TPOT_P99:
        return s->tpot_p99_ms;
    case SWEEP_KNEE_E2EL_P99:
        return s->e2el_p99_ms;
    default:
        return s->ttft_p99_ms;
    }
}

/* Adds tenant t's split options to j (with the shared target first). */
static int job_tenant(struct job *j, const struct sweep_config *cfg, const struct sweep_tenant *t,
                      char *err, size_t errlen)
{
    char *words[SWEEP_TENANT_ARGS];
    int n;

    if (cfg->shared_target) {
        job_add(j, "--target");
        job_add(j, cfg->shared_target);
    }
    n = sweep_split_args(t->opts, words, SWEEP_TENANT_ARGS, &j->storage);
    if (n < 0) {
        ts_errf(err, errlen, "--interference %s: cannot split '%s' into options", t->name, t->opts);
        return n == -ENOMEM ? n : SWEEP_FAIL_USAGE;
    }
    for (int i = 0; i < n; i++)
        job_add(j, words[i]);
    return 0;
}

/*
 * Tenant A alone, B alone, then A and B at once against the same target:
 * for each as the victim, (p99 with the other - p99 alone) / p99 alone.
 */
static int run_interference(const struct sweep_config *cfg, struct sweep_outcome *o, char *err,
                            size_t errlen)
{
    const struct sweep_tenant *t = cfg->tenants;
    struct job *jobs = ts_calloc(2, sizeof(*jobs));
    struct sweep_step *alone = ts_calloc(2, sizeof(*alone)), *with = ts_calloc(2, sizeof(*with));
    char dir[SWEEP_DIR_MAX];
    int rc = 0;

    if (!jobs || !alone || !with) {
        rc = -ENOMEM;
        ts_errf(err, errlen, "out of memory");
        goto out;
    }
    for (int i = 0; i < 2 && !rc && !stop_requested; i++) {
        snprintf(dir, sizeof(dir), "interference-%s-alone", t[i].name);
        job_init(&jobs[0], cfg, dir);
        rc = job_tenant(&jobs[0], cfg, &t[i], err, errlen);
        if (!rc && cfg->on_start)
            cfg->on_start(dir, NAN, cfg->arg);
        rc = rc ? rc : jobs_run(cfg, &jobs[0], 1, &alone[i], err, errlen);
        job_release(&jobs[0]);
    }
    if (rc || stop_requested)
        goto out;
    for (int i = 0; i < 2 && !rc; i++) {
        snprintf(dir, sizeof(dir), "interference-%s-with-%s", t[i].name, t[1 - i].name);
        job_init(&jobs[i], cfg, dir);
        rc = job_tenant(&jobs[i], cfg, &t[i], err, errlen);
    }
    if (!rc && cfg->on_start)
        cfg->on_start("interference-together", NAN, cfg->arg);
    rc = rc ? rc : jobs_run(cfg, jobs, 2, with, err, errlen);
    job_release(&jobs[0]);
    job_release(&jobs[1]);
    if (rc || stop_requested || alone[0].interrupted || alone[1].interrupted ||
        with[0].interrupted || with[1].interrupted)
        goto out;
    for (int i = 0; i < 2; i++) {
        struct sweep_interference *x = &o->interference[o->ninterference++];
        snprintf(x->victim, sizeof(x->victim), "%s", t[i].name);
        snprintf(x->aggressor, sizeof(x->aggressor), "%s", t[1 - i].name);
        x->metric = sweep_knee_metric_name(cfg->interference_metric);
        x->p99_alone_ms = metric_of(&alone[i], cfg->interference_metric);
        x->p99_with_ms = metric_of(&with[i], cfg->interference_metric);
        x->delta = x->p99_alone_ms > 0 ? (x->p99_with_ms - x->p99_alone_ms) / x->p99_alone_ms : NAN;
        snprintf(x->dir_alone, sizeof(x->dir_alone), "%s", alone[i].dir);
        snprintf(x->dir_with, sizeof(x->dir_with), "%s", with[i].dir);
    }
out:
    if (stop_requested)
        o->interrupted = true;
    ts_free(jobs);
    ts_free(alone);
    ts_free(with);
    return rc;
}

static int write_json(const struct sweep_outcome *o, const char *dir, char *err, size_t errlen)
{
    char path[PATH_MAX + 16];
    json_t *doc = NULL;
    int rc;

    if (sweep_json_build(o, &doc)) {
        ts_errf(err, errlen, "cannot build sweep.json: out of memory");
        return -ENOMEM;
    }
    snprintf(path, sizeof(path), "%s/sweep.json", dir);
    rc = result_write_file(doc, path, err, errlen);
    json_decref(doc);
    return rc;
}

int sweep_run(const struct sweep_config *cfg, struct sweep_outcome *out, char *err, size_t errlen)
{
    char werr[512];
    int rc;

    memset(out, 0, sizeof(*out));
    out->mode = cfg->mode;
    out->vary = cfg->vary;
    out->plan = cfg->plan_name;
    out->target = cfg->target;
    out->slos = cfg->slos;
    out->nslos = cfg->nslos;
    out->acfg = cfg->acfg;
    out->started_wall_ns = ts_wall_ns();
    stop_requested = 0;
    if ((rc = file_mkdirs(cfg->out_dir, err, errlen)) < 0)
        return rc;
    if (cfg->plan_name)
        rc = run_plan(cfg, out, err, errlen);
    if (!rc && cfg->tenants && !out->interrupted && !stop_requested)
        rc = run_interference(cfg, out, err, errlen);
    if (stop_requested)
        out->interrupted = true;
    sweep_analyse(out->steps, out->nsteps, &out->acfg, &out->findings);
    int wrc = write_json(out, cfg->out_dir, werr, sizeof(werr));
    if (wrc && !rc) {
        ts_errf(err, errlen, "%s", werr);
        return wrc;
    }
    return rc;
}
