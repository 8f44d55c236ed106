/*
 * Fuzzes what `tokenstorm sim calibrate` takes from a result.json: the input
 * is parsed as JSON and turned into a point with its server-metrics scrapes.
 * The scrapes must come out bounded and pin only values the profile
 * validates with; a point that is accepted must
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
    if (rc == 0)
        rc = calib_server_from_result(doc, "fuzz/result.json", &pt, err, sizeof(err));
    json_decref(doc);
    if (rc != 0) {
        if (!memchr(err, '\0', sizeof(err)))
            abort();
        return 0;
    }
    struct sim_profile p;
    if (sim_profile_preset("tiny", &p) != 0)
        abort();
    /* the scrapes are bounded and whatever they pin, the profile stays valid */
    const struct calib_server *s = &pt.server;
    if (s->peak_running > CALIB_COUNT_MAX || s->peak_queued > s->peak_running ||
        s->kv_usage_max > 1 || s->kv_scrapes > s->scrapes)
        abort();
    struct calib_opts o = {.base = "tiny"};
    struct calib_pins pins;
    calib_pin(&p, &o, &pt, 1, &pins);
    if (sim_profile_validate(&p, NULL, 0) != 0 ||
        !memchr(pins.seqs_why, '\0', sizeof(pins.seqs_why)))
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
