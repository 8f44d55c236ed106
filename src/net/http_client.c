/*
 * http_client.c - libcurl multi on libuv (the multi-uv.c pattern), with own
 * per-call timers for the time-to-first-byte, idle and total timeouts.
 *
 * Re-entrancy rules this file keeps:
 * - curl_multi_add_handle/remove_handle/easy_cleanup are never called while
 *   curl_multi_socket_action runs (c->depth > 0), i.e. never from curl's
 *   header/write callbacks. Work asked for there (cancel, a new request,
 *   close) is queued on c->deferred and done by the uv_idle handle on the
 *   next loop iteration.
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
 * 13 KiB. This layer's share is one block: struct http_call (584 bytes, of
 * which 256 are curl's error buffer) plus the copied headers, and a 192-byte
 * sock_ctx per socket; the rest is curl's easy handle, the connection and the
 * stored response headers. Kernel socket buffers come on top.
 */
#include "net/http_client.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
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

struct sock_ctx {
    uv_poll_t poll;
    curl_socket_t fd;
    struct http_client *client;
    struct http_client_list link; /* in client->socks */
};

static const char *const error_names[] = {
    [HTTP_CALL_OK] = "none",
    [HTTP_CALL_ERR_CONNECT] = "connect",
    [HTTP_CALL_ERR_DNS] = "dns",
    [HTTP_CALL_ERR_TLS] = "tls",
    [HTTP_CALL_ERR_TIMEOUT_CONNECT] = "timeout_connect",
    [HTTP_CALL_ERR_TIMEOUT_TTFB] = "timeout_ttfb",
    [HTTP_CALL_ERR_TIMEOUT_IDLE] = "timeout_idle",
    [HTTP_CALL_ERR_TIMEOUT_TOTAL] = "timeout_total",
    [HTTP_CALL_ERR_SEND] = "send",
    [HTTP_CALL_ERR_RECV] = "recv",
    [HTTP_CALL_ERR_ABORTED] = "aborted",
    [HTTP_CALL_ERR_OTHER] = "other",
};

const char *http_call_error_name(enum http_call_error e)
{
    if ((unsigned)e >= sizeof(error_names) / sizeof(error_names[0]))
        return "unknown";
    return error_names[e];
}

/* Maps a curl result to our class. CURLE_OPERATION_TIMEDOUT can only come
 * from the connect timeout: the other timeouts are ours, not curl's. */
static enum http_call_error classify_curl_code(CURLcode code)
{
    switch (code) {
    case CURLE_OK:
        return HTTP_CALL_OK;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return HTTP_CALL_ERR_DNS;
    case CURLE_COULDNT_CONNECT:
        return HTTP_CALL_ERR_CONNECT;
    case CURLE_OPERATION_TIMEDOUT:
        return HTTP_CALL_ERR_TIMEOUT_CONNECT;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_CLIENTCERT:
    case CURLE_USE_SSL_FAILED:
        return HTTP_CALL_ERR_TLS;
    case CURLE_SEND_ERROR:
        return HTTP_CALL_ERR_SEND;
    case CURLE_RECV_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return HTTP_CALL_ERR_RECV;
    case CURLE_WRITE_ERROR:
    case CURLE_ABORTED_BY_CALLBACK:
        return HTTP_CALL_ERR_ABORTED;
    default:
        return HTTP_CALL_ERR_OTHER;
    }
}

void http_client_config_default(struct http_client_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->connect_timeout_ms = 10000;
    cfg->version = HTTP_CLIENT_HTTP1;
    cfg->max_connects = 16384; /* more than the streams one worker holds */
}

int http_client_global_init(void)
{
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -EIO;
}

void http_client_global_cleanup(void)
{
    curl_global_cleanup();
}

/* ---- handle accounting and close ---------------------------------------- */

void hc_client_handle_closed(struct http_client *c)
{
    c->open_handles--;
    if (c->handles_closing && c->open_handles == 0 && c->on_closed)
        c->on_closed(c, c->closed_arg); /* c may be gone after this */
}

static void client_on_handle_closed(uv_handle_t *h)
{
    hc_client_handle_closed(h->data);
}

static void sock_on_closed(uv_handle_t *h)
{
    struct sock_ctx *sc = h->data;
    struct http_client *c = sc->client;
    ts_free(sc);
    hc_client_handle_closed(c);
}

static void sock_close(struct sock_ctx *sc)
{
    hc_list_remove(&sc->link);
    /* uv_close stops the poll at once, so curl may reuse the fd number. */
    uv_close((uv_handle_t *)&sc->poll, sock_on_closed);
}

