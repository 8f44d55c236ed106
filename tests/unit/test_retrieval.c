/*
 * test_retrieval.c - a flow's retrieval steps (scenario/retrieval.h): which
 * steps are retrievals and answers, what each answer followed, and recall@k
 * of a real vector store page (sim/vstore.h) against the exact ranking.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "scenario/retrieval.h"
#include "sim/vstore.h"

enum { SEARCH, ALT, PLAN, GENERATE, GEN_FB, EMBED, NSTEPS };

static uint32_t dep_search[] = {SEARCH}, dep_plan[] = {PLAN};

/*
 * search (retrieval, k 3) with fallback alt (retrieval, k 2); plan (chat)
 * after search; generate (chat) after plan with fallback gen_fb (chat);
 * embed (embeddings) on its own.
 */
static void make_flow(struct flow_step_def *st, struct flow_def *d)
{
    memset(st, 0, NSTEPS * sizeof(*st));
    static const char *const names[] = {"search", "alt", "plan", "generate", "gen_fb", "embed"};
    for (int i = 0; i < NSTEPS; i++) {
        st[i].name = (char *)names[i];
        st[i].fallback = -1;
    }
    st[SEARCH].kind = st[ALT].kind = FLOW_STEP_HTTP;
    st[SEARCH].retrieval_k = 3;
    st[SEARCH].fallback = ALT;
    st[ALT].retrieval_k = 2;
    st[ALT].fallback_only = true;
    st[PLAN].kind = st[GENERATE].kind = st[GEN_FB].kind = FLOW_STEP_CHAT;
    st[PLAN].deps = dep_search;
    st[PLAN].ndeps = 1;
    st[GENERATE].deps = dep_plan;
    st[GENERATE].ndeps = 1;
    st[GENERATE].fallback = GEN_FB;
    st[GEN_FB].fallback_only = true;
    st[GEN_FB].deps = dep_plan;
    st[GEN_FB].ndeps = 1;
    st[EMBED].kind = FLOW_STEP_EMBEDDINGS;
    d->steps = st;
    d->n = NSTEPS;
}

/* The flow above with its retrieval state built. */
static void init_flow(struct flow_step_def *st, struct flow_def *d, struct flow_retrieval *r)
{
    char err[256];
    make_flow(st, d);
    assert_int_equal(flow_retrieval_init(r, d, err, sizeof(err)), 0);
}

static void test_steps(void **state)
{
    (void)state;
    struct flow_step_def st[NSTEPS];
    struct flow_def d;
    struct flow_retrieval r;
    init_flow(st, &d, &r);
    assert_int_equal(r.retrievals, (1u << SEARCH) | (1u << ALT));
    /* the final chat and its fallback answer; plan feeds generate, so it does not */
    assert_int_equal(r.answers, (1u << GENERATE) | (1u << GEN_FB));
    assert_true(flow_retrieval_is_answer(&r, GENERATE));
    assert_false(flow_retrieval_is_answer(&r, PLAN));
    assert_false(flow_retrieval_is_answer(&r, 99));
    /* an answer followed search, or alt when alt stood in for it */
    uint64_t both = (1u << SEARCH) | (1u << ALT);
    assert_int_equal(r.before[PLAN], both);
    assert_int_equal(r.before[GENERATE], both);
    assert_int_equal(r.before[GEN_FB], both);
    assert_int_equal(r.before[EMBED], 0);
    assert_int_equal(r.before[SEARCH], 0);
    /* both built-in stores are one */
    assert_non_null(r.store[SEARCH]);
    assert_ptr_equal(r.store[SEARCH], r.store[ALT]);
    assert_null(r.store[PLAN]);
    flow_retrieval_release(&r);
}

/* A page as the simulator writes it for query q, its top max hits. */
static char *page(const struct vstore *v, const char *body, size_t max)
{
    struct vstore_query q;
    struct openai_error e;
    vstore_query_init(&q);
    assert_int_equal(vstore_query_parse(&q, body, strlen(body), &e), 0);
    struct vstore_hit hits[VSTORE_MAX_RESULTS];
    size_t n;
    assert_int_equal(vstore_search(v, q.text, q.len, max, 0, hits, &n), 0);
    struct buf out;
    buf_init(&out, 1 << 20);
    assert_int_equal(vstore_encode_page(&out, v, &q, hits, n), 0);
    vstore_query_release(&q);
    char *s = strndup(out.data, out.len);
    buf_release(&out);
    return s;
}

static void test_measure(void **state)
{
    (void)state;
    struct flow_step_def st[NSTEPS];
    struct flow_def d;
    struct flow_retrieval r;
    init_flow(st, &d, &r);
    const char *req = "{\"query\":[\"volcanoes\",\"magma lava\"],\"max_num_results\":3}";
    char *exact = page(r.store[SEARCH], req, 3);
    double recall = -1;
    uint32_t k = 0;
    assert_int_equal(
        flow_retrieval_measure(&r, &d, SEARCH, req, strlen(req), exact, strlen(exact), &recall, &k),
        1);
    assert_true(recall == 1.0);
    assert_int_equal(k, 3);
    /* the same answer judged as alt's (k 2): its first two are the true two */
    assert_int_equal(
        flow_retrieval_measure(&r, &d, ALT, req, strlen(req), exact, strlen(exact), &recall, &k),
        1);
    assert_true(recall == 1.0);
    assert_int_equal(k, 2);
    /* an answer about another topic: none of the true three */
    const char *other = "{\"query\":\"coffee espresso beans\",\"max_num_results\":3}";
    char *wrong = page(r.store[SEARCH], other, 3);
    assert_int_equal(
        flow_retrieval_measure(&r, &d, SEARCH, req, strlen(req), wrong, strlen(wrong), &recall, &k),
        1);
    assert_true(recall == 0.0);
    /* nothing measured: another step, no query, no data array, not JSON */
    assert_int_equal(
        flow_retrieval_measure(&r, &d, PLAN, req, strlen(req), exact, strlen(exact), &recall, &k),
        0);
    const char *noq = "{\"max_num_results\":3}";
    assert_int_equal(
        flow_retrieval_measure(&r, &d, SEARCH, noq, strlen(noq), exact, strlen(exact), &recall, &k),
        0);
    const char *nodata = "{\"object\":\"list\"}";
    assert_int_equal(flow_retrieval_measure(&r, &d, SEARCH, req, strlen(req), nodata,
                                            strlen(nodata), &recall, &k),
                     0);
    assert_int_equal(flow_retrieval_measure(&r, &d, SEARCH, req, strlen(req), "{", 1, &recall, &k),
                     0);
    free(exact);
    free(wrong);
    flow_retrieval_release(&r);
}

/* A docs file that cannot be read is an error naming it. */
static void test_docs_errors(void **state)
{
    (void)state;
    struct flow_step_def st[NSTEPS];
    struct flow_def d;
    struct flow_retrieval r;
    char err[256];
    make_flow(st, &d);
    st[ALT].retrieval_docs = (char *)"/nonexistent/kb.jsonl";
    assert_true(flow_retrieval_init(&r, &d, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "/nonexistent/kb.jsonl"));
    flow_retrieval_release(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_steps),
        cmocka_unit_test(test_measure),
        cmocka_unit_test(test_docs_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
