/*
 * clock.h - time for measurements (monotonic ns) and for files (wall clock).
 *
 * Durations are always measured with ts_now_ns() (CLOCK_MONOTONIC, the same
 * clock uv_hrtime() reads). Wall-clock time is only for timestamps written to
 * files, never for durations.
 */
#ifndef TS_BASE_CLOCK_H
#define TS_BASE_CLOCK_H

#include <stddef.h>
#include <stdint.h>

#define TS_NS_PER_US 1000ull
#define TS_NS_PER_MS 1000000ull
#define TS_NS_PER_S  1000000000ull

/* Monotonic nanoseconds since an arbitrary origin. */
uint64_t ts_now_ns(void);
/* Wall clock: nanoseconds since the Unix epoch. */
uint64_t ts_wall_ns(void);
/* Formats a wall-clock time as RFC 3339 UTC with milliseconds into out
 * ("2026-11-29T17:31:48.123Z"); returns out. n >= 25. */
char *ts_wall_format(uint64_t wall_ns, char *out, size_t n);

#endif
