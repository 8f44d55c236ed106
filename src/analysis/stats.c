/*
 * stats.c - per-worker measurement state and its exact merge (see stats.h).
 */
#include "analysis/stats.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/tsjson.h"

static const char *const metric_names[STAT_METRIC_COUNT] = {
    [STAT_TTFT] = "ttft",       [STAT_TTFT_UNCORRECTED] = "ttft_uncorrected",
    [STAT_TTFC] = "ttfc",       [STAT_ITL] = "itl",
    [STAT_TPOT] = "tpot",       [STAT_TPOT_INCL_TTFT] = "tpot_incl_ttft",
    [STAT_E2EL] = "e2el",       [STAT_E2EL_UNCORRECTED] = "e2el_uncorrected",
    [STAT_LAG] = "lag",         [STAT_DNS] = "dns",
    [STAT_CONNECT] = "connect", [STAT_TLS] = "tls",
    [STAT_SENT] = "sent",       [STAT_TTFB] = "ttfb",
    [STAT_TTFA] = "ttfa",
};

static const char *const http_class_names[HTTP_CLASS_COUNT] = {
    [HTTP_CLASS_NONE] = "none",   [HTTP_CLASS_1XX] = "1xx", [HTTP_CLASS_2XX] = "2xx",
    [HTTP_CLASS_3XX] = "3xx",     [HTTP_CLASS_4XX] = "4xx", [HTTP_CLASS_5XX] = "5xx",
    [HTTP_CLASS_OTHER] = "other",
};

const char *stat_metric_name(enum stat_metric m)
{
    if ((unsigned)m >= STAT_METRIC_COUNT)
        return "unknown";
    return metric_names[m];
}

int stat_metric_from_name(const char *name, size_t len)
{
    if (!name)
        return -EINVAL;
    for (int i = 0; i < STAT_METRIC_COUNT; i++) {
        if (strlen(metric_names[i]) == len && memcmp(metric_names[i], name, len) == 0)
            return i;
    }
    return -EINVAL;
}

const char *http_class_name(enum http_class c)
{
    if ((unsigned)c >= HTTP_CLASS_COUNT)
        return "unknown";
    return http_class_names[c];
}

enum http_class http_class_of(int status)
{
    if (status == 0)
        return HTTP_CLASS_NONE;
    if (status < 100 || status > 599)
        return HTTP_CLASS_OTHER;
    return (enum http_class)(HTTP_CLASS_1XX + (status / 100 - 1));
}

bool stat_metric_exact(enum stat_metric m)
{
    switch (m) {
    case STAT_TTFT:
    case STAT_TTFC:
    case STAT_TPOT:
    case STAT_ITL:
    case STAT_E2EL:
    case STAT_LAG:
        return true;
    default:
        return false;
    }
}

bool goodput_cfg_enabled(const struct goodput_cfg *cfg)
{
    return cfg && (cfg->ttft_ms > 0 || cfg->tpot_ms > 0 || cfg->e2el_ms > 0);
}

bool goodput_cfg_needs_stream(const struct goodput_cfg *cfg)
{
    return cfg && (cfg->ttft_ms > 0 || cfg->tpot_ms > 0);
}

int run_stats_new(struct run_stats **out)
{
    struct run_stats *s = ts_calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    for (int i = 0; i < STAT_METRIC_COUNT; i++)
        samples_init(&s->exact[i], SAMPLES_MAX);
    quality_dist_reset(&s->recall);
    quality_stats_reset(&s->quality);
    quality_stats_reset(&s->led);
    for (int i = 0; i < STAT_METRIC_COUNT; i++) {
        int rc = hdr_new_latency(&s->hist[i]);
        if (rc < 0) {
            run_stats_free(s);
            return rc;
        }
    }
    for (int i = 0; i < ITL_POS_BUCKETS; i++) {
        int rc = hdr_new(1, 3600LL * 1000 * 1000, 2, &s->itl_pos[i]);
        if (rc < 0) {
            run_stats_free(s);
            return rc;
        }
    }
    *out = s;
    return 0;
}

void run_stats_free(struct run_stats *s)
{
    if (!s)
        return;
    for (int i = 0; i < STAT_METRIC_COUNT; i++) {
        hdr_free(s->hist[i]);
        samples_release(&s->exact[i]);
    }
    for (int i = 0; i < ITL_POS_BUCKETS; i++)
        hdr_free(s->itl_pos[i]);
    ts_free(s);
}

