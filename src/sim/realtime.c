/*
 * realtime.c - the simulator's /v1/realtime: OpenAI's Realtime API over
 * WebSocket, text modality. One session per connection; each response is
 * an engine request (gen.c), so its deltas go out at the engine's steps
 * like SSE chunks do, and several responses may follow one another on one
 * connection (multi-turn).
 *
 * Client events: session.update, conversation.item.create,
 * response.create (with conversation "auto" or "none", input items,
 * max_output_tokens, instructions, metadata), response.cancel. Server
 * events: session.created/updated, conversation.item.added + .done (the
 * beta API: conversation.item.created), response.created,
 * response.output_item.added, response.content_part.added,
 * response.output_text.delta (beta: response.text.delta),
 * response.output_text.done (beta: response.text.done),
 * response.content_part.done, response.output_item.done, response.done
 * with usage, and error. The beta names are used when the upgrade carries
 * "OpenAI-Beta: realtime=v1".
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "llm/openai_request.h"
#include "llm/sign.h"
#include "net/ws.h"
#include "sim/server_int.h"

#define RT_MAX_EVENT (4u << 20) /* one client event */
#define RT_MAX_ITEMS 4096       /* items of the default conversation */
#define RT_MAX_TEXT  (4u << 20) /* a response's text kept for its done events */

struct sim_rt {
    struct sim_server *s;
    struct sim_rt *prev, *next; /* s->rt_sessions */
    bool going_away;            /* the server stops: close with 1001 when idle */
    struct http_request *http;  /* NULL once finished */
    struct ws_conn ws;
    bool beta;
    char session_id[40];
    char model[128];
    char request_id[80];    /* the upgrade's X-Request-Id */
    json_t *instructions;   /* a string or NULL */
    json_t *max_output;     /* the session's max_output_tokens: an integer, "inf" or NULL */
    json_t *items;          /* the default conversation: chat messages */
    struct sim_req *active; /* the response being generated */
    char resp_id[48];
    char item_id[40];
    bool resp_oob;         /* conversation "none": not added to items */
    json_t *resp_metadata; /* the response's metadata, or NULL */
    json_t *resp_max;      /* the response's max_output_tokens as sent back */
    struct buf text;       /* the response's text so far */
    struct buf ev;         /* scratch for a delta event */
    uint64_t nevents;
    uint64_t nitems;
    struct chunk_signer signer; /* --sign-chunks: each response's deltas, chained */
};

static bool model_known(const struct sim_server *s, const char *model)
{
    return s->any_model || !strcmp(model, s->profile.model);
}

/* ---- sending events ---- */

static int rt_send_json(struct sim_rt *rt, json_t *ev)
{
    char id[40];
    snprintf(id, sizeof(id), "event_%s_%llu", rt->session_id + 5,
             (unsigned long long)++rt->nevents);
    int rc = json_object_set_new(ev, "event_id", json_string(id)) ? -ENOMEM : 0;
    char *s = rc ? NULL : json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    if (!s)
        return -ENOMEM;
    rc = rt->http ? ws_conn_send_text(&rt->ws, s, strlen(s)) : TS_CLOSED;
    free(s); /* jansson's allocator */
    return rc;
}

/* An "error" event; client_event is the id of the event it answers (may be NULL). */
static void rt_error(struct sim_rt *rt, const char *type, const char *code, const char *param,
                     const char *client_event, const char *msg)
{
    json_t *ev =
        json_pack("{s:s, s:{s:s, s:s?, s:s, s:s?, s:s?}}", "type", "error", "error", "type", type,
                  "code", code, "message", msg, "param", param, "event_id", client_event);
    if (ev)
        (void)rt_send_json(rt, ev);
}

