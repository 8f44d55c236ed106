/*
 * vector_embed.c - text queries embedded by the target (vector_embed.h).
 */
#include "app/vector_embed.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/clock.h"
#include "llm/errbody.h"
#include "llm/openai_chunk.h"
#include "workload/prompts.h"

bool vector_embed_is_spec(const char *spec)
{
    return spec && !strncmp(spec, VECTOR_EMBED_PREFIX, strlen(VECTOR_EMBED_PREFIX));
}

int vector_embed_answer(const char *body, size_t len, size_t first, size_t n, struct vecset *out,
                        char *err, size_t errlen)
{
    struct openai_decoder d;
    struct openai_chunk c;
    openai_decoder_init(&d);
    int rc = 0;
    if (openai_decode_body(&d, body, len, &c)) {
        ts_errf(err, errlen, "the answer is not JSON: %s", openai_decoder_errmsg(&d));
        rc = TS_PARSE;
    } else if (!(c.flags & OPENAI_CHUNK_EMBEDDINGS) || c.n_embeddings != n) {
        ts_errf(err, errlen, "expected %zu embeddings in \"data\", got %zu", n, c.n_embeddings);
        rc = TS_PARSE;
    }
    for (size_t i = 0; !rc && i < n; i++) {
        const struct openai_embedding *e = &c.embeddings[i];
        size_t at = e->index < 0 ? i : (size_t)e->index;
        if (!out->dim && e->dims >= 1 && e->dims <= VECSET_MAX_DIM) {
            out->dim = e->dims;
            out->v = ts_calloc(out->n * out->dim, sizeof(float));
            if (!out->v) {
                ts_errf(err, errlen, "out of memory");
                rc = -ENOMEM;
                break;
            }
        }
        if (!e->dims || e->dims != out->dim || at >= n) {
            ts_errf(err, errlen,
                    "data[%zu]: expected an embedding of %zu dimensions (1..%d, as the first) "
                    "with an index below %zu, got %zu dimensions at index %lld",
                    i, out->dim, VECSET_MAX_DIM, n, e->dims, (long long)e->index);
            rc = TS_PARSE;
            break;
        }
        for (size_t j = 0; j < e->dims; j++) {
            if (!isfinite(e->values[j])) {
                ts_errf(err, errlen, "data[%zu]: value %zu is not a finite number", i, j);
                rc = TS_PARSE;
                break;
            }
            out->v[(first + at) * out->dim + j] = e->values[j];
        }
    }
    openai_decoder_release(&d);
    return rc;
}

static size_t collect(char *p, size_t size, size_t n, void *arg)
{
    return buf_append(arg, p, size * n) ? 0 : size * n;
}

/* POSTs body to t->url; the answer's status and body into *status, *ans. */
static int post(const struct vector_embed_target *t, const char *body, size_t len, long *status,
                struct buf *ans, char *err, size_t errlen)
{
    CURL *h = curl_easy_init();
    bool ctype = false;
    for (size_t i = 0; i < t->nheaders; i++)
        ctype |= !strncasecmp(t->headers[i], "Content-Type:", 13);
    struct curl_slist *list = curl_slist_append(NULL, ctype ? "Accept: application/json"
                                                            : "Content-Type: application/json");
    for (size_t i = 0; list && i < t->nheaders; i++) {
        struct curl_slist *l = curl_slist_append(list, t->headers[i]);
        if (!l) {
            curl_slist_free_all(list);
            list = NULL;
        } else {
            list = l;
        }
    }
    if (!h || !list) {
        curl_slist_free_all(list);
        if (h)
            curl_easy_cleanup(h);
        ts_errf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    curl_easy_setopt(h, CURLOPT_URL, t->url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, ans);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 120000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (t->insecure) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    CURLcode cc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(list);
    curl_easy_cleanup(h);
    if (cc != CURLE_OK) {
        ts_errf(err, errlen, "POST %s: %s", t->url,
                cc == CURLE_WRITE_ERROR ? "the answer is over 64 MiB" : curl_easy_strerror(cc));
        return -EIO;
    }
    return 0;
}

/* {"model":M,"input":[texts first..first+n-1]} into b. */
static int batch_body(const struct prompts *p, const char *model, size_t first, size_t n,
                      struct buf *b)
{
    json_t *m = json_string(model ? model : "");
    char *mt = m ? json_dumps(m, JSON_ENCODE_ANY) : NULL;
    json_decref(m);
    int rc = mt ? buf_appendf(b, "{\"model\":%s,\"input\":[", mt) : -ENOMEM;
    free(mt);
    for (size_t i = 0; !rc && i < n; i++) {
        const struct prompt_entry *e = prompts_get(p, first + i);
        rc = buf_append_str(b, i ? "," : "");
        rc = rc ? rc : buf_append(b, prompts_json(p, e), e->json_len);
    }
    return rc ? rc : buf_append_str(b, "]}");
}

/* Batch first..first+n-1: sent, answered, decoded into out. */
static int embed_batch(const struct prompts *p, const struct vector_embed_target *t, size_t first,
                       size_t n, struct vecset *out, char *err, size_t errlen)
{
    struct buf body, ans;
    buf_init(&body, PROMPTS_MAX_LINE * (size_t)VECTOR_EMBED_BATCH + 4096);
    buf_init(&ans, VECTOR_EMBED_MAX_ANS);
    long status = 0;
    char e2[300] = "";
    int rc = batch_body(p, t->model, first, n, &body);
    if (rc)
        ts_errf(err, errlen, "out of memory");
    else
        rc = post(t, buf_cstr(&body), body.len, &status, &ans, err, errlen);
    if (!rc && (status < 200 || status >= 300)) {
        if (!errbody_describe(buf_cstr(&ans), ans.len, e2, sizeof(e2)))
            snprintf(e2, sizeof(e2), "empty body");
        ts_errf(err, errlen, "POST %s (texts %zu to %zu): HTTP %ld: %s", t->url, first + 1,
                first + n, status, e2);
        rc = -EIO;
    } else if (!rc &&
               (rc = vector_embed_answer(buf_cstr(&ans), ans.len, first, n, out, e2, sizeof(e2)))) {
        ts_errf(err, errlen, "POST %s (texts %zu to %zu): %s", t->url, first + 1, first + n, e2);
    }
    buf_release(&body);
    buf_release(&ans);
    return rc;
}

int vector_embed_file(const char *path, const struct vector_embed_target *t, struct vecset *out,
                      double *seconds, size_t *requests, char *err, size_t errlen)
{
    struct prompts p;
    prompts_init(&p);
    memset(out, 0, sizeof(*out));
    *requests = 0;
    uint64_t t0 = ts_now_ns();
    int rc = prompts_load(&p, path, PROMPTS_TEXT_ONLY, err, errlen);
    if (!rc && prompts_count(&p) > VECTOR_EMBED_MAX) {
        ts_errf(err, errlen, "%s: %zu texts, at most %d", path, prompts_count(&p),
                VECTOR_EMBED_MAX);
        rc = TS_TOOBIG;
    }
    if (!rc)
        out->n = prompts_count(&p);
    for (size_t i = 0; !rc && i < out->n; i += VECTOR_EMBED_BATCH) {
        size_t n = out->n - i < VECTOR_EMBED_BATCH ? out->n - i : VECTOR_EMBED_BATCH;
        rc = embed_batch(&p, t, i, n, out, err, errlen);
        ++*requests;
    }
    prompts_release(&p);
    *seconds = (double)(ts_now_ns() - t0) / 1e9;
    if (rc)
        vecset_release(out);
    return rc;
}
