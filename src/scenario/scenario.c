/*
 * scenario.c - scenario files (scenario.h), parsed strictly with the helpers
 * of yamlwalk.h.
 */
#include "scenario/scenario.h"

#include <libfyaml.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis/slo.h"
#include "base/alloc.h"
#include "base/file.h"
#include "base/rng.h"
#include "base/units.h"
#include "llm/vecset.h"
#include "workload/perturb.h"
#include "scenario/yamlwalk.h"

#define NAME_MAX_LEN   64   /* class, step, intent and slot names */
#define URL_MAX        2048 /* target.url */
#define HEADER_MAX     8192 /* one header value */
#define GOODPUT_MAX    256
#define STAGES_MAX_LEN 65536
#define DIST_SPEC_MAX  4096
#define DEFAULT_DRAIN  (30ull * 1000000000ull)
#define DEFAULT_OUTPUT 128 /* prompts' output tokens when not given */

struct sctx {
    struct yamlwalk w;
    const char *dir;
    struct scenario *s;
    struct fy_node *class_names[SCENARIO_MAX_CLASSES]; /* name value of each class */
};

/* ---------------------------------------------------------------- small checks */

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > NAME_MAX_LEN)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '-' || *s == '.'))
            return false;
    return true;
}

/* An HTTP header name (RFC 9110 token). */
static bool header_name_ok(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("!#$%&'*+-.^_`|~", c)))
            return false;
    }
    return true;
}

