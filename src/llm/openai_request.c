#include "openai_request.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

#define INVALID "invalid_request_error"

void openai_request_limits_default(struct openai_request_limits *lim)
{
    lim->max_messages = 4096;
    lim->max_parts = 16384;
    lim->max_inputs = 2048;
    lim->max_text_bytes = 32u << 20;
}

void openai_request_init(struct openai_request *r)
{
    memset(r, 0, sizeof(*r));
    r->max_tokens = -1;
    r->dimensions = -1;
}

void openai_request_release(struct openai_request *r)
{
    if (r->root)
        json_decref(r->root);
    ts_free(r->msg_store);
    ts_free(r->part_store);
    ts_free(r->input_store);
    ts_free(r->tool_store);
    openai_request_init(r);
}

const char *openai_json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a decimal";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "?";
}

/* "messages[0].content[1].type" -> "messages.[0].content.[1].type" */
static void param_of(const char *name, char *out, size_t size)
{
    size_t o = 0;
    for (const char *p = name; *p && o + 2 < size; p++) {
        if (*p == '[' && p > name && p[-1] != '.')
            out[o++] = '.';
        out[o++] = *p;
    }
    out[o] = '\0';
}

static int err_type(struct openai_error *e, const char *name, const char *want, const json_t *got)
{
    char param[96];
    param_of(name, param, sizeof(param));
    openai_error_set(e, 400, INVALID, param, "invalid_type",
                     "Invalid type for '%s': expected %s, but got %s instead.", name, want,
                     openai_json_kind(got));
    return TS_PARSE;
}

static int err_required(struct openai_error *e, const char *name)
{
    char param[96];
    param_of(name, param, sizeof(param));
    openai_error_set(e, 400, INVALID, param, "missing_required_parameter",
                     "'%s' is a required property", name);
    return TS_PARSE;
}

static int err_empty(struct openai_error *e, const char *name)
{
    char param[96];
    param_of(name, param, sizeof(param));
    openai_error_set(e, 400, INVALID, param, "empty_array",
                     "Invalid '%s': empty array. Expected an array with minimum length 1, but "
                     "got an empty array instead.",
                     name);
    return TS_PARSE;
}

static int err_too_long(struct openai_error *e, const char *name, size_t max, size_t got)
{
    openai_error_set(e, 400, INVALID, name, "array_above_max_length",
                     "Invalid '%s': array too long. Expected an array with maximum length %zu, "
                     "but got an array with length %zu instead.",
                     name, max, got);
    return TS_PARSE;
}

static int err_int_min(struct openai_error *e, const char *name, int64_t min, int64_t got)
{
    char param[96];
    param_of(name, param, sizeof(param));
    openai_error_set(e, 400, INVALID, param, "integer_below_min_value",
                     "Invalid '%s': integer below minimum value. Expected a value >= %" PRId64
                     ", but got %" PRId64 " instead.",
                     name, min, got);
    return TS_PARSE;
}

static int err_nomem(struct openai_error *e)
{
    openai_error_set(e, 500, "server_error", NULL, NULL,
                     "The server ran out of memory while reading the request.");
    return -ENOMEM;
}

/* Optional fields: absent and null leave *out unchanged and *has false. */
static int opt_bool(struct openai_error *e, const json_t *o, const char *key, bool *out)
{
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return err_type(e, key, "a boolean", v);
    *out = json_is_true(v);
    return 0;
}

static int opt_int(struct openai_error *e, const json_t *o, const char *key, int64_t *out,
                   bool *has)
{
    const json_t *v = json_object_get(o, key);
    if (has)
        *has = false;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v))
        return err_type(e, key, "an integer", v);
    *out = (int64_t)json_integer_value(v);
    if (has)
        *has = true;
    return 0;
}

static int opt_num(struct openai_error *e, const json_t *o, const char *key, double lo, double hi,
                   double *out, bool *has)
{
    const json_t *v = json_object_get(o, key);
    *has = false;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v))
        return err_type(e, key, "a decimal", v);
    double x = json_number_value(v);
    if (x < lo) {
        openai_error_set(e, 400, INVALID, key, "decimal_below_min_value",
                         "Invalid '%s': decimal below minimum value. Expected a value >= %g, but "
                         "got %g instead.",
                         key, lo, x);
        return TS_PARSE;
    }
    if (x > hi) {
        openai_error_set(e, 400, INVALID, key, "decimal_above_max_value",
                         "Invalid '%s': decimal above maximum value. Expected a value <= %g, but "
                         "got %g instead.",
                         key, hi, x);
        return TS_PARSE;
    }
    *out = x;
    *has = true;
    return 0;
}

