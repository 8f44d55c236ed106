/*
 * fuzz_result.c - result_read_stats() on arbitrary JSON: result.json files
 * come back from other processes and machines for merge and compare, so the
 * reader must reject anything malformed without crashing or leaking.
 */
#include <stddef.h>
#include <stdint.h>

#include "report/result.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t jerr;
    char err[128];
    struct run_stats *s = NULL;

    if (size > 1 << 20)
        return 0;
    json_t *doc = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc)
        return 0;
    if (result_read_stats(doc, &s, err, sizeof(err)) == 0) {
        struct run_summary sum;
        run_summary_compute(&sum, s, 1.0, 0, NULL);
        run_stats_free(s);
    }
    json_decref(doc);
    return 0;
}
