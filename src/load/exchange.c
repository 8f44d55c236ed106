/*
 * exchange.c - one request of the load engine on the wire: send it, read its
 * stream event by event with the time each event arrived, and turn what
 * happened into one struct req_record with exactly one outcome.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "llm/errbody.h"
#include "llm/jsonptr.h"
#include "llm/text.h"
#include "load/runner_int.h"
#include "load/target.h"
#include "analysis/record.h"

#define EXCH_MAX_EVENT      (4u << 20)  /* one SSE event */
#define EXCH_MAX_BODY       (64u << 20) /* a non-streamed body */
#define EXCH_MAX_ERROR_BODY (64u << 10) /* kept of an error body */

void exch_set_error(struct exch *x, const char *prefix, const char *detail)
{
    if (x->rec.error[0])
        return;
    snprintf(x->rec.error, sizeof(x->rec.error), "%s%s", prefix, detail ? detail : "");
}

/* Keeps the answer's text (content or completions text) for quality scoring. */
static void keep_answer_text(struct exch *x, const struct openai_chunk *c)
{
    for (size_t i = 0; i < c->n_choices; i++) {
        const struct openai_choice *ch = &c->choices[i];
        const char *t = ch->content ? ch->content : ch->text;
        size_t n = ch->content ? ch->content_len : ch->text_len;
        if (t && n && x->answer.len < QUALITY_MAX_TEXT) {
            if (n > QUALITY_MAX_TEXT - x->answer.len)
                n = QUALITY_MAX_TEXT - x->answer.len;
            if (buf_append(&x->answer, t, n))
                return; /* out of memory: the answer is scored as far as it got */
        }
    }
}

/* Keeps when a chunk with choices arrived (the first REQ_CHUNK_TIMES_MAX;
 * without memory the rest are not kept, and the count says so). */
static void keep_chunk_time(struct exch *x, uint64_t at)
{
    if (x->chunks.n == x->rec.choice_chunks && x->chunks.n < REQ_CHUNK_TIMES_MAX)
        (void)chunk_times_add(&x->chunks, at); /* else one was lost already, or full */
}

/* x's chunk times unpacked into the worker's array, lent to x->rec (none
 * when memory ran out: the record then says they were not kept). */
static void lend_chunk_times(struct exch *x)
{
    struct worker *w = x->w;
    uint32_t n = x->chunks.n;
    x->rec.chunk_ns = NULL;
    x->rec.n_chunk_ns = 0;
    if (!n)
        return;
    if (w->alloc_chunk_times < n) {
        uint64_t *v = ts_realloc(w->chunk_times, n * sizeof(*v));
        if (!v)
            return;
        w->chunk_times = v;
        w->alloc_chunk_times = n;
    }
    chunk_times_unpack(&x->chunks, w->chunk_times);
    x->rec.chunk_ns = w->chunk_times;
    x->rec.n_chunk_ns = n;
}

/* Adds one to a counter only this worker writes and the coordinator reads:
 * a relaxed load and store, not a locked read-modify-write per event. */
