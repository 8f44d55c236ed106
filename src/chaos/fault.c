/*
 * fault.c - the fault spec parser (JSON), its canonical form, and YAML files.
 */
#include "chaos/fault.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <libfyaml.h>

#include "base/alloc.h"
#include "base/file.h"
#include "base/strdist.h"
#include "base/units.h"
#include "scenario/yamlwalk.h"

struct type_info {
    const char *name;
    enum fault_family family;
    enum fault_direction dir;     /* default */
    enum fault_direction allowed; /* directions accepted */
    const char *params;           /* space-separated parameter fields */
};

#define UP   FAULT_DIR_UPSTREAM
#define DOWN FAULT_DIR_DOWNSTREAM
#define BOTH FAULT_DIR_BOTH

static const struct type_info types[FAULT_TYPE_COUNT] = {
    [FAULT_TCP_LATENCY] = {"tcp_latency", FAULT_TCP, BOTH, BOTH, "delay"},
    [FAULT_TCP_BANDWIDTH] = {"tcp_bandwidth", FAULT_TCP, DOWN, BOTH, "rate"},
    [FAULT_TCP_SLICER] = {"tcp_slicer", FAULT_TCP, DOWN, BOTH, "bytes delay"},
    [FAULT_TCP_SLOW_CLOSE] = {"tcp_slow_close", FAULT_TCP, DOWN, BOTH, "delay"},
    [FAULT_TCP_BLACKHOLE] = {"tcp_blackhole", FAULT_TCP, DOWN, BOTH, "delay"},
    [FAULT_TCP_RESET] = {"tcp_reset", FAULT_TCP, DOWN, BOTH, "delay bytes"},
    [FAULT_TCP_LIMIT] = {"tcp_limit", FAULT_TCP, DOWN, BOTH, "bytes"},
    [FAULT_HTTP_ABORT] = {"http_abort", FAULT_HTTP, UP, BOTH, "status retry_after text"},
    [FAULT_HTTP_DELAY_REQUEST] = {"http_delay_request", FAULT_HTTP, UP, UP, "delay"},
    [FAULT_HTTP_DELAY_HEADERS] = {"http_delay_headers", FAULT_HTTP, DOWN, DOWN, "delay"},
    [FAULT_HTTP_TRUNCATE_REQUEST] = {"http_truncate_request", FAULT_HTTP, UP, UP, "bytes"},
    [FAULT_HTTP_TRUNCATE_RESPONSE] = {"http_truncate_response", FAULT_HTTP, DOWN, DOWN,
                                      "bytes cut"},
    [FAULT_HTTP_HEADER_REWRITE] = {"http_header_rewrite", FAULT_HTTP, DOWN, UP | DOWN,
                                   "set remove"},
    [FAULT_SSE_TTFT_DELAY] = {"sse_ttft_delay", FAULT_SSE, DOWN, DOWN, "delay"},
    [FAULT_SSE_JITTER] = {"sse_jitter", FAULT_SSE, DOWN, DOWN, "delay mode"},
    [FAULT_SSE_THROTTLE] = {"sse_throttle", FAULT_SSE, DOWN, DOWN, "rate"},
    [FAULT_SSE_STALL] = {"sse_stall", FAULT_SSE, DOWN, DOWN, "after_events after_tokens delay"},
    [FAULT_SSE_TRUNCATE] = {"sse_truncate", FAULT_SSE, DOWN, DOWN, "after_events after_tokens cut"},
    [FAULT_SSE_DROP_DONE] = {"sse_drop_done", FAULT_SSE, DOWN, DOWN, ""},
    [FAULT_SSE_DROP_FINISH] = {"sse_drop_finish", FAULT_SSE, DOWN, DOWN, ""},
    [FAULT_SSE_DUPLICATE] = {"sse_duplicate", FAULT_SSE, DOWN, DOWN, "rate after_events"},
    [FAULT_SSE_REORDER] = {"sse_reorder", FAULT_SSE, DOWN, DOWN, "count rate"},
    [FAULT_SSE_MALFORMED] = {"sse_malformed", FAULT_SSE, DOWN, DOWN, "after_events"},
    [FAULT_SSE_INVALID_UTF8] = {"sse_invalid_utf8", FAULT_SSE, DOWN, DOWN, "after_events"},
    [FAULT_SSE_ERROR_EVENT] = {"sse_error_event", FAULT_SSE, DOWN, DOWN,
                               "after_events after_tokens text raw"},
    [FAULT_SSE_SPLIT] = {"sse_split", FAULT_SSE, DOWN, DOWN, "bytes delay"},
    [FAULT_LLM_HALLUCINATE] = {"llm_hallucinate", FAULT_LLM, DOWN, DOWN, "rate"},
    [FAULT_LLM_FORMAT_VIOLATION] = {"llm_format_violation", FAULT_LLM, DOWN, DOWN, "rate"},
    [FAULT_LLM_PREMATURE_LENGTH] = {"llm_premature_length", FAULT_LLM, DOWN, DOWN, "after_tokens"},
    [FAULT_LLM_EMBEDDING_NOISE] = {"llm_embedding_noise", FAULT_LLM, DOWN, DOWN, "norm"},
    [FAULT_LLM_EMBEDDING_MASK] = {"llm_embedding_mask", FAULT_LLM, DOWN, DOWN, "rate"},
    [FAULT_RAG_EMPTY] = {"rag_empty", FAULT_RAG, DOWN, DOWN, "pointer"},
    [FAULT_RAG_SHUFFLE] = {"rag_shuffle", FAULT_RAG, DOWN, DOWN, "pointer"},
    [FAULT_RAG_IRRELEVANT] = {"rag_irrelevant", FAULT_RAG, DOWN, DOWN, "pointer text"},
    [FAULT_RAG_LOWER_SCORES] = {"rag_lower_scores", FAULT_RAG, DOWN, DOWN, "pointer field factor"},
    [FAULT_RAG_LATENCY] = {"rag_latency", FAULT_RAG, DOWN, DOWN, "delay"},
    [FAULT_HTTP_TIMEOUT] = {"http_timeout", FAULT_HTTP, UP, UP, "delay"},
    [FAULT_WS_DELAY] = {"ws_delay", FAULT_WS, DOWN, BOTH, "delay event"},
    [FAULT_WS_DROP] = {"ws_drop", FAULT_WS, DOWN, BOTH, "rate after_events event"},
    [FAULT_WS_DUPLICATE] = {"ws_duplicate", FAULT_WS, DOWN, BOTH, "rate after_events event"},
    [FAULT_WS_TRUNCATE] = {"ws_truncate", FAULT_WS, DOWN, BOTH, "after_events event"},
    [FAULT_WS_CLOSE] = {"ws_close", FAULT_WS, DOWN, BOTH, "after_events code text event"},
    [FAULT_WS_STALL] = {"ws_stall", FAULT_WS, DOWN, BOTH, "after_events delay event"},
};

