/*
 * scrape.c - periodic scraping of the target's Prometheus endpoint on the
 * coordinator's loop, and the reduction of each scrape to a timeline point.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/tsjson.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/log.h"
#include "telemetry/scrape.h"
#include "net/http_client.h"
#include "telemetry/promparse.h"

/* ---- the reduction ---- */

enum scrape_sig {
    SIG_RUNNING,
    SIG_WAITING,
    SIG_KV,
    SIG_KV_OLD,
    SIG_PREEMPT,
    SIG_TTFT_BUCKET,
    SIG_QUEUE_BUCKET,
    SIG_QUEUE_SUMMARY, /* a summary's quantile="0.5" */
};

static const struct {
    const char *name;
    enum scrape_sig sig;
    enum scrape_flavor flavor;
} known[] = {
    {"vllm:num_requests_running", SIG_RUNNING, SCRAPE_VLLM},
    {"vllm:num_requests_waiting", SIG_WAITING, SCRAPE_VLLM},
    {"vllm:kv_cache_usage_perc", SIG_KV, SCRAPE_VLLM},
    {"vllm:gpu_cache_usage_perc", SIG_KV_OLD, SCRAPE_VLLM},
    {"vllm:num_preemptions_total", SIG_PREEMPT, SCRAPE_VLLM},
    {"vllm:time_to_first_token_seconds_bucket", SIG_TTFT_BUCKET, SCRAPE_VLLM},
    {"vllm:request_queue_time_seconds_bucket", SIG_QUEUE_BUCKET, SCRAPE_VLLM},
    {"tgi_batch_current_size", SIG_RUNNING, SCRAPE_TGI},
    {"tgi_queue_size", SIG_WAITING, SCRAPE_TGI},
    {"tgi_request_queue_duration_bucket", SIG_QUEUE_BUCKET, SCRAPE_TGI},
    {"tgi_request_queue_duration", SIG_QUEUE_SUMMARY, SCRAPE_TGI},
    {"sglang:num_running_reqs", SIG_RUNNING, SCRAPE_SGLANG},
    {"sglang:num_queue_reqs", SIG_WAITING, SCRAPE_SGLANG},
    {"sglang:token_usage", SIG_KV, SCRAPE_SGLANG},
    {"sglang:time_to_first_token_seconds_bucket", SIG_TTFT_BUCKET, SCRAPE_SGLANG},
};

static const char *const flavor_names[] = {"", "vllm", "tgi", "sglang"};

static void hist_reset(struct scrape_hist *h)
{
    h->n = 0;
    h->q50 = NAN;
}

static void add(double *acc, double v)
{
    *acc = isnan(*acc) ? v : *acc + v;
}

/* Reads a label value as a number ("+Inf", "0.5"); false if it is not one. */
static bool label_number(const struct promparse_str *v, double *out)
{
    char tok[64];
    if (!v || !v->len || v->len >= sizeof(tok))
        return false;
    memcpy(tok, v->p, v->len);
    tok[v->len] = '\0';
    char *end;
    *out = strtod(tok, &end);
    return *end == '\0' && !isnan(*out);
}

static void hist_add(struct scrape_hist *h, const struct promparse_sample *s)
{
    double le;
    if (!label_number(promparse_label(s, "le"), &le) || isnan(s->value))
        return;
    for (size_t i = 0; i < h->n; i++) {
        if (h->le[i] == le) {
            h->count[i] += s->value;
            return;
        }
    }
    if (h->n == SCRAPE_MAX_BUCKETS)
        return; /* more bounds than any server uses: the rest are ignored */
    size_t i = h->n++;
    while (i > 0 && h->le[i - 1] > le) { /* kept sorted */
        h->le[i] = h->le[i - 1];
        h->count[i] = h->count[i - 1];
        i--;
    }
    h->le[i] = le;
    h->count[i] = s->value;
}

