/*
 * topo.h - the dependency graph of an AI application: nodes (entry points,
 * agents, chains, tools, models, embeddings, retrievers, vector stores,
 * HTTP services, traced services and operations), edges between them, the
 * layer each node lives in, what was learnt from code (the static scan) and
 * from traces, and the risks found along the chain. docs/TOPOLOGY.md is the
 * user's description; the JSON written by topo_write_json() is its schema.
 *
 * Building. topo_init(); then any of topo_load_scan() (the static scan's
 * JSON), topo_add_spans() (traced spans; may be called again with more),
 * then topo_finish() which merges code and traced nodes that are the same
 * thing, computes the statistics (p50/p99, error rate, share of the
 * critical path) and the risk flags. After topo_finish() the graph is read
 * only; topo_release() frees it.
 *
 * Bounds: TOPO_MAX_NODES nodes and TOPO_MAX_EDGES edges (more are refused
 * with TS_TOOBIG), TOPO_MAX_SAMPLES latency samples kept per node and edge
 * (a deterministic reservoir beyond: percentiles then estimate), strings
 * cut to the field sizes below.
 */
#ifndef TS_ANALYSIS_TOPO_H
#define TS_ANALYSIS_TOPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/err.h"

#define TOPO_MAX_NODES   4096
#define TOPO_MAX_EDGES   16384
#define TOPO_MAX_SAMPLES 20000
#define TOPO_MAX_MODELS  4
#define TOPO_MAX_FLAGS   256
#define TOPO_MAX_ERRORS  256
#define TOPO_SCAN_MAX    (64u << 20) /* bytes of the scan's JSON */

enum topo_layer {
    TOPO_LAYER_GATEWAY = 0, /* entry points, routes, agents, chains, tools, app services */
    TOPO_LAYER_MODEL = 1,   /* chat models, LLM clients, embeddings, model servers */
    TOPO_LAYER_VECTOR = 2,  /* retrievers, vector stores, search */
    TOPO_LAYER_INFRA = 3,   /* other HTTP services, databases, caches */
};

enum topo_origin {
    TOPO_CODE = 1 << 0,
    TOPO_TRACE = 1 << 1,
};

/* Latency samples (ms) with a cap; calls and errors count everything. */
struct topo_lat {
    double *ms;
    size_t n, cap;
    uint64_t calls, errors;
    uint64_t seen;         /* samples offered (the reservoir's denominator) */
    double p50_ms, p99_ms; /* after topo_finish; NAN with no sample */
};

struct topo_node {
    char id[192];
    char label[128];
    char kind[24]; /* entry, tool, agent, chain, chat_model, llm_client, embeddings,
                      retriever, vector_store, http, http_client, service, operation,
                      model, db, peer */
    enum topo_layer layer;
    unsigned origin; /* enum topo_origin flags */
    char service[64];
    char cls[48];
    char models[TOPO_MAX_MODELS][64];
    char base_url[192];
    char url[192];
    char system[48]; /* vector store or db system, gen_ai provider */
    char file[128];
    int line;
    char route[96];
    double timeout_s;   /* -1: none written in code */
    int max_retries;    /* -1: none written */
    int retry_attempts; /* -1: none; 0: unbounded (retry decorator without a stop) */
    char retry_lib[24];
    bool breaker, streaming, is_async, fallbacks;
    struct topo_lat lat;
    size_t merged_into; /* SIZE_MAX unless merged into another node */
};

struct topo_edge {
    size_t from, to;
    char kind[12]; /* uses, invokes, calls, http, fallback, traced */
    unsigned origin;
    char method[24];
    bool streaming, sync, timeout_missing;
    double timeout_s; /* -1: none */
    int max_retries;  /* -1: none */
    struct topo_lat lat;
    double crit_ns;    /* time on the critical path of traces */
    double crit_share; /* crit_ns / the traces' total root time; NAN with no trace */
    bool dead;         /* folded into another edge by a merge */
};