#undef UP
#undef DOWN
#undef BOTH

static const char *const common_fields[] = {
    "name", "type", "direction", "probability", "match", "start", "duration", NULL,
};
/* Read-only members of fault_to_json, ignored on input so a GET can be PUT back. */
static const char *const output_fields[] = {"injected", "matched", "active", NULL};
static const char *const all_params[] = {
    "delay",  "rate",        "bytes", "after_events", "after_tokens", "count",  "cut",
    "status", "retry_after", "text",  "pointer",      "field",        "factor", "norm",
    "set",    "remove",      "mode",  "raw",          "code",         "event",  NULL,
};
static const char *const match_fields[] = {
    "path", "method", "header", "model", "tenant", "tenant_header", NULL,
};

const char *fault_type_name(enum fault_type t)
{
    return (unsigned)t < FAULT_TYPE_COUNT ? types[t].name : "unknown";
}

const char *fault_dir_name(enum fault_direction d)
{
    switch (d) {
    case FAULT_DIR_UPSTREAM:
        return "upstream";
    case FAULT_DIR_DOWNSTREAM:
        return "downstream";
    case FAULT_DIR_BOTH:
        return "both";
    }
    return "unknown";
}

int fault_type_parse(const char *name, enum fault_type *t)
{
    for (int i = 0; i < FAULT_TYPE_COUNT; i++) {
        if (strcmp(types[i].name, name) == 0) {
            *t = (enum fault_type)i;
            return 0;
        }
    }
    return -EINVAL;
}

enum fault_family fault_type_family(enum fault_type t)
{
    return (unsigned)t < FAULT_TYPE_COUNT ? types[t].family : FAULT_HTTP;
}

enum fault_direction fault_type_default_dir(enum fault_type t)
{
    return (unsigned)t < FAULT_TYPE_COUNT ? types[t].dir : FAULT_DIR_DOWNSTREAM;
}

/* ------------------------------------------------------------- parsing */

struct perr {
    char *err;
    size_t errlen;
    const char *name; /* the fault's name once known */
};

static int perr(const struct perr *pe, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "fault 'NAME': FIELD: message" */
static int perr(const struct perr *pe, const char *field, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char who[FAULT_NAME_MAX + 16];
    if (pe->name && *pe->name)
        snprintf(who, sizeof who, "fault '%s'", pe->name);
    else
        snprintf(who, sizeof who, "fault");
    if (field)
        ts_errf(pe->err, pe->errlen, "%s: %s: %s", who, field, msg);
    else
        ts_errf(pe->err, pe->errlen, "%s: %s", who, msg);
    return -EINVAL;
}

/* A short rendering of a JSON value for "got ..." (strings quoted, cut at 40). */
static const char *json_show(const json_t *v, char *out, size_t n)
{
    switch (json_typeof(v)) {
    case JSON_STRING: {
        const char *s = json_string_value(v);
        size_t len = json_string_length(v);
        snprintf(out, n, "'%.*s%s'", (int)(len > 40 ? 40 : len), s, len > 40 ? "..." : "");
        for (char *p = out; *p; p++)
            if ((unsigned char)*p < 0x20)
                *p = '?';
        return out;
    }
    case JSON_INTEGER:
        snprintf(out, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return out;
    case JSON_REAL:
        snprintf(out, n, "%.17g", json_real_value(v));
        return out;
    case JSON_TRUE:
        return "true";
    case JSON_FALSE:
        return "false";
    case JSON_NULL:
        return "null";
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "a list";
    }
    return "?";
}

static bool in_list(const char *const *list, const char *s)
{
    for (size_t i = 0; list[i]; i++)
        if (strcmp(list[i], s) == 0)
            return true;
    return false;
}

static bool type_has_param(enum fault_type t, const char *key)
{
    const char *p = types[t].params;
    size_t n = strlen(key);
    while (*p) {
        const char *e = strchr(p, ' ');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && memcmp(p, key, n) == 0)
            return true;
        p += len;
        while (*p == ' ')
            p++;
    }
    return false;
}

/* Rejects keys of obj not allowed for type t (did-you-mean over all fields). */
static int check_keys(const json_t *obj, enum fault_type t, const struct perr *pe)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        if (in_list(common_fields, key) || in_list(output_fields, key) || type_has_param(t, key))
            continue;
        if (in_list(all_params, key))
            return perr(pe, key, "does not apply to type %s (its fields: %s)", types[t].name,
                        *types[t].params ? types[t].params : "none");
        const char *cands[64];
        size_t n = 0;
        for (size_t i = 0; common_fields[i]; i++)
            cands[n++] = common_fields[i];
        const char *p = types[t].params;
        char tmp[128];
        snprintf(tmp, sizeof tmp, "%s", p);
        for (char *s = strtok(tmp, " "); s && n < 63; s = strtok(NULL, " "))
            cands[n++] = s;
        cands[n] = NULL;
        const char *dym = str_closest(key, strlen(key), cands, 0, 2);
        if (dym)
            return perr(pe, NULL, "unknown field '%s'; did you mean '%s'?", key, dym);
        return perr(pe, NULL, "unknown field '%s'", key);
    }
    return 0;
}

/* A duration field: a string ("250ms") or a number of seconds >= 0. */
static int get_duration(const json_t *v, const char *field, uint64_t *ns, const struct perr *pe)
{
    char got[96];
    if (json_is_string(v)) {
        if (units_parse_duration_ns(json_string_value(v), ns) == 0)
            return 0;
    } else if (json_is_number(v)) {
        double s = json_number_value(v);
        if (isfinite(s) && s >= 0 && s < 1.8e10) {
            *ns = (uint64_t)llround(s * 1e9);
            return 0;
        }
    }
    return perr(pe, field, "expected a duration such as \"250ms\" or \"1.5s\", got %s",
                json_show(v, got, sizeof got));
}

/* Splits "a,b,c" (or "a-b" when dash) into at most max parts; returns the count. */
static size_t split_args(char *s, char **parts, size_t max, bool dash)
{
    size_t n = 0;
    char *p = s;
    while (n < max) {
        parts[n++] = p;
        char *c = strchr(p, ',');
        if (!c && dash && n == 1)
            c = strchr(p, '-');
        if (!c)
            break;
        *c = '\0';
        p = c + 1;
    }
    return n;
}

/*
 * A duration distribution: "250ms" (fixed) or KIND:ARGS where duration args
 * carry units (see fault.h). Stored in ns.
 */
