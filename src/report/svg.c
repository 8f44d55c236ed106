/*
 * svg.c - inline SVG charts for the HTML report (see svg.h).
 */
#include "report/svg.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FONT       "DejaVu Sans, Helvetica, Arial, sans-serif"
#define CHAR_W     6.6 /* average advance of an 11-12 unit sans-serif glyph */
#define AXIS_COLOR "#333"
#define GRID_COLOR "#e6e6e6"
#define TEXT_COLOR "#222"
#define MUTED      "#555"

/* ---- ticks ------------------------------------------------------------------ */

/* v printed with 12 significant digits and read back: 0.30000000000000004 -> 0.3. */
static double clean(double v)
{
    char tmp[32];
    snprintf(tmp, sizeof(tmp), "%.12g", v);
    v = strtod(tmp, NULL);
    return v == 0 ? 0 : v; /* no -0 */
}

/* The smallest 1, 2, 5 x 10^k that is >= raw (raw > 0). */
static double nice_step(double raw)
{
    double mag = pow(10, floor(log10(raw)));
    double norm = raw / mag;
    if (norm <= 1 + 1e-9)
        return mag;
    if (norm <= 2 + 1e-9)
        return 2 * mag;
    if (norm <= 5 + 1e-9)
        return 5 * mag;
    return 10 * mag;
}

int svg_ticks_linear(double lo, double hi, int target, struct svg_ticks *out)
{
    if (!isfinite(lo) || !isfinite(hi) || hi < lo)
        return -EINVAL;
    if (target < 2)
        target = 2;
    if (target > 20)
        target = 20;
    if (hi == lo) {
        double d = lo == 0 ? 1 : fabs(lo) * 0.1;
        if (lo == 0)
            hi = 1;
        else {
            lo -= d;
            hi += d;
        }
    }
    double step = nice_step((hi - lo) / target);
    double k0 = floor(lo / step + 1e-9), k1 = ceil(hi / step - 1e-9);
    memset(out, 0, sizeof(*out));
    out->step = step;
    out->lo = clean(k0 * step);
    out->hi = clean(k1 * step);
    for (double k = k0; k <= k1 + 0.5 && out->n < SVG_TICKS_MAX; k++)
        out->v[out->n++] = clean(k * step);
    return 0;
}

int svg_ticks_log(double lo, double hi, int target, struct svg_ticks *out)
{
    if (!isfinite(lo) || !isfinite(hi) || lo <= 0 || hi < lo)
        return -EINVAL;
    if (target < 2)
        target = 2;
    memset(out, 0, sizeof(*out));
    int d0 = (int)floor(log10(lo) + 1e-9), d1 = (int)ceil(log10(hi) - 1e-9);
    if (d1 <= d0)
        d1 = d0 + 1;
    if (d1 - d0 <= 3) {
        static const double m[3] = {1, 2, 5};
        double cand[3 * 6 + 1] = {0};
        size_t nc = 0;
        for (int k = d0 - 1; k <= d1; k++)
            for (int j = 0; j < 3; j++)
                cand[nc++] = clean(m[j] * pow(10, k));
        size_t first = 0, last = nc - 1;
        for (size_t i = 0; i < nc; i++)
            if (cand[i] <= lo * (1 + 1e-9))
                first = i;
        for (size_t i = nc; i-- > 0;)
            if (cand[i] >= hi * (1 - 1e-9))
                last = i;
        out->lo = cand[first];
        out->hi = cand[last];
        for (size_t i = first; i <= last && out->n < SVG_TICKS_MAX; i++)
            out->v[out->n++] = cand[i];
        return 0;
    }
    int every = (d1 - d0 + target - 1) / target;
    int steps = (d1 - d0 + every - 1) / every;
    out->lo = clean(pow(10, d0));
    out->hi = clean(pow(10, d0 + steps * every));
    for (int i = 0; i <= steps && out->n < SVG_TICKS_MAX; i++)
        out->v[out->n++] = clean(pow(10, d0 + i * every));
    return 0;
}

double svg_spectrum_pos(double p)
{
    if (!(p < 100))
        return INFINITY;
    if (p <= 0)
        return 0;
    return -log10(1 - p / 100);
}

void svg_ticks_spectrum(double p_max, struct svg_ticks *out)
{
    double pos = svg_spectrum_pos(p_max);
    int nines = isfinite(pos) ? (int)ceil(pos - 1e-9) : 6;
    if (nines < 2)
        nines = 2;
    if (nines > 6)
        nines = 6;
    memset(out, 0, sizeof(*out));
    out->v[out->n++] = 0;
    out->v[out->n++] = log10(2);
    for (int k = 1; k <= nines; k++)
        out->v[out->n++] = k;
    out->lo = 0;
    out->hi = nines;
}

/* Decimals needed to print multiples of step exactly (0..6). */
static int step_decimals(double step)
{
    int dec = 0;
    double s = fabs(step);
    while (dec < 6) {
        double r = s - floor(s + 0.5);
        if (fabs(r) <= 1e-6 * (s > 1 ? s : 1))
            break;
        s *= 10;
        dec++;
    }
    return dec;
}

char *svg_format_tick(double v, double step, char *buf, size_t n)
{
    double a = fabs(v), div = 1;
    const char *suffix = "";

    if (n == 0)
        return buf;
    if (a >= 1e9) {
        div = 1e9;
        suffix = "G";
    } else if (a >= 1e6) {
        div = 1e6;
        suffix = "M";
    } else if (a >= 1e4) {
        div = 1e3;
        suffix = "k";
    }
    double x = v / div;
    if (step > 0)
        snprintf(buf, n, "%.*f%s", step_decimals(step / div), x, suffix);
    else
        snprintf(buf, n, "%.4g%s", x, suffix);
    if (buf[0] == '-' && strtod(buf, NULL) == 0)
        memmove(buf, buf + 1, strlen(buf)); /* "-0.0" -> "0.0" */
    return buf;
}

