/*
 * recover.c - result.json rebuilt from latency.hlog and requests.jsonl
 * (see recover.h).
 */
#include "report/recover.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis/record.h"
#include "analysis/stats.h"
#include "analysis/summary.h"
#include "base/hlog.h"
#include "report/outdir.h"
#include "report/result.h"
#include "report/runfiles.h"

#define RECOVER_BASE_NS 1000000000ull /* added to every time, so 0 still means "did not happen" */

struct recovery {
    struct run_stats *lines; /* from requests.jsonl */
    struct run_stats *hlog;  /* from latency.hlog */
    bool has_lines, has_hlog;
    double start_time; /* the log's StartTime, seconds since the epoch; 0 unknown */
    double end_s;      /* the last interval's or request's end, s from the schedule's start */
    double warmup_s;   /* the earliest intended send outside the warm-up; -1 none yet */
    bool any_warmup;
    size_t intervals, request_lines, skipped_lines;
};

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static bool file_in(const char *dir, const char *name)
{
    char path[RUNFILES_PATH_MAX + 32];
    return (size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) < sizeof(path) && is_file(path);
}

bool recover_possible(const char *dir)
{
    return !file_in(dir, "result.json") &&
           (file_in(dir, "latency.hlog") || file_in(dir, "requests.jsonl"));
}

/* Sums every interval of latency.hlog (read from f) into r->hlog by tag (tags are metric names). */
static int read_hlog(FILE *f, const char *name, struct recovery *r, char *err, size_t errlen)
{
    struct hlog_reader hr;
    struct hlog_entry e;
    int rc;

    hlog_reader_init(&hr, f, 0);
    while ((rc = hlog_reader_next(&hr, &e)) == 1) {
        int m = stat_metric_from_name(e.tag, strlen(e.tag));
        if (m >= 0)
            (void)hdr_add(r->hlog->hist[m], e.hist);
        hdr_free(e.hist);
        if (isfinite(e.start) && isfinite(e.length) && e.start + e.length > r->end_s)
            r->end_s = e.start + e.length;
        r->intervals++;
    }
    /* the last line may be cut by the kill: keep the intervals read before it */
    if (rc < 0 && rc != TS_PARSE && rc != TS_TOOBIG) {
        ts_errf(err, errlen, "%s: %s", name, hr.err);
    } else {
        rc = 0;
        r->has_hlog = r->intervals > 0;
        if (hr.has_start_time)
            r->start_time = hr.start_time;
    }
    hlog_reader_release(&hr);
    return rc;
}

/* A time point in ms as the record's ns (0 for null or absent). */
static uint64_t time_ns(const json_t *line, const char *key)
{
    const json_t *v = json_object_get(line, key);
    if (!json_is_number(v) || !(json_number_value(v) >= 0) || json_number_value(v) > 1e12)
        return 0;
    return RECOVER_BASE_NS + (uint64_t)llround(json_number_value(v) * 1e6);
}

/* A span in ms as microseconds (0 for null or absent). */
static uint32_t span_us(const json_t *line, const char *key)
{
    const json_t *v = json_object_get(line, key);
    double ms = json_is_number(v) ? json_number_value(v) : 0;
    return ms > 0 && ms < 4e9 / 1000 ? (uint32_t)llround(ms * 1000) : 0;
}

static uint32_t count_u32(const json_t *line, const char *key)
{
    const json_t *v = json_object_get(line, key);
    return json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= UINT32_MAX
               ? (uint32_t)json_integer_value(v)
               : 0;
}

static int32_t usage(const json_t *line, const char *key)
{
    const json_t *v = json_object_get(line, key);
    return json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= INT32_MAX
               ? (int32_t)json_integer_value(v)
               : -1;
}

static uint32_t flag(const json_t *line, const char *key, uint32_t bit)
{
    return json_is_true(json_object_get(line, key)) ? bit : 0;
}