static int parse_delay_dist(const char *spec, struct dist *d, char *msg, size_t msglen)
{
    char tmp[160];
    uint64_t a[4];
    if (strlen(spec) >= sizeof tmp)
        return ts_errf(msg, msglen, "too long"), -EINVAL;
    snprintf(tmp, sizeof tmp, "%s", spec);
    char *colon = strchr(tmp, ':');
    if (!colon) {
        if (units_parse_duration_ns(tmp, &a[0]) != 0)
            return ts_errf(msg, msglen,
                           "expected a duration (\"250ms\") or a distribution "
                           "(\"normal:50ms,10ms\")"),
                   -EINVAL;
        return dist_init_fixed(d, (double)a[0]);
    }
    *colon = '\0';
    for (char *p = tmp; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    char *kind = tmp;
    while (*kind == ' ')
        kind++;
    char *parts[5];
    size_t n = split_args(colon + 1, parts, 5, strcmp(kind, "uniform") == 0);
    /* which args are unitless: lognormal's sigma, gamma's shape */
    struct {
        const char *kind;
        size_t nargs;
        unsigned unitless; /* bit i: arg i is a plain number */
        const char *example;
    } kinds[] = {
        {"fixed", 1, 0, "fixed:50ms"},
        {"uniform", 2, 0, "uniform:10ms-50ms"},
        {"normal", 2, 0, "normal:50ms,10ms"},
        {"truncnormal", 4, 0, "truncnormal:50ms,10ms,0s,200ms"},
        {"lognormal", 2, 2, "lognormal:40ms,0.5"},
        {"exponential", 1, 0, "exponential:30ms"},
        {"exp", 1, 0, "exp:30ms"},
        {"gamma", 2, 1, "gamma:2,10ms"},
    };
    size_t k;
    for (k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        if (strcmp(kinds[k].kind, kind) == 0)
            break;
    if (k == sizeof kinds / sizeof kinds[0])
        return ts_errf(msg, msglen,
                       "unknown distribution '%s' (fixed, uniform, normal, truncnormal, "
                       "lognormal, exponential, gamma)",
                       kind),
               -EINVAL;
    if (n != kinds[k].nargs)
        return ts_errf(msg, msglen, "%s: expected %zu argument(s) (e.g. %s)", kind, kinds[k].nargs,
                       kinds[k].example),
               -EINVAL;
    double unitless[4] = {0};
    for (size_t i = 0; i < n; i++) {
        if (kinds[k].unitless & (1u << i)) {
            const char *s = parts[i], *end;
            while (*s == ' ')
                s++;
            if (units_scan_number(s, &end, &unitless[i]) != 0 || unitless[i] < 0)
                return ts_errf(msg, msglen, "%s: argument %zu: expected a number (e.g. %s)", kind,
                               i + 1, kinds[k].example),
                       -EINVAL;
            while (*end == ' ')
                end++;
            if (*end)
                return ts_errf(msg, msglen, "%s: argument %zu: expected a number (e.g. %s)", kind,
                               i + 1, kinds[k].example),
                       -EINVAL;
        } else if (units_parse_duration_ns(parts[i], &a[i]) != 0) {
            return ts_errf(msg, msglen,
                           "%s: argument %zu: expected a duration with a unit (e.g. %s)", kind,
                           i + 1, kinds[k].example),
                   -EINVAL;
        }
    }
    int rc;
    switch (k) {
    case 0:
        rc = dist_init_fixed(d, (double)a[0]);
        break;
    case 1:
        rc = dist_init_uniform(d, (double)a[0], (double)a[1]);
        break;
    case 2:
        rc = dist_init_normal(d, (double)a[0], (double)a[1]);
        break;
    case 3:
        rc = dist_init_truncnormal(d, (double)a[0], (double)a[1], (double)a[2], (double)a[3]);
        break;
    case 4:
        rc = dist_init_lognormal(d, (double)a[0], unitless[1]);
        break;
    case 5:
    case 6:
        rc = dist_init_exponential(d, (double)a[0]);
        break;
    default:
        rc = dist_init_gamma(d, unitless[0], (double)a[1]);
        break;
    }
    if (rc)
        ts_errf(msg, msglen, "%s: invalid parameters (e.g. %s)", kind, kinds[k].example);
    return rc;
}

static int get_delay(const json_t *v, const char *field, struct dist *d, const struct perr *pe)
{
    char got[96], msg[200];
    if (json_is_number(v)) {
        uint64_t ns;
        int rc = get_duration(v, field, &ns, pe);
        return rc ? rc : dist_init_fixed(d, (double)ns);
    }
    if (!json_is_string(v))
        return perr(pe, field,
                    "expected a duration (\"250ms\") or a distribution (\"normal:50ms,10ms\"), "
                    "got %s",
                    json_show(v, got, sizeof got));
    if (parse_delay_dist(json_string_value(v), d, msg, sizeof msg) != 0)
        return perr(pe, field, "%s, got %s", msg, json_show(v, got, sizeof got));
    return 0;
}

/* A count: a non-negative integer or a distribution of counts (not empirical). */
static int get_count(const json_t *v, const char *field, struct dist *d, const struct perr *pe)
{
    char got[96], msg[200];
    if (json_is_integer(v) && json_integer_value(v) >= 0)
        return dist_init_fixed(d, (double)json_integer_value(v));
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        while (*s == ' ')
            s++;
        if (strncasecmp(s, "empirical", 9) == 0)
            return perr(pe, field, "empirical distributions are not accepted here");
        if (dist_parse(d, s, msg, sizeof msg) == 0) {
            if (d->kind == DIST_FIXED &&
                (d->fixed.value < 0 || d->fixed.value != floor(d->fixed.value)))
                return perr(pe, field, "expected a count >= 0, got %s",
                            json_show(v, got, sizeof got));
            if (d->kind == DIST_UNIFORM && d->uniform.lo < 0)
                return perr(pe, field, "expected counts >= 0, got %s",
                            json_show(v, got, sizeof got));
            return 0;
        }
        return perr(pe, field, "%s", msg);
    }
    return perr(pe, field,
                "expected a count (7) or a distribution of counts (\"uniform:5-10\"), got %s",
                json_show(v, got, sizeof got));
}

static int get_size(const json_t *v, const char *field, uint64_t *out, const struct perr *pe)
{
    char got[96];
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_string(v) && units_parse_size(json_string_value(v), out) == 0)
        return 0;
    return perr(pe, field, "expected a size in bytes (1024, \"64K\"), got %s",
                json_show(v, got, sizeof got));
}

static int get_share(const json_t *v, const char *field, double *out, const struct perr *pe)
{
    char got[96];
    if (json_is_number(v)) {
        double x = json_number_value(v);
        if (x >= 0 && x <= 1) {
            *out = x;
            return 0;
        }
    }
    return perr(pe, field, "expected a number in [0, 1], got %s", json_show(v, got, sizeof got));
}

