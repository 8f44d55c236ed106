/*
 * otlp.c - OpenTelemetry spans as OTLP/HTTP JSON, and the batching exporter
 * (see otlp.h).
 */
#include "telemetry/otlp.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include <jansson.h>
#include <zlib.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/rng.h"
#include "net/http_client.h"
#include "ts_config.h"

#define OTLP_MAX_RESPONSE (64u << 10) /* kept of a receiver's answer */
#define OTLP_MAX_ITEM     (8u << 10)  /* one k=v item of an OTEL_* list */

/* ---- the span record ---- */

int otlp_span_add_event(struct otlp_span *s, const char *name, uint64_t time_unix_ns)
{
    if (s->n_events >= OTLP_MAX_EVENTS) {
        s->dropped_events++;
        return TS_TOOBIG;
    }
    struct otlp_event *ev = &s->events[s->n_events++];
    ev->time_unix_ns = time_unix_ns;
    ev->name = name;
    ev->first_attr = s->n_event_attrs;
    ev->n_attrs = ev->dropped_attrs = 0;
    return 0;
}

/* Adds key = the n bytes of v (is_int: decimal digits) to the last event. */
static int event_attr(struct otlp_span *s, const char *key, const char *v, size_t n, bool is_int)
{
    if (!s->n_events || s->dropped_events)
        return -EINVAL;
    struct otlp_event *ev = &s->events[s->n_events - 1];
    if (s->n_event_attrs >= OTLP_MAX_EVENT_ATTRS ||
        (size_t)s->event_text_len + n + 1 > sizeof(s->event_text)) {
        ev->dropped_attrs++;
        return TS_TOOBIG;
    }
    struct otlp_event_attr *a = &s->event_attrs[s->n_event_attrs++];
    a->key = key;
    a->off = s->event_text_len;
    a->is_int = is_int;
    memcpy(s->event_text + a->off, v, n);
    s->event_text[a->off + n] = '\0';
    s->event_text_len = (uint16_t)(s->event_text_len + n + 1);
    ev->n_attrs++;
    return 0;
}

int otlp_span_event_str(struct otlp_span *s, const char *key, const char *value)
{
    if (!value || !*value)
        return s->n_events && !s->dropped_events ? 0 : -EINVAL;
    char v[64];
    otlp_copy_str(v, sizeof(v), value);
    return event_attr(s, key, v, strlen(v), false);
}

int otlp_span_event_int(struct otlp_span *s, const char *key, int64_t value)
{
    char v[24];
    int n = snprintf(v, sizeof(v), "%" PRId64, value);
    return event_attr(s, key, v, (size_t)n, true);
}

void otlp_span_init(struct otlp_span *s)
{
    memset(s, 0, sizeof(*s));
    s->server_port = s->http_status = s->tenant = s->faults_count = -1;
    s->max_tokens = s->input_tokens = s->output_tokens = s->client_output_tokens = -1;
    s->temperature = s->ttfc_s = s->ttft_ms = s->itl_mean_ms = s->itl_max_ms = s->lag_ms = NAN;
}

void otlp_copy_str(char *dst, size_t cap, const char *src)
{
    if (!cap)
        return;
    size_t n = src ? strlen(src) : 0;
    if (n >= cap) {
        n = cap - 1;
        /* back off to the first byte of a character (not 10xxxxxx) */
        while (n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80)
            n--;
    }
    if (n)
        memcpy(dst, src, n);
    dst[n] = '\0';
}

/* ---- JSON writing ---- */

/* Length of the valid UTF-8 sequence at p (n bytes left), or 0 if invalid. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f; /* no UTF-16 surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else {
        return 0;
    }
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    return len;
}

/* Appends s (n bytes) as a JSON string: escaped, invalid UTF-8 as U+FFFD. */
static int json_strn(struct buf *b, const char *s, size_t n)
{
    int rc = buf_append_char(b, '"');
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (!rc && i < n) {
        size_t run = i;
        /* copy plain runs in one append */
        while (run < n && p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' && p[run] != '\\')
            run++;
        if (run > i) {
            rc = buf_append(b, s + i, run - i);
            i = run;
            continue;
        }
        unsigned char c = p[i];
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            rc = buf_append(b, esc, 2);
            i++;
        } else if (c < 0x20) {
            rc = buf_appendf(b, "\\u%04x", c);
            i++;
        } else {
            size_t len = utf8_len(p + i, n - i);
            if (len) {
                rc = buf_append(b, s + i, len);
                i += len;
            } else {
                rc = buf_append(b, "\xef\xbf\xbd", 3);
                i++;
            }
        }
    }
    return rc ? rc : buf_append_char(b, '"');
}

static int json_str(struct buf *b, const char *s)
{
    return json_strn(b, s, strlen(s));
}

/* Writes the ',' between attributes. */
struct attrs {
    struct buf *b;
    int rc;
    bool any;
};

static void attr_key(struct attrs *a, const char *key)
{
    if (a->rc)
        return;
    a->rc = buf_append_str(a->b, a->any ? ",{\"key\":" : "{\"key\":");
    a->any = true;
    if (!a->rc)
        a->rc = json_str(a->b, key);
}

static void attr_str(struct attrs *a, const char *key, const char *v)
{
    if (!v || !*v)
        return;
    attr_key(a, key);
    if (!a->rc)
        a->rc = buf_append_str(a->b, ",\"value\":{\"stringValue\":");
    if (!a->rc)
        a->rc = json_str(a->b, v);
    if (!a->rc)
        a->rc = buf_append_str(a->b, "}}");
}

static void attr_int(struct attrs *a, const char *key, int64_t v)
{
    if (v < 0)
        return;
    attr_key(a, key);
    if (!a->rc) /* int64 is a decimal string in the JSON mapping */
        a->rc = buf_appendf(a->b, ",\"value\":{\"intValue\":\"%" PRId64 "\"}}", v);
}

static void attr_double(struct attrs *a, const char *key, double v)
{
    if (!isfinite(v))
        return;
    attr_key(a, key);
    if (!a->rc)
        a->rc = buf_appendf(a->b, ",\"value\":{\"doubleValue\":%.15g}}", v);
}

