/*
 * experiment.h - `tokenstorm chaos EXPERIMENT.yaml`: the experiment file
 * (Chaos Toolkit's skeleton: title, description, steady-state hypothesis,
 * method, rollbacks, plus the load), the fault calls to a proxy's control
 * API or a simulator's admin API, and the judgement of a finished run from
 * its requests.jsonl. The processes and the clock live in app/chaos_run.h.
 * docs/CHAOS.md "Experiments" is the user's manual.
 *
 * File (YAML or JSON, UTF-8, at most EXP_FILE_MAX bytes; unknown keys are
 * errors with the nearest known name; errors read "file:line:col: ..."):
 *
 *   title: "..."                        required
 *   description: "..."
 *   steady-state-hypothesis:            (or "hypothesis")
 *     window: 2s                        recovery window (default 2s)
 *     step: 1s                          its slide (default 1s)
 *     max_recovery: 30s                 optional: slower counts as not recovered
 *     probes:                           1..EXP_MAX_PROBES
 *       - slo: "ttft.p95<500ms"         analysis/slo.h grammar
 *         during: "ttft.p95<2s"         tolerance during the faults (default: slo)
 *         name: "..."                   optional label
 *         proxy: http://127.0.0.1:9001  whose GET /chain judges amplification and
 *                                       orphaned_* (default: the phases' first proxy)
 *   method:                             1..EXP_MAX_PHASES fault phases
 *     - name: abort                     required, [A-Za-z0-9_.-]{1,63}, unique
 *       at: 5s                          offset from the start of the load (> 0)
 *       for: 3s                         duration (> 0)
 *       proxy: http://127.0.0.1:9001    a proxy's control API ...
 *       sim: http://127.0.0.1:8000      ... or a simulator's admin API (exactly one)
 *       fault: { type: http_abort, ... }  chaos/fault.h spec, or sim/admin.h spec
 *   rollbacks:                          extra actions after the automatic ones
 *     - { method: DELETE, url: "http://...", body: {...} }
 *   load: ["--target", "...", "--rate", "10", "--duration", "20s"]
 *
 * The load's --goodput 'ttft:MS tpot:MS e2el:MS' is also used to judge the
 * windows (goodput probes); its --duration must leave a recovery window
 * after the last fault (default 20 s).
 */
#ifndef TS_APP_EXPERIMENT_H
#define TS_APP_EXPERIMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "analysis/slo.h"
#include "analysis/stats.h"
#include "base/err.h"
#include "telemetry/scrape.h"

#define EXP_FILE_MAX      (1u << 20)
#define EXP_MAX_PROBES    32
#define EXP_MAX_PHASES    64
#define EXP_MAX_ROLLBACKS 32
#define EXP_MAX_LOAD_ARGS 128
#define EXP_URL_MAX       512
#define EXP_NAME_MAX      64
#define EXP_MAX_REQUESTS  (4u << 20) /* requests.jsonl lines read */

enum exp_target {
    EXP_TARGET_PROXY = 0, /* POST URL/faults, DELETE URL/faults/{name} */
    EXP_TARGET_SIM,       /* POST URL/admin/faults, DELETE URL/admin/faults/{type} */
};

struct exp_probe {
    char name[EXP_NAME_MAX];
    char proxy[EXP_URL_MAX]; /* SLO_NEEDS_PROXY probes: the control API judged; else "" */
    struct slo slo;          /* before and after the faults */
    struct slo during;       /* during a fault phase */
};

struct exp_phase {
    char name[EXP_NAME_MAX];
    uint64_t at_ns, for_ns;
    enum exp_target target;
    char url[EXP_URL_MAX]; /* the API's base URL, without a trailing '/' */
    json_t *spec;          /* owned: the body to POST (proxy specs get "name" = the phase's) */
    char remove_path[EXP_NAME_MAX + 32]; /* "/faults/NAME" or "/admin/faults/TYPE" */
};

struct exp_rollback {
    char method[8]; /* GET POST PUT DELETE */
    char url[EXP_URL_MAX];
    json_t *body; /* owned, may be NULL */
};

