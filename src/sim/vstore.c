/*
 * vstore.c - the simulator's vector store: passages, their embeddings,
 * ranking, and the search request and response of OpenAI's API.
 */
#include "vstore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/file.h"
#include "base/utf8.h"
#include "llm/embed.h"
#include "llm/openai_encode.h"
#include "llm/openai_request.h"

#define INVALID "invalid_request_error"

#define VSTORE_MAX_ID         64
#define VSTORE_MAX_FILENAME   256
#define VSTORE_MAX_ATTRS      16
#define VSTORE_MAX_ATTR_KEY   64
#define VSTORE_MAX_ATTR_VALUE 512
#define VSTORE_MAX_QUERIES    16

struct vstore {
    struct vstore_doc *docs;
    size_t n, cap;
    size_t dims;
    float *vecs;        /* n * dims, filled by embed_all() */
    struct byid *by_id; /* n entries sorted by file_id, for vstore_recall() */
};

struct byid {
    const char *id;
    uint32_t doc;
};

/* ---- the built-in passages ---- */

struct topic {
    const char *name; /* as it reads in a sentence */
    const char *slug; /* for filenames */
    const char *kw[6];
};

static const struct topic topics[] = {
    {"volcanoes", "volcanoes", {"magma", "lava", "eruptions", "craters", "tectonic plates", "ash"}},
    {"photosynthesis",
     "photosynthesis",
     {"chlorophyll", "sunlight", "leaves", "glucose", "carbon dioxide", "plants"}},
    {"black holes",
     "black-holes",
     {"gravity", "the event horizon", "the singularity", "spacetime", "collapsing stars",
      "accretion disks"}},
    {"coffee", "coffee", {"espresso", "beans", "roasting", "caffeine", "brewing", "arabica"}},
    {"the Roman Empire",
     "roman-empire",
     {"emperors", "legions", "the Senate", "Julius Caesar", "aqueducts", "Latin"}},
    {"machine learning",
     "machine-learning",
     {"neural networks", "training data", "gradient descent", "overfitting", "models", "features"}},
    {"honeybees", "honeybees", {"hives", "pollen", "nectar", "the queen", "colonies", "honey"}},
    {"electric cars",
     "electric-cars",
     {"batteries", "charging stations", "electric motors", "driving range", "lithium",
      "regenerative braking"}},
    {"the human heart",
     "human-heart",
     {"blood", "arteries", "ventricles", "the pulse", "cardiac muscle", "valves"}},
    {"jazz",
     "jazz",
     {"improvisation", "saxophones", "swing", "trumpets", "the blues", "Louis Armstrong"}},
    {"climate change",
     "climate-change",
     {"greenhouse gases", "emissions", "global warming", "fossil fuels", "sea levels", "carbon"}},
    {"chess", "chess", {"checkmate", "bishops", "openings", "pawns", "grandmasters", "endgames"}},
    {"bread baking", "bread-baking", {"dough", "yeast", "flour", "ovens", "sourdough", "crust"}},
    {"the Internet", "internet", {"packets", "routers", "TCP/IP", "protocols", "bandwidth", "DNS"}},
    {"earthquakes",
     "earthquakes",
     {"seismic waves", "fault lines", "magnitude", "the Richter scale", "aftershocks",
      "the epicenter"}},
    {"the Moon",
     "moon",
     {"lunar craters", "tides", "Apollo", "its orbit", "lunar phases", "regolith"}},
    {"vaccines",
     "vaccines",
     {"the immune system", "antibodies", "antigens", "immunization", "viruses", "booster doses"}},
    {"the Amazon rainforest",
     "amazon-rainforest",
     {"biodiversity", "the canopy", "deforestation", "the Amazon River", "species", "rainfall"}},
    {"cryptography",
     "cryptography",
     {"encryption", "secret keys", "ciphers", "hash functions", "RSA", "digital signatures"}},
    {"the Olympic Games",
     "olympic-games",
     {"athletes", "gold medals", "the marathon", "the Olympic torch", "host cities", "stadiums"}},
};

