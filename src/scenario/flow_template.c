/*
 * flow_template.c - flow variables and {{var}} templates (see flow.h):
 * names, compact JSON, placeholders, checking and rendering templates, a
 * step's captures and its rendered request.
 *
 * Rendering comes in two shapes that must agree: render_tree() builds a new
 * jansson value (flow_template_render), render_text() writes the compact
 * JSON of that value straight into a capped buffer without building it
 * (flow_step_render's bodies), appending the variables' cached JSON.
 */
#include "scenario/flow.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/strdist.h"
#include "llm/jsonptr.h"
#include "llm/openai_encode.h"
#include "scenario/flow_int.h"

#define LIT(s)     s, sizeof(s) - 1
#define DUMP_DEPTH (FLOW_VAR_DEPTH_MAX + FLOW_TMPL_DEPTH_MAX)

/* ---- names ---- */

static bool name_start(char c)
{
    return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static bool name_char(char c)
{
    return name_start(c) || (c >= '0' && c <= '9') || c == '.';
}

bool flow_var_name_valid(const char *s, size_t len)
{
    if (!s || len == 0 || len > FLOW_VAR_NAME_MAX || !name_start(s[0]))
        return false;
    for (size_t i = 1; i < len; i++)
        if (!name_char(s[i]))
            return false;
    return true;
}

bool flow_name_eq(const char *a, const char *b, size_t blen)
{
    return strlen(a) == blen && memcmp(a, b, blen) == 0;
}

/* Copies up to max bytes of s[0..n) into dst (for messages): control bytes
 * become '?', a cut is marked with "...". */
static void snip(char *dst, size_t dstn, const char *s, size_t n, size_t max)
{
    size_t k = 0;
    for (size_t i = 0; i < n && i < max && k + 1 < dstn; i++)
        dst[k++] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    if (n > max && k + 4 < dstn) {
        memcpy(dst + k, "...", 3);
        k += 3;
    }
    dst[k] = '\0';
}

/* ---- compact JSON ---- */

/* The shortest text that reads back as v, looking like a real. */
static int dump_real(struct buf *b, double v)
{
    char tmp[40];
    if (!isfinite(v))
        return buf_append(b, LIT("null"));
    if (v == floor(v) && fabs(v) < 1e16) {
        snprintf(tmp, sizeof(tmp), "%.1f", v);
        return buf_append_str(b, tmp);
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*g", prec, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    if (!strpbrk(tmp, ".eE")) {
        size_t l = strlen(tmp);
        memcpy(tmp + l, ".0", 3);
    }
    return buf_append_str(b, tmp);
}

static int dump_string(struct buf *b, const char *s, size_t n)
{
    int rc;
    if ((rc = buf_append_char(b, '"')) || (rc = openai_json_escape(b, s, n)))
        return rc;
    return buf_append_char(b, '"');
}

static int dump(struct buf *b, const json_t *v, unsigned depth_left)
{
    int rc = 0;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        if (depth_left == 0)
            return TS_TOOBIG;
        json_t *o = (json_t *)v;
        if ((rc = buf_append_char(b, '{')))
            return rc;
        for (void *it = json_object_iter(o); it; it = json_object_iter_next(o, it)) {
            if (it != json_object_iter(o) && (rc = buf_append_char(b, ',')))
                return rc;
            if ((rc = dump_string(b, json_object_iter_key(it), json_object_iter_key_len(it))) ||
                (rc = buf_append_char(b, ':')) ||
                (rc = dump(b, json_object_iter_value(it), depth_left - 1)))
                return rc;
        }
        return buf_append_char(b, '}');
    }
    case JSON_ARRAY:
        if (depth_left == 0)
            return TS_TOOBIG;
        if ((rc = buf_append_char(b, '[')))
            return rc;
        for (size_t i = 0; i < json_array_size(v); i++) {
            if ((i && (rc = buf_append_char(b, ','))) ||
                (rc = dump(b, json_array_get(v, i), depth_left - 1)))
                return rc;
        }
        return buf_append_char(b, ']');
    case JSON_STRING:
        return dump_string(b, json_string_value(v), json_string_length(v));
    case JSON_INTEGER:
        return buf_appendf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    case JSON_REAL:
        return dump_real(b, json_real_value(v));
    case JSON_TRUE:
        return buf_append(b, LIT("true"));
    case JSON_FALSE:
        return buf_append(b, LIT("false"));
    case JSON_NULL:
        return buf_append(b, LIT("null"));
    }
    return -EINVAL;
}

