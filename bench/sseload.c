/*
 * sseload.c - a minimal streaming-chat load client for the benchmarks.
 *
 * Holds N keep-alive HTTP/1.1 connections to 127.0.0.1:PORT, each with one
 * streamed /v1/chat/completions request in flight, and re-issues a request on
 * the same connection as soon as one ends ("data: [DONE]"). It parses nothing:
 * SSE events are counted by scanning the bytes for "\ndata:", so the client
 * costs as little CPU as possible and the server is what gets measured.
 *
 * After all N streams are up and a warm-up has passed, it counts events over
 * a window, and when --watch-pid is given it reads that process's CPU time
 * (/proc/PID/stat utime+stime) and VmRSS at the window's edges. It prints
 * "window-start" and "window-end" lines as they happen (so a driver can
 * scrape the server's /metrics at the same moments), then one JSON object.
 *
 * With --record FILE it also records, for the first --record-streams
 * connections, the CLOCK_MONOTONIC time at which each SSE event was read (the
 * time read() returned the bytes holding it), and sends those requests with
 * an "X-Request-Id: sl-<conn>-<seq>" header. Every such response that was
 * sent after the window started and ended before it ended becomes one line of
 * FILE: {"request_id":"sl-...","sent_ns":N,"recv_ns":[N,...]} (one entry per
 * "\ndata:" event, the [DONE] line included; at most REC_CAP per response).
 * Without --record the client behaves as before (no extra header).
 *
 * With --recv uring (built where liburing is, linked with -luring) it reads
 * each streaming connection through io_uring instead of epoll + read(2): one
 * multishot recvmsg per connection, buffers from a provided-buffer ring, and
 * SO_TIMESTAMPNS on every socket with each completion's timestamp parsed
 * (what tokenstorm's client needs per read), the ring's fd in the epoll set
 * as it would be under libuv (COOP_TASKRUN: completions are made on the way
 * back from epoll_wait, no io_uring_enter unless there are SQEs). It exists
 * to measure whether that costs the kernel less per event than epoll + read
 * (bench/README.md, issue 21: it did not, here). --record keeps
 * CLOCK_MONOTONIC read times in both modes.
 *
 * Every loop is bounded: connection setup by --ramp-timeout, the measurement
 * by --warmup + --duration, reconnects by --max-reconnects. Loopback only.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"

#if defined(__has_include) && !defined(SSELOAD_NO_URING)
#if __has_include(<liburing.h>)
#include <liburing.h>
#include <sys/mman.h>
#define HAVE_URING 1
#endif
#endif

#define READ_BUF     65536
#define MAX_STREAMS  60000
#define MAX_SECONDS  600
#define MAX_INFLIGHT 256  /* connects in progress at once */
#define REC_CAP      4096 /* recorded events per response */

/* An event starts after a newline; "\ndata: [DONE]" ends a response. */
static const char pattern[] = "\ndata: [DONE]";
#define PAT_EVENT 6  /* matched "\ndata:" */
#define PAT_DONE  13 /* matched the whole pattern */

enum conn_state { CONN_IDLE, CONN_CONNECTING, CONN_STREAMING };

struct conn {
    int fd;
    enum conn_state state;
    unsigned char match;  /* how much of pattern matched */
    unsigned char status; /* bytes of the status line seen, up to 12 */
    char status_line[12];
    int idx;          /* index of the connection */
    unsigned gen;     /* bumped at each close: completions of an older socket are stale */
    unsigned seq;     /* requests sent on it */
    uint64_t sent_ns; /* when the current request was sent */
    uint32_t nrec;    /* events recorded for the current response */
    uint64_t *rec;    /* REC_CAP receive times, or NULL when not recorded */
};

struct opts {
    int port;
    int streams;
    double warmup_s, duration_s, ramp_timeout_s;
    long max_tokens;
    int watch_pid;
    int max_reconnects;
    const char *model;
    const char *record_path;
    int record_streams;
    bool uring; /* --recv uring */
};

struct proc_sample {
    double cpu_s; /* utime + stime */
    long rss_kb;
    bool ok;
};

struct counters {
    uint64_t events, responses, errors, reconnects;
};

