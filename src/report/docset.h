/*
 * docset.h - the inputs of `tokenstorm report`: result.json files of runs,
 * sweep.json files of sweeps and topology.json files of `tokenstorm
 * topology`, found from the paths on the command line and checked before
 * anything is drawn.
 *
 * A path may be:
 *  - a file: a tokenstorm.result/1 or tokenstorm.sweep/1 document (told
 *    apart by its "schema"), or a topology ("tokenstorm_topology": 1);
 *  - a directory holding result.json (a run) or sweep.json (a sweep), and/or
 *    topology.json (a topology; `topology --out DIR`);
 *  - a directory of such directories (tokenstorm-results/): each
 *    subdirectory with one of them, in name order; and the directory's own
 *    mirror.json (`proxy --mirror-out DIR`: DIR/primary and DIR/mirror are
 *    runs, DIR/mirror.json the pairs' counts, latency difference and answer
 *    similarity), or a tokenstorm.mirror/1 file named on its own.
 * A document's name is its directory's name ("2026-11-29T17-31-48Z-run"), or
 * for a file not named result.json / sweep.json / topology.json its name
 * without ".json"; repeated names get "#2", "#3".
 *
 * For a run the histograms are decoded (result_read_stats) and the summary
 * recomputed from them (run_summary_compute with the file's duration, peak
 * tokens/s and goodput thresholds), so every number drawn comes from one
 * place. For a sweep, each step's DIR/<step.dir>/result.json is loaded when
 * it exists (steps[i].doc == NULL when it does not; a step file that exists
 * but is invalid is an error). For a topology, the graph is read back with
 * topo_from_json() (every field checked; an error names it:
 * "FILE: nodes[3].layer: expected gateway, ...").
 */
#ifndef TS_REPORT_DOCSET_H
#define TS_REPORT_DOCSET_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "analysis/stats.h"
#include "analysis/summary.h"
#include "analysis/topo.h"
#include "base/err.h"

#define REPORT_SWEEP_SCHEMA  "tokenstorm.sweep/1"
#define REPORT_MIRROR_SCHEMA "tokenstorm.mirror/1" /* proxy --mirror-out DIR/mirror.json */
#define REPORT_FILE_MAX      ((size_t)256 << 20)   /* largest input file read */
#define REPORT_DOCS_MAX      256                   /* documents in one set */
#define REPORT_STEPS_MAX     1024                  /* steps of one sweep */

enum report_doc_kind {
    REPORT_DOC_RESULT = 0,
    REPORT_DOC_SWEEP,
    REPORT_DOC_TOPOLOGY,
    REPORT_DOC_MIRROR, /* doc: the mirror.json, its numbers checked */
};

struct report_doc {
    enum report_doc_kind kind;
    char *name;  /* owned */
    char *path;  /* the file read, owned */
    json_t *doc; /* the whole document, owned; NULL for a sweep step without a result */
    /* Runs (and sweep steps with a result): */
    struct run_stats *stats; /* owned */
    struct run_summary sum;  /* sum.stats == stats */
    /* Sweeps: one entry per element of "steps" (kind RESULT; doc NULL when missing). */
    struct report_doc *steps;
    size_t nsteps;
    /* Topologies: the graph read from doc (owned; finished, read only). */
    struct topo_graph *topo;
};

struct report_docset {
    struct report_doc *docs;
    size_t n;
};

/* An empty set. */
void report_docset_init(struct report_docset *set);
/* Frees every document of the set; the set is empty again. */
void report_docset_release(struct report_docset *set);

/*
 * Adds the document(s) at path (see the top of this file). Returns 0,
 * TS_PARSE (not JSON, not one of ours, a malformed section), a negative errno
 * (cannot read), TS_TOOBIG (file over REPORT_FILE_MAX, or more than
 * REPORT_DOCS_MAX documents) or -ENOMEM, with "FILE: what was wrong" in err.
 * On failure the set keeps what it had before the call.
 */
TS_MUST_CHECK int report_docset_add_path(struct report_docset *set, const char *path, char *err,
                                         size_t errlen);

/*
 * Adds one document already parsed (tests, or callers that built it):
 * takes a reference of doc (the caller keeps its own). dir is where a
 * sweep's step directories are (may be NULL: steps without results). Same
 * returns as report_docset_add_path().
 */
TS_MUST_CHECK int report_docset_add_json(struct report_docset *set, json_t *doc, const char *name,
                                         const char *path, const char *dir, char *err,
                                         size_t errlen);

/* The number of documents of kind k in set. */
size_t report_docset_count(const struct report_docset *set, enum report_doc_kind k);

/*
 * Helpers for reading documents leniently (a missing or mistyped key is
 * "absent"): the number at obj.key (integer or real) or NAN; the integer or
 * 0; the string or NULL; the object or NULL; the array or NULL. obj may be
 * NULL.
 */
double report_json_num(const json_t *obj, const char *key);
long long report_json_int(const json_t *obj, const char *key);
const char *report_json_str(const json_t *obj, const char *key);
const json_t *report_json_obj(const json_t *obj, const char *key);
const json_t *report_json_arr(const json_t *obj, const char *key);

#endif
