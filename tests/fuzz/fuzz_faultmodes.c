/*
 * Fuzz the fault-mode catalogue reader (chaos/faultmodes.h): any bytes as a
 * user's catalogue file. Every mode kept is valid (risk in range, at least
 * one precondition and probe), and its spec fills its placeholder.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "chaos/faultmodes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fault_catalogue c = {0};
    char err[512];
    (void)fault_catalogue_add(&c, (const char *)data, size, "fuzz.yaml", err, sizeof(err));
    for (size_t i = 0; i < c.n; i++) {
        const struct fault_mode *m = &c.modes[i];
        if (m->risk < 0.1 || m->risk > 0.9 || !m->n_when || !m->n_probes || !m->fault)
            abort();
        char delay[32];
        json_t *spec = fault_mode_spec(m, 800, delay, sizeof(delay));
        json_decref(spec);
    }
    fault_catalogue_release(&c);
    return 0;
}
