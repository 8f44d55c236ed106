/*
 * recorder.c - the proxy's recording files (recorder.h): a queue of lines
 * and a thread that writes and rotates them.
 */
#include "chaos/recorder.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/file.h"

#define REC_FILES_MAX 100000

struct recorder {
    char dir[1024];
    uint64_t max_file, max_total;
    char redact[RECORDER_MAX_REDACT][RECORDER_POINTER_MAX];
    size_t nredact;
    uint64_t start_ns;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct buf pending; /* lines waiting for the thread */
    bool stop;
    uint64_t dropped, written;
    pthread_t thread;
    /* the exchanges in progress (recorder_reserve) */
    _Atomic uint64_t inflight;
    uint64_t max_inflight;
    _Atomic uint64_t cut[RECORDER_CUT_COUNT];
    _Atomic uint64_t skipped;

    /* the thread's */
    int fd;
    unsigned seq;   /* number of the current file */
    uint64_t size;  /* bytes in the current file */
    unsigned first; /* the oldest file still there */
    uint64_t total; /* bytes in all files */
    int error;      /* the first write error */
};

bool recorder_secret_header(const char *name)
{
    static const char *const names[] = {
        "authorization", "proxy-authorization", "cookie", "set-cookie",
        "api-key",       "x-api-key",           NULL};
    for (size_t i = 0; names[i]; i++)
        if (strcasecmp(name, names[i]) == 0)
            return true;
    return false;
}

/* One pointer segment (up to the next '/') with ~1 and ~0 undone, into seg. */
static const char *next_segment(const char *p, char *seg, size_t n)
{
    size_t o = 0;
    while (*p && *p != '/') {
        char c = *p++;
        if (c == '~' && (*p == '0' || *p == '1'))
            c = *p++ == '0' ? '~' : '/';
        if (o + 1 < n)
            seg[o++] = c;
    }
    seg[o] = '\0';
    return p;
}

static size_t redact_at(json_t *parent, const char *key, size_t index, json_t *v, const char *rest);

