/*
 * admin.c - the simulator's admin API (admin.h): fault specs, the
 * /admin/faults endpoints, and the hooks server.c calls on each request.
 */
#include "sim/admin.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/strdist.h"
#include "base/units.h"
#include "net/ctlauth.h"
#include "sim/server_int.h"

#define KV_STEP_MS 100

static const char *const type_names[SIM_FAULT_TYPE_COUNT + 1] = {
    [SIM_FAULT_KV_SHRINK] = "kv_shrink",   [SIM_FAULT_STALL] = "stall",
    [SIM_FAULT_COLD_START] = "cold_start", [SIM_FAULT_ERROR_RATE] = "error_rate",
    [SIM_FAULT_TYPE_COUNT] = NULL,
};

/* The keys each type takes, besides "type" (and "name", ignored). */
static const char *const type_keys[SIM_FAULT_TYPE_COUNT][4] = {
    [SIM_FAULT_KV_SHRINK] = {"to_tokens", "over", NULL},
    [SIM_FAULT_STALL] = {"for", NULL},
    [SIM_FAULT_COLD_START] = {"for", NULL},
    [SIM_FAULT_ERROR_RATE] = {"rate", "status", NULL},
};

const char *sim_fault_type_name(enum sim_fault_type t)
{
    return (unsigned)t < SIM_FAULT_TYPE_COUNT ? type_names[t] : "unknown";
}

static int fault_type_from(const char *s, enum sim_fault_type *t)
{
    for (int i = 0; i < SIM_FAULT_TYPE_COUNT; i++)
        if (!strcmp(s, type_names[i])) {
            *t = (enum sim_fault_type)i;
            return 0;
        }
    return -EINVAL;
}

/* A duration as a string with a unit, or a number of seconds. */
static int get_duration(const json_t *v, uint64_t *ns)
{
    if (json_is_string(v))
        return units_parse_duration_ns(json_string_value(v), ns);
    if (json_is_number(v)) {
        double d = json_number_value(v);
        if (!(d >= 0) || d > 1e7)
            return -EINVAL;
        *ns = (uint64_t)llround(d * 1e9);
        return 0;
    }
    return -EINVAL;
}

