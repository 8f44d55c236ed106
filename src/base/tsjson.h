/*
 * tsjson.h - the few jansson building steps every JSON writer here repeats,
 * written once: a number that may be NaN, a count that may not fit, and
 * setting a key with one error convention.
 */
#ifndef TS_BASE_TSJSON_H
#define TS_BASE_TSJSON_H

#include <stdint.h>

#include <jansson.h>

#include "base/err.h"

/* A JSON real for v, or JSON null for NaN and the infinities (JSON has
 * neither). New reference; NULL when out of memory. */
json_t *tsjson_num(double v);

/* A JSON integer for v, clamped to INT64_MAX (json_int_t). New reference;
 * NULL when out of memory. */
json_t *tsjson_count(uint64_t v);

/* Sets obj[key] to v, taking v's reference whatever happens (v or obj may
 * be NULL after a failed allocation: that counts as failure). Returns 0 or
 * -ENOMEM. */
TS_MUST_CHECK int tsjson_put(json_t *obj, const char *key, json_t *v);

#endif
