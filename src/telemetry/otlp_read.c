/*
 * otlp_read.c - OTLP JSON traces into flat span records (otlp_read.h).
 */
#include "telemetry/otlp_read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/alloc.h"

#define SPANS_DEFAULT_MAX 1000000

void otlp_spans_init(struct otlp_spans *s, size_t max)
{
    memset(s, 0, sizeof(*s));
    s->max = max ? max : SPANS_DEFAULT_MAX;
}

void otlp_spans_release(struct otlp_spans *s)
{
    ts_free(s->v);
    memset(s, 0, sizeof(*s));
}

void otlp_hex(const uint8_t *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Hex of exactly 2n digits into b; "" or absent gives zeros when optional. */
static bool read_id(json_t *v, uint8_t *b, size_t n, bool optional)
{
    memset(b, 0, n);
    const char *s = json_string_value(v);
    if (!s || !*s)
        return optional;
    if (strlen(s) != 2 * n)
        return false;
    bool nonzero = false;
    for (size_t i = 0; i < n; i++) {
        int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        b[i] = (uint8_t)(hi << 4 | lo);
        nonzero |= b[i] != 0;
    }
    return nonzero || optional;
}

/* A uint64 given as a decimal string (the JSON mapping) or a JSON integer. */
static bool read_u64(json_t *v, uint64_t *out)
{
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (uint64_t)json_integer_value(v);
        return true;
    }
    const char *s = json_string_value(v);
    if (!s || !*s || strlen(s) > 20)
        return false;
    uint64_t x = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        uint64_t d = (uint64_t)(*p - '0');
        if (x > (UINT64_MAX - d) / 10)
            return false;
        x = x * 10 + d;
    }
    *out = x;
    return true;
}

