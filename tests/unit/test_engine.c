#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "sim/engine.h"

#define MS 1000000ull /* ns */

/* One request as the caller sees it: every callback is recorded. */
struct treq {
    uint32_t ntok;      /* on_token calls */
    int64_t last_index; /* -1 before the first token */
    bool order_ok;      /* indexes were 0, 1, 2, ... */
    uint64_t *tok_ns;   /* time of each token by index (cap entries) */
    uint32_t cap;
    uint32_t admits, preempts, finishes;
    uint64_t admit_ns, finish_ns;
    uint32_t gen_at_preempt_sum; /* sum of `generated` seen in on_preempt */
};

/* Callback context: the requests plus optional scripted reactions. */
struct trec {
    struct sim_engine *e;
    struct treq *reqs;
    size_t n;
    uint64_t callbacks;
    uint64_t last_cb_ns;
    /* reactions */
    struct treq *cancel_on_token_of; /* when this one gets a token ... */
    struct treq *cancel_target;      /* ... cancel this one */
    struct treq *submit_on_finish_of;
    struct treq *submit_target;
    int submit_rc;
};

static void treq_init(struct treq *r, uint32_t cap)
{
    memset(r, 0, sizeof(*r));
    r->last_index = -1;
    r->order_ok = true;
    r->cap = cap;
    r->tok_ns = cap ? calloc(cap, sizeof(uint64_t)) : NULL;
}

static struct trec *trec_new(size_t n, uint32_t cap)
{
    struct trec *t = calloc(1, sizeof(*t));
    assert_non_null(t);
    t->reqs = calloc(n, sizeof(*t->reqs));
    assert_non_null(t->reqs);
    t->n = n;
    for (size_t i = 0; i < n; i++)
        treq_init(&t->reqs[i], cap);
    return t;
}

static void trec_free(struct trec *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->reqs[i].tok_ns);
    free(t->reqs);
    free(t);
}

static void on_admit(void *ctx, void *req, uint64_t now)
{
    struct trec *t = ctx;
    struct treq *r = req;
    t->callbacks++;
    t->last_cb_ns = now;
    if (r->admits++ == 0)
        r->admit_ns = now;
}

static void on_token(void *ctx, void *req, uint32_t index, uint64_t now)
{
    struct trec *t = ctx;
    struct treq *r = req;
    t->callbacks++;
    t->last_cb_ns = now;
    assert_int_equal(r->finishes, 0);
    if ((int64_t)index != r->last_index + 1)
        r->order_ok = false;
    r->last_index = index;
    if (index < r->cap)
        r->tok_ns[index] = now;
    r->ntok++;
    if (t->cancel_on_token_of == r && t->cancel_target) {
        sim_engine_cancel(t->e, t->cancel_target);
        t->cancel_target = NULL;
    }
}

static void on_finish(void *ctx, void *req, uint64_t now)
{
    struct trec *t = ctx;
    struct treq *r = req;
    t->callbacks++;
    t->last_cb_ns = now;
    struct sim_req_info info;
    /* Still known inside on_finish. */
    assert_int_equal(sim_engine_req_info(t->e, r, &info), 0);
    assert_int_equal(info.state, SIM_REQ_FINISHED);
    assert_int_equal(info.generated, r->ntok);
    r->finishes++;
    r->finish_ns = now;
    if (t->submit_on_finish_of == r && t->submit_target) {
        t->submit_rc = sim_engine_submit(t->e, t->submit_target, 10, 2, now);
        t->submit_target = NULL;
    }
}

static void on_preempt(void *ctx, void *req, uint64_t now)
{
    struct trec *t = ctx;
    struct treq *r = req;
    t->callbacks++;
    t->last_cb_ns = now;
    struct sim_req_info info;
    assert_int_equal(sim_engine_req_info(t->e, r, &info), 0);
    assert_int_equal(info.state, SIM_REQ_WAITING);
    r->gen_at_preempt_sum += info.generated;
    r->preempts++;
}

static const struct sim_engine_ops ops = {
    .on_admit = on_admit,
    .on_token = on_token,
    .on_finish = on_finish,
    .on_preempt = on_preempt,
};

/*
 * A small exact profile. Numbers chosen so hand computation is easy:
 * t_fix 0.25 ms, t_w 2 ms, b 1/64 ms/token (knee 128 tokens), k_kv 1 us per
 * context token, c_pf 0.1 us per chunk token^2, budget 256, 256 blocks of 16.
 */
static struct sim_profile test_profile(void)
{
    struct sim_profile p;
    assert_int_equal(sim_profile_preset("tiny", &p), 0);
    p.t_fix_ms = 0.25;
    p.t_w_ms = 2;
    p.b_ms_per_token = 0.015625;
    p.k_kv_ms_per_token = 0.001;
    p.c_pf_ms = 0.0001;
    p.max_num_batched_tokens = 256;
    p.max_num_seqs = 64;
    p.block_size = 16;
    p.watermark = 0;
    p.kv_capacity_tokens = 4096;
    p.max_model_len = 2048;
    p.max_waiting = 0;
    p.noise = false;
    char err[256];
    assert_int_equal(sim_profile_validate(&p, err, sizeof(err)), 0);
    return p;
}

static uint64_t ms_to_ns(double ms)
{
    return (uint64_t)llround(ms * 1e6);
}

/* Steps back to back from `now` until idle; returns the time it went idle. */
static uint64_t run_until_idle(struct sim_engine *e, uint64_t now, uint64_t max_steps)
{
    for (uint64_t i = 0; i < max_steps; i++) {
        uint64_t d = sim_engine_step(e, now);
        if (d == 0)
            return now;
        now += d;
    }
    fail_msg("engine still busy after %llu steps", (unsigned long long)max_steps);
    return now;
}

