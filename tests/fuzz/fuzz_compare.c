/*
 * fuzz_compare.c - the parsers of `tokenstorm compare` and `merge` on
 * arbitrary bytes: the first line as a --fail-on rule, a metric name and a
 * result.json time; every later line as a requests.jsonl record. Whatever
 * is accepted must be well formed; rejections must leave a message.
 * compare_report.c is included to reach its static record parser.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "report/compare_report.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char first[COMPARE_RULE_EXPR_MAX + 64], err[256], name[48];
    const uint8_t *nl = memchr(data, '\n', size);
    size_t n = nl ? (size_t)(nl - data) : size;
    struct compare_rule rule;
    struct compare_metric m;
    uint64_t ns;

    if (n >= sizeof(first))
        n = sizeof(first) - 1;
    memcpy(first, data, n);
    first[n] = '\0';
    if (compare_rule_parse(first, &rule, err, sizeof(err)) == 0) {
        if (!isfinite(rule.threshold) || strcmp(rule.expr, first) != 0)
            __builtin_trap();
        compare_metric_name(&rule.metric, name, sizeof(name));
        if (compare_metric_parse(name, strlen(name), &m) != 0 ||
            !compare_metric_equal(&m, &rule.metric))
            __builtin_trap(); /* the canonical name parses back to the same metric */
    } else if (err[0] == '\0' || strnlen(err, sizeof(err)) == sizeof(err)) {
        __builtin_trap();
    }
    if (compare_metric_parse(first, strlen(first), &m) == 0 && m.latency &&
        !(m.mean || (m.pct >= 0 && m.pct <= 100)))
        __builtin_trap();
    (void)runfiles_parse_time(first, &ns);

    size_t off = nl ? (size_t)(nl - data) + 1 : size;
    while (off < size) {
        const uint8_t *end = memchr(data + off, '\n', size - off);
        size_t len = end ? (size_t)(end - (data + off)) : size - off;
        struct compare_req q;
        int r = parse_request((const char *)data + off, len, &q);
        if (r == 1 && (unsigned)q.kind > CMP_REQ_OTHER)
            __builtin_trap();
        off += len + 1;
    }
    return 0;
}
