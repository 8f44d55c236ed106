#include "strdist.h"

#include <stdint.h>
#include <string.h>

size_t str_edit_distance(const char *a, size_t la, const char *b, size_t lb)
{
    unsigned char d[STRDIST_MAX_LEN + 1][STRDIST_MAX_LEN + 1];
    if (la > STRDIST_MAX_LEN || lb > STRDIST_MAX_LEN)
        return SIZE_MAX;
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (unsigned char)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (unsigned char)j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            unsigned best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1u < best)
                best = d[i - 1][j] + 1u;
            if (d[i][j - 1] + 1u < best)
                best = d[i][j - 1] + 1u;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1u < best)
                best = d[i - 2][j - 2] + 1u;
            d[i][j] = (unsigned char)best;
        }
    }
    return d[la][lb];
}

const char *str_closest(const char *name, size_t len, const char *const *candidates, size_t n,
                        size_t max_d)
{
    const char *best = NULL;
    size_t best_d = max_d + 1;
    for (size_t i = 0; n ? i < n : candidates[i] != NULL; i++) {
        size_t d = str_edit_distance(name, len, candidates[i], strlen(candidates[i]));
        if (d < best_d) {
            best_d = d;
            best = candidates[i];
        }
    }
    return best;
}
