/*
 * fuzz_promparse.c - promparse_text() on arbitrary bytes (not NUL-terminated):
 * it must accept or reject without reading out of bounds, report only
 * well-formed names, always leave a terminated message on failure, and
 * respect its limits.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "telemetry/promparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
    size_t samples;
    unsigned sum; /* touches every byte handed out */
};

static bool name_ok(struct promparse_str s, bool metric)
{
    if (!s.len)
        return false;
    for (size_t i = 0; i < s.len; i++) {
        char c = s.p[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                  (metric && c == ':') || (i > 0 && c >= '0' && c <= '9');
        if (!ok)
            return false;
    }
    return true;
}

static int on_sample(const struct promparse_sample *s, void *arg)
{
    struct seen *seen = arg;
    seen->samples++;
    if (!name_ok(s->name, true) || s->nlabels > PROMPARSE_MAX_LABELS || s->line == 0)
        __builtin_trap();
    for (size_t i = 0; i < s->nlabels; i++) {
        if (!name_ok(s->labels[i].name, false))
            __builtin_trap();
        for (size_t k = 0; k < s->labels[i].value.len; k++)
            seen->sum += (unsigned char)s->labels[i].value.p[k];
    }
    return 0;
}

static int on_type(struct promparse_str name, enum promparse_type type, void *arg)
{
    if (!name_ok(name, true) || (unsigned)type > PROMPARSE_INFO)
        __builtin_trap();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct promparse_ops ops = {.on_sample = on_sample, .on_type = on_type};
    struct seen seen = {0};
    char err[128];
    int rc = promparse_text((const char *)data, size, NULL, &ops, &seen, err, sizeof(err));
    if (rc && (rc != TS_PARSE && rc != TS_TOOBIG && rc != -ENOMEM))
        __builtin_trap();
    if (rc && strnlen(err, sizeof(err)) == sizeof(err))
        __builtin_trap();

    /* tight limits must hold */
    struct promparse_limits lim = {.max_line = 32, .max_samples = 3};
    memset(&seen, 0, sizeof(seen));
    rc = promparse_text((const char *)data, size, &lim, &ops, &seen, err, sizeof(err));
    if (seen.samples > 3)
        __builtin_trap();
    return 0;
}
