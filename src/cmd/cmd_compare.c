/*
 * tokenstorm compare - did a run change against a baseline, significantly,
 * and is that a regression? Options and output only; the statistics are in
 * analysis/compare.c, loading and writing in report/compare_report.c.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/compare.h"
#include "base/alloc.h"
#include "base/log.h"
#include "cmd/cmd.h"
#include "cmd/cmd_common.h"
#include "cmd/cmd_opts.h"
#include "report/compare_report.h"
#include "ts_config.h"

#define COMPARE_MAX_RULES 64

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tokenstorm compare [OPTIONS] BASE NEW\n\n"
            "Compares two runs (each a result.json or its result directory) metric by metric:\n"
            "TTFT, TPOT, ITL and E2EL (p50, p90, p99, mean), throughput, output tokens/s, goodput\n"
            "and error rate. For each: both values, the change, a bootstrap confidence interval\n"
            "of the change (over the requests when both runs have requests.jsonl, else over\n"
            "the histograms), and a Mann-Whitney U test for latency distributions.\n"
            "When the runs were configured differently (rate, seed, timeouts, host, version,\n"
            "...) it warns on stderr, KEY: BASE -> NEW per key, and lists them in the JSON\n"
            "(config_diff) and HTML reports.\n\n"
            "options:\n"
            "  --fail-on RULE      a regression threshold (repeatable): METRIC[.STAT] OP CHANGE,\n"
            "                      e.g. 'ttft.p95>+10%%', 'e2el.p99>+50ms', 'throughput<-5%%',\n"
            "                      'error_rate>+1pp', 'recall<-2pp' (vector searches' recall@k;\n"
            "                      also recall_p5); it fails only when the change is also\n"
            "                      significant. Exit code 1 when one fails.\n"
            "  --no-significance   rules fail on the change alone\n"
            "  --alpha A           significance level (default 0.05: 95%% intervals)\n"
            "  --test T            significant when: ci (the interval excludes 0, default),\n"
            "                      mwu (Mann-Whitney p < alpha), both, either\n"
            "  --resamples N       bootstrap resamples, 100..100000 (default 2000)\n"
            "  --seed N            bootstrap seed (default 1): the same seed, the same intervals\n"
            "  --no-requests       ignore requests.jsonl; resample the histograms\n"
            "  --format F          text (default), json or html\n"
            "  --json              the same as --format json\n"
            "  -o, --out FILE      write the report to FILE (default: stdout)\n"
            "  -v, --verbose       debug logging\n"
            "\nexamples:\n"
            "  tokenstorm compare results/baseline results/today\n"
            "  tokenstorm compare base/result.json new/result.json --fail-on 'ttft.p95>+10%%' \\\n"
            "      --fail-on 'throughput<-5%%'\n"
            "  tokenstorm compare base new --format html -o compare.html\n"
            "\nexit codes: 0 no regression, 1 a --fail-on rule failed, 2 usage error or bad "
            "input,\n            3 the report could not be written\n");
}

enum {
    O_FAIL_ON = 256,
    O_NO_SIG,
    O_ALPHA,
    O_TEST,
    O_RESAMPLES,
    O_SEED,
    O_NO_REQUESTS,
    O_FORMAT,
    O_VERSION,
    O_JSON,
};

static const struct option compare_options[] = {
    {"fail-on", required_argument, NULL, O_FAIL_ON},
    {"no-significance", no_argument, NULL, O_NO_SIG},
    {"alpha", required_argument, NULL, O_ALPHA},
    {"test", required_argument, NULL, O_TEST},
    {"resamples", required_argument, NULL, O_RESAMPLES},
    {"seed", required_argument, NULL, O_SEED},
    {"no-requests", no_argument, NULL, O_NO_REQUESTS},
    {"format", required_argument, NULL, O_FORMAT},
    {"json", no_argument, NULL, O_JSON},
    {"out", required_argument, NULL, 'o'},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, O_VERSION},
    {NULL, 0, NULL, 0},
};

enum out_format { FMT_TEXT, FMT_JSON, FMT_HTML };

struct compare_opts {
    struct compare_cfg cfg;
    struct compare_rule rules[COMPARE_MAX_RULES];
    size_t nrules;
    enum out_format format;
    const char *out;
    const char *base, *new_;
};

static int parse_u64(const char *opt, const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v > max) {
        fprintf(stderr, "tokenstorm compare: %s: expected a whole number up to %llu, got '%s'\n",
                opt, (unsigned long long)max, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* Returns -1 to go on, or the exit code to return. */
