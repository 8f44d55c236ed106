/*
 * server_int.h - what the simulator's own files share (not a public API).
 */
#ifndef TS_SIM_SERVER_INT_H
#define TS_SIM_SERVER_INT_H

#include "base/asyncw.h"
#include "base/dist.h"
#include "llm/openai.h"
#include "llm/openai_encode.h"
#include "llm/vecset.h"
#include "net/http_server.h"
#include "net/ptimer.h"
#include "base/rng.h"
#include "telemetry/prom.h"
#include "sim/admin.h"
#include "sim/answers.h"
#include "sim/engine.h"
#include "sim/server.h"

struct sim_req;
struct sim_send;
struct sim_rt;
struct sim_search;
struct vstore;
struct sim_vecs;
struct ann_index;

/* The admin API's state (admin.c), with --admin. */
struct sim_admin {
    bool enabled;
    const char *token; /* bearer token every /admin request needs, or NULL (borrowed) */
    bool active[SIM_FAULT_TYPE_COUNT];
    struct sim_fault f[SIM_FAULT_TYPE_COUNT];
    uint64_t since_ns[SIM_FAULT_TYPE_COUNT];
    uint64_t until_ns[SIM_FAULT_TYPE_COUNT]; /* stall, cold_start */
    uint64_t injected[SIM_FAULT_TYPE_COUNT]; /* answers faulted, kv steps */
    uint64_t kv_full, kv_now;                /* the profile's capacity, the one in effect */
    bool kv_floor_logged;
    uv_timer_t kv_timer; /* kv_shrink steps, created on first use */
    bool kv_timer_inited;
    struct rng rng; /* error_rate rolls */
};

struct sim_server {
    uv_loop_t *loop;
    struct sim_profile profile;
    struct sim_engine *engine;
    struct http_server http;
    struct ptimer step_timer;
    uint64_t step_due;  /* when the step in progress is due, 0 if idle */
    uint64_t model_now; /* the time of the step being completed (for send lag) */
    struct answers *answers;
    struct asyncw *trace;
    struct dist output_len;
    uint32_t embed_dims;
    bool any_model;
    const char *api_key; /* --api-key (borrowed), or NULL */
    bool quiet;
    bool ignore_disconnect;
    struct sim_replay *replay; /* --replay, or NULL */
    uint64_t started_wall_ns;
    uint64_t id_seed;
    uint64_t next_id;

    struct sim_req *dead;       /* finished requests, freed after the step */
    struct sim_rt *rt_sessions; /* open realtime sessions (realtime.c) */
    char sign_key[256];         /* --sign-chunks */
    size_t sign_key_len;
    struct buf sign_scratch;

    struct sim_admin admin;

    /* the vector store (vsearch.c) */
    struct vstore *vstore;
    char vstore_id[SIM_VECTOR_ID_MAX + 1]; /* answered besides "vs_default" */
    uint64_t vsearch_ns;                   /* simulated time of one search */
    struct ptimer vs_timer;                /* due time of the first pending search */
    bool vs_timer_inited, vs_timer_closing;
    struct sim_search *vs_head, *vs_tail; /* pending searches, due in this order */
    struct sim_vecs *vecs;                /* raw-vector corpus (vecsearch.c), or NULL */
    struct ann_index *vs_ann;             /* --vector-index over the passages, or NULL */

    /* the API server's send queue (gen.c), with api_ms_per_event > 0 */
    struct sim_send *sendq; /* ring of sends due later, in due order */
    size_t sendq_head, sendq_len, sendq_cap;
    struct ptimer send_timer; /* due time of the head */
    bool send_timer_inited, send_timer_closing, sendq_overflowed;

    struct sim_server_stats stats;
    uint64_t finished_by[2]; /* stop, length */
    struct prom_hist h_ttft, h_tpot, h_e2e, h_queue, h_send_lag;

    int handles; /* libuv handles (or the HTTP server) not yet closed */
    bool http_inited;
    bool shutting_down;
    bool timer_closing;
    void (*on_closed)(struct sim_server *s, void *arg);
    void *on_closed_arg;
};

/* server.c */
int sim_send_error(struct http_request *req, const struct openai_error *e, const char *extra);
/* true if model is served; else answers 404 and returns false */
bool sim_model_ok(struct sim_server *s, struct http_request *req, const char *model);
void sim_server_close_timer(struct sim_server *s);

