/*
 * record.c - the names of request outcomes and token sources, and the
 * requests.jsonl line of a record (see record.h).
 *
 * The names are part of the file formats (result.json, requests.jsonl, the
 * Prometheus labels): never rename one, only add.
 */
#include "analysis/record.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "base/err.h"

static const char *const outcome_names[REQ_OUTCOME_COUNT] = {
    [REQ_OK] = "ok",
    [REQ_TRUNCATED] = "truncated",
    [REQ_MALFORMED] = "malformed",
    [REQ_STREAM_ERROR] = "stream_error",
    [REQ_HTTP_429] = "http_429",
    [REQ_HTTP_4XX] = "http_4xx",
    [REQ_HTTP_5XX] = "http_5xx",
    [REQ_CONNECT] = "connect",
    [REQ_TLS] = "tls",
    [REQ_TIMEOUT_CONNECT] = "timeout_connect",
    [REQ_TIMEOUT_TTFB] = "timeout_ttfb",
    [REQ_TIMEOUT_IDLE] = "timeout_idle",
    [REQ_TIMEOUT_TOTAL] = "timeout_total",
    [REQ_RECV] = "recv",
    [REQ_CUT] = "cut",
    [REQ_CANCELLED] = "cancelled",
    [REQ_OTHER] = "other",
};

static const char *const token_source_names[] = {
    [TOKENS_USAGE] = "usage",
    [TOKENS_TOKENIZER] = "tokenizer",
    [TOKENS_CHUNKS] = "chunks",
};

const char *req_outcome_name(enum req_outcome o)
{
    if ((unsigned)o >= REQ_OUTCOME_COUNT)
        return "unknown";
    return outcome_names[o];
}

int req_outcome_from_name(const char *name)
{
    if (!name)
        return -EINVAL;
    for (int i = 0; i < REQ_OUTCOME_COUNT; i++) {
        if (strcmp(outcome_names[i], name) == 0)
            return i;
    }
    return -EINVAL;
}

bool req_outcome_is_error(enum req_outcome o)
{
    return o != REQ_OK && o != REQ_CUT && o != REQ_CANCELLED;
}

const char *token_source_name(enum token_source s)
{
    if ((unsigned)s >= sizeof(token_source_names) / sizeof(token_source_names[0]))
        return "unknown";
    return token_source_names[s];
}

/* ---- requests.jsonl ------------------------------------------------------------ */

/* Appends s (at most max bytes, up to a NUL) as a JSON string: escaped, valid UTF-8. */
static int append_json_string(struct buf *b, const char *s, size_t max)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strnlen(s, max);
    int rc = buf_append_char(b, '"');

    for (size_t i = 0; !rc && i < n;) {
        unsigned c = p[i];
        size_t len = 0;
        if (c < 0x80) {
            if (c == '"' || c == '\\') {
                char esc[2] = {'\\', (char)c};
                rc = buf_append(b, esc, 2);
            } else if (c < 0x20) {
                char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
                rc = buf_append(b, esc, 6);
            } else {
                rc = buf_append_char(b, (char)c);
            }
            i++;
            continue;
        }
        /* Length of a well-formed sequence starting here, 0 if none (RFC 3629). */
        unsigned lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf)
            len = 2;
        else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            lo = c == 0xe0 ? 0xa0 : 0x80;
            hi = c == 0xed ? 0x9f : 0xbf;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            lo = c == 0xf0 ? 0x90 : 0x80;
            hi = c == 0xf4 ? 0x8f : 0xbf;
        }
        bool ok = len && i + len <= n && p[i + 1] >= lo && p[i + 1] <= hi;
        for (size_t k = 2; ok && k < len; k++)
            ok = p[i + k] >= 0x80 && p[i + k] <= 0xbf;
        if (ok) {
            rc = buf_append(b, p + i, len);
            i += len;
        } else {
            rc = buf_append(b, "\xef\xbf\xbd", 3);
            i++;
        }
    }
    return rc ? rc : buf_append_char(b, '"');
}

/* ,"key":<ns as ms with 3 decimals> (signed), or null when !present. */
static int append_ms(struct buf *b, const char *key, int64_t ns, bool present)
{
    if (!present)
        return buf_appendf(b, ",\"%s\":null", key);
    bool neg = ns < 0;
    uint64_t mag = neg ? (uint64_t)(-(ns + 1)) + 1 : (uint64_t)ns;
    uint64_t us = (mag + 500) / 1000;
    return buf_appendf(b, ",\"%s\":%s%" PRIu64 ".%03" PRIu64, key, neg && us ? "-" : "", us / 1000,
                       us % 1000);
}

