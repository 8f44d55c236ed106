/*
 * runner_int.h - what runner.c (the coordinator), worker.c and exchange.c
 * share. Not a public API.
 */
#ifndef TS_LOAD_RUNNER_INT_H
#define TS_LOAD_RUNNER_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "base/rng.h"
#include "llm/openai_chunk.h"
#include "llm/openai_memo.h"
#include "llm/realtime.h"
#include "llm/sign.h"
#include "analysis/chunktimes.h"
#include "analysis/record.h"
#include "scenario/traffic.h"
#include "load/runner.h"
#include "net/ptimer.h"
#include "net/sse.h"
#include "net/ws_client.h"

struct runner;
struct exch;

/*
 * What the coordinator needs of each finished request for the windowed dual
 * SLA and the consistency check (which follow completion order across
 * workers): recorded by the worker, handed over with its stats each second.
 */
struct qnote {
    uint64_t end_ns;
    uint64_t prompt_hash; /* of the request body: repeated prompts hash alike */
    char *answer;         /* consistency only: the first bytes of the answer (owned) */
    uint32_t answer_len;
    bool quality_ok;
    bool latency_ok;
};

struct qnotes {
    struct qnote *v;
    size_t n, cap;
};

/* Appends (taking the answer); 0 or -ENOMEM (the answer is then freed). */
int qnotes_push(struct qnotes *q, const struct qnote *note);
/* Frees the answers and empties the list (keeps its memory). */
void qnotes_clear(struct qnotes *q);
void qnotes_release(struct qnotes *q);

struct ractor;

/* A user of the closed loop waiting for its next turn (a binary heap entry);
 * with classes, the actor that waits (a closed-loop user or an open-loop
 * session between turns). */
struct wake {
    uint64_t at_ns;
    uint32_t user;
    struct ractor *actor;
};

/* A class's actor on the runner's side: a traffic actor and where it stands. */
struct ractor {
    struct traffic_actor *ta;
    uint32_t cls;
    uint32_t user;          /* closed loop: the user; UINT32_MAX: an open-loop arrival */
    uint64_t iter_intended; /* the current iteration's intended start */
    bool warmup;            /* the current iteration began in the warm-up */
    bool counted;           /* the current iteration counts toward max_concurrency */
    uint32_t inflight;      /* its requests in flight */
    bool launched;          /* the current iteration sent its first requests */
};

/* A worker's share of one class. */
struct wclass {
    struct arrival arrival;
    bool arrival_inited;
    struct rng arrival_rng;
    uint64_t next_index; /* open loop: global index of this worker's next arrival */
    uint64_t next_at;    /* its intended time, absolute ns; 0 = schedule over */
    uint32_t users_active;
    uint64_t iters_inflight;        /* open loop: iterations in flight (max_concurrency) */
    struct runner_class_result res; /* kept for the whole run, merged at the end */
    atomic_uint_fast64_t chunks_rx; /* content chunks of this class (its live token rate) */
};

enum worker_cmd_bits {
    WCMD_ROTATE = 1 << 0, /* hand the stats to the coordinator */
    WCMD_STOP = 1 << 1,   /* stop sending; keep waiting for in-flight requests */
    WCMD_CUT = 1 << 2,    /* cancel in-flight requests (outcome cut) */
    WCMD_QUIT = 1 << 3,   /* close everything; the thread ends */
};

/* Receive buffers a worker keeps for reuse (see struct worker.rx_spare). */
#define WORKER_RX_SPARE 256

