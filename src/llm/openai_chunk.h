/*
 * openai_chunk.h - client-side decoding of OpenAI-compatible responses.
 *
 * openai_decode_chunk() takes the data of one SSE event of a streamed
 * /v1/chat/completions or /v1/completions response: "[DONE]", a chunk
 * object (chat.completion.chunk / text_completion), a usage-only chunk with
 * empty choices, or an error sent mid-stream ({"error":{...}} or an object
 * whose "object" is "error", as vLLM sends). openai_decode_body() takes a
 * whole non-streamed body: chat.completion, text_completion, an embeddings
 * list, or an error body ({"error":...}, {"object":"error",...} or FastAPI's
 * {"detail":"..."}).
 *
 * Both fill a struct openai_chunk whose flags say what it carries. JSON is
 * parsed with jansson, except that openai_decode_chunk() first tries a fast
 * path (yajl's callback parser, no DOM) that knows the common shape of a
 * stream chunk and hands anything else to jansson, with the same result on
 * every input (a client keeps a memo per stream, llm/openai_memo.h, which
 * skips the parse of a chunk that differs from the stream's last one only
 * in its text). Fields the codec does not know are ignored (logprobs,
 * system_fingerprint, stop_reason, ...); known fields of a wrong JSON type
 * make the call fail with TS_PARSE and a message naming the field, e.g.
 * "choices[0].delta.content: expected a string or null, got an integer".
 * Absent and null optional fields are the same thing.
 *
 * Ownership: every pointer in the result points into the decoder and is
 * valid until the next decode call on it or openai_decoder_release(). Text
 * fields come with lengths (JSON strings may contain \u0000) and are also
 * NUL-terminated.
 */
#ifndef TS_LLM_OPENAI_CHUNK_H
#define TS_LLM_OPENAI_CHUNK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/err.h"
#include "llm/openai.h"

enum openai_object {
    OPENAI_OBJECT_NONE = 0,   /* no "object" field */
    OPENAI_OBJECT_OTHER,      /* a value not listed here */
    OPENAI_OBJECT_CHAT_CHUNK, /* "chat.completion.chunk" */
    OPENAI_OBJECT_CHAT,       /* "chat.completion" */
    OPENAI_OBJECT_TEXT,       /* "text_completion" (streamed or not) */
    OPENAI_OBJECT_LIST,       /* "list" (embeddings) */
    OPENAI_OBJECT_ERROR,      /* "error" */
};

/* What a decoded chunk carries; several may be set at once. */
enum openai_chunk_flags {
    OPENAI_CHUNK_DONE = 1 << 0,       /* the "[DONE]" sentinel; nothing else is set */
    OPENAI_CHUNK_ERROR = 1 << 1,      /* an error: see .error */
    OPENAI_CHUNK_ROLE = 1 << 2,       /* a choice carries a role */
    OPENAI_CHUNK_CONTENT = 1 << 3,    /* a choice carries non-empty content */
    OPENAI_CHUNK_REASONING = 1 << 4,  /* a choice carries non-empty reasoning */
    OPENAI_CHUNK_TOOL_CALLS = 1 << 5, /* a choice carries tool call fragments */
    OPENAI_CHUNK_TEXT = 1 << 6,       /* a choice carries non-empty completions text */
    OPENAI_CHUNK_FINISH = 1 << 7,     /* a choice has a non-null finish_reason */
    OPENAI_CHUNK_USAGE = 1 << 8,      /* a usage object: see .usage */
    OPENAI_CHUNK_EMBEDDINGS = 1 << 9, /* embeddings: see .embeddings */
};

/* One fragment of a tool call (streamed) or a whole call (non-streamed). */
struct openai_tool_call {
    int64_t index;         /* -1 if absent */
    const char *id;        /* NULL if absent; usually only in the first fragment */
    const char *type;      /* "function" or NULL */
    const char *name;      /* function.name or NULL */
    const char *arguments; /* function.arguments fragment or NULL */
    size_t arguments_len;
};

struct openai_choice {
    int64_t index;    /* -1 if absent */
    const char *role; /* delta.role / message.role, or NULL */
    /* delta.content (streamed) or message.content; NULL if absent or null,
     * "" if the server sent "" (OpenAI's first chunk does) */
    const char *content;
    size_t content_len;
    /* delta.reasoning_content (vLLM, DeepSeek) or delta.reasoning; NULL if absent */
    const char *reasoning;
    size_t reasoning_len;
    const char *text; /* completions: choices[].text; NULL if absent */
    size_t text_len;
    const char *finish_reason; /* NULL while null: "stop", "length", "tool_calls", ... */
    const struct openai_tool_call *tool_calls;
    size_t n_tool_calls;
};

/* One embedding vector; base64 vectors are decoded to floats. */
struct openai_embedding {
    int64_t index; /* -1 if absent */
    const float *values;
    size_t dims;
};

