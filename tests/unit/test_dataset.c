#include <errno.h>
#include <fcntl.h>
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
#include "base/buf.h"
#include "workload/dataset.h"

static int load(struct dataset *d, const char *name, const char *s, enum dataset_format f,
                const struct dataset_opts *o, char *err, size_t errlen)
{
    return dataset_load_mem(d, name, s, strlen(s), f, o, err, errlen);
}

static void assert_empty(const struct dataset *d)
{
    assert_int_equal(d->n, 0);
    assert_null(d->convs);
    assert_null(d->mem.head);
}

/* Checks turn i of conversation cv: its user text and answer (NULL: none). */
static void assert_turn(const struct dataset_conv *cv, size_t i, const char *user,
                        const char *answer)
{
    assert_true(i < cv->nturns);
    assert_string_equal(cv->user[i], user);
    assert_int_equal(cv->user_len[i], strlen(user));
    if (answer) {
        assert_non_null(cv->assistant[i]);
        assert_string_equal(cv->assistant[i], answer);
        assert_int_equal(cv->assistant_len[i], strlen(answer));
    } else {
        assert_null(cv->assistant[i]);
        assert_int_equal(cv->assistant_len[i], 0);
    }
    assert_int_equal(cv->output_tokens[i], 0);
}

static void check_sharegpt(const struct dataset *d)
{
    assert_int_equal(d->n, 2);
    assert_int_equal(d->skipped, 2);
    assert_int_equal(d->format, DATASET_SHAREGPT);

    const struct dataset_conv *cv = &d->convs[0];
    assert_string_equal(cv->system, "Be brief.\n\nUse English.");
    assert_int_equal(cv->system_len, 23);
    assert_int_equal(cv->nturns, 3);
    assert_turn(cv, 0, "Hi\n\nAre you there?", "Yes.");
    assert_turn(cv, 1, "What is 2+2?", "4\n\nAnything else?");
    assert_turn(cv, 2, "No", NULL);
    assert_int_equal(cv->at_ns, 0);
    assert_int_equal(cv->input_tokens, 0);
    assert_int_equal(cv->nhash, 0);

    cv = &d->convs[1];
    assert_null(cv->system);
    assert_int_equal(cv->system_len, 0);
    assert_int_equal(cv->nturns, 2);
    assert_turn(cv, 0, "Tell me a joke", "Why did the chicken\xe2\x80\xa6");
    assert_turn(cv, 1, "Another", "No.");
}

/* Record 0: a system prompt in two parts, two human turns in a row, two
 * answers in a row, an empty message, a last turn without answer. Record 1:
 * starts with an answer (dropped), a late system message (dropped), the
 * role/content spelling. Records 2 and 3 have no user turn. */
#define SHAREGPT_0                                                                                 \
    "{\"id\": \"a\", \"conversations\": ["                                                         \
    "{\"from\": \"system\", \"value\": \"Be brief.\"},"                                            \
    "{\"from\": \"system\", \"value\": \"Use English.\"},"                                         \
    "{\"from\": \"human\", \"value\": \"Hi\"},"                                                    \
    "{\"from\": \"human\", \"value\": \"Are you there?\"},"                                        \
    "{\"from\": \"gpt\", \"value\": \"Yes.\"},"                                                    \
    "{\"from\": \"human\", \"value\": \"What is 2+2?\"},"                                          \
    "{\"from\": \"gpt\", \"value\": \"4\"},"                                                       \
    "{\"from\": \"gpt\", \"value\": \"\"},"                                                        \
    "{\"from\": \"chatgpt\", \"value\": \"Anything else?\"},"                                      \
    "{\"from\": \"human\", \"value\": \"No\"}]}"
#define SHAREGPT_1                                                                                 \
    "{\"messages\": [{\"role\": \"assistant\", \"content\": \"Hello! How can I help?\"},"          \
    "{\"role\": \"User\", \"content\": \"Tell me a joke\"},"                                       \
    "{\"role\": \"system\", \"content\": \"late\"},"                                               \
    "{\"role\": \"assistant\", \"content\": \"Why did the chicken\\u2026\"},"                      \
    "{\"role\": \"user\", \"content\": null},"                                                     \
    "{\"role\": \"user\", \"content\": \"Another\"},"                                              \
    "{\"from\": \"bard\", \"content\": \"No.\"}]}"
#define SHAREGPT_2 "{\"conversations\": []}"
#define SHAREGPT_3                                                                                 \
    "{\"conversation\": [{\"from\": \"gpt\", \"value\": \"only an answer\"},"                      \
    "{\"from\": \"system\", \"value\": \"s\"}]}"