static bool env_name_ok(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9'))
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return false;
    return true;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* " (did you mean 'x'?)" or "" into buf. */
static const char *hint(char *buf, size_t cap, const char *name, const char *const *candidates)
{
    const char *near = yw_closest(name, strlen(name), candidates);
    if (near)
        snprintf(buf, cap, " (did you mean '%s'?)", near);
    else
        buf[0] = '\0';
    return buf;
}

/* The node of item i of n (n itself when it is not a list), for positions. */
static struct fy_node *nth_item(struct fy_node *n, size_t i)
{
    if (!n || !fy_node_is_sequence(n))
        return n;
    return fy_node_sequence_get_by_index(n, (int)i);
}

/* The value node of key in map (aliases followed) for positions, or NULL. */
static struct fy_node *val_of(struct sctx *c, struct fy_node *map, const char *key)
{
    struct fy_node *v = NULL;
    return yw_find(&c->w, map, key, &v) == 1 ? v : NULL;
}

/* Reads a name-like key (required or not) and checks its syntax. */
static int get_name(struct sctx *c, struct fy_node *map, const char *key, char **out)
{
    int rc = yw_str(&c->w, map, key, 1024, out);
    if (rc == 1 && !name_ok(*out))
        return yw_err(&c->w, val_of(c, map, key),
                      "'%s' must be 1 to %d letters, digits, '_', '.' or '-', got '%.80s'", key,
                      NAME_MAX_LEN, *out);
    return rc;
}

/* A string of at most 4 KiB that may not be empty ("PREFIX'key' is empty"):
 * 1 with *out (ts_free it), or yw_str's 0 (absent) or error. */
static int get_nonempty(struct sctx *c, struct fy_node *map, const char *key, const char *prefix,
                        char **out)
{
    int rc = yw_str(&c->w, map, key, 4096, out);
    if (rc != 1)
        return rc;
    if (!**out) {
        ts_free(*out);
        *out = NULL;
        return yw_err(&c->w, val_of(c, map, key), "%s'%s' is empty", prefix, key);
    }
    return 1;
}

/* A string that is a path, resolved against the file's directory. */
static int get_path(struct sctx *c, struct fy_node *map, const char *key, char **out)
{
    char *p = NULL;
    int rc = get_nonempty(c, map, key, "", &p);
    if (rc != 1)
        return rc;
    *out = yw_path_resolve(c->dir, p);
    ts_free(p);
    return *out ? 1 : yw_oom(&c->w);
}

/* "Name: value" strings from a header map: names are tokens, values have no CR or LF. */
static int get_headers(struct sctx *c, struct fy_node *map, const char *key, size_t max, char **out,
                       size_t *n)
{
    struct yw_pair *p = NULL;
    size_t np = 0;
    int rc = yw_strmap(&c->w, map, key, max, HEADER_MAX, &p, &np);
    if (rc != 1)
        return rc;
    for (size_t i = 0; i < np && rc == 1; i++) {
        if (!header_name_ok(p[i].key))
            rc = yw_err(&c->w, p[i].knode, "header '%.80s': not a valid header name", p[i].key);
        else if (strpbrk(p[i].value, "\r\n"))
            rc = yw_err(&c->w, p[i].vnode, "header '%s': the value holds a line break (CR or LF)",
                        p[i].key);
        else {
            size_t len = strlen(p[i].key) + strlen(p[i].value) + 3;
            if (!(out[*n] = ts_malloc(len)))
                rc = yw_oom(&c->w);
            else
                snprintf(out[(*n)++], len, "%s: %s", p[i].key, p[i].value);
        }
    }
    yw_pairs_free(p, np);
    return rc;
}

/* ---------------------------------------------------------------- top level */

static int parse_target(struct sctx *c, struct fy_node *t)
{
    static const char *const keys[] = {
        "url",       "model",   "api_key_env",   "headers", "context_length", "context_margin",
        "tokenizer", "timeout", "chat_template", NULL};
    static const char *const tkeys[] = {"connect", "ttfb", "idle", "total", NULL};
    static const char *const ckeys[] = {"message", "reply", "bos", NULL};
    struct yamlwalk *w = &c->w;
    struct scenario *s = c->s;
    struct fy_node *v;
    int rc = yw_keys_check(w, t, keys, "target");
    if (rc)
        return rc;
    if ((rc = yw_str(w, t, "url", URL_MAX, &s->target.url)) < 0)
        return rc;
    if (rc == 1) {
        char *u = s->target.url;
        size_t len = strlen(u), pre = !strncmp(u, "http://", 7)    ? 7
                                      : !strncmp(u, "https://", 8) ? 8
                                                                   : 0;
        bool bad = !pre || len == pre;
        for (size_t i = 0; i < len && !bad; i++)
            bad = (unsigned char)u[i] <= 0x20 || u[i] == 0x7f;
        if (bad)
            return yw_err(w, val_of(c, t, "url"),
                          "'url' must be an http:// or https:// URL, got '%.80s'", u);
        while (len > pre + 1 && u[len - 1] == '/')
            u[--len] = '\0';
    }
    if ((rc = yw_str(w, t, "model", 1024, &s->target.model)) < 0)
        return rc;
    if ((rc = yw_str(w, t, "api_key_env", 256, &s->target.api_key_env)) < 0)
        return rc;
    if (rc == 1 && !env_name_ok(s->target.api_key_env))
        return yw_err(w, val_of(c, t, "api_key_env"),
                      "'api_key_env' must name an environment variable (letters, digits, _), "
                      "got '%.80s'",
                      s->target.api_key_env);
    if ((rc = get_headers(c, t, "headers", SCENARIO_MAX_HEADERS, s->target.headers,
                          &s->target.nheaders)) < 0)
        return rc;
    uint64_t u;
    if ((rc = yw_u64(w, t, "context_length", 1, 100000000, &u)) < 0)
        return rc;
    s->target.context_length = (uint32_t)(rc ? u : 0);
    if ((rc = yw_u64(w, t, "context_margin", 0, 100000000, &u)) < 0)
        return rc;
    s->target.context_margin = (uint32_t)(rc ? u : 0);
    if (rc && s->target.context_length && s->target.context_margin >= s->target.context_length)
        return yw_err(w, val_of(c, t, "context_margin"),
                      "'context_margin' must be less than context_length (%u)",
                      s->target.context_length);
    if ((rc = get_path(c, t, "tokenizer", &s->target.tokenizer)) < 0)
        return rc;
    if ((rc = yw_find(w, t, "chat_template", &v)) < 0)
        return rc;
    if (rc == 1) {
        if ((rc = yw_keys_check(w, v, ckeys, "target.chat_template")) != 0)
            return rc;
        if ((rc = yw_str(w, v, "message", 65536, &s->target.tmpl_message)) < 0 ||
            (rc = yw_str(w, v, "reply", 65536, &s->target.tmpl_reply)) < 0 ||
            (rc = yw_str(w, v, "bos", 65536, &s->target.tmpl_bos)) < 0)
            return rc;
        if (!s->target.tmpl_message || !strstr(s->target.tmpl_message, "{content}"))
            return yw_err(w, v, "'chat_template' needs a 'message' with {content} in it");
    }
    if ((rc = yw_find(w, t, "timeout", &v)) < 0)
        return rc;
    if (rc == 1) {
        uint64_t *dst[] = {&s->target.t_connect, &s->target.t_ttfb, &s->target.t_idle,
                           &s->target.t_total};
        if ((rc = yw_keys_check(w, v, tkeys, "target.timeout")) != 0)
            return rc;
        for (size_t i = 0; tkeys[i]; i++)
            if ((rc = yw_duration(w, v, tkeys[i], 1, dst[i])) < 0)
                return rc;
    }
    return 0;
}

static int parse_simulator(struct sctx *c, struct fy_node *n)
{
    static const char *const keys[] = {"profile", "set", NULL};
    struct yamlwalk *w = &c->w;
    struct scenario *s = c->s;
    int rc = yw_keys_check(w, n, keys, "simulator");
    if (rc)
        return rc;
    char *p = NULL;
    if ((rc = yw_str(w, n, "profile", 4096, &p)) < 0)
        return rc;
    if (rc == 1) {
        /* a preset name, or a profile file (a path: with '/' or a YAML extension) */
        bool file = strchr(p, '/') || ends_with(p, ".yaml") || ends_with(p, ".yml");
        s->sim.profile = file ? yw_path_resolve(c->dir, p) : p;
        if (file)
            ts_free(p);
        if (!s->sim.profile)
            return yw_oom(w);
        if (!*s->sim.profile)
            return yw_err(w, val_of(c, n, "profile"), "'profile' is empty");
    }
    struct yw_pair *kv = NULL;
    size_t nkv = 0;
    size_t cap = sizeof(s->sim.sets) / sizeof(s->sim.sets[0]);
    if ((rc = yw_strmap(w, n, "set", cap, 4096, &kv, &nkv)) < 0)
        return rc;
    rc = 0;
    for (size_t i = 0; i < nkv && !rc; i++) {
        if (!kv[i].key[0] || strchr(kv[i].key, '='))
            rc = yw_err(w, kv[i].knode, "simulator.set: '%.80s' is not a profile key", kv[i].key);
        else if (strpbrk(kv[i].value, "\r\n"))
            rc = yw_err(w, kv[i].vnode, "simulator.set: '%s': the value holds a line break",
                        kv[i].key);
        else {
            size_t len = strlen(kv[i].key) + strlen(kv[i].value) + 2;
            if (!(s->sim.sets[s->sim.nsets] = ts_malloc(len)))
                rc = yw_oom(w);
            else
                snprintf(s->sim.sets[s->sim.nsets++], len, "%s=%s", kv[i].key, kv[i].value);
        }
    }
    yw_pairs_free(kv, nkv);
    return rc;
}

/* ---------------------------------------------------------------- class parts */

static int parse_dataset(struct sctx *c, struct fy_node *n, struct scenario_dataset *d)
{
    static const char *const keys[] = {"path",       "format",  "column", "output_column",
                                       "time_scale", "shuffle", NULL};
    static const char *const formats[] = {"sharegpt", "csv", "trace", NULL};
    struct yamlwalk *w = &c->w;
    int rc = yw_keys_check(w, n, keys, "dataset");
    if (rc)
        return rc;
    if ((rc = get_path(c, n, "path", &d->path)) < 0)
        return rc;
    if (rc == 0)
        return yw_err(w, n, "dataset: 'path' is required");
    d->format = ends_with(d->path, ".csv") ? DATASET_CSV : DATASET_SHAREGPT;
    char *f = NULL;
    if ((rc = yw_str(w, n, "format", 64, &f)) < 0)
        return rc;
    if (rc == 1) {
        char h[96];
        if (dataset_format_parse(f, &d->format)) {
            rc = yw_err(w, val_of(c, n, "format"),
                        "'format' must be sharegpt, csv or trace, got '%.80s'%s", f,
                        hint(h, sizeof(h), f, formats));
            ts_free(f);
            return rc;
        }
        ts_free(f);
    }
    if ((rc = yw_str(w, n, "column", 1024, &d->column)) < 0 ||
        (rc == 1 && d->format != DATASET_CSV))
        return rc < 0 ? rc : yw_err(w, NULL, "dataset: 'column' is only for format csv");
    if ((rc = yw_str(w, n, "output_column", 1024, &d->output_column)) < 0 ||
        (rc == 1 && d->format != DATASET_CSV))
        return rc < 0 ? rc : yw_err(w, NULL, "dataset: 'output_column' is only for format csv");
    if ((rc = yw_double(w, n, "time_scale", 0, 1e6, YW_MIN_OPEN, &d->time_scale)) < 0 ||
        (rc == 1 && d->format != DATASET_TRACE))
        return rc < 0 ? rc : yw_err(w, NULL, "dataset: 'time_scale' is only for format trace");
    if ((rc = yw_bool(w, n, "shuffle", &d->shuffle)) < 0)
        return rc;
    return 0;
}

static int parse_sessions(struct sctx *c, struct fy_node *n, struct scenario_sessions *ss)
{
    static const char *const keys[] = {"turns", "think", "header", NULL};
    struct yamlwalk *w = &c->w;
    int rc = yw_keys_check(w, n, keys, "sessions");
    if (rc)
        return rc;
    if ((rc = yw_dist(w, n, "turns", c->dir, &ss->turns, NULL)) < 0)
        return rc;
    if (rc == 0)
        return yw_err(w, n, "sessions: 'turns' is required (turns per session, e.g. uniform:2-6)");
    if ((rc = yw_dist(w, n, "think", c->dir, &ss->think, NULL)) < 0)
        return rc;
    if ((rc = yw_str(w, n, "header", 256, &ss->header)) < 0)
        return rc;
    if (rc == 1 && !header_name_ok(ss->header))
        return yw_err(w, val_of(c, n, "header"), "'header' must be a header name, got '%.80s'",
                      ss->header);
    ss->enabled = true;
    return 0;
}

/* shared_prefix; its tokens spec goes to *spec for the copy into prompts. */
static int parse_prefix(struct sctx *c, struct fy_node *n, struct scenario_prefix *p, char **spec)
{
    static const char *const keys[] = {"pool", "tokens", "ratio", NULL};
    struct yamlwalk *w = &c->w;
    int rc = yw_keys_check(w, n, keys, "shared_prefix");
    if (rc)
        return rc;
    uint64_t pool;
    if ((rc = yw_u64(w, n, "pool", 1, PROMPTGEN_MAX_PREFIX_POOL, &pool)) < 0)
        return rc;
    if (rc == 0)
        return yw_err(w, n, "shared_prefix: 'pool' is required (the number of shared prefixes)");
    if ((rc = yw_dist(w, n, "tokens", c->dir, &p->tokens, spec)) < 0)
        return rc;
    if (rc == 0)
        return yw_err(w, n, "shared_prefix: 'tokens' is required (the length of each prefix)");
    p->ratio = 1.0;
    if ((rc = yw_double(w, n, "ratio", 0, 1, 0, &p->ratio)) < 0)
        return rc;
    p->pool = (uint32_t)pool;
    return 0;
}

static int parse_slot_map(struct sctx *c, struct fy_node *n, struct promptgen_slot *sl)
{
    static const char *const keys[] = {"values", "weights", "file", NULL};
    struct yamlwalk *w = &c->w;
    char what[128];
    snprintf(what, sizeof(what), "slot '%s'", sl->name);
    int rc = yw_keys_check(w, n, keys, what);
    if (rc)
        return rc;
    struct fy_node *values = yw_key_node(n, "values"), *file = yw_key_node(n, "file");
    struct fy_node *weights = yw_key_node(n, "weights");
    if (!!values == !!file)
        return yw_err(w, values ? file : n, "%s: give 'values' or 'file', %s", what,
                      values ? "not both" : "one of them");
    if (file) {
        if (weights)
            return yw_err(w, weights,
                          "%s: 'weights' go with 'values' (a file gives a weight after a tab)",
                          what);
        char *path = NULL;
        if ((rc = get_path(c, n, "file", &path)) < 0)
            return rc;
        char msg[384];
        struct fy_node *v;
        if ((rc = yw_find(w, n, "file", &v)) < 0) {
            ts_free(path);
            return rc;
        }
        rc = promptgen_slot_load_file(sl, path, msg, sizeof(msg));
        ts_free(path);
        if (rc == -ENOMEM)
            return yw_oom(w);
        return rc ? yw_err(w, v, "%s: %s", what, msg) : 0;
    }
    if ((rc = yw_strlist(w, n, "values", PROMPTGEN_MAX_VALUES, PROMPTGEN_MAX_VALUE, 0, &sl->values,
                         &sl->n)) < 0)
        return rc;
    if (sl->n == 0)
        return yw_err(w, values, "%s has no values", what);
    struct fy_node *wl;
    if ((rc = yw_find(w, n, "weights", &wl)) <= 0)
        return rc;
    if (!wl || !fy_node_is_sequence(wl) || (size_t)fy_node_sequence_item_count(wl) != sl->n)
        return yw_err(w, wl, "%s: 'weights' must be a list of %zu numbers, one per value", what,
                      sl->n);
    if (!(sl->weights = ts_calloc(sl->n, sizeof(double))))
        return yw_oom(w);
    void *it = NULL;
    struct fy_node *item;
    double sum = 0;
    for (size_t i = 0; i < sl->n && (rc = yw_seq_next(w, wl, &it, &item)) == 1; i++) {
        if ((rc = yw_node_double(w, item, "'weights' item", 0, INFINITY, 0, &sl->weights[i])) < 0)
            return rc;
        sum += sl->weights[i];
    }
    if (rc < 0)
        return rc;
    if (!(sum > 0))
        return yw_err(w, wl, "%s: the weights are all 0", what);
    return 0;
}

static int parse_slots(struct sctx *c, struct fy_node *n, struct promptgen_intent *in,
                       const char *what)
{
    struct yamlwalk *w = &c->w;
    if (!fy_node_is_mapping(n))
        return yw_err(w, n, "%s: 'slots' must be a mapping (NAME: [values]), got %s", what,
                      yw_kind(n));
    size_t cnt = (size_t)fy_node_mapping_item_count(n);
    if (cnt > PROMPTGEN_MAX_SLOTS)
        return yw_err(w, n, "%s: more than %u slots", what, PROMPTGEN_MAX_SLOTS);
    if (cnt == 0)
        return 0;
    if (!(in->slots = ts_calloc(cnt, sizeof(*in->slots))))
        return yw_oom(w);
    void *it = NULL;
    struct yw_entry e;
    int rc = 0;
    while (in->nslots < cnt && (rc = yw_map_next(w, n, &it, &e)) == 1) {
        struct promptgen_slot *sl = &in->slots[in->nslots++];
        if (!(sl->name = ts_strndup(e.name, e.len)))
            return yw_oom(w);
        if (!name_ok(sl->name) || strlen(sl->name) != e.len)
            return yw_err(w, e.key,
                          "%s: slot name '%.80s' must be 1 to %d letters, digits, '_', '.' or '-'",
                          what, sl->name, NAME_MAX_LEN);
        if (!strcmp(sl->name, "context"))
            return yw_err(w, e.key,
                          "%s: 'context' is reserved ({{context}} marks where padding goes)", what);
        if (e.value && fy_node_is_sequence(e.value)) {
            char label[128];
            snprintf(label, sizeof(label), "slot '%s'", sl->name);
            if ((rc = yw_node_strlist(w, e.value, label, PROMPTGEN_MAX_VALUES, PROMPTGEN_MAX_VALUE,
                                      0, &sl->values, &sl->n)) < 0)
                return rc;
            if (sl->n == 0)
                return yw_err(w, e.key, "slot '%s' has no values", sl->name);
        } else if (e.value && fy_node_is_mapping(e.value)) {
            if ((rc = parse_slot_map(c, e.value, sl)) < 0)
                return rc;
        } else {
            return yw_err(w, e.value,
                          "slot '%s' must be a list of values, or a mapping with values (and "
                          "weights) or file, got %s",
                          sl->name, yw_kind(e.value));
        }
    }
    return rc < 0 ? rc : 0;
}

static int parse_intent(struct sctx *c, struct fy_node *n, struct promptgen_cfg *cfg, size_t idx,
                        struct fy_node **names)
{
    static const char *const keys[] = {"name",         "weight",        "system",
                                       "template",     "templates",     "slots",
                                       "input_tokens", "output_tokens", NULL};
    struct yamlwalk *w = &c->w;
    struct promptgen_intent *in = &cfg->intents[idx];
    in->weight = 1.0;
    if (!fy_node_is_mapping(n))
        return yw_err(w, n, "an intent must be a mapping (name, template, slots, ...), got %s",
                      yw_kind(n));
    int rc = get_name(c, n, "name", &in->name);
    if (rc < 0)
        return rc;
    names[idx] = rc == 1 ? val_of(c, n, "name") : n;
    if (rc == 0) {
        char def[32];
        snprintf(def, sizeof(def), "intent%zu", idx + 1);
        if (!(in->name = ts_strdup(def)))
            return yw_oom(w);
    }
    for (size_t i = 0; i < idx; i++) {
        int l, col;
        if (!strcmp(cfg->intents[i].name, in->name) && yw_pos(names[i], &l, &col))
            return yw_err(w, names[idx], "intent '%s': duplicate name (first at %d:%d)", in->name,
                          l, col);
    }
    char what[128];
    snprintf(what, sizeof(what), "intent '%s'", in->name);
    if ((rc = yw_keys_check(w, n, keys, what)) != 0)
        return rc;
    if ((rc = yw_double(w, n, "weight", 0, INFINITY, YW_MIN_OPEN, &in->weight)) < 0)
        return rc;
    if ((rc = yw_str(w, n, "system", PROMPTGEN_MAX_TEMPLATE, &in->system)) < 0)
        return rc;
    struct fy_node *t1 = yw_key_node(n, "template"), *t2 = yw_key_node(n, "templates");
    if (t1 && t2)
        return yw_err(w, t2, "%s: give 'template' or 'templates', not both", what);
    if (!t1 && !t2)
        return yw_err(w, n, "%s: 'template' (or 'templates') is required", what);
    if (t1) {
        if (!(in->templates = ts_calloc(1, sizeof(char *))))
            return yw_oom(w);
        if ((rc = yw_str(w, n, "template", PROMPTGEN_MAX_TEMPLATE, &in->templates[0])) < 0)
            return rc;
        in->ntemplates = 1;
    } else {
        if ((rc = yw_strlist(w, n, "templates", PROMPTGEN_MAX_TEMPLATES, PROMPTGEN_MAX_TEMPLATE, 0,
                             &in->templates, &in->ntemplates)) < 0)
            return rc;
        if (in->ntemplates == 0)
            return yw_err(w, t2, "%s: 'templates' is empty", what);
    }
    for (size_t i = 0; i < in->ntemplates; i++)
        if (!in->templates[i][0])
            return yw_err(w, t1 ? t1 : nth_item(yw_key_node(n, "templates"), i),
                          "%s: template %zu is empty", what, i + 1);
    struct fy_node *v;
    if ((rc = yw_find(w, n, "slots", &v)) < 0)
        return rc;
    if (rc == 1 && (rc = parse_slots(c, v, in, what)) < 0)
        return rc;
    if ((rc = yw_dist(w, n, "input_tokens", c->dir, &in->input, NULL)) < 0)
        return rc;
    in->has_input = rc == 1;
    if ((rc = yw_dist(w, n, "output_tokens", c->dir, &in->output, NULL)) < 0)
        return rc;
    in->has_output = rc == 1;
    return 0;
}

static int parse_prompts(struct sctx *c, struct fy_node *n, struct promptgen_cfg *cfg)
{
    static const char *const keys[] = {"system", "output_tokens", "intents", NULL};
    struct yamlwalk *w = &c->w;
    int rc = yw_keys_check(w, n, keys, "prompts");
    if (rc)
        return rc;
    if ((rc = yw_str(w, n, "system", PROMPTGEN_MAX_TEMPLATE, &cfg->system)) < 0)
        return rc;
    if ((rc = yw_dist(w, n, "output_tokens", c->dir, &cfg->output, NULL)) < 0)
        return rc;
    if (rc == 0 && dist_init_fixed(&cfg->output, DEFAULT_OUTPUT))
        return yw_oom(w);
    struct fy_node *list;
    if ((rc = yw_find(w, n, "intents", &list)) < 0)
        return rc;
    if (rc == 0)
        return yw_err(w, n, "prompts: 'intents' is required (a list of intents)");
    if (!list || !fy_node_is_sequence(list))
        return yw_err(w, list, "'intents' must be a list of intents, got %s", yw_kind(list));
    size_t cnt = (size_t)fy_node_sequence_item_count(list);
    if (cnt == 0)
        return yw_err(w, list, "'intents' is empty: give at least one intent");
    if (cnt > SCENARIO_MAX_INTENTS)
        return yw_err(w, nth_item(list, SCENARIO_MAX_INTENTS), "more than %d intents",
                      SCENARIO_MAX_INTENTS);
    struct fy_node **names = ts_calloc(cnt, sizeof(*names));
    if (!names || !(cfg->intents = ts_calloc(cnt, sizeof(*cfg->intents)))) {
        ts_free(names);
        return yw_oom(w);
    }
    cfg->nintents = cnt;
    void *it = NULL;
    struct fy_node *item;
    for (size_t i = 0; i < cnt && (rc = yw_seq_next(w, list, &it, &item)) == 1; i++)
        if ((rc = parse_intent(c, item, cfg, i, names)) < 0)
            break;
    ts_free(names);
    return rc < 0 ? rc : 0;
}

/* A string, or a list of strings joined with ','; each item is checked by fn
 * (when not NULL: 0 or a message) at its own position. */
static int get_joined(struct sctx *c, struct fy_node *map, const char *key, size_t maxn,
                      size_t maxlen, int (*fn)(const char *item, char *msg, size_t cap), char **out)
{
    struct yamlwalk *w = &c->w;
    char **v = NULL;
    size_t n = 0, total = 0;
    int rc = yw_strlist(w, map, key, maxn, maxlen, YW_SCALAR_OK, &v, &n);
    if (rc != 1)
        return rc;
    struct fy_node *node;
    if ((rc = yw_find(w, map, key, &node)) < 0)
        goto out;
    rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        char msg[384];
        if (fn && fn(v[i], msg, sizeof(msg)))
            rc = yw_err(w, nth_item(node, i), "'%s': %s", key, msg);
        total += strlen(v[i]) + 1;
    }
    if (!rc && n == 0)
        rc = yw_err(w, node, "'%s' is empty", key);
    if (!rc && total > maxlen)
        rc = yw_err(w, node, "'%s' is longer than %zu bytes", key, maxlen);
    if (rc)
        goto out;
    if (!(*out = ts_malloc(total))) {
        rc = yw_oom(w);
        goto out;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(v[i]);
        if (i)
            (*out)[o++] = ',';
        memcpy(*out + o, v[i], l);
        o += l;
    }
    (*out)[o] = '\0';
    rc = 1;
out:
    yw_strv_free(v, n);
    return rc;
}