int flow_json_dump(struct buf *out, const json_t *v)
{
    if (!v)
        return -EINVAL;
    return dump(out, v, DUMP_DEPTH);
}

/* ---- variables ---- */

void flow_vars_init(struct flow_vars *vars)
{
    memset(vars, 0, sizeof(*vars));
}

static void var_drop(struct flow_var *v)
{
    ts_free(v->name);
    ts_free(v->json);
    json_decref(v->value);
    memset(v, 0, sizeof(*v));
}

void flow_vars_release(struct flow_vars *vars)
{
    for (size_t i = 0; i < vars->n; i++)
        var_drop(&vars->v[i]);
    vars->n = 0;
}

static const struct flow_var *vars_find(const struct flow_vars *vars, const char *name, size_t len)
{
    for (size_t i = 0; i < vars->n; i++)
        if (flow_name_eq(vars->v[i].name, name, len))
            return &vars->v[i];
    return NULL;
}

json_t *flow_vars_get(const struct flow_vars *vars, const char *name, size_t len)
{
    const struct flow_var *v = vars_find(vars, name, len);
    return v ? v->value : NULL;
}

/* Makes *pv a variable ready to be committed without allocating; value is
 * borrowed (pv takes its own reference). 0, -EINVAL, TS_TOOBIG, -ENOMEM. */
static int var_prepare(struct flow_var *pv, const char *name, size_t nlen, json_t *value)
{
    memset(pv, 0, sizeof(*pv));
    if (!flow_var_name_valid(name, nlen) || !value)
        return -EINVAL;
    struct buf b;
    buf_init(&b, FLOW_VAR_VALUE_MAX);
    int rc = dump(&b, value, FLOW_VAR_DEPTH_MAX);
    if (rc) {
        buf_release(&b);
        return rc;
    }
    pv->json = buf_take(&b, &pv->json_len);
    pv->name = ts_strndup(name, nlen);
    if (!pv->json || !pv->name) {
        var_drop(pv);
        return -ENOMEM;
    }
    pv->value = json_incref(value);
    return 0;
}

/* Puts a prepared variable in the map (replacing one of the same name);
 * there must be room (vars->n < FLOW_VARS_MAX or the name is set). */
static void var_commit(struct flow_vars *vars, struct flow_var *pv)
{
    struct flow_var *old = (struct flow_var *)vars_find(vars, pv->name, strlen(pv->name));
    if (old)
        var_drop(old);
    else
        old = &vars->v[vars->n++];
    *old = *pv;
    memset(pv, 0, sizeof(*pv));
}

int flow_vars_set(struct flow_vars *vars, const char *name, json_t *value)
{
    if (!name || !value) {
        json_decref(value);
        return -EINVAL;
    }
    size_t nlen = strlen(name);
    if (!vars_find(vars, name, nlen) && vars->n >= FLOW_VARS_MAX) {
        json_decref(value);
        return TS_TOOBIG;
    }
    struct flow_var pv;
    int rc = var_prepare(&pv, name, nlen, value);
    json_decref(value);
    if (rc)
        return rc;
    var_commit(vars, &pv);
    return 0;
}

/* ---- placeholders ---- */

struct ph {
    size_t start, end; /* the placeholder is s[start..end) */
    size_t name, nlen; /* its name is s[name..name + nlen) */
};

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

/*
 * Finds the first "{{" in s[pos..len). Returns 0 when there is none, 1 when
 * it starts a placeholder (*ph), -EINVAL when it does not (ph->start is the
 * "{{", ph->end the end of the next "}}" or 0 when there is none).
 */
