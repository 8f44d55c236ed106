/*
 * retrieval.c - a flow's retrieval steps: their stores, the answer steps,
 * and recall@k of one search answer.
 */
#include "scenario/retrieval.h"

#include <errno.h>
#include <string.h>

#include <jansson.h>

#include "base/alloc.h"
#include "llm/openai.h"
#include "sim/vstore.h"

_Static_assert(FLOW_RETRIEVAL_K_MAX <= VSTORE_MAX_RESULTS, "k of a retrieval step");
_Static_assert(FLOW_STEPS_MAX <= 64, "steps fit a 64-bit mask");

/* The step a fallback_only step stands in for, or -1. */
static int stands_for(const struct flow_def *d, size_t f)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->steps[i].fallback == (int32_t)f)
            return (int)i;
    return -1;
}

/* Answer steps: LLM steps nothing depends on, and the fallbacks of answers. */
static uint64_t answer_steps(const struct flow_def *d)
{
    uint64_t depended = 0, ans = 0;
    for (size_t i = 0; i < d->n; i++)
        for (size_t j = 0; j < d->steps[i].ndeps; j++)
            if (d->steps[i].deps[j] < 64)
                depended |= 1ull << d->steps[i].deps[j];
    for (size_t i = 0; i < d->n; i++) {
        const struct flow_step_def *st = &d->steps[i];
        bool llm = st->kind == FLOW_STEP_CHAT || st->kind == FLOW_STEP_COMPLETION;
        if (llm && !st->fallback_only && !(depended >> i & 1))
            ans |= 1ull << i;
    }
    /* a chain of fallbacks is at most n long */
    for (size_t round = 0; round < d->n; round++)
        for (size_t i = 0; i < d->n; i++) {
            const struct flow_step_def *st = &d->steps[i];
            int s = st->fallback_only ? stands_for(d, i) : -1;
            if (s >= 0 && (ans >> s & 1) &&
                (st->kind == FLOW_STEP_CHAT || st->kind == FLOW_STEP_COMPLETION))
                ans |= 1ull << i;
        }
    return ans;
}

/* before[i]: the retrieval steps step i depends on, directly or not; a
 * fallback inherits those of the step it stands in for. */
static void fill_before(struct flow_retrieval *r, const struct flow_def *d)
{
    bool changed = true;
    for (size_t round = 0; changed && round <= d->n; round++) {
        changed = false;
        for (size_t i = 0; i < d->n; i++) {
            uint64_t b = r->before[i];
            for (size_t j = 0; j < d->steps[i].ndeps; j++) {
                /* the step depended on, or any fallback that stood in for it */
                int32_t dep = (int32_t)d->steps[i].deps[j];
                for (size_t hop = 0; dep >= 0 && (size_t)dep < d->n && hop <= d->n; hop++) {
                    b |= r->before[dep] | (r->retrievals & (1ull << dep));
                    dep = d->steps[dep].fallback;
                }
            }
            int s = d->steps[i].fallback_only ? stands_for(d, i) : -1;
            if (s >= 0)
                b |= r->before[s];
            changed |= b != r->before[i];
            r->before[i] = b;
        }
    }
}

/* The store of step i: one already loaded for the same docs, or a new one. */
static int load_store(struct flow_retrieval *r, const struct flow_def *d, size_t i, char *err,
                      size_t errlen)
{
    const char *docs = d->steps[i].retrieval_docs;
    for (size_t j = 0; j < i; j++) {
        const char *o = d->steps[j].retrieval_docs;
        if (r->store[j] && ((!docs && !o) || (docs && o && !strcmp(docs, o)))) {
            r->store[i] = r->store[j];
            return 0;
        }
    }
    char why[512] = "";
    int rc = docs ? vstore_load(docs, VSTORE_DIMS_DEFAULT, &r->store[i], why, sizeof(why))
                  : vstore_new_builtin(VSTORE_DIMS_DEFAULT, &r->store[i]);
    if (rc)
        ts_errf(err, errlen, "step '%s': retrieval: %s", d->steps[i].name,
                why[0] ? why : ts_strerror(rc));
    return rc;
}

int flow_retrieval_init(struct flow_retrieval *r, const struct flow_def *d, char *err,
                        size_t errlen)
{
    memset(r, 0, sizeof(*r));
    if (d->n > 64) {
        ts_errf(err, errlen, "a flow with retrieval steps has at most 64 steps");
        return -EINVAL;
    }
    r->n = d->n;
    r->store = ts_calloc(d->n ? d->n : 1, sizeof(*r->store));
    r->before = ts_calloc(d->n ? d->n : 1, sizeof(*r->before));
    if (!r->store || !r->before) {
        ts_errf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    for (size_t i = 0; i < d->n; i++) {
        if (!d->steps[i].retrieval_k)
            continue;
        r->retrievals |= 1ull << i;
        int rc = load_store(r, d, i, err, errlen);
        if (rc)
            return rc;
    }
    r->answers = answer_steps(d);
    fill_before(r, d);
    return 0;
}

void flow_retrieval_release(struct flow_retrieval *r)
{
    for (size_t i = 0; r->store && i < r->n; i++) {
        bool shared = false;
        for (size_t j = 0; j < i && !shared; j++)
            shared = r->store[j] == r->store[i];
        if (!shared)
            vstore_free(r->store[i]);
    }
    ts_free(r->store);
    ts_free(r->before);
    memset(r, 0, sizeof(*r));
}

int flow_retrieval_measure(const struct flow_retrieval *r, const struct flow_def *d, uint32_t step,
                           const char *req, size_t req_len, const char *body, size_t len,
                           double *recall, uint32_t *k)
{
    if (step >= r->n || !r->store[step] || !req || !body || len > FLOW_RESPONSE_MAX)
        return 0;
    struct vstore_query q;
    struct openai_error e;
    vstore_query_init(&q);
    int rc = vstore_query_parse(&q, req, req_len, &e);
    if (rc) {
        vstore_query_release(&q);
        return rc == -ENOMEM ? rc : 0;
    }
    json_t *doc = json_loadb(body, len, 0, NULL);
    json_t *data = json_object_get(doc, "data");
    const char *ids[FLOW_RETRIEVAL_K_MAX];
    size_t n = 0, used = 0;
    rc = 0;
    if (json_is_array(data)) {
        for (size_t i = 0; i < json_array_size(data) && n < FLOW_RETRIEVAL_K_MAX; i++)
            ids[n++] = json_string_value(json_object_get(json_array_get(data, i), "file_id"));
        rc = vstore_recall(r->store[step], q.text, q.len, ids, n, d->steps[step].retrieval_k,
                           recall, &used);
        rc = rc ? rc : used ? 1 : 0;
        *k = (uint32_t)used;
    }
    json_decref(doc);
    vstore_query_release(&q);
    return rc;
}
