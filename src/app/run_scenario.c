/*
 * run_scenario.c - scenario files in the run job: options, classes, dry
 * runs and per-class results.
 */
#include "app/run_scenario.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "app/run_quality.h"
#include "app/run_retrieval.h"
#include "analysis/semantic.h"
#include "analysis/summary.h"
#include "base/alloc.h"
#include "base/base64.h"
#include "base/tsjson.h"
#include "base/log.h"
#include "llm/tokenizer.h"
#include "report/result.h"
#include "report/text.h"

int scenario_refuse_opts(const struct run_opts *o, char *err, size_t errlen)
{
    const struct {
        bool given;
        const char *opt, *key;
    } per_class[] = {
        {o->rate > 0, "--rate", "rate"},
        {o->arrival != NULL, "--arrival", "arrival"},
        {o->ramp_to > 0, "--ramp-to", "stages"},
        {o->stages != NULL, "--stages", "stages"},
        {o->concurrency > 0, "--concurrency", "users (closed loop) or max_concurrency"},
        {o->think != NULL, "--think", "think"},
        {o->ramp_users_ns > 0, "--ramp-users", "ramp_users"},
        {o->endpoint != NULL, "--endpoint", "endpoint"},
        {o->input_len != NULL, "--input-len", "input_tokens"},
        {o->output_len != NULL, "--output-len", "output_tokens"},
        {o->prompts != NULL, "--prompts", "prompts_file"},
        {o->system_prompt != NULL, "--system-prompt", "system"},
        {o->body != NULL, "--body", "body"},
        {o->no_stream, "--no-stream", "stream: false"},
        {o->no_ignore_eos, "--no-ignore-eos", "ignore_eos: false"},
    };
    for (size_t i = 0; i < sizeof(per_class) / sizeof(per_class[0]); i++) {
        if (per_class[i].given) {
            ts_errf(err, errlen,
                    "%s does not apply to a scenario file: each class sets its own "
                    "(`%s` in the classes of %s); set it there, or run without the file "
                    "(docs/SCENARIOS.md)",
                    per_class[i].opt, per_class[i].key, o->scenario);
            return -EINVAL;
        }
    }
    return 0;
}

void scenario_apply_opts(struct scenario *s, struct run_opts *o)
{
    if (!o->target && s->target.url)
        o->target = s->target.url;
    if (!o->model && s->target.model)
        o->model = s->target.model;
    if (!o->duration_given)
        o->duration_ns = s->duration_ns;
    if (!o->requests)
        o->requests = s->requests;
    if (!o->warmup_ns)
        o->warmup_ns = s->warmup_ns;
    if (!o->drain_given && s->has_drain)
        o->drain_ns = s->drain_ns;
    if (!o->workers)
        o->workers = s->workers;
    if (!o->seed_given)
        o->seed = s->seed;
    else
        s->seed = o->seed; /* --seed reseeds the file's generators too */
    if (!o->sim_profile && s->sim.profile)
        o->sim_profile = s->sim.profile;
    for (size_t i = 0; i < s->sim.nsets && o->nsim_sets < sizeof(o->sim_sets) / sizeof(char *); i++)
        o->sim_sets[o->nsim_sets++] = s->sim.sets[i];
    for (size_t i = 0; i < s->target.nheaders && o->nheaders < RUN_MAX_HEADERS; i++)
        o->headers[o->nheaders++] = s->target.headers[i];
    if (!o->api_key && s->target.api_key_env)
        o->api_key = getenv(s->target.api_key_env);
    if (s->target.t_connect)
        o->t_connect = s->target.t_connect;
    if (s->target.t_ttfb)
        o->t_ttfb = s->target.t_ttfb;
    if (s->target.t_idle)
        o->t_idle = s->target.t_idle;
    if (s->target.t_total)
        o->t_total = s->target.t_total;
}

bool scenario_class_streams(const struct scenario_class *c)
{
    if (c->has_flow)
        return true; /* a step's body may ask for a stream whatever the class says */
    if (c->endpoint == WORKLOAD_EMBEDDINGS)
        return false;
    const json_t *v = c->body ? json_object_get(c->body, "stream") : NULL;
    return json_is_boolean(v) ? json_is_true(v) : c->stream;
}

/* Why class c sends no stream, for people. */
static const char *no_stream_why(const struct scenario_class *c)
{
    return c->endpoint == WORKLOAD_EMBEDDINGS ? "endpoint: embeddings"
           : c->stream                        ? "body: {stream: false}"
                                              : "stream: false";
}

