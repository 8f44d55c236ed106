#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "workload/prompts.h"

static int parse(struct prompts *p, const char *s, size_t len, unsigned flags, char *err,
                 size_t errlen)
{
    prompts_init(p);
    return prompts_parse(p, s, len, "t.jsonl", flags, err, errlen);
}

static void assert_empty(const struct prompts *p)
{
    assert_int_equal(p->n, 0);
    assert_null(p->v);
    assert_int_equal(p->pool.len, 0);
}

static void test_good_file(void **state)
{
    static const char text[] =
        "\xef\xbb\xbf{\"prompt\":\"Hello world\",\"max_tokens\":5,\"reference\":\"Hi\"}\r\n"
        "\n"
        "   # a comment\n"
        "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
        "{\"role\":\"user\",\"content\":\"Hi there\",\"name\":\"bob\"}],\"output_tokens\":20,"
        "\"id\":7}\n"
        "\t\n"
        "{\"prompt\":\"a\\u00e9b\"}";
    struct prompts p;
    char err[256] = "";
    assert_int_equal(parse(&p, text, sizeof(text) - 1, 0, err, sizeof(err)), 0);
    assert_string_equal(err, "");
    assert_int_equal(prompts_count(&p), 3);

    const struct prompt_entry *e = prompts_get(&p, 0);
    assert_int_equal(e->kind, PROMPT_TEXT);
    assert_int_equal(e->line, 1);
    assert_int_equal(e->tokens, 2); /* Hello, " world" */
    assert_int_equal(e->max_tokens, 5);
    assert_string_equal(prompts_json(&p, e), "\"Hello world\"");
    assert_int_equal(e->json_len, 13);
    assert_string_equal(prompts_reference(&p, e), "Hi");

    e = prompts_get(&p, 1);
    assert_int_equal(e->kind, PROMPT_MESSAGES);
    assert_int_equal(e->line, 4);
    /* reply 3 + system (3 + "system" 2 + "Be brief." 3) + user (3 + "user" 1 + "Hi there" 2
     * + name 1 + "bob" 1) */
    assert_int_equal(e->tokens, 3 + 8 + 8);
    assert_int_equal(e->max_tokens, 20);
    assert_string_equal(prompts_json(&p, e),
                        "[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                        "{\"role\":\"user\",\"content\":\"Hi there\",\"name\":\"bob\"}]");
    assert_null(prompts_reference(&p, e));

    e = prompts_get(&p, 2);
    assert_int_equal(e->kind, PROMPT_TEXT);
    assert_int_equal(e->line, 6);
    assert_int_equal(e->tokens, 3); /* a, U+00E9, b */
    assert_int_equal(e->max_tokens, 0);
    assert_string_equal(prompts_json(&p, e), "\"a\xc3\xa9"
                                             "b\"");
    prompts_release(&p);
    assert_empty(&p);
}

static void test_content_parts(void **state)
{
    static const char text[] =
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hello "
        "there\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]},"
        "{\"role\":\"assistant\",\"content\":null}]}\n";
    struct prompts p;
    assert_int_equal(parse(&p, text, sizeof(text) - 1, 0, NULL, 0), 0);
    /* 3 + (3 + "user" 1 + 2) + (3 + "assistant" 2 + 0) */
    assert_int_equal(prompts_get(&p, 0)->tokens, 3 + 6 + 5);
    prompts_release(&p);
}

struct bad_case {
    const char *text;
    size_t len; /* 0: strlen(text) */
    unsigned flags;
    int rc;
    const char *msg;
};

static void test_broken_files(void **state)
{
    static const struct bad_case cases[] = {
        {"{\"prompt\":\"a\",}", 0, 0, TS_PARSE,
         "t.jsonl:1:15: invalid JSON: string or '}' expected near '}'"},
        {"{\"prompt\":\"a\"", 0, 0, TS_PARSE,
         "t.jsonl:1:13: invalid JSON: '}' expected near end of file"},
        {"{\"prompt\":\"a\"} x", 0, 0, TS_PARSE,
         "t.jsonl:1:16: invalid JSON: end of file expected near 'x'"},
        {"{\"prompt\":\"a\",\"prompt\":\"b\"}", 0, 0, TS_PARSE,
         "t.jsonl:1:22: invalid JSON: duplicate object key near '\"prompt\"'"},
        {"{\"prompt\":\"\xff\"}", 0, 0, TS_PARSE,
         "t.jsonl:1:11: invalid JSON: unable to decode byte 0xff near '\"'"},
        {"[1,2]", 0, 0, TS_PARSE, "t.jsonl:1: expected a JSON object, got an array"},
        {"\"hi\"", 0, 0, TS_PARSE, "t.jsonl:1:4: invalid JSON: '[' or '{' expected near '\"hi\"'"},
        {"{\"x\":1}", 0, 0, TS_PARSE,
         "t.jsonl:1: needs \"prompt\" (a string) or \"messages\" (an array)"},
        {"{\"prompt\":\"a\",\"messages\":[]}", 0, 0, TS_PARSE,
         "t.jsonl:1: give \"prompt\" or \"messages\", not both"},
        {"{\"prompt\":5}", 0, 0, TS_PARSE, "t.jsonl:1: \"prompt\" must be a string, got a number"},
        {"{\"prompt\":null}", 0, 0, TS_PARSE, "t.jsonl:1: \"prompt\" must be a string, got null"},
        {"{\"messages\":[]}", 0, 0, TS_PARSE, "t.jsonl:1: \"messages\" is empty"},
        {"{\"messages\":\"hi\"}", 0, 0, TS_PARSE,
         "t.jsonl:1: \"messages\" must be an array, got a string"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"content\":\"b\"}]}", 0, 0,
         TS_PARSE, "t.jsonl:1: \"messages\"[1] needs a \"role\" string"},
        {"{\"messages\":[\"hi\"]}", 0, 0, TS_PARSE,
         "t.jsonl:1: \"messages\"[0] must be an object, got a string"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":3}]}", 0, 0, TS_PARSE,
         "t.jsonl:1: \"messages\"[0].content must be a string, an array or null"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[\"x\"]}]}", 0, 0, TS_PARSE,
         "t.jsonl:1: \"messages\"[0].content[0] must be an object"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":1}]}]}", 0, 0, TS_PARSE,
         "t.jsonl:1: \"messages\"[0].content[0].text must be a string"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"name\":2}]}", 0, 0, TS_PARSE,
         "t.jsonl:1: \"messages\"[0].name must be a string"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}", 0, PROMPTS_TEXT_ONLY, TS_PARSE,
         "t.jsonl:1: \"messages\" needs the chat endpoint (use \"prompt\" for this one)"},
        {"{\"prompt\":\"a\",\"max_tokens\":0}", 0, 0, TS_PARSE,
         "t.jsonl:1: \"max_tokens\" must be an integer from 1 to 16777216"},
        {"{\"prompt\":\"a\",\"max_tokens\":16777217}", 0, 0, TS_PARSE,
         "t.jsonl:1: \"max_tokens\" must be an integer from 1 to 16777216"},
        {"{\"prompt\":\"a\",\"output_tokens\":\"5\"}", 0, 0, TS_PARSE,
         "t.jsonl:1: \"output_tokens\" must be an integer from 1 to 16777216"},
        {"{\"prompt\":\"a\",\"max_tokens\":2.5}", 0, 0, TS_PARSE,
         "t.jsonl:1: \"max_tokens\" must be an integer from 1 to 16777216"},
        {"{\"prompt\":\"a\",\"max_tokens\":5,\"output_tokens\":5}", 0, 0, TS_PARSE,
         "t.jsonl:1: give \"max_tokens\" or \"output_tokens\", not both"},
        {"{\"prompt\":\"a\",\"reference\":1}", 0, 0, TS_PARSE,
         "t.jsonl:1: \"reference\" must be a string, got a number"},
        /* line numbers count blank and comment lines */
        {"{\"prompt\":\"a\"}\n# c\n\n{\"prompt\":true}\n{\"prompt\":\"b\"}\n", 0, 0, TS_PARSE,
         "t.jsonl:4: \"prompt\" must be a string, got a boolean"},
        {"{\"prompt\":\"a\"}\r\n\r\n{\"prompt\":\"b\"", 0, 0, TS_PARSE,
         "t.jsonl:3:13: invalid JSON: '}' expected near end of file"},
        {"{\"prompt\":\"a\"}\n{\"pro\0mpt\":1}", 28, 0, TS_PARSE, "t.jsonl:2:6: NUL byte"},
        {"", 0, 0, TS_PARSE,
         "t.jsonl: no prompts (the file is empty or has only blank and comment lines)"},
        {"# only\n\n  \t\r\n#{\"prompt\":\"a\"}\n", 0, 0, TS_PARSE,
         "t.jsonl: no prompts (the file is empty or has only blank and comment lines)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct bad_case *c = &cases[i];
        struct prompts p;
        char err[256] = "";
        size_t len = c->len ? c->len : strlen(c->text);
        int rc = parse(&p, c->text, len, c->flags, err, sizeof(err));
        if (rc != c->rc || strcmp(err, c->msg) != 0)
            fail_msg("case %zu: rc %d, message '%s', want %d '%s'", i, rc, err, c->rc, c->msg);
        assert_empty(&p);
    }
}

static void test_error_buffer_truncated(void **state)
{
    struct prompts p;
    char err[12];
    memset(err, 'z', sizeof(err));
    assert_int_equal(parse(&p, "[1]", 3, 0, err, sizeof(err)), TS_PARSE);
    assert_string_equal(err, "t.jsonl:1: ");
    assert_int_equal(parse(&p, "[1]", 3, 0, NULL, 0), TS_PARSE);
}

/* {"prompt":"xxx..."} of exactly len bytes. */
static char *prompt_line(size_t len)
{
    char *s = malloc(len + 1);
    assert_non_null(s);
    memset(s, 'x', len);
    memcpy(s, "{\"prompt\":\"", 11);
    memcpy(s + len - 2, "\"}", 2);
    s[len] = '\0';
    return s;
}

static void test_line_limit(void **state)
{
    struct prompts p;
    char err[256];
    char *max = prompt_line(PROMPTS_MAX_LINE + 2);
    memcpy(max + PROMPTS_MAX_LINE, "\r\n", 2); /* the line end does not count */
    memcpy(max + PROMPTS_MAX_LINE - 2, "\"}", 2);
    assert_int_equal(parse(&p, max, PROMPTS_MAX_LINE + 2, 0, err, sizeof(err)), 0);
    assert_int_equal(prompts_count(&p), 1);
    assert_int_equal(prompts_get(&p, 0)->json_len, PROMPTS_MAX_LINE - 11);
    prompts_release(&p);
    free(max);

    char *over = prompt_line(PROMPTS_MAX_LINE + 1);
    assert_int_equal(parse(&p, over, PROMPTS_MAX_LINE + 1, 0, err, sizeof(err)), TS_TOOBIG);
    assert_string_equal(err, "t.jsonl:1: line longer than 1048576 bytes");
    assert_empty(&p);
    free(over);
}

static void test_line_count_limit(void **state)
{
    struct prompts p;
    char err[256];
    size_t n = PROMPTS_MAX_LINES + 1;
    char *text = malloc(n + 16);
    assert_non_null(text);
    memcpy(text, "{\"prompt\":\"a\"}", 14);
    memset(text + 14, '\n', n - 1);
    /* PROMPTS_MAX_LINES lines: the prompt and blank lines */
    assert_int_equal(parse(&p, text, 14 + PROMPTS_MAX_LINES - 1, 0, err, sizeof(err)), 0);
    prompts_release(&p);
    /* one more line, even blank, is over */
    text[14 + n - 1] = ' ';
    assert_int_equal(parse(&p, text, 14 + n, 0, err, sizeof(err)), TS_TOOBIG);
    assert_string_equal(err, "t.jsonl:10000001: more than 10000000 lines");
    assert_empty(&p);
    free(text);
}

static char tmp_path[64];

static void write_file(const char *data, size_t len)
{
    strcpy(tmp_path, "/tmp/test_prompts_XXXXXX");
    int fd = mkstemp(tmp_path);
    assert_true(fd >= 0);
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, data + off, len - off);
        assert_true(n > 0);
        off += (size_t)n;
    }
    assert_int_equal(close(fd), 0);
}

