#include "asyncw.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "buf.h"

#define ASYNCW_BATCH     (256 * 1024)
#define ASYNCW_PERIOD_MS 200

struct asyncw {
    int fd;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct buf pending; /* filled by writers */
    size_t max_pending;
    bool flush_asked;
    bool closing;
    int error;
    uint64_t dropped;
};

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void *writer_main(void *arg)
{
    struct asyncw *w = arg;
    struct buf out;
    buf_init(&out, SIZE_MAX / 2);
    pthread_mutex_lock(&w->lock);
    for (;;) {
        /* write at least every ASYNCW_PERIOD_MS, so readers see recent lines */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += ASYNCW_PERIOD_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while (!w->closing && !w->flush_asked && w->pending.len < ASYNCW_BATCH)
            if (pthread_cond_timedwait(&w->cond, &w->lock, &until) == ETIMEDOUT)
                break;
        w->flush_asked = false;
        /* take the pending bytes: swap buffers so writers go on at once */
        struct buf tmp = out;
        out = w->pending;
        w->pending = tmp;
        buf_reset(&w->pending);
        bool last = w->closing;
        pthread_mutex_unlock(&w->lock);
        int rc = out.len ? write_all(w->fd, out.data, out.len) : 0;
        buf_reset(&out);
        pthread_mutex_lock(&w->lock);
        if (rc && !w->error)
            w->error = rc;
        if (last && !w->pending.len)
            break;
    }
    pthread_mutex_unlock(&w->lock);
    buf_release(&out);
    return NULL;
}

int asyncw_open(const char *path, size_t max_pending, struct asyncw **out, char *err, size_t errlen)
{
    struct asyncw *w = ts_calloc(1, sizeof(*w));
    if (!w) {
        ts_errf(err, errlen, "%s: out of memory", path);
        return -ENOMEM;
    }
    w->max_pending = max_pending ? max_pending : 64u << 20;
    buf_init(&w->pending, w->max_pending);
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        int rc = -errno;
        ts_errf(err, errlen, "%s: %s", path, strerror(errno));
        ts_free(w);
        return rc;
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    int rc = pthread_create(&w->thread, NULL, writer_main, w);
    if (rc) {
        ts_errf(err, errlen, "%s: cannot start writer thread: %s", path, strerror(rc));
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->cond);
        close(w->fd);
        ts_free(w);
        return -rc;
    }
    *out = w;
    return 0;
}

int asyncw_write(struct asyncw *w, const void *data, size_t len)
{
    pthread_mutex_lock(&w->lock);
    int rc = buf_append(&w->pending, data, len);
    if (rc == TS_TOOBIG) {
        w->dropped += len;
        rc = TS_AGAIN;
    }
    if (w->pending.len >= ASYNCW_BATCH)
        pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
    return rc;
}

void asyncw_flush(struct asyncw *w)
{
    pthread_mutex_lock(&w->lock);
    w->flush_asked = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

uint64_t asyncw_dropped(struct asyncw *w)
{
    pthread_mutex_lock(&w->lock);
    uint64_t d = w->dropped;
    pthread_mutex_unlock(&w->lock);
    return d;
}

int asyncw_close(struct asyncw *w)
{
    if (!w)
        return 0;
    pthread_mutex_lock(&w->lock);
    w->closing = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    int rc = w->error;
    if (close(w->fd) < 0 && !rc)
        rc = -errno;
    buf_release(&w->pending);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
    ts_free(w);
    return rc;
}
