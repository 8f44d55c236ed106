/*
 * serve_proxy.h - `tokenstorm proxy` as a library call: the chaos proxy
 * (chaos/proxy.h) on an event loop of its own, until SIGINT or SIGTERM.
 * The command file parses the options (and --check) into struct
 * serve_proxy_opts; serve_proxy() does the rest. docs/CHAOS.md is the
 * user's manual.
 *
 * What it does, in order: libcurl's global state, the OTLP exporter (when
 * the config has an endpoint), the loop, the proxy (proxy_init), the
 * signal watchers, the start faults, the listeners (proxy_listen); then it
 * prints the bound URLs on stdout and serves. The first SIGINT or SIGTERM
 * shuts the proxy down (in-flight requests get grace_ms; later signals are
 * ignored); when the loop is empty it prints the counters, closes the loop
 * and the exporter (whose line is printed whenever the loop was made), and
 * undoes the rest in reverse order. A failure after proxy_init shuts the
 * proxy down the same way, with no grace.
 *
 * Lines on stdout (none when quiet):
 *   tokenstorm proxy: listening on http://HOST:PORT -> UPSTREAM[ (N loop threads)]
 *   tokenstorm proxy: control API on http://HOST:PORT        (with the API)
 *   tokenstorm proxy: N fault(s) loaded, seed S
 *   tokenstorm proxy: stopped: N requests, N upstream errors  (after a signal)
 *   tokenstorm proxy: traces (OTLP): ...                       (with an exporter)
 * A parent may wait for the third line: stdout is flushed after it.
 * Errors go to stderr as "tokenstorm proxy: ...".
 */
#ifndef TS_APP_SERVE_PROXY_H
#define TS_APP_SERVE_PROXY_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "chaos/proxy.h"
#include "telemetry/otlp.h"

struct serve_proxy_opts {
    /* The proxy (chaos/proxy.h); its host strings must outlive the call.
     * cfg.otlp is not read: serve_proxy makes the exporter from otlp. */
    struct proxy_config cfg;
    const struct otlp_config *otlp; /* spans; NULL or no endpoint: none. Borrowed */
    const json_t *faults;           /* specs to start with (fault_file_load), or NULL. Borrowed */
    const char *faults_path;        /* their file, named in messages */
    uint64_t grace_ms;              /* what in-flight requests get after a signal */
    bool quiet;                     /* print nothing but errors */
};

/*
 * Serves until a signal's shutdown completes. Returns the exit code: 0
 * after a signal; 2 a config proxy_init refuses (upstream URL, host,
 * threads) or a start fault the proxy refuses; 3 libcurl, the exporter,
 * the loop, the signal watchers or a listener could not be set up.
 */
int serve_proxy(const struct serve_proxy_opts *o);

#endif