static void test_single_request_exact_times(void **state)
{
    struct sim_profile p = test_profile();
    struct trec *t = trec_new(1, 16);
    struct sim_engine *e = sim_engine_new(&p, &ops, t);
    assert_non_null(e);
    t->e = e;
    struct treq *r = &t->reqs[0];
    const uint64_t t0 = 1000;

    assert_int_equal(sim_engine_step(e, t0), 0); /* idle */
    assert_int_equal(sim_engine_submit(e, r, 100, 5, t0), 0);
    uint64_t d = sim_engine_step(e, t0);
    /* TTFT = t_fix + max(t_w, b * 100) + c_pf * 100^2 = 0.25 + 2 + 1 = 3.25 ms */
    assert_int_equal(d, 3250000);
    assert_int_equal(r->admits, 1);
    assert_int_equal(r->admit_ns, t0);
    struct sim_engine_stats st;
    sim_engine_stats(e, &st);
    assert_int_equal(st.running, 1);
    assert_int_equal(st.batch_tokens, 100);
    assert_int_equal(st.kv_blocks_used, 7); /* ceil(100 / 16) */
    assert_int_equal(st.kv_blocks_total, 256);

    uint64_t now = t0 + d;
    uint64_t want = now;
    for (uint32_t k = 1; k <= 5; k++) {
        d = sim_engine_step(e, now);
        assert_int_equal(r->ntok, k);
        assert_int_equal(r->tok_ns[k - 1], want);
        if (k == 5) {
            assert_int_equal(d, 0);
            break;
        }
        /* decode step k: context = prompt + generated = 100 + k tokens */
        double ms = 0.25 + 2 + 0.001 * (100 + k);
        assert_int_equal(d, ms_to_ns(ms));
        assert_int_equal(d, 2350000 + 1000ull * k); /* the same, by hand */
        now += d;
        want = now;
    }
    assert_int_equal(r->finishes, 1);
    assert_int_equal(r->finish_ns, r->tok_ns[4]);
    assert_true(r->order_ok);
    assert_int_equal(r->tok_ns[0] - t0, 3250000);

    sim_engine_stats(e, &st);
    assert_int_equal(st.running, 0);
    assert_int_equal(st.kv_blocks_used, 0);
    assert_int_equal(st.steps_total, 5);
    assert_int_equal(st.generation_tokens_total, 5);
    assert_int_equal(st.prompt_tokens_total, 100);
    assert_int_equal(st.prefill_tokens_total, 100);
    assert_int_equal(st.requests_finished, 1);
    struct sim_req_info info;
    assert_int_equal(sim_engine_req_info(e, r, &info), -ENOENT); /* forgotten */
    sim_engine_free(e);
    trec_free(t);
}

static void test_chunked_prefill(void **state)
{
    struct sim_profile p = test_profile();
    struct trec *t = trec_new(1, 8);
    struct sim_engine *e = sim_engine_new(&p, &ops, t);
    assert_non_null(e);
    t->e = e;
    struct treq *r = &t->reqs[0];
    assert_int_equal(sim_engine_submit(e, r, 1000, 3, 0), 0);

    /* ceil(1000 / 256) = 4 steps: chunks 256, 256, 256, 232. */
    uint64_t now = 0;
    double full = 0.25 + 256.0 / 64 + 0.0001 * 256 * 256; /* 10.8036 ms */
    double last = 0.25 + 232.0 / 64 + 0.0001 * 232 * 232; /* 9.2574 ms */
    for (int i = 0; i < 4; i++) {
        uint64_t d = sim_engine_step(e, now);
        assert_int_equal(r->ntok, 0);
        assert_int_equal(d, ms_to_ns(i < 3 ? full : last));
        now += d;
    }
    uint64_t d = sim_engine_step(e, now);
    assert_int_equal(r->ntok, 1);
    assert_int_equal(r->tok_ns[0], 41668200); /* 3 * 10.8036 + 9.2574 ms */
    assert_int_equal(d, ms_to_ns(0.25 + 2 + 0.001 * 1001));
    run_until_idle(e, now + d, 100);
    assert_int_equal(r->ntok, 3);
    assert_int_equal(r->finishes, 1);
    struct sim_engine_stats st;
    sim_engine_stats(e, &st);
    assert_int_equal(st.steps_total, 6);
    sim_engine_free(e);
    trec_free(t);
}

static void test_batching_shares_steps(void **state)
{
    struct sim_profile p = test_profile();
    struct trec *t = trec_new(6, 8);
    struct sim_engine *e = sim_engine_new(&p, &ops, t);
    assert_non_null(e);
    t->e = e;
    struct treq *a = &t->reqs[0], *b = &t->reqs[1];

    /* Memory-bound: two prompts of 10 share one prefill step, then decode together. */
    assert_int_equal(sim_engine_submit(e, a, 10, 3, 0), 0);
    assert_int_equal(sim_engine_submit(e, b, 10, 3, 0), 0);
    uint64_t d1 = sim_engine_step(e, 0);
    assert_int_equal(d1, ms_to_ns(0.25 + 2 + 0.0001 * (100 + 100))); /* N = 20 < knee */
    uint64_t d2 = sim_engine_step(e, d1);
    assert_int_equal(a->tok_ns[0], d1);
    assert_int_equal(b->tok_ns[0], d1);
    assert_int_equal(d2, ms_to_ns(0.25 + 2 + 0.001 * (11 + 11)));
    uint64_t d3 = sim_engine_step(e, d1 + d2);
    assert_int_equal(a->tok_ns[1], d1 + d2);
    assert_int_equal(b->tok_ns[1], d1 + d2);
    assert_int_equal(d3, ms_to_ns(0.25 + 2 + 0.001 * (12 + 12)));
    assert_int_equal(sim_engine_step(e, d1 + d2 + d3), 0);
    assert_int_equal(a->finishes + b->finishes, 2);
    assert_int_equal(a->finish_ns, b->finish_ns);

    /* Compute-bound: three prompts of 80 = 240 tokens > knee 128 -> b * N. */
    struct treq *c = &t->reqs[2], *dq = &t->reqs[3], *f = &t->reqs[4];
    uint64_t now = 100 * MS;
    assert_int_equal(sim_engine_submit(e, c, 80, 2, now), 0);
    assert_int_equal(sim_engine_submit(e, dq, 80, 2, now), 0);
    assert_int_equal(sim_engine_submit(e, f, 80, 2, now), 0);
    uint64_t d = sim_engine_step(e, now);
    assert_int_equal(d, ms_to_ns(0.25 + 240.0 / 64 + 0.0001 * 3 * 6400)); /* 5.92 ms */
    assert_int_equal(d, 5920000);
    now += d;
    d = sim_engine_step(e, now);
    assert_int_equal(d, ms_to_ns(0.25 + 2 + 0.001 * 3 * 81));

    /* A prompt arriving mid-decode joins the next step: decode tokens + its chunk. */
    struct treq *g = &t->reqs[5];
    assert_int_equal(sim_engine_submit(e, g, 200, 1, now + 1), 0);
    assert_int_equal(sim_engine_step(e, now + 1), d - 1); /* not due yet: time left */
    now += d;
    d = sim_engine_step(e, now); /* c, dq, f finish; g alone: 200 tokens */
    assert_int_equal(c->finishes + dq->finishes + f->finishes, 3);
    assert_int_equal(d, ms_to_ns(0.25 + 200.0 / 64 + 0.0001 * 200 * 200));
    now += d;
    assert_int_equal(sim_engine_step(e, now), 0);
    assert_int_equal(g->ntok, 1);
    assert_int_equal(g->finishes, 1);
    sim_engine_free(e);
    trec_free(t);
}

