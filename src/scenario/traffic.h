/*
 * traffic.h - one traffic class of a scenario at run time: what its users
 * send, turn by turn and step by step.
 *
 * A struct traffic is built once from a scenario class (scenario/scenario.h)
 * and is read-only while the run goes on; any number of worker threads use
 * it at once. The mutable part lives in a struct traffic_actor: one user of
 * the closed loop, or one arrival of the open loop, owned by one worker
 * thread. An actor runs iterations; an iteration is one request (a plain
 * class), one turn of a session, or one run of the class's flow (a DAG of
 * requests). The runner drives it:
 *
 *   traffic_actor_new()  when the user starts or the arrival comes
 *   traffic_begin()      at the start of each iteration
 *   traffic_next()       repeatedly, for every request ready to be sent now
 *   traffic_done()       when one of them ended (with its answer and body)
 *   traffic_iteration_done()  nothing in flight and nothing ready: over
 *   traffic_after()      whether the actor goes on, and after what think time
 *
 * Prompts. The class's prompt source gives each turn a system prompt, a user
 * text, an output length and labels (intent, shared-prefix entry): a prompt
 * schema (workload/promptgen.h; a class with only input_tokens/output_tokens is a
 * schema of one intent whose template is all padding), a JSONL prompts file,
 * or a dataset (workload/dataset.h; a conversation of several user turns is a
 * session of that many turns). Generation is keyed, never sequential: the
 * turn t of session k of a class is a function of (seed, class, k, t) only,
 * so the same seed gives the same requests in every run and in --dry-run.
 *
 * Sessions. A session sends its turns one after the other: the history
 * (earlier user turns and the answers the server actually gave) goes before
 * the new user turn, trimmed to the model's context window when one is set
 * (workload/promptgen.h chat_assemble: oldest turns first, never the system
 * prompt or the current turn), and every request of the session carries the
 * session id header. In the closed loop a user runs sessions back to back; in
 * the open loop every arrival starts a session.
 *
 * Perturbations. Each request rolls the class's perturbation shares
 * (workload/perturb.h) and applies the chosen ones to its user text, after the
 * text is generated and before it is assembled; the mask is recorded.
 * Invalid UTF-8 output is sent as raw bytes (JSON-escaped otherwise).
 */
#ifndef TS_SCENARIO_TRAFFIC_H
#define TS_SCENARIO_TRAFFIC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/dist.h"
#include "base/err.h"
#include "base/rng.h"
#include "llm/tokcount.h"
#include "llm/vecset.h"
#include "workload/dataset.h"
#include "scenario/flow.h"
#include "scenario/retrieval.h"
#include "workload/perturb.h"
#include "workload/promptgen.h"
#include "workload/prompts.h"
#include "scenario/scenario.h"
#include "workload/workload.h"

#define TRAFFIC_MAX_HISTORY 256 /* messages kept of a session's history */

enum traffic_source {
    TRAFFIC_SCHEMA = 0, /* prompt schema (or synthetic) */
    TRAFFIC_PROMPTS,    /* JSONL prompts file */
    TRAFFIC_DATASET,    /* ShareGPT, CSV or trace */
};

struct traffic {
    char *name;
    uint32_t index; /* class index in the scenario */
    enum workload_endpoint endpoint;
    enum traffic_source source;
    char *model;
    char *url;      /* the endpoint URL of the class's kind */
    bool realtime;  /* endpoint: realtime: url is the chat URL the requests are made for, sent
                       as Realtime response.create events over WebSocket */
    char *base_url; /* the target's base URL ("http://h:p/v1"), {{target}} in flows */
    bool stream, ignore_eos;
    json_t *body; /* overrides or NULL */
    uint64_t seed;

    struct promptgen gen;
    bool has_gen;
    struct prompts prompts;
    bool has_prompts;
    struct dataset data;
    bool has_data;
    bool shuffle;

    bool sessions;
    struct dist turns, think;
    bool has_think;
    char *session_header;

    struct perturb_set perturb;

    uint32_t context_tokens, context_margin;
    struct chat_template tmpl; /* borrowed from the scenario; message NULL = none */

    bool has_flow;
    const struct flow_def *flow; /* borrowed from the scenario */
    struct flow_retrieval retr;  /* the flow's retrieval and answer steps */

    /* endpoint vector-search: iteration i searches row i mod n of vectors
     * ({"vector":[...],"k":K,"nprobe","ef_search"} + the body overrides, at
     * base_url + "/vectors/search"), and its answer's recall@k is measured
     * against row i mod n of truth. Both borrowed, set by whoever prepares
     * them (app/run_scenario.h) after traffic_init; truth NULL: no recall. */
    const struct vecset *vectors;
    const struct ivecset *truth;
    uint32_t vector_k; /* 1..VECSET_MAX_K */
    int64_t nprobe, ef_search;
    bool has_nprobe, has_ef_search;
};

