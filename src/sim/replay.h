/*
 * replay.h - `tokenstorm sim --replay DIR`: the simulator as a deterministic
 * stand-in for a real service, serving the responses of a recording
 * (`proxy --record DIR`, llm/recording.h) with their recorded timing.
 *
 * Matching a POST to a recorded exchange, in this order: the same method,
 * path and body hash (llm/recording.h: the canonical JSON body, taken
 * before redaction); else the same path and model; else the same path.
 * Among several candidates the next one in recorded order is taken (round
 * robin), so N identical requests get the N recorded answers. Nothing
 * matching: 404 with an OpenAI-style error. The response: the recorded
 * status and content type; an event stream's events each at its recorded
 * offset from the request's arrival (then the end); any other body at the
 * recorded end. GET endpoints (/v1/models, /health, /metrics) stay the
 * simulator's own.
 */
#ifndef TS_SIM_REPLAY_H
#define TS_SIM_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "net/http_server.h"

struct sim_server;
struct sim_replay;

/* Loads dir. 0 and *out, or an error with "--replay: ..." in err. */
TS_MUST_CHECK int sim_replay_open(const char *dir, struct sim_replay **out, char *err,
                                  size_t errlen);
/* NULL is a no-op. Call once no replayed response is in flight. */
void sim_replay_free(struct sim_replay *r);
/* Exchanges loaded; lines skipped. */
size_t sim_replay_count(const struct sim_replay *r, uint64_t *skipped);
/* Requests served from the recording, and not matched (404). */
void sim_replay_stats(const struct sim_replay *r, uint64_t *served, uint64_t *unmatched);

/* Answers req (a POST) from the recording, on loop. */
void sim_replay_handle(struct sim_replay *r, uv_loop_t *loop, struct http_request *req);

#endif
