/*
 * asyncw.h - a file writer that never blocks the caller's event loop.
 *
 * Lines (or any bytes) are appended to an in-memory buffer under a mutex and
 * written to the file by a thread of the writer's own, in batches (at least
 * every 200 ms, so a reader sees recent lines). The
 * caller's cost per write is one memcpy and an uncontended lock. Memory is
 * bounded: when more than max_pending bytes wait for the disk, further writes
 * are dropped and counted (asyncw_dropped) instead of blocking; a dropped
 * write is never split, so the file holds only whole lines.
 *
 * asyncw_write may be called from any thread. asyncw_close flushes what is
 * pending, stops the thread, closes the file and frees the writer.
 */
#ifndef TS_BASE_ASYNCW_H
#define TS_BASE_ASYNCW_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct asyncw;

/*
 * Opens (creates or truncates) path for writing; max_pending 0 means 64 MiB.
 * Returns 0 and *out, or a negative errno (the file could not be opened, or
 * the thread not started) with a message in err.
 */
TS_MUST_CHECK int asyncw_open(const char *path, size_t max_pending, struct asyncw **out, char *err,
                              size_t errlen);
/* Queues len bytes. Returns 0, or TS_AGAIN if they were dropped (over the
 * bound) or -ENOMEM. */
int asyncw_write(struct asyncw *w, const void *data, size_t len);
/* Asks the thread to write what is queued now (does not wait). */
void asyncw_flush(struct asyncw *w);
/* Writes what is queued, closes the file, frees w. Returns 0 or the first
 * write error (negative errno) seen. NULL is a no-op returning 0. */
int asyncw_close(struct asyncw *w);
/* Bytes dropped so far because the disk did not keep up. */
uint64_t asyncw_dropped(struct asyncw *w);

#endif