int scenario_check_streams(const struct scenario *s, char *err, size_t errlen)
{
    for (size_t k = 0; k < s->nclasses; k++) {
        const struct scenario_class *c = &s->classes[k];
        if (scenario_class_streams(c))
            continue;
        struct goodput_cfg g = {0};
        if (c->goodput && !run_parse_goodput(c->goodput, &g, err, errlen) &&
            goodput_cfg_needs_stream(&g)) {
            ts_errf(err, errlen,
                    "class '%s': goodput '%s': ttft and tpot need streamed requests, and the "
                    "class streams none (%s); judge e2el instead",
                    c->name, c->goodput, no_stream_why(c));
            return -EINVAL;
        }
        for (size_t i = 0; i < c->nslos; i++) {
            struct slo slo;
            if (!slo_parse(c->slos[i], &slo, NULL, 0) && (slo_needs(&slo) & SLO_NEEDS_STREAM)) {
                char name[SLO_EXPR_MAX];
                ts_errf(err, errlen,
                        "class '%s': slo '%s': %s needs streamed requests, and the class "
                        "streams none (%s): only e2el, tokens and throughput are measured",
                        c->name, c->slos[i], slo_metric_written(&slo, name, sizeof(name)),
                        no_stream_why(c));
                return -EINVAL;
            }
        }
    }
    return 0;
}

int scenario_run_tokenizer(struct scenario_run *sr, const char *path, char *err, size_t errlen)
{
    if (!path)
        return 0;
    char why[512];
    int rc = tokenizer_load_file(path, TOKENIZER_AUTO, &sr->tokenizer, why, sizeof(why));
    if (rc)
        ts_errf(err, errlen, "--tokenizer %s: %s", path, why);
    return rc;
}

int scenario_run_make_tokcount(void *arg, struct tokcount **out)
{
    struct scenario_run *sr = arg;
    *out = NULL;
    if (!sr->tokenizer)
        return 0;
    return tokcount_tokenizer_new(sr->tokenizer, out);
}

static int class_slos(struct scenario_run *sr, char *err, size_t errlen)
{
    size_t total = 0;
    for (size_t k = 0; k < sr->n; k++)
        total += sr->scn->classes[k].nslos;
    sr->slos = ts_calloc(total ? total : 1, sizeof(*sr->slos));
    sr->slo_first = ts_calloc(sr->n, sizeof(size_t));
    sr->slo_count = ts_calloc(sr->n, sizeof(size_t));
    if (!sr->slos || !sr->slo_first || !sr->slo_count)
        return -ENOMEM;
    size_t at = 0;
    for (size_t k = 0; k < sr->n; k++) {
        const struct scenario_class *c = &sr->scn->classes[k];
        sr->slo_first[k] = at;
        sr->slo_count[k] = c->nslos;
        for (size_t i = 0; i < c->nslos; i++) {
            char why[256];
            if (slo_parse(c->slos[i], &sr->slos[at++], why, sizeof(why))) {
                ts_errf(err, errlen, "class '%s': slo '%s': %s", c->name, c->slos[i], why);
                return -EINVAL;
            }
        }
    }
    return 0;
}

/* What a class lacks for an SLO (the first of lack's enum slo_needs), or NULL. */
static const char *class_lack(unsigned lack)
{
    if (lack & SLO_NEEDS_GOODPUT)
        return "the class's goodput: (e.g. goodput: \"ttft:500 e2el:5000\")";
    if (lack & SLO_NEEDS_REFERENCE)
        return "reference answers: the class's prompts file or dataset (docs/QUALITY.md)";
    return run_slo_lack(lack);
}

int scenario_check_slo_needs(const struct scenario *s, unsigned have, char *err, size_t errlen)
{
    for (size_t k = 0; k < s->nclasses; k++) {
        const struct scenario_class *c = &s->classes[k];
        unsigned chave = have & ~(unsigned)(SLO_NEEDS_GOODPUT | SLO_NEEDS_REFERENCE);
        if (c->goodput)
            chave |= SLO_NEEDS_GOODPUT;
        if (c->prompts_file || c->dataset.path)
            chave |= SLO_NEEDS_REFERENCE;
        for (size_t i = 0; i < c->nslos; i++) {
            struct slo slo;
            if (slo_parse(c->slos[i], &slo, NULL, 0))
                continue;
            const char *what = class_lack(slo_needs(&slo) & ~chave);
            if (what) {
                char name[SLO_EXPR_MAX];
                ts_errf(err, errlen, "class '%s': slo '%s': %s needs %s", c->name, c->slos[i],
                        slo_metric_written(&slo, name, sizeof(name)), what);
                return -EINVAL;
            }
        }
    }
    return 0;
}

void scenario_run_total_recall(const struct scenario_run *sr, struct run_stats *total)
{
    for (size_t k = 0; total && k < sr->n; k++)
        if (sr->traffic[k].endpoint != WORKLOAD_VECTOR_SEARCH) {
            memset(&total->recall, 0, sizeof(total->recall));
            total->recall_k = 0;
            return;
        }
}

void scenario_vector_opts(const struct scenario_vector *v, struct run_vector_opts *o)
{
    run_vector_opts_init(o);
    o->data = v->data;
    o->index = v->index;
    o->queries = v->queries;
    o->truth = v->truth;
    o->k = v->k;
    o->nprobe = v->nprobe;
    o->ef_search = v->ef_search;
    o->has_nprobe = v->has_nprobe;
    o->has_ef_search = v->has_ef_search;
    o->seed = v->seed;
}

/* A vector-search class's queries and ground truth (blocking: the exact
 * search), lent to its traffic; "--vector-X:" messages become "vector.X:". */