/* ---- text ---------------------------------------------------------------------- */

int svg_escape(struct buf *out, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    int rc = 0;

    if (!s)
        return 0;
    for (size_t i = 0; !rc && p[i];) {
        unsigned c = p[i];
        if (c < 0x80) {
            switch (c) {
            case '&':
                rc = buf_append_str(out, "&amp;");
                break;
            case '<':
                rc = buf_append_str(out, "&lt;");
                break;
            case '>':
                rc = buf_append_str(out, "&gt;");
                break;
            case '"':
                rc = buf_append_str(out, "&quot;");
                break;
            case '\'':
                rc = buf_append_str(out, "&#39;");
                break;
            default:
                if (c >= 0x20 || c == '\t' || c == '\n')
                    rc = buf_append_char(out, (char)c);
                if (c == 0x7f)
                    buf_truncate(out, out->len - 1);
            }
            i++;
            continue;
        }
        /* The length of a well-formed UTF-8 sequence starting here (RFC 3629), or 0. */
        size_t len = 0;
        unsigned lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            lo = c == 0xe0 ? 0xa0 : 0x80;
            hi = c == 0xed ? 0x9f : 0xbf;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            lo = c == 0xf0 ? 0x90 : 0x80;
            hi = c == 0xf4 ? 0x8f : 0xbf;
        }
        bool ok = len && p[i + 1] >= lo && p[i + 1] <= hi;
        for (size_t k = 2; ok && k < len; k++)
            ok = p[i + k] >= 0x80 && p[i + k] <= 0xbf;
        if (ok) {
            rc = buf_append(out, p + i, len);
            i += len;
        } else {
            rc = buf_append(out, "\xef\xbf\xbd", 3);
            i++;
        }
    }
    return rc;
}

const char *svg_color(int i)
{
    static const char *const palette[10] = {
        "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
        "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    };
    int k = i % 10;
    return palette[k < 0 ? k + 10 : k];
}

/* ---- shared drawing helpers ---------------------------------------------------------- */

static double text_width(const char *s, double size)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++)
        n += (*p & 0xc0) != 0x80; /* count code points, not bytes */
    return (double)n * CHAR_W * size / 11.0;
}

/* <text x y [anchor] [extra]>escaped s</text> */
static int put_text(struct buf *b, double x, double y, double size, const char *anchor,
                    const char *extra, const char *s)
{
    int rc = buf_appendf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.0f\"%s%s%s %s>", x, y, size,
                         anchor ? " text-anchor=\"" : "", anchor ? anchor : "", anchor ? "\"" : "",
                         extra ? extra : "");
    rc = rc ? rc : svg_escape(b, s);
    return rc ? rc : buf_append_str(b, "</text>\n");
}

static int open_svg(struct buf *b, const char *id, const char *cls, int w, int h, const char *title)
{
    int rc = buf_append_str(b, "<svg class=\"ts-chart");
    rc = rc ? rc : (cls ? buf_appendf(b, " %s", cls) : 0);
    rc = rc ? rc : buf_append_str(b, "\" id=\"");
    rc = rc ? rc : svg_escape(b, id);
    rc = rc ? rc
            : buf_appendf(b,
                          "\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\" "
                          "font-family=\"" FONT "\" fill=\"" TEXT_COLOR "\">\n<title>",
                          w, h, w, h);
    rc = rc ? rc : svg_escape(b, title ? title : id);
    rc = rc ? rc
            : buf_appendf(b, "</title>\n<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", w, h);
    return rc;
}

