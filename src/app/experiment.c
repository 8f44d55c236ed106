/*
 * experiment.c - experiment files, fault calls and the judgement of a run
 * (experiment.h).
 */
#include "app/experiment.h"

#include <curl/curl.h>
#include <libfyaml.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/stats.h"
#include "analysis/summary.h"
#include "base/alloc.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/file.h"
#include "base/strdist.h"
#include "base/units.h"
#include "chaos/fault.h"
#include "net/ctlauth.h"
#include "app/run_quality.h"
#include "scenario/yamlwalk.h"
#include "sim/admin.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ---------------------------------------------------------------- parsing */

struct pctx {
    const char *name;
    char *err;
    size_t errlen;
    struct fy_node *at; /* the last key seen: where errors on non-scalars point */
    struct yamlwalk *w; /* the loaded document */
};

static int perr(struct pctx *c, struct fy_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int perr(struct pctx *c, struct fy_node *n, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (!n || !fy_node_is_scalar(n))
        n = c->at;
    struct fy_token *t = n && fy_node_is_scalar(n) ? fy_node_get_scalar_token(n) : NULL;
    const struct fy_mark *m = t ? fy_token_start_mark(t) : NULL;
    if (m)
        ts_errf(c->err, c->errlen, "%s:%d:%d: %s", c->name, m->line + 1, m->column + 1, msg);
    else
        ts_errf(c->err, c->errlen, "%s: %s", c->name, msg);
    return -EINVAL;
}

static bool is_key(struct fy_node *k, const char *s)
{
    size_t len;
    const char *v = k && fy_node_is_scalar(k) ? fy_node_get_scalar(k, &len) : NULL;
    return v && len == strlen(s) && memcmp(v, s, len) == 0;
}

/* Checks map is a mapping whose keys are all in keys (NULL-terminated). */
static int check_keys(struct pctx *c, struct fy_node *map, const char *const *keys,
                      const char *what)
{
    if (!map || !fy_node_is_mapping(map))
        return perr(c, map, "%s must be a mapping", what);
    void *it = NULL;
    struct fy_node_pair *pair;
    while ((pair = fy_node_mapping_iterate(map, &it)) != NULL) {
        struct fy_node *k = fy_node_pair_key(pair);
        size_t len;
        const char *ks = k && fy_node_is_scalar(k) ? fy_node_get_scalar(k, &len) : NULL;
        if (!ks)
            return perr(c, k, "%s: keys must be plain strings", what);
        bool ok = false;
        for (size_t i = 0; keys[i] && !ok; i++)
            ok = is_key(k, keys[i]);
        if (!ok) {
            const char *near = str_closest(ks, len, keys, 0, 3);
            return perr(c, k, "unknown key '%.*s' in %s%s%s%s", (int)(len > 64 ? 64 : len), ks,
                        what, near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
        }
    }
    return 0;
}

/* The value of key in map (NULL when absent); the key becomes the error position. */
static struct fy_node *getk(struct pctx *c, struct fy_node *map, const char *key)
{
    void *it = NULL;
    struct fy_node_pair *pair;
    while ((pair = fy_node_mapping_iterate(map, &it)) != NULL) {
        if (is_key(fy_node_pair_key(pair), key)) {
            c->at = fy_node_pair_key(pair);
            return fy_node_pair_value(pair);
        }
    }
    return NULL;
}

/* Copies a scalar into out (cap bytes with the NUL). */
static int get_str(struct pctx *c, struct fy_node *n, char *out, size_t cap, const char *what)
{
    size_t len;
    const char *s = n && fy_node_is_scalar(n) ? fy_node_get_scalar(n, &len) : NULL;
    if (!s)
        return perr(c, n, "%s must be a string", what);
    if (len >= cap || memchr(s, '\0', len))
        return perr(c, n, "%s: longer than %zu bytes", what, cap - 1);
    memcpy(out, s, len);
    out[len] = '\0';
    return 0;
}

static int get_duration(struct pctx *c, struct fy_node *n, uint64_t *ns, const char *what)
{
    char s[64];
    int rc = get_str(c, n, s, sizeof(s), what);
    if (rc)
        return rc;
    if (units_parse_duration_ns(s, ns))
        return perr(c, n, "%s: '%s' is not a duration (like 500ms, 2s, 1m)", what, s);
    return 0;
}

/* A node as JSON (yamlwalk's conversion: aliases followed, bounded). */
static json_t *to_json(struct pctx *c, struct fy_node *n, int *rc)
{
    json_t *out = NULL;
    *rc = yw_json(c->w, n, &out);
    return *rc ? NULL : out;
}

static bool name_ok(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '-' || *s == '.'))
            return false;
    return true;
}

static int get_url(struct pctx *c, struct fy_node *n, char *out, const char *what)
{
    int rc = get_str(c, n, out, EXP_URL_MAX, what);
    if (rc)
        return rc;
    if (strncmp(out, "http://", 7) && strncmp(out, "https://", 8))
        return perr(c, n, "%s: '%s' is not an http:// or https:// URL", what, out);
    size_t len = strlen(out);
    while (len > 8 && out[len - 1] == '/')
        out[--len] = '\0';
    return 0;
}

/*
 * consistency compares the answers of repeated prompts, which requests.jsonl
 * does not keep, so a window cannot be judged on it. dual_sla is judged per
 * window from the requests' quality and latency verdicts, with the load's
 * --dual-sla and --quality-min (checked once the load is parsed).
 */
static int probe_windowable(struct pctx *c, struct fy_node *at, const struct slo *s)
{
    if (s->latency || s->metric != SLO_CONSISTENCY)
        return 0;
    return perr(c, at,
                "probe '%s': consistency is not supported in experiments (requests.jsonl does "
                "not keep the answers); use rouge_l, bleu4, exact_match, json_valid, "
                "regex_match or dual_sla",
                s->expr);
}

/* The load's quality options (as tokenstorm run reads them), and whether
 * every probe can be judged with what the load is given (SLO needs). */
static int load_quality(struct pctx *c, struct fy_node *at, struct experiment *e)
{
    struct run_quality_opts qo;
    struct runner_config rc_cfg;
    char msg[512];
    run_quality_init(&qo);
    for (size_t i = 0; i < e->nload; i++) {
        const char *a = e->load[i];
        if (strncmp(a, "--", 2))
            continue;
        const char *eq = strchr(a, '=');
        char name[64];
        snprintf(name, sizeof(name), "%.*s", (int)((eq ? (size_t)(eq - a) : strlen(a)) - 2), a + 2);
        bool takes = !strcmp(name, "dual-sla") || !strcmp(name, "quality-min") ||
                     !strcmp(name, "quality-regex");
        const char *arg = eq ? eq + 1 : (takes && i + 1 < e->nload ? e->load[i + 1] : NULL);
        if (run_quality_option(&qo, name, arg, msg, sizeof(msg)) < 0)
            return perr(c, at, "load: %s", msg);
    }
    memset(&rc_cfg, 0, sizeof(rc_cfg));
    /* consistency is refused where the probe is read */
    unsigned have = run_args_slo_have((const char *const *)e->load, e->nload) |
                    SLO_NEEDS_CONSISTENCY | SLO_NEEDS_PROXY;
    qo.regex = NULL; /* the pattern is the run's to compile; only the target matters here */
    if (run_quality_apply(&qo, &rc_cfg, msg, sizeof(msg)))
        return perr(c, at, "load: %s", msg);
    run_quality_release(&qo);
    e->has_dual_sla = qo.dual_sla;
    e->dual = qo.dual;
    e->quality_target = rc_cfg.quality.target;
    for (size_t i = 0; i < 2 * e->nprobes; i++) {
        char name[SLO_EXPR_MAX];
        const struct exp_probe *p = &e->probes[i / 2];
        const struct slo *s = i % 2 ? &p->during : &p->slo;
        const char *what = run_slo_lack(slo_needs(s) & ~have);
        if (what)
            return perr(c, at, "probe '%s': %s needs the load's %s", s->expr,
                        slo_metric_written(s, name, sizeof(name)), what);
    }
    return 0;
}

