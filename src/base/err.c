#include "err.h"

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
