/*
 * errtally.c - failed requests counted by distinct message (see errtally.h).
 */
#include "analysis/errtally.h"

#include <stdio.h>
#include <string.h>

#include "base/tsjson.h"

static struct errtally_entry *find(struct errtally *t, enum req_outcome o, int status,
                                   const char *msg)
{
    for (size_t i = 0; i < t->n; i++) {
        struct errtally_entry *e = &t->e[i];
        if (e->outcome == o && e->status == status && !strcmp(e->msg, msg))
            return e;
    }
    return NULL;
}

void errtally_add(struct errtally *t, enum req_outcome o, int status, const char *msg, uint64_t n)
{
    char key[REQ_ERROR_MAX] = {0}; /* zeroed: a slot's bytes depend only on its key */
    snprintf(key, sizeof(key), "%s", msg ? msg : "");
    struct errtally_entry *e = find(t, o, status, key);
    if (!e && t->n < ERRTALLY_SLOTS) {
        e = &t->e[t->n++];
        e->count = 0;
        e->outcome = o;
        e->status = status;
        memcpy(e->msg, key, sizeof(key));
    }
    if (e)
        e->count += n;
    else
        t->other += n;
}

void errtally_merge(struct errtally *dst, const struct errtally *src)
{
    for (size_t i = 0; i < src->n; i++)
        errtally_add(dst, src->e[i].outcome, src->e[i].status, src->e[i].msg, src->e[i].count);
    dst->other += src->other;
}

bool errtally_equal(const struct errtally *a, const struct errtally *b)
{
    if (a->n != b->n || a->other != b->other)
        return false;
    for (size_t i = 0; i < a->n; i++) {
        const struct errtally_entry *e = &a->e[i];
        const struct errtally_entry *f = find((struct errtally *)b, e->outcome, e->status, e->msg);
        if (!f || f->count != e->count)
            return false;
    }
    return true;
}

uint64_t errtally_total(const struct errtally *t)
{
    uint64_t sum = t->other;
    for (size_t i = 0; i < t->n; i++)
        sum += t->e[i].count;
    return sum;
}

size_t errtally_top(const struct errtally *t, size_t *idx, size_t max)
{
    size_t k = 0;
    for (size_t i = 0; i < t->n && max; i++) {
        size_t p = k; /* after every larger or equal count: ties keep first-seen order */
        while (p > 0 && t->e[idx[p - 1]].count < t->e[i].count)
            p--;
        if (p >= max)
            continue;
        size_t last = k < max ? k : max - 1;
        memmove(&idx[p + 1], &idx[p], (last - p) * sizeof(*idx));
        idx[p] = i;
        if (k < max)
            k++;
    }
    return k;
}

json_t *errtally_to_json(const struct errtally *t)
{
    size_t idx[ERRTALLY_SLOTS];
    size_t n = errtally_top(t, idx, ERRTALLY_SLOTS);
    json_t *o = json_object(), *top = json_array();
    int rc = tsjson_put(o, "distinct_kept", tsjson_count(t->n));
    rc |= tsjson_put(o, "other", tsjson_count(t->other));
    rc |= tsjson_put(o, "top", top);
    for (size_t i = 0; !rc && i < n; i++) {
        const struct errtally_entry *e = &t->e[idx[i]];
        json_t *row = json_object();
        rc |= json_array_append_new(top, row) ? -ENOMEM : 0;
        rc |= tsjson_put(row, "count", tsjson_count(e->count));
        rc |= tsjson_put(row, "outcome", json_string(req_outcome_name(e->outcome)));
        rc |= tsjson_put(row, "status", e->status ? json_integer(e->status) : json_null());
        rc |= tsjson_put(row, "message", json_string(e->msg));
    }
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int bad(char *err, size_t errlen, size_t i, const char *what)
{
    ts_errf(err, errlen, "errors.top[%zu]: %s", i, what);
    return TS_PARSE;
}

int errtally_add_json(struct errtally *t, const json_t *v, char *err, size_t errlen)
{
    if (!v)
        return 0;
    const json_t *top = json_object_get(v, "top"), *other = json_object_get(v, "other");
    if (!json_is_object(v) || !json_is_array(top) || !json_is_integer(other) ||
        json_integer_value(other) < 0) {
        ts_errf(err, errlen, "errors: expected {\"other\": a count, \"top\": [...]}");
        return TS_PARSE;
    }
    size_t i;
    const json_t *row;
    json_array_foreach(top, i, row)
    {
        const json_t *count = json_object_get(row, "count"), *msg = json_object_get(row, "message");
        const json_t *oc = json_object_get(row, "outcome"), *st = json_object_get(row, "status");
        if (!json_is_integer(count) || json_integer_value(count) < 0)
            return bad(err, errlen, i, "count is not a count");
        int o = json_is_string(oc) ? req_outcome_from_name(json_string_value(oc)) : -EINVAL;
        if (o < 0)
            return bad(err, errlen, i, "outcome is not an outcome name");
        if (!json_is_null(st) &&
            (!json_is_integer(st) || json_integer_value(st) < 0 || json_integer_value(st) > 999))
            return bad(err, errlen, i, "status is not an HTTP status or null");
        if (!json_is_string(msg))
            return bad(err, errlen, i, "message is not a string");
        errtally_add(t, (enum req_outcome)o, json_is_integer(st) ? (int)json_integer_value(st) : 0,
                     json_string_value(msg), (uint64_t)json_integer_value(count));
    }
    t->other += (uint64_t)json_integer_value(other);
    return 0;
}