static int class_vectors(struct scenario_run *sr, size_t k, char *err, size_t errlen)
{
    const struct scenario_class *c = &sr->scn->classes[k];
    struct run_vector_opts o;
    char e2[512] = "";
    scenario_vector_opts(&c->vector, &o);
    o.embed = sr->embed;
    if (vector_embed_is_spec(o.queries) && !o.embed)
        return 0; /* --check, --dry-run: no server to embed them */
    int rc = run_vector_prepare(&o, &sr->vec[k], e2, sizeof(e2));
    if (rc) {
        bool opt = !strncmp(e2, "--vector-", 9);
        ts_errf(err, errlen, "%s%s", opt ? "vector." : "", opt ? e2 + 9 : e2);
        return rc;
    }
    sr->traffic[k].vectors = &sr->vec[k].queries;
    sr->traffic[k].truth = &sr->vec[k].truth;
    return 0;
}

int scenario_run_init(struct scenario_run *sr, struct scenario *s, const char *base_url,
                      const char *model, uint64_t requests, char *err, size_t errlen)
{
    struct tokenizer *keep = sr->tokenizer;
    const struct vector_embed_target *embed = sr->embed;
    memset(sr, 0, sizeof(*sr));
    sr->tokenizer = keep;
    sr->embed = embed;
    sr->scn = s;
    sr->traffic = ts_calloc(s->nclasses, sizeof(*sr->traffic));
    sr->classes = ts_calloc(s->nclasses, sizeof(*sr->classes));
    sr->times = ts_calloc(s->nclasses, sizeof(*sr->times));
    sr->vec = ts_calloc(s->nclasses, sizeof(*sr->vec));
    if (!sr->traffic || !sr->classes || !sr->times || !sr->vec) {
        ts_errf(err, errlen, "out of memory");
        scenario_run_release(sr);
        return -ENOMEM;
    }
    struct tokcount *tc = NULL;
    int rc = scenario_run_make_tokcount(sr, &tc);
    for (size_t k = 0; !rc && k < s->nclasses; k++) {
        rc = traffic_init(&sr->traffic[k], s, (uint32_t)k, base_url, model, tc, err, errlen);
        if (!rc)
            sr->n = k + 1;
        if (!rc && s->classes[k].endpoint == WORKLOAD_VECTOR_SEARCH)
            rc = class_vectors(sr, k, err, errlen);
        if (rc) {
            char why[512];
            snprintf(why, sizeof(why), "%s", err);
            ts_errf(err, errlen, "class '%s': %s", s->classes[k].name, why);
            break;
        }
        sr->n = k + 1;
        const struct scenario_class *c = &s->classes[k];
        struct runner_class *r = &sr->classes[k];
        struct traffic *t = &sr->traffic[k];
        r->name = t->name;
        r->traffic = t;
        r->max_iterations = c->requests ? c->requests : requests;
        if (t->source == TRAFFIC_DATASET && c->dataset.format == DATASET_TRACE) {
            /* trace replay: the recorded offsets are the schedule */
            sr->times[k] = ts_calloc(t->data.n, sizeof(uint64_t));
            if (!sr->times[k]) {
                rc = -ENOMEM;
                break;
            }
            for (size_t i = 0; i < t->data.n; i++)
                sr->times[k][i] = t->data.convs[i].at_ns;
            r->mode = RUNNER_OPEN;
            r->times = sr->times[k];
            r->ntimes = t->data.n;
            r->max_concurrency = c->max_concurrency;
        } else if (c->open) {
            r->mode = RUNNER_OPEN;
            r->arrival.process = c->process;
            r->arrival.rate = c->rate;
            r->arrival.stages = c->stages;
            r->max_concurrency = c->max_concurrency;
        } else {
            r->mode = RUNNER_CLOSED;
            r->users = c->users;
            r->think = c->has_think ? &c->think : NULL;
            r->ramp_users_ns = c->ramp_users_ns;
        }
        if (c->goodput && (rc = run_parse_goodput(c->goodput, &r->goodput, err, errlen)))
            break;
    }
    tokcount_free(tc);
    if (!rc)
        rc = class_slos(sr, err, errlen);
    if (rc) {
        if (rc == -ENOMEM && !err[0])
            ts_errf(err, errlen, "out of memory");
        scenario_run_release(sr);
    }
    return rc;
}

void scenario_run_release(struct scenario_run *sr)
{
    for (size_t k = 0; sr->traffic && k < sr->n; k++)
        traffic_release(&sr->traffic[k]);
    for (size_t k = 0; sr->times && sr->scn && k < sr->scn->nclasses; k++)
        ts_free(sr->times[k]);
    for (size_t k = 0; sr->vec && sr->scn && k < sr->scn->nclasses; k++)
        run_vector_release(&sr->vec[k]);
    ts_free(sr->vec);
    ts_free(sr->times);
    ts_free(sr->traffic);
    ts_free(sr->classes);
    ts_free(sr->slos);
    ts_free(sr->slo_first);
    ts_free(sr->slo_count);
    tokenizer_free(sr->tokenizer);
    memset(sr, 0, sizeof(*sr));
}

