#include "answers.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/file.h"
#include "llm/text.h"

#define ANSWERS_MAX_LINE    (1u << 20)
#define ANSWERS_MAX_ENTRIES 1000000u
#define ANSWERS_MAX_FILE    (256u << 20)

struct answer_entry {
    char *prompt; /* trimmed */
    size_t prompt_len;
    char *answer;
    uint64_t hash;
};

struct answers {
    struct answer_entry *entries; /* open addressing, cap a power of two */
    size_t cap;
    size_t count;
};

static void trim(const char **s, size_t *len)
{
    while (*len && (**s == ' ' || **s == '\n' || **s == '\t' || **s == '\r')) {
        (*s)++;
        (*len)--;
    }
    while (*len && ((*s)[*len - 1] == ' ' || (*s)[*len - 1] == '\n' || (*s)[*len - 1] == '\t' ||
                    (*s)[*len - 1] == '\r'))
        (*len)--;
}

static int grow(struct answers *a)
{
    size_t cap = a->cap ? a->cap * 2 : 64;
    struct answer_entry *e = ts_calloc(cap, sizeof(*e));
    if (!e)
        return -ENOMEM;
    for (size_t i = 0; i < a->cap; i++) {
        if (!a->entries[i].prompt)
            continue;
        size_t j = a->entries[i].hash & (cap - 1);
        while (e[j].prompt)
            j = (j + 1) & (cap - 1);
        e[j] = a->entries[i];
    }
    ts_free(a->entries);
    a->entries = e;
    a->cap = cap;
    return 0;
}

/* Adds or replaces; takes nothing from the caller (copies). */
static int put(struct answers *a, const char *prompt, size_t plen, const char *answer)
{
    if ((a->count + 1) * 2 > a->cap && grow(a))
        return -ENOMEM;
    uint64_t h = text_hash(prompt, plen, 0);
    size_t j = h & (a->cap - 1);
    while (a->entries[j].prompt) {
        struct answer_entry *e = &a->entries[j];
        if (e->hash == h && e->prompt_len == plen && !memcmp(e->prompt, prompt, plen)) {
            char *copy = ts_strdup(answer);
            if (!copy)
                return -ENOMEM;
            ts_free(e->answer);
            e->answer = copy;
            return 0;
        }
        j = (j + 1) & (a->cap - 1);
    }
    char *p = ts_strndup(prompt, plen);
    char *ans = ts_strdup(answer);
    if (!p || !ans) {
        ts_free(p);
        ts_free(ans);
        return -ENOMEM;
    }
    a->entries[j] = (struct answer_entry){p, plen, ans, h};
    a->count++;
    return 0;
}

static int parse_line(struct answers *a, const char *name, size_t lineno, const char *line,
                      size_t len, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        ts_errf(err, errlen, "%s:%zu:%d: %s", name, lineno, jerr.column, jerr.text);
        return TS_PARSE;
    }
    int rc = TS_PARSE;
    json_t *prompt = json_object_get(root, "prompt");
    json_t *answer = json_object_get(root, "answer");
    if (!json_is_object(root))
        ts_errf(err, errlen, "%s:%zu: expected a JSON object", name, lineno);
    else if (!json_is_string(prompt))
        ts_errf(err, errlen, "%s:%zu: \"prompt\" must be a string", name, lineno);
    else if (!json_is_string(answer))
        ts_errf(err, errlen, "%s:%zu: \"answer\" must be a string", name, lineno);
    else if (a->count >= ANSWERS_MAX_ENTRIES)
        ts_errf(err, errlen, "%s:%zu: more than %u answers", name, lineno, ANSWERS_MAX_ENTRIES);
    else {
        const char *p = json_string_value(prompt);
        size_t plen = json_string_length(prompt);
        trim(&p, &plen);
        rc = put(a, p, plen, json_string_value(answer));
        if (rc)
            ts_errf(err, errlen, "%s:%zu: out of memory", name, lineno);
    }
    json_decref(root);
    return rc;
}

int answers_load_mem(const char *name, const char *data, size_t len, struct answers **out,
                     char *err, size_t errlen)
{
    struct answers *a = ts_calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    size_t lineno = 0;
    size_t pos = 0;
    int rc = 0;
    while (pos < len) {
        const char *nl = memchr(data + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - data) : len;
        lineno++;
        const char *line = data + pos;
        size_t llen = end - pos;
        pos = end + 1;
        if (llen > ANSWERS_MAX_LINE) {
            ts_errf(err, errlen, "%s:%zu: line longer than %u bytes", name, lineno,
                    ANSWERS_MAX_LINE);
            rc = TS_TOOBIG;
            break;
        }
        trim(&line, &llen);
        if (!llen || line[0] == '#')
            continue;
        if ((rc = parse_line(a, name, lineno, line, llen, err, errlen)))
            break;
    }
    if (rc) {
        answers_free(a);
        return rc;
    }
    *out = a;
    return 0;
}

int answers_load(const char *path, struct answers **out, char *err, size_t errlen)
{
    char *data;
    size_t len;
    int rc = file_read_all(path, ANSWERS_MAX_FILE, &data, &len, err, errlen);
    if (rc)
        return rc;
    rc = answers_load_mem(path, data, len, out, err, errlen);
    ts_free(data);
    return rc;
}

const char *answers_find(const struct answers *a, const char *prompt, size_t len)
{
    if (!a || !a->cap)
        return NULL;
    trim(&prompt, &len);
    uint64_t h = text_hash(prompt, len, 0);
    size_t j = h & (a->cap - 1);
    while (a->entries[j].prompt) {
        const struct answer_entry *e = &a->entries[j];
        if (e->hash == h && e->prompt_len == len && !memcmp(e->prompt, prompt, len))
            return e->answer;
        j = (j + 1) & (a->cap - 1);
    }
    return NULL;
}

size_t answers_count(const struct answers *a)
{
    return a ? a->count : 0;
}

void answers_free(struct answers *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->cap; i++) {
        ts_free(a->entries[i].prompt);
        ts_free(a->entries[i].answer);
    }
    ts_free(a->entries);
    ts_free(a);
}
