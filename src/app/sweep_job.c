/*
 * sweep_job.c - what `tokenstorm sweep` does once its options are parsed
 * (sweep_job.h): name the directory, start the simulator the interference
 * runs share, show progress, run the sweep (sweep.c) with Ctrl-C forwarded,
 * and print the findings or sweep.json.
 */
#include "app/sweep_job.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/slo.h"
#include "app/live_host.h"
#include "app/run_quality.h"
#include "base/alloc.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/log.h"
#include "report/docset.h"
#include "report/html.h"
#include "report/outdir.h"
#include "sim/thread.h"

#define SWEEP_DEFAULT_PROFILE "llama3-8b-a100"

/* ---- output ---- */

struct printer {
    bool table, progress;
    enum sweep_mode mode;
    const char *vary; /* --vary's option name, or NULL */
    int rows;
    /* --ui: the live page, the outcome so far (sweep_run fills it in place) */
    struct live_host *ui;
    struct sweep_outcome *out;
    const char *dir;
    char running[160]; /* the step running now ("" between steps) */
    int ui_port;       /* the running step's dashboard */
};

/* --ui: the page's frame, the sweep section of the steps so far and a line
 * on the step running now, drawn by the report's own code. */
static void ui_draw(struct printer *p)
{
    struct report_docset set;
    struct buf html;
    json_t *doc = NULL;
    char err[256];
    int rc;

    if (!p->ui)
        return;
    buf_init(&html, 8u << 20);
    report_docset_init(&set);
    rc = buf_append_str(&html, "<section><p class=\"note\" id=\"sweep-running\">");
    if (!rc && p->running[0])
        rc = buf_appendf(&html, "Running: %s (step %zu).", p->running, p->out->nsteps + 1);
    else if (!rc)
        rc = buf_appendf(&html, "%zu steps done.", p->out->nsteps);
    rc = rc ? rc : buf_append_str(&html, "</p></section>\n");
    if (!rc && p->out->nsteps) {
        sweep_analyse(p->out->steps, p->out->nsteps, &p->out->acfg, &p->out->findings);
        rc = sweep_json_build(p->out, &doc);
        rc = rc ? rc
                : report_docset_add_json(&set, doc,
                                         strrchr(p->dir, '/') ? strrchr(p->dir, '/') + 1 : p->dir,
                                         "sweep.json", p->dir, err, sizeof(err));
        rc = rc ? rc : report_html_live_frame(&set, &html);
    }
    if (rc || live_host_publish(p->ui, html.data, html.len, p->ui_port))
        ts_warn("tokenstorm sweep: --ui: cannot draw the page: %s", ts_strerror(rc));
    report_docset_release(&set);
    json_decref(doc);
    buf_release(&html);
}

static void on_step_ui(int port, void *arg)
{
    struct printer *p = arg;
    p->ui_port = port;
    if (!port)
        p->running[0] = '\0';
    ui_draw(p);
}

static const char *ms(char *buf, size_t n, double v)
{
    if (!isfinite(v))
        snprintf(buf, n, "-");
    else if (v >= 1000)
        snprintf(buf, n, "%.0f ms", v);
    else
        snprintf(buf, n, "%.1f ms", v);
    return buf;
}

static void on_start(const char *what, double load, void *arg)
{
    struct printer *p = arg;
    if (isfinite(load))
        snprintf(p->running, sizeof(p->running), "%s %g%s", what, load,
                 !strcmp(what, "rate") ? " req/s" : "");
    else
        snprintf(p->running, sizeof(p->running), "%s", what);
    if (!p->progress)
        return;
    if (isfinite(load))
        fprintf(stderr, "tokenstorm sweep: running %s %g%s\n", what, load,
                !strcmp(what, "rate") ? " req/s" : "");
    else
        fprintf(stderr, "tokenstorm sweep: running %s\n", what);
}

/* A --vary step: the option's value against recall, QPS and latency. */
static void vary_row(struct printer *p, const struct sweep_step *st)
{
    char a[24], b[24];

    if (!p->rows++)
        printf("%3s  %-20s %9s %9s %10s %10s %10s %7s %5s\n", "#", p->vary, "recall", "recall p5",
               "QPS", "E2EL p50", "E2EL p99", "errors", "SLO");
    printf("%3d  %-20g %9.4f %9.4f %10.1f %10s %10s %6.2f%% %5s%s\n", st->seq, st->load,
           st->has_vector ? st->recall_mean : NAN, st->has_vector ? st->recall_p5 : NAN,
           st->has_vector ? st->vector_qps : st->achieved_rps, ms(a, sizeof(a), st->e2el_p50_ms),
           ms(b, sizeof(b), st->e2el_p99_ms), 100 * (isfinite(st->error_rate) ? st->error_rate : 0),
           st->nslo ? (st->slo_pass ? "pass" : "fail") : "-",
           st->interrupted ? " (interrupted)" : "");
    fflush(stdout);
}

