/*
 * tokenstorm - load, chaos and SLA testing for LLM services.
 * This file only finds the subcommand (src/cmd/cmd_opts.c holds the table).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

#include "cmd/cmd.h"
#include "base/log.h"
#include "cmd/cmd_opts.h"
#include "ts_config.h"

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
        cmd_main_usage(stderr);
        return TS_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
        cmd_main_usage(stdout);
        return TS_EXIT_OK;
    }
    if (!strcmp(name, "--version"))
        return cmd_version(argc - 1, argv + 1);
    const struct cmd_desc *d = cmd_find(name);
    if (!d)
        return cmd_unknown_command(name);
    static char prog[48];
    snprintf(prog, sizeof prog, "tokenstorm %s", d->name);
    ts_log_set_prog(prog);
    return d->fn(argc - 1, argv + 1);
}