static json_t *rt_session_json(struct sim_rt *rt)
{
    json_t *max = rt->max_output ? json_incref(rt->max_output) : json_string("inf");
    return json_pack("{s:s, s:s, s:s, s:s, s:[s], s:O?, s:o}", "type", "realtime", "object",
                     "realtime.session", "id", rt->session_id, "model", rt->model,
                     rt->beta ? "modalities" : "output_modalities", "text", "instructions",
                     rt->instructions,
                     rt->beta ? "max_response_output_tokens" : "max_output_tokens", max);
}

static void rt_send_session(struct sim_rt *rt, const char *type)
{
    json_t *sess = rt_session_json(rt);
    json_t *ev = sess ? json_pack("{s:s, s:o}", "type", type, "session", sess) : NULL;
    if (ev)
        (void)rt_send_json(rt, ev);
}

/* ---- the session's life ---- */

static void rt_free(struct sim_rt *rt)
{
    if (rt->prev)
        rt->prev->next = rt->next;
    else if (rt->s->rt_sessions == rt)
        rt->s->rt_sessions = rt->next;
    if (rt->next)
        rt->next->prev = rt->prev;
    ws_conn_release(&rt->ws);
    json_decref(rt->instructions);
    json_decref(rt->max_output);
    json_decref(rt->items);
    json_decref(rt->resp_metadata);
    json_decref(rt->resp_max);
    buf_release(&rt->text);
    buf_release(&rt->ev);
    ts_free(rt);
}

/* The connection is done (closed, failed, or the server stops): cancels the
 * response in flight, finishes the HTTP request, frees the session. */
static void rt_end(struct sim_rt *rt, bool abort)
{
    if (rt->active) {
        sim_gen_cancel_rt(rt->active);
        rt->active = NULL;
    }
    struct http_request *req = rt->http;
    rt->http = NULL;
    if (req) {
        if (abort)
            (void)http_stream_abort(req);
        else
            (void)http_stream_end(req);
    }
    rt_free(rt);
}

static int rt_write(struct ws_conn *ws, const void *data, size_t len, void *ctx)
{
    struct sim_rt *rt = ctx;
    (void)ws;
    if (!rt->http)
        return TS_CLOSED;
    int rc = http_stream_write(rt->http, data, len);
    return rc == TS_AGAIN ? 0 : rc; /* queued: a real server buffers too */
}

/* ---- conversation items ---- */

/* The text of a message item's content (input_text, text, output_text parts),
 * or NULL with *why set. */
static char *item_text(const json_t *item, const char **why)
{
    const json_t *content = json_object_get(item, "content");
    if (!json_is_array(content)) {
        *why = "content";
        return NULL;
    }
    struct buf b;
    buf_init(&b, RT_MAX_TEXT);
    for (size_t i = 0; i < json_array_size(content); i++) {
        const json_t *part = json_array_get(content, i);
        const char *t = json_string_value(json_object_get(part, "type"));
        const json_t *text = json_object_get(part, "text");
        if (!t || (strcmp(t, "input_text") && strcmp(t, "text") && strcmp(t, "output_text")) ||
            !json_is_string(text)) {
            *why = "content.type";
            buf_release(&b);
            return NULL;
        }
        if (buf_append(&b, json_string_value(text), json_string_length(text))) {
            *why = "content.text";
            buf_release(&b);
            return NULL;
        }
    }
    if (buf_reserve(&b, 0)) {
        *why = "content";
        buf_release(&b);
        return NULL;
    }
    return buf_take(&b, NULL);
}

/* A chat message {role, content} for a realtime message item, or NULL with *why. */
static json_t *item_to_message(const json_t *item, const char **why)
{
    const char *type = json_string_value(json_object_get(item, "type"));
    const char *role = json_string_value(json_object_get(item, "role"));
    if (!type || strcmp(type, "message")) {
        *why = "item.type";
        return NULL;
    }
    if (!role || (strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "system"))) {
        *why = "item.role";
        return NULL;
    }
    char *text = item_text(item, why);
    if (!text)
        return NULL;
    json_t *m = json_pack("{s:s, s:s}", "role", role, "content", text);
    ts_free(text);
    if (!m)
        *why = "item";
    return m;
}