void run_stats_reset(struct run_stats *s)
{
    struct hdr *hist[STAT_METRIC_COUNT];
    struct hdr *pos[ITL_POS_BUCKETS];
    struct samples exact[STAT_METRIC_COUNT];

    memcpy(hist, s->hist, sizeof(hist));
    memcpy(pos, s->itl_pos, sizeof(pos));
    memcpy(exact, s->exact, sizeof(exact));
    bool hist_only = s->hist_only;
    memset(s, 0, sizeof(*s));
    s->hist_only = hist_only;
    memcpy(s->hist, hist, sizeof(hist));
    memcpy(s->itl_pos, pos, sizeof(pos));
    memcpy(s->exact, exact, sizeof(exact));
    quality_dist_reset(&s->recall);
    quality_stats_reset(&s->quality);
    quality_stats_reset(&s->led);
    for (int i = 0; i < STAT_METRIC_COUNT; i++)
        samples_clear(&s->exact[i]);
    for (int i = 0; i < STAT_METRIC_COUNT; i++)
        hdr_reset(s->hist[i]);
    for (int i = 0; i < ITL_POS_BUCKETS; i++)
        hdr_reset(s->itl_pos[i]);
}

/* j of k hits, from recall = j / k (k >= 1). */
static unsigned led_hits(double recall, uint32_t k)
{
    double j = recall * (double)k + 0.5;
    return !(j > 0) ? 0 : j > (double)k ? k : (unsigned)j;
}

void run_stats_add_led(struct run_stats *s, double recall, uint32_t k,
                       const struct quality_scores *q, bool quality_ok)
{
    if (!q->have)
        return;
    quality_stats_add(&s->led, q);
    if (!k || k > STATS_LED_K_MAX)
        return;
    struct stats_led *b = &s->by_hits[led_hits(recall, k)];
    b->answers++;
    b->quality_ok += quality_ok;
    if (q->have & QUALITY_HAVE_REF) {
        b->with_ref++;
        b->exact += q->exact;
        b->rouge_fix += (uint64_t)llround((q->rouge_l > 0 ? q->rouge_l < 1 ? q->rouge_l : 1 : 0) *
                                          (double)QUALITY_FIX);
        b->bleu_fix += (uint64_t)llround((q->bleu4 > 0 ? q->bleu4 < 1 ? q->bleu4 : 1 : 0) *
                                         (double)QUALITY_FIX);
    }
}

