/*
 * faultmodes.c - the fault-mode catalogue (faultmodes.h).
 */
#include "chaos/faultmodes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/slo.h"
#include "base/alloc.h"
#include "chaos/fault.h"
#include "faultmodes_yaml.h"
#include "scenario/yamlwalk.h"
#include "sim/admin.h"

void fault_catalogue_release(struct fault_catalogue *c)
{
    for (size_t i = 0; i < c->n; i++)
        json_decref(c->modes[i].fault);
    ts_free(c->modes);
    memset(c, 0, sizeof(*c));
}

static bool one_of(const char *s, const char *const *set)
{
    for (; *set; set++)
        if (!strcmp(s, *set))
            return true;
    return false;
}

/* A string value of at most cap-1 bytes into dst; required or not. */
static int get_str(struct yamlwalk *w, struct fy_node *map, const char *key, char *dst, size_t cap,
                   bool required)
{
    char *s = NULL;
    int rc = yw_str(w, map, key, cap - 1, &s);
    if (rc < 0)
        return rc;
    if (rc == 0) {
        if (required)
            return yw_err(w, map, "'%s' is required", key);
        return 0;
    }
    snprintf(dst, cap, "%s", s);
    ts_free(s);
    return 0;
}

/* The placeholder "{over_timeout:DEFAULT}": DEFAULT into def, or false. */
static bool placeholder(const char *s, char *def, size_t cap)
{
    static const char pre[] = "{over_timeout:";
    size_t n = strlen(s);
    if (strncmp(s, pre, sizeof(pre) - 1) || n < sizeof(pre) || s[n - 1] != '}')
        return false;
    snprintf(def, cap, "%.*s", (int)(n - sizeof(pre)), s + sizeof(pre) - 1);
    return true;
}

json_t *fault_mode_spec(const struct fault_mode *m, double over_ms, char *delay, size_t len)
{
    json_t *spec = json_deep_copy(m->fault);
    if (!spec)
        return NULL;
    if (len)
        delay[0] = '\0';
    const char *key;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(spec, tmp, key, v)
    {
        char def[32], val[32];
        if (!json_is_string(v) || !placeholder(json_string_value(v), def, sizeof(def)))
            continue;
        if (over_ms > 0)
            snprintf(val, sizeof(val), "%.0fms", ceil(over_ms * 1.25 / 50.0) * 50.0);
        else
            snprintf(val, sizeof(val), "%s", def);
        if (json_object_set_new(spec, key, json_string(val))) {
            json_decref(spec);
            return NULL;
        }
        if (len)
            snprintf(delay, len, "%s", val);
    }
    return spec;
}

/* The fault spec, checked by its target's parser with the placeholder's default. */
static int check_fault(struct yamlwalk *w, struct fy_node *at, struct fault_mode *m)
{
    char err[256] = "";
    json_t *spec = fault_mode_spec(m, 0, NULL, 0);
    if (!spec)
        return yw_oom(w);
    int rc;
    if (m->via_sim) {
        struct sim_fault sf;
        rc = sim_fault_parse_json(spec, &sf, err, sizeof(err));
    } else {
        struct fault *f = ts_malloc(sizeof(*f));
        rc = f ? 0 : -ENOMEM;
        if (f && !json_object_get(spec, "name"))
            rc = json_object_set_new(spec, "name", json_string(m->id)) ? -ENOMEM : 0;
        if (!rc)
            rc = fault_parse_json(spec, f, err, sizeof(err));
        ts_free(f);
    }
    json_decref(spec);
    if (rc == -ENOMEM)
        return yw_oom(w);
    return rc ? yw_err(w, at, "mode '%s': fault: %s", m->id, err) : 0;
}