static bool id_ok(const char *id)
{
    if (!id || !*id)
        return false;
    for (const char *p = id; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_'))
            return false;
    return true;
}

/* ---- XY chart --------------------------------------------------------------------------- */

struct axis_map {
    enum svg_scale scale;
    struct svg_ticks t;
    double p0, p1; /* pixels of t.lo and t.hi */
};

static double axis_pos(const struct axis_map *m, double v)
{
    double t;
    switch (m->scale) {
    case SVG_SCALE_LOG:
        if (!(v > 0))
            v = m->t.lo;
        t = (log10(v) - log10(m->t.lo)) / (log10(m->t.hi) - log10(m->t.lo));
        break;
    case SVG_SCALE_SPECTRUM: {
        double pos = svg_spectrum_pos(v);
        t = isfinite(pos) ? (pos - m->t.lo) / (m->t.hi - m->t.lo) : 1;
        break;
    }
    default:
        t = (v - m->t.lo) / (m->t.hi - m->t.lo);
    }
    if (!isfinite(t))
        t = 0;
    if (t < -10)
        t = -10;
    if (t > 11)
        t = 11;
    return m->p0 + t * (m->p1 - m->p0);
}

/* The pixel of tick i (spectrum ticks are positions already, not percentiles). */
static double tick_pos(const struct axis_map *m, size_t i)
{
    if (m->scale == SVG_SCALE_SPECTRUM)
        return m->p0 + (m->t.v[i] - m->t.lo) / (m->t.hi - m->t.lo) * (m->p1 - m->p0);
    return axis_pos(m, m->t.v[i]);
}

/* The tick values as data values (spectrum ticks are positions; convert back to percentiles). */
static double tick_value(const struct axis_map *m, size_t i)
{
    if (m->scale == SVG_SCALE_SPECTRUM)
        return 100 * (1 - pow(10, -m->t.v[i]));
    return m->t.v[i];
}

static void tick_label(const struct axis_map *m, const struct svg_axis *a, size_t i, char *buf,
                       size_t n)
{
    char num[40];
    if (m->scale == SVG_SCALE_SPECTRUM) {
        double p = tick_value(m, i);
        int dec = i < 4 ? 0 : (int)i - 3; /* 0 50 90 99 | 99.9 99.99 ... */
        snprintf(buf, n, "%.*f%%", dec, p);
        return;
    }
    svg_format_tick(m->t.v[i], m->scale == SVG_SCALE_LINEAR ? m->t.step : 0, num, sizeof(num));
    snprintf(buf, n, "%s%s", num, a->unit_suffix ? a->unit_suffix : "");
}

struct range {
    double lo, hi;
    bool any;
};

static void range_add(struct range *r, double v, enum svg_scale scale)
{
    if (!isfinite(v) || (scale == SVG_SCALE_LOG && v <= 0))
        return;
    if (scale == SVG_SCALE_SPECTRUM && v >= 100)
        return;
    if (!r->any || v < r->lo)
        r->lo = v;
    if (!r->any || v > r->hi)
        r->hi = v;
    r->any = true;
}

/*
 * Whether a reference line at `at` may widen the data range r: when there is
 * no data, when it lies within one data span of it (an SLO just above the
 * curve), but not across zero into negatives the data never reach (a fitted
 * critical load below zero is off scale, not a reason to draw -40 req/s).
 */
static bool rule_widens(const struct range *r, double at)
{
    if (!isfinite(at))
        return false;
    if (!r->any)
        return true;
    if (at < 0 && r->lo >= 0)
        return false;
    double span = r->hi - r->lo > 0 ? r->hi - r->lo : fabs(r->hi);
    return at >= r->lo - span && at <= r->hi + span;
}

/* Sets m->t from the data range r and the axis settings. */
static int axis_setup(struct axis_map *m, const struct svg_axis *a, struct range r, int target)
{
    m->scale = a->scale;
    if (a->scale == SVG_SCALE_SPECTRUM) {
        svg_ticks_spectrum(r.any ? r.hi : 99, &m->t);
        return 0;
    }
    double lo = isfinite(a->min) ? a->min : r.any ? r.lo : (a->scale == SVG_SCALE_LOG ? 1 : 0);
    double hi = isfinite(a->max) ? a->max : r.any ? r.hi : (a->scale == SVG_SCALE_LOG ? 10 : 1);
    if (a->scale == SVG_SCALE_LOG) {
        if (!(lo > 0))
            lo = hi > 0 ? hi / 10 : 1;
        if (hi < lo)
            hi = lo;
        int rc = svg_ticks_log(lo, hi, target, &m->t);
        if (rc)
            return rc;
    } else {
        if (a->include_zero && !isfinite(a->min) && lo > 0)
            lo = 0;
        if (a->include_zero && !isfinite(a->max) && hi < 0)
            hi = 0;
        if (hi < lo)
            hi = lo;
        int rc = svg_ticks_linear(lo, hi, target, &m->t);
        if (rc)
            return rc;
    }
    /* Fixed bounds are kept exactly; the ticks outside them are dropped. */
    if (isfinite(a->min) || isfinite(a->max)) {
        double flo = isfinite(a->min) ? a->min : m->t.lo, fhi = isfinite(a->max) ? a->max : m->t.hi;
        size_t k = 0;
        for (size_t i = 0; i < m->t.n; i++)
            if (m->t.v[i] >= flo - 1e-12 * fabs(flo) && m->t.v[i] <= fhi + 1e-12 * fabs(fhi))
                m->t.v[k++] = m->t.v[i];
        m->t.n = k;
        m->t.lo = flo;
        m->t.hi = fhi > flo ? fhi : flo + 1;
    }
    return 0;
}

static bool in_axis(const struct axis_map *m, double v)
{
    double lo = m->t.lo, hi = m->t.hi;
    if (m->scale == SVG_SCALE_SPECTRUM) {
        double p = svg_spectrum_pos(v);
        return isfinite(p) && p >= lo - 1e-9 && p <= hi + 1e-9;
    }
    double eps = 1e-9 * (fabs(hi) + fabs(lo));
    return isfinite(v) && v >= lo - eps && v <= hi + eps;
}

struct legend_item {
    const char *label;
    const char *color;
    bool dashed, dot, band, line;
    bool off_scale;
};

#define LEGEND_MAX 64

static int draw_legend(struct buf *b, const struct legend_item *items, size_t n, double x0,
                       double xmax, double y, double *y_end)
{
    double x = x0;
    int rc = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        char label[300];
        snprintf(label, sizeof(label), "%s%s", items[i].label,
                 items[i].off_scale ? " (off scale)" : "");
        double w = 24 + text_width(label, 11) + 16;
        if (x > x0 && x + w > xmax) {
            x = x0;
            y += 16;
        }
        const struct legend_item *it = &items[i];
        if (it->band)
            rc = buf_appendf(b,
                             "<rect x=\"%.1f\" y=\"%.1f\" width=\"18\" height=\"10\" fill=\"%s\" "
                             "fill-opacity=\"0.18\" stroke=\"%s\" stroke-opacity=\"0.5\"/>\n",
                             x, y - 9, it->color, it->color);
        if (!rc && it->line)
            rc = buf_appendf(b,
                             "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                             "stroke-width=\"2.5\"%s/>\n",
                             x, y - 4, x + 18, y - 4, it->color,
                             it->dashed ? " stroke-dasharray=\"5 3\"" : "");
        if (!rc && it->dot)
            rc = buf_appendf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", x + 9,
                             y - 4, it->color);
        rc = rc ? rc : put_text(b, x + 24, y, 11, NULL, NULL, label);
        x += w;
    }
    *y_end = y;
    return rc;
}

