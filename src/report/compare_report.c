/*
 * compare_report.c - loading runs for `tokenstorm compare` and writing the
 * comparison (see compare_report.h).
 */
#include "report/compare_report.h"

#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/tsjson.h"
#include "report/result.h"
#include "report/svg.h"

/* ---- loading --------------------------------------------------------------------- */

static double num_or_nan(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The goodput thresholds recorded in summary.goodput_config (zeros: off). */
static void read_goodput(const json_t *doc, struct goodput_cfg *g)
{
    const json_t *gc = json_object_get(json_object_get(doc, "summary"), "goodput_config");
    double v;

    memset(g, 0, sizeof(*g));
    if (!json_is_object(gc))
        return;
    if ((v = num_or_nan(gc, "ttft_ms")) > 0)
        g->ttft_ms = v;
    if ((v = num_or_nan(gc, "tpot_ms")) > 0)
        g->tpot_ms = v;
    if ((v = num_or_nan(gc, "e2el_ms")) > 0)
        g->e2el_ms = v;
}

static const char *const value_keys[CMP_V_COUNT] = {
    [CMP_V_TTFT] = "ttft_ms", [CMP_V_TTFC] = "ttfc_ms", [CMP_V_TPOT] = "tpot_ms",
    [CMP_V_E2EL] = "e2el_ms", [CMP_V_LAG] = "lag_ms",
};

/* One requests.jsonl line: 1 kept, 0 skipped (warm-up), -1 malformed. */
static int parse_request(const char *line, size_t len, struct compare_req *q)
{
    json_t *o = json_loadb(line, len, 0, NULL);
    int rc = -1;

    if (!json_is_object(o))
        goto out;
    const json_t *warm = json_object_get(o, "warmup");
    if (json_is_true(warm)) {
        rc = 0;
        goto out;
    }
    const char *outcome = json_string_value(json_object_get(o, "outcome"));
    int oc = outcome ? req_outcome_from_name(outcome) : -EINVAL;
    if (oc < 0)
        goto out;
    q->kind = oc == REQ_OK                                 ? CMP_REQ_OK
              : req_outcome_is_error((enum req_outcome)oc) ? CMP_REQ_ERROR
                                                           : CMP_REQ_OTHER;
    for (int v = 0; v < CMP_V_COUNT; v++)
        q->v[v] = num_or_nan(o, value_keys[v]);
    const json_t *tok = json_object_get(o, "output_tokens");
    if (!json_is_integer(tok) || json_integer_value(tok) < 0 ||
        json_integer_value(tok) > UINT32_MAX)
        goto out;
    q->output_tokens = (uint32_t)json_integer_value(tok);
    rc = 1;
out:
    json_decref(o);
    return rc;
}

/* Reads requests.jsonl into in->reqs; problems go to in->note (not errors) but -ENOMEM. */
static int load_requests(struct compare_input *in)
{
    FILE *f = fopen(in->files.requests, "r");
    struct line_reader lr;
    size_t cap = 0;
    uint64_t ok = 0, failed = 0;
    int rc = 0;

    if (!f) {
        snprintf(in->note, sizeof(in->note), "requests.jsonl: %s", strerror(errno));
        return 0;
    }
    line_reader_init(&lr, f, 0);
    for (;;) {
        const char *line;
        size_t len;
        int r = line_reader_next(&lr, &line, &len);
        if (r == 0)
            break;
        if (r < 0) {
            snprintf(in->note, sizeof(in->note), "requests.jsonl line %ld: %s", lr.line_no,
                     r == TS_TOOBIG ? "line too long" : ts_strerror(r));
            goto out_drop;
        }
        if (len == 0)
            continue;
        if (in->nreqs == COMPARE_REQUESTS_MAX) {
            snprintf(in->note, sizeof(in->note),
                     "requests.jsonl has more than %u requests: compared from histograms",
                     COMPARE_REQUESTS_MAX);
            goto out_drop;
        }
        if (in->nreqs == cap) {
            size_t ncap = cap ? cap * 2 : 1024;
            struct compare_req *n = ts_realloc(in->reqs, ncap * sizeof(*n));
            if (!n) {
                rc = -ENOMEM;
                goto out_drop;
            }
            in->reqs = n;
            cap = ncap;
        }
        struct compare_req *q = &in->reqs[in->nreqs];
        r = parse_request(line, len, q);
        if (r < 0) {
            snprintf(in->note, sizeof(in->note), "requests.jsonl line %ld: not a request record",
                     lr.line_no);
            goto out_drop;
        }
        if (r == 1) {
            ok += q->kind == CMP_REQ_OK;
            failed += q->kind == CMP_REQ_ERROR;
            in->nreqs++;
        }
    }
    if (ok != in->stats->outcomes[REQ_OK] || failed != run_stats_failed(in->stats)) {
        snprintf(in->note, sizeof(in->note),
                 "requests.jsonl has %llu ok / %llu failed requests, result.json %llu / %llu",
                 (unsigned long long)ok, (unsigned long long)failed,
                 (unsigned long long)in->stats->outcomes[REQ_OK],
                 (unsigned long long)run_stats_failed(in->stats));
        goto out_drop;
    }
    goto out;

out_drop:
    ts_free(in->reqs);
    in->reqs = NULL;
    in->nreqs = 0;
out:
    line_reader_release(&lr);
    fclose(f);
    return rc;
}

int compare_input_load(struct compare_input *in, const char *path, bool want_requests, char *err,
                       size_t errlen)
{
    int rc;

    memset(in, 0, sizeof(*in));
    if ((rc = runfiles_locate(path, &in->files, err, errlen)) ||
        (rc = runfiles_load(&in->files, &in->doc, err, errlen)))
        return rc;
    if ((rc = result_read_stats(in->doc, &in->stats, err, errlen))) {
        char tmp[256];
        snprintf(tmp, sizeof(tmp), "%s", err);
        ts_errf(err, errlen, "%s: %s", in->files.result, tmp);
        goto out_fail;
    }
    const json_t *sum = json_object_get(in->doc, "summary");
    double duration = num_or_nan(sum, "duration");
    if (!(duration >= 0))
        duration = num_or_nan(json_object_get(in->doc, "run"), "duration_s");
    const char *when =
        json_string_value(json_object_get(json_object_get(in->doc, "run"), "started_at"));
    snprintf(in->started_at, sizeof(in->started_at), "%s", when ? when : "");
    if (want_requests && in->files.requests[0] && (rc = load_requests(in))) {
        ts_errf(err, errlen, "%s: out of memory", in->files.requests);
        goto out_fail;
    }
    if (want_requests && !in->files.requests[0])
        snprintf(in->note, sizeof(in->note), "no requests.jsonl (run with --save-requests)");
    in->run.stats = in->stats;
    in->run.duration_s = duration > 0 ? duration : 0;
    read_goodput(in->doc, &in->run.goodput);
    in->run.reqs = in->reqs;
    in->run.nreqs = in->nreqs;
    return 0;

out_fail:
    compare_input_release(in);
    return rc;
}

void compare_input_release(struct compare_input *in)
{
    json_decref(in->doc);
    run_stats_free(in->stats);
    ts_free(in->reqs);
    memset(in, 0, sizeof(*in));
}

/* ---- configuration differences ------------------------------------------------------ */

#define CONFIG_KEY_MAX 256

static bool config_key_skipped(const char *key)
{
    static const char *const skip[] = {"started_at",  "duration_s",    "end_mode",
                                       "run_id",      "start_mono_ns", "command_line",
                                       "interrupted", "merged_from"};
    for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
        if (!strcmp(key, skip[i]))
            return true;
    return false;
}

/* v's leaves into flat as "prefix.key" -> value (borrowed references kept by flat). */
static int flatten(json_t *flat, const char *prefix, const json_t *v, int depth)
{
    const char *key;
    json_t *child;
    int rc = 0;

    json_object_foreach((json_t *)v, key, child)
    {
        char path[CONFIG_KEY_MAX];
        if (!prefix[0] && config_key_skipped(key))
            continue;
        snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "." : "", key);
        if (json_is_object(child) && json_object_size(child) && depth < 8)
            rc = flatten(flat, path, child, depth + 1);
        else
            rc = json_object_set(flat, path, child) ? -ENOMEM : 0;
        if (rc)
            break;
    }
    return rc;
}

