/*
 * test_llm_faults.c - the LLM-semantic fault transforms: hallucinated
 * entities and numbers, broken JSON answers, the length chunk, embedding
 * noise and masks (through body_tap and the OpenAI decoder), non-streamed
 * completions, and the compact JSON writer they share.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/rng.h"
#include "chaos/fault.h"
#include "chaos/tap_int.h"
#include "llm/openai_chunk.h"
#include "llm/openai_encode.h"

static struct stream_tap *tap_of(uint64_t seed, const char *spec1, const char *spec2)
{
    const char *specs[2] = {spec1, spec2};
    struct fault *fs[2];
    size_t n = 0;
    for (size_t i = 0; i < 2; i++) {
        if (!specs[i])
            continue;
        json_error_t je;
        json_t *j = json_loads(specs[i], 0, &je);
        assert_non_null(j);
        struct fault f;
        char err[256];
        if (fault_parse_json(j, &f, err, sizeof err) != 0)
            fail_msg("%s: %s", specs[i], err);
        json_decref(j);
        fs[n] = fault_new(&f);
        assert_non_null(fs[n]);
        n++;
    }
    struct stream_tap *tap = stream_tap_new(fs, n, seed, 0);
    assert_non_null(tap);
    for (size_t i = 0; i < n; i++)
        fault_unref(fs[i]);
    return tap;
}

static char *hallu(uint64_t seed, double rate, const char *const *pieces, size_t n)
{
    struct llm_hallu h;
    llm_hallu_init(&h, seed, rate);
    struct buf out;
    buf_init(&out, 1 << 20);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(llm_hallu_text(&h, pieces[i], strlen(pieces[i]), &out), 0);
    assert_int_equal(llm_hallu_flush(&h, &out), 0);
    char *s = buf_take(&out, NULL);
    return s ? s : ts_strdup("");
}

static void test_hallu_text(void **state)
{
    static const char *const one[] = {
        "In 1969 Armstrong walked on the Moon. NASA spent 25 billion dollars. "
        "Then Apollo ended.\nAldrin followed; the IBM computer had 4 KB."};
    char *s = hallu(9, 1.0, one, 1);
    /* sentence starts (In, Then, Aldrin after a newline, NASA after a stop)
     * and lowercase words are kept; the rest replaced */
    assert_true(strncmp(s, "In ", 3) == 0);
    assert_null(strstr(s, "1969"));
    assert_null(strstr(s, "Armstrong"));
    assert_null(strstr(s, "Moon"));
    assert_non_null(strstr(s, ". NASA spent "));
    assert_null(strstr(s, " 25 "));
    assert_non_null(strstr(s, " billion dollars. Then "));
    assert_null(strstr(s, "Apollo"));
    assert_non_null(strstr(s, " ended.\nAldrin followed; the "));
    assert_null(strstr(s, " IBM "));
    assert_non_null(strstr(s, " computer had "));
    assert_null(strstr(s, " 4 KB"));
    /* a year stays a year, 1..40 years away: "In dddd " */
    assert_int_equal(strspn(s + 3, "0123456789"), 4);
    int year = atoi(s + 3);
    assert_true(year >= 1929 && year <= 2009 && year != 1969);
    char *again = hallu(9, 1.0, one, 1);
    assert_string_equal(s, again);
    char *other = hallu(10, 1.0, one, 1);
    assert_string_not_equal(s, other);
    char *none = hallu(9, 0.0, one, 1);
    assert_string_equal(none, one[0]);
    ts_free(s);
    ts_free(again);
    ts_free(other);
    ts_free(none);
}