static int ph_next(const char *s, size_t len, size_t pos, struct ph *ph)
{
    const char *p = pos < len ? memmem(s + pos, len - pos, "{{", 2) : NULL;
    if (!p)
        return 0;
    size_t i = (size_t)(p - s);
    ph->start = i;
    for (i += 2; i < len && blank(s[i]); i++)
        ;
    ph->name = i;
    if (i < len && name_start(s[i]))
        for (i++; i < len && name_char(s[i]); i++)
            ;
    ph->nlen = i - ph->name;
    for (; i < len && blank(s[i]); i++)
        ;
    if (ph->nlen > 0 && ph->nlen <= FLOW_VAR_NAME_MAX && i + 1 < len && s[i] == '}' &&
        s[i + 1] == '}') {
        ph->end = i + 2;
        return 1;
    }
    const char *close = memmem(s + ph->start + 2, len - ph->start - 2, "}}", 2);
    ph->end = close ? (size_t)(close - s) + 2 : 0;
    return -EINVAL;
}

/* Describes the malformed placeholder ph of s into msg. */
static void ph_problem(char *msg, size_t n, const char *s, size_t len, const struct ph *ph)
{
    char t[64];
    if (!ph->end) {
        snip(t, sizeof(t), s + ph->start, len - ph->start, 24);
        snprintf(msg, n, "unclosed '{{' in \"%s\"", t);
        return;
    }
    snip(t, sizeof(t), s + ph->start, ph->end - ph->start, 40);
    snprintf(msg, n, "bad placeholder '%s' (a name is [A-Za-z_][A-Za-z0-9_.]*, at most %d bytes)",
             t, FLOW_VAR_NAME_MAX);
}

/* Whether s[0..len) is exactly one placeholder; *ph then describes it. */
static bool ph_exact(const char *s, size_t len, struct ph *ph)
{
    return ph_next(s, len, 0, ph) == 1 && ph->start == 0 && ph->end == len;
}

/* ---- JSON pointers of template strings, for messages ---- */

static void jpath_putc(struct flow_jpath *p, char c)
{
    if (p->len + 1 < sizeof(p->s))
        p->s[p->len++] = c;
    p->s[p->len] = '\0';
}

static size_t jpath_key(struct flow_jpath *p, const char *k, size_t n)
{
    size_t old = p->len;
    jpath_putc(p, '/');
    for (size_t i = 0; i < n; i++) {
        if (k[i] == '~' || k[i] == '/') {
            jpath_putc(p, '~');
            jpath_putc(p, k[i] == '~' ? '0' : '1');
        } else {
            jpath_putc(p, (unsigned char)k[i] < 0x20 ? '?' : k[i]);
        }
    }
    return old;
}

static size_t jpath_index(struct flow_jpath *p, size_t i)
{
    char t[32];
    snprintf(t, sizeof(t), "%zu", i);
    return jpath_key(p, t, strlen(t));
}

static void jpath_pop(struct flow_jpath *p, size_t old)
{
    p->len = old;
    p->s[old] = '\0';
}

/* ---- checking templates ---- */

int flow_check_str(struct flow_tcheck *c, const char *s, size_t len)
{
    struct ph ph;
    size_t pos = 0;
    int rc;
    while ((rc = ph_next(s, len, pos, &ph)) == 1) {
        if ((rc = c->lookup(c, s + ph.name, ph.nlen)))
            return rc;
        pos = ph.end;
    }
    if (rc < 0)
        ph_problem(c->msg, sizeof(c->msg), s, len, &ph);
    return rc;
}