static int get_string(const json_t *v, const char *field, char *out, size_t outlen,
                      const struct perr *pe)
{
    char got[96];
    if (!json_is_string(v))
        return perr(pe, field, "expected a string, got %s", json_show(v, got, sizeof got));
    size_t len = json_string_length(v);
    if (len >= outlen)
        return perr(pe, field, "longer than %zu bytes", outlen - 1);
    if (memchr(json_string_value(v), '\0', len))
        return perr(pe, field, "contains a NUL byte");
    memcpy(out, json_string_value(v), len + 1);
    return 0;
}

static bool is_token_char(unsigned char c)
{
    return isalnum(c) || strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static int get_header_name(const char *s, const char *field, char *out, const struct perr *pe)
{
    size_t len = strlen(s);
    if (len == 0 || len >= FAULT_HDR_NAME_MAX)
        return perr(pe, field, "expected a header name of 1..%d characters, got '%s'",
                    FAULT_HDR_NAME_MAX - 1, len ? "(too long)" : "");
    for (size_t i = 0; i < len; i++)
        if (!is_token_char((unsigned char)s[i]))
            return perr(pe, field, "'%s' is not a valid header name", s);
    memcpy(out, s, len + 1);
    return 0;
}

static int get_header_value(const json_t *v, const char *field, char *out, const struct perr *pe)
{
    int rc = get_string(v, field, out, FAULT_HDR_VALUE_MAX, pe);
    if (rc)
        return rc;
    if (strpbrk(out, "\r\n"))
        return perr(pe, field, "a header value may not contain CR or LF");
    return 0;
}

static int parse_match(const json_t *m, struct fault_match *out, const struct perr *pe)
{
    char got[96];
    if (!json_is_object(m))
        return perr(pe, "match",
                    "expected an object of selectors (path, method, header, "
                    "model, tenant), got %s",
                    json_show(m, got, sizeof got));
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)m, key, v)
    {
        int rc = 0;
        char field[96];
        snprintf(field, sizeof field, "match.%s", key);
        if (strcmp(key, "path") == 0) {
            rc = get_string(v, field, out->path, sizeof out->path, pe);
            if (!rc && out->path[0] != '/' && out->path[0] != '*')
                rc = perr(pe, field, "expected a path starting with '/', got '%s'", out->path);
            out->path_glob = strpbrk(out->path, "*?[") != NULL;
        } else if (strcmp(key, "method") == 0) {
            rc = get_string(v, field, out->method, sizeof out->method, pe);
            for (char *p = out->method; !rc && *p; p++) {
                if (!isalpha((unsigned char)*p))
                    rc = perr(pe, field, "expected a method such as POST, got '%s'", out->method);
                *p = (char)toupper((unsigned char)*p);
            }
        } else if (strcmp(key, "header") == 0) {
            if (!json_is_object(v) || json_object_size(v) != 1)
                return perr(pe, field, "expected one {\"name\": \"value\"} pair, got %s",
                            json_show(v, got, sizeof got));
            const char *hn;
            json_t *hv;
            json_object_foreach(v, hn, hv)
            {
                rc = get_header_name(hn, field, out->header_name, pe);
                if (!rc)
                    rc = get_header_value(hv, field, out->header_value, pe);
            }
            if (!rc && strcmp(out->header_value, "*") == 0)
                out->header_value[0] = '\0';
        } else if (strcmp(key, "model") == 0) {
            rc = get_string(v, field, out->model, sizeof out->model, pe);
        } else if (strcmp(key, "tenant") == 0) {
            rc = get_string(v, field, out->tenant, sizeof out->tenant, pe);
        } else if (strcmp(key, "tenant_header") == 0) {
            if (!json_is_string(v))
                return perr(pe, field, "expected a header name, got %s",
                            json_show(v, got, sizeof got));
            rc = get_header_name(json_string_value(v), field, out->tenant_header, pe);
        } else {
            const char *dym = str_closest(key, strlen(key), match_fields, 0, 2);
            if (dym)
                return perr(pe, "match", "unknown selector '%s'; did you mean '%s'?", key, dym);
            return perr(pe, "match",
                        "unknown selector '%s' (path, method, header, model, tenant, "
                        "tenant_header)",
                        key);
        }
        if (rc)
            return rc;
    }
    return 0;
}

static int parse_headers_set(const json_t *v, struct fault_params *p, const struct perr *pe)
{
    char got[96];
    if (!json_is_object(v))
        return perr(pe, "set", "expected an object of header names to values, got %s",
                    json_show(v, got, sizeof got));
    const char *hn;
    json_t *hv;
    json_object_foreach((json_t *)v, hn, hv)
    {
        if (p->n_headers >= FAULT_MAX_HEADERS)
            return perr(pe, "set", "at most %d headers (set and remove together)",
                        FAULT_MAX_HEADERS);
        struct fault_header_op *op = &p->headers[p->n_headers];
        int rc = get_header_name(hn, "set", op->name, pe);
        if (!rc)
            rc = get_header_value(hv, "set", op->value, pe);
        if (rc)
            return rc;
        op->remove = false;
        p->n_headers++;
    }
    return 0;
}

static int parse_headers_remove(const json_t *v, struct fault_params *p, const struct perr *pe)
{
    char got[96];
    if (!json_is_array(v))
        return perr(pe, "remove", "expected a list of header names, got %s",
                    json_show(v, got, sizeof got));
    size_t i;
    json_t *hv;
    json_array_foreach((json_t *)v, i, hv)
    {
        if (p->n_headers >= FAULT_MAX_HEADERS)
            return perr(pe, "remove", "at most %d headers (set and remove together)",
                        FAULT_MAX_HEADERS);
        if (!json_is_string(hv))
            return perr(pe, "remove", "expected a header name, got %s",
                        json_show(hv, got, sizeof got));
        struct fault_header_op *op = &p->headers[p->n_headers];
        int rc = get_header_name(json_string_value(hv), "remove", op->name, pe);
        if (rc)
            return rc;
        op->remove = true;
        p->n_headers++;
    }
    return 0;
}