static void test_hallu_pieces_and_rate(void **state)
{
    /* a word or number split over pieces is judged and replaced whole;
     * non-ASCII stays */
    static const char *const p[] = {"We met Jo", "hnson in Zürich",    " and Kraków", " in 20",
                                    "24 ",       "with Émile and Ann."};
    for (uint64_t seed = 1; seed <= 50; seed++) {
        char *s = hallu(seed, 1.0, p, sizeof(p) / sizeof(p[0]));
        assert_true(strncmp(s, "We met ", 7) == 0);
        size_t w = strspn(s + 7, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz");
        assert_true(w >= 2);
        static const char mid[] = " in Zürich and Kraków in ";
        assert_true(strncmp(s + 7 + w, mid, strlen(mid)) == 0);
        assert_null(strstr(s, "hnson"));
        assert_null(strstr(s, "Johnson"));
        int year = atoi(s + 7 + w + strlen(mid));
        assert_true(year >= 1984 && year <= 2064 && year != 2024);
        assert_non_null(strstr(s, " with Émile and "));
        assert_null(strstr(s, "Ann."));
        ts_free(s);
    }

    /* a run held at the end of the text is written by the flush */
    struct llm_hallu hh;
    llm_hallu_init(&hh, 3, 1.0);
    struct buf o;
    buf_init(&o, 1024);
    assert_int_equal(llm_hallu_text(&hh, "It is in Paris", 14, &o), 0);
    assert_string_equal(buf_cstr(&o), "It is in ");
    assert_int_equal(llm_hallu_flush(&hh, &o), 0);
    assert_true(strncmp(buf_cstr(&o), "It is in ", 9) == 0);
    assert_true(o.len > 11 && strcmp(buf_cstr(&o) + 9, "Paris") != 0);
    assert_int_equal(hh.held_len, 0);
    buf_release(&o);

    /* a rate of 0.3 replaces about 30% of 2000 numbers */
    struct llm_hallu h;
    llm_hallu_init(&h, 77, 0.3);
    struct buf out;
    buf_init(&out, 1 << 20);
    for (int i = 0; i < 2000; i++)
        assert_int_equal(llm_hallu_text(&h, " 12345", 6, &out), 0);
    assert_int_equal(llm_hallu_flush(&h, &out), 0);
    assert_int_equal(h.candidates, 2000);
    assert_in_range(h.replaced, 540, 660);
    buf_release(&out);
}

/* Numbers become numbers of their kind and size; glued ones stay. */
static void test_hallu_numbers(void **state)
{
    for (uint64_t seed = 1; seed <= 200; seed++) {
        static const char *const one[] = {"We had 7 cats, 480 dogs, 2,100,000 fish, 3.14 pies "
                                          "and 007 agents in 1889 on a GPT4 and 5G."};
        char *s = hallu(seed, 1.0, one, 1);
        unsigned a, b, y;
        char fish[16], pie[8], agents[8];
        if (sscanf(s, "We had %u cats, %u dogs, %15s fish, %7s pies and %7s agents in %u on a ", &a,
                   &b, fish, pie, agents, &y) != 6)
            fail_msg("%s", s);
        assert_true(a >= 1 && a <= 9 && a != 7);
        assert_true(b >= 240 && b <= 720 && b != 480);
        /* separators and leading zeros: the same shape and first digit */
        assert_int_equal(strlen(fish), 9);
        assert_true(fish[0] == '2' && fish[1] == ',' && fish[5] == ',');
        assert_string_not_equal(fish, "2,100,000");
        assert_true(strlen(pie) == 4 && pie[0] == '3' && pie[1] == '.');
        assert_true(strlen(agents) == 3 && agents[0] == '0');
        assert_true(y >= 1849 && y <= 1929 && y != 1889);
        assert_non_null(strstr(s, " on a GPT4 and 5G."));
        ts_free(s);
    }
}

static void test_closer_and_length_chunk(void **state)
{
    struct buf b;
    buf_init(&b, 1024);
    assert_int_equal(llm_drop_last_closer("{\"a\":[1]} ", 10, &b), 0);
    assert_string_equal(buf_cstr(&b), "{\"a\":[1] ");
    buf_reset(&b);
    assert_int_equal(llm_drop_last_closer("abc", 3, &b), TS_AGAIN);
    assert_int_equal(b.len, 0);
    assert_true(llm_has_closer("x]", 2));
    assert_false(llm_has_closer("x)", 2));

    json_error_t je;
    json_t *tmpl = json_loads("{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":5,"
                              "\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\"hi\","
                              "\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}",
                              0, &je);
    assert_non_null(tmpl);
    json_t *c = llm_length_chunk(tmpl);
    assert_non_null(c);
    buf_reset(&b);
    assert_int_equal(tap_json_dump(&b, c, 0), 0);
    assert_string_equal(buf_cstr(&b),
                        "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":5,"
                        "\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\"\","
                        "\"logprobs\":null,\"finish_reason\":\"length\"}]}");
    json_decref(c);
    json_decref(tmpl);
    buf_release(&b);
}

static void test_json_dump(void **state)
{
    json_error_t je;
    json_t *v = json_loads("{\"z\":1,\"a\":[0.1,1.0,1e300,-2.5e-7,true,false,null],"
                           "\"s\":\"q\\\"\\\\\\n\\u0001\\u00e9\\u0000x\",\"n\":-9007199254740993}",
                           JSON_ALLOW_NUL, &je);
    assert_non_null(v);
    struct buf b;
    buf_init(&b, 1024);
    assert_int_equal(tap_json_dump(&b, v, 0), 0);
    assert_int_equal(b.len, strlen(b.data)); /* the \u0000 stays escaped: no raw NUL */
    assert_string_equal(b.data, "{\"z\":1,\"a\":[0.1,1.0,1e+300,-2.5e-07,true,false,null],"
                                "\"s\":\"q\\\"\\\\\\n\\u0001\xc3\xa9\\u0000x\","
                                "\"n\":-9007199254740993}");
    json_decref(v);
    /* the reals read back exactly */
    buf_reset(&b);
    v = json_pack("[f,f]", 0.1 + 0.2, 1.0 / 3.0);
    assert_int_equal(tap_json_dump(&b, v, 0), 0);
    assert_string_equal(b.data, "[0.30000000000000004,0.3333333333333333]");
    buf_reset(&b);
    assert_int_equal(tap_json_dump(&b, v, TAP_JSON_FLOAT32), 0);
    assert_string_equal(b.data, "[0.3,0.33333334]");
    json_decref(v);
    /* a cap too small */
    struct buf small;
    buf_init(&small, 4);
    v = json_pack("{s:s}", "key", "value");
    assert_int_equal(tap_json_dump(&small, v, 0), TS_TOOBIG);
    json_decref(v);
    buf_release(&small);
    buf_release(&b);
}

/* ---- embeddings through body_tap ---- */

#define DIMS 1536

static void make_vecs(float *v, size_t n, uint64_t seed)
{
    struct rng r;
    rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        v[i] = (float)(rng_uniform01(&r) * 2 - 1);
}

/* Runs body through a tap and decodes the result's vectors into got. */
static void embed_roundtrip(const char *spec1, const char *spec2, enum openai_encoding fmt,
                            const float *vecs, size_t n, float *got)
{
    struct buf body, out;
    buf_init(&body, 64 << 20);
    buf_init(&out, 64 << 20);
    assert_int_equal(openai_encode_embeddings(&body, "emb", vecs, n, DIMS, fmt, 7), 0);
    struct stream_tap *tap = tap_of(3, spec1, spec2);
    uint64_t delay = 5;
    assert_int_equal(body_tap(tap, body.data, body.len, &out, &delay), 0);
    assert_int_equal(delay, 0);
    stream_tap_free(tap);
    if (fmt == OPENAI_ENCODING_BASE64)
        assert_null(strstr(out.data, "\"embedding\":["));
    struct openai_decoder d;
    struct openai_chunk c;
    openai_decoder_init(&d);
    assert_int_equal(openai_decode_body(&d, out.data, out.len, &c), 0);
    assert_true(c.flags & OPENAI_CHUNK_EMBEDDINGS);
    assert_int_equal(c.n_embeddings, n);
    assert_int_equal(c.usage.prompt_tokens, 7);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(c.embeddings[i].dims, DIMS);
        memcpy(got + i * DIMS, c.embeddings[i].values, DIMS * sizeof(float));
    }
    openai_decoder_release(&d);
    buf_release(&body);
    buf_release(&out);
}

