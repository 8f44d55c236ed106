/*
 * tokenstorm merge - one exact result from the results of several processes
 * or machines of one run. Options and output only; report/merge.c merges.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/slo.h"
#include "base/alloc.h"
#include "base/log.h"
#include "cmd/cmd.h"
#include "cmd/cmd_common.h"
#include "cmd/cmd_opts.h"
#include "report/merge.h"
#include "report/text.h"
#include "ts_config.h"

#define MERGE_MAX_SLOS 64

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tokenstorm merge [OPTIONS] --out DIR INPUT INPUT...\n"
            "       tokenstorm merge [OPTIONS] OUT_DIR INPUT INPUT...\n\n"
            "Merges the results of several processes or machines that ran one load together\n"
            "(each INPUT a result directory or its result.json) into one exact result in\n"
            "OUT_DIR: histograms added, counters summed, duration = the union of the runs'\n"
            "wall-clock spans, timelines aligned on wall-clock seconds, latency.hlog files\n"
            "merged interval by interval and requests.jsonl files concatenated (ids become\n"
            "\"<input index>-<id>\"). The merged percentiles are those of one run over all the\n"
            "requests.\n\n"
            "options:\n"
            "  --out DIR       where the merged result goes (required: --out DIR, or DIR as\n"
            "                  the first operand as before)\n"
            "  --slo EXPR      evaluate an SLO on the merged result (repeatable; exit code 1\n"
            "                  when one fails), e.g. 'ttft.p95<2s', 'error_rate<1%%'\n"
            "  --force         overwrite OUT_DIR/result.json\n"
            "  --json          print the merged result.json instead of the summary\n"
            "  -q, --quiet     no progress or status lines (errors and the result still print)\n"
            "  -v, --verbose   debug logging\n"
            "\nexamples:\n"
            "  tokenstorm merge --out merged/ host1/run host2/run host3/run\n"
            "  tokenstorm merge --slo 'ttft.p99<500ms' all/ results/*-shard*/\n"
            "\nexit codes: 0 ok, 1 an SLO failed, 2 usage error or bad input, 3 cannot write\n");
}

enum { O_SLO = 256, O_FORCE, O_JSON, O_VERSION, O_OUT };

static const struct option merge_options[] = {
    {"slo", required_argument, NULL, O_SLO},
    {"force", no_argument, NULL, O_FORCE},
    {"json", no_argument, NULL, O_JSON},
    {"quiet", no_argument, NULL, 'q'},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, O_VERSION},
    {"out", required_argument, NULL, O_OUT},
    {NULL, 0, NULL, 0},
};

/* Bad input or usage (2), or a failure to write (3). */
static int exit_code_of(int rc)
{
    switch (rc) {
    case -EINVAL:
    case -EEXIST:
    case -ENOENT:
    case -ENOTDIR:
    case -ENAMETOOLONG:
    case TS_PARSE:
    case TS_TOOBIG:
        return TS_EXIT_USAGE;
    default:
        return TS_EXIT_FAIL;
    }
}

int cmd_merge(int argc, char **argv)
{
    struct slo *slos = ts_calloc(MERGE_MAX_SLOS, sizeof(*slos));
    struct merge_cfg cfg = {.slos = slos};
    struct merge_result res;
    bool json = false, quiet = false;
    const char *out_dir = NULL; /* --out, else the first operand */
    char err[1024];
    int c, code = TS_EXIT_OK;

    if (!slos) {
        fprintf(stderr, "tokenstorm merge: out of memory\n");
        return TS_EXIT_FAIL;
    }
    optind = 1;
    while ((c = cmd_getopt("merge", argc, argv, "qvh", merge_options, NULL)) != -1) {
        switch (c) {
        case O_SLO:
            if (cfg.nslos == MERGE_MAX_SLOS) {
                fprintf(stderr, "tokenstorm merge: at most %d --slo\n", MERGE_MAX_SLOS);
                code = TS_EXIT_USAGE;
                goto out;
            }
            if (slo_parse(optarg, &slos[cfg.nslos], err, sizeof(err))) {
                fprintf(stderr, "tokenstorm merge: --slo: %s\n", err);
                code = TS_EXIT_USAGE;
                goto out;
            }
            cfg.nslos++;
            break;
        case O_OUT:
            out_dir = cmd_tidy_dir(optarg);
            break;
        case O_FORCE:
            cfg.force = true;
            break;
        case O_JSON:
            json = true;
            break;
        case 'q':
            quiet = true;
            break;
        default: { /* -v, -h, --version, or what cmd_getopt said was wrong */
            int rc = cmd_common_flag(c == O_VERSION ? 'V' : c, usage);
            if (rc >= 0) {
                code = rc;
                goto out;
            }
            break;
        }
        }
    }
    if (!out_dir && optind < argc)
        out_dir = cmd_tidy_dir(argv[optind++]);
    if (argc - optind < 2) {
        fprintf(stderr, "tokenstorm merge: expected --out DIR and at least two inputs; see "
                        "'tokenstorm merge --help'\n");
        code = TS_EXIT_USAGE;
        goto out;
    }
    int rc = merge_runs((const char *const *)argv + optind, (size_t)(argc - optind), out_dir, &cfg,
                        &res, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "tokenstorm merge: %s\n", err);
        code = exit_code_of(rc);
        goto out;
    }
    for (size_t i = 0; i < res.nnotes; i++)
        fprintf(stderr, "tokenstorm merge: note: %s\n", res.notes[i]);
    size_t failed = 0;
    if (json) {
        if (json_dumpf(res.doc, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(12)) ||
            fputc('\n', stdout) == EOF)
            code = TS_EXIT_FAIL;
        for (size_t i = 0; i < cfg.nslos; i++) {
            double actual;
            failed += !slo_eval(&slos[i], &res.sum, &actual);
        }
    } else {
        if (!quiet) { /* the status line; -q keeps the result, as run -q does */
            printf("merged %zu runs: %llu requests", res.inputs,
                   (unsigned long long)res.stats->requests);
            if (res.wrote_requests)
                printf(", %llu requests.jsonl lines", (unsigned long long)res.request_lines);
            printf("%s\n\n", res.wrote_hlog ? ", latency.hlog merged" : "");
        }
        if (report_text_summary(stdout, res.stats, &res.sum) ||
            (cfg.nslos && report_text_slo(stdout, slos, cfg.nslos, &res.sum, &failed)))
            ts_warn("cannot print the summary");
        printf("\nresults: %s/\n", strcmp(out_dir, "/") ? out_dir : "");
    }
    if (code == TS_EXIT_OK && failed)
        code = TS_EXIT_SLO;
    merge_result_release(&res);
out:
    ts_free(slos);
    return code;
}
