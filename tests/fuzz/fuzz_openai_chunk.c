/*
 * Fuzz the OpenAI response decoder (stream chunks and whole bodies) and
 * check the stream encoder against it: any bytes encoded as content must
 * decode back to a chunk carrying a valid JSON string.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "llm/openai_chunk.h"
#include "llm/openai_encode.h"

static size_t touch(const struct openai_chunk *c)
{
    size_t s = 0;
    for (size_t i = 0; i < c->n_choices; i++) {
        const struct openai_choice *ch = &c->choices[i];
        if (ch->content)
            s += strlen(ch->content) + ch->content_len;
        if (ch->text)
            s += ch->text_len + (size_t)ch->text[ch->text_len];
        if (ch->reasoning)
            s += ch->reasoning_len;
        if (ch->role)
            s += strlen(ch->role);
        if (ch->finish_reason)
            s += strlen(ch->finish_reason);
        for (size_t t = 0; t < ch->n_tool_calls; t++) {
            const struct openai_tool_call *tc = &ch->tool_calls[t];
            s += tc->arguments_len + (tc->name ? strlen(tc->name) : 0) +
                 (tc->id ? strlen(tc->id) : 0);
        }
    }
    for (size_t i = 0; i < c->n_embeddings; i++)
        for (size_t k = 0; k < c->embeddings[i].dims; k++)
            s += c->embeddings[i].values[k] > 0;
    if (c->error.message)
        s += strlen(c->error.message);
    if (c->error.code)
        s += strlen(c->error.code);
    if (c->id)
        s += strlen(c->id);
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct openai_decoder d;
    struct openai_chunk c;
    openai_decoder_init(&d);
    volatile size_t sink = 0;
    int rc = openai_decode_chunk(&d, (const char *)data, size, &c);
    if (rc == 0)
        sink += touch(&c);
    else if (rc != TS_PARSE || c.flags != 0 || !openai_decoder_errmsg(&d)[0])
        abort();
    rc = openai_decode_body(&d, (const char *)data, size, &c);
    if (rc == 0)
        sink += touch(&c);
    else if (rc != TS_PARSE || !openai_decoder_errmsg(&d)[0])
        abort();

    /* encoder -> decoder */
    struct openai_stream_enc e;
    if (openai_stream_enc_init(&e, size % 2 ? OPENAI_CHAT : OPENAI_COMPLETIONS, "id", 1, "m"))
        abort();
    struct buf out;
    buf_init(&out, 1 << 24);
    if (openai_stream_enc_content(&e, &out, (const char *)data, size))
        abort();
    if (openai_decode_chunk(&d, out.data + 6, out.len - 8, &c) != 0 || c.n_choices != 1)
        abort();
    const struct openai_choice *ch = &c.choices[0];
    size_t got = size % 2 ? ch->content_len : ch->text_len;
    if (got < size) /* every input byte yields at least one output byte */
        abort();
    buf_release(&out);
    openai_stream_enc_release(&e);
    openai_decoder_release(&d);
    (void)sink;
    return 0;
}
