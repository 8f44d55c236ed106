/*
 * flow.h - multi-step requests (RAG, agents): the pure state machine a
 * runner drives once per user iteration, and the {{var}} JSON templates its
 * steps are written in.
 *
 * A flow is a small DAG of steps. Each step is one request (an OpenAI chat,
 * completion or embeddings call, or any HTTP request) whose body, URL and
 * headers are templates; values it "captures" from its response (RFC 6901
 * pointers, llm/jsonptr.h) become variables for the steps that depend on it.
 * A step may name a fallback step, started only when it fails, whose
 * captures then take the failed step's place.
 *
 * Nothing here does I/O, reads clocks or keeps global state: the runner asks
 * flow_run_next() what to start, flow_run_render() for the request, sends
 * it, and reports the answer with flow_run_complete(). Every allocation is
 * checked (-ENOMEM), including jansson's.
 *
 * ---- Templates ----
 *
 * A template is a jansson value. Every string value in it (object keys are
 * never templated) may hold placeholders "{{name}}", with blanks (spaces,
 * tabs) allowed inside the braces: "{{ name }}". A name is
 * [A-Za-z_][A-Za-z0-9_.]* of at most FLOW_VAR_NAME_MAX bytes (the '.' has no
 * meaning of its own). A placeholder is replaced by the variable's value as
 * text: a string variable by its text, any other (number, true/false/null,
 * array, object) by its compact JSON ("3", "0.5", "2.0", "null",
 * "[1,\"a\"]"). A string that is exactly one placeholder ("{{passages}}",
 * nothing outside the braces) is replaced by the variable's JSON value
 * itself, so arrays, objects and numbers keep their type.
 * Any "{{" must start a placeholder: an unclosed "{{" or one holding
 * something that is not a name is an error (there is no way to write a
 * literal "{{" in a template).
 *
 * Reals are written as the shortest text that reads back as the same
 * double, with ".0" when it would look like an integer (jansson keeps the
 * two kinds apart; a JSON reader does not).
 */
#ifndef TS_SCENARIO_FLOW_H
#define TS_SCENARIO_FLOW_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

#define FLOW_VARS_MAX        64          /* variables in one flow_vars */
#define FLOW_VAR_NAME_MAX    64          /* bytes of a variable name */
#define FLOW_VAR_VALUE_MAX   (1u << 20)  /* bytes of a value as compact JSON */
#define FLOW_VAR_DEPTH_MAX   512         /* nesting of a value */
#define FLOW_RENDER_MAX      (16u << 20) /* bytes of a rendered body */
#define FLOW_TEXT_MAX        8192        /* bytes of a rendered URL or header */
#define FLOW_TMPL_DEPTH_MAX  64          /* nesting of a template */
#define FLOW_STEPS_MAX       64          /* steps in one flow */
#define FLOW_RESPONSE_MAX    (64u << 20) /* bytes of a response parsed for captures */
#define FLOW_RETRIEVAL_K_MAX 50          /* k of a retrieval step (the search's max_num_results) */

/* ---- Variables ---- */

/*
 * A small name -> value map. Embedded by its owner: flow_vars_init(), then
 * flow_vars_release(). The fields are private. It holds one reference to
 * each value and the value's compact JSON (so rendering never serializes a
 * variable twice).
 */
struct flow_var {
    char *name;
    json_t *value;
    char *json; /* compact JSON of value, NUL-terminated */
    size_t json_len;
};

struct flow_vars {
    size_t n;
    struct flow_var v[FLOW_VARS_MAX];
};

void flow_vars_init(struct flow_vars *vars);
/* Drops every reference and name; the map is then empty and reusable. */
void flow_vars_release(struct flow_vars *vars);

/*
 * Sets name to value, replacing an earlier value of that name. The reference
 * to value is stolen, also when this fails (as jansson's _new functions do).
 * Returns 0; -EINVAL when the name is not a valid name or value is NULL;
 * TS_TOOBIG when FLOW_VARS_MAX names are already set (and this is a new
 * one), the value's compact JSON exceeds FLOW_VAR_VALUE_MAX bytes or it is
 * nested deeper than FLOW_VAR_DEPTH_MAX; -ENOMEM. On failure the map is
 * unchanged.
 */
