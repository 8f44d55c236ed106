#include "base/chars.h"
#include "base/units.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NUMBER_MAX_CHARS 64
#define FRAC_DIGITS_MAX  19

/* A non-negative decimal read exactly: int_part + frac / 10^frac_digits. */
struct decimal {
    uint64_t int_part;
    uint64_t frac;
    unsigned frac_digits;
};

static const char *skip_blanks(const char *p)
{
    while (chars_is_space(*p))
        p++;
    return p;
}

/* Unit letters: ASCII letters and the bytes of UTF-8 "µ"/"μ". */
static bool is_unit_char(char c)
{
    unsigned char u = (unsigned char)c;
    return (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || u >= 0x80;
}

/*
 * Reads DIGITS [. DIGITS] or . DIGITS at *p without a sign. Returns 0 and
 * advances *p, or -EINVAL (no digits, or an integer part beyond uint64).
 */
static int decimal_scan(const char **p, struct decimal *d)
{
    const char *s = *p;
    bool any = false;

    d->int_part = 0;
    d->frac = 0;
    d->frac_digits = 0;
    while (chars_is_digit(*s)) {
        unsigned digit = (unsigned)(*s - '0');
        if (d->int_part > (UINT64_MAX - digit) / 10)
            return -EINVAL;
        d->int_part = d->int_part * 10 + digit;
        s++;
        any = true;
    }
    if (*s == '.') {
        if (!chars_is_digit(s[1]))
            return -EINVAL;
        s++;
        while (chars_is_digit(*s)) {
            if (d->frac_digits < FRAC_DIGITS_MAX) {
                d->frac = d->frac * 10 + (uint64_t)(*s - '0');
                d->frac_digits++;
            }
            s++;
        }
        any = true;
    }
    if (!any)
        return -EINVAL;
    *p = s;
    return 0;
}

/* *out = round(d * mult); -EINVAL on overflow. */
static int decimal_scale(const struct decimal *d, uint64_t mult, uint64_t *out)
{
    __uint128_t whole = (__uint128_t)d->int_part * mult;
    __uint128_t pow10 = 1;
    for (unsigned i = 0; i < d->frac_digits; i++)
        pow10 *= 10;
    __uint128_t part = ((__uint128_t)d->frac * mult + pow10 / 2) / pow10;
    __uint128_t sum = whole + part;
    if (sum > UINT64_MAX)
        return -EINVAL;
    *out = (uint64_t)sum;
    return 0;
}

static int add_checked(uint64_t *acc, uint64_t v)
{
    if (*acc > UINT64_MAX - v)
        return -EINVAL;
    *acc += v;
    return 0;
}

struct unit {
    const char *name;
    uint64_t mult;
};

static const struct unit duration_units[] = {
    {"ns", 1ULL},
    {"us", 1000ULL},
    {"\xc2\xb5s", 1000ULL}, /* µs, MICRO SIGN */
    {"\xce\xbcs", 1000ULL}, /* μs, GREEK SMALL LETTER MU */
    {"ms", 1000000ULL},
    {"s", 1000000000ULL},
    {"m", 60ULL * 1000000000ULL},
    {"min", 60ULL * 1000000000ULL},
    {"h", 3600ULL * 1000000000ULL},
    {"d", 86400ULL * 1000000000ULL},
};

static const struct unit size_units[] = {
    {"b", 1ULL},         {"k", 1ULL << 10},   {"kb", 1ULL << 10},  {"kib", 1ULL << 10},
    {"m", 1ULL << 20},   {"mb", 1ULL << 20},  {"mib", 1ULL << 20}, {"g", 1ULL << 30},
    {"gb", 1ULL << 30},  {"gib", 1ULL << 30}, {"t", 1ULL << 40},   {"tb", 1ULL << 40},
    {"tib", 1ULL << 40},
};

/* Finds the unit spelled by the len bytes at s; NULL if none. */
static const struct unit *unit_find(const struct unit *units, size_t count, const char *s,
                                    size_t len, bool nocase)
{
    for (size_t i = 0; i < count; i++) {
        if (strlen(units[i].name) != len)
            continue;
        if (nocase ? strncasecmp(units[i].name, s, len) == 0 : memcmp(units[i].name, s, len) == 0)
            return &units[i];
    }
    return NULL;
}

static size_t unit_span(const char *p)
{
    size_t n = 0;
    while (is_unit_char(p[n]))
        n++;
    return n;
}

int units_parse_duration_ns(const char *s, uint64_t *ns)
{
    if (!s)
        return -EINVAL;
    const char *p = skip_blanks(s);
    uint64_t total = 0;
    int parts = 0;

    while (*p) {
        struct decimal d;
        if (decimal_scan(&p, &d) < 0)
            return -EINVAL;
        p = skip_blanks(p);
        size_t len = unit_span(p);
        uint64_t v;
        if (len == 0) {
            /* A bare number is seconds, and only when it stands alone. */
            if (parts > 0 || *p)
                return -EINVAL;
            if (decimal_scale(&d, 1000000000ULL, &v) < 0)
                return -EINVAL;
            *ns = v;
            return 0;
        }
        const struct unit *u = unit_find(
            duration_units, sizeof(duration_units) / sizeof(duration_units[0]), p, len, false);
        if (!u || decimal_scale(&d, u->mult, &v) < 0 || add_checked(&total, v) < 0)
            return -EINVAL;
        p = skip_blanks(p + len);
        parts++;
    }
    if (parts == 0)
        return -EINVAL;
    *ns = total;
    return 0;
}

int units_parse_size(const char *s, uint64_t *bytes)
{
    if (!s)
        return -EINVAL;
    const char *p = skip_blanks(s);
    struct decimal d;
    if (decimal_scan(&p, &d) < 0)
        return -EINVAL;
    p = skip_blanks(p);
    size_t len = unit_span(p);
    uint64_t mult = 1;
    if (len > 0) {
        const struct unit *u =
            unit_find(size_units, sizeof(size_units) / sizeof(size_units[0]), p, len, true);
        if (!u)
            return -EINVAL;
        mult = u->mult;
        p = skip_blanks(p + len);
    }
    uint64_t v;
    if (*p || decimal_scale(&d, mult, &v) < 0)
        return -EINVAL;
    *bytes = v;
    return 0;
}

static const struct {
    const char *name;
    double seconds;
} rate_units[] = {
    {"s", 1.0},    {"sec", 1.0},     {"second", 1.0}, {"m", 60.0},
    {"min", 60.0}, {"minute", 60.0}, {"h", 3600.0},   {"hour", 3600.0},
};

int units_parse_rate(const char *s, double *per_sec)
{
    if (!s)
        return -EINVAL;
    const char *p = skip_blanks(s);
    if (*p == '+' || *p == '-')
        return -EINVAL;
    double v;
    if (units_scan_number(p, &p, &v) < 0)
        return -EINVAL;
    p = skip_blanks(p);
    if (*p == '/') {
        p = skip_blanks(p + 1);
        size_t len = unit_span(p);
        double seconds = 0.0;
        for (size_t i = 0; i < sizeof(rate_units) / sizeof(rate_units[0]); i++) {
            if (strlen(rate_units[i].name) == len && memcmp(rate_units[i].name, p, len) == 0)
                seconds = rate_units[i].seconds;
        }
        if (seconds == 0.0)
            return -EINVAL;
        v /= seconds;
        p = skip_blanks(p + len);
    }
    if (*p)
        return -EINVAL;
    *per_sec = v;
    return 0;
}

int units_scan_number(const char *s, const char **end, double *out)
{
    const char *p = s;
    char tmp[NUMBER_MAX_CHARS + 1];

    if (!s)
        return -EINVAL;
    if (*p == '+' || *p == '-')
        p++;
    const char *digits = p;
    while (chars_is_digit(*p))
        p++;
    bool any = p > digits;
    if (*p == '.') {
        if (!chars_is_digit(p[1]))
            return -EINVAL;
        p++;
        while (chars_is_digit(*p))
            p++;
        any = true;
    }
    if (!any)
        return -EINVAL;
    if (*p == 'e' || *p == 'E') {
        const char *q = p + 1;
        if (*q == '+' || *q == '-')
            q++;
        if (chars_is_digit(*q)) {
            while (chars_is_digit(*q))
                q++;
            p = q;
        }
    }
    size_t len = (size_t)(p - s);
    if (len > NUMBER_MAX_CHARS)
        return -EINVAL;
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    /* The text is plain decimal; only the decimal point depends on the
     * locale, and tokenstorm never sets LC_NUMERIC. */
    char *e;
    double v = strtod(tmp, &e);
    if (e != tmp + len || !isfinite(v))
        return -EINVAL;
    *out = v;
    *end = p;
    return 0;
}

char *units_format_duration(uint64_t ns, char *buf, size_t n)
{
    static const struct {
        const char *name;
        double ns;
    } steps[] = {
        {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"min", 60e9}, {"h", 3600e9},
    };

    if (n == 0)
        return buf;
    if (ns < 1000) {
        snprintf(buf, n, "%llu ns", (unsigned long long)ns);
        return buf;
    }
    size_t i = 0;
    double v = (double)ns / steps[0].ns;
    /* Move up while the value would print as 1000 or more, or past a minute
     * boundary for seconds and minutes. */
    while (i + 1 < sizeof(steps) / sizeof(steps[0])) {
        double limit =
            (steps[i + 1].ns / steps[i].ns) < 1000.0 ? steps[i + 1].ns / steps[i].ns : 999.5;
        if (v < limit)
            break;
        i++;
        v = (double)ns / steps[i].ns;
    }
    if (v >= 999.5)
        snprintf(buf, n, "%.0f %s", v, steps[i].name);
    else
        snprintf(buf, n, "%.3g %s", v, steps[i].name);
    return buf;
}

char *units_format_size(uint64_t bytes, char *buf, size_t n)
{
    static const char *names[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};

    if (n == 0)
        return buf;
    if (bytes < 1024) {
        snprintf(buf, n, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    size_t i = 0;
    double v = (double)bytes / 1024.0;
    while (v >= 999.5 && i + 1 < sizeof(names) / sizeof(names[0])) {
        v /= 1024.0;
        i++;
    }
    if (v >= 999.5)
        snprintf(buf, n, "%.0f %s", v, names[i]);
    else
        snprintf(buf, n, "%.3g %s", v, names[i]);
    return buf;
}
