/*
 * cmd_opts.c - the command table, getopt with our messages, hidden aliases
 * and option-table capture (cmd_opts.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "base/strdist.h"
#include "cmd/cmd.h"
#include "cmd/cmd_opts.h"
#include "ts_config.h"

#define OPTS_MAX 512 /* long options of one command we look at */

static const struct cmd_desc commands[] = {
    {"run", cmd_run, "load-test an OpenAI-compatible service (default: the built-in simulator)",
     NULL},
    {"sim", cmd_sim, "an OpenAI-compatible simulator of a continuous-batching LLM server", NULL},
    {"proxy", cmd_proxy, "a chaos proxy: HTTP, SSE, LLM and RAG faults in front of a service",
     NULL},
    {"chaos", cmd_chaos, "run a chaos experiment: load, fault phases, steady-state verdict", NULL},
    {"topology", cmd_topology, "the dependency chain from Python source and OpenTelemetry traces",
     NULL},
    {"compare", cmd_compare, "compare two runs: changes, significance, regression verdict", NULL},
    {"merge", cmd_merge, "merge the results of several processes or machines into one", NULL},
    {"sweep", cmd_sweep, "run a series of loads: the knee, the max goodput, the critical load",
     "run"},
    {"report", cmd_report, "result files into text, CSV, JSON or a self-contained HTML page", NULL},
    {"help", cmd_help, "show the help of a command: tokenstorm help COMMAND", NULL},
    {"completion", cmd_completion, "print a bash, zsh or fish completion script", NULL},
    {"version", cmd_version, "print the version", NULL},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

const struct cmd_alias cmd_aliases[] = {
    {"proxy", "connect-timeout", "timeout-connect"},
    {"sim", "output-len", "answer-len"},
    {NULL, NULL, NULL},
};

const struct cmd_desc *cmd_table(size_t *n)
{
    *n = NCOMMANDS;
    return commands;
}

const struct cmd_desc *cmd_find(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(commands[i].name, name))
            return &commands[i];
    return NULL;
}

void cmd_main_usage(FILE *out)
{
    fprintf(out,
            "tokenstorm %s - load, chaos and SLA testing for LLM services\n\n"
            "usage: tokenstorm COMMAND [OPTIONS]\n\ncommands:\n",
            TS_VERSION);
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  %-11s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nWith no option, `tokenstorm run` loads the built-in simulator for 20s,\n"
                 "open loop, Poisson arrivals at 10 requests/s.\n"
                 "Run 'tokenstorm COMMAND --help' (or 'tokenstorm help COMMAND') for a command's\n"
                 "options, defaults and examples; docs/CLI.md for the conventions they share.\n"
                 "\nexamples:\n"
                 "  tokenstorm run --duration 10s\n"
                 "  tokenstorm help run\n"
                 "  tokenstorm --version\n");
}

int cmd_unknown_command(const char *name)
{
    const char *names[NCOMMANDS + 1];
    for (size_t i = 0; i < NCOMMANDS; i++)
        names[i] = commands[i].name;
    const char *near = str_closest(name, strlen(name), names, NCOMMANDS, 2);
    fprintf(stderr, "tokenstorm: unknown command '%.64s'", name);
    if (near)
        fprintf(stderr, " (did you mean '%s'?)", near);
    fprintf(stderr, "; see 'tokenstorm --help'\n");
    return TS_EXIT_USAGE;
}

bool cmd_option_hidden(const char *cmd, const char *name)
{
    for (const struct cmd_alias *a = cmd_aliases; a->cmd; a++)
        if (!strcmp(a->cmd, cmd) && !strcmp(a->alias, name))
            return true;
    return false;
}

/* ---- capture ---------------------------------------------------------------- */

static struct {
    bool on, got;
    const struct option *longopts;
    const char *shortopts;
} capture;

int cmd_options_of(const char *cmd, const struct option **longopts, const char **shortopts)
{
    const struct cmd_desc *d = cmd_find(cmd);
    if (!d || d->fn == cmd_help || d->fn == cmd_completion || d->fn == cmd_version)
        return -ENOENT;
    int saved_optind = optind, saved_opterr = opterr, saved_optopt = optopt;
    char *saved_optarg = optarg;
    char name[32];
    snprintf(name, sizeof name, "%s", cmd);
    char *argv[] = {name, NULL};
    capture.on = true;
    capture.got = false;
    (void)d->fn(1, argv);
    capture.on = false;
    optind = saved_optind;
    opterr = saved_opterr;
    optopt = saved_optopt;
    optarg = saved_optarg;
    if (!capture.got)
        return -ENOENT;
    *longopts = capture.longopts;
    *shortopts = capture.shortopts;
    return 0;
}

/* ---- errors -------------------------------------------------------------------- */

/* The option of longopts called name[0..len), or NULL. */
static const struct option *long_named(const struct option *longopts, const char *name, size_t len)
{
    for (const struct option *o = longopts; o->name; o++)
        if (strlen(o->name) == len && !strncmp(o->name, name, len))
            return o;
    return NULL;
}

/*
 * Prints the long options name[0..len) abbreviates into buf when they are
 * two or more different options (getopt's "ambiguous"); returns how many.
 */
static size_t ambiguous(const struct option *longopts, const char *name, size_t len, char *buf,
                        size_t cap)
{
    size_t n = 0, used = 0;
    int first_val = 0;
    buf[0] = '\0';
    for (const struct option *o = longopts; o->name; o++) {
        if (strncmp(o->name, name, len))
            continue;
        if (n && o->val == first_val)
            continue;
        if (!n)
            first_val = o->val;
        n++;
        int w = snprintf(buf + used, cap - used, "%s--%s", used ? ", " : "", o->name);
        if (w < 0 || (size_t)w >= cap - used)
            break;
        used += (size_t)w;
    }
    return n;
}

