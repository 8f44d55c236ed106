/*
 * flow_check.c - checking a flow definition (flow_def_check, see flow.h):
 * its steps, fallbacks and dependency cycles, its captures, and the
 * placeholders of every step's templates against what the step can see.
 */
#include "scenario/flow.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/strdist.h"
#include "llm/jsonptr.h"
#include "scenario/flow_int.h"

/* ---- definitions ---- */

/* Appends to m[0..n) at k; returns the new end (at most n - 1). */
__attribute__((format(printf, 4, 5))) static size_t catf(char *m, size_t n, size_t k,
                                                         const char *fmt, ...)
{
    if (k + 1 >= n)
        return k;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(m + k, n - k, fmt, ap);
    va_end(ap);
    if (w < 0)
        return k;
    return k + (size_t)w >= n ? n - 1 : k + (size_t)w;
}

/* RFC 9110 token characters. */
static bool tchar(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool token_ok(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!tchar(s[i]))
            return false;
    return true;
}

static bool header_ok(const char *h)
{
    const char *colon = h ? strchr(h, ':') : NULL;
    return colon && token_ok(h, (size_t)(colon - h));
}

/* The first step of the fallback chain i belongs to. */
static uint32_t principal(const struct flow_dinfo *di, size_t n, uint32_t i)
{
    for (size_t hops = 0; hops < n && di->stands_for[i] >= 0; hops++)
        i = (uint32_t)di->stands_for[i];
    return i;
}

struct cycle {
    const struct flow_def *d;
    uint8_t color[FLOW_STEPS_MAX]; /* 0 new, 1 on the stack, 2 done */
    uint32_t stack[FLOW_STEPS_MAX];
    size_t sp;
    uint32_t back; /* the step the cycle closes on */
};

static bool cycle_dfs(struct cycle *c, uint32_t i)
{
    const struct flow_step_def *st = &c->d->steps[i];
    c->color[i] = 1;
    c->stack[c->sp++] = i;
    for (size_t k = 0; k < st->ndeps; k++) {
        uint32_t j = st->deps[k];
        if (c->color[j] == 1) {
            c->back = j;
            return true;
        }
        if (c->color[j] == 0 && cycle_dfs(c, j))
            return true;
    }
    c->color[i] = 2;
    c->sp--;
    return false;
}

static int check_cycles(const struct flow_def *d, char *err, size_t errlen)
{
    struct cycle c = {.d = d};
    for (uint32_t i = 0; i < d->n; i++) {
        if (c.color[i] || !cycle_dfs(&c, i))
            continue;
        char m[512];
        size_t k = catf(m, sizeof(m), 0, "dependency cycle:");
        size_t from = 0;
        while (c.stack[from] != c.back)
            from++;
        for (size_t s = from; s < c.sp; s++)
            k = catf(m, sizeof(m), k, " '%s' ->", d->steps[c.stack[s]].name);
        catf(m, sizeof(m), k, " '%s'", d->steps[c.back].name);
        ts_errf(err, errlen, "%s", m);
        return -EINVAL;
    }
    return 0;
}

static uint64_t ancestors(const struct flow_def *d, struct flow_dinfo *di, uint64_t *done,
                          uint32_t i)
{
    if (*done & flow_bit(i))
        return di->anc[i];
    uint64_t a = 0;
    const struct flow_step_def *st = &d->steps[i];
    for (size_t k = 0; k < st->ndeps; k++)
        a |= flow_bit(st->deps[k]) | ancestors(d, di, done, st->deps[k]);
    di->anc[i] = a;
    *done |= flow_bit(i);
    return a;
}