static void on_step(const struct sweep_step *st, bool probe, void *arg)
{
    struct printer *p = arg;
    char load[48], a[24], b[24], c[24], d[24], sat[96] = "";

    ui_draw(p);
    if (!p->table)
        return;
    if (p->vary)
        return vary_row(p, st);
    if (!p->rows++)
        printf("%3s  %-18s %8s %8s %9s %10s %10s %10s %10s %10s %7s %5s  %s\n", "#", "load",
               "offered", "sent", "achieved", "out tok/s", "TTFT p50", "TTFT p99", "TPOT p99",
               "E2EL p99", "errors", "SLO", "saturated");
    if (probe)
        snprintf(load, sizeof(load), "%s c=%g",
                 strstr(st->dir, "baseline") ? "baseline" : "saturation", st->load);
    else
        snprintf(load, sizeof(load), "%s %g", p->mode == SWEEP_RATE ? "rate" : "users", st->load);
    for (unsigned bit = 0; bit < SWEEP_SAT_NFLAGS; bit++) {
        if (st->saturation & (1u << bit)) {
            if (sat[0])
                strncat(sat, ",", sizeof(sat) - strlen(sat) - 1);
            strncat(sat, sweep_sat_name((enum sweep_sat)(1u << bit)),
                    sizeof(sat) - strlen(sat) - 1);
        }
    }
    printf("%3d  %-18s %8.2f %8.2f %9.2f %10.1f %10s %10s %10s %10s %6.2f%% %5s  %s%s\n", st->seq,
           load, st->offered, st->sent_rps, st->achieved_rps, st->output_tps,
           ms(a, sizeof(a), st->ttft_p50_ms), ms(b, sizeof(b), st->ttft_p99_ms),
           ms(c, sizeof(c), st->tpot_p99_ms), ms(d, sizeof(d), st->e2el_p99_ms),
           100 * (isfinite(st->error_rate) ? st->error_rate : 0),
           st->nslo ? (st->slo_pass ? "pass" : "fail") : "-", sat[0] ? sat : "no",
           st->interrupted ? " (interrupted)" : "");
    fflush(stdout);
}

static void print_findings(const struct sweep_outcome *o, const char *dir)
{
    const struct sweep_findings *f = &o->findings;
    const char *unit = o->mode == SWEEP_RATE ? "req/s" : "users";
    char a[24];

    printf("\n");
    if (!o->plan)
        goto tail;
    if (f->has_knee)
        printf("knee (%s, max curvature): load %g %s, throughput %.2f req/s, %s\n",
               sweep_knee_metric_name(o->acfg.knee_metric), f->knee_load, unit, f->knee_throughput,
               ms(a, sizeof(a), f->knee_latency_ms));
    else
        printf("knee: none found (needs 3 steps and a bend in %s)\n",
               sweep_knee_metric_name(o->acfg.knee_metric));
    if (o->nslos && f->has_goodput) {
        printf("max goodput meeting the SLOs: %.2f req/s (%s) at load %g %s", f->goodput_rps,
               f->goodput_from_throughput ? "request throughput" : "goodput", f->goodput_load,
               unit);
        if (isfinite(f->bracket_fail))
            printf("; first failure at %g %s\n", f->bracket_fail, unit);
        else
            printf("; no step failed\n");
    } else if (o->nslos && o->nsteps) {
        printf("max goodput meeting the SLOs: none (the lowest load already fails)\n");
    }
    if (f->has_critical && f->critical_why)
        printf("critical load: no meaningful fit: %s (lambda_c %.3g %s, R^2 %.3f over %zu "
               "steps)\n",
               f->critical_why, f->lambda_c, unit, f->r2, f->critical_points);
    else if (f->has_critical)
        printf("critical load: lambda_c %.3g %s (error rate %g%% there, e-fold every %.3g %s; "
               "R^2 %.3f over %zu steps)\n",
               f->lambda_c, unit, 100 * f->epsilon0, f->delta_lambda, unit, f->r2,
               f->critical_points);
    else
        printf("critical load: no fit (needs %zu steps with 0 < error rate < 1, rising)\n",
               o->acfg.fit_min_points);
tail:
    if (f->has_recall_knee)
        printf("recall knee: %s %g, recall %.4f at %.1f queries/s (E2EL p99 %s); past it each "
               "point of recall costs disproportionately much throughput\n",
               o->vary ? o->vary : "load", f->recall_knee_load, f->recall_knee_recall,
               f->recall_knee_qps, ms(a, sizeof(a), f->recall_knee_p99_ms));
    if (f->has_quality_drop)
        printf("quality: ROUGE-L fell from %.3f at %g %s to %.3f at %g %s\n", f->quality_from,
               f->quality_from_load, unit, f->quality_to, f->quality_to_load, unit);
    for (size_t i = 0; i < o->ninterference; i++) {
        const struct sweep_interference *x = &o->interference[i];
        char b[24];
        printf("interference: %s's %s %s alone, %s with %s (%+.1f%%)\n", x->victim, x->metric,
               ms(a, sizeof(a), x->p99_alone_ms), ms(b, sizeof(b), x->p99_with_ms), x->aggressor,
               100 * x->delta);
    }
    printf("\nresults: %s/sweep.json\n", dir);
}

