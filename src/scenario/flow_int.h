/*
 * flow_int.h - internals of flows shared by their files; not a public
 * interface (flow.h is the manual):
 *
 *   flow_template.c  variables, {{var}} templates (checking and rendering),
 *                    a step's captures and its rendered request
 *   flow_check.c     checking a definition (flow_def_check)
 *   flow.c           one iteration's state machine (struct flow_run)
 */
#ifndef TS_SCENARIO_FLOW_INT_H
#define TS_SCENARIO_FLOW_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scenario/flow.h"

#define FLOW_MSG_MAX       384 /* bytes of a message before its location */
#define FLOW_PATH_MAX      256 /* bytes of a JSON pointer shown in messages */
#define FLOW_SUGGEST_EDITS 2   /* edits a "did you mean" suggestion may be away */

/* Bit i of a set of steps. */
static inline uint64_t flow_bit(uint32_t i)
{
    return (uint64_t)1 << i;
}

/* ---- flow_template.c ---- */

/* Whether the NUL-terminated a equals b[0..blen). */
bool flow_name_eq(const char *a, const char *b, size_t blen);

/* "unknown variable {{NAME}}" into msg[0..n). */
void flow_unknown_var(char *msg, size_t n, const char *name, size_t len);

/* The JSON pointer of a template string, for messages (cut at
 * FLOW_PATH_MAX bytes). */
struct flow_jpath {
    char s[FLOW_PATH_MAX];
    size_t len;
};

/*
 * A check of a template's placeholders: lookup returns 0 when a
 * placeholder may use name[0..len), else -EINVAL with msg set. On failure
 * msg says what and path where (not popped).
 */
struct flow_tcheck {
    int (*lookup)(struct flow_tcheck *c, const char *name, size_t len);
    char msg[FLOW_MSG_MAX];
    struct flow_jpath path;
};

/* Checks the placeholders of the template string s[0..len). 0, -EINVAL
 * (malformed, or lookup's verdict) with c->msg set. */
int flow_check_str(struct flow_tcheck *c, const char *s, size_t len);

/* Checks every string of template t, nested depth deep so far. 0, -EINVAL,
 * TS_TOOBIG (deeper than FLOW_TMPL_DEPTH_MAX), with c->msg and c->path. */
int flow_check_tree(struct flow_tcheck *c, const json_t *t, unsigned depth);

/* Why a step failed (flow_run_fail_reason's words). */
enum flow_fail_reason {
    FLOW_FAIL_NONE,
    FLOW_FAIL_REQUEST, /* "request failed" */
    FLOW_FAIL_NOTHING, /* "returned nothing" */
    FLOW_FAIL_TOOBIG,  /* "capture too large" */
    FLOW_FAIL_BAD,     /* "bad capture" */
};

/*
 * Applies step st's captures from body (len bytes of JSON, may be NULL) to
 * vars, all or nothing. Returns 0 with *reason FLOW_FAIL_NONE (applied) or
 * why not (nothing applied), or -ENOMEM (nothing applied). *which is the
 * index of the capture that failed, or st->ncaptures when it was not one
 * capture (the body was not JSON, too many variables).
 */
int flow_captures_apply(struct flow_vars *vars, const struct flow_step_def *st, const char *body,
                        size_t len, enum flow_fail_reason *reason, size_t *which);

/* Renders step st's request with vars into *out, as flow_run_render
 * describes. Returns 0 (release *out), -EINVAL, TS_TOOBIG or -ENOMEM with a
 * message in err; on failure *out holds nothing to release. */
int flow_step_render(const struct flow_vars *vars, const struct flow_step_def *st,
                     struct flow_request *out, char *err, size_t errlen);

/* ---- flow_check.c ---- */

/* What the structure check learns about a definition. */
struct flow_dinfo {
    uint64_t anc[FLOW_STEPS_MAX];       /* bit j: the step waits for step j, maybe through others */
    int32_t stands_for[FLOW_STEPS_MAX]; /* the step this one is the fallback of, or -1 */
};

/* Checks everything of d but variables and templates (see flow_def_check)
 * and fills *di. 0 or -EINVAL with a message in err (err may be NULL). */
int flow_check_structure(const struct flow_def *d, struct flow_dinfo *di, char *err, size_t errlen);

#endif
