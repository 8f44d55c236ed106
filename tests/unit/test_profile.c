#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "sim/profile.h"

static void test_every_preset_validates(void **state)
{
    const char *const *names = sim_profile_names();
    int n = 0;
    for (; names[n]; n++) {
        struct sim_profile p;
        char err[256] = "";
        assert_int_equal(sim_profile_preset(names[n], &p), 0);
        assert_string_equal(p.name, names[n]);
        assert_int_equal(sim_profile_validate(&p, err, sizeof(err)), 0);
        assert_string_equal(err, "");
        struct sim_profile_caps caps;
        assert_int_equal(sim_profile_derive(&p, &caps), 0);
        assert_true(caps.kv_blocks > 0);
        assert_true(caps.kv_tokens >= p.max_model_len);
    }
    assert_int_equal(n, 6);
    struct sim_profile p;
    assert_int_equal(sim_profile_preset("nope", &p), -ENOENT);
    assert_int_equal(sim_profile_preset(NULL, &p), -ENOENT);
}

/* The derived numbers of the presets, computed by hand from the documented inputs. */
static void test_derive_numbers(void **state)
{
    struct sim_profile p;
    struct sim_profile_caps c;

    assert_int_equal(sim_profile_preset("llama3-8b-a100", &p), 0);
    assert_int_equal(sim_profile_derive(&p, &c), 0);
    /* 131072 B / 2039e9 B/s = 6.4282e-8 s = 6.4282e-5 ms */
    assert_float_equal(c.k_kv_ms_per_token, 131072.0 / 2039e9 * 1e3, 1e-15);
    assert_float_equal(c.k_kv_ms_per_token, 6.428e-5, 1e-8);
    /* (85.9 * 0.9 - 16.06 - 3.0) GB = 58.25 GB -> 444412 tokens -> 27775 blocks. */
    assert_int_equal(c.kv_blocks, 27775);
    assert_int_equal(c.kv_tokens, 27775 * 16);
    assert_int_equal(c.watermark_blocks, 277); /* floor(0.01 * 27775) */
    assert_int_equal(c.max_seqs, 256);
    assert_float_equal(c.knee_tokens, 9.3 / 0.064, 1e-9); /* 145.3 tokens */
    assert_float_equal(c.min_step_ms, 9.45, 1e-12);

    assert_int_equal(sim_profile_preset("llama3-8b-h100", &p), 0);
    assert_int_equal(sim_profile_derive(&p, &c), 0);
    assert_float_equal(c.knee_tokens, 280, 1e-9);
    assert_float_equal(c.k_kv_ms_per_token, 3.9126e-5, 1e-9);

    assert_int_equal(sim_profile_preset("llama3-70b-4xh100", &p), 0);
    assert_int_equal(sim_profile_derive(&p, &c), 0);
    /* 327680 / (4 * 3350e9) s = 2.4454e-5 ms */
    assert_float_equal(c.k_kv_ms_per_token, 2.4454e-5, 1e-9);
    /* (85.9 * 4 * 0.9 - 141.2 - 8) = 160.04 GB / 327680 = 488403 tokens -> 30525 blocks */
    assert_int_equal(c.kv_blocks, 30525);

    assert_int_equal(sim_profile_preset("tiny", &p), 0);
    assert_int_equal(sim_profile_derive(&p, &c), 0);
    assert_int_equal(c.kv_tokens, 1048576);
    assert_int_equal(c.kv_blocks, 65536);
    assert_int_equal(c.max_seqs, 4096);
    assert_float_equal(c.k_kv_ms_per_token, 1e-6, 1e-18);
    assert_float_equal(c.knee_tokens, 100, 1e-9);

    /* Explicit values win over auto; capacity rounds down to whole blocks. */
    char err[256];
    assert_int_equal(sim_profile_set(&p, "kv_capacity_tokens", "1000", err, sizeof(err)), 0);
    assert_int_equal(sim_profile_set(&p, "k_kv_ms_per_token", "0.5", err, sizeof(err)), 0);
    assert_int_equal(sim_profile_set(&p, "max_num_seqs", "4096", err, sizeof(err)), 0);
    assert_int_equal(sim_profile_derive(&p, &c), 0);
    assert_int_equal(c.kv_blocks, 62);
    assert_int_equal(c.kv_tokens, 992);
    assert_int_equal(c.max_seqs, 62); /* no more seqs than blocks */
    assert_float_equal(c.k_kv_ms_per_token, 0.5, 0);
    /* ... and auto follows a changed input. */
    assert_int_equal(sim_profile_set(&p, "k_kv_ms_per_token", "auto", err, sizeof(err)), 0);
    assert_int_equal(sim_profile_set(&p, "kv_bytes_per_token", "200", err, sizeof(err)), 0);
    assert_int_equal(sim_profile_derive(&p, &c), 0);
    assert_float_equal(c.k_kv_ms_per_token, 2e-6, 1e-18);
}

