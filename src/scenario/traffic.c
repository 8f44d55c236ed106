/*
 * traffic.c - a scenario class at run time: prompts, sessions, perturbations
 * and flows turned into requests.
 */
#include "scenario/traffic.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/utf8.h"
#include "workload/corpus.h"

#define TRAFFIC_MAX_BODY   ((size_t)64 << 20)
#define TRAFFIC_MAX_TEXT   ((size_t)16 << 20)
#define TRACE_BLOCK_TOKENS 512 /* Mooncake traces: one hash id per 512-token block */
/* Stands for a user text that is not valid UTF-8 until the body is written:
 * "\x01tokenstorm-raw-" + 16 hex digits drawn per request + "\x01". */
#define RAW_MARK_LEN 33

struct hmsg {
    const char *role;
    char *text;
    size_t len;
};

struct traffic_actor {
    const struct traffic *t;
    uint64_t key;
    /* session */
    bool in_session;
    uint64_t session_no;
    uint32_t turn, turns;
    char *system;
    size_t system_len;
    int32_t prefix, intent;
    size_t conv;
    struct hmsg hist[TRAFFIC_MAX_HISTORY];
    size_t nhist;
    bool session_failed;
    /* iteration */
    bool single; /* a plain request: ready until sent */
    bool sent;
    uint32_t inflight;
    bool failed;
    char *user; /* the current turn's user text, as sent */
    size_t user_len;
    struct flow_run *fr;
    const char *reference; /* the iteration's reference answer (owned by the traffic) or NULL */
    /* the flow's retrieval steps that measured recall this iteration */
    uint64_t recall_have;
    double recall[FLOW_STEPS_MAX];
    uint32_t recall_k[FLOW_STEPS_MAX];
};

static uint64_t mix3(uint64_t a, uint64_t b, uint64_t c)
{
    return rng_mix64(a ^ rng_mix64(b ^ rng_mix64(c + 0x9e3779b97f4a7c15ull)));
}

/* ---- building ---- */

static const char *const path_of[] = {"/chat/completions", "/completions", "/embeddings",
                                      "/vectors/search"};

static char *join_url(const char *base, const char *path)
{
    size_t n = strlen(base) + strlen(path) + 1;
    char *s = ts_malloc(n);
    if (s)
        snprintf(s, n, "%s%s", base, path);
    return s;
}

/* A class with only input_tokens/output_tokens: a schema of one all-padding intent. */
static int synthetic_schema(struct promptgen_cfg *cfg, const struct scenario_class *c,
                            uint64_t seed, char *err, size_t errlen)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->seed = seed;
    cfg->intents = ts_calloc(1, sizeof(*cfg->intents));
    if (!cfg->intents)
        return -ENOMEM;
    cfg->nintents = 1;
    struct promptgen_intent *in = &cfg->intents[0];
    in->name = ts_strdup("synthetic");
    in->weight = 1;
    in->templates = ts_calloc(1, sizeof(char *));
    if (!in->name || !in->templates)
        return -ENOMEM;
    in->ntemplates = 1;
    in->templates[0] = ts_strdup("{{context}}");
    if (!in->templates[0])
        return -ENOMEM;
    if (c->system && !(cfg->system = ts_strdup(c->system)))
        return -ENOMEM;
    int rc = dist_parse(&in->input, c->input_tokens ? c->input_tokens : "lognormal:512,0.5", err,
                        errlen);
    if (rc)
        return rc;
    in->has_input = true;
    rc = dist_parse(&cfg->output, c->output_tokens ? c->output_tokens : "uniform:64-256", err,
                    errlen);
    return rc;
}

int traffic_init(struct traffic *t, struct scenario *s, uint32_t class_index, const char *base_url,
                 const char *model, const struct tokcount *tc, char *err, size_t errlen)
{
    memset(t, 0, sizeof(*t));
    prompts_init(&t->prompts);
    struct scenario_class *c = &s->classes[class_index];
    int rc = -ENOMEM;
    t->index = class_index;
    t->endpoint = c->endpoint;
    t->realtime = c->realtime;
    t->stream =
        c->stream && c->endpoint != WORKLOAD_EMBEDDINGS && c->endpoint != WORKLOAD_VECTOR_SEARCH;
    t->vector_k = c->vector.k ? c->vector.k : 10;
    t->nprobe = c->vector.nprobe;
    t->ef_search = c->vector.ef_search;
    t->has_nprobe = c->vector.has_nprobe;
    t->has_ef_search = c->vector.has_ef_search;
    t->ignore_eos = c->ignore_eos;
    t->seed = mix3(s->seed, class_index, 0x636c617373);
    t->name = ts_strdup(c->name);
    t->model = model ? ts_strdup(model) : NULL;
    t->base_url = ts_strdup(base_url);
    if (!t->name || (model && !t->model) || !t->base_url)
        goto fail;
    t->url = join_url(base_url, path_of[c->endpoint]);
    if (!t->url)
        goto fail;
    if (c->body)
        t->body = json_incref(c->body);
    t->context_tokens = s->target.context_length;
    t->context_margin = s->target.context_margin;
    t->tmpl =
        (struct chat_template){s->target.tmpl_message, s->target.tmpl_reply, s->target.tmpl_bos};

    if (c->prompts_file) {
        t->source = TRAFFIC_PROMPTS;
        rc = prompts_load(&t->prompts, c->prompts_file,
                          c->endpoint == WORKLOAD_CHAT ? 0 : PROMPTS_TEXT_ONLY, err, errlen);
        if (rc)
            goto fail_quiet;
        t->has_prompts = true;
    } else if (c->dataset.path) {
        t->source = TRAFFIC_DATASET;
        struct dataset_opts o = {
            .column = c->dataset.column,
            .output_column = c->dataset.output_column,
            .time_scale = c->dataset.time_scale,
        };
        rc = dataset_load(&t->data, c->dataset.path, c->dataset.format, &o, err, errlen);
        if (rc)
            goto fail_quiet;
        t->has_data = true;
        t->shuffle = c->dataset.shuffle;
        if (!t->data.n) {
            ts_errf(err, errlen, "%s: no conversation to send", c->dataset.path);
            rc = -EINVAL;
            goto fail_quiet;
        }
    } else {
        t->source = TRAFFIC_SCHEMA;
    }
    /* the schema also synthesizes trace texts that only give a length */
    struct promptgen_cfg cfg;
    if (c->has_prompts) {
        cfg = c->prompts;
        memset(&c->prompts, 0, sizeof(c->prompts));
        c->has_prompts = false;
    } else if ((rc = synthetic_schema(&cfg, c, t->seed, err, errlen))) {
        promptgen_cfg_release(&cfg);
        goto fail_quiet;
    }
    cfg.seed = t->seed;
    if ((rc = promptgen_init(&t->gen, &cfg, tc, err, errlen)))
        goto fail_quiet;
    t->has_gen = true;

    if (c->sessions.enabled) {
        if (c->endpoint != WORKLOAD_CHAT) {
            ts_errf(err, errlen, "class '%s': sessions need the chat endpoint", c->name);
            rc = -EINVAL;
            goto fail_quiet;
        }
        t->sessions = true;
        t->turns = c->sessions.turns;
        memset(&c->sessions.turns, 0, sizeof(c->sessions.turns));
        t->think = c->sessions.think;
        memset(&c->sessions.think, 0, sizeof(c->sessions.think));
        t->has_think = true;
    }
    t->session_header = ts_strdup(c->sessions.header ? c->sessions.header : "X-Session-Id");
    if (!t->session_header)
        goto fail;
    if (c->perturbations && (rc = perturb_set_parse(&t->perturb, c->perturbations, err, errlen))) {
        goto fail_quiet;
    }
    if (c->has_flow) {
        t->has_flow = true;
        t->flow = &c->flow;
        if ((rc = flow_retrieval_init(&t->retr, t->flow, err, errlen)))
            goto fail_quiet;
    }
    return 0;
fail:
    ts_errf(err, errlen, "out of memory");
fail_quiet:
    traffic_release(t);
    return rc ? rc : -ENOMEM;
}