static int parse_probe(struct pctx *c, struct fy_node *n, struct exp_probe *p)
{
    static const char *const keys[] = {"slo", "during", "name", "proxy", NULL};
    char expr[SLO_EXPR_MAX], msg[256];
    int rc = check_keys(c, n, keys, "a probe");
    if (rc)
        return rc;
    struct fy_node *v = getk(c, n, "slo");
    if (!v)
        return perr(c, NULL, "a probe needs \"slo\" (like ttft.p95<500ms)");
    if ((rc = get_str(c, v, expr, sizeof(expr), "slo")))
        return rc;
    if (slo_parse(expr, &p->slo, msg, sizeof(msg)))
        return perr(c, v, "%s", msg);
    if ((rc = probe_windowable(c, v, &p->slo)))
        return rc;
    p->during = p->slo;
    if ((v = getk(c, n, "during"))) {
        if ((rc = get_str(c, v, expr, sizeof(expr), "during")))
            return rc;
        if (slo_parse(expr, &p->during, msg, sizeof(msg)))
            return perr(c, v, "%s", msg);
        if ((rc = probe_windowable(c, v, &p->during)))
            return rc;
    }
    if ((v = getk(c, n, "name")) && (rc = get_str(c, v, p->name, sizeof(p->name), "name")))
        return rc;
    if ((v = getk(c, n, "proxy"))) {
        if ((rc = get_str(c, v, p->proxy, sizeof(p->proxy), "proxy")))
            return rc;
        if (strncmp(p->proxy, "http://", 7) && strncmp(p->proxy, "https://", 8))
            return perr(c, v, "proxy: expected a control API URL (http://host:port)");
        size_t l = strlen(p->proxy);
        while (l > 8 && p->proxy[l - 1] == '/')
            p->proxy[--l] = '\0';
    }
    if (!p->name[0]) {
        size_t l = strnlen(p->slo.expr, sizeof(p->name) - 1);
        memcpy(p->name, p->slo.expr, l);
        p->name[l] = '\0';
    }
    return 0;
}

/* Probes on proxy metrics without a "proxy" judge the phases' first proxy;
 * without one that is an error. Other probes keep no proxy. */
static int probe_proxies(struct pctx *c, struct fy_node *root, struct experiment *e)
{
    const char *first = NULL;
    for (size_t i = 0; i < e->nphases && !first; i++)
        if (e->phases[i].target == EXP_TARGET_PROXY)
            first = e->phases[i].url;
    for (size_t i = 0; i < e->nprobes; i++) {
        struct exp_probe *p = &e->probes[i];
        bool needs = (slo_needs(&p->slo) | slo_needs(&p->during)) & SLO_NEEDS_PROXY;
        if (!needs) {
            p->proxy[0] = '\0';
            continue;
        }
        if (p->proxy[0])
            continue;
        if (!first)
            return perr(c, getk(c, root, "steady-state-hypothesis"),
                        "probe '%s' reads a proxy's GET /chain: give it \"proxy: URL\" (no "
                        "phase uses a proxy)",
                        p->name);
        snprintf(p->proxy, sizeof(p->proxy), "%s", first);
    }
    return 0;
}

static int parse_hypothesis(struct pctx *c, struct fy_node *n, struct experiment *e)
{
    static const char *const keys[] = {"probes", "window", "step", "max_recovery", "title", NULL};
    int rc = check_keys(c, n, keys, "the steady-state hypothesis");
    if (rc)
        return rc;
    struct fy_node *v;
    e->window_ns = 2 * TS_NS_PER_S;
    e->step_ns = TS_NS_PER_S;
    if ((v = getk(c, n, "window")) && (rc = get_duration(c, v, &e->window_ns, "window")))
        return rc;
    if ((v = getk(c, n, "step")) && (rc = get_duration(c, v, &e->step_ns, "step")))
        return rc;
    if ((v = getk(c, n, "max_recovery")) &&
        (rc = get_duration(c, v, &e->max_recovery_ns, "max_recovery")))
        return rc;
    if (e->window_ns < 100 * TS_NS_PER_MS || e->step_ns < 100 * TS_NS_PER_MS)
        return perr(c, v, "window and step must be at least 100ms");
    struct fy_node *list = getk(c, n, "probes");
    if (!list || !fy_node_is_sequence(list) || fy_node_sequence_item_count(list) < 1)
        return perr(c, list, "the hypothesis needs \"probes\": a list of at least one probe");
    if (fy_node_sequence_item_count(list) > EXP_MAX_PROBES)
        return perr(c, list, "at most %d probes", EXP_MAX_PROBES);
    void *it = NULL;
    struct fy_node *p;
    while ((p = fy_node_sequence_iterate(list, &it)) != NULL)
        if ((rc = parse_probe(c, p, &e->probes[e->nprobes++])))
            return rc;
    return 0;
}

/* Checks the fault spec with its target's parser and fills what the runner needs. */
static int phase_spec(struct pctx *c, struct fy_node *at, struct exp_phase *p)
{
    char msg[256];
    if (!json_is_object(p->spec))
        return perr(c, at, "phase '%s': fault must be a mapping with a type", p->name);
    if (p->target == EXP_TARGET_PROXY) {
        const char *name = json_string_value(json_object_get(p->spec, "name"));
        if (!name && json_object_set_new(p->spec, "name", json_string(p->name)))
            return -ENOMEM;
        name = json_string_value(json_object_get(p->spec, "name"));
        if (!name || !name_ok(name) || strlen(name) >= EXP_NAME_MAX)
            return perr(c, at, "phase '%s': the fault's name must be [A-Za-z0-9_.-]{1,63}",
                        p->name);
        struct fault *f = ts_malloc(sizeof(*f));
        if (!f)
            return -ENOMEM;
        int rc = fault_parse_json(p->spec, f, msg, sizeof(msg));
        ts_free(f);
        if (rc)
            return perr(c, at, "phase '%s': %s", p->name, msg);
        snprintf(p->remove_path, sizeof(p->remove_path), "/faults/%s", name);
        return 0;
    }
    struct sim_fault f;
    json_t *d = json_object_get(p->spec, "type");
    const char *type = json_string_value(d);
    /* stall and cold start last the phase unless they say otherwise */
    if (type && (!strcmp(type, "stall") || !strcmp(type, "cold_start")) &&
        !json_object_get(p->spec, "for")) {
        char dur[32];
        snprintf(dur, sizeof(dur), "%llums", (unsigned long long)(p->for_ns / TS_NS_PER_MS));
        if (json_object_set_new(p->spec, "for", json_string(dur)))
            return -ENOMEM;
    }
    if (sim_fault_parse_json(p->spec, &f, msg, sizeof(msg)))
        return perr(c, at, "phase '%s': %s", p->name, msg);
    snprintf(p->remove_path, sizeof(p->remove_path), "/admin/faults/%s",
             sim_fault_type_name(f.type));
    return 0;
}