static int check_perturb(const char *spec, char *msg, size_t cap)
{
    struct perturb_set set;
    return perturb_set_parse(&set, spec, msg, cap);
}

/* "ttft:MS tpot:MS e2el:MS" (blanks or commas between), as run --goodput reads it. */
static int check_goodput(const char *s, char *msg, size_t cap)
{
    static const char *const keys[] = {"ttft", "tpot", "e2el", NULL};
    bool seen[3] = {false, false, false};
    size_t n = 0;
    const char *p = s;
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '\t')
            p++;
        if (!*p)
            break;
        const char *end = p;
        while (*end && *end != ' ' && *end != ',' && *end != '\t')
            end++;
        char tok[96];
        size_t len = (size_t)(end - p);
        snprintf(tok, sizeof(tok), "%.*s", (int)(len < 80 ? len : 80), p);
        char *colon = strchr(tok, ':');
        if (!colon || len >= 80) {
            snprintf(msg, cap, "expected 'ttft:MS tpot:MS e2el:MS', got '%s'", tok);
            return -EINVAL;
        }
        *colon = '\0';
        int k = -1;
        for (int i = 0; keys[i]; i++)
            if (!strcmp(tok, keys[i]))
                k = i;
        if (k < 0) {
            char h[64];
            snprintf(msg, cap, "unknown metric '%s' (ttft, tpot or e2el)%s", tok,
                     hint(h, sizeof(h), tok, keys));
            return -EINVAL;
        }
        const char *e;
        double v;
        if (units_scan_number(colon + 1, &e, &v) || *e || !(v > 0)) {
            snprintf(msg, cap, "%s: expected milliseconds > 0, got '%s'", tok, colon + 1);
            return -EINVAL;
        }
        if (seen[k]) {
            snprintf(msg, cap, "'%s' given twice", tok);
            return -EINVAL;
        }
        seen[k] = true;
        n++;
        p = end;
    }
    if (!n) {
        snprintf(msg, cap, "expected 'ttft:MS tpot:MS e2el:MS', got nothing");
        return -EINVAL;
    }
    return 0;
}

