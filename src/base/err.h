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
#include <signal.h>
#include <stddef.h>

#define TS_MUST_CHECK __attribute__((warn_unused_result))

enum ts_err {
    TS_AGAIN = -10001,   /* would block / need more input; not a failure */
    TS_TOOBIG = -10002,  /* a capped buffer or field would exceed its maximum */
    TS_PARSE = -10003,   /* malformed input */
    TS_CLOSED = -10004,  /* the peer or object is gone */
    TS_TIMEOUT = -10005, /* a deadline passed */
};

/*
 * Writes a message into a caller's error buffer (the redis anet `err`
 * convention): nothing when err is NULL or errlen 0; always NUL-terminated.
 */
void ts_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Process exit codes, the same for every command. */
enum ts_exit {
    TS_EXIT_OK = 0,
    TS_EXIT_SLO = 1,
    TS_EXIT_USAGE = 2,
    TS_EXIT_FAIL = 3,
    TS_EXIT_INTERRUPTED = 130, /* SIGINT (128 + 2), results so far written */
    TS_EXIT_TERMINATED = 143,  /* SIGTERM (128 + 15), results so far written */
};

/* The exit code of a job a signal stopped: TS_EXIT_TERMINATED for SIGTERM,
 * else TS_EXIT_INTERRUPTED (SIGINT, or a stop with no signal). */
static inline int ts_exit_stopped(int signum)
{
    return signum == SIGTERM ? TS_EXIT_TERMINATED : TS_EXIT_INTERRUPTED;
}

/* Returns a static, human-readable string for any code this project returns. */
const char *ts_strerror(int code);

#endif
