/*
 * slo.c - the --slo grammar (see slo.h): a small hand-written scanner that
 * keeps the column of every part, so a bad expression is answered with where
 * it went wrong and, for a misspelt name, the nearest known one.
 */
#include "analysis/slo.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/chars.h"
#include "base/strdist.h"
#include "base/units.h"

#define NAME_MAX_LEN 64 /* longer names are unknown without further ado */

struct scalar_def {
    const char *name;
    enum slo_scalar id;
    enum slo_kind kind;
};

/* Canonical names first (slo_scalar order), then aliases. */
static const struct scalar_def scalars[] = {
    {"error_rate", SLO_ERROR_RATE, SLO_KIND_RATE},
    {"goodput", SLO_GOODPUT, SLO_KIND_PER_S},
    {"request_throughput", SLO_REQUEST_THROUGHPUT, SLO_KIND_PER_S},
    {"output_throughput", SLO_OUTPUT_THROUGHPUT, SLO_KIND_PER_S},
    {"total_token_throughput", SLO_TOTAL_TOKEN_THROUGHPUT, SLO_KIND_PER_S},
    {"max_output_tokens_per_s", SLO_MAX_OUTPUT_TOKENS_PER_S, SLO_KIND_PER_S},
    {"requests", SLO_REQUESTS, SLO_KIND_COUNT},
    {"completed", SLO_COMPLETED, SLO_KIND_COUNT},
    {"failed", SLO_FAILED, SLO_KIND_COUNT},
    {"cut", SLO_CUT, SLO_KIND_COUNT},
    {"good", SLO_GOOD, SLO_KIND_COUNT},
    {"total_input_tokens", SLO_TOTAL_INPUT_TOKENS, SLO_KIND_COUNT},
    {"total_output_tokens", SLO_TOTAL_OUTPUT_TOKENS, SLO_KIND_COUNT},
    {"rouge_l", SLO_ROUGE_L, SLO_KIND_SCORE},
    {"bleu4", SLO_BLEU4, SLO_KIND_SCORE},
    {"exact_match", SLO_EXACT_MATCH, SLO_KIND_RATE},
    {"json_valid", SLO_JSON_VALID, SLO_KIND_RATE},
    {"regex_match", SLO_REGEX_MATCH, SLO_KIND_RATE},
    {"dual_sla", SLO_DUAL_SLA, SLO_KIND_RATE},
    {"consistency", SLO_CONSISTENCY, SLO_KIND_SCORE},
    {"request_goodput", SLO_GOODPUT, SLO_KIND_PER_S},
    {"throughput", SLO_REQUEST_THROUGHPUT, SLO_KIND_PER_S},
    {"output_tps", SLO_OUTPUT_THROUGHPUT, SLO_KIND_PER_S},
};
#define NSCALARS (sizeof(scalars) / sizeof(scalars[0]))

struct stat_def {
    const char *name;
    enum slo_stat stat;
    double pct;
};

static const struct stat_def stats[] = {
    {"mean", SLO_STAT_MEAN, 0},   {"avg", SLO_STAT_MEAN, 0}, {"min", SLO_STAT_MIN, 0},
    {"max", SLO_STAT_MAX, 0},     {"std", SLO_STAT_STD, 0},  {"stddev", SLO_STAT_STD, 0},
    {"median", SLO_STAT_PCT, 50},
};
#define NSTATS (sizeof(stats) / sizeof(stats[0]))

/* Parser state: the expression and where the error message goes. */
struct slo_scan {
    const char *expr;
    const char *p;
    char *err;
    size_t errlen;
};

static size_t column(const struct slo_scan *sc, const char *at)
{
    return (size_t)(at - sc->expr) + 1;
}

/*
 * Writes "slo 'EXPR': MESSAGE at column N[SUFFIX]" into the caller's buffer.
 * Control characters of the expression are shown as '?', so a message never
 * carries a terminal escape from outside.
 */