/* One requests.jsonl line as the record it was written from (the fields statistics use). */
static int parse_line(const char *text, size_t len, struct req_record *rec)
{
    json_t *line = json_loadb(text, len, 0, NULL);
    const char *outcome = json_string_value(json_object_get(line, "outcome"));
    int o = outcome ? req_outcome_from_name(outcome) : -1;
    if (!json_is_object(line) || o < 0) {
        json_decref(line);
        return TS_PARSE;
    }
    memset(rec, 0, sizeof(*rec));
    rec->outcome = (enum req_outcome)o;
    rec->http_status = (int)count_u32(line, "http_status");
    rec->flags =
        flag(line, "stream", REQF_STREAM) | flag(line, "warmup", REQF_WARMUP) |
        flag(line, "reused_conn", REQF_REUSED_CONN) | flag(line, "no_done", REQF_NO_DONE) |
        flag(line, "no_finish", REQF_NO_FINISH) | flag(line, "id_changed", REQF_ID_CHANGED) |
        flag(line, "usage_mismatch", REQF_USAGE_MISMATCH) | flag(line, "reasoning", REQF_REASONING);
    rec->intended_ns = time_ns(line, "intended_ms");
    rec->start_ns = time_ns(line, "start_ms");
    rec->first_byte_ns = time_ns(line, "first_byte_ms");
    rec->first_chunk_ns = time_ns(line, "first_chunk_ms");
    rec->first_token_ns = time_ns(line, "first_token_ms");
    rec->first_answer_ns = time_ns(line, "first_answer_ms");
    rec->last_chunk_ns = time_ns(line, "last_chunk_ms");
    rec->end_ns = time_ns(line, "end_ms");
    rec->dns_us = span_us(line, "dns_ms");
    rec->connect_us = span_us(line, "connect_ms");
    rec->tls_us = span_us(line, "tls_ms");
    rec->sent_us = span_us(line, "sent_ms");
    rec->ttfb_us = span_us(line, "ttfb_ms");
    rec->prompt_tokens = count_u32(line, "prompt_tokens");
    rec->max_tokens = count_u32(line, "max_tokens");
    rec->usage_prompt_tokens = usage(line, "usage_prompt_tokens");
    rec->usage_completion_tokens = usage(line, "usage_completion_tokens");
    rec->client_tokens = count_u32(line, "client_tokens");
    rec->content_chunks = count_u32(line, "content_chunks");
    rec->choice_chunks = count_u32(line, "choice_chunks");
    rec->output_tokens = count_u32(line, "output_tokens");
    const json_t *recall = json_object_get(line, "recall");
    uint32_t rk = count_u32(line, "recall_k");
    if (json_is_number(recall) && json_number_value(recall) >= 0 &&
        json_number_value(recall) <= 1 && rk >= 1 && rk <= UINT16_MAX) {
        rec->has_recall = true;
        rec->recall = json_number_value(recall);
        rec->recall_k = (uint16_t)rk;
    }
    const char *src = json_string_value(json_object_get(line, "token_source"));
    rec->token_source = TOKEN_SOURCE_COUNT; /* unknown unless named */
    for (int s = 0; src && s < TOKEN_SOURCE_COUNT; s++)
        if (!strcmp(src, token_source_name((enum token_source)s)))
            rec->token_source = (enum token_source)s;
    json_decref(line);
    return 0;
}

/* Adds one record's times to what the recovery knows of the run's span and warm-up. */
static void note_times(struct recovery *r, const struct req_record *rec)
{
    uint64_t end = rec->end_ns > rec->last_chunk_ns ? rec->end_ns : rec->last_chunk_ns;
    if (end > RECOVER_BASE_NS && (double)(end - RECOVER_BASE_NS) / 1e9 > r->end_s)
        r->end_s = (double)(end - RECOVER_BASE_NS) / 1e9;
    if (rec->flags & REQF_WARMUP) {
        r->any_warmup = true;
    } else if (rec->intended_ns > RECOVER_BASE_NS) {
        double t = (double)(rec->intended_ns - RECOVER_BASE_NS) / 1e9;
        if (r->warmup_s < 0 || t < r->warmup_s)
            r->warmup_s = t;
    }
}

/* Every line of requests.jsonl (read from f) into r->lines (malformed ones counted and skipped). */
static int read_requests(FILE *f, const char *name, struct recovery *r, char *err, size_t errlen)
{
    struct line_reader lr;
    const char *text;
    size_t len;
    int rc;

    line_reader_init(&lr, f, 0);
    while ((rc = line_reader_next(&lr, &text, &len)) != 0) {
        struct req_record rec;
        if (rc == -ENOMEM || rc == -EIO) {
            ts_errf(err, errlen, "%s: line %ld: %s", name, lr.line_no, strerror(-rc));
            break;
        }
        if (rc == TS_TOOBIG || parse_line(text, len, &rec)) {
            r->skipped_lines++;
            continue;
        }
        r->request_lines++;
        run_stats_add_record(r->lines, &rec, NULL);
        note_times(r, &rec);
    }
    line_reader_release(&lr);
    r->has_lines = r->request_lines > 0;
    return rc < 0 ? rc : 0;
}

/* The stats the document is built from: the lines' (with the log's ITL), or the log's. */
static struct run_stats *pick_stats(struct recovery *r)
{
    if (!r->has_lines) {
        struct run_stats *s = r->hlog;
        uint64_t ok = (uint64_t)hdr_total_count(s->hist[STAT_E2EL]);
        s->requests = ok;
        s->outcomes[REQ_OK] = ok;
        return s;
    }
    if (r->has_hlog) {
        hdr_reset(r->lines->hist[STAT_ITL]);
        (void)hdr_add(r->lines->hist[STAT_ITL], r->hlog->hist[STAT_ITL]);
    }
    return r->lines;
}

