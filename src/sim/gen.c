/*
 * gen.c - chat and completion requests of the simulator: from the request
 * body to the engine, and from the engine's tokens to the wire.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/rng.h"
#include "llm/openai_request.h"
#include "llm/sign.h"
#include "llm/text.h"
#include "sim/blockhash.h"
#include "sim/server_int.h"

#define SIM_MAX_TEXT (64u << 20)

struct sim_req {
    struct sim_server *s;
    struct http_request *http; /* NULL once the response is finished */
    struct sim_req *next_dead;
    enum openai_endpoint ep;
    bool stream;
    bool include_usage;
    bool in_engine;
    bool enc_inited;
    bool tool_call;            /* the answer is a call of tool_name, its arguments in text */
    const char *finish_reason; /* "stop", "length" or "tool_calls" */
    uint32_t prompt_tokens;
    uint32_t output_tokens;
    uint32_t preemptions;
    uint32_t cached_tokens; /* prompt tokens the prefix cache held at admission */
    uint64_t seed;
    /* rendered text, when the pieces are not the word model's (answers, stop) */
    char *text;
    uint32_t *piece_end; /* end offset of each piece in text */
    uint32_t npieces;
    struct openai_stream_enc enc;
    struct chunk_signer *signer; /* --sign-chunks: an id on every event */
    struct buf out;              /* stream: one write's chunks; otherwise the whole answer */
    char *model;
    char *tool_name;
    char call_id[40];
    char id[48];
    char request_id[80];
    char traceparent[64]; /* the W3C header, for --trace-log */
    uint64_t arrival_ns, admitted_ns, first_token_ns, last_token_ns;
    uint64_t *token_ns; /* write time of each token, with --trace-log */
};

static uint64_t mix(uint64_t x)
{
    return splitmix64_next(&x);
}

/* ---- pieces of the answer ---- */

struct piece_collect {
    struct buf *text;
    uint32_t *ends;
    uint32_t n, cap;
};

static int collect_piece(const char *p, size_t n, void *ctx)
{
    struct piece_collect *c = ctx;
    if (c->n == c->cap) {
        uint32_t cap = c->cap ? c->cap * 2 : 64;
        uint32_t *e = ts_realloc(c->ends, cap * sizeof(*e));
        if (!e)
            return -ENOMEM;
        c->ends = e;
        c->cap = cap;
    }
    int rc = buf_append(c->text, p, n);
    if (rc)
        return rc;
    c->ends[c->n++] = (uint32_t)c->text->len;
    return 0;
}

/* The text of piece i (answers/stop text when rendered, else the word model). */
static const char *piece(const struct sim_req *r, uint32_t i, size_t *len)
{
    if (r->text && i < r->npieces) {
        uint32_t start = i ? r->piece_end[i - 1] : 0;
        *len = r->piece_end[i] - start;
        return r->text + start;
    }
    const char *t = text_token(r->seed, i);
    *len = strlen(t);
    return t;
}

/*
 * Renders the first `count` pieces (answer first, then the word model) so
 * stop strings can be searched, and cuts at the earliest stop string.
 * Returns the number of pieces to send (>= 1), or a negative error.
 */
static int render_pieces(struct sim_req *r, const char *answer, uint32_t count,
                         const struct openai_request *q, bool *stopped)
{
    struct buf text;
    buf_init(&text, SIM_MAX_TEXT);
    struct piece_collect c = {&text, NULL, 0, 0};
    int rc = 0;
    uint32_t from_answer = 0;
    if (answer) {
        rc = text_split_tokens(answer, strlen(answer), collect_piece, &c);
        from_answer = c.n;
        if (c.n > count)
            c.n = count;
        text.len = c.n ? c.ends[c.n - 1] : 0;
    }
    for (uint32_t i = c.n; !rc && i < count; i++) {
        const char *t = text_token(r->seed, i - from_answer + (answer ? 1000003u : 0));
        rc = collect_piece(t, strlen(t), &c);
    }
    *stopped = false;
    if (!rc && q->n_stop) {
        size_t cut = text.len;
        for (size_t k = 0; k < q->n_stop; k++) {
            if (!q->stop[k].len)
                continue;
            const char *hit =
                memmem(text.data ? text.data : "", text.len, q->stop[k].s, q->stop[k].len);
            if (hit && (size_t)(hit - text.data) < cut)
                cut = (size_t)(hit - text.data);
        }
        if (cut < text.len) {
            *stopped = true;
            uint32_t n = 0;
            while (n < c.n && c.ends[n] <= cut)
                n++;
            if (n < c.n && (n == 0 || c.ends[n - 1] < cut)) {
                c.ends[n] = (uint32_t)cut; /* a part of the piece the stop string begins in */
                n++;
            }
            if (n == 0) { /* the stop string starts the answer: one empty piece */
                c.ends[0] = 0;
                n = 1;
            }
            c.n = n;
            buf_truncate(&text, cut);
        }
    }
    if (rc) {
        buf_release(&text);
        ts_free(c.ends);
        return rc;
    }
    if (buf_reserve(&text, 0)) {
        buf_release(&text);
        ts_free(c.ends);
        return -ENOMEM;
    }
    r->text = buf_take(&text, NULL);
    r->piece_end = c.ends;
    r->npieces = c.n;
    return (int)c.n;
}