#define N_TOPICS           (sizeof(topics) / sizeof(topics[0]))
#define PASSAGES_PER_TOPIC 10

/* {T} the topic, {A} and {B} two of its keywords. */
static const char *const templates[PASSAGES_PER_TOPIC] = {
    "An introduction to {T}: the basics start with {A} and {B}.",
    "A key fact about {T} is the link between {A} and {B}.",
    "People who study {T} often measure {A} before they look at {B}.",
    "The history of {T} shows that {A} mattered long before anyone understood {B}.",
    "A common question about {T} is the role of {A}; the short answer involves {B}.",
    "In {T}, {A} and {B} interact in ways that surprise beginners.",
    "In {T}, a change in {A} usually means a change in {B} too.",
    "Numbers worth knowing about {T}: {A} can vary a lot, and so can {B}.",
    "A short glossary of {T}: {A}, {B}, and the terms around them.",
    "Why {T} matters today: {A} and {B} touch everyday life.",
};

const char *vstore_builtin_topic(size_t i)
{
    return i < N_TOPICS * PASSAGES_PER_TOPIC ? topics[i / PASSAGES_PER_TOPIC].name : NULL;
}

/* ---- building a store ---- */

static struct vstore *store_new(size_t dims)
{
    struct vstore *v = ts_calloc(1, sizeof(*v));
    if (v)
        v->dims = dims;
    return v;
}

void vstore_free(struct vstore *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n; i++) {
        ts_free((char *)v->docs[i].file_id);
        ts_free((char *)v->docs[i].filename);
        ts_free((char *)v->docs[i].text);
        ts_free((char *)v->docs[i].attributes);
    }
    ts_free(v->docs);
    ts_free(v->vecs);
    ts_free(v->by_id);
    ts_free(v);
}

/* Adds a passage; copies every string. attributes NULL means "{}". */
static int store_add(struct vstore *v, const char *file_id, const char *filename, const char *text,
                     size_t len, const char *attributes)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        struct vstore_doc *d = ts_realloc(v->docs, cap * sizeof(*d));
        if (!d)
            return -ENOMEM;
        v->docs = d;
        v->cap = cap;
    }
    struct vstore_doc *d = &v->docs[v->n];
    char *id = ts_strdup(file_id);
    char *fn = ts_strdup(filename);
    char *t = ts_strndup(text, len);
    char *at = ts_strdup(attributes ? attributes : "{}");
    if (!id || !fn || !t || !at) {
        ts_free(id);
        ts_free(fn);
        ts_free(t);
        ts_free(at);
        return -ENOMEM;
    }
    *d = (struct vstore_doc){id, fn, t, len, at};
    v->n++;
    return 0;
}

static int byid_cmp(const void *a, const void *b)
{
    const struct byid *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    return c ? c : x->doc < y->doc ? -1 : x->doc > y->doc;
}

/* Embeds every passage and sorts the file_ids (the last step of building a store). */
static int embed_all(struct vstore *v)
{
    v->vecs = ts_malloc((v->n ? v->n : 1) * v->dims * sizeof(float));
    v->by_id = ts_malloc((v->n ? v->n : 1) * sizeof(*v->by_id));
    if (!v->vecs || !v->by_id)
        return -ENOMEM;
    for (size_t i = 0; i < v->n; i++)
        v->by_id[i] = (struct byid){v->docs[i].file_id, (uint32_t)i};
    qsort(v->by_id, v->n, sizeof(*v->by_id), byid_cmp);
    for (size_t i = 0; i < v->n; i++) {
        int rc = embed_text(v->docs[i].text, v->docs[i].text_len, v->vecs + i * v->dims, v->dims);
        if (rc)
            return rc;
    }
    return 0;
}