struct experiment {
    char title[256];
    char *description; /* owned, may be NULL */
    struct exp_probe probes[EXP_MAX_PROBES];
    size_t nprobes;
    uint64_t window_ns, step_ns, max_recovery_ns; /* max_recovery 0 = none */
    struct exp_phase phases[EXP_MAX_PHASES];      /* sorted by at_ns */
    size_t nphases;
    struct exp_rollback rollbacks[EXP_MAX_ROLLBACKS];
    size_t nrollbacks;
    char *load[EXP_MAX_LOAD_ARGS]; /* owned strings */
    size_t nload;
    struct goodput_cfg goodput; /* the load's --goodput, for goodput probes */
    bool has_goodput;
    /* the load's --dual-sla and --quality-min, for dual_sla probes per window */
    bool has_dual_sla;
    struct dual_sla_cfg dual;
    struct quality_target quality_target;
};

/*
 * Parses an experiment from text (name used in messages). Returns 0 and a
 * new experiment in *out (experiment_free it), or -EINVAL / TS_TOOBIG /
 * -ENOMEM with "name:line:col: reason" in err. Every fault spec is checked
 * with the parser of its target (fault_parse_json / sim_fault_parse_json),
 * every SLO with slo_parse.
 */
TS_MUST_CHECK int experiment_parse(const char *text, size_t len, const char *name,
                                   struct experiment **out, char *err, size_t errlen);
/* The same from a file (read with a cap of EXP_FILE_MAX). */
TS_MUST_CHECK int experiment_load(const char *path, struct experiment **out, char *err,
                                  size_t errlen);
/* NULL is a no-op. */
void experiment_free(struct experiment *e);

/* End of the last phase from the start of the load. */
uint64_t experiment_faults_end_ns(const struct experiment *e);

/* ---- fault calls (blocking libcurl easy calls, 5 s timeout each) ---- */

/*
 * POSTs the phase's fault to its target. Returns 0 (2xx), or -EIO (no
 * answer) / -EPROTO (an error status) with the reason in err.
 */
TS_MUST_CHECK int experiment_apply(const struct exp_phase *p, char *err, size_t errlen);
/* DELETEs the phase's fault. 0 also when the target says it is gone (404). */
TS_MUST_CHECK int experiment_remove(const struct exp_phase *p, char *err, size_t errlen);
/* Runs one rollback action; 0 on 2xx or 404. */
TS_MUST_CHECK int experiment_rollback(const struct exp_rollback *r, char *err, size_t errlen);

/* ---- the proxies' own delay: how much a proxy may have added to what the
 * load measured (tokenstorm_proxy_forward_delay_seconds, docs/CHAOS.md) ---- */

/*
 * Reads the histogram from the proxy whose control API is at api (GET
 * api/metrics, at most SCRAPE_MAX_BODY). Returns 0, or -EIO / -EPROTO /
 * TS_PARSE with the reason in err (a proxy without the histogram: -EPROTO).
 */
TS_MUST_CHECK int experiment_proxy_delay(const char *api, struct scrape_hist *out, char *err,
                                         size_t errlen);

/*
 * The pieces forwarded between two readings of one proxy, as
 * {"pieces": N, "p50_s": x, "p99_s": y, "p999_s": z}: quantiles interpolated
 * within the buckets as Prometheus' histogram_quantile does
 * (scrape_hist_quantile: one in the top bucket is its lower bound; a proxy
 * whose counts went down restarted, and counts from zero), null with no
 * pieces. NULL when out of memory.
 */
json_t *exp_delay_json(const struct scrape_hist *before, const struct scrape_hist *after);

/* ---- what the proxies saw of the chain (chaos/chain.h) ---- */

/* GET api/chain into *out (a new reference). 0, or -EIO / -EPROTO /
 * TS_PARSE with the reason in err. */
TS_MUST_CHECK int experiment_chain_fetch(const char *api, json_t **out, char *err, size_t errlen);