static void test_mixed_decode_and_prefill(void **state)
{
    struct sim_profile p = test_profile();
    struct trec *t = trec_new(2, 8);
    struct sim_engine *e = sim_engine_new(&p, &ops, t);
    assert_non_null(e);
    t->e = e;
    struct treq *a = &t->reqs[0], *b = &t->reqs[1];
    assert_int_equal(sim_engine_submit(e, a, 10, 5, 0), 0);
    uint64_t d = sim_engine_step(e, 0);
    uint64_t now = d;
    assert_int_equal(sim_engine_submit(e, b, 300, 1, now), 0);
    d = sim_engine_step(e, now);
    /* a decodes (ctx 11), b gets a chunk of 255 of the 256 budget. */
    assert_int_equal(d, ms_to_ns(0.25 + 256.0 / 64 + 0.001 * 11 + 0.0001 * 255 * 255));
    now += d;
    d = sim_engine_step(e, now);
    /* a decodes (ctx 12), b's last 45 prompt tokens. */
    assert_int_equal(d, ms_to_ns(0.25 + 2 + 0.001 * 12 + 0.0001 * 45 * 45));
    now += d;
    run_until_idle(e, now, 100);
    assert_int_equal(a->ntok, 5);
    assert_int_equal(b->ntok, 1);
    assert_int_equal(b->tok_ns[0], now);
    sim_engine_free(e);
    trec_free(t);
}

static void test_kv_capacity_makes_third_wait(void **state)
{
    struct sim_profile p = test_profile();
    p.kv_capacity_tokens = 1024; /* 64 blocks */
    p.max_model_len = 512;
    struct trec *t = trec_new(3, 64);
    struct sim_engine *e = sim_engine_new(&p, &ops, t);
    assert_non_null(e);
    t->e = e;
    /* 480-token prompts take 30 blocks; 480 + 32 outputs peak at 32 blocks each. */
    for (int i = 0; i < 3; i++)
        assert_int_equal(sim_engine_submit(e, &t->reqs[i], 480, 32, 0), 0);
    uint64_t now = 0;
    struct sim_engine_stats st;
    bool saw_two_running = false;
    for (int i = 0; i < 1000 && t->reqs[0].finishes == 0; i++) {
        uint64_t d = sim_engine_step(e, now);
        assert_true(d > 0);
        sim_engine_stats(e, &st);
        if (st.running == 2 && t->reqs[0].finishes == 0) {
            saw_two_running = true;
            assert_int_equal(st.waiting, 1);
            assert_int_equal(t->reqs[2].admits, 0);
        }
        now += d;
    }
    assert_true(saw_two_running);
    /* The third is admitted in the step scheduled when the first finished. */
    assert_int_equal(t->reqs[2].admits, 1);
    assert_int_equal(t->reqs[2].admit_ns, t->reqs[0].finish_ns);
    assert_int_equal(t->reqs[1].finishes, 0);
    run_until_idle(e, now, 10000);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(t->reqs[i].ntok, 32);
        assert_true(t->reqs[i].order_ok);
        assert_int_equal(t->reqs[i].preempts, 0);
    }
    sim_engine_stats(e, &st);
    assert_int_equal(st.preemptions_total, 0);
    assert_int_equal(st.kv_blocks_used, 0);
    sim_engine_free(e);
    trec_free(t);
}

/* 100 blocks; a holder of 82 leaves 18 free; a 9-block prompt would leave 9. */
static void watermark_case(double watermark, bool expect_wait)
{
    struct sim_profile p = test_profile();
    p.kv_capacity_tokens = 1600;
    p.max_model_len = 1440;
    p.watermark = watermark;
    p.max_num_batched_tokens = 2048; /* the budget is not what holds it back */
    struct trec *t = trec_new(2, 4);
    struct sim_engine *e = sim_engine_new(&p, &ops, t);
    assert_non_null(e);
    t->e = e;
    assert_int_equal(sim_engine_submit(e, &t->reqs[0], 1312, 4, 0), 0); /* 82 blocks */
    assert_int_equal(sim_engine_submit(e, &t->reqs[1], 144, 4, 0), 0);  /* 9 blocks */
    uint64_t d = sim_engine_step(e, 0);
    struct sim_engine_stats st;
    sim_engine_stats(e, &st);
    assert_int_equal(st.running, expect_wait ? 1 : 2);
    assert_int_equal(st.waiting, expect_wait ? 1 : 0);
    assert_int_equal(st.kv_blocks_used, expect_wait ? 82 : 91);
    run_until_idle(e, d, 1000);
    assert_int_equal(t->reqs[1].ntok, 4);
    if (expect_wait)
        assert_int_equal(t->reqs[1].admit_ns, t->reqs[0].finish_ns);
    else
        assert_int_equal(t->reqs[1].admit_ns, 0);
    sim_engine_free(e);
    trec_free(t);
}

static void test_watermark_blocks_admission(void **state)
{
    watermark_case(0.1, true);   /* 10 blocks kept: 9 left is too few */
    watermark_case(0.05, false); /* 5 blocks kept: 9 left is fine */
}

static void test_preemption_delivers_every_token_once(void **state)
{
    struct sim_profile p = test_profile();
    p.kv_capacity_tokens = 1024; /* 64 blocks */
    p.max_model_len = 1024;
    struct trec *t = trec_new(2, 256);
    struct sim_engine *e = sim_engine_new(&p, &ops, t);
    assert_non_null(e);
    t->e = e;
    struct treq *a = &t->reqs[0], *b = &t->reqs[1];
    /* Each peaks at ceil(599 / 16) = 38 blocks; together 76 > 64. */
    assert_int_equal(sim_engine_submit(e, a, 400, 200, 0), 0);
    assert_int_equal(sim_engine_submit(e, b, 400, 200, 0), 0);
    run_until_idle(e, 0, 100000);

    assert_int_equal(a->ntok, 200);
    assert_int_equal(b->ntok, 200);
    assert_true(a->order_ok);
    assert_true(b->order_ok);
    assert_int_equal(a->finishes, 1);
    assert_int_equal(b->finishes, 1);
    assert_int_equal(a->preempts, 0); /* the oldest is never the victim */
    assert_true(b->preempts >= 1);
    assert_int_equal(b->admits, 1 + b->preempts);
    /* Tokens strictly later than the previous one. */
    for (int i = 1; i < 200; i++) {
        assert_true(a->tok_ns[i] > a->tok_ns[i - 1]);
        assert_true(b->tok_ns[i] > b->tok_ns[i - 1]);
    }
    /* Budget 256: a prefills in steps 1-2 (256 + 144), b in steps 2-4 (112 + 255 + 33),
     * so b is 2 tokens behind. When a's next token is its 514th (g = 113, computed + 1
     * = 513 needs a 33rd block), both hold 32 blocks, none is free, and b (g = 111)
     * is preempted. */
    assert_int_equal(b->preempts, 1);
    assert_int_equal(b->gen_at_preempt_sum, 111);
    /* It comes back only after a finished (it needs 33 blocks; a holds up to 38). */
    assert_true(b->tok_ns[110] < a->finish_ns);
    assert_true(b->tok_ns[111] > a->finish_ns);

    struct sim_engine_stats st;
    sim_engine_stats(e, &st);
    assert_int_equal(st.preemptions_total, a->preempts + b->preempts);
    assert_int_equal(st.generation_tokens_total, 400);
    assert_int_equal(st.prompt_tokens_total, 800);
    /* Recompute prefills prompt + generated-at-preemption once more. */
    assert_int_equal(st.prefill_tokens_total, 800 + 400 * b->preempts + b->gen_at_preempt_sum);
    assert_int_equal(st.kv_blocks_used, 0);
    sim_engine_free(e);
    trec_free(t);
}

