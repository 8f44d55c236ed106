/*
 * retrieval.h - the retrieval steps of a flow (RAG): recall@k of each
 * vector store search, and which steps' answers it led to.
 *
 * A retrieval step is a flow step with `retrieval` set (flow_step_def's
 * retrieval_k > 0): an HTTP POST of OpenAI's vector store search
 * ({"query": ..., "max_num_results": ...}, sim/vstore.h) whose answer lists
 * passages by file_id. Its recall@k is judged against the exact ranking of
 * the same passages for the same query (vstore_recall: the query embedded as
 * the simulator embeds it, every passage scored), so the store must hold the
 * passages the target searches: the simulator's built-in ones, or the file
 * the simulator was given with --vector-docs (retrieval_docs).
 *
 * Answer steps are the flow's final LLM calls: chat and completion steps that
 * no step depends on, and the fallbacks that stand in for them. Their
 * answers are scored against the iteration's reference and credited to the
 * retrieval steps they depend on, directly or not.
 *
 * A struct flow_retrieval is built once per class and read-only after:
 * workers share it.
 */
#ifndef TS_SCENARIO_RETRIEVAL_H
#define TS_SCENARIO_RETRIEVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "scenario/flow.h"

struct vstore;

struct flow_retrieval {
    size_t n;              /* steps of the flow */
    struct vstore **store; /* per step: the passages a retrieval step is judged
                            * against (NULL for other steps); a store shared by
                            * steps with the same docs is owned by the first */
    uint64_t *before;      /* per step: bit j set when it depends, directly or
                           * not, on retrieval step j */
    uint64_t retrievals;   /* bit i: step i is a retrieval step */
    uint64_t answers;      /* bit i: step i is an answer step */
};

/*
 * Builds r for d (a checked definition). Loads each retrieval step's
 * passages (sim/vstore.h: the built-in set, or retrieval_docs with its
 * errors, "file:line: message", in err) and embeds them: blocking, at start.
 * A flow without a retrieval step gets no stores (r->retrievals 0) but its
 * answer steps. Returns 0; -EINVAL (more than 64 steps), the loading's
 * codes, -ENOMEM. Release r in every case.
 */
TS_MUST_CHECK int flow_retrieval_init(struct flow_retrieval *r, const struct flow_def *d, char *err,
                                      size_t errlen);
void flow_retrieval_release(struct flow_retrieval *r);

static inline bool flow_retrieval_is_answer(const struct flow_retrieval *r, uint32_t step)
{
    return step < r->n && step < 64 && (r->answers >> step & 1);
}

/*
 * recall@k of retrieval step step's answer: req[0..req_len) is the request
 * body as sent (its "query": a string or strings, joined by one space, as
 * the store does), body[0..len) the answer ({"data": [{"file_id": ...},
 * ...]}, at most FLOW_RESPONSE_MAX bytes), k the step's retrieval_k.
 * Returns 1 with *recall and *k (cut to the store's passages), 0 when
 * nothing is measured (not a retrieval step, a request without a query, an
 * answer without a data array), -ENOMEM.
 */
TS_MUST_CHECK int flow_retrieval_measure(const struct flow_retrieval *r, const struct flow_def *d,
                                         uint32_t step, const char *req, size_t req_len,
                                         const char *body, size_t len, double *recall, uint32_t *k);

#endif
