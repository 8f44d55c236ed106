/*
 * scenario.h - scenario files: one YAML file that describes a run's target,
 * its traffic classes (tenants) and their SLOs. `tokenstorm run FILE.yaml`
 * loads one; `tokenstorm run --check FILE.yaml` only validates it.
 * docs/SCENARIOS.md is the user's reference; this header is the model the
 * file is parsed into.
 *
 * Parsing (libfyaml) is strict: every error names file:line:column and what
 * was expected; an unknown key is an error with a did-you-mean; a wrong type
 * names the type wanted; every count and string is capped (SCENARIO_MAX_*).
 * Relative paths inside the file (datasets, slot files, prompt files,
 * tokenizer) are resolved against the file's directory.
 *
 * Top level:
 *   name: STR                 label of the run (default: the file name)
 *   seed: INT                 default 0
 *   duration: DURATION        sending window ("60s", "2m", "500ms": base/units.h)
 *   requests: INT             default cap of each class's iterations
 *   warmup: DURATION
 *   drain: DURATION           default 30s
 *   workers: INT              default: the CPU count
 *   target: {url, model, api_key_env, headers: {NAME: VALUE}, context_length,
 *            context_margin, tokenizer, chat_template: {message, reply, bos},
 *            timeout: {connect, ttfb, idle, total}}
 *            (no target.url: the built-in simulator)
 *   simulator: {profile: NAME, set: {KEY: VALUE}}
 *   classes: [CLASS, ...]     at least one (at most SCENARIO_MAX_CLASSES)
 *
 * A class (a tenant): its own arrivals, workload and SLOs:
 *   name: STR (unique; required)
 *   endpoint: chat | completions | embeddings | realtime | vector-search   (default chat;
 *             realtime: the chat requests over OpenAI Realtime WebSocket, docs/REALTIME.md;
 *             vector-search: POST {target}/vectors/search with recall@k, docs/VECTOR.md)
 *   vector: {data, index, queries, truth, k, nprobe, ef_search, seed}  (vector-search only;
 *             data/queries are gen:... specs or paths, resolved like the other paths)
 *   open loop:   rate: REQ/S, arrival: poisson|constant|gamma:B, stages: "30s:10,1m:50",
 *                max_concurrency: INT
 *   closed loop: users: INT, think: DIST (seconds), ramp_users: DURATION
 *   requests: INT              cap on this class's iterations
 *   stream: BOOL (true), ignore_eos: BOOL (true), body: {overrides}
 *   input_tokens, output_tokens: DIST   synthetic prompts (no prompts/dataset)
 *   system: STR
 *   prompts: {system, output_tokens, intents: [{name, weight, system, template | templates,
 *             slots: {NAME: [values] | {values, weights} | {file}}, input_tokens,
 *             output_tokens}]}
 *   prompts_file: PATH         a JSONL prompts file (workload/prompts.h)
 *   dataset: {path, format: sharegpt|csv|trace, column, output_column, time_scale, shuffle}
 *   sessions: {turns: DIST, think: DIST (seconds), header: NAME}
 *   shared_prefix: {pool: INT, tokens: DIST, ratio: 0..1}
 *   perturbations: SPEC | [SPEC, ...]   (workload/perturb.h syntax)
 *   slos: [EXPR, ...]          (analysis/slo.h syntax), goodput: "ttft:MS tpot:MS e2el:MS"
 *   flow: {steps: [{name, role, kind: chat|completion|embeddings|http, depends_on: [NAME],
 *          method, url, headers: {NAME: VALUE}, body: {...}, capture: {VAR: POINTER},
 *          optional_capture: {VAR: POINTER}, timeout: DURATION, fallback: NAME,
 *          fallback_only: BOOL}]}
 * A class has at most one prompt source: prompts, prompts_file, dataset, or
 * the synthetic input_tokens/output_tokens. With a flow, the prompt source
 * gives the flow's {{prompt}} variable.
 *
 * Rules the parser applies (scenario.c; YAML helpers in scenario/yamlwalk.h):
 *  - One YAML document; aliases are followed (bounded: an alias bomb is an
 *    error), merge keys (<<) are refused; invalid UTF-8 is refused with its
 *    position. Names (class, step, intent, slot) are 1-64 of [A-Za-z0-9_.-].
 *  - rate is a number or a units rate ("600/m"); with stages it is the start
 *    rate (default 0). arrival defaults to poisson. A class with a trace
 *    dataset is open loop without rate/stages/users/arrival (the trace gives
 *    the send times). arrival/max_concurrency need an open loop, think/
 *    ramp_users a closed one.
 *  - stages, perturbations: a string or a list of strings joined with ','.
 *    slos: a list, or one string. goodput is checked as run --goodput reads it.
 *  - input_tokens/output_tokens keep their spec, with a relative
 *    empirical:FILE rewritten to the resolved path; other dists are parsed.
 *  - prompts: an intent without a name is "intentN" (1-based); weight
 *    defaults to 1; prompts.output_tokens defaults to fixed:128; slot files
 *    are read now (promptgen_slot_load_file). prompts.seed =
 *    rng_mix64(seed ^ rng_mix64(class index + 1)). shared_prefix needs
 *    prompts (only promptgen builds prefixes); its pool, ratio (default 1)
 *    and tokens (parsed again: each struct owns its dist) are copied into
 *    prompts.
 *  - dataset.format defaults to csv for a *.csv path, else sharegpt; column
 *    and output_column only with csv, time_scale (> 0, default 1) only with
 *    trace.
 *  - flow: kind defaults to chat ("completions" is read as completion);
 *    method only with http; depends_on takes a name or a list of names; a
 *    step named as a fallback is fallback_only (saying fallback_only: false
 *    there is an error; fallback_only: true on a step nobody falls back to
 *    too). flow_def_check() runs with the variables prompt, system,
 *    session_id, iteration, class and target; its message is placed at the
 *    step it names.
 *  - target.url: http:// or https://, trailing '/' dropped; simulator is an
 *    error with target.url. simulator.profile with a '/' or a .yaml/.yml
 *    ending is a file (resolved), else a preset name. Header values and
 *    simulator.set values may not hold CR or LF.
 *  - name defaults to the file name without its directory and .yaml/.yml.
 */
