/*
 * cmd.h - the subcommands. Each takes the arguments after its name (argv[0]
 * is the subcommand name) and returns the process exit code:
 * 0 ok, 1 an SLO or threshold failed, 2 usage or config error,
 * 3 the run could not be carried out, 130 interrupted (SIGINT),
 * 143 stopped by SIGTERM (base/err.h's TS_EXIT_*).
 */
#ifndef TS_CMD_CMD_H
#define TS_CMD_CMD_H

#include "base/err.h"

int cmd_version(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_sim_calibrate(int argc, char **argv); /* `sim calibrate`, argv[0] = "calibrate" */
int cmd_run(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_proxy(int argc, char **argv);
int cmd_chaos(int argc, char **argv);
int cmd_topology(int argc, char **argv);
int cmd_chaos_suggest(int argc, char **argv); /* `chaos suggest` (cmd_suggest.c) */

#endif
