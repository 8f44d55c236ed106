/*
 * errbody.h - one line of text that says why a server refused or broke off
 * an answer, from the body of a non-2xx response or the data of an error
 * event in a stream.
 *
 * Bodies are outside input: whatever they hold, the result is bounded by the
 * caller's buffer, valid UTF-8, and printable (control characters and runs of
 * white space become one space; bytes that are not UTF-8 become '?'). What is
 * recognised, in this order:
 *  - OpenAI: {"error": {"message", "type", "code", ...}} or {"error": "text"}
 *    -> "message (type: T, code: C)" with the parts that are present;
 *  - vLLM: {"object": "error", "message", "type", "code"} -> the same;
 *  - FastAPI: {"detail": "text"} -> text; {"detail": [{"loc": [..], "msg"},
 *    ...]} -> "loc.path: msg" of the first entry and "(+N more)";
 *    any other "detail" -> its compact JSON;
 *  - any other JSON object with a string "message" (gateways) -> message;
 *  - anything else -> its first bytes, made printable.
 * An empty body (or only white space) gives "" (the caller says "empty body").
 */
#ifndef TS_LLM_ERRBODY_H
#define TS_LLM_ERRBODY_H

#include <stddef.h>

#include "llm/openai_chunk.h"

/* Bodies longer than this are described by their first ERRBODY_MAX_PARSE
 * bytes only (JSON over it is treated as text). */
#define ERRBODY_MAX_PARSE (64u << 10)

/*
 * Writes the description of body[0..len) to out (NUL-terminated, cut at a
 * character boundary with "..." when it does not fit in cap). body need not be
 * NUL-terminated. Returns the length written (0 for an empty body); cap 0
 * writes nothing. Allocates only while parsing JSON; out of memory describes
 * the body as text.
 */
size_t errbody_describe(const char *body, size_t len, char *out, size_t cap);

/*
 * Writes an already decoded error (openai_chunk.h) as errbody_describe() does
 * for OpenAI and vLLM bodies. Returns the length written; "" when the error
 * carries no message, type or code.
 */
size_t errbody_format(const struct openai_chunk_error *e, char *out, size_t cap);

/*
 * Copies s[0..len) to out as one printable line (the rules above), cut with
 * "..." to fit cap. Returns the length written.
 */
size_t errbody_printable(const char *s, size_t len, char *out, size_t cap);

#endif
