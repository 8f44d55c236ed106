#include "openai.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *openai_endpoint_name(enum openai_endpoint ep)
{
    switch (ep) {
    case OPENAI_CHAT:
        return "chat";
    case OPENAI_COMPLETIONS:
        return "completions";
    case OPENAI_EMBEDDINGS:
        return "embeddings";
    }
    return "?";
}

void openai_usage_clear(struct openai_usage *u)
{
    u->present = false;
    u->prompt_tokens = -1;
    u->completion_tokens = -1;
    u->total_tokens = -1;
    u->cached_tokens = -1;
    u->reasoning_tokens = -1;
}

/* Copies s into dst[size], cutting at a UTF-8 character boundary. */
static void copy_cut(char *dst, size_t size, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n >= size) {
        n = size - 1;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
    }
    if (n)
        memcpy(dst, s, n);
    dst[n] = '\0';
}

void openai_error_set(struct openai_error *e, int status, const char *type, const char *param,
                      const char *code, const char *fmt, ...)
{
    char msg[sizeof(e->message) + 8];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n < 0)
        msg[0] = '\0';
    e->status = status;
    copy_cut(e->message, sizeof(e->message), msg);
    copy_cut(e->type, sizeof(e->type), type);
    copy_cut(e->param, sizeof(e->param), param);
    copy_cut(e->code, sizeof(e->code), code);
}
