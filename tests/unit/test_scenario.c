/*
 * test_scenario.c - scenario files (scenario/scenario.h) and the YAML walk
 * helpers under them (scenario/yamlwalk.h): the full example, a table of broken
 * files with their exact messages, the semantics decided by the parser, and
 * allocation failures.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "scenario/scenario.h"
#include "scenario/yamlwalk.h"

#define S_PER_NS 1000000000ull

/* The source tree's root, from this file's path (meson gives it relative
 * to the build directory the tests run in, or absolute). */
static void source_path(char *out, size_t cap, const char *rel)
{
    const char *f = __FILE__;
    const char *cut = strstr(f, "tests/unit/test_scenario.c");
    snprintf(out, cap, "%.*s%s", (int)(cut ? cut - f : 0), f, rel);
}

/* The 1-based line of the file at path that starts with text, or 0. */
static unsigned line_of(const char *path, const char *text)
{
    char line[1024];
    unsigned n = 0, found = 0;
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    while (!found && fgets(line, sizeof(line), fp)) {
        n++;
        if (!strcmp(line, text))
            found = n;
    }
    fclose(fp);
    return found;
}

static int load(struct scenario *s, const char *text, char *err, size_t errlen)
{
    return scenario_load_mem(s, "s.yaml", "/base", text, strlen(text), err, errlen);
}

/* ---------------------------------------------------------------- the full example */

