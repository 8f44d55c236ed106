/*
 * json_simd.h - one JSON text parsed by simdjson and replayed as yajl's
 * callbacks (the stream chunk fast path's parser; openai_chunk.c).
 *
 * yajl's lexer was about 60% of the client's decode of a stream chunk.
 * simdjson (Debian's libsimdjson-dev, C++) parses the same text several
 * times faster, fully validated (UTF-8, escapes, surrogate pairs, numbers,
 * nothing after the value); json_simd_walk() then calls the same
 * yajl_callbacks the fast path gives yajl, in document order, so the fast
 * path's rules (which fields, which types, what goes to jansson) stay in
 * one place. An integer beyond int64_t, which yajl refuses, is refused here
 * too. Optional in the build (-Dsimdjson=auto, TS_HAVE_SIMDJSON): without
 * it the fast path parses with yajl.
 *
 * A struct json_simd holds the parser and a padded copy of the text; one
 * per decoder, not thread-safe.
 */
#ifndef TS_LLM_JSON_SIMD_H
#define TS_LLM_JSON_SIMD_H

#include <stddef.h>

#include <yajl/yajl_parse.h>

#ifdef __cplusplus
extern "C" {
#endif

struct json_simd;

/* The largest text json_simd_walk takes (longer ones: 0, for the caller's
 * other parser). */
#define JSON_SIMD_MAX_TEXT (64 * 1024)

/*
 * Parses s (n bytes, one JSON value) with *state (made on first use; NULL
 * state pointer not allowed) and calls cb with ctx for each event. Returns
 * 1 when the text is valid and every callback returned nonzero; 0 when the
 * text is invalid or too long, has an integer beyond int64_t, or a callback
 * returned 0; -ENOMEM when *state could not be made. The strings given to
 * the callbacks are NUL-terminated and stay valid until the next call with
 * the same state.
 */
int json_simd_walk(struct json_simd **state, const char *s, size_t n, const yajl_callbacks *cb,
                   void *ctx);
/* Frees a state (NULL is fine). */
void json_simd_free(struct json_simd *state);

#ifdef __cplusplus
}
#endif

#endif
