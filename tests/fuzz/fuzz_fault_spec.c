/*
 * fuzz_fault_spec - fault files (YAML or JSON) through the one spec parser:
 * fault_yaml_parse, fault_parse_json on each entry, and the canonical form
 * (fault_to_json) parsed back, which must succeed.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "chaos/fault.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *list = NULL;
    char err[512];
    if (fault_yaml_parse((const char *)data, size, "fuzz", &list, err, sizeof err) != 0)
        return 0;
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        struct fault f, g;
        if (fault_parse_json(v, &f, err, sizeof err) != 0)
            continue;
        json_t *back = fault_to_json(&f, 0);
        if (!back)
            continue;
        if (fault_parse_json(back, &g, err, sizeof err) != 0)
            abort(); /* the canonical form must parse */
        json_decref(back);
    }
    json_decref(list);
    return 0;
}
