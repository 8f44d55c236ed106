/*
 * svg.h - chart primitives for the HTML report: inline SVG drawn by our own
 * code (no script, no external resource), so a page reads the same offline.
 *
 * What is here:
 *  - "nice" axis ticks: linear steps of 1, 2 or 5 x 10^k, log10 axes with
 *    1-2-5 ticks (few decades) or decade ticks, and the percentile-spectrum
 *    axis of HdrHistogram plots (x = log10(1 / (1 - p)), ticks 0%, 50%, 90%,
 *    99%, 99.9%, ...);
 *  - escaping of text for SVG/HTML (also used by html.c);
 *  - an XY chart (lines, steps, points; shaded x bands; labelled reference
 *    lines; labelled markers; a legend; titled, labelled axes) and a heatmap
 *    with a colour-scale legend.
 *
 * Output is an <svg> element (no XML prolog, no xmlns: it is meant to be
 * inlined in an HTML5 page) with a viewBox of width x height user units and
 * the attribute class="ts-chart" plus the caller's id; the page scales it
 * with CSS. Text is 11-14 units high in the viewBox.
 *
 * All data arrays are borrowed for the duration of the render call. Every
 * render appends to a struct buf, whose cap bounds the output: the functions
 * return 0, -ENOMEM or TS_TOOBIG (the buffer then holds a partial element:
 * callers truncate it back or give up on the page).
 */
#ifndef TS_REPORT_SVG_H
#define TS_REPORT_SVG_H

#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"
#include "base/err.h"

/* ---- ticks ----------------------------------------------------------------- */

#define SVG_TICKS_MAX 40

struct svg_ticks {
    double lo, hi; /* the axis range: the data range widened to the outer ticks */
    double step;   /* linear: the spacing of v[]; log and spectrum: 0 */
    size_t n;      /* ticks in v[], ascending, lo <= v[i] <= hi */
    double v[SVG_TICKS_MAX];
};

/*
 * Linear ticks covering [lo, hi] with about `target` intervals (2..20):
 * step = 1, 2 or 5 x 10^k, the smallest such that (hi - lo) / step <= target;
 * out->lo/hi are lo rounded down and hi rounded up to multiples of step, and
 * the ticks are every multiple of step in between (values are rounded so
 * 0.1 + 0.2 prints as 0.3). A zero-width range is widened (to 0..1 for 0,
 * else by 10% of |lo| either side). Returns 0, or -EINVAL for a non-finite
 * bound or hi < lo.
 * Example: (0, 97, 5) -> step 20, ticks 0 20 40 60 80 100.
 */
TS_MUST_CHECK int svg_ticks_linear(double lo, double hi, int target, struct svg_ticks *out);

/*
 * Log10 ticks covering [lo, hi] (0 < lo <= hi). When the range spans at most
 * three decades the ticks are the values 1, 2, 5 x 10^k, and out->lo/hi the
 * nearest of them outside the range; otherwise the ticks are powers of ten
 * (every m-th decade when there are more than `target`), out->lo/hi powers of
 * ten. Returns 0 or -EINVAL (lo <= 0, non-finite, hi < lo).
 * Examples: (0.5, 40, 6) -> 0.5 1 2 5 10 20 50; (3, 2e6, 8) -> 1 10 ... 1e7;
 * (3, 2e6, 4) -> 1 100 1e4 1e6 1e8.
 */
TS_MUST_CHECK int svg_ticks_log(double lo, double hi, int target, struct svg_ticks *out);

/*
 * The percentile-spectrum axis: positions x = -log10(1 - p/100). Ticks at
 * 0%, 50%, 90%, 99%, 99.9%, ... up to the first "nines" level >= p_max (at
 * least 99%, at most 99.9999%); out->v holds positions (not percentiles),
 * out->lo = 0, out->hi the last position.
 */
void svg_ticks_spectrum(double p_max, struct svg_ticks *out);

/* The spectrum position of percentile p (0..100); p >= 100 gives +INFINITY. */
double svg_spectrum_pos(double p);

/*
 * Formats a tick value into buf (always NUL-terminated when n > 0) and
 * returns buf. step > 0: as many decimals as step needs (step 0.25 -> 2);
 * step 0: compact (%g-like, up to 4 significant digits). Either way values
 * of 10000 and more are shortened with k / M / G ("20k", "1.5M"), and -0
 * prints as 0.
 */
char *svg_format_tick(double v, double step, char *buf, size_t n);

/* ---- text -------------------------------------------------------------------- */

/*
 * Appends s escaped for XML/HTML text and attribute values: & < > " ' as
 * entities, control characters other than tab and newline dropped, invalid
 * UTF-8 replaced by U+FFFD. NULL appends nothing. Returns 0 or a buf error.
 */