static void test_set_overrides(void **state)
{
    struct sim_profile p;
    char err[256], out[64];
    assert_int_equal(sim_profile_preset("llama3-8b-a100", &p), 0);

    assert_int_equal(sim_profile_set(&p, "t_w_ms", "7.5", err, sizeof(err)), 0);
    assert_float_equal(p.t_w_ms, 7.5, 0);
    assert_int_equal(sim_profile_set_kv(&p, "max_num_seqs=128", err, sizeof(err)), 0);
    assert_int_equal(p.max_num_seqs, 128);
    assert_int_equal(sim_profile_set_kv(&p, "model=my/model=x", err, sizeof(err)), 0);
    assert_string_equal(p.model, "my/model=x");
    assert_int_equal(sim_profile_set(&p, "noise", "off", err, sizeof(err)), 0);
    assert_false(p.noise);
    assert_int_equal(sim_profile_set(&p, "noise", "YES", err, sizeof(err)), 0);
    assert_true(p.noise);
    assert_int_equal(sim_profile_set(&p, "seed", "18446744073709551615", err, sizeof(err)), 0);
    assert_true(p.seed == UINT64_MAX);
    assert_int_equal(sim_profile_set(&p, "kv_capacity_tokens", "500000", err, sizeof(err)), 0);
    assert_int_equal(p.kv_capacity_tokens, 500000);
    assert_int_equal(sim_profile_get(&p, "kv_capacity_tokens", out, sizeof(out)), 0);
    assert_string_equal(out, "500000");
    assert_int_equal(sim_profile_get(&p, "k_kv_ms_per_token", out, sizeof(out)), 0);
    assert_string_equal(out, "auto");
    assert_int_equal(sim_profile_get(&p, "b_ms_per_token", out, sizeof(out)), 0);
    assert_string_equal(out, "0.064");
    assert_int_equal(sim_profile_get(&p, "nope", out, sizeof(out)), -ENOENT);
    assert_int_equal(sim_profile_get(&p, "model", out, 4), TS_TOOBIG);

    /* Every key can be set from the form get() writes, and help exists for it. */
    const char *const *keys = sim_profile_keys();
    int n = 0;
    for (; keys[n]; n++) {
        struct sim_profile q = p;
        assert_non_null(sim_profile_key_help(keys[n]));
        assert_int_equal(sim_profile_get(&p, keys[n], out, sizeof(out)), 0);
        assert_int_equal(sim_profile_set(&q, keys[n], out, err, sizeof(err)), 0);
        assert_memory_equal(&p, &q, sizeof(p));
    }
    assert_int_equal(n, 35);
    assert_null(sim_profile_key_help("nope"));

    /* Errors leave the profile unchanged and say what is wrong. */
    struct sim_profile before = p;
    assert_int_equal(sim_profile_set(&p, "t_w", "1", err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "unknown profile key 't_w'"));
    assert_non_null(strstr(err, "did you mean 't_w_ms'"));
    assert_int_equal(sim_profile_set(&p, "zzzzzzzzzzz", "1", err, sizeof(err)), -ENOENT);
    assert_null(strstr(err, "did you mean"));
    assert_int_equal(sim_profile_set(&p, "t_w_ms", "fast", err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "t_w_ms: 'fast' is not a number"));
    assert_int_equal(sim_profile_set(&p, "t_w_ms", "-1", err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "out of range"));
    assert_int_equal(sim_profile_set(&p, "t_w_ms", "nan", err, sizeof(err)), -EINVAL);
    assert_int_equal(sim_profile_set(&p, "t_w_ms", "1e999", err, sizeof(err)), -EINVAL);
    assert_int_equal(sim_profile_set(&p, "t_w_ms", "", err, sizeof(err)), -EINVAL);
    assert_int_equal(sim_profile_set(&p, "t_w_ms", "auto", err, sizeof(err)), -EINVAL);
    assert_int_equal(sim_profile_set(&p, "max_num_seqs", "-3", err, sizeof(err)), -EINVAL);
    assert_int_equal(sim_profile_set(&p, "max_num_seqs", "12x", err, sizeof(err)), -EINVAL);
    assert_int_equal(sim_profile_set(&p, "max_num_seqs", "0", err, sizeof(err)), -EINVAL);
    assert_int_equal(sim_profile_set(&p, "max_num_seqs", "99999999999999999999", err, sizeof(err)),
                     -EINVAL);
    assert_int_equal(sim_profile_set(&p, "gpu_memory_utilization", "0", err, sizeof(err)), -EINVAL);
    assert_int_equal(sim_profile_set(&p, "jitter_sigma", "0.5", err, sizeof(err)), -EINVAL);
    assert_int_equal(sim_profile_set(&p, "noise", "maybe", err, sizeof(err)), -EINVAL);
    assert_int_equal(sim_profile_set(&p, "model", "", err, sizeof(err)), -EINVAL);
    char longname[300];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(sim_profile_set(&p, "name", longname, err, sizeof(err)), -EINVAL);
    assert_int_equal(sim_profile_set_kv(&p, "noequals", err, sizeof(err)), -EINVAL);
    assert_int_equal(sim_profile_set_kv(&p, "=1", err, sizeof(err)), -ENOENT);
    assert_memory_equal(&p, &before, sizeof(p));
    /* A tiny err buffer is still terminated. */
    char small[8];
    assert_int_equal(sim_profile_set(&p, "bogus", "1", small, sizeof(small)), -ENOENT);
    assert_int_equal(strlen(small), 7);
}

