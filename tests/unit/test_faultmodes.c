/* The fault-mode catalogue: the built-in one, users' additions and
 * replacements, validation with positions, the timeout placeholder. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "chaos/faultmodes.c"

#define MODE(extra)                                                                                \
    "version: 1\nmodes:\n  - id: m1\n    title: T\n    layer: service\n    hits: model\n"          \
    "    risk: 0.5\n    when: [kind:chat_model]\n    via: proxy\n"                                 \
    "    fault: {type: sse_ttft_delay, delay: \"{over_timeout:1s}\"}\n    for: 5s\n"               \
    "    probes: [{slo: \"error_rate<1%\"}]\n" extra

static int add(struct fault_catalogue *c, const char *text, char *err)
{
    return fault_catalogue_add(c, text, strlen(text), "c.yaml", err, 512);
}

static void test_builtin_loads_and_validates(void **state)
{
    struct fault_catalogue c = {0};
    char err[512] = "";
    assert_int_equal(fault_catalogue_builtin(&c, err, sizeof(err)), 0);
    assert_true(c.n >= 12);
    int layers[3] = {0};
    for (size_t i = 0; i < c.n; i++) {
        const struct fault_mode *m = &c.modes[i];
        assert_true(m->risk >= 0.1 && m->risk <= 0.9);
        assert_true(m->n_when > 0 && m->n_probes > 0 && m->for_ns > 0);
        layers[0] += !strcmp(m->layer, "service");
        layers[1] += !strcmp(m->layer, "middleware");
        layers[2] += !strcmp(m->layer, "infrastructure");
    }
    assert_true(layers[0] && layers[1] && layers[2]);
    fault_catalogue_release(&c);
}

static void test_placeholder_and_replace(void **state)
{
    struct fault_catalogue c = {0};
    char err[512] = "", delay[32];
    assert_int_equal(add(&c, MODE(""), err), 0);
    assert_int_equal(c.n, 1);
    json_t *spec = fault_mode_spec(&c.modes[0], 800, delay, sizeof(delay));
    assert_string_equal(json_string_value(json_object_get(spec, "delay")), "1000ms");
    assert_string_equal(delay, "1000ms");
    json_decref(spec);
    spec = fault_mode_spec(&c.modes[0], 0, delay, sizeof(delay));
    assert_string_equal(json_string_value(json_object_get(spec, "delay")), "1s");
    json_decref(spec);
    /* the same id again replaces it */
    const char *again = MODE("");
    char text[2048];
    snprintf(text, sizeof(text), "%s", again);
    char *r = strstr(text, "risk: 0.5");
    memcpy(r, "risk: 0.2", 9);
    assert_int_equal(add(&c, text, err), 0);
    assert_int_equal(c.n, 1);
    assert_true(c.modes[0].risk == 0.2);
    fault_catalogue_release(&c);
}

static void test_errors_name_where(void **state)
{
    static const struct {
        const char *from, *to, *why;
    } cases[] = {
        {"risk: 0.5", "risk: 0.95", "c.yaml:7:11: 'risk'"},
        {"layer: service", "layer: network", "layer must be service"},
        {"hits: model", "hits: gpu", "hits must be"},
        {"via: proxy", "via: ssh", "via must be proxy or sim"},
        {"[kind:chat_model]", "[chat_model]", "when 'chat_model' must be flag:"},
        {"type: sse_ttft_delay", "type: sse_nope", "c.yaml:10:13: mode 'm1': fault:"},
        {"error_rate<1%", "error_rate<<1%", "probe 'error_rate<<1%'"},
        {"id: m1", "id: M 1", "id must be lower-case"},
        {"title: T", "titel: T", "did you mean 'title'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[2048];
        snprintf(text, sizeof(text), "%s", MODE(""));
        char *p = strstr(text, cases[i].from);
        assert_non_null(p);
        char out[2048];
        snprintf(out, sizeof(out), "%.*s%s%s", (int)(p - text), text, cases[i].to,
                 p + strlen(cases[i].from));
        struct fault_catalogue c = {0};
        char err[512] = "";
        assert_int_not_equal(add(&c, out, err), 0);
        if (!strstr(err, cases[i].why))
            fail_msg("case %zu: '%s' does not say '%s'", i, err, cases[i].why);
        assert_int_equal(c.n, 0);
        fault_catalogue_release(&c);
    }
    struct fault_catalogue c = {0};
    char err[512];
    assert_int_not_equal(add(&c, "version: 2\nmodes: []\n", err), 0);
    assert_int_not_equal(add(&c, "", err), 0);
    fault_catalogue_release(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_loads_and_validates),
        cmocka_unit_test(test_placeholder_and_replace),
        cmocka_unit_test(test_errors_name_where),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
