/*
 * Fuzzes the prompt generator (workload/promptgen.h): slot files, schemas,
 * generated turns and chat_assemble().
 *
 * Input: 16 bytes of knobs, then parts separated by NUL bytes:
 *   templates (intents split by 0x1e, up to 3; templates by 0x1f, up to 4),
 *   system prompt, values of slot "a" (one a line), content of the slot file
 *   of slot "b", chat history (messages split by 0x1e, the first byte of each
 *   picks the role), retrieved context, user text.
 * Knobs: input tokens (fixed:N, 0 = none), prefix pool and entry length,
 * prefix ratio, seed, flags, and the context window of chat_assemble.
 *
 * Checks:
 *  - the slot file parses exactly as a small model of its format says;
 *  - promptgen_init() accepts only valid UTF-8;
 *  - pool entries start with their header and count what prefix_tokens says;
 *  - every turn: same key -> same bytes; user text valid UTF-8 and
 *    user_tokens == tokcount_count(NULL, user); output, prefix and system
 *    as documented; with an input length N, the user text is the unpadded
 *    render (a generator without input gives it: the draws before N are the
 *    same) with one insertion, counting at most N unless the render alone
 *    counts N or more, in which case it is the render;
 *  - chat_assemble(): JSON array with system first, a suffix of the history
 *    starting with a user message when something was dropped, the user
 *    message last ("Context:\n" + a prefix of the context + "\n\n" + user, or
 *    user), prompt_tokens equal to the documented count, `over` exactly when
 *    above the budget, and out untouched on error.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/utf8.h"
#include "llm/tokcount.h"
#include "workload/promptgen.h"
#include "workload/prompts.h"

#define INPUT_MAX   (96 * 1024)
#define NKNOBS      16
#define MAX_PARTS   7
#define MAX_INTENTS 3
#define MAX_TPLS    4
#define MAX_VALUES  32
#define MAX_HISTORY 24
#define NKEYS       20
#define OUT_CAP     (4u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int verbose = -1; /* FUZZ_VERBOSE=1: print what was accepted and rejected */

static bool is_verbose(void)
{
    if (verbose < 0)
        verbose = getenv("FUZZ_VERBOSE") != NULL;
    return verbose;
}

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "check failed at line %d: %s\n", __LINE__, #c);                        \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

struct span {
    const char *s;
    size_t n;
};

struct knobs {
    uint32_t input;         /* fixed input tokens, 0: no input distribution */
    uint32_t pool;          /* prefix pool entries */
    uint32_t prefix_tokens; /* fixed length of each entry */
    double ratio;
    uint64_t seed;
    uint8_t flags;
    uint32_t context_tokens, margin, output_tokens; /* chat_assemble */
    uint32_t output;                                /* fixed max_tokens of the schema */
};

enum {
    F_SYSTEM = 1 << 0,        /* a schema system prompt */
    F_WEIGHTS = 1 << 1,       /* slot "a" has weights */
    F_SLOT_FILE = 1 << 2,     /* intents get slot "b" from the file */
    F_INTENT_SYSTEM = 1 << 3, /* the last intent has its own system prompt */
    F_CHAT_SYSTEM = 1 << 4,   /* chat_assemble gets the system prompt */
    F_CHAT_CONTEXT = 1 << 5,  /* chat_assemble gets the context */
    F_INTENT_OUTPUT = 1 << 6, /* intents have their own output distribution */
};

static bool valid(const char *s, size_t n)
{
    return utf8_invalid_at(s, n) == n;
}

static bool has_prefix(const char *s, size_t n, const char *p, size_t pn)
{
    return n >= pn && memcmp(s, p, pn) == 0;
}

static bool has_suffix(const char *s, size_t n, const char *p, size_t pn)
{
    return n >= pn && memcmp(s + n - pn, p, pn) == 0;
}

