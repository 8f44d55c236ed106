/*
 * json_simd.cpp - simdjson's DOM replayed as yajl callbacks (json_simd.h).
 * The project's second C++ file, behind an extern "C" shim like
 * sim/ann_faiss.cpp: no exception leaves it (simdjson is used through its
 * error codes, and allocation failures are caught).
 */
#include "llm/json_simd.h"

#include <cerrno>
#include <cstring>
#include <new>

#include <simdjson.h>

struct json_simd {
    simdjson::dom::parser parser;
    char text[JSON_SIMD_MAX_TEXT + simdjson::SIMDJSON_PADDING];
};

namespace
{

struct walk {
    const yajl_callbacks *cb;
    void *ctx;
};

int replay(const walk &w, simdjson::dom::element e);

int replay_object(const walk &w, simdjson::dom::object o)
{
    if (w.cb->yajl_start_map && !w.cb->yajl_start_map(w.ctx))
        return 0;
    for (simdjson::dom::key_value_pair kv : o) {
        if (w.cb->yajl_map_key &&
            !w.cb->yajl_map_key(w.ctx, reinterpret_cast<const unsigned char *>(kv.key.data()),
                                kv.key.size()))
            return 0;
        if (!replay(w, kv.value))
            return 0;
    }
    return w.cb->yajl_end_map ? w.cb->yajl_end_map(w.ctx) : 1;
}

int replay_array(const walk &w, simdjson::dom::array a)
{
    if (w.cb->yajl_start_array && !w.cb->yajl_start_array(w.ctx))
        return 0;
    for (simdjson::dom::element e : a)
        if (!replay(w, e))
            return 0;
    return w.cb->yajl_end_array ? w.cb->yajl_end_array(w.ctx) : 1;
}

int replay(const walk &w, simdjson::dom::element e)
{
    switch (e.type()) {
    case simdjson::dom::element_type::OBJECT:
        return replay_object(w, simdjson::dom::object(e));
    case simdjson::dom::element_type::ARRAY:
        return replay_array(w, simdjson::dom::array(e));
    case simdjson::dom::element_type::STRING: {
        std::string_view s(e);
        return w.cb->yajl_string
                   ? w.cb->yajl_string(w.ctx, reinterpret_cast<const unsigned char *>(s.data()),
                                       s.size())
                   : 1;
    }
    case simdjson::dom::element_type::INT64:
        return w.cb->yajl_integer ? w.cb->yajl_integer(w.ctx, int64_t(e)) : 1;
    case simdjson::dom::element_type::UINT64:
        return 0; /* beyond int64_t: yajl refuses it, and jansson too */
    case simdjson::dom::element_type::DOUBLE:
        return w.cb->yajl_double ? w.cb->yajl_double(w.ctx, double(e)) : 1;
    case simdjson::dom::element_type::BOOL:
        return w.cb->yajl_boolean ? w.cb->yajl_boolean(w.ctx, bool(e) ? 1 : 0) : 1;
    case simdjson::dom::element_type::NULL_VALUE:
        return w.cb->yajl_null ? w.cb->yajl_null(w.ctx) : 1;
    }
    return 0;
}

} // namespace

extern "C" int json_simd_walk(struct json_simd **state, const char *s, size_t n,
                              const yajl_callbacks *cb, void *ctx)
{
    if (n > JSON_SIMD_MAX_TEXT)
        return 0;
    if (!*state) {
        *state = new (std::nothrow) json_simd;
        if (!*state)
            return -ENOMEM;
    }
    json_simd *j = *state;
    memcpy(j->text, s, n);
    memset(j->text + n, 0, simdjson::SIMDJSON_PADDING);
    simdjson::dom::element root;
    try {
        if (j->parser.parse(j->text, n, false).get(root))
            return 0;
    } catch (const std::bad_alloc &) {
        return -ENOMEM; /* the parser's buffers, made on its first parse */
    }
    return replay(walk{cb, ctx}, root) ? 1 : 0;
}

extern "C" void json_simd_free(struct json_simd *state)
{
    delete state;
}
