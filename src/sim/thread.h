/*
 * thread.h - the simulator on a thread of its own, for `tokenstorm run` with
 * no target: the load engine then always has something real to hit.
 */
#ifndef TS_SIM_THREAD_H
#define TS_SIM_THREAD_H

#include "base/err.h"
#include "sim/server.h"

struct sim_thread;

/*
 * Starts a simulator with cfg (port 0 picks a free one) on a new thread and
 * waits until it listens. Returns 0 with *out, or a negative code with a
 * message in err. cfg and the strings it points to are only used during
 * this call.
 */
TS_MUST_CHECK int sim_thread_start(const struct sim_server_config *cfg, struct sim_thread **out,
                                   char *err, size_t errlen);
int sim_thread_port(const struct sim_thread *t);
/* Shuts the simulator down (streams get grace_ms), joins the thread, frees t. */
void sim_thread_stop(struct sim_thread *t, uint64_t grace_ms);

#endif
