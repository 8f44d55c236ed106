/*
 * rag_faults.c - faults on the JSON answers of retrievers and vector stores:
 * the result array is found with an RFC 6901 JSON pointer and emptied,
 * shuffled, filled with unrelated texts, or its scores lowered.
 */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "chaos/tap_int.h"
#include "llm/jsonptr.h"

/* Documents that answer no question a RAG test is likely to ask. */
static const char *const rag_unrelated[] = {
    "The migratory patterns of the Arctic tern span roughly 70,000 kilometres a year.",
    "Sourdough starters are kept alive by feeding them flour and water every day.",
    "The rules of curling award points for stones closest to the centre of the house.",
    "Basalt columns form when thick lava flows cool and contract slowly.",
    "A standard piano has 88 keys: 52 white and 36 black.",
    "Medieval scribes prepared parchment from calf, goat or sheep skin.",
    "The offside rule in association football was first written down in 1863.",
    "Octopuses have three hearts and blue, copper-based blood.",
};
#define N_UNRELATED (sizeof(rag_unrelated) / sizeof(rag_unrelated[0]))

/* Member names under which retrievers put a document's text. */
static const char *const text_fields[] = {"document", "text",    "content", "page_content",
                                          "chunk",    "passage", "body"};
static const char *const text_holders[] = {"payload", "metadata", "properties", "document"};

/* The string member of a document object holding its text (looked for
 * under the usual names, in the object or its payload/metadata), or NULL. */
static json_t *doc_text(json_t *doc)
{
    for (size_t h = 0; h <= sizeof(text_holders) / sizeof(text_holders[0]); h++) {
        json_t *o = h == 0 ? doc : json_object_get(doc, text_holders[h - 1]);
        if (!json_is_object(o))
            continue;
        for (size_t k = 0; k < sizeof(text_fields) / sizeof(text_fields[0]); k++) {
            json_t *t = json_object_get(o, text_fields[k]);
            if (json_is_string(t))
                return t;
        }
    }
    return NULL;
}

static json_t *doc_score(json_t *doc, const char *field)
{
    if (field[0] == '/')
        return jsonptr_get(doc, field, strlen(field));
    return json_object_get(doc, field[0] ? field : "score");
}

static int irrelevant(json_t *arr, const struct fault *f, struct rng *r)
{
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const char *txt = f->params.text[0]
                              ? f->params.text
                              : rag_unrelated[(size_t)rng_range(r, 0, N_UNRELATED - 1)];
        json_t *el = json_array_get(arr, i);
        int rc = 0;
        if (json_is_string(el)) {
            rc = json_array_set_new(arr, i, json_string(txt));
        } else if (json_is_object(el)) {
            json_t *t = doc_text(el);
            if (json_is_string(t))
                rc = json_string_set(t, txt);
        }
        if (rc != 0)
            return -ENOMEM;
    }
    return 0;
}

static int scale_number(json_t *parent_arr, size_t i, json_t *num, double factor)
{
    double v = json_number_value(num) * factor;
    if (json_is_real(num))
        return json_real_set(num, v) == 0 ? 0 : -EINVAL;
    if (parent_arr)
        return json_array_set_new(parent_arr, i, json_real(v)) == 0 ? 0 : -ENOMEM;
    return TS_AGAIN;
}

static int lower_scores(json_t *arr, const struct fault *f)
{
    double factor = f->params.factor;
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *el = json_array_get(arr, i);
        int rc = 0;
        if (json_is_number(el)) {
            rc = scale_number(arr, i, el, factor);
        } else if (json_is_object(el)) {
            const char *field = f->params.field;
            json_t *s = doc_score(el, field);
            if (json_is_real(s)) {
                rc = scale_number(NULL, 0, s, factor);
            } else if (json_is_integer(s) && field[0] != '/') {
                rc = json_object_set_new(el, field[0] ? field : "score",
                                         json_real(json_number_value(s) * factor));
            }
        }
        if (rc < 0 && rc != TS_AGAIN)
            return -ENOMEM;
    }
    return 0;
}

static int shuffle(json_t *arr, uint64_t seed)
{
    size_t n = json_array_size(arr);
    if (n < 2)
        return 0;
    struct rng r;
    rng_seed(&r, seed); /* the same permutation for every array of this length */
    json_t **items = ts_malloc(n * sizeof(*items));
    if (!items)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        items[i] = json_incref(json_array_get(arr, i));
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)rng_range(&r, 0, i);
        json_t *t = items[i];
        items[i] = items[j];
        items[j] = t;
    }
    int rc = 0;
    for (size_t i = 0; i < n; i++)
        if (rc == 0 && json_array_set(arr, i, items[i]) != 0)
            rc = -ENOMEM;
    for (size_t i = 0; i < n; i++)
        json_decref(items[i]);
    ts_free(items);
    return rc;
}

int rag_apply(json_t *root, const struct fault *f, uint64_t seed)
{
    const char *p = f->params.pointer;
    size_t plen = strlen(p);
    int changed = 0;
    struct rng r;
    rng_seed(&r, rng_mix64(seed + 0x5a17));
    size_t i = 0;
    do {
        size_t j = i;
        while (j < plen && p[j] != ',')
            j++;
        json_t *arr = jsonptr_get(root, p + i, j - i);
        i = j + 1;
        if (!json_is_array(arr))
            continue;
        int rc = 0;
        switch (f->type) {
        case FAULT_RAG_EMPTY:
            rc = json_array_clear(arr) == 0 ? 0 : -ENOMEM;
            break;
        case FAULT_RAG_SHUFFLE:
            rc = shuffle(arr, seed);
            break;
        case FAULT_RAG_IRRELEVANT:
            rc = irrelevant(arr, f, &r);
            break;
        case FAULT_RAG_LOWER_SCORES:
            rc = lower_scores(arr, f);
            break;
        default:
            continue;
        }
        if (rc < 0)
            return rc;
        changed++;
    } while (i <= plen);
    return changed;
}
