/*
 * html_page.h - the primitives the HTML report (html.h) is written with,
 * shared by its section files (html_overview, html_dist, html_run,
 * html_run_charts, html_sweep, html_sweep_charts, html_topo) and html.c's page frame.
 *
 * A struct html_page appends the page to one buffer and keeps the first
 * error: once p->rc is set every call here does nothing, so a section is
 * written straight through and report_html_build() returns that error at
 * the end. Point lists for charts (struct html_vec) belong to the page and
 * live until html_page_release(), so a chart may borrow them.
 *
 * Not a public API: only the report's html*.c files include it.
 */
#ifndef TS_REPORT_HTML_PAGE_H
#define TS_REPORT_HTML_PAGE_H

#include <stddef.h>

#include <jansson.h>

#include "base/buf.h"
#include "report/svg.h"

/* A chart's points, x[i] and y[i] for i < n; owned by the page. */
struct html_vec {
    double *x, *y;
    size_t n, cap;
};

struct html_page {
    struct buf *out;
    int rc;                 /* the first error; 0 while all is well */
    struct html_vec **vecs; /* owned, freed by html_page_release */
    size_t nvecs, capvecs;
    int nrun, nsweep, ntopo; /* sections so far, for element ids */
};

/* ---- writing ---- */

/* Appends s as it is (markup). */
void html_emit(struct html_page *p, const char *s);
/* Appends a printf-formatted string as it is (markup). */
void html_emitf(struct html_page *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s escaped as text (svg_escape); NULL appends nothing. */
void html_esc(struct html_page *p, const char *s);

/* ---- point lists and charts ---- */

/* A new empty point list owned by the page; NULL (and p->rc set) on failure. */
struct html_vec *html_page_vec(struct html_page *p);
/* Appends (x, y) to v; does nothing when v is NULL or p->rc is set; sets p->rc on failure. */
void html_vec_push(struct html_page *p, struct html_vec *v, double x, double y);
/* Frees the page's point lists (not its buffer); the page may not be used after. */
void html_page_release(struct html_page *p);

/* Appends c rendered by svg_chart_render() in a <figure class="chart">. */
void html_chart(struct html_page *p, const struct svg_chart *c);
/*
 * Fills s afresh (zeroed, then name, colour, kind) to draw v's points (none
 * when v is NULL); s borrows v's arrays, and name.
 */
void html_series(struct svg_series *s, const struct html_vec *v, const char *name, int color,
                 enum svg_series_kind kind);

/* ---- numbers as text: each writes into buf (n bytes) and returns it; "-" when not finite ---- */

/* Milliseconds with the decimals that suit their size (0.123, 1.23, 12.3, 1234). */
const char *html_fmt_ms(double v, char *buf, size_t n);
/* v with a fixed number of decimals. */
const char *html_fmt_num(double v, int decimals, char *buf, size_t n);
/* A fraction as a percentage with 2 decimals (3 below 0.1%). */
const char *html_fmt_pct(double frac, char *buf, size_t n);
/*
 * A JSON scalar: a string as it is (the JSON's own, not buf), numbers
 * compactly, booleans as yes/no, null as "-"; NULL for arrays and objects.
 */
const char *html_fmt_scalar(const json_t *v, char *buf, size_t n);

/* ---- small blocks ---- */

/*
 * A headline figure: key above, value big (with its unit, smaller; may be
 * NULL), sub below (may be NULL); cls is an extra class ("good", "bad") or NULL.
 */
void html_card(struct html_page *p, const char *cls, const char *key, const char *value,
               const char *unit, const char *sub);
/*
 * A two-column table of obj's scalars, nested objects flattened to "a.b"
 * (three levels deep); caption may be NULL.
 */
void html_kv_table(struct html_page *p, const char *caption, const json_t *obj);

#endif
