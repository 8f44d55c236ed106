/*
 * promparse.c - the Prometheus text exposition format, read line by line
 * into callbacks (see promparse.h for the grammar and the limits).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/chars.h"
#include "base/alloc.h"
#include "telemetry/promparse.h"

#define NUM_MAX 64 /* longest value or timestamp token */

struct pp {
    const char *line; /* the current line, without '\n' (and '\r') */
    size_t len;
    size_t lineno;
    char *scratch; /* unescaped label values of the current line */
    size_t scratch_used;
    char *err;
    size_t errlen;
};

static const char *const type_names[] = {
    [PROMPARSE_UNTYPED] = "untyped",   [PROMPARSE_COUNTER] = "counter",
    [PROMPARSE_GAUGE] = "gauge",       [PROMPARSE_HISTOGRAM] = "histogram",
    [PROMPARSE_SUMMARY] = "summary",   [PROMPARSE_GAUGEHISTOGRAM] = "gaugehistogram",
    [PROMPARSE_STATESET] = "stateset", [PROMPARSE_INFO] = "info",
};

const char *promparse_type_name(enum promparse_type t)
{
    if ((unsigned)t >= sizeof(type_names) / sizeof(type_names[0]))
        return "untyped";
    return type_names[t];
}

bool promparse_str_eq(struct promparse_str s, const char *z)
{
    size_t n = strlen(z);
    return s.len == n && memcmp(s.p, z, n) == 0;
}

const struct promparse_str *promparse_label(const struct promparse_sample *s, const char *name)
{
    for (size_t i = 0; i < s->nlabels; i++)
        if (promparse_str_eq(s->labels[i].name, name))
            return &s->labels[i].value;
    return NULL;
}

__attribute__((format(printf, 3, 4))) static int fail(struct pp *pp, size_t col, const char *fmt,
                                                      ...)
{
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    ts_errf(pp->err, pp->errlen, "line %zu, column %zu: %s", pp->lineno, col + 1, what);
    return TS_PARSE;
}

static bool is_name_start(char c, bool metric)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (metric && c == ':');
}

static bool is_name_char(char c, bool metric)
{
    return is_name_start(c, metric) || (c >= '0' && c <= '9');
}

static size_t skip_blanks(const struct pp *pp, size_t i)
{
    while (i < pp->len && chars_is_blank(pp->line[i]))
        i++;
    return i;
}

/* Reads a name at *i; 0 and the name, or TS_PARSE. */
static int read_name(struct pp *pp, size_t *i, bool metric, struct promparse_str *out)
{
    size_t start = *i;
    if (start >= pp->len || !is_name_start(pp->line[start], metric)) {
        if (metric && start < pp->len && pp->line[start] == '{')
            return fail(pp, start, "quoted metric names are not supported");
        return fail(pp, start, "expected a %s name", metric ? "metric" : "label");
    }
    size_t j = start + 1;
    while (j < pp->len && is_name_char(pp->line[j], metric))
        j++;
    out->p = pp->line + start;
    out->len = j - start;
    *i = j;
    return 0;
}

/* Reads a number token (up to a blank or the end) at *i. */
static int read_number(struct pp *pp, size_t *i, const char *what, double *out)
{
    size_t start = *i, j = start;
    while (j < pp->len && !chars_is_blank(pp->line[j]))
        j++;
    if (j == start)
        return fail(pp, start, "expected a %s", what);
    if (j - start >= NUM_MAX)
        return fail(pp, start, "%s too long", what);
    char tok[NUM_MAX];
    memcpy(tok, pp->line + start, j - start);
    tok[j - start] = '\0';
    char *end;
    double v = strtod(tok, &end);
    if (end == tok || *end)
        return fail(pp, start, "bad %s '%s'", what, tok);
    *out = v;
    *i = j;
    return 0;
}