static size_t split(struct span in, char sep, struct span *out, size_t max)
{
    size_t n = 0;
    const char *p = in.s, *end = in.s + in.n;
    while (n < max) {
        const char *q = memchr(p, sep, (size_t)(end - p));
        if (!q || n == max - 1) {
            out[n++] = (struct span){p, (size_t)(end - p)};
            break;
        }
        out[n++] = (struct span){p, (size_t)(q - p)};
        p = q + 1;
    }
    return n;
}

static char *dup_span(struct span s)
{
    char *d = ts_strndup(s.s, s.n);
    CHECK(d);
    return d;
}

/* ---- slot files ---- */

/* A model of the slot file format: the values and weights a file holds, or
 * false when it must be rejected. */
struct slot_model {
    char *v[MAX_VALUES];
    double w[MAX_VALUES];
    size_t n;
    bool weighted;
    bool overflow; /* more values than the model keeps */
};

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

static bool model_line(struct slot_model *m, const char *l, size_t n)
{
    if (n && l[n - 1] == '\r')
        n--;
    if (n > PROMPTGEN_MAX_VALUE || !valid(l, n))
        return false;
    size_t i = 0;
    while (i < n && blank(l[i]))
        i++;
    if (i == n || l[i] == '#')
        return true;
    const char *tab = NULL;
    for (size_t k = n; k > 0 && !tab; k--)
        if (l[k - 1] == '\t')
            tab = l + k - 1;
    size_t vlen = tab ? (size_t)(tab - l) : n;
    double w = 1;
    if (tab) {
        const char *a = tab + 1, *b = l + n;
        while (a < b && blank(*a))
            a++;
        while (b > a && blank(b[-1]))
            b--;
        if (a == b)
            return false;
        char *num = ts_strndup(a, (size_t)(b - a)), *stop;
        CHECK(num);
        w = strtod(num, &stop);
        bool bad = *stop || !isfinite(w) || w < 0 || vlen == 0;
        ts_free(num);
        if (bad)
            return false;
        m->weighted = true;
    }
    if (m->n == MAX_VALUES) {
        m->overflow = true;
        return true;
    }
    m->v[m->n] = ts_strndup(l, vlen);
    CHECK(m->v[m->n]);
    m->w[m->n++] = w;
    return true;
}

static bool model_file(struct slot_model *m, struct span f)
{
    memset(m, 0, sizeof(*m));
    const char *p = f.s, *end = f.s + f.n;
    while (p < end) {
        const char *q = memchr(p, '\n', (size_t)(end - p));
        size_t n = q ? (size_t)(q - p) : (size_t)(end - p);
        if (!model_line(m, p, n))
            return false;
        p += n + (q != NULL);
    }
    if (m->n == 0)
        return false;
    if (m->weighted && !m->overflow) {
        double sum = 0;
        for (size_t i = 0; i < m->n; i++)
            sum += m->w[i];
        if (!(sum > 0))
            return false;
    }
    return true;
}

static void model_release(struct slot_model *m)
{
    for (size_t i = 0; i < m->n; i++)
        ts_free(m->v[i]);
}

/* Loads the slot file from memory through a memfd (the API takes a path). */
static int load_slot_file(struct span f, struct promptgen_slot *s)
{
    int fd = memfd_create("fuzz-slots", MFD_CLOEXEC);
    CHECK(fd >= 0);
    CHECK(f.n == 0 || write(fd, f.s, f.n) == (ssize_t)f.n);
    char path[64], err[256];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    memset(err, 'x', sizeof(err));
    memset(s, 0, sizeof(*s));
    int rc = promptgen_slot_load_file(s, path, err, sizeof(err));
    close(fd);
    if (is_verbose())
        fprintf(stderr, "slot file: %d %s (%zu values)\n", rc, rc ? err : "", s->n);

    struct slot_model m;
    bool ok = model_file(&m, f);
    if (rc) {
        CHECK(rc == TS_PARSE || rc == TS_TOOBIG);
        CHECK(memchr(err, '\0', sizeof(err)));
        CHECK(!s->values && !s->weights && s->n == 0);
        CHECK(strncmp(err, path, strlen(path)) == 0);
        CHECK(!ok || m.overflow);
    } else {
        CHECK(ok);
        CHECK(s->n >= 1 && s->values);
        CHECK((s->weights != NULL) == m.weighted);
        if (!m.overflow) {
            CHECK(s->n == m.n);
            for (size_t i = 0; i < m.n; i++) {
                CHECK(strcmp(s->values[i], m.v[i]) == 0);
                CHECK(!s->weights || s->weights[i] == m.w[i]);
            }
        }
        for (size_t i = 0; i < s->n; i++)
            CHECK(valid(s->values[i], strlen(s->values[i])) && !strchr(s->values[i], '\n'));
    }
    model_release(&m);
    return rc;
}