static void test_full_example(void **state)
{
    (void)state;
    char path[1024], dir[1024], want[1200], err[512] = "";
    source_path(path, sizeof(path), "examples/scenarios/full.yaml");
    source_path(dir, sizeof(dir), "examples/scenarios");
    struct scenario s;
    int rc = scenario_load(&s, path, err, sizeof(err));
    if (rc)
        fail_msg("%s", err);

    assert_string_equal(s.path, path);
    assert_string_equal(s.dir, dir);
    assert_string_equal(s.name, "full-example");
    assert_int_equal(s.seed, 42);
    assert_int_equal(s.duration_ns, 20 * S_PER_NS);
    assert_int_equal(s.requests, 500);
    assert_int_equal(s.warmup_ns, 2 * S_PER_NS);
    assert_true(s.has_drain);
    assert_int_equal(s.drain_ns, 10 * S_PER_NS);
    assert_int_equal(s.workers, 2);

    assert_null(s.target.url);
    assert_string_equal(s.target.model, "llama3-8b");
    assert_string_equal(s.target.api_key_env, "OPENAI_API_KEY");
    assert_int_equal(s.target.nheaders, 2);
    assert_string_equal(s.target.headers[0], "X-Tenant: tokenstorm");
    assert_string_equal(s.target.headers[1], "X-Trace: on");
    assert_int_equal(s.target.context_length, 8192);
    assert_int_equal(s.target.context_margin, 64);
    snprintf(want, sizeof(want), "%s/data/full-bytes-cl100k.tiktoken", dir);
    assert_string_equal(s.target.tokenizer, want);
    assert_int_equal(s.target.t_connect, 2 * S_PER_NS);
    assert_int_equal(s.target.t_ttfb, 30 * S_PER_NS);
    assert_int_equal(s.target.t_idle, 10 * S_PER_NS);
    assert_int_equal(s.target.t_total, 120 * S_PER_NS);
    assert_string_equal(s.sim.profile, "tiny");
    assert_int_equal(s.sim.nsets, 2);
    assert_string_equal(s.sim.sets[0], "max_num_seqs=64");
    assert_string_equal(s.sim.sets[1], "noise=false");

    assert_int_equal(s.nclasses, 6);
    /* 1. support: open loop, prompts, prefix, perturbations, SLOs */
    const struct scenario_class *k = scenario_class_find(&s, "support");
    assert_ptr_equal(k, &s.classes[0]);
    assert_int_equal(k->pos.line, line_of(path, "  - name: support\n"));
    assert_int_equal(k->pos.col, 5);
    assert_int_equal(k->endpoint, WORKLOAD_CHAT);
    assert_true(k->open);
    assert_true(k->rate == 4.0);
    assert_int_equal(k->process.kind, ARRIVAL_GAMMA);
    assert_true(k->process.burstiness == 2.0);
    assert_string_equal(k->stages, "5s:8,10s:8,5s:2");
    assert_int_equal(k->max_concurrency, 32);
    assert_int_equal(k->requests, 200);
    assert_true(k->stream && k->ignore_eos);
    assert_true(json_is_object(k->body));
    assert_true(json_real_value(json_object_get(k->body, "temperature")) == 0.2);
    assert_string_equal(json_string_value(json_object_get(k->body, "user")), "load-test");
    assert_true(k->has_prompts);
    const struct promptgen_cfg *pc = &k->prompts;
    assert_string_equal(pc->system, "You are a concise support assistant.");
    assert_int_equal(pc->output.kind, DIST_LOGNORMAL);
    assert_true(pc->output.lognormal.mean == 120 && pc->output.lognormal.sigma == 0.5);
    assert_int_equal(pc->nintents, 2);
    assert_string_equal(pc->intents[0].name, "order_status");
    assert_true(pc->intents[0].weight == 5);
    assert_string_equal(pc->intents[0].system, "You track orders.");
    assert_int_equal(pc->intents[0].ntemplates, 2);
    assert_string_equal(pc->intents[0].templates[1],
                        "Order {{order}} has not arrived, can you check? {{context}}");
    assert_int_equal(pc->intents[0].nslots, 2);
    assert_string_equal(pc->intents[0].slots[0].name, "order");
    assert_int_equal(pc->intents[0].slots[0].n, 3);
    assert_string_equal(pc->intents[0].slots[0].values[2], "#C0042");
    assert_null(pc->intents[0].slots[0].weights);
    assert_string_equal(pc->intents[0].slots[1].values[1], "Friday");
    assert_true(pc->intents[0].slots[1].weights[0] == 1 && pc->intents[0].slots[1].weights[1] == 3);
    assert_true(pc->intents[0].has_input && pc->intents[0].has_output);
    assert_int_equal(pc->intents[0].input.kind, DIST_UNIFORM);
    assert_true(pc->intents[0].input.uniform.lo == 40 && pc->intents[0].input.uniform.hi == 400);
    /* slot from data/items.txt (4 values, tab weights 3, 2, 1 and 1) */
    const struct promptgen_slot *item = &pc->intents[1].slots[0];
    assert_string_equal(item->name, "item");
    assert_int_equal(item->n, 4);
    assert_string_equal(item->values[0], "blue sneakers");
    assert_true(item->weights && item->weights[0] == 3 && item->weights[3] == 1);
    assert_int_equal(pc->intents[1].input.kind, DIST_EMPIRICAL);
    snprintf(want, sizeof(want), "%s/data/input_hist.txt", dir);
    assert_string_equal(pc->intents[1].input.empirical.source, want);
    assert_false(pc->intents[1].has_output);
    assert_int_equal(k->prefix.pool, 4);
    assert_true(k->prefix.ratio == 0.5);
    assert_int_equal(pc->prefix_pool, 4);
    assert_true(pc->prefix_ratio == 0.5);
    assert_int_equal(pc->prefix_tokens.kind, DIST_UNIFORM);
    assert_true(pc->prefix_tokens.uniform.lo == 500 && pc->prefix_tokens.uniform.hi == 1000);
    assert_true(pc->seed == rng_mix64(42 ^ rng_mix64(1)));
    assert_string_equal(k->perturbations, "typos:0.05@0.3,zero_width:0.02@0.1");
    assert_int_equal(k->nslos, 2);
    assert_string_equal(k->slos[1], "error_rate < 1%");
    assert_string_equal(k->goodput, "ttft:2000 tpot:100 e2el:20000");
    assert_false(k->has_flow);

    /* 2. chat: closed loop, sessions, prompts file */
    k = scenario_class_find(&s, "chat");
    assert_non_null(k);
    assert_false(k->open);
    assert_int_equal(k->users, 4);
    assert_true(k->has_think && k->think.kind == DIST_EXPONENTIAL &&
                k->think.exponential.mean == 1);
    assert_int_equal(k->ramp_users_ns, 5 * S_PER_NS);
    snprintf(want, sizeof(want), "%s/data/full-prompts.jsonl", dir);
    assert_string_equal(k->prompts_file, want);
    assert_true(k->sessions.enabled);
    assert_int_equal(k->sessions.turns.kind, DIST_UNIFORM);
    assert_true(k->sessions.think.exponential.mean == 0.5);
    assert_string_equal(k->sessions.header, "X-Session-Id");
    assert_int_equal(k->nslos, 1);
    assert_string_equal(k->slos[0], "ttft.p90 < 1500ms");
    assert_false(k->has_prompts);

    /* 3, 4. datasets */
    k = scenario_class_find(&s, "faq");
    snprintf(want, sizeof(want), "%s/data/questions.csv", dir);
    assert_string_equal(k->dataset.path, want);
    assert_int_equal(k->dataset.format, DATASET_CSV);
    assert_string_equal(k->dataset.column, "question");
    assert_string_equal(k->dataset.output_column, "max_tokens");
    assert_true(k->dataset.shuffle);
    assert_true(k->dataset.time_scale == 1.0);
    k = scenario_class_find(&s, "replay");
    assert_int_equal(k->dataset.format, DATASET_TRACE);
    assert_true(k->dataset.time_scale == 0.5);
    assert_true(k->open);
    assert_true(k->rate == 0);
    assert_int_equal(k->max_concurrency, 16);

    /* 5. synthetic completions */
    k = scenario_class_find(&s, "batch");
    assert_int_equal(k->endpoint, WORKLOAD_COMPLETIONS);
    assert_int_equal(k->process.kind, ARRIVAL_CONSTANT);
    assert_string_equal(k->system, "Continue the text.");
    assert_string_equal(k->input_tokens, "normal:512,64");
    assert_string_equal(k->output_tokens, "fixed:64");
    assert_false(k->stream);
    assert_false(k->ignore_eos);
    assert_null(k->goodput);

    /* 6. the flow */
    k = scenario_class_find(&s, "rag");
    assert_true(k->has_flow);
    const struct flow_def *f = &k->flow;
    assert_int_equal(f->n, 4);
    assert_string_equal(f->steps[0].name, "embed");
    assert_string_equal(f->steps[0].role, "orchestrator");
    assert_int_equal(f->steps[0].kind, FLOW_STEP_EMBEDDINGS);
    assert_int_equal(f->steps[0].timeout_ns, 5 * S_PER_NS);
    assert_int_equal(f->steps[0].fallback, -1);
    const struct flow_step_def *st = &f->steps[1];
    assert_int_equal(st->kind, FLOW_STEP_HTTP);
    assert_int_equal(st->ndeps, 1);
    assert_int_equal(st->deps[0], 0);
    assert_string_equal(st->method, "POST");
    assert_string_equal(st->url, "{{target}}/vector_stores/vs_default/search");
    assert_int_equal(st->nheaders, 1);
    assert_string_equal(st->headers[0], "X-Step: search");
    assert_int_equal(json_integer_value(json_object_get(st->body, "max_num_results")), 2);
    assert_int_equal(st->ncaptures, 2);
    assert_string_equal(st->captures[0].var, "passage");
    assert_string_equal(st->captures[0].pointer, "/data/0/content/0/text");
    assert_false(st->captures[0].optional);
    assert_string_equal(st->captures[1].var, "score");
    assert_true(st->captures[1].optional);
    assert_int_equal(st->fallback, 2);
    assert_false(st->fallback_only);
    assert_true(f->steps[2].fallback_only);
    assert_null(f->steps[2].method);
    assert_int_equal(f->steps[3].ndeps, 1);
    assert_int_equal(f->steps[3].deps[0], 1);
    assert_int_equal(f->steps[3].kind, FLOW_STEP_CHAT);
    json_t *msgs = json_object_get(f->steps[3].body, "messages");
    assert_int_equal(json_array_size(msgs), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, 1), "content")),
                        "{{prompt}}");

    assert_null(scenario_class_find(&s, "nope"));
    scenario_release(&s);
    assert_null(s.classes);
    scenario_release(&s); /* twice is harmless */
}