static void rt_item_create(struct sim_rt *rt, const json_t *ev, const char *client_event)
{
    const json_t *item = json_object_get(ev, "item");
    const char *why = NULL;
    json_t *m = json_is_object(item) ? item_to_message(item, &why) : NULL;
    if (!m) {
        rt_error(rt, "invalid_request_error", "invalid_value", why ? why : "item", client_event,
                 "The item must be a message (role user, assistant or system) with text content.");
        return;
    }
    if (json_array_size(rt->items) >= RT_MAX_ITEMS) {
        json_decref(m);
        rt_error(rt, "invalid_request_error", "conversation_full", "item", client_event,
                 "The conversation holds its maximum number of items.");
        return;
    }
    char id[40];
    const char *given = json_string_value(json_object_get(item, "id"));
    snprintf(id, sizeof(id), "%.32s", given ? given : "");
    if (!given)
        snprintf(id, sizeof(id), "item_%s%llu", rt->session_id + 5,
                 (unsigned long long)++rt->nitems);
    if (json_array_append_new(rt->items, m))
        return;
    json_t *echo = json_deep_copy(item);
    if (echo && json_object_set_new(echo, "id", json_string(id)) == 0 &&
        json_object_set_new(echo, "object", json_string("realtime.item")) == 0 &&
        json_object_set_new(echo, "status", json_string("completed")) == 0) {
        const char *names[2] = {"conversation.item.added", "conversation.item.done"};
        for (int i = 0; i < (rt->beta ? 1 : 2); i++) {
            json_t *e = json_pack("{s:s, s:n, s:O}", "type",
                                  rt->beta ? "conversation.item.created" : names[i],
                                  "previous_item_id", "item", echo);
            if (e)
                (void)rt_send_json(rt, e);
        }
    }
    json_decref(echo);
}

/* ---- responses ---- */

/* The chat request a response.create asks for: messages from the session's
 * instructions and items (or the response's own), max_tokens, and the
 * simulator's extensions (ignore_eos, min_tokens, seed, temperature). */
static json_t *rt_chat_body(struct sim_rt *rt, const json_t *resp, const char **why)
{
    json_t *msgs = json_array();
    json_t *body = json_pack("{s:s, s:o}", "model", rt->model, "messages", msgs);
    if (!body)
        return NULL;
    const json_t *instr = json_object_get(resp, "instructions");
    if (!json_is_string(instr))
        instr = rt->instructions;
    if (json_is_string(instr) && json_string_length(instr))
        json_array_append_new(msgs, json_pack("{s:s, s:O}", "role", "system", "content", instr));
    const json_t *input = json_object_get(resp, "input");
    if (input && !json_is_array(input)) {
        *why = "response.input";
        json_decref(body);
        return NULL;
    }
    for (size_t i = 0; input && i < json_array_size(input); i++) {
        json_t *m = item_to_message(json_array_get(input, i), why);
        if (!m) {
            json_decref(body);
            return NULL;
        }
        json_array_append_new(msgs, m);
    }
    for (size_t i = 0; !input && i < json_array_size(rt->items); i++)
        json_array_append(msgs, json_array_get(rt->items, i));
    const json_t *max = json_object_get(resp, "max_output_tokens");
    if (!max)
        max = json_object_get(resp, "max_response_output_tokens");
    if (!max)
        max = rt->max_output;
    if (json_is_integer(max))
        json_object_set(body, "max_tokens", (json_t *)max);
    else if (max && !(json_is_string(max) && !strcmp(json_string_value(max), "inf"))) {
        *why = "response.max_output_tokens";
        json_decref(body);
        return NULL;
    }
    static const char *const ext[] = {"ignore_eos", "min_tokens", "seed", "temperature"};
    for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++)
        if (json_object_get(resp, ext[i]))
            json_object_set(body, ext[i], json_object_get(resp, ext[i]));
    return body;
}

