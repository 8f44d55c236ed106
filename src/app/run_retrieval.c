/*
 * run_retrieval.c - recall@k of flows' retrieval steps next to the answer
 * quality they led to, in result.json and on the console.
 */
#include "app/run_retrieval.h"

#include <math.h>

#include "base/tsjson.h"
#include "analysis/quality.h"

static double ratio(uint64_t a, uint64_t b)
{
    return b ? (double)a / (double)b : NAN;
}

static double fix_mean(uint64_t sum_fix, uint64_t n)
{
    return n ? (double)sum_fix / (double)QUALITY_FIX / (double)n : NAN;
}

static uint64_t led_answers(const struct run_stats *st, uint64_t *qok)
{
    uint64_t n = 0;
    *qok = 0;
    for (int j = 0; j <= STATS_LED_K_MAX; j++) {
        n += st->by_hits[j].answers;
        *qok += st->by_hits[j].quality_ok;
    }
    return n;
}

static json_t *by_recall_json(const struct run_stats *st, uint32_t k)
{
    json_t *a = json_array();
    for (int j = (int)k; a && k <= STATS_LED_K_MAX && j >= 0; j--) {
        const struct stats_led *b = &st->by_hits[j];
        if (!b->searches && !b->answers)
            continue;
        json_t *o = json_object();
        int rc = tsjson_put(o, "recall", json_real((double)j / (double)k));
        rc |= tsjson_put(o, "hits", json_integer(j));
        rc |= tsjson_put(o, "searches", tsjson_count(b->searches));
        rc |= tsjson_put(o, "answers", tsjson_count(b->answers));
        rc |= tsjson_put(o, "rouge_l_mean", tsjson_num(fix_mean(b->rouge_fix, b->with_ref)));
        rc |= tsjson_put(o, "bleu4_mean", tsjson_num(fix_mean(b->bleu_fix, b->with_ref)));
        rc |= tsjson_put(o, "exact_match_rate", tsjson_num(ratio(b->exact, b->with_ref)));
        rc |= tsjson_put(o, "quality_ok_rate", tsjson_num(ratio(b->quality_ok, b->answers)));
        if (rc || json_array_append_new(a, o)) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

json_t *retrieval_step_json(const struct run_stats *st, const struct traffic *t, uint32_t step)
{
    if (!t->has_flow || step >= t->flow->n || !t->flow->steps[step].retrieval_k)
        return NULL;
    const struct quality_dist *d = &st->recall;
    uint32_t k = st->recall_k ? st->recall_k : t->flow->steps[step].retrieval_k;
    bool any = d->count > 0;
    uint64_t qok, n = led_answers(st, &qok);
    json_t *names = json_array();
    for (uint32_t i = 0; names && i < t->retr.n; i++)
        if (flow_retrieval_is_answer(&t->retr, i) && (t->retr.before[i] >> step & 1))
            json_array_append_new(names, json_string(t->flow->steps[i].name));
    json_t *o = json_object();
    int rc = tsjson_put(o, "k", json_integer(k));
    rc |= tsjson_put(o, "searches", tsjson_count(d->count));
    rc |= tsjson_put(o, "recall_mean", any ? json_real(quality_dist_mean(d)) : json_null());
    rc |= tsjson_put(o, "recall_p5", any ? json_real(quality_dist_percentile(d, 5)) : json_null());
    rc |=
        tsjson_put(o, "recall_p50", any ? json_real(quality_dist_percentile(d, 50)) : json_null());
    rc |= tsjson_put(o, "recall_min", any ? json_real(quality_dist_min(d)) : json_null());
    rc |= tsjson_put(o, "answer_steps", names);
    rc |= tsjson_put(o, "answers", tsjson_count(st->led.requests));
    rc |= tsjson_put(o, "quality_ok_rate", tsjson_num(ratio(qok, n)));
    rc |= tsjson_put(o, "quality", quality_stats_to_json(&st->led, NULL, NULL));
    rc |= tsjson_put(o, "by_recall", by_recall_json(st, k));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static void print_num(FILE *f, double v, int width)
{
    if (isfinite(v))
        fprintf(f, " %*.3f", width, v);
    else
        fprintf(f, " %*s", width, "-");
}

static void print_row(FILE *f, const char *name, uint32_t k, const struct run_stats *st)
{
    const struct quality_dist *d = &st->recall;
    uint64_t qok, n = led_answers(st, &qok);
    const struct quality_stats *q = &st->led;
    fprintf(f, "%-24.24s %4u %9llu", name, k, (unsigned long long)d->count);
    print_num(f, d->count ? quality_dist_mean(d) : NAN, 7);
    print_num(f, d->count ? quality_dist_percentile(&st->recall, 5) : NAN, 7);
    fprintf(f, " %8llu", (unsigned long long)q->requests);
    print_num(f, q->rouge_l.count ? quality_dist_mean(&q->rouge_l) : NAN, 8);
    print_num(f, ratio(q->exact, q->with_ref), 6);
    print_num(f, ratio(qok, n), 10);
    fputc('\n', f);
    for (int j = (int)k; k <= STATS_LED_K_MAX && j >= 0; j--) {
        const struct stats_led *b = &st->by_hits[j];
        if (!b->searches && !b->answers)
            continue;
        char label[48];
        snprintf(label, sizeof(label), "  recall %.3f (%d/%u)", (double)j / (double)k, j, k);
        fprintf(f, "%-29.29s %9llu %15s %8llu", label, (unsigned long long)b->searches, "",
                (unsigned long long)b->answers);
        print_num(f, fix_mean(b->rouge_fix, b->with_ref), 8);
        print_num(f, ratio(b->exact, b->with_ref), 6);
        print_num(f, ratio(b->quality_ok, b->answers), 10);
        fputc('\n', f);
    }
}

void retrieval_print(FILE *f, const struct traffic *t, size_t n, const struct runner_result *res)
{
    bool header = false;
    for (size_t c = 0; c < n && c < res->nclasses; c++) {
        struct run_stats **steps = res->classes[c].steps;
        if (!t[c].has_flow || !t[c].retr.retrievals || !steps)
            continue;
        for (uint32_t s = 0; s < res->classes[c].nsteps && s < t[c].flow->n; s++) {
            const struct flow_step_def *d = &t[c].flow->steps[s];
            if (!d->retrieval_k)
                continue;
            if (!header) {
                fprintf(f, "\nretrieval steps: recall@k of each search against the exact ranking, "
                           "and the\nanswers that followed it (ROUGE-L and exact match against "
                           "the reference)\n");
                fprintf(f, "%-24s %4s %9s %7s %7s %8s %8s %6s %10s\n", "class/step", "k",
                        "searches", "recall", "p5", "answers", "rouge_l", "exact", "quality_ok");
                header = true;
            }
            char name[160];
            snprintf(name, sizeof(name), "%s/%s", t[c].name, d->name);
            const struct run_stats *st = steps[s];
            print_row(f, name, st->recall_k ? st->recall_k : d->retrieval_k, st);
        }
    }
}
