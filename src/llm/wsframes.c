/*
 * wsframes.c - the generic JSON-frames mode: see wsframes.h.
 */
#include "llm/wsframes.h"

#include <stdio.h>
#include <string.h>

#include "llm/jsonptr.h"

/* A pointer field into out. 0, 1 when absent (not required), or -EINVAL. */
static int get_ptr(const json_t *o, const char *key, bool required, char *out, const char *name,
                   char *err, size_t errlen)
{
    const json_t *v = json_object_get(o, key);
    if (!v && !required)
        return 1;
    const char *p = json_string_value(v);
    size_t n = p ? json_string_length(v) : 0;
    if (!p || n > WSFRAMES_MAX_PTR || !jsonptr_valid(p, n) || memchr(p, '\0', n)) {
        ts_errf(err, errlen, "%s: '%s' must be a JSON pointer (\"/a/b\", at most %d bytes)", name,
                key, WSFRAMES_MAX_PTR);
        return -EINVAL;
    }
    memcpy(out, p, n + 1);
    return 0;
}

static int parse_end(struct wsframes_spec *s, const json_t *end, const char *name, char *err,
                     size_t errlen)
{
    if (json_is_object(end)) {
        const json_t *eq = json_object_get(end, "equals");
        if (!eq) {
            ts_errf(err, errlen, "%s: 'end' as an object needs 'pointer' and 'equals'", name);
            return -EINVAL;
        }
        s->end_equals = json_incref((json_t *)eq);
        return get_ptr(end, "pointer", true, s->end, name, err, errlen);
    }
    json_t *wrap = json_pack("{s:O}", "end", end);
    int rc = wrap ? get_ptr(wrap, "end", true, s->end, name, err, errlen) : -ENOMEM;
    json_decref(wrap);
    return rc;
}

int wsframes_spec_parse(struct wsframes_spec *s, const char *text, size_t len, const char *name,
                        char *err, size_t errlen)
{
    memset(s, 0, sizeof(*s));
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        ts_errf(err, errlen, "%s:%d:%d: %s", name, je.line, je.column, je.text);
        return -EINVAL;
    }
    static const char *const keys[] = {"url", "request", "delta", "end", "usage", "error"};
    const char *k;
    json_t *v;
    int rc = json_is_object(root) ? 0 : -EINVAL;
    if (rc)
        ts_errf(err, errlen, "%s: the spec must be a JSON object", name);
    json_object_foreach(root, k, v)
    {
        size_t i = 0;
        while (!rc && i < sizeof(keys) / sizeof(keys[0]) && strcmp(k, keys[i]))
            i++;
        if (!rc && i == sizeof(keys) / sizeof(keys[0])) {
            ts_errf(err, errlen, "%s: unknown key '%.60s' (url, request, delta, end, usage, error)",
                    name, k);
            rc = -EINVAL;
        }
    }
    const char *url = json_string_value(json_object_get(root, "url"));
    if (!rc && (!url || (strncmp(url, "ws://", 5) && strncmp(url, "wss://", 6)) ||
                strlen(url) >= sizeof(s->url))) {
        ts_errf(err, errlen, "%s: 'url' must be a ws:// or wss:// URL", name);
        rc = -EINVAL;
    }
    if (!rc && !json_object_get(root, "request")) {
        ts_errf(err, errlen, "%s: 'request' (the request frame's template) is required", name);
        rc = -EINVAL;
    }
    if (!rc) {
        snprintf(s->url, sizeof(s->url), "%s", url);
        s->request = json_incref(json_object_get(root, "request"));
        rc = get_ptr(root, "delta", true, s->delta, name, err, errlen);
    }
    if (!rc)
        rc = parse_end(s, json_object_get(root, "end"), name, err, errlen);
    if (!rc && (rc = get_ptr(root, "usage", false, s->usage, name, err, errlen)) >= 0) {
        s->has_usage = rc == 0;
        rc = 0;
    }
    if (!rc && (rc = get_ptr(root, "error", false, s->error, name, err, errlen)) >= 0) {
        s->has_error = rc == 0;
        rc = 0;
    }
    json_decref(root);
    if (rc)
        wsframes_spec_release(s);
    return rc;
}

void wsframes_spec_release(struct wsframes_spec *s)
{
    json_decref(s->request);
    json_decref(s->end_equals);
    s->request = s->end_equals = NULL;
}