/* All calls are finished: drop curl (closing cached connections) and close
 * every uv handle; on_closed runs from the last close callback. */
static void client_close_handles(struct http_client *c)
{
    c->handles_closing = true;
    curl_multi_cleanup(c->multi);
    c->multi = NULL;
    h1_client_close(c);
    while (!hc_list_empty(&c->socks))
        sock_close(CONTAINER_OF(c->socks.next, struct sock_ctx, link));
    uv_close((uv_handle_t *)&c->timer, client_on_handle_closed);
    uv_close((uv_handle_t *)&c->idle, client_on_handle_closed);
    uv_close((uv_handle_t *)&c->prepare, client_on_handle_closed);
}

/* ---- calls: timers, result, finish --------------------------------------- */

static void call_on_closed(uv_handle_t *h)
{
    struct http_call *call = h->data;
    struct http_client *c = call->client;
    ts_free(call);
    hc_client_handle_closed(c);
}

static uint64_t call_deadline(const struct http_call *call)
{
    uint64_t d = UINT64_MAX;
    if (call->total_ms)
        d = call->start_ns + call->total_ms * TS_NS_PER_MS;
    if (call->h1 && call->connect_ms && !call->h1_connect_ns &&
        call->start_ns + call->connect_ms * TS_NS_PER_MS < d)
        d = call->start_ns + call->connect_ms * TS_NS_PER_MS;
    if (!call->first_rx_ns) {
        if (call->ttfb_ms && call->start_ns + call->ttfb_ms * TS_NS_PER_MS < d)
            d = call->start_ns + call->ttfb_ms * TS_NS_PER_MS;
    } else if (call->idle_ms && call->last_rx_ns + call->idle_ms * TS_NS_PER_MS < d) {
        d = call->last_rx_ns + call->idle_ms * TS_NS_PER_MS;
    }
    return d;
}

static void call_on_timer(uv_timer_t *t);

/* (Re)starts the call's timer for its nearest deadline. The timer may fire
 * early (loop time lags, idle was extended); call_on_timer then re-arms. */
void hc_call_arm_timer(struct http_call *call, uint64_t now)
{
    uint64_t d = call_deadline(call);
    if (d == UINT64_MAX) {
        uv_timer_stop(&call->timer);
        return;
    }
    uint64_t ms = d > now ? (d - now + TS_NS_PER_MS - 1) / TS_NS_PER_MS : 0;
    int rc = uv_timer_start(&call->timer, call_on_timer, ms, 0);
    if (rc)
        ts_warn("http_client: uv_timer_start: %s", uv_strerror(rc));
}

static uint64_t info_us_to_ns(CURL *easy, CURLINFO what)
{
    curl_off_t us = 0;
    if (curl_easy_getinfo(easy, what, &us) != CURLE_OK || us < 0)
        return 0;
    return (uint64_t)us * TS_NS_PER_US;
}

