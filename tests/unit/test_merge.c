/*
 * test_merge.c - `tokenstorm merge` is exact: records split between two
 * result.json files made through the real APIs (run_stats_add_record,
 * run_summary_compute, result_build, result_write_file) merge into the
 * histograms, percentiles and counts of one run over all of them; timelines,
 * latency.hlog and requests.jsonl are aligned on wall-clock time; bad
 * inputs are refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/hlog.h"
#include "base/rng.h"
#include "report/merge.h"
#include "report/result.h"
#include "report/runfiles.h"

#define MS    1000000ull
#define US    1000ull
#define T0    1700000000000000000ull /* started_at of A (whole ms, as result.json keeps) */
#define SHIFT (250 * MS)             /* B started 250 ms after A */
#define NREC  3000

struct part {
    char dir[256];
    struct run_stats *stats;
    struct buf requests; /* requests.jsonl */
    uint64_t start;      /* monotonic origin of its records */
    size_t nlines;
};

struct fixture {
    char root[128];
    struct part a, b;
    struct run_stats *all; /* every record and gap of both parts */
    struct goodput_cfg gp;
};

/* One request; outcome and lengths from r. Every 41st is warm-up. */
static struct req_record make_record(struct rng *r, uint64_t id, uint64_t origin)
{
    struct req_record rec;
    uint64_t u = rng_range(r, 0, 99);

    memset(&rec, 0, sizeof(rec));
    rec.id = id;
    rec.worker = (uint32_t)(id % 4);
    rec.flags = REQF_STREAM | (id % 41 == 0 ? REQF_WARMUP : 0) | (u % 3 ? REQF_REUSED_CONN : 0);
    rec.outcome = u < 85   ? REQ_OK
                  : u < 90 ? REQ_HTTP_5XX
                  : u < 94 ? REQ_HTTP_429
                  : u < 97 ? REQ_TIMEOUT_IDLE
                           : REQ_CUT;
    rec.http_status = rec.outcome == REQ_HTTP_5XX ? 503 : rec.outcome == REQ_HTTP_429 ? 429 : 200;
    rec.intended_ns = origin + id * 5 * MS;
    rec.start_ns = rec.intended_ns + rng_range(r, 0, 3000) * US / 10;
    uint64_t ttft = 20 * MS + rng_range(r, 0, 400000) * US * (u < 10 ? 10 : 1) / 1000;
    rec.first_byte_ns = rec.start_ns + ttft / 2;
    rec.first_chunk_ns = rec.intended_ns + ttft;
    rec.first_token_ns = rec.first_chunk_ns + rng_range(r, 0, 2000) * US;
    rec.output_tokens = (uint32_t)rng_range(r, 1, 300);
    rec.choice_chunks = rec.output_tokens + 1;
    rec.content_chunks = rec.output_tokens;
    rec.last_chunk_ns = rec.first_chunk_ns + rec.output_tokens * rng_range(r, 8000, 30000) * US;
    rec.end_ns = rec.last_chunk_ns + 200 * US;
    rec.prompt_tokens = (uint32_t)rng_range(r, 10, 2000);
    rec.max_tokens = rec.output_tokens;
    rec.usage_prompt_tokens = u % 7 ? (int32_t)rec.prompt_tokens + 3 : -1;
    rec.usage_completion_tokens = (int32_t)rec.output_tokens;
    rec.client_tokens = rec.output_tokens;
    rec.token_source = u % 7 ? TOKENS_USAGE : TOKENS_CHUNKS;
    rec.dns_us = (uint32_t)rng_range(r, 1, 50);
    rec.connect_us = rec.dns_us + (uint32_t)rng_range(r, 50, 500);
    rec.sent_us = (uint32_t)rng_range(r, 10, 300);
    rec.ttfb_us = (uint32_t)(ttft / US / 2);
    strcpy(rec.finish_reason, rec.outcome == REQ_OK ? "length" : "");
    if (rec.outcome != REQ_OK)
        strcpy(rec.error, "server said \"no\"");
    return rec;
}