/* ---- the job ---- */

/* What one sweep holds while it runs: cfg and the strings it points to. */
struct sweep_job {
    struct sweep_config cfg;
    const char *given_target; /* --target in the run options, or NULL */
    char target[300];         /* cfg.target: the URL, or simulator:<profile> */
    char exe[PATH_MAX];       /* cfg.exe */
    char dir[1024];           /* cfg.out_dir */
    struct outdir od;         /* dir, claimed for the sweep's life */
    char sim_url[128];        /* cfg.shared_target when this job started the simulator */
    struct sim_thread *sim;   /* the interference runs' simulator, or NULL */
    struct printer pr;        /* cfg.arg of the progress callbacks */
};

/* cfg from the options, with the target named for sweep.json and the callbacks set. */
static void job_config(const struct sweep_job_opts *o, struct sweep_job *j)
{
    const struct sweep_config *c = &o->cfg;
    const char *profile = sweep_args_find(c->run_args, c->nrun_args, "--sim-profile");

    memset(j, 0, sizeof(*j));
    outdir_init(&j->od);
    j->cfg = *c;
    j->given_target = sweep_args_find(c->run_args, c->nrun_args, "--target");
    if (j->given_target)
        snprintf(j->target, sizeof(j->target), "%s", j->given_target);
    else
        snprintf(j->target, sizeof(j->target), "simulator:%s",
                 profile ? profile : SWEEP_DEFAULT_PROFILE);
    j->cfg.target = j->target;
    j->pr.table = !o->json;
    j->pr.progress = !o->quiet && !o->json;
    j->pr.mode = c->mode;
    j->pr.vary = c->vary;
    j->cfg.on_step = on_step;
    j->cfg.on_start = on_start;
    j->cfg.arg = &j->pr;
}

/* The binary every step runs: this one. TS_EXIT_OK or TS_EXIT_FAIL. */
static int find_exe(struct sweep_job *j)
{
    ssize_t n = readlink("/proc/self/exe", j->exe, sizeof(j->exe) - 1);
    if (n <= 0) {
        fprintf(stderr, "tokenstorm sweep: cannot find my own binary: %s\n", strerror(errno));
        return TS_EXIT_FAIL;
    }
    j->exe[n] = '\0';
    j->cfg.exe = j->exe;
    return TS_EXIT_OK;
}

/* --out, or tokenstorm-results/<UTC time>Z-sweep (':' made '-' for every file system). */
static void name_dir(const struct sweep_job_opts *o, struct sweep_job *j)
{
    if (o->out_dir)
        snprintf(j->dir, sizeof(j->dir), "%s", o->out_dir);
    else
        outdir_default_name(j->dir, sizeof(j->dir), "sweep");
    j->cfg.out_dir = j->dir;
}

/* Claims the directory before any step runs (report/outdir.h); the steps'
 * runs claim their own step directories. TS_EXIT_OK or TS_EXIT_USAGE. */
