/*
 * sim_calibrate.h - `tokenstorm sim calibrate`: a simulator profile fitted to
 * measurements of a real server.
 *
 * Points come from result directories: a run's (result.json: one point) or a
 * sweep's (sweep.json: one point per step directory). A point is the load
 * (open loop at `run.rate` requests/s with Poisson arrivals, or a closed loop
 * of `run.users`), the lengths (the measured means of prompt and output
 * tokens, with the spread of `run.input_len` / `run.output_len`, approximated
 * by a lognormal of the same coefficient of variation), and what was
 * measured: median TTFT, median TPOT and, for a closed loop, output tokens/s
 * (an open loop's throughput is the offered load). Scenario runs and
 * non-streamed runs are refused (no TTFT to fit).
 *
 * The fit: the chosen profile keys (default t_fix_ms, t_w_ms, b_ms_per_token,
 * t_sample_ms_per_seq) are moved by Nelder-Mead in log space to minimise the
 * sum over points of the squared log ratio model / measured of the three
 * numbers, each point simulated by the offline driver (sim/offline.h) with
 * noise off. Every other key stays as the base profile has it.
 *
 * Server metrics (calib_server_from_result, calib_pin): a result of `tokenstorm
 * run --server-metrics URL` carries the scrapes of the server's /metrics
 * (result.json "server_timeline": running and waiting sequences, KV-cache
 * usage 0..1 per scrape; "server_metrics": flavor and counts; see
 * telemetry/scrape.h). Before the fit they pin two keys of the base profile:
 *  - max_num_seqs: the most sequences running at a scrape where requests
 *    were waiting and the KV cache was under CALIB_KV_BOUND full (a batch
 *    at its cap, not a KV-bound one), seen at two scrapes or more of one
 *    result, and never exceeded at any other scrape of any result; not when
 *    most scrapes with a queue had the KV cache that full (a KV-bound server);
 *  - kv_capacity_tokens: the tokens the running sequences held over the
 *    usage they showed, summed over every scrape with a usage and a running
 *    sequence: a sequence holds its prompt and, on average, half its output
 *    (reserve-max: all of it) plus half a block; at least
 *    CALIB_KV_MIN_SCRAPES scrapes, and a usage of 1% or more once.
 * A key the caller keeps (calib_opts.keep_*: the user --set it, or --config
 * changed it) is not
 * pinned; neither is one whose value the profile does not validate with
 * (a KV cache below max_model_len). A result without the section, or with
 * parts of it missing, adds nothing (it is not an error); a section of the
 * wrong shape is an error naming the file and the field.
 *
 * The report (YAML, loadable by `tokenstorm sim --config`): `base:`, the
 * fitted keys, the keys pinned by server metrics, every other key of the
 * profile the fit ran on that differs from the base preset (what --set and
 * --config changed: the file is that whole profile), comments naming what was
 * fitted, pinned (with the evidence) or left at the base profile (with the
 * reason), then the error of the model at every point and metric, and
 * warnings where the model cannot fit: an error over 15% after fitting, a
 * measured TPOT that keeps growing where the model's batch is already
 * capped, fewer points than keys fitted.
 */
#ifndef TS_APP_SIM_CALIBRATE_H
#define TS_APP_SIM_CALIBRATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "base/err.h"
#include "sim/offline.h"
#include "sim/profile.h"

#define CALIB_POINTS_MAX 256
#define CALIB_KEYS_MAX   8

#define CALIB_KV_BOUND       0.9 /* KV usage from which a queue is the KV cache's doing */
#define CALIB_KV_MIN_SCRAPES 3   /* scrapes with a usage needed to pin kv_capacity_tokens */
#define CALIB_COUNT_MAX      1e7 /* bound of a scraped running / waiting count */

