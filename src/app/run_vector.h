/*
 * run_vector.h - `tokenstorm run --endpoint vector-search`: the query
 * vectors, the ground truth every answer's recall@k is measured against,
 * and the simulator's corpus and index when the run starts its own.
 *
 * Corpus (--vector-data): a "gen:N[xD][:C[:S]]" spec (llm/vecset.h; default
 * gen:20000x64) or a .fvecs/.npy file: the vectors the target holds. It is
 * what the built-in simulator indexes (--vector-index, a FAISS factory
 * string) and what an exact search runs over when no truth file is given.
 * Queries (--vector-queries): "gen:N" (N vectors of the corpus's generator,
 * stream 1: the same distribution, not copies; needs a generated corpus),
 * a .fvecs/.npy file, or "text:FILE" (a prompts file whose texts the
 * target embeds before the run: app/vector_embed.h); default gen:1000. Request i searches query i mod n.
 * Ground truth (--vector-truth): an .ivecs/.npy file of at least k ids per
 * query, one row per query; else computed before the load by an exact
 * search over the corpus (FAISS's flat index when the build has FAISS,
 * else a brute-force scan), and the time it took is reported.
 */
#ifndef TS_APP_RUN_VECTOR_H
#define TS_APP_RUN_VECTOR_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "base/err.h"
#include "app/vector_embed.h"
#include "llm/vecset.h"

#define RUN_VECTOR_DEFAULT_DATA    "gen:20000x64"
#define RUN_VECTOR_DEFAULT_QUERIES "gen:1000"

/*
 * Template mode (--vector-api): the request and the answer's shape for any
 * REST vector database. A preset name, or @FILE holding
 *   {"path": "/collections/{{collection}}/points/search",
 *    "body": {... "{{vector}}" ... "{{k}}" ... "{{nprobe}}" ... "{{ef_search}}" ...},
 *    "results": "/result", "id": "/id"}
 * path: where the request goes (it replaces --target's path; "{{collection}}"
 * is --vector-collection); body: the JSON sent, where a string value that is
 * exactly "{{vector}}" (exactly once) becomes the query vector, "{{k}}" the
 * k, "{{nprobe}}" / "{{ef_search}}" those options (null when not given);
 * results: a JSON pointer (RFC 6901) to the array of hits in the answer;
 * id: a pointer into each hit to its id ("" when the hit is the id), an
 * integer or a string of digits. Presets: "tokenstorm" (the simulator),
 * "qdrant" (points search, params.hnsw_ef), "milvus" (REST v2 entities
 * search, searchParams.params.nprobe / ef), "chroma" (collection query,
 * n_results; ids must be numeric strings), written from the published API
 * references and not run against live servers here.
 */
#define RUN_VECTOR_MAX_TEMPLATE (64u << 10)

struct run_vector_api {
    char *path;            /* owned */
    char *prefix, *suffix; /* the body around the vector; owned */
    char *results, *id;    /* JSON pointers; owned */
};

struct run_vector_opts {
    const char *data;    /* --vector-data; NULL: RUN_VECTOR_DEFAULT_DATA */
    const char *index;   /* --vector-index (built-in simulator only); NULL: its default */
    const char *queries; /* --vector-queries; NULL: RUN_VECTOR_DEFAULT_QUERIES */
    const char *truth;   /* --vector-truth; NULL: computed */
    uint32_t k;          /* --vector-k, 1..VECSET_MAX_K; 0: 10 */
    int64_t nprobe;      /* --nprobe sent in every request, when has_nprobe */
    int64_t ef_search;   /* --ef-search sent in every request, when has_ef_search */
    bool has_nprobe, has_ef_search;
    uint64_t seed;          /* --vector-seed: the generated corpus's and queries' seed */
    const char *api;        /* --vector-api PRESET | @FILE; NULL: the simulator's native body */
    const char *collection; /* --vector-collection, for {{collection}}; NULL: "bench" */
    /* a PostgreSQL target (app/run_pg.h): --pg-table, --pg-column, --pg-id;
     * NULL: items, embedding, id */
    const char *pg_table, *pg_column, *pg_id;
    /* queries "text:FILE": embedded through this target's embeddings endpoint
     * (app/vector_embed.h); NULL: such queries are refused */
    const struct vector_embed_target *embed;
};

/* Sets the defaults (nothing given). */
void run_vector_opts_init(struct run_vector_opts *o);

struct run_vector {
    struct vecset queries;
    struct ivecset truth;
    const char *truth_method;  /* "file", "faiss-flat" or "scan" */
    double truth_s;            /* seconds the exact search took (0 for a file) */
    struct run_vector_api api; /* template mode: path NULL when off */
    /* text queries: how many embeddings requests, and how long they took */
    size_t embed_requests;
    double embed_s;
    char *embed_url; /* owned */
};

/*
 * Loads or generates the queries and loads or computes the ground truth
 * (blocking: seconds for a large corpus). Returns 0, or a negative code with
 * "--option: message" in err; on error rv holds nothing.
 */
TS_MUST_CHECK int run_vector_prepare(const struct run_vector_opts *o, struct run_vector *rv,
                                     char *err, size_t errlen);
void run_vector_release(struct run_vector *rv);

/*
 * Expands --vector-api into rv->api (nothing when o->api is NULL). Returns 0
 * or -EINVAL / TS_PARSE / -ENOMEM with "--vector-api ...: message" in err.
 */
TS_MUST_CHECK int run_vector_api_load(const struct run_vector_opts *o, struct run_vector *rv,
                                      char *err, size_t errlen);
/* The template's URL: scheme://host[:port] of target + the template's path, into url. */
TS_MUST_CHECK int run_vector_api_url(const struct run_vector *rv, const char *target, char *url,
                                     size_t n);

/* Writes the ground truth as an .ivecs file at path (what --vector-truth
 * reads back). Returns 0 or -errno with a message in err. */
TS_MUST_CHECK int run_vector_write_truth(const struct run_vector *rv, const char *path, char *err,
                                         size_t errlen);

/*
 * Adds "nprobe" / "ef_search" (when given) to the body overrides *ov (created
 * when NULL; keys already there win). Returns 0 or -ENOMEM.
 */
TS_MUST_CHECK int run_vector_overrides(const struct run_vector_opts *o, json_t **ov);

/* The "vector" object of result.json's config: the options and how the truth was had. */
json_t *run_vector_config_json(const struct run_vector_opts *o, const struct run_vector *rv);

#endif
