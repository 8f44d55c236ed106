/*
 * tokenstorm sweep - runs a series of loads (each a real `tokenstorm run`),
 * stops climbing at saturation, and reports the knee, the maximum goodput
 * meeting the SLOs, the critical load and tenant interference.
 */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/knee.h"
#include "analysis/slo.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/units.h"
#include "cmd/cmd.h"
#include "app/sweep.h"
#include "sim/thread.h"
#include "ts_config.h"

#define SWEEP_DEFAULT_PROFILE "llama3-8b-a100"

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: tokenstorm sweep PLAN [OPTIONS] -- [RUN OPTIONS]\n\n"
        "Runs `tokenstorm run` at a series of loads (each a full run with its own result\n"
        "directory), stops climbing when the target saturates, and reports the knee of the\n"
        "latency curve, the highest load that meets the SLOs and the critical load where\n"
        "errors take off. Everything after `--` is passed to every run unchanged (target,\n"
        "workload, duration...); without --target each run starts the built-in simulator.\n\n"
        "plan (one of):\n"
        "  --rates LIST           explicit rates in requests/s, e.g. 2,4,8,16\n"
        "  --concurrencies LIST   explicit closed-loop user counts, e.g. 1,4,16,64\n"
        "  --ladder START:FACTOR:MAX  geometric loads (rate or concurrency per --mode)\n"
        "  --adaptive             measure concurrency 1 and a saturating concurrency, place\n"
        "                         loads between them, then bisect around the knee and the\n"
        "                         SLO boundary\n"
        "  --mode rate|concurrency  what --ladder and --adaptive vary (default rate)\n"
        "plan limits:\n"
        "  --max-steps N          runs at most, probes included (default: the plan's size)\n"
        "  --refine N             bisection steps after the grid (default 4 adaptive, else 0)\n"
        "  --tolerance R          stop bisecting when the bracket is below R * its top\n"
        "                         (default 0.1)\n"
        "  --past-saturation N    grid steps still run above the first saturated one\n"
        "                         (default 0: stop climbing at once)\n"
        "  --adaptive-points K    loads placed between the probes (default 5)\n"
        "  --sat-concurrency N    users of the adaptive saturation probe (default 256)\n"
        "  --step-timeout DUR     deadline of one run (default 1.5 x its warm-up + duration +\n"
        "                         drain, + 30s)\n"
        "checks and findings:\n"
        "  --slo EXPR             passed to every run; its verdicts decide the maximum goodput\n"
        "                         (repeatable; exit code 1 when no step meets them)\n"
        "  --knee-metric M        ttft.p99 (default), ttft.p50, tpot.p99, e2el.p99, e2el.p50\n"
        "  --error-level E        error rate that defines the critical load (default 1%%)\n"
        "  --fit-min-points N     steps with 0 < error rate < 1 the fit needs (default 3)\n"
        "tenant interference:\n"
        "  --interference NAME=OPTS  a tenant's run options (exactly two): each alone, then\n"
        "                         both at once against the same target; the change of each\n"
        "                         one's p99 when the other is added\n"
        "  --interference-metric M   ttft.p99 (default), tpot.p99, e2el.p99\n"
        "output:\n"
        "  --out DIR              sweep directory (default ./tokenstorm-results/<time>-sweep):\n"
        "                         sweep.json and one directory per step\n"
        "  --json                 print sweep.json on stdout instead of the table\n"
        "  -q, --quiet            no progress lines\n"
        "  -v, --verbose          debug logging\n"
        "\nexamples:\n"
        "  tokenstorm sweep --rates 2,4,8,16 --slo 'ttft.p99<500ms' -- \\\n"
        "      --target http://gpu:8000/v1 --input-len fixed:256 --duration 20s\n"
        "  tokenstorm sweep --adaptive --max-steps 12 -- --sim-profile tiny --duration 10s\n"
        "  tokenstorm sweep --mode concurrency --ladder 1:2:128 -- --target http://gpu:8000\n"
        "  tokenstorm sweep --interference 'chat=--rate 5 --input-len fixed:128' \\\n"
        "      --interference 'batch=--rate 2 --input-len fixed:4000' -- --target http://gpu:8000\n"
        "\nexit codes: 0 ok, 1 no step met the SLOs, 2 usage error, 3 a run failed,\n"
        "130 interrupted (sweep.json holds the steps so far)\n");
}