static void test_validate_cross_rules(void **state)
{
    struct sim_profile p;
    char err[256];
    assert_int_equal(sim_profile_preset("tiny", &p), 0);

    struct sim_profile q = p;
    q.max_num_batched_tokens = 100;
    q.max_num_seqs = 200;
    assert_int_equal(sim_profile_validate(&q, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "max_num_batched_tokens"));

    q = p;
    q.kv_capacity_tokens = 1000;
    assert_int_equal(sim_profile_validate(&q, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "max_model_len (32768) does not fit"));
    q.max_model_len = 992; /* 62 blocks, watermark floor(0.62) = 0 */
    assert_int_equal(sim_profile_validate(&q, err, sizeof(err)), 0);
    q.watermark = 0.05; /* 3 blocks kept free */
    assert_int_equal(sim_profile_validate(&q, err, sizeof(err)), -EINVAL);

    q = p;
    q.kv_capacity_tokens = 0;
    q.weight_gb = 1000;
    assert_int_equal(sim_profile_validate(&q, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "kv_capacity_tokens: auto"));

    q = p;
    q.kv_capacity_tokens = 8;
    assert_int_equal(sim_profile_validate(&q, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "less than one block"));

    q = p;
    q.t_fix_ms = 0;
    q.t_w_ms = 0;
    assert_int_equal(sim_profile_validate(&q, err, sizeof(err)), -EINVAL);

    q = p;
    q.jitter_sigma = 0.9; /* set directly, bypassing sim_profile_set */
    assert_int_equal(sim_profile_validate(&q, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "jitter_sigma"));

    q = p;
    q.b_ms_per_token = -0.5;
    assert_int_equal(sim_profile_validate(&q, err, sizeof(err)), -EINVAL);

    q = p;
    q.model[0] = '\0';
    assert_int_equal(sim_profile_validate(&q, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "model"));
}