struct topo_flag {
    char kind[24];    /* timeout_below_p99, retry_amplification, missing_timeout,
                      sync_in_stream, unbounded_retry */
    char severity[8]; /* high, medium, low */
    size_t node;      /* the node it is about */
    size_t edge;      /* SIZE_MAX when not about an edge */
    double value;     /* the number the flag is about (ms, calls) */
    char message[320];
};

struct topo_scan_error {
    char file[160];
    int line;
    char message[160];
};

struct topo_graph {
    struct topo_node *nodes;
    size_t n_nodes, cap_nodes;
    struct topo_edge *edges;
    size_t n_edges, cap_edges;
    struct topo_flag flags[TOPO_MAX_FLAGS];
    size_t n_flags;
    struct topo_scan_error errors[TOPO_MAX_ERRORS];
    size_t n_errors;
    uint64_t errors_total;
    char source[256]; /* --source as given, "" without */
    uint64_t files;   /* Python files read */
    uint64_t spans, traces, spans_rejected;
    double root_ns; /* total duration of the traces' root spans */
    uint64_t rng;   /* reservoir sampling state */
};

void topo_init(struct topo_graph *g);
void topo_release(struct topo_graph *g);

/* The index of the node with this id, or SIZE_MAX. Merged nodes resolve to
 * the node they were merged into. */
size_t topo_find(const struct topo_graph *g, const char *id);

/* The node with this id, made (zeroed, timeout -1 etc., kind and layer as
 * given) when absent. Returns its index in *out; 0, TS_TOOBIG, -ENOMEM. */
TS_MUST_CHECK int topo_node_get(struct topo_graph *g, const char *id, const char *kind,
                                enum topo_layer layer, size_t *out);

/* The edge from -> to of this kind, made when absent. 0, TS_TOOBIG, -ENOMEM. */
TS_MUST_CHECK int topo_edge_get(struct topo_graph *g, size_t from, size_t to, const char *kind,
                                size_t *out);

/* Records one call of dur_ns (error or not) into l. -ENOMEM. */
TS_MUST_CHECK int topo_lat_add(struct topo_graph *g, struct topo_lat *l, double dur_ns, bool error);

/* The layer of a node kind from the static scan (entry, chat_model, ...). */
enum topo_layer topo_kind_layer(const char *kind, const char *url);

/* "gateway", "model", "vector", "infrastructure". */
const char *topo_layer_name(enum topo_layer l);
/* "code", "traced", "both". */
const char *topo_origin_name(unsigned origin);

/*
 * Reads the static scan's JSON (docs/TOPOLOGY.md "The scan's JSON"):
 * validates every field it uses (types, sizes; unknown fields ignored),
 * adds its nodes and edges with origin code, and its unparseable files to
 * g->errors. Returns 0; TS_PARSE with "scan: what is wrong" in err; TS_TOOBIG;
 * -ENOMEM.
 */
struct otlp_spans;
TS_MUST_CHECK int topo_load_scan(struct topo_graph *g, const char *json, size_t len, char *err,
                                 size_t errlen);

/*
 * Adds traced spans (telemetry/otlp_read.h): a node per service operation,
 * model, database and peer, an edge wherever a span's node differs from its
 * parent's (docs/TOPOLOGY.md "From traces"), with call counts, errors,
 * latencies and time on the critical path. -ENOMEM, TS_TOOBIG.
 */
struct otlp_spans;
TS_MUST_CHECK int topo_add_spans(struct topo_graph *g, const struct otlp_spans *spans);

/* Merges code and traced nodes, computes percentiles, shares and flags. -ENOMEM. */
TS_MUST_CHECK int topo_finish(struct topo_graph *g);

/* The graph as the JSON document of docs/TOPOLOGY.md (new reference, or NULL). */
json_t *topo_to_json(const struct topo_graph *g);
/* Graphviz DOT and Mermaid flowchart text. 0, TS_TOOBIG, -ENOMEM. */
TS_MUST_CHECK int topo_write_dot(const struct topo_graph *g, struct buf *out);
TS_MUST_CHECK int topo_write_mermaid(const struct topo_graph *g, struct buf *out);
/* A terminal summary: layers, nodes, edges with numbers, flags. */
TS_MUST_CHECK int topo_write_text(const struct topo_graph *g, struct buf *out);

#endif