/* Expands a template into out (cap bytes). */
static size_t expand(char *out, size_t cap, const char *tpl, const char *t, const char *a,
                     const char *b)
{
    size_t o = 0;
    for (const char *p = tpl; *p && o + 1 < cap; p++) {
        const char *sub = NULL;
        if (p[0] == '{' && p[1] && p[2] == '}')
            sub = p[1] == 'T' ? t : p[1] == 'A' ? a : p[1] == 'B' ? b : NULL;
        if (!sub) {
            out[o++] = *p;
            continue;
        }
        for (; *sub && o + 1 < cap; sub++)
            out[o++] = *sub;
        p += 2;
    }
    out[o] = '\0';
    return o;
}

int vstore_new_builtin(size_t dims, struct vstore **out)
{
    *out = NULL;
    if (dims == 0 || dims > EMBED_MAX_DIMS)
        return -EINVAL;
    struct vstore *v = store_new(dims);
    if (!v)
        return -ENOMEM;
    int rc = 0;
    for (size_t i = 0; !rc && i < N_TOPICS * PASSAGES_PER_TOPIC; i++) {
        const struct topic *tp = &topics[i / PASSAGES_PER_TOPIC];
        size_t k = i % PASSAGES_PER_TOPIC;
        const char *a = tp->kw[k % 6];
        const char *b = tp->kw[(k + 1 + k / 6) % 6];
        char text[512], id[32], fn[96], attrs[128];
        size_t len = expand(text, sizeof(text), templates[k], tp->name, a, b);
        snprintf(id, sizeof(id), "file-sim%03zu", i);
        snprintf(fn, sizeof(fn), "%s-%zu.txt", tp->slug, k + 1);
        snprintf(attrs, sizeof(attrs), "{\"topic\":\"%s\"}", tp->name);
        rc = store_add(v, id, fn, text, len, attrs);
    }
    if (!rc)
        rc = embed_all(v);
    if (rc) {
        vstore_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

/* ---- loading passages from a file ---- */

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return false;
    return true;
}

static int check_attributes(const json_t *attrs, const char *where, char *err, size_t errlen)
{
    if (!json_is_object(attrs)) {
        ts_errf(err, errlen, "%s: \"attributes\" must be an object", where);
        return TS_PARSE;
    }
    if (json_object_size(attrs) > VSTORE_MAX_ATTRS) {
        ts_errf(err, errlen, "%s: \"attributes\" has more than %d keys", where, VSTORE_MAX_ATTRS);
        return TS_PARSE;
    }
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)attrs, key, val)
    {
        if (strlen(key) > VSTORE_MAX_ATTR_KEY) {
            ts_errf(err, errlen, "%s: attribute key longer than %d bytes", where,
                    VSTORE_MAX_ATTR_KEY);
            return TS_PARSE;
        }
        if (json_is_string(val) ? json_string_length(val) > VSTORE_MAX_ATTR_VALUE
                                : !json_is_number(val) && !json_is_boolean(val)) {
            ts_errf(err, errlen,
                    "%s: attribute \"%.64s\" must be a string of at most %d bytes, a number or "
                    "a boolean",
                    where, key, VSTORE_MAX_ATTR_VALUE);
            return TS_PARSE;
        }
    }
    return 0;
}

/* A string field of a JSONL passage: absent/null leaves *out NULL. */
static int opt_field(const json_t *o, const char *key, size_t max, const char *where,
                     const char **out, char *err, size_t errlen)
{
    const json_t *v = json_object_get(o, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > max) {
        ts_errf(err, errlen, "%s: \"%s\" must be a string of 1 to %zu bytes", where, key, max);
        return TS_PARSE;
    }
    *out = json_string_value(v);
    return 0;
}