static void test_busy_and_too_big(void **state)
{
    struct sim_profile p = test_profile();
    p.max_waiting = 2;
    struct trec *t = trec_new(5, 4);
    struct sim_engine *e = sim_engine_new(&p, &ops, t);
    assert_non_null(e);
    t->e = e;
    assert_int_equal(sim_engine_submit(e, &t->reqs[0], 10, 1, 0), 0);
    assert_int_equal(sim_engine_submit(e, &t->reqs[1], 10, 1, 0), 0);
    assert_int_equal(sim_engine_submit(e, &t->reqs[2], 10, 1, 0), -EBUSY);
    assert_int_equal(sim_engine_submit(e, &t->reqs[0], 10, 1, 0), -EEXIST);
    uint64_t d = sim_engine_step(e, 0); /* both admitted: the queue is empty again */
    assert_int_equal(sim_engine_submit(e, &t->reqs[2], 10, 1, 0), 0);

    /* max_model_len 2048 */
    assert_int_equal(sim_engine_submit(e, &t->reqs[3], 2049, 1, 0), -E2BIG);
    assert_int_equal(sim_engine_submit(e, &t->reqs[3], 2000, 49, 0), -E2BIG);
    assert_int_equal(sim_engine_submit(e, &t->reqs[3], 0, 5, 0), -EINVAL);
    assert_int_equal(sim_engine_submit(e, &t->reqs[3], 5, 0, 0), -EINVAL);
    assert_int_equal(sim_engine_submit(e, &t->reqs[3], 2000, 48, 0), 0);
    struct sim_engine_stats st;
    sim_engine_stats(e, &st);
    assert_int_equal(st.requests_rejected, 3);
    run_until_idle(e, d, 10000);
    assert_int_equal(t->reqs[3].ntok, 48);
    assert_int_equal(t->reqs[2].ntok, 1);
    assert_int_equal(t->reqs[4].ntok, 0); /* never submitted, never called */
    sim_engine_free(e);
    trec_free(t);
}

/* Runs one fixed workload and returns the token times of request 0..2 in out. */
static void noisy_run(struct sim_profile *p, uint64_t *out, size_t n)
{
    struct trec *t = trec_new(3, 64);
    struct sim_engine *e = sim_engine_new(p, &ops, t);
    assert_non_null(e);
    t->e = e;
    for (int i = 0; i < 3; i++)
        assert_int_equal(sim_engine_submit(e, &t->reqs[i], 50 + 100 * i, 20, 0), 0);
    run_until_idle(e, 0, 10000);
    size_t k = 0;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(t->reqs[i].ntok, 20);
        for (int j = 0; j < 20 && k < n; j++)
            out[k++] = t->reqs[i].tok_ns[j];
    }
    sim_engine_free(e);
    trec_free(t);
}

static void test_noise_is_seeded(void **state)
{
    struct sim_profile p = test_profile();
    p.noise = true;
    p.jitter_sigma = 0.05;
    p.stall_prob = 0.1;
    p.stall_ms = 7;
    p.seed = 7;
    uint64_t x[60], y[60], z[60], exact[60];
    noisy_run(&p, x, 60);
    noisy_run(&p, y, 60);
    assert_memory_equal(x, y, sizeof(x));
    p.seed = 8;
    noisy_run(&p, z, 60);
    assert_memory_not_equal(x, z, sizeof(x));
    p.noise = false;
    noisy_run(&p, exact, 60);
    assert_memory_not_equal(x, exact, sizeof(x));
}

static void test_noise_bounds_and_stalls(void **state)
{
    /* Jitter only: every decode step within +-3 sigma of the exact time, not all equal. */
    struct sim_profile p = test_profile();
    p.noise = true;
    p.jitter_sigma = 0.1;
    p.stall_prob = 0;
    p.seed = 3;
    struct trec *t = trec_new(1, 0);
    struct sim_engine *e = sim_engine_new(&p, &ops, t);
    assert_non_null(e);
    t->e = e;
    assert_int_equal(sim_engine_submit(e, &t->reqs[0], 10, 200, 0), 0);
    uint64_t now = sim_engine_step(e, 0);
    int differ = 0;
    double lo = 10, hi = 0;
    for (int k = 1; k < 200; k++) {
        uint64_t d = sim_engine_step(e, now);
        double exact = 0.25 + 2 + 0.001 * (10 + k);
        double m = (double)d / (exact * 1e6);
        assert_true(m >= 0.7 - 1e-6 && m <= 1.3 + 1e-6);
        differ += d != ms_to_ns(exact);
        lo = fmin(lo, m);
        hi = fmax(hi, m);
        now += d;
    }
    assert_true(differ > 150);
    assert_true(lo < 0.95 && hi > 1.05); /* it does spread */
    assert_int_equal(sim_engine_step(e, now), 0);
    sim_engine_free(e);

    /* Stalls only: each step is exact + stall_ms. */
    p.jitter_sigma = 0;
    p.stall_prob = 1;
    p.stall_ms = 5;
    free(t->reqs[0].tok_ns);
    treq_init(&t->reqs[0], 0);
    e = sim_engine_new(&p, &ops, t);
    assert_non_null(e);
    t->e = e;
    assert_int_equal(sim_engine_submit(e, &t->reqs[0], 100, 2, 0), 0);
    uint64_t d = sim_engine_step(e, 0);
    assert_int_equal(d, 3250000 + 5 * MS);
    d = sim_engine_step(e, d);
    assert_int_equal(d, 2351000 + 5 * MS);
    sim_engine_free(e);
    trec_free(t);
}

