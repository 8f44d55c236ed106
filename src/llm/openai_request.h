/*
 * openai_request.h - server-side parsing and validation of OpenAI request
 * bodies (/v1/chat/completions, /v1/completions, /v1/embeddings).
 *
 * The body is parsed with jansson and checked field by field. A bad request
 * gives TS_PARSE and a struct openai_error worded like OpenAI's own 400s,
 * ready for openai_encode_error():
 *   "'messages' is a required property"                    (param messages)
 *   "Invalid type for 'max_tokens': expected an integer, but got a string
 *    instead."                                 (param max_tokens, code invalid_type)
 *   "Invalid 'messages': empty array. Expected an array with minimum length
 *    1, but got an empty array instead."                   (code empty_array)
 *   "Invalid 'stop': array too long. Expected an array with maximum length
 *    4, but got an array with length 5 instead."  (code array_above_max_length)
 *   "Invalid 'max_tokens': integer below minimum value. Expected a value >=
 *    1, but got 0 instead."                      (code integer_below_min_value)
 *   "Invalid value: 'x'. Supported values are: 'float' and 'base64'."
 *                                                          (code invalid_value)
 *   "n must be 1"                                                  (param n)
 * Nested params are named like OpenAI does: message "messages[0].role",
 * param "messages.[0].role". Optional fields may be null (= absent).
 * Fields the simulator does not use (logprobs, frequency_penalty,
 * response_format, parallel_tool_calls, ...) are accepted and ignored, as
 * are unknown fields (vLLM-style leniency).
 *
 * Tools (chat): "tools" is an array of at most OPENAI_MAX_TOOLS function
 * tools {"type":"function","function":{"name":N,"description":D,
 * "parameters":{...}}}: type must be "function", name 1..64 characters of
 * [a-zA-Z0-9_-], description a string if given, parameters an object if
 * given; anything else is a 400 with param "tools" and a message naming the
 * field ("Invalid 'tools[1].function.name': ..."). "tool_choice" is "none",
 * "auto", "required" or {"type":"function","function":{"name":N}} where N
 * names one of the tools (param "tool_choice" otherwise). A "tool" message
 * needs a string "tool_call_id" (param "messages.[i].tool_call_id"); an
 * assistant message may carry "tool_calls" (an array, then content may be
 * null or absent); their entries are not checked further.
 *
 * Accepted per endpoint:
 *   chat:        model, messages[] {role: system|developer|user|assistant|
 *                tool|function, content: string | [{type:"text", text}, ...]
 *                (other part types are accepted and carry no text) | null
 *                (assistant only, or absent)}, plus the common fields.
 *   completions: model, prompt: string | [string, ...] | [token, ...] |
 *                [[token, ...], ...], plus the common fields.
 *   embeddings:  model, input (same shapes as prompt), dimensions (>= 1),
 *                encoding_format "float"|"base64", user.
 *   common:      stream, stream_options.include_usage (only with stream
 *                true), max_tokens, max_completion_tokens (wins over
 *                max_tokens), min_tokens (vLLM; <= the max), ignore_eos
 *                (vLLM), stop (string or up to 4 strings), seed,
 *                temperature [0, 2], top_p [0, 1], n (only 1), user.
 *
 * Caps beyond the HTTP server's body cap: number of messages, of content
 * parts, of prompt/input items, and the total bytes of text.
 *
 * Ownership: strings in the parsed request point into its JSON document and
 * stay valid until openai_request_release(). Texts carry lengths (they may
 * contain NUL) and are NUL-terminated.
 */
#ifndef TS_LLM_OPENAI_REQUEST_H
#define TS_LLM_OPENAI_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/err.h"
#include "llm/openai.h"

#define OPENAI_MAX_STOP  4
#define OPENAI_MAX_TOOLS 128 /* OpenAI's limit */

struct openai_span {
    const char *s;
    size_t len;
};

struct openai_message {
    const char *role; /* one of the accepted roles */
    const char *name; /* optional "name", or NULL */
    /* the text of content: one span for a string, one per text part for an
     * array, none for null/absent content */
    const struct openai_span *parts;
    size_t n_parts;
    size_t text_len;          /* sum of the parts' lengths */
    const char *tool_call_id; /* role "tool": the call answered; else NULL */
    const json_t *tool_calls; /* assistant: the "tool_calls" array, or NULL */
};