/* Names, kinds, URLs, methods, headers and indexes of every step. */
static int check_steps(const struct flow_def *d, char *err, size_t errlen)
{
    for (size_t i = 0; i < d->n; i++) {
        const struct flow_step_def *st = &d->steps[i];
        const char *nm = st->name;
        if (!nm || !nm[0]) {
            ts_errf(err, errlen, "step %zu has no name", i + 1);
            return -EINVAL;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(d->steps[j].name, nm) == 0) {
                ts_errf(err, errlen, "two steps are named '%s'", nm);
                return -EINVAL;
            }
        }
        if ((unsigned)st->kind > FLOW_STEP_HTTP) {
            ts_errf(err, errlen, "step '%s': unknown kind %d", nm, (int)st->kind);
            return -EINVAL;
        }
        if (st->kind == FLOW_STEP_HTTP && !st->url) {
            ts_errf(err, errlen, "step '%s': an http step needs a url", nm);
            return -EINVAL;
        }
        if (st->method &&
            (st->kind != FLOW_STEP_HTTP || !token_ok(st->method, strlen(st->method)))) {
            ts_errf(err, errlen, "step '%s': bad method '%s' (only http steps have one)", nm,
                    st->method);
            return -EINVAL;
        }
        for (size_t k = 0; k < st->nheaders; k++) {
            if (!st->headers || !header_ok(st->headers[k])) {
                ts_errf(err, errlen, "step '%s': header %zu is not 'Name: value'", nm, k + 1);
                return -EINVAL;
            }
        }
        if (st->ndeps && !st->deps) {
            ts_errf(err, errlen, "step '%s': no dependency array", nm);
            return -EINVAL;
        }
        for (size_t k = 0; k < st->ndeps; k++) {
            if (st->deps[k] >= d->n) {
                ts_errf(err, errlen,
                        "step '%s': depends on step %" PRIu32 ", out of range (%zu steps)", nm,
                        st->deps[k], d->n);
                return -EINVAL;
            }
        }
        if (st->fallback < -1 || (st->fallback >= 0 && (size_t)st->fallback >= d->n)) {
            ts_errf(err, errlen, "step '%s': fallback %" PRId32 " is out of range (%zu steps)", nm,
                    st->fallback, d->n);
            return -EINVAL;
        }
        if (st->ncaptures && !st->captures) {
            ts_errf(err, errlen, "step '%s': no capture array", nm);
            return -EINVAL;
        }
    }
    return 0;
}

/* Fallback rules (see flow_def_check); fills di->stands_for. */
static int check_fallbacks(const struct flow_def *d, struct flow_dinfo *di, char *err,
                           size_t errlen)
{
    for (size_t i = 0; i < d->n; i++) {
        const struct flow_step_def *st = &d->steps[i];
        if (st->fallback < 0)
            continue;
        uint32_t f = (uint32_t)st->fallback;
        const char *fn = d->steps[f].name;
        if (f == i) {
            ts_errf(err, errlen, "step '%s' is its own fallback", st->name);
            return -EINVAL;
        }
        if (!d->steps[f].fallback_only) {
            ts_errf(err, errlen, "step '%s': its fallback '%s' must be fallback_only", st->name,
                    fn);
            return -EINVAL;
        }
        if (di->stands_for[f] >= 0) {
            ts_errf(err, errlen, "step '%s': '%s' is already the fallback of '%s'", st->name, fn,
                    d->steps[di->stands_for[f]].name);
            return -EINVAL;
        }
        di->stands_for[f] = (int32_t)i;
    }
    for (size_t i = 0; i < d->n; i++) {
        const struct flow_step_def *st = &d->steps[i];
        for (size_t k = 0; k < st->ndeps; k++) {
            const struct flow_step_def *dep = &d->steps[st->deps[k]];
            if (dep->fallback_only) {
                ts_errf(err, errlen,
                        "step '%s' depends on '%s', which is fallback_only (depend on the step "
                        "it stands in for)",
                        st->name, dep->name);
                return -EINVAL;
            }
        }
    }
    return 0;
}

/* Every fallback_only step is reached from a step that runs by itself, and
 * depends only on what the step it replaces depends on. */
static int check_fallback_use(const struct flow_def *d, const struct flow_dinfo *di, char *err,
                              size_t errlen)
{
    uint64_t reached = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (d->steps[i].fallback_only)
            continue;
        int32_t f = d->steps[i].fallback;
        for (size_t hops = 0; f >= 0 && hops < d->n; hops++) {
            reached |= flow_bit((uint32_t)f);
            f = d->steps[f].fallback;
        }
    }
    for (size_t i = 0; i < d->n; i++) {
        const struct flow_step_def *st = &d->steps[i];
        if (st->fallback_only && !(reached & flow_bit((uint32_t)i))) {
            ts_errf(err, errlen,
                    di->stands_for[i] < 0
                        ? "step '%s' is fallback_only but no step falls back to it"
                        : "step '%s' is fallback_only and in a loop of fallbacks",
                    st->name);
            return -EINVAL;
        }
        if (st->fallback < 0)
            continue;
        const struct flow_step_def *fb = &d->steps[st->fallback];
        for (size_t k = 0; k < fb->ndeps; k++) {
            if (!(di->anc[i] & flow_bit(fb->deps[k]))) {
                ts_errf(err, errlen,
                        "step '%s': its fallback '%s' depends on '%s', which '%s' does not "
                        "depend on",
                        st->name, fb->name, d->steps[fb->deps[k]].name, st->name);
                return -EINVAL;
            }
        }
    }
    return 0;
}

