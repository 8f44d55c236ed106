/*
 * http_client.h - asynchronous HTTP client on libuv, with two engines behind
 * one API: its own HTTP/1.1 engine (http1.c) for plain http:// calls, and
 * libcurl's multi interface (http_curl.c) for everything else (TLS, HTTP/2,
 * proxies, connection limits) or for every call with HTTP_CLIENT_ENGINE_CURL.
 * The own engine exists because curl's per-socket work grows with the
 * number of transfers (see http1.c); both behave alike: the same request
 * headers, error classes, timeouts and result fields (curl_code holds the
 * CURLcode curl would have given).
 *
 * One struct http_client per uv loop (per worker thread); it is not
 * thread-safe, every function must be called on the loop's thread. The curl
 * engine follows
 * curl's docs/examples/multi-uv.c: CURLMOPT_SOCKETFUNCTION drives one uv_poll
 * per socket, CURLMOPT_TIMERFUNCTION drives one uv_timer, and both call
 * curl_multi_socket_action(). Connections are kept alive and reused through
 * the multi handle's connection cache; proxies come from curl's standard
 * environment variables (http_proxy, https_proxy, no_proxy, ...), which this
 * client deliberately leaves enabled.
 *
 * Lifecycle of a call (libuv's rule): if http_client_request() returns an
 * error, no callback of that call ever runs; if it returns 0, on_done runs
 * exactly once, later, and the call object is freed by the client right after
 * on_done returns. Callbacks never run inside http_client_request(),
 * http_call_cancel() or http_client_close(): they run from the loop.
 *
 * Timeouts:
 *   connect  - curl's CURLOPT_CONNECTTIMEOUT_MS (DNS + TCP + TLS handshake).
 *   ttfb     - own per-call uv timer: from the call's start (http_client_request)
 *              to the first byte of the response (status line).
 *   idle     - own per-call uv timer: longest silence between two received
 *              bytes once the response has started (headers or body). It is
 *              reset lazily: receiving bytes only stores a timestamp, the timer
 *              re-arms itself when it fires early, so there is no timer work
 *              per chunk.
 *   total    - own per-call uv timer: from the call's start to on_done.
 * Own timers (not CURLOPT_LOW_SPEED_*, which works in whole seconds) have the
 * loop's millisecond resolution and tell the four timeouts apart exactly.
 *
 * Secrets: the client never logs request or response header values.
 *
 * Memory on the own engine: the call block, the request head and the
 * response headers, and about 0.3 KiB per connection; the receive buffer is
 * the client's. On curl: about 28 KiB of heap per in-flight call with curl's default
 * receive buffer, 16 KiB with recv_buffer_size = 4096 (measured, see
 * http_client.c); libcurl's easy handle dominates. This layer allocates one
 * block per call (about 0.6 KiB plus a copy of the headers and, if asked, the
 * body) and nothing per received chunk.
 *
 * Redirects are not followed (a 3xx is an ordinary response). Host names are
 * resolved by curl (its threaded resolver) or by uv_getaddrinfo on the own
 * engine, and cached per client for 60 s.
 *
 * Before any client is created, call http_client_global_init() once from the
 * main thread (curl_global_init); http_client_global_cleanup() at exit. Easy
 * handles run with CURLOPT_NOSIGNAL, so the program should ignore SIGPIPE.
 */
#ifndef TS_NET_HTTP_CLIENT_H
#define TS_NET_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <uv.h>

#include "base/err.h"
#include "net/shaper.h"

/* A per-call timeout value meaning "no limit" (0 means "use the client's"). */
#define HTTP_CALL_TIMEOUT_NONE UINT32_MAX

/* Limits on a call's request headers (count, and bytes of all of them). */
#define HTTP_CALL_MAX_HEADERS      256
#define HTTP_CALL_MAX_HEADER_BYTES (64 * 1024)

/* Which engine runs plain http:// HTTP/1.1 calls (TLS, HTTP/2 and proxied
 * calls always run on libcurl). */
enum http_client_engine {
    HTTP_CLIENT_ENGINE_AUTO = 0, /* the own HTTP/1.1 engine where it can (the default) */
    HTTP_CLIENT_ENGINE_CURL = 1, /* libcurl for every call */
};

