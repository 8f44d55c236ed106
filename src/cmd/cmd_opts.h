/*
 * cmd_opts.h - what every subcommand's command line has in common: the
 * table of commands, getopt_long with one-line errors that suggest the
 * nearest option, hidden aliases (old spellings kept working) and access to
 * a command's own option table, from which `tokenstorm completion` writes
 * the shell completions. Nothing here lists a command's options: each
 * command's getopt table is the one source.
 */
#ifndef TS_CMD_CMD_OPTS_H
#define TS_CMD_CMD_OPTS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct cmd_desc {
    const char *name;
    int (*fn)(int argc, char **argv); /* argv[0] is name; returns the exit code */
    const char *summary;              /* one line, for `tokenstorm --help` and man */
    /*
     * The command whose options this one passes on after `--` (sweep: run),
     * or NULL: one of those given before `--` gets a hint saying where it goes.
     */
    const char *passes_to;
};

/* The commands in the order `tokenstorm --help` lists them; *n their count. */
const struct cmd_desc *cmd_table(size_t *n);

/* The command called name, or NULL. */
const struct cmd_desc *cmd_find(const char *name);

/* `tokenstorm --help`: the commands and where to read more. */
void cmd_main_usage(FILE *out);

/*
 * An unknown command name: one line on stderr naming it, with the nearest
 * command ("did you mean 'run'?") and where the list is. Returns TS_EXIT_USAGE.
 */
int cmd_unknown_command(const char *name);

/* What cmd_getopt returns when the option was bad (the message printed). */
#define CMD_OPT_BAD '?'

/*
 * getopt_long(argc, argv, shortopts, longopts, longindex) for the command
 * called cmd, with getopt's own messages off and one line of ours on
 * stderr instead, naming the program and the command:
 *   tokenstorm run: unknown option '--concurrancy' (did you mean
 *   '--concurrency'?); see 'tokenstorm run --help'
 * likewise for a missing value, a value given to a flag and an ambiguous
 * abbreviation. An unknown option that belongs to the command the
 * command passes_to says where it goes (after `--`).
 * Returns what getopt_long returns (-1 at the end), or CMD_OPT_BAD after
 * printing: the command then returns TS_EXIT_USAGE without its usage.
 * shortopts is at most 62 characters.
 */
int cmd_getopt(const char *cmd, int argc, char **argv, const char *shortopts,
               const struct option *longopts, int *longindex);

/*
 * Old spellings of options that still work but are not shown: in --help,
 * the man pages and completions. {cmd, alias, canonical}, "--" left out;
 * each alias has its own entry in the command's getopt table with the
 * canonical one's value. docs/CLI.md lists them. Terminated by {NULL}.
 */
struct cmd_alias {
    const char *cmd, *alias, *canonical;
};
extern const struct cmd_alias cmd_aliases[];

/* Whether --name is a hidden alias of command cmd. */
bool cmd_option_hidden(const char *cmd, const char *name);

/*
 * The getopt tables command cmd parses its arguments with, found by calling
 * it in a capturing mode where its first cmd_getopt call records its tables
 * and returns CMD_OPT_BAD silently (the command returns having done
 * nothing). *longopts and *shortopts are borrowed, static in the command.
 * Returns 0, or -ENOENT when there is no such command or it does not parse
 * with cmd_getopt.
 */
int cmd_options_of(const char *cmd, const struct option **longopts, const char **shortopts);

/* `tokenstorm help [COMMAND]`: the command's --help, or the list. */
int cmd_help(int argc, char **argv);

/*
 * `tokenstorm completion bash|zsh|fish`: the completion script for that
 * shell on stdout, generated from every command's option table (hidden
 * aliases left out). Returns the exit code.
 */
int cmd_completion(int argc, char **argv);

#endif