json_t *run_stats_recall_state_json(const struct run_stats *s)
{
    json_t *rows = json_array();
    for (int j = 0; rows && j <= STATS_LED_K_MAX; j++) {
        const struct stats_led *b = &s->by_hits[j];
        if (!b->searches && !b->answers)
            continue;
        json_t *r = json_pack("[i, o, o, o, o, o, o, o]", j, tsjson_count(b->searches),
                              tsjson_count(b->answers), tsjson_count(b->quality_ok),
                              tsjson_count(b->with_ref), tsjson_count(b->exact),
                              tsjson_count(b->rouge_fix), tsjson_count(b->bleu_fix));
        if (json_array_append_new(rows, r)) {
            json_decref(rows);
            rows = NULL;
        }
    }
    json_t *o = json_object();
    int rc = tsjson_put(o, "k", json_integer(s->recall_k));
    rc |= tsjson_put(o, "recall", quality_dist_state_json(&s->recall));
    rc |= tsjson_put(o, "by_hits", rows);
    rc |= tsjson_put(o, "led", quality_stats_state_json(&s->led));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* One by_hits row of a state: [j, searches, answers, quality_ok, with_ref,
 * exact, rouge_fix, bleu_fix], each within what it is part of. */
static int led_row_read(const json_t *r, unsigned *j, struct stats_led *out)
{
    uint64_t v[8];
    if (!json_is_array(r) || json_array_size(r) != 8)
        return -EINVAL;
    for (size_t i = 0; i < 8; i++) {
        const json_t *x = json_array_get(r, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return -EINVAL;
        v[i] = (uint64_t)json_integer_value(x);
    }
    if (v[0] > STATS_LED_K_MAX || v[3] > v[2] || v[4] > v[2] || v[5] > v[4] ||
        v[6] / QUALITY_FIX > v[4] || v[7] / QUALITY_FIX > v[4])
        return -EINVAL;
    *j = (unsigned)v[0];
    *out = (struct stats_led){v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
    return 0;
}

int run_stats_recall_state_add(struct run_stats *s, const json_t *o)
{
    const json_t *rows = json_object_get(o, "by_hits"), *k = json_object_get(o, "k"), *r;
    struct quality_dist recall;
    struct quality_stats led;
    struct stats_led by[STATS_LED_K_MAX + 1];
    size_t i;
    quality_dist_reset(&recall);
    quality_stats_reset(&led);
    memset(by, 0, sizeof(by));
    if (!json_is_object(o) || !json_is_array(rows) || !json_is_integer(k) ||
        json_integer_value(k) < 0 || json_integer_value(k) > UINT32_MAX ||
        quality_dist_state_add(&recall, json_object_get(o, "recall")) ||
        quality_stats_state_add(&led, json_object_get(o, "led")))
        return -EINVAL;
    json_array_foreach(rows, i, r)
    {
        unsigned j;
        struct stats_led row;
        if (led_row_read(r, &j, &row) || by[j].searches || by[j].answers)
            return -EINVAL;
        by[j] = row;
    }
    quality_dist_merge(&s->recall, &recall);
    if ((uint32_t)json_integer_value(k) > s->recall_k)
        s->recall_k = (uint32_t)json_integer_value(k);
    quality_stats_merge(&s->led, &led);
    for (int j = 0; j <= STATS_LED_K_MAX; j++) {
        struct stats_led *d = &s->by_hits[j];
        d->searches += by[j].searches;
        d->answers += by[j].answers;
        d->quality_ok += by[j].quality_ok;
        d->with_ref += by[j].with_ref;
        d->exact += by[j].exact;
        d->rouge_fix += by[j].rouge_fix;
        d->bleu_fix += by[j].bleu_fix;
    }
    return 0;
}

int run_stats_merge(struct run_stats *dst, const struct run_stats *src)
{
    for (int i = 0; i < STAT_METRIC_COUNT; i++) {
        int rc = hdr_add(dst->hist[i], src->hist[i]);
        if (rc < 0)
            return rc;
    }
    for (int i = 0; i < ITL_POS_BUCKETS; i++) {
        int rc = hdr_add(dst->itl_pos[i], src->itl_pos[i]);
        if (rc < 0)
            return rc;
    }
    for (int i = 0; i < STAT_METRIC_COUNT && !dst->hist_only; i++)
        samples_merge(&dst->exact[i], &src->exact[i]);
    quality_stats_merge(&dst->quality, &src->quality);
    quality_dist_merge(&dst->recall, &src->recall);
    if (src->recall_k > dst->recall_k)
        dst->recall_k = src->recall_k;
    quality_stats_merge(&dst->led, &src->led);
    for (int j = 0; j <= STATS_LED_K_MAX; j++) {
        struct stats_led *d = &dst->by_hits[j];
        const struct stats_led *o = &src->by_hits[j];
        d->searches += o->searches;
        d->answers += o->answers;
        d->quality_ok += o->quality_ok;
        d->with_ref += o->with_ref;
        d->exact += o->exact;
        d->rouge_fix += o->rouge_fix;
        d->bleu_fix += o->bleu_fix;
    }
    errtally_merge(&dst->errors, &src->errors);
    reqsample_merge(&dst->sample, &src->sample);
    dst->requests += src->requests;
    for (int i = 0; i < REQ_OUTCOME_COUNT; i++)
        dst->outcomes[i] += src->outcomes[i];
    for (int i = 0; i < HTTP_CLASS_COUNT; i++)
        dst->http_class[i] += src->http_class[i];
    dst->good += src->good;
    dst->streams += src->streams;
    dst->no_done += src->no_done;
    dst->no_finish += src->no_finish;
    dst->id_changed += src->id_changed;
    dst->after_done += src->after_done;
    dst->out_of_order += src->out_of_order;
    dst->bad_close += src->bad_close;
    dst->fell_back += src->fell_back;
    dst->usage_mismatch += src->usage_mismatch;
    dst->integrity.streams += src->integrity.streams;
    dst->integrity.violated += src->integrity.violated;
    dst->integrity.ok += src->integrity.ok;
    dst->integrity.missing += src->integrity.missing;
    dst->integrity.duplicates += src->integrity.duplicates;
    dst->integrity.reorders += src->integrity.reorders;
    dst->integrity.forged += src->integrity.forged;
    dst->integrity.unsigned_events += src->integrity.unsigned_events;
    dst->reused_conn += src->reused_conn;
    dst->warmup_requests += src->warmup_requests;
    dst->warmup_ok += src->warmup_ok;
    dst->warmup_good += src->warmup_good;
    dst->warmup_output_tokens += src->warmup_output_tokens;
    dst->input_tokens += src->input_tokens;
    dst->input_tokens_intended += src->input_tokens_intended;
    dst->output_tokens += src->output_tokens;
    for (int i = 0; i < TOKEN_SOURCE_COUNT; i++)
        dst->token_source[i] += src->token_source[i];
    dst->usage_input += src->usage_input;
    dst->content_chunks += src->content_chunks;
    dst->choice_chunks += src->choice_chunks;
    dst->usage_tail_n += src->usage_tail_n;
    dst->usage_tail_us += src->usage_tail_us;
    dst->output_tokens_all += src->output_tokens_all;
    for (int i = 0; i < REQ_OUTCOME_COUNT; i++) {
        dst->fail_duration_us[i] += src->fail_duration_us[i];
        for (int b = 0; b <= GENAI_BUCKETS; b++)
            dst->fail_duration[i][b] += src->fail_duration[i][b];
    }
    for (int b = 0; b <= GENAI_BUCKETS; b++) {
        dst->token_usage[0][b] += src->token_usage[0][b];
        dst->token_usage[1][b] += src->token_usage[1][b];
    }
    return 0;
}

/* Nanoseconds to the nearest microsecond, as the histograms store them. */
static inline int64_t ns_to_us(uint64_t ns)
{
    return (int64_t)((ns + 500) / 1000);
}

/* Into the histogram and, for the exact metrics but itl (add_itl_exact), the samples. */
static inline void record_ns(struct run_stats *s, enum stat_metric m, uint64_t ns)
{
    (void)hdr_record(s->hist[m], ns_to_us(ns));
    if (m != STAT_ITL && stat_metric_exact(m))
        samples_add(&s->exact[m], (int64_t)ns);
}

/* vLLM's ITL list of an ok request: the gaps between its chunks with choices. */
static void add_itl_exact(struct run_stats *s, const struct req_record *rec)
{
    if (rec->choice_chunks < 2)
        return;
    if (!rec->chunk_ns || rec->n_chunk_ns < rec->choice_chunks) {
        samples_mark_not_kept(&s->exact[STAT_ITL]);
        return;
    }
    for (uint32_t i = 1; i < rec->n_chunk_ns; i++) {
        uint64_t a = rec->chunk_ns[i - 1], b = rec->chunk_ns[i];
        samples_add(&s->exact[STAT_ITL], (int64_t)(b >= a ? b - a : 0));
    }
}

/* Records to - from when both happened and to is not earlier. */
static inline void record_span(struct run_stats *s, enum stat_metric m, uint64_t from, uint64_t to)
{
    if (from && to && to >= from)
        record_ns(s, m, to - from);
}

static void add_phases(struct run_stats *s, const struct req_record *rec)
{
    if (!(rec->flags & REQF_REUSED_CONN)) {
        if (rec->dns_us)
            (void)hdr_record(s->hist[STAT_DNS], rec->dns_us);
        if (rec->connect_us && rec->connect_us >= rec->dns_us)
            (void)hdr_record(s->hist[STAT_CONNECT], rec->connect_us - rec->dns_us);
        if (rec->tls_us && rec->tls_us >= rec->connect_us)
            (void)hdr_record(s->hist[STAT_TLS], rec->tls_us - rec->connect_us);
    }
    if (rec->sent_us)
        (void)hdr_record(s->hist[STAT_SENT], rec->sent_us);
    if (rec->ttfb_us)
        (void)hdr_record(s->hist[STAT_TTFB], rec->ttfb_us);
}

static bool within_ms(uint64_t ns, double limit_ms)
{
    return limit_ms <= 0 || (double)ns <= limit_ms * 1e6;
}

/* The latency metrics of a successful request, and its goodput verdict. */
static void add_ok(struct run_stats *s, const struct req_record *rec, const struct goodput_cfg *cfg)
{
    uint32_t out = rec->output_tokens;
    uint64_t end = rec->last_chunk_ns ? rec->last_chunk_ns : rec->end_ns;
    bool has_e2el = rec->intended_ns && end >= rec->intended_ns;
    uint64_t e2el = has_e2el ? end - rec->intended_ns : 0;

    uint64_t in =
        rec->usage_prompt_tokens >= 0 ? (uint64_t)rec->usage_prompt_tokens : rec->prompt_tokens;
    s->input_tokens += in;
    s->input_tokens_intended += rec->prompt_tokens;
    s->token_usage[0][genai_token_bucket(in)]++;
    s->token_usage[1][genai_token_bucket(out)]++;
    if (rec->usage_prompt_tokens >= 0)
        s->usage_input++;
    s->output_tokens += out;
    if ((unsigned)rec->token_source < TOKEN_SOURCE_COUNT)
        s->token_source[rec->token_source]++;
    s->content_chunks += rec->content_chunks;
    s->choice_chunks += rec->choice_chunks;

    record_span(s, STAT_TTFT, rec->intended_ns, rec->first_chunk_ns);
    record_span(s, STAT_TTFT_UNCORRECTED, rec->start_ns, rec->first_chunk_ns);
    record_span(s, STAT_TTFC, rec->intended_ns, rec->first_token_ns);
    record_span(s, STAT_TTFA, rec->intended_ns, rec->first_answer_ns);
    if (has_e2el)
        record_ns(s, STAT_E2EL, e2el);
    record_span(s, STAT_E2EL_UNCORRECTED, rec->start_ns, end);

    /* vLLM: (latency - ttft) / (output_len - 1), undefined for one token. */
    uint64_t tpot_ns = 0;
    bool has_tpot = out > 1 && rec->first_chunk_ns && rec->last_chunk_ns >= rec->first_chunk_ns;
    if (has_tpot) {
        double ns = (double)(rec->last_chunk_ns - rec->first_chunk_ns) / (double)(out - 1);
        tpot_ns = (uint64_t)llround(ns);
        record_ns(s, STAT_TPOT, tpot_ns);
    }
    if (has_e2el && out >= 1)
        record_ns(s, STAT_TPOT_INCL_TTFT, (uint64_t)llround((double)e2el / (double)out));

    add_itl_exact(s, rec);
    if (rec->last_chunk_ns && rec->last_event_ns > rec->last_chunk_ns) {
        s->usage_tail_n++;
        s->usage_tail_us += ns_to_us(rec->last_event_ns - rec->last_chunk_ns);
    }
    if (goodput_cfg_enabled(cfg) && goodput_meets(cfg, rec))
        s->good++;
    struct reqsample_entry se = {
        .key = reqsample_key(rec->id),
        .input_tokens = in > UINT32_MAX ? UINT32_MAX : (uint32_t)in,
        .output_tokens = out,
        .ttft_ms = rec->first_token_ns && rec->first_token_ns >= rec->intended_ns
                       ? (float)((double)(rec->first_token_ns - rec->intended_ns) / 1e6)
                       : NAN,
        .e2el_ms = has_e2el ? (float)((double)e2el / 1e6) : NAN,
    };
    reqsample_add(&s->sample, &se);
}

bool goodput_meets(const struct goodput_cfg *cfg, const struct req_record *rec)
{
    if (rec->outcome != REQ_OK)
        return false;
    uint32_t out = rec->output_tokens;
    uint64_t end = rec->last_chunk_ns ? rec->last_chunk_ns : rec->end_ns;
    if (!rec->intended_ns || end < rec->intended_ns)
        return false;
    uint64_t e2el = end - rec->intended_ns;
    /* what users feel: the first token with content, reasoning or a tool
     * call, not a role chunk a server sends before prefill; a request
     * without one (not streamed) has no TTFT or TPOT to meet: it is not good
     * by a threshold on them (runs that stream nothing refuse such
     * thresholds at start) */
    uint64_t first = rec->first_token_ns ? rec->first_token_ns : rec->first_chunk_ns;
    bool timed = first && first >= rec->intended_ns;
    if (!timed && (cfg->ttft_ms > 0 || cfg->tpot_ms > 0))
        return false;
    uint64_t ttft = timed ? first - rec->intended_ns : 0;
    uint64_t tpot_ns = 0;
    if (out > 1 && rec->first_chunk_ns && rec->last_chunk_ns >= rec->first_chunk_ns)
        tpot_ns = (uint64_t)llround((double)(rec->last_chunk_ns - rec->first_chunk_ns) /
                                    (double)(out - 1));
    return within_ms(ttft, cfg->ttft_ms) && within_ms(tpot_ns, cfg->tpot_ms) &&
           within_ms(e2el, cfg->e2el_ms);
}

/* Copies an error text for people: a server's control characters become '?'. */
static void printable_copy(char *dst, size_t n, const char *src)
{
    size_t i = 0;
    for (; src[i] && i + 1 < n; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    dst[i] = '\0';
}

void run_stats_add_record(struct run_stats *s, const struct req_record *rec,
                          const struct goodput_cfg *cfg)
{
    enum req_outcome o = (unsigned)rec->outcome < REQ_OUTCOME_COUNT ? rec->outcome : REQ_OTHER;

    if (rec->flags & REQF_WARMUP) {
        s->warmup_requests++;
        s->warmup_output_tokens += rec->output_tokens;
        if (o == REQ_OK) {
            s->warmup_ok++;
            s->warmup_good += goodput_cfg_enabled(cfg) && goodput_meets(cfg, rec);
        }
        return;
    }
    s->requests++;
    s->outcomes[o]++;
    s->http_class[http_class_of(rec->http_status)]++;
    if (req_outcome_is_error(o))
        errtally_add(&s->errors, o, rec->http_status, rec->error, 1);
    /* quality counts every scored answer, cut ones too: a cut answer is a worse one */
    if (rec->quality.have)
        quality_stats_add(&s->quality, &rec->quality);
    if (rec->has_recall && rec->outcome == REQ_OK) {
        quality_dist_add(&s->recall, rec->recall);
        if (rec->recall_k > s->recall_k)
            s->recall_k = rec->recall_k;
        if (rec->recall_k && rec->recall_k <= STATS_LED_K_MAX)
            s->by_hits[led_hits(rec->recall, rec->recall_k)].searches++;
    }
    s->output_tokens_all += rec->output_tokens;
    s->streams += (rec->flags & REQF_STREAM) != 0;
    s->no_done += (rec->flags & REQF_NO_DONE) != 0;
    s->no_finish += (rec->flags & REQF_NO_FINISH) != 0;
    s->id_changed += (rec->flags & REQF_ID_CHANGED) != 0;
    s->after_done += (rec->flags & REQF_AFTER_DONE) != 0;
    s->out_of_order += (rec->flags & REQF_OUT_OF_ORDER) != 0;
    s->bad_close += (rec->flags & REQF_BAD_CLOSE) != 0;
    s->fell_back += (rec->flags & REQF_FELL_BACK) != 0;
    s->usage_mismatch += (rec->flags & REQF_USAGE_MISMATCH) != 0;
    if (rec->flags & REQF_SIGNED) {
        s->integrity.streams++;
        s->integrity.violated += (rec->sig.missing | rec->sig.duplicates | rec->sig.reorders |
                                  rec->sig.forged | rec->sig.unsigned_events) != 0;
        s->integrity.ok += rec->sig.ok;
        s->integrity.missing += rec->sig.missing;
        s->integrity.duplicates += rec->sig.duplicates;
        s->integrity.reorders += rec->sig.reorders;
        s->integrity.forged += rec->sig.forged;
        s->integrity.unsigned_events += rec->sig.unsigned_events;
    }
    s->reused_conn += (rec->flags & REQF_REUSED_CONN) != 0;

    /* A timer may fire a hair early: a start before its intended time is no lag. */
    if (rec->intended_ns && rec->start_ns)
        record_ns(s, STAT_LAG,
                  rec->start_ns > rec->intended_ns ? rec->start_ns - rec->intended_ns : 0);
    add_phases(s, rec);
    if (o != REQ_OK && rec->start_ns && rec->end_ns >= rec->start_ns) {
        uint64_t us = (rec->end_ns - rec->start_ns + 500) / 1000;
        s->fail_duration[o][genai_duration_bucket(us)]++;
        s->fail_duration_us[o] += us;
    }
    if (o == REQ_OK)
        add_ok(s, rec, cfg);
}

void run_stats_add_itl(struct run_stats *s, uint64_t gap_ns)
{
    record_ns(s, STAT_ITL, gap_ns);
}

unsigned itl_pos_bucket(uint64_t k)
{
    unsigned b = 0;
    for (uint64_t edge = 16; k >= edge && b < ITL_POS_BUCKETS - 1; edge *= 2)
        b++;
    return b;
}

unsigned genai_duration_bucket(uint64_t us)
{
    unsigned b = 0;
    while (b < GENAI_BUCKETS && us > (UINT64_C(10000) << b))
        b++;
    return b;
}

unsigned genai_token_bucket(uint64_t tokens)
{
    unsigned b = 0;
    while (b < GENAI_BUCKETS && tokens > (UINT64_C(1) << (2 * b)))
        b++;
    return b;
}

uint64_t itl_pos_bucket_from(unsigned b)
{
    return b == 0 ? 0 : 16ull << (b - 1);
}

void run_stats_add_itl_at(struct run_stats *s, uint64_t k, uint64_t gap_ns)
{
    record_ns(s, STAT_ITL, gap_ns);
    uint64_t us = (gap_ns + 500) / 1000;
    (void)hdr_record(s->itl_pos[itl_pos_bucket(k)], (int64_t)(us ? us : 1));
}

void run_stats_exact_not_kept(struct run_stats *s)
{
    for (int i = 0; i < STAT_METRIC_COUNT; i++) {
        if (stat_metric_exact((enum stat_metric)i))
            samples_mark_not_kept(&s->exact[i]);
    }
}

uint64_t run_stats_failed(const struct run_stats *s)
{
    return s->requests - s->outcomes[REQ_OK] - s->outcomes[REQ_CUT] - s->outcomes[REQ_CANCELLED];
}

double run_stats_error_rate(const struct run_stats *s)
{
    uint64_t failed = run_stats_failed(s);
    uint64_t done = s->outcomes[REQ_OK] + failed;
    return done ? (double)failed / (double)done : 0.0;
}

bool run_stats_none_ok(const struct run_stats *s, char *why, size_t n)
{
    if (s->outcomes[REQ_OK])
        return false;
    if (!n)
        return true;
    if (!s->requests && !s->warmup_requests) {
        snprintf(why, n, "no request was sent");
        return true;
    }
    if (!s->requests) {
        snprintf(why, n,
                 "no request was measured: all %" PRIu64
                 " requests were sent during the warm-up (%" PRIu64 " ok)",
                 s->warmup_requests, s->warmup_ok);
        return true;
    }
    uint64_t failed = run_stats_failed(s);
    if (!failed) {
        snprintf(why, n,
                 "no request succeeded: all %" PRIu64 " requests were cut when the run ended "
                 "(a longer --duration or --drain lets them finish)",
                 s->requests);
        return true;
    }
    int top = -1;
    for (int i = 0; i < REQ_OUTCOME_COUNT; i++) {
        if (req_outcome_is_error((enum req_outcome)i) && s->outcomes[i] &&
            (top < 0 || s->outcomes[i] > s->outcomes[top]))
            top = i;
    }
    if (top < 0)
        top = REQ_OTHER; /* cannot happen: failed > 0 counts an error outcome */
    /* the outcome's most frequent message (the error tally keeps them) */
    const struct errtally_entry *best = NULL;
    for (size_t i = 0; i < s->errors.n; i++) {
        const struct errtally_entry *e = &s->errors.e[i];
        if ((int)e->outcome == top && e->msg[0] && (!best || e->count > best->count))
            best = e;
    }
    char text[96] = "";
    if (best)
        printable_copy(text, sizeof(text), best->msg);
    snprintf(why, n,
             "no request succeeded: %" PRIu64 " of %" PRIu64 " failed, most as %s (%" PRIu64
             ")%s%.96s",
             failed, s->requests, req_outcome_name((enum req_outcome)top), s->outcomes[top],
             text[0] ? ": " : "", text);
    return true;
}

const char *run_stats_token_method(const struct run_stats *s)
{
    const char *method = "none";
    int used = 0;

    for (int i = 0; i < TOKEN_SOURCE_COUNT; i++) {
        if (s->token_source[i]) {
            method = token_source_name((enum token_source)i);
            used++;
        }
    }
    return used > 1 ? "mixed" : method;
}