static void test_sharegpt_array(void **state)
{
    static const char text[] = "\xef\xbb\xbf[\n  " SHAREGPT_0 ",\n  " SHAREGPT_1 ",\n  " SHAREGPT_2
                               ",\r\n  " SHAREGPT_3 "\n]\n";
    struct dataset d;
    char err[256] = "x";
    assert_int_equal(load(&d, "t.json", text, DATASET_SHAREGPT, NULL, err, sizeof(err)), 0);
    assert_string_equal(err, "");
    check_sharegpt(&d);
    dataset_release(&d);
    assert_empty(&d);
    dataset_release(&d);
    assert_empty(&d);
}

static void test_sharegpt_jsonl(void **state)
{
    static const char text[] =
        "# a comment\n" SHAREGPT_0 "\r\n\n" SHAREGPT_1 "\n" SHAREGPT_2 "\n  \t\n" SHAREGPT_3;
    struct dataset d;
    assert_int_equal(load(&d, "t.jsonl", text, DATASET_SHAREGPT, NULL, NULL, 0), 0);
    check_sharegpt(&d);
    dataset_release(&d);
}

struct bad_case {
    enum dataset_format f;
    const char *text;
    size_t len; /* 0: strlen(text) */
    int rc;
    const char *msg;
};

static void run_bad(const struct bad_case *cases, size_t n, const struct dataset_opts *o)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const struct bad_case *c = &cases[i];
        const char *name = c->f == DATASET_CSV ? "t.csv" : "t.json";
        struct dataset d;
        char err[512] = "";
        size_t len = c->len ? c->len : strlen(c->text);
        int rc = dataset_load_mem(&d, name, c->text, len, c->f, o, err, sizeof(err));
        if (rc != c->rc || strcmp(err, c->msg) != 0) {
            print_error("case %zu: rc %d, want %d\n got  \"%s\"\n want \"%s\"\n", i, rc, c->rc, err,
                        c->msg);
            bad++;
        }
        assert_empty(&d);
    }
    assert_int_equal(bad, 0);
}

