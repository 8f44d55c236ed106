#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *ts_strerror(int code)
{
    switch (code) {
    case 0:
        return "success";
    case TS_AGAIN:
        return "try again";
    case TS_TOOBIG:
        return "too big";
    case TS_PARSE:
        return "malformed input";
    case TS_CLOSED:
        return "closed";
    case TS_TIMEOUT:
        return "timed out";
    default:
        return code < 0 ? strerror(-code) : "unknown";
    }
}

void ts_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}
