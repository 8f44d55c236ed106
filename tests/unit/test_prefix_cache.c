/*
 * Prefix caching in the engine (sim/engine.c, included to see the cache's
 * blocks) and the prompt block hasher (sim/blockhash.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "sim/engine.c"
#include "llm/text.h"
#include "sim/blockhash.h"

#define MS 1000000ull /* ns */

struct preq {
    uint32_t admits, tokens, preempts;
    uint64_t first_ns, finish_ns;
    uint32_t cached; /* cached_tokens seen in on_finish */
    bool finished;
};

static struct sim_engine *cur; /* the engine of the test, for req_info from callbacks */

static void on_admit(void *ctx, void *req, uint64_t now)
{
    ((struct preq *)req)->admits++;
}

static void on_token(void *ctx, void *req, uint32_t index, uint64_t now)
{
    struct preq *r = req;
    if (index == 0)
        r->first_ns = now;
    r->tokens++;
}

static void on_finish(void *ctx, void *req, uint64_t now)
{
    struct preq *r = req;
    struct sim_req_info info;
    assert_int_equal(sim_engine_req_info(cur, r, &info), 0);
    r->cached = info.cached_tokens;
    r->finish_ns = now;
    r->finished = true;
}

static void on_preempt(void *ctx, void *req, uint64_t now)
{
    ((struct preq *)req)->preempts++;
}

static const struct sim_engine_ops ops = {
    .on_admit = on_admit,
    .on_token = on_token,
    .on_finish = on_finish,
    .on_preempt = on_preempt,
};

/*
 * Exact numbers: t_fix 0.05 ms, t_w 1 ms, b 0.01 ms/token, c_pf 1e-5 ms per
 * chunk token^2, k_kv 1e-6 ms per context token, budget 2048, blocks of 16.
 */
static struct sim_profile pc_profile(bool on, uint64_t kv_tokens, uint32_t max_model_len)
{
    struct sim_profile p;
    assert_int_equal(sim_profile_preset("tiny", &p), 0);
    p.t_fix_ms = 0.05;
    p.t_w_ms = 1;
    p.b_ms_per_token = 0.01;
    p.k_kv_ms_per_token = 1e-6;
    p.c_pf_ms = 1e-5;
    p.max_num_batched_tokens = 2048;
    p.max_num_seqs = 16;
    p.block_size = 16;
    p.watermark = 0;
    p.kv_capacity_tokens = kv_tokens;
    p.max_model_len = max_model_len;
    p.noise = false;
    p.prefix_caching = on;
    char err[256];
    assert_int_equal(sim_profile_validate(&p, err, sizeof(err)), 0);
    return p;
}

static struct sim_engine *engine_new(const struct sim_profile *p)
{
    struct sim_engine *e = sim_engine_new(p, &ops, NULL);
    assert_non_null(e);
    cur = e;
    return e;
}

/* Duration of a step with only a prefill chunk of c tokens, by the profile's formula. */
static uint64_t prefill_ns(const struct sim_profile *p, uint32_t c)
{
    double ms = p->t_fix_ms + fmax(p->t_w_ms, p->b_ms_per_token * c) + p->c_pf_ms * c * c;
    return (uint64_t)llround(ms * 1e6);
}

static uint64_t run_until_idle(struct sim_engine *e, uint64_t now)
{
    for (int i = 0; i < 100000; i++) {
        uint64_t d = sim_engine_step(e, now);
        if (d == 0)
            return now;
        now += d;
    }
    fail_msg("engine still busy");
    return now;
}

/* Hashes of a prompt: n blocks, the first `shared` from the shared family. */
static void make_hashes(uint64_t *h, uint32_t n, uint32_t shared, uint64_t family)
{
    for (uint32_t i = 0; i < n; i++)
        h[i] = i < shared ? 0x5000 + i : family * 0x10000 + i;
}

static bool cached(const struct sim_engine *e, uint64_t hash)
{
    return pc_find(e, hash) != NULL;
}

/* ---- the engine ---- */

