/*
 * csv.c - Locust-like and plain CSV exports (see csv.h).
 */
#include "report/csv.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "base/hdr.h"

static const double locust_pct[] = {50, 66, 75, 80, 90, 95, 98, 99, 99.9, 99.99, 100};
#define NPCT (sizeof(locust_pct) / sizeof(locust_pct[0]))

/* One field, quoted when it must be. */
static void field(FILE *f, const char *s)
{
    if (!s)
        s = "";
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* ,<number> or , (empty) for a non-finite one. */
static void num(FILE *f, double v, int decimals)
{
    fputc(',', f);
    if (isfinite(v))
        fprintf(f, "%.*f", decimals, v);
}

static void ms_or_na(FILE *f, int64_t us, bool have)
{
    if (have)
        fprintf(f, ",%.3f", (double)us / 1000.0);
    else
        fputs(",N/A", f);
}

static void stats_row(FILE *f, const char *name, const struct report_doc *d, enum stat_metric m)
{
    const struct run_summary *s = &d->sum;
    const struct hdr *h = d->stats->hist[m];
    bool have = hdr_total_count(h) > 0;
    uint64_t count = s->completed + s->failed;
    double dur = s->duration_s;
    int64_t vals[NPCT];

    field(f, "POST");
    fputc(',', f);
    field(f, name);
    fprintf(f, ",%" PRIu64 ",%" PRIu64, count, s->failed);
    if (have)
        (void)hdr_values_at_percentiles(h, locust_pct, vals, NPCT);
    ms_or_na(f, have ? hdr_value_at_percentile(h, 50) : 0, have);
    if (have)
        fprintf(f, ",%.3f", hdr_mean(h) / 1000.0);
    else
        fputs(",N/A", f);
    ms_or_na(f, have ? hdr_min(h) : 0, have);
    ms_or_na(f, have ? hdr_max(h) : 0, have);
    num(f, s->completed ? (double)s->total_output_tokens / (double)s->completed : 0, 2);
    num(f, dur > 0 ? (double)count / dur : 0, 4);
    num(f, dur > 0 ? (double)s->failed / dur : 0, 4);
    for (size_t i = 0; i < NPCT; i++)
        ms_or_na(f, have ? vals[i] : 0, have);
    fputc('\n', f);
}

int report_csv_stats(FILE *f, const struct report_docset *set, enum stat_metric m)
{
    char name[512];

    fputs("Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,"
          "Min Response Time,Max Response Time,Average Content Size,Requests/s,Failures/s,"
          "50%,66%,75%,80%,90%,95%,98%,99%,99.9%,99.99%,100%\n",
          f);
    for (size_t i = 0; i < set->n; i++) {
        const struct report_doc *d = &set->docs[i];
        if (d->kind == REPORT_DOC_RESULT) {
            stats_row(f, d->name, d, m);
            continue;
        }
        for (size_t k = 0; k < d->nsteps; k++) {
            if (!d->steps[k].doc)
                continue;
            snprintf(name, sizeof(name), "%s/%s", d->name, d->steps[k].name);
            stats_row(f, name, &d->steps[k], m);
        }
    }
    return ferror(f) ? -EIO : 0;
}

static void timeline_rows(FILE *f, const char *name, const json_t *doc)
{
    static const char *const ints[] = {"sent",      "completed",     "errors",
                                       "in_flight", "output_tokens", "chunks"};
    static const char *const ms[] = {"ttft_p50_ms", "ttft_p99_ms", "e2el_p50_ms", "lag_p99_ms"};
    const json_t *pt;
    size_t i;

    json_array_foreach(report_json_arr(doc, "timeline"), i, pt)
    {
        field(f, name);
        num(f, report_json_num(pt, "t_s"), 3);
        for (size_t k = 0; k < sizeof(ints) / sizeof(ints[0]); k++)
            num(f, report_json_num(pt, ints[k]), 0);
        for (size_t k = 0; k < sizeof(ms) / sizeof(ms[0]); k++)
            num(f, report_json_num(pt, ms[k]), 3);
        fputc('\n', f);
    }
}

int report_csv_timeline(FILE *f, const struct report_docset *set)
{
    char name[512];

    fputs("Name,t_s,sent,completed,errors,in_flight,output_tokens,chunks,ttft_p50_ms,"
          "ttft_p99_ms,e2el_p50_ms,lag_p99_ms\n",
          f);
    for (size_t i = 0; i < set->n; i++) {
        const struct report_doc *d = &set->docs[i];
        if (d->kind == REPORT_DOC_RESULT) {
            timeline_rows(f, d->name, d->doc);
            continue;
        }
        for (size_t k = 0; k < d->nsteps; k++) {
            if (!d->steps[k].doc)
                continue;
            snprintf(name, sizeof(name), "%s/%s", d->name, d->steps[k].name);
            timeline_rows(f, name, d->steps[k].doc);
        }
    }
    return ferror(f) ? -EIO : 0;
}

static void bool_cell(FILE *f, const json_t *v)
{
    fputc(',', f);
    if (json_is_boolean(v))
        fputs(json_is_true(v) ? "true" : "false", f);
}

int report_csv_sweep(FILE *f, const struct report_docset *set)
{
    static const char *const cols[] = {"load",        "offered",     "achieved_rps", "output_tps",
                                       "goodput_rps", "ttft_p50_ms", "ttft_p99_ms",  "tpot_p50_ms",
                                       "tpot_p99_ms", "e2el_p50_ms", "e2el_p99_ms",  "error_rate"};
    static const char *const qcols[] = {"rouge_l_mean", "bleu4_mean", "exact_match_rate"};

    fputs("Name,dir,load,offered,achieved_rps,output_tps,goodput_rps,ttft_p50_ms,ttft_p99_ms,"
          "tpot_p50_ms,tpot_p99_ms,e2el_p50_ms,e2el_p99_ms,error_rate,slo_pass,saturated,"
          "rouge_l_mean,bleu4_mean,exact_match_rate\n",
          f);
    for (size_t i = 0; i < set->n; i++) {
        const struct report_doc *d = &set->docs[i];
        const json_t *st;
        size_t k;
        if (d->kind != REPORT_DOC_SWEEP)
            continue;
        json_array_foreach(report_json_arr(d->doc, "steps"), k, st)
        {
            field(f, d->name);
            fputc(',', f);
            field(f, report_json_str(st, "dir"));
            for (size_t c = 0; c < sizeof(cols) / sizeof(cols[0]); c++)
                num(f, report_json_num(st, cols[c]), 6);
            bool_cell(f, json_object_get(st, "slo_pass"));
            bool_cell(f, json_object_get(st, "saturated"));
            const json_t *q = report_json_obj(st, "quality");
            for (size_t c = 0; c < sizeof(qcols) / sizeof(qcols[0]); c++)
                num(f, report_json_num(q, qcols[c]), 6);
            fputc('\n', f);
        }
    }
    return ferror(f) ? -EIO : 0;
}
