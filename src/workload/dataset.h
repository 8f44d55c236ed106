/*
 * dataset.h - recorded datasets replayed by `run`: ShareGPT conversations,
 * CSV prompt tables and request traces.
 *
 * A dataset is read once, checked whole, and then shared read-only: any
 * number of threads may read a loaded struct dataset at once. It holds no
 * jansson objects; all its text lives in one arena freed by
 * dataset_release().
 *
 * Common to every format
 *   - The whole file must be UTF-8 text without NUL bytes; the first bad
 *     byte is an error ("data.csv:7:12: invalid UTF-8"). A UTF-8 BOM at the
 *     start is skipped (positions count from after it).
 *   - Line ends may be LF or CRLF.
 *   - Every error names the file and line, and the column when one is known:
 *       "data.jsonl:3:9: invalid JSON: string or '}' expected near '}'"
 *       "data.json:40:5: [3]: conversations[1]: unknown role 'robot'"
 *       "data.csv:1: no column 'promt' (did you mean 'prompt'?); the header
 *        has: id, prompt, max_tokens"
 *   - Limits: a file of at most DATASET_MAX_FILE bytes; a JSONL line, a
 *     JSON array element or a CSV record of at most DATASET_MAX_RECORD
 *     bytes; at most DATASET_MAX_CONVS conversations and DATASET_MAX_TURNS
 *     turns in one; token counts from 1 to DATASET_MAX_TOKENS; at most
 *     DATASET_MAX_HASH_IDS hash ids a request; at most DATASET_MAX_COLUMNS
 *     CSV columns. Going past one is TS_TOOBIG.
 *   - Zero conversations left at the end is an error (TS_PARSE).
 *   - Cost, on one core: ShareGPT JSON loads at about 35 MB/s (jansson parses
 *     each record), CSV at about 140 MB/s; memory is the file, read whole,
 *     plus about as much again for the kept text until the load returns,
 *     then the kept text alone.
 *
 * DATASET_SHAREGPT ("sharegpt")
 *   Either one JSON array of records (how ShareGPT_V3_*.json ships; the
 *   array is cut into elements by a light scan and each element is parsed on
 *   its own, so memory holds the file and one record's JSON at a time) or
 *   JSONL, one record a line (blank lines and lines whose first non-blank
 *   byte is '#' are skipped). The first non-blank byte decides: '[' is the
 *   array form. Errors name the element as "[i]" (0-based, as jq's .[i])
 *   with its line and column, or the JSONL line.
 *   A record is an object with exactly one of "conversations",
 *   "conversation" or "messages": an array of message objects. A message
 *   has a role, "from" or "role" (not both), and a text, "value" or
 *   "content" (not both): a string, or null (the same as ""). Roles, ASCII
 *   case ignored:
 *     human, user                               -> the user
 *     gpt, assistant, chatgpt, bing, bard, model -> the assistant
 *     system                                    -> the system prompt
 *   Any other role is an error. Other keys are ignored; a duplicate key
 *   anywhere is an error.
 *   All turns are kept, in order:
 *     - messages with an empty text are dropped first;
 *     - system messages before the first user or assistant message become
 *       the system prompt (several are joined with "\n\n"); later ones are
 *       dropped;
 *     - assistant messages before the first user message are dropped;
 *     - a user message starts a new turn, unless the turn before has no
 *       answer yet: then it is appended to that turn's text after "\n\n";
 *     - an assistant message is the answer of the turn before it (a second
 *       one in a row is appended after "\n\n").
 *   A record left with no user turn (an empty "conversations", only
 *   assistant or system messages) is skipped and counted in d->skipped.
 *   output_tokens are all 0: the recorded answer's length is the hint.
 *
 * DATASET_CSV ("csv")
 *   RFC 4180: fields separated by ',', records by LF or CRLF; a field that
 *   starts with '"' is quoted, may hold ',', CR, LF, and '""' for one '"',
 *   and must be followed by ',' or the end of the record; a '"' inside an
 *   unquoted field is kept as it is (as Python's csv reads it). The first
 *   record is the header. Every other record must have as many fields as the
 *   header; empty lines are skipped. The prompt column is o->column (NULL:
 *   "prompt"); the output column is o->output_column when given (it must
 *   exist), else "max_tokens" when the header has it. Output values are
 *   integers from 1 to DATASET_MAX_TOKENS in plain digits, or empty
 *   (unknown). A column name given twice in the header cannot be chosen. A
 *   row whose prompt is empty is skipped (d->skipped). Each row is one
 *   single-turn conversation.
 *
 * DATASET_TRACE ("trace")
 *   JSONL (blank and '#' lines skipped), one request a line, as the Mooncake
 *   traces write them:
 *     {"timestamp": 27482, "input_length": 6955, "output_length": 52,
 *      "hash_ids": [46, 47, 48]}
 *     {"timestamp": 27500.5, "prompt": "Hello", "output_length": 20}
 *   - "timestamp" (required): the send time in milliseconds, a number from
 *     0 to DATASET_MAX_TIMESTAMP_MS. Lines need not be in order: the
 *     requests are sorted by timestamp, stably (equal timestamps keep the
 *     file's order), and at_ns = (timestamp - smallest timestamp) * 1e6 *
 *     time_scale, rounded to the nearest nanosecond.
 *   - exactly one of "prompt" (a non-empty string: user[0]) or
 *     "input_length" (tokens to synthesize: input_tokens, and user[0] is "");
 *   - "output_length" (optional): output_tokens[0];
 *   - "hash_ids" (optional): an array of integers >= 0, the prefix-cache
 *     block ids of the Mooncake format.
 *   Other keys are ignored; duplicate keys are an error.
 */