/* ---- lifecycle ---- */

static void req_free(struct sim_req *r)
{
    if (r->enc_inited)
        openai_stream_enc_release(&r->enc);
    ts_free(r->signer);
    buf_release(&r->out);
    ts_free(r->text);
    ts_free(r->piece_end);
    ts_free(r->token_ns);
    ts_free(r->model);
    ts_free(r->tool_name);
    ts_free(r);
}

static void free_dead(struct sim_server *s)
{
    while (s->dead) {
        struct sim_req *r = s->dead;
        s->dead = r->next_dead;
        req_free(r);
    }
}

static void trace_write(struct sim_req *r, const char *status, uint64_t finish_ns)
{
    struct sim_server *s = r->s;
    if (!s->trace)
        return;
    struct buf b;
    buf_init(&b, 16u << 20);
    int rc = buf_appendf(&b,
                         "{\"request_id\":\"%s\",\"traceparent\":\"%s\",\"id\":\"%s\","
                         "\"endpoint\":\"%s\",\"stream\":%s,"
                         "\"status\":\"%s\",\"prompt_tokens\":%u,\"cached_tokens\":%u,"
                         "\"output_tokens\":%u,"
                         "\"preemptions\":%u,\"arrival_ns\":%llu,\"admitted_ns\":%llu,"
                         "\"first_token_ns\":%llu,\"finish_ns\":%llu,\"token_ns\":[",
                         r->request_id, r->traceparent, r->id, openai_endpoint_name(r->ep),
                         r->stream ? "true" : "false", status, r->prompt_tokens, r->cached_tokens,
                         r->output_tokens, r->preemptions, (unsigned long long)r->arrival_ns,
                         (unsigned long long)r->admitted_ns, (unsigned long long)r->first_token_ns,
                         (unsigned long long)finish_ns);
    for (uint32_t i = 0; !rc && r->token_ns && i < r->output_tokens && r->token_ns[i]; i++)
        rc = buf_appendf(&b, "%s%llu", i ? "," : "", (unsigned long long)r->token_ns[i]);
    if (!rc)
        rc = buf_append_str(&b, "]}\n");
    if (!rc)
        (void)asyncw_write(s->trace, b.data, b.len);
    buf_release(&b);
}

static void on_abort(struct http_request *req)
{
    struct sim_req *r = req->user;
    struct sim_server *s = r->s;
    if (r->in_engine) {
        sim_engine_cancel(s->engine, r);
        r->in_engine = false;
    }
    s->stats.cancelled++;
    trace_write(r, "cancelled", ts_now_ns());
    if (r->stream)
        (void)http_stream_end(req);
    else
        (void)http_respond(req, 499, NULL, NULL, NULL, 0);
    r->http = NULL;
    req_free(r);
}

/* ---- stepping the engine in real time ---- */

static void on_step(struct ptimer *t);

static void run_step(struct sim_server *s, uint64_t model_now)
{
    s->model_now = model_now;
    uint64_t d = sim_engine_step(s->engine, model_now);
    free_dead(s);
    if (!d || s->timer_closing) {
        s->step_due = 0;
        return;
    }
    s->step_due = sim_engine_next_due(s->engine);
    if (!s->step_due)
        s->step_due = model_now + d;
    int rc = ptimer_start_at(&s->step_timer, s->step_due, on_step);
    if (rc) {
        ts_error("sim: cannot arm the step timer: %s", strerror(-rc));
        s->step_due = 0;
    }
}

static void on_step(struct ptimer *t)
{
    struct sim_server *s = t->data;
    uint64_t now = ts_now_ns();
    uint64_t due = s->step_due;
    /* stay on the model's schedule unless the loop fell more than 1 ms behind */
    run_step(s, now - due <= TS_NS_PER_MS ? due : now);
}