static void test_sharegpt_errors(void **state)
{
    static const struct bad_case cases[] = {
        /* array form: the element and its position */
        {DATASET_SHAREGPT, "[\n {\"conversations\": []},\n {\"conversations\" []}\n]", 0, TS_PARSE,
         "t.json:3:19: [1]: invalid JSON: ':' expected near '['"},
        {DATASET_SHAREGPT, "[\n {\"conversations\": []},\n  {\"id\": 3}\n]", 0, TS_PARSE,
         "t.json:3:3: [1]: needs a \"conversations\" array (or \"conversation\", \"messages\")"},
        {DATASET_SHAREGPT, "[{\"conversations\": [{\"from\": \"humann\", \"value\": \"x\"}]}]", 0,
         TS_PARSE,
         "t.json:1:2: [0]: conversations[0]: unknown role 'humann' (did you mean 'human'?) "
         "(known: human, user, gpt, assistant, chatgpt, bing, bard, model, system)"},
        {DATASET_SHAREGPT, "[{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}]}]", 0,
         TS_PARSE,
         "t.json:1:2: [0]: messages[0]: unknown role 'tool' (known: human, user, gpt, assistant, "
         "chatgpt, bing, bard, model, system)"},
        {DATASET_SHAREGPT, "[{\"conversations\": []},]", 0, TS_PARSE,
         "t.json:1:24: a ',' before ']' (expected a value)"},
        {DATASET_SHAREGPT, "[{\"conversations\": []}", 0, TS_PARSE,
         "t.json:1:23: the array is not closed (expected ',' or ']')"},
        {DATASET_SHAREGPT, "[{\"conversations\": []},", 0, TS_PARSE,
         "t.json:1:24: the array is not closed (expected a value)"},
        {DATASET_SHAREGPT, "[{\"conversations\": []} {}]", 0, TS_PARSE,
         "t.json:1:24: expected ',' or ']' after element [0]"},
        {DATASET_SHAREGPT, "[{\"conversations\": [{\"from\":\"user\",\"value\":\"a\"}]}] x", 0,
         TS_PARSE, "t.json:1:52: unexpected data after the array"},
        {DATASET_SHAREGPT, "[{\"conversations\": [{\"from\":\"user\",\"value\":\"a\"", 0, TS_PARSE,
         "t.json:1:46: [0]: invalid JSON: '}' expected near end of file"},
        {DATASET_SHAREGPT, "[\n5]", 0, TS_PARSE,
         "t.json:2:1: [0]: expected a JSON object, got a number"},
        {DATASET_SHAREGPT, "[]", 0, TS_PARSE, "t.json: no conversations (the file is empty)"},
        {DATASET_SHAREGPT, "[{\"conversations\": [], \"conversations\": []}]", 0, TS_PARSE,
         "t.json:1:38: [0]: invalid JSON: duplicate object key near '\"conversations\"'"},
        /* JSONL form: the line */
        {DATASET_SHAREGPT, "{\"conversations\": []}\n{\"conversations\": [}\n", 0, TS_PARSE,
         "t.json:2:20: invalid JSON: unexpected token near '}'"},
        {DATASET_SHAREGPT, "\n{\"id\": 1}", 0, TS_PARSE,
         "t.json:2: needs a \"conversations\" array (or \"conversation\", \"messages\")"},
        {DATASET_SHAREGPT, "{\"conversations\": {}}", 0, TS_PARSE,
         "t.json:1: \"conversations\" must be an array, got an object"},
        {DATASET_SHAREGPT, "{\"conversations\": [], \"messages\": []}", 0, TS_PARSE,
         "t.json:1: give one of \"conversations\" and \"messages\", not both"},
        {DATASET_SHAREGPT, "{\"conversations\": [\"hi\"]}", 0, TS_PARSE,
         "t.json:1: conversations[0] must be an object, got a string"},
        {DATASET_SHAREGPT, "{\"conversations\": [{\"value\": \"hi\"}]}", 0, TS_PARSE,
         "t.json:1: conversations[0] needs a \"from\" or \"role\" string"},
        {DATASET_SHAREGPT, "{\"conversations\": [{\"from\": 1, \"value\": \"hi\"}]}", 0, TS_PARSE,
         "t.json:1: conversations[0].from must be a string, got a number"},
        {DATASET_SHAREGPT, "{\"conversations\": [{\"from\": \"gpt\", \"role\": \"gpt\"}]}", 0,
         TS_PARSE, "t.json:1: conversations[0]: give \"from\" or \"role\", not both"},
        {DATASET_SHAREGPT, "{\"conversations\": [{\"from\": \"gpt\"}]}", 0, TS_PARSE,
         "t.json:1: conversations[0] needs a \"value\" or \"content\" string"},
        {DATASET_SHAREGPT,
         "{\"conversations\": [{\"from\": \"gpt\", \"value\": \"a\", \"content\": \"b\"}]}", 0,
         TS_PARSE, "t.json:1: conversations[0]: give \"value\" or \"content\", not both"},
        {DATASET_SHAREGPT, "{\"conversations\": [{\"from\": \"gpt\", \"value\": [\"a\"]}]}", 0,
         TS_PARSE, "t.json:1: conversations[0].value must be a string or null, got an array"},
        {DATASET_SHAREGPT, "[1,2]", 0, TS_PARSE,
         "t.json:1:2: [0]: expected a JSON object, got a number"},
        {DATASET_SHAREGPT, "{\"conversations\": [{\"from\": \"gpt\", \"value\": \"x\"}]}\n", 0,
         TS_PARSE, "t.json: no conversations (1 record without a user turn skipped)"},
        {DATASET_SHAREGPT, "# nothing\n\n", 0, TS_PARSE,
         "t.json: no conversations (the file is empty)"},
        {DATASET_SHAREGPT, "", 0, TS_PARSE, "t.json: no conversations (the file is empty)"},
        /* text is checked before parsing: invalid UTF-8 and NUL bytes */
        {DATASET_SHAREGPT, "{\"conversations\": []}\n{\"conversations\": [\"\xc3\x28\"]}", 0,
         TS_PARSE, "t.json:2:21: invalid UTF-8"},
        {DATASET_SHAREGPT, "[{\"conversations\":\n []},\n \"\xed\xa0\x80\"]", 0, TS_PARSE,
         "t.json:3:3: invalid UTF-8"},
        {DATASET_SHAREGPT, "{\"a\":\0}", 7, TS_PARSE, "t.json:1:6: NUL byte"},
    };
    run_bad(cases, sizeof(cases) / sizeof(cases[0]), NULL);
}

static const char record_head[] = "{\"conversations\": [{\"from\":\"human\",\"value\":\"";
static const char record_tail[] = "\"}]}";

/* Writes a ShareGPT record of exactly n bytes at p. */
static void make_record(char *p, size_t n)
{
    size_t h = sizeof(record_head) - 1, t = sizeof(record_tail) - 1;
    memcpy(p, record_head, h);
    memset(p + h, 'x', n - h - t);
    memcpy(p + n - t, record_tail, t);
}

