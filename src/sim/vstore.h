/*
 * vstore.h - the simulator's in-memory vector store, for RAG flows: OpenAI's
 * vector store search API (POST /v1/vector_stores/{id}/search) over a fixed
 * set of text passages.
 *
 * Passages. By default the store holds 200 synthetic passages, made
 * deterministically from 20 topics x 10 templated sentences (each passage
 * names its topic and two of the topic's keywords), so a query about a topic
 * ranks that topic's passages first. Passage i of the built-in set is topic
 * i / 10; its file_id is "file-sim" + 3 digits of i, its filename
 * "<topic-slug>-<n>.txt", its attributes {"topic":"<topic>"}.
 * vstore_load() replaces them with the passages of a file instead, in one of
 * two formats, decided by the first non-blank line:
 *   JSONL (that line starts with '{'): one object per line,
 *     {"text": "...", "id": "...", "filename": "...", "attributes": {...}}
 *     text is required (1..VSTORE_MAX_TEXT bytes); id (the file_id, 1..64
 *     bytes) defaults to "file-" + 5 digits of the passage number (1-based);
 *     filename (1..256 bytes) to "passage-<n>.txt"; attributes (at most 16
 *     keys of at most 64 bytes; values strings of at most 512 bytes, numbers
 *     or booleans) to {}. Other keys are errors.
 *   plain text (otherwise): each non-blank line is one passage, with the
 *     default id and filename and no attributes.
 * Blank lines are skipped in both. The file must be valid UTF-8 without NUL
 * (base/utf8.h), at most VSTORE_MAX_FILE bytes, lines at most
 * VSTORE_MAX_LINE bytes, at most VSTORE_MAX_DOCS passages and at least one.
 * Errors name "file:line[:column]: message".
 *
 * Ranking. Every passage is embedded once, at load, with llm/embed.h (hashed
 * character trigrams and words, `dims` dimensions, L2-normalised); a query is
 * embedded the same way and each passage's score is the cosine similarity,
 * clamped to [0, 1]. Results are the top max_results passages with score >=
 * score_threshold, by score descending, ties by passage index.
 *
 * A struct vstore is read-only after loading (search takes it const), so one
 * store may be shared by threads.
 */
#ifndef TS_SIM_VSTORE_H
#define TS_SIM_VSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/err.h"
#include "llm/openai.h"

#define VSTORE_DIMS_DEFAULT 512
#define VSTORE_MAX_DOCS     10000
#define VSTORE_MAX_FILE     (32u << 20)
#define VSTORE_MAX_LINE     (256u << 10)
#define VSTORE_MAX_TEXT     (64u << 10)
#define VSTORE_MAX_RESULTS  50
#define VSTORE_MAX_QUERY    (64u << 10) /* bytes of query text, all strings joined */
#define VSTORE_BUILTIN_DOCS 200

struct vstore;

/* One passage; every string is NUL-terminated and owned by the store. */
struct vstore_doc {
    const char *file_id;
    const char *filename;
    const char *text;
    size_t text_len;
    const char *attributes; /* a compact JSON object, "{}" when none */
};

/*
 * The built-in store of VSTORE_BUILTIN_DOCS passages, embedded with dims
 * dimensions (1..EMBED_MAX_DIMS). Returns 0 and *out, -EINVAL (dims) or
 * -ENOMEM. Free with vstore_free().
 */
TS_MUST_CHECK int vstore_new_builtin(size_t dims, struct vstore **out);

/*
 * A store of the passages of the file at path (formats and limits above).
 * Returns 0 and *out, or -ENOENT (or another negative errno) / TS_TOOBIG /
 * TS_PARSE / -EINVAL / -ENOMEM with a message in err. Reads the file at once
 * (blocking): call it at start-up, not on a loop that serves requests.
 */
TS_MUST_CHECK int vstore_load(const char *path, size_t dims, struct vstore **out, char *err,
                              size_t errlen);
/* The same from memory (len bytes); name stands for the file in messages. */
TS_MUST_CHECK int vstore_load_mem(const char *name, const char *data, size_t len, size_t dims,
                                  struct vstore **out, char *err, size_t errlen);

void vstore_free(struct vstore *v);

size_t vstore_count(const struct vstore *v);
/* Passage i (< vstore_count), owned by v. */
const struct vstore_doc *vstore_doc(const struct vstore *v, size_t i);
/* The passages' embeddings: vstore_count() rows of *dims floats (unit length,
 * or zero for a text with no features), owned by v. */
