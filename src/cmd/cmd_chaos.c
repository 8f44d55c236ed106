/*
 * cmd_chaos.c - `tokenstorm chaos EXPERIMENT.yaml`: the options; the run of
 * the experiment is app/chaos_run.h.
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "app/chaos_run.h"
#include "cmd/cmd.h"
#include "cmd/cmd_common.h"
#include "cmd/cmd_opts.h"
#include "net/addr.h"
#include "ts_config.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tokenstorm chaos EXPERIMENT.yaml [options]\n"
            "       tokenstorm chaos suggest --topology FILE [options] (see chaos suggest --help)\n"
            "\n"
            "Runs a chaos experiment: the load of the file as a `tokenstorm run`, its fault\n"
            "phases against proxies (control API) and simulators (admin API) at their offsets,\n"
            "the rollbacks, then judges the steady-state hypothesis before, during and after\n"
            "the faults. See docs/CHAOS.md, \"Experiments\".\n"
            "\n"
            "options:\n"
            "  --out DIR       results (default ./tokenstorm-results/<time>-chaos):\n"
            "                  DIR/experiment.json, DIR/run.txt, the run in DIR/run (result.json\n"
            "                  with the fault windows, requests.jsonl); refused if it holds\n"
            "                  results or another process writes it\n"
            "  --force         remove the results already in --out first (experiment.json,\n"
            "                  run.txt, run/ and what the run wrote in it; nothing else)\n"
            "  --check         validate the file (faults, SLOs, timing; several files may be\n"
            "                  given) and exit\n"
            "  --ui H:P        a live page at http://H:P/ (loopback by default): the phases\n"
            "                  as they are applied and removed, the load's own dashboard\n"
            "                  (its `run --ui` on the same host, a free port), the windows\n"
            "                  and the verdict once judged; a stop button that stops the\n"
            "                  experiment as Ctrl-C does (rollbacks run, results written)\n"
            "  --api-token TOKEN  the token --ui wants on a routable address (or\n"
            "                  $TOKENSTORM_API_TOKEN); --api-insecure: none\n"
            "  -q, --quiet     no progress or status lines (errors and the result still print):\n"
            "                  the verdict only\n"
            "  -v, --verbose   debug logging\n"
            "  -h, --help      this text\n"
            "      --version   print the version\n"
            "\n"
            "examples (each file says which simulator and proxy it needs):\n"
            "  tokenstorm chaos --check examples/chaos/429-storm.yaml\n"
            "  tokenstorm chaos examples/chaos/429-storm.yaml --out storm\n"
            "\n"
            "exit codes: 0 steady, deviated or recovered; 1 not recovered or not steady before\n"
            "the faults; 2 bad file or options; 3 the experiment could not run; 130 SIGINT,\n"
            "143 SIGTERM\n");
}

/* --ui, --api-token, --api-insecure */
struct ui_opts {
    const char *ui, *api_token;
    char host[ADDR_HOST_MAX];
    bool insecure;
};

/* --ui HOST:PORT: an IP address and a port. 0 or TS_EXIT_USAGE. */
static int parse_ui(const char *s, struct ui_opts *u, struct chaos_opts *o)
{
    char aerr[128];
    unsigned char ip[16];
    if (addr_parse(s, "127.0.0.1", u->host, &o->ui_port, aerr, sizeof(aerr)) ||
        (inet_pton(AF_INET, u->host, ip) != 1 && inet_pton(AF_INET6, u->host, ip) != 1)) {
        fprintf(stderr,
                "tokenstorm chaos: --ui: expected an IP address and a port (e.g. "
                "127.0.0.1:8089), got '%s'\n",
                s);
        return TS_EXIT_USAGE;
    }
    u->ui = s;
    o->ui_host = u->host;
    return 0;
}

/* argv into o. Returns -1 to go on, or the exit code (help, a bad option). */
static int parse_args(int argc, char **argv, struct chaos_opts *o, struct ui_opts *u)
{
    enum { OPT_OUT = 256, OPT_CHECK, OPT_FORCE, OPT_VERSION, OPT_UI, OPT_TOKEN, OPT_INSECURE };
    static const struct option opts[] = {
        {"out", required_argument, NULL, OPT_OUT},
        {"check", no_argument, NULL, OPT_CHECK},
        {"force", no_argument, NULL, OPT_FORCE},
        {"quiet", no_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {"ui", required_argument, NULL, OPT_UI},
        {"api-token", required_argument, NULL, OPT_TOKEN},
        {"api-insecure", no_argument, NULL, OPT_INSECURE},
        {NULL, 0, NULL, 0},
    };
    int c;
    *o = (struct chaos_opts){.out_dir = NULL};
    optind = 1;
    while ((c = cmd_getopt("chaos", argc, argv, "qvh", opts, NULL)) != -1) {
        switch (c) {
        case OPT_UI:
            if (parse_ui(optarg, u, o))
                return TS_EXIT_USAGE;
            break;
        case OPT_TOKEN:
            u->api_token = optarg;
            break;
        case OPT_INSECURE:
            u->insecure = true;
            break;
        case OPT_OUT:
            o->out_dir = cmd_tidy_dir(optarg);
            break;
        case OPT_CHECK:
            o->check = true;
            break;
        case OPT_FORCE:
            o->force = true;
            break;
        case 'q':
            o->quiet = true;
            break;
        default: { /* -v, -h, --version, or what cmd_getopt said was wrong */
            int rc = cmd_common_flag(c == OPT_VERSION ? 'V' : c, usage);
            if (rc >= 0)
                return rc;
            break;
        }
        }
    }
    if (optind == argc || (optind != argc - 1 && !o->check)) {
        fprintf(stderr, "tokenstorm chaos: %s; see 'tokenstorm chaos --help'\n",
                optind < argc ? "one experiment file at most (several with --check)"
                              : "give the experiment file");
        return TS_EXIT_USAGE;
    }
    o->file = argv[optind];
    return -1;
}

/* --check FILE...: each file validated; the worst exit code. */
int cmd_chaos(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "suggest"))
        return cmd_chaos_suggest(argc - 1, argv + 1);
    struct chaos_opts o;
    struct ui_opts u = {0};
    int rc = parse_args(argc, argv, &o, &u), worst = TS_EXIT_OK;
    if (rc >= 0)
        return rc;
    if (u.ui && !o.check &&
        (rc = cmd_ctlauth_setup("tokenstorm chaos", "--ui", "the experiment's page (--ui)", u.host,
                                u.api_token, u.insecure, &o.ui_token)) >= 0)
        return rc;
    for (int i = optind; i < argc; i++) {
        o.file = argv[i];
        rc = chaos_run(&o);
        worst = rc > worst ? rc : worst;
    }
    return worst;
}
