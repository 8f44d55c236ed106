/*
 * tokenstorm report - result files (runs and sweeps) into a text summary,
 * CSV, a JSON digest or a self-contained HTML page. Options and output
 * files only: loading is report/docset.c, the formats report/text.c,
 * report/csv.c and report/html.c.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/slo.h"
#include "base/alloc.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/hdr.h"
#include "base/log.h"
#include "cmd/cmd.h"
#include "cmd/cmd_common.h"
#include "cmd/cmd_opts.h"
#include "report/csv.h"
#include "report/docset.h"
#include "report/html.h"
#include "report/text.h"
#include "ts_config.h"

#define REPORT_HTML_MAX  ((size_t)512 << 20) /* largest page built */
#define REPORT_PATHS_MAX 256

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tokenstorm report [OPTIONS] PATH...\n\n"
            "Turns the result files of runs and sweeps into a summary, CSV, a JSON digest or a\n"
            "self-contained HTML page (inline CSS and SVG charts, no script, no network request).\n"
            "Each PATH is a run's result.json, a sweep's sweep.json, a topology.json of\n"
            "'tokenstorm topology', a directory holding one of them, or a directory of such\n"
            "directories (e.g. tokenstorm-results/, or proxy --mirror-out's DIR with its\n"
            "mirror.json). Runs are named after their directories; several runs are compared\n"
            "side by side; a topology is drawn with its risks; a mirror shows its pairs'\n"
            "errors, latency difference and answer similarity.\n\n"
            "options:\n"
            "  --format F         text (default), csv, json or html\n"
            "  --json             the same as --format json\n"
            "  -o, --out PATH     write to PATH (default: stdout). With --format csv, PATH is a\n"
            "                     prefix: PATH_stats.csv (Locust's columns, E2EL latencies),\n"
            "                     PATH_ttft_stats.csv (the same columns with TTFT),\n"
            "                     PATH_timeline.csv and, for sweeps, PATH_sweep.csv; on stdout\n"
            "                     csv is the E2EL stats table only\n"
            "  --title TEXT       the HTML page's title (default 'tokenstorm report')\n"
            "  -v, --verbose      debug logging\n"
            "\nexamples:\n"
            "  tokenstorm report tokenstorm-results/2026-11-29T17-31-48Z-run\n"
            "  tokenstorm report --format html -o report.html results/run1\n"
            "  tokenstorm report --format html -o compare.html results/baseline results/today\n"
            "  tokenstorm report --format html -o sweep.html sweep-results/\n"
            "  tokenstorm report --format html -o chain.html results/run1 topo/topology.json\n"
            "  tokenstorm report --format csv -o out/locust tokenstorm-results/\n"
            "  tokenstorm report --format json results/run1/result.json > digest.json\n"
            "\nexit codes: 0 ok, 2 usage error or an input that cannot be read or is not a\n"
            "tokenstorm result, sweep or topology, 3 the output could not be written\n");
}

enum report_format { FMT_TEXT, FMT_CSV, FMT_JSON, FMT_HTML };

enum {
    O_FORMAT = 256,
    O_TITLE,
    O_VERSION,
    O_JSON,
};

static const struct option report_options[] = {
    {"format", required_argument, NULL, O_FORMAT}, {"json", no_argument, NULL, O_JSON},
    {"out", required_argument, NULL, 'o'},         {"title", required_argument, NULL, O_TITLE},
    {"verbose", no_argument, NULL, 'v'},           {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, O_VERSION},     {NULL, 0, NULL, 0},
};

struct report_opts {
    enum report_format format;
    const char *out, *title;
};

/* ---- text ---------------------------------------------------------------- */