enum http_client_version {
    HTTP_CLIENT_HTTP1 = 0,       /* HTTP/1.1 only (the default) */
    HTTP_CLIENT_HTTP2_TLS = 1,   /* HTTP/2 over TLS via ALPN, HTTP/1.1 for http:// */
    HTTP_CLIENT_HTTP2_PRIOR = 2, /* HTTP/2 without TLS (h2c prior knowledge) */
};

struct http_client_config {
    /* Client-wide timeouts in ms; 0 means no limit. For connect, "no limit"
     * means curl's built-in 300 s. */
    uint32_t connect_timeout_ms;
    uint32_t ttfb_timeout_ms;
    uint32_t idle_timeout_ms;
    uint32_t total_timeout_ms;
    /* TLS peer and host verification is on unless this is set. */
    bool insecure;
    /* Custom CA bundle file or NULL for curl's default; not copied: it must
     * outlive the client. */
    const char *ca_file;
    enum http_client_version version;
    /* Connection cache size (CURLMOPT_MAXCONNECTS); 0 = curl's automatic size. */
    unsigned max_connects;
    /* CURLMOPT_MAX_HOST_CONNECTIONS / _MAX_TOTAL_CONNECTIONS; 0 = unlimited. */
    unsigned max_host_connections;
    unsigned max_total_connections;
    /* HTTP/2 streams per connection (CURLMOPT_MAX_CONCURRENT_STREAMS);
     * 0 = curl's default (100). */
    unsigned max_concurrent_streams;
    /* Receive buffer of each easy handle (CURLOPT_BUFFERSIZE), 1024 ..
     * CURL_MAX_READ_SIZE; 0 = curl's default (16 KiB). Smaller saves memory
     * per call, larger means fewer on_body calls for big bodies. */
    unsigned recv_buffer_size;
    /*
     * Time received bytes by the kernel's receive timestamp (SO_TIMESTAMPNS,
     * read with a 1-byte MSG_PEEK before curl reads the socket) instead of
     * the moment curl hands them over: when many sockets are readable at
     * once, the last ones are read milliseconds after their data arrived.
     * The bytes of one read get the arrival time of the newest of them (so
     * events that waited are timed late, never early). Costs one recvmsg
     * (MSG_PEEK of up to 16 KiB) per readable event that may have waited,
     * which is all but the first events of a poll pass that woke the loop
     * (read within 50 us of the wake-up, timed by the clock). Plain HTTP/1.1
     * (with HTTP/2 several streams share a socket; TLS is timed by record
     * arrival, which is still right). Off by default.
     */
    bool rx_timestamps;
    /*
     * Called between two sockets' reads, at most every 100 us, while a
     * poll pass hands many sockets to curl (a burst of a batching server
     * can take milliseconds): the owner may send what fell due meanwhile
     * instead of waiting for the pass to end. Never called inside curl.
     */
    void (*between_reads)(void *arg);
    void *between_reads_arg;
    enum http_client_engine engine;
};

/* Fills cfg with the defaults: connect 10 s, no ttfb/idle/total limit, TLS
 * verified, HTTP/1.1, a connection cache of 16384, no connection limits. */
void http_client_config_default(struct http_client_config *cfg);

/* What ended a call. HTTP status codes (4xx, 5xx) are not errors here. */
enum http_call_error {
    HTTP_CALL_OK = 0,
    HTTP_CALL_ERR_CONNECT,         /* connection refused or unreachable */
    HTTP_CALL_ERR_DNS,             /* host or proxy name not resolved */
    HTTP_CALL_ERR_TLS,             /* handshake or certificate failure */
    HTTP_CALL_ERR_TIMEOUT_CONNECT, /* connect timeout (curl's) */
    HTTP_CALL_ERR_TIMEOUT_TTFB,    /* no response byte within ttfb */
    HTTP_CALL_ERR_TIMEOUT_IDLE,    /* silence longer than idle after the start */
    HTTP_CALL_ERR_TIMEOUT_TOTAL,   /* the whole call took longer than total */
    HTTP_CALL_ERR_SEND,            /* sending the request failed */
    HTTP_CALL_ERR_RECV,            /* connection reset or closed mid-response
                                    * (CURLE_RECV_ERROR, CURLE_PARTIAL_FILE,
                                    * CURLE_GOT_NOTHING, HTTP/2 stream errors) */
    HTTP_CALL_ERR_ABORTED,         /* http_call_cancel, on_body != 0, or close */
    HTTP_CALL_ERR_OTHER,           /* anything else (bad URL, out of memory...) */
    HTTP_CALL_ERR_DECODE,          /* the body's Content-Encoding could not be undone:
                                    * invalid or cut gzip/deflate data, over
                                    * BODY_DECODE_MAX, or a coding not supported */
};