const float *vstore_vectors(const struct vstore *v, size_t *dims);
/* Embeds query[0..len) as the passages are (dims floats into out). 0 or -ENOMEM. */
TS_MUST_CHECK int vstore_embed_query(const struct vstore *v, const char *query, size_t len,
                                     float *out);
/* The topic of built-in passage i ("volcanoes", ...), or NULL past the built-in set. */
const char *vstore_builtin_topic(size_t i);

struct vstore_hit {
    uint32_t doc; /* passage index */
    double score; /* 0..1 */
};

/*
 * Ranks the passages for query[0..len): writes at most max_results (1..
 * VSTORE_MAX_RESULTS) hits with score >= threshold into hits (room for
 * max_results), best first, and their count to *n. Returns 0, -EINVAL
 * (max_results out of range) or -ENOMEM.
 */
TS_MUST_CHECK int vstore_search(const struct vstore *v, const char *query, size_t len,
                                size_t max_results, double threshold, struct vstore_hit *hits,
                                size_t *n);

/* Scores this close to the k-th best count as tied with it (vstore_recall). */
#define VSTORE_RECALL_TIE 1e-6

/*
 * recall@k of a search answer against the store's exact ranking, for a load
 * test's retrieval steps. query[0..len) is embedded as passages are and every
 * passage scored by its cosine, clamped to [0, 1] (what vstore_search ranks
 * by). ids[0..nids) are the file_ids the answer returned, best first (NULL
 * entries are skipped); the first k distinct ones are judged, and one is a
 * hit when a passage with that file_id scores at least the k-th best score
 * minus VSTORE_RECALL_TIE: a passage tied with the k-th best is as right as
 * it (ann-benchmarks judges ties the same way), an id the store does not hold
 * is a miss. *recall = hits / k, with k (1..VSTORE_MAX_RESULTS) cut to the
 * number of passages (*k_used; 0 for an empty store, recall 0). Cost: one
 * embedding and passages x dims multiply-adds (0.1 M for the built-in store).
 * Returns 0, -EINVAL (k out of range, ids NULL with nids > 0) or -ENOMEM.
 * Reads v only: callable from any thread.
 */
TS_MUST_CHECK int vstore_recall(const struct vstore *v, const char *query, size_t len,
                                const char *const *ids, size_t nids, size_t k, double *recall,
                                size_t *k_used);

/*
 * A parsed search request body:
 *   {"query": string | [string, ...] (required, 1..16 non-empty strings, at
 *    most VSTORE_MAX_QUERY bytes in all), "max_num_results": 1..50 (default
 *    10), "rewrite_query": boolean, "filters": object (accepted, ignored),
 *    "ranking_options": {"ranker": string, "score_threshold": 0..1}}
 * Other keys are ignored. text is the query strings joined by one space.
 */
struct vstore_query {
    char *text; /* owned, NUL-terminated */
    size_t len;
    size_t max_results;
    double score_threshold; /* 0 when absent */
    json_t *root;           /* the document */
    const json_t *query;    /* root's "query": a string or an array of strings */
};

void vstore_query_init(struct vstore_query *q);
/*
 * Parses body (len bytes). Returns 0 with q filled; TS_PARSE with *err a 400
 * invalid_request_error in OpenAI's words (param names the field); -ENOMEM
 * with *err a 500. q must be initialised (or released) before; whatever it
 * held is released first. On failure q holds nothing.
 */
TS_MUST_CHECK int vstore_query_parse(struct vstore_query *q, const char *body, size_t len,
                                     struct openai_error *err);
void vstore_query_release(struct vstore_query *q);

/*
 * Appends the response body to out:
 *   {"object":"vector_store.search_results.page","search_query":["Q", ...],
 *    "data":[{"file_id":"..","filename":"..","score":0.8312,"attributes":{..},
 *    "content":[{"type":"text","text":".."}]}, ...],"has_more":false,
 *    "next_page":null}
 * search_query lists the query strings as sent; scores have 4 decimals.
 * Returns 0, -ENOMEM or TS_TOOBIG (out is then as it was).
 */
TS_MUST_CHECK int vstore_encode_page(struct buf *out, const struct vstore *v,
                                     const struct vstore_query *q, const struct vstore_hit *hits,
                                     size_t n);

#endif
