/*
 * tokenstorm version - the version, as every command's --version prints it.
 */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "ts_config.h"

int cmd_version(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: tokenstorm version\n\n"
               "Prints the version (as 'tokenstorm --version' and every command's --version do).\n"
               "\nexamples:\n"
               "  tokenstorm version\n"
               "  tokenstorm run --version\n");
        return TS_EXIT_OK;
    }
    printf("tokenstorm %s\n", TS_VERSION);
    return TS_EXIT_OK;
}
