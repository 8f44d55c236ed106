/*
 * html_page.c - the primitives the HTML report's sections are written with
 * (see html_page.h): the sticky-error page, its point lists, charts in
 * figures, number formats, cards and key-value tables.
 */
#include "report/html_page.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

/* ---- the page builder ------------------------------------------------------------- */

void html_emit(struct html_page *p, const char *s)
{
    if (!p->rc)
        p->rc = buf_append_str(p->out, s);
}

void html_emitf(struct html_page *p, const char *fmt, ...)
{
    va_list ap;
    if (p->rc)
        return;
    va_start(ap, fmt);
    p->rc = buf_vappendf(p->out, fmt, ap);
    va_end(ap);
}

void html_esc(struct html_page *p, const char *s)
{
    if (!p->rc)
        p->rc = svg_escape(p->out, s);
}

/* A new empty point list owned by the page; NULL (and p->rc set) on failure. */
struct html_vec *html_page_vec(struct html_page *p)
{
    if (p->rc)
        return NULL;
    if (p->nvecs == p->capvecs) {
        size_t cap = p->capvecs ? p->capvecs * 2 : 32;
        struct html_vec **grown = ts_realloc(p->vecs, cap * sizeof(*grown));
        if (!grown) {
            p->rc = -ENOMEM;
            return NULL;
        }
        p->vecs = grown;
        p->capvecs = cap;
    }
    struct html_vec *v = ts_calloc(1, sizeof(*v));
    if (!v) {
        p->rc = -ENOMEM;
        return NULL;
    }
    p->vecs[p->nvecs++] = v;
    return v;
}

void html_vec_push(struct html_page *p, struct html_vec *v, double x, double y)
{
    if (p->rc || !v)
        return;
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        double *nx = ts_realloc(v->x, cap * sizeof(double));
        if (!nx) {
            p->rc = -ENOMEM;
            return;
        }
        v->x = nx;
        double *ny = ts_realloc(v->y, cap * sizeof(double));
        if (!ny) {
            p->rc = -ENOMEM;
            return;
        }
        v->y = ny;
        v->cap = cap;
    }
    v->x[v->n] = x;
    v->y[v->n] = y;
    v->n++;
}

void html_page_release(struct html_page *p)
{
    for (size_t i = 0; i < p->nvecs; i++) {
        ts_free(p->vecs[i]->x);
        ts_free(p->vecs[i]->y);
        ts_free(p->vecs[i]);
    }
    ts_free(p->vecs);
    p->vecs = NULL;
    p->nvecs = p->capvecs = 0;
}

void html_chart(struct html_page *p, const struct svg_chart *c)
{
    if (p->rc)
        return;
    html_emit(p, "<figure class=\"chart\">");
    if (!p->rc)
        p->rc = svg_chart_render(c, p->out);
    html_emit(p, "</figure>\n");
}

void html_series(struct svg_series *s, const struct html_vec *v, const char *name, int color,
                 enum svg_series_kind kind)
{
    memset(s, 0, sizeof(*s));
    s->name = name;
    s->color = color;
    s->kind = kind;
    if (v) {
        s->x = v->x;
        s->y = v->y;
        s->n = v->n;
    }
}

/* ---- formatting ------------------------------------------------------------------- */

/* Milliseconds with precision that suits their size; "-" for none. */
const char *html_fmt_ms(double v, char *buf, size_t n)
{
    if (!isfinite(v))
        snprintf(buf, n, "-");
    else if (fabs(v) < 1)
        snprintf(buf, n, "%.3f", v);
    else if (fabs(v) < 10)
        snprintf(buf, n, "%.2f", v);
    else if (fabs(v) < 1000)
        snprintf(buf, n, "%.1f", v);
    else
        snprintf(buf, n, "%.0f", v);
    return buf;
}

const char *html_fmt_num(double v, int decimals, char *buf, size_t n)
{
    if (!isfinite(v))
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%.*f", decimals, v);
    return buf;
}

/* A fraction as a percentage. */
const char *html_fmt_pct(double frac, char *buf, size_t n)
{
    if (!isfinite(frac))
        snprintf(buf, n, "-");
    else if (frac != 0 && fabs(frac) < 0.001)
        snprintf(buf, n, "%.3f%%", frac * 100);
    else
        snprintf(buf, n, "%.2f%%", frac * 100);
    return buf;
}

/* A JSON scalar as text (numbers compactly); NULL for non-scalars. */
const char *html_fmt_scalar(const json_t *v, char *buf, size_t n)
{
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_integer(v))
        snprintf(buf, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, n, "%.6g", json_real_value(v));
    else if (json_is_true(v))
        snprintf(buf, n, "yes");
    else if (json_is_false(v))
        snprintf(buf, n, "no");
    else if (json_is_null(v))
        snprintf(buf, n, "-");
    else
        return NULL;
    return buf;
}

/* ---- small tables ------------------------------------------------------------------ */

/* A headline figure: key above, value (and its unit, smaller; may be NULL) big, sub below. */
void html_card(struct html_page *p, const char *cls, const char *key, const char *value,
               const char *unit, const char *sub)
{
    html_emitf(p, "<div class=\"card%s%s\"><div class=\"k\">", cls ? " " : "", cls ? cls : "");
    html_esc(p, key);
    html_emit(p, "</div><div class=\"v\">");
    html_esc(p, value);
    if (unit) {
        html_emit(p, " <span class=\"u\">");
        html_esc(p, unit);
        html_emit(p, "</span>");
    }
    html_emit(p, "</div>");
    if (sub) {
        html_emit(p, "<div class=\"s\">");
        html_esc(p, sub);
        html_emit(p, "</div>");
    }
    html_emit(p, "</div>\n");
}

/* A two-column table of a JSON object's scalars, nested objects flattened to a.b. */
static void kv_rows(struct html_page *p, const json_t *obj, const char *prefix, int depth)
{
    const char *key;
    const json_t *v;
    char buf[64], name[256];

    json_object_foreach((json_t *)obj, key, v)
    {
        snprintf(name, sizeof(name), "%s%s%s", prefix, *prefix ? "." : "", key);
        if (json_is_object(v) && depth < 3) {
            kv_rows(p, v, name, depth + 1);
            continue;
        }
        const char *text = html_fmt_scalar(v, buf, sizeof(buf));
        if (!text)
            continue;
        html_emit(p, "<tr><td>");
        html_esc(p, name);
        html_emit(p, "</td><td class=\"l\">");
        html_esc(p, text);
        html_emit(p, "</td></tr>\n");
    }
}

void html_kv_table(struct html_page *p, const char *caption, const json_t *obj)
{
    html_emit(p, "<div class=\"tablewrap\"><table>");
    if (caption) {
        html_emit(p, "<caption>");
        html_esc(p, caption);
        html_emit(p, "</caption>");
    }
    kv_rows(p, obj, "", 0);
    html_emit(p, "</table></div>\n");
}