enum {
    O_RATES = 256,
    O_CONCURRENCIES,
    O_LADDER,
    O_ADAPTIVE,
    O_MODE,
    O_MAX_STEPS,
    O_REFINE,
    O_TOLERANCE,
    O_PAST_SAT,
    O_ADAPTIVE_POINTS,
    O_SAT_CONC,
    O_STEP_TIMEOUT,
    O_SLO,
    O_KNEE_METRIC,
    O_ERROR_LEVEL,
    O_FIT_MIN,
    O_INTERFERENCE,
    O_INTERFERENCE_METRIC,
    O_OUT,
    O_JSON,
    O_VERSION,
};

static const struct option sweep_options[] = {
    {"rates", required_argument, NULL, O_RATES},
    {"concurrencies", required_argument, NULL, O_CONCURRENCIES},
    {"ladder", required_argument, NULL, O_LADDER},
    {"adaptive", no_argument, NULL, O_ADAPTIVE},
    {"mode", required_argument, NULL, O_MODE},
    {"max-steps", required_argument, NULL, O_MAX_STEPS},
    {"refine", required_argument, NULL, O_REFINE},
    {"tolerance", required_argument, NULL, O_TOLERANCE},
    {"past-saturation", required_argument, NULL, O_PAST_SAT},
    {"adaptive-points", required_argument, NULL, O_ADAPTIVE_POINTS},
    {"sat-concurrency", required_argument, NULL, O_SAT_CONC},
    {"step-timeout", required_argument, NULL, O_STEP_TIMEOUT},
    {"slo", required_argument, NULL, O_SLO},
    {"knee-metric", required_argument, NULL, O_KNEE_METRIC},
    {"error-level", required_argument, NULL, O_ERROR_LEVEL},
    {"fit-min-points", required_argument, NULL, O_FIT_MIN},
    {"interference", required_argument, NULL, O_INTERFERENCE},
    {"interference-metric", required_argument, NULL, O_INTERFERENCE_METRIC},
    {"out", required_argument, NULL, O_OUT},
    {"json", no_argument, NULL, O_JSON},
    {"quiet", no_argument, NULL, 'q'},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, O_VERSION},
    {NULL, 0, NULL, 0},
};

struct sweep_opts {
    const char *plan_name; /* "list", "ladder", "adaptive" */
    const char *list, *ladder, *mode, *out_dir;
    bool mode_given, json, quiet;
    long max_steps, refine, past_sat, points, sat_conc, fit_min;
    double tolerance, error_level;
    uint64_t step_timeout_ns;
    const char *slos[SWEEP_MAX_SLOS];
    size_t nslos;
    enum sweep_knee_metric knee_metric, interference_metric;
    struct sweep_tenant tenants[SWEEP_TENANTS];
    char tenant_names[SWEEP_TENANTS][32];
    size_t ntenants;
    const char *const *run_args;
    size_t nrun_args;
};

static int bad_opt(const char *opt, const char *what, const char *got)
{
    fprintf(stderr, "tokenstorm sweep: %s: expected %s, got '%s'\n", opt, what, got);
    return TS_EXIT_USAGE;
}

static int parse_long(const char *opt, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        char what[64];
        snprintf(what, sizeof(what), "a whole number in %ld..%ld", lo, hi);
        return bad_opt(opt, what, s);
    }
    *out = v;
    return 0;
}

static int parse_pos(const char *opt, const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v > 0) || !isfinite(v))
        return bad_opt(opt, "a positive number", s);
    *out = v;
    return 0;
}

static int set_plan(struct sweep_opts *o, const char *name)
{
    if (o->plan_name) {
        fprintf(stderr, "tokenstorm sweep: give one plan: --rates, --concurrencies, --ladder or "
                        "--adaptive\n");
        return TS_EXIT_USAGE;
    }
    o->plan_name = name;
    return 0;
}

