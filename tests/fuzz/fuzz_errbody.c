/*
 * Fuzz the error-body describer: whatever a server sends as the body of a
 * non-2xx answer, the line it gives fits the buffer, is valid UTF-8 and has no
 * control character.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "llm/errbody.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const char *out, size_t len, size_t cap)
{
    if (len >= cap || strlen(out) != len || utf8_invalid_at(out, len) != len)
        abort();
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char out[200], small[5];
    size_t cap = size ? 1 + data[0] % sizeof(out) : sizeof(out);
    size_t n = errbody_describe((const char *)data, size, out, cap);
    check(out, n, cap);
    n = errbody_describe((const char *)data, size, small, sizeof(small));
    check(small, n, sizeof(small));
    n = errbody_printable((const char *)data, size, out, sizeof(out));
    check(out, n, sizeof(out));
    return 0;
}
