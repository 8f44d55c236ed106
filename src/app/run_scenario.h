/*
 * run_scenario.h - what `tokenstorm run SCENARIO.yaml` adds to the run job:
 * the scenario's settings as run options, its classes as the runner's
 * traffic classes, --check and --dry-run, and the per-class results.
 *
 * Precedence: an option given on the command line wins over the file
 * (--target, --model, --duration, --requests, --warmup, --drain, --workers,
 * --seed, --sim-profile); headers of both are sent.
 */
#ifndef TS_APP_RUN_SCENARIO_H
#define TS_APP_RUN_SCENARIO_H

#include <jansson.h>
#include <stdio.h>

#include "analysis/slo.h"
#include "analysis/stats.h"
#include "llm/tokcount.h"
#include "app/run_job.h"
#include "load/runner.h"
#include "scenario/scenario.h"
#include "scenario/traffic.h"

/* The classes of a scenario ready for the runner. */
struct scenario_run {
    struct scenario *scn; /* borrowed */
    struct traffic *traffic;
    struct runner_class *classes;
    size_t n;
    uint64_t **times; /* per class: trace replay offsets or NULL */
    struct slo *slos; /* all classes' SLOs, class k's from slo_first[k] */
    size_t *slo_first, *slo_count;
    struct tokenizer *tokenizer; /* --tokenizer / target.tokenizer, or NULL */
};

/* Copies the file's settings into o where the command line gave none (and
 * --seed into the file's seed). */
void scenario_apply_opts(struct scenario *s, struct run_opts *o);

/*
 * Loads the tokenizer (path NULL: none) into sr->tokenizer. Returns 0 or a
 * negative code with a message.
 */
TS_MUST_CHECK int scenario_run_tokenizer(struct scenario_run *sr, const char *path, char *err,
                                         size_t errlen);
/* For struct runner_config.make_tokcount: one tokenizer counter per thread. */
int scenario_run_make_tokcount(void *arg, struct tokcount **out);

/*
 * Builds the traffic classes of s for a target at base_url with model (a
 * NULL model is left out of the bodies). The open/closed settings, the
 * iteration caps (the class's requests, else the run's `requests`) and the
 * SLOs come from the file. Returns 0 or a negative code with a message.
 */
TS_MUST_CHECK int scenario_run_init(struct scenario_run *sr, struct scenario *s,
                                    const char *base_url, const char *model, uint64_t requests,
                                    char *err, size_t errlen);
void scenario_run_release(struct scenario_run *sr);

/*
 * --dry-run: generates the first `iterations` iterations of every class (a
 * class's own cap when smaller) without sending anything: each request as a
 * JSON line to out (may be NULL), and returns the workload summary (intent
 * mix, lengths, perturbations, shared-prefix reuse, session turns, semantic
 * entropy) in *summary. Sessions get a placeholder answer for their history;
 * of a flow only the steps that need no earlier response are generated.
 */
TS_MUST_CHECK int scenario_run_dry(struct scenario_run *sr, uint64_t iterations, FILE *out,
                                   json_t **summary, char *err, size_t errlen);

/*
 * The per-class results for result.json ("classes": [...]) and the text
 * summary; counts failed class SLOs into *failed. A class with a flow or
 * sessions leads with its iterations (an iteration fails when a step's
 * check fails even if every HTTP call returned 200): "iterations" comes
 * first in its object, with "failure_reasons" [{count, message}] by count,
 * and the console prints them before the requests.
 */
json_t *scenario_run_results(const struct scenario_run *sr, const struct runner_result *res,
                             size_t *failed);
void scenario_run_print(FILE *f, const struct scenario_run *sr, const struct runner_result *res);

/*
 * True when class k runs iterations (a flow or sessions), some ended and
 * none succeeded (ok or degraded); writes why into why (n bytes): "no
 * iteration succeeded: 24 of 24 failed, most as step 'plan': ... (24)".
 */
bool scenario_class_none_ok(const struct scenario_run *sr, const struct runner_result *res,
                            size_t k, char *why, size_t n);

/* A short description of a checked scenario for --check. */
void scenario_print_check(FILE *f, const struct scenario *s);

#endif
