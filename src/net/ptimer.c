#include "ptimer.h"

#include <stddef.h>
#include <sys/timerfd.h>
#include <unistd.h>

static void on_poll(uv_poll_t *h, int status, int events)
{
    struct ptimer *t = h->data;
    uint64_t expirations;
    if (read(t->fd, &expirations, sizeof(expirations)) < 0)
        return; /* EAGAIN: spurious wake-up or disarmed meanwhile */
    if (status < 0 || !t->deadline_ns)
        return;
    t->deadline_ns = 0;
    uv_poll_stop(&t->poll);
    t->cb(t);
}

int ptimer_init(uv_loop_t *loop, struct ptimer *t)
{
    t->fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (t->fd < 0)
        return -errno;
    int rc = uv_poll_init(loop, &t->poll, t->fd);
    if (rc) {
        close(t->fd);
        t->fd = -1;
        return rc;
    }
    t->poll.data = t;
    t->cb = NULL;
    t->close_cb = NULL;
    t->deadline_ns = 0;
    return 0;
}

int ptimer_start_at(struct ptimer *t, uint64_t deadline_ns, ptimer_cb cb)
{
    if (!deadline_ns)
        deadline_ns = 1; /* 0 would disarm the timerfd */
    struct itimerspec its = {
        .it_value = {.tv_sec = (time_t)(deadline_ns / 1000000000ull),
                     .tv_nsec = (long)(deadline_ns % 1000000000ull)},
    };
    if (timerfd_settime(t->fd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
        return -errno;
    t->cb = cb;
    t->deadline_ns = deadline_ns;
    return uv_poll_start(&t->poll, UV_READABLE, on_poll);
}

void ptimer_stop(struct ptimer *t)
{
    struct itimerspec its = {0};
    t->deadline_ns = 0;
    if (t->fd >= 0)
        (void)timerfd_settime(t->fd, 0, &its, NULL);
    uv_poll_stop(&t->poll);
}

static void on_closed(uv_handle_t *h)
{
    struct ptimer *t = h->data;
    close(t->fd);
    t->fd = -1;
    if (t->close_cb)
        t->close_cb(t);
}

void ptimer_close(struct ptimer *t, void (*close_cb)(struct ptimer *t))
{
    ptimer_stop(t);
    t->close_cb = close_cb;
    uv_close((uv_handle_t *)&t->poll, on_closed);
}
