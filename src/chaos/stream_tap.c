/*
 * stream_tap.c - the per-response transform of the SSE, LLM and RAG faults.
 *
 * One upstream event goes through four stages:
 *   1. cuts decided before it (truncation at 0, an error event, a stall or
 *      the time-to-first-token shift);
 *   2. rewrites of its JSON (finish reasons, hallucinations, the format
 *      violation, invalid UTF-8, a malformed cut);
 *   3. the sequence (reorder window, duplicates, [DONE] dropped);
 *   4. timing (shift, jitter, throttle) and the wire bytes, split in pieces
 *      if asked; then cuts decided after it (truncation after k, premature
 *      length).
 * Every emit carries a time >= the previous one, so the driver writes them
 * in order. Only the first fault of each type in a tap is used.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/dist.h"
#include "chaos/tap_int.h"
#include "llm/openai_encode.h"
#include "llm/openai_memo.h"

#define TAP_BUF_MAX    (16u << 20) /* one event or body as written */
#define TAP_WINDOW_MAX 64          /* events in one reorder window */
#define TAP_NS_MAX     1e15        /* ~11.6 days: any longer delay is clamped */

/* What the pipeline knows of an event on its way out. */
enum tev_flags {
    TEV_TOKEN = 1 << 0, /* carries output tokens */
    TEV_DONE = 1 << 1,  /* the [DONE] sentinel */
    TEV_DUP = 1 << 2,   /* write it twice */
};

struct tap_item {
    char *data;
    size_t len;
    char *type; /* NULL: "message" */
    unsigned flags;
};

struct tap_fault {
    struct fault *f; /* NULL: the type is not active */
    uint64_t k;      /* the count drawn for this response */
    uint64_t delay;  /* the delay drawn for this response, ns */
    bool fired;      /* injected (counted once) */
};

enum tap_parse {
    TAP_PARSE_NONE,  /* nothing: times and framing only */
    TAP_PARSE_FLAGS, /* what an event carries (tokens, role, finish, ...) */
    TAP_PARSE_DOM,   /* its JSON, to rewrite or keep */
};

enum tap_state {
    TAP_OPEN,
    TAP_SWALLOW, /* premature length: finish sent, upstream read to its end */
    TAP_CLOSED,  /* nothing more is emitted */
};

struct stream_tap {
    struct tap_fault ft[FAULT_TYPE_COUNT];
    struct fault **refs;
    size_t n_refs;
    struct rng rng;
    uint64_t seed;
    uint64_t start_ns;
    enum tap_state state;
    uint64_t events_in, tokens_in; /* upstream events and token events so far */
    uint64_t shift;                /* ns every event is delayed by (ttft, stalls) */
    uint64_t jitter_sum;           /* sse_jitter "add": the delays drawn so far, ns */
    uint64_t last_at, last_token_at;
    bool emitted_any, token_emitted;
    bool ttft_done;
    struct llm_hallu hallu;
    json_t *hallu_tmpl; /* the chunk whose text end is held (template of the flush) */
    /* reorder window */
    struct tap_item win[TAP_WINDOW_MAX];
    size_t win_n, win_want;
    /* format violation */
    bool fv_armed, fv_done;
    json_t *held; /* a content chunk with a closer, not yet written */
    char *held_type;
    json_t *last_content; /* template for a stray-quote chunk */
    /* premature length */
    json_t *usage_seen;
    bool done_seen;
    /* what each event is read for, see tap_parse_of() */
    enum tap_parse parse;
    /* TAP_PARSE_FLAGS: the decoder (the driver's, or the tap's own: dec_own)
     * and the stream's memo */
    struct openai_decoder *dec;
    bool dec_own;
    struct openai_memo *memo;
    uint64_t parsed; /* events whose JSON was parsed into a DOM */
    struct buf wire, ser, scratch;
};

/* ---- JSON text ---- */

json_t *tap_json_load(const char *s, size_t len)
{
    json_error_t e;
    return json_loadb(s, len, JSON_ALLOW_NUL | JSON_DECODE_ANY, &e);
}

static int dump_real(struct buf *out, double d, unsigned flags)
{
    char tmp[48];
    if (flags & TAP_JSON_FLOAT32) {
        float f = (float)d;
        for (int p = 6; p <= 9; p++) {
            snprintf(tmp, sizeof(tmp), "%.*g", p, (double)f);
            if ((float)strtod(tmp, NULL) == f)
                break;
        }
    } else {
        for (int p = 15; p <= 17; p++) {
            snprintf(tmp, sizeof(tmp), "%.*g", p, d);
            if (strtod(tmp, NULL) == d)
                break;
        }
    }
    int rc = buf_append_str(out, tmp);
    if (rc == 0 && !strpbrk(tmp, ".eEni"))
        rc = buf_append(out, ".0", 2);
    return rc;
}

static int dump_string(struct buf *out, const char *s, size_t n)
{
    int rc = buf_append_char(out, '"');
    if (rc == 0)
        rc = openai_json_escape(out, s, n);
    if (rc == 0)
        rc = buf_append_char(out, '"');
    return rc;
}

