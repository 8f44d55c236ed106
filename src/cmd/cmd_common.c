/*
 * cmd_common.c - steps more than one subcommand shares (cmd_common.h).
 */
#include <stdio.h>

#include "base/err.h"
#include "base/log.h"
#include "cmd/cmd_common.h"
#include "net/ctlauth.h"
#include "ts_config.h"

int cmd_ctlauth_setup(const char *prog, const char *option, const char *what, const char *host,
                      const char *token, bool insecure, const char **token_out)
{
    char warn[512], err[1024];
    if (ctlauth_setup(what, host, token, insecure, token_out, warn, sizeof warn, err, sizeof err)) {
        if (option)
            fprintf(stderr, "%s: %s: %s\n", prog, option, err);
        else
            fprintf(stderr, "%s: %s\n", prog, err);
        return TS_EXIT_USAGE;
    }
    if (warn[0])
        fprintf(stderr, "%s: %s\n", prog, warn);
    return -1;
}

char *cmd_tidy_dir(char *path)
{
    if (!path)
        return NULL;
    size_t w = 0;
    for (size_t r = 0; path[r]; r++)
        if (!(path[r] == '/' && w > 0 && path[w - 1] == '/'))
            path[w++] = path[r];
    while (w > 1 && path[w - 1] == '/')
        w--;
    path[w] = '\0';
    return path;
}

int cmd_common_flag(int c, void (*usage)(FILE *out))
{
    switch (c) {
    case 'v':
        ts_log_set_level(TS_LOG_DEBUG);
        return -1;
    case 'h':
        usage(stdout);
        return TS_EXIT_OK;
    case 'V':
        printf("tokenstorm %s\n", TS_VERSION);
        return TS_EXIT_OK;
    default: /* cmd_getopt said what was wrong */
        return TS_EXIT_USAGE;
    }
}
