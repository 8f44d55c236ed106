#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static enum ts_log_level current = TS_LOG_INFO;
static const char *prog_name = "tokenstorm";

void ts_log_set_prog(const char *prog)
{
    prog_name = prog ? prog : "tokenstorm";
}

void ts_log_set_level(enum ts_log_level level)
{
    current = level;
}

enum ts_log_level ts_log_get_level(void)
{
    return current;
}

void ts_log(enum ts_log_level level, const char *fmt, ...)
{
    static const char *const names[] = {"debug", "info", "warning", "error"};
    if (level < current || level >= TS_LOG_OFF)
        return;
    char line[2048];
    int n = snprintf(line, sizeof(line), "%.64s: %s: ", prog_name, names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        return;
    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof(line) - 2)
        len = sizeof(line) - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}