/* Turn and record limits. */
static void test_sharegpt_limits(void **state)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    assert_int_equal(buf_append_str(&b, "{\"conversations\": ["), 0);
    for (unsigned i = 0; i < DATASET_MAX_TURNS; i++)
        assert_int_equal(buf_appendf(&b,
                                     "%s{\"from\":\"human\",\"value\":\"q%u\"},"
                                     "{\"from\":\"gpt\",\"value\":\"a\"}",
                                     i ? "," : "", i),
                         0);
    size_t at = b.len;
    assert_int_equal(buf_append_str(&b, "]}"), 0);
    struct dataset d;
    char err[256];
    assert_int_equal(
        dataset_load_mem(&d, "t", b.data, b.len, DATASET_SHAREGPT, NULL, err, sizeof(err)), 0);
    assert_int_equal(d.convs[0].nturns, DATASET_MAX_TURNS);
    assert_string_equal(d.convs[0].user[4095], "q4095");
    dataset_release(&d);

    buf_truncate(&b, at);
    assert_int_equal(buf_append_str(&b, ",{\"from\":\"human\",\"value\":\"one more\"}]}"), 0);
    assert_int_equal(
        dataset_load_mem(&d, "t", b.data, b.len, DATASET_SHAREGPT, NULL, err, sizeof(err)),
        TS_TOOBIG);
    assert_string_equal(err, "t:1: more than 4096 turns");
    assert_empty(&d);
    buf_release(&b);

    /* a line or an element of DATASET_MAX_RECORD bytes is read, one more is refused */
    char *big = malloc(DATASET_MAX_RECORD + 3);
    assert_non_null(big);
    make_record(big, DATASET_MAX_RECORD + 1);
    big[DATASET_MAX_RECORD + 1] = '\n';
    assert_int_equal(dataset_load_mem(&d, "t", big, DATASET_MAX_RECORD + 2, DATASET_SHAREGPT, NULL,
                                      err, sizeof(err)),
                     TS_TOOBIG);
    assert_string_equal(err, "t:1: line longer than 16777216 bytes");
    make_record(big, DATASET_MAX_RECORD);
    assert_int_equal(dataset_load_mem(&d, "t", big, DATASET_MAX_RECORD, DATASET_SHAREGPT, NULL, err,
                                      sizeof(err)),
                     0);
    assert_int_equal(d.convs[0].user_len[0],
                     DATASET_MAX_RECORD - (sizeof(record_head) - 1) - (sizeof(record_tail) - 1));
    dataset_release(&d);

    big[0] = '[';
    make_record(big + 1, DATASET_MAX_RECORD + 1);
    big[DATASET_MAX_RECORD + 2] = ']';
    assert_int_equal(dataset_load_mem(&d, "t", big, DATASET_MAX_RECORD + 3, DATASET_SHAREGPT, NULL,
                                      err, sizeof(err)),
                     TS_TOOBIG);
    assert_string_equal(err, "t:1:2: [0]: element longer than 16777216 bytes");
    make_record(big + 1, DATASET_MAX_RECORD);
    big[DATASET_MAX_RECORD + 1] = ']';
    assert_int_equal(dataset_load_mem(&d, "t", big, DATASET_MAX_RECORD + 2, DATASET_SHAREGPT, NULL,
                                      err, sizeof(err)),
                     0);
    assert_int_equal(d.n, 1);
    dataset_release(&d);
    free(big);
}

static void test_csv(void **state)
{
    static const char text[] = "\xef\xbb\xbfid,prompt,max_tokens\r\n"
                               "1,\"Hello, world\",10\r\n"
                               "2,\"She said \"\"hi\"\"\",\r\n"
                               "3,\"line one\r\nline two\n\",7\r\n"
                               "\r\n"
                               "4,,5\r\n"
                               "5,say \"so\" \xc3\xa9,3\n"
                               "6,\"\",\n"
                               "7,plain text\r,16777216";
    struct dataset d;
    char err[256] = "x";
    assert_int_equal(load(&d, "t.csv", text, DATASET_CSV, NULL, err, sizeof(err)), 0);
    assert_string_equal(err, "");
    assert_int_equal(d.format, DATASET_CSV);
    assert_int_equal(d.n, 5);
    assert_int_equal(d.skipped, 2);
    static const char *const want[] = {"Hello, world", "She said \"hi\"", "line one\r\nline two\n",
                                       "say \"so\" \xc3\xa9", "plain text\r"};
    static const uint32_t tokens[] = {10, 0, 7, 3, 16777216};
    for (size_t i = 0; i < 5; i++) {
        const struct dataset_conv *cv = &d.convs[i];
        assert_int_equal(cv->nturns, 1);
        assert_null(cv->system);
        assert_string_equal(cv->user[0], want[i]);
        assert_int_equal(cv->user_len[0], strlen(want[i]));
        assert_null(cv->assistant[0]);
        assert_int_equal(cv->output_tokens[0], tokens[i]);
    }
    dataset_release(&d);

    /* other column names; the output column need not be "max_tokens"; a
     * trailing CR at the end of the file ends the record */
    static const char text2[] = "text,max_tokens,n\n\"a,b\",x,4\nc,y,\r";
    struct dataset_opts o = {.column = "text", .output_column = "n"};
    assert_int_equal(load(&d, "t.csv", text2, DATASET_CSV, &o, err, sizeof(err)), 0);
    assert_int_equal(d.n, 2);
    assert_string_equal(d.convs[0].user[0], "a,b");
    assert_int_equal(d.convs[0].output_tokens[0], 4);
    assert_string_equal(d.convs[1].user[0], "c");
    assert_int_equal(d.convs[1].output_tokens[0], 0);
    dataset_release(&d);

    /* one column, leading blank lines, no output column */
    assert_int_equal(
        load(&d, "t.csv", "\n\nprompt\nx\n\"\"\"\"\n", DATASET_CSV, NULL, err, sizeof(err)), 0);
    assert_int_equal(d.n, 2);
    assert_string_equal(d.convs[1].user[0], "\"");
    assert_int_equal(d.convs[1].output_tokens[0], 0);
    dataset_release(&d);
}

