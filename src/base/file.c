#include "file.h"

#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "buf.h"

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
