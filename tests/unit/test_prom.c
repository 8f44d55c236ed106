#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "telemetry/prom.h"

static void test_samples_and_escaping(void **state)
{
    struct buf b;
    buf_init(&b, 1 << 16);
    const char *labels[] = {"model_name", "a\"b\\c\nd", "tenant", "x"};
    assert_int_equal(prom_header(&b, "vllm:num_requests_running", "Running.", "gauge"), 0);
    assert_int_equal(prom_sample(&b, "vllm:num_requests_running", labels, 2, 3), 0);
    assert_int_equal(prom_sample(&b, "up", NULL, 0, 0.25), 0);
    assert_string_equal(buf_cstr(&b),
                        "# HELP vllm:num_requests_running Running.\n"
                        "# TYPE vllm:num_requests_running gauge\n"
                        "vllm:num_requests_running{model_name=\"a\\\"b\\\\c\\nd\",tenant=\"x\"} 3\n"
                        "up 0.25\n");
    buf_release(&b);
}

static void test_metric(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 1 << 16);
    assert_int_equal(prom_metric(&b, "x_total", "Things.", "counter", 7), 0);
    assert_string_equal(buf_cstr(&b),
                        "# HELP x_total Things.\n# TYPE x_total counter\nx_total 7\n");
    buf_release(&b);
    buf_init(&b, 8); /* too small: the header's error, nothing after it */
    assert_int_not_equal(prom_metric(&b, "x_total", "Things.", "counter", 7), 0);
    buf_release(&b);
}

static void test_histogram_is_cumulative(void **state)
{
    static const double bounds[] = {0.1, 1, 10};
    struct prom_hist h;
    prom_hist_init(&h, bounds, 3);
    prom_hist_observe(&h, 0.05);
    prom_hist_observe(&h, 0.1); /* le is inclusive */
    prom_hist_observe(&h, 5);
    prom_hist_observe(&h, 50);
    struct buf b;
    buf_init(&b, 1 << 16);
    const char *labels[] = {"m", "x"};
    assert_int_equal(prom_histogram(&b, "lat", labels, 1, &h), 0);
    assert_string_equal(buf_cstr(&b), "lat_bucket{m=\"x\",le=\"0.1\"} 2\n"
                                      "lat_bucket{m=\"x\",le=\"1\"} 2\n"
                                      "lat_bucket{m=\"x\",le=\"10\"} 3\n"
                                      "lat_bucket{m=\"x\",le=\"+Inf\"} 4\n"
                                      "lat_sum{m=\"x\"} 55.149999999999999\n"
                                      "lat_count{m=\"x\"} 4\n");
    buf_release(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_samples_and_escaping),
        cmocka_unit_test(test_metric),
        cmocka_unit_test(test_histogram_is_cumulative),
    };
    return cmocka_run_group_tests_name("prom", tests, NULL, NULL);
}
