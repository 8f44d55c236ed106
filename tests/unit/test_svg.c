/*
 * test_svg.c - chart primitives: nice ticks (linear, log, percentile
 * spectrum), tick labels, escaping, and charts with known data containing
 * the elements they should, where they should be.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "report/svg.h"

#define CAP (16u << 20)

static void assert_ticks(const struct svg_ticks *t, const double *want, size_t n)
{
    assert_int_equal(t->n, n);
    for (size_t i = 0; i < n; i++) {
        if (fabs(t->v[i] - want[i]) > 1e-12 * (fabs(want[i]) + 1)) {
            fail_msg("tick %zu: got %.17g, want %.17g", i, t->v[i], want[i]);
        }
    }
    assert_true(t->lo == want[0]);
    assert_true(t->hi == want[n - 1]);
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void test_ticks_linear(void **state)
{
    (void)state;
    struct svg_ticks t;

    assert_int_equal(svg_ticks_linear(0, 97, 5, &t), 0);
    assert_true(t.step == 20);
    assert_ticks(&t, (const double[]){0, 20, 40, 60, 80, 100}, 6);

    assert_int_equal(svg_ticks_linear(0.013, 0.087, 4, &t), 0);
    assert_ticks(&t, (const double[]){0, 0.02, 0.04, 0.06, 0.08, 0.1}, 6);

    assert_int_equal(svg_ticks_linear(3, 7.2, 4, &t), 0);
    assert_ticks(&t, (const double[]){2, 4, 6, 8}, 4);

    assert_int_equal(svg_ticks_linear(-7, 13, 4, &t), 0);
    assert_ticks(&t, (const double[]){-10, -5, 0, 5, 10, 15}, 6);

    /* Multiples of 0.1 come out as the decimals people expect (0.3, not 0.30000000000000004). */
    assert_int_equal(svg_ticks_linear(0, 0.3, 3, &t), 0);
    assert_ticks(&t, (const double[]){0, 0.1, 0.2, 0.3}, 4);
    assert_true(t.v[3] == 0.3);

    /* 811 .. 2836 ms into about 6 intervals: step 500. */
    assert_int_equal(svg_ticks_linear(811, 2836, 6, &t), 0);
    assert_ticks(&t, (const double[]){500, 1000, 1500, 2000, 2500, 3000}, 6);

    /* Zero-width ranges are widened. */
    assert_int_equal(svg_ticks_linear(0, 0, 5, &t), 0);
    assert_ticks(&t, (const double[]){0, 0.2, 0.4, 0.6, 0.8, 1}, 6);
    assert_int_equal(svg_ticks_linear(5, 5, 5, &t), 0);
    assert_true(t.lo < 5 && t.hi > 5);
    assert_true(t.step == 0.2);

    assert_int_equal(svg_ticks_linear(NAN, 1, 5, &t), -EINVAL);
    assert_int_equal(svg_ticks_linear(0, INFINITY, 5, &t), -EINVAL);
    assert_int_equal(svg_ticks_linear(2, 1, 5, &t), -EINVAL);
}

static void test_ticks_log(void **state)
{
    (void)state;
    struct svg_ticks t;

    assert_int_equal(svg_ticks_log(0.5, 40, 6, &t), 0);
    assert_ticks(&t, (const double[]){0.5, 1, 2, 5, 10, 20, 50}, 7);
    assert_true(t.step == 0);

    assert_int_equal(svg_ticks_log(20, 80, 6, &t), 0);
    assert_ticks(&t, (const double[]){20, 50, 100}, 3);

    assert_int_equal(svg_ticks_log(3, 2e6, 8, &t), 0);
    assert_ticks(&t, (const double[]){1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7}, 8);

    /* More decades than the target: every other one. */
    assert_int_equal(svg_ticks_log(3, 2e6, 4, &t), 0);
    assert_ticks(&t, (const double[]){1, 100, 1e4, 1e6, 1e8}, 5);

    /* Exact 1-2-5 bounds stay where they are. */
    assert_int_equal(svg_ticks_log(1, 100, 6, &t), 0);
    assert_ticks(&t, (const double[]){1, 2, 5, 10, 20, 50, 100}, 7);

    assert_int_equal(svg_ticks_log(0, 10, 5, &t), -EINVAL);
    assert_int_equal(svg_ticks_log(-1, 10, 5, &t), -EINVAL);
    assert_int_equal(svg_ticks_log(10, 1, 5, &t), -EINVAL);
}

