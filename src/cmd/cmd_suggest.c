/*
 * cmd_suggest.c - `tokenstorm chaos suggest`: the options; the job is
 * app/suggest.h.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/suggest.h"
#include "base/log.h"
#include "base/units.h"
#include "cmd/cmd.h"
#include "cmd/cmd_common.h"
#include "cmd/cmd_opts.h"
#include "ts_config.h"

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: tokenstorm chaos suggest [--topology FILE] [--result DIR] [options]\n"
        "\n"
        "Ranks the fault-mode catalogue against an application's topology (the JSON of\n"
        "`tokenstorm topology`) by risk x coverage, spread over the service, middleware\n"
        "and infrastructure layers, and writes the best as experiment files that\n"
        "`tokenstorm chaos` runs as they are. See docs/CHAOS.md, \"Suggested experiments\".\n"
        "\n"
        "options:\n"
        "  --topology FILE    topology.json from tokenstorm topology\n"
        "  --result DIR       a run's result directory (streaming, 429s, 5xx, timeouts,\n"
        "                     cut streams, tenants, KV-cache pressure); at least one of the two\n"
        "  --catalogue FILE   fault modes of your own (YAML; repeatable; an id already\n"
        "                     known replaces the built-in mode)\n"
        "  --max N            suggestions at most (default 5)\n"
        "  --out DIR          write DIR/NN-MODE.yaml and DIR/suggestions.json\n"
        "  --format F         on stdout: text (default) or json\n"
        "experiments:\n"
        "  --target URL       the load's target (default: the result's, else\n"
        "                     http://127.0.0.1:9000/v1)\n"
        "  --proxy-api URL    the proxy's control API (default http://127.0.0.1:9001)\n"
        "  --sim-admin URL    the simulator's admin API (default http://127.0.0.1:8000)\n"
        "  --rate R           the load's rate (default 4)\n"
        "  --at DUR           the fault's start after the load's (default 5s)\n"
        "  --for DUR          every fault's length (default: the mode's)\n"
        "  --recover DUR      load after the fault (default 10s)\n"
        "  --load-arg ARG     appended to the load's arguments (repeatable)\n"
        "  -v, --verbose, -h, --help\n"
        "\n"
        "examples:\n"
        "  tokenstorm topology --source ./app --traces traces.jsonl --out topo\n"
        "  tokenstorm chaos suggest --topology topo/topology.json --out experiments\n"
        "  tokenstorm chaos experiments/01-*.yaml --out run1\n"
        "\n"
        "exit codes: 0 ok; 2 bad options, topology or catalogue; 3 cannot write\n");
}

static int bad(const char *opt, const char *v)
{
    fprintf(stderr, "tokenstorm chaos suggest: %s: invalid value '%s'\n", opt, v);
    return TS_EXIT_USAGE;
}

enum suggest_opt {
    O_TOPO = 256,
    O_RES,
    O_CAT,
    O_MAX,
    O_OUT,
    O_FMT,
    O_TGT,
    O_API,
    O_SIM,
    O_RATE,
    O_AT,
    O_FOR,
    O_REC,
    O_LARG
};

/* The load's rate and the phase's timing options; nonzero (reported) when bad. */
static int parse_timing(int c, const char *arg, struct suggest_opts *o)
{
    double rate;
    switch (c) {
    case O_RATE:
        if (units_parse_rate(arg, &rate) || !(rate > 0))
            return bad("--rate", arg);
        o->rate = arg;
        return 0;
    case O_AT:
        return units_parse_duration_ns(arg, &o->at_ns) || !o->at_ns ? bad("--at", arg) : 0;
    case O_FOR:
        return units_parse_duration_ns(arg, &o->for_ns) || !o->for_ns ? bad("--for", arg) : 0;
    default:
        return units_parse_duration_ns(arg, &o->recover_ns) || !o->recover_ns
                   ? bad("--recover", arg)
                   : 0;
    }
}

static int parse_args(int argc, char **argv, struct suggest_opts *o)
{

    static const struct option opts[] = {
        {"topology", required_argument, NULL, O_TOPO},
        {"result", required_argument, NULL, O_RES},
        {"catalogue", required_argument, NULL, O_CAT},
        {"max", required_argument, NULL, O_MAX},
        {"out", required_argument, NULL, O_OUT},
        {"format", required_argument, NULL, O_FMT},
        {"target", required_argument, NULL, O_TGT},
        {"proxy-api", required_argument, NULL, O_API},
        {"sim-admin", required_argument, NULL, O_SIM},
        {"rate", required_argument, NULL, O_RATE},
        {"at", required_argument, NULL, O_AT},
        {"for", required_argument, NULL, O_FOR},
        {"recover", required_argument, NULL, O_REC},
        {"load-arg", required_argument, NULL, O_LARG},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    *o = (struct suggest_opts){.max = 5,
                               .target = NULL,
                               .proxy_api = "http://127.0.0.1:9001",
                               .sim_admin = "http://127.0.0.1:8000",
                               .rate = "4",
                               .at_ns = 5000000000ull,
                               .recover_ns = 10000000000ull};
    optind = 1;
    int c;
    char *end;
    while ((c = cmd_getopt("chaos suggest", argc, argv, "vh", opts, NULL)) != -1) {
        switch (c) {
        case O_TOPO:
            o->topology = optarg;
            break;
        case O_RES:
            o->result = optarg;
            break;
        case O_CAT:
            if (o->n_catalogues >= SUGGEST_MAX_CATALOGUES)
                return bad("--catalogue", "more than 16 files");
            o->catalogues[o->n_catalogues++] = optarg;
            break;
        case O_MAX:
            o->max = strtoul(optarg, &end, 10);
            if (*end || !*optarg || !o->max || o->max > 100)
                return bad("--max", optarg);
            break;
        case O_OUT:
            o->out_dir = optarg;
            break;
        case O_FMT:
            if (strcmp(optarg, "text") && strcmp(optarg, "json"))
                return bad("--format", optarg);
            o->format = optarg;
            break;
        case O_TGT:
            o->target = optarg;
            break;
        case O_API:
            o->proxy_api = optarg;
            break;
        case O_SIM:
            o->sim_admin = optarg;
            break;
        case O_RATE:
        case O_AT:
        case O_FOR:
        case O_REC:
            if (parse_timing(c, optarg, o))
                return TS_EXIT_USAGE;
            break;
        case O_LARG:
            if (o->n_load_args >= SUGGEST_MAX_LOAD_ARGS)
                return bad("--load-arg", "more than 32");
            o->load_args[o->n_load_args++] = optarg;
            break;
        default: {
            int rc = cmd_common_flag(c, usage);
            if (rc >= 0)
                return rc;
            break;
        }
        }
    }
    if (optind < argc)
        return bad("argument", argv[optind]);
    if (!o->topology && !o->result) {
        fprintf(stderr, "tokenstorm chaos suggest: give --topology FILE, --result DIR or both\n");
        return TS_EXIT_USAGE;
    }
    return -1;
}

int cmd_chaos_suggest(int argc, char **argv)
{
    struct suggest_opts o;
    int code = parse_args(argc, argv, &o);
    return code >= 0 ? code : suggest_job(&o);
}