int flow_check_tree(struct flow_tcheck *c, const json_t *t, unsigned depth)
{
    int rc;
    if (json_is_string(t))
        return flow_check_str(c, json_string_value(t), json_string_length(t));
    if (!json_is_object(t) && !json_is_array(t))
        return 0;
    if (depth >= FLOW_TMPL_DEPTH_MAX) {
        snprintf(c->msg, sizeof(c->msg), "the template is nested deeper than %d",
                 FLOW_TMPL_DEPTH_MAX);
        return TS_TOOBIG;
    }
    if (json_is_array(t)) {
        for (size_t i = 0; i < json_array_size(t); i++) {
            size_t old = jpath_index(&c->path, i);
            if ((rc = flow_check_tree(c, json_array_get(t, i), depth + 1)))
                return rc;
            jpath_pop(&c->path, old);
        }
        return 0;
    }
    json_t *o = (json_t *)t;
    for (void *it = json_object_iter(o); it; it = json_object_iter_next(o, it)) {
        size_t old = jpath_key(&c->path, json_object_iter_key(it), json_object_iter_key_len(it));
        if ((rc = flow_check_tree(c, json_object_iter_value(it), depth + 1)))
            return rc;
        jpath_pop(&c->path, old);
    }
    return 0;
}

struct known_check {
    struct flow_tcheck t; /* first */
    const char *const *known;
    size_t nknown;
};

static int known_lookup(struct flow_tcheck *c, const char *name, size_t len)
{
    struct known_check *k = (struct known_check *)c;
    for (size_t i = 0; i < k->nknown; i++)
        if (flow_name_eq(k->known[i], name, len))
            return 0;
    const char *near =
        k->nknown ? str_closest(name, len, k->known, k->nknown, FLOW_SUGGEST_EDITS) : NULL;
    if (near)
        snprintf(c->msg, sizeof(c->msg), "unknown variable {{%.*s}}, did you mean {{%s}}?",
                 (int)len, name, near);
    else
        snprintf(c->msg, sizeof(c->msg), "unknown variable {{%.*s}}", (int)len, name);
    return -EINVAL;
}

int flow_template_check(const json_t *tmpl, const char *const *known, size_t nknown, char *err,
                        size_t errlen)
{
    struct known_check k = {.t.lookup = known_lookup, .known = known, .nknown = nknown};
    if (!tmpl) {
        ts_errf(err, errlen, "no template");
        return -EINVAL;
    }
    int rc = flow_check_tree(&k.t, tmpl, 0);
    if (rc) {
        if (k.t.path.len)
            ts_errf(err, errlen, "%s (in %s)", k.t.msg, k.t.path.s);
        else
            ts_errf(err, errlen, "%s", k.t.msg);
    }
    return rc;
}

/* ---- rendering ---- */

enum subst_mode {
    SUBST_RAW,  /* substitutions inserted as they are */
    SUBST_URL,  /* ... percent-encoded after the first literal '?' */
    SUBST_JSON, /* everything escaped as the inside of a JSON string */
};

static int append_pct(struct buf *out, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            rc = buf_append_char(out, (char)c);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            rc = buf_append(out, e, 3);
        }
    }
    return rc;
}

static int append_mode(struct buf *out, const char *s, size_t n, enum subst_mode mode, bool pct)
{
    if (mode == SUBST_JSON)
        return openai_json_escape(out, s, n);
    if (pct)
        return append_pct(out, s, n);
    return buf_append(out, s, n);
}

/* The text a variable stands for inside a string. */
static void var_text(const struct flow_var *v, const char **s, size_t *n)
{
    if (json_is_string(v->value)) {
        *s = json_string_value(v->value);
        *n = json_string_length(v->value);
    } else {
        *s = v->json;
        *n = v->json_len;
    }
}

void flow_unknown_var(char *msg, size_t n, const char *name, size_t len)
{
    snprintf(msg, n, "unknown variable {{%.*s}}", (int)len, name);
}

/* Appends s[0..len) with its placeholders substituted to out. On failure
 * out may hold a part; msg says what went wrong (but for -ENOMEM). */