void traffic_release(struct traffic *t)
{
    ts_free(t->name);
    ts_free(t->model);
    ts_free(t->url);
    ts_free(t->base_url);
    ts_free(t->session_header);
    json_decref(t->body);
    if (t->has_gen)
        promptgen_release(&t->gen);
    prompts_release(&t->prompts);
    if (t->has_data)
        dataset_release(&t->data);
    if (t->sessions) {
        dist_release(&t->turns);
        dist_release(&t->think);
    }
    flow_retrieval_release(&t->retr);
    memset(t, 0, sizeof(*t));
}

const char *traffic_step_name(const struct traffic *t, uint32_t step)
{
    static const char *const ep[] = {"chat", "completions", "embeddings", "vector-search"};
    if (t->has_flow && step < t->flow->n)
        return t->flow->steps[step].name;
    return ep[t->endpoint];
}

uint32_t traffic_nsteps(const struct traffic *t)
{
    return t->has_flow ? (uint32_t)t->flow->n : 1;
}

/* ---- actors ---- */

int traffic_actor_new(const struct traffic *t, uint64_t key, struct traffic_actor **out)
{
    struct traffic_actor *a = ts_calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a->t = t;
    a->key = key;
    a->prefix = a->intent = -1;
    *out = a;
    return 0;
}

static void history_clear(struct traffic_actor *a)
{
    for (size_t i = 0; i < a->nhist; i++)
        ts_free(a->hist[i].text);
    a->nhist = 0;
}

static void end_session(struct traffic_actor *a)
{
    history_clear(a);
    ts_free(a->system);
    a->system = NULL;
    a->system_len = 0;
    a->in_session = false;
    a->prefix = a->intent = -1;
}

void traffic_actor_free(struct traffic_actor *a)
{
    if (!a)
        return;
    end_session(a);
    ts_free(a->user);
    flow_run_free(a->fr);
    ts_free(a);
}

static size_t pick_index(const struct traffic *t, uint64_t session_no, size_t n)
{
    if (!t->shuffle)
        return (size_t)(session_no % n);
    return (size_t)(mix3(t->seed, session_no, 0x73687566) % n);
}

static void start_session(struct traffic_actor *a, uint64_t session_no)
{
    const struct traffic *t = a->t;
    end_session(a);
    a->in_session = true;
    a->session_no = session_no;
    a->turn = 0;
    a->turns = 1;
    a->session_failed = false;
    if (t->source == TRAFFIC_DATASET) {
        a->conv = pick_index(t, session_no, t->data.n);
        a->turns = (uint32_t)t->data.convs[a->conv].nturns;
    } else if (t->sessions) {
        struct rng r;
        rng_seed(&r, mix3(t->seed, session_no, 0x7475726e));
        double v = dist_sample(&t->turns, &r);
        a->turns = v < 1 ? 1 : v > 100000 ? 100000 : (uint32_t)(v + 0.5);
    }
    if (!t->sessions && t->source != TRAFFIC_DATASET)
        a->turns = 1;
}

int traffic_begin(struct traffic_actor *a, uint64_t session_no, const struct tokcount *tc)
{
    const struct traffic *t = a->t;
    (void)tc;
    if (!a->in_session)
        start_session(a, session_no);
    a->failed = false;
    a->inflight = 0;
    a->sent = false;
    ts_free(a->user);
    a->user = NULL;
    a->user_len = 0;
    flow_run_free(a->fr);
    a->fr = NULL;
    a->single = !t->has_flow;
    return 0;
}

/* ---- text ---- */

/* Appends about `tokens` tokens of corpus text starting at a word chosen by key. */
static int synth_text(const struct tokcount *tc, uint64_t key, size_t tokens, struct buf *out)
{
    size_t clen;
    const char *corpus = corpus_text(&clen);
    size_t pos = (size_t)(rng_mix64(key) % clen);
    while (pos > 0 && corpus[pos - 1] != ' ' && corpus[pos - 1] != '\n')
        pos--;
    size_t have = 0;
    while (have < tokens) {
        size_t n = clen - pos;
        size_t want = tokens - have;
        size_t cut = tokcount_prefix(tc, corpus + pos, n, want);
        if (!cut)
            break;
        int rc = buf_append(out, corpus + pos, cut);
        if (rc)
            return rc;
        have += tokcount_count(tc, corpus + pos, cut);
        pos = (pos + cut) % clen;
    }
    return 0;
}

