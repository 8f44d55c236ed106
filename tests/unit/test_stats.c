/*
 * test_stats.c - metric math on synthetic records against hand-computed
 * values, including vLLM's edge cases (one-token outputs, empty role chunks,
 * a usage-only last chunk), goodput, warm-up, and exact merging.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "analysis/stats.h"
#include "base/alloc.h"

#define MS   1000000ull /* ns */
#define US   1000ull
#define BASE (1000000ull * MS) /* an arbitrary monotonic origin: 1000 s */

static struct run_stats *new_stats(void)
{
    struct run_stats *s = NULL;
    assert_int_equal(run_stats_new(&s), 0);
    assert_non_null(s);
    return s;
}

/* Count in the bucket of value_us of metric m. */
static int64_t at(const struct run_stats *s, enum stat_metric m, int64_t value_us)
{
    return hdr_count_at_value(s->hist[m], value_us);
}

static int64_t total(const struct run_stats *s, enum stat_metric m)
{
    return hdr_total_count(s->hist[m]);
}

/*
 * A streamed chat completion as the runner fills it: intended at BASE,
 * started 0.5 ms late, the role chunk (choices, empty content) at +100 ms,
 * the first content at +120 ms, the last chunk with choices at +500 ms, then
 * a usage-only chunk and [DONE] until +501 ms; 5 output tokens from usage.
 */
static struct req_record stream_ok(void)
{
    struct req_record r;
    memset(&r, 0, sizeof(r));
    r.id = 1;
    r.outcome = REQ_OK;
    r.http_status = 200;
    r.flags = REQF_STREAM;
    r.intended_ns = BASE;
    r.start_ns = BASE + 500 * US;
    r.first_byte_ns = BASE + 90 * MS;
    r.first_chunk_ns = BASE + 100 * MS;
    r.first_token_ns = BASE + 120 * MS;
    r.last_chunk_ns = BASE + 500 * MS;
    r.end_ns = BASE + 501 * MS;
    r.prompt_tokens = 90;
    r.max_tokens = 5;
    r.usage_prompt_tokens = 100;
    r.usage_completion_tokens = 5;
    r.client_tokens = 5;
    r.content_chunks = 5;
    r.choice_chunks = 6;
    r.output_tokens = 5;
    r.token_source = TOKENS_USAGE;
    r.sent_us = 200;
    r.ttfb_us = 89500;
    return r;
}

static void test_stream_ok_metrics(void **state)
{
    struct run_stats *s = new_stats();
    struct req_record r = stream_ok();

    run_stats_add_record(s, &r, NULL);
    assert_int_equal(s->requests, 1);
    assert_int_equal(s->outcomes[REQ_OK], 1);
    assert_int_equal(s->http_class[HTTP_CLASS_2XX], 1);
    assert_int_equal(s->streams, 1);

    /* TTFT from the intended time to the role chunk (vLLM's first chunk with choices). */
    assert_int_equal(at(s, STAT_TTFT, 100000), 1);
    assert_int_equal(at(s, STAT_TTFT_UNCORRECTED, 99500), 1);
    /* TTFC: to the first non-empty content. */
    assert_int_equal(at(s, STAT_TTFC, 120000), 1);
    /* E2EL ends at the last chunk with choices, not at the usage chunk / [DONE]. */
    assert_int_equal(at(s, STAT_E2EL, 500000), 1);
    assert_int_equal(at(s, STAT_E2EL_UNCORRECTED, 499500), 1);
    /* TPOT = (500 - 100) ms / (5 - 1) = 100 ms; incl. TTFT = 500 ms / 5. */
    assert_int_equal(at(s, STAT_TPOT, 100000), 1);
    assert_int_equal(at(s, STAT_TPOT_INCL_TTFT, 100000), 1);
    assert_int_equal(at(s, STAT_LAG, 500), 1);
    assert_int_equal(at(s, STAT_SENT, 200), 1);
    assert_int_equal(at(s, STAT_TTFB, 89500), 1);
    /* No DNS/connect/TLS measured, no ITL reported. */
    assert_int_equal(total(s, STAT_DNS), 0);
    assert_int_equal(total(s, STAT_CONNECT), 0);
    assert_int_equal(total(s, STAT_TLS), 0);
    assert_int_equal(total(s, STAT_ITL), 0);
    for (int m = 0; m < STAT_METRIC_COUNT; m++) {
        if (m != STAT_ITL && m != STAT_DNS && m != STAT_CONNECT && m != STAT_TLS && m != STAT_TTFA)
            assert_int_equal(total(s, (enum stat_metric)m), 1);
    }
    /* No reasoning: no time to first answer. */
    assert_int_equal(total(s, STAT_TTFA), 0);

    /* Tokens: usage prompt tokens win over the intended count. */
    assert_int_equal(s->input_tokens, 100);
    assert_int_equal(s->usage_input, 1);
    assert_int_equal(s->output_tokens, 5);
    assert_int_equal(s->output_tokens_all, 5);
    assert_int_equal(s->token_source[TOKENS_USAGE], 1);
    assert_int_equal(s->content_chunks, 5);
    assert_int_equal(s->choice_chunks, 6);
    assert_string_equal(run_stats_token_method(s), "usage");
    assert_int_equal(run_stats_failed(s), 0);
    assert_true(run_stats_error_rate(s) == 0.0);
    run_stats_free(s);
}

