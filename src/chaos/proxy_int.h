/*
 * proxy_int.h - internals of the chaos proxy shared by its files; not a
 * public interface (proxy.h is the manual):
 *
 *   proxy.c          one client request: its state machine, the HTTP
 *                    faults, the upstream call, the stream tap's output
 *   proxy_shape.c    TCP faults: the shaper of a client connection's output
 *                    and of a request's bytes to the upstream
 *   proxy_workers.c  the loops serving clients, their threads, and the
 *                    proxy's init, listen and shutdown
 *
 * Everything here runs on the loop of the request's worker.
 */
#ifndef TS_CHAOS_PROXY_INT_H
#define TS_CHAOS_PROXY_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/dist.h"
#include "base/rng.h"
#include "chaos/fault.h"
#include "chaos/faultset.h"
#include "chaos/proxy.h"
#include "chaos/proxy_trace.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "net/ptimer.h"
#include "net/sse.h"

enum px_mode { MODE_PASS, MODE_SSE, MODE_BODY };

enum px_timer { TIMER_NONE, TIMER_OPEN, TIMER_CLOSING, TIMER_CLOSED };

/* Tap output waiting for its time. */
struct pxemit {
    struct pxemit *next;
    uint64_t at;
    size_t len;
    char data[];
};

/*
 * Where a request is. Only px_set_state() (proxy.c) changes it, along these
 * edges:
 *
 *   WAIT_FORWARD -> WAIT_HEAD   px_forward: the upstream call starts
 *   WAIT_FORWARD -> BLACKHOLE   its connection is blackholed
 *   WAIT_HEAD    -> HOLD_HEAD   up_on_headers: the upstream's head came
 *   HOLD_HEAD    -> STREAMING   px_send_head: the client's head goes out
 *   STREAMING    -> HANGING     a close with the "hang" cut
 *   any          -> DONE        px_done: over for the client
 */
enum px_state {
    PX_WAIT_FORWARD, /* until fwd_at (request delays, upstream tcp_latency) */
    PX_BLACKHOLE,    /* never answered; cut at bh_until (0: never) */
    PX_WAIT_HEAD,    /* forwarded; the upstream's head has not come */
    PX_HOLD_HEAD,    /* the upstream's head came; the client's waits for hdr_at (and a body tap) */
    PX_STREAMING,    /* the client's head went out; the body follows */
    PX_HANGING,      /* closed with "hang": the connection stays open and silent */
    PX_DONE,         /* over for the client; freed once the call and timer are gone */
};

/* One client request (http_request's user); freed by proxy.c once it is
 * DONE and neither its upstream call nor its timer is alive. */
struct pxreq {
    /*
     * What every relayed piece of the body touches comes first, together:
     * by its next piece a stream's request has left the cache, and each
     * line touched is a miss (the recording and mirror pointers, checked
     * per piece, sat 2.3 KB in).
     */
    struct proxy *p;
    struct proxy_worker *w; /* the loop it runs on */
    struct http_request *req;
    enum px_state state;
    enum px_mode mode;
    struct http_call *call;
    bool call_running;  /* call is alive: up_on_done has not run */
    bool upstream_done; /* the call ended well (MODE_BODY: the tapped body is ready) */
    bool orphan;        /* see orphan_at below */
    /* An end is due at close_at, the close_how way, once the queue is
     * written (tap_close, or a truncation); no more tap output is taken.
     * Set in HOLD_HEAD or STREAMING. */
    bool close_pending;
    bool trunc_done; /* http_truncate_response's bytes went out: nothing more is written */
    bool have_len;   /* the client's response has Content-Length clen (else chunked) */
    bool sse_on;     /* sse was initialised (MODE_SSE, or an orphan's event stream) */
    struct fault *f_abort, *f_trunc_resp;
    uint64_t trunc_left;
    struct pxemit *eq_head, *eq_tail;
    size_t eq_bytes;
    /* --record (proxy_record.c): the line being built, NULL when not recording */
    json_t *rec;
    struct mirror_pair *mp; /* --mirror: this request's pair until its primary side ends */
    struct stream_tap *tap;
    struct sse_parser sse; /* MODE_SSE */
    /* the rest: per request */
    struct rng rng;
    struct fault *hits[FAULTSET_HITS];
    size_t nhits;
    struct fault *f_timeout; /* http_timeout: given up at gw_at (0: not forwarded yet) */
    uint64_t gw_at;
    struct buf head;    /* upstream headers as "Name: value\r\n" lines */
    struct buf pending; /* body before the head went out / the tapped body */
    int status;
    uint64_t clen;
    uint64_t fwd_at, hdr_at;
    uint64_t bh_until; /* BLACKHOLE: 0: swallow forever */
    struct ptimer timer;
    enum px_timer tstate;
    uint64_t close_at;
    enum fault_cut close_how;
    struct proxy_trace trace;
    /* retries and orphaned work (chain.h) */
    uint64_t ckey;           /* its chain key */
    int out_code;            /* how it ended for the client (enum chain_code or a status);
                                -1: not yet */
    uint64_t retry_after_ns; /* the Retry-After the client was given (0: none) */
    /* Orphaned work: the client left while the upstream call ran; the call
     * was half-closed (the upstream sees its client gone) and what still
     * comes is counted until it ends, or orphan_at + cfg.orphan_max_ns. */
    uint64_t orphan_at, orphan_last;
    uint64_t orphan_bytes, orphan_tokens;
    uint64_t rec_t0, rec_last;
    struct sse_parser rec_sse;
    bool rec_sse_on, rec_body_cut;
    bool rec_full; /* cut because the recordings in progress held their budget */
    /* the line's size as written so far: the request's part, then the
     * events (capped: proxy_record.c) or the body; reserved from the
     * recorder's budget until the line is queued */
    size_t rec_bytes;
    struct buf rec_body;
};