static struct counters cnt;
static char request[1024];
static size_t request_len;
static int active;              /* connections streaming (a request in flight) */
static char request_head[1024]; /* the request up to the blank line, for recorded ones */
static size_t request_head_len;
static const char *request_body;
static FILE *rec_file;
static uint64_t rec_from, rec_until; /* the window; 0 until the streams are up */
static uint64_t read_ns;             /* when the bytes being scanned were read */
static uint64_t rec_lines, rec_events, rec_dropped;
static bool use_uring;
static uint64_t timestamps; /* SO_TIMESTAMPNS control messages read (--recv uring) */

static bool conn_scan(struct conn *c, const char *p, size_t n);
static void conn_close(struct conn *c);
static uint64_t now_ns(void);

#ifdef HAVE_URING
#define NBUFS 1024 /* provided buffers (a power of two) */
#define BUFSZ 4096 /* each: header, control message and payload of one completion */
static struct io_uring ring;
static struct io_uring_buf_ring *bufring;
static char *bufs;
static struct msghdr rmsg = {.msg_controllen = CMSG_SPACE(sizeof(struct timespec))};

/* Opens the ring with its buffer ring and adds its fd to the epoll set
 * (data.ptr NULL); returns -1 with a message on stderr. */
static int uring_open(int ep)
{
    struct io_uring_params p = {.flags = IORING_SETUP_CQSIZE | IORING_SETUP_COOP_TASKRUN,
                                .cq_entries = 4096};
    int e = io_uring_queue_init_params(256, &ring, &p);
    if (e) {
        fprintf(stderr, "sseload: io_uring_setup: %s\n", strerror(-e));
        return -1;
    }
    bufring = mmap(NULL, NBUFS * sizeof(struct io_uring_buf), PROT_READ | PROT_WRITE,
                   MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    bufs = ts_calloc(NBUFS, BUFSZ);
    if (bufring == MAP_FAILED || !bufs) {
        fprintf(stderr, "sseload: out of memory\n");
        return -1;
    }
    struct io_uring_buf_reg reg = {.ring_addr = (unsigned long)bufring, .ring_entries = NBUFS};
    if ((e = io_uring_register_buf_ring(&ring, &reg, 0))) {
        fprintf(stderr, "sseload: io_uring_register_buf_ring: %s\n", strerror(-e));
        return -1;
    }
    io_uring_buf_ring_init(bufring);
    for (int i = 0; i < NBUFS; i++)
        io_uring_buf_ring_add(bufring, bufs + (size_t)i * BUFSZ, BUFSZ, (unsigned short)i,
                              io_uring_buf_ring_mask(NBUFS), i);
    io_uring_buf_ring_advance(bufring, NBUFS);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, ring.ring_fd, &ev)) {
        perror("sseload: epoll_ctl ring");
        return -1;
    }
    return 0;
}

/* Queues a multishot recvmsg on c's socket (submitted before the next wait). */
static int uring_arm(struct conn *c)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    if (!sqe && io_uring_submit(&ring) >= 0)
        sqe = io_uring_get_sqe(&ring);
    if (!sqe)
        return -1;
    io_uring_prep_recvmsg_multishot(sqe, c->fd, &rmsg, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = 0;
    io_uring_sqe_set_data64(sqe, ((uint64_t)c->gen << 32) | (uint32_t)c->idx);
    return 0;
}

/* One completion's bytes: its timestamp, then the scan. False: drop c
 * (counted as an error where read(2) would have counted one). */
static bool uring_take(struct conn *c, void *buf, int res)
{
    struct io_uring_recvmsg_out *o = io_uring_recvmsg_validate(buf, res, &rmsg);
    if (!o || o->payloadlen == 0) {
        cnt.errors++; /* EOF or a malformed completion */
        return false;
    }
    for (struct cmsghdr *cm = io_uring_recvmsg_cmsg_firsthdr(o, &rmsg); cm;
         cm = io_uring_recvmsg_cmsg_nexthdr(o, &rmsg, cm))
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS)
            timestamps++;
    if (c->rec)
        read_ns = now_ns();
    return conn_scan(c, io_uring_recvmsg_payload(o, &rmsg),
                     io_uring_recvmsg_payload_length(o, res, &rmsg));
}