static int parse_slos(struct sctx *c, struct fy_node *map, struct scenario_class *k)
{
    struct yamlwalk *w = &c->w;
    char **v = NULL;
    size_t n = 0;
    int rc = yw_strlist(w, map, "slos", SCENARIO_MAX_SLOS, SLO_EXPR_MAX - 1, YW_SCALAR_OK, &v, &n);
    if (rc != 1)
        return rc;
    struct fy_node *node;
    rc = yw_find(w, map, "slos", &node);
    for (size_t i = 0; i < n; i++) {
        struct slo slo;
        char msg[384];
        if (rc >= 0 && slo_parse(v[i], &slo, msg, sizeof(msg)))
            rc = yw_err(w, nth_item(node, i), "%s", msg);
        if (rc >= 0)
            k->slos[k->nslos++] = v[i];
        else
            ts_free(v[i]);
    }
    ts_free(v);
    return rc;
}

/* ---------------------------------------------------------------- flows */

static const char *const step_kinds[] = {"chat", "completion", "embeddings", "http", NULL};

/* A step's mapping, its name (unique in the flow) and its keys; what is set
   to "step 'NAME'" for the later steps' messages. */
static int step_head(struct sctx *c, struct fy_node *n, struct flow_def *d, size_t idx,
                     struct fy_node **names, char *what, size_t whatlen)
{
    static const char *const keys[] = {
        "name",    "role",     "kind",          "depends_on", "method",
        "url",     "headers",  "body",          "capture",    "optional_capture",
        "timeout", "fallback", "fallback_only", "retrieval",  NULL};
    struct yamlwalk *w = &c->w;
    struct flow_step_def *st = &d->steps[idx];
    if (!fy_node_is_mapping(n))
        return yw_err(w, n, "a step must be a mapping (name, kind, ...), got %s", yw_kind(n));
    int rc = get_name(c, n, "name", &st->name);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return yw_err(w, n, "step %zu: 'name' is required", idx + 1);
    names[idx] = val_of(c, n, "name");
    for (size_t i = 0; i < idx; i++) {
        int l, col;
        if (!strcmp(d->steps[i].name, st->name) && yw_pos(names[i], &l, &col))
            return yw_err(w, names[idx], "step '%s': duplicate name (first at %d:%d)", st->name, l,
                          col);
    }
    snprintf(what, whatlen, "step '%s'", st->name);
    return yw_keys_check(w, n, keys, what);
}

/* role and kind (chat, completion(s), embeddings or http). */
static int step_kind(struct sctx *c, struct fy_node *n, struct flow_step_def *st)
{
    struct yamlwalk *w = &c->w;
    char *kind = NULL, h[96];
    int rc;
    if ((rc = yw_str(w, n, "role", NAME_MAX_LEN, &st->role)) < 0)
        return rc;
    if ((rc = yw_str(w, n, "kind", 64, &kind)) < 0)
        return rc;
    if (rc == 0)
        return 0;
    if (!strcmp(kind, "chat"))
        st->kind = FLOW_STEP_CHAT;
    else if (!strcmp(kind, "completion") || !strcmp(kind, "completions"))
        st->kind = FLOW_STEP_COMPLETION;
    else if (!strcmp(kind, "embeddings"))
        st->kind = FLOW_STEP_EMBEDDINGS;
    else if (!strcmp(kind, "http"))
        st->kind = FLOW_STEP_HTTP;
    else
        rc = yw_err(w, val_of(c, n, "kind"),
                    "'kind' must be chat, completion, embeddings or http, got '%.80s'%s", kind,
                    hint(h, sizeof(h), kind, step_kinds));
    ts_free(kind);
    return rc < 0 ? rc : 0;
}

/* headers: "Name: value" templates, moved into the step even when a later
   one is refused (the step owns what it holds). */
static int step_headers(struct sctx *c, struct fy_node *n, struct flow_step_def *st)
{
    char *hdrs[FLOW_VARS_MAX];
    size_t nh = 0;
    int rc = get_headers(c, n, "headers", FLOW_VARS_MAX, hdrs, &nh);
    if (nh) {
        if (!(st->headers = ts_calloc(nh, sizeof(char *)))) {
            for (size_t i = 0; i < nh; i++)
                ts_free(hdrs[i]);
            return yw_oom(&c->w);
        }
        memcpy(st->headers, hdrs, nh * sizeof(char *));
        st->nheaders = nh;
    }
    return rc;
}

/* The request's fields: method and url (http only, url required there),
   headers, and body (a mapping for the OpenAI kinds). */
static int step_request(struct sctx *c, struct fy_node *n, struct flow_step_def *st,
                        const char *what, struct fy_node *name)
{
    struct yamlwalk *w = &c->w;
    struct fy_node *v;
    int rc;
    if ((rc = yw_str(w, n, "method", 32, &st->method)) < 0)
        return rc;
    if (rc == 1 && st->kind != FLOW_STEP_HTTP)
        return yw_err(w, NULL, "%s: 'method' is only for kind http", what);
    if ((rc = yw_str(w, n, "url", FLOW_TEXT_MAX, &st->url)) < 0)
        return rc;
    if (rc == 0 && st->kind == FLOW_STEP_HTTP)
        return yw_err(w, name, "%s: kind http needs a 'url'", what);
    if ((rc = step_headers(c, n, st)) < 0)
        return rc;
    if ((rc = yw_find(w, n, "body", &v)) < 0)
        return rc;
    if (rc == 1) {
        if (st->kind != FLOW_STEP_HTTP && (!v || !fy_node_is_mapping(v)))
            return yw_err(w, v, "%s: 'body' must be a mapping (request fields), got %s", what,
                          yw_kind(v));
        if ((rc = yw_json(w, v, &st->body)) < 0)
            return rc;
    }
    return 0;
}

/* One capture (pair p of capture, or of optional_capture when optional)
   into the step: a valid variable name, captured once. */
static int step_capture_add(struct sctx *c, struct flow_step_def *st, const char *what,
                            struct yw_pair *p, bool optional)
{
    struct yamlwalk *w = &c->w;
    bool dup = false;
    for (size_t j = 0; j < st->ncaptures; j++)
        dup |= !strcmp(st->captures[j].var, p->key);
    if (!flow_var_name_valid(p->key, strlen(p->key)))
        return yw_err(w, p->knode,
                      "%s: '%.80s' is not a variable name ([A-Za-z_][A-Za-z0-9_.]*, at most "
                      "%d bytes)",
                      what, p->key, FLOW_VAR_NAME_MAX);
    if (dup)
        return yw_err(w, p->knode, "%s: '%s' is captured twice", what, p->key);
    struct flow_capture *fc = &st->captures[st->ncaptures++];
    fc->var = p->key;
    fc->pointer = p->value;
    fc->optional = optional;
    p->key = p->value = NULL;
    return 0;
}

/* capture and optional_capture: variable -> JSON pointer into the answer. */
static int step_captures(struct sctx *c, struct fy_node *n, struct flow_step_def *st,
                         const char *what)
{
    struct yamlwalk *w = &c->w;
    struct yw_pair *cap[2] = {NULL, NULL};
    size_t ncap[2] = {0, 0};
    int rc;
    if ((rc = yw_strmap(w, n, "capture", FLOW_VARS_MAX, 4096, &cap[0], &ncap[0])) >= 0)
        rc = yw_strmap(w, n, "optional_capture", FLOW_VARS_MAX, 4096, &cap[1], &ncap[1]);
    if (rc >= 0 && ncap[0] + ncap[1] &&
        !(st->captures = ts_calloc(ncap[0] + ncap[1], sizeof(*st->captures))))
        rc = yw_oom(w);
    for (int o = 0; o < 2 && rc >= 0; o++)
        for (size_t i = 0; i < ncap[o] && rc >= 0; i++)
            rc = step_capture_add(c, st, what, &cap[o][i], o == 1);
    yw_pairs_free(cap[0], ncap[0]);
    yw_pairs_free(cap[1], ncap[1]);
    return rc < 0 ? rc : 0;
}