/* A time point relative to the run start. */
static int append_at(struct buf *b, const char *key, uint64_t t, uint64_t start)
{
    return append_ms(b, key, (int64_t)(t - start), t != 0);
}

/* A span between two time points, when both happened. */
static int append_span(struct buf *b, const char *key, uint64_t from, uint64_t to)
{
    return append_ms(b, key, (int64_t)(to - from), from && to);
}

static int append_bool(struct buf *b, const char *key, bool v)
{
    return buf_appendf(b, ",\"%s\":%s", key, v ? "true" : "false");
}

/* ,"quality":{...} with the scores that were computed, or null when none was. */
static int append_quality(struct buf *b, const struct quality_scores *q)
{
    if (!q->have)
        return buf_append_str(b, ",\"quality\":null");
    int rc = buf_append_str(b, ",\"quality\":{\"truncated\":");
    rc = rc ? rc : buf_append_str(b, q->truncated ? "true" : "false");
    if (!rc && (q->have & QUALITY_HAVE_REF))
        rc = buf_appendf(b, ",\"rouge_l\":%.9f,\"bleu4\":%.9f,\"exact\":%s",
                         isfinite(q->rouge_l) ? q->rouge_l : 0.0,
                         isfinite(q->bleu4) ? q->bleu4 : 0.0, q->exact ? "true" : "false");
    if (!rc && (q->have & QUALITY_HAVE_REGEX))
        rc = append_bool(b, "regex_match", q->regex_match);
    if (!rc && (q->have & QUALITY_HAVE_JSON))
        rc = append_bool(b, "json_valid", q->json_valid);
    return rc ? rc : buf_append_str(b, "}");
}

/* The answer's quality, then a search's recall@k when it was measured. */
static int append_scores(struct buf *b, const struct req_record *rec)
{
    int rc = append_quality(b, &rec->quality);
    if (!rc && rec->has_recall) /* a vector search or a flow's retrieval step */
        rc = buf_appendf(b, ",\"recall\":%.9g,\"recall_k\":%u",
                         isfinite(rec->recall) ? rec->recall : 0.0, (unsigned)rec->recall_k);
    return rc;
}

bool req_tokens_disagree(uint32_t usage, uint32_t tokenizer)
{
    uint32_t d = usage > tokenizer ? usage - tokenizer : tokenizer - usage;
    return d > REQ_TOKENS_SLACK && (double)d > REQ_TOKENS_SLACK_REL * (double)usage;
}