/* The nearest visible long option to name[0..len), or NULL. */
static const char *nearest(const char *cmd, const struct option *longopts, const char *name,
                           size_t len)
{
    const char *cands[OPTS_MAX];
    size_t n = 0;
    for (const struct option *o = longopts; o->name && n < OPTS_MAX; o++)
        cands[n++] = o->name;
    const char *near = str_closest(name, len, cands, n, len >= 8 ? 3 : 2);
    if (near && cmd_option_hidden(cmd, near)) {
        for (const struct cmd_alias *a = cmd_aliases; a->cmd; a++)
            if (!strcmp(a->cmd, cmd) && !strcmp(a->alias, near))
                return a->canonical;
    }
    return near;
}

/*
 * An unknown --name: the nearest option of this command, or where it goes
 * when it is one of the command this one passes options to.
 */
static void unknown_long(const char *cmd, const struct option *longopts, const char *name,
                         size_t len)
{
    const struct cmd_desc *d = cmd_find(cmd);
    const struct option *to_long = NULL;
    const char *to_short = NULL;
    bool passes = d && d->passes_to && cmd_options_of(d->passes_to, &to_long, &to_short) == 0;
    if (passes && long_named(to_long, name, len)) {
        fprintf(stderr,
                "tokenstorm %s: '--%.*s' is a %s option: put it after `--` (tokenstorm %s "
                "... -- --%.*s ...)",
                cmd, (int)len, name, d->passes_to, cmd, (int)len, name);
        return;
    }
    const char *near = nearest(cmd, longopts, name, len);
    fprintf(stderr, "tokenstorm %s: unknown option '--%.*s'", cmd, (int)len, name);
    if (near)
        fprintf(stderr, " (did you mean '--%s'?)", near);
    else if (passes && (near = nearest(d->passes_to, to_long, name, len)))
        fprintf(stderr, " (did you mean the %s option '--%s', after `--`?)", d->passes_to, near);
}

/* A bad -c (in a cluster like -qx too); "-rate" is taken for "--rate". */
static void bad_short(const char *cmd, const struct option *longopts, const char *elem, int c,
                      bool missing)
{
    if (missing) {
        fprintf(stderr, "tokenstorm %s: option '-%c' needs a value", cmd, c);
        return;
    }
    fprintf(stderr, "tokenstorm %s: unknown option '-%c'", cmd, c);
    if (elem && elem[0] == '-' && elem[1] != '-' && strlen(elem) > 2) {
        const char *eq = strchr(elem + 1, '=');
        size_t len = eq ? (size_t)(eq - elem - 1) : strlen(elem + 1);
        if (long_named(longopts, elem + 1, len))
            fprintf(stderr, " (did you mean '-%.*s'?)", (int)len + 1, elem);
    }
}

/* The message for getopt's '?' or ':' at argv[optind - 1] (short option optopt). */
static void report_bad(const char *cmd, int argc, char **argv, const struct option *longopts,
                       int rc)
{
    const char *elem = optind >= 1 && optind - 1 < argc ? argv[optind - 1] : NULL;
    /* inside a cluster (-qx, -rate) getopt has not stepped past the word yet */
    if (rc != ':' && optopt && optind < argc && argv[optind][0] == '-' && argv[optind][1] != '-' &&
        strchr(argv[optind] + 1, optopt))
        elem = argv[optind];
    bool is_long = elem && !strncmp(elem, "--", 2) && elem[2];
    if (is_long) {
        const char *name = elem + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        char list[256];
        size_t matches =
            long_named(longopts, name, len) ? 1 : ambiguous(longopts, name, len, list, sizeof list);
        if (matches >= 2)
            fprintf(stderr, "tokenstorm %s: option '--%.*s' is ambiguous (%s)", cmd, (int)len, name,
                    list);
        else if (matches == 1 && rc == ':')
            fprintf(stderr, "tokenstorm %s: option '--%.*s' needs a value", cmd, (int)len, name);
        else if (matches == 1)
            fprintf(stderr, "tokenstorm %s: option '--%.*s' takes no value", cmd, (int)len, name);
        else
            unknown_long(cmd, longopts, name, len);
    } else {
        bad_short(cmd, longopts, elem, optopt, rc == ':');
    }
    fprintf(stderr, "; see 'tokenstorm %s --help'\n", cmd);
}

int cmd_getopt(const char *cmd, int argc, char **argv, const char *shortopts,
               const struct option *longopts, int *longindex)
{
    char so[64];
    if (capture.on) {
        capture.got = true;
        capture.longopts = longopts;
        capture.shortopts = shortopts;
        return CMD_OPT_BAD;
    }
    snprintf(so, sizeof so, ":%s", shortopts);
    opterr = 0;
    int rc = getopt_long(argc, argv, so, longopts, longindex);
    if (rc == '?' || rc == ':') {
        report_bad(cmd, argc, argv, longopts, rc);
        return CMD_OPT_BAD;
    }
    return rc;
}

/* ---- help ------------------------------------------------------------------------ */

int cmd_help(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        cmd_main_usage(stdout);
        return TS_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version"))
        return cmd_version(1, argv);
    const struct cmd_desc *d = cmd_find(argv[1]);
    if (!d)
        return cmd_unknown_command(argv[1]);
    if (d->fn == cmd_help) {
        cmd_main_usage(stdout);
        return TS_EXIT_OK;
    }
    char name[32], help[] = "--help";
    snprintf(name, sizeof name, "%s", d->name);
    char *args[] = {name, help, NULL};
    optind = 1;
    return d->fn(2, args);
}
