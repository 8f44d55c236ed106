/*
 * replay.c - serving a recording (replay.h). One struct replay_req per
 * request with a uv timer that wakes it at its next event's time.
 */
#include "sim/replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/log.h"
#include "llm/recording.h"

struct sim_replay {
    struct recording *rec;
    uint32_t *used; /* per exchange: times served (round robin among candidates) */
    uint64_t served, unmatched;
};

struct replay_req {
    uv_timer_t timer;
    struct http_request *req; /* NULL once finished or aborted */
    const struct rec_exchange *x;
    size_t next; /* the next event */
    uint64_t t0;
};

int sim_replay_open(const char *dir, struct sim_replay **out, char *err, size_t errlen)
{
    char msg[512];
    struct sim_replay *r = ts_calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    int rc = recording_load(dir, &r->rec, msg, sizeof msg);
    if (rc) {
        ts_errf(err, errlen, "--replay: %s", msg);
        ts_free(r);
        return rc;
    }
    if (r->rec->websocket)
        ts_warn("--replay: %llu WebSocket sessions in the recording are not replayed",
                (unsigned long long)r->rec->websocket);
    r->used = ts_calloc(r->rec->n, sizeof *r->used);
    if (!r->used) {
        recording_free(r->rec);
        ts_free(r);
        return -ENOMEM;
    }
    *out = r;
    return 0;
}

void sim_replay_free(struct sim_replay *r)
{
    if (!r)
        return;
    recording_free(r->rec);
    ts_free(r->used);
    ts_free(r);
}

size_t sim_replay_count(const struct sim_replay *r, uint64_t *skipped)
{
    *skipped = r->rec->skipped;
    return r->rec->n;
}

void sim_replay_stats(const struct sim_replay *r, uint64_t *served, uint64_t *unmatched)
{
    *served = r->served;
    *unmatched = r->unmatched;
}

/* The "model" of a JSON body into out ("" if none). */
static void body_model(const char *body, size_t len, char *out, size_t n)
{
    json_t *j = json_loadb(body, len, 0, NULL);
    const json_t *m = json_object_get(j, "model");
    snprintf(out, n, "%s", json_is_string(m) ? json_string_value(m) : "");
    json_decref(j);
}

/* The least used exchange that matches at level (0 hash, 1 model, 2 path), or -1. */
static long find(const struct sim_replay *r, const struct http_request *req, const char *hash,
                 const char *model, int level)
{
    long best = -1;
    for (size_t i = 0; i < r->rec->n; i++) {
        const struct rec_exchange *x = &r->rec->v[i];
        const char *q = strchr(x->path, '?');
        size_t plen = q ? (size_t)(q - x->path) : strlen(x->path);
        if (strcmp(x->method, req->method) || strlen(req->path) != plen ||
            strncmp(x->path, req->path, plen) || x->status == 0)
            continue;
        if ((level == 0 && strcmp(x->body_hash, hash)) || (level == 1 && strcmp(x->model, model)))
            continue;
        if (best < 0 || r->used[i] < r->used[best])
            best = (long)i;
    }
    return best;
}

static void rr_closed(uv_handle_t *h)
{
    ts_free(h->data);
}

/* Ends rr: the request (if still there) and the timer. */
static void rr_finish(struct replay_req *rr)
{
    uv_timer_stop(&rr->timer);
    if (!uv_is_closing((uv_handle_t *)&rr->timer))
        uv_close((uv_handle_t *)&rr->timer, rr_closed);
}

static void rr_on_abort(struct http_request *req)
{
    struct replay_req *rr = req->user;
    (void)http_stream_end(req); /* finishes it: the client is gone */
    rr->req = NULL;
    rr_finish(rr);
}

