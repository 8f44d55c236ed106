/*
 * fuzz_recover.c - recover_result_files() on arbitrary requests.jsonl and
 * latency.hlog text: a killed run's files are read back by report, merge and
 * compare, and whatever the kill (or anyone) left in them must be skipped
 * without crashing or leaking. The input is requests.jsonl; after a line
 * "#hlog" the rest is latency.hlog. The rebuilt document must be an object
 * that says it was recovered, and every line of requests.jsonl must be
 * counted once: used or skipped (a NUL byte or an over-long line must not
 * merge or split lines).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/recover.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char split[] = "\n#hlog\n";

/* Lines as the reader must see them: '\n'-ended, and a last one without it. */
static json_int_t count_lines(const uint8_t *p, size_t n)
{
    json_int_t lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += p[i] == '\n';
    return lines + (n && p[n - 1] != '\n');
}

static void check(const json_t *doc, json_int_t want_lines)
{
    const json_t *rec = json_object_get(doc, "recovered");
    if (!json_is_object(doc) || !json_is_object(rec))
        abort();
    json_int_t lines = json_integer_value(json_object_get(rec, "request_lines"));
    json_int_t skipped = json_integer_value(json_object_get(rec, "skipped_lines"));
    if (lines < 0 || skipped < 0 || lines + skipped != want_lines)
        abort();
    char *text = json_dumps(doc, JSON_COMPACT);
    if (!text)
        abort();
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    json_t *doc = NULL;

    if (size == 0 || size > 1 << 20)
        return 0;
    const uint8_t *cut = memmem(data, size, split, sizeof(split) - 1);
    size_t jlen = cut ? (size_t)(cut - data) : size;
    FILE *requests = jlen ? fmemopen((void *)data, jlen, "r") : NULL;
    FILE *hlog = NULL;
    if (cut && size - jlen > sizeof(split) - 1)
        hlog = fmemopen((void *)(cut + sizeof(split) - 1), size - jlen - (sizeof(split) - 1), "r");
    if (recover_result_files(hlog, requests, "fuzz", &doc, err, sizeof(err)) == 0)
        check(doc, count_lines(data, jlen));
    else if (doc || !err[0])
        abort();
    json_decref(doc);
    if (hlog)
        fclose(hlog);
    if (requests)
        fclose(requests);
    return 0;
}