static int parse_phase(struct pctx *c, struct fy_node *n, struct exp_phase *p)
{
    static const char *const keys[] = {"name", "at", "for", "proxy", "sim", "fault", NULL};
    int rc = check_keys(c, n, keys, "a method phase");
    if (rc)
        return rc;
    struct fy_node *v = getk(c, n, "name");
    if (!v)
        return perr(c, NULL, "a phase needs a \"name\"");
    if ((rc = get_str(c, v, p->name, sizeof(p->name), "name")))
        return rc;
    if (!name_ok(p->name))
        return perr(c, v, "phase name '%s': use letters, digits, '_', '-', '.'", p->name);
    if (!(v = getk(c, n, "at")))
        return perr(c, NULL, "phase '%s' needs \"at\" (its start, like 5s)", p->name);
    if ((rc = get_duration(c, v, &p->at_ns, "at")))
        return rc;
    if (p->at_ns == 0)
        return perr(c, v, "phase '%s': at must be > 0 (the hypothesis needs a baseline)", p->name);
    if (!(v = getk(c, n, "for")))
        return perr(c, NULL, "phase '%s' needs \"for\" (its duration, like 3s)", p->name);
    if ((rc = get_duration(c, v, &p->for_ns, "for")))
        return rc;
    if (p->for_ns == 0)
        return perr(c, v, "phase '%s': for must be > 0", p->name);
    struct fy_node *px = getk(c, n, "proxy"), *sm = getk(c, n, "sim");
    if (!px == !sm)
        return perr(c, px ? px : sm,
                    "phase '%s' needs exactly one target: proxy: URL (control API) or sim: URL "
                    "(admin API)",
                    p->name);
    p->target = px ? EXP_TARGET_PROXY : EXP_TARGET_SIM;
    if ((rc = get_url(c, px ? px : sm, p->url, px ? "proxy" : "sim")))
        return rc;
    if (!(v = getk(c, n, "fault")))
        return perr(c, NULL, "phase '%s' needs \"fault\" (a fault spec)", p->name);
    struct fy_node *key = c->at;
    rc = 0;
    p->spec = to_json(c, v, &rc);
    if (rc)
        return rc;
    return phase_spec(c, key, p);
}

static int parse_rollback(struct pctx *c, struct fy_node *n, struct exp_rollback *r)
{
    static const char *const keys[] = {"method", "url", "body", NULL};
    static const char *const methods[] = {"GET", "POST", "PUT", "DELETE", NULL};
    int rc = check_keys(c, n, keys, "a rollback");
    if (rc)
        return rc;
    struct fy_node *v = getk(c, n, "url");
    if (!v)
        return perr(c, NULL, "a rollback needs \"url\"");
    if ((rc = get_url(c, v, r->url, "url")))
        return rc;
    snprintf(r->method, sizeof(r->method), "DELETE");
    if ((v = getk(c, n, "method"))) {
        if ((rc = get_str(c, v, r->method, sizeof(r->method), "method")))
            return perr(c, v, "method: one of GET, POST, PUT, DELETE");
        bool ok = false;
        for (size_t i = 0; methods[i]; i++)
            ok |= !strcmp(methods[i], r->method);
        if (!ok)
            return perr(c, v, "method: one of GET, POST, PUT, DELETE");
    }
    if ((v = getk(c, n, "body"))) {
        r->body = to_json(c, v, &rc);
        if (rc)
            return rc;
    }
    return 0;
}

static int parse_load(struct pctx *c, struct fy_node *n, struct experiment *e)
{
    static const char *const owned[] = {"--out", "--save-requests", "-q", "--quiet"};
    if (!n || !fy_node_is_sequence(n) || fy_node_sequence_item_count(n) < 1)
        return perr(c, n, "load must be a list of `tokenstorm run` options");
    if (fy_node_sequence_item_count(n) > EXP_MAX_LOAD_ARGS)
        return perr(c, n, "load: at most %d options", EXP_MAX_LOAD_ARGS);
    void *it = NULL;
    struct fy_node *a;
    while ((a = fy_node_sequence_iterate(n, &it)) != NULL) {
        char s[4096];
        int rc = get_str(c, a, s, sizeof(s), "a load option");
        if (rc)
            return rc;
        for (size_t i = 0; i < N(owned); i++) {
            size_t l = strlen(owned[i]);
            if (!strncmp(s, owned[i], l) && (s[l] == '\0' || s[l] == '='))
                return perr(c, a, "load: %s is set by the experiment (DIR/run)", owned[i]);
        }
        if (!(e->load[e->nload++] = ts_strdup(s)))
            return -ENOMEM;
    }
    return 0;
}

/* The load's --duration (tokenstorm run's default 20 s), 0 when given as --requests only. */
static uint64_t load_duration_ns(const struct experiment *e)
{
    uint64_t d = 20 * TS_NS_PER_S;
    bool requests = false;
    for (size_t i = 0; i < e->nload; i++) {
        const char *a = e->load[i], *v = NULL;
        if (!strcmp(a, "--duration") && i + 1 < e->nload)
            v = e->load[i + 1];
        else if (!strncmp(a, "--duration=", 11))
            v = a + 11;
        requests |= !strcmp(a, "--requests") || !strncmp(a, "--requests=", 11);
        if (v && units_parse_duration_ns(v, &d))
            d = 20 * TS_NS_PER_S;
        if (v)
            requests = false;
    }
    return requests ? 0 : d;
}

/* The load's --goodput 'ttft:MS tpot:MS e2el:MS' (as tokenstorm run reads it). */
static int load_goodput(struct pctx *c, struct fy_node *at, struct experiment *e)
{
    const char *v = NULL;
    for (size_t i = 0; i < e->nload; i++) {
        if (!strcmp(e->load[i], "--goodput") && i + 1 < e->nload)
            v = e->load[i + 1];
        else if (!strncmp(e->load[i], "--goodput=", 10))
            v = e->load[i] + 10;
    }
    if (!v)
        return 0;
    char copy[256], *save = NULL;
    if (strlen(v) >= sizeof(copy))
        return perr(c, at, "load: --goodput: too long");
    strcpy(copy, v);
    for (char *tok = strtok_r(copy, " ,", &save); tok; tok = strtok_r(NULL, " ,", &save)) {
        char *colon = strchr(tok, ':'), *end;
        double d = colon ? strtod(colon + 1, &end) : 0;
        if (!colon || end == colon + 1 || *end || !(d > 0))
            return perr(c, at, "load: --goodput: expected 'ttft:MS tpot:MS e2el:MS', got '%s'",
                        tok);
        *colon = '\0';
        if (!strcmp(tok, "ttft"))
            e->goodput.ttft_ms = d;
        else if (!strcmp(tok, "tpot"))
            e->goodput.tpot_ms = d;
        else if (!strcmp(tok, "e2el"))
            e->goodput.e2el_ms = d;
        else
            return perr(c, at, "load: --goodput: unknown metric '%s' (ttft, tpot, e2el)", tok);
    }
    e->has_goodput = goodput_cfg_enabled(&e->goodput);
    return 0;
}