static json_t *rt_response_json(struct sim_rt *rt, const char *status, json_t *details,
                                json_t *output, json_t *usage)
{
    json_t *r = json_pack(
        "{s:s, s:s, s:s, s:o, s:o, s:s?, s:[s], s:O?, s:O?, s:o}", "object", "realtime.response",
        "id", rt->resp_id, "status", status, "status_details", details ? details : json_null(),
        "output", output ? output : json_array(), "conversation_id",
        rt->resp_oob ? NULL : rt->session_id, rt->beta ? "modalities" : "output_modalities", "text",
        "max_output_tokens", rt->resp_max, "metadata", rt->resp_metadata, "usage",
        usage ? usage : json_null());
    return r;
}

static void rt_response_create(struct sim_rt *rt, const json_t *ev, const char *client_event)
{
    if (rt->active) {
        rt_error(rt, "invalid_request_error", "conversation_already_has_active_response", NULL,
                 client_event, "Conversation already has an active response in progress.");
        return;
    }
    if (rt->going_away)
        return; /* our close is out: nothing new starts */
    const json_t *resp = json_object_get(ev, "response");
    if (resp && !json_is_object(resp)) {
        rt_error(rt, "invalid_request_error", "invalid_type", "response", client_event,
                 "Invalid type for 'response': expected an object.");
        return;
    }
    const char *conv = json_string_value(json_object_get(resp, "conversation"));
    const char *why = NULL;
    json_t *body = rt_chat_body(rt, resp, &why);
    if (!body) {
        rt_error(rt, "invalid_request_error", "invalid_value", why, client_event,
                 "Invalid response: input items must be text messages; max_output_tokens an "
                 "integer or \"inf\".");
        return;
    }
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    struct openai_request q;
    struct openai_error e;
    openai_request_init(&q);
    int rc = text ? openai_request_parse(&q, OPENAI_CHAT, text, strlen(text), NULL, &e) : -ENOMEM;
    free(text); /* jansson's allocator */
    const json_t *meta = json_object_get(resp, "metadata");
    const char *rid = json_string_value(json_object_get(meta, "request_id"));
    if (!rc)
        rc = sim_gen_submit_rt(rt->s, rt, &q, rid ? rid : rt->request_id, &rt->active, &e);
    openai_request_release(&q);
    if (rc) {
        rt_error(rt, e.type, e.code[0] ? e.code : "invalid_value", e.param[0] ? e.param : NULL,
                 client_event, e.message);
        return;
    }
    snprintf(rt->resp_id, sizeof(rt->resp_id), "%s", sim_gen_req_id(rt->active));
    snprintf(rt->item_id, sizeof(rt->item_id), "item_%s%llu", rt->session_id + 5,
             (unsigned long long)++rt->nitems);
    rt->resp_oob = conv && !strcmp(conv, "none");
    json_decref(rt->resp_metadata);
    rt->resp_metadata = json_is_object(meta) ? json_deep_copy(meta) : NULL;
    json_decref(rt->resp_max);
    const json_t *max = json_object_get(resp, "max_output_tokens");
    rt->resp_max = max ? json_incref((json_t *)max)
                       : (rt->max_output ? json_incref(rt->max_output) : json_string("inf"));
    buf_reset(&rt->text);
    if (rt->s->sign_key_len && chunk_signer_init(&rt->signer, rt->s->sign_key, rt->s->sign_key_len))
        ts_warn("sim: realtime %s: cannot sign the deltas", rt->resp_id);
    json_t *r = rt_response_json(rt, "in_progress", NULL, NULL, NULL);
    json_t *out = r ? json_pack("{s:s, s:o}", "type", "response.created", "response", r) : NULL;
    if (out)
        (void)rt_send_json(rt, out);
}

