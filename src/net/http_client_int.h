/*
 * http_client_int.h - what the client's API (http_client.c) and its two
 * engines share: the call every engine runs, and the table of functions an
 * engine is (the pattern of curl's connection filters and wrk2's sock
 * struct). Not for other users.
 *
 * The engines:
 *   http_engine_h1   - http1.c: the own HTTP/1.1 engine for plain http://
 *   http_engine_curl - http_curl.c: libcurl multi on libuv, for the rest
 * Each keeps its per-client state in its own struct, reached through
 * c->engine_state[slot], and its per-call state in a struct that begins with
 * the struct http_call below (one block per call, sized by the engine).
 * http_client.c owns the call's life (timers, deferred work, on_done) and
 * reaches an engine only through call->engine.
 */
#ifndef TS_NET_HTTP_CLIENT_INT_H
#define TS_NET_HTTP_CLIENT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <curl/curl.h>
#include <uv.h>

#include "net/body_decode.h"
#include "net/http_client.h"

#define CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* Where each engine's per-client state sits in c->engine_state. */
enum hc_engine_slot {
    HC_ENGINE_H1 = 0,
    HC_ENGINE_CURL = 1,
};

_Static_assert(HC_ENGINE_CURL < HTTP_CLIENT_ENGINES, "a slot for every engine");

struct http_engine_ops;

/* The part of a call every engine shares; an engine's own call struct
 * begins with it. */
struct http_call {
    struct http_client *client;
    const struct http_engine_ops *engine; /* the engine that runs it */
    struct http_call_ops ops;
    void *user;
    uint64_t start_ns, first_rx_ns, last_rx_ns, headers_ns;
    uint64_t first_byte_ns, last_byte_ns, bytes;
    uint32_t ttfb_ms, idle_ms, total_ms, connect_ms;
    enum http_call_error forced; /* set when we end the call, not the engine */
    const char *forced_text;     /* detail for forced == HTTP_CALL_ERR_OTHER */
    bool finished;               /* on_done is running or has run */
    bool headers_done;
    struct body_decoder *decoder; /* the response's Content-Encoding, or NULL */
    /* its error texts, allocated by the first that is written (curl's
     * engine: when the call is set up); NULL while the call has none, so a
     * held stream keeps no text buffers (hc_call_errs) */
    struct hc_errtext *errt;
    /* not touched per read: after what is (a held stream's call is cold in
     * the cache by its next read) */
    uv_timer_t timer;                   /* connect / ttfb / idle / total deadlines */
    struct http_client_list link;       /* in client->calls */
    struct http_client_list defer_link; /* in client->deferred, or alone */
};

/* Bytes of hc_errtext.decode_err, its NUL included. */
#define HC_DECODE_ERR_MAX 128

/* A call's error texts. */
struct hc_errtext {
    char decode_err[HC_DECODE_ERR_MAX]; /* why the body could not be undone (curl owns errbuf) */
    char errbuf[CURL_ERROR_SIZE];
};

/* call's error texts, allocated zeroed on first use; NULL when memory ran
 * out (the text is then lost; the error code is not). */
struct hc_errtext *hc_call_errs(struct http_call *call);

/* What http_client_request checked in a call's spec, for the engine. */
struct hc_request {
    const struct http_call_spec *spec;
    size_t hdr_bytes; /* the header strings with their NULs */
    bool has_expect;  /* one of them is an Expect header */
};

/*
 * An engine. Every function runs on the client's loop thread; none calls
 * on_done directly unless it says so (failures inside http_client_request
 * are reported through hc_client_defer and the engine's deferred()).
 */
struct http_engine_ops {
    const char *name;
    /* sizeof the engine's call struct (it begins with struct http_call). */
    size_t call_struct_size;
    /* The engine can pace and cut what it sends (spec->send_shaper). */
    bool shapes_sends;

    /* ---- per client ---- */
    /* Makes the engine's state and stores it in c->engine_state: 0,
     * -ENOMEM or -EINVAL; on error nothing is left to undo. May count uv
     * handles it opens in c->open_handles. */
    int (*client_init)(struct http_client *c);
    /* The client closes (no call is left): connections, lookups and uv
     * handles go; each handle's close calls hc_client_handle_closed. */
    void (*client_close)(struct http_client *c);
    /* Frees the state: after every counted handle closed, or right after
     * a successful client_init when a later step of the client's init
     * failed. */
    void (*client_free)(struct http_client *c);

