/*
 * test_target.c - load/target: --target resolution, and what a failed
 * /v1/models call says (describe_failure, reached by including the .c):
 * nothing listening, TLS against plain HTTP and the reverse, an HTTP error
 * status with the server's message, and answers that are no OpenAI model
 * list. None of them invites a bare "give --model" when a run on the same
 * address would fail the same way.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "../../src/load/target.c"

#define URL  "http://127.0.0.1:9/v1/models"
#define URLS "https://127.0.0.1:9/v1/models"

static char err[1024];

static const char *why(const char *url, CURLcode cc, long status, const char *ctype,
                       const char *body)
{
    memset(err, 0, sizeof(err));
    describe_failure(url, cc, status, ctype, body, body ? strlen(body) : 0, err, sizeof(err));
    return err;
}

static void assert_has(const char *s, const char *part)
{
    if (!strstr(s, part))
        fail_msg("'%s' lacks '%s'", s, part);
}

static void test_transport(void **state)
{
    (void)state;
    const char *e = why(URL, CURLE_COULDNT_CONNECT, 0, NULL, NULL);
    assert_has(e, URL);
    assert_has(e, "nothing is listening there");
    assert_null(strstr(e, "give --model"));
    e = why(URLS, CURLE_SSL_CONNECT_ERROR, 0, NULL, NULL);
    assert_has(e, "TLS handshake failed: if the port speaks plain HTTP, use http://");
    e = why(URL, CURLE_GOT_NOTHING, 0, NULL, NULL);
    assert_has(e, "if the port speaks TLS, use https://");
    e = why(URLS, CURLE_PEER_FAILED_VERIFICATION, 0, NULL, NULL);
    assert_has(e, "--insecure");
    e = why(URL, CURLE_COULDNT_RESOLVE_HOST, 0, NULL, NULL);
    assert_has(e, "does not resolve");
    e = why(URL, CURLE_OPERATION_TIMEDOUT, 0, NULL, NULL);
    assert_has(e, "no answer within 15 s");
    e = why(URL, CURLE_WRITE_ERROR, 0, NULL, NULL);
    assert_has(e, "over 4 MiB");
}

static void test_status(void **state)
{
    (void)state;
    const char *e = why(URL, CURLE_OK, 401, "application/json",
                        "{\"error\":{\"message\":\"Incorrect API key\",\"type\":\"auth\"}}");
    assert_has(e, "HTTP 401 (Incorrect API key (type: auth))");
    assert_has(e, "--api-key");
    e = why(URL, CURLE_OK, 404, "text/plain", "Not Found");
    assert_has(e, "HTTP 404 (Not Found)");
    assert_has(e, "root or its /v1 base URL");
    e = why(URL, CURLE_OK, 503, NULL, "");
    assert_has(e, "HTTP 503 (empty body): the server failed");
}

static void test_not_a_model_list(void **state)
{
    (void)state;
    const char *e = why(URL, CURLE_OK, 200, "text/html", "<html>It works!</html>");
    assert_has(e, "not JSON (text/html: <html>It works!</html>)");
    assert_has(e, "not an OpenAI-compatible server");
    e = why(URL, CURLE_OK, 200, NULL, "");
    assert_has(e, "not JSON (no content type, empty");
    e = why(URL, CURLE_OK, 200, "application/json", "{\"models\":[\"a\"]}");
    assert_has(e, "no \"data\" list");
    e = why(URL, CURLE_OK, 200, "application/json", "{\"data\":[]}");
    assert_has(e, "lists no model");
    e = why(URL, CURLE_OK, 200, "application/json", "{\"data\":[{\"id\":7}]}");
    assert_has(e, "no string \"id\"");
    e = why(URL, CURLE_OK, 200, "application/json", "[1,2]");
    assert_has(e, "no \"data\" list");
}

/* A long or hostile body stays one bounded, printable line. */
static void test_bounded(void **state)
{
    (void)state;
    char body[8192];
    memset(body, 'x', sizeof(body) - 1);
    body[sizeof(body) - 1] = '\0';
    body[5] = '\n';
    body[6] = '\033';
    const char *e = why(URL, CURLE_OK, 200, "text/plain", body);
    assert_true(strlen(e) < 400);
    assert_null(strchr(e, '\n'));
    assert_null(strchr(e, '\033'));
    e = why(URL, CURLE_OK, 500, "text/plain", body);
    assert_true(strlen(e) < sizeof(err));
    assert_null(strchr(e, '\033'));
}

static void test_resolve(void **state)
{
    (void)state;
    char ep[TARGET_URL_MAX], models[TARGET_URL_MAX], e[256];
    assert_int_equal(target_resolve("http://h:8000", WORKLOAD_CHAT, ep, models, e, sizeof(e)), 0);
    assert_string_equal(ep, "http://h:8000/v1/chat/completions");
    assert_string_equal(models, "http://h:8000/v1/models");
    assert_int_equal(target_resolve("ftp://h", WORKLOAD_CHAT, ep, models, e, sizeof(e)), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transport),        cmocka_unit_test(test_status),
        cmocka_unit_test(test_not_a_model_list), cmocka_unit_test(test_bounded),
        cmocka_unit_test(test_resolve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