/* Handles the completions that are in: scans, recycles buffers, re-arms a
 * multishot that ended (ENOBUFS included) and drops a connection on EOF or
 * error. A completion of a closed socket (older gen) only gives back its
 * buffer. */
static void uring_reap(struct conn *conns)
{
    struct io_uring_cqe *cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring, head, cqe)
    {
        seen++;
        uint64_t d = io_uring_cqe_get_data64(cqe);
        struct conn *c = &conns[(uint32_t)d];
        bool live = c->gen == (unsigned)(d >> 32) && c->state == CONN_STREAMING;
        if (cqe->flags & IORING_CQE_F_BUFFER) {
            unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
            char *b = bufs + (size_t)bid * BUFSZ;
            if (live && !uring_take(c, b, cqe->res)) {
                conn_close(c);
                live = false;
            }
            io_uring_buf_ring_add(bufring, b, BUFSZ, (unsigned short)bid,
                                  io_uring_buf_ring_mask(NBUFS), 0);
            io_uring_buf_ring_advance(bufring, 1);
        } else if (live && cqe->res != -ENOBUFS) {
            cnt.errors++; /* EOF (0) or an error */
            conn_close(c);
            live = false;
        }
        if (live && !(cqe->flags & IORING_CQE_F_MORE) && uring_arm(c)) {
            cnt.errors++;
            conn_close(c);
        }
    }
    io_uring_cq_advance(&ring, seen);
}
#else
static int uring_open(int ep)
{
    (void)ep;
    fprintf(stderr, "sseload: --recv uring: built without liburing\n");
    return -1;
}
static int uring_arm(struct conn *c)
{
    (void)c;
    return -1;
}
static void uring_reap(struct conn *conns)
{
    (void)conns;
}
#endif

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double self_cpu_s(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru))
        return 0;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* CPU seconds and VmRSS of pid from /proc; ok is false if it cannot be read. */
static struct proc_sample proc_read(int pid)
{
    struct proc_sample s = {0};
    char path[64], line[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return s;
    size_t n = fread(line, 1, sizeof(line) - 1, f);
    fclose(f);
    line[n] = 0;
    /* the command name may hold spaces: fields count from the last ')' */
    char *p = strrchr(line, ')');
    unsigned long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return s;
    s.cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    if (!(f = fopen(path, "r")))
        return s;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &s.rss_kb) == 1)
            break;
    fclose(f);
    s.ok = true;
    return s;
}

static int conn_send_request(struct conn *c)
{
    /* the request is small: one write goes through on a fresh socket */
    const char *req = request;
    size_t len = request_len;
    char idreq[1400];
    if (c->rec) {
        int n = snprintf(idreq, sizeof(idreq), "%.*sX-Request-Id: sl-%d-%u\r\n\r\n%s",
                         (int)request_head_len, request_head, c->idx, ++c->seq, request_body);
        if (n < 0 || (size_t)n >= sizeof(idreq))
            return -1;
        req = idreq;
        len = (size_t)n;
        c->nrec = 0;
        c->sent_ns = now_ns();
    }
    ssize_t w = send(c->fd, req, len, MSG_NOSIGNAL);
    if (w != (ssize_t)len)
        return -1;
    c->match = 0;
    c->status = 0;
    return 0;
}

/* Writes the recorded receive times of the response that just ended, if it
 * ran entirely inside the window. */
static void conn_record_done(struct conn *c)
{
    if (!rec_from || c->sent_ns < rec_from || read_ns > rec_until)
        return;
    if (c->nrec >= REC_CAP) {
        rec_dropped++;
        return;
    }
    fprintf(rec_file, "{\"request_id\":\"sl-%d-%u\",\"sent_ns\":%" PRIu64 ",\"recv_ns\":[", c->idx,
            c->seq, c->sent_ns);
    for (uint32_t i = 0; i < c->nrec; i++)
        fprintf(rec_file, i ? ",%" PRIu64 : "%" PRIu64, c->rec[i]);
    fputs("]}\n", rec_file);
    rec_lines++;
    rec_events += c->nrec;
}

