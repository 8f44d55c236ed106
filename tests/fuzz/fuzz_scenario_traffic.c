/*
 * Fuzzes the scenario traffic builder (scenario/traffic.h): the input is a
 * scenario file (scenario_load_mem); every class that loads gets a struct
 * traffic and runs up to ITERATIONS iterations the way the dry run does
 * (app/run_scenario.c dry_class_run), except that every request is answered
 * "ok" with traffic_done(), flow steps included, so sessions grow a history
 * and flows walk their whole DAG.
 *
 * Checks, per request: a NUL-terminated body of body_len bytes; a body that
 * is valid UTF-8 parses as JSON, one that is not comes from an invalid_utf8
 * perturbation; a plain request's body has the endpoint's shape (messages
 * ending with the user turn, prompt, input) and its prompt_tokens is the
 * documented count of what it sends; a session turn carries the session
 * header. Per iteration: when traffic_next() says nothing more is ready and
 * nothing is in flight, the iteration is done (a flow cannot stall). A plain
 * class with a prompt schema never fails to build a request. No leak.
 *
 * Relative paths resolve in a directory under /tmp that holds no file.
 * Inputs that could name a device or pseudo file (a slot file, an empirical
 * distribution, a prompts file or dataset is read while loading) are
 * skipped, and so are scenarios whose lengths could be large (the cost of a
 * request grows with them), so every input runs fast.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/utf8.h"
#include "workload/prompts.h"
#include "scenario/scenario.h"
#include "scenario/traffic.h"

#define INPUT_MAX  (64 * 1024)
#define ITERATIONS 10
#define STEPS_MAX  256    /* requests of one iteration (flow steps and retries) */
#define LENGTH_MAX 8192.0 /* likely largest drawn token length we accept */
#define POOL_MAX   16384.0
#define BASE_URL   "http://127.0.0.1:1/v1"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "check failed at line %d: %s\n", __LINE__, #c);                        \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* Relative paths of the scenario resolve here: a fresh name under /tmp whose
 * directory is removed at once (libFuzzer may end without running atexit
 * handlers), so no file can be found in it. */
static char dir[] = "/tmp/fuzz-traffic-XXXXXX";
static bool verbose; /* FUZZ_VERBOSE=1: print requests and errors */
/*
 * Strict by default (FUZZ_LENIENT=1 turns it off): fail when a session turn
 * cannot be built after an earlier turn was sent with invalid UTF-8 (the
 * history keeps a U+FFFD copy; session-invalid-utf8-history.yaml), and when
 * a raw body still holds the per-request placeholder traffic.c splices the
 * raw text into (raw-mark-in-system.yaml).
 */
static bool strict;
static bool mentions_mark; /* the input itself writes the raw-text placeholder's words */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    int fd = open("/dev/null", O_RDONLY);
    if (fd >= 0 && fd != 0) {
        dup2(fd, 0);
        close(fd);
    }
    verbose = getenv("FUZZ_VERBOSE") != NULL;
    strict = getenv("FUZZ_LENIENT") == NULL; /* the two bugs it guarded are fixed */
    CHECK(mkdtemp(dir) != NULL && rmdir(dir) == 0);
    return 0;
}

/* ---- what to skip ---- */

static bool mentions(const uint8_t *data, size_t size, const char *word)
{
    return memmem(data, size, word, strlen(word)) != NULL;
}

/* A YAML escape that writes a printable ASCII byte ("\x2f", "\u0064", "\/")
 * could spell a path the plain-text filter misses. */
static bool escapes_ascii(const uint8_t *data, size_t size)
{
    for (size_t i = 0; i + 1 < size; i++) {
        if (data[i] != '\\')
            continue;
        size_t digits = data[i + 1] == 'x'   ? 2
                        : data[i + 1] == 'u' ? 4
                        : data[i + 1] == 'U' ? 8
                                             : 0;
        if (data[i + 1] == '/')
            return true;
        if (!digits || i + 2 + digits > size)
            continue;
        unsigned long v = 0;
        for (size_t k = 0; k < digits; k++) {
            uint8_t c = data[i + 2 + k];
            int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
            if (d < 0)
                return true; /* a bad escape: let nothing odd through */
            v = v * 16 + (unsigned long)d;
        }
        if (v >= 0x20 && v < 0x80)
            return true;
    }
    return false;
}