static int phase_cmp(const void *a, const void *b)
{
    const struct exp_phase *x = a, *y = b;
    return x->at_ns < y->at_ns ? -1 : x->at_ns > y->at_ns;
}

static int parse_root(struct pctx *c, struct fy_node *root, struct experiment *e)
{
    static const char *const keys[] = {"title",      "description", "steady-state-hypothesis",
                                       "hypothesis", "method",      "rollbacks",
                                       "load",       NULL};
    int rc = check_keys(c, root, keys, "the experiment");
    if (rc)
        return rc;
    struct fy_node *v = getk(c, root, "title");
    if (!v)
        return perr(c, root, "the experiment needs a \"title\"");
    if ((rc = get_str(c, v, e->title, sizeof(e->title), "title")))
        return rc;
    if ((v = getk(c, root, "description"))) {
        char *d = ts_malloc(8192);
        if (!d)
            return -ENOMEM;
        rc = get_str(c, v, d, 8192, "description");
        if (rc) {
            ts_free(d);
            return rc;
        }
        e->description = d;
    }
    struct fy_node *h = getk(c, root, "steady-state-hypothesis"), *h2 = getk(c, root, "hypothesis");
    if (h && h2)
        return perr(c, h2, "give steady-state-hypothesis or hypothesis, not both");
    if (!h && !(h = h2))
        return perr(c, root, "the experiment needs a \"steady-state-hypothesis\" with probes");
    if ((rc = parse_hypothesis(c, h, e)))
        return rc;
    struct fy_node *m = getk(c, root, "method");
    if (!m || !fy_node_is_sequence(m) || fy_node_sequence_item_count(m) < 1)
        return perr(c, m, "the experiment needs a \"method\": a list of fault phases");
    if (fy_node_sequence_item_count(m) > EXP_MAX_PHASES)
        return perr(c, m, "at most %d phases", EXP_MAX_PHASES);
    void *it = NULL;
    struct fy_node *p;
    while ((p = fy_node_sequence_iterate(m, &it)) != NULL) {
        struct exp_phase *ph = &e->phases[e->nphases++];
        if ((rc = parse_phase(c, p, ph)))
            return rc;
        for (size_t i = 0; i + 1 < e->nphases; i++) {
            if (!strcmp(e->phases[i].name, ph->name))
                return perr(c, p, "two phases are named '%s'", ph->name);
            if (ph->target == e->phases[i].target && !strcmp(ph->url, e->phases[i].url) &&
                !strcmp(ph->remove_path, e->phases[i].remove_path))
                return perr(c, p, "phases '%s' and '%s' add the same fault (%s) to %s",
                            e->phases[i].name, ph->name, ph->remove_path, ph->url);
        }
    }
    if ((v = getk(c, root, "rollbacks"))) {
        if (!fy_node_is_sequence(v) || fy_node_sequence_item_count(v) > EXP_MAX_ROLLBACKS)
            return perr(c, v, "rollbacks must be a list of at most %d actions", EXP_MAX_ROLLBACKS);
        it = NULL;
        while ((p = fy_node_sequence_iterate(v, &it)) != NULL)
            if ((rc = parse_rollback(c, p, &e->rollbacks[e->nrollbacks++])))
                return rc;
    }
    struct fy_node *ld = getk(c, root, "load");
    if ((rc = parse_load(c, ld, e)) || (rc = load_goodput(c, ld, e)) ||
        (rc = load_quality(c, ld, e)) || (rc = probe_proxies(c, root, e)))
        return rc;
    qsort(e->phases, e->nphases, sizeof(e->phases[0]), phase_cmp);
    uint64_t d = load_duration_ns(e), end = experiment_faults_end_ns(e);
    if (d && end + e->window_ns > d)
        return perr(c, getk(c, root, "load"),
                    "the load runs %.1f s but the faults end at %.1f s: it must run at least "
                    "one window (%.1f s) longer to judge the recovery",
                    (double)d / 1e9, (double)end / 1e9, (double)e->window_ns / 1e9);
    return 0;
}

int experiment_parse(const char *text, size_t len, const char *name, struct experiment **out,
                     char *err, size_t errlen)
{
    struct yamlwalk w = {0};
    struct pctx c = {name ? name : "<experiment>", err, errlen, NULL, &w};
    struct fy_node *root = NULL;
    *out = NULL;
    struct experiment *e = ts_calloc(1, sizeof(*e));
    int rc = e ? yw_open(&w, c.name, text, len, EXP_FILE_MAX, err, errlen, &root) : -ENOMEM;
    if (rc == TS_PARSE)
        rc = -EINVAL;
    if (!rc && !root) {
        ts_errf(err, errlen, "%s: empty; expected title, steady-state-hypothesis, method, load",
                c.name);
        rc = -EINVAL;
    }
    if (!rc)
        rc = parse_root(&c, root, e);
    if (rc == -ENOMEM)
        ts_errf(err, errlen, "%s: out of memory", c.name);
    yw_close(&w);
    if (rc)
        experiment_free(e);
    else
        *out = e;
    return rc;
}

int experiment_load(const char *path, struct experiment **out, char *err, size_t errlen)
{
    char *data = NULL;
    size_t len = 0;
    *out = NULL;
    int rc = file_read_all(path, EXP_FILE_MAX, &data, &len, err, errlen);
    if (rc)
        return rc;
    rc = experiment_parse(data, len, path, out, err, errlen);
    ts_free(data);
    return rc;
}

void experiment_free(struct experiment *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->nphases; i++)
        json_decref(e->phases[i].spec);
    for (size_t i = 0; i < e->nrollbacks; i++)
        json_decref(e->rollbacks[i].body);
    for (size_t i = 0; i < e->nload; i++)
        ts_free(e->load[i]);
    ts_free(e->description);
    ts_free(e);
}

uint64_t experiment_faults_end_ns(const struct experiment *e)
{
    uint64_t end = 0;
    for (size_t i = 0; i < e->nphases; i++)
        if (e->phases[i].at_ns + e->phases[i].for_ns > end)
            end = e->phases[i].at_ns + e->phases[i].for_ns;
    return end;
}

/* ---------------------------------------------------------------- fault calls */

