/*
 * tokenstorm - load, chaos and SLA testing for LLM services.
 * This file is only the subcommand table; each command lives in src/cmd/.
 */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "ts_config.h"

struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
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

int main(int argc, char **argv)
{
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
