/*
 * recording.c - reading proxy recordings (recording.h).
 */
#include "llm/recording.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/file.h"

static uint64_t fnv(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

void recording_body_hash(const char *body, size_t len, char out[17])
{
    json_t *j = len ? json_loadb(body, len, 0, NULL) : NULL;
    char *c = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : NULL;
    uint64_t h = c ? fnv(c, strlen(c)) : fnv(body, len);
    snprintf(out, 17, "%016llx", (unsigned long long)h);
    free(c);
    json_decref(j);
}

static char *dup_n(const char *s, size_t n)
{
    char *d = ts_malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* A JSON value as the text to send again: a string as itself, anything else compact. */
static char *value_text(const json_t *v, size_t *len)
{
    if (json_is_string(v)) {
        *len = json_string_length(v);
        return dup_n(json_string_value(v), *len);
    }
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s)
        return NULL;
    *len = strlen(s);
    char *d = dup_n(s, *len);
    free(s);
    return d;
}

/* A duration in ms (a number >= 0, under a day) into ns. */
static int ms_field(const json_t *o, const char *name, bool required, uint64_t *out, char *err,
                    size_t errlen)
{
    const json_t *v = json_object_get(o, name);
    *out = 0;
    if (!v && !required)
        return 0;
    double ms = json_number_value(v);
    if (!json_is_number(v) || !(ms >= 0 && ms < 864e5 * 366)) {
        ts_errf(err, errlen, "%s: expected milliseconds >= 0", name);
        return TS_PARSE;
    }
    *out = (uint64_t)(ms * 1e6);
    return 0;
}

/* "events": [[t_ms, "data"(, "type")], ...] */
static int parse_events(const json_t *arr, struct rec_exchange *x, char *err, size_t errlen)
{
    size_t n = json_array_size(arr), i;
    const json_t *e;
    if (!json_is_array(arr)) {
        ts_errf(err, errlen, "events: expected an array");
        return TS_PARSE;
    }
    if (n > RECORDING_EVENTS_MAX) {
        ts_errf(err, errlen, "events: more than %d", RECORDING_EVENTS_MAX);
        return TS_TOOBIG;
    }
    x->ev = ts_calloc(n ? n : 1, sizeof *x->ev);
    if (!x->ev)
        return -ENOMEM;
    json_array_foreach(arr, i, e)
    {
        const json_t *t = json_array_get(e, 0), *d = json_array_get(e, 1),
                     *ty = json_array_get(e, 2);
        double ms = json_number_value(t);
        if (!json_is_array(e) || json_array_size(e) < 2 || json_array_size(e) > 3 ||
            !json_is_number(t) || !(ms >= 0 && ms < 864e5) || !json_is_string(d) ||
            (ty && !json_is_string(ty))) {
            ts_errf(err, errlen,
                    "events[%zu]: expected [t_ms, \"data\"] or [t_ms, \"data\", \"type\"]", i);
            return TS_PARSE;
        }
        struct rec_event *ev = &x->ev[x->nev++];
        ev->t_ns = (uint64_t)(ms * 1e6);
        ev->len = json_string_length(d);
        ev->data = dup_n(json_string_value(d), ev->len);
        ev->type = ty ? dup_n(json_string_value(ty), json_string_length(ty)) : NULL;
        if (!ev->data || (ty && !ev->type))
            return -ENOMEM;
    }
    return 0;
}

/* The content type of "response_headers" (any case), or NULL. */
static const char *content_type(const json_t *h)
{
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)h, k, v)
    {
        if (strcasecmp(k, "content-type") == 0 && json_is_string(v))
            return json_string_value(v);
    }
    return NULL;
}

