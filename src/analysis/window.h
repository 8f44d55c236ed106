/*
 * window.h - a run's rates over its steady window, from its timeline.
 *
 * A run's whole-run throughputs (completed / duration, vLLM's definition)
 * read low twice: the duration includes the drain after the last send, when
 * nothing new arrives, and the first request time, when nothing has come
 * back yet. The steady window leaves both out: it runs from one request time
 * (E2EL p50) after the measured window opened (the end of the warm-up, or
 * time 0) to the end of sending, and counts what ended inside it, whatever
 * the time it was sent (a closed loop's warm-up requests that end after the
 * warm-up are work done in the window). Rates are those counts over the
 * window's length. The timeline has one point a second: an interval that
 * the warm-up's end or the ramp's end falls in counts for its share after
 * it (its counts taken as spread evenly over it); the window ends with
 * the last whole interval ending by the end of sending (half an interval of
 * slack).
 *
 * A window shorter than WINDOW_MIN_S is too short to be steady: the rates
 * are then not given (valid false) and the whole-run ones stand.
 * docs/METRICS.md states this for users.
 */
#ifndef TS_ANALYSIS_WINDOW_H
#define TS_ANALYSIS_WINDOW_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define WINDOW_MIN_S 1.0

struct run_window {
    bool valid;            /* a steady window was found; the rates below are set */
    double send_start_s;   /* the sending window: the end of the warm-up (or 0) ... */
    double send_end_s;     /* ... to the end of sending (NAN: unknown); s since time 0 */
    double start_s, end_s; /* the steady window, s since time 0 */
    size_t intervals;      /* the timeline's points in the sending window (after warm-up) */
    uint64_t sent;         /* sent over the sending window */
    uint64_t completed;    /* ended ok inside the steady window (rounded: see above) */
    uint64_t good;         /* of those, good (goodput thresholds) */
    uint64_t output_tokens;
    double sent_rps;           /* sent / the sending window's length */
    double request_throughput; /* completed / the steady window's length */
    double output_throughput;  /* output_tokens / the steady window's length */
    double request_goodput;    /* good / the steady window's length */
    /* (each NAN when not known: no window, or a timeline without the column) */
};

/*
 * Computes *out from a result's timeline (an array of points with t_s, sent,
 * completed, good, output_tokens; anything else is skipped), the warm-up's
 * length, when sending ended (NAN or <= 0: the end of the last interval that
 * sent anything) and the run's E2EL p50 in seconds (NAN or <= 0 when no
 * request completed: no window then). Always fills *out; valid says whether
 * a steady window was found.
 */
void run_window_compute(const json_t *timeline, double warmup_s, double send_end_s,
                        double e2el_p50_s, struct run_window *out);

#endif
