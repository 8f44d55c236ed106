/* ws_faults.c - the WebSocket frame faults' decisions (see ws_faults.h). */
#include "chaos/ws_faults.h"

#include <jansson.h>
#include <string.h>

#include "base/dist.h"

const char *ws_event_type(const char *data, size_t len, char type[WS_EVENT_TYPE_MAX])
{
    type[0] = '\0';
    if (!data || len < 2 || len > WS_EVENT_PARSE_MAX || data[0] != '{')
        return type;
    json_t *root = json_loadb(data, len, JSON_REJECT_DUPLICATES, NULL);
    json_t *v = json_object_get(root, "type");
    if (json_is_string(v) && json_string_length(v) < WS_EVENT_TYPE_MAX &&
        !memchr(json_string_value(v), '\0', json_string_length(v)))
        memcpy(type, json_string_value(v), json_string_length(v) + 1);
    json_decref(root);
    return type;
}

static int ft_index(enum fault_type t)
{
    switch (t) {
    case FAULT_WS_DELAY:
        return WS_FT_DELAY;
    case FAULT_WS_DROP:
        return WS_FT_DROP;
    case FAULT_WS_DUPLICATE:
        return WS_FT_DUPLICATE;
    case FAULT_WS_TRUNCATE:
        return WS_FT_TRUNCATE;
    case FAULT_WS_CLOSE:
        return WS_FT_CLOSE;
    case FAULT_WS_STALL:
        return WS_FT_STALL;
    default:
        return -1;
    }
}

void ws_tap_init(struct ws_tap *t, struct fault *const *faults, size_t n, uint64_t seed,
                 enum fault_direction dir)
{
    memset(t, 0, sizeof *t);
    rng_seed(&t->rng, seed);
    t->up = dir == FAULT_DIR_UPSTREAM;
    for (size_t i = 0; i < n; i++) {
        int j = ft_index(faults[i]->type);
        if (j < 0 || t->f[j] || !(faults[i]->dir & dir))
            continue;
        t->f[j] = fault_ref(faults[i]);
        if (faults[i]->params.unit != FAULT_UNIT_NONE)
            t->after[j] = dist_sample_uint(&faults[i]->params.count, &t->rng, 0, UINT32_MAX);
    }
}

void ws_tap_release(struct ws_tap *t)
{
    for (int j = 0; j < WS_FT_N; j++) {
        fault_unref(t->f[j]);
        t->f[j] = NULL;
    }
}

bool ws_tap_active(const struct ws_tap *t)
{
    for (int j = 0; j < WS_FT_N; j++)
        if (t->f[j])
            return true;
    return false;
}

static void hit(struct ws_tap *t, int j)
{
    fault_count_injection(t->f[j]);
    t->injected[j]++;
}

static uint64_t sample_ns(struct ws_tap *t, const struct dist *d)
{
    double v = dist_sample(d, &t->rng);
    if (!(v > 0))
        return 0;
    return v > 3.6e12 ? 3600000000000ull : (uint64_t)v; /* at most an hour */
}

/* Whether fault j targets events of type: its event, by default the text
 * deltas downstream (any message for ws_delay), any message upstream. */
static bool targets(const struct ws_tap *t, int j, const char *type)
{
    const struct fault *f = t->f[j];
    if (!f)
        return false;
    const char *e = f->params.event;
    if (!strcmp(e, "*") || (!e[0] && (j == WS_FT_DELAY || t->up)))
        return true;
    if (e[0])
        return !strcmp(type, e);
    return !strcmp(type, "response.output_text.delta") || !strcmp(type, "response.text.delta");
}

/* Whether the drop or duplicate fault j acts on its current target: the
 * one after its count, or a share rate of them. */
static bool rolls(struct ws_tap *t, int j)
{
    const struct fault *f = t->f[j];
    if (f->params.unit != FAULT_UNIT_NONE)
        return t->seen[j] == t->after[j];
    return f->params.rate >= 1 || rng_uniform01(&t->rng) < f->params.rate;
}

/* The counting faults on one message of type: truncate, close, stall,
 * drop, duplicate (in that order: a closed or truncated stream drops it). */
static void on_counted(struct ws_tap *t, const char *type, uint64_t now_ns, struct ws_verdict *v)
{
    bool tg[WS_FT_N];
    for (int j = 0; j < WS_FT_N; j++)
        tg[j] = targets(t, j, type);
    if (tg[WS_FT_TRUNCATE] && t->seen[WS_FT_TRUNCATE] >= t->after[WS_FT_TRUNCATE]) {
        t->swallowing = true;
        hit(t, WS_FT_TRUNCATE);
        v->copies = 0;
        return;
    }
    if (tg[WS_FT_CLOSE] && t->seen[WS_FT_CLOSE] >= t->after[WS_FT_CLOSE]) {
        const struct fault *f = t->f[WS_FT_CLOSE];
        t->closed = true;
        hit(t, WS_FT_CLOSE);
        v->copies = 0;
        v->close = true;
        v->code = f->params.code ? f->params.code : 1011;
        v->reason = f->params.text;
        return;
    }
    if (tg[WS_FT_STALL] && !t->stalled && t->seen[WS_FT_STALL] >= t->after[WS_FT_STALL]) {
        t->stalled = true;
        hit(t, WS_FT_STALL);
        t->stall_until = now_ns + sample_ns(t, &t->f[WS_FT_STALL]->params.delay);
    }
    if (tg[WS_FT_DROP] && rolls(t, WS_FT_DROP)) {
        hit(t, WS_FT_DROP);
        v->copies = 0;
    } else if (tg[WS_FT_DUPLICATE] && rolls(t, WS_FT_DUPLICATE)) {
        hit(t, WS_FT_DUPLICATE);
        v->copies = 2;
    }
    for (int j = 0; j < WS_FT_N; j++)
        t->seen[j] += tg[j];
}

struct ws_verdict ws_tap_message(struct ws_tap *t, const char *type, uint64_t now_ns)
{
    struct ws_verdict v = {.copies = 1, .at = now_ns, .reason = ""};
    if (t->closed) {
        v.copies = 0;
        return v;
    }
    if (!t->up && !strcmp(type, "response.created")) {
        memset(t->seen, 0, sizeof t->seen);
        t->swallowing = false;
        t->stalled = false;
    }
    if (t->swallowing) {
        v.copies = 0;
        return v;
    }
    if (targets(t, WS_FT_DELAY, type)) {
        hit(t, WS_FT_DELAY);
        v.at += sample_ns(t, &t->f[WS_FT_DELAY]->params.delay);
    }
    on_counted(t, type, now_ns, &v);
    if (v.at < t->stall_until)
        v.at = t->stall_until;
    if (v.at < t->last_at)
        v.at = t->last_at;
    t->last_at = v.at;
    return v;
}