static void conn_close(struct conn *c)
{
    /* a multishot recv holds the socket: shut it down so that it ends */
    if (c->fd >= 0 && use_uring && c->state == CONN_STREAMING)
        shutdown(c->fd, SHUT_RDWR);
    if (c->fd >= 0)
        close(c->fd);
    c->gen++;
    if (c->state == CONN_STREAMING)
        active--;
    c->fd = -1;
    c->state = CONN_IDLE;
}

static int conn_open(int ep, struct conn *c, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev)) {
        close(fd);
        return -1;
    }
    c->fd = fd;
    c->state = CONN_CONNECTING;
    return 0;
}

static void conn_on_connected(int ep, struct conn *c)
{
    int err = 0;
    socklen_t len = sizeof(err);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) || err ||
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev)) {
        cnt.errors++;
        conn_close(c);
        return;
    }
    c->state = CONN_STREAMING;
    active++;
    if (use_uring) {
        int one = 1;
        if (setsockopt(c->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)) ||
            epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL) || uring_arm(c)) {
            cnt.errors++;
            conn_close(c);
            return;
        }
    }
    if (conn_send_request(c)) {
        cnt.errors++;
        conn_close(c);
    }
}

/* Scans what arrived; returns false when the connection must be dropped. */
static bool conn_scan(struct conn *c, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (c->status < sizeof(c->status_line)) {
            if (c->status == 0 && ch != 'H')
                continue; /* the previous response's chunked trailer */
            c->status_line[c->status++] = ch;
            if (c->status == sizeof(c->status_line) && memcmp(c->status_line + 8, " 200", 4)) {
                cnt.errors++;
                return false; /* not a stream: drop it rather than parse the body */
            }
            continue;
        }
        if (ch == pattern[c->match]) {
            if (++c->match == PAT_EVENT) {
                cnt.events++;
                if (c->rec && c->nrec < REC_CAP)
                    c->rec[c->nrec++] = read_ns;
                else if (c->rec)
                    c->nrec = REC_CAP; /* too many: the response is not written */
            } else if (c->match == PAT_DONE) {
                cnt.responses++;
                if (c->rec)
                    conn_record_done(c);
                /* the rest of this read is the chunked trailer: skip it */
                return conn_send_request(c) == 0;
            }
        } else {
            c->match = ch == '\n';
        }
    }
    return true;
}

static void usage(void)
{
    fprintf(stderr, "usage: sseload --port P --streams N [--warmup S] [--duration S]\n"
                    "       [--max-tokens M] [--model NAME] [--watch-pid PID]\n"
                    "       [--ramp-timeout S] [--max-reconnects N]\n"
                    "       [--record FILE [--record-streams N]] [--recv read|uring]\n");
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.streams = 100,
                       .warmup_s = 3,
                       .duration_s = 10,
                       .ramp_timeout_s = 30,
                       .max_tokens = 30000,
                       .max_reconnects = 1000,
                       .model = "tokenstorm/tiny"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            usage();
            return -1;
        }
        i++;
        if (!strcmp(a, "--port"))
            o->port = atoi(v);
        else if (!strcmp(a, "--streams"))
            o->streams = atoi(v);
        else if (!strcmp(a, "--warmup"))
            o->warmup_s = atof(v);
        else if (!strcmp(a, "--duration"))
            o->duration_s = atof(v);
        else if (!strcmp(a, "--ramp-timeout"))
            o->ramp_timeout_s = atof(v);
        else if (!strcmp(a, "--max-tokens"))
            o->max_tokens = atol(v);
        else if (!strcmp(a, "--model"))
            o->model = v;
        else if (!strcmp(a, "--watch-pid"))
            o->watch_pid = atoi(v);
        else if (!strcmp(a, "--max-reconnects"))
            o->max_reconnects = atoi(v);
        else if (!strcmp(a, "--record"))
            o->record_path = v;
        else if (!strcmp(a, "--record-streams"))
            o->record_streams = atoi(v);
        else if (!strcmp(a, "--recv") && (!strcmp(v, "read") || !strcmp(v, "uring")))
            o->uring = !strcmp(v, "uring");
        else {
            usage();
            return -1;
        }
    }
    if (o->port <= 0 || o->port > 65535 || o->streams < 1 || o->streams > MAX_STREAMS ||
        o->warmup_s < 0 || o->duration_s <= 0 || o->warmup_s + o->duration_s > MAX_SECONDS ||
        o->ramp_timeout_s <= 0 || o->ramp_timeout_s > MAX_SECONDS || o->max_tokens < 1 ||
        strlen(o->model) > 200 || o->record_streams < 0) {
        usage();
        return -1;
    }
    return 0;
}

