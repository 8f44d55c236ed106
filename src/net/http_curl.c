/*
 * http_curl.c - the client's libcurl engine: curl's multi interface on
 * libuv (the multi-uv.c pattern) for TLS, HTTP/2, proxies, connection
 * limits, and every call with HTTP_CLIENT_ENGINE_CURL. The call's life, its
 * timers and on_done are http_client.c's; this file runs the transfer.
 *
 * Re-entrancy rules this file keeps:
 * - curl_multi_add_handle/remove_handle/easy_cleanup are never called while
 *   curl_multi_socket_action runs (cm->depth > 0), i.e. never from curl's
 *   header/write callbacks. Work asked for there (cancel, a new request,
 *   close) is queued on c->deferred and done by the client's uv_idle handle
 *   on the next loop iteration.
 * - on_done runs only at depth 0: from check_multi_info after
 *   curl_multi_socket_action returned, from the idle handle, or from a call's
 *   own timer. The easy handle is cleaned up right after on_done, the call
 *   memory is freed in its timer's close callback.
 *
 * Memory per in-flight call (HTTP/1.1, libcurl 7.88, x86-64; measured with
 * 200 -> 1,200 streams held open after their first SSE event, against a
 * server in another process): about 28 KiB of heap per call and 17 KiB
 * resident (curl's 16 KiB receive buffer is allocated but mostly untouched).
 * With recv_buffer_size = 4096 the heap cost is 16 KiB, with 1024 it is
 * 13 KiB. This layer's share is one block: struct hcurl_call (608 bytes,
 * of which 256 are curl's error buffer) plus the copied headers, and
 * a 192-byte sock_ctx per socket; the rest is curl's easy handle, the
 * connection and the stored response headers. Kernel socket buffers come on
 * top.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "net/http_client_int.h"
#include "ts_config.h"

#define HTTP_CLIENT_USER_AGENT "tokenstorm/" TS_VERSION
/* After this many curl timer expiries at the same loop time, a requested
 * 0 ms timeout becomes 1 ms: libuv < 1.45 runs a timer restarted with 0 from
 * its own callback again in the same pass, which could starve the loop. */
#define ZERO_TIMER_STREAK_MAX 16

/* The engine's per-client state (c->engine_state[HC_ENGINE_CURL]). */
struct hcurl_client {
    struct http_client *client;
    CURLM *multi;
    uv_timer_t timer;              /* curl's timer (CURLMOPT_TIMERFUNCTION) */
    uv_prepare_t prepare;          /* rx_timestamps: marks the start of each poll pass */
    struct http_client_list socks; /* uv_poll contexts */
    int depth;                     /* > 0 while inside curl_multi_socket_action */
    uint64_t timer_fired_at;
    unsigned timer_streak;
    uint64_t rx_stamp_ns; /* kernel arrival of the socket being read, monotonic; 0 = none */
    const struct http_call *rx_stamp_owner; /* the call its bytes went to */
    uint64_t prepare_ns, pass_ns; /* when the loop last went to poll; its first socket event */
    bool pass_waited;             /* that poll blocked: the pass began when data came */
};

/* A call on this engine. */
struct hcurl_call {
    struct http_call base;
    CURL *easy;
    struct curl_slist *headers; /* nodes live in this block */
    bool added;                 /* in the multi handle */
    bool deferred_add;          /* to be added by the idle handle */
    /* followed by the curl_slist nodes and the header strings */
};

struct sock_ctx {
    uv_poll_t poll;
    curl_socket_t fd;
    struct hcurl_client *cm;
    struct http_client_list link; /* in cm->socks */
};

static struct hcurl_client *hcurl_of(struct http_client *c)
{
    return c->engine_state[HC_ENGINE_CURL];
}

static struct hcurl_call *hcurl_call_of(struct http_call *call)
{
    return CONTAINER_OF(call, struct hcurl_call, base);
}

/* ---- sockets and handles ------------------------------------------------- */

