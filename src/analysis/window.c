/*
 * window.c - a run's rates over its steady window (see window.h).
 */
#include "analysis/window.h"

#include <math.h>
#include <string.h>

#include "base/alloc.h"

#define WINDOW_FULL_TICK 0.75 /* an interval at least this long (s) is a whole one */
#define WINDOW_END_SLACK 0.5  /* the ticks need not fall on the end of sending */

struct wpoint {
    double t, t0; /* the interval's end and start */
    double sent, completed, good, tokens;
};

/* A count of the point: 0 when absent or not sane, NAN when absent and
 * missing says so (a timeline without that column). */
static double count_of(const json_t *p, const char *key, bool nan_if_absent)
{
    const json_t *v = json_object_get(p, key);
    if (!v)
        return nan_if_absent ? NAN : 0;
    double x = json_is_number(v) ? json_number_value(v) : 0;
    return isfinite(x) && x > 0 ? x : 0;
}

/* The point's interval end, or NAN when it has none usable. */
static double time_of(const json_t *p)
{
    const json_t *v = json_object_get(p, "t_s");
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/*
 * The index one past the last interval of the sending window among pts[0..n)
 * (whole intervals only, ending by send_end + slack, or by the last interval
 * that sent anything when send_end is unknown).
 */
static size_t window_end(const struct wpoint *pts, size_t n, double send_end_s)
{
    size_t full = 0, e = 0;

    while (full < n && pts[full].t - pts[full].t0 >= WINDOW_FULL_TICK)
        full++;
    if (isfinite(send_end_s) && send_end_s > 0) {
        while (e < full && pts[e].t <= send_end_s + WINDOW_END_SLACK)
            e++;
        return e;
    }
    for (size_t i = 0; i < full; i++)
        if (pts[i].sent > 0)
            e = i + 1;
    return e;
}

/* The share of the interval (t0, t] after c: what of its counts falls after c, taken
 * as spread evenly over it. */
static double share_after(const struct wpoint *p, double c)
{
    if (p->t0 >= c)
        return 1;
    return p->t <= c ? 0 : (p->t - c) / (p->t - p->t0);
}

static void window_rates(const struct wpoint *pts, size_t e, double e2el_p50_s,
                         struct run_window *out)
{
    double ramp_end = out->send_start_s + e2el_p50_s;
    double sent = 0, done = 0, good = 0, tokens = 0;

    for (size_t i = 0; i < e; i++)
        sent += share_after(&pts[i], out->send_start_s) * pts[i].sent;
    out->sent = (uint64_t)llround(sent);
    double send_len = pts[e - 1].t - out->send_start_s;
    if (send_len > 0)
        out->sent_rps = sent / send_len;
    double len = pts[e - 1].t - ramp_end;
    if (!(len >= WINDOW_MIN_S))
        return;
    for (size_t i = 0; i < e; i++) {
        /* the interval the ramp ends in counts for its part after the ramp */
        double f = share_after(&pts[i], ramp_end);
        done += f * pts[i].completed;
        good += f * pts[i].good;
        tokens += f * pts[i].tokens;
    }
    out->valid = true;
    out->start_s = ramp_end;
    out->end_s = pts[e - 1].t;
    out->completed = (uint64_t)llround(done);
    out->good = isfinite(good) ? (uint64_t)llround(good) : 0;
    out->output_tokens = isfinite(tokens) ? (uint64_t)llround(tokens) : 0;
    out->request_throughput = done / len;
    out->output_throughput = tokens / len; /* NAN: the timeline has no such column */
    out->request_goodput = good / len;
}

void run_window_compute(const json_t *timeline, double warmup_s, double send_end_s,
                        double e2el_p50_s, struct run_window *out)
{
    size_t n = 0, i, cap = json_is_array(timeline) ? json_array_size(timeline) : 0;
    const json_t *p;
    double prev = 0;

    memset(out, 0, sizeof(*out));
    out->send_end_s = isfinite(send_end_s) && send_end_s > 0 ? send_end_s : NAN;
    out->start_s = out->end_s = NAN;
    out->sent_rps = out->request_throughput = out->output_throughput = NAN;
    out->request_goodput = NAN;
    warmup_s = isfinite(warmup_s) && warmup_s > 0 ? warmup_s : 0;
    out->send_start_s = warmup_s;
    if (!cap)
        return;
    struct wpoint *pts = ts_calloc(cap, sizeof(*pts));
    if (!pts)
        return; /* out of memory: no window, the whole-run rates stand */
    json_array_foreach(timeline, i, p)
    {
        double t = time_of(p);
        if (!isfinite(t) || t <= prev)
            continue;
        if (t <= warmup_s + 1e-9) {
            prev = t; /* the measured window opens at the end of the warm-up */
            continue;
        }
        pts[n++] = (struct wpoint){t,
                                   prev,
                                   count_of(p, "sent", false),
                                   count_of(p, "completed", false),
                                   count_of(p, "good", true),
                                   count_of(p, "output_tokens", true)};
        prev = t;
    }
    size_t e = window_end(pts, n, out->send_end_s);
    out->intervals = e;
    if (e && isfinite(e2el_p50_s) && e2el_p50_s > 0)
        window_rates(pts, e, e2el_p50_s, out);
    ts_free(pts);
}