/* ptr's rest applied below v; a leaf is replaced in its parent. */
static size_t redact_walk(json_t *v, const char *rest)
{
    char seg[RECORDER_POINTER_MAX];
    if (*rest != '/')
        return 0;
    rest = next_segment(rest + 1, seg, sizeof seg);
    size_t n = 0;
    if (json_is_object(v)) {
        const char *k;
        json_t *c;
        void *tmp;
        json_object_foreach_safe(v, tmp, k, c)
        {
            if (strcmp(seg, "*") == 0 || strcmp(seg, k) == 0)
                n += redact_at(v, k, 0, c, rest);
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *c;
        json_array_foreach(v, i, c)
        {
            char *end;
            unsigned long idx = strtoul(seg, &end, 10);
            if (strcmp(seg, "*") == 0 || (seg[0] && !*end && idx == i))
                n += redact_at(v, NULL, i, c, rest);
        }
    }
    return n;
}

static size_t redact_at(json_t *parent, const char *key, size_t index, json_t *v, const char *rest)
{
    if (*rest)
        return redact_walk(v, rest);
    json_t *s = json_string("[redacted]");
    if (!s)
        return 0;
    if (key)
        return json_object_set_new(parent, key, s) == 0;
    return json_array_set_new(parent, index, s) == 0;
}

size_t recorder_redact(json_t *root, const char *ptr)
{
    return ptr && *ptr == '/' ? redact_walk(root, ptr) : 0;
}

bool recorder_redacts(const struct recorder *r)
{
    return r->nredact > 0;
}

void recorder_redact_all(const struct recorder *r, json_t *root)
{
    for (size_t i = 0; i < r->nredact; i++)
        (void)recorder_redact(root, r->redact[i]);
}

/* DIR/rec-NNNNNN.jsonl */
static void file_name(const struct recorder *r, unsigned seq, char *out, size_t n)
{
    snprintf(out, n, "%s/rec-%06u.jsonl", r->dir, seq);
}

/* Opens file seq (the thread's current). 0 or -errno. */
static int open_file(struct recorder *r, unsigned seq)
{
    char path[1100];
    file_name(r, seq, path, sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    if (r->fd >= 0)
        close(r->fd);
    r->fd = fd;
    r->seq = seq;
    r->size = 0;
    return 0;
}

/* Deletes the oldest files while the total is over the bound (never the current one). */
static void trim(struct recorder *r)
{
    while (r->total > r->max_total && r->first < r->seq) {
        char path[1100];
        struct stat st;
        file_name(r, r->first, path, sizeof path);
        if (stat(path, &st) == 0) {
            r->total -= (uint64_t)st.st_size < r->total ? (uint64_t)st.st_size : r->total;
            (void)unlink(path);
        }
        r->first++;
    }
}

/* Writes data to the current file, rotating first when it is full. */
static void write_out(struct recorder *r, const char *data, size_t len)
{
    if (r->size && r->size + len > r->max_file) {
        int rc = open_file(r, r->seq + 1);
        if (rc && !r->error)
            r->error = rc;
        trim(r);
    }
    size_t off = 0;
    while (off < len && r->fd >= 0) {
        ssize_t w = write(r->fd, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (!r->error)
                r->error = w < 0 ? -errno : -EIO;
            return;
        }
        off += (size_t)w;
    }
    r->size += len;
    r->total += len;
}

/* Writes whole lines only, so a rotation never splits one. */
static void write_lines(struct recorder *r, const char *data, size_t len)
{
    size_t from = 0;
    for (size_t i = 0; i < len; i++) {
        if (data[i] != '\n')
            continue;
        write_out(r, data + from, i + 1 - from);
        from = i + 1;
    }
    trim(r);
}

static void *rec_thread(void *arg)
{
    struct recorder *r = arg;
    struct buf mine;
    buf_init(&mine, RECORDER_PENDING_MAX);
    pthread_mutex_lock(&r->mu);
    for (;;) {
        if (!r->pending.len && !r->stop) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 200000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            (void)pthread_cond_timedwait(&r->cv, &r->mu, &ts);
        }
        struct buf t = r->pending;
        r->pending = mine;
        mine = t;
        bool stop = r->stop;
        pthread_mutex_unlock(&r->mu);
        if (mine.len)
            write_lines(r, mine.data, mine.len);
        buf_reset(&mine);
        pthread_mutex_lock(&r->mu);
        if (stop && !r->pending.len)
            break;
    }
    pthread_mutex_unlock(&r->mu);
    buf_release(&mine);
    return NULL;
}

/* The first free file number after the ones in the directory; their bytes in *total. */
static unsigned scan_dir(const char *dir, uint64_t *total, unsigned *first)
{
    DIR *d = opendir(dir);
    unsigned last = 0, lo = 0;
    *total = 0;
    if (!d)
        return 1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        unsigned n;
        char tail[8];
        if (sscanf(e->d_name, "rec-%6u.jsonl%1s", &n, tail) != 1 || n >= REC_FILES_MAX)
            continue;
        char path[2048];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) == 0)
            *total += (uint64_t)st.st_size;
        if (n > last)
            last = n;
        if (!lo || n < lo)
            lo = n;
    }
    closedir(d);
    *first = lo ? lo : last + 1;
    return last + 1;
}

/* Copies and checks the --redact pointers. */
static int take_redact(struct recorder *r, const struct recorder_config *cfg, char *err,
                       size_t errlen)
{
    if (cfg->nredact > RECORDER_MAX_REDACT) {
        ts_errf(err, errlen, "--redact: at most %d pointers", RECORDER_MAX_REDACT);
        return -EINVAL;
    }
    for (size_t i = 0; i < cfg->nredact; i++) {
        const char *p = cfg->redact[i];
        if (p[0] != '/' || strlen(p) >= RECORDER_POINTER_MAX) {
            ts_errf(err, errlen,
                    "--redact: expected a JSON pointer like /messages/*/content, got '%.64s'", p);
            return -EINVAL;
        }
        snprintf(r->redact[i], sizeof r->redact[i], "%s", p);
    }
    r->nredact = cfg->nredact;
    return 0;
}