/* Appends "x,y" pixels of the chart's path for one series. */
static int draw_series(struct buf *b, const struct svg_series *s, const struct axis_map *mx,
                       const struct axis_map *my, const char *clip)
{
    const char *color = svg_color(s->color);
    double width = s->width > 0 ? s->width : 2;
    int rc = 0;

    if (s->kind != SVG_POINTS) {
        rc = buf_appendf(
            b,
            "<path fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" "
            "stroke-linejoin=\"round\" stroke-linecap=\"round\"%s clip-path=\"url(#%s)\" "
            "d=\"",
            color, width, s->dashed ? " stroke-dasharray=\"6 4\"" : "", clip);
        bool pen = false;
        double lx = 0, ly = 0, prev_y = NAN;
        for (size_t i = 0; !rc && i < s->n; i++) {
            if (!isfinite(s->x[i]) || !isfinite(s->y[i])) {
                pen = false;
                prev_y = NAN;
                continue;
            }
            double px = axis_pos(mx, s->x[i]), py = axis_pos(my, s->y[i]);
            bool last = i + 1 == s->n || !isfinite(s->x[i + 1]) || !isfinite(s->y[i + 1]);
            if (!pen) {
                rc = buf_appendf(b, "M%.1f %.1f", px, py);
                pen = true;
                lx = px;
                ly = py;
            } else {
                if (s->kind == SVG_STEP && isfinite(prev_y)) {
                    double cy = axis_pos(my, prev_y);
                    if (fabs(px - lx) >= 0.5 || last) {
                        rc = buf_appendf(b, "L%.1f %.1f", px, cy);
                        lx = px;
                        ly = cy;
                    }
                }
                if (!rc && (fabs(px - lx) >= 0.5 || fabs(py - ly) >= 0.5 || last)) {
                    rc = buf_appendf(b, "L%.1f %.1f", px, py);
                    lx = px;
                    ly = py;
                }
            }
            prev_y = s->y[i];
        }
        rc = rc ? rc : buf_append_str(b, "\"/>\n");
    }
    if (!rc && (s->kind == SVG_POINTS || s->kind == SVG_LINE_DOTS)) {
        for (size_t i = 0; !rc && i < s->n; i++) {
            if (!isfinite(s->x[i]) || !isfinite(s->y[i]))
                continue;
            char xs[40], ys[40];
            svg_format_tick(s->x[i], 0, xs, sizeof(xs));
            svg_format_tick(s->y[i], 0, ys, sizeof(ys));
            rc =
                buf_appendf(b,
                            "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\" stroke=\"#fff\" "
                            "stroke-width=\"1\" clip-path=\"url(#%s)\"><title>",
                            axis_pos(mx, s->x[i]), axis_pos(my, s->y[i]), color, clip);
            rc = rc ? rc : svg_escape(b, s->name ? s->name : "");
            rc = rc ? rc
                    : buf_appendf(b, "%s%s, %s%s%s</title></circle>\n", s->name ? ": " : "", xs, ys,
                                  s->unit ? " " : "", s->unit ? s->unit : "");
        }
    }
    return rc;
}

/* Where the parts of an XY chart go, in units of its viewBox. */
struct chart_layout {
    int W, H;
    double left, right;   /* the plot's x extent (the y tick labels are left of it) */
    double top;           /* below the title: where the legend starts */
    double ptop, pbottom; /* the plot's y extent (below the legend) */
    char clip[160];       /* id of the plot's clip path */
};

/*
 * The data ranges of the series and markers (*any_point: some series has a
 * finite point), widened by the rules that may widen them (rule_widens).
 * Returns 0 or -EINVAL for a series with points but no x or y.
 */
static int chart_ranges(const struct svg_chart *c, struct range *rx, struct range *ry,
                        bool *any_point)
{
    for (size_t i = 0; i < c->nseries; i++) {
        const struct svg_series *s = &c->series[i];
        if (s->n && (!s->x || !s->y))
            return -EINVAL;
        for (size_t k = 0; k < s->n; k++) {
            if (!isfinite(s->x[k]) || !isfinite(s->y[k]))
                continue;
            if (c->x.scale == SVG_SCALE_SPECTRUM || isfinite(s->x[k]))
                range_add(rx, s->x[k], c->x.scale);
            range_add(ry, s->y[k], c->y.scale);
            *any_point = true;
        }
    }
    for (size_t i = 0; i < c->nmarkers; i++) {
        range_add(rx, c->markers[i].x, c->x.scale);
        range_add(ry, c->markers[i].y, c->y.scale);
    }
    struct range data_x = *rx, data_y = *ry;
    for (size_t i = 0; i < c->nrules; i++) {
        const struct svg_rule *r = &c->rules[i];
        if (rule_widens(r->vertical ? &data_x : &data_y, r->at))
            range_add(r->vertical ? rx : ry, r->at, r->vertical ? c->x.scale : c->y.scale);
    }
    return 0;
}

/*
 * The legend's entries into items (at most LEGEND_MAX): the named series
 * that have a point to draw, the bands, then the labelled rules (marked off
 * scale when outside the axes). Returns how many.
 */
