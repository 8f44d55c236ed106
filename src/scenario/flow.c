/*
 * flow.c - one iteration of a flow (see flow.h): the per-step state
 * machine a runner drives. Templates and captures are in flow_template.c,
 * definition checks in flow_check.c.
 */
#include "scenario/flow.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "scenario/flow_int.h"

/* ---- one iteration ---- */

struct flow_run {
    const struct flow_def *d;
    uint32_t n;
    uint64_t triggered; /* fallback_only steps whose principal failed */
    int32_t stands_for[FLOW_STEPS_MAX];
    uint8_t state[FLOW_STEPS_MAX];
    uint8_t reason[FLOW_STEPS_MAX];
    uint8_t capture[FLOW_STEPS_MAX]; /* the capture that failed; ncaptures: none */
    struct flow_vars vars;
};

int flow_run_new(const struct flow_def *d, struct flow_run **out)
{
    struct flow_dinfo di;
    *out = NULL;
    if (flow_check_structure(d, &di, NULL, 0))
        return -EINVAL;
    struct flow_run *r = ts_calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->d = d;
    r->n = (uint32_t)d->n;
    memcpy(r->stands_for, di.stands_for, sizeof(r->stands_for));
    for (uint32_t i = 0; i < r->n; i++)
        r->state[i] = FLOW_PENDING;
    flow_vars_init(&r->vars);
    *out = r;
    return 0;
}

void flow_run_free(struct flow_run *r)
{
    if (!r)
        return;
    flow_vars_release(&r->vars);
    ts_free(r);
}

int flow_run_set(struct flow_run *r, const char *name, json_t *value)
{
    return flow_vars_set(&r->vars, name, value);
}

json_t *flow_run_get(const struct flow_run *r, const char *name)
{
    return name ? flow_vars_get(&r->vars, name, strlen(name)) : NULL;
}

enum resolution { RES_OK, RES_WAIT, RES_DEAD };

/* What waiting for step x comes to: it (or the fallback that replaced it,
 * and so on) succeeded, is still to come, or failed for good. */
static enum resolution resolve(const struct flow_run *r, uint32_t x)
{
    for (uint32_t hops = 0; hops <= r->n; hops++) {
        switch (r->state[x]) {
        case FLOW_OK:
            return RES_OK;
        case FLOW_PENDING:
        case FLOW_RUNNING:
            return RES_WAIT;
        case FLOW_FAILED:
            if (r->d->steps[x].fallback < 0)
                return RES_DEAD;
            x = (uint32_t)r->d->steps[x].fallback;
            break;
        default:
            return RES_DEAD;
        }
    }
    return RES_DEAD;
}

static bool can_start(const struct flow_run *r, uint32_t i)
{
    const struct flow_step_def *st = &r->d->steps[i];
    if (r->state[i] != FLOW_PENDING || (st->fallback_only && !(r->triggered & flow_bit(i))))
        return false;
    for (size_t k = 0; k < st->ndeps; k++)
        if (resolve(r, st->deps[k]) != RES_OK)
            return false;
    return true;
}

/* Marks what can no longer run: steps behind a failure (SKIPPED) and
 * fallbacks whose step succeeded or was skipped (NOT_RUN). */
static void settle(struct flow_run *r)
{
    bool changed = true;
    while (changed) {
        changed = false;
        for (uint32_t i = 0; i < r->n; i++) {
            if (r->state[i] != FLOW_PENDING)
                continue;
            const struct flow_step_def *st = &r->d->steps[i];
            if (st->fallback_only && !(r->triggered & flow_bit(i))) {
                int32_t p = r->stands_for[i];
                if (p < 0 || r->state[p] == FLOW_OK || r->state[p] == FLOW_SKIPPED ||
                    r->state[p] == FLOW_NOT_RUN) {
                    r->state[i] = FLOW_NOT_RUN;
                    changed = true;
                }
                continue;
            }
            for (size_t k = 0; k < st->ndeps; k++) {
                if (resolve(r, st->deps[k]) == RES_DEAD) {
                    r->state[i] = FLOW_SKIPPED;
                    changed = true;
                    break;
                }
            }
        }
    }
}

int flow_run_next(struct flow_run *r)
{
    for (uint32_t i = 0; i < r->n; i++) {
        if (can_start(r, i)) {
            r->state[i] = FLOW_RUNNING;
            return (int)i;
        }
    }
    return -1;
}

