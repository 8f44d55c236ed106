/*
 * openai_memo.h - one stream's chunks decoded without a parse when they
 * differ from the last one only in their text.
 *
 * A server writes the chunks of one stream from one template: vLLM's
 * {"id":"chatcmpl-..","object":"chat.completion.chunk","created":..,
 * "model":"..","choices":[{"index":0,"delta":{"content":"<token>"},
 * "logprobs":null,"finish_reason":null}]} differs from the next chunk only
 * in <token>. Parsing it again each time was most of the client's
 * user-space CPU per event (#21). A memo keeps, per stream, the bytes of a
 * chunk around its one text (content, reasoning or completions text) and
 * what that chunk decoded to; a later chunk whose bytes before and after
 * the text are the same, and whose text is a JSON string without escapes
 * (no '"', '\\' or control character; valid UTF-8), decodes to the same
 * values with its own text, and is given that way.
 *
 * How the memo knows where the text is: after a chunk is decoded (by the
 * fast path or jansson), the raw text "<T>" is looked for in its bytes,
 * and each place found is checked by decoding the chunk again, twice, with
 * another text of the same kind put there. The place is taken only when
 * both decodes give the same values but the text, and the probe as the
 * text: so the place is the text's string token, whatever else in the
 * chunk reads alike (one probe can pass at a key whose renaming lets a
 * duplicate key or a fallback field give a value that equals the probe;
 * that value cannot equal both). Only chunks without usage, finish_reason, tool calls or errors,
 * with one choice, at most OPENAI_MEMO_MAX_TEXT bytes, are taken as
 * templates. A stream whose chunks never fit one (a server that puts a
 * varying field in each chunk) stops trying after a few misses, so the
 * memo costs it at most a few extra decodes.
 *
 * The result is the one openai_decode_chunk() gives, on every input and
 * every sequence of inputs (fuzz_chunk_memo checks it against jansson).
 */
#ifndef TS_LLM_OPENAI_MEMO_H
#define TS_LLM_OPENAI_MEMO_H

#include <stddef.h>

#include "base/err.h"
#include "llm/openai_chunk.h"

/* The largest chunk taken as a template. */
#define OPENAI_MEMO_MAX_TEXT 2048

struct openai_memo;

/*
 * openai_decode_chunk() with the stream's memo *memo (NULL before the
 * stream's first chunk; made here when a chunk can be a template, and kept
 * for the next). Returns and fills *out as openai_decode_chunk() does; the
 * result's pointers are valid until the next decode on d or with *memo, or
 * openai_memo_free(). The memo's own allocation failing only leaves it
 * out; when the checks of a new template fail, the chunk is decoded again,
 * which can fail for memory as its first decode could.
 */
TS_MUST_CHECK int openai_decode_chunk_memo(struct openai_decoder *d, struct openai_memo **memo,
                                           const char *data, size_t len, struct openai_chunk *out);

/* Frees a memo (NULL is fine). */
void openai_memo_free(struct openai_memo *memo);

#endif
