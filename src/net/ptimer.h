/*
 * ptimer.h - a one-shot timer with nanosecond resolution on a libuv loop.
 *
 * libuv timers have millisecond resolution, too coarse to send a token or a
 * request at its scheduled time. A ptimer is a Linux timerfd (CLOCK_MONOTONIC,
 * absolute deadlines in ts_now_ns() time) watched by a uv_poll_t, so the loop
 * wakes when the deadline passes, to the precision of the kernel's timers.
 *
 * struct ptimer is embedded by its owner; the owner is found through
 * ptimer.data. ptimer_close() must be called before the owner is freed, and
 * the owner may be freed only in (or after) the close callback.
 */
#ifndef TS_NET_PTIMER_H
#define TS_NET_PTIMER_H

#include <stdint.h>
#include <uv.h>

#include "base/err.h"

struct ptimer;
typedef void (*ptimer_cb)(struct ptimer *t);

struct ptimer {
    uv_poll_t poll;
    int fd;
    ptimer_cb cb;
    void (*close_cb)(struct ptimer *t);
    void *data;
    uint64_t deadline_ns; /* 0 when not armed; owners may read it */
};

/* 0 or a negative errno (timerfd_create or uv_poll_init failed). */
TS_MUST_CHECK int ptimer_init(uv_loop_t *loop, struct ptimer *t);
/* Arms the timer to fire once at deadline_ns (ts_now_ns() time); a deadline
 * in the past fires on the next loop iteration. Re-arming replaces the
 * previous deadline. Returns 0 or a negative errno. */
TS_MUST_CHECK int ptimer_start_at(struct ptimer *t, uint64_t deadline_ns, ptimer_cb cb);
/* Disarms; the callback will not run until the timer is started again. */
void ptimer_stop(struct ptimer *t);
/* Closes the handle; close_cb (may be NULL) runs when the owner may free it. */
void ptimer_close(struct ptimer *t, void (*close_cb)(struct ptimer *t));

#endif