/* A run's configuration as flat keys; NULL when out of memory. */
static json_t *flat_config(const struct compare_input *in, bool skip_target)
{
    json_t *flat = json_object();
    const json_t *run = json_object_get(in->doc, "run");
    const json_t *ver = json_object_get(json_object_get(in->doc, "tool"), "version");

    if (!flat)
        return NULL;
    if ((json_is_object(run) && flatten(flat, "", run, 0)) ||
        (ver && json_object_set(flat, "tool.version", (json_t *)ver))) {
        json_decref(flat);
        return NULL;
    }
    if (skip_target)
        json_object_del(flat, "target");
    return flat;
}

/* Appends {key, base, new} to diff when a and b differ. */
static int diff_key(json_t *diff, const char *key, const json_t *a, const json_t *b)
{
    if ((a && b && json_equal(a, b)) || ((!a || json_is_null(a)) && (!b || json_is_null(b))))
        return 0; /* the same, or absent on one side and null on the other */
    json_t *e = json_pack("{s:s, s:O, s:O}", "key", key, "base", a ? a : json_null(), "new",
                          b ? b : json_null());
    return !e || json_array_append_new(diff, e) ? -ENOMEM : 0;
}

int compare_config_diff(const struct compare_input *base, const struct compare_input *new_,
                        json_t **out)
{
    const json_t *rb = json_object_get(base->doc, "run"), *rn = json_object_get(new_->doc, "run");
    bool sim = json_is_string(json_object_get(rb, "simulator_profile")) &&
               json_is_string(json_object_get(rn, "simulator_profile"));
    json_t *a = flat_config(base, sim), *b = flat_config(new_, sim), *diff = json_array();
    const char *key;
    json_t *v;
    int rc = a && b && diff ? 0 : -ENOMEM;

    if (!rc) {
        json_object_foreach(a, key, v)
        {
            if ((rc = diff_key(diff, key, v, json_object_get(b, key))))
                break;
        }
    }
    if (!rc) {
        json_object_foreach(b, key, v)
        {
            if (!json_object_get(a, key) && (rc = diff_key(diff, key, NULL, v)))
                break;
        }
    }
    json_decref(a);
    json_decref(b);
    if (rc) {
        json_decref(diff);
        return rc;
    }
    *out = diff;
    return 0;
}