/* The user text of the current turn (before perturbation), its system and output length. */
struct turn_text {
    struct buf user;
    const char *system; /* borrowed, or from gen (owned by gt) */
    size_t system_len;
    uint32_t output_tokens;
    const char *reference;
    int32_t intent, prefix;
    const char *messages_json; /* a prompts-file "messages" line: sent as written */
    struct promptgen_turn gt;
    bool have_gt;
};

static int make_turn(struct traffic_actor *a, const struct tokcount *tc, struct turn_text *tt,
                     char *err, size_t errlen)
{
    const struct traffic *t = a->t;
    int rc = 0;
    tt->intent = tt->prefix = -1;
    uint64_t key = mix3(a->session_no, a->turn, 0x7475726e6b6579);
    switch (t->source) {
    case TRAFFIC_SCHEMA:
        if ((rc = promptgen_turn(&t->gen, tc, key, &tt->gt))) {
            ts_errf(err, errlen, "prompt generation: %s", ts_strerror(rc));
            return rc;
        }
        tt->have_gt = true;
        if ((rc = buf_append(&tt->user, tt->gt.user, tt->gt.user_len)))
            return rc;
        tt->system = tt->gt.system;
        tt->system_len = tt->gt.system_len;
        tt->output_tokens = tt->gt.output_tokens;
        tt->intent = (int32_t)tt->gt.intent;
        tt->prefix = tt->gt.prefix;
        return 0;
    case TRAFFIC_PROMPTS: {
        size_t i = pick_index(t, a->session_no, prompts_count(&t->prompts));
        const struct prompt_entry *e = prompts_get(&t->prompts, i);
        tt->reference = prompts_reference(&t->prompts, e);
        tt->output_tokens = e->max_tokens;
        if (e->kind == PROMPT_MESSAGES) {
            tt->messages_json = prompts_json(&t->prompts, e);
            return 0;
        }
        json_t *s = json_loads(prompts_json(&t->prompts, e), JSON_DECODE_ANY, NULL);
        if (!json_is_string(s)) {
            json_decref(s);
            ts_errf(err, errlen, "prompts file: line %u unreadable", e->line);
            return TS_PARSE;
        }
        rc = buf_append(&tt->user, json_string_value(s), json_string_length(s));
        json_decref(s);
        return rc;
    }
    case TRAFFIC_DATASET: {
        const struct dataset_conv *cv = &t->data.convs[a->conv];
        uint32_t k = a->turn < cv->nturns ? a->turn : (uint32_t)cv->nturns - 1;
        if (cv->input_tokens) {
            /* a trace line with a length only: synthesize, sharing the blocks of its hash ids */
            size_t tokens = cv->input_tokens;
            if (cv->nhash) {
                for (size_t h = 0; h < cv->nhash && !rc; h++)
                    rc = synth_text(tc, mix3(t->seed, cv->hash_ids[h], 0x626c6b),
                                    TRACE_BLOCK_TOKENS, &tt->user);
                if (!rc) {
                    size_t cut = tokcount_prefix(tc, tt->user.data, tt->user.len, tokens);
                    tt->user.len = cut;
                }
            } else {
                rc = synth_text(tc, key ^ t->seed, tokens, &tt->user);
            }
        } else {
            rc = buf_append(&tt->user, cv->user[k], cv->user_len[k]);
        }
        if (rc)
            return rc;
        tt->system = cv->system;
        tt->system_len = cv->system_len;
        tt->output_tokens = cv->output_tokens ? cv->output_tokens[k] : 0;
        if (cv->assistant && cv->assistant[k]) {
            tt->reference = cv->assistant[k];
            if (!tt->output_tokens)
                tt->output_tokens =
                    (uint32_t)tokcount_count(tc, cv->assistant[k], cv->assistant_len[k]);
        }
        if (!tt->output_tokens)
            tt->output_tokens = 256;
        return 0;
    }
    }
    return -EINVAL;
}

static void turn_text_release(struct turn_text *tt)
{
    buf_release(&tt->user);
    if (tt->have_gt)
        promptgen_turn_release(&tt->gt);
}

/* Appends s with every byte that is not part of valid UTF-8 replaced by U+FFFD. */
static int utf8_sanitize(const char *s, size_t n, struct buf *out)
{
    while (n) {
        size_t ok = utf8_invalid_at(s, n);
        int rc = buf_append(out, s, ok);
        if (rc || ok == n)
            return rc;
        if ((rc = buf_append(out, "\xEF\xBF\xBD", 3)))
            return rc;
        s += ok + 1;
        n -= ok + 1;
    }
    return 0;
}

/* Escapes s as the inside of a JSON string, passing bytes >= 0x80 through raw
 * (so invalid UTF-8 reaches the server as it is). */
static int json_escape_raw(struct buf *out, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int rc;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            rc = buf_append(out, e, 2);
        } else if (c < 0x20) {
            char e[8];
            snprintf(e, sizeof(e), "\\u%04x", c);
            rc = buf_append(out, e, 6);
        } else {
            rc = buf_append(out, (const char *)&c, 1);
        }
        if (rc)
            return rc;
    }
    return 0;
}

/*
 * Replaces the JSON-escaped raw mark (see RAW_MARK_LEN) in body with raw,
 * escaped byte for byte. The mark must occur exactly once.
 */