static size_t chart_legend(const struct svg_chart *c, const struct axis_map *mx,
                           const struct axis_map *my, struct legend_item *items)
{
    size_t n = 0;

    for (size_t i = 0; i < c->nseries && n < LEGEND_MAX; i++) {
        const struct svg_series *s = &c->series[i];
        bool drawn = false;
        for (size_t k = 0; k < s->n && !drawn; k++)
            drawn = isfinite(s->x[k]) && isfinite(s->y[k]);
        if (!s->name || !drawn)
            continue;
        items[n++] = (struct legend_item){
            .label = s->name,
            .color = svg_color(s->color),
            .dashed = s->dashed,
            .line = s->kind != SVG_POINTS,
            .dot = s->kind == SVG_POINTS || s->kind == SVG_LINE_DOTS,
        };
    }
    if (c->nbands && c->band_legend && n < LEGEND_MAX)
        items[n++] =
            (struct legend_item){.label = c->band_legend, .color = svg_color(3), .band = true};
    for (size_t i = 0; i < c->nrules && n < LEGEND_MAX; i++) {
        const struct svg_rule *r = &c->rules[i];
        if (!r->label)
            continue;
        items[n++] = (struct legend_item){
            .label = r->label,
            .color = svg_color(r->color),
            .dashed = true,
            .line = true,
            .off_scale = !in_axis(r->vertical ? mx : my, r->at),
        };
    }
    return n;
}

/* The horizontal margins (the widest y tick label sets the left one) and the title's height. */
static void chart_margins(const struct svg_chart *c, const struct axis_map *my,
                          struct chart_layout *L)
{
    char label[64];
    double ylab_w = 0;

    L->W = c->width > 0 ? c->width : 640;
    L->H = c->height > 0 ? c->height : 340;
    for (size_t i = 0; i < my->t.n; i++) {
        tick_label(my, &c->y, i, label, sizeof(label));
        double w = text_width(label, 11);
        ylab_w = w > ylab_w ? w : ylab_w;
    }
    L->left = 10 + (c->y.label ? 18 : 0) + ylab_w + 8;
    L->right = L->W - 18;
    L->top = c->title ? 24 : 6;
}

/*
 * Opens the <svg> with its title and legend, then places the plot below the
 * legend (L->ptop, L->pbottom, the axes' pixels) and defines its clip path.
 */
static int chart_open(struct buf *out, const struct svg_chart *c, const struct legend_item *legend,
                      size_t nlegend, struct chart_layout *L, struct axis_map *mx,
                      struct axis_map *my)
{
    int rc = open_svg(out, c->id, NULL, L->W, L->H, c->title);
    if (!rc && c->title)
        rc = put_text(out, 10, 17, 14, NULL, "font-weight=\"bold\"", c->title);
    if (!rc && nlegend) {
        double yend;
        rc = draw_legend(out, legend, nlegend, L->left, L->right, L->top + 14, &yend);
        L->top = yend + 4;
    }
    L->ptop = L->top + 10;
    L->pbottom = L->H - (c->x.label ? 44 : 26);
    if (L->pbottom - L->ptop < 40)
        L->pbottom = L->ptop + 40;
    mx->p0 = L->left;
    mx->p1 = L->right;
    my->p0 = L->pbottom;
    my->p1 = L->ptop;
    snprintf(L->clip, sizeof(L->clip), "%s-clip", c->id);
    if (!rc)
        rc = buf_appendf(out,
                         "<defs><clipPath id=\"%s\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                         "height=\"%.1f\"/></clipPath></defs>\n",
                         L->clip, L->left - 4, L->ptop - 4, L->right - L->left + 8,
                         L->pbottom - L->ptop + 8);
    return rc;
}

/* Horizontal grid lines with the y tick labels left of the plot. */
static int draw_y_grid(struct buf *out, const struct svg_axis *a, const struct axis_map *my,
                       const struct chart_layout *L)
{
    char label[64];
    int rc = 0;

    for (size_t i = 0; !rc && i < my->t.n; i++) {
        double py = tick_pos(my, i);
        tick_label(my, a, i, label, sizeof(label));
        rc = buf_appendf(
            out,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" GRID_COLOR "\"/>\n",
            L->left, py, L->right, py);
        rc = rc ? rc : put_text(out, L->left - 6, py + 4, 11, "end", "fill=\"" MUTED "\"", label);
    }
    return rc;
}

/*
 * Vertical grid lines with tick marks and the x tick labels below the plot;
 * a label that would overlap the previous one is left out.
 */
static int draw_x_grid(struct buf *out, const struct svg_axis *a, const struct axis_map *mx,
                       const struct chart_layout *L)
{
    char label[64];
    double last_label_end = -1e9;
    int rc = 0;

    for (size_t i = 0; !rc && i < mx->t.n; i++) {
        double px = tick_pos(mx, i);
        tick_label(mx, a, i, label, sizeof(label));
        double w = text_width(label, 11);
        rc = buf_appendf(
            out,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" GRID_COLOR
            "\"/>\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" AXIS_COLOR
            "\"/>\n",
            px, L->ptop, px, L->pbottom, px, L->pbottom, px, L->pbottom + 4);
        double lx = px + w / 2 > L->W - 3 ? L->W - 3 - w / 2 : px; /* keep the last one inside */
        if (!rc && lx - w / 2 >= last_label_end + 6) {
            rc = put_text(out, lx, L->pbottom + 17, 11, "middle", "fill=\"" MUTED "\"", label);
            last_label_end = lx + w / 2;
        }
    }
    return rc;
}

/* The shaded x bands (under everything else), clipped to the plot, with their labels. */
static int draw_bands(struct buf *out, const struct svg_chart *c, const struct axis_map *mx,
                      const struct chart_layout *L)
{
    int rc = 0;

    for (size_t i = 0; !rc && i < c->nbands; i++) {
        const struct svg_band *bd = &c->bands[i];
        double x0 = axis_pos(mx, bd->x0), x1 = axis_pos(mx, bd->x1);
        if (x1 < x0) {
            double t = x0;
            x0 = x1;
            x1 = t;
        }
        if (x0 < L->left)
            x0 = L->left;
        if (x1 > L->right)
            x1 = L->right;
        if (x1 <= x0)
            continue;
        rc =
            buf_appendf(out,
                        "<rect class=\"band\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                        "fill=\"%s\" fill-opacity=\"0.13\"/>\n",
                        x0, L->ptop, x1 - x0, L->pbottom - L->ptop, svg_color(3));
        if (!rc && bd->label)
            rc = put_text(out, x0 + 3, L->ptop + 12, 10, NULL, "fill=\"#a11\"", bd->label);
    }
    return rc;
}