/* Everything but variables and templates; fills *di. */
int flow_check_structure(const struct flow_def *d, struct flow_dinfo *di, char *err, size_t errlen)
{
    int rc;
    if (!d || !d->steps || d->n == 0) {
        ts_errf(err, errlen, "a flow needs at least one step");
        return -EINVAL;
    }
    if (d->n > FLOW_STEPS_MAX) {
        ts_errf(err, errlen, "a flow has at most %d steps (this one has %zu)", FLOW_STEPS_MAX,
                d->n);
        return -EINVAL;
    }
    memset(di, 0, sizeof(*di));
    for (size_t i = 0; i < FLOW_STEPS_MAX; i++)
        di->stands_for[i] = -1;
    if ((rc = check_steps(d, err, errlen)) || (rc = check_fallbacks(d, di, err, errlen)) ||
        (rc = check_cycles(d, err, errlen)))
        return rc;
    uint64_t done = 0;
    for (uint32_t i = 0; i < d->n; i++)
        ancestors(d, di, &done, i);
    return check_fallback_use(d, di, err, errlen);
}

static bool in_list(const char *const *list, size_t n, const char *name, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] && flow_name_eq(list[i], name, len))
            return true;
    return false;
}

static bool step_captures(const struct flow_step_def *st, const char *name, size_t len)
{
    for (size_t k = 0; k < st->ncaptures; k++)
        if (flow_name_eq(st->captures[k].var, name, len))
            return true;
    return false;
}

static int check_captures(const struct flow_def *d, const struct flow_dinfo *di,
                          const char *const *vars, size_t nvars, char *err, size_t errlen)
{
    size_t total = nvars;
    for (size_t i = 0; i < d->n; i++) {
        const struct flow_step_def *st = &d->steps[i];
        for (size_t k = 0; k < st->ncaptures; k++) {
            const struct flow_capture *cap = &st->captures[k];
            const char *v = cap->var;
            size_t vl = v ? strlen(v) : 0;
            if (!flow_var_name_valid(v, vl)) {
                ts_errf(err, errlen, "step '%s': capture name '%s' is not a valid variable name",
                        st->name, v ? v : "");
                return -EINVAL;
            }
            if (!cap->pointer || !jsonptr_valid(cap->pointer, strlen(cap->pointer))) {
                ts_errf(err, errlen, "step '%s': capture {{%s}}: bad JSON pointer '%s'", st->name,
                        v, cap->pointer ? cap->pointer : "");
                return -EINVAL;
            }
            for (size_t kk = 0; kk < k; kk++) {
                if (strcmp(st->captures[kk].var, v) == 0) {
                    ts_errf(err, errlen, "step '%s': {{%s}} is captured twice", st->name, v);
                    return -EINVAL;
                }
            }
            if (in_list(vars, nvars, v, vl)) {
                ts_errf(err, errlen, "step '%s': capture {{%s}} clashes with a given variable",
                        st->name, v);
                return -EINVAL;
            }
            bool first = true;
            for (size_t j = 0; j < i; j++) {
                if (!step_captures(&d->steps[j], v, vl))
                    continue;
                first = false;
                if (principal(di, d->n, (uint32_t)j) != principal(di, d->n, (uint32_t)i)) {
                    ts_errf(err, errlen, "step '%s': {{%s}} is also captured by '%s'", st->name, v,
                            d->steps[j].name);
                    return -EINVAL;
                }
                break;
            }
            total += first;
        }
    }
    if (total > FLOW_VARS_MAX) {
        ts_errf(err, errlen, "the flow uses %zu variables (at most %d)", total, FLOW_VARS_MAX);
        return -EINVAL;
    }
    return 0;
}

struct def_check {
    struct flow_tcheck t; /* first */
    const struct flow_def *d;
    const struct flow_dinfo *di;
    const char *const *vars;
    size_t nvars;
    uint32_t step;
};

static void consider(const char *cand, const char *name, size_t len, const char **best,
                     size_t *best_d)
{
    if (!cand)
        return;
    size_t dist = str_edit_distance(name, len, cand, strlen(cand));
    if (dist < *best_d) {
        *best_d = dist;
        *best = cand;
    }
}

static int unknown_in_def(struct def_check *c, const char *name, size_t len)
{
    const char *best = NULL;
    size_t best_d = FLOW_SUGGEST_EDITS + 1;
    for (size_t i = 0; i < c->nvars; i++)
        consider(c->vars[i], name, len, &best, &best_d);
    for (size_t i = 0; i < c->d->n; i++)
        for (size_t k = 0; k < c->d->steps[i].ncaptures; k++)
            consider(c->d->steps[i].captures[k].var, name, len, &best, &best_d);
    if (best)
        snprintf(c->t.msg, sizeof(c->t.msg), "unknown variable {{%.*s}}, did you mean {{%s}}?",
                 (int)len, name, best);
    else
        flow_unknown_var(c->t.msg, sizeof(c->t.msg), name, len);
    return -EINVAL;
}

