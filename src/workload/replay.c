/*
 * replay.c - a recording as a workload (replay.h).
 */
#include "workload/replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "llm/text.h"

/* The path without its query, into out. */
static void bare_path(const char *p, char *out, size_t n)
{
    size_t l = strcspn(p, "?");
    snprintf(out, n, "%.*s", (int)l, p);
}

int replay_endpoint(const struct recording *rec, char *path, size_t n, enum workload_endpoint *ep,
                    char *err, size_t errlen)
{
    static const struct {
        const char *path;
        enum workload_endpoint ep;
    } eps[] = {{"/v1/chat/completions", WORKLOAD_CHAT},
               {"/v1/completions", WORKLOAD_COMPLETIONS},
               {"/v1/embeddings", WORKLOAD_EMBEDDINGS}};
    size_t count[3] = {0, 0, 0}, other = 0;
    for (size_t i = 0; i < rec->n; i++) {
        char p[256];
        if (strcmp(rec->v[i].method, "POST"))
            continue;
        bare_path(rec->v[i].path, p, sizeof p);
        size_t k = 0;
        while (k < 3 && strcmp(p, eps[k].path))
            k++;
        if (k < 3)
            count[k]++;
        else
            other++;
    }
    size_t best =
        count[0] >= count[1] ? (count[0] >= count[2] ? 0 : 2) : (count[1] >= count[2] ? 1 : 2);
    if (!count[best]) {
        ts_errf(err, errlen,
                "--replay: no POST to /v1/chat/completions, /v1/completions or /v1/embeddings in "
                "the recording (%zu other POSTs)",
                other);
        return -EINVAL;
    }
    snprintf(path, n, "%s", eps[best].path);
    *ep = eps[best].ep;
    return 0;
}

/* Appends the answer's text of one chunk or body (choices[0].delta.content,
 * .text or .message.content) to out. 0 or TS_TOOBIG (over 1 MiB). */
static int answer_of(const char *json, size_t len, struct buf *out)
{
    json_t *j = json_loadb(json, len, 0, NULL);
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    json_t *t = json_object_get(json_object_get(c, "delta"), "content");
    if (!json_is_string(t))
        t = json_object_get(c, "text");
    if (!json_is_string(t))
        t = json_object_get(json_object_get(c, "message"), "content");
    int rc = json_is_string(t) ? buf_append(out, json_string_value(t), json_string_length(t)) : 0;
    json_decref(j);
    return rc;
}

/* One exchange into an item. */
static int take(struct replay_item *it, const struct rec_exchange *x)
{
    struct buf ans;
    buf_init(&ans, 1u << 20);
    int arc = 0; /* past 1 MiB the reference stops there */
    for (size_t k = 0; k < x->nev && !arc; k++)
        if (strcmp(x->ev[k].data, "[DONE]"))
            arc = answer_of(x->ev[k].data, x->ev[k].len, &ans);
    if (x->resp_body && !arc)
        arc = answer_of(x->resp_body, x->resp_len, &ans);
    it->reference = ans.len ? buf_take(&ans, NULL) : NULL;
    buf_release(&ans);
    it->body = ts_malloc(x->body_len + 1);
    if (!it->body)
        return -ENOMEM;
    memcpy(it->body, x->body, x->body_len + 1);
    it->body_len = x->body_len;
    json_t *j = json_loadb(x->body, x->body_len, 0, NULL);
    json_t *mt = json_object_get(j, "max_tokens");
    if (!mt)
        mt = json_object_get(j, "max_completion_tokens");
    json_int_t m = json_integer_value(mt);
    it->max_tokens = m > 0 && m < UINT32_MAX ? (uint32_t)m : 0;
    it->stream = json_is_true(json_object_get(j, "stream"));
    json_decref(j);
    it->prompt_tokens = (uint32_t)text_count_tokens(x->body, x->body_len);
    return 0;
}

int workload_init_replay(struct workload *w, const struct recording *rec, const char *path,
                         uint64_t **times, size_t *ntimes, char *err, size_t errlen)
{
    memset(w, 0, sizeof(*w));
    prompts_init(&w->prompts);
    *times = NULL;
    *ntimes = 0;
    w->replay = ts_calloc(rec->n ? rec->n : 1, sizeof *w->replay);
    uint64_t *t = ts_calloc(rec->n ? rec->n : 1, sizeof *t);
    int rc = w->replay && t ? 0 : -ENOMEM;
    uint64_t first = 0;
    for (size_t i = 0; !rc && i < rec->n; i++) {
        const struct rec_exchange *x = &rec->v[i];
        char p[256];
        bare_path(x->path, p, sizeof p);
        if (strcmp(x->method, "POST") || strcmp(p, path))
            continue;
        if (!w->nreplay)
            first = x->offset_ns;
        t[w->nreplay] = x->offset_ns - first;
        rc = take(&w->replay[w->nreplay++], x);
    }
    if (rc) {
        ts_errf(err, errlen, "--replay: out of memory");
        ts_free(t);
        workload_release(w);
        return rc;
    }
    w->stream = w->nreplay && w->replay[0].stream;
    *times = t;
    *ntimes = w->nreplay;
    return 0;
}