int tap_json_dump(struct buf *out, const json_t *v, unsigned flags)
{
    int rc = 0;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        rc = buf_append_char(out, '{');
        bool first = true;
        for (void *it = json_object_iter((json_t *)v); it && rc == 0;
             it = json_object_iter_next((json_t *)v, it)) {
            if (!first)
                rc = buf_append_char(out, ',');
            first = false;
            if (rc == 0)
                rc = dump_string(out, json_object_iter_key(it), json_object_iter_key_len(it));
            if (rc == 0)
                rc = buf_append_char(out, ':');
            if (rc == 0)
                rc = tap_json_dump(out, json_object_iter_value(it), flags);
        }
        return rc == 0 ? buf_append_char(out, '}') : rc;
    }
    case JSON_ARRAY:
        rc = buf_append_char(out, '[');
        for (size_t i = 0; i < json_array_size(v) && rc == 0; i++) {
            if (i > 0)
                rc = buf_append_char(out, ',');
            if (rc == 0)
                rc = tap_json_dump(out, json_array_get(v, i), flags);
        }
        return rc == 0 ? buf_append_char(out, ']') : rc;
    case JSON_STRING:
        return dump_string(out, json_string_value(v), json_string_length(v));
    case JSON_INTEGER:
        return buf_appendf(out, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    case JSON_REAL:
        return dump_real(out, json_real_value(v), flags);
    case JSON_TRUE:
        return buf_append(out, "true", 4);
    case JSON_FALSE:
        return buf_append(out, "false", 5);
    case JSON_NULL:
    default:
        return buf_append(out, "null", 4);
    }
}

/* ---- life cycle ---- */

static uint64_t ns_of(double x)
{
    if (!(x > 0))
        return 0;
    return x > TAP_NS_MAX ? (uint64_t)TAP_NS_MAX : (uint64_t)x;
}

static bool tap_family(enum fault_type t)
{
    enum fault_family fam = fault_type_family(t);
    return fam == FAULT_SSE || fam == FAULT_LLM || fam == FAULT_RAG;
}

/* Whether fault t of the tap counts in tokens (its "after_tokens"). */
static bool counts_tokens(const struct stream_tap *tap, int t)
{
    return tap->ft[t].f->params.unit == FAULT_UNIT_TOKENS;
}

/*
 * What the tap must know of each event, from its faults:
 *  - nothing (TAP_PARSE_NONE): sse_jitter and sse_split (times and pieces of
 *    every event), sse_reorder, sse_duplicate (a rate or a count of
 *    events), sse_drop_done (the [DONE] sentinel, recognised without
 *    parsing), and sse_stall, sse_truncate and sse_error_event counted in
 *    events;
 *  - its flags (TAP_PARSE_FLAGS): the same counted in tokens, sse_throttle
 *    (token events) and sse_ttft_delay (the first token or non-role event);
 *  - its JSON (TAP_PARSE_DOM): every fault that rewrites a chunk or keeps
 *    one as a template (finish reasons, invalid UTF-8, a malformed cut, the
 *    LLM and RAG faults).
 */
static enum tap_parse tap_parse_of(const struct stream_tap *tap)
{
    enum tap_parse need = TAP_PARSE_NONE;
    for (int t = 0; t < FAULT_TYPE_COUNT; t++) {
        if (!tap->ft[t].f)
            continue;
        switch (t) {
        case FAULT_SSE_JITTER:
        case FAULT_SSE_SPLIT:
        case FAULT_SSE_DROP_DONE:
        case FAULT_SSE_REORDER:
        case FAULT_SSE_DUPLICATE:
            break;
        case FAULT_SSE_STALL:
        case FAULT_SSE_TRUNCATE:
        case FAULT_SSE_ERROR_EVENT:
            if (counts_tokens(tap, t))
                need = TAP_PARSE_FLAGS;
            break;
        case FAULT_SSE_THROTTLE:
        case FAULT_SSE_TTFT_DELAY:
            need = TAP_PARSE_FLAGS;
            break;
        default:
            return TAP_PARSE_DOM;
        }
    }
    return need;
}