TS_MUST_CHECK int flow_vars_set(struct flow_vars *vars, const char *name, json_t *value);

/* The value of name[0..len), borrowed (valid until it is replaced or the map
 * released), or NULL when it is not set. */
json_t *flow_vars_get(const struct flow_vars *vars, const char *name, size_t len);

/* Whether s[0..len) is a valid variable name. */
bool flow_var_name_valid(const char *s, size_t len);

/* ---- Templates ---- */

/*
 * Checks that every placeholder in tmpl is well formed and names one of
 * known[0..nknown) (known may be NULL when nknown is 0), and that tmpl is
 * nested at most FLOW_TMPL_DEPTH_MAX deep. Returns 0, -EINVAL or TS_TOOBIG
 * (too deep) with a message in err naming the string's JSON pointer in tmpl,
 * e.g. "unknown variable {{pasages}}, did you mean {{passages}}? (in
 * /messages/1/content)" (no "(in ...)" when tmpl itself is the string).
 */
TS_MUST_CHECK int flow_template_check(const json_t *tmpl, const char *const *known, size_t nknown,
                                      char *err, size_t errlen);

/*
 * Renders tmpl with vars into *out: a new value (the caller owns the
 * reference) that shares nothing with tmpl or vars, so it may be modified.
 * Returns 0, -EINVAL (a malformed placeholder or a variable that is not set,
 * named in err with its JSON pointer), TS_TOOBIG (the rendered strings and
 * substituted values add up to more than FLOW_RENDER_MAX bytes, or tmpl is
 * too deep), -ENOMEM. *out is NULL on failure.
 */
TS_MUST_CHECK int flow_template_render(const json_t *tmpl, const struct flow_vars *vars,
                                       json_t **out, char *err, size_t errlen);

/*
 * Renders one template string s (NUL-terminated) as plain text, for URLs
 * and header values: appended to out, whose max is the cap (TS_TOOBIG).
 * Substitutions are inserted as they are (no escaping; see flow_run_render
 * for what URLs and headers get). Returns 0, -EINVAL, TS_TOOBIG, -ENOMEM;
 * on failure out is left as it was.
 */
TS_MUST_CHECK int flow_template_render_string(const char *s, const struct flow_vars *vars,
                                              struct buf *out, char *err, size_t errlen);

/*
 * Appends v as compact JSON (members in their stored order, strings escaped
 * as openai_json_escape does, reals as described above) to out. Returns 0,
 * -ENOMEM, TS_TOOBIG (out's cap, or nested deeper than FLOW_VAR_DEPTH_MAX +
 * FLOW_TMPL_DEPTH_MAX); on failure out may hold a part.
 */
TS_MUST_CHECK int flow_json_dump(struct buf *out, const json_t *v);

/* ---- Flow definitions ---- */

enum flow_step_kind { FLOW_STEP_CHAT, FLOW_STEP_COMPLETION, FLOW_STEP_EMBEDDINGS, FLOW_STEP_HTTP };

/*
 * A value taken from a step's response: var = the value at pointer
 * (jsonptr.h). When an optional capture finds nothing, var is set to null,
 * so later templates always render.
 */
struct flow_capture {
    char *var;
    char *pointer;
    bool optional;
};

/*
 * One step. Everything is owned by the definition (strings and arrays from
 * ts_malloc/ts_strdup, body a jansson reference) and freed by
 * flow_def_release().
 */
struct flow_step_def {
    char *name; /* unique within the flow */
    char *role; /* a label ("user", "agent", "orchestrator", ...) or NULL */
    enum flow_step_kind kind;
    uint32_t *deps; /* indexes of the steps it waits for */
    size_t ndeps;
    char *method;   /* HTTP only; NULL: "POST" with a body, "GET" without */
    char *url;      /* template; NULL for the OpenAI kinds: the target's endpoint */
    char **headers; /* "Name: value" templates (the name is literal) */
    size_t nheaders;
    json_t *body; /* template; NULL: no body */
    struct flow_capture *captures;
    size_t ncaptures;
    uint64_t timeout_ns; /* 0: the run's */
    int32_t fallback;    /* step started when this one fails; -1: none */
    bool fallback_only;  /* started only as some step's fallback */
    /* A retrieval step (an OpenAI vector store search over HTTP): recall@k
     * of its answers is measured, k = retrieval_k (0: not a retrieval
     * step), against the passages of retrieval_docs (NULL: the simulator's
     * built-in ones). */
    uint32_t retrieval_k;
    char *retrieval_docs;
};