static int subst(const struct flow_vars *vars, const char *s, size_t len, struct buf *out,
                 enum subst_mode mode, char *msg, size_t msgn)
{
    size_t pos = 0;
    bool query = false;
    int rc;
    for (;;) {
        struct ph ph;
        int found = ph_next(s, len, pos, &ph);
        size_t lit_end = found == 0 ? len : ph.start;
        if (mode == SUBST_URL && memchr(s + pos, '?', lit_end - pos))
            query = true;
        if ((rc = append_mode(out, s + pos, lit_end - pos, mode, false)) || found == 0)
            break;
        if (found < 0) {
            ph_problem(msg, msgn, s, len, &ph);
            return -EINVAL;
        }
        const struct flow_var *v = vars_find(vars, s + ph.name, ph.nlen);
        if (!v) {
            flow_unknown_var(msg, msgn, s + ph.name, ph.nlen);
            return -EINVAL;
        }
        const char *t;
        size_t tn;
        var_text(v, &t, &tn);
        if ((rc = append_mode(out, t, tn, mode, query)))
            break;
        pos = ph.end;
    }
    if (rc == TS_TOOBIG)
        snprintf(msg, msgn, "the rendered text is longer than %zu bytes", out->max);
    return rc;
}

struct rctx {
    const struct flow_vars *vars;
    size_t used; /* bytes of strings and substituted values so far (render_tree) */
    char msg[FLOW_MSG_MAX];
    struct flow_jpath path;
};

static int too_big(struct rctx *c)
{
    snprintf(c->msg, sizeof(c->msg), "the rendered body is larger than %u bytes", FLOW_RENDER_MAX);
    return TS_TOOBIG;
}

static int too_deep(struct rctx *c)
{
    snprintf(c->msg, sizeof(c->msg), "the template is nested deeper than %d", FLOW_TMPL_DEPTH_MAX);
    return TS_TOOBIG;
}

/* The variable an exact placeholder string t names, or NULL with *rc set
 * (0: t is not one exact placeholder). */
static const struct flow_var *exact_var(struct rctx *c, const json_t *t, int *rc)
{
    struct ph ph;
    const char *s = json_string_value(t);
    *rc = 0;
    if (!ph_exact(s, json_string_length(t), &ph))
        return NULL;
    const struct flow_var *v = vars_find(c->vars, s + ph.name, ph.nlen);
    if (!v) {
        flow_unknown_var(c->msg, sizeof(c->msg), s + ph.name, ph.nlen);
        *rc = -EINVAL;
    }
    return v;
}

static int render_tree(struct rctx *c, const json_t *t, unsigned depth, json_t **out);

static int render_tree_string(struct rctx *c, const json_t *t, json_t **out)
{
    int rc;
    const struct flow_var *v = exact_var(c, t, &rc);
    if (rc)
        return rc;
    if (v) {
        if (v->json_len > FLOW_RENDER_MAX - c->used)
            return too_big(c);
        c->used += v->json_len;
        *out = json_deep_copy(v->value);
        return *out ? 0 : -ENOMEM;
    }
    struct buf b;
    buf_init(&b, FLOW_RENDER_MAX - c->used);
    rc = subst(c->vars, json_string_value(t), json_string_length(t), &b, SUBST_RAW, c->msg,
               sizeof(c->msg));
    if (rc == 0) {
        c->used += b.len;
        *out = json_stringn_nocheck(buf_cstr(&b), b.len);
        rc = *out ? 0 : -ENOMEM;
    } else if (rc == TS_TOOBIG) {
        rc = too_big(c);
    }
    buf_release(&b);
    return rc;
}

static int render_tree_object(struct rctx *c, const json_t *t, unsigned depth, json_t *o)
{
    json_t *src = (json_t *)t;
    for (void *it = json_object_iter(src); it; it = json_object_iter_next(src, it)) {
        const char *k = json_object_iter_key(it);
        size_t klen = json_object_iter_key_len(it);
        if (klen > FLOW_RENDER_MAX - c->used)
            return too_big(c);
        c->used += klen;
        size_t old = jpath_key(&c->path, k, klen);
        json_t *v;
        int rc = render_tree(c, json_object_iter_value(it), depth + 1, &v);
        if (rc)
            return rc;
        if (json_object_setn_new_nocheck(o, k, klen, v))
            return -ENOMEM;
        jpath_pop(&c->path, old);
    }
    return 0;
}

/* Renders t into *out (a new reference); on failure *out is NULL and
 * c->path says where. */
