/*
 * shard.c - shards of a run and --start-at.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "load/shard.h"

/* ---- shards ---- */

int shard_parse(const char *s, struct shard *out, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    unsigned long i = strtoul(s, &end, 10);
    if (end == s || *end != '/' || s[0] == '-' || errno)
        goto bad;
    const char *n_at = end + 1;
    unsigned long n = strtoul(n_at, &end, 10);
    if (end == n_at || *end || n_at[0] == '-' || errno)
        goto bad;
    if (n < 1 || n > SHARD_MAX || i >= n) {
        ts_errf(err, errlen, "shard '%s': need 0 <= i < N <= %u", s, SHARD_MAX);
        return -EINVAL;
    }
    out->index = (uint32_t)i;
    out->count = (uint32_t)n;
    return 0;
bad:
    ts_errf(err, errlen, "shard: expected i/N (like 0/4), got '%s'", s);
    return -EINVAL;
}

uint32_t shard_n(const struct shard *s)
{
    return s->count > 1 ? s->count : 1;
}

bool shard_owns(const struct shard *s, uint64_t g)
{
    return g % shard_n(s) == (s->count > 1 ? s->index : 0);
}

uint32_t shard_worker(const struct shard *s, uint64_t g, uint32_t workers)
{
    return (uint32_t)((g / shard_n(s)) % (workers ? workers : 1));
}

uint64_t shard_global(const struct shard *s, uint64_t k)
{
    return k * shard_n(s) + (s->count > 1 ? s->index : 0);
}

/* ---- --start-at ---- */

/* Reads ".ddd" (up to 9 digits count) at *p into ns; moves *p past it. */
static uint64_t read_fraction(const char **p)
{
    uint64_t ns = 0, scale = 100000000;
    if (**p != '.')
        return 0;
    for ((*p)++; **p >= '0' && **p <= '9'; (*p)++) {
        ns += (uint64_t)(**p - '0') * scale;
        scale /= 10;
    }
    return ns;
}

int start_at_parse(const char *s, uint64_t *wall_ns, char *err, size_t errlen)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    uint64_t secs, frac;
    if (rest) {
        frac = read_fraction(&rest);
        if (strcmp(rest, "Z") && strcmp(rest, "+00:00"))
            goto bad;
        time_t t = timegm(&tm);
        if (t <= 0)
            goto bad;
        secs = (uint64_t)t;
    } else {
        char *end;
        errno = 0;
        if (s[0] < '0' || s[0] > '9')
            goto bad;
        secs = strtoull(s, &end, 10);
        rest = end;
        frac = read_fraction(&rest);
        if (*rest || errno || !secs)
            goto bad;
    }
    uint64_t now_s = ts_wall_ns() / TS_NS_PER_S;
    if (secs > now_s + START_AT_MAX_AHEAD_S) {
        ts_errf(err, errlen, "start time '%s' is more than %d hours ahead", s,
                START_AT_MAX_AHEAD_S / 3600);
        return -EINVAL;
    }
    *wall_ns = secs * TS_NS_PER_S + frac;
    return 0;
bad:
    ts_errf(err, errlen,
            "expected Unix seconds (like $(date -d '+1 min' +%%s)) or an RFC 3339 UTC time "
            "(like 2026-01-01T12:00:00Z), got '%s'",
            s);
    return -EINVAL;
}

uint64_t start_at_wait(uint64_t wall_ns)
{
    uint64_t now = ts_wall_ns();
    if (!wall_ns)
        return 0;
    if (now >= wall_ns)
        return now - wall_ns;
    struct timespec ts = {.tv_sec = (time_t)(wall_ns / TS_NS_PER_S),
                          .tv_nsec = (long)(wall_ns % TS_NS_PER_S)};
    /* EINTR: a signal (Ctrl-C) came; start now and let the run handle it */
    (void)clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL);
    return 0;
}