int sim_fault_parse_json(const json_t *spec, struct sim_fault *out, char *err, size_t errlen)
{
    struct sim_fault f = {.status = 500};
    if (!json_is_object(spec)) {
        ts_errf(err, errlen, "a simulator fault is a JSON object with a \"type\"");
        return -EINVAL;
    }
    const char *type = json_string_value(json_object_get(spec, "type"));
    if (!type) {
        ts_errf(err, errlen, "missing \"type\" (kv_shrink, stall, cold_start, error_rate)");
        return -EINVAL;
    }
    if (fault_type_from(type, &f.type)) {
        const char *near = str_closest(type, strlen(type), type_names, 0, 3);
        ts_errf(err, errlen, "unknown simulator fault type '%.64s'%s%s%s", type,
                near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
        return -EINVAL;
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)spec, key, v)
    {
        if (!strcmp(key, "type") || !strcmp(key, "name"))
            continue;
        const char *const *keys = type_keys[f.type];
        bool ok = false;
        for (size_t i = 0; keys[i]; i++)
            ok |= !strcmp(keys[i], key);
        if (!ok) {
            const char *near = str_closest(key, strlen(key), keys, 0, 3);
            ts_errf(err, errlen, "%s: unknown key '%.64s'%s%s%s", type, key,
                    near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
            return -EINVAL;
        }
    }
    switch (f.type) {
    case SIM_FAULT_KV_SHRINK: {
        const json_t *to = json_object_get(spec, "to_tokens");
        if (!json_is_integer(to) || json_integer_value(to) < 1) {
            ts_errf(err, errlen, "kv_shrink: \"to_tokens\" must be a positive integer");
            return -EINVAL;
        }
        f.to_tokens = (uint64_t)json_integer_value(to);
        const json_t *over = json_object_get(spec, "over");
        if (over && get_duration(over, &f.over_ns)) {
            ts_errf(err, errlen, "kv_shrink: \"over\" must be a duration like \"30s\"");
            return -EINVAL;
        }
        break;
    }
    case SIM_FAULT_STALL:
    case SIM_FAULT_COLD_START: {
        const json_t *d = json_object_get(spec, "for");
        if (!d || get_duration(d, &f.for_ns) || f.for_ns == 0) {
            ts_errf(err, errlen, "%s: \"for\" must be a duration > 0 like \"2s\"", type);
            return -EINVAL;
        }
        break;
    }
    case SIM_FAULT_ERROR_RATE: {
        const json_t *r = json_object_get(spec, "rate");
        if (!json_is_number(r) || !(json_number_value(r) >= 0) || json_number_value(r) > 1) {
            ts_errf(err, errlen, "error_rate: \"rate\" must be a number in 0..1");
            return -EINVAL;
        }
        f.rate = json_number_value(r);
        const json_t *st = json_object_get(spec, "status");
        if (st) {
            if (!json_is_integer(st) || json_integer_value(st) < 400 ||
                json_integer_value(st) > 599) {
                ts_errf(err, errlen, "error_rate: \"status\" must be an integer in 400..599");
                return -EINVAL;
            }
            f.status = (int)json_integer_value(st);
        }
        break;
    }
    default:
        return -EINVAL;
    }
    *out = f;
    return 0;
}

/* ---- the server side ---- */

static void send_body(struct http_request *req, int status, json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (s)
        (void)http_respond(req, status, "application/json", NULL, s, strlen(s));
    else
        (void)http_respond(req, 500, NULL, NULL, NULL, 0);
    free(s); /* jansson's allocator */
    json_decref(o);
}

static void send_err(struct http_request *req, int status, const char *msg)
{
    send_body(req, status, json_pack("{s:s}", "error", msg));
}

static double secs(uint64_t ns)
{
    return (double)ns / 1e9;
}

static json_t *fault_state(const struct sim_server *s, enum sim_fault_type t, uint64_t now)
{
    const struct sim_admin *a = &s->admin;
    const struct sim_fault *f = &a->f[t];
    json_t *o = json_pack("{s:s,s:f,s:I}", "type", type_names[t], "since_s",
                          secs(now - a->since_ns[t]), "injected", (json_int_t)a->injected[t]);
    if (!o)
        return NULL;
    int rc = 0;
    switch (t) {
    case SIM_FAULT_KV_SHRINK:
        rc |= json_object_set_new(o, "to_tokens", json_integer((json_int_t)f->to_tokens));
        rc |= json_object_set_new(o, "over_s", json_real(secs(f->over_ns)));
        rc |= json_object_set_new(o, "kv_tokens", json_integer((json_int_t)a->kv_now));
        break;
    case SIM_FAULT_STALL:
    case SIM_FAULT_COLD_START:
        rc |= json_object_set_new(o, "for_s", json_real(secs(f->for_ns)));
        rc |= json_object_set_new(o, "left_s",
                                  json_real(secs(a->until_ns[t] > now ? a->until_ns[t] - now : 0)));
        break;
    case SIM_FAULT_ERROR_RATE:
        rc |= json_object_set_new(o, "rate", json_real(f->rate));
        rc |= json_object_set_new(o, "status", json_integer(f->status));
        break;
    default:
        break;
    }
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Stall and cold start end by themselves: forget them once past. */
static void expire(struct sim_server *s, uint64_t now)
{
    struct sim_admin *a = &s->admin;
    for (int t = SIM_FAULT_STALL; t <= SIM_FAULT_COLD_START; t++)
        if (a->active[t] && now >= a->until_ns[t])
            a->active[t] = false;
}

/* The step timer waits for the old due time: after a stall ends early, re-arm it. */
static void rearm_step(struct sim_server *s)
{
    uint64_t due = sim_engine_next_due(s->engine);
    if (!s->step_due || !due || !s->step_timer.cb || s->timer_closing)
        return;
    s->step_due = due;
    if (ptimer_start_at(&s->step_timer, due, s->step_timer.cb))
        ts_error("sim: cannot re-arm the step timer");
}

static void kv_apply(struct sim_server *s, uint64_t tokens, uint64_t now)
{
    struct sim_admin *a = &s->admin;
    if (tokens == a->kv_now)
        return;
    int rc = sim_engine_set_kv_capacity(s->engine, tokens, now);
    if (rc == 0)
        a->kv_now = tokens;
    else if (!a->kv_floor_logged) {
        a->kv_floor_logged = true;
        ts_warn("sim: kv_shrink stops at %llu tokens (the engine refuses %llu)",
                (unsigned long long)a->kv_now, (unsigned long long)tokens);
    }
}

static void on_kv_timer(uv_timer_t *t)
{
    struct sim_server *s = t->data;
    struct sim_admin *a = &s->admin;
    uint64_t now = ts_now_ns();
    const struct sim_fault *f = &a->f[SIM_FAULT_KV_SHRINK];
    if (!a->active[SIM_FAULT_KV_SHRINK]) {
        uv_timer_stop(t);
        return;
    }
    uint64_t el = now - a->since_ns[SIM_FAULT_KV_SHRINK];
    double frac = f->over_ns == 0 || el >= f->over_ns ? 1.0 : (double)el / (double)f->over_ns;
    double v = (double)a->kv_full - ((double)a->kv_full - (double)f->to_tokens) * frac;
    a->injected[SIM_FAULT_KV_SHRINK]++;
    kv_apply(s, (uint64_t)llround(v), now);
    if (frac >= 1.0)
        uv_timer_stop(t);
}

static void fault_remove(struct sim_server *s, enum sim_fault_type t, uint64_t now)
{
    struct sim_admin *a = &s->admin;
    a->active[t] = false;
    switch (t) {
    case SIM_FAULT_KV_SHRINK:
        if (a->kv_timer_inited)
            uv_timer_stop(&a->kv_timer);
        if (sim_engine_set_kv_capacity(s->engine, 0, now) == 0)
            a->kv_now = a->kv_full;
        break;
    case SIM_FAULT_STALL:
        sim_engine_stall_until(s->engine, 0);
        rearm_step(s);
        break;
    case SIM_FAULT_COLD_START:
        sim_engine_set_ready_at(s->engine, 0);
        break;
    default:
        break;
    }
}

static int fault_add(struct sim_server *s, const struct sim_fault *f, uint64_t now, char *err,
                     size_t errlen)
{
    struct sim_admin *a = &s->admin;
    switch (f->type) {
    case SIM_FAULT_KV_SHRINK:
        if (f->to_tokens < s->profile.max_model_len || f->to_tokens > a->kv_full) {
            ts_errf(err, errlen,
                    "kv_shrink: to_tokens must lie in %u (max_model_len) .. %llu (the capacity)",
                    s->profile.max_model_len, (unsigned long long)a->kv_full);
            return -EINVAL;
        }
        if (!a->kv_timer_inited) {
            int rc = uv_timer_init(s->loop, &a->kv_timer);
            if (rc) {
                ts_errf(err, errlen, "timer: %s", uv_strerror(rc));
                return -EIO;
            }
            a->kv_timer.data = s;
            a->kv_timer_inited = true;
        }
        /* a new shrink starts from the full capacity */
        if (sim_engine_set_kv_capacity(s->engine, 0, now) == 0)
            a->kv_now = a->kv_full;
        a->kv_floor_logged = false;
        if (uv_timer_start(&a->kv_timer, on_kv_timer, f->over_ns ? KV_STEP_MS : 0, KV_STEP_MS)) {
            ts_errf(err, errlen, "cannot start the kv_shrink timer");
            return -EIO;
        }
        break;
    case SIM_FAULT_STALL:
        a->until_ns[f->type] = now + f->for_ns;
        sim_engine_stall_until(s->engine, now + f->for_ns);
        break;
    case SIM_FAULT_COLD_START:
        a->until_ns[f->type] = now + f->for_ns;
        sim_engine_set_ready_at(s->engine, now + f->for_ns);
        break;
    default:
        break;
    }
    a->f[f->type] = *f;
    a->active[f->type] = true;
    a->since_ns[f->type] = now;
    a->injected[f->type] = 0;
    return 0;
}

static void handle_list(struct sim_server *s, struct http_request *req, uint64_t now)
{
    json_t *arr = json_array();
    for (int t = 0; arr && t < SIM_FAULT_TYPE_COUNT; t++) {
        if (!s->admin.active[t])
            continue;
        json_t *o = fault_state(s, (enum sim_fault_type)t, now);
        if (!o || json_array_append_new(arr, o)) {
            json_decref(arr);
            arr = NULL;
        }
    }
    send_body(req, 200, arr ? json_pack("{s:o}", "faults", arr) : NULL);
}

static void handle_post(struct sim_server *s, struct http_request *req, uint64_t now)
{
    char err[256];
    struct sim_fault f;
    json_error_t je;
    json_t *spec = json_loadb(req->body, req->body_len, 0, &je);
    if (!spec) {
        ts_errf(err, sizeof(err), "bad JSON: %s", je.text);
        return send_err(req, 400, err);
    }
    int rc = sim_fault_parse_json(spec, &f, err, sizeof(err));
    json_decref(spec);
    if (rc)
        return send_err(req, 400, err);
    if (s->shutting_down)
        return send_err(req, 503, "the simulator is shutting down");
    if (s->admin.active[f.type])
        fault_remove(s, f.type, now);
    if ((rc = fault_add(s, &f, now, err, sizeof(err))))
        return send_err(req, rc == -EINVAL ? 400 : 500, err);
    if (!s->quiet)
        ts_info("sim: admin fault %s added", type_names[f.type]);
    send_body(req, 201, fault_state(s, f.type, now));
}

bool sim_admin_route(struct sim_server *s, struct http_request *req)
{
    const char *p = req->path;
    if (!s->admin.enabled || strncmp(p, "/admin/faults", 13) != 0)
        return false;
    if (!ctlauth_allows(req, s->admin.token)) {
        ctlauth_deny(req);
        return true;
    }
    uint64_t now = ts_now_ns();
    expire(s, now);
    const char *m = req->method;
    if (!strcmp(p, "/admin/faults")) {
        if (!strcmp(m, "GET"))
            handle_list(s, req, now);
        else if (!strcmp(m, "POST"))
            handle_post(s, req, now);
        else if (!strcmp(m, "DELETE")) {
            for (int t = 0; t < SIM_FAULT_TYPE_COUNT; t++)
                if (s->admin.active[t] || t == SIM_FAULT_KV_SHRINK)
                    fault_remove(s, (enum sim_fault_type)t, now);
            (void)http_respond(req, 204, NULL, NULL, NULL, 0);
        } else
            send_err(req, 405, "use GET, POST or DELETE on /admin/faults");
        return true;
    }
    if (p[13] != '/')
        return false;
    enum sim_fault_type t;
    if (fault_type_from(p + 14, &t)) {
        send_err(req, 404, "no such simulator fault type");
        return true;
    }
    if (!strcmp(m, "DELETE")) {
        if (!s->admin.active[t]) {
            send_err(req, 404, "that fault is not active");
            return true;
        }
        fault_remove(s, t, now);
        (void)http_respond(req, 204, NULL, NULL, NULL, 0);
    } else if (!strcmp(m, "GET")) {
        if (!s->admin.active[t])
            send_err(req, 404, "that fault is not active");
        else
            send_body(req, 200, fault_state(s, t, now));
    } else {
        send_err(req, 405, "use GET or DELETE on /admin/faults/{type}");
    }
    return true;
}

bool sim_admin_intercept(struct sim_server *s, struct http_request *req, bool health)
{
    struct sim_admin *a = &s->admin;
    if (!a->enabled)
        return false;
    uint64_t now = ts_now_ns();
    expire(s, now);
    struct openai_error e;
    char extra[64];
    if (a->active[SIM_FAULT_COLD_START]) {
        uint64_t left = a->until_ns[SIM_FAULT_COLD_START] - now;
        unsigned secs_left = (unsigned)((left + TS_NS_PER_S - 1) / TS_NS_PER_S);
        snprintf(extra, sizeof(extra), "Retry-After: %u\r\n", secs_left ? secs_left : 1);
        openai_error_set(&e, 503, "server_error", NULL, "model_loading",
                         "The model is loading. Please retry shortly.");
        a->injected[SIM_FAULT_COLD_START]++;
        sim_send_error(req, &e, extra);
        return true;
    }
    if (health || !a->active[SIM_FAULT_ERROR_RATE])
        return false;
    const struct sim_fault *f = &a->f[SIM_FAULT_ERROR_RATE];
    if (!(rng_uniform01(&a->rng) < f->rate))
        return false;
    a->injected[SIM_FAULT_ERROR_RATE]++;
    const char *x = NULL;
    if (f->status == 429) {
        openai_error_set(&e, 429, "rate_limit_error", NULL, "rate_limit_exceeded",
                         "Rate limit reached. Please retry after a short wait.");
        x = "Retry-After: 1\r\n";
    } else if (f->status >= 500) {
        openai_error_set(&e, f->status, "server_error", NULL, NULL,
                         "The server had an error while processing your request. Sorry about "
                         "that!");
    } else {
        openai_error_set(&e, f->status, "invalid_request_error", NULL, NULL,
                         "Injected error (simulator admin fault error_rate).");
    }
    sim_send_error(req, &e, x);
    return true;
}

void sim_admin_init(struct sim_server *s, bool enabled)
{
    struct sim_admin *a = &s->admin;
    struct sim_profile_caps caps;
    a->enabled = enabled;
    sim_engine_caps(s->engine, &caps);
    a->kv_full = caps.kv_tokens;
    a->kv_now = caps.kv_tokens;
    rng_seed(&a->rng, rng_mix64(s->profile.seed ^ 0xad317ull));
}