/* The line's fields, from '{' up to the closing brace (not written). */
static int append_fields(struct buf *out, const struct req_record *rec, uint64_t run_start_ns)
{
    uint64_t end = rec->last_chunk_ns ? rec->last_chunk_ns : rec->end_ns;
    int rc = 0;

    rc = buf_appendf(out,
                     "{\"id\":%" PRIu64 ",\"worker\":%" PRIu32 ",\"tenant\":%u,\"outcome\":\"%s\","
                     "\"http_status\":%d",
                     rec->id, rec->worker, (unsigned)rec->tenant, req_outcome_name(rec->outcome),
                     rec->http_status);
    rc = rc ? rc : append_bool(out, "stream", rec->flags & REQF_STREAM);
    rc = rc ? rc : append_bool(out, "warmup", rec->flags & REQF_WARMUP);
    rc = rc ? rc : append_bool(out, "reused_conn", rec->flags & REQF_REUSED_CONN);
    rc = rc ? rc : append_at(out, "intended_ms", rec->intended_ns, run_start_ns);
    rc = rc ? rc : append_at(out, "start_ms", rec->start_ns, run_start_ns);
    rc = rc ? rc : append_at(out, "first_byte_ms", rec->first_byte_ns, run_start_ns);
    rc = rc ? rc : append_at(out, "first_chunk_ms", rec->first_chunk_ns, run_start_ns);
    rc = rc ? rc : append_at(out, "first_token_ms", rec->first_token_ns, run_start_ns);
    rc = rc ? rc : append_at(out, "first_answer_ms", rec->first_answer_ns, run_start_ns);
    rc = rc ? rc : append_at(out, "last_chunk_ms", rec->last_chunk_ns, run_start_ns);
    rc = rc ? rc : append_at(out, "end_ms", rec->end_ns, run_start_ns);
    rc = rc ? rc : append_at(out, "last_event_ms", rec->last_event_ns, run_start_ns);
    rc = rc ? rc : append_span(out, "lag_ms", rec->intended_ns, rec->start_ns);
    rc = rc ? rc : append_span(out, "ttft_ms", rec->intended_ns, rec->first_chunk_ns);
    rc = rc ? rc : append_span(out, "ttfc_ms", rec->intended_ns, rec->first_token_ns);
    rc = rc ? rc : append_span(out, "ttfa_ms", rec->intended_ns, rec->first_answer_ns);
    rc = rc ? rc : append_span(out, "e2el_ms", rec->intended_ns, end);
    if (!rc) {
        bool has = rec->output_tokens > 1 && rec->first_chunk_ns &&
                   rec->last_chunk_ns >= rec->first_chunk_ns;
        int64_t tpot = has ? llround((double)(rec->last_chunk_ns - rec->first_chunk_ns) /
                                     (double)(rec->output_tokens - 1))
                           : 0;
        rc = append_ms(out, "tpot_ms", tpot, has);
    }
    rc = rc ? rc : append_ms(out, "dns_ms", (int64_t)rec->dns_us * 1000, rec->dns_us);
    rc = rc ? rc : append_ms(out, "connect_ms", (int64_t)rec->connect_us * 1000, rec->connect_us);
    rc = rc ? rc : append_ms(out, "tls_ms", (int64_t)rec->tls_us * 1000, rec->tls_us);
    rc = rc ? rc : append_ms(out, "sent_ms", (int64_t)rec->sent_us * 1000, rec->sent_us);
    rc = rc ? rc : append_ms(out, "ttfb_ms", (int64_t)rec->ttfb_us * 1000, rec->ttfb_us);
    rc = rc ? rc
            : buf_appendf(out,
                          ",\"prompt_tokens\":%" PRIu32 ",\"max_tokens\":%" PRIu32
                          ",\"client_tokens\":%" PRIu32 ",\"content_chunks\":%" PRIu32
                          ",\"choice_chunks\":%" PRIu32 ",\"output_tokens\":%" PRIu32
                          ",\"token_source\":\"%s\"",
                          rec->prompt_tokens, rec->max_tokens, rec->client_tokens,
                          rec->content_chunks, rec->choice_chunks, rec->output_tokens,
                          token_source_name(rec->token_source));
    if (!rc && rec->usage_prompt_tokens >= 0)
        rc = buf_appendf(out, ",\"usage_prompt_tokens\":%" PRId32, rec->usage_prompt_tokens);
    else if (!rc)
        rc = buf_append_str(out, ",\"usage_prompt_tokens\":null");
    if (!rc && rec->usage_completion_tokens >= 0)
        rc =
            buf_appendf(out, ",\"usage_completion_tokens\":%" PRId32, rec->usage_completion_tokens);
    else if (!rc)
        rc = buf_append_str(out, ",\"usage_completion_tokens\":null");
    if (!rc) {
        bool has = rec->choice_chunks > 1;
        int64_t mean = has ? (int64_t)(rec->itl_sum_ns / (rec->choice_chunks - 1)) : 0;
        rc = append_ms(out, "itl_mean_ms", mean, has);
    }
    rc = rc ? rc : append_ms(out, "itl_max_ms", (int64_t)rec->itl_max_ns, rec->choice_chunks > 1);
    rc = rc ? rc : append_bool(out, "no_done", rec->flags & REQF_NO_DONE);
    rc = rc ? rc : append_bool(out, "no_finish", rec->flags & REQF_NO_FINISH);
    rc = rc ? rc : append_bool(out, "id_changed", rec->flags & REQF_ID_CHANGED);
    if (rec->flags & (REQF_AFTER_DONE | REQF_OUT_OF_ORDER | REQF_BAD_CLOSE)) {
        rc = rc ? rc : append_bool(out, "after_done", rec->flags & REQF_AFTER_DONE);
        rc = rc ? rc : append_bool(out, "out_of_order", rec->flags & REQF_OUT_OF_ORDER);
        rc = rc ? rc : append_bool(out, "bad_close", rec->flags & REQF_BAD_CLOSE);
    }
    if (rec->flags & REQF_FELL_BACK)
        rc = rc ? rc : append_bool(out, "fell_back_sse", true);
    rc = rc ? rc : append_bool(out, "usage_mismatch", rec->flags & REQF_USAGE_MISMATCH);
    rc = rc ? rc : append_bool(out, "reasoning", rec->flags & REQF_REASONING);
    rc = rc ? rc : append_scores(out, rec);
    if (!rc && (rec->flags & REQF_SIGNED))
        rc = buf_appendf(out,
                         ",\"sig\":{\"ok\":%" PRIu32 ",\"missing\":%" PRIu32
                         ",\"duplicates\":%" PRIu32 ",\"reorders\":%" PRIu32 ",\"forged\":%" PRIu32
                         ",\"unsigned\":%" PRIu32 "}",
                         rec->sig.ok, rec->sig.missing, rec->sig.duplicates, rec->sig.reorders,
                         rec->sig.forged, rec->sig.unsigned_events);
    if (!rc && rec->class_name) { /* a scenario class's labels */
        rc = buf_append_str(out, ",\"class\":");
        rc = rc ? rc : append_json_string(out, rec->class_name, strlen(rec->class_name) + 1);
        if (!rc && rec->step_name) {
            rc = buf_append_str(out, ",\"step\":");
            rc = rc ? rc : append_json_string(out, rec->step_name, strlen(rec->step_name) + 1);
        }
        if (!rc && rec->intent_name) {
            rc = buf_append_str(out, ",\"intent\":");
            rc = rc ? rc : append_json_string(out, rec->intent_name, strlen(rec->intent_name) + 1);
        }
        if (!rc && rec->prefix >= 0)
            rc = buf_appendf(out, ",\"prefix\":%" PRId32, rec->prefix);
        if (!rc && rec->perturb[0]) {
            rc = buf_append_str(out, ",\"perturbations\":");
            rc = rc ? rc : append_json_string(out, rec->perturb, sizeof(rec->perturb));
        }
        if (!rc && rec->session)
            rc = buf_appendf(out, ",\"session\":%" PRIu64 ",\"turn\":%" PRIu32, rec->session - 1,
                             rec->turn);
        if (!rc && rec->trimmed)
            rc = buf_appendf(out, ",\"trimmed\":%" PRIu32, rec->trimmed);
    }
    rc = rc ? rc : buf_append_str(out, ",\"finish_reason\":");
    if (!rc && rec->finish_reason[0])
        rc = append_json_string(out, rec->finish_reason, sizeof(rec->finish_reason));
    else if (!rc)
        rc = buf_append_str(out, "null");
    rc = rc ? rc : buf_append_str(out, ",\"error\":");
    if (!rc && rec->error[0])
        rc = append_json_string(out, rec->error, sizeof(rec->error));
    else if (!rc)
        rc = buf_append_str(out, "null");
    return rc;
}

