#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/hdr.h"
#include "app/ranks.h"
#include "load/runner.h"

static void test_parse(void **state)
{
    struct shard s;
    char err[128];
    assert_int_equal(shard_parse("0/1", &s, err, sizeof(err)), 0);
    assert_int_equal(s.index, 0);
    assert_int_equal(s.count, 1);
    assert_int_equal(shard_parse("3/4", &s, err, sizeof(err)), 0);
    assert_int_equal(s.index, 3);
    assert_int_equal(s.count, 4);
    assert_int_equal(shard_parse("65535/65536", &s, err, sizeof(err)), 0);

    static const char *const bad[] = {"4/4",
                                      "1/0",
                                      "0/65537",
                                      "-1/4",
                                      "1/-4",
                                      "1",
                                      "1/",
                                      "/4",
                                      "a/b",
                                      "1/4x",
                                      "1 /4",
                                      "",
                                      "99999999999999999999/4"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        assert_int_equal(shard_parse(bad[i], &s, err, sizeof(err)), -EINVAL);
        assert_true(err[0] != '\0');
    }
    assert_int_equal(shard_parse("4/4", &s, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "shard '4/4': need 0 <= i < N <= 65536");
}

/* A process of shard s with `workers` workers: which of [0, n) each worker sends. */
static void mark_open_loop(const struct shard *s, uint32_t workers, uint64_t n, uint32_t *owner,
                           uint32_t tag)
{
    for (uint32_t w = 0; w < workers; w++) {
        /* what worker.c's next_arrival() does: walk the global schedule */
        for (uint64_t g = 0; g < n; g++) {
            if (shard_owns(s, g) && shard_worker(s, g, workers) == w) {
                assert_int_equal(owner[g], 0); /* disjoint */
                owner[g] = tag + w;
            }
        }
    }
}

static void test_shards_cover_the_single_run_disjointly(void **state)
{
    enum { N_ARRIVALS = 10007 };
    uint32_t *owner = ts_calloc(N_ARRIVALS, sizeof(*owner));
    assert_non_null(owner);
    /* three shards with different worker counts each */
    const uint32_t workers[] = {1, 4, 7};
    for (uint32_t i = 0; i < 3; i++) {
        struct shard s = {i, 3};
        mark_open_loop(&s, workers[i], N_ARRIVALS, owner, 1000 * (i + 1));
    }
    uint64_t per_shard[3] = {0}, per_worker[3][8] = {{0}};
    for (uint64_t g = 0; g < N_ARRIVALS; g++) {
        assert_true(owner[g] != 0); /* covered */
        uint32_t shard = owner[g] / 1000 - 1, w = owner[g] % 1000;
        assert_int_equal(shard, g % 3); /* global index % N == i */
        per_shard[shard]++;
        per_worker[shard][w]++;
    }
    assert_int_equal(per_shard[0], 3336);
    assert_int_equal(per_shard[1], 3336);
    assert_int_equal(per_shard[2], 3335);
    /* round-robin inside a shard: workers differ by at most one */
    for (uint32_t i = 0; i < 3; i++)
        for (uint32_t w = 0; w < workers[i]; w++)
            assert_true(per_worker[i][w] == per_shard[i] / workers[i] ||
                        per_worker[i][w] == per_shard[i] / workers[i] + 1);
    ts_free(owner);
}

static void test_whole_run_is_the_old_dealing(void **state)
{
    /* {0,0} and {0,1}: every index is ours and goes to worker index % workers */
    const struct shard whole[] = {{0, 0}, {0, 1}};
    for (size_t k = 0; k < 2; k++) {
        assert_int_equal(shard_n(&whole[k]), 1);
        for (uint64_t g = 0; g < 1000; g++) {
            assert_true(shard_owns(&whole[k], g));
            assert_int_equal(shard_worker(&whole[k], g, 6), g % 6);
            assert_int_equal(shard_global(&whole[k], g), g);
        }
    }
}

static void test_users_and_closed_loop_indexes(void **state)
{
    enum { USERS = 1000, N = 4 };
    uint8_t seen[USERS] = {0};
    const uint32_t workers[N] = {3, 1, 2, 5};
    for (uint32_t i = 0; i < N; i++) {
        struct shard s = {i, N};
        for (uint32_t w = 0; w < workers[i]; w++) {
            /* worker.c's start_users() loop */
            uint64_t step = (uint64_t)shard_n(&s) * workers[i];
            for (uint64_t u = shard_global(&s, w); u < USERS; u += step) {
                assert_true(shard_owns(&s, u));
                assert_int_equal(shard_worker(&s, u, workers[i]), w);
                assert_int_equal(seen[u], 0);
                seen[u] = 1;
            }
        }
    }
    for (uint32_t u = 0; u < USERS; u++)
        assert_int_equal(seen[u], 1);

    /* closed-loop request indexes: shard i's k-th is k*N + i, disjoint, and
     * the shards' requests under a cap of 10 number exactly 0..9 */
    uint8_t idx[10] = {0};
    for (uint32_t i = 0; i < N; i++) {
        struct shard s = {i, N};
        for (uint64_t k = 0;; k++) {
            uint64_t g = shard_global(&s, k);
            if (g >= 10)
                break;
            assert_int_equal(idx[g], 0);
            idx[g] = 1;
        }
    }
    for (int g = 0; g < 10; g++)
        assert_int_equal(idx[g], 1);
}

/* ---- merging results ---- */

static void add_ok(struct run_stats *s, uint64_t ttft_ms, uint64_t e2el_ms, uint32_t tokens)
{
    struct req_record r;
    memset(&r, 0, sizeof(r));
    r.outcome = REQ_OK;
    r.http_status = 200;
    r.flags = REQF_STREAM;
    r.intended_ns = 1000 * TS_NS_PER_MS;
    r.start_ns = r.intended_ns;
    r.first_chunk_ns = r.first_token_ns = r.intended_ns + ttft_ms * TS_NS_PER_MS;
    r.last_chunk_ns = r.end_ns = r.intended_ns + e2el_ms * TS_NS_PER_MS;
    r.output_tokens = r.client_tokens = r.content_chunks = r.choice_chunks = tokens;
    r.usage_prompt_tokens = r.usage_completion_tokens = -1;
    r.prompt_tokens = 100;
    run_stats_add_record(s, &r, NULL);
}

static void make_result(struct runner_result *r, size_t npoints)
{
    memset(r, 0, sizeof(*r));
    assert_int_equal(run_stats_new(&r->total), 0);
    r->timeline = ts_calloc(npoints, sizeof(*r->timeline));
    assert_non_null(r->timeline);
    r->ntimeline = npoints;
    for (size_t i = 0; i < npoints; i++)
        r->timeline[i].t_s = (double)(i + 1);
}

/* What rank 0 does with another rank's result: encode b, add it to a. */
static void merge_rank(struct runner_result *a, const struct runner_result *b)
{
    char *text = ranks_result_encode(b, NULL);
    assert_non_null(text);
    struct ranks_merger m;
    char err[128] = "";
    assert_int_equal(ranks_merger_init(&m, a), 0);
    assert_int_equal(ranks_merger_add(&m, text, strlen(text), err, sizeof(err)), 0);
    ranks_merger_finish(&m, 0);
    free(text);
}

static void test_merger_is_exact(void **state)
{
    struct runner_result a, b;
    struct run_stats *single;
    assert_int_equal(run_stats_new(&single), 0);
    make_result(&a, 2);
    make_result(&b, 3);
    for (uint64_t i = 0; i < 50; i++) {
        add_ok(a.total, 100 + i, 1000 + 10 * i, 50);
        add_ok(single, 100 + i, 1000 + 10 * i, 50);
    }
    for (uint64_t i = 0; i < 30; i++) {
        add_ok(b.total, 400 + 7 * i, 3000 + i, 20);
        add_ok(single, 400 + 7 * i, 3000 + i, 20);
    }
    a.sent = 50;
    b.sent = 31;
    a.duration_s = 2.0;
    b.duration_s = 2.5;
    b.end_cut = true;
    a.timeline[0] = (struct runner_point){.t_s = 1,
                                          .sent = 20,
                                          .completed = 10,
                                          .chunks = 100,
                                          .ttft_p50_ms = 100,
                                          .ttft_p99_ms = 150,
                                          .lag_p99_ms = 1};
    a.timeline[1] = (struct runner_point){.t_s = 2, .sent = 30, .completed = 40, .chunks = 600};
    b.timeline[0] = (struct runner_point){.t_s = 1.002,
                                          .sent = 10,
                                          .completed = 30,
                                          .chunks = 50,
                                          .ttft_p50_ms = 500,
                                          .ttft_p99_ms = 900,
                                          .lag_p99_ms = 3};
    b.timeline[2] = (struct runner_point){.t_s = 3, .chunks = 7};

    merge_rank(&a, &b);

    /* histograms and counters: exactly one process's */
    assert_int_equal(a.total->requests, 80);
    assert_int_equal(a.total->outcomes[REQ_OK], single->outcomes[REQ_OK]);
    assert_int_equal(a.total->output_tokens, 50 * 50 + 30 * 20);
    for (int k = 0; k < STAT_METRIC_COUNT; k++) {
        assert_int_equal(hdr_total_count(a.total->hist[k]), hdr_total_count(single->hist[k]));
        for (double p = 1; p <= 100; p += 7.5)
            assert_int_equal(hdr_value_at_percentile(a.total->hist[k], p),
                             hdr_value_at_percentile(single->hist[k], p));
    }
    assert_int_equal(a.sent, 81);
    assert_true(a.duration_s == 2.5);
    assert_true(a.end_cut);
    assert_false(a.interrupted);
    /* the timeline: point by point */
    assert_int_equal(a.ntimeline, 3);
    assert_int_equal(a.timeline[0].sent, 30);
    assert_int_equal(a.timeline[0].completed, 40);
    assert_int_equal(a.timeline[0].chunks, 150);
    assert_true(a.timeline[0].t_s == 1.002);
    /* p50: (100*10 + 500*30) / 40; p99 and lag: the largest */
    assert_true(a.timeline[0].ttft_p50_ms == 400);
    assert_true(a.timeline[0].ttft_p99_ms == 900);
    assert_true(a.timeline[0].lag_p99_ms == 3);
    assert_int_equal(a.timeline[1].chunks, 600);
    assert_int_equal(a.timeline[2].chunks, 7);
    assert_true(a.timeline[2].t_s == 3);
    /* the peak rate: 600 chunks over the second from 1.002 to 2 */
    assert_true(a.peak_output_tps > 601.2 && a.peak_output_tps < 601.21);

    runner_result_release(&a);
    runner_result_release(&b);
    run_stats_free(single);
}

/* A class of a scenario run: one flow step, two intents. */
static void make_class(struct runner_class_result *c, uint64_t base)
{
    memset(c, 0, sizeof(*c));
    assert_int_equal(run_stats_new(&c->stats), 0);
    c->steps = ts_calloc(1, sizeof(*c->steps));
    assert_non_null(c->steps);
    c->nsteps = 1;
    assert_int_equal(run_stats_new(&c->steps[0]), 0);
    assert_int_equal(hdr_new_latency(&c->iter_latency), 0);
    c->intent_sent = ts_calloc(2, sizeof(*c->intent_sent));
    assert_non_null(c->intent_sent);
    c->nintents = 2;
    for (uint64_t i = 0; i < base; i++) {
        add_ok(c->stats, 100 + i, 1000 + i, 10);
        add_ok(c->steps[0], 50 + i, 500 + i, 5);
        assert_int_equal(hdr_record(c->iter_latency, (int64_t)(2000 + i) * 1000), 0);
    }
    c->iterations = base;
    c->iter_outcome[0] = base - 1;
    c->iter_outcome[2] = 1;
    c->sessions = base / 2;
    c->intent_sent[0] = base;
    c->intent_sent[1] = 2 * base;
    c->perturb_sent[3] = base;
    c->sent = base + 1;
    c->with_prefix = 3;
    c->trimmed = 1;
}

/* MPI ranks' scenario classes are added class by class, step by step. */
static void test_merger_adds_classes(void **state)
{
    struct runner_result a, b;
    make_result(&a, 1);
    make_result(&b, 1);
    a.classes = ts_calloc(2, sizeof(*a.classes));
    b.classes = ts_calloc(2, sizeof(*b.classes));
    assert_non_null(a.classes);
    assert_non_null(b.classes);
    a.nclasses = b.nclasses = 2;
    make_class(&a.classes[0], 10);
    make_class(&a.classes[1], 4);
    make_class(&b.classes[0], 6);
    make_class(&b.classes[1], 8);
    merge_rank(&a, &b);
    const struct runner_class_result *c0 = &a.classes[0], *c1 = &a.classes[1];
    assert_int_equal(c0->stats->requests, 16);
    assert_int_equal(c1->stats->requests, 12);
    assert_int_equal(c0->steps[0]->requests, 16);
    assert_int_equal(c0->steps[0]->output_tokens, 16 * 5);
    assert_int_equal(hdr_total_count(c0->iter_latency), 16);
    assert_int_equal(hdr_max(c1->iter_latency) / 1000, 2007);
    assert_int_equal(c0->iterations, 16);
    assert_int_equal(c0->iter_outcome[0], 14);
    assert_int_equal(c0->iter_outcome[2], 2);
    assert_int_equal(c1->sessions, 2 + 4);
    assert_int_equal(c1->intent_sent[1], 8 + 16);
    assert_int_equal(c0->perturb_sent[3], 16);
    assert_int_equal(c0->sent, 18);
    assert_int_equal(c1->with_prefix, 6);
    assert_int_equal(c1->trimmed, 2);

    /* a rank with other classes is refused */
    char *text = ranks_result_encode(&b, NULL);
    assert_non_null(text);
    struct ranks_merger m;
    char err[128] = "";
    struct runner_result one;
    make_result(&one, 1);
    one.classes = ts_calloc(1, sizeof(*one.classes));
    assert_non_null(one.classes);
    one.nclasses = 1;
    make_class(&one.classes[0], 2);
    assert_int_equal(ranks_merger_init(&m, &one), 0);
    assert_int_equal(ranks_merger_add(&m, text, strlen(text), err, sizeof(err)), TS_PARSE);
    assert_string_equal(err, "bad result: 2 classes, this rank has 1");
    ranks_merger_release(&m);
    free(text);
    runner_result_release(&a);
    runner_result_release(&b);
    runner_result_release(&one);
}

static void test_merger_rejects_bad_input(void **state)
{
    struct runner_result a;
    make_result(&a, 1);
    struct ranks_merger m;
    char err[128] = "";
    assert_int_equal(ranks_merger_init(&m, &a), 0);
    assert_int_equal(ranks_merger_add(&m, "{", 1, err, sizeof(err)), TS_PARSE);
    assert_true(strncmp(err, "bad result:", 11) == 0);
    const char *no_dist = "{\"schema\":\"tokenstorm.result/1\"}";
    assert_int_equal(ranks_merger_add(&m, no_dist, strlen(no_dist), err, sizeof(err)), TS_PARSE);
    assert_string_equal(err, "bad result: no dist section");
    ranks_merger_release(&m);
    ranks_merger_release(&m); /* twice is fine */
    assert_int_equal(a.total->requests, 0);
    runner_result_release(&a);
}

static void test_launch_detection(void **state)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS",
                                       "PMIX_RANK", "TOKENSTORM_MPI"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
    uint32_t size = 99;
    assert_false(ranks_launched(&size));
    assert_int_equal(size, 0);
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    assert_true(ranks_launched(&size));
    assert_int_equal(size, 4);
    setenv("TOKENSTORM_MPI", "0", 1);
    assert_false(ranks_launched(&size));
    unsetenv("TOKENSTORM_MPI");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    setenv("SLURM_STEP_NUM_TASKS", "16", 1);
    assert_true(ranks_launched(&size));
    assert_int_equal(size, 16);
    unsetenv("SLURM_STEP_NUM_TASKS");
    setenv("PMIX_RANK", "0", 1);
    assert_true(ranks_launched(&size));
    assert_int_equal(size, 0);
    unsetenv("PMIX_RANK");

    /* a single process: no group, whatever the build */
    struct ranks_group *g = (struct ranks_group *)&size;
    char err[256] = "";
    int argc = 1;
    char *args[] = {"x", NULL}, **argv = args;
    assert_int_equal(ranks_group_join(&g, &argc, &argv, err, sizeof(err)), 0);
    assert_null(g);
    assert_int_equal(ranks_group_rank(NULL), 0);
    assert_int_equal(ranks_group_size(NULL), 1);
    assert_int_equal(ranks_group_shard(NULL).count, 0);
    setenv("OMPI_COMM_WORLD_SIZE", "1", 1); /* mpirun -n 1 is a single process too */
    assert_int_equal(ranks_group_join(&g, &argc, &argv, err, sizeof(err)), 0);
    assert_null(g);
    if (!ranks_mpi_built()) {
        /* started by mpirun -n 2 without MPI: refuse rather than run the load twice */
        setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
        assert_int_equal(ranks_group_join(&g, &argc, &argv, err, sizeof(err)), -ENOTSUP);
        assert_null(g);
        assert_non_null(strstr(err, "-Dmpi=enabled"));
        assert_non_null(strstr(err, "--shard"));
    }
    unsetenv("OMPI_COMM_WORLD_SIZE");
}

