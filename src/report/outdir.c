/*
 * outdir.c - claiming a result directory: create, lock, refuse or clear
 * what tokenstorm wrote there before (see outdir.h).
 */
#include "report/outdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "base/clock.h"

static const char *const owned_files[] = {
    "result.json", "requests.jsonl",  "latency.hlog",   "sweep.json",          "experiment.json",
    "run.txt",     "result.json.tmp", "sweep.json.tmp", "experiment.json.tmp",
};
static const char *const owned_dirs[] = {"rank-[0-9]*", "step-*", "interference-*", "run"};

/* A file tokenstorm writes; deeper than the top also a step's summary and lock. */
static bool owned_file(const char *name, int depth)
{
    for (size_t i = 0; i < sizeof(owned_files) / sizeof(owned_files[0]); i++)
        if (!strcmp(name, owned_files[i]))
            return true;
    return depth > 0 && (!strcmp(name, "summary.txt") || !strcmp(name, OUTDIR_LOCK_NAME));
}

static bool owned_dir(const char *name)
{
    for (size_t i = 0; i < sizeof(owned_dirs) / sizeof(owned_dirs[0]); i++)
        if (!fnmatch(owned_dirs[i], name, 0))
            return true;
    return false;
}

void outdir_init(struct outdir *od)
{
    memset(od, 0, sizeof(*od));
    od->lock_fd = -1;
}

void outdir_release(struct outdir *od)
{
    if (od->lock_fd >= 0)
        close(od->lock_fd); /* closing the last descriptor drops the flock */
    od->lock_fd = -1;
}

void outdir_default_name(char *buf, size_t n, const char *kind)
{
    char stamp[40];
    ts_wall_format(ts_wall_ns(), stamp, sizeof(stamp));
    stamp[19] = '\0'; /* 2026-11-29T17:31:48 */
    for (char *p = stamp; *p; p++)
        if (*p == ':')
            *p = '-';
    snprintf(buf, n, "tokenstorm-results/%sZ-%s", stamp, kind);
}

/* The pid a lock file holds, or 0. */
static long lock_pid(int fd)
{
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    long pid = strtol(buf, NULL, 10);
    return pid > 0 ? pid : 0;
}

/* 1 if someone holds the lock of fd (an open lock file), else 0. */
static int held_by_other(int fd)
{
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
        (void)flock(fd, LOCK_UN);
        return 0;
    }
    return errno == EWOULDBLOCK ? 1 : -errno;
}

int outdir_busy(const char *dir, long *pid)
{
    char path[OUTDIR_PATH_MAX + 32];
    *pid = 0;
    if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, OUTDIR_LOCK_NAME) >= sizeof(path))
        return -ENAMETOOLONG;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    int rc = held_by_other(fd);
    if (rc == 1)
        *pid = lock_pid(fd);
    close(fd);
    return rc;
}

/* Appends name (with '/' for a directory) to the note, "..." once it is full. */
static void note_add(struct outdir *od, const char *rel, bool dir)
{
    size_t len = strlen(od->note);
    if (len + 4 >= sizeof(od->note))
        return;
    int w = snprintf(od->note + len, sizeof(od->note) - len, "%s%s%s", len ? ", " : "", rel,
                     dir ? "/" : "");
    if (w < 0 || (size_t)w >= sizeof(od->note) - len)
        snprintf(od->note + sizeof(od->note) - 4, 4, "...");
}

struct clear {
    struct outdir *od;
    bool remove;  /* false: only look (the first owned entry found is named in err) */
    size_t found; /* owned entries seen */
    char *err;
    size_t errlen;
};

static int clear_dir(struct clear *c, int dfd, const char *rel, int depth);

/* One entry of a directory: an owned file (removed), an owned directory (cleared). */
static int clear_entry(struct clear *c, int dfd, const char *rel, const char *name, int depth)
{
    char sub[OUTDIR_PATH_MAX];
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW))
        return errno == ENOENT ? 0 : -errno;
    bool isdir = S_ISDIR(st.st_mode);
    if (isdir ? !owned_dir(name) : !(S_ISREG(st.st_mode) && owned_file(name, depth)))
        return 0;
    snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", name);
    if (!isdir && !strcmp(name, OUTDIR_LOCK_NAME)) {
        int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        int busy = fd >= 0 ? held_by_other(fd) : 0;
        long pid = busy == 1 ? lock_pid(fd) : 0;
        if (fd >= 0)
            close(fd);
        if (busy == 1) {
            ts_errf(c->err, c->errlen, "%s: %s is being written by another process (pid %ld)",
                    c->od->path, sub, pid);
            return -EBUSY;
        }
        if (!c->remove)
            return 0; /* a lock file alone is not a result */
    }
    c->found++;
    if (!c->remove) {
        note_add(c->od, sub, isdir);
        return 0;
    }
    if (isdir) {
        if (depth + 1 >= OUTDIR_DEPTH_MAX)
            return 0;
        int sfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sfd < 0)
            return -errno;
        int rc = clear_dir(c, sfd, sub, depth + 1); /* closes sfd */
        if (rc)
            return rc;
        if (unlinkat(dfd, name, AT_REMOVEDIR)) {
            if (errno != ENOTEMPTY && errno != EEXIST)
                return -errno;
            return 0; /* it holds something we did not write: kept */
        }
    } else if (unlinkat(dfd, name, 0)) {
        return errno == ENOENT ? 0 : -errno;
    }
    c->od->removed++;
    note_add(c->od, sub, isdir);
    return 0;
}

