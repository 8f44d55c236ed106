/*
 * test_outdir.c - claiming a result directory (report/outdir.h): created,
 * locked against a second holder, refused when it holds results, cleared by
 * OUTDIR_FORCE of tokenstorm's files only; and a killed run's directory
 * rebuilt by report/recover.h (hlog only; lines with a cut last one).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <jansson.h>

#include "base/hdr.h"
#include "base/hlog.h"
#include "report/outdir.h"
#include "report/recover.h"
#include "report/runfiles.h"

static char root[256];

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof(root), "/tmp/ts-test-outdir-XXXXXX");
    return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static void put(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static bool exists(const char *rel)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    return stat(path, &st) == 0;
}

static void sub(char *out, size_t n, const char *rel)
{
    snprintf(out, n, "%s/%s", root, rel);
}

static void test_claim_creates_and_locks(void **state)
{
    (void)state;
    char dir[512], err[512];
    struct outdir a, b;
    sub(dir, sizeof(dir), "x/y/z");
    assert_int_equal(outdir_claim(&a, dir, 0, err, sizeof(err)), 0);
    assert_true(exists("x/y/z/" OUTDIR_LOCK_NAME));
    long pid = 0;
    assert_int_equal(outdir_busy(dir, &pid), 1); /* as any other process sees it */
    assert_int_equal(pid, (long)getpid());
    /* a second holder (another open file description, as another process has) is refused */
    assert_int_equal(outdir_claim(&b, dir, OUTDIR_FORCE, err, sizeof(err)), -EBUSY);
    assert_non_null(strstr(err, "in use by another tokenstorm process"));
    assert_int_equal(b.lock_fd, -1);
    outdir_release(&a);
    assert_int_equal(outdir_claim(&b, dir, 0, err, sizeof(err)), 0);
    outdir_release(&b);
    outdir_release(&b); /* twice is a no-op */
}

static void test_refuses_results_and_force_clears_only_ours(void **state)
{
    (void)state;
    char dir[512], err[512];
    struct outdir od;
    sub(dir, sizeof(dir), "");
    put("result.json", "{}");
    put("latency.hlog", "x");
    put("notes.txt", "mine");
    put("summary.txt", "mine too: only a step's summary.txt is ours");
    sub(err, sizeof(err), "step-01-r1");
    assert_int_equal(mkdir(err, 0755), 0);
    put("step-01-r1/result.json", "{}");
    put("step-01-r1/summary.txt", "s");
    put("step-01-r1/" OUTDIR_LOCK_NAME, "1\n");
    sub(err, sizeof(err), "step-02-r2");
    assert_int_equal(mkdir(err, 0755), 0);
    put("step-02-r2/result.json", "{}");
    put("step-02-r2/plot.png", "user");
    sub(err, sizeof(err), "data");
    assert_int_equal(mkdir(err, 0755), 0);
    put("data/result.json", "a user's folder: not ours");

    assert_int_equal(outdir_claim(&od, dir, 0, err, sizeof(err)), -EEXIST);
    assert_non_null(strstr(err, "already holds results"));
    assert_non_null(strstr(err, "result.json"));
    assert_true(exists("result.json") && exists("step-01-r1/result.json"));

    assert_int_equal(outdir_claim(&od, dir, OUTDIR_FORCE, err, sizeof(err)), 0);
    assert_false(exists("result.json"));
    assert_false(exists("latency.hlog"));
    assert_false(exists("step-01-r1"));
    assert_false(exists("step-02-r2/result.json"));
    assert_true(exists("step-02-r2/plot.png")); /* kept, and so its folder */
    assert_true(exists("notes.txt"));
    assert_true(exists("summary.txt"));
    assert_true(exists("data/result.json"));
    assert_non_null(strstr(od.note, "result.json"));
    assert_non_null(strstr(od.note, "step-01-r1/"));
    /* result.json, latency.hlog; step-01: 3 files and the folder; step-02/result.json */
    assert_int_equal(od.removed, 7);
    outdir_release(&od);
}

static void test_not_a_directory(void **state)
{
    (void)state;
    char path[512], err[512];
    struct outdir od;
    put("file", "x");
    sub(path, sizeof(path), "file");
    assert_int_equal(outdir_claim(&od, path, 0, err, sizeof(err)), -ENOTDIR);
    sub(path, sizeof(path), "file/below");
    assert_int_equal(outdir_claim(&od, path, 0, err, sizeof(err)), -ENOTDIR);
    assert_non_null(strstr(err, "cannot create"));
}

/* An hlog with one e2el and one itl interval, as a killed run leaves it. */
static void write_hlog(void)
{
    char path[512];
    struct hdr *h;
    struct hlog_writer w;
    sub(path, sizeof(path), "latency.hlog");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(hdr_new_latency(&h), 0);
    hlog_writer_init(&w, f, HLOG_RATIO_US_TO_MS);
    assert_int_equal(hlog_write_header(&w, "t", 1700000000.0, 1700000000.02), 0);
    for (int i = 0; i < 7; i++)
        hdr_record(h, 100000 + i);
    assert_int_equal(hlog_write_interval(&w, "e2el", 0, 1, h), 0);
    assert_int_equal(hlog_write_interval(&w, "itl", 1, 1, h), 0);
    fputs("Tag=ttft,2.000,1.0,0.1,HISTFAAA", f); /* cut by the kill */
    hdr_free(h);
    fclose(f);
}