/* ---------------------------------------------------------------- broken files */

struct bad {
    const char *text;
    const char *err; /* the whole message */
};

#define CLS "classes:\n  - name: a\n    rate: 1\n"

static const struct bad bad_files[] = {
    /* the file as a whole */
    {"", "s.yaml:1:1: the file is empty; expected a mapping with 'classes'"},
    {"# nothing\n\n", "s.yaml:1:1: the file is empty; expected a mapping with 'classes'"},
    {"- a\n- b\n", "s.yaml:1:3: the scenario must be a mapping (key: value), got a list"},
    {"hello\n", "s.yaml:1:1: the scenario must be a mapping (key: value), got 'hello'"},
    {CLS "---\n" CLS, "s.yaml:4:1: a second YAML document (after --- or ...); expected one"},
    {"name: x\nclasses: [a\n", "s.yaml:3:1: flow sequence without a closing bracket"},
    {"name: x\nname: y\n" CLS, "s.yaml:2:1: duplicate key"},
    {"name: \"caf\xc3\xa9\"\nseed: 1\x80\n" CLS, "s.yaml:2:8: not UTF-8 text"},
    {"seed: 1\nduration: 5s\n", "s.yaml:1:1: 'classes' is required"},
    {"classes: []\n", "s.yaml:1:1: 'classes' is empty: give at least one class"},
    {"classes: {a: 1}\n", "s.yaml:1:11: 'classes' must be a list of classes, got a mapping"},
    /* unknown keys, at every level */
    {"naem: x\n" CLS, "s.yaml:1:1: unknown key 'naem' in the scenario (did you mean 'name'?)"},
    {"classes:\n  - name: chat\n    ratee: 5\n",
     "s.yaml:3:5: unknown key 'ratee' in class 'chat' (did you mean 'rate'?)"},
    {"target:\n  timeout: {conect: 1s}\n" CLS,
     "s.yaml:2:13: unknown key 'conect' in target.timeout (did you mean 'connect'?)"},
    {"classes:\n  - name: a\n    rate: 1\n    prompts:\n      intents:\n"
     "        - {name: i, templte: hi}\n",
     "s.yaml:6:21: unknown key 'templte' in intent 'i' (did you mean 'template'?)"},
    {"classes:\n  - name: a\n    users: 1\n    flow:\n      steps:\n"
     "        - {name: s, dependson: [x]}\n",
     "s.yaml:6:21: unknown key 'dependson' in step 's' (did you mean 'depends_on'?)"},
    {"classes:\n  - name: a\n    rate: 1\n    dataset: {path: d.csv, colunm: q}\n",
     "s.yaml:4:28: unknown key 'colunm' in dataset (did you mean 'column'?)"},
    {"base: &b {rate: 1}\n" CLS, "s.yaml:1:1: unknown key 'base' in the scenario"},
    {"classes:\n  - name: a\n    <<: {rate: 1}\n",
     "s.yaml:3:5: merge keys (<<) are not supported (in class 'a')"},
    /* wrong types and ranges */
    {"classes:\n  - name: a\n    rate: fast\n",
     "s.yaml:3:11: 'rate' must be a number > 0, got 'fast'"},
    {"classes:\n  - name: a\n    rate: 0\n", "s.yaml:3:11: 'rate' must be a number > 0, got '0'"},
    {"classes:\n  - name: a\n    rate: [1]\n",
     "s.yaml:3:12: 'rate' must be a number > 0, got a list"},
    {"classes:\n  - name: a\n    users: 0\n",
     "s.yaml:3:12: 'users' must be an integer in [1, 1000000], got '0'"},
    {"workers: many\n" CLS, "s.yaml:1:10: 'workers' must be an integer in [1, 1024], got 'many'"},
    {"seed: -1\n" CLS, "s.yaml:1:7: 'seed' must be an integer >= 0, got '-1'"},
    {"classes:\n  - name: a\n    rate: 1\n    stream: maybe\n",
     "s.yaml:4:13: 'stream' must be true or false, got 'maybe'"},
    {"classes:\n  - name: a\n    rate: 1\n    body: [1, 2]\n",
     "s.yaml:4:12: 'body' must be a mapping (request fields to override), got a list"},
    {"classes:\n  - name: a b\n    rate: 1\n",
     "s.yaml:2:11: 'name' must be 1 to 64 letters, digits, '_', '.' or '-', got 'a b'"},
    {"classes:\n  - rate: 1\n", "s.yaml:2:5: class 1: 'name' is required"},
    {"classes:\n  - name: a\n    endpoint: chatt\n    rate: 1\n",
     "s.yaml:3:15: 'endpoint' must be chat, completions, embeddings, realtime or vector-search, "
     "got 'chatt' (did "
     "you "
     "mean 'chat'?)"},
    {"classes:\n  - name: a\n    rate: 1\n    arrival: possion\n",
     "s.yaml:4:14: 'arrival': unknown arrival process 'possion' (expected poisson, constant or "
     "gamma:B)"},
    {"classes:\n  - name: a\n    rate: 1\n    dataset: {path: d.json, format: csvv}\n",
     "s.yaml:4:37: 'format' must be sharegpt, csv or trace, got 'csvv' (did you mean 'csv'?)"},
    {"target: {url: ftp://x}\n" CLS,
     "s.yaml:1:15: 'url' must be an http:// or https:// URL, got 'ftp://x'"},
    {"classes:\n  - name: a\n    rate: 1\n    input_tokens: normal:512\n",
     "s.yaml:4:19: 'input_tokens': normal: expected MEAN,SD (e.g. normal:512,64), got '512'"},
    {"duration: 10 parsecs\n" CLS,
     "s.yaml:1:11: 'duration' must be a duration > 0 (like 500ms, 30s, 2m), got '10 parsecs'"},
    {"duration: 0s\n" CLS,
     "s.yaml:1:11: 'duration' must be a duration > 0 (like 500ms, 30s, 2m), got '0s'"},
    {"classes:\n  - name: a\n    rate: 1\n    stages: [\"10s:5\", \"1x:5\"]\n",
     "s.yaml:4:15: 'stages': stage 2: bad duration '1x' (e.g. 30s)"},
    /* class semantics */
    {"classes:\n  - name: a\n    rate: 1\n    users: 2\n",
     "s.yaml:4:5: class 'a': give rate or stages (open loop) or users (closed loop), not both"},
    {"classes:\n  - name: a\n    requests: 5\n",
     "s.yaml:2:5: class 'a': needs rate or stages (open loop), or users (closed loop)"},
    {"classes:\n  - name: a\n    users: 2\n    max_concurrency: 4\n",
     "s.yaml:4:5: class 'a': 'max_concurrency' is for open-loop classes (with rate or stages)"},
    {"classes:\n  - name: a\n    rate: 2\n    think: 1\n",
     "s.yaml:4:5: class 'a': 'think' is for closed-loop classes (with users)"},
    {"classes:\n  - name: a\n    rate: 1\n  - name: b\n    rate: 1\n  - name: a\n    rate: 1\n",
     "s.yaml:6:11: class 'a': duplicate name (first at 2:11)"},
    {"classes:\n  - name: a\n    rate: 1\n    dataset: {path: d.json}\n    prompts_file: p.jsonl\n",
     "s.yaml:5:5: class 'a': 'dataset' and 'prompts_file' are both prompt sources; give one of "
     "prompts, prompts_file, dataset or input_tokens/output_tokens"},
    {"classes:\n  - name: a\n    rate: 1\n    output_tokens: 10\n    input_tokens: 20\n"
     "    prompts_file: p.jsonl\n",
     "s.yaml:6:5: class 'a': 'input_tokens/output_tokens' and 'prompts_file' are both prompt "
     "sources; give one of prompts, prompts_file, dataset or input_tokens/output_tokens"},
    {"classes:\n  - name: a\n    endpoint: embeddings\n    rate: 1\n    sessions: {turns: 3}\n",
     "s.yaml:5:5: class 'a': 'sessions' needs endpoint chat (this class uses embeddings)"},
    {"classes:\n  - name: a\n    rate: 1\n    shared_prefix: {pool: 2, tokens: 100}\n",
     "s.yaml:4:5: class 'a': 'shared_prefix' needs 'prompts': only generated prompts can carry a "
     "shared prefix"},
    {"classes:\n  - name: a\n    rate: 1\n    dataset: {path: t.jsonl, format: trace}\n",
     "s.yaml:3:5: class 'a': 'rate' cannot be used with a trace dataset (the trace gives the send "
     "times)"},
    {"classes:\n  - name: a\n    rate: 1\n    dataset: {path: d.json, time_scale: 2}\n",
     "s.yaml:4:29: dataset: 'time_scale' is only for format trace"},
    {"target: {url: \"http://h:1\"}\nsimulator: {profile: tiny}\n" CLS,
     "s.yaml:2:1: 'simulator' is for runs without target.url (the built-in simulator)"},
    /* SLOs, goodput, perturbations */
    {"classes:\n  - name: a\n    rate: 1\n    slos: [\"ttft.p95<2s\", \"tfft.p95<2s\"]\n",
     "s.yaml:4:28: slo 'tfft.p95<2s': unknown metric 'tfft' at column 1 (did you mean 'ttft'?)"},
    {"classes:\n  - name: a\n    rate: 1\n    goodput: \"ttft:500 tpot:fast\"\n",
     "s.yaml:4:15: 'goodput': tpot: expected milliseconds > 0, got 'fast'"},
    {"classes:\n  - name: a\n    rate: 1\n    goodput: \"ttf:500\"\n",
     "s.yaml:4:15: 'goodput': unknown metric 'ttf' (ttft, tpot or e2el) (did you mean 'ttft'?)"},
    {"classes:\n  - name: a\n    rate: 1\n    perturbations: [typos, typo]\n",
     "s.yaml:4:28: 'perturbations': unknown perturbation 'typo' (did you mean 'typos'?)"},
    /* headers */
    {"target:\n  headers: {X-A: \"a\\r\\nInjected: 1\"}\n" CLS,
     "s.yaml:2:19: header 'X-A': the value holds a line break (CR or LF)"},
    {"target:\n  headers: {\"X A\": b}\n" CLS,
     "s.yaml:2:14: header 'X A': not a valid header name"},
    /* prompts */
    {"classes:\n  - name: a\n    rate: 1\n    prompts:\n      intents:\n"
     "        - {name: i, template: x, slots: {s: {file: missing.txt}}}\n",
     "s.yaml:6:52: slot 's': /base/missing.txt: No such file or directory"},
    {"classes:\n  - name: a\n    rate: 1\n    prompts:\n      intents:\n"
     "        - {name: i, template: x, slots: {s: {values: [a, b], weights: [1]}}}\n",
     "s.yaml:6:72: slot 's': 'weights' must be a list of 2 numbers, one per value"},
    {"classes:\n  - name: a\n    rate: 1\n    prompts:\n      intents:\n"
     "        - {name: i, template: x}\n        - {name: i, template: y}\n",
     "s.yaml:7:18: intent 'i': duplicate name (first at 6:18)"},
    {"classes:\n  - name: a\n    rate: 1\n    prompts:\n      intents:\n"
     "        - {name: i, template: x, templates: [y]}\n",
     "s.yaml:6:34: intent 'i': give 'template' or 'templates', not both"},
    /* flows */
    {"classes:\n  - name: a\n    users: 1\n    flow:\n      steps:\n"
     "        - {name: search, kind: chat}\n"
     "        - {name: generate, depends_on: [serch]}\n",
     "s.yaml:7:41: step 'generate': depends_on: unknown step 'serch' (did you mean 'search'?)"},
    {"classes:\n  - name: a\n    users: 1\n    flow:\n      steps:\n"
     "        - {name: x, depends_on: y}\n        - {name: y, depends_on: x}\n",
     "s.yaml:5:7: flow: dependency cycle: 'x' -> 'y' -> 'x'"},
    {"classes:\n  - name: a\n    users: 1\n    flow:\n      steps:\n"
     "        - {name: x, fallback: backup}\n",
     "s.yaml:6:31: step 'x': fallback: unknown step 'backup'"},
    {"classes:\n  - name: a\n    users: 1\n    flow:\n      steps:\n"
     "        - {name: x}\n        - {name: y, fallback_only: true}\n",
     "s.yaml:7:21: step 'y': fallback_only, but no step names it as its fallback"},
    {"classes:\n  - name: a\n    users: 1\n    flow:\n      steps:\n"
     "        - {name: x}\n        - {name: x}\n",
     "s.yaml:7:18: step 'x': duplicate name (first at 6:18)"},
    {"classes:\n  - name: a\n    users: 1\n    flow:\n      steps:\n"
     "        - {name: x, kind: http}\n",
     "s.yaml:6:18: step 'x': kind http needs a 'url'"},
    {"classes:\n  - name: a\n    users: 1\n    flow:\n      steps:\n"
     "        - {name: x, body: {q: \"{{promt}}\"}}\n",
     "s.yaml:6:18: step 'x': unknown variable {{promt}}, did you mean {{prompt}}? (in body /q)"},
    {"classes:\n  - name: a\n    users: 1\n    flow:\n      steps:\n"
     "        - {name: x, capture: {1bad: /a}}\n",
     "s.yaml:6:31: step 'x': '1bad' is not a variable name ([A-Za-z_][A-Za-z0-9_.]*, at most 64 "
     "bytes)"},
    /* retrieval steps */
    {"classes:\n  - name: a\n    users: 1\n    flow:\n      steps:\n"
     "        - {name: x, kind: chat, retrieval: true}\n",
     "s.yaml:6:44: step 'x': retrieval is for a kind: http step (a POST to a vector store's "
     "/search), not chat"},
    {"classes:\n  - name: a\n    users: 1\n    flow:\n      steps:\n"
     "        - {name: x, kind: http, url: u, retrieval: {k: 51}}\n",
     "s.yaml:6:56: 'k' must be an integer in [1, 50], got '51'"},
    {"classes:\n  - name: a\n    users: 1\n    flow:\n      steps:\n"
     "        - {name: x, kind: http, url: u, retrieval: {kk: 3}}\n",
     "s.yaml:6:53: unknown key 'kk' in the retrieval of step 'x' (did you mean 'k'?)"},
    {"classes:\n  - name: a\n    users: 1\n    flow:\n      steps:\n"
     "        - {name: x, kind: http, url: u, retrieval: maybe}\n",
     "s.yaml:6:52: retrieval must be true or false, got 'maybe'"},
    /* aliases */
    {"classes:\n  - name: a\n    rate: 1\n    body: *nope\n", "s.yaml:4:12: unknown alias '*nope'"},
};