static int splice_raw(struct buf *body, const char *markv, const char *raw, size_t raw_len)
{
    char mark[64];
    size_t mlen = strlen(markv);
    if (mlen < 3)
        return -EINVAL;
    int ml = snprintf(mark, sizeof(mark), "\\u0001%.*s\\u0001", (int)(mlen - 2), markv + 1);
    if (ml < 0 || (size_t)ml >= sizeof(mark))
        return -EINVAL;
    const char *at = memmem(body->data, body->len, mark, (size_t)ml);
    if (!at ||
        memmem(at + ml, body->len - (size_t)(at - body->data) - (size_t)ml, mark, (size_t)ml))
        return -EINVAL;
    struct buf out;
    buf_init(&out, TRAFFIC_MAX_BODY);
    size_t head = (size_t)(at - body->data);
    int rc = buf_append(&out, body->data, head);
    if (!rc)
        rc = json_escape_raw(&out, raw, raw_len);
    if (!rc)
        rc = buf_append(&out, at + ml, body->len - head - (size_t)ml);
    if (rc) {
        buf_release(&out);
        return rc;
    }
    buf_release(body);
    *body = out;
    return 0;
}

/* Adds the class's constant keys and its overrides to a body object. */
static int finish_body(const struct traffic *t, json_t *o, uint32_t max_tokens, bool *stream)
{
    int rc = 0;
    if (t->model && !json_object_get(o, "model"))
        rc |= json_object_set_new(o, "model", json_string(t->model));
    if (t->endpoint != WORKLOAD_EMBEDDINGS) {
        if (max_tokens)
            rc |= json_object_set_new(o, "max_tokens", json_integer(max_tokens));
        if (t->ignore_eos)
            rc |= json_object_set_new(o, "ignore_eos", json_true());
        if (t->stream) {
            rc |= json_object_set_new(o, "stream", json_true());
            rc |= json_object_set_new(o, "stream_options", json_pack("{s:b}", "include_usage", 1));
        }
    }
    if (t->body) {
        const char *k;
        json_t *v;
        json_object_foreach(t->body, k, v)
        {
            if (!strcmp(k, "messages") || !strcmp(k, "prompt") || !strcmp(k, "input"))
                continue;
            if (json_is_null(v))
                json_object_del(o, k);
            else
                rc |= json_object_set(o, k, v);
        }
    }
    *stream = json_is_true(json_object_get(o, "stream"));
    return rc ? -ENOMEM : 0;
}

static int dump_body(json_t *o, struct buf *out)
{
    char *s = json_dumps(o, JSON_COMPACT);
    if (!s)
        return -ENOMEM;
    int rc = buf_append(out, s, strlen(s));
    free(s);
    return rc;
}

/*
 * The user text of a plain request: as generated or perturbed (text), and as
 * written into the JSON body (send): a placeholder (mark) when text is not
 * valid UTF-8, replaced by its raw bytes once the body is dumped (splice_raw).
 */
struct user_text {
    const char *text; /* borrowed from the turn or the perturbation buffer */
    size_t len;
    const char *send; /* text, or mark */
    size_t send_len;
    bool raw;
    char mark[RAW_MARK_LEN + 1];
};

/* On a session's first turn the actor keeps its system prompt, prefix and
   intent: later turns of the session send the same. */
static int keep_session_start(struct traffic_actor *a, const struct turn_text *tt)
{
    if (a->turn != 0 || !a->t->sessions)
        return 0;
    if (tt->system && !(a->system = ts_strndup(tt->system, tt->system_len)))
        return -ENOMEM;
    a->system_len = tt->system ? tt->system_len : 0;
    a->prefix = tt->prefix;
    a->intent = tt->intent;
    return 0;
}

/* Perturbs the user text (mask: the perturbations drawn, 0 for none) into
   pert, and draws the placeholder for raw bytes; both draws are keyed by
   (class, session, turn), not by timing. */
static int pick_user_text(const struct traffic_actor *a, const struct turn_text *tt,
                          struct buf *pert, struct user_text *u, uint32_t *mask, char *err,
                          size_t errlen)
{
    const struct traffic *t = a->t;
    struct rng r;
    int rc;
    rng_seed(&r, mix3(t->seed, a->session_no, ((uint64_t)a->turn << 8) | 0x70));
    *mask = t->perturb.n ? perturb_pick(&t->perturb, &r) : 0;
    u->text = tt->user.data ? tt->user.data : "";
    u->len = tt->user.len;
    if (*mask && !tt->messages_json) {
        if ((rc = perturb_set_apply(&t->perturb, *mask, u->text, u->len, rng_next_u64(&r), pert))) {
            ts_errf(err, errlen, "perturbation: %s", ts_strerror(rc));
            return rc;
        }
        u->text = pert->data ? pert->data : "";
        u->len = pert->len;
    }
    u->raw = utf8_invalid_at(u->text, u->len) != u->len;
    snprintf(u->mark, sizeof(u->mark), "\x01tokenstorm-raw-%016llx\x01",
             (unsigned long long)rng_next_u64(&r));
    u->send = u->raw ? u->mark : u->text;
    u->send_len = u->raw ? strlen(u->mark) : u->len;
    return 0;
}

/* "messages": a prompts file's line as written, or the session's history and
   the user text assembled to fit the context window. */
static int put_chat(const struct traffic_actor *a, const struct tokcount *tc,
                    const struct turn_text *tt, const char *system, size_t system_len,
                    const struct user_text *u, json_t *o, struct traffic_req *rq,
                    uint32_t *prompt_tokens)
{
    const struct traffic *t = a->t;
    struct buf msgs;
    int rc;
    buf_init(&msgs, TRAFFIC_MAX_BODY);
    if (tt->messages_json) {
        rc = buf_append(&msgs, tt->messages_json, strlen(tt->messages_json));
    } else {
        struct chat_msg hist[TRAFFIC_MAX_HISTORY];
        for (size_t i = 0; i < a->nhist; i++)
            hist[i] = (struct chat_msg){a->hist[i].role, a->hist[i].text, a->hist[i].len};
        struct assemble_cfg acfg = {
            .context_tokens = t->context_tokens,
            .margin = t->context_margin,
            .output_tokens = tt->output_tokens,
            .tmpl = t->tmpl.message ? &t->tmpl : NULL,
        };
        struct assemble_result ares;
        memset(&ares, 0, sizeof(ares));
        rc = chat_assemble(tc, system, system ? system_len : 0, hist, a->nhist, NULL, 0, u->send,
                           u->send_len, &acfg, &msgs, &ares);
        *prompt_tokens = ares.prompt_tokens;
        rq->trimmed = ares.dropped_messages + ares.context_cut_tokens;
    }
    if (!rc) {
        json_t *m = json_loadb(msgs.data, msgs.len, 0, NULL);
        rc = m ? json_object_set_new(o, "messages", m) : TS_PARSE;
    }
    buf_release(&msgs);
    return rc;
}