/* A file read in 64 KiB blocks gives the same prompts as the same bytes in memory,
 * including lines that span blocks and one longer than a block. */
static void test_load_matches_parse(void **state)
{
    size_t cap = 4 << 20, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    for (int i = 0; i < 6000; i++) {
        if (i == 3000) {
            char *big = prompt_line(200000);
            memcpy(text + len, big, 200000);
            len += 200000;
            text[len++] = '\n';
            free(big);
            continue;
        }
        if (i % 7 == 0)
            len += (size_t)snprintf(text + len, cap - len, "# comment %d\r\n", i);
        else
            len += (size_t)snprintf(text + len, cap - len,
                                    "{\"prompt\":\"line %d of the file\",\"max_tokens\":%d}\r\n", i,
                                    i);
    }
    len -= 2; /* no line end after the last line */
    write_file(text, len);

    struct prompts a, b;
    char err[256] = "";
    prompts_init(&a);
    assert_int_equal(prompts_load(&a, tmp_path, 0, err, sizeof(err)), 0);
    assert_int_equal(parse(&b, text, len, 0, err, sizeof(err)), 0);
    assert_int_equal(prompts_count(&a), 6000 - 858); /* 858 multiples of 7 below 6000 */
    assert_int_equal(prompts_count(&a), prompts_count(&b));
    for (size_t i = 0; i < prompts_count(&a); i++) {
        const struct prompt_entry *ea = prompts_get(&a, i), *eb = prompts_get(&b, i);
        assert_int_equal(ea->line, eb->line);
        assert_int_equal(ea->max_tokens, eb->max_tokens);
        assert_int_equal(ea->tokens, eb->tokens);
        assert_string_equal(prompts_json(&a, ea), prompts_json(&b, eb));
    }
    assert_int_equal(prompts_get(&a, prompts_count(&a) - 1)->max_tokens,
                     5998); /* 5999 = 7 * 857 is a comment */
    prompts_release(&a);
    prompts_release(&b);
    assert_int_equal(unlink(tmp_path), 0);
    free(text);
}

