/*
 * topology.h - `tokenstorm topology`: the application's dependency graph
 * from its Python source (a helper script embedded in the binary, run with
 * the user's python3 and the standard ast module), from OTLP/JSON trace
 * files and from a live OTLP/HTTP receiver, merged, with risk flags, written
 * as JSON, DOT, Mermaid or text (docs/TOPOLOGY.md).
 */
#ifndef TS_APP_TOPOLOGY_H
#define TS_APP_TOPOLOGY_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/topo.h"
#include "base/err.h"

#define TOPOLOGY_MAX_TRACE_FILES 64
#define TOPOLOGY_TRACE_FILE_MAX  (256u << 20) /* bytes of one trace file */

struct topology_opts {
    const char *source; /* --source DIR or NULL */
    const char *python; /* --python (default: $TOKENSTORM_PYTHON or "python3") */
    const char *traces[TOPOLOGY_MAX_TRACE_FILES]; /* --traces FILE, repeatable */
    size_t n_traces;
    const char *otlp_listen;  /* --otlp-listen HOST:PORT or NULL */
    uint64_t listen_ns;       /* --listen-for: stop receiving after this (0: until a signal) */
    uint64_t listen_spans;    /* --until-spans: stop after this many spans (0: no limit) */
    const char *save_traces;  /* --save-traces FILE: received bodies as OTLP JSON lines */
    const char *out_dir;      /* --out DIR: topology.json, .dot, .mmd */
    const char *format;       /* --format text|json|dot|mermaid (stdout) */
    uint64_t scan_timeout_ns; /* --scan-timeout (default 120 s) */
    uint64_t max_files;       /* Python files read at most (default 20,000) */
};

/* Runs the command. Returns a process exit code: 0; 2 (a bad option or
 * file); 3 (python3 could not run, the receiver could not listen); 130/143. */
int topology_job(const struct topology_opts *o);

/*
 * Runs the embedded scan on dir with python and adds what it found to g.
 * Returns 0, or a negative code with the reason in err (python missing or
 * killed by the timeout, its output malformed).
 */
TS_MUST_CHECK int topology_scan(struct topo_graph *g, const char *python, const char *dir,
                                uint64_t max_files, uint64_t timeout_ns, char *err, size_t errlen);

#endif