struct resp {
    char text[256];
    size_t len;
    struct buf *all; /* when set: the whole body goes here (bounded by its cap) */
};

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    struct resp *r = ud;
    size_t len = size * n, room = sizeof(r->text) - 1 - r->len;
    if (r->all)
        return buf_append(r->all, p, len) == 0 ? len : 0; /* 0: curl stops, an error */
    memcpy(r->text + r->len, p, len < room ? len : room);
    r->len += len < room ? len : room;
    r->text[r->len] = '\0';
    return len;
}

/* One blocking call; returns the status (> 0) or -EIO with err set. */
static int http_call(const char *method, const char *url, const json_t *body, char *err,
                     size_t errlen, struct resp *r)
{
    CURL *h = curl_easy_init();
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    struct curl_slist *hdr = NULL;
    long status = 0;
    int rc = -EIO;
    if (!h || (body && !text)) {
        ts_errf(err, errlen, "out of memory");
        goto out;
    }
    hdr = curl_slist_append(NULL, "Content-Type: application/json");
    /* a proxy or simulator that guards its control API (net/ctlauth.h) */
    const char *token = getenv(CTLAUTH_TOKEN_ENV);
    char auth[CTLAUTH_TOKEN_MAX + 32];
    if (hdr && token && *token && strlen(token) <= CTLAUTH_TOKEN_MAX) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
        struct curl_slist *more = curl_slist_append(hdr, auth);
        hdr = more ? more : hdr;
        explicit_bzero(auth, sizeof(auth));
    }
    if (!hdr) {
        ts_errf(err, errlen, "out of memory");
        goto out;
    }
    CURLcode cc = CURLE_OK;
    cc = cc ? cc : curl_easy_setopt(h, CURLOPT_URL, url);
    cc = cc ? cc : curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    cc = cc ? cc : curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
    cc = cc ? cc : curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    cc = cc ? cc : curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    cc = cc ? cc : curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    cc = cc ? cc : curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    cc = cc ? cc : curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    if (!cc && text)
        cc = curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
    cc = cc ? cc : curl_easy_perform(h);
    if (cc) {
        ts_errf(err, errlen, "%s %s: %s", method, url, curl_easy_strerror(cc));
        goto out;
    }
    if (curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK || status <= 0) {
        ts_errf(err, errlen, "%s %s: no status", method, url);
        goto out;
    }
    rc = (int)status;
out:
    curl_slist_free_all(hdr);
    free(text); /* jansson's allocator */
    if (h)
        curl_easy_cleanup(h);
    return rc;
}

static int call(const char *method, const char *base, const char *path, const json_t *body,
                bool gone_ok, char *err, size_t errlen)
{
    char url[EXP_URL_MAX + 128];
    struct resp r = {{0}, 0, NULL};
    snprintf(url, sizeof(url), "%s%s", base, path);
    int st = http_call(method, url, body, err, errlen, &r);
    if (st < 0)
        return st;
    if ((st >= 200 && st < 300) || (gone_ok && st == 404))
        return 0;
    ts_errf(err, errlen, "%s %s: %d %s", method, url, st, r.text);
    return -EPROTO;
}

int experiment_apply(const struct exp_phase *p, char *err, size_t errlen)
{
    return call("POST", p->url, p->target == EXP_TARGET_PROXY ? "/faults" : "/admin/faults",
                p->spec, false, err, errlen);
}

int experiment_remove(const struct exp_phase *p, char *err, size_t errlen)
{
    return call("DELETE", p->url, p->remove_path, NULL, true, err, errlen);
}

int experiment_rollback(const struct exp_rollback *r, char *err, size_t errlen)
{
    return call(r->method, r->url, "", r->body, true, err, errlen);
}

#define DELAY_METRIC "tokenstorm_proxy_forward_delay_seconds_bucket"

int experiment_proxy_delay(const char *api, struct scrape_hist *out, char *err, size_t errlen)
{
    char url[EXP_URL_MAX + 16];
    struct buf all;
    buf_init(&all, SCRAPE_MAX_BODY);
    struct resp r = {{0}, 0, &all};
    snprintf(url, sizeof(url), "%s/metrics", api);
    out->n = 0;
    int rc = http_call("GET", url, NULL, err, errlen, &r);
    if (rc >= 0 && rc != 200) {
        ts_errf(err, errlen, "GET %s: status %d", url, rc);
        rc = -EPROTO;
    } else if (rc >= 0) {
        rc = scrape_hist_parse(out, DELAY_METRIC, all.data ? all.data : "", all.len, err, errlen);
        if (!rc && (out->n == 0 || !isinf(out->le[out->n - 1]))) {
            ts_errf(err, errlen, "GET %s: no %s", url, DELAY_METRIC);
            rc = -EPROTO;
        }
    }
    buf_release(&all);
    if (rc)
        out->n = 0;
    return rc;
}

int experiment_chain_fetch(const char *api, json_t **out, char *err, size_t errlen)
{
    char url[EXP_URL_MAX + 16];
    struct buf all;
    json_error_t je;
    buf_init(&all, 16u << 20);
    struct resp r = {{0}, 0, &all};
    snprintf(url, sizeof(url), "%s/chain", api);
    *out = NULL;
    int rc = http_call("GET", url, NULL, err, errlen, &r);
    if (rc >= 0 && rc != 200) {
        ts_errf(err, errlen, "GET %s: status %d", url, rc);
        rc = -EPROTO;
    } else if (rc >= 0) {
        *out = json_loadb(all.data ? all.data : "", all.len, 0, &je);
        rc = 0;
        if (!json_is_array(json_object_get(*out, "series"))) {
            ts_errf(err, errlen, "GET %s: not a chain document (%s)", url,
                    *out ? "no series" : je.text);
            json_decref(*out);
            *out = NULL;
            rc = TS_PARSE;
        }
    }
    buf_release(&all);
    return rc;
}

/* What one proxy's chain series adds up to over [from, to) ns. */
struct chain_sums {
    double attempts, distinct, reqs, tokens, bytes, secs;
};

/* Sums the series points of doc in [from, to); with trig, the retries by trigger too. */
static void chain_sum(const json_t *doc, double from, double to, struct chain_sums *cs,
                      json_t *trig)
{
    size_t i;
    const json_t *b;
    memset(cs, 0, sizeof(*cs));
    json_array_foreach(json_object_get(doc, "series"), i, b)
    {
        double t = json_number_value(json_object_get(b, "t_mono_ns"));
        if (t < from || t >= to)
            continue;
        const json_t *o = json_object_get(b, "orphaned");
        cs->attempts += json_number_value(json_object_get(b, "attempts"));
        cs->distinct += json_number_value(json_object_get(b, "distinct"));
        cs->reqs += json_number_value(json_object_get(o, "requests"));
        cs->tokens += json_number_value(json_object_get(o, "tokens"));
        cs->bytes += json_number_value(json_object_get(o, "bytes"));
        cs->secs += json_number_value(json_object_get(o, "seconds"));
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)json_object_get(b, "retries"), k, v)
        {
            double prev = json_number_value(json_object_get(trig, k));
            if (trig)
                json_object_set_new(trig, k, json_real(prev + json_number_value(v)));
        }
    }
}

/* One proxy's chain over [from, to) ns: {"url", "attempts", "distinct",
 * "amplification", "amplification_by_trigger": {T: 1 + retries/distinct},
 * "orphaned": {...}}. */
