#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

/* h2o style: the static functions and salts are reachable. */
#include "../../src/workload/promptgen.c"
#include "llm/text.h"

/* ------------------------------------------------------------ cfg helpers */

static size_t count(const char *s)
{
    return tokcount_count(NULL, s, strlen(s));
}

static char *xdup(const char *s)
{
    char *d = ts_strdup(s);
    assert_non_null(d);
    return d;
}

/* Adds an intent with the NULL-terminated list of templates. */
static struct promptgen_intent *add_intent(struct promptgen_cfg *c, const char *name, double w, ...)
{
    c->intents = ts_realloc(c->intents, (c->nintents + 1) * sizeof(*c->intents));
    assert_non_null(c->intents);
    struct promptgen_intent *in = &c->intents[c->nintents++];
    memset(in, 0, sizeof(*in));
    in->name = xdup(name);
    in->weight = w;
    va_list ap;
    va_start(ap, w);
    const char *t;
    while ((t = va_arg(ap, const char *))) {
        in->templates = ts_realloc(in->templates, (in->ntemplates + 1) * sizeof(char *));
        assert_non_null(in->templates);
        in->templates[in->ntemplates++] = xdup(t);
    }
    va_end(ap);
    return in;
}

/* Adds a slot with the NULL-terminated list of values; weights NULL or one per value. */
static struct promptgen_slot *add_slot(struct promptgen_intent *in, const char *name,
                                       const double *weights, ...)
{
    in->slots = ts_realloc(in->slots, (in->nslots + 1) * sizeof(*in->slots));
    assert_non_null(in->slots);
    struct promptgen_slot *s = &in->slots[in->nslots++];
    memset(s, 0, sizeof(*s));
    s->name = xdup(name);
    va_list ap;
    va_start(ap, weights);
    const char *v;
    while ((v = va_arg(ap, const char *))) {
        s->values = ts_realloc(s->values, (s->n + 1) * sizeof(char *));
        assert_non_null(s->values);
        s->values[s->n++] = xdup(v);
    }
    va_end(ap);
    if (weights) {
        s->weights = ts_malloc(s->n * sizeof(double));
        assert_non_null(s->weights);
        memcpy(s->weights, weights, s->n * sizeof(double));
    }
    return s;
}

static void set_dist(struct dist *d, const char *spec)
{
    char err[256];
    assert_int_equal(dist_parse(d, spec, err, sizeof(err)), 0);
}

static void init_ok(struct promptgen *g, struct promptgen_cfg *c, const struct tokcount *tc)
{
    char err[512] = "";
    int rc = promptgen_init(g, c, tc, err, sizeof(err));
    if (rc)
        fail_msg("promptgen_init: %d %s", rc, err);
    assert_null(c->intents); /* moved */
    assert_int_equal(c->nintents, 0);
}

static void init_fails(struct promptgen_cfg *c, int want_rc, const char *want_msg)
{
    struct promptgen g;
    char err[512] = "";
    int rc = promptgen_init(&g, c, NULL, err, sizeof(err));
    if (rc != want_rc || strcmp(err, want_msg) != 0)
        fail_msg("promptgen_init: %d '%s', want %d '%s'", rc, err, want_rc, want_msg);
    /* everything was taken and released */
    assert_null(c->intents);
    assert_null(g.cfg.intents);
    assert_null(g.ic);
    promptgen_release(&g);
}

static void turn_ok(const struct promptgen *g, const struct tokcount *tc, uint64_t key,
                    struct promptgen_turn *t)
{
    int rc = promptgen_turn(g, tc, key, t);
    if (rc)
        fail_msg("promptgen_turn(%llu): %d", (unsigned long long)key, rc);
    assert_non_null(t->user);
    assert_int_equal(strlen(t->user), t->user_len);
    assert_int_equal(t->user_tokens, tokcount_count(tc, t->user, t->user_len));
    assert_true(t->output_tokens >= 1);
}