/* A value most draws of d stay below. */
static double dist_bound(const struct dist *d)
{
    switch (d->kind) {
    case DIST_FIXED:
        return d->fixed.value;
    case DIST_UNIFORM:
        return d->uniform.hi;
    case DIST_NORMAL:
        return d->normal.mean + 6 * d->normal.sd;
    case DIST_TRUNCNORMAL:
        return d->truncnormal.hi;
    case DIST_LOGNORMAL:
        return d->lognormal.mean * exp(4 * d->lognormal.sigma);
    case DIST_EXPONENTIAL:
        return d->exponential.mean * 12;
    case DIST_GAMMA:
        return d->gamma.shape * d->gamma.scale + 12 * sqrt(d->gamma.shape) * d->gamma.scale;
    case DIST_EMPIRICAL: {
        double m = 0;
        for (size_t i = 0; i < d->empirical.n; i++) {
            double v = d->empirical.x ? d->empirical.x[i] : d->empirical.hi[i];
            m = v > m ? v : m;
        }
        return m;
    }
    }
    return INFINITY;
}

static bool spec_small(const char *spec, double max)
{
    if (!spec)
        return true;
    struct dist d;
    char err[256];
    if (dist_parse(&d, spec, err, sizeof(err)))
        return true; /* traffic_init reports it */
    bool ok = dist_bound(&d) <= max;
    dist_release(&d);
    return ok;
}

/* Whether generating class c's requests stays cheap. */
static bool class_small(const struct scenario_class *c)
{
    if (!spec_small(c->input_tokens, LENGTH_MAX))
        return false;
    if (!c->has_prompts && !c->input_tokens && !c->prompts_file && !c->dataset.path &&
        !spec_small("lognormal:512,0.5", LENGTH_MAX))
        return false;
    const struct promptgen_cfg *p = &c->prompts;
    for (size_t i = 0; c->has_prompts && i < p->nintents; i++)
        if (p->intents[i].has_input && !(dist_bound(&p->intents[i].input) <= LENGTH_MAX))
            return false;
    if (c->has_prompts && p->prefix_pool &&
        !((double)p->prefix_pool * dist_bound(&p->prefix_tokens) <= POOL_MAX))
        return false;
    if (c->prefix.pool && !((double)c->prefix.pool * dist_bound(&c->prefix.tokens) <= POOL_MAX))
        return false;
    if (c->perturbations) {
        struct perturb_set set;
        char err[256];
        if (perturb_set_parse(&set, c->perturbations, err, sizeof(err)) == 0) {
            for (size_t i = 0; i < set.n; i++)
                if (set.v[i].kind == PERTURB_OVERLONG && set.v[i].tokens > LENGTH_MAX)
                    return false;
        }
    }
    return true;
}

/* ---- checks ---- */

static bool valid(const char *s, size_t n)
{
    return utf8_invalid_at(s, n) == n;
}

static bool may_break_utf8(const struct traffic *t, uint32_t mask)
{
    for (size_t i = 0; i < t->perturb.n; i++)
        if (t->perturb.v[i].kind == PERTURB_INVALID_UTF8 && (t->has_flow || (mask >> i) & 1))
            return true;
    return false;
}

static size_t count_json(json_t *s)
{
    return tokcount_count(NULL, json_string_value(s), json_string_length(s));
}