/* admin.c */
void sim_admin_init(struct sim_server *s, bool enabled);
/* Answers /admin/faults[/...] when the admin API is on; false: not an admin path. */
bool sim_admin_route(struct sim_server *s, struct http_request *req);
/* Cold start or an injected error answered req (true); health: only the cold start applies. */
bool sim_admin_intercept(struct sim_server *s, struct http_request *req, bool health);

/* vsearch.c */
/* Loads the store and creates the timer (one more in s->handles). On error
 * nothing is left (message in err). */
int sim_vsearch_init(struct sim_server *s, const struct sim_server_config *cfg, char *err,
                     size_t errlen);
/* POST /v1/vector_stores/{store_id}/search */
void sim_vsearch_handle(struct sim_server *s, struct http_request *req, const char *store_id,
                        size_t id_len);
/* Closes the timer (no search may be pending); on_closed counts the handle down. */
void sim_vsearch_close(struct sim_server *s, void (*on_closed)(struct ptimer *t));
/* Frees the store. */
void sim_vsearch_release(struct sim_server *s);

/* vecsearch.c */
/* Loads the raw-vector corpus and builds its index when cfg asks for one
 * (nothing to do otherwise). On error nothing is left (message in err). */
int sim_vecs_init(struct sim_server *s, const struct sim_server_config *cfg, char *err,
                  size_t errlen);
/* Answers GET /v1/vectors and POST /v1/vectors/search (true), else false. */
bool sim_vecs_route(struct sim_server *s, struct http_request *req, const char *path, bool get,
                    bool post);
void sim_vecs_release(struct sim_server *s);

/* gen.c */
/* Copies header value v (NULL: "") keeping only printable ASCII but quote and
 * backslash, so it can go into JSON unescaped; dst gets at most n - 1 bytes. */
void sim_copy_header_safe(char *dst, size_t n, const char *v);
void sim_gen_handle(struct sim_server *s, struct http_request *req, enum openai_endpoint ep);
void sim_gen_on_admit(void *ctx, void *req, uint64_t now_ns);
void sim_gen_on_token(void *ctx, void *req, uint32_t index, uint64_t now_ns);
void sim_gen_on_finish(void *ctx, void *req, uint64_t now_ns);
void sim_gen_on_preempt(void *ctx, void *req, uint64_t now_ns);
/* Instead of sim_gen_on_token when api_ms_per_event > 0: writes at deliver_ns. */
void sim_gen_on_token_at(void *ctx, void *req, uint32_t index, uint64_t now_ns,
                         uint64_t deliver_ns);
/* The send queue's timer (one more in s->handles), only with api_ms_per_event > 0.
 * Returns 0 or a negative errno. */
int sim_gen_send_init(struct sim_server *s);
/* Closes the send timer; on_closed counts the handle down. */
void sim_gen_send_close(struct sim_server *s, void (*on_closed)(struct ptimer *t));
/* Frees what the send queue still holds (after the HTTP server has closed). */
void sim_gen_send_release(struct sim_server *s);
/*
 * A realtime response (realtime.c): q's answer goes into the engine and its
 * tokens and end to rt (sim_rt_on_token, sim_rt_on_finish). request_id (may
 * be NULL) goes into the trace log. Returns 0 with *out (finished by the
 * engine, or by sim_gen_cancel_rt), or a negative error with *e the error
 * to report (nothing submitted).
 */
int sim_gen_submit_rt(struct sim_server *s, struct sim_rt *rt, const struct openai_request *q,
                      const char *request_id, struct sim_req **out, struct openai_error *e);
/* Takes a realtime response out of the engine and frees it (not from its own callbacks). */
void sim_gen_cancel_rt(struct sim_req *r);
/* The response's id ("resp_..."). */
const char *sim_gen_req_id(const struct sim_req *r);

/* realtime.c */
struct sim_rt_usage {
    uint32_t prompt_tokens, output_tokens, cached_tokens;
};
/* Shutdown: every session is closed with 1001, at once or, when a response
 * is in flight, after its response.done (within the server's grace). */
void sim_rt_shutdown(struct sim_server *s);
/* GET /v1/realtime: the WebSocket upgrade and the session. */
void sim_rt_handle(struct sim_server *s, struct http_request *req);
/* Token index of the session's response, written at once (the engine's step). */
void sim_rt_on_token(struct sim_rt *rt, uint32_t index, const char *text, size_t len);
/* The response ended ("stop" or "length"); the engine frees it after the step. */
void sim_rt_on_finish(struct sim_rt *rt, const char *finish_reason, const struct sim_rt_usage *u);

#endif