/* The request: method, path, body, its hash and model. */
static int parse_request(const json_t *o, struct rec_exchange *x, char *err, size_t errlen)
{
    const json_t *m = json_object_get(o, "method"), *p = json_object_get(o, "path");
    const json_t *b = json_object_get(o, "body"), *h = json_object_get(o, "body_hash");
    if (!json_is_string(m) || json_string_length(m) >= sizeof x->method || !json_string_length(m)) {
        ts_errf(err, errlen, "method: expected a string like \"POST\"");
        return TS_PARSE;
    }
    snprintf(x->method, sizeof x->method, "%s", json_string_value(m));
    if (!json_is_string(p) || json_string_value(p)[0] != '/' || json_string_length(p) > 8192) {
        ts_errf(err, errlen, "path: expected a string starting with '/'");
        return TS_PARSE;
    }
    if (!json_is_string(h) || json_string_length(h) != 16 ||
        strspn(json_string_value(h), "0123456789abcdef") != 16) {
        ts_errf(err, errlen, "body_hash: expected 16 hex digits");
        return TS_PARSE;
    }
    memcpy(x->body_hash, json_string_value(h), 17);
    x->path = dup_n(json_string_value(p), json_string_length(p));
    x->body = b && !json_is_null(b) ? value_text(b, &x->body_len) : dup_n("", 0);
    if (!x->path || !x->body)
        return -ENOMEM;
    const json_t *model = json_object_get(b, "model");
    if (json_is_string(model))
        snprintf(x->model, sizeof x->model, "%s", json_string_value(model));
    return 0;
}

/* The response: status, content type, events or body, end. */
static int parse_response(const json_t *o, struct rec_exchange *x, char *err, size_t errlen)
{
    const json_t *st = json_object_get(o, "status"), *ev = json_object_get(o, "events");
    const json_t *rb = json_object_get(o, "response_body");
    json_int_t s = json_integer_value(st);
    if (!json_is_integer(st) || (s != 0 && (s < 100 || s > 999))) {
        ts_errf(err, errlen, "status: expected 0 or 100..999");
        return TS_PARSE;
    }
    x->status = (int)s;
    const char *ct = content_type(json_object_get(o, "response_headers"));
    if (ct && !(x->content_type = dup_n(ct, strlen(ct))))
        return -ENOMEM;
    int rc = 0;
    if (ev && (rc = parse_events(ev, x, err, errlen)))
        return rc;
    if (rb && !json_is_null(rb) && !(x->resp_body = value_text(rb, &x->resp_len)))
        return -ENOMEM;
    return ms_field(o, "end_ms", false, &x->end_ns, err, errlen);
}

int rec_exchange_parse(const char *line, size_t len, struct rec_exchange *x, char *err,
                       size_t errlen)
{
    json_error_t je;
    memset(x, 0, sizeof *x);
    if (len > RECORDING_LINE_MAX) {
        ts_errf(err, errlen, "a line over %u MiB", RECORDING_LINE_MAX >> 20);
        return TS_TOOBIG;
    }
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
    int rc = TS_PARSE;
    if (!json_is_object(o)) {
        ts_errf(err, errlen, o ? "expected a JSON object" : "not JSON: %s (column %d)", je.text,
                je.column);
        goto out;
    }
    if (json_integer_value(json_object_get(o, "v")) != 1) {
        ts_errf(err, errlen, "v: expected 1 (the format's version)");
        goto out;
    }
    if ((rc = ms_field(o, "offset_ms", true, &x->offset_ns, err, errlen)))
        goto out;
    x->websocket = json_is_true(json_object_get(o, "websocket"));
    if (!x->websocket &&
        ((rc = parse_request(o, x, err, errlen)) || (rc = parse_response(o, x, err, errlen))))
        goto out;
    rc = 0;
out:
    json_decref(o);
    if (rc)
        rec_exchange_release(x);
    return rc;
}

void rec_exchange_release(struct rec_exchange *x)
{
    for (size_t i = 0; i < x->nev; i++) {
        ts_free(x->ev[i].data);
        ts_free(x->ev[i].type);
    }
    ts_free(x->ev);
    ts_free(x->path);
    ts_free(x->body);
    ts_free(x->content_type);
    ts_free(x->resp_body);
    memset(x, 0, sizeof *x);
}