static void attr_bool(struct attrs *a, const char *key, bool v)
{
    attr_key(a, key);
    if (!a->rc)
        a->rc = buf_appendf(a->b, ",\"value\":{\"boolValue\":%s}}", v ? "true" : "false");
}

static void attr_str_array1(struct attrs *a, const char *key, const char *v)
{
    if (!*v)
        return;
    attr_key(a, key);
    if (!a->rc)
        a->rc = buf_append_str(a->b, ",\"value\":{\"arrayValue\":{\"values\":[{\"stringValue\":");
    if (!a->rc)
        a->rc = json_str(a->b, v);
    if (!a->rc)
        a->rc = buf_append_str(a->b, "}]}}}");
}

static int put_id(struct buf *b, const char *name, const uint8_t *id, size_t n)
{
    char hex[2 * TRACE_ID_LEN + 1];
    trace_id_hex(id, n, hex);
    return buf_appendf(b, "\"%s\":\"%s\",", name, hex);
}

/* Appends event i of s as a Span.Event object (preceded by ',' when comma). */
static int encode_event(struct buf *b, const struct otlp_span *s, unsigned i, bool comma)
{
    const struct otlp_event *ev = &s->events[i];
    int rc = buf_appendf(b, "%s{\"timeUnixNano\":\"%" PRIu64 "\",\"name\":", comma ? "," : "",
                         ev->time_unix_ns);
    if (!rc)
        rc = json_str(b, ev->name ? ev->name : "event");
    if (!rc)
        rc = buf_append_str(b, ",\"attributes\":[");
    struct attrs a = {.b = b, .rc = rc};
    for (unsigned k = ev->first_attr;
         k < (unsigned)ev->first_attr + ev->n_attrs && k < OTLP_MAX_EVENT_ATTRS; k++) {
        const struct otlp_event_attr *at = &s->event_attrs[k];
        const char *v = at->off < OTLP_EVENT_TEXT ? s->event_text + at->off : "";
        if (!at->is_int) {
            attr_str(&a, at->key ? at->key : "", v);
        } else {
            attr_key(&a, at->key ? at->key : "");
            if (!a.rc) /* digits written by otlp_span_event_int */
                a.rc = buf_appendf(b, ",\"value\":{\"intValue\":\"%.23s\"}}", v);
        }
    }
    rc = a.rc;
    if (!rc)
        rc = buf_append_char(b, ']');
    if (!rc && ev->dropped_attrs)
        rc = buf_appendf(b, ",\"droppedAttributesCount\":%u", (unsigned)ev->dropped_attrs);
    if (!rc)
        rc = buf_append_char(b, '}');
    return rc;
}

int otlp_encode_span(struct buf *b, const struct otlp_span *s)
{
    int rc = buf_append_char(b, '{');
    if (!rc)
        rc = put_id(b, "traceId", s->trace_id, TRACE_ID_LEN);
    if (!rc)
        rc = put_id(b, "spanId", s->span_id, SPAN_ID_LEN);
    if (!rc && trace_id_valid(s->parent_span_id, SPAN_ID_LEN))
        rc = put_id(b, "parentSpanId", s->parent_span_id, SPAN_ID_LEN);
    /* name: "{gen_ai.operation.name} {gen_ai.request.model}" */
    if (!rc)
        rc = buf_append_str(b, "\"name\":");
    if (!rc && s->name_prefix) {
        char name[256];
        snprintf(name, sizeof(name), "%s%s%s%s%.128s", s->name_prefix, s->http_method[0] ? " " : "",
                 s->http_method, s->url_path[0] ? " " : "", s->url_path);
        rc = json_str(b, name);
    } else if (!rc) {
        const char *op = s->operation && *s->operation ? s->operation : "request";
        char name[256];
        if (s->request_model && *s->request_model)
            snprintf(name, sizeof(name), "%s %s", op, s->request_model);
        else
            snprintf(name, sizeof(name), "%s", op);
        rc = json_str(b, name);
    }
    if (!rc)
        rc = buf_appendf(b,
                         ",\"kind\":%u,\"startTimeUnixNano\":\"%" PRIu64
                         "\",\"endTimeUnixNano\":\"%" PRIu64 "\",\"attributes\":[",
                         (unsigned)s->kind, s->start_unix_ns, s->end_unix_ns);
    if (rc)
        return rc;
    struct attrs a = {.b = b};
    attr_str(&a, "gen_ai.operation.name", s->operation);
    attr_str(&a, "gen_ai.provider.name", s->provider);
    attr_str(&a, "gen_ai.request.model", s->request_model);
    attr_int(&a, "gen_ai.request.max_tokens", s->max_tokens);
    attr_double(&a, "gen_ai.request.temperature", s->temperature);
    if (s->stream)
        attr_bool(&a, "gen_ai.request.stream", true);
    attr_str(&a, "gen_ai.response.id", s->response_id);
    attr_str(&a, "gen_ai.response.model", s->response_model);
    attr_str_array1(&a, "gen_ai.response.finish_reasons", s->finish_reason);
    attr_double(&a, "gen_ai.response.time_to_first_chunk", s->ttfc_s);
    attr_int(&a, "gen_ai.usage.input_tokens", s->input_tokens);
    attr_int(&a, "gen_ai.usage.output_tokens", s->output_tokens);
    attr_str(&a, "http.request.method", s->http_method);
    attr_str(&a, "url.path", s->url_path);
    attr_str(&a, "server.address", s->server_address);
    attr_int(&a, "server.port", s->server_port);
    attr_int(&a, "http.response.status_code", s->http_status);
    attr_str(&a, "error.type", s->error_type);
    attr_str(&a, "tokenstorm.request_id", s->request_id);
    attr_str(&a, "tokenstorm.outcome", s->outcome);
    attr_int(&a, "tokenstorm.tenant", s->tenant);
    attr_int(&a, "tokenstorm.output_tokens", s->client_output_tokens);
    attr_double(&a, "tokenstorm.ttft_ms", s->ttft_ms);
    attr_double(&a, "tokenstorm.itl.mean_ms", s->itl_mean_ms);
    attr_double(&a, "tokenstorm.itl.max_ms", s->itl_max_ms);
    attr_double(&a, "tokenstorm.schedule_lag_ms", s->lag_ms);
    if (s->warmup)
        attr_bool(&a, "tokenstorm.warmup", true);
    attr_int(&a, "tokenstorm.faults.count", s->faults_count);
    rc = a.rc;
    if (!rc)
        rc = buf_append_str(b, "],\"events\":[");
    if (!rc && s->first_chunk_unix_ns)
        rc = buf_appendf(b, "{\"timeUnixNano\":\"%" PRIu64 "\",\"name\":\"gen_ai.first_chunk\"}",
                         s->first_chunk_unix_ns);
    for (unsigned i = 0; !rc && i < s->n_events && i < OTLP_MAX_EVENTS; i++)
        rc = encode_event(b, s, i, i > 0 || s->first_chunk_unix_ns);
    if (!rc && s->dropped_events)
        rc = buf_appendf(b, "],\"droppedEventsCount\":%" PRIu32 ",\"status\":{\"code\":%u",
                         s->dropped_events, (unsigned)s->status);
    else if (!rc)
        rc = buf_appendf(b, "],\"status\":{\"code\":%u", (unsigned)s->status);
    if (!rc && s->status == OTLP_STATUS_ERROR && s->status_message[0]) {
        rc = buf_append_str(b, ",\"message\":");
        if (!rc)
            rc = json_str(b, s->status_message);
    }
    if (!rc)
        rc = buf_append_str(b, "}}");
    return rc;
}