static int render_tree(struct rctx *c, const json_t *t, unsigned depth, json_t **out)
{
    int rc = 0;
    *out = NULL;
    switch (json_typeof(t)) {
    case JSON_STRING:
        return render_tree_string(c, t, out);
    case JSON_OBJECT:
        if (depth >= FLOW_TMPL_DEPTH_MAX)
            return too_deep(c);
        if (!(*out = json_object()))
            return -ENOMEM;
        rc = render_tree_object(c, t, depth, *out);
        break;
    case JSON_ARRAY:
        if (depth >= FLOW_TMPL_DEPTH_MAX)
            return too_deep(c);
        if (!(*out = json_array()))
            return -ENOMEM;
        for (size_t i = 0; i < json_array_size(t) && !rc; i++) {
            size_t old = jpath_index(&c->path, i);
            json_t *v;
            if ((rc = render_tree(c, json_array_get(t, i), depth + 1, &v)))
                break;
            if (json_array_append_new(*out, v))
                rc = -ENOMEM;
            else
                jpath_pop(&c->path, old);
        }
        break;
    default:
        *out = json_copy((json_t *)t);
        return *out ? 0 : -ENOMEM;
    }
    if (rc) {
        json_decref(*out);
        *out = NULL;
    }
    return rc;
}

/* Writes the compact JSON of what render_tree would give into out. */
static int render_text(struct rctx *c, const json_t *t, unsigned depth, struct buf *out)
{
    int rc;
    switch (json_typeof(t)) {
    case JSON_STRING: {
        const struct flow_var *v = exact_var(c, t, &rc);
        if (rc)
            return rc;
        if (v)
            return buf_append(out, v->json, v->json_len);
        if ((rc = buf_append_char(out, '"')) ||
            (rc = subst(c->vars, json_string_value(t), json_string_length(t), out, SUBST_JSON,
                        c->msg, sizeof(c->msg))))
            return rc;
        return buf_append_char(out, '"');
    }
    case JSON_OBJECT: {
        if (depth >= FLOW_TMPL_DEPTH_MAX)
            return too_deep(c);
        json_t *o = (json_t *)t;
        if ((rc = buf_append_char(out, '{')))
            return rc;
        for (void *it = json_object_iter(o); it; it = json_object_iter_next(o, it)) {
            const char *k = json_object_iter_key(it);
            size_t klen = json_object_iter_key_len(it);
            size_t old = jpath_key(&c->path, k, klen);
            if ((it != json_object_iter(o) && (rc = buf_append_char(out, ','))) ||
                (rc = dump_string(out, k, klen)) || (rc = buf_append_char(out, ':')) ||
                (rc = render_text(c, json_object_iter_value(it), depth + 1, out)))
                return rc;
            jpath_pop(&c->path, old);
        }
        return buf_append_char(out, '}');
    }
    case JSON_ARRAY:
        if (depth >= FLOW_TMPL_DEPTH_MAX)
            return too_deep(c);
        if ((rc = buf_append_char(out, '[')))
            return rc;
        for (size_t i = 0; i < json_array_size(t); i++) {
            size_t old = jpath_index(&c->path, i);
            if ((i && (rc = buf_append_char(out, ','))) ||
                (rc = render_text(c, json_array_get(t, i), depth + 1, out)))
                return rc;
            jpath_pop(&c->path, old);
        }
        return buf_append_char(out, ']');
    default:
        return dump(out, t, 0);
    }
}

static void render_err(const struct rctx *c, int rc, const char *prefix, char *err, size_t errlen)
{
    if (rc == -ENOMEM) {
        ts_errf(err, errlen, "%sout of memory", prefix);
        return;
    }
    if (c->path.len)
        ts_errf(err, errlen, "%s%s (in %s)", prefix, c->msg, c->path.s);
    else
        ts_errf(err, errlen, "%s%s", prefix, c->msg);
}