struct stream_tap *stream_tap_new(struct fault *const *faults, size_t n, uint64_t seed,
                                  uint64_t now_ns)
{
    struct stream_tap *tap = ts_calloc(1, sizeof(*tap));
    if (!tap)
        return NULL;
    if (n > 0) {
        tap->refs = ts_calloc(n, sizeof(*tap->refs));
        if (!tap->refs) {
            ts_free(tap);
            return NULL;
        }
    }
    for (size_t i = 0; i < n; i++) {
        struct fault *f = faults[i];
        if (!f)
            continue;
        tap->refs[tap->n_refs++] = fault_ref(f);
        if ((unsigned)f->type < FAULT_TYPE_COUNT && tap_family(f->type) && !tap->ft[f->type].f)
            tap->ft[f->type].f = f;
    }
    tap->seed = seed;
    tap->start_ns = now_ns;
    rng_seed(&tap->rng, seed);
    /* draw the per-response numbers in a fixed order: reproducible per seed */
    for (int t = 0; t < FAULT_TYPE_COUNT; t++) {
        struct tap_fault *tf = &tap->ft[t];
        if (!tf->f)
            continue;
        const struct fault_params *p = &tf->f->params;
        if (p->unit != FAULT_UNIT_NONE)
            tf->k = dist_sample_uint(&p->count, &tap->rng, 0, (uint64_t)1 << 40);
        if (p->has_delay)
            tf->delay = ns_of(dist_sample(&p->delay, &tap->rng));
    }
    const struct fault *h = tap->ft[FAULT_LLM_HALLUCINATE].f;
    llm_hallu_init(&tap->hallu, rng_mix64(seed ^ 0x4a11u),
                   h ? (h->params.has_rate ? h->params.rate : 1.0) : 0);
    const struct fault *fv = tap->ft[FAULT_LLM_FORMAT_VIOLATION].f;
    if (fv)
        tap->fv_armed = rng_uniform01(&tap->rng) < (fv->params.has_rate ? fv->params.rate : 1.0);
    struct tap_fault *ro = &tap->ft[FAULT_SSE_REORDER];
    if (ro->f) {
        uint64_t w = ro->f->params.unit != FAULT_UNIT_NONE ? ro->k : 2;
        tap->win_want = w < 2 ? 2 : w > TAP_WINDOW_MAX ? TAP_WINDOW_MAX : (size_t)w;
    }
    tap->parse = tap_parse_of(tap);
    buf_init(&tap->wire, TAP_BUF_MAX);
    buf_init(&tap->ser, TAP_BUF_MAX);
    buf_init(&tap->scratch, TAP_BUF_MAX);
    return tap;
}

static void item_release(struct tap_item *it)
{
    ts_free(it->data);
    ts_free(it->type);
    memset(it, 0, sizeof(*it));
}

void stream_tap_free(struct stream_tap *tap)
{
    if (!tap)
        return;
    for (size_t i = 0; i < tap->win_n; i++)
        item_release(&tap->win[i]);
    json_decref(tap->held);
    json_decref(tap->hallu_tmpl);
    json_decref(tap->last_content);
    json_decref(tap->usage_seen);
    ts_free(tap->held_type);
    openai_memo_free(tap->memo);
    if (tap->dec_own) {
        openai_decoder_release(tap->dec);
        ts_free(tap->dec);
    }
    for (size_t i = 0; i < tap->n_refs; i++)
        fault_unref(tap->refs[i]);
    ts_free(tap->refs);
    buf_release(&tap->wire);
    buf_release(&tap->ser);
    buf_release(&tap->scratch);
    ts_free(tap);
}

/* Counts type's fault as injected, once per response. */
static void tap_fire(struct stream_tap *tap, enum fault_type t)
{
    struct tap_fault *tf = &tap->ft[t];
    if (tf->f && !tf->fired) {
        tf->fired = true;
        fault_count_injection(tf->f);
    }
}

static const struct fault *tap_has(const struct stream_tap *tap, enum fault_type t)
{
    return tap->ft[t].f;
}

/* ---- stage 4: timing and wire bytes ---- */

static int wire_build(struct buf *w, const char *type, const char *data, size_t len)
{
    buf_reset(w);
    int rc = 0;
    if (type)
        rc = buf_appendf(w, "event: %s\n", type);
    size_t i = 0;
    for (;;) {
        const char *nl = memchr(data + i, '\n', len - i);
        size_t l = nl ? (size_t)(nl - (data + i)) : len - i;
        if (rc == 0)
            rc = buf_append(w, "data: ", 6);
        if (rc == 0)
            rc = buf_append(w, data + i, l);
        if (rc == 0)
            rc = buf_append_char(w, '\n');
        if (!nl || rc < 0)
            break;
        i += l + 1;
    }
    return rc == 0 ? buf_append_char(w, '\n') : rc;
}

/* Writes one event: its time from the shift, jitter and throttle, then its
 * bytes in one emit or in pieces (sse_split). */
static int tap_write(struct stream_tap *tap, const char *type, const char *data, size_t len,
                     unsigned flags, uint64_t now, const struct tap_out *out)
{
    int rc = wire_build(&tap->wire, type, data, len);
    if (rc < 0)
        return rc;
    for (int copy = 0; copy < ((flags & TEV_DUP) ? 2 : 1); copy++) {
        uint64_t at = now + tap->shift;
        const struct fault *jit = tap_has(tap, FAULT_SSE_JITTER);
        uint64_t floor = tap->last_at;
        if (copy == 0 && jit && tap->emitted_any) {
            uint64_t d = ns_of(dist_sample(&jit->params.delay, &tap->rng));
            if (jit->params.jitter_mode == FAULT_JITTER_FLOOR)
                floor = tap->last_at + d;
            else
                tap->jitter_sum += d;
            tap_fire(tap, FAULT_SSE_JITTER);
        }
        at += tap->jitter_sum;
        if (tap->emitted_any && at < floor)
            at = floor;
        const struct fault *thr = tap_has(tap, FAULT_SSE_THROTTLE);
        if (copy == 0 && thr && (flags & TEV_TOKEN) && tap->token_emitted && thr->params.rate > 0) {
            uint64_t min = tap->last_token_at + ns_of(1e9 / thr->params.rate);
            if (at < min) {
                at = min;
                tap_fire(tap, FAULT_SSE_THROTTLE);
            }
        }
        const struct fault *sp = tap_has(tap, FAULT_SSE_SPLIT);
        size_t piece = sp ? (size_t)(sp->params.bytes > 0 ? sp->params.bytes : 1) : tap->wire.len;
        if (piece == 0)
            piece = 1;
        for (size_t off = 0; off < tap->wire.len; off += piece) {
            size_t m = tap->wire.len - off < piece ? tap->wire.len - off : piece;
            if (off > 0)
                at += ns_of(dist_sample(&sp->params.delay, &tap->rng));
            out->emit(out->ctx, tap->wire.data + off, m, at);
        }
        if (sp && tap->wire.len > piece)
            tap_fire(tap, FAULT_SSE_SPLIT);
        if (copy == 1)
            tap_fire(tap, FAULT_SSE_DUPLICATE);
        tap->last_at = at;
        tap->emitted_any = true;
        if (flags & TEV_TOKEN) {
            tap->last_token_at = at;
            tap->token_emitted = true;
        }
    }
    return 0;
}

