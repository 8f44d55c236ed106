/*
 * replay.h - `run --replay DIR`: the requests of a recording (proxy
 * --record, llm/recording.h) as a workload, with the recorded answers as
 * references (their similarity is scored like any reference answer,
 * analysis/quality.h) and the recorded send times as a schedule.
 */
#ifndef TS_WORKLOAD_REPLAY_H
#define TS_WORKLOAD_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "llm/recording.h"
#include "workload/workload.h"

/*
 * The endpoint the recording's POSTs mostly went to: its path (without
 * the query) in path (n bytes) and *ep. Returns 0, or -EINVAL with a
 * message (no POST, or a path that is not /v1/chat/completions,
 * /v1/completions or /v1/embeddings).
 */
TS_MUST_CHECK int replay_endpoint(const struct recording *rec, char *path, size_t n,
                                  enum workload_endpoint *ep, char *err, size_t errlen);

/*
 * Sets up w (as workload_init would) from the POSTs of rec to path:
 * workload_item(i) is exchange i % n's body as recorded (redacted fields
 * stay redacted), with the recorded answer (the content of its events, or
 * of its body) as reference. *times (owned by the caller, ts_free) gets
 * each one's offset from the first. Returns 0, -ENOMEM or -EINVAL with a
 * message; on success release w with workload_release.
 */
TS_MUST_CHECK int workload_init_replay(struct workload *w, const struct recording *rec,
                                       const char *path, uint64_t **times, size_t *ntimes,
                                       char *err, size_t errlen);

#endif