static int opt_str(struct openai_error *e, const json_t *o, const char *key, const char **out)
{
    const json_t *v = json_object_get(o, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return err_type(e, key, "a string", v);
    *out = json_string_value(v);
    return 0;
}

static int add_text(struct openai_request *r, const struct openai_request_limits *lim,
                    struct openai_error *e, const char *name, size_t len)
{
    r->text_bytes += len;
    if (r->text_bytes > lim->max_text_bytes) {
        openai_error_set(e, 400, INVALID, name, "request_too_large",
                         "Request too large: the text of '%s' is more than %zu bytes.", name,
                         lim->max_text_bytes);
        return TS_PARSE;
    }
    return 0;
}

static bool role_ok(const char *role)
{
    static const char *const roles[] = {"system",    "developer", "user",
                                        "assistant", "tool",      "function"};
    for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
        if (strcmp(role, roles[i]) == 0)
            return true;
    return false;
}

/* Content part types that carry no text for us but are valid. */
static bool other_part_ok(const char *type)
{
    return strcmp(type, "image_url") == 0 || strcmp(type, "input_audio") == 0 ||
           strcmp(type, "refusal") == 0 || strcmp(type, "file") == 0;
}

static int parse_part(struct openai_request *r, const struct openai_request_limits *lim,
                      struct openai_error *e, const json_t *part, size_t i, size_t j,
                      struct openai_message *m, struct openai_span *parts)
{
    char name[64];
    snprintf(name, sizeof(name), "messages[%zu].content[%zu]", i, j);
    if (!json_is_object(part))
        return err_type(e, name, "an object", part);
    size_t nl = strlen(name);
    const json_t *type = json_object_get(part, "type");
    snprintf(name + nl, sizeof(name) - nl, ".type");
    if (!type || json_is_null(type))
        return err_required(e, name);
    if (!json_is_string(type))
        return err_type(e, name, "a string", type);
    const char *t = json_string_value(type);
    if (strcmp(t, "text") != 0) {
        if (other_part_ok(t))
            return 0;
        char param[96];
        param_of(name, param, sizeof(param));
        openai_error_set(e, 400, INVALID, param, "invalid_value",
                         "Invalid value: '%.64s'. Supported values are: 'text', 'image_url', "
                         "'input_audio', 'refusal', and 'file'.",
                         t);
        return TS_PARSE;
    }
    const json_t *text = json_object_get(part, "text");
    snprintf(name + nl, sizeof(name) - nl, ".text");
    if (!text || json_is_null(text))
        return err_required(e, name);
    if (!json_is_string(text))
        return err_type(e, name, "a string", text);
    struct openai_span *sp = &parts[m->n_parts++];
    sp->s = json_string_value(text);
    sp->len = json_string_length(text);
    m->text_len += sp->len;
    return add_text(r, lim, e, "messages", sp->len);
}

/* tool_call_id of a "tool" message, tool_calls of an assistant message;
 * name holds "messages[i]" (nl bytes) and is reused. */
static int parse_tool_fields(struct openai_error *e, const json_t *msg, char *name, size_t size,
                             size_t nl, struct openai_message *m)
{
    if (strcmp(m->role, "tool") == 0) {
        const json_t *id = json_object_get(msg, "tool_call_id");
        snprintf(name + nl, size - nl, ".tool_call_id");
        if (!id || json_is_null(id)) {
            char param[96];
            param_of(name, param, sizeof(param));
            openai_error_set(e, 400, INVALID, param, "missing_required_parameter",
                             "Missing parameter 'tool_call_id': messages with role 'tool' must "
                             "have a 'tool_call_id'.");
            return TS_PARSE;
        }
        if (!json_is_string(id))
            return err_type(e, name, "a string", id);
        m->tool_call_id = json_string_value(id);
    } else if (strcmp(m->role, "assistant") == 0) {
        const json_t *calls = json_object_get(msg, "tool_calls");
        snprintf(name + nl, size - nl, ".tool_calls");
        if (calls && !json_is_null(calls)) {
            if (!json_is_array(calls))
                return err_type(e, name, "an array", calls);
            m->tool_calls = calls;
        }
    }
    return 0;
}

static int parse_message(struct openai_request *r, const struct openai_request_limits *lim,
                         struct openai_error *e, const json_t *msg, size_t i,
                         struct openai_message *m, struct openai_span *parts)
{
    char name[64];
    snprintf(name, sizeof(name), "messages[%zu]", i);
    if (!json_is_object(msg))
        return err_type(e, name, "an object", msg);
    size_t nl = strlen(name);
    const json_t *role = json_object_get(msg, "role");
    snprintf(name + nl, sizeof(name) - nl, ".role");
    if (!role || json_is_null(role))
        return err_required(e, name);
    if (!json_is_string(role))
        return err_type(e, name, "a string", role);
    m->role = json_string_value(role);
    if (!role_ok(m->role)) {
        char param[96];
        param_of(name, param, sizeof(param));
        openai_error_set(e, 400, INVALID, param, "invalid_value",
                         "Invalid value: '%.64s'. Supported values are: 'system', 'assistant', "
                         "'user', 'function', 'tool', and 'developer'.",
                         m->role);
        return TS_PARSE;
    }
    const json_t *nm = json_object_get(msg, "name");
    snprintf(name + nl, sizeof(name) - nl, ".name");
    if (nm && !json_is_null(nm)) {
        if (!json_is_string(nm))
            return err_type(e, name, "a string", nm);
        m->name = json_string_value(nm);
    }
    int rc = parse_tool_fields(e, msg, name, sizeof(name), nl, m);
    if (rc)
        return rc;
    const json_t *content = json_object_get(msg, "content");
    snprintf(name + nl, sizeof(name) - nl, ".content");
    if (!content || json_is_null(content)) {
        if (strcmp(m->role, "assistant") == 0)
            return 0;
        return err_required(e, name);
    }
    if (json_is_string(content)) {
        struct openai_span *sp = &parts[m->n_parts++];
        sp->s = json_string_value(content);
        sp->len = json_string_length(content);
        m->text_len = sp->len;
        return add_text(r, lim, e, "messages", sp->len);
    }
    if (!json_is_array(content))
        return err_type(e, name, "one of a string or array of objects", content);
    for (size_t j = 0; j < json_array_size(content); j++) {
        if ((rc = parse_part(r, lim, e, json_array_get(content, j), i, j, m, parts)))
            return rc;
    }
    return 0;
}

static int parse_messages(struct openai_request *r, const struct openai_request_limits *lim,
                          struct openai_error *e, const json_t *root)
{
    const json_t *msgs = json_object_get(root, "messages");
    if (!msgs || json_is_null(msgs))
        return err_required(e, "messages");
    if (!json_is_array(msgs))
        return err_type(e, "messages", "an array", msgs);
    size_t n = json_array_size(msgs);
    if (n == 0)
        return err_empty(e, "messages");
    if (n > lim->max_messages)
        return err_too_long(e, "messages", lim->max_messages, n);
    size_t parts = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *c = json_object_get(json_array_get(msgs, i), "content");
        parts += json_is_array(c) ? json_array_size(c) : 1;
    }
    if (parts > lim->max_parts) {
        openai_error_set(e, 400, INVALID, "messages", "array_above_max_length",
                         "Invalid 'messages': too many content parts. Expected at most %zu, but "
                         "got %zu instead.",
                         lim->max_parts, parts);
        return TS_PARSE;
    }
    r->msg_store = ts_calloc(n, sizeof(*r->msg_store));
    r->part_store = ts_calloc(parts ? parts : 1, sizeof(*r->part_store));
    if (!r->msg_store || !r->part_store)
        return err_nomem(e);
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        struct openai_message *m = &r->msg_store[i];
        m->parts = r->part_store + used;
        int rc = parse_message(r, lim, e, json_array_get(msgs, i), i, m, r->part_store + used);
        if (rc)
            return rc;
        used += m->n_parts;
    }
    r->messages = r->msg_store;
    r->n_messages = n;
    return 0;
}