static void build_request(const struct opts *o)
{
    char body[512];
    int bl = snprintf(body, sizeof(body),
                      "{\"model\":\"%s\",\"stream\":true,\"max_tokens\":%ld,\"ignore_eos\":true,"
                      "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
                      o->model, o->max_tokens);
    request_len = (size_t)snprintf(request, sizeof(request),
                                   "POST /v1/chat/completions HTTP/1.1\r\n"
                                   "Host: 127.0.0.1\r\n"
                                   "Content-Type: application/json\r\n"
                                   "Content-Length: %d\r\n\r\n%s",
                                   bl, body);
    /* the same request without its blank line and body, for the recorded ones */
    char *blank = strstr(request, "\r\n\r\n");
    request_head_len = (size_t)(blank - request) + 2;
    memcpy(request_head, request, request_head_len);
    request_body = blank + 4;
}

int main(int argc, char **argv)
{
    struct opts o;
    if (parse_opts(argc, argv, &o))
        return 2;
    build_request(&o);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct conn *conns = ts_calloc((size_t)o.streams, sizeof(*conns));
    struct epoll_event *evs = ts_calloc(1024, sizeof(*evs));
    static char rbuf[READ_BUF];
    int rc = 1;
    if (ep < 0 || !conns || !evs) {
        fprintf(stderr, "sseload: out of memory or epoll\n");
        goto out;
    }
    use_uring = o.uring;
    if (use_uring && uring_open(ep))
        goto out;
    for (int i = 0; i < o.streams; i++) {
        conns[i].fd = -1;
        conns[i].idx = i;
    }
    if (o.record_path) {
        int nrec = o.record_streams && o.record_streams < o.streams ? o.record_streams : o.streams;
        if (!(rec_file = fopen(o.record_path, "w"))) {
            perror("sseload: --record");
            goto out;
        }
        for (int i = 0; i < nrec; i++)
            if (!(conns[i].rec = ts_calloc(REC_CAP, sizeof(uint64_t)))) {
                fprintf(stderr, "sseload: out of memory\n");
                goto out;
            }
    }

    uint64_t t0 = now_ns(), ramp_deadline = t0 + (uint64_t)(o.ramp_timeout_s * 1e9);
    uint64_t up_ns = 0, win_start = 0, win_end = 0, next_sec = 0;
    struct counters c0 = {0};
    struct proc_sample p0 = {0}, p1 = {0};
    double self0 = 0, self1 = 0;
    uint64_t sec_events[MAX_SECONDS + 1] = {0}, sec_last = 0;
    int nsec = 0, connecting = 0, next_open = 0;

    for (;;) {
        uint64_t now = now_ns();
        /* open connections, a bounded number at a time, until all streams are up */
        for (int k = 0;
             active + connecting < o.streams && connecting < MAX_INFLIGHT && k < o.streams; k++) {
            struct conn *c = &conns[next_open];
            next_open = (next_open + 1) % o.streams;
            if (c->state != CONN_IDLE)
                continue;
            if (cnt.reconnects >= (uint64_t)o.max_reconnects + (uint64_t)o.streams)
                break;
            cnt.reconnects++;
            if (conn_open(ep, c, o.port) == 0)
                connecting++;
            else
                cnt.errors++;
        }
        if (!up_ns) {
            if (active == o.streams) {
                up_ns = now;
                win_start = up_ns + (uint64_t)(o.warmup_s * 1e9);
                win_end = win_start + (uint64_t)(o.duration_s * 1e9);
                rec_from = win_start;
                rec_until = win_end;
                fprintf(stderr, "sseload: %d streams up after %.2f s\n", o.streams,
                        (double)(now - t0) / 1e9);
            } else if (now > ramp_deadline) {
                fprintf(stderr, "sseload: only %d of %d streams up after %.0f s\n", active,
                        o.streams, o.ramp_timeout_s);
                goto out;
            }
        }
        if (up_ns && !next_sec && now >= win_start) {
            c0 = cnt;
            self0 = self_cpu_s();
            if (o.watch_pid)
                p0 = proc_read(o.watch_pid);
            printf("window-start\n");
            fflush(stdout);
            next_sec = win_start + 1000000000ull;
            sec_last = cnt.events;
        }
        if (next_sec && now >= next_sec && nsec < MAX_SECONDS) {
            sec_events[nsec++] = cnt.events - sec_last;
            sec_last = cnt.events;
            next_sec += 1000000000ull;
        }
        if (up_ns && now >= win_end) {
            self1 = self_cpu_s();
            if (o.watch_pid)
                p1 = proc_read(o.watch_pid);
            printf("window-end\n");
            fflush(stdout);
            break;
        }
#ifdef HAVE_URING
        if (use_uring && io_uring_submit(&ring) < 0) {
            perror("sseload: io_uring_submit");
            goto out;
        }
#endif
        int n = epoll_wait(ep, evs, 1024, 5);
        if (n < 0 && errno != EINTR) {
            perror("sseload: epoll_wait");
            goto out;
        }
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if (!c) {
                uring_reap(conns); /* the ring's fd */
                continue;
            }
            if (c->state == CONN_CONNECTING) {
                connecting--;
                conn_on_connected(ep, c);
                continue;
            }
            ssize_t r = read(c->fd, rbuf, sizeof(rbuf));
            if (r > 0) {
                if (c->rec)
                    read_ns = now_ns();
                if (!conn_scan(c, rbuf, (size_t)r))
                    conn_close(c);
            } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
                cnt.errors++;
                conn_close(c);
            }
        }
    }

    double win_s = (double)(win_end - win_start) / 1e9;
    uint64_t ev = cnt.events - c0.events;
    uint64_t smin = UINT64_MAX, smax = 0;
    for (int i = 0; i < nsec; i++) {
        smin = sec_events[i] < smin ? sec_events[i] : smin;
        smax = sec_events[i] > smax ? sec_events[i] : smax;
    }
    printf("{\"streams\":%d,\"window_s\":%.3f,\"events\":%" PRIu64 ",\"events_per_s\":%.1f,"
           "\"events_per_s_min_1s\":%" PRIu64 ",\"events_per_s_max_1s\":%" PRIu64 ","
           "\"responses\":%" PRIu64 ",\"errors\":%" PRIu64 ",\"connects\":%" PRIu64 ","
           "\"client_cpu_s\":%.3f",
           o.streams, win_s, ev, (double)ev / win_s, nsec ? smin : 0, smax,
           cnt.responses - c0.responses, cnt.errors, cnt.reconnects, self1 - self0);
    if (use_uring)
        printf(",\"recv\":\"uring\",\"timestamps\":%" PRIu64, timestamps);
    if (rec_file)
        printf(",\"recorded_responses\":%" PRIu64 ",\"recorded_events\":%" PRIu64
               ",\"recorded_dropped\":%" PRIu64,
               rec_lines, rec_events, rec_dropped);
    if (o.watch_pid && p0.ok && p1.ok)
        printf(",\"server_cpu_s\":%.3f,\"server_rss_kb_start\":%ld,\"server_rss_kb_end\":%ld",
               p1.cpu_s - p0.cpu_s, p0.rss_kb, p1.rss_kb);
    printf("}\n");
    fflush(stdout);
    rc = cnt.errors ? 3 : 0;
out:
    for (int i = 0; conns && i < o.streams; i++) {
        if (conns[i].fd >= 0)
            close(conns[i].fd);
        ts_free(conns[i].rec);
    }
    if (rec_file && fclose(rec_file)) {
        perror("sseload: --record");
        rc = 1;
    }
    ts_free(conns);
    ts_free(evs);
    if (ep >= 0)
        close(ep);
    return rc;
}
