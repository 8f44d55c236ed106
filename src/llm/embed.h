/*
 * embed.h - deterministic text embeddings from hashed character n-grams.
 *
 * The simulator's /v1/embeddings and the workload's semantic-entropy report
 * use this: the text is lower-cased (ASCII), padded with a space on each side,
 * and every character trigram and word is hashed (FNV-1a) to a dimension and
 * a sign; the counts are summed and the vector is L2-normalised. Similar
 * texts share n-grams and so get a high cosine similarity; the same text
 * always gets the same vector. An empty text gets the zero vector.
 */
#ifndef TS_LLM_EMBED_H
#define TS_LLM_EMBED_H

#include <stddef.h>

#define EMBED_MAX_DIMS 8192

/* Writes `dims` floats (1..EMBED_MAX_DIMS) to out. 0 or -EINVAL. */
int embed_text(const char *s, size_t len, float *out, size_t dims);
/* Cosine similarity of two vectors of n floats (0 if either is zero). */
double embed_cosine(const float *a, const float *b, size_t n);

#endif