/* One function tool of "tools". */
struct openai_tool {
    const char *name;         /* function.name: 1..64 of [a-zA-Z0-9_-] */
    const json_t *function;   /* the whole "function" object */
    const json_t *parameters; /* function.parameters (an object), or NULL */
};

enum openai_tool_choice {
    OPENAI_TOOL_CHOICE_AUTO = 0, /* "auto" or absent */
    OPENAI_TOOL_CHOICE_NONE,
    OPENAI_TOOL_CHOICE_REQUIRED,
    OPENAI_TOOL_CHOICE_FUNCTION, /* a named function: tool_choice_name */
};

/* One prompt (completions) or input (embeddings) item. */
struct openai_input {
    const char *text; /* NULL for a token array */
    size_t len;       /* bytes of text, 0 for a token array */
    int64_t n_tokens; /* the number of token ids of a token array, -1 for text */
};

enum openai_encoding {
    OPENAI_ENCODING_FLOAT = 0,
    OPENAI_ENCODING_BASE64 = 1,
};

struct openai_request_limits {
    size_t max_messages;   /* default 4096 */
    size_t max_parts;      /* content parts over all messages, default 16384 */
    size_t max_inputs;     /* prompt / input items, default 2048 (OpenAI's) */
    size_t max_text_bytes; /* all message / prompt / input text, default 32 MiB */
};

struct openai_request {
    enum openai_endpoint endpoint;
    const char *model;
    bool stream;
    bool include_usage; /* stream_options.include_usage */
    /* max_completion_tokens if given, else max_tokens, else -1 (the server
     * picks: OpenAI's completions use 16, vLLM the rest of the context) */
    int64_t max_tokens;
    int64_t min_tokens; /* 0 unless given */
    bool ignore_eos;
    struct openai_span stop[OPENAI_MAX_STOP];
    size_t n_stop;
    bool has_seed;
    int64_t seed;
    bool has_temperature;
    double temperature;
    bool has_top_p;
    double top_p;
    const char *user; /* NULL if absent */
    bool has_tools;   /* a non-empty tools array was sent (n_tools > 0) */
    const struct openai_tool *tools;
    size_t n_tools;
    enum openai_tool_choice tool_choice;
    const char *tool_choice_name; /* with OPENAI_TOOL_CHOICE_FUNCTION: one of tools[] */
    /* chat */
    const struct openai_message *messages;
    size_t n_messages;
    /* completions prompt or embeddings input */
    const struct openai_input *inputs;
    size_t n_inputs;
    /* embeddings */
    int64_t dimensions; /* -1 if absent */
    enum openai_encoding encoding_format;
    size_t text_bytes; /* total bytes of message / prompt / input text */
    /* storage */
    json_t *root;
    struct openai_message *msg_store;
    struct openai_span *part_store;
    struct openai_input *input_store;
    struct openai_tool *tool_store;
};

/* Fills lim with the defaults listed above. */
void openai_request_limits_default(struct openai_request_limits *lim);

/* Zeroes r so that release is safe before or without a parse. */
void openai_request_init(struct openai_request *r);

/*
 * Parses body (len bytes, need not be NUL-terminated) as a request to
 * endpoint ep. lim may be NULL for the defaults. Returns 0 with r filled;
 * TS_PARSE with *err set to a 400 invalid_request_error; -ENOMEM with *err
 * set to a 500 server_error; -EINVAL (404) for an unknown endpoint. r must be initialised (or released) before;
 * whatever it held is released first. On failure r holds nothing.
 */
TS_MUST_CHECK int openai_request_parse(struct openai_request *r, enum openai_endpoint ep,
                                       const char *body, size_t len,
                                       const struct openai_request_limits *lim,
                                       struct openai_error *err);

/* Frees what a parse kept; r can be parsed into again. */
void openai_request_release(struct openai_request *r);

/* OpenAI's words for the JSON type of a value in its 400 messages ("an
 * object", "an integer", "a decimal", "a boolean", ...); static strings. */
const char *openai_json_kind(const json_t *v);

#endif
