/*
 * test_ws_faults.c - the WebSocket frame faults' decisions in virtual time:
 * which Realtime events each fault targets and counts, the verdict per
 * message (copies, time, close), order kept under delays and stalls, the
 * per-response restart at response.created; the client's messages
 * (direction upstream: any message by default, no restart, each direction
 * its own tap); the event-type reader; and the ws_* specs of fault.c
 * (defaults, direction, errors, the canonical JSON).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>

#include "../../src/chaos/ws_faults.c"

#define MS 1000000ull

static struct fault *parse(const char *spec)
{
    json_error_t je;
    json_t *j = json_loads(spec, 0, &je);
    assert_non_null(j);
    struct fault f;
    char err[256];
    int rc = fault_parse_json(j, &f, err, sizeof err);
    json_decref(j);
    if (rc)
        fail_msg("%s: %s", spec, err);
    struct fault *h = fault_new(&f);
    assert_non_null(h);
    return h;
}

static void tap_dir(struct ws_tap *t, enum fault_direction dir, const char *spec1,
                    const char *spec2)
{
    struct fault *fs[2];
    size_t n = 0;
    if (spec1)
        fs[n++] = parse(spec1);
    if (spec2)
        fs[n++] = parse(spec2);
    ws_tap_init(t, fs, n, 42, dir);
    for (size_t i = 0; i < n; i++)
        fault_unref(fs[i]);
}

static void tap_of(struct ws_tap *t, const char *spec1, const char *spec2)
{
    tap_dir(t, FAULT_DIR_DOWNSTREAM, spec1, spec2);
}

static const char *const D = "response.output_text.delta";

static void test_event_type(void **state)
{
    (void)state;
    char t[WS_EVENT_TYPE_MAX];
    const char *m = "{\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}";
    assert_string_equal(ws_event_type(m, strlen(m), t), D);
    m = "{\"type\":7}";
    assert_string_equal(ws_event_type(m, strlen(m), t), "");
    m = "[\"type\"]";
    assert_string_equal(ws_event_type(m, strlen(m), t), "");
    m = "{\"type\":\"a\",\"type\":\"b\"}"; /* duplicate keys refused */
    assert_string_equal(ws_event_type(m, strlen(m), t), "");
    m = "{\"type\":\"a\\u0000b\"}";
    assert_string_equal(ws_event_type(m, strlen(m), t), "");
    char big[200];
    snprintf(big, sizeof big, "{\"type\":\"%0100d\"}", 0);
    assert_string_equal(ws_event_type(big, strlen(big), t), "");
    assert_string_equal(ws_event_type("{", 1, t), "");
    assert_string_equal(ws_event_type(NULL, 0, t), "");
}

static void test_drop_after_and_restart(void **state)
{
    (void)state;
    struct ws_tap t;
    tap_of(&t, "{\"name\":\"d\",\"type\":\"ws_drop\",\"after_events\":1}", NULL);
    assert_int_equal(ws_tap_message(&t, "response.created", 0).copies, 1);
    assert_int_equal(ws_tap_message(&t, D, 1).copies, 1);
    assert_int_equal(ws_tap_message(&t, D, 2).copies, 0); /* the second delta */
    assert_int_equal(ws_tap_message(&t, D, 3).copies, 1);
    assert_int_equal(ws_tap_message(&t, "response.done", 4).copies, 1);
    /* a new response counts again */
    assert_int_equal(ws_tap_message(&t, "response.created", 5).copies, 1);
    assert_int_equal(ws_tap_message(&t, "response.text.delta", 6).copies, 1);
    assert_int_equal(ws_tap_message(&t, "response.text.delta", 7).copies, 0);
    assert_int_equal(t.injected[WS_FT_DROP], 2);
    assert_int_equal(atomic_load(&t.f[WS_FT_DROP]->injected), 2);
    ws_tap_release(&t);
}

static void test_duplicate_rate_and_event(void **state)
{
    (void)state;
    struct ws_tap t;
    tap_of(&t, "{\"name\":\"d\",\"type\":\"ws_duplicate\",\"event\":\"response.done\"}", NULL);
    assert_int_equal(ws_tap_message(&t, D, 1).copies, 1);
    assert_int_equal(ws_tap_message(&t, "response.done", 2).copies, 2);
    ws_tap_release(&t);
    tap_of(&t, "{\"name\":\"d\",\"type\":\"ws_duplicate\",\"rate\":0.5}", NULL);
    unsigned twice = 0;
    for (int i = 0; i < 1000; i++)
        twice += ws_tap_message(&t, D, (uint64_t)i).copies == 2;
    assert_in_range(twice, 400, 600);
    ws_tap_release(&t);
}