static int claim_dir(const struct sweep_job_opts *o, struct sweep_job *j)
{
    char err[1200];
    if (outdir_claim(&j->od, j->dir, o->force ? OUTDIR_FORCE : 0, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm sweep: --out: %s\n", err);
        return TS_EXIT_USAGE;
    }
    if (j->od.removed)
        fprintf(stderr, "tokenstorm sweep: --force: removed from %s: %s\n", j->dir, j->od.note);
    return TS_EXIT_OK;
}

/*
 * The simulator both tenants' runs load at once when the run options name
 * no --target: their --sim-profile and --sim-set, on 127.0.0.1, any model
 * name accepted. TS_EXIT_OK, TS_EXIT_USAGE (a bad profile) or TS_EXIT_FAIL.
 */
static int start_shared_sim(struct sweep_job *j)
{
    const struct sweep_config *c = &j->cfg;
    struct sim_server_config scfg = {0};
    const char *profile = sweep_args_find(c->run_args, c->nrun_args, "--sim-profile");
    char err[512];

    if (sim_profile_preset(profile ? profile : SWEEP_DEFAULT_PROFILE, &scfg.profile)) {
        fprintf(stderr, "tokenstorm sweep: unknown --sim-profile '%s'\n", profile);
        return TS_EXIT_USAGE;
    }
    for (size_t i = 0; i < c->nrun_args; i++) {
        const char *kv = NULL;
        if (!strcmp(c->run_args[i], "--sim-set") && i + 1 < c->nrun_args)
            kv = c->run_args[++i];
        else if (!strncmp(c->run_args[i], "--sim-set=", 10))
            kv = c->run_args[i] + 10;
        if (kv && sim_profile_set_kv(&scfg.profile, kv, err, sizeof(err))) {
            fprintf(stderr, "tokenstorm sweep: --sim-set %s: %s\n", kv, err);
            return TS_EXIT_USAGE;
        }
    }
    if (sim_profile_validate(&scfg.profile, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm sweep: simulator profile: %s\n", err);
        return TS_EXIT_USAGE;
    }
    scfg.host = "127.0.0.1";
    scfg.quiet = true;
    scfg.any_model = true;
    if (sim_thread_start(&scfg, &j->sim, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm sweep: cannot start the simulator: %s\n", err);
        return TS_EXIT_FAIL;
    }
    snprintf(j->sim_url, sizeof(j->sim_url), "http://127.0.0.1:%d/v1", sim_thread_port(j->sim));
    j->cfg.shared_target = j->sim_url;
    return TS_EXIT_OK;
}

static volatile sig_atomic_t stop_signal; /* the first of SIGINT / SIGTERM that came */

static void on_signal(int sig)
{
    if (!stop_signal)
        stop_signal = sig;
    sweep_stop();
}

/* --ui's stop button: as Ctrl-C (called on the page's thread: only flags). */
static void ui_stop(void)
{
    on_signal(SIGINT);
}

/*
 * --ui: the page, on its own thread; the steps' dashboards on the same host
 * (with the token in their environment: a child's argv is visible to every
 * user). TS_EXIT_OK, or TS_EXIT_FAIL when it cannot listen.
 */
static int ui_open(const struct sweep_job_opts *o, struct sweep_job *j)
{
    char err[512];
    bool v6;

    if (!o->ui_host)
        return TS_EXIT_OK;
    if (o->ui_token && setenv("TOKENSTORM_API_TOKEN", o->ui_token, 1)) {
        fprintf(stderr, "tokenstorm sweep: --ui: %s\n", strerror(errno));
        return TS_EXIT_FAIL;
    }
    if (live_host_open(o->ui_host, o->ui_port, "tokenstorm sweep", o->ui_token, ui_stop, &j->pr.ui,
                       err, sizeof(err))) {
        fprintf(stderr, "tokenstorm sweep: --ui: %s\n", err);
        return TS_EXIT_FAIL;
    }
    j->cfg.step_ui_host = o->ui_host;
    j->cfg.on_step_ui = on_step_ui;
    j->pr.dir = j->dir;
    v6 = strchr(o->ui_host, ':') != NULL;
    fprintf(stderr, "tokenstorm sweep: dashboard on http://%s%s%s:%d/\n", v6 ? "[" : "", o->ui_host,
            v6 ? "]" : "", live_host_port(j->pr.ui));
    return TS_EXIT_OK;
}

/* SIGINT and SIGTERM stop the sweep (which passes them on to its runs). */
static void catch_signals(struct sigaction *old_int, struct sigaction *old_term)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, old_int);
    sigaction(SIGTERM, &sa, old_term);
}

/* The exit code of a sweep that sweep_run ended with rc. */
static int exit_code_of(int rc, const struct sweep_outcome *out, const struct sweep_config *cfg)
{
    if (rc == SWEEP_FAIL_USAGE)
        return TS_EXIT_USAGE;
    if (rc)
        return TS_EXIT_FAIL;
    if (out->interrupted)
        return ts_exit_stopped(stop_signal);
    if (cfg->nslos && out->nsteps && !out->findings.has_goodput)
        return TS_EXIT_SLO;
    return TS_EXIT_OK;
}

/* What the user reads at the end: the error, an interruption, then sweep.json or the findings. */
static void report_end(const struct sweep_job_opts *o, int rc, const struct sweep_outcome *out,
                       const char *err, const char *dir)
{
    if (rc)
        fprintf(stderr, "tokenstorm sweep: %s\n", err);
    if (out->interrupted && !o->quiet)
        fprintf(stderr, "tokenstorm sweep: interrupted; %zu steps kept\n", out->nsteps);
    if (o->json) {
        json_t *doc = NULL;
        if (!sweep_json_build(out, &doc)) {
            char *text = json_dumps(doc, JSON_INDENT(2) | JSON_REAL_PRECISION(12));
            if (text)
                printf("%s\n", text);
            free(text);
            json_decref(doc);
        }
    } else if (rc != SWEEP_FAIL_USAGE && (rc == 0 || out->nsteps)) {
        print_findings(out, dir);
    }
}

/*
 * Every --slo can be evaluated with the run options after `--` (goodput
 * needs --goodput, ...): checked before the first step, so a sweep that
 * could only end in "n/a" sends nothing and claims no directory.
 */
static int check_slo_needs(const struct sweep_config *cfg)
{
    unsigned have = run_args_slo_have(cfg->run_args, cfg->nrun_args);
    for (size_t i = 0; i < cfg->nslos; i++) {
        struct slo s;
        if (slo_parse(cfg->slos[i], &s, NULL, 0))
            continue; /* the command checked it */
        const char *what = run_slo_lack(slo_needs(&s) & ~have);
        if (what) {
            char name[SLO_EXPR_MAX];
            fprintf(stderr,
                    "tokenstorm sweep: --slo '%s': %s needs %s among the run options after "
                    "`--`\n",
                    cfg->slos[i], slo_metric_written(&s, name, sizeof(name)), what);
            return TS_EXIT_USAGE;
        }
    }
    return TS_EXIT_OK;
}

int sweep_job_run(const struct sweep_job_opts *o)
{
    struct sweep_job j;
    struct sigaction old_int, old_term;
    struct sweep_outcome *out = NULL;
    char err[1024] = "";
    int rc, exit_code;

    if ((exit_code = check_slo_needs(&o->cfg)) != TS_EXIT_OK)
        return exit_code;
    job_config(o, &j);
    if ((exit_code = find_exe(&j)) != TS_EXIT_OK)
        return exit_code;
    name_dir(o, &j);
    if ((exit_code = claim_dir(o, &j)) != TS_EXIT_OK)
        return exit_code;
    if (j.cfg.tenants && !j.given_target && (exit_code = start_shared_sim(&j)) != TS_EXIT_OK)
        goto release_dir;
    catch_signals(&old_int, &old_term);
    out = ts_calloc(1, sizeof(*out)); /* large: the steps and their directories */
    if (!out) {
        fprintf(stderr, "tokenstorm sweep: out of memory\n");
        exit_code = TS_EXIT_FAIL;
        goto restore_signals;
    }
    j.pr.out = out;
    if ((exit_code = ui_open(o, &j)) != TS_EXIT_OK) {
        ts_free(out);
        goto restore_signals;
    }
    rc = sweep_run(&j.cfg, out, err, sizeof(err));
    exit_code = exit_code_of(rc, out, &j.cfg);
    report_end(o, rc, out, err, j.dir);
    if (j.pr.ui) {
        j.pr.running[0] = '\0';
        j.pr.ui_port = 0;
        ui_draw(&j.pr);
        live_host_close(j.pr.ui, 1000);
    }
    ts_free(out);
restore_signals:
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (j.sim)
        sim_thread_stop(j.sim, 0);
release_dir:
    outdir_release(&j.od);
    return exit_code;
}
