/*
 * admin.h - the simulator's admin API: infrastructure faults a proxy cannot
 * create (tokenstorm sim --admin; docs/CHAOS.md "Simulator admin API").
 *
 *   POST   /admin/faults          a spec -> 201 the fault's state; 400 {"error": msg}
 *   GET    /admin/faults          200 {"faults": [state, ...]} (the active ones)
 *   DELETE /admin/faults          204: everything restored
 *   DELETE /admin/faults/{type}   204: that fault removed; 404 when it is not active
 *
 * Specs (JSON objects; durations as "250ms"/"30s" strings or seconds):
 *   {"type":"kv_shrink","to_tokens":N,"over":"30s"}   KV capacity falls linearly from the
 *        profile's to N tokens over the duration (0 or absent: at once), a step every
 *        100 ms; running sequences are preempted as the cache shrinks. N >= max_model_len.
 *   {"type":"stall","for":"2s"}                       the engine hangs: every stream blocks
 *   {"type":"cold_start","for":"10s"}                 generation and /health answer 503 with
 *        Retry-After (seconds left, rounded up) until the time has passed
 *   {"type":"error_rate","rate":0.2,"status":500}     that share of generation and embedding
 *        requests is answered with an OpenAI-style error of that status (400..599, default 500)
 * Posting a type that is active replaces it. One of each type is active at most.
 */
#ifndef TS_SIM_ADMIN_H
#define TS_SIM_ADMIN_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "base/err.h"

enum sim_fault_type {
    SIM_FAULT_KV_SHRINK = 0,
    SIM_FAULT_STALL,
    SIM_FAULT_COLD_START,
    SIM_FAULT_ERROR_RATE,
    SIM_FAULT_TYPE_COUNT,
};

struct sim_fault {
    enum sim_fault_type type;
    uint64_t to_tokens; /* kv_shrink */
    uint64_t over_ns;   /* kv_shrink: 0 = at once */
    uint64_t for_ns;    /* stall, cold_start: > 0 */
    double rate;        /* error_rate: 0..1 */
    int status;         /* error_rate: 400..599 */
};

/* "kv_shrink", ...; "unknown" out of range. Static. */
const char *sim_fault_type_name(enum sim_fault_type t);

/*
 * Parses one spec. Returns 0, or -EINVAL with a one-line message in err
 * (unknown type or key with the nearest known name, missing or bad value).
 * Checks only what the spec says; limits of the running engine (to_tokens
 * below max_model_len) are checked by the server.
 */
TS_MUST_CHECK int sim_fault_parse_json(const json_t *spec, struct sim_fault *out, char *err,
                                       size_t errlen);

#endif