static void test_embedding_noise(void **state)
{
    enum openai_encoding fmts[] = {OPENAI_ENCODING_FLOAT, OPENAI_ENCODING_BASE64};
    size_t n = 3;
    float *v = ts_malloc(n * DIMS * sizeof(float));
    float *got = ts_malloc(n * DIMS * sizeof(float));
    make_vecs(v, n * DIMS, 1);
    for (size_t f = 0; f < 2; f++) {
        for (double target = 0.05; target < 0.5; target *= 3) {
            char spec[128];
            snprintf(spec, sizeof spec,
                     "{\"name\":\"n\",\"type\":\"llm_embedding_noise\",\"norm\":%g}", target);
            embed_roundtrip(spec, NULL, fmts[f], v, n, got);
            for (size_t i = 0; i < n; i++) {
                double dn = 0, vn = 0;
                for (size_t k = 0; k < DIMS; k++) {
                    double x = v[i * DIMS + k], y = got[i * DIMS + k];
                    dn += (y - x) * (y - x);
                    vn += x * x;
                }
                double rel = sqrt(dn) / sqrt(vn);
                assert_true(fabs(rel - target) <= 0.02 * target);
            }
        }
    }
    ts_free(v);
    ts_free(got);
}

static void test_embedding_mask(void **state)
{
    enum openai_encoding fmts[] = {OPENAI_ENCODING_FLOAT, OPENAI_ENCODING_BASE64};
    size_t n = 2;
    float *v = ts_malloc(n * DIMS * sizeof(float));
    float *got = ts_malloc(n * DIMS * sizeof(float));
    make_vecs(v, n * DIMS, 2);
    for (size_t f = 0; f < 2; f++) {
        embed_roundtrip("{\"name\":\"m\",\"type\":\"llm_embedding_mask\",\"rate\":0.25}", NULL,
                        fmts[f], v, n, got);
        for (size_t i = 0; i < n; i++) {
            size_t zeros = 0, same = 0;
            for (size_t k = 0; k < DIMS; k++) {
                zeros += got[i * DIMS + k] == 0.0f;
                same += got[i * DIMS + k] == v[i * DIMS + k];
            }
            assert_int_equal(zeros, 384); /* 25% of 1536 */
            assert_int_equal(same, DIMS - 384);
        }
        /* noise and mask together: the masked share still exact */
        embed_roundtrip("{\"name\":\"m\",\"type\":\"llm_embedding_mask\",\"rate\":0.5}",
                        "{\"name\":\"n\",\"type\":\"llm_embedding_noise\",\"norm\":0.1}", fmts[f],
                        v, n, got);
        size_t zeros = 0;
        for (size_t k = 0; k < DIMS; k++)
            zeros += got[k] == 0.0f;
        assert_int_equal(zeros, 768);
    }
    ts_free(v);
    ts_free(got);
}

