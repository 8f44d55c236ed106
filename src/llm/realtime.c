/*
 * realtime.c - OpenAI Realtime events for the client: see realtime.h.
 */
#include "llm/realtime.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

void realtime_decoder_init(struct realtime_decoder *d)
{
    memset(d, 0, sizeof(*d));
}

void realtime_decoder_release(struct realtime_decoder *d)
{
    json_decref(d->root);
    d->root = NULL;
}

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static int64_t num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : -1;
}

static void error_of(const json_t *e, struct openai_chunk_error *out)
{
    out->message = str(e, "message");
    out->type = str(e, "type");
    out->param = str(e, "param");
    out->code = str(e, "code");
    out->code_num = -1;
}

static void usage_of(const json_t *u, struct openai_usage *out)
{
    openai_usage_clear(out);
    if (!json_is_object(u))
        return;
    out->present = true;
    out->prompt_tokens = num(u, "input_tokens");
    out->completion_tokens = num(u, "output_tokens");
    out->total_tokens = num(u, "total_tokens");
    out->cached_tokens = num(json_object_get(u, "input_token_details"), "cached_tokens");
}

static void response_done(const json_t *root, struct realtime_event *ev)
{
    const json_t *r = json_object_get(root, "response");
    ev->response_id = str(r, "id");
    ev->status = str(r, "status");
    const json_t *details = json_object_get(r, "status_details");
    ev->reason = str(details, "reason");
    usage_of(json_object_get(r, "usage"), &ev->usage);
    if (json_is_object(json_object_get(details, "error")))
        error_of(json_object_get(details, "error"), &ev->error);
}

int realtime_decode(struct realtime_decoder *d, const char *data, size_t len,
                    struct realtime_event *ev)
{
    memset(ev, 0, sizeof(*ev));
    openai_usage_clear(&ev->usage);
    ev->error.code_num = -1;
    json_decref(d->root);
    json_error_t jerr;
    d->root = json_loadb(data, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!d->root) {
        snprintf(d->errmsg, sizeof(d->errmsg), "%s", jerr.text);
        return TS_PARSE;
    }
    ev->type = str(d->root, "type");
    if (!json_is_object(d->root) || !ev->type) {
        snprintf(d->errmsg, sizeof(d->errmsg), "an event without a string 'type'");
        return TS_PARSE;
    }
    const char *t = ev->type;
    ev->response_id = str(d->root, "response_id");
    if (!strcmp(t, "response.output_text.delta") || !strcmp(t, "response.text.delta")) {
        const json_t *delta = json_object_get(d->root, "delta");
        if (!json_is_string(delta)) {
            snprintf(d->errmsg, sizeof(d->errmsg), "%s without a string 'delta'", t);
            return TS_PARSE;
        }
        ev->kind = REALTIME_EV_DELTA;
        ev->sig = str(d->root, "sig");
        ev->delta = json_string_value(delta);
        ev->delta_len = json_string_length(delta);
    } else if (!strcmp(t, "response.output_text.done") || !strcmp(t, "response.text.done")) {
        ev->kind = REALTIME_EV_TEXT_DONE;
    } else if (!strcmp(t, "response.done")) {
        ev->kind = REALTIME_EV_RESPONSE_DONE;
        response_done(d->root, ev);
    } else if (!strcmp(t, "response.created")) {
        ev->kind = REALTIME_EV_RESPONSE_CREATED;
        ev->response_id = str(json_object_get(d->root, "response"), "id");
    } else if (!strcmp(t, "session.created") || !strcmp(t, "session.updated")) {
        ev->kind = REALTIME_EV_SESSION;
    } else if (!strcmp(t, "error")) {
        ev->kind = REALTIME_EV_ERROR;
        error_of(json_object_get(d->root, "error"), &ev->error);
    }
    return 0;
}

const char *realtime_finish_reason(const struct realtime_event *ev)
{
    if (!ev->status)
        return NULL;
    if (!strcmp(ev->status, "completed"))
        return "stop";
    if (!strcmp(ev->status, "incomplete") && ev->reason && !strcmp(ev->reason, "max_output_tokens"))
        return "length";
    return ev->status;
}

/* One input item for a chat message: its role and text (string content or text parts). */
static json_t *item_of(const json_t *m)
{
    const char *role = str(m, "role");
    const json_t *content = json_object_get(m, "content");
    if (!role || (strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "system")))
        return NULL;
    json_t *parts = json_array();
    const char *ptype = strcmp(role, "assistant") ? "input_text" : "output_text";
    if (json_is_string(content)) {
        json_array_append_new(parts, json_pack("{s:s, s:O}", "type", ptype, "text", content));
    } else if (json_is_array(content)) {
        for (size_t i = 0; i < json_array_size(content); i++) {
            const json_t *text = json_object_get(json_array_get(content, i), "text");
            if (json_is_string(text))
                json_array_append_new(parts, json_pack("{s:s, s:O}", "type", ptype, "text", text));
        }
    }
    return json_pack("{s:s, s:s, s:o}", "type", "message", "role", role, "content", parts);
}

/* The response object's fields from the chat body. NULL with err on a bad body. */
static json_t *response_of(const json_t *body, const char *request_id, char *err, size_t errlen)
{
    const json_t *msgs = json_object_get(body, "messages");
    if (!json_is_array(msgs)) {
        ts_errf(err, errlen, "the request has no 'messages' (the realtime endpoint takes chat)");
        return NULL;
    }
    json_t *input = json_array();
    json_t *resp = json_pack("{s:s, s:o, s:[s]}", "conversation", "none", "input", input,
                             "output_modalities", "text");
    for (size_t i = 0; resp && i < json_array_size(msgs); i++) {
        json_t *item = item_of(json_array_get(msgs, i));
        if (!item) {
            ts_errf(err, errlen,
                    "messages[%zu]: only system, user and assistant text go over "
                    "the realtime API",
                    i);
            json_decref(resp);
            return NULL;
        }
        json_array_append_new(input, item);
    }
    const json_t *max = json_object_get(body, "max_completion_tokens");
    if (!max)
        max = json_object_get(body, "max_tokens");
    if (json_is_integer(max))
        json_object_set(resp, "max_output_tokens", (json_t *)max);
    static const char *const ext[] = {"ignore_eos", "min_tokens", "seed", "temperature"};
    for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++)
        if (json_object_get(body, ext[i]))
            json_object_set(resp, ext[i], json_object_get(body, ext[i]));
    if (request_id)
        json_object_set_new(resp, "metadata", json_pack("{s:s}", "request_id", request_id));
    return resp;
}

int realtime_request_from_chat(const char *body, size_t len, const char *request_id,
                               struct buf *out, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *b = json_loadb(body, len, 0, &jerr);
    if (!json_is_object(b)) {
        ts_errf(err, errlen, "the request body is not a JSON object: %s", b ? "" : jerr.text);
        json_decref(b);
        return TS_PARSE;
    }
    json_t *resp = response_of(b, request_id, err, errlen);
    json_decref(b);
    if (!resp)
        return TS_PARSE;
    json_t *ev = json_pack("{s:s, s:o}", "type", "response.create", "response", resp);
    char *s = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
    json_decref(ev);
    if (!s)
        return -ENOMEM;
    int rc = buf_append_str(out, s);
    free(s); /* jansson's allocator */
    return rc;
}
