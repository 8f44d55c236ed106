/*
 * Fuzzes the dataset loaders (dataset_load_mem). The first byte picks the
 * format (ShareGPT, CSV, trace) and the options; the rest is the file. A
 * rejected file must leave the dataset empty and name the file in its
 * message; an accepted one must hold only well-formed conversations: valid
 * UTF-8 strings whose lengths match, at least one turn, counts within the
 * limits, trace offsets in order. The accepted prompts are then fed to the
 * semantic mix, whose summary must be consistent.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/semantic.h"
#include "base/utf8.h"
#include "workload/dataset.h"

#define INPUT_MAX (256 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_str(const char *s, size_t len)
{
    if (!s || strlen(s) != len || utf8_invalid_at(s, len) != len)
        abort();
}

static void check(const struct dataset *d, enum dataset_format f)
{
    if (d->n == 0 || d->format != f)
        abort();
    for (size_t i = 0; i < d->n; i++) {
        const struct dataset_conv *cv = &d->convs[i];
        if (cv->nturns == 0 || cv->nturns > DATASET_MAX_TURNS)
            abort();
        if (cv->system)
            check_str(cv->system, cv->system_len);
        else if (cv->system_len)
            abort();
        for (size_t t = 0; t < cv->nturns; t++) {
            check_str(cv->user[t], cv->user_len[t]);
            if (cv->user_len[t] == 0 && cv->input_tokens == 0)
                abort();
            if (cv->assistant[t])
                check_str(cv->assistant[t], cv->assistant_len[t]);
            else if (cv->assistant_len[t])
                abort();
            if (cv->output_tokens[t] > DATASET_MAX_TOKENS)
                abort();
        }
        if (cv->input_tokens > DATASET_MAX_TOKENS || (cv->nhash > 0) != (cv->hash_ids != NULL))
            abort();
        if (f != DATASET_TRACE && (cv->at_ns || cv->input_tokens || cv->nhash))
            abort();
        if (f == DATASET_TRACE && (cv->nturns != 1 || (i > 0 && cv->at_ns < cv[-1].at_ns)))
            abort();
        if (f == DATASET_TRACE && i == 0 && cv->at_ns != 0)
            abort();
    }
}

static void mix(const struct dataset *d)
{
    struct semantic_cfg cfg = {.max_clusters = 8, .max_samples = 64, .max_text = 64};
    struct semantic *s;
    if (semantic_new(&cfg, &s) != 0)
        abort();
    for (size_t i = 0; i < d->n; i++) {
        const struct dataset_conv *cv = &d->convs[i];
        for (size_t t = 0; t < cv->nturns; t++) {
            if (semantic_add(s, cv->user[t], cv->user_len[t]) != 0)
                abort();
        }
    }
    struct semantic_summary sum;
    semantic_get(s, &sum);
    if (sum.clusters > 8 || sum.clusters > sum.samples || sum.samples > 64 ||
        !(sum.entropy_bits >= 0 && sum.entropy_bits <= 3 + 1e-9) ||
        !(sum.normalized >= 0 && sum.normalized <= 1 + 1e-9) ||
        (sum.samples && !(sum.top_share > 0 && sum.top_share <= 1)))
        abort();
    semantic_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > INPUT_MAX)
        return 0;
    unsigned sel = data[0];
    enum dataset_format f = (enum dataset_format)(sel % 3);
    struct dataset_opts o = {0};
    if (sel & 4)
        o.column = "text";
    if (sel & 8)
        o.output_column = "n";
    if (sel & 16)
        o.time_scale = 0.25;
    struct dataset d;
    char err[256] = "";
    int rc =
        dataset_load_mem(&d, "fuzz", (const char *)data + 1, size - 1, f, &o, err, sizeof(err));
    if (rc != 0) {
        if (d.n != 0 || d.convs != NULL || d.mem.head != NULL || strncmp(err, "fuzz", 4) != 0)
            abort();
        if (rc != TS_PARSE && rc != TS_TOOBIG && rc != -ENOMEM)
            abort();
        return 0;
    }
    check(&d, f);
    mix(&d);
    dataset_release(&d);
    return 0;
}