static bool starts_with(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

static bool ends_with(const char *s, size_t n, const char *p)
{
    size_t k = strlen(p);
    return n >= k && memcmp(s + n - k, p, k) == 0;
}

/* ------------------------------------------------------------- intent mix */

/*
 * 20,000 turns, intent weights 5:3:2. A share p over n draws has a standard
 * deviation sqrt(p(1-p)/n) <= 0.0035; the tolerance 0.015 is over 4 of them
 * (the seed is fixed, so the test is deterministic anyway; uniform picking
 * would be off by 0.17 and fail).
 */
static void test_intent_mix(void **state)
{
    (void)state;
    struct promptgen_cfg c = {0};
    c.seed = 42;
    static const double tier_w[] = {1, 0, 3};
    struct promptgen_intent *a = add_intent(&c, "support", 5, "Help with {{tier}} plan.",
                                            "My {{tier}} plan, again {{ tier }}.", NULL);
    add_slot(a, "tier", tier_w, "free", "never", "pro", NULL);
    add_intent(&c, "sales", 3, "Buy now.", NULL);
    add_intent(&c, "chat", 2, "Hello there.", NULL);
    struct promptgen g;
    init_ok(&g, &c, NULL);
    assert_int_equal(promptgen_nintents(&g), 3);
    assert_string_equal(promptgen_intent_name(&g, 1), "sales");
    assert_null(promptgen_intent_name(&g, 3));

    const int n = 20000;
    int per[3] = {0}, tier[3] = {0}, tpl[2] = {0};
    for (int k = 0; k < n; k++) {
        struct promptgen_turn t;
        turn_ok(&g, NULL, (uint64_t)k, &t);
        assert_true(t.intent < 3);
        per[t.intent]++;
        assert_int_equal(t.prefix, -1);
        assert_null(t.system);
        if (t.intent == 0) {
            tpl[t.template_index]++;
            int v = strstr(t.user, "free") ? 0 : strstr(t.user, "never") ? 1 : 2;
            tier[v]++;
            if (t.template_index == 1) {
                /* the same slot twice gets the same value */
                const char *name = v == 0 ? "free" : "pro";
                char want[64];
                snprintf(want, sizeof(want), "My %s plan, again %s.", name, name);
                assert_string_equal(t.user, want);
            }
        } else {
            assert_int_equal(t.template_index, 0);
        }
        promptgen_turn_release(&t);
    }
    assert_true(fabs(per[0] / (double)n - 0.5) < 0.015);
    assert_true(fabs(per[1] / (double)n - 0.3) < 0.015);
    assert_true(fabs(per[2] / (double)n - 0.2) < 0.015);
    /* slot weights 1:0:3 among ~10,000 turns: sd <= 0.0044, tolerance 0.02 */
    assert_int_equal(tier[1], 0);
    assert_true(fabs(tier[0] / (double)per[0] - 0.25) < 0.02);
    assert_true(fabs(tier[2] / (double)per[0] - 0.75) < 0.02);
    assert_true(fabs(tpl[0] / (double)per[0] - 0.5) < 0.02);
    promptgen_release(&g);
}

/* ---------------------------------------------------------- determinism */

static void rich_cfg(struct promptgen_cfg *c, uint64_t seed)
{
    memset(c, 0, sizeof(*c));
    c->seed = seed;
    c->system = xdup("You are helpful.");
    set_dist(&c->output, "uniform:10-500");
    c->prefix_pool = 4;
    set_dist(&c->prefix_tokens, "uniform:40-120");
    c->prefix_ratio = 0.5;
    struct promptgen_intent *a =
        add_intent(c, "qa", 1, "Question about {{topic}}: {{context}}\nWhat now?", NULL);
    add_slot(a, "topic", NULL, "caching", "batching", "routing", NULL);
    set_dist(&a->input, "uniform:20-200");
    a->has_input = true; /* before add_intent() moves the array */
    struct promptgen_intent *b = add_intent(c, "code", 1, "Fix my {{lang}} code.", NULL);
    add_slot(b, "lang", NULL, "C", "Go", "Rust", NULL);
    b->system = xdup("You write code.");
    set_dist(&b->output, "fixed:77");
    b->has_output = true;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_deterministic(void **state)
{
    (void)state;
    struct promptgen_cfg c1, c2, c3;
    rich_cfg(&c1, 7);
    rich_cfg(&c2, 7);
    rich_cfg(&c3, 8);
    struct promptgen g1, g2, g3;
    init_ok(&g1, &c1, NULL);
    init_ok(&g2, &c2, NULL);
    init_ok(&g3, &c3, NULL);
    enum { N = 200 };
    char *users[N];
    int same_as_other_seed = 0;
    for (uint64_t k = 0; k < N; k++) {
        struct promptgen_turn a, b, o;
        turn_ok(&g1, NULL, k, &a);
        turn_ok(&g2, NULL, k, &b);
        turn_ok(&g3, NULL, k, &o);
        assert_int_equal(a.intent, b.intent);
        assert_int_equal(a.template_index, b.template_index);
        assert_int_equal(a.prefix, b.prefix);
        assert_int_equal(a.user_tokens, b.user_tokens);
        assert_int_equal(a.output_tokens, b.output_tokens);
        assert_int_equal(a.user_len, b.user_len);
        assert_memory_equal(a.user, b.user, a.user_len);
        assert_int_equal(a.system_len, b.system_len);
        if (a.system)
            assert_memory_equal(a.system, b.system, a.system_len);
        else
            assert_null(b.system);
        if (a.intent == 1) {
            assert_int_equal(a.output_tokens, 77);
            assert_true(ends_with(a.system, a.system_len, "You write code."));
        } else {
            assert_true(a.output_tokens >= 10 && a.output_tokens <= 500);
            assert_true(ends_with(a.system, a.system_len, "You are helpful."));
            assert_true(a.user_tokens >= 20 && a.user_tokens <= 200);
        }
        same_as_other_seed += a.user_len == o.user_len && memcmp(a.user, o.user, a.user_len) == 0;
        users[k] = xdup(a.user);
        promptgen_turn_release(&a);
        promptgen_turn_release(&b);
        promptgen_turn_release(&o);
    }
    /* different keys differ: intent "code" has 3 texts, every "qa" turn is
     * padded to a random length from a random word */
    qsort(users, N, sizeof(users[0]), cmp_str);
    int distinct = 1, code = 0;
    for (int i = 1; i < N; i++)
        distinct += strcmp(users[i - 1], users[i]) != 0;
    for (int i = 0; i < N; i++) {
        code += starts_with(users[i], "Fix my");
        ts_free(users[i]);
    }
    assert_true(code > 50);
    assert_true(code < 150);
    assert_int_equal(distinct, N - code + 3);
    assert_true(same_as_other_seed < 60); /* another seed: other turns */
    promptgen_release(&g1);
    promptgen_release(&g2);
    promptgen_release(&g3);
}

/* ---------------------------------------------------------------- padding */

static void padded_cfg(struct promptgen_cfg *c, const char *tpl, const char *input)
{
    memset(c, 0, sizeof(*c));
    c->seed = 3;
    struct promptgen_intent *in = add_intent(c, "pad", 1, tpl, NULL);
    add_slot(in, "topic", NULL, "queues", NULL);
    if (input) {
        set_dist(&in->input, input);
        in->has_input = true;
    }
}

static void test_padding_exact(void **state)
{
    (void)state;
    static const unsigned ns[] = {7, 8, 17, 64, 301, 1000, 4096, 20000};
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
        char spec[32];
        snprintf(spec, sizeof(spec), "fixed:%u", ns[i]);
        struct promptgen_cfg c;
        struct promptgen g;
        /* the template alone counts 11 tokens */
        padded_cfg(&c, "Summarize {{topic}}: {{context}}\nAnswer briefly.", spec);
        init_ok(&g, &c, NULL);
        for (uint64_t k = 0; k < 20 && ns[i] > 11; k++) {
            struct promptgen_turn t;
            turn_ok(&g, NULL, k, &t);
            assert_int_equal(t.user_tokens, ns[i]);
            assert_int_equal(count(t.user), ns[i]);
            assert_true(starts_with(t.user, "Summarize queues: "));
            assert_true(ends_with(t.user, t.user_len, "\nAnswer briefly."));
            promptgen_turn_release(&t);
        }
        promptgen_release(&g);

        /* without {{context}}: appended after a blank line */
        padded_cfg(&c, "Explain {{topic}}.", spec);
        init_ok(&g, &c, NULL);
        for (uint64_t k = 0; k < 20; k++) {
            struct promptgen_turn t;
            turn_ok(&g, NULL, k, &t);
            assert_int_equal(count(t.user), ns[i]);
            assert_true(starts_with(t.user, "Explain queues.\n\n"));
            assert_true(t.user_len > strlen("Explain queues.\n\n"));
            promptgen_turn_release(&t);
        }
        promptgen_release(&g);
    }
}

static void test_padding_edges(void **state)
{
    (void)state;
    /* the template alone is longer than N: used as it is, never cut */
    const char *tpl = "This template is much longer than three tokens: {{topic}}{{context}}.";
    struct promptgen_cfg c;
    padded_cfg(&c, tpl, "fixed:3");
    struct promptgen g;
    init_ok(&g, &c, NULL);
    struct promptgen_turn t;
    turn_ok(&g, NULL, 1, &t);
    const char *want = "This template is much longer than three tokens: queues.";
    assert_string_equal(t.user, want);
    assert_int_equal(t.user_tokens, count(want));
    assert_true(t.user_tokens > 3);
    promptgen_turn_release(&t);
    promptgen_release(&g);

    /* no input distribution: {{context}} renders empty */
    padded_cfg(&c, "A{{context}}B {{topic}}", NULL);
    init_ok(&g, &c, NULL);
    turn_ok(&g, NULL, 1, &t);
    assert_string_equal(t.user, "AB queues");
    assert_int_equal(t.user_tokens, count("AB queues"));
    assert_int_equal(t.output_tokens, 1); /* cfg->output fixed:0 clamps to 1 */
    promptgen_turn_release(&t);
    promptgen_release(&g);

    /* exactly at N: no padding */
    padded_cfg(&c, "Explain {{topic}}.", "fixed:5"); /* Expla in _queue s . */
    init_ok(&g, &c, NULL);
    turn_ok(&g, NULL, 5, &t);
    assert_string_equal(t.user, "Explain queues.");
    assert_int_equal(t.user_tokens, 5);
    promptgen_turn_release(&t);
    promptgen_release(&g);
}

/* A counter of 2 bytes per token: counts of joined texts do not add up
 * (ceil), so padding needs the count-and-adjust loop. */
static size_t pair_count(const struct tokcount *tc, const char *s, size_t n)
{
    (void)tc;
    (void)s;
    return (n + 1) / 2;
}

static size_t pair_prefix(const struct tokcount *tc, const char *s, size_t n, size_t tokens)
{
    (void)tc;
    (void)s;
    return tokens * 2 < n ? tokens * 2 : n;
}

/* 3 bytes per token, but cuts only every 6 bytes: odd counts can be out of reach. */
static size_t coarse_count(const struct tokcount *tc, const char *s, size_t n)
{
    (void)tc;
    (void)s;
    return (n + 2) / 3;
}

static size_t coarse_prefix(const struct tokcount *tc, const char *s, size_t n, size_t tokens)
{
    (void)tc;
    (void)s;
    return tokens / 2 * 6 < n ? tokens / 2 * 6 : n;
}

static void test_padding_other_counters(void **state)
{
    (void)state;
    const struct tokcount pair = {pair_count, pair_prefix, NULL};
    const struct tokcount coarse = {coarse_count, coarse_prefix, NULL};
    struct promptgen_cfg c;
    struct promptgen g;
    struct promptgen_turn t;
    for (unsigned n = 5; n < 200; n += 13) {
        char spec[32];
        snprintf(spec, sizeof(spec), "fixed:%u", n);
        padded_cfg(&c, "Explain {{topic}}.", spec); /* 15 bytes: 8 pair tokens */
        init_ok(&g, &c, &pair);
        turn_ok(&g, &pair, n, &t);
        assert_int_equal(t.user_tokens, n < 8 ? 8 : n);
        promptgen_turn_release(&t);
        promptgen_release(&g);
    }
    /* "ab" + "\n\n" + 6m bytes counts 2m + 2: 9 is out of reach, 8 is the
     * closest below ("ab\n\n" and 18 bytes of padding) */
    padded_cfg(&c, "ab", "fixed:9");
    init_ok(&g, &c, &coarse);
    turn_ok(&g, &coarse, 0, &t);
    assert_int_equal(t.user_tokens, 8);
    assert_int_equal(t.user_len, 22);
    assert_true(starts_with(t.user, "ab\n\n"));
    promptgen_turn_release(&t);
    promptgen_release(&g);
}

/* Every start word of the corpus and many lengths give exact counts (the
 * cut happens inside a long window, where words and punctuation vary). */
static void test_pad_fill_every_start(void **state)
{
    (void)state;
    struct promptgen g;
    memset(&g, 0, sizeof(g));
    assert_int_equal(corpus_index(&g), 0);
    assert_true(g.nstarts > 500);
    struct pad_job j = {"Q: {{x}} ", 9, 3, "", 0};
    for (size_t s = 0; s < g.nstarts; s++) {
        uint32_t target = 10 + (uint32_t)(s * 7 % 300);
        char *out = NULL;
        size_t len = 0;
        uint32_t tok = 0;
        assert_int_equal(pad_fill(&g, NULL, &j, target, s, &out, &len, &tok), 0);
        assert_int_equal(tok, target);
        assert_int_equal(count(out), target);
        assert_true(starts_with(out, "Q: "));
        assert_true(ends_with(out, len, "{{x}} "));
        ts_free(out);
    }
    ts_free(g.starts);
}

/* -------------------------------------------------------- template errors */

static struct promptgen_intent *support_cfg(struct promptgen_cfg *c, const char *bad_tpl)
{
    memset(c, 0, sizeof(*c));
    struct promptgen_intent *in =
        add_intent(c, "support", 1, "My {{ product }} is {{tier}}.", bad_tpl, NULL);
    add_slot(in, "product", NULL, "router", NULL);
    add_slot(in, "tier", NULL, "gold", NULL);
    return in;
}

static void test_template_errors(void **state)
{
    (void)state;
    struct promptgen_cfg c;
    support_cfg(&c, "Why does my {{prodcut}} fail?");
    init_fails(&c, -EINVAL,
               "intent 'support': template 2: unknown placeholder '{{prodcut}}'; did you mean "
               "'product'?");
    support_cfg(&c, "Why does my {{ contxt }} fail?");
    init_fails(&c, -EINVAL,
               "intent 'support': template 2: unknown placeholder '{{contxt}}'; did you mean "
               "'context'?");
    support_cfg(&c, "Why {{zebra}}?");
    init_fails(&c, -EINVAL,
               "intent 'support': template 2: unknown placeholder '{{zebra}}' (not a slot of this "
               "intent)");
    support_cfg(&c, "Hello {{name");
    init_fails(&c, -EINVAL, "intent 'support': template 2: '{{' at byte 6 is not closed by '}}'");
    support_cfg(&c, "A {{tier}} and {{ }}");
    init_fails(&c, -EINVAL,
               "intent 'support': template 2: bad placeholder '{{ }}' at byte 15: a name is 1 to "
               "64 letters, digits, '_', '.' or '-'");
    support_cfg(&c, "{{context}} {{context}}");
    init_fails(&c, -EINVAL, "intent 'support': template 2: {{context}} appears more than once");
    support_cfg(&c, "");
    init_fails(&c, -EINVAL, "intent 'support': template 2 is empty");
    support_cfg(&c, "bad \xff byte");
    init_fails(&c, -EINVAL, "intent 'support': template 2 is not valid UTF-8 (byte 4)");

    /* a lone "}}" is text */
    support_cfg(&c, "x }} y {{tier}}}");
    struct promptgen g;
    init_ok(&g, &c, NULL);
    struct promptgen_turn t;
    for (uint64_t k = 0; k < 50; k++) {
        turn_ok(&g, NULL, k, &t);
        if (t.template_index == 1) {
            assert_string_equal(t.user, "x }} y gold}");
        } else {
            assert_string_equal(t.user, "My router is gold.");
        }
        promptgen_turn_release(&t);
    }
    promptgen_release(&g);
}

static void test_schema_errors(void **state)
{
    (void)state;
    struct promptgen_cfg c = {0};
    init_fails(&c, -EINVAL, "the prompt schema has no intent");

    struct promptgen_intent *in = support_cfg(&c, "x");
    in->weight = 0;
    init_fails(&c, -EINVAL, "intent 'support': the weight must be a finite number > 0");

    support_cfg(&c, "x");
    add_intent(&c, "support", 1, "y", NULL);
    init_fails(&c, -EINVAL, "intent 'support' is defined twice");

    in = support_cfg(&c, "x");
    add_slot(in, "tier", NULL, "a", NULL);
    init_fails(&c, -EINVAL, "intent 'support': slot 'tier' is defined twice");

    in = support_cfg(&c, "x");
    add_slot(in, "context", NULL, "a", NULL);
    init_fails(&c, -EINVAL, "intent 'support': slot name 'context' is reserved for the builtin");

    static const double zero[] = {0, 0};
    in = support_cfg(&c, "x");
    add_slot(in, "z", zero, "a", "b", NULL);
    init_fails(&c, -EINVAL,
               "intent 'support': slot 'z': the weights must not all be 0 (nor sum to infinity)");

    static const double neg[] = {1, -1};
    in = support_cfg(&c, "x");
    add_slot(in, "z", neg, "a", "b", NULL);
    init_fails(&c, -EINVAL, "intent 'support': slot 'z': weight 2 must be a finite number >= 0");

    in = support_cfg(&c, "x");
    add_slot(in, "empty", NULL, NULL);
    init_fails(&c, -EINVAL, "intent 'support': slot 'empty' has no value");

    support_cfg(&c, "x");
    c.prefix_ratio = 1.5;
    init_fails(&c, -EINVAL, "the prefix ratio must be a number from 0 to 1");

    support_cfg(&c, "x");
    c.prefix_pool = PROMPTGEN_MAX_PREFIX_POOL + 1;
    init_fails(&c, -EINVAL, "the prefix pool holds at most 100000 entries");
}

/* ---------------------------------------------------------------- prefixes */

static void prefix_cfg(struct promptgen_cfg *c, uint32_t pool, const char *len, double ratio)
{
    memset(c, 0, sizeof(*c));
    c->seed = 11;
    c->system = xdup("Be brief.");
    c->prefix_pool = pool;
    set_dist(&c->prefix_tokens, len);
    c->prefix_ratio = ratio;
    add_intent(c, "ask", 1, "Ask something.", NULL);
}

static void test_prefix_pool(void **state)
{
    (void)state;
    struct promptgen_cfg c;
    prefix_cfg(&c, 8, "uniform:50-400", 0.3);
    struct promptgen g;
    init_ok(&g, &c, NULL);
    assert_int_equal(promptgen_prefix_count(&g), 8);
    assert_null(promptgen_prefix_text(&g, 8, NULL));
    assert_int_equal(promptgen_prefix_tokens(&g, 8), 0);
    char first[8][16];
    bool lengths_differ = false;
    for (uint32_t k = 0; k < 8; k++) {
        size_t len = 0;
        const char *p = promptgen_prefix_text(&g, k, &len);
        assert_non_null(p);
        assert_int_equal(strlen(p), len);
        /* the drawn length, recomputed the documented way */
        struct rng r;
        rng_seed(&r, rng_mix64(11 ^ rng_mix64((uint64_t)k ^ POOL_SALT)));
        struct dist d;
        set_dist(&d, "uniform:50-400");
        uint64_t want = dist_sample_uint(&d, &r, 1, PROMPTGEN_MAX_PREFIX_TOKENS);
        assert_int_equal(promptgen_prefix_tokens(&g, k), want);
        assert_int_equal(count(p), want);
        lengths_differ |= want != promptgen_prefix_tokens(&g, 0);
        char header[48];
        snprintf(header, sizeof(header), "%u. Reference document:\n", k);
        assert_true(starts_with(p, header));
        /* entries differ from their first token on */
        size_t cut = tokcount_prefix(NULL, p, len, 1);
        assert_true(cut > 0 && cut < sizeof(first[k]));
        memcpy(first[k], p, cut);
        first[k][cut] = '\0';
        for (uint32_t i = 0; i < k; i++)
            assert_string_not_equal(first[i], first[k]);
    }
    assert_true(lengths_differ);

    /* ratio 0.3 over 10,000 turns: sd 0.0046, tolerance 0.02; every entry
     * used about 3000/8 times (sd 18, at least 250) */
    int with = 0, used[8] = {0};
    for (uint64_t key = 0; key < 10000; key++) {
        struct promptgen_turn t;
        turn_ok(&g, NULL, key, &t);
        if (t.prefix < 0) {
            assert_string_equal(t.system, "Be brief.");
            promptgen_turn_release(&t);
            continue;
        }
        assert_true(t.prefix < 8);
        with++;
        used[t.prefix]++;
        size_t plen = 0;
        const char *p = promptgen_prefix_text(&g, (uint32_t)t.prefix, &plen);
        assert_int_equal(t.system_len, plen + 2 + strlen("Be brief."));
        assert_memory_equal(t.system, p, plen);
        assert_string_equal(t.system + plen, "\n\nBe brief.");
        promptgen_turn_release(&t);
    }
    assert_true(fabs(with / 10000.0 - 0.3) < 0.02);
    for (int k = 0; k < 8; k++)
        assert_true(used[k] > 250);
    promptgen_release(&g);
}

static void test_prefix_fixed_and_ratio_bounds(void **state)
{
    (void)state;
    struct promptgen_cfg c;
    struct promptgen g;
    prefix_cfg(&c, 30, "fixed:1000", 1.0);
    ts_free(c.system);
    c.system = NULL; /* system = the prefix alone */
    init_ok(&g, &c, NULL);
    for (uint32_t k = 0; k < 30; k++) {
        assert_int_equal(promptgen_prefix_tokens(&g, k), 1000);
        assert_int_equal(count(promptgen_prefix_text(&g, k, NULL)), 1000);
    }
    for (uint64_t key = 0; key < 300; key++) {
        struct promptgen_turn t;
        turn_ok(&g, NULL, key, &t);
        assert_true(t.prefix >= 0);
        assert_string_equal(t.system, promptgen_prefix_text(&g, (uint32_t)t.prefix, NULL));
        promptgen_turn_release(&t);
    }
    promptgen_release(&g);

    /* ratio 0: never; an entry shorter than its header keeps the header */
    prefix_cfg(&c, 2, "fixed:2", 0.0);
    init_ok(&g, &c, NULL);
    assert_string_equal(promptgen_prefix_text(&g, 1, NULL), "1. Reference document:\n");
    assert_int_equal(promptgen_prefix_tokens(&g, 1), count("1. Reference document:\n"));
    for (uint64_t key = 0; key < 300; key++) {
        struct promptgen_turn t;
        turn_ok(&g, NULL, key, &t);
        assert_int_equal(t.prefix, -1);
        promptgen_turn_release(&t);
    }
    promptgen_release(&g);
}

/* ---------------------------------------------------------------- assembly */

/* The cookbook count of a written messages array, recounted independently. */
static size_t recount(const char *json)
{
    json_error_t je;
    json_t *a = json_loads(json, 0, &je);
    if (!a)
        fail_msg("not JSON: %s: %s", je.text, json);
    size_t n = 3, i;
    json_t *m;
    json_array_foreach(a, i, m)
    {
        const char *role = json_string_value(json_object_get(m, "role"));
        const char *content = json_string_value(json_object_get(m, "content"));
        assert_non_null(role);
        assert_non_null(content);
        n += 3 + count(role) + count(content);
    }
    json_decref(a);
    return n;
}

/* Content of message i of a written array (a static copy). */
static const char *content_of(const char *json, size_t i)
{
    static char out[4096];
    json_t *a = json_loads(json, 0, NULL);
    assert_non_null(a);
    const char *c = json_string_value(json_object_get(json_array_get(a, i), "content"));
    assert_non_null(c);
    snprintf(out, sizeof(out), "%s", c);
    json_decref(a);
    return out;
}

static size_t nmsgs(const char *json)
{
    json_t *a = json_loads(json, 0, NULL);
    assert_non_null(a);
    size_t n = json_array_size(a);
    json_decref(a);
    return n;
}

#define S(x) x, strlen(x)

static void test_assemble_exact(void **state)
{
    (void)state;
    const struct chat_msg h[] = {{"user", S("Hi")}, {"assistant", S("Hello!")}};
    struct assemble_cfg cfg = {0, 0, 0};
    struct buf out;
    buf_init(&out, 1 << 20);
    assert_int_equal(buf_append_str(&out, "X"), 0); /* appends */
    struct assemble_result res;
    assert_int_equal(chat_assemble(NULL, S("Be brief."), h, 2, S("Paris is in \"France\"."),
                                   S("Where is Paris?"), &cfg, &out, &res),
                     0);
    assert_string_equal(out.data,
                        "X[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                        "{\"role\":\"user\",\"content\":\"Hi\"},"
                        "{\"role\":\"assistant\",\"content\":\"Hello!\"},"
                        "{\"role\":\"user\",\"content\":\"Context:\\nParis is in \\\"France\\\"."
                        "\\n\\nWhere is Paris?\"}]");
    /* by hand: reply 3; system 3+2+3; Hi 3+1+1; Hello! 3+2+2; the user message
     * 3+1+ Context : \n Paris _is _in _" France " . \n\n Where _is _Paris ? (18) */
    assert_int_equal(res.prompt_tokens, 3 + 8 + 5 + 7 + 22);
    assert_int_equal(res.prompt_tokens, recount(out.data + 1));
    assert_int_equal(res.dropped_messages, 0);
    assert_int_equal(res.context_cut_tokens, 0);
    assert_false(res.over);

    /* a budget that just fits: nothing trimmed either */
    buf_reset(&out);
    cfg = (struct assemble_cfg){45 + 10 + 100, 10, 100};
    assert_int_equal(chat_assemble(NULL, S("Be brief."), h, 2, S("Paris is in \"France\"."),
                                   S("Where is Paris?"), &cfg, &out, &res),
                     0);
    assert_int_equal(res.prompt_tokens, 45);
    assert_int_equal(res.dropped_messages, 0);
    assert_false(res.over);

    /* no system, no context, no history */
    buf_reset(&out);
    assert_int_equal(chat_assemble(NULL, NULL, 0, NULL, 0, NULL, 0, S("Hi"), &cfg, &out, &res), 0);
    assert_string_equal(out.data, "[{\"role\":\"user\",\"content\":\"Hi\"}]");
    assert_int_equal(res.prompt_tokens, 3 + 3 + 1 + 1);
    buf_release(&out);
}

/* A chat template replaces the per-message overhead: each message costs its
 * rendered text, the request its bos + reply; trimming uses those costs. */
static void test_assemble_template(void **state)
{
    (void)state;
    const struct chat_template tmpl = {"<s>{role}: {content}</s>\n", "<s>assistant: ", "[BOS]"};
    struct chat_msg hist[] = {{"user", "first question here", 19}, {"assistant", "an answer", 9}};
    struct buf out;
    buf_init(&out, 1 << 20);
    struct assemble_cfg cfg = {.tmpl = &tmpl};
    struct assemble_result res;
    assert_int_equal(
        chat_assemble(NULL, "Be brief.", 9, hist, 2, NULL, 0, "And now?", 8, &cfg, &out, &res), 0);
    const char *parts[] = {"[BOS]",
                           "<s>assistant: ",
                           "<s>system: Be brief.</s>\n",
                           "<s>user: first question here</s>\n",
                           "<s>assistant: an answer</s>\n",
                           "<s>user: And now?</s>\n"};
    size_t want = 0;
    for (size_t i = 0; i < 6; i++)
        want += text_count_tokens(parts[i], strlen(parts[i]));
    assert_int_equal(res.prompt_tokens, want);
    /* a budget one token short of it drops the history pair */
    size_t hist_cost = text_count_tokens(parts[3], strlen(parts[3])) +
                       text_count_tokens(parts[4], strlen(parts[4]));
    buf_reset(&out);
    cfg.context_tokens = (uint32_t)want - 1;
    assert_int_equal(
        chat_assemble(NULL, "Be brief.", 9, hist, 2, NULL, 0, "And now?", 8, &cfg, &out, &res), 0);
    assert_int_equal(res.dropped_messages, 2);
    assert_int_equal(res.prompt_tokens, want - hist_cost);
    assert_false(res.over);
    /* without the template: the cookbook overhead, which differs */
    buf_reset(&out);
    cfg = (struct assemble_cfg){0};
    assert_int_equal(
        chat_assemble(NULL, "Be brief.", 9, hist, 2, NULL, 0, "And now?", 8, &cfg, &out, &res), 0);
    assert_int_not_equal(res.prompt_tokens, want);
    buf_release(&out);
}

static void test_assemble_trim_history(void **state)
{
    (void)state;
    const struct chat_msg h[] = {
        {"user", S("First question about queues?")},
        {"assistant", S("A first answer that is fairly long.")},
        {"user", S("Second question?")},
        {"assistant", S("Second answer.")},
        {"user", S("Third question?")},
        {"assistant", S("Third answer, the last one.")},
    };
    size_t cost[6];
    for (int i = 0; i < 6; i++)
        cost[i] = 3 + count(h[i].role) + count(h[i].content);
    struct assemble_cfg cfg = {0, 5, 50};
    struct buf out;
    buf_init(&out, 1 << 20);
    struct assemble_result res;
    assert_int_equal(
        chat_assemble(NULL, S("System prompt."), h, 6, NULL, 0, S("Now?"), &cfg, &out, &res), 0);
    uint32_t full = res.prompt_tokens;
    assert_int_equal(full, recount(out.data));
    assert_int_equal(nmsgs(out.data), 8);

    /* budget = full - first pair: exactly the oldest pair goes */
    buf_reset(&out);
    cfg.context_tokens = (uint32_t)(full - cost[0] - cost[1] + 5 + 50);
    assert_int_equal(
        chat_assemble(NULL, S("System prompt."), h, 6, NULL, 0, S("Now?"), &cfg, &out, &res), 0);
    assert_int_equal(res.dropped_messages, 2);
    assert_int_equal(res.prompt_tokens, full - cost[0] - cost[1]);
    assert_int_equal(res.prompt_tokens, recount(out.data));
    assert_false(res.over);
    assert_int_equal(nmsgs(out.data), 6);
    assert_string_equal(content_of(out.data, 0), "System prompt.");
    assert_string_equal(content_of(out.data, 1), "Second question?");
    assert_string_equal(content_of(out.data, 5), "Now?");
    assert_null(strstr(out.data, "First"));

    /* one token less: two pairs go, never half a pair */
    buf_reset(&out);
    cfg.context_tokens--;
    assert_int_equal(
        chat_assemble(NULL, S("System prompt."), h, 6, NULL, 0, S("Now?"), &cfg, &out, &res), 0);
    assert_int_equal(res.dropped_messages, 4);
    assert_int_equal(res.prompt_tokens, full - cost[0] - cost[1] - cost[2] - cost[3]);
    assert_int_equal(nmsgs(out.data), 4);
    assert_string_equal(content_of(out.data, 1), "Third question?");
    assert_false(res.over);

    /* a history that starts with an answer and has a tool message: units are
     * [assistant], [user, assistant, tool], [user, assistant] */
    const struct chat_msg h2[] = {
        {"assistant", S("Welcome.")},    {"user", S("Call the tool.")},
        {"assistant", S("Calling it.")}, {"tool", S("{\"ok\":true}")},
        {"user", S("And now?")},         {"assistant", S("Done.")},
    };
    buf_reset(&out);
    cfg.context_tokens = 1000;
    assert_int_equal(chat_assemble(NULL, NULL, 0, h2, 6, NULL, 0, S("Bye."), &cfg, &out, &res), 0);
    full = res.prompt_tokens;
    size_t c0 = 3 + count("assistant") + count("Welcome.");
    buf_reset(&out);
    cfg.context_tokens = (uint32_t)(full - c0 + 55);
    assert_int_equal(chat_assemble(NULL, NULL, 0, h2, 6, NULL, 0, S("Bye."), &cfg, &out, &res), 0);
    assert_int_equal(res.dropped_messages, 1);
    buf_reset(&out);
    cfg.context_tokens--;
    assert_int_equal(chat_assemble(NULL, NULL, 0, h2, 6, NULL, 0, S("Bye."), &cfg, &out, &res), 0);
    assert_int_equal(res.dropped_messages, 4);
    assert_int_equal(nmsgs(out.data), 3);
    assert_string_equal(content_of(out.data, 0), "And now?");
    assert_int_equal(res.prompt_tokens, recount(out.data));
    buf_release(&out);
}

static void test_assemble_cut_context(void **state)
{
    (void)state;
    const char *ctx = "Passage one says the cache holds recent tokens. Passage two says the "
                      "batcher groups requests by length. Passage three says the router picks "
                      "the least loaded replica.";
    const char *user = "Which passage talks about routing?";
    const struct chat_msg h[] = {{"user", S("Earlier question?")},
                                 {"assistant", S("Earlier answer.")}};
    struct assemble_cfg cfg = {0, 0, 0};
    struct buf out;
    buf_init(&out, 1 << 20);
    struct assemble_result res;
    assert_int_equal(chat_assemble(NULL, S("Sys."), h, 2, S(ctx), S(user), &cfg, &out, &res), 0);
    uint32_t full = res.prompt_tokens;
    size_t hist = 3 + count("user") + count("Earlier question?") + 3 + count("assistant") +
                  count("Earlier answer.");

    /* 10 tokens over after dropping the history: the context loses its end */
    buf_reset(&out);
    cfg.context_tokens = (uint32_t)(full - hist - 10);
    assert_int_equal(chat_assemble(NULL, S("Sys."), h, 2, S(ctx), S(user), &cfg, &out, &res), 0);
    assert_int_equal(res.dropped_messages, 2);
    assert_int_equal(res.prompt_tokens, full - hist - 10);
    assert_int_equal(res.prompt_tokens, recount(out.data));
    assert_int_equal(res.context_cut_tokens, 10);
    assert_false(res.over);
    assert_int_equal(nmsgs(out.data), 2);
    assert_string_equal(content_of(out.data, 0), "Sys.");
    const char *u = content_of(out.data, 1);
    assert_true(starts_with(u, "Context:\nPassage one says"));
    assert_true(ends_with(u, strlen(u), "\n\nWhich passage talks about routing?"));
    size_t kept = strlen(u) - strlen("Context:\n") - strlen("\n\n") - strlen(user);
    assert_true(kept < strlen(ctx));
    assert_memory_equal(u + strlen("Context:\n"), ctx, kept);
    assert_int_equal(count(ctx) - tokcount_count(NULL, ctx, kept), 10);

    /* far too small: everything trimmable goes, system and user stay, over */
    buf_reset(&out);
    cfg = (struct assemble_cfg){20, 5, 10};
    assert_int_equal(chat_assemble(NULL, S("Sys."), h, 2, S(ctx), S(user), &cfg, &out, &res), 0);
    assert_true(res.over);
    assert_int_equal(res.dropped_messages, 2);
    assert_int_equal(res.context_cut_tokens, count(ctx));
    assert_int_equal(nmsgs(out.data), 2);
    assert_string_equal(content_of(out.data, 0), "Sys.");
    assert_string_equal(content_of(out.data, 1), user);
    assert_int_equal(res.prompt_tokens, 3 + (3 + 2 + count("Sys.")) + (3 + 1 + count(user)));
    assert_int_equal(res.prompt_tokens, recount(out.data));

    /* margin + output above the window: budget 0 */
    buf_reset(&out);
    cfg = (struct assemble_cfg){100, 60, 60};
    assert_int_equal(chat_assemble(NULL, S("Sys."), h, 2, S(ctx), S(user), &cfg, &out, &res), 0);
    assert_true(res.over);
    assert_int_equal(nmsgs(out.data), 2);
    buf_release(&out);
}

static void test_assemble_errors(void **state)
{
    (void)state;
    struct assemble_cfg cfg = {0, 0, 0};
    struct buf out;
    buf_init(&out, 40);
    assert_int_equal(buf_append_str(&out, "keep"), 0);
    struct assemble_result res;
    assert_int_equal(chat_assemble(NULL, S("A system prompt that is long."), NULL, 0, NULL, 0,
                                   S("And a user message."), &cfg, &out, &res),
                     TS_TOOBIG);
    assert_string_equal(buf_cstr(&out), "keep");
    assert_int_equal(res.prompt_tokens, 0);
    assert_int_equal(
        chat_assemble(NULL, NULL, 0, NULL, 0, NULL, 0, S("bad \xc3 utf8"), &cfg, &out, &res),
        -EINVAL);
    assert_string_equal(buf_cstr(&out), "keep");
    const struct chat_msg h[] = {{NULL, S("x")}};
    assert_int_equal(chat_assemble(NULL, NULL, 0, h, 1, NULL, 0, S("x"), &cfg, &out, &res),
                     -EINVAL);
    buf_release(&out);
}

/* ------------------------------------------------------------ slot files */

static char tmpdir[64];

static const char *write_file(const char *name, const char *data, size_t len)
{
    static char path[128];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    return path;
}

static void load_fails(const char *name, const char *data, size_t len, int want_rc,
                       const char *want_tail)
{
    const char *path = write_file(name, data, len);
    struct promptgen_slot s = {0};
    char err[256] = "", want[256];
    snprintf(want, sizeof(want), "%s%s", path, want_tail);
    int rc = promptgen_slot_load_file(&s, path, err, sizeof(err));
    if (rc != want_rc || strcmp(err, want) != 0)
        fail_msg("%s: %d '%s', want %d '%s'", name, rc, err, want_rc, want);
    assert_null(s.values);
    assert_null(s.weights);
    assert_int_equal(s.n, 0);
}

static void test_slot_file(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_promptgen.XXXXXX");
    assert_non_null(mkdtemp(tmpdir));

    const char *data = "# products\n"
                       "\n"
                       "router\t5\n"
                       "modem\n"
                       "  \t \n"
                       "   # indented comment\n"
                       "switch\t 0.5 \r\n"
                       "plain value, with spaces\r\n"
                       "tab\tinside\t0\n"
                       "last line";
    const char *path = write_file("w.txt", data, strlen(data));
    struct promptgen_slot s = {0};
    char err[256] = "";
    assert_int_equal(promptgen_slot_load_file(&s, path, err, sizeof(err)), 0);
    assert_int_equal(s.n, 6);
    assert_string_equal(s.values[0], "router");
    assert_string_equal(s.values[1], "modem");
    assert_string_equal(s.values[2], "switch");
    assert_string_equal(s.values[3], "plain value, with spaces");
    assert_string_equal(s.values[4], "tab\tinside");
    assert_string_equal(s.values[5], "last line");
    assert_non_null(s.weights);
    assert_true(s.weights[0] == 5 && s.weights[1] == 1 && s.weights[2] == 0.5 &&
                s.weights[3] == 1 && s.weights[4] == 0 && s.weights[5] == 1);
    assert_int_equal(promptgen_slot_load_file(&s, path, err, sizeof(err)), -EINVAL);

    /* the loaded slot drives a generator: weights 5:1:0.5:1:0:1 */
    struct promptgen_cfg c = {0};
    struct promptgen_intent *in = add_intent(&c, "x", 1, "{{thing}}", NULL);
    s.name = xdup("thing");
    in->slots = ts_malloc(sizeof(*in->slots));
    assert_non_null(in->slots);
    in->slots[0] = s;
    in->nslots = 1;
    struct promptgen g;
    init_ok(&g, &c, NULL);
    int router = 0, zero = 0;
    for (uint64_t k = 0; k < 8500; k++) {
        struct promptgen_turn t;
        turn_ok(&g, NULL, k, &t);
        router += strcmp(t.user, "router") == 0;
        zero += strcmp(t.user, "tab\tinside") == 0;
        promptgen_turn_release(&t);
    }
    /* share 5/8.5: sd 0.0053, tolerance 0.025 */
    assert_true(fabs(router / 8500.0 - 5 / 8.5) < 0.025);
    assert_int_equal(zero, 0);
    promptgen_release(&g);

    /* no weights at all: uniform, weights NULL */
    path = write_file("u.txt", "a\nb\n", 4);
    memset(&s, 0, sizeof(s));
    assert_int_equal(promptgen_slot_load_file(&s, path, err, sizeof(err)), 0);
    assert_int_equal(s.n, 2);
    assert_null(s.weights);
    promptgen_slot_release(&s);

    /* a line of exactly the limit is fine */
    char *big = ts_malloc(PROMPTGEN_MAX_VALUE + 8);
    assert_non_null(big);
    memset(big, 'x', PROMPTGEN_MAX_VALUE + 8);
    big[PROMPTGEN_MAX_VALUE] = '\n';
    path = write_file("max.txt", big, PROMPTGEN_MAX_VALUE + 1);
    memset(&s, 0, sizeof(s));
    assert_int_equal(promptgen_slot_load_file(&s, path, err, sizeof(err)), 0);
    assert_int_equal(strlen(s.values[0]), PROMPTGEN_MAX_VALUE);
    promptgen_slot_release(&s);
    memcpy(big, "ok\n", 3);
    big[PROMPTGEN_MAX_VALUE] = 'x';
    big[PROMPTGEN_MAX_VALUE + 4] = '\n';
    load_fails("long.txt", big, PROMPTGEN_MAX_VALUE + 5, TS_TOOBIG,
               ":2: line longer than 65536 bytes");
    ts_free(big);

    load_fails("bad.txt", "a\nb\nc\tabc\n", 10, TS_PARSE,
               ":3: bad weight 'abc' (a number >= 0 after the tab)");
    load_fails("neg.txt", "a\t-1\n", 5, TS_PARSE,
               ":1: bad weight '-1' (a number >= 0 after the tab)");
    load_fails("inf.txt", "# x\na\tinf\n", 10, TS_PARSE,
               ":2: bad weight 'inf' (a number >= 0 after the tab)");
    load_fails("empty_w.txt", "a\t\n", 3, TS_PARSE,
               ":1: bad weight '' (a number >= 0 after the tab)");
    load_fails("empty_v.txt", "a\n\t3\n", 5, TS_PARSE, ":2: empty value before the tab");
    load_fails("utf8.txt", "a\nb\xff\n", 5, TS_PARSE, ":2: not valid UTF-8 text (column 2)");
    load_fails("nul.txt", "a\0b\n", 4, TS_PARSE, ":1: not valid UTF-8 text (column 2)");
    load_fails("none.txt", "# nothing\n\n", 11, TS_PARSE, ": no values");
    load_fails("zero.txt", "a\t0\nb\t0\n", 8, TS_PARSE,
               ": the weights must not all be 0 (nor sum to infinity)");

    memset(&s, 0, sizeof(s));
    char missing[128];
    snprintf(missing, sizeof(missing), "%s/missing.txt", tmpdir);
    assert_int_equal(promptgen_slot_load_file(&s, missing, err, sizeof(err)), -ENOENT);
    char want[256];
    snprintf(want, sizeof(want), "%s: No such file or directory", missing);
    assert_string_equal(err, want);

    static const char *names[] = {"w.txt",   "u.txt",    "max.txt",     "long.txt",    "bad.txt",
                                  "neg.txt", "inf.txt",  "empty_w.txt", "empty_v.txt", "utf8.txt",
                                  "nul.txt", "none.txt", "zero.txt"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char p[128];
        snprintf(p, sizeof(p), "%s/%s", tmpdir, names[i]);
        assert_int_equal(unlink(p), 0);
    }
    assert_int_equal(rmdir(tmpdir), 0);
}

/* ---------------------------------------------------------------- threads */

enum { THREAD_KEYS = 300 };

struct thread_job {
    const struct promptgen *g;
    uint64_t hash[THREAD_KEYS];
    int rc;
};

static uint64_t turn_hash(const struct promptgen_turn *t)
{
    uint64_t h = text_hash(t->user, t->user_len, t->output_tokens);
    if (t->system)
        h = text_hash(t->system, t->system_len, h);
    return h ^ ((uint64_t)t->intent << 32) ^ (uint64_t)(uint32_t)t->prefix;
}

static void *thread_main(void *arg)
{
    struct thread_job *j = arg;
    for (uint64_t k = 0; k < THREAD_KEYS; k++) {
        struct promptgen_turn t;
        if ((j->rc = promptgen_turn(j->g, NULL, k, &t)))
            return NULL;
        j->hash[k] = turn_hash(&t);
        promptgen_turn_release(&t);
    }
    return NULL;
}

/* Threads share one generator and get the turns one thread gets. */
static void test_threads(void **state)
{
    (void)state;
    struct promptgen_cfg c;
    rich_cfg(&c, 99);
    struct promptgen g;
    init_ok(&g, &c, NULL);
    static struct thread_job jobs[5];
    for (int i = 0; i < 5; i++)
        jobs[i].g = &g;
    thread_main(&jobs[4]);
    assert_int_equal(jobs[4].rc, 0);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, thread_main, &jobs[i]), 0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(jobs[i].rc, 0);
        assert_memory_equal(jobs[i].hash, jobs[4].hash, sizeof(jobs[4].hash));
    }
    promptgen_release(&g);
}

