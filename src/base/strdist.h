/*
 * strdist.h - "did you mean ...?" for names given by users (options, keys,
 * metrics, profile fields).
 */
#ifndef TS_BASE_STRDIST_H
#define TS_BASE_STRDIST_H

#include <stddef.h>

#define STRDIST_MAX_LEN 64

/*
 * Optimal string alignment distance (insertions, deletions, substitutions,
 * and a swap of neighbours, each costing 1) of a[0..la) and b[0..lb).
 * Returns SIZE_MAX when either is longer than STRDIST_MAX_LEN.
 */
size_t str_edit_distance(const char *a, size_t la, const char *b, size_t lb);

/*
 * The candidate closest to name[0..len) within max_d edits (ties: the first),
 * or NULL. candidates is a NULL-terminated array when n is 0, else n entries.
 */
const char *str_closest(const char *name, size_t len, const char *const *candidates, size_t n,
                        size_t max_d);

#endif