/* Two requests sharing a 1024-token prefix: the second prefills only the rest. */
static void test_shared_prefix_prefill_cost(void **state)
{
    struct sim_profile p = pc_profile(true, 65536, 4096);
    struct sim_engine *e = engine_new(&p);
    uint64_t ha[68], hb[68];
    make_hashes(ha, 68, 64, 1); /* 1100 tokens: 68 full blocks, the first 64 shared */
    make_hashes(hb, 68, 64, 2);
    struct preq a = {0}, b = {0};

    assert_int_equal(sim_engine_submit_prefix(e, &a, 1100, 2, ha, 68, 0), 0);
    uint64_t d = sim_engine_step(e, 0);
    /* nothing cached: 0.05 + max(1, 11) + 1e-5 * 1100^2 = 23.15 ms */
    assert_int_equal(d, prefill_ns(&p, 1100));
    assert_int_equal(d, 23150000);
    uint64_t now = run_until_idle(e, d);
    assert_true(a.finished);
    assert_int_equal(a.cached, 0);
    struct sim_engine_stats st;
    sim_engine_stats(e, &st);
    assert_int_equal(st.kv_blocks_used, 0);
    assert_int_equal(st.prefix_cache_blocks, 68); /* all full prompt blocks, now idle */
    assert_int_equal(st.prefix_cache_queries, 1100);
    assert_int_equal(st.prefix_cache_hits, 0);

    uint64_t t1 = now + 5 * MS;
    assert_int_equal(sim_engine_submit_prefix(e, &b, 1100, 2, hb, 68, t1), 0);
    d = sim_engine_step(e, t1);
    /* 1024 cached, 76 computed: 0.05 + max(1, 0.76) + 1e-5 * 76^2 = 1.10776 ms */
    assert_int_equal(d, prefill_ns(&p, 76));
    assert_int_equal(d, 1107760);
    sim_engine_stats(e, &st);
    assert_int_equal(st.batch_tokens, 76);
    assert_int_equal(st.kv_blocks_used, 69); /* ceil(1100 / 16): 64 cached + 5 new */
    run_until_idle(e, t1 + d);
    assert_true(b.finished);
    assert_int_equal(b.first_ns - t1, 1107760);
    assert_int_equal(b.cached, 1024);
    sim_engine_stats(e, &st);
    assert_int_equal(st.prefix_cache_queries, 2200);
    assert_int_equal(st.prefix_cache_hits, 1024);
    assert_int_equal(st.prefill_tokens_total, 1100 + 76);
    assert_int_equal(st.prompt_tokens_total, 2200);
    assert_int_equal(st.prefix_cache_blocks, 72); /* 64 shared + 4 of a + 4 of b */
    assert_int_equal(st.kv_blocks_used, 0);
    sim_engine_free(e);
}

/* A fully cached prompt still computes its last token: the whole last block is recomputed. */
static void test_full_hit_recomputes_last_block(void **state)
{
    struct sim_profile p = pc_profile(true, 65536, 4096);
    struct sim_engine *e = engine_new(&p);
    uint64_t h[65];
    make_hashes(h, 65, 65, 0);
    struct preq r[3] = {{0}};

    assert_int_equal(sim_engine_submit_prefix(e, &r[0], 1024, 1, h, 64, 0), 0);
    uint64_t now = run_until_idle(e, 0);
    assert_int_equal(r[0].first_ns, prefill_ns(&p, 1024));

    /* 1024 tokens again: at most (1024 - 1) / 16 = 63 blocks hit, 16 tokens computed */
    assert_int_equal(sim_engine_submit_prefix(e, &r[1], 1024, 1, h, 64, now), 0);
    uint64_t d = sim_engine_step(e, now);
    assert_int_equal(d, prefill_ns(&p, 16));
    now = run_until_idle(e, now + d);
    assert_int_equal(r[1].cached, 1008);

    /* one more token after the same 64 blocks: all 64 hit, 1 token computed */
    assert_int_equal(sim_engine_submit_prefix(e, &r[2], 1025, 1, h, 64, now), 0);
    d = sim_engine_step(e, now);
    assert_int_equal(d, prefill_ns(&p, 1)); /* 0.05 + 1 + 1e-5 ms */
    assert_int_equal(d, 1050010);
    run_until_idle(e, now + d);
    assert_int_equal(r[2].cached, 1024);

    struct sim_engine_stats st;
    sim_engine_stats(e, &st);
    assert_int_equal(st.prefix_cache_hits, 1008 + 1024);
    assert_int_equal(st.prefix_cache_queries, 1024 + 1024 + 1025);
    assert_int_equal(st.prefill_tokens_total, 1024 + 16 + 1);
    assert_int_equal(st.prefix_cache_blocks, 64);
    sim_engine_free(e);
}

