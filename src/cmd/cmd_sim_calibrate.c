/*
 * tokenstorm sim calibrate - a simulator profile fitted to a real server's
 * results: the options; the fit is app/sim_calibrate.h.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/sim_calibrate.h"
#include "cmd/cmd.h"
#include "cmd/cmd_common.h"
#include "cmd/cmd_opts.h"
#include "ts_config.h"

#define CALIB_DEFAULT_PROFILE "llama3-8b-a100"
#define CALIB_MAX_SETS        64

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tokenstorm sim calibrate [OPTIONS] RESULT_DIR...\n\n"
            "Fits a simulator profile to measurements of your server: the result directories\n"
            "of `tokenstorm run` (open loop at a fixed --rate, or closed loop with --concurrency)\n"
            "and `tokenstorm sweep` against it. Each run is replayed by the engine model offline\n"
            "(virtual time, seconds for a whole sweep) and the chosen keys are moved until its\n"
            "median TTFT, median TPOT and output tokens/s match. Prints the profile as YAML\n"
            "(load it with `tokenstorm sim --config FILE`) with the error at every point and\n"
            "warnings where the model cannot fit.\n\n"
            "Results of runs with --server-metrics (vLLM, SGLang, TGI or the simulator) pin two\n"
            "keys before the fit: max_num_seqs, the most sequences running while requests\n"
            "waited (KV cache under 90%% full, seen at two scrapes or more of one run), and\n"
            "kv_capacity_tokens, the tokens the running sequences held (prompt, half the\n"
            "output) over the KV usage they showed. The YAML says which keys were fitted,\n"
            "which came from server metrics (and the evidence), and which were left at the\n"
            "base profile (and why). A key you --set (or --config) is kept, and written into\n"
            "the YAML with every other key that differs from the base preset.\n\n"
            "options:\n"
            "  --profile NAME     preset to start from and keep the other keys of "
            "(default " CALIB_DEFAULT_PROFILE ")\n"
            "  --config FILE.yaml start from a profile file instead (keys as for --set)\n"
            "  --set KEY=VALUE    fix a key of the starting profile (repeatable): the KV cache,\n"
            "                     max_num_seqs, sched_policy... what you know of your server\n"
            "  --fit KEY,KEY..    keys to fit, up to 8 numeric ones (default t_fix_ms,t_w_ms,\n"
            "                     b_ms_per_token,t_sample_ms_per_seq)\n"
            "  --max-evals N      bound of model evaluations (default 400)\n"
            "  --no-server-metrics  do not pin max_num_seqs and kv_capacity_tokens from the\n"
            "                     server metrics the results carry\n"
            "  -o, --output FILE  write the YAML there instead of stdout\n"
            "  -h, --help         this text\n\n"
            "exit: 0 fitted (warnings included), 2 bad options or unusable results, 3 the\n"
            "output cannot be written.\n\n"
            "example:\n"
            "  tokenstorm sweep --target http://gpu:8000 --concurrency 1,4,16,64 -o sw\n"
            "  tokenstorm sim calibrate --profile llama3-8b-h100 sw > mine.yaml\n"
            "  tokenstorm sim --config mine.yaml\n");
}

struct calib_cli {
    const char *profile, *config, *fit, *output;
    const char *sets[CALIB_MAX_SETS];
    size_t nsets;
    unsigned max_evals;
    bool no_server;
    char fitbuf[256];
};

/* --fit "a,b" into o->keys (pointing into c->fitbuf). Returns 0 or -EINVAL. */
static int split_keys(struct calib_cli *c, struct calib_opts *o)
{
    size_t len = strlen(c->fit);
    if (len == 0 || len >= sizeof(c->fitbuf))
        return -EINVAL;
    memcpy(c->fitbuf, c->fit, len + 1);
    size_t n = 0;
    for (char *save = NULL, *k = strtok_r(c->fitbuf, ",", &save); k;
         k = strtok_r(NULL, ",", &save)) {
        if (n == CALIB_KEYS_MAX)
            return -EINVAL;
        o->keys[n++] = k;
    }
    o->keys[n] = NULL;
    return n ? 0 : -EINVAL;
}

static int parse(int argc, char **argv, struct calib_cli *c)
{
    static const struct option opts[] = {
        {"profile", required_argument, NULL, 'p'},     {"config", required_argument, NULL, 'c'},
        {"set", required_argument, NULL, 's'},         {"fit", required_argument, NULL, 'f'},
        {"max-evals", required_argument, NULL, 'm'},   {"output", required_argument, NULL, 'o'},
        {"no-server-metrics", no_argument, NULL, 'n'}, {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},           {NULL, 0, NULL, 0},
    };
    int ch;
    optind = 1;
    while ((ch = cmd_getopt("sim calibrate", argc, argv, "o:h", opts, NULL)) != -1) {
        char *end;
        switch (ch) {
        case 'p':
            c->profile = optarg;
            break;
        case 'c':
            c->config = optarg;
            break;
        case 'f':
            c->fit = optarg;
            break;
        case 'o':
            c->output = optarg;
            break;
        case 'n':
            c->no_server = true;
            break;
        case 's':
            if (c->nsets == CALIB_MAX_SETS) {
                fprintf(stderr, "tokenstorm sim calibrate: too many --set options\n");
                return TS_EXIT_USAGE;
            }
            c->sets[c->nsets++] = optarg;
            break;
        case 'm':
            c->max_evals = (unsigned)strtoul(optarg, &end, 10);
            if (*end || c->max_evals < 10 || c->max_evals > 100000) {
                fprintf(stderr, "tokenstorm sim calibrate: --max-evals: 10 .. 100000\n");
                return TS_EXIT_USAGE;
            }
            break;
        default: {
            int rc = cmd_common_flag(ch, usage);
            if (rc >= 0)
                return rc;
            break;
        }
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "tokenstorm sim calibrate: give at least one RESULT_DIR\n");
        return TS_EXIT_USAGE;
    }
    return -1;
}