/* v as compact JSON, cut to fit n (with "..." when cut). */
static char *config_value_text(const json_t *v, char *buf, size_t n)
{
    char *text = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    const char *t = text ? text : "null";
    if (strlen(t) >= n && n > 4)
        snprintf(buf, n, "%.*s...", (int)(n - 4), t);
    else
        snprintf(buf, n, "%s", t);
    free(text);
    return buf;
}

int compare_write_config_warning(FILE *f, const json_t *diff)
{
    size_t i;
    const json_t *e;

    if (!json_array_size(diff))
        return 0;
    fprintf(f,
            "tokenstorm compare: warning: the runs' configurations differ in %zu key%s "
            "(base -> new):\n",
            json_array_size(diff), json_array_size(diff) == 1 ? "" : "s");
    json_array_foreach(diff, i, e)
    {
        char a[84], b[84];
        fprintf(f, "  %s: %s -> %s\n", json_string_value(json_object_get(e, "key")),
                config_value_text(json_object_get(e, "base"), a, sizeof(a)),
                config_value_text(json_object_get(e, "new"), b, sizeof(b)));
    }
    fflush(f);
    return ferror(f) ? -EIO : 0;
}

/* ---- formatting ---------------------------------------------------------------------- */

static bool is_rate_row(const struct compare_row *row)
{
    return !row->metric.latency && row->metric.metric == CMP_ERROR_RATE;
}

/* A value in the row's unit (error rate in %). */
static char *fmt_value(const struct compare_row *row, double v, bool sign, char *buf, size_t n)
{
    double a = fabs(v);
    int prec = a >= 1000 ? 0 : a >= 100 ? 1 : a >= 1 ? 2 : 3;

    if (isnan(v))
        snprintf(buf, n, "-");
    else if (is_rate_row(row))
        snprintf(buf, n, sign ? "%+.2f%s" : "%.2f%s", v * 100, sign ? "pp" : "%");
    else
        snprintf(buf, n, sign ? "%+.*f" : "%.*f", prec, v);
    return buf;
}

static char *fmt_rel(double r, char *buf, size_t n)
{
    if (isnan(r))
        snprintf(buf, n, "-");
    else if (isinf(r))
        snprintf(buf, n, "%sinf%%", r > 0 ? "+" : "-");
    else
        snprintf(buf, n, "%+.1f%%", r * 100);
    return buf;
}

static char *fmt_ci(const struct compare_row *row, char *buf, size_t n)
{
    char lo[32], hi[32];
    if (isnan(row->ci_lo))
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "[%s, %s]", fmt_value(row, row->ci_lo, true, lo, sizeof(lo)),
                 fmt_value(row, row->ci_hi, true, hi, sizeof(hi)));
    return buf;
}

static char *fmt_p(const struct compare_row *row, char *buf, size_t n)
{
    if (!row->mwu.valid)
        snprintf(buf, n, "-");
    else if (row->mwu.p < 0.001)
        snprintf(buf, n, "<0.001");
    else
        snprintf(buf, n, "%.3f", row->mwu.p);
    return buf;
}

static const char *verdict_of(const struct compare_row *row)
{
    if (row->regression)
        return "REGRESSION";
    if (row->direction > 0)
        return "worse";
    if (row->direction < 0)
        return "better";
    if (isnan(row->change))
        return "n/a";
    return row->few_samples ? "few-samples" : "same";
}