/* Returns a static lower-case name: "none", "connect", "dns", "tls",
 * "timeout_connect", "timeout_ttfb", "timeout_idle", "timeout_total", "send",
 * "recv", "aborted", "other", "decode"; "unknown" for values outside the enum. */
const char *http_call_error_name(enum http_call_error e);

/* Passed to on_done; valid only during on_done (copy what you keep). */
struct http_call_result {
    enum http_call_error error;
    int curl_code;          /* CURLcode; 0 if our timeout or a cancel ended it first */
    const char *error_text; /* NUL-terminated, "" on success; never a header */
    long status;            /* last HTTP status received, 0 if none */
    uint64_t bytes;         /* body bytes handed to on_body */
    bool reused;            /* the call ran on an already open connection */
    /* Monotonic ns (ts_now_ns clock); 0 = did not happen. */
    uint64_t start_ns;      /* http_client_request() was called */
    uint64_t first_rx_ns;   /* first response byte (status line) */
    uint64_t headers_ns;    /* on_headers was called */
    uint64_t first_byte_ns; /* first body byte (now_ns of the first on_body) */
    uint64_t last_byte_ns;  /* last body byte (now_ns of the last on_body) */
    uint64_t end_ns;        /* the call ended (just before on_done) */
    /* curl's own phase times (curl_easy_getinfo *_TIME_T), in ns, each
     * cumulative from curl's start of the transfer (a few µs after start_ns);
     * 0 when the phase was not reached. */
    uint64_t dns_ns;           /* NAMELOOKUP */
    uint64_t connect_ns;       /* CONNECT: TCP connected */
    uint64_t tls_ns;           /* APPCONNECT: TLS done (0 for http://) */
    uint64_t pretransfer_ns;   /* PRETRANSFER: request about to be sent */
    uint64_t starttransfer_ns; /* STARTTRANSFER: first response byte */
    uint64_t total_ns;         /* TOTAL */
};

struct http_call;

struct http_call_ops {
    /* Optional. The final (non-1xx) status line and all headers arrived.
     * Called at most once; not called when the call fails before that. */
    void (*on_headers)(struct http_call *call, long status, void *user);
    /* Optional. A piece of the body; data is valid only during the call.
     * now_ns is ts_now_ns() read when curl handed over the bytes. Return 0 to
     * go on, nonzero to abort the call (on_done then reports ABORTED). */
    int (*on_body)(struct http_call *call, const char *data, size_t len, uint64_t now_ns,
                   void *user);
    /* Required. Runs exactly once; the call is freed when it returns. */
    void (*on_done)(struct http_call *call, const struct http_call_result *res, void *user);
};

struct http_call_spec {
    const char *method; /* "GET" when NULL; "HEAD" asks for no body */
    const char *url;    /* http:// or https:// only; copied */
    /* n_headers "Name: value" strings (no CR/LF), copied. Curl's rules apply:
     * "Name:" removes a header curl would add, "Name;" sends it empty. A
     * "User-Agent:" here replaces the client's "tokenstorm/VERSION". The
     * client adds "Expect:" (no 100-continue round trip) unless given one. */
    const char *const *headers;
    size_t n_headers;
    /* Request body (may be NULL with body_len 0). With copy_body the client
     * copies it; otherwise it is borrowed and must stay valid and unchanged
     * until on_done. A body makes the default method POST. */
    const void *body;
    size_t body_len;
    bool copy_body;
    /* Per-call timeouts in ms: 0 = the client's, HTTP_CALL_TIMEOUT_NONE = none. */
    uint32_t connect_timeout_ms;
    uint32_t ttfb_timeout_ms;
    uint32_t idle_timeout_ms;
    uint32_t total_timeout_ms;
    /* Optional: paces or cuts the request bytes (net/shaper.h), copied. Only
     * the own HTTP/1.1 engine can: elsewhere http_client_request fails with
     * -ENOTSUP. Once the request is accepted the call owns sh->ctx. */
    const struct http_shaper *send_shaper;
};

/* Private state; embed it, do not touch the fields. */
struct http_client_list {
    struct http_client_list *prev, *next;
};

