/*
 * openai.h - what the OpenAI wire codec's three parts share.
 *
 * The codec is split by who uses it:
 *   openai_chunk.h   - client side: decode streamed chunks and whole
 *                      response bodies (chat, completions, embeddings,
 *                      errors) into flat structs.
 *   openai_request.h - server side: parse and validate request bodies with
 *                      OpenAI-style 400 errors.
 *   openai_encode.h  - server side: write the exact wire chunks and bodies,
 *                      fast enough for ~100k chunks/s.
 * This header holds the endpoint names, the usage counts, the error struct
 * servers fill, and base64 for embeddings (encoding_format=base64 is the
 * little-endian float32 bytes, standard alphabet, with padding).
 */
#ifndef TS_LLM_OPENAI_H
#define TS_LLM_OPENAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

enum openai_endpoint {
    OPENAI_CHAT = 1,        /* POST /v1/chat/completions */
    OPENAI_COMPLETIONS = 2, /* POST /v1/completions */
    OPENAI_EMBEDDINGS = 3,  /* POST /v1/embeddings */
};

/* Returns "chat", "completions", "embeddings" or "?". */
const char *openai_endpoint_name(enum openai_endpoint ep);

/* Token counts as a server reports them; -1 where a count is absent. */
struct openai_usage {
    bool present;
    int64_t prompt_tokens;
    int64_t completion_tokens;
    int64_t total_tokens;
    int64_t cached_tokens;    /* prompt_tokens_details.cached_tokens */
    int64_t reasoning_tokens; /* completion_tokens_details.reasoning_tokens */
};

/* Sets every count to -1 and present to false. */
void openai_usage_clear(struct openai_usage *u);

/*
 * An error as a server sends it: HTTP status plus the body
 * {"error":{"message":..,"type":..,"param":..,"code":..}}. Empty param or
 * code strings are sent as null. Texts longer than the arrays are cut (at
 * a UTF-8 character boundary).
 */
struct openai_error {
    int status; /* HTTP status: 400, 404, 429, 500, ... */
    char message[512];
    char type[48];  /* "invalid_request_error", "server_error", ... */
    char param[96]; /* "" = null; nested ones look like "messages.[0].role" */
    char code[48];  /* "" = null; e.g. "invalid_type", "invalid_value" */
};

/* Fills e. type, param and code may be NULL (empty). */
void openai_error_set(struct openai_error *e, int status, const char *type, const char *param,
                      const char *code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* base64 (embeddings' encoding_format=base64) is in base/base64.h. */

#endif
