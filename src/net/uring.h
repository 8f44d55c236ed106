/*
 * uring.h - batched socket sends through one io_uring per libuv loop.
 *
 * A relay that writes one small event to each of many sockets pays one
 * write(2) per event, and each write wakes the reader: on a shared core the
 * reader preempts the writer at the end of every system call, so a burst of
 * N events costs N system calls and N context switches. A ts_uring gathers
 * the sends of one loop iteration (up to a batch) and hands them to the
 * kernel in one io_uring_enter: the kernel runs the same TCP work, but the
 * writer returns to user space, and is preempted, once per batch.
 *
 * Integration with the loop: sends are queued (an SQE each) and submitted
 * from a uv_check (after the poll phase: the reads of one epoll_wait), from
 * a uv_prepare (before the loop blocks: writes made by timers and idle
 * callbacks), and whenever the batch fills. Completions are reaped right
 * after each of those submissions (a send on a socket with room completes
 * during the submission) and from a uv_poll on the ring's fd (a send that
 * waited for room). A completion's callback never runs inside the call that
 * queued it.
 *
 * Optional at build time (liburing, -Dliburing) and at run time:
 * ts_uring_open() fails where the kernel or a seccomp filter refuses
 * io_uring (containers often do), and the caller falls back to write(2).
 *
 * Life cycle:
 *
 *     ts_uring_open(&u, loop, 0, why, sizeof why);   // or the fallback
 *     ... ts_uring_sendmsg(u, fd, &msg, &op) ... op.done(&op, res) ...
 *     ts_uring_close(u, closed_cb, arg);   // once every op is done
 *
 * Every function must be called on the loop's thread.
 */
#ifndef TS_NET_URING_H
#define TS_NET_URING_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "base/err.h"

struct ts_uring;
struct ts_uring_op;

/* res: the bytes the kernel took (may be fewer than asked), or a negative
 * errno (-ECANCELED after ts_uring_cancel). */
typedef void (*ts_uring_done_cb)(struct ts_uring_op *op, int res);

/* One operation in flight, embedded by its owner (found with offsetof).
 * It must stay valid, with the msghdr and buffers it names, until done. */
struct ts_uring_op {
    ts_uring_done_cb done;
};

/* Counters a ring adds to, owned by the caller (readable from any thread). */
struct ts_uring_stats {
    _Atomic uint64_t sends;   /* sends handed to the kernel */
    _Atomic uint64_t submits; /* io_uring_enter calls that handed them over */
};

/* Whether this build has io_uring support at all. */
bool ts_uring_built(void);

/*
 * Opens a ring on loop. batch: sends gathered before a submission in the
 * middle of a loop pass (0: 32). stats: counted into (NULL: not counted);
 * it must outlive the ring. Returns 0 and *out, or a negative errno
 * with a one-line reason in why: -ENOSYS (built without liburing, or an old
 * kernel), -EPERM (refused: io_uring_disabled, seccomp), -ENOMEM, or a libuv
 * error. On error nothing needs undoing.
 */
TS_MUST_CHECK int ts_uring_open(struct ts_uring **out, uv_loop_t *loop, unsigned batch,
                                struct ts_uring_stats *stats, char *why, size_t whylen);

/*
 * Queues a sendmsg(fd, msg, MSG_NOSIGNAL); the kernel reads msg and its
 * iovecs when the batch is submitted, so they (and op) must stay untouched
 * until op->done runs. A socket with no room makes the send wait inside the
 * kernel (like uv_write), so only one send per socket should be in flight
 * to keep its bytes in order. Returns 0 (done will run exactly once) or
 * -EBUSY (the ring is full and could not be submitted: done never runs).
 */
TS_MUST_CHECK int ts_uring_sendmsg(struct ts_uring *u, int fd, const struct msghdr *msg,
                                   struct ts_uring_op *op);

/*
 * Asks the kernel to cancel op (in flight): its done runs later with
 * -ECANCELED, or with its result if it finished first. Submits at once
 * whatever is queued, so the caller may close the socket after it: no send
 * queued before reaches a descriptor number that was reused.
 */
void ts_uring_cancel(struct ts_uring *u, struct ts_uring_op *op);

/* Submits whatever is queued now (the check and prepare handles do this by
 * themselves). */
void ts_uring_submit(struct ts_uring *u);

/* Operations submitted and not yet done. */
unsigned ts_uring_inflight(const struct ts_uring *u);

/* Closes the ring's handles and frees it; closed(arg) runs when done (may be
 * NULL). Operations still in flight are cancelled by the kernel and their
 * done callbacks never run, so close only once none is. */
void ts_uring_close(struct ts_uring *u, void (*closed)(void *arg), void *arg);

#endif