/* ---- --dry-run ---- */

struct lenstats {
    uint32_t *v;
    size_t n, cap;
};

static int lenstats_add(struct lenstats *l, uint32_t x)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        uint32_t *v = ts_realloc(l->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static json_t *lenstats_json(struct lenstats *l)
{
    if (!l->n)
        return json_null();
    qsort(l->v, l->n, sizeof(*l->v), cmp_u32);
    double sum = 0;
    for (size_t i = 0; i < l->n; i++)
        sum += l->v[i];
#define PCT(p) l->v[(size_t)((double)(l->n - 1) * (p) + 0.5)]
    return json_pack("{s:I, s:I, s:f, s:I, s:I, s:I, s:I}", "count", (json_int_t)l->n, "min",
                     (json_int_t)l->v[0], "mean", sum / (double)l->n, "p50", (json_int_t)PCT(0.5),
                     "p90", (json_int_t)PCT(0.9), "p99", (json_int_t)PCT(0.99), "max",
                     (json_int_t)l->v[l->n - 1]);
#undef PCT
}

/* The user turn's text of a generated body, for the semantic mix. */
static void body_user_text(json_t *body, const char **s, size_t *n)
{
    *s = NULL;
    *n = 0;
    json_t *m = json_object_get(body, "messages");
    json_t *c = NULL;
    if (json_is_array(m) && json_array_size(m))
        c = json_object_get(json_array_get(m, json_array_size(m) - 1), "content");
    if (!c)
        c = json_object_get(body, "prompt");
    if (!c) {
        c = json_object_get(body, "input");
        if (json_is_array(c))
            c = json_array_get(c, 0);
    }
    if (json_is_string(c)) {
        *s = json_string_value(c);
        *n = json_string_length(c);
    }
}

static int count_name(json_t *obj, const char *name)
{
    json_t *v = json_object_get(obj, name);
    json_int_t n = json_is_integer(v) ? json_integer_value(v) : 0;
    return json_object_set_new(obj, name, json_integer(n + 1));
}

struct dry_class {
    struct lenstats prompt, output, turns;
    json_t *intents, *perturb;
    uint64_t requests, with_prefix, trimmed, invalid_utf8;
    struct semantic *sem;
};

/*
 * A body that is not valid JSON text as UTF-8 (an invalid_utf8 perturbation)
 * cannot be a JSON string: "body_base64" holds its bytes. 0 or -ENOMEM.
 */
static int dry_body_base64(json_t *line, const char *body, size_t len)
{
    char *b64 = ts_malloc(base64_len(len) + 1);
    if (!b64)
        return -ENOMEM;
    (void)base64_encode(body, len, b64);
    int rc = tsjson_put(line, "body_base64", json_string(b64));
    ts_free(b64);
    return rc;
}

static int dry_line(FILE *out, const struct traffic *t, const struct traffic_req *rq, json_t *body)
{
    json_t *line = json_pack("{s:s, s:I}", "class", t->name, "step", (json_int_t)rq->step);
    if (!line)
        return -ENOMEM;
    if (t->has_flow)
        json_object_set_new(line, "step", json_string(traffic_step_name(t, rq->step)));
    else
        json_object_del(line, "step");
    if (rq->session) {
        json_object_set_new(line, "session", json_integer((json_int_t)rq->session - 1));
        json_object_set_new(line, "turn", json_integer(rq->turn));
    }
    if (rq->intent >= 0 && t->has_gen)
        json_object_set_new(line, "intent",
                            json_string(promptgen_intent_name(&t->gen, (uint32_t)rq->intent)));
    if (rq->prefix >= 0)
        json_object_set_new(line, "prefix", json_integer(rq->prefix));
    if (rq->perturb_mask) {
        struct buf names;
        buf_init(&names, 4096);
        if (!perturb_mask_names(&t->perturb, rq->perturb_mask, &names))
            json_object_set_new(line, "perturbations",
                                json_stringn(names.data ? names.data : "", names.len));
        buf_release(&names);
    }
    if (rq->trimmed)
        json_object_set_new(line, "trimmed", json_integer(rq->trimmed));
    json_object_set_new(line, "method", json_string(rq->method ? rq->method : "POST"));
    json_object_set_new(line, "url", json_string(rq->url ? rq->url : ""));
    if (rq->nheaders) {
        json_t *h = json_array();
        for (size_t i = 0; i < rq->nheaders; i++)
            json_array_append_new(h, json_string(rq->headers[i]));
        json_object_set_new(line, "headers", h);
    }
    json_object_set_new(line, "prompt_tokens", json_integer(rq->item.prompt_tokens));
    json_object_set_new(line, "max_tokens", json_integer(rq->item.max_tokens));
    int rc = 0;
    if (body)
        json_object_set(line, "body", body);
    else
        rc = dry_body_base64(line, rq->item.body, rq->item.body_len);
    char *s = rc ? NULL : json_dumps(line, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(line);
    if (!s)
        return -ENOMEM;
    rc = fprintf(out, "%s\n", s) < 0 ? -EIO : 0;
    free(s);
    return rc;
}

static int dry_class_run(struct scenario_run *sr, size_t k, uint64_t iterations, FILE *out,
                         const struct tokcount *tc, struct dry_class *dc, char *err, size_t errlen)
{
    const struct traffic *t = &sr->traffic[k];
    const struct runner_class *rcls = &sr->classes[k];
    uint64_t n = iterations;
    if (rcls->max_iterations && rcls->max_iterations < n)
        n = rcls->max_iterations;
    if (rcls->times && rcls->ntimes < n)
        n = rcls->ntimes;
    int rc = 0;
    uint64_t session_no = 0;
    struct traffic_actor *a = NULL;
    for (uint64_t it = 0; it < n && !rc; it++) {
        if (!a) {
            if ((rc = traffic_actor_new(t, session_no, &a)))
                break;
        }
        bool fresh = !traffic_in_session(a);
        if ((rc = traffic_begin(a, session_no, tc)))
            break;
        if (fresh)
            session_no++;
        for (;;) {
            struct traffic_req rq;
            char why[256] = "";
            int got = traffic_next(a, tc, &rq, why, sizeof(why));
            if (got < 0) {
                ts_errf(err, errlen, "class '%s': %s", t->name, why);
                rc = got;
                break;
            }
            if (!got)
                break;
            json_t *body = json_loadb(rq.item.body, rq.item.body_len, 0, NULL);
            dc->requests++;
            rc = lenstats_add(&dc->prompt, rq.item.prompt_tokens);
            rc = rc ? rc : lenstats_add(&dc->output, rq.item.max_tokens);
            if (!rc && rq.intent >= 0 && t->has_gen)
                rc = count_name(dc->intents, promptgen_intent_name(&t->gen, (uint32_t)rq.intent));
            for (size_t i = 0; !rc && i < t->perturb.n; i++) {
                if (rq.perturb_mask & (1u << i))
                    rc = count_name(dc->perturb, perturb_kind_name(t->perturb.v[i].kind));
            }
            dc->with_prefix += rq.prefix >= 0;
            dc->trimmed += rq.trimmed > 0;
            dc->invalid_utf8 += body == NULL;
            if (!rc && body) {
                const char *u;
                size_t ulen;
                body_user_text(body, &u, &ulen);
                if (u)
                    rc = semantic_add(dc->sem, u, ulen);
            }
            if (!rc && out)
                rc = dry_line(out, t, &rq, body);
            json_decref(body);
            /* a session's next turn gets a placeholder answer, a flow step placeholder
             * captures, so later turns and steps are generated too */
            if (!rc)
                traffic_done_dry(a, &rq);
            traffic_req_release(&rq);
        }
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
    return rc;
}

int scenario_run_dry(struct scenario_run *sr, uint64_t iterations, FILE *out, json_t **summary,
                     char *err, size_t errlen)
{
    json_t *classes = json_array();
    struct tokcount *tc = NULL;
    int rc = classes ? scenario_run_make_tokcount(sr, &tc) : -ENOMEM;
    for (size_t k = 0; !rc && k < sr->n; k++) {
        struct dry_class dc;
        memset(&dc, 0, sizeof(dc));
        dc.intents = json_object();
        dc.perturb = json_object();
        struct semantic_cfg scfg = {0};
        rc = dc.intents && dc.perturb ? semantic_new(&scfg, &dc.sem) : -ENOMEM;
        if (!rc)
            rc = dry_class_run(sr, k, iterations, out, tc, &dc, err, errlen);
        if (!rc) {
            struct semantic_summary ss;
            semantic_get(dc.sem, &ss);
            json_t *c =
                json_pack("{s:s, s:I, s:O, s:o, s:o, s:O, s:f, s:I, s:I, s:o}", "class",
                          sr->traffic[k].name, "requests", (json_int_t)dc.requests, "intents",
                          dc.intents, "prompt_tokens", lenstats_json(&dc.prompt), "max_tokens",
                          lenstats_json(&dc.output), "perturbations", dc.perturb, "prefix_reuse",
                          dc.requests ? (double)dc.with_prefix / (double)dc.requests : 0.0,
                          "trimmed", (json_int_t)dc.trimmed, "invalid_utf8_bodies",
                          (json_int_t)dc.invalid_utf8, "semantic", semantic_summary_json(&ss));
            rc = c ? json_array_append_new(classes, c) : -ENOMEM;
        }
        json_decref(dc.intents);
        json_decref(dc.perturb);
        semantic_free(dc.sem);
        ts_free(dc.prompt.v);
        ts_free(dc.output.v);
        ts_free(dc.turns.v);
    }
    tokcount_free(tc);
    if (rc) {
        if (!err[0])
            ts_errf(err, errlen, "dry run: %s", ts_strerror(rc));
        json_decref(classes);
        return rc;
    }
    *summary = json_pack("{s:s, s:I, s:o}", "scenario", sr->scn->name ? sr->scn->name : "", "seed",
                         (json_int_t)sr->scn->seed, "classes", classes);
    return *summary ? 0 : -ENOMEM;
}

/* ---- results ---- */

/* Failed iterations by reason, most frequent first: [{count, message}]. */
static json_t *iter_reasons_json(const struct errtally *t)
{
    size_t idx[ERRTALLY_SLOTS];
    size_t n = errtally_top(t, idx, ERRTALLY_SLOTS);
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++)
        json_array_append_new(arr, json_pack("{s:I, s:s}", "count", (json_int_t)t->e[idx[i]].count,
                                             "message", t->e[idx[i]].msg));
    return arr;
}

bool scenario_class_none_ok(const struct scenario_run *sr, const struct runner_result *res,
                            size_t k, char *why, size_t n)
{
    if (k >= sr->n || k >= res->nclasses)
        return false;
    const struct runner_class_result *r = &res->classes[k];
    const struct traffic *t = &sr->traffic[k];
    if (!(t->has_flow || t->sessions) || !r->iterations || r->iter_outcome[0] || r->iter_outcome[1])
        return false;
    size_t top = 0;
    if (!n)
        return true;
    if (errtally_top(&r->iter_why, &top, 1))
        snprintf(why, n, "no iteration succeeded: %llu of %llu failed, most as %s (%llu)",
                 (unsigned long long)r->iter_outcome[2], (unsigned long long)r->iterations,
                 r->iter_why.e[top].msg, (unsigned long long)r->iter_why.e[top].count);
    else
        snprintf(why, n, "no iteration succeeded: %llu of %llu failed",
                 (unsigned long long)r->iter_outcome[2], (unsigned long long)r->iterations);
    return true;
}

static json_t *iterations_json(const struct runner_class_result *r)
{
    json_t *lat = NULL;
    if (r->iter_latency && r->iterations) {
        lat = json_pack("{s:f, s:f, s:f, s:f}", "p50_ms",
                        (double)hdr_value_at_percentile(r->iter_latency, 50) / 1000.0, "p90_ms",
                        (double)hdr_value_at_percentile(r->iter_latency, 90) / 1000.0, "p99_ms",
                        (double)hdr_value_at_percentile(r->iter_latency, 99) / 1000.0, "max_ms",
                        (double)hdr_max(r->iter_latency) / 1000.0);
    }
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:o*, s:o*, s:I}", "count",
                     (json_int_t)r->iterations, "ok", (json_int_t)r->iter_outcome[0], "degraded",
                     (json_int_t)r->iter_outcome[1], "failed", (json_int_t)r->iter_outcome[2],
                     "sessions", (json_int_t)r->sessions, "latency", lat, "failure_reasons",
                     iter_reasons_json(&r->iter_why), "failure_reasons_other",
                     (json_int_t)r->iter_why.other);
}