static void kick(struct sim_server *s)
{
    if (!s->step_due && !s->timer_closing)
        run_step(s, ts_now_ns());
}

/* ---- engine callbacks ---- */

void sim_gen_on_admit(void *ctx, void *req, uint64_t now_ns)
{
    struct sim_server *s = ctx;
    struct sim_req *r = req;
    struct sim_req_info info;
    if (sim_engine_req_info(s->engine, r, &info) == 0)
        r->cached_tokens = info.cached_tokens; /* set at the first admission, kept after */
    if (!r->admitted_ns) {
        r->admitted_ns = now_ns;
        prom_hist_observe(&r->s->h_queue, (double)(now_ns - r->arrival_ns) / 1e9);
    }
}

void sim_gen_on_preempt(void *ctx, void *req, uint64_t now_ns)
{
    struct sim_req *r = req;
    r->preemptions++;
}

/*
 * Puts "id: SEQ.PREV.MAC" before every event in out ("data: X\n\n" each, as
 * the encoder writes them), signing X.
 */
static int sign_events(struct sim_req *r)
{
    struct buf *scratch = &r->s->sign_scratch;
    buf_reset(scratch);
    const char *p = r->out.data, *end = r->out.data + r->out.len;
    while (p < end) {
        const char *stop = memmem(p, (size_t)(end - p), "\n\n", 2);
        if (!stop || end - p < 6 || memcmp(p, "data: ", 6))
            return TS_PARSE;
        char id[SIGN_ID_MAX];
        int rc = chunk_sign(r->signer, p + 6, (size_t)(stop - p - 6), id);
        if (!rc)
            rc = buf_appendf(scratch, "id: %s\n", id);
        if (!rc)
            rc = buf_append(scratch, p, (size_t)(stop + 2 - p));
        if (rc)
            return rc;
        p = stop + 2;
    }
    buf_reset(&r->out);
    return buf_append(&r->out, scratch->data, scratch->len);
}

static void stream_write(struct sim_req *r)
{
    if (!r->out.len)
        return;
    if (r->signer && sign_events(r))
        ts_warn("sim: %s: cannot sign a chunk", r->id);
    int rc = http_stream_write(r->http, r->out.data, r->out.len);
    buf_reset(&r->out);
    (void)rc; /* TS_AGAIN: queued anyway (a real server buffers too); TS_CLOSED: abort follows */
}

void sim_gen_on_token(void *ctx, void *req, uint32_t index, uint64_t now_ns)
{
    struct sim_server *s = ctx;
    struct sim_req *r = req;
    size_t len;
    const char *t = piece(r, index, &len);
    if (index == 0) {
        r->first_token_ns = now_ns;
        prom_hist_observe(&s->h_ttft, (double)(now_ns - r->arrival_ns) / 1e9);
    } else {
        prom_hist_observe(&s->h_tpot, (double)(now_ns - r->last_token_ns) / 1e9);
    }
    r->last_token_ns = now_ns;
    int rc = 0;
    if (r->stream && r->tool_call) {
        if (index == 0)
            rc = openai_stream_enc_tool_call(&r->enc, &r->out, 0, r->call_id, r->tool_name);
        if (!rc)
            rc = openai_stream_enc_tool_args(&r->enc, &r->out, 0, t, len);
        if (!rc)
            stream_write(r);
    } else if (r->stream) {
        if (index == 0)
            rc = openai_stream_enc_role(&r->enc, &r->out);
        if (!rc)
            rc = openai_stream_enc_content(&r->enc, &r->out, t, len);
        if (!rc)
            stream_write(r);
    } else {
        rc = buf_append(&r->out, t, len);
    }
    if (rc)
        ts_warn("sim: %s: cannot encode token %u: %s", r->id, index, ts_strerror(rc));
    uint64_t written = ts_now_ns();
    if (r->token_ns)
        r->token_ns[index] = written;
    prom_hist_observe(&s->h_send_lag, (double)(written - now_ns) / 1e9);
    s->stats.tokens_sent++;
}

/*
 * Adds "prompt_tokens_details":{"cached_tokens":N} (OpenAI's field) to the
 * usage object the encoder wrote last in b[from..]: it ends with
 * "total_tokens":T}. Returns 0, TS_PARSE if there is no such object, or a buf
 * error.
 */
