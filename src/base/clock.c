#include "clock.h"

#include <stdio.h>
#include <time.h>

uint64_t ts_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * TS_NS_PER_S + (uint64_t)ts.tv_nsec;
}

uint64_t ts_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * TS_NS_PER_S + (uint64_t)ts.tv_nsec;
}

char *ts_wall_format(uint64_t wall_ns, char *out, size_t n)
{
    time_t secs = (time_t)(wall_ns / TS_NS_PER_S);
    unsigned ms = (unsigned)((wall_ns % TS_NS_PER_S) / TS_NS_PER_MS);
    struct tm tm;
    gmtime_r(&secs, &tm);
    snprintf(out, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
    return out;
}