/* "prompt": the system prompt, a blank line, the user text. */
static int put_completion(const struct tokcount *tc, const char *system, size_t system_len,
                          const struct user_text *u, json_t *o, uint32_t *prompt_tokens)
{
    struct buf p;
    int rc = 0;
    buf_init(&p, TRAFFIC_MAX_TEXT);
    if (system && system_len)
        rc = buf_append(&p, system, system_len) || buf_append(&p, "\n\n", 2) ? -ENOMEM : 0;
    if (!rc)
        rc = buf_append(&p, u->send, u->send_len);
    if (!rc) {
        json_t *s = json_stringn(p.data ? p.data : "", p.len);
        rc = s ? json_object_set_new(o, "prompt", s) : -ENOMEM;
        *prompt_tokens = (uint32_t)tokcount_count(tc, p.data, p.len);
    }
    buf_release(&p);
    return rc;
}

/* The prompt part of the body for the class's endpoint ("input" for
   embeddings); a session sends the system prompt of its first turn. */
static int put_prompt(const struct traffic_actor *a, const struct tokcount *tc,
                      const struct turn_text *tt, const struct user_text *u, json_t *o,
                      struct traffic_req *rq, uint32_t *prompt_tokens)
{
    const struct traffic *t = a->t;
    const char *system = t->sessions ? a->system : tt->system;
    size_t system_len = t->sessions ? a->system_len : tt->system_len;
    if (t->endpoint == WORKLOAD_CHAT)
        return put_chat(a, tc, tt, system, system_len, u, o, rq, prompt_tokens);
    if (t->endpoint == WORKLOAD_COMPLETIONS)
        return put_completion(tc, system, system_len, u, o, prompt_tokens);
    json_t *s = json_stringn(u->send, u->send_len);
    *prompt_tokens = (uint32_t)tokcount_count(tc, u->send, u->send_len);
    return s ? json_object_set_new(o, "input", json_pack("[o]", s)) : -ENOMEM;
}

/* The body's bytes: the class's keys added to o, dumped, and the raw user
   text spliced in for its placeholder. */
static int dump_request(const struct traffic *t, json_t *o, uint32_t out_tokens,
                        const struct user_text *u, struct buf *body, bool *stream, char *err,
                        size_t errlen)
{
    int rc;
    if ((rc = finish_body(t, o, out_tokens, stream)) || (rc = dump_body(o, body))) {
        ts_errf(err, errlen, "cannot build the request: %s", ts_strerror(rc));
        return rc;
    }
    if (u->raw && (rc = splice_raw(body, u->mark, u->text, u->len))) {
        /* -EINVAL: the placeholder is not there exactly once, i.e. the request's
         * other text (a system prompt...) writes it too */
        ts_errf(err, errlen, "cannot build the request: %s",
                rc == -EINVAL ? "its text holds the placeholder of its invalid UTF-8 bytes "
                                "(\\x01tokenstorm-raw-...\\x01)"
                              : ts_strerror(rc));
        return rc;
    }
    return 0;
}

/* A session (or a dataset's conversation) keeps the user text as sent for
   its history, which is sent as JSON text: invalid UTF-8 becomes U+FFFD. */
static void remember_user(struct traffic_actor *a, const struct turn_text *tt,
                          const struct user_text *u)
{
    const struct traffic *t = a->t;
    if (!(t->sessions || t->source == TRAFFIC_DATASET) || tt->messages_json)
        return;
    struct buf valid;
    buf_init(&valid, TRAFFIC_MAX_TEXT + TRAFFIC_MAX_TEXT / 2);
    if (!utf8_sanitize(u->text, u->len, &valid)) {
        a->user = ts_strndup(valid.data ? valid.data : "", valid.len);
        a->user_len = a->user ? valid.len : 0;
    }
    buf_release(&valid);
}

/*
 * A vector search: {"vector":[row],"k":K[,"nprobe":N][,"ef_search":E]} and
 * the class's body overrides (which win); the row is the iteration's number
 * mod the query count, kept in item.index for the recall.
 */
static int build_vector(struct traffic_actor *a, struct traffic_req *rq, char *err, size_t errlen)
{
    const struct traffic *t = a->t;
    if (!t->vectors || !t->vectors->n) {
        ts_errf(err, errlen, "no query vectors");
        return -EINVAL;
    }
    uint64_t index = a->session_no % t->vectors->n;
    const float *row = t->vectors->v + index * t->vectors->dim;
    struct buf body;
    buf_init(&body, TRAFFIC_MAX_BODY);
    int rc = buf_append_str(&body, "{\"vector\":[");
    for (size_t d = 0; !rc && d < t->vectors->dim; d++)
        rc = buf_appendf(&body, d ? ",%.9g" : "%.9g", (double)row[d]);
    if (!rc && !json_object_get(t->body, "k"))
        rc = buf_appendf(&body, "],\"k\":%" PRIu32, t->vector_k);
    else if (!rc)
        rc = buf_append_str(&body, "]");
    if (!rc && t->has_nprobe && !json_object_get(t->body, "nprobe"))
        rc = buf_appendf(&body, ",\"nprobe\":%" PRId64, t->nprobe);
    if (!rc && t->has_ef_search && !json_object_get(t->body, "ef_search"))
        rc = buf_appendf(&body, ",\"ef_search\":%" PRId64, t->ef_search);
    const char *key;
    json_t *val;
    json_object_foreach(t->body, key, val)
    {
        if (rc || !strcmp(key, "vector"))
            continue;
        json_t *ks = json_string(key);
        char *kt = ks ? json_dumps(ks, JSON_ENCODE_ANY) : NULL;
        char *vt = json_dumps(val, JSON_COMPACT | JSON_ENCODE_ANY);
        rc = kt && vt ? buf_appendf(&body, ",%s:%s", kt, vt) : -ENOMEM;
        json_decref(ks);
        free(kt);
        free(vt);
    }
    if (!rc)
        rc = buf_append_char(&body, '}');
    if (rc) {
        buf_release(&body);
        ts_errf(err, errlen, "cannot build the request: %s", ts_strerror(rc));
        return rc;
    }
    rq->item.index = index;
    rq->item.body = body.data;
    rq->item.body_len = body.len;
    rq->url = t->url;
    rq->method = "POST";
    rq->openai = true;
    return 0;
}

