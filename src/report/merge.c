/*
 * merge.c - several results of one run into one exact result (see merge.h).
 */
#include "report/merge.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "base/alloc.h"
#include "base/hdr.h"
#include "base/hlog.h"
#include "report/result.h"
#include "report/runfiles.h"

#define MERGE_TAGS_MAX 32

struct input {
    struct runfiles files;
    json_t *doc;
    struct run_stats *stats;
    uint64_t started_ns;
    double duration_s, warmup_s;
    double send_end_s; /* summary.window.send_end_s, NAN when not recorded */
    bool cut;
    struct goodput_cfg goodput;
};

struct bucket {
    uint64_t sent, completed, good, errors, in_flight, output_tokens, chunks;
    double cover; /* seconds of input intervals in this second (the most of any input) */
    double ttft_p50, ttft_p99, e2el_p50, lag_p99;
};

struct timeline {
    struct bucket *b;
    double *scratch; /* per-input seconds covered, parallel to b */
    size_t n, cap;
};

struct merger {
    struct input *in;
    size_t n;
    uint64_t earliest_ns;
    struct timeline tl;
    bool pct_known; /* every input has a latency.hlog */
    struct merge_result *res;
    char *err;
    size_t errlen;
};

static void note(struct merge_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void note(struct merge_result *r, const char *fmt, ...)
{
    va_list ap;
    if (r->nnotes == MERGE_NOTES_MAX)
        return;
    va_start(ap, fmt);
    vsnprintf(r->notes[r->nnotes++], sizeof(r->notes[0]), fmt, ap);
    va_end(ap);
}

static int fail(struct merger *m, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct merger *m, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, m->errlen, fmt, ap);
    va_end(ap);
    return rc;
}

