/*
 * tokenstorm sweep - runs a series of loads (each a real `tokenstorm run`),
 * stops climbing at saturation, and reports the knee, the maximum goodput
 * meeting the SLOs, the critical load and tenant interference.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/knee.h"
#include "analysis/slo.h"
#include "base/log.h"
#include "base/units.h"
#include "cmd/cmd.h"
#include "cmd/cmd_common.h"
#include "cmd/cmd_opts.h"
#include "app/sweep_job.h"
#include "net/addr.h"
#include "ts_config.h"

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: tokenstorm sweep PLAN [OPTIONS] -- [RUN OPTIONS]\n\n"
        "Runs `tokenstorm run` at a series of loads (each a full run with its own result\n"
        "directory), stops climbing when the target saturates, and reports the knee of the\n"
        "latency curve, the highest load that meets the SLOs and the critical load where\n"
        "errors take off. Everything after `--` is passed to every run unchanged (target,\n"
        "workload, duration...); without --target each run starts the built-in simulator.\n"
        "Each step gets its own --seed, derived from the one passed through (default 1)\n"
        "and its order; rates (sent, achieved, output) count what happened inside the\n"
        "sending window, without the drain (docs/SWEEP.md).\n\n"
        "plan (one of them is required, or --interference):\n"
        "  --rates LIST           explicit rates in requests/s, e.g. 2,4,8,16\n"
        "  --concurrencies LIST   explicit closed-loop user counts, e.g. 1,4,16,64\n"
        "  --ladder START:FACTOR:MAX  geometric loads (rate or concurrency per --mode)\n"
        "  --adaptive             measure concurrency 1 and a saturating concurrency, place\n"
        "                         loads between them, then bisect around the knee and the\n"
        "                         SLO boundary\n"
        "  --mode rate|concurrency  what --ladder and --adaptive vary (default rate)\n"
        "  --vary NAME=LIST       a run option instead of the load, e.g. nprobe=8,16,32,64:\n"
        "                         each step passes --NAME V (the load stays what the run\n"
        "                         options say); vector-search runs give the recall x QPS x\n"
        "                         p99 table and the recall knee (docs/VECTOR.md)\n"
        "plan limits:\n"
        "  --max-steps N          runs at most, probes included (default: the plan's size)\n"
        "  --refine N             bisection steps after the grid (default 4 adaptive, else 0)\n"
        "  --tolerance R          stop bisecting when the bracket is below R * its top\n"
        "                         (default 0.1)\n"
        "  --past-saturation N    grid steps still run above the saturation onset (the\n"
        "                         lowest saturated load with no unsaturated one above\n"
        "                         it); default 1: one point past the knee, so the\n"
        "                         curve has both sides (0: stop climbing at once)\n"
        "  --adaptive-points K    loads placed between the probes (default 5)\n"
        "  --sat-concurrency N    users of the adaptive saturation probe (default 256)\n"
        "  --step-timeout DUR     deadline of one run (default 1.5 x its warm-up + duration +\n"
        "                         drain, + 30s)\n"
        "checks and findings:\n"
        "  --slo EXPR             passed to every run; its verdicts decide the maximum goodput\n"
        "                         (repeatable; exit code 1 when no step meets them); one the\n"
        "                         run options cannot evaluate (goodput without --goodput...)\n"
        "                         is refused before the first step\n"
        "  --knee-metric M        ttft.p99 (default), ttft.p50, tpot.p99, e2el.p99, e2el.p50\n"
        "  --error-level E        error rate that defines the critical load (default 1%%)\n"
        "  --fit-min-points N     steps with 0 < error rate < 1 the fit needs (default 3)\n"
        "tenant interference:\n"
        "  --interference NAME=OPTS  a tenant's run options (exactly two): each alone, then\n"
        "                         both at once against the same target; the change of each\n"
        "                         one's p99 when the other is added (default none)\n"
        "  --interference-metric M   ttft.p99 (default), tpot.p99, e2el.p99\n"
        "output:\n"
        "  --out DIR              sweep directory (default ./tokenstorm-results/<time>-sweep):\n"
        "                         sweep.json and one directory per step; refused if it\n"
        "                         holds results or another process writes it\n"
        "  --force                remove the results already in --out first (sweep.json,\n"
        "                         step-*/, interference-*/ and what runs wrote in them;\n"
        "                         nothing else)\n"
        "  --json                 print sweep.json on stdout instead of the table\n"
        "  --ui H:P               a live page at http://H:P/ (loopback by default): the steps\n"
        "                         so far as the report draws them, the running step's own\n"
        "                         dashboard (each step gets `run --ui` on the same host and a\n"
        "                         free port), a stop button that stops the sweep as Ctrl-C\n"
        "                         does; sweep.json is rewritten after every step\n"
        "  --api-token TOKEN      the token --ui wants on a routable address (or\n"
        "                         $TOKENSTORM_API_TOKEN); --api-insecure: none\n"
        "  -q, --quiet            no progress or status lines;\n"
        "                         errors and the result still print)\n"
        "  -v, --verbose          debug logging\n"
        "\nexamples:\n"
        "  tokenstorm sweep --rates 2,4,8,16 --slo 'ttft.p99<500ms' -- \\\n"
        "      --target http://gpu:8000/v1 --input-len fixed:256 --duration 20s\n"
        "  tokenstorm sweep --adaptive --max-steps 12 -- --sim-profile tiny --duration 10s\n"
        "  tokenstorm sweep --mode concurrency --ladder 1:2:128 -- --target http://gpu:8000\n"
        "  tokenstorm sweep --interference 'chat=--rate 5 --input-len fixed:128' \\\n"
        "      --interference 'batch=--rate 2 --input-len fixed:4000' -- --target http://gpu:8000\n"
        "\nexit codes: 0 ok, 1 no step met the SLOs, 2 usage error, 3 a run failed,\n"
        "130 SIGINT, 143 SIGTERM (sweep.json holds the steps so far)\n");
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
    O_VARY,
    O_INTERFERENCE,
    O_INTERFERENCE_METRIC,
    O_OUT,
    O_FORCE,
    O_JSON,
    O_VERSION,
    O_UI,
    O_API_TOKEN,
    O_API_INSECURE,
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
    {"vary", required_argument, NULL, O_VARY},
    {"interference", required_argument, NULL, O_INTERFERENCE},
    {"interference-metric", required_argument, NULL, O_INTERFERENCE_METRIC},
    {"out", required_argument, NULL, O_OUT},
    {"force", no_argument, NULL, O_FORCE},
    {"json", no_argument, NULL, O_JSON},
    {"ui", required_argument, NULL, O_UI},
    {"api-token", required_argument, NULL, O_API_TOKEN},
    {"api-insecure", no_argument, NULL, O_API_INSECURE},
    {"quiet", no_argument, NULL, 'q'},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, O_VERSION},
    {NULL, 0, NULL, 0},
};