static void call_fill_result(struct http_call *call, CURLcode code, struct http_call_result *res)
{
    CURL *e = call->easy;
    memset(res, 0, sizeof(*res));
    res->error = call->forced != HTTP_CALL_OK ? call->forced : classify_curl_code(code);
    res->curl_code = (int)code;
    res->bytes = call->bytes;
    res->start_ns = call->start_ns;
    res->first_rx_ns = call->first_rx_ns;
    res->headers_ns = call->headers_ns;
    res->first_byte_ns = call->first_byte_ns;
    res->last_byte_ns = call->last_byte_ns;
    res->end_ns = ts_now_ns();
    if (call->h1) {
        h1_fill_result(call, res);
    } else {
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

    switch (call->forced) {
    case HTTP_CALL_OK:
        if (code != CURLE_OK && !call->errbuf[0])
            snprintf(call->errbuf, sizeof(call->errbuf), "%s", curl_easy_strerror(code));
        break;
    case HTTP_CALL_ERR_TIMEOUT_TTFB:
        snprintf(call->errbuf, sizeof(call->errbuf),
                 "no response within %u ms (time-to-first-byte timeout)", call->ttfb_ms);
        break;
    case HTTP_CALL_ERR_TIMEOUT_IDLE:
        snprintf(call->errbuf, sizeof(call->errbuf), "no data for %u ms (idle timeout)",
                 call->idle_ms);
        break;
    case HTTP_CALL_ERR_TIMEOUT_TOTAL:
        snprintf(call->errbuf, sizeof(call->errbuf), "not done within %u ms (total timeout)",
                 call->total_ms);
        break;
    case HTTP_CALL_ERR_ABORTED:
        snprintf(call->errbuf, sizeof(call->errbuf), "aborted");
        break;
    case HTTP_CALL_ERR_TIMEOUT_CONNECT:
        snprintf(call->errbuf, sizeof(call->errbuf), "Connection timed out after %u milliseconds",
                 call->connect_ms);
        break;
    default:
        snprintf(call->errbuf, sizeof(call->errbuf), "%s",
                 call->forced_text ? call->forced_text : "failed");
        break;
    }
    if (code == CURLE_OK && call->forced == HTTP_CALL_OK)
        call->errbuf[0] = '\0';
    res->error_text = call->errbuf;
}

/* Ends a call: on_done, then the easy handle goes, then the call memory (in
 * its timer's close callback). Only at depth 0. */
void hc_call_finish(struct http_call *call, CURLcode code)
{
    struct http_client *c = call->client;
    struct http_call_result res;

    if (call->finished)
        return;
    call->finished = true;
    hc_list_remove(&call->link);
    hc_list_remove(&call->defer_link);
    c->n_calls--;
    uv_timer_stop(&call->timer);
    if (call->h1)
        h1_call_release(call);
    if (call->added) {
        CURLMcode mc = curl_multi_remove_handle(c->multi, call->easy);
        if (mc != CURLM_OK)
            ts_warn("http_client: curl_multi_remove_handle: %s", curl_multi_strerror(mc));
        call->added = false;
    }
    call_fill_result(call, code, &res);
    call->ops.on_done(call, &res, call->user);
    if (call->easy)
        curl_easy_cleanup(call->easy);
    call->easy = NULL;
    if (call->h1) {
        ts_free(call->h1_req);
        call->h1_req = NULL;
        buf_release(&call->h1_rh);
    }
    uv_close((uv_handle_t *)&call->timer, call_on_closed);
}

static void call_on_timer(uv_timer_t *t)
{
    struct http_call *call = t->data;
    uint64_t now = ts_now_ns();
    enum http_call_error e = HTTP_CALL_OK;

    if (call->total_ms && now >= call->start_ns + call->total_ms * TS_NS_PER_MS)
        e = HTTP_CALL_ERR_TIMEOUT_TOTAL;
    else if (call->h1 && call->connect_ms && !call->h1_connect_ns &&
             now >= call->start_ns + call->connect_ms * TS_NS_PER_MS)
        e = HTTP_CALL_ERR_TIMEOUT_CONNECT;
    else if (!call->first_rx_ns && call->ttfb_ms &&
             now >= call->start_ns + call->ttfb_ms * TS_NS_PER_MS)
        e = HTTP_CALL_ERR_TIMEOUT_TTFB;
    else if (call->first_rx_ns && call->idle_ms &&
             now >= call->last_rx_ns + call->idle_ms * TS_NS_PER_MS)
        e = HTTP_CALL_ERR_TIMEOUT_IDLE;
    if (e == HTTP_CALL_OK) {
        hc_call_arm_timer(call, now);
        return;
    }
    if (call->forced == HTTP_CALL_OK)
        call->forced = e;
    /* the own engine's connect timeout is curl's on the curl engine: its code */
    hc_call_finish(call, e == HTTP_CALL_ERR_TIMEOUT_CONNECT ? CURLE_OPERATION_TIMEDOUT : CURLE_OK);
}

static void client_on_idle(uv_idle_t *h);

/* Queues deferred work for call (a cancel, or the add). */
void hc_client_defer(struct http_client *c, struct http_call *call)
{
    if (hc_list_empty(&call->defer_link))
        hc_list_add_tail(&c->deferred, &call->defer_link);
    int rc = uv_idle_start(&c->idle, client_on_idle);
    if (rc)
        ts_warn("http_client: uv_idle_start: %s", uv_strerror(rc));
}

static void client_on_idle(uv_idle_t *h)
{
    struct http_client *c = h->data;

    while (!hc_list_empty(&c->deferred)) {
        struct http_call *call = CONTAINER_OF(c->deferred.next, struct http_call, defer_link);
        hc_list_remove(&call->defer_link);
        if (call->forced != HTTP_CALL_OK) {
            hc_call_finish(call, CURLE_OK);
        } else if (call->h1_failed) {
            hc_call_finish(call, call->h1_code);
        } else if (call->deferred_add) {
            call->deferred_add = false;
            CURLMcode mc = curl_multi_add_handle(c->multi, call->easy);
            if (mc == CURLM_OK) {
                call->added = true;
            } else {
                call->forced = HTTP_CALL_ERR_OTHER;
                call->forced_text = "curl_multi_add_handle failed";
                hc_call_finish(call, CURLE_OK);
            }
        }
    }
    uv_idle_stop(&c->idle);
    if (c->closing && c->n_calls == 0 && !c->handles_closing)
        client_close_handles(c);
}

/* ---- the multi-uv glue ---------------------------------------------------- */

static void client_check_multi_info(struct http_client *c)
{
    CURLMsg *msg;
    int pending;

    while ((msg = curl_multi_info_read(c->multi, &pending))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        CURLcode code = msg->data.result;
        char *priv = NULL;
        if (curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv) != CURLE_OK || !priv)
            continue;
        hc_call_finish((struct http_call *)priv, code);
    }
}

