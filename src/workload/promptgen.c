/*
 * promptgen.c - prompt schemas, shared prefixes and chat assembly.
 */
#include "promptgen.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/chars.h"
#include "base/alloc.h"
#include "base/strdist.h"
#include "base/utf8.h"
#include "workload/corpus.h"
#include "workload/prompts.h"

#define TURN_SALT  0x243f6a8885a308d3ull
#define POOL_SALT  0xa4093822299f31d0ull
#define PAD_TRIES  16 /* count-and-adjust rounds of pad_try() */
#define PAD_STARTS 8  /* start words pad_fill() tries */
#define CUT_TRIES  64 /* rounds of cutting the retrieved context */
#define READ_CHUNK (64 * 1024)

enum seg_kind {
    SEG_TEXT = 0,
    SEG_SLOT,
    SEG_CONTEXT,
};

/* A piece of a compiled template: literal text template[off..off+len), a
 * slot's value, or the padding mark. */
struct seg {
    enum seg_kind kind;
    uint32_t slot;
    size_t off, len;
};

struct tpl {
    struct seg *segs;
    size_t nsegs;
    uint32_t *order; /* distinct slots in order of first appearance */
    size_t norder;
};

/* A weighted choice: cum[i] = w[0] + ... + w[i]; last = the last index with
 * a weight > 0 (taken when rounding puts a draw at the very top). cum NULL
 * means uniform over n. */
struct wpick {
    double *cum;
    size_t n;
    size_t last;
};

struct promptgen_icomp {
    struct tpl *tpls;
    struct wpick *slot_pick; /* one per slot */
};

/* ---------------------------------------------------------------- release */

void promptgen_slot_release(struct promptgen_slot *s)
{
    if (!s)
        return;
    ts_free(s->name);
    if (s->values)
        for (size_t i = 0; i < s->n; i++)
            ts_free(s->values[i]);
    ts_free(s->values);
    ts_free(s->weights);
    memset(s, 0, sizeof(*s));
}

static void intent_release(struct promptgen_intent *in)
{
    ts_free(in->name);
    ts_free(in->system);
    if (in->templates)
        for (size_t i = 0; i < in->ntemplates; i++)
            ts_free(in->templates[i]);
    ts_free(in->templates);
    if (in->slots)
        for (size_t i = 0; i < in->nslots; i++)
            promptgen_slot_release(&in->slots[i]);
    ts_free(in->slots);
    dist_release(&in->input);
    dist_release(&in->output);
    memset(in, 0, sizeof(*in));
}

void promptgen_cfg_release(struct promptgen_cfg *c)
{
    if (!c)
        return;
    ts_free(c->system);
    if (c->intents)
        for (size_t i = 0; i < c->nintents; i++)
            intent_release(&c->intents[i]);
    ts_free(c->intents);
    dist_release(&c->output);
    dist_release(&c->prefix_tokens);
    memset(c, 0, sizeof(*c));
}

static void icomp_release(struct promptgen_icomp *ic, const struct promptgen_intent *in)
{
    if (ic->tpls) {
        for (size_t t = 0; t < in->ntemplates; t++) {
            ts_free(ic->tpls[t].segs);
            ts_free(ic->tpls[t].order);
        }
    }
    if (ic->slot_pick)
        for (size_t s = 0; s < in->nslots; s++)
            ts_free(ic->slot_pick[s].cum);
    ts_free(ic->tpls);
    ts_free(ic->slot_pick);
}

void promptgen_release(struct promptgen *g)
{
    if (!g)
        return;
    if (g->ic)
        for (size_t i = 0; i < g->cfg.nintents; i++)
            icomp_release(&g->ic[i], &g->cfg.intents[i]);
    ts_free(g->ic);
    if (g->pool)
        for (uint32_t k = 0; k < g->cfg.prefix_pool; k++)
            ts_free(g->pool[k]);
    ts_free(g->pool);
    ts_free(g->pool_len);
    ts_free(g->pool_tokens);
    ts_free(g->intent_cum);
    ts_free(g->starts);
    promptgen_cfg_release(&g->cfg);
    memset(g, 0, sizeof(*g));
}

/* ------------------------------------------------------------- slot files */

/* Growable arrays of a slot being read. */
struct slot_acc {
    char **values;
    double *weights;
    size_t n, cap;
    bool has_weight;
};

static void slot_acc_release(struct slot_acc *a)
{
    for (size_t i = 0; i < a->n; i++)
        ts_free(a->values[i]);
    ts_free(a->values);
    ts_free(a->weights);
    memset(a, 0, sizeof(*a));
}

static int slot_acc_push(struct slot_acc *a, const char *v, size_t len, double w)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        char **nv = ts_realloc(a->values, cap * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        a->values = nv;
        double *nw = ts_realloc(a->weights, cap * sizeof(*nw));
        if (!nw)
            return -ENOMEM;
        a->weights = nw;
        a->cap = cap;
    }
    char *s = ts_strndup(v, len);
    if (!s)
        return -ENOMEM;
    a->values[a->n] = s;
    a->weights[a->n] = w;
    a->n++;
    return 0;
}

/* Parses one line (NUL-terminated at len, CR already dropped) of a slot file. */
static int slot_line(struct slot_acc *a, char *line, size_t len, const char *path, uint64_t lineno,
                     char *err, size_t errlen)
{
    size_t bad = utf8_invalid_at(line, len);
    if (bad < len) {
        ts_errf(err, errlen, "%s:%" PRIu64 ": not valid UTF-8 text (column %zu)", path, lineno,
                bad + 1);
        return TS_PARSE;
    }
    size_t i = 0;
    while (i < len && chars_is_blank(line[i]))
        i++;
    if (i == len || line[i] == '#')
        return 0;
    char *tab = NULL;
    for (size_t k = len; k > 0 && !tab; k--)
        if (line[k - 1] == '\t')
            tab = line + k - 1;
    if (!tab)
        return slot_acc_push(a, line, len, 1.0);
    char *w = tab + 1, *end = line + len;
    while (w < end && chars_is_blank(*w))
        w++;
    while (end > w && chars_is_blank(end[-1]))
        end--;
    *end = '\0';
    char *stop = NULL;
    double weight = w < end ? strtod(w, &stop) : NAN;
    if (w == end || stop != end || !isfinite(weight) || weight < 0) {
        ts_errf(err, errlen, "%s:%" PRIu64 ": bad weight '%.40s' (a number >= 0 after the tab)",
                path, lineno, w);
        return TS_PARSE;
    }
    if (tab == line) {
        ts_errf(err, errlen, "%s:%" PRIu64 ": empty value before the tab", path, lineno);
        return TS_PARSE;
    }
    a->has_weight = true;
    return slot_acc_push(a, line, (size_t)(tab - line), weight);
}

