/*
 * yamlwalk.c - strict walks over YAML configuration files (yamlwalk.h).
 */
#include "scenario/yamlwalk.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/strdist.h"
#include "base/units.h"
#include "base/utf8.h"

#define MSG_MAX    512
#define SHOW_MAX   60   /* bytes of a value quoted in a message */
#define DIST_MAX   4096 /* bytes of a distribution spec */
#define NUMBER_MAX 96   /* bytes of a number's text */

/* ---------------------------------------------------------------- messages */

int yw_err(struct yamlwalk *w, struct fy_node *at, const char *fmt, ...)
{
    char msg[MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    for (char *p = msg; *p; p++) /* values quoted in the message stay on one line */
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    int line, col;
    if (yw_pos(at, &line, &col) || yw_pos(w->at, &line, &col))
        ts_errf(w->err, w->errlen, "%s:%d:%d: %s", w->name, line, col, msg);
    else
        ts_errf(w->err, w->errlen, "%s: %s", w->name, msg);
    return -EINVAL;
}

int yw_oom(struct yamlwalk *w)
{
    ts_errf(w->err, w->errlen, "%s: out of memory", w->name);
    return -ENOMEM;
}

bool yw_pos(struct fy_node *n, int *line, int *col)
{
    for (int depth = 0; n && depth <= YW_MAX_DEPTH + 1; depth++) {
        void *it = NULL;
        if (fy_node_is_scalar(n)) {
            struct fy_token *t = fy_node_get_scalar_token(n);
            const struct fy_mark *m = t ? fy_token_start_mark(t) : NULL;
            if (!m)
                return false;
            *line = m->line + 1;
            *col = m->column + 1;
            return true;
        } else if (fy_node_is_mapping(n)) {
            struct fy_node_pair *p = fy_node_mapping_iterate(n, &it);
            if (!p)
                return false;
            n = fy_node_pair_key(p) ? fy_node_pair_key(p) : fy_node_pair_value(p);
        } else if (fy_node_is_sequence(n)) {
            n = fy_node_sequence_iterate(n, &it);
        } else {
            return false;
        }
    }
    return false;
}

/* The text of a scalar that is not an alias, or NULL. */
static const char *scalar(struct fy_node *n, size_t *len)
{
    if (!n || !fy_node_is_scalar(n) || fy_node_is_alias(n))
        return NULL;
    const char *s = fy_node_get_scalar(n, len);
    if (!s) {
        *len = 0;
        s = "";
    }
    return s;
}

bool yw_is_null(struct fy_node *n)
{
    size_t len;
    const char *s = scalar(n, &len);
    if (!n)
        return true;
    if (!s || fy_node_get_style(n) != FYNS_PLAIN)
        return false;
    static const char *const nulls[] = {"~", "null", "Null", "NULL"};
    if (len == 0)
        return true;
    for (size_t i = 0; i < sizeof(nulls) / sizeof(nulls[0]); i++)
        if (len == strlen(nulls[i]) && !memcmp(s, nulls[i], len))
            return true;
    return false;
}

const char *yw_kind(struct fy_node *n)
{
    if (yw_is_null(n))
        return "nothing";
    if (fy_node_is_alias(n))
        return "an alias";
    if (fy_node_is_mapping(n))
        return "a mapping";
    if (fy_node_is_sequence(n))
        return "a list";
    return "a string";
}

/* s[0..len) for a message: at most SHOW_MAX bytes (cut at a character
 * boundary, "..." added), control bytes as '?'. */
static const char *show(char *buf, size_t cap, const char *s, size_t len)
{
    size_t n = len, o = 0;
    bool cut = false;
    if (n > SHOW_MAX) {
        n = SHOW_MAX;
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--;
        cut = true;
    }
    for (size_t i = 0; i < n && o + 4 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[o++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    if (cut && o + 4 < cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

/* "'text'" for a scalar with a value, else what yw_kind says. */
static const char *got(char *buf, size_t cap, struct fy_node *n)
{
    size_t len;
    const char *s = scalar(n, &len);
    if (!s || yw_is_null(n))
        return yw_kind(n);
    char tmp[SHOW_MAX * 2 + 8];
    snprintf(buf, cap, "'%s'", show(tmp, sizeof(tmp), s, len));
    return buf;
}

const char *yw_closest(const char *name, size_t len, const char *const *candidates)
{
    size_t max_d = len <= 4 ? 1 : len <= 8 ? 2 : 3;
    return str_closest(name, len, candidates, 0, max_d);
}

static int budget_err(struct yamlwalk *w, struct fy_node *at)
{
    return yw_err(w, at, "the document expands to more than %u nodes or %u bytes (aliases?)",
                  YW_MAX_VISITS, YW_MAX_BYTES);
}

static int visit(struct yamlwalk *w, struct fy_node *at)
{
    if (!w->visits_left)
        return budget_err(w, at);
    w->visits_left--;
    return 0;
}

static int spend_bytes(struct yamlwalk *w, struct fy_node *at, size_t n)
{
    if (n > w->bytes_left)
        return budget_err(w, at);
    w->bytes_left -= n;
    return 0;
}

/* ---------------------------------------------------------------- loading */

static void diag_discard(struct fy_diag *diag, void *user, const char *buf, size_t len)
{
    (void)diag;
    (void)user;
    (void)buf;
    (void)len;
}

static int diag_error(struct yamlwalk *w)
{
    void *it = NULL;
    struct fy_diag_error *de = fy_diag_errors_iterate(w->diag, &it);
    if (de && de->line > 0)
        ts_errf(w->err, w->errlen, "%s:%d:%d: %s", w->name, de->line, de->column,
                de->msg ? de->msg : "YAML syntax error");
    else
        ts_errf(w->err, w->errlen, "%s: %s", w->name,
                de && de->msg ? de->msg : "YAML syntax error");
    return TS_PARSE;
}

static struct fy_parser *parser_new(struct yamlwalk *w, const char *text, size_t len)
{
    struct fy_parse_cfg cfg = {
        .search_path = "",
        .flags = FYPCF_QUIET | FYPCF_DISABLE_RECYCLING,
        .diag = w->diag,
    };
    struct fy_parser *p = fy_parser_create(&cfg);
    if (p && fy_parser_set_string(p, text, len) != 0) {
        fy_parser_destroy(p);
        p = NULL;
    }
    return p;
}

/*
 * Streams the events once, without building anything: counts the nodes and
 * the documents, so a huge or multi-document file is refused before libfyaml
 * allocates a tree for it.
 */
static int prescan(struct yamlwalk *w, const char *text, size_t len)
{
    struct fy_parser *p = parser_new(w, text, len);
    if (!p)
        return yw_oom(w);
    size_t nodes = 0, docs = 0;
    bool second = false;
    int rc = 0;
    struct fy_event *e;
    while (!rc && (e = fy_parser_parse(p)) != NULL) {
        const struct fy_mark *m = fy_event_start_mark(e);
        switch (e->type) {
        case FYET_DOCUMENT_START:
            second = ++docs > 1;
            break;
        case FYET_SCALAR:
        case FYET_ALIAS:
        case FYET_MAPPING_START:
        case FYET_SEQUENCE_START:
            if (++nodes > YW_MAX_NODES && m) {
                ts_errf(w->err, w->errlen, "%s:%d:%d: more than %u YAML nodes", w->name,
                        m->line + 1, m->column + 1, YW_MAX_NODES);
                rc = TS_PARSE;
            }
            break;
        default:
            break;
        }
        /* an implicit second document ("...") has no mark: use the next one */
        if (second && !rc && m) {
            ts_errf(w->err, w->errlen,
                    "%s:%d:%d: a second YAML document (after --- or ...); expected one", w->name,
                    m->line + 1, m->column + 1);
            rc = TS_PARSE;
        }
        fy_parser_event_free(p, e);
    }
    if (!rc && fy_parser_get_stream_error(p))
        rc = diag_error(w);
    fy_parser_destroy(p);
    return rc;
}

int yw_open(struct yamlwalk *w, const char *name, const char *text, size_t len, size_t max,
            char *err, size_t errlen, struct fy_node **root)
{
    memset(w, 0, sizeof(*w));
    w->name = name ? name : "<yaml>";
    w->err = err;
    w->errlen = errlen;
    w->visits_left = YW_MAX_VISITS;
    w->bytes_left = YW_MAX_BYTES;
    *root = NULL;
    if (err && errlen)
        err[0] = '\0';
    if (len > max) {
        ts_errf(err, errlen, "%s: larger than %zu bytes", w->name, max);
        return TS_TOOBIG;
    }
    size_t bad = utf8_invalid_at(text, len);
    if (bad < len) {
        int line, col;
        text_position(text, bad, &line, &col);
        ts_errf(err, errlen, "%s:%d:%d: %s", w->name, line, col,
                text[bad] ? "not UTF-8 text" : "a NUL byte (not text)");
        return TS_PARSE;
    }

    struct fy_diag_cfg dcfg;
    fy_diag_cfg_default(&dcfg);
    dcfg.fp = NULL;
    dcfg.output_fn = diag_discard;
    dcfg.colorize = false;
    if (!(w->diag = fy_diag_create(&dcfg)))
        return yw_oom(w);
    fy_diag_set_collect_errors(w->diag, true);

    int rc = prescan(w, text, len);
    if (rc)
        return rc;
    if (!(w->fyp = parser_new(w, text, len)))
        return yw_oom(w);
    w->fyd = fy_parse_load_document(w->fyp);
    if (fy_parser_get_stream_error(w->fyp) || (!w->fyd && fy_diag_got_error(w->diag)))
        return diag_error(w);
    *root = w->fyd ? fy_document_root(w->fyd) : NULL;
    return 0;
}

void yw_close(struct yamlwalk *w)
{
    if (w->fyd)
        fy_parse_document_destroy(w->fyp, w->fyd);
    if (w->fyp)
        fy_parser_destroy(w->fyp);
    if (w->diag)
        fy_diag_destroy(w->diag);
    w->fyd = NULL;
    w->fyp = NULL;
    w->diag = NULL;
}

/* ---------------------------------------------------------------- walking */

int yw_deref(struct yamlwalk *w, struct fy_node *n, struct fy_node **out)
{
    for (int hops = 0; n && fy_node_is_alias(n); hops++) {
        if (hops >= YW_MAX_DEPTH)
            return yw_err(w, n, "alias chain longer than %d", YW_MAX_DEPTH);
        int rc = visit(w, n);
        if (rc)
            return rc;
        struct fy_node *t = fy_node_resolve_alias(n);
        if (!t) {
            size_t len = 0;
            const char *s = fy_node_get_scalar(n, &len);
            char tmp[SHOW_MAX * 2 + 8];
            return yw_err(w, n, "unknown alias '*%s'", show(tmp, sizeof(tmp), s ? s : "", len));
        }
        n = t;
    }
    *out = n;
    return 0;
}

struct fy_node *yw_key_node(struct fy_node *map, const char *key)
{
    if (!map || !fy_node_is_mapping(map))
        return NULL;
    size_t klen = strlen(key);
    void *it = NULL;
    struct fy_node_pair *p;
    while ((p = fy_node_mapping_iterate(map, &it)) != NULL) {
        size_t len;
        const char *s = scalar(fy_node_pair_key(p), &len);
        if (s && len == klen && !memcmp(s, key, len))
            return fy_node_pair_key(p);
    }
    return NULL;
}

int yw_find(struct yamlwalk *w, struct fy_node *map, const char *key, struct fy_node **val)
{
    if (!map || !fy_node_is_mapping(map))
        return 0;
    size_t klen = strlen(key);
    void *it = NULL;
    struct fy_node_pair *p;
    while ((p = fy_node_mapping_iterate(map, &it)) != NULL) {
        size_t len;
        const char *s = scalar(fy_node_pair_key(p), &len);
        if (s && len == klen && !memcmp(s, key, len)) {
            w->at = fy_node_pair_key(p);
            int rc = yw_deref(w, fy_node_pair_value(p), val);
            return rc ? rc : 1;
        }
    }
    return 0;
}

int yw_keys_check(struct yamlwalk *w, struct fy_node *map, const char *const *keys,
                  const char *what)
{
    char g[SHOW_MAX * 2 + 8];
    if (!map || !fy_node_is_mapping(map))
        return yw_err(w, map, "%s must be a mapping (key: value), got %s", what,
                      got(g, sizeof(g), map));
    void *it = NULL;
    struct fy_node_pair *p;
    while ((p = fy_node_mapping_iterate(map, &it)) != NULL) {
        struct fy_node *k = fy_node_pair_key(p);
        size_t len;
        const char *s = scalar(k, &len);
        if (!s || yw_is_null(k))
            return yw_err(w, k ? k : map, "%s: keys must be strings, got %s", what, yw_kind(k));
        bool known = false;
        for (size_t i = 0; keys[i] && !known; i++)
            known = len == strlen(keys[i]) && !memcmp(s, keys[i], len);
        if (known)
            continue;
        if (len == 2 && !memcmp(s, "<<", 2) && fy_node_get_style(k) == FYNS_PLAIN)
            return yw_err(w, k, "merge keys (<<) are not supported (in %s)", what);
        const char *near = yw_closest(s, len, keys);
        char tmp[SHOW_MAX * 2 + 8];
        return yw_err(w, k, "unknown key '%s' in %s%s%s%s", show(tmp, sizeof(tmp), s, len), what,
                      near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
    }
    return 0;
}

int yw_seq_next(struct yamlwalk *w, struct fy_node *seq, void **it, struct fy_node **item)
{
    struct fy_node *n = fy_node_sequence_iterate(seq, it);
    if (!n)
        return 0;
    int rc = visit(w, n);
    if (!rc)
        rc = yw_deref(w, n, item);
    return rc ? rc : 1;
}

int yw_map_next(struct yamlwalk *w, struct fy_node *map, void **it, struct yw_entry *e)
{
    struct fy_node_pair *p = fy_node_mapping_iterate(map, it);
    if (!p)
        return 0;
    struct fy_node *k = fy_node_pair_key(p);
    int rc = visit(w, k ? k : map);
    if (rc)
        return rc;
    e->key = k;
    e->name = scalar(k, &e->len);
    if (!e->name || yw_is_null(k))
        return yw_err(w, k ? k : map, "mapping keys must be strings, got %s", yw_kind(k));
    if (utf8_invalid_at(e->name, e->len) < e->len)
        return yw_err(w, k, "a key holds a NUL byte or invalid UTF-8");
    w->at = k;
    rc = yw_deref(w, fy_node_pair_value(p), &e->value);
    return rc ? rc : 1;
}

/* ---------------------------------------------------------------- typed values */

int yw_node_str(struct yamlwalk *w, struct fy_node *n, const char *what, size_t maxlen, char **out)
{
    char g[SHOW_MAX * 2 + 8];
    size_t len;
    const char *s = scalar(n, &len);
    if (!s || yw_is_null(n))
        return yw_err(w, n, "%s must be a string, got %s", what, got(g, sizeof(g), n));
    if (len > maxlen)
        return yw_err(w, n, "%s is longer than %zu bytes", what, maxlen);
    if (utf8_invalid_at(s, len) < len)
        return yw_err(w, n, "%s holds a NUL byte or invalid UTF-8", what);
    int rc = spend_bytes(w, n, len);
    if (rc)
        return rc;
    if (!(*out = ts_strndup(s, len)))
        return yw_oom(w);
    return 0;
}

/* A scalar's text copied into buf (cap bytes): false when n is not a scalar
 * with a value or its text does not fit. */
static bool scalar_copy(struct fy_node *n, char *buf, size_t cap)
{
    size_t len;
    const char *s = scalar(n, &len);
    if (!s || yw_is_null(n) || len >= cap || memchr(s, '\0', len))
        return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return true;
}

int yw_node_bool(struct yamlwalk *w, struct fy_node *n, const char *what, bool *out)
{
    char t[8], g[SHOW_MAX * 2 + 8];
    if (scalar_copy(n, t, sizeof(t))) {
        if (!strcmp(t, "true") || !strcmp(t, "True") || !strcmp(t, "TRUE")) {
            *out = true;
            return 0;
        }
        if (!strcmp(t, "false") || !strcmp(t, "False") || !strcmp(t, "FALSE")) {
            *out = false;
            return 0;
        }
    }
    return yw_err(w, n, "%s must be true or false, got %s", what, got(g, sizeof(g), n));
}

/* Digits with an optional sign into magnitude and sign; false on junk or overflow. */
static bool scan_int(const char *s, bool *neg, uint64_t *mag)
{
    *neg = *s == '-';
    if (*s == '-' || *s == '+')
        s++;
    if (!*s)
        return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *mag = v;
    return true;
}

int yw_node_u64(struct yamlwalk *w, struct fy_node *n, const char *what, uint64_t min, uint64_t max,
                uint64_t *out)
{
    char t[NUMBER_MAX], g[SHOW_MAX * 2 + 8];
    bool neg;
    uint64_t v;
    if (scalar_copy(n, t, sizeof(t)) && scan_int(t, &neg, &v) && (!neg || v == 0) && v >= min &&
        v <= max) {
        *out = v;
        return 0;
    }
    if (max == UINT64_MAX)
        return yw_err(w, n, "%s must be an integer >= %llu, got %s", what, (unsigned long long)min,
                      got(g, sizeof(g), n));
    return yw_err(w, n, "%s must be an integer in [%llu, %llu], got %s", what,
                  (unsigned long long)min, (unsigned long long)max, got(g, sizeof(g), n));
}

int yw_node_i64(struct yamlwalk *w, struct fy_node *n, const char *what, int64_t min, int64_t max,
                int64_t *out)
{
    char t[NUMBER_MAX], g[SHOW_MAX * 2 + 8];
    bool neg;
    uint64_t m;
    if (scalar_copy(n, t, sizeof(t)) && scan_int(t, &neg, &m) &&
        m <= (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX)) {
        int64_t v = neg ? (m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m) : (int64_t)m;
        if (v >= min && v <= max) {
            *out = v;
            return 0;
        }
    }
    if (max == INT64_MAX)
        return yw_err(w, n, "%s must be an integer >= %lld, got %s", what, (long long)min,
                      got(g, sizeof(g), n));
    return yw_err(w, n, "%s must be an integer in [%lld, %lld], got %s", what, (long long)min,
                  (long long)max, got(g, sizeof(g), n));
}

static void range_text(char *b, size_t cap, double min, double max, unsigned flags)
{
    bool lo = !isinf(min), hi = !isinf(max);
    if (lo && hi)
        snprintf(b, cap, "a number in %c%g, %g%c", flags & YW_MIN_OPEN ? '(' : '[', min, max,
                 flags & YW_MAX_OPEN ? ')' : ']');
    else if (lo)
        snprintf(b, cap, "a number %s %g", flags & YW_MIN_OPEN ? ">" : ">=", min);
    else if (hi)
        snprintf(b, cap, "a number %s %g", flags & YW_MAX_OPEN ? "<" : "<=", max);
    else
        snprintf(b, cap, "a number");
}

int yw_node_double(struct yamlwalk *w, struct fy_node *n, const char *what, double min, double max,
                   unsigned flags, double *out)
{
    char t[NUMBER_MAX], g[SHOW_MAX * 2 + 8], r[96];
    const char *end;
    double v;
    if (scalar_copy(n, t, sizeof(t)) && units_scan_number(t, &end, &v) == 0 && !*end &&
        (flags & YW_MIN_OPEN ? v > min : v >= min) && (flags & YW_MAX_OPEN ? v < max : v <= max)) {
        *out = v;
        return 0;
    }
    range_text(r, sizeof(r), min, max, flags);
    return yw_err(w, n, "%s must be %s, got %s", what, r, got(g, sizeof(g), n));
}

int yw_node_duration(struct yamlwalk *w, struct fy_node *n, const char *what, uint64_t min_ns,
                     uint64_t *ns)
{
    char t[128], g[SHOW_MAX * 2 + 8], m[48] = "";
    uint64_t v;
    if (scalar_copy(n, t, sizeof(t)) && units_parse_duration_ns(t, &v) == 0 && v >= min_ns) {
        *ns = v;
        return 0;
    }
    if (min_ns == 1)
        snprintf(m, sizeof(m), " > 0");
    else if (min_ns > 1) {
        char d[32];
        snprintf(m, sizeof(m), " >= %s", units_format_duration(min_ns, d, sizeof(d)));
    }
    return yw_err(w, n, "%s must be a duration%s (like 500ms, 30s, 2m), got %s", what, m,
                  got(g, sizeof(g), n));
}

/* spec with a relative empirical:FILE resolved against dir (a new string). */
static char *dist_resolve(const char *spec, const char *dir)
{
    const char *p = spec;
    while (*p == ' ' || *p == '\t')
        p++;
    const char *colon = strchr(p, ':');
    size_t nl = colon ? (size_t)(colon - p) : 0;
    while (nl > 0 && (p[nl - 1] == ' ' || p[nl - 1] == '\t'))
        nl--;
    if (!colon || nl != 9 || strncasecmp(p, "empirical", 9))
        return ts_strdup(spec);
    const char *path = colon + 1;
    while (*path == ' ' || *path == '\t')
        path++;
    if (!*path)
        return ts_strdup(spec);
    char *full = yw_path_resolve(dir, path);
    if (!full)
        return NULL;
    size_t n = strlen(full) + sizeof("empirical:");
    char *out = ts_malloc(n);
    if (out)
        snprintf(out, n, "empirical:%s", full);
    ts_free(full);
    return out;
}

int yw_node_dist(struct yamlwalk *w, struct fy_node *n, const char *what, const char *dir,
                 struct dist *d, char **spec)
{
    char g[SHOW_MAX * 2 + 8];
    size_t len;
    const char *s = scalar(n, &len);
    if (!s || yw_is_null(n))
        return yw_err(w, n,
                      "%s must be a distribution (like 128, uniform:100-200, lognormal:512,0.6), "
                      "got %s",
                      what, got(g, sizeof(g), n));
    char *text = NULL;
    int rc = yw_node_str(w, n, what, DIST_MAX, &text);
    if (rc)
        return rc;
    char *full = dist_resolve(text, dir);
    ts_free(text);
    if (!full)
        return yw_oom(w);
    struct dist tmp;
    char msg[256];
    rc = dist_parse(&tmp, full, msg, sizeof(msg));
    if (rc == -ENOMEM) {
        ts_free(full);
        return yw_oom(w);
    }
    if (rc) {
        ts_free(full);
        return yw_err(w, n, "%s: %s", what, msg);
    }
    if (d)
        *d = tmp;
    else
        dist_release(&tmp);
    if (spec)
        *spec = full;
    else
        ts_free(full);
    return 0;
}

void yw_strv_free(char **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        ts_free(v[i]);
    ts_free(v);
}

void yw_pairs_free(struct yw_pair *p, size_t n)
{
    if (!p)
        return;
    for (size_t i = 0; i < n; i++) {
        ts_free(p[i].key);
        ts_free(p[i].value);
    }
    ts_free(p);
}

int yw_node_strlist(struct yamlwalk *w, struct fy_node *n, const char *what, size_t maxn,
                    size_t maxlen, unsigned flags, char ***out, size_t *nout)
{
    char g[SHOW_MAX * 2 + 8];
    *out = NULL;
    *nout = 0;
    if ((flags & YW_SCALAR_OK) && n && fy_node_is_scalar(n) && !yw_is_null(n) && maxn >= 1) {
        char **v = ts_calloc(1, sizeof(*v));
        if (!v)
            return yw_oom(w);
        int rc = yw_node_str(w, n, what, maxlen, &v[0]);
        if (rc) {
            ts_free(v);
            return rc;
        }
        *out = v;
        *nout = 1;
        return 0;
    }
    if (!n || !fy_node_is_sequence(n))
        return yw_err(w, n, "%s must be %s, got %s", what,
                      flags & YW_SCALAR_OK ? "a string or a list of strings" : "a list of strings",
                      got(g, sizeof(g), n));
    size_t cnt = (size_t)fy_node_sequence_item_count(n);
    if (cnt > maxn)
        return yw_err(w, n, "%s has more than %zu items", what, maxn);
    if (cnt == 0)
        return 0;
    char **v = ts_calloc(cnt, sizeof(*v));
    if (!v)
        return yw_oom(w);
    size_t k = 0;
    void *it = NULL;
    struct fy_node *item;
    int rc = 0;
    while (k < cnt && (rc = yw_seq_next(w, n, &it, &item)) == 1) {
        char label[128];
        snprintf(label, sizeof(label), "%s item %zu", what, k + 1);
        if ((rc = yw_node_str(w, item, label, maxlen, &v[k])) != 0)
            break;
        k++;
    }
    if (rc < 0) {
        yw_strv_free(v, k);
        return rc;
    }
    *out = v;
    *nout = k;
    return 0;
}

int yw_node_strmap(struct yamlwalk *w, struct fy_node *n, const char *what, size_t maxn,
                   size_t maxlen, struct yw_pair **out, size_t *nout)
{
    char g[SHOW_MAX * 2 + 8];
    *out = NULL;
    *nout = 0;
    if (!n || !fy_node_is_mapping(n))
        return yw_err(w, n, "%s must be a mapping (NAME: VALUE), got %s", what,
                      got(g, sizeof(g), n));
    size_t cnt = (size_t)fy_node_mapping_item_count(n);
    if (cnt > maxn)
        return yw_err(w, n, "%s has more than %zu entries", what, maxn);
    if (cnt == 0)
        return 0;
    struct yw_pair *v = ts_calloc(cnt, sizeof(*v));
    if (!v)
        return yw_oom(w);
    size_t k = 0;
    void *it = NULL;
    struct yw_entry e;
    int rc = 0;
    while (k < cnt && (rc = yw_map_next(w, n, &it, &e)) == 1) {
        char label[160], tmp[SHOW_MAX * 2 + 8];
        snprintf(label, sizeof(label), "'%s' in %s", show(tmp, sizeof(tmp), e.name, e.len), what);
        if (e.len > maxlen) {
            rc = yw_err(w, e.key, "%s: key longer than %zu bytes", what, maxlen);
            break;
        }
        v[k].knode = e.key;
        v[k].vnode = e.value;
        if (!(v[k].key = ts_strndup(e.name, e.len))) {
            rc = yw_oom(w);
            break;
        }
        rc = yw_node_str(w, e.value, label, maxlen, &v[k].value);
        k++; /* the key is owned now */
        if (rc)
            break;
    }
    if (rc < 0) {
        yw_pairs_free(v, k);
        return rc;
    }
    *out = v;
    *nout = k;
    return 0;
}

/* ---------------------------------------------------------------- JSON */

static bool tagged_str(struct fy_node *n)
{
    size_t len = 0;
    const char *t = fy_node_get_tag(n, &len);
    if (!t)
        return false;
    return (len == 5 && !memcmp(t, "!!str", 5)) ||
           (len >= 4 && !memcmp(t + len - 4, ":str", 4) && memchr(t, ',', len));
}

static int scalar_json(struct yamlwalk *w, struct fy_node *n, json_t **out)
{
    size_t len;
    const char *s = scalar(n, &len);
    if (!s)
        return yw_err(w, n, "expected a value, got %s", yw_kind(n));
    int rc = spend_bytes(w, n, len);
    if (rc)
        return rc;
    if (utf8_invalid_at(s, len) < len)
        return yw_err(w, n, "a string holds a NUL byte or invalid UTF-8");
    if (fy_node_get_style(n) == FYNS_PLAIN && !tagged_str(n)) {
        char t[NUMBER_MAX];
        if (yw_is_null(n))
            *out = json_null();
        else if (len >= sizeof(t))
            *out = json_stringn(s, len);
        else {
            memcpy(t, s, len);
            t[len] = '\0';
            const char *end;
            double d;
            if (!strcmp(t, "true") || !strcmp(t, "True") || !strcmp(t, "TRUE"))
                *out = json_true();
            else if (!strcmp(t, "false") || !strcmp(t, "False") || !strcmp(t, "FALSE"))
                *out = json_false();
            else if (units_scan_number(t, &end, &d) == 0 && !*end)
                *out = !strpbrk(t, ".eE") && fabs(d) < 9e15 ? json_integer((json_int_t)d)
                                                            : json_real(d);
            else
                *out = json_stringn(s, len);
        }
    } else {
        *out = json_stringn(s, len);
    }
    return *out ? 0 : yw_oom(w);
}

static int to_json(struct yamlwalk *w, struct fy_node *n, int depth, json_t **out)
{
    *out = NULL;
    if (depth > YW_MAX_DEPTH)
        return yw_err(w, n, "nested deeper than %d levels", YW_MAX_DEPTH);
    int rc = yw_deref(w, n, &n);
    if (rc)
        return rc;
    if (!n)
        return (*out = json_null()) ? 0 : yw_oom(w);
    if (fy_node_is_scalar(n))
        return scalar_json(w, n, out);
    void *it = NULL;
    json_t *o;
    if (fy_node_is_sequence(n)) {
        if (!(o = json_array()))
            return yw_oom(w);
        struct fy_node *item;
        while ((rc = yw_seq_next(w, n, &it, &item)) == 1) {
            json_t *v;
            if ((rc = to_json(w, item, depth + 1, &v)) != 0)
                break;
            if (json_array_append_new(o, v)) {
                rc = yw_oom(w);
                break;
            }
        }
    } else {
        if (!(o = json_object()))
            return yw_oom(w);
        struct yw_entry e;
        while ((rc = yw_map_next(w, n, &it, &e)) == 1) {
            json_t *v;
            char *key = ts_strndup(e.name, e.len);
            if (!key) {
                rc = yw_oom(w);
                break;
            }
            if ((rc = to_json(w, e.value, depth + 1, &v)) == 0 && json_object_set_new(o, key, v))
                rc = yw_oom(w);
            ts_free(key);
            if (rc)
                break;
        }
    }
    if (rc < 0) {
        json_decref(o);
        return rc;
    }
    *out = o;
    return 0;
}

int yw_json(struct yamlwalk *w, struct fy_node *n, json_t **out)
{
    return to_json(w, n, 0, out);
}

/* ---------------------------------------------------------------- by key */

/* Finds key for a map-level getter: 1 with *v and what = "'KEY'", 0, or < 0. */
static int by_key(struct yamlwalk *w, struct fy_node *map, const char *key, struct fy_node **v,
                  char *what, size_t cap)
{
    int rc = yw_find(w, map, key, v);
    if (rc == 1)
        snprintf(what, cap, "'%s'", key);
    return rc;
}

int yw_str(struct yamlwalk *w, struct fy_node *map, const char *key, size_t maxlen, char **out)
{
    struct fy_node *v;
    char what[96];
    int rc = by_key(w, map, key, &v, what, sizeof(what));
    if (rc <= 0)
        return rc;
    rc = yw_node_str(w, v, what, maxlen, out);
    return rc ? rc : 1;
}

int yw_bool(struct yamlwalk *w, struct fy_node *map, const char *key, bool *out)
{
    struct fy_node *v;
    char what[96];
    int rc = by_key(w, map, key, &v, what, sizeof(what));
    if (rc <= 0)
        return rc;
    rc = yw_node_bool(w, v, what, out);
    return rc ? rc : 1;
}

int yw_u64(struct yamlwalk *w, struct fy_node *map, const char *key, uint64_t min, uint64_t max,
           uint64_t *out)
{
    struct fy_node *v;
    char what[96];
    int rc = by_key(w, map, key, &v, what, sizeof(what));
    if (rc <= 0)
        return rc;
    rc = yw_node_u64(w, v, what, min, max, out);
    return rc ? rc : 1;
}

int yw_i64(struct yamlwalk *w, struct fy_node *map, const char *key, int64_t min, int64_t max,
           int64_t *out)
{
    struct fy_node *v;
    char what[96];
    int rc = by_key(w, map, key, &v, what, sizeof(what));
    if (rc <= 0)
        return rc;
    rc = yw_node_i64(w, v, what, min, max, out);
    return rc ? rc : 1;
}

int yw_double(struct yamlwalk *w, struct fy_node *map, const char *key, double min, double max,
              unsigned flags, double *out)
{
    struct fy_node *v;
    char what[96];
    int rc = by_key(w, map, key, &v, what, sizeof(what));
    if (rc <= 0)
        return rc;
    rc = yw_node_double(w, v, what, min, max, flags, out);
    return rc ? rc : 1;
}

int yw_duration(struct yamlwalk *w, struct fy_node *map, const char *key, uint64_t min_ns,
                uint64_t *ns)
{
    struct fy_node *v;
    char what[96];
    int rc = by_key(w, map, key, &v, what, sizeof(what));
    if (rc <= 0)
        return rc;
    rc = yw_node_duration(w, v, what, min_ns, ns);
    return rc ? rc : 1;
}

int yw_dist(struct yamlwalk *w, struct fy_node *map, const char *key, const char *dir,
            struct dist *d, char **spec)
{
    struct fy_node *v;
    char what[96];
    int rc = by_key(w, map, key, &v, what, sizeof(what));
    if (rc <= 0)
        return rc;
    rc = yw_node_dist(w, v, what, dir, d, spec);
    return rc ? rc : 1;
}

int yw_strlist(struct yamlwalk *w, struct fy_node *map, const char *key, size_t maxn, size_t maxlen,
               unsigned flags, char ***out, size_t *nout)
{
    struct fy_node *v;
    char what[96];
    int rc = by_key(w, map, key, &v, what, sizeof(what));
    if (rc <= 0)
        return rc;
    rc = yw_node_strlist(w, v, what, maxn, maxlen, flags, out, nout);
    return rc ? rc : 1;
}

int yw_strmap(struct yamlwalk *w, struct fy_node *map, const char *key, size_t maxn, size_t maxlen,
              struct yw_pair **out, size_t *nout)
{
    struct fy_node *v;
    char what[96];
    int rc = by_key(w, map, key, &v, what, sizeof(what));
    if (rc <= 0)
        return rc;
    rc = yw_node_strmap(w, v, what, maxn, maxlen, out, nout);
    return rc ? rc : 1;
}

/* ---------------------------------------------------------------- paths */

char *yw_path_resolve(const char *dir, const char *path)
{
    if (!path)
        return NULL;
    if (path[0] == '/' || !dir || !*dir || !strcmp(dir, "."))
        return ts_strdup(path);
    size_t dl = strlen(dir), pl = strlen(path);
    while (dl > 1 && dir[dl - 1] == '/')
        dl--;
    char *out = ts_malloc(dl + 1 + pl + 1);
    if (!out)
        return NULL;
    memcpy(out, dir, dl);
    size_t o = dl;
    if (!(dl == 1 && dir[0] == '/'))
        out[o++] = '/';
    memcpy(out + o, path, pl + 1);
    return out;
}