/* The two axis lines and the axis titles (the y title turned upright). */
static int draw_axes(struct buf *out, const struct svg_chart *c, const struct chart_layout *L)
{
    int rc = buf_appendf(
        out,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" AXIS_COLOR
        "\"/>\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" AXIS_COLOR "\"/>\n",
        L->left, L->ptop, L->left, L->pbottom, L->left, L->pbottom, L->right, L->pbottom);
    if (!rc && c->x.label)
        rc = put_text(out, (L->left + L->right) / 2, L->pbottom + 36, 12, "middle", NULL,
                      c->x.label);
    if (!rc && c->y.label) {
        char rot[96];
        double cy = (L->ptop + L->pbottom) / 2;
        snprintf(rot, sizeof(rot), "transform=\"rotate(-90 14 %.1f)\"", cy);
        rc = put_text(out, 14, cy, 12, "middle", rot, c->y.label);
    }
    return rc;
}

/* The reference lines that fall within the axes, dashed across the plot. */
static int draw_rules(struct buf *out, const struct svg_chart *c, const struct axis_map *mx,
                      const struct axis_map *my, const struct chart_layout *L)
{
    int rc = 0;

    for (size_t i = 0; !rc && i < c->nrules; i++) {
        const struct svg_rule *r = &c->rules[i];
        const char *color = svg_color(r->color);
        if (!in_axis(r->vertical ? mx : my, r->at))
            continue;
        if (r->vertical) {
            double px = axis_pos(mx, r->at);
            rc = buf_appendf(out,
                             "<line class=\"rule\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                             "stroke=\"%s\" stroke-width=\"1.5\" stroke-dasharray=\"5 3\"/>\n",
                             px, L->ptop, px, L->pbottom, color);
        } else {
            double py = axis_pos(my, r->at);
            rc = buf_appendf(out,
                             "<line class=\"rule\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                             "stroke=\"%s\" stroke-width=\"1.5\" stroke-dasharray=\"5 3\"/>\n",
                             L->left, py, L->right, py, color);
        }
    }
    return rc;
}

/* The markers within the axes: a ring and a bold label, on the left when it would not fit. */
static int draw_markers(struct buf *out, const struct svg_chart *c, const struct axis_map *mx,
                        const struct axis_map *my, const struct chart_layout *L)
{
    int rc = 0;

    for (size_t i = 0; !rc && i < c->nmarkers; i++) {
        const struct svg_marker *mk = &c->markers[i];
        if (!in_axis(mx, mk->x) || !in_axis(my, mk->y))
            continue;
        double px = axis_pos(mx, mk->x), py = axis_pos(my, mk->y);
        const char *color = svg_color(mk->color);
        rc = buf_appendf(out,
                         "<circle class=\"marker\" cx=\"%.1f\" cy=\"%.1f\" r=\"7\" fill=\"none\" "
                         "stroke=\"%s\" stroke-width=\"2.5\"/>\n",
                         px, py, color);
        if (!rc && mk->label) {
            double w = text_width(mk->label, 12);
            bool leftside = px + 12 + w > L->right;
            char extra[160];
            snprintf(extra, sizeof(extra),
                     "font-weight=\"bold\" fill=\"%s\" stroke=\"#fff\" stroke-width=\"3\" "
                     "paint-order=\"stroke\"",
                     color);
            rc = put_text(out, leftside ? px - 11 : px + 11, py - 9, 12, leftside ? "end" : NULL,
                          extra, mk->label);
        }
    }
    return rc;
}

int svg_chart_render(const struct svg_chart *c, struct buf *out)
{
    struct range rx = {0}, ry = {0};
    struct axis_map mx, my;
    struct legend_item legend[LEGEND_MAX];
    struct chart_layout L;
    size_t nlegend;
    bool any_point = false;
    int rc;

    if (!id_ok(c->id))
        return -EINVAL;
    if ((rc = chart_ranges(c, &rx, &ry, &any_point)))
        return rc;
    if ((rc = axis_setup(&mx, &c->x, rx, 8)) || (rc = axis_setup(&my, &c->y, ry, 6)))
        return rc;
    nlegend = chart_legend(c, &mx, &my, legend);
    chart_margins(c, &my, &L);

    rc = chart_open(out, c, legend, nlegend, &L, &mx, &my);
    rc = rc ? rc : draw_y_grid(out, &c->y, &my, &L);
    rc = rc ? rc : draw_x_grid(out, &c->x, &mx, &L);
    rc = rc ? rc : draw_bands(out, c, &mx, &L);
    rc = rc ? rc : draw_axes(out, c, &L);
    for (size_t i = 0; !rc && i < c->nseries; i++)
        rc = draw_series(out, &c->series[i], &mx, &my, L.clip);
    rc = rc ? rc : draw_rules(out, c, &mx, &my, &L);
    rc = rc ? rc : draw_markers(out, c, &mx, &my, &L);
    if (!rc && !any_point && c->note)
        rc = put_text(out, (L.left + L.right) / 2, (L.ptop + L.pbottom) / 2, 13, "middle",
                      "fill=\"" MUTED "\"", c->note);
    return rc ? rc : buf_append_str(out, "</svg>\n");
}

/* ---- heatmap ------------------------------------------------------------------------------ */