static void test_ticks_spectrum(void **state)
{
    (void)state;
    struct svg_ticks t;

    assert_true(svg_spectrum_pos(0) == 0);
    assert_true(fabs(svg_spectrum_pos(50) - log10(2)) < 1e-12);
    assert_true(fabs(svg_spectrum_pos(90) - 1) < 1e-12);
    assert_true(fabs(svg_spectrum_pos(99.9) - 3) < 1e-9);
    assert_true(isinf(svg_spectrum_pos(100)));

    /* 99.95% needs the 99.99% tick. */
    svg_ticks_spectrum(99.95, &t);
    assert_int_equal(t.n, 6);
    assert_true(t.v[0] == 0 && fabs(t.v[1] - log10(2)) < 1e-12);
    for (int k = 1; k <= 4; k++)
        assert_true(t.v[k + 1] == k);
    assert_true(t.lo == 0 && t.hi == 4);

    /* At least up to 99%. */
    svg_ticks_spectrum(75, &t);
    assert_int_equal(t.n, 4);
    assert_true(t.hi == 2);
    /* At most 99.9999%. */
    svg_ticks_spectrum(100, &t);
    assert_true(t.hi == 6);
}

static void test_format_tick(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(svg_format_tick(0.25, 0.25, b, sizeof(b)), "0.25");
    assert_string_equal(svg_format_tick(0.4, 0.2, b, sizeof(b)), "0.4");
    assert_string_equal(svg_format_tick(40, 20, b, sizeof(b)), "40");
    assert_string_equal(svg_format_tick(1500, 500, b, sizeof(b)), "1500");
    assert_string_equal(svg_format_tick(20000, 5000, b, sizeof(b)), "20k");
    assert_string_equal(svg_format_tick(12500, 2500, b, sizeof(b)), "12.5k");
    assert_string_equal(svg_format_tick(1.5e6, 0, b, sizeof(b)), "1.5M");
    assert_string_equal(svg_format_tick(3e9, 1e9, b, sizeof(b)), "3G");
    assert_string_equal(svg_format_tick(-0.0, 0.1, b, sizeof(b)), "0.0");
    assert_string_equal(svg_format_tick(-5, 5, b, sizeof(b)), "-5");
    assert_string_equal(svg_format_tick(0.001, 0, b, sizeof(b)), "0.001");
    assert_string_equal(svg_format_tick(1000, 0, b, sizeof(b)), "1000");
    assert_string_equal(svg_format_tick(1e5, 0, b, sizeof(b)), "100k");
}

static char *escaped(const char *s)
{
    struct buf b;
    buf_init(&b, 1024);
    assert_int_equal(svg_escape(&b, s), 0);
    return buf_take(&b, NULL);
}

