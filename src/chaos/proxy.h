/*
 * proxy.h - the chaos proxy: an HTTP/1.1 reverse proxy on one libuv loop (or
 * several, one per thread: cfg.threads) that forwards every request to one
 * upstream (plain HTTP or TLS) and injects the faults of its struct
 * faultset, plus a REST control API (proxy_api.c) on the first loop.
 *
 * Transparency: with no fault applying to a request, the proxy forwards the
 * method, the request target (path and query), the headers except hop-by-hop
 * ones (Connection, Keep-Alive, Proxy-Connection, TE, Trailer,
 * Transfer-Encoding, Upgrade) and Host, Content-Length and Expect (curl sets
 * its own), and the body. The response goes back as it arrives: the upstream
 * status and headers (same hop-by-hop rule; the upstream's Server header is
 * replaced by the proxy's), then each piece of the body written as soon as
 * curl hands it over, unparsed: with Content-Length when the upstream sent
 * one, chunked otherwise. Body bytes are unchanged.
 *
 * Faults (see fault.h, docs/CHAOS.md): HTTP faults are applied here; SSE,
 * LLM and RAG faults route the response through a struct stream_tap: an
 * event stream (Content-Type text/event-stream) is parsed with sse.h and
 * each event handed to stream_tap_event, whose output bytes are written at
 * their times with a ptimer; any other body is collected (up to
 * max_body_bytes) and rewritten by body_tap. TCP faults are rolled once per
 * client connection, at its first request (faultset_roll with no request),
 * and act on that connection until it closes: latency, bandwidth, slicer,
 * reset and limit through an http_server output shaper on every byte the
 * proxy writes to the client (head and framing included), slow close by
 * delaying its FIN, blackhole by never answering its requests (closing it
 * after the fault's delay, if any); tcp_latency in the upstream direction
 * delays forwarding each request of the connection.
 *
 * Header-triggered faults (like Envoy's x-envoy-fault-*): a request may ask
 * for one of the set's faults by name with "x-tokenstorm-fault: NAME"
 * (applied whatever its probability, selectors and window), for an abort
 * with "x-tokenstorm-fault-abort: STATUS" and for a delay before forwarding
 * with "x-tokenstorm-fault-delay: DURATION". These headers are not
 * forwarded. An invalid value is answered with 400.
 *
 * Limits: the proxy does not apply backpressure to the upstream (a client
 * slower than its upstream makes output queue up, until http_server's
 * max_write_queue cuts the client); bodies held for delayed headers or a body
 * tap are capped at max_body_bytes (then 502 or a cut).
 */
#ifndef TS_CHAOS_PROXY_H
#define TS_CHAOS_PROXY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "base/err.h"
#include "chaos/chain.h"
#include "chaos/faultset.h"
#include "llm/openai_chunk.h"
#include "chaos/recorder.h"
#include "chaos/proxy_trace.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "telemetry/prom.h"

#define PROXY_UPSTREAM_MAX 1024
#define PROXY_THREADS_MAX  64

struct proxy_config {
    const char *listen_host;     /* "127.0.0.1" */
    int listen_port;             /* 0: any free port */
    bool api;                    /* run the control API */
    const char *api_host;        /* "127.0.0.1" */
    int api_port;                /* 0: any free port */
    const char *api_token;       /* bearer token every API request but GET /health must
                                    carry (net/ctlauth.h); NULL: none; borrowed */
    const char *upstream;        /* base URL: http(s)://host[:port][/prefix]; required */
    uint64_t seed;               /* of the probability rolls */
    bool insecure;               /* do not verify the upstream's TLS certificate */
    const char *ca_file;         /* NULL: curl's default */
    size_t max_body_bytes;       /* 16 MiB: requests, held and tapped bodies */
    uint32_t connect_timeout_ms; /* 10000 */
    struct otlp_exporter *otlp;  /* spans of traced requests (proxy_trace.h); NULL: off;
                                    borrowed: close it only after on_closed ran */
    bool otlp_all;               /* also spans of requests without a fault */
    int threads;                 /* loop threads serving clients, 1..PROXY_THREADS_MAX;
                                    0: 1 (see struct proxy_worker) */
    uint64_t retry_window_ns;    /* attempts linked within it (chain.h); 0: CHAIN_WINDOW_NS */
    const char *retry_key;       /* idempotency header name; NULL: CHAIN_KEY_HDR */
    uint64_t orphan_max_ns;      /* how long upstream is still read after the client left
                                    (orphaned work, chain.h); 0: 60 s */
    const struct recorder_config *record; /* --record: every exchange to files; NULL: off */
    const char *mirror_url;               /* --mirror: shadow traffic to this base URL; NULL: off */
    double mirror_share;          /* the share of requests mirrored, 0..1 (proxy_mirror.c) */
    int mirror_max;               /* mirror calls in flight at most; over it a request is dropped */
    const char *mirror_out;       /* --mirror-out: the pairs as two result directories and
                               mirror.json in this directory (proxy_mirror_out.c); NULL: off */
    uint64_t mirror_out_every_ns; /* how often they are rewritten; 0: 2 s */
    bool no_io_uring;             /* send to clients with write(2) even where io_uring works */
};