TS_MUST_CHECK int svg_escape(struct buf *out, const char *s);

/* The chart colour with index i (any int; wraps around a 10-colour palette),
 * as "#rrggbb", static. Colours 0..9 are Tableau's "category10". */
const char *svg_color(int i);

/* ---- XY chart -------------------------------------------------------------------- */

enum svg_scale {
    SVG_SCALE_LINEAR = 0,
    SVG_SCALE_LOG,      /* log10; values <= 0 are drawn at the axis minimum */
    SVG_SCALE_SPECTRUM, /* x only: data are percentiles 0..100, see svg_ticks_spectrum */
};

struct svg_axis {
    const char *label; /* with its unit, e.g. "TTFT (ms)"; may be NULL */
    enum svg_scale scale;
    double min, max;         /* fixed bounds; NAN = from the data (then widened to nice ticks) */
    bool include_zero;       /* linear, automatic bounds: the range includes 0 */
    const char *unit_suffix; /* appended to tick labels, e.g. "%"; may be NULL */
};

enum svg_series_kind {
    SVG_LINE = 0, /* straight segments between points */
    SVG_STEP,     /* horizontal then vertical: (x[i-1], y[i-1]) -> (x[i], y[i-1]) -> (x[i], y[i]) */
    SVG_POINTS,   /* a dot per point */
    SVG_LINE_DOTS, /* segments and a dot per point */
};

struct svg_series {
    const char *name; /* legend entry; NULL (or no finite point) = not in the legend */
    const double *x, *y;
    size_t n; /* points; a non-finite x or y breaks the line there */
    enum svg_series_kind kind;
    int color; /* svg_color() index */
    bool dashed;
    double width;     /* stroke width; 0 = 2 */
    const char *unit; /* for point tooltips ("ms"); may be NULL */
};

/* A shaded range of x (fault windows on a timeline). */
struct svg_band {
    double x0, x1;
    const char *label; /* drawn at the top of the band; may be NULL */
};

/* A reference line across the plot: horizontal at y = at, or vertical at x = at. */
struct svg_rule {
    bool vertical;
    double at;
    const char *label; /* drawn next to the line and in the legend; may be NULL */
    int color;
};

/* A labelled point (a knee). */
struct svg_marker {
    double x, y;
    const char *label;
    int color;
};

struct svg_chart {
    const char *id;    /* element id (letters, digits, '-', '_'); required */
    const char *title; /* drawn at the top; may be NULL */
    int width, height; /* viewBox size; 0 = 640 x 340 */
    struct svg_axis x, y;
    const struct svg_series *series;
    size_t nseries;
    const struct svg_band *bands;
    size_t nbands;
    const char *band_legend; /* legend entry for the bands ("fault window"); may be NULL */
    const struct svg_rule *rules;
    size_t nrules;
    const struct svg_marker *markers;
    size_t nmarkers;
    const char *note; /* drawn in the plot when no series has a point ("no data"); may be NULL */
};

/*
 * Appends the chart as one <svg> element. Axis ranges come from the series
 * and markers unless fixed; a rule widens them when it lies within one data
 * span of the data (and not below zero when the data are not); a rule outside
 * the final range is not drawn and its legend entry says "(off scale)". Points
 * closer than half a unit to the previous one drawn are skipped, so dense
 * CDFs stay small. Series, bands, rules and markers are clipped to the plot.
 * Returns 0, -EINVAL (no id, or a series with n > 0 and no x or y), -ENOMEM
 * or TS_TOOBIG.
 */
TS_MUST_CHECK int svg_chart_render(const struct svg_chart *c, struct buf *out);

/* ---- heatmap ----------------------------------------------------------------------- */

struct svg_heatmap {
    const char *id, *title;
    int width, height;             /* 0 = 640 x 260 */
    const char *const *row_labels; /* nrows, top to bottom */
    size_t nrows;
    const char *const *col_labels; /* ncols, left to right */
    size_t ncols;
    const double *values;          /* nrows * ncols, row-major; non-finite = empty cell */
    const char *x_label, *y_label; /* axis titles; may be NULL */
    const char *value_label;       /* colour-scale title with unit, "ITL (ms)" */
    bool log_scale;                /* colour by log10 of the value (values > 0) */
};

/*
 * Appends a heatmap: one cell per value coloured on a viridis-like scale
 * between the smallest and largest finite value (their nice ticks), the value
 * written in the cell, and a colour bar with ticks on the right. Returns 0,
 * -EINVAL (no id, no rows or columns, no values), -ENOMEM or TS_TOOBIG.
 */
TS_MUST_CHECK int svg_heatmap_render(const struct svg_heatmap *h, struct buf *out);

#endif
