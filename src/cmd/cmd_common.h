/*
 * cmd_common.h - steps that more than one subcommand takes the same way.
 * Like the subcommands' own steps they return -1 to go on, or the exit code
 * with the message already printed on stderr.
 */
#ifndef TS_CMD_CMD_COMMON_H
#define TS_CMD_CMD_COMMON_H

#include <stdbool.h>
#include <stdio.h>

/*
 * Decides with ctlauth_setup() (net/ctlauth.h) whether the control surface
 * `what` ("the control API") may listen on host, and prints what it says on
 * stderr, each line starting with prog ("tokenstorm proxy"): a refusal as
 * "PROG: OPTION: ERROR" ("PROG: ERROR" when option is NULL), a warning
 * (--api-insecure on a routable host) as "PROG: WARNING". token is the
 * --api-token value or NULL (then TOKENSTORM_API_TOKEN); *token_out is the
 * token to enforce, borrowed from token or the environment, or NULL for none.
 * Returns -1 to go on (after a warning too), or TS_EXIT_USAGE when refused.
 */
int cmd_ctlauth_setup(const char *prog, const char *option, const char *what, const char *host,
                      const char *token, bool insecure, const char **token_out);

/*
 * A directory given on the command line, tidied in place so that the paths
 * printed with it have no double slash: trailing slashes dropped ("out/" ->
 * "out"; "/" stays) and runs of slashes made one ("a//b" -> "a/b").
 * Returns path (NULL stays NULL).
 */
char *cmd_tidy_dir(char *path);

/*
 * The flags every command shares, as getopt returns them: 'v' (--verbose:
 * debug logging), 'h' (--help: usage on stdout) and 'V' (--version).
 * Returns -1 to go on (after 'v'), TS_EXIT_OK after 'h' or 'V', and
 * TS_EXIT_USAGE for anything else (cmd_getopt has said what was wrong).
 */
int cmd_common_flag(int c, void (*usage)(FILE *out));

#endif