int flow_template_render(const json_t *tmpl, const struct flow_vars *vars, json_t **out, char *err,
                         size_t errlen)
{
    *out = NULL;
    if (!tmpl || !vars) {
        ts_errf(err, errlen, "no template");
        return -EINVAL;
    }
    struct rctx c = {.vars = vars};
    int rc = render_tree(&c, tmpl, 0, out);
    if (rc)
        render_err(&c, rc, "", err, errlen);
    return rc;
}

/* Renders the body template into out (its max is the cap). */
static int render_body(const json_t *tmpl, const struct flow_vars *vars, struct buf *out, char *err,
                       size_t errlen)
{
    struct rctx c = {.vars = vars};
    int rc = render_text(&c, tmpl, 0, out);
    if (rc == TS_TOOBIG && !c.msg[0])
        too_big(&c);
    if (rc)
        render_err(&c, rc, "body: ", err, errlen);
    return rc;
}

int flow_template_render_string(const char *s, const struct flow_vars *vars, struct buf *out,
                                char *err, size_t errlen)
{
    if (!s || !vars) {
        ts_errf(err, errlen, "no template");
        return -EINVAL;
    }
    size_t mark = out->len;
    char msg[FLOW_MSG_MAX] = "";
    int rc = subst(vars, s, strlen(s), out, SUBST_RAW, msg, sizeof(msg));
    if (rc) {
        buf_truncate(out, mark);
        ts_errf(err, errlen, "%s", rc == -ENOMEM ? "out of memory" : msg);
    }
    return rc;
}

/* ---- captures ---- */

int flow_captures_apply(struct flow_vars *vars, const struct flow_step_def *st, const char *body,
                        size_t len, enum flow_fail_reason *reason, size_t *which)
{
    *reason = FLOW_FAIL_NOTHING;
    *which = st->ncaptures;
    if (!body || len > FLOW_RESPONSE_MAX)
        return 0;
    json_error_t je;
    json_t *doc = json_loadb(body, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!doc)
        return json_error_code(&je) == json_error_out_of_memory ? -ENOMEM : 0;
    int rc = 0;
    struct flow_var *pv = ts_calloc(st->ncaptures, sizeof(*pv));
    if (!pv) {
        rc = -ENOMEM;
        goto out_doc;
    }
    size_t k, fresh = 0;
    *reason = FLOW_FAIL_NONE;
    for (k = 0; k < st->ncaptures && *reason == FLOW_FAIL_NONE; k++) {
        const struct flow_capture *cap = &st->captures[k];
        json_t *v = cap->pointer ? jsonptr_get(doc, cap->pointer, strlen(cap->pointer)) : NULL;
        if (!v && !cap->optional) {
            *reason = FLOW_FAIL_NOTHING;
            *which = k;
            break;
        }
        if (!v)
            v = json_null();
        size_t vl = cap->var ? strlen(cap->var) : 0;
        rc = var_prepare(&pv[k], cap->var, vl, v);
        if (rc == -ENOMEM)
            goto out_pv;
        if (rc) {
            *reason = rc == TS_TOOBIG ? FLOW_FAIL_TOOBIG : FLOW_FAIL_BAD;
            *which = k;
            rc = 0;
            break;
        }
        bool seen = vars_find(vars, cap->var, vl) != NULL;
        for (size_t j = 0; j < k && !seen; j++)
            seen = strcmp(pv[j].name, pv[k].name) == 0;
        fresh += !seen;
    }
    if (*reason == FLOW_FAIL_NONE && vars->n + fresh > FLOW_VARS_MAX)
        *reason = FLOW_FAIL_TOOBIG;
    if (*reason == FLOW_FAIL_NONE)
        for (k = 0; k < st->ncaptures; k++)
            var_commit(vars, &pv[k]);
out_pv:
    for (k = 0; k < st->ncaptures; k++)
        var_drop(&pv[k]);
    ts_free(pv);
out_doc:
    json_decref(doc);
    return rc;
}

/* ---- a step's request ---- */

/* Takes b's text as a C string ("" when empty), or NULL. */
static char *take_str(struct buf *b)
{
    size_t n;
    char *s = buf_take(b, &n);
    return s ? s : ts_strdup("");
}