static json_t *rt_item_json(struct sim_rt *rt, const char *status, bool with_text)
{
    json_t *content = with_text ? json_pack("[{s:s, s:s%}]", "type", "output_text", "text",
                                            buf_cstr(&rt->text), rt->text.len)
                                : json_array();
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:o}", "id", rt->item_id, "object", "realtime.item",
                     "type", "message", "status", status, "role", "assistant", "content", content);
}

/* output_item.added and content_part.added, before the first delta. */
static void rt_send_item_start(struct sim_rt *rt)
{
    json_t *item = rt_item_json(rt, "in_progress", false);
    json_t *ev = item ? json_pack("{s:s, s:s, s:i, s:o}", "type", "response.output_item.added",
                                  "response_id", rt->resp_id, "output_index", 0, "item", item)
                      : NULL;
    if (ev)
        (void)rt_send_json(rt, ev);
    ev = json_pack("{s:s, s:s, s:s, s:i, s:i, s:{s:s, s:s}}", "type", "response.content_part.added",
                   "response_id", rt->resp_id, "item_id", rt->item_id, "output_index", 0,
                   "content_index", 0, "part", "type", "output_text", "text", "");
    if (ev)
        (void)rt_send_json(rt, ev);
}

void sim_rt_on_token(struct sim_rt *rt, uint32_t index, const char *text, size_t len)
{
    if (!rt->http)
        return;
    if (index == 0)
        rt_send_item_start(rt);
    if (rt->text.len + len <= RT_MAX_TEXT && buf_append(&rt->text, text, len))
        ts_warn("sim: realtime %s: the text for the done events is cut", rt->resp_id);
    struct buf *b = &rt->ev;
    buf_reset(b);
    int rc = buf_appendf(b,
                         "{\"type\":\"%s\",\"event_id\":\"event_%s_%llu\",\"response_id\":\"%s\","
                         "\"item_id\":\"%s\",\"output_index\":0,\"content_index\":0,\"delta\":\"",
                         rt->beta ? "response.text.delta" : "response.output_text.delta",
                         rt->session_id + 5, (unsigned long long)++rt->nevents, rt->resp_id,
                         rt->item_id);
    if (!rc)
        rc = openai_json_escape(b, text, len);
    if (!rc)
        rc = buf_append_char(b, '"');
    if (!rc && rt->s->sign_key_len) {
        char sig[SIGN_ID_MAX];
        rc = chunk_sign(&rt->signer, text, len, sig);
        if (!rc)
            rc = buf_appendf(b, ",\"sig\":\"%s\"", sig);
    }
    if (!rc)
        rc = buf_append_char(b, '}');
    if (!rc)
        rc = ws_conn_send_text(&rt->ws, b->data, b->len);
    if (rc && rc != TS_CLOSED)
        ts_warn("sim: realtime %s: cannot send a delta: %s", rt->resp_id, ts_strerror(rc));
}

static json_t *rt_usage_json(const struct sim_rt_usage *u)
{
    return json_pack("{s:I, s:I, s:I, s:{s:I, s:I, s:i}, s:{s:I, s:i}}", "total_tokens",
                     (json_int_t)u->prompt_tokens + u->output_tokens, "input_tokens",
                     (json_int_t)u->prompt_tokens, "output_tokens", (json_int_t)u->output_tokens,
                     "input_token_details", "cached_tokens", (json_int_t)u->cached_tokens,
                     "text_tokens", (json_int_t)u->prompt_tokens, "audio_tokens", 0,
                     "output_token_details", "text_tokens", (json_int_t)u->output_tokens,
                     "audio_tokens", 0);
}