static void test_thousand_concurrent_requests(void **state)
{
    struct sim_profile p;
    assert_int_equal(sim_profile_preset("tiny", &p), 0);
    enum { N = 1000 };
    struct trec *t = trec_new(N, 0);
    struct sim_engine *e = sim_engine_new(&p, &ops, t);
    assert_non_null(e);
    t->e = e;
    uint32_t outs[N];
    uint64_t expect_prompt = 0;
    for (int i = 0; i < N; i++) {
        uint32_t prompt = 50 + (uint32_t)(i * 37) % 450;
        outs[i] = 10 + (uint32_t)(i * 13) % 90;
        expect_prompt += prompt;
        assert_int_equal(sim_engine_submit(e, &t->reqs[i], prompt, outs[i], 0), 0);
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    uint64_t end = run_until_idle(e, 0, 100000);
    clock_gettime(CLOCK_MONOTONIC, &b);
    struct sim_engine_stats st;
    sim_engine_stats(e, &st);
    uint64_t tokens = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(t->reqs[i].ntok, outs[i]);
        assert_true(t->reqs[i].order_ok);
        assert_int_equal(t->reqs[i].finishes, 1);
        tokens += outs[i];
    }
    assert_int_equal(st.requests_finished, N);
    assert_int_equal(st.generation_tokens_total, tokens);
    assert_int_equal(st.prompt_tokens_total, expect_prompt);
    assert_int_equal(st.running + st.waiting, 0);
    assert_int_equal(st.kv_blocks_used, 0);
    double wall_us = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / 1e3;
    print_message("      1000 requests: %llu steps, %.2f s simulated, %.1f us wall per step\n",
                  (unsigned long long)st.steps_total, (double)end / 1e9,
                  wall_us / (double)st.steps_total);
    sim_engine_free(e);
    trec_free(t);
}

static void test_cancel(void **state)
{
    struct sim_profile p = test_profile();
    struct trec *t = trec_new(5, 16);
    struct sim_engine *e = sim_engine_new(&p, &ops, t);
    assert_non_null(e);
    t->e = e;
    struct treq *a = &t->reqs[0], *b = &t->reqs[1], *c = &t->reqs[2], *w = &t->reqs[3];
    assert_int_equal(sim_engine_submit(e, a, 10, 10, 0), 0);
    assert_int_equal(sim_engine_submit(e, b, 10, 10, 0), 0);
    assert_int_equal(sim_engine_submit(e, c, 10, 10, 0), 0);
    assert_int_equal(sim_engine_submit(e, w, 10, 10, 0), 0);
    sim_engine_cancel(e, w); /* waiting */
    uint64_t now = sim_engine_step(e, 0);
    now += sim_engine_step(e, now);
    now += sim_engine_step(e, now);
    assert_int_equal(a->ntok, 2);
    struct sim_engine_stats st;
    sim_engine_stats(e, &st);
    assert_int_equal(st.kv_blocks_used, 3);
    sim_engine_cancel(e, b); /* running, mid-step */
    sim_engine_cancel(e, b); /* twice: no-op */
    sim_engine_stats(e, &st);
    assert_int_equal(st.kv_blocks_used, 2);
    assert_int_equal(st.running, 2);

    /* From a callback: a's token cancels c, whose token of the same step comes later. */
    t->cancel_on_token_of = a;
    t->cancel_target = c;
    uint32_t c_before = c->ntok;
    run_until_idle(e, now, 1000);
    assert_int_equal(a->ntok, 10);
    assert_int_equal(b->ntok, 2);
    assert_int_equal(c->ntok, c_before);
    assert_int_equal(w->ntok + w->admits, 0);
    assert_int_equal(b->finishes + c->finishes + w->finishes, 0);
    sim_engine_stats(e, &st);
    assert_int_equal(st.requests_cancelled, 3);
    assert_int_equal(st.requests_finished, 1);
    assert_int_equal(st.kv_blocks_used, 0);

    /* Cancelling itself on its last token: no on_finish. */
    free(a->tok_ns);
    treq_init(a, 16);
    assert_int_equal(sim_engine_submit(e, a, 10, 1, now), 0);
    t->cancel_on_token_of = a;
    t->cancel_target = a;
    run_until_idle(e, now, 100);
    assert_int_equal(a->ntok, 1);
    assert_int_equal(a->finishes, 0);
    struct sim_req_info info;
    assert_int_equal(sim_engine_req_info(e, a, &info), -ENOENT);
    sim_engine_free(e);
    trec_free(t);
}

static void test_submit_from_callback(void **state)
{
    struct sim_profile p = test_profile();
    struct trec *t = trec_new(2, 16);
    struct sim_engine *e = sim_engine_new(&p, &ops, t);
    assert_non_null(e);
    t->e = e;
    /* When a finishes, the engine would go idle; the callback submits b, and
     * the same sim_engine_step call starts b's step. */
    t->submit_on_finish_of = &t->reqs[0];
    t->submit_target = &t->reqs[1];
    assert_int_equal(sim_engine_submit(e, &t->reqs[0], 10, 1, 0), 0);
    uint64_t d = sim_engine_step(e, 0);
    uint64_t d2 = sim_engine_step(e, d);
    assert_int_equal(t->submit_rc, 0);
    assert_int_equal(t->reqs[1].admit_ns, d);
    assert_int_equal(d2, ms_to_ns(0.25 + 2 + 0.0001 * 100));
    run_until_idle(e, d + d2, 100);
    assert_int_equal(t->reqs[1].ntok, 2);
    /* The same req pointer can be submitted again once on_finish returned. */
    assert_int_equal(sim_engine_submit(e, &t->reqs[0], 10, 1, d + d2), 0);
    sim_engine_free(e); /* with a request still waiting: freed, no callbacks */
    trec_free(t);
}