static int read_probes(struct yamlwalk *w, struct fy_node *map, struct fault_mode *m)
{
    static const char *const keys[] = {"slo", "during", NULL};
    struct fy_node *list, *item;
    int rc = yw_find(w, map, "probes", &list);
    if (rc <= 0)
        return rc < 0 ? rc : yw_err(w, map, "mode '%s': 'probes' is required", m->id);
    void *it = NULL;
    while ((rc = yw_seq_next(w, list, &it, &item)) == 1) {
        if (m->n_probes >= FM_MAX_PROBES)
            return yw_err(w, item, "mode '%s': more than %d probes", m->id, FM_MAX_PROBES);
        if ((rc = yw_keys_check(w, item, keys, "a probe")))
            return rc;
        size_t i = m->n_probes++;
        if ((rc = get_str(w, item, "slo", m->probe_slo[i], sizeof(m->probe_slo[i]), true)) ||
            (rc =
                 get_str(w, item, "during", m->probe_during[i], sizeof(m->probe_during[i]), false)))
            return rc;
        struct slo s;
        char err[256];
        for (int k = 0; k < 2; k++) {
            const char *e = k ? m->probe_during[i] : m->probe_slo[i];
            if (*e && slo_parse(e, &s, err, sizeof(err)))
                return yw_err(w, item, "mode '%s': probe '%s': %s", m->id, e, err);
        }
    }
    return rc < 0 ? rc : (m->n_probes ? 0 : yw_err(w, list, "mode '%s': no probe", m->id));
}

static int read_lists(struct yamlwalk *w, struct fy_node *map, struct fault_mode *m)
{
    static const char *const prefixes[] = {"flag:", "kind:", "layer:", "trait:"};
    char **v = NULL;
    size_t n = 0;
    int rc = yw_strlist(w, map, "symptoms", FM_MAX_SYMPTOMS, sizeof(m->symptoms[0]) - 1, 0, &v, &n);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < n; i++)
        snprintf(m->symptoms[i], sizeof(m->symptoms[i]), "%s", v[i]);
    m->n_symptoms = n;
    yw_strv_free(v, n);
    v = NULL;
    n = 0;
    rc = yw_strlist(w, map, "when", FM_MAX_WHEN, sizeof(m->when[0]) - 1, YW_SCALAR_OK, &v, &n);
    if (rc <= 0)
        return rc < 0 ? rc : yw_err(w, map, "mode '%s': 'when' is required", m->id);
    rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        bool ok = false;
        for (size_t k = 0; k < 4; k++)
            ok |= !strncmp(v[i], prefixes[k], strlen(prefixes[k])) &&
                  v[i][strlen(prefixes[k])] != '\0';
        if (!ok)
            rc = yw_err(w, map,
                        "mode '%s': when '%s' must be flag:, kind:, layer: or trait: "
                        "and a name",
                        m->id, v[i]);
        snprintf(m->when[i], sizeof(m->when[i]), "%s", v[i]);
    }
    m->n_when = n;
    yw_strv_free(v, n);
    return rc < 0 ? rc : 0;
}