static void test_start_at(void **state)
{
    uint64_t t;
    char err[200] = "";
    assert_int_equal(start_at_parse("2026-01-01T00:00:00Z", &t, err, sizeof(err)), 0);
    assert_int_equal(t, 1767225600ull * TS_NS_PER_S);
    assert_int_equal(start_at_parse("2026-01-01T00:00:00.25+00:00", &t, err, sizeof(err)), 0);
    assert_int_equal(t, 1767225600ull * TS_NS_PER_S + 250 * TS_NS_PER_MS);
    assert_int_equal(start_at_parse("1767225600.5", &t, err, sizeof(err)), 0);
    assert_int_equal(t, 1767225600ull * TS_NS_PER_S + 500 * TS_NS_PER_MS);
    static const char *const bad[] = {"",
                                      "tomorrow",
                                      "-5",
                                      "+5",
                                      "12x",
                                      "2026-01-01T00:00:00",
                                      "2026-01-01T00:00:00+02:00",
                                      "4102444800" /* 2100 */};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        assert_int_equal(start_at_parse(bad[i], &t, err, sizeof(err)), -EINVAL);
        assert_true(err[0] != '\0');
    }
    assert_non_null(strstr(err, "more than 24 hours ahead"));

    /* in the past: no wait, the lateness comes back */
    uint64_t late = start_at_wait(ts_wall_ns() - 2 * TS_NS_PER_S);
    assert_true(late >= 2 * TS_NS_PER_S && late < 10 * TS_NS_PER_S);
    assert_int_equal(start_at_wait(0), 0);
    /* 150 ms ahead: waits until then on the wall clock */
    uint64_t at = ts_wall_ns() + 150 * TS_NS_PER_MS;
    uint64_t t0 = ts_now_ns();
    assert_int_equal(start_at_wait(at), 0);
    uint64_t waited = ts_now_ns() - t0;
    assert_true(ts_wall_ns() >= at);
    assert_true(waited >= 140 * TS_NS_PER_MS && waited < 2 * TS_NS_PER_S);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_shards_cover_the_single_run_disjointly),
        cmocka_unit_test(test_whole_run_is_the_old_dealing),
        cmocka_unit_test(test_users_and_closed_loop_indexes),
        cmocka_unit_test(test_merger_is_exact),
        cmocka_unit_test(test_merger_adds_classes),
        cmocka_unit_test(test_merger_rejects_bad_input),
        cmocka_unit_test(test_launch_detection),
        cmocka_unit_test(test_start_at),
    };
    return cmocka_run_group_tests_name("shard", tests, NULL, NULL);
}
