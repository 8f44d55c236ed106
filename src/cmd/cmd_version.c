#include <stdio.h>

#include "cmd/cmd.h"
#include "ts_config.h"

int cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("tokenstorm %s\n", TS_VERSION);
    return TS_EXIT_OK;
}