/* ---- schema ---- */

struct input {
    struct knobs k;
    struct span parts[MAX_PARTS];
    struct span intents[MAX_INTENTS][MAX_TPLS];
    size_t ntpls[MAX_INTENTS];
    size_t nintents;
    struct span values[MAX_VALUES];
    size_t nvalues;
    const struct promptgen_slot *file_slot; /* loaded slot "b", or NULL */
};

static void slot_copy(struct promptgen_slot *d, const struct promptgen_slot *s, const char *name)
{
    d->name = ts_strdup(name);
    d->values = ts_calloc(s->n, sizeof(char *));
    CHECK(d->name && d->values);
    d->n = s->n;
    for (size_t i = 0; i < s->n; i++)
        CHECK((d->values[i] = ts_strdup(s->values[i])));
    if (s->weights) {
        CHECK((d->weights = ts_malloc(s->n * sizeof(double))));
        memcpy(d->weights, s->weights, s->n * sizeof(double));
    }
}

/* Builds the schema of the input; with_input false leaves the input
 * distribution out. *all_valid says whether every string is valid UTF-8. */
static void build_cfg(const struct input *in, bool with_input, struct promptgen_cfg *c,
                      bool *all_valid)
{
    const struct knobs *k = &in->k;
    bool ok = true;
    memset(c, 0, sizeof(*c));
    if (k->flags & F_SYSTEM) {
        c->system = dup_span(in->parts[1]);
        ok &= valid(in->parts[1].s, in->parts[1].n);
    }
    c->nintents = in->nintents;
    CHECK((c->intents = ts_calloc(in->nintents, sizeof(*c->intents))));
    for (size_t i = 0; i < in->nintents; i++) {
        struct promptgen_intent *it = &c->intents[i];
        char name[16];
        snprintf(name, sizeof(name), "i%zu", i);
        CHECK((it->name = ts_strdup(name)));
        it->weight = 1.0 + (double)i;
        it->ntemplates = in->ntpls[i];
        CHECK((it->templates = ts_calloc(it->ntemplates, sizeof(char *))));
        for (size_t t = 0; t < it->ntemplates; t++) {
            it->templates[t] = dup_span(in->intents[i][t]);
            ok &= valid(in->intents[i][t].s, in->intents[i][t].n);
        }
        if ((k->flags & F_INTENT_SYSTEM) && i == in->nintents - 1) {
            it->system = dup_span(in->parts[1]);
            ok &= valid(in->parts[1].s, in->parts[1].n);
        }
        it->nslots = 1 + (in->file_slot != NULL);
        CHECK((it->slots = ts_calloc(it->nslots, sizeof(*it->slots))));
        struct promptgen_slot *a = &it->slots[0];
        CHECK((a->name = ts_strdup("a")));
        a->n = in->nvalues;
        CHECK((a->values = ts_calloc(a->n, sizeof(char *))));
        for (size_t v = 0; v < a->n; v++) {
            a->values[v] = dup_span(in->values[v]);
            ok &= valid(in->values[v].s, in->values[v].n);
        }
        if (k->flags & F_WEIGHTS) {
            CHECK((a->weights = ts_malloc(a->n * sizeof(double))));
            for (size_t v = 0; v < a->n; v++)
                a->weights[v] = (double)((v * 7 + i) % 4);
        }
        if (in->file_slot)
            slot_copy(&it->slots[1], in->file_slot, "b");
        if (with_input && k->input) {
            CHECK(dist_init_fixed(&it->input, k->input) == 0);
            it->has_input = true;
        }
        if (k->flags & F_INTENT_OUTPUT) {
            CHECK(dist_init_uniform(&it->output, 1, 1 + (double)(k->output % 64)) == 0);
            it->has_output = true;
        }
    }
    CHECK(dist_init_fixed(&c->output, k->output) == 0);
    c->prefix_pool = k->pool;
    CHECK(dist_init_fixed(&c->prefix_tokens, k->prefix_tokens) == 0);
    c->prefix_ratio = k->ratio;
    c->seed = k->seed;
    *all_valid = ok;
}