/* Each entry of the directory dfd (which it closes); rel is its path below the outdir. */
static int clear_dir(struct clear *c, int dfd, const char *rel, int depth)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        int rc = -errno;
        close(dfd);
        return rc;
    }
    int rc = 0;
    size_t seen = 0;
    struct dirent *e;
    while (!rc && seen++ < OUTDIR_SCAN_MAX && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        rc = clear_entry(c, dirfd(d), rel, e->d_name, depth);
    }
    closedir(d);
    return rc;
}

/* Creates DIR/.tokenstorm.lock and takes its lock; 0 or an error in err. */
static int take_lock(struct outdir *od, char *err, size_t errlen)
{
    char path[OUTDIR_PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/%s", od->path, OUTDIR_LOCK_NAME);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        int e = errno;
        ts_errf(err, errlen, "%s is not a writable directory: cannot create %s: %s", od->path,
                OUTDIR_LOCK_NAME, strerror(e));
        return -e;
    }
    if (flock(fd, LOCK_EX | LOCK_NB)) {
        int e = errno;
        long pid = e == EWOULDBLOCK ? lock_pid(fd) : 0;
        close(fd);
        if (e != EWOULDBLOCK) {
            ts_errf(err, errlen, "%s: cannot lock %s: %s", od->path, OUTDIR_LOCK_NAME, strerror(e));
            return -e;
        }
        ts_errf(err, errlen,
                "%s is in use by another tokenstorm process (pid %ld); wait for it or choose "
                "another --out",
                od->path, pid);
        return -EBUSY;
    }
    char pid[32];
    int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) || pwrite(fd, pid, (size_t)n, 0) != n) {
        int e = errno ? errno : EIO;
        close(fd);
        ts_errf(err, errlen, "%s is not writable: %s: %s", od->path, OUTDIR_LOCK_NAME, strerror(e));
        return -e;
    }
    od->lock_fd = fd;
    return 0;
}

/* Looks for owned entries (c->remove false) or removes them; 0 or an error in c->err. */
static int scan(struct outdir *od, bool remove, size_t *found, char *err, size_t errlen)
{
    struct clear c = {.od = od, .remove = remove, .err = err, .errlen = errlen};
    int dfd = open(od->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        int e = errno;
        ts_errf(err, errlen, "%s: %s", od->path, strerror(e));
        return -e;
    }
    int rc = clear_dir(&c, dfd, "", 0);
    if (rc && rc != -EBUSY)
        ts_errf(err, errlen, "%s: cannot clear the results of an earlier run: %s", od->path,
                strerror(-rc));
    *found = c.found;
    return rc;
}

int outdir_claim(struct outdir *od, const char *path, unsigned flags, char *err, size_t errlen)
{
    struct stat st;
    size_t found = 0;
    int rc;

    outdir_init(od);
    if ((size_t)snprintf(od->path, sizeof(od->path), "%s", path) >= sizeof(od->path)) {
        ts_errf(err, errlen, "%.200s...: path too long", path);
        return -ENAMETOOLONG;
    }
    if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode)) {
        ts_errf(err, errlen, "%s exists and is not a directory", path);
        return -ENOTDIR;
    }
    if ((rc = file_mkdirs(path, err, errlen)) || (rc = take_lock(od, err, errlen)))
        return rc;
    if ((rc = scan(od, false, &found, err, errlen)))
        goto fail;
    if (found && !(flags & OUTDIR_FORCE)) {
        ts_errf(err, errlen,
                "%s already holds results (%s); choose another --out, or add --force to remove "
                "them first",
                path, od->note);
        rc = -EEXIST;
        goto fail;
    }
    od->note[0] = '\0';
    if (found && (rc = scan(od, true, &found, err, errlen)))
        goto fail;
    return 0;
fail:
    outdir_release(od);
    return rc;
}