struct flow_def {
    struct flow_step_def *steps;
    size_t n;
};

/*
 * Checks a definition against the variables the runner gives every
 * iteration (vars[0..nvars), e.g. "question"). Returns 0, or -EINVAL with
 * the first problem in err (steps in index order; the message starts with
 * "step 'NAME': " when it is about one step):
 *  - 1..FLOW_STEPS_MAX steps with distinct non-empty names, valid kinds;
 *    an HTTP step has a url; a method is an HTTP token; a header template
 *    has a literal "Name:" part;
 *  - deps and fallbacks in range; no dependency cycle (its steps named:
 *    "dependency cycle: 'a' -> 'b' -> 'a'", "->" = waits for);
 *  - a fallback is fallback_only, the fallback of exactly one step, and
 *    depends only on steps the failed one (transitively) depends on; a
 *    fallback may have its own fallback; no step depends on a fallback_only
 *    step (it depends on the step it stands in for);
 *  - capture names are valid, pointers well formed, no capture clashes with
 *    a given variable or with another step's capture (a step and its
 *    fallbacks capture the same names: their captures take its place), at
 *    most FLOW_VARS_MAX names in all;
 *  - every placeholder of a step's url, headers and body is a given
 *    variable or captured by a step it (transitively) depends on and by
 *    every fallback that may run in that step's place:
 *      "step 'generate': {{passages}} is captured by 'search' which it
 *       does not depend on (in body /messages/1/content)"
 *      "step 'generate': unknown variable {{pasages}}, did you mean
 *       {{passages}}? (in body /messages/1/content)".
 */
TS_MUST_CHECK int flow_def_check(const struct flow_def *d, const char *const *vars, size_t nvars,
                                 char *err, size_t errlen);

/* Frees everything d owns and empties it (d->steps NULL, d->n 0). NULL ok. */
void flow_def_release(struct flow_def *d);

/* ---- One iteration ---- */

enum flow_step_state {
    FLOW_PENDING,
    FLOW_RUNNING,
    FLOW_OK,
    FLOW_FAILED,
    FLOW_SKIPPED, /* a step it depends on failed for good */
    FLOW_NOT_RUN, /* a fallback never needed */
};

enum flow_outcome {
    FLOW_OUT_OK,
    FLOW_OUT_DEGRADED, /* a fallback was taken and the flow finished */
    FLOW_OUT_FAILED,   /* some non-fallback step failed (and no fallback saved it) or was skipped */
};

struct flow_run;

/*
 * Starts an iteration of d, which must outlive the run and not change.
 * Returns 0 and *out, -EINVAL when d is not structurally sound (what
 * flow_def_check says about everything but variables and templates), or
 * -ENOMEM.
 */
TS_MUST_CHECK int flow_run_new(const struct flow_def *d, struct flow_run **out);
void flow_run_free(struct flow_run *r);

/* Sets a given variable (flow_vars_set: the reference is stolen, also on
 * failure). Returns what flow_vars_set returns. */
TS_MUST_CHECK int flow_run_set(struct flow_run *r, const char *name, json_t *value);
/* A variable's value (given or captured so far), borrowed, or NULL. */
json_t *flow_run_get(const struct flow_run *r, const char *name);

/*
 * The lowest-indexed step that may start now (all its deps OK, or failed
 * and replaced by a fallback that is OK; a fallback_only step only once the
 * step it stands in for failed), marked RUNNING; -1 when none can start now.
 * Call it until -1 after every flow_run_complete().
 */
int flow_run_next(struct flow_run *r);

