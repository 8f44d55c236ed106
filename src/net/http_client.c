/*
 * http_client.c - the client's API and the life of a call, whichever engine
 * runs it: the engine's choice, the call block, own per-call timers for the
 * connect (own engine), time-to-first-byte, idle and total timeouts,
 * deferred work (cancels, failures found inside http_client_request, adds
 * asked for inside curl) and on_done. The engines (http1.c, http_curl.c)
 * are reached only through their table of functions (http_client_int.h).
 *
 * on_done runs only from the loop: from an engine's read or curl's
 * completion, from the idle handle, or from a call's own timer; the engine
 * lets go of the call right after on_done, and the call memory is freed in
 * its timer's close callback.
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

/* The engines, in the order they are asked to take a call: the own
 * HTTP/1.1 engine first, libcurl (which takes every call) last. */
static const struct http_engine_ops *const engines[HTTP_CLIENT_ENGINES] = {
    [HC_ENGINE_H1] = &http_engine_h1,
    [HC_ENGINE_CURL] = &http_engine_curl,
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
    [HTTP_CALL_ERR_DECODE] = "decode",
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

/* Every engine's state goes (after its handles closed). */
static void engines_free(struct http_client *c)
{
    for (size_t i = 0; i < HTTP_CLIENT_ENGINES; i++)
        if (c->engine_state[i])
            engines[i]->client_free(c);
}

void hc_client_handle_closed(struct http_client *c)
{
    c->open_handles--;
    if (!c->handles_closing || c->open_handles != 0)
        return;
    engines_free(c);
    if (c->on_closed)
        c->on_closed(c, c->closed_arg); /* c may be gone after this */
}

static void client_on_handle_closed(uv_handle_t *h)
{
    hc_client_handle_closed(h->data);
}

/* All calls are finished: every engine drops its connections and handles,
 * then the idle handle goes; the last close callback frees the engines'
 * state and runs on_closed. */
static void client_close_handles(struct http_client *c)
{
    c->handles_closing = true;
    for (size_t i = 0; i < HTTP_CLIENT_ENGINES; i++)
        engines[i]->client_close(c);
    uv_close((uv_handle_t *)&c->idle, client_on_handle_closed);
}

/* ---- calls: timers, result, finish --------------------------------------- */

/* The call's memory: its error texts, then itself. */
static void call_mem_free(struct http_call *call)
{
    ts_free(call->errt);
    ts_free(call);
}

static void call_on_closed(uv_handle_t *h)
{
    struct http_call *call = h->data;
    struct http_client *c = call->client;
    call_mem_free(call);
    hc_client_handle_closed(c);
}

/* Whether the client times the call's connect (the engine has no timeout
 * of its own) and it is not connected yet. */
static bool call_connecting(const struct http_call *call)
{
    return call->connect_ms && call->engine->call_connecting && call->engine->call_connecting(call);
}

static uint64_t call_deadline(const struct http_call *call)
{
    uint64_t d = UINT64_MAX;
    if (call->total_ms)
        d = call->start_ns + call->total_ms * TS_NS_PER_MS;
    if (call_connecting(call) && call->start_ns + call->connect_ms * TS_NS_PER_MS < d)
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

struct hc_errtext *hc_call_errs(struct http_call *call)
{
    if (!call->errt)
        call->errt = ts_calloc(1, sizeof(*call->errt));
    return call->errt;
}

/* The call's error text: the engine's (or curl's words for code), or why
 * the client ended it; "" on success. */
static const char *call_error_text(struct http_call *call, CURLcode code)
{
    if (code == CURLE_OK && call->forced == HTTP_CALL_OK) {
        if (call->errt)
            call->errt->errbuf[0] = '\0';
        return "";
    }
    struct hc_errtext *t = hc_call_errs(call);
    if (!t)
        return "out of memory";
    char *errbuf = t->errbuf;
    size_t size = sizeof(t->errbuf);
    switch (call->forced) {
    case HTTP_CALL_OK:
        if (!errbuf[0])
            snprintf(errbuf, size, "%s", curl_easy_strerror(code));
        break;
    case HTTP_CALL_ERR_TIMEOUT_TTFB:
        snprintf(errbuf, size, "no response within %u ms (time-to-first-byte timeout)",
                 call->ttfb_ms);
        break;
    case HTTP_CALL_ERR_TIMEOUT_IDLE:
        snprintf(errbuf, size, "no data for %u ms (idle timeout)", call->idle_ms);
        break;
    case HTTP_CALL_ERR_TIMEOUT_TOTAL:
        snprintf(errbuf, size, "not done within %u ms (total timeout)", call->total_ms);
        break;
    case HTTP_CALL_ERR_ABORTED:
        snprintf(errbuf, size, "aborted");
        break;
    case HTTP_CALL_ERR_TIMEOUT_CONNECT:
        snprintf(errbuf, size, "Connection timed out after %u milliseconds", call->connect_ms);
        break;
    case HTTP_CALL_ERR_DECODE:
        snprintf(errbuf, size, "%s", t->decode_err);
        break;
    default:
        snprintf(errbuf, size, "%s", call->forced_text ? call->forced_text : "failed");
        break;
    }
    return errbuf;
}

static void call_fill_result(struct http_call *call, CURLcode code, struct http_call_result *res)
{
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
    call->engine->call_result(call, res);
    res->error_text = call_error_text(call, code);
}

/* Ends a call: the engine lets go of it, on_done, then what the engine
 * still held goes, then the call memory (in its timer's close callback).
 * Only at curl's depth 0. */
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
    call->engine->call_detach(call);
    /* a compressed body that stops before its end was cut, whatever the framing said */
    if (call->decoder && code == CURLE_OK && call->forced == HTTP_CALL_OK && call->bytes &&
        !body_decoder_complete(call->decoder)) {
        call->forced = HTTP_CALL_ERR_DECODE;
        struct hc_errtext *t = hc_call_errs(call);
        if (t)
            snprintf(t->decode_err, sizeof(t->decode_err),
                     "%s: the compressed body ended before its end",
                     body_decoder_name(call->decoder));
    }
    call_fill_result(call, code, &res);
    call->ops.on_done(call, &res, call->user);
    body_decoder_free(call->decoder);
    call->decoder = NULL;
    call->engine->call_free(call);
    uv_close((uv_handle_t *)&call->timer, call_on_closed);
}

static void call_on_timer(uv_timer_t *t)
{
    struct http_call *call = t->data;
    uint64_t now = ts_now_ns();
    enum http_call_error e = HTTP_CALL_OK;

    if (call->total_ms && now >= call->start_ns + call->total_ms * TS_NS_PER_MS)
        e = HTTP_CALL_ERR_TIMEOUT_TOTAL;
    else if (call_connecting(call) && now >= call->start_ns + call->connect_ms * TS_NS_PER_MS)
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

void hc_client_defer(struct http_client *c, struct http_call *call)
{
    if (hc_list_empty(&call->defer_link))
        hc_list_add_tail(&c->deferred, &call->defer_link);
    int rc = uv_idle_start(&c->idle, client_on_idle);
    if (rc)
        ts_warn("http_client: uv_idle_start: %s", uv_strerror(rc));
}

/* Deferred work: a call the client ends (cancel, close), or the engine's. */
static void client_on_idle(uv_idle_t *h)
{
    struct http_client *c = h->data;

    while (!hc_list_empty(&c->deferred)) {
        struct http_call *call = CONTAINER_OF(c->deferred.next, struct http_call, defer_link);
        hc_list_remove(&call->defer_link);
        if (call->forced != HTTP_CALL_OK)
            hc_call_finish(call, CURLE_OK);
        else
            call->engine->call_deferred(call);
    }
    uv_idle_stop(&c->idle);
    if (c->closing && c->n_calls == 0 && !c->handles_closing)
        client_close_handles(c);
}

/* ---- what the engines share ------------------------------------------------ */

/*
 * CLOCK_REALTIME minus CLOCK_MONOTONIC. NTP slews both clocks alike, so it
 * moves only when the wall clock is stepped: read again (with the
 * monotonic clock) only when a stamp falls more than 10 ms from the last
 * reading, instead of two clock reads per receive. A step of more than
 * 10 ms either way is caught by its first stamp; a smaller one shifts
 * stamps by less than 10 ms for less than 10 ms (the own engine keeps
 * them from coming before their call started).
 */
#define WALL_OFF_SPAN (10 * TS_NS_PER_MS)

uint64_t hc_msg_stamp(struct http_client *c, const struct msghdr *msg)
{
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(msg); cm; cm = CMSG_NXTHDR((struct msghdr *)msg, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_TIMESTAMPNS)
            continue;
        struct timespec ts;
        memcpy(&ts, CMSG_DATA(cm), sizeof(ts));
        uint64_t real = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        if (c->wall_off_at && real > c->wall_off_ns) {
            uint64_t s = real - c->wall_off_ns;
            if (s < c->wall_off_at + WALL_OFF_SPAN && s + WALL_OFF_SPAN > c->wall_off_at)
                return s;
        }
        uint64_t now = ts_now_ns();
        c->wall_off_ns = ts_wall_ns() - now;
        c->wall_off_at = now;
        if (real < c->wall_off_ns || real - c->wall_off_ns > now)
            return 0; /* the clocks moved: do not trust it */
        return real - c->wall_off_ns;
    }
    return 0;
}

void hc_between_reads(struct http_client *c, uint64_t now)
{
    if (c->cfg.between_reads && !c->closing) {
        if (!now)
            now = ts_now_ns();
        if (now - c->between_ns >= 100 * TS_NS_PER_US) {
            c->between_ns = now;
            c->cfg.between_reads(c->cfg.between_reads_arg);
        }
    }
}

void hc_call_rx(struct http_call *call, uint64_t now)
{
    call->last_rx_ns = now;
    if (!call->first_rx_ns) {
        call->first_rx_ns = now;
        hc_call_arm_timer(call, now); /* from the ttfb to the idle deadline */
    }
}

/* Keeps why the body could not be undone, for the call's error text. */
static void call_keep_decode_err(struct http_call *call, const char *why)
{
    struct hc_errtext *t = hc_call_errs(call);
    if (t)
        snprintf(t->decode_err, sizeof(t->decode_err), "%s", why);
}

void hc_call_headers(struct http_call *call, long status, uint64_t now)
{
    call->headers_done = true;
    call->headers_ns = now;
    if (!call->decoder) {
        char why[HC_DECODE_ERR_MAX];
        why[0] = '\0';
        int rc = body_decoder_new(http_call_header(call, "content-encoding"), &call->decoder, why,
                                  sizeof(why));
        if (rc == -ENOMEM) {
            call->forced = HTTP_CALL_ERR_OTHER;
            call->forced_text = "out of memory";
        } else if (rc) {
            call->forced = HTTP_CALL_ERR_DECODE;
            call_keep_decode_err(call, why);
        }
    }
    if (call->ops.on_headers)
        call->ops.on_headers(call, status, call->user);
}

struct body_emit {
    struct http_call *call;
    uint64_t now;
};

static int body_emit(void *ctx, const char *data, size_t len)
{
    struct body_emit *e = ctx;
    struct http_call *call = e->call;
    return call->ops.on_body && call->ops.on_body(call, data, len, e->now, call->user) != 0;
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
    struct body_emit e = {call, now};
    char why[HC_DECODE_ERR_MAX];
    why[0] = '\0';
    int rc = call->decoder
                 ? body_decoder_feed(call->decoder, data, len, body_emit, &e, why, sizeof(why))
                 : body_emit(&e, data, len);
    if (rc == 1 && call->forced == HTTP_CALL_OK) {
        call->forced = HTTP_CALL_ERR_ABORTED;
    } else if (rc == -ENOMEM && call->forced == HTTP_CALL_OK) {
        call->forced = HTTP_CALL_ERR_OTHER;
        call->forced_text = "out of memory";
    } else if (rc && call->forced == HTTP_CALL_OK) {
        call->forced = HTTP_CALL_ERR_DECODE;
        call_keep_decode_err(call, why);
    }
    return call->forced != HTTP_CALL_OK;
}

/* ---- starting a call ------------------------------------------------------ */

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

/* Checks a request's arguments and fills req: 0, -EINVAL, TS_TOOBIG or
 * TS_CLOSED. */
static int request_check(struct http_client *c, const struct http_call_spec *spec,
                         const struct http_call_ops *ops, struct hc_request *req)
{
    if (!c || !spec || !spec->url || !ops || !ops->on_done || (spec->body_len && !spec->body))
        return -EINVAL;
    if (spec->method && !method_valid(spec->method))
        return -EINVAL;
    if (c->closing)
        return TS_CLOSED;
    req->spec = spec;
    return headers_check(spec, &req->hdr_bytes, &req->has_expect);
}

/* The first engine that takes spec; the last one takes every call. */
static const struct http_engine_ops *client_engine_for(struct http_client *c,
                                                       const struct http_call_spec *spec)
{
    for (size_t i = 0; i + 1 < HTTP_CLIENT_ENGINES; i++)
        if (!engines[i]->route || engines[i]->route(c, spec) == 0)
            return engines[i];
    return engines[HTTP_CLIENT_ENGINES - 1];
}

/* Allocates the call block of engine e (the engine's part, then the body
 * copy if asked) with the client's part filled. Returns 0 with *out and
 * *body (the body to send), or -ENOMEM. */
static int call_new(struct http_client *c, const struct http_engine_ops *e,
                    const struct hc_request *req, const struct http_call_ops *ops, void *user,
                    struct http_call **out, const void **body)
{
    const struct http_call_spec *spec = req->spec;
    size_t fixed = e->call_size(req);
    size_t body_copy = spec->copy_body && spec->body ? spec->body_len : 0;

    if (body_copy > SIZE_MAX - fixed)
        return -ENOMEM;
    struct http_call *call = ts_malloc(fixed + body_copy);
    if (!call)
        return -ENOMEM;
    memset(call, 0, e->call_struct_size);
    call->client = c;
    call->engine = e;
    call->ops = *ops;
    call->user = user;
    hc_list_init(&call->link);
    hc_list_init(&call->defer_link);
    *body = spec->body;
    if (body_copy) {
        memcpy((char *)call + fixed, spec->body, body_copy);
        *body = (char *)call + fixed;
    }
    call->ttfb_ms = pick_timeout(spec->ttfb_timeout_ms, c->cfg.ttfb_timeout_ms);
    call->idle_ms = pick_timeout(spec->idle_timeout_ms, c->cfg.idle_timeout_ms);
    call->total_ms = pick_timeout(spec->total_timeout_ms, c->cfg.total_timeout_ms);
    call->connect_ms = pick_timeout(spec->connect_timeout_ms, c->cfg.connect_timeout_ms);
    *out = call;
    return 0;
}

/* The call starts now: it counts as unfinished and its deadlines run. */
static void call_register(struct http_call *call)
{
    struct http_client *c = call->client;

    call->start_ns = ts_now_ns();
    hc_list_add_tail(&c->calls, &call->link);
    c->n_calls++;
    hc_call_arm_timer(call, call->start_ns);
}

static void call_unregister(struct http_call *call)
{
    hc_list_remove(&call->link);
    call->client->n_calls--;
}

int http_client_request(struct http_client *c, const struct http_call_spec *spec,
                        const struct http_call_ops *ops, void *user, struct http_call **out)
{
    struct hc_request req = {0};
    const struct http_engine_ops *e;
    struct http_call *call = NULL;
    const void *body = NULL;
    int rc;

    if (out)
        *out = NULL;
    rc = request_check(c, spec, ops, &req);
    if (rc)
        return rc;
    e = client_engine_for(c, spec);
    if (spec->send_shaper && !e->shapes_sends)
        return -ENOTSUP; /* only the own HTTP/1.1 engine shapes what it sends */
    rc = call_new(c, e, &req, ops, user, &call, &body);
    if (rc)
        return rc;
    rc = e->call_start(call, &req, body);
    if (rc)
        goto out_drop;
    rc = uv_timer_init(c->loop, &call->timer);
    if (rc)
        goto out_drop;
    call->timer.data = call;
    c->open_handles++;
    call_register(call);
    rc = e->call_launch(call);
    if (rc)
        goto out_unregister;
    if (out)
        *out = call;
    return 0;

out_unregister:
    call_unregister(call);
out_drop:
    e->call_detach(call);
    e->call_free(call);
    if (call->timer.data) /* a counted handle: its close frees the call */
        uv_close((uv_handle_t *)&call->timer, call_on_closed);
    else
        call_mem_free(call);
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

int http_call_shutdown_write(struct http_call *call)
{
    if (!call || call->finished)
        return -EAGAIN;
    if (!call->engine->call_shutdown_write)
        return -ENOTSUP;
    return call->engine->call_shutdown_write(call);
}

const char *http_call_header(struct http_call *call, const char *name)
{
    if (!call || !name)
        return NULL;
    return call->engine->call_header(call, name);
}

int http_call_headers_each(struct http_call *call,
                           int (*fn)(void *ctx, const char *name, const char *value), void *ctx)
{
    if (!call || !fn)
        return -EINVAL;
    return call->engine->call_headers_each(call, fn, ctx);
}

/* ---- client --------------------------------------------------------------- */

/* Every engine makes its state, in slot order; on a failure the ones made
 * go again (only the last engine, libcurl, opens uv handles here). */
static int engines_init(struct http_client *c)
{
    size_t i;
    int rc = 0;

    for (i = 0; i < HTTP_CLIENT_ENGINES; i++) {
        rc = engines[i]->client_init(c);
        if (rc)
            break;
    }
    if (rc == 0)
        return 0;
    while (i-- > 0)
        engines[i]->client_free(c);
    return rc;
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

    memset(c, 0, sizeof(*c));
    c->loop = loop;
    c->cfg = *cfg;
    hc_list_init(&c->calls);
    hc_list_init(&c->deferred);
    rc = engines_init(c);
    if (rc)
        return rc;
    (void)uv_idle_init(loop, &c->idle); /* cannot fail: it only links the handle */
    c->idle.data = c;
    c->open_handles++;
    return 0;
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