static void test_one_token_output_has_no_tpot(void **state)
{
    struct run_stats *s = new_stats();
    struct req_record r = stream_ok();
    r.output_tokens = 1;
    r.last_chunk_ns = r.first_chunk_ns; /* one chunk with choices */
    r.usage_prompt_tokens = -1;         /* no usage: the intended count */
    r.token_source = TOKENS_CHUNKS;

    run_stats_add_record(s, &r, NULL);
    assert_int_equal(total(s, STAT_TPOT), 0);
    /* E2EL = TTFT = 100 ms, and TPOT incl. TTFT = 100 ms / 1. */
    assert_int_equal(at(s, STAT_E2EL, 100000), 1);
    assert_int_equal(at(s, STAT_TPOT_INCL_TTFT, 100000), 1);
    assert_int_equal(s->input_tokens, 90);
    assert_int_equal(s->usage_input, 0);
    assert_string_equal(run_stats_token_method(s), "chunks");

    /* Zero output tokens: neither TPOT nor TPOT incl. TTFT. */
    r.output_tokens = 0;
    run_stats_add_record(s, &r, NULL);
    assert_int_equal(total(s, STAT_TPOT), 0);
    assert_int_equal(total(s, STAT_TPOT_INCL_TTFT), 1);
    assert_int_equal(total(s, STAT_E2EL), 2);
    run_stats_free(s);
}

static void test_tpot_rounding(void **state)
{
    struct run_stats *s = new_stats();
    struct req_record r = stream_ok();
    /* 1000 us over 3 gaps = 333.33 us -> 333 us; 7 tokens: 1000 / 6 = 166.67 -> 167. */
    r.first_chunk_ns = BASE + 10 * MS;
    r.last_chunk_ns = r.first_chunk_ns + 1000 * US;
    r.output_tokens = 4;
    run_stats_add_record(s, &r, NULL);
    r.output_tokens = 7;
    run_stats_add_record(s, &r, NULL);
    assert_int_equal(at(s, STAT_TPOT, 333), 1);
    assert_int_equal(at(s, STAT_TPOT, 167), 1);
    run_stats_free(s);
}

static void test_non_stream(void **state)
{
    struct run_stats *s = new_stats();
    struct req_record r;
    memset(&r, 0, sizeof(r));
    r.outcome = REQ_OK;
    r.http_status = 200;
    r.intended_ns = BASE;
    r.start_ns = BASE;
    r.first_byte_ns = BASE + 700 * MS;
    r.end_ns = BASE + 750 * MS;
    r.prompt_tokens = 10;
    r.usage_prompt_tokens = 12;
    r.usage_completion_tokens = 30;
    r.output_tokens = 30;

    run_stats_add_record(s, &r, NULL);
    assert_int_equal(s->streams, 0);
    assert_int_equal(total(s, STAT_TTFT), 0);
    assert_int_equal(total(s, STAT_TTFC), 0);
    assert_int_equal(total(s, STAT_TPOT), 0);
    assert_int_equal(at(s, STAT_E2EL, 750000), 1);
    assert_int_equal(at(s, STAT_TPOT_INCL_TTFT, 25000), 1);
    assert_int_equal(at(s, STAT_LAG, 0), 1);
    assert_int_equal(s->input_tokens, 12);
    run_stats_free(s);
}

static void test_failures_and_cut(void **state)
{
    struct run_stats *s = new_stats();
    struct req_record r;

    r = stream_ok();
    run_stats_add_record(s, &r, NULL);

    memset(&r, 0, sizeof(r));
    r.outcome = REQ_HTTP_5XX;
    r.http_status = 503;
    r.intended_ns = BASE;
    r.start_ns = BASE + 2 * MS;
    r.end_ns = BASE + 10 * MS;
    r.output_tokens = 0;
    run_stats_add_record(s, &r, NULL);

    /* A stream that broke after 3 tokens: not ok, but its tokens were produced. */
    r = stream_ok();
    r.outcome = REQ_TRUNCATED;
    r.flags |= REQF_NO_DONE | REQF_NO_FINISH;
    r.output_tokens = 3;
    run_stats_add_record(s, &r, NULL);

    memset(&r, 0, sizeof(r));
    r.outcome = REQ_CUT;
    r.http_status = 200;
    r.intended_ns = BASE;
    r.start_ns = BASE;
    run_stats_add_record(s, &r, NULL);

    memset(&r, 0, sizeof(r));
    r.outcome = REQ_CONNECT;
    r.intended_ns = BASE;
    r.start_ns = BASE;
    run_stats_add_record(s, &r, NULL);

    assert_int_equal(s->requests, 5);
    assert_int_equal(s->outcomes[REQ_OK], 1);
    assert_int_equal(s->outcomes[REQ_HTTP_5XX], 1);
    assert_int_equal(s->outcomes[REQ_TRUNCATED], 1);
    assert_int_equal(s->outcomes[REQ_CUT], 1);
    assert_int_equal(s->outcomes[REQ_CONNECT], 1);
    assert_int_equal(s->http_class[HTTP_CLASS_2XX], 3);
    assert_int_equal(s->http_class[HTTP_CLASS_5XX], 1);
    assert_int_equal(s->http_class[HTTP_CLASS_NONE], 1);
    assert_int_equal(s->no_done, 1);
    assert_int_equal(s->no_finish, 1);
    /* failed = 5xx + truncated + connect; cut is neither ok nor failed. */
    assert_int_equal(run_stats_failed(s), 3);
    assert_true(run_stats_error_rate(s) == 3.0 / 4.0);
    /* Latencies of successful requests only; lag of every request. */
    assert_int_equal(total(s, STAT_TTFT), 1);
    assert_int_equal(total(s, STAT_E2EL), 1);
    assert_int_equal(total(s, STAT_LAG), 5);
    assert_int_equal(at(s, STAT_LAG, 2000), 1);
    assert_int_equal(s->output_tokens, 5);
    assert_int_equal(s->output_tokens_all, 8);
    run_stats_free(s);
}

