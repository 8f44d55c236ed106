/*
 * uring.c - batched socket sends through one io_uring per loop; uring.h is
 * the manual. Built without liburing (TS_HAVE_LIBURING=0) every open fails
 * with -ENOSYS and callers keep write(2).
 */
#include "uring.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"

#if TS_HAVE_LIBURING

#include <liburing.h>

#define SQ_ENTRIES    256
#define CQ_ENTRIES    4096
#define DEFAULT_BATCH 32

struct ts_uring {
    struct io_uring ring;
    uv_poll_t poll;       /* the ring's fd: completions of sends that waited */
    uv_check_t check;     /* after the poll phase: submit the pass's sends */
    uv_prepare_t prepare; /* before the loop blocks: timers' and idle sends */
    unsigned batch;
    unsigned queued_sends; /* of queued: sends (not cancels) */
    struct ts_uring_stats *stats;
    unsigned queued;   /* SQEs not yet submitted */
    unsigned inflight; /* submitted, completion not yet reaped */
    int handles;
    bool referenced; /* poll keeps the loop alive (while ops are in flight) */
    void (*closed)(void *arg);
    void *closed_arg;
};

bool ts_uring_built(void)
{
    return true;
}

/* The poll handle holds the loop only while a send is in flight. */
static void keep_alive(struct ts_uring *u)
{
    bool want = u->inflight + u->queued > 0;
    if (want == u->referenced)
        return;
    u->referenced = want;
    if (want)
        uv_ref((uv_handle_t *)&u->poll);
    else
        uv_unref((uv_handle_t *)&u->poll);
}

static int submit(struct ts_uring *u)
{
    if (!u->queued)
        return 0;
    int n = io_uring_submit(&u->ring);
    if (n < 0)
        return n;
    if (u->stats) {
        atomic_fetch_add_explicit(&u->stats->submits, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&u->stats->sends, u->queued_sends, memory_order_relaxed);
    }
    u->queued_sends = 0;
    u->queued -= (unsigned)n < u->queued ? (unsigned)n : u->queued;
    u->inflight += (unsigned)n;
    return 0;
}

/* Runs the done callbacks of the completions that are in. */
static void reap(struct ts_uring *u)
{
    struct io_uring_cqe *cqe;
    while (u->inflight > 0 && io_uring_peek_cqe(&u->ring, &cqe) == 0) {
        struct ts_uring_op *op = io_uring_cqe_get_data(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&u->ring, cqe);
        u->inflight--;
        if (op)
            op->done(op, res);
    }
    keep_alive(u);
}

static void submit_and_reap(struct ts_uring *u)
{
    (void)submit(u); /* -EBUSY/-EAGAIN: the SQEs stay queued for the next pass */
    reap(u);
}

static void check_cb(uv_check_t *h)
{
    submit_and_reap(h->data);
}

static void prepare_cb(uv_prepare_t *h)
{
    submit_and_reap(h->data);
}

static void poll_cb(uv_poll_t *h, int status, int events)
{
    submit_and_reap(h->data);
}

static int open_ring(struct ts_uring *u, char *why, size_t whylen)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_CQSIZE;
    p.cq_entries = CQ_ENTRIES;
    int rc = io_uring_queue_init_params(SQ_ENTRIES, &u->ring, &p);
    if (rc < 0) {
        snprintf(why, whylen, "io_uring_setup: %s%s", strerror(-rc),
                 rc == -EPERM || rc == -ENOSYS ? " (kernel.io_uring_disabled or a seccomp filter)"
                                               : "");
        return rc;
    }
    if (!(p.features & IORING_FEAT_NODROP) || !(p.features & IORING_FEAT_SUBMIT_STABLE)) {
        snprintf(why, whylen, "io_uring: kernel too old (no NODROP/SUBMIT_STABLE)");
        io_uring_queue_exit(&u->ring);
        return -ENOSYS;
    }
    return 0;
}