/* Why a rule's row counts as significant or not, for people. */
static const char *significance_words(const struct compare_row *row)
{
    if (row->significant)
        return "significant";
    if (isnan(row->change))
        return "no samples";
    if (row->few_samples)
        return "too few samples to judge (see docs/COMPARE.md)";
    return "not significant";
}

static const char *test_name(enum compare_test t)
{
    switch (t) {
    case CMP_TEST_MWU:
        return "mwu";
    case CMP_TEST_BOTH:
        return "both";
    case CMP_TEST_EITHER:
        return "either";
    default:
        return "ci";
    }
}

static const char *test_words(enum compare_test t)
{
    switch (t) {
    case CMP_TEST_MWU:
        return "Mann-Whitney p < alpha (rates: the interval excludes 0)";
    case CMP_TEST_BOTH:
        return "the interval excludes 0 and Mann-Whitney p < alpha";
    case CMP_TEST_EITHER:
        return "the interval excludes 0 or Mann-Whitney p < alpha";
    default:
        return "the interval of the change excludes 0";
    }
}

static void describe_input(const struct compare_input *in, char *buf, size_t n)
{
    snprintf(buf, n, "%s (%s%s%llu requests%s%s)", in->files.result, in->started_at,
             in->started_at[0] ? ", " : "", (unsigned long long)in->stats->requests,
             in->nreqs ? ", per-request records" : "", in->nreqs ? "" : ", histograms");
}

/* ---- text ----------------------------------------------------------------------------- */

int compare_write_text(FILE *f, const struct compare_input *base, const struct compare_input *new_,
                       const struct compare_result *res, const struct compare_rule *rules)
{
    char d[RUNFILES_PATH_MAX + 128];
    double conf = (1 - res->alpha) * 100;

    describe_input(base, d, sizeof(d));
    fprintf(f, "base: %s\n", d);
    if (base->note[0])
        fprintf(f, "      %s\n", base->note);
    describe_input(new_, d, sizeof(d));
    fprintf(f, "new:  %s\n", d);
    if (new_->note[0])
        fprintf(f, "      %s\n", new_->note);
    fprintf(f,
            "method: %g%% interval of the change (new - base), Poisson bootstrap over %s, %u "
            "resamples, seed %llu;\n        Mann-Whitney U for latency distributions; "
            "significant: %s\n\n",
            conf, res->requests_used ? "requests" : "histogram buckets and counters",
            res->resamples, (unsigned long long)res->seed, test_words(res->test));
    fprintf(f, "%-26s %10s %10s %10s %9s  %-24s %7s  %s\n", "metric", "base", "new", "change",
            "change%", "interval", "MWU p", "verdict");
    for (size_t i = 0; i < res->nrows; i++) {
        const struct compare_row *row = &res->rows[i];
        char name[64], b[32], nw[32], ch[32], rel[32], ci[80], p[16];
        const char *unit = compare_metric_unit(&row->metric);
        snprintf(name, sizeof(name), "%s%s%s%s", row->name, unit[0] ? " (" : "", unit,
                 unit[0] ? ")" : "");
        fprintf(f, "%-26s %10s %10s %10s %9s  %-24s %7s  %s\n", name,
                fmt_value(row, row->base, false, b, sizeof(b)),
                fmt_value(row, row->new_, false, nw, sizeof(nw)),
                fmt_value(row, row->change, true, ch, sizeof(ch)),
                fmt_rel(row->rel_change, rel, sizeof(rel)), fmt_ci(row, ci, sizeof(ci)),
                fmt_p(row, p, sizeof(p)), verdict_of(row));
    }
    if (res->requests_used) {
        /* name the metrics whose intervals came from the histograms all the same */
        bool seen[STAT_METRIC_COUNT] = {false}, any = false;
        for (size_t i = 0; i < res->nrows; i++) {
            const struct compare_row *row = &res->rows[i];
            if (!row->metric.latency || row->from_requests || seen[row->metric.metric])
                continue;
            fprintf(f, "%s%s", any ? ", " : "\nresampled from the histograms: ",
                    stat_metric_name((enum stat_metric)row->metric.metric));
            seen[row->metric.metric] = any = true;
        }
        if (any)
            fprintf(f, "\n");
    }
    size_t hits = 0;
    if (res->nrules) {
        fprintf(f, "\nrules:\n");
        for (size_t i = 0; i < res->nrules; i++) {
            const struct compare_row *row = &res->rows[res->rule_row[i]];
            char ch[32];
            hits += res->rule_hit[i];
            fprintf(f, "  %-28s %-10s change %s, %s\n", rules[i].expr,
                    res->rule_hit[i] ? "REGRESSION" : "ok",
                    rules[i].relative ? fmt_rel(row->rel_change, ch, sizeof(ch))
                                      : fmt_value(row, row->change, true, ch, sizeof(ch)),
                    significance_words(row));
        }
    }
    if (res->nrules)
        fprintf(f, "\nverdict: %s (%zu of %zu rules)\n",
                res->regression ? "REGRESSION" : "no regression", hits, res->nrules);
    else
        fprintf(f, "\nverdict: no rules given (--fail-on); nothing judged\n");
    fflush(f);
    return ferror(f) ? -EIO : 0;
}

