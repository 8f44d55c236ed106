/*
 * test_sim_admin.c - the simulator's admin fault specs (sim/admin.h) and the
 * engine hook they rely on to end a stall early. The endpoints themselves
 * are tested against the real binary in tests/integration/chaos.test.mjs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/clock.h"
#include "sim/admin.h"
#include "sim/engine.h"

static int parse(const char *text, struct sim_fault *f, char *err, size_t n)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    assert_non_null(j);
    int rc = sim_fault_parse_json(j, f, err, n);
    json_decref(j);
    return rc;
}

static void test_parse_ok(void **state)
{
    (void)state;
    struct sim_fault f;
    char err[256];
    assert_int_equal(parse("{\"type\":\"kv_shrink\",\"to_tokens\":40000,\"over\":\"30s\"}", &f, err,
                           sizeof(err)),
                     0);
    assert_int_equal(f.type, SIM_FAULT_KV_SHRINK);
    assert_int_equal(f.to_tokens, 40000);
    assert_int_equal(f.over_ns, 30 * TS_NS_PER_S);
    assert_int_equal(parse("{\"type\":\"kv_shrink\",\"to_tokens\":5}", &f, err, sizeof(err)), 0);
    assert_int_equal(f.over_ns, 0);
    assert_int_equal(parse("{\"type\":\"stall\",\"for\":\"2s\"}", &f, err, sizeof(err)), 0);
    assert_int_equal(f.type, SIM_FAULT_STALL);
    assert_int_equal(f.for_ns, 2 * TS_NS_PER_S);
    assert_int_equal(
        parse("{\"type\":\"cold_start\",\"for\":1.5,\"name\":\"x\"}", &f, err, sizeof(err)), 0);
    assert_int_equal(f.type, SIM_FAULT_COLD_START);
    assert_int_equal(f.for_ns, 1500 * TS_NS_PER_MS);
    assert_int_equal(parse("{\"type\":\"error_rate\",\"rate\":0.2}", &f, err, sizeof(err)), 0);
    assert_int_equal(f.type, SIM_FAULT_ERROR_RATE);
    assert_true(f.rate == 0.2);
    assert_int_equal(f.status, 500);
    assert_int_equal(
        parse("{\"type\":\"error_rate\",\"rate\":1,\"status\":429}", &f, err, sizeof(err)), 0);
    assert_int_equal(f.status, 429);
    assert_string_equal(sim_fault_type_name(SIM_FAULT_COLD_START), "cold_start");
    assert_string_equal(sim_fault_type_name(SIM_FAULT_TYPE_COUNT), "unknown");
}

static void expect_err(const char *text, const char *msg)
{
    struct sim_fault f;
    char err[256] = "";
    assert_int_equal(parse(text, &f, err, sizeof(err)), -EINVAL);
    if (!strstr(err, msg))
        fail_msg("'%s': got '%s', expected '%s'", text, err, msg);
}

static void test_parse_errors(void **state)
{
    (void)state;
    expect_err("[]", "JSON object");
    expect_err("{}", "missing \"type\"");
    expect_err("{\"type\":\"stal\",\"for\":\"1s\"}",
               "unknown simulator fault type 'stal' (did you mean 'stall'?)");
    expect_err("{\"type\":\"stall\",\"fr\":\"1s\"}", "unknown key 'fr' (did you mean 'for'?)");
    expect_err("{\"type\":\"stall\"}", "\"for\" must be a duration > 0");
    expect_err("{\"type\":\"stall\",\"for\":\"0s\"}", "\"for\" must be a duration > 0");
    expect_err("{\"type\":\"cold_start\",\"for\":\"soon\"}", "\"for\" must be a duration");
    expect_err("{\"type\":\"kv_shrink\"}", "\"to_tokens\" must be a positive integer");
    expect_err("{\"type\":\"kv_shrink\",\"to_tokens\":0}", "positive integer");
    expect_err("{\"type\":\"kv_shrink\",\"to_tokens\":10,\"over\":\"x\"}", "\"over\" must be");
    expect_err("{\"type\":\"error_rate\",\"rate\":1.5}", "0..1");
    expect_err("{\"type\":\"error_rate\"}", "0..1");
    expect_err("{\"type\":\"error_rate\",\"rate\":0.5,\"status\":200}", "400..599");
    expect_err("{\"type\":\"error_rate\",\"rate\":0.5,\"for\":\"1s\"}", "unknown key 'for'");
}

/* ---- the engine: a stall ended early releases the step it held back ---- */

