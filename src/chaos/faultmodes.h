/*
 * faultmodes.h - the fault-mode catalogue: what can go wrong along an AI
 * application's chain (a small knowledge graph: fault mode -> symptoms ->
 * chaos action -> layer), shipped as YAML data (src/chaos/faultmodes.yaml,
 * built into the binary) and extensible with users' files. docs/CHAOS.md
 * "Suggested experiments" documents every field.
 *
 * A mode: id ([a-z0-9-], up to 47 bytes), title, layer (service,
 * middleware, infrastructure: where the fault lives), hits (the topology
 * layer it strikes: gateway, model, vector, infrastructure), symptoms,
 * risk (0.1..0.9), when (preconditions on the target's traits:
 * "flag:KIND", "kind:NODE_KIND", "layer:LAYER", "trait:NAME"; any one that
 * holds makes the mode apply), via (proxy or sim), fault (a proxy fault
 * spec of chaos/fault.h or a simulator admin spec of sim/admin.h; a string
 * value "{over_timeout:DEFAULT}" becomes a delay just over the shortest
 * timeout found in the hit layer, else DEFAULT), for (the phase's
 * duration), probes (the steady-state hypothesis: slo, during), why (the
 * action in words; "{delay}" is the delay chosen).
 */
#ifndef TS_CHAOS_FAULTMODES_H
#define TS_CHAOS_FAULTMODES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/err.h"

#define FM_MAX_MODES    128
#define FM_MAX_WHEN     12
#define FM_MAX_SYMPTOMS 8
#define FM_MAX_PROBES   8
#define FM_FILE_MAX     (1u << 20)

struct fault_mode {
    char id[48];
    char title[128];
    char layer[16]; /* service, middleware, infrastructure */
    char hits[16];  /* gateway, model, vector, infrastructure */
    char symptoms[FM_MAX_SYMPTOMS][32];
    size_t n_symptoms;
    double risk;
    char when[FM_MAX_WHEN][48];
    size_t n_when;
    bool via_sim;
    json_t *fault; /* owned; may hold an {over_timeout:...} placeholder */
    uint64_t for_ns;
    char probe_slo[FM_MAX_PROBES][96];
    char probe_during[FM_MAX_PROBES][96]; /* "" = the slo */
    size_t n_probes;
    char why[160];
    char source[64]; /* "built-in" or the file it came from */
};

struct fault_catalogue {
    struct fault_mode *modes;
    size_t n;
};

/* Frees what the catalogue holds; a zeroed one is fine. */
void fault_catalogue_release(struct fault_catalogue *c);

/*
 * Adds the modes of a catalogue file's text (name in messages) to c; a mode
 * whose id is already there replaces it. Every field is validated, the
 * fault spec by the parser of its target (with the placeholder's default),
 * the probes by the SLO grammar. Returns 0, or -EINVAL / TS_PARSE /
 * TS_TOOBIG / -ENOMEM with "name:line:col: reason" in err.
 */
TS_MUST_CHECK int fault_catalogue_add(struct fault_catalogue *c, const char *text, size_t len,
                                      const char *name, char *err, size_t errlen);

/* Adds the built-in catalogue. As fault_catalogue_add(). */
TS_MUST_CHECK int fault_catalogue_builtin(struct fault_catalogue *c, char *err, size_t errlen);

/*
 * The fault spec of m with its placeholder filled: over_ms > 0 gives a
 * delay of 1.25 x over_ms (rounded up to 50 ms), else the placeholder's
 * default. The chosen delay (or "") goes to delay. A new reference, or NULL
 * when out of memory.
 */
json_t *fault_mode_spec(const struct fault_mode *m, double over_ms, char *delay, size_t len);

#endif