static int parse_args(int argc, char **argv, struct compare_opts *o)
{
    char err[256];
    uint64_t v;
    int c;

    memset(o, 0, sizeof(*o));
    o->cfg.seed = 1;
    optind = 1;
    while ((c = cmd_getopt("compare", argc, argv, "o:vh", compare_options, NULL)) != -1) {
        switch (c) {
        case O_FAIL_ON:
            if (o->nrules == COMPARE_MAX_RULES) {
                fprintf(stderr, "tokenstorm compare: at most %d --fail-on\n", COMPARE_MAX_RULES);
                return TS_EXIT_USAGE;
            }
            if (compare_rule_parse(optarg, &o->rules[o->nrules], err, sizeof(err))) {
                fprintf(stderr, "tokenstorm compare: %s\n", err);
                return TS_EXIT_USAGE;
            }
            o->nrules++;
            break;
        case O_NO_SIG:
            o->cfg.no_significance = true;
            break;
        case O_ALPHA: {
            char *end;
            double a = strtod(optarg, &end);
            if (end == optarg || *end || !(a > 0 && a <= 0.5)) {
                fprintf(stderr,
                        "tokenstorm compare: --alpha: expected a number in (0, 0.5], "
                        "got '%s'\n",
                        optarg);
                return TS_EXIT_USAGE;
            }
            o->cfg.alpha = a;
            break;
        }
        case O_TEST:
            if (!strcmp(optarg, "ci"))
                o->cfg.test = CMP_TEST_CI;
            else if (!strcmp(optarg, "mwu"))
                o->cfg.test = CMP_TEST_MWU;
            else if (!strcmp(optarg, "both"))
                o->cfg.test = CMP_TEST_BOTH;
            else if (!strcmp(optarg, "either"))
                o->cfg.test = CMP_TEST_EITHER;
            else {
                fprintf(stderr, "tokenstorm compare: --test: expected ci, mwu, both or either\n");
                return TS_EXIT_USAGE;
            }
            break;
        case O_RESAMPLES:
            if (parse_u64("--resamples", optarg, COMPARE_MAX_RESAMPLES, &v))
                return TS_EXIT_USAGE;
            if (v < 100) {
                fprintf(stderr, "tokenstorm compare: --resamples: at least 100\n");
                return TS_EXIT_USAGE;
            }
            o->cfg.resamples = (uint32_t)v;
            break;
        case O_SEED:
            if (parse_u64("--seed", optarg, UINT64_MAX, &o->cfg.seed))
                return TS_EXIT_USAGE;
            break;
        case O_NO_REQUESTS:
            o->cfg.method = CMP_METHOD_HISTOGRAMS;
            break;
        case O_FORMAT:
            if (!strcmp(optarg, "text"))
                o->format = FMT_TEXT;
            else if (!strcmp(optarg, "json"))
                o->format = FMT_JSON;
            else if (!strcmp(optarg, "html"))
                o->format = FMT_HTML;
            else {
                fprintf(stderr, "tokenstorm compare: --format: expected text, json or html\n");
                return TS_EXIT_USAGE;
            }
            break;
        case O_JSON:
            o->format = FMT_JSON;
            break;
        case 'o':
            o->out = optarg;
            break;
        default: { /* -v, -h, --version, or what cmd_getopt said was wrong */
            int rc = cmd_common_flag(c == O_VERSION ? 'V' : c, usage);
            if (rc >= 0)
                return rc;
            break;
        }
        }
    }
    if (argc - optind != 2) {
        fprintf(stderr, "tokenstorm compare: expected two runs, BASE and NEW (see --help)\n");
        return TS_EXIT_USAGE;
    }
    o->base = argv[optind];
    o->new_ = argv[optind + 1];
    return -1;
}