static void test_recover_hlog_only(void **state)
{
    (void)state;
    char dir[512], err[512];
    json_t *doc = NULL;
    sub(dir, sizeof(dir), "");
    write_hlog();
    assert_true(recover_possible(dir));
    assert_int_equal(recover_result(dir, &doc, err, sizeof(err)), 0);
    const json_t *rec = json_object_get(doc, "recovered");
    assert_non_null(rec);
    assert_int_equal(json_array_size(json_object_get(rec, "from")), 1);
    assert_int_equal(json_integer_value(json_object_get(rec, "hlog_intervals")), 2);
    const json_t *sum = json_object_get(doc, "summary");
    assert_int_equal(json_integer_value(json_object_get(sum, "completed")), 7);
    assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "run"), "end_mode")),
                        "cut");
    json_decref(doc);
}

static void test_recover_lines_and_busy(void **state)
{
    (void)state;
    char dir[512], err[512];
    json_t *doc = NULL;
    sub(dir, sizeof(dir), "");
    write_hlog();
    put("requests.jsonl",
        "{\"id\":0,\"outcome\":\"ok\",\"http_status\":200,\"stream\":true,\"warmup\":false,"
        "\"intended_ms\":0.0,\"start_ms\":0.1,\"first_chunk_ms\":20.0,\"last_chunk_ms\":120.0,"
        "\"end_ms\":121.0,\"output_tokens\":11,\"prompt_tokens\":5,\"usage_prompt_tokens\":5,"
        "\"token_source\":\"usage\"}\n"
        "{\"id\":1,\"outcome\":\"http_5xx\",\"http_status\":503,\"intended_ms\":500.0,"
        "\"start_ms\":500.1,\"end_ms\":501.0}\n"
        "{\"id\":2,\"outcome\":\"ok\",\"http_st");
    /* while a process holds the directory's lock, the run is still going on */
    char lock[600];
    snprintf(lock, sizeof(lock), "%s/%s", dir, OUTDIR_LOCK_NAME);
    int fd = open(lock, O_RDWR | O_CREAT, 0644);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX), 0);
    assert_int_equal(recover_result(dir, &doc, err, sizeof(err)), -EBUSY);
    assert_non_null(strstr(err, "still going on"));
    close(fd);

    assert_int_equal(recover_result(dir, &doc, err, sizeof(err)), 0);
    const json_t *rec = json_object_get(doc, "recovered");
    assert_int_equal(json_integer_value(json_object_get(rec, "request_lines")), 2);
    assert_int_equal(json_integer_value(json_object_get(rec, "skipped_lines")), 1);
    const json_t *sum = json_object_get(doc, "summary");
    assert_int_equal(json_integer_value(json_object_get(sum, "requests")), 2);
    assert_int_equal(json_integer_value(json_object_get(sum, "completed")), 1);
    assert_int_equal(json_integer_value(json_object_get(sum, "failed")), 1);
    assert_int_equal(json_integer_value(json_object_get(sum, "total_output_tokens")), 11);
    json_decref(doc);
}

/*
 * Every line counts once, used or skipped: a NUL byte inside a line must not
 * join it to the next one (found by fuzz_recover), and the rest of an
 * over-long line is not a line of its own.
 */
static void test_recover_lines_counted_once(void **state)
{
    (void)state;
    static const char ok[] = "{\"id\":0,\"outcome\":\"ok\",\"http_status\":200,\"end_ms\":1}\n";
    size_t big = RUNFILES_LINE_MAX + 100;
    size_t cap = 3 * sizeof(ok) + big + 16, n = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    memcpy(text + n, ok, sizeof(ok) - 1), n += sizeof(ok) - 1;
    memcpy(text + n, "{\"a\":\"x\0y\"}\n", 12), n += 12; /* a NUL: skipped, alone */
    memcpy(text + n, ok, sizeof(ok) - 1), n += sizeof(ok) - 1;
    memset(text + n, ' ', big); /* over the cap, then a record on the same line */
    memcpy(text + n + big - (sizeof(ok) - 1), ok, sizeof(ok) - 1), n += big;
    memcpy(text + n, ok, sizeof(ok) - 1), n += sizeof(ok) - 1;
    FILE *f = fmemopen(text, n, "r");
    assert_non_null(f);
    char err[512] = "";
    json_t *doc = NULL;
    assert_int_equal(recover_result_files(NULL, f, "mem", &doc, err, sizeof(err)), 0);
    const json_t *rec = json_object_get(doc, "recovered");
    assert_int_equal(json_integer_value(json_object_get(rec, "request_lines")), 3);
    assert_int_equal(json_integer_value(json_object_get(rec, "skipped_lines")), 2);
    json_decref(doc);
    fclose(f);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_claim_creates_and_locks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_results_and_force_clears_only_ours, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_not_a_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recover_hlog_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recover_lines_and_busy, setup, teardown),
        cmocka_unit_test(test_recover_lines_counted_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