static void client_socket_action(struct http_client *c, curl_socket_t fd, int flags)
{
    int running;

    c->depth++;
    CURLMcode mc = curl_multi_socket_action(c->multi, fd, flags, &running);
    c->depth--;
    if (mc != CURLM_OK)
        ts_warn("http_client: curl_multi_socket_action: %s", curl_multi_strerror(mc));
    client_check_multi_info(c);
}

static void client_on_uv_timer(uv_timer_t *t)
{
    struct http_client *c = t->data;
    uint64_t now = uv_now(c->loop);

    if (now == c->timer_fired_at) {
        c->timer_streak++;
    } else {
        c->timer_streak = 0;
        c->timer_fired_at = now;
    }
    client_socket_action(c, CURL_SOCKET_TIMEOUT, 0);
}

/* CURLMOPT_TIMERFUNCTION: curl wants socket_action(TIMEOUT) in timeout_ms. */
static int client_on_curl_timer(CURLM *multi, long timeout_ms, void *userp)
{
    struct http_client *c = userp;

    if (c->handles_closing)
        return 0;
    if (timeout_ms < 0) {
        uv_timer_stop(&c->timer);
        return 0;
    }
    if (timeout_ms == 0 && c->timer_streak >= ZERO_TIMER_STREAK_MAX)
        timeout_ms = 1;
    /* 0 is fine: libuv runs it on the next loop iteration, never in here. */
    return uv_timer_start(&c->timer, client_on_uv_timer, (uint64_t)timeout_ms, 0) ? -1 : 0;
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
    struct iovec iov = {c->peek, sizeof(c->peek)};
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
    return hc_msg_stamp(&msg);
}

uint64_t hc_msg_stamp(const struct msghdr *msg)
{
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(msg); cm; cm = CMSG_NXTHDR((struct msghdr *)msg, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_TIMESTAMPNS)
            continue;
        struct timespec ts;
        memcpy(&ts, CMSG_DATA(cm), sizeof(ts));
        uint64_t real = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        uint64_t mono = ts_now_ns(), wall = ts_wall_ns();
        if (real > wall || wall - real > mono)
            return 0; /* the clocks moved: do not trust it */
        return mono - (wall - real);
    }
    return 0;
}

/* Right before the loop polls: a new poll pass begins. */
static void client_on_prepare(uv_prepare_t *h)
{
    struct http_client *c = h->data;
    c->prepare_ns = ts_now_ns();
    c->pass_ns = 0;
}

/*
 * Whether a socket's read time may be late: the read is timed by the clock
 * unless this pass began with a poll that waited (the data woke the loop)
 * and the pass is young, so nothing was read long after it arrived. The
 * peek costs a syscall; this keeps it to bursts and busy loops.
 */
#define RX_FRESH_NS (50 * TS_NS_PER_US)
static bool rx_may_be_late(struct http_client *c)
{
    uint64_t now = ts_now_ns();
    if (!c->pass_ns) {
        c->pass_ns = now;
        c->pass_waited = c->prepare_ns && now - c->prepare_ns > RX_FRESH_NS;
    }
    return !c->pass_waited || now - c->pass_ns > RX_FRESH_NS;
}