/* Counts a token array; every element must be an integer >= 0. */
static int count_tokens(struct openai_error *e, const char *name, const json_t *arr, int64_t *count)
{
    for (size_t k = 0; k < json_array_size(arr); k++) {
        const json_t *t = json_array_get(arr, k);
        char nm[64];
        if (!json_is_integer(t)) {
            snprintf(nm, sizeof(nm), "%s[%zu]", name, k);
            return err_type(e, nm, "an integer", t);
        }
        if (json_integer_value(t) < 0) {
            snprintf(nm, sizeof(nm), "%s[%zu]", name, k);
            return err_int_min(e, nm, 0, (int64_t)json_integer_value(t));
        }
    }
    *count = (int64_t)json_array_size(arr);
    return 0;
}

#define PROMPT_SHAPES                                                                              \
    "one of a string, array of strings, array of integers or array of arrays of integers"

/* prompt (completions) or input (embeddings). */
static int parse_inputs(struct openai_request *r, const struct openai_request_limits *lim,
                        struct openai_error *e, const json_t *root, const char *key)
{
    const json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v))
        return err_required(e, key);
    if (json_is_string(v)) {
        r->input_store = ts_calloc(1, sizeof(*r->input_store));
        if (!r->input_store)
            return err_nomem(e);
        r->input_store->text = json_string_value(v);
        r->input_store->len = json_string_length(v);
        r->input_store->n_tokens = -1;
        r->inputs = r->input_store;
        r->n_inputs = 1;
        return add_text(r, lim, e, key, r->input_store->len);
    }
    if (!json_is_array(v))
        return err_type(e, key, PROMPT_SHAPES, v);
    size_t n = json_array_size(v);
    if (n == 0)
        return err_empty(e, key);
    const json_t *first = json_array_get(v, 0);
    if (json_is_integer(first)) { /* one prompt given as token ids */
        r->input_store = ts_calloc(1, sizeof(*r->input_store));
        if (!r->input_store)
            return err_nomem(e);
        r->inputs = r->input_store;
        r->n_inputs = 1;
        return count_tokens(e, key, v, &r->input_store->n_tokens);
    }
    if (n > lim->max_inputs)
        return err_too_long(e, key, lim->max_inputs, n);
    r->input_store = ts_calloc(n, sizeof(*r->input_store));
    if (!r->input_store)
        return err_nomem(e);
    bool strings = json_is_string(first);
    for (size_t i = 0; i < n; i++) {
        const json_t *item = json_array_get(v, i);
        struct openai_input *in = &r->input_store[i];
        char name[64];
        snprintf(name, sizeof(name), "%s[%zu]", key, i);
        if (strings && json_is_string(item)) {
            in->text = json_string_value(item);
            in->len = json_string_length(item);
            in->n_tokens = -1;
            int rc = add_text(r, lim, e, key, in->len);
            if (rc)
                return rc;
        } else if (!strings && json_is_array(item)) {
            if (json_array_size(item) == 0)
                return err_empty(e, name);
            int rc = count_tokens(e, name, item, &in->n_tokens);
            if (rc)
                return rc;
        } else {
            return err_type(e, name, strings ? "a string" : "an array of integers", item);
        }
    }
    r->inputs = r->input_store;
    r->n_inputs = n;
    return 0;
}

