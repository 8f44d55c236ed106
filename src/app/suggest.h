/*
 * suggest.h - `tokenstorm chaos suggest`: ranks the fault-mode catalogue
 * (chaos/faultmodes.h) against a topology (`tokenstorm topology` JSON) and
 * writes the best as experiment files that `tokenstorm chaos` runs as they
 * are (docs/CHAOS.md "Suggested experiments").
 *
 * Ranking: a mode applies when one of its `when` preconditions holds on the
 * topology or the run's result. score = risk x (0.4 + 0.6 x coverage),
 * coverage = the share of its preconditions that hold among those the sources
 * given can show, x 1.5 when a risk flag or a failure the run saw (429s, 5xx,
 * timeouts, cut streams, KV-cache pressure) is among them
 * (concrete evidence), capped at 1. Suggestions are picked greedily, each
 * pick's score weighted by 0.7^k where k is the number already picked in
 * the same fault layer (service, middleware, infrastructure), so the list
 * spreads over the three layers.
 */
#ifndef TS_APP_SUGGEST_H
#define TS_APP_SUGGEST_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define SUGGEST_MAX_CATALOGUES 16
#define SUGGEST_MAX_LOAD_ARGS  32
#define SUGGEST_TOPO_MAX       (64u << 20)

struct suggest_opts {
    const char *topology; /* --topology FILE (JSON of tokenstorm topology) */
    const char *result;   /* --result DIR (a run's result.json); topology or result or both */
    const char *catalogues[SUGGEST_MAX_CATALOGUES]; /* --catalogue FILE */
    size_t n_catalogues;
    size_t max;            /* --max N (default 5) */
    const char *out_dir;   /* --out DIR */
    const char *target;    /* --target: the load's target (NULL: the result's, else
                              http://127.0.0.1:9000/v1) */
    const char *proxy_api; /* --proxy-api (default http://127.0.0.1:9001) */
    const char *sim_admin; /* --sim-admin (default http://127.0.0.1:8000) */
    const char *rate;      /* --rate (default "4") */
    uint64_t at_ns;        /* --at: the fault's offset (default 5 s) */
    uint64_t for_ns;       /* --for: every phase's length (0: the mode's) */
    uint64_t recover_ns;   /* --recover: load after the fault (default 10 s) */
    const char *load_args[SUGGEST_MAX_LOAD_ARGS]; /* --load-arg, appended to the load */
    size_t n_load_args;
    const char *format; /* --format text|json (stdout) */
};

/* Runs the command. Returns 0; 2 (bad file or option, catalogue errors); 3. */
int suggest_job(const struct suggest_opts *o);

#endif