/* A cached block held by two running requests counts once against the KV cache. */
static void test_shared_blocks_count_once(void **state)
{
    struct sim_profile p = pc_profile(true, 65536, 4096);
    struct sim_engine *e = engine_new(&p);
    uint64_t ha[65], hb[65];
    make_hashes(ha, 65, 64, 1);
    make_hashes(hb, 65, 64, 2);
    struct preq a = {0}, b = {0};

    assert_int_equal(sim_engine_submit_prefix(e, &a, 1040, 50, ha, 65, 0), 0);
    uint64_t d = sim_engine_step(e, 0);
    assert_int_equal(d, prefill_ns(&p, 1040));
    /* b arrives as a's prefill completes: a decodes, b is admitted with 64 blocks cached */
    assert_int_equal(sim_engine_submit_prefix(e, &b, 1040, 50, hb, 65, d), 0);
    uint64_t d2 = sim_engine_step(e, d);
    struct sim_engine_stats st;
    sim_engine_stats(e, &st);
    assert_int_equal(a.tokens, 1);
    assert_int_equal(b.admits, 1);
    assert_int_equal(st.prefix_cache_blocks, 65);
    /* a: 65 blocks + 1 for its token 1041; b: 64 shared + 1 own = 67, not 66 + 65 */
    assert_int_equal(st.kv_blocks_used, 67);
    assert_int_equal(st.batch_tokens, 1 + 16);
    /* 0.05 + max(1, 0.17) + 1e-6 * 1041 (a's context) + 1e-5 * 16^2 */
    assert_int_equal(d2, (uint64_t)llround((0.05 + 1 + 1e-6 * 1041 + 1e-5 * 256) * 1e6));
    for (uint32_t i = 0; i < 64; i++)
        assert_int_equal(pc_find(e, ha[i])->ref, 2);
    assert_int_equal(pc_find(e, ha[64])->ref, 1);

    /* cancelling a: the shared blocks stay held by b, a's own cached block goes idle */
    sim_engine_cancel(e, &a);
    sim_engine_stats(e, &st);
    assert_int_equal(st.kv_blocks_used, 65); /* b's 64 shared + 1 */
    assert_int_equal(pc_find(e, ha[0])->ref, 1);
    assert_int_equal(pc_find(e, ha[64])->ref, 0);
    assert_int_equal(e->pc_idle.n, 1);
    run_until_idle(e, d + d2);
    assert_true(b.finished);
    assert_int_equal(b.cached, 1024);
    sim_engine_stats(e, &st);
    assert_int_equal(st.kv_blocks_used, 0);
    assert_int_equal(st.prefix_cache_blocks, 66); /* 64 shared + a's and b's 65th */
    assert_int_equal(e->pc_idle.n, 66);
    sim_engine_free(e);
}

/*
 * Under KV pressure idle cached blocks are evicted least recently released
 * first (a prompt's tail before its head); blocks a running request holds
 * never are. 64 blocks of 16, no watermark.
 */