/* The shape and token count of a plain (non-flow) request's body. */
static void check_plain(const struct traffic *t, const struct traffic_req *rq, json_t *body)
{
    CHECK(json_is_object(body));
    CHECK(rq->step == 0 && rq->openai && strcmp(rq->method, "POST") == 0);
    CHECK(strcmp(rq->url, t->url) == 0);
    uint64_t n = 0;
    if (t->endpoint == WORKLOAD_CHAT) {
        json_t *m = json_object_get(body, "messages");
        CHECK(json_is_array(m) && json_array_size(m) >= 1);
        json_t *last = json_array_get(m, json_array_size(m) - 1);
        if (t->source == TRAFFIC_PROMPTS)
            return; /* a "messages" line is sent as written */
        json_t *lr = json_object_get(last, "role");
        CHECK(json_is_string(lr) && strcmp(json_string_value(lr), "user") == 0);
        size_t i;
        json_t *v;
        n = CHAT_TOKENS_PER_REPLY;
        json_array_foreach(m, i, v)
        {
            json_t *role = json_object_get(v, "role"), *content = json_object_get(v, "content");
            CHECK(json_is_string(role) && json_is_string(content));
            n += CHAT_TOKENS_PER_MESSAGE + count_json(role) + count_json(content);
        }
    } else if (t->endpoint == WORKLOAD_COMPLETIONS) {
        json_t *p = json_object_get(body, "prompt");
        CHECK(json_is_string(p));
        n = count_json(p);
    } else {
        json_t *in = json_object_get(body, "input");
        CHECK(json_is_array(in) && json_array_size(in) == 1 &&
              json_is_string(json_array_get(in, 0)));
        n = count_json(json_array_get(in, 0));
    }
    CHECK(rq->item.prompt_tokens == n);
}

struct class_state {
    bool session_raw; /* a body of the running session was sent with invalid UTF-8 */
};

/* One request: returns whether its body was not valid UTF-8. */
static bool check_request(const struct traffic *t, const struct traffic_req *rq)
{
    CHECK(rq->url && rq->url[0] && rq->method);
    if (!rq->item.body) { /* a flow step without a body */
        CHECK(t->has_flow && rq->item.body_len == 0);
        return false;
    }
    CHECK(strlen(rq->item.body) == rq->item.body_len);
    for (size_t i = 0; i < rq->nheaders; i++)
        CHECK(rq->headers[i] && strchr(rq->headers[i], ':'));
    if (rq->session) {
        size_t hl = strlen(t->session_header);
        CHECK(rq->nheaders == 1 && strncmp(rq->headers[0], t->session_header, hl) == 0 &&
              rq->headers[0][hl] == ':');
    }
    if (!t->has_flow)
        CHECK(rq->intent < (int32_t)promptgen_nintents(&t->gen));
    if (!valid(rq->item.body, rq->item.body_len)) {
        CHECK(may_break_utf8(t, rq->perturb_mask));
        /* the per-request placeholder of the raw text must be gone (a user's own text
         * may still contain the words: the placeholder has a random part) */
        static const char mark[] = "\\u0001tokenstorm-raw-";
        if (strict && !t->has_flow && !mentions_mark)
            CHECK(!memmem(rq->item.body, rq->item.body_len, mark, sizeof(mark) - 1));
        return true;
    }
    json_error_t je;
    json_t *body = json_loadb(rq->item.body, rq->item.body_len, JSON_ALLOW_NUL, &je);
    if (!body) {
        fprintf(stderr, "body is not JSON (%s): %.*s\n", je.text, (int)rq->item.body_len,
                rq->item.body);
        abort();
    }
    if (!t->has_flow)
        check_plain(t, rq, body);
    json_decref(body);
    return false;
}

