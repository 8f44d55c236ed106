#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/seccomp.h>

#include "net/http_server.h"
#include "net/uring.h"

#define PAIRS 40

struct send {
    struct ts_uring_op op;
    struct msghdr msg;
    struct iovec iov[2];
    char a[16], b[16];
    int res;
    int calls;
};

struct fixture {
    struct ts_uring *u;
    struct ts_uring_stats stats;
    uv_loop_t loop;
    uv_timer_t guard;
    int closed;
    bool in_call; /* inside ts_uring_sendmsg: done must not run */
};

static struct fixture *cur;

static void on_done(struct ts_uring_op *op, int res)
{
    struct send *s = (struct send *)op;
    assert_false(cur->in_call);
    s->res = res;
    s->calls++;
}

static void on_closed(void *arg)
{
    ((struct fixture *)arg)->closed++;
}

static void on_guard(uv_timer_t *h)
{
    fail_msg("the ring's completions did not come in time");
}

/* 0 and a ring, or 1: io_uring cannot run here (skipped, with the reason). */
static int open_ring(struct fixture *f, unsigned batch)
{
    char why[160] = "";
    memset(f, 0, sizeof *f);
    cur = f;
    assert_int_equal(uv_loop_init(&f->loop), 0);
    int rc = ts_uring_open(&f->u, &f->loop, batch, &f->stats, why, sizeof why);
    if (rc) {
        assert_true(why[0] != '\0');
        if (!ts_uring_built())
            assert_int_equal(rc, -ENOSYS);
        assert_int_equal(uv_loop_close(&f->loop), 0);
        fprintf(stderr, "io_uring unavailable: %s\n", why);
        return 1;
    }
    assert_int_equal(uv_timer_init(&f->loop, &f->guard), 0);
    assert_int_equal(uv_timer_start(&f->guard, on_guard, 10000, 0), 0);
    uv_unref((uv_handle_t *)&f->guard);
    return 0;
}

static void close_ring(struct fixture *f)
{
    assert_int_equal(ts_uring_inflight(f->u), 0);
    ts_uring_close(f->u, on_closed, f);
    uv_close((uv_handle_t *)&f->guard, NULL);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(f->closed, 1);
    assert_int_equal(uv_loop_close(&f->loop), 0);
}

static void send_prep(struct send *s, const char *a, const char *b)
{
    memset(s, 0, sizeof *s);
    s->op.done = on_done;
    s->res = -1;
    snprintf(s->a, sizeof s->a, "%s", a);
    snprintf(s->b, sizeof s->b, "%s", b);
    s->iov[0] = (struct iovec){s->a, strlen(s->a)};
    s->iov[1] = (struct iovec){s->b, strlen(s->b)};
    s->msg.msg_iov = s->iov;
    s->msg.msg_iovlen = 2;
}

static int queue(struct fixture *f, int fd, struct send *s)
{
    f->in_call = true;
    int rc = ts_uring_sendmsg(f->u, fd, &s->msg, &s->op);
    f->in_call = false;
    return rc;
}

static void pair(int sv[2], int sndbuf)
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    if (sndbuf)
        assert_int_equal(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf), 0);
}

/* 40 sockets' sends, batch 8: five system calls carry them, every byte
 * arrives, each done runs once with the count, none inside the call. */
static void test_batched_sends(void **state)
{
    struct fixture f;
    if (open_ring(&f, 8))
        skip();
    static struct send s[PAIRS];
    int sv[PAIRS][2];
    for (int i = 0; i < PAIRS; i++) {
        char a[16];
        snprintf(a, sizeof a, "event %d;", i);
        pair(sv[i], 0);
        send_prep(&s[i], a, "data\n");
        assert_int_equal(queue(&f, sv[i][0], &s[i]), 0);
    }
    assert_int_equal(atomic_load(&f.stats.submits), PAIRS / 8);
    assert_int_equal(ts_uring_inflight(f.u), PAIRS);
    assert_int_equal(uv_run(&f.loop, UV_RUN_NOWAIT), 0);
    for (int i = 0; i < PAIRS; i++) {
        char want[32], got[64];
        snprintf(want, sizeof want, "event %d;data\n", i);
        assert_int_equal(s[i].calls, 1);
        assert_int_equal(s[i].res, (int)strlen(want));
        ssize_t n = read(sv[i][1], got, sizeof got);
        assert_int_equal(n, (ssize_t)strlen(want));
        assert_memory_equal(got, want, (size_t)n);
        close(sv[i][0]);
        close(sv[i][1]);
    }
    assert_int_equal(atomic_load(&f.stats.sends), PAIRS);
    assert_int_equal(atomic_load(&f.stats.submits), PAIRS / 8);
    close_ring(&f);
}

/* Fills fd's socket buffer; returns the bytes written. */
static size_t fill(int fd)
{
    static char junk[4096];
    size_t total = 0;
    for (int i = 0; i < 100000; i++) {
        ssize_t n = write(fd, junk, sizeof junk);
        if (n < 0) {
            assert_int_equal(errno, EAGAIN);
            return total;
        }
        total += (size_t)n;
    }
    fail_msg("the socket buffer never filled");
    return 0;
}