/* ---- JSON ------------------------------------------------------------------------------ */

static json_t *input_json(const struct compare_input *in)
{
    json_t *o = json_object();
    int rc = 0;

    if (!o)
        return NULL;
    rc |= tsjson_put(o, "path", json_string(in->files.result));
    rc |=
        tsjson_put(o, "started_at", in->started_at[0] ? json_string(in->started_at) : json_null());
    rc |= tsjson_put(o, "requests", json_integer((json_int_t)in->stats->requests));
    rc |= tsjson_put(o, "per_request_records", json_boolean(in->nreqs > 0));
    rc |= tsjson_put(o, "note", in->note[0] ? json_string(in->note) : json_null());
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *row_json(const struct compare_row *row)
{
    json_t *o = json_object();
    int rc = 0;

    if (!o)
        return NULL;
    rc |= tsjson_put(o, "name", json_string(row->name));
    rc |= tsjson_put(
        o, "unit", json_string(is_rate_row(row) ? "fraction" : compare_metric_unit(&row->metric)));
    rc |= tsjson_put(o, "lower_is_better",
                     json_boolean(compare_metric_lower_is_better(&row->metric)));
    rc |= tsjson_put(o, "method", json_string(row->from_requests ? "requests" : "histogram"));
    rc |= tsjson_put(o, "base", tsjson_num(row->base));
    rc |= tsjson_put(o, "new", tsjson_num(row->new_));
    rc |= tsjson_put(o, "change", tsjson_num(row->change));
    rc |= tsjson_put(o, "change_pct", tsjson_num(row->rel_change * 100));
    if (isnan(row->ci_lo))
        rc |= tsjson_put(o, "ci", json_null());
    else
        rc |= tsjson_put(o, "ci",
                         json_pack("[o, o]", tsjson_num(row->ci_lo), tsjson_num(row->ci_hi)));
    rc |= tsjson_put(o, "resamples", json_integer(row->resamples));
    if (row->mwu.valid)
        rc |=
            tsjson_put(o, "mwu",
                       json_pack("{s:o, s:o, s:o, s:o, s:I, s:I}", "u", tsjson_num(row->mwu.u), "z",
                                 tsjson_num(row->mwu.z), "p", tsjson_num(row->mwu.p), "effect",
                                 tsjson_num(row->mwu.effect), "n_base", (json_int_t)row->mwu.n_base,
                                 "n_new", (json_int_t)row->mwu.n_new));
    else
        rc |= tsjson_put(o, "mwu", json_null());
    rc |= tsjson_put(o, "few_samples", json_boolean(row->few_samples));
    rc |= tsjson_put(o, "significant", json_boolean(row->significant));
    rc |= tsjson_put(o, "verdict",
                     json_string(row->direction > 0   ? "worse"
                                 : row->direction < 0 ? "better"
                                 : isnan(row->change) ? "n/a"
                                 : row->few_samples   ? "few-samples"
                                                      : "same"));
    rc |= tsjson_put(o, "regression", json_boolean(row->regression));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int compare_build_json(const struct compare_input *base, const struct compare_input *new_,
                       const struct compare_result *res, const struct compare_rule *rules,
                       json_t **out)
{
    json_t *doc = json_object(), *rows = json_array(), *rl = json_array();
    int rc = 0;

    if (!doc || !rows || !rl) {
        json_decref(doc);
        json_decref(rows);
        json_decref(rl);
        return -ENOMEM;
    }
    rc |= tsjson_put(doc, "schema", json_string(COMPARE_SCHEMA));
    rc |= tsjson_put(doc, "base", input_json(base));
    rc |= tsjson_put(doc, "new", input_json(new_));
    rc |= tsjson_put(doc, "method",
                     json_pack("{s:s, s:s, s:i, s:I, s:f, s:f, s:s, s:s}", "interval",
                               "poisson-bootstrap percentile interval of new - base", "resampled",
                               res->requests_used ? "requests" : "histograms", "resamples",
                               (int)res->resamples, "seed", (json_int_t)res->seed, "alpha",
                               res->alpha, "confidence", 1 - res->alpha, "mwu",
                               "normal approximation, tie and continuity corrected, two-sided",
                               "significance", test_name(res->test)));
    rc |= tsjson_put(doc, "metrics", rows);
    rc |= tsjson_put(doc, "rules", rl);
    for (size_t i = 0; !rc && i < res->nrows; i++)
        rc = json_array_append_new(rows, row_json(&res->rows[i])) ? -ENOMEM : 0;
    for (size_t i = 0; !rc && i < res->nrules; i++) {
        const struct compare_row *row = &res->rows[res->rule_row[i]];
        json_t *r =
            json_pack("{s:s, s:s, s:b, s:o, s:o, s:b}", "expr", rules[i].expr, "metric", row->name,
                      "holds", res->rule_hit[i], "change", tsjson_num(row->change), "change_pct",
                      tsjson_num(row->rel_change * 100), "significant", row->significant);
        rc = json_array_append_new(rl, r) ? -ENOMEM : 0;
    }
    rc |= tsjson_put(doc, "regression", json_boolean(res->regression));
    json_t *diff = NULL;
    rc |= compare_config_diff(base, new_, &diff) ? -ENOMEM : tsjson_put(doc, "config_diff", diff);
    if (rc) {
        json_decref(doc);
        return -ENOMEM;
    }
    *out = doc;
    return 0;
}

/* ---- HTML --------------------------------------------------------------------------------- */

static int html_escape(struct buf *b, const char *s)
{
    int rc = 0;
    for (; !rc && *s; s++) {
        switch (*s) {
        case '&':
            rc = buf_append_str(b, "&amp;");
            break;
        case '<':
            rc = buf_append_str(b, "&lt;");
            break;
        case '>':
            rc = buf_append_str(b, "&gt;");
            break;
        case '"':
            rc = buf_append_str(b, "&quot;");
            break;
        case '\'':
            rc = buf_append_str(b, "&#39;");
            break;
        default:
            rc = (unsigned char)*s < 0x20 ? 0 : buf_append_char(b, *s);
        }
    }
    return rc;
}

static const char html_head[] =
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<title>tokenstorm compare</title>\n<style>\n"
    "body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#222}\n"
    "h1{font-size:20px;margin:0 0 8px}\n"
    "table{border-collapse:collapse;margin:12px 0;font-variant-numeric:tabular-nums}\n"
    "th,td{padding:4px 10px;border-bottom:1px solid #ddd;text-align:right;white-space:nowrap}\n"
    "th{background:#f4f4f4}\n td.m,th.m{text-align:left}\n"
    ".bar{display:inline-block;height:8px;vertical-align:middle;margin-left:6px}\n"
    ".b{background:#1f77b4}.n{background:#ff7f0e}\n"
    "tr.regression td{background:#fbd3d0}tr.worse td{background:#fdeccd}\n"
    "tr.better td{background:#dff3df}\n"
    ".verdict{font-weight:600}.pass{color:#1a7f37}.fail{color:#c62828}\n"
    ".small{color:#666;font-size:12px}\nh2{font-size:16px;margin:20px 0 4px}\n"
    ".charts{display:flex;flex-wrap:wrap;gap:12px}\n"
    ".ts-chart{width:100%;max-width:560px;height:auto}\n"
    ".warn{background:#fdeccd;border:1px solid #e0b050;padding:6px 10px;margin:8px 0}\n"
    "</style></head><body>\n<h1>tokenstorm compare</h1>\n";

static int html_input(struct buf *b, const char *label, const struct compare_input *in)
{
    char d[RUNFILES_PATH_MAX + 128];
    int rc = buf_appendf(b, "<div><b>%s</b> ", label);

    describe_input(in, d, sizeof(d));
    rc = rc ? rc : html_escape(b, d);
    if (!rc && in->note[0]) {
        rc = buf_append_str(b, " <span class=\"small\">");
        rc = rc ? rc : html_escape(b, in->note);
        rc = rc ? rc : buf_append_str(b, "</span>");
    }
    return rc ? rc : buf_append_str(b, "</div>\n");
}

/* The warning table of configuration differences; nothing when there are none. */
static int html_config_diff(struct buf *b, const struct compare_input *base,
                            const struct compare_input *new_)
{
    json_t *diff = NULL;
    size_t i;
    const json_t *e;
    int rc = compare_config_diff(base, new_, &diff);

    if (rc || !json_array_size(diff)) {
        json_decref(diff);
        return rc;
    }
    rc = buf_appendf(b,
                     "<div class=\"warn\" id=\"config-diff\"><b>warning: the runs' "
                     "configurations differ in %zu key%s</b>\n<table><tr><th class=\"m\">key"
                     "</th><th class=\"m\">base</th><th class=\"m\">new</th></tr>\n",
                     json_array_size(diff), json_array_size(diff) == 1 ? "" : "s");
    json_array_foreach(diff, i, e)
    {
        char t[84];
        rc = rc ? rc : buf_append_str(b, "<tr><td class=\"m\">");
        rc = rc ? rc : html_escape(b, json_string_value(json_object_get(e, "key")));
        rc = rc ? rc : buf_append_str(b, "</td><td class=\"m\">");
        rc = rc ? rc : html_escape(b, config_value_text(json_object_get(e, "base"), t, sizeof(t)));
        rc = rc ? rc : buf_append_str(b, "</td><td class=\"m\">");
        rc = rc ? rc : html_escape(b, config_value_text(json_object_get(e, "new"), t, sizeof(t)));
        rc = rc ? rc : buf_append_str(b, "</td></tr>\n");
    }
    json_decref(diff);
    return rc ? rc : buf_append_str(b, "</table></div>\n");
}

static int html_cell_bar(struct buf *b, const struct compare_row *row, double v, double max,
                         const char *cls)
{
    char t[32];
    int w = isfinite(v) && max > 0 ? (int)lround(80.0 * v / max) : 0;
    return buf_appendf(b, "<td>%s<span class=\"bar %s\" style=\"width:%dpx\"></span></td>",
                       fmt_value(row, v, false, t, sizeof(t)), cls, w < 0 ? 0 : w);
}

/* The CDF of h in percent, one step per recorded bucket (x ms, y %); 0 or -ENOMEM. */
static int cdf_points(const struct hdr *h, double **x, double **y, size_t *n)
{
    struct hdr_iter it;
    size_t k = 0;
    double total = (double)hdr_total_count(h);

    hdr_iter_recorded_init(&it, h);
    while (hdr_iter_next(&it))
        k++;
    *x = ts_malloc((k + 1) * sizeof(**x));
    *y = ts_malloc((k + 1) * sizeof(**y));
    if (!*x || !*y)
        return -ENOMEM;
    k = 0;
    hdr_iter_recorded_init(&it, h);
    while (hdr_iter_next(&it)) {
        (*x)[k] = (double)it.highest_equivalent / 1000.0;
        (*y)[k++] = 100.0 * (double)it.cumulative_count / total;
    }
    *n = k;
    return 0;
}

/* One chart: the CDFs of metric m of both runs overlaid. */
static int html_cdf(struct buf *out, const struct compare_input *base,
                    const struct compare_input *new_, enum stat_metric m)
{
    const struct hdr *h[2] = {base->stats->hist[m], new_->stats->hist[m]};
    static const char *const names[2] = {"base", "new"};
    struct svg_series series[2];
    double *x[2] = {NULL, NULL}, *y[2] = {NULL, NULL};
    double lo = INFINITY, hi = 0, med = INFINITY;
    char id[64], title[64], xlabel[64];
    size_t k = 0;
    int rc = 0;

    for (int i = 0; i < 2 && !rc; i++) {
        size_t n = 0;
        if (!hdr_total_count(h[i]))
            continue;
        if ((rc = cdf_points(h[i], &x[i], &y[i], &n)))
            break;
        double p50 = fmax((double)hdr_value_at_percentile(h[i], 50) / 1000.0, 0.001);
        lo = fmin(lo, fmax((double)hdr_value_at_percentile(h[i], 1) / 1000.0, p50 / 100));
        hi = fmax(hi, (double)hdr_max(h[i]) / 1000.0);
        med = fmin(med, p50);
        series[k++] = (struct svg_series){.name = names[i],
                                          .x = x[i],
                                          .y = y[i],
                                          .n = n,
                                          .kind = SVG_STEP,
                                          .color = i,
                                          .unit = "ms"};
    }
    const char *name = stat_metric_name(m);
    snprintf(id, sizeof(id), "cmp-%s-cdf", name);
    snprintf(title, sizeof(title), "%s distribution (CDF)", name);
    snprintf(xlabel, sizeof(xlabel), "%s (ms)", name);
    struct svg_chart c = {
        .id = id,
        .title = title,
        .x = {.label = xlabel, .min = NAN, .max = NAN, .include_zero = true},
        .y = {.label = m == STAT_ITL ? "gaps at or below (%)" : "requests at or below (%)",
              .min = 0,
              .max = 100},
        .series = series,
        .nseries = k,
        .note = "no samples",
    };
    struct svg_ticks t;
    if (k && hi / med >= 20 && svg_ticks_log(lo, hi, 6, &t) == 0) { /* a long tail: log x */
        c.x.scale = SVG_SCALE_LOG;
        c.x.include_zero = false;
        c.x.min = t.lo;
        c.x.max = t.hi;
    }
    if (!rc)
        rc = svg_chart_render(&c, out);
    for (int i = 0; i < 2; i++) {
        ts_free(x[i]);
        ts_free(y[i]);
    }
    return rc;
}

int compare_build_html(const struct compare_input *base, const struct compare_input *new_,
                       const struct compare_result *res, const struct compare_rule *rules,
                       struct buf *out)
{
    int rc = buf_append_str(out, html_head);
    char t[96];

    rc = rc ? rc : html_input(out, "base", base);
    rc = rc ? rc : html_input(out, "new", new_);
    rc = rc ? rc : html_config_diff(out, base, new_);
    rc = rc ? rc
            : buf_appendf(out,
                          "<p class=\"small\">%g%% interval of the change (new - base): Poisson "
                          "bootstrap over %s, %u resamples, seed %llu. Mann-Whitney U (normal "
                          "approximation, tie corrected) for latency distributions. Significant: "
                          "%s.</p>\n",
                          (1 - res->alpha) * 100,
                          res->requests_used ? "requests" : "histogram buckets and counters",
                          res->resamples, (unsigned long long)res->seed, test_words(res->test));
    rc = rc ? rc
            : buf_append_str(out, "<table id=\"compare\">\n<tr><th class=\"m\">metric</th>"
                                  "<th>base</th><th>new</th><th>change</th><th>change %</th>"
                                  "<th>interval</th><th>MWU p</th><th>verdict</th></tr>\n");
    for (size_t i = 0; !rc && i < res->nrows; i++) {
        const struct compare_row *row = &res->rows[i];
        const char *v = verdict_of(row);
        const char *unit = compare_metric_unit(&row->metric);
        double max = fmax(isfinite(row->base) ? row->base : 0, isfinite(row->new_) ? row->new_ : 0);
        rc = buf_appendf(out, "<tr class=\"%s\"><td class=\"m\">%s%s%s%s</td>",
                         row->regression ? "regression" : v, row->name, unit[0] ? " (" : "", unit,
                         unit[0] ? ")" : "");
        rc = rc ? rc : html_cell_bar(out, row, row->base, max, "b");
        rc = rc ? rc : html_cell_bar(out, row, row->new_, max, "n");
        rc = rc ? rc : buf_appendf(out, "<td>%s</td>", fmt_value(row, row->change, true, t, 32));
        rc = rc ? rc : buf_appendf(out, "<td>%s</td>", fmt_rel(row->rel_change, t, sizeof(t)));
        rc = rc ? rc : buf_appendf(out, "<td>%s</td>", fmt_ci(row, t, sizeof(t)));
        rc = rc ? rc : buf_appendf(out, "<td>%s</td>", fmt_p(row, t, sizeof(t)));
        rc = rc ? rc : buf_appendf(out, "<td class=\"verdict\">%s</td></tr>\n", v);
    }
    rc = rc ? rc : buf_append_str(out, "</table>\n");
    if (!rc && res->nrules) {
        rc = buf_append_str(out, "<table id=\"rules\"><tr><th class=\"m\">rule</th><th>change</th>"
                                 "<th>significant</th><th>verdict</th></tr>\n");
        for (size_t i = 0; !rc && i < res->nrules; i++) {
            const struct compare_row *row = &res->rows[res->rule_row[i]];
            rc = buf_append_str(out, "<tr><td class=\"m\">");
            rc = rc ? rc : html_escape(out, rules[i].expr);
            rc = rc ? rc
                    : buf_appendf(out, "</td><td>%s</td><td>%s</td><td class=\"%s\">%s</td></tr>\n",
                                  rules[i].relative
                                      ? fmt_rel(row->rel_change, t, sizeof(t))
                                      : fmt_value(row, row->change, true, t, sizeof(t)),
                                  significance_words(row), res->rule_hit[i] ? "fail" : "pass",
                                  res->rule_hit[i] ? "REGRESSION" : "ok");
        }
        rc = rc ? rc : buf_append_str(out, "</table>\n");
    }
    static const enum stat_metric dists[] = {STAT_TTFT, STAT_TPOT, STAT_ITL, STAT_E2EL};
    rc = rc ? rc : buf_append_str(out, "<h2>distributions</h2>\n<div class=\"charts\">\n");
    for (size_t i = 0; !rc && i < sizeof(dists) / sizeof(dists[0]); i++)
        rc = html_cdf(out, base, new_, dists[i]);
    rc = rc ? rc : buf_append_str(out, "</div>\n");
    rc = rc ? rc
            : buf_appendf(out, "<p class=\"verdict %s\">verdict: %s</p>\n</body></html>\n",
                          res->regression ? "fail" : "pass",
                          res->regression ? "REGRESSION"
                          : res->nrules   ? "no regression"
                                          : "no rules given");
    return rc;
}