/* The system prompt intent i of the input's schema uses, or NULL. */
static struct span intent_system(const struct input *in, uint32_t i, bool *present)
{
    *present =
        (in->k.flags & F_SYSTEM) || ((in->k.flags & F_INTENT_SYSTEM) && i == in->nintents - 1);
    return in->parts[1];
}

static void check_pool(const struct promptgen *g, const struct input *in)
{
    uint32_t n = promptgen_prefix_count(g);
    CHECK(n == in->k.pool);
    CHECK(promptgen_prefix_text(g, n, NULL) == NULL && promptgen_prefix_tokens(g, n) == 0);
    for (uint32_t e = 0; e < n; e++) {
        size_t len = 0;
        const char *s = promptgen_prefix_text(g, e, &len);
        CHECK(s && strlen(s) == len && valid(s, len));
        char head[48];
        int hl = snprintf(head, sizeof(head), "%" PRIu32 ". Reference document:\n", e);
        CHECK(has_prefix(s, len, head, (size_t)hl));
        uint32_t tok = promptgen_prefix_tokens(g, e);
        CHECK(tok == tokcount_count(NULL, s, len));
        if (tok > in->k.prefix_tokens) /* only a header longer than the length is kept whole */
            CHECK(len == (size_t)hl);
    }
}

static bool turn_equal(const struct promptgen_turn *a, const struct promptgen_turn *b)
{
    return a->intent == b->intent && a->template_index == b->template_index &&
           a->prefix == b->prefix && a->user_len == b->user_len &&
           memcmp(a->user, b->user, a->user_len) == 0 && a->system_len == b->system_len &&
           (a->system == NULL) == (b->system == NULL) &&
           (!a->system || memcmp(a->system, b->system, a->system_len) == 0) &&
           a->user_tokens == b->user_tokens && a->output_tokens == b->output_tokens;
}