/* Ends a line of the file being read: drops a CR, checks the limits, parses. */
static int slot_end_line(struct slot_acc *a, char *line, size_t len, const char *path,
                         uint64_t lineno, char *err, size_t errlen)
{
    if (len && line[len - 1] == '\r')
        len--;
    if (len > PROMPTGEN_MAX_VALUE) {
        ts_errf(err, errlen, "%s:%" PRIu64 ": line longer than %u bytes", path, lineno,
                PROMPTGEN_MAX_VALUE);
        return TS_TOOBIG;
    }
    line[len] = '\0';
    return slot_line(a, line, len, path, lineno, err, errlen);
}

int promptgen_slot_load_file(struct promptgen_slot *s, const char *path, char *err, size_t errlen)
{
    if (!s || !path || s->values || s->weights || s->n) {
        ts_errf(err, errlen, "slot values are already set");
        return -EINVAL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        ts_errf(err, errlen, "%s: %s", path, strerror(e));
        return e ? -e : -EIO;
    }
    int rc = 0;
    struct slot_acc a = {0};
    /* room for the longest line, a CR and the NUL */
    char *line = ts_malloc(PROMPTGEN_MAX_VALUE + 2);
    char *chunk = ts_malloc(READ_CHUNK);
    if (!line || !chunk) {
        rc = -ENOMEM;
        goto out_free;
    }
    size_t len = 0;
    uint64_t lineno = 1;
    bool pending = false; /* bytes of an unfinished line */
    for (;;) {
        size_t got = fread(chunk, 1, READ_CHUNK, f);
        if (got == 0) {
            if (ferror(f)) {
                ts_errf(err, errlen, "%s: read error", path);
                rc = -EIO;
                goto out_free;
            }
            break;
        }
        for (size_t i = 0; i < got; i++) {
            if (lineno > PROMPTGEN_MAX_VALUES) {
                ts_errf(err, errlen, "%s:%" PRIu64 ": more than %u lines", path, lineno,
                        PROMPTGEN_MAX_VALUES);
                rc = TS_TOOBIG;
                goto out_free;
            }
            if (chunk[i] != '\n') {
                if (len > PROMPTGEN_MAX_VALUE) { /* one byte over: may still be a CR */
                    ts_errf(err, errlen, "%s:%" PRIu64 ": line longer than %u bytes", path, lineno,
                            PROMPTGEN_MAX_VALUE);
                    rc = TS_TOOBIG;
                    goto out_free;
                }
                line[len++] = chunk[i];
                pending = true;
                continue;
            }
            if ((rc = slot_end_line(&a, line, len, path, lineno, err, errlen)))
                goto out_free;
            len = 0;
            pending = false;
            lineno++;
        }
    }
    if (pending && (rc = slot_end_line(&a, line, len, path, lineno, err, errlen)))
        goto out_free;
    if (a.n == 0) {
        ts_errf(err, errlen, "%s: no values", path);
        rc = TS_PARSE;
        goto out_free;
    }
    if (a.has_weight) {
        double sum = 0;
        for (size_t i = 0; i < a.n; i++)
            sum += a.weights[i];
        if (!(sum > 0) || !isfinite(sum)) {
            ts_errf(err, errlen, "%s: the weights must not all be 0 (nor sum to infinity)", path);
            rc = TS_PARSE;
            goto out_free;
        }
    } else {
        ts_free(a.weights);
        a.weights = NULL;
    }
    s->values = a.values;
    s->weights = a.weights;
    s->n = a.n;
    memset(&a, 0, sizeof(a));
out_free:
    if (rc == -ENOMEM)
        ts_errf(err, errlen, "%s: out of memory", path);
    slot_acc_release(&a);
    ts_free(chunk);
    ts_free(line);
    fclose(f);
    return rc;
}

/* ------------------------------------------------------------- validation */

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
}

static bool slot_name_ok(const char *s, size_t len)
{
    if (len == 0 || len > PROMPTGEN_MAX_NAME)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!name_char(s[i]))
            return false;
    return true;
}

/* Checks a string of the schema: not NULL, at most max bytes, valid UTF-8.
 * what names it in the message ("intent 'x': template 2"). */
static int text_ok(const char *s, size_t max, const char *what, char *err, size_t errlen)
{
    if (!s) {
        ts_errf(err, errlen, "%s is missing", what);
        return -EINVAL;
    }
    size_t len = strlen(s);
    if (len > max) {
        ts_errf(err, errlen, "%s is longer than %zu bytes", what, max);
        return -EINVAL;
    }
    size_t bad = utf8_invalid_at(s, len);
    if (bad < len) {
        ts_errf(err, errlen, "%s is not valid UTF-8 (byte %zu)", what, bad);
        return -EINVAL;
    }
    return 0;
}

/* Builds the cumulative weights of n choices (w NULL: uniform, no table). */
static int wpick_init(struct wpick *p, const double *w, size_t n, const char *what, char *err,
                      size_t errlen)
{
    p->n = n;
    p->cum = NULL;
    p->last = n - 1;
    if (!w)
        return 0;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(w[i]) || w[i] < 0) {
            ts_errf(err, errlen, "%s: weight %zu must be a finite number >= 0", what, i + 1);
            return -EINVAL;
        }
        sum += w[i];
    }
    if (!(sum > 0) || !isfinite(sum)) {
        ts_errf(err, errlen, "%s: the weights must not all be 0 (nor sum to infinity)", what);
        return -EINVAL;
    }
    p->cum = ts_malloc(n * sizeof(*p->cum));
    if (!p->cum)
        return -ENOMEM;
    sum = 0;
    for (size_t i = 0; i < n; i++) {
        sum += w[i];
        p->cum[i] = sum;
        if (w[i] > 0)
            p->last = i;
    }
    return 0;
}