static int add_tenant(struct sweep_opts *o, const char *arg)
{
    const char *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg) : 0;

    if (o->ntenants == SWEEP_TENANTS) {
        fprintf(stderr, "tokenstorm sweep: --interference: exactly two tenants\n");
        return TS_EXIT_USAGE;
    }
    if (!eq || len == 0 || len >= sizeof(o->tenant_names[0]) ||
        strspn(arg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != len)
        return bad_opt("--interference", "NAME=OPTIONS with a name of letters, digits, _ or -",
                       arg);
    memcpy(o->tenant_names[o->ntenants], arg, len);
    o->tenant_names[o->ntenants][len] = '\0';
    if (o->ntenants == 1 && !strcmp(o->tenant_names[0], o->tenant_names[1])) {
        fprintf(stderr, "tokenstorm sweep: --interference: the two tenants need different names\n");
        return TS_EXIT_USAGE;
    }
    o->tenants[o->ntenants].name = o->tenant_names[o->ntenants];
    o->tenants[o->ntenants].opts = eq + 1;
    o->ntenants++;
    return 0;
}

/* Returns 0 to go on, or the exit code to return. */
static int parse_args(int argc, char **argv, struct sweep_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->max_steps = -1;
    o->refine = -1;
    o->points = 5;
    o->sat_conc = 256;
    o->fit_min = CRITICAL_MIN_POINTS;
    o->tolerance = 0.1;
    o->error_level = CRITICAL_EPSILON0;
    int c, rc = 0;
    optind = 1;
    while (!rc && (c = getopt_long(argc, argv, "qvh", sweep_options, NULL)) != -1) {
        switch (c) {
        case O_RATES:
        case O_CONCURRENCIES:
            rc = set_plan(o, "list");
            o->list = optarg;
            o->mode = c == O_RATES ? "rate" : "concurrency";
            o->mode_given = true;
            break;
        case O_LADDER:
            rc = set_plan(o, "ladder");
            o->ladder = optarg;
            break;
        case O_ADAPTIVE:
            rc = set_plan(o, "adaptive");
            break;
        case O_MODE:
            if (strcmp(optarg, "rate") && strcmp(optarg, "concurrency"))
                return bad_opt("--mode", "rate or concurrency", optarg);
            if (o->list && strcmp(o->mode, optarg))
                return bad_opt("--mode", "the mode of the list given", optarg);
            o->mode = optarg;
            break;
        case O_MAX_STEPS:
            rc = parse_long("--max-steps", optarg, 1, SWEEP_MAX_STEPS, &o->max_steps);
            break;
        case O_REFINE:
            rc = parse_long("--refine", optarg, 0, SWEEP_MAX_STEPS, &o->refine);
            break;
        case O_TOLERANCE:
            rc = parse_pos("--tolerance", optarg, &o->tolerance);
            if (!rc && o->tolerance >= 1)
                rc = bad_opt("--tolerance", "a fraction below 1", optarg);
            break;
        case O_PAST_SAT:
            rc = parse_long("--past-saturation", optarg, 0, SWEEP_MAX_STEPS, &o->past_sat);
            break;
        case O_ADAPTIVE_POINTS:
            rc = parse_long("--adaptive-points", optarg, 2, 32, &o->points);
            break;
        case O_SAT_CONC:
            rc = parse_long("--sat-concurrency", optarg, 2, 1000000, &o->sat_conc);
            break;
        case O_STEP_TIMEOUT:
            if (units_parse_duration_ns(optarg, &o->step_timeout_ns) || !o->step_timeout_ns)
                rc = bad_opt("--step-timeout", "a duration like 90s or 10m", optarg);
            break;
        case O_SLO: {
            struct slo s;
            char err[256];
            if (o->nslos == SWEEP_MAX_SLOS) {
                fprintf(stderr, "tokenstorm sweep: too many --slo\n");
                return TS_EXIT_USAGE;
            }
            if (slo_parse(optarg, &s, err, sizeof(err))) {
                fprintf(stderr, "tokenstorm sweep: --slo: %s\n", err);
                return TS_EXIT_USAGE;
            }
            o->slos[o->nslos++] = optarg;
            break;
        }
        case O_KNEE_METRIC:
            if (sweep_knee_metric_parse(optarg, &o->knee_metric))
                rc = bad_opt("--knee-metric", "ttft.p99, ttft.p50, tpot.p99, e2el.p99 or e2el.p50",
                             optarg);
            break;
        case O_ERROR_LEVEL: {
            char *end;
            double v = strtod(optarg, &end);
            if (end != optarg && !strcmp(end, "%"))
                v /= 100;
            else if (end == optarg || *end)
                v = NAN;
            if (!(v > 0 && v < 1))
                rc = bad_opt("--error-level", "a rate between 0 and 1, or a percentage", optarg);
            o->error_level = v;
            break;
        }
        case O_FIT_MIN:
            rc = parse_long("--fit-min-points", optarg, 2, SWEEP_MAX_STEPS, &o->fit_min);
            break;
        case O_INTERFERENCE:
            rc = add_tenant(o, optarg);
            break;
        case O_INTERFERENCE_METRIC:
            if (sweep_knee_metric_parse(optarg, &o->interference_metric) ||
                (o->interference_metric != SWEEP_KNEE_TTFT_P99 &&
                 o->interference_metric != SWEEP_KNEE_TPOT_P99 &&
                 o->interference_metric != SWEEP_KNEE_E2EL_P99))
                rc = bad_opt("--interference-metric", "ttft.p99, tpot.p99 or e2el.p99", optarg);
            break;
        case O_OUT:
            o->out_dir = optarg;
            break;
        case O_JSON:
            o->json = true;
            break;
        case 'q':
            o->quiet = true;
            break;
        case 'v':
            ts_log_set_level(TS_LOG_DEBUG);
            break;
        case 'h':
            usage(stdout);
            return TS_EXIT_OK;
        case O_VERSION:
            printf("tokenstorm %s\n", TS_VERSION);
            return TS_EXIT_OK;
        default:
            usage(stderr);
            return TS_EXIT_USAGE;
        }
    }
    if (rc)
        return rc;
    if (optind < argc && strcmp(argv[optind - 1], "--")) {
        fprintf(stderr, "tokenstorm sweep: unexpected argument '%s' (run options go after `--`)\n",
                argv[optind]);
        return TS_EXIT_USAGE;
    }
    o->run_args = (const char *const *)argv + optind;
    o->nrun_args = (size_t)(argc - optind);
    if (o->nrun_args > SWEEP_MAX_ARGS) {
        fprintf(stderr, "tokenstorm sweep: more than %d run options\n", SWEEP_MAX_ARGS);
        return TS_EXIT_USAGE;
    }
    if (!o->plan_name && !o->ntenants) {
        fprintf(stderr, "tokenstorm sweep: give a plan (--rates, --concurrencies, --ladder, "
                        "--adaptive) or --interference\n\n");
        usage(stderr);
        return TS_EXIT_USAGE;
    }
    if (o->ntenants == 1) {
        fprintf(stderr, "tokenstorm sweep: --interference needs exactly two tenants\n");
        return TS_EXIT_USAGE;
    }
    if (!o->mode)
        o->mode = "rate";
    return -1;
}