static void test_warmup_is_excluded(void **state)
{
    struct run_stats *s = new_stats();
    struct req_record r = stream_ok();
    r.flags |= REQF_WARMUP;
    run_stats_add_record(s, &r, NULL);
    r.outcome = REQ_HTTP_429;
    run_stats_add_record(s, &r, NULL);

    assert_int_equal(s->warmup_requests, 2);
    assert_int_equal(s->warmup_ok, 1);
    assert_int_equal(s->requests, 0);
    assert_int_equal(s->outcomes[REQ_OK], 0);
    assert_int_equal(s->output_tokens_all, 0);
    for (int m = 0; m < STAT_METRIC_COUNT; m++)
        assert_int_equal(total(s, (enum stat_metric)m), 0);
    assert_string_equal(run_stats_token_method(s), "none");
    run_stats_free(s);
}

static void test_phases(void **state)
{
    struct run_stats *s = new_stats();
    struct req_record r = stream_ok();
    r.dns_us = 1000;
    r.connect_us = 3000;
    r.tls_us = 8000;
    r.sent_us = 8100;
    r.ttfb_us = 50000;
    run_stats_add_record(s, &r, NULL);
    /* DNS as measured, connect and TLS as the time of their own phase. */
    assert_int_equal(at(s, STAT_DNS, 1000), 1);
    assert_int_equal(at(s, STAT_CONNECT, 2000), 1);
    assert_int_equal(at(s, STAT_TLS, 5000), 1);
    assert_int_equal(at(s, STAT_SENT, 8100), 1);
    assert_int_equal(at(s, STAT_TTFB, 50000), 1);

    /* A kept-alive connection has no connection phases, even if curl reports some. */
    r.flags |= REQF_REUSED_CONN;
    run_stats_add_record(s, &r, NULL);
    assert_int_equal(total(s, STAT_DNS), 1);
    assert_int_equal(total(s, STAT_CONNECT), 1);
    assert_int_equal(total(s, STAT_TLS), 1);
    assert_int_equal(total(s, STAT_SENT), 2);
    assert_int_equal(s->reused_conn, 1);

    /* Plain HTTP: no TLS; an IP literal: no DNS. */
    r = stream_ok();
    r.connect_us = 150;
    run_stats_add_record(s, &r, NULL);
    assert_int_equal(total(s, STAT_DNS), 1);
    assert_int_equal(at(s, STAT_CONNECT, 150), 1);
    assert_int_equal(total(s, STAT_TLS), 1);
    run_stats_free(s);
}

static void test_itl_and_clock_oddities(void **state)
{
    struct run_stats *s = new_stats();
    run_stats_add_itl(s, 1500 * US);
    run_stats_add_itl(s, 1499); /* rounds to 1 us */
    run_stats_add_itl(s, 499);  /* rounds to 0 us */
    assert_int_equal(total(s, STAT_ITL), 3);
    assert_int_equal(at(s, STAT_ITL, 1500), 1);
    assert_int_equal(at(s, STAT_ITL, 1), 1);
    assert_int_equal(at(s, STAT_ITL, 0), 1);

    /* A start a hair before the intended time is no lag (and no negative value). */
    struct req_record r = stream_ok();
    r.start_ns = r.intended_ns - 3 * US;
    run_stats_add_record(s, &r, NULL);
    assert_int_equal(at(s, STAT_LAG, 0), 1);
    /* A first chunk that "happened" before the intended time is skipped, not wrapped. */
    r = stream_ok();
    r.first_chunk_ns = r.intended_ns - 1;
    run_stats_add_record(s, &r, NULL);
    assert_int_equal(total(s, STAT_TTFT), 1);
    /* An out-of-range outcome is counted as other, never out of the array. */
    r = stream_ok();
    r.outcome = (enum req_outcome)99;
    run_stats_add_record(s, &r, NULL);
    assert_int_equal(s->outcomes[REQ_OTHER], 1);
    run_stats_free(s);
}

/* A reasoning model: reasoning deltas from 120 ms, the first answer at 300 ms. */
static void test_time_to_first_answer(void **state)
{
    struct run_stats *s = new_stats();
    struct req_record r = stream_ok();
    r.flags |= REQF_REASONING;
    r.first_answer_ns = BASE + 300 * MS;
    run_stats_add_record(s, &r, NULL);
    assert_int_equal(at(s, STAT_TTFC, 120000), 1);
    assert_int_equal(at(s, STAT_TTFA, 300000), 1);
    assert_string_equal(stat_metric_name(STAT_TTFA), "ttfa");
    /* a failed request has none */
    r.outcome = REQ_TRUNCATED;
    run_stats_add_record(s, &r, NULL);
    assert_int_equal(total(s, STAT_TTFA), 1);
    run_stats_free(s);
    (void)state;
}

/* What a usage disagreement is (record.h): more than 2 tokens and 5 % apart. */
static void test_tokens_disagree(void **state)
{
    assert_false(req_tokens_disagree(20, 20));
    assert_false(req_tokens_disagree(21, 20)); /* a stop token the text does not show */
    assert_false(req_tokens_disagree(20, 22));
    assert_true(req_tokens_disagree(20, 23));
    assert_true(req_tokens_disagree(40, 20));
    assert_false(req_tokens_disagree(1000, 1040)); /* 4 %: a tokenizer close to the model's */
    assert_true(req_tokens_disagree(1000, 1060));
    assert_true(req_tokens_disagree(0, 3));
    (void)state;
}

