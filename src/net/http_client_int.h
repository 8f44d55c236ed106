/*
 * http_client_int.h - what http_client.c (the API, the calls and the libcurl
 * engine) and http1.c (the plain HTTP/1.1 engine) share. Not for other users.
 */
#ifndef TS_NET_HTTP_CLIENT_INT_H
#define TS_NET_HTTP_CLIENT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <uv.h>

#include "base/buf.h"
#include "net/http_client.h"

#define CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

struct h1_conn;
struct h1_host;

struct http_call {
    struct http_client *client;
    CURL *easy; /* the curl engine's handle; NULL on the HTTP/1.1 engine */
    struct http_call_ops ops;
    void *user;
    struct curl_slist *headers;         /* nodes live in this block */
    uv_timer_t timer;                   /* connect / ttfb / idle / total deadlines */
    struct http_client_list link;       /* in client->calls */
    struct http_client_list defer_link; /* in client->deferred, or alone */
    uint64_t start_ns, first_rx_ns, last_rx_ns, headers_ns;
    uint64_t first_byte_ns, last_byte_ns, bytes;
    uint32_t ttfb_ms, idle_ms, total_ms, connect_ms;
    enum http_call_error forced; /* set when we end the call, not curl */
    const char *forced_text;     /* detail for forced == HTTP_CALL_ERR_OTHER */
    bool added;                  /* in the multi handle */
    bool deferred_add;           /* to be added by the idle handle */
    bool finished;               /* on_done is running or has run */
    bool headers_done;
    /* ---- the HTTP/1.1 engine (http1.c) ---- */
    bool h1;         /* runs on it */
    bool h1_failed;  /* ended inside http_client_request: finished from idle */
    bool h1_retried; /* already moved once off a stale kept-alive connection */
    bool h1_head;    /* a HEAD request: the response has no body */
    struct h1_host *h1_host;
    struct h1_conn *h1_conn;              /* its connection, NULL while it waits */
    struct http_client_list h1_wait_link; /* in h1_host->waiting during resolution */
    char *h1_req;                         /* the request head (heap) */
    size_t h1_req_len;
    const void *h1_body;
    size_t h1_body_len;
    size_t h1_sent; /* bytes of head + body written */
    long h1_status;
    CURLcode h1_code; /* how it ended, in curl's terms (classified alike) */
    struct buf h1_rh; /* response headers: name\0value\0... */
    unsigned h1_rh_n;
    bool h1_rh_value;                                     /* the last header bytes were a value */
    uint64_t h1_dns_ns, h1_connect_ns, h1_pretransfer_ns; /* absolute, 0 = not reached */
    bool h1_reused;
    bool h1_shaped; /* h1_shaper paces the request bytes */
    struct http_shaper h1_shaper;
    uv_timer_t *h1_wake; /* the shaper's wake-ups (heap, a counted handle) */
    char errbuf[CURL_ERROR_SIZE];
    /* followed by the curl_slist nodes, the header strings, the body copy */
};

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

/* ---- http_client.c, for http1.c ---- */

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
/* A uv handle (or request) counted in open_handles is gone. */
void hc_client_handle_closed(struct http_client *c);
/* The monotonic time of a SCM_TIMESTAMPNS control message in msg, or 0. */
uint64_t hc_msg_stamp(const struct msghdr *msg);
/* Between two sockets' reads: the owner's between_reads, at most every 100 us. */
void hc_between_reads(struct http_client *c);

/* ---- http1.c ---- */

/* Queues deferred work for call (cancel, add, a failure to report). */
void hc_client_defer(struct http_client *c, struct http_call *call);

/* Whether spec can run on the HTTP/1.1 engine: plain http://, HTTP/1.1, no
 * proxy, no connection limits, headers it writes itself. Parses the URL. */
bool h1_eligible(struct http_client *c, const struct http_call_spec *spec);
/* Builds the request (after h1_eligible said yes). 0 or -ENOMEM. */
int h1_start(struct http_call *call, const struct http_call_spec *spec, const void *body);
/* Sends it: on a kept-alive connection, a new one, or after the name is
 * resolved. No callback runs inside; a failure is reported from the loop. */
void h1_launch(struct http_call *call);
/* The call ends: its connection goes back to the pool or is closed. */
void h1_call_release(struct http_call *call);
/* Response headers of an HTTP/1.1 call. */
const char *h1_header(struct http_call *call, const char *name);
int h1_headers_each(struct http_call *call,
                    int (*fn)(void *ctx, const char *name, const char *value), void *ctx);
/* Result fields the engine knows. */
void h1_fill_result(struct http_call *call, struct http_call_result *res);
/* The client closes: every connection and name lookup goes. */
void h1_client_close(struct http_client *c);
void h1_client_init(struct http_client *c);

#endif
