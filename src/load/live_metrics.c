/*
 * live_metrics.c - the live /metrics of a load run (see live_metrics.h).
 */
#include "load/live_metrics.h"

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"

/* ---- bucket boundaries ---- */

static const int64_t genai_seconds_us[] = {
    10000,   20000,   40000,   80000,    160000,   320000,   640000,
    1280000, 2560000, 5120000, 10240000, 20480000, 40960000, 81920000,
};
static const char *const genai_seconds_le[] = {
    "0.01", "0.02", "0.04", "0.08",  "0.16",  "0.32",  "0.64",
    "1.28", "2.56", "5.12", "10.24", "20.48", "40.96", "81.92",
};
static const int64_t genai_tokens[] = {
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
};
static const char *const genai_tokens_le[] = {
    "1.0",     "4.0",     "16.0",     "64.0",      "256.0",     "1024.0",     "4096.0",
    "16384.0", "65536.0", "262144.0", "1048576.0", "4194304.0", "16777216.0", "67108864.0",
};
static const int64_t lag_us[] = {
    100,   250,    500,    1000,   2500,    5000,    10000,   25000,
    50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000,
};
static const char *const lag_le[] = {
    "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025",
    "0.05",   "0.1",     "0.25",   "0.5",   "1.0",    "2.5",   "5.0",  "10.0",
};

#define N(a) (sizeof(a) / sizeof((a)[0]))
_Static_assert(N(genai_seconds_us) == GENAI_BUCKETS && N(genai_seconds_le) == GENAI_BUCKETS,
               "the GenAI duration buckets of stats.h");
_Static_assert(N(genai_tokens) == GENAI_BUCKETS && N(genai_tokens_le) == GENAI_BUCKETS,
               "the GenAI token buckets of stats.h");
_Static_assert(N(lag_us) == N(lag_le), "lag buckets");

const struct live_bounds live_bounds_genai_seconds = {genai_seconds_us, genai_seconds_le,
                                                      GENAI_BUCKETS};
const struct live_bounds live_bounds_genai_tokens = {genai_tokens, genai_tokens_le, GENAI_BUCKETS};
const struct live_bounds live_bounds_lag_seconds = {lag_us, lag_le, N(lag_us)};

#define MAX_BOUNDS 16
_Static_assert(N(lag_us) <= MAX_BOUNDS && GENAI_BUCKETS <= MAX_BOUNDS, "MAX_BOUNDS");

void live_bounds_from_hdr(const struct live_bounds *b, const struct hdr *h, uint64_t *cum,
                          double *sum)
{
    memset(cum, 0, (b->n + 1) * sizeof(*cum));
    *sum = 0;
    if (!h)
        return;
    struct hdr_iter it;
    hdr_iter_recorded_init(&it, h);
    while (hdr_iter_next(&it)) {
        size_t i = 0;
        while (i < b->n && it.value > b->bound[i])
            i++;
        cum[i] += (uint64_t)it.count;
        *sum += (double)hdr_median_equivalent(h, it.value) * (double)it.count;
    }
    for (size_t i = 1; i <= b->n; i++)
        cum[i] += cum[i - 1];
}

/* ---- identity ---- */