static void test_csv_errors(void **state)
{
    static const struct bad_case cases[] = {
        {DATASET_CSV, "id,promt,max_tokens\n1,a,2\n", 0, TS_PARSE,
         "t.csv:1: no column 'prompt' (did you mean 'promt'?); the header has: id, promt, "
         "max_tokens"},
        {DATASET_CSV, "id,text\n1,a\n", 0, TS_PARSE,
         "t.csv:1: no column 'prompt'; the header has: id, text"},
        {DATASET_CSV, "\n\"id\",\"pro\"\"mpt\"\n", 0, TS_PARSE,
         "t.csv:2: no column 'prompt' (did you mean 'pro\"mpt'?); the header has: id, pro\"mpt"},
        {DATASET_CSV, "prompt,x,prompt\n", 0, TS_PARSE,
         "t.csv:1: column 'prompt' appears 2 times in the header"},
        {DATASET_CSV, "prompt,max_tokens\nhi,abc\n", 0, TS_PARSE,
         "t.csv:2: column 'max_tokens' must be an integer from 1 to 16777216, got 'abc'"},
        {DATASET_CSV, "prompt,max_tokens\nhi,1\nho,0\n", 0, TS_PARSE,
         "t.csv:3: column 'max_tokens' must be an integer from 1 to 16777216, got '0'"},
        {DATASET_CSV, "prompt,max_tokens\nhi,16777217\n", 0, TS_PARSE,
         "t.csv:2: column 'max_tokens' must be an integer from 1 to 16777216, got '16777217'"},
        {DATASET_CSV, "prompt,max_tokens\nhi, 5\n", 0, TS_PARSE,
         "t.csv:2: column 'max_tokens' must be an integer from 1 to 16777216, got ' 5'"},
        {DATASET_CSV, "prompt,max_tokens\nhi,-5\n", 0, TS_PARSE,
         "t.csv:2: column 'max_tokens' must be an integer from 1 to 16777216, got '-5'"},
        {DATASET_CSV, "prompt,max_tokens\n\"a\nb\",1\nc\n", 0, TS_PARSE,
         "t.csv:4: 1 field, the header has 2"},
        {DATASET_CSV, "prompt,max_tokens\na,1,\n", 0, TS_PARSE,
         "t.csv:2: 3 fields, the header has 2"},
        {DATASET_CSV, "prompt,n\na,1\n\"b\n,2\n", 0, TS_PARSE,
         "t.csv:3:1: a quoted field is not closed"},
        {DATASET_CSV, "prompt,n\n\"a\nb\"x,2\n", 0, TS_PARSE,
         "t.csv:3:3: unexpected character after a closing quote (expected ',' or the end of "
         "the line)"},
        {DATASET_CSV, "prompt,n\n\"a\" ,2\n", 0, TS_PARSE,
         "t.csv:2:4: unexpected character after a closing quote (expected ',' or the end of "
         "the line)"},
        {DATASET_CSV, "prompt\n\"a\"\rb\n", 0, TS_PARSE,
         "t.csv:2:4: unexpected character after a closing quote (expected ',' or the end of "
         "the line)"},
        {DATASET_CSV, "", 0, TS_PARSE, "t.csv: no conversations (the file is empty)"},
        {DATASET_CSV, "\r\n\n", 0, TS_PARSE, "t.csv: no header row (the file is empty)"},
        {DATASET_CSV, "prompt\n", 0, TS_PARSE, "t.csv: no conversations (the file is empty)"},
        {DATASET_CSV, "prompt\n\"\"\n", 0, TS_PARSE,
         "t.csv: no conversations (1 record without a user turn skipped)"},
        {DATASET_CSV, "prompt\nab\xff\n", 0, TS_PARSE, "t.csv:2:3: invalid UTF-8"},
        {DATASET_CSV, "prompt\n\"a\n\xc0\x80\"\n", 0, TS_PARSE, "t.csv:3:1: invalid UTF-8"},
    };
    run_bad(cases, sizeof(cases) / sizeof(cases[0]), NULL);

    struct dataset d;
    char err[256];
    struct dataset_opts o = {.output_column = "max_token"};
    assert_int_equal(
        load(&d, "t.csv", "prompt,max_tokens\na,1\n", DATASET_CSV, &o, err, sizeof(err)), TS_PARSE);
    assert_string_equal(err, "t.csv:1: no column 'max_token' (did you mean 'max_tokens'?); the "
                             "header has: prompt, max_tokens");
    assert_empty(&d);
    o = (struct dataset_opts){.column = "question"};
    assert_int_equal(load(&d, "t.csv", "id,Question\n", DATASET_CSV, &o, err, sizeof(err)),
                     TS_PARSE);
    assert_string_equal(err, "t.csv:1: no column 'question' (did you mean 'Question'?); the "
                             "header has: id, Question");
}

