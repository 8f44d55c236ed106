/*
 * wsframes.h - the generic JSON-frames mode of the WebSocket transport, for
 * in-house gateways that stream over WebSocket in their own format
 * (`run --ws-frames SPEC.json`): the request frame is a template, and JSON
 * pointers (RFC 6901) say where a server frame's text delta, end marker,
 * usage and error are.
 *
 * The spec, a JSON object:
 *   url      "ws://host:port/path?query" or wss://                (required)
 *   request  any JSON value; a string that is exactly one of the
 *            placeholders below is replaced by its value        (required)
 *              "{{messages}}"   the chat messages (an array)
 *              "{{prompt}}"     the last user message's text (a string)
 *              "{{max_tokens}}" the request's max_tokens (an integer, or null)
 *              "{{model}}"      the model (a string)
 *              "{{request_id}}" "ts-<run id>-<index>"
 *   delta    pointer to a frame's text delta (a string)           (required)
 *   end      pointer to the end marker: the frame ends the answer when the
 *            value exists and is not false or null; or {"pointer": P,
 *            "equals": V}: when the value equals V                 (required)
 *   usage    pointer to the answer's output token count (an integer), in
 *            any frame                                             (optional)
 *   error    pointer to an error: a frame where it exists (not null) is an
 *            error event; a string is its message, an object's "message"
 *            member is                                            (optional)
 * Limits: the spec file 1 MiB, pointers 256 bytes.
 */
#ifndef TS_LLM_WSFRAMES_H
#define TS_LLM_WSFRAMES_H

#include <jansson.h>

#include "base/buf.h"
#include "base/err.h"
#include "llm/realtime.h"

#define WSFRAMES_MAX_SPEC (1u << 20)
#define WSFRAMES_MAX_PTR  256

struct wsframes_spec {
    char url[1024];
    json_t *request; /* the template (owned) */
    char delta[WSFRAMES_MAX_PTR + 1];
    char end[WSFRAMES_MAX_PTR + 1];
    json_t *end_equals; /* NULL: exists and not false/null */
    char usage[WSFRAMES_MAX_PTR + 1];
    char error[WSFRAMES_MAX_PTR + 1];
    bool has_usage, has_error;
};

/*
 * Parses a spec (len bytes of JSON; name for messages). Returns 0, or
 * -EINVAL with err naming the line and column or the field; on error
 * nothing is held. Release with wsframes_spec_release.
 */
TS_MUST_CHECK int wsframes_spec_parse(struct wsframes_spec *s, const char *text, size_t len,
                                      const char *name, char *err, size_t errlen);
void wsframes_spec_release(struct wsframes_spec *s);

/* Appends the request frame for a chat completions body to out. Returns 0,
 * TS_PARSE (not a chat body: err) or a buf error. */
TS_MUST_CHECK int wsframes_request(const struct wsframes_spec *s, const char *body, size_t len,
                                   const char *request_id, struct buf *out, char *err,
                                   size_t errlen);

/*
 * Decodes one server frame into ev: REALTIME_EV_ERROR when the error pointer
 * exists, else REALTIME_EV_DELTA when the delta pointer is a string (the end
 * marker, if also present, is reported by *end), REALTIME_EV_RESPONSE_DONE
 * for an end frame without a delta, else REALTIME_EV_OTHER; ev->usage
 * carries the usage count wherever it appears. Returns 0 or TS_PARSE (not
 * JSON: d->errmsg). Pointers stay valid until the next decode.
 */
TS_MUST_CHECK int wsframes_decode(const struct wsframes_spec *s, struct realtime_decoder *d,
                                  const char *data, size_t len, struct realtime_event *ev,
                                  bool *end);

#endif