/* One request to send: owned by its receiver; traffic_req_release() it. */
struct traffic_req {
    struct work_item item; /* body, prompt tokens, max_tokens, stream, reference */
    const char *url;       /* the URL (owned by the traffic, or url_buf) */
    const char *method;    /* "POST" unless a flow step says otherwise */
    char *url_buf;         /* owned when the URL was rendered */
    char **headers;        /* extra "Name: value" headers, owned */
    size_t nheaders;
    uint32_t step;       /* flow step index; 0 for a plain request */
    bool openai;         /* an OpenAI response (else any 2xx is ok) */
    bool answer;         /* a flow's answer step (retrieval.h): its answer is scored */
    uint64_t timeout_ns; /* 0 = the run's */
    /* labels for the record */
    int32_t intent; /* -1 none */
    int32_t prefix; /* shared prefix entry, -1 none */
    uint32_t perturb_mask;
    uint64_t session; /* session number + 1; 0 = not a session */
    uint32_t turn;
    uint32_t trimmed; /* history messages dropped + context tokens cut */
};

struct traffic_actor;

/*
 * Builds t from class c of scenario s: loads what the class names (prompts
 * file, dataset, slot files were loaded by the parser), makes the prompt
 * schema (the class's prompts are moved out of c), parses perturbations.
 * base_url is the target's base ("http://127.0.0.1:8000/v1"), model the
 * model to name. tc counts tokens while building (NULL: approximate).
 * Returns 0 or a negative code with a message in err.
 */
TS_MUST_CHECK int traffic_init(struct traffic *t, struct scenario *s, uint32_t class_index,
                               const char *base_url, const char *model, const struct tokcount *tc,
                               char *err, size_t errlen);
void traffic_release(struct traffic *t);

/* A new actor; key tells actors of a class apart (user number or arrival index). */
TS_MUST_CHECK int traffic_actor_new(const struct traffic *t, uint64_t key,
                                    struct traffic_actor **out);
void traffic_actor_free(struct traffic_actor *a);

/*
 * Starts an iteration. session_no is the class-wide number of the session
 * to start when the actor has none running (a fresh one or the last ended);
 * it is ignored in the middle of a session. Returns 0, -ENOMEM.
 */
TS_MUST_CHECK int traffic_begin(struct traffic_actor *a, uint64_t session_no,
                                const struct tokcount *tc);

/*
 * The next request ready now: 1 with *out filled, 0 when none is ready, or
 * a negative code (the iteration failed to build a request: err says why;
 * the iteration is then over).
 */
TS_MUST_CHECK int traffic_next(struct traffic_actor *a, const struct tokcount *tc,
                               struct traffic_req *out, char *err, size_t errlen);

/*
 * A request of the iteration ended: ok (the record's outcome was ok), its
 * answer text (chat/completions) and its response body (non-streamed, else
 * NULL).
 */
void traffic_done(struct traffic_actor *a, const struct traffic_req *rq, bool ok,
                  const char *answer, size_t answer_len, const char *body, size_t body_len);

/*
 * recall@k of a flow's retrieval step rq (flow_retrieval_measure), whose
 * request body was req[0..req_len) and answer body[0..len); call it for
 * answers that ended ok, before traffic_done. The actor keeps the recall for
 * the answer steps after it in this iteration. Returns 1 with *recall and
 * *k, 0 when nothing was measured, -ENOMEM.
 */
TS_MUST_CHECK int traffic_retrieval_done(struct traffic_actor *a, const struct traffic_req *rq,
                                         const char *req, size_t req_len, const char *body,
                                         size_t len, double *recall, uint32_t *k);

/* A retrieval step's recall in the current iteration. */
struct traffic_recall {
    uint32_t step;
    uint32_t k;
    double recall;
};

/*
 * The retrieval steps that answer step step followed in the current
 * iteration (it depends on them, directly or not, and they measured
 * recall): up to n into out, in step order. Returns their count; 0 for a
 * step that is not an answer step.
 */
size_t traffic_answer_recalls(const struct traffic_actor *a, uint32_t step,
                              struct traffic_recall *out, size_t n);

/* A dry run's end of rq: a session's turn gets a placeholder answer, a
 * flow step succeeds with placeholder captures, so what follows can be
 * generated without a server. */
void traffic_done_dry(struct traffic_actor *a, const struct traffic_req *rq);

/* True while the actor is in the middle of a session (more turns to come). */
bool traffic_in_session(const struct traffic_actor *a);

/* True when nothing is in flight and nothing more will start this iteration. */
bool traffic_iteration_done(const struct traffic_actor *a);

/* 0 ok, 1 degraded (a flow fallback was taken), 2 failed. */
int traffic_iteration_outcome(const struct traffic_actor *a);
/*
 * Why a failed iteration failed, one line into out (n bytes, cut to fit):
 * the first failed step of a flow and what went wrong ("step 'plan':
 * capture 'call_id' (/choices/0/message/tool_calls/0/id) found nothing in
 * the response", "step 'tool': the request failed"), "the flow could not
 * start", or for a plain request "the request failed". Bounded; the texts
 * come from the scenario file, not from the server.
 */
void traffic_iteration_why(const struct traffic_actor *a, char *out, size_t n);

/*
 * After an iteration: true when the actor's session goes on (sets *think_ns
 * from the class's think distribution), false when its session is over.
 */
bool traffic_after(struct traffic_actor *a, struct rng *r, uint64_t *think_ns);

void traffic_req_release(struct traffic_req *rq);

/* The name of a flow step, or the class's endpoint name for step 0 of a plain class. */
const char *traffic_step_name(const struct traffic *t, uint32_t step);
/* Steps to keep statistics for: the flow's steps, or 1. */
uint32_t traffic_nsteps(const struct traffic *t);

#endif
