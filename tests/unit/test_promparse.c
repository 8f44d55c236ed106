#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "telemetry/prom.h"
#include "telemetry/promparse.h"

/* Every sample as one line "name{a=v,b=w} value [ts]" and every TYPE as
 * "TYPE name type", so a test compares one string. */
struct collect {
    struct buf out;
    int stop_after; /* > 0: the nth sample returns -1234 */
    int samples;
};

static int on_sample(const struct promparse_sample *s, void *arg)
{
    struct collect *c = arg;
    int rc = buf_appendf(&c->out, "%.*s{", (int)s->name.len, s->name.p);
    for (size_t i = 0; !rc && i < s->nlabels; i++)
        rc = buf_appendf(&c->out, "%s%.*s=%.*s", i ? "," : "", (int)s->labels[i].name.len,
                         s->labels[i].name.p, (int)s->labels[i].value.len, s->labels[i].value.p);
    rc = rc ? rc : buf_appendf(&c->out, "} %g", s->value);
    if (!rc && s->has_timestamp)
        rc = buf_appendf(&c->out, " @%.0f", s->timestamp);
    rc = rc ? rc : buf_appendf(&c->out, " L%zu\n", s->line);
    assert_int_equal(rc, 0);
    if (++c->samples == c->stop_after)
        return -1234;
    return 0;
}

static int on_type(struct promparse_str name, enum promparse_type type, void *arg)
{
    struct collect *c = arg;
    assert_int_equal(
        buf_appendf(&c->out, "TYPE %.*s %s\n", (int)name.len, name.p, promparse_type_name(type)),
        0);
    return 0;
}

static const struct promparse_ops ops = {.on_sample = on_sample, .on_type = on_type};

static int parse(struct collect *c, const char *text, const struct promparse_limits *lim, char *err,
                 size_t errlen)
{
    buf_init(&c->out, 1 << 20);
    c->samples = 0;
    return promparse_text(text, strlen(text), lim, &ops, c, err, errlen);
}

static void test_vllm_like_text(void **state)
{
    const char *text = "# HELP vllm:num_requests_running Number of requests in the batch.\n"
                       "# TYPE vllm:num_requests_running gauge\n"
                       "vllm:num_requests_running{model_name=\"m\"} 3\n"
                       "\n"
                       "   # a plain comment\n"
                       "# TYPE vllm:time_to_first_token_seconds histogram\n"
                       "vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.1\"} 2\n"
                       "vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"m\",} 7\n"
                       "vllm:time_to_first_token_seconds_sum{model_name=\"m\"} 1.5e-1\n"
                       "up 1 1712345678000\n"
                       "nan_metric NaN\n"
                       "neg_inf -Inf\r\n"
                       "last\t 42";
    struct collect c = {0};
    char err[128] = "";
    assert_int_equal(parse(&c, text, NULL, err, sizeof(err)), 0);
    assert_string_equal(buf_cstr(&c.out),
                        "TYPE vllm:num_requests_running gauge\n"
                        "vllm:num_requests_running{model_name=m} 3 L3\n"
                        "TYPE vllm:time_to_first_token_seconds histogram\n"
                        "vllm:time_to_first_token_seconds_bucket{model_name=m,le=0.1} 2 L7\n"
                        "vllm:time_to_first_token_seconds_bucket{le=+Inf,model_name=m} 7 L8\n"
                        "vllm:time_to_first_token_seconds_sum{model_name=m} 0.15 L9\n"
                        "up{} 1 @1712345678000 L10\n"
                        "nan_metric{} nan L11\n"
                        "neg_inf{} -inf L12\n"
                        "last{} 42 L13\n");
    buf_release(&c.out);
}

/* What prom.h writes, promparse reads back: escapes included. */
static void test_round_trip_with_prom_writer(void **state)
{
    struct buf b;
    buf_init(&b, 1 << 16);
    const char *labels[] = {"model_name", "a\"b\\c\nd", "le", "0.5"};
    assert_int_equal(prom_header(&b, "x_total", "X.", "counter"), 0);
    assert_int_equal(prom_sample(&b, "x_total", labels, 2, 12.25), 0);
    struct collect c = {0};
    char err[128] = "";
    assert_int_equal(parse(&c, buf_cstr(&b), NULL, err, sizeof(err)), 0);
    assert_string_equal(buf_cstr(&c.out), "TYPE x_total counter\n"
                                          "x_total{model_name=a\"b\\c\nd,le=0.5} 12.25 L3\n");
    buf_release(&c.out);
    buf_release(&b);
}

