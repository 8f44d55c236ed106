/*
 * runfiles.c - a run's result files and a capped line reader (see runfiles.h).
 */
#include "report/runfiles.h"

#include <ctype.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/alloc.h"
#include "base/file.h"
#include "report/recover.h"
#include "report/result.h"

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int join(char *out, size_t n, const char *dir, const char *name)
{
    int w = snprintf(out, n, "%s/%s", dir, name);
    return w < 0 || (size_t)w >= n ? -ENAMETOOLONG : 0;
}

int runfiles_locate(const char *path, struct runfiles *out, char *err, size_t errlen)
{
    struct stat st;

    memset(out, 0, sizeof(*out));
    if (stat(path, &st) != 0) {
        int rc = -errno;
        ts_errf(err, errlen, "%s: %s", path, strerror(errno));
        return rc;
    }
    if (strlen(path) >= sizeof(out->dir)) {
        ts_errf(err, errlen, "%.200s...: path too long", path);
        return -ENAMETOOLONG;
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(out->dir, sizeof(out->dir), "%s", path);
        if (join(out->result, sizeof(out->result), path, "result.json")) {
            ts_errf(err, errlen, "%.200s...: path too long", path);
            return -ENAMETOOLONG;
        }
        if (recover_possible(path)) {
            snprintf(out->result, sizeof(out->result), "%s", path);
            out->recovered = true;
        } else if (!is_file(out->result)) {
            ts_errf(err, errlen, "%s: no result.json (nor latency.hlog) in this directory", path);
            return -ENOENT;
        }
    } else {
        const char *slash = strrchr(path, '/');
        snprintf(out->result, sizeof(out->result), "%s", path);
        if (!slash)
            snprintf(out->dir, sizeof(out->dir), ".");
        else if (slash == path)
            snprintf(out->dir, sizeof(out->dir), "/");
        else
            snprintf(out->dir, sizeof(out->dir), "%.*s", (int)(slash - path), path);
    }
    if (join(out->requests, sizeof(out->requests), out->dir, "requests.jsonl") ||
        join(out->hlog, sizeof(out->hlog), out->dir, "latency.hlog")) {
        ts_errf(err, errlen, "%.200s...: path too long", path);
        return -ENAMETOOLONG;
    }
    if (!is_file(out->requests))
        out->requests[0] = '\0';
    if (!is_file(out->hlog))
        out->hlog[0] = '\0';
    return 0;
}

int runfiles_load_result(const char *path, json_t **out, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    json_error_t jerr;
    int rc = file_read_all(path, RUNFILES_JSON_MAX, &text, &len, err, errlen);

    if (rc)
        return rc;
    json_t *doc = json_loadb(text ? text : "", len, JSON_REJECT_DUPLICATES, &jerr);
    ts_free(text);
    if (!doc) {
        ts_errf(err, errlen, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
        return TS_PARSE;
    }
    const json_t *schema = json_object_get(doc, "schema");
    if (!json_is_string(schema) || strcmp(json_string_value(schema), RESULT_SCHEMA) != 0) {
        ts_errf(err, errlen, "%s: not a %s document", path, RESULT_SCHEMA);
        json_decref(doc);
        return TS_PARSE;
    }
    *out = doc;
    return 0;
}

int runfiles_load(const struct runfiles *f, json_t **out, char *err, size_t errlen)
{
    if (f->recovered)
        return recover_result(f->dir, out, err, errlen);
    return runfiles_load_result(f->result, out, err, errlen);
}

/* n digits at s as a number; -1 if any is not a digit. */
static long digits(const char *s, int n)
{
    long v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

int runfiles_parse_time(const char *s, uint64_t *out_ns)
{
    struct tm tm;
    long f[6];
    static const int off[6] = {0, 5, 8, 11, 14, 17}, len[6] = {4, 2, 2, 2, 2, 2};

    if (strlen(s) < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') ||
        s[13] != ':' || s[16] != ':')
        return -EINVAL;
    for (int i = 0; i < 6; i++)
        if ((f[i] = digits(s + off[i], len[i])) < 0)
            return -EINVAL;
    if (f[0] < 1970 || f[1] < 1 || f[1] > 12 || f[2] < 1 || f[2] > 31 || f[3] > 23 || f[4] > 59 ||
        f[5] > 60)
        return -EINVAL;
    const char *p = s + 19;
    uint64_t frac = 0;
    if (*p == '.') {
        int n = 0;
        p++;
        while (isdigit((unsigned char)*p) && n < 9) {
            frac = frac * 10 + (uint64_t)(*p++ - '0');
            n++;
        }
        if (n == 0 || isdigit((unsigned char)*p))
            return -EINVAL;
        for (; n < 9; n++)
            frac *= 10;
    }
    if ((*p != 'Z' && *p != 'z') || p[1])
        return -EINVAL;
    memset(&tm, 0, sizeof(tm));
    tm.tm_year = (int)f[0] - 1900;
    tm.tm_mon = (int)f[1] - 1;
    tm.tm_mday = (int)f[2];
    tm.tm_hour = (int)f[3];
    tm.tm_min = (int)f[4];
    tm.tm_sec = (int)f[5];
    time_t t = timegm(&tm);
    if (t < 0)
        return -EINVAL;
    *out_ns = (uint64_t)t * 1000000000ull + frac;
    return 0;
}

void line_reader_init(struct line_reader *r, FILE *f, size_t max)
{
    r->f = f;
    r->line_no = 0;
    buf_init(&r->line, max ? max : RUNFILES_LINE_MAX);
}

void line_reader_release(struct line_reader *r)
{
    buf_release(&r->line);
}

/* Reads up to n bytes of the current line into chunk; *eol when its '\n'
 * was consumed (not stored). Returns the bytes stored. NUL bytes are data:
 * fgets() and strlen() would cut the chunk there and join the next line. */
static size_t read_chunk(FILE *f, char *chunk, size_t n, bool *eol)
{
    size_t got = 0;
    int c;
    *eol = false;
    while (got < n && (c = getc_unlocked(f)) != EOF) {
        if (c == '\n') {
            *eol = true;
            break;
        }
        chunk[got++] = (char)c;
    }
    return got;
}

int line_reader_next(struct line_reader *r, const char **line, size_t *len)
{
    char chunk[8192];
    bool any = false, eol = false;
    int rc = 0;

    buf_reset(&r->line);
    while (!eol) {
        size_t n = read_chunk(r->f, chunk, sizeof(chunk), &eol);
        if (!n && !eol)
            break; /* end of file (or an error) */
        any = true;
        /* past the cap, the rest of the line is read and dropped: it is not a line */
        if (!rc)
            rc = buf_append(&r->line, chunk, n);
    }
    if (ferror(r->f))
        return -EIO;
    if (!any)
        return 0;
    r->line_no++;
    if (rc)
        return rc;
    *line = buf_cstr(&r->line);
    *len = r->line.len;
    return 1;
}
