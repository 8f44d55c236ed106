#include "app/run_quality.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/slo.h"
#include "base/err.h"

void run_quality_init(struct run_quality_opts *q)
{
    memset(q, 0, sizeof(*q));
    q->target.rouge_l_min = 0.5; /* a quality-ok answer, unless --quality-min says otherwise */
    q->dual.window = 50;
    q->dual.quality_target = 0.9;
    q->dual.latency_target = 0.9;
    q->cons.threshold = 0.8;
}

static int parse_number(const char *s, double lo, double hi, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || (*end && *end != '%') || (*end == '%' && end[1]) || !(v >= lo))
        return -EINVAL;
    if (*end == '%')
        v /= 100;
    if (v > hi)
        return -EINVAL;
    *out = v;
    return 0;
}

/* Splits "a=1,b=2" (or "a:1 b") into items; calls fn(key, value) for each. */
static int each_item(char *spec, int (*fn)(void *ctx, char *key, char *value), void *ctx)
{
    char *save = NULL;
    for (char *tok = strtok_r(spec, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
        char *sep = strpbrk(tok, "=:");
        char *value = NULL;
        if (sep) {
            *sep = '\0';
            value = sep + 1;
        }
        int rc = fn(ctx, tok, value);
        if (rc)
            return rc;
    }
    return 0;
}

static int min_item(void *ctx, char *key, char *value)
{
    struct quality_target *t = ctx;
    if (!strcmp(key, "rouge_l") && value)
        return parse_number(value, 0, 1, &t->rouge_l_min);
    if (!strcmp(key, "bleu4") && value)
        return parse_number(value, 0, 1, &t->bleu4_min);
    if (!strcmp(key, "exact") && !value)
        return t->exact = true, 0;
    if (!strcmp(key, "regex") && !value)
        return t->regex = true, 0;
    if (!strcmp(key, "json") && !value)
        return t->json = true, 0;
    return -EINVAL;
}

static int dual_item(void *ctx, char *key, char *value)
{
    struct dual_sla_cfg *d = ctx;
    double v;
    if (!value || parse_number(value, 0, 1e9, &v))
        return -EINVAL;
    if (!strcmp(key, "window") && v >= 1 && v <= 1e6 && v == (double)(uint32_t)v)
        return d->window = (uint32_t)v, 0;
    if (!strcmp(key, "quality") && v <= 1)
        return d->quality_target = v, 0;
    if (!strcmp(key, "latency") && v <= 1)
        return d->latency_target = v, 0;
    return -EINVAL;
}

static int cons_item(void *ctx, char *key, char *value)
{
    struct consistency_cfg *c = ctx;
    double v;
    if (!value || parse_number(value, -1, 1e9, &v))
        return -EINVAL;
    if (!strcmp(key, "threshold") && v <= 1)
        return c->threshold = v, 0;
    if (!strcmp(key, "window") && v >= 1 && v <= 1e6)
        return c->window = (uint32_t)v, 0;
    if (!strcmp(key, "k") && v >= 1 && v <= 1e6)
        return c->k = (uint32_t)v, 0;
    return -EINVAL;
}

int run_quality_option(struct run_quality_opts *q, const char *name, const char *arg, char *err,
                       size_t errlen)
{
    char copy[512];
    if (arg && strlen(arg) >= sizeof(copy)) {
        ts_errf(err, errlen, "--%s: too long", name);
        return -EINVAL;
    }
    snprintf(copy, sizeof(copy), "%s", arg ? arg : "");
    if (!strcmp(name, "quality-regex")) {
        q->regex = arg;
        return 1;
    }
    if (!strcmp(name, "quality-json")) {
        q->json = true;
        if (!arg || !*arg)
            return 1;
        snprintf(q->json_keys_buf, sizeof(q->json_keys_buf), "%s", arg);
        char *save = NULL;
        for (char *k = strtok_r(q->json_keys_buf, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
            if (q->njson_keys == RUN_QUALITY_MAX_KEYS) {
                ts_errf(err, errlen, "--quality-json: at most %d keys", RUN_QUALITY_MAX_KEYS);
                return -EINVAL;
            }
            q->json_keys[q->njson_keys++] = k;
        }
        return 1;
    }
    if (!strcmp(name, "quality-min")) {
        memset(&q->target, 0, sizeof(q->target));
        q->target_set = true;
        if (each_item(copy, min_item, &q->target)) {
            ts_errf(err, errlen,
                    "--quality-min '%s': expected items like rouge_l:0.5, bleu4:0.2, exact, "
                    "regex, json",
                    arg);
            return -EINVAL;
        }
        return 1;
    }
    if (!strcmp(name, "dual-sla")) {
        q->dual_sla = true;
        if (each_item(copy, dual_item, &q->dual)) {
            ts_errf(err, errlen,
                    "--dual-sla '%s': expected window=N,quality=SHARE,latency=SHARE "
                    "(shares 0..1 or %%)",
                    arg);
            return -EINVAL;
        }
        return 1;
    }
    if (!strcmp(name, "consistency")) {
        q->consistency = true;
        if (arg && each_item(copy, cons_item, &q->cons)) {
            ts_errf(err, errlen, "--consistency '%s': expected threshold=S,window=N,k=K", arg);
            return -EINVAL;
        }
        return 1;
    }
    return 0;
}

int run_quality_apply(struct run_quality_opts *q, struct runner_config *cfg, char *err,
                      size_t errlen)
{
    if (q->regex) {
        char msg[256];
        if (quality_regex_new(q->regex, 0, msg, sizeof(msg), &q->compiled)) {
            ts_errf(err, errlen, "--quality-regex: %s", msg);
            return -EINVAL;
        }
        cfg->quality.cfg.regex = q->compiled;
    }
    cfg->quality.cfg.json = q->json;
    cfg->quality.cfg.json_keys = q->json_keys;
    cfg->quality.cfg.json_nkeys = q->njson_keys;
    cfg->quality.cfg.json_flags = QUALITY_JSON_STRIP_FENCE;
    cfg->quality.checks = q->regex || q->json;
    cfg->quality.target = q->target;
    if (!q->target_set) {
        /* by default the checks that are on must pass too */
        cfg->quality.target.regex = q->regex != NULL;
        cfg->quality.target.json = q->json;
    }
    cfg->quality.dual_sla = q->dual_sla;
    cfg->quality.dual = q->dual;
    cfg->quality.consistency = q->consistency;
    cfg->quality.cons = q->cons;
    return 0;
}

void run_quality_release(struct run_quality_opts *q)
{
    quality_regex_free(q->compiled);
    q->compiled = NULL;
}

/* True when arg is the option name, alone or as "name=value". */
static bool is_opt(const char *arg, const char *name)
{
    size_t l = strlen(name);
    return !strncmp(arg, name, l) && (arg[l] == '\0' || arg[l] == '=');
}

static bool ends_with(const char *s, const char *tail)
{
    size_t l = strlen(s), t = strlen(tail);
    return l > t && !strcmp(s + l - t, tail);
}

unsigned run_args_slo_have(const char *const *args, size_t n)
{
    static const struct {
        const char *opt;
        unsigned gives;
    } opts[] = {
        {"--goodput", SLO_NEEDS_GOODPUT},         {"--quality-regex", SLO_NEEDS_REGEX},
        {"--quality-json", SLO_NEEDS_JSON},       {"--dual-sla", SLO_NEEDS_DUAL_SLA},
        {"--consistency", SLO_NEEDS_CONSISTENCY}, {"--prompts", SLO_NEEDS_REFERENCE},
    };
    unsigned have = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < sizeof(opts) / sizeof(opts[0]); k++)
            if (is_opt(args[i], opts[k].opt))
                have |= opts[k].gives;
        if (args[i][0] != '-' && (ends_with(args[i], ".yaml") || ends_with(args[i], ".yml")))
            have |= SLO_NEEDS_REFERENCE;
    }
    return have;
}

const char *run_slo_lack(unsigned lack)
{
    if (lack & SLO_NEEDS_GOODPUT)
        return "--goodput (e.g. --goodput 'ttft:500 e2el:5000')";
    if (lack & SLO_NEEDS_REFERENCE)
        return "reference answers: a --prompts file whose lines have \"reference\" "
               "(docs/QUALITY.md)";
    if (lack & SLO_NEEDS_REGEX)
        return "--quality-regex";
    if (lack & SLO_NEEDS_JSON)
        return "--quality-json";
    if (lack & SLO_NEEDS_DUAL_SLA)
        return "--dual-sla";
    if (lack & SLO_NEEDS_CONSISTENCY)
        return "--consistency";
    if (lack & SLO_NEEDS_PROXY)
        return "chaos proxies: it is judged by `tokenstorm chaos` from a proxy's GET /chain "
               "(docs/CHAOS.md)";
    return NULL;
}
