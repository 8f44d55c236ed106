/*
 * run_scenario.h - what `tokenstorm run SCENARIO.yaml` adds to the run job:
 * the scenario's settings as run options, its classes as the runner's
 * traffic classes, --check and --dry-run, and the per-class results.
 *
 * Precedence: an option given on the command line wins over the file
 * (--target, --model, --duration, --requests, --warmup, --drain, --workers,
 * --seed, --sim-profile); headers of both are sent. The options a class
 * sets for itself (load shape, workload, streaming) are refused
 * (scenario_refuse_opts).
 */
#ifndef TS_APP_RUN_SCENARIO_H
#define TS_APP_RUN_SCENARIO_H

#include <jansson.h>
#include <stdio.h>

#include "analysis/slo.h"
#include "analysis/stats.h"
#include "llm/tokcount.h"
#include "app/run_job.h"
#include "app/run_vector.h"
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
    struct run_vector *vec;      /* per class: a vector-search class's queries and truth */
    /* where vector classes' "text:FILE" queries are embedded (kept by
     * scenario_run_init like tokenizer; NULL: such classes get no queries,
     * as in --check and --dry-run) */
    const struct vector_embed_target *embed;
};

/*
 * A scenario that mixes vector-search classes with others reports recall per
 * class only: the whole run's QPS and latency would mix the searches with
 * the other requests, so the total's recall is cleared (no top-level
 * "vector_search" in result.json, no "vector search" line above the classes).
 */
void scenario_run_total_recall(const struct scenario_run *sr, struct run_stats *total);

/* A vector-search class's 'vector' block as the run's vector options. */
void scenario_vector_opts(const struct scenario_vector *v, struct run_vector_opts *o);

/*
 * Refuses the run options that a scenario's classes set for themselves (the
 * arrivals, the users, the workload, --no-stream, --body, --endpoint): they
 * would be ignored. Returns 0, or -EINVAL with a message naming the option
 * and the class key to set instead.
 */
TS_MUST_CHECK int scenario_refuse_opts(const struct run_opts *o, char *err, size_t errlen);

/* Whether class c may send streamed requests: its stream setting (and its
 * body's "stream"), false for embeddings, true for a flow (a step's body may
 * stream). */
bool scenario_class_streams(const struct scenario_class *c);

/*
 * Refuses an SLO or goodput threshold of a class that its requests cannot
 * have a value for: TTFT, TTFC, ITL or TPOT in a class that streams nothing.
 * Returns 0, or -EINVAL with a message naming the class, the expression and
 * why. (Parse errors are left to scenario_run_init.)
 */
TS_MUST_CHECK int scenario_check_streams(const struct scenario *s, char *err, size_t errlen);

/* Copies the file's settings into o where the command line gave none (and
 * --seed into the file's seed). */
void scenario_apply_opts(struct scenario *s, struct run_opts *o);

/*
 * Checks that every class's `slos:` can be evaluated: goodput needs the
 * class's own `goodput:`, reference metrics its prompts file or dataset,
 * regex_match, json_valid, dual_sla and consistency the run's quality
 * options (have: the enum slo_needs flags the run's options give). Returns
 * 0, or -EINVAL with "class 'NAME': slo 'EXPR': METRIC needs ..." in err
 * (a class's SLO that does not parse is scenario_run_init's to report).
 */
TS_MUST_CHECK int scenario_check_slo_needs(const struct scenario *s, unsigned have, char *err,
                                           size_t errlen);

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
 * For flows: the latency of each step apart ("latency by flow step"), right
 * under the headline table, which counts every call of every step: calls,
 * failures, TTFT p50/p99 for the streamed chat and completion steps (the
 * LLM's own; "-" for embeddings, HTTP calls such as a vector search, and
 * unstreamed steps), E2EL p50/p90/p99 for all. Nothing without flows.
 */
/* True when some class of the run has flow steps with their own statistics. */
bool scenario_run_has_steps(const struct scenario_run *sr, const struct runner_result *res);
void scenario_run_print_steps(FILE *f, const struct scenario_run *sr,
                              const struct runner_result *res);

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
