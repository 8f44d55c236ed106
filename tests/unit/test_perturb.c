#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "base/strdist.h"
#include "base/utf8.h"
#include "llm/text.h"
#include "workload/perturb.h"

#define CAP (8u << 20)

static const char sample[] = "Please book a table for two at seven.";
/* Mixed scripts: accents, CJK, emoji, combining mark. */
static const char mixed[] = "Caf\xc3\xa9 na\xc3\xafve \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80 "
                            "e\xcc\x81t\xc3\xa9, (ok)! Zoo-42 #tag";

/* Applies the one perturbation of spec to text; returns a heap string
 * (ts_free it) and its length in *n. */
static char *run_n(const char *spec, const char *text, size_t len, uint64_t seed, size_t *n)
{
    struct perturb_set set;
    char err[256];
    int rc = perturb_set_parse(&set, spec, err, sizeof(err));
    if (rc != 0)
        fail_msg("%s: %s", spec, err);
    assert_int_equal(set.n, 1);
    struct buf b;
    buf_init(&b, CAP);
    assert_int_equal(perturb_apply(&set.v[0], text, len, seed, &b), 0);
    *n = b.len;
    char *s = buf_take(&b, NULL);
    if (!s)
        s = ts_strdup("");
    assert_non_null(s);
    return s;
}

static char *run(const char *spec, const char *text, uint64_t seed)
{
    size_t n;
    return run_n(spec, text, strlen(text), seed, &n);
}

static void assert_run(const char *spec, const char *text, uint64_t seed, const char *want)
{
    char *got = run(spec, text, seed);
    assert_string_equal(got, want);
    ts_free(got);
}

static bool valid_utf8(const char *s, size_t n)
{
    return utf8_invalid_at(s, n) == n;
}

/* A long text of n words from a small vocabulary, seeded. */
static char *long_text(size_t n_words, uint64_t seed, size_t *len)
{
    static const char *const words[] = {"please", "book",  "table", "seven",  "river",
                                        "Garden", "quick", "WORLD", "summer", "light"};
    struct buf b;
    struct rng r;
    buf_init(&b, CAP);
    rng_seed(&r, seed);
    for (size_t i = 0; i < n_words; i++) {
        if (i)
            assert_int_equal(buf_append_char(&b, i % 12 == 0 ? '\n' : ' '), 0);
        assert_int_equal(buf_append_str(&b, words[rng_range(&r, 0, 9)]), 0);
        if (i % 7 == 6)
            assert_int_equal(buf_append_str(&b, i % 2 ? "." : ","), 0);
    }
    return buf_take(&b, len);
}

/* ---- typos ---- */

static void test_typos_exact(void **state)
{
    (void)state;
    /* seed 1: "table" loses its 't', "for" swaps 'o' and 'r' */
    assert_run("typos:0.5", sample, 1, "Please book a able fro two at seven.");
    /* seed 2: deletions in "Please", "table", "seven" */
    assert_run("typos:0.5", sample, 2, "Pease book a tble for two at seve.");
    /* a rate too small to hit: one word is changed anyway ('f' -> neighbour 't') */
    assert_run("typos:0.01", sample, 1, "Please book a table tor two at seven.");
    assert_run("typos:0", sample, 1, sample);
    assert_run("typos:0.5", "123 !!! ...", 1, "123 !!! ..."); /* no letters: nothing to do */
}

/* Over a long text, the share of changed words is the rate, and each changed
 * word is one edit (substitution, swap, deletion, insertion) away. */
static void test_typos_rate(void **state)
{
    (void)state;
    size_t len, n;
    char *text = long_text(20000, 7, &len);
    char *out = run_n("typos:0.1", text, len, 3, &n);
    size_t changed = 0, words = 0;
    char *sa, *sb;
    char *a = strtok_r(text, " \n", &sa), *b = strtok_r(out, " \n", &sb);
    while (a && b) {
        words++;
        if (strcmp(a, b) != 0) {
            changed++;
            assert_int_equal(str_edit_distance(a, strlen(a), b, strlen(b)), 1);
        }
        a = strtok_r(NULL, " \n", &sa);
        b = strtok_r(NULL, " \n", &sb);
    }
    assert_null(a);
    assert_null(b);
    assert_int_equal(words, 20000);
    /* binomial(20000, 0.1): mean 2000, sd 42 */
    assert_in_range(changed, 1800, 2200);
    ts_free(text);
    ts_free(out);
}