/* Lines are counted through quoted newlines. */
static void test_csv_lines(void **state)
{
    struct dataset d;
    char err[256];
    assert_int_equal(load(&d, "t.csv", "prompt,n\n\"a\r\nb\r\nc\",1\r\n\"d\",2\r\ne,f\r\n",
                          DATASET_CSV, NULL, err, sizeof(err)),
                     0);
    dataset_release(&d);
    struct dataset_opts o = {.output_column = "n"};
    assert_int_equal(load(&d, "t.csv", "prompt,n\n\"a\r\nb\r\nc\",1\r\n\"d\",2\r\ne,f\r\n",
                          DATASET_CSV, &o, err, sizeof(err)),
                     TS_PARSE);
    assert_string_equal(err, "t.csv:6: column 'n' must be an integer from 1 to 16777216, got 'f'");
}

static void test_trace(void **state)
{
    static const char text[] =
        "{\"timestamp\": 300, \"prompt\": \"third\", \"output_length\": 5}\n"
        "{\"timestamp\": 100, \"input_length\": 50, \"hash_ids\": [1, 2, 9007199254740993]}\r\n"
        "# a comment\n"
        "\n"
        "{\"timestamp\": 300, \"prompt\": \"fourth\", \"extra\": {\"x\": 1}}\n"
        "{\"timestamp\": 200.5, \"input_length\": 7, \"output_length\": 9}\n";
    struct dataset d;
    char err[256] = "x";
    assert_int_equal(load(&d, "t.jsonl", text, DATASET_TRACE, NULL, err, sizeof(err)), 0);
    assert_string_equal(err, "");
    assert_int_equal(d.format, DATASET_TRACE);
    assert_int_equal(d.n, 4);
    static const uint64_t at[] = {0, 100500000, 200000000, 200000000};
    static const char *const user[] = {"", "", "third", "fourth"};
    static const uint32_t in[] = {50, 7, 0, 0}, out[] = {0, 9, 5, 0};
    for (size_t i = 0; i < 4; i++) {
        const struct dataset_conv *cv = &d.convs[i];
        assert_int_equal(cv->nturns, 1);
        assert_int_equal(cv->at_ns, at[i]);
        assert_string_equal(cv->user[0], user[i]);
        assert_int_equal(cv->user_len[0], strlen(user[i]));
        assert_int_equal(cv->input_tokens, in[i]);
        assert_int_equal(cv->output_tokens[0], out[i]);
        assert_null(cv->assistant[0]);
        assert_null(cv->system);
    }
    assert_int_equal(d.convs[0].nhash, 3);
    assert_int_equal(d.convs[0].hash_ids[0], 1);
    assert_int_equal(d.convs[0].hash_ids[1], 2);
    assert_true(d.convs[0].hash_ids[2] == 9007199254740993ull);
    for (size_t i = 1; i < 4; i++) {
        assert_int_equal(d.convs[i].nhash, 0);
        assert_null(d.convs[i].hash_ids);
    }
    dataset_release(&d);

    /* time_scale 0.5 replays twice as fast, 3 three times as slow */
    struct dataset_opts o = {.time_scale = 0.5};
    assert_int_equal(load(&d, "t.jsonl", text, DATASET_TRACE, &o, err, sizeof(err)), 0);
    assert_int_equal(d.convs[1].at_ns, 50250000);
    assert_int_equal(d.convs[3].at_ns, 100000000);
    dataset_release(&d);
    o.time_scale = 3;
    assert_int_equal(load(&d, "t.jsonl", text, DATASET_TRACE, &o, err, sizeof(err)), 0);
    assert_int_equal(d.convs[1].at_ns, 301500000);
    assert_string_equal(d.convs[2].user[0], "third");
    assert_int_equal(d.convs[3].at_ns, 600000000);
    dataset_release(&d);

    /* the offsets start at the smallest timestamp, not at 0; many equal
     * timestamps keep the file order */
    struct buf b;
    buf_init(&b, 1 << 20);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(buf_appendf(&b, "{\"timestamp\": %d, \"input_length\": %d}\n",
                                     1000000 + (i % 3) * 10, i + 1),
                         0);
    assert_int_equal(
        dataset_load_mem(&d, "t", b.data, b.len, DATASET_TRACE, NULL, err, sizeof(err)), 0);
    assert_int_equal(d.n, 1000);
    for (size_t i = 0; i < 1000; i++) {
        size_t group = i < 334 ? 0 : i < 667 ? 1 : 2;
        size_t k = i - (group == 0 ? 0 : group == 1 ? 334 : 667);
        assert_int_equal(d.convs[i].at_ns, group * 10 * 1000000);
        assert_int_equal(d.convs[i].input_tokens, 3 * k + group + 1);
    }
    dataset_release(&d);
    buf_release(&b);
}