static void copy_str(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

int live_metrics_parse_url(const char *url, char *host, size_t hostlen, char port[8])
{
    host[0] = '\0';
    port[0] = '\0';
    const char *sep = url ? strstr(url, "://") : NULL;
    if (!sep || sep == url)
        return -EINVAL;
    const char *defport;
    size_t slen = (size_t)(sep - url);
    if (slen == 4 && !strncasecmp(url, "http", 4))
        defport = "80";
    else if (slen == 5 && !strncasecmp(url, "https", 5))
        defport = "443";
    else
        defport = NULL;
    const char *a = sep + 3;
    size_t alen = strcspn(a, "/?#");
    const char *at = memchr(a, '@', alen);
    if (at) {
        alen -= (size_t)(at + 1 - a);
        a = at + 1;
    }
    const char *h = a, *p = NULL;
    size_t hlen;
    if (alen && a[0] == '[') {
        const char *close = memchr(a, ']', alen);
        if (!close)
            return -EINVAL;
        h = a + 1;
        hlen = (size_t)(close - h);
        if (close + 1 < a + alen) {
            if (close[1] != ':')
                return -EINVAL;
            p = close + 2;
        }
    } else {
        const char *colon = memchr(a, ':', alen);
        hlen = colon ? (size_t)(colon - a) : alen;
        p = colon ? colon + 1 : NULL;
    }
    size_t plen = p ? (size_t)(a + alen - p) : 0;
    if (!hlen || hlen >= hostlen || (p && (plen < 1 || plen > 5)))
        return -EINVAL;
    unsigned long pv = 0;
    for (size_t i = 0; i < plen; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -EINVAL;
        pv = pv * 10 + (unsigned long)(p[i] - '0');
    }
    if (p && pv > 65535)
        return -EINVAL;
    if (!p && !defport)
        return -EINVAL;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    if (p)
        snprintf(port, 8, "%lu", pv);
    else
        snprintf(port, 8, "%s", defport);
    return 0;
}

int live_metrics_init(struct live_metrics *lm, const struct live_metrics_info *info)
{
    memset(lm, 0, sizeof(*lm));
    const char *ep = info->endpoint ? info->endpoint : "chat";
    if (!strcmp(ep, "chat"))
        lm->operation = "chat";
    else if (!strcmp(ep, "completions"))
        lm->operation = "text_completion";
    else if (!strcmp(ep, "embeddings"))
        lm->operation = "embeddings";
    else
        return -EINVAL;
    copy_str(lm->endpoint, sizeof(lm->endpoint), ep);
    copy_str(lm->model, sizeof(lm->model), info->model);
    copy_str(lm->provider, sizeof(lm->provider), info->provider ? info->provider : "openai");
    copy_str(lm->tenant, sizeof(lm->tenant), info->tenant);
    if (info->url && live_metrics_parse_url(info->url, lm->server_address,
                                            sizeof(lm->server_address), lm->server_port))
        ts_debug("metrics: no server address in '%s'", info->url);
    lm->stream = info->stream;
    lm->goodput = info->goodput;
    return 0;
}

void live_metrics_set_run_id(struct live_metrics *lm, uint64_t run_id)
{
    snprintf(lm->run_id, sizeof(lm->run_id), "%016llx", (unsigned long long)run_id);
}

/* ---- content negotiation ---- */

/* [s, e) without surrounding blanks. */
static void trim(const char **s, const char **e)
{
    while (*s < *e && (**s == ' ' || **s == '\t'))
        (*s)++;
    while (*e > *s && ((*e)[-1] == ' ' || (*e)[-1] == '\t'))
        (*e)--;
}

static bool token_is(const char *s, const char *e, const char *word)
{
    size_t n = strlen(word);
    return (size_t)(e - s) == n && !strncasecmp(s, word, n);
}

/* One media range [s, e): its format (or -1 if not served) and q. */
static int media_range(const char *s, const char *e, double *q)
{
    const char *semi = memchr(s, ';', (size_t)(e - s));
    const char *ts = s, *te = semi ? semi : e;
    trim(&ts, &te);
    const char *vs = NULL, *ve = NULL;
    *q = 1.0;
    for (const char *p = semi; p && p < e;) {
        const char *ps = p + 1;
        const char *pe = memchr(ps, ';', (size_t)(e - ps));
        p = pe;
        if (!pe)
            pe = e;
        const char *eq = memchr(ps, '=', (size_t)(pe - ps));
        if (!eq)
            continue;
        const char *ns = ps, *ne = eq, *as = eq + 1, *ae = pe;
        trim(&ns, &ne);
        trim(&as, &ae);
        if (ae - as >= 2 && *as == '"' && ae[-1] == '"') {
            as++;
            ae--;
        }
        if (token_is(ns, ne, "q")) {
            char num[16];
            size_t len = (size_t)(ae - as);
            char *end;
            if (!len || len >= sizeof(num))
                return -1;
            memcpy(num, as, len);
            num[len] = '\0';
            *q = strtod(num, &end);
            if (*end || !(*q >= 0) || *q > 1)
                return -1;
        } else if (token_is(ns, ne, "version")) {
            vs = as;
            ve = ae;
        }
    }
    if (token_is(ts, te, "application/openmetrics-text"))
        return !vs || token_is(vs, ve, "1.0.0") || token_is(vs, ve, "0.0.1")
                   ? LIVE_METRICS_OPENMETRICS
                   : -1;
    if (token_is(ts, te, "text/plain"))
        return !vs || token_is(vs, ve, "0.0.4") ? LIVE_METRICS_TEXT : -1;
    if (token_is(ts, te, "text/*") || token_is(ts, te, "*/*"))
        return LIVE_METRICS_TEXT;
    return -1;
}

enum live_metrics_format live_metrics_negotiate(const char *accept)
{
    enum live_metrics_format best = LIVE_METRICS_TEXT;
    double best_q = 0;
    for (const char *p = accept; p && *p;) {
        const char *e = strchr(p, ',');
        if (!e)
            e = p + strlen(p);
        double q;
        int f = media_range(p, e, &q);
        if (f >= 0 && q > best_q) {
            best_q = q;
            best = (enum live_metrics_format)f;
        }
        p = *e ? e + 1 : e;
    }
    return best;
}

const char *live_metrics_content_type(enum live_metrics_format fmt)
{
    return fmt == LIVE_METRICS_OPENMETRICS ? LIVE_METRICS_OPENMETRICS_TYPE : LIVE_METRICS_TEXT_TYPE;
}

/* ---- exposition ---- */

/* A writer with a sticky error: after the first failure every call does nothing. */
struct expo {
    struct buf *b;
    bool om;
    int rc;
};

static void put(struct expo *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct expo *e, const char *fmt, ...)
{
    if (e->rc)
        return;
    va_list ap;
    va_start(ap, fmt);
    e->rc = buf_vappendf(e->b, fmt, ap);
    va_end(ap);
}

static void put_escaped(struct expo *e, const char *s)
{
    for (; *s && !e->rc; s++) {
        if (*s == '\\')
            e->rc = buf_append_str(e->b, "\\\\");
        else if (*s == '"')
            e->rc = buf_append_str(e->b, "\\\"");
        else if (*s == '\n')
            e->rc = buf_append_str(e->b, "\\n");
        else
            e->rc = buf_append_char(e->b, *s);
    }
}

/* The shortest text that reads back as v. */
static void put_double(struct expo *e, double v)
{
    if (isnan(v)) {
        put(e, "NaN");
        return;
    }
    if (isinf(v)) {
        put(e, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    if (v == floor(v) && fabs(v) < 1e15) {
        put(e, "%.0f", v);
        return;
    }
    char tmp[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*g", prec, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    put(e, "%s", tmp);
}

/*
 * The header of a metric family. name is the OpenMetrics family name: for a
 * counter without `_total`, for an info without `_info`; the text format
 * names the series instead (and has no info type: a gauge).
 */
static void family(struct expo *e, const char *name, const char *type, const char *help)
{
    const char *suffix = "";
    const char *t = type;
    if (!e->om && !strcmp(type, "counter"))
        suffix = "_total";
    if (!e->om && !strcmp(type, "info")) {
        suffix = "_info";
        t = "gauge";
    }
    put(e, "# HELP %s%s %s\n# TYPE %s%s %s\n", name, suffix, help, name, suffix, t);
    size_t n = strlen(name);
    if (e->om && n > 8 && !strcmp(name + n - 8, "_seconds"))
        put(e, "# UNIT %s seconds\n", name);
}

/* A label set: up to 8 name/value pairs. */
struct lset {
    const char *kv[16];
    size_t n;
};

static void lset_add(struct lset *l, const char *name, const char *value)
{
    if (l->n < 8) {
        l->kv[2 * l->n] = name;
        l->kv[2 * l->n + 1] = value;
        l->n++;
    }
}

/* name+suffix{labels[,extra="v"]} then a space. */
static void series(struct expo *e, const char *name, const char *suffix, const struct lset *l,
                   const char *extra, const char *extra_value)
{
    put(e, "%s%s", name, suffix);
    size_t n = l ? l->n : 0;
    if (n || extra) {
        put(e, "{");
        for (size_t i = 0; i < n; i++) {
            put(e, "%s%s=\"", i ? "," : "", l->kv[2 * i]);
            put_escaped(e, l->kv[2 * i + 1]);
            put(e, "\"");
        }
        if (extra) {
            put(e, "%s%s=\"", n ? "," : "", extra);
            put_escaped(e, extra_value);
            put(e, "\"");
        }
        put(e, "}");
    }
    put(e, " ");
}

static void sample_u64(struct expo *e, const char *name, const char *suffix, const struct lset *l,
                       const char *extra, const char *extra_value, uint64_t v)
{
    series(e, name, suffix, l, extra, extra_value);
    put(e, "%llu\n", (unsigned long long)v);
}

/* The _bucket/_sum/_count lines of one histogram series from cumulative counts. */
static void histogram(struct expo *e, const char *name, const struct lset *l,
                      const struct live_bounds *b, const uint64_t *cum, double sum)
{
    for (size_t i = 0; i < b->n; i++)
        sample_u64(e, name, "_bucket", l, "le", b->le[i], cum[i]);
    sample_u64(e, name, "_bucket", l, "le", "+Inf", cum[b->n]);
    series(e, name, "_sum", l, NULL, NULL);
    put_double(e, sum);
    put(e, "\n");
    sample_u64(e, name, "_count", l, NULL, NULL, cum[b->n]);
}

/* A latency histogram (microseconds) shown in seconds. */
static void histogram_us(struct expo *e, const char *name, const struct lset *l,
                         const struct live_bounds *b, const struct hdr *h)
{
    uint64_t cum[MAX_BOUNDS + 1];
    double sum;
    live_bounds_from_hdr(b, h, cum, &sum);
    histogram(e, name, l, b, cum, sum / 1e6);
}

/* A histogram from per-slot fixed bucket counts (GENAI_BUCKETS + 1 slots). */
static void histogram_fixed(struct expo *e, const char *name, const struct lset *l,
                            const struct live_bounds *b, const uint64_t *slots, double sum)
{
    uint64_t cum[GENAI_BUCKETS + 1];
    for (size_t i = 0; i <= GENAI_BUCKETS; i++)
        cum[i] = slots[i] + (i ? cum[i - 1] : 0);
    histogram(e, name, l, b, cum, sum);
}

/* The labels of the gen_ai_* metrics. */
static void genai_labels(const struct live_metrics *lm, struct lset *l)
{
    l->n = 0;
    lset_add(l, "gen_ai_operation_name", lm->operation);
    lset_add(l, "gen_ai_provider_name", lm->provider);
    lset_add(l, "gen_ai_request_model", lm->model);
    if (lm->server_address[0]) {
        lset_add(l, "server_address", lm->server_address);
        lset_add(l, "server_port", lm->server_port);
    }
}

static void render_genai(struct expo *e, const struct live_metrics *lm, const struct run_stats *s)
{
    struct lset base, l;
    genai_labels(lm, &base);

    family(e, "gen_ai_client_operation_duration_seconds", "histogram",
           "GenAI operation duration: from sending the request to its last chunk (ok) or its "
           "end (error_type = the outcome).");
    histogram_us(e, "gen_ai_client_operation_duration_seconds", &base, &live_bounds_genai_seconds,
                 s->hist[STAT_E2EL_UNCORRECTED]);
    for (int o = 0; o < REQ_OUTCOME_COUNT; o++) {
        uint64_t n = 0;
        for (int i = 0; i <= GENAI_BUCKETS; i++)
            n += s->fail_duration[o][i];
        if (o == REQ_OK || !n)
            continue;
        l = base;
        lset_add(&l, "error_type", req_outcome_name((enum req_outcome)o));
        histogram_fixed(e, "gen_ai_client_operation_duration_seconds", &l,
                        &live_bounds_genai_seconds, s->fail_duration[o],
                        (double)s->fail_duration_us[o] / 1e6);
    }

    family(e, "gen_ai_client_token_usage", "histogram",
           "Number of input and output tokens used, per successful request.");
    l = base;
    lset_add(&l, "gen_ai_token_type", "input");
    histogram_fixed(e, "gen_ai_client_token_usage", &l, &live_bounds_genai_tokens,
                    s->token_usage[0], (double)s->input_tokens);
    if (strcmp(lm->operation, "embeddings")) {
        l = base;
        lset_add(&l, "gen_ai_token_type", "output");
        histogram_fixed(e, "gen_ai_client_token_usage", &l, &live_bounds_genai_tokens,
                        s->token_usage[1], (double)s->output_tokens);
    }

    if (!lm->stream)
        return;
    family(e, "gen_ai_client_operation_time_to_first_chunk_seconds", "histogram",
           "Time to receive the first chunk, from sending the request (successful streams).");
    histogram_us(e, "gen_ai_client_operation_time_to_first_chunk_seconds", &base,
                 &live_bounds_genai_seconds, s->hist[STAT_TTFT_UNCORRECTED]);
    family(e, "gen_ai_client_operation_time_per_output_chunk_seconds", "histogram",
           "Time between consecutive chunks of a stream.");
    histogram_us(e, "gen_ai_client_operation_time_per_output_chunk_seconds", &base,
                 &live_bounds_genai_seconds, s->hist[STAT_ITL]);
}

static void render_tokenstorm(struct expo *e, const struct live_metrics *lm,
                              const struct run_stats *s)
{
    struct lset l = {0};
    lset_add(&l, "run_id", lm->run_id);
    lset_add(&l, "model", lm->model);
    lset_add(&l, "endpoint", lm->endpoint);
    lset_add(&l, "tenant", lm->tenant);
    family(e, "tokenstorm_run", "info", "The load run: id, model, endpoint, tenant.");
    sample_u64(e, "tokenstorm_run_info", "", &l, NULL, NULL, 1);

    family(e, "tokenstorm_requests", "counter",
           "Requests that ended, by outcome (warm-up excluded).");
    for (int o = 0; o < REQ_OUTCOME_COUNT; o++)
        sample_u64(e, "tokenstorm_requests_total", "", NULL, "outcome",
                   req_outcome_name((enum req_outcome)o), s->outcomes[o]);
    family(e, "tokenstorm_requests_sent", "counter", "Requests sent (warm-up included).");
    sample_u64(e, "tokenstorm_requests_sent_total", "", NULL, NULL, NULL, lm->sent);
    family(e, "tokenstorm_warmup_requests", "counter", "Requests of the warm-up that ended.");
    sample_u64(e, "tokenstorm_warmup_requests_total", "", NULL, NULL, NULL, s->warmup_requests);
    family(e, "tokenstorm_requests_in_flight", "gauge", "Requests in flight.");
    sample_u64(e, "tokenstorm_requests_in_flight", "", NULL, NULL, NULL, lm->in_flight);
    family(e, "tokenstorm_output_tokens", "counter",
           "Output tokens of every request that ended, whatever its outcome.");
    sample_u64(e, "tokenstorm_output_tokens_total", "", NULL, NULL, NULL, s->output_tokens_all);
    if (lm->goodput) {
        family(e, "tokenstorm_goodput_requests", "counter",
               "Successful requests within every --goodput threshold.");
        sample_u64(e, "tokenstorm_goodput_requests_total", "", NULL, NULL, NULL, s->good);
    }
    family(e, "tokenstorm_faults_injected", "counter", "Faults injected, by fault.");

    family(e, "tokenstorm_ttft_seconds", "histogram",
           "Time to first chunk from the intended send time (successful requests).");
    histogram_us(e, "tokenstorm_ttft_seconds", NULL, &live_bounds_genai_seconds,
                 s->hist[STAT_TTFT]);
    family(e, "tokenstorm_e2e_latency_seconds", "histogram",
           "End-to-end latency from the intended send time (successful requests).");
    histogram_us(e, "tokenstorm_e2e_latency_seconds", NULL, &live_bounds_genai_seconds,
                 s->hist[STAT_E2EL]);
    family(e, "tokenstorm_schedule_lag_seconds", "histogram",
           "Delay from a request's intended send time to its actual start.");
    histogram_us(e, "tokenstorm_schedule_lag_seconds", NULL, &live_bounds_lag_seconds,
                 s->hist[STAT_LAG]);
}

int live_metrics_render(const struct live_metrics *lm, enum live_metrics_format fmt,
                        struct buf *out)
{
    static const struct run_stats none; /* before the first merge: all zero */
    const struct run_stats *s = lm->stats ? lm->stats : &none;
    struct expo e = {.b = out, .om = fmt == LIVE_METRICS_OPENMETRICS};

    render_genai(&e, lm, s);
    render_tokenstorm(&e, lm, s);
    if (e.om)
        put(&e, "# EOF\n");
    return e.rc;
}

/* ---- result.json ---- */

static json_t *counts_json(const uint64_t *c)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i <= GENAI_BUCKETS; i++) {
        if (json_array_append_new(a, json_integer((json_int_t)c[i]))) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

int live_metrics_buckets_put(json_t *doc, const struct run_stats *s)
{
    json_t *o = json_object(), *fd = json_object();
    int rc = json_object_set_new(doc, "genai_buckets", o);
    if (rc || json_object_set_new(o, "input_tokens", counts_json(s->token_usage[0])) ||
        json_object_set_new(o, "output_tokens", counts_json(s->token_usage[1]))) {
        json_decref(fd);
        return -ENOMEM;
    }
    if (json_object_set_new(o, "failed_duration", fd))
        return -ENOMEM;
    for (int i = 0; i < REQ_OUTCOME_COUNT; i++) {
        uint64_t n = 0;
        for (int b = 0; b <= GENAI_BUCKETS; b++)
            n += s->fail_duration[i][b];
        if (!n)
            continue;
        json_t *e = json_pack("{s:o, s:I}", "counts", counts_json(s->fail_duration[i]), "sum_us",
                              (json_int_t)s->fail_duration_us[i]);
        if (json_object_set_new(fd, req_outcome_name((enum req_outcome)i), e))
            return -ENOMEM;
    }
    return 0;
}

static bool count_of(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

/* An array of GENAI_BUCKETS + 1 counts into c; a missing one is all zero. */
static bool read_counts(const json_t *a, uint64_t *c)
{
    memset(c, 0, (GENAI_BUCKETS + 1) * sizeof(*c));
    if (!a)
        return true;
    if (!json_is_array(a) || json_array_size(a) != GENAI_BUCKETS + 1)
        return false;
    for (size_t i = 0; i <= GENAI_BUCKETS; i++)
        if (!count_of(json_array_get(a, i), &c[i]))
            return false;
    return true;
}

int live_metrics_buckets_read(const json_t *doc, struct run_stats *s, char *err, size_t errlen)
{
    const json_t *o = json_object_get(doc, "genai_buckets");
    if (!o)
        return 0;
    const json_t *fd = json_object_get(o, "failed_duration");
    if (!json_is_object(o) || !read_counts(json_object_get(o, "input_tokens"), s->token_usage[0]) ||
        !read_counts(json_object_get(o, "output_tokens"), s->token_usage[1]) ||
        (fd && !json_is_object(fd))) {
        ts_errf(err, errlen, "result: 'genai_buckets' is malformed");
        return TS_PARSE;
    }
    memset(s->fail_duration, 0, sizeof(s->fail_duration));
    memset(s->fail_duration_us, 0, sizeof(s->fail_duration_us));
    const char *key;
    const json_t *e;
    json_object_foreach((json_t *)fd, key, e)
    {
        int i = req_outcome_from_name(key);
        if (i < 0 || i == REQ_OK || !json_is_object(e) ||
            !json_is_array(json_object_get(e, "counts")) ||
            !read_counts(json_object_get(e, "counts"), s->fail_duration[i]) ||
            !count_of(json_object_get(e, "sum_us"), &s->fail_duration_us[i])) {
            ts_errf(err, errlen, "result: 'genai_buckets.failed_duration.%.40s' is malformed", key);
            return TS_PARSE;
        }
    }
    return 0;
}

/* ---- the endpoint ---- */

static void respond(struct http_request *req, int status, const char *type, const char *extra,
                    const char *body, size_t len)
{
    int rc = http_respond(req, status, type, extra, body, len);
    if (rc && rc != TS_CLOSED)
        ts_debug("metrics: response failed: %s", ts_strerror(rc));
}

static void on_request(struct http_request *req, void *ctx)
{
    struct live_metrics_server *s = ctx;
    static const char text[] = "text/plain; charset=utf-8";

    if (strcmp(req->path, "/metrics")) {
        if (s->extra)
            s->extra(req, s->extra_arg);
        else if (!strcmp(req->path, "/"))
            respond(req, 200, text, NULL, "tokenstorm run: Prometheus metrics at /metrics\n", 47);
        else
            respond(req, 404, text, NULL, "not found\n", 10);
        return;
    }
    if (strcmp(req->method, "GET") && strcmp(req->method, "HEAD")) {
        respond(req, 405, text, "Allow: GET, HEAD\r\n", "method not allowed\n", 19);
        return;
    }
    enum live_metrics_format fmt = live_metrics_negotiate(http_request_header(req, "Accept"));
    struct buf b;
    buf_init(&b, LIVE_METRICS_MAX_BYTES);
    int rc = live_metrics_render(s->lm, fmt, &b);
    if (rc) {
        ts_warn("metrics: cannot render: %s", ts_strerror(rc));
        respond(req, 500, text, NULL, "cannot render the metrics\n", 26);
    } else {
        s->lm->scrapes++;
        respond(req, 200, live_metrics_content_type(fmt), NULL, buf_cstr(&b), b.len);
    }
    buf_release(&b);
}

int live_metrics_server_start(struct live_metrics_server *s, uv_loop_t *loop, const char *host,
                              int port, struct live_metrics *lm, char *err, size_t errlen)
{
    memset(s, 0, sizeof(*s));
    s->lm = lm;
    struct http_server_config cfg = {
        .host = host, .port = port, .max_connections = 64, .max_body_bytes = 4096};
    int rc = http_server_init(&s->http, loop, &cfg, on_request, s);
    if (rc) {
        ts_errf(err, errlen, "metrics: cannot serve on %s: %s", host,
                rc == -EINVAL ? "not an IP address" : ts_strerror(rc));
        return rc;
    }
    s->inited = true;
    if ((rc = http_server_listen(&s->http))) {
        ts_errf(err, errlen, "metrics: cannot listen on %s:%d: %s", host, port, uv_strerror(rc));
        return rc;
    }
    return 0;
}

int live_metrics_server_port(const struct live_metrics_server *s)
{
    return s->inited ? http_server_port(&s->http) : 0;
}

static void server_stop(struct live_metrics_server *s)
{
    if (s->stopping)
        return;
    s->stopping = true;
    if (s->timer_open)
        uv_close((uv_handle_t *)&s->linger, NULL);
    if (s->signals_open) {
        uv_close((uv_handle_t *)&s->sigint, NULL);
        uv_close((uv_handle_t *)&s->sigterm, NULL);
    }
    if (http_server_shutdown(&s->http, 1000, NULL))
        ts_debug("metrics: shut down twice");
}

static void on_linger_end(uv_timer_t *t)
{
    server_stop(t->data);
}

static void on_linger_signal(uv_signal_t *h, int signum)
{
    server_stop(h->data);
}

void live_metrics_server_linger(struct live_metrics_server *s, uint64_t linger_ms,
                                bool handle_signals)
{
    if (!s->inited || s->stopping)
        return;
    if (!linger_ms || uv_timer_init(s->http.loop, &s->linger)) {
        server_stop(s);
        return;
    }
    s->linger.data = s;
    s->timer_open = true;
    if (handle_signals && !uv_signal_init(s->http.loop, &s->sigint)) {
        if (uv_signal_init(s->http.loop, &s->sigterm)) {
            uv_close((uv_handle_t *)&s->sigint, NULL);
        } else {
            s->sigint.data = s->sigterm.data = s;
            s->signals_open = true;
            if (uv_signal_start(&s->sigint, on_linger_signal, SIGINT) ||
                uv_signal_start(&s->sigterm, on_linger_signal, SIGTERM))
                ts_warn("metrics: cannot catch signals while lingering");
        }
    }
    if (uv_timer_start(&s->linger, on_linger_end, linger_ms, 0))
        server_stop(s);
}
