/*
 * result.c - result.json and requests.jsonl (see result.h).
 */
#include "report/result.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <getopt.h>
#include <strings.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/chars.h"
#include "base/hostinfo.h"
#include "base/tsjson.h"
#include "base/clock.h"
#include "base/hdr.h"
#include "load/live_metrics.h"
#include "ts_config.h"

/* ---- building blocks ------------------------------------------------------ */

static const char *const secret_keys[] = {
    "api_key",  "apikey", "api-key", "x-api-key", "authorization", "proxy-authorization",
    "password", "secret", "token",
};

static bool is_secret_key(const char *key)
{
    for (size_t i = 0; i < sizeof(secret_keys) / sizeof(secret_keys[0]); i++) {
        if (strcasecmp(key, secret_keys[i]) == 0)
            return true;
    }
    return false;
}

/* Removes credential-named keys from v, at any depth. */
static void drop_secrets(json_t *v)
{
    if (json_is_object(v)) {
        const char *key;
        json_t *child;
        void *tmp;
        json_object_foreach_safe(v, tmp, key, child)
        {
            if (is_secret_key(key))
                json_object_del(v, key);
            else
                drop_secrets(child);
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *child;
        json_array_foreach(v, i, child)
        {
            drop_secrets(child);
        }
    }
}

/* ---- redaction of the command line and of "run"'s strings ------------------- */

/* The exact secret key names, for a name that is not NUL-terminated. */
static bool is_secret_name(const char *name, size_t len)
{
    char key[64];
    if (len >= sizeof(key))
        return false;
    memcpy(key, name, len);
    key[len] = '\0';
    return is_secret_key(key);
}

bool result_secret_header(const char *name, size_t len)
{
    static const char *const parts[] = {"auth",   "token",   "secret",    "passw",
                                        "cookie", "session", "signature", "credential"};
    if (is_secret_name(name, len))
        return true;
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
        if (chars_has_ci(name, len, parts[i]))
            return true;
    return len >= 3 && !strncasecmp(name + len - 3, "key", 3);
}

/* An option's name (no dashes) is a credential's: --api-key, --integrity-key, --api-token. */
static bool secret_option(const char *name, size_t len)
{
    static const char *const suffixes[] = {"key", "token", "secret", "password"};
    if (is_secret_name(name, len))
        return true;
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        size_t sl = strlen(suffixes[i]);
        if (len > sl && (name[len - sl - 1] == '-' || name[len - sl - 1] == '_') &&
            !strncasecmp(name + len - sl, suffixes[i], sl))
            return true;
    }
    return false;
}

enum arg_kind { ARG_PLAIN, ARG_SECRET, ARG_HEADER, ARG_BODY };

static enum arg_kind option_kind(const char *name, size_t len)
{
    if (secret_option(name, len))
        return ARG_SECRET;
    if ((len == 6 && !strncmp(name, "header", 6)) ||
        (len > 7 && !strncmp(name + len - 7, "-header", 7)))
        return ARG_HEADER;
    if (len == 4 && !strncmp(name, "body", 4))
        return ARG_BODY;
    return ARG_PLAIN;
}

/*
 * "--NAME" (len bytes of name) as getopt_long reads it with opts: an exact
 * name, else the one option it abbreviates. *takes_next: its value is the next
 * argument. A name that matches no option, or several, is a secret (taking the
 * next argument) when it or one of the options it abbreviates is.
 */
static enum arg_kind option_lookup(const struct option *opts, const char *name, size_t len,
                                   bool *takes_next)
{
    const struct option *hit = NULL;
    size_t n = 0;
    bool any_secret = secret_option(name, len);

    for (const struct option *o = opts; o && o->name; o++) {
        if (strncmp(o->name, name, len))
            continue;
        if (strlen(o->name) == len) {
            hit = o;
            n = 1;
            break;
        }
        hit = o;
        n++;
        any_secret |= secret_option(o->name, strlen(o->name));
    }
    if (n == 1) {
        *takes_next = hit->has_arg == required_argument;
        return option_kind(hit->name, strlen(hit->name));
    }
    *takes_next = any_secret;
    return any_secret ? ARG_SECRET : ARG_PLAIN;
}

/* A value of kind k, redacted, appended to b. */
static int put_value(struct buf *b, enum arg_kind k, const char *v)
{
    if (k == ARG_SECRET)
        return buf_append_str(b, RESULT_REDACTED);
    if (k == ARG_HEADER) {
        const char *colon = strchr(v, ':');
        size_t nl = colon ? (size_t)(colon - v) : strlen(v);
        while (nl && (v[nl - 1] == ' ' || v[nl - 1] == '\t'))
            nl--;
        if (colon && result_secret_header(v, nl))
            return buf_appendf(b, "%.*s: " RESULT_REDACTED, (int)nl, v);
    }
    if (k == ARG_BODY) {
        json_t *body = json_loads(v, JSON_DECODE_ANY, NULL);
        char *text = NULL;
        if (body) {
            drop_secrets(body);
            text = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
        }
        json_decref(body);
        if (text) {
            int rc = buf_append_str(b, text);
            free(text);
            return rc;
        }
    }
    return buf_append_str(b, v);
}

/* One argument, redacted, appended to arr; *pending: how the next one is read. */
static int put_arg(json_t *arr, const struct result_info *info, const char *a, bool *after_dashes,
                   int *pending)
{
    struct buf b;
    int rc = 0;

    buf_init(&b, (size_t)1 << 24);
    if (*pending >= 0) {
        rc = put_value(&b, (enum arg_kind) * pending, a);
        *pending = -1;
    } else if (*after_dashes || strncmp(a, "--", 2)) {
        rc = put_value(&b, ARG_PLAIN, a);
    } else if (!a[2]) {
        *after_dashes = true;
        rc = buf_append_str(&b, a);
    } else {
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        bool takes_next = false;
        enum arg_kind k = option_lookup(info->options, a + 2, len, &takes_next);
        rc = buf_append(&b, a, eq ? (size_t)(eq - a) + 1 : strlen(a));
        if (!rc && eq)
            rc = put_value(&b, k, eq + 1);
        else if (takes_next)
            *pending = (int)k;
    }
    if (!rc)
        rc = json_array_append_new(arr, json_stringn(buf_cstr(&b), b.len)) ? -ENOMEM : 0;
    buf_release(&b);
    return rc;
}