static void write_text(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/*
 * latency.hlog of a part: as the runner writes it (StartTime = started_at,
 * BaseTime 0, starts relative to the run start), seconds 0..n-1, tag "ttft"
 * with `per` values of (k + 1) * unit microseconds, and tag "e2el" in the
 * first second only.
 */
static void write_hlog(const char *dir, uint64_t started_ns, int n, int per, int64_t unit)
{
    char path[512];
    struct hdr *h;
    struct hlog_writer w;

    snprintf(path, sizeof(path), "%s/latency.hlog", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    hlog_writer_init(&w, f, HLOG_RATIO_US_TO_MS);
    assert_int_equal(hlog_write_header(&w, "test", (double)started_ns / 1e9, 0), 0);
    assert_int_equal(hdr_new_latency(&h), 0);
    for (int k = 0; k < n; k++) {
        hdr_reset(h);
        assert_int_equal(hdr_record_n(h, (k + 1) * unit, per), 0);
        assert_int_equal(hlog_write_interval(&w, "ttft", k + 0.001, 0.998, h), 0);
        if (k == 0)
            assert_int_equal(hlog_write_interval(&w, "e2el", 0.001, 0.998, h), 0);
    }
    hdr_free(h);
    assert_int_equal(fclose(f), 0);
}

/* result.json (and requests.jsonl) of a part through the real APIs. */
static void write_part(struct fixture *fx, struct part *p, uint64_t started_ns, double duration,
                       const char *run_id, int npoints, json_t *quality)
{
    struct run_summary sum;
    json_t *doc = NULL, *tl = json_array();
    char path[512], err[256];

    run_summary_compute(&sum, p->stats, duration, 100.0, &fx->gp);
    for (int k = 1; k <= npoints; k++)
        assert_int_equal(
            json_array_append_new(
                tl,
                json_pack("{s:f, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:f, s:f}", "t_s",
                          (double)k, "sent", 10 * k, "completed", 9 * k, "errors", k, "in_flight",
                          2, "output_tokens", 100 * k, "chunks", 110 * k, "ttft_p50_ms", 99.0,
                          "ttft_p99_ms", 99.0, "e2el_p50_ms", 99.0, "lag_p99_ms", 99.0)),
            0);
    json_t *conf = json_pack("{s:s, s:s, s:f, s:s, s:s}", "target", "http://127.0.0.1:9/v1",
                             "model", "m", "rate", 5.0, "run_id", run_id, "api_key", "sk-x");
    struct result_info info = {
        .config = conf,
        .started_wall_ns = started_ns,
        .warmup_s = 0,
        .timeline = tl,
        .quality = quality,
    };
    assert_int_equal(result_build(p->stats, &sum, &info, &doc), 0);
    snprintf(path, sizeof(path), "%s/result.json", p->dir);
    assert_int_equal(result_write_file(doc, path, err, sizeof(err)), 0);
    snprintf(path, sizeof(path), "%s/requests.jsonl", p->dir);
    write_text(path, buf_cstr(&p->requests), p->requests.len);
    json_decref(doc);
    json_decref(tl);
    json_decref(conf);
}

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    struct rng r;

    assert_non_null(fx);
    snprintf(fx->root, sizeof(fx->root), "/tmp/ts-test-merge-XXXXXX");
    assert_non_null(mkdtemp(fx->root));
    snprintf(fx->a.dir, sizeof(fx->a.dir), "%s/a", fx->root);
    snprintf(fx->b.dir, sizeof(fx->b.dir), "%s/b", fx->root);
    assert_int_equal(mkdir(fx->a.dir, 0700), 0);
    assert_int_equal(mkdir(fx->b.dir, 0700), 0);
    fx->gp = (struct goodput_cfg){.ttft_ms = 150, .e2el_ms = 5000};
    assert_int_equal(run_stats_new(&fx->all), 0);
    assert_int_equal(run_stats_new(&fx->a.stats), 0);
    assert_int_equal(run_stats_new(&fx->b.stats), 0);
    buf_init(&fx->a.requests, 64 << 20);
    buf_init(&fx->b.requests, 64 << 20);
    fx->a.start = 5000 * MS;
    fx->b.start = 9000 * MS;
    rng_seed(&r, 42);
    for (uint64_t i = 0; i < NREC; i++) {
        struct part *p = rng_range(&r, 0, 2) ? &fx->a : &fx->b; /* about 2/3 to a */
        struct req_record rec = make_record(&r, p->nlines, p->start);
        run_stats_add_record(p->stats, &rec, &fx->gp);
        run_stats_add_record(fx->all, &rec, &fx->gp);
        if (rec.outcome == REQ_OK && !(rec.flags & REQF_WARMUP)) {
            for (uint64_t k = 1; k < rec.choice_chunks; k++) {
                uint64_t gap = rng_range(&r, 1000, 60000) * US / 1000 * (k % 50 ? 1 : 9);
                run_stats_add_itl_at(p->stats, k, gap);
                run_stats_add_itl_at(fx->all, k, gap);
            }
        }
        assert_int_equal(req_record_append_json(&p->requests, &rec, p->start), 0);
        p->nlines++;
    }
    /* answer quality as quality_stats_to_json() writes it */
    json_t *qa = json_pack(
        "{s:i, s:i, s:i, s:{s:f, s:f, s:f, s:f}, s:n, s:f, s:n, s:f, s:{s:i, s:i, s:i, s:f, s:f, "
        "s:f}, s:n}",
        "requests", 10, "with_reference", 8, "truncated", 1, "rouge_l", "mean", 0.5, "p50", 0.5,
        "p10", 0.3, "min", 0.2, "bleu4", "exact_match_rate", 0.25, "regex_match_rate",
        "json_valid_rate", 1.0, "dual_sla", "window", 5, "windows", 2, "attained", 1,
        "attainment_rate", 0.5, "quality_target", 0.9, "latency_target", 0.9, "consistency");
    json_t *qb = json_pack(
        "{s:i, s:i, s:i, s:{s:f, s:f, s:f, s:f}, s:n, s:f, s:n, s:f, s:{s:i, s:i, s:i, s:f, s:f, "
        "s:f}, s:n}",
        "requests", 30, "with_reference", 24, "truncated", 0, "rouge_l", "mean", 0.7, "p50", 0.7,
        "p10", 0.4, "min", 0.1, "bleu4", "exact_match_rate", 0.5, "regex_match_rate",
        "json_valid_rate", 0.5, "dual_sla", "window", 5, "windows", 6, "attained", 6,
        "attainment_rate", 1.0, "quality_target", 0.9, "latency_target", 0.9, "consistency");
    assert_non_null(qa);
    assert_non_null(qb);
    write_part(fx, &fx->a, T0, 3.0, "aaaa", 3, qa);
    write_part(fx, &fx->b, T0 + SHIFT, 3.5, "bbbb", 2, qb);
    json_decref(qa);
    json_decref(qb);
    write_hlog(fx->a.dir, T0, 3, 3, 500); /* exact in the histogram below 2048 us */
    write_hlog(fx->b.dir, T0 + SHIFT, 2, 2, 700);
    *state = fx;
    return 0;
}

static void remove_dir(const char *dir)
{
    static const char *const names[] = {"result.json", "requests.jsonl", "latency.hlog"};
    char path[512];
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    char path[256];

    remove_dir(fx->a.dir);
    remove_dir(fx->b.dir);
    snprintf(path, sizeof(path), "%s/out", fx->root);
    remove_dir(path);
    rmdir(fx->root);
    run_stats_free(fx->all);
    run_stats_free(fx->a.stats);
    run_stats_free(fx->b.stats);
    buf_release(&fx->a.requests);
    buf_release(&fx->b.requests);
    free(fx);
    return 0;
}

/* The counters result.json carries are those of the union. */
static void assert_same_counts(const struct run_stats *x, const struct run_stats *y)
{
    assert_int_equal(x->requests, y->requests);
    assert_memory_equal(x->outcomes, y->outcomes, sizeof(x->outcomes));
    assert_memory_equal(x->http_class, y->http_class, sizeof(x->http_class));
    assert_int_equal(x->good, y->good);
    assert_int_equal(x->streams, y->streams);
    assert_int_equal(x->reused_conn, y->reused_conn);
    assert_int_equal(x->warmup_requests, y->warmup_requests);
    assert_int_equal(x->warmup_ok, y->warmup_ok);
    assert_int_equal(x->input_tokens, y->input_tokens);
    assert_int_equal(x->output_tokens, y->output_tokens);
    assert_memory_equal(x->token_source, y->token_source, sizeof(x->token_source));
    assert_int_equal(x->usage_input, y->usage_input);
    assert_int_equal(x->content_chunks, y->content_chunks);
    assert_int_equal(x->choice_chunks, y->choice_chunks);
    assert_int_equal(x->output_tokens_all, y->output_tokens_all);
}

static void assert_same_histograms(const struct run_stats *x, const struct run_stats *y)
{
    for (int m = 0; m < STAT_METRIC_COUNT; m++) {
        if (!hdr_equal(x->hist[m], y->hist[m]))
            fail_msg("histogram %s differs", stat_metric_name((enum stat_metric)m));
    }
    for (int b = 0; b < ITL_POS_BUCKETS; b++)
        assert_true(hdr_equal(x->itl_pos[b], y->itl_pos[b]));
}

static void test_merge_equals_union(void **state)
{
    struct fixture *fx = *state;
    const char *paths[2] = {fx->a.dir, fx->b.dir};
    char out[256], err[512];
    struct merge_result res;
    struct slo slo;

    /* the split is real: both parts have plenty of each kind */
    assert_true(fx->a.stats->outcomes[REQ_OK] > 1000 && fx->b.stats->outcomes[REQ_OK] > 500);
    assert_true(fx->b.stats->outcomes[REQ_HTTP_5XX] > 10);
    assert_int_equal(slo_parse("ttft.p99<1s", &slo, err, sizeof(err)), 0);
    struct merge_cfg cfg = {.slos = &slo, .nslos = 1};
    snprintf(out, sizeof(out), "%s/out", fx->root);
    assert_int_equal(merge_runs(paths, 2, out, &cfg, &res, err, sizeof(err)), 0);
    assert_int_equal(res.inputs, 2);
    assert_true(res.wrote_hlog);
    assert_true(res.wrote_requests);
    assert_int_equal(res.nnotes, 0);

    /* identical histograms and counts */
    assert_same_histograms(res.stats, fx->all);
    assert_same_counts(res.stats, fx->all);
    assert_int_equal(res.stats->requests, fx->a.stats->requests + fx->b.stats->requests);

    /* duration: [0, 3] u [0.25, 3.75] = 3.75 s */
    assert_true(fabs(res.sum.duration_s - 3.75) < 1e-9);

    /* identical percentiles: the summary of one run over every record */
    struct run_summary want;
    run_summary_compute(&want, fx->all, 3.75, 0, &fx->gp);
    for (int m = 0; m < STAT_METRIC_COUNT; m++) {
        assert_int_equal(res.sum.lat[m].count, want.lat[m].count);
        assert_memory_equal(res.sum.lat[m].pct, want.lat[m].pct, sizeof(want.lat[m].pct));
        assert_memory_equal(&res.sum.lat[m].mean, &want.lat[m].mean, sizeof(double));
        assert_memory_equal(&res.sum.lat[m].max, &want.lat[m].max, sizeof(double));
    }
    assert_int_equal(res.sum.completed, want.completed);
    assert_int_equal(res.sum.failed, want.failed);
    assert_int_equal(res.sum.good, want.good);
    assert_true(res.sum.goodput_enabled);
    assert_memory_equal(&res.sum.request_throughput, &want.request_throughput, sizeof(double));
    assert_memory_equal(&res.sum.error_rate, &want.error_rate, sizeof(double));

    /* what was written reads back as the union too */
    char path[512];
    json_t *doc;
    struct run_stats *back;
    snprintf(path, sizeof(path), "%s/result.json", out);
    assert_int_equal(runfiles_load_result(path, &doc, err, sizeof(err)), 0);
    assert_int_equal(result_read_stats(doc, &back, err, sizeof(err)), 0);
    assert_same_histograms(back, fx->all);
    assert_same_counts(back, fx->all);
    run_stats_free(back);

    const json_t *run = json_object_get(doc, "run");
    assert_string_equal(json_string_value(json_object_get(run, "started_at")),
                        "2023-11-14T22:13:20.000Z");
    assert_string_equal(json_string_value(json_object_get(run, "model")), "m");
    assert_null(json_object_get(run, "run_id")); /* they differ */
    assert_null(json_object_get(run, "api_key"));
    const json_t *from = json_object_get(run, "merged_from");
    assert_int_equal(json_array_size(from), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(from, 1), "run_id")),
                        "bbbb");
    const json_t *slos = json_object_get(doc, "slo");
    assert_int_equal(json_array_size(slos), 1);
    double actual = NAN;
    assert_int_equal(json_is_true(json_object_get(json_array_get(slos, 0), "pass")),
                     slo_eval(&slo, &want, &actual));

    /*
     * quality, weighted: rouge_l mean (0.5 * 8 + 0.7 * 24) / 32 = 0.65, min
     * 0.1; exact (0.25 * 8 + 0.5 * 24) / 32 = 0.4375; json valid (1.0 * 10 +
     * 0.5 * 30) / 40 = 0.625; dual SLA 7 of 8 windows.
     */
    const json_t *q = json_object_get(doc, "quality");
    assert_int_equal(json_integer_value(json_object_get(q, "requests")), 40);
    assert_int_equal(json_integer_value(json_object_get(q, "with_reference")), 32);
    const json_t *rl = json_object_get(q, "rouge_l");
    assert_true(fabs(json_number_value(json_object_get(rl, "mean")) - 0.65) < 1e-12);
    assert_true(fabs(json_number_value(json_object_get(rl, "min")) - 0.1) < 1e-12);
    assert_true(json_is_null(json_object_get(rl, "p50")));
    assert_true(json_is_null(json_object_get(q, "bleu4")));
    assert_true(json_is_null(json_object_get(q, "regex_match_rate")));
    assert_true(fabs(json_number_value(json_object_get(q, "exact_match_rate")) - 0.4375) < 1e-12);
    assert_true(fabs(json_number_value(json_object_get(q, "json_valid_rate")) - 0.625) < 1e-12);
    const json_t *ds = json_object_get(q, "dual_sla");
    assert_int_equal(json_integer_value(json_object_get(ds, "windows")), 8);
    assert_true(fabs(json_number_value(json_object_get(ds, "attainment_rate")) - 0.875) < 1e-12);
    assert_true(json_is_null(json_object_get(q, "consistency")));

    /*
     * timeline: A's intervals [0,1], [1,2], [2,3] -> seconds 0, 1, 2; B's
     * [0.25, 1.25], [1.25, 2.25] -> middles 0.75, 1.75 -> seconds 0, 1.
     * Counts: A point k has sent 10k; B the same.
     */
    const json_t *tl = json_object_get(doc, "timeline");
    assert_int_equal(json_array_size(tl), 3);
    static const int sent[3] = {10 + 10, 20 + 20, 30};
    for (size_t k = 0; k < 3; k++) {
        const json_t *p = json_array_get(tl, k);
        assert_true(fabs(json_number_value(json_object_get(p, "t_s")) - (double)(k + 1)) < 1e-9);
        assert_int_equal(json_integer_value(json_object_get(p, "sent")), sent[k]);
        assert_int_equal(json_integer_value(json_object_get(p, "in_flight")), k < 2 ? 4 : 2);
    }
    /*
     * percentiles from the merged intervals: second 0 holds A's 3 x 500 us
     * and B's 2 x 700 us (B's interval at 0.25 + 0.001 .. + 0.999 s, middle
     * 0.75 s): p50 (rank 3 of 5) = 0.5 ms, p99 (rank 5) = 0.7 ms; second 1
     * A's 3 x 1000 and B's 2 x 1400: p50 1 ms; second 2 only A's 3 x 1500.
     */
    const json_t *p0 = json_array_get(tl, 0);
    assert_true(fabs(json_number_value(json_object_get(p0, "ttft_p50_ms")) - 0.5) < 1e-9);
    assert_true(fabs(json_number_value(json_object_get(p0, "ttft_p99_ms")) - 0.7) < 1e-9);
    assert_true(fabs(json_number_value(json_object_get(p0, "e2el_p50_ms")) - 0.5) < 1e-9);
    const json_t *p1 = json_array_get(tl, 1);
    assert_true(fabs(json_number_value(json_object_get(p1, "ttft_p99_ms")) - 1.4) < 1e-9);
    assert_true(fabs(json_number_value(json_object_get(p1, "e2el_p50_ms")) - 0.0) < 1e-9);
    const json_t *p2 = json_array_get(tl, 2);
    assert_true(fabs(json_number_value(json_object_get(p2, "ttft_p50_ms")) - 1.5) < 1e-9);
    json_decref(doc);

    /* the merged latency.hlog: one-second intervals from the earliest start */
    snprintf(path, sizeof(path), "%s/latency.hlog", out);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    struct hlog_reader r;
    struct hlog_entry e;
    hlog_reader_init(&r, f, 0);
    static const struct {
        const char *tag;
        double start;
        int64_t count;
    } want_iv[] = {{"ttft", 0, 5}, {"e2el", 0, 5}, {"ttft", 1, 5}, {"ttft", 2, 3}};
    for (size_t i = 0; i < sizeof(want_iv) / sizeof(want_iv[0]); i++) {
        assert_int_equal(hlog_reader_next(&r, &e), 1);
        assert_string_equal(e.tag, want_iv[i].tag);
        assert_true(fabs(e.start - want_iv[i].start) < 1e-9);
        assert_int_equal(hdr_total_count(e.hist), want_iv[i].count);
        hdr_free(e.hist);
    }
    assert_int_equal(hlog_reader_next(&r, &e), 0);
    assert_true(r.has_start_time && fabs(r.start_time - (double)T0 / 1e9) < 1e-6);
    assert_true(r.has_base_time && fabs(r.base_time - (double)T0 / 1e9) < 1e-6);
    hlog_reader_release(&r);
    fclose(f);

    /* requests.jsonl: every line, ids unique, B's times shifted by 250 ms */
    snprintf(path, sizeof(path), "%s/requests.jsonl", out);
    f = fopen(path, "r");
    assert_non_null(f);
    struct line_reader lr;
    const char *line;
    size_t len, n = 0, nb = 0;
    line_reader_init(&lr, f, 0);
    while (line_reader_next(&lr, &line, &len) == 1) {
        json_t *o = json_loadb(line, len, 0, NULL);
        assert_non_null(o);
        int input = (int)json_integer_value(json_object_get(o, "input"));
        const char *id = json_string_value(json_object_get(o, "id"));
        char want_id[32];
        size_t idx = input == 0 ? n : nb;
        snprintf(want_id, sizeof(want_id), "%d-%zu", input, idx);
        assert_string_equal(id, want_id);
        /* record i of a part was intended at origin + 5 ms * i */
        double intended = json_number_value(json_object_get(o, "intended_ms"));
        double want_ms = 5.0 * (double)idx + (input ? 250.0 : 0);
        assert_true(fabs(intended - want_ms) < 1e-6);
        if (input)
            nb++;
        else
            n++;
        json_decref(o);
    }
    assert_int_equal(n, fx->a.nlines);
    assert_int_equal(nb, fx->b.nlines);
    assert_int_equal(res.request_lines, fx->a.nlines + fx->b.nlines);
    line_reader_release(&lr);
    fclose(f);
    merge_result_release(&res);

    /* a second merge into the same place needs --force */
    assert_int_equal(merge_runs(paths, 2, out, &cfg, &res, err, sizeof(err)), -EEXIST);
    assert_non_null(strstr(err, "--force"));
    cfg.force = true;
    assert_int_equal(merge_runs(paths, 2, out, &cfg, &res, err, sizeof(err)), 0);
    merge_result_release(&res);
}