/* The make-up of what the class actually sent (warm-up included). */
static json_t *sent_json(const struct traffic *t, const struct runner_class_result *r)
{
    json_t *intents = json_object(), *pert = json_object();
    for (uint32_t i = 0; intents && t->has_gen && i < r->nintents; i++) {
        if (r->intent_sent[i])
            json_object_set_new(intents, promptgen_intent_name(&t->gen, i),
                                json_integer((json_int_t)r->intent_sent[i]));
    }
    for (size_t i = 0; pert && i < t->perturb.n && i < 16; i++)
        json_object_set_new(pert, perturb_kind_name(t->perturb.v[i].kind),
                            json_integer((json_int_t)r->perturb_sent[i]));
    return json_pack("{s:I, s:o*, s:o*, s:f, s:I}", "requests", (json_int_t)r->sent, "intents",
                     intents, "perturbations", pert, "prefix_reuse",
                     r->sent ? (double)r->with_prefix / (double)r->sent : 0.0, "trimmed",
                     (json_int_t)r->trimmed);
}

/* A step's LLM call streams its answer: its TTFT is the LLM's first token. */
static bool step_streams_llm(const struct flow_step_def *d, const struct run_stats *st)
{
    return (d->kind == FLOW_STEP_CHAT || d->kind == FLOW_STEP_COMPLETION) &&
           hdr_total_count(st->hist[STAT_TTFT]) > 0;
}