/* Options the sweep sets itself may not come through `--`. */
static int check_run_args(const struct sweep_opts *o, bool concurrency)
{
    static const char *const owned[] = {"--rate", "--stages", "--ramp-to",
                                        "--out",  "--json",   "--concurrency"};
    size_t nowned = sizeof(owned) / sizeof(owned[0]) - (concurrency ? 0 : 1);

    for (size_t i = 0; i < o->nrun_args; i++) {
        for (size_t k = 0; k < nowned; k++) {
            size_t l = strlen(owned[k]);
            const char *a = o->run_args[i];
            if (!strncmp(a, owned[k], l) && (a[l] == '\0' || a[l] == '=')) {
                fprintf(stderr,
                        "tokenstorm sweep: %s cannot be passed to the runs: the sweep sets it "
                        "for every step\n",
                        owned[k]);
                return TS_EXIT_USAGE;
            }
        }
    }
    return 0;
}

static int parse_list(const char *opt, const char *s, bool whole, struct sweep_plan *plan)
{
    char copy[4096], *save = NULL;
    double v[SWEEP_MAX_STEPS];
    size_t n = 0;

    if (snprintf(copy, sizeof(copy), "%s", s) >= (int)sizeof(copy))
        return bad_opt(opt, "a shorter list", "...");
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        double x = strtod(tok, &end);
        if (end == tok || *end || !(x > 0) || !isfinite(x) || (whole && x != floor(x)) || x > 1e7)
            return bad_opt(opt,
                           whole ? "whole numbers > 0 separated by commas"
                                 : "numbers > 0 separated by commas",
                           s);
        if (n == SWEEP_MAX_STEPS) {
            fprintf(stderr, "tokenstorm sweep: %s: at most %d loads\n", opt, SWEEP_MAX_STEPS);
            return TS_EXIT_USAGE;
        }
        v[n++] = x;
    }
    if (!n)
        return bad_opt(opt, "a list of loads", s);
    /* ascending, distinct (insertion sort: tiny lists) */
    for (size_t i = 1; i < n; i++)
        for (size_t k = i; k > 0 && v[k] < v[k - 1]; k--) {
            double t = v[k];
            v[k] = v[k - 1];
            v[k - 1] = t;
        }
    plan->ngrid = 0;
    for (size_t i = 0; i < n; i++)
        if (!plan->ngrid || v[i] > plan->grid[plan->ngrid - 1])
            plan->grid[plan->ngrid++] = v[i];
    return 0;
}