/* ---- proxy.c ---- */

/* The http_server request handler of worker ctx (struct proxy_worker). */
void proxy_on_request(struct http_request *req, void *ctx);

/* Counts an injection of f on x: the fault's counter, x's span, and the
 * proxy's header_faults when f came from an x-tokenstorm-fault* header. */
void px_count(struct pxreq *x, struct fault *f);

/* A sample of d from x's generator, in ns, clamped to 0..1 h. */
uint64_t px_sample_ns(struct pxreq *x, const struct dist *d);

/* ---- proxy_ws.c ---- */

/* Whether req asks for a WebSocket upgrade (Upgrade: websocket). */
bool proxy_ws_wanted(const struct http_request *req);
/* Forwards the upgrade req to the upstream and relays its messages both
 * ways with the WebSocket frame faults (ws_faults.h) of the set. */
void proxy_ws_handle(struct proxy_worker *w, struct http_request *req);
/* w stops: each relayed connection gets a close 1001 on both sides. */
void proxy_ws_stop(struct proxy_worker *w);

/* ---- proxy_workers.c ---- */

/* A relayed WebSocket connection of w was freed: once w's server closed and
 * none is left, w's upstream client is closed (the shutdown goes on). */
void proxy_worker_ws_gone(struct proxy_worker *w);

/* ---- proxy_record.c ---- */

/* Starts x's record (when the proxy records): the request. */
void px_record_begin(struct pxreq *x);
/* The upstream's head. */
void px_record_head(struct pxreq *x, struct http_call *call, int status);
/* A piece of the upstream's body. */
void px_record_body(struct pxreq *x, const char *data, size_t len, uint64_t now_ns);
/* Writes x's record (only when the upstream answered) and drops it. */
void px_record_end(struct pxreq *x);

/* A WebSocket session being recorded (proxy_ws.c; rec NULL: not recording). */
struct pxws_rec {
    json_t *rec;       /* the line being built */
    uint64_t t0, last; /* the upgrade request's arrival; the last message's */
    size_t bytes;      /* the line's size as written so far (capped: proxy_record.c; reserved) */
    bool cut;          /* messages left out: over the cap or the count */
    bool full;         /* ... because the recordings in progress held their budget */
};

/* Starts r for the upgrade request req when p records (else leaves r->rec NULL). */
void px_record_ws_begin(struct proxy *p, const struct http_request *req, struct pxws_rec *r);
/* One whole message as it came (before any fault), from the client or the
 * server, at at (ns, monotonic). */
void px_record_ws_message(struct proxy *p, struct pxws_rec *r, bool from_client, int opcode,
                          const char *data, size_t len, uint64_t at);
/* The upstream's answer to the upgrade: 101, or its refusal with its body. */
void px_record_ws_status(struct pxws_rec *r, int status, const char *body, size_t len);
/* A close frame seen (by: "client" or "server"), with its code (0: none). */
void px_record_ws_close(struct pxws_rec *r, const char *by, unsigned code, uint64_t at);
/* Writes the line (when the upstream answered) and clears r; outcome: "ok"
 * (the session ended with a close handshake) or "cut". */
void px_record_ws_end(struct proxy *p, struct pxws_rec *r, const char *outcome);

/* ---- proxy_mirror.c ---- */

/* Mirrors x (its share rolled, the queue bound kept) with the primary's spec. */
void px_mirror_start(struct pxreq *x, const struct http_call_spec *primary);
/* The primary's body pieces, and its end (res: its upstream call's result). */
void px_mirror_primary_body(struct pxreq *x, const char *data, size_t len);
void px_mirror_primary_done(struct pxreq *x, const struct http_call_result *res);

/* ---- proxy_shape.c ---- */

/* Rolls the TCP faults of x's connection (call at its first request),
 * counts each hit on x and shapes the connection's output with them until
 * it closes. Without a hit, or out of memory, the connection is left as it
 * is. */
void px_tcp_roll(struct pxreq *x, uint64_t now);
/* The same for a WebSocket upgrade request req (proxy_ws.c): the shaper
 * acts on every byte to the client, frames included; seed gives the
 * shaper's generator its seed. */
void px_tcp_roll_ws(struct proxy *p, struct http_request *req, struct rng *seed, uint64_t now);

/*
 * The shaper for the request bytes x forwards upstream, from the TCP faults
 * of its client connection that act upstream (bandwidth, slicer, reset,
 * limit; each request's bytes are counted alone). Returns true with *sh
 * set, whose ctx the caller owns until it hands sh to the upstream call
 * (else sh->release(sh->ctx)); false when there are none (or out of
 * memory).
 */
bool px_tcp_upstream(struct pxreq *x, uint64_t now, struct http_shaper *sh);

/* The same for the upstream connection of a WebSocket upgrade request req:
 * every byte written to the upstream over the session, latency included
 * (a delay per write). */
bool px_tcp_upstream_ws(const struct http_request *req, struct rng *seed, uint64_t now,
                        struct http_shaper *sh);

/* The connection's TCP faults that act on request x: tcp_latency in the
 * upstream direction adds to x->fwd_at. Returns true when a blackhole
 * swallows x, with x->bh_until set. */
bool px_tcp_request(struct pxreq *x, uint64_t now);

#endif