/* ---- homoglyphs ---- */

static void test_homoglyphs(void **state)
{
    (void)state;
    assert_run("homoglyphs:0.3", sample, 1,
               "Please b\xd0\xbe\xd0\xbek a table for two at sev\xd0\xb5n.");
    assert_run("homoglyphs:1", "pay Bob", 1,
               "\xd1\x80\xd0\xb0\xd1\x83 \xd0\x92\xd0\xbe"
               "b");

    size_t len, n;
    char *text = long_text(20000, 8, &len);
    char *out = run_n("homoglyphs:0.2", text, len, 5, &n);
    assert_true(valid_utf8(out, n));
    /* walk both: every difference is one ASCII letter turned into one
     * Cyrillic or Greek letter */
    size_t i = 0, j = 0, replaced = 0, eligible = 0;
    const char *mappable = "acehijopsvxyABCEHIKMNOPTXYZ";
    for (; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (strchr(mappable, c))
            eligible++;
        if ((unsigned char)out[j] == c) {
            j++;
            continue;
        }
        assert_non_null(strchr(mappable, c));
        unsigned char b0 = (unsigned char)out[j], b1 = (unsigned char)out[j + 1];
        assert_true(b0 >= 0xc0 && b0 < 0xe0);
        unsigned cp = ((b0 & 0x1fu) << 6) | (b1 & 0x3fu);
        assert_true(cp >= 0x370 && cp <= 0x4ff);
        j += 2;
        replaced++;
    }
    assert_int_equal(j, n);
    double share = (double)replaced / (double)eligible;
    assert_true(share > 0.19 && share < 0.21);
    ts_free(text);
    ts_free(out);
}

/* ---- zero-width, full-width ---- */

static size_t strip_zero_width(char *s, size_t n)
{
    size_t j = 0;
    for (size_t i = 0; i < n;) {
        if (i + 3 <= n &&
            (memcmp(s + i, "\xe2\x80\x8b", 3) == 0 || memcmp(s + i, "\xe2\x80\x8c", 3) == 0 ||
             memcmp(s + i, "\xe2\x80\x8d", 3) == 0 || memcmp(s + i, "\xef\xbb\xbf", 3) == 0)) {
            i += 3;
            continue;
        }
        s[j++] = s[i++];
    }
    return j;
}

static void test_zero_width(void **state)
{
    (void)state;
    assert_run("zero_width:0.2", sample, 1,
               "Please\xe2\x80\x8b book a ta\xe2\x80\x8c"
               "b\xe2\x80\x8ble for two \xef\xbb\xbf"
               "at seven.");
    /* between code points only: never at the start or end, never inside é */
    assert_run("zero_width:1", "\xc3\xa9x", 4, "\xc3\xa9\xef\xbb\xbfx");

    size_t n;
    char *out = run_n("zero_width:0.5", mixed, strlen(mixed), 9, &n);
    assert_true(valid_utf8(out, n));
    assert_true(n > strlen(mixed));
    n = strip_zero_width(out, n);
    assert_int_equal(n, strlen(mixed));
    assert_memory_equal(out, mixed, n);
    ts_free(out);

    size_t len;
    char *text = long_text(10000, 9, &len);
    out = run_n("zero_width:0.05", text, len, 10, &n);
    size_t inserted = (n - len) / 3; /* each insertion is 3 bytes */
    /* len - 1 gaps between ASCII characters */
    double share = (double)inserted / (double)(len - 1);
    assert_true(share > 0.045 && share < 0.055);
    assert_int_equal(strip_zero_width(out, n), len);
    assert_memory_equal(out, text, len);
    ts_free(text);
    ts_free(out);
}