/* retrieval: true takes k from max_num_results, a mapping gives k and docs;
 * false or absent: not a retrieval step. */
static void test_retrieval_steps(void **state)
{
    (void)state;
    const char *text =
        "classes:\n  - name: a\n    users: 1\n    flow:\n      steps:\n"
        "        - {name: s1, kind: http, url: u, retrieval: true,\n"
        "           body: {query: q, max_num_results: 4}}\n"
        "        - {name: s2, kind: http, url: u, retrieval: true}\n"
        "        - {name: s3, kind: http, url: u, retrieval: {k: 7, docs: kb.jsonl}}\n"
        "        - {name: s4, kind: http, url: u, retrieval: false}\n"
        "        - {name: g, kind: chat, depends_on: [s1]}\n";
    struct scenario s;
    char err[256];
    assert_int_equal(load(&s, text, err, sizeof(err)), 0);
    const struct flow_def *f = &s.classes[0].flow;
    assert_int_equal(f->steps[0].retrieval_k, 4);
    assert_null(f->steps[0].retrieval_docs);
    assert_int_equal(f->steps[1].retrieval_k, 10);
    assert_int_equal(f->steps[2].retrieval_k, 7);
    assert_string_equal(f->steps[2].retrieval_docs, "/base/kb.jsonl");
    assert_int_equal(f->steps[3].retrieval_k, 0);
    assert_int_equal(f->steps[4].retrieval_k, 0);
    scenario_release(&s);
}