static void test_openmetrics_bits(void **state)
{
    const char *text = "# TYPE foo unknown\n"
                       "# TYPE st stateset\n"
                       "foo_total 17.0 1520879607.789 # {trace_id=\"KOO5S4vxi0o\"} 0.67\n"
                       "bar 1 # {a=\"b\"} 2\n"
                       "# EOF\n"
                       "this is { not parsed\n";
    struct collect c = {0};
    char err[128] = "";
    assert_int_equal(parse(&c, text, NULL, err, sizeof(err)), 0);
    assert_string_equal(buf_cstr(&c.out), "TYPE foo untyped\n"
                                          "TYPE st stateset\n"
                                          "foo_total{} 17 @1520879608 L3\n"
                                          "bar{} 1 L4\n");
    buf_release(&c.out);
}

static void expect_error(const char *text, int code, const char *msg)
{
    struct collect c = {0};
    char err[160] = "";
    assert_int_equal(parse(&c, text, NULL, err, sizeof(err)), code);
    assert_string_equal(err, msg);
    buf_release(&c.out);
}

static void test_errors_name_line_and_column(void **state)
{
    expect_error("ok 1\nnovalue\n", TS_PARSE, "line 2, column 8: expected a blank and a value");
    expect_error("a 1x\n", TS_PARSE, "line 1, column 3: bad value '1x'");
    expect_error("a 1 2 3\n", TS_PARSE, "line 1, column 7: unexpected text after the value");
    expect_error("a{b=\"c} 1\n", TS_PARSE, "line 1, column 5: unterminated label value");
    expect_error("a{b=\"\\t\"} 1\n", TS_PARSE,
                 "line 1, column 6: invalid escape '\\t' in a label value");
    expect_error("a{b=\"1\",b=\"2\"} 1\n", TS_PARSE, "line 1, column 9: label 'b' given twice");
    expect_error("a{b \"1\"} 1\n", TS_PARSE, "line 1, column 5: expected '=' after a label name");
    expect_error("a{b=1} 1\n", TS_PARSE, "line 1, column 5: expected '\"' to open a label value");
    expect_error("a{b=\"1\" c=\"2\"} 1\n", TS_PARSE,
                 "line 1, column 9: expected ',' or '}' after a label value");
    expect_error("a{1=\"2\"} 1\n", TS_PARSE, "line 1, column 3: expected a label name");
    expect_error("{\"a.b\"} 1\n", TS_PARSE,
                 "line 1, column 1: quoted metric names are not supported");
    expect_error("9a 1\n", TS_PARSE, "line 1, column 1: expected a metric name");
    expect_error("# TYPE a widget\n", TS_PARSE, "line 1, column 10: unknown metric type 'widget'");
    expect_error("# TYPE a gauge extra\n", TS_PARSE,
                 "line 1, column 15: unexpected text after the type");
    expect_error("# TYPE\n", TS_PARSE, "line 1, column 7: expected a metric name after TYPE");
}

static void test_samples_before_an_error_are_reported(void **state)
{
    struct collect c = {0};
    char err[128] = "";
    assert_int_equal(parse(&c, "a 1\nb 2\nc\n", NULL, err, sizeof(err)), TS_PARSE);
    assert_int_equal(c.samples, 2);
    buf_release(&c.out);
}