static void test_goodput(void **state)
{
    struct run_stats *s = new_stats();
    struct goodput_cfg cfg = {.ttft_ms = 150, .tpot_ms = 0, .e2el_ms = 0};
    struct req_record r;

    assert_false(goodput_cfg_enabled(NULL));
    assert_false(goodput_cfg_enabled(&(struct goodput_cfg){0}));
    assert_true(goodput_cfg_enabled(&cfg));

    r = stream_ok(); /* first token 120 ms: good */
    run_stats_add_record(s, &r, &cfg);
    r.first_token_ns = BASE + 150 * MS; /* exactly at the threshold: good (vLLM: s >= r) */
    run_stats_add_record(s, &r, &cfg);
    r.first_token_ns = BASE + 150 * MS + 1; /* 1 ns over: not good */
    run_stats_add_record(s, &r, &cfg);
    /* a role chunk at 10 ms does not make a first token at 200 ms good: the
     * threshold judges what users feel, not vLLM's first chunk */
    r.first_chunk_ns = BASE + 10 * MS;
    r.first_token_ns = BASE + 200 * MS;
    run_stats_add_record(s, &r, &cfg);
    r = stream_ok();
    r.outcome = REQ_TRUNCATED; /* failed requests are never good */
    run_stats_add_record(s, &r, &cfg);
    assert_int_equal(s->good, 2);

    /* TPOT threshold: a one-token output counts as TPOT 0 (vLLM). */
    run_stats_reset(s);
    cfg = (struct goodput_cfg){.tpot_ms = 50};
    r = stream_ok(); /* TPOT 100 ms: not good */
    run_stats_add_record(s, &r, &cfg);
    r.output_tokens = 1;
    run_stats_add_record(s, &r, &cfg);
    r.output_tokens = 9; /* 400 ms / 8 = 50 ms: good */
    run_stats_add_record(s, &r, &cfg);
    assert_int_equal(s->good, 2);

    /* E2EL threshold; a non-streamed request has no TTFT or TPOT: it meets an
     * E2EL threshold but never one on TTFT or TPOT (not E2EL as its TTFT, not 0). */
    run_stats_reset(s);
    cfg = (struct goodput_cfg){.ttft_ms = 600, .e2el_ms = 600};
    r = stream_ok(); /* e2el 500: good */
    run_stats_add_record(s, &r, &cfg);
    r.last_chunk_ns = BASE + 601 * MS; /* e2el 601: not good */
    run_stats_add_record(s, &r, &cfg);
    memset(&r, 0, sizeof(r));
    r.outcome = REQ_OK;
    r.intended_ns = BASE;
    r.start_ns = BASE;
    r.end_ns = BASE + 550 * MS;
    r.output_tokens = 10;
    run_stats_add_record(s, &r, &cfg); /* ttft:600 e2el:600: no TTFT, not good */
    assert_int_equal(s->good, 1);
    cfg = (struct goodput_cfg){.e2el_ms = 600};
    run_stats_add_record(s, &r, &cfg); /* e2el 550: good */
    assert_int_equal(s->good, 2);
    cfg = (struct goodput_cfg){.tpot_ms = 1000};
    run_stats_add_record(s, &r, &cfg); /* no TPOT: not good (it was 0 ms, so good) */
    assert_int_equal(s->good, 2);
    assert_false(goodput_meets(&cfg, &r));
    assert_true(goodput_meets(&(struct goodput_cfg){.e2el_ms = 550}, &r));

    /* No configuration: nothing is counted as good. */
    run_stats_reset(s);
    r = stream_ok();
    run_stats_add_record(s, &r, NULL);
    assert_int_equal(s->good, 0);
    run_stats_free(s);
}

static void test_token_method(void **state)
{
    struct run_stats *s = new_stats();
    struct req_record r = stream_ok();
    r.token_source = TOKENS_TOKENIZER;
    run_stats_add_record(s, &r, NULL);
    assert_string_equal(run_stats_token_method(s), "tokenizer");
    r.token_source = TOKENS_USAGE;
    r.flags |= REQF_USAGE_MISMATCH;
    run_stats_add_record(s, &r, NULL);
    assert_string_equal(run_stats_token_method(s), "mixed");
    assert_int_equal(s->usage_mismatch, 1);
    /* A failed request's method does not count. */
    run_stats_reset(s);
    r.outcome = REQ_RECV;
    r.token_source = TOKENS_CHUNKS;
    run_stats_add_record(s, &r, NULL);
    assert_string_equal(run_stats_token_method(s), "none");
    run_stats_free(s);
}

/* A deterministic mix of records of every kind. */
static struct req_record random_record(uint64_t *seed)
{
    struct req_record r = stream_ok();
    uint64_t x;
#define NEXT() (x = (*seed = *seed * 6364136223846793005ull + 1442695040888963407ull) >> 33)
    NEXT();
    r.outcome = (enum req_outcome)(x % 3 == 0 ? x % REQ_OUTCOME_COUNT : REQ_OK);
    NEXT();
    r.flags = (uint32_t)(x & 0x7f);
    NEXT();
    r.http_status = (int)(x % 600);
    NEXT();
    r.start_ns = r.intended_ns + x % (5 * MS);
    NEXT();
    r.first_chunk_ns = r.start_ns + x % (900 * MS);
    r.first_token_ns = r.first_chunk_ns + 3 * MS;
    NEXT();
    r.last_chunk_ns = r.first_token_ns + x % (20000 * MS);
    r.end_ns = r.last_chunk_ns + 1 * MS;
    NEXT();
    r.output_tokens = (uint32_t)(x % 300);
    NEXT();
    r.token_source = (enum token_source)(x % 3);
    NEXT();
    r.usage_prompt_tokens = (int32_t)(x % 4) - 1;
    NEXT();
    r.dns_us = (uint32_t)(x % 5000);
    r.connect_us = r.dns_us + 100;
    r.tls_us = r.connect_us + (uint32_t)(x % 7000);
#undef NEXT
    return r;
}

static void assert_stats_equal(const struct run_stats *a, const struct run_stats *b)
{
    for (int m = 0; m < STAT_METRIC_COUNT; m++)
        assert_true(hdr_equal(a->hist[m], b->hist[m]));
    /* The counters are a block of uint64_t after the histogram pointers. */
    size_t off = offsetof(struct run_stats, requests);
    assert_memory_equal((const char *)a + off, (const char *)b + off,
                        offsetof(struct run_stats, errors) - off);
    /* the error tally keeps keys in first-seen order, which merging may change;
     * past its slots (these random records have more keys) only the total is exact */
    assert_int_equal(errtally_total(&a->errors), errtally_total(&b->errors));
    if (!a->errors.other && !b->errors.other)
        assert_true(errtally_equal(&a->errors, &b->errors));
}