static int def_lookup(struct flow_tcheck *t, const char *name, size_t len)
{
    struct def_check *c = (struct def_check *)t;
    const struct flow_def *d = c->d;
    if (in_list(c->vars, c->nvars, name, len))
        return 0;
    size_t cap = 0;
    while (cap < d->n && !step_captures(&d->steps[cap], name, len))
        cap++;
    if (cap == d->n)
        return unknown_in_def(c, name, len);
    const char *cn = d->steps[cap].name;
    uint32_t p = principal(c->di, d->n, (uint32_t)cap);
    if (!(c->di->anc[c->step] & flow_bit(p))) {
        if (cap == c->step)
            snprintf(t->msg, sizeof(t->msg), "{{%.*s}} is captured by the step itself", (int)len,
                     name);
        else if (cap == p)
            snprintf(t->msg, sizeof(t->msg),
                     "{{%.*s}} is captured by '%s' which it does not depend on", (int)len, name,
                     cn);
        else
            snprintf(t->msg, sizeof(t->msg),
                     "{{%.*s}} is captured by '%s', a fallback of '%s', which it does not depend "
                     "on",
                     (int)len, name, cn, d->steps[p].name);
        return -EINVAL;
    }
    for (int32_t m = (int32_t)p, hops = 0; m >= 0 && (size_t)hops < d->n;
         m = d->steps[m].fallback, hops++) {
        if (!step_captures(&d->steps[m], name, len)) {
            snprintf(t->msg, sizeof(t->msg),
                     "{{%.*s}} is captured by '%s' but not by '%s', which may run in its place",
                     (int)len, name, cn, d->steps[m].name);
            return -EINVAL;
        }
    }
    return 0;
}

static int check_step_templates(struct def_check *c, char *err, size_t errlen)
{
    const struct flow_step_def *st = &c->d->steps[c->step];
    char where[32] = "url";
    int rc = 0;
    if (st->url)
        rc = flow_check_str(&c->t, st->url, strlen(st->url));
    for (size_t k = 0; k < st->nheaders && !rc; k++) {
        snprintf(where, sizeof(where), "header %zu", k + 1);
        rc = flow_check_str(&c->t, st->headers[k], strlen(st->headers[k]));
    }
    if (!rc && st->body) {
        snprintf(where, sizeof(where), "body");
        rc = flow_check_tree(&c->t, st->body, 0);
    }
    if (rc)
        ts_errf(err, errlen, "step '%s': %s (in %s%s%s)", st->name, c->t.msg, where,
                c->t.path.len ? " " : "", c->t.path.s);
    return rc;
}

int flow_def_check(const struct flow_def *d, const char *const *vars, size_t nvars, char *err,
                   size_t errlen)
{
    struct flow_dinfo di;
    int rc = flow_check_structure(d, &di, err, errlen);
    if (rc)
        return rc;
    if (nvars && !vars) {
        ts_errf(err, errlen, "no variable names");
        return -EINVAL;
    }
    if ((rc = check_captures(d, &di, vars, nvars, err, errlen)))
        return rc;
    for (uint32_t i = 0; i < d->n; i++) {
        struct def_check c = {
            .t.lookup = def_lookup, .d = d, .di = &di, .vars = vars, .nvars = nvars, .step = i};
        if ((rc = check_step_templates(&c, err, errlen)))
            return rc == TS_TOOBIG ? -EINVAL : rc;
    }
    return 0;
}

void flow_def_release(struct flow_def *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n && d->steps; i++) {
        struct flow_step_def *st = &d->steps[i];
        ts_free(st->name);
        ts_free(st->role);
        ts_free(st->deps);
        ts_free(st->method);
        ts_free(st->url);
        ts_free(st->retrieval_docs);
        for (size_t k = 0; k < st->nheaders && st->headers; k++)
            ts_free(st->headers[k]);
        ts_free(st->headers);
        json_decref(st->body);
        for (size_t k = 0; k < st->ncaptures && st->captures; k++) {
            ts_free(st->captures[k].var);
            ts_free(st->captures[k].pointer);
        }
        ts_free(st->captures);
    }
    ts_free(d->steps);
    d->steps = NULL;
    d->n = 0;
}