    /* ---- per call ---- */
    /* 0 when the engine takes spec, negative when not (it may prepare
     * what start() needs: a parsed URL, a target). NULL: it takes every
     * call. */
    int (*route)(struct http_client *c, const struct http_call_spec *spec);
    /* Bytes of the engine's call block for req: its call struct and what
     * it lays out after it. The client puts a body copy after them. */
    size_t (*call_size)(const struct hc_request *req);
    /* Fills the engine's part of a zeroed call (body: the body to send,
     * the caller's or the copy). 0 or a negative error; either way
     * call_detach and call_free undo it. */
    int (*call_start)(struct http_call *call, const struct hc_request *req, const void *body);
    /* The call is registered (in client->calls, its timer armed): send it.
     * 0, or a negative error after which the call is dropped without
     * on_done (call_detach and call_free follow). */
    int (*call_launch)(struct http_call *call);
    /* Deferred work of a call not forced to end (hc_client_defer). */
    void (*call_deferred)(struct http_call *call);
    /* Optional: the call still waits for its connection and the client's
     * timer enforces the connect timeout (the engine has none of its own). */
    bool (*call_connecting)(const struct http_call *call);
    /* The call ends (before on_done, or when dropped): it leaves its
     * connection and the engine's queues. */
    void (*call_detach)(struct http_call *call);
    /* The result fields only the engine knows: status, reused, phase times
     * (res->end_ns is set). */
    void (*call_result)(struct http_call *call, struct http_call_result *res);
    /* After on_done (or when dropped): what on_done could still read goes. */
    void (*call_free)(struct http_call *call);
    /* The final response's headers (http_call_header, http_call_headers_each). */
    const char *(*call_header)(struct http_call *call, const char *name);
    int (*call_headers_each)(struct http_call *call,
                             int (*fn)(void *ctx, const char *name, const char *value), void *ctx);
    /* Optional (NULL: -ENOTSUP): http_call_shutdown_write. */
    int (*call_shutdown_write)(struct http_call *call);
};

extern const struct http_engine_ops http_engine_h1;
extern const struct http_engine_ops http_engine_curl;

static inline void hc_list_init(struct http_client_list *l)
{
    l->prev = l;
    l->next = l;
}

static inline bool hc_list_empty(const struct http_client_list *l)
{
    return l->next == l;
}

static inline void hc_list_add_tail(struct http_client_list *head, struct http_client_list *n)
{
    n->prev = head->prev;
    n->next = head;
    head->prev->next = n;
    head->prev = n;
}

static inline void hc_list_add_head(struct http_client_list *head, struct http_client_list *n)
{
    hc_list_add_tail(head->next, n);
}

/* Unlinks n (a no-op when n is alone) and leaves it alone. */
static inline void hc_list_remove(struct http_client_list *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    hc_list_init(n);
}

/* ---- http_client.c, for the engines ---- */

/* Ends a call (on_done, then its memory goes). Only outside the engines'
 * parsers and curl. */
void hc_call_finish(struct http_call *call, CURLcode code);
/* Re-arms the call's timer for its nearest deadline. */
void hc_call_arm_timer(struct http_call *call, uint64_t now);
/* Response bytes arrived at now (headers or body): timeouts and times. */
void hc_call_rx(struct http_call *call, uint64_t now);
/* The final response's headers are complete: on_headers. */
void hc_call_headers(struct http_call *call, long status, uint64_t now);
/* A piece of the body: on_body. Returns nonzero when the call must stop. */
int hc_call_body(struct http_call *call, const char *data, size_t len, uint64_t now);
/* Queues deferred work for call (a cancel, an add, a failure to report):
 * the idle handle ends a forced call or runs the engine's call_deferred. */
void hc_client_defer(struct http_client *c, struct http_call *call);
/* A uv handle (or request) counted in open_handles is gone. */
void hc_client_handle_closed(struct http_client *c);
/* The monotonic time of a SCM_TIMESTAMPNS control message in msg, or 0
 * (none, or the clocks moved). Reads the clocks only every ~10 ms of stamps
 * (c keeps their offset). */
uint64_t hc_msg_stamp(struct http_client *c, const struct msghdr *msg);
/* Between two sockets' reads: the owner's between_reads, at most every 100 us.
 * now: the monotonic time if the caller just read it, else 0. */
void hc_between_reads(struct http_client *c, uint64_t now);

#endif