static void test_eviction_lru_never_in_use(void **state)
{
    struct sim_profile p = pc_profile(true, 1024, 512);
    struct sim_engine *e = engine_new(&p);
    uint64_t p1[16], p2[16], p3[16], q[20], rr[31];
    make_hashes(p1, 16, 0, 1);
    make_hashes(p2, 16, 0, 2);
    make_hashes(p3, 16, 0, 3);
    make_hashes(q, 20, 0, 4);
    make_hashes(rr, 31, 0, 5);
    struct preq rp[3] = {{0}}, h = {0}, rq = {0}, rbig = {0};

    /* three 256-token prompts, one after the other: 48 idle cached blocks */
    uint64_t now = 0;
    const uint64_t *ph[3] = {p1, p2, p3};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sim_engine_submit_prefix(e, &rp[i], 256, 1, ph[i], 16, now), 0);
        now = run_until_idle(e, now);
        assert_true(rp[i].finished);
    }
    struct sim_engine_stats st;
    sim_engine_stats(e, &st);
    assert_int_equal(st.kv_blocks_used, 0);
    assert_int_equal(st.prefix_cache_blocks, 48);
    assert_int_equal(e->pc_idle.n, 48);
    assert_int_equal(st.prefix_cache_evictions, 0);

    /* h reuses p1's prompt: 15 blocks hit (the 16th is recomputed), held while h runs */
    assert_int_equal(sim_engine_submit_prefix(e, &h, 256, 100, p1, 16, now), 0);
    uint64_t d = sim_engine_step(e, now);
    assert_int_equal(d, prefill_ns(&p, 16));
    sim_engine_stats(e, &st);
    assert_int_equal(st.kv_blocks_used, 16);
    assert_int_equal(e->pc_idle.n, 33);
    now += d;

    /* q (20 new blocks) arrives as h's prefill completes: h re-finds p1's 16th block and
     * takes a block for token 257; used 17 + 20 = 37, so 5 of the 32 idle blocks go:
     * p2's last five (p2 was released before p3, its tail first) */
    assert_int_equal(sim_engine_submit_prefix(e, &rq, 320, 1, q, 20, now), 0);
    d = sim_engine_step(e, now);
    sim_engine_stats(e, &st);
    assert_int_equal(h.cached, 0); /* still running: on_finish not seen */
    assert_int_equal(st.kv_blocks_used, 37);
    assert_int_equal(st.prefix_cache_evictions, 5);
    assert_int_equal(st.prefix_cache_blocks, 43);
    for (int i = 0; i < 16; i++) {
        assert_true(cached(e, p1[i]));
        assert_int_equal(pc_find(e, p1[i])->ref, 1);
        assert_true(cached(e, p3[i]));
        assert_int_equal(cached(e, p2[i]), i < 11);
    }
    now += d;

    /* rbig (31 blocks) arrives as q finishes (q's 20 blocks go idle): 17 + 31 = 48 used,
     * 47 idle, 31 evicted: the rest of p2, all of p3, q's last four. p1 (held by h) stays. */
    assert_int_equal(sim_engine_submit_prefix(e, &rbig, 496, 1, rr, 31, now), 0);
    d = sim_engine_step(e, now);
    assert_true(rq.finished);
    sim_engine_stats(e, &st);
    assert_int_equal(st.kv_blocks_used, 48);
    assert_int_equal(st.prefix_cache_evictions, 36);
    assert_int_equal(st.prefix_cache_blocks, 32);
    assert_int_equal(e->pc_idle.n, 16);
    for (int i = 0; i < 16; i++) {
        assert_true(cached(e, p1[i]));
        assert_false(cached(e, p2[i]));
        assert_false(cached(e, p3[i]));
    }
    for (int i = 0; i < 20; i++)
        assert_int_equal(cached(e, q[i]), i < 16);
    assert_int_equal(st.kv_blocks_used + e->pc_idle.n, 64); /* the cache is exactly full */

    run_until_idle(e, now + d);
    assert_true(h.finished);
    assert_true(rbig.finished);
    assert_int_equal(h.cached, 240);
    sim_engine_stats(e, &st);
    assert_int_equal(st.kv_blocks_used, 0);
    assert_true(st.prefix_cache_blocks <= 64);
    assert_int_equal(st.prefix_cache_blocks, e->pc_n);
    sim_engine_free(e);
}