/* The stored SLO verdicts, in report_text_slo()'s layout. */
static void text_slos(FILE *f, const json_t *doc)
{
    const json_t *arr = report_json_arr(doc, "slo"), *v;
    size_t i, width = 3;
    char actual[48];

    if (!json_array_size(arr))
        return;
    json_array_foreach(arr, i, v)
    {
        const char *e = report_json_str(v, "expr");
        size_t len = e ? strlen(e) : 1;
        if (len > width)
            width = len > 60 ? 60 : len;
    }
    fprintf(f, "\n%-*s  %-14s %s\n", (int)width, "SLO", "actual", "verdict");
    json_array_foreach(arr, i, v)
    {
        const char *e = report_json_str(v, "expr");
        double a = report_json_num(v, "actual");
        struct slo slo;
        if (e && slo_parse(e, &slo, NULL, 0) == 0)
            slo_format_value(&slo, a, actual, sizeof(actual));
        else if (isfinite(a))
            snprintf(actual, sizeof(actual), "%g", a);
        else
            snprintf(actual, sizeof(actual), "n/a");
        fprintf(f, "%-*.*s  %-14s %s\n", (int)width, (int)width, e ? e : "?", actual,
                json_is_true(json_object_get(v, "pass")) ? "pass" : "FAIL");
    }
}

static void text_cell(FILE *f, double v, int width, int decimals)
{
    if (isfinite(v))
        fprintf(f, " %*.*f", width, decimals, v);
    else
        fprintf(f, " %*s", width, "-");
}

static void text_sweep(FILE *f, const struct report_doc *d)
{
    const json_t *doc = d->doc, *st;
    const json_t *knee = report_json_obj(doc, "knee"), *mg = report_json_obj(doc, "max_goodput");
    const json_t *cl = report_json_obj(doc, "critical_load");
    size_t i;

    fprintf(f, "%-24s %9s %9s %9s %10s %10s %8s %5s %4s\n", "step", "load", "req/s", "tok/s",
            "TTFT p99", "E2EL p99", "errors", "SLO", "sat");
    json_array_foreach(report_json_arr(doc, "steps"), i, st)
    {
        const char *dir = report_json_str(st, "dir");
        const json_t *pass = json_object_get(st, "slo_pass");
        fprintf(f, "%-24.24s", dir ? dir : "-");
        text_cell(f, report_json_num(st, "load"), 9, 2);
        text_cell(f, report_json_num(st, "achieved_rps"), 9, 2);
        text_cell(f, report_json_num(st, "output_tps"), 9, 0);
        text_cell(f, report_json_num(st, "ttft_p99_ms"), 10, 1);
        text_cell(f, report_json_num(st, "e2el_p99_ms"), 10, 1);
        double er = report_json_num(st, "error_rate");
        if (isfinite(er))
            fprintf(f, " %7.2f%%", er * 100);
        else
            fprintf(f, " %8s", "-");
        fprintf(f, " %5s %4s\n",
                json_is_boolean(pass) ? (json_is_true(pass) ? "pass" : "FAIL") : "-",
                json_is_true(json_object_get(st, "saturated")) ? "yes" : "no");
    }
    if (knee)
        fprintf(f, "\nknee          load %.2f: %.2f req/s at %.1f ms %s (%s)\n",
                report_json_num(knee, "load"), report_json_num(knee, "throughput"),
                report_json_num(knee, "latency_ms"),
                report_json_str(knee, "metric") ? report_json_str(knee, "metric") : "",
                report_json_str(knee, "method") ? report_json_str(knee, "method") : "");
    else
        fprintf(f, "\nknee          not found\n");
    if (mg)
        fprintf(f, "max goodput   %.2f req/s at load %.2f\n", report_json_num(mg, "goodput_rps"),
                report_json_num(mg, "load"));
    if (cl)
        fprintf(f, "critical load lambda_c %.2f (epsilon0 %.3g, delta_lambda %.3g, r2 %.3f)\n",
                report_json_num(cl, "lambda_c"), report_json_num(cl, "epsilon0"),
                report_json_num(cl, "delta_lambda"), report_json_num(cl, "r2"));
}

/* A run rebuilt from the files a killed run left (report/recover.h): said before its figures. */
static void text_recovered(FILE *f, const json_t *doc)
{
    const json_t *rec = json_object_get(doc, "recovered");
    if (!json_is_object(rec))
        return;
    const json_t *from = json_object_get(rec, "from");
    const char *reason = report_json_str(rec, "reason"), *counts = report_json_str(rec, "counts");
    fprintf(f, "RECOVERED: %.200s\n  rebuilt from", reason ? reason : "no result.json");
    for (size_t i = 0; i < json_array_size(from); i++) {
        const char *name = json_string_value(json_array_get(from, i));
        fprintf(f, "%s %.40s", i ? "," : "", name ? name : "?");
    }
    fprintf(f, " (%.0f intervals, %.0f request lines, %.0f malformed lines skipped)\n",
            report_json_num(rec, "hlog_intervals"), report_json_num(rec, "request_lines"),
            report_json_num(rec, "skipped_lines"));
    if (counts)
        fprintf(f, "  counts: %.200s\n", counts);
}