static void test_step_before_due_and_stall(void **state)
{
    struct sim_profile p = test_profile();
    struct trec *t = trec_new(1, 16);
    struct sim_engine *e = sim_engine_new(&p, &ops, t);
    assert_non_null(e);
    t->e = e;
    struct treq *r = &t->reqs[0];
    assert_int_equal(sim_engine_submit(e, r, 100, 3, 0), 0);
    assert_int_equal(sim_engine_step(e, 0), 3250000);
    assert_int_equal(sim_engine_next_due(e), 3250000);
    /* Early call: nothing happens, time left returned. */
    assert_int_equal(sim_engine_step(e, 1000000), 2250000);
    assert_int_equal(r->ntok, 0);
    /* Stall until 10 ms: the step is not due at 3.25 ms. */
    sim_engine_stall_until(e, 10 * MS);
    assert_int_equal(sim_engine_step(e, 3250000), 10 * MS - 3250000);
    assert_int_equal(r->ntok, 0);
    assert_int_equal(sim_engine_next_due(e), 10 * MS);
    /* Late call (real time passes): the step completes at the time given. */
    uint64_t d = sim_engine_step(e, 10 * MS + 500);
    assert_int_equal(r->ntok, 1);
    assert_int_equal(r->tok_ns[0], 10 * MS + 500);
    assert_int_equal(d, 2351000);
    /* A step started during a stall ends at stall end + duration. */
    sim_engine_stall_until(e, 30 * MS);
    uint64_t now = 10 * MS + 500 + d;
    d = sim_engine_step(e, now);
    assert_int_equal(r->ntok, 1); /* not due: the stall holds the step in progress */
    assert_int_equal(d, 30 * MS - now);
    now = 30 * MS;
    d = sim_engine_step(e, now);
    assert_int_equal(r->ntok, 2);
    assert_int_equal(d, 2352000);
    sim_engine_stall_until(e, 40 * MS); /* idle engine then submit: ... */
    run_until_idle(e, now + d, 10);
    assert_int_equal(r->finishes, 1);
    assert_int_equal(sim_engine_next_due(e), 0);
    struct treq r2;
    treq_init(&r2, 0);
    assert_int_equal(sim_engine_submit(e, &r2, 100, 1, 35 * MS), 0);
    assert_int_equal(sim_engine_step(e, 35 * MS), 5 * MS + 3250000);
    run_until_idle(e, 40 * MS + 3250000, 10);
    assert_int_equal(r2.ntok, 1);
    sim_engine_free(e);
    trec_free(t);
}

static void test_cold_start(void **state)
{
    struct sim_profile p = test_profile();
    struct trec *t = trec_new(1, 4);
    struct sim_engine *e = sim_engine_new(&p, &ops, t);
    assert_non_null(e);
    t->e = e;
    sim_engine_set_ready_at(e, 5 * MS);
    assert_false(sim_engine_ready(e, 4 * MS));
    assert_int_equal(sim_engine_submit(e, &t->reqs[0], 10, 1, 4 * MS), -EAGAIN);
    assert_true(sim_engine_ready(e, 5 * MS));
    assert_int_equal(sim_engine_submit(e, &t->reqs[0], 10, 1, 5 * MS), 0);
    run_until_idle(e, 5 * MS, 10);
    assert_int_equal(t->reqs[0].ntok, 1);
    sim_engine_free(e);
    trec_free(t);
}

static void test_shrink_kv_capacity(void **state)
{
    struct sim_profile p = test_profile();
    p.max_model_len = 512;
    struct trec *t = trec_new(4, 64);
    struct sim_engine *e = sim_engine_new(&p, &ops, t);
    assert_non_null(e);
    t->e = e;
    for (int i = 0; i < 4; i++)
        assert_int_equal(sim_engine_submit(e, &t->reqs[i], 160, 20, 0), 0); /* 10 blocks */
    uint64_t now = 0;
    for (int i = 0; i < 6; i++)
        now += sim_engine_step(e, now);
    struct sim_engine_stats st;
    sim_engine_stats(e, &st);
    assert_int_equal(st.running, 4);
    assert_int_equal(st.kv_blocks_used, 44); /* 4 * ceil(165 / 16) */

    assert_int_equal(sim_engine_set_kv_capacity(e, 100, now), -EINVAL); /* < max_model_len */
    assert_int_equal(sim_engine_set_kv_capacity(e, 512, now), 0);       /* 32 blocks */
    sim_engine_stats(e, &st);
    assert_int_equal(st.kv_blocks_total, 32);
    assert_int_equal(st.running, 2); /* the two most recent were preempted */
    assert_int_equal(st.kv_blocks_used, 22);
    assert_int_equal(t->reqs[3].preempts, 1);
    assert_int_equal(t->reqs[2].preempts, 1);
    assert_int_equal(t->reqs[0].preempts + t->reqs[1].preempts, 0);
    assert_int_equal(sim_engine_set_kv_capacity(e, 0, now), 0); /* back to 256 blocks */
    sim_engine_stats(e, &st);
    assert_int_equal(st.kv_blocks_total, 256);
    run_until_idle(e, now, 1000);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(t->reqs[i].ntok, 20);
        assert_true(t->reqs[i].order_ok);
    }
    sim_engine_free(e);
    trec_free(t);
}

static void test_new_rejects_and_alloc_failures(void **state)
{
    struct sim_profile p = test_profile();
    struct sim_engine_ops no_token = ops;
    no_token.on_token = NULL;
    assert_null(sim_engine_new(&p, &no_token, NULL));
    struct sim_profile bad = p;
    bad.max_num_seqs = 1000; /* > max_num_batched_tokens */
    assert_null(sim_engine_new(&bad, &ops, NULL));
    sim_engine_free(NULL);

    for (long n = 0; n < 4; n++) {
        ts_alloc_fail_after(n);
        struct sim_engine *e = sim_engine_new(&p, &ops, NULL);
        ts_alloc_fail_after(-1);
        sim_engine_free(e);
    }
    /* submit: the record, then the map growth (at 33 entries). */
    struct trec *t = trec_new(40, 0);
    struct sim_engine *e = sim_engine_new(&p, &ops, t);
    assert_non_null(e);
    t->e = e;
    ts_alloc_fail_after(0);
    assert_int_equal(sim_engine_submit(e, &t->reqs[0], 10, 1, 0), -ENOMEM);
    ts_alloc_fail_after(-1);
    for (int i = 0; i < 32; i++)
        assert_int_equal(sim_engine_submit(e, &t->reqs[i], 10, 1, 0), 0);
    ts_alloc_fail_after(1); /* the record succeeds, the map growth fails */
    assert_int_equal(sim_engine_submit(e, &t->reqs[32], 10, 1, 0), -ENOMEM);
    ts_alloc_fail_after(-1);
    assert_int_equal(sim_engine_submit(e, &t->reqs[32], 10, 1, 0), 0);
    run_until_idle(e, 0, 100);
    for (int i = 0; i <= 32; i++)
        assert_int_equal(t->reqs[i].ntok, 1);
    sim_engine_free(e);
    trec_free(t);
}

/* Thousands of running seqs: a step must cost microseconds, not milliseconds. */
static void test_step_cost_many_running(void **state)
{
    struct sim_profile p;
    assert_int_equal(sim_profile_preset("tiny", &p), 0);
    enum { N = 4000 };
    struct trec *t = trec_new(N, 0);
    struct sim_engine *e = sim_engine_new(&p, &ops, t);
    assert_non_null(e);
    t->e = e;
    /* 32 + 200 tokens = 15 blocks each: 60000 of the 65536 blocks, no preemption. */
    for (int i = 0; i < N; i++)
        assert_int_equal(sim_engine_submit(e, &t->reqs[i], 32, 200, 0), 0);
    uint64_t now = 0;
    struct sim_engine_stats st;
    for (int i = 0; i < 100; i++) { /* admit everyone and get to steady decode */
        now += sim_engine_step(e, now);
        sim_engine_stats(e, &st);
        if (st.waiting == 0 && st.batch_tokens == N)
            break;
    }
    assert_int_equal(st.running, N);
    assert_int_equal(st.batch_tokens, N);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < 50; i++)
        now += sim_engine_step(e, now);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double us = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / 1e3;
    print_message("      %d running seqs: %.1f us per step (callbacks included)\n", N, us / 50);
    /* Generous bound (sanitizers, loaded CI): a quadratic scheduler would be ~1000x slower. */
    assert_true(us / 50 < 20000);
    run_until_idle(e, now, 10000);
    sim_engine_stats(e, &st);
    assert_int_equal(st.requests_finished, N);
    sim_engine_free(e);
    trec_free(t);
}

