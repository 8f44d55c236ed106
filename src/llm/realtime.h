/*
 * realtime.h - the client side of OpenAI's Realtime API over WebSocket
 * (text): the request event made from a chat completions body, and the
 * server events decoded into what the load engine measures.
 *
 * Server events known: session.created/updated, response.created,
 * response.output_text.delta and the beta API's response.text.delta,
 * response.output_text.done / response.text.done, response.done (status,
 * status_details.reason, usage) and error. Every other type decodes as
 * REALTIME_EV_OTHER (they are legal and ignored).
 */
#ifndef TS_LLM_REALTIME_H
#define TS_LLM_REALTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/err.h"
#include "llm/openai.h"
#include "llm/openai_chunk.h"

enum realtime_event_kind {
    REALTIME_EV_OTHER = 0,
    REALTIME_EV_SESSION,          /* session.created or session.updated */
    REALTIME_EV_RESPONSE_CREATED, /* response.created */
    REALTIME_EV_DELTA,            /* a text delta (either name) */
    REALTIME_EV_TEXT_DONE,        /* the text's done event (either name) */
    REALTIME_EV_RESPONSE_DONE,    /* response.done */
    REALTIME_EV_ERROR,            /* error */
};

struct realtime_event {
    enum realtime_event_kind kind;
    const char *type;        /* the "type" value */
    const char *response_id; /* response_id, or response.id; NULL if absent */
    const char *delta;       /* REALTIME_EV_DELTA: the text */
    size_t delta_len;
    const char *sig;           /* "sig": SEQ.PREV.MAC over the delta (llm/sign.h), or NULL */
    const char *status;        /* REALTIME_EV_RESPONSE_DONE: "completed", "incomplete", "cancelled",
                            "failed", or NULL */
    const char *reason;        /* its status_details.reason, or NULL */
    struct openai_usage usage; /* input_tokens as prompt, output_tokens as completion */
    struct openai_chunk_error error; /* REALTIME_EV_ERROR, or a failed response's error */
};

struct realtime_decoder {
    json_t *root; /* the last event's document */
    char errmsg[160];
};

void realtime_decoder_init(struct realtime_decoder *d);
void realtime_decoder_release(struct realtime_decoder *d);

/*
 * Decodes one server event (len bytes of JSON text). Pointers in ev stay
 * valid until the next decode or release. Returns 0, or TS_PARSE (not a
 * JSON object with a string "type"; d->errmsg says why).
 */
TS_MUST_CHECK int realtime_decode(struct realtime_decoder *d, const char *data, size_t len,
                                  struct realtime_event *ev);

/*
 * Appends to out the response.create event for a chat completions body
 * (messages, max_tokens or max_completion_tokens, and the extensions
 * ignore_eos, min_tokens, seed and temperature): an out-of-band response
 * ("conversation":"none") whose input items are the messages, so a
 * connection can carry many such requests without a growing conversation.
 * request_id (may be NULL) goes into the response's metadata. Returns 0,
 * TS_PARSE (not a chat body: err says why) or a buf error.
 */
TS_MUST_CHECK int realtime_request_from_chat(const char *body, size_t len, const char *request_id,
                                             struct buf *out, char *err, size_t errlen);

/* The finish reason of a response.done status: "stop" (completed), "length"
 * (incomplete for max_output_tokens), else the status itself, or NULL. */
const char *realtime_finish_reason(const struct realtime_event *ev);

#endif
