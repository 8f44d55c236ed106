/*
 * console.h - the lines a run shows on the terminal while it goes: the
 * header before the first progress line (what is loaded, how, for how long,
 * where the results go) and the progress line itself, fitted to the
 * terminal's width. Pure formatting: the caller prints and finds the width.
 */
#ifndef TS_REPORT_CONSOLE_H
#define TS_REPORT_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The figures of one progress line. */
struct console_progress {
    double elapsed_s;
    double total_s;        /* planned sending window; 0 when unknown */
    uint64_t requests_max; /* --requests N; 0 when not given */
    uint64_t sent, completed, errors, in_flight;
    double rate;         /* completed/s over the last interval */
    double tokens_per_s; /* over the last interval */
    bool draining;       /* sending is over */
    bool show_ttft;      /* the run streams: TTFT has a meaning */
    double ttft_p50_ms;  /* of the last interval; 0 = no value yet */
    double ttft_p99_ms;
};

/*
 * The progress line into out (NUL-terminated, at most cap bytes), at most
 * width columns when width > 0 (a terminal: so that it never wraps; fields
 * that do not fit are left out, the least useful first), and returns its
 * length in bytes. A value not measured yet is "–", never 0 ms. With
 * requests_max the line counts sent/N and, while sending, an ETA at the
 * average sending rate so far.
 */
size_t console_progress_line(const struct console_progress *p, unsigned width, char *out,
                             size_t cap);

/* The columns s takes on a terminal: its UTF-8 characters. */
size_t console_width(const char *s);

/* What the header says. Strings are borrowed; NULL leaves a part out. */
struct console_header {
    const char *target; /* the endpoint URL requests go to */
    const char *sim;    /* the built-in simulator's profile, or NULL for a real target */
    const char *model;
    const char *endpoint; /* chat, completions, embeddings */
    const char *scenario; /* the scenario file, or NULL */
    size_t classes;       /* its traffic classes */
    /* the load (ignored with a scenario: its classes set their own) */
    bool open;            /* open loop */
    const char *arrival;  /* poisson, constant, gamma:B */
    double rate, ramp_to; /* requests/s; ramp_to > 0: a linear ramp */
    const char *stages;   /* --stages, or NULL */
    uint32_t concurrency; /* closed loop: users; open loop: a cap (0: none) */
    double duration_s;    /* 0: until the requests are done */
    uint64_t requests;    /* 0: no limit */
    double warmup_s;
    const char *out_dir; /* where result.json goes */
};

/*
 * The header into out (NUL-terminated, at most cap bytes): one line per
 * part, each starting with "tokenstorm run: ", e.g.
 *   tokenstorm run: target http://127.0.0.1:8000/v1/chat/completions (built-in
 *   simulator, llama3-8b-a100), model M, endpoint chat
 *   tokenstorm run: load open loop, poisson arrivals, 10 req/s, for 20s
 *   tokenstorm run: results in tokenstorm-results/...-run/
 * Returns its length in bytes.
 */
size_t console_header_text(const struct console_header *h, char *out, size_t cap);

#endif