static void test_full_width(void **state)
{
    (void)state;
    assert_run("full_width:1", "Hi, 2 u!", 1,
               "\xef\xbc\xa8\xef\xbd\x89\xef\xbc\x8c \xef\xbc\x92 \xef\xbd\x95\xef\xbc\x81");
    assert_run("full_width:0.2", sample, 1,
               "Pleas\xef\xbd\x85 \xef\xbd\x82ook a table \xef\xbd\x86o\xef\xbd\x92 "
               "\xef\xbd\x94wo at seven.");
    size_t n;
    char *out = run_n("full_width:0.5", mixed, strlen(mixed), 3, &n);
    assert_true(valid_utf8(out, n));
    /* mapping U+FF01..U+FF5E back to ASCII restores the input */
    char back[256];
    size_t j = 0, mapped = 0;
    for (size_t i = 0; i < n; j++) {
        unsigned char *u = (unsigned char *)out + i;
        if (i + 3 <= n && u[0] == 0xef && (u[1] == 0xbc || u[1] == 0xbd)) {
            unsigned cp = ((u[1] & 0x3fu) << 6) | (u[2] & 0x3fu);
            cp |= 0xf000;
            assert_true(cp >= 0xff01 && cp <= 0xff5e);
            back[j] = (char)(cp - 0xff01 + 0x21);
            mapped++;
            i += 3;
        } else {
            back[j] = out[i++];
        }
    }
    assert_int_equal(j, strlen(mixed));
    assert_memory_equal(back, mixed, j);
    assert_true(mapped > 0);
    ts_free(out);
}

/* ---- punctuation, whitespace, truncation, case ---- */

static void test_no_punct(void **state)
{
    (void)state;
    assert_run("no_punct", sample, 1, "Please book a table for two at seven");
    assert_run("no_punct", "Hi, there! (ok) caf\xc3\xa9\xe3\x80\x82", 1,
               "Hi there ok caf\xc3\xa9\xe3\x80\x82"); /* U+3002 is kept: ASCII only */
    assert_run("no_punct:0.5", "a.b,c;d:e!f?g", 2, "ab,cd:e!fg");
}

static void test_whitespace(void **state)
{
    (void)state;
    assert_run("whitespace:0.5", sample, 1, "Please book a table fo r t wo a t seven.");
    /* never inside a code point, never at a word's edge */
    char *out = run("whitespace:1", "\xc3\xa9\xc3\xa9 x \xe4\xbd\xa0\xe5\xa5\xbd", 1);
    assert_string_equal(out, "\xc3\xa9 \xc3\xa9 x \xe4\xbd\xa0 \xe5\xa5\xbd");
    ts_free(out);

    /* a slot value: only words inside the span get a space */
    const char *t = "Book a table at Chez Panisse tonight";
    size_t start = strstr(t, "Chez") - t, end = start + strlen("Chez Panisse");
    struct buf b;
    buf_init(&b, 1024);
    assert_int_equal(perturb_whitespace_span(t, strlen(t), start, end, 1, &b), 0);
    assert_string_equal(b.data, "Book a table at Ch ez Pan isse tonight");
    buf_reset(&b);
    /* a span cutting a word: its boundaries outside the span are not used */
    assert_int_equal(perturb_whitespace_span(t, strlen(t), 0, 2, 5, &b), 0);
    assert_string_equal(b.data, "B ook a table at Chez Panisse tonight");
    buf_reset(&b);
    assert_int_equal(perturb_whitespace_span(t, strlen(t), 40, 99, 5, &b), 0);
    assert_string_equal(b.data, t);
    buf_release(&b);
}

static void test_truncate(void **state)
{
    (void)state;
    assert_run("truncate:0.5", sample, 1, "Please book a tabl"); /* 37 * 0.5 = 18 bytes */
    assert_run("truncate", sample, 9, "Please book a tabl");
    assert_run("truncate:1", sample, 1, sample);
    assert_run("truncate:0", sample, 1, "");
    /* 9 bytes * 0.3 = 2 falls inside é: cut before it */
    assert_run("truncate:0.3", "h\xc3\xa9h\xc3\xa9h\xc3\xa9", 1, "h");
}

static void test_random_case(void **state)
{
    (void)state;
    assert_run("random_case:0.3", sample, 1, "PleasE Book a table FoR Two at sEven.");
    assert_run("random_case:1", "Hello, World 42", 1, "hELLO, wORLD 42");
    size_t len, n;
    char *text = long_text(10000, 11, &len);
    char *out = run_n("random_case", text, len, 12, &n);
    assert_int_equal(n, len);
    size_t letters = 0, flipped = 0;
    for (size_t i = 0; i < len; i++) {
        char a = text[i], b = out[i];
        bool alpha = (a | 0x20) >= 'a' && (a | 0x20) <= 'z';
        letters += alpha;
        if (a != b) {
            assert_true(alpha);
            assert_int_equal(a ^ 0x20, b);
            flipped++;
        }
    }
    double share = (double)flipped / (double)letters;
    assert_true(share > 0.49 && share < 0.51);
    ts_free(text);
    ts_free(out);
}