static int start_profile(const struct calib_cli *c, struct sim_profile *p)
{
    char err[512];
    if (sim_profile_preset(c->profile, p)) {
        fprintf(stderr, "tokenstorm sim calibrate: unknown profile '%s'\n", c->profile);
        return TS_EXIT_USAGE;
    }
    if (c->config && sim_profile_load_yaml(p, c->config, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm sim calibrate: %s\n", err);
        return TS_EXIT_USAGE;
    }
    for (size_t i = 0; i < c->nsets; i++) {
        if (sim_profile_set_kv(p, c->sets[i], err, sizeof(err))) {
            fprintf(stderr, "tokenstorm sim calibrate: --set %s: %s\n", c->sets[i], err);
            return TS_EXIT_USAGE;
        }
    }
    if (sim_profile_validate(p, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm sim calibrate: %s\n", err);
        return TS_EXIT_USAGE;
    }
    return -1;
}

/* Whether --set KEY=... was given. */
static bool was_set(const struct calib_cli *c, const char *key)
{
    size_t len = strlen(key);
    for (size_t i = 0; i < c->nsets; i++)
        if (strncmp(c->sets[i], key, len) == 0 && c->sets[i][len] == '=')
            return true;
    return false;
}

static int fit_and_print(struct calib_cli *c, struct calib_opts *o, struct sim_profile *p,
                         struct calib_point *pts, size_t n)
{
    char err[512];
    struct calib_pins pins;
    struct sim_profile b; /* a key --set or --config changed from the preset is kept */
    bool preset = sim_profile_preset(c->profile, &b) == 0;
    o->keep_seqs = was_set(c, "max_num_seqs") || (preset && b.max_num_seqs != p->max_num_seqs);
    o->keep_kv = was_set(c, "kv_capacity_tokens") ||
                 (preset && b.kv_capacity_tokens != p->kv_capacity_tokens);
    o->no_server = c->no_server;
    calib_pin(p, o, pts, n, &pins);
    if (calib_fit(p, o, pts, n, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm sim calibrate: %s\n", err);
        return TS_EXIT_USAGE;
    }
    FILE *out = c->output ? fopen(c->output, "w") : stdout;
    if (!out) {
        perror(c->output);
        return TS_EXIT_FAIL;
    }
    int warnings = calib_print(out, p, o, &pins, pts, n);
    if ((c->output && fclose(out) != 0) || (!c->output && fflush(out) != 0)) {
        fprintf(stderr, "tokenstorm sim calibrate: cannot write the profile\n");
        return TS_EXIT_FAIL;
    }
    if (warnings)
        fprintf(stderr,
                "tokenstorm sim calibrate: %d warning%s: the model does not fit every "
                "point (see the comments)\n",
                warnings, warnings == 1 ? "" : "s");
    return TS_EXIT_OK;
}

int cmd_sim_calibrate(int argc, char **argv)
{
    struct calib_cli c = {.profile = CALIB_DEFAULT_PROFILE,
                          .fit = "t_fix_ms,t_w_ms,b_ms_per_token,t_sample_ms_per_seq"};
    int rc = parse(argc, argv, &c);
    if (rc >= 0)
        return rc;
    struct calib_opts o = {.base = c.profile, .max_evals = c.max_evals};
    if (split_keys(&c, &o)) {
        fprintf(stderr, "tokenstorm sim calibrate: --fit: 1 to %d keys, comma-separated\n",
                CALIB_KEYS_MAX);
        return TS_EXIT_USAGE;
    }
    struct sim_profile p;
    if ((rc = start_profile(&c, &p)) >= 0)
        return rc;
    struct calib_point *pts = calloc(CALIB_POINTS_MAX, sizeof(*pts));
    if (!pts)
        return TS_EXIT_FAIL;
    size_t n = 0;
    char err[512];
    for (int i = optind; i < argc; i++) {
        if (calib_load_dir(argv[i], pts, &n, err, sizeof(err))) {
            fprintf(stderr, "tokenstorm sim calibrate: %s\n", err);
            free(pts);
            return TS_EXIT_USAGE;
        }
    }
    rc = fit_and_print(&c, &o, &p, pts, n);
    free(pts);
    return rc;
}
