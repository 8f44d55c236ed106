/*
 * log.h - leveled logging to stderr.
 *
 * ts_log_set_level() is meant to be called once at startup, before threads
 * start. Messages below the level are dropped without formatting. Each line
 * is written with one write(2) so lines from threads do not interleave.
 * Never log a secret: callers redact API keys and Authorization headers.
 */
#ifndef TS_BASE_LOG_H
#define TS_BASE_LOG_H

enum ts_log_level {
    TS_LOG_DEBUG = 0,
    TS_LOG_INFO = 1,
    TS_LOG_WARN = 2,
    TS_LOG_ERROR = 3,
    TS_LOG_OFF = 4,
};

void ts_log_set_level(enum ts_log_level level);

/*
 * The name each line starts with ("tokenstorm run"; default "tokenstorm"),
 * borrowed: it must outlive the logging. Called once at startup, like the level.
 */
void ts_log_set_prog(const char *prog);
enum ts_log_level ts_log_get_level(void);
void ts_log(enum ts_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define ts_debug(...) ts_log(TS_LOG_DEBUG, __VA_ARGS__)
#define ts_info(...)  ts_log(TS_LOG_INFO, __VA_ARGS__)
#define ts_warn(...)  ts_log(TS_LOG_WARN, __VA_ARGS__)
#define ts_error(...) ts_log(TS_LOG_ERROR, __VA_ARGS__)

#endif
