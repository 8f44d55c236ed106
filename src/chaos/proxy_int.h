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

/* One client request (http_request's user); freed by proxy.c once it is
 * finished and neither its upstream call nor its timer is alive. */
struct pxreq {
    struct proxy *p;
    struct proxy_worker *w; /* the loop it runs on */
    struct http_request *req;
    struct http_call *call;
    struct rng rng;
    struct fault *hits[FAULTSET_HITS];
    size_t nhits;
    struct fault *f_abort, *f_trunc_resp;
    enum px_mode mode;
    struct stream_tap *tap;
    struct sse_parser sse;
    bool sse_on;
    struct buf head;    /* upstream headers as "Name: value\r\n" lines */
    struct buf pending; /* body before the head went out / the tapped body */
    int status;
    bool have_len;
    uint64_t clen;
    uint64_t trunc_left;
    uint64_t fwd_at, hdr_at;
    struct ptimer timer;
    enum px_timer tstate;
    struct pxemit *eq_head, *eq_tail;
    size_t eq_bytes;
    uint64_t close_at;
    enum fault_cut close_how;
    bool close_pending;
    bool forwarded, call_running, have_head, head_sent, upstream_done, body_ready;
    bool finished, hanging, trunc_done;
    bool blackhole;
    uint64_t bh_until; /* 0: swallow forever */
    struct proxy_trace trace;
};

/* ---- proxy.c ---- */

/* The http_server request handler of worker ctx (struct proxy_worker). */
void proxy_on_request(struct http_request *req, void *ctx);

/* Counts an injection of f on x: the fault's counter, x's span, and the
 * proxy's header_faults when f came from an x-tokenstorm-fault* header. */
void px_count(struct pxreq *x, struct fault *f);

/* A sample of d from x's generator, in ns, clamped to 0..1 h. */
uint64_t px_sample_ns(struct pxreq *x, const struct dist *d);

/* ---- proxy_shape.c ---- */

/* Rolls the TCP faults of x's connection (call at its first request),
 * counts each hit on x and shapes the connection's output with them until
 * it closes. Without a hit, or out of memory, the connection is left as it
 * is. */
void px_tcp_roll(struct pxreq *x, uint64_t now);

/*
 * The shaper for the request bytes x forwards upstream, from the TCP faults
 * of its client connection that act upstream (bandwidth, slicer, reset,
 * limit; each request's bytes are counted alone). Returns true with *sh
 * set, whose ctx the caller owns until it hands sh to the upstream call
 * (else sh->release(sh->ctx)); false when there are none (or out of
 * memory).
 */
bool px_tcp_upstream(struct pxreq *x, uint64_t now, struct http_shaper *sh);

/* The connection's TCP faults that act on request x: tcp_latency in the
 * upstream direction adds to x->fwd_at; a blackhole swallows x. */
void px_tcp_request(struct pxreq *x, uint64_t now);

#endif
