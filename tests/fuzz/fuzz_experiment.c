/*
 * Fuzzes the experiment file parser (app/experiment.h) and, through it,
 * the fault spec parsers of the proxy and the simulator's admin API.
 *
 * Every input must either parse or fail with a NUL-terminated message that
 * names the file; an accepted experiment must respect the documented
 * limits (probes, phases sorted by start and with a positive duration, a
 * removal path for every fault).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "app/experiment.h"

#define INPUT_MAX 65536

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > INPUT_MAX)
        return 0;
    struct experiment *e = NULL;
    char err[512];
    memset(err, 'x', sizeof(err));
    int rc = experiment_parse((const char *)data, size, "f.yaml", &e, err, sizeof(err));
    if (rc) {
        if (e || !memchr(err, '\0', sizeof(err)) || strncmp(err, "f.yaml", 6) != 0)
            abort();
        return 0;
    }
    if (!e || e->nprobes < 1 || e->nprobes > EXP_MAX_PROBES || e->nphases < 1 ||
        e->nphases > EXP_MAX_PHASES || e->nload < 1)
        abort();
    for (size_t i = 0; i < e->nphases; i++) {
        const struct exp_phase *p = &e->phases[i];
        if (p->for_ns == 0 || p->at_ns == 0 || !json_is_object(p->spec) || p->remove_path[0] != '/')
            abort();
        if (i && e->phases[i - 1].at_ns > p->at_ns)
            abort();
    }
    experiment_free(e);
    return 0;
}