/* The proxies' GET /chain documents, for the probes on amplification and
 * orphaned work (SLO_NEEDS_PROXY): a probe reads the document of its
 * proxy URL, buckets starting in [run_start_ns + from, run_start_ns + to)
 * of CLOCK_MONOTONIC (so the proxies run on the load's machine). */
struct exp_chains {
    uint64_t run_start_ns; /* result.json's run.start_mono_ns */
    size_t n;
    const char *url[EXP_MAX_PROBES];
    const json_t *doc[EXP_MAX_PROBES]; /* borrowed; NULL: could not be read */
};

/* A proxy metric over [a_ms, b_ms) of the run from chains (NAN: no document,
 * or amplification without a distinct request in the window). */
double exp_chain_actual(const struct exp_chains *chains, const struct exp_probe *p,
                        const struct slo *s, double a_ms, double b_ms);

/* ---- judgement ---- */

/* The requests of a run (requests.jsonl), in memory. */
struct exp_requests;

/*
 * Reads DIR/requests.jsonl (warm-up requests left out). Returns 0 and *out
 * (exp_requests_free it), or a negative errno / TS_PARSE / TS_TOOBIG with a
 * message in err. Malformed lines are skipped and counted.
 */
TS_MUST_CHECK int exp_requests_load(const char *path, struct exp_requests **out, char *err,
                                    size_t errlen);
void exp_requests_free(struct exp_requests *r);
size_t exp_requests_count(const struct exp_requests *r);
/* Intended send time of the last request (ms since the run's start), 0 if none. */
double exp_requests_last_ms(const struct exp_requests *r);

/* When each phase's fault was really in place, in ms since the run's start. */
struct exp_window {
    double from_ms, to_ms;
};

enum exp_verdict {
    EXP_STEADY = 0,    /* held before, within tolerance during, and right after */
    EXP_DEVIATED,      /* broke its tolerance during a phase, held again after T */
    EXP_RECOVERED,     /* within tolerance during, but needed T after the faults */
    EXP_NOT_RECOVERED, /* did not hold again before the load ended (or after max_recovery) */
    EXP_UNSTEADY,      /* did not hold before the first fault: nothing to judge */
    EXP_VERDICT_COUNT,
};

/* "steady", "deviated", "recovered", "not_recovered", "unsteady". Static. */
const char *exp_verdict_name(enum exp_verdict v);
/* The exit code of a verdict: 0 steady/deviated/recovered, 1 not_recovered/unsteady. */
int exp_verdict_exit(enum exp_verdict v);

/* The baseline ends this long before the first fault is applied: a request
 * sent just before the apply call returned may already meet the fault (the
 * proxy takes it at once), and would make a healthy baseline look broken. */
#define EXP_BASELINE_GUARD_MS 100.0

/*
 * Judges the run: the hypothesis over [baseline_from_ms, first fault -
 * EXP_BASELINE_GUARD_MS), each
 * phase's tolerance over its window, and the recovery: windows of
 * window_ns sliding by step_ns from the end of the last fault until every
 * probe holds (a window without requests never holds). windows[] has one
 * entry per phase (phases never applied: from_ms < 0, skipped).
 * Returns 0 and a new JSON object in *report ("verdict", "deviated",
 * "recovery_s" (null when not recovered), "baseline", "phases",
 * "recovery"), with the verdict in *verdict; -ENOMEM.
 */
TS_MUST_CHECK int experiment_judge(const struct experiment *e, const struct exp_requests *reqs,
                                   const struct exp_window *windows, double baseline_from_ms,
                                   enum exp_verdict *verdict, json_t **report);

/* experiment_judge with the proxies' chain documents (NULL: none; probes on
 * proxy metrics then never hold). */
TS_MUST_CHECK int experiment_judge_chains(const struct experiment *e,
                                          const struct exp_requests *reqs,
                                          const struct exp_window *windows, double baseline_from_ms,
                                          const struct exp_chains *chains,
                                          enum exp_verdict *verdict, json_t **report);

#endif