/* run.command_line: ["tokenstorm", argv[0], ...], redacted. */
static json_t *command_line(const struct result_info *info)
{
    json_t *arr = json_array();
    bool after_dashes = false;
    int pending = -1;
    int rc = arr && json_array_append_new(arr, json_string("tokenstorm")) ? -ENOMEM : 0;

    for (int i = 0; !rc && i < info->argc; i++)
        rc = info->argv[i] ? put_arg(arr, info, info->argv[i], &after_dashes, &pending) : 0;
    if (rc) {
        json_decref(arr);
        return NULL;
    }
    return arr;
}

int result_put_query(struct buf *b, const char *q, const char *end)
{
    int rc = 0;
    while (!rc && q < end) {
        const char *amp = memchr(q, '&', (size_t)(end - q));
        const char *stop = amp ? amp : end;
        const char *eq = memchr(q, '=', (size_t)(stop - q));
        size_t nl = eq ? (size_t)(eq - q) : (size_t)(stop - q);
        if (eq && (result_secret_header(q, nl) || (nl == 3 && !strncasecmp(q, "sig", 3))))
            rc = buf_appendf(b, "%.*s=" RESULT_REDACTED, (int)nl, q);
        else
            rc = buf_append(b, q, (size_t)(stop - q));
        if (!rc && amp)
            rc = buf_append_char(b, '&');
        q = amp ? amp + 1 : end;
    }
    return rc;
}

/* s with a URL's password (or token user) and credential query values
 * redacted, into b; s is copied as is when it holds no "://". */
static int put_url(struct buf *b, const char *s)
{
    const char *scheme = strstr(s, "://");
    if (!scheme)
        return buf_append_str(b, s);
    const char *auth = scheme + 3, *path = auth + strcspn(auth, "/?#");
    const char *at = NULL;
    for (const char *p = auth; p < path; p++)
        if (*p == '@')
            at = p;
    int rc = buf_append(b, s, (size_t)(auth - s));
    if (!rc && at) {
        const char *colon = memchr(auth, ':', (size_t)(at - auth));
        rc = colon ? buf_append(b, auth, (size_t)(colon - auth) + 1) : 0;
        rc = rc ? rc : buf_append_str(b, RESULT_REDACTED);
        auth = at;
    }
    const char *q = strchr(path, '?');
    const char *hash = q ? q + strcspn(q, "#") : NULL;
    rc = rc ? rc : buf_append(b, auth, (size_t)((q ? q + 1 : path + strlen(path)) - auth));
    if (!rc && q) {
        rc = result_put_query(b, q + 1, hash);
        rc = rc ? rc : buf_append_str(b, hash);
    }
    return rc;
}

/* One string of "run": URLs redacted, then every secret of info replaced. */
static int scrub_string(json_t *v, const struct result_info *info)
{
    struct buf a, b;
    int rc;

    buf_init(&a, (size_t)1 << 24);
    buf_init(&b, (size_t)1 << 24);
    rc = put_url(&a, json_string_value(v));
    for (size_t i = 0; !rc && i < info->nsecrets; i++) {
        const char *sec = info->secrets[i];
        size_t sl = sec ? strlen(sec) : 0;
        if (sl < RESULT_SECRET_MIN || !memmem(a.data, a.len, sec, sl))
            continue;
        buf_reset(&b);
        for (size_t k = 0; !rc && k < a.len;) {
            if (k + sl <= a.len && !memcmp(a.data + k, sec, sl)) {
                rc = buf_append_str(&b, RESULT_REDACTED);
                k += sl;
            } else {
                rc = buf_append_char(&b, a.data[k++]);
            }
        }
        struct buf t = a;
        a = b;
        b = t;
    }
    if (!rc && (a.len != json_string_length(v) || memcmp(a.data, json_string_value(v), a.len)))
        rc = json_string_setn(v, buf_cstr(&a), a.len) ? -ENOMEM : 0;
    buf_release(&a);
    buf_release(&b);
    return rc;
}