/* ---- engine mechanisms: multi-step, overheads, CUDA graphs, policies, API server ---- */

static struct sim_engine *mech_engine(struct sim_profile *p, struct trec *t)
{
    char err[256];
    assert_int_equal(sim_profile_validate(p, err, sizeof(err)), 0);
    struct sim_engine *e = sim_engine_new(p, &ops, t);
    assert_non_null(e);
    t->e = e;
    return e;
}

static void test_multi_step_rounds(void **state)
{
    struct sim_profile p = test_profile();
    p.num_scheduler_steps = 4;
    struct trec *t = trec_new(2, 16);
    struct sim_engine *e = mech_engine(&p, t);
    struct treq *r = &t->reqs[0];
    assert_int_equal(sim_engine_submit(e, r, 100, 9, 0), 0);
    uint64_t d = sim_engine_step(e, 0);
    assert_int_equal(d, 3250000); /* the prefill is one step */
    uint64_t now = d;
    d = sim_engine_step(e, now);
    assert_int_equal(r->ntok, 1);
    /* a round of 4 decode steps: contexts 101..104 */
    double ms = 0;
    for (int k = 1; k <= 4; k++)
        ms += 0.25 + 2 + 0.001 * (100 + k);
    assert_int_equal(d, ms_to_ns(ms));
    /* a request arriving during the round joins only when it ends */
    assert_int_equal(sim_engine_submit(e, &t->reqs[1], 10, 2, now + 1000000), 0);
    assert_int_equal(sim_engine_step(e, now + 1000000), d - 1000000);
    now += d;
    sim_engine_step(e, now);
    assert_int_equal(r->ntok, 5);
    for (int k = 1; k <= 4; k++)
        assert_int_equal(r->tok_ns[k], now); /* a burst of 4 tokens */
    assert_int_equal(t->reqs[1].admits, 1);
    assert_int_equal(t->reqs[1].admit_ns, now);
    run_until_idle(e, now, 100);
    assert_int_equal(r->ntok, 9);
    assert_true(r->order_ok);
    assert_int_equal(r->finishes, 1);
    assert_int_equal(t->reqs[1].ntok, 2);
    sim_engine_free(e);
    trec_free(t);
}

static void test_per_seq_overheads(void **state)
{
    struct sim_profile p = test_profile();
    p.t_sched_ms_per_seq = 0.1;
    p.t_sample_ms_per_seq = 0.01;
    p.num_scheduler_steps = 2;
    struct trec *t = trec_new(2, 8);
    struct sim_engine *e = mech_engine(&p, t);
    assert_int_equal(sim_engine_submit(e, &t->reqs[0], 100, 3, 0), 0);
    assert_int_equal(sim_engine_submit(e, &t->reqs[1], 100, 3, 0), 0);
    /* prefill of both: t_fix + b * 200 + c_pf * 2 * 100^2 + 2 * sched + 2 * sample */
    uint64_t d = sim_engine_step(e, 0);
    assert_int_equal(d, ms_to_ns(0.25 + 200.0 / 64 + 2 + 0.2 + 0.02));
    /* a round of 2 decode steps: scheduling once, sampling in each step */
    d = sim_engine_step(e, d);
    double ms = 0.2 + (0.25 + 2 + 0.001 * 202 + 0.02) + (0.25 + 2 + 0.001 * 204 + 0.02);
    assert_int_equal(d, ms_to_ns(ms));
    sim_engine_free(e);
    trec_free(t);
}

static void test_cuda_graph_padding(void **state)
{
    struct sim_profile p = test_profile();
    p.t_w_ms = 0;
    p.b_ms_per_token = 1;
    p.k_kv_ms_per_token = 0;
    p.c_pf_ms = 0;
    p.cuda_graph_max_batch = 8;
    for (uint32_t n = 5; n <= 9; n += 4) {
        struct trec *t = trec_new(n, 4);
        struct sim_engine *e = mech_engine(&p, t);
        for (uint32_t i = 0; i < n; i++)
            assert_int_equal(sim_engine_submit(e, &t->reqs[i], 10, 3, 0), 0);
        uint64_t d = sim_engine_step(e, 0);
        assert_int_equal(d, ms_to_ns(0.25 + 10.0 * n)); /* a prefill step is not padded */
        d = sim_engine_step(e, d);
        /* 5 decoding seqs run the graph captured for 8; 9 are past the largest: eager */
        assert_int_equal(d, ms_to_ns(0.25 + (n == 5 ? 8.0 : 9.0)));
        sim_engine_free(e);
        trec_free(t);
    }
}

static void test_prefill_first_pauses_decodes(void **state)
{
    for (int policy = 0; policy < 2; policy++) {
        struct sim_profile p = test_profile();
        p.sched_policy = policy ? SIM_SCHED_PREFILL_FIRST : SIM_SCHED_MIXED;
        struct trec *t = trec_new(2, 8);
        struct sim_engine *e = mech_engine(&p, t);
        assert_int_equal(sim_engine_submit(e, &t->reqs[0], 100, 5, 0), 0);
        uint64_t now = sim_engine_step(e, 0);
        now += sim_engine_step(e, now); /* first token; a decode step runs */
        assert_int_equal(sim_engine_submit(e, &t->reqs[1], 100, 2, now), 0);
        uint64_t d = sim_engine_step(e, now); /* r0's second token; r1 admitted */
        assert_int_equal(t->reqs[0].ntok, 2);
        assert_int_equal(t->reqs[1].admits, 1);
        struct sim_engine_stats st;
        sim_engine_stats(e, &st);
        /* mixed: r0's decode and r1's prefill share a step; prefill-first: r1 alone */
        assert_int_equal(st.batch_tokens, policy ? 100 : 101);
        sim_engine_step(e, now + d);
        assert_int_equal(t->reqs[0].ntok, policy ? 2 : 3);
        assert_int_equal(t->reqs[1].ntok, 1);
        run_until_idle(e, now + d, 100);
        assert_int_equal(t->reqs[0].ntok, 5);
        sim_engine_free(e);
        trec_free(t);
    }
}