static inline void counter_bump(atomic_uint_fast64_t *n)
{
    atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

void exch_on_chunk(struct exch *x, const struct openai_chunk *c, uint64_t at)
{
    struct req_record *r = &x->rec;
    if (c->flags & OPENAI_CHUNK_DONE) {
        x->saw_done = true;
        return;
    }
    r->last_event_ns = at;
    if (c->flags & OPENAI_CHUNK_ERROR) {
        char msg[REQ_ERROR_MAX];
        x->saw_error = true;
        exch_set_error(x, "", errbody_format(&c->error, msg, sizeof(msg)) ? msg : "error event");
    }
    if (c->id) {
        if (!x->have_id) {
            snprintf(x->first_id, sizeof(x->first_id), "%s", c->id);
            x->have_id = true;
        } else if (strncmp(x->first_id, c->id, sizeof(x->first_id) - 1)) {
            r->flags |= REQF_ID_CHANGED;
        }
    }
    if (!x->trace_noted) /* its lines are cold: not touched per chunk once known */
        x->trace_noted = reqtrace_note(&x->trace, c->id, c->model);
    if (c->n_choices) {
        /* vLLM's benchmark: the first chunk with choices is the first token,
         * each later one adds an inter-token gap */
        if (!r->first_chunk_ns) {
            r->first_chunk_ns = at;
        } else {
            /* a receive time before the last one (a clock step): a gap of 0 */
            uint64_t gap = at > x->last_choice_ns ? at - x->last_choice_ns : 0;
            r->itl_sum_ns += gap;
            if (gap > r->itl_max_ns)
                r->itl_max_ns = gap;
            if (!(r->flags & REQF_WARMUP)) {
                run_stats_add_itl_at(x->w->active, r->choice_chunks, gap);
                if (x->actor)
                    run_stats_add_itl_at(x->w->cls[x->actor->cls].res.stats, r->choice_chunks, gap);
            }
        }
        keep_chunk_time(x, at);
        x->last_choice_ns = at;
        r->choice_chunks++;
        if (x->keep_answer)
            keep_answer_text(x, c);
        if (c->flags & (OPENAI_CHUNK_CONTENT | OPENAI_CHUNK_TEXT | OPENAI_CHUNK_REASONING |
                        OPENAI_CHUNK_TOOL_CALLS)) {
            r->content_chunks++;
            if (c->flags & OPENAI_CHUNK_TOOL_CALLS)
                x->saw_tool_calls = true;
            counter_bump(&x->w->chunks_rx);
            if (x->actor)
                counter_bump(&x->w->cls[x->actor->cls].chunks_rx);
            if (!r->first_token_ns)
                r->first_token_ns = at;
        }
        /* time to first answer: the first content once reasoning has run */
        if (c->flags & OPENAI_CHUNK_REASONING)
            r->flags |= REQF_REASONING;
        if ((r->flags & REQF_REASONING) && !r->first_answer_ns &&
            (c->flags & (OPENAI_CHUNK_CONTENT | OPENAI_CHUNK_TEXT)))
            r->first_answer_ns = at;
        for (size_t i = 0; i < c->n_choices; i++) {
            if (c->choices[i].finish_reason) {
                x->saw_finish = true;
                snprintf(r->finish_reason, sizeof(r->finish_reason), "%s",
                         c->choices[i].finish_reason);
            }
        }
    }
    if (c->flags & OPENAI_CHUNK_USAGE) {
        if (c->usage.prompt_tokens >= 0)
            r->usage_prompt_tokens = (int32_t)c->usage.prompt_tokens;
        if (c->usage.completion_tokens >= 0)
            r->usage_completion_tokens = (int32_t)c->usage.completion_tokens;
    }
}

static int on_sse_event(void *ctx, const struct sse_event *ev)
{
    struct exch *x = ctx;
    struct openai_chunk c;
    if (x->verifier)
        (void)chunk_verify(x->verifier, ev->id, ev->id_len, ev->data, ev->data_len);
    if (openai_decode_chunk_memo(&x->w->decoder, &x->memo, ev->data, ev->data_len, &c)) {
        x->malformed = true;
        exch_set_error(x, "malformed chunk: ", openai_decoder_errmsg(&x->w->decoder));
        return 0; /* go on: later chunks may still be fine */
    }
    exch_on_chunk(x, &c, ev->arrival_ns);
    return 0;
}

static void on_headers(struct http_call *call, long status, void *user)
{
    struct exch *x = user;
    x->rec.http_status = (int)status;
    const char *ct = http_call_header(call, "content-type");
    x->sse_mode = status >= 200 && status < 300 && ct && !strncasecmp(ct, "text/event-stream", 17);
}

/* Receive storage bigger than this goes back to the allocator after parsing. */
#define RX_SPARE_MAX_CAP (16 * 1024)

/* x holds nothing unparsed: its receive storage goes to the worker's
 * spares (or is freed), so a stream between reads holds no buffer. */
static void rx_give_back(struct exch *x)
{
    struct worker *w = x->w;
    if (!x->rx.data)
        return;
    if (w->n_rx_spare < WORKER_RX_SPARE && x->rx.cap <= RX_SPARE_MAX_CAP) {
        buf_reset(&x->rx);
        w->rx_spare[w->n_rx_spare++] = x->rx;
        buf_init(&x->rx, x->rx.max);
    } else {
        buf_release(&x->rx);
    }
}

int exch_rx_push(struct exch *x, const char *data, size_t len, uint64_t now_ns, bool message)
{
    struct worker *w = x->w;
    if (!x->rx.data && w->n_rx_spare) {
        size_t max = x->rx.max;
        x->rx = w->rx_spare[--w->n_rx_spare];
        x->rx.max = max;
    }
    if (buf_append(&x->rx, data, len)) {
        x->malformed = true;
        exch_set_error(x, "stream: ", "more than 4 MiB unparsed");
        return TS_TOOBIG;
    }
    if (x->nseg == sizeof(x->rx_seg) / sizeof(x->rx_seg[0])) {
        if (message) { /* each message must stay whole: parse what is held first */
            buf_truncate(&x->rx, x->rx.len - len);
            exch_rx_parse(x);
            return exch_rx_push(x, data, len, now_ns, message);
        }
        x->nseg--; /* merge with the last read: its events get the later time */
    }
    x->rx_seg[x->nseg].end = x->rx.len;
    x->rx_seg[x->nseg].ns = now_ns;
    x->nseg++;
    if (!x->rx_queued) {
        x->rx_queued = true;
        x->rx_prev = NULL;
        x->rx_next = w->rx_head;
        if (w->rx_head)
            w->rx_head->rx_prev = x;
        w->rx_head = x;
    }
    return 0;
}

static int on_body(struct http_call *call, const char *data, size_t len, uint64_t now_ns,
                   void *user)
{
    struct exch *x = user;
    if (!x->rec.first_byte_ns)
        x->rec.first_byte_ns = now_ns;
    if (x->sse_mode)
        return exch_rx_push(x, data, len, now_ns, false) ? 1 : 0;
    size_t cap =
        x->rec.http_status >= 200 && x->rec.http_status < 300 ? EXCH_MAX_BODY : EXCH_MAX_ERROR_BODY;
    if (x->body.len + len > cap)
        len = cap > x->body.len ? cap - x->body.len : 0;
    if (len && buf_append(&x->body, data, len)) {
        exch_set_error(x, "", "response body over the limit");
        return 1;
    }
    return 0;
}

static void rx_unlink(struct exch *x)
{
    if (!x->rx_queued)
        return;
    if (x->rx_prev)
        x->rx_prev->rx_next = x->rx_next;
    else
        x->w->rx_head = x->rx_next;
    if (x->rx_next)
        x->rx_next->rx_prev = x->rx_prev;
    x->rx_prev = x->rx_next = NULL;
    x->rx_queued = false;
}

/* Feeds what this request received, read by read (SSE) or message by
 * message (realtime), each with its arrival time. */
void exch_rx_parse(struct exch *x)
{
    rx_unlink(x);
    size_t from = 0;
    int rc = 0;
    for (unsigned i = 0; i < x->nseg && !rc; i++) {
        rc = x->tp->feed(x, x->rx.data + from, x->rx_seg[i].end - from, x->rx_seg[i].ns);
        from = x->rx_seg[i].end;
    }
    x->nseg = 0;
    rx_give_back(x);
    if (rc && !x->malformed) {
        x->malformed = true;
        exch_set_error(x, "stream: ", rc == TS_TOOBIG ? "event over 4 MiB" : "bad event");
        x->tp->cancel(x); /* the stream cannot be read further */
    }
}

static void rx_idle_cb(uv_idle_t *h)
{
    (void)h; /* only keeps the next poll from blocking */
}

/* Queues x, which failed before reaching the wire, for exch_fail_flush. */
static void fail_later(struct exch *x)
{
    struct worker *w = x->w;
    x->failed_next = NULL;
    if (w->failed_tail)
        w->failed_tail->failed_next = x;
    else
        w->failed_head = x;
    w->failed_tail = x;
    (void)uv_idle_start(&w->rx_idle, rx_idle_cb); /* the next poll must not block */
}

void exch_fail_flush(struct worker *w)
{
    struct exch *x = w->failed_head;
    w->failed_head = w->failed_tail = NULL;
    while (x) {
        struct exch *next = x->failed_next;
        worker_request_done(w, x, x->user);
        x = next;
    }
}

void exch_rx_keep_polling(struct worker *w)
{
    (void)uv_idle_start(&w->rx_idle, rx_idle_cb);
}

/*
 * Parses for at most about 1 ms, then lets the loop poll again: bytes that
 * arrive while a big burst is being decoded are timed within ~1 ms of their
 * arrival instead of after the whole burst.
 */
void exch_rx_flush(struct worker *w)
{
    uint64_t start = ts_now_ns();
    unsigned n = 0;
    exch_fail_flush(w);
    worker_send_due(w); /* what fell due in the poll phase (a request's end) */
    while (w->rx_head) {
        exch_rx_parse(w->rx_head);
        if (++n % 8 == 0) {
            worker_send_due(w);
            if (ts_now_ns() - start > TS_NS_PER_MS)
                break;
        }
    }
    worker_send_due(w); /* ... or while parsing */
    if (w->rx_head || w->failed_head || w->send_now)
        (void)uv_idle_start(&w->rx_idle, rx_idle_cb);
    else
        (void)uv_idle_stop(&w->rx_idle);
}

static enum req_outcome outcome_of_transport(enum http_call_error e)
{
    switch (e) {
    case HTTP_CALL_OK:
        return REQ_OK;
    case HTTP_CALL_ERR_CONNECT:
    case HTTP_CALL_ERR_DNS:
        return REQ_CONNECT;
    case HTTP_CALL_ERR_TLS:
        return REQ_TLS;
    case HTTP_CALL_ERR_TIMEOUT_CONNECT:
        return REQ_TIMEOUT_CONNECT;
    case HTTP_CALL_ERR_TIMEOUT_TTFB:
        return REQ_TIMEOUT_TTFB;
    case HTTP_CALL_ERR_TIMEOUT_IDLE:
        return REQ_TIMEOUT_IDLE;
    case HTTP_CALL_ERR_TIMEOUT_TOTAL:
        return REQ_TIMEOUT_TOTAL;
    case HTTP_CALL_ERR_SEND:
    case HTTP_CALL_ERR_RECV:
        return REQ_RECV;
    case HTTP_CALL_ERR_ABORTED:
        return REQ_CUT;
    case HTTP_CALL_ERR_DECODE:
        return REQ_OK; /* the body could not be read: the status and x->malformed decide */
    default:
        return REQ_OTHER;
    }
}

/* Keeps what the body of a non-2xx answer says as the request's error. */
static void describe_error_body(struct exch *x)
{
    char msg[REQ_ERROR_MAX];
    if (errbody_describe(buf_cstr(&x->body), x->body.len, msg, sizeof(msg)))
        exch_set_error(x, "", msg);
    else
        exch_set_error(x, "", "empty body");
}

/* A hit's id: an integer, or a string of decimal digits (databases with string ids). */
static int64_t hit_id(const json_t *id)
{
    if (json_is_integer(id))
        return (int64_t)json_integer_value(id);
    const char *s = json_string_value(id);
    if (!s || !*s || strlen(s) > 18 || strspn(s, "0123456789") != strlen(s))
        return -1;
    return (int64_t)strtoll(s, NULL, 10);
}

/*
 * A vector search's answer: {"data":[{"id":N,...},...]} (the simulator's
 * /v1/vectors/search); its ids against the true neighbours give recall@k.
 */
static void finish_vector_body(struct exch *x)
{
    const struct runner_config *cfg = x->w->run->cfg;
    /* a scenario's vector-search class carries its own queries and truth */
    const struct traffic *t = x->actor ? cfg->classes[x->actor->cls].traffic : NULL;
    const struct ivecset *truth = t ? t->truth : cfg->vector_truth;
    uint32_t want_k = t ? t->vector_k : cfg->workload->vector_k;
    struct req_record *r = &x->rec;
    const char *rp = !t && cfg->vector_results ? cfg->vector_results : "/data";
    const char *ip = !t && cfg->vector_id ? cfg->vector_id : "/id";
    json_t *doc = json_loadb(buf_cstr(&x->body), x->body.len, 0, NULL);
    json_t *data = jsonptr_get(doc, rp, strlen(rp));
    if (!json_is_array(data)) {
        char what[160];
        snprintf(what, sizeof(what), "expected an array of hits at %.100s", rp);
        x->malformed = true;
        exch_set_error(x, "malformed body: ", what);
        json_decref(doc);
        return;
    }
    x->saw_done = x->saw_finish = true;
    if (truth && truth->n) {
        int64_t ids[VECSET_MAX_K];
        size_t k = want_k < truth->k ? want_k : truth->k, n = 0;
        for (size_t i = 0; i < json_array_size(data) && n < VECSET_MAX_K; i++)
            ids[n++] = hit_id(jsonptr_get(json_array_get(data, i), ip, strlen(ip)));
        r->recall =
            vec_recall(ids, n < k ? n : k, truth->v + (x->item.index % truth->n) * truth->k, k);
        r->recall_k = (uint16_t)k;
        r->has_recall = true;
    }
    json_decref(doc);
}

/* A non-streamed body (or an error body): decode it for the outcome, tokens and error text. */
static void finish_body(struct exch *x)
{
    struct req_record *r = &x->rec;
    struct openai_chunk c;
    if (r->http_status && (r->http_status < 200 || r->http_status >= 300)) {
        describe_error_body(x);
        return;
    }
    const struct runner_config *rc = x->w->run->cfg;
    if (x->actor ? !x->treq.step && !rc->classes[x->actor->cls].traffic->has_flow &&
                       rc->classes[x->actor->cls].traffic->endpoint == WORKLOAD_VECTOR_SEARCH
                 : rc->workload && rc->workload->endpoint == WORKLOAD_VECTOR_SEARCH) {
        finish_vector_body(x);
        return;
    }
    bool ok_status = r->http_status >= 200 && r->http_status < 300;
    if (openai_decode_body(&x->w->decoder, buf_cstr(&x->body), x->body.len, &c)) {
        x->malformed = ok_status;
        exch_set_error(x, "malformed body: ", openai_decoder_errmsg(&x->w->decoder));
        return;
    }
    if (c.flags & OPENAI_CHUNK_ERROR) {
        char msg[REQ_ERROR_MAX];
        x->saw_error = ok_status;
        exch_set_error(x, "", errbody_format(&c.error, msg, sizeof(msg)) ? msg : "error body");
        return;
    }
    reqtrace_note(&x->trace, c.id, c.model);
    if (x->keep_answer)
        keep_answer_text(x, &c);
    /* nothing arrives before the whole body: no first chunk, TTFT, TPOT or ITL */
    if (c.flags & OPENAI_CHUNK_REASONING)
        r->flags |= REQF_REASONING;
    if (c.flags & OPENAI_CHUNK_TOOL_CALLS)
        x->saw_tool_calls = true;
    x->saw_done = x->saw_finish = true;
    size_t text = 0;
    for (size_t i = 0; i < c.n_choices; i++) {
        const struct openai_choice *ch = &c.choices[i];
        if (ch->content)
            text += text_count_tokens(ch->content, ch->content_len);
        if (ch->text)
            text += text_count_tokens(ch->text, ch->text_len);
        if (ch->finish_reason)
            snprintf(r->finish_reason, sizeof(r->finish_reason), "%s", ch->finish_reason);
    }
    r->client_tokens = (uint32_t)text;
    if (c.n_choices)
        r->choice_chunks = r->content_chunks = 1;
    if (c.usage.present) {
        if (c.usage.prompt_tokens >= 0)
            r->usage_prompt_tokens = (int32_t)c.usage.prompt_tokens;
        if (c.usage.completion_tokens >= 0)
            r->usage_completion_tokens = (int32_t)c.usage.completion_tokens;
    }
}

static void classify(struct exch *x, const struct http_call_result *res)
{
    struct req_record *r = &x->rec;
    int st = r->http_status;
    enum req_outcome o = outcome_of_transport(res->error);
    if (res->error == HTTP_CALL_ERR_DECODE) {
        x->malformed = true;
        exch_set_error(x, "", res->error_text);
    }
    if (x->cut)
        o = REQ_CUT;
    if (x->cancelled && !x->cut && !(x->saw_done && x->saw_finish))
        o = REQ_CANCELLED;
    if (o == REQ_RECV && x->saw_done && x->saw_finish)
        o = REQ_OK; /* the connection broke after the whole answer arrived */
    else if (o == REQ_RECV && x->sse_mode && r->first_byte_ns) {
        o = REQ_TRUNCATED; /* the stream had begun: the answer was cut */
        exch_set_error(x, "connection closed mid-stream: ", res->error_text);
    }
    if (o == REQ_OK || (res->error == HTTP_CALL_ERR_ABORTED && !x->cut && o != REQ_CANCELLED)) {
        if (st == 429)
            o = REQ_HTTP_429;
        else if (st >= 500)
            o = REQ_HTTP_5XX;
        else if (st >= 400)
            o = REQ_HTTP_4XX;
        else if ((st < 200 || st >= 300) && !(st == 101 && x->tp == &exch_rt_transport))
            o = REQ_OTHER; /* a realtime stream begins with 101 Switching Protocols */
        else if (x->saw_error)
            o = REQ_STREAM_ERROR;
        else if (x->malformed)
            o = REQ_MALFORMED;
        else if (x->item.stream && (!x->saw_done || !x->saw_finish))
            o = REQ_TRUNCATED;
        else
            o = REQ_OK;
    }
    if (o != REQ_OK && !r->error[0])
        exch_set_error(x, "", res->error != HTTP_CALL_OK ? res->error_text : NULL);
    if (x->item.stream)
        r->flags |= REQF_STREAM;
    /* integrity counts judge streams that began (a 2xx event stream) and were
     * not cut by the client: a refused connection or a 503 is no stream */
    if (x->item.stream && x->sse_mode && o != REQ_CUT && o != REQ_CANCELLED) {
        if (!x->saw_done)
            r->flags |= REQF_NO_DONE;
        if (!x->saw_finish)
            r->flags |= REQF_NO_FINISH;
    }
    r->outcome = o;
}

/* Scores the kept answer against the reference and the configured checks. */
static void score_answer(struct exch *x)
{
    const struct runner_config *cfg = x->w->run->cfg;
    const char *ref = x->item.reference;
    if (!ref && !cfg->quality.checks)
        return;
    /* a flow's answer is its answer steps' (a search or a plan is no answer) */
    if (x->actor && cfg->classes[x->actor->cls].traffic->has_flow && !x->treq.answer)
        return;
    if (quality_score(x->w->qscratch, &cfg->quality.cfg, buf_cstr(&x->answer), x->answer.len, ref,
                      ref ? strlen(ref) : 0, &x->rec.quality))
        memset(&x->rec.quality, 0, sizeof(x->rec.quality));
}

static uint32_t us_of(uint64_t ns)
{
    uint64_t us = ns / 1000;
    return us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

/*
 * Output tokens: server usage first, else the client tokenizer, else one per
 * content chunk. A usage disagreement needs a tokenizer count of the whole
 * answer (chunk counts never disagree: a server may send several tokens per
 * chunk), and an answer that is all text: reasoning and tool-call arguments
 * are in usage but not in the answer's text.
 */
static void count_tokens(struct exch *x)
{
    struct req_record *r = &x->rec;
    bool tokenized = false;
    if (x->sse_mode)
        r->client_tokens = r->content_chunks;
    if (x->w->tc && x->keep_answer && x->answer.len < QUALITY_MAX_TEXT) {
        /* --tokenizer: the answer's tokens, counted here */
        r->client_tokens = (uint32_t)tokcount_count(x->w->tc, x->answer.data, x->answer.len);
        tokenized = true;
    }
    if (r->usage_completion_tokens >= 0) {
        r->output_tokens = (uint32_t)r->usage_completion_tokens;
        r->token_source = TOKENS_USAGE;
        if (tokenized && !(r->flags & REQF_REASONING) && !x->saw_tool_calls &&
            req_tokens_disagree((uint32_t)r->usage_completion_tokens, r->client_tokens))
            r->flags |= REQF_USAGE_MISMATCH;
    } else if (tokenized) {
        r->output_tokens = r->client_tokens;
        r->token_source = TOKENS_TOKENIZER;
    } else {
        r->output_tokens = r->client_tokens;
        r->token_source = x->sse_mode ? TOKENS_CHUNKS : TOKENS_TOKENIZER;
    }
}

static void on_done(struct http_call *call, const struct http_call_result *res, void *user)
{
    struct exch *x = user;
    struct req_record *r = &x->rec;
    if (x->nseg)
        exch_rx_parse(x); /* bytes of this loop pass that were not parsed yet */
    r->end_ns = res->end_ns ? res->end_ns : ts_now_ns();
    if (!r->http_status)
        r->http_status = (int)res->status;
    if (res->reused)
        r->flags |= REQF_REUSED_CONN;
    r->dns_us = us_of(res->dns_ns);
    r->connect_us = us_of(res->connect_ns);
    r->tls_us = us_of(res->tls_ns);
    r->sent_us = us_of(res->pretransfer_ns);
    r->ttfb_us = us_of(res->starttransfer_ns);
    if (x->sse_mode) {
        size_t discarded = 0;
        (void)sse_parser_finish(&x->sse, &discarded);
    } else if (x->actor && !x->treq.openai) {
        /* a flow's plain HTTP step: the status decides */
        r->first_chunk_ns = r->first_token_ns = r->last_chunk_ns = r->end_ns;
        x->saw_done = x->saw_finish = true;
        if (r->http_status && (r->http_status < 200 || r->http_status >= 300))
            describe_error_body(x);
    } else if (res->error == HTTP_CALL_OK || x->body.len) {
        finish_body(x);
    }
    if (x->sse_mode)
        r->last_chunk_ns = x->last_choice_ns;
    if (x->sse_mode)
        exch_sig_record(x);
    x->call = NULL;
    exch_complete(x, res);
}

void exch_sig_record(struct exch *x)
{
    const struct chunk_verifier *v = x->verifier;
    struct req_record *r = &x->rec;
    if (!v)
        return;
    r->flags |= REQF_SIGNED;
    r->sig.ok = (uint32_t)v->ok;
    r->sig.missing = (uint32_t)v->missing;
    r->sig.duplicates = (uint32_t)v->duplicates;
    r->sig.reorders = (uint32_t)v->reorders;
    r->sig.forged = (uint32_t)v->forged;
    r->sig.unsigned_events = (uint32_t)v->unsigned_events;
}

void exch_complete(struct exch *x, const struct http_call_result *res)
{
    classify(x, res);
    if (x->keep_answer)
        score_answer(x);
    count_tokens(x);
    worker_request_done(x->w, x, x->user);
}

static const struct http_call_ops exch_ops = {
    .on_headers = on_headers,
    .on_body = on_body,
    .on_done = on_done,
};

void exch_cancel(struct exch *x)
{
    x->cancelled = true;
    x->tp->cancel(x);
}

static void exch_send(struct exch *x, const char *method, const char *url, const char *const *extra,
                      size_t nextra, uint64_t timeout_ns);

void exch_fallback_sse(struct exch *x)
{
    struct req_record *r = &x->rec;
    uint64_t start = r->start_ns;
    x->w->rt_refused = true;
    x->tp = &exch_sse_transport;
    x->sse_mode = false;
    x->malformed = x->saw_error = x->saw_done = x->saw_finish = false;
    buf_reset(&x->body);
    r->http_status = 0;
    r->first_byte_ns = 0;
    r->error[0] = '\0';
    r->flags |= REQF_FELL_BACK;
    exch_send(x, "POST", x->w->run->cfg->url, NULL, 0, 0);
    r->start_ns = start; /* the refused upgrade is part of this request's time */
}

void exch_cut(struct exch *x)
{
    x->cut = true;
    x->tp->cancel(x);
}

static int sse_feed(struct exch *x, char *p, size_t n, uint64_t at)
{
    return sse_parser_feed_inplace(&x->sse, p, n, at); /* x->rx, parsed once */
}

static int sse_start(struct exch *x, const struct http_call_spec *spec)
{
    return http_client_request(&x->w->client, spec, &exch_ops, x, &x->call);
}

static void sse_cancel(struct exch *x)
{
    if (x->call)
        http_call_cancel(x->call);
}

const struct exch_transport exch_sse_transport = {
    .name = "sse",
    .start = sse_start,
    .cancel = sse_cancel,
    .feed = sse_feed,
};

/* Adds a finished request's record to the worker's stats (the run's, its
 * class's and its flow step's) and to requests.jsonl. */
static void account(struct worker *w, const struct req_record *rec, const struct ractor *actor,
                    uint32_t step)
{
    const struct runner_config *cfg = w->run->cfg;
    struct runner_class_result *res = actor ? &w->cls[actor->cls].res : NULL;
    const struct req_record *all = rec;
    struct req_record plain;
    if (res && res->steps && rec->has_recall) {
        /* a flow's recall is its retrieval step's: the class's and the run's
         * QPS and latency count every step */
        plain = *rec;
        plain.has_recall = false;
        all = &plain;
    }
    run_stats_add_record(w->active, all, &cfg->goodput);
    if (res) {
        const struct goodput_cfg *g = &cfg->classes[actor->cls].goodput;
        run_stats_add_record(res->stats, all, g);
        if (res->steps && step < res->nsteps)
            run_stats_add_record(res->steps[step], rec, g);
    }
    if (cfg->requests_out) {
        struct buf line;
        buf_init(&line, 64 * 1024);
        if (!req_record_append_json_ex(&line, rec, w->run->start_ns,
                                       cfg->chunk_times ? REQ_JSON_CHUNK_TIMES : 0))
            (void)asyncw_write(cfg->requests_out, line.data, line.len);
        buf_release(&line);
    }
}

/*
 * A request whose exchange could not even be allocated: counted as sent and
 * failed ("other", out of memory), so the totals stay whole. Nothing else is
 * allocated here.
 */
static void record_lost(struct worker *w, const struct ractor *a, uint64_t index,
                        uint64_t intended_ns)
{
    struct req_record r;
    memset(&r, 0, sizeof(r));
    r.id = index;
    r.worker = w->index;
    r.intended_ns = intended_ns;
    r.start_ns = r.end_ns = ts_now_ns();
    r.usage_prompt_tokens = r.usage_completion_tokens = -1;
    r.prefix = -1;
    r.outcome = REQ_OTHER;
    snprintf(r.error, sizeof(r.error), "cannot send: out of memory");
    if (intended_ns < w->run->warmup_end_ns || (a && a->warmup))
        r.flags |= REQF_WARMUP;
    if (a) {
        r.tenant = (uint16_t)a->cls;
        r.class_name = w->run->cfg->classes[a->cls].traffic->name;
    }
    atomic_fetch_add(&w->sent, 1);
    account(w, &r, a, UINT32_MAX);
}

/* A new exchange in the worker's in-flight list, its record begun. */
static struct exch *exch_new(struct worker *w, uint64_t index, uint64_t intended_ns, uint32_t user)
{
    struct runner *run = w->run;
    const struct runner_config *cfg = run->cfg;
    struct exch *x = ts_calloc(1, sizeof(*x));
    if (!x) {
        ts_error("worker %u: out of memory", w->index);
        return NULL;
    }
    x->w = w;
    x->user = user;
    x->tp = &exch_sse_transport;
    struct req_record *r = &x->rec;
    r->id = index;
    r->worker = w->index;
    r->intended_ns = intended_ns;
    r->usage_prompt_tokens = -1;
    r->usage_completion_tokens = -1;
    r->prefix = -1;
    if (intended_ns < run->warmup_end_ns)
        r->flags |= REQF_WARMUP;
    buf_init(&x->body, EXCH_MAX_BODY);
    buf_init(&x->answer, QUALITY_MAX_TEXT);
    buf_init(&x->rx, EXCH_MAX_EVENT);
    if (cfg->integrity_key) {
        x->verifier = ts_malloc(sizeof(*x->verifier));
        if (x->verifier &&
            chunk_verifier_init(x->verifier, cfg->integrity_key, strlen(cfg->integrity_key))) {
            ts_free(x->verifier);
            x->verifier = NULL;
        }
    }
    sse_parser_init(&x->sse, EXCH_MAX_EVENT, on_sse_event, x);
    x->prev = NULL;
    x->next = w->inflight;
    if (w->inflight)
        w->inflight->prev = x;
    w->inflight = x;
    w->n_inflight++;
    atomic_fetch_add(&w->in_flight_now, 1);
    atomic_fetch_add(&w->sent, 1);
    if (intended_ns > atomic_load_explicit(&w->last_send_ns, memory_order_relaxed))
        atomic_store_explicit(&w->last_send_ns, intended_ns, memory_order_relaxed);
    return x;
}

/* Sends x->item to url with the run's headers plus extra ones. */
static void exch_send(struct exch *x, const char *method, const char *url, const char *const *extra,
                      size_t nextra, uint64_t timeout_ns)
{
    struct worker *w = x->w;
    struct runner *run = w->run;
    const struct runner_config *cfg = run->cfg;
    struct req_record *r = &x->rec;
    r->prompt_tokens = x->item.prompt_tokens;
    r->max_tokens = x->item.max_tokens;
    /* the request id lets a server's logs (the simulator's trace log) be joined */
    const char *headers[2 * RUNNER_MAX_HEADERS + 3];
    char request_id[64];
    struct reqtrace_headers trace_headers;
    snprintf(request_id, sizeof(request_id), "X-Request-Id: ts-%016llx-%llu",
             (unsigned long long)run->run_id, (unsigned long long)r->id);
    size_t n_headers = cfg->n_headers;
    if (n_headers) /* cfg->headers may be NULL when there are none */
        memcpy(headers, cfg->headers, n_headers * sizeof(*headers));
    if (nextra > RUNNER_MAX_HEADERS)
        nextra = RUNNER_MAX_HEADERS;
    if (nextra) {
        memcpy(headers + n_headers, extra, nextra * sizeof(*headers));
        n_headers += nextra;
    }
    headers[n_headers++] = request_id;
    /* W3C traceparent and baggage, so server-side spans join the request's trace */
    n_headers += reqtrace_begin(&x->trace, &run->trace, run->run_id, r->id, r->tenant,
                                &trace_headers, headers + n_headers);
    uint32_t timeout_ms = (uint32_t)(timeout_ns / TS_NS_PER_MS);
    struct http_call_spec spec = {
        .method = method,
        .url = url,
        .headers = headers,
        .n_headers = n_headers,
        .body = x->item.body,
        .body_len = x->item.body_len,
        .total_timeout_ms = timeout_ns && !timeout_ms ? 1 : timeout_ms,
    };
    r->start_ns = ts_now_ns();
    int rc = x->tp->start(x, &spec);
    uint64_t after = !rc && cfg->cancel && x->item.stream
                         ? run_cancel_after_ns(cfg->cancel, cfg->seed, r->id)
                         : 0;
    if (after) {
        x->cancel_at = r->start_ns + after;
        worker_cancel_arm(w, x->cancel_at);
    }
    if (rc) {
        r->end_ns = ts_now_ns();
        r->outcome = REQ_OTHER;
        exch_set_error(x, "cannot send: ", ts_strerror(rc));
        fail_later(x);
    }
}

int exch_start(struct worker *w, uint64_t index, uint64_t intended_ns, uint32_t user)
{
    const struct runner_config *cfg = w->run->cfg;
    struct exch *x = exch_new(w, index, intended_ns, user);
    if (!x) {
        record_lost(w, NULL, index, intended_ns);
        return -ENOMEM;
    }
    struct req_record *r = &x->rec;
    int rc = workload_item_tc(cfg->workload, index, w->tc, &x->item);
    if (rc) {
        r->start_ns = ts_now_ns();
        r->end_ns = r->start_ns;
        r->outcome = REQ_OTHER;
        exch_set_error(x, "cannot build the request: ", ts_strerror(rc));
        fail_later(x);
        return 0;
    }
    x->keep_answer = x->item.reference || cfg->quality.checks || cfg->quality.consistency || w->tc;
    bool sse = !cfg->realtime_url || (cfg->realtime_fallback && w->rt_refused);
    if (cfg->realtime_url) {
        x->item.stream = true; /* a realtime response is always a stream */
        if (sse)
            x->rec.flags |= REQF_FELL_BACK;
        else
            x->tp = &exch_rt_transport;
    }
    exch_send(x, "POST", sse ? cfg->url : cfg->realtime_url, NULL, 0, 0);
    return 0;
}

int exch_start_traffic(struct worker *w, struct ractor *a, struct traffic_req *rq,
                       uint64_t intended_ns)
{
    const struct runner_config *cfg = w->run->cfg;
    const struct traffic *t = cfg->classes[a->cls].traffic;
    uint64_t id = atomic_fetch_add(&w->run->req_seq, 1);
    struct exch *x = exch_new(w, id, intended_ns, a->user);
    if (!x) {
        /* the traffic counted rq in flight: it ends here, failed */
        traffic_done(a->ta, rq, false, NULL, 0, NULL, 0);
        record_lost(w, a, id, intended_ns);
        traffic_req_release(rq);
        return -ENOMEM;
    }
    x->actor = a;
    a->inflight++;
    x->treq = *rq;
    x->item = rq->item;
    memset(&x->treq.item, 0, sizeof(x->treq.item));
    memset(rq, 0, sizeof(*rq));
    if (a->warmup)
        x->rec.flags |= REQF_WARMUP;
    struct req_record *r = &x->rec;
    r->tenant = (uint16_t)a->cls;
    r->class_name = t->name;
    r->step_name = t->has_flow ? traffic_step_name(t, x->treq.step) : NULL;
    r->intent_name = x->treq.intent >= 0 && t->has_gen
                         ? promptgen_intent_name(&t->gen, (uint32_t)x->treq.intent)
                         : NULL;
    r->prefix = x->treq.prefix;
    r->perturb_mask = x->treq.perturb_mask;
    if (r->perturb_mask) {
        struct buf names;
        buf_init(&names, sizeof(r->perturb) - 1);
        if (!perturb_mask_names(&t->perturb, r->perturb_mask, &names))
            snprintf(r->perturb, sizeof(r->perturb), "%.*s", (int)names.len, names.data);
        buf_release(&names);
    }
    r->session = x->treq.session;
    r->turn = x->treq.turn;
    r->trimmed = x->treq.trimmed;
    /* the make-up of what is sent, per class */
    struct runner_class_result *cres = &w->cls[a->cls].res;
    cres->sent++;
    cres->with_prefix += r->prefix >= 0;
    cres->trimmed += r->trimmed > 0;
    if (x->treq.intent >= 0 && (uint32_t)x->treq.intent < cres->nintents)
        cres->intent_sent[x->treq.intent]++;
    for (size_t i = 0; i < t->perturb.n && i < 16; i++)
        cres->perturb_sent[i] += (r->perturb_mask >> i) & 1;
    /* sessions and flows need the answer; the rest when quality is measured */
    x->keep_answer = t->sessions || t->has_flow || t->source == TRAFFIC_DATASET ||
                     x->item.reference || cfg->quality.checks || cfg->quality.consistency || w->tc;
    const char *url = x->treq.url;
    char rt_url[TARGET_URL_MAX];
    if (t->realtime && !t->has_flow) {
        char err[256];
        x->tp = &exch_rt_transport;
        x->item.stream = true;
        if (target_realtime_url(url, t->model ? t->model : "", rt_url, err, sizeof(err))) {
            r->start_ns = r->end_ns = ts_now_ns();
            r->outcome = REQ_OTHER;
            exch_set_error(x, "endpoint realtime: ", err);
            fail_later(x);
            return 0;
        }
        url = rt_url;
    }
    exch_send(x, x->treq.method ? x->treq.method : "POST", url,
              (const char *const *)x->treq.headers, x->treq.nheaders, x->treq.timeout_ns);
    return 0;
}

/* The dual-SLA and consistency facts of a finished request, for the coordinator. */
static void add_note(struct exch *x)
{
    const struct runner_config *cfg = x->w->run->cfg;
    const struct req_record *r = &x->rec;
    struct qnote note = {
        .end_ns = r->end_ns,
        .prompt_hash = x->item.body ? text_hash(x->item.body, x->item.body_len, 0) : 0,
        .quality_ok = r->outcome == REQ_OK &&
                      (!r->quality.have || quality_scores_pass(&r->quality, &cfg->quality.target)),
        .latency_ok = goodput_meets(&cfg->goodput, r),
    };
    if (cfg->quality.consistency && r->outcome == REQ_OK && x->answer.len) {
        size_t max = cfg->quality.cons.max_answer_bytes ? cfg->quality.cons.max_answer_bytes : 4096;
        size_t n = x->answer.len < max ? x->answer.len : max;
        note.answer = ts_strndup(x->answer.data, n);
        note.answer_len = note.answer ? (uint32_t)n : 0;
    }
    (void)qnotes_push(&x->w->notes, &note);
}

void exch_finish(struct exch *x)
{
    struct worker *w = x->w;
    const struct runner_config *cfg = w->run->cfg;
    lend_chunk_times(x);
    reqtrace_end(&x->trace, &w->run->trace, w->run->run_id, &x->rec);
    account(w, &x->rec, x->actor, x->treq.step);
    if ((cfg->quality.dual_sla || cfg->quality.consistency) && !(x->rec.flags & REQF_WARMUP))
        add_note(x);
    if (x->prev)
        x->prev->next = x->next;
    else
        w->inflight = x->next;
    if (x->next)
        x->next->prev = x->prev;
    w->n_inflight--;
    atomic_fetch_sub(&w->in_flight_now, 1);
    rx_unlink(x);
    sse_parser_release(&x->sse);
    if (x->rtdec)
        realtime_decoder_release(x->rtdec);
    ts_free(x->rtdec);
    openai_memo_free(x->memo);
    buf_release(&x->rx);
    buf_release(&x->answer);
    ts_free(x->verifier);
    chunk_times_release(&x->chunks);
    buf_release(&x->body);
    work_item_release(&x->item);
    traffic_req_release(&x->treq);
    ts_free(x);
}