/*
 * retrieval: true | {k: 1..50, docs: FILE}: the step is a vector store search
 * whose recall@k is measured. k defaults to the body's max_num_results when
 * that is a literal integer, else 10 (the API's default).
 */
static int step_retrieval(struct sctx *c, struct fy_node *n, struct flow_step_def *st,
                          const char *what)
{
    static const char *const keys[] = {"k", "docs", NULL};
    struct yamlwalk *w = &c->w;
    struct fy_node *v = NULL;
    bool on = true;
    uint64_t k = 0;
    int rc = yw_find(w, n, "retrieval", &v);
    if (rc <= 0)
        return rc;
    if (fy_node_is_mapping(v)) {
        char kwhat[160];
        snprintf(kwhat, sizeof(kwhat), "the retrieval of %s", what);
        if ((rc = yw_keys_check(w, v, keys, kwhat)) < 0 ||
            (rc = yw_u64(w, v, "k", 1, FLOW_RETRIEVAL_K_MAX, &k)) < 0 ||
            (rc = get_path(c, v, "docs", &st->retrieval_docs)) < 0)
            return rc;
    } else if ((rc = yw_node_bool(w, v, "retrieval", &on)) < 0) {
        return rc;
    }
    if (!on)
        return 0;
    if (st->kind != FLOW_STEP_HTTP)
        return yw_err(w, v,
                      "%s: retrieval is for a kind: http step (a POST to a vector store's "
                      "/search), not %s",
                      what, flow_step_kind_name(st->kind));
    json_t *m = json_object_get(st->body, "max_num_results");
    if (!k && json_is_integer(m) && json_integer_value(m) >= 1 &&
        json_integer_value(m) <= FLOW_RETRIEVAL_K_MAX)
        k = (uint64_t)json_integer_value(m);
    st->retrieval_k = k ? (uint32_t)k : 10;
    return 0;
}

/* One step of a flow; depends_on and fallback are resolved once every step
   is named (resolve_step_refs). explicit_fo[idx]: fallback_only as given, or -1. */
static int parse_step(struct sctx *c, struct fy_node *n, struct flow_def *d, size_t idx,
                      struct fy_node **names, int *explicit_fo)
{
    struct flow_step_def *st = &d->steps[idx];
    char what[128];
    bool fo;
    int rc;
    if ((rc = step_head(c, n, d, idx, names, what, sizeof(what))) != 0 ||
        (rc = step_kind(c, n, st)) < 0 || (rc = step_request(c, n, st, what, names[idx])) < 0 ||
        (rc = step_captures(c, n, st, what)) < 0 || (rc = step_retrieval(c, n, st, what)) < 0 ||
        (rc = yw_duration(&c->w, n, "timeout", 1, &st->timeout_ns)) < 0 ||
        (rc = yw_bool(&c->w, n, "fallback_only", &fo)) < 0)
        return rc;
    explicit_fo[idx] = rc == 1 ? fo : -1;
    st->fallback_only = rc == 1 && fo;
    return 0;
}

/* The index of step name (within names[0..n)), or -1. */
static int step_index(const struct flow_def *d, const char *name)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->steps[i].name && !strcmp(d->steps[i].name, name))
            return (int)i;
    return -1;
}

static int resolve_step_refs(struct sctx *c, struct fy_node *n, struct flow_def *d, size_t idx,
                             const char *const *all)
{
    struct yamlwalk *w = &c->w;
    struct flow_step_def *st = &d->steps[idx];
    char **deps = NULL, h[96];
    size_t ndeps = 0;
    int rc = yw_strlist(w, n, "depends_on", FLOW_STEPS_MAX, 1024, YW_SCALAR_OK, &deps, &ndeps);
    if (rc < 0)
        return rc;
    if (ndeps && !(st->deps = ts_calloc(ndeps, sizeof(uint32_t))))
        rc = yw_oom(w);
    struct fy_node *list = val_of(c, n, "depends_on");
    for (size_t i = 0; i < ndeps && rc >= 0; i++) {
        int k = step_index(d, deps[i]);
        if (k < 0) {
            rc = yw_err(w, nth_item(list, i), "step '%s': depends_on: unknown step '%.80s'%s",
                        st->name, deps[i], hint(h, sizeof(h), deps[i], all));
            break;
        }
        for (size_t j = 0; j < st->ndeps; j++)
            if (st->deps[j] == (uint32_t)k)
                rc = yw_err(w, nth_item(list, i), "step '%s': depends_on: '%s' is listed twice",
                            st->name, deps[i]);
        if (rc >= 0)
            st->deps[st->ndeps++] = (uint32_t)k;
    }
    yw_strv_free(deps, ndeps);
    if (rc < 0)
        return rc;
    char *fb = NULL;
    if ((rc = yw_str(w, n, "fallback", 1024, &fb)) < 0)
        return rc;
    if (rc == 1) {
        int k = step_index(d, fb);
        if (k < 0)
            rc = yw_err(w, val_of(c, n, "fallback"), "step '%s': fallback: unknown step '%.80s'%s",
                        st->name, fb, hint(h, sizeof(h), fb, all));
        else if ((size_t)k == idx)
            rc = yw_err(w, val_of(c, n, "fallback"), "step '%s': a step cannot be its own fallback",
                        st->name);
        st->fallback = k;
        ts_free(fb);
    }
    return rc < 0 ? rc : 0;
}

/* Positions a message of flow_def_check ("step 'NAME': ..." or about the flow). */
static int flow_check_err(struct sctx *c, struct fy_node *flow, struct fy_node *const *steps,
                          const struct flow_def *d, const char *msg)
{
    if (!strncmp(msg, "step '", 6)) {
        const char *q = strchr(msg + 6, '\'');
        for (size_t i = 0; q && i < d->n; i++)
            if (strlen(d->steps[i].name) == (size_t)(q - msg - 6) &&
                !strncmp(d->steps[i].name, msg + 6, (size_t)(q - msg - 6)))
                return yw_err(&c->w, steps[i], "%s", msg);
    }
    return yw_err(&c->w, flow, "flow: %s", msg);
}

static int parse_flow(struct sctx *c, struct fy_node *n, struct flow_def *d)
{
    static const char *const keys[] = {"steps", NULL};
    static const char *const vars[] = {"prompt",    "system", "session_id",
                                       "iteration", "class",  "target"};
    struct yamlwalk *w = &c->w;
    int rc = yw_keys_check(w, n, keys, "flow");
    if (rc)
        return rc;
    struct fy_node *list;
    if ((rc = yw_find(w, n, "steps", &list)) < 0)
        return rc;
    if (rc == 0)
        return yw_err(w, n, "flow: 'steps' is required (a list of steps)");
    if (!list || !fy_node_is_sequence(list))
        return yw_err(w, list, "'steps' must be a list of steps, got %s", yw_kind(list));
    size_t cnt = (size_t)fy_node_sequence_item_count(list);
    if (cnt == 0)
        return yw_err(w, list, "'steps' is empty: give at least one step");
    if (cnt > SCENARIO_MAX_STEPS || cnt > FLOW_STEPS_MAX)
        return yw_err(w, nth_item(list, SCENARIO_MAX_STEPS), "more than %d steps",
                      SCENARIO_MAX_STEPS);
    if (!(d->steps = ts_calloc(cnt, sizeof(*d->steps))))
        return yw_oom(w);
    d->n = cnt;
    for (size_t i = 0; i < cnt; i++)
        d->steps[i].fallback = -1;
    struct fy_node *nodes[SCENARIO_MAX_STEPS] = {0}, *names[SCENARIO_MAX_STEPS] = {0};
    const char *all[SCENARIO_MAX_STEPS + 1] = {0};
    int explicit_fo[SCENARIO_MAX_STEPS];
    void *it = NULL;
    struct fy_node *item;
    for (size_t i = 0; i < cnt && (rc = yw_seq_next(w, list, &it, &item)) == 1; i++) {
        nodes[i] = item;
        if ((rc = parse_step(c, item, d, i, names, explicit_fo)) < 0)
            return rc;
        all[i] = d->steps[i].name;
    }
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < cnt; i++)
        if ((rc = resolve_step_refs(c, nodes[i], d, i, all)) < 0)
            return rc;
    /* a step named as a fallback is fallback_only, unless it says otherwise */
    bool is_fallback[SCENARIO_MAX_STEPS] = {false};
    for (size_t i = 0; i < cnt; i++) {
        int f = d->steps[i].fallback;
        if (f < 0)
            continue;
        if (explicit_fo[f] == 0)
            return yw_err(w, yw_key_node(nodes[f], "fallback_only"),
                          "step '%s': fallback_only is false, but step '%s' names it as its "
                          "fallback",
                          d->steps[f].name, d->steps[i].name);
        d->steps[f].fallback_only = true;
        is_fallback[f] = true;
    }
    for (size_t i = 0; i < cnt; i++)
        if (explicit_fo[i] == 1 && !is_fallback[i])
            return yw_err(w, yw_key_node(nodes[i], "fallback_only"),
                          "step '%s': fallback_only, but no step names it as its fallback",
                          d->steps[i].name);
    char msg[512];
    rc = flow_def_check(d, vars, sizeof(vars) / sizeof(vars[0]), msg, sizeof(msg));
    if (rc == -ENOMEM)
        return yw_oom(w);
    return rc ? flow_check_err(c, n, names, d, msg) : 0;
}