/* ---- stage 3: sequence ---- */

static int win_flush(struct stream_tap *tap, uint64_t now, const struct tap_out *out)
{
    size_t n = tap->win_n;
    if (n == 0)
        return 0;
    size_t perm[TAP_WINDOW_MAX];
    sse_shuffle_perm(perm, n, &tap->rng);
    if (n >= 2)
        tap_fire(tap, FAULT_SSE_REORDER);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct tap_item *it = &tap->win[perm[i]];
        rc = tap_write(tap, it->type, it->data, it->len, it->flags, now, out);
    }
    for (size_t i = 0; i < n; i++)
        item_release(&tap->win[i]);
    tap->win_n = 0;
    return rc;
}

static int tap_seq(struct stream_tap *tap, const char *type, const char *data, size_t len,
                   unsigned flags, uint64_t now, const struct tap_out *out)
{
    if (flags & TEV_DONE) {
        int rc = win_flush(tap, now, out);
        if (rc < 0)
            return rc;
        if (tap_has(tap, FAULT_SSE_DROP_DONE)) {
            tap_fire(tap, FAULT_SSE_DROP_DONE);
            return 0;
        }
        return tap_write(tap, type, data, len, flags, now, out);
    }
    const struct fault *ro = tap_has(tap, FAULT_SSE_REORDER);
    if (ro && tap->win_n == 0) {
        double rate = ro->params.has_rate ? ro->params.rate : 1.0;
        if (!(rng_uniform01(&tap->rng) < rate))
            ro = NULL;
    }
    if (!ro)
        return tap_write(tap, type, data, len, flags, now, out);
    struct tap_item *it = &tap->win[tap->win_n];
    it->data = ts_malloc(len + 1);
    it->type = type ? ts_strdup(type) : NULL;
    if (!it->data || (type && !it->type)) {
        item_release(it);
        return -ENOMEM;
    }
    memcpy(it->data, data, len);
    it->data[len] = '\0';
    it->len = len;
    it->flags = flags;
    tap->win_n++;
    return tap->win_n >= tap->win_want ? win_flush(tap, now, out) : 0;
}

/* ---- stage 2 helpers: JSON events ---- */

static int seq_json(struct stream_tap *tap, const char *type, const json_t *v, unsigned flags,
                    uint64_t now, const struct tap_out *out)
{
    buf_reset(&tap->ser);
    int rc = tap_json_dump(&tap->ser, v, 0);
    if (rc < 0)
        return rc;
    return tap_seq(tap, type, tap->ser.data, tap->ser.len, flags, now, out);
}

/* Writes the held content chunk (format violation), broken or not. */
static int held_release(struct stream_tap *tap, bool brk, uint64_t now, const struct tap_out *out)
{
    if (!tap->held)
        return 0;
    json_t *held = tap->held;
    char *type = tap->held_type;
    tap->held = NULL;
    tap->held_type = NULL;
    int rc = 0;
    if (brk) {
        json_t *t = NULL;
        size_t nch = json_array_size(json_object_get(held, "choices"));
        for (size_t i = 0; i < nch && !t; i++) {
            t = tap_chunk_text(held, i);
            if (t && !llm_has_closer(json_string_value(t), json_string_length(t)))
                t = NULL;
        }
        if (t) {
            buf_reset(&tap->scratch);
            rc = llm_drop_last_closer(json_string_value(t), json_string_length(t), &tap->scratch);
            if (rc == 0 && json_string_setn(t, tap->scratch.data, tap->scratch.len) != 0)
                rc = -ENOMEM;
            if (rc == 0)
                tap_fire(tap, FAULT_LLM_FORMAT_VIOLATION);
        }
    }
    if (rc == 0)
        rc = seq_json(tap, type, held, TEV_TOKEN, now, out);
    json_decref(held);
    ts_free(type);
    return rc;
}

/* The end of the answer is near (a finish, usage, error, [DONE] or the
 * upstream end): break the JSON of the answer once. */
