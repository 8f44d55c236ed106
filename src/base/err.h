/*
 * err.h - the one error convention of tokenstorm.
 *
 * Actions return 0 on success or a negative error code; predicates return bool.
 * Codes are negative errno values (-ENOMEM, -EINVAL, ...) plus the few below
 * that errno has no word for. TS_AGAIN is the explicit "try again later" of
 * non-blocking paths (a full queue, a parser that needs more bytes).
 */
#ifndef TS_BASE_ERR_H
#define TS_BASE_ERR_H

#include <errno.h>

#define TS_MUST_CHECK __attribute__((warn_unused_result))

enum ts_err {
    TS_AGAIN = -10001,   /* would block / need more input; not a failure */
    TS_TOOBIG = -10002,  /* a capped buffer or field would exceed its maximum */
    TS_PARSE = -10003,   /* malformed input */
    TS_CLOSED = -10004,  /* the peer or object is gone */
    TS_TIMEOUT = -10005, /* a deadline passed */
};

/* Returns a static, human-readable string for any code this project returns. */
const char *ts_strerror(int code);

#endif