static void check_turn(const struct promptgen *g, const struct promptgen *bare,
                       const struct input *in, uint64_t key)
{
    const struct knobs *k = &in->k;
    struct promptgen_turn t, again;
    CHECK(promptgen_turn(g, NULL, key, &t) == 0);
    CHECK(promptgen_turn(g, NULL, key, &again) == 0);
    CHECK(turn_equal(&t, &again));
    promptgen_turn_release(&again);

    CHECK(t.intent < in->nintents && t.template_index < in->ntpls[t.intent]);
    CHECK(t.user && strlen(t.user) == t.user_len && valid(t.user, t.user_len));
    CHECK(t.user_tokens == tokcount_count(NULL, t.user, t.user_len));
    CHECK(t.output_tokens >= 1 && t.output_tokens <= PROMPTS_MAX_OUTPUT_TOKENS);
    if (!(k->flags & F_INTENT_OUTPUT))
        CHECK(t.output_tokens == (k->output ? k->output : 1));
    else
        CHECK(t.output_tokens <= 1 + k->output % 64);

    /* prefix and system */
    CHECK(t.prefix >= -1 && t.prefix < (int32_t)k->pool);
    if (k->pool == 0 || k->ratio == 0)
        CHECK(t.prefix == -1);
    if (k->pool && k->ratio == 1)
        CHECK(t.prefix >= 0);
    bool has_sys;
    struct span sys = intent_system(in, t.intent, &has_sys);
    size_t plen = 0;
    const char *pre = t.prefix >= 0 ? promptgen_prefix_text(g, (uint32_t)t.prefix, &plen) : NULL;
    if (!pre && !has_sys) {
        CHECK(t.system == NULL && t.system_len == 0);
    } else {
        size_t want = plen + (pre && has_sys ? 2 : 0) + (has_sys ? sys.n : 0);
        CHECK(t.system && t.system_len == want && strlen(t.system) == want);
        CHECK(!pre || has_prefix(t.system, t.system_len, pre, plen));
        CHECK(!has_sys || has_suffix(t.system, t.system_len, sys.s, sys.n));
        CHECK(!(pre && has_sys) || memcmp(t.system + plen, "\n\n", 2) == 0);
    }

    /* padding: the render of the same draws without input, plus one insertion */
    if (bare) {
        struct promptgen_turn b;
        CHECK(promptgen_turn(bare, NULL, key, &b) == 0);
        CHECK(b.intent == t.intent && b.template_index == t.template_index);
        size_t btok = tokcount_count(NULL, b.user, b.user_len);
        if (btok >= k->input) {
            CHECK(t.user_len == b.user_len && memcmp(t.user, b.user, b.user_len) == 0);
        } else {
            CHECK(t.user_tokens <= k->input && t.user_tokens >= btok);
            if (is_verbose())
                fprintf(stderr, "padding: want %u got %u (render %zu)\n", k->input, t.user_tokens,
                        btok);
            CHECK(t.user_len >= b.user_len);
            size_t pfx = 0, sfx = 0;
            while (pfx < b.user_len && t.user[pfx] == b.user[pfx])
                pfx++;
            while (sfx < b.user_len && t.user[t.user_len - 1 - sfx] == b.user[b.user_len - 1 - sfx])
                sfx++;
            CHECK(pfx + sfx >= b.user_len);
        }
        promptgen_turn_release(&b);
    }
    promptgen_turn_release(&t);
}

/* ---- chat assembly ---- */

static const char *const roles[] = {"user", "assistant", "tool", "system"};

static uint64_t msg_cost(const char *role, const char *s, size_t n)
{
    return CHAT_TOKENS_PER_MESSAGE + tokcount_count(NULL, role, strlen(role)) +
           tokcount_count(NULL, s, n);
}