/* The plain request of the current turn (chat, completions or embeddings). */
static int build_single(struct traffic_actor *a, const struct tokcount *tc, struct traffic_req *rq,
                        char *err, size_t errlen)
{
    const struct traffic *t = a->t;
    struct turn_text tt;
    struct buf pert, body;
    struct user_text u;
    json_t *o = NULL;
    uint32_t mask = 0, prompt_tokens = 0;
    int rc;
    memset(&tt, 0, sizeof(tt));
    buf_init(&tt.user, TRAFFIC_MAX_TEXT);
    buf_init(&pert, TRAFFIC_MAX_TEXT);
    buf_init(&body, TRAFFIC_MAX_BODY);
    if ((rc = make_turn(a, tc, &tt, err, errlen)) || (rc = keep_session_start(a, &tt)) ||
        (rc = pick_user_text(a, &tt, &pert, &u, &mask, err, errlen)))
        goto out;
    if (!(o = json_object())) {
        rc = -ENOMEM;
        goto out;
    }
    if ((rc = put_prompt(a, tc, &tt, &u, o, rq, &prompt_tokens))) {
        ts_errf(err, errlen, "cannot build the request: %s", ts_strerror(rc));
        goto out;
    }
    if (u.raw)
        prompt_tokens = prompt_tokens - (uint32_t)tokcount_count(tc, u.send, u.send_len) +
                        (uint32_t)tokcount_count(tc, u.text, u.len);
    if ((rc = dump_request(t, o, tt.output_tokens, &u, &body, &rq->item.stream, err, errlen)))
        goto out;
    rq->item.body = body.data;
    rq->item.body_len = body.len;
    body.data = NULL;
    rq->item.prompt_tokens = prompt_tokens;
    rq->item.max_tokens = t->endpoint == WORKLOAD_EMBEDDINGS ? 0 : tt.output_tokens;
    rq->item.reference = tt.reference;
    rq->url = t->url;
    rq->method = "POST";
    rq->openai = true;
    rq->intent = t->sessions ? a->intent : tt.intent;
    rq->prefix = t->sessions ? a->prefix : tt.prefix;
    rq->perturb_mask = mask;
    remember_user(a, &tt, &u);
out:
    json_decref(o);
    buf_release(&body);
    buf_release(&pert);
    turn_text_release(&tt);
    return rc;
}

static int add_session_header(const struct traffic_actor *a, struct traffic_req *rq)
{
    const struct traffic *t = a->t;
    if (!a->in_session || a->turns <= 1)
        return 0;
    rq->session = a->session_no + 1;
    rq->turn = a->turn;
    char line[512];
    snprintf(line, sizeof(line), "%s: %s-%llu", t->session_header, t->name,
             (unsigned long long)a->session_no);
    rq->headers = ts_calloc(1, sizeof(char *));
    if (!rq->headers || !(rq->headers[0] = ts_strdup(line)))
        return -ENOMEM;
    rq->nheaders = 1;
    return 0;
}

/* ---- flows ---- */

static int flow_start(struct traffic_actor *a, const struct tokcount *tc, char *err, size_t errlen)
{
    const struct traffic *t = a->t;
    struct turn_text tt;
    memset(&tt, 0, sizeof(tt));
    buf_init(&tt.user, TRAFFIC_MAX_TEXT);
    int rc = make_turn(a, tc, &tt, err, errlen);
    if (rc) {
        turn_text_release(&tt);
        return rc;
    }
    struct buf pert;
    buf_init(&pert, TRAFFIC_MAX_TEXT);
    struct rng r;
    rng_seed(&r, mix3(t->seed, a->session_no, ((uint64_t)a->turn << 8) | 0x70));
    uint32_t mask = t->perturb.n ? perturb_pick(&t->perturb, &r) : 0;
    const char *user = tt.user.data ? tt.user.data : "";
    size_t user_len = tt.user.len;
    if (mask &&
        !(rc = perturb_set_apply(&t->perturb, mask, user, user_len, rng_next_u64(&r), &pert))) {
        user = pert.data ? pert.data : "";
        user_len = pert.len;
    }
    a->intent = tt.intent;
    a->prefix = tt.prefix;
    a->reference = tt.reference;
    a->recall_have = 0;
    char sid[256];
    snprintf(sid, sizeof(sid), "%s-%llu", t->name, (unsigned long long)a->session_no);
    /* a flow's prompt must be a JSON string: invalid UTF-8 is replaced */
    if (!rc && !(rc = flow_run_new(t->flow, &a->fr))) {
        rc |= flow_run_set(a->fr, "prompt", json_stringn_nocheck(user, user_len));
        rc |= flow_run_set(a->fr, "system",
                           tt.system ? json_stringn_nocheck(tt.system, tt.system_len)
                                     : json_string(""));
        rc |= flow_run_set(a->fr, "session_id", json_string(sid));
        rc |= flow_run_set(a->fr, "iteration", json_integer((json_int_t)a->session_no));
        rc |= flow_run_set(a->fr, "class", json_string(t->name));
        rc |= flow_run_set(a->fr, "target", json_string(t->base_url));
        if (rc)
            rc = -ENOMEM;
    }
    a->user = NULL;
    (void)mask;
    buf_release(&pert);
    turn_text_release(&tt);
    if (rc)
        ts_errf(err, errlen, "cannot start the flow: %s", ts_strerror(rc));
    return rc;
}

static const char *kind_path(enum flow_step_kind k)
{
    switch (k) {
    case FLOW_STEP_CHAT:
        return "/chat/completions";
    case FLOW_STEP_COMPLETION:
        return "/completions";
    case FLOW_STEP_EMBEDDINGS:
        return "/embeddings";
    default:
        return NULL;
    }
}