/* ,"chunk_us":[...],"chunk_us_complete":B: offsets from start in whole microseconds. */
static int append_chunk_times(struct buf *out, const struct req_record *rec)
{
    if (rec->choice_chunks && (!rec->chunk_ns || !rec->start_ns))
        return buf_append_str(out, ",\"chunk_us\":null");
    int rc = buf_append_str(out, ",\"chunk_us\":[");
    for (uint32_t i = 0; !rc && rec->chunk_ns && i < rec->n_chunk_ns; i++) {
        uint64_t t = rec->chunk_ns[i];
        uint64_t us = t > rec->start_ns ? (t - rec->start_ns + 500) / 1000 : 0;
        rc = buf_appendf(out, i ? ",%" PRIu64 : "%" PRIu64, us);
    }
    rc = rc ? rc : buf_append_str(out, "]");
    return rc ? rc : append_bool(out, "chunk_us_complete", rec->n_chunk_ns >= rec->choice_chunks);
}

int req_record_append_json_ex(struct buf *out, const struct req_record *rec, uint64_t run_start_ns,
                              unsigned flags)
{
    size_t mark = out->len;
    int rc = append_fields(out, rec, run_start_ns);
    if (!rc && (flags & REQ_JSON_CHUNK_TIMES))
        rc = append_chunk_times(out, rec);
    rc = rc ? rc : buf_append_str(out, "}\n");
    if (rc)
        buf_truncate(out, mark);
    return rc;
}

int req_record_append_json(struct buf *out, const struct req_record *rec, uint64_t run_start_ns)
{
    return req_record_append_json_ex(out, rec, run_start_ns, 0);
}