/* ---- wrappers and encodings ---- */

static void test_jailbreak(void **state)
{
    (void)state;
    char *out = run("jailbreak", sample, 1);
    assert_non_null(strstr(out, "You play Sam"));
    const char *at = strstr(out, "\n\nPlease book a table for two at seven.\n\nAnswer as Sam");
    assert_non_null(at);
    ts_free(out);
    out = run("jailbreak:ignore_previous", sample, 1);
    assert_int_equal(strncmp(out, "Ignore all previous instructions,", 33), 0);
    size_t n = strlen(out), m = strlen(sample);
    assert_true(n > m);
    assert_string_equal(out + n - m, sample);
    assert_memory_equal(out + n - m - 2, "\n\n", 2);
    ts_free(out);
}

static void test_base64_hex(void **state)
{
    (void)state;
    assert_run("base64", "foobar", 1, PERTURB_BASE64_PREFIX "Zm9vYmFy");
    assert_run("hex", "Hi\xc3\xa9", 1, PERTURB_HEX_PREFIX "4869c3a9");
    assert_run("base64", "", 1, PERTURB_BASE64_PREFIX);

    size_t n;
    char *out = run_n("base64", mixed, strlen(mixed), 1, &n);
    size_t pl = strlen(PERTURB_BASE64_PREFIX);
    assert_memory_equal(out, PERTURB_BASE64_PREFIX, pl);
    unsigned char back[256];
    long m = base64_decode(out + pl, n - pl, back, BASE64_STRICT);
    assert_int_equal(m, strlen(mixed));
    assert_memory_equal(back, mixed, (size_t)m);
    ts_free(out);

    out = run_n("hex", mixed, strlen(mixed), 1, &n);
    pl = strlen(PERTURB_HEX_PREFIX);
    assert_int_equal(n - pl, 2 * strlen(mixed));
    for (size_t i = 0; i < strlen(mixed); i++) {
        unsigned v;
        char two[3] = {out[pl + 2 * i], out[pl + 2 * i + 1], 0};
        assert_int_equal(sscanf(two, "%2x", &v), 1);
        assert_int_equal(v, (unsigned char)mixed[i]);
    }
    ts_free(out);
}

static void test_rot13(void **state)
{
    (void)state;
    assert_run("rot13", "Hello, World! \xc3\xa9", 1, PERTURB_ROT13_PREFIX "Uryyb, Jbeyq! \xc3\xa9");
    size_t n1, n2, pl = strlen(PERTURB_ROT13_PREFIX);
    char *once = run_n("rot13", mixed, strlen(mixed), 1, &n1);
    assert_true(valid_utf8(once, n1));
    char *twice = run_n("rot13", once + pl, n1 - pl, 1, &n2);
    assert_int_equal(n2 - pl, strlen(mixed));
    assert_memory_equal(twice + pl, mixed, n2 - pl);
    ts_free(once);
    ts_free(twice);
}

/* ---- injection ---- */

static void test_injection(void **state)
{
    (void)state;
    const char *p[3] = {"Paris is the capital of France. It has 2 million people.",
                        "The Seine flows through Paris.\nIt is 777 km long.",
                        "Lyon is known for its food! Many chefs work there."};
    size_t lens[3];
    for (int i = 0; i < 3; i++)
        lens[i] = strlen(p[i]);
    size_t inj = strlen(PERTURB_INJECTION_TEXT);
    bool seen[3] = {false, false, false}, at_start = false, at_end = false, inside = false;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        struct buf b;
        size_t which = 99;
        buf_init(&b, 4096);
        assert_int_equal(perturb_inject(p, lens, 3, seed, &which, &b), 0);
        assert_true(which < 3);
        seen[which] = true;
        assert_int_equal(b.len, lens[which] + inj);
        const char *at = strstr(b.data, PERTURB_INJECTION_TEXT);
        assert_non_null(at);
        assert_non_null(strstr(b.data, PERTURB_INJECTION_CANARY));
        size_t off = (size_t)(at - b.data);
        /* removing the injection gives the passage back */
        assert_memory_equal(b.data, p[which], off);
        assert_memory_equal(at + inj, p[which] + off, lens[which] - off);
        /* inserted at a sentence boundary */
        if (off == 0)
            at_start = true;
        else if (off == lens[which])
            at_end = true;
        else {
            inside = true;
            const char *q = p[which];
            assert_true(q[off - 1] == '\n' ||
                        (q[off - 1] == ' ' && strchr(".!?", q[off - 2]) != NULL));
        }
        buf_release(&b);
    }
    assert_true(seen[0] && seen[1] && seen[2]);
    assert_true(at_start && at_end && inside);

    struct buf b;
    size_t which;
    buf_init(&b, 4096);
    assert_int_equal(perturb_inject(p, lens, 0, 1, &which, &b), -EINVAL);
    assert_int_equal(perturb_inject(p, lens, 3, 1, &which, &b), 0);
    assert_int_equal(which, 2);
    assert_string_equal(b.data, "Lyon is known for its food! " PERTURB_INJECTION_TEXT
                                "Many chefs work there.");
    buf_release(&b);
    assert_run("injection", "One. Two.", 1, "One. " PERTURB_INJECTION_TEXT "Two.");
}