static int parse_stop(struct openai_request *r, struct openai_error *e, const json_t *root)
{
    const json_t *v = json_object_get(root, "stop");
    if (!v || json_is_null(v))
        return 0;
    if (json_is_string(v)) {
        r->stop[0].s = json_string_value(v);
        r->stop[0].len = json_string_length(v);
        r->n_stop = 1;
        return 0;
    }
    if (!json_is_array(v))
        return err_type(e, "stop", "one of a string or array of strings", v);
    size_t n = json_array_size(v);
    if (n > OPENAI_MAX_STOP)
        return err_too_long(e, "stop", OPENAI_MAX_STOP, n);
    for (size_t i = 0; i < n; i++) {
        const json_t *s = json_array_get(v, i);
        if (!json_is_string(s)) {
            char name[16];
            snprintf(name, sizeof(name), "stop[%zu]", i);
            return err_type(e, name, "a string", s);
        }
        r->stop[i].s = json_string_value(s);
        r->stop[i].len = json_string_length(s);
    }
    r->n_stop = n;
    return 0;
}

/* A 400 about tools: param "tools", the message names the field. */
static int err_tool(struct openai_error *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int err_tool(struct openai_error *e, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    openai_error_set(e, 400, INVALID, "tools", "invalid_value", "%s", msg);
    return TS_PARSE;
}

/* 1..64 characters of [a-zA-Z0-9_-], OpenAI's rule for function names. */
static bool tool_name_ok(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
        if (n == 64)
            return false;
    }
    return n > 0;
}