/* ---------------------------------------------------------------- classes */

static const char *const class_keys[] = {"name",          "endpoint",     "rate",
                                         "arrival",       "stages",       "max_concurrency",
                                         "users",         "think",        "ramp_users",
                                         "requests",      "stream",       "ignore_eos",
                                         "body",          "input_tokens", "output_tokens",
                                         "system",        "prompts",      "prompts_file",
                                         "dataset",       "sessions",     "shared_prefix",
                                         "perturbations", "slos",         "goodput",
                                         "flow",          "vector",       NULL};

/* rate: a number or a units rate ("600/m"), > 0. */
static int parse_rate(struct sctx *c, struct fy_node *v, double *rate)
{
    size_t len = 0;
    const char *s =
        v && fy_node_is_scalar(v) && !fy_node_is_alias(v) ? fy_node_get_scalar(v, &len) : NULL;
    char t[96];
    double r;
    if (s && len < sizeof(t) && !memchr(s, '\0', len)) {
        memcpy(t, s, len);
        t[len] = '\0';
        if (units_parse_rate(t, &r) == 0 && r > 0 && isfinite(r)) {
            *rate = r;
            return 0;
        }
    }
    return yw_node_double(&c->w, v, "'rate'", 0, INFINITY, YW_MIN_OPEN, rate);
}

/* The open-loop/closed-loop and prompt-source rules of a class. */
static int class_rules(struct sctx *c, struct fy_node *n, struct scenario_class *k,
                       const char *what)
{
    struct yamlwalk *w = &c->w;
    bool has_rate = yw_key_node(n, "rate") || yw_key_node(n, "stages");
    struct fy_node *users = yw_key_node(n, "users");
    if (k->dataset.path && k->dataset.format == DATASET_TRACE) {
        /* a trace replays its own send times: an open loop without a rate */
        static const char *const no[] = {"rate", "stages", "arrival", "users", NULL};
        for (size_t i = 0; no[i]; i++)
            if (yw_key_node(n, no[i]))
                return yw_err(w, yw_key_node(n, no[i]),
                              "%s: '%s' cannot be used with a trace dataset (the trace gives the "
                              "send times)",
                              what, no[i]);
        has_rate = true;
    }
    if (has_rate && users)
        return yw_err(w, users,
                      "%s: give rate or stages (open loop) or users (closed loop), not both", what);
    if (!has_rate && !users)
        return yw_err(w, n, "%s: needs rate or stages (open loop), or users (closed loop)", what);
    k->open = has_rate;
    static const char *const open_only[] = {"arrival", "max_concurrency", NULL};
    static const char *const closed_only[] = {"think", "ramp_users", NULL};
    for (size_t i = 0; open_only[i]; i++)
        if (!k->open && yw_key_node(n, open_only[i]))
            return yw_err(w, yw_key_node(n, open_only[i]),
                          "%s: '%s' is for open-loop classes (with rate or stages)", what,
                          open_only[i]);
    for (size_t i = 0; closed_only[i]; i++)
        if (k->open && yw_key_node(n, closed_only[i]))
            return yw_err(w, yw_key_node(n, closed_only[i]),
                          "%s: '%s' is for closed-loop classes (with users)", what, closed_only[i]);

    /* at most one prompt source, reported at the second one in the file */
    static const char *const sources[] = {"prompts", "prompts_file", "dataset", "input_tokens",
                                          "output_tokens"};
    const char *first = NULL;
    void *it = NULL;
    struct fy_node_pair *p;
    while ((p = fy_node_mapping_iterate(n, &it)) != NULL) {
        size_t len = 0;
        struct fy_node *key = fy_node_pair_key(p);
        const char *ks = key && fy_node_is_scalar(key) ? fy_node_get_scalar(key, &len) : NULL;
        for (size_t i = 0; ks && i < sizeof(sources) / sizeof(sources[0]); i++) {
            if (len != strlen(sources[i]) || memcmp(ks, sources[i], len))
                continue;
            bool synth = i >= 3;
            if (first && !(synth && !strncmp(first, "input_tokens/", 13)))
                return yw_err(w, key,
                              "%s: '%s' and '%s' are both prompt sources; give one of prompts, "
                              "prompts_file, dataset or input_tokens/output_tokens",
                              what, first, synth ? "input_tokens/output_tokens" : sources[i]);
            first = synth ? "input_tokens/output_tokens" : sources[i];
        }
    }
    struct fy_node *ss = yw_key_node(n, "sessions");
    if (ss && k->endpoint != WORKLOAD_CHAT)
        return yw_err(w, ss, "%s: 'sessions' needs endpoint chat (this class uses %s)", what,
                      k->endpoint == WORKLOAD_EMBEDDINGS ? "embeddings" : "completions");
    struct fy_node *sp = yw_key_node(n, "shared_prefix");
    if (sp && !k->has_prompts)
        return yw_err(w, sp,
                      "%s: 'shared_prefix' needs 'prompts': only generated prompts can carry "
                      "a shared prefix",
                      what);
    return 0;
}

static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

/* A gen:... spec as written, or a path resolved against the file's directory. */
static int get_vecspec(struct sctx *c, struct fy_node *map, const char *key, char **out)
{
    char *p = NULL;
    int rc = get_nonempty(c, map, key, "vector: ", &p);
    if (rc != 1)
        return rc;
    if (vecgen_is_spec(p)) {
        *out = p;
        return 1;
    }
    /* "text:FILE" (queries embedded by the target): FILE is resolved */
    bool text = !strcmp(key, "queries") && !strncmp(p, "text:", 5);
    char *r = yw_path_resolve(c->dir, p + (text ? 5 : 0));
    size_t n = r ? strlen(r) + 6 : 0;
    *out = r && text ? ts_malloc(n) : r;
    if (*out && text) {
        snprintf(*out, n, "text:%s", r);
        ts_free(r);
    } else if (!*out) {
        ts_free(r);
    }
    ts_free(p);
    return *out ? 1 : yw_oom(&c->w);
}

/* vector: {data, index, queries, truth, k, nprobe, ef_search, seed}. */
static int parse_vector(struct sctx *c, struct fy_node *n, struct scenario_vector *v)
{
    static const char *const keys[] = {"data",   "index",     "queries", "truth", "k",
                                       "nprobe", "ef_search", "seed",    NULL};
    struct yamlwalk *w = &c->w;
    int rc = yw_keys_check(w, n, keys, "vector");
    uint64_t u;
    if (rc || (rc = get_vecspec(c, n, "data", &v->data)) < 0 ||
        (rc = get_vecspec(c, n, "queries", &v->queries)) < 0 ||
        (rc = get_path(c, n, "truth", &v->truth)) < 0 ||
        (rc = yw_str(w, n, "index", 256, &v->index)) < 0)
        return rc;
    if ((rc = yw_u64(w, n, "k", 1, VECSET_MAX_K, &u)) < 0)
        return rc;
    v->k = rc ? (uint32_t)u : 0;
    if ((rc = yw_i64(w, n, "nprobe", 0, 65536, &v->nprobe)) < 0)
        return rc;
    v->has_nprobe = rc == 1;
    if ((rc = yw_i64(w, n, "ef_search", 0, 65536, &v->ef_search)) < 0)
        return rc;
    v->has_ef_search = rc == 1;
    if ((rc = yw_u64(w, n, "seed", 0, UINT64_MAX, &v->seed)) < 0)
        return rc;
    return 0;
}

/* A vector-search class: the vector block, and none of the text-request keys. */
static int class_vector(struct sctx *c, struct fy_node *n, struct scenario_class *k,
                        const char *what)
{
    struct yamlwalk *w = &c->w;
    struct fy_node *v = yw_key_node(n, "vector");
    if (k->endpoint != WORKLOAD_VECTOR_SEARCH)
        return v ? yw_err(w, val_of(c, n, "vector"), "%s: 'vector' is for endpoint vector-search",
                          what)
                 : 0;
    static const char *const no[] = {
        "prompts",  "prompts_file",  "dataset",       "input_tokens", "output_tokens", "system",
        "sessions", "shared_prefix", "perturbations", "flow",         "stream",        "ignore_eos",
        NULL};
    for (size_t i = 0; no[i]; i++)
        if (yw_key_node(n, no[i]))
            return yw_err(w, yw_key_node(n, no[i]),
                          "%s: '%s' is not for endpoint vector-search (its requests are the "
                          "'vector' block's query vectors)",
                          what, no[i]);
    int rc = yw_find(w, n, "vector", &v);
    if (rc == 1 && (rc = parse_vector(c, v, &k->vector)) < 0)
        return rc;
    /* the built-in simulator holds one corpus: every vector class searches it */
    for (struct scenario_class *o = c->s->classes; !c->s->target.url && o < k; o++) {
        if (o->endpoint != WORKLOAD_VECTOR_SEARCH)
            continue;
        if (!same_str(o->vector.data, k->vector.data) ||
            !same_str(o->vector.index, k->vector.index) || o->vector.seed != k->vector.seed)
            return yw_err(w, v ? v : n,
                          "%s: vector data, index and seed must be those of class '%s': the "
                          "built-in simulator holds one corpus (give target.url to search "
                          "several)",
                          what, o->name);
        break;
    }
    return 0;
}