#ifndef TS_WORKLOAD_DATASET_H
#define TS_WORKLOAD_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/err.h"

#define DATASET_MAX_FILE         ((size_t)4 << 30)  /* 4 GiB, read whole */
#define DATASET_MAX_RECORD       ((size_t)16 << 20) /* 16 MiB a line / element / CSV record */
#define DATASET_MAX_CONVS        10000000u
#define DATASET_MAX_TURNS        4096u
#define DATASET_MAX_TOKENS       (1u << 24)
#define DATASET_MAX_HASH_IDS     65536u
#define DATASET_MAX_COLUMNS      4096u
#define DATASET_MAX_TIMESTAMP_MS 1e12              /* about 31.7 years */
#define DATASET_MAX_STORED       ((size_t)8 << 30) /* text and per-turn arrays kept */

enum dataset_format {
    DATASET_SHAREGPT,
    DATASET_CSV,
    DATASET_TRACE,
};

/* "sharegpt", "csv" or "trace" into *out: 0, or -EINVAL for anything else. */
int dataset_format_parse(const char *s, enum dataset_format *out);

/* The name dataset_format_parse() reads for f ("sharegpt", ...). */
const char *dataset_format_name(enum dataset_format f);

struct dataset_opts {
    const char *column;        /* CSV: header name of the prompt column (NULL: "prompt") */
    const char *output_column; /* CSV: column of output tokens (NULL: "max_tokens" if present) */
    double time_scale;         /* TRACE: offsets are multiplied by this (0 means 1); 0.5 = twice
                                  as fast; must be finite and >= 0 */
};

/* One conversation = one session. Every string is NUL-terminated (the
 * terminator is not counted in its length) and owned by the dataset. */
struct dataset_conv {
    char *system; /* the system prompt, NULL when none */
    size_t system_len;
    char **user; /* the user turns in order, nturns >= 1 */
    size_t *user_len;
    char **assistant; /* the recorded answer after user turn i, or NULL */
    size_t *assistant_len;
    uint32_t *output_tokens; /* per turn: 0 = unknown */
    size_t nturns;
    uint64_t at_ns;        /* TRACE: send offset from the start (after time_scale); 0 otherwise */
    uint32_t input_tokens; /* TRACE without text: tokens to synthesize (0 = has text) */
    uint64_t *hash_ids;    /* TRACE: prefix block ids (NULL when nhash is 0) */
    size_t nhash;
};

struct dataset {
    struct dataset_conv *convs; /* in file order; TRACE: sorted by at_ns */
    size_t n;
    enum dataset_format format;
    size_t skipped; /* records dropped for having no user turn (CSV: an empty prompt) */
    size_t cap;     /* internal: allocated convs */
    struct arena mem;
};

/*
 * Loads the file at path (read whole, at most DATASET_MAX_FILE bytes) in
 * format f; o may be NULL (all defaults). d need not be initialised: it is
 * overwritten. Blocking file I/O: call it while setting up, not on a loop
 * thread. Returns 0 with d->n >= 1; or, with a message naming the file in err
 * (truncated to errlen; err may be NULL) and d left empty (releasing it is a
 * no-op):
 *   -errno    the file cannot be opened or read ("path: No such file or
 *             directory");
 *   -EINVAL   bad options (a negative or non-finite time_scale);
 *   TS_PARSE  bad content, or no conversation at all;
 *   TS_TOOBIG a limit above was passed;
 *   -ENOMEM.
 */
TS_MUST_CHECK int dataset_load(struct dataset *d, const char *path, enum dataset_format f,
                               const struct dataset_opts *o, char *err, size_t errlen);

/* The same for len bytes at data (need not be NUL-terminated); name is the
 * file name used in messages (NULL: "<memory>"). data is not kept. */
TS_MUST_CHECK int dataset_load_mem(struct dataset *d, const char *name, const char *data,
                                   size_t len, enum dataset_format f, const struct dataset_opts *o,
                                   char *err, size_t errlen);

/* Frees everything d holds and leaves it empty (n == 0); a second call, or a
 * call on a dataset whose load failed, does nothing. */
void dataset_release(struct dataset *d);

#endif