/* ---- over-long ---- */

static void test_overlong(void **state)
{
    (void)state;
    uint64_t ns[] = {1, 9, 10, 30, 1000, 123457};
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
        char spec[64];
        snprintf(spec, sizeof(spec), "overlong:%llu", (unsigned long long)ns[i]);
        size_t n;
        char *out = run_n(spec, sample, strlen(sample), 1, &n);
        uint64_t want = ns[i] < 10 ? 10 : ns[i]; /* the sample is already 10 tokens */
        assert_int_equal(text_count_tokens(out, n), want);
        assert_true(n >= strlen(sample));
        assert_memory_equal(out, sample, strlen(sample));
        assert_true(valid_utf8(out, n));
        ts_free(out);
    }
    assert_int_equal(text_count_tokens(sample, strlen(sample)), 10); /* "Ple|ase" is 2 */
    assert_run("overlong:30", sample, 1,
               "Please book a table for two at seven.\n\nPlease book a table for two at "
               "seven.\n\nPlease book a table for two at");
    /* nothing visible to repeat: a filler sentence */
    size_t n;
    char *out = run_n("overlong:500", "  ", 2, 1, &n);
    assert_int_equal(text_count_tokens(out, n), 500);
    assert_non_null(strstr(out, "quick brown fox"));
    ts_free(out);
    /* CJK: one token a code point, never split */
    out = run_n("overlong:1001", "\xe4\xbd\xa0\xe5\xa5\xbd", 6, 1, &n);
    assert_int_equal(text_count_tokens(out, n), 1001);
    assert_true(valid_utf8(out, n));
    ts_free(out);

    struct perturb p;
    struct buf b;
    perturb_default(&p, PERTURB_OVERLONG);
    p.tokens = 100000;
    buf_init(&b, 1000);
    assert_int_equal(perturb_apply(&p, sample, strlen(sample), 1, &b), TS_TOOBIG);
    buf_release(&b);
    p.tokens = 0;
    buf_init(&b, 1000);
    assert_int_equal(perturb_apply(&p, sample, strlen(sample), 1, &b), -EINVAL);
    buf_release(&b);
}

/* ---- invalid UTF-8 ---- */

static void test_invalid_utf8(void **state)
{
    (void)state;
    assert_run("invalid_utf8:0.1", sample, 1,
               "Please\xf2\xbb\xbd book\xc3 a table fo\xc1\x81r two at\x9f seven.");
    /* at least one insertion, even in the empty text */
    for (uint64_t seed = 1; seed <= 100; seed++) {
        size_t n;
        char *out = run_n("invalid_utf8:0.0001", "", 0, seed, &n);
        assert_true(n > 0);
        assert_true(utf8_invalid_at(out, n) < n);
        ts_free(out);
        out = run_n("invalid_utf8:0.01", mixed, strlen(mixed), seed, &n);
        assert_true(utf8_invalid_at(out, n) < n);
        ts_free(out);
    }
    /* the rate: insertions per code point boundary, over a long text */
    size_t len, n;
    char *text = long_text(10000, 13, &len);
    char *out = run_n("invalid_utf8:0.02", text, len, 14, &n);
    size_t bad = 0, good = 0;
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)out[i] < 0x80)
            good++;
        else if (i == 0 || (unsigned char)out[i - 1] < 0x80)
            bad++; /* the first byte of an insertion (insertions never touch) */
    }
    assert_int_equal(good, len);
    double share = (double)bad / (double)(len + 1);
    assert_true(share > 0.017 && share < 0.023);
    ts_free(text);
    ts_free(out);
}

