/*
 * run_quality.h - the answer-quality options of `tokenstorm run` (and of the
 * commands that pass run options through): --quality-regex, --quality-json,
 * --quality-min, --dual-sla, --consistency.
 */
#ifndef TS_APP_RUN_QUALITY_H
#define TS_APP_RUN_QUALITY_H

#include <stdbool.h>
#include <stddef.h>

#include "load/runner.h"

#define RUN_QUALITY_MAX_KEYS 32

struct run_quality_opts {
    const char *regex;
    bool json;
    char json_keys_buf[512];
    const char *json_keys[RUN_QUALITY_MAX_KEYS];
    size_t njson_keys;
    struct quality_target target;
    bool target_set;
    bool dual_sla;
    struct dual_sla_cfg dual;
    bool consistency;
    struct consistency_cfg cons;
    struct quality_regex *compiled; /* owned after run_quality_apply */
};

void run_quality_init(struct run_quality_opts *q);

/*
 * Handles one option: name without the dashes ("quality-regex", ...) and its
 * argument (NULL for a flag). Returns 1 if the option was one of these, 0 if
 * not, or -EINVAL with a message in err.
 */
int run_quality_option(struct run_quality_opts *q, const char *name, const char *arg, char *err,
                       size_t errlen);

/*
 * Compiles what needs compiling and fills cfg->quality. 0 or -EINVAL with a
 * message. The compiled regex is q's (q->compiled, which cfg points to): q
 * must outlive the run, and its owner frees it with run_quality_release().
 */
int run_quality_apply(struct run_quality_opts *q, struct runner_config *cfg, char *err,
                      size_t errlen);

/* Frees what run_quality_apply compiled (q->compiled); q can be applied again. */
void run_quality_release(struct run_quality_opts *q);

/*
 * What a `tokenstorm run` command line, given as words (a sweep's options
 * after `--`, an experiment's load:), gives SLOs to be evaluated: the enum
 * slo_needs flags of --goodput, --quality-regex, --quality-json, --dual-sla
 * and --consistency, and SLO_NEEDS_REFERENCE when a --prompts file or a
 * scenario file (*.yaml, *.yml) is named: whether its lines hold references
 * only the run knows once it has read them. Words are not validated here.
 */
unsigned run_args_slo_have(const char *const *args, size_t n);

/*
 * The option that gives the first of lack's enum slo_needs flags, worded
 * for a user ("--goodput (e.g. ...)"); NULL when lack is 0. Static.
 */
const char *run_slo_lack(unsigned lack);

#endif