/*
 * One loop serving client connections: its listener (all workers listen on
 * the same host:port, with SO_REUSEPORT when there are several, so the
 * kernel spreads connections over them), its upstream client and its
 * tracer. A connection stays on the worker that accepted it. Worker 0 runs
 * on the proxy's loop; the others each on a thread with its own loop.
 */
struct quality_scratch;
struct run_stats;
struct pxws;

/* Shadow traffic (--mirror, proxy_mirror.c): counters are atomic, the rest
 * under mu. Index 0 is the primary, 1 the mirror. */
struct proxy_mirror_stats {
    pthread_mutex_t mu;
    _Atomic uint64_t sampled, mirrored, dropped;
    _Atomic int in_flight;
    uint64_t compared, errors_only[2], errors_both;
    uint64_t cut; /* pairs a side of which the proxy's shutdown cut (past its grace) */
    struct prom_hist latency[2], diff, similarity;
    /* --mirror-out: each target's side of every pair, as a load run's
     * stats (NULL: off); when the first pair started and the last ended; the similarity's
     * count and minimum; the writer thread. */
    struct run_stats *stats[2];
    uint64_t first_ns, last_ns, sim_n, started_wall_ns;
    double sim_min;
    pthread_t writer;
    pthread_cond_t wake;
    bool writer_on, writer_stop;
};

struct proxy_worker {
    struct proxy *p;
    struct quality_scratch *qs; /* --mirror: the similarity's scratch, made on first use */
    /* the chunk decoder its stream taps share for the faults that need an
     * event's flags, not its JSON (stream_tap_use_decoder); made on first use */
    struct openai_decoder *dec;
    int index;
    uv_loop_t *loop;
    struct http_server front;
    struct http_client client;
    struct proxy_tracer tracer;
    _Atomic uint64_t requests; /* requests it received (/metrics) */
    /* The proxy's own delay on pass-through body pieces: from the kernel's
     * receive time of the upstream bytes (SO_TIMESTAMPNS, plain http://
     * upstreams; else the read time) to their write to the client socket.
     * Written by its thread, read by /metrics: under hist_mu. */
    pthread_mutex_t hist_mu;
    struct prom_hist forward_delay;
    bool stopping; /* its shutdown began (set on its own loop) */
    /* --mirror on its loop: mirror calls in flight; at shutdown the client
     * is closed only when they have ended or the grace is over
     * (mirror_wait: that wait's timer, NULL when not waiting) */
    int mirror_calls;
    uint64_t stop_deadline_ns;
    struct mirror_wait *mirror_wait;
    struct pxws *ws_sessions; /* its WebSocket pass-throughs (proxy_ws.c) */
    /* shutdown: its server closed, its mirror calls over, its client closing
     * (proxy_worker_ws_gone closes the client when all three allow) */
    bool front_closed, mirrors_done, client_closing;
    /* workers on threads (index > 0) */
    uv_loop_t own_loop;
    uv_async_t stop; /* proxy loop -> worker: begin the shutdown */
    uv_thread_t thread;
    bool started, joined;
    _Atomic uint64_t grace_ms;
    atomic_bool exited; /* its loop is empty (set by its thread) */
};

struct proxy {
    uv_loop_t *loop;
    struct proxy_config cfg;
    char upstream[PROXY_UPSTREAM_MAX]; /* without a trailing '/' */
    /* The fault set is shared by the workers: faults_mu guards it (the
     * list and its generator); faults themselves are reference counted and
     * their counters atomic. Held for a roll or a control API call. */
    pthread_mutex_t faults_mu;
    struct faultset faults;
    struct chain chain;        /* retries and orphaned work (own lock) */
    struct recorder *recorder; /* --record, or NULL */
    struct proxy_mirror_stats mirror;
    char mirror_base[PROXY_UPSTREAM_MAX]; /* --mirror's URL without a trailing '/' */
    _Atomic uint64_t rec_seq;             /* the recorded exchanges' ids */
    struct proxy_worker *workers;         /* n_workers (cfg.threads) */
    int n_workers;
    struct http_server api;
    struct proxy_tracer tracer; /* the workers' tracers borrow its server address, which
                                   the exporter reads until it is closed: it lives in p */
    /* counters (read by /metrics) */
    _Atomic uint64_t requests_total;
    _Atomic uint64_t in_flight;
    _Atomic uint64_t upstream_errors;
    atomic_bool warned_up_shaping;   /* said once: upstream TCP faults need http:// */
    _Atomic uint64_t header_faults;  /* injections asked for by x-tokenstorm-fault-* headers */
    _Atomic uint64_t ws_connections; /* WebSocket upgrades relayed (the upstream said 101) */
    _Atomic uint64_t ws_messages[2]; /* messages passed on: [0] to the upstream, [1] to clients */
    _Atomic uint64_t req_seq;        /* seeds per-request generators */
    /* private */
    uv_async_t reaped; /* a worker thread -> the proxy loop: its loop is empty */
    void (*on_closed)(struct proxy *p);
    int closing_parts;
    bool api_inited;
    bool shutting_down;
};