struct worker {
    struct runner *run;
    uint32_t index;
    pthread_t thread;
    bool thread_started;
    uv_loop_t loop;
    uv_async_t cmd;
    uv_check_t check;     /* after each poll pass: parse what arrived (exch_rx_flush) */
    uv_idle_t rx_idle;    /* active while parsing is left over: the next poll won't block */
    bool send_now;        /* arm() found the next send due: the check phase sends it */
    struct exch *rx_head; /* requests with received bytes not yet parsed */
    /* storage of parsed requests' rx buffers, lent to the next ones that
     * receive: a held stream keeps no receive buffer between reads */
    struct buf rx_spare[WORKER_RX_SPARE];
    unsigned n_rx_spare;
    /* the ending request's chunk times, unpacked (exch_finish) */
    uint64_t *chunk_times;
    uint32_t alloc_chunk_times;
    /* requests that failed before reaching the wire, completed on the next
     * check pass (exch_fail_flush), never inside the call that started them */
    struct exch *failed_head, *failed_tail;
    bool rt_refused; /* --transport auto: the realtime upgrade was refused once */
    atomic_uint cmd_bits;
    struct http_client client;
    struct ptimer timer;
    uv_timer_t cancel_timer; /* --cancel: the earliest cancel_at of the requests in flight */
    uint64_t cancel_armed;   /* when it fires; 0: not armed */
    bool cancel_inited;
    struct openai_decoder decoder; /* chunks are decoded synchronously: one per worker */
    struct rng rng;                /* think times */
    int handles;
    bool loop_inited, cmd_inited, timer_inited, client_inited, check_inited;

    /* stats: recorded here, swapped once a second */
    struct run_stats *active;
    pthread_mutex_t mail_lock;
    struct run_stats *mailbox; /* full stats for the coordinator, or NULL */
    struct run_stats *spare;   /* empty stats from the coordinator, or NULL */
    struct qnotes notes;       /* recorded since the last hand-over */
    struct qnotes mail_notes;  /* handed over with mailbox */
    struct quality_scratch *qscratch;

    /* open loop */
    struct arrival arrival;
    struct rng arrival_rng;
    uint64_t next_index; /* global index of this worker's next arrival */
    uint64_t next_at;    /* its intended time, absolute ns; 0 = schedule over */
    uint64_t skipped;    /* arrivals of other workers consumed */
    /* closed loop: users waiting for their turn */
    struct wake *heap;
    size_t heap_len, heap_cap;
    uint32_t users_active;

    /* classes (cfg->nclasses > 0) */
    struct wclass *cls;
    uint32_t ncls;
    struct tokcount *tc; /* this thread's token counter, or NULL (approximate) */
    uint32_t actors;     /* live actors (freed at the end) */

    struct exch *inflight; /* list of requests in flight */
    uint64_t n_inflight;
    bool sending_over;
    bool reported_done;
    bool closing;

    atomic_uint_fast64_t sent;
    atomic_uint_fast64_t last_send_ns; /* intended time of the newest request sent, 0 = none */
    atomic_uint_fast64_t in_flight_now;
    atomic_uint_fast64_t chunks_rx; /* content chunks received (live token rate) */
};

struct runner {
    const struct runner_config *cfg;
    uint64_t start_ns;    /* monotonic: time 0 of the schedule */
    uint64_t end_send_ns; /* no request is sent at or after this; UINT64_MAX = none */
    uint64_t warmup_end_ns;
    uint64_t run_id;                        /* random, in every X-Request-Id */
    atomic_uint_fast64_t closed_next_index; /* closed loop: the next request index */
    atomic_uint_fast64_t *cls_iter;         /* classes: the next iteration number, per class */
    atomic_uint_fast64_t *cls_session;      /* classes, closed loop: the next session number */
    /* classes, the coordinator's: content chunks counted at the last tick,
     * and the highest 1-second rate after warm-up (each class's own peak) */
    uint64_t *cls_last_chunks;
    double *cls_peak_tps;
    atomic_uint_fast64_t req_seq;    /* classes: the next request id */
    atomic_uint_fast64_t users_lost; /* closed-loop users that could not run on (memory) */
    atomic_bool stop;
    struct worker *workers;
    uint32_t nworkers;
    uv_async_t worker_event; /* a worker posted stats or finished */
    atomic_uint workers_done;
    struct reqtrace_run trace; /* read-only while the workers run */
};