static int add_json_line(struct vstore *v, const char *line, size_t len, const char *where,
                         char *err, size_t errlen)
{
    json_error_t je;
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
    if (!o) {
        ts_errf(err, errlen, "%s:%d: %s", where, je.column, je.text);
        return TS_PARSE;
    }
    int rc = TS_PARSE;
    char *attrs = NULL;
    const char *id, *fn, *text = NULL, *key;
    const json_t *val;
    if (!json_is_object(o)) {
        ts_errf(err, errlen, "%s: expected a JSON object", where);
        goto out;
    }
    json_object_foreach(o, key, val)
    {
        if (strcmp(key, "text") && strcmp(key, "id") && strcmp(key, "filename") &&
            strcmp(key, "attributes")) {
            ts_errf(err, errlen,
                    "%s: unknown key \"%.64s\" (known: text, id, filename, attributes)", where,
                    key);
            goto out;
        }
    }
    const json_t *t = json_object_get(o, "text");
    if (!json_is_string(t) || json_string_length(t) == 0 ||
        json_string_length(t) > VSTORE_MAX_TEXT) {
        ts_errf(err, errlen, "%s: \"text\" must be a string of 1 to %u bytes", where,
                VSTORE_MAX_TEXT);
        goto out;
    }
    text = json_string_value(t);
    if ((rc = opt_field(o, "id", VSTORE_MAX_ID, where, &id, err, errlen)) ||
        (rc = opt_field(o, "filename", VSTORE_MAX_FILENAME, where, &fn, err, errlen)))
        goto out;
    const json_t *at = json_object_get(o, "attributes");
    if (at && !json_is_null(at)) {
        if ((rc = check_attributes(at, where, err, errlen)))
            goto out;
        attrs = json_dumps(at, JSON_COMPACT);
        if (!attrs) {
            rc = -ENOMEM;
            ts_errf(err, errlen, "%s: out of memory", where);
            goto out;
        }
    }
    char def_id[32], def_fn[32];
    snprintf(def_id, sizeof(def_id), "file-%05zu", v->n + 1);
    snprintf(def_fn, sizeof(def_fn), "passage-%zu.txt", v->n + 1);
    rc = store_add(v, id ? id : def_id, fn ? fn : def_fn, text, json_string_length(t), attrs);
    if (rc)
        ts_errf(err, errlen, "%s: out of memory", where);
out:
    free(attrs); /* jansson's allocator */
    json_decref(o);
    return rc;
}