static int fv_finish(struct stream_tap *tap, uint64_t now, const struct tap_out *out)
{
    if (!tap->fv_armed || tap->fv_done)
        return 0;
    tap->fv_done = true;
    if (tap->held)
        return held_release(tap, true, now, out);
    if (!tap->last_content)
        return 0;
    /* nothing to drop: a stray quote after the answer */
    json_t *c = json_deep_copy(tap->last_content);
    if (!c)
        return -ENOMEM;
    json_t *t = tap_chunk_text(c, 0);
    int rc = 0;
    if (t) {
        sse_drop_finish(c);
        json_object_del(c, "usage");
        rc = json_string_set(t, "\"") == 0 ? 0 : -ENOMEM;
        if (rc == 0) {
            tap_fire(tap, FAULT_LLM_FORMAT_VIOLATION);
            rc = seq_json(tap, NULL, c, TEV_TOKEN, now, out);
        }
    }
    json_decref(c);
    return rc;
}

/* Format violation on a content chunk. Returns 1 if the chunk was held (not
 * to be written now), 0 to write it, < 0 on error. */
static int fv_content(struct stream_tap *tap, json_t *root, unsigned cf, const char *type,
                      bool *modified, uint64_t now, const struct tap_out *out)
{
    int rc = held_release(tap, false, now, out);
    if (rc < 0)
        return rc;
    json_t *t = tap_chunk_text(root, 0);
    if (!t)
        return 0;
    const char *s = json_string_value(t);
    size_t n = json_string_length(t);
    if (cf & (TAP_CHUNK_FINISH | TAP_CHUNK_USAGE)) {
        /* the last content shares its chunk with the finish: break it here */
        tap->fv_done = true;
        buf_reset(&tap->scratch);
        rc = llm_drop_last_closer(s, n, &tap->scratch);
        if (rc == TS_AGAIN) {
            rc = buf_append(&tap->scratch, s, n);
            if (rc == 0)
                rc = buf_append_char(&tap->scratch, '"');
        }
        if (rc == 0 && json_string_setn(t, tap->scratch.data, tap->scratch.len) != 0)
            rc = -ENOMEM;
        if (rc < 0)
            return rc;
        *modified = true;
        tap_fire(tap, FAULT_LLM_FORMAT_VIOLATION);
        return 0;
    }
    json_decref(tap->last_content);
    tap->last_content = json_incref(root);
    if (!llm_has_closer(s, n))
        return 0;
    tap->held = json_incref(root);
    if (type && !(tap->held_type = ts_strdup(type)))
        return -ENOMEM;
    return 1;
}

/* Writes the text llm_hallucinate holds back (a run at the end of the last
 * chunk that the next one did not go on) as a content chunk of its own,
 * after the held format-violation chunk that came before it. */
static int hallu_flush(struct stream_tap *tap, uint64_t now, const struct tap_out *out)
{
    if (tap->hallu.held_len == 0 || !tap->hallu_tmpl)
        return 0;
    int rc = held_release(tap, false, now, out);
    buf_reset(&tap->scratch);
    if (rc == 0)
        rc = llm_hallu_flush(&tap->hallu, &tap->scratch);
    if (rc < 0)
        return rc;
    json_t *c =
        llm_text_chunk(tap->hallu_tmpl, tap->hallu.held_index, tap->scratch.data, tap->scratch.len);
    if (!c)
        return -ENOMEM;
    rc = seq_json(tap, NULL, c, TEV_TOKEN, now, out);
    json_decref(c);
    return rc;
}

/* llm_hallucinate on a content chunk; 1 if it changed it. */
static int hallu_apply(struct stream_tap *tap, json_t *root, uint64_t now,
                       const struct tap_out *out)
{
    int rc = 0;
    if (llm_hallu_owes(&tap->hallu, root))
        rc = hallu_flush(tap, now, out);
    if (rc == 0)
        rc = llm_hallu_chunk(&tap->hallu, root, &tap->scratch, false);
    if (rc < 0)
        return rc;
    if (tap->hallu.held_len > 0) {
        json_decref(tap->hallu_tmpl);
        tap->hallu_tmpl = json_incref(root);
    }
    if (rc > 0)
        tap_fire(tap, FAULT_LLM_HALLUCINATE);
    return rc > 0;
}

/* ---- cuts ---- */

static int tap_flush(struct stream_tap *tap, uint64_t now, const struct tap_out *out)
{
    int rc = held_release(tap, false, now, out);
    if (rc == 0)
        rc = hallu_flush(tap, now, out);
    if (rc == 0)
        rc = win_flush(tap, now, out);
    return rc;
}

static int tap_cut(struct stream_tap *tap, enum fault_type why, enum fault_cut how, uint64_t now,
                   const struct tap_out *out)
{
    int rc = tap_flush(tap, now, out);
    if (rc < 0)
        return rc;
    uint64_t at = now + tap->shift;
    if (tap->emitted_any && at < tap->last_at)
        at = tap->last_at;
    tap->state = TAP_CLOSED;
    tap_fire(tap, why);
    out->close(out->ctx, at, how);
    return 0;
}

static bool count_reached(const struct tap_fault *tf, uint64_t events, uint64_t tokens)
{
    return (tf->f->params.unit == FAULT_UNIT_TOKENS ? tokens : events) >= tf->k;
}

