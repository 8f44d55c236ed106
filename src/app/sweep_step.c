/*
 * sweep_step.c - the pure half of the sweep (sweep.h): a run's result into a
 * step with its saturation signals, the plan of the next load, the findings
 * and sweep.json.
 */
#include "app/sweep.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/knee.h"
#include "analysis/window.h"
#include "base/tsjson.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "ts_config.h"

/* Saturation thresholds (docs/SWEEP.md, "Saturation"). */
/* a trend counts when its slope is significant (knee.h linfit_rising) and ... */
#define SAT_TTFT_RISE_REL    1.0   /* ... TTFT rose by its lowest level over the window (doubled) */
#define SAT_TTFT_RISE_MS     10.0  /* ... and by at least 10 ms */
#define SAT_QUEUE_RISE_REL   0.5   /* in flight rose by half its mean ... */
#define SAT_QUEUE_RISE_MIN   2.0   /* ... and by at least 2 requests */
#define SAT_FOLLOW_MIN       0.9   /* completions below 90% of sends ... */
#define SAT_FOLLOW_SIGMAS    2.0   /* ... short by 2 square roots of the edges' sends ... */
#define SAT_FOLLOW_E2ELS     3.0   /* ... over a window of at least 3 request times */
#define SAT_LAG_RISE_MS      100.0 /* send lag p99 rose by 100 ms ... */
#define SAT_LAG_RISE_E2EL    0.25  /* ... and by a quarter of a request time */
#define SAT_ERR_RISE         0.01  /* error rate 1 point above the lowest earlier one ... */
#define SAT_ERR_SIGMAS       3.0   /* ... and 3 binomial standard errors */
#define SAT_PLATEAU_GAIN     0.25  /* throughput gain < 25% of the users' (sends') gain */
#define SAT_PLATEAU_MIN_RISE 0.1   /* rate mode: judged when the sends rose by over 10% ... */
#define SAT_PLATEAU_KEPT     0.9   /* ... and under 90% of them completed in the window */
#define QUALITY_DROP         0.05  /* ROUGE-L below its best at a lower load by this much */

static const char *const sat_names[] = {"ttft_growth", "queue_growth", "throughput", "errors",
                                        "send_lag"};

const char *sweep_sat_name(enum sweep_sat flag)
{
    for (unsigned i = 0; i < sizeof(sat_names) / sizeof(sat_names[0]); i++)
        if ((unsigned)flag == 1u << i)
            return sat_names[i];
    return "?";
}

static const char *const knee_metric_names[SWEEP_KNEE_METRIC_COUNT] = {
    "ttft_p99_ms", "ttft_p50_ms", "tpot_p99_ms", "e2el_p99_ms", "e2el_p50_ms",
};
static const char *const knee_metric_short[SWEEP_KNEE_METRIC_COUNT] = {
    "ttft.p99", "ttft.p50", "tpot.p99", "e2el.p99", "e2el.p50",
};

const char *sweep_knee_metric_name(enum sweep_knee_metric m)
{
    return (unsigned)m < SWEEP_KNEE_METRIC_COUNT ? knee_metric_names[m] : NULL;
}

int sweep_knee_metric_parse(const char *s, enum sweep_knee_metric *out)
{
    for (int i = 0; i < SWEEP_KNEE_METRIC_COUNT; i++) {
        if (!strcmp(s, knee_metric_names[i]) || !strcmp(s, knee_metric_short[i])) {
            *out = (enum sweep_knee_metric)i;
            return 0;
        }
    }
    return -EINVAL;
}

static double step_metric(const struct sweep_step *st, enum sweep_knee_metric m)
{
    switch (m) {
    case SWEEP_KNEE_TTFT_P99:
        return st->ttft_p99_ms;
    case SWEEP_KNEE_TTFT_P50:
        return st->ttft_p50_ms;
    case SWEEP_KNEE_TPOT_P99:
        return st->tpot_p99_ms;
    case SWEEP_KNEE_E2EL_P99:
        return st->e2el_p99_ms;
    case SWEEP_KNEE_E2EL_P50:
        return st->e2el_p50_ms;
    default:
        return NAN;
    }
}

/* ---- reading a result --------------------------------------------------------- */