static int render_url(const struct flow_vars *vars, const char *tmpl, char **out, char *msg,
                      size_t msgn)
{
    struct buf b;
    buf_init(&b, FLOW_TEXT_MAX);
    int rc = subst(vars, tmpl, strlen(tmpl), &b, SUBST_URL, msg, msgn);
    for (size_t i = 0; i < b.len && !rc; i++) {
        unsigned char c = (unsigned char)b.data[i];
        if (c <= 0x20 || c == 0x7f) {
            snprintf(msg, msgn, "the rendered url has a %s at byte %zu",
                     c == ' ' ? "space" : "control character", i);
            rc = -EINVAL;
        }
    }
    if (!rc && b.len == 0) {
        snprintf(msg, msgn, "the rendered url is empty");
        rc = -EINVAL;
    }
    if (!rc && !(*out = take_str(&b)))
        rc = -ENOMEM;
    buf_release(&b);
    return rc;
}

static int render_header(const struct flow_vars *vars, const char *tmpl, char **out, char *msg,
                         size_t msgn)
{
    struct buf b;
    buf_init(&b, FLOW_TEXT_MAX);
    int rc = subst(vars, tmpl, strlen(tmpl), &b, SUBST_RAW, msg, msgn);
    if (!rc && (memchr(b.data, '\r', b.len) || memchr(b.data, '\n', b.len) ||
                memchr(b.data, '\0', b.len))) {
        snprintf(msg, msgn, "the rendered header has a line break or NUL");
        rc = -EINVAL;
    }
    if (!rc && !(*out = take_str(&b)))
        rc = -ENOMEM;
    buf_release(&b);
    return rc;
}

static const char *step_method(const struct flow_step_def *st)
{
    if (st->kind != FLOW_STEP_HTTP)
        return "POST";
    if (st->method)
        return st->method;
    return st->body ? "POST" : "GET";
}

int flow_step_render(const struct flow_vars *vars, const struct flow_step_def *st,
                     struct flow_request *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    char msg[FLOW_MSG_MAX] = "";
    int rc = 0;
    out->kind = st->kind;
    out->method = step_method(st);
    out->timeout_ns = st->timeout_ns;
    if (st->url && (rc = render_url(vars, st->url, &out->url, msg, sizeof(msg)))) {
        if (rc != -ENOMEM)
            ts_errf(err, errlen, "step '%s': url: %s", st->name, msg);
        goto out_fail;
    }
    if (st->nheaders && !(out->headers = ts_calloc(st->nheaders, sizeof(char *)))) {
        rc = -ENOMEM;
        goto out_fail;
    }
    for (size_t k = 0; k < st->nheaders; k++) {
        if ((rc = render_header(vars, st->headers[k], &out->headers[k], msg, sizeof(msg)))) {
            if (rc != -ENOMEM)
                ts_errf(err, errlen, "step '%s': header %zu: %s", st->name, k + 1, msg);
            goto out_fail;
        }
        out->nheaders++;
    }
    if (st->body) {
        struct buf b;
        buf_init(&b, FLOW_RENDER_MAX);
        char e[FLOW_MSG_MAX + FLOW_PATH_MAX + 32];
        rc = render_body(st->body, vars, &b, e, sizeof(e));
        if (!rc && !(out->body = buf_take(&b, &out->body_len)))
            rc = -ENOMEM;
        buf_release(&b);
        if (rc) {
            if (rc != -ENOMEM)
                ts_errf(err, errlen, "step '%s': %s", st->name, e);
            goto out_fail;
        }
    }
    return 0;
out_fail:
    if (rc == -ENOMEM)
        ts_errf(err, errlen, "step '%s': out of memory", st->name);
    flow_request_release(out);
    return rc;
}

void flow_request_release(struct flow_request *req)
{
    if (!req)
        return;
    ts_free(req->url);
    for (size_t k = 0; k < req->nheaders; k++)
        ts_free(req->headers[k]);
    ts_free(req->headers);
    ts_free(req->body);
    memset(req, 0, sizeof(*req));
}