/* worker.c */
/* Sets up a worker (loop, client, timer, stats); on error call worker_release(). */
int worker_init(struct worker *w, struct runner *run, uint32_t index, char *err, size_t errlen);
/* Closes what is open (running the worker's loop until it is) and frees. */
void worker_release(struct worker *w);
void *worker_main(void *arg);
void worker_request_done(struct worker *w, struct exch *x, uint32_t user);
/* --cancel: makes sure the worker's cancel timer fires by at (ns). */
void worker_cancel_arm(struct worker *w, uint64_t at);
/* Posts a command to a worker (thread-safe). */
void worker_post(struct worker *w, unsigned bits);

/* exchange.c: one request on the wire */
/*
 * How a request's stream travels: SSE over HTTP (exchange.c) or OpenAI
 * Realtime events over WebSocket (exchange_rt.c). Both feed the same
 * measurement (exch_on_chunk) and end in exch_complete, so TTFT, ITL,
 * tokens and outcomes mean the same on both.
 */
struct exch_transport {
    const char *name; /* "sse", "realtime" */
    /* Sends x with spec's URL, headers, body and timeout. 0, or a negative
     * error (nothing started: the caller records the failure). */
    int (*start)(struct exch *x, const struct http_call_spec *spec);
    /* Ends x early; its completion follows from a loop callback. */
    void (*cancel)(struct exch *x);
    /* Parses what arrived at `at` (held by exch_rx_push, fed by exch_rx_parse
     * after the loop's poll pass): SSE bytes, or one whole realtime message.
     * The bytes (x->rx) are the transport's to overwrite: they are dropped
     * after the feed. 0, or a negative error: the stream cannot be read
     * further. */
    int (*feed)(struct exch *x, char *p, size_t n, uint64_t at);
};
extern const struct exch_transport exch_sse_transport;
extern const struct exch_transport exch_rt_transport;

struct exch {
    /*
     * What every stream event touches comes first, together: by its next
     * event a stream's state has left the cache (the kernel's receives of
     * the other streams run in between), and each line touched is a miss.
     * Spread over the struct it was some fifteen lines per event.
     */
    struct worker *w;
    const struct exch_transport *tp;
    struct chunk_verifier *verifier; /* --integrity hmac */
    struct ractor *actor;            /* classes: the actor that sent it, else NULL */
    struct exch *rx_prev, *rx_next;
    /*
     * Stream bytes are timestamped when they are read and parsed after the
     * loop's poll pass (exch_rx_flush), so a burst of events on many
     * streams is timed as it arrives, not as it is decoded one after another.
     */
    struct buf rx;
    unsigned nseg;
    bool rx_queued;
    bool sse_mode;
    bool malformed;
    bool have_id;
    bool saw_done;
    bool saw_finish;
    bool saw_error;
    bool saw_tool_calls; /* a tool call arrived (its arguments are not in the answer text) */
    bool keep_answer;
    bool trace_noted; /* the trace has the response's id and model */
    uint64_t last_choice_ns;
    /* arrival of each chunk with choices, the first REQ_CHUNK_TIMES_MAX
     * (vLLM's ITL list; requests.jsonl's chunk_us), 4 bytes a chunk;
     * unpacked for rec when it ends (exch_finish) */
    struct chunk_times chunks;
    struct {
        size_t end;  /* rx offset where this read ends */
        uint64_t ns; /* when it arrived */
    } rx_seg[8];
    struct sse_parser sse;
    struct openai_memo *memo; /* the stream's chunk template (llm/openai_memo.h) */
    char first_id[64];        /* compared with each chunk's */
    struct req_record rec;
    /* the rest: per request */
    struct exch *prev, *next;
    struct work_item item;
    struct http_call *call;
    struct ws_call *ws;             /* realtime: the connection */
    struct realtime_decoder *rtdec; /* realtime: the last event (heap, from the first) */
    bool rt_created;                /* realtime: response.created came */
    uint64_t rt_done_ns;            /* realtime: when response.done came (E2E ends there) */
    struct buf body;                /* non-streamed responses and error bodies */
    uint32_t user;                  /* closed loop */
    struct traffic_req treq;        /* classes: what was sent (its item is moved to item) */
    bool cut;                       /* cancelled by the runner at the end */
    bool cancelled;                 /* abandoned on purpose (--cancel) */
    uint64_t cancel_at;             /* when it is to be abandoned (--cancel); 0: never */
    struct reqtrace trace;          /* its trace and span ids, response id and model */
    struct buf answer;              /* the answer's text, when quality is measured */
    struct exch *failed_next;       /* in the worker's failed list */
};