static void test_yaml_overrides(void **state)
{
    struct sim_profile p;
    char err[256] = "";
    assert_int_equal(sim_profile_preset("tiny", &p), 0);
    const char *y = "# my server\n"
                    "base: llama3-8b-h100\n"
                    "name: lab\n"
                    "t_w_ms: 4.2\n"
                    "max_num_seqs: 64\n"
                    "noise: false\n"
                    "model: \"org/model: v2\"\n"
                    "kv_capacity_tokens: auto\n";
    assert_int_equal(sim_profile_load_yaml_mem(&p, "x.yaml", y, strlen(y), err, sizeof(err)), 0);
    assert_string_equal(err, "");
    assert_string_equal(p.name, "lab");
    assert_string_equal(p.model, "org/model: v2");
    assert_float_equal(p.t_w_ms, 4.2, 0);
    assert_float_equal(p.b_ms_per_token, 0.020, 0); /* from base */
    assert_int_equal(p.max_num_seqs, 64);
    assert_false(p.noise);
    assert_int_equal(sim_profile_validate(&p, err, sizeof(err)), 0);

    /* base applies first even when written last. */
    assert_int_equal(sim_profile_preset("tiny", &p), 0);
    const char *y2 = "t_w_ms: 3\nbase: llama3-8b-a100\n";
    assert_int_equal(sim_profile_load_yaml_mem(&p, "y2", y2, strlen(y2), err, sizeof(err)), 0);
    assert_string_equal(p.name, "llama3-8b-a100");
    assert_float_equal(p.t_w_ms, 3, 0);
}