static int usage_add_cached(struct buf *b, size_t from, uint32_t cached)
{
    static const char key[] = "\"total_tokens\":";
    const char *last = NULL, *p = b->data ? b->data + from : NULL;
    const char *end = b->data ? b->data + b->len : NULL;
    while (p && p < end && (p = memmem(p, (size_t)(end - p), key, sizeof(key) - 1)) != NULL) {
        last = p;
        p += sizeof(key) - 1;
    }
    if (!last)
        return TS_PARSE;
    size_t pos = (size_t)(last - b->data) + sizeof(key) - 1;
    while (pos < b->len && b->data[pos] >= '0' && b->data[pos] <= '9')
        pos++;
    if (pos >= b->len || b->data[pos] != '}')
        return TS_PARSE;
    char ins[80];
    int n = snprintf(ins, sizeof(ins), ",\"prompt_tokens_details\":{\"cached_tokens\":%u}", cached);
    if (n < 0 || (size_t)n >= sizeof(ins))
        return -EINVAL;
    int rc = buf_reserve(b, (size_t)n);
    if (rc)
        return rc;
    memmove(b->data + pos + n, b->data + pos, b->len - pos + 1); /* with the NUL */
    memcpy(b->data + pos, ins, (size_t)n);
    b->len += (size_t)n;
    return 0;
}

void sim_gen_on_finish(void *ctx, void *req, uint64_t now_ns)
{
    struct sim_server *s = ctx;
    struct sim_req *r = req;
    r->in_engine = false;
    int rc = 0;
    if (r->stream) {
        rc = openai_stream_enc_finish(&r->enc, &r->out, r->finish_reason);
        size_t usage_at = r->out.len;
        if (!rc && r->include_usage)
            rc = openai_stream_enc_usage(&r->enc, &r->out, r->prompt_tokens, r->output_tokens);
        if (!rc && r->include_usage && s->profile.prefix_caching)
            rc = usage_add_cached(&r->out, usage_at, r->cached_tokens);
        if (!rc)
            rc = openai_stream_enc_done(&r->out);
        if (!rc)
            stream_write(r);
        (void)http_stream_end(r->http);
    } else {
        struct buf body;
        buf_init(&body, SIM_MAX_TEXT * 2);
        int64_t created = (int64_t)(ts_wall_ns() / TS_NS_PER_S);
        if (r->tool_call)
            rc = openai_encode_tool_call_response(
                &body, r->id, created, r->model, r->call_id, r->tool_name, buf_cstr(&r->out),
                r->out.len, r->finish_reason, r->prompt_tokens, r->output_tokens);
        else
            rc = openai_encode_response(&body, r->ep, r->id, created, r->model, buf_cstr(&r->out),
                                        r->out.len, r->finish_reason, r->prompt_tokens,
                                        r->output_tokens);
        if (!rc && s->profile.prefix_caching)
            rc = usage_add_cached(&body, 0, r->cached_tokens);
        if (rc)
            (void)http_respond(r->http, 500, NULL, NULL, NULL, 0);
        else
            (void)http_respond(r->http, 200, "application/json", NULL, body.data, body.len);
        buf_release(&body);
    }
    r->http = NULL;
    prom_hist_observe(&s->h_e2e, (double)(now_ns - r->arrival_ns) / 1e9);
    s->finished_by[r->finish_reason[0] == 'l']++;
    s->stats.finished++;
    trace_write(r, "finished", ts_now_ns());
    r->next_dead = s->dead;
    s->dead = r;
}

/* ---- the request ---- */

/*
 * Prompt tokens are counted piece by piece; with prefix caching the same
 * pieces, in the same order, go through a block hasher (h, NULL otherwise),
 * so equal prompt prefixes give equal block hashes. The 3 template tokens of
 * a message (or tool, or call, or the reply's priming) are hashed as a start
 * marker, the role and a separator.
 */
static uint64_t span_tokens(struct sim_block_hasher *h, const char *s, size_t len)
{
    return h ? sim_block_hasher_text(h, s, len) : text_count_tokens(s, len);
}

static uint64_t template_tokens(struct sim_block_hasher *h, const char *role)
{
    if (h) {
        sim_block_hasher_piece(h, "<|start|>", 9);
        sim_block_hasher_piece(h, role, strlen(role));
        sim_block_hasher_piece(h, "<|sep|>", 7);
    }
    return 3;
}