/* The "recovered" object: where the figures come from. */
static json_t *recovered_json(const struct recovery *r)
{
    json_t *from = json_array();
    if (r->has_hlog)
        json_array_append_new(from, json_string("latency.hlog"));
    if (r->has_lines)
        json_array_append_new(from, json_string("requests.jsonl"));
    return json_pack("{s:o, s:s, s:I, s:I, s:I, s:s}", "from", from, "reason",
                     "no result.json: the run did not finish (killed, crashed or out of disk)",
                     "hlog_intervals", (json_int_t)r->intervals, "request_lines",
                     (json_int_t)r->request_lines, "skipped_lines", (json_int_t)r->skipped_lines,
                     "counts",
                     r->has_lines ? "every request in requests.jsonl"
                                  : "successful requests only (latency.hlog has no failures)");
}

/* result.json from what was read. */
static int build(struct recovery *r, json_t **out)
{
    struct run_stats *s = pick_stats(r);
    struct run_summary sum;
    double warmup = r->any_warmup && r->warmup_s > 0 ? r->warmup_s : 0;
    double duration = r->end_s > warmup ? r->end_s - warmup : 0;
    run_summary_compute(&sum, s, duration, 0, NULL);
    json_t *config = json_pack("{s:b}", "recovered", 1);
    struct result_info info = {
        .config = config,
        .started_wall_ns = r->start_time > 0 ? (uint64_t)(r->start_time * 1e9) : 0,
        .warmup_s = warmup,
        .end_cut = true,
    };
    int rc = config ? result_build(s, &sum, &info, out) : -ENOMEM;
    json_decref(config);
    if (rc)
        return rc;
    json_t *rec = recovered_json(r);
    if (!rec || json_object_set_new(*out, "recovered", rec)) {
        json_decref(*out);
        *out = NULL;
        return -ENOMEM;
    }
    return 0;
}

int recover_result_files(FILE *hlog, FILE *requests, const char *label, json_t **out, char *err,
                         size_t errlen)
{
    char name[RUNFILES_PATH_MAX + 32];
    struct recovery r;
    int rc;

    *out = NULL;
    memset(&r, 0, sizeof(r));
    r.warmup_s = -1;
    if ((rc = run_stats_new(&r.lines)) || (rc = run_stats_new(&r.hlog))) {
        ts_errf(err, errlen, "%s: out of memory", label);
        goto out;
    }
    snprintf(name, sizeof(name), "%s/latency.hlog", label);
    if (hlog && (rc = read_hlog(hlog, name, &r, err, errlen)))
        goto out;
    snprintf(name, sizeof(name), "%s/requests.jsonl", label);
    if (requests && (rc = read_requests(requests, name, &r, err, errlen)))
        goto out;
    if (!r.has_hlog && !r.has_lines) {
        ts_errf(err, errlen, "%s: latency.hlog has no interval to recover from", label);
        rc = TS_PARSE;
        goto out;
    }
    if ((rc = build(&r, out)))
        ts_errf(err, errlen, "%s: cannot rebuild result.json: %s", label, ts_strerror(rc));
out:
    run_stats_free(r.lines);
    run_stats_free(r.hlog);
    return rc;
}

/* Opens dir/name for reading into *f (NULL when it does not exist). */
static int open_in(const char *dir, const char *name, FILE **f, char *err, size_t errlen)
{
    char path[RUNFILES_PATH_MAX + 32];

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    *f = fopen(path, "r");
    if (*f || errno == ENOENT)
        return 0;
    int rc = -errno;
    ts_errf(err, errlen, "%s: %s", path, strerror(-rc));
    return rc;
}

int recover_result(const char *dir, json_t **out, char *err, size_t errlen)
{
    FILE *hlog = NULL, *requests = NULL;
    long pid = 0;
    int rc;

    *out = NULL;
    if (!recover_possible(dir)) {
        ts_errf(err, errlen, "%s: no result.json, latency.hlog or requests.jsonl to read", dir);
        return -ENOENT;
    }
    if (outdir_busy(dir, &pid) == 1) {
        ts_errf(err, errlen,
                "%s: the run is still going on (pid %ld holds the directory); its result.json "
                "comes when it ends",
                dir, pid);
        return -EBUSY;
    }
    if ((rc = open_in(dir, "latency.hlog", &hlog, err, errlen)) ||
        (rc = open_in(dir, "requests.jsonl", &requests, err, errlen)))
        goto out;
    rc = recover_result_files(hlog, requests, dir, out, err, errlen);
out:
    if (requests)
        fclose(requests);
    if (hlog)
        fclose(hlog);
    return rc;
}
