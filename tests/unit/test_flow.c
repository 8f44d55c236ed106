/*
 * test_flow.c - flows: templates, definition checks and the per-iteration
 * state machine, driven as a runner would (next / render / complete) with
 * hand-written responses, checked against hand-written request bodies.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "scenario/flow.h"

/* ---- building definitions ---- */

#define CAP_STEPS 16

static json_t *js(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &e);
    if (!j)
        fail_msg("bad JSON in test: %s: %s", text, e.text);
    return j;
}

static void def_init(struct flow_def *d)
{
    d->steps = ts_calloc(CAP_STEPS, sizeof(*d->steps));
    assert_non_null(d->steps);
    d->n = 0;
}

static struct flow_step_def *add(struct flow_def *d, const char *name, enum flow_step_kind kind,
                                 const char *body)
{
    assert_true(d->n < CAP_STEPS);
    struct flow_step_def *s = &d->steps[d->n++];
    memset(s, 0, sizeof(*s));
    s->name = ts_strdup(name);
    s->kind = kind;
    s->fallback = -1;
    s->body = body ? js(body) : NULL;
    if (kind == FLOW_STEP_HTTP)
        s->url = ts_strdup("http://127.0.0.1:1/x");
    return s;
}

static void set_url(struct flow_step_def *s, const char *url)
{
    ts_free(s->url);
    s->url = url ? ts_strdup(url) : NULL;
}

static void dep(struct flow_step_def *s, uint32_t j)
{
    s->deps = ts_realloc(s->deps, (s->ndeps + 1) * sizeof(*s->deps));
    assert_non_null(s->deps);
    s->deps[s->ndeps++] = j;
}

static void cap(struct flow_step_def *s, const char *var, const char *ptr, bool optional)
{
    s->captures = ts_realloc(s->captures, (s->ncaptures + 1) * sizeof(*s->captures));
    assert_non_null(s->captures);
    s->captures[s->ncaptures++] = (struct flow_capture){
        .var = ts_strdup(var), .pointer = ts_strdup(ptr), .optional = optional};
}

static void hdr(struct flow_step_def *s, const char *h)
{
    s->headers = ts_realloc(s->headers, (s->nheaders + 1) * sizeof(*s->headers));
    assert_non_null(s->headers);
    s->headers[s->nheaders++] = ts_strdup(h);
}

static void check_ok(const struct flow_def *d, const char *const *vars, size_t nvars)
{
    char err[512] = "";
    if (flow_def_check(d, vars, nvars, err, sizeof(err)) != 0)
        fail_msg("flow_def_check: %s", err);
}

