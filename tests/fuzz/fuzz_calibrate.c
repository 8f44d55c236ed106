/*
 * Fuzzes what `tokenstorm sim calibrate` takes from a result.json: the input
 * is parsed as JSON and turned into a point. A point that is accepted must
 * have a load the offline driver accepts (checked by running a small copy of
 * it on the tiny preset), and an error must be a NUL-terminated message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "app/sim_calibrate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    json_error_t je;
    json_t *doc = json_loadb((const char *)data, size, 0, &je);
    if (!doc)
        return 0;
    struct calib_point pt;
    char err[256];
    memset(err, 'x', sizeof(err));
    int rc = calib_point_from_result(doc, "fuzz", &pt, err, sizeof(err));
    json_decref(doc);
    if (rc != 0) {
        if (!memchr(err, '\0', sizeof(err)))
            abort();
        return 0;
    }
    struct sim_profile p;
    if (sim_profile_preset("tiny", &p) != 0)
        abort();
    struct sim_offline_load l = pt.load;
    l.requests = l.mode == SIM_LOAD_CLOSED ? l.concurrency : 1;
    if (l.requests > 64 || l.in_mean > 4096 || l.out_mean > 256)
        return 0; /* valid, but too big to run here */
    struct sim_offline_result r;
    rc = sim_offline_run(&p, &l, &r, err, sizeof(err));
    if (rc != 0 && rc != -E2BIG)
        abort();
    return 0;
}