int recorder_open(const struct recorder_config *cfg, struct recorder **out, char *err,
                  size_t errlen)
{
    struct recorder *r = ts_calloc(1, sizeof *r);
    int rc;
    if (!r) {
        ts_errf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    r->fd = -1;
    r->max_file = cfg->max_file ? cfg->max_file : 64ull << 20;
    r->max_total = cfg->max_total ? cfg->max_total : 1ull << 30;
    r->max_inflight = cfg->max_inflight ? cfg->max_inflight : 256ull << 20;
    if (!cfg->dir || !*cfg->dir || strlen(cfg->dir) >= sizeof r->dir) {
        ts_errf(err, errlen, "--record: expected a directory");
        rc = -EINVAL;
        goto out_free;
    }
    snprintf(r->dir, sizeof r->dir, "%s", cfg->dir);
    if ((rc = take_redact(r, cfg, err, errlen)))
        goto out_free;
    if ((rc = file_mkdirs(r->dir, err, errlen)))
        goto out_free;
    unsigned next = scan_dir(r->dir, &r->total, &r->first);
    if ((rc = open_file(r, next))) {
        ts_errf(err, errlen, "--record: cannot create a file in %s: %s", r->dir, strerror(-rc));
        goto out_free;
    }
    buf_init(&r->pending, RECORDER_PENDING_MAX);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->start_ns = ts_now_ns();
    if ((rc = -pthread_create(&r->thread, NULL, rec_thread, r))) {
        ts_errf(err, errlen, "--record: cannot start its thread");
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
        buf_release(&r->pending);
        close(r->fd);
        goto out_free;
    }
    *out = r;
    return 0;
out_free:
    ts_free(r);
    return rc;
}

int recorder_close(struct recorder *r)
{
    if (!r)
        return 0;
    pthread_mutex_lock(&r->mu);
    r->stop = true;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    int rc = r->error;
    if (r->fd >= 0 && close(r->fd) != 0 && !rc)
        rc = -errno;
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    buf_release(&r->pending);
    ts_free(r);
    return rc;
}

uint64_t recorder_start_ns(const struct recorder *r)
{
    return r->start_ns;
}

int recorder_write(struct recorder *r, json_t *exchange)
{
    char *s = json_dumps(exchange, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(10));
    json_decref(exchange);
    if (!s)
        return -ENOMEM;
    size_t n = strlen(s);
    s[n] = '\n'; /* json_dumps' NUL becomes the line's end */
    pthread_mutex_lock(&r->mu);
    int rc =
        r->pending.len + n + 1 > r->pending.max ? TS_TOOBIG : buf_append(&r->pending, s, n + 1);
    if (rc) {
        r->dropped++;
        rc = rc == -ENOMEM ? rc : TS_AGAIN;
    } else {
        r->written++;
    }
    pthread_mutex_unlock(&r->mu);
    free(s);
    return rc;
}

bool recorder_reserve(struct recorder *r, size_t n)
{
    uint64_t cur = atomic_load_explicit(&r->inflight, memory_order_relaxed);
    do {
        if (n > r->max_inflight || cur > r->max_inflight - n)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(&r->inflight, &cur, cur + n,
                                                    memory_order_relaxed, memory_order_relaxed));
    return true;
}

void recorder_unreserve(struct recorder *r, size_t n)
{
    atomic_fetch_sub_explicit(&r->inflight, n, memory_order_relaxed);
}

void recorder_count_cut(struct recorder *r, enum recorder_cut why)
{
    if ((unsigned)why < RECORDER_CUT_COUNT)
        atomic_fetch_add_explicit(&r->cut[why], 1, memory_order_relaxed);
}

void recorder_count_skip(struct recorder *r)
{
    atomic_fetch_add_explicit(&r->skipped, 1, memory_order_relaxed);
}

void recorder_stats(struct recorder *r, struct recorder_stats *out)
{
    pthread_mutex_lock(&r->mu);
    out->written = r->written;
    out->dropped = r->dropped;
    pthread_mutex_unlock(&r->mu);
    for (int i = 0; i < RECORDER_CUT_COUNT; i++)
        out->cut[i] = atomic_load_explicit(&r->cut[i], memory_order_relaxed);
    out->skipped = atomic_load_explicit(&r->skipped, memory_order_relaxed);
    out->inflight = atomic_load_explicit(&r->inflight, memory_order_relaxed);
    out->max_inflight = r->max_inflight;
}
