/*
 * answers.h - known questions and their reference answers for the simulator.
 *
 * `tokenstorm sim --answers FILE.jsonl` loads lines {"prompt": "...",
 * "answer": "..."}; a chat request whose last user message (or a completion
 * whose prompt) equals a prompt, ignoring surrounding whitespace, is answered
 * with that answer instead of pseudo-text. Later this measures answer quality
 * under faults: the answer is the reference.
 *
 * Limits: a line of at most 1 MiB, at most 1,000,000 entries; empty lines and
 * lines starting with '#' are skipped; every error names file:line. The table
 * is read-only after loading and may be shared between threads.
 */
#ifndef TS_SIM_ANSWERS_H
#define TS_SIM_ANSWERS_H

#include <stddef.h>

#include "base/err.h"

struct answers;

/* Loads path. Returns 0 and *out, or -ENOENT / TS_PARSE / TS_TOOBIG / -ENOMEM
 * with "path:line: message" in err. */
TS_MUST_CHECK int answers_load(const char *path, struct answers **out, char *err, size_t errlen);
/* The same from memory; name stands for the file in messages. */
TS_MUST_CHECK int answers_load_mem(const char *name, const char *data, size_t len,
                                   struct answers **out, char *err, size_t errlen);
/* The answer for prompt[0..len) (whitespace-trimmed), or NULL. Owned by a. */
const char *answers_find(const struct answers *a, const char *prompt, size_t len);
size_t answers_count(const struct answers *a);
void answers_free(struct answers *a);

#endif