/* Everything but invalid_utf8 keeps valid UTF-8 valid; everything changes
 * the text; same seed, same bytes. */
static void test_all_valid_and_deterministic(void **state)
{
    (void)state;
    const char *specs[] = {"typos:0.001",
                           "homoglyphs:0.001",
                           "zero_width:0.001",
                           "full_width:0.001",
                           "no_punct:0.001",
                           "whitespace:0.001",
                           "truncate:0.7",
                           "random_case:0.001",
                           "jailbreak",
                           "jailbreak:ignore_previous",
                           "base64",
                           "hex",
                           "rot13",
                           "injection",
                           "overlong:200"};
    for (size_t k = 0; k < sizeof(specs) / sizeof(specs[0]); k++) {
        for (uint64_t seed = 1; seed <= 50; seed++) {
            size_t n1, n2;
            char *a = run_n(specs[k], mixed, strlen(mixed), seed, &n1);
            char *b = run_n(specs[k], mixed, strlen(mixed), seed, &n2);
            if (!valid_utf8(a, n1))
                fail_msg("%s seed %llu: invalid UTF-8", specs[k], (unsigned long long)seed);
            assert_int_equal(n1, n2);
            assert_memory_equal(a, b, n1);
            if (n1 == strlen(mixed) && memcmp(a, mixed, n1) == 0)
                fail_msg("%s seed %llu: unchanged", specs[k], (unsigned long long)seed);
            ts_free(a);
            ts_free(b);
        }
    }
}

/* Invalid input (as after invalid_utf8 in a chain) is walked safely and its
 * bytes are kept. */
static void test_invalid_input(void **state)
{
    (void)state;
    const char bad[] = "a\xc3 b\x80\xe4\xbd c\xf0\x9f\x98 d";
    assert_run("homoglyphs:1", bad, 1, "\xd0\xb0\xc3 b\x80\xe4\xbd \xd1\x81\xf0\x9f\x98 d");
    assert_run("random_case:1", bad, 1, "A\xc3 B\x80\xe4\xbd C\xf0\x9f\x98 D");
    assert_run("truncate:0.1", bad, 1, "a");
}

/* ---- caps and allocation failures ---- */

static void test_caps_and_enomem(void **state)
{
    (void)state;
    struct perturb_set set;
    char err[256];
    assert_int_equal(perturb_set_parse(&set,
                                       "typos:0.5,homoglyphs:0.5,zero_width:0.5,full_width:0.5,"
                                       "whitespace:0.5,jailbreak,base64",
                                       err, sizeof(err)),
                     0);
    struct buf b;
    buf_init(&b, 64);
    assert_int_equal(perturb_set_apply(&set, 0x7f, sample, strlen(sample), 1, &b), TS_TOOBIG);
    buf_release(&b);
    for (int i = 0; i < PERTURB_KIND_COUNT; i++) {
        struct perturb p;
        perturb_default(&p, (enum perturb_kind)i);
        p.tokens = 100;
        buf_init(&b, 8);
        /* every kind's output of `mixed` is longer than 8 bytes */
        assert_int_equal(perturb_apply(&p, mixed, strlen(mixed), 1, &b), TS_TOOBIG);
        buf_release(&b);
    }
    /* every allocation failure is reported and leaks nothing */
    bool done = false;
    for (long k = 0; k < 64 && !done; k++) {
        buf_init(&b, CAP);
        ts_alloc_fail_after(k);
        int rc = perturb_set_apply(&set, 0x7f, sample, strlen(sample), 1, &b);
        ts_alloc_fail_after(-1);
        if (rc == 0)
            done = true;
        else
            assert_int_equal(rc, -ENOMEM);
        buf_release(&b);
    }
    assert_true(done);
}

/* ---- chains ---- */