/* recall@k of ok vector searches: mean, percentiles and min survive a merge. */
static void test_recall(void **state)
{
    struct run_stats *a = new_stats(), *b = new_stats();
    double vals[] = {1.0, 0.9, 0.5, 0.0};
    for (int i = 0; i < 4; i++) {
        struct req_record r = stream_ok();
        r.has_recall = true;
        r.recall = vals[i];
        r.recall_k = 10;
        run_stats_add_record(i < 2 ? a : b, &r, NULL);
    }
    struct req_record failed = stream_ok();
    failed.outcome = REQ_HTTP_5XX;
    failed.has_recall = true; /* a failed search has no recall to count */
    run_stats_add_record(a, &failed, NULL);
    struct req_record plain = stream_ok();
    run_stats_add_record(a, &plain, NULL);
    assert_int_equal(a->recall.count, 2);
    assert_true(quality_dist_min(&a->recall) == 0.9); /* not the 0 of an empty minimum */
    assert_int_equal(run_stats_merge(a, b), 0);
    assert_int_equal(a->recall.count, 4);
    assert_int_equal(a->recall_k, 10);
    assert_true(fabs(quality_dist_mean(&a->recall) - 0.6) < 1e-9);
    assert_true(quality_dist_min(&a->recall) == 0.0);
    assert_true(quality_dist_percentile(&a->recall, 50) == 0.5);
    run_stats_reset(a);
    assert_int_equal(a->recall.count, 0);
    run_stats_free(a);
    run_stats_free(b);
}

/* A retrieval step's searches by hits and the answers they led to, by
 * hits: exact across a merge; the answer quality's minimum is a real one. */
static void test_led_quality(void **state)
{
    (void)state;
    struct run_stats *a = new_stats(), *b = new_stats(), *one = new_stats();
    const double recall[] = {1.0, 2.0 / 3.0, 2.0 / 3.0, 0.0, 1.0};
    const double rouge[] = {1.0, 0.5, 0.25, 0.0, 0.75};
    for (int i = 0; i < 5; i++) {
        struct req_record r = stream_ok();
        r.has_recall = true;
        r.recall = recall[i];
        r.recall_k = 3;
        struct quality_scores q = {.have = QUALITY_HAVE_REF,
                                   .rouge_l = rouge[i],
                                   .bleu4 = rouge[i] / 2,
                                   .exact = rouge[i] == 1.0};
        struct run_stats *s = i < 3 ? a : b;
        run_stats_add_record(s, &r, NULL);
        run_stats_add_led(s, recall[i], 3, &q, rouge[i] >= 0.5);
        run_stats_add_record(one, &r, NULL);
        run_stats_add_led(one, recall[i], 3, &q, rouge[i] >= 0.5);
    }
    struct quality_scores none = {0};
    run_stats_add_led(a, 1.0, 3, &none, true); /* an answer that was not scored */
    assert_int_equal(run_stats_merge(a, b), 0);
    assert_stats_equal(a, one);
    assert_int_equal(a->led.requests, 5);
    assert_true(quality_dist_min(&a->led.rouge_l) == 0.0);
    assert_int_equal(a->by_hits[3].searches, 2);
    assert_int_equal(a->by_hits[3].answers, 2);
    assert_int_equal(a->by_hits[3].exact, 1);
    assert_int_equal(a->by_hits[3].quality_ok, 2);
    assert_int_equal(a->by_hits[2].searches, 2);
    assert_int_equal(a->by_hits[2].quality_ok, 1);
    assert_true(a->by_hits[2].rouge_fix == QUALITY_FIX * 3 / 4);
    assert_int_equal(a->by_hits[0].answers, 1);
    assert_int_equal(a->by_hits[1].searches + a->by_hits[1].answers, 0);
    /* a k beyond the table counts in led only */
    struct quality_scores q = {.have = QUALITY_HAVE_REF, .rouge_l = 0.6};
    run_stats_add_led(b, 0.5, STATS_LED_K_MAX + 1, &q, true);
    assert_int_equal(b->led.requests, 3);
    /* the run's quality minimum of fresh stats is the least score, not 0 */
    struct run_stats *c = new_stats();
    struct req_record r = stream_ok();
    r.quality = (struct quality_scores){.have = QUALITY_HAVE_REF, .rouge_l = 0.7};
    run_stats_add_record(c, &r, NULL);
    assert_true(fabs(quality_dist_min(&c->quality.rouge_l) - 0.7) < 1e-9);
    assert_int_equal(run_stats_merge(one, c), 0);
    run_stats_reset(c);
    run_stats_add_record(c, &r, NULL);
    assert_true(fabs(quality_dist_min(&c->quality.rouge_l) - 0.7) < 1e-9);
    run_stats_free(a);
    run_stats_free(b);
    run_stats_free(c);
    run_stats_free(one);
}

/* The recall state (result.json's vector_search.state) reads back into
 * stats equal to the original, also merged into others; a bad one is refused. */
