/*
 * relayfloor.c - the least a relay can do per event: a TCP byte pipe for
 * the benchmarks (bench/proxy_overhead.py, issue 21).
 *
 * Listens on 127.0.0.1 (an ephemeral port, printed as "listening on PORT"),
 * and for each accepted connection opens one to 127.0.0.1:UPSTREAM; then it
 * copies bytes both ways until either side closes. It parses nothing (no
 * HTTP, no SSE, no timestamps, no fault engine), so its CPU per relayed
 * event is the kernel's floor for any relay that forwards each event as it
 * arrives: one epoll report and one read per event on the upstream socket,
 * one send to the client. What tokenstorm proxy and nginx spend above it is
 * their own work.
 *
 * --send write: each read is written at once with write(2) (as nginx does
 * with writev); the rest of a short write waits for EPOLLOUT.
 * --send uring (where liburing is; the default there): the sends of one
 * epoll pass are queued on one io_uring and submitted in batches of 32 with
 * one io_uring_enter, as tokenstorm proxy's server does (src/net/uring.c):
 * one send in flight per socket, bytes read meanwhile wait in a second
 * buffer.
 *
 * Bounded: at most --max-pairs connection pairs (further clients are
 * closed), BUF bytes per direction and buffer (a full buffer stops reading
 * that side until its send completes), and the process ends by itself after
 * --lifetime seconds. Loopback only.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#if defined(__has_include) && !defined(RELAYFLOOR_NO_URING)
#if __has_include(<liburing.h>)
#include <liburing.h>
#define HAVE_URING 1
#endif
#endif
#ifndef HAVE_URING
#define HAVE_URING 0
#endif

#define BUF        16384
#define BATCH      32
#define MAX_EV     1024
#define SQ_SIZE    256
#define CQ_SIZE    4096
#define TAG_LISTEN ((void *)1)
#define TAG_RING   ((void *)2)

/* One direction of a pair: bytes read from `from` go to `to`. */
struct side {
    int fd;            /* the socket this side reads */
    struct side *peer; /* the other direction (its fd is where we write) */
    char buf[2][BUF];  /* [fill]: being read into; [!fill]: in flight (uring) */
    size_t len[2];     /* bytes in each buffer */
    size_t off;        /* write mode: bytes of buf[0] already written */
    int fill;
    bool sending; /* a send from buf[!fill] is in flight */
    bool reading; /* EPOLLIN is armed on fd */
    bool eof;
    struct pair *pair;
};

struct pair {
    struct side c, u; /* c reads the client (sends upstream); u reads upstream */
    int inflight;     /* uring sends not yet completed */
    bool dead;
    struct pair *grave_next; /* closed: freed at the end of the loop pass with no send in flight */
};

static int ep, mode_uring, npairs, max_pairs = 4096;
static struct pair *graves;
#if HAVE_URING
static struct io_uring ring;
static unsigned queued;
#endif

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* Sets what epoll watches on s->fd: reading it (in), and room to write
 * into it for the peer's waiting bytes (write mode). */
static void arm(struct side *s, bool in)
{
    bool out = !mode_uring && s->peer->len[0] > 0;
    struct epoll_event ev = {.events = (in ? EPOLLIN : 0) | (out ? EPOLLOUT : 0), .data.ptr = s};
    s->reading = in;
    if (epoll_ctl(ep, EPOLL_CTL_MOD, s->fd, &ev) != 0)
        die("epoll_ctl");
}

#if HAVE_URING
static void submit(void)
{
    if (queued && io_uring_submit(&ring) >= 0)
        queued = 0;
}
#endif

static void pair_close(struct pair *p)
{
    if (p->dead)
        return;
    p->dead = true;
#if HAVE_URING
    if (mode_uring)
        submit(); /* queued sends take their sockets before the fds can be reused */
#endif
    close(p->c.fd);
    close(p->u.fd);
    npairs--;
    p->grave_next = graves;
    graves = p;
}

/* Frees the closed pairs no send refers to any more (after the pass, so no
 * epoll report of the pass points to freed memory). */
static void bury(void)
{
    struct pair **pp = &graves;
    while (*pp) {
        struct pair *p = *pp;
        if (p->inflight == 0) {
            *pp = p->grave_next;
            free(p);
        } else
            pp = &p->grave_next;
    }
}

#if HAVE_URING
static void send_start(struct side *s)
{
    int b = s->fill;
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    if (!sqe) {
        submit();
        sqe = io_uring_get_sqe(&ring);
        if (!sqe)
            die("io_uring_get_sqe");
    }
    io_uring_prep_send(sqe, s->peer->fd, s->buf[b], s->len[b], MSG_NOSIGNAL | MSG_WAITALL);
    io_uring_sqe_set_data(sqe, s);
    s->fill = !b;
    s->len[s->fill] = 0;
    s->sending = true;
    s->pair->inflight++;
    if (++queued >= BATCH)
        submit();
}

static void reap(void)
{
    struct io_uring_cqe *cqe;
    while (io_uring_peek_cqe(&ring, &cqe) == 0) {
        struct side *s = io_uring_cqe_get_data(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&ring, cqe);
        struct pair *p = s->pair;
        p->inflight--;
        s->sending = false;
        if (p->dead)
            continue;
        if (res < 0 || (size_t)res < s->len[!s->fill]) {
            pair_close(p);
            continue;
        }
        if (s->len[s->fill] > 0)
            send_start(s);
        else if (s->eof)
            shutdown(s->peer->fd, SHUT_WR);
        if (!s->reading && !s->eof)
            arm(s, true);
    }
}
#endif