/* obj.key as a number; NAN when missing, null or not a number. */
static double num(const json_t *obj, const char *key)
{
    const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The percentile pct ("p50") of the time to first token: ttfc, else ttft. */
static double first_token_ms(const json_t *sum, const char *pct)
{
    char key[32];
    snprintf(key, sizeof(key), "%s_ttfc_ms", pct);
    double v = num(sum, key);
    if (isfinite(v) && v > 0)
        return v;
    snprintf(key, sizeof(key), "%s_ttft_ms", pct);
    return num(sum, key);
}

static uint64_t count(const json_t *obj, const char *key)
{
    double v = num(obj, key);
    return v >= 0 && v < 1.8e19 ? (uint64_t)v : 0;
}

struct tl_point {
    double t, sent, completed, in_flight, ttft_p50, output_tokens, lag_p99;
};

#define TL_MAX 86400 /* a day of one-second points */

/* Reads the timeline's points after the warm-up (the drain included), in order. */
static size_t timeline_read(const json_t *tl, double warmup_s, double *t_start,
                            struct tl_point *pts, size_t max)
{
    size_t i, n = 0;
    const json_t *p;

    *t_start = 0;
    if (!json_is_array(tl))
        return 0;
    json_array_foreach(tl, i, p)
    {
        struct tl_point q = {num(p, "t_s"),       num(p, "sent"),        num(p, "completed"),
                             num(p, "in_flight"), num(p, "ttft_p50_ms"), num(p, "output_tokens"),
                             num(p, "lag_p99_ms")};
        if (!isfinite(q.t) || (n && q.t <= pts[n - 1].t))
            continue;
        if (q.t <= warmup_s) {
            *t_start = q.t; /* the next interval starts here */
            continue;
        }
        if (n == max)
            break;
        q.sent = isfinite(q.sent) && q.sent > 0 ? q.sent : 0;
        q.completed = isfinite(q.completed) && q.completed > 0 ? q.completed : 0;
        pts[n++] = q;
    }
    return n;
}

/* The TTFT p50 trend over the window (seconds with completions only). */
static void ttft_signal(struct sweep_step *st, const struct tl_point *pts, size_t n, double *x,
                        double *y)
{
    size_t m = 0;
    double lo = INFINITY;
    struct linfit f;

    for (size_t i = 0; i < n; i++) {
        if (pts[i].completed > 0 && isfinite(pts[i].ttft_p50) && pts[i].ttft_p50 > 0) {
            x[m] = pts[i].t;
            y[m] = pts[i].ttft_p50;
            lo = y[m] < lo ? y[m] : lo;
            m++;
        }
    }
    if (m < 3 || linfit_compute(x, y, m, &f))
        return;
    st->ttft_slope_ms_s = f.slope;
    st->ttft_t = f.t;
    double rise = f.slope * (x[m - 1] - x[0]);
    if (linfit_rising(&f) && rise >= SAT_TTFT_RISE_MS && rise >= SAT_TTFT_RISE_REL * lo)
        st->saturation |= SWEEP_SAT_TTFT;
}

/* The send lag's p99 trend over the window: requests the client could not send on time. */
static void lag_signal(struct sweep_step *st, const struct tl_point *pts, size_t n, double *x,
                       double *y)
{
    size_t m = 0;
    struct linfit f;
    double e2el_ms = isfinite(st->e2el_p50_ms) ? st->e2el_p50_ms : 0;

    for (size_t i = 0; i < n; i++) {
        if (isfinite(pts[i].lag_p99) && pts[i].lag_p99 >= 0) {
            x[m] = pts[i].t;
            y[m++] = pts[i].lag_p99;
        }
    }
    if (m < 3 || linfit_compute(x, y, m, &f))
        return;
    st->lag_slope_ms_s = f.slope;
    double rise = f.slope * (x[m - 1] - x[0]);
    if (linfit_rising(&f) && rise >= SAT_LAG_RISE_MS && rise >= SAT_LAG_RISE_E2EL * e2el_ms)
        st->saturation |= SWEEP_SAT_SEND_LAG;
}

/*
 * The steady part of the window: from one request time (e2el p50) after the
 * window opened, when the in-flight count has had time to settle; at least
 * the window without its first second.
 */
static size_t steady_start(const struct tl_point *pts, size_t n, double t_start, double e2el_s)
{
    size_t k = 0;
    double from = t_start + (isfinite(e2el_s) && e2el_s > 0 ? e2el_s : 0) + 1.0;

    while (k < n && pts[k].t < from)
        k++;
    if (n - k < 2)
        k = n > 1 ? 1 : n;
    return k;
}

/*
 * Completions following sends: the requests completed over the window less
 * its first k intervals, against those sent over the window less its last k,
 * k = one request time (e2el p50) in intervals. In a steady state they are
 * largely the same requests, so the ratio is near 1 whatever is in flight;
 * a server that cannot keep up completes fewer. Judged only on a window of
 * at least SAT_FOLLOW_E2ELS request times (and 2 intervals), and only on a
 * shortfall beyond SAT_FOLLOW_SIGMAS square roots of the sends within a
 * request time (e2el p99, at most k) of the two edges: those requests, whose
 * latencies differ from k, shift either way.
 */
static void follow_signal(struct sweep_step *st, const struct tl_point *pts, size_t w)
{
    double e2el_s = st->e2el_p50_ms / 1000, sent = 0, done = 0;
    size_t k;

    if (!(e2el_s > 0) || !isfinite(e2el_s) || e2el_s > (double)w)
        return;
    k = (size_t)ceil(e2el_s - 1e-9);
    k = k ? k : 1;
    if (w <= k || (double)(w - k) < SAT_FOLLOW_E2ELS * e2el_s || w - k < 2)
        return;
    for (size_t i = 0; i + k < w; i++) {
        sent += pts[i].sent;
        done += pts[i + k].completed;
    }
    if (!(sent > 0))
        return;
    st->completion_ratio = done / sent;
    /* the sends that may land across either edge: those within a request time (p99) of it */
    double zone = isfinite(st->e2el_p99_ms) && st->e2el_p99_ms / 1000 < (double)k
                      ? st->e2el_p99_ms / 1000
                      : (double)k;
    double edges = 2 * zone * sent / (double)(w - k);
    if (st->completion_ratio < SAT_FOLLOW_MIN && sent - done > SAT_FOLLOW_SIGMAS * sqrt(edges))
        st->saturation |= SWEEP_SAT_THROUGHPUT;
}

static void queue_signals(struct sweep_step *st, const struct tl_point *pts, size_t n,
                          double t_start, double *x, double *y)
{
    size_t k = steady_start(pts, n, t_start, st->e2el_p50_ms / 1000), m = 0;
    double mean = 0;
    struct linfit f;

    follow_signal(st, pts, n);
    for (size_t i = k; i < n; i++) {
        if (isfinite(pts[i].in_flight)) {
            x[m] = pts[i].t;
            y[m] = pts[i].in_flight;
            mean += y[m];
            m++;
        }
    }
    if (m < 3 || linfit_compute(x, y, m, &f))
        return;
    mean /= (double)m;
    st->inflight_slope_s = f.slope;
    double rise = f.slope * (x[m - 1] - x[0]);
    if (linfit_rising(&f) && rise >= SAT_QUEUE_RISE_MIN && rise >= SAT_QUEUE_RISE_REL * mean)
        st->saturation |= SWEEP_SAT_QUEUE;
}

static void read_quality(struct sweep_step *st, const json_t *doc)
{
    const json_t *q = json_object_get(doc, "quality");

    st->rouge_l_mean = st->bleu4_mean = st->exact_match_rate = NAN;
    if (!json_is_object(q))
        return;
    st->has_quality = true;
    st->rouge_l_mean = num(json_object_get(q, "rouge_l"), "mean");
    st->bleu4_mean = num(json_object_get(q, "bleu4"), "mean");
    st->exact_match_rate = num(q, "exact_match_rate");
}

/*
 * The step's window (analysis/window.h) computed from its timeline, sending
 * ending where the run says (summary.window.send_end_s) or warm-up + send_s
 * after time 0: its sending window bounds the signals, and its steady
 * window gives the rates unless the run's own (summary.window) is there.
 */
static void step_window(const struct sweep_step *st, const json_t *doc, double warmup_s,
                        struct run_window *w)
{
    const json_t *win = json_object_get(json_object_get(doc, "summary"), "window");
    double send_end = num(win, "send_end_s");

    if (!(send_end > 0))
        send_end = st->send_s > 0 ? warmup_s + st->send_s : NAN;
    run_window_compute(json_object_get(doc, "timeline"), warmup_s, send_end, st->e2el_p50_ms / 1000,
                       w);
}

/*
 * The steady window's rates: what completed inside it, so neither the drain
 * after the last send nor the first request time before anything came back
 * dilutes them; the run's own (summary.window) when it has them, else w.
 * Without a steady window the whole run's stand.
 */
static void read_window(struct sweep_step *st, const json_t *doc, struct run_window w)
{
    const json_t *win = json_object_get(json_object_get(doc, "summary"), "window");
    const char *method = json_string_value(json_object_get(win, "method"));

    if (method) {
        w.valid = !strcmp(method, "steady_window");
        w.sent_rps = num(win, "sent_rps");
        w.start_s = num(win, "start_s");
        w.end_s = num(win, "end_s");
        w.request_throughput = num(win, "request_throughput");
        w.output_throughput = num(win, "output_throughput");
        w.request_goodput = num(win, "request_goodput");
    }
    if (isfinite(w.sent_rps) && w.sent_rps > 0)
        st->sent_rps = w.sent_rps;
    if (!w.valid || !(w.end_s > w.start_s) || !isfinite(w.request_throughput))
        return;
    st->window_s = w.end_s - w.start_s;
    st->achieved_rps = w.request_throughput;
    if (isfinite(w.output_throughput))
        st->output_tps = w.output_throughput;
    if (isfinite(w.request_goodput) && isfinite(st->goodput_rps))
        st->goodput_rps = w.request_goodput;
}

/* The summary's numbers (the fallbacks of the window's rates). */
static void read_summary(struct sweep_step *st, const json_t *run, const json_t *sum,
                         enum sweep_mode mode)
{
    st->achieved_rps = num(sum, "request_throughput");
    st->output_tps = num(sum, "output_throughput");
    st->goodput_rps = num(sum, "request_goodput");
    st->requests = count(sum, "requests");
    st->completed = count(sum, "completed");
    st->failed = count(sum, "failed");
    st->error_rate = num(sum, "error_rate");
    st->seed = count(run, "seed");
    if (st->completed) {
        /* what users feel: the first token with content, reasoning or a tool
         * call (ttfc), not vLLM's first chunk, which a server may send before
         * prefill; vLLM's is used only where ttfc was not measured */
        st->ttft_p50_ms = first_token_ms(sum, "p50");
        st->ttft_p99_ms = first_token_ms(sum, "p99");
        st->tpot_p50_ms = num(sum, "p50_tpot_ms");
        st->tpot_p99_ms = num(sum, "p99_tpot_ms");
        st->e2el_p50_ms = num(sum, "p50_e2el_ms");
        st->e2el_p99_ms = num(sum, "p99_e2el_ms");
    } else {
        st->ttft_p50_ms = st->ttft_p99_ms = st->tpot_p50_ms = NAN;
        st->tpot_p99_ms = st->e2el_p50_ms = st->e2el_p99_ms = NAN;
    }
    double duration = num(sum, "duration");
    st->window_s = NAN;
    st->sent_rps = duration > 0 ? (double)st->requests / duration : NAN;

    if (mode == SWEEP_RATE && isfinite(num(run, "rate")))
        st->offered = num(run, "rate");
    else
        st->offered = st->sent_rps;
}

/* The window's rates and the in-step saturation signals from the timeline. */
static int read_timeline(struct sweep_step *st, const json_t *doc, enum sweep_mode mode, char *err,
                         size_t errlen)
{
    const json_t *tl = json_object_get(doc, "timeline");
    double warmup_s = num(json_object_get(doc, "run"), "warmup_s"), t_start, *x, *y;
    struct run_window win;
    size_t n = json_is_array(tl) ? json_array_size(tl) : 0, w;
    struct tl_point *pts;

    warmup_s = isfinite(warmup_s) ? warmup_s : 0;
    n = n > TL_MAX ? TL_MAX : n;
    if (n == 0)
        return 0;
    pts = ts_malloc(n * sizeof(*pts));
    x = ts_malloc(n * sizeof(*x));
    y = ts_malloc(n * sizeof(*y));
    if (!pts || !x || !y) {
        ts_free(pts);
        ts_free(x);
        ts_free(y);
        ts_errf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    n = timeline_read(tl, warmup_s, &t_start, pts, n);
    step_window(st, doc, warmup_s, &win);
    read_window(st, doc, win);
    w = win.intervals <= n ? win.intervals : n;
    if (mode == SWEEP_CONCURRENCY)
        st->offered = st->sent_rps;
    ttft_signal(st, pts, w, x, y);
    lag_signal(st, pts, w, x, y);
    if (mode == SWEEP_RATE)
        queue_signals(st, pts, w, t_start, x, y);
    ts_free(pts);
    ts_free(x);
    ts_free(y);
    return 0;
}

int sweep_step_read(const json_t *doc, enum sweep_mode mode, struct sweep_step *st, char *err,
                    size_t errlen)
{
    const json_t *schema = json_object_get(doc, "schema"), *run, *sum, *slo, *v;
    size_t i;

    if (!json_is_string(schema) || strcmp(json_string_value(schema), "tokenstorm.result/1")) {
        ts_errf(err, errlen, "not a tokenstorm.result/1 document");
        return TS_PARSE;
    }
    run = json_object_get(doc, "run");
    sum = json_object_get(doc, "summary");
    if (!json_is_object(sum) || !isfinite(num(sum, "request_throughput")) ||
        !isfinite(num(sum, "duration"))) {
        ts_errf(err, errlen, "result has no summary with request_throughput and duration");
        return TS_PARSE;
    }
    read_summary(st, run, sum, mode);
    st->nslo = 0;
    st->slo_pass = true;
    slo = json_object_get(doc, "slo");
    json_array_foreach(slo, i, v)
    {
        st->nslo++;
        if (!json_is_true(json_object_get(v, "pass")))
            st->slo_pass = false;
    }
    read_quality(st, doc);
    st->saturation = 0;
    st->ttft_slope_ms_s = st->ttft_t = st->inflight_slope_s = st->completion_ratio = NAN;
    st->lag_slope_ms_s = NAN;
    return read_timeline(st, doc, mode, err, errlen);
}

/* What a step sent per second: sent_rps when measured, else the rate asked. */
static double sent_of(const struct sweep_step *st)
{
    return isfinite(st->sent_rps) && st->sent_rps > 0 ? st->sent_rps : st->load;
}

/*
 * Rate mode: the step sent more than the best lower step (by over
 * SAT_PLATEAU_MIN_RISE) but completed hardly more (under SAT_PLATEAU_GAIN of
 * the rise), and fewer than SAT_PLATEAU_KEPT of its own sends: the server's
 * throughput has flattened. Needs no window of its own, so it holds for
 * steps too short to compare completions with sends one request time apart.
 */
static bool rate_plateau(const struct sweep_step *st, const struct sweep_step *best)
{
    double rise = sent_of(st) / sent_of(best) - 1;
    double gain = st->achieved_rps / best->achieved_rps - 1;
    return rise > SAT_PLATEAU_MIN_RISE && gain < SAT_PLATEAU_GAIN * rise &&
           st->achieved_rps < SAT_PLATEAU_KEPT * sent_of(st);
}

void sweep_step_judge(struct sweep_step *st, const struct sweep_step *earlier, size_t n,
                      enum sweep_mode mode)
{
    const struct sweep_step *base = NULL, *best = NULL;

    for (size_t i = 0; i < n; i++) {
        const struct sweep_step *e = &earlier[i];
        if (e == st || e->interrupted || !(e->load < st->load))
            continue;
        if (isfinite(e->error_rate) && (!base || e->error_rate < base->error_rate))
            base = e;
        if (isfinite(e->achieved_rps) && (!best || e->achieved_rps > best->achieved_rps))
            best = e;
    }
    if (base && isfinite(st->error_rate)) {
        double n1 = (double)(base->completed + base->failed),
               n2 = (double)(st->completed + st->failed);
        double p1 = base->error_rate, p2 = st->error_rate, rise = p2 - p1;
        double se = sqrt((n1 > 0 ? p1 * (1 - p1) / n1 : 0) + (n2 > 0 ? p2 * (1 - p2) / n2 : 0));
        if (rise > SAT_ERR_RISE && rise > SAT_ERR_SIGMAS * se)
            st->saturation |= SWEEP_SAT_ERRORS;
    }
    if (mode == SWEEP_CONCURRENCY && best && best->achieved_rps > 0 && best->load > 0) {
        double gain = st->achieved_rps / best->achieved_rps - 1;
        double users = st->load / best->load - 1;
        if (gain < SAT_PLATEAU_GAIN * users)
            st->saturation |= SWEEP_SAT_THROUGHPUT;
    }
    if (mode == SWEEP_RATE && best && best->achieved_rps > 0 && rate_plateau(st, best))
        st->saturation |= SWEEP_SAT_THROUGHPUT;
}

/* ---- the plan ---------------------------------------------------------------- */

static bool load_ran(const struct sweep_step *steps, size_t n, double load)
{
    for (size_t i = 0; i < n; i++)
        if (fabs(steps[i].load - load) <= 1e-9 * fabs(load))
            return true;
    return false;
}

static bool in_grid(const struct sweep_plan *plan, double load)
{
    for (size_t i = 0; i < plan->ngrid; i++)
        if (fabs(plan->grid[i] - load) <= 1e-9 * fabs(load))
            return true;
    return false;
}

struct bracket {
    double lo, hi;
    bool ok;
};

/* Highest load with !bad below the lowest with bad (bad = SLO failed / saturated). */
static struct bracket find_bracket(const struct sweep_step *steps, size_t n, bool slo)
{
    struct bracket b = {-INFINITY, INFINITY, false};
    bool any_verdict = false;

    for (size_t i = 0; i < n; i++) {
        const struct sweep_step *s = &steps[i];
        if (s->interrupted)
            continue;
        any_verdict |= s->nslo > 0;
        bool bad = slo ? (s->nslo > 0 && !s->slo_pass) : s->saturation != 0;
        if (bad && s->load < b.hi)
            b.hi = s->load;
    }
    for (size_t i = 0; i < n; i++) {
        const struct sweep_step *s = &steps[i];
        bool bad = slo ? (s->nslo > 0 && !s->slo_pass) : s->saturation != 0;
        if (!s->interrupted && !bad && s->load < b.hi && s->load > b.lo)
            b.lo = s->load;
    }
    b.ok = isfinite(b.lo) && isfinite(b.hi) && (!slo || any_verdict);
    return b;
}

static bool bracket_mid(const struct sweep_plan *plan, struct bracket b,
                        const struct sweep_step *steps, size_t n, double *mid)
{
    double m;

    if (!b.ok || !bisect_next(b.lo, b.hi, plan->tolerance, &m))
        return false;
    if (plan->mode == SWEEP_CONCURRENCY) {
        m = floor(m + 0.5);
        if (!(m > b.lo && m < b.hi))
            return false;
    } else {
        /* three significant digits, loads people can read, when that stays inside */
        double scale = pow(10, 2 - floor(log10(m)));
        double r = round(m * scale) / scale;
        if (r > b.lo && r < b.hi)
            m = r;
    }
    if (load_ran(steps, n, m))
        return false;
    *mid = m;
    return true;
}

/* A step above steps[k] ran and was not saturated: steps[k]'s flag was not the onset. */
static bool unsaturated_above(const struct sweep_step *steps, size_t n, size_t k)
{
    for (size_t i = 0; i < n; i++)
        if (steps[i].load > steps[k].load && !steps[i].saturation && !steps[i].interrupted)
            return true;
    return false;
}

bool sweep_plan_next(const struct sweep_plan *plan, const struct sweep_step *steps, size_t n,
                     double *load)
{
    double first_sat = INFINITY;
    size_t above = 0, refined = 0;

    for (size_t i = 0; i < n; i++)
        if (steps[i].saturation && steps[i].load < first_sat && !unsaturated_above(steps, n, i))
            first_sat = steps[i].load;
    for (size_t i = 0; i < n; i++) {
        if (steps[i].load > first_sat && in_grid(plan, steps[i].load))
            above++;
        if (!in_grid(plan, steps[i].load))
            refined++;
    }
    for (size_t i = 0; i < plan->ngrid; i++) {
        double g = plan->grid[i];
        if (load_ran(steps, n, g))
            continue;
        if (g > first_sat && above >= plan->past_saturation)
            break;
        *load = g;
        return true;
    }
    if (refined >= plan->refine)
        return false;
    if (plan->extend > 1 && n) {
        double top = 0;
        bool bad = false;
        for (size_t i = 0; i < n; i++) {
            top = steps[i].load > top ? steps[i].load : top;
            bad |= steps[i].saturation || (steps[i].nslo && !steps[i].slo_pass);
        }
        if (!bad) {
            double next = top * plan->extend;
            *load = plan->mode == SWEEP_CONCURRENCY ? ceil(next) : round(next * 100) / 100;
            return true;
        }
    }
    struct bracket bs = find_bracket(steps, n, true), bk = find_bracket(steps, n, false);
    double ms, mk;
    bool has_s = bracket_mid(plan, bs, steps, n, &ms), has_k = bracket_mid(plan, bk, steps, n, &mk);
    if (has_s && has_k) {
        /* the wider bracket first, relative to its upper end */
        has_s = (bs.hi - bs.lo) / bs.hi >= (bk.hi - bk.lo) / bk.hi;
        has_k = !has_s;
    }
    if (has_s)
        *load = ms;
    else if (has_k)
        *load = mk;
    return has_s || has_k;
}

static int plan_add(struct sweep_plan *plan, double v)
{
    if (plan->mode == SWEEP_CONCURRENCY)
        v = floor(v + 0.5);
    if (!(v > 0) || !isfinite(v))
        return -EINVAL;
    if (plan->ngrid && plan->grid[plan->ngrid - 1] >= v)
        return 0; /* a duplicate after rounding */
    if (plan->ngrid == SWEEP_MAX_STEPS)
        return -EINVAL;
    plan->grid[plan->ngrid++] = v;
    return 0;
}

int sweep_plan_ladder(struct sweep_plan *plan, double start, double factor, double max)
{
    if (!(start > 0) || !(factor > 1) || !(max >= start) || !isfinite(max))
        return -EINVAL;
    plan->ngrid = 0;
    for (double v = start; v <= max * (1 + 1e-9); v *= factor)
        if (plan_add(plan, v))
            return -EINVAL;
    return 0;
}

int sweep_plan_adaptive(struct sweep_plan *plan, size_t k, double sync_rps, double sat_rps,
                        double e2el_s)
{
    double lo, hi;

    if (!(sat_rps > 0) || !isfinite(sat_rps) || k < 2 || k > SWEEP_MAX_STEPS)
        return -EINVAL;
    if (plan->mode == SWEEP_RATE) {
        hi = sat_rps;
        lo = isfinite(sync_rps) && sync_rps > hi / 10 ? sync_rps : hi / 10;
        lo = lo > hi / 2 ? hi / 2 : lo;
    } else {
        if (!(e2el_s > 0) || !isfinite(e2el_s))
            return -EINVAL;
        lo = 1;
        hi = 2 * sat_rps * e2el_s;
        hi = hi < 2 ? 2 : hi > 1e6 ? 1e6 : hi;
    }
    plan->ngrid = 0;
    plan->extend = 1.25;
    for (size_t i = 0; i < k; i++) {
        double v = lo * pow(hi / lo, (double)i / (double)(k - 1));
        if (plan->mode == SWEEP_RATE)
            v = round(v * 100) / 100; /* loads people can read and type */
        if (plan_add(plan, v))
            return -EINVAL;
    }
    return 0;
}

/* ---- findings --------------------------------------------------------------- */

static int by_load(const void *a, const void *b)
{
    const struct sweep_step *x = *(const struct sweep_step *const *)a;
    const struct sweep_step *y = *(const struct sweep_step *const *)b;
    return x->load < y->load ? -1 : x->load > y->load;
}

/* Pointers to the steps in ascending load; interrupted ones left out when asked. */
static size_t sorted(const struct sweep_step *steps, size_t n, bool skip_interrupted,
                     const struct sweep_step **out)
{
    size_t m = 0;
    for (size_t i = 0; i < n && m < SWEEP_MAX_STEPS; i++)
        if (!(skip_interrupted && steps[i].interrupted))
            out[m++] = &steps[i];
    qsort(out, m, sizeof(*out), by_load);
    return m;
}

static void find_knee(const struct sweep_step **s, size_t n, const struct sweep_analysis_cfg *cfg,
                      struct sweep_findings *f)
{
    double x[SWEEP_MAX_STEPS], y[SWEEP_MAX_STEPS];
    const struct sweep_step *at[SWEEP_MAX_STEPS];
    size_t m = 0;
    struct knee k;

    for (size_t i = 0; i < n; i++) {
        double v = step_metric(s[i], cfg->knee_metric);
        if (isfinite(v)) {
            x[m] = s[i]->load;
            y[m] = v;
            at[m++] = s[i];
        }
    }
    if (knee_find(x, y, m, cfg->knee_min_score, &k))
        return;
    f->has_knee = true;
    f->knee_load = k.x;
    f->knee_latency_ms = k.y;
    f->knee_throughput = at[k.index]->achieved_rps;
    f->knee_score = k.score;
}

static void find_goodput(const struct sweep_step **s, size_t n, struct sweep_findings *f)
{
    double load[SWEEP_MAX_STEPS];
    bool pass[SWEEP_MAX_STEPS];
    const struct sweep_step *at[SWEEP_MAX_STEPS];
    struct goodput_bracket b;
    size_t m = 0;

    for (size_t i = 0; i < n; i++) {
        if (s[i]->nslo == 0)
            continue;
        load[m] = s[i]->load;
        pass[m] = s[i]->slo_pass;
        at[m++] = s[i];
    }
    if (m == 0 || goodput_bracket_find(load, pass, m, &b) || b.pass < 0)
        return;
    const struct sweep_step *p = at[b.pass];
    f->has_goodput = true;
    f->goodput_load = p->load;
    f->goodput_from_throughput = !isfinite(p->goodput_rps);
    f->goodput_rps = f->goodput_from_throughput ? p->achieved_rps : p->goodput_rps;
    f->bracket_pass = p->load;
    f->bracket_fail = b.fail >= 0 ? at[b.fail]->load : NAN;
}

static void find_critical(const struct sweep_step **s, size_t n,
                          const struct sweep_analysis_cfg *cfg, struct sweep_findings *f)
{
    double load[SWEEP_MAX_STEPS], eps[SWEEP_MAX_STEPS], lmax = 0;
    struct critical_fit c;
    size_t m = 0;

    for (size_t i = 0; i < n; i++) {
        lmax = s[i]->load > lmax ? s[i]->load : lmax;
        if (isfinite(s[i]->error_rate)) {
            load[m] = s[i]->load;
            eps[m++] = s[i]->error_rate;
        }
    }
    if (critical_fit_compute(load, eps, m, cfg->epsilon0, cfg->fit_min_points, &c))
        return;
    f->has_critical = true;
    f->lambda_c = c.lambda_c;
    f->epsilon0 = c.epsilon0;
    f->delta_lambda = c.delta_lambda;
    f->r2 = c.r2;
    f->critical_points = c.points;
    f->critical_why = critical_fit_not_meaningful(c.lambda_c, c.r2, lmax);
}

static void find_quality_drop(const struct sweep_step **s, size_t n, struct sweep_findings *f)
{
    const struct sweep_step *best = NULL;
    double drop = 0;

    for (size_t i = 0; i < n; i++) {
        if (!s[i]->has_quality || !isfinite(s[i]->rouge_l_mean))
            continue;
        if (best && best->rouge_l_mean - s[i]->rouge_l_mean >= QUALITY_DROP &&
            best->rouge_l_mean - s[i]->rouge_l_mean > drop) {
            drop = best->rouge_l_mean - s[i]->rouge_l_mean;
            f->has_quality_drop = true;
            f->quality_from_load = best->load;
            f->quality_from = best->rouge_l_mean;
            f->quality_to_load = s[i]->load;
            f->quality_to = s[i]->rouge_l_mean;
        }
        if (!best || s[i]->rouge_l_mean > best->rouge_l_mean)
            best = s[i];
    }
}

void sweep_analyse(const struct sweep_step *steps, size_t n, const struct sweep_analysis_cfg *cfg,
                   struct sweep_findings *out)
{
    const struct sweep_step *s[SWEEP_MAX_STEPS];
    size_t m = sorted(steps, n, true, s);

    memset(out, 0, sizeof(*out));
    out->bracket_fail = NAN;
    find_knee(s, m, cfg, out);
    if (cfg->has_slos)
        find_goodput(s, m, out);
    find_critical(s, m, cfg, out);
    find_quality_drop(s, m, out);
}

/* ---- sweep.json --------------------------------------------------------------- */

static json_t *step_json(const struct sweep_step *st)
{
    json_t *o = json_object(), *sat = json_array(), *sig = json_object(), *q;
    int rc = 0;

    rc |= tsjson_put(o, "load", tsjson_num(st->load));
    rc |= tsjson_put(o, "dir", json_string(st->dir));
    rc |= tsjson_put(o, "seed", tsjson_count(st->seed));
    rc |= tsjson_put(o, "offered", tsjson_num(st->offered));
    rc |= tsjson_put(o, "sent_rps", tsjson_num(st->sent_rps));
    bool window = isfinite(st->window_s) && st->window_s > 0;
    rc |= tsjson_put(o, "window_s", tsjson_num(window ? st->window_s : NAN));
    rc |= tsjson_put(o, "rates_from", json_string(window ? "window" : "summary"));
    rc |= tsjson_put(o, "achieved_rps", tsjson_num(st->achieved_rps));
    rc |= tsjson_put(o, "output_tps", tsjson_num(st->output_tps));
    rc |= tsjson_put(o, "goodput_rps", tsjson_num(st->goodput_rps));
    rc |= tsjson_put(o, "ttft_p50_ms", tsjson_num(st->ttft_p50_ms));
    rc |= tsjson_put(o, "ttft_p99_ms", tsjson_num(st->ttft_p99_ms));
    rc |= tsjson_put(o, "tpot_p50_ms", tsjson_num(st->tpot_p50_ms));
    rc |= tsjson_put(o, "tpot_p99_ms", tsjson_num(st->tpot_p99_ms));
    rc |= tsjson_put(o, "e2el_p50_ms", tsjson_num(st->e2el_p50_ms));
    rc |= tsjson_put(o, "e2el_p99_ms", tsjson_num(st->e2el_p99_ms));
    rc |= tsjson_put(o, "error_rate", tsjson_num(st->error_rate));
    rc |= tsjson_put(o, "slo_pass", st->nslo ? json_boolean(st->slo_pass) : json_null());
    rc |= tsjson_put(o, "saturated", json_boolean(st->saturation != 0));
    if (st->has_quality) {
        q = json_object();
        rc |= tsjson_put(o, "quality", q);
        rc |= tsjson_put(q, "rouge_l_mean", tsjson_num(st->rouge_l_mean));
        rc |= tsjson_put(q, "bleu4_mean", tsjson_num(st->bleu4_mean));
        rc |= tsjson_put(q, "exact_match_rate", tsjson_num(st->exact_match_rate));
    } else {
        rc |= tsjson_put(o, "quality", json_null());
    }
    rc |= tsjson_put(o, "seq", json_integer(st->seq));
    rc |= tsjson_put(o, "requests", tsjson_count(st->requests));
    rc |= tsjson_put(o, "completed", tsjson_count(st->completed));
    rc |= tsjson_put(o, "failed", tsjson_count(st->failed));
    rc |= tsjson_put(o, "interrupted", json_boolean(st->interrupted));
    rc |= tsjson_put(o, "saturation", sat);
    for (unsigned b = 0; !rc && b < SWEEP_SAT_NFLAGS; b++)
        if (st->saturation & (1u << b))
            rc |=
                json_array_append_new(sat, json_string(sweep_sat_name((enum sweep_sat)(1u << b))));
    rc |= tsjson_put(o, "signals", sig);
    rc |= tsjson_put(sig, "ttft_slope_ms_per_s", tsjson_num(st->ttft_slope_ms_s));
    rc |= tsjson_put(sig, "ttft_slope_t", tsjson_num(st->ttft_t));
    rc |= tsjson_put(sig, "in_flight_slope_per_s", tsjson_num(st->inflight_slope_s));
    rc |= tsjson_put(sig, "completion_ratio", tsjson_num(st->completion_ratio));
    rc |= tsjson_put(sig, "send_lag_slope_ms_per_s", tsjson_num(st->lag_slope_ms_s));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *findings_knee(const struct sweep_outcome *o)
{
    const struct sweep_findings *f = &o->findings;
    if (!f->has_knee)
        return json_null();
    return json_pack("{s:o, s:o, s:o, s:s, s:s, s:s, s:o}", "load", tsjson_num(f->knee_load),
                     "throughput", tsjson_num(f->knee_throughput), "latency_ms",
                     tsjson_num(f->knee_latency_ms), "metric",
                     sweep_knee_metric_name(o->acfg.knee_metric), "method", "max-curvature",
                     "algorithm", "kneedle", "score", tsjson_num(f->knee_score));
}

static json_t *findings_goodput(const struct sweep_findings *f)
{
    if (!f->has_goodput)
        return json_null();
    return json_pack("{s:o, s:o, s:[o, o], s:s}", "load", tsjson_num(f->goodput_load),
                     "goodput_rps", tsjson_num(f->goodput_rps), "bracket",
                     tsjson_num(f->bracket_pass), tsjson_num(f->bracket_fail), "from",
                     f->goodput_from_throughput ? "request_throughput" : "request_goodput");
}

static json_t *findings_critical(const struct sweep_findings *f)
{
    if (!f->has_critical)
        return json_null();
    return json_pack("{s:o, s:o, s:o, s:o, s:I, s:b, s:s?}", "lambda_c", tsjson_num(f->lambda_c),
                     "epsilon0", tsjson_num(f->epsilon0), "delta_lambda",
                     tsjson_num(f->delta_lambda), "r2", tsjson_num(f->r2), "points",
                     (json_int_t)f->critical_points, "meaningful", !f->critical_why,
                     "not_meaningful_because", f->critical_why);
}

static json_t *findings_quality(const struct sweep_findings *f)
{
    if (!f->has_quality_drop)
        return json_null();
    return json_pack("{s:s, s:o, s:o, s:o, s:o}", "metric", "rouge_l_mean", "from_load",
                     tsjson_num(f->quality_from_load), "from", tsjson_num(f->quality_from),
                     "to_load", tsjson_num(f->quality_to_load), "to", tsjson_num(f->quality_to));
}

static json_t *interference_json(const struct sweep_outcome *o)
{
    json_t *a;

    if (!o->ninterference)
        return json_null();
    a = json_array();
    for (size_t i = 0; a && i < o->ninterference; i++) {
        const struct sweep_interference *x = &o->interference[i];
        json_t *e = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:s, s:s}", "victim", x->victim,
                              "aggressor", x->aggressor, "metric", x->metric, "p99_alone_ms",
                              tsjson_num(x->p99_alone_ms), "p99_with_ms",
                              tsjson_num(x->p99_with_ms), "delta", tsjson_num(x->delta),
                              "dir_alone", x->dir_alone, "dir_with", x->dir_with);
        if (!e || json_array_append_new(a, e)) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

int sweep_json_build(const struct sweep_outcome *o, json_t **out)
{
    const struct sweep_step *s[SWEEP_MAX_STEPS];
    json_t *doc = json_object(), *steps = json_array(), *slo = json_array(), *ad;
    char when[40];
    int rc = 0;

    rc |= tsjson_put(doc, "schema", json_string(SWEEP_SCHEMA));
    rc |= tsjson_put(doc, "tool",
                     json_pack("{s:s, s:s}", "name", "tokenstorm", "version", TS_VERSION));
    rc |= tsjson_put(doc, "mode", json_string(o->mode == SWEEP_RATE ? "rate" : "concurrency"));
    rc |= tsjson_put(doc, "plan", json_string(o->plan ? o->plan : "none"));
    rc |= tsjson_put(doc, "target", o->target ? json_string(o->target) : json_null());
    rc |= tsjson_put(doc, "slo", slo);
    for (size_t i = 0; !rc && i < o->nslos; i++)
        rc |= json_array_append_new(slo, json_string(o->slos[i]));
    rc |= tsjson_put(doc, "started_at",
                     o->started_wall_ns
                         ? json_string(ts_wall_format(o->started_wall_ns, when, sizeof(when)))
                         : json_null());
    rc |= tsjson_put(doc, "interrupted", json_boolean(o->interrupted));
    rc |= tsjson_put(doc, "steps", steps);
    size_t m = sorted(o->steps, o->nsteps, false, s);
    for (size_t i = 0; !rc && i < m; i++) {
        json_t *j = step_json(s[i]);
        rc |= !j || json_array_append_new(steps, j);
    }
    if (o->has_probes) {
        ad = json_object();
        rc |= tsjson_put(doc, "adaptive", ad);
        rc |= tsjson_put(ad, "baseline", step_json(&o->baseline));
        rc |= tsjson_put(ad, "saturation", step_json(&o->saturation));
    } else {
        rc |= tsjson_put(doc, "adaptive", json_null());
    }
    rc |= tsjson_put(doc, "knee", findings_knee(o));
    rc |= tsjson_put(doc, "max_goodput", findings_goodput(&o->findings));
    rc |= tsjson_put(doc, "critical_load", findings_critical(&o->findings));
    rc |= tsjson_put(doc, "quality_drop", findings_quality(&o->findings));
    rc |= tsjson_put(doc, "interference", interference_json(o));
    if (rc) {
        json_decref(doc);
        return -ENOMEM;
    }
    *out = doc;
    return 0;
}