/* Runs iterations of class t as the dry run does, answering every request. */
static void run_class(const struct traffic *t)
{
    struct class_state st = {false};
    uint64_t session_no = 0;
    struct traffic_actor *a = NULL;
    for (uint64_t it = 0; it < ITERATIONS; it++) {
        if (!a)
            CHECK(traffic_actor_new(t, session_no, &a) == 0);
        bool fresh = !traffic_in_session(a);
        if (fresh)
            st.session_raw = false;
        CHECK(traffic_begin(a, session_no, NULL) == 0);
        if (fresh)
            session_no++;
        size_t steps;
        bool stopped = false;
        for (steps = 0; steps < STEPS_MAX; steps++) {
            struct traffic_req rq;
            char why[256];
            memset(why, 'x', sizeof(why));
            why[sizeof(why) - 1] = '\0';
            int got = traffic_next(a, NULL, &rq, why, sizeof(why));
            if (verbose && got < 0)
                fprintf(stderr, "%s it %" PRIu64 ": error %d: %s\n", t->name, it, got, why);
            if (verbose && got > 0)
                fprintf(stderr, "%s it %" PRIu64 " step %u: %.*s\n", t->name, it, rq.step,
                        (int)rq.item.body_len, rq.item.body);
            if (got < 0) {
                /* a flow may fail to render at run time; prompts files and datasets come
                 * from outside; a session whose history holds invalid UTF-8: see `strict`;
                 * a text that writes a request's own raw-text placeholder (seeded, so it
                 * can be guessed) is refused with a message, which is all that is asked */
                if (!t->has_flow && t->source == TRAFFIC_SCHEMA && (strict || !st.session_raw) &&
                    !mentions_mark) {
                    fprintf(stderr, "class '%s': traffic_next: %d %s\n", t->name, got, why);
                    abort();
                }
                stopped = true;
                break;
            }
            if (got == 0)
                break;
            CHECK(got == 1);
            if (check_request(t, &rq))
                st.session_raw = true;
            traffic_done(a, &rq, true, "ok", 2, NULL, 0);
            traffic_req_release(&rq);
        }
        if (steps < STEPS_MAX && !stopped)
            CHECK(traffic_iteration_done(a));
        else if (stopped && !t->has_flow)
            CHECK(traffic_iteration_done(a));
        (void)traffic_iteration_outcome(a);
        uint64_t think;
        struct rng r;
        rng_seed(&r, it);
        bool more = traffic_iteration_done(a) && traffic_after(a, &r, &think);
        if (!more) {
            traffic_actor_free(a);
            a = NULL;
        }
    }
    traffic_actor_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > INPUT_MAX || mentions(data, size, "dev") || mentions(data, size, "proc") ||
        mentions(data, size, "sys/") || mentions(data, size, "run/") || escapes_ascii(data, size))
        return 0;
    struct scenario s;
    char err[512];
    mentions_mark = mentions(data, size, "tokenstorm-raw");
    if (scenario_load_mem(&s, "fuzz.yaml", dir, (const char *)data, size, err, sizeof(err)))
        return 0;
    bool small = true;
    for (size_t k = 0; k < s.nclasses; k++)
        small &= class_small(&s.classes[k]);
    if (!small) {
        scenario_release(&s);
        return 0;
    }
    struct traffic *tr = ts_calloc(s.nclasses, sizeof(*tr));
    bool *ok = ts_calloc(s.nclasses, sizeof(*ok));
    CHECK(tr && ok);
    for (size_t k = 0; k < s.nclasses; k++) {
        memset(err, 'x', sizeof(err));
        int rc = traffic_init(&tr[k], &s, (uint32_t)k, BASE_URL, "m", NULL, err, sizeof(err));
        ok[k] = rc == 0;
        if (rc) {
            if (verbose)
                fprintf(stderr, "class %zu: traffic_init: %d %s\n", k, rc, err);
            CHECK(rc < 0 && memchr(err, '\0', sizeof(err)) && err[0] != '\0');
            continue;
        }
        CHECK(strcmp(tr[k].name, s.classes[k].name) == 0 && tr[k].index == k);
        CHECK(traffic_nsteps(&tr[k]) >= 1);
        CHECK(traffic_step_name(&tr[k], 0) != NULL);
    }
    for (size_t k = 0; k < s.nclasses; k++)
        if (ok[k])
            run_class(&tr[k]);
    for (size_t k = 0; k < s.nclasses; k++)
        if (ok[k])
            traffic_release(&tr[k]);
    ts_free(ok);
    ts_free(tr);
    scenario_release(&s);
    return 0;
}