static uint32_t count_body_tokens(const struct tokcount *tc, json_t *o)
{
    size_t n = 0;
    json_t *m = json_object_get(o, "messages");
    if (json_is_array(m)) {
        size_t i;
        json_t *v;
        json_array_foreach(m, i, v)
        {
            json_t *c = json_object_get(v, "content");
            if (json_is_string(c))
                n += tokcount_count(tc, json_string_value(c), json_string_length(c));
            n += CHAT_TOKENS_PER_MESSAGE + 1;
        }
        return (uint32_t)(n + CHAT_TOKENS_PER_REPLY);
    }
    json_t *p = json_object_get(o, "prompt");
    if (!p)
        p = json_object_get(o, "input");
    if (json_is_string(p))
        return (uint32_t)tokcount_count(tc, json_string_value(p), json_string_length(p));
    return 0;
}

static int build_step(struct traffic_actor *a, const struct tokcount *tc, uint32_t step,
                      struct traffic_req *rq, char *err, size_t errlen)
{
    const struct traffic *t = a->t;
    const struct flow_step_def *d = &t->flow->steps[step];
    struct flow_request fq;
    memset(&fq, 0, sizeof(fq));
    int rc = flow_run_render(a->fr, step, &fq, err, errlen);
    if (rc)
        return rc;
    rq->step = step;
    rq->openai = d->kind != FLOW_STEP_HTTP;
    rq->answer = flow_retrieval_is_answer(&t->retr, step);
    if (rq->answer)
        rq->item.reference = a->reference;
    rq->timeout_ns = d->timeout_ns;
    rq->method = d->method ? d->method : (fq.body || rq->openai) ? "POST" : "GET";
    rq->intent = a->intent;
    rq->prefix = a->prefix;
    if (fq.url) {
        rq->url_buf = ts_strdup(fq.url);
        if (!rq->url_buf)
            rc = -ENOMEM;
        rq->url = rq->url_buf;
    } else {
        rq->url_buf = join_url(t->base_url, kind_path(d->kind) ? kind_path(d->kind) : "");
        rq->url = rq->url_buf;
        if (!rq->url_buf)
            rc = -ENOMEM;
    }
    if (!rc && fq.nheaders) {
        rq->headers = ts_calloc(fq.nheaders, sizeof(char *));
        if (!rq->headers)
            rc = -ENOMEM;
        for (size_t i = 0; !rc && i < fq.nheaders; i++) {
            if (!(rq->headers[i] = ts_strdup(fq.headers[i])))
                rc = -ENOMEM;
            rq->nheaders = i + 1;
        }
    }
    if (!rc && fq.body) {
        json_t *o = rq->openai ? json_loads(fq.body, 0, NULL) : NULL;
        if (rq->openai && json_is_object(o)) {
            bool stream = false;
            if (t->model && !json_object_get(o, "model"))
                json_object_set_new(o, "model", json_string(t->model));
            if (d->kind != FLOW_STEP_EMBEDDINGS && !json_object_get(o, "stream") && t->stream) {
                json_object_set_new(o, "stream", json_true());
                json_object_set_new(o, "stream_options", json_pack("{s:b}", "include_usage", 1));
            }
            stream = json_is_true(json_object_get(o, "stream"));
            json_t *mt = json_object_get(o, "max_tokens");
            if (!mt)
                mt = json_object_get(o, "max_completion_tokens");
            rq->item.max_tokens = json_is_integer(mt) ? (uint32_t)json_integer_value(mt) : 0;
            rq->item.prompt_tokens = count_body_tokens(tc, o);
            rq->item.stream = stream;
            char *s = json_dumps(o, JSON_COMPACT);
            if (s) {
                rq->item.body = ts_strdup(s);
                rq->item.body_len = strlen(s);
                free(s);
            }
            if (!rq->item.body)
                rc = -ENOMEM;
        } else {
            rq->item.body = ts_strdup(fq.body);
            rq->item.body_len = strlen(fq.body);
            if (!rq->item.body)
                rc = -ENOMEM;
        }
        json_decref(o);
    }
    flow_request_release(&fq);
    if (rc)
        ts_errf(err, errlen, "step '%s': %s", d->name, ts_strerror(rc));
    return rc;
}

/* ---- the iteration ---- */

int traffic_next(struct traffic_actor *a, const struct tokcount *tc, struct traffic_req *out,
                 char *err, size_t errlen)
{
    const struct traffic *t = a->t;
    memset(out, 0, sizeof(*out));
    out->intent = out->prefix = -1;
    int rc;
    if (!t->has_flow) {
        if (!a->single || a->sent)
            return 0;
        a->sent = true;
        rc = t->endpoint == WORKLOAD_VECTOR_SEARCH ? build_vector(a, out, err, errlen)
                                                   : build_single(a, tc, out, err, errlen);
        if (!rc)
            rc = add_session_header(a, out);
        if (rc) {
            traffic_req_release(out);
            a->failed = true;
            return rc;
        }
        a->inflight++;
        return 1;
    }
    if (!a->fr) {
        if ((rc = flow_start(a, tc, err, errlen))) {
            a->failed = true;
            a->sent = true;
            return rc;
        }
    }
    int step = flow_run_next(a->fr);
    if (step < 0)
        return 0;
    rc = build_step(a, tc, (uint32_t)step, out, err, errlen);
    if (rc) {
        traffic_req_release(out);
        if (flow_run_complete(a->fr, (uint32_t)step, false, NULL, 0))
            a->failed = true;
        return rc;
    }
    a->inflight++;
    return 1;
}

int traffic_retrieval_done(struct traffic_actor *a, const struct traffic_req *rq, const char *req,
                           size_t req_len, const char *body, size_t len, double *recall,
                           uint32_t *k)
{
    const struct traffic *t = a->t;
    if (!t->has_flow || rq->step >= t->retr.n || !(t->retr.retrievals >> rq->step & 1))
        return 0;
    int rc =
        flow_retrieval_measure(&t->retr, t->flow, rq->step, req, req_len, body, len, recall, k);
    if (rc == 1) {
        a->recall_have |= 1ull << rq->step;
        a->recall[rq->step] = *recall;
        a->recall_k[rq->step] = *k;
    }
    return rc;
}

