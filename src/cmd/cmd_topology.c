/*
 * cmd_topology.c - `tokenstorm topology`: the options; the job is
 * app/topology.h.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "app/topology.h"
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
        "usage: tokenstorm topology [--source DIR] [--traces FILE]... [--otlp-listen HOST:PORT]\n"
        "                           [options]\n"
        "\n"
        "Draws the dependency chain of an AI application (gateway, model service,\n"
        "vector/retrieval, infrastructure) from its Python source and its OpenTelemetry\n"
        "traces, merges the two, and flags risks: timeouts shorter than the callee's p99,\n"
        "retries multiplied along a path, missing timeouts, synchronous calls in streaming\n"
        "paths. See docs/TOPOLOGY.md.\n"
        "\n"
        "sources (at least one is required):\n"
        "  --source DIR        a Python application tree, read with python3's ast module\n"
        "                      (nothing of it is imported or run); unparseable files are\n"
        "                      reported as FILE:LINE and skipped\n"
        "  --traces FILE       OTLP/JSON traces: an export body or the Collector's file\n"
        "                      exporter output (JSON lines); repeatable\n"
        "  --otlp-listen H:P   receive OTLP/HTTP traces (POST /v1/traces, JSON, gzip or not;\n"
        "                      protobuf is answered 415) until SIGINT/SIGTERM, --listen-for\n"
        "                      or --until-spans\n"
        "options:\n"
        "  --listen-for DUR    stop receiving after DUR (e.g. 30s; default: at SIGINT/SIGTERM)\n"
        "  --until-spans N     stop receiving once N spans came (default: no limit)\n"
        "  --save-traces FILE  write what was received as OTLP/JSON lines (--traces reads it;\n"
        "                      default none)\n"
        "  --out DIR           write DIR/topology.json, .dot, .mmd, .svg and .html (the picture;\n"
        "                      default none: stdout only)\n"
        "  --format F          on stdout: text (default), json, dot, mermaid, svg, html\n"
        "  --python PATH       the interpreter (default $TOKENSTORM_PYTHON or python3)\n"
        "  --scan-timeout DUR  give up on the scan after DUR (default 120s)\n"
        "  -v, --verbose, -h, --help, --version\n"
        "\n"
        "examples:\n"
        "  tokenstorm topology --source ./app --format mermaid\n"
        "  tokenstorm topology --source ./app --traces traces.jsonl --out topo\n"
        "  tokenstorm topology --otlp-listen 127.0.0.1:4318 --listen-for 60s --out topo\n"
        "  tokenstorm report --format html -o report.html results/run1 topo   # in a report\n"
        "\n"
        "exit codes: 0 ok; 2 bad options or files; 3 python3 or the receiver failed;\n"
        "130 SIGINT, 143 SIGTERM (the graph of what came is still written)\n");
}

static int bad(const char *opt, const char *v)
{
    fprintf(stderr, "tokenstorm topology: %s: invalid value '%s'\n", opt, v);
    return TS_EXIT_USAGE;
}

static int parse_args(int argc, char **argv, struct topology_opts *o)
{
    enum { O_SRC = 256, O_TR, O_LISTEN, O_FOR, O_SPANS, O_SAVE, O_OUT, O_FMT, O_PY, O_STO };
    static const struct option opts[] = {
        {"source", required_argument, NULL, O_SRC},
        {"traces", required_argument, NULL, O_TR},
        {"otlp-listen", required_argument, NULL, O_LISTEN},
        {"listen-for", required_argument, NULL, O_FOR},
        {"until-spans", required_argument, NULL, O_SPANS},
        {"save-traces", required_argument, NULL, O_SAVE},
        {"out", required_argument, NULL, O_OUT},
        {"format", required_argument, NULL, O_FMT},
        {"python", required_argument, NULL, O_PY},
        {"scan-timeout", required_argument, NULL, O_STO},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    *o = (struct topology_opts){.scan_timeout_ns = 120000000000ull, .max_files = 20000};
    optind = 1;
    int c;
    while ((c = cmd_getopt("topology", argc, argv, "vh", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case O_SRC:
            o->source = optarg;
            break;
        case O_TR:
            if (o->n_traces >= TOPOLOGY_MAX_TRACE_FILES)
                return bad("--traces", "more than 64 files");
            o->traces[o->n_traces++] = optarg;
            break;
        case O_LISTEN:
            o->otlp_listen = optarg;
            break;
        case O_FOR:
            if (units_parse_duration_ns(optarg, &o->listen_ns) || !o->listen_ns)
                return bad("--listen-for", optarg);
            break;
        case O_SPANS:
            o->listen_spans = strtoull(optarg, &end, 10);
            if (*end || !*optarg || !o->listen_spans)
                return bad("--until-spans", optarg);
            break;
        case O_SAVE:
            o->save_traces = optarg;
            break;
        case O_OUT:
            o->out_dir = optarg;
            break;
        case O_FMT:
            if (strcmp(optarg, "text") && strcmp(optarg, "json") && strcmp(optarg, "dot") &&
                strcmp(optarg, "mermaid") && strcmp(optarg, "svg") && strcmp(optarg, "html"))
                return bad("--format", optarg);
            o->format = optarg;
            break;
        case O_PY:
            o->python = optarg;
            break;
        case O_STO:
            if (units_parse_duration_ns(optarg, &o->scan_timeout_ns) || !o->scan_timeout_ns)
                return bad("--scan-timeout", optarg);
            break;
        default: {
            int rc = cmd_common_flag(c, usage);
            if (rc >= 0)
                return rc;
            break;
        }
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tokenstorm topology: unexpected argument '%s'\n", argv[optind]);
        return TS_EXIT_USAGE;
    }
    if (!o->source && !o->n_traces && !o->otlp_listen) {
        fprintf(stderr, "tokenstorm topology: give --source, --traces or --otlp-listen\n");
        return TS_EXIT_USAGE;
    }
    if ((o->save_traces || o->listen_ns || o->listen_spans) && !o->otlp_listen) {
        fprintf(stderr, "tokenstorm topology: --save-traces, --listen-for and --until-spans "
                        "need --otlp-listen\n");
        return TS_EXIT_USAGE;
    }
    return -1;
}

int cmd_topology(int argc, char **argv)
{
    struct topology_opts o;
    int code = parse_args(argc, argv, &o);
    return code >= 0 ? code : topology_job(&o);
}