/* Draws one index: uniform, or the first i with cum[i] > u for u uniform in
 * [0, total). Zero-weight choices have cum[i] == cum[i - 1] and are never hit. */
static size_t wpick_draw(const struct wpick *p, struct rng *r)
{
    if (!p->cum)
        return (size_t)rng_range(r, 0, p->n - 1);
    double u = rng_uniform01(r) * p->cum[p->n - 1];
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->cum[mid] > u)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo < p->n ? lo : p->last;
}

static int slot_check(const struct promptgen_intent *in, size_t si, char *err, size_t errlen)
{
    const struct promptgen_slot *s = &in->slots[si];
    if (!s->name || !slot_name_ok(s->name, strlen(s->name))) {
        ts_errf(err, errlen,
                "intent '%s': slot %zu: a slot name is 1 to %u letters, digits, '_', '.' or '-'",
                in->name, si + 1, PROMPTGEN_MAX_NAME);
        return -EINVAL;
    }
    if (strcmp(s->name, "context") == 0) {
        ts_errf(err, errlen, "intent '%s': slot name 'context' is reserved for the builtin",
                in->name);
        return -EINVAL;
    }
    for (size_t j = 0; j < si; j++) {
        if (strcmp(in->slots[j].name, s->name) == 0) {
            ts_errf(err, errlen, "intent '%s': slot '%s' is defined twice", in->name, s->name);
            return -EINVAL;
        }
    }
    if (s->n == 0 || !s->values) {
        ts_errf(err, errlen, "intent '%s': slot '%s' has no value", in->name, s->name);
        return -EINVAL;
    }
    if (s->n > PROMPTGEN_MAX_VALUES) {
        ts_errf(err, errlen, "intent '%s': slot '%s' has more than %u values", in->name, s->name,
                PROMPTGEN_MAX_VALUES);
        return -EINVAL;
    }
    char what[PROMPTGEN_MAX_NAME * 2 + 64];
    for (size_t v = 0; v < s->n; v++) {
        snprintf(what, sizeof(what), "intent '%s': slot '%s': value %zu", in->name, s->name, v + 1);
        int rc = text_ok(s->values[v], PROMPTGEN_MAX_VALUE, what, err, errlen);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---------------------------------------------------------------- compile */

struct tpl_build {
    struct tpl *t;
    size_t cap_segs;
    bool has_context;
};

static int tpl_add(struct tpl_build *b, enum seg_kind kind, uint32_t slot, size_t off, size_t len)
{
    struct tpl *t = b->t;
    if (t->nsegs == b->cap_segs) {
        size_t cap = b->cap_segs ? b->cap_segs * 2 : 8;
        struct seg *ns = ts_realloc(t->segs, cap * sizeof(*ns));
        if (!ns)
            return -ENOMEM;
        t->segs = ns;
        b->cap_segs = cap;
    }
    t->segs[t->nsegs++] = (struct seg){.kind = kind, .slot = slot, .off = off, .len = len};
    if (kind != SEG_SLOT)
        return 0;
    for (size_t i = 0; i < t->norder; i++)
        if (t->order[i] == slot)
            return 0;
    /* at most one entry per slot: nslots entries were allocated */
    t->order[t->norder++] = slot;
    return 0;
}

/* The message for a placeholder that is no slot of the intent. */
static int unknown_name(const struct promptgen_intent *in, size_t ti, const char *name, size_t len,
                        char *err, size_t errlen)
{
    const char **cands = ts_malloc((in->nslots + 1) * sizeof(*cands));
    if (!cands)
        return -ENOMEM;
    for (size_t i = 0; i < in->nslots; i++)
        cands[i] = in->slots[i].name;
    cands[in->nslots] = "context";
    const char *near = str_closest(name, len, cands, in->nslots + 1, len < 4 ? 1 : 2);
    if (near)
        ts_errf(err, errlen,
                "intent '%s': template %zu: unknown placeholder '{{%.*s}}'; did you mean '%s'?",
                in->name, ti + 1, (int)len, name, near);
    else
        ts_errf(err, errlen,
                "intent '%s': template %zu: unknown placeholder '{{%.*s}}' (not a slot of this "
                "intent)",
                in->name, ti + 1, (int)len, name);
    ts_free(cands);
    return -EINVAL;
}

/* Splits template ti of intent in into segments. */
static int tpl_compile(const struct promptgen_intent *in, size_t ti, struct tpl *t, char *err,
                       size_t errlen)
{
    const char *s = in->templates[ti];
    struct tpl_build b = {.t = t};
    if (in->nslots) {
        t->order = ts_malloc(in->nslots * sizeof(*t->order));
        if (!t->order)
            return -ENOMEM;
    }
    size_t lit = 0;
    const char *open;
    int rc;
    while ((open = strstr(s + lit, "{{"))) {
        size_t at = (size_t)(open - s);
        const char *close = strstr(open + 2, "}}");
        if (!close) {
            ts_errf(err, errlen,
                    "intent '%s': template %zu: '{{' at byte %zu is not closed by '}}'", in->name,
                    ti + 1, at);
            return -EINVAL;
        }
        const char *name = open + 2, *end = close;
        while (name < end && chars_is_blank(*name))
            name++;
        while (end > name && chars_is_blank(end[-1]))
            end--;
        size_t len = (size_t)(end - name);
        if (!slot_name_ok(name, len)) {
            size_t inner = (size_t)(close - open - 2);
            ts_errf(
                err, errlen,
                "intent '%s': template %zu: bad placeholder '{{%.*s}}' at byte %zu: a name is 1 "
                "to %u letters, digits, '_', '.' or '-'",
                in->name, ti + 1, inner > 80 ? 80 : (int)inner, open + 2, at, PROMPTGEN_MAX_NAME);
            return -EINVAL;
        }
        if (at > lit && (rc = tpl_add(&b, SEG_TEXT, 0, lit, at - lit)))
            return rc;
        lit = (size_t)(close + 2 - s);
        if (len == 7 && memcmp(name, "context", 7) == 0) {
            if (b.has_context) {
                ts_errf(err, errlen,
                        "intent '%s': template %zu: {{context}} appears more than once", in->name,
                        ti + 1);
                return -EINVAL;
            }
            b.has_context = true;
            if ((rc = tpl_add(&b, SEG_CONTEXT, 0, 0, 0)))
                return rc;
            continue;
        }
        size_t slot = in->nslots;
        for (size_t i = 0; i < in->nslots; i++) {
            if (strlen(in->slots[i].name) == len && memcmp(in->slots[i].name, name, len) == 0) {
                slot = i;
                break;
            }
        }
        if (slot == in->nslots)
            return unknown_name(in, ti, name, len, err, errlen);
        if ((rc = tpl_add(&b, SEG_SLOT, (uint32_t)slot, 0, 0)))
            return rc;
    }
    size_t n = strlen(s);
    if (n > lit && (rc = tpl_add(&b, SEG_TEXT, 0, lit, n - lit)))
        return rc;
    return 0;
}

static int intent_compile(const struct promptgen *g, size_t ii, char *err, size_t errlen)
{
    const struct promptgen_intent *in = &g->cfg.intents[ii];
    struct promptgen_icomp *ic = &g->ic[ii];
    char what[PROMPTGEN_MAX_NAME * 2 + 64];
    int rc;
    if (in->ntemplates == 0 || !in->templates) {
        ts_errf(err, errlen, "intent '%s' has no template", in->name);
        return -EINVAL;
    }
    if (in->ntemplates > PROMPTGEN_MAX_TEMPLATES) {
        ts_errf(err, errlen, "intent '%s' has more than %u templates", in->name,
                PROMPTGEN_MAX_TEMPLATES);
        return -EINVAL;
    }
    if (in->nslots && !in->slots) {
        ts_errf(err, errlen, "intent '%s': the slots are missing", in->name);
        return -EINVAL;
    }
    if (in->nslots > PROMPTGEN_MAX_SLOTS) {
        ts_errf(err, errlen, "intent '%s' has more than %u slots", in->name, PROMPTGEN_MAX_SLOTS);
        return -EINVAL;
    }
    if (in->system) {
        snprintf(what, sizeof(what), "intent '%s': the system prompt", in->name);
        if ((rc = text_ok(in->system, PROMPTGEN_MAX_TEMPLATE, what, err, errlen)))
            return rc;
    }
    ic->slot_pick = ts_calloc(in->nslots ? in->nslots : 1, sizeof(*ic->slot_pick));
    ic->tpls = ts_calloc(in->ntemplates, sizeof(*ic->tpls));
    if (!ic->slot_pick || !ic->tpls)
        return -ENOMEM;
    for (size_t s = 0; s < in->nslots; s++) {
        if ((rc = slot_check(in, s, err, errlen)))
            return rc;
        snprintf(what, sizeof(what), "intent '%s': slot '%s'", in->name, in->slots[s].name);
        if ((rc = wpick_init(&ic->slot_pick[s], in->slots[s].weights, in->slots[s].n, what, err,
                             errlen)))
            return rc;
    }
    for (size_t t = 0; t < in->ntemplates; t++) {
        snprintf(what, sizeof(what), "intent '%s': template %zu", in->name, t + 1);
        if ((rc = text_ok(in->templates[t], PROMPTGEN_MAX_TEMPLATE, what, err, errlen)))
            return rc;
        if (in->templates[t][0] == '\0') {
            ts_errf(err, errlen, "%s is empty", what);
            return -EINVAL;
        }
        if ((rc = tpl_compile(in, t, &ic->tpls[t], err, errlen)))
            return rc;
    }
    return 0;
}

static int intents_check(struct promptgen *g, char *err, size_t errlen)
{
    const struct promptgen_cfg *c = &g->cfg;
    if (c->nintents == 0 || !c->intents) {
        ts_errf(err, errlen, "the prompt schema has no intent");
        return -EINVAL;
    }
    if (c->nintents > PROMPTGEN_MAX_INTENTS) {
        ts_errf(err, errlen, "the prompt schema has more than %u intents", PROMPTGEN_MAX_INTENTS);
        return -EINVAL;
    }
    for (size_t i = 0; i < c->nintents; i++) {
        const struct promptgen_intent *in = &c->intents[i];
        char what[64];
        snprintf(what, sizeof(what), "the name of intent %zu", i + 1);
        int rc = text_ok(in->name, PROMPTGEN_MAX_NAME, what, err, errlen);
        if (rc)
            return rc;
        if (in->name[0] == '\0') {
            ts_errf(err, errlen, "%s is empty", what);
            return -EINVAL;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(c->intents[j].name, in->name) == 0) {
                ts_errf(err, errlen, "intent '%s' is defined twice", in->name);
                return -EINVAL;
            }
        }
        if (!isfinite(in->weight) || !(in->weight > 0)) {
            ts_errf(err, errlen, "intent '%s': the weight must be a finite number > 0", in->name);
            return -EINVAL;
        }
    }
    return 0;
}

/* ----------------------------------------------------------------- corpus */

/* Finds the start of every word of the corpus: padding begins there. */
static int corpus_index(struct promptgen *g)
{
    g->corpus = corpus_text(&g->corpus_len);
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        n = 0;
        for (size_t i = 0; i < g->corpus_len; i++) {
            char c = g->corpus[i];
            char prev = i ? g->corpus[i - 1] : '\n';
            bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
            if (alpha && (prev == ' ' || prev == '\n')) {
                if (pass == 1)
                    g->starts[n] = (uint32_t)i;
                n++;
            }
        }
        if (pass == 0 && !(g->starts = ts_malloc((n ? n : 1) * sizeof(*g->starts))))
            return -ENOMEM;
    }
    g->nstarts = n;
    return 0;
}

