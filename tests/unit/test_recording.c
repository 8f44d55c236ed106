#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../src/llm/recording.c"

static const char good[] =
    "{\"v\":1,\"offset_ms\":12.5,\"method\":\"POST\",\"path\":\"/v1/chat/completions\","
    "\"body\":{\"model\":\"m\",\"stream\":true},\"body_hash\":\"0123456789abcdef\","
    "\"status\":200,\"response_headers\":{\"Content-Type\":\"text/event-stream\"},"
    "\"events\":[[1.5,\"{\\\"a\\\":1}\"],[3,\"[DONE]\",\"done\"]],\"end_ms\":4}";

static void test_parse(void **state)
{
    (void)state;
    struct rec_exchange x;
    char err[256];
    assert_int_equal(rec_exchange_parse(good, strlen(good), &x, err, sizeof err), 0);
    assert_int_equal(x.offset_ns, 12500000);
    assert_string_equal(x.method, "POST");
    assert_string_equal(x.path, "/v1/chat/completions");
    assert_string_equal(x.body, "{\"model\":\"m\",\"stream\":true}");
    assert_string_equal(x.model, "m");
    assert_string_equal(x.content_type, "text/event-stream");
    assert_int_equal(x.nev, 2);
    assert_int_equal(x.ev[0].t_ns, 1500000);
    assert_string_equal(x.ev[1].data, "[DONE]");
    assert_string_equal(x.ev[1].type, "done");
    assert_int_equal(x.end_ns, 4000000);
    rec_exchange_release(&x);

    static const struct {
        const char *line, *msg;
    } bad[] = {
        {"[1]", "object"},
        {"{\"v\":2}", "v:"},
        {"{\"v\":1,\"offset_ms\":-1}", "offset_ms"},
        {"{\"v\":1,\"offset_ms\":0,\"method\":\"POST\",\"path\":\"x\"}", "path"},
        {"{\"v\":1,\"offset_ms\":0,\"method\":\"POST\",\"path\":\"/x\",\"body_hash\":\"zz\"}",
         "body_hash"},
        {"{\"v\":1,\"offset_ms\":0,\"method\":\"POST\",\"path\":\"/x\",\"body_hash\":"
         "\"0123456789abcdef\",\"status\":42}",
         "status"},
        {"{\"v\":1,\"offset_ms\":0,\"method\":\"POST\",\"path\":\"/x\",\"body_hash\":"
         "\"0123456789abcdef\",\"status\":200,\"events\":[[1]]}",
         "events[0]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        assert_int_not_equal(
            rec_exchange_parse(bad[i].line, strlen(bad[i].line), &x, err, sizeof err), 0);
        if (!strstr(err, bad[i].msg))
            fail_msg("%s: %s", bad[i].line, err);
    }
}

/* The hash is of the canonical body: key order and blanks do not matter. */
static void test_hash(void **state)
{
    (void)state;
    char a[17], b[17], c[17];
    const char *x = "{\"a\":1,\"b\":[1,2]}", *y = "{ \"b\": [1, 2], \"a\": 1 }",
               *z = "{\"a\":2,\"b\":[1,2]}";
    recording_body_hash(x, strlen(x), a);
    recording_body_hash(y, strlen(y), b);
    recording_body_hash(z, strlen(z), c);
    assert_string_equal(a, b);
    assert_string_not_equal(a, c);
}

/* A directory: files in name order, a bad line skipped and reported. */
static void test_load(void **state)
{
    (void)state;
    char dir[] = "/tmp/ts-rec-XXXXXX", path[64], err[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/rec-000002.jsonl", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "%s\nnot json\n", good);
    fclose(f);
    snprintf(path, sizeof path, "%s/rec-000001.jsonl", dir);
    f = fopen(path, "w");
    fprintf(f, "%s\n", good);
    fclose(f);
    struct recording *r;
    assert_int_equal(recording_load(dir, &r, err, sizeof err), 0);
    assert_int_equal(r->n, 2);
    assert_int_equal(r->skipped, 1);
    assert_non_null(strstr(err, "rec-000002.jsonl:2"));
    recording_free(r);
    unlink(path);
    snprintf(path, sizeof path, "%s/rec-000002.jsonl", dir);
    unlink(path);
    assert_int_equal(recording_load(dir, &r, err, sizeof err), TS_PARSE);
    assert_non_null(strstr(err, "no recorded exchange"));
    rmdir(dir);
}

/* WebSocket sessions (the proxy writes them) are counted and kept out. */
static void test_websocket(void **state)
{
    (void)state;
    static const char ws[] =
        "{\"v\":1,\"offset_ms\":3,\"method\":\"GET\",\"path\":\"/v1/realtime\",\"body\":null,"
        "\"body_hash\":\"cbf29ce484222325\",\"websocket\":true,\"status\":101,"
        "\"messages\":[[0.3,\"server\",\"{}\"],[0.5,\"client\",\"AAE=\",\"binary\"]],"
        "\"close\":{\"t_ms\":1,\"by\":\"client\",\"code\":1000},\"end_ms\":1,\"outcome\":\"ok\"}";
    char dir[] = "/tmp/ts-rec-XXXXXX", path[64], err[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/rec-000001.jsonl", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "%s\n%s\n%s\n", ws, good, ws);
    fclose(f);
    struct recording *r;
    assert_int_equal(recording_load(dir, &r, err, sizeof err), 0);
    assert_int_equal(r->n, 1);
    assert_int_equal(r->websocket, 2);
    assert_int_equal(r->skipped, 0);
    assert_string_equal(r->v[0].method, "POST");
    recording_free(r);
    f = fopen(path, "w");
    fprintf(f, "%s\n", ws);
    fclose(f);
    assert_int_equal(recording_load(dir, &r, err, sizeof err), TS_PARSE);
    assert_non_null(strstr(err, "only WebSocket sessions (1)"));
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_hash),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_websocket),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