/* The summary sections of one group of requests (a class or a step). */
static json_t *group_json(const struct run_stats *st, double duration_s, double peak_tps,
                          const struct goodput_cfg *g, const struct slo *slos, size_t nslos,
                          size_t *failed)
{
    struct run_summary sum;
    run_summary_compute(&sum, st, duration_s, peak_tps, g);
    struct result_info info = {.slos = slos, .nslos = nslos};
    json_t *doc = NULL;
    if (result_build(st, &sum, &info, &doc))
        return NULL;
    static const char *const drop[] = {"schema",   "tool",       "run",
                                       "timeline", "histograms", "itl_by_position"};
    for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
        json_object_del(doc, drop[i]);
    for (size_t i = 0; failed && i < nslos; i++) {
        double actual;
        *failed += !slo_eval(&slos[i], &sum, &actual);
    }
    return doc;
}

json_t *scenario_run_results(const struct scenario_run *sr, const struct runner_result *res,
                             size_t *failed)
{
    json_t *arr = json_array();
    for (size_t k = 0; arr && k < sr->n && k < res->nclasses; k++) {
        const struct runner_class_result *r = &res->classes[k];
        const struct traffic *t = &sr->traffic[k];
        json_t *c =
            group_json(r->stats, res->duration_s, r->peak_output_tps, &sr->classes[k].goodput,
                       sr->slos + sr->slo_first[k], sr->slo_count[k], failed);
        if (!c)
            continue;
        if (t->has_flow || t->sessions) {
            /* iterations first: each HTTP call may be ok while the flow fails */
            json_t *lead = json_object();
            if (lead && !json_object_set_new(lead, "name", json_string(t->name)) &&
                !json_object_set_new(lead, "iterations", iterations_json(r)) &&
                !json_object_update(lead, c)) {
                json_decref(c);
                c = lead;
            } else {
                json_decref(lead);
            }
        }
        /* a flow's searches are in its retrieval steps: the class's QPS counts every step */
        if (t->has_flow)
            json_object_del(c, "vector_search");
        json_object_set_new(c, "name", json_string(t->name));
        json_object_set_new(c, "mode",
                            json_string(sr->classes[k].mode == RUNNER_OPEN ? "open" : "closed"));
        if (!json_object_get(c, "iterations"))
            json_object_set_new(c, "iterations", iterations_json(r));
        json_object_set_new(c, "sent", sent_json(t, r));
        if (r->steps) {
            json_t *steps = json_array();
            for (uint32_t s = 0; s < r->nsteps; s++) {
                json_t *sj = group_json(r->steps[s], res->duration_s, 0, &sr->classes[k].goodput,
                                        NULL, 0, NULL);
                if (!sj)
                    continue;
                const struct flow_step_def *d = &t->flow->steps[s];
                json_object_set_new(sj, "name", json_string(d->name));
                json_object_set_new(sj, "kind", json_string(flow_step_kind_name(d->kind)));
                json_object_set_new(sj, "llm_stream",
                                    json_boolean(step_streams_llm(d, r->steps[s])));
                if (d->role)
                    json_object_set_new(sj, "role", json_string(d->role));
                if (d->retrieval_k)
                    json_object_set_new(sj, "retrieval", retrieval_step_json(r->steps[s], t, s));
                json_array_append_new(steps, sj);
            }
            json_object_set_new(c, "steps", steps);
        }
        json_array_append_new(arr, c);
    }
    return arr;
}

