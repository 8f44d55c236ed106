/*
 * stopsig.h - SIGINT and SIGTERM watched on a libuv loop, for a process
 * that stops gracefully on the first of them (the simulator, the proxy).
 *
 * Embed a struct stopsig in its owner; stopsig_start() initialises and
 * starts both watchers, on_stop runs on the loop's thread once, for the
 * first signal (later ones are ignored: the stop is already under way), and
 * stopsig_close() closes the watchers that were made, after which the loop
 * can run dry. Not thread-safe: one loop.
 */
#ifndef TS_NET_STOPSIG_H
#define TS_NET_STOPSIG_H

#include <uv.h>

#include "base/err.h"

struct stopsig {
    uv_signal_t sigint, sigterm;
    int inited; /* how many of the two are initialised (closed by stopsig_close) */
    int signum; /* the first signal that came; 0 until one did */
    void (*on_stop)(struct stopsig *s, int signum);
    void *data; /* the owner's */
};

/* Watches SIGINT and SIGTERM on loop. Returns 0, or a libuv error: then
 * on_stop never runs, and stopsig_close() still closes what was made. */
TS_MUST_CHECK int stopsig_start(struct stopsig *s, uv_loop_t *loop,
                                void (*on_stop)(struct stopsig *s, int signum), void *data);

/* Closes the watchers that were initialised; safe to call more than once. */
void stopsig_close(struct stopsig *s);

#endif
