/*
 * Fuzzes src/workload/perturb: the first line of the input is a perturbation
 * spec, the rest the text. Accepted specs must format and parse back to the
 * same set; every item, alone and chained, must stay within the output cap,
 * and keep valid UTF-8 valid unless invalid_utf8 is applied.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/utf8.h"
#include "llm/text.h"
#include "workload/perturb.h"

#define INPUT_MAX 16384
#define OUT_CAP   (256u << 10)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct perturb_set *set, uint32_t mask, const char *text, size_t len,
                  bool valid, uint64_t seed)
{
    struct buf out;
    buf_init(&out, OUT_CAP);
    int rc = perturb_set_apply(set, mask, text, len, seed, &out);
    if (rc != 0 && rc != TS_TOOBIG && rc != -EINVAL)
        abort();
    if (out.len > OUT_CAP)
        abort();
    bool broken = false;
    for (size_t i = 0; i < set->n; i++)
        if ((mask >> i) & 1 && set->v[i].kind == PERTURB_INVALID_UTF8)
            broken = true;
    if (rc == 0 && valid && !broken &&
        utf8_invalid_at(out.data ? out.data : "", out.len) != out.len)
        abort();
    buf_release(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > INPUT_MAX)
        return 0;
    const char *nl = memchr(data, '\n', size);
    size_t slen = nl ? (size_t)(nl - (const char *)data) : size;
    char *spec = ts_strndup((const char *)data, slen);
    if (!spec)
        return 0;
    const char *text = nl ? nl + 1 : "";
    size_t len = nl ? size - slen - 1 : 0;
    bool valid = utf8_invalid_at(text, len) == len;
    uint64_t seed = text_hash((const char *)data, size, 1);

    struct perturb_set set;
    char err[256];
    if (perturb_set_parse(&set, spec, err, sizeof(err)) == 0) {
        struct buf f;
        buf_init(&f, PERTURB_SPEC_MAX * 2);
        if (perturb_set_format(&set, &f) != 0)
            abort();
        struct perturb_set again;
        if (perturb_set_parse(&again, buf_cstr(&f), err, sizeof(err)) != 0 || again.n != set.n ||
            memcmp(again.v, set.v, set.n * sizeof(set.v[0])) != 0)
            abort();
        buf_release(&f);
        for (size_t i = 0; i < set.n; i++)
            check(&set, 1u << i, text, len, valid, seed);
        struct rng r;
        rng_seed(&r, seed);
        check(&set, perturb_pick(&set, &r), text, len, valid, seed);
        check(&set, (1u << set.n) - 1, text, len, valid, seed);
    }

    /* injection into passages cut from the text */
    const char *passages[2] = {text, text + len / 2};
    size_t lens[2] = {len / 2, len - len / 2};
    struct buf out;
    size_t which = 9;
    buf_init(&out, OUT_CAP);
    if (perturb_inject(passages, lens, 2, seed, &which, &out) == 0 &&
        (which > 1 || out.len != lens[which] + strlen(PERTURB_INJECTION_TEXT)))
        abort();
    buf_release(&out);
    buf_init(&out, OUT_CAP);
    if (perturb_whitespace_span(text, len, seed % (len + 1), seed % (len + 7), seed, &out) == 0 &&
        valid && utf8_invalid_at(buf_cstr(&out), out.len) != out.len)
        abort();
    buf_release(&out);
    ts_free(spec);
    return 0;
}
