/*
 * jsonptr.h - RFC 6901 JSON pointers over jansson values.
 *
 * A pointer is "" (the whole document) or a sequence of "/token"; in a
 * token "~1" stands for '/' and "~0" for '~' (decoded in that order, so
 * "~01" is the key "~1"). A token addresses an object member by its exact
 * key (keys may hold any bytes, NUL included), or an array element by a
 * decimal index without a leading zero ("0", "7", "12"; not "07", "-", "+1").
 * The "-" token ("the element after the last") never exists for a lookup.
 *
 * Nothing here allocates: lookups are safe on any path, including the
 * allocation-failure paths of their callers.
 */
#ifndef TS_LLM_JSONPTR_H
#define TS_LLM_JSONPTR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * The value ptr[0..len) addresses in root: a borrowed reference (it lives
 * as long as root holds it), root itself for "", or NULL when the value does
 * not exist or the pointer is malformed ("~" not followed by 0 or 1, an array
 * index with a leading zero or anything but digits, more than 18 digits, a
 * non-empty pointer not starting with '/'). root may be NULL (gives NULL for
 * every pointer but "", which gives NULL too). ptr may hold NUL bytes (they
 * are part of a key).
 */
json_t *jsonptr_get(json_t *root, const char *ptr, size_t len);

/* Whether ptr[0..len) is a well-formed pointer (syntax only: "" or '/'
 * tokens whose "~" escapes are ~0 or ~1). */
bool jsonptr_valid(const char *ptr, size_t len);

#endif