static void cm_on_handle_closed(uv_handle_t *h)
{
    struct hcurl_client *cm = h->data;
    hc_client_handle_closed(cm->client); /* cm may be gone after this */
}

static void sock_on_closed(uv_handle_t *h)
{
    struct sock_ctx *sc = h->data;
    struct http_client *c = sc->cm->client;
    ts_free(sc);
    hc_client_handle_closed(c);
}

static void sock_close(struct sock_ctx *sc)
{
    hc_list_remove(&sc->link);
    /* uv_close stops the poll at once, so curl may reuse the fd number. */
    uv_close((uv_handle_t *)&sc->poll, sock_on_closed);
}

/* ---- the multi-uv glue ---------------------------------------------------- */

static void client_check_multi_info(struct hcurl_client *cm)
{
    CURLMsg *msg;
    int pending;

    while ((msg = curl_multi_info_read(cm->multi, &pending))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        CURLcode code = msg->data.result;
        char *priv = NULL;
        if (curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv) != CURLE_OK || !priv)
            continue;
        hc_call_finish((struct http_call *)priv, code);
    }
}

static void client_socket_action(struct hcurl_client *cm, curl_socket_t fd, int flags)
{
    int running;

    cm->depth++;
    CURLMcode mc = curl_multi_socket_action(cm->multi, fd, flags, &running);
    cm->depth--;
    if (mc != CURLM_OK)
        ts_warn("http_client: curl_multi_socket_action: %s", curl_multi_strerror(mc));
    client_check_multi_info(cm);
}

static void client_on_uv_timer(uv_timer_t *t)
{
    struct hcurl_client *cm = t->data;
    uint64_t now = uv_now(cm->client->loop);

    if (now == cm->timer_fired_at) {
        cm->timer_streak++;
    } else {
        cm->timer_streak = 0;
        cm->timer_fired_at = now;
    }
    client_socket_action(cm, CURL_SOCKET_TIMEOUT, 0);
}

/* CURLMOPT_TIMERFUNCTION: curl wants socket_action(TIMEOUT) in timeout_ms. */
static int client_on_curl_timer(CURLM *multi, long timeout_ms, void *userp)
{
    struct hcurl_client *cm = userp;

    if (cm->client->handles_closing)
        return 0;
    if (timeout_ms < 0) {
        uv_timer_stop(&cm->timer);
        return 0;
    }
    if (timeout_ms == 0 && cm->timer_streak >= ZERO_TIMER_STREAK_MAX)
        timeout_ms = 1;
    /* 0 is fine: libuv runs it on the next loop iteration, never in here. */
    return uv_timer_start(&cm->timer, client_on_uv_timer, (uint64_t)timeout_ms, 0) ? -1 : 0;
}

/*
 * The kernel's receive time (SO_TIMESTAMPNS, CLOCK_REALTIME) of the newest
 * of the unread bytes curl's next read will take, as a monotonic time, or 0
 * when there is none. TCP reports the time of the last segment a read
 * covers, so the peek spans what curl reads (its buffer): when several
 * events wait, they are all timed by the newest, late rather than early.
 */
static uint64_t sock_rx_stamp(struct http_client *c, int fd)
{
    struct iovec iov = {c->rxbuf, sizeof(c->rxbuf)};
    union {
        char buf[CMSG_SPACE(sizeof(struct timespec))];
        struct cmsghdr align;
    } ctl;
    struct msghdr msg = {
        .msg_iov = &iov,
        .msg_iovlen = 1,
        .msg_control = ctl.buf,
        .msg_controllen = sizeof(ctl.buf),
    };
    if (recvmsg(fd, &msg, MSG_PEEK | MSG_DONTWAIT) <= 0)
        return 0;
    return hc_msg_stamp(c, &msg);
}

/* Right before the loop polls: a new poll pass begins. */
static void client_on_prepare(uv_prepare_t *h)
{
    struct hcurl_client *cm = h->data;
    cm->prepare_ns = ts_now_ns();
    cm->pass_ns = 0;
}