int otlp_encode_request(struct buf *b, const struct otlp_config *cfg, const struct otlp_span *spans,
                        size_t n)
{
    int rc = buf_append_str(b, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[");
    struct attrs a = {.b = b, .rc = rc};
    attr_str(&a, "service.name",
             cfg->service_name && *cfg->service_name ? cfg->service_name : "tokenstorm");
    for (size_t i = 0; i < cfg->n_resource; i++)
        if (strcmp(cfg->resource[i].key, "service.name"))
            attr_str(&a, cfg->resource[i].key, cfg->resource[i].value);
    rc = a.rc;
    if (!rc)
        rc = buf_appendf(
            b,
            "]},\"scopeSpans\":[{\"scope\":{\"name\":\"tokenstorm\",\"version\":\"%s\"},"
            "\"spans\":[",
            TS_VERSION);
    for (size_t i = 0; !rc && i < n; i++) {
        if (i)
            rc = buf_append_char(b, ',');
        if (!rc)
            rc = otlp_encode_span(b, &spans[i]);
    }
    if (!rc)
        rc = buf_append_str(b, "]}]}]}");
    return rc;
}

int otlp_parse_response(const char *body, size_t len, uint64_t *rejected)
{
    *rejected = 0;
    json_t *doc = len ? json_loadb(body, len, 0, NULL) : NULL;
    if (!json_is_object(doc)) {
        json_decref(doc);
        return 0;
    }
    int rc = 0;
    json_t *ps = json_object_get(doc, "partialSuccess");
    json_t *r = json_is_object(ps) ? json_object_get(ps, "rejectedSpans") : NULL;
    if (json_is_integer(r)) {
        if (json_integer_value(r) < 0)
            rc = TS_PARSE;
        else
            *rejected = (uint64_t)json_integer_value(r);
    } else if (json_is_string(r)) {
        const char *s = json_string_value(r);
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (!*s || *end || errno || *s == '-')
            rc = TS_PARSE;
        else
            *rejected = v;
    } else if (r && !json_is_null(r)) {
        rc = TS_PARSE;
    }
    json_decref(doc);
    return rc;
}

/* ---- configuration ---- */

void otlp_config_init(struct otlp_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->timeout_ms = 10000;
    cfg->schedule_delay_ms = 1000;
    cfg->max_queue = 8192;
    cfg->max_batch = 512;
    cfg->max_attempts = 5;
    cfg->backoff_initial_ms = 500;
    cfg->backoff_max_ms = 8000;
    cfg->flush_timeout_ms = 5000;
}

void otlp_config_release(struct otlp_config *cfg)
{
    ts_free(cfg->endpoint);
    for (size_t i = 0; i < cfg->n_headers; i++)
        ts_free(cfg->headers[i]);
    ts_free(cfg->headers);
    ts_free(cfg->ca_file);
    ts_free(cfg->service_name);
    for (size_t i = 0; i < cfg->n_resource; i++) {
        ts_free(cfg->resource[i].key);
        ts_free(cfg->resource[i].value);
    }
    otlp_config_init(cfg);
}

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

int otlp_parse_kv_list(const char *list, int (*fn)(const char *key, const char *value, void *arg),
                       void *arg)
{
    const char *p = list;
    while (*p) {
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        const char *a = p, *z = end;
        while (a < z && blank(*a))
            a++;
        while (z > a && blank(z[-1]))
            z--;
        if (a < z) {
            const char *eq = memchr(a, '=', (size_t)(z - a));
            if (!eq)
                return TS_PARSE;
            const char *k1 = eq;
            while (k1 > a && blank(k1[-1]))
                k1--;
            const char *v0 = eq + 1;
            while (v0 < z && blank(*v0))
                v0++;
            if (k1 == a)
                return TS_PARSE;
            if ((size_t)(z - a) > OTLP_MAX_ITEM)
                return TS_TOOBIG;
            char key[OTLP_MAX_ITEM + 1], value[OTLP_MAX_ITEM + 1];
            long kn = percent_decode(a, (size_t)(k1 - a), key, sizeof(key));
            long vn = kn < 0 ? kn : percent_decode(v0, (size_t)(z - v0), value, sizeof(value));
            /* a NUL (from "%00") would cut the key or value short: refuse it */
            if (kn < 0 || vn < 0 || memchr(key, 0, (size_t)kn) || memchr(value, 0, (size_t)vn))
                return TS_PARSE;
            int rc = fn(key, value, arg);
            if (rc)
                return rc;
        }
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* The value of the traces-specific variable, else the general one, else NULL (empty = unset). */
static const char *env2(const char *traces_name, const char *name)
{
    const char *v = getenv(traces_name);
    if (v && *v)
        return v;
    v = getenv(name);
    return v && *v ? v : NULL;
}

static int env_u32(const char *name, uint32_t lo, uint32_t hi, uint32_t *out, char *err,
                   size_t errlen)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-' || x < lo || x > hi) {
        ts_errf(err, errlen, "%s: expected a whole number %u..%u", name, lo, hi);
        return -EINVAL;
    }
    *out = (uint32_t)x;
    return 0;
}

static bool env_true(const char *name)
{
    const char *v = getenv(name);
    return v && !strcasecmp(v, "true");
}

/* Checks the scheme and builds the traces URL (appending /v1/traces unless already there). */
static int make_endpoint(const char *url, bool always_append, bool append, char **out, char *err,
                         size_t errlen, const char *what)
{
    if (strncasecmp(url, "http://", 7) && strncasecmp(url, "https://", 8)) {
        ts_errf(err, errlen, "%s: expected an http:// or https:// URL", what);
        return -EINVAL;
    }
    if (strpbrk(url, " \t\r\n")) {
        ts_errf(err, errlen, "%s: the URL contains blanks", what);
        return -EINVAL;
    }
    size_t n = strlen(url);
    static const char suffix[] = "/v1/traces";
    bool has = n >= sizeof(suffix) - 1 && !strcmp(url + n - (sizeof(suffix) - 1), suffix);
    if (!append || (!always_append && has)) {
        *out = ts_strdup(url);
    } else {
        while (n > 0 && url[n - 1] == '/')
            n--;
        *out = ts_malloc(n + sizeof(suffix));
        if (*out) {
            memcpy(*out, url, n);
            memcpy(*out + n, suffix, sizeof(suffix));
        }
    }
    return *out ? 0 : -ENOMEM;
}

struct hdr_ctx {
    struct otlp_config *cfg;
    size_t item; /* of the list, for the error message */
};

static int add_header(const char *key, const char *value, void *arg)
{
    struct hdr_ctx *h = arg;
    struct otlp_config *cfg = h->cfg;
    h->item++;
    for (const char *k = key; *k; k++)
        if (!http_tchar((unsigned char)*k))
            return -EINVAL;
    if (strpbrk(value, "\r\n"))
        return -EINVAL;
    size_t klen = strlen(key);
    /* the same key again (the traces list after the general one): replace it */
    for (size_t i = 0; i < cfg->n_headers; i++) {
        if (!strncasecmp(cfg->headers[i], key, klen) && cfg->headers[i][klen] == ':') {
            ts_free(cfg->headers[i]);
            cfg->headers[i] = cfg->headers[--cfg->n_headers];
            break;
        }
    }
    if (cfg->n_headers == OTLP_MAX_HEADERS)
        return TS_TOOBIG;
    size_t n = klen + strlen(value) + 3;
    char *line = ts_malloc(n);
    if (!line)
        return -ENOMEM;
    snprintf(line, n, "%s: %s", key, value);
    cfg->headers[cfg->n_headers++] = line;
    return 0;
}

static int add_resource(const char *key, const char *value, void *arg)
{
    struct otlp_config *cfg = arg;
    for (size_t i = 0; i < cfg->n_resource; i++) {
        if (!strcmp(cfg->resource[i].key, key)) {
            char *v = ts_strdup(value);
            if (!v)
                return -ENOMEM;
            ts_free(cfg->resource[i].value);
            cfg->resource[i].value = v;
            return 0;
        }
    }
    if (cfg->n_resource == OTLP_MAX_RESOURCE)
        return TS_TOOBIG;
    char *k = ts_strdup(key), *v = ts_strdup(value);
    if (!k || !v) {
        ts_free(k);
        ts_free(v);
        return -ENOMEM;
    }
    cfg->resource[cfg->n_resource].key = k;
    cfg->resource[cfg->n_resource++].value = v;
    return 0;
}

static int read_headers(struct otlp_config *cfg, const char *var, char *err, size_t errlen)
{
    const char *v = getenv(var);
    if (!v || !*v)
        return 0;
    struct hdr_ctx h = {.cfg = cfg};
    int rc = otlp_parse_kv_list(v, add_header, &h);
    if (rc == -ENOMEM)
        return rc;
    if (rc) {
        /* never echo the list: it holds credentials */
        ts_errf(err, errlen, "%s: item %zu is not a valid 'name=value' header%s", var,
                h.item + (rc == TS_PARSE), rc == TS_TOOBIG ? " (too many or too long)" : "");
        return -EINVAL;
    }
    return 0;
}

int otlp_config_from_env(struct otlp_config *cfg, const char *cli_endpoint, char *err,
                         size_t errlen)
{
    int rc;
    bool env_on = !env_true("OTEL_SDK_DISABLED");
    const char *exporter = getenv("OTEL_TRACES_EXPORTER");
    if (exporter && !strcasecmp(exporter, "none"))
        env_on = false;
    const char *traces_url = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    const char *base_url = getenv("OTEL_EXPORTER_OTLP_ENDPOINT");
    if (cli_endpoint)
        rc = make_endpoint(cli_endpoint, false, true, &cfg->endpoint, err, errlen,
                           "--otlp-endpoint");
    else if (env_on && traces_url && *traces_url)
        rc = make_endpoint(traces_url, false, false, &cfg->endpoint, err, errlen,
                           "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    else if (env_on && base_url && *base_url)
        rc = make_endpoint(base_url, true, true, &cfg->endpoint, err, errlen,
                           "OTEL_EXPORTER_OTLP_ENDPOINT");
    else
        return 0; /* tracing off */
    if (rc)
        return rc;
    cfg->headers = ts_calloc(OTLP_MAX_HEADERS, sizeof(*cfg->headers));
    if (!cfg->headers)
        return -ENOMEM;
    if ((rc = read_headers(cfg, "OTEL_EXPORTER_OTLP_HEADERS", err, errlen)) ||
        (rc = read_headers(cfg, "OTEL_EXPORTER_OTLP_TRACES_HEADERS", err, errlen)))
        return rc;
    const char *comp =
        env2("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "OTEL_EXPORTER_OTLP_COMPRESSION");
    if (comp && !strcasecmp(comp, "gzip"))
        cfg->gzip = true;
    else if (comp && strcasecmp(comp, "none"))
        ts_warn("otlp: compression '%s' is not supported (gzip, none): sending uncompressed", comp);
    const char *proto = env2("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL");
    if (proto && strcasecmp(proto, "http/json"))
        ts_warn("otlp: protocol '%s' is not supported: sending OTLP/HTTP with JSON (http/json)",
                proto);
    const char *ca =
        env2("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "OTEL_EXPORTER_OTLP_CERTIFICATE");
    if (ca && !(cfg->ca_file = ts_strdup(ca)))
        return -ENOMEM;
    const char *tvar =
        getenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") && *getenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
            ? "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"
            : "OTEL_EXPORTER_OTLP_TIMEOUT";
    if ((rc = env_u32(tvar, 1, 600000, &cfg->timeout_ms, err, errlen)) ||
        (rc =
             env_u32("OTEL_BSP_SCHEDULE_DELAY", 1, 600000, &cfg->schedule_delay_ms, err, errlen)) ||
        (rc = env_u32("OTEL_BSP_MAX_QUEUE_SIZE", 1, 1u << 22, &cfg->max_queue, err, errlen)) ||
        (rc = env_u32("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 1, 1u << 16, &cfg->max_batch, err, errlen)))
        return rc;
    if (cfg->max_batch > cfg->max_queue)
        cfg->max_batch = cfg->max_queue; /* as the SDK specification says */
    const char *res = getenv("OTEL_RESOURCE_ATTRIBUTES");
    if (res && *res) {
        rc = otlp_parse_kv_list(res, add_resource, cfg);
        if (rc == -ENOMEM)
            return rc;
        if (rc) {
            ts_errf(err, errlen, "OTEL_RESOURCE_ATTRIBUTES: expected 'key=value,...'%s",
                    rc == TS_TOOBIG ? " (too many or too long)" : "");
            return -EINVAL;
        }
    }
    const char *svc = getenv("OTEL_SERVICE_NAME");
    if (!svc || !*svc) {
        svc = "tokenstorm";
        for (size_t i = 0; i < cfg->n_resource; i++)
            if (!strcmp(cfg->resource[i].key, "service.name"))
                svc = cfg->resource[i].value;
    }
    if (!(cfg->service_name = ts_strdup(svc)))
        return -ENOMEM;
    return 0;
}

/* ---- the exporter ---- */

struct otlp_batch {
    struct otlp_exporter *e;
    struct otlp_batch *prev, *next;
    char *body; /* what is sent (gzip-compressed when asked) */
    size_t body_len;
    size_t n_spans;
    uint32_t attempts;
    uint64_t retry_at; /* monotonic ns; 0 = not waiting */
    struct http_call *call;
    struct buf resp;
};

struct otlp_exporter {
    struct otlp_config cfg;
    const char *hdrs[OTLP_MAX_HEADERS + 3];
    size_t n_hdrs;

    /* the queue, shared with producers */
    pthread_mutex_t lock;
    struct otlp_span *ring;
    uint32_t cap, head, count;
    bool wake_sent;
    bool refuse; /* closing: no more pushes, no more uv_async_send */
    atomic_bool close_req;

    atomic_uint_fast64_t dropped, exported, failed, retries, batches_done;

    /* the exporter thread's own */
    pthread_t thread;
    uv_loop_t loop;
    uv_async_t wake;
    uv_timer_t tick, retry_timer, deadline;
    struct http_client client;
    struct otlp_batch *batches;
    unsigned n_batches;
    struct otlp_span *take; /* max_batch spans taken out of the ring */
    struct buf json;
    struct rng rng;
    uint64_t deadline_ns; /* monotonic end of the flush, once closing */
    bool closing, deadline_hit, finishing;
    bool warned_status, warned_transport, warned_rejected;
    char host[128]; /* endpoint without user-info, for messages */
};

static void pump(struct otlp_exporter *e, bool all);
static void maybe_finish(struct otlp_exporter *e);
static void on_retry_timer(uv_timer_t *h);

static void batch_free(struct otlp_batch *b)
{
    struct otlp_exporter *e = b->e;
    if (b->prev)
        b->prev->next = b->next;
    else
        e->batches = b->next;
    if (b->next)
        b->next->prev = b->prev;
    e->n_batches--;
    buf_release(&b->resp);
    ts_free(b->body);
    ts_free(b);
}

static void batch_fail(struct otlp_batch *b)
{
    atomic_fetch_add(&b->e->failed, b->n_spans);
    atomic_fetch_add(&b->e->batches_done, 1);
    batch_free(b);
}

/* gzip (RFC 1952) of in; *out is a heap block the caller frees. */
static int gzip_body(const char *in, size_t n, char **out, size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -ENOMEM;
    size_t cap = deflateBound(&z, (uLong)n) + 32;
    char *o = ts_malloc(cap);
    if (!o) {
        deflateEnd(&z);
        return -ENOMEM;
    }
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    z.next_out = (Bytef *)o;
    z.avail_out = (uInt)cap;
    int zrc = deflate(&z, Z_FINISH);
    *out_len = cap - z.avail_out;
    deflateEnd(&z);
    if (zrc != Z_STREAM_END) {
        ts_free(o);
        return -EIO;
    }
    *out = o;
    return 0;
}

static int on_body(struct http_call *call, const char *data, size_t len, uint64_t now_ns,
                   void *user)
{
    struct otlp_batch *b = user;
    size_t room = OTLP_MAX_RESPONSE > b->resp.len ? OTLP_MAX_RESPONSE - b->resp.len : 0;
    if (len > room)
        len = room;
    if (len && buf_append(&b->resp, data, len))
        return 0; /* out of memory: the answer is only read for partial success */
    return 0;
}

static void on_done(struct http_call *call, const struct http_call_result *res, void *user);

static const struct http_call_ops export_ops = {
    .on_body = on_body,
    .on_done = on_done,
};

static void batch_send(struct otlp_batch *b)
{
    struct otlp_exporter *e = b->e;
    struct http_call_spec spec = {
        .method = "POST",
        .url = e->cfg.endpoint,
        .headers = e->hdrs,
        .n_headers = e->n_hdrs,
        .body = b->body,
        .body_len = b->body_len,
        .total_timeout_ms = e->cfg.timeout_ms,
    };
    b->attempts++;
    buf_reset(&b->resp);
    int rc = http_client_request(&e->client, &spec, &export_ops, b, &b->call);
    if (rc) {
        b->call = NULL;
        if (!e->warned_transport) {
            e->warned_transport = true;
            ts_warn("otlp: cannot send to %s: %s", e->host, ts_strerror(rc));
        }
        batch_fail(b);
    }
}

/* Arms the retry timer for the earliest waiting batch. */
static void arm_retry(struct otlp_exporter *e)
{
    uint64_t first = 0;
    for (struct otlp_batch *b = e->batches; b; b = b->next)
        if (b->retry_at && (!first || b->retry_at < first))
            first = b->retry_at;
    if (!first) {
        uv_timer_stop(&e->retry_timer);
        return;
    }
    uint64_t now = ts_now_ns();
    uint64_t ms = first > now ? (first - now + TS_NS_PER_MS - 1) / TS_NS_PER_MS : 0;
    uv_timer_start(&e->retry_timer, on_retry_timer, ms, 0);
}

static void on_retry_timer(uv_timer_t *h)
{
    struct otlp_exporter *e = h->data;
    uint64_t now = ts_now_ns();
    struct otlp_batch *next;
    for (struct otlp_batch *b = e->batches; b; b = next) {
        next = b->next;
        if (b->retry_at && b->retry_at <= now) {
            b->retry_at = 0;
            atomic_fetch_add(&e->retries, 1);
            batch_send(b);
        }
    }
    arm_retry(e);
    maybe_finish(e);
}

/* Delay before the next attempt: Retry-After when the server sent one, else backoff. */
static uint64_t retry_delay_ns(struct otlp_exporter *e, const struct otlp_batch *b, const char *ra)
{
    if (ra && *ra) {
        char *end;
        errno = 0;
        unsigned long long s = strtoull(ra, &end, 10);
        if (!errno && end != ra && !*end && ra[0] != '-')
            return (s > OTLP_MAX_RETRY_AFTER ? OTLP_MAX_RETRY_AFTER : s) * TS_NS_PER_S;
        time_t when = curl_getdate(ra, NULL); /* an HTTP-date */
        if (when > 0) {
            int64_t d = (int64_t)when - (int64_t)(ts_wall_ns() / TS_NS_PER_S);
            d = d < 0 ? 0 : d > OTLP_MAX_RETRY_AFTER ? OTLP_MAX_RETRY_AFTER : d;
            return (uint64_t)d * TS_NS_PER_S;
        }
    }
    uint64_t ms = e->cfg.backoff_initial_ms;
    for (uint32_t i = 1; i < b->attempts && ms < e->cfg.backoff_max_ms; i++)
        ms *= 2;
    if (ms > e->cfg.backoff_max_ms)
        ms = e->cfg.backoff_max_ms;
    double f = 0.5 + rng_uniform01(&e->rng); /* jitter: 0.5x .. 1.5x */
    return (uint64_t)((double)ms * f * (double)TS_NS_PER_MS);
}

static bool retryable_status(long st)
{
    return st == 429 || st == 502 || st == 503 || st == 504;
}

static void on_done(struct http_call *call, const struct http_call_result *res, void *user)
{
    struct otlp_batch *b = user;
    struct otlp_exporter *e = b->e;
    b->call = NULL;
    long st = res->status;
    bool ok = res->error == HTTP_CALL_OK;
    if (ok && st >= 200 && st < 300) {
        uint64_t rejected = 0;
        if (otlp_parse_response(buf_cstr(&b->resp), b->resp.len, &rejected))
            rejected = 0;
        if (rejected > b->n_spans)
            rejected = b->n_spans;
        if (rejected && !e->warned_rejected) {
            e->warned_rejected = true;
            ts_warn("otlp: %s rejected %" PRIu64 " of %zu spans (partial success, not retried)",
                    e->host, rejected, b->n_spans);
        }
        atomic_fetch_add(&e->exported, b->n_spans - rejected);
        atomic_fetch_add(&e->failed, rejected);
        atomic_fetch_add(&e->batches_done, 1);
        batch_free(b);
    } else if ((ok && retryable_status(st)) || (!ok && res->error != HTTP_CALL_ERR_ABORTED)) {
        uint64_t now = ts_now_ns();
        uint64_t at = now + retry_delay_ns(e, b, http_call_header(call, "retry-after"));
        if (b->attempts >= e->cfg.max_attempts || e->deadline_hit ||
            (e->closing && at >= e->deadline_ns)) {
            if (!e->warned_transport) {
                e->warned_transport = true;
                if (ok)
                    ts_warn("otlp: %s answered %ld after %u attempts: %zu spans not exported",
                            e->host, st, b->attempts, b->n_spans);
                else
                    ts_warn("otlp: cannot reach %s (%s) after %u attempts: %zu spans not "
                            "exported",
                            e->host, http_call_error_name(res->error), b->attempts, b->n_spans);
            }
            batch_fail(b);
        } else {
            b->retry_at = at;
            arm_retry(e);
        }
    } else {
        if (!e->warned_status) {
            e->warned_status = true;
            if (ok)
                ts_warn("otlp: %s answered %ld: %zu spans not exported (not retried)", e->host, st,
                        b->n_spans);
            else
                ts_warn("otlp: export to %s cut at the end of the flush: %zu spans not exported",
                        e->host, b->n_spans);
        }
        batch_fail(b);
    }
    pump(e, e->closing);
    maybe_finish(e);
}

/* Takes up to max_batch spans from the ring; `all` also takes a partial batch. */
static size_t take_spans(struct otlp_exporter *e, bool all)
{
    pthread_mutex_lock(&e->lock);
    size_t n = e->count >= e->cfg.max_batch ? e->cfg.max_batch : all ? e->count : 0;
    for (size_t i = 0; i < n; i++)
        e->take[i] = e->ring[(e->head + i) % e->cap];
    e->head = (uint32_t)((e->head + n) % e->cap);
    e->count -= (uint32_t)n;
    pthread_mutex_unlock(&e->lock);
    return n;
}

/* Starts exports while there is room: full batches, or everything with `all`. */
static void pump(struct otlp_exporter *e, bool all)
{
    while (!e->deadline_hit && !e->finishing && e->n_batches < OTLP_MAX_INFLIGHT) {
        size_t n = take_spans(e, all);
        if (!n)
            return;
        buf_reset(&e->json);
        struct otlp_batch *b = ts_calloc(1, sizeof(*b));
        int rc = b ? otlp_encode_request(&e->json, &e->cfg, e->take, n) : -ENOMEM;
        if (!rc && e->cfg.gzip)
            rc = gzip_body(e->json.data, e->json.len, &b->body, &b->body_len);
        else if (!rc)
            b->body = buf_take(&e->json, &b->body_len);
        if (rc || !b->body) {
            ts_warn("otlp: cannot encode %zu spans: %s", n, ts_strerror(rc ? rc : -ENOMEM));
            atomic_fetch_add(&e->failed, n);
            if (b)
                ts_free(b->body);
            ts_free(b);
            continue;
        }
        b->e = e;
        b->n_spans = n;
        buf_init(&b->resp, OTLP_MAX_RESPONSE);
        b->next = e->batches;
        if (e->batches)
            e->batches->prev = b;
        e->batches = b;
        e->n_batches++;
        batch_send(b);
    }
}

static void on_client_closed(struct http_client *c, void *arg)
{
    struct otlp_exporter *e = arg;
    uv_close((uv_handle_t *)&e->wake, NULL);
    uv_close((uv_handle_t *)&e->tick, NULL);
    uv_close((uv_handle_t *)&e->retry_timer, NULL);
    uv_close((uv_handle_t *)&e->deadline, NULL);
}

/* Ends the thread's loop once the flush is over: nothing queued, nothing in flight. */
static void maybe_finish(struct otlp_exporter *e)
{
    if (!e->closing || e->finishing || e->n_batches)
        return;
    pthread_mutex_lock(&e->lock);
    uint32_t left = e->count;
    pthread_mutex_unlock(&e->lock);
    if (left && !e->deadline_hit)
        return;
    e->finishing = true;
    uv_timer_stop(&e->tick);
    uv_timer_stop(&e->retry_timer);
    uv_timer_stop(&e->deadline);
    http_client_close(&e->client, on_client_closed, e);
}

static void on_deadline(uv_timer_t *h)
{
    struct otlp_exporter *e = h->data;
    e->deadline_hit = true;
    /* what is still queued will never be sent */
    pthread_mutex_lock(&e->lock);
    uint32_t left = e->count;
    e->count = 0;
    pthread_mutex_unlock(&e->lock);
    atomic_fetch_add(&e->failed, left);
    struct otlp_batch *next;
    for (struct otlp_batch *b = e->batches; b; b = next) {
        next = b->next;
        if (b->call)
            http_call_cancel(b->call); /* on_done fails it */
        else
            batch_fail(b);
    }
    if (left || e->n_batches)
        ts_warn("otlp: flush timed out after %u ms", e->cfg.flush_timeout_ms);
    maybe_finish(e);
}

static void on_wake(uv_async_t *h)
{
    struct otlp_exporter *e = h->data;
    pthread_mutex_lock(&e->lock);
    e->wake_sent = false;
    pthread_mutex_unlock(&e->lock);
    if (atomic_load(&e->close_req) && !e->closing) {
        e->closing = true;
        e->deadline_ns = ts_now_ns() + (uint64_t)e->cfg.flush_timeout_ms * TS_NS_PER_MS;
        uv_timer_start(&e->deadline, on_deadline, e->cfg.flush_timeout_ms, 0);
        /* a batch waiting for a retry after the deadline will not make it */
        struct otlp_batch *next;
        for (struct otlp_batch *b = e->batches; b; b = next) {
            next = b->next;
            if (b->retry_at && b->retry_at >= e->deadline_ns)
                batch_fail(b);
        }
        arm_retry(e);
    }
    pump(e, e->closing);
    maybe_finish(e);
}

static void on_tick(uv_timer_t *h)
{
    struct otlp_exporter *e = h->data;
    pump(e, true);
}

static void *exporter_main(void *arg)
{
    struct otlp_exporter *e = arg;
    uv_run(&e->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* "scheme://host:port/path" without "user:password@", for messages. */
static void redact_url(const char *url, char *out, size_t n)
{
    const char *p = strstr(url, "://");
    const char *host = p ? p + 3 : url;
    const char *end = host + strcspn(host, "/?#");
    const char *at = memchr(host, '@', (size_t)(end - host));
    if (at)
        snprintf(out, n, "%.*s%s", (int)(host - url), url, at + 1);
    else
        snprintf(out, n, "%s", url);
}

static void exporter_free(struct otlp_exporter *e)
{
    pthread_mutex_destroy(&e->lock);
    otlp_config_release(&e->cfg);
    buf_release(&e->json);
    ts_free(e->ring);
    ts_free(e->take);
    ts_free(e);
}

static int config_copy(struct otlp_config *dst, const struct otlp_config *src)
{
    *dst = *src;
    dst->endpoint = ts_strdup(src->endpoint);
    dst->ca_file = src->ca_file ? ts_strdup(src->ca_file) : NULL;
    dst->service_name = ts_strdup(src->service_name ? src->service_name : "tokenstorm");
    dst->headers = ts_calloc(OTLP_MAX_HEADERS, sizeof(*dst->headers));
    dst->n_headers = 0;
    dst->n_resource = 0;
    int rc = dst->endpoint && dst->service_name && dst->headers && (!src->ca_file || dst->ca_file)
                 ? 0
                 : -ENOMEM;
    for (size_t i = 0; !rc && i < src->n_headers && i < OTLP_MAX_HEADERS; i++) {
        if (!(dst->headers[i] = ts_strdup(src->headers[i])))
            rc = -ENOMEM;
        else
            dst->n_headers++;
    }
    for (size_t i = 0; !rc && i < src->n_resource; i++) {
        dst->resource[i].key = ts_strdup(src->resource[i].key);
        dst->resource[i].value = ts_strdup(src->resource[i].value);
        dst->n_resource++;
        if (!dst->resource[i].key || !dst->resource[i].value)
            rc = -ENOMEM;
    }
    return rc;
}

int otlp_exporter_new(const struct otlp_config *cfg, struct otlp_exporter **out, char *err,
                      size_t errlen)
{
    *out = NULL;
    if (!cfg->endpoint || !cfg->max_queue || !cfg->max_batch || !cfg->max_attempts) {
        ts_errf(err, errlen, "otlp: no endpoint or an empty queue");
        return -EINVAL;
    }
    struct otlp_exporter *e = ts_calloc(1, sizeof(*e));
    if (!e) {
        ts_errf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    pthread_mutex_init(&e->lock, NULL);
    buf_init(&e->json, OTLP_MAX_BODY);
    int rc = config_copy(&e->cfg, cfg);
    if (e->cfg.max_batch > e->cfg.max_queue)
        e->cfg.max_batch = e->cfg.max_queue;
    e->cap = e->cfg.max_queue;
    e->ring = rc ? NULL : ts_malloc((size_t)e->cap * sizeof(*e->ring));
    e->take = rc ? NULL : ts_malloc((size_t)e->cfg.max_batch * sizeof(*e->take));
    if (rc || !e->ring || !e->take) {
        ts_errf(err, errlen, "out of memory");
        exporter_free(e);
        return -ENOMEM;
    }
    e->hdrs[e->n_hdrs++] = "Content-Type: application/json";
    if (e->cfg.gzip)
        e->hdrs[e->n_hdrs++] = "Content-Encoding: gzip";
    for (size_t i = 0; i < e->cfg.n_headers; i++)
        e->hdrs[e->n_hdrs++] = e->cfg.headers[i];
    redact_url(e->cfg.endpoint, e->host, sizeof(e->host));
    uint64_t seed;
    if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed))
        seed = ts_wall_ns() ^ (uint64_t)(uintptr_t)e;
    rng_seed(&e->rng, seed);

    if ((rc = uv_loop_init(&e->loop))) {
        ts_errf(err, errlen, "otlp: event loop: %s", uv_strerror(rc));
        exporter_free(e);
        return rc;
    }
    struct http_client_config hc;
    http_client_config_default(&hc);
    hc.connect_timeout_ms = e->cfg.timeout_ms < 5000 ? e->cfg.timeout_ms : 5000;
    hc.ca_file = e->cfg.ca_file;
    hc.max_connects = OTLP_MAX_INFLIGHT;
    if ((rc = http_client_init(&e->client, &e->loop, &hc))) {
        ts_errf(err, errlen, "otlp: HTTP client: %s", ts_strerror(rc));
        (void)uv_loop_close(&e->loop);
        exporter_free(e);
        return rc;
    }
    uv_async_init(&e->loop, &e->wake, on_wake);
    uv_timer_init(&e->loop, &e->tick);
    uv_timer_init(&e->loop, &e->retry_timer);
    uv_timer_init(&e->loop, &e->deadline);
    e->wake.data = e->tick.data = e->retry_timer.data = e->deadline.data = e;
    uv_timer_start(&e->tick, on_tick, e->cfg.schedule_delay_ms, e->cfg.schedule_delay_ms);
    if ((rc = pthread_create(&e->thread, NULL, exporter_main, e))) {
        ts_errf(err, errlen, "otlp: cannot start the exporter thread: %s", strerror(rc));
        /* close everything on this thread instead */
        e->closing = e->deadline_hit = true;
        maybe_finish(e);
        uv_run(&e->loop, UV_RUN_DEFAULT);
        (void)uv_loop_close(&e->loop);
        exporter_free(e);
        return -rc;
    }
    ts_debug("otlp: exporting spans to %s%s", e->host, e->cfg.gzip ? " (gzip)" : "");
    *out = e;
    return 0;
}

int otlp_exporter_push(struct otlp_exporter *e, const struct otlp_span *s)
{
    pthread_mutex_lock(&e->lock);
    if (e->refuse || e->count == e->cap) {
        pthread_mutex_unlock(&e->lock);
        atomic_fetch_add(&e->dropped, 1);
        return TS_AGAIN;
    }
    e->ring[(e->head + e->count) % e->cap] = *s;
    e->count++;
    /* wake the exporter once per full batch; under the lock, so never after close */
    if (e->count >= e->cfg.max_batch && !e->wake_sent) {
        e->wake_sent = true;
        uv_async_send(&e->wake);
    }
    pthread_mutex_unlock(&e->lock);
    return 0;
}

void otlp_exporter_stats(struct otlp_exporter *e, struct otlp_stats *out)
{
    out->exported = atomic_load(&e->exported);
    out->dropped = atomic_load(&e->dropped);
    out->failed = atomic_load(&e->failed);
    out->retries = atomic_load(&e->retries);
    out->batches = atomic_load(&e->batches_done);
}

json_t *otlp_stats_json(const struct otlp_stats *st)
{
    return json_pack("{s:I, s:I, s:I, s:I, s:I}", "exported", (json_int_t)st->exported, "dropped",
                     (json_int_t)st->dropped, "failed", (json_int_t)st->failed, "retries",
                     (json_int_t)st->retries, "batches", (json_int_t)st->batches);
}

void otlp_stats_format(const struct otlp_stats *st, char *out, size_t n)
{
    snprintf(out, n,
             "traces (OTLP): %" PRIu64 " spans exported, %" PRIu64 " dropped (queue full), %" PRIu64
             " failed",
             st->exported, st->dropped, st->failed);
}

void otlp_exporter_close(struct otlp_exporter *e, struct otlp_stats *stats)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->lock);
    e->refuse = true;
    atomic_store(&e->close_req, true);
    uv_async_send(&e->wake);
    pthread_mutex_unlock(&e->lock);
    pthread_join(e->thread, NULL);
    if (uv_loop_close(&e->loop))
        ts_warn("otlp: exporter loop closed with open handles");
    struct otlp_stats st;
    otlp_exporter_stats(e, &st);
    if (st.failed || st.dropped)
        ts_warn("otlp: %" PRIu64 " spans exported, %" PRIu64 " dropped (queue full), %" PRIu64
                " failed",
                st.exported, st.dropped, st.failed);
    if (stats)
        *stats = st;
    exporter_free(e);
}