/* The done events of the text, its part and its item. */
static void rt_send_item_done(struct sim_rt *rt, const char *status)
{
    json_t *ev = json_pack("{s:s, s:s, s:s, s:i, s:i, s:s%}", "type",
                           rt->beta ? "response.text.done" : "response.output_text.done",
                           "response_id", rt->resp_id, "item_id", rt->item_id, "output_index", 0,
                           "content_index", 0, "text", buf_cstr(&rt->text), rt->text.len);
    if (ev)
        (void)rt_send_json(rt, ev);
    ev = json_pack("{s:s, s:s, s:s, s:i, s:i, s:{s:s, s:s%}}", "type", "response.content_part.done",
                   "response_id", rt->resp_id, "item_id", rt->item_id, "output_index", 0,
                   "content_index", 0, "part", "type", "output_text", "text", buf_cstr(&rt->text),
                   rt->text.len);
    if (ev)
        (void)rt_send_json(rt, ev);
    json_t *item = rt_item_json(rt, status, true);
    ev = item ? json_pack("{s:s, s:s, s:i, s:o}", "type", "response.output_item.done",
                          "response_id", rt->resp_id, "output_index", 0, "item", item)
              : NULL;
    if (ev)
        (void)rt_send_json(rt, ev);
}

/* response.done with status and usage; the answer joins the conversation. */
static void rt_send_done(struct sim_rt *rt, const char *status, json_t *details,
                         const struct sim_rt_usage *u, bool had_tokens)
{
    if (had_tokens)
        rt_send_item_done(rt, status);
    json_t *output = json_array();
    if (had_tokens)
        json_array_append_new(output, rt_item_json(rt, status, true));
    json_t *r = rt_response_json(rt, status, details, output, rt_usage_json(u));
    json_t *ev = r ? json_pack("{s:s, s:o}", "type", "response.done", "response", r) : NULL;
    if (ev)
        (void)rt_send_json(rt, ev);
    if (!rt->resp_oob && had_tokens && json_array_size(rt->items) < RT_MAX_ITEMS)
        json_array_append_new(rt->items, json_pack("{s:s, s:s%}", "role", "assistant", "content",
                                                   buf_cstr(&rt->text), rt->text.len));
    if (rt->going_away)
        (void)ws_conn_close(&rt->ws, WS_CLOSE_GOING_AWAY, "server shutting down");
}

void sim_rt_shutdown(struct sim_server *s)
{
    for (struct sim_rt *rt = s->rt_sessions; rt; rt = rt->next) {
        rt->going_away = true;
        if (!rt->active && rt->http)
            (void)ws_conn_close(&rt->ws, WS_CLOSE_GOING_AWAY, "server shutting down");
    }
}

void sim_rt_on_finish(struct sim_rt *rt, const char *finish_reason, const struct sim_rt_usage *u)
{
    rt->active = NULL; /* the engine frees it after the step */
    if (!rt->http)
        return;
    bool length = !strcmp(finish_reason, "length");
    json_t *details =
        length ? json_pack("{s:s, s:s}", "type", "incomplete", "reason", "max_output_tokens")
               : NULL;
    rt_send_done(rt, length ? "incomplete" : "completed", details, u, u->output_tokens > 0);
}

static void rt_response_cancel(struct sim_rt *rt, const char *client_event)
{
    if (!rt->active) {
        rt_error(rt, "invalid_request_error", "response_cancel_not_active", NULL, client_event,
                 "Cancellation failed: no active response found.");
        return;
    }
    size_t sent = rt->text.len;
    sim_gen_cancel_rt(rt->active);
    rt->active = NULL;
    struct sim_rt_usage u = {0, 0, 0};
    json_t *details = json_pack("{s:s, s:s}", "type", "cancelled", "reason", "client_cancelled");
    rt_send_done(rt, "cancelled", details, &u, sent > 0);
}