/* How many engines a client has (http_client_int.h). */
#define HTTP_CLIENT_ENGINES 2

struct http_client {
    uv_loop_t *loop;
    uv_idle_t idle; /* runs deferred work: cancels, adds from inside curl, failures */
    struct http_client_config cfg;
    struct http_client_list calls;    /* calls not yet finished */
    struct http_client_list deferred; /* calls with deferred work */
    unsigned open_handles;            /* uv handles not yet closed */
    unsigned n_calls;
    uint64_t between_ns;                     /* last between_reads call */
    uint64_t read_ns;                        /* the time of the engine's last read */
    uint64_t wall_off_ns, wall_off_at;       /* hc_msg_stamp's clock offset, when read */
    void *engine_state[HTTP_CLIENT_ENGINES]; /* each engine's own (heap) */
    /* The engines' receive buffer: the own engine reads into it, curl's
     * rx_timestamps peek into it (curl's read size). */
    char rxbuf[16384];
    bool closing, handles_closing;
    void (*on_closed)(struct http_client *c, void *arg);
    void *closed_arg;
};

/* Calls curl_global_init(); once per process, from the main thread, before
 * any client exists. Returns 0 or -EIO. */
TS_MUST_CHECK int http_client_global_init(void);
void http_client_global_cleanup(void);

/* Initializes c on loop with cfg (NULL = http_client_config_default()).
 * Returns 0, -EINVAL for a bad config, -ENOMEM, or -ENOTSUP when libcurl lacks
 * a feature asked for (HTTP/2). On error c needs no release. */
TS_MUST_CHECK int http_client_init(struct http_client *c, uv_loop_t *loop,
                                   const struct http_client_config *cfg);

/* Starts a call. Returns 0 and sets *out (may be NULL if not wanted) to the
 * call, valid until its on_done returns. Errors: -EINVAL (no url, no
 * ops->on_done, a header with CR/LF or no colon), TS_TOOBIG (headers over the
 * limits), -ENOMEM, TS_CLOSED (the client is closing). On error no callback
 * runs. Safe to call from any callback of any call of this client. */
TS_MUST_CHECK int http_client_request(struct http_client *c, const struct http_call_spec *spec,
                                      const struct http_call_ops *ops, void *user,
                                      struct http_call **out);

/* Asks to stop a call; its on_done runs later (from the loop) with
 * HTTP_CALL_ERR_ABORTED, and no on_headers/on_body runs after this returns.
 * Safe from any callback, including the call's own; a no-op inside on_done.
 * Must not be called after on_done returned (the call is freed). */
void http_call_cancel(struct http_call *call);

/*
 * Half-closes the call's connection (a FIN after the request): the server
 * sees its client gone, as when a caller hangs up, while whatever it still
 * sends is read and handed to on_body as usual; the connection is not
 * kept alive after it. Use from on_headers or on_body. Returns 0,
 * -EAGAIN (the request is not fully sent yet, or no connection), -ENOTSUP
 * (the libcurl engine: TLS, HTTP/2, proxies), or a negative errno.
 */
TS_MUST_CHECK int http_call_shutdown_write(struct http_call *call);

/* Returns the value of the first response header called name (case
 * insensitive, no colon) of the final response, or NULL. Use from on_headers,
 * on_body or on_done; the string is valid until on_done returns. */
const char *http_call_header(struct http_call *call, const char *name);

/* Calls fn(ctx, name, value) for every header of the final response, in the
 * order received (names as sent, values with surrounding blanks removed by
 * curl; strings valid during the call). Stops at and returns the first
 * non-zero value fn returns; 0 when all were visited; -EINVAL without a call.
 * Use from on_headers, on_body or on_done. */
int http_call_headers_each(struct http_call *call,
                           int (*fn)(void *ctx, const char *name, const char *value), void *ctx);

/* Closes the client: every unfinished call gets on_done with
 * HTTP_CALL_ERR_ABORTED, then all connections and uv handles are closed, then
 * on_closed(c, arg) runs (may be NULL); after it, c may be freed and, if
 * nothing else uses the loop, uv_loop_close() returns 0. Call once; safe
 * from callbacks. http_client_request() fails with TS_CLOSED from now on. */
void http_client_close(struct http_client *c, void (*on_closed)(struct http_client *c, void *arg),
                       void *arg);

#endif
