#include "hlog.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"

#define LEGEND                                                                                     \
    "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
#define VERSION_PREFIX    "#[Histogram log format version "
#define START_TIME_PREFIX "#[StartTime: "
#define BASE_TIME_PREFIX  "#[BaseTime: "
#define TAG_PREFIX        "Tag="
/* 9999-12-31T23:59:59Z: beyond it the human date would not be a date. */
#define MAX_EPOCH_SECONDS 253402300799.0

bool hlog_tag_valid(const char *tag)
{
    size_t n = 0;
    for (; tag[n]; n++) {
        unsigned char c = (unsigned char)tag[n];
        if (c <= ' ' || c > '~' || c == ',' || n >= HLOG_TAG_MAX)
            return false;
    }
    return n > 0;
}

/* ---- Writer ---------------------------------------------------------- */

void hlog_writer_init(struct hlog_writer *w, FILE *f, double max_unit_ratio)
{
    w->f = f;
    w->max_unit_ratio =
        max_unit_ratio > 0.0 && isfinite(max_unit_ratio) ? max_unit_ratio : HLOG_RATIO_US_TO_MS;
}

static bool epoch_valid(double t)
{
    return isfinite(t) && t >= 0.0 && t <= MAX_EPOCH_SECONDS;
}

int hlog_write_header(struct hlog_writer *w, const char *comment, double start_time,
                      double base_time)
{
    if (comment && strpbrk(comment, "\r\n]"))
        return -EINVAL;
    if ((start_time >= 0.0 && !epoch_valid(start_time)) ||
        (base_time >= 0.0 && !epoch_valid(base_time)) || isnan(start_time) || isnan(base_time))
        return -EINVAL;

    if (comment && fprintf(w->f, "#[%s]\n", comment) < 0)
        return -EIO;
    if (fprintf(w->f, "#[Histogram log format version %s]\n", HLOG_FORMAT_VERSION) < 0)
        return -EIO;
    if (start_time >= 0.0) {
        time_t secs = (time_t)start_time;
        struct tm tm;
        char date[64];
        if (!gmtime_r(&secs, &tm) ||
            strftime(date, sizeof(date), "%a %b %d %H:%M:%S UTC %Y", &tm) == 0)
            return -EINVAL;
        if (fprintf(w->f, START_TIME_PREFIX "%.3f (seconds since epoch), %s]\n", start_time, date) <
            0)
            return -EIO;
    }
    if (base_time >= 0.0 &&
        fprintf(w->f, BASE_TIME_PREFIX "%.3f (seconds since epoch)]\n", base_time) < 0)
        return -EIO;
    if (fprintf(w->f, "%s\n", LEGEND) < 0)
        return -EIO;
    return 0;
}

int hlog_write_interval(struct hlog_writer *w, const char *tag, double start, double length,
                        const struct hdr *h)
{
    bool tagged = tag && tag[0];
    if ((tagged && !hlog_tag_valid(tag)) || !isfinite(start) || !isfinite(length) || start < 0.0 ||
        length < 0.0)
        return -EINVAL;
    char *text;
    int rc = hdr_encode_base64(h, &text, NULL);
    if (rc)
        return rc;
    double max = (double)hdr_max(h) / w->max_unit_ratio;
    if (fprintf(w->f, "%s%s%s%.3f,%.3f,%.3f,%s\n", tagged ? TAG_PREFIX : "", tagged ? tag : "",
                tagged ? "," : "", start, length, max, text) < 0)
        rc = -EIO;
    ts_free(text);
    return rc;
}

/* ---- Reader ---------------------------------------------------------- */

void hlog_reader_init(struct hlog_reader *r, FILE *f, size_t max_line)
{
    memset(r, 0, sizeof(*r));
    r->f = f;
    buf_init(&r->line_, max_line ? max_line : HLOG_LINE_MAX_DEFAULT);
}

void hlog_reader_release(struct hlog_reader *r)
{
    buf_release(&r->line_);
}

/* Records an error with the current line number; returns code. */
__attribute__((format(printf, 3, 4))) static int fail(struct hlog_reader *r, int code,
                                                      const char *fmt, ...)
{
    int n = snprintf(r->err, sizeof(r->err), "line %ld: ", r->line_no);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof(r->err))
        vsnprintf(r->err + n, sizeof(r->err) - (size_t)n, fmt, ap);
    va_end(ap);
    r->failed_ = code;
    return code;
}

/* Reads one line (without its '\n') into r->line_; 1, 0 at EOF, or an error. */
static int read_line(struct hlog_reader *r)
{
    buf_reset(&r->line_);
    int c;
    bool any = false;
    while ((c = getc(r->f)) != EOF) {
        if (!any) {
            any = true;
            r->line_no++;
        }
        if (c == '\n')
            break;
        if (c == '\0')
            return fail(r, TS_PARSE, "NUL byte in line");
        int rc = buf_append_char(&r->line_, (char)c);
        if (rc == TS_TOOBIG)
            return fail(r, rc, "line longer than %zu bytes", r->line_.max);
        if (rc)
            return fail(r, rc, "out of memory");
    }
    if (ferror(r->f))
        return fail(r, -EIO, "read error");
    if (r->line_.len > 0 && r->line_.data[r->line_.len - 1] == '\r')
        buf_truncate(&r->line_, r->line_.len - 1);
    return any ? 1 : 0;
}

