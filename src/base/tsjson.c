/*
 * tsjson.c - see tsjson.h.
 */
#include "base/tsjson.h"

#include <math.h>

json_t *tsjson_num(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

json_t *tsjson_count(uint64_t v)
{
    return json_integer(v > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)v);
}

int tsjson_put(json_t *obj, const char *key, json_t *v)
{
    /* json_object_set_new() releases v on every failure, NULL obj included */
    return json_object_set_new(obj, key, v) == 0 ? 0 : -ENOMEM;
}