static void test_trace_errors(void **state)
{
    static const struct bad_case cases[] = {
        {DATASET_TRACE, "{\"prompt\": \"a\"}", 0, TS_PARSE,
         "t.json:1: needs a \"timestamp\" (milliseconds)"},
        {DATASET_TRACE,
         "{\"timestamp\": 1, \"prompt\": \"a\"}\n{\"timestamp\": -1, \"prompt\": \"a\"}", 0,
         TS_PARSE,
         "t.json:2: \"timestamp\" must be a number of milliseconds from 0 to 1000000000000"},
        {DATASET_TRACE, "{\"timestamp\": \"5\", \"prompt\": \"a\"}", 0, TS_PARSE,
         "t.json:1: \"timestamp\" must be a number of milliseconds from 0 to 1000000000000"},
        {DATASET_TRACE, "{\"timestamp\": 1e13, \"prompt\": \"a\"}", 0, TS_PARSE,
         "t.json:1: \"timestamp\" must be a number of milliseconds from 0 to 1000000000000"},
        {DATASET_TRACE, "{\"timestamp\": 1, \"prompt\": \"a\", \"input_length\": 3}", 0, TS_PARSE,
         "t.json:1: give \"prompt\" or \"input_length\", not both"},
        {DATASET_TRACE, "{\"timestamp\": 1, \"output_length\": 3}", 0, TS_PARSE,
         "t.json:1: needs \"prompt\" (a string) or \"input_length\" (tokens)"},
        {DATASET_TRACE, "{\"timestamp\": 1, \"prompt\": 3}", 0, TS_PARSE,
         "t.json:1: \"prompt\" must be a string, got a number"},
        {DATASET_TRACE, "{\"timestamp\": 1, \"prompt\": \"\"}", 0, TS_PARSE,
         "t.json:1: \"prompt\" is empty"},
        {DATASET_TRACE, "{\"timestamp\": 1, \"input_length\": 1.5}", 0, TS_PARSE,
         "t.json:1: \"input_length\" must be an integer from 1 to 16777216"},
        {DATASET_TRACE, "{\"timestamp\": 1, \"input_length\": 0}", 0, TS_PARSE,
         "t.json:1: \"input_length\" must be an integer from 1 to 16777216"},
        {DATASET_TRACE, "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 16777217}", 0,
         TS_PARSE, "t.json:1: \"output_length\" must be an integer from 1 to 16777216"},
        {DATASET_TRACE, "{\"timestamp\": 1, \"input_length\": 5, \"hash_ids\": 4}", 0, TS_PARSE,
         "t.json:1: \"hash_ids\" must be an array, got a number"},
        {DATASET_TRACE, "{\"timestamp\": 1, \"input_length\": 5, \"hash_ids\": [0, -1]}", 0,
         TS_PARSE, "t.json:1: \"hash_ids\"[1] must be an integer >= 0"},
        {DATASET_TRACE, "{\"timestamp\": 1, \"input_length\": 5, \"hash_ids\": [0, 1.0]}", 0,
         TS_PARSE, "t.json:1: \"hash_ids\"[1] must be an integer >= 0"},
        {DATASET_TRACE, "[{\"timestamp\": 1, \"input_length\": 5}]", 0, TS_PARSE,
         "t.json:1: expected a JSON object, got an array"},
        {DATASET_TRACE, "{\"timestamp\": 1, \"timestamp\": 2}", 0, TS_PARSE,
         "t.json:1:28: invalid JSON: duplicate object key near '\"timestamp\"'"},
        {DATASET_TRACE, "# only comments\n", 0, TS_PARSE,
         "t.json: no conversations (the file is empty)"},
    };
    run_bad(cases, sizeof(cases) / sizeof(cases[0]), NULL);

    struct dataset d;
    char err[256];
    struct dataset_opts o = {.time_scale = -1};
    const char *one = "{\"timestamp\": 1, \"input_length\": 5}";
    assert_int_equal(load(&d, "t", one, DATASET_TRACE, &o, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "t: time_scale must be a finite number >= 0, got -1");
    assert_empty(&d);
    o.time_scale = 1e10;
    const char *two = "{\"timestamp\": 0, \"input_length\": 5}\n"
                      "{\"timestamp\": 1000000000000, \"input_length\": 5}";
    assert_int_equal(load(&d, "t", two, DATASET_TRACE, &o, err, sizeof(err)), TS_TOOBIG);
    assert_string_equal(err, "t: the trace lasts more than 9.2e18 ns after time_scale 1e+10");
    assert_empty(&d);
    o.time_scale = 1;
    assert_int_equal(load(&d, "t", two, DATASET_TRACE, &o, err, sizeof(err)), 0);
    assert_true(d.convs[1].at_ns == 1000000000000000000ull);
    dataset_release(&d);
}

static void test_format_parse(void **state)
{
    enum dataset_format f = DATASET_CSV;
    assert_int_equal(dataset_format_parse("sharegpt", &f), 0);
    assert_int_equal(f, DATASET_SHAREGPT);
    assert_int_equal(dataset_format_parse("trace", &f), 0);
    assert_int_equal(f, DATASET_TRACE);
    assert_int_equal(dataset_format_parse("csv", &f), 0);
    assert_int_equal(f, DATASET_CSV);
    assert_int_equal(dataset_format_parse("CSV", &f), -EINVAL);
    assert_int_equal(dataset_format_parse("", &f), -EINVAL);
    assert_int_equal(dataset_format_parse(NULL, &f), -EINVAL);
    assert_int_equal(f, DATASET_CSV);
    assert_string_equal(dataset_format_name(DATASET_TRACE), "trace");
    assert_string_equal(dataset_format_name(DATASET_SHAREGPT), "sharegpt");

    struct dataset d;
    char err[128];
    assert_int_equal(load(&d, "t", "prompt\na\n", (enum dataset_format)7, NULL, err, sizeof(err)),
                     -EINVAL);
    assert_string_equal(err, "t: unknown dataset format 7");
}

static void test_file(void **state)
{
    char path[] = "/tmp/test_dataset_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static const char text[] = "prompt,max_tokens\n\"a\nb\",3\n";
    assert_int_equal(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
    close(fd);
    struct dataset d;
    char err[256] = "x";
    assert_int_equal(dataset_load(&d, path, DATASET_CSV, NULL, err, sizeof(err)), 0);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.convs[0].user[0], "a\nb");
    dataset_release(&d);
    /* messages name the file */
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "text\n", 5), 5);
    close(fd);
    char want[256];
    snprintf(want, sizeof(want), "%s:1: no column 'prompt'; the header has: text", path);
    assert_int_equal(dataset_load(&d, path, DATASET_CSV, NULL, err, sizeof(err)), TS_PARSE);
    assert_string_equal(err, want);
    assert_empty(&d);
    unlink(path);
    assert_int_equal(dataset_load(&d, path, DATASET_CSV, NULL, err, sizeof(err)), -ENOENT);
    snprintf(want, sizeof(want), "%s: No such file or directory", path);
    assert_string_equal(err, want);
    assert_empty(&d);
    assert_int_equal(dataset_load(&d, path, DATASET_CSV, NULL, NULL, 0), -ENOENT);
}