static void copy_cut(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* An AnyValue as a string (stringValue, or intValue's digits); "" otherwise. */
static const char *any_string(json_t *value, char *scratch, size_t cap)
{
    const char *s = json_string_value(json_object_get(value, "stringValue"));
    if (s)
        return s;
    json_t *i = json_object_get(value, "intValue");
    if (json_is_string(i))
        return json_string_value(i);
    if (json_is_integer(i)) {
        snprintf(scratch, cap, "%lld", (long long)json_integer_value(i));
        return scratch;
    }
    return "";
}

struct attr_slot {
    const char *key;
    size_t off; /* of the field in struct otlp_rspan */
    size_t cap;
    int rank; /* a lower rank wins over a higher one */
};

#define SLOT(k, f, r)                                                                              \
    {                                                                                              \
        k, offsetof(struct otlp_rspan, f), sizeof(((struct otlp_rspan *)0)->f), r                  \
    }
static const struct attr_slot slots[] = {
    SLOT("service.name", service, 0),
    SLOT("gen_ai.request.model", model, 0),
    SLOT("gen_ai.response.model", model, 1),
    SLOT("gen_ai.provider.name", system, 0),
    SLOT("gen_ai.system", system, 1),
    SLOT("gen_ai.operation.name", operation, 0),
    SLOT("db.system.name", db_system, 0),
    SLOT("db.system", db_system, 1),
    SLOT("server.address", server_addr, 0),
    SLOT("net.peer.name", server_addr, 1),
    SLOT("peer.service", server_addr, 2),
    SLOT("url.full", url, 0),
    SLOT("http.url", url, 1),
    SLOT("url.path", url, 2),
    SLOT("http.route", route, 0),
    SLOT("traceloop.entity.name", entity, 0),
};

/* Fills the fields of sp that the attributes array names (ranks: see slots). */
static void read_attrs(json_t *attrs, struct otlp_rspan *sp, int *ranks)
{
    size_t i;
    json_t *a;
    char scratch[32];
    json_array_foreach(attrs, i, a)
    {
        if (i >= OTLP_READ_MAX_ATTRS)
            break;
        const char *key = json_string_value(json_object_get(a, "key"));
        json_t *value = json_object_get(a, "value");
        if (!key || !json_is_object(value))
            continue;
        if (!strcmp(key, "server.port") || !strcmp(key, "net.peer.port")) {
            const char *p = any_string(value, scratch, sizeof(scratch));
            long port = strtol(p, NULL, 10);
            if (port > 0 && port < 65536)
                sp->server_port = (int32_t)port;
            continue;
        }
        for (size_t k = 0; k < sizeof(slots) / sizeof(slots[0]); k++) {
            if (strcmp(key, slots[k].key) || slots[k].rank >= ranks[k])
                continue;
            const char *s = any_string(value, scratch, sizeof(scratch));
            if (!*s)
                continue;
            copy_cut((char *)sp + slots[k].off, slots[k].cap, s);
            for (size_t j = 0; j < sizeof(slots) / sizeof(slots[0]); j++)
                if (slots[j].off == slots[k].off)
                    ranks[j] = slots[k].rank;
        }
    }
}

static void strip_query(char *url)
{
    char *q = strpbrk(url, "?#");
    if (q)
        *q = '\0';
}

static int status_is_error(json_t *status)
{
    json_t *code = json_object_get(status, "code");
    if (json_is_integer(code))
        return json_integer_value(code) == 2;
    const char *s = json_string_value(code);
    return s && !strcmp(s, "STATUS_CODE_ERROR");
}

/* Reads one span; false with the reason in why when it is malformed. */
static bool read_span(json_t *j, const struct otlp_rspan *res, struct otlp_rspan *sp,
                      const char **why)
{
    *sp = *res;
    int ranks[sizeof(slots) / sizeof(slots[0])];
    for (size_t k = 0; k < sizeof(slots) / sizeof(slots[0]); k++)
        ranks[k] = 100;
    ranks[0] = -1; /* service.name only from the resource */
    if (!read_id(json_object_get(j, "traceId"), sp->trace_id, 16, false))
        return *why = "traceId is not 32 hex digits", false;
    if (!read_id(json_object_get(j, "spanId"), sp->span_id, 8, false))
        return *why = "spanId is not 16 hex digits", false;
    if (!read_id(json_object_get(j, "parentSpanId"), sp->parent_id, 8, true))
        return *why = "parentSpanId is not 16 hex digits", false;
    if (!read_u64(json_object_get(j, "startTimeUnixNano"), &sp->start_ns) ||
        !read_u64(json_object_get(j, "endTimeUnixNano"), &sp->end_ns))
        return *why = "startTimeUnixNano or endTimeUnixNano missing or not an integer", false;
    if (sp->end_ns < sp->start_ns)
        return *why = "ends before it starts", false;
    json_t *kind = json_object_get(j, "kind");
    if (json_is_integer(kind) && json_integer_value(kind) >= 0 && json_integer_value(kind) <= 5)
        sp->kind = (uint8_t)json_integer_value(kind);
    else if (json_is_string(kind)) {
        static const char *names[] = {"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL",
                                      "SPAN_KIND_SERVER",      "SPAN_KIND_CLIENT",
                                      "SPAN_KIND_PRODUCER",    "SPAN_KIND_CONSUMER"};
        for (uint8_t k = 0; k < 6; k++)
            if (!strcmp(json_string_value(kind), names[k]))
                sp->kind = k;
    }
    const char *name = json_string_value(json_object_get(j, "name"));
    copy_cut(sp->name, sizeof(sp->name), name ? name : "");
    sp->error = status_is_error(json_object_get(j, "status"));
    read_attrs(json_object_get(j, "attributes"), sp, ranks);
    strip_query(sp->url);
    return true;
}

static int push_span(struct otlp_spans *s, const struct otlp_rspan *sp)
{
    if (s->n >= s->max) {
        s->dropped++;
        return 0;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        if (cap > s->max)
            cap = s->max;
        struct otlp_rspan *v = ts_realloc(s->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = *sp;
    return 0;
}

static void reject(struct otlp_spans *s, size_t r, size_t c, size_t k, const char *why)
{
    if (!s->rejected++)
        snprintf(s->first_error, sizeof(s->first_error),
                 "resourceSpans[%zu].scopeSpans[%zu].spans[%zu]: %s", r, c, k, why);
}

/* The spans of one ExportTraceServiceRequest (or TracesData) object. */
static int read_doc(struct otlp_spans *s, json_t *doc)
{
    size_t r, c, k;
    json_t *rs, *ss, *j;
    json_array_foreach(json_object_get(doc, "resourceSpans"), r, rs)
    {
        struct otlp_rspan res;
        memset(&res, 0, sizeof(res));
        res.server_port = -1;
        int ranks[sizeof(slots) / sizeof(slots[0])];
        for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++)
            ranks[i] = i == 0 ? 100 : -1; /* the resource gives only service.name */
        read_attrs(json_object_get(json_object_get(rs, "resource"), "attributes"), &res, ranks);
        json_t *scopes = json_object_get(rs, "scopeSpans");
        if (!scopes)
            scopes = json_object_get(rs, "instrumentationLibrarySpans");
        json_array_foreach(scopes, c, ss)
        {
            json_array_foreach(json_object_get(ss, "spans"), k, j)
            {
                struct otlp_rspan sp;
                const char *why = NULL;
                if (!json_is_object(j) || !read_span(j, &res, &sp, &why)) {
                    reject(s, r, c, k, why ? why : "not an object");
                    continue;
                }
                int rc = push_span(s, &sp);
                if (rc)
                    return rc;
            }
        }
    }
    return 0;
}

int otlp_read_json(struct otlp_spans *s, const char *data, size_t len, char *err, size_t errlen)
{
    size_t off = 0;
    while (off < len) {
        while (off < len &&
               (data[off] == ' ' || data[off] == '\t' || data[off] == '\r' || data[off] == '\n'))
            off++;
        if (off == len)
            break;
        if (s->documents >= OTLP_READ_MAX_DOCS) {
            ts_errf(err, errlen, "more than %d JSON documents", OTLP_READ_MAX_DOCS);
            return TS_TOOBIG;
        }
        json_error_t je;
        json_t *doc = json_loadb(data + off, len - off, JSON_DISABLE_EOF_CHECK, &je);
        if (!doc) {
            ts_errf(err, errlen, "document %llu (byte %zu): %s",
                    (unsigned long long)s->documents + 1, off + (size_t)je.position, je.text);
            return TS_PARSE;
        }
        size_t used = (size_t)je.position;
        int rc = 0;
        if (!json_is_object(doc) || !json_is_array(json_object_get(doc, "resourceSpans"))) {
            ts_errf(err, errlen,
                    "document %llu (byte %zu): not an object with a resourceSpans array",
                    (unsigned long long)s->documents + 1, off);
            rc = TS_PARSE;
        } else {
            rc = read_doc(s, doc);
        }
        json_decref(doc);
        if (rc)
            return rc;
        s->documents++;
        off += used ? used : len - off;
    }
    return 0;
}
