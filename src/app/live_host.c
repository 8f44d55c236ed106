/*
 * live_host.c - the live page of a sweep or an experiment (see live_host.h):
 * app/live_ui.c's surface on a thread of its own.
 */
#include "app/live_host.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <uv.h>

#include "app/live_ui.h"
#include "base/alloc.h"
#include "base/buf.h"
#include "base/log.h"
#include "net/http_server.h"

struct live_host {
    uv_loop_t loop;
    uv_async_t wake; /* a new frame, the end, or the close */
    pthread_t thread;
    struct http_server server;
    struct live_ui ui; /* on the server's thread only */
    pthread_mutex_t mu;
    /* under mu: what the owner handed over */
    struct buf pending;
    bool has_pending;
    int pending_port;
    bool end, close;
    int port;
};

static void on_request(struct http_request *req, void *ctx)
{
    struct live_host *h = ctx;
    live_ui_request(req, &h->ui);
}

static void on_closed(struct http_server *s)
{
    struct live_host *h = (struct live_host *)((char *)s - offsetof(struct live_host, server));
    uv_close((uv_handle_t *)&h->wake, NULL);
}

/* On the server's thread: takes what the owner handed over. */
static void on_wake(uv_async_t *a)
{
    struct live_host *h = a->data;
    struct buf frame;
    bool has, end, close;
    int port;

    pthread_mutex_lock(&h->mu);
    frame = h->pending; /* taken whole; the owner's next publish starts a new one */
    buf_init(&h->pending, LIVE_UI_FRAME_MAX);
    has = h->has_pending;
    h->has_pending = false;
    port = h->pending_port;
    end = h->end;
    close = h->close;
    pthread_mutex_unlock(&h->mu);
    if (has && live_ui_publish(&h->ui, buf_cstr(&frame), frame.len, port))
        ts_warn("--ui: a frame could not be sent");
    buf_release(&frame);
    if (end)
        live_ui_end(&h->ui);
    if (close) {
        live_ui_end(&h->ui);
        if (http_server_shutdown(&h->server, 500, on_closed))
            uv_close((uv_handle_t *)&h->wake, NULL);
    }
}

static void *thread_main(void *arg)
{
    struct live_host *h = arg;
    uv_run(&h->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* The loop, the server bound and the wake-up handle; on error all undone. */
static int host_start(struct live_host *h, const char *host, int port, char *err, size_t errlen)
{
    struct http_server_config cfg = {
        .host = host, .port = port, .max_connections = 64, .max_body_bytes = 4096};
    int rc = uv_loop_init(&h->loop);
    if (rc) {
        ts_errf(err, errlen, "event loop: %s", uv_strerror(rc));
        return rc;
    }
    if ((rc = http_server_init(&h->server, &h->loop, &cfg, on_request, h))) {
        ts_errf(err, errlen, "%s: %s", host, ts_strerror(rc));
        (void)uv_loop_close(&h->loop);
        return rc;
    }
    rc = http_server_listen(&h->server);
    if (rc)
        ts_errf(err, errlen, "cannot listen on %s:%d: %s", host, port, ts_strerror(rc));
    if (!rc && (rc = uv_async_init(&h->loop, &h->wake, on_wake)))
        ts_errf(err, errlen, "async: %s", uv_strerror(rc));
    if (rc) {
        (void)http_server_shutdown(&h->server, 0, NULL);
        uv_run(&h->loop, UV_RUN_DEFAULT);
        (void)uv_loop_close(&h->loop);
        return rc;
    }
    h->wake.data = h;
    h->port = http_server_port(&h->server);
    return 0;
}

int live_host_open(const char *host, int port, const char *title, const char *token,
                   void (*on_stop)(void), struct live_host **out, char *err, size_t errlen)
{
    struct live_host *h = ts_calloc(1, sizeof(*h));
    int rc;

    *out = NULL;
    if (!h) {
        ts_errf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    if ((rc = live_ui_init(&h->ui, title, token, NULL, 0, NULL))) {
        ts_errf(err, errlen, "out of memory");
        goto fail_ui;
    }
    h->ui.on_stop = on_stop;
    buf_init(&h->pending, LIVE_UI_FRAME_MAX);
    pthread_mutex_init(&h->mu, NULL);
    if ((rc = host_start(h, host, port, err, errlen)))
        goto fail;
    if ((rc = pthread_create(&h->thread, NULL, thread_main, h))) {
        ts_errf(err, errlen, "cannot start the dashboard's thread: %s", strerror(rc));
        uv_close((uv_handle_t *)&h->wake, NULL);
        (void)http_server_shutdown(&h->server, 0, NULL);
        uv_run(&h->loop, UV_RUN_DEFAULT);
        (void)uv_loop_close(&h->loop);
        rc = -rc;
        goto fail;
    }
    *out = h;
    return 0;
fail:
    pthread_mutex_destroy(&h->mu);
    buf_release(&h->pending);
fail_ui:
    live_ui_release(&h->ui);
    ts_free(h);
    return rc;
}

int live_host_port(const struct live_host *h)
{
    return h->port;
}

int live_host_publish(struct live_host *h, const char *html, size_t len, int inner_port)
{
    pthread_mutex_lock(&h->mu);
    buf_reset(&h->pending);
    int rc = buf_append(&h->pending, html, len);
    h->has_pending = rc == 0;
    h->pending_port = inner_port;
    pthread_mutex_unlock(&h->mu);
    uv_async_send(&h->wake);
    return rc;
}

void live_host_close(struct live_host *h, unsigned linger_ms)
{
    if (!h)
        return;
    pthread_mutex_lock(&h->mu);
    h->end = true;
    pthread_mutex_unlock(&h->mu);
    uv_async_send(&h->wake);
    if (linger_ms) {
        struct timespec ts = {(time_t)(linger_ms / 1000), (long)(linger_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) && errno == EINTR) {
        }
    }
    pthread_mutex_lock(&h->mu);
    h->close = true;
    pthread_mutex_unlock(&h->mu);
    uv_async_send(&h->wake);
    pthread_join(h->thread, NULL);
    if (uv_loop_close(&h->loop))
        ts_warn("--ui: loop closed with open handles");
    pthread_mutex_destroy(&h->mu);
    buf_release(&h->pending);
    live_ui_release(&h->ui);
    ts_free(h);
}

int live_host_free_port(const char *host)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int fd, port = 0;

    memset(&ss, 0, sizeof(ss));
    if (inet_pton(AF_INET, host, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
        ss.ss_family = AF_INET;
        len = sizeof(struct sockaddr_in);
    } else if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
        ss.ss_family = AF_INET6;
        len = sizeof(struct sockaddr_in6);
    } else {
        return 0;
    }
    if ((fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
        return 0;
    if (!bind(fd, (struct sockaddr *)&ss, len) && !getsockname(fd, (struct sockaddr *)&ss, &len))
        port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                             : ((struct sockaddr_in6 *)&ss)->sin6_port);
    close(fd);
    return port;
}