/* Writes the report in the chosen format; 0 or -1 (reported). */
static int write_report(const struct compare_opts *o, const struct compare_input *base,
                        const struct compare_input *new_, const struct compare_result *res)
{
    FILE *f = o->out ? fopen(o->out, "w") : stdout;
    int rc = 0;

    if (!f) {
        fprintf(stderr, "tokenstorm compare: %s: %s\n", o->out, strerror(errno));
        return -1;
    }
    if (o->format == FMT_TEXT) {
        rc = compare_write_text(f, base, new_, res, o->rules);
    } else if (o->format == FMT_JSON) {
        json_t *doc = NULL;
        rc = compare_build_json(base, new_, res, o->rules, &doc);
        if (!rc)
            rc = json_dumpf(doc, f, JSON_INDENT(2) | JSON_REAL_PRECISION(12)) ? -EIO : 0;
        if (!rc && fputc('\n', f) == EOF)
            rc = -EIO;
        json_decref(doc);
    } else {
        struct buf b;
        buf_init(&b, (size_t)64 << 20);
        rc = compare_build_html(base, new_, res, o->rules, &b);
        if (!rc && fwrite(b.data, 1, b.len, f) != b.len)
            rc = -EIO;
        buf_release(&b);
    }
    if (fflush(f) || ferror(f))
        rc = rc ? rc : -EIO;
    if (o->out && fclose(f))
        rc = rc ? rc : -EIO;
    if (rc) {
        fprintf(stderr, "tokenstorm compare: cannot write the report%s%s: %s\n",
                o->out ? " to " : "", o->out ? o->out : "", ts_strerror(rc));
        return -1;
    }
    return 0;
}

/* The runs' configurations differ: say how on stderr (the reports say it too). */
static void warn_config_diff(const struct compare_input *base, const struct compare_input *new_)
{
    json_t *diff = NULL;
    if (compare_config_diff(base, new_, &diff) || compare_write_config_warning(stderr, diff))
        fprintf(stderr, "tokenstorm compare: cannot compare the runs' configurations\n");
    json_decref(diff);
}

int cmd_compare(int argc, char **argv)
{
    struct compare_opts *o = ts_calloc(1, sizeof(*o));
    struct compare_input base, new_;
    struct compare_result res;
    char err[512];
    int code;

    if (!o) {
        fprintf(stderr, "tokenstorm compare: out of memory\n");
        return TS_EXIT_FAIL;
    }
    if ((code = parse_args(argc, argv, o)) >= 0)
        goto out;
    bool want = o->cfg.method == CMP_METHOD_AUTO;
    if (compare_input_load(&base, o->base, want, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm compare: %s\n", err);
        code = TS_EXIT_USAGE;
        goto out;
    }
    if (compare_input_load(&new_, o->new_, want, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm compare: %s\n", err);
        code = TS_EXIT_USAGE;
        goto out_base;
    }
    warn_config_diff(&base, &new_);
    int rc = compare_runs(&base.run, &new_.run, &o->cfg, o->rules, o->nrules, &res);
    if (rc) {
        fprintf(stderr, "tokenstorm compare: %s\n", ts_strerror(rc));
        code = rc == -EINVAL ? TS_EXIT_USAGE : TS_EXIT_FAIL;
        goto out_new;
    }
    if (write_report(o, &base, &new_, &res))
        code = TS_EXIT_FAIL;
    else
        code = res.regression ? TS_EXIT_SLO : TS_EXIT_OK;
    compare_result_release(&res);
out_new:
    compare_input_release(&new_);
out_base:
    compare_input_release(&base);
out:
    ts_free(o);
    return code;
}