size_t traffic_answer_recalls(const struct traffic_actor *a, uint32_t step,
                              struct traffic_recall *out, size_t n)
{
    const struct traffic *t = a->t;
    if (!t->has_flow || !flow_retrieval_is_answer(&t->retr, step))
        return 0;
    uint64_t m = t->retr.before[step] & a->recall_have;
    size_t c = 0;
    for (uint32_t i = 0; i < t->retr.n && c < n; i++)
        if (m >> i & 1)
            out[c++] = (struct traffic_recall){i, a->recall_k[i], a->recall[i]};
    return c;
}

static int history_push(struct traffic_actor *a, const char *role, const char *text, size_t len)
{
    if (a->nhist == TRAFFIC_MAX_HISTORY) {
        /* drop the oldest user/assistant pair */
        ts_free(a->hist[0].text);
        ts_free(a->hist[1].text);
        memmove(a->hist, a->hist + 2, (a->nhist - 2) * sizeof(a->hist[0]));
        a->nhist -= 2;
    }
    char *s = ts_strndup(text ? text : "", len);
    if (!s)
        return -ENOMEM;
    a->hist[a->nhist++] = (struct hmsg){role, s, len};
    return 0;
}

void traffic_done(struct traffic_actor *a, const struct traffic_req *rq, bool ok,
                  const char *answer, size_t answer_len, const char *body, size_t body_len)
{
    const struct traffic *t = a->t;
    if (a->inflight)
        a->inflight--;
    if (!t->has_flow) {
        if (!ok) {
            a->failed = true;
            a->session_failed = true;
        } else if (a->user && a->turn + 1 < a->turns) {
            if (history_push(a, "user", a->user, a->user_len) ||
                history_push(a, "assistant", answer, answer_len))
                a->session_failed = true;
        }
        return;
    }
    json_t *doc = NULL;
    char *text = NULL;
    if (ok && !body && answer) {
        /* a streamed answer: captured as if it came in a non-streamed body */
        doc = json_pack("{s:[{s:{s:s,s:s%}}]}", "choices", "message", "role", "assistant",
                        "content", answer, answer_len);
        text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
        body = text;
        body_len = text ? strlen(text) : 0;
    }
    if (flow_run_complete(a->fr, rq->step, ok, body, body_len))
        a->failed = true;
    free(text);
    json_decref(doc);
}

void traffic_done_dry(struct traffic_actor *a, const struct traffic_req *rq)
{
    if (!a->t->has_flow) {
        char ans[64];
        snprintf(ans, sizeof(ans), "(dry run: the answer to turn %u)", rq->turn);
        traffic_done(a, rq, true, ans, strlen(ans), NULL, 0);
        return;
    }
    if (a->inflight)
        a->inflight--;
    if (flow_run_complete_dry(a->fr, rq->step))
        a->failed = true;
}

bool traffic_in_session(const struct traffic_actor *a)
{
    return a->in_session;
}

bool traffic_iteration_done(const struct traffic_actor *a)
{
    if (a->inflight)
        return false;
    if (!a->t->has_flow)
        return a->sent;
    return !a->fr || flow_run_done(a->fr);
}

void traffic_iteration_why(const struct traffic_actor *a, char *out, size_t n)
{
    if (!n)
        return;
    if (!a->t->has_flow) {
        snprintf(out, n, "the request failed");
        return;
    }
    if (!a->fr) {
        snprintf(out, n, "the flow could not start");
        return;
    }
    const struct flow_def *d = a->t->flow;
    for (uint32_t i = 0; i < d->n; i++) {
        const char *why = flow_run_fail_reason(a->fr, i);
        if (!why)
            continue;
        const struct flow_capture *cap = flow_run_fail_capture(a->fr, i);
        if (cap && !strcmp(why, "returned nothing"))
            snprintf(out, n, "step '%.40s': capture '%.40s' (%.80s) found nothing in the response",
                     d->steps[i].name, cap->var ? cap->var : "", cap->pointer ? cap->pointer : "");
        else if (cap)
            snprintf(out, n, "step '%.40s': capture '%.40s': %s", d->steps[i].name,
                     cap->var ? cap->var : "", why);
        else if (!strcmp(why, "returned nothing"))
            snprintf(out, n,
                     "step '%.40s': the response was not JSON (or too long) to capture from",
                     d->steps[i].name);
        else
            snprintf(out, n, "step '%.40s': %s", d->steps[i].name,
                     !strcmp(why, "request failed") ? "the request failed" : why);
        return;
    }
    snprintf(out, n, "no step completed");
}

int traffic_iteration_outcome(const struct traffic_actor *a)
{
    if (!a->t->has_flow)
        return a->failed ? 2 : 0;
    if (!a->fr)
        return 2;
    switch (flow_run_outcome(a->fr)) {
    case FLOW_OUT_OK:
        return 0;
    case FLOW_OUT_DEGRADED:
        return 1;
    default:
        return 2;
    }
}

bool traffic_after(struct traffic_actor *a, struct rng *r, uint64_t *think_ns)
{
    const struct traffic *t = a->t;
    *think_ns = 0;
    ts_free(a->user);
    a->user = NULL;
    if (!a->in_session)
        return false;
    a->turn++;
    if (a->session_failed || a->turn >= a->turns || t->has_flow) {
        end_session(a);
        return false;
    }
    if (t->has_think) {
        double s = dist_sample(&t->think, r);
        *think_ns = s > 0 ? (uint64_t)((s < 1e9 ? s : 1e9) * 1e9) : 0; /* <= ~31.7 years */
    }
    return true;
}

void traffic_req_release(struct traffic_req *rq)
{
    work_item_release(&rq->item);
    ts_free(rq->url_buf);
    for (size_t i = 0; i < rq->nheaders; i++)
        ts_free(rq->headers[i]);
    ts_free(rq->headers);
    memset(rq, 0, sizeof(*rq));
}