/*
 * Whether a socket's read time may be late: the read is timed by the clock
 * unless this pass began with a poll that waited (the data woke the loop)
 * and the pass is young, so nothing was read long after it arrived. The
 * peek costs a syscall; this keeps it to bursts and busy loops.
 */
#define RX_FRESH_NS (50 * TS_NS_PER_US)
static bool rx_may_be_late(struct hcurl_client *cm)
{
    uint64_t now = ts_now_ns();
    if (!cm->pass_ns) {
        cm->pass_ns = now;
        cm->pass_waited = cm->prepare_ns && now - cm->prepare_ns > RX_FRESH_NS;
    }
    return !cm->pass_waited || now - cm->pass_ns > RX_FRESH_NS;
}

static void sock_on_poll(uv_poll_t *h, int status, int events)
{
    struct sock_ctx *sc = h->data;
    struct hcurl_client *cm = sc->cm;
    struct http_client *c = cm->client;
    int flags = 0;

    if (c->cfg.rx_timestamps && status >= 0 && (events & UV_READABLE) && rx_may_be_late(cm)) {
        cm->rx_stamp_ns = sock_rx_stamp(c, sc->fd);
        cm->rx_stamp_owner = NULL;
    }
    /* On error libuv stops the poll; let curl try both directions so the
     * read or write reports the real socket error (a pure CURL_CSELECT_ERR
     * would be reported as a send error even mid-body). */
    if (status < 0)
        flags = CURL_CSELECT_IN | CURL_CSELECT_OUT;
    if (events & UV_READABLE)
        flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
        flags |= CURL_CSELECT_OUT;
    client_socket_action(cm, sc->fd, flags); /* may free sc */
    cm->rx_stamp_ns = 0;
    cm->rx_stamp_owner = NULL;
    hc_between_reads(c, 0);
}

/*
 * When the bytes being handed over to call arrived: the kernel's time when
 * they come from the socket that was peeked. curl_multi_socket_action()
 * serves the socket's own transfer first (with HTTP/1.1 one socket carries
 * one transfer) and may then run others whose timers expired, reading their
 * sockets: the first call that receives bytes owns the stamp, any other gets
 * the time of its read. (curl 7.88 cannot tell a running transfer's socket:
 * CURLINFO_ACTIVESOCKET answers only for CONNECT_ONLY handles.)
 */
static uint64_t rx_now(const struct http_call *call)
{
    struct hcurl_client *cm = hcurl_of(call->client);
    uint64_t now = ts_now_ns();
    if (!cm->rx_stamp_ns || cm->rx_stamp_ns > now)
        return now;
    if (!cm->rx_stamp_owner)
        cm->rx_stamp_owner = call;
    return cm->rx_stamp_owner == call ? cm->rx_stamp_ns : now;
}

static struct sock_ctx *sock_new(struct hcurl_client *cm, curl_socket_t fd)
{
    struct http_client *c = cm->client;
    struct sock_ctx *sc = ts_malloc(sizeof(*sc));
    if (!sc)
        return NULL;
    int rc = uv_poll_init_socket(c->loop, &sc->poll, fd);
    if (rc) {
        ts_warn("http_client: uv_poll_init_socket: %s", uv_strerror(rc));
        ts_free(sc);
        return NULL;
    }
    sc->poll.data = sc;
    sc->fd = fd;
    sc->cm = cm;
    if (c->cfg.rx_timestamps) {
        int on = 1;
        if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)))
            ts_debug("http_client: SO_TIMESTAMPNS: %s", strerror(errno));
    }
    hc_list_add_tail(&cm->socks, &sc->link);
    c->open_handles++;
    return sc;
}

