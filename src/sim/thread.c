#include "thread.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"

struct sim_thread {
    uv_loop_t loop;
    uv_async_t stop;
    pthread_t thread;
    struct sim_server *server;
    uint64_t grace_ms;
    int port;
};

static void on_server_closed(struct sim_server *s, void *arg)
{
    struct sim_thread *t = arg;
    uv_close((uv_handle_t *)&t->stop, NULL);
}

static void on_stop(uv_async_t *h)
{
    struct sim_thread *t = h->data;
    sim_server_shutdown(t->server, t->grace_ms, on_server_closed, t);
}

static void *thread_main(void *arg)
{
    struct sim_thread *t = arg;
    uv_run(&t->loop, UV_RUN_DEFAULT);
    return NULL;
}

int sim_thread_start(const struct sim_server_config *cfg, struct sim_thread **out, char *err,
                     size_t errlen)
{
    struct sim_thread *t = ts_calloc(1, sizeof(*t));
    if (!t) {
        ts_errf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int rc = uv_loop_init(&t->loop);
    if (rc) {
        ts_errf(err, errlen, "event loop: %s", uv_strerror(rc));
        ts_free(t);
        return rc;
    }
    if ((rc = sim_server_start(&t->loop, cfg, &t->server, err, errlen)))
        goto out_loop;
    t->port = sim_server_port(t->server);
    if ((rc = uv_async_init(&t->loop, &t->stop, on_stop))) {
        ts_errf(err, errlen, "async: %s", uv_strerror(rc));
        goto out_server;
    }
    t->stop.data = t;
    if ((rc = pthread_create(&t->thread, NULL, thread_main, t))) {
        ts_errf(err, errlen, "cannot start the simulator thread: %s", strerror(rc));
        rc = -rc;
        uv_close((uv_handle_t *)&t->stop, NULL);
        goto out_server;
    }
    *out = t;
    return 0;

out_server:
    sim_server_shutdown(t->server, 0, NULL, NULL);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    sim_server_free(t->server);
out_loop:
    (void)uv_loop_close(&t->loop);
    ts_free(t);
    return rc;
}

int sim_thread_port(const struct sim_thread *t)
{
    return t->port;
}

void sim_thread_stop(struct sim_thread *t, uint64_t grace_ms)
{
    if (!t)
        return;
    t->grace_ms = grace_ms;
    uv_async_send(&t->stop);
    pthread_join(t->thread, NULL);
    sim_server_free(t->server);
    if (uv_loop_close(&t->loop))
        ts_warn("sim: loop closed with open handles");
    ts_free(t);
}