/* A preempted request's blocks stay cached; readmitted, it recomputes only the rest. */
static void test_preempted_request_reuses_its_blocks(void **state)
{
    struct sim_profile p = pc_profile(true, 1024, 512);
    struct sim_engine *e = engine_new(&p);
    uint64_t ha[16], hb[16];
    make_hashes(ha, 16, 0, 1);
    make_hashes(hb, 16, 0, 2);
    struct preq a = {0}, b = {0};
    assert_int_equal(sim_engine_submit_prefix(e, &a, 256, 20, ha, 16, 0), 0);
    assert_int_equal(sim_engine_submit_prefix(e, &b, 256, 20, hb, 16, 0), 0);
    uint64_t now = 0, d = sim_engine_step(e, 0); /* both prefill in one step */
    now += d;
    d = sim_engine_step(e, now); /* tokens 0; each takes a 17th block for its next token */
    struct sim_engine_stats st;
    sim_engine_stats(e, &st);
    assert_int_equal(st.kv_blocks_used, 34);
    assert_int_equal(st.prefix_cache_blocks, 32);

    /* shrink to 32 blocks: b (admitted last) is preempted; its 16 cached blocks go idle and
     * one (its last prompt block) is evicted so that 17 + 16 idle fit in 32 */
    assert_int_equal(sim_engine_set_kv_capacity(e, 512, now), 0);
    assert_int_equal(b.preempts, 1);
    sim_engine_stats(e, &st);
    assert_int_equal(st.kv_blocks_used, 17);
    assert_int_equal(st.prefix_cache_evictions, 1);
    assert_false(cached(e, hb[15]));
    assert_true(cached(e, hb[14]));

    /* back to 64 blocks at the next step: b is readmitted with 15 blocks cached */
    assert_int_equal(sim_engine_set_kv_capacity(e, 0, now), 0);
    uint64_t before_queries = st.prefix_cache_queries;
    uint64_t before_prefill = st.prefill_tokens_total;
    now += d;
    d = sim_engine_step(e, now);
    assert_int_equal(b.admits, 2);
    sim_engine_stats(e, &st);
    /* b knows 256 + 1 tokens: 240 cached, 17 recomputed (a decodes 1 token meanwhile) */
    assert_int_equal(st.prefix_cache_queries - before_queries, 257);
    assert_int_equal(st.batch_tokens, 1 + 17);
    run_until_idle(e, now + d);
    assert_true(a.finished && b.finished);
    assert_int_equal(a.tokens, 20);
    assert_int_equal(b.tokens, 20);
    assert_int_equal(b.cached, 0); /* cached_tokens is the first admission's */
    sim_engine_stats(e, &st);
    assert_int_equal(st.prefill_tokens_total - before_prefill, 17);
    assert_int_equal(st.prefix_cache_hits, 240);
    sim_engine_free(e);
}

/* prefix_caching off: the hashes change nothing (the same numbers as without them). */
static void test_disabled_no_effect(void **state)
{
    struct sim_profile p = pc_profile(false, 65536, 4096);
    struct sim_engine *e = engine_new(&p);
    uint64_t h[68];
    make_hashes(h, 68, 68, 0);
    struct preq a = {0}, b = {0};
    assert_int_equal(sim_engine_submit_prefix(e, &a, 1100, 2, h, 68, 0), 0);
    uint64_t now = run_until_idle(e, 0);
    assert_int_equal(sim_engine_submit_prefix(e, &b, 1100, 2, h, 68, now), 0);
    uint64_t d = sim_engine_step(e, now);
    assert_int_equal(d, prefill_ns(&p, 1100));
    run_until_idle(e, now + d);
    assert_int_equal(b.first_ns - now, 23150000);
    assert_int_equal(b.cached, 0);
    struct sim_engine_stats st;
    sim_engine_stats(e, &st);
    assert_int_equal(st.prefix_cache_queries, 0);
    assert_int_equal(st.prefix_cache_hits, 0);
    assert_int_equal(st.prefix_cache_blocks, 0);
    assert_int_equal(st.prefill_tokens_total, 2200);
    assert_null(e->pc_slots);
    sim_engine_free(e);
}

static void test_submit_checks_and_alloc_failures(void **state)
{
    struct sim_profile p = pc_profile(true, 65536, 4096);
    struct sim_engine *e = engine_new(&p);
    uint64_t h[8];
    make_hashes(h, 8, 8, 0);
    struct preq a = {0}, b = {0};
    /* more hashes than full blocks, or none given */
    assert_int_equal(sim_engine_submit_prefix(e, &a, 127, 1, h, 8, 0), -EINVAL);
    assert_int_equal(sim_engine_submit_prefix(e, &a, 128, 1, NULL, 8, 0), -EINVAL);
    /* the copy of the hashes fails: -ENOMEM, nothing queued */
    ts_alloc_fail_after(1);
    assert_int_equal(sim_engine_submit_prefix(e, &a, 128, 1, h, 8, 0), -ENOMEM);
    ts_alloc_fail_after(-1);
    struct sim_engine_stats st;
    sim_engine_stats(e, &st);
    assert_int_equal(st.waiting, 0);

    /* the cache cannot grow: the request runs, its blocks are simply not cached */
    assert_int_equal(sim_engine_submit_prefix(e, &a, 128, 1, h, 8, 0), 0);
    ts_alloc_fail_after(0);
    uint64_t now = run_until_idle(e, 0);
    ts_alloc_fail_after(-1);
    assert_true(a.finished);
    sim_engine_stats(e, &st);
    assert_int_equal(st.prefix_cache_blocks, 0);
    assert_int_equal(st.kv_blocks_used, 0);
    /* with memory again it works */
    assert_int_equal(sim_engine_submit_prefix(e, &b, 128, 1, h, 8, now), 0);
    run_until_idle(e, now);
    sim_engine_stats(e, &st);
    assert_int_equal(st.prefix_cache_blocks, 8);
    sim_engine_free(e);
}