/*
 * Parses a non-negative finite decimal at *p that ends at one of the bytes
 * in stops; advances *p to the stop byte. False if anything is off.
 */
static bool parse_number(const char **p, const char *stops, double *out)
{
    const char *s = *p;
    if (!((*s >= '0' && *s <= '9') || *s == '.'))
        return false;
    char *end;
    double v = strtod(s, &end);
    if (end == s || !*end || !strchr(stops, *end) || !isfinite(v) || v < 0.0)
        return false;
    *p = end;
    *out = v;
    return true;
}

/* A number followed by ','; *p ends past the comma. */
static bool parse_field(const char **p, double *out)
{
    if (!parse_number(p, ",", out))
        return false;
    (*p)++;
    return true;
}

static bool parse_int(const char **p, char stop, int *out)
{
    const char *s = *p;
    long v = 0;
    if (*s < '0' || *s > '9')
        return false;
    for (; *s >= '0' && *s <= '9'; s++) {
        v = v * 10 + (*s - '0');
        if (v > 1000)
            return false;
    }
    if (*s != stop)
        return false;
    *p = s;
    *out = (int)v;
    return true;
}

static int parse_comment(struct hlog_reader *r, const char *line)
{
    const char *p;
    double t;
    if (strncmp(line, VERSION_PREFIX, strlen(VERSION_PREFIX)) == 0) {
        p = line + strlen(VERSION_PREFIX);
        int major, minor;
        if (!parse_int(&p, '.', &major))
            return fail(r, TS_PARSE, "malformed version line");
        p++;
        if (!parse_int(&p, ']', &minor))
            return fail(r, TS_PARSE, "malformed version line");
        if (major != 1 || minor > 3)
            return fail(r, TS_PARSE, "unsupported log format version %d.%d", major, minor);
        r->major = major;
        r->minor = minor;
    } else if (strncmp(line, START_TIME_PREFIX, strlen(START_TIME_PREFIX)) == 0) {
        p = line + strlen(START_TIME_PREFIX);
        if (!parse_number(&p, " ]", &t))
            return fail(r, TS_PARSE, "malformed StartTime");
        r->start_time = t;
        r->has_start_time = true;
    } else if (strncmp(line, BASE_TIME_PREFIX, strlen(BASE_TIME_PREFIX)) == 0) {
        p = line + strlen(BASE_TIME_PREFIX);
        if (!parse_number(&p, " ]", &t))
            return fail(r, TS_PARSE, "malformed BaseTime");
        r->base_time = t;
        r->has_base_time = true;
    }
    return 0;
}

static int parse_interval(struct hlog_reader *r, const char *line, struct hlog_entry *e)
{
    const char *p = line;
    e->tag[0] = '\0';
    if (strncmp(p, TAG_PREFIX, strlen(TAG_PREFIX)) == 0) {
        p += strlen(TAG_PREFIX);
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : 0;
        if (n == 0 || n > HLOG_TAG_MAX)
            return fail(r, TS_PARSE, "bad tag");
        memcpy(e->tag, p, n);
        e->tag[n] = '\0';
        if (!hlog_tag_valid(e->tag))
            return fail(r, TS_PARSE, "bad tag");
        p = comma + 1;
    }
    if (!parse_field(&p, &e->start) || !parse_field(&p, &e->length) || !parse_field(&p, &e->max))
        return fail(r, TS_PARSE, "malformed interval (want start,length,max,histogram)");
    size_t len = strlen(p);
    int rc = hdr_decode_base64(p, len, &e->hist);
    if (rc == TS_PARSE)
        return fail(r, rc, "bad histogram");
    if (rc == TS_TOOBIG)
        return fail(r, rc, "histogram layout too large");
    if (rc)
        return fail(r, rc, "out of memory");
    return 1;
}

int hlog_reader_next(struct hlog_reader *r, struct hlog_entry *e)
{
    e->hist = NULL;
    if (r->failed_)
        return r->failed_;
    for (;;) {
        int rc = read_line(r);
        if (rc <= 0)
            return rc;
        const char *line = buf_cstr(&r->line_);
        if (line[0] == '\0')
            continue;
        if (line[0] == '#') {
            rc = parse_comment(r, line);
            if (rc)
                return rc;
            continue;
        }
        if (line[0] == '"') {
            if (strncmp(line, "\"StartTimestamp\"", 16) != 0)
                return fail(r, TS_PARSE, "unknown legend line");
            continue;
        }
        return parse_interval(r, line, e);
    }
}