#ifndef TS_SCENARIO_SCENARIO_H
#define TS_SCENARIO_SCENARIO_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dist.h"
#include "base/err.h"
#include "workload/arrival.h"
#include "workload/dataset.h"
#include "scenario/flow.h"
#include "workload/promptgen.h"
#include "workload/workload.h"

#define SCENARIO_MAX_FILE    (16u << 20) /* bytes of a scenario file */
#define SCENARIO_MAX_CLASSES 64
#define SCENARIO_MAX_SLOS    64
#define SCENARIO_MAX_HEADERS 64
#define SCENARIO_MAX_INTENTS 1024
#define SCENARIO_MAX_STEPS   64
#define SCENARIO_MAX_STRING  (1u << 20) /* one string value */

/* Where a value came from, for errors found after parsing. */
struct scenario_pos {
    uint32_t line, col; /* 1-based; 0 = unknown */
};

struct scenario_sessions {
    bool enabled;
    struct dist turns; /* turns per session (>= 1 after rounding) */
    struct dist think; /* seconds between a turn's answer and the next turn */
    char *header;      /* session id header name (NULL: "X-Session-Id") */
};

struct scenario_prefix {
    uint32_t pool; /* 0 = off */
    struct dist tokens;
    double ratio;
};

struct scenario_dataset {
    char *path; /* resolved; NULL = none */
    enum dataset_format format;
    char *column, *output_column;
    double time_scale;
    bool shuffle;
};

/* A vector_search class's 'vector' block (docs/VECTOR.md, app/run_vector.h). */
struct scenario_vector {
    char *data;    /* the corpus the target holds: gen:... or a resolved path; NULL: default */
    char *index;   /* the built-in simulator's FAISS factory string; NULL: Flat */
    char *queries; /* gen:N or a resolved path; NULL: default */
    char *truth;   /* resolved .ivecs/.npy path; NULL: computed */
    uint32_t k;    /* 1..VECSET_MAX_K; 0: 10 */
    int64_t nprobe, ef_search;
    bool has_nprobe, has_ef_search;
    uint64_t seed;
};

struct scenario_class {
    char *name;
    struct scenario_pos pos;
    enum workload_endpoint endpoint;
    bool realtime; /* endpoint: realtime (endpoint is then chat) */

    bool open; /* rate or stages given: open loop; else closed (users) */
    double rate;
    struct arrival_process process;
    char *stages;
    uint32_t max_concurrency;
    uint32_t users;
    struct dist think;
    bool has_think;
    uint64_t ramp_users_ns;
    uint64_t requests; /* 0 = the scenario's, or none */

    bool stream, ignore_eos;
    json_t *body;                       /* overrides object or NULL (owned ref) */
    char *input_tokens, *output_tokens; /* dist specs for synthetic prompts, or NULL */
    char *system;

    bool has_prompts;
    struct promptgen_cfg prompts; /* moved into a struct promptgen by the engine */
    char *prompts_file;           /* resolved path or NULL */
    struct scenario_dataset dataset;
    struct scenario_sessions sessions;
    struct scenario_prefix prefix; /* copied into prompts' prefix fields when has_prompts */
    char *perturbations;           /* joined spec ("a,b,c") or NULL */

    char *slos[SCENARIO_MAX_SLOS];
    size_t nslos;
    char *goodput;

    bool has_flow;
    struct flow_def flow;

    /* endpoint: vector-search (POST {target}/vectors/search, recall@k per answer) */
    struct scenario_vector vector;
};

struct scenario {
    char *path; /* as given */
    char *dir;  /* its directory, for relative paths */
    char *name;
    uint64_t seed;
    uint64_t duration_ns, warmup_ns, drain_ns;
    bool has_drain;
    uint64_t requests;
    uint32_t workers;

    struct {
        char *url; /* NULL: the built-in simulator */
        char *model;
        char *api_key_env;
        char *headers[SCENARIO_MAX_HEADERS]; /* "Name: value" */
        size_t nheaders;
        uint32_t context_length, context_margin;
        char *tokenizer; /* resolved path or NULL */
        /* chat_template: {message, reply, bos} (workload/promptgen.h struct chat_template) */
        char *tmpl_message, *tmpl_reply, *tmpl_bos;
        uint64_t t_connect, t_ttfb, t_idle, t_total;
    } target;
    struct {
        char *profile;
        char *sets[64]; /* "key=value" */
        size_t nsets;
    } sim;

    struct scenario_class *classes;
    size_t nclasses;
};

/*
 * Loads and validates path. Returns 0 with *out filled (scenario_release()
 * it), TS_PARSE / -EINVAL with "file:line:col: message" in err, TS_TOOBIG,
 * or -errno when the file cannot be read. On error *out owns nothing.
 */
TS_MUST_CHECK int scenario_load(struct scenario *out, const char *path, char *err, size_t errlen);
/* The same from memory; name is used in messages and dir for relative paths (NULL: "."). */
TS_MUST_CHECK int scenario_load_mem(struct scenario *out, const char *name, const char *dir,
                                    const char *data, size_t len, char *err, size_t errlen);
void scenario_release(struct scenario *s);

/* The class named name, or NULL. */
const struct scenario_class *scenario_class_find(const struct scenario *s, const char *name);

#endif