/* The socket of easy's call cannot be watched: end that call (deferred). */
static void client_fail_easy(struct http_client *c, CURL *easy)
{
    char *priv = NULL;
    if (!easy || curl_easy_getinfo(easy, CURLINFO_PRIVATE, &priv) != CURLE_OK || !priv)
        return;
    struct http_call *call = (struct http_call *)priv;
    if (call->finished || call->forced != HTTP_CALL_OK)
        return;
    call->forced = HTTP_CALL_ERR_OTHER;
    call->forced_text = "cannot watch the connection's socket";
    hc_client_defer(c, call);
}

/* CURLMOPT_SOCKETFUNCTION: start, change or stop watching socket s. */
static int client_on_curl_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    struct hcurl_client *cm = userp;
    struct sock_ctx *sc = socketp;

    if (what == CURL_POLL_REMOVE) {
        if (sc)
            sock_close(sc);
        return 0;
    }
    if (cm->client->handles_closing)
        return 0;
    if (!sc) {
        sc = sock_new(cm, s);
        if (!sc)
            goto fail;
        if (curl_multi_assign(cm->multi, s, sc) != CURLM_OK) {
            sock_close(sc);
            goto fail;
        }
    }
    int events = 0;
    if (what & CURL_POLL_IN)
        events |= UV_READABLE;
    if (what & CURL_POLL_OUT)
        events |= UV_WRITABLE;
    int rc = uv_poll_start(&sc->poll, events, sock_on_poll);
    if (rc) {
        ts_warn("http_client: uv_poll_start: %s", uv_strerror(rc));
        goto fail;
    }
    return 0;
fail:
    client_fail_easy(cm->client, easy);
    return -1;
}

/* ---- curl callbacks of a call ------------------------------------------- */

static bool is_blank_line(const char *buf, size_t len)
{
    return (len == 2 && buf[0] == '\r' && buf[1] == '\n') || (len == 1 && buf[0] == '\n');
}