/* A vector-search run's recall line (the rebuilt stats do not hold recall). */
static void text_vector(FILE *f, const json_t *doc)
{
    const json_t *v = json_object_get(doc, "vector_search");
    if (!json_is_object(v))
        return;
    fprintf(f,
            "vector search %.0f searches at %.2f/s: recall@%.0f mean %.4f, p5 %.4f, min %.4f; "
            "latency p50 %.2f ms, p99 %.2f ms\n",
            report_json_num(v, "searches"), report_json_num(v, "qps"), report_json_num(v, "k"),
            report_json_num(v, "recall_mean"), report_json_num(v, "recall_p5"),
            report_json_num(v, "recall_min"), report_json_num(v, "latency_p50_ms"),
            report_json_num(v, "latency_p99_ms"));
}

/* A topology's terminal summary (analysis/topo.h). */
static int text_topology(FILE *f, const struct report_doc *d)
{
    struct buf b;
    buf_init(&b, REPORT_HTML_MAX);
    int rc = topo_write_text(d->topo, &b);
    if (!rc && b.len && fwrite(b.data, 1, b.len, f) != b.len)
        rc = -EIO;
    buf_release(&b);
    return rc;
}

static const char *doc_kind_name(const struct report_doc *d)
{
    return d->kind == REPORT_DOC_SWEEP      ? "sweep"
           : d->kind == REPORT_DOC_TOPOLOGY ? "topology"
           : d->kind == REPORT_DOC_MIRROR   ? "mirror"
                                            : "run";
}

/* proxy --mirror-out's pairs: counts, errors, latency difference, similarity. */
static void text_mirror(FILE *f, const json_t *doc)
{
    const json_t *e = json_object_get(doc, "errors");
    const json_t *lat = json_object_get(doc, "latency_diff_s");
    const json_t *sim = json_object_get(doc, "similarity");
    fprintf(f, "pairs: %lld sampled, %lld mirrored, %lld dropped, %lld compared, %lld cut\n",
            report_json_int(doc, "sampled"), report_json_int(doc, "mirrored"),
            report_json_int(doc, "dropped"), report_json_int(doc, "compared"),
            report_json_int(doc, "cut"));
    fprintf(f, "errors: %lld on the primary only, %lld on the mirror only, %lld on both\n",
            report_json_int(e, "primary_only"), report_json_int(e, "mirror_only"),
            report_json_int(e, "both"));
    double d = report_json_num(lat, "mean");
    if (isfinite(d))
        fprintf(f,
                "latency: the mirror's answers ended %+.3f s after the primary's on average "
                "(%lld pairs)\n",
                d, report_json_int(lat, "count"));
    double m = report_json_num(sim, "mean"), lo = report_json_num(sim, "min");
    if (isfinite(m))
        fprintf(f,
                "answer similarity (ROUGE-L F, mirror against primary): mean %.3f, min %.3f "
                "(%lld pairs with text)\n",
                m, lo, report_json_int(sim, "count"));
    else
        fprintf(f, "answer similarity: no pair with text on both sides\n");
    fprintf(f, "runs: DIR/primary and DIR/mirror (tokenstorm compare DIR/primary DIR/mirror)\n");
}

static int write_text(FILE *f, const struct report_docset *set)
{
    for (size_t i = 0; i < set->n; i++) {
        const struct report_doc *d = &set->docs[i];
        fprintf(f, "%s== %s %s (%s)\n", i ? "\n" : "", doc_kind_name(d), d->name, d->path);
        if (d->kind == REPORT_DOC_TOPOLOGY) {
            if (text_topology(f, d))
                return -EIO;
            continue;
        }
        if (d->kind == REPORT_DOC_SWEEP) {
            text_sweep(f, d);
            continue;
        }
        if (d->kind == REPORT_DOC_MIRROR) {
            text_mirror(f, d->doc);
            continue;
        }
        text_recovered(f, d->doc);
        if (report_text_summary(f, d->stats, &d->sum))
            return -EIO;
        if (!d->stats->recall.count)
            text_vector(f, d->doc);
        text_slos(f, d->doc);
    }
    for (size_t i = 0; i < set->n; i++)
        if (set->docs[i].kind == REPORT_DOC_RESULT) { /* once, under the runs */
            fputc('\n', f);
            report_text_legend(f, set->docs[i].stats);
            break;
        }
    return ferror(f) ? -EIO : 0;
}

