/*
 * console.c - the run's header and progress lines (console.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "report/console.h"

#define NONE "\xe2\x80\x93" /* "–": no value yet */

size_t console_width(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* A duration as people read it: 42s, 3m05s, 1h20m. */
static void fmt_dur(double s, char *out, size_t cap)
{
    unsigned long t = s < 0 ? 0 : (unsigned long)(s + 0.5);
    if (t < 60)
        snprintf(out, cap, "%lus", t);
    else if (t < 3600)
        snprintf(out, cap, "%lum%02lus", t / 60, t % 60);
    else
        snprintf(out, cap, "%luh%02lum", t / 3600, t / 60 % 60);
}

static void fmt_ms(double ms, char *out, size_t cap)
{
    if (ms > 0)
        snprintf(out, cap, "%.0f ms", ms);
    else
        snprintf(out, cap, NONE);
}

#define FIELDS    9
#define FIELD_MAX 64

/* One part of the progress line and how much it is worth keeping. */
struct field {
    char text[FIELD_MAX];
    int keep; /* higher: kept longer when the terminal is narrow */
    bool on;
};

static void field_set(struct field *f, int keep, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void field_set(struct field *f, int keep, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->text, sizeof f->text, fmt, ap);
    va_end(ap);
    f->keep = keep;
    f->on = true;
}

/* The fields in the order they are shown. */
static size_t progress_fields(const struct console_progress *p, struct field *f)
{
    char a[32], b[32];
    size_t n = 0;
    memset(f, 0, sizeof(*f) * FIELDS);
    fmt_dur(p->elapsed_s, a, sizeof a);
    if (p->draining)
        field_set(&f[n++], 10, "draining %s", a);
    else if (p->total_s > 0 && !p->requests_max)
        field_set(&f[n++], 10, "%5s/%.0fs", a, p->total_s);
    else
        field_set(&f[n++], 10, "%5s", a);
    if (p->requests_max)
        field_set(&f[n++], 9, "sent %llu/%llu", (unsigned long long)p->sent,
                  (unsigned long long)p->requests_max);
    else
        field_set(&f[n++], 9, "sent %llu", (unsigned long long)p->sent);
    if (p->requests_max && !p->draining && p->sent && p->elapsed_s > 0) {
        double left = p->sent < p->requests_max ? (double)(p->requests_max - p->sent) : 0;
        fmt_dur(left / ((double)p->sent / p->elapsed_s), a, sizeof a);
        field_set(&f[n++], 7, "ETA %s", a);
    }
    field_set(&f[n++], 8, "done %llu", (unsigned long long)p->completed);
    field_set(&f[n++], 8, "err %llu", (unsigned long long)p->errors);
    field_set(&f[n++], 3, "in-flight %llu", (unsigned long long)p->in_flight);
    field_set(&f[n++], 5, "%.1f req/s", p->rate);
    field_set(&f[n++], 4, "%.0f tok/s", p->tokens_per_s);
    if (p->show_ttft) {
        fmt_ms(p->ttft_p50_ms, a, sizeof a);
        fmt_ms(p->ttft_p99_ms, b, sizeof b);
        field_set(&f[n++], 6, "TTFT p50 %s p99 %s", a, b);
    }
    return n;
}

size_t console_progress_line(const struct console_progress *p, unsigned width, char *out,
                             size_t cap)
{
    struct field f[FIELDS];
    size_t n = progress_fields(p, f), total = 0, shown = n;
    for (size_t i = 0; i < n; i++)
        total += console_width(f[i].text) + (i ? 2 : 0);
    /* leave the last column free: a line that fills it wraps on some terminals */
    while (width > 0 && total + 1 > width && shown > 1) {
        size_t drop = SIZE_MAX;
        for (size_t i = 0; i < n; i++)
            if (f[i].on && (drop == SIZE_MAX || f[i].keep < f[drop].keep))
                drop = i;
        f[drop].on = false;
        total -= console_width(f[drop].text) + 2;
        shown--;
    }
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && len < cap; i++) {
        if (!f[i].on)
            continue;
        int w = snprintf(out + len, cap - len, "%s%s", len ? "  " : "", f[i].text);
        if (w < 0)
            break;
        len = (size_t)w < cap - len ? len + (size_t)w : cap - 1;
    }
    return len;
}

/* Appends to out[*len..cap), keeping it NUL-terminated and never past cap. */
static void add(char *out, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add(char *out, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(out + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (w > 0)
        *len = (size_t)w < cap - *len ? *len + (size_t)w : cap - 1;
}

/* "load ...": the arrivals or users, then how long. */
static void header_load(const struct console_header *h, char *out, size_t cap, size_t *len)
{
    char d[32], w[32];
    add(out, cap, len, "tokenstorm run: load ");
    if (h->scenario) {
        add(out, cap, len, "scenario %s, %zu traffic class%s with their own loads", h->scenario,
            h->classes, h->classes == 1 ? "" : "es");
    } else if (h->open) {
        add(out, cap, len, "open loop, %s arrivals, ", h->arrival ? h->arrival : "poisson");
        if (h->stages)
            add(out, cap, len, "stages %s (duration:req/s)", h->stages);
        else if (h->ramp_to > 0)
            add(out, cap, len, "%g req/s rising to %g req/s", h->rate, h->ramp_to);
        else
            add(out, cap, len, "%g req/s", h->rate);
        if (h->concurrency)
            add(out, cap, len, ", at most %u in flight", (unsigned)h->concurrency);
    } else {
        add(out, cap, len, "closed loop, %u user%s", (unsigned)h->concurrency,
            h->concurrency == 1 ? "" : "s");
    }
    fmt_dur(h->duration_s, d, sizeof d);
    if (h->duration_s > 0 && h->requests)
        add(out, cap, len, ", for %s or %llu requests, whichever comes first", d,
            (unsigned long long)h->requests);
    else if (h->duration_s > 0)
        add(out, cap, len, ", for %s", d);
    else if (h->requests)
        add(out, cap, len, ", %llu requests", (unsigned long long)h->requests);
    else if (h->stages)
        add(out, cap, len, ", for the stages");
    if (h->warmup_s > 0) {
        fmt_dur(h->warmup_s, w, sizeof w);
        add(out, cap, len, " after a %s warm-up", w);
    }
    add(out, cap, len, "\n");
}

size_t console_header_text(const struct console_header *h, char *out, size_t cap)
{
    size_t len = 0;
    if (!cap)
        return 0;
    out[0] = '\0';
    add(out, cap, &len, "tokenstorm run: target %s", h->target ? h->target : "?");
    if (h->sim)
        add(out, cap, &len, " (built-in simulator, %s)", h->sim);
    if (h->model)
        add(out, cap, &len, ", model %s", h->model);
    if (h->endpoint && !h->scenario)
        add(out, cap, &len, ", endpoint %s", h->endpoint);
    add(out, cap, &len, "\n");
    header_load(h, out, cap, &len);
    if (h->out_dir)
        add(out, cap, &len, "tokenstorm run: results in %s%s\n", h->out_dir,
            strcmp(h->out_dir, "/") ? "/" : "");
    return len;
}