static int parse_tool(struct openai_error *e, const json_t *t, size_t i, struct openai_tool *out)
{
    if (!json_is_object(t))
        return err_tool(e, "Invalid type for 'tools[%zu]': expected an object, but got %s instead.",
                        i, openai_json_kind(t));
    const json_t *type = json_object_get(t, "type");
    if (!json_is_string(type))
        return err_tool(e, "Missing required parameter: 'tools[%zu].type'.", i);
    if (strcmp(json_string_value(type), "function") != 0)
        return err_tool(e,
                        "Invalid value: '%.64s'. Supported values are: 'function' (in "
                        "'tools[%zu].type').",
                        json_string_value(type), i);
    const json_t *fn = json_object_get(t, "function");
    if (!fn || json_is_null(fn))
        return err_tool(e, "Missing required parameter: 'tools[%zu].function'.", i);
    if (!json_is_object(fn))
        return err_tool(e,
                        "Invalid type for 'tools[%zu].function': expected an object, but got %s "
                        "instead.",
                        i, openai_json_kind(fn));
    const json_t *name = json_object_get(fn, "name");
    if (!name || json_is_null(name))
        return err_tool(e, "Missing required parameter: 'tools[%zu].function.name'.", i);
    if (!json_is_string(name) || !tool_name_ok(json_string_value(name)) ||
        strlen(json_string_value(name)) != json_string_length(name))
        return err_tool(e,
                        "Invalid 'tools[%zu].function.name': expected a string of 1 to 64 "
                        "characters matching the pattern '^[a-zA-Z0-9_-]+$'.",
                        i);
    const json_t *desc = json_object_get(fn, "description");
    if (desc && !json_is_null(desc) && !json_is_string(desc))
        return err_tool(e,
                        "Invalid type for 'tools[%zu].function.description': expected a string, "
                        "but got %s instead.",
                        i, openai_json_kind(desc));
    const json_t *params = json_object_get(fn, "parameters");
    if (params && !json_is_null(params) && !json_is_object(params))
        return err_tool(e,
                        "Invalid type for 'tools[%zu].function.parameters': expected an object, "
                        "but got %s instead.",
                        i, openai_json_kind(params));
    out->name = json_string_value(name);
    out->function = fn;
    out->parameters = json_is_object(params) ? params : NULL;
    return 0;
}

static int parse_tools(struct openai_request *r, struct openai_error *e, const json_t *root)
{
    const json_t *tools = json_object_get(root, "tools");
    if (!tools || json_is_null(tools))
        return 0;
    if (!json_is_array(tools))
        return err_type(e, "tools", "an array", tools);
    size_t n = json_array_size(tools);
    if (n == 0)
        return 0;
    if (n > OPENAI_MAX_TOOLS)
        return err_too_long(e, "tools", OPENAI_MAX_TOOLS, n);
    r->tool_store = ts_calloc(n, sizeof(*r->tool_store));
    if (!r->tool_store)
        return err_nomem(e);
    for (size_t i = 0; i < n; i++) {
        int rc = parse_tool(e, json_array_get(tools, i), i, &r->tool_store[i]);
        if (rc)
            return rc;
    }
    r->tools = r->tool_store;
    r->n_tools = n;
    r->has_tools = true;
    return 0;
}

static int err_tool_choice(struct openai_error *e, const char *msg)
{
    openai_error_set(e, 400, INVALID, "tool_choice", "invalid_value", "%s", msg);
    return TS_PARSE;
}