/* The template with its placeholders filled in (a new reference). */
static json_t *fill(const json_t *t, const json_t *vals)
{
    if (json_is_string(t)) {
        const char *p = json_string_value(t);
        size_t n = strlen(p);
        if (n > 4 && !strncmp(p, "{{", 2) && !strcmp(p + n - 2, "}}")) {
            char key[32];
            snprintf(key, sizeof(key), "%.*s", (int)(n - 4), p + 2);
            json_t *v = json_object_get(vals, key);
            if (v)
                return json_incref(v);
        }
        return json_deep_copy(t);
    }
    if (json_is_array(t)) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < json_array_size(t); i++)
            json_array_append_new(a, fill(json_array_get(t, i), vals));
        return a;
    }
    if (json_is_object(t)) {
        json_t *o = json_object();
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)t, k, v)
        {
            json_object_set_new(o, k, fill(v, vals));
        }
        return o;
    }
    return json_deep_copy(t);
}

/* The placeholders' values for a chat body. */
static json_t *values_of(const json_t *body, const char *request_id)
{
    const json_t *msgs = json_object_get(body, "messages");
    const char *prompt = "";
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        const json_t *m = json_array_get(msgs, i);
        const json_t *c = json_object_get(m, "content");
        const char *role = json_string_value(json_object_get(m, "role"));
        if (role && !strcmp(role, "user") && json_is_string(c))
            prompt = json_string_value(c);
    }
    json_t *max = json_object_get(body, "max_completion_tokens");
    if (!max)
        max = json_object_get(body, "max_tokens");
    const char *model = json_string_value(json_object_get(body, "model"));
    return json_pack("{s:O, s:s, s:O?, s:s, s:s}", "messages", msgs, "prompt", prompt, "max_tokens",
                     max, "model", model ? model : "", "request_id", request_id ? request_id : "");
}

int wsframes_request(const struct wsframes_spec *s, const char *body, size_t len,
                     const char *request_id, struct buf *out, char *err, size_t errlen)
{
    json_t *b = json_loadb(body, len, 0, NULL);
    if (!json_is_array(json_object_get(b, "messages"))) {
        ts_errf(err, errlen, "the request has no 'messages' (JSON frames are made from chat)");
        json_decref(b);
        return TS_PARSE;
    }
    json_t *vals = values_of(b, request_id);
    json_decref(b);
    json_t *frame = vals ? fill(s->request, vals) : NULL;
    json_decref(vals);
    char *text = frame ? json_dumps(frame, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(frame);
    if (!text)
        return -ENOMEM;
    int rc = buf_append_str(out, text);
    free(text); /* jansson's allocator */
    return rc;
}

static const json_t *at(const struct realtime_decoder *d, const char *ptr)
{
    return jsonptr_get(d->root, ptr, strlen(ptr));
}

int wsframes_decode(const struct wsframes_spec *s, struct realtime_decoder *d, const char *data,
                    size_t len, struct realtime_event *ev, bool *end)
{
    memset(ev, 0, sizeof(*ev));
    openai_usage_clear(&ev->usage);
    ev->error.code_num = -1;
    *end = false;
    json_decref(d->root);
    json_error_t je;
    d->root = json_loadb(data, len, JSON_ALLOW_NUL | JSON_DECODE_ANY, &je);
    if (!d->root) {
        snprintf(d->errmsg, sizeof(d->errmsg), "%s", je.text);
        return TS_PARSE;
    }
    const json_t *e = at(d, s->end);
    *end = s->end_equals ? e && json_equal((json_t *)e, s->end_equals)
                         : e && !json_is_false(e) && !json_is_null(e);
    const json_t *u = s->has_usage ? at(d, s->usage) : NULL;
    if (json_is_integer(u)) {
        ev->usage.present = true;
        ev->usage.completion_tokens = json_integer_value(u);
    }
    const json_t *er = s->has_error ? at(d, s->error) : NULL;
    const json_t *delta = at(d, s->delta);
    if (er && !json_is_null(er)) {
        ev->kind = REALTIME_EV_ERROR;
        ev->error.message = json_is_string(er) ? json_string_value(er)
                                               : json_string_value(json_object_get(er, "message"));
        ev->error.type = json_string_value(json_object_get(er, "type"));
        ev->error.code = json_string_value(json_object_get(er, "code"));
        if (!ev->error.message)
            ev->error.message = "error frame";
    } else if (json_is_string(delta)) {
        ev->kind = REALTIME_EV_DELTA;
        ev->delta = json_string_value(delta);
        ev->delta_len = json_string_length(delta);
    } else if (*end) {
        ev->kind = REALTIME_EV_RESPONSE_DONE;
        ev->status = "completed";
    }
    return 0;
}