static void test_delay_keeps_order(void **state)
{
    (void)state;
    struct ws_tap t;
    tap_of(&t, "{\"name\":\"j\",\"type\":\"ws_delay\",\"delay\":\"uniform:0ms-100ms\"}", NULL);
    uint64_t last = 0;
    bool later = false;
    for (uint64_t i = 0; i < 200; i++) {
        struct ws_verdict v = ws_tap_message(&t, i % 3 ? D : "session.updated", i * MS);
        assert_true(v.at >= last);
        assert_true(v.at >= i * MS);
        later |= v.at > i * MS + 10 * MS;
        last = v.at;
    }
    assert_true(later);
    assert_int_equal(t.injected[WS_FT_DELAY], 200); /* every message by default */
    ws_tap_release(&t);
}

static void test_truncate_swallows_the_response(void **state)
{
    (void)state;
    struct ws_tap t;
    tap_of(&t, "{\"name\":\"t\",\"type\":\"ws_truncate\",\"after_events\":2}", NULL);
    (void)ws_tap_message(&t, "response.created", 0);
    assert_int_equal(ws_tap_message(&t, D, 1).copies, 1);
    assert_int_equal(ws_tap_message(&t, D, 2).copies, 1);
    assert_int_equal(ws_tap_message(&t, D, 3).copies, 0);
    assert_int_equal(ws_tap_message(&t, "response.output_text.done", 4).copies, 0);
    assert_int_equal(ws_tap_message(&t, "response.done", 5).copies, 0);
    assert_int_equal(ws_tap_message(&t, "response.created", 6).copies, 1);
    assert_int_equal(ws_tap_message(&t, D, 7).copies, 1);
    ws_tap_release(&t);
}

static void test_close_with_code(void **state)
{
    (void)state;
    struct ws_tap t;
    tap_of(
        &t,
        "{\"name\":\"c\",\"type\":\"ws_close\",\"after_events\":1,\"code\":4001,\"text\":\"bye\"}",
        "{\"name\":\"j\",\"type\":\"ws_delay\",\"delay\":\"10ms\"}");
    struct ws_verdict v = ws_tap_message(&t, D, 0);
    assert_int_equal(v.copies, 1);
    assert_int_equal(v.at, 10 * MS);
    v = ws_tap_message(&t, D, 1 * MS);
    assert_int_equal(v.copies, 0);
    assert_true(v.close);
    assert_int_equal(v.code, 4001);
    assert_string_equal(v.reason, "bye");
    assert_true(v.at >= 10 * MS); /* after what was sent before it */
    v = ws_tap_message(&t, "response.done", 2 * MS);
    assert_int_equal(v.copies, 0);
    assert_false(v.close);
    ws_tap_release(&t);
    tap_of(&t, "{\"name\":\"c\",\"type\":\"ws_close\"}", NULL);
    assert_int_equal(ws_tap_message(&t, "session.created", 0).copies, 1);
    v = ws_tap_message(&t, D, 0);
    assert_true(v.close);
    assert_int_equal(v.code, 1011);
    ws_tap_release(&t);
}

static void test_stall_once_per_response(void **state)
{
    (void)state;
    struct ws_tap t;
    tap_of(&t, "{\"name\":\"s\",\"type\":\"ws_stall\",\"after_events\":1,\"delay\":\"500ms\"}",
           NULL);
    assert_int_equal(ws_tap_message(&t, D, 0).at, 0);
    assert_int_equal(ws_tap_message(&t, D, 1 * MS).at, 501 * MS);
    assert_int_equal(ws_tap_message(&t, D, 2 * MS).at, 501 * MS); /* held until then */
    assert_int_equal(ws_tap_message(&t, D, 600 * MS).at, 600 * MS);
    assert_int_equal(t.injected[WS_FT_STALL], 1);
    ws_tap_release(&t);
}

/* Upstream: the client's messages, all of them by default, counted over
 * the connection (response.created is the server's: nothing restarts). */