static void test_bad_files(void **state)
{
    (void)state;
    int failed = 0;
    for (size_t i = 0; i < sizeof(bad_files) / sizeof(bad_files[0]); i++) {
        struct scenario s;
        char err[512];
        memset(err, 'x', sizeof(err));
        int rc = load(&s, bad_files[i].text, err, sizeof(err));
        if (rc == 0) {
            scenario_release(&s);
            fail_msg("case %zu: loaded, expected %s", i, bad_files[i].err);
        }
        assert_non_null(memchr(err, '\0', sizeof(err)));
        if (strcmp(err, bad_files[i].err)) {
            print_error("case %zu:\n  got  %s\n  want %s\n", i, err, bad_files[i].err);
            failed++;
        }
        assert_true(rc == -EINVAL || rc == TS_PARSE);
        assert_null(s.classes); /* *out owns nothing */
        assert_null(s.path);
    }
    assert_int_equal(failed, 0);
}

/* More classes than SCENARIO_MAX_CLASSES: the error is at the first one too many. */
static void test_too_many_classes(void **state)
{
    (void)state;
    char *text = malloc(64 * 1024), err[256];
    assert_non_null(text);
    size_t o = (size_t)sprintf(text, "classes:\n");
    for (int i = 0; i < SCENARIO_MAX_CLASSES + 1; i++)
        o += (size_t)sprintf(text + o, "  - {name: c%d, rate: 1}\n", i);
    struct scenario s;
    assert_int_equal(load(&s, text, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "s.yaml:66:6: more than 64 classes");
    /* exactly the maximum loads */
    char *cut = strstr(text, "  - {name: c64");
    *cut = '\0';
    assert_int_equal(load(&s, text, err, sizeof(err)), 0);
    assert_int_equal(s.nclasses, 64);
    assert_string_equal(s.classes[63].name, "c63");
    scenario_release(&s);
    free(text);
}

/* Aliases are followed; a billion-laughs body runs out of its visit budget. */
static void test_aliases(void **state)
{
    (void)state;
    const char *ok = "classes:\n"
                     "  - name: a\n"
                     "    rate: &r 2\n"
                     "    body: &b {temperature: 0.5, stop: [\"\\n\"]}\n"
                     "    slos: &slos [\"ttft.p99<1s\"]\n"
                     "  - name: b\n"
                     "    rate: *r\n"
                     "    body: *b\n"
                     "    slos: *slos\n";
    struct scenario s;
    char err[512];
    if (load(&s, ok, err, sizeof(err)))
        fail_msg("%s", err);
    assert_true(s.classes[1].rate == 2);
    assert_true(json_equal(s.classes[0].body, s.classes[1].body));
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(s.classes[1].body, "stop"), 0)), "\n");
    assert_string_equal(s.classes[1].slos[0], "ttft.p99<1s");
    scenario_release(&s);

    const char *bomb = "classes:\n"
                       "  - name: a\n"
                       "    rate: 1\n"
                       "    body:\n"
                       "      a: &a [x, x, x, x, x, x, x, x, x, x]\n"
                       "      b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                       "      c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                       "      d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                       "      e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
                       "      f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
                       "      g: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n";
    assert_int_equal(load(&s, bomb, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, ": the document expands to more than 2000000 nodes or 67108864 "
                                "bytes (aliases?)"));
    assert_true(!strncmp(err, "s.yaml:", 7));

    /* an alias of its own ancestor is cut by the depth limit */
    const char *loop = "classes:\n  - name: a\n    rate: 1\n    body: &x {a: *x}\n";
    assert_int_equal(load(&s, loop, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "nested deeper than 64 levels"));
}