static void test_escape(void **state)
{
    (void)state;
    char *s = escaped("a<b & \"c\" 'd'>");
    assert_string_equal(s, "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;");
    ts_free(s);
    s = escaped("x\x01y\x7fz\tw\n");
    assert_string_equal(s, "xyz\tw\n");
    ts_free(s);
    s = escaped("\xc2\xb5s \xe2\x80\x94 ok");
    assert_string_equal(s, "\xc2\xb5s \xe2\x80\x94 ok");
    ts_free(s);
    s = escaped("bad \xff \xc0\xaf end \xe2\x82");
    assert_string_equal(s,
                        "bad \xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd end \xef\xbf\xbd\xef\xbf\xbd");
    ts_free(s);
    /* A surrogate encoded in UTF-8 is not valid. */
    s = escaped("\xed\xa0\x80");
    assert_string_equal(s, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    ts_free(s);
    struct buf b;
    buf_init(&b, 16);
    assert_int_equal(svg_escape(&b, NULL), 0);
    assert_int_equal(b.len, 0);
    assert_int_equal(svg_escape(&b, "<<<<<"), TS_TOOBIG);
    buf_release(&b);
    assert_string_equal(svg_color(0), "#1f77b4");
    assert_string_equal(svg_color(13), svg_color(3));
    assert_string_equal(svg_color(-1), svg_color(9));
}

static char *render(const struct svg_chart *c)
{
    struct buf b;
    buf_init(&b, CAP);
    assert_int_equal(svg_chart_render(c, &b), 0);
    return buf_take(&b, NULL);
}

/* The first "d" attribute of a path whose stroke is color. */
static const char *path_of(const char *svg, const char *color)
{
    static char d[1 << 16];
    char key[64];
    snprintf(key, sizeof(key), "<path fill=\"none\" stroke=\"%s\"", color);
    const char *p = strstr(svg, key);
    assert_non_null(p);
    p = strstr(p, " d=\"");
    assert_non_null(p);
    p += 4;
    const char *e = strchr(p, '"');
    assert_true((size_t)(e - p) < sizeof(d));
    memcpy(d, p, (size_t)(e - p));
    d[e - p] = '\0';
    return d;
}

static void test_chart_elements(void **state)
{
    (void)state;
    const double x[2] = {0, 10}, y[2] = {0, 100};
    const double x2[5] = {1, 2, 3, 4, 5}, y2[5] = {10, 20, NAN, 40, 50};
    struct svg_series s[2] = {
        {.name = "series A", .x = x, .y = y, .n = 2, .kind = SVG_LINE, .color = 0},
        {.name = "B & C",
         .x = x2,
         .y = y2,
         .n = 5,
         .kind = SVG_LINE_DOTS,
         .color = 1,
         .dashed = true,
         .unit = "ms"},
    };
    struct svg_band band = {.x0 = 2, .x1 = 4, .label = "kill-gpu"};
    struct svg_rule rules[2] = {
        {.vertical = true, .at = 5, .label = "knee at 5", .color = 3},
        {.at = 500, .label = "SLO ttft.p99<500ms", .color = 3},
    };
    struct svg_marker mk = {.x = 5, .y = 50, .label = "knee", .color = 3};
    struct svg_chart c = {
        .id = "t1",
        .title = "A<B",
        .x = {.label = "time (s)", .min = 0, .max = 10},
        .y = {.label = "latency (ms)", .min = 0, .max = 100},
        .series = s,
        .nseries = 2,
        .bands = &band,
        .nbands = 1,
        .band_legend = "fault window",
        .rules = rules,
        .nrules = 2,
        .markers = &mk,
        .nmarkers = 1,
    };
    char *svg = render(&c);

    assert_non_null(strstr(svg, "<svg class=\"ts-chart\" id=\"t1\" viewBox=\"0 0 640 340\""));
    assert_non_null(strstr(svg, "<title>A&lt;B</title>"));
    assert_null(strstr(svg, "A<B"));
    assert_null(strstr(svg, "http"));
    assert_int_equal(count(svg, "<svg"), 1);
    assert_int_equal(count(svg, "</svg>"), 1);
    /* Legend: both series, the band, both rules; the rule at 500 is off the 0..100 axis. */
    assert_non_null(strstr(svg, ">series A</text>"));
    assert_non_null(strstr(svg, ">B &amp; C</text>"));
    assert_non_null(strstr(svg, ">fault window</text>"));
    assert_non_null(strstr(svg, ">knee at 5</text>"));
    assert_non_null(strstr(svg, ">SLO ttft.p99&lt;500ms (off scale)</text>"));
    assert_int_equal(count(svg, "class=\"rule\""), 1);
    /* Axis labels and 1-2-5 ticks. */
    assert_non_null(strstr(svg, ">time (s)</text>"));
    assert_non_null(strstr(svg, ">latency (ms)</text>"));
    assert_non_null(strstr(svg, "rotate(-90"));
    for (int v = 0; v <= 10; v += 2) {
        char t[16];
        snprintf(t, sizeof(t), ">%d</text>", v);
        assert_non_null(strstr(svg, t));
    }
    assert_non_null(strstr(svg, ">100</text>"));
    assert_non_null(strstr(svg, ">80</text>"));
    /* Band, marker and its label. */
    assert_int_equal(count(svg, "class=\"band\""), 1);
    assert_non_null(strstr(svg, ">kill-gpu</text>"));
    assert_int_equal(count(svg, "class=\"marker\""), 1);
    assert_non_null(strstr(svg, ">knee</text>"));
    /* Series A runs from the bottom-left corner of the plot to its top-right one:
     * right edge 640 - 18, bottom 340 - 44 (with an x label). */
    double x0, y0, x1, y1;
    const char *d = path_of(svg, "#1f77b4");
    assert_int_equal(sscanf(d, "M%lf %lfL%lf %lf", &x0, &y0, &x1, &y1), 4);
    assert_true(fabs(x1 - 622.0) < 0.051);
    assert_true(fabs(y0 - 296.0) < 0.051);
    assert_true(x0 > 30 && x0 < 100);
    assert_true(y1 > 30 && y1 < 120);
    /* The band covers x 2..4 of 0..10: a fifth of the plot width. */
    const char *band_el = strstr(svg, "class=\"band\"");
    double bx, by, bw;
    assert_int_equal(
        sscanf(band_el, "class=\"band\" x=\"%lf\" y=\"%lf\" width=\"%lf\"", &bx, &by, &bw), 3);
    assert_true(fabs(bw - (x1 - x0) / 5) < 0.2);
    assert_true(fabs(bx - (x0 + (x1 - x0) / 5)) < 0.2);
    /* Series B: dashed, broken at the NAN (two pieces), a dot per finite point with a tooltip. */
    d = path_of(svg, "#ff7f0e");
    assert_int_equal(count(d, "M"), 2);
    assert_int_equal(count(svg, "r=\"3.5\" fill=\"#ff7f0e\" stroke=\"#fff\""), 4);
    assert_non_null(strstr(svg, "<title>B &amp; C: 4, 40 ms</title>"));
    assert_non_null(strstr(svg, "stroke-dasharray=\"6 4\""));
    ts_free(svg);
}

static void test_chart_scales(void **state)
{
    (void)state;
    enum { N = 10000 };
    double *x = calloc(N, sizeof(double)), *y = calloc(N, sizeof(double));
    assert_non_null(x);
    assert_non_null(y);
    for (int i = 0; i < N; i++) {
        x[i] = 100.0 * (1 - pow(0.999, i)); /* percentiles toward 100 */
        y[i] = 1 + i * 0.1;
    }
    struct svg_series s = {.name = "run", .x = x, .y = y, .n = N, .kind = SVG_LINE};
    struct svg_chart c = {
        .id = "spec",
        .title = "spectrum",
        .x = {.label = "percentile", .scale = SVG_SCALE_SPECTRUM, .min = NAN, .max = NAN},
        .y = {.label = "ms", .scale = SVG_SCALE_LOG, .min = NAN, .max = NAN},
        .series = &s,
        .nseries = 1,
    };
    char *svg = render(&c);
    assert_non_null(strstr(svg, ">0%</text>"));
    assert_non_null(strstr(svg, ">50%</text>"));
    assert_non_null(strstr(svg, ">90%</text>"));
    assert_non_null(strstr(svg, ">99%</text>"));
    assert_non_null(strstr(svg, ">99.9%</text>"));
    assert_non_null(strstr(svg, ">99.99%</text>"));
    /* Log y over 1 .. 1000.9, just over three decades: decade ticks 1 .. 10k. */
    assert_non_null(strstr(svg, ">1</text>"));
    assert_non_null(strstr(svg, ">10</text>"));
    assert_non_null(strstr(svg, ">1000</text>"));
    assert_non_null(strstr(svg, ">10k</text>"));
    assert_null(strstr(svg, ">500</text>"));
    /* 10000 points: the ones closer than half a unit to the last drawn are skipped. */
    const char *d = path_of(svg, "#1f77b4");
    size_t segs = count(d, "L");
    assert_true(segs > 50);
    assert_true(segs < 2000);
    ts_free(svg);

    /* No data: the note, default axes, still a valid element. */
    struct svg_chart e = {.id = "empty",
                          .x = {.min = NAN, .max = NAN},
                          .y = {.min = NAN, .max = NAN},
                          .note = "no samples"};
    svg = render(&e);
    assert_non_null(strstr(svg, ">no samples</text>"));
    assert_non_null(strstr(svg, "</svg>"));
    ts_free(svg);
    free(x);
    free(y);
}

/* Reference lines widen an automatic axis only when that keeps the data readable. */
static void test_chart_rules(void **state)
{
    (void)state;
    const double x[3] = {4, 32, 64}, y[3] = {20, 60, 100};
    struct svg_series s = {.name = "err", .x = x, .y = y, .n = 3, .kind = SVG_LINE};
    struct svg_rule rules[4] = {
        {.vertical = true, .at = -24.4, .label = "lc = -24.4"}, /* below zero: off scale */
        {.vertical = true, .at = 16, .label = "knee at 16"},    /* inside: drawn */
        {.at = 150, .label = "SLO 150"},                        /* within a span above: widens */
        {.at = 60000, .label = "SLO 60s"},                      /* far above: off scale */
    };
    struct svg_chart c = {
        .id = "rules",
        .x = {.label = "load", .min = NAN, .max = NAN, .include_zero = true},
        .y = {.label = "ms", .min = NAN, .max = NAN, .include_zero = true},
        .series = &s,
        .nseries = 1,
        .rules = rules,
        .nrules = 4,
    };
    char *svg = render(&c);
    assert_non_null(strstr(svg, ">lc = -24.4 (off scale)</text>"));
    assert_non_null(strstr(svg, ">knee at 16</text>"));
    assert_non_null(strstr(svg, ">SLO 150</text>"));
    assert_non_null(strstr(svg, ">SLO 60s (off scale)</text>"));
    assert_int_equal(count(svg, "class=\"rule\""), 2);
    assert_null(strstr(svg, ">-20</text>"));
    assert_non_null(strstr(svg, ">0</text>"));
    assert_non_null(strstr(svg, ">150</text>")); /* the y axis reaches the SLO */
    assert_null(strstr(svg, ">60k</text>"));
    ts_free(svg);
}

static void test_chart_errors(void **state)
{
    (void)state;
    struct buf b;
    const double v[1] = {1};
    struct svg_chart c = {.x = {.min = NAN, .max = NAN}, .y = {.min = NAN, .max = NAN}};
    buf_init(&b, CAP);
    assert_int_equal(svg_chart_render(&c, &b), -EINVAL); /* no id */
    c.id = "a b";
    assert_int_equal(svg_chart_render(&c, &b), -EINVAL);
    c.id = "x\"><script>";
    assert_int_equal(svg_chart_render(&c, &b), -EINVAL);
    c.id = "ok";
    struct svg_series s = {.x = v, .y = NULL, .n = 1};
    c.series = &s;
    c.nseries = 1;
    assert_int_equal(svg_chart_render(&c, &b), -EINVAL);
    assert_int_equal(b.len, 0);
    buf_release(&b);

    s.y = v;
    buf_init(&b, 200);
    assert_int_equal(svg_chart_render(&c, &b), TS_TOOBIG);
    buf_release(&b);
}

static void test_heatmap(void **state)
{
    (void)state;
    const char *rows[3] = {"p50", "p90", "p99"};
    const char *cols[4] = {"0-15", "16-31", "32-63", "64+"};
    const double vals[12] = {10, 11, 12, NAN, 20, 22, 24, NAN, 40, 44, 48, 90};
    struct svg_heatmap h = {
        .id = "hm",
        .title = "ITL by position",
        .row_labels = rows,
        .nrows = 3,
        .col_labels = cols,
        .ncols = 4,
        .values = vals,
        .x_label = "token position",
        .y_label = "percentile",
        .value_label = "ITL (ms)",
    };
    struct buf b;
    buf_init(&b, CAP);
    assert_int_equal(svg_heatmap_render(&h, &b), 0);
    const char *svg = buf_cstr(&b);
    assert_non_null(strstr(svg, "<svg class=\"ts-chart ts-heatmap\" id=\"hm\""));
    assert_int_equal(count(svg, "class=\"cell\""), 10);
    assert_int_equal(count(svg, "fill=\"#f3f3f3\""), 2); /* the empty cells */
    assert_int_equal(count(svg, "class=\"colorbar\""), 1);
    assert_non_null(strstr(svg, "<linearGradient id=\"hm-grad\""));
    assert_non_null(strstr(svg, "fill=\"url(#hm-grad)\""));
    /* The smallest value is the dark end of the scale, the largest the bright end. */
    assert_non_null(strstr(svg, "fill=\"#440154\" stroke=\"#fff\"><title>p50, 0-15: 10.0"));
    assert_non_null(strstr(svg, "fill=\"#fde725\" stroke=\"#fff\"><title>p99, 64+: 90.0"));
    assert_non_null(strstr(svg, ">48.0</text>"));
    for (int i = 0; i < 3; i++)
        assert_non_null(strstr(svg, rows[i]));
    assert_non_null(strstr(svg, ">16-31</text>"));
    assert_non_null(strstr(svg, ">ITL (ms)</text>"));
    assert_non_null(strstr(svg, ">token position</text>"));
    /* Colour-bar ticks: the nice ticks (step 20) inside the value range 10..90. */
    assert_non_null(strstr(svg, ">20</text>"));
    assert_non_null(strstr(svg, ">80</text>"));
    assert_null(strstr(svg, ">100</text>"));
    buf_release(&b);

    buf_init(&b, CAP);
    h.nrows = 0;
    assert_int_equal(svg_heatmap_render(&h, &b), -EINVAL);
    buf_release(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ticks_linear),   cmocka_unit_test(test_ticks_log),
        cmocka_unit_test(test_ticks_spectrum), cmocka_unit_test(test_format_tick),
        cmocka_unit_test(test_escape),         cmocka_unit_test(test_chart_elements),
        cmocka_unit_test(test_chart_scales),   cmocka_unit_test(test_chart_rules),
        cmocka_unit_test(test_chart_errors),   cmocka_unit_test(test_heatmap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