static int parse_rate(const json_t *v, enum fault_type t, struct fault_params *p,
                      const struct perr *pe)
{
    char got[96];
    p->has_rate = true;
    if (t == FAULT_TCP_BANDWIDTH) {
        uint64_t b;
        if (json_is_number(v) && json_number_value(v) > 0) {
            p->rate = json_number_value(v);
            return 0;
        }
        if (json_is_string(v)) {
            char tmp[64];
            snprintf(tmp, sizeof tmp, "%s", json_string_value(v));
            char *slash = strstr(tmp, "/s");
            if (slash && slash[2] == '\0')
                *slash = '\0';
            if (units_parse_size(tmp, &b) == 0 && b > 0) {
                p->rate = (double)b;
                return 0;
            }
        }
        return perr(pe, "rate", "expected bytes per second > 0 (\"64K\", 65536), got %s",
                    json_show(v, got, sizeof got));
    }
    if (t == FAULT_SSE_THROTTLE) {
        double r;
        if (json_is_number(v))
            r = json_number_value(v);
        else if (!json_is_string(v) || units_parse_rate(json_string_value(v), &r) != 0)
            r = -1;
        if (r > 0 && isfinite(r)) {
            p->rate = r;
            return 0;
        }
        return perr(pe, "rate", "expected tokens per second > 0 (20, \"20/s\"), got %s",
                    json_show(v, got, sizeof got));
    }
    return get_share(v, "rate", &p->rate, pe);
}

static int parse_cut(const json_t *v, enum fault_cut *cut, const struct perr *pe)
{
    static const char *const names[] = {"end", "close", "reset", "hang", NULL};
    char got[96];
    if (json_is_string(v))
        for (int i = 0; names[i]; i++)
            if (strcmp(json_string_value(v), names[i]) == 0) {
                *cut = (enum fault_cut)i;
                return 0;
            }
    return perr(pe, "cut", "expected one of end, close, reset, hang, got %s",
                json_show(v, got, sizeof got));
}

/* The defaults every type starts from (a split piece of 1 byte; a reorder
   of 2 events). */
static int params_defaults(enum fault_type t, struct fault_params *p)
{
    p->status = 503;
    p->code = 1011;
    p->factor = 0.5;
    p->rate = 1;
    snprintf(p->field, sizeof p->field, "score");
    if (t == FAULT_SSE_SPLIT)
        p->bytes = 1;
    if (t == FAULT_SSE_REORDER) {
        p->unit = FAULT_UNIT_EVENTS;
        return dist_init_fixed(&p->count, 2);
    }
    return 0;
}

/* delay, bytes and rate: how long, how much and how fast (TCP, HTTP, SSE). */
static int params_pace(const json_t *spec, enum fault_type t, struct fault_params *p,
                       const struct perr *pe)
{
    json_t *v;
    int rc;
    if ((v = json_object_get(spec, "delay"))) {
        rc = get_delay(v, "delay", &p->delay, pe);
        p->has_delay = true;
        if (rc)
            return rc;
    }
    if ((v = json_object_get(spec, "bytes"))) {
        rc = get_size(v, "bytes", &p->bytes, pe);
        p->has_bytes = true;
        if (!rc && t == FAULT_SSE_SPLIT && p->bytes == 0)
            rc = perr(pe, "bytes", "expected a piece size >= 1");
        if (rc)
            return rc;
    }
    if ((v = json_object_get(spec, "rate")))
        return parse_rate(v, t, p, pe);
    return 0;
}

/* after_events / after_tokens / count and cut: where in a stream and how it
   ends (SSE and LLM faults). */
static int params_stream(const json_t *spec, struct fault_params *p, const struct perr *pe)
{
    json_t *ae = json_object_get(spec, "after_events");
    json_t *at = json_object_get(spec, "after_tokens");
    json_t *cn = json_object_get(spec, "count");
    json_t *v;
    int rc;
    if (ae && at)
        return perr(pe, "after_events", "give after_events or after_tokens, not both");
    if (ae) {
        rc = get_count(ae, "after_events", &p->count, pe);
        p->unit = FAULT_UNIT_EVENTS;
        if (rc)
            return rc;
    }
    if (at) {
        rc = get_count(at, "after_tokens", &p->count, pe);
        p->unit = FAULT_UNIT_TOKENS;
        if (rc)
            return rc;
    }
    if (cn) {
        rc = get_count(cn, "count", &p->count, pe);
        p->unit = FAULT_UNIT_EVENTS;
        if (rc)
            return rc;
    }
    if ((v = json_object_get(spec, "cut")))
        return parse_cut(v, &p->cut, pe);
    return 0;
}

/* mode (sse_jitter) and raw (sse_error_event): how a stream fault acts. */
static int params_how(const json_t *spec, struct fault_params *p, const struct perr *pe)
{
    char got[96];
    json_t *v;
    if ((v = json_object_get(spec, "mode"))) {
        const char *m = json_is_string(v) ? json_string_value(v) : "";
        if (strcmp(m, "add") == 0)
            p->jitter_mode = FAULT_JITTER_ADD;
        else if (strcmp(m, "floor") == 0)
            p->jitter_mode = FAULT_JITTER_FLOOR;
        else
            return perr(pe, "mode", "expected add or floor, got %s", json_show(v, got, sizeof got));
    }
    if ((v = json_object_get(spec, "raw"))) {
        if (!json_is_boolean(v))
            return perr(pe, "raw", "expected true or false, got %s", json_show(v, got, sizeof got));
        p->raw = json_is_true(v);
    }
    if ((v = json_object_get(spec, "code"))) {
        json_int_t c = json_is_integer(v) ? json_integer_value(v) : 0;
        /* 1005, 1006 and 1015 are never sent in a close frame (RFC 6455 7.4.1) */
        if (c < 1000 || c > 4999 || c == 1005 || c == 1006 || c == 1015 || (c >= 1016 && c < 3000))
            return perr(pe, "code",
                        "expected a WebSocket close code (1000..1014 or 3000..4999, "
                        "not 1005 or 1006), got %s",
                        json_show(v, got, sizeof got));
        p->code = (uint16_t)c;
    }
    if ((v = json_object_get(spec, "event"))) {
        const char *e = json_is_string(v) ? json_string_value(v) : "";
        size_t n = strlen(e), ok = n > 0 && n < sizeof p->event;
        for (size_t i = 0; ok && i < n; i++)
            ok = islower((unsigned char)e[i]) || isdigit((unsigned char)e[i]) || e[i] == '.' ||
                 e[i] == '_' || (e[i] == '*' && n == 1);
        if (!ok)
            return perr(pe, "event",
                        "expected a Realtime event type (response.output_text.delta) or \"*\", "
                        "got %s",
                        json_show(v, got, sizeof got));
        memcpy(p->event, e, n + 1);
    }
    return 0;
}

/* status and retry_after of an HTTP error answer (a 429 abort says "retry
   after 1 s" unless told otherwise). */
