#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/clock.h"
#include "net/ptimer.h"

struct fixture {
    struct ptimer t;
    struct ptimer never;
    uv_timer_t guard;
    int fired;
    uint64_t deadline;
    uint64_t late_max;
    int closed;
};

static void on_fire(struct ptimer *t);

static void on_close(struct ptimer *t)
{
    struct fixture *f = t->data;
    f->closed++;
}

static void finish(struct fixture *f)
{
    uv_timer_stop(&f->guard);
    uv_close((uv_handle_t *)&f->guard, NULL);
    ptimer_close(&f->t, on_close);
    ptimer_close(&f->never, on_close);
}

static void on_fire(struct ptimer *t)
{
    struct fixture *f = t->data;
    uint64_t now = ts_now_ns();
    assert_true(now >= f->deadline);
    if (now - f->deadline > f->late_max)
        f->late_max = now - f->deadline;
    if (++f->fired == 20) {
        finish(f);
        return;
    }
    f->deadline = now + 300 * TS_NS_PER_US;
    assert_int_equal(ptimer_start_at(t, f->deadline, on_fire), 0);
}

static void on_never(struct ptimer *t)
{
    fail_msg("a stopped timer fired");
}

static void on_guard(uv_timer_t *h)
{
    fail_msg("timers did not fire in time");
}

static void test_fires_in_order_and_stop_disarms(void **state)
{
    uv_loop_t loop;
    struct fixture f = {0};
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(ptimer_init(&loop, &f.t), 0);
    assert_int_equal(ptimer_init(&loop, &f.never), 0);
    f.t.data = &f;
    f.never.data = &f;
    assert_int_equal(uv_timer_init(&loop, &f.guard), 0);
    assert_int_equal(uv_timer_start(&f.guard, on_guard, 5000, 0), 0);

    assert_int_equal(ptimer_start_at(&f.never, ts_now_ns() + 1000 * TS_NS_PER_US, on_never), 0);
    ptimer_stop(&f.never);
    f.deadline = ts_now_ns() + 500 * TS_NS_PER_US;
    assert_int_equal(ptimer_start_at(&f.t, f.deadline, on_fire), 0);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(f.fired, 20);
    assert_int_equal(f.closed, 2);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_past_deadline_fires_at_once(void **state)
{
    uv_loop_t loop;
    struct fixture f = {0};
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(ptimer_init(&loop, &f.t), 0);
    assert_int_equal(ptimer_init(&loop, &f.never), 0);
    f.t.data = &f;
    f.never.data = &f;
    assert_int_equal(uv_timer_init(&loop, &f.guard), 0);
    assert_int_equal(uv_timer_start(&f.guard, on_guard, 5000, 0), 0);
    f.fired = 19;
    f.deadline = ts_now_ns() - TS_NS_PER_S;
    assert_int_equal(ptimer_start_at(&f.t, f.deadline, on_fire), 0);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(f.fired, 20);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fires_in_order_and_stop_disarms),
        cmocka_unit_test(test_past_deadline_fires_at_once),
    };
    return cmocka_run_group_tests_name("ptimer", tests, NULL, NULL);
}