/* ---- json -------------------------------------------------------------------- */

static int put_copy(json_t *dst, const json_t *src, const char *key)
{
    json_t *v = json_object_get(src, key);
    if (!v)
        return 0;
    return json_object_set_new(dst, key, json_deep_copy(v)) ? -ENOMEM : 0;
}

/* {p50, p66, ..., p100} in ms from the histogram of m, or null when empty. */
static json_t *percentiles_json(const struct run_stats *s, enum stat_metric m)
{
    static const double pct[] = {50, 66, 75, 80, 90, 95, 98, 99, 99.9, 99.99, 100};
    static const char *const names[] = {"p50", "p66", "p75",   "p80",    "p90", "p95",
                                        "p98", "p99", "p99.9", "p99.99", "p100"};
    int64_t vals[sizeof(pct) / sizeof(pct[0])];
    const struct hdr *h = s->hist[m];

    if (hdr_total_count(h) == 0)
        return json_null();
    if (hdr_values_at_percentiles(h, pct, vals, sizeof(pct) / sizeof(pct[0])))
        return NULL;
    json_t *o = json_object();
    for (size_t i = 0; o && i < sizeof(pct) / sizeof(pct[0]); i++)
        if (json_object_set_new(o, names[i], json_real((double)vals[i] / 1000.0))) {
            json_decref(o);
            return NULL;
        }
    return o;
}