/*
 * Starts request `index` with the given intended time. worker_request_done()
 * is called when it ends, always from a later loop callback, never from
 * inside this call: a request that cannot be sent (its body cannot be built,
 * a header is too big or invalid, memory ran out) is recorded as failed and
 * completed on the loop's next check pass (exch_fail_flush), so the caller
 * may touch its own objects after the call returns.
 * Returns 0, or -ENOMEM when not even the request's record could be
 * allocated: nothing was counted in flight and nothing will be called back;
 * the caller gives the slot back itself.
 */
int exch_start(struct worker *w, uint64_t index, uint64_t intended_ns, uint32_t user);
/* Starts a class's request (takes rq, also on failure); the same contract.
 * On -ENOMEM the actor was already told (traffic_done, failed) and the loss
 * counted, and a->inflight was not raised. */
int exch_start_traffic(struct worker *w, struct ractor *a, struct traffic_req *rq,
                       uint64_t intended_ns);
/* Parses the stream bytes every request of the worker received since the
 * last call; first completes the requests that failed to start
 * (exch_fail_flush). */
void exch_rx_flush(struct worker *w);
/* Keeps the next poll from blocking, so the check phase (exch_rx_flush)
 * runs without waiting for I/O. */
void exch_rx_keep_polling(struct worker *w);
/* Completes (worker_request_done) the requests that failed to start, those
 * queued before this call; ones queued meanwhile wait for the next pass. */
void exch_fail_flush(struct worker *w);
/* Sends what fell due by now (the worker's timer, or what arm() found due
 * already), if anything: called between pieces of long work on the loop so
 * sends are not held up by it, and by each check phase. */
void worker_send_due(struct worker *w);
/* Records a finished request into the worker's stats (and requests.jsonl) and frees it. */
void exch_finish(struct exch *x);
/* Abandons a request in flight as "cancelled" (--cancel). */
void exch_cancel(struct exch *x);
/* Cancels a request in flight as "cut". */
void exch_cut(struct exch *x);
/* --transport auto: sends x again over SSE to the run's chat URL (the
 * realtime upgrade was refused); its latency still counts from the first try. */
void exch_fallback_sse(struct exch *x);
/* The shared measurement of one decoded event that arrived at `at`. */
void exch_on_chunk(struct exch *x, const struct openai_chunk *c, uint64_t at);
/* Keeps the first error of a request: prefix followed by detail. */
void exch_set_error(struct exch *x, const char *prefix, const char *detail);
/* Holds len received bytes with their arrival time for exch_rx_parse (the
 * worker's check pass): time first, decode later. message: the bytes are one
 * whole message and stay apart from the others. 0 or TS_TOOBIG (the request
 * is malformed). */
int exch_rx_push(struct exch *x, const char *data, size_t len, uint64_t now_ns, bool message);
/* Parses what x holds now (exch_rx_push), in arrival order. */
void exch_rx_parse(struct exch *x);
/* --integrity hmac: the verifier's counts into the record (REQF_SIGNED). */
void exch_sig_record(struct exch *x);
/* The transport ended (res): classifies, counts tokens, scores, and hands x
 * to worker_request_done. */
void exch_complete(struct exch *x, const struct http_call_result *res);

#endif
