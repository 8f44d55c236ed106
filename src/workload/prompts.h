/*
 * prompts.h - JSONL prompt files: parsed once, then shared read-only.
 *
 * One JSON object per line:
 *
 *   {"prompt": "Why is the sky blue?", "max_tokens": 64, "reference": "..."}
 *   {"messages": [{"role": "system", "content": "Be brief."},
 *                 {"role": "user", "content": "Hi"}], "output_tokens": 20}
 *
 *   - exactly one of "prompt" (a string) or "messages" (a non-empty array of
 *     objects, each with a string "role" and a "content" that is a string, an
 *     array of parts or null; a "name" string is allowed);
 *   - optional "max_tokens" or "output_tokens" (not both): an integer from 1
 *     to PROMPTS_MAX_OUTPUT_TOKENS, the output length to ask for;
 *   - optional "reference": a string (an expected answer, kept for quality
 *     checks);
 *   - other keys are ignored, duplicate keys are an error.
 * Empty or blank lines and lines whose first non-blank byte is '#' are
 * skipped; a UTF-8 BOM at the start of the file is skipped; CRLF line ends
 * are accepted. Limits: a line holds at most PROMPTS_MAX_LINE bytes (not
 * counting its line end), a file at most PROMPTS_MAX_LINES lines (skipped
 * ones included), the stored prompts at most PROMPTS_MAX_BYTES.
 *
 * Every error message names the file and line, and for bad JSON the column
 * and jansson's own message:
 *   "data.jsonl:3:9: invalid JSON: string or '}' expected near '}'"
 *   "data.jsonl:5: \"max_tokens\" must be an integer from 1 to 16777216"
 *
 * Token counts use the approximate counter of llm/text.h. A chat request is
 * counted as OpenAI's cookbook counts it: each message costs
 * CHAT_TOKENS_PER_MESSAGE + its role + its content (+ CHAT_TOKENS_PER_NAME +
 * the name when there is one), and the request adds CHAT_TOKENS_PER_REPLY for
 * priming the answer.
 *
 * After parsing, a struct prompts is read-only: any number of threads may
 * read it at once. It holds no jansson objects.
 */
#ifndef TS_WORKLOAD_PROMPTS_H
#define TS_WORKLOAD_PROMPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/err.h"

#define PROMPTS_MAX_LINE          (1u << 20) /* 1 MiB */
#define PROMPTS_MAX_LINES         10000000u
#define PROMPTS_MAX_BYTES         ((size_t)4 << 30) /* 4 GiB of stored prompt JSON */
#define PROMPTS_MAX_OUTPUT_TOKENS (1u << 24)
#define PROMPTS_MAX_MESSAGES      4096u /* per "messages" array */

#define CHAT_TOKENS_PER_MESSAGE 3
#define CHAT_TOKENS_PER_NAME    1
#define CHAT_TOKENS_PER_REPLY   3

enum prompt_kind {
    PROMPT_TEXT = 0, /* a "prompt" string */
    PROMPT_MESSAGES, /* a "messages" array */
};

enum prompts_flags {
    /* Reject "messages" lines (for the completions and embeddings endpoints,
     * which take text). */
    PROMPTS_TEXT_ONLY = 1 << 0,
};

struct prompt_entry {
    uint64_t json_off;   /* offset in the pool of the value as compact JSON */
    uint64_t ref_off;    /* offset in the pool of the reference, if has_ref */
    uint32_t json_len;   /* bytes of the JSON value (NUL-terminated in the pool) */
    uint32_t ref_len;    /* bytes of the reference (NUL-terminated in the pool) */
    uint32_t tokens;     /* TEXT: tokens of the text; MESSAGES: of the whole chat request */
    uint32_t max_tokens; /* "max_tokens"/"output_tokens", 0 when the line gave none */
    uint32_t line;       /* line number in the file, from 1 */
    uint8_t kind;        /* enum prompt_kind */
    bool has_ref;
};

struct prompts {
    struct prompt_entry *v;
    size_t n, cap;
    struct buf pool; /* JSON values and references, each NUL-terminated */
};

/* Makes p empty; an empty struct prompts may be released. */
void prompts_init(struct prompts *p);

/* Frees everything p holds and leaves it empty. */
void prompts_release(struct prompts *p);

/*
 * Parses len bytes of JSONL (need not be NUL-terminated) into p, which must
 * be empty (just initialised or released). name is the file name used in
 * messages (NULL: "<memory>"); flags is enum prompts_flags.
 * Returns 0 with at least one prompt in p; or, with a message in err
 * (truncated to errlen; err may be NULL) and p left empty:
 *   TS_PARSE  a bad line, or no prompt at all;
 *   TS_TOOBIG a line, the line count or the stored bytes over their limit;
 *   -ENOMEM.
 */
TS_MUST_CHECK int prompts_parse(struct prompts *p, const char *data, size_t len, const char *name,
                                unsigned flags, char *err, size_t errlen);

/*
 * The same as prompts_parse() for the file at path, read as a stream (memory
 * holds one line at a time besides what is kept). Blocking file I/O: call it
 * while setting up, not on a loop thread. Also returns -errno when the file
 * cannot be opened or read ("path: No such file or directory").
 */
TS_MUST_CHECK int prompts_load(struct prompts *p, const char *path, unsigned flags, char *err,
                               size_t errlen);

/* Number of prompts. */
static inline size_t prompts_count(const struct prompts *p)
{
    return p->n;
}

/* Entry i < prompts_count(p). */
static inline const struct prompt_entry *prompts_get(const struct prompts *p, size_t i)
{
    return &p->v[i];
}

/* The JSON text of entry e's value (a JSON string or array), NUL-terminated;
 * owned by p. */
static inline const char *prompts_json(const struct prompts *p, const struct prompt_entry *e)
{
    return p->pool.data + e->json_off;
}

/* The reference of entry e, NUL-terminated, or NULL when it has none; owned by p. */
static inline const char *prompts_reference(const struct prompts *p, const struct prompt_entry *e)
{
    return e->has_ref ? p->pool.data + e->ref_off : NULL;
}

/* The words these messages use for the JSON type of a value ("an object",
 * "a number", ...); static strings. Also used by workload/dataset.c. */
const char *prompts_json_type(const json_t *v);

#endif