static int by_offset(const void *a, const void *b)
{
    const struct rec_exchange *x = a, *y = b;
    return x->offset_ns < y->offset_ns ? -1 : x->offset_ns > y->offset_ns;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The lines of one file into r (bad ones skipped, the first reason kept in warn). */
static int load_file(const char *path, struct recording *r, size_t *cap, char *warn, size_t wlen)
{
    char *data, msg[256];
    size_t len;
    int rc = file_read_all(path, RECORDING_FILE_MAX, &data, &len, msg, sizeof msg);
    if (rc) {
        ts_errf(warn, wlen, "%s", msg);
        return rc;
    }
    size_t lineno = 0;
    for (char *p = data, *end = data + len; p < end && !rc;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        lineno++;
        if (n && r->n < RECORDING_MAX) {
            if (r->n == *cap) {
                size_t nc = *cap ? 2 * *cap : 256;
                struct rec_exchange *v = ts_realloc(r->v, nc * sizeof *v);
                if (!v) {
                    rc = -ENOMEM;
                    break;
                }
                r->v = v;
                *cap = nc;
            }
            int lr = rec_exchange_parse(p, n, &r->v[r->n], msg, sizeof msg);
            if (lr == -ENOMEM)
                rc = lr;
            else if (lr) {
                if (!r->skipped)
                    ts_errf(warn, wlen, "%s:%zu: %s", path, lineno, msg);
                r->skipped++;
            } else if (r->v[r->n].websocket) {
                rec_exchange_release(&r->v[r->n]);
                r->websocket++;
            } else {
                r->n++;
            }
        }
        p += n + 1;
    }
    ts_free(data);
    return rc;
}

/* The rec-*.jsonl names of dir, sorted, into *names (*n). */
static int list_files(const char *dir, char ***names, size_t *n, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    size_t cap = 0;
    *names = NULL;
    *n = 0;
    if (!d) {
        ts_errf(err, errlen, "%s: %s", dir, strerror(errno));
        return -errno;
    }
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, "rec-", 4) || l < 10 || strcmp(e->d_name + l - 6, ".jsonl"))
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            char **v = ts_realloc(*names, cap * sizeof *v);
            if (!v) {
                rc = -ENOMEM;
                break;
            }
            *names = v;
        }
        char *p = ts_malloc(strlen(dir) + l + 2);
        if (!p) {
            rc = -ENOMEM;
            break;
        }
        sprintf(p, "%s/%s", dir, e->d_name);
        (*names)[(*n)++] = p;
    }
    closedir(d);
    if (*n)
        qsort(*names, *n, sizeof **names, by_name);
    return rc;
}

int recording_load(const char *dir, struct recording **out, char *err, size_t errlen)
{
    struct recording *r = ts_calloc(1, sizeof *r);
    struct stat st;
    char **names = NULL;
    size_t nnames = 0, cap = 0;
    int rc = 0;
    err[0] = '\0';
    if (!r)
        return -ENOMEM;
    if (stat(dir, &st) != 0) {
        ts_errf(err, errlen, "%s: %s", dir, strerror(errno));
        rc = -errno;
        goto out;
    }
    if (S_ISDIR(st.st_mode))
        rc = list_files(dir, &names, &nnames, err, errlen);
    else
        rc = load_file(dir, r, &cap, err, errlen);
    for (size_t i = 0; !rc && i < nnames; i++)
        rc = load_file(names[i], r, &cap, err, errlen);
    if (!rc && !r->n) {
        if (r->websocket)
            ts_errf(err, errlen, "%s: only WebSocket sessions (%llu), which are not replayed", dir,
                    (unsigned long long)r->websocket);
        else if (!err[0])
            ts_errf(err, errlen, "%s: no recorded exchange (rec-*.jsonl)", dir);
        rc = TS_PARSE;
    }
    if (!rc)
        qsort(r->v, r->n, sizeof *r->v, by_offset);
out:
    for (size_t i = 0; i < nnames; i++)
        ts_free(names[i]);
    ts_free(names);
    if (rc) {
        recording_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

void recording_free(struct recording *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        rec_exchange_release(&r->v[i]);
    ts_free(r->v);
    ts_free(r);
}