static int params_status(const json_t *spec, enum fault_type t, struct fault_params *p,
                         const struct perr *pe)
{
    char got[96];
    json_t *v;
    if ((v = json_object_get(spec, "status"))) {
        if (!json_is_integer(v) || json_integer_value(v) < 400 || json_integer_value(v) > 599)
            return perr(pe, "status", "expected an HTTP error status 400..599, got %s",
                        json_show(v, got, sizeof got));
        p->status = (int)json_integer_value(v);
    }
    if ((v = json_object_get(spec, "retry_after")))
        return get_duration(v, "retry_after", &p->retry_after_ns, pe);
    if (t == FAULT_HTTP_ABORT && p->status == 429)
        p->retry_after_ns = 1000000000ull;
    return 0;
}

/* text, pointer, field, factor and norm: what an LLM or RAG fault writes
   and where in a JSON answer. */
static int params_content(const json_t *spec, struct fault_params *p, const struct perr *pe)
{
    char got[96];
    json_t *v;
    int rc;
    if ((v = json_object_get(spec, "text")) &&
        (rc = get_string(v, "text", p->text, sizeof p->text, pe)))
        return rc;
    if ((v = json_object_get(spec, "pointer"))) {
        if ((rc = get_string(v, "pointer", p->pointer, sizeof p->pointer, pe)))
            return rc;
        if (p->pointer[0] && p->pointer[0] != '/')
            return perr(pe, "pointer",
                        "expected a JSON pointer (\"\" or starting with '/'), got '%s'",
                        p->pointer);
    }
    if ((v = json_object_get(spec, "field"))) {
        if ((rc = get_string(v, "field", p->field, sizeof p->field, pe)))
            return rc;
        if (!p->field[0])
            return perr(pe, "field", "expected a member name, got ''");
    }
    if ((v = json_object_get(spec, "factor")) && (rc = get_share(v, "factor", &p->factor, pe)))
        return rc;
    if ((v = json_object_get(spec, "norm"))) {
        if (!json_is_number(v) || !(json_number_value(v) >= 0) || json_number_value(v) > 1e6)
            return perr(pe, "norm", "expected a relative L2 norm >= 0 (0.1), got %s",
                        json_show(v, got, sizeof got));
        p->norm = json_number_value(v);
    }
    return 0;
}

/* The parameters each type cannot do without. */
static int params_required(const json_t *spec, enum fault_type t, const struct fault_params *p,
                           const struct perr *pe)
{
    switch (t) {
    case FAULT_TCP_LATENCY:
    case FAULT_HTTP_DELAY_REQUEST:
    case FAULT_HTTP_TIMEOUT:
    case FAULT_HTTP_DELAY_HEADERS:
    case FAULT_SSE_TTFT_DELAY:
    case FAULT_SSE_JITTER:
    case FAULT_SSE_STALL:
    case FAULT_RAG_LATENCY:
    case FAULT_WS_DELAY:
    case FAULT_WS_STALL:
        if (!p->has_delay)
            return perr(pe, "delay", "required for %s (e.g. \"200ms\")", types[t].name);
        break;
    case FAULT_TCP_BANDWIDTH:
    case FAULT_SSE_THROTTLE:
        if (!p->has_rate)
            return perr(pe, "rate", "required for %s", types[t].name);
        break;
    case FAULT_TCP_LIMIT:
    case FAULT_HTTP_TRUNCATE_REQUEST:
    case FAULT_HTTP_TRUNCATE_RESPONSE:
        if (!p->has_bytes)
            return perr(pe, "bytes", "required for %s (e.g. 100)", types[t].name);
        break;
    case FAULT_TCP_RESET:
        if (!p->has_bytes && !p->has_delay)
            return perr(pe, "delay", "tcp_reset needs delay, bytes or both");
        break;
    case FAULT_WS_TRUNCATE:
        if (p->unit == FAULT_UNIT_NONE)
            return perr(pe, "after_events", "required for ws_truncate (deltas passed before)");
        break;
    case FAULT_SSE_TRUNCATE:
    case FAULT_LLM_PREMATURE_LENGTH:
        if (p->unit == FAULT_UNIT_NONE)
            return perr(pe, t == FAULT_SSE_TRUNCATE ? "after_tokens" : "after_tokens",
                        "required for %s (after_tokens or after_events)", types[t].name);
        break;
    case FAULT_LLM_EMBEDDING_NOISE:
        if (!json_object_get(spec, "norm"))
            return perr(pe, "norm", "required for llm_embedding_noise (e.g. 0.1)");
        break;
    case FAULT_HTTP_HEADER_REWRITE:
        if (p->n_headers == 0)
            return perr(pe, "set", "http_header_rewrite needs set and/or remove");
        break;
    case FAULT_LLM_HALLUCINATE:
    case FAULT_LLM_EMBEDDING_MASK:
        if (!p->has_rate)
            return perr(pe, "rate", "required for %s (a share in [0, 1])", types[t].name);
        break;
    default:
        break;
    }
    return 0;
}

/* The type's parameters from spec into p (defaults first), group by group;
   the first bad one is reported. */
static int parse_params(const json_t *spec, enum fault_type t, struct fault_params *p,
                        const struct perr *pe)
{
    json_t *v;
    int rc;
    if ((rc = params_defaults(t, p)) || (rc = params_pace(spec, t, p, pe)) ||
        (rc = params_stream(spec, p, pe)) || (rc = params_status(spec, t, p, pe)) ||
        (rc = params_content(spec, p, pe)) || (rc = params_how(spec, p, pe)))
        return rc;
    if ((v = json_object_get(spec, "set")) && (rc = parse_headers_set(v, p, pe)))
        return rc;
    if ((v = json_object_get(spec, "remove")) && (rc = parse_headers_remove(v, p, pe)))
        return rc;
    return params_required(spec, t, p, pe);
}

static bool valid_name(const char *s, size_t len)
{
    if (len == 0 || len >= FAULT_NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("_.-", s[i]))
            return false;
    return true;
}

