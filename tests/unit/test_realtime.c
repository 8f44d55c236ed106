/* llm/realtime: server events decoded, response.create made from a chat body. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "llm/realtime.c"

static int decode(struct realtime_decoder *d, const char *s, struct realtime_event *ev)
{
    return realtime_decode(d, s, strlen(s), ev);
}

static void test_deltas_both_names(void **state)
{
    (void)state;
    struct realtime_decoder d;
    struct realtime_event ev;
    realtime_decoder_init(&d);
    assert_int_equal(decode(&d,
                            "{\"type\":\"response.output_text.delta\",\"response_id\":\"r1\","
                            "\"delta\":\"he\\u0000y\"}",
                            &ev),
                     0);
    assert_int_equal(ev.kind, REALTIME_EV_DELTA);
    assert_string_equal(ev.response_id, "r1");
    assert_int_equal(ev.delta_len, 4); /* a NUL inside is kept by length */
    assert_int_equal(decode(&d, "{\"type\":\"response.text.delta\",\"delta\":\"x\"}", &ev), 0);
    assert_int_equal(ev.kind, REALTIME_EV_DELTA);
    assert_null(ev.response_id);
    assert_int_equal(decode(&d, "{\"type\":\"response.text.delta\",\"delta\":3}", &ev), TS_PARSE);
    assert_non_null(strstr(d.errmsg, "delta"));
    assert_int_equal(decode(&d, "{\"type\":\"response.audio.delta\",\"delta\":\"AA\"}", &ev), 0);
    assert_int_equal(ev.kind, REALTIME_EV_OTHER);
    assert_int_equal(decode(&d, "[1]", &ev), TS_PARSE);
    assert_int_equal(decode(&d, "{\"type\":", &ev), TS_PARSE);
    realtime_decoder_release(&d);
}

static void test_response_done_usage_and_reason(void **state)
{
    (void)state;
    struct realtime_decoder d;
    struct realtime_event ev;
    realtime_decoder_init(&d);
    assert_int_equal(
        decode(&d,
               "{\"type\":\"response.done\",\"response\":{\"id\":\"r9\",\"status\":\"incomplete\","
               "\"status_details\":{\"type\":\"incomplete\",\"reason\":\"max_output_tokens\"},"
               "\"usage\":{\"total_tokens\":30,\"input_tokens\":20,\"output_tokens\":10,"
               "\"input_token_details\":{\"cached_tokens\":16}}}}",
               &ev),
        0);
    assert_int_equal(ev.kind, REALTIME_EV_RESPONSE_DONE);
    assert_string_equal(ev.response_id, "r9");
    assert_true(ev.usage.present);
    assert_int_equal(ev.usage.prompt_tokens, 20);
    assert_int_equal(ev.usage.completion_tokens, 10);
    assert_int_equal(ev.usage.cached_tokens, 16);
    assert_string_equal(realtime_finish_reason(&ev), "length");
    assert_int_equal(
        decode(&d, "{\"type\":\"response.done\",\"response\":{\"status\":\"completed\"}}", &ev), 0);
    assert_false(ev.usage.present);
    assert_string_equal(realtime_finish_reason(&ev), "stop");
    assert_int_equal(
        decode(&d,
               "{\"type\":\"response.done\",\"response\":{\"status\":\"failed\","
               "\"status_details\":{\"error\":{\"type\":\"server_error\",\"message\":\"boom\"}}}}",
               &ev),
        0);
    assert_string_equal(realtime_finish_reason(&ev), "failed");
    assert_string_equal(ev.error.message, "boom");
    assert_int_equal(decode(&d,
                            "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
                            "\"code\":\"x\",\"message\":\"bad\"}}",
                            &ev),
                     0);
    assert_int_equal(ev.kind, REALTIME_EV_ERROR);
    assert_string_equal(ev.error.code, "x");
    realtime_decoder_release(&d);
}

static void test_request_from_chat(void **state)
{
    (void)state;
    struct buf out;
    char err[256];
    buf_init(&out, 1 << 20);
    const char *body =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]},"
        "{\"role\":\"assistant\",\"content\":\"yo\"}],"
        "\"max_tokens\":7,\"ignore_eos\":true,\"stream\":true}";
    assert_int_equal(
        realtime_request_from_chat(body, strlen(body), "ts-1-2", &out, err, sizeof(err)), 0);
    json_t *ev = json_loads(buf_cstr(&out), 0, NULL);
    assert_non_null(ev);
    assert_string_equal(json_string_value(json_object_get(ev, "type")), "response.create");
    json_t *r = json_object_get(ev, "response");
    assert_string_equal(json_string_value(json_object_get(r, "conversation")), "none");
    assert_int_equal(json_integer_value(json_object_get(r, "max_output_tokens")), 7);
    assert_true(json_is_true(json_object_get(r, "ignore_eos")));
    assert_null(json_object_get(r, "stream"));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(r, "metadata"), "request_id")), "ts-1-2");
    json_t *input = json_object_get(r, "input");
    assert_int_equal(json_array_size(input), 3);
    json_t *part = json_array_get(json_object_get(json_array_get(input, 2), "content"), 0);
    assert_string_equal(json_string_value(json_object_get(part, "type")), "output_text");
    part = json_array_get(json_object_get(json_array_get(input, 1), "content"), 0);
    assert_string_equal(json_string_value(json_object_get(part, "type")), "input_text");
    assert_string_equal(json_string_value(json_object_get(part, "text")), "hi");
    json_decref(ev);
    /* refused: not JSON, a completions body, a tool message */
    buf_reset(&out);
    assert_int_equal(realtime_request_from_chat("{", 1, NULL, &out, err, sizeof(err)), TS_PARSE);
    const char *cmpl = "{\"prompt\":\"x\"}";
    assert_int_equal(realtime_request_from_chat(cmpl, strlen(cmpl), NULL, &out, err, sizeof(err)),
                     TS_PARSE);
    assert_non_null(strstr(err, "messages"));
    const char *tool = "{\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}";
    assert_int_equal(realtime_request_from_chat(tool, strlen(tool), NULL, &out, err, sizeof(err)),
                     TS_PARSE);
    assert_non_null(strstr(err, "messages[0]"));
    assert_int_equal(out.len, 0);
    buf_release(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deltas_both_names),
        cmocka_unit_test(test_response_done_usage_and_reason),
        cmocka_unit_test(test_request_from_chat),
    };
    return cmocka_run_group_tests_name("realtime", tests, NULL, NULL);
}