static void test_set_apply(void **state)
{
    (void)state;
    struct perturb_set set;
    char err[256];
    assert_int_equal(perturb_set_parse(&set, "rot13,typos:0.5,base64", err, sizeof(err)), 0);
    struct buf b;
    buf_init(&b, CAP);
    /* rot13 then base64 (typos not in the mask) */
    assert_int_equal(perturb_set_apply(&set, 0x5, "Hello", 5, 1, &b), 0);
    size_t pl = strlen(PERTURB_BASE64_PREFIX);
    char back[512];
    long m = base64_decode(b.data + pl, b.len - pl, back, 0);
    assert_true(m > 0);
    back[m] = 0;
    assert_string_equal(back, PERTURB_ROT13_PREFIX "Uryyb");
    buf_reset(&b);
    assert_int_equal(perturb_set_apply(&set, 0, "Hello", 5, 1, &b), 0);
    assert_string_equal(b.data, "Hello");
    buf_reset(&b);
    /* each item gets its own seed: same request seed, same result */
    assert_int_equal(perturb_set_apply(&set, 0x7, sample, strlen(sample), 42, &b), 0);
    char *first = ts_strdup(b.data);
    buf_reset(&b);
    assert_int_equal(perturb_set_apply(&set, 0x7, sample, strlen(sample), 42, &b), 0);
    assert_string_equal(b.data, first);
    ts_free(first);
    buf_release(&b);
}

/* ---- spec ---- */

static void test_spec_good(void **state)
{
    (void)state;
    static const struct {
        const char *spec, *canonical;
    } good[] = {
        {"", ""},
        {"  ", ""},
        {"typos", "typos:0.05"},
        {"typos:0.05,homoglyphs:0.02,jailbreak:roleplay,invalid_utf8:0.01",
         "typos:0.05,homoglyphs:0.02,jailbreak:roleplay,invalid_utf8:0.01"},
        {" typos:0.1@0.25 , hex@0.5 ", "typos:0.1@0.25,hex@0.5"},
        {"overlong:200000@0.01", "overlong:200000@0.01"},
        {"jailbreak:ignore_previous,base64,rot13,injection,truncate:0.3",
         "jailbreak:ignore_previous,base64,rot13,injection,truncate:0.3"},
        {"zero_width,full_width,no_punct,whitespace,random_case@0",
         "zero_width:0.05,full_width:0.1,no_punct:1,whitespace:0.1,random_case:0.5@0"},
        {"typos:1@1", "typos:1"},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct perturb_set set, again;
        char err[256] = "";
        if (perturb_set_parse(&set, good[i].spec, err, sizeof(err)) != 0)
            fail_msg("'%s': %s", good[i].spec, err);
        struct buf b;
        buf_init(&b, 4096);
        assert_int_equal(perturb_set_format(&set, &b), 0);
        assert_string_equal(buf_cstr(&b), good[i].canonical);
        assert_int_equal(perturb_set_parse(&again, buf_cstr(&b), err, sizeof(err)), 0);
        assert_int_equal(again.n, set.n);
        assert_memory_equal(again.v, set.v, set.n * sizeof(set.v[0]));
        buf_release(&b);
    }
    struct perturb_set set;
    char err[64];
    assert_int_equal(perturb_set_parse(&set, "overlong:5000@0.5", err, sizeof(err)), 0);
    assert_int_equal(set.v[0].kind, PERTURB_OVERLONG);
    assert_int_equal(set.v[0].tokens, 5000);
    assert_true(set.v[0].share == 0.5);
}

