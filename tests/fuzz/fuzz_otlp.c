/*
 * Fuzz what tokenstorm reads of tracing from outside: traceparent and
 * baggage header values, percent-encoded lists (OTEL_* variables) and an
 * OTLP receiver's answer; and the span encoder with arbitrary bytes in the
 * strings a server controls: its output must always be valid JSON (jansson
 * rejects invalid UTF-8) holding exactly one span.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/traceparent.h"
#include "telemetry/otlp.h"

static int count_kv(const char *k, const char *v, void *arg)
{
    if (!*k)
        abort(); /* empty keys are refused */
    (*(size_t *)arg)++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    struct trace_context tc;
    if (!traceparent_parse(s, size, &tc)) {
        char out[TRACEPARENT_LEN + 1];
        struct trace_context back;
        if (traceparent_format(&tc, out, sizeof(out)) ||
            traceparent_parse(out, TRACEPARENT_LEN, &back) || memcmp(&back, &tc, sizeof(tc)))
            abort();
    }
    char value[256];
    int rc = baggage_get(s, size, "k", value, sizeof(value));
    if (!rc && strlen(value) >= sizeof(value))
        abort();
    long n = percent_decode(s, size, value, sizeof(value));
    if (n >= (long)sizeof(value))
        abort();
    uint64_t rejected;
    (void)otlp_parse_response(s, size, &rejected);

    char *copy = malloc(size + 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    copy[size] = '\0';
    size_t pairs = 0;
    (void)otlp_parse_kv_list(copy, count_kv, &pairs);

    /* the server-controlled strings of a span: three pieces of the input */
    struct otlp_span sp;
    otlp_span_init(&sp);
    sp.trace_id[0] = sp.span_id[0] = 1;
    sp.operation = "chat";
    sp.request_model = copy;
    size_t third = size / 3;
    memcpy(sp.response_id, data,
           third < sizeof(sp.response_id) - 1 ? third : sizeof(sp.response_id) - 1);
    size_t m =
        size - third < sizeof(sp.response_model) - 1 ? size - third : sizeof(sp.response_model) - 1;
    memcpy(sp.response_model, data + third, m);
    otlp_copy_str(sp.status_message, sizeof(sp.status_message), copy);
    sp.status = OTLP_STATUS_ERROR;
    struct buf b;
    buf_init(&b, 1 << 20);
    if (!otlp_encode_span(&b, &sp)) {
        json_t *doc = json_loadb(b.data, b.len, 0, NULL);
        if (!json_is_object(doc))
            abort();
        json_decref(doc);
    }
    buf_release(&b);
    free(copy);
    return 0;
}
