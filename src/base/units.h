/*
 * units.h - numbers with units, as people type them on the command line and
 * in YAML: durations ("250ms", "1h30m"), sizes ("64K", "2GiB"), rates
 * ("10/s", "600/m").
 *
 * Every parser is strict: it accepts optional blanks around the text and
 * between a number and its unit, and rejects everything else with -EINVAL:
 * empty text, garbage, a sign (values cannot be negative), "inf"/"nan",
 * hexadecimal, trailing junk, an unknown unit and any value that does not fit
 * the result. On error the output is left untouched. Decimal fractions are
 * exact for durations and sizes (no float rounding: "0.1s" is 100000000 ns);
 * a result with a fraction of the smallest unit (ns, byte) is rounded to the
 * nearest, halves up. At most 19 fraction digits are significant.
 *
 * Formatting helpers write into a caller's buffer, always NUL-terminate it
 * (truncating if n is short; n == 0 writes nothing) and return buf, so they can
 * be used inside printf arguments. 32 bytes is always enough.
 */
#ifndef TS_BASE_UNITS_H
#define TS_BASE_UNITS_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/*
 * Duration in nanoseconds. A bare number is seconds ("1.5" = 1.5 s).
 * Otherwise one or more NUMBER UNIT parts, summed ("1h30m", "1m 30.5s"), with
 * UNIT one of ns, us (also µs, μs), ms, s, m (minutes; also min), h, d (days;
 * 86400 s). Units are case-sensitive ("M" is rejected, not months or minutes).
 * Returns 0 or -EINVAL (also when the sum exceeds UINT64_MAX ns, ~584 years).
 */
TS_MUST_CHECK int units_parse_duration_ns(const char *s, uint64_t *ns);

/*
 * Size in bytes. A bare number is bytes. Units (case-insensitive) are binary
 * multiples: B; K, KB, KiB = 1024; M, MB, MiB = 1024^2; G, GB, GiB; T, TB, TiB.
 * "1.5K" is 1536. Returns 0 or -EINVAL (also beyond UINT64_MAX).
 */
TS_MUST_CHECK int units_parse_size(const char *s, uint64_t *bytes);

/*
 * Rate in events per second. A bare number is per second; else NUMBER/UNIT
 * with UNIT one of s, sec, m, min, h, hour ("10/s", "600/m", "0.5 / s").
 * Exponents are accepted ("1e3/s"). Zero is accepted (callers that need a
 * positive rate check it). Returns 0 or -EINVAL.
 */
TS_MUST_CHECK int units_parse_rate(const char *s, double *per_sec);

/*
 * The strict decimal number scanner the parsers of this module and dist.c
 * share: [+-]? (DIGITS [. DIGITS] | . DIGITS) [(e|E) [+-]? DIGITS], read from
 * s exactly (no leading blanks skipped), at most 64 characters, finite.
 * On success stores the value and a pointer just past it in *end and returns
 * 0; otherwise returns -EINVAL and leaves both alone. Unlike strtod it does
 * not depend on the locale and rejects "inf", "nan" and hexadecimal.
 */
TS_MUST_CHECK int units_scan_number(const char *s, const char **end, double *out);

/*
 * Human duration with 3 significant digits and the largest fitting unit:
 * "0 ns", "850 ns", "1.25 us", "1.25 ms", "3.4 s", "2.5 min", "1.5 h".
 */
char *units_format_duration(uint64_t ns, char *buf, size_t n);

/* Human size in binary units with 3 significant digits: "512 B", "1.5 KiB", "2 GiB". */
char *units_format_size(uint64_t bytes, char *buf, size_t n);

#endif