/*
 * Prepares p on loop (no socket yet). cfg is copied; its host strings must
 * outlive p (upstream is copied). Returns 0, or -EINVAL (bad upstream URL, bad
 * host, threads out of range) / -ENOMEM with a message in err. On error p needs no shutdown, but
 * the loop may hold closing handles: run it until it is empty before
 * uv_loop_close.
 */
TS_MUST_CHECK int proxy_init(struct proxy *p, uv_loop_t *loop, const struct proxy_config *cfg,
                             char *err, size_t errlen);

/* Binds the proxy and (if configured) the API, and starts the worker
 * threads (cfg.threads > 1). Returns 0 or a negative errno with a message.
 * On error, still call proxy_shutdown. */
TS_MUST_CHECK int proxy_listen(struct proxy *p, char *err, size_t errlen);

/* The bound ports (0 before listening / without the API). */
int proxy_port(const struct proxy *p);
int proxy_api_port(const struct proxy *p);

/* Whether the workers send to clients through io_uring (net/uring.h); when
 * not, *why (if not NULL) says why: "--no-io-uring" when it was turned off,
 * or the first worker's setup error. Static strings of p. */
bool proxy_io_uring(const struct proxy *p, const char **why);
/* The workers' io_uring sends and the system calls that submitted them. */
void proxy_io_uring_counts(const struct proxy *p, uint64_t *sends, uint64_t *submits);

/*
 * Stops the servers (in-flight requests get grace_ms to finish), then the
 * upstream clients, and joins the worker threads; on_closed(p) (may be NULL)
 * runs from the loop when everything is closed. Call exactly once after a
 * successful proxy_init.
 */
void proxy_shutdown(struct proxy *p, uint64_t grace_ms, void (*on_closed)(struct proxy *p));

/* Appends the Prometheus text of p's counters to out. 0 or a buf error.
 * Takes faults_mu. */
TS_MUST_CHECK int proxy_metrics(struct proxy *p, struct buf *out);

/* --mirror's stats (proxy_mirror.c): set up before the workers start. */
void proxy_mirror_stats_init(struct proxy_mirror_stats *m);
/*
 * --mirror-out DIR (proxy_mirror_out.c): makes DIR/primary and DIR/mirror
 * and starts the thread that writes, every cfg.mirror_out_every_ns,
 * DIR/primary/result.json, DIR/mirror/result.json (tokenstorm.result/1:
 * each target's side of the compared pairs, for `tokenstorm compare
 * DIR/primary DIR/mirror`) and DIR/mirror.json (the counts, the latency
 * difference, the similarity). Nothing without cfg.mirror_out. Returns 0,
 * or a negative errno with the reason in err (nothing to stop then).
 */
TS_MUST_CHECK int proxy_mirror_out_start(struct proxy *p, char *err, size_t errlen);
/* Stops the writer, writes the files a last time and frees the stats. Idempotent. */
void proxy_mirror_out_stop(struct proxy *p);
/* Writes the files now. 0 or a negative errno with the reason in err. */
TS_MUST_CHECK int proxy_mirror_out_write(struct proxy *p, char *err, size_t errlen);
/*
 * At w's shutdown, after its clients: calls done(w) once the mirror calls
 * on w have ended, or when the grace is over (then the client's close cuts
 * them; such pairs count as cut, not as errors). Runs on w's loop.
 */
void proxy_mirror_drain(struct proxy_worker *w, void (*done)(struct proxy_worker *w));
/* Appends their Prometheus text (nothing without --mirror). 0 or a buf error. */
TS_MUST_CHECK int proxy_mirror_metrics(struct proxy *p, struct buf *out);

/* The control API's request handler (proxy_api.c); ctx is the proxy. Holds
 * faults_mu while it runs. */
void proxy_api_handle(struct http_request *req, void *ctx);

/* Adds every spec of a JSON array (from fault_file_load) to p's set (takes
 * faults_mu).
 * Returns 0 or -EINVAL/-EEXIST/-ENOMEM with a message naming the entry. */
TS_MUST_CHECK int proxy_add_faults(struct proxy *p, const json_t *specs, char *err, size_t errlen);

#endif