int ts_uring_open(struct ts_uring **out, uv_loop_t *loop, unsigned batch,
                  struct ts_uring_stats *stats, char *why, size_t whylen)
{
    struct ts_uring *u = ts_calloc(1, sizeof *u);
    if (!u) {
        snprintf(why, whylen, "io_uring: out of memory");
        return -ENOMEM;
    }
    int rc = open_ring(u, why, whylen);
    if (rc)
        goto out_free;
    rc = uv_poll_init(loop, &u->poll, u->ring.ring_fd);
    if (rc) {
        snprintf(why, whylen, "io_uring: uv_poll_init: %s", uv_strerror(rc));
        goto out_exit;
    }
    if (uv_check_init(loop, &u->check) || uv_prepare_init(loop, &u->prepare) ||
        uv_poll_start(&u->poll, UV_READABLE, poll_cb) || uv_check_start(&u->check, check_cb) ||
        uv_prepare_start(&u->prepare, prepare_cb)) /* none fails on an initialised loop */
        ts_error("uring: handle start failed");
    u->poll.data = u->check.data = u->prepare.data = u;
    uv_unref((uv_handle_t *)&u->poll);
    uv_unref((uv_handle_t *)&u->check);
    uv_unref((uv_handle_t *)&u->prepare);
    u->handles = 3;
    u->batch = batch ? batch : DEFAULT_BATCH;
    u->stats = stats;
    *out = u;
    return 0;
out_exit:
    io_uring_queue_exit(&u->ring);
out_free:
    ts_free(u);
    return rc;
}

static struct io_uring_sqe *sqe_get(struct ts_uring *u)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
    if (!sqe && submit(u) == 0)
        sqe = io_uring_get_sqe(&u->ring);
    return sqe;
}

int ts_uring_sendmsg(struct ts_uring *u, int fd, const struct msghdr *msg, struct ts_uring_op *op)
{
    struct io_uring_sqe *sqe = sqe_get(u);
    if (!sqe)
        return -EBUSY;
    io_uring_prep_sendmsg(sqe, fd, msg, MSG_NOSIGNAL);
    io_uring_sqe_set_data(sqe, op);
    u->queued++;
    u->queued_sends++;
    keep_alive(u);
    if (u->queued >= u->batch)
        (void)submit(u);
    return 0;
}

void ts_uring_cancel(struct ts_uring *u, struct ts_uring_op *op)
{
    struct io_uring_sqe *sqe = sqe_get(u);
    if (sqe) {
        io_uring_prep_cancel(sqe, op, 0);
        io_uring_sqe_set_data(sqe, NULL);
        u->queued++;
    }
    /* even with no room for the cancel, what was queued leaves before the close */
    (void)submit(u);
    keep_alive(u);
}

void ts_uring_submit(struct ts_uring *u)
{
    (void)submit(u);
}

unsigned ts_uring_inflight(const struct ts_uring *u)
{
    return u->inflight + u->queued;
}

static void handle_closed(uv_handle_t *h)
{
    struct ts_uring *u = h->data;
    if (--u->handles > 0)
        return;
    io_uring_queue_exit(&u->ring);
    void (*closed)(void *) = u->closed;
    void *arg = u->closed_arg;
    ts_free(u);
    if (closed)
        closed(arg);
}

void ts_uring_close(struct ts_uring *u, void (*closed)(void *arg), void *arg)
{
    u->closed = closed;
    u->closed_arg = arg;
    uv_close((uv_handle_t *)&u->poll, handle_closed);
    uv_close((uv_handle_t *)&u->check, handle_closed);
    uv_close((uv_handle_t *)&u->prepare, handle_closed);
}

#else /* !TS_HAVE_LIBURING */

struct ts_uring {
    int unused;
};

bool ts_uring_built(void)
{
    return false;
}

int ts_uring_open(struct ts_uring **out, uv_loop_t *loop, unsigned batch,
                  struct ts_uring_stats *stats, char *why, size_t whylen)
{
    *out = NULL;
    snprintf(why, whylen, "built without liburing");
    return -ENOSYS;
}

int ts_uring_sendmsg(struct ts_uring *u, int fd, const struct msghdr *msg, struct ts_uring_op *op)
{
    return -EBUSY;
}

void ts_uring_cancel(struct ts_uring *u, struct ts_uring_op *op)
{
}

void ts_uring_submit(struct ts_uring *u)
{
}

unsigned ts_uring_inflight(const struct ts_uring *u)
{
    return 0;
}

void ts_uring_close(struct ts_uring *u, void (*closed)(void *arg), void *arg)
{
    if (closed)
        closed(arg);
}

#endif