struct sweep_opts {
    const char *plan_name; /* "list", "ladder", "adaptive", "vary" */
    char vary[32];         /* --vary's option name */
    const char *list, *ladder, *mode, *out_dir;
    bool json, quiet, force;
    const char *ui, *api_token, *ui_token; /* --ui, --api-token, the token --ui enforces */
    char ui_host[ADDR_HOST_MAX];
    int ui_port;
    bool api_insecure;
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
        fprintf(stderr, "tokenstorm sweep: give one plan: --rates, --concurrencies, --ladder, "
                        "--adaptive or --vary\n");
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

/*
 * What an option group's parser returns besides an exit code (>= 0) to stop
 * with: ARG_NEXT (taken, go on) or ARG_NOT_MINE (another group's option).
 */
enum { ARG_NEXT = -1, ARG_NOT_MINE = -2 };

/* A helper's answer (0, or the exit code after its message) as a group's. */
static int next_or(int rc)
{
    return rc ? rc : ARG_NEXT;
}

/* The defaults of every option, before argv is read. */
static void sweep_opts_defaults(struct sweep_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->max_steps = -1;
    o->refine = -1;
    o->past_sat = 1;
    o->points = 5;
    o->sat_conc = 256;
    o->fit_min = CRITICAL_MIN_POINTS;
    o->tolerance = 0.1;
    o->error_level = CRITICAL_EPSILON0;
}

/* "plan (one of):" in --help: which loads to run, and what a load is. */
static int plan_option(int c, struct sweep_opts *o)
{
    switch (c) {
    case O_RATES:
    case O_CONCURRENCIES: {
        int rc = set_plan(o, "list");
        o->list = optarg;
        o->mode = c == O_RATES ? "rate" : "concurrency";
        return next_or(rc);
    }
    case O_LADDER: {
        int rc = set_plan(o, "ladder");
        o->ladder = optarg;
        return next_or(rc);
    }
    case O_ADAPTIVE:
        return next_or(set_plan(o, "adaptive"));
    case O_VARY: {
        const char *eq = strchr(optarg, '=');
        size_t len = eq ? (size_t)(eq - optarg) : 0;
        if (!eq || !len || len >= sizeof(o->vary) ||
            strspn(optarg, "abcdefghijklmnopqrstuvwxyz0123456789-") != len)
            return bad_opt("--vary", "NAME=V1,V2,... with a run option's name (e.g. nprobe)",
                           optarg);
        int rc = set_plan(o, "vary");
        memcpy(o->vary, optarg, len);
        o->vary[len] = '\0';
        o->list = eq + 1;
        return next_or(rc);
    }
    case O_MODE:
        if (strcmp(optarg, "rate") && strcmp(optarg, "concurrency"))
            return bad_opt("--mode", "rate or concurrency", optarg);
        if (o->list && strcmp(o->mode, optarg))
            return bad_opt("--mode", "the mode of the list given", optarg);
        o->mode = optarg;
        return ARG_NEXT;
    default:
        return ARG_NOT_MINE;
    }
}

/* "plan limits:" in --help: how far the plan goes and how long a run may take. */
static int limit_option(int c, struct sweep_opts *o)
{
    switch (c) {
    case O_MAX_STEPS:
        return next_or(parse_long("--max-steps", optarg, 1, SWEEP_MAX_STEPS, &o->max_steps));
    case O_REFINE:
        return next_or(parse_long("--refine", optarg, 0, SWEEP_MAX_STEPS, &o->refine));
    case O_TOLERANCE: {
        int rc = parse_pos("--tolerance", optarg, &o->tolerance);
        if (!rc && o->tolerance >= 1)
            rc = bad_opt("--tolerance", "a fraction below 1", optarg);
        return next_or(rc);
    }
    case O_PAST_SAT:
        return next_or(parse_long("--past-saturation", optarg, 0, SWEEP_MAX_STEPS, &o->past_sat));
    case O_ADAPTIVE_POINTS:
        return next_or(parse_long("--adaptive-points", optarg, 2, 32, &o->points));
    case O_SAT_CONC:
        return next_or(parse_long("--sat-concurrency", optarg, 2, 1000000, &o->sat_conc));
    case O_STEP_TIMEOUT:
        if (units_parse_duration_ns(optarg, &o->step_timeout_ns) || !o->step_timeout_ns)
            return bad_opt("--step-timeout", "a duration like 90s or 10m", optarg);
        return ARG_NEXT;
    default:
        return ARG_NOT_MINE;
    }
}

/* --slo EXPR: checked here, passed to every run as it was given. */
static int add_slo(struct sweep_opts *o, const char *arg)
{
    struct slo s;
    char err[256];

    if (o->nslos == SWEEP_MAX_SLOS) {
        fprintf(stderr, "tokenstorm sweep: too many --slo\n");
        return TS_EXIT_USAGE;
    }
    if (slo_parse(arg, &s, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm sweep: --slo: %s\n", err);
        return TS_EXIT_USAGE;
    }
    o->slos[o->nslos++] = arg;
    return 0;
}

/* --error-level: a rate (0.01) or a percentage (1%), strictly between 0 and 1. */
static int parse_error_level(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);

    if (end != s && !strcmp(end, "%"))
        v /= 100;
    else if (end == s || *end)
        v = NAN;
    *out = v;
    if (!(v > 0 && v < 1))
        return bad_opt("--error-level", "a rate between 0 and 1, or a percentage", s);
    return 0;
}

/* "checks and findings:" and "tenant interference:" in --help. */
static int check_option(int c, struct sweep_opts *o)
{
    switch (c) {
    case O_SLO:
        return next_or(add_slo(o, optarg));
    case O_KNEE_METRIC:
        if (sweep_knee_metric_parse(optarg, &o->knee_metric))
            return bad_opt("--knee-metric", "ttft.p99, ttft.p50, tpot.p99, e2el.p99 or e2el.p50",
                           optarg);
        return ARG_NEXT;
    case O_ERROR_LEVEL:
        return next_or(parse_error_level(optarg, &o->error_level));
    case O_FIT_MIN:
        return next_or(parse_long("--fit-min-points", optarg, 2, SWEEP_MAX_STEPS, &o->fit_min));
    case O_INTERFERENCE:
        return next_or(add_tenant(o, optarg));
    case O_INTERFERENCE_METRIC:
        if (sweep_knee_metric_parse(optarg, &o->interference_metric) ||
            (o->interference_metric != SWEEP_KNEE_TTFT_P99 &&
             o->interference_metric != SWEEP_KNEE_TPOT_P99 &&
             o->interference_metric != SWEEP_KNEE_E2EL_P99))
            return bad_opt("--interference-metric", "ttft.p99, tpot.p99 or e2el.p99", optarg);
        return ARG_NEXT;
    default:
        return ARG_NOT_MINE;
    }
}

/* "output:" in --help, then --help and --version, or an option getopt rejected. */
static int output_option(int c, struct sweep_opts *o)
{
    switch (c) {
    case O_OUT:
        o->out_dir = cmd_tidy_dir(optarg);
        return ARG_NEXT;
    case O_FORCE:
        o->force = true;
        return ARG_NEXT;
    case O_JSON:
        o->json = true;
        return ARG_NEXT;
    case O_UI: {
        char aerr[128];
        unsigned char ip[16];
        o->ui = optarg;
        if (addr_parse(optarg, "127.0.0.1", o->ui_host, &o->ui_port, aerr, sizeof(aerr)))
            return bad_opt("--ui", "HOST:PORT", optarg);
        if (inet_pton(AF_INET, o->ui_host, ip) != 1 && inet_pton(AF_INET6, o->ui_host, ip) != 1)
            return bad_opt("--ui", "an IP address and a port (e.g. 127.0.0.1:8089)", optarg);
        return ARG_NEXT;
    }
    case O_API_TOKEN:
        o->api_token = optarg;
        return ARG_NEXT;
    case O_API_INSECURE:
        o->api_insecure = true;
        return ARG_NEXT;
    case 'q':
        o->quiet = true;
        return ARG_NEXT;
    default: { /* -v, -h, --version, or what cmd_getopt said was wrong */
        int rc = cmd_common_flag(c == O_VERSION ? 'V' : c, usage);
        return rc >= 0 ? rc : ARG_NEXT;
    }
    }
}

/* Hands option c to its group; ARG_NEXT or an exit code. */
static int parse_option(int c, struct sweep_opts *o)
{
    static int (*const groups[])(int, struct sweep_opts *) = {
        plan_option,
        limit_option,
        check_option,
        output_option,
    };

    for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
        int rc = groups[i](c, o);
        if (rc != ARG_NOT_MINE)
            return rc;
    }
    return ARG_NOT_MINE; /* not reached: output_option takes everything left */
}