struct drain {
    uv_timer_t t;
    int fd;
    size_t left;
};

static void on_drain(uv_timer_t *h)
{
    struct drain *d = h->data;
    char buf[65536];
    while (d->left > 0) {
        ssize_t n = read(d->fd, buf, sizeof buf);
        if (n <= 0)
            break;
        d->left -= (size_t)n;
    }
    uv_close((uv_handle_t *)h, NULL);
}

/* A send on a full socket waits in the kernel (the flush submits it, done
 * does not run), and completes through the ring's poll once the reader
 * makes room: the loop stays alive for it meanwhile. */
static void test_send_waits_for_room(void **state)
{
    struct fixture f;
    if (open_ring(&f, 0))
        skip();
    int sv[2];
    pair(sv, 4096);
    size_t filled = fill(sv[0]);
    struct send s;
    send_prep(&s, "after", "-full");
    assert_int_equal(queue(&f, sv[0], &s), 0);
    assert_int_equal(uv_run(&f.loop, UV_RUN_NOWAIT), 1); /* alive: the send waits */
    assert_int_equal(s.calls, 0);
    assert_int_equal(ts_uring_inflight(f.u), 1);
    struct drain d = {.fd = sv[1], .left = filled};
    d.t.data = &d;
    assert_int_equal(uv_timer_init(&f.loop, &d.t), 0);
    assert_int_equal(uv_timer_start(&d.t, on_drain, 20, 0), 0);
    assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.res, 10);
    char got[16];
    assert_int_equal(read(sv[1], got, sizeof got), 10);
    assert_memory_equal(got, "after-full", 10);
    close(sv[0]);
    close(sv[1]);
    close_ring(&f);
}

/* A waiting send is cancelled: done runs once with -ECANCELED and the
 * socket can be closed right after the cancel. */
static void test_cancel(void **state)
{
    struct fixture f;
    if (open_ring(&f, 0))
        skip();
    int sv[2];
    pair(sv, 4096);
    (void)fill(sv[0]);
    struct send s;
    send_prep(&s, "never", "");
    assert_int_equal(queue(&f, sv[0], &s), 0);
    ts_uring_cancel(f.u, &s.op); /* submits the send and its cancel at once */
    close(sv[0]);
    assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.res, -ECANCELED);
    close(sv[1]);
    close_ring(&f);
}

/* A send to a closed peer fails with its errno, not a signal. */
static void test_peer_gone(void **state)
{
    struct fixture f;
    if (open_ring(&f, 0))
        skip();
    int sv[2];
    pair(sv, 0);
    close(sv[1]);
    struct send s;
    send_prep(&s, "x", "y");
    assert_int_equal(queue(&f, sv[0], &s), 0);
    assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.res, -EPIPE);
    close(sv[0]);
    close_ring(&f);
}

/* A seccomp filter like a container's: io_uring_setup fails with EPERM. */
static int deny_io_uring(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
        return -errno;
    return 0;
}

static void on_request(struct http_request *req, void *ctx)
{
    (void)http_respond(req, 200, "text/plain", NULL, "ok", 2);
}

/* In the filtered child: the ring is refused with the reason, and a server
 * that asked for io_uring falls back to write(2) and says why. Exit 0: all
 * held; n > 0: check n failed. */
static int refused_child(void)
{
    if (deny_io_uring())
        return 1;
    uv_loop_t loop;
    if (uv_loop_init(&loop))
        return 2;
    struct ts_uring *u = NULL;
    char why[160] = "";
    int rc = ts_uring_open(&u, &loop, 0, NULL, why, sizeof why);
    if (rc != -EPERM || u || !strstr(why, "seccomp"))
        return 3;
    struct http_server s;
    struct http_server_config cfg = {.host = "127.0.0.1", .io_uring = true};
    if (http_server_init(&s, &loop, &cfg, on_request, NULL))
        return 4;
    const char *reason = NULL;
    bool on = http_server_io_uring(&s, &reason);
    if (on || !reason || !strstr(reason, "io_uring_setup: Operation not permitted"))
        return 5;
    (void)http_server_shutdown(&s, 0, NULL);
    (void)uv_run(&loop, UV_RUN_DEFAULT);
    return uv_loop_close(&loop) ? 6 : 0;
}

/* Where a seccomp filter refuses io_uring (containers often do), opening
 * fails with -EPERM and a reason, and the server keeps write(2). */
static void test_refused_by_seccomp(void **state)
{
    if (!ts_uring_built())
        skip();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(refused_child());
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batched_sends),
        cmocka_unit_test(test_send_waits_for_room),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_peer_gone),
        cmocka_unit_test(test_refused_by_seccomp),
    };
    return cmocka_run_group_tests_name("uring", tests, NULL, NULL);
}