static void test_recall_state(void **state)
{
    (void)state;
    struct run_stats *a = new_stats(), *b = new_stats(), *c = new_stats();
    const double recall[] = {1.0, 2.0 / 3.0, 1.0 / 3.0, 0.0, 1.0};
    for (int i = 0; i < 5; i++) {
        struct req_record r = stream_ok();
        r.has_recall = true;
        r.recall = recall[i];
        r.recall_k = 3;
        run_stats_add_record(a, &r, NULL);
        struct quality_scores q = {.have = QUALITY_HAVE_REF, .rouge_l = 0.2 * i, .exact = i == 4};
        run_stats_add_led(a, recall[i], 3, &q, i > 1);
    }
    json_t *st = run_stats_recall_state_json(a);
    assert_non_null(st);
    char *text = json_dumps(st, JSON_COMPACT);
    json_t *again = json_loads(text, 0, NULL);
    assert_int_equal(run_stats_recall_state_add(b, again), 0);
    assert_int_equal(b->recall_k, 3);
    assert_memory_equal(&b->recall, &a->recall, sizeof(a->recall));
    assert_memory_equal(&b->led, &a->led, sizeof(a->led));
    assert_memory_equal(b->by_hits, a->by_hits, sizeof(a->by_hits));
    /* read into stats that hold some: the merge of both */
    assert_int_equal(run_stats_merge(c, a), 0);
    assert_int_equal(run_stats_recall_state_add(c, again), 0);
    assert_int_equal(c->recall.count, 10);
    assert_int_equal(c->by_hits[3].searches, 4);
    assert_true(fabs(quality_dist_mean(&c->recall) - quality_dist_mean(&a->recall)) < 1e-15);
    /* a row with more quality-ok answers than answers, a repeated row, j > 50 */
    static const char *const bad[] = {"[3,1,1,2,1,0,0,0]", "[70,1,0,0,0,0,0,0]", "[3,1,1]"};
    for (size_t i = 0; i < 3; i++) {
        json_t *o = json_deep_copy(again);
        json_array_append_new(json_object_get(o, "by_hits"), json_loads(bad[i], 0, NULL));
        uint64_t n = c->recall.count;
        assert_int_equal(run_stats_recall_state_add(c, o), -EINVAL);
        assert_int_equal(c->recall.count, n);
        json_decref(o);
    }
    json_t *dup = json_deep_copy(again);
    json_t *rows = json_object_get(dup, "by_hits");
    json_array_append(rows, json_array_get(rows, 0));
    assert_int_equal(run_stats_recall_state_add(c, dup), -EINVAL);
    json_decref(dup);
    json_decref(again);
    json_decref(st);
    free(text);
    run_stats_free(a);
    run_stats_free(b);
    run_stats_free(c);
}

static void test_merge_equals_recording_into_one(void **state)
{
    struct run_stats *a = new_stats(), *b = new_stats(), *all = new_stats();
    struct goodput_cfg cfg = {.ttft_ms = 400, .tpot_ms = 30, .e2el_ms = 9000};
    uint64_t seed = 42;

    for (int i = 0; i < 5000; i++) {
        struct req_record r = random_record(&seed);
        run_stats_add_record(i % 3 ? a : b, &r, &cfg);
        run_stats_add_record(all, &r, &cfg);
        run_stats_add_itl(i % 2 ? a : b, (uint64_t)i * 7919);
        run_stats_add_itl(all, (uint64_t)i * 7919);
    }
    assert_true(a->requests > 0 && b->requests > 0 && all->good > 0);
    assert_int_equal(run_stats_merge(a, b), 0);
    assert_stats_equal(a, all);

    /* Merging an empty one changes nothing; reset empties. */
    run_stats_reset(b);
    assert_int_equal(run_stats_merge(a, b), 0);
    assert_stats_equal(a, all);
    run_stats_reset(a);
    assert_int_equal(a->requests, 0);
    for (int m = 0; m < STAT_METRIC_COUNT; m++)
        assert_int_equal(total(a, (enum stat_metric)m), 0);
    assert_stats_equal(a, b);

    run_stats_free(a);
    run_stats_free(b);
    run_stats_free(all);
}

/*
 * vLLM's ITL list: the gaps of ok requests, from each record's chunk times;
 * a failed stream's gaps stay out of the exact set (they are in the
 * histogram, recorded as they happened); an ok stream without its chunk
 * times leaves the set incomplete. TTFT, TPOT, E2EL, lag keep exact values.
 */