static size_t call_on_header(char *buf, size_t size, size_t nitems, void *ud)
{
    struct http_call *call = ud;
    size_t len = size * nitems;

    if (call->forced != HTTP_CALL_OK)
        return CURL_WRITEFUNC_ERROR;
    uint64_t now = rx_now(call);
    hc_call_rx(call, now);
    if (call->headers_done || !is_blank_line(buf, len))
        return len;
    long status = 0;
    if (curl_easy_getinfo(hcurl_call_of(call)->easy, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK)
        status = 0;
    if (status >= 100 && status < 200)
        return len; /* an interim response; the final one follows */
    hc_call_headers(call, status, now);
    return call->forced == HTTP_CALL_OK ? len : CURL_WRITEFUNC_ERROR;
}

static size_t call_on_write(char *data, size_t size, size_t nmemb, void *ud)
{
    struct http_call *call = ud;
    size_t len = size * nmemb;

    if (call->forced != HTTP_CALL_OK)
        return CURL_WRITEFUNC_ERROR;
    if (len == 0)
        return 0;
    return hc_call_body(call, data, len, rx_now(call)) ? CURL_WRITEFUNC_ERROR : len;
}

/* ---- building a call ------------------------------------------------------ */

struct easy_opts {
    CURL *easy;
    CURLcode err; /* the first failure; later setters do nothing */
};

static void opt_long(struct easy_opts *o, CURLoption opt, long v)
{
    if (o->err == CURLE_OK)
        o->err = curl_easy_setopt(o->easy, opt, v);
}

static void opt_ptr(struct easy_opts *o, CURLoption opt, const void *v)
{
    if (o->err == CURLE_OK)
        o->err = curl_easy_setopt(o->easy, opt, v);
}

static void opt_off(struct easy_opts *o, CURLoption opt, curl_off_t v)
{
    if (o->err == CURLE_OK)
        o->err = curl_easy_setopt(o->easy, opt, v);
}

/* The options every call has: where, how, TLS, the callbacks. */
static void easy_set_common(struct easy_opts *o, struct hcurl_call *cc, const char *url)
{
    const struct http_client_config *cfg = &cc->base.client->cfg;
    long version = CURL_HTTP_VERSION_1_1;

    if (cfg->version == HTTP_CLIENT_HTTP2_TLS)
        version = CURL_HTTP_VERSION_2TLS;
    else if (cfg->version == HTTP_CLIENT_HTTP2_PRIOR)
        version = CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE;

    opt_ptr(o, CURLOPT_PRIVATE, &cc->base);
    opt_ptr(o, CURLOPT_URL, url);
    opt_ptr(o, CURLOPT_PROTOCOLS_STR, "http,https");
    opt_long(o, CURLOPT_NOSIGNAL, 1L);
    opt_long(o, CURLOPT_TCP_NODELAY, 1L);
    opt_ptr(o, CURLOPT_USERAGENT, HTTP_CLIENT_USER_AGENT);
    opt_ptr(o, CURLOPT_HTTPHEADER, cc->headers);
    struct hc_errtext *t = hc_call_errs(&cc->base); /* curl writes into it: made now */
    if (t)
        opt_ptr(o, CURLOPT_ERRORBUFFER, t->errbuf);
    else if (o->err == CURLE_OK)
        o->err = CURLE_OUT_OF_MEMORY;
    opt_long(o, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
    opt_long(o, CURLOPT_CONNECTTIMEOUT_MS, (long)cc->base.connect_ms);
    opt_long(o, CURLOPT_HTTP_VERSION, version);
    if (cfg->version != HTTP_CLIENT_HTTP1)
        opt_long(o, CURLOPT_PIPEWAIT, 1L);
    opt_long(o, CURLOPT_SSL_VERIFYPEER, cfg->insecure ? 0L : 1L);
    opt_long(o, CURLOPT_SSL_VERIFYHOST, cfg->insecure ? 0L : 2L);
    opt_long(o, CURLOPT_PROXY_SSL_VERIFYPEER, cfg->insecure ? 0L : 1L);
    opt_long(o, CURLOPT_PROXY_SSL_VERIFYHOST, cfg->insecure ? 0L : 2L);
    if (cfg->ca_file)
        opt_ptr(o, CURLOPT_CAINFO, cfg->ca_file);
    if (cfg->recv_buffer_size)
        opt_long(o, CURLOPT_BUFFERSIZE, (long)cfg->recv_buffer_size);
}

/* The method and the body. */
static void easy_set_method(struct easy_opts *o, const struct http_call_spec *spec,
                            const void *body)
{
    const char *m = spec->method ? spec->method : (spec->body ? "POST" : "GET");
    bool has_body = spec->body != NULL;
    bool is_get = strcmp(m, "GET") == 0, is_post = strcmp(m, "POST") == 0;
    bool is_head = strcmp(m, "HEAD") == 0;

    if (is_head)
        opt_long(o, CURLOPT_NOBODY, 1L);
    if (has_body || is_post) {
        opt_off(o, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)spec->body_len);
        opt_ptr(o, CURLOPT_POSTFIELDS, body ? body : "");
    }
    if ((!is_get && !is_post && !is_head) || (is_get && has_body))
        opt_ptr(o, CURLOPT_CUSTOMREQUEST, m);
}

/* Sets up cc's easy handle. 0, -ENOMEM, -ENOTSUP or -EINVAL. */
static int call_setup_easy(struct hcurl_call *cc, const struct http_call_spec *spec,
                           const void *body)
{
    struct easy_opts o = {.easy = cc->easy, .err = CURLE_OK};

    easy_set_common(&o, cc, spec->url);
    easy_set_method(&o, spec, body);
    if (o.err == CURLE_OK) {
        o.err = curl_easy_setopt(cc->easy, CURLOPT_HEADERFUNCTION, call_on_header);
        if (o.err == CURLE_OK)
            o.err = curl_easy_setopt(cc->easy, CURLOPT_HEADERDATA, &cc->base);
        if (o.err == CURLE_OK)
            o.err = curl_easy_setopt(cc->easy, CURLOPT_WRITEFUNCTION, call_on_write);
        if (o.err == CURLE_OK)
            o.err = curl_easy_setopt(cc->easy, CURLOPT_WRITEDATA, &cc->base);
    }
    if (o.err == CURLE_OK)
        return 0;
    if (o.err == CURLE_OUT_OF_MEMORY)
        return -ENOMEM;
    if (o.err == CURLE_NOT_BUILT_IN || o.err == CURLE_UNKNOWN_OPTION)
        return -ENOTSUP;
    return -EINVAL;
}

/* curl's header list: the caller's headers and, unless one is given, an
 * empty "Expect:" (no 100-continue round trip). */
static size_t header_nodes(const struct hc_request *req)
{
    return req->spec->n_headers + (req->has_expect ? 0 : 1);
}

/* Lays out the header list inside the call block after the struct. */
static void headers_build(struct hcurl_call *cc, const struct hc_request *req)
{
    const struct http_call_spec *spec = req->spec;
    struct curl_slist *nodes = (struct curl_slist *)(cc + 1);
    char *p = (char *)(nodes + header_nodes(req));
    size_t k = 0;

    for (size_t i = 0; i < spec->n_headers; i++, k++) {
        size_t len = strlen(spec->headers[i]);
        memcpy(p, spec->headers[i], len + 1);
        nodes[k].data = p;
        p += len + 1;
    }
    if (!req->has_expect) {
        nodes[k].data = (char *)"Expect:";
        k++;
    }
    for (size_t i = 0; i < k; i++)
        nodes[i].next = i + 1 < k ? &nodes[i + 1] : NULL;
    cc->headers = k ? nodes : NULL;
}

/* ---- the engine's call functions ----------------------------------------- */

static size_t hcurl_call_size(const struct hc_request *req)
{
    return sizeof(struct hcurl_call) + header_nodes(req) * sizeof(struct curl_slist) +
           req->hdr_bytes;
}

static int hcurl_call_start(struct http_call *call, const struct hc_request *req, const void *body)
{
    struct hcurl_call *cc = hcurl_call_of(call);

    headers_build(cc, req);
    cc->easy = curl_easy_init();
    if (!cc->easy)
        return -ENOMEM;
    return call_setup_easy(cc, req->spec, body);
}

static int hcurl_call_launch(struct http_call *call)
{
    struct hcurl_call *cc = hcurl_call_of(call);
    struct hcurl_client *cm = hcurl_of(call->client);

    if (cm->depth > 0) {
        /* Inside curl's callbacks curl_multi_add_handle is refused. */
        cc->deferred_add = true;
        hc_client_defer(call->client, call);
        return 0;
    }
    CURLMcode mc = curl_multi_add_handle(cm->multi, cc->easy);
    if (mc != CURLM_OK)
        return mc == CURLM_OUT_OF_MEMORY ? -ENOMEM : -EIO;
    cc->added = true;
    return 0;
}

/* The add asked for from inside curl's callbacks. */
static void hcurl_call_deferred(struct http_call *call)
{
    struct hcurl_call *cc = hcurl_call_of(call);

    if (!cc->deferred_add)
        return;
    cc->deferred_add = false;
    CURLMcode mc = curl_multi_add_handle(hcurl_of(call->client)->multi, cc->easy);
    if (mc == CURLM_OK) {
        cc->added = true;
        return;
    }
    call->forced = HTTP_CALL_ERR_OTHER;
    call->forced_text = "curl_multi_add_handle failed";
    hc_call_finish(call, CURLE_OK);
}

static void hcurl_call_detach(struct http_call *call)
{
    struct hcurl_call *cc = hcurl_call_of(call);

    if (!cc->added)
        return;
    CURLMcode mc = curl_multi_remove_handle(hcurl_of(call->client)->multi, cc->easy);
    if (mc != CURLM_OK)
        ts_warn("http_client: curl_multi_remove_handle: %s", curl_multi_strerror(mc));
    cc->added = false;
}

static uint64_t info_us_to_ns(CURL *easy, CURLINFO what)
{
    curl_off_t us = 0;
    if (curl_easy_getinfo(easy, what, &us) != CURLE_OK || us < 0)
        return 0;
    return (uint64_t)us * TS_NS_PER_US;
}

static void hcurl_call_result(struct http_call *call, struct http_call_result *res)
{
    CURL *e = hcurl_call_of(call)->easy;

    if (curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &res->status) != CURLE_OK)
        res->status = 0;
    res->dns_ns = info_us_to_ns(e, CURLINFO_NAMELOOKUP_TIME_T);
    res->connect_ns = info_us_to_ns(e, CURLINFO_CONNECT_TIME_T);
    res->tls_ns = info_us_to_ns(e, CURLINFO_APPCONNECT_TIME_T);
    res->pretransfer_ns = info_us_to_ns(e, CURLINFO_PRETRANSFER_TIME_T);
    res->starttransfer_ns = info_us_to_ns(e, CURLINFO_STARTTRANSFER_TIME_T);
    res->total_ns = info_us_to_ns(e, CURLINFO_TOTAL_TIME_T);
    /* No new connection, yet the request got as far as being sent: reused.
     * (curl records at least 1 µs for every phase it reaches.) */
    long nconn = -1;
    if (curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &nconn) != CURLE_OK)
        nconn = -1;
    res->reused = nconn == 0 && res->pretransfer_ns > 0;
}