/* An error carried by a response. Strings are NULL where absent or null. */
struct openai_chunk_error {
    const char *message;
    const char *type;
    const char *param;
    const char *code; /* a numeric code is given here as decimal text too */
    int64_t code_num; /* the code if it was an integer (vLLM sends 400), else -1 */
};

struct openai_chunk {
    unsigned flags; /* enum openai_chunk_flags */
    enum openai_object object;
    const char *object_str; /* the raw "object" value or NULL */
    const char *id;         /* NULL if absent */
    const char *model;      /* NULL if absent */
    int64_t created;        /* -1 if absent */
    const struct openai_choice *choices;
    size_t n_choices;
    struct openai_usage usage; /* usage.present says if it was sent */
    struct openai_chunk_error error;
    const struct openai_embedding *embeddings;
    size_t n_embeddings;
};

struct json_simd;

/* Holds the parsed document and the arrays the results point into; reused
 * from call to call, so a stream of similar chunks allocates little. */
struct openai_decoder {
    json_t *root; /* the last document */
    struct openai_choice *choices;
    size_t choices_cap;
    struct openai_tool_call *calls;
    size_t calls_cap;
    struct openai_embedding *embs;
    size_t embs_cap;
    float *floats;
    size_t floats_cap;
    char code_buf[24];
    char err[256]; /* message of the last failure, "" after a success */
    char *arena;   /* the fast path's copies of strings */
    size_t arena_cap;
    size_t arena_used;
    /* yajl's memory for one chunk: its handle, lexer and buffers are carved
     * from here (malloc past it), all dropped when the chunk is done, so the
     * fast path does not call malloc and free a few times per event */
    _Alignas(16) unsigned char yheap[4096];
    size_t yheap_used;
    struct json_simd *simd; /* simdjson's parser (llm/json_simd.h), when built with it */
    bool yajl_only;      /* the fast path parses with yajl even when simdjson is built in (tests) */
    uint64_t n_fast;     /* chunks the fast path decoded */
    uint64_t n_fallback; /* chunks it handed to jansson */
    uint64_t n_memo;     /* chunks given from a stream's memo (llm/openai_memo.h) */
};

void openai_decoder_init(struct openai_decoder *d);
/* Frees everything the decoder holds; results of it become invalid. */
void openai_decoder_release(struct openai_decoder *d);

/*
 * Decodes the data of one SSE event of a streamed response (leading and
 * trailing ASCII whitespace is ignored). Returns 0 and fills *out;
 * TS_PARSE with openai_decoder_errmsg() set when the data is not "[DONE]"
 * and not a JSON object of the expected shape; -ENOMEM. On failure *out is
 * cleared (flags 0).
 */
TS_MUST_CHECK int openai_decode_chunk(struct openai_decoder *d, const char *data, size_t len,
                                      struct openai_chunk *out);

/*
 * openai_decode_chunk() without the fast path: jansson only. The reference
 * the fast path is checked against (tests, fuzzing, benchmarks).
 */
TS_MUST_CHECK int openai_decode_chunk_full(struct openai_decoder *d, const char *data, size_t len,
                                           struct openai_chunk *out);

/*
 * Decodes a whole non-streamed response body: chat.completion (message
 * content in choices[].content), text_completion, embeddings
 * (OPENAI_CHUNK_EMBEDDINGS), or an error body (OPENAI_CHUNK_ERROR).
 * Returns like openai_decode_chunk(); "[DONE]" is a TS_PARSE here.
 */
TS_MUST_CHECK int openai_decode_body(struct openai_decoder *d, const char *body, size_t len,
                                     struct openai_chunk *out);

/* Sets *out to the empty result every decode starts from (no flags,
 * created and error.code_num -1, usage cleared). */
void openai_chunk_clear(struct openai_chunk *out);
/* openai_chunk_clear(out), and drops d's last document and error message:
 * what every decode on d does first (llm/openai_memo.c gives its chunks
 * from there). */
void openai_decoder_clear(struct openai_decoder *d, struct openai_chunk *out);
/* Moves *data and *len past leading and trailing JSON whitespace, as the
 * decoders read their input. */
void openai_chunk_trim(const char **data, size_t *len);

/*
 * Whether two decoded chunks carry the same values (strings compared by
 * content, text fields with their lengths; the pointers themselves may
 * differ). For checking one decoder against another in tests and fuzzing.
 */
bool openai_chunk_same(const struct openai_chunk *a, const struct openai_chunk *b);

/* Whether the fast path finds known keys by hash, as it should (a new key
 * that collides makes it scan the lists instead): for tests. */
bool openai_decoder_keys_hashed(void);

/* The message of the last failed decode ("" after a success). Owned by d. */
const char *openai_decoder_errmsg(const struct openai_decoder *d);

#endif
