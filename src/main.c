/*
 * tokenstorm - load, chaos and SLA testing for LLM services.
 * This file is only the subcommand table; each command lives in src/cmd/.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

#include "cmd/cmd.h"
#include "ts_config.h"

struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    {"run", cmd_run, "load-test an OpenAI-compatible service (default: the built-in simulator)"},
    {"sim", cmd_sim, "an OpenAI-compatible simulator of a continuous-batching LLM server"},
    {"proxy", cmd_proxy, "a chaos proxy: HTTP, SSE, LLM and RAG faults in front of a service"},
    {"chaos", cmd_chaos, "run a chaos experiment: load, fault phases, steady-state verdict"},
    {"topology", cmd_topology, "the dependency chain from Python source and OpenTelemetry traces"},
    {"compare", cmd_compare, "compare two runs: changes, significance, regression verdict"},
    {"merge", cmd_merge, "merge the results of several processes or machines into one"},
    {"sweep", cmd_sweep, "run a series of loads: the knee, the max goodput, the critical load"},
    {"report", cmd_report, "result files into text, CSV, JSON or a self-contained HTML page"},
    {"version", cmd_version, "print the version"},
};

static void usage(FILE *out)
{
    fprintf(out,
            "tokenstorm %s - load, chaos and SLA testing for LLM services\n\n"
            "usage: tokenstorm COMMAND [OPTIONS]\n\ncommands:\n",
            TS_VERSION);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nRun 'tokenstorm COMMAND --help' for a command's options and examples.\n");
}

/*
 * Process-wide settings every command needs: a peer that closes a socket
 * must give EPIPE, not kill the process; thousands of streams need as many
 * file descriptors as the hard limit allows.
 *
 * The kernel's descriptor table is grown here, once, while the process has
 * one thread: growing it later, in a process with several threads, waits for
 * an RCU grace period (expand_fdtable -> synchronize_rcu) inside socket() or
 * accept(), which stalled a worker 5-20 ms each time the table doubled while
 * it opened thousands of connections (bench/README.md).
 */
#define FD_TABLE_PREGROW 65536
static void process_setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            (void)getrlimit(RLIMIT_NOFILE, &rl);
    }
    rlim_t top = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > FD_TABLE_PREGROW ? FD_TABLE_PREGROW
                                                                                : rl.rlim_cur;
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && top > (rlim_t)fd + 1) {
        int hi = dup2(fd, (int)(top - 1));
        if (hi >= 0)
            close(hi);
    }
    if (fd >= 0)
        close(fd);
}

int main(int argc, char **argv)
{
    process_setup();
    if (argc < 2) {
        usage(stderr);
        return TS_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help")) {
        usage(stdout);
        return TS_EXIT_OK;
    }
    if (!strcmp(name, "--version"))
        return cmd_version(argc - 1, argv + 1);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(name, commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "tokenstorm: unknown command '%s'\n\n", name);
    usage(stderr);
    return TS_EXIT_USAGE;
}