/* Fills w[0..n) with the corpus from offset start on, read in a circle. */
static void corpus_fill(const struct promptgen *g, char *w, size_t n, size_t start)
{
    size_t len = 0, off = start;
    while (len < n) {
        size_t k = g->corpus_len - off;
        if (k > n - len)
            k = n - len;
        memcpy(w + len, g->corpus + off, k);
        len += k;
        off = (off + k) % g->corpus_len;
    }
}

/* A text being padded: base[0..at) + sep + pad + base[at..). */
struct pad_job {
    const char *base;
    size_t base_len, at;
    const char *sep;
    size_t sep_len;
};

/* Writes the candidate with pad[0..n) into c (room for it was reserved). */
static size_t pad_build(const struct pad_job *j, char *c, const char *pad, size_t n)
{
    size_t len = 0;
    memcpy(c, j->base, j->at);
    len += j->at;
    if (n) {
        memcpy(c + len, j->sep, j->sep_len);
        len += j->sep_len;
        memcpy(c + len, pad, n);
        len += n;
    }
    memcpy(c + len, j->base + j->at, j->base_len - j->at);
    len += j->base_len - j->at;
    c[len] = '\0';
    return len;
}

static uint32_t sat32(size_t v)
{
    return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* The corpus window padding is cut from, and the candidate text it is tried in. */
struct pad_buf {
    char *win, *cand;
    size_t wlen;
    size_t start; /* corpus offset the window holds, SIZE_MAX: none yet */
};

/* Makes the window at least len bytes (capped so that fixed + len fits
 * PROMPTGEN_MAX_TEXT) of corpus from start on. */
static int pad_window(const struct promptgen *g, struct pad_buf *pb, size_t fixed, size_t len,
                      size_t start)
{
    if (len > PROMPTGEN_MAX_TEXT - fixed)
        len = PROMPTGEN_MAX_TEXT - fixed;
    if (len > pb->wlen) {
        char *nw = ts_realloc(pb->win, len);
        if (!nw)
            return -ENOMEM;
        pb->win = nw;
        char *nc = ts_realloc(pb->cand, fixed + len + 1);
        if (!nc)
            return -ENOMEM;
        pb->cand = nc;
        pb->wlen = len;
        pb->start = SIZE_MAX;
    }
    if (pb->start != start) {
        corpus_fill(g, pb->win, pb->wlen, start);
        pb->start = start;
    }
    return 0;
}

/* The best fit found so far: cut bytes of padding from corpus offset start. */
struct pad_best {
    size_t tokens, cut, start;
};

/*
 * Padding from one start word: the padding is cut with tokcount_prefix(),
 * the whole is counted, and the cut adjusted by the difference, for at most
 * PAD_TRIES rounds or until a cut repeats. Records better fits (counts closer
 * to target from below) in *best.
 */
static int pad_try(const struct promptgen *g, const struct tokcount *tc, const struct pad_job *j,
                   uint32_t target, size_t base_tok, size_t start, struct pad_buf *pb,
                   struct pad_best *best)
{
    size_t fixed = j->base_len + j->sep_len;
    size_t tried[PAD_TRIES];
    size_t ntried = 0, want = target - base_tok;
    size_t grow = want * 8 + 64;
    for (;;) {
        int rc = pad_window(g, pb, fixed, grow, start);
        if (rc)
            return rc;
        size_t cut = tokcount_prefix(tc, pb->win, pb->wlen, want);
        if (cut == pb->wlen && fixed + pb->wlen < PROMPTGEN_MAX_TEXT) {
            grow = pb->wlen * 2; /* the window may hold fewer than `want` tokens */
            continue;
        }
        size_t t = tokcount_count(tc, pb->cand, pad_build(j, pb->cand, pb->win, cut));
        tried[ntried++] = want;
        if (t <= target && t > best->tokens)
            *best = (struct pad_best){t, cut, start};
        if (t == target || ntried == PAD_TRIES)
            return 0;
        size_t next = t < target          ? want + (target - t)
                      : want > t - target ? want - (t - target)
                                          : 0;
        for (size_t i = 0; i < ntried; i++)
            if (next == 0 || tried[i] == next)
                return 0;
        want = next;
    }
}

/*
 * Pads j's text with corpus text to count exactly target tokens by tc.
 * Counts of joined texts need not add up (a space joins the next word, BPE
 * merges across the seam, a blank line at the end of the padding merges with
 * a line end after it), so pad_try() adjusts the cut; when the seam makes the
 * exact count unreachable from start word si, the following words are tried,
 * up to PAD_STARTS of them. Gives the closest count below target when none is
 * exact, and the base alone when it counts target or more. Returns 0 with
 * *out (ts_free it), *out_len and *tokens; TS_TOOBIG or -ENOMEM.
 */
static int pad_fill(const struct promptgen *g, const struct tokcount *tc, const struct pad_job *j,
                    uint32_t target, size_t si, char **out, size_t *out_len, uint32_t *tokens)
{
    size_t base_tok = tokcount_count(tc, j->base, j->base_len);
    size_t fixed = j->base_len + j->sep_len;
    struct pad_buf pb = {NULL, NULL, 0, SIZE_MAX};
    struct pad_best best = {base_tok, 0, 0};
    int rc = 0;
    if (base_tok < target && fixed < PROMPTGEN_MAX_TEXT) {
        for (size_t a = 0; a < PAD_STARTS && best.tokens < target && rc == 0; a++)
            rc = pad_try(g, tc, j, target, base_tok, g->starts[(si + a) % g->nstarts], &pb, &best);
        if (rc == 0 && best.cut)
            rc = pad_window(g, &pb, fixed, pb.wlen, best.start);
        if (rc)
            goto out_free;
    }
    size_t len = best.cut ? fixed + best.cut : j->base_len;
    if (len > PROMPTGEN_MAX_TEXT) {
        rc = TS_TOOBIG;
        goto out_free;
    }
    char *text = ts_malloc(len + 1);
    if (!text) {
        rc = -ENOMEM;
        goto out_free;
    }
    *out_len = pad_build(j, text, pb.win, best.cut);
    *out = text;
    *tokens = sat32(best.tokens);
out_free:
    ts_free(pb.cand);
    ts_free(pb.win);
    return rc;
}

/* ------------------------------------------------------------------- pool */

static int pool_build(struct promptgen *g, const struct tokcount *tc, char *err, size_t errlen)
{
    uint32_t n = g->cfg.prefix_pool;
    g->pool = ts_calloc(n, sizeof(*g->pool));
    g->pool_len = ts_calloc(n, sizeof(*g->pool_len));
    g->pool_tokens = ts_calloc(n, sizeof(*g->pool_tokens));
    if (!g->pool || !g->pool_len || !g->pool_tokens)
        return -ENOMEM;
    size_t total = 0;
    for (uint32_t k = 0; k < n; k++) {
        struct rng r;
        rng_seed(&r, rng_mix64(g->cfg.seed ^ rng_mix64((uint64_t)k ^ POOL_SALT)));
        uint32_t len_k =
            (uint32_t)dist_sample_uint(&g->cfg.prefix_tokens, &r, 1, PROMPTGEN_MAX_PREFIX_TOKENS);
        size_t start = (size_t)rng_range(&r, 0, g->nstarts - 1); /* a word index */
        char header[48];
        int hl = snprintf(header, sizeof(header), "%" PRIu32 ". Reference document:\n", k);
        struct pad_job j = {header, (size_t)hl, (size_t)hl, "", 0};
        int rc =
            pad_fill(g, tc, &j, len_k, start, &g->pool[k], &g->pool_len[k], &g->pool_tokens[k]);
        if (rc == 0 && (total += g->pool_len[k]) > PROMPTGEN_MAX_POOL_BYTES)
            rc = TS_TOOBIG;
        if (rc == TS_TOOBIG)
            ts_errf(err, errlen, "the prefix pool is larger than %zu bytes",
                    PROMPTGEN_MAX_POOL_BYTES);
        if (rc)
            return rc;
    }
    return 0;
}

/* ------------------------------------------------------------------- init */

int promptgen_init(struct promptgen *g, struct promptgen_cfg *cfg, const struct tokcount *tc,
                   char *err, size_t errlen)
{
    memset(g, 0, sizeof(*g));
    g->cfg = *cfg;
    memset(cfg, 0, sizeof(*cfg));
    struct promptgen_cfg *c = &g->cfg;
    int rc = intents_check(g, err, errlen);
    if (rc)
        goto out_release;
    if (c->system &&
        (rc = text_ok(c->system, PROMPTGEN_MAX_TEMPLATE, "the system prompt", err, errlen)))
        goto out_release;
    if (!isfinite(c->prefix_ratio) || c->prefix_ratio < 0 || c->prefix_ratio > 1) {
        ts_errf(err, errlen, "the prefix ratio must be a number from 0 to 1");
        rc = -EINVAL;
        goto out_release;
    }
    if (c->prefix_pool > PROMPTGEN_MAX_PREFIX_POOL) {
        ts_errf(err, errlen, "the prefix pool holds at most %u entries", PROMPTGEN_MAX_PREFIX_POOL);
        rc = -EINVAL;
        goto out_release;
    }
    g->ic = ts_calloc(c->nintents, sizeof(*g->ic));
    g->intent_cum = ts_malloc(c->nintents * sizeof(*g->intent_cum));
    if (!g->ic || !g->intent_cum) {
        rc = -ENOMEM;
        goto out_release;
    }
    double sum = 0;
    for (size_t i = 0; i < c->nintents; i++) {
        sum += c->intents[i].weight;
        g->intent_cum[i] = sum;
    }
    if (!isfinite(sum)) {
        ts_errf(err, errlen, "the intent weights sum to infinity");
        rc = -EINVAL;
        goto out_release;
    }
    for (size_t i = 0; i < c->nintents; i++)
        if ((rc = intent_compile(g, i, err, errlen)))
            goto out_release;
    if ((rc = corpus_index(g)))
        goto out_release;
    if (c->prefix_pool && (rc = pool_build(g, tc, err, errlen)))
        goto out_release;
    return 0;
out_release:
    if (rc == -ENOMEM)
        ts_errf(err, errlen, "out of memory");
    promptgen_release(g);
    return rc;
}

/* ---------------------------------------------------------------- getters */

size_t promptgen_nintents(const struct promptgen *g)
{
    return g->cfg.nintents;
}

const char *promptgen_intent_name(const struct promptgen *g, uint32_t i)
{
    return i < g->cfg.nintents ? g->cfg.intents[i].name : NULL;
}

uint32_t promptgen_prefix_count(const struct promptgen *g)
{
    return g->cfg.prefix_pool;
}

const char *promptgen_prefix_text(const struct promptgen *g, uint32_t k, size_t *len)
{
    if (k >= g->cfg.prefix_pool || !g->pool)
        return NULL;
    if (len)
        *len = g->pool_len[k];
    return g->pool[k];
}

uint32_t promptgen_prefix_tokens(const struct promptgen *g, uint32_t k)
{
    return k < g->cfg.prefix_pool && g->pool_tokens ? g->pool_tokens[k] : 0;
}

/* ------------------------------------------------------------------- turn */

void promptgen_turn_release(struct promptgen_turn *t)
{
    if (!t)
        return;
    ts_free(t->system);
    ts_free(t->user);
    memset(t, 0, sizeof(*t));
    t->prefix = -1;
}

/* Renders template t with the chosen slot values; *ctx is where {{context}}
 * was (SIZE_MAX when the template has none). */
static int tpl_render(const struct promptgen_intent *in, const struct tpl *t, const char *src,
                      const uint32_t *chosen, struct buf *b, size_t *ctx)
{
    *ctx = SIZE_MAX;
    for (size_t i = 0; i < t->nsegs; i++) {
        const struct seg *s = &t->segs[i];
        int rc = 0;
        if (s->kind == SEG_TEXT)
            rc = buf_append(b, src + s->off, s->len);
        else if (s->kind == SEG_SLOT)
            rc = buf_append_str(b, in->slots[s->slot].values[chosen[s->slot]]);
        else
            *ctx = b->len;
        if (rc)
            return rc;
    }
    return 0;
}

/* The system text: prefix entry, "\n\n", system prompt; either may be absent. */
static int turn_system(const struct promptgen *g, const char *sys, struct promptgen_turn *out)
{
    const char *pre = out->prefix >= 0 ? g->pool[out->prefix] : NULL;
    size_t pl = pre ? g->pool_len[out->prefix] : 0, sl = sys ? strlen(sys) : 0;
    if (!pre && !sys)
        return 0;
    size_t len = pl + sl + (pre && sys ? 2 : 0);
    char *s = ts_malloc(len + 1);
    if (!s)
        return -ENOMEM;
    size_t o = 0;
    if (pre) {
        memcpy(s, pre, pl);
        o = pl;
    }
    if (pre && sys) {
        memcpy(s + o, "\n\n", 2);
        o += 2;
    }
    if (sys)
        memcpy(s + o, sys, sl);
    s[len] = '\0';
    out->system = s;
    out->system_len = len;
    return 0;
}

int promptgen_turn(const struct promptgen *g, const struct tokcount *tc, uint64_t key,
                   struct promptgen_turn *out)
{
    memset(out, 0, sizeof(*out));
    out->prefix = -1;
    struct rng r;
    rng_seed(&r, rng_mix64(g->cfg.seed ^ rng_mix64(key + TURN_SALT)));

    struct wpick ip = {g->intent_cum, g->cfg.nintents, g->cfg.nintents - 1};
    size_t ii = wpick_draw(&ip, &r);
    const struct promptgen_intent *in = &g->cfg.intents[ii];
    const struct promptgen_icomp *ic = &g->ic[ii];
    size_t ti = (size_t)rng_range(&r, 0, in->ntemplates - 1);
    const struct tpl *t = &ic->tpls[ti];
    out->intent = (uint32_t)ii;
    out->template_index = (uint32_t)ti;

    int rc = 0;
    struct buf b;
    buf_init(&b, PROMPTGEN_MAX_TEXT);
    uint32_t *chosen = NULL;
    if (in->nslots && !(chosen = ts_calloc(in->nslots, sizeof(*chosen)))) {
        rc = -ENOMEM;
        goto out_fail;
    }
    for (size_t i = 0; i < t->norder; i++)
        chosen[t->order[i]] = (uint32_t)wpick_draw(&ic->slot_pick[t->order[i]], &r);
    size_t ctx;
    if ((rc = tpl_render(in, t, in->templates[ti], chosen, &b, &ctx)))
        goto out_fail;
    if (in->has_input) {
        uint32_t n = (uint32_t)dist_sample_uint(&in->input, &r, 1, PROMPTGEN_MAX_INPUT_TOKENS);
        size_t start = (size_t)rng_range(&r, 0, g->nstarts - 1); /* a word index */
        struct pad_job j = {b.data ? b.data : "", b.len, ctx == SIZE_MAX ? b.len : ctx,
                            ctx == SIZE_MAX ? "\n\n" : "", ctx == SIZE_MAX ? 2 : 0};
        if ((rc = pad_fill(g, tc, &j, n, start, &out->user, &out->user_len, &out->user_tokens)))
            goto out_fail;
    } else {
        out->user = buf_take(&b, &out->user_len);
        if (!out->user && !(out->user = ts_strdup(""))) {
            rc = -ENOMEM;
            goto out_fail;
        }
        out->user_tokens = sat32(tokcount_count(tc, out->user, out->user_len));
    }
    const struct dist *od = in->has_output ? &in->output : &g->cfg.output;
    out->output_tokens = (uint32_t)dist_sample_uint(od, &r, 1, PROMPTS_MAX_OUTPUT_TOKENS);
    if (g->cfg.prefix_pool && rng_uniform01(&r) < g->cfg.prefix_ratio)
        out->prefix = (int32_t)rng_range(&r, 0, g->cfg.prefix_pool - 1);
    if ((rc = turn_system(g, in->system ? in->system : g->cfg.system, out)))
        goto out_fail;
    ts_free(chosen);
    buf_release(&b);
    return 0;
out_fail:
    ts_free(chosen);
    buf_release(&b);
    promptgen_turn_release(out);
    return rc;
}

/* --------------------------------------------------------- chat assembly */

struct dump_ctx {
    struct buf *b;
    int rc;
};

static int dump_cb(const char *s, size_t n, void *data)
{
    struct dump_ctx *d = data;
    int rc = buf_append(d->b, s, n);
    if (rc) {
        d->rc = rc;
        return -1;
    }
    return 0;
}

/* Appends s[0..n) as a JSON string, escaped by jansson. -EINVAL when s is
 * not valid UTF-8. */
static int json_append_string(struct buf *b, const char *s, size_t n)
{
    json_t *j = json_stringn_nocheck(s ? s : "", s ? n : 0);
    if (!j)
        return -ENOMEM;
    struct dump_ctx d = {b, 0};
    int r = json_dump_callback(j, dump_cb, &d, JSON_ENCODE_ANY);
    json_decref(j);
    if (r)
        return d.rc ? d.rc : -EINVAL;
    return 0;
}

static int msg_append(struct buf *b, bool first, const char *role, const char *content, size_t n)
{
    int rc = buf_append_str(b, first ? "{\"role\":" : ",{\"role\":");
    if (rc == 0)
        rc = json_append_string(b, role, strlen(role));
    if (rc == 0)
        rc = buf_append_str(b, ",\"content\":");
    if (rc == 0)
        rc = json_append_string(b, content, n);
    if (rc == 0)
        rc = buf_append_char(b, '}');
    return rc;
}

/* Tokens of one message rendered with the template (see struct chat_template). */
static uint64_t tmpl_cost(const struct tokcount *tc, const char *t, const char *role, const char *s,
                          size_t n)
{
    struct buf b;
    buf_init(&b, (size_t)1 << 31);
    int rc = 0;
    while (*t && !rc) {
        const char *r = strstr(t, "{role}"), *c = strstr(t, "{content}");
        const char *at = r && (!c || r < c) ? r : c;
        if (!at) {
            rc = buf_append_str(&b, t);
            break;
        }
        rc = buf_append(&b, t, (size_t)(at - t));
        if (!rc)
            rc = at == r ? buf_append_str(&b, role) : buf_append(&b, s, n);
        t = at + (at == r ? 6 : 9);
    }
    /* out of memory: the content alone, a lower bound */
    uint64_t cost = rc ? tokcount_count(tc, s, n) : tokcount_count(tc, b.data ? b.data : "", b.len);
    buf_release(&b);
    return cost;
}

static uint64_t msg_cost(const struct tokcount *tc, const struct chat_template *tmpl,
                         const char *role, const char *s, size_t n)
{
    if (tmpl && tmpl->message)
        return tmpl_cost(tc, tmpl->message, role, s, n);
    return CHAT_TOKENS_PER_MESSAGE + tokcount_count(tc, role, strlen(role)) +
           tokcount_count(tc, s, n);
}

/* The user content with keep bytes of the context: "Context:\n" C "\n\n" U,
 * or just U when keep is 0. */
static int user_build(struct buf *u, const char *ctx, size_t keep, const char *user, size_t ulen)
{
    buf_reset(u);
    int rc = 0;
    if (keep) {
        rc = buf_append_str(u, "Context:\n");
        if (rc == 0)
            rc = buf_append(u, ctx, keep);
        if (rc == 0)
            rc = buf_append(u, "\n\n", 2);
    }
    if (rc == 0)
        rc = buf_append(u, user, ulen);
    return rc;
}

int chat_assemble(const struct tokcount *tc, const char *system, size_t system_len,
                  const struct chat_msg *history, size_t nhistory, const char *context,
                  size_t context_len, const char *user, size_t user_len,
                  const struct assemble_cfg *cfg, struct buf *out, struct assemble_result *res)
{
    memset(res, 0, sizeof(*res));
    if ((!user && user_len) || (nhistory && !history))
        return -EINVAL;
    for (size_t i = 0; i < nhistory; i++)
        if (!history[i].role || (!history[i].content && history[i].len))
            return -EINVAL;
    if (!context)
        context_len = 0;
    size_t orig = out->len;
    int rc = 0;
    uint64_t *cost = NULL;
    struct buf u;
    buf_init(&u, out->max);
    if (nhistory && !(cost = ts_malloc(nhistory * sizeof(*cost)))) {
        rc = -ENOMEM;
        goto out_fail;
    }
    const struct chat_template *tmpl = cfg ? cfg->tmpl : NULL;
    uint64_t total = CHAT_TOKENS_PER_REPLY;
    if (tmpl && tmpl->message) {
        total = tmpl->reply ? tokcount_count(tc, tmpl->reply, strlen(tmpl->reply)) : 0;
        if (tmpl->bos)
            total += tokcount_count(tc, tmpl->bos, strlen(tmpl->bos));
    }
    if (system)
        total += msg_cost(tc, tmpl, "system", system, system_len);
    for (size_t i = 0; i < nhistory; i++) {
        cost[i] = msg_cost(tc, tmpl, history[i].role, history[i].content, history[i].len);
        total += cost[i];
    }
    size_t keep = context_len;
    if ((rc = user_build(&u, context, keep, user ? user : "", user_len)))
        goto out_fail;
    uint64_t ucost = msg_cost(tc, tmpl, "user", u.data ? u.data : "", u.len);
    total += ucost;

    bool limited = cfg && cfg->context_tokens;
    uint64_t budget = 0;
    if (limited) {
        uint64_t spend = (uint64_t)cfg->margin + cfg->output_tokens;
        budget = cfg->context_tokens > spend ? cfg->context_tokens - spend : 0;
    }
    size_t first = 0;
    while (limited && total > budget && first < nhistory) {
        size_t end = first + 1;
        while (end < nhistory && strcmp(history[end].role, "user") != 0)
            end++;
        for (size_t i = first; i < end; i++)
            total -= cost[i];
        res->dropped_messages += (uint32_t)(end - first);
        first = end;
    }
    if (limited && total > budget && context_len) {
        size_t ctx_tok = tokcount_count(tc, context, context_len);
        size_t want = ctx_tok;
        for (int round = 0; round < CUT_TRIES && total > budget && keep; round++) {
            uint64_t excess = total - budget;
            want = round == CUT_TRIES - 1 || excess >= want ? 0 : want - (size_t)excess;
            keep = want ? tokcount_prefix(tc, context, context_len, want) : 0;
            if ((rc = user_build(&u, context, keep, user ? user : "", user_len)))
                goto out_fail;
            total -= ucost;
            ucost = msg_cost(tc, tmpl, "user", u.data ? u.data : "", u.len);
            total += ucost;
        }
        size_t kept = tokcount_count(tc, context, keep);
        res->context_cut_tokens = sat32(ctx_tok > kept ? ctx_tok - kept : 0);
    }
    res->over = limited && total > budget;
    res->prompt_tokens = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;

    if ((rc = buf_append_char(out, '[')))
        goto out_fail;
    bool first_msg = true;
    if (system) {
        if ((rc = msg_append(out, true, "system", system, system_len)))
            goto out_fail;
        first_msg = false;
    }
    for (size_t i = first; i < nhistory; i++) {
        if ((rc = msg_append(out, first_msg, history[i].role, history[i].content, history[i].len)))
            goto out_fail;
        first_msg = false;
    }
    if ((rc = msg_append(out, first_msg, "user", u.data ? u.data : "", u.len)))
        goto out_fail;
    if ((rc = buf_append_char(out, ']')))
        goto out_fail;
    ts_free(cost);
    buf_release(&u);
    return 0;
out_fail:
    buf_truncate(out, orig);
    memset(res, 0, sizeof(*res));
    ts_free(cost);
    buf_release(&u);
    return rc;
}
