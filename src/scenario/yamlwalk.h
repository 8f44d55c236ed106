/*
 * yamlwalk.h - strict walks over YAML configuration files (libfyaml):
 * loading one document safely, "file:line:col: message" errors, typed
 * lookups of a mapping's keys, unknown keys with a did-you-mean, and YAML to
 * JSON conversion of a whole node.
 *
 * A struct yamlwalk is embedded by its user: yw_open() loads a document and
 * gives its root, the walker functions read it, yw_close() frees it (call it
 * after any outcome of yw_open; a zeroed struct may be closed too).
 *
 * Loading (yw_open) refuses, before libfyaml builds a tree:
 *   - text over a caller's byte cap (TS_TOOBIG);
 *   - text that is not UTF-8 (libfyaml 0.7.12 can loop forever on some
 *     invalid UTF-8), with the position of the first bad byte;
 *   - YAML syntax errors (libfyaml's message and position), duplicate keys;
 *   - more than one document (the position of the second one);
 *   - more than YW_MAX_NODES nodes (scalars, aliases, mappings, lists).
 *
 * Aliases are allowed and resolved lazily: every function below that hands
 * out a value node follows aliases first (an error names an unknown alias).
 * Alias bombs are bounded: a walk may visit at most YW_MAX_VISITS nodes (list
 * items, mapping entries, JSON nodes and alias hops count) and copy at most
 * YW_MAX_BYTES bytes out of scalars (strings and JSON), and follows at most
 * YW_MAX_DEPTH levels of nesting. Merge keys ("<<") are not supported: they
 * are reported as such by yw_keys_check().
 *
 * Positions: a scalar or alias is where its text starts (libfyaml's token
 * mark: after the opening quote of a quoted scalar, after the '*' of an
 * alias); a mapping or list is where its first scalar is (for a block
 * mapping: its first key); an empty collection has none, and errors about it
 * point at the key last looked up with yw_find() (w->at). Lines and columns
 * are 1-based, columns in bytes. A document of YW_MAX_NODES nodes takes
 * about 350 MB while it is loaded (libfyaml's tree).
 *
 * Errors: every function that can fail writes "NAME:LINE:COL: message" (or
 * "NAME: message" when no position is known) into the err buffer given to
 * yw_open() and returns -EINVAL (TS_PARSE for unreadable YAML, TS_TOOBIG,
 * -ENOMEM with "NAME: out of memory"). Messages of the typed getters name the
 * value as the caller's `what` (the map-level getters use "'KEY'"):
 *   s.yaml:7:11: 'rate' must be a number > 0, got 'fast'
 *   s.yaml:12:5: unknown key 'ratee' in class 'chat' (did you mean 'rate'?)
 *
 * Map-level getters (yw_str, yw_bool, ...) return 1 when the key is present
 * and its value valid (output written), 0 when the key is absent (output
 * untouched), or a negative error. Node-level ones (yw_node_*) return 0 or
 * a negative error. Strings handed out are ts_malloc'd, NUL-terminated,
 * valid UTF-8 without NUL bytes; the caller frees them.
 */
#ifndef TS_SCENARIO_YAMLWALK_H
#define TS_SCENARIO_YAMLWALK_H

#include <jansson.h>
#include <libfyaml.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dist.h"
#include "base/err.h"

#define YW_MAX_NODES  1000000u    /* nodes in one document */
#define YW_MAX_VISITS 2000000u    /* nodes one walk may visit (alias expansion included) */
#define YW_MAX_BYTES  (64u << 20) /* scalar bytes one walk may copy out */
#define YW_MAX_DEPTH  64          /* nesting (and alias chains) followed */

struct yamlwalk {
    const char *name; /* file name in messages (not owned) */
    char *err;
    size_t errlen;
    struct fy_node *at; /* the last key found by yw_find(): position of last resort */
    size_t visits_left, bytes_left;
    /* private */
    struct fy_diag *diag;
    struct fy_parser *fyp;
    struct fy_document *fyd;
};

/*
 * Loads text[0..len) (need not be NUL-terminated; name is used in messages
 * and must outlive w). Returns 0 with *root the document's root node, or
 * NULL when the document has no content (empty, blanks, comments); or
 * TS_TOOBIG (len > max), TS_PARSE (see above) or -ENOMEM, with a message.
 * Call yw_close() after any outcome.
 */
TS_MUST_CHECK int yw_open(struct yamlwalk *w, const char *name, const char *text, size_t len,
                          size_t max, char *err, size_t errlen, struct fy_node **root);

/* Frees the document. Safe on a zeroed or already closed walk. */
void yw_close(struct yamlwalk *w);

/* The 1-based position of n (see above); false when it has none. */
bool yw_pos(struct fy_node *n, int *line, int *col);

/*
 * Writes "NAME:LINE:COL: message" for the position of at (else of w->at, else
 * "NAME: message") and returns -EINVAL. Control bytes in the message (from
 * quoted values) are written as '?', so it stays one line. Messages are cut
 * at 511 bytes.
 */