static void rt_session_update(struct sim_rt *rt, const json_t *ev, const char *client_event)
{
    const json_t *sess = json_object_get(ev, "session");
    if (!json_is_object(sess)) {
        rt_error(rt, "invalid_request_error", "invalid_type", "session", client_event,
                 "Invalid type for 'session': expected an object.");
        return;
    }
    const json_t *instr = json_object_get(sess, "instructions");
    if (json_is_string(instr)) {
        json_decref(rt->instructions);
        rt->instructions = json_incref((json_t *)instr);
    }
    const json_t *max = json_object_get(sess, "max_output_tokens");
    if (!max)
        max = json_object_get(sess, "max_response_output_tokens");
    if (max && !json_is_integer(max) &&
        !(json_is_string(max) && !strcmp(json_string_value(max), "inf"))) {
        rt_error(rt, "invalid_request_error", "invalid_value", "session.max_output_tokens",
                 client_event, "max_output_tokens must be an integer or \"inf\".");
        return;
    }
    if (max) {
        json_decref(rt->max_output);
        rt->max_output = json_incref((json_t *)max);
    }
    rt_send_session(rt, "session.updated");
}

/* ---- client events ---- */

static void rt_event(struct sim_rt *rt, const char *data, size_t len)
{
    json_error_t jerr;
    json_t *ev = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
    const char *type = json_string_value(json_object_get(ev, "type"));
    const char *client_event = json_string_value(json_object_get(ev, "event_id"));
    if (!ev || !type) {
        char msg[256];
        snprintf(msg, sizeof(msg), "%s", ev ? "The event has no 'type'." : jerr.text);
        rt_error(rt, "invalid_request_error", ev ? "missing_required_parameter" : "invalid_json",
                 ev ? "type" : NULL, client_event, msg);
    } else if (!strcmp(type, "conversation.item.create")) {
        rt_item_create(rt, ev, client_event);
    } else if (!strcmp(type, "response.create")) {
        rt_response_create(rt, ev, client_event);
    } else if (!strcmp(type, "response.cancel")) {
        rt_response_cancel(rt, client_event);
    } else if (!strcmp(type, "session.update")) {
        rt_session_update(rt, ev, client_event);
    } else {
        char msg[200];
        snprintf(msg, sizeof(msg),
                 "Invalid value: '%.80s'. The simulator's realtime endpoint is "
                 "text only.",
                 type);
        rt_error(rt, "invalid_request_error", "invalid_value", "type", client_event, msg);
    }
    json_decref(ev);
}

static void rt_message(struct ws_conn *ws, int opcode, const uint8_t *data, size_t len, void *ctx)
{
    struct sim_rt *rt = ctx;
    (void)ws;
    if (opcode != WS_OP_TEXT) {
        rt_error(rt, "invalid_request_error", "invalid_value", NULL, NULL,
                 "Events are JSON text messages.");
        return;
    }
    rt_event(rt, (const char *)data, len);
}

static const struct ws_conn_ops rt_ws_ops = {.on_message = rt_message, .write = rt_write};

static void rt_on_data(struct http_request *req, const char *data, size_t len)
{
    struct sim_rt *rt = req->user;
    int rc = ws_conn_feed(&rt->ws, data, len);
    if (rc == TS_CLOSED && ws_conn_close_sent(&rt->ws))
        rt_end(rt, false); /* the close handshake is done (or we closed on a bad frame) */
    else if (rc && rc != TS_CLOSED)
        rt_end(rt, true);
}

static void rt_on_abort(struct http_request *req)
{
    rt_end(req->user, true);
}

/* ---- the upgrade ---- */