static int on_sample(const struct promparse_sample *s, void *arg)
{
    struct scrape_snap *snap = arg;
    for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++) {
        if (!promparse_str_eq(s->name, known[k].name))
            continue;
        if (!snap->flavor)
            snap->flavor = known[k].flavor;
        switch (known[k].sig) {
        case SIG_RUNNING:
            add(&snap->running, s->value);
            break;
        case SIG_WAITING:
            add(&snap->waiting, s->value);
            break;
        case SIG_KV:
            if (isnan(snap->kv_usage) || s->value > snap->kv_usage)
                snap->kv_usage = s->value;
            break;
        case SIG_KV_OLD:
            if (isnan(snap->kv_usage_old) || s->value > snap->kv_usage_old)
                snap->kv_usage_old = s->value;
            break;
        case SIG_PREEMPT:
            add(&snap->preemptions_total, s->value);
            break;
        case SIG_TTFT_BUCKET:
            hist_add(&snap->ttft, s);
            break;
        case SIG_QUEUE_BUCKET:
            hist_add(&snap->queue, s);
            break;
        case SIG_QUEUE_SUMMARY: {
            double q;
            if (label_number(promparse_label(s, "quantile"), &q) && q == 0.5)
                snap->queue.q50 = s->value;
            break;
        }
        }
        return 0;
    }
    return 0;
}

int scrape_snap_parse(struct scrape_snap *snap, const char *text, size_t len, char *err,
                      size_t errlen)
{
    snap->flavor = SCRAPE_UNKNOWN;
    snap->running = snap->waiting = snap->kv_usage = snap->kv_usage_old = NAN;
    snap->preemptions_total = NAN;
    hist_reset(&snap->ttft);
    hist_reset(&snap->queue);
    const struct promparse_ops ops = {.on_sample = on_sample};
    return promparse_text(text, len, NULL, &ops, snap, err, errlen);
}

struct one_hist {
    const char *bucket;
    struct scrape_hist *h;
};

static int on_hist_sample(const struct promparse_sample *s, void *arg)
{
    struct one_hist *o = arg;
    if (promparse_str_eq(s->name, o->bucket))
        hist_add(o->h, s);
    return 0;
}

int scrape_hist_parse(struct scrape_hist *h, const char *bucket, const char *text, size_t len,
                      char *err, size_t errlen)
{
    struct one_hist o = {bucket, h};
    hist_reset(h);
    const struct promparse_ops ops = {.on_sample = on_hist_sample};
    return promparse_text(text, len, NULL, &ops, &o, err, errlen);
}

/* The count of cur at bound le minus prev's at the same bound (0 if prev has none). */
static double prev_count(const struct scrape_hist *prev, double le)
{
    if (!prev)
        return 0;
    for (size_t i = 0; i < prev->n; i++)
        if (prev->le[i] == le)
            return prev->count[i];
    return 0;
}

double scrape_hist_quantile(const struct scrape_hist *prev, const struct scrape_hist *cur, double q,
                            double *count)
{
    double d[SCRAPE_MAX_BUCKETS];
    size_t n = cur->n;
    bool reset = false;
    for (size_t i = 0; i < n; i++) {
        d[i] = cur->count[i] - prev_count(prev, cur->le[i]);
        if (d[i] < 0)
            reset = true;
    }
    /* cumulative counts never fall; if they did the server restarted and
     * counts from zero again. Races between the lines of one scrape can make
     * a bucket smaller than the one below it: keep the running maximum. */
    double top = 0;
    for (size_t i = 0; i < n; i++) {
        if (reset)
            d[i] = cur->count[i];
        if (d[i] < top)
            d[i] = top;
        top = d[i];
    }
    if (count)
        *count = top;
    if (!(top > 0) || !(q >= 0 && q <= 1))
        return NAN;
    double rank = q * top;
    for (size_t i = 0; i < n; i++) {
        if (d[i] < rank || d[i] == 0)
            continue;
        double lower = i ? cur->le[i - 1] : 0;
        double below = i ? d[i - 1] : 0;
        if (isinf(cur->le[i]))
            return i ? cur->le[i - 1] : NAN; /* the top bucket has no upper bound */
        if (lower > cur->le[i] || lower < 0)
            lower = 0 < cur->le[i] ? 0 : cur->le[i];
        double in = d[i] - below;
        return in > 0 ? lower + (cur->le[i] - lower) * (rank - below) / in : cur->le[i];
    }
    return n ? cur->le[n - 1] : NAN;
}