static void test_merge_refuses_bad_input(void **state)
{
    struct fixture *fx = *state;
    const char *paths[3] = {fx->a.dir, fx->b.dir, NULL};
    char out[256], path[512], err[512];
    struct merge_result res;
    struct merge_cfg cfg = {0};

    snprintf(out, sizeof(out), "%s/out", fx->root);
    /* one input is not a merge */
    assert_int_equal(merge_runs(paths, 1, out, &cfg, &res, err, sizeof(err)), -EINVAL);
    /* the output may not be an input's directory */
    assert_int_equal(merge_runs(paths, 2, fx->b.dir, &cfg, &res, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "input 2"));
    /* the same run twice would count its requests twice */
    char again[300];
    snprintf(again, sizeof(again), "%s/result.json", fx->a.dir);
    paths[1] = again;
    assert_int_equal(merge_runs(paths, 2, out, &cfg, &res, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "the same run"));
    paths[1] = fx->b.dir;
    /* a missing input */
    paths[2] = "/nonexistent/ts-run";
    assert_int_equal(merge_runs(paths, 3, out, &cfg, &res, err, sizeof(err)), -ENOENT);
    /* not JSON */
    snprintf(path, sizeof(path), "%s/bad.json", fx->root);
    write_text(path, "{\"schema\": ", 11);
    paths[2] = path;
    assert_int_equal(merge_runs(paths, 3, out, &cfg, &res, err, sizeof(err)), TS_PARSE);
    assert_non_null(strstr(err, "bad.json:1:"));
    /* a result without started_at cannot be aligned */
    const char *nodate = "{\"schema\": \"tokenstorm.result/1\", \"run\": {\"started_at\": null}}";
    write_text(path, nodate, strlen(nodate));
    assert_int_equal(merge_runs(paths, 3, out, &cfg, &res, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "started_at"));
    /* histograms that do not decode */
    const char *badhist = "{\"schema\": \"tokenstorm.result/1\", \"run\": {\"started_at\": "
                          "\"2023-11-14T22:13:20.000Z\"}, \"histograms\": {\"ttft\": \"!!\"}}";
    write_text(path, badhist, strlen(badhist));
    assert_int_equal(merge_runs(paths, 3, out, &cfg, &res, err, sizeof(err)), TS_PARSE);
    unlink(path);
}

