/*
 * record.c - the names of request outcomes and token sources (see record.h).
 *
 * The names are part of the file formats (result.json, requests.jsonl, the
 * Prometheus labels): never rename one, only add.
 */
#include "load/record.h"

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
    return o != REQ_OK && o != REQ_CUT;
}

const char *token_source_name(enum token_source s)
{
    if ((unsigned)s >= sizeof(token_source_names) / sizeof(token_source_names[0]))
        return "unknown";
    return token_source_names[s];
}