/* A viridis-like colour for t in 0..1 into rgb. */
static void scale_color(double t, int rgb[3])
{
    static const int stops[5][3] = {
        {0x44, 0x01, 0x54}, {0x3b, 0x52, 0x8b}, {0x21, 0x91, 0x8c},
        {0x5e, 0xc9, 0x62}, {0xfd, 0xe7, 0x25},
    };
    if (!(t > 0))
        t = 0;
    if (t > 1)
        t = 1;
    double f = t * 4;
    int k = (int)f;
    if (k > 3)
        k = 3;
    double u = f - k;
    for (int j = 0; j < 3; j++)
        rgb[j] = (int)lround(stops[k][j] + u * (stops[k + 1][j] - stops[k][j]));
}

static void cell_text(double v, char *buf, size_t n)
{
    if (fabs(v) >= 1e4)
        svg_format_tick(v, 0, buf, n);
    else if (fabs(v) >= 100)
        snprintf(buf, n, "%.0f", v);
    else if (fabs(v) >= 10)
        snprintf(buf, n, "%.1f", v);
    else
        snprintf(buf, n, "%.2f", v);
}

/* Where the parts of a heatmap go, in units of its viewBox. */
struct heat_layout {
    int W, H;
    double left, right; /* the cells' x extent (the row labels are left of it) */
    double top, bottom; /* the cells' y extent (the column labels are below it) */
    double cw, ch;      /* a cell's size */
    double bar_x;       /* the colour bar's left edge */
    bool rotate;        /* column labels turned, as they are wider than a cell */
    char grad[160];     /* id of the colour bar's gradient */
};

/* The tick label of colour-scale tick i. */
static void heat_tick_label(const struct axis_map *m, size_t i, char *buf, size_t n)
{
    svg_format_tick(m->t.v[i], m->scale == SVG_SCALE_LINEAR ? m->t.step : 0, buf, n);
}

/*
 * The colour scale: its ticks in m from the smallest to the largest finite
 * value (exactly: ticks outside are dropped), log10 when h asks for it.
 */
static int heat_scale(const struct svg_heatmap *h, struct axis_map *m)
{
    struct range r = {0};
    struct svg_axis a = {
        .scale = h->log_scale ? SVG_SCALE_LOG : SVG_SCALE_LINEAR, .min = NAN, .max = NAN};

    for (size_t i = 0; i < h->nrows * h->ncols; i++)
        range_add(&r, h->values[i], a.scale);
    if (r.any) {
        a.min = r.lo;
        a.max = r.hi > r.lo ? r.hi : (a.scale == SVG_SCALE_LOG ? r.lo * 10 : r.lo + 1);
    }
    return axis_setup(m, &a, r, 4);
}

/*
 * The layout from the labels' widths: row labels on the left, the colour
 * bar with its tick labels and title on the right, column labels below
 * (turned when wider than a cell).
 */
static void heat_layout(const struct svg_heatmap *h, const struct axis_map *m,
                        struct heat_layout *L)
{
    char label[64];
    double rowlab_w = 0, collab_w = 0, tick_w = 0;

    L->W = h->width > 0 ? h->width : 640;
    L->H = h->height > 0 ? h->height : 260;
    for (size_t i = 0; i < h->nrows; i++) {
        double w = text_width(h->row_labels[i], 11);
        rowlab_w = w > rowlab_w ? w : rowlab_w;
    }
    for (size_t j = 0; j < h->ncols; j++) {
        double w = text_width(h->col_labels[j], 10);
        collab_w = w > collab_w ? w : collab_w;
    }
    for (size_t i = 0; i < m->t.n; i++) {
        heat_tick_label(m, i, label, sizeof(label));
        double w = text_width(label, 11);
        tick_w = w > tick_w ? w : tick_w;
    }
    L->left = 10 + (h->y_label ? 18 : 0) + rowlab_w + 8;
    L->bar_x = L->W - 10 - 18 - tick_w - 6 - 14; /* colour bar: 14 wide, ticks, title */
    L->right = L->bar_x - 16;
    L->top = h->title ? 34 : 10;
    L->cw = (L->right - L->left) / (double)h->ncols;
    L->rotate = collab_w + 4 > L->cw;
    L->bottom = L->H - (h->x_label ? 22 : 4) - (L->rotate ? collab_w * 0.6 + 12 : 18);
    L->ch = (L->bottom - L->top) / (double)h->nrows;
    snprintf(L->grad, sizeof(L->grad), "%s-grad", h->id);
}