/* Allocations failing in turn: an error and nothing leaked, until it succeeds. */
static void test_merge_alloc_failures(void **state)
{
    struct fixture *fx = *state;
    const char *paths[2] = {fx->a.dir, fx->b.dir};
    char out[256], err[512];
    struct merge_result res;
    struct merge_cfg cfg = {.force = true};
    int rc = -ENOMEM;
    long n = 0;

    snprintf(out, sizeof(out), "%s/out", fx->root);
    for (; rc != 0 && n < 100000; n += n < 64 ? 1 : 1 + n / 8) {
        ts_alloc_fail_after(n);
        rc = merge_runs(paths, 2, out, &cfg, &res, err, sizeof(err));
        ts_alloc_fail_after(-1);
        assert_true(rc == 0 || err[0]);
    }
    assert_int_equal(rc, 0);
    assert_true(n > 64);
    merge_result_release(&res);
}

static void test_parse_time(void **state)
{
    (void)state;
    uint64_t ns;
    assert_int_equal(runfiles_parse_time("2023-11-14T22:13:20.000Z", &ns), 0);
    assert_true(ns == T0);
    assert_int_equal(runfiles_parse_time("2023-11-14T22:13:20.25Z", &ns), 0);
    assert_true(ns == T0 + 250 * MS);
    assert_int_equal(runfiles_parse_time("2023-11-14T22:13:20Z", &ns), 0);
    assert_true(ns == T0);
    assert_int_equal(runfiles_parse_time("1970-01-01T00:00:01.000000001Z", &ns), 0);
    assert_true(ns == 1000000001ull);
    assert_int_equal(runfiles_parse_time("2023-11-14 22:13:20Z", &ns), -EINVAL);
    assert_int_equal(runfiles_parse_time("2023-11-14T22:13:20.Z", &ns), -EINVAL);
    assert_int_equal(runfiles_parse_time("2023-11-14T22:13:20+01:00", &ns), -EINVAL);
    assert_int_equal(runfiles_parse_time("2023-13-14T22:13:20Z", &ns), -EINVAL);
    assert_int_equal(runfiles_parse_time("", &ns), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_merge_equals_union, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merge_refuses_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merge_alloc_failures, setup, teardown),
        cmocka_unit_test(test_parse_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