static int read_mode(struct yamlwalk *w, struct fy_node *map, struct fault_mode *m)
{
    static const char *const keys[] = {"id",     "title", "layer", "hits",  "symptoms",
                                       "risk",   "when",  "via",   "fault", "for",
                                       "probes", "why",   NULL};
    static const char *const layers[] = {"service", "middleware", "infrastructure", NULL};
    static const char *const hits[] = {"gateway", "model", "vector", "infrastructure", NULL};
    char via[16] = "";
    int rc = yw_keys_check(w, map, keys, "a fault mode");
    if (!rc)
        rc = get_str(w, map, "id", m->id, sizeof(m->id), true);
    if (rc)
        return rc;
    for (const char *p = m->id; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
            return yw_err(w, map, "mode '%s': id must be lower-case letters, digits and '-'",
                          m->id);
    if ((rc = get_str(w, map, "title", m->title, sizeof(m->title), true)) ||
        (rc = get_str(w, map, "layer", m->layer, sizeof(m->layer), true)) ||
        (rc = get_str(w, map, "hits", m->hits, sizeof(m->hits), true)) ||
        (rc = get_str(w, map, "via", via, sizeof(via), true)) ||
        (rc = get_str(w, map, "why", m->why, sizeof(m->why), false)))
        return rc;
    if (!one_of(m->layer, layers))
        return yw_err(w, map, "mode '%s': layer must be service, middleware or infrastructure",
                      m->id);
    if (!one_of(m->hits, hits))
        return yw_err(w, map, "mode '%s': hits must be gateway, model, vector or infrastructure",
                      m->id);
    if (strcmp(via, "proxy") && strcmp(via, "sim"))
        return yw_err(w, map, "mode '%s': via must be proxy or sim", m->id);
    m->via_sim = !strcmp(via, "sim");
    rc = yw_double(w, map, "risk", 0.1, 0.9, 0, &m->risk);
    if (rc <= 0)
        return rc < 0 ? rc : yw_err(w, map, "mode '%s': 'risk' is required", m->id);
    rc = yw_duration(w, map, "for", 1, &m->for_ns);
    if (rc <= 0)
        return rc < 0 ? rc : yw_err(w, map, "mode '%s': 'for' is required", m->id);
    if ((rc = read_lists(w, map, m)) || (rc = read_probes(w, map, m)))
        return rc;
    struct fy_node *f;
    rc = yw_find(w, map, "fault", &f);
    if (rc <= 0)
        return rc < 0 ? rc : yw_err(w, map, "mode '%s': 'fault' is required", m->id);
    if ((rc = yw_json(w, f, &m->fault)))
        return rc;
    if (!json_is_object(m->fault))
        return yw_err(w, f, "mode '%s': fault must be a mapping", m->id);
    return check_fault(w, f, m);
}

/* Puts m into c (replacing a mode of the same id); takes m's fault. */
static int put_mode(struct fault_catalogue *c, struct fault_mode *m)
{
    for (size_t i = 0; i < c->n; i++) {
        if (!strcmp(c->modes[i].id, m->id)) {
            json_decref(c->modes[i].fault);
            c->modes[i] = *m;
            return 0;
        }
    }
    if (c->n >= FM_MAX_MODES)
        return TS_TOOBIG;
    struct fault_mode *v = ts_realloc(c->modes, (c->n + 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    c->modes = v;
    c->modes[c->n++] = *m;
    return 0;
}

int fault_catalogue_add(struct fault_catalogue *c, const char *text, size_t len, const char *name,
                        char *err, size_t errlen)
{
    static const char *const keys[] = {"version", "modes", NULL};
    struct yamlwalk w;
    memset(&w, 0, sizeof(w));
    struct fy_node *root = NULL, *modes, *item;
    int rc = yw_open(&w, name, text, len, FM_FILE_MAX, err, errlen, &root);
    if (!rc && !root)
        rc = yw_err(&w, NULL, "empty catalogue");
    if (!rc)
        rc = yw_keys_check(&w, root, keys, "the catalogue");
    uint64_t version = 0;
    if (!rc && (rc = yw_u64(&w, root, "version", 1, 1, &version)) == 0)
        rc = yw_err(&w, root, "'version: 1' is required");
    if (rc > 0)
        rc = yw_find(&w, root, "modes", &modes);
    if (rc == 0)
        rc = yw_err(&w, root, "'modes' is required");
    void *it = NULL;
    while (rc > 0 && (rc = yw_seq_next(&w, modes, &it, &item)) == 1) {
        struct fault_mode *m = ts_calloc(1, sizeof(*m));
        if (!m) {
            rc = yw_oom(&w);
            break;
        }
        snprintf(m->source, sizeof(m->source), "%s", name);
        rc = read_mode(&w, item, m);
        if (!rc) {
            rc = put_mode(c, m);
            if (rc)
                rc = rc == -ENOMEM ? yw_oom(&w)
                                   : yw_err(&w, item, "more than %d fault modes", FM_MAX_MODES);
            else
                m->fault = NULL; /* now the catalogue's */
        }
        json_decref(m->fault);
        ts_free(m);
        rc = rc ? rc : 1;
    }
    yw_close(&w);
    return rc < 0 ? rc : 0;
}

int fault_catalogue_builtin(struct fault_catalogue *c, char *err, size_t errlen)
{
    return fault_catalogue_add(c, faultmodes_yaml, strlen(faultmodes_yaml), "built-in catalogue",
                               err, errlen);
}