/* Every string in v, at any depth, through scrub_string(). */
static int scrub_strings(json_t *v, const struct result_info *info)
{
    int rc = 0;
    if (json_is_object(v)) {
        const char *key;
        json_t *child;
        json_object_foreach(v, key, child)
        {
            if ((rc = scrub_strings(child, info)))
                break;
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *child;
        json_array_foreach(v, i, child)
        {
            if ((rc = scrub_strings(child, info)))
                break;
        }
    } else if (json_is_string(v)) {
        rc = scrub_string(v, info);
    }
    return rc;
}

static json_t *host_object(const struct host_info *h)
{
    return json_pack("{s:s?, s:o, s:s?, s:s?, s:s?}", "cpu_model",
                     h->cpu_model[0] ? h->cpu_model : NULL, "cores",
                     h->cores ? json_integer(h->cores) : json_null(), "kernel",
                     h->kernel[0] ? h->kernel : NULL, "os", h->os[0] ? h->os : NULL, "arch",
                     h->arch[0] ? h->arch : NULL);
}

/* What run_object adds about how the run was started and ended, and where. */
static int put_provenance(json_t *o, const struct result_info *info)
{
    int rc = 0;
    rc |= tsjson_put(o, "interrupted", json_boolean(info->interrupted_by != NULL));
    rc |= tsjson_put(o, "interrupted_by",
                     info->interrupted_by ? json_string(info->interrupted_by) : json_null());
    if (info->argv)
        rc |= tsjson_put(o, "command_line", command_line(info));
    if (info->host)
        rc |= tsjson_put(o, "host", host_object(info->host));
    return rc;
}

/* "p50", "p99.9": vLLM's spelling of a percentile (an integer when it is one). */
static void pct_word(double p, char *out, size_t n)
{
    if (p == floor(p))
        snprintf(out, n, "p%.0f", p);
    else
        snprintf(out, n, "p%g", p);
}

/* ---- result.json ------------------------------------------------------------ */

/* A statistic of l: null when l has no sample (the metric was not measured). */
static json_t *stat_num(const struct latency_summary *l, double v)
{
    return l->count ? tsjson_num(v) : json_null();
}

static json_t *latency_object(const struct latency_summary *l)
{
    json_t *o = json_object();
    char key[16];
    int rc = 0;

    if (!o)
        return NULL;
    rc |= tsjson_put(o, "count", tsjson_count(l->count));
    rc |= tsjson_put(o, "mean", stat_num(l, l->mean));
    rc |= tsjson_put(o, "std", stat_num(l, l->std));
    rc |= tsjson_put(o, "min", stat_num(l, l->min));
    for (int i = 0; i < SUMMARY_NPCT; i++) {
        pct_word(summary_percentiles[i], key, sizeof(key));
        rc |= tsjson_put(o, key, stat_num(l, l->pct[i]));
    }
    rc |= tsjson_put(o, "max", stat_num(l, l->max));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* mean_/median_/std_/pNN_<name>_ms, as vLLM names them. */
static int put_vllm_latency(json_t *o, const char *name, const struct latency_summary *l)
{
    char key[64], word[16];
    int rc = 0;

    snprintf(key, sizeof(key), "mean_%s_ms", name);
    rc |= tsjson_put(o, key, stat_num(l, l->mean));
    snprintf(key, sizeof(key), "median_%s_ms", name);
    rc |= tsjson_put(o, key, stat_num(l, l->pct[0]));
    snprintf(key, sizeof(key), "std_%s_ms", name);
    rc |= tsjson_put(o, key, stat_num(l, l->std));
    for (int i = 0; i < SUMMARY_NPCT; i++) {
        pct_word(summary_percentiles[i], word, sizeof(word));
        snprintf(key, sizeof(key), "%s_%s_ms", word, name);
        rc |= tsjson_put(o, key, stat_num(l, l->pct[i]));
    }
    return rc;
}

/*
 * "first_token": whether vLLM's TTFT (first chunk with choices) and the first
 * token a user sees (ttfc) are apart (medians more than SUMMARY_TTFT_GAP_MS),
 * as on servers that send a role chunk before prefill; SLOs, goodput and
 * sweep judge ttfc. null when either was not measured.
 */
static int put_first_token_note(json_t *o, const struct run_summary *sum)
{
    double gap = 0;
    bool differs = run_summary_ttft_differs(sum, &gap);
    if (!sum->lat[STAT_TTFT].count || !sum->lat[STAT_TTFC].count)
        return tsjson_put(o, "first_token", json_null());
    return tsjson_put(o, "first_token",
                      json_pack("{s:b, s:f, s:f, s:f, s:f, s:s}", "differs", differs, "p50_ttfc_ms",
                                sum->lat[STAT_TTFC].pct[0], "p50_ttft_ms",
                                sum->lat[STAT_TTFT].pct[0], "gap_ms", gap, "threshold_ms",
                                SUMMARY_TTFT_GAP_MS, "judged", "ttfc"));
}

/* summary.window: the steady window's rates (window.h), or how they could not be had. */
static int put_window(json_t *o, const struct run_summary *sum)
{
    const struct run_window *w = &sum->window;
    json_t *j = json_object();
    int rc = j ? 0 : -ENOMEM;

    rc |= tsjson_put(j, "method", json_string(w->valid ? "steady_window" : "whole_run"));
    rc |= tsjson_put(j, "send_start_s", tsjson_num(w->send_start_s));
    rc |= tsjson_put(j, "send_end_s", tsjson_num(w->send_end_s));
    rc |= tsjson_put(j, "sent_rps", tsjson_num(w->sent_rps));
    if (w->valid) {
        rc |= tsjson_put(j, "start_s", tsjson_num(w->start_s));
        rc |= tsjson_put(j, "end_s", tsjson_num(w->end_s));
        rc |= tsjson_put(j, "completed", tsjson_count(w->completed));
        rc |= tsjson_put(j, "output_tokens", tsjson_count(w->output_tokens));
        rc |= tsjson_put(j, "request_throughput", tsjson_num(w->request_throughput));
        rc |= tsjson_put(j, "output_throughput", tsjson_num(w->output_throughput));
        if (sum->goodput_enabled) {
            rc |= tsjson_put(j, "good", tsjson_count(w->good));
            rc |= tsjson_put(j, "request_goodput", tsjson_num(w->request_goodput));
        }
    }
    return rc | tsjson_put(o, "window", j);
}

static json_t *summary_object(const struct run_summary *sum)
{
    static const enum stat_metric headline[] = {STAT_TTFT, STAT_TPOT, STAT_ITL, STAT_E2EL,
                                                STAT_TTFC, STAT_LAG,  STAT_TTFA};
    json_t *o = json_object();
    int rc = 0;

    if (!o)
        return NULL;
    rc |= tsjson_put(o, "completed", tsjson_count(sum->completed));
    rc |= tsjson_put(o, "failed", tsjson_count(sum->failed));
    rc |= tsjson_put(o, "duration", tsjson_num(sum->duration_s));
    rc |= tsjson_put(o, "total_input_tokens", tsjson_count(sum->total_input_tokens));
    rc |= tsjson_put(o, "total_output_tokens", tsjson_count(sum->total_output_tokens));
    rc |= tsjson_put(o, "request_throughput", tsjson_num(sum->request_throughput));
    rc |= tsjson_put(o, "request_goodput",
                     sum->goodput_enabled ? tsjson_num(sum->request_goodput) : json_null());
    rc |= tsjson_put(o, "output_throughput", tsjson_num(sum->output_throughput));
    rc |= tsjson_put(o, "total_token_throughput", tsjson_num(sum->total_token_throughput));
    /* the peak counts chunks: a run that streamed nothing has none */
    bool none_streamed = sum->stats && sum->requests && !sum->stats->streams;
    rc |= tsjson_put(o, "max_output_tokens_per_s",
                     none_streamed ? json_null() : tsjson_num(sum->max_output_tokens_per_s));
    for (size_t i = 0; i < sizeof(headline) / sizeof(headline[0]); i++)
        rc |= put_vllm_latency(o, stat_metric_name(headline[i]), &sum->vllm[headline[i]]);

    rc |= tsjson_put(o, "requests", tsjson_count(sum->requests));
    rc |= tsjson_put(o, "cut", tsjson_count(sum->cut));
    rc |= tsjson_put(o, "good", sum->goodput_enabled ? tsjson_count(sum->good) : json_null());
    rc |= tsjson_put(o, "error_rate", tsjson_num(sum->error_rate));
    rc |=
        tsjson_put(o, "token_method", json_string(sum->token_method ? sum->token_method : "none"));
    rc |= tsjson_put(o, "tokens_per_chunk", tsjson_num(sum->tokens_per_chunk));
    rc |= put_first_token_note(o, sum);
    rc |= put_window(o, sum);
    if (sum->goodput_enabled) {
        json_t *g = json_object();
        if (g && sum->goodput.ttft_ms > 0)
            rc |= tsjson_put(g, "ttft_ms", tsjson_num(sum->goodput.ttft_ms));
        if (g && sum->goodput.tpot_ms > 0)
            rc |= tsjson_put(g, "tpot_ms", tsjson_num(sum->goodput.tpot_ms));
        if (g && sum->goodput.e2el_ms > 0)
            rc |= tsjson_put(g, "e2el_ms", tsjson_num(sum->goodput.e2el_ms));
        rc |= tsjson_put(o, "goodput_config", g);
    }
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *run_object(const struct run_summary *sum, const struct result_info *info)
{
    json_t *o;
    char when[40];
    int rc = 0;

    if (info->config) {
        if (!json_is_object(info->config))
            return NULL;
        o = json_deep_copy(info->config);
    } else {
        o = json_object();
    }
    if (!o)
        return NULL;
    drop_secrets(o);
    rc |= tsjson_put(o, "started_at",
                     info->started_wall_ns
                         ? json_string(ts_wall_format(info->started_wall_ns, when, sizeof(when)))
                         : json_null());
    rc |= tsjson_put(o, "duration_s", tsjson_num(sum->duration_s));
    rc |= tsjson_put(o, "warmup_s", tsjson_num(info->warmup_s));
    rc |= tsjson_put(o, "end_mode", json_string(info->end_cut ? "cut" : "waited"));
    rc |= put_provenance(o, info);
    if (rc || scrub_strings(o, info)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int put_counters(json_t *doc, const struct run_stats *s)
{
    json_t *outcomes = json_object(), *http = json_object(), *streams = json_object();
    json_t *tokens = json_object(), *by_method = json_object(), *warmup = json_object();
    int rc = 0;

    /* Attached first (tsjson_put() frees a value it cannot attach), filled after. */
    rc |= tsjson_put(doc, "outcomes", outcomes);
    rc |= tsjson_put(doc, "http_status", http);
    rc |= tsjson_put(doc, "streams", streams);
    rc |= tsjson_put(doc, "warmup", warmup);
    rc |= tsjson_put(doc, "tokens", tokens);
    if (rc) {
        json_decref(by_method);
        return -ENOMEM;
    }
    if (tsjson_put(tokens, "by_method", by_method))
        return -ENOMEM;
    for (int i = 0; i < REQ_OUTCOME_COUNT; i++)
        rc |= tsjson_put(outcomes, req_outcome_name((enum req_outcome)i),
                         tsjson_count(s->outcomes[i]));
    for (int i = 0; i < HTTP_CLASS_COUNT; i++)
        rc |= tsjson_put(http, http_class_name((enum http_class)i), tsjson_count(s->http_class[i]));

    rc |= tsjson_put(streams, "streamed", tsjson_count(s->streams));
    rc |= tsjson_put(streams, "no_done", tsjson_count(s->no_done));
    rc |= tsjson_put(streams, "no_finish", tsjson_count(s->no_finish));
    rc |= tsjson_put(streams, "id_changed", tsjson_count(s->id_changed));
    rc |= tsjson_put(streams, "after_done", tsjson_count(s->after_done));
    rc |= tsjson_put(streams, "out_of_order", tsjson_count(s->out_of_order));
    rc |= tsjson_put(streams, "bad_close", tsjson_count(s->bad_close));
    rc |= tsjson_put(streams, "fell_back_sse", tsjson_count(s->fell_back));
    rc |= tsjson_put(streams, "reused_connections", tsjson_count(s->reused_conn));
    rc |= tsjson_put(streams, "usage_tail_requests", tsjson_count(s->usage_tail_n));
    rc |= tsjson_put(streams, "usage_tail_us", tsjson_count(s->usage_tail_us));
    if (s->integrity.streams) {
        json_t *in = json_object();
        rc |= tsjson_put(doc, "integrity", in);
        rc |= tsjson_put(in, "method", json_string("hmac-sha256-chained"));
        rc |= tsjson_put(in, "streams", tsjson_count(s->integrity.streams));
        rc |= tsjson_put(in, "streams_violated", tsjson_count(s->integrity.violated));
        rc |= tsjson_put(in, "chunks_ok", tsjson_count(s->integrity.ok));
        rc |= tsjson_put(in, "missing", tsjson_count(s->integrity.missing));
        rc |= tsjson_put(in, "duplicates", tsjson_count(s->integrity.duplicates));
        rc |= tsjson_put(in, "reorders", tsjson_count(s->integrity.reorders));
        rc |= tsjson_put(in, "forged", tsjson_count(s->integrity.forged));
        rc |= tsjson_put(in, "unsigned", tsjson_count(s->integrity.unsigned_events));
    }

    rc |= tsjson_put(tokens, "method", json_string(run_stats_token_method(s)));
    for (int i = 0; i < TOKEN_SOURCE_COUNT; i++)
        rc |= tsjson_put(by_method, token_source_name((enum token_source)i),
                         tsjson_count(s->token_source[i]));
    rc |= tsjson_put(tokens, "input", tsjson_count(s->input_tokens));
    rc |= tsjson_put(tokens, "input_intended", tsjson_count(s->input_tokens_intended));
    rc |= tsjson_put(tokens, "output", tsjson_count(s->output_tokens));
    rc |= tsjson_put(tokens, "output_all", tsjson_count(s->output_tokens_all));
    rc |= tsjson_put(tokens, "usage_input", tsjson_count(s->usage_input));
    rc |= tsjson_put(tokens, "usage_mismatch", tsjson_count(s->usage_mismatch));
    rc |= tsjson_put(tokens, "content_chunks", tsjson_count(s->content_chunks));
    rc |= tsjson_put(tokens, "choice_chunks", tsjson_count(s->choice_chunks));

    rc |= tsjson_put(warmup, "requests", tsjson_count(s->warmup_requests));
    rc |= tsjson_put(warmup, "ok", tsjson_count(s->warmup_ok));
    rc |= tsjson_put(warmup, "good", tsjson_count(s->warmup_good));
    rc |= tsjson_put(warmup, "output_tokens", tsjson_count(s->warmup_output_tokens));
    rc |= live_metrics_buckets_put(doc, s);
    return rc ? -ENOMEM : 0;
}

/*
 * "vllm": how the vLLM-named summary fields were computed (exact samples or
 * the histograms) and where vLLM's definitions differ from ours, with the
 * figures of both where tokenstorm has them.
 */
static int put_vllm_notes(json_t *doc, const struct run_stats *st, const struct run_summary *sum)
{
    static const enum stat_metric named[] = {STAT_TTFT, STAT_TPOT, STAT_ITL,
                                             STAT_E2EL, STAT_TTFC, STAT_LAG};
    json_t *v = json_object(), *fields = json_object(), *diff = json_object();
    int rc = tsjson_put(doc, "vllm", v);

    if (rc || tsjson_put(v, "fields", fields) || tsjson_put(v, "differences", diff)) {
        json_decref(diff);
        return -ENOMEM;
    }
    rc |= tsjson_put(v, "sample_cap", json_integer(SAMPLES_MAX));
    rc |= tsjson_put(v, "percentile_method", json_string("numpy linear over exact samples"));
    for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
        enum stat_metric m = named[i];
        enum samples_loss loss = sum->vllm_loss[m];
        rc |= tsjson_put(fields, stat_metric_name(m),
                         json_pack("{s:s, s:o, s:s?}", "method",
                                   loss == SAMPLES_COMPLETE ? "exact" : "hdr", "samples",
                                   tsjson_count(sum->vllm[m].count), "why",
                                   loss == SAMPLES_COMPLETE ? NULL : samples_loss_name(loss)));
    }
    rc |= tsjson_put(diff, "latency_start",
                     json_string("ttft and e2el run from the intended send time; vLLM's from "
                                 "the actual send (latency.ttft_uncorrected, "
                                 "latency.e2el_uncorrected)"));
    double tail = st->usage_tail_n ? (double)st->usage_tail_us / 1e3 / (double)st->usage_tail_n : 0;
    rc |= tsjson_put(
        diff, "e2el_end",
        json_pack("{s:s, s:o, s:o, s:s}", "tokenstorm", "the last chunk with choices",
                  "tail_requests", tsjson_count(st->usage_tail_n), "mean_tail_ms",
                  st->usage_tail_n ? tsjson_num(tail) : json_null(), "note",
                  "vLLM's chat benchmark ends at the last event before [DONE] (the usage-only "
                  "chunk), so its e2el is longer by the tail and its tpot by tail / "
                  "(output_len - 1); its completions benchmark ends where we do"));
    rc |= tsjson_put(diff, "itl",
                     json_string("summary *_itl_ms: gaps of ok requests, as vLLM; latency.itl: "
                                 "every gap, failed streams included"));
    rc |=
        tsjson_put(diff, "total_input_tokens",
                   json_pack("{s:o, s:o, s:s}", "tokenstorm", tsjson_count(sum->total_input_tokens),
                             "vllm", tsjson_count(sum->input_tokens_intended), "note",
                             "ours: the server's usage.prompt_tokens, else the intended "
                             "length; vLLM's: the dataset's prompt lengths (here the "
                             "intended lengths)"));
    return rc ? -ENOMEM : 0;
}

static int put_slos(json_t *doc, const struct run_summary *sum, const struct result_info *info)
{
    json_t *arr = json_array();
    int rc = tsjson_put(doc, "slo", arr);

    for (size_t i = 0; !rc && i < info->nslos; i++) {
        double actual = NAN;
        bool pass = slo_eval(&info->slos[i], sum, &actual);
        json_t *o = json_pack("{s:s, s:o, s:b}", "expr", info->slos[i].expr, "actual",
                              tsjson_num(actual), "pass", pass);
        if (!o || json_array_append_new(arr, o))
            rc = -ENOMEM;
    }
    return rc;
}

static int put_histograms(json_t *doc, const struct run_stats *s)
{
    json_t *h = json_object();
    int rc = tsjson_put(doc, "histograms", h);

    for (int i = 0; !rc && i < STAT_METRIC_COUNT; i++) {
        char *text = NULL;
        rc = hdr_encode_base64(s->hist[i], &text, NULL);
        if (rc < 0)
            break;
        rc = tsjson_put(h, stat_metric_name((enum stat_metric)i), json_string(text));
        ts_free(text);
    }
    json_t *pos = NULL;
    if (!rc) {
        pos = json_array();
        rc = tsjson_put(h, "itl_by_position", pos);
    }
    for (int i = 0; !rc && i < ITL_POS_BUCKETS; i++) {
        char *text = NULL;
        rc = hdr_encode_base64(s->itl_pos[i], &text, NULL);
        if (rc < 0)
            break;
        rc = json_array_append_new(pos, json_string(text)) ? -ENOMEM : 0;
        ts_free(text);
    }
    return rc;
}

/* "itl_by_position": one entry per position bucket that has gaps. */
static int put_itl_by_position(json_t *doc, const struct run_stats *s)
{
    json_t *a = json_array();
    int rc = tsjson_put(doc, "itl_by_position", a);
    for (unsigned b = 0; !rc && b < ITL_POS_BUCKETS; b++) {
        const struct hdr *h = s->itl_pos[b];
        if (!hdr_total_count(h))
            continue;
        json_t *e = json_object();
        rc = json_array_append_new(a, e) ? -ENOMEM : 0;
        rc |= tsjson_put(e, "from", json_integer((json_int_t)itl_pos_bucket_from(b)));
        rc |= tsjson_put(e, "to",
                         b + 1 < ITL_POS_BUCKETS
                             ? json_integer((json_int_t)itl_pos_bucket_from(b + 1) - 1)
                             : json_null());
        rc |= tsjson_put(e, "count", json_integer((json_int_t)hdr_total_count(h)));
        rc |= tsjson_put(e, "mean_ms", json_real(hdr_mean(h) / 1000.0));
        rc |= tsjson_put(e, "p50_ms", json_real((double)hdr_value_at_percentile(h, 50) / 1000.0));
        rc |= tsjson_put(e, "p90_ms", json_real((double)hdr_value_at_percentile(h, 90) / 1000.0));
        rc |= tsjson_put(e, "p99_ms", json_real((double)hdr_value_at_percentile(h, 99) / 1000.0));
    }
    return rc;
}

/* "request_sample": the sample's rows, [key, input_tokens, output_tokens, ttft_ms, e2el_ms]. */
static json_t *sample_json(const struct reqsample *sm)
{
    json_t *rows = json_array();
    for (uint32_t i = 0; rows && i < sm->n; i++) {
        const struct reqsample_entry *e = &sm->e[i];
        if (json_array_append_new(
                rows, json_pack("[I, I, I, o, o]", (json_int_t)e->key, (json_int_t)e->input_tokens,
                                (json_int_t)e->output_tokens, tsjson_num(e->ttft_ms),
                                tsjson_num(e->e2el_ms)))) {
            json_decref(rows);
            return NULL;
        }
    }
    return rows ? json_pack("{s:[s, s, s, s, s], s:o}", "fields", "key", "input_tokens",
                            "output_tokens", "ttft_ms", "e2el_ms", "rows", rows)
                : NULL;
}

/* The "vector_search" object: recall@k of the answers, with the load's QPS and latency. */
static json_t *vector_search_json(const struct run_stats *s, const struct run_summary *sum)
{
    const struct quality_dist *d = &s->recall;
    const struct latency_summary *l = &sum->lat[STAT_E2EL];
    return json_pack("{s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:o}", "k", (json_int_t)s->recall_k,
                     "searches", (json_int_t)d->count, "qps", sum->request_throughput,
                     "latency_p50_ms", l->pct[0], "latency_p99_ms", l->pct[3], "recall_mean",
                     quality_dist_mean(d), "recall_p5", quality_dist_percentile(d, 5), "recall_p50",
                     quality_dist_percentile(d, 50), "recall_min", quality_dist_min(d), "state",
                     run_stats_recall_state_json(s));
}

int result_build(const struct run_stats *stats, const struct run_summary *sum,
                 const struct result_info *info, json_t **out)
{
    json_t *doc, *latency, *section;
    int rc = 0;

    if ((info->config && !json_is_object(info->config)) ||
        (info->timeline && !json_is_array(info->timeline)) ||
        (info->server_timeline && !json_is_array(info->server_timeline)) ||
        (info->server_metrics && !json_is_object(info->server_metrics)))
        return -EINVAL;
    doc = json_object();
    if (!doc)
        return -ENOMEM;
    rc |= tsjson_put(doc, "schema", json_string(RESULT_SCHEMA));
    rc |= tsjson_put(doc, "tool",
                     json_pack("{s:s, s:s}", "name", "tokenstorm", "version",
                               info->tool_version ? info->tool_version : TS_VERSION));
    rc |= tsjson_put(doc, "run", run_object(sum, info));
    rc |= tsjson_put(doc, "summary", summary_object(sum));
    latency = json_object();
    rc |= tsjson_put(doc, "latency", latency);
    if (rc)
        goto out_fail;
    for (int i = 0; i < STAT_METRIC_COUNT; i++)
        rc |= tsjson_put(latency, stat_metric_name((enum stat_metric)i),
                         latency_object(&sum->lat[i]));
    if (rc || (rc = put_counters(doc, stats)) < 0 || (rc = put_vllm_notes(doc, stats, sum)) < 0 ||
        (rc = put_slos(doc, sum, info)) < 0 ||
        (rc = tsjson_put(doc, "errors", errtally_to_json(&stats->errors))) < 0 ||
        (rc = tsjson_put(doc, "request_sample", sample_json(&stats->sample))) < 0)
        goto out_fail;
    section = info->timeline ? json_deep_copy(info->timeline) : json_array();
    if ((rc = tsjson_put(doc, "timeline", section)) < 0)
        goto out_fail;
    if (info->quality && (rc = tsjson_put(doc, "quality", json_deep_copy(info->quality))) < 0)
        goto out_fail;
    if (stats->recall.count &&
        (rc = tsjson_put(doc, "vector_search", vector_search_json(stats, sum))) < 0)
        goto out_fail;
    if (info->server_timeline) {
        if ((rc = tsjson_put(doc, "server_timeline", json_deep_copy(info->server_timeline))) < 0)
            goto out_fail;
        section = info->server_metrics ? json_deep_copy(info->server_metrics) : json_object();
        if ((rc = tsjson_put(doc, "server_metrics", section)) < 0)
            goto out_fail;
    }
    if ((rc = put_itl_by_position(doc, stats)) < 0 || (rc = put_histograms(doc, stats)) < 0)
        goto out_fail;
    *out = doc;
    return 0;

out_fail:
    json_decref(doc);
    return rc < 0 ? rc : -ENOMEM;
}

int result_write_file(const json_t *doc, const char *path, char *err, size_t errlen)
{
    size_t n = strlen(path) + 5;
    char *tmp = ts_malloc(n);
    int rc = 0;

    if (!tmp) {
        ts_errf(err, errlen, "%s: out of memory", path);
        return -ENOMEM;
    }
    snprintf(tmp, n, "%s.tmp", path);
    errno = 0;
    if (json_dump_file(doc, tmp, JSON_INDENT(2) | JSON_REAL_PRECISION(12)) != 0) {
        rc = errno ? -errno : -EIO;
        ts_errf(err, errlen, "%s: %s", tmp, strerror(-rc));
        unlink(tmp);
    } else if (rename(tmp, path) != 0) {
        rc = -errno;
        ts_errf(err, errlen, "%s: %s", path, strerror(errno));
        unlink(tmp);
    }
    ts_free(tmp);
    return rc;
}

/* ---- reading result.json back ----------------------------------------------- */

struct reader {
    char *err;
    size_t errlen;
};

static int bad(struct reader *r, const char *what, const char *key)
{
    ts_errf(r->err, r->errlen, "result: %s%s%s", what, key ? " " : "", key ? key : "");
    return TS_PARSE;
}

/* One number of a request_sample row: finite, within [0, max]; NAN for null when allowed. */
static bool sample_num(const json_t *v, double max, bool nullable, double *out)
{
    if (nullable && json_is_null(v)) {
        *out = NAN;
        return true;
    }
    *out = json_is_number(v) ? json_number_value(v) : -1;
    return *out >= 0 && *out <= max;
}

/* "request_sample" back into s->sample; absent is empty (older results). */
static int read_sample(struct reader *r, const json_t *doc, struct run_stats *s)
{
    const json_t *sec = json_object_get(doc, "request_sample"), *rows, *row;
    size_t i;

    if (!sec || json_is_null(sec))
        return 0;
    rows = json_object_get(sec, "rows");
    if (!json_is_array(rows) || json_array_size(rows) > REQSAMPLE_MAX)
        return bad(r, "not an array of at most 1000 rows:", "request_sample.rows");
    json_array_foreach(rows, i, row)
    {
        double k, in, out, ttft, e2el;
        if (!json_is_array(row) || json_array_size(row) != 5 ||
            !sample_num(json_array_get(row, 0), 9007199254740991.0, false, &k) ||
            !sample_num(json_array_get(row, 1), UINT32_MAX, false, &in) ||
            !sample_num(json_array_get(row, 2), UINT32_MAX, false, &out) ||
            !sample_num(json_array_get(row, 3), 1e12, true, &ttft) ||
            !sample_num(json_array_get(row, 4), 1e12, true, &e2el))
            return bad(
                r, "a row is not [key, input, output, ttft_ms, e2el_ms]:", "request_sample.rows");
        struct reqsample_entry e = {(uint64_t)k, (uint32_t)in, (uint32_t)out, (float)ttft,
                                    (float)e2el};
        reqsample_add(&s->sample, &e);
    }
    return 0;
}

/* *dst = obj.key as a count; a missing key (or section) is 0. */
static int get_count(struct reader *r, const json_t *obj, const char *section, const char *key,
                     uint64_t *dst)
{
    const json_t *v = obj ? json_object_get(obj, key) : NULL;
    char name[96];

    if (!v || json_is_null(v)) {
        *dst = 0;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        snprintf(name, sizeof(name), "'%s.%s'", section, key);
        return bad(r, "not a count:", name);
    }
    *dst = (uint64_t)json_integer_value(v);
    return 0;
}

static const json_t *section_of(const json_t *doc, const char *name)
{
    const json_t *v = json_object_get(doc, name);
    return json_is_object(v) ? v : NULL;
}

static int read_counters(struct reader *r, const json_t *doc, struct run_stats *s)
{
    const json_t *sum = section_of(doc, "summary"), *oc = section_of(doc, "outcomes");
    const json_t *http = section_of(doc, "http_status"), *st = section_of(doc, "streams");
    const json_t *tok = section_of(doc, "tokens"), *wu = section_of(doc, "warmup");
    const json_t *bym = tok ? section_of(tok, "by_method") : NULL;
    int rc = 0;

    rc = rc ? rc : get_count(r, sum, "summary", "requests", &s->requests);
    rc = rc ? rc : get_count(r, sum, "summary", "good", &s->good);
    for (int i = 0; !rc && i < REQ_OUTCOME_COUNT; i++)
        rc = get_count(r, oc, "outcomes", req_outcome_name((enum req_outcome)i), &s->outcomes[i]);
    for (int i = 0; !rc && i < HTTP_CLASS_COUNT; i++)
        rc = get_count(r, http, "http_status", http_class_name((enum http_class)i),
                       &s->http_class[i]);
    rc = rc ? rc : get_count(r, st, "streams", "streamed", &s->streams);
    rc = rc ? rc : get_count(r, st, "streams", "no_done", &s->no_done);
    rc = rc ? rc : get_count(r, st, "streams", "no_finish", &s->no_finish);
    rc = rc ? rc : get_count(r, st, "streams", "id_changed", &s->id_changed);
    rc = rc ? rc : get_count(r, st, "streams", "after_done", &s->after_done);
    rc = rc ? rc : get_count(r, st, "streams", "out_of_order", &s->out_of_order);
    rc = rc ? rc : get_count(r, st, "streams", "bad_close", &s->bad_close);
    rc = rc ? rc : get_count(r, st, "streams", "fell_back_sse", &s->fell_back);
    rc = rc ? rc : get_count(r, st, "streams", "reused_connections", &s->reused_conn);
    rc = rc ? rc : get_count(r, st, "streams", "usage_tail_requests", &s->usage_tail_n);
    rc = rc ? rc : get_count(r, st, "streams", "usage_tail_us", &s->usage_tail_us);
    for (int i = 0; !rc && i < TOKEN_SOURCE_COUNT; i++)
        rc = get_count(r, bym, "tokens.by_method", token_source_name((enum token_source)i),
                       &s->token_source[i]);
    rc = rc ? rc : get_count(r, tok, "tokens", "input", &s->input_tokens);
    rc = rc ? rc : get_count(r, tok, "tokens", "input_intended", &s->input_tokens_intended);
    rc = rc ? rc : get_count(r, tok, "tokens", "output", &s->output_tokens);
    rc = rc ? rc : get_count(r, tok, "tokens", "output_all", &s->output_tokens_all);
    rc = rc ? rc : get_count(r, tok, "tokens", "usage_input", &s->usage_input);
    rc = rc ? rc : get_count(r, tok, "tokens", "usage_mismatch", &s->usage_mismatch);
    rc = rc ? rc : get_count(r, tok, "tokens", "content_chunks", &s->content_chunks);
    rc = rc ? rc : get_count(r, tok, "tokens", "choice_chunks", &s->choice_chunks);
    rc = rc ? rc : get_count(r, wu, "warmup", "requests", &s->warmup_requests);
    rc = rc ? rc : get_count(r, wu, "warmup", "ok", &s->warmup_ok);
    rc = rc ? rc : get_count(r, wu, "warmup", "good", &s->warmup_good);
    rc = rc ? rc : get_count(r, wu, "warmup", "output_tokens", &s->warmup_output_tokens);
    const json_t *in = json_object_get(doc, "integrity"); /* only in signed runs */
    if (!rc && in) {
        rc = get_count(r, in, "integrity", "streams", &s->integrity.streams);
        rc = rc ? rc : get_count(r, in, "integrity", "streams_violated", &s->integrity.violated);
        rc = rc ? rc : get_count(r, in, "integrity", "chunks_ok", &s->integrity.ok);
        rc = rc ? rc : get_count(r, in, "integrity", "missing", &s->integrity.missing);
        rc = rc ? rc : get_count(r, in, "integrity", "duplicates", &s->integrity.duplicates);
        rc = rc ? rc : get_count(r, in, "integrity", "reorders", &s->integrity.reorders);
        rc = rc ? rc : get_count(r, in, "integrity", "forged", &s->integrity.forged);
        rc = rc ? rc : get_count(r, in, "integrity", "unsigned", &s->integrity.unsigned_events);
    }
    return rc;
}

static int read_histograms(struct reader *r, const json_t *doc, struct run_stats *s)
{
    const json_t *hs = json_object_get(doc, "histograms");

    if (!hs)
        return 0;
    if (!json_is_object(hs))
        return bad(r, "'histograms' is not an object", NULL);
    for (int i = 0; i < STAT_METRIC_COUNT; i++) {
        const char *name = stat_metric_name((enum stat_metric)i);
        const json_t *v = json_object_get(hs, name);
        struct hdr *h = NULL;
        int rc;

        if (!v)
            continue;
        if (!json_is_string(v))
            return bad(r, "histogram is not a string:", name);
        rc = hdr_decode_base64(json_string_value(v), json_string_length(v), &h);
        if (rc == -ENOMEM)
            return rc;
        if (rc < 0)
            return bad(r, "histogram does not decode:", name);
        rc = hdr_add(s->hist[i], h);
        hdr_free(h);
        if (rc < 0)
            return bad(r, "histogram count overflows:", name);
    }
    const json_t *pos = json_object_get(hs, "itl_by_position"); /* absent in older files */
    if (pos && (!json_is_array(pos) || json_array_size(pos) != ITL_POS_BUCKETS))
        return bad(r, "'histograms.itl_by_position' is not an array of", "9 histograms");
    for (size_t i = 0; pos && i < ITL_POS_BUCKETS; i++) {
        const json_t *v = json_array_get(pos, i);
        struct hdr *h = NULL;
        if (!json_is_string(v))
            return bad(r, "histogram is not a string:", "itl_by_position");
        int rc = hdr_decode_base64(json_string_value(v), json_string_length(v), &h);
        if (rc == -ENOMEM)
            return rc;
        if (rc < 0)
            return bad(r, "histogram does not decode:", "itl_by_position");
        rc = hdr_add(s->itl_pos[i], h);
        hdr_free(h);
        if (rc < 0)
            return bad(r, "histogram count overflows:", "itl_by_position");
    }
    return 0;
}

/* vector_search.state (absent in older files and runs without recall): the
 * recall distribution, exactly. */
static int read_recall(struct reader *r, const json_t *doc, struct run_stats *s)
{
    const json_t *st = json_object_get(json_object_get(doc, "vector_search"), "state");
    if (st && run_stats_recall_state_add(s, st))
        return bad(r, "'vector_search.state' is not a recall state", NULL);
    return 0;
}

int result_read_stats(const json_t *doc, struct run_stats **out, char *err, size_t errlen)
{
    char dummy[1];
    struct reader r = {.err = err && errlen ? err : dummy, .errlen = err && errlen ? errlen : 1};
    struct run_stats *s = NULL;
    const json_t *schema = json_is_object(doc) ? json_object_get(doc, "schema") : NULL;
    int rc;

    if (!json_is_string(schema) || strcmp(json_string_value(schema), RESULT_SCHEMA) != 0)
        return bad(&r, "not a " RESULT_SCHEMA " document", NULL);
    if ((rc = run_stats_new(&s)) < 0) {
        ts_errf(r.err, r.errlen, "result: out of memory");
        return rc;
    }
    if ((rc = read_counters(&r, doc, s)) < 0 || (rc = read_histograms(&r, doc, s)) < 0 ||
        (rc = read_recall(&r, doc, s)) < 0 ||
        (rc = live_metrics_buckets_read(doc, s, r.err, r.errlen)) < 0 ||
        (rc = errtally_add_json(&s->errors, json_object_get(doc, "errors"), r.err, r.errlen)) < 0 ||
        (rc = read_sample(&r, doc, s)) < 0) {
        run_stats_free(s);
        return rc;
    }
    run_stats_exact_not_kept(s); /* the histograms came back, not the values */
    *out = s;
    return 0;
}