static json_t *chain_window(const char *url, const json_t *doc, double from, double to)
{
    struct chain_sums cs;
    json_t *trig = json_object();
    chain_sum(doc, from, to, &cs, trig);
    const char *k;
    json_t *v;
    json_object_foreach(trig, k, v)
    {
        (void)json_real_set(v, cs.distinct > 0 ? 1 + json_real_value(v) / cs.distinct : NAN);
        if (!(cs.distinct > 0))
            (void)json_object_set_new(trig, k, json_null());
    }
    return json_pack("{s:s,s:f,s:f,s:o,s:o,s:{s:f,s:f,s:f,s:f}}", "url", url, "attempts",
                     cs.attempts, "distinct", cs.distinct, "amplification",
                     cs.distinct > 0 ? json_real(cs.attempts / cs.distinct) : json_null(),
                     "amplification_by_trigger", trig ? trig : json_null(), "orphaned", "requests",
                     cs.reqs, "tokens", cs.tokens, "bytes", cs.bytes, "seconds", cs.secs);
}

double exp_chain_actual(const struct exp_chains *chains, const struct exp_probe *p,
                        const struct slo *s, double a_ms, double b_ms)
{
    const json_t *doc = NULL;
    for (size_t i = 0; chains && i < chains->n && !doc; i++)
        if (!strcmp(chains->url[i], p->proxy))
            doc = chains->doc[i];
    if (!doc)
        return NAN;
    double from = (double)chains->run_start_ns + a_ms * 1e6,
           to = (double)chains->run_start_ns + b_ms * 1e6;
    struct chain_sums cs;
    chain_sum(doc, from, to, &cs, NULL);
    double attempts = cs.attempts, distinct = cs.distinct, tokens = cs.tokens, bytes = cs.bytes,
           secs = cs.secs;
    switch (s->metric) {
    case SLO_AMPLIFICATION:
        return distinct > 0 ? attempts / distinct : NAN;
    case SLO_ORPHANED_TOKENS:
        return tokens;
    case SLO_ORPHANED_BYTES:
        return bytes;
    case SLO_ORPHANED_SECONDS:
        return secs;
    default:
        return NAN;
    }
}