/* Many distinct prompts through a small cache: bounded, consistent, no leak. */
static void test_bounded_under_churn(void **state)
{
    struct sim_profile p = pc_profile(true, 4096, 512);
    struct sim_engine *e = engine_new(&p);
    static struct preq r[400];
    uint64_t h[20];
    uint64_t now = 0;
    memset(r, 0, sizeof(r));
    for (int i = 0; i < 400; i++) {
        /* a few families of shared prefixes, different tails */
        for (int k = 0; k < 20; k++)
            h[k] = k < 8 ? (uint64_t)(i % 5) * 1000 + k : (uint64_t)i * 100000 + k;
        assert_int_equal(sim_engine_submit_prefix(e, &r[i], 300 + i % 17, 5, h, 18, now), 0);
        if (i % 7 == 6)
            now = run_until_idle(e, now);
        struct sim_engine_stats st;
        sim_engine_stats(e, &st);
        assert_true(st.kv_blocks_used + e->pc_idle.n <= 256);
        assert_true(e->pc_n <= 256);
    }
    run_until_idle(e, now);
    uint32_t hits = 0;
    for (int i = 0; i < 400; i++) {
        assert_true(r[i].finished);
        assert_int_equal(r[i].tokens, 5);
        hits += r[i].cached > 0;
    }
    struct sim_engine_stats st;
    sim_engine_stats(e, &st);
    assert_true(hits > 0);
    assert_true(st.prefix_cache_evictions > 1000); /* 400 * 10 distinct blocks went through */
    assert_true(e->pc_nslots <= 1024);             /* the table never grew past its first size */
    sim_engine_free(e);
}

/* ---- the block hasher ---- */

static void hash_text(struct sim_block_hasher *h, const char *s)
{
    sim_block_hasher_init(h, 16, 1024);
    assert_int_equal(sim_block_hasher_text(h, s, strlen(s)), text_count_tokens(s, strlen(s)));
}