/* A rendered request. Release it with flow_request_release(). */
struct flow_request {
    enum flow_step_kind kind;
    const char *method; /* not owned: static, or the definition's */
    char *url;          /* owned; NULL for an OpenAI step without url (the target's endpoint) */
    char **headers;     /* owned, nheaders "Name: value" strings */
    size_t nheaders;
    char *body; /* owned compact JSON, NUL-terminated; NULL: no body */
    size_t body_len;
    uint64_t timeout_ns; /* the step's; 0: the run's */
};

/*
 * Renders the request of a RUNNING step. The body is flow_template_render
 * serialized by flow_json_dump (at most FLOW_RENDER_MAX bytes). In the URL,
 * substitutions after the template's first literal '?' are percent-encoded
 * (all but A-Z a-z 0-9 - . _ ~), those before it are inserted as they are;
 * the URL may not contain bytes <= 0x20 or 0x7f and must be non-empty. A
 * header may not contain CR, LF or NUL once rendered. URLs and headers are
 * at most FLOW_TEXT_MAX bytes. Returns 0 (release *out), -EINVAL (step not
 * RUNNING, an unset variable, a bad URL or header; message in err),
 * TS_TOOBIG, -ENOMEM; on failure *out holds nothing to release. A step
 * whose render fails should be completed with ok = false.
 */
TS_MUST_CHECK int flow_run_render(struct flow_run *r, uint32_t step, struct flow_request *out,
                                  char *err, size_t errlen);
void flow_request_release(struct flow_request *req);

/*
 * Reports the end of a RUNNING step. ok = false: it failed. ok = true: body
 * (len bytes of JSON, may be NULL when there are no captures) is parsed when
 * the step has captures, and they are applied all or nothing: the step is
 * FAILED ("returned nothing") when the body is not JSON (or longer than
 * FLOW_RESPONSE_MAX) or a non-optional capture finds nothing, and also
 * ("capture too large") when a value breaks flow_vars_set's caps.
 * On failure, a step with a fallback makes the fallback ready and its
 * dependants wait for it; otherwise every step depending on it (directly or
 * not) becomes SKIPPED. A success makes the unused fallbacks NOT_RUN.
 * Returns 0; -EINVAL when step is not RUNNING; -ENOMEM, after which nothing
 * changed (the step is still RUNNING: call again, or with ok = false).
 */
TS_MUST_CHECK int flow_run_complete(struct flow_run *r, uint32_t step, bool ok, const char *body,
                                    size_t len);

/*
 * A dry run's end of a RUNNING step: it succeeds and each of its captures
 * is set to the string "(dry run: VAR from step STEP)", so the steps after
 * it can be rendered without a response. Returns 0, -EINVAL (not RUNNING)
 * or -ENOMEM.
 */
TS_MUST_CHECK int flow_run_complete_dry(struct flow_run *r, uint32_t step);

/* Nothing is RUNNING and nothing can start: every step is then OK, FAILED,
 * SKIPPED or NOT_RUN. */
bool flow_run_done(const struct flow_run *r);
/* The iteration's outcome (final once flow_run_done; before, steps still
 * in progress count as not failed). */
enum flow_outcome flow_run_outcome(const struct flow_run *r);
/* A step's state (FLOW_NOT_RUN for an index out of range). */
enum flow_step_state flow_run_state(const struct flow_run *r, uint32_t step);
/* Why a FAILED step failed, as a static string: "request failed" (ok was
 * false), "returned nothing", "capture too large" (a value over the caps, or
 * too many variables), "bad capture" (an invalid name in an unchecked
 * definition); NULL when it is not FAILED. */
const char *flow_run_fail_reason(const struct flow_run *r, uint32_t step);
/* The capture of a FAILED step that found nothing or could not be kept, or
 * NULL (the request failed, the body was not JSON, not FAILED). Owned by
 * the definition. */
const struct flow_capture *flow_run_fail_capture(const struct flow_run *r, uint32_t step);

/* "pending", "running", "ok", "failed", "skipped", "not_run". */
const char *flow_step_state_name(enum flow_step_state s);
/* "ok", "degraded", "failed". */
const char *flow_outcome_name(enum flow_outcome o);
/* "chat", "completion", "embeddings", "http". */
const char *flow_step_kind_name(enum flow_step_kind k);

#endif
