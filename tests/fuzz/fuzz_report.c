/*
 * fuzz_report.c - `tokenstorm report` on arbitrary JSON: a result.json,
 * sweep.json or mirror.json from anywhere goes through the docset checks, then (when
 * accepted) into the HTML page and every CSV table, which read many optional
 * sections leniently. Nothing may crash, leak or loop.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "report/csv.h"
#include "report/docset.h"
#include "report/html.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t jerr;
    char err[512];
    struct report_docset set;
    struct buf page;

    if (size > 1 << 20)
        return 0;
    json_t *doc = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc)
        return 0;
    report_docset_init(&set);
    if (report_docset_add_json(&set, doc, "fuzz", "fuzz.json", NULL, err, sizeof(err)) == 0) {
        buf_init(&page, 64u << 20);
        (void)report_html_build(&set, NULL, &page);
        buf_release(&page);
        FILE *null = fopen("/dev/null", "w");
        if (null) {
            (void)report_csv_stats(null, &set, STAT_E2EL);
            (void)report_csv_timeline(null, &set);
            (void)report_csv_sweep(null, &set);
            fclose(null);
        }
    }
    report_docset_release(&set);
    json_decref(doc);
    return 0;
}
