/*
 * Fuzz the embeddings answer of text queries (app/vector_embed.h): whatever
 * a target answers, vector_embed_answer() writes only inside the rows it was
 * given, fixes one dimension in 1..VECSET_MAX_DIM, leaves finite values, and
 * says why it refused.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "app/vector_embed.h"
#include "base/alloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size)
        return 0;
    size_t n = 1 + data[0] % 4, first = data[0] / 4 % 3;
    struct vecset out = {.n = first + n};
    char err[300] = "";
    int rc =
        vector_embed_answer((const char *)data + 1, size - 1, first, n, &out, err, sizeof(err));
    if (rc && !err[0])
        abort();
    if (!rc && (!out.dim || out.dim > VECSET_MAX_DIM || !out.v))
        abort();
    for (size_t i = 0; !rc && i < (first + n) * out.dim; i++)
        if (!isfinite(out.v[i]) || (i < first * out.dim && out.v[i] != 0))
            abort();
    vecset_release(&out);
    return 0;
}
