/*
 * live_host.h - the live page of a command whose load runs in child
 * processes: `tokenstorm sweep --ui HOST:PORT` and `tokenstorm chaos --ui
 * HOST:PORT` (docs/REPORTS.md, "The live dashboard").
 *
 * An HTTP server on its own thread and event loop serves the same paths as
 * a run's dashboard (app/live_ui.h: /, /events, /status, POST /stop) with the
 * same token rule (net/ctlauth.h). Its frames are drawn by the owner on its
 * own thread (the sweep's steps so far, an experiment's phases and verdicts)
 * and handed over with live_host_publish(); the page also shows the running
 * step's own dashboard (a child `run --ui` on the same host, at the port
 * given with the frame) in an iframe that stays while frames change.
 * POST /stop calls on_stop on the server's thread: it must only set a flag
 * (the owner's Ctrl-C). Every function here is for the owner's thread.
 */
#ifndef TS_APP_LIVE_HOST_H
#define TS_APP_LIVE_HOST_H

#include <stddef.h>

#include "base/err.h"

struct live_host;

/*
 * Listens on host:port (port 0: any free one) and starts the server's
 * thread; title names the page; token (borrowed, may be NULL) must stay
 * valid until live_host_close. 0, or a negative errno with err filled.
 */
TS_MUST_CHECK int live_host_open(const char *host, int port, const char *title, const char *token,
                                 void (*on_stop)(void), struct live_host **out, char *err,
                                 size_t errlen);
/* The port bound. */
int live_host_port(const struct live_host *h);
/*
 * The newest frame (HTML, copied) and the port of the running step's own
 * dashboard (0: none); viewers get it at once. 0, -ENOMEM or TS_TOOBIG.
 */
TS_MUST_CHECK int live_host_publish(struct live_host *h, const char *html, size_t len,
                                    int inner_port);
/*
 * Sends the last frame as "end", keeps answering for linger_ms (a page
 * opened now still shows the final frame), then stops the server, joins
 * its thread and frees h. h may be NULL.
 */
void live_host_close(struct live_host *h, unsigned linger_ms);

/*
 * A free TCP port on host for a child's own dashboard (bound then released,
 * as a test picks one: a small window in which another program may take
 * it). 0 when none could be had.
 */
int live_host_free_port(const char *host);

#endif