/* write mode: writes what buf[0] holds from off; true when all of it went. */
static bool write_out(struct side *s)
{
    while (s->off < s->len[0]) {
        ssize_t n = write(s->peer->fd, s->buf[0] + s->off, s->len[0] - s->off);
        if (n < 0) {
            if (errno == EAGAIN)
                return false;
            pair_close(s->pair);
            return false;
        }
        s->off += (size_t)n;
    }
    s->len[0] = s->off = 0;
    return true;
}

static void on_readable(struct side *s)
{
    int b = mode_uring ? s->fill : 0;
    size_t room = BUF - s->len[b];
    if (room == 0) {
        arm(s, false); /* re-armed when the send ends */
        return;
    }
    ssize_t n = read(s->fd, s->buf[b] + s->len[b], room);
    if (n < 0 && errno == EAGAIN)
        return;
    if (n <= 0) {
        s->eof = true;
        if (n < 0 || s->peer->eof) {
            pair_close(s->pair);
            return;
        }
        arm(s, false);
        if (!s->sending && s->len[b] == 0)
            shutdown(s->peer->fd, SHUT_WR);
        return;
    }
    s->len[b] += (size_t)n;
#if HAVE_URING
    if (mode_uring) {
        if (!s->sending)
            send_start(s);
        return;
    }
#endif
    if (!write_out(s) && !s->pair->dead) { /* the rest waits for room in the peer's socket */
        arm(s, false);
        arm(s->peer, s->peer->reading);
    }
}

/* s->fd is ready: readable for s, or (write mode) writable for the peer's
 * waiting bytes. */
static void on_event(struct side *s, unsigned events)
{
    struct side *w = s->peer;
    if (!mode_uring && (events & EPOLLOUT) && w->len[0] > 0) {
        if (!write_out(w) || s->pair->dead)
            return;
        arm(s, s->reading);
        if (w->eof)
            shutdown(s->fd, SHUT_WR);
        else
            arm(w, true);
        return;
    }
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
        on_readable(s);
}

static void side_init(struct side *s, struct pair *p, int fd, struct side *peer)
{
    s->fd = fd;
    s->peer = peer;
    s->pair = p;
    s->reading = true;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
        die("epoll_ctl add");
}

static void on_accept(int lfd, int upstream_port)
{
    for (int i = 0; i < 64; i++) {
        int cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0)
            return;
        if (npairs >= max_pairs) {
            close(cfd);
            continue;
        }
        int ufd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)upstream_port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int one = 1;
        if (ufd < 0 || connect(ufd, (struct sockaddr *)&a, sizeof a) != 0) {
            perror("relayfloor: connect upstream");
            close(cfd);
            if (ufd >= 0)
                close(ufd);
            continue;
        }
        (void)setsockopt(ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        (void)setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (fcntl(ufd, F_SETFL, fcntl(ufd, F_GETFL) | O_NONBLOCK) != 0)
            die("fcntl");
        struct pair *p = calloc(1, sizeof *p);
        if (!p)
            die("calloc");
        side_init(&p->c, p, cfd, &p->u);
        side_init(&p->u, p, ufd, &p->c);
        npairs++;
    }
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void usage(void)
{
    fprintf(stderr, "usage: relayfloor --upstream PORT [--send write|uring] [--lifetime S] "
                    "[--max-pairs N]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int upstream = 0;
    double lifetime = 600;
    mode_uring = HAVE_URING;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            usage();
        if (!strcmp(argv[i], "--upstream"))
            upstream = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--send")) {
            const char *m = argv[++i];
            if (!strcmp(m, "write"))
                mode_uring = 0;
            else if (!strcmp(m, "uring") && HAVE_URING)
                mode_uring = 1;
            else if (!strcmp(m, "uring")) {
                fprintf(stderr, "relayfloor: built without liburing: --send write only\n");
                return 2;
            } else
                usage();
        } else if (!strcmp(argv[i], "--lifetime"))
            lifetime = atof(argv[++i]);
        else if (!strcmp(argv[i], "--max-pairs"))
            max_pairs = atoi(argv[++i]);
        else
            usage();
    }
    if (upstream <= 0 || upstream > 65535 || lifetime <= 0 || lifetime > 3600 || max_pairs <= 0 ||
        max_pairs > 100000)
        usage();
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, 4096) != 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &alen) != 0)
        die("relayfloor: listen");
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1");
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = TAG_LISTEN};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) != 0)
        die("epoll_ctl");
#if HAVE_URING
    if (mode_uring) {
        struct io_uring_params p = {.flags = IORING_SETUP_CQSIZE, .cq_entries = CQ_SIZE};
        int rc = io_uring_queue_init_params(SQ_SIZE, &ring, &p);
        if (rc < 0) {
            fprintf(stderr, "relayfloor: io_uring: %s\n", strerror(-rc));
            return 1;
        }
        struct epoll_event rev = {.events = EPOLLIN, .data.ptr = TAG_RING};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, ring.ring_fd, &rev) != 0)
            die("epoll_ctl ring");
    }
#endif
    printf("relayfloor: sends by %s; listening on %d\n", mode_uring ? "io_uring" : "write(2)",
           ntohs(a.sin_port));
    fflush(stdout);
    double end = now_s() + lifetime;
    struct epoll_event evs[MAX_EV];
    while (now_s() < end) {
        int n = epoll_wait(ep, evs, MAX_EV, 1000);
        if (n < 0 && errno != EINTR)
            die("epoll_wait");
        for (int i = 0; i < n; i++) {
            void *tag = evs[i].data.ptr;
            if (tag == TAG_LISTEN)
                on_accept(lfd, upstream);
            else if (tag != TAG_RING && !((struct side *)tag)->pair->dead)
                on_event(tag, evs[i].events);
        }
#if HAVE_URING
        if (mode_uring) {
            submit();
            reap();
            submit();
        }
#endif
        bury();
    }
    return 0;
}