static void test_nonstreamed_completion(void **state)
{
    struct buf body, out;
    buf_init(&body, 1 << 20);
    buf_init(&out, 1 << 20);
    static const char text[] = "{\"city\": \"Paris\", \"population\": 2161000}";
    assert_int_equal(openai_encode_response(&body, OPENAI_CHAT, "chatcmpl-1", 1, "m", text,
                                            strlen(text), "stop", 5, 9),
                     0);
    struct stream_tap *tap = tap_of(1, "{\"name\":\"f\",\"type\":\"llm_format_violation\"}",
                                    "{\"name\":\"h\",\"type\":\"llm_hallucinate\",\"rate\":1}");
    assert_int_equal(body_tap(tap, body.data, body.len, &out, NULL), 0);
    stream_tap_free(tap);
    struct openai_decoder d;
    struct openai_chunk c;
    openai_decoder_init(&d);
    assert_int_equal(openai_decode_body(&d, out.data, out.len, &c), 0);
    const char *got = c.choices[0].content;
    assert_non_null(got);
    assert_true(strncmp(got, "{\"city\": \"", 10) == 0);
    assert_null(strstr(got, "Paris"));
    assert_null(strstr(got, "2161000"));
    assert_true(got[strlen(got) - 1] != '}');
    assert_string_equal(c.choices[0].finish_reason, "stop");
    openai_decoder_release(&d);

    /* no LLM fault: the same bytes */
    buf_reset(&out);
    tap = tap_of(1, "{\"name\":\"e\",\"type\":\"rag_empty\",\"pointer\":\"/nothing\"}", NULL);
    assert_int_equal(body_tap(tap, body.data, body.len, &out, NULL), 0);
    assert_int_equal(out.len, body.len);
    assert_memory_equal(out.data, body.data, body.len);
    stream_tap_free(tap);
    buf_release(&body);
    buf_release(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hallu_text),     cmocka_unit_test(test_hallu_pieces_and_rate),
        cmocka_unit_test(test_hallu_numbers),  cmocka_unit_test(test_closer_and_length_chunk),
        cmocka_unit_test(test_json_dump),      cmocka_unit_test(test_embedding_noise),
        cmocka_unit_test(test_embedding_mask), cmocka_unit_test(test_nonstreamed_completion),
    };
    return cmocka_run_group_tests_name("llm_faults", tests, NULL, NULL);
}