static int fail(struct slo_scan *sc, const char *at, const char *suffix, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(struct slo_scan *sc, const char *at, const char *suffix, const char *fmt, ...)
{
    char shown[SLO_EXPR_MAX];
    char msg[192];
    size_t i;
    va_list ap;

    if (!sc->err || !sc->errlen)
        return -EINVAL;
    for (i = 0; sc->expr[i] && i < sizeof(shown) - 1; i++) {
        unsigned char c = (unsigned char)sc->expr[i];
        shown[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    shown[i] = '\0';
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(sc->err, sc->errlen, "slo '%s': %s at column %zu%s", shown, msg, column(sc, at),
             suffix ? suffix : "");
    return -EINVAL;
}

static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static const char *skip_blanks(const char *p)
{
    while (chars_is_blank(*p))
        p++;
    return p;
}

/* Lower-cases the name [p, p + len) into out (NAME_MAX_LEN + 1 bytes); false if too long. */
static bool lower_name(const char *p, size_t len, char *out)
{
    if (len > NAME_MAX_LEN)
        return false;
    for (size_t i = 0; i < len; i++)
        out[i] = (p[i] >= 'A' && p[i] <= 'Z') ? (char)(p[i] - 'A' + 'a') : p[i];
    out[len] = '\0';
    return true;
}

/* Keeps candidate in *best if it is closer to name than what *best holds. */
static void consider(const char *name, const char *candidate, const char **best, size_t *best_d)
{
    size_t d = str_edit_distance(name, strlen(name), candidate, strlen(candidate));
    if (d < *best_d) {
        *best_d = d;
        *best = candidate;
    }
}

/* " (did you mean 'X'?)" when a candidate is within a typo or two, else fallback. */
static void suggestion(const char *best, size_t best_d, size_t name_len, const char *fallback,
                       char *out, size_t n)
{
    size_t limit = name_len <= 4 ? 1 : 2;
    if (best && best_d <= limit)
        snprintf(out, n, " (did you mean '%s'?)", best);
    else
        snprintf(out, n, "%s", fallback);
}

/*
 * A latency metric by name. SLOs judge what users feel: "ttft" is the time to
 * the first token with content, reasoning or a tool call (the samples of
 * "ttfc"), since a server may send a role chunk before prefill; "ttft_vllm"
 * is vLLM's first-chunk point (result.json's "ttft"). Returns the metric or
 * -EINVAL.
 */
static int slo_latency_from_name(const char *name, size_t len)
{
    if (strcmp(name, "ttft") == 0)
        return STAT_TTFC;
    if (strcmp(name, "ttft_vllm") == 0)
        return STAT_TTFT;
    return stat_metric_from_name(name, len);
}

static int parse_metric(struct slo_scan *sc, struct slo *s)
{
    const char *start = sc->p;
    char name[NAME_MAX_LEN + 1];
    char hint[96];

    while (is_name_char(*sc->p))
        sc->p++;
    size_t len = (size_t)(sc->p - start);
    if (!len)
        return fail(sc, start, NULL, "expected a metric name");
    if (lower_name(start, len, name)) {
        int m = slo_latency_from_name(name, len);
        if (m >= 0) {
            s->latency = true;
            s->metric = m;
            s->kind = SLO_KIND_LATENCY;
            return 0;
        }
        for (size_t i = 0; i < NSCALARS; i++) {
            if (strcmp(scalars[i].name, name) == 0) {
                s->latency = false;
                s->metric = scalars[i].id;
                s->kind = scalars[i].kind;
                return 0;
            }
        }
    }

    const char *best = NULL;
    size_t best_d = SIZE_MAX;
    if (len <= NAME_MAX_LEN) {
        for (int i = 0; i < STAT_METRIC_COUNT; i++)
            consider(name, stat_metric_name((enum stat_metric)i), &best, &best_d);
        consider(name, "ttft_vllm", &best, &best_d);
        for (size_t i = 0; i < NSCALARS; i++)
            consider(name, scalars[i].name, &best, &best_d);
    }
    suggestion(best, best_d, len, " (see the METRIC list in docs/METRICS.md)", hint, sizeof(hint));
    return fail(sc, start, hint, "unknown metric '%.*s'", (int)(len > 40 ? 40 : len), start);
}

/* STAT after the '.', for a latency metric. */
static int parse_stat(struct slo_scan *sc, struct slo *s)
{
    const char *start = sc->p;
    char name[NAME_MAX_LEN + 1];
    char hint[96];

    while (is_name_char(*sc->p) || *sc->p == '.')
        sc->p++;
    size_t len = (size_t)(sc->p - start);
    if (!len)
        return fail(sc, start, NULL, "expected a statistic (mean, min, max, std, median, pNN)");

    if ((*start == 'p' || *start == 'P') && len > 1 &&
        (chars_is_digit(start[1]) || start[1] == '.')) {
        const char *end = NULL;
        double pct = 0;
        bool ok = true;
        int dots = 0;
        for (const char *q = start + 1; q < sc->p; q++) {
            if (*q == '.')
                dots++;
            else if (!chars_is_digit(*q))
                ok = false;
        }
        ok = ok && dots <= 1 && units_scan_number(start + 1, &end, &pct) == 0 && end == sc->p;
        if (!ok)
            return fail(sc, start, NULL, "bad percentile '%.*s' (write p50, p99, p99.9)",
                        (int)(len > 40 ? 40 : len), start);
        if (pct > 100)
            return fail(sc, start, NULL, "percentile %g is above 100", pct);
        s->stat = SLO_STAT_PCT;
        s->pct = pct;
        return 0;
    }
    if (lower_name(start, len, name)) {
        for (size_t i = 0; i < NSTATS; i++) {
            if (strcmp(stats[i].name, name) == 0) {
                s->stat = stats[i].stat;
                s->pct = stats[i].pct;
                return 0;
            }
        }
    }

    const char *best = NULL;
    size_t best_d = SIZE_MAX;
    if (len <= NAME_MAX_LEN) {
        for (size_t i = 0; i < NSTATS; i++)
            consider(name, stats[i].name, &best, &best_d);
    }
    suggestion(best, best_d, len, " (use mean, min, max, std, median or pNN)", hint, sizeof(hint));
    return fail(sc, start, hint, "unknown statistic '%.*s'", (int)(len > 40 ? 40 : len), start);
}

static int parse_op(struct slo_scan *sc, struct slo *s)
{
    static const struct {
        const char *text;
        enum slo_op op;
    } ops[] = {{"<=", SLO_LE}, {">=", SLO_GE}, {"==", SLO_EQ},
               {"!=", SLO_NE}, {"<", SLO_LT},  {">", SLO_GT}};

    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        size_t n = strlen(ops[i].text);
        if (strncmp(sc->p, ops[i].text, n) == 0) {
            s->op = ops[i].op;
            sc->p += n;
            return 0;
        }
    }
    return fail(sc, sc->p, NULL, "expected an operator (<, <=, >, >=, ==, !=)");
}

struct unit_def {
    const char *name;
    double factor; /* to the canonical unit */
};

static const struct unit_def latency_units[] = {
    {"", 1.0},     {"ms", 1.0},          {"s", 1000.0},
    {"us", 0.001}, {"\xc2\xb5s", 0.001}, {"\xce\xbcs", 0.001},
};
static const struct unit_def rate_units[] = {{"", 1.0}, {"%", 0.01}};
static const struct unit_def per_s_units[] = {{"", 1.0}, {"/s", 1.0}};
static const struct unit_def count_units[] = {{"", 1.0}};

static int parse_value(struct slo_scan *sc, struct slo *s)
{
    const struct unit_def *units;
    size_t nunits;
    const char *advice;
    const char *end = NULL;
    double v = 0;

    if (!chars_is_digit(*sc->p) && *sc->p != '.')
        return fail(sc, sc->p, NULL, "expected a number");
    if (units_scan_number(sc->p, &end, &v) < 0)
        return fail(sc, sc->p, NULL, "expected a number");
    sc->p = skip_blanks(end);

    switch (s->kind) {
    case SLO_KIND_LATENCY:
        units = latency_units;
        nunits = sizeof(latency_units) / sizeof(latency_units[0]);
        advice = "use us, ms or s; no unit means ms";
        break;
    case SLO_KIND_RATE:
    case SLO_KIND_SCORE:
        units = rate_units;
        nunits = sizeof(rate_units) / sizeof(rate_units[0]);
        advice = "use % or no unit for a fraction";
        break;
    case SLO_KIND_PER_S:
        units = per_s_units;
        nunits = sizeof(per_s_units) / sizeof(per_s_units[0]);
        advice = "use /s or no unit";
        break;
    default:
        units = count_units;
        nunits = 1;
        advice = "a count takes no unit";
        break;
    }

    const char *ustart = sc->p;
    while (*sc->p && !chars_is_blank(*sc->p))
        sc->p++;
    size_t ulen = (size_t)(sc->p - ustart);
    for (size_t i = 0; i < nunits; i++) {
        if (strlen(units[i].name) == ulen && memcmp(units[i].name, ustart, ulen) == 0) {
            s->value = v * units[i].factor;
            return 0;
        }
    }
    return fail(sc, ustart, NULL, "unknown unit '%.*s' (%s)", (int)(ulen > 16 ? 16 : ulen), ustart,
                advice);
}

int slo_parse(const char *expr, struct slo *out, char *err, size_t errlen)
{
    struct slo s;
    struct slo_scan sc = {.expr = expr, .p = expr, .err = err, .errlen = errlen};
    int rc;

    if (err && errlen)
        err[0] = '\0';
    if (!expr || !out) {
        if (err && errlen)
            ts_errf(err, errlen, "slo: no expression");
        return -EINVAL;
    }
    if (strlen(expr) >= SLO_EXPR_MAX) {
        if (err && errlen)
            ts_errf(err, errlen, "slo expression longer than %d characters", SLO_EXPR_MAX - 1);
        return -EINVAL;
    }
    memset(&s, 0, sizeof(s));
    memcpy(s.expr, expr, strlen(expr) + 1);

    sc.p = skip_blanks(sc.p);
    const char *mname = sc.p; /* the metric as written ("ttft" judges ttfc) */
    if ((rc = parse_metric(&sc, &s)) < 0)
        return rc;
    int mlen = (int)(sc.p - mname);
    if (*sc.p == '.') {
        if (!s.latency)
            return fail(&sc, sc.p, NULL, "'%s' takes no statistic", scalars[s.metric].name);
        sc.p++;
        if ((rc = parse_stat(&sc, &s)) < 0)
            return rc;
    } else if (s.latency) {
        return fail(&sc, sc.p, NULL, "'%.*s' needs a statistic such as %.*s.p95 or %.*s.mean", mlen,
                    mname, mlen, mname, mlen, mname);
    }
    sc.p = skip_blanks(sc.p);
    if ((rc = parse_op(&sc, &s)) < 0)
        return rc;
    sc.p = skip_blanks(sc.p);
    if ((rc = parse_value(&sc, &s)) < 0)
        return rc;
    sc.p = skip_blanks(sc.p);
    if (*sc.p)
        return fail(&sc, sc.p, NULL, "unexpected text after the value");
    *out = s;
    return 0;
}

static double scalar_actual(enum slo_scalar id, const struct run_summary *sum)
{
    switch (id) {
    case SLO_ERROR_RATE:
        return sum->error_rate;
    case SLO_GOODPUT:
        return sum->goodput_enabled ? run_summary_goodput(sum) : NAN;
    case SLO_REQUEST_THROUGHPUT:
        return run_summary_rps(sum); /* the steady window's, when it has one */
    case SLO_OUTPUT_THROUGHPUT:
        return run_summary_output_tps(sum);
    case SLO_TOTAL_TOKEN_THROUGHPUT:
        return sum->total_token_throughput;
    case SLO_MAX_OUTPUT_TOKENS_PER_S:
        return sum->max_output_tokens_per_s;
    case SLO_REQUESTS:
        return (double)sum->requests;
    case SLO_COMPLETED:
        return (double)sum->completed;
    case SLO_FAILED:
        return (double)sum->failed;
    case SLO_CUT:
        return (double)sum->cut;
    case SLO_GOOD:
        return sum->goodput_enabled ? (double)sum->good : NAN;
    case SLO_TOTAL_INPUT_TOKENS:
        return (double)sum->total_input_tokens;
    case SLO_TOTAL_OUTPUT_TOKENS:
        return (double)sum->total_output_tokens;
    case SLO_ROUGE_L:
        return sum->quality.rouge_l;
    case SLO_BLEU4:
        return sum->quality.bleu4;
    case SLO_EXACT_MATCH:
        return sum->quality.exact_match;
    case SLO_JSON_VALID:
        return sum->quality.json_valid;
    case SLO_REGEX_MATCH:
        return sum->quality.regex_match;
    case SLO_DUAL_SLA:
        return sum->quality.dual_sla;
    case SLO_CONSISTENCY:
        return sum->quality.consistency;
    default:
        return NAN;
    }
}

static double latency_actual(const struct slo *slo, const struct run_summary *sum)
{
    if (slo->metric < 0 || slo->metric >= STAT_METRIC_COUNT)
        return NAN;
    const struct latency_summary *l = &sum->lat[slo->metric];
    if (!l->count)
        return NAN;
    switch (slo->stat) {
    case SLO_STAT_MEAN:
        return l->mean;
    case SLO_STAT_MIN:
        return l->min;
    case SLO_STAT_MAX:
        return l->max;
    case SLO_STAT_STD:
        return l->std;
    case SLO_STAT_PCT:
        return run_summary_percentile_ms(sum, (enum stat_metric)slo->metric, slo->pct);
    default:
        return NAN;
    }
}

/* -1, 0, 1; values within a relative 1e-9 compare equal. */
static int compare(double a, double b)
{
    double tol = 1e-9 * fmax(fabs(a), fabs(b));
    if (fabs(a - b) <= tol)
        return 0;
    return a < b ? -1 : 1;
}

bool slo_eval(const struct slo *slo, const struct run_summary *sum, double *actual)
{
    double v =
        slo->latency ? latency_actual(slo, sum) : scalar_actual((enum slo_scalar)slo->metric, sum);
    if (actual)
        *actual = v;
    if (isnan(v))
        return false;
    int c = compare(v, slo->value);
    switch (slo->op) {
    case SLO_LT:
        return c < 0;
    case SLO_LE:
        return c <= 0;
    case SLO_GT:
        return c > 0;
    case SLO_GE:
        return c >= 0;
    case SLO_EQ:
        return c == 0;
    case SLO_NE:
        return c != 0;
    }
    return false;
}

char *slo_format_value(const struct slo *slo, double v, char *buf, size_t n)
{
    if (!n)
        return buf;
    if (isnan(v)) {
        snprintf(buf, n, "n/a");
        return buf;
    }
    switch (slo->kind) {
    case SLO_KIND_LATENCY:
        snprintf(buf, n, "%.2f ms", v);
        break;
    case SLO_KIND_RATE:
        snprintf(buf, n, "%.3f%%", v * 100.0);
        break;
    case SLO_KIND_SCORE:
        snprintf(buf, n, "%.3f", v);
        break;
    case SLO_KIND_PER_S:
        snprintf(buf, n, "%.2f/s", v);
        break;
    default:
        snprintf(buf, n, "%.0f", v);
        break;
    }
    return buf;
}

unsigned slo_needs(const struct slo *slo)
{
    if (slo->latency) {
        switch ((enum stat_metric)slo->metric) {
        case STAT_TTFT:
        case STAT_TTFT_UNCORRECTED:
        case STAT_TTFC:
        case STAT_ITL:
        case STAT_TPOT:
            return SLO_NEEDS_STREAM;
        default:
            return 0;
        }
    }
    switch ((enum slo_scalar)slo->metric) {
    case SLO_GOODPUT:
    case SLO_GOOD:
        return SLO_NEEDS_GOODPUT;
    case SLO_ROUGE_L:
    case SLO_BLEU4:
    case SLO_EXACT_MATCH:
        return SLO_NEEDS_REFERENCE;
    case SLO_REGEX_MATCH:
        return SLO_NEEDS_REGEX;
    case SLO_JSON_VALID:
        return SLO_NEEDS_JSON;
    case SLO_DUAL_SLA:
        return SLO_NEEDS_DUAL_SLA;
    case SLO_CONSISTENCY:
        return SLO_NEEDS_CONSISTENCY;
    default:
        return 0;
    }
}

const char *slo_metric_name(const struct slo *slo)
{
    if (slo->latency)
        return stat_metric_name((enum stat_metric)slo->metric);
    for (size_t i = 0; i < NSCALARS; i++) {
        if ((int)scalars[i].id == slo->metric)
            return scalars[i].name;
    }
    return "?";
}

const char *slo_metric_written(const struct slo *slo, char *buf, size_t n)
{
    const char *p = slo->expr;
    size_t i = 0;
    while (chars_is_blank(*p))
        p++;
    while (i + 1 < n && (chars_is_digit(p[i]) || (p[i] >= 'a' && p[i] <= 'z') ||
                         (p[i] >= 'A' && p[i] <= 'Z') || p[i] == '_'))
        i++;
    if (i)
        snprintf(buf, n, "%.*s", (int)i, p);
    else
        snprintf(buf, n, "%s", slo_metric_name(slo));
    return buf;
}

const char *slo_op_name(enum slo_op op)
{
    static const char *const names[] = {"<", "<=", ">", ">=", "==", "!="};
    if ((unsigned)op >= sizeof(names) / sizeof(names[0]))
        return "?";
    return names[op];
}
