/*
 * fuzz_slo.c - slo_parse() on arbitrary bytes: it must accept or reject
 * without reading out of bounds, always leave a terminated message, and what
 * it accepts must evaluate and format.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "analysis/slo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char expr[SLO_EXPR_MAX + 64];
    char err[128];
    char out[48];
    struct slo slo;
    struct run_summary sum;
    double actual;

    if (size >= sizeof(expr))
        size = sizeof(expr) - 1;
    memcpy(expr, data, size);
    expr[size] = '\0';

    memset(&sum, 0, sizeof(sum));
    sum.lat[STAT_TTFT].count = 3;
    sum.lat[STAT_TTFT].pct[3] = 12.5;
    sum.error_rate = 0.01;
    sum.goodput_enabled = size & 1;

    if (slo_parse(expr, &slo, err, sizeof(err)) == 0) {
        (void)slo_eval(&slo, &sum, &actual);
        slo_format_value(&slo, actual, out, sizeof(out));
        if (strlen(slo.expr) != strlen(expr))
            __builtin_trap();
    } else if (strnlen(err, sizeof(err)) == sizeof(err) || err[0] == '\0') {
        __builtin_trap();
    }
    /* A tiny buffer must still be terminated. */
    (void)slo_parse(expr, &slo, err, 5);
    if (strnlen(err, 5) == 5)
        __builtin_trap();
    return 0;
}