static void test_reserve_max_never_preempts(void **state)
{
    for (int policy = 0; policy < 2; policy++) {
        struct sim_profile p = test_profile(); /* 256 blocks of 16 */
        p.sched_policy = policy ? SIM_SCHED_RESERVE_MAX : SIM_SCHED_MIXED;
        p.max_num_batched_tokens = 2048;
        struct trec *t = trec_new(4, 0);
        struct sim_engine *e = mech_engine(&p, t);
        for (int i = 0; i < 4; i++)
            assert_int_equal(sim_engine_submit(e, &t->reqs[i], 900, 1000, 0), 0);
        uint64_t now = 0, d;
        uint32_t most = 0;
        while ((d = sim_engine_step(e, now)) != 0) {
            struct sim_engine_stats st;
            sim_engine_stats(e, &st);
            if (st.running > most)
                most = st.running;
            now += d;
        }
        struct sim_engine_stats st;
        sim_engine_stats(e, &st);
        assert_int_equal(st.requests_finished, 4);
        if (policy) {
            /* 1900 tokens = 119 blocks reserved each: two at once, nothing evicted */
            assert_int_equal(most, 2);
            assert_int_equal(st.preemptions_total, 0);
        } else {
            assert_int_equal(most, 4);
            assert_true(st.preemptions_total > 0);
        }
        sim_engine_free(e);
        trec_free(t);
    }
}

/* reserve-max reserves the client's max_tokens when it is known, not the real length */
static void test_reserve_max_reserves_max_tokens(void **state)
{
    struct sim_profile p = test_profile(); /* 256 blocks of 16, max_model_len 2048 */
    p.sched_policy = SIM_SCHED_RESERVE_MAX;
    struct trec *t = trec_new(3, 0);
    struct sim_engine *e = mech_engine(&p, t);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sim_engine_submit(e, &t->reqs[i], 100, 10, 0), 0);
        /* 100 + 1400 tokens = 94 blocks each: two fit in 256, not three */
        assert_int_equal(sim_engine_set_reserve(e, &t->reqs[i], 1400), 0);
    }
    sim_engine_step(e, 0);
    struct sim_engine_stats st;
    sim_engine_stats(e, &st);
    assert_int_equal(st.running, 2);
    assert_int_equal(st.kv_blocks_used, 188);
    assert_int_equal(sim_engine_set_reserve(e, &t->reqs[0], 5), -EBUSY); /* admitted */
    int dummy;
    assert_int_equal(sim_engine_set_reserve(e, &dummy, 5), -ENOENT);
    /* more than the context leaves is capped to it: 100 + 1948 = 128 blocks */
    assert_int_equal(sim_engine_set_reserve(e, &t->reqs[2], 100000), 0);
    run_until_idle(e, 0, 1000);
    sim_engine_stats(e, &st);
    assert_int_equal(st.requests_finished, 3);
    assert_int_equal(st.preemptions_total, 0);
    sim_engine_free(e);
    trec_free(t);
}

static uint64_t deliver_log[8];

static void on_token_at(void *ctx, void *req, uint32_t index, uint64_t now, uint64_t deliver)
{
    struct treq *r = req;
    assert_true(deliver >= now);
    if (index < 4)
        deliver_log[(r - ((struct trec *)ctx)->reqs) * 4 + index] = deliver;
    r->ntok++;
}

static void test_api_server_queue(void **state)
{
    struct sim_profile p = test_profile();
    p.api_ms_per_prompt_token = 0.01;
    p.api_ms_per_event = 0.5;
    struct trec *t = trec_new(2, 4);
    struct sim_engine_ops o = {
        .on_admit = on_admit, .on_token_at = on_token_at, .on_finish = on_finish};
    struct sim_engine *e = sim_engine_new(&p, &o, t);
    assert_non_null(e);
    t->e = e;
    memset(deliver_log, 0, sizeof(deliver_log));
    /* tokenising 100 tokens takes 1 ms each, one after the other */
    assert_int_equal(sim_engine_submit(e, &t->reqs[0], 100, 2, 0), 0);
    assert_int_equal(sim_engine_submit(e, &t->reqs[1], 100, 2, 0), 0);
    assert_int_equal(sim_engine_step(e, 0), 1000000); /* waits for the API server */
    assert_int_equal(t->reqs[0].admits, 0);
    uint64_t d = sim_engine_step(e, 1000000);
    assert_int_equal(t->reqs[0].admit_ns, 1000000);
    assert_int_equal(t->reqs[1].admits, 0); /* still being tokenised */
    assert_int_equal(d, 3250000);
    uint64_t now = 1000000 + d;
    d = sim_engine_step(e, now); /* r0's first token; r1 admitted */
    assert_int_equal(t->reqs[1].admit_ns, now);
    assert_int_equal(deliver_log[0], now + 500000);
    run_until_idle(e, now + d, 100);
    /* events queue behind each other: every delivery is 0.5 ms after the one before or later */
    assert_true(deliver_log[1] >= deliver_log[0] + 500000);
    assert_int_equal(t->reqs[0].ntok, 2);
    assert_int_equal(t->reqs[1].ntok, 2);
    sim_engine_free(e);
    trec_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_request_exact_times),
        cmocka_unit_test(test_chunked_prefill),
        cmocka_unit_test(test_batching_shares_steps),
        cmocka_unit_test(test_mixed_decode_and_prefill),
        cmocka_unit_test(test_kv_capacity_makes_third_wait),
        cmocka_unit_test(test_watermark_blocks_admission),
        cmocka_unit_test(test_preemption_delivers_every_token_once),
        cmocka_unit_test(test_busy_and_too_big),
        cmocka_unit_test(test_noise_is_seeded),
        cmocka_unit_test(test_noise_bounds_and_stalls),
        cmocka_unit_test(test_thousand_concurrent_requests),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_submit_from_callback),
        cmocka_unit_test(test_step_before_due_and_stall),
        cmocka_unit_test(test_cold_start),
        cmocka_unit_test(test_shrink_kv_capacity),
        cmocka_unit_test(test_new_rejects_and_alloc_failures),
        cmocka_unit_test(test_step_cost_many_running),
        cmocka_unit_test(test_multi_step_rounds),
        cmocka_unit_test(test_per_seq_overheads),
        cmocka_unit_test(test_cuda_graph_padding),
        cmocka_unit_test(test_prefill_first_pauses_decodes),
        cmocka_unit_test(test_reserve_max_never_preempts),
        cmocka_unit_test(test_api_server_queue),
        cmocka_unit_test(test_reserve_max_reserves_max_tokens),
    };
    return cmocka_run_group_tests_name("engine", tests, NULL, NULL);
}
