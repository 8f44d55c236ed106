/*
 * serve_sim.h - `tokenstorm sim` as a library call: the simulator
 * (sim/server.h) on an event loop of its own, until SIGINT or SIGTERM. The
 * command file turns the options into a validated struct
 * sim_server_config; serve_sim() does the rest.
 *
 * What it does, in order: the loop, the server (sim_server_start), the
 * signal watchers; then it prints where it listens and the profile's
 * capacity on stdout and serves. The first SIGINT or SIGTERM shuts the
 * server down (streams in progress get grace_ms; later signals are
 * ignored); when the loop is empty it frees the server, closes the loop and
 * prints the counters. Watchers that cannot be set up shut the server down
 * the same way, with no grace.
 *
 * Lines on stdout (none when cfg->quiet):
 *   tokenstorm sim: listening on http://HOST:PORT
 *     profile NAME, model MODEL
 *     KV cache ... , max_num_seqs ..., max_num_batched_tokens ..., max_model_len ...
 *     step >= ... ms, knee ... batch tokens, noise on|off
 *   tokenstorm sim: stopped: N requests, N finished, N cancelled, N refused (429)
 * stdout is flushed after the first four (a parent may wait for them).
 * Errors go to stderr as "tokenstorm sim: ...".
 */
#ifndef TS_APP_SERVE_SIM_H
#define TS_APP_SERVE_SIM_H

#include <stdint.h>

#include "sim/server.h"

/*
 * Serves cfg (its profile validated by the caller; borrowed for the call)
 * until a signal's shutdown completes. Returns the exit code: 0 after a
 * signal; 3 the loop, the server (address in use, answers file, trace
 * log, ...) or the signal watchers could not be set up.
 */
int serve_sim(const struct sim_server_config *cfg, uint64_t grace_ms);

#endif