static int parse_tool_choice(struct openai_request *r, struct openai_error *e, const json_t *root)
{
    const json_t *v = json_object_get(root, "tool_choice");
    r->tool_choice = OPENAI_TOOL_CHOICE_AUTO;
    if (!v || json_is_null(v))
        return 0;
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strcmp(s, "auto") == 0)
            return 0;
        if (strcmp(s, "none") == 0) {
            r->tool_choice = OPENAI_TOOL_CHOICE_NONE;
            return 0;
        }
        if (strcmp(s, "required") == 0) {
            r->tool_choice = OPENAI_TOOL_CHOICE_REQUIRED;
            return 0;
        }
        return err_tool_choice(e, "Invalid value for 'tool_choice': expected 'none', 'auto', "
                                  "'required' or an object naming a function.");
    }
    if (!json_is_object(v))
        return err_type(e, "tool_choice", "one of a string or object", v);
    const json_t *type = json_object_get(v, "type");
    const json_t *fn = json_object_get(v, "function");
    const json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
    if (!json_is_string(type) || strcmp(json_string_value(type), "function") != 0 ||
        !json_is_string(name))
        return err_tool_choice(e, "Invalid 'tool_choice': expected {\"type\": \"function\", "
                                  "\"function\": {\"name\": ...}}.");
    for (size_t i = 0; i < r->n_tools; i++) {
        if (strcmp(r->tools[i].name, json_string_value(name)) == 0) {
            r->tool_choice = OPENAI_TOOL_CHOICE_FUNCTION;
            r->tool_choice_name = r->tools[i].name;
            return 0;
        }
    }
    char msg[160];
    snprintf(msg, sizeof(msg),
             "Invalid 'tool_choice': the function '%.64s' is not one of the 'tools'.",
             json_string_value(name));
    return err_tool_choice(e, msg);
}

/* Fields of chat and completions. */
static int parse_generation(struct openai_request *r, struct openai_error *e, const json_t *root)
{
    int rc;
    if ((rc = opt_bool(e, root, "stream", &r->stream)))
        return rc;
    const json_t *so = json_object_get(root, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so))
            return err_type(e, "stream_options", "an object", so);
        if (!r->stream) {
            openai_error_set(e, 400, INVALID, "stream_options", NULL,
                             "The 'stream_options' parameter is only allowed when 'stream' is "
                             "enabled.");
            return TS_PARSE;
        }
        const json_t *iu = json_object_get(so, "include_usage");
        if (iu && !json_is_null(iu)) {
            if (!json_is_boolean(iu))
                return err_type(e, "stream_options.include_usage", "a boolean", iu);
            r->include_usage = json_is_true(iu);
        }
    }
    int64_t mt = -1, mct = -1;
    bool has_mt, has_mct, has_min;
    if ((rc = opt_int(e, root, "max_tokens", &mt, &has_mt)) ||
        (rc = opt_int(e, root, "max_completion_tokens", &mct, &has_mct)) ||
        (rc = opt_int(e, root, "min_tokens", &r->min_tokens, &has_min)))
        return rc;
    if (has_mt && mt < 1)
        return err_int_min(e, "max_tokens", 1, mt);
    if (has_mct && mct < 1)
        return err_int_min(e, "max_completion_tokens", 1, mct);
    if (has_min && r->min_tokens < 0)
        return err_int_min(e, "min_tokens", 0, r->min_tokens);
    r->max_tokens = has_mct ? mct : mt;
    if (r->max_tokens >= 0 && r->min_tokens > r->max_tokens) {
        openai_error_set(e, 400, INVALID, "min_tokens", "invalid_value",
                         "Invalid 'min_tokens': must be less than or equal to the maximum number "
                         "of tokens (%" PRId64 "), but got %" PRId64 " instead.",
                         r->max_tokens, r->min_tokens);
        return TS_PARSE;
    }
    int64_t n = 1;
    bool has_n;
    if ((rc = opt_bool(e, root, "ignore_eos", &r->ignore_eos)) || (rc = parse_stop(r, e, root)) ||
        (rc = opt_int(e, root, "seed", &r->seed, &r->has_seed)) ||
        (rc = opt_num(e, root, "temperature", 0, 2, &r->temperature, &r->has_temperature)) ||
        (rc = opt_num(e, root, "top_p", 0, 1, &r->top_p, &r->has_top_p)) ||
        (rc = opt_int(e, root, "n", &n, &has_n)))
        return rc;
    if (n != 1) {
        openai_error_set(e, 400, INVALID, "n", "invalid_value", "n must be 1");
        return TS_PARSE;
    }
    if (r->endpoint != OPENAI_CHAT)
        return 0;
    if ((rc = parse_tools(r, e, root)))
        return rc;
    return parse_tool_choice(r, e, root);
}