static void test_load_errors(void **state)
{
    struct prompts p;
    char err[512];
    prompts_init(&p);
    assert_int_equal(prompts_load(&p, "/nonexistent/p.jsonl", 0, err, sizeof(err)), -ENOENT);
    assert_string_equal(err, "/nonexistent/p.jsonl: No such file or directory");

    /* a line too long in the middle of a file */
    size_t len = 40 + PROMPTS_MAX_LINE + 2;
    char *text = malloc(len);
    assert_non_null(text);
    memset(text, 'x', len);
    memcpy(text, "{\"prompt\":\"a\"}\n\n", 16);
    write_file(text, len);
    assert_int_equal(prompts_load(&p, tmp_path, 0, err, sizeof(err)), TS_TOOBIG);
    char want[256];
    snprintf(want, sizeof(want), "%s:3: line longer than 1048576 bytes", tmp_path);
    assert_string_equal(err, want);
    assert_empty(&p);
    assert_int_equal(unlink(tmp_path), 0);

    /* a bad line in a file names the file */
    const char *bad = "{\"prompt\":\"a\"}\n{\"prompt\":[]}\n";
    write_file(bad, strlen(bad));
    assert_int_equal(prompts_load(&p, tmp_path, 0, err, sizeof(err)), TS_PARSE);
    snprintf(want, sizeof(want), "%s:2: \"prompt\" must be a string, got an array", tmp_path);
    assert_string_equal(err, want);
    assert_int_equal(unlink(tmp_path), 0);
    free(text);
}

/* Failing each allocation in turn gives -ENOMEM and an empty struct, never a leak. */
static void test_out_of_memory(void **state)
{
    static const char text[] = "{\"prompt\":\"a\",\"reference\":\"r\"}\n"
                               "{\"messages\":[{\"role\":\"user\",\"content\":\"b\"}]}\n";
    int rc = -1;
    long n;
    for (n = 0; n < 100; n++) {
        struct prompts p;
        char err[128];
        prompts_init(&p);
        ts_alloc_fail_after(n);
        rc = prompts_parse(&p, text, sizeof(text) - 1, NULL, 0, err, sizeof(err));
        ts_alloc_fail_after(-1);
        if (rc == 0) {
            assert_int_equal(prompts_count(&p), 2);
            prompts_release(&p);
            break;
        }
        assert_int_equal(rc, -ENOMEM);
        assert_empty(&p);
    }
    assert_int_equal(rc, 0);
    assert_true(n > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_file),          cmocka_unit_test(test_content_parts),
        cmocka_unit_test(test_broken_files),       cmocka_unit_test(test_error_buffer_truncated),
        cmocka_unit_test(test_line_limit),         cmocka_unit_test(test_line_count_limit),
        cmocka_unit_test(test_load_matches_parse), cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