void scrape_point_compute(struct server_point *out, const struct scrape_snap *prev,
                          const struct scrape_snap *cur, double t_s)
{
    out->t_s = t_s;
    out->running = cur->running;
    out->waiting = cur->waiting;
    out->kv_usage = isnan(cur->kv_usage) ? cur->kv_usage_old : cur->kv_usage;
    out->preemptions_total = cur->preemptions_total;
    out->preemptions = NAN;
    if (prev && !isnan(prev->preemptions_total) && !isnan(cur->preemptions_total)) {
        double d = cur->preemptions_total - prev->preemptions_total;
        out->preemptions = d < 0 ? cur->preemptions_total : d;
    }
    out->ttft_p50_ms = out->ttft_p99_ms = out->ttft_count = out->queue_p50_ms = NAN;
    if (prev && cur->ttft.n) {
        double n = 0;
        out->ttft_p50_ms = scrape_hist_quantile(&prev->ttft, &cur->ttft, 0.5, &n) * 1000;
        out->ttft_p99_ms = scrape_hist_quantile(&prev->ttft, &cur->ttft, 0.99, NULL) * 1000;
        out->ttft_count = n;
    }
    if (prev && cur->queue.n)
        out->queue_p50_ms = scrape_hist_quantile(&prev->queue, &cur->queue, 0.5, NULL) * 1000;
    else if (!cur->queue.n && !isnan(cur->queue.q50))
        out->queue_p50_ms = cur->queue.q50 * 1000;
}

/* ---- results ---- */

void scrape_summary_release(struct scrape_summary *s)
{
    ts_free(s->points);
    memset(s, 0, sizeof(*s));
}