static void test_limits(void **state)
{
    struct collect c = {0};
    char err[128] = "";
    struct promparse_limits lim = {.max_line = 10, .max_samples = 2};
    assert_int_equal(parse(&c, "a 1\nb 2\n", &lim, err, sizeof(err)), 0);
    buf_release(&c.out);
    assert_int_equal(parse(&c, "a 1\nb 2\nc 3\n", &lim, err, sizeof(err)), TS_TOOBIG);
    assert_string_equal(err, "more than 2 samples");
    assert_int_equal(c.samples, 2);
    buf_release(&c.out);
    assert_int_equal(parse(&c, "a 1\nlonger_name 2\n", &lim, err, sizeof(err)), TS_TOOBIG);
    assert_string_equal(err, "line 2: longer than 10 bytes");
    buf_release(&c.out);
    /* comments count against the line cap too, but not against the sample cap */
    assert_int_equal(parse(&c, "# x\n# y\n# z\na 1\n", &lim, err, sizeof(err)), 0);
    buf_release(&c.out);

    /* 64 labels pass, 65 do not */
    struct buf t;
    buf_init(&t, 1 << 16);
    assert_int_equal(buf_append_str(&t, "m{"), 0);
    for (int i = 0; i < PROMPARSE_MAX_LABELS; i++)
        assert_int_equal(buf_appendf(&t, "l%d=\"v\",", i), 0);
    size_t mark = t.len;
    assert_int_equal(buf_append_str(&t, "} 1\n"), 0);
    assert_int_equal(parse(&c, buf_cstr(&t), NULL, err, sizeof(err)), 0);
    assert_int_equal(c.samples, 1);
    buf_release(&c.out);
    buf_truncate(&t, mark);
    assert_int_equal(buf_append_str(&t, "extra=\"v\"} 1\n"), 0);
    assert_int_equal(parse(&c, buf_cstr(&t), NULL, err, sizeof(err)), TS_TOOBIG);
    assert_string_equal(err, "line 1: more than 64 labels");
    buf_release(&c.out);
    buf_release(&t);
}

static void test_callback_stops_the_parse(void **state)
{
    struct collect c = {.stop_after = 2};
    char err[64] = "untouched";
    assert_int_equal(parse(&c, "a 1\nb 2\nc 3\n", NULL, err, sizeof(err)), -1234);
    assert_int_equal(c.samples, 2);
    assert_string_equal(err, "untouched");
    buf_release(&c.out);
}

static void test_text_need_not_be_terminated(void **state)
{
    /* the text stops in the middle of "12": only "1" is the value */
    static const char text[] = {'a', ' ', '1', '2'};
    struct collect c = {0};
    char err[64] = "";
    buf_init(&c.out, 1 << 10);
    assert_int_equal(promparse_text(text, 3, NULL, &ops, &c, err, sizeof(err)), 0);
    assert_string_equal(buf_cstr(&c.out), "a{} 1 L1\n");
    buf_release(&c.out);
    assert_int_equal(promparse_text(NULL, 0, NULL, &ops, &c, err, sizeof(err)), 0);
    assert_int_equal(promparse_text("a 1", 3, NULL, NULL, NULL, err, sizeof(err)), -EINVAL);
}

static void test_helpers_and_oom(void **state)
{
    struct promparse_label l[] = {{{"le", 2}, {"0.5", 3}}, {{"model", 5}, {"x", 1}}};
    struct promparse_sample s = {.labels = l, .nlabels = 2};
    const struct promparse_str *v = promparse_label(&s, "model");
    assert_non_null(v);
    assert_true(promparse_str_eq(*v, "x"));
    assert_null(promparse_label(&s, "mode"));
    assert_false(promparse_str_eq((struct promparse_str){"ab", 2}, "abc"));
    assert_string_equal(promparse_type_name((enum promparse_type)99), "untyped");

    struct collect c = {0};
    char err[64] = "";
    buf_init(&c.out, 1 << 10);
    ts_alloc_fail_after(0);
    int rc = promparse_text("a 1\n", 4, NULL, &ops, &c, err, sizeof(err));
    ts_alloc_fail_after(-1);
    assert_int_equal(rc, -ENOMEM);
    assert_int_equal(c.samples, 0);
    buf_release(&c.out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vllm_like_text),
        cmocka_unit_test(test_round_trip_with_prom_writer),
        cmocka_unit_test(test_openmetrics_bits),
        cmocka_unit_test(test_errors_name_line_and_column),
        cmocka_unit_test(test_samples_before_an_error_are_reported),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_callback_stops_the_parse),
        cmocka_unit_test(test_text_need_not_be_terminated),
        cmocka_unit_test(test_helpers_and_oom),
    };
    return cmocka_run_group_tests_name("promparse", tests, NULL, NULL);
}