static void test_yaml_errors(void **state)
{
    struct sim_profile p, before;
    char err[256];
    assert_int_equal(sim_profile_preset("tiny", &p), 0);
    before = p;

    const char *unk = "t_w_ms: 2\nmax_num_seqs: 8\nt_ww_ms: 5\n";
    assert_int_equal(sim_profile_load_yaml_mem(&p, "prof.yaml", unk, strlen(unk), err, sizeof(err)),
                     -EINVAL);
    assert_string_equal(err, "prof.yaml:3:1: unknown profile key 't_ww_ms' (did you mean "
                             "'t_w_ms'?)");
    assert_memory_equal(&p, &before, sizeof(p));

    const char *badval = "t_w_ms: 2\nmax_num_seqs:   lots\n";
    assert_int_equal(
        sim_profile_load_yaml_mem(&p, "b.yaml", badval, strlen(badval), err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "b.yaml:2:17: max_num_seqs: 'lots' is not a whole number");

    const char *syntax = "t_w_ms: 2\nmodel: [unclosed\n";
    assert_int_equal(
        sim_profile_load_yaml_mem(&p, "s.yaml", syntax, strlen(syntax), err, sizeof(err)),
        TS_PARSE);
    assert_true(strncmp(err, "s.yaml:", 7) == 0);
    int line = 0, col = 0;
    assert_int_equal(sscanf(err, "s.yaml:%d:%d:", &line, &col), 2);
    assert_true(line >= 2);

    const char *list = "t_w_ms: [1, 2]\n";
    assert_int_equal(sim_profile_load_yaml_mem(&p, "l.yaml", list, strlen(list), err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "l.yaml:1:1: t_w_ms: the value must be a scalar"));

    const char *alias = "a: &x 3\n";
    assert_int_equal(
        sim_profile_load_yaml_mem(&p, "a.yaml", alias, strlen(alias), err, sizeof(err)), -EINVAL);
    const char *alias2 = "t_fix_ms: &x 3\nt_w_ms: *x\n";
    assert_int_equal(
        sim_profile_load_yaml_mem(&p, "a2.yaml", alias2, strlen(alias2), err, sizeof(err)),
        -EINVAL);
    assert_non_null(strstr(err, "a2.yaml:2:1:"));

    const char *notmap = "- t_w_ms\n";
    assert_int_equal(
        sim_profile_load_yaml_mem(&p, "n.yaml", notmap, strlen(notmap), err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "expected a mapping"));
    assert_int_equal(sim_profile_load_yaml_mem(&p, "e.yaml", "", 0, err, sizeof(err)), -EINVAL);

    const char *nobase = "base: gpt-9\n";
    assert_int_equal(
        sim_profile_load_yaml_mem(&p, "nb.yaml", nobase, strlen(nobase), err, sizeof(err)),
        -EINVAL);
    assert_non_null(strstr(err, "nb.yaml:1:7: base: not a preset name"));

    const char *empty = "t_w_ms:\n";
    assert_int_equal(
        sim_profile_load_yaml_mem(&p, "m.yaml", empty, strlen(empty), err, sizeof(err)), -EINVAL);

    const char *dup = "t_w_ms: 1\nt_w_ms: 2\n";
    assert_int_equal(sim_profile_load_yaml_mem(&p, "d.yaml", dup, strlen(dup), err, sizeof(err)),
                     TS_PARSE);
    assert_string_equal(err, "d.yaml:2:1: duplicate key");

    /* Not UTF-8 (libfyaml 0.7.12 loops forever on the second one: found by fuzz_profile). */
    const char *bin = "t_w_ms: 2\nmodel: ab\xff\n";
    assert_int_equal(sim_profile_load_yaml_mem(&p, "u.yaml", bin, strlen(bin), err, sizeof(err)),
                     TS_PARSE);
    assert_string_equal(err, "u.yaml:2:10: not UTF-8 text");
    const char *hang = "ti: 2\nb\r%_msl\xff\n";
    assert_int_equal(sim_profile_load_yaml_mem(&p, "h.yaml", hang, strlen(hang), err, sizeof(err)),
                     TS_PARSE);
    const char *nul = "t_w_ms: 2\0\n";
    assert_int_equal(sim_profile_load_yaml_mem(&p, "z.yaml", nul, 11, err, sizeof(err)), TS_PARSE);
    assert_string_equal(err, "z.yaml:1:10: not UTF-8 text");
    const char *overlong = "model: \xc0\xaf\n", *surrogate = "model: \xed\xa0\x80\n";
    assert_int_equal(
        sim_profile_load_yaml_mem(&p, "o", overlong, strlen(overlong), err, sizeof(err)), TS_PARSE);
    assert_int_equal(
        sim_profile_load_yaml_mem(&p, "s", surrogate, strlen(surrogate), err, sizeof(err)),
        TS_PARSE);
    const char *utf8 = "model: \"mod\xc3\xa8le-\xe2\x82\xac-\xf0\x9f\x98\x80\"\n";
    struct sim_profile u = p;
    assert_int_equal(sim_profile_load_yaml_mem(&u, "v", utf8, strlen(utf8), err, sizeof(err)), 0);
    assert_string_equal(u.model, "mod\xc3\xa8le-\xe2\x82\xac-\xf0\x9f\x98\x80");

    const char *two = "t_w_ms: 1\n---\nt_w_ms: 2\n";
    assert_int_equal(sim_profile_load_yaml_mem(&p, "t.yaml", two, strlen(two), err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "more than one YAML document"));

    const char *comment = "# nothing here\n";
    assert_int_equal(
        sim_profile_load_yaml_mem(&p, "c.yaml", comment, strlen(comment), err, sizeof(err)),
        -EINVAL);
    assert_non_null(strstr(err, "c.yaml: no content"));

    const char *baselist = "base: [tiny]\n";
    assert_int_equal(
        sim_profile_load_yaml_mem(&p, "bl.yaml", baselist, strlen(baselist), err, sizeof(err)),
        -EINVAL);
    assert_non_null(strstr(err, "bl.yaml:1:1: base: not a preset name"));
    assert_memory_equal(&p, &before, sizeof(p));
}

static void test_yaml_file(void **state)
{
    char path[] = "/tmp/ts_profile_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *y = "base: tiny\nt_w_ms: 2.5\nbogus_key: 1\n";
    assert_int_equal(write(fd, y, strlen(y)), (ssize_t)strlen(y));
    close(fd);

    struct sim_profile p;
    char err[256], want[300];
    assert_int_equal(sim_profile_preset("llama3-8b-a100", &p), 0);
    assert_int_equal(sim_profile_load_yaml(&p, path, err, sizeof(err)), -EINVAL);
    snprintf(want, sizeof(want), "%s:3:1: unknown profile key 'bogus_key'", path);
    assert_true(strncmp(err, want, strlen(want)) == 0);
    assert_string_equal(p.name, "llama3-8b-a100");

    fd = open(path, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    y = "base: tiny\nt_w_ms: 2.5\n";
    assert_int_equal(write(fd, y, strlen(y)), (ssize_t)strlen(y));
    close(fd);
    assert_int_equal(sim_profile_load_yaml(&p, path, err, sizeof(err)), 0);
    assert_string_equal(p.name, "tiny");
    assert_float_equal(p.t_w_ms, 2.5, 0);
    unlink(path);

    assert_int_equal(sim_profile_load_yaml(&p, "/nonexistent/x.yaml", err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "/nonexistent/x.yaml"));

    /* Too large. */
    strcpy(path, "/tmp/ts_profile_XXXXXX");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    char *big = calloc(1, SIM_PROFILE_FILE_MAX + 10);
    assert_non_null(big);
    memset(big, '#', SIM_PROFILE_FILE_MAX + 9);
    assert_int_equal(write(fd, big, SIM_PROFILE_FILE_MAX + 9), SIM_PROFILE_FILE_MAX + 9);
    close(fd);
    free(big);
    assert_int_equal(sim_profile_load_yaml(&p, path, err, sizeof(err)), TS_TOOBIG);
    unlink(path);
}

static void test_yaml_alloc_failure(void **state)
{
    struct sim_profile p, before;
    char err[256];
    assert_int_equal(sim_profile_preset("tiny", &p), 0);
    before = p;
    char path[] = "/tmp/ts_profile_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "t_w_ms: 3\n", 10), 10);
    close(fd);
    ts_alloc_fail_after(0);
    int rc = sim_profile_load_yaml(&p, path, err, sizeof(err));
    ts_alloc_fail_after(-1);
    unlink(path);
    assert_int_equal(rc, -ENOMEM);
    assert_memory_equal(&p, &before, sizeof(p));
}

/* The scheduling policy is a word; multi-step and the overhead keys have ranges. */
static void test_mechanism_keys(void **state)
{
    struct sim_profile p;
    char err[256], out[64];
    assert_int_equal(sim_profile_preset("tiny", &p), 0);
    assert_int_equal(sim_profile_get(&p, "sched_policy", out, sizeof(out)), 0);
    assert_string_equal(out, "mixed");
    assert_int_equal(sim_profile_set(&p, "sched_policy", "prefill-first", err, sizeof(err)), 0);
    assert_int_equal(p.sched_policy, SIM_SCHED_PREFILL_FIRST);
    assert_int_equal(sim_profile_set(&p, "sched_policy", "reserve-max", err, sizeof(err)), 0);
    assert_int_equal(sim_profile_get(&p, "sched_policy", out, sizeof(out)), 0);
    assert_string_equal(out, "reserve-max");
    assert_int_equal(sim_profile_set(&p, "sched_policy", "fcfs", err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "sched_policy: 'fcfs' is not one of mixed, prefill-first"));
    assert_int_equal(sim_profile_set(&p, "num_scheduler_steps", "65", err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "num_scheduler_steps"));
    assert_int_equal(sim_profile_set(&p, "num_scheduler_steps", "10", err, sizeof(err)), 0);
    assert_int_equal(sim_profile_set(&p, "t_sample_ms_per_seq", "-1", err, sizeof(err)), -EINVAL);
    p.sched_policy = 7; /* a struct filled by hand */
    assert_int_equal(sim_profile_validate(&p, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "sched_policy"));
    assert_int_equal(sim_profile_load_yaml_mem(
                         &p, "x.yaml", "base: vllm060-llama31-8b-a100\nsched_policy: mixed\n", 50,
                         err, sizeof(err)),
                     0);
    assert_int_equal(p.sched_policy, SIM_SCHED_MIXED);
    assert_int_equal(p.num_scheduler_steps, 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_preset_validates),
        cmocka_unit_test(test_mechanism_keys),
        cmocka_unit_test(test_derive_numbers),
        cmocka_unit_test(test_set_overrides),
        cmocka_unit_test(test_validate_cross_rules),
        cmocka_unit_test(test_yaml_overrides),
        cmocka_unit_test(test_yaml_errors),
        cmocka_unit_test(test_yaml_file),
        cmocka_unit_test(test_yaml_alloc_failure),
    };
    return cmocka_run_group_tests_name("profile", tests, NULL, NULL);
}
