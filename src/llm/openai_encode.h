/*
 * openai_encode.h - server-side writers of the OpenAI wire format.
 *
 * Streams: a struct openai_stream_enc precomputes, once per response, the
 * bytes every chunk shares (id, object, created, model), so a token's chunk
 * costs one reserve, two memcpy and the escaping of its text. Each call
 * appends one complete SSE event ("data: {...}\n\n") to the caller's buf, so
 * several chunks can be batched into one write. The bytes are exactly:
 *
 * chat (object "chat.completion.chunk"):
 *   role:    data: {"id":"ID","object":"chat.completion.chunk","created":N,
 *            "model":"M","choices":[{"index":0,"delta":{"role":"assistant",
 *            "content":""},"logprobs":null,"finish_reason":null}]}
 *   content: ...,"choices":[{"index":0,"delta":{"content":"TEXT"},
 *            "logprobs":null,"finish_reason":null}]}
 *   finish:  ...,"choices":[{"index":0,"delta":{},"logprobs":null,
 *            "finish_reason":"stop"}]}
 *   usage:   ...,"choices":[],"usage":{"prompt_tokens":P,
 *            "completion_tokens":C,"total_tokens":P+C}}
 *   tool call (first chunk of a call, in place of the role chunk):
 *            ...,"choices":[{"index":0,"delta":{"role":"assistant",
 *            "content":null,"tool_calls":[{"index":I,"id":"CALL_ID",
 *            "type":"function","function":{"name":"NAME","arguments":""}}]},
 *            "logprobs":null,"finish_reason":null}]}
 *   tool arguments (each later piece of the arguments):
 *            ...,"choices":[{"index":0,"delta":{"tool_calls":[{"index":I,
 *            "function":{"arguments":"PIECE"}}]},"logprobs":null,
 *            "finish_reason":null}]}
 *   (a tool call ends with the finish chunk, finish_reason "tool_calls")
 * completions (object "text_completion"):
 *   content: ...,"choices":[{"index":0,"text":"TEXT","logprobs":null,
 *            "finish_reason":null}]}
 *   finish:  ...,"choices":[{"index":0,"text":"","logprobs":null,
 *            "finish_reason":"length"}]}
 *   usage:   as for chat.
 * end:       data: [DONE]
 * (each line above is one line on the wire, followed by a blank line).
 *
 * Text escaping: '"', '\\' and control characters are escaped (\n, \t, ...,
 * \u00XX); valid UTF-8 passes through unchanged; bytes that are not valid
 * UTF-8 (e.g. half of a multi-byte character) are written as \ufffd, so the
 * output is always valid JSON.
 *
 * All functions append to out and return 0, -ENOMEM, or TS_TOOBIG when out's
 * cap would be exceeded (then out is left as it was, apart from capacity).
 */
#ifndef TS_LLM_OPENAI_ENCODE_H
#define TS_LLM_OPENAI_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "llm/openai.h"
#include "llm/openai_request.h"

/* Appends s (n bytes) as the inside of a JSON string (no quotes). */
TS_MUST_CHECK int openai_json_escape(struct buf *out, const char *s, size_t n);

struct openai_stream_enc {
    enum openai_endpoint endpoint; /* OPENAI_CHAT or OPENAI_COMPLETIONS */
    /* data: {"id":..,"model":..,"choices":[ then the opening of a content
     * chunk's choice up to its text: {"index":0,"delta":{"content":" */
    struct buf head;
    size_t prefix_len; /* the part of head every chunk starts with */
};

/*
 * Precomputes the shared prefix. ep is OPENAI_CHAT or OPENAI_COMPLETIONS;
 * id is the full id ("chatcmpl-...", "cmpl-..."), created the Unix time in
 * seconds, model the model name (both escaped here). Returns 0, -EINVAL for
 * another endpoint, or -ENOMEM. Release with openai_stream_enc_release().
 */
TS_MUST_CHECK int openai_stream_enc_init(struct openai_stream_enc *e, enum openai_endpoint ep,
                                         const char *id, int64_t created, const char *model);
void openai_stream_enc_release(struct openai_stream_enc *e);

/* Chat: the first chunk (role "assistant", content ""). Completions have no
 * role chunk: nothing is written. */