static int parse_embedding_opts(struct openai_request *r, struct openai_error *e,
                                const json_t *root)
{
    bool has;
    int rc = opt_int(e, root, "dimensions", &r->dimensions, &has);
    if (rc)
        return rc;
    if (has && r->dimensions < 1)
        return err_int_min(e, "dimensions", 1, r->dimensions);
    if (!has)
        r->dimensions = -1;
    const char *fmt;
    if ((rc = opt_str(e, root, "encoding_format", &fmt)))
        return rc;
    if (!fmt || strcmp(fmt, "float") == 0) {
        r->encoding_format = OPENAI_ENCODING_FLOAT;
    } else if (strcmp(fmt, "base64") == 0) {
        r->encoding_format = OPENAI_ENCODING_BASE64;
    } else {
        openai_error_set(e, 400, INVALID, "encoding_format", "invalid_value",
                         "Invalid value: '%.64s'. Supported values are: 'float' and 'base64'.",
                         fmt);
        return TS_PARSE;
    }
    return 0;
}

static int parse_body(struct openai_request *r, const struct openai_request_limits *lim,
                      struct openai_error *e, const char *body, size_t len)
{
    json_error_t je;
    r->root = json_loadb(body, len, JSON_ALLOW_NUL, &je);
    if (!r->root) {
        if (json_error_code(&je) == json_error_out_of_memory)
            return err_nomem(e);
        openai_error_set(e, 400, INVALID, NULL, NULL,
                         "We could not parse the JSON body of your request. (HINT: This likely "
                         "means you aren't using your HTTP library correctly. The OpenAI API "
                         "expects a JSON payload, but what was sent was not valid JSON. Error "
                         "at line %d column %d: %.100s)",
                         je.line, je.column, je.text);
        return TS_PARSE;
    }
    const json_t *root = r->root;
    if (!json_is_object(root)) {
        openai_error_set(e, 400, INVALID, NULL, "invalid_type",
                         "Invalid type for the request body: expected an object, but got %s "
                         "instead.",
                         openai_json_kind(root));
        return TS_PARSE;
    }
    const json_t *model = json_object_get(root, "model");
    if (!model || json_is_null(model))
        return err_required(e, "model");
    if (!json_is_string(model))
        return err_type(e, "model", "a string", model);
    r->model = json_string_value(model);
    int rc;
    switch (r->endpoint) {
    case OPENAI_CHAT:
        if ((rc = parse_messages(r, lim, e, root)))
            return rc;
        break;
    case OPENAI_COMPLETIONS:
        if ((rc = parse_inputs(r, lim, e, root, "prompt")))
            return rc;
        break;
    case OPENAI_EMBEDDINGS:
        if ((rc = parse_inputs(r, lim, e, root, "input")) ||
            (rc = parse_embedding_opts(r, e, root)))
            return rc;
        return opt_str(e, root, "user", &r->user);
    }
    if ((rc = parse_generation(r, e, root)))
        return rc;
    return opt_str(e, root, "user", &r->user);
}

int openai_request_parse(struct openai_request *r, enum openai_endpoint ep, const char *body,
                         size_t len, const struct openai_request_limits *lim,
                         struct openai_error *err)
{
    struct openai_request_limits def;
    if (!lim) {
        openai_request_limits_default(&def);
        lim = &def;
    }
    openai_request_release(r);
    if (ep != OPENAI_CHAT && ep != OPENAI_COMPLETIONS && ep != OPENAI_EMBEDDINGS) {
        openai_error_set(err, 404, INVALID, NULL, NULL, "Unknown endpoint.");
        return -EINVAL;
    }
    r->endpoint = ep;
    int rc = parse_body(r, lim, err, body, len);
    if (rc)
        openai_request_release(r);
    return rc;
}