static void check_assemble(const struct input *in)
{
    const struct knobs *k = &in->k;
    struct span hs[MAX_HISTORY];
    size_t nh = in->parts[4].n ? split(in->parts[4], '\x1e', hs, MAX_HISTORY) : 0;
    struct chat_msg hist[MAX_HISTORY];
    bool ok = true;
    for (size_t i = 0; i < nh; i++) {
        const char *role = roles[hs[i].n ? (unsigned char)hs[i].s[0] % 4 : 0];
        const char *content = hs[i].n ? hs[i].s + 1 : "";
        size_t len = hs[i].n ? hs[i].n - 1 : 0;
        hist[i] = (struct chat_msg){role, content, len};
        ok &= valid(content, len);
    }
    bool has_sys = k->flags & F_CHAT_SYSTEM;
    struct span sys = in->parts[1], ctx = in->parts[5], user = in->parts[6];
    bool has_ctx = (k->flags & F_CHAT_CONTEXT) && ctx.n;
    ok &= (!has_sys || valid(sys.s, sys.n)) && (!has_ctx || valid(ctx.s, ctx.n)) &&
          valid(user.s, user.n);
    struct assemble_cfg cfg = {k->context_tokens, k->margin, k->output_tokens};

    struct buf out;
    buf_init(&out, OUT_CAP);
    CHECK(buf_append(&out, "PRE", 3) == 0);
    struct assemble_result res;
    memset(&res, 0xa5, sizeof(res));
    int rc = chat_assemble(NULL, has_sys ? sys.s : NULL, has_sys ? sys.n : 0, hist, nh,
                           (k->flags & F_CHAT_CONTEXT) ? ctx.s : NULL, ctx.n, user.s, user.n, &cfg,
                           &out, &res);
    if (rc) {
        if (is_verbose())
            fprintf(stderr, "chat_assemble: %d\n", rc);
        CHECK(rc == -EINVAL && !ok);
        CHECK(out.len == 3 && memcmp(out.data, "PRE", 3) == 0);
        CHECK(res.prompt_tokens == 0 && res.dropped_messages == 0 && !res.over);
        buf_release(&out);
        return;
    }
    if (is_verbose())
        fprintf(stderr, "chat_assemble: %u tokens, dropped %u, cut %u, over %d: %.300s\n",
                res.prompt_tokens, res.dropped_messages, res.context_cut_tokens, res.over,
                out.data + 3);
    json_error_t je;
    json_t *arr = json_loadb(out.data + 3, out.len - 3, JSON_ALLOW_NUL, &je);
    CHECK(json_is_array(arr));
    size_t n = json_array_size(arr);
    size_t kept = nh - res.dropped_messages;
    CHECK(res.dropped_messages <= nh);
    CHECK(n == (has_sys ? 1 : 0) + kept + 1);
    bool limited = k->context_tokens != 0;
    if (!limited)
        CHECK(res.dropped_messages == 0 && res.context_cut_tokens == 0 && !res.over);
    if (res.dropped_messages && kept)
        CHECK(strcmp(hist[res.dropped_messages].role, "user") == 0);

    uint64_t total = CHAT_TOKENS_PER_REPLY;
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(arr, i);
        CHECK(json_is_object(m) && json_object_size(m) == 2);
        const char *role = json_string_value(json_object_get(m, "role"));
        json_t *c = json_object_get(m, "content");
        CHECK(role && json_is_string(c));
        const char *cs = json_string_value(c);
        size_t cn = json_string_length(c);
        total += msg_cost(role, cs, cn);
        if (has_sys && i == 0) {
            CHECK(strcmp(role, "system") == 0 && cn == sys.n && memcmp(cs, sys.s, cn) == 0);
        } else if (i + 1 < n) {
            const struct chat_msg *h = &hist[res.dropped_messages + i - has_sys];
            CHECK(strcmp(role, h->role) == 0 && cn == h->len && memcmp(cs, h->content, cn) == 0);
        } else {
            CHECK(strcmp(role, "user") == 0);
            CHECK(has_suffix(cs, cn, user.s, user.n));
            size_t keep = 0;
            if (cn != user.n) {
                CHECK(has_ctx && has_prefix(cs, cn, "Context:\n", 9));
                CHECK(cn >= 9 + 2 + user.n);
                keep = cn - 9 - 2 - user.n;
                CHECK(memcmp(cs + 9 + keep, "\n\n", 2) == 0);
                CHECK(keep > 0 && keep <= ctx.n && memcmp(cs + 9, ctx.s, keep) == 0);
            }
            if (!limited && has_ctx)
                CHECK(keep == ctx.n);
            if (res.over)
                CHECK(keep == 0 && kept == 0);
            size_t ct = has_ctx ? tokcount_count(NULL, ctx.s, ctx.n) : 0;
            size_t kt = keep ? tokcount_count(NULL, ctx.s, keep) : 0;
            CHECK(res.context_cut_tokens == (keep == ctx.n || !has_ctx ? 0
                                             : ct > kt                 ? ct - kt
                                                                       : 0));
        }
    }
    CHECK(res.prompt_tokens == (total > UINT32_MAX ? UINT32_MAX : total));
    if (limited) {
        uint64_t spend = (uint64_t)k->margin + k->output_tokens;
        uint64_t budget = k->context_tokens > spend ? k->context_tokens - spend : 0;
        CHECK(res.over == (total > budget));
    }
    json_decref(arr);
    buf_release(&out);
}