json_t *exp_delay_json(const struct scrape_hist *before, const struct scrape_hist *after)
{
    double pieces = 0;
    const double qs[] = {0.5, 0.99, 0.999};
    const char *keys[] = {"p50_s", "p99_s", "p999_s"};
    json_t *o = json_object();
    for (size_t k = 0; o && k < 3; k++) {
        double v = scrape_hist_quantile(before, after, qs[k], &pieces);
        if (json_object_set_new(o, keys[k], isnan(v) ? json_null() : json_real(v))) {
            json_decref(o);
            o = NULL;
        }
    }
    if (o && json_object_set_new(o, "pieces", json_integer((json_int_t)pieces))) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

/* ---------------------------------------------------------------- judgement */

struct exp_req {
    double t_ms; /* intended send time */
    struct req_record rec;
};

struct exp_requests {
    struct exp_req *v;
    size_t n, cap;
    size_t malformed;
    double last_ms;
};

/* ms since the run's start -> ns on a base far from 0, so 0 stays "did not happen" */
#define T_BASE 1e15

static uint64_t at_ns(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? (uint64_t)llround(T_BASE + json_number_value(v) * 1e6) : 0;
}

static uint32_t us_of(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    double us = json_is_number(v) ? json_number_value(v) * 1e3 : 0;
    return us > 0 && us < 4e9 ? (uint32_t)llround(us) : 0;
}

static uint32_t u32_of(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    json_int_t i = json_is_integer(v) ? json_integer_value(v) : 0;
    return i > 0 && i <= UINT32_MAX ? (uint32_t)i : 0;
}

static int32_t usage_of(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    json_int_t i = json_is_integer(v) ? json_integer_value(v) : -1;
    return i >= 0 && i <= INT32_MAX ? (int32_t)i : -1;
}

static void flag(const json_t *o, const char *k, uint32_t f, uint32_t *flags)
{
    if (json_is_true(json_object_get(o, k)))
        *flags |= f;
}

/*
 * The line's "quality" object (req_record_append_json) -> *q; null or absent
 * leaves it unscored. A score is taken only when it is a number in [0, 1].
 */
static void quality_of(const json_t *o, struct quality_scores *q)
{
    const json_t *rl = json_object_get(o, "rouge_l"), *bl = json_object_get(o, "bleu4");
    const json_t *ex = json_object_get(o, "exact"), *v;
    if (!json_is_object(o))
        return;
    if (json_is_number(rl) && json_is_number(bl) && json_is_boolean(ex)) {
        q->rouge_l = json_number_value(rl);
        q->bleu4 = json_number_value(bl);
        if (q->rouge_l >= 0 && q->rouge_l <= 1 && q->bleu4 >= 0 && q->bleu4 <= 1) {
            q->exact = json_is_true(ex);
            q->have |= QUALITY_HAVE_REF;
        } else {
            q->rouge_l = q->bleu4 = 0;
        }
    }
    if (json_is_boolean(v = json_object_get(o, "regex_match"))) {
        q->regex_match = json_is_true(v);
        q->have |= QUALITY_HAVE_REGEX;
    }
    if (json_is_boolean(v = json_object_get(o, "json_valid"))) {
        q->json_valid = json_is_true(v);
        q->have |= QUALITY_HAVE_JSON;
    }
    q->truncated = q->have && json_is_true(json_object_get(o, "truncated"));
}

/* One requests.jsonl line: 1 kept, 0 warm-up, -1 malformed. */
static int parse_req(const char *line, size_t len, struct exp_req *q)
{
    json_t *o = json_loadb(line, len, 0, NULL);
    int rc = -1;
    memset(q, 0, sizeof(*q));
    if (!json_is_object(o))
        goto out;
    if (json_is_true(json_object_get(o, "warmup"))) {
        rc = 0;
        goto out;
    }
    const char *oc = json_string_value(json_object_get(o, "outcome"));
    int outcome = oc ? req_outcome_from_name(oc) : -EINVAL;
    const json_t *t = json_object_get(o, "intended_ms");
    if (outcome < 0 || !json_is_number(t))
        goto out;
    struct req_record *r = &q->rec;
    q->t_ms = json_number_value(t);
    r->outcome = (enum req_outcome)outcome;
    r->http_status = (int)u32_of(o, "http_status");
    flag(o, "stream", REQF_STREAM, &r->flags);
    flag(o, "reused_conn", REQF_REUSED_CONN, &r->flags);
    flag(o, "no_done", REQF_NO_DONE, &r->flags);
    flag(o, "no_finish", REQF_NO_FINISH, &r->flags);
    flag(o, "id_changed", REQF_ID_CHANGED, &r->flags);
    flag(o, "usage_mismatch", REQF_USAGE_MISMATCH, &r->flags);
    r->intended_ns = at_ns(o, "intended_ms");
    r->start_ns = at_ns(o, "start_ms");
    r->first_byte_ns = at_ns(o, "first_byte_ms");
    r->first_chunk_ns = at_ns(o, "first_chunk_ms");
    r->first_token_ns = at_ns(o, "first_token_ms");
    r->last_chunk_ns = at_ns(o, "last_chunk_ms");
    r->end_ns = at_ns(o, "end_ms");
    r->dns_us = us_of(o, "dns_ms");
    r->connect_us = us_of(o, "connect_ms");
    r->tls_us = us_of(o, "tls_ms");
    r->sent_us = us_of(o, "sent_ms");
    r->ttfb_us = us_of(o, "ttfb_ms");
    r->prompt_tokens = u32_of(o, "prompt_tokens");
    r->max_tokens = u32_of(o, "max_tokens");
    r->client_tokens = u32_of(o, "client_tokens");
    r->content_chunks = u32_of(o, "content_chunks");
    r->choice_chunks = u32_of(o, "choice_chunks");
    r->output_tokens = u32_of(o, "output_tokens");
    r->usage_prompt_tokens = usage_of(o, "usage_prompt_tokens");
    r->usage_completion_tokens = usage_of(o, "usage_completion_tokens");
    const char *ts = json_string_value(json_object_get(o, "token_source"));
    r->token_source = ts && !strcmp(ts, "usage")       ? TOKENS_USAGE
                      : ts && !strcmp(ts, "tokenizer") ? TOKENS_TOKENIZER
                                                       : TOKENS_CHUNKS;
    const json_t *itl = json_object_get(o, "itl_mean_ms");
    if (json_is_number(itl) && r->choice_chunks > 1)
        r->itl_sum_ns = (uint64_t)llround(json_number_value(itl) * 1e6) * (r->choice_chunks - 1);
    const json_t *mx = json_object_get(o, "itl_max_ms");
    if (json_is_number(mx))
        r->itl_max_ns = (uint64_t)llround(json_number_value(mx) * 1e6);
    const char *fr = json_string_value(json_object_get(o, "finish_reason"));
    if (fr)
        snprintf(r->finish_reason, sizeof(r->finish_reason), "%s", fr);
    quality_of(json_object_get(o, "quality"), &r->quality);
    rc = 1;
out:
    json_decref(o);
    return rc;
}

int exp_requests_load(const char *path, struct exp_requests **out, char *err, size_t errlen)
{
    struct exp_requests *r = ts_calloc(1, sizeof(*r));
    FILE *f = NULL;
    struct buf line;
    int rc = 0;
    buf_init(&line, 1u << 20);
    *out = NULL;
    if (!r)
        return -ENOMEM;
    if (!(f = fopen(path, "r"))) {
        rc = -errno;
        ts_errf(err, errlen, "%s: %s", path, strerror(errno));
        goto out;
    }
    for (;;) {
        int ch = EOF;
        buf_truncate(&line, 0);
        bool over = false;
        while ((ch = fgetc(f)) != EOF && ch != '\n')
            if (!over && buf_append_char(&line, (char)ch))
                over = true;
        if (ch == EOF && line.len == 0)
            break;
        if (over) {
            r->malformed++;
            continue;
        }
        if (r->n == r->cap) {
            size_t cap = r->cap ? r->cap * 2 : 1024;
            if (r->n >= EXP_MAX_REQUESTS) {
                ts_errf(err, errlen, "%s: more than %u requests", path, EXP_MAX_REQUESTS);
                rc = TS_TOOBIG;
                goto out;
            }
            struct exp_req *v = ts_realloc(r->v, cap * sizeof(*v));
            if (!v) {
                rc = -ENOMEM;
                ts_errf(err, errlen, "out of memory");
                goto out;
            }
            r->v = v;
            r->cap = cap;
        }
        int k = line.len ? parse_req(buf_cstr(&line), line.len, &r->v[r->n]) : 0;
        if (k == 1) {
            if (r->v[r->n].t_ms > r->last_ms)
                r->last_ms = r->v[r->n].t_ms;
            r->n++;
        } else if (k < 0) {
            r->malformed++;
        }
        if (ch == EOF)
            break;
    }
    if (ferror(f)) {
        rc = -EIO;
        ts_errf(err, errlen, "%s: read error", path);
    }
out:
    if (f)
        fclose(f);
    buf_release(&line);
    if (rc)
        exp_requests_free(r);
    else
        *out = r;
    return rc;
}

void exp_requests_free(struct exp_requests *r)
{
    if (!r)
        return;
    ts_free(r->v);
    ts_free(r);
}

size_t exp_requests_count(const struct exp_requests *r)
{
    return r->n;
}

double exp_requests_last_ms(const struct exp_requests *r)
{
    return r->last_ms;
}

static const char *const verdict_names[EXP_VERDICT_COUNT] = {
    "steady", "deviated", "recovered", "not_recovered", "unsteady",
};

const char *exp_verdict_name(enum exp_verdict v)
{
    return (unsigned)v < EXP_VERDICT_COUNT ? verdict_names[v] : "unknown";
}

int exp_verdict_exit(enum exp_verdict v)
{
    return v == EXP_STEADY || v == EXP_DEVIATED || v == EXP_RECOVERED ? 0 : 1;
}

static json_t *num_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static int by_end(const void *x, const void *y)
{
    const struct exp_req *p = *(const struct exp_req *const *)x;
    const struct exp_req *q = *(const struct exp_req *const *)y;
    return p->rec.end_ns < q->rec.end_ns ? -1 : p->rec.end_ns > q->rec.end_ns;
}

/*
 * The windowed dual SLA over the requests sent in [a, b) ms, in completion
 * order, as tokenstorm run computes it: quality-ok = ok and meeting the
 * quality target (when scored), latency-ok = ok and within --goodput. NAN
 * when the window holds fewer requests than one dual-SLA window.
 */
static double window_dual_sla(const struct experiment *e, const struct exp_requests *r, double a,
                              double b)
{
    const struct exp_req **v = ts_malloc((r->n ? r->n : 1) * sizeof(*v));
    struct dual_sla ds;
    if (!v || dual_sla_init(&ds, &e->dual)) {
        ts_free(v);
        return NAN;
    }
    size_t n = 0;
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].t_ms >= a && r->v[i].t_ms < b && !(r->v[i].rec.flags & REQF_WARMUP))
            v[n++] = &r->v[i];
    qsort(v, n, sizeof(*v), by_end);
    for (size_t i = 0; i < n; i++) {
        const struct req_record *rec = &v[i]->rec;
        bool q_ok = rec->outcome == REQ_OK &&
                    (!rec->quality.have || quality_scores_pass(&rec->quality, &e->quality_target));
        dual_sla_feed(&ds, q_ok, goodput_meets(&e->goodput, rec));
    }
    ts_free(v);
    return dual_sla_attainment(&ds);
}

/*
 * Evaluates the probes (their slo, or their during tolerance) over the
 * requests sent in [a, b) ms. *held: every probe held and there were
 * requests. Returns 0 and *out, or -ENOMEM.
 */