static int parse_ladder(const char *s, bool whole, struct sweep_plan *plan)
{
    double a, f, m;
    char tail;
    if (sscanf(s, "%lf:%lf:%lf%c", &a, &f, &m, &tail) != 3 || !(a > 0) || !(f > 1) || !(m >= a) ||
        m > 1e7 || (whole && (a != floor(a) || m != floor(m))))
        return bad_opt("--ladder", "START:FACTOR:MAX with 0 < START <= MAX and FACTOR > 1", s);
    if (sweep_plan_ladder(plan, a, f, m)) {
        fprintf(stderr, "tokenstorm sweep: --ladder: more than %d loads\n", SWEEP_MAX_STEPS);
        return TS_EXIT_USAGE;
    }
    return 0;
}

/* ---- output ---- */

struct printer {
    bool table, progress;
    enum sweep_mode mode;
    int rows;
};

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
    if (!p->progress)
        return;
    if (isfinite(load))
        fprintf(stderr, "sweep: running %s %g%s\n", what, load,
                !strcmp(what, "rate") ? " req/s" : "");
    else
        fprintf(stderr, "sweep: running %s\n", what);
}

static void on_step(const struct sweep_step *st, bool probe, void *arg)
{
    struct printer *p = arg;
    char load[48], a[24], b[24], c[24], d[24], sat[96] = "";

    if (!p->table)
        return;
    if (!p->rows++)
        printf("%3s  %-18s %8s %9s %10s %10s %10s %10s %10s %7s %5s  %s\n", "#", "load", "offered",
               "achieved", "out tok/s", "TTFT p50", "TTFT p99", "TPOT p99", "E2EL p99", "errors",
               "SLO", "saturated");
    if (probe)
        snprintf(load, sizeof(load), "%s c=%g",
                 strstr(st->dir, "baseline") ? "baseline" : "saturation", st->load);
    else
        snprintf(load, sizeof(load), "%s %g", p->mode == SWEEP_RATE ? "rate" : "users", st->load);
    for (unsigned bit = 0; bit < 4; bit++) {
        if (st->saturation & (1u << bit)) {
            if (sat[0])
                strncat(sat, ",", sizeof(sat) - strlen(sat) - 1);
            strncat(sat, sweep_sat_name((enum sweep_sat)(1u << bit)),
                    sizeof(sat) - strlen(sat) - 1);
        }
    }
    printf("%3d  %-18s %8.2f %9.2f %10.1f %10s %10s %10s %10s %6.2f%% %5s  %s%s\n", st->seq, load,
           st->offered, st->achieved_rps, st->output_tps, ms(a, sizeof(a), st->ttft_p50_ms),
           ms(b, sizeof(b), st->ttft_p99_ms), ms(c, sizeof(c), st->tpot_p99_ms),
           ms(d, sizeof(d), st->e2el_p99_ms), 100 * (isfinite(st->error_rate) ? st->error_rate : 0),
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
    if (f->has_critical)
        printf("critical load: lambda_c %.3g %s (error rate %g%% there, e-fold every %.3g %s; "
               "R^2 %.3f over %zu steps)\n",
               f->lambda_c, unit, 100 * f->epsilon0, f->delta_lambda, unit, f->r2,
               f->critical_points);
    else
        printf("critical load: no fit (needs %zu steps with 0 < error rate < 1, rising)\n",
               o->acfg.fit_min_points);
tail:
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

/* ---- the shared simulator of the interference runs ---- */

static int start_shared_sim(const struct sweep_opts *o, struct sim_thread **sim, char *url,
                            size_t urllen)
{
    struct sim_server_config scfg = {0};
    const char *profile = sweep_args_find(o->run_args, o->nrun_args, "--sim-profile");
    char err[512];

    if (sim_profile_preset(profile ? profile : SWEEP_DEFAULT_PROFILE, &scfg.profile)) {
        fprintf(stderr, "tokenstorm sweep: unknown --sim-profile '%s'\n", profile);
        return TS_EXIT_USAGE;
    }
    for (size_t i = 0; i < o->nrun_args; i++) {
        const char *kv = NULL;
        if (!strcmp(o->run_args[i], "--sim-set") && i + 1 < o->nrun_args)
            kv = o->run_args[++i];
        else if (!strncmp(o->run_args[i], "--sim-set=", 10))
            kv = o->run_args[i] + 10;
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
    if (sim_thread_start(&scfg, sim, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm sweep: cannot start the simulator: %s\n", err);
        return TS_EXIT_FAIL;
    }
    snprintf(url, urllen, "http://127.0.0.1:%d/v1", sim_thread_port(*sim));
    return 0;
}

/* ---- main ---- */

static void on_signal(int sig)
{
    (void)sig;
    sweep_stop();
}

int cmd_sweep(int argc, char **argv)
{
    struct sweep_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    bool conc = !strcmp(o.mode, "concurrency");
    rc = 0;
    if (o.plan_name && (rc = check_run_args(&o, conc)))
        return rc;

    struct sweep_config cfg = {0};
    cfg.mode = conc ? SWEEP_CONCURRENCY : SWEEP_RATE;
    cfg.plan.mode = cfg.mode;
    cfg.plan.tolerance = o.tolerance;
    cfg.plan.past_saturation = (unsigned)o.past_sat;
    cfg.plan_name = o.plan_name;
    if (o.plan_name && !strcmp(o.plan_name, "list"))
        rc = parse_list(conc ? "--concurrencies" : "--rates", o.list, conc, &cfg.plan);
    else if (o.plan_name && !strcmp(o.plan_name, "ladder"))
        rc = parse_ladder(o.ladder, conc, &cfg.plan);
    if (rc)
        return rc;
    cfg.adaptive = o.plan_name && !strcmp(o.plan_name, "adaptive");
    cfg.adaptive_points = (size_t)o.points;
    cfg.sat_concurrency = (uint32_t)o.sat_conc;
    cfg.plan.refine = o.refine >= 0 ? (size_t)o.refine : cfg.adaptive ? 4 : 0;
    size_t planned = cfg.adaptive ? 2 + cfg.adaptive_points : cfg.plan.ngrid;
    cfg.max_steps = o.max_steps > 0 ? (size_t)o.max_steps : planned + cfg.plan.refine;
    if (cfg.max_steps > SWEEP_MAX_STEPS)
        cfg.max_steps = SWEEP_MAX_STEPS;
    if (cfg.adaptive && cfg.max_steps < 3) {
        fprintf(stderr, "tokenstorm sweep: --adaptive needs --max-steps 3 or more (two probes "
                        "and a step)\n");
        return TS_EXIT_USAGE;
    }
    cfg.run_args = o.run_args;
    cfg.nrun_args = o.nrun_args;
    cfg.slos = o.slos;
    cfg.nslos = o.nslos;
    cfg.step_timeout_ns = o.step_timeout_ns;
    cfg.acfg.knee_metric = o.knee_metric;
    cfg.acfg.knee_min_score = KNEE_MIN_SCORE;
    cfg.acfg.epsilon0 = o.error_level;
    cfg.acfg.fit_min_points = (size_t)o.fit_min;
    cfg.acfg.has_slos = o.nslos > 0;
    cfg.interference_metric = o.interference_metric;

    char target[300];
    const char *given = sweep_args_find(o.run_args, o.nrun_args, "--target");
    const char *profile = sweep_args_find(o.run_args, o.nrun_args, "--sim-profile");
    if (given)
        snprintf(target, sizeof(target), "%s", given);
    else
        snprintf(target, sizeof(target), "simulator:%s", profile ? profile : SWEEP_DEFAULT_PROFILE);
    cfg.target = target;

    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        fprintf(stderr, "tokenstorm sweep: cannot find my own binary: %s\n", strerror(errno));
        return TS_EXIT_FAIL;
    }
    exe[n] = '\0';
    cfg.exe = exe;

    char dir[1024];
    if (o.out_dir) {
        snprintf(dir, sizeof(dir), "%s", o.out_dir);
    } else {
        char stamp[40];
        ts_wall_format(ts_wall_ns(), stamp, sizeof(stamp));
        stamp[19] = '\0';
        for (char *p = stamp; *p; p++)
            if (*p == ':')
                *p = '-';
        snprintf(dir, sizeof(dir), "tokenstorm-results/%sZ-sweep", stamp);
    }
    cfg.out_dir = dir;

    struct sim_thread *sim = NULL;
    char sim_url[128];
    if (o.ntenants) {
        cfg.tenants = o.tenants;
        if (!given) {
            if ((rc = start_shared_sim(&o, &sim, sim_url, sizeof(sim_url))))
                return rc;
            cfg.shared_target = sim_url;
        }
    }

    struct printer pr = {.table = !o.json, .progress = !o.quiet && !o.json, .mode = cfg.mode};
    cfg.on_step = on_step;
    cfg.on_start = on_start;
    cfg.arg = &pr;

    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    struct sweep_outcome *out = ts_calloc(1, sizeof(*out));
    char err[1024] = "";
    int exit_code = TS_EXIT_OK;
    if (!out) {
        fprintf(stderr, "tokenstorm sweep: out of memory\n");
        exit_code = TS_EXIT_FAIL;
        goto out_signals;
    }
    rc = sweep_run(&cfg, out, err, sizeof(err));
    if (rc == SWEEP_FAIL_USAGE)
        exit_code = TS_EXIT_USAGE;
    else if (rc)
        exit_code = TS_EXIT_FAIL;
    else if (out->interrupted)
        exit_code = TS_EXIT_INTERRUPTED;
    else if (o.nslos && out->nsteps && !out->findings.has_goodput)
        exit_code = TS_EXIT_SLO;
    if (rc)
        fprintf(stderr, "tokenstorm sweep: %s\n", err);
    if (out->interrupted && !o.quiet)
        fprintf(stderr, "tokenstorm sweep: interrupted; %zu steps kept\n", out->nsteps);
    if (o.json) {
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
    ts_free(out);
out_signals:
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (sim)
        sim_thread_stop(sim, 0);
    return exit_code;
}
