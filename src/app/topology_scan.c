/*
 * topology_scan.c - running the embedded Python scan (topo_scan.py, built
 * into topo_scan_py.h) with the user's python3 and reading its JSON.
 *
 * python3 runs isolated (-I: no PYTHON* variables, no user site, neither
 * the script's nor the current directory on sys.path) and without site
 * (-S), so nothing of the scanned tree can be imported instead of the
 * standard library; the script only reads files with ast.parse.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "app/topology.h"
#include "base/buf.h"
#include "base/clock.h"
#include "topo_scan_py.h"

extern char **environ;

#define STDERR_MAX 4096
#define FILE_BYTES "4000000" /* a larger .py file is reported and skipped */

/* Reads both pipes until both close or the deadline; kills the child then. */
static int drain(pid_t pid, int outfd, int errfd, struct buf *out, struct buf *errb,
                 uint64_t timeout_ns)
{
    uint64_t deadline = ts_now_ns() + timeout_ns;
    struct pollfd p[2] = {{.fd = outfd, .events = POLLIN}, {.fd = errfd, .events = POLLIN}};
    char chunk[65536];
    int open = 2;
    while (open > 0) {
        uint64_t now = ts_now_ns();
        if (now >= deadline) {
            kill(pid, SIGKILL);
            return TS_TIMEOUT;
        }
        int n = poll(p, 2, (int)((deadline - now) / 1000000 + 1));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t r = read(p[i].fd, chunk, sizeof(chunk));
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                p[i].fd = -1;
                open--;
                continue;
            }
            struct buf *b = i ? errb : out;
            if (b->len + (size_t)r > b->max) {
                if (!i) {
                    kill(pid, SIGKILL);
                    return TS_TOOBIG;
                }
                continue; /* stderr beyond its cap is dropped */
            }
            if (buf_append(b, chunk, (size_t)r))
                return -ENOMEM;
        }
    }
    return 0;
}

static int spawn_scan(const char *python, const char *dir, uint64_t max_files, pid_t *pid,
                      int *outfd, int *errfd, char *err, size_t errlen)
{
    int po[2] = {-1, -1}, pe[2] = {-1, -1};
    if (pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC)) {
        ts_errf(err, errlen, "pipe: %s", strerror(errno));
        goto fail;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    char files[24];
    snprintf(files, sizeof(files), "%llu", (unsigned long long)max_files);
    char *argv[] = {(char *)python,       "-I",        "-S",  "-B",       "-c",
                    (char *)topo_scan_py, (char *)dir, files, FILE_BYTES, NULL};
    int rc = posix_spawnp(pid, python, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(po[1]);
    close(pe[1]);
    if (rc) {
        ts_errf(err, errlen, "cannot run %s: %s (install python3, or give --python)", python,
                strerror(rc));
        close(po[0]);
        close(pe[0]);
        return -rc;
    }
    *outfd = po[0];
    *errfd = pe[0];
    return 0;
fail:
    for (int i = 0; i < 2; i++) {
        if (po[i] >= 0)
            close(po[i]);
        if (pe[i] >= 0)
            close(pe[i]);
    }
    return -EIO;
}

/* The last line of the helper's stderr (a Python traceback's message). */
static const char *last_line(struct buf *b)
{
    while (b->len && (b->data[b->len - 1] == '\n' || b->data[b->len - 1] == '\r'))
        b->len--;
    if (!b->len)
        return "";
    b->data[b->len] = '\0';
    char *nl = strrchr(b->data, '\n');
    return nl ? nl + 1 : b->data;
}

int topology_scan(struct topo_graph *g, const char *python, const char *dir, uint64_t max_files,
                  uint64_t timeout_ns, char *err, size_t errlen)
{
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
        ts_errf(err, errlen, "--source %s: not a directory", dir);
        return -ENOTDIR;
    }
    pid_t pid;
    int outfd, errfd;
    int rc = spawn_scan(python, dir, max_files, &pid, &outfd, &errfd, err, errlen);
    if (rc)
        return rc;
    struct buf out, errb;
    buf_init(&out, TOPO_SCAN_MAX);
    buf_init(&errb, STDERR_MAX);
    rc = drain(pid, outfd, errfd, &out, &errb, timeout_ns);
    close(outfd);
    close(errfd);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (rc == TS_TIMEOUT)
        ts_errf(err, errlen, "the Python scan of %s did not finish within --scan-timeout", dir);
    else if (rc == TS_TOOBIG)
        ts_errf(err, errlen, "the Python scan wrote more than %u bytes", TOPO_SCAN_MAX);
    else if (!rc && (!WIFEXITED(status) || WEXITSTATUS(status))) {
        ts_errf(err, errlen, "%s failed on the scan (%s %d): %s", python,
                WIFEXITED(status) ? "exit" : "signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), last_line(&errb));
        rc = -EIO;
    }
    if (!rc) {
        rc = topo_load_scan(g, out.data ? out.data : "", out.len, err, errlen);
        snprintf(g->source, sizeof(g->source), "%s", dir);
    }
    buf_release(&out);
    buf_release(&errb);
    return rc;
}
