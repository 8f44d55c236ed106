#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "../../src/chaos/proxy_mirror.c"
#include "../../src/chaos/proxy_mirror_out.c"

static void set_body(struct mirror_side *sd, const char *s)
{
    buf_init(&sd->body, MIRROR_TEXT_MAX);
    assert_int_equal(buf_append(&sd->body, s, strlen(s)), 0);
}

/* A streamed answer: text of the content deltas, chunks counted, usage read. */
static void test_answer_stream(void **state)
{
    (void)state;
    struct mirror_side sd = {0};
    struct buf t;
    struct answer a = {0};
    set_body(&sd,
             "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n"
             "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n"
             "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n"
             "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2}}\n\n"
             "data: [DONE]\n\n");
    buf_init(&t, 100);
    answer_text(&sd.body, &t, &a, NULL);
    assert_true(a.stream);
    assert_int_equal(t.len, 5);
    assert_memory_equal(t.data, "Hello", 5);
    assert_int_equal(a.choice_chunks, 3);
    assert_int_equal(a.content_chunks, 2);
    assert_int_equal(a.usage_tokens, 2);
    assert_int_equal(a.usage_prompt, 7);
    buf_release(&t);
    buf_release(&sd.body);
}

/* Each side of a pair as a request record: ok with its times and tokens, or
 * failed with the outcome of its status. */
static void test_side_record(void **state)
{
    (void)state;
    struct mirror_pair mp = {.start_ns = 1000};
    struct req_record r;
    set_body(&mp.side[0], "{\"choices\":[{\"message\":{\"content\":\"hi there\"}}],"
                          "\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}");
    mp.side[0].status = 200;
    mp.side[0].first_ns = 3000;
    mp.side[0].last_ns = 4000;
    mp.side[0].end_ns = 5000;
    side_record(&mp, 0, &r, NULL, 0);
    assert_int_equal(r.outcome, REQ_OK);
    assert_int_equal(r.output_tokens, 4);
    assert_int_equal(r.token_source, TOKENS_USAGE);
    assert_int_equal(r.usage_prompt_tokens, 3);
    assert_false(r.flags & REQF_STREAM);
    assert_int_equal(r.first_chunk_ns, 0); /* not streamed: no first token */
    assert_int_equal(r.intended_ns, 1000);
    assert_int_equal(r.last_chunk_ns, 4000);
    assert_int_equal(r.end_ns, 5000);
    static const struct {
        int status;
        enum req_outcome o;
    } fails[] = {{429, REQ_HTTP_429},
                 {404, REQ_HTTP_4XX},
                 {503, REQ_HTTP_5XX},
                 {0, REQ_CONNECT},
                 {200, REQ_RECV}};
    for (size_t i = 0; i < sizeof fails / sizeof *fails; i++) {
        mp.side[1].status = fails[i].status;
        mp.side[1].failed = true;
        side_record(&mp, 1, &r, NULL, 0);
        assert_int_equal(r.outcome, fails[i].o);
        assert_true(req_outcome_is_error(r.outcome));
        assert_non_null(strstr(r.error, "mirror"));
    }
    buf_release(&mp.side[0].body);
}

/* A stream's events timed by the body pieces that brought them: the first
 * chunk with choices (the role), the first with content, each gap. */
static void test_event_times(void **state)
{
    (void)state;
    static const char *const ev[] = {
        "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{",
        "\"delta\":{\"content\":\"b\"}}]}\n\n", /* the event that began in the piece before */
        "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"};
    struct mirror_pair mp = {.start_ns = 100};
    buf_init(&mp.side[0].body, MIRROR_TEXT_MAX);
    for (int k = 0; k < 4; k++)
        side_body(&mp.side[0], ev[k], strlen(ev[k]), 1000 * (uint64_t)(k + 1));
    mp.side[0].status = 200;
    mp.side[0].end_ns = 5000;
    assert_int_equal(mp.side[0].npieces, 4);
    uint64_t chunks[8];
    struct req_record r;
    side_record(&mp, 0, &r, chunks, 8);
    assert_true(r.flags & REQF_STREAM);
    assert_int_equal(r.first_byte_ns, 1000);
    assert_int_equal(r.first_chunk_ns, 1000); /* the role chunk */
    assert_int_equal(r.first_token_ns, 2000);
    assert_int_equal(r.last_chunk_ns, 4000);
    assert_int_equal(r.n_chunk_ns, 4);
    assert_int_equal(chunks[2], 3000); /* "b" completed with the third piece */
    assert_int_equal(r.itl_sum_ns, 3000);
    assert_int_equal(r.itl_max_ns, 1000);
    assert_int_equal(r.output_tokens, 2); /* no usage: one per content chunk */
    side_release(&mp.side[0]);
}

/* No user:password of a URL reaches the files. */
static void test_clean_url(void **state)
{
    (void)state;
    char b[128];
    assert_string_equal(clean_url("http://u:secret@h:1/v1", b, sizeof b), "http://h:1/v1");
    assert_string_equal(clean_url("https://h/a@b", b, sizeof b), "https://h/a@b");
    assert_string_equal(clean_url("http://h:8000", b, sizeof b), "http://h:8000");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_answer_stream),
        cmocka_unit_test(test_side_record),
        cmocka_unit_test(test_event_times),
        cmocka_unit_test(test_clean_url),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
