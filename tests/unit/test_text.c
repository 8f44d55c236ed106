#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "llm/embed.h"
#include "llm/text.h"

static size_t count(const char *s)
{
    return text_count_tokens(s, strlen(s));
}

static void test_count_rules(void **state)
{
    assert_int_equal(count(""), 0);
    assert_int_equal(count("hello"), 1);
    assert_int_equal(count(" hello"), 1);
    assert_int_equal(count("hello world"), 2);
    assert_int_equal(count("internationalization"), 4);     /* 20 letters / 5 */
    assert_int_equal(count("12345"), 2);                    /* 123 45 */
    assert_int_equal(count("a, b."), 4);                    /* a , _b . */
    assert_int_equal(count("x   y"), 3);                    /* x, "  ", " y" */
    assert_int_equal(count("\xe4\xbd\xa0\xe5\xa5\xbd"), 2); /* two CJK code points */
    assert_int_equal(count("\xff\xfe"), 2);                 /* invalid bytes count one each */
}

struct collect {
    char joined[256];
    size_t pieces;
};

static int collect_piece(const char *p, size_t n, void *ctx)
{
    struct collect *c = ctx;
    strncat(c->joined, p, n);
    c->pieces++;
    return 0;
}

static void test_split_is_lossless(void **state)
{
    const char *s = "  The answer is 42,  said\tthe model.\n\nOK";
    struct collect c = {{0}, 0};
    assert_int_equal(text_split_tokens(s, strlen(s), collect_piece, &c), 0);
    assert_string_equal(c.joined, s);
    assert_int_equal(c.pieces, count(s));
}

static void test_generated_tokens_count_one_each(void **state)
{
    char text[4096] = "";
    for (uint32_t i = 0; i < 200; i++)
        strcat(text, text_token(7, i));
    assert_int_equal(count(text), 200);
    assert_string_equal(text_token(7, 3), text_token(7, 3));
    int differ = 0;
    for (uint32_t i = 0; i < 50; i++)
        differ += strcmp(text_token(7, i), text_token(8, i)) != 0;
    assert_true(differ > 25);
}

static void test_embeddings_normalised_and_similar(void **state)
{
    float a[256], b[256], c[256];
    const char *q1 = "How many users can the service handle before latency grows?";
    const char *q2 = "How many users can this service handle before the latency grows?";
    const char *q3 = "Bake the bread at two hundred degrees for forty minutes.";
    assert_int_equal(embed_text(q1, strlen(q1), a, 256), 0);
    assert_int_equal(embed_text(q2, strlen(q2), b, 256), 0);
    assert_int_equal(embed_text(q3, strlen(q3), c, 256), 0);
    double norm = 0;
    for (int i = 0; i < 256; i++)
        norm += (double)a[i] * a[i];
    assert_float_equal(norm, 1.0, 1e-5);
    double sim_close = embed_cosine(a, b, 256);
    double sim_far = embed_cosine(a, c, 256);
    assert_true(sim_close > 0.8);
    assert_true(sim_far < 0.4);
    float again[256];
    assert_int_equal(embed_text(q1, strlen(q1), again, 256), 0);
    assert_memory_equal(a, again, sizeof(a));
    assert_int_equal(embed_text(q1, strlen(q1), again, 0), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count_rules),
        cmocka_unit_test(test_split_is_lossless),
        cmocka_unit_test(test_generated_tokens_count_one_each),
        cmocka_unit_test(test_embeddings_normalised_and_similar),
    };
    return cmocka_run_group_tests_name("text", tests, NULL, NULL);
}