static void test_upstream(void **state)
{
    (void)state;
    struct ws_tap t;
    /* a downstream fault (the default) is not in the upstream tap, and back */
    tap_dir(&t, FAULT_DIR_UPSTREAM, "{\"name\":\"d\",\"type\":\"ws_drop\"}", NULL);
    assert_false(ws_tap_active(&t));
    ws_tap_release(&t);
    const char *up = "{\"name\":\"d\",\"type\":\"ws_drop\",\"after_events\":1,"
                     "\"direction\":\"upstream\"}";
    tap_dir(&t, FAULT_DIR_DOWNSTREAM, up, NULL);
    assert_false(ws_tap_active(&t));
    ws_tap_release(&t);
    tap_dir(&t, FAULT_DIR_UPSTREAM, up, NULL);
    assert_int_equal(ws_tap_message(&t, "session.update", 0).copies, 1);
    assert_int_equal(ws_tap_message(&t, "response.created", 1).copies, 0); /* no restart */
    assert_int_equal(ws_tap_message(&t, "response.create", 2).copies, 1);
    assert_int_equal(t.injected[WS_FT_DROP], 1);
    ws_tap_release(&t);
    /* both: each direction counts apart, the fault adds both up */
    struct fault *f = parse("{\"name\":\"c\",\"type\":\"ws_close\",\"after_events\":1,"
                            "\"code\":4002,\"direction\":\"both\"}");
    struct ws_tap dn;
    ws_tap_init(&t, &f, 1, 1, FAULT_DIR_UPSTREAM);
    ws_tap_init(&dn, &f, 1, 1, FAULT_DIR_DOWNSTREAM);
    assert_int_equal(ws_tap_message(&t, "response.create", 0).copies, 1);
    assert_int_equal(ws_tap_message(&dn, D, 0).copies, 1);
    assert_int_equal(ws_tap_message(&dn, "response.done", 1).copies, 1); /* not a delta */
    struct ws_verdict v = ws_tap_message(&t, "input_audio_buffer.append", 2);
    assert_true(v.close);
    assert_int_equal(v.code, 4002);
    assert_true(ws_tap_message(&dn, D, 3).close);
    assert_int_equal(atomic_load(&f->injected), 2);
    ws_tap_release(&t);
    ws_tap_release(&dn);
    fault_unref(f);
    /* a stall upstream: once per connection */
    tap_dir(&t, FAULT_DIR_UPSTREAM,
            "{\"name\":\"s\",\"type\":\"ws_stall\",\"delay\":\"100ms\",\"direction\":\"upstream\"}",
            NULL);
    assert_int_equal(ws_tap_message(&t, "response.create", 0).at, 100 * MS);
    assert_int_equal(ws_tap_message(&t, "response.created", 1 * MS).at, 100 * MS);
    assert_int_equal(ws_tap_message(&t, "response.create", 200 * MS).at, 200 * MS);
    ws_tap_release(&t);
}

static void test_specs(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"{\"name\":\"x\",\"type\":\"ws_close\",\"code\":1006}", "code"},
        {"{\"name\":\"x\",\"type\":\"ws_close\",\"code\":2000}", "code"},
        {"{\"name\":\"x\",\"type\":\"ws_close\",\"code\":\"1000\"}", "code"},
        {"{\"name\":\"x\",\"type\":\"ws_truncate\"}", "after_events"},
        {"{\"name\":\"x\",\"type\":\"ws_delay\"}", "delay"},
        {"{\"name\":\"x\",\"type\":\"ws_stall\",\"after_events\":1}", "delay"},
        {"{\"name\":\"x\",\"type\":\"ws_drop\",\"event\":\"Bad\"}", "event"},
        {"{\"name\":\"x\",\"type\":\"ws_drop\",\"event\":\"\"}", "event"},
        {"{\"name\":\"x\",\"type\":\"ws_drop\",\"code\":1000}", "does not apply"},
        {"{\"name\":\"x\",\"type\":\"ws_drop\",\"direction\":\"sideways\"}", "direction"},
        {"{\"name\":\"x\",\"type\":\"sse_truncate\",\"after_events\":1,\"event\":\"a\"}",
         "does not apply"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *j = json_loads(bad[i][0], 0, NULL);
        struct fault f;
        char err[256];
        assert_int_equal(fault_parse_json(j, &f, err, sizeof err), -EINVAL);
        if (!strstr(err, bad[i][1]))
            fail_msg("%s: %s", bad[i][0], err);
        json_decref(j);
    }
    /* the canonical JSON parses back to the same fault */
    struct fault *f =
        parse("{\"name\":\"c\",\"type\":\"ws_close\",\"after_events\":2,\"code\":4000,"
              "\"text\":\"t\",\"event\":\"response.done\"}");
    assert_int_equal(fault_type_family(f->type), FAULT_WS);
    json_t *o = fault_to_json(f, 0);
    assert_int_equal(json_integer_value(json_object_get(o, "code")), 4000);
    assert_string_equal(json_string_value(json_object_get(o, "event")), "response.done");
    struct fault g;
    char err[256];
    assert_int_equal(fault_parse_json(o, &g, err, sizeof err), 0);
    assert_int_equal(g.params.code, 4000);
    assert_string_equal(g.params.event, "response.done");
    json_decref(o);
    fault_unref(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_event_type),
        cmocka_unit_test(test_drop_after_and_restart),
        cmocka_unit_test(test_duplicate_rate_and_event),
        cmocka_unit_test(test_delay_keeps_order),
        cmocka_unit_test(test_truncate_swallows_the_response),
        cmocka_unit_test(test_close_with_code),
        cmocka_unit_test(test_stall_once_per_response),
        cmocka_unit_test(test_upstream),
        cmocka_unit_test(test_specs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
