/*
 * cancel.c - the --cancel spec and its per-request rolls (cancel.h).
 */
#include "load/cancel.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "base/units.h"

/* The DIST part with every number that has a unit written in seconds, into
 * out. 0 or -EINVAL (an unknown unit, too long). */
static int dist_in_seconds(const char *in, char *out, size_t n, char *err, size_t errlen)
{
    const char *colon = strchr(in, ':');
    size_t o = 0;
    if (!colon) {
        ts_errf(err, errlen, "--cancel: after: expected a distribution (uniform:0.5s-3s), got '%s'",
                in);
        return -EINVAL;
    }
    for (const char *p = in; *p;) {
        bool num = p > colon && (isdigit((unsigned char)*p) || *p == '.');
        if (!num) {
            if (o + 1 >= n)
                goto out_long;
            out[o++] = *p++;
            continue;
        }
        const char *start = p;
        while (isdigit((unsigned char)*p) || *p == '.' ||
               ((*p == 'e' || *p == 'E') && isdigit((unsigned char)p[1])))
            p++;
        while (isalpha((unsigned char)*p))
            p++;
        char tok[64];
        size_t len = (size_t)(p - start);
        if (len >= sizeof tok)
            goto out_long;
        memcpy(tok, start, len);
        tok[len] = '\0';
        double v;
        uint64_t ns;
        if (isalpha((unsigned char)tok[len - 1])) {
            if (units_parse_duration_ns(tok, &ns) != 0) {
                ts_errf(err, errlen, "--cancel: after: '%s' is not a duration (250ms, 1.5s)", tok);
                return -EINVAL;
            }
            v = (double)ns / 1e9;
        } else {
            v = strtod(tok, NULL);
        }
        int w = snprintf(out + o, n - o, "%.9g", v);
        if (w < 0 || (size_t)w >= n - o)
            goto out_long;
        o += (size_t)w;
    }
    out[o] = '\0';
    return 0;
out_long:
    ts_errf(err, errlen, "--cancel: too long");
    return -EINVAL;
}

/* "share:P%" (or a fraction) into *share. */
static int parse_share(const char *s, double *share, char *err, size_t errlen)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s)
        goto out_bad;
    if (*end == '%') {
        v /= 100;
        end++;
    }
    if (*end || !(v >= 0 && v <= 1))
        goto out_bad;
    *share = v;
    return 0;
out_bad:
    ts_errf(err, errlen, "--cancel: share: expected 0%%..100%% (or 0..1), got '%s'", s);
    return -EINVAL;
}

int run_cancel_parse(struct run_cancel *c, const char *spec, char *err, size_t errlen)
{
    char buf[RUN_CANCEL_SPEC_MAX], dist[RUN_CANCEL_SPEC_MAX], msg[256];
    const char *after = NULL, *share = NULL;
    memset(c, 0, sizeof *c);
    c->share = 1;
    if (strlen(spec) >= sizeof buf) {
        ts_errf(err, errlen, "--cancel: too long");
        return -EINVAL;
    }
    snprintf(buf, sizeof buf, "%s", spec);
    /* "share:" ends the distribution (whose own parameters may hold commas) */
    char *sh = strncmp(buf, "share:", 6) == 0 ? buf : strstr(buf, ",share:");
    if (sh) {
        if (*sh == ',')
            *sh++ = '\0';
        share = sh + 6;
        char *comma = strchr(share, ',');
        if (comma) {
            *comma = '\0';
            after = comma + 1;
        }
    }
    if (!after)
        after = sh == buf ? NULL : buf;
    if (!after || strncmp(after, "after:", 6) != 0) {
        ts_errf(err, errlen,
                "--cancel: expected after:DIST[,share:P%%] (after:uniform:0.5s-3s,share:20%%), "
                "got '%s'",
                spec);
        return -EINVAL;
    }
    if (share && parse_share(share, &c->share, err, errlen))
        return -EINVAL;
    if (dist_in_seconds(after + 6, dist, sizeof dist, err, errlen))
        return -EINVAL;
    if (dist_parse(&c->after, dist, msg, sizeof msg) != 0) {
        ts_errf(err, errlen, "--cancel: after: %s", msg);
        return -EINVAL;
    }
    c->on = true;
    return 0;
}

void run_cancel_release(struct run_cancel *c)
{
    if (c->on)
        dist_release(&c->after);
    c->on = false;
}

uint64_t run_cancel_after_ns(const struct run_cancel *c, uint64_t seed, uint64_t index)
{
    struct rng r;
    if (!c->on)
        return 0;
    rng_seed(&r, rng_mix64(seed ^ 0x63616e63656cull) ^ rng_mix64(index + 1));
    if (rng_uniform01(&r) >= c->share)
        return 0;
    double s = dist_sample(&c->after, &r);
    if (!(s > 0))
        return 1; /* at once */
    if (s > 3600)
        s = 3600;
    return (uint64_t)(s * 1e9) + 1;
}