static int error_event(struct stream_tap *tap, uint64_t now, const struct tap_out *out)
{
    int rc = tap_flush(tap, now, out);
    if (rc < 0)
        return rc;
    rc = sse_error_data(&tap->ft[FAULT_SSE_ERROR_EVENT].f->params, &tap->ser);
    if (rc == 0)
        rc = tap_write(tap, NULL, tap->ser.data, tap->ser.len, 0, now, out);
    if (rc == 0)
        rc = tap_seq(tap, NULL, "[DONE]", 6, TEV_DONE, now, out);
    if (rc < 0)
        return rc;
    return tap_cut(tap, FAULT_SSE_ERROR_EVENT, FAULT_CUT_END, now, out);
}

/* After the k-th token: a finish chunk with "length"; the rest of the
 * upstream is read and dropped, keeping its usage for the end. */
static int premature_length(struct stream_tap *tap, json_t *tmpl, bool finish_sent, uint64_t now,
                            const struct tap_out *out)
{
    int rc = tap_flush(tap, now, out);
    if (rc < 0)
        return rc;
    if (!finish_sent) {
        json_t *c = llm_length_chunk(tmpl);
        if (!c)
            return -ENOMEM;
        rc = seq_json(tap, NULL, c, 0, now, out);
        json_decref(c);
        if (rc == 0)
            rc = win_flush(tap, now, out);
        if (rc < 0)
            return rc;
    }
    tap_fire(tap, FAULT_LLM_PREMATURE_LENGTH);
    tap->state = TAP_SWALLOW;
    return 0;
}

static bool is_done(const char *d, size_t n)
{
    while (n > 0 && (d[0] == ' ' || d[0] == '\t' || d[0] == '\n'))
        d++, n--;
    while (n > 0 && (d[n - 1] == ' ' || d[n - 1] == '\t' || d[n - 1] == '\n'))
        n--;
    return n == 6 && memcmp(d, "[DONE]", 6) == 0;
}

static int set_finish(json_t *chunk, const char *reason)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(chunk, "choices"), i, c)
    {
        json_t *fr = json_object_get(c, "finish_reason");
        if (fr && !json_is_null(fr) && json_object_set_new(c, "finish_reason", json_string(reason)))
            return -ENOMEM;
    }
    return 0;
}

/* Stage 2 and 3 for one event that is not cut before. */
static int tap_process(struct stream_tap *tap, const struct sse_event *ev, json_t *root,
                       unsigned cf, bool done, uint64_t idx, uint64_t now,
                       const struct tap_out *out)
{
    const char *type = NULL;
    if (ev->type && ev->type_len > 0 && strcmp(ev->type, "message") != 0)
        type = ev->type;
    bool token = cf & TAP_CHUNK_TOKEN;
    bool modified = false;
    int rc;
    struct tap_fault *pl = &tap->ft[FAULT_LLM_PREMATURE_LENGTH];
    bool pl_here = pl->f && token && tap->tokens_in == pl->k;

    if (root && tap_has(tap, FAULT_SSE_DROP_FINISH) && sse_drop_finish(root) > 0) {
        modified = true;
        tap_fire(tap, FAULT_SSE_DROP_FINISH);
    }
    if (root && token && tap_has(tap, FAULT_LLM_HALLUCINATE)) {
        rc = hallu_apply(tap, root, now, out);
        if (rc < 0)
            return rc;
        modified |= rc > 0;
    }
    if (root && pl_here && (cf & TAP_CHUNK_FINISH)) {
        if (set_finish(root, "length") < 0)
            return -ENOMEM;
        modified = true;
    }
    if (tap->fv_armed && !tap->fv_done) {
        if (root && token) {
            rc = fv_content(tap, root, cf, type, &modified, now, out);
            if (rc < 0)
                return rc;
            if (rc == 1)
                return 0; /* held */
        } else if (done || (cf & (TAP_CHUNK_FINISH | TAP_CHUNK_USAGE | TAP_CHUNK_ERROR))) {
            rc = fv_finish(tap, now, out);
            if (rc < 0)
                return rc;
        }
    }
    if (!(root && token) && (rc = hallu_flush(tap, now, out)) < 0)
        return rc;

    const char *data = ev->data;
    size_t len = ev->data_len;
    if (modified) {
        buf_reset(&tap->ser);
        rc = tap_json_dump(&tap->ser, root, 0);
        if (rc < 0)
            return rc;
        data = tap->ser.data;
        len = tap->ser.len;
    }
    struct tap_fault *iu = &tap->ft[FAULT_SSE_INVALID_UTF8];
    if (root && iu->f && !iu->fired && idx >= iu->k) {
        rc = sse_invalid_utf8(root, &tap->ser);
        if (rc < 0 && rc != TS_AGAIN)
            return rc;
        if (rc == 0) {
            data = tap->ser.data;
            len = tap->ser.len;
            tap_fire(tap, FAULT_SSE_INVALID_UTF8);
        } else if (modified) {
            /* sse_invalid_utf8 may have reset ser: write the chunk again */
            buf_reset(&tap->ser);
            rc = tap_json_dump(&tap->ser, root, 0);
            if (rc < 0)
                return rc;
            data = tap->ser.data;
            len = tap->ser.len;
        }
    }
    struct tap_fault *mf = &tap->ft[FAULT_SSE_MALFORMED];
    if (root && mf->f && !mf->fired && idx >= mf->k && len >= 2) {
        len = sse_malformed_len(len);
        tap_fire(tap, FAULT_SSE_MALFORMED);
    }
    unsigned flags = (token ? TEV_TOKEN : 0) | (done ? TEV_DONE : 0);
    struct tap_fault *du = &tap->ft[FAULT_SSE_DUPLICATE];
    if (du->f && !done) {
        const struct fault_params *p = &du->f->params;
        bool dup = p->unit != FAULT_UNIT_NONE
                       ? (!du->fired && idx >= du->k)
                       : rng_uniform01(&tap->rng) < (p->has_rate ? p->rate : 1.0);
        if (dup)
            flags |= TEV_DUP;
    }
    rc = tap_seq(tap, type, data, len, flags, now, out);
    return rc < 0 ? rc : 0;
}