/* ----------------------------------------------------- allocation failure */

/* Fails the Nth allocation of init, a turn and an assembly until each
 * succeeds: every failure is -ENOMEM and nothing leaks (ASan checks). */
static void test_alloc_failures(void **state)
{
    (void)state;
    bool done = false;
    for (long n = 0; !done && n < 10000; n++) {
        struct promptgen_cfg c;
        rich_cfg(&c, 5);
        struct promptgen g;
        ts_alloc_fail_after(n);
        int rc = promptgen_init(&g, &c, NULL, NULL, 0);
        ts_alloc_fail_after(-1);
        assert_null(c.intents);
        if (rc) {
            assert_int_equal(rc, -ENOMEM);
            continue;
        }
        done = true;
        for (long m = 0; m < 10000; m++) {
            struct promptgen_turn t;
            ts_alloc_fail_after(m);
            rc = promptgen_turn(&g, NULL, 3, &t);
            ts_alloc_fail_after(-1);
            if (rc == 0) {
                promptgen_turn_release(&t);
                break;
            }
            assert_int_equal(rc, -ENOMEM);
            assert_null(t.user);
            assert_null(t.system);
        }
        promptgen_release(&g);
    }
    assert_true(done);
    const struct chat_msg h[] = {{"user", S("Hi")}, {"assistant", S("Hello!")}};
    struct assemble_cfg cfg = {30, 0, 0};
    for (long m = 0; m < 1000; m++) {
        struct buf out;
        buf_init(&out, 1 << 20);
        struct assemble_result res;
        ts_alloc_fail_after(m);
        int rc = chat_assemble(NULL, S("Sys."), h, 2, S("Some context text here."), S("Q?"), &cfg,
                               &out, &res);
        ts_alloc_fail_after(-1);
        buf_release(&out);
        if (rc == 0)
            break;
        assert_int_equal(rc, -ENOMEM);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_intent_mix),
        cmocka_unit_test(test_assemble_template),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_padding_exact),
        cmocka_unit_test(test_padding_edges),
        cmocka_unit_test(test_padding_other_counters),
        cmocka_unit_test(test_pad_fill_every_start),
        cmocka_unit_test(test_template_errors),
        cmocka_unit_test(test_schema_errors),
        cmocka_unit_test(test_prefix_pool),
        cmocka_unit_test(test_prefix_fixed_and_ratio_bounds),
        cmocka_unit_test(test_assemble_exact),
        cmocka_unit_test(test_assemble_trim_history),
        cmocka_unit_test(test_assemble_cut_context),
        cmocka_unit_test(test_assemble_errors),
        cmocka_unit_test(test_slot_file),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