/* Reads a quoted label value at *i (on the opening quote). */
static int read_value(struct pp *pp, size_t *i, struct promparse_str *out)
{
    size_t start = *i + 1, j = start;
    bool escaped = false;
    while (j < pp->len && pp->line[j] != '"') {
        if (pp->line[j] == '\\') {
            escaped = true;
            j++;
            if (j == pp->len)
                break;
        }
        j++;
    }
    if (j >= pp->len)
        return fail(pp, *i, "unterminated label value");
    *i = j + 1;
    if (!escaped) {
        out->p = pp->line + start;
        out->len = j - start;
        return 0;
    }
    /* unescaped values are never longer than escaped ones */
    char *dst = pp->scratch + pp->scratch_used;
    size_t n = 0;
    for (size_t k = start; k < j; k++) {
        char c = pp->line[k];
        if (c == '\\') {
            char e = pp->line[++k];
            if (e == 'n')
                c = '\n';
            else if (e == '\\' || e == '"')
                c = e;
            else
                return fail(pp, k - 1, "invalid escape '\\%c' in a label value", e);
        }
        dst[n++] = c;
    }
    out->p = dst;
    out->len = n;
    pp->scratch_used += n;
    return 0;
}

static int read_labels(struct pp *pp, size_t *i, struct promparse_label *labels, size_t *nlabels)
{
    size_t j = *i + 1; /* after '{' */
    size_t n = 0;
    for (;;) {
        j = skip_blanks(pp, j);
        if (j < pp->len && pp->line[j] == '}')
            break;
        if (n == PROMPARSE_MAX_LABELS) {
            ts_errf(pp->err, pp->errlen, "line %zu: more than %d labels", pp->lineno,
                    PROMPARSE_MAX_LABELS);
            return TS_TOOBIG;
        }
        struct promparse_label *l = &labels[n];
        size_t name_at = j;
        int rc = read_name(pp, &j, false, &l->name);
        if (rc)
            return rc;
        for (size_t k = 0; k < n; k++)
            if (labels[k].name.len == l->name.len &&
                !memcmp(labels[k].name.p, l->name.p, l->name.len))
                return fail(pp, name_at, "label '%.*s' given twice", (int)l->name.len, l->name.p);
        j = skip_blanks(pp, j);
        if (j >= pp->len || pp->line[j] != '=')
            return fail(pp, j, "expected '=' after a label name");
        j = skip_blanks(pp, j + 1);
        if (j >= pp->len || pp->line[j] != '"')
            return fail(pp, j, "expected '\"' to open a label value");
        if ((rc = read_value(pp, &j, &l->value)))
            return rc;
        n++;
        j = skip_blanks(pp, j);
        if (j < pp->len && pp->line[j] == ',') {
            j++;
            continue;
        }
        if (j < pp->len && pp->line[j] == '}')
            break;
        return fail(pp, j, "expected ',' or '}' after a label value");
    }
    *i = j + 1;
    *nlabels = n;
    return 0;
}

static int parse_sample(struct pp *pp, size_t i, const struct promparse_ops *ops, void *arg)
{
    struct promparse_label labels[PROMPARSE_MAX_LABELS];
    struct promparse_sample s = {.labels = labels, .line = pp->lineno};
    int rc = read_name(pp, &i, true, &s.name);
    if (rc)
        return rc;
    pp->scratch_used = 0;
    if (i < pp->len && pp->line[i] == '{' && (rc = read_labels(pp, &i, labels, &s.nlabels)))
        return rc;
    if (i >= pp->len || !chars_is_blank(pp->line[i]))
        return fail(pp, i, "expected a blank and a value");
    i = skip_blanks(pp, i);
    if ((rc = read_number(pp, &i, "value", &s.value)))
        return rc;
    i = skip_blanks(pp, i);
    if (i < pp->len && pp->line[i] != '#') {
        if ((rc = read_number(pp, &i, "timestamp", &s.timestamp)))
            return rc;
        s.has_timestamp = true;
        i = skip_blanks(pp, i);
    }
    /* an OpenMetrics exemplar ("# {labels} value") is skipped */
    if (i < pp->len && pp->line[i] != '#')
        return fail(pp, i, "unexpected text after the value");
    return ops->on_sample(&s, arg);
}