static void test_exact_samples(void **state)
{
    (void)state;
    struct run_stats *s = new_stats(), *t = new_stats();
    struct req_record r = stream_ok();
    const uint64_t chunks[] = {BASE + 100 * MS, BASE + 120 * MS, BASE + 150 * MS,
                               BASE + 160 * MS, BASE + 400 * MS, BASE + 500 * MS};

    r.chunk_ns = chunks;
    r.n_chunk_ns = 6;
    r.last_event_ns = BASE + 501 * MS; /* the usage-only chunk, 1 ms after the last */
    run_stats_add_record(s, &r, NULL);
    assert_int_equal(s->usage_tail_n, 1);
    assert_int_equal(s->usage_tail_us, 1000);
    const int64_t gaps[] = {20 * MS, 30 * MS, 10 * MS, 240 * MS, 100 * MS};
    assert_int_equal(s->exact[STAT_ITL].n, 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(s->exact[STAT_ITL].v[i], gaps[i]);
    assert_int_equal(s->exact[STAT_TTFT].n, 1);
    assert_int_equal(s->exact[STAT_TTFT].v[0], 100 * MS);
    assert_int_equal(s->exact[STAT_E2EL].v[0], 500 * MS);
    assert_int_equal(s->exact[STAT_TPOT].v[0], 100 * MS); /* 400 ms / 4 */
    assert_int_equal(s->exact[STAT_LAG].v[0], 500 * US);
    assert_int_equal(s->exact[STAT_TTFT_UNCORRECTED].n, 0); /* not an exact metric */
    assert_int_equal(s->input_tokens_intended, 90);
    assert_int_equal(s->input_tokens, 100);

    struct req_record f = r; /* a failed stream: its gaps are not vLLM's */
    f.outcome = REQ_TRUNCATED;
    run_stats_add_record(s, &f, NULL);
    assert_int_equal(s->exact[STAT_ITL].n, 5);
    assert_true(samples_exact(&s->exact[STAT_ITL]));
    assert_int_equal(s->usage_tail_n, 1); /* ok streams only */

    assert_int_equal(run_stats_merge(t, s), 0);
    assert_int_equal(run_stats_merge(t, s), 0);
    assert_int_equal(t->exact[STAT_ITL].n, 10);
    assert_int_equal(t->input_tokens_intended, 180);
    assert_int_equal(t->usage_tail_us, 2000);

    /* a histogram-only target (the runner's interval) takes everything but
     * the exact values, and keeps being one after a reset */
    struct run_stats *h = new_stats();
    h->hist_only = true;
    assert_int_equal(run_stats_merge(h, s), 0);
    assert_int_equal(h->exact[STAT_ITL].n, 0);
    assert_int_equal(h->exact[STAT_TTFT].n, 0);
    assert_true(hdr_total_count(s->hist[STAT_TTFT]) > 0);
    assert_int_equal(hdr_total_count(h->hist[STAT_TTFT]), hdr_total_count(s->hist[STAT_TTFT]));
    assert_int_equal(h->input_tokens_intended, 90);
    run_stats_reset(h);
    assert_true(h->hist_only);
    assert_int_equal(run_stats_merge(h, s), 0);
    assert_int_equal(h->exact[STAT_ITL].n, 0);
    assert_int_equal(hdr_total_count(h->hist[STAT_TTFT]), hdr_total_count(s->hist[STAT_TTFT]));
    run_stats_free(h);

    struct req_record k = r; /* chunk times cut short: the set is incomplete */
    k.n_chunk_ns = 3;
    run_stats_add_record(s, &k, NULL);
    assert_int_equal(samples_loss(&s->exact[STAT_ITL]), SAMPLES_NOT_KEPT);
    assert_true(samples_exact(&s->exact[STAT_TTFT]));
    run_stats_reset(s);
    assert_true(samples_exact(&s->exact[STAT_ITL]));
    assert_int_equal(s->exact[STAT_TTFT].n, 0);
    run_stats_exact_not_kept(s);
    assert_int_equal(samples_loss(&s->exact[STAT_TTFT]), SAMPLES_NOT_KEPT);
    assert_true(samples_exact(&s->exact[STAT_TTFT_UNCORRECTED]));
    run_stats_free(s);
    run_stats_free(t);
}

static void test_names(void **state)
{
    assert_string_equal(stat_metric_name(STAT_TTFT), "ttft");
    assert_string_equal(stat_metric_name(STAT_TPOT_INCL_TTFT), "tpot_incl_ttft");
    assert_string_equal(stat_metric_name(STAT_METRIC_COUNT), "unknown");
    for (int m = 0; m < STAT_METRIC_COUNT; m++) {
        const char *n = stat_metric_name((enum stat_metric)m);
        assert_int_equal(stat_metric_from_name(n, strlen(n)), m);
    }
    assert_int_equal(stat_metric_from_name("ttft.p95", 4), STAT_TTFT);
    assert_int_equal(stat_metric_from_name("ttf", 3), -EINVAL);
    assert_int_equal(stat_metric_from_name(NULL, 0), -EINVAL);

    assert_int_equal(http_class_of(0), HTTP_CLASS_NONE);
    assert_int_equal(http_class_of(101), HTTP_CLASS_1XX);
    assert_int_equal(http_class_of(200), HTTP_CLASS_2XX);
    assert_int_equal(http_class_of(308), HTTP_CLASS_3XX);
    assert_int_equal(http_class_of(429), HTTP_CLASS_4XX);
    assert_int_equal(http_class_of(599), HTTP_CLASS_5XX);
    assert_int_equal(http_class_of(600), HTTP_CLASS_OTHER);
    assert_int_equal(http_class_of(-1), HTTP_CLASS_OTHER);
    assert_string_equal(http_class_name(HTTP_CLASS_4XX), "4xx");

    assert_string_equal(req_outcome_name(REQ_OK), "ok");
    assert_string_equal(req_outcome_name(REQ_HTTP_429), "http_429");
    assert_string_equal(req_outcome_name(REQ_TIMEOUT_IDLE), "timeout_idle");
    assert_string_equal(req_outcome_name(REQ_OUTCOME_COUNT), "unknown");
    for (int o = 0; o < REQ_OUTCOME_COUNT; o++)
        assert_int_equal(req_outcome_from_name(req_outcome_name((enum req_outcome)o)), o);
    assert_int_equal(req_outcome_from_name("nope"), -EINVAL);
    assert_false(req_outcome_is_error(REQ_OK));
    assert_false(req_outcome_is_error(REQ_CUT));
    assert_true(req_outcome_is_error(REQ_TRUNCATED));
    assert_true(req_outcome_is_error(REQ_OTHER));
    assert_string_equal(token_source_name(TOKENS_TOKENIZER), "tokenizer");
    assert_string_equal(token_source_name((enum token_source)7), "unknown");
}

static void test_new_fails_cleanly(void **state)
{
    /* Fail each allocation of run_stats_new() in turn: -ENOMEM and no leak. */
    for (long n = 0; n < 100; n++) {
        struct run_stats *s = NULL;
        ts_alloc_fail_after(n);
        int rc = run_stats_new(&s);
        ts_alloc_fail_after(-1);
        if (rc == 0) {
            assert_non_null(s);
            run_stats_free(s);
            return;
        }
        assert_int_equal(rc, -ENOMEM);
        assert_null(s);
    }
    fail_msg("run_stats_new never succeeded");
}

static void test_itl_by_position(void **state)
{
    assert_int_equal(itl_pos_bucket(1), 0);
    assert_int_equal(itl_pos_bucket(15), 0);
    assert_int_equal(itl_pos_bucket(16), 1);
    assert_int_equal(itl_pos_bucket(31), 1);
    assert_int_equal(itl_pos_bucket(32), 2);
    assert_int_equal(itl_pos_bucket(2047), 7);
    assert_int_equal(itl_pos_bucket(2048), 8);
    assert_int_equal(itl_pos_bucket(1000000), 8);
    assert_int_equal(itl_pos_bucket_from(0), 0);
    assert_int_equal(itl_pos_bucket_from(1), 16);
    assert_int_equal(itl_pos_bucket_from(8), 2048);
    struct run_stats *s, *t;
    assert_int_equal(run_stats_new(&s), 0);
    assert_int_equal(run_stats_new(&t), 0);
    for (uint64_t k = 1; k <= 100; k++) /* 10 ms early, 50 ms from position 64 on */
        run_stats_add_itl_at(s, k, k < 64 ? 10000000 : 50000000);
    assert_int_equal(hdr_total_count(s->hist[STAT_ITL]), 100);
    assert_int_equal(hdr_total_count(s->itl_pos[0]), 15);
    assert_int_equal(hdr_total_count(s->itl_pos[3]), 37); /* 64..100 */
    assert_true(hdr_values_are_equivalent(s->itl_pos[3], hdr_value_at_percentile(s->itl_pos[3], 50),
                                          50000));
    assert_true(hdr_values_are_equivalent(s->itl_pos[2], hdr_max(s->itl_pos[2]), 10000));
    assert_int_equal(run_stats_merge(t, s), 0);
    assert_int_equal(run_stats_merge(t, s), 0);
    assert_int_equal(hdr_total_count(t->itl_pos[3]), 74);
    run_stats_reset(t);
    assert_int_equal(hdr_total_count(t->itl_pos[3]), 0);
    run_stats_free(s);
    run_stats_free(t);
}

/* A request that ended with outcome o and error text err. */
static struct req_record failed_rec(enum req_outcome o, const char *err)
{
    struct req_record r;
    memset(&r, 0, sizeof(r));
    r.outcome = o;
    r.intended_ns = r.start_ns = BASE;
    r.end_ns = BASE + MS;
    snprintf(r.error, sizeof(r.error), "%s", err);
    return r;
}

/* No request ok: the dominant error outcome is named with its most frequent error
 * text (control characters shown as '?'); one ok request clears it. */
static void test_none_ok_names_the_dominant_error(void **state)
{
    struct run_stats *s = new_stats();
    char why[320];
    (void)state;

    assert_true(run_stats_none_ok(s, why, sizeof(why)));
    assert_string_equal(why, "no request was sent");
    struct req_record conn = failed_rec(REQ_CONNECT, "Connection\x1b[31m refused");
    struct req_record h5 = failed_rec(REQ_HTTP_5XX, "not_implemented");
    struct req_record cut = failed_rec(REQ_CUT, "");
    for (int i = 0; i < 3; i++)
        run_stats_add_record(s, &conn, NULL);
    run_stats_add_record(s, &h5, NULL);
    run_stats_add_record(s, &cut, NULL);
    assert_true(run_stats_none_ok(s, why, sizeof(why)));
    assert_string_equal(why, "no request succeeded: 4 of 5 failed, most as connect (3): "
                             "Connection?[31m refused");

    /* the sample survives a merge into empty stats (the runner's total) */
    struct run_stats *total = new_stats();
    assert_int_equal(run_stats_merge(total, s), 0);
    assert_true(run_stats_none_ok(total, why, sizeof(why)));
    assert_non_null(strstr(why, "most as connect (3): Connection?[31m refused"));

    struct req_record ok = stream_ok();
    run_stats_add_record(s, &ok, NULL);
    strcpy(why, "untouched");
    assert_false(run_stats_none_ok(s, why, sizeof(why)));
    assert_string_equal(why, "untouched");
    run_stats_free(total);
    run_stats_free(s);
}

/* Nothing measured: only warm-up requests, or only requests cut at the end. */
static void test_none_ok_warmup_and_cut(void **state)
{
    struct run_stats *s = new_stats();
    char why[320];
    (void)state;

    struct req_record w = stream_ok();
    w.flags |= REQF_WARMUP;
    run_stats_add_record(s, &w, NULL);
    run_stats_add_record(s, &w, NULL);
    assert_true(run_stats_none_ok(s, why, sizeof(why)));
    assert_string_equal(
        why, "no request was measured: all 2 requests were sent during the warm-up (2 ok)");
    struct req_record cut = failed_rec(REQ_CUT, "");
    run_stats_add_record(s, &cut, NULL);
    assert_true(run_stats_none_ok(s, why, sizeof(why)));
    assert_non_null(
        strstr(why, "no request succeeded: all 1 requests were cut when the run ended"));
    /* a short buffer is truncated, still terminated */
    char small[8];
    assert_true(run_stats_none_ok(s, small, sizeof(small)));
    assert_string_equal(small, "no requ");
    run_stats_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_ok_metrics),
        cmocka_unit_test(test_one_token_output_has_no_tpot),
        cmocka_unit_test(test_tpot_rounding),
        cmocka_unit_test(test_non_stream),
        cmocka_unit_test(test_failures_and_cut),
        cmocka_unit_test(test_warmup_is_excluded),
        cmocka_unit_test(test_phases),
        cmocka_unit_test(test_itl_and_clock_oddities),
        cmocka_unit_test(test_goodput),
        cmocka_unit_test(test_tokens_disagree),
        cmocka_unit_test(test_time_to_first_answer),
        cmocka_unit_test(test_token_method),
        cmocka_unit_test(test_recall),
        cmocka_unit_test(test_led_quality),
        cmocka_unit_test(test_recall_state),
        cmocka_unit_test(test_merge_equals_recording_into_one),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_exact_samples),
        cmocka_unit_test(test_itl_by_position),
        cmocka_unit_test(test_new_fails_cleanly),
        cmocka_unit_test(test_none_ok_names_the_dominant_error),
        cmocka_unit_test(test_none_ok_warmup_and_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
