/*
 * Fuzz the OpenAI request parser. The first byte picks the endpoint. On
 * success the parsed fields are read; on failure the error must be a
 * complete 400 whose encoded body is valid JSON.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "llm/openai_encode.h"
#include "llm/openai_request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    enum openai_endpoint ep = (enum openai_endpoint)(1 + data[0] % 3);
    struct openai_request_limits lim;
    openai_request_limits_default(&lim);
    lim.max_messages = 64;
    lim.max_text_bytes = 4096;
    struct openai_request r;
    struct openai_error e;
    openai_request_init(&r);
    int rc = openai_request_parse(&r, ep, (const char *)data + 1, size - 1, &lim, &e);
    volatile size_t sink = 0;
    if (rc == 0) {
        size_t text = 0;
        for (size_t i = 0; i < r.n_messages; i++) {
            sink += strlen(r.messages[i].role);
            for (size_t j = 0; j < r.messages[i].n_parts; j++)
                text += r.messages[i].parts[j].len + (size_t)r.messages[i].parts[j].s[0];
        }
        for (size_t i = 0; i < r.n_inputs; i++)
            if (r.inputs[i].text)
                text += r.inputs[i].len;
        for (size_t i = 0; i < r.n_stop; i++)
            sink += r.stop[i].len;
        if (r.text_bytes > lim.max_text_bytes || r.n_messages > lim.max_messages ||
            r.n_stop > OPENAI_MAX_STOP || (ep == OPENAI_CHAT && r.n_messages == 0) ||
            (ep != OPENAI_CHAT && r.n_inputs == 0) || !r.model)
            abort();
        sink += text + strlen(r.model);
    } else {
        if (rc != TS_PARSE || e.status != 400 || !e.message[0])
            abort();
        struct buf out;
        buf_init(&out, 1 << 16);
        if (openai_encode_error(&out, &e) != 0)
            abort();
        json_t *j = json_loadb(out.data, out.len, 0, NULL);
        if (!j)
            abort();
        json_decref(j);
        buf_release(&out);
    }
    openai_request_release(&r);
    (void)sink;
    return 0;
}