#define ITER_TOP_REASONS 3

/* A flow or session class's iterations, before its requests: what failed
 * and why, since every HTTP call of a failed iteration may have been ok. */
static void print_iterations(FILE *f, const struct runner_class_result *r)
{
    double failed_pct =
        r->iterations ? 100.0 * (double)r->iter_outcome[2] / (double)r->iterations : 0.0;
    fprintf(f, "iterations    %llu: %llu ok, %llu degraded, %llu failed (%.2f%%)",
            (unsigned long long)r->iterations, (unsigned long long)r->iter_outcome[0],
            (unsigned long long)r->iter_outcome[1], (unsigned long long)r->iter_outcome[2],
            failed_pct);
    if (r->iterations && r->iter_latency)
        fprintf(f, "; time p50 %.1f ms p99 %.1f ms",
                (double)hdr_value_at_percentile(r->iter_latency, 50) / 1000.0,
                (double)hdr_value_at_percentile(r->iter_latency, 99) / 1000.0);
    fputc('\n', f);
    size_t idx[ITER_TOP_REASONS];
    size_t n = errtally_top(&r->iter_why, idx, ITER_TOP_REASONS);
    for (size_t i = 0; i < n; i++) {
        char msg[REQ_ERROR_MAX];
        size_t j = 0;
        for (const char *s = r->iter_why.e[idx[i]].msg; *s && j + 1 < sizeof(msg); s++, j++)
            msg[j] = ((unsigned char)*s < 0x20 || *s == 0x7f) ? '?' : *s;
        msg[j] = '\0';
        fprintf(f, "  failed %5llu  %s\n", (unsigned long long)r->iter_why.e[idx[i]].count, msg);
    }
    if (r->iterations && !r->iter_outcome[0] && !r->iter_outcome[1])
        fprintf(f, "  no iteration succeeded: the requests below may be ok while every "
                   "iteration failed its steps\n");
}

/* A latency of h at percentile q in ms, or "-" when h has no value. */
static const char *step_ms(const struct hdr *h, double q, char *buf, size_t n)
{
    if (!hdr_total_count(h))
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%.1f", (double)hdr_value_at_percentile(h, q) / 1000.0);
    return buf;
}

static void print_step_header(FILE *f, const char *first)
{
    fprintf(f, "  %-22s %-18s %7s %6s %9s %9s %9s %9s %9s\n", first, "kind", "calls", "failed",
            "TTFT p50", "TTFT p99", "E2EL p50", "E2EL p90", "E2EL p99");
}