int yw_err(struct yamlwalk *w, struct fy_node *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes "NAME: out of memory" and returns -ENOMEM. */
int yw_oom(struct yamlwalk *w);

/* What n is, for messages: "a mapping", "a list", "nothing" (NULL or a null
 * scalar: empty, ~, null), "a string" (any other scalar), "an alias". */
const char *yw_kind(struct fy_node *n);

/* Whether n is NULL or a plain null scalar ("", "~", "null", "Null", "NULL"). */
bool yw_is_null(struct fy_node *n);

/* Follows aliases: 0 with *out the node n stands for (n itself when it is not
 * an alias), or -EINVAL (unknown alias, a chain deeper than YW_MAX_DEPTH, the
 * visit budget spent). */
TS_MUST_CHECK int yw_deref(struct yamlwalk *w, struct fy_node *n, struct fy_node **out);

/*
 * Checks that map is a mapping ("WHAT must be a mapping (key: value), got a
 * list") whose keys are all strings found in keys (NULL-terminated):
 *   "unknown key 'ratee' in WHAT (did you mean 'rate'?)"
 *   "merge keys (<<) are not supported (in WHAT)"
 */
TS_MUST_CHECK int yw_keys_check(struct yamlwalk *w, struct fy_node *map, const char *const *keys,
                                const char *what);

/* The key node of key in map (no alias following), or NULL. */
struct fy_node *yw_key_node(struct fy_node *map, const char *key);

/*
 * Looks key up in map (a mapping). Returns 1 with *val the value (aliases
 * followed; an empty value is NULL or a null scalar: see yw_is_null) and
 * w->at set to the key node, 0 when absent (or map is not a mapping), or
 * -EINVAL (a bad alias).
 */
TS_MUST_CHECK int yw_find(struct yamlwalk *w, struct fy_node *map, const char *key,
                          struct fy_node **val);

/*
 * Iterates a list (start with *it = NULL): 1 with *item (aliases followed),
 * 0 at the end, or -EINVAL. Every item counts one visit.
 */
TS_MUST_CHECK int yw_seq_next(struct yamlwalk *w, struct fy_node *seq, void **it,
                              struct fy_node **item);

/* One entry of a mapping: the key's text (not NUL-terminated: len bytes,
 * owned by the document) and nodes. */
struct yw_entry {
    struct fy_node *key, *value; /* value: aliases followed; NULL when empty */
    const char *name;
    size_t len;
};

/*
 * Iterates a mapping (start with *it = NULL): 1 with *e, 0 at the end, or
 * -EINVAL (a key that is not a string scalar, a bad alias). Every entry
 * counts one visit.
 */
TS_MUST_CHECK int yw_map_next(struct yamlwalk *w, struct fy_node *map, void **it,
                              struct yw_entry *e);

/* ---- Typed values of a node (what: the value's name in messages) ---- */

/* A scalar of at most maxlen bytes: "WHAT must be a string, got a list",
 * "WHAT is longer than N bytes", "WHAT holds a NUL byte or invalid UTF-8".
 * A null scalar is refused (got nothing); a quoted "" is an empty string. */
TS_MUST_CHECK int yw_node_str(struct yamlwalk *w, struct fy_node *n, const char *what,
                              size_t maxlen, char **out);

/* true/false (also True, TRUE, False, FALSE): "WHAT must be true or false, got 'yes'". */
TS_MUST_CHECK int yw_node_bool(struct yamlwalk *w, struct fy_node *n, const char *what, bool *out);

/* A decimal integer in [min, max] (digits, an optional sign):
 * "WHAT must be an integer in [1, 64], got 'x'" (">= 1" when max is the
 * type's maximum). */
TS_MUST_CHECK int yw_node_u64(struct yamlwalk *w, struct fy_node *n, const char *what, uint64_t min,
                              uint64_t max, uint64_t *out);
TS_MUST_CHECK int yw_node_i64(struct yamlwalk *w, struct fy_node *n, const char *what, int64_t min,
                              int64_t max, int64_t *out);

enum yw_range_flags {
    YW_MIN_OPEN = 1 << 0, /* value > min (else >= min) */
    YW_MAX_OPEN = 1 << 1, /* value < max (else <= max) */
};

/* A finite decimal number (units_scan_number syntax) within min..max
 * (+-INFINITY: no bound): "WHAT must be a number > 0, got 'fast'",
 * "WHAT must be a number in [0, 1], got '2'". */
TS_MUST_CHECK int yw_node_double(struct yamlwalk *w, struct fy_node *n, const char *what,
                                 double min, double max, unsigned flags, double *out);

/* A duration (units_parse_duration_ns: "500ms", "2m", a bare number is
 * seconds) of at least min_ns: "WHAT must be a duration > 0 (like 500ms,
 * 30s, 2m), got 'x'" (" > 0" only when min_ns is 1; ">= X" beyond). */
TS_MUST_CHECK int yw_node_duration(struct yamlwalk *w, struct fy_node *n, const char *what,
                                   uint64_t min_ns, uint64_t *ns);

/*
 * A distribution spec (base/dist.h). A relative path in "empirical:FILE" is
 * resolved against dir (see yw_path_resolve) before parsing. On success the
 * parsed distribution goes to *d when d is not NULL (the caller releases it)
 * and the spec as resolved to *spec when spec is not NULL (ts_free it).
 * Errors carry dist_parse's message: "WHAT: normal: expected MEAN,SD (e.g.
 * normal:512,64), got '512'". Reads FILE now (blocking).
 */
TS_MUST_CHECK int yw_node_dist(struct yamlwalk *w, struct fy_node *n, const char *what,
                               const char *dir, struct dist *d, char **spec);

enum yw_list_flags {
    YW_SCALAR_OK = 1 << 0, /* a single scalar is a list of one */
};

/*
 * A list of at most maxn scalars of at most maxlen bytes each ("WHAT item 2
 * must be a string, got a mapping"; items count from 1). An empty list gives
 * *out NULL and *n 0. Free with yw_strv_free().
 */
TS_MUST_CHECK int yw_node_strlist(struct yamlwalk *w, struct fy_node *n, const char *what,
                                  size_t maxn, size_t maxlen, unsigned flags, char ***out,
                                  size_t *nout);

/* One entry of a string map. */
struct yw_pair {
    char *key, *value;             /* owned */
    struct fy_node *knode, *vnode; /* for positions; owned by the document */
};

/*
 * A mapping of at most maxn entries whose values are scalars of at most
 * maxlen bytes, taken as their text (8 -> "8", true -> "true"). Free with
 * yw_pairs_free(). An empty mapping gives *out NULL and *n 0.
 */
TS_MUST_CHECK int yw_node_strmap(struct yamlwalk *w, struct fy_node *n, const char *what,
                                 size_t maxn, size_t maxlen, struct yw_pair **out, size_t *nout);

/*
 * Converts a whole node to JSON (a new reference in *out): mappings become
 * objects (keys must be scalars), lists arrays; a plain scalar becomes null
 * ("", ~, null), true/false (also True/False), an integer (digits with an
 * optional sign, below 9e15 in magnitude) or a real (any other
 * units_scan_number), else a string; quoted and block scalars, and any
 * scalar tagged !!str, stay strings.
 */
TS_MUST_CHECK int yw_json(struct yamlwalk *w, struct fy_node *n, json_t **out);

/* ---- The same, looked up by key in a mapping (what = "'KEY'") ---- */

TS_MUST_CHECK int yw_str(struct yamlwalk *w, struct fy_node *map, const char *key, size_t maxlen,
                         char **out);
TS_MUST_CHECK int yw_bool(struct yamlwalk *w, struct fy_node *map, const char *key, bool *out);
TS_MUST_CHECK int yw_u64(struct yamlwalk *w, struct fy_node *map, const char *key, uint64_t min,
                         uint64_t max, uint64_t *out);
TS_MUST_CHECK int yw_i64(struct yamlwalk *w, struct fy_node *map, const char *key, int64_t min,
                         int64_t max, int64_t *out);
TS_MUST_CHECK int yw_double(struct yamlwalk *w, struct fy_node *map, const char *key, double min,
                            double max, unsigned flags, double *out);
TS_MUST_CHECK int yw_duration(struct yamlwalk *w, struct fy_node *map, const char *key,
                              uint64_t min_ns, uint64_t *ns);
TS_MUST_CHECK int yw_dist(struct yamlwalk *w, struct fy_node *map, const char *key, const char *dir,
                          struct dist *d, char **spec);
TS_MUST_CHECK int yw_strlist(struct yamlwalk *w, struct fy_node *map, const char *key, size_t maxn,
                             size_t maxlen, unsigned flags, char ***out, size_t *nout);
TS_MUST_CHECK int yw_strmap(struct yamlwalk *w, struct fy_node *map, const char *key, size_t maxn,
                            size_t maxlen, struct yw_pair **out, size_t *nout);

/* ---- Helpers ---- */

/*
 * path when it is absolute or dir is NULL, "" or "."; else "dir/path".
 * Returns a ts_malloc'd string, or NULL when out of memory.
 */
char *yw_path_resolve(const char *dir, const char *path);

/* Frees v[0..n) and v. NULL is a no-op. */
void yw_strv_free(char **v, size_t n);
/* Frees the strings of p[0..n) and p. NULL is a no-op. */
void yw_pairs_free(struct yw_pair *p, size_t n);

/* The did-you-mean of name[0..len) among candidates (NULL-terminated), with
 * an edit distance scaled to its length (1 up to 4 bytes, 2 up to 8, else
 * 3), or NULL. */
const char *yw_closest(const char *name, size_t len, const char *const *candidates);

#endif