/* The run options after `--`, and what the options together must say. */
static int finish_args(int argc, char **argv, struct sweep_opts *o)
{
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
                        "--adaptive) or --interference; see 'tokenstorm sweep --help'\n");
        return TS_EXIT_USAGE;
    }
    if (o->ntenants == 1) {
        fprintf(stderr, "tokenstorm sweep: --interference needs exactly two tenants\n");
        return TS_EXIT_USAGE;
    }
    if (!o->mode)
        o->mode = "rate";
    return ARG_NEXT;
}

/* Returns -1 (ARG_NEXT) to go on, or the exit code to return. */
static int parse_args(int argc, char **argv, struct sweep_opts *o)
{
    int c;

    sweep_opts_defaults(o);
    optind = 1;
    while ((c = cmd_getopt("sweep", argc, argv, "qvh", sweep_options, NULL)) != -1) {
        int rc = parse_option(c, o);
        if (rc != ARG_NEXT)
            return rc;
    }
    return finish_args(argc, argv, o);
}

/* Options the sweep sets itself may not come through `--`. */
static int check_run_args(const struct sweep_opts *o, bool concurrency)
{
    char vary[40];
    const char *own[10] = {"--out", "--json", "--force"};
    size_t nowned = 3;

    if (o->ui) { /* each step's own dashboard */
        own[nowned++] = "--ui";
        own[nowned++] = "--metrics-listen";
    }
    if (o->vary[0]) {
        /* --vary: the load is the runs' own; only the varied option is the sweep's */
        snprintf(vary, sizeof(vary), "--%s", o->vary);
        own[nowned++] = vary;
    } else {
        own[nowned++] = "--rate";
        own[nowned++] = "--stages";
        own[nowned++] = "--ramp-to";
        if (concurrency)
            own[nowned++] = "--concurrency";
    }
    for (size_t i = 0; i < o->nrun_args; i++) {
        for (size_t k = 0; k < nowned; k++) {
            size_t l = strlen(own[k]);
            const char *a = o->run_args[i];
            if (!strncmp(a, own[k], l) && (a[l] == '\0' || a[l] == '=')) {
                fprintf(stderr,
                        "tokenstorm sweep: %s cannot be passed to the runs: the sweep sets it "
                        "for every step\n",
                        own[k]);
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

/*
 * The plan from the options: the list or ladder as a grid, bisection steps
 * (4 after an adaptive grid, else none unless --refine) and the run budget
 * (the plan's size unless --max-steps). 0 or TS_EXIT_USAGE.
 */
static int build_plan(const struct sweep_opts *o, struct sweep_config *cfg)
{
    bool conc = !strcmp(o->mode, "concurrency");
    int rc = 0;

    if (o->plan_name && (rc = check_run_args(o, conc)))
        return rc;
    cfg->mode = conc ? SWEEP_CONCURRENCY : SWEEP_RATE;
    cfg->plan.mode = cfg->mode;
    cfg->plan.tolerance = o->tolerance;
    cfg->plan.past_saturation = (unsigned)o->past_sat;
    cfg->plan_name = o->plan_name;
    if (o->plan_name && !strcmp(o->plan_name, "vary")) {
        rc = parse_list("--vary", o->list, true, &cfg->plan);
        cfg->vary = o->vary;
        cfg->plan.past_saturation = SWEEP_MAX_STEPS; /* every value: saturation is not the point */
    } else if (o->plan_name && !strcmp(o->plan_name, "list"))
        rc = parse_list(conc ? "--concurrencies" : "--rates", o->list, conc, &cfg->plan);
    else if (o->plan_name && !strcmp(o->plan_name, "ladder"))
        rc = parse_ladder(o->ladder, conc, &cfg->plan);
    if (rc)
        return rc;
    cfg->adaptive = o->plan_name && !strcmp(o->plan_name, "adaptive");
    cfg->adaptive_points = (size_t)o->points;
    cfg->sat_concurrency = (uint32_t)o->sat_conc;
    cfg->plan.refine = o->refine >= 0 ? (size_t)o->refine : cfg->adaptive ? 4 : 0;
    size_t planned = cfg->adaptive ? 2 + cfg->adaptive_points : cfg->plan.ngrid;
    cfg->max_steps = o->max_steps > 0 ? (size_t)o->max_steps : planned + cfg->plan.refine;
    if (cfg->max_steps > SWEEP_MAX_STEPS)
        cfg->max_steps = SWEEP_MAX_STEPS;
    if (cfg->adaptive && cfg->max_steps < 3) {
        fprintf(stderr, "tokenstorm sweep: --adaptive needs --max-steps 3 or more (two probes "
                        "and a step)\n");
        return TS_EXIT_USAGE;
    }
    return 0;
}

/* The job's options from the parsed ones: the plan, the runs, the checks, the output. */
static int build_job(const struct sweep_opts *o, struct sweep_job_opts *job)
{
    struct sweep_config *cfg = &job->cfg;
    int rc;

    memset(job, 0, sizeof(*job));
    if ((rc = build_plan(o, cfg)))
        return rc;
    cfg->run_args = o->run_args;
    cfg->nrun_args = o->nrun_args;
    cfg->slos = o->slos;
    cfg->nslos = o->nslos;
    cfg->step_timeout_ns = o->step_timeout_ns;
    cfg->acfg.knee_metric = o->knee_metric;
    cfg->acfg.knee_min_score = KNEE_MIN_SCORE;
    cfg->acfg.epsilon0 = o->error_level;
    cfg->acfg.fit_min_points = (size_t)o->fit_min;
    cfg->acfg.has_slos = o->nslos > 0;
    cfg->interference_metric = o->interference_metric;
    cfg->tenants = o->ntenants ? o->tenants : NULL;
    job->out_dir = o->out_dir;
    job->force = o->force;
    job->json = o->json;
    job->quiet = o->quiet;
    if (o->ui) {
        job->ui_host = o->ui_host;
        job->ui_port = o->ui_port;
        job->ui_token = o->ui_token;
    }
    return 0;
}

int cmd_sweep(int argc, char **argv)
{
    struct sweep_opts o;
    struct sweep_job_opts job;
    int rc = parse_args(argc, argv, &o);

    if (rc >= 0)
        return rc;
    if (o.ui && (rc = cmd_ctlauth_setup("tokenstorm sweep", "--ui", "the sweep's page (--ui)",
                                        o.ui_host, o.api_token, o.api_insecure, &o.ui_token)) >= 0)
        return rc;
    if ((rc = build_job(&o, &job)))
        return rc;
    return sweep_job_run(&job);
}