/* A decoder of the tap's own, when its driver lent none. */
static int tap_own_decoder(struct stream_tap *tap)
{
    tap->dec = ts_malloc(sizeof(*tap->dec));
    if (!tap->dec)
        return -ENOMEM;
    openai_decoder_init(tap->dec);
    tap->dec_own = true;
    return 0;
}

int stream_tap_event(struct stream_tap *tap, const struct sse_event *ev, uint64_t now_ns,
                     const struct tap_out *out)
{
    if (tap->state == TAP_CLOSED)
        return 0;
    bool done = is_done(ev->data, ev->data_len);
    json_t *root = NULL;
    unsigned cf = 0;
    if (!done && tap->parse == TAP_PARSE_DOM) {
        tap->parsed++;
        root = tap_json_load(ev->data, ev->data_len);
        if (root && !json_is_object(root)) {
            json_decref(root);
            root = NULL;
        }
        cf = tap_chunk_flags(root);
    } else if (!done && tap->parse == TAP_PARSE_FLAGS) {
        if (!tap->dec && tap_own_decoder(tap) < 0)
            return -ENOMEM;
        cf = tap_event_flags(tap->dec, &tap->memo, ev->data, ev->data_len);
    }
    int rc = 0;
    if (tap->state == TAP_SWALLOW) {
        if (cf & TAP_CHUNK_USAGE) {
            json_decref(tap->usage_seen);
            tap->usage_seen = json_incref(root);
        }
        tap->done_seen |= done;
        goto out_free_root;
    }
    uint64_t idx = tap->events_in++;
    bool token = cf & TAP_CHUNK_TOKEN;
    uint64_t tok_before = tap->tokens_in;
    if (token)
        tap->tokens_in++;

    /* stage 1: cuts and shifts decided before the event */
    struct tap_fault *ee = &tap->ft[FAULT_SSE_ERROR_EVENT];
    if (ee->f && count_reached(ee, idx, tok_before)) {
        rc = error_event(tap, now_ns, out);
        goto out_free_root;
    }
    struct tap_fault *tr = &tap->ft[FAULT_SSE_TRUNCATE];
    if (tr->f && tr->k == 0 && (tr->f->params.unit != FAULT_UNIT_TOKENS || token)) {
        rc = tap_cut(tap, FAULT_SSE_TRUNCATE, tr->f->params.cut, now_ns, out);
        goto out_free_root;
    }
    struct tap_fault *pl = &tap->ft[FAULT_LLM_PREMATURE_LENGTH];
    if (pl->f && pl->k == 0 && token && root) {
        rc = premature_length(tap, root, false, now_ns, out);
        goto out_free_root;
    }
    struct tap_fault *st = &tap->ft[FAULT_SSE_STALL];
    if (st->f && !st->fired && count_reached(st, idx, tok_before)) {
        tap->shift += st->delay;
        tap_fire(tap, FAULT_SSE_STALL);
    }
    struct tap_fault *tt = &tap->ft[FAULT_SSE_TTFT_DELAY];
    if (tt->f && !tap->ttft_done && (token || !(cf & TAP_CHUNK_ROLE))) {
        tap->ttft_done = true;
        tap->shift += tt->delay;
        tap_fire(tap, FAULT_SSE_TTFT_DELAY);
    }

    /* stages 2 and 3 */
    rc = tap_process(tap, ev, root, cf, done, idx, now_ns, out);
    if (rc < 0)
        goto out_free_root;

    /* cuts decided after the event */
    if (pl->f && token && root && tap->tokens_in == pl->k) {
        rc = premature_length(tap, root, cf & TAP_CHUNK_FINISH, now_ns, out);
        goto out_free_root;
    }
    if (tr->f && (tr->f->params.unit != FAULT_UNIT_TOKENS || token) &&
        count_reached(tr, tap->events_in, tap->tokens_in))
        rc = tap_cut(tap, FAULT_SSE_TRUNCATE, tr->f->params.cut, now_ns, out);
out_free_root:
    json_decref(root);
    return rc;
}

void stream_tap_use_decoder(struct stream_tap *tap, struct openai_decoder *d)
{
    if (tap->dec || !d)
        return;
    tap->dec = d;
}

uint64_t stream_tap_parsed(const struct stream_tap *tap)
{
    return tap->parsed;
}