json_t *scrape_timeline_json(const struct scrape_summary *s)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < s->npoints; i++) {
        const struct server_point *p = &s->points[i];
        json_t *o = json_pack(
            "{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "t_s", tsjson_num(p->t_s),
            "running", tsjson_num(p->running), "waiting", tsjson_num(p->waiting), "kv_usage",
            tsjson_num(p->kv_usage), "preemptions", tsjson_num(p->preemptions), "preemptions_total",
            tsjson_num(p->preemptions_total), "ttft_p50_ms", tsjson_num(p->ttft_p50_ms),
            "ttft_p99_ms", tsjson_num(p->ttft_p99_ms), "ttft_count", tsjson_num(p->ttft_count),
            "queue_p50_ms", tsjson_num(p->queue_p50_ms));
        if (!o || json_array_append_new(a, o)) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* The URL without user info and query: what may appear in a result file. */
static void url_public(const char *url, char *out, size_t n)
{
    const char *scheme = strstr(url, "://");
    const char *host = scheme ? scheme + 3 : url;
    const char *path = host + strcspn(host, "/?#");
    const char *at = memchr(host, '@', (size_t)(path - host));
    if (at)
        host = at + 1;
    size_t plen = strcspn(path, "?#");
    snprintf(out, n, "%.*s%.*s%.*s", scheme ? (int)(scheme + 3 - url) : 0, url, (int)(path - host),
             host, (int)plen, path);
}

int scrape_url_from_target(const char *target_url, char *out, size_t n)
{
    if (strncmp(target_url, "http://", 7) && strncmp(target_url, "https://", 8))
        return -EINVAL;
    const char *host = strstr(target_url, "://") + 3;
    size_t root = (size_t)(host - target_url) + strcspn(host, "/?#");
    int len = snprintf(out, n, "%.*s/metrics", (int)root, target_url);
    return len < 0 || (size_t)len >= n ? TS_TOOBIG : 0;
}

json_t *scrape_info_json(const struct scrape_summary *s, const struct scrape_config *cfg)
{
    char url[512];
    url_public(cfg->url ? cfg->url : "", url, sizeof(url));
    uint64_t interval = cfg->interval_ns ? cfg->interval_ns : TS_NS_PER_S;
    return json_pack("{s:s, s:f, s:s?, s:I, s:I, s:I, s:I, s:s?}", "url", url, "interval_s",
                     (double)interval / 1e9, "flavor", s->flavor[0] ? s->flavor : NULL, "scrapes",
                     (json_int_t)s->scrapes, "failures", (json_int_t)s->failures, "skipped",
                     (json_int_t)s->skipped, "dropped", (json_int_t)s->dropped, "last_error",
                     s->last_error[0] ? s->last_error : NULL);
}

/* ---- the scraper ---- */

struct scraper {
    uv_loop_t *loop;
    struct http_client client;
    uv_timer_t timer;
    struct http_call *call; /* the scrape in flight */
    struct buf body;
    char *url;
    char shown[256]; /* the URL without user info and query, for messages */
    uint64_t interval_ns;
    uint64_t start_ns;
    uint32_t timeout_ms;
    struct scrape_snap snaps[2]; /* the previous and the current */
    unsigned cur;                /* index of the next snapshot to fill */
    bool have_prev;
    bool timer_inited, closing, warned, too_big;
    struct scrape_summary sum;
    size_t cap;
};

static void note_failure(struct scraper *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void note_failure(struct scraper *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->sum.last_error, sizeof(s->sum.last_error), fmt, ap);
    va_end(ap);
    s->sum.failures++;
    if (!s->warned) {
        s->warned = true; /* once: a server without metrics would flood the log */
        ts_warn("server metrics: %s (failed scrapes are counted, the run goes on)",
                s->sum.last_error);
    } else {
        ts_debug("server metrics: %s", s->sum.last_error);
    }
}

static void push_point(struct scraper *s, const struct server_point *p)
{
    if (s->sum.npoints == s->cap) {
        if (s->cap >= SCRAPE_MAX_POINTS) {
            s->sum.dropped++;
            return;
        }
        size_t cap = s->cap ? s->cap * 2 : 256;
        struct server_point *pts = ts_realloc(s->sum.points, cap * sizeof(*pts));
        if (!pts) {
            s->sum.dropped++;
            return;
        }
        s->sum.points = pts;
        s->cap = cap;
    }
    s->sum.points[s->sum.npoints++] = *p;
}

static int on_body(struct http_call *call, const char *data, size_t len, uint64_t now_ns,
                   void *user)
{
    struct scraper *s = user;
    if (buf_append(&s->body, data, len)) {
        s->too_big = true;
        return 1;
    }
    return 0;
}

static void on_done(struct http_call *call, const struct http_call_result *res, void *user)
{
    struct scraper *s = user;
    s->call = NULL;
    if (s->closing) {
        s->sum.scrapes--; /* abandoned at the end: neither a point nor a failure */
        return;
    }
    if (s->too_big) {
        note_failure(s, "%s: the answer is over %u MiB", s->shown, SCRAPE_MAX_BODY >> 20);
        return;
    }
    if (res->error != HTTP_CALL_OK) {
        note_failure(s, "%s: %s%s%s", s->shown, http_call_error_name(res->error),
                     res->error_text[0] ? ": " : "", res->error_text);
        return;
    }
    if (res->status != 200) {
        note_failure(s, "%s: HTTP status %ld", s->shown, res->status);
        return;
    }
    struct scrape_snap *cur = &s->snaps[s->cur];
    char err[160];
    if (scrape_snap_parse(cur, s->body.data ? s->body.data : "", s->body.len, err, sizeof(err))) {
        note_failure(s, "%s: %s", s->shown, err);
        return;
    }
    if (cur->flavor && !s->sum.flavor[0])
        snprintf(s->sum.flavor, sizeof(s->sum.flavor), "%s", flavor_names[cur->flavor]);
    uint64_t mid = res->start_ns + (res->end_ns - res->start_ns) / 2;
    double t_s =
        mid >= s->start_ns ? (double)(mid - s->start_ns) / 1e9 : -(double)(s->start_ns - mid) / 1e9;
    struct server_point p;
    scrape_point_compute(&p, s->have_prev ? &s->snaps[s->cur ^ 1] : NULL, cur, t_s);
    push_point(s, &p);
    s->have_prev = true;
    s->cur ^= 1;
}

static void on_timer(uv_timer_t *h)
{
    struct scraper *s = h->data;
    if (s->closing)
        return;
    if (s->call) {
        s->sum.skipped++;
        return;
    }
    static const char *const headers[] = {"Accept: text/plain;version=0.0.4;q=1,*/*;q=0.1"};
    const struct http_call_spec spec = {
        .url = s->url,
        .headers = headers,
        .n_headers = 1,
        .ttfb_timeout_ms = s->timeout_ms,
        .total_timeout_ms = s->timeout_ms,
    };
    static const struct http_call_ops ops = {.on_body = on_body, .on_done = on_done};
    buf_reset(&s->body);
    s->too_big = false;
    s->sum.scrapes++;
    int rc = http_client_request(&s->client, &spec, &ops, s, &s->call);
    if (rc) {
        s->call = NULL;
        note_failure(s, "%s: cannot start the request: %s", s->shown, ts_strerror(rc));
    }
}

static void free_when_closed(struct http_client *c, void *arg)
{
    scraper_free(arg);
}

int scraper_new(uv_loop_t *loop, const struct scrape_config *cfg, struct scraper **out, char *err,
                size_t errlen)
{
    if (!cfg->url || (strncmp(cfg->url, "http://", 7) && strncmp(cfg->url, "https://", 8))) {
        ts_errf(err, errlen, "server metrics: expected an http:// or https:// URL");
        return -EINVAL;
    }
    uint64_t interval = cfg->interval_ns ? cfg->interval_ns : TS_NS_PER_S;
    if (interval < SCRAPE_MIN_INTERVAL_NS) {
        ts_errf(err, errlen, "server metrics: the interval must be at least 100ms");
        return -EINVAL;
    }
    struct scraper *s = ts_calloc(1, sizeof(*s));
    if (!s || !(s->url = ts_strdup(cfg->url))) {
        ts_free(s);
        ts_errf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    s->loop = loop;
    url_public(cfg->url, s->shown, sizeof(s->shown));
    s->interval_ns = interval;
    uint64_t t = 2 * interval / TS_NS_PER_MS;
    s->timeout_ms = t < 2000 ? 2000 : (uint32_t)(t > 600000 ? 600000 : t);
    buf_init(&s->body, SCRAPE_MAX_BODY);
    struct http_client_config hc;
    http_client_config_default(&hc);
    hc.insecure = cfg->insecure;
    hc.max_connects = 2;
    int rc = http_client_init(&s->client, loop, &hc);
    if (rc) {
        ts_errf(err, errlen, "server metrics: HTTP client: %s", ts_strerror(rc));
        scraper_free(s);
        return rc;
    }
    if ((rc = uv_timer_init(loop, &s->timer))) { /* libuv's never fails; checked all the same */
        ts_errf(err, errlen, "server metrics: timer: %s", uv_strerror(rc));
        s->closing = true;
        http_client_close(&s->client, free_when_closed, s);
        return rc;
    }
    s->timer.data = s;
    s->timer_inited = true;
    *out = s;
    return 0;
}

void scraper_start(struct scraper *s, uint64_t start_ns)
{
    s->start_ns = start_ns;
    /* the loop's clock is cached and in whole ms: refresh it and round up,
     * so that the first scrape is not sent before time 0 */
    uv_update_time(s->loop);
    uint64_t now = ts_now_ns();
    uint64_t delay = start_ns > now ? (start_ns - now) / TS_NS_PER_MS + 2 : 0;
    uv_timer_start(&s->timer, on_timer, delay, s->interval_ns / TS_NS_PER_MS);
}

void scraper_close(struct scraper *s)
{
    if (s->closing)
        return;
    s->closing = true;
    if (s->timer_inited) {
        uv_timer_stop(&s->timer);
        uv_close((uv_handle_t *)&s->timer, NULL);
    }
    http_client_close(&s->client, NULL, NULL);
}

void scraper_take(struct scraper *s, struct scrape_summary *out)
{
    *out = s->sum;
    memset(&s->sum, 0, sizeof(s->sum));
    s->cap = 0;
}

void scraper_free(struct scraper *s)
{
    if (!s)
        return;
    scrape_summary_release(&s->sum);
    buf_release(&s->body);
    ts_free(s->url);
    ts_free(s);
}