int fault_parse_json(const json_t *spec, struct fault *out, char *err, size_t errlen)
{
    struct perr pe = {err, errlen, NULL};
    char got[96];
    json_t *v;
    if (err && errlen)
        err[0] = '\0';
    memset(out, 0, sizeof *out);
    snprintf(out->match.tenant_header, sizeof out->match.tenant_header, "x-tenant-id");
    out->probability = 1;
    if (!json_is_object(spec))
        return perr(&pe, NULL, "expected an object (name, type, ...), got %s",
                    json_show(spec, got, sizeof got));

    v = json_object_get(spec, "name");
    if (!v)
        return perr(&pe, "name", "required");
    if (!json_is_string(v) || !valid_name(json_string_value(v), json_string_length(v)))
        return perr(&pe, "name", "expected 1..%d characters of A-Z a-z 0-9 _ . -, got %s",
                    FAULT_NAME_MAX - 1, json_show(v, got, sizeof got));
    memcpy(out->name, json_string_value(v), json_string_length(v) + 1);
    pe.name = out->name;

    v = json_object_get(spec, "type");
    if (!v)
        return perr(&pe, "type", "required (e.g. http_abort, sse_truncate)");
    if (!json_is_string(v))
        return perr(&pe, "type", "expected a type name, got %s", json_show(v, got, sizeof got));
    if (fault_type_parse(json_string_value(v), &out->type) != 0) {
        const char *cands[FAULT_TYPE_COUNT];
        for (int i = 0; i < FAULT_TYPE_COUNT; i++)
            cands[i] = types[i].name;
        const char *dym =
            str_closest(json_string_value(v), json_string_length(v), cands, FAULT_TYPE_COUNT, 3);
        if (dym)
            return perr(&pe, "type", "unknown type '%s'; did you mean '%s'?", json_string_value(v),
                        dym);
        return perr(&pe, "type", "unknown type '%s' (see docs/CHAOS.md for the list)",
                    json_string_value(v));
    }
    enum fault_type t = out->type;
    int rc = check_keys(spec, t, &pe);
    if (rc)
        return rc;

    out->dir = types[t].dir;
    if ((v = json_object_get(spec, "direction"))) {
        const char *d = json_is_string(v) ? json_string_value(v) : "";
        if (strcmp(d, "upstream") == 0)
            out->dir = FAULT_DIR_UPSTREAM;
        else if (strcmp(d, "downstream") == 0)
            out->dir = FAULT_DIR_DOWNSTREAM;
        else if (strcmp(d, "both") == 0)
            out->dir = FAULT_DIR_BOTH;
        else
            return perr(&pe, "direction", "expected upstream, downstream or both, got %s",
                        json_show(v, got, sizeof got));
        if ((out->dir & ~types[t].allowed) != 0)
            return perr(&pe, "direction", "%s applies %s only", types[t].name,
                        types[t].allowed == FAULT_DIR_BOTH ? "upstream, downstream or both"
                                                           : fault_dir_name(types[t].allowed));
    }
    if ((v = json_object_get(spec, "probability"))) {
        if (!json_is_number(v) || !(json_number_value(v) >= 0 && json_number_value(v) <= 1))
            return perr(&pe, "probability", "expected a number in [0, 1], got %s",
                        json_show(v, got, sizeof got));
        out->probability = json_number_value(v);
    }
    if ((v = json_object_get(spec, "match")) && (rc = parse_match(v, &out->match, &pe)) != 0)
        return rc;
    if ((v = json_object_get(spec, "start")) &&
        (rc = get_duration(v, "start", &out->start_ns, &pe)))
        return rc;
    if ((v = json_object_get(spec, "duration")) &&
        (rc = get_duration(v, "duration", &out->duration_ns, &pe)))
        return rc;
    return parse_params(spec, t, &out->params, &pe);
}

/* ------------------------------------------------------------- output */

/* A duration in the largest unit that keeps it exact. */
static const char *dur_str(double ns_d, char *out, size_t n)
{
    uint64_t ns = ns_d <= 0 ? 0 : (uint64_t)llround(ns_d);
    if (ns == 0)
        snprintf(out, n, "0s");
    else if (ns % 1000000000ull == 0)
        snprintf(out, n, "%" PRIu64 "s", (uint64_t)(ns / 1000000000ull));
    else if (ns % 1000000ull == 0)
        snprintf(out, n, "%" PRIu64 "ms", (uint64_t)(ns / 1000000ull));
    else if (ns % 1000ull == 0)
        snprintf(out, n, "%" PRIu64 "us", (uint64_t)(ns / 1000ull));
    else
        snprintf(out, n, "%" PRIu64 "ns", ns);
    return out;
}

static const char *delay_str(const struct dist *d, char *out, size_t n)
{
    char a[32], b[32], c[32], e[32];
    switch (d->kind) {
    case DIST_UNIFORM:
        snprintf(out, n, "uniform:%s-%s", dur_str(d->uniform.lo, a, sizeof a),
                 dur_str(d->uniform.hi, b, sizeof b));
        break;
    case DIST_NORMAL:
        snprintf(out, n, "normal:%s,%s", dur_str(d->normal.mean, a, sizeof a),
                 dur_str(d->normal.sd, b, sizeof b));
        break;
    case DIST_TRUNCNORMAL:
        snprintf(out, n, "truncnormal:%s,%s,%s,%s", dur_str(d->truncnormal.mean, a, sizeof a),
                 dur_str(d->truncnormal.sd, b, sizeof b), dur_str(d->truncnormal.lo, c, sizeof c),
                 dur_str(d->truncnormal.hi, e, sizeof e));
        break;
    case DIST_LOGNORMAL:
        snprintf(out, n, "lognormal:%s,%.17g", dur_str(d->lognormal.mean, a, sizeof a),
                 d->lognormal.sigma);
        break;
    case DIST_EXPONENTIAL:
        snprintf(out, n, "exponential:%s", dur_str(d->exponential.mean, a, sizeof a));
        break;
    case DIST_GAMMA:
        snprintf(out, n, "gamma:%.17g,%s", d->gamma.shape, dur_str(d->gamma.scale, a, sizeof a));
        break;
    default:
        dur_str(d->fixed.value, out, n);
        break;
    }
    return out;
}

static json_t *count_json(const struct dist *d)
{
    if (d->kind == DIST_FIXED)
        return json_integer((json_int_t)d->fixed.value);
    char tmp[128];
    return json_string(dist_format(d, tmp, sizeof tmp));
}

/* json_object_set_new that remembers a failure. */
static void put(json_t *o, const char *k, json_t *v, bool *ok)
{
    if (!v || json_object_set_new(o, k, v) != 0)
        *ok = false;
}

