/*
 * Fuzzes the spec parsers of src/base: dist_parse() (never with a file: any
 * input naming "empirical" goes to dist_parse_empirical_text() instead), the
 * empirical text parser on the raw bytes, and the units parsers. Accepted
 * distributions are sampled and must stay in their bounds, and their
 * canonical spec must parse back to the same distribution.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/dist.h"
#include "base/units.h"

#define INPUT_MAX 65536

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_dist(const struct dist *d)
{
    struct rng r;
    rng_seed(&r, 1);
    for (int i = 0; i < 16; i++) {
        double x = dist_sample(d, &r);
        if (d->kind == DIST_UNIFORM && !(x >= d->uniform.lo && x <= d->uniform.hi))
            abort();
        if (d->kind == DIST_TRUNCNORMAL && !(x >= d->truncnormal.lo && x <= d->truncnormal.hi))
            abort();
        if (d->kind == DIST_EMPIRICAL && isnan(x))
            abort();
        uint64_t v = dist_sample_uint(d, &r, 3, 1000);
        if (v < 3 || v > 1000)
            abort();
    }
    (void)dist_mean(d);
    char buf[256];
    dist_format(d, buf, sizeof(buf));
    if (d->kind != DIST_EMPIRICAL) {
        struct dist again;
        char err[256];
        if (dist_parse(&again, buf, err, sizeof(err)) != 0)
            abort();
        if (memcmp(&again, d, sizeof(again)) != 0)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > INPUT_MAX)
        return 0;
    char err[256];
    struct dist d;

    if (dist_parse_empirical_text(&d, (const char *)data, size, "fuzz", err, sizeof(err)) == 0) {
        check_dist(&d);
        dist_release(&d);
    }

    char *s = ts_strndup((const char *)data, size);
    if (!s)
        return 0;
    if (strcasestr(s, "empirical")) {
        const char *colon = strchr(s, ':');
        const char *text = colon ? colon + 1 : s;
        if (dist_parse_empirical_text(&d, text, strlen(text), NULL, err, sizeof(err)) == 0) {
            check_dist(&d);
            dist_release(&d);
        }
    } else if (dist_parse(&d, s, err, sizeof(err)) == 0) {
        check_dist(&d);
        dist_release(&d);
    }

    char buf[64];
    uint64_t u;
    double v;
    if (units_parse_duration_ns(s, &u) == 0)
        units_format_duration(u, buf, sizeof(buf));
    if (units_parse_size(s, &u) == 0)
        units_format_size(u, buf, sizeof(buf));
    if (units_parse_rate(s, &v) == 0 && !(v >= 0 && isfinite(v)))
        abort();
    const char *end;
    if (units_scan_number(s, &end, &v) == 0 && (!isfinite(v) || end <= s))
        abort();
    ts_free(s);
    return 0;
}