/* What one result's server-metrics scrapes showed (all 0: none). */
struct calib_server {
    char flavor[16];         /* "vllm", "tgi", "sglang", "" */
    uint32_t scrapes;        /* timeline points with a running count */
    double peak_running;     /* most sequences running at any scrape */
    double peak_queued;      /* most running at a scrape with requests waiting, KV not full */
    uint32_t at_peak_queued; /* scrapes at that peak with requests waiting */
    uint32_t queued;         /* scrapes with requests waiting, KV not full */
    uint32_t kv_bound;       /* scrapes with requests waiting and KV >= CALIB_KV_BOUND */
    uint32_t kv_scrapes;     /* scrapes with a KV usage > 0 and a sequence running */
    double kv_running_sum;   /* sum of running over those */
    double kv_usage_sum;     /* sum of the usage over those */
    double kv_usage_max;     /* highest usage seen */
};

struct calib_point {
    char label[160]; /* "DIR: 8 users" */
    struct sim_offline_load load;
    double ttft_ms, tpot_ms, tok_s;       /* measured; <= 0 = not measured */
    double m_ttft_ms, m_tpot_ms, m_tok_s; /* the model's, after calib_fit */
    uint32_t m_running;                   /* most seqs the model ran at once */
    struct calib_server server;           /* --server-metrics scrapes, if any */
};

struct calib_opts {
    const char *base;                     /* preset name the profile started from (for `base:`) */
    const char *keys[CALIB_KEYS_MAX + 1]; /* keys to fit, NULL-terminated */
    unsigned max_evals;                   /* bound of model evaluations (0 = 400) */
    bool keep_seqs, keep_kv; /* never pin max_num_seqs / kv_capacity_tokens (the user set them:
                                --set, or --config to another value than the preset's) */
    bool no_server;          /* ignore server metrics altogether */
};

/* What calib_pin did, for the report. */
struct calib_pins {
    size_t with_metrics; /* results that had scrapes */
    bool seqs, kv;       /* pinned */
    char seqs_why[240];  /* the evidence when pinned, else why not */
    char kv_why[240];
};

/*
 * Appends the points of one result directory (a run or a sweep) to pts[*n]
 * (at most CALIB_POINTS_MAX in all). Returns 0, or an error with "DIR: why"
 * in err (TS_PARSE for a result that cannot be used).
 */
TS_MUST_CHECK int calib_load_dir(const char *dir, struct calib_point *pts, size_t *n, char *err,
                                 size_t errlen);

/* One point from a parsed result.json; label names it. As calib_load_dir. */
TS_MUST_CHECK int calib_point_from_result(const json_t *doc, const char *label,
                                          struct calib_point *pt, char *err, size_t errlen);

/*
 * The server-metrics section of a parsed result.json into pt->server (reset
 * first). `file` names the result in messages. A missing or partial section
 * is 0 with less (or nothing) filled in; a section of the wrong shape
 * (server_timeline not an array of at most SCRAPE_MAX_POINTS objects, a
 * running / waiting count not a number 0 .. CALIB_COUNT_MAX or null, a
 * kv_usage not a number 0 .. 1 or null, server_metrics not an object, its
 * flavor not a short string) is TS_PARSE with "FILE: FIELD: why" in err.
 */
TS_MUST_CHECK int calib_server_from_result(const json_t *doc, const char *file,
                                           struct calib_point *pt, char *err, size_t errlen);

/*
 * Pins max_num_seqs and kv_capacity_tokens of *p from the points' server
 * metrics (see above), unless o keeps them; *out says what was pinned and
 * why or why not. *p stays valid (a pin it would not validate with is
 * dropped, and *out says so).
 */
void calib_pin(struct sim_profile *p, const struct calib_opts *o, const struct calib_point *pts,
               size_t n, struct calib_pins *out);

/*
 * Fits o->keys of *p to the points; on return *p holds the best profile and
 * each point its model numbers. Returns 0, or -EINVAL with a message (a key
 * that is not a number, a profile that does not validate).
 */
TS_MUST_CHECK int calib_fit(struct sim_profile *p, const struct calib_opts *o,
                            struct calib_point *pts, size_t n, char *err, size_t errlen);

/* Writes the YAML report (pins may be NULL: nothing pinned); returns the number of warnings
 * written. */
int calib_print(FILE *out, const struct sim_profile *p, const struct calib_opts *o,
                const struct calib_pins *pins, const struct calib_point *pts, size_t n);

#endif