json_t *fault_to_json(const struct fault *f, uint64_t now_ns)
{
    static const char *const cuts[] = {"end", "close", "reset", "hang"};
    json_t *o = json_object();
    bool ok = o != NULL;
    char tmp[160];
    if (!o)
        return NULL;
    const struct fault_params *p = &f->params;
    enum fault_type t = f->type;
    put(o, "name", json_string(f->name), &ok);
    put(o, "type", json_string(fault_type_name(t)), &ok);
    put(o, "direction", json_string(fault_dir_name(f->dir)), &ok);
    put(o, "probability", json_real(f->probability), &ok);
    const struct fault_match *m = &f->match;
    json_t *mj = json_object();
    ok = ok && mj;
    if (mj) {
        if (m->path[0])
            put(mj, "path", json_string(m->path), &ok);
        if (m->method[0])
            put(mj, "method", json_string(m->method), &ok);
        if (m->header_name[0])
            put(mj, "header", json_pack("{s:s}", m->header_name, m->header_value), &ok);
        if (m->model[0])
            put(mj, "model", json_string(m->model), &ok);
        if (m->tenant[0])
            put(mj, "tenant", json_string(m->tenant), &ok);
        if (strcmp(m->tenant_header, "x-tenant-id") != 0)
            put(mj, "tenant_header", json_string(m->tenant_header), &ok);
        put(o, "match", mj, &ok);
    }
    if (f->start_ns)
        put(o, "start", json_string(dur_str((double)f->start_ns, tmp, sizeof tmp)), &ok);
    if (f->duration_ns)
        put(o, "duration", json_string(dur_str((double)f->duration_ns, tmp, sizeof tmp)), &ok);
    if (type_has_param(t, "delay") && p->has_delay)
        put(o, "delay", json_string(delay_str(&p->delay, tmp, sizeof tmp)), &ok);
    if (type_has_param(t, "bytes") && (p->has_bytes || t == FAULT_SSE_SPLIT))
        put(o, "bytes", json_integer((json_int_t)p->bytes), &ok);
    if (type_has_param(t, "rate") &&
        (p->has_rate || t == FAULT_LLM_FORMAT_VIOLATION || t == FAULT_SSE_DUPLICATE ||
         t == FAULT_SSE_REORDER || t == FAULT_WS_DROP || t == FAULT_WS_DUPLICATE))
        put(o, "rate", json_real(p->rate), &ok);
    if (p->unit != FAULT_UNIT_NONE) {
        const char *k = p->unit == FAULT_UNIT_TOKENS ? "after_tokens" : "after_events";
        if (t == FAULT_SSE_REORDER)
            k = "count";
        put(o, k, count_json(&p->count), &ok);
    }
    if (type_has_param(t, "cut"))
        put(o, "cut", json_string(cuts[p->cut]), &ok);
    if (type_has_param(t, "status"))
        put(o, "status", json_integer(p->status), &ok);
    if (type_has_param(t, "retry_after") && p->retry_after_ns)
        put(o, "retry_after", json_string(dur_str((double)p->retry_after_ns, tmp, sizeof tmp)),
            &ok);
    if (type_has_param(t, "text") && p->text[0])
        put(o, "text", json_string(p->text), &ok);
    if (type_has_param(t, "mode"))
        put(o, "mode", json_string(p->jitter_mode == FAULT_JITTER_FLOOR ? "floor" : "add"), &ok);
    if (type_has_param(t, "raw"))
        put(o, "raw", json_boolean(p->raw), &ok);
    if (type_has_param(t, "code"))
        put(o, "code", json_integer(p->code), &ok);
    if (type_has_param(t, "event") && p->event[0])
        put(o, "event", json_string(p->event), &ok);
    if (type_has_param(t, "pointer"))
        put(o, "pointer", json_string(p->pointer), &ok);
    if (type_has_param(t, "field"))
        put(o, "field", json_string(p->field), &ok);
    if (type_has_param(t, "factor"))
        put(o, "factor", json_real(p->factor), &ok);
    if (type_has_param(t, "norm"))
        put(o, "norm", json_real(p->norm), &ok);
    if (t == FAULT_HTTP_HEADER_REWRITE) {
        json_t *set = json_object(), *rem = json_array();
        ok = ok && set && rem;
        for (size_t i = 0; ok && i < p->n_headers; i++) {
            if (p->headers[i].remove)
                ok = json_array_append_new(rem, json_string(p->headers[i].name)) == 0;
            else
                put(set, p->headers[i].name, json_string(p->headers[i].value), &ok);
        }
        if (set && json_object_size(set))
            put(o, "set", json_incref(set), &ok);
        if (rem && json_array_size(rem))
            put(o, "remove", json_incref(rem), &ok);
        json_decref(set);
        json_decref(rem);
    }
    put(o, "injected",
        json_integer((json_int_t)atomic_load_explicit(&f->injected, memory_order_relaxed)), &ok);
    put(o, "matched",
        json_integer((json_int_t)atomic_load_explicit(&f->matched, memory_order_relaxed)), &ok);
    put(o, "active", json_boolean(fault_active(f, now_ns)), &ok);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ------------------------------------------------------------- heap faults */

struct fault *fault_new(const struct fault *src)
{
    struct fault *f = ts_malloc(sizeof *f);
    if (!f)
        return NULL;
    memcpy(f, src, sizeof *f);
    atomic_store(&f->injected, 0);
    atomic_store(&f->matched, 0);
    atomic_store(&f->refs, 1);
    return f;
}

struct fault *fault_ref(struct fault *f)
{
    if (f)
        atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
    return f;
}

void fault_unref(struct fault *f)
{
    if (f && atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) <= 1)
        ts_free(f);
}

bool fault_active(const struct fault *f, uint64_t now_ns)
{
    uint64_t from = f->added_ns + f->start_ns;
    if (now_ns < from)
        return false;
    return f->duration_ns == 0 || now_ns - from < f->duration_ns;
}

/* ------------------------------------------------------------- YAML */

int fault_yaml_parse(const char *text, size_t len, const char *name, json_t **out, char *err,
                     size_t errlen)
{
    struct yamlwalk w = {0};
    struct fy_node *root = NULL;
    json_t *root_j = NULL;
    *out = NULL;
    if (err && errlen)
        err[0] = '\0';
    name = name ? name : "<faults>";
    int rc = yw_open(&w, name, text, len, FAULT_SPEC_MAX, err, errlen, &root);
    if (rc == TS_PARSE)
        rc = -EINVAL;
    if (!rc && !root) {
        ts_errf(err, errlen, "%s: empty; expected faults: [ ... ]", name);
        rc = -EINVAL;
    }
    if (!rc)
        rc = yw_json(&w, root, &root_j);
    json_t *list = root_j;
    if (!rc && json_is_object(root_j)) {
        const char *key;
        json_t *v;
        json_object_foreach(root_j, key, v)
        {
            if (strcmp(key, "faults") != 0) {
                ts_errf(err, errlen, "%s: unknown key '%s'; expected faults: [ ... ]", name, key);
                rc = -EINVAL;
                break;
            }
        }
        list = json_object_get(root_j, "faults");
    }
    if (!rc && !json_is_array(list)) {
        ts_errf(err, errlen, "%s: expected faults: [ spec, ... ] (a list of fault specs)", name);
        rc = -EINVAL;
    }
    if (!rc)
        *out = json_incref(list);
    json_decref(root_j);
    yw_close(&w);
    return rc;
}

int fault_file_load(const char *path, json_t **out, char *err, size_t errlen)
{
    char *data = NULL;
    size_t len = 0;
    *out = NULL;
    int rc = file_read_all(path, FAULT_SPEC_MAX, &data, &len, err, errlen);
    if (rc)
        return rc;
    rc = fault_yaml_parse(data, len, path, out, err, errlen);
    ts_free(data);
    return rc;
}