int stream_tap_end(struct stream_tap *tap, uint64_t now_ns, const struct tap_out *out)
{
    int rc = 0;
    if (tap->state == TAP_CLOSED)
        return 0;
    if (tap->state == TAP_SWALLOW) {
        tap->state = TAP_CLOSED;
        const struct tap_fault *pl = &tap->ft[FAULT_LLM_PREMATURE_LENGTH];
        json_t *u = json_object_get(tap->usage_seen, "usage");
        if (json_is_object(u)) {
            json_int_t prompt = json_integer_value(json_object_get(u, "prompt_tokens"));
            if (prompt < 0 || prompt > ((json_int_t)1 << 50))
                prompt = 0;
            if (json_object_set_new(u, "completion_tokens", json_integer((json_int_t)pl->k)) ||
                json_object_set_new(u, "total_tokens", json_integer(prompt + (json_int_t)pl->k)))
                return -ENOMEM;
            json_object_del(u, "completion_tokens_details");
            rc = seq_json(tap, NULL, tap->usage_seen, 0, now_ns, out);
        }
        if (rc == 0 && tap->done_seen)
            rc = tap_seq(tap, NULL, "[DONE]", 6, TEV_DONE, now_ns, out);
        return rc;
    }
    rc = fv_finish(tap, now_ns, out);
    if (rc == 0)
        rc = tap_flush(tap, now_ns, out);
    tap->state = TAP_CLOSED;
    return rc;
}

/* ---- non-streamed bodies ---- */

/* LLM faults on a whole chat.completion / text_completion body. */
static int body_llm(struct stream_tap *tap, json_t *root)
{
    int changed = 0;
    if (tap_has(tap, FAULT_SSE_DROP_FINISH) && sse_drop_finish(root) > 0) {
        tap_fire(tap, FAULT_SSE_DROP_FINISH);
        changed = 1;
    }
    if (tap_has(tap, FAULT_LLM_HALLUCINATE)) {
        int rc = llm_hallu_chunk(&tap->hallu, root, &tap->scratch, true);
        if (rc < 0)
            return rc;
        if (rc > 0) {
            tap_fire(tap, FAULT_LLM_HALLUCINATE);
            changed = 1;
        }
    }
    json_t *t = tap_chunk_text(root, 0);
    if (tap->fv_armed && !tap->fv_done && t) {
        tap->fv_done = true;
        buf_reset(&tap->scratch);
        int rc = llm_drop_last_closer(json_string_value(t), json_string_length(t), &tap->scratch);
        if (rc == TS_AGAIN) {
            rc = buf_append(&tap->scratch, json_string_value(t), json_string_length(t));
            if (rc == 0)
                rc = buf_append_char(&tap->scratch, '"');
        }
        if (rc == 0 && json_string_setn(t, tap->scratch.data, tap->scratch.len) != 0)
            rc = -ENOMEM;
        if (rc < 0)
            return rc;
        tap_fire(tap, FAULT_LLM_FORMAT_VIOLATION);
        changed = 1;
    }
    return changed;
}

int body_tap(struct stream_tap *tap, const char *body, size_t len, struct buf *out,
             uint64_t *delay_ns)
{
    if (delay_ns)
        *delay_ns = 0;
    const struct tap_fault *lat = &tap->ft[FAULT_RAG_LATENCY];
    if (lat->f && delay_ns) {
        *delay_ns = lat->delay;
        tap_fire(tap, FAULT_RAG_LATENCY);
    }
    json_t *root = tap_json_load(body, len);
    if (!root)
        return buf_append(out, body, len);
    size_t start = out->len;
    unsigned flags = 0;
    int changed = 0, rc = 0;

    const struct fault *noise = tap_has(tap, FAULT_LLM_EMBEDDING_NOISE);
    const struct fault *mask = tap_has(tap, FAULT_LLM_EMBEDDING_MASK);
    if (noise || mask) {
        rc = llm_embeddings_perturb(root, noise ? noise->params.norm : 0,
                                    mask ? mask->params.rate : 0, &tap->rng);
        if (rc < 0)
            goto out_free_root;
        if (rc > 0) {
            flags |= TAP_JSON_FLOAT32;
            changed = 1;
            if (noise && noise->params.norm > 0)
                tap_fire(tap, FAULT_LLM_EMBEDDING_NOISE);
            if (mask && mask->params.rate > 0)
                tap_fire(tap, FAULT_LLM_EMBEDDING_MASK);
        }
    }
    static const enum fault_type rag[] = {FAULT_RAG_EMPTY, FAULT_RAG_SHUFFLE, FAULT_RAG_IRRELEVANT,
                                          FAULT_RAG_LOWER_SCORES};
    for (size_t i = 0; i < sizeof(rag) / sizeof(rag[0]); i++) {
        const struct fault *f = tap_has(tap, rag[i]);
        if (!f)
            continue;
        rc = rag_apply(root, f, rng_next_u64(&tap->rng));
        if (rc < 0)
            goto out_free_root;
        if (rc > 0) {
            tap_fire(tap, rag[i]);
            changed = 1;
        }
    }
    if (json_is_object(root) && json_is_array(json_object_get(root, "choices"))) {
        rc = body_llm(tap, root);
        if (rc < 0)
            goto out_free_root;
        changed |= rc;
    }
    rc = changed ? tap_json_dump(out, root, flags) : buf_append(out, body, len);
    if (rc < 0)
        buf_truncate(out, start);
out_free_root:
    json_decref(root);
    return rc < 0 ? rc : 0;
}