/* One row a step: calls, failures, TTFT (streamed LLM steps only), E2EL. */
static void print_step_table(FILE *f, const struct traffic *t, const struct runner_class_result *r,
                             const char *prefix)
{
    char a[24], b[24], c[24], d[24], e[24], name[96];
    for (uint32_t s = 0; s < r->nsteps; s++) {
        const struct run_stats *st = r->steps[s];
        const struct flow_step_def *def = &t->flow->steps[s];
        bool llm = step_streams_llm(def, st);
        char kind[32];
        snprintf(kind, sizeof(kind), "%s%s", flow_step_kind_name(def->kind), llm ? " stream" : "");
        snprintf(name, sizeof(name), "%s%s%s", prefix ? prefix : "", prefix ? "/" : "", def->name);
        fprintf(f, "  %-22s %-18s %7llu %6llu %9s %9s %9s %9s %9s\n", name, kind,
                (unsigned long long)st->requests, (unsigned long long)run_stats_failed(st),
                llm ? step_ms(st->hist[STAT_TTFT], 50, a, sizeof(a)) : "-",
                llm ? step_ms(st->hist[STAT_TTFT], 99, b, sizeof(b)) : "-",
                step_ms(st->hist[STAT_E2EL], 50, c, sizeof(c)),
                step_ms(st->hist[STAT_E2EL], 90, d, sizeof(d)),
                step_ms(st->hist[STAT_E2EL], 99, e, sizeof(e)));
    }
}

bool scenario_run_has_steps(const struct scenario_run *sr, const struct runner_result *res)
{
    for (size_t k = 0; k < sr->n && k < res->nclasses; k++)
        if (res->classes[k].steps && res->classes[k].nsteps)
            return true;
    return false;
}

void scenario_run_print_steps(FILE *f, const struct scenario_run *sr,
                              const struct runner_result *res)
{
    if (!scenario_run_has_steps(sr, res))
        return;
    fprintf(f, "\nlatency by flow step (ms): the table above counts every call of every step,\n"
               "embeddings, searches and LLM calls alike; TTFT here is the LLM's own, for the\n"
               "streamed chat and completion steps only\n");
    print_step_header(f, "class/step");
    for (size_t k = 0; k < sr->n && k < res->nclasses; k++)
        if (res->classes[k].steps)
            print_step_table(f, &sr->traffic[k], &res->classes[k], sr->traffic[k].name);
    retrieval_print(f, sr->traffic, sr->n, res);
}

void scenario_run_print(FILE *f, const struct scenario_run *sr, const struct runner_result *res)
{
    for (size_t k = 0; k < sr->n && k < res->nclasses; k++) {
        const struct runner_class_result *r = &res->classes[k];
        const struct traffic *t = &sr->traffic[k];
        struct run_summary sum;
        run_summary_compute(&sum, r->stats, res->duration_s, r->peak_output_tps,
                            &sr->classes[k].goodput);
        fprintf(f, "\n== class %s (%s loop) ==\n", t->name,
                sr->classes[k].mode == RUNNER_OPEN ? "open" : "closed");
        if (t->has_flow || t->sessions)
            print_iterations(f, r);
        if (report_text_summary(f, r->stats, &sum))
            ts_warn("cannot print the summary of class %s", t->name);
        if (r->steps) {
            print_step_header(f, "step");
            print_step_table(f, t, r, NULL);
        }
        size_t nfailed = 0;
        if (sr->slo_count[k] &&
            report_text_slo(f, sr->slos + sr->slo_first[k], sr->slo_count[k], &sum, &nfailed))
            ts_warn("cannot print the SLOs of class %s", t->name);
    }
}

void scenario_print_check(FILE *f, const struct scenario *s)
{
    fprintf(f, "%s: ok: %zu class%s\n", s->path ? s->path : "scenario", s->nclasses,
            s->nclasses == 1 ? "" : "es");
    for (size_t k = 0; k < s->nclasses; k++) {
        const struct scenario_class *c = &s->classes[k];
        const char *src = c->endpoint == WORKLOAD_VECTOR_SEARCH ? "vector search"
                          : c->has_prompts                      ? "prompt schema"
                          : c->prompts_file                     ? "prompts file"
                          : c->dataset.path ? dataset_format_name(c->dataset.format)
                                            : "synthetic";
        bool trace = c->dataset.path && c->dataset.format == DATASET_TRACE;
        fprintf(f, "  %-16s %s", c->name,
                trace     ? "trace replay"
                : c->open ? "open loop"
                          : "closed loop");
        if (trace)
            ;
        else if (c->open && c->stages)
            fprintf(f, " stages %s", c->stages);
        else if (c->open)
            fprintf(f, " %.3g req/s", c->rate);
        if (!c->open)
            fprintf(f, " %u users", c->users);
        fprintf(f, ", %s%s%s%s, %zu SLO%s\n", src, c->sessions.enabled ? ", sessions" : "",
                c->has_flow ? ", flow" : "", c->perturbations ? ", perturbations" : "", c->nslos,
                c->nslos == 1 ? "" : "s");
    }
}