static int eval_window(const struct experiment *e, const struct exp_requests *r,
                       const struct exp_chains *chains, struct run_stats *st, double a, double b,
                       bool during, bool *held, json_t **out)
{
    run_stats_reset(st);
    for (size_t i = 0; i < r->n; i++) {
        const struct exp_req *q = &r->v[i];
        if (q->t_ms < a || q->t_ms >= b)
            continue;
        run_stats_add_record(st, &q->rec, e->has_goodput ? &e->goodput : NULL);
        /* the ITL histogram from each request's mean gap (the file has no gaps) */
        if (q->rec.choice_chunks > 1 && q->rec.itl_sum_ns) {
            uint64_t gaps = q->rec.choice_chunks - 1, mean = q->rec.itl_sum_ns / gaps;
            for (uint64_t k = 0; k < gaps && k < 65536; k++)
                run_stats_add_itl(st, mean);
        }
    }
    struct run_summary sum;
    run_summary_compute(&sum, st, (b - a) / 1e3, 0, e->has_goodput ? &e->goodput : NULL);
    if (e->has_dual_sla)
        sum.quality.dual_sla = window_dual_sla(e, r, a, b);
    json_t *o = json_pack("{s:f,s:f,s:I,s:I,s:I}", "from_s", a / 1e3, "to_s", b / 1e3, "requests",
                          (json_int_t)sum.requests, "completed", (json_int_t)sum.completed,
                          "failed", (json_int_t)sum.failed);
    json_t *probes = json_array();
    bool all = sum.requests > 0;
    int rc = o && probes ? 0 : -ENOMEM;
    for (size_t i = 0; !rc && i < e->nprobes; i++) {
        const struct slo *s = during ? &e->probes[i].during : &e->probes[i].slo;
        double actual = NAN;
        bool ok;
        if (slo_needs(s) & SLO_NEEDS_PROXY) {
            actual = exp_chain_actual(chains, &e->probes[i], s, a, b);
            ok = slo_holds(s, actual);
        } else {
            ok = sum.requests > 0 && slo_eval(s, &sum, &actual);
        }
        char text[64];
        all &= ok;
        json_t *p = json_pack("{s:s,s:s,s:o,s:s,s:b}", "name", e->probes[i].name, "slo", s->expr,
                              "actual", num_or_null(actual), "actual_text",
                              slo_format_value(s, actual, text, sizeof(text)), "holds", ok);
        if (!p || json_array_append_new(probes, p))
            rc = -ENOMEM;
    }
    if (!rc && chains && chains->n) {
        json_t *px = json_array();
        double from = (double)chains->run_start_ns + a * 1e6;
        double to = (double)chains->run_start_ns + b * 1e6;
        for (size_t i = 0; px && i < chains->n; i++)
            if (chains->doc[i])
                json_array_append_new(px, chain_window(chains->url[i], chains->doc[i], from, to));
        if (!px || json_object_set_new(o, "proxies", px))
            rc = -ENOMEM;
    }
    if (!rc && (json_object_set_new(o, "probes", probes) ||
                json_object_set_new(o, "holds", json_boolean(all))))
        rc = -ENOMEM;
    else
        probes = NULL;
    if (rc) {
        json_decref(probes);
        json_decref(o);
        return rc;
    }
    *held = all;
    *out = o;
    return 0;
}

int experiment_judge(const struct experiment *e, const struct exp_requests *reqs,
                     const struct exp_window *windows, double baseline_from_ms,
                     enum exp_verdict *verdict, json_t **report)
{
    return experiment_judge_chains(e, reqs, windows, baseline_from_ms, NULL, verdict, report);
}

int experiment_judge_chains(const struct experiment *e, const struct exp_requests *reqs,
                            const struct exp_window *windows, double baseline_from_ms,
                            const struct exp_chains *chains, enum exp_verdict *verdict,
                            json_t **report)
{
    struct run_stats *st = NULL;
    json_t *rep = json_object(), *phases = json_array(), *rec = json_array(), *w = NULL;
    double first = -1, last = -1;
    bool held = false, baseline_ok = false, deviated = false;
    int rc = run_stats_new(&st);
    if (rc || !rep || !phases || !rec) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < e->nphases; i++) {
        if (windows[i].from_ms < 0)
            continue;
        if (first < 0 || windows[i].from_ms < first)
            first = windows[i].from_ms;
        if (windows[i].to_ms > last)
            last = windows[i].to_ms;
    }
    double base_end = first;
    if (first < 0) /* no fault was applied: judge the whole run as a baseline */
        base_end = first = last = reqs->last_ms;
    else if (first - EXP_BASELINE_GUARD_MS > baseline_from_ms)
        base_end = first - EXP_BASELINE_GUARD_MS; /* requests in flight when it is applied */
    if ((rc = eval_window(e, reqs, chains, st, baseline_from_ms, base_end, false, &baseline_ok,
                          &w)) ||
        (rc = json_object_set_new(rep, "baseline", w) ? -ENOMEM : 0))
        goto out;
    for (size_t i = 0; i < e->nphases; i++) {
        if (windows[i].from_ms < 0)
            continue;
        if ((rc = eval_window(e, reqs, chains, st, windows[i].from_ms, windows[i].to_ms, true,
                              &held, &w)))
            goto out;
        deviated |= !held;
        if (json_object_set_new(w, "name", json_string(e->phases[i].name)) ||
            json_array_append_new(phases, w)) {
            rc = -ENOMEM;
            goto out;
        }
    }
    double win = (double)e->window_ns / 1e6, step = (double)e->step_ns / 1e6;
    double recovery = NAN;
    for (double t = last; t + win <= reqs->last_ms + 1e-6; t += step) {
        if ((rc = eval_window(e, reqs, chains, st, t, t + win, false, &held, &w)))
            goto out;
        if (json_array_append_new(rec, w)) {
            rc = -ENOMEM;
            goto out;
        }
        if (held) {
            recovery = (t - last) / 1e3;
            break;
        }
    }
    bool recovered =
        isfinite(recovery) && (!e->max_recovery_ns || recovery * 1e9 <= (double)e->max_recovery_ns);
    enum exp_verdict v = !baseline_ok   ? EXP_UNSTEADY
                         : !recovered   ? EXP_NOT_RECOVERED
                         : deviated     ? EXP_DEVIATED
                         : recovery > 0 ? EXP_RECOVERED
                                        : EXP_STEADY;
    if (json_object_set_new(rep, "verdict", json_string(exp_verdict_name(v))) ||
        json_object_set_new(rep, "steady_before", json_boolean(baseline_ok)) ||
        json_object_set_new(rep, "deviated", json_boolean(deviated)) ||
        json_object_set_new(rep, "recovered", json_boolean(recovered)) ||
        json_object_set_new(rep, "recovery_s", num_or_null(recovery)) ||
        json_object_set_new(rep, "faults_end_s", json_real(last / 1e3)) ||
        json_object_set_new(rep, "phases", phases) || json_object_set_new(rep, "recovery", rec)) {
        phases = rec = NULL;
        rc = -ENOMEM;
        goto out;
    }
    phases = rec = NULL;
    *verdict = v;
    *report = rep;
    rep = NULL;
out:
    run_stats_free(st);
    json_decref(phases);
    json_decref(rec);
    json_decref(rep);
    return rc;
}