static json_t *doc_digest(const struct report_doc *d)
{
    static const char *const run_keys[] = {
        "run",          "summary",   "latency",   "outcomes",     "http_status",
        "tokens",       "streams",   "slo",       "quality",      "itl_by_position",
        "integrity",    "faults",    "by_tenant", "by_intent",    "by_perturbation",
        "by_flow_step", "recovered", "vllm",      "vector_search"};
    static const char *const sweep_keys[] = {"mode",          "target",       "slo",
                                             "steps",         "knee",         "max_goodput",
                                             "critical_load", "interference", "recall_knee"};
    static const char *const topo_keys[] = {"sources", "nodes", "edges", "flags"};
    static const char *const mirror_keys[] = {"primary",  "mirror",         "duration_s", "sampled",
                                              "mirrored", "dropped",        "compared",   "cut",
                                              "errors",   "latency_diff_s", "similarity"};
    static const struct {
        enum stat_metric m;
        const char *key;
    } pm[] = {{STAT_TTFT, "ttft"}, {STAT_ITL, "itl"}, {STAT_TPOT, "tpot"}, {STAT_E2EL, "e2el"}};
    json_t *o = json_pack("{s:s, s:s, s:s}", "name", d->name, "path", d->path, "kind",
                          d->kind == REPORT_DOC_RESULT ? "result" : doc_kind_name(d));
    int rc = 0;

    if (!o)
        return NULL;
    if (d->kind == REPORT_DOC_TOPOLOGY) {
        for (size_t i = 0; !rc && i < sizeof(topo_keys) / sizeof(topo_keys[0]); i++)
            rc = put_copy(o, d->doc, topo_keys[i]);
    } else if (d->kind == REPORT_DOC_MIRROR) {
        for (size_t i = 0; !rc && i < sizeof(mirror_keys) / sizeof(mirror_keys[0]); i++)
            rc = put_copy(o, d->doc, mirror_keys[i]);
    } else if (d->kind == REPORT_DOC_SWEEP) {
        for (size_t i = 0; !rc && i < sizeof(sweep_keys) / sizeof(sweep_keys[0]); i++)
            rc = put_copy(o, d->doc, sweep_keys[i]);
    } else {
        for (size_t i = 0; !rc && i < sizeof(run_keys) / sizeof(run_keys[0]); i++)
            rc = put_copy(o, d->doc, run_keys[i]);
        json_t *pcts = json_object();
        rc = rc ? rc : (pcts && !json_object_set_new(o, "percentiles_ms", pcts) ? 0 : -ENOMEM);
        for (size_t i = 0; !rc && i < sizeof(pm) / sizeof(pm[0]); i++) {
            json_t *v = percentiles_json(d->stats, pm[i].m);
            rc = v && !json_object_set_new(pcts, pm[i].key, v) ? 0 : -ENOMEM;
        }
    }
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int write_json(FILE *f, const struct report_docset *set)
{
    json_t *root = json_pack("{s:s, s:{s:s, s:s}, s:[]}", "schema", "tokenstorm.report/1", "tool",
                             "name", "tokenstorm", "version", TS_VERSION, "inputs");
    json_t *inputs = root ? json_object_get(root, "inputs") : NULL;
    int rc = inputs ? 0 : -ENOMEM;

    for (size_t i = 0; !rc && i < set->n; i++) {
        json_t *v = doc_digest(&set->docs[i]);
        rc = v && !json_array_append_new(inputs, v) ? 0 : -ENOMEM;
    }
    if (!rc &&
        (json_dumpf(root, f, JSON_INDENT(2) | JSON_REAL_PRECISION(12)) || fputc('\n', f) == EOF))
        rc = -EIO;
    json_decref(root);
    return rc ? rc : (ferror(f) ? -EIO : 0);
}

/* ---- output files ----------------------------------------------------------------- */

/*
 * Writes through PATH.tmp renamed over path, so a reader never sees half a
 * file, and says on stderr what it wrote (or why it could not).
 */
static int write_file(const char *path,
                      int (*fn)(FILE *f, const struct report_docset *set, const void *arg),
                      const struct report_docset *set, const void *arg)
{
    size_t n = strlen(path) + 5;
    char *tmp = ts_malloc(n);
    int rc;

    if (!tmp) {
        fprintf(stderr, "tokenstorm report: %s: out of memory\n", path);
        return -ENOMEM;
    }
    snprintf(tmp, n, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        rc = -errno;
        fprintf(stderr, "tokenstorm report: cannot write %s: %s\n", tmp, strerror(errno));
        ts_free(tmp);
        return rc;
    }
    rc = fn(f, set, arg);
    long size = rc ? -1 : ftell(f);
    if (fclose(f) && !rc)
        rc = -EIO;
    if (!rc && rename(tmp, path)) {
        rc = -errno;
        fprintf(stderr, "tokenstorm report: cannot write %s: %s\n", path, strerror(errno));
    } else if (rc) {
        fprintf(stderr, "tokenstorm report: cannot write %s: %s\n", path, ts_strerror(rc));
    } else {
        fprintf(stderr, "tokenstorm report: wrote %s (%ld bytes)\n", path, size);
    }
    if (rc)
        unlink(tmp);
    ts_free(tmp);
    return rc;
}

static int w_text(FILE *f, const struct report_docset *set, const void *arg)
{
    (void)arg;
    return write_text(f, set);
}

static int w_json(FILE *f, const struct report_docset *set, const void *arg)
{
    (void)arg;
    return write_json(f, set);
}

static int w_stats(FILE *f, const struct report_docset *set, const void *arg)
{
    return report_csv_stats(f, set, *(const enum stat_metric *)arg);
}

static int w_timeline(FILE *f, const struct report_docset *set, const void *arg)
{
    (void)arg;
    return report_csv_timeline(f, set);
}

static int w_sweep(FILE *f, const struct report_docset *set, const void *arg)
{
    (void)arg;
    return report_csv_sweep(f, set);
}

static int w_html(FILE *f, const struct report_docset *set, const void *arg)
{
    const struct buf *page = arg;
    (void)set;
    return fwrite(page->data, 1, page->len, f) == page->len ? 0 : -EIO;
}

static int write_csv_files(const char *prefix, const struct report_docset *set)
{
    static const enum stat_metric e2el = STAT_E2EL, ttft = STAT_TTFT;
    char path[4096];
    size_t len = strlen(prefix);
    int rc;

    if (len > 4 && !strcmp(prefix + len - 4, ".csv"))
        len -= 4; /* "out.csv" means the prefix "out" */
    snprintf(path, sizeof(path), "%.*s_stats.csv", (int)len, prefix);
    if ((rc = write_file(path, w_stats, set, &e2el)))
        return rc;
    snprintf(path, sizeof(path), "%.*s_ttft_stats.csv", (int)len, prefix);
    if ((rc = write_file(path, w_stats, set, &ttft)))
        return rc;
    snprintf(path, sizeof(path), "%.*s_timeline.csv", (int)len, prefix);
    if ((rc = write_file(path, w_timeline, set, NULL)))
        return rc;
    if (report_docset_count(set, REPORT_DOC_SWEEP)) {
        snprintf(path, sizeof(path), "%.*s_sweep.csv", (int)len, prefix);
        if ((rc = write_file(path, w_sweep, set, NULL)))
            return rc;
    }
    return 0;
}

static int write_output(const struct report_opts *o, const struct report_docset *set)
{
    static const enum stat_metric e2el = STAT_E2EL;
    struct buf page;
    int rc = 0;

    switch (o->format) {
    case FMT_TEXT:
        return o->out ? write_file(o->out, w_text, set, NULL) : write_text(stdout, set);
    case FMT_JSON:
        return o->out ? write_file(o->out, w_json, set, NULL) : write_json(stdout, set);
    case FMT_CSV:
        return o->out ? write_csv_files(o->out, set) : report_csv_stats(stdout, set, e2el);
    case FMT_HTML:
        break;
    }
    char when[40];
    struct report_html_opts ho = {
        .title = o->title,
        .generated = ts_wall_format(ts_wall_ns(), when, sizeof(when)),
    };
    buf_init(&page, REPORT_HTML_MAX);
    rc = report_html_build(set, &ho, &page);
    if (rc) {
        fprintf(stderr, "tokenstorm report: cannot build the page: %s\n", ts_strerror(rc));
    } else if (o->out) {
        rc = write_file(o->out, w_html, set, &page);
    } else {
        rc = w_html(stdout, set, &page);
    }
    buf_release(&page);
    return rc;
}

/* ---- main ------------------------------------------------------------------------- */

int cmd_report(int argc, char **argv)
{
    struct report_opts o = {.format = FMT_TEXT};
    struct report_docset set;
    char err[1024];
    int c, rc;

    optind = 1;
    while ((c = cmd_getopt("report", argc, argv, "o:vh", report_options, NULL)) != -1) {
        switch (c) {
        case O_FORMAT:
            if (!strcmp(optarg, "text"))
                o.format = FMT_TEXT;
            else if (!strcmp(optarg, "csv"))
                o.format = FMT_CSV;
            else if (!strcmp(optarg, "json"))
                o.format = FMT_JSON;
            else if (!strcmp(optarg, "html"))
                o.format = FMT_HTML;
            else {
                fprintf(stderr,
                        "tokenstorm report: --format: expected text, csv, json or html; got '%s'\n",
                        optarg);
                return TS_EXIT_USAGE;
            }
            break;
        case O_JSON:
            o.format = FMT_JSON;
            break;
        case 'o':
            o.out = optarg;
            break;
        case O_TITLE:
            o.title = optarg;
            break;
        default: { /* -v, -h, --version, or what cmd_getopt said was wrong */
            int code = cmd_common_flag(c == O_VERSION ? 'V' : c, usage);
            if (code >= 0)
                return code;
            break;
        }
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "tokenstorm report: no input: give a result.json, a sweep.json or a "
                        "result directory (see --help)\n");
        return TS_EXIT_USAGE;
    }
    if (argc - optind > REPORT_PATHS_MAX) {
        fprintf(stderr, "tokenstorm report: too many inputs (at most %d)\n", REPORT_PATHS_MAX);
        return TS_EXIT_USAGE;
    }
    report_docset_init(&set);
    for (int i = optind; i < argc; i++) {
        rc = report_docset_add_path(&set, argv[i], err, sizeof(err));
        if (rc) {
            fprintf(stderr, "tokenstorm report: %s\n", err);
            report_docset_release(&set);
            return TS_EXIT_USAGE;
        }
        ts_debug("report: %s: %zu document(s) so far", argv[i], set.n);
    }
    rc = write_output(&o, &set);
    if (rc && !o.out)
        fprintf(stderr, "tokenstorm report: cannot write the output: %s\n", ts_strerror(rc));
    report_docset_release(&set);
    return rc ? TS_EXIT_FAIL : TS_EXIT_OK;
}
