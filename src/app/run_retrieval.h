/*
 * run_retrieval.h - what a scenario run reports about its flows' retrieval
 * steps (scenario/retrieval.h): recall@k of each retrieval step and, next
 * to it, the quality of the answers that followed it, overall and by the
 * recall the search had. docs/VECTOR.md, "Retrieval steps of RAG flows".
 */
#ifndef TS_APP_RUN_RETRIEVAL_H
#define TS_APP_RUN_RETRIEVAL_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "analysis/stats.h"
#include "load/runner.h"
#include "scenario/traffic.h"

/*
 * The "retrieval" object of a retrieval step in result.json's
 * classes[].steps[]:
 *   {"k": K, "searches": N, "recall_mean": r|null, "recall_p5", "recall_p50",
 *    "recall_min", "answer_steps": ["generate", ...], "answers": N,
 *    "quality_ok_rate": r|null, "quality": quality_stats_to_json(),
 *    "by_recall": [{"recall": j/K, "hits": j, "searches": n, "answers": n,
 *                   "rouge_l_mean": x|null, "bleu4_mean": x|null,
 *                   "exact_match_rate": x|null, "quality_ok_rate": x|null}, ...]}
 * by_recall lists the values some search had, best first (K <=
 * STATS_LED_K_MAX). st is the step's stats. NULL when step is not a
 * retrieval step of t's flow, or out of memory.
 */
json_t *retrieval_step_json(const struct run_stats *st, const struct traffic *t, uint32_t step);

/*
 * The console's table of the retrieval steps of classes t[0..n), whose
 * results are res->classes[]: one row per step
 * (searches, recall@k mean and p5, answers, ROUGE-L mean, exact match,
 * quality-ok) and one indented row per recall value. Prints nothing when no
 * class has a retrieval step.
 */
void retrieval_print(FILE *f, const struct traffic *t, size_t n, const struct runner_result *res);

#endif