/* ---- driver ---- */

static uint32_t u16(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static void parse_input(const uint8_t *data, size_t size, struct input *in)
{
    uint8_t kb[NKNOBS] = {0};
    memcpy(kb, data, size < NKNOBS ? size : NKNOBS);
    struct knobs *k = &in->k;
    k->input = u16(kb) & 0x0fff;
    k->pool = kb[2] % 5;
    k->prefix_tokens = 1 + (u16(kb + 3) & 0x07ff);
    k->ratio = kb[5] / 255.0;
    k->seed =
        (uint64_t)kb[6] | (uint64_t)kb[7] << 8 | (uint64_t)kb[8] << 16 | (uint64_t)kb[9] << 56;
    k->flags = kb[10];
    k->context_tokens = u16(kb + 11);
    k->margin = kb[13];
    k->output_tokens = kb[14];
    k->output = kb[15];

    struct span rest = {(const char *)data + NKNOBS, size > NKNOBS ? size - NKNOBS : 0};
    if (size <= NKNOBS)
        rest.s = "";
    for (size_t i = 0; i < MAX_PARTS; i++)
        in->parts[i] = (struct span){"", 0};
    split(rest, '\0', in->parts, MAX_PARTS);

    struct span is[MAX_INTENTS];
    in->nintents = split(in->parts[0], '\x1e', is, MAX_INTENTS);
    for (size_t i = 0; i < in->nintents; i++)
        in->ntpls[i] = split(is[i], '\x1f', in->intents[i], MAX_TPLS);
    in->nvalues = split(in->parts[2], '\n', in->values, MAX_VALUES);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > INPUT_MAX)
        return 0;
    struct input in;
    memset(&in, 0, sizeof(in));
    parse_input(data, size, &in);

    struct promptgen_slot file_slot;
    memset(&file_slot, 0, sizeof(file_slot));
    bool have_file = (in.k.flags & F_SLOT_FILE) && load_slot_file(in.parts[3], &file_slot) == 0;
    in.file_slot = have_file ? &file_slot : NULL;

    struct promptgen_cfg cfg;
    bool all_valid;
    build_cfg(&in, true, &cfg, &all_valid);
    struct promptgen g;
    char err[512];
    memset(err, 'x', sizeof(err));
    int rc = promptgen_init(&g, &cfg, NULL, err, sizeof(err));
    if (is_verbose())
        fprintf(stderr, "promptgen_init: %d %s\n", rc, rc ? err : "");
    CHECK(cfg.intents == NULL && cfg.nintents == 0 && cfg.system == NULL);
    if (rc == 0) {
        CHECK(all_valid);
        CHECK(promptgen_nintents(&g) == in.nintents);
        CHECK(promptgen_intent_name(&g, (uint32_t)in.nintents) == NULL);
        check_pool(&g, &in);
        struct promptgen bare;
        bool have_bare = false;
        if (in.k.input) {
            build_cfg(&in, false, &cfg, &all_valid);
            CHECK(promptgen_init(&bare, &cfg, NULL, err, sizeof(err)) == 0);
            have_bare = true;
        }
        for (uint64_t key = 0; key < NKEYS; key++)
            check_turn(&g, have_bare ? &bare : NULL, &in,
                       key < NKEYS - 2 ? key : in.k.seed * 0x9e3779b97f4a7c15ull + key);
        if (have_bare)
            promptgen_release(&bare);
        promptgen_release(&g);
    } else {
        CHECK(rc == -EINVAL || rc == TS_TOOBIG);
        CHECK(memchr(err, '\0', sizeof(err)) && err[0] != '\0');
        CHECK(g.cfg.intents == NULL && g.ic == NULL && g.pool == NULL);
        promptgen_release(&g); /* harmless on an empty generator */
    }
    if (have_file)
        promptgen_slot_release(&file_slot);

    check_assemble(&in);
    return 0;
}