int vstore_load_mem(const char *name, const char *data, size_t len, size_t dims,
                    struct vstore **out, char *err, size_t errlen)
{
    *out = NULL;
    if (dims == 0 || dims > EMBED_MAX_DIMS) {
        ts_errf(err, errlen, "%s: bad embedding size %zu", name, dims);
        return -EINVAL;
    }
    if (len > VSTORE_MAX_FILE) {
        ts_errf(err, errlen, "%s: larger than %u bytes", name, VSTORE_MAX_FILE);
        return TS_TOOBIG;
    }
    size_t bad = utf8_invalid_at(data, len);
    if (bad < len) {
        int line, col;
        text_position(data, bad, &line, &col);
        ts_errf(err, errlen, "%s:%d:%d: not valid UTF-8 text (or a NUL byte)", name, line, col);
        return TS_PARSE;
    }
    struct vstore *v = store_new(dims);
    if (!v) {
        ts_errf(err, errlen, "%s: out of memory", name);
        return -ENOMEM;
    }
    int rc = 0, jsonl = -1; /* decided by the first non-blank line */
    size_t lineno = 0, pos = 0;
    while (!rc && pos < len) {
        const char *nl = memchr(data + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - data) : len;
        const char *line = data + pos;
        size_t llen = end - pos;
        pos = end + 1;
        lineno++;
        char where[300];
        snprintf(where, sizeof(where), "%s:%zu", name, lineno);
        if (llen > VSTORE_MAX_LINE) {
            ts_errf(err, errlen, "%s: line longer than %u bytes", where, VSTORE_MAX_LINE);
            rc = TS_TOOBIG;
            break;
        }
        while (llen && (line[llen - 1] == '\r' || line[llen - 1] == ' ' || line[llen - 1] == '\t'))
            llen--;
        if (blank(line, llen))
            continue;
        if (jsonl < 0) {
            size_t k = 0;
            while (k < llen && (line[k] == ' ' || line[k] == '\t'))
                k++;
            jsonl = line[k] == '{';
        }
        if (v->n == VSTORE_MAX_DOCS) {
            ts_errf(err, errlen, "%s: more than %u passages", where, VSTORE_MAX_DOCS);
            rc = TS_TOOBIG;
        } else if (jsonl) {
            rc = add_json_line(v, line, llen, where, err, errlen);
        } else if (llen > VSTORE_MAX_TEXT) {
            ts_errf(err, errlen, "%s: passage longer than %u bytes", where, VSTORE_MAX_TEXT);
            rc = TS_TOOBIG;
        } else {
            char id[32], fn[32];
            snprintf(id, sizeof(id), "file-%05zu", v->n + 1);
            snprintf(fn, sizeof(fn), "passage-%zu.txt", v->n + 1);
            if ((rc = store_add(v, id, fn, line, llen, NULL)))
                ts_errf(err, errlen, "%s: out of memory", where);
        }
    }
    if (!rc && v->n == 0) {
        ts_errf(err, errlen, "%s: no passages", name);
        rc = TS_PARSE;
    }
    if (!rc && (rc = embed_all(v)))
        ts_errf(err, errlen, "%s: out of memory", name);
    if (rc) {
        vstore_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

int vstore_load(const char *path, size_t dims, struct vstore **out, char *err, size_t errlen)
{
    char *data;
    size_t len;
    *out = NULL;
    int rc = file_read_all(path, VSTORE_MAX_FILE, &data, &len, err, errlen);
    if (rc)
        return rc;
    rc = vstore_load_mem(path, data, len, dims, out, err, errlen);
    ts_free(data);
    return rc;
}

size_t vstore_count(const struct vstore *v)
{
    return v->n;
}

const struct vstore_doc *vstore_doc(const struct vstore *v, size_t i)
{
    return i < v->n ? &v->docs[i] : NULL;
}

/* ---- ranking ---- */

const float *vstore_vectors(const struct vstore *v, size_t *dims)
{
    *dims = v->dims;
    return v->vecs;
}

int vstore_embed_query(const struct vstore *v, const char *query, size_t len, float *out)
{
    return embed_text(query, len, out, v->dims);
}

int vstore_search(const struct vstore *v, const char *query, size_t len, size_t max_results,
                  double threshold, struct vstore_hit *hits, size_t *n)
{
    *n = 0;
    if (max_results < 1 || max_results > VSTORE_MAX_RESULTS)
        return -EINVAL;
    float *q = ts_malloc(v->dims * sizeof(float));
    if (!q)
        return -ENOMEM;
    int rc = embed_text(query, len, q, v->dims);
    if (rc) {
        ts_free(q);
        return rc;
    }
    size_t kept = 0;
    for (size_t i = 0; i < v->n; i++) {
        const float *d = v->vecs + i * v->dims;
        double dot = 0;
        for (size_t k = 0; k < v->dims; k++)
            dot += (double)q[k] * d[k];
        double score = dot < 0 ? 0 : dot > 1 ? 1 : dot; /* both vectors are unit or zero */
        if (score < threshold)
            continue;
        if (kept == max_results && score <= hits[kept - 1].score)
            continue; /* ties go to the earlier passage, already kept */
        /* insert in order (score desc, then index asc), dropping the last if full */
        size_t j = kept < max_results ? kept++ : kept - 1;
        while (j > 0 && hits[j - 1].score < score) {
            hits[j] = hits[j - 1];
            j--;
        }
        hits[j] = (struct vstore_hit){(uint32_t)i, score};
    }
    ts_free(q);
    *n = kept;
    return 0;
}

/* The exact score of the best passage whose file_id is id, or -1 when none is. */
static double score_of_id(const struct vstore *v, const double *scores, const char *id)
{
    size_t lo = 0, hi = v->n;
    while (lo < hi) { /* the first entry >= id */
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(v->by_id[mid].id, id) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    double best = -1;
    for (size_t i = lo; i < v->n && !strcmp(v->by_id[i].id, id); i++)
        if (scores[v->by_id[i].doc] > best)
            best = scores[v->by_id[i].doc];
    return best;
}

/* The k-th best of scores[0..n) (1 <= k <= n <= VSTORE_MAX_DOCS). */
static double kth_best(const double *scores, size_t n, size_t k)
{
    double top[VSTORE_MAX_RESULTS];
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        double s = scores[i];
        if (kept == k && s <= top[kept - 1])
            continue;
        size_t j = kept < k ? kept++ : kept - 1;
        while (j > 0 && top[j - 1] < s) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = s;
    }
    return top[k - 1];
}

int vstore_recall(const struct vstore *v, const char *query, size_t len, const char *const *ids,
                  size_t nids, size_t k, double *recall, size_t *k_used)
{
    *recall = 0;
    *k_used = 0;
    if (k < 1 || k > VSTORE_MAX_RESULTS || (nids && !ids))
        return -EINVAL;
    if (k > v->n)
        k = v->n;
    float *q = ts_malloc(v->dims * sizeof(float));
    double *scores = ts_malloc((v->n ? v->n : 1) * sizeof(double));
    int rc = q && scores ? embed_text(query, len, q, v->dims) : -ENOMEM;
    for (size_t i = 0; !rc && i < v->n; i++) {
        const float *d = v->vecs + i * v->dims;
        double dot = 0;
        for (size_t j = 0; j < v->dims; j++)
            dot += (double)q[j] * d[j];
        scores[i] = dot < 0 ? 0 : dot > 1 ? 1 : dot; /* as vstore_search scores */
    }
    if (!rc && k) {
        double bar = kth_best(scores, v->n, k) - VSTORE_RECALL_TIE;
        size_t hits = 0, seen = 0;
        for (size_t i = 0; i < nids && seen < k; i++) {
            bool dup = false;
            for (size_t j = 0; j < i && !dup; j++)
                dup = ids[j] && ids[i] && !strcmp(ids[j], ids[i]);
            if (dup || !ids[i])
                continue;
            seen++;
            hits += score_of_id(v, scores, ids[i]) >= bar;
        }
        *recall = (double)hits / (double)k;
        *k_used = k;
    }
    ts_free(q);
    ts_free(scores);
    return rc;
}

/* ---- the search request ---- */

void vstore_query_init(struct vstore_query *q)
{
    memset(q, 0, sizeof(*q));
    q->max_results = 10;
}

void vstore_query_release(struct vstore_query *q)
{
    ts_free(q->text);
    if (q->root)
        json_decref(q->root);
    vstore_query_init(q);
}

static int err_type(struct openai_error *e, const char *name, const char *param, const char *want,
                    const json_t *got)
{
    openai_error_set(e, 400, INVALID, param, "invalid_type",
                     "Invalid type for '%s': expected %s, but got %s instead.", name, want,
                     openai_json_kind(got));
    return TS_PARSE;
}

static int parse_query_text(struct vstore_query *q, struct openai_error *e)
{
    const json_t *v = json_object_get(q->root, "query");
    if (!v || json_is_null(v)) {
        openai_error_set(e, 400, INVALID, "query", "missing_required_parameter",
                         "Missing required parameter: 'query'.");
        return TS_PARSE;
    }
    size_t n = 1, total = 0;
    if (json_is_array(v)) {
        n = json_array_size(v);
        if (n == 0 || n > VSTORE_MAX_QUERIES) {
            openai_error_set(e, 400, INVALID, "query", "invalid_value",
                             "Invalid 'query': expected an array of 1 to %d strings, but got %zu.",
                             VSTORE_MAX_QUERIES, n);
            return TS_PARSE;
        }
    } else if (!json_is_string(v)) {
        return err_type(e, "query", "query", "one of a string or array of strings", v);
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *s = json_is_array(v) ? json_array_get(v, i) : v;
        char name[32] = "query", param[32] = "query";
        if (json_is_array(v)) {
            snprintf(name, sizeof(name), "query[%zu]", i);
            snprintf(param, sizeof(param), "query.[%zu]", i);
        }
        if (!json_is_string(s))
            return err_type(e, name, param, "a string", s);
        if (json_string_length(s) == 0) {
            openai_error_set(e, 400, INVALID, param, "empty_string",
                             "Invalid '%s': empty string. Expected a string with minimum length "
                             "1, but got an empty string instead.",
                             name);
            return TS_PARSE;
        }
        total += json_string_length(s) + 1;
    }
    if (total > VSTORE_MAX_QUERY + 1) {
        openai_error_set(e, 400, INVALID, "query", "string_above_max_length",
                         "Invalid 'query': longer than %u bytes.", VSTORE_MAX_QUERY);
        return TS_PARSE;
    }
    q->text = ts_malloc(total);
    if (!q->text) {
        openai_error_set(e, 500, "server_error", NULL, NULL,
                         "The server ran out of memory while reading the request.");
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *s = json_is_array(v) ? json_array_get(v, i) : v;
        if (i)
            q->text[q->len++] = ' ';
        memcpy(q->text + q->len, json_string_value(s), json_string_length(s));
        q->len += json_string_length(s);
    }
    q->text[q->len] = '\0';
    q->query = v;
    return 0;
}

static int parse_options(struct vstore_query *q, struct openai_error *e)
{
    const json_t *root = q->root;
    const json_t *m = json_object_get(root, "max_num_results");
    if (m && !json_is_null(m)) {
        if (!json_is_integer(m))
            return err_type(e, "max_num_results", "max_num_results", "an integer", m);
        json_int_t x = json_integer_value(m);
        if (x < 1 || x > VSTORE_MAX_RESULTS) {
            openai_error_set(e, 400, INVALID, "max_num_results",
                             x < 1 ? "integer_below_min_value" : "integer_above_max_value",
                             "Invalid 'max_num_results': expected a value from 1 to %d, but got "
                             "%lld instead.",
                             VSTORE_MAX_RESULTS, (long long)x);
            return TS_PARSE;
        }
        q->max_results = (size_t)x;
    }
    const json_t *rw = json_object_get(root, "rewrite_query");
    if (rw && !json_is_null(rw) && !json_is_boolean(rw))
        return err_type(e, "rewrite_query", "rewrite_query", "a boolean", rw);
    const json_t *f = json_object_get(root, "filters");
    if (f && !json_is_null(f) && !json_is_object(f))
        return err_type(e, "filters", "filters", "an object", f);
    const json_t *ro = json_object_get(root, "ranking_options");
    if (!ro || json_is_null(ro))
        return 0;
    if (!json_is_object(ro))
        return err_type(e, "ranking_options", "ranking_options", "an object", ro);
    const json_t *rk = json_object_get(ro, "ranker");
    if (rk && !json_is_null(rk) && !json_is_string(rk))
        return err_type(e, "ranking_options.ranker", "ranking_options.ranker", "a string", rk);
    const json_t *th = json_object_get(ro, "score_threshold");
    if (!th || json_is_null(th))
        return 0;
    if (!json_is_number(th))
        return err_type(e, "ranking_options.score_threshold", "ranking_options.score_threshold",
                        "a decimal", th);
    double x = json_number_value(th);
    if (!(x >= 0 && x <= 1)) {
        openai_error_set(e, 400, INVALID, "ranking_options.score_threshold", "invalid_value",
                         "Invalid 'ranking_options.score_threshold': expected a value from 0 to "
                         "1, but got %g instead.",
                         x);
        return TS_PARSE;
    }
    q->score_threshold = x;
    return 0;
}

int vstore_query_parse(struct vstore_query *q, const char *body, size_t len,
                       struct openai_error *err)
{
    vstore_query_release(q);
    json_error_t je;
    q->root = json_loadb(body, len, 0, &je);
    int rc;
    if (!q->root) {
        if (json_error_code(&je) == json_error_out_of_memory) {
            openai_error_set(err, 500, "server_error", NULL, NULL,
                             "The server ran out of memory while reading the request.");
            return -ENOMEM;
        }
        openai_error_set(err, 400, INVALID, NULL, NULL,
                         "We could not parse the JSON body of your request. (HINT: This likely "
                         "means you aren't using your HTTP library correctly. The OpenAI API "
                         "expects a JSON payload, but what was sent was not valid JSON. Error "
                         "at line %d column %d: %.100s)",
                         je.line, je.column, je.text);
        return TS_PARSE;
    }
    if (!json_is_object(q->root)) {
        openai_error_set(err, 400, INVALID, NULL, "invalid_type",
                         "Invalid type for the request body: expected an object, but got %s "
                         "instead.",
                         openai_json_kind(q->root));
        rc = TS_PARSE;
    } else if (!(rc = parse_query_text(q, err))) {
        rc = parse_options(q, err);
    }
    if (rc)
        vstore_query_release(q);
    return rc;
}

/* ---- the response ---- */

static int append_str(struct buf *out, const char *s, size_t n)
{
    int rc;
    if ((rc = buf_append_char(out, '"')) || (rc = openai_json_escape(out, s, n)) ||
        (rc = buf_append_char(out, '"')))
        return rc;
    return 0;
}

int vstore_encode_page(struct buf *out, const struct vstore *v, const struct vstore_query *q,
                       const struct vstore_hit *hits, size_t n)
{
    size_t mark = out->len;
    int rc = buf_append_str(out, "{\"object\":\"vector_store.search_results.page\","
                                 "\"search_query\":[");
    size_t nq = json_is_array(q->query) ? json_array_size(q->query) : 1;
    for (size_t i = 0; !rc && i < nq; i++) {
        const json_t *s = json_is_array(q->query) ? json_array_get(q->query, i) : q->query;
        if (i)
            rc = buf_append_char(out, ',');
        if (!rc)
            rc = append_str(out, json_string_value(s), json_string_length(s));
    }
    if (!rc)
        rc = buf_append_str(out, "],\"data\":[");
    for (size_t i = 0; !rc && i < n; i++) {
        const struct vstore_doc *d = vstore_doc(v, hits[i].doc);
        if (!d) {
            rc = -EINVAL;
            break;
        }
        if ((rc = buf_append_str(out, i ? ",{\"file_id\":" : "{\"file_id\":")) ||
            (rc = append_str(out, d->file_id, strlen(d->file_id))) ||
            (rc = buf_append_str(out, ",\"filename\":")) ||
            (rc = append_str(out, d->filename, strlen(d->filename))) ||
            (rc = buf_appendf(out, ",\"score\":%.4f,\"attributes\":%s,", hits[i].score,
                              d->attributes)) ||
            (rc = buf_append_str(out, "\"content\":[{\"type\":\"text\",\"text\":")) ||
            (rc = append_str(out, d->text, d->text_len)) || (rc = buf_append_str(out, "}]}")))
            break;
    }
    if (!rc)
        rc = buf_append_str(out, "],\"has_more\":false,\"next_page\":null}");
    if (rc)
        buf_truncate(out, mark);
    return rc;
}