static void hcurl_call_free(struct http_call *call)
{
    struct hcurl_call *cc = hcurl_call_of(call);

    if (cc->easy)
        curl_easy_cleanup(cc->easy);
    cc->easy = NULL;
}

static const char *hcurl_call_header(struct http_call *call, const char *name)
{
    struct hcurl_call *cc = hcurl_call_of(call);
    struct curl_header *h = NULL;

    if (!cc->easy)
        return NULL;
    if (curl_easy_header(cc->easy, name, 0, CURLH_HEADER, -1, &h) != CURLHE_OK || !h)
        return NULL;
    return h->value;
}

static int hcurl_call_headers_each(struct http_call *call,
                                   int (*fn)(void *ctx, const char *name, const char *value),
                                   void *ctx)
{
    struct hcurl_call *cc = hcurl_call_of(call);
    struct curl_header *h = NULL;

    if (!cc->easy)
        return -EINVAL;
    while ((h = curl_easy_nextheader(cc->easy, CURLH_HEADER, -1, h)) != NULL) {
        int rc = fn(ctx, h->name, h->value);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- the engine's client functions --------------------------------------- */

/* Whether libcurl can do what cfg asks: 0, -EINVAL or -ENOTSUP. */
static int config_check(const struct http_client_config *cfg)
{
    if (cfg->recv_buffer_size &&
        (cfg->recv_buffer_size < 1024 || cfg->recv_buffer_size > CURL_MAX_READ_SIZE))
        return -EINVAL;
    if (cfg->version != HTTP_CLIENT_HTTP1 &&
        !(curl_version_info(CURLVERSION_NOW)->features & CURL_VERSION_HTTP2))
        return -ENOTSUP;
    return 0;
}

struct multi_opts {
    CURLM *multi;
    CURLMcode err;
};

static void mopt_long(struct multi_opts *o, CURLMoption opt, long v)
{
    if (o->err == CURLM_OK)
        o->err = curl_multi_setopt(o->multi, opt, v);
}

/* The multi handle's callbacks and limits. 0, -ENOMEM or -EINVAL. */
static int multi_setup(struct hcurl_client *cm, const struct http_client_config *cfg)
{
    struct multi_opts o = {.multi = cm->multi, .err = CURLM_OK};

    if (o.err == CURLM_OK)
        o.err = curl_multi_setopt(cm->multi, CURLMOPT_SOCKETFUNCTION, client_on_curl_socket);
    if (o.err == CURLM_OK)
        o.err = curl_multi_setopt(cm->multi, CURLMOPT_SOCKETDATA, cm);
    if (o.err == CURLM_OK)
        o.err = curl_multi_setopt(cm->multi, CURLMOPT_TIMERFUNCTION, client_on_curl_timer);
    if (o.err == CURLM_OK)
        o.err = curl_multi_setopt(cm->multi, CURLMOPT_TIMERDATA, cm);
    mopt_long(&o, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    if (cfg->max_connects)
        mopt_long(&o, CURLMOPT_MAXCONNECTS, (long)cfg->max_connects);
    mopt_long(&o, CURLMOPT_MAX_HOST_CONNECTIONS, (long)cfg->max_host_connections);
    mopt_long(&o, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)cfg->max_total_connections);
    if (cfg->max_concurrent_streams)
        mopt_long(&o, CURLMOPT_MAX_CONCURRENT_STREAMS, (long)cfg->max_concurrent_streams);
    if (o.err == CURLM_OK)
        return 0;
    return o.err == CURLM_OUT_OF_MEMORY ? -ENOMEM : -EINVAL;
}

static int hcurl_client_init(struct http_client *c)
{
    struct hcurl_client *cm = NULL;
    int rc;

    rc = config_check(&c->cfg);
    if (rc)
        return rc;
    cm = ts_calloc(1, sizeof(*cm));
    if (!cm)
        return -ENOMEM;
    cm->client = c;
    hc_list_init(&cm->socks);
    cm->multi = curl_multi_init();
    if (!cm->multi) {
        rc = -ENOMEM;
        goto out_free;
    }
    rc = multi_setup(cm, &c->cfg);
    if (rc)
        goto out_multi;
    /* Neither init can fail on a valid loop (they only link the handle). */
    rc = uv_timer_init(c->loop, &cm->timer);
    if (rc)
        goto out_multi;
    (void)uv_prepare_init(c->loop, &cm->prepare); /* cannot fail either */
    cm->timer.data = cm;
    cm->prepare.data = cm;
    c->open_handles += 2;
    if (c->cfg.rx_timestamps) {
        (void)uv_prepare_start(&cm->prepare, client_on_prepare);
        uv_unref((uv_handle_t *)&cm->prepare); /* it alone does not keep the loop alive */
    }
    c->engine_state[HC_ENGINE_CURL] = cm;
    return 0;

out_multi:
    curl_multi_cleanup(cm->multi);
out_free:
    ts_free(cm);
    return rc;
}

/* Drops curl (closing cached connections) and closes every uv handle. */
static void hcurl_client_close(struct http_client *c)
{
    struct hcurl_client *cm = hcurl_of(c);

    curl_multi_cleanup(cm->multi);
    cm->multi = NULL;
    while (!hc_list_empty(&cm->socks))
        sock_close(CONTAINER_OF(cm->socks.next, struct sock_ctx, link));
    uv_close((uv_handle_t *)&cm->timer, cm_on_handle_closed);
    uv_close((uv_handle_t *)&cm->prepare, cm_on_handle_closed);
}

static void hcurl_client_free(struct http_client *c)
{
    ts_free(hcurl_of(c));
    c->engine_state[HC_ENGINE_CURL] = NULL;
}

const struct http_engine_ops http_engine_curl = {
    .name = "curl",
    .call_struct_size = sizeof(struct hcurl_call),
    .shapes_sends = false,
    .client_init = hcurl_client_init,
    .client_close = hcurl_client_close,
    .client_free = hcurl_client_free,
    .route = NULL, /* takes every call */
    .call_size = hcurl_call_size,
    .call_start = hcurl_call_start,
    .call_launch = hcurl_call_launch,
    .call_deferred = hcurl_call_deferred,
    .call_connecting = NULL, /* curl's own CURLOPT_CONNECTTIMEOUT_MS */
    .call_detach = hcurl_call_detach,
    .call_result = hcurl_call_result,
    .call_free = hcurl_call_free,
    .call_header = hcurl_call_header,
    .call_headers_each = hcurl_call_headers_each,
};