static int parse_type(struct pp *pp, size_t i, const struct promparse_ops *ops, void *arg)
{
    struct promparse_str name;
    int rc = read_name(pp, &i, true, &name);
    if (rc)
        return rc;
    if (i >= pp->len || !chars_is_blank(pp->line[i]))
        return fail(pp, i, "expected a type after the metric name");
    i = skip_blanks(pp, i);
    size_t start = i;
    while (i < pp->len && !chars_is_blank(pp->line[i]))
        i++;
    struct promparse_str word = {pp->line + start, i - start};
    if (skip_blanks(pp, i) != pp->len)
        return fail(pp, i, "unexpected text after the type");
    int type = -1;
    for (size_t t = 0; t < sizeof(type_names) / sizeof(type_names[0]); t++)
        if (promparse_str_eq(word, type_names[t]))
            type = (int)t;
    if (promparse_str_eq(word, "unknown"))
        type = PROMPARSE_UNTYPED;
    if (type < 0)
        return fail(pp, start, "unknown metric type '%.*s'", (int)(word.len > 32 ? 32 : word.len),
                    word.p);
    return ops->on_type ? ops->on_type(name, (enum promparse_type)type, arg) : 0;
}

/* A '#' line; sets *eof for OpenMetrics' "# EOF". */
static int parse_comment(struct pp *pp, size_t i, const struct promparse_ops *ops, void *arg,
                         bool *eof)
{
    i = skip_blanks(pp, i + 1);
    size_t start = i;
    while (i < pp->len && !chars_is_blank(pp->line[i]))
        i++;
    struct promparse_str word = {pp->line + start, i - start};
    if (promparse_str_eq(word, "TYPE")) {
        if (i >= pp->len)
            return fail(pp, i, "expected a metric name after TYPE");
        return parse_type(pp, skip_blanks(pp, i), ops, arg);
    }
    if (promparse_str_eq(word, "EOF") && skip_blanks(pp, i) == pp->len)
        *eof = true;
    return 0; /* HELP, UNIT and plain comments */
}

int promparse_text(const char *text, size_t len, const struct promparse_limits *lim,
                   const struct promparse_ops *ops, void *arg, char *err, size_t errlen)
{
    if (!ops || !ops->on_sample || (!text && len)) {
        ts_errf(err, errlen, "no sample callback");
        return -EINVAL;
    }
    size_t max_line = lim && lim->max_line ? lim->max_line : PROMPARSE_DEFAULT_MAX_LINE;
    size_t max_samples = lim && lim->max_samples ? lim->max_samples : PROMPARSE_DEFAULT_MAX_SAMPL;
    struct pp pp = {.err = err, .errlen = errlen};
    /* every label value of a line fits in a line's worth of scratch */
    size_t scratch = (len < max_line ? len : max_line) + 1;
    pp.scratch = ts_malloc(scratch);
    if (!pp.scratch) {
        ts_errf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    size_t samples = 0;
    int rc = 0;
    bool eof = false;
    for (size_t pos = 0; pos < len && !rc && !eof;) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t n = (nl ? (size_t)(nl - text) : len) - pos;
        pp.line = text + pos;
        pp.len = n;
        pp.lineno++;
        pos += n + 1;
        if (n > max_line) {
            ts_errf(err, errlen, "line %zu: longer than %zu bytes", pp.lineno, max_line);
            rc = TS_TOOBIG;
            break;
        }
        if (pp.len && pp.line[pp.len - 1] == '\r')
            pp.len--;
        size_t i = skip_blanks(&pp, 0);
        if (i == pp.len)
            continue;
        if (pp.line[i] == '#') {
            rc = parse_comment(&pp, i, ops, arg, &eof);
            continue;
        }
        if (++samples > max_samples) {
            ts_errf(err, errlen, "more than %zu samples", max_samples);
            rc = TS_TOOBIG;
            break;
        }
        rc = parse_sample(&pp, i, ops, arg);
    }
    ts_free(pp.scratch);
    return rc;
}