static int tokens;
static void on_token(void *ctx, void *req, uint32_t index, uint64_t now)
{
    (void)ctx;
    (void)req;
    (void)index;
    (void)now;
    tokens++;
}
static void on_finish(void *ctx, void *req, uint64_t now)
{
    (void)ctx;
    (void)req;
    (void)now;
}

static void test_stall_ended_early(void **state)
{
    (void)state;
    struct sim_profile p;
    assert_int_equal(sim_profile_preset("tiny", &p), 0);
    p.noise = false;
    static const struct sim_engine_ops ops = {.on_token = on_token, .on_finish = on_finish};
    struct sim_engine *e = sim_engine_new(&p, &ops, NULL);
    assert_non_null(e);
    int req;
    uint64_t t0 = 1000 * TS_NS_PER_S, stall = t0 + 10 * TS_NS_PER_S;
    sim_engine_stall_until(e, stall);
    assert_int_equal(sim_engine_submit(e, &req, 16, 4, t0), 0);
    uint64_t d = sim_engine_step(e, t0);
    /* the first step starts in the stall: due at its end plus the step */
    uint64_t due = sim_engine_next_due(e);
    assert_true(due > stall);
    uint64_t step = due - stall;
    assert_int_equal(d, due - t0);
    /* the stall ends at t0 + 1 s: the step is due one step after that */
    sim_engine_stall_until(e, t0 + TS_NS_PER_S);
    assert_int_equal(sim_engine_next_due(e), t0 + TS_NS_PER_S + step);
    /* ended altogether: due one step after its start */
    sim_engine_stall_until(e, 0);
    assert_int_equal(sim_engine_next_due(e), t0 + step);
    tokens = 0;
    (void)sim_engine_step(e, t0 + step);
    assert_true(sim_engine_next_due(e) > t0 + step);
    sim_engine_free(e);
}

/* A stall set during a step that started before it does not move the step's own end. */
static void test_stall_over_running_step(void **state)
{
    (void)state;
    struct sim_profile p;
    assert_int_equal(sim_profile_preset("tiny", &p), 0);
    p.noise = false;
    static const struct sim_engine_ops ops = {.on_token = on_token, .on_finish = on_finish};
    struct sim_engine *e = sim_engine_new(&p, &ops, NULL);
    assert_non_null(e);
    int req;
    uint64_t t0 = 1000 * TS_NS_PER_S;
    assert_int_equal(sim_engine_submit(e, &req, 16, 4, t0), 0);
    uint64_t d = sim_engine_step(e, t0);
    assert_int_equal(sim_engine_next_due(e), t0 + d);
    sim_engine_stall_until(e, t0 + 5 * TS_NS_PER_S);
    assert_int_equal(sim_engine_next_due(e), t0 + 5 * TS_NS_PER_S);
    sim_engine_stall_until(e, t0 + 2 * TS_NS_PER_S);
    assert_int_equal(sim_engine_next_due(e), t0 + 2 * TS_NS_PER_S);
    sim_engine_stall_until(e, 0);
    assert_int_equal(sim_engine_next_due(e), t0 + d);
    sim_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_ok),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_stall_ended_early),
        cmocka_unit_test(test_stall_over_running_step),
    };
    return cmocka_run_group_tests_name("sim_admin", tests, NULL, NULL);
}