static void test_spec_bad(void **state)
{
    (void)state;
    static const struct {
        const char *spec, *msg;
    } bad[] = {
        {"typo", "unknown perturbation 'typo' (did you mean 'typos'?)"},
        {"homoglyph:0.1", "unknown perturbation 'homoglyph' (did you mean 'homoglyphs'?)"},
        {"leetspeak", "unknown perturbation 'leetspeak'"},
        {"typos:x", "typos: expected a rate in [0, 1], got 'x'"},
        {"typos:", "typos: expected a rate in [0, 1], got ''"},
        {"typos:1.5", "typos: expected a rate in [0, 1], got '1.5'"},
        {"typos:-0.1", "typos: expected a rate in [0, 1], got '-0.1'"},
        {"typos:nan", "typos: expected a rate in [0, 1], got 'nan'"},
        {"truncate:2", "truncate: expected a fraction in [0, 1], got '2'"},
        {"jailbreak:dan", "jailbreak: expected roleplay or ignore_previous, got 'dan'"},
        {"base64:1", "base64: takes no parameter, got '1'"},
        {"injection:x", "injection: takes no parameter, got 'x'"},
        {"overlong", "overlong: expected a token count, e.g. overlong:200000"},
        {"overlong:0", "overlong: expected a token count in [1, 10000000], got '0'"},
        {"overlong:-5", "overlong: expected a token count in [1, 10000000], got '-5'"},
        {"overlong:10000001", "overlong: expected a token count in [1, 10000000], got '10000001'"},
        {"overlong:12k", "overlong: expected a token count in [1, 10000000], got '12k'"},
        {"typos@2", "typos: expected a share of requests in [0, 1] after '@', got '2'"},
        {"hex@", "hex: expected a share of requests in [0, 1] after '@', got ''"},
        {"typos,,hex", "item 2 is empty"},
        {"typos,", "item 2 is empty"},
        {":0.5", "item 1 has no name"},
        {"typos,hex,typos:0.2", "typos: listed twice"},
        {"typos:0.000000000000000000000000000000000000000000000000000000000000000000000000000"
         "00000000000000000000000000000000000000000000000001",
         "item 1 is too long"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct perturb_set set;
        char err[256] = "";
        set.n = 7;
        int rc = perturb_set_parse(&set, bad[i].spec, err, sizeof(err));
        if (rc != TS_PARSE)
            fail_msg("'%s' was accepted", bad[i].spec);
        assert_string_equal(err, bad[i].msg);
        assert_int_equal(set.n, 0);
    }
    char big[PERTURB_SPEC_MAX + 2];
    memset(big, ' ', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    struct perturb_set set;
    char err[256];
    assert_int_equal(perturb_set_parse(&set, big, err, sizeof(err)), TS_PARSE);
    assert_string_equal(err, "spec too long (at most 4096 bytes)");
}

/* ---- pick ---- */

static void test_pick(void **state)
{
    (void)state;
    struct perturb_set set;
    char err[256];
    assert_int_equal(
        perturb_set_parse(&set, "typos@0.3,homoglyphs,hex@0,invalid_utf8@0.05", err, sizeof(err)),
        0);
    struct rng r;
    rng_seed(&r, 77);
    size_t count[4] = {0}, both = 0, n = 100000;
    for (size_t i = 0; i < n; i++) {
        uint32_t m = perturb_pick(&set, &r);
        assert_int_equal(m & ~0xfu, 0);
        for (int k = 0; k < 4; k++)
            count[k] += (m >> k) & 1;
        both += (m & 9) == 9;
    }
    /* binomial sds: 145 and 69 */
    assert_in_range(count[0], 29400, 30600);
    assert_int_equal(count[1], n);
    assert_int_equal(count[2], 0);
    assert_in_range(count[3], 4700, 5300);
    assert_in_range(both, 1300, 1700); /* independent: 0.015 */

    /* shares 0 and 1 consume no draw */
    struct rng r1, r2;
    rng_seed(&r1, 5);
    rng_seed(&r2, 5);
    assert_int_equal(perturb_set_parse(&set, "hex,rot13@0", err, sizeof(err)), 0);
    assert_int_equal(perturb_pick(&set, &r1), 1);
    assert_int_equal(rng_next_u64(&r1), rng_next_u64(&r2));

    assert_int_equal(perturb_set_parse(&set, "typos,hex,jailbreak", err, sizeof(err)), 0);
    struct buf b;
    buf_init(&b, 256);
    assert_int_equal(perturb_mask_names(&set, 0x5, &b), 0);
    assert_string_equal(buf_cstr(&b), "typos,jailbreak");
    buf_reset(&b);
    assert_int_equal(perturb_mask_names(&set, 0, &b), 0);
    assert_string_equal(buf_cstr(&b), "");
    buf_release(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_typos_exact),   cmocka_unit_test(test_typos_rate),
        cmocka_unit_test(test_homoglyphs),    cmocka_unit_test(test_zero_width),
        cmocka_unit_test(test_full_width),    cmocka_unit_test(test_no_punct),
        cmocka_unit_test(test_whitespace),    cmocka_unit_test(test_truncate),
        cmocka_unit_test(test_random_case),   cmocka_unit_test(test_jailbreak),
        cmocka_unit_test(test_base64_hex),    cmocka_unit_test(test_rot13),
        cmocka_unit_test(test_injection),     cmocka_unit_test(test_overlong),
        cmocka_unit_test(test_invalid_utf8),  cmocka_unit_test(test_all_valid_and_deterministic),
        cmocka_unit_test(test_invalid_input), cmocka_unit_test(test_caps_and_enomem),
        cmocka_unit_test(test_set_apply),     cmocka_unit_test(test_spec_good),
        cmocka_unit_test(test_spec_bad),      cmocka_unit_test(test_pick),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