static void test_block_hasher(void **state)
{
    char a[8192], b[8192];
    size_t n = 0;
    for (int i = 0; i < 300; i++)
        n += (size_t)snprintf(a + n, sizeof(a) - n, " word%d", i);
    memcpy(b, a, n + 1);
    size_t pos = n / 2; /* one digit changed in the middle: the same pieces, one differs */
    while (a[pos] < '0' || a[pos] > '9')
        pos++;
    b[pos] = a[pos] == '0' ? '1' : '0';

    struct sim_block_hasher ha, hb, hc;
    hash_text(&ha, a);
    hash_text(&hb, b);
    assert_int_equal(ha.tokens, hb.tokens);
    assert_int_equal(ha.n, ha.tokens / 16);
    assert_true(ha.n >= 2);
    /* equal up to the block holding the changed token, different from there on */
    uint64_t changed = text_count_tokens(a, pos + 1) - 1; /* its index */
    uint32_t same = 0;
    for (uint32_t i = 0; i < ha.n; i++) {
        if ((i + 1) * 16 <= changed) {
            assert_true(ha.hashes[i] == hb.hashes[i]);
            same++;
        } else {
            assert_true(ha.hashes[i] != hb.hashes[i]);
        }
    }
    assert_int_equal(same, changed / 16);
    assert_true(same > 0 && same < ha.n);
    /* chained: the same block text after a different prefix hashes differently */
    hash_text(&hc, a);
    assert_memory_equal(ha.hashes, hc.hashes, ha.n * sizeof(uint64_t));
    sim_block_hasher_release(&hc);
    sim_block_hasher_init(&hc, 16, 1024);
    sim_block_hasher_piece(&hc, "x", 1);
    (void)sim_block_hasher_text(&hc, a, strlen(a));
    assert_true(hc.n > 0 && hc.hashes[0] != ha.hashes[0]);
    sim_block_hasher_release(&hc);

    /* piece boundaries matter: "ab" + "c" is not "a" + "bc" */
    struct sim_block_hasher x, y;
    sim_block_hasher_init(&x, 2, 8);
    sim_block_hasher_init(&y, 2, 8);
    sim_block_hasher_piece(&x, "ab", 2);
    sim_block_hasher_piece(&x, "c", 1);
    sim_block_hasher_piece(&y, "a", 1);
    sim_block_hasher_piece(&y, "bc", 2);
    assert_int_equal(x.n, 1);
    assert_true(x.hashes[0] != y.hashes[0]);
    sim_block_hasher_release(&x);
    sim_block_hasher_release(&y);

    /* unknown tokens stop hashing but are counted; max_blocks caps the hashes */
    sim_block_hasher_init(&x, 16, 2);
    assert_int_equal(sim_block_hasher_text(&x, a, strlen(a)), ha.tokens);
    assert_int_equal(x.n, 2);
    assert_int_equal(x.tokens, ha.tokens);
    sim_block_hasher_opaque(&x, 5);
    assert_int_equal(x.tokens, ha.tokens + 5);
    sim_block_hasher_release(&x);
    sim_block_hasher_init(&x, 16, 1024);
    for (int i = 0; i < 20; i++)
        sim_block_hasher_piece(&x, "t", 1);
    sim_block_hasher_opaque(&x, 100);
    for (int i = 0; i < 40; i++)
        sim_block_hasher_piece(&x, "t", 1);
    assert_int_equal(x.n, 1);
    assert_int_equal(x.tokens, 160);
    sim_block_hasher_release(&x);
    /* block size 0 counts only */
    sim_block_hasher_init(&x, 0, 1024);
    assert_int_equal(sim_block_hasher_text(&x, a, strlen(a)), ha.tokens);
    assert_int_equal(x.n, 0);
    assert_null(x.hashes);
    sim_block_hasher_release(&x);
    /* no memory: the hashes made so far stay, the count goes on */
    sim_block_hasher_init(&x, 1, 1024);
    ts_alloc_fail_after(0);
    for (int i = 0; i < 10; i++)
        sim_block_hasher_piece(&x, "t", 1);
    ts_alloc_fail_after(-1);
    assert_int_equal(x.n, 0);
    assert_int_equal(x.tokens, 10);
    sim_block_hasher_release(&x);

    sim_block_hasher_release(&ha);
    sim_block_hasher_release(&hb);
}

static void test_presets(void **state)
{
    struct sim_profile p;
    const char *gpu[] = {"llama3-8b-a100", "llama3-8b-h100", "llama3-70b-4xh100"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sim_profile_preset(gpu[i], &p), 0);
        assert_true(p.prefix_caching);
    }
    assert_int_equal(sim_profile_preset("tiny", &p), 0);
    assert_false(p.prefix_caching);
    char err[128], out[16];
    assert_int_equal(sim_profile_set(&p, "prefix_caching", "on", err, sizeof(err)), 0);
    assert_true(p.prefix_caching);
    assert_int_equal(sim_profile_get(&p, "prefix_caching", out, sizeof(out)), 0);
    assert_string_equal(out, "true");
    static const char yaml[] = "base: llama3-8b-h100\nprefix_caching: false\n";
    assert_int_equal(sim_profile_load_yaml_mem(&p, "t.yaml", yaml, strlen(yaml), err, sizeof(err)),
                     0);
    assert_false(p.prefix_caching);
    assert_int_equal(sim_profile_set(&p, "prefix_caching", "maybe", err, sizeof(err)), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_prefix_prefill_cost),
        cmocka_unit_test(test_full_hit_recomputes_last_block),
        cmocka_unit_test(test_shared_blocks_count_once),
        cmocka_unit_test(test_eviction_lru_never_in_use),
        cmocka_unit_test(test_preempted_request_reuses_its_blocks),
        cmocka_unit_test(test_disabled_no_effect),
        cmocka_unit_test(test_submit_checks_and_alloc_failures),
        cmocka_unit_test(test_bounded_under_churn),
        cmocka_unit_test(test_block_hasher),
        cmocka_unit_test(test_presets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
