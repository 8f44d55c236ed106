/*
 * cmd_common.c - steps more than one subcommand shares (cmd_common.h).
 */
#include <stdio.h>

#include "base/err.h"
#include "cmd/cmd_common.h"
#include "net/ctlauth.h"

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