/* Every allocation failure is -ENOMEM with nothing left behind. */
static void test_alloc_failures(void **state)
{
    static const char *const texts[] = {
        "[" SHAREGPT_0 "," SHAREGPT_1 "]",
        "id,prompt,max_tokens\n1,\"a,b\",3\n2,c,\n",
        ("{\"timestamp\": 3, \"prompt\": \"x\", \"hash_ids\": [1]}\n{\"timestamp\": 1, "
         "\"input_length\": 3}\n"),
    };
    static const enum dataset_format fmt[] = {DATASET_SHAREGPT, DATASET_CSV, DATASET_TRACE};
    for (size_t t = 0; t < 3; t++) {
        int rc = -ENOMEM;
        long n;
        for (n = 0; n < 1000 && rc == -ENOMEM; n++) {
            struct dataset d;
            char err[256];
            ts_alloc_fail_after(n);
            rc = load(&d, "t", texts[t], fmt[t], NULL, err, sizeof(err));
            ts_alloc_fail_after(-1);
            if (rc == -ENOMEM) {
                assert_string_equal(err + strlen(err) - 13, "out of memory");
                assert_empty(&d);
            } else {
                assert_int_equal(rc, 0);
                assert_int_equal(d.n, 2);
                dataset_release(&d);
            }
        }
        assert_int_equal(rc, 0);
        assert_true(n > 3);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sharegpt_array),
        cmocka_unit_test(test_sharegpt_jsonl),
        cmocka_unit_test(test_sharegpt_errors),
        cmocka_unit_test(test_sharegpt_limits),
        cmocka_unit_test(test_csv),
        cmocka_unit_test(test_csv_errors),
        cmocka_unit_test(test_csv_lines),
        cmocka_unit_test(test_trace),
        cmocka_unit_test(test_trace_errors),
        cmocka_unit_test(test_format_parse),
        cmocka_unit_test(test_file),
        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests_name("dataset", tests, NULL, NULL);
}
