#include "base/file.h"

#include <errno.h>
#include <sys/stat.h>

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"

int file_read_all(const char *path, size_t max, char **data, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        int rc = -errno;
        ts_errf(err, errlen, "%s: %s", path, strerror(errno));
        return rc;
    }
    struct buf b;
    buf_init(&b, max);
    char chunk[65536];
    int rc = 0;
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if ((rc = buf_append(&b, chunk, n))) {
            if (rc == TS_TOOBIG)
                ts_errf(err, errlen, "%s: larger than %zu bytes", path, max);
            else
                ts_errf(err, errlen, "%s: out of memory", path);
            break;
        }
    }
    if (!rc && ferror(f)) {
        rc = -EIO;
        ts_errf(err, errlen, "%s: read error", path);
    }
    fclose(f);
    if (!rc && buf_reserve(&b, 0))
        rc = -ENOMEM;
    if (rc) {
        buf_release(&b);
        return rc;
    }
    *data = buf_take(&b, len);
    return 0;
}

int file_mkdirs(const char *path, char *err, size_t errlen)
{
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s", path) >= sizeof(tmp)) {
        ts_errf(err, errlen, "%.200s...: path too long", path);
        return -ENAMETOOLONG;
    }
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) && errno != EEXIST)
            goto fail;
        *p = '/';
    }
    if (mkdir(tmp, 0755) && errno != EEXIST)
        goto fail;
    return 0;
fail:;
    int e = errno;
    ts_errf(err, errlen, "cannot create %.200s: %s", tmp, strerror(e));
    return -e;
}