static void check_fails(const struct flow_def *d, const char *const *vars, size_t nvars,
                        const char *want)
{
    char err[512] = "";
    assert_int_equal(flow_def_check(d, vars, nvars, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, want);
}

static void set(struct flow_run *r, const char *name, const char *json)
{
    assert_int_equal(flow_run_set(r, name, js(json)), 0);
}

static void complete(struct flow_run *r, uint32_t step, bool ok, const char *body)
{
    assert_int_equal(flow_run_complete(r, step, ok, body, body ? strlen(body) : 0), 0);
}

/* Renders a RUNNING step and checks its body text exactly (NULL: none). */
static void expect_body(struct flow_run *r, uint32_t step, const char *want)
{
    struct flow_request q;
    char err[512] = "";
    if (flow_run_render(r, step, &q, err, sizeof(err)) != 0)
        fail_msg("render %u: %s", step, err);
    if (!want) {
        assert_null(q.body);
    } else {
        assert_non_null(q.body);
        assert_string_equal(q.body, want);
        assert_int_equal(q.body_len, strlen(want));
        json_error_t e;
        json_t *back = json_loadb(q.body, q.body_len, 0, &e);
        if (!back)
            fail_msg("rendered body is not JSON: %s", e.text);
        json_decref(back);
    }
    flow_request_release(&q);
}

/* ---- a RAG flow: embed -> search -> generate ---- */

static const char *const rag_given[] = {"question", "k", "trace"};

static void rag_def(struct flow_def *d)
{
    def_init(d);
    struct flow_step_def *s =
        add(d, "embed", FLOW_STEP_EMBEDDINGS, "{\"model\":\"e5\",\"input\":\"{{question}}\"}");
    cap(s, "vec", "/data/0/embedding", false);
    s = add(d, "search", FLOW_STEP_HTTP, "{\"vector\":\"{{vec}}\",\"top_k\":\"{{ k }}\"}");
    set_url(s, "http://127.0.0.1:1/search/{{trace}}?q={{question}}&k={{k}}");
    hdr(s, "X-Trace: t-{{trace}}");
    dep(s, 0);
    cap(s, "passages", "/result/passages", false);
    cap(s, "top_score", "/result/scores/0", false);
    s = add(d, "generate", FLOW_STEP_CHAT,
            "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"Use: "
            "{{passages}}\"},{\"role\":\"user\",\"content\":\"{{question}}\"}],"
            "\"context\":\"{{passages}}\",\"max_tokens\":\"{{k}}\","
            "\"metadata\":{\"score\":\"{{top_score}}\",\"note\":\"s={{top_score}}\"}}");
    dep(s, 1);
    cap(s, "answer", "/choices/0/message/content", false);
}

#define RAG_EMBED_RESP  "{\"data\":[{\"embedding\":[0.5,-1.25,2]}]}"
#define RAG_SEARCH_RESP "{\"result\":{\"passages\":[\"p1\",\"p2\"],\"scores\":[0.75,0.5]}}"
#define RAG_GEN_RESP    "{\"choices\":[{\"message\":{\"content\":\"42\"}}]}"
#define RAG_GEN_BODY                                                                               \
    "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"Use: "                      \
    "[\\\"p1\\\",\\\"p2\\\"]\"},{\"role\":\"user\",\"content\":\"What is RAG?\"}],"                \
    "\"context\":[\"p1\",\"p2\"],\"max_tokens\":3,\"metadata\":{\"score\":0.75,\"note\":"          \
    "\"s=0.75\"}}"

static void test_rag_flow(void **state)
{
    (void)state;
    struct flow_def d;
    rag_def(&d);
    check_ok(&d, rag_given, 3);
    struct flow_run *r;
    assert_int_equal(flow_run_new(&d, &r), 0);
    set(r, "question", "\"What is RAG?\"");
    set(r, "k", "3");
    set(r, "trace", "\"abc\"");

    assert_int_equal(flow_run_next(r), 0);
    assert_int_equal(flow_run_next(r), -1); /* search waits for embed */
    assert_int_equal(flow_run_state(r, 0), FLOW_RUNNING);
    assert_int_equal(flow_run_state(r, 1), FLOW_PENDING);
    assert_false(flow_run_done(r));

    struct flow_request q;
    char err[256];
    assert_int_equal(flow_run_render(r, 0, &q, err, sizeof(err)), 0);
    assert_null(q.url); /* the target's embeddings endpoint */
    assert_string_equal(q.method, "POST");
    assert_int_equal(q.kind, FLOW_STEP_EMBEDDINGS);
    assert_int_equal(q.nheaders, 0);
    assert_string_equal(q.body, "{\"model\":\"e5\",\"input\":\"What is RAG?\"}");
    flow_request_release(&q);
    complete(r, 0, true, RAG_EMBED_RESP);
    assert_int_equal(flow_run_state(r, 0), FLOW_OK);

    assert_int_equal(flow_run_next(r), 1);
    assert_int_equal(flow_run_next(r), -1);
    assert_int_equal(flow_run_render(r, 1, &q, err, sizeof(err)), 0);
    /* before the '?' as is, after it percent-encoded */
    assert_string_equal(q.url, "http://127.0.0.1:1/search/abc?q=What%20is%20RAG%3F&k=3");
    assert_string_equal(q.method, "POST");
    assert_int_equal(q.nheaders, 1);
    assert_string_equal(q.headers[0], "X-Trace: t-abc");
    /* the captured vector keeps its type, 2 stays an integer */
    assert_string_equal(q.body, "{\"vector\":[0.5,-1.25,2],\"top_k\":3}");
    flow_request_release(&q);
    complete(r, 1, true, RAG_SEARCH_RESP);

    assert_int_equal(flow_run_next(r), 2);
    expect_body(r, 2, RAG_GEN_BODY);
    assert_false(flow_run_done(r));
    complete(r, 2, true, RAG_GEN_RESP);
    assert_int_equal(flow_run_next(r), -1);
    assert_true(flow_run_done(r));
    assert_int_equal(flow_run_outcome(r), FLOW_OUT_OK);
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(flow_run_state(r, i), FLOW_OK);
    assert_string_equal(json_string_value(flow_run_get(r, "answer")), "42");
    assert_null(flow_run_fail_reason(r, 2));
    flow_run_free(r);
    flow_def_release(&d);
    assert_null(d.steps);
}

/* ---- a diamond: a -> b, a -> c, b + c -> d (d declared first) ---- */

enum { DD = 0, DA = 1, DB = 2, DC = 3, DB2 = 4, DC2 = 5 };

static void diamond_def(struct flow_def *d, bool fallbacks)
{
    def_init(d);
    struct flow_step_def *s = add(d, "d", FLOW_STEP_HTTP, "{\"x\":\"{{x}}\",\"y\":\"{{y}}\"}");
    dep(s, DB);
    dep(s, DC);
    add(d, "a", FLOW_STEP_HTTP, NULL);
    s = add(d, "b", FLOW_STEP_HTTP, NULL);
    dep(s, DA);
    cap(s, "x", "/x", false);
    s = add(d, "c", FLOW_STEP_HTTP, NULL);
    dep(s, DA);
    cap(s, "y", "/y", false);
    if (!fallbacks)
        return;
    d->steps[DB].fallback = DB2;
    d->steps[DC].fallback = DC2;
    s = add(d, "b_cache", FLOW_STEP_HTTP, NULL);
    s->fallback_only = true;
    dep(s, DA);
    cap(s, "x", "/alt", false);
    s = add(d, "c_cache", FLOW_STEP_HTTP, NULL);
    s->fallback_only = true;
    cap(s, "y", "/alt", false);
}

static void test_diamond_waits_for_both(void **state)
{
    (void)state;
    struct flow_def d;
    diamond_def(&d, false);
    check_ok(&d, NULL, 0);
    struct flow_run *r;
    assert_int_equal(flow_run_new(&d, &r), 0);
    assert_int_equal(flow_run_next(r), DA);
    assert_int_equal(flow_run_next(r), -1);
    complete(r, DA, true, NULL);
    assert_int_equal(flow_run_next(r), DB);
    assert_int_equal(flow_run_next(r), DC);
    assert_int_equal(flow_run_next(r), -1);
    complete(r, DC, true, "{\"y\":2}");
    assert_int_equal(flow_run_next(r), -1); /* d still waits for b */
    assert_int_equal(flow_run_state(r, DD), FLOW_PENDING);
    complete(r, DB, true, "{\"x\":\"one\"}");
    assert_int_equal(flow_run_next(r), DD);
    expect_body(r, DD, "{\"x\":\"one\",\"y\":2}");
    assert_false(flow_run_done(r));
    complete(r, DD, true, NULL);
    assert_true(flow_run_done(r));
    assert_int_equal(flow_run_outcome(r), FLOW_OUT_OK);
    /* not RUNNING any more */
    assert_int_equal(flow_run_complete(r, DD, true, NULL, 0), -EINVAL);
    assert_int_equal(flow_run_complete(r, 99, true, NULL, 0), -EINVAL);
    flow_run_free(r);
    flow_def_release(&d);
}

static void test_failure_skips_dependants(void **state)
{
    (void)state;
    struct flow_def d;
    diamond_def(&d, false);
    struct flow_run *r;
    assert_int_equal(flow_run_new(&d, &r), 0);
    assert_int_equal(flow_run_next(r), DA);
    complete(r, DA, true, NULL);
    assert_int_equal(flow_run_next(r), DB);
    assert_int_equal(flow_run_next(r), DC);
    complete(r, DB, false, NULL);
    assert_int_equal(flow_run_state(r, DB), FLOW_FAILED);
    assert_string_equal(flow_run_fail_reason(r, DB), "request failed");
    assert_int_equal(flow_run_state(r, DD), FLOW_SKIPPED);
    assert_int_equal(flow_run_state(r, DC), FLOW_RUNNING); /* c still runs */
    assert_false(flow_run_done(r));
    assert_int_equal(flow_run_outcome(r), FLOW_OUT_FAILED);
    complete(r, DC, true, "{\"y\":1}");
    assert_int_equal(flow_run_next(r), -1);
    assert_true(flow_run_done(r));
    assert_int_equal(flow_run_outcome(r), FLOW_OUT_FAILED);
    assert_string_equal(flow_outcome_name(flow_run_outcome(r)), "failed");
    assert_string_equal(flow_step_state_name(flow_run_state(r, DD)), "skipped");
    flow_run_free(r);
    flow_def_release(&d);
}

static void test_fallback_takes_the_place(void **state)
{
    (void)state;
    struct flow_def d;
    diamond_def(&d, true);
    check_ok(&d, NULL, 0);
    struct flow_run *r;
    assert_int_equal(flow_run_new(&d, &r), 0);
    assert_int_equal(flow_run_next(r), DA);
    assert_int_equal(flow_run_next(r), -1); /* fallbacks do not start by themselves */
    complete(r, DA, true, NULL);
    assert_int_equal(flow_run_next(r), DB);
    assert_int_equal(flow_run_next(r), DC);
    assert_int_equal(flow_run_next(r), -1);
    complete(r, DB, false, NULL);
    assert_int_equal(flow_run_state(r, DD), FLOW_PENDING); /* waits for the fallback */
    assert_int_equal(flow_run_next(r), DB2);
    assert_int_equal(flow_run_next(r), -1);
    complete(r, DB2, true, "{\"alt\":\"from cache\"}");
    assert_int_equal(flow_run_next(r), -1); /* still waits for c */
    complete(r, DC, true, "{\"y\":[1]}");
    assert_int_equal(flow_run_state(r, DC2), FLOW_NOT_RUN);
    assert_int_equal(flow_run_next(r), DD);
    expect_body(r, DD, "{\"x\":\"from cache\",\"y\":[1]}");
    complete(r, DD, true, NULL);
    assert_true(flow_run_done(r));
    assert_int_equal(flow_run_outcome(r), FLOW_OUT_DEGRADED);
    assert_string_equal(flow_outcome_name(FLOW_OUT_DEGRADED), "degraded");
    assert_int_equal(flow_run_state(r, DB), FLOW_FAILED);
    assert_int_equal(flow_run_state(r, DB2), FLOW_OK);
    assert_string_equal(flow_step_state_name(flow_run_state(r, DC2)), "not_run");
    flow_run_free(r);

    /* the fallback fails too: d is skipped, the flow failed */
    assert_int_equal(flow_run_new(&d, &r), 0);
    assert_int_equal(flow_run_next(r), DA);
    complete(r, DA, true, NULL);
    assert_int_equal(flow_run_next(r), DB);
    assert_int_equal(flow_run_next(r), DC);
    complete(r, DB, false, NULL);
    assert_int_equal(flow_run_next(r), DB2);
    complete(r, DB2, true, "{\"other\":1}"); /* its capture finds nothing */
    assert_int_equal(flow_run_state(r, DB2), FLOW_FAILED);
    assert_string_equal(flow_run_fail_reason(r, DB2), "returned nothing");
    assert_int_equal(flow_run_state(r, DD), FLOW_SKIPPED);
    complete(r, DC, false, NULL);
    assert_int_equal(flow_run_next(r), DC2);
    complete(r, DC2, true, "{\"alt\":null}");
    assert_true(flow_run_done(r));
    assert_int_equal(flow_run_outcome(r), FLOW_OUT_FAILED);
    flow_run_free(r);

    /* a skipped step's fallback is not run: a fails */
    assert_int_equal(flow_run_new(&d, &r), 0);
    assert_int_equal(flow_run_next(r), DA);
    complete(r, DA, false, NULL);
    assert_int_equal(flow_run_next(r), -1);
    assert_true(flow_run_done(r));
    assert_int_equal(flow_run_state(r, DB), FLOW_SKIPPED);
    assert_int_equal(flow_run_state(r, DB2), FLOW_NOT_RUN);
    assert_int_equal(flow_run_state(r, DC2), FLOW_NOT_RUN);
    assert_int_equal(flow_run_state(r, DD), FLOW_SKIPPED);
    assert_int_equal(flow_run_outcome(r), FLOW_OUT_FAILED);
    flow_run_free(r);
    flow_def_release(&d);
}

static void test_capture_missing(void **state)
{
    (void)state;
    struct flow_def d;
    def_init(&d);
    struct flow_step_def *s = add(&d, "search", FLOW_STEP_HTTP, NULL);
    cap(s, "hits", "/hits", false);
    cap(s, "total", "/total", false);
    cap(s, "cursor", "/next", true);
    s = add(&d, "use", FLOW_STEP_HTTP, "[\"{{hits}}\",\"{{cursor}}\",\"c={{cursor}}\"]");
    dep(s, 0);
    check_ok(&d, NULL, 0);

    /* one capture is missing: FAILED, and nothing is captured */
    struct flow_run *r;
    assert_int_equal(flow_run_new(&d, &r), 0);
    assert_int_equal(flow_run_next(r), 0);
    complete(r, 0, true, "{\"hits\":[1,2]}");
    assert_int_equal(flow_run_state(r, 0), FLOW_FAILED);
    assert_string_equal(flow_run_fail_reason(r, 0), "returned nothing");
    /* which capture found nothing: "total" (the first that is not optional) */
    assert_non_null(flow_run_fail_capture(r, 0));
    assert_string_equal(flow_run_fail_capture(r, 0)->var, "total");
    assert_null(flow_run_fail_capture(r, 1));
    assert_null(flow_run_get(r, "hits"));
    assert_int_equal(flow_run_state(r, 1), FLOW_SKIPPED);
    assert_true(flow_run_done(r));
    assert_int_equal(flow_run_outcome(r), FLOW_OUT_FAILED);
    flow_run_free(r);

    /* not JSON, or no body at all */
    static const char *const bad[] = {"{\"hits\":", "<html>", "", NULL};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(flow_run_new(&d, &r), 0);
        assert_int_equal(flow_run_next(r), 0);
        complete(r, 0, true, bad[i]);
        assert_int_equal(flow_run_state(r, 0), FLOW_FAILED);
        assert_string_equal(flow_run_fail_reason(r, 0), "returned nothing");
        assert_null(flow_run_fail_capture(r, 0)); /* not one capture: the body */
        flow_run_free(r);
    }

    /* the optional one missing becomes null */
    assert_int_equal(flow_run_new(&d, &r), 0);
    assert_int_equal(flow_run_next(r), 0);
    complete(r, 0, true, "{\"hits\":[1,2],\"total\":0}");
    assert_int_equal(flow_run_state(r, 0), FLOW_OK);
    assert_true(json_is_null(flow_run_get(r, "cursor")));
    assert_int_equal(flow_run_next(r), 1);
    expect_body(r, 1, "[[1,2],null,\"c=null\"]");
    complete(r, 1, true, NULL);
    assert_int_equal(flow_run_outcome(r), FLOW_OUT_OK);
    flow_run_free(r);

    /* with a fallback, "returned nothing" takes it */
    d.steps[0].fallback = 2;
    s = add(&d, "search_cache", FLOW_STEP_HTTP, NULL);
    s->fallback_only = true;
    cap(s, "hits", "/h", false);
    cap(s, "total", "/t", false);
    cap(s, "cursor", "/c", true);
    check_ok(&d, NULL, 0);
    assert_int_equal(flow_run_new(&d, &r), 0);
    assert_int_equal(flow_run_next(r), 0);
    complete(r, 0, true, "{}");
    assert_int_equal(flow_run_next(r), 2);
    complete(r, 2, true, "{\"h\":\"x\",\"t\":1,\"c\":\"n2\"}");
    assert_int_equal(flow_run_next(r), 1);
    expect_body(r, 1, "[\"x\",\"n2\",\"c=n2\"]");
    complete(r, 1, true, NULL);
    assert_true(flow_run_done(r));
    assert_int_equal(flow_run_outcome(r), FLOW_OUT_DEGRADED);
    flow_run_free(r);
    flow_def_release(&d);
}

/* ---- definition errors ---- */

static void test_def_check_errors(void **state)
{
    (void)state;
    struct flow_def d;

    /* a cycle: a waits for c, c for b, b for a */
    def_init(&d);
    dep(add(&d, "a", FLOW_STEP_HTTP, NULL), 2);
    dep(add(&d, "b", FLOW_STEP_HTTP, NULL), 0);
    dep(add(&d, "c", FLOW_STEP_HTTP, NULL), 1);
    check_fails(&d, NULL, 0, "dependency cycle: 'a' -> 'c' -> 'b' -> 'a'");
    struct flow_run *r = (struct flow_run *)&d; /* must be set to NULL */
    assert_int_equal(flow_run_new(&d, &r), -EINVAL);
    assert_null(r);
    flow_def_release(&d);

    def_init(&d);
    dep(add(&d, "self", FLOW_STEP_HTTP, NULL), 0);
    check_fails(&d, NULL, 0, "dependency cycle: 'self' -> 'self'");
    flow_def_release(&d);

    /* an unknown variable, with the JSON path and a did-you-mean */
    rag_def(&d);
    json_object_set_new(json_array_get(json_object_get(d.steps[2].body, "messages"), 1), "content",
                        json_string("Q: {{questoin}}"));
    check_fails(&d, rag_given, 3,
                "step 'generate': unknown variable {{questoin}}, did you mean {{question}}? (in "
                "body /messages/1/content)");
    json_object_set_new(json_array_get(json_object_get(d.steps[2].body, "messages"), 1), "content",
                        json_string("{{zzz}}"));
    check_fails(&d, rag_given, 3,
                "step 'generate': unknown variable {{zzz}} (in body /messages/1/content)");
    flow_def_release(&d);

    /* captured by a step it does not depend on */
    rag_def(&d);
    d.steps[2].deps[0] = 0;
    check_fails(&d, rag_given, 3,
                "step 'generate': {{passages}} is captured by 'search' which it does not depend "
                "on (in body /messages/0/content)");
    flow_def_release(&d);

    /* ... but a transitive dependency is enough */
    rag_def(&d);
    json_object_set_new(d.steps[2].body, "v", json_string("{{vec}}"));
    check_ok(&d, rag_given, 3);
    /* a step cannot use its own capture */
    json_object_set_new(d.steps[2].body, "v", json_string("{{answer}}"));
    check_fails(&d, rag_given, 3,
                "step 'generate': {{answer}} is captured by the step itself (in body /v)");
    json_object_del(d.steps[2].body, "v");
    /* url and header templates are checked too, and given vars spelled */
    set_url(&d.steps[1], "http://127.0.0.1:1/{{question");
    check_fails(&d, rag_given, 3, "step 'search': unclosed '{{' in \"{{question\" (in url)");
    set_url(&d.steps[1], "http://127.0.0.1:1/{{ 1x }}");
    check_fails(&d, rag_given, 3,
                "step 'search': bad placeholder '{{ 1x }}' (a name is [A-Za-z_][A-Za-z0-9_.]*, "
                "at most 64 bytes) (in url)");
    set_url(&d.steps[1], "http://127.0.0.1:1/");
    hdr(&d.steps[1], "X-Q: {{tracee}}");
    check_fails(
        &d, rag_given, 3,
        "step 'search': unknown variable {{tracee}}, did you mean {{trace}}? (in header 2)");
    flow_def_release(&d);

    /* a capture that clashes with a given variable, or another step's */
    rag_def(&d);
    cap(&d.steps[1], "question", "/q", false);
    check_fails(&d, rag_given, 3,
                "step 'search': capture {{question}} clashes with a given variable");
    flow_def_release(&d);
    rag_def(&d);
    cap(&d.steps[2], "vec", "/v", false);
    check_fails(&d, rag_given, 3, "step 'generate': {{vec}} is also captured by 'embed'");
    flow_def_release(&d);
    rag_def(&d);
    ts_free(d.steps[0].captures[0].pointer);
    d.steps[0].captures[0].pointer = ts_strdup("data/0");
    check_fails(&d, rag_given, 3, "step 'embed': capture {{vec}}: bad JSON pointer 'data/0'");
    flow_def_release(&d);

    /* fallback rules */
    rag_def(&d);
    d.steps[1].fallback = 2;
    check_fails(&d, rag_given, 3, "step 'search': its fallback 'generate' must be fallback_only");
    d.steps[1].fallback = 7;
    check_fails(&d, rag_given, 3, "step 'search': fallback 7 is out of range (3 steps)");
    d.steps[1].fallback = -1;
    struct flow_step_def *fb = add(&d, "search_cache", FLOW_STEP_HTTP, NULL);
    fb->fallback_only = true;
    check_fails(&d, rag_given, 3,
                "step 'search_cache' is fallback_only but no step falls back to it");
    d.steps[1].fallback = 3;
    cap(fb, "passages", "/p", false);
    check_fails(&d, rag_given, 3,
                "step 'generate': {{top_score}} is captured by 'search' but not by "
                "'search_cache', which may run in its place (in body /metadata/score)");
    cap(fb, "top_score", "/s", false);
    check_ok(&d, rag_given, 3);
    dep(fb, 2);
    check_fails(&d, rag_given, 3,
                "step 'search': its fallback 'search_cache' depends on 'generate', which "
                "'search' does not depend on");
    fb->deps[0] = 0; /* embed: search depends on it */
    check_ok(&d, rag_given, 3);
    dep(&d.steps[2], 3);
    check_fails(&d, rag_given, 3,
                "step 'generate' depends on 'search_cache', which is fallback_only (depend on "
                "the step it stands in for)");
    d.steps[2].ndeps = 1;
    d.steps[0].fallback = 3;
    check_fails(&d, rag_given, 3,
                "step 'search': 'search_cache' is already the fallback of 'embed'");
    flow_def_release(&d);

    /* names, ranges, kinds */
    def_init(&d);
    add(&d, "a", FLOW_STEP_HTTP, NULL);
    add(&d, "a", FLOW_STEP_HTTP, NULL);
    check_fails(&d, NULL, 0, "two steps are named 'a'");
    ts_free(d.steps[1].name);
    d.steps[1].name = ts_strdup("b");
    dep(&d.steps[1], 5);
    check_fails(&d, NULL, 0, "step 'b': depends on step 5, out of range (2 steps)");
    d.steps[1].deps[0] = 0;
    set_url(&d.steps[1], NULL);
    check_fails(&d, NULL, 0, "step 'b': an http step needs a url");
    set_url(&d.steps[1], "http://127.0.0.1:1/");
    hdr(&d.steps[1], "no colon");
    check_fails(&d, NULL, 0, "step 'b': header 1 is not 'Name: value'");
    flow_def_release(&d);
    def_init(&d);
    check_fails(&d, NULL, 0, "a flow needs at least one step");
    flow_def_release(&d);
}

/* ---- templates ---- */

static void vset(struct flow_vars *v, const char *name, const char *json)
{
    assert_int_equal(flow_vars_set(v, name, js(json)), 0);
}

static char *render_text(const json_t *tmpl, const struct flow_vars *v)
{
    json_t *out;
    char err[256];
    if (flow_template_render(tmpl, v, &out, err, sizeof(err)) != 0)
        fail_msg("render: %s", err);
    struct buf b;
    buf_init(&b, FLOW_RENDER_MAX);
    assert_int_equal(flow_json_dump(&b, out), 0);
    json_decref(out);
    size_t n;
    return buf_take(&b, &n);
}

static void test_template_escaping(void **state)
{
    (void)state;
    struct flow_vars v;
    flow_vars_init(&v);
    vset(&v, "q", "\"say \\\"hi\\\"\\n\\tand \\\\ bye\"");
    json_t *t = js("{\"content\":\"Q: {{q}}!\",\"raw\":\"{{q}}\",\"k\\\"ey\":\"{{q}}{{q}}\"}");
    char *s = render_text(t, &v);
    assert_string_equal(s, "{\"content\":\"Q: say \\\"hi\\\"\\n\\tand \\\\ bye!\","
                           "\"raw\":\"say \\\"hi\\\"\\n\\tand \\\\ bye\","
                           "\"k\\\"ey\":\"say \\\"hi\\\"\\n\\tand \\\\ byesay \\\"hi\\\"\\n\\tand "
                           "\\\\ bye\"}");
    json_t *back = js(s);
    assert_string_equal(json_string_value(json_object_get(back, "content")),
                        "Q: say \"hi\"\n\tand \\ bye!");
    json_decref(back);
    ts_free(s);
    json_decref(t);

    /* a structured value substituted in text is escaped too */
    vset(&v, "o", "{\"a\":\"x\\\"y\",\"n\":[1,2.5]}");
    t = js("[\"o={{o}}\",\"{{o}}\"]");
    s = render_text(t, &v);
    assert_string_equal(s, "[\"o={\\\"a\\\":\\\"x\\\\\\\"y\\\",\\\"n\\\":[1,2.5]}\","
                           "{\"a\":\"x\\\"y\",\"n\":[1,2.5]}]");
    ts_free(s);
    json_decref(t);
    flow_vars_release(&v);
}

static void test_template_types(void **state)
{
    (void)state;
    struct flow_vars v;
    flow_vars_init(&v);
    vset(&v, "i", "42");
    vset(&v, "r", "0.1");
    vset(&v, "r2", "2.0");
    vset(&v, "big", "1e300");
    vset(&v, "t", "true");
    vset(&v, "n", "null");
    vset(&v, "a", "[1,\"x\"]");
    vset(&v, "o", "{\"k\":1.5}");
    vset(&v, "s", "\"text\"");
    vset(&v, "x.y_z", "\"dotted\"");
    json_t *t = js("{\"text\":\"{{i}}/{{r}}/{{r2}}/{{big}}/{{t}}/{{n}}/{{a}}/{{o}}/{{s}}\","
                   "\"i\":\"{{i}}\",\"r\":\"{{ r }}\",\"r2\":\"{{\\tr2 }}\",\"t\":\"{{t}}\","
                   "\"n\":\"{{n}}\",\"a\":\"{{a}}\",\"o\":\"{{o}}\",\"sp\":\" {{i}}\","
                   "\"d\":\"{{x.y_z}}\",\"lit\":[1,2.5,true,null,\"plain } { }}\"]}");
    char *s = render_text(t, &v);
    assert_string_equal(
        s, "{\"text\":\"42/0.1/2.0/1e+300/true/null/[1,\\\"x\\\"]/{\\\"k\\\":1.5}/text\","
           "\"i\":42,\"r\":0.1,\"r2\":2.0,\"t\":true,\"n\":null,\"a\":[1,\"x\"],"
           "\"o\":{\"k\":1.5},\"sp\":\" 42\",\"d\":\"dotted\",\"lit\":[1,2.5,true,null,"
           "\"plain } { }}\"]}");
    ts_free(s);

    /* the rendered value is a copy: changing it leaves the variable alone */
    json_t *out;
    char err[256];
    assert_int_equal(flow_template_render(t, &v, &out, err, sizeof(err)), 0);
    assert_true(json_is_integer(json_object_get(out, "i")));
    assert_true(json_is_real(json_object_get(out, "r2")));
    json_array_append_new(json_object_get(out, "a"), json_integer(3));
    assert_int_equal(json_array_size(flow_vars_get(&v, "a", 1)), 2);
    json_decref(out);
    json_decref(t);

    /* render_string: for URLs and headers, no escaping */
    struct buf b;
    buf_init(&b, 64);
    assert_int_equal(buf_append_str(&b, ">"), 0);
    assert_int_equal(flow_template_render_string("Bearer {{s}} {{a}}", &v, &b, err, sizeof(err)),
                     0);
    assert_string_equal(buf_cstr(&b), ">Bearer text [1,\"x\"]");
    assert_int_equal(flow_template_render_string("{{nope}}", &v, &b, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "unknown variable {{nope}}");
    assert_string_equal(buf_cstr(&b), ">Bearer text [1,\"x\"]"); /* unchanged */
    buf_release(&b);
    buf_init(&b, 8);
    assert_int_equal(flow_template_render_string("{{s}}{{s}}{{s}}", &v, &b, err, sizeof(err)),
                     TS_TOOBIG);
    assert_int_equal(b.len, 0);
    buf_release(&b);
    flow_vars_release(&v);
}

static void test_template_errors(void **state)
{
    (void)state;
    struct flow_vars v;
    flow_vars_init(&v);
    vset(&v, "passages", "[]");
    json_t *out = (json_t *)&v;
    char err[256];
    json_t *t = js("{\"messages\":[{\"content\":\"ok {{passages}}\"},{\"content\":\"{{nope}}\"}]}");
    assert_int_equal(flow_template_render(t, &v, &out, err, sizeof(err)), -EINVAL);
    assert_null(out);
    assert_string_equal(err, "unknown variable {{nope}} (in /messages/1/content)");
    json_decref(t);

    /* checks: path with escaped keys, did-you-mean, no path at the root */
    static const char *const known[] = {"passages", "question"};
    t = js("{\"a/b\":{\"m~n\":[\"x\",\"{{pasages}}\"]}}");
    assert_int_equal(flow_template_check(t, known, 2, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "unknown variable {{pasages}}, did you mean {{passages}}? (in "
                             "/a~1b/m~0n/1)");
    assert_int_equal(flow_template_check(t, NULL, 0, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "unknown variable {{pasages}} (in /a~1b/m~0n/1)");
    json_decref(t);
    t = js("\"{{question}} and {{ passages }}\"");
    assert_int_equal(flow_template_check(t, known, 2, err, sizeof(err)), 0);
    json_decref(t);
    t = js("\"tail {{question\"");
    assert_int_equal(flow_template_check(t, known, 2, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "unclosed '{{' in \"{{question\"");
    json_decref(t);
    t = js("[\"{{}}\"]");
    assert_int_equal(flow_template_check(t, known, 2, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "bad placeholder '{{}}' (a name is [A-Za-z_][A-Za-z0-9_.]*, at most "
                             "64 bytes) (in /0)");
    assert_int_equal(flow_template_render(t, &v, &out, err, sizeof(err)), -EINVAL);
    json_decref(t);

    /* too deep */
    char deep[200];
    memset(deep, '[', 70);
    memset(deep + 70, ']', 70);
    deep[140] = '\0';
    t = js(deep);
    assert_int_equal(flow_template_check(t, NULL, 0, err, sizeof(err)), TS_TOOBIG);
    assert_int_equal(flow_template_render(t, &v, &out, err, sizeof(err)), TS_TOOBIG);
    json_decref(t);
    flow_vars_release(&v);
}

static void test_caps(void **state)
{
    (void)state;
    struct flow_vars v;
    flow_vars_init(&v);
    char name[16];
    for (int i = 0; i < FLOW_VARS_MAX; i++) {
        snprintf(name, sizeof(name), "v%d", i);
        assert_int_equal(flow_vars_set(&v, name, json_integer(i)), 0);
    }
    assert_int_equal(flow_vars_set(&v, "one_more", json_integer(1)), TS_TOOBIG);
    assert_int_equal(flow_vars_set(&v, "v7", json_string("replaced")), 0); /* not new */
    assert_string_equal(json_string_value(flow_vars_get(&v, "v7", 2)), "replaced");
    assert_int_equal(v.n, FLOW_VARS_MAX);
    flow_vars_release(&v);

    assert_int_equal(flow_vars_set(&v, "1bad", json_true()), -EINVAL);
    assert_int_equal(flow_vars_set(&v, "has space", json_true()), -EINVAL);
    assert_int_equal(flow_vars_set(&v, "ok", NULL), -EINVAL);

    /* a value over 1 MiB as compact JSON: the string's quotes count */
    char *big = ts_malloc(FLOW_VAR_VALUE_MAX);
    assert_non_null(big);
    memset(big, 'a', FLOW_VAR_VALUE_MAX);
    assert_int_equal(flow_vars_set(&v, "big", json_stringn(big, FLOW_VAR_VALUE_MAX - 1)),
                     TS_TOOBIG);
    assert_null(flow_vars_get(&v, "big", 3));
    assert_int_equal(flow_vars_set(&v, "big", json_stringn(big, FLOW_VAR_VALUE_MAX - 2)), 0);
    ts_free(big);

    /* 17 copies of a 1 MiB value exceed the 16 MiB body */
    json_t *t = json_array();
    for (int i = 0; i < 17; i++)
        json_array_append_new(t, json_string(i % 2 ? "{{big}}" : "x{{big}}"));
    json_t *out;
    char err[256];
    assert_int_equal(flow_template_render(t, &v, &out, err, sizeof(err)), TS_TOOBIG);
    assert_null(out);
    json_array_remove(t, 0);
    assert_int_equal(flow_template_render(t, &v, &out, err, sizeof(err)), 0);
    json_decref(out);
    json_decref(t);
    flow_vars_release(&v);

    /* the same through a run: the body is capped, render fails cleanly */
    struct flow_def d;
    def_init(&d);
    struct flow_step_def *s = add(&d, "a", FLOW_STEP_CHAT, NULL);
    s->body = json_array();
    for (int i = 0; i < 17; i++)
        json_array_append_new(s->body, json_string("{{big}}"));
    const char *const given[] = {"big"};
    check_ok(&d, given, 1);
    struct flow_run *r;
    assert_int_equal(flow_run_new(&d, &r), 0);
    big = ts_malloc(FLOW_VAR_VALUE_MAX);
    memset(big, 'b', FLOW_VAR_VALUE_MAX);
    assert_int_equal(flow_run_set(r, "big", json_stringn(big, FLOW_VAR_VALUE_MAX - 2)), 0);
    ts_free(big);
    assert_int_equal(flow_run_next(r), 0);
    struct flow_request q;
    assert_int_equal(flow_run_render(r, 0, &q, err, sizeof(err)), TS_TOOBIG);
    assert_null(q.body);
    assert_string_equal(err,
                        "step 'a': body: the rendered body is larger than 16777216 bytes (in /15)");
    complete(r, 0, false, NULL);
    assert_int_equal(flow_run_outcome(r), FLOW_OUT_FAILED);
    flow_run_free(r);
    flow_def_release(&d);
}

static void test_render_url_and_headers(void **state)
{
    (void)state;
    struct flow_def d;
    def_init(&d);
    struct flow_step_def *s = add(&d, "tool", FLOW_STEP_HTTP, NULL);
    set_url(s, "{{base}}/v1/tool?arg={{arg}}&n={{n}}");
    hdr(s, "Authorization: Bearer {{key}}");
    const char *const given[] = {"base", "arg", "n", "key"};
    check_ok(&d, given, 4);
    struct flow_run *r;
    assert_int_equal(flow_run_new(&d, &r), 0);
    set(r, "base", "\"http://127.0.0.1:9\"");
    set(r, "arg", "\"a&b=c/d é~\"");
    set(r, "n", "[1]");
    set(r, "key", "\"sk-1\"");
    assert_int_equal(flow_run_next(r), 0);
    struct flow_request q;
    char err[256];
    assert_int_equal(flow_run_render(r, 0, &q, err, sizeof(err)), 0);
    assert_string_equal(q.method, "GET");
    assert_null(q.body);
    assert_string_equal(q.url, "http://127.0.0.1:9/v1/tool?arg=a%26b%3Dc%2Fd%20%C3%A9~&n=%5B1%5D");
    assert_string_equal(q.headers[0], "Authorization: Bearer sk-1");
    flow_request_release(&q);

    /* a line break in a header value or a blank in the URL path */
    set(r, "key", "\"x\\r\\nEvil: 1\"");
    assert_int_equal(flow_run_render(r, 0, &q, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "step 'tool': header 1: the rendered header has a line break or NUL");
    assert_null(q.headers);
    set(r, "key", "\"k\"");
    set(r, "base", "\"http://h x\"");
    assert_int_equal(flow_run_render(r, 0, &q, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "step 'tool': url: the rendered url has a space at byte 8");
    set(r, "base", "\"http://127.0.0.1:9\"");
    /* a step that is not RUNNING */
    complete(r, 0, true, NULL);
    assert_int_equal(flow_run_render(r, 0, &q, err, sizeof(err)), -EINVAL);
    flow_run_free(r);
    flow_def_release(&d);
}

/* ---- allocation failures: every failing allocation gives -ENOMEM,
 * leaves the run usable, and a retry ends exactly as without failures ---- */

static void must_set(struct flow_run *r, const char *name, const char *json, long *fails)
{
    int rc;
    while ((rc = flow_run_set(r, name, js(json))) == -ENOMEM) {
        ++*fails;
        ts_alloc_fail_after(-1);
    }
    assert_int_equal(rc, 0);
}

static void test_alloc_failures(void **state)
{
    (void)state;
    struct flow_def d;
    rag_def(&d);
    const char *resp[] = {RAG_EMBED_RESP, RAG_SEARCH_RESP, RAG_GEN_RESP};
    long total_fails = 0;
    for (long n = 0; n < 200; n++) {
        long fails = 0;
        ts_alloc_fail_after(n);
        struct flow_run *r = NULL;
        int rc;
        while ((rc = flow_run_new(&d, &r)) == -ENOMEM) {
            fails++;
            ts_alloc_fail_after(-1);
        }
        assert_int_equal(rc, 0);
        must_set(r, "question", "\"What is RAG?\"", &fails);
        must_set(r, "k", "3", &fails);
        must_set(r, "trace", "\"abc\"", &fails);
        char *last_body = NULL;
        int step;
        while ((step = flow_run_next(r)) >= 0) {
            struct flow_request q;
            char err[256];
            while ((rc = flow_run_render(r, (uint32_t)step, &q, err, sizeof(err))) == -ENOMEM) {
                fails++;
                assert_null(q.body);
                assert_null(q.url);
                ts_alloc_fail_after(-1);
            }
            assert_int_equal(rc, 0);
            if (step == 2) {
                ts_free(last_body);
                last_body = q.body;
                q.body = NULL;
            }
            flow_request_release(&q);
            const char *b = resp[step];
            while ((rc = flow_run_complete(r, (uint32_t)step, true, b, strlen(b))) == -ENOMEM) {
                fails++;
                assert_int_equal(flow_run_state(r, (uint32_t)step), FLOW_RUNNING);
                ts_alloc_fail_after(-1);
            }
            assert_int_equal(rc, 0);
        }
        ts_alloc_fail_after(-1);
        assert_true(flow_run_done(r));
        assert_int_equal(flow_run_outcome(r), FLOW_OUT_OK);
        assert_non_null(last_body);
        assert_string_equal(last_body, RAG_GEN_BODY);
        assert_string_equal(json_string_value(flow_run_get(r, "answer")), "42");
        ts_free(last_body);
        flow_run_free(r);
        total_fails += fails;
        if (fails == 0)
            break; /* n is past the last allocation */
    }
    assert_true(total_fails > 10);
    flow_def_release(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rag_flow),
        cmocka_unit_test(test_diamond_waits_for_both),
        cmocka_unit_test(test_failure_skips_dependants),
        cmocka_unit_test(test_fallback_takes_the_place),
        cmocka_unit_test(test_capture_missing),
        cmocka_unit_test(test_def_check_errors),
        cmocka_unit_test(test_template_escaping),
        cmocka_unit_test(test_template_types),
        cmocka_unit_test(test_template_errors),
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_render_url_and_headers),
        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests_name("flow", tests, NULL, NULL);
}