/* Approximate tokens of a JSON value as compact text (0 if it cannot be written). */
static uint64_t json_tokens(struct sim_block_hasher *h, const json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    uint64_t n = s ? span_tokens(h, s, strlen(s)) : 0;
    free(s); /* jansson's allocator */
    return n;
}

/* Tokens of the tool calls of an assistant message: each call's name and arguments. */
static uint64_t tool_calls_tokens(struct sim_block_hasher *h, const json_t *calls)
{
    uint64_t n = 0;
    for (size_t i = 0; i < json_array_size(calls); i++) {
        const json_t *fn = json_object_get(json_array_get(calls, i), "function");
        const json_t *name = json_object_get(fn, "name");
        const json_t *args = json_object_get(fn, "arguments");
        n += template_tokens(h, "call");
        if (json_is_string(name))
            n += span_tokens(h, json_string_value(name), json_string_length(name));
        if (json_is_string(args))
            n += span_tokens(h, json_string_value(args), json_string_length(args));
    }
    return n;
}

static uint32_t count_prompt(const struct openai_request *q, struct sim_block_hasher *h,
                             const char **last_user, size_t *last_user_len)
{
    uint64_t n = 0;
    *last_user = NULL;
    *last_user_len = 0;
    if (q->endpoint == OPENAI_CHAT) {
        /* the tool definitions are put into the prompt by the chat template */
        for (size_t i = 0; i < q->n_tools; i++)
            n += template_tokens(h, "tool") + json_tokens(h, q->tools[i].function);
        /* chat template overhead: 3 tokens per message and 3 to prime the reply */
        for (size_t i = 0; i < q->n_messages; i++) {
            const struct openai_message *m = &q->messages[i];
            n += template_tokens(h, m->role);
            if (m->tool_calls)
                n += tool_calls_tokens(h, m->tool_calls);
            for (size_t k = 0; k < m->n_parts; k++)
                n += span_tokens(h, m->parts[k].s, m->parts[k].len);
            if (!strcmp(m->role, "user") && m->n_parts) {
                *last_user = m->parts[m->n_parts - 1].s;
                *last_user_len = m->parts[m->n_parts - 1].len;
            }
        }
        n += template_tokens(h, "assistant");
    } else {
        for (size_t i = 0; i < q->n_inputs; i++) {
            const struct openai_input *in = &q->inputs[i];
            if (in->text) {
                n += span_tokens(h, in->text, in->len);
                *last_user = in->text;
                *last_user_len = in->len;
            } else {
                if (h)
                    sim_block_hasher_opaque(h, (uint64_t)in->n_tokens);
                n += (uint64_t)in->n_tokens;
            }
        }
    }
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

static void reject(struct sim_server *s, struct http_request *req, int rc, uint32_t prompt,
                   uint32_t out, const char *param)
{
    struct openai_error e;
    const char *extra = NULL;
    if (rc == -E2BIG) {
        openai_error_set(&e, 400, "invalid_request_error", param, "context_length_exceeded",
                         "This model's maximum context length is %u tokens. However, you "
                         "requested %llu tokens (%u in the messages, %u in the completion). "
                         "Please reduce the length of the messages or completion.",
                         s->profile.max_model_len, (unsigned long long)prompt + out, prompt, out);
        s->stats.rejected_400++;
    } else if (rc == -EBUSY) {
        openai_error_set(&e, 429, "rate_limit_error", NULL, "rate_limit_exceeded",
                         "The server is overloaded: its waiting queue is full (%u requests). "
                         "Please retry after a short wait.",
                         s->profile.max_waiting);
        extra = "Retry-After: 1\r\n";
        s->stats.rejected_429++;
    } else if (rc == -EAGAIN) {
        openai_error_set(&e, 503, "server_error", NULL, "model_loading",
                         "The model is loading. Please retry shortly.");
        extra = "Retry-After: 5\r\n";
    } else {
        openai_error_set(&e, 500, "server_error", NULL, NULL, "Internal error: %s",
                         ts_strerror(rc));
    }
    sim_send_error(req, &e, extra);
}

/* Copies a header value kept JSON-safe without escaping: printable ASCII but
 * quote and backslash. */
void sim_copy_header_safe(char *dst, size_t n, const char *v)
{
    size_t j = 0;
    for (size_t i = 0; v && v[i] && j + 1 < n; i++)
        if (v[i] > 0x20 && v[i] < 0x7f && v[i] != '"' && v[i] != '\\')
            dst[j++] = v[i];
    dst[j] = '\0';
}

static void copy_request_id(struct sim_req *r, const struct http_request *req)
{
    sim_copy_header_safe(r->request_id, sizeof(r->request_id),
                         http_request_header(req, "x-request-id"));
    sim_copy_header_safe(r->traceparent, sizeof(r->traceparent),
                         http_request_header(req, "traceparent"));
}

/* ---- tool calls ---- */

/*
 * The tool the answer calls, or NULL for a text answer: a call is made when
 * the request has tools, tool_choice is not "none" and the last message is
 * the user's (after a "tool" message the model answers in text).
 */
static const struct openai_tool *tool_to_call(const struct openai_request *q)
{
    if (q->endpoint != OPENAI_CHAT || !q->n_tools || q->tool_choice == OPENAI_TOOL_CHOICE_NONE ||
        !q->n_messages || strcmp(q->messages[q->n_messages - 1].role, "user") != 0)
        return NULL;
    if (q->tool_choice == OPENAI_TOOL_CHOICE_FUNCTION)
        for (size_t i = 0; i < q->n_tools; i++)
            if (q->tools[i].name == q->tool_choice_name)
                return &q->tools[i];
    return &q->tools[0];
}

/* The first (up to) 8 words of the user's message, as the inside of a JSON string. */
static int append_words(struct buf *out, const struct openai_message *m)
{
    int words = 0, rc = 0;
    for (size_t k = 0; !rc && k < m->n_parts && words < 8; k++) {
        const char *p = m->parts[k].s, *end = p + m->parts[k].len;
        while (!rc && p < end && words < 8) {
            while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r'))
                p++;
            const char *w = p;
            while (p < end && *p != ' ' && *p != '\n' && *p != '\t' && *p != '\r')
                p++;
            if (p == w)
                break;
            if (words++ && (rc = buf_append_char(out, ' ')))
                break;
            rc = openai_json_escape(out, w, (size_t)(p - w));
        }
    }
    return rc;
}

/* A value for a required parameter of JSON schema prop (an object or NULL). */
static int append_arg_value(struct buf *out, const json_t *prop, const struct openai_message *m)
{
    const json_t *en = json_object_get(prop, "enum");
    if (json_array_size(en) > 0) {
        char *s = json_dumps(json_array_get(en, 0), JSON_COMPACT | JSON_ENCODE_ANY);
        int rc = s ? buf_append_str(out, s) : -ENOMEM;
        free(s); /* jansson's allocator */
        return rc;
    }
    const json_t *type = json_object_get(prop, "type");
    if (json_is_array(type)) { /* ["null", "string"]: the first that is not null */
        const json_t *types = type;
        type = json_array_get(types, 0);
        for (size_t i = 0; i < json_array_size(types); i++) {
            const json_t *t = json_array_get(types, i);
            if (json_is_string(t) && strcmp(json_string_value(t), "null") != 0) {
                type = t;
                break;
            }
        }
    }
    const char *t = json_is_string(type) ? json_string_value(type) : "string";
    int rc;
    if (!strcmp(t, "integer") || !strcmp(t, "number"))
        return buf_append_char(out, '1');
    if (!strcmp(t, "boolean"))
        return buf_append_str(out, "true");
    if (!strcmp(t, "null"))
        return buf_append_str(out, "null");
    if (!strcmp(t, "object"))
        return buf_append_str(out, "{}");
    if (!strcmp(t, "array")) {
        const json_t *it = json_object_get(json_object_get(prop, "items"), "type");
        if (!json_is_string(it) || strcmp(json_string_value(it), "string") != 0)
            return buf_append_str(out, "[]");
        if ((rc = buf_append_str(out, "[\"")) || (rc = append_words(out, m)))
            return rc;
        return buf_append_str(out, "\"]");
    }
    if ((rc = buf_append_char(out, '"')) || (rc = append_words(out, m)))
        return rc;
    return buf_append_char(out, '"');
}

/*
 * The arguments of the call: a JSON object with each required parameter of
 * the tool's schema (at most 16), strings filled with the first words of the
 * last message, e.g. {"query":"how do volcanoes erupt"}.
 */
static int tool_arguments(const struct openai_tool *t, const struct openai_message *m,
                          struct buf *out)
{
    const json_t *req = json_object_get(t->parameters, "required");
    const json_t *props = json_object_get(t->parameters, "properties");
    int rc = buf_append_char(out, '{');
    size_t n = 0;
    for (size_t i = 0; !rc && i < json_array_size(req) && n < 16; i++) {
        const json_t *name = json_array_get(req, i);
        if (!json_is_string(name))
            continue;
        if ((rc = buf_append_str(out, n++ ? ",\"" : "\"")) ||
            (rc = openai_json_escape(out, json_string_value(name), json_string_length(name))) ||
            (rc = buf_append_str(out, "\":")))
            break;
        rc = append_arg_value(out, json_object_get(props, json_string_value(name)), m);
    }
    return rc ? rc : buf_append_char(out, '}');
}

/* Makes r a call of tool t: its id, name and the arguments as its pieces. */
static int setup_tool_call(struct sim_req *r, const struct openai_tool *t,
                           const struct openai_request *q)
{
    const struct openai_message *m = &q->messages[q->n_messages - 1];
    struct buf args;
    buf_init(&args, 1u << 20);
    int rc = tool_arguments(t, m, &args);
    if (rc) {
        buf_release(&args);
        return rc;
    }
    r->tool_call = true;
    r->tool_name = ts_strdup(t->name);
    uint64_t h = mix(r->seed ^ text_hash(t->name, strlen(t->name), 0x746f6f6cull));
    snprintf(r->call_id, sizeof(r->call_id), "call_%016llx%08x", (unsigned long long)h,
             (unsigned)(mix(h) >> 32));
    struct buf text;
    buf_init(&text, SIM_MAX_TEXT);
    struct piece_collect c = {&text, NULL, 0, 0};
    rc = r->tool_name ? text_split_tokens(args.data, args.len, collect_piece, &c) : -ENOMEM;
    buf_release(&args);
    if (!rc && buf_reserve(&text, 0))
        rc = -ENOMEM;
    if (rc) {
        buf_release(&text);
        ts_free(c.ends);
        return rc;
    }
    r->text = buf_take(&text, NULL);
    r->piece_end = c.ends;
    r->npieces = c.n;
    return 0;
}

/*
 * The length of a text answer (and its text when it is not the word
 * model's): see server.h. Returns 0 with *out, or a negative error.
 */
static int plan_text(struct sim_req *r, const struct openai_request *q, const char *key,
                     size_t key_len, uint64_t max, uint64_t *out)
{
    struct sim_server *s = r->s;
    const char *answer = key && s->answers ? answers_find(s->answers, key, key_len) : NULL;
    uint64_t natural;
    if (answer) {
        natural = text_count_tokens(answer, strlen(answer));
    } else {
        struct rng rng;
        rng_seed(&rng, r->seed ^ 0x6e61747572616cull);
        natural = dist_sample_uint(&s->output_len, &rng, 1, UINT32_MAX);
    }
    if (natural == 0)
        natural = 1;
    uint64_t n = q->ignore_eos ? max : (natural < max ? natural : max);
    r->finish_reason = (q->ignore_eos || natural > max) ? "length" : "stop";
    if ((uint64_t)q->min_tokens > n) {
        n = (uint64_t)q->min_tokens < max ? (uint64_t)q->min_tokens : max;
        r->finish_reason = n == max ? "length" : "stop";
    }
    int rc = 0;
    if (answer || q->n_stop) {
        bool stopped;
        /* a stop string can only shorten; render no more than can be sent */
        uint64_t limit = n < (1u << 20) ? n : (1u << 20);
        rc = render_pieces(r, answer, (uint32_t)limit, q, &stopped);
        if (rc > 0) {
            if (stopped) {
                n = (uint64_t)rc;
                r->finish_reason = "stop";
            }
            rc = 0;
        }
    }
    *out = n;
    return rc;
}

/* A tool call answer: one token per piece of the arguments, cut at max
 * (finish "length"). Returns 0 with *out, or a negative error. */
static int plan_tool_call(struct sim_req *r, const struct openai_tool *t,
                          const struct openai_request *q, uint64_t max, uint64_t *out)
{
    int rc = setup_tool_call(r, t, q);
    if (rc)
        return rc;
    *out = r->npieces < max ? r->npieces : max;
    r->finish_reason = r->npieces > max ? "length" : "tool_calls";
    return 0;
}

void sim_gen_handle(struct sim_server *s, struct http_request *req, enum openai_endpoint ep)
{
    struct openai_request q;
    struct openai_error e;
    openai_request_init(&q);
    if (openai_request_parse(&q, ep, req->body, req->body_len, NULL, &e)) {
        s->stats.rejected_400++;
        sim_send_error(req, &e, NULL);
        return;
    }
    /* prefix caching: the prompt's block hashes (no hashes beyond max_model_len: rejected) */
    struct sim_block_hasher bh;
    const struct sim_profile *prof = &s->profile;
    sim_block_hasher_init(&bh, prof->prefix_caching ? prof->block_size : 0,
                          prof->max_model_len / prof->block_size);
    if (!sim_model_ok(s, req, q.model))
        goto out_release;
    if (ep == OPENAI_COMPLETIONS && q.n_inputs != 1) {
        openai_error_set(&e, 400, "invalid_request_error", "prompt", "invalid_value",
                         "The simulator answers one prompt per request, got %zu.", q.n_inputs);
        sim_send_error(req, &e, NULL);
        goto out_release;
    }
    struct sim_req *r = ts_calloc(1, sizeof(*r));
    if (!r) {
        (void)http_respond(req, 500, NULL, NULL, NULL, 0);
        goto out_release;
    }
    r->s = s;
    r->http = req;
    r->ep = ep;
    r->stream = q.stream;
    r->include_usage = q.include_usage;
    r->arrival_ns = ts_now_ns();
    buf_init(&r->out, SIM_MAX_TEXT);
    copy_request_id(r, req);
    uint64_t serial = ++s->next_id;
    snprintf(r->id, sizeof(r->id), "%s-%016llx", ep == OPENAI_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)mix(s->id_seed + serial));
    r->model = ts_strdup(q.model ? q.model : s->profile.model);

    const char *key;
    size_t key_len;
    r->prompt_tokens = count_prompt(&q, prof->prefix_caching ? &bh : NULL, &key, &key_len);
    if (q.has_seed)
        r->seed = (uint64_t)q.seed;
    else if (q.has_temperature && q.temperature == 0)
        r->seed = key ? text_hash(key, key_len, 0) : 0;
    else
        r->seed = mix(s->id_seed ^ (serial * 0x9e3779b97f4a7c15ull));

    uint64_t room = s->profile.max_model_len > r->prompt_tokens
                        ? s->profile.max_model_len - r->prompt_tokens
                        : 1;
    uint64_t max = q.max_tokens > 0 ? (uint64_t)q.max_tokens : room;
    if (max > UINT32_MAX)
        max = UINT32_MAX;
    const struct openai_tool *tool = tool_to_call(&q);
    uint64_t out = 0;
    int rc =
        tool ? plan_tool_call(r, tool, &q, max, &out) : plan_text(r, &q, key, key_len, max, &out);
    r->output_tokens = (uint32_t)out;
    if (!rc && s->trace) {
        r->token_ns = ts_calloc(r->output_tokens ? r->output_tokens : 1, sizeof(uint64_t));
        if (!r->token_ns)
            rc = -ENOMEM;
    }
    if (!rc && r->stream) {
        rc = openai_stream_enc_init(&r->enc, ep, r->id, (int64_t)(ts_wall_ns() / TS_NS_PER_S),
                                    r->model);
        r->enc_inited = !rc;
    }
    if (!rc && r->stream && s->sign_key_len) {
        r->signer = ts_malloc(sizeof(*r->signer));
        rc = r->signer ? chunk_signer_init(r->signer, s->sign_key, s->sign_key_len) : -ENOMEM;
    }
    if (rc) {
        reject(s, req, rc, r->prompt_tokens, r->output_tokens, NULL);
        req_free(r);
        goto out_release;
    }
    /* the hashes stand for the counted tokens (a count capped at UINT32_MAX has none) */
    uint32_t nhash = bh.tokens == r->prompt_tokens ? bh.n : 0;
    rc = sim_engine_submit_prefix(s->engine, r, r->prompt_tokens, r->output_tokens, bh.hashes,
                                  nhash, r->arrival_ns);
    if (rc) {
        reject(s, req, rc, r->prompt_tokens, r->output_tokens,
               ep == OPENAI_CHAT ? "messages" : "prompt");
        req_free(r);
        goto out_release;
    }
    r->in_engine = true;
    /* reserve-max reserves what the client allowed, not the length the simulator drew */
    if (sim_engine_set_reserve(s->engine, r, (uint32_t)max) != 0)
        ts_warn("sim: %s: cannot set the reservation", r->id);
    s->stats.requests++;
    req->user = r;
    http_request_on_abort(req, on_abort);
    if (r->stream)
        (void)http_stream_begin(req, 200, "text/event-stream",
                                "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n");
    kick(s);
out_release:
    sim_block_hasher_release(&bh);
    openai_request_release(&q);
}