/* A class's defaults, mapping, position, name (unique in the file) and keys;
   what is set to "class 'NAME'" for the later steps' messages. */
static int class_head(struct sctx *c, struct fy_node *n, size_t idx, char *what, size_t whatlen)
{
    struct yamlwalk *w = &c->w;
    struct scenario *s = c->s;
    struct scenario_class *k = &s->classes[idx];
    k->stream = k->ignore_eos = true;
    k->process.kind = ARRIVAL_POISSON;
    k->dataset.time_scale = 1.0;
    if (!n || !fy_node_is_mapping(n))
        return yw_err(w, n, "a class must be a mapping (name, rate or users, ...), got %s",
                      yw_kind(n));
    int line = 0, col = 0;
    if (yw_pos(n, &line, &col)) {
        k->pos.line = (uint32_t)line;
        k->pos.col = (uint32_t)col;
    }
    int rc = get_name(c, n, "name", &k->name);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return yw_err(w, n, "class %zu: 'name' is required", idx + 1);
    c->class_names[idx] = val_of(c, n, "name");
    for (size_t i = 0; i < idx; i++) {
        int l, cc;
        if (!strcmp(s->classes[i].name, k->name) && yw_pos(c->class_names[i], &l, &cc))
            return yw_err(w, c->class_names[idx], "class '%s': duplicate name (first at %d:%d)",
                          k->name, l, cc);
    }
    snprintf(what, whatlen, "class '%s'", k->name);
    return yw_keys_check(w, n, class_keys, what);
}

/* endpoint: chat, completions, embeddings, realtime (chat over WebSocket) or vector-search. */
static int class_endpoint(struct sctx *c, struct fy_node *n, struct scenario_class *k)
{
    static const char *const endpoints[] = {"chat",     "completions",   "embeddings",
                                            "realtime", "vector-search", NULL};
    char *str = NULL, h[96];
    int rc = yw_str(&c->w, n, "endpoint", 64, &str);
    if (rc != 1)
        return rc;
    k->realtime = !strcmp(str, "realtime");
    if (k->realtime)
        k->endpoint = WORKLOAD_CHAT;
    rc = !k->realtime && workload_endpoint_parse(str, &k->endpoint)
             ? yw_err(&c->w, val_of(c, n, "endpoint"),
                      "'endpoint' must be chat, completions, embeddings, realtime or "
                      "vector-search, got '%.80s'%s",
                      str, hint(h, sizeof(h), str, endpoints))
             : 0;
    ts_free(str);
    return rc;
}

/* rate, arrival and stages: the open-loop schedule (stages are parsed once
   here only to check them; the runner parses them again). */
static int class_schedule(struct sctx *c, struct fy_node *n, struct scenario_class *k)
{
    struct yamlwalk *w = &c->w;
    char *str = NULL, msg[256];
    struct fy_node *v;
    int rc;
    if ((rc = yw_find(w, n, "rate", &v)) < 0 || (rc == 1 && (rc = parse_rate(c, v, &k->rate))))
        return rc;
    if ((rc = yw_str(w, n, "arrival", 256, &str)) < 0)
        return rc;
    if (rc == 1) {
        rc = arrival_process_parse(&k->process, str, msg, sizeof(msg))
                 ? yw_err(w, val_of(c, n, "arrival"), "'arrival': %s", msg)
                 : 0;
        ts_free(str);
        if (rc)
            return rc;
    }
    if ((rc = get_joined(c, n, "stages", ARRIVAL_STAGES_MAX, STAGES_MAX_LEN, NULL, &k->stages)) < 0)
        return rc;
    if (rc == 1) {
        struct arrival a;
        rc = arrival_parse_stages(&a, &k->process, k->rate, k->stages, msg, sizeof(msg));
        if (rc == -ENOMEM)
            return yw_oom(w);
        if (rc)
            return yw_err(w, val_of(c, n, "stages"), "'stages': %s", msg);
        arrival_release(&a);
    }
    return 0;
}

/* max_concurrency, users, think, ramp_users, requests: who sends and how much. */
static int class_users(struct sctx *c, struct fy_node *n, struct scenario_class *k)
{
    struct yamlwalk *w = &c->w;
    uint64_t u;
    int rc;
    if ((rc = yw_u64(w, n, "max_concurrency", 1, 1000000, &u)) < 0)
        return rc;
    k->max_concurrency = (uint32_t)(rc ? u : 0);
    if ((rc = yw_u64(w, n, "users", 1, 1000000, &u)) < 0)
        return rc;
    k->users = (uint32_t)(rc ? u : 0);
    if ((rc = yw_dist(w, n, "think", c->dir, &k->think, NULL)) < 0)
        return rc;
    k->has_think = rc == 1;
    if ((rc = yw_duration(w, n, "ramp_users", 0, &k->ramp_users_ns)) < 0 ||
        (rc = yw_u64(w, n, "requests", 1, UINT64_MAX, &k->requests)) < 0)
        return rc;
    return 0;
}

/* stream, ignore_eos and body: what every request of the class carries. */
static int class_request(struct sctx *c, struct fy_node *n, struct scenario_class *k)
{
    struct yamlwalk *w = &c->w;
    struct fy_node *v;
    int rc;
    if ((rc = yw_bool(w, n, "stream", &k->stream)) < 0 ||
        (rc = yw_bool(w, n, "ignore_eos", &k->ignore_eos)) < 0)
        return rc;
    if ((rc = yw_find(w, n, "body", &v)) < 0)
        return rc;
    if (rc == 1) {
        if (!v || !fy_node_is_mapping(v))
            return yw_err(w, v, "'body' must be a mapping (request fields to override), got %s",
                          yw_kind(v));
        if ((rc = yw_json(w, v, &k->body)) < 0)
            return rc;
    }
    return 0;
}

/* The prompt sources (input/output_tokens, system, prompts, prompts_file,
   dataset), sessions and shared_prefix; *prefix_spec (the caller's to free)
   is shared_prefix's token distribution, parsed once the prompts' seed is known. */
static int class_prompts(struct sctx *c, struct fy_node *n, struct scenario_class *k,
                         char **prefix_spec)
{
    struct yamlwalk *w = &c->w;
    struct fy_node *v;
    int rc;
    if ((rc = yw_dist(w, n, "input_tokens", c->dir, NULL, &k->input_tokens)) < 0 ||
        (rc = yw_dist(w, n, "output_tokens", c->dir, NULL, &k->output_tokens)) < 0 ||
        (rc = yw_str(w, n, "system", PROMPTGEN_MAX_TEMPLATE, &k->system)) < 0)
        return rc;
    if ((rc = yw_find(w, n, "prompts", &v)) < 0 ||
        (rc == 1 && (rc = parse_prompts(c, v, &k->prompts)) < 0))
        return rc;
    k->has_prompts = yw_key_node(n, "prompts") != NULL;
    if ((rc = get_path(c, n, "prompts_file", &k->prompts_file)) < 0)
        return rc;
    if ((rc = yw_find(w, n, "dataset", &v)) < 0 ||
        (rc == 1 && (rc = parse_dataset(c, v, &k->dataset)) < 0))
        return rc;
    if ((rc = yw_find(w, n, "sessions", &v)) < 0 ||
        (rc == 1 && (rc = parse_sessions(c, v, &k->sessions)) < 0))
        return rc;
    if ((rc = yw_find(w, n, "shared_prefix", &v)) < 0 ||
        (rc == 1 && (rc = parse_prefix(c, v, &k->prefix, prefix_spec)) < 0))
        return rc;
    return 0;
}

/* perturbations, slos and goodput: what is done to and asked of the answers. */
static int class_checks(struct sctx *c, struct fy_node *n, struct scenario_class *k)
{
    int rc;
    if ((rc = get_joined(c, n, "perturbations", PERTURB_SET_MAX, PERTURB_SPEC_MAX - 1,
                         check_perturb, &k->perturbations)) < 0)
        return rc;
    if (rc == 1) {
        char msg[384];
        if (check_perturb(k->perturbations, msg, sizeof(msg)))
            return yw_err(&c->w, val_of(c, n, "perturbations"), "'perturbations': %s", msg);
    }
    if ((rc = parse_slos(c, n, k)) < 0 ||
        (rc = get_joined(c, n, "goodput", 1, GOODPUT_MAX, check_goodput, &k->goodput)) < 0)
        return rc;
    return 0;
}

/* Every class draws its own prompts: the scenario seed mixed with the index;
   a shared prefix pool gives them prefixes of prefix_spec tokens. */
static int class_prompt_seed(struct sctx *c, struct scenario_class *k, size_t idx,
                             const char *prefix_spec)
{
    char msg[256];
    int rc;
    k->prompts.seed = rng_mix64(c->s->seed ^ rng_mix64((uint64_t)idx + 1));
    if (!k->prefix.pool)
        return 0;
    k->prompts.prefix_pool = k->prefix.pool;
    k->prompts.prefix_ratio = k->prefix.ratio;
    rc = dist_parse(&k->prompts.prefix_tokens, prefix_spec, msg, sizeof(msg));
    if (rc)
        rc = rc == -ENOMEM ? yw_oom(&c->w) : yw_err(&c->w, NULL, "shared_prefix: %s", msg);
    return rc;
}