/* Writes the events that are due; arms the timer for the next, or ends. */
static void rr_step(uv_timer_t *t)
{
    struct replay_req *rr = t->data;
    const struct rec_exchange *x = rr->x;
    uint64_t now = ts_now_ns();
    struct buf b;
    buf_init(&b, RECORDING_LINE_MAX);
    while (rr->req && rr->next < x->nev && rr->t0 + x->ev[rr->next].t_ns <= now + 500000) {
        const struct rec_event *e = &x->ev[rr->next++];
        int rc = e->type ? buf_appendf(&b, "event: %s\n", e->type) : 0;
        /* one data line per line of the event's data */
        for (const char *p = e->data; !rc;) {
            const char *nl = strchr(p, '\n');
            size_t n = nl ? (size_t)(nl - p) : strlen(p);
            rc = buf_append_str(&b, "data: ");
            if (!rc)
                rc = buf_append(&b, p, n);
            if (!rc)
                rc = buf_append_char(&b, '\n');
            if (!nl)
                break;
            p = nl + 1;
        }
        if (!rc)
            rc = buf_append_char(&b, '\n');
        if (rc)
            break;
    }
    if (rr->req && b.len && http_stream_write(rr->req, b.data, b.len) == TS_CLOSED)
        rr->req = NULL;
    buf_release(&b);
    if (!rr->req)
        return; /* the abort hook finishes it */
    if (rr->next < x->nev) {
        uint64_t due = rr->t0 + x->ev[rr->next].t_ns;
        uv_timer_start(&rr->timer, rr_step, due > now ? (due - now + 999999) / 1000000 : 0, 0);
        return;
    }
    struct http_request *req = rr->req;
    rr->req = NULL;
    http_request_on_abort(req, NULL);
    (void)http_stream_end(req);
    rr_finish(rr);
}

/* A non-stream response at its recorded end. */
static void rr_body(uv_timer_t *t)
{
    struct replay_req *rr = t->data;
    const struct rec_exchange *x = rr->x;
    if (!rr->req)
        return;
    struct http_request *req = rr->req;
    rr->req = NULL;
    http_request_on_abort(req, NULL);
    (void)http_respond(req, x->status, x->content_type ? x->content_type : "application/json", NULL,
                       x->resp_body ? x->resp_body : "", x->resp_body ? x->resp_len : 0);
    rr_finish(rr);
}

static void replay_404(struct http_request *req)
{
    static const char body[] =
        "{\"error\":{\"message\":\"tokenstorm sim --replay: no recorded exchange matches this "
        "request\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"not_found\"}}";
    (void)http_respond(req, 404, "application/json", NULL, body, sizeof body - 1);
}

void sim_replay_handle(struct sim_replay *r, uv_loop_t *loop, struct http_request *req)
{
    char hash[17], model[128];
    recording_body_hash(req->body, req->body_len, hash);
    body_model(req->body, req->body_len, model, sizeof model);
    long i = -1;
    for (int level = 0; level < 3 && i < 0; level++)
        i = find(r, req, hash, model, level);
    struct replay_req *rr = i >= 0 ? ts_calloc(1, sizeof *rr) : NULL;
    if (!rr || uv_timer_init(loop, &rr->timer) != 0) {
        ts_free(rr);
        r->unmatched += i < 0;
        if (i < 0)
            replay_404(req);
        else
            (void)http_respond(req, 503, NULL, NULL, "", 0);
        return;
    }
    r->used[i]++;
    r->served++;
    rr->timer.data = rr;
    rr->req = req;
    rr->x = &r->rec->v[i];
    rr->t0 = ts_now_ns();
    req->user = rr;
    const struct rec_exchange *x = rr->x;
    if (x->nev && x->status >= 200) {
        if (http_stream_begin(req, x->status,
                              x->content_type ? x->content_type : "text/event-stream", NULL) != 0) {
            (void)http_stream_end(req); /* finishes it (the connection is cut) */
            rr->req = NULL;
            rr_finish(rr);
            return;
        }
        http_request_on_abort(req, rr_on_abort);
        uint64_t due = x->ev[0].t_ns;
        uv_timer_start(&rr->timer, rr_step, (due + 999999) / 1000000, 0);
    } else {
        http_request_on_abort(req, rr_on_abort);
        uv_timer_start(&rr->timer, rr_body, (x->end_ns + 999999) / 1000000, 0);
    }
}
