/*
 * vector_embed.h - text queries of a vector-search run, embedded by the
 * target: `--vector-queries text:FILE` (and `queries: text:FILE` in a
 * scenario's vector block).
 *
 * FILE is a JSONL prompts file (workload/prompts.h, text lines only:
 * {"prompt": "..."}). Before the load, its texts are sent to the target's
 * embeddings endpoint (POST .../embeddings, {"model": M, "input": [up to
 * VECTOR_EMBED_BATCH texts]}, the run's headers), in order, one request at
 * a time; each answer must hold one embedding per input (by "index", float
 * or base64), all of one dimension. The vectors are then the run's queries:
 * searched as any query vectors, with the ground truth computed over the
 * corpus (or read from --vector-truth) the same way. Blocking, for setup.
 */
#ifndef TS_APP_VECTOR_EMBED_H
#define TS_APP_VECTOR_EMBED_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "llm/vecset.h"

#define VECTOR_EMBED_PREFIX  "text:"
#define VECTOR_EMBED_BATCH   64
#define VECTOR_EMBED_MAX     100000             /* texts */
#define VECTOR_EMBED_MAX_ANS ((size_t)64 << 20) /* bytes of one answer */

/* Where and how to ask for embeddings (all borrowed). */
struct vector_embed_target {
    const char *url;   /* the full embeddings URL, e.g. http://h:p/v1/embeddings */
    const char *model; /* "model" of the requests */
    const char *const *headers;
    size_t nheaders;
    bool insecure; /* skip TLS verification */
};

/* True when spec is "text:FILE". */
bool vector_embed_is_spec(const char *spec);

/*
 * Embeds the texts of the prompts file path through t into *out (n rows of
 * the answers' dimension); *seconds gets the time it took, *requests the
 * number of embeddings requests. Returns 0, or a negative code with a
 * message in err that names the file (its line) or the URL and what the
 * server said (never a header); on error *out holds nothing.
 */
TS_MUST_CHECK int vector_embed_file(const char *path, const struct vector_embed_target *t,
                                    struct vecset *out, double *seconds, size_t *requests,
                                    char *err, size_t errlen);

/*
 * One embeddings answer (body, len) for n inputs into rows first..first+n-1
 * of out (out->dim fixed by the first answer when 0). Returns 0 or TS_PARSE
 * with the reason in err. Exposed for tests and the fuzz driver.
 */
TS_MUST_CHECK int vector_embed_answer(const char *body, size_t len, size_t first, size_t n,
                                      struct vecset *out, char *err, size_t errlen);

#endif