/* Opens the <svg> with its title and defines the colour scale's gradient. */
static int heat_open(struct buf *out, const struct svg_heatmap *h, const struct heat_layout *L)
{
    int rc = open_svg(out, h->id, "ts-heatmap", L->W, L->H, h->title);
    if (!rc && h->title)
        rc = put_text(out, 10, 17, 14, NULL, "font-weight=\"bold\"", h->title);
    if (!rc)
        rc = buf_appendf(
            out, "<defs><linearGradient id=\"%s\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">", L->grad);
    for (int k = 0; !rc && k <= 8; k++) {
        int rgb[3];
        scale_color(k / 8.0, rgb);
        rc = buf_appendf(out, "<stop offset=\"%.3f\" stop-color=\"#%02x%02x%02x\"/>", k / 8.0,
                         rgb[0], rgb[1], rgb[2]);
    }
    return rc ? rc : buf_append_str(out, "</linearGradient></defs>\n");
}

/*
 * One cell at (x, y): coloured by its value's place t on the scale m (whose
 * pixels are 0..1), with a tooltip and, when the cell is big enough, the
 * value written in it; a value off the scale is an empty grey cell.
 */
static int heat_cell(struct buf *out, const struct svg_heatmap *h, const struct axis_map *m,
                     const struct heat_layout *L, size_t i, size_t j, double x, double y)
{
    double v = h->values[i * h->ncols + j];
    char label[64];
    int rgb[3];

    if (!in_axis(m, v) || (m->scale == SVG_SCALE_LOG && !(v > 0)))
        return buf_appendf(out,
                           "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                           "fill=\"#f3f3f3\" stroke=\"#fff\"/>\n",
                           x, y, L->cw, L->ch);
    double t = axis_pos(m, v);
    scale_color(t, rgb);
    cell_text(v, label, sizeof(label));
    int rc = buf_appendf(out,
                         "<rect class=\"cell\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                         "height=\"%.1f\" fill=\"#%02x%02x%02x\" stroke=\"#fff\"><title>",
                         x, y, L->cw, L->ch, rgb[0], rgb[1], rgb[2]);
    rc = rc ? rc : svg_escape(out, h->row_labels[i]);
    rc = rc ? rc : buf_append_str(out, ", ");
    rc = rc ? rc : svg_escape(out, h->col_labels[j]);
    rc = rc ? rc : buf_appendf(out, ": %s</title></rect>\n", label);
    double fs = L->cw / 4.5 < 12 ? L->cw / 4.5 : 12;
    if (!rc && fs >= 7 && L->ch >= 12) {
        char extra[40];
        snprintf(extra, sizeof(extra), "fill=\"%s\"", t < 0.6 ? "#fff" : "#111");
        rc = put_text(out, x + L->cw / 2, y + L->ch / 2 + fs * 0.35, fs, "middle", extra, label);
    }
    return rc;
}

/* Each row: its label, then its cells left to right. */
static int heat_rows(struct buf *out, const struct svg_heatmap *h, struct axis_map *m,
                     const struct heat_layout *L)
{
    int rc = 0;

    m->p0 = 0;
    m->p1 = 1;
    for (size_t i = 0; !rc && i < h->nrows; i++) {
        double y = L->top + L->ch * (double)i;
        rc = put_text(out, L->left - 6, y + L->ch / 2 + 4, 11, "end", NULL, h->row_labels[i]);
        for (size_t j = 0; !rc && j < h->ncols; j++)
            rc = heat_cell(out, h, m, L, i, j, L->left + L->cw * (double)j, y);
    }
    return rc;
}

/* The column labels under the cells and the two axis titles. */
static int heat_axes(struct buf *out, const struct svg_heatmap *h, const struct heat_layout *L)
{
    int rc = 0;

    for (size_t j = 0; !rc && j < h->ncols; j++) {
        double x = L->left + L->cw * ((double)j + 0.5);
        if (L->rotate) {
            char rot[96];
            snprintf(rot, sizeof(rot), "transform=\"rotate(-35 %.1f %.1f)\" fill=\"" MUTED "\"", x,
                     L->bottom + 12);
            rc = put_text(out, x, L->bottom + 12, 10, "end", rot, h->col_labels[j]);
        } else {
            rc = put_text(out, x, L->bottom + 14, 10, "middle", "fill=\"" MUTED "\"",
                          h->col_labels[j]);
        }
    }
    if (!rc && h->x_label)
        rc = put_text(out, (L->left + L->right) / 2, L->H - 8, 12, "middle", NULL, h->x_label);
    if (!rc && h->y_label) {
        char rot[96];
        double cy = (L->top + L->bottom) / 2;
        snprintf(rot, sizeof(rot), "transform=\"rotate(-90 14 %.1f)\"", cy);
        rc = put_text(out, 14, cy, 12, "middle", rot, h->y_label);
    }
    return rc;
}

/* The colour bar on the right, its ticks and its title. */
static int heat_colorbar(struct buf *out, const struct svg_heatmap *h, struct axis_map *m,
                         const struct heat_layout *L)
{
    char label[64];
    int rc = buf_appendf(out,
                         "<rect class=\"colorbar\" x=\"%.1f\" y=\"%.1f\" width=\"14\" "
                         "height=\"%.1f\" fill=\"url(#%s)\" stroke=\"#999\"/>\n",
                         L->bar_x, L->top, L->bottom - L->top, L->grad);
    m->p0 = L->bottom;
    m->p1 = L->top;
    for (size_t i = 0; !rc && i < m->t.n; i++) {
        double py = tick_pos(m, i);
        heat_tick_label(m, i, label, sizeof(label));
        rc = buf_appendf(
            out,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" AXIS_COLOR "\"/>\n",
            L->bar_x + 14, py, L->bar_x + 18, py);
        rc = rc ? rc : put_text(out, L->bar_x + 21, py + 4, 11, NULL, "fill=\"" MUTED "\"", label);
    }
    if (!rc && h->value_label) {
        char rot[96];
        double cx = L->W - 10, cy = (L->top + L->bottom) / 2;
        snprintf(rot, sizeof(rot), "transform=\"rotate(-90 %.1f %.1f)\"", cx, cy);
        rc = put_text(out, cx, cy, 12, "middle", rot, h->value_label);
    }
    return rc;
}

int svg_heatmap_render(const struct svg_heatmap *h, struct buf *out)
{
    struct axis_map m;
    struct heat_layout L;
    int rc;

    if (!id_ok(h->id) || !h->nrows || !h->ncols || !h->values || !h->row_labels || !h->col_labels)
        return -EINVAL;
    if ((rc = heat_scale(h, &m)))
        return rc;
    heat_layout(h, &m, &L);
    rc = heat_open(out, h, &L);
    rc = rc ? rc : heat_rows(out, h, &m, &L);
    rc = rc ? rc : heat_axes(out, h, &L);
    rc = rc ? rc : heat_colorbar(out, h, &m, &L);
    return rc ? rc : buf_append_str(out, "</svg>\n");
}