/* Answers an upgrade that cannot go on; false if it may. */
static bool rt_refused(struct sim_server *s, struct http_request *req, const char **key)
{
    struct openai_error e;
    const char *upgrade = http_request_header(req, "upgrade");
    *key = http_request_header(req, "sec-websocket-key");
    const char *version = http_request_header(req, "sec-websocket-version");
    if (!upgrade || strcasecmp(upgrade, "websocket")) {
        openai_error_set(&e, 426, "invalid_request_error", NULL, "upgrade_required",
                         "The realtime API is served over WebSocket: send an Upgrade request.");
        sim_send_error(req, &e, "Upgrade: websocket\r\n");
        return true;
    }
    if (!ws_key_valid(*key) || !version || strcmp(version, "13")) {
        openai_error_set(&e, 400, "invalid_request_error", NULL, "invalid_handshake",
                         "Bad WebSocket handshake: Sec-WebSocket-Key and Sec-WebSocket-Version "
                         "13 are required.");
        sim_send_error(req, &e, "Sec-WebSocket-Version: 13\r\n");
        return true;
    }
    return sim_admin_intercept(s, req, false);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The model of ?model=NAME (percent-decoded, '+' a space), or the profile's. */
static void rt_model(struct sim_server *s, const char *query, char *out, size_t n)
{
    const char *m = query;
    while (m && *m) {
        if (!strncmp(m, "model=", 6)) {
            size_t j = 0;
            for (const char *p = m + 6; *p && *p != '&' && j + 1 < n; p++) {
                int hi = p[0] == '%' ? hexval(p[1]) : -1;
                int lo = hi >= 0 ? hexval(p[2]) : -1;
                if (lo >= 0) {
                    out[j++] = (char)(hi * 16 + lo);
                    p += 2;
                } else {
                    out[j++] = *p == '+' ? ' ' : *p;
                }
            }
            out[j] = '\0';
            return;
        }
        m = strchr(m, '&');
        m = m ? m + 1 : NULL;
    }
    snprintf(out, n, "%s", s->profile.model);
}

void sim_rt_handle(struct sim_server *s, struct http_request *req)
{
    const char *key;
    if (rt_refused(s, req, &key))
        return;
    struct sim_rt *rt = ts_calloc(1, sizeof(*rt));
    char accept[WS_ACCEPT_LEN + 1], extra[160];
    if (!rt || ws_accept_key(key, strlen(key), accept)) {
        ts_free(rt);
        (void)http_respond(req, 500, NULL, NULL, NULL, 0);
        return;
    }
    rt->s = s;
    rt->http = req;
    rt->items = json_array();
    buf_init(&rt->text, RT_MAX_TEXT + 1);
    buf_init(&rt->ev, RT_MAX_TEXT * 6 + 1024);
    const char *beta = http_request_header(req, "openai-beta");
    rt->beta = beta && strstr(beta, "realtime=v1");
    rt_model(s, req->query, rt->model, sizeof(rt->model));
    sim_copy_header_safe(rt->request_id, sizeof(rt->request_id),
                         http_request_header(req, "x-request-id"));
    snprintf(rt->session_id, sizeof(rt->session_id), "sess_%016llx",
             (unsigned long long)(s->id_seed ^ (++s->next_id * 0x9e3779b97f4a7c15ull)));
    bool known = model_known(s, rt->model);
    if (!rt->items || !known || ws_conn_init(&rt->ws, true, RT_MAX_EVENT, 0, &rt_ws_ops, rt)) {
        char model[sizeof(rt->model)];
        memcpy(model, rt->model, sizeof(model));
        rt_free(rt);
        if (!known)
            (void)sim_model_ok(s, req, model);
        else
            (void)http_respond(req, 500, NULL, NULL, NULL, 0);
        return;
    }
    snprintf(extra, sizeof(extra),
             "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n", accept);
    req->user = rt;
    http_request_on_abort(req, rt_on_abort);
    int rc = http_upgrade(req, extra, rt_on_data);
    if (rc) {
        rt->http = NULL;
        rt_free(rt);
        if (rc == -EINVAL)
            (void)http_respond(req, 400, NULL, NULL, NULL, 0);
        else
            (void)http_stream_end(req);
        return;
    }
    s->stats.realtime_sessions++;
    rt->next = s->rt_sessions;
    if (rt->next)
        rt->next->prev = rt;
    s->rt_sessions = rt;
    rt_send_session(rt, "session.created");
}