static double num_or_nan(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static uint64_t count_of(const json_t *obj, const char *key)
{
    double v = num_or_nan(obj, key);
    return v > 0 && v < 1.8e19 ? (uint64_t)llround(v) : 0;
}

/* ---- inputs ------------------------------------------------------------------------- */

static int load_input(struct merger *m, struct input *in, const char *path)
{
    char tmp[512];
    int rc;

    if ((rc = runfiles_locate(path, &in->files, m->err, m->errlen)) ||
        (rc = runfiles_load(&in->files, &in->doc, m->err, m->errlen)))
        return rc;
    if ((rc = result_read_stats(in->doc, &in->stats, tmp, sizeof(tmp))))
        return fail(m, rc, "%s: %s", in->files.result, tmp);
    const json_t *run = json_object_get(in->doc, "run");
    const char *when = json_string_value(json_object_get(run, "started_at"));
    if (!when || runfiles_parse_time(when, &in->started_ns))
        return fail(m, -EINVAL, "%s: no run.started_at: cannot align it with the others",
                    in->files.result);
    in->duration_s = num_or_nan(json_object_get(in->doc, "summary"), "duration");
    if (!(in->duration_s >= 0))
        in->duration_s = num_or_nan(run, "duration_s");
    if (!(in->duration_s >= 0))
        in->duration_s = 0;
    in->warmup_s = num_or_nan(run, "warmup_s");
    if (!(in->warmup_s >= 0))
        in->warmup_s = 0;
    in->send_end_s =
        num_or_nan(json_object_get(json_object_get(in->doc, "summary"), "window"), "send_end_s");
    const char *mode = json_string_value(json_object_get(run, "end_mode"));
    in->cut = mode && !strcmp(mode, "cut");
    const json_t *gc = json_object_get(json_object_get(in->doc, "summary"), "goodput_config");
    in->goodput.ttft_ms = fmax(0, json_is_object(gc) ? num_or_nan(gc, "ttft_ms") : 0);
    in->goodput.tpot_ms = fmax(0, json_is_object(gc) ? num_or_nan(gc, "tpot_ms") : 0);
    in->goodput.e2el_ms = fmax(0, json_is_object(gc) ? num_or_nan(gc, "e2el_ms") : 0);
    return 0;
}

struct span {
    double a, b;
};

static int cmp_span(const void *x, const void *y)
{
    const struct span *p = x, *q = y;
    return p->a < q->a ? -1 : p->a > q->a ? 1 : 0;
}

/* The measure of the union of the inputs' measured spans, seconds. */
static double union_duration(const struct merger *m)
{
    struct span *s = ts_malloc(m->n * sizeof(*s));
    double total = 0, a = 0, b = 0;

    if (!s)
        return -1;
    for (size_t i = 0; i < m->n; i++) {
        double start = (double)(m->in[i].started_ns - m->earliest_ns) / 1e9 + m->in[i].warmup_s;
        s[i] = (struct span){start, start + m->in[i].duration_s};
    }
    qsort(s, m->n, sizeof(*s), cmp_span);
    for (size_t i = 0; i < m->n; i++) {
        if (i == 0 || s[i].a > b) {
            total += b - a;
            a = s[i].a;
            b = s[i].b;
        } else if (s[i].b > b) {
            b = s[i].b;
        }
    }
    total += b - a;
    ts_free(s);
    return total;
}

/* ---- timeline ------------------------------------------------------------------------- */

static int tl_ensure(struct timeline *tl, size_t k)
{
    if (k >= (size_t)MERGE_SPAN_MAX_S + 2)
        return -EINVAL;
    if (k >= tl->cap) {
        size_t cap = tl->cap ? tl->cap : 64;
        while (cap <= k)
            cap *= 2;
        struct bucket *b = ts_realloc(tl->b, cap * sizeof(*b));
        if (!b)
            return -ENOMEM;
        tl->b = b;
        double *s = ts_realloc(tl->scratch, cap * sizeof(*s));
        if (!s)
            return -ENOMEM;
        tl->scratch = s;
        memset(tl->b + tl->cap, 0, (cap - tl->cap) * sizeof(*b));
        memset(tl->scratch + tl->cap, 0, (cap - tl->cap) * sizeof(*s));
        tl->cap = cap;
    }
    if (k >= tl->n)
        tl->n = k + 1;
    return 0;
}

/* The second (from the earliest start) holding time t_s of an input that started at started_ns. */
static size_t second_of(const struct merger *m, uint64_t started_ns, double t_s)
{
    double rel = (double)(started_ns - m->earliest_ns) / 1e9 + t_s;
    return rel > 0 ? (size_t)floor(rel) : 0;
}

static int add_timeline(struct merger *m, const struct input *in)
{
    const json_t *arr = json_object_get(in->doc, "timeline");
    const json_t *p;
    size_t i;
    double prev = 0;

    if (!json_is_array(arr))
        return 0;
    memset(m->tl.scratch, 0, m->tl.cap * sizeof(*m->tl.scratch));
    json_array_foreach(arr, i, p)
    {
        double t = num_or_nan(p, "t_s");
        if (!isfinite(t) || t < prev)
            continue;
        size_t k = second_of(m, in->started_ns, (prev + t) / 2);
        int rc = tl_ensure(&m->tl, k);
        if (rc)
            return fail(m, rc, "%s: timeline point at %.3f s is out of range", in->files.result, t);
        struct bucket *b = &m->tl.b[k];
        b->sent += count_of(p, "sent");
        b->completed += count_of(p, "completed");
        b->good += count_of(p, "good");
        b->errors += count_of(p, "errors");
        b->in_flight += count_of(p, "in_flight");
        b->output_tokens += count_of(p, "output_tokens");
        b->chunks += count_of(p, "chunks");
        m->tl.scratch[k] += t - prev;
        prev = t;
    }
    for (size_t k = 0; k < m->tl.n; k++)
        m->tl.b[k].cover = fmax(m->tl.b[k].cover, m->tl.scratch[k]);
    return 0;
}

static json_t *timeline_json(const struct merger *m)
{
    json_t *a = json_array();

    for (size_t k = 0; a && k < m->tl.n; k++) {
        const struct bucket *b = &m->tl.b[k];
        json_t *p = json_pack("{s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "t_s", (double)(k + 1),
                              "sent", (json_int_t)b->sent, "completed", (json_int_t)b->completed,
                              "good", (json_int_t)b->good, "errors", (json_int_t)b->errors,
                              "in_flight", (json_int_t)b->in_flight, "output_tokens",
                              (json_int_t)b->output_tokens, "chunks", (json_int_t)b->chunks);
        static const char *const keys[] = {"ttft_p50_ms", "ttft_p99_ms", "e2el_p50_ms",
                                           "lag_p99_ms"};
        const double vals[] = {b->ttft_p50, b->ttft_p99, b->e2el_p50, b->lag_p99};
        int rc = p ? 0 : -ENOMEM;
        for (size_t i = 0; !rc && i < sizeof(keys) / sizeof(keys[0]); i++)
            rc = json_object_set_new(p, keys[i], m->pct_known ? json_real(vals[i]) : json_null());
        if (rc || json_array_append_new(a, p)) {
            json_decref(p);
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* Peak output tokens per second: the busiest merged second after the earliest warm-up. */
static double peak_tps(const struct merger *m)
{
    double warm = INFINITY, peak = 0;

    for (size_t i = 0; i < m->n; i++)
        warm = fmin(warm, (double)(m->in[i].started_ns - m->earliest_ns) / 1e9 + m->in[i].warmup_s);
    for (size_t k = 0; k < m->tl.n; k++) {
        const struct bucket *b = &m->tl.b[k];
        if ((double)k + 1e-9 >= floor(warm) && b->cover > 0.5)
            peak = fmax(peak, (double)b->chunks / b->cover);
    }
    return peak;
}

/* ---- latency.hlog --------------------------------------------------------------------- */

struct hlog_in {
    FILE *f;
    struct hlog_reader r;
    struct hlog_entry e; /* lookahead; e.hist owned while have */
    bool have;
    size_t k;
    uint64_t started_ns;
};

struct tag_acc {
    char tag[HLOG_TAG_MAX + 1];
    struct hdr *acc;
};

/* Reads the next interval of h; 0 or an error (reported). */
static int hlog_in_next(struct merger *m, struct hlog_in *h, const char *path)
{
    int rc = hlog_reader_next(&h->r, &h->e);

    h->have = false;
    if (rc < 0)
        return fail(m, rc == -ENOMEM ? rc : TS_PARSE, "%s: %s", path, h->r.err);
    if (rc == 0)
        return 0;
    double base;
    if (h->e.start >= 31557600.0) /* a year: an absolute epoch time */
        base = 0;
    else if (h->r.has_base_time && h->r.base_time > 0)
        base = h->r.base_time;
    else if (h->r.has_start_time)
        base = h->r.start_time;
    else
        base = (double)h->started_ns / 1e9;
    double mid = base + h->e.start + h->e.length / 2 - (double)m->earliest_ns / 1e9;
    h->k = mid > 0 ? (size_t)floor(mid) : 0;
    h->have = true;
    return 0;
}

static double pct_ms(const struct hdr *h, double p)
{
    return hdr_total_count(h) ? (double)hdr_value_at_percentile(h, p) / 1000.0 : 0;
}

/* Writes second k of every tag and fills the timeline's percentiles from it. */
static int flush_second(struct merger *m, struct hlog_writer *w, struct tag_acc *tags, size_t ntags,
                        size_t k)
{
    int rc = tl_ensure(&m->tl, k);

    if (rc)
        return fail(m, rc, "latency.hlog: an interval %zu s after the start is out of range", k);
    struct bucket *b = &m->tl.b[k];
    for (size_t t = 0; t < ntags; t++) {
        struct hdr *h = tags[t].acc;
        if (!hdr_total_count(h))
            continue;
        if (!strcmp(tags[t].tag, "ttft")) {
            b->ttft_p50 = pct_ms(h, 50);
            b->ttft_p99 = pct_ms(h, 99);
        } else if (!strcmp(tags[t].tag, "e2el")) {
            b->e2el_p50 = pct_ms(h, 50);
        } else if (!strcmp(tags[t].tag, "lag")) {
            b->lag_p99 = pct_ms(h, 99);
        }
        rc = hlog_write_interval(w, tags[t].tag[0] ? tags[t].tag : NULL, (double)k, 1.0, h);
        if (rc)
            return fail(m, rc, "latency.hlog: cannot write: %s", ts_strerror(rc));
        hdr_reset(h);
    }
    return 0;
}

/* Adds h's lookahead interval to its tag's accumulator (taking the histogram). */
static int take_interval(struct merger *m, struct hlog_in *h, struct tag_acc *tags, size_t *ntags,
                         const char *path)
{
    size_t t = 0;
    int rc;

    while (t < *ntags && strcmp(tags[t].tag, h->e.tag))
        t++;
    if (t == *ntags) {
        if (t == MERGE_TAGS_MAX) {
            hdr_free(h->e.hist);
            return fail(m, TS_PARSE, "%s: more than %d tags", path, MERGE_TAGS_MAX);
        }
        memcpy(tags[t].tag, h->e.tag, sizeof(tags[t].tag));
        if ((rc = hdr_new_like(h->e.hist, &tags[t].acc))) {
            hdr_free(h->e.hist);
            return fail(m, rc, "out of memory");
        }
        (*ntags)++;
    }
    rc = hdr_add(tags[t].acc, h->e.hist);
    hdr_free(h->e.hist);
    h->e.hist = NULL;
    h->have = false;
    return rc ? fail(m, rc, "%s: histogram counts overflow", path) : 0;
}

static int merge_hlogs(struct merger *m, const char *out_path)
{
    struct hlog_in *h = ts_calloc(m->n, sizeof(*h));
    struct tag_acc tags[MERGE_TAGS_MAX];
    size_t ntags = 0, opened = 0;
    char tmp[RUNFILES_PATH_MAX + 8];
    struct hlog_writer w;
    FILE *out = NULL;
    int rc = 0;

    memset(tags, 0, sizeof(tags));
    if (!h)
        return fail(m, -ENOMEM, "out of memory");
    snprintf(tmp, sizeof(tmp), "%s.tmp", out_path);
    for (; opened < m->n; opened++) {
        h[opened].f = fopen(m->in[opened].files.hlog, "r");
        if (!h[opened].f) {
            rc = fail(m, -errno, "%s: %s", m->in[opened].files.hlog, strerror(errno));
            goto out;
        }
        hlog_reader_init(&h[opened].r, h[opened].f, 0);
        h[opened].started_ns = m->in[opened].started_ns;
    }
    for (size_t i = 0; i < m->n; i++)
        if ((rc = hlog_in_next(m, &h[i], m->in[i].files.hlog)))
            goto out;
    out = fopen(tmp, "w");
    if (!out) {
        rc = fail(m, -errno, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    hlog_writer_init(&w, out, HLOG_RATIO_US_TO_MS);
    double t0 = (double)m->earliest_ns / 1e9;
    char comment[96];
    snprintf(comment, sizeof(comment), "tokenstorm merge of %zu runs: latencies in microseconds",
             m->n);
    if ((rc = hlog_write_header(&w, comment, t0, t0))) {
        rc = fail(m, rc, "%s: cannot write", tmp);
        goto out;
    }
    for (;;) {
        size_t cur = SIZE_MAX;
        for (size_t i = 0; i < m->n; i++)
            if (h[i].have && h[i].k < cur)
                cur = h[i].k;
        if (cur == SIZE_MAX)
            break;
        for (size_t i = 0; i < m->n; i++) {
            while (h[i].have && h[i].k <= cur) {
                if ((rc = take_interval(m, &h[i], tags, &ntags, m->in[i].files.hlog)) ||
                    (rc = hlog_in_next(m, &h[i], m->in[i].files.hlog)))
                    goto out;
            }
        }
        if ((rc = flush_second(m, &w, tags, ntags, cur)))
            goto out;
    }
    if (fflush(out) || ferror(out)) {
        rc = fail(m, -EIO, "%s: write error", tmp);
        goto out;
    }
    rc = fclose(out);
    out = NULL;
    if (rc || rename(tmp, out_path)) {
        rc = fail(m, -errno, "%s: %s", out_path, strerror(errno));
        goto out;
    }
out:
    if (out)
        fclose(out);
    if (rc)
        unlink(tmp);
    for (size_t i = 0; i < opened; i++) {
        if (h[i].have)
            hdr_free(h[i].e.hist);
        hlog_reader_release(&h[i].r);
        fclose(h[i].f);
    }
    for (size_t t = 0; t < ntags; t++)
        hdr_free(tags[t].acc);
    ts_free(h);
    return rc;
}

/* ---- requests.jsonl -------------------------------------------------------------------- */

static const char *const time_points[] = {
    "intended_ms",    "start_ms",        "first_byte_ms", "first_chunk_ms",
    "first_token_ms", "first_answer_ms", "last_chunk_ms", "end_ms",
};

/* Rewrites one line of input i (see merge.h); 1 written, 0 skipped, or an error. */
static int rewrite_request(FILE *out, const char *line, size_t len, size_t i, double shift_ms)
{
    json_t *o = json_loadb(line, len, 0, NULL);
    char id[64];
    int rc = 0;

    if (!json_is_object(o)) {
        json_decref(o);
        return 0;
    }
    const json_t *old = json_object_get(o, "id");
    if (json_is_integer(old))
        snprintf(id, sizeof(id), "%zu-%lld", i, (long long)json_integer_value(old));
    else if (json_is_string(old))
        snprintf(id, sizeof(id), "%zu-%.40s", i, json_string_value(old));
    else
        snprintf(id, sizeof(id), "%zu-", i);
    rc |= json_object_set_new(o, "id", json_string(id));
    rc |= json_object_set_new(o, "input", json_integer((json_int_t)i));
    for (size_t k = 0; k < sizeof(time_points) / sizeof(time_points[0]); k++) {
        const json_t *v = json_object_get(o, time_points[k]);
        if (json_is_number(v))
            rc |=
                json_object_set_new(o, time_points[k], json_real(json_number_value(v) + shift_ms));
    }
    if (rc) {
        json_decref(o);
        return -ENOMEM;
    }
    rc = json_dumpf(o, out, JSON_COMPACT | JSON_REAL_PRECISION(15)) || fputc('\n', out) == EOF
             ? -EIO
             : 1;
    json_decref(o);
    return rc;
}

static int merge_requests(struct merger *m, const char *out_path)
{
    char tmp[RUNFILES_PATH_MAX + 8];
    FILE *out;
    int rc = 0;

    snprintf(tmp, sizeof(tmp), "%s.tmp", out_path);
    if (!(out = fopen(tmp, "w")))
        return fail(m, -errno, "%s: %s", tmp, strerror(errno));
    for (size_t i = 0; !rc && i < m->n; i++) {
        const char *path = m->in[i].files.requests;
        FILE *f = fopen(path, "r");
        struct line_reader lr;
        if (!f) {
            rc = fail(m, -errno, "%s: %s", path, strerror(errno));
            break;
        }
        /* ms precision of started_at, kept to the microsecond */
        double shift = round((double)(m->in[i].started_ns - m->earliest_ns) / 1e3) / 1e3;
        line_reader_init(&lr, f, 0);
        for (;;) {
            const char *line;
            size_t len;
            int r = line_reader_next(&lr, &line, &len);
            if (r == 0)
                break;
            if (r == TS_TOOBIG) { /* a merged file is rewritten line by line: none may be lost */
                rc = fail(m, TS_PARSE, "%s:%ld: line too long", path, lr.line_no);
                break;
            }
            if (r < 0) {
                rc = fail(m, r, "%s: %s", path, ts_strerror(r));
                break;
            }
            if (len == 0)
                continue;
            r = rewrite_request(out, line, len, i, shift);
            if (r < 0) {
                rc = fail(m, r, "%s: %s", tmp, ts_strerror(r));
                break;
            }
            m->res->request_lines += r == 1;
            m->res->skipped_lines += r == 0;
        }
        line_reader_release(&lr);
        fclose(f);
    }
    if (!rc && (fflush(out) || ferror(out)))
        rc = fail(m, -EIO, "%s: write error", tmp);
    if (fclose(out) && !rc)
        rc = fail(m, -EIO, "%s: write error", tmp);
    if (!rc && rename(tmp, out_path))
        rc = fail(m, -errno, "%s: %s", out_path, strerror(errno));
    if (rc)
        unlink(tmp);
    if (!rc && m->res->skipped_lines)
        note(m->res, "requests.jsonl: %llu malformed lines left out",
             (unsigned long long)m->res->skipped_lines);
    return rc;
}

/* ---- the merged document ------------------------------------------------------------------- */

static bool skip_config_key(const char *key)
{
    static const char *const skip[] = {"started_at", "duration_s",    "warmup_s",   "end_mode",
                                       "run_id",     "start_mono_ns", "merged_from"};
    for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
        if (!strcmp(key, skip[i]))
            return true;
    return false;
}

/* The "run" echo: keys every input agrees on, and where each input came from. */
static json_t *merged_config(const struct merger *m)
{
    const json_t *first = json_object_get(m->in[0].doc, "run");
    json_t *o = json_object(), *from = json_array();
    const char *key;
    const json_t *v;
    int rc = o && from ? 0 : -1;

    if (!rc && json_is_object(first)) {
        json_object_foreach((json_t *)first, key, v)
        {
            bool same = !skip_config_key(key);
            for (size_t i = 1; same && i < m->n; i++)
                same = json_equal(v, json_object_get(json_object_get(m->in[i].doc, "run"), key));
            if (same)
                rc |= json_object_set(o, key, (json_t *)v);
        }
    }
    for (size_t i = 0; !rc && i < m->n; i++) {
        const json_t *run = json_object_get(m->in[i].doc, "run");
        json_t *e = json_pack("{s:s, s:O?, s:O?, s:f, s:I}", "path", m->in[i].files.result,
                              "run_id", json_object_get(run, "run_id"), "started_at",
                              json_object_get(run, "started_at"), "duration_s", m->in[i].duration_s,
                              "requests", (json_int_t)m->in[i].stats->requests);
        rc |= !e || json_array_append_new(from, e);
    }
    if (!rc && json_object_set_new(o, "merged_from", from) == 0)
        return o;
    json_decref(o);
    json_decref(from);
    return NULL;
}

/* sum(value_i * weight_i) / sum(weight_i) over the inputs whose section has key. */
struct wmean {
    double sum, weight;
    bool any;
};

static void wmean_add(struct wmean *w, const json_t *obj, const char *key, double weight)
{
    double v = num_or_nan(obj, key);
    if (isfinite(v) && weight > 0) {
        w->sum += v * weight;
        w->weight += weight;
        w->any = true;
    }
}

static json_t *wmean_json(const struct wmean *w)
{
    return w->any && w->weight > 0 ? json_real(w->sum / w->weight) : json_null();
}

/* A score distribution ({mean, p50, p10, min}) of every input, weighted by its references. */
static json_t *merge_quality_dist(const struct merger *m, const char *key)
{
    struct wmean mean = {0};
    double min = INFINITY;

    for (size_t i = 0; i < m->n; i++) {
        const json_t *q = json_object_get(m->in[i].doc, "quality");
        const json_t *d = json_object_get(q, key);
        if (!json_is_object(d))
            continue;
        wmean_add(&mean, d, "mean", (double)count_of(q, "with_reference"));
        double v = num_or_nan(d, "min");
        if (isfinite(v))
            min = fmin(min, v);
    }
    if (!mean.any)
        return json_null();
    return json_pack("{s:o, s:n, s:n, s:o}", "mean", wmean_json(&mean), "p50", "p10", "min",
                     isfinite(min) ? json_real(min) : json_null());
}

/*
 * The "quality" section when every input has one. result.json keeps the
 * scores' summaries, not their distributions, so this is a weighted merge:
 * counts summed; means and rates weighted by each input's answers with a
 * reference (regex and JSON rates by its scored answers); score minima the
 * smallest; p50 and p10 null; dual-SLA windows and consistency pairs summed,
 * steady when every input was.
 */
static json_t *merge_quality(struct merger *m)
{
    size_t have = 0;

    for (size_t i = 0; i < m->n; i++)
        have += json_is_object(json_object_get(m->in[i].doc, "quality"));
    if (have == 0)
        return NULL;
    if (have < m->n) {
        note(m->res, "not every input has answer quality: the quality section is left out");
        return NULL;
    }
    uint64_t requests = 0, with_ref = 0, truncated = 0, windows = 0, attained = 0, pairs = 0,
             cwin = 0, held = 0, untracked = 0;
    struct wmean exact = {0}, regex = {0}, jsonv = {0}, sim = {0};
    bool dual = true, cons = true, steady = true;
    for (size_t i = 0; i < m->n; i++) {
        const json_t *q = json_object_get(m->in[i].doc, "quality");
        const json_t *d = json_object_get(q, "dual_sla"), *c = json_object_get(q, "consistency");
        double n = (double)count_of(q, "requests"), r = (double)count_of(q, "with_reference");
        requests += count_of(q, "requests");
        with_ref += count_of(q, "with_reference");
        truncated += count_of(q, "truncated");
        wmean_add(&exact, q, "exact_match_rate", r);
        wmean_add(&regex, q, "regex_match_rate", n);
        wmean_add(&jsonv, q, "json_valid_rate", n);
        dual &= json_is_object(d);
        windows += count_of(d, "windows");
        attained += count_of(d, "attained");
        cons &= json_is_object(c);
        pairs += count_of(c, "pairs");
        wmean_add(&sim, c, "mean_similarity", (double)count_of(c, "pairs"));
        steady &= json_is_true(json_object_get(c, "steady"));
        cwin += count_of(c, "windows");
        held += count_of(c, "windows_held");
        untracked += count_of(c, "untracked");
    }
    const json_t *q0 = json_object_get(m->in[0].doc, "quality");
    json_t *ds = json_null(), *cs = json_null();
    if (dual) {
        const json_t *d0 = json_object_get(q0, "dual_sla");
        ds = json_pack("{s:O?, s:I, s:I, s:o, s:O?, s:O?}", "window", json_object_get(d0, "window"),
                       "windows", (json_int_t)windows, "attained", (json_int_t)attained,
                       "attainment_rate",
                       windows ? json_real((double)attained / (double)windows) : json_null(),
                       "quality_target", json_object_get(d0, "quality_target"), "latency_target",
                       json_object_get(d0, "latency_target"));
    }
    if (cons) {
        const json_t *c0 = json_object_get(q0, "consistency");
        cs = json_pack("{s:I, s:o, s:b, s:I, s:I, s:O?, s:O?, s:O?, s:O?, s:I}", "pairs",
                       (json_int_t)pairs, "mean_similarity", wmean_json(&sim), "steady", steady,
                       "windows", (json_int_t)cwin, "windows_held", (json_int_t)held, "window",
                       json_object_get(c0, "window"), "threshold", json_object_get(c0, "threshold"),
                       "k", json_object_get(c0, "k"), "method", json_object_get(c0, "method"),
                       "untracked", (json_int_t)untracked);
    }
    return json_pack("{s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "requests",
                     (json_int_t)requests, "with_reference", (json_int_t)with_ref, "truncated",
                     (json_int_t)truncated, "rouge_l", merge_quality_dist(m, "rouge_l"), "bleu4",
                     merge_quality_dist(m, "bleu4"), "exact_match_rate", wmean_json(&exact),
                     "regex_match_rate", wmean_json(&regex), "json_valid_rate", wmean_json(&jsonv),
                     "dual_sla", ds, "consistency", cs);
}

static bool same_goodput(const struct goodput_cfg *a, const struct goodput_cfg *b)
{
    return a->ttft_ms == b->ttft_ms && a->tpot_ms == b->tpot_ms && a->e2el_ms == b->e2el_ms;
}

/* ---- the whole merge ----------------------------------------------------------------------- */

static int make_dirs(struct merger *m, const char *path)
{
    char why[512];
    int rc = file_mkdirs(path, why, sizeof(why));
    return rc ? fail(m, rc, "%s", why) : 0;
}

static int join(struct merger *m, char *out, const char *dir, const char *name)
{
    int w = snprintf(out, RUNFILES_PATH_MAX, "%s/%s", dir, name);
    return w < 0 || w >= RUNFILES_PATH_MAX ? fail(m, -ENAMETOOLONG, "%s: path too long", dir) : 0;
}

/* Checks the output directory: not an input's, result.json absent unless forced. */
static int check_out_dir(struct merger *m, const char *out_dir, bool force)
{
    char real_out[PATH_MAX], real_in[PATH_MAX], path[RUNFILES_PATH_MAX];
    struct stat st;
    int rc;

    if ((rc = make_dirs(m, out_dir)))
        return rc;
    if (!realpath(out_dir, real_out))
        return fail(m, -errno, "%s: %s", out_dir, strerror(errno));
    for (size_t i = 0; i < m->n; i++) {
        if (realpath(m->in[i].files.dir, real_in) && !strcmp(real_in, real_out))
            return fail(m, -EINVAL, "%s: the output directory is the directory of input %zu",
                        out_dir, i + 1);
    }
    for (size_t i = 0; i < m->n; i++) {
        for (size_t j = i + 1; j < m->n; j++) {
            if (realpath(m->in[i].files.result, real_in) &&
                realpath(m->in[j].files.result, real_out) && !strcmp(real_in, real_out))
                return fail(m, -EINVAL, "inputs %zu and %zu are the same run (%s)", i + 1, j + 1,
                            m->in[i].files.result);
        }
    }
    if ((rc = join(m, path, out_dir, "result.json")))
        return rc;
    if (!force && stat(path, &st) == 0)
        return fail(m, -EEXIST, "%s exists (--force to overwrite it)", path);
    return 0;
}

/* When the last input stopped sending, in seconds from the earliest start
 * (NAN when an input did not record it). */
static double merged_send_end(const struct merger *m)
{
    double end = 0;
    for (size_t i = 0; i < m->n; i++) {
        if (!(m->in[i].send_end_s > 0))
            return NAN;
        end = fmax(end, (double)(m->in[i].started_ns - m->earliest_ns) / 1e9 + m->in[i].send_end_s);
    }
    return end;
}

static int build_result(struct merger *m, const struct merge_cfg *cfg, const char *path)
{
    struct merge_result *r = m->res;
    const struct goodput_cfg *gp = &m->in[0].goodput;
    double warmup = 0;
    bool cut = false;
    json_t *conf = NULL, *tl = NULL, *quality = NULL;
    int rc;

    for (size_t i = 1; i < m->n; i++) {
        if (!same_goodput(gp, &m->in[i].goodput)) {
            note(r, "the inputs used different --goodput thresholds: goodput left out");
            gp = NULL;
            break;
        }
    }
    for (size_t i = 0; i < m->n; i++) {
        warmup = fmax(warmup, m->in[i].warmup_s);
        cut |= m->in[i].cut;
    }
    double duration = union_duration(m);
    if (duration < 0)
        return fail(m, -ENOMEM, "out of memory");
    run_summary_compute(&r->sum, r->stats, duration, peak_tps(m), gp);
    conf = merged_config(m);
    tl = timeline_json(m);
    if (tl)
        run_summary_set_window(&r->sum, tl, warmup, merged_send_end(m));
    quality = merge_quality(m);
    for (size_t i = 0; i < m->n; i++) {
        if (json_object_get(m->in[i].doc, "server_timeline")) {
            note(r, "the inputs' server_timeline (scraped server metrics) is not merged");
            break;
        }
    }
    if (!conf || !tl) {
        rc = fail(m, -ENOMEM, "out of memory");
        goto out;
    }
    struct result_info info = {
        .config = conf,
        .started_wall_ns = m->earliest_ns,
        .warmup_s = warmup,
        .end_cut = cut,
        .slos = cfg->slos,
        .nslos = cfg->nslos,
        .timeline = tl,
        .quality = quality,
    };
    if ((rc = result_build(r->stats, &r->sum, &info, &r->doc))) {
        rc = fail(m, rc, "cannot build result.json: %s", ts_strerror(rc));
        goto out;
    }
    rc = result_write_file(r->doc, path, m->err, m->errlen);
out:
    json_decref(conf);
    json_decref(tl);
    json_decref(quality);
    return rc;
}

int merge_runs(const char *const *paths, size_t n, const char *out_dir, const struct merge_cfg *cfg,
               struct merge_result *out, char *err, size_t errlen)
{
    struct merger m = {.n = n, .res = out, .err = err, .errlen = errlen};
    char path[RUNFILES_PATH_MAX];
    size_t loaded = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    if (n < 2 || n > MERGE_INPUTS_MAX)
        return fail(&m, -EINVAL, "merge needs 2 to %d inputs, got %zu", MERGE_INPUTS_MAX, n);
    m.in = ts_calloc(n, sizeof(*m.in));
    if (!m.in || (rc = run_stats_new(&out->stats))) {
        rc = fail(&m, -ENOMEM, "out of memory");
        goto out;
    }
    out->inputs = n;
    for (; loaded < n; loaded++) {
        if ((rc = load_input(&m, &m.in[loaded], paths[loaded]))) {
            loaded++; /* release what it loaded */
            goto out;
        }
        if ((rc = run_stats_merge(out->stats, m.in[loaded].stats))) {
            rc = fail(&m, rc, "%s: histogram counts overflow", m.in[loaded].files.result);
            loaded++;
            goto out;
        }
    }
    uint64_t latest = 0;
    m.earliest_ns = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        m.earliest_ns = m.in[i].started_ns < m.earliest_ns ? m.in[i].started_ns : m.earliest_ns;
        latest = m.in[i].started_ns > latest ? m.in[i].started_ns : latest;
    }
    if ((double)(latest - m.earliest_ns) / 1e9 > MERGE_SPAN_MAX_S) {
        rc = fail(&m, -EINVAL, "the inputs started more than %d days apart: not one run",
                  MERGE_SPAN_MAX_S / 86400);
        goto out;
    }
    if ((rc = check_out_dir(&m, out_dir, cfg->force)) || (rc = tl_ensure(&m.tl, 0)))
        goto out;
    m.tl.n = 0;
    for (size_t i = 0; i < n; i++)
        if ((rc = add_timeline(&m, &m.in[i])))
            goto out;

    bool all_hlog = true, all_requests = true;
    for (size_t i = 0; i < n; i++) {
        all_hlog &= m.in[i].files.hlog[0] != '\0';
        all_requests &= m.in[i].files.requests[0] != '\0';
    }
    if (all_hlog) {
        if ((rc = join(&m, path, out_dir, "latency.hlog")) || (rc = merge_hlogs(&m, path)))
            goto out;
        m.pct_known = true;
        out->wrote_hlog = true;
    } else {
        note(out, "not every input has a latency.hlog: no merged latency.hlog, and the "
                  "timeline's percentiles are null");
    }
    if (all_requests) {
        if ((rc = join(&m, path, out_dir, "requests.jsonl")) || (rc = merge_requests(&m, path)))
            goto out;
        out->wrote_requests = true;
    } else {
        for (size_t i = 0; i < n; i++)
            if (m.in[i].files.requests[0]) {
                note(out, "not every input has a requests.jsonl: none written");
                break;
            }
    }
    if ((rc = join(&m, path, out_dir, "result.json")) || (rc = build_result(&m, cfg, path)))
        goto out;
    rc = 0;
out:
    for (size_t i = 0; i < loaded; i++) {
        json_decref(m.in[i].doc);
        run_stats_free(m.in[i].stats);
    }
    ts_free(m.in);
    ts_free(m.tl.b);
    ts_free(m.tl.scratch);
    if (rc)
        merge_result_release(out);
    return rc;
}

void merge_result_release(struct merge_result *r)
{
    run_stats_free(r->stats);
    json_decref(r->doc);
    r->stats = NULL;
    r->doc = NULL;
}