/* Class idx of the file: its keys group by group, in the order of the file
   format, then the rules that tie the groups together. */
static int parse_class(struct sctx *c, struct fy_node *n, size_t idx)
{
    struct yamlwalk *w = &c->w;
    struct scenario_class *k = &c->s->classes[idx];
    char *prefix_spec = NULL;
    char what[128];
    struct fy_node *v;
    int rc;
    if ((rc = class_head(c, n, idx, what, sizeof(what))) != 0)
        return rc;
    if ((rc = class_endpoint(c, n, k)) != 0 || (rc = class_schedule(c, n, k)) != 0 ||
        (rc = class_users(c, n, k)) < 0 || (rc = class_request(c, n, k)) < 0 ||
        (rc = class_prompts(c, n, k, &prefix_spec)) < 0 || (rc = class_checks(c, n, k)) < 0)
        goto out_free_prefix;
    if ((rc = yw_find(w, n, "flow", &v)) < 0 || (rc == 1 && (rc = parse_flow(c, v, &k->flow)) < 0))
        goto out_free_prefix;
    k->has_flow = yw_key_node(n, "flow") != NULL;
    if (k->has_flow && k->realtime) {
        rc = yw_err(w, val_of(c, n, "endpoint"),
                    "'endpoint: realtime' is for plain and session classes: a flow's steps "
                    "say their own endpoints");
        goto out_free_prefix;
    }
    rc = class_vector(c, n, k, what);
    if (!rc)
        rc = class_rules(c, n, k, what);
    if (!rc && k->has_prompts)
        rc = class_prompt_seed(c, k, idx, prefix_spec);
out_free_prefix:
    ts_free(prefix_spec);
    return rc;
}

static int parse_classes(struct sctx *c, struct fy_node *root)
{
    struct yamlwalk *w = &c->w;
    struct scenario *s = c->s;
    struct fy_node *list;
    int rc = yw_find(w, root, "classes", &list);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return yw_err(w, root, "'classes' is required");
    if (!list || !fy_node_is_sequence(list))
        return yw_err(w, list, "'classes' must be a list of classes, got %s", yw_kind(list));
    size_t cnt = (size_t)fy_node_sequence_item_count(list);
    if (cnt == 0)
        return yw_err(w, list, "'classes' is empty: give at least one class");
    if (cnt > SCENARIO_MAX_CLASSES)
        return yw_err(w, nth_item(list, SCENARIO_MAX_CLASSES), "more than %d classes",
                      SCENARIO_MAX_CLASSES);
    if (!(s->classes = ts_calloc(cnt, sizeof(*s->classes))))
        return yw_oom(w);
    void *it = NULL;
    struct fy_node *item;
    while (s->nclasses < cnt && (rc = yw_seq_next(w, list, &it, &item)) == 1) {
        s->nclasses++;
        if ((rc = parse_class(c, item, s->nclasses - 1)) < 0)
            return rc;
    }
    return rc;
}

static int parse_top(struct sctx *c, struct fy_node *root)
{
    static const char *const keys[] = {"name",      "seed",    "duration", "requests",
                                       "warmup",    "drain",   "workers",  "target",
                                       "simulator", "classes", NULL};
    struct yamlwalk *w = &c->w;
    struct scenario *s = c->s;
    int rc = yw_keys_check(w, root, keys, "the scenario");
    if (rc)
        return rc;
    if ((rc = yw_str(w, root, "name", 256, &s->name)) < 0)
        return rc;
    if (rc == 1 && (!s->name[0] || strpbrk(s->name, "\r\n\t")))
        return yw_err(w, NULL, "'name' must be a non-empty line of text");
    if ((rc = yw_u64(w, root, "seed", 0, UINT64_MAX, &s->seed)) < 0 ||
        (rc = yw_duration(w, root, "duration", 1, &s->duration_ns)) < 0 ||
        (rc = yw_u64(w, root, "requests", 1, UINT64_MAX, &s->requests)) < 0 ||
        (rc = yw_duration(w, root, "warmup", 0, &s->warmup_ns)) < 0)
        return rc;
    s->drain_ns = DEFAULT_DRAIN;
    if ((rc = yw_duration(w, root, "drain", 0, &s->drain_ns)) < 0)
        return rc;
    s->has_drain = rc == 1;
    uint64_t u;
    if ((rc = yw_u64(w, root, "workers", 1, 1024, &u)) < 0)
        return rc;
    s->workers = (uint32_t)(rc ? u : 0);
    struct fy_node *v;
    if ((rc = yw_find(w, root, "target", &v)) < 0 || (rc == 1 && (rc = parse_target(c, v)) < 0))
        return rc;
    if ((rc = yw_find(w, root, "simulator", &v)) < 0)
        return rc;
    if (rc == 1) {
        if (s->target.url)
            return yw_err(w, yw_key_node(root, "simulator"),
                          "'simulator' is for runs without target.url (the built-in simulator)");
        if ((rc = parse_simulator(c, v)) < 0)
            return rc;
    }
    return parse_classes(c, root);
}

/* ---------------------------------------------------------------- API */

/* The file name without its directory and a .yaml/.yml extension. */
static char *default_name(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    if (ends_with(b, ".yaml"))
        n -= 5;
    else if (ends_with(b, ".yml"))
        n -= 4;
    return ts_strndup(b, n ? n : strlen(b));
}

int scenario_load_mem(struct scenario *out, const char *name, const char *dir, const char *data,
                      size_t len, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    struct sctx c = {.dir = dir ? dir : ".", .s = out};
    const char *label = name ? name : "<scenario>";
    struct fy_node *root = NULL;
    int rc = yw_open(&c.w, label, data, len, SCENARIO_MAX_FILE, err, errlen, &root);
    if (rc)
        goto out;
    if (!(out->path = ts_strdup(label)) || !(out->dir = ts_strdup(c.dir))) {
        rc = yw_oom(&c.w);
        goto out;
    }
    if (!root) {
        ts_errf(err, errlen, "%s:1:1: the file is empty; expected a mapping with 'classes'", label);
        rc = -EINVAL;
        goto out;
    }
    if ((rc = parse_top(&c, root)) == 0 && !out->name && !(out->name = default_name(label)))
        rc = yw_oom(&c.w);
out:
    yw_close(&c.w);
    if (rc)
        scenario_release(out);
    return rc;
}

int scenario_load(struct scenario *out, const char *path, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    char *data = NULL;
    size_t len = 0;
    int rc = file_read_all(path, SCENARIO_MAX_FILE, &data, &len, err, errlen);
    if (rc)
        return rc;
    const char *slash = strrchr(path, '/');
    char *dir =
        slash ? ts_strndup(path, slash == path ? 1 : (size_t)(slash - path)) : ts_strdup(".");
    if (!dir) {
        ts_free(data);
        ts_errf(err, errlen, "%s: out of memory", path);
        return -ENOMEM;
    }
    rc = scenario_load_mem(out, path, dir, data, len, err, errlen);
    ts_free(dir);
    ts_free(data);
    return rc;
}

static void class_release(struct scenario_class *k)
{
    ts_free(k->vector.data);
    ts_free(k->vector.index);
    ts_free(k->vector.queries);
    ts_free(k->vector.truth);
    ts_free(k->name);
    ts_free(k->stages);
    dist_release(&k->think);
    json_decref(k->body);
    ts_free(k->input_tokens);
    ts_free(k->output_tokens);
    ts_free(k->system);
    promptgen_cfg_release(&k->prompts);
    ts_free(k->prompts_file);
    ts_free(k->dataset.path);
    ts_free(k->dataset.column);
    ts_free(k->dataset.output_column);
    dist_release(&k->sessions.turns);
    dist_release(&k->sessions.think);
    ts_free(k->sessions.header);
    dist_release(&k->prefix.tokens);
    ts_free(k->perturbations);
    for (size_t i = 0; i < k->nslos; i++)
        ts_free(k->slos[i]);
    ts_free(k->goodput);
    flow_def_release(&k->flow);
}

void scenario_release(struct scenario *s)
{
    if (!s)
        return;
    ts_free(s->path);
    ts_free(s->dir);
    ts_free(s->name);
    ts_free(s->target.url);
    ts_free(s->target.model);
    ts_free(s->target.api_key_env);
    for (size_t i = 0; i < s->target.nheaders; i++)
        ts_free(s->target.headers[i]);
    ts_free(s->target.tokenizer);
    ts_free(s->target.tmpl_message);
    ts_free(s->target.tmpl_reply);
    ts_free(s->target.tmpl_bos);
    ts_free(s->sim.profile);
    for (size_t i = 0; i < s->sim.nsets; i++)
        ts_free(s->sim.sets[i]);
    for (size_t i = 0; i < s->nclasses; i++)
        class_release(&s->classes[i]);
    ts_free(s->classes);
    memset(s, 0, sizeof(*s));
}

const struct scenario_class *scenario_class_find(const struct scenario *s, const char *name)
{
    for (size_t i = 0; s && name && i < s->nclasses; i++)
        if (s->classes[i].name && !strcmp(s->classes[i].name, name))
            return &s->classes[i];
    return NULL;
}