int flow_run_complete(struct flow_run *r, uint32_t step, bool ok, const char *body, size_t len)
{
    if (step >= r->n || r->state[step] != FLOW_RUNNING)
        return -EINVAL;
    const struct flow_step_def *st = &r->d->steps[step];
    enum flow_fail_reason reason = ok ? FLOW_FAIL_NONE : FLOW_FAIL_REQUEST;
    size_t which = st->ncaptures;
    if (ok && st->ncaptures) {
        int rc = flow_captures_apply(&r->vars, st, body, len, &reason, &which);
        if (rc)
            return rc;
    }
    if (reason == FLOW_FAIL_NONE) {
        r->state[step] = FLOW_OK;
    } else {
        r->state[step] = FLOW_FAILED;
        r->reason[step] = (uint8_t)reason;
        r->capture[step] =
            (uint8_t)(which < st->ncaptures && which < UINT8_MAX ? which : UINT8_MAX);
        if (st->fallback >= 0)
            r->triggered |= flow_bit((uint32_t)st->fallback);
    }
    settle(r);
    return 0;
}

int flow_run_complete_dry(struct flow_run *r, uint32_t step)
{
    if (step >= r->n || r->state[step] != FLOW_RUNNING)
        return -EINVAL;
    const struct flow_step_def *st = &r->d->steps[step];
    for (size_t k = 0; k < st->ncaptures; k++) {
        const struct flow_capture *cap = &st->captures[k];
        if (!cap->var)
            continue;
        char text[320];
        snprintf(text, sizeof(text), "(dry run: %.120s from step %.120s)", cap->var, st->name);
        json_t *v = json_string(text);
        int rc = v ? flow_vars_set(&r->vars, cap->var, v) : -ENOMEM; /* takes v */
        if (rc == -ENOMEM)
            return rc;
    }
    r->state[step] = FLOW_OK;
    settle(r);
    return 0;
}

int flow_run_render(struct flow_run *r, uint32_t step, struct flow_request *out, char *err,
                    size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (step >= r->n || r->state[step] != FLOW_RUNNING) {
        ts_errf(err, errlen, "step %" PRIu32 " is not running", step);
        return -EINVAL;
    }
    return flow_step_render(&r->vars, &r->d->steps[step], out, err, errlen);
}

bool flow_run_done(const struct flow_run *r)
{
    for (uint32_t i = 0; i < r->n; i++)
        if (r->state[i] == FLOW_RUNNING || can_start(r, i))
            return false;
    return true;
}

enum flow_outcome flow_run_outcome(const struct flow_run *r)
{
    bool degraded = false;
    for (uint32_t i = 0; i < r->n; i++) {
        if (r->d->steps[i].fallback_only)
            continue;
        enum resolution res = resolve(r, i);
        if (res == RES_DEAD)
            return FLOW_OUT_FAILED;
        if (res == RES_OK && r->state[i] != FLOW_OK)
            degraded = true;
    }
    return degraded ? FLOW_OUT_DEGRADED : FLOW_OUT_OK;
}

enum flow_step_state flow_run_state(const struct flow_run *r, uint32_t step)
{
    return step < r->n ? (enum flow_step_state)r->state[step] : FLOW_NOT_RUN;
}

const char *flow_run_fail_reason(const struct flow_run *r, uint32_t step)
{
    if (step >= r->n || r->state[step] != FLOW_FAILED)
        return NULL;
    switch ((enum flow_fail_reason)r->reason[step]) {
    case FLOW_FAIL_NOTHING:
        return "returned nothing";
    case FLOW_FAIL_TOOBIG:
        return "capture too large";
    case FLOW_FAIL_BAD:
        return "bad capture";
    default:
        return "request failed";
    }
}

const struct flow_capture *flow_run_fail_capture(const struct flow_run *r, uint32_t step)
{
    if (step >= r->n || r->state[step] != FLOW_FAILED)
        return NULL;
    const struct flow_step_def *st = &r->d->steps[step];
    if (r->reason[step] == FLOW_FAIL_REQUEST || r->capture[step] == UINT8_MAX ||
        r->capture[step] >= st->ncaptures)
        return NULL;
    return &st->captures[r->capture[step]];
}

const char *flow_step_state_name(enum flow_step_state s)
{
    switch (s) {
    case FLOW_PENDING:
        return "pending";
    case FLOW_RUNNING:
        return "running";
    case FLOW_OK:
        return "ok";
    case FLOW_FAILED:
        return "failed";
    case FLOW_SKIPPED:
        return "skipped";
    case FLOW_NOT_RUN:
        return "not_run";
    }
    return "?";
}

const char *flow_outcome_name(enum flow_outcome o)
{
    switch (o) {
    case FLOW_OUT_OK:
        return "ok";
    case FLOW_OUT_DEGRADED:
        return "degraded";
    case FLOW_OUT_FAILED:
        return "failed";
    }
    return "?";
}

const char *flow_step_kind_name(enum flow_step_kind k)
{
    switch (k) {
    case FLOW_STEP_CHAT:
        return "chat";
    case FLOW_STEP_COMPLETION:
        return "completion";
    case FLOW_STEP_EMBEDDINGS:
        return "embeddings";
    case FLOW_STEP_HTTP:
        return "http";
    }
    return "?";
}