TS_MUST_CHECK int openai_stream_enc_role(const struct openai_stream_enc *e, struct buf *out);
/* One chunk carrying text (delta.content for chat, text for completions). */
TS_MUST_CHECK int openai_stream_enc_content(const struct openai_stream_enc *e, struct buf *out,
                                            const char *text, size_t len);
/* Chat only (-EINVAL otherwise): the first chunk of tool call number index
 * (role, id, type, function name, empty arguments). */
TS_MUST_CHECK int openai_stream_enc_tool_call(const struct openai_stream_enc *e, struct buf *out,
                                              int index, const char *call_id, const char *name);
/* Chat only (-EINVAL otherwise): a piece of the arguments of tool call index. */
TS_MUST_CHECK int openai_stream_enc_tool_args(const struct openai_stream_enc *e, struct buf *out,
                                              int index, const char *args, size_t len);
/* The chunk with finish_reason (e.g. "stop", "length", "tool_calls") and no text. */
TS_MUST_CHECK int openai_stream_enc_finish(const struct openai_stream_enc *e, struct buf *out,
                                           const char *finish_reason);
/* The usage chunk ("choices":[]), sent when stream_options.include_usage. */
TS_MUST_CHECK int openai_stream_enc_usage(const struct openai_stream_enc *e, struct buf *out,
                                          int64_t prompt_tokens, int64_t completion_tokens);
/* "data: [DONE]\n\n". */
TS_MUST_CHECK int openai_stream_enc_done(struct buf *out);

/*
 * A whole non-streamed response:
 * chat:        {"id":..,"object":"chat.completion","created":N,"model":..,
 *              "choices":[{"index":0,"message":{"role":"assistant",
 *              "content":"TEXT"},"logprobs":null,"finish_reason":"stop"}],
 *              "usage":{"prompt_tokens":P,"completion_tokens":C,"total_tokens":T}}
 * completions: {"id":..,"object":"text_completion","created":N,"model":..,
 *              "choices":[{"index":0,"text":"TEXT","logprobs":null,
 *              "finish_reason":"length"}],"usage":{...}}
 */
TS_MUST_CHECK int openai_encode_response(struct buf *out, enum openai_endpoint ep, const char *id,
                                         int64_t created, const char *model, const char *text,
                                         size_t len, const char *finish_reason,
                                         int64_t prompt_tokens, int64_t completion_tokens);

/*
 * A non-streamed chat response with one tool call instead of text:
 *   {"id":..,"object":"chat.completion","created":N,"model":..,"choices":[{
 *   "index":0,"message":{"role":"assistant","content":null,"tool_calls":[{
 *   "id":"CALL_ID","type":"function","function":{"name":"NAME",
 *   "arguments":"ARGS"}}]},"logprobs":null,"finish_reason":"tool_calls"}],
 *   "usage":{...}}
 * args (args_len bytes) is the arguments text, escaped here into a string;
 * finish_reason NULL means "tool_calls" ("length" when it was cut).
 */
TS_MUST_CHECK int openai_encode_tool_call_response(struct buf *out, const char *id, int64_t created,
                                                   const char *model, const char *call_id,
                                                   const char *name, const char *args,
                                                   size_t args_len, const char *finish_reason,
                                                   int64_t prompt_tokens,
                                                   int64_t completion_tokens);

/*
 * An embeddings response: {"object":"list","data":[{"object":"embedding",
 * "index":I,"embedding":[...]}, ...],"model":..,"usage":{"prompt_tokens":P,
 * "total_tokens":P}}. vecs holds n vectors of dims floats each, one after
 * the other. Floats are written with 9 significant digits (exact float32
 * round trip), non-finite ones as 0; with OPENAI_ENCODING_BASE64 each
 * embedding is the base64 string of its little-endian float32 bytes.
 */
TS_MUST_CHECK int openai_encode_embeddings(struct buf *out, const char *model, const float *vecs,
                                           size_t n, size_t dims, enum openai_encoding fmt,
                                           int64_t prompt_tokens);

/* {"error":{"message":..,"type":..,"param":..|null,"code":..|null}} */
TS_MUST_CHECK int openai_encode_error(struct buf *out, const struct openai_error *err);

#endif
