/*
 * Fuzz the {{var}} templates of flows. The input is a template (JSON; when
 * it is not JSON its text is used as one string template), a NUL byte, and
 * a JSON object of variables. Invariants:
 *  - a template that flow_template_check accepts with every set variable
 *    renders (or is too big);
 *  - the rendered value dumped by flow_json_dump is valid JSON that reads
 *    back equal to it;
 *  - the body flow_run_render writes without building the value is the
 *    same bytes.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "scenario/flow.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

static json_t *parse_template(const char *s, size_t n)
{
    json_error_t e;
    json_t *t = json_loadb(s, n, JSON_DECODE_ANY, &e);
    return t ? t : json_stringn(s, n); /* NULL when not UTF-8 */
}

/* Renders t through a one-step flow; returns flow_run_render's code and the
 * body in *body (ts_free it). */
static int render_via_run(json_t *t, json_t *vars, char **body, size_t *len)
{
    struct flow_step_def step = {.name = "s", .kind = FLOW_STEP_CHAT, .fallback = -1, .body = t};
    struct flow_def d = {.steps = &step, .n = 1};
    struct flow_run *r;
    *body = NULL;
    CHECK(flow_run_new(&d, &r) == 0);
    const char *k;
    json_t *v;
    json_object_foreach(vars, k, v)
    {
        if (flow_run_set(r, k, json_incref(v)) == -ENOMEM)
            abort();
    }
    CHECK(flow_run_next(r) == 0);
    struct flow_request q;
    char err[512];
    int rc = flow_run_render(r, 0, &q, err, sizeof(err));
    if (rc == 0) {
        *body = q.body;
        *len = q.body_len;
        q.body = NULL;
        flow_request_release(&q);
    }
    CHECK(flow_run_complete(r, 0, rc == 0, NULL, 0) == 0);
    CHECK(flow_run_done(r));
    flow_run_free(r);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    const char *nul = memchr(s, '\0', size);
    size_t tlen = nul ? (size_t)(nul - s) : size;
    json_t *t = parse_template(s, tlen);
    if (!t)
        return 0;
    json_error_t e;
    json_t *vars = nul ? json_loadb(nul + 1, size - tlen - 1, 0, &e) : NULL;
    if (!json_is_object(vars)) {
        json_decref(vars);
        vars = json_object();
    }

    struct flow_vars fv;
    flow_vars_init(&fv);
    const char *known[FLOW_VARS_MAX];
    size_t nknown = 0;
    const char *k;
    json_t *v;
    json_object_foreach(vars, k, v)
    {
        int rc = flow_vars_set(&fv, k, json_incref(v));
        CHECK(rc != -ENOMEM);
        if (rc == 0 && nknown < FLOW_VARS_MAX)
            known[nknown++] = k;
    }

    char err[512];
    int check = flow_template_check(t, known, nknown, err, sizeof(err));
    json_t *out = NULL;
    int rc = flow_template_render(t, &fv, &out, err, sizeof(err));
    CHECK(rc != -ENOMEM);
    if (check == 0)
        CHECK(rc == 0 || rc == TS_TOOBIG);
    CHECK((rc == 0) == (out != NULL));

    char *body;
    size_t blen;
    int rrc = render_via_run(t, vars, &body, &blen);
    if (rc == 0) {
        struct buf b;
        buf_init(&b, FLOW_RENDER_MAX);
        int drc = flow_json_dump(&b, out);
        if (drc == 0) {
            json_t *back = json_loadb(b.data, b.len, JSON_DECODE_ANY, &e);
            CHECK(back && json_equal(back, out));
            json_decref(back);
            if (rrc == 0)
                CHECK(blen == b.len && memcmp(body, b.data, blen) == 0);
        }
        buf_release(&b);
    }
    if (rc == -EINVAL || rrc == -EINVAL)
        CHECK(rc == rrc);
    ts_free(body);
    json_decref(out);

    if (json_is_string(t)) {
        struct buf b;
        buf_init(&b, 1 << 16);
        int src = flow_template_render_string(json_string_value(t), &fv, &b, err, sizeof(err));
        CHECK(src != -ENOMEM);
        CHECK(src != 0 || b.len <= b.max);
        buf_release(&b);
    }
    flow_vars_release(&fv);
    json_decref(vars);
    json_decref(t);
    return 0;
}