/* ---------------------------------------------------------------- semantics */

static void test_semantics(void **state)
{
    (void)state;
    const char *text = "target:\n"
                       "  url: https://api.example.com/v1//\n"
                       "classes:\n"
                       "  - name: a\n"
                       "    rate: 600/m\n"
                       "    stages: \"10s:5,5s:0\"\n"
                       "    perturbations: typos\n"
                       "    slos: ttft.p99<1s\n"
                       "    body: {n: 1, big: 12345678901234567, f: 1.5, e: 1e3, s: '7', t: true,"
                       " z: ~, q: !!str 5, x: 0x10}\n"
                       "  - name: b\n"
                       "    users: 1\n"
                       "    prompts:\n"
                       "      intents: [{template: hi}, {template: \"{{w}}\", slots: {w: [a]}}]\n"
                       "    flow:\n"
                       "      steps:\n"
                       "        - {name: first, fallback: second, url: \"{{target}}/x\"}\n"
                       "        - {name: second, kind: completions}\n";
    struct scenario s;
    char err[512];
    if (load(&s, text, err, sizeof(err)))
        fail_msg("%s", err);
    assert_string_equal(s.target.url, "https://api.example.com/v1");
    assert_string_equal(s.name, "s"); /* the file name without .yaml */
    assert_string_equal(s.dir, "/base");
    assert_int_equal(s.seed, 0);
    assert_false(s.has_drain);
    assert_int_equal(s.drain_ns, 30 * S_PER_NS);
    const struct scenario_class *a = &s.classes[0];
    assert_true(a->rate == 10.0);
    assert_int_equal(a->process.kind, ARRIVAL_POISSON); /* the default */
    assert_string_equal(a->stages, "10s:5,5s:0");
    assert_string_equal(a->perturbations, "typos");
    assert_int_equal(a->nslos, 1);
    assert_false(a->has_prompts);
    json_t *b = a->body;
    assert_true(json_is_integer(json_object_get(b, "n")));
    assert_true(json_is_real(json_object_get(b, "big")));
    assert_true(json_real_value(json_object_get(b, "f")) == 1.5);
    assert_true(json_real_value(json_object_get(b, "e")) == 1000.0);
    assert_string_equal(json_string_value(json_object_get(b, "s")), "7");
    assert_true(json_is_true(json_object_get(b, "t")));
    assert_true(json_is_null(json_object_get(b, "z")));
    assert_string_equal(json_string_value(json_object_get(b, "q")), "5");
    assert_string_equal(json_string_value(json_object_get(b, "x")), "0x10");

    const struct scenario_class *c = &s.classes[1];
    assert_false(c->open);
    assert_int_equal(c->prompts.nintents, 2);
    assert_string_equal(c->prompts.intents[0].name, "intent1");
    assert_string_equal(c->prompts.intents[1].name, "intent2");
    assert_true(c->prompts.intents[1].weight == 1.0);
    assert_int_equal(c->prompts.output.kind, DIST_FIXED);
    assert_true(c->prompts.output.fixed.value == 128);
    assert_int_equal(c->prompts.prefix_pool, 0);
    assert_true(c->prompts.seed == rng_mix64(0 ^ rng_mix64(2)));
    assert_int_equal(c->flow.steps[0].fallback, 1);
    assert_true(c->flow.steps[1].fallback_only); /* implied */
    assert_int_equal(c->flow.steps[1].kind, FLOW_STEP_COMPLETION);
    assert_string_equal(c->flow.steps[0].url, "{{target}}/x");
    scenario_release(&s);

    /* a fallback that says fallback_only: false is an error */
    const char *no = "classes:\n  - name: a\n    users: 1\n    flow:\n      steps:\n"
                     "        - {name: x, fallback: y}\n"
                     "        - {name: y, fallback_only: false}\n";
    assert_int_equal(load(&s, no, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "s.yaml:7:21: step 'y': fallback_only is false, but step 'x' names "
                             "it as its fallback");
}

/* Relative paths go against the file's directory; absolute ones stay. */
static void test_paths(void **state)
{
    (void)state;
    char dir[] = "/tmp/ts_scenario_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], slots[256], err[512];
    snprintf(slots, sizeof(slots), "%s/words.txt", dir);
    FILE *fp = fopen(slots, "w");
    assert_non_null(fp);
    fputs("# words\nalpha\nbeta\t2\n", fp);
    fclose(fp);
    snprintf(path, sizeof(path), "%s/run.yml", dir);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs("classes:\n"
          "  - name: a\n"
          "    rate: 1\n"
          "    prompts:\n"
          "      intents: [{template: \"{{w}}\", slots: {w: {file: words.txt}}}]\n"
          "  - name: b\n"
          "    rate: 1\n"
          "    dataset: {path: /abs/data.csv}\n"
          "  - name: c\n"
          "    rate: 1\n"
          "    prompts_file: sub/p.jsonl\n",
          fp);
    fclose(fp);
    struct scenario s;
    if (scenario_load(&s, path, err, sizeof(err)))
        fail_msg("%s", err);
    assert_string_equal(s.name, "run");
    assert_string_equal(s.dir, dir);
    const struct promptgen_slot *w = &s.classes[0].prompts.intents[0].slots[0];
    assert_int_equal(w->n, 2);
    assert_string_equal(w->values[1], "beta");
    assert_true(w->weights[0] == 1 && w->weights[1] == 2);
    assert_string_equal(s.classes[1].dataset.path, "/abs/data.csv");
    assert_int_equal(s.classes[1].dataset.format, DATASET_CSV); /* from .csv */
    char want[300];
    snprintf(want, sizeof(want), "%s/sub/p.jsonl", dir);
    assert_string_equal(s.classes[2].prompts_file, want);
    scenario_release(&s);

    unlink(slots);
    unlink(path);
    rmdir(dir);
    assert_int_equal(scenario_load(&s, path, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "run.yml"));

    char *r = yw_path_resolve("/", "x");
    assert_string_equal(r, "/x");
    ts_free(r);
    r = yw_path_resolve("rel/", "x");
    assert_string_equal(r, "rel/x");
    ts_free(r);
    r = yw_path_resolve(".", "x");
    assert_string_equal(r, "x");
    ts_free(r);
}

/* ---------------------------------------------------------------- vector-search classes */

/* A vector-search class: its block's values, gen specs kept, paths resolved,
 * and the keys and mixes that are refused, each at its place. */
static void test_vector_class(void **state)
{
    (void)state;
    const char *text = "classes:\n"
                       "  - name: chat\n"
                       "    rate: 1\n"
                       "  - name: v\n"
                       "    endpoint: vector-search\n"
                       "    users: 2\n"
                       "    body: {extra: 1}\n"
                       "    vector: {data: gen:500x8, index: \"IVF16,Flat\", queries: q.fvecs,\n"
                       "             truth: gt.ivecs, k: 5, nprobe: 4, ef_search: 0, seed: 3}\n"
                       "  - name: w\n"
                       "    endpoint: vector_search\n"
                       "    rate: 2\n"
                       "    vector: {data: gen:500x8, index: \"IVF16,Flat\", seed: 3}\n";
    struct scenario s;
    char err[512];
    if (load(&s, text, err, sizeof(err)))
        fail_msg("%s", err);
    const struct scenario_class *v = &s.classes[1];
    assert_int_equal(s.classes[0].endpoint, WORKLOAD_CHAT);
    assert_int_equal(v->endpoint, WORKLOAD_VECTOR_SEARCH);
    assert_string_equal(v->vector.data, "gen:500x8");
    assert_string_equal(v->vector.index, "IVF16,Flat");
    assert_string_equal(v->vector.queries, "/base/q.fvecs");
    assert_string_equal(v->vector.truth, "/base/gt.ivecs");
    assert_int_equal(v->vector.k, 5);
    assert_true(v->vector.has_nprobe && v->vector.nprobe == 4);
    assert_true(v->vector.has_ef_search && v->vector.ef_search == 0);
    assert_int_equal(v->vector.seed, 3);
    const struct scenario_class *w = &s.classes[2];
    assert_int_equal(w->endpoint, WORKLOAD_VECTOR_SEARCH);
    assert_null(w->vector.queries);
    assert_int_equal(w->vector.k, 0); /* the default, 10, is the runner's */
    assert_false(w->vector.has_nprobe);
    scenario_release(&s);

    static const struct {
        const char *text, *err;
    } bad[] = {
        {"classes:\n  - name: a\n    rate: 1\n    vector: {k: 5}\n",
         "s.yaml:4:14: class 'a': 'vector' is for endpoint vector-search"},
        {"classes:\n  - name: a\n    endpoint: vector-search\n    rate: 1\n"
         "    input_tokens: fixed:8\n",
         "s.yaml:5:5: class 'a': 'input_tokens' is not for endpoint vector-search (its "
         "requests are the 'vector' block's query vectors)"},
        {"classes:\n  - name: a\n    endpoint: vector-search\n    rate: 1\n"
         "    vector: {k: 0}\n",
         "s.yaml:5:17: 'k' must be an integer in [1, 1024], got '0'"},
        {"classes:\n  - name: a\n    endpoint: vector-search\n    rate: 1\n"
         "    vector: {nprob: 4}\n",
         "s.yaml:5:14: unknown key 'nprob' in vector (did you mean 'nprobe'?)"},
        {"classes:\n  - name: a\n    endpoint: vector-search\n    rate: 1\n"
         "    vector: {data: gen:100x4}\n"
         "  - name: b\n    endpoint: vector-search\n    rate: 1\n"
         "    vector: {data: gen:200x4}\n",
         "s.yaml:9:14: class 'b': vector data, index and seed must be those of class 'a': the "
         "built-in simulator holds one corpus (give target.url to search several)"},
        {"classes:\n  - name: a\n    endpoint: vectors\n    rate: 1\n",
         "s.yaml:3:15: 'endpoint' must be chat, completions, embeddings, realtime or "
         "vector-search, got 'vectors'"},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = load(&s, bad[i].text, err, sizeof(err));
        if (rc == 0) {
            scenario_release(&s);
            fail_msg("case %zu loaded", i);
        }
        if (strcmp(err, bad[i].err)) {
            print_error("case %zu:\n  got  %s\n  want %s\n", i, err, bad[i].err);
            failed++;
        }
    }
    assert_int_equal(failed, 0);
    /* with a target of its own, classes may search different collections */
    const char *two = "target: {url: http://127.0.0.1:9/v1}\nclasses:\n"
                      "  - name: a\n    endpoint: vector-search\n    rate: 1\n"
                      "    vector: {data: gen:100x4}\n"
                      "  - name: b\n    endpoint: vector-search\n    rate: 1\n"
                      "    vector: {data: gen:200x4}\n";
    if (load(&s, two, err, sizeof(err)))
        fail_msg("%s", err);
    scenario_release(&s);
}

/* ---------------------------------------------------------------- allocation failures */

static void test_alloc_failures(void **state)
{
    (void)state;
    char path[1024], err[512];
    source_path(path, sizeof(path), "examples/scenarios/full.yaml");
    int ok = 0, oom = 0;
    for (long n = 0; n < 5000 && !ok; n++) {
        struct scenario s;
        ts_alloc_fail_after(n);
        int rc = scenario_load(&s, path, err, sizeof(err));
        ts_alloc_fail_after(-1);
        if (rc == 0) {
            ok = 1;
            scenario_release(&s);
        } else {
            if (rc != -ENOMEM)
                fail_msg("n=%ld: rc %d: %s", n, rc, err);
            oom++;
        }
    }
    assert_true(ok);
    assert_true(oom > 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_example),    cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_retrieval_steps), cmocka_unit_test(test_too_many_classes),
        cmocka_unit_test(test_aliases),         cmocka_unit_test(test_semantics),
        cmocka_unit_test(test_paths),           cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_vector_class),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