static void sock_on_poll(uv_poll_t *h, int status, int events)
{
    struct sock_ctx *sc = h->data;
    int flags = 0;

    if (sc->client->cfg.rx_timestamps && status >= 0 && (events & UV_READABLE) &&
        rx_may_be_late(sc->client)) {
        sc->client->rx_stamp_ns = sock_rx_stamp(sc->client, sc->fd);
        sc->client->rx_stamp_owner = NULL;
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
    struct http_client *c = sc->client;
    client_socket_action(c, sc->fd, flags); /* may free sc */
    c->rx_stamp_ns = 0;
    c->rx_stamp_owner = NULL;
    hc_between_reads(c);
}

void hc_between_reads(struct http_client *c)
{
    if (c->cfg.between_reads && !c->closing) {
        uint64_t now = ts_now_ns();
        if (now - c->between_ns >= 100 * TS_NS_PER_US) {
            c->between_ns = now;
            c->cfg.between_reads(c->cfg.between_reads_arg);
        }
    }
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
    struct http_client *c = call->client;
    uint64_t now = ts_now_ns();
    if (!c->rx_stamp_ns || c->rx_stamp_ns > now)
        return now;
    if (!c->rx_stamp_owner)
        c->rx_stamp_owner = call;
    return c->rx_stamp_owner == call ? c->rx_stamp_ns : now;
}

static struct sock_ctx *sock_new(struct http_client *c, curl_socket_t fd)
{
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
    sc->client = c;
    if (c->cfg.rx_timestamps) {
        int on = 1;
        if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)))
            ts_debug("http_client: SO_TIMESTAMPNS: %s", strerror(errno));
    }
    hc_list_add_tail(&c->socks, &sc->link);
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
    struct http_client *c = userp;
    struct sock_ctx *sc = socketp;

    if (what == CURL_POLL_REMOVE) {
        if (sc)
            sock_close(sc);
        return 0;
    }
    if (c->handles_closing)
        return 0;
    if (!sc) {
        sc = sock_new(c, s);
        if (!sc)
            goto fail;
        if (curl_multi_assign(c->multi, s, sc) != CURLM_OK) {
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
    client_fail_easy(c, easy);
    return -1;
}

/* ---- curl callbacks of a call ------------------------------------------- */

static bool is_blank_line(const char *buf, size_t len)
{
    return (len == 2 && buf[0] == '\r' && buf[1] == '\n') || (len == 1 && buf[0] == '\n');
}

void hc_call_rx(struct http_call *call, uint64_t now)
{
    call->last_rx_ns = now;
    if (!call->first_rx_ns) {
        call->first_rx_ns = now;
        hc_call_arm_timer(call, now); /* from the ttfb to the idle deadline */
    }
}

void hc_call_headers(struct http_call *call, long status, uint64_t now)
{
    call->headers_done = true;
    call->headers_ns = now;
    if (call->ops.on_headers)
        call->ops.on_headers(call, status, call->user);
}

int hc_call_body(struct http_call *call, const char *data, size_t len, uint64_t now)
{
    if (call->forced != HTTP_CALL_OK)
        return 1;
    call->last_rx_ns = now;
    if (!call->first_byte_ns)
        call->first_byte_ns = now;
    call->last_byte_ns = now;
    call->bytes += len;
    if (call->ops.on_body && call->ops.on_body(call, data, len, now, call->user) != 0) {
        if (call->forced == HTTP_CALL_OK)
            call->forced = HTTP_CALL_ERR_ABORTED;
    }
    return call->forced != HTTP_CALL_OK;
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
    if (curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK)
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

static uint32_t pick_timeout(uint32_t per_call, uint32_t client)
{
    uint32_t v = per_call ? per_call : client;
    return v == HTTP_CALL_TIMEOUT_NONE ? 0 : v;
}

/* A method is an HTTP token: letters, digits and a few marks, at most 32. */
static bool method_valid(const char *m)
{
    size_t n = strlen(m);
    if (n == 0 || n > 32)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = m[i];
        bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                  (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.';
        if (!ok)
            return false;
    }
    return true;
}

static int call_setup_easy(struct http_call *call, const struct http_call_spec *spec,
                           const void *body, uint32_t connect_ms)
{
    const struct http_client_config *cfg = &call->client->cfg;
    struct easy_opts o = {.easy = call->easy, .err = CURLE_OK};
    const char *m = spec->method ? spec->method : (spec->body ? "POST" : "GET");
    bool has_body = spec->body != NULL;
    bool is_get = strcmp(m, "GET") == 0, is_post = strcmp(m, "POST") == 0;
    bool is_head = strcmp(m, "HEAD") == 0;
    long version = CURL_HTTP_VERSION_1_1;

    if (cfg->version == HTTP_CLIENT_HTTP2_TLS)
        version = CURL_HTTP_VERSION_2TLS;
    else if (cfg->version == HTTP_CLIENT_HTTP2_PRIOR)
        version = CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE;

    opt_ptr(&o, CURLOPT_PRIVATE, call);
    opt_ptr(&o, CURLOPT_URL, spec->url);
    opt_ptr(&o, CURLOPT_PROTOCOLS_STR, "http,https");
    opt_long(&o, CURLOPT_NOSIGNAL, 1L);
    opt_long(&o, CURLOPT_TCP_NODELAY, 1L);
    opt_ptr(&o, CURLOPT_USERAGENT, HTTP_CLIENT_USER_AGENT);
    opt_ptr(&o, CURLOPT_HTTPHEADER, call->headers);
    opt_ptr(&o, CURLOPT_ERRORBUFFER, call->errbuf);
    opt_long(&o, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
    opt_long(&o, CURLOPT_CONNECTTIMEOUT_MS, (long)connect_ms);
    opt_long(&o, CURLOPT_HTTP_VERSION, version);
    if (cfg->version != HTTP_CLIENT_HTTP1)
        opt_long(&o, CURLOPT_PIPEWAIT, 1L);
    opt_long(&o, CURLOPT_SSL_VERIFYPEER, cfg->insecure ? 0L : 1L);
    opt_long(&o, CURLOPT_SSL_VERIFYHOST, cfg->insecure ? 0L : 2L);
    opt_long(&o, CURLOPT_PROXY_SSL_VERIFYPEER, cfg->insecure ? 0L : 1L);
    opt_long(&o, CURLOPT_PROXY_SSL_VERIFYHOST, cfg->insecure ? 0L : 2L);
    if (cfg->ca_file)
        opt_ptr(&o, CURLOPT_CAINFO, cfg->ca_file);
    if (cfg->recv_buffer_size)
        opt_long(&o, CURLOPT_BUFFERSIZE, (long)cfg->recv_buffer_size);
    if (is_head)
        opt_long(&o, CURLOPT_NOBODY, 1L);
    if (has_body || is_post) {
        opt_off(&o, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)spec->body_len);
        opt_ptr(&o, CURLOPT_POSTFIELDS, body ? body : "");
    }
    if ((!is_get && !is_post && !is_head) || (is_get && has_body))
        opt_ptr(&o, CURLOPT_CUSTOMREQUEST, m);
    if (o.err == CURLE_OK) {
        o.err = curl_easy_setopt(call->easy, CURLOPT_HEADERFUNCTION, call_on_header);
        if (o.err == CURLE_OK)
            o.err = curl_easy_setopt(call->easy, CURLOPT_HEADERDATA, call);
        if (o.err == CURLE_OK)
            o.err = curl_easy_setopt(call->easy, CURLOPT_WRITEFUNCTION, call_on_write);
        if (o.err == CURLE_OK)
            o.err = curl_easy_setopt(call->easy, CURLOPT_WRITEDATA, call);
    }
    if (o.err == CURLE_OK)
        return 0;
    if (o.err == CURLE_OUT_OF_MEMORY)
        return -ENOMEM;
    if (o.err == CURLE_NOT_BUILT_IN || o.err == CURLE_UNKNOWN_OPTION)
        return -ENOTSUP;
    return -EINVAL;
}

/* Checks the request headers; returns 0 with their total size (strings
 * plus NULs) and whether one is an Expect header, or an error. */
static int headers_check(const struct http_call_spec *spec, size_t *bytes, bool *has_expect)
{
    *bytes = 0;
    *has_expect = false;
    if (spec->n_headers && !spec->headers)
        return -EINVAL;
    if (spec->n_headers > HTTP_CALL_MAX_HEADERS)
        return TS_TOOBIG;
    for (size_t i = 0; i < spec->n_headers; i++) {
        const char *h = spec->headers[i];
        if (!h)
            return -EINVAL;
        size_t name = strcspn(h, ":;\r\n");
        if (name == 0 || (h[name] != ':' && h[name] != ';') || strpbrk(h, "\r\n"))
            return -EINVAL;
        if (name == 6 && strncasecmp(h, "Expect", 6) == 0)
            *has_expect = true;
        *bytes += strlen(h) + 1;
        if (*bytes > HTTP_CALL_MAX_HEADER_BYTES)
            return TS_TOOBIG;
    }
    return 0;
}

/* Lays out the header list inside the call block after the struct. Returns
 * where the bytes after it start. */
static char *headers_build(struct http_call *call, const struct http_call_spec *spec,
                           size_t n_nodes, bool has_expect)
{
    struct curl_slist *nodes = (struct curl_slist *)(call + 1);
    char *p = (char *)(nodes + n_nodes);
    size_t k = 0;

    for (size_t i = 0; i < spec->n_headers; i++, k++) {
        size_t len = strlen(spec->headers[i]);
        memcpy(p, spec->headers[i], len + 1);
        nodes[k].data = p;
        p += len + 1;
    }
    if (!has_expect) {
        nodes[k].data = (char *)"Expect:";
        k++;
    }
    for (size_t i = 0; i < k; i++)
        nodes[i].next = i + 1 < k ? &nodes[i + 1] : NULL;
    call->headers = k ? nodes : NULL;
    return p;
}

int http_client_request(struct http_client *c, const struct http_call_spec *spec,
                        const struct http_call_ops *ops, void *user, struct http_call **out)
{
    size_t hdr_bytes;
    bool has_expect;
    int rc;

    if (out)
        *out = NULL;
    if (!c || !spec || !spec->url || !ops || !ops->on_done || (spec->body_len && !spec->body))
        return -EINVAL;
    if (spec->method && !method_valid(spec->method))
        return -EINVAL;
    if (c->closing)
        return TS_CLOSED;
    rc = headers_check(spec, &hdr_bytes, &has_expect);
    if (rc)
        return rc;
    bool h1 = h1_eligible(c, spec);
    if (!h1 && spec->send_shaper)
        return -ENOTSUP; /* only the own HTTP/1.1 engine shapes what it sends */

    /* curl's header list lives in the block; the own engine writes its request
     * head from spec->headers directly */
    size_t n_nodes = h1 ? 0 : spec->n_headers + (has_expect ? 0 : 1);
    size_t fixed =
        sizeof(struct http_call) + (h1 ? 0 : n_nodes * sizeof(struct curl_slist) + hdr_bytes);
    size_t body_copy = spec->copy_body && spec->body ? spec->body_len : 0;
    if (body_copy > SIZE_MAX - fixed)
        return -ENOMEM;
    struct http_call *call = ts_malloc(fixed + body_copy);
    if (!call)
        return -ENOMEM;
    memset(call, 0, sizeof(*call));
    call->client = c;
    call->ops = *ops;
    call->user = user;
    hc_list_init(&call->link);
    hc_list_init(&call->defer_link);
    char *after = h1 ? (char *)(call + 1) : headers_build(call, spec, n_nodes, has_expect);
    const void *body = spec->body;
    if (body_copy) {
        memcpy(after, spec->body, body_copy);
        body = after;
    }
    call->ttfb_ms = pick_timeout(spec->ttfb_timeout_ms, c->cfg.ttfb_timeout_ms);
    call->idle_ms = pick_timeout(spec->idle_timeout_ms, c->cfg.idle_timeout_ms);
    call->total_ms = pick_timeout(spec->total_timeout_ms, c->cfg.total_timeout_ms);
    call->connect_ms = pick_timeout(spec->connect_timeout_ms, c->cfg.connect_timeout_ms);

    if (h1) {
        rc = h1_start(call, spec, body);
    } else {
        call->easy = curl_easy_init();
        rc = call->easy ? call_setup_easy(call, spec, body, call->connect_ms) : -ENOMEM;
    }
    if (!rc)
        rc = uv_timer_init(c->loop, &call->timer);
    if (rc)
        goto out_drop;
    call->timer.data = call;
    c->open_handles++;

    call->start_ns = ts_now_ns();
    if (h1) {
        /* below: h1_launch, once the call is registered */
    } else if (c->depth > 0) {
        /* Inside curl's callbacks curl_multi_add_handle is refused. */
        call->deferred_add = true;
        hc_client_defer(c, call);
    } else {
        CURLMcode mc = curl_multi_add_handle(c->multi, call->easy);
        if (mc != CURLM_OK) {
            rc = mc == CURLM_OUT_OF_MEMORY ? -ENOMEM : -EIO;
            curl_easy_cleanup(call->easy);
            uv_close((uv_handle_t *)&call->timer, call_on_closed); /* frees call */
            return rc;
        }
        call->added = true;
    }
    hc_list_add_tail(&c->calls, &call->link);
    c->n_calls++;
    hc_call_arm_timer(call, call->start_ns);
    if (h1)
        h1_launch(call);
    if (out)
        *out = call;
    return 0;

out_drop:
    if (call->easy)
        curl_easy_cleanup(call->easy);
    if (call->h1) {
        ts_free(call->h1_req);
        buf_release(&call->h1_rh);
        call->h1_shaped = false; /* the caller keeps the shaper's ctx */
        if (call->h1_host)
            h1_call_release(call);
    }
    ts_free(call);
    return rc;
}

void http_call_cancel(struct http_call *call)
{
    if (!call || call->finished)
        return;
    if (call->forced == HTTP_CALL_OK)
        call->forced = HTTP_CALL_ERR_ABORTED;
    hc_client_defer(call->client, call);
}

const char *http_call_header(struct http_call *call, const char *name)
{
    struct curl_header *h = NULL;

    if (!call || !name)
        return NULL;
    if (call->h1)
        return h1_header(call, name);
    if (!call->easy)
        return NULL;
    if (curl_easy_header(call->easy, name, 0, CURLH_HEADER, -1, &h) != CURLHE_OK || !h)
        return NULL;
    return h->value;
}

int http_call_headers_each(struct http_call *call,
                           int (*fn)(void *ctx, const char *name, const char *value), void *ctx)
{
    struct curl_header *h = NULL;

    if (!call || !fn)
        return -EINVAL;
    if (call->h1)
        return h1_headers_each(call, fn, ctx);
    if (!call->easy)
        return -EINVAL;
    while ((h = curl_easy_nextheader(call->easy, CURLH_HEADER, -1, h)) != NULL) {
        int rc = fn(ctx, h->name, h->value);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- client --------------------------------------------------------------- */

struct multi_opts {
    CURLM *multi;
    CURLMcode err;
};

static void mopt_long(struct multi_opts *o, CURLMoption opt, long v)
{
    if (o->err == CURLM_OK)
        o->err = curl_multi_setopt(o->multi, opt, v);
}

int http_client_init(struct http_client *c, uv_loop_t *loop, const struct http_client_config *cfg)
{
    struct http_client_config def;
    int rc;

    if (!c || !loop)
        return -EINVAL;
    if (!cfg) {
        http_client_config_default(&def);
        cfg = &def;
    }
    if ((unsigned)cfg->version > HTTP_CLIENT_HTTP2_PRIOR)
        return -EINVAL;
    if (cfg->recv_buffer_size &&
        (cfg->recv_buffer_size < 1024 || cfg->recv_buffer_size > CURL_MAX_READ_SIZE))
        return -EINVAL;
    if (cfg->version != HTTP_CLIENT_HTTP1 &&
        !(curl_version_info(CURLVERSION_NOW)->features & CURL_VERSION_HTTP2))
        return -ENOTSUP;

    memset(c, 0, sizeof(*c));
    c->loop = loop;
    c->cfg = *cfg;
    hc_list_init(&c->calls);
    hc_list_init(&c->deferred);
    hc_list_init(&c->socks);
    h1_client_init(c);
    c->multi = curl_multi_init();
    if (!c->multi)
        return -ENOMEM;

    struct multi_opts o = {.multi = c->multi, .err = CURLM_OK};
    if (o.err == CURLM_OK)
        o.err = curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, client_on_curl_socket);
    if (o.err == CURLM_OK)
        o.err = curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    if (o.err == CURLM_OK)
        o.err = curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, client_on_curl_timer);
    if (o.err == CURLM_OK)
        o.err = curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    mopt_long(&o, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    if (cfg->max_connects)
        mopt_long(&o, CURLMOPT_MAXCONNECTS, (long)cfg->max_connects);
    mopt_long(&o, CURLMOPT_MAX_HOST_CONNECTIONS, (long)cfg->max_host_connections);
    mopt_long(&o, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)cfg->max_total_connections);
    if (cfg->max_concurrent_streams)
        mopt_long(&o, CURLMOPT_MAX_CONCURRENT_STREAMS, (long)cfg->max_concurrent_streams);
    if (o.err != CURLM_OK) {
        rc = o.err == CURLM_OUT_OF_MEMORY ? -ENOMEM : -EINVAL;
        goto out_multi;
    }

    /* Neither init can fail on a valid loop (they only link the handle). */
    rc = uv_timer_init(loop, &c->timer);
    if (rc)
        goto out_multi;
    rc = uv_idle_init(loop, &c->idle);
    if (rc) {
        uv_close((uv_handle_t *)&c->timer, NULL);
        goto out_multi;
    }
    (void)uv_prepare_init(loop, &c->prepare); /* cannot fail either */
    c->timer.data = c;
    c->idle.data = c;
    c->prepare.data = c;
    c->open_handles = 3;
    if (c->cfg.rx_timestamps) {
        (void)uv_prepare_start(&c->prepare, client_on_prepare);
        uv_unref((uv_handle_t *)&c->prepare); /* it alone does not keep the loop alive */
    }
    return 0;

out_multi:
    curl_multi_cleanup(c->multi);
    c->multi = NULL;
    return rc;
}

void http_client_close(struct http_client *c, void (*on_closed)(struct http_client *c, void *arg),
                       void *arg)
{
    if (!c || c->closing)
        return;
    c->closing = true;
    c->on_closed = on_closed;
    c->closed_arg = arg;
    for (struct http_client_list *n = c->calls.next; n != &c->calls; n = n->next)
        http_call_cancel(CONTAINER_OF(n, struct http_call, link));
    int rc = uv_idle_start(&c->idle, client_on_idle);
    if (rc)
        ts_warn("http_client: uv_idle_start: %s", uv_strerror(rc));
}
