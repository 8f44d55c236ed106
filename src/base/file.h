/*
 * file.h - reading whole files from outside, with a cap; making directories.
 */
#ifndef TS_BASE_FILE_H
#define TS_BASE_FILE_H

#include <stddef.h>

#include "base/err.h"

/*
 * Reads all of path into a NUL-terminated heap buffer (*data, ts_free it) of
 * *len bytes. Files over max bytes are refused. Returns 0, a negative errno
 * (cannot open or read), TS_TOOBIG or -ENOMEM, with "path: reason" in err.
 */
TS_MUST_CHECK int file_read_all(const char *path, size_t max, char **data, size_t *len, char *err,
                                size_t errlen);

/* mkdir -p path (mode 0755; paths up to 4095 bytes). Returns 0, or a
 * negative errno with "cannot create DIR: reason" in err. */
TS_MUST_CHECK int file_mkdirs(const char *path, char *err, size_t errlen);

#endif
