/*
 * Fuzz the simulator's vector store inputs (sim/vstore.h). The first byte
 * picks: even, a search request body (parsed, then ranked against a small
 * store and encoded: the page must be valid JSON); odd, a passages file
 * (loaded, then searched with its own first passage).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "llm/openai_encode.h"
#include "sim/vstore.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_query(const char *body, size_t len)
{
    static struct vstore *v;
    if (!v) {
        static const char kb[] =
            "{\"text\":\"alpha beta\",\"attributes\":{\"k\":\"v\"}}\n"
            "{\"text\":\"gamma \\\"delta\\\"\\n\"}\n{\"text\":\"caf\\u00e9\"}\n";
        char err[128];
        if (vstore_load_mem("kb", kb, sizeof(kb) - 1, 32, &v, err, sizeof(err)))
            abort();
    }
    struct vstore_query q;
    struct openai_error e;
    vstore_query_init(&q);
    int rc = vstore_query_parse(&q, body, len, &e);
    if (rc) {
        if (rc != TS_PARSE || e.status != 400 || !e.message[0] || q.root || q.text)
            abort();
        return;
    }
    if (q.max_results < 1 || q.max_results > VSTORE_MAX_RESULTS || q.len > VSTORE_MAX_QUERY ||
        strlen(q.text) != q.len || q.score_threshold < 0 || q.score_threshold > 1)
        abort();
    struct vstore_hit hits[VSTORE_MAX_RESULTS];
    size_t n;
    if (vstore_search(v, q.text, q.len, q.max_results, q.score_threshold, hits, &n) || n > 3)
        abort();
    for (size_t i = 1; i < n; i++)
        if (hits[i - 1].score < hits[i].score)
            abort();
    struct buf out;
    buf_init(&out, 1 << 20);
    if (vstore_encode_page(&out, v, &q, hits, n))
        abort();
    json_t *j = json_loadb(out.data, out.len, 0, NULL);
    if (!j || json_array_size(json_object_get(j, "data")) != n)
        abort();
    json_decref(j);
    buf_release(&out);
    vstore_query_release(&q);
}

static void fuzz_file(const char *text, size_t len)
{
    char err[256];
    struct vstore *v;
    int rc = vstore_load_mem("f", text, len, 16, &v, err, sizeof(err));
    if (rc) {
        if (v || !err[0] || (rc != TS_PARSE && rc != TS_TOOBIG))
            abort();
        return;
    }
    if (vstore_count(v) < 1 || vstore_count(v) > VSTORE_MAX_DOCS)
        abort();
    const struct vstore_doc *d = vstore_doc(v, 0);
    struct vstore_hit hits[5];
    size_t n;
    json_t *attrs = json_loads(d->attributes, 0, NULL);
    if (!json_is_object(attrs) || strlen(d->text) != d->text_len ||
        vstore_search(v, d->text, d->text_len, 5, 0, hits, &n) || n < 1)
        abort();
    json_decref(attrs);
    vstore_free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] % 2)
        fuzz_file((const char *)data + 1, size - 1);
    else
        fuzz_query((const char *)data + 1, size - 1);
    return 0;
}
