/*
 * worker.c - one load-generating thread: its loop, its HTTP client, its
 * schedule (open loop) or users (closed loop), and the hand-over of its
 * measurements to the coordinator.
 */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "load/runner_int.h"

int qnotes_push(struct qnotes *q, const struct qnote *note)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 256;
        struct qnote *v = ts_realloc(q->v, cap * sizeof(*v));
        if (!v) {
            ts_free(note->answer);
            return -ENOMEM;
        }
        q->v = v;
        q->cap = cap;
    }
    q->v[q->n++] = *note;
    return 0;
}

void qnotes_clear(struct qnotes *q)
{
    for (size_t i = 0; i < q->n; i++)
        ts_free(q->v[i].answer);
    q->n = 0;
}

void qnotes_release(struct qnotes *q)
{
    qnotes_clear(q);
    ts_free(q->v);
    q->v = NULL;
    q->cap = 0;
}

/* Arrivals due within this much of now are sent in the same wake-up. */
#define SEND_SLACK_NS (20 * TS_NS_PER_US)

static void arm(struct worker *w);
static void actor_free(struct worker *w, struct ractor *a);
static void cls_release(struct worker *w);

/* The first few problems of a kind are logged, not every one of thousands. */
#define WARN_SOME(...)                                                                             \
    do {                                                                                           \
        static atomic_uint warned_;                                                                \
        if (atomic_fetch_add(&warned_, 1) < 5)                                                     \
            ts_warn(__VA_ARGS__);                                                                  \
    } while (0)

void worker_post(struct worker *w, unsigned bits)
{
    atomic_fetch_or(&w->cmd_bits, bits);
    uv_async_send(&w->cmd);
}

/* ---- closed-loop users: a min-heap of wake-up times ---- */

static int heap_push_actor(struct worker *w, uint64_t at, uint32_t user, struct ractor *actor)
{
    if (w->heap_len == w->heap_cap) {
        size_t cap = w->heap_cap ? w->heap_cap * 2 : 64;
        struct wake *h = ts_realloc(w->heap, cap * sizeof(*h));
        if (!h)
            return -ENOMEM;
        w->heap = h;
        w->heap_cap = cap;
    }
    size_t i = w->heap_len++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (w->heap[parent].at_ns <= at)
            break;
        w->heap[i] = w->heap[parent];
        i = parent;
    }
    w->heap[i] = (struct wake){at, user, actor};
    return 0;
}

static int heap_push(struct worker *w, uint64_t at, uint32_t user)
{
    return heap_push_actor(w, at, user, NULL);
}

static struct wake heap_pop(struct worker *w)
{
    struct wake top = w->heap[0];
    struct wake last = w->heap[--w->heap_len];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= w->heap_len)
            break;
        if (c + 1 < w->heap_len && w->heap[c + 1].at_ns < w->heap[c].at_ns)
            c++;
        if (w->heap[c].at_ns >= last.at_ns)
            break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (w->heap_len)
        w->heap[i] = last;
    return top;
}

/* ---- the schedule ---- */

/* Moves to this worker's next arrival of the global schedule (or ends it). */
static void next_arrival(struct worker *w)
{
    const struct runner_config *cfg = w->run->cfg;
    for (;;) {
        uint64_t t;
        if (arrival_next(&w->arrival, &w->arrival_rng, &t)) {
            w->next_at = 0;
            return;
        }
        uint64_t index = w->arrival.count - 1;
        if ((cfg->max_requests && index >= cfg->max_requests) ||
            w->run->start_ns + t >= w->run->end_send_ns) {
            w->next_at = 0;
            return;
        }
        /* this process's share (--shard / MPI rank), then this worker's */
        if (shard_owns(&cfg->shard, index) &&
            shard_worker(&cfg->shard, index, w->run->nworkers) == w->index) {
            w->next_index = index;
            w->next_at = w->run->start_ns + t;
            return;
        }
    }
}

static void check_done(struct worker *w)
{
    if (w->reported_done || !w->sending_over || w->n_inflight)
        return;
    w->reported_done = true;
    atomic_fetch_add(&w->run->workers_done, 1);
    uv_async_send(&w->run->worker_event);
}

static void stop_sending(struct worker *w)
{
    if (w->sending_over)
        return;
    w->sending_over = true;
    ptimer_stop(&w->timer);
    for (size_t i = 0; i < w->heap_len; i++) {
        if (w->heap[i].actor)
            actor_free(w, w->heap[i].actor);
    }
    w->heap_len = 0;
    check_done(w);
}

static void send_closed(struct worker *w, uint64_t intended, uint32_t user)
{
    const struct runner_config *cfg = w->run->cfg;
    uint64_t index = shard_global(&cfg->shard, atomic_fetch_add(&w->run->closed_next_index, 1));
    if (cfg->max_requests && index >= cfg->max_requests) {
        w->users_active--;
        if (!w->users_active)
            stop_sending(w);
        return;
    }
    if (exch_start(w, index, intended, user) == -ENOMEM) {
        /* out of memory: the user retires rather than spin on failures */
        atomic_fetch_add(&w->run->users_lost, 1);
        w->users_active--;
        if (!w->users_active)
            stop_sending(w);
    }
}

/* ---- scenario classes: actors that run iterations ---- */

static void cls_next_arrival(struct worker *w, uint32_t k)
{
    const struct runner_config *cfg = w->run->cfg;
    const struct runner_class *rc = &cfg->classes[k];
    struct wclass *c = &w->cls[k];
    for (;;) {
        uint64_t t, index;
        if (rc->times) {
            index = c->arrival.count;
            if (index >= rc->ntimes) {
                c->next_at = 0;
                return;
            }
            c->arrival.count++;
            t = rc->times[index];
        } else {
            if (arrival_next(&c->arrival, &c->arrival_rng, &t)) {
                c->next_at = 0;
                return;
            }
            index = c->arrival.count - 1;
        }
        if ((rc->max_iterations && index >= rc->max_iterations) ||
            w->run->start_ns + t >= w->run->end_send_ns) {
            c->next_at = 0;
            return;
        }
        if (shard_owns(&cfg->shard, index) &&
            shard_worker(&cfg->shard, index + k, w->run->nworkers) == w->index) {
            c->next_index = index;
            c->next_at = w->run->start_ns + t;
            return;
        }
    }
}

static bool cls_sending(const struct worker *w)
{
    for (uint32_t k = 0; k < w->ncls; k++) {
        if (w->cls[k].next_at || w->cls[k].users_active)
            return true;
    }
    return false;
}

static void actor_free(struct worker *w, struct ractor *a)
{
    traffic_actor_free(a->ta);
    ts_free(a);
    w->actors--;
}

/* A user ended (closed loop) or an open-loop arrival's actor is done. */
static void actor_retire(struct worker *w, struct ractor *a)
{
    if (a->user != UINT32_MAX) {
        struct wclass *c = &w->cls[a->cls];
        c->users_active--;
    }
    actor_free(w, a);
    if (!cls_sending(w))
        stop_sending(w);
}

static void actor_iteration_end(struct worker *w, struct ractor *a);

/* Sends every request of the actor's iteration that is ready now. */
static void actor_pump(struct worker *w, struct ractor *a)
{
    for (;;) {
        struct traffic_req rq;
        char err[256] = "";
        int rc = traffic_next(a->ta, w->tc, &rq, err, sizeof(err));
        if (rc == 0)
            break;
        if (rc < 0) {
            WARN_SOME("class '%s': %s", w->run->cfg->classes[a->cls].name,
                      err[0] ? err : ts_strerror(rc));
            continue; /* the traffic marked it failed; look for more */
        }
        /* the iteration's first requests keep its intended time (the schedule's
         * lag shows); later steps are timed from when they became ready */
        (void)exch_start_traffic(w, a, &rq, a->launched ? ts_now_ns() : a->iter_intended);
        a->launched = true; /* exch_start_traffic never completes a request inside the call */
        if (w->closing)
            return;
    }
    if (traffic_iteration_done(a->ta))
        actor_iteration_end(w, a);
}

/* Starts an iteration of a (its intended time: at). false when the class's cap is reached. */
static bool actor_begin(struct worker *w, struct ractor *a, uint64_t at, uint64_t session_no)
{
    const struct runner_class *rc = &w->run->cfg->classes[a->cls];
    uint64_t n = atomic_fetch_add(&w->run->cls_iter[a->cls], 1);
    if (a->user != UINT32_MAX && rc->max_iterations && n >= rc->max_iterations)
        return false;
    a->iter_intended = at;
    a->launched = false;
    a->warmup = at < w->run->warmup_end_ns;
    if (traffic_begin(a->ta, session_no, w->tc))
        return false;
    return true;
}

static void actor_iteration_end(struct worker *w, struct ractor *a)
{
    const struct runner_config *cfg = w->run->cfg;
    struct wclass *c = &w->cls[a->cls];
    uint64_t now = ts_now_ns();
    if (!a->warmup) {
        int o = traffic_iteration_outcome(a->ta);
        c->res.iterations++;
        c->res.iter_outcome[o]++;
        if (o == 2) {
            char why[REQ_ERROR_MAX];
            traffic_iteration_why(a->ta, why, sizeof(why));
            errtally_add(&c->res.iter_why, REQ_OTHER, 0, why, 1);
        }
        if (c->res.iter_latency && now > a->iter_intended)
            (void)hdr_record(c->res.iter_latency, (int64_t)((now - a->iter_intended) / 1000));
    }
    if (a->counted) {
        c->iters_inflight--;
        a->counted = false;
    }
    uint64_t think = 0;
    bool more = traffic_after(a->ta, &w->rng, &think);
    bool sending = !w->sending_over && !atomic_load(&w->run->stop);
    if (more && sending) {
        /* the session's next turn */
        if (!heap_push_actor(w, now + think, a->user, a)) {
            arm(w);
            return;
        }
    }
    if (a->user == UINT32_MAX) {
        actor_retire(w, a);
        return;
    }
    /* a closed-loop user: the next session after its think time */
    const struct runner_class *rc = &cfg->classes[a->cls];
    double t = rc->think ? dist_sample(rc->think, &w->rng) : 0;
    uint64_t at = now + (t > 0 ? (uint64_t)((t < 1e9 ? t : 1e9) * 1e9) : 0); /* <= ~31.7 years */
    if (!sending || at >= w->run->end_send_ns || heap_push_actor(w, at, a->user, a)) {
        actor_retire(w, a);
        return;
    }
    arm(w);
}

/* A wake-up of the heap: a closed-loop user's next iteration or a session's next turn. */
static void actor_wake(struct worker *w, struct wake wk)
{
    struct ractor *a = wk.actor;
    uint64_t session_no = 0;
    if (a->user != UINT32_MAX && !traffic_in_session(a->ta)) {
        session_no = atomic_fetch_add(&w->run->cls_session[a->cls], 1);
        w->cls[a->cls].res.sessions++;
    }
    if (!actor_begin(w, a, wk.at_ns, session_no)) {
        actor_retire(w, a);
        return;
    }
    actor_pump(w, a);
}

/* An open-loop arrival of class k: a new actor and its first iteration. */
static void cls_arrive(struct worker *w, uint32_t k)
{
    struct wclass *c = &w->cls[k];
    const struct runner_class *rc = &w->run->cfg->classes[k];
    struct ractor *a = ts_calloc(1, sizeof(*a));
    if (!a || traffic_actor_new(rc->traffic, c->next_index, &a->ta)) {
        ts_free(a);
        WARN_SOME("worker %u: out of memory for an arrival", w->index);
        return;
    }
    w->actors++;
    a->cls = k;
    a->user = UINT32_MAX;
    c->res.sessions++;
    if (!actor_begin(w, a, c->next_at, c->next_index)) {
        actor_free(w, a);
        return;
    }
    a->counted = true;
    c->iters_inflight++;
    actor_pump(w, a);
}

static bool cls_slot_free(const struct worker *w, uint32_t k)
{
    const struct runner_config *cfg = w->run->cfg;
    uint32_t cap = cfg->classes[k].max_concurrency;
    return !cap || w->cls[k].iters_inflight * w->run->nworkers * shard_n(&cfg->shard) < cap;
}

static void cls_on_timer(struct worker *w, uint64_t now)
{
    for (uint32_t k = 0; k < w->ncls && !w->closing; k++) {
        struct wclass *c = &w->cls[k];
        while (c->next_at && c->next_at <= now + SEND_SLACK_NS && cls_slot_free(w, k)) {
            cls_arrive(w, k);
            if (w->closing)
                return;
            cls_next_arrival(w, k);
        }
    }
    while (w->heap_len && w->heap[0].at_ns <= now + SEND_SLACK_NS && !w->sending_over &&
           !w->closing) {
        struct wake wk = heap_pop(w);
        actor_wake(w, wk);
    }
    if (!cls_sending(w) && !w->heap_len)
        stop_sending(w);
}

/* The earliest thing to do for the classes, or 0. */
static uint64_t cls_next_at(const struct worker *w)
{
    uint64_t at = 0;
    for (uint32_t k = 0; k < w->ncls; k++) {
        uint64_t t = w->cls[k].next_at;
        if (t && cls_slot_free(w, k) && (!at || t < at))
            at = t;
    }
    if (w->heap_len && (!at || w->heap[0].at_ns < at))
        at = w->heap[0].at_ns;
    return at;
}

static void cls_start(struct worker *w)
{
    const struct runner_config *cfg = w->run->cfg;
    uint64_t step = (uint64_t)shard_n(&cfg->shard) * w->run->nworkers;
    for (uint32_t k = 0; k < w->ncls; k++) {
        const struct runner_class *rc = &cfg->classes[k];
        if (rc->mode == RUNNER_OPEN) {
            cls_next_arrival(w, k);
            continue;
        }
        for (uint64_t u64 = shard_global(&cfg->shard, (w->index + k) % w->run->nworkers);
             u64 < rc->users; u64 += step) {
            uint32_t u = (uint32_t)u64;
            uint64_t offset = rc->ramp_users_ns ? rc->ramp_users_ns * u / rc->users : 0;
            struct ractor *a = ts_calloc(1, sizeof(*a));
            if (!a || traffic_actor_new(rc->traffic, u, &a->ta) ||
                heap_push_actor(w, w->run->start_ns + offset, u, a)) {
                if (a)
                    traffic_actor_free(a->ta);
                ts_free(a);
                ts_error("worker %u: out of memory for users", w->index);
                atomic_fetch_add(&w->run->users_lost, (rc->users - u64 + step - 1) / step);
                break;
            }
            a->cls = k;
            a->user = u;
            w->actors++;
            w->cls[k].users_active++;
        }
    }
}

/*
 * Sends what is due at now: arrivals whose intended time has come. The
 * schedule itself ends at the end of sending (next_arrival, send_closed), so
 * a worker that runs late still sends what fell due before it (late, its lag
 * recorded) instead of dropping it. Returns false when sending is over.
 */
static bool send_due(struct worker *w, uint64_t now)
{
    const struct runner_config *cfg = w->run->cfg;
    if (w->ncls) {
        cls_on_timer(w, now);
    } else if (cfg->mode == RUNNER_OPEN) {
        while (w->next_at && w->next_at <= now + SEND_SLACK_NS) {
            if (cfg->max_concurrency &&
                w->n_inflight * w->run->nworkers * shard_n(&cfg->shard) >= cfg->max_concurrency) {
                break; /* wait for a slot; the lag shows the wait */
            }
            (void)exch_start(w, w->next_index, w->next_at, 0); /* failures are recorded */
            next_arrival(w);
            if (w->closing)
                return false;
        }
        if (!w->next_at) {
            stop_sending(w);
            return false;
        }
    } else {
        while (w->heap_len && w->heap[0].at_ns <= now + SEND_SLACK_NS && !w->sending_over) {
            struct wake wk = heap_pop(w);
            send_closed(w, wk.at_ns, wk.user);
        }
    }
    return !w->sending_over && !w->closing;
}

static void on_timer(struct ptimer *t)
{
    struct worker *w = t->data;
    if (atomic_load(&w->run->stop)) {
        stop_sending(w);
        return;
    }
    if (send_due(w, ts_now_ns()))
        arm(w);
}

/* Between two sockets' reads of a long poll pass, or between decodes of
 * what such a pass received: send what fell due. */
void worker_send_due(struct worker *w)
{
    if (w->send_now) { /* arm() found it due already */
        w->send_now = false;
        if (!w->sending_over && !w->closing)
            on_timer(&w->timer);
        return;
    }
    uint64_t due = w->timer.deadline_ns; /* 0: not armed */
    if (w->sending_over || w->closing || !due)
        return;
    if (due <= ts_now_ns() + SEND_SLACK_NS) {
        ptimer_stop(&w->timer);
        on_timer(&w->timer);
    }
}

static void between_reads(void *arg)
{
    worker_send_due(arg);
}

/* Arms the timer for the next thing to send (unless waiting for a slot). */
static void arm(struct worker *w)
{
    const struct runner_config *cfg = w->run->cfg;
    if (w->sending_over || w->closing)
        return;
    uint64_t at;
    if (w->ncls) {
        at = cls_next_at(w);
        if (!at)
            return;
    } else if (cfg->mode == RUNNER_OPEN) {
        if (!w->next_at)
            return;
        if (cfg->max_concurrency &&
            w->n_inflight * w->run->nworkers * shard_n(&cfg->shard) >= cfg->max_concurrency)
            return; /* worker_request_done re-arms */
        at = w->next_at;
    } else {
        if (!w->heap_len)
            return;
        at = w->heap[0].at_ns;
    }
    if (at > w->run->end_send_ns)
        at = w->run->end_send_ns; /* wake up to notice the end */
    if (at <= ts_now_ns()) {
        /* due already (a closed-loop user's next request when one ends):
         * sent from this loop pass's check phase (worker_send_due from
         * exch_rx_flush), not through the timerfd, whose arming for "now"
         * cost a timer reprogramming, an interrupt and three system calls
         * per request (1.4% of the client's CPU at 100 streams) */
        w->send_now = true;
        exch_rx_keep_polling(w);
        return;
    }
    int rc = ptimer_start_at(&w->timer, at, on_timer);
    if (rc)
        ts_error("worker %u: timer: %s", w->index, strerror(-rc));
}

/*
 * A flow's retrieval step: its recall@k goes on its record; an answer step:
 * its scored answer goes to the stats of each retrieval step it followed
 * (docs/VECTOR.md, "Retrieval steps of RAG flows").
 */
static void flow_recall(struct worker *w, struct exch *x, struct ractor *actor, bool ok)
{
    const struct runner_config *cfg = w->run->cfg;
    struct req_record *r = &x->rec;
    struct runner_class_result *res = &w->cls[actor->cls].res;
    double recall;
    uint32_t k;
    if (ok && !x->sse_mode && x->body.len &&
        traffic_retrieval_done(actor->ta, &x->treq, x->item.body, x->item.body_len, x->body.data,
                               x->body.len, &recall, &k) == 1) {
        r->recall = recall;
        r->recall_k = (uint16_t)k;
        r->has_recall = true;
    }
    if (!x->treq.answer || !r->quality.have || (r->flags & REQF_WARMUP) || !res->steps)
        return;
    struct traffic_recall led[FLOW_STEPS_MAX];
    size_t n = traffic_answer_recalls(actor->ta, x->treq.step, led, FLOW_STEPS_MAX);
    bool qok = r->outcome == REQ_OK && quality_scores_pass(&r->quality, &cfg->quality.target);
    for (size_t i = 0; i < n; i++)
        if (led[i].step < res->nsteps)
            run_stats_add_led(res->steps[led[i].step], led[i].recall, led[i].k, &r->quality, qok);
}

void worker_request_done(struct worker *w, struct exch *x, uint32_t user)
{
    const struct runner_config *cfg = w->run->cfg;
    uint64_t end = x->rec.end_ns;
    struct ractor *actor = x->actor;
    if (actor) {
        bool ok = x->rec.outcome == REQ_OK;
        actor->inflight--;
        if (cfg->classes[actor->cls].traffic->has_flow)
            flow_recall(w, x, actor, ok);
        traffic_done(actor->ta, &x->treq, ok, x->answer.len ? x->answer.data : NULL, x->answer.len,
                     x->sse_mode || !x->body.len ? NULL : x->body.data, x->body.len);
        exch_finish(x);
        if (w->closing) {
            if (!actor->inflight)
                actor_free(w, actor);
        } else if (!traffic_iteration_done(actor->ta))
            actor_pump(w, actor);
        else
            actor_iteration_end(w, actor);
        if (!w->sending_over)
            arm(w);
        check_done(w);
        return;
    }
    exch_finish(x);
    if (cfg->mode == RUNNER_CLOSED && !w->sending_over) {
        double think = cfg->think ? dist_sample(cfg->think, &w->rng) : 0;
        uint64_t at = end + (think > 0 ? (uint64_t)((think < 1e9 ? think : 1e9) * 1e9) : 0);
        if (at >= w->run->end_send_ns || atomic_load(&w->run->stop) || heap_push(w, at, user)) {
            w->users_active--;
            if (!w->users_active)
                stop_sending(w);
        }
    }
    if (!w->sending_over)
        arm(w);
    check_done(w);
}

/* ---- commands from the coordinator ---- */

static void rotate(struct worker *w)
{
    pthread_mutex_lock(&w->mail_lock);
    if (w->spare && !w->mailbox) {
        w->mailbox = w->active;
        w->active = w->spare;
        w->spare = NULL;
        /* the notes go with the stats (the coordinator emptied mail_notes) */
        struct qnotes t = w->mail_notes;
        w->mail_notes = w->notes;
        w->notes = t;
    }
    pthread_mutex_unlock(&w->mail_lock);
    uv_async_send(&w->run->worker_event);
}

static void on_handle_closed(uv_handle_t *h)
{
    struct worker *w = h->data;
    w->handles--;
}

static void on_ptimer_closed(struct ptimer *t)
{
    struct worker *w = t->data;
    w->handles--;
}

/* --cancel: abandons the requests whose time came; re-arms for the next. */
static void on_cancel_timer(uv_timer_t *h)
{
    struct worker *w = h->data;
    uint64_t now = ts_now_ns(), next = 0;
    w->cancel_armed = 0;
    for (struct exch *x = w->inflight; x; x = x->next) {
        if (!x->cancel_at || x->cancelled || x->cut || !x->call)
            continue;
        if (x->cancel_at <= now)
            exch_cancel(x);
        else if (!next || x->cancel_at < next)
            next = x->cancel_at;
    }
    if (next)
        worker_cancel_arm(w, next);
}

void worker_cancel_arm(struct worker *w, uint64_t at)
{
    if (!w->cancel_inited || w->closing || (w->cancel_armed && w->cancel_armed <= at))
        return;
    uint64_t now = ts_now_ns();
    uint64_t ms = at > now ? (at - now + TS_NS_PER_MS - 1) / TS_NS_PER_MS : 0;
    if (uv_timer_start(&w->cancel_timer, on_cancel_timer, ms, 0) == 0)
        w->cancel_armed = at;
}

static void on_client_closed(struct http_client *c, void *arg)
{
    struct worker *w = arg;
    w->handles--;
    exch_fail_flush(w); /* the check handle closes now: complete what it would have */
    ptimer_close(&w->timer, on_ptimer_closed);
    if (w->cancel_inited)
        uv_close((uv_handle_t *)&w->cancel_timer, on_handle_closed);
    uv_close((uv_handle_t *)&w->cmd, on_handle_closed);
    if (w->check_inited) {
        uv_close((uv_handle_t *)&w->check, on_handle_closed);
        uv_close((uv_handle_t *)&w->rx_idle, on_handle_closed);
    }
}

static void on_check(uv_check_t *h)
{
    exch_rx_flush(h->data);
}

static void on_cmd(uv_async_t *h)
{
    struct worker *w = h->data;
    unsigned bits = atomic_exchange(&w->cmd_bits, 0);
    if (bits & WCMD_ROTATE)
        rotate(w);
    /* the end of sending: first what fell due before it (a late worker's
     * backlog), unless the run was stopped or is being cut */
    if ((bits & WCMD_STOP) && !(bits & WCMD_CUT) && !w->sending_over && !w->closing &&
        !atomic_load(&w->run->stop))
        (void)send_due(w, ts_now_ns());
    if (bits & (WCMD_STOP | WCMD_CUT))
        stop_sending(w);
    if (bits & WCMD_CUT) {
        for (struct exch *x = w->inflight; x; x = x->next)
            exch_cut(x);
    }
    if ((bits & WCMD_QUIT) && !w->closing) {
        w->closing = true;
        ptimer_stop(&w->timer);
        http_client_close(&w->client, on_client_closed, w);
    }
}

static void start_users(struct worker *w)
{
    const struct runner_config *cfg = w->run->cfg;
    /* this process's users are u % N == shard index; its k-th goes to worker k % workers */
    uint64_t step = (uint64_t)shard_n(&cfg->shard) * w->run->nworkers;
    for (uint64_t u64 = shard_global(&cfg->shard, w->index); u64 < cfg->users; u64 += step) {
        uint32_t u = (uint32_t)u64;
        uint64_t offset = cfg->ramp_users_ns ? cfg->ramp_users_ns * u / cfg->users : 0;
        if (heap_push(w, w->run->start_ns + offset, u)) {
            ts_error("worker %u: out of memory for users", w->index);
            atomic_fetch_add(&w->run->users_lost, (cfg->users - u64 + step - 1) / step);
            break;
        }
        w->users_active++;
    }
}

void *worker_main(void *arg)
{
    struct worker *w = arg;
    const struct runner_config *cfg = w->run->cfg;
    if (w->ncls) {
        cls_start(w);
        if (!cls_sending(w))
            stop_sending(w);
    } else if (cfg->mode == RUNNER_OPEN) {
        next_arrival(w);
        if (!w->next_at)
            stop_sending(w);
    } else {
        start_users(w);
        if (!w->users_active)
            stop_sending(w);
    }
    arm(w);
    uv_run(&w->loop, UV_RUN_DEFAULT);
    return NULL;
}

void worker_release(struct worker *w)
{
    if (w->loop_inited) {
        if (!w->closing) {
            /* never started, or failed to: close what is open */
            w->closing = true;
            if (w->client_inited) {
                http_client_close(&w->client, on_client_closed, w);
            } else {
                if (w->timer_inited)
                    ptimer_close(&w->timer, on_ptimer_closed);
                if (w->cancel_inited)
                    uv_close((uv_handle_t *)&w->cancel_timer, on_handle_closed);
                if (w->cmd_inited)
                    uv_close((uv_handle_t *)&w->cmd, on_handle_closed);
            }
        }
        while (w->handles > 0)
            uv_run(&w->loop, UV_RUN_ONCE);
        if (uv_loop_close(&w->loop))
            ts_warn("worker %u: loop closed with open handles", w->index);
    }
    for (size_t i = 0; i < w->heap_len; i++) {
        if (w->heap[i].actor)
            actor_free(w, w->heap[i].actor);
    }
    w->heap_len = 0;
    cls_release(w);
    tokcount_free(w->tc);
    w->tc = NULL;
    openai_decoder_release(&w->decoder);
    while (w->n_rx_spare)
        buf_release(&w->rx_spare[--w->n_rx_spare]);
    ts_free(w->chunk_times);
    w->chunk_times = NULL;
    arrival_release(&w->arrival);
    run_stats_free(w->active);
    run_stats_free(w->mailbox);
    run_stats_free(w->spare);
    qnotes_release(&w->notes);
    qnotes_release(&w->mail_notes);
    quality_scratch_free(w->qscratch);
    pthread_mutex_destroy(&w->mail_lock);
    ts_free(w->heap);
}

static int build_arrival(struct worker *w, char *err, size_t errlen)
{
    const struct runner_arrival *a = &w->run->cfg->arrival;
    int rc;
    if (a->times)
        rc = arrival_init_times(&w->arrival, a->times, a->ntimes, a->speed, a->loop);
    else if (a->stages)
        rc = arrival_parse_stages(&w->arrival, &a->process, a->rate, a->stages, err, errlen);
    else if (a->ramp_ns)
        rc = arrival_init_ramp(&w->arrival, &a->process, a->rate, a->ramp_to, a->ramp_ns);
    else
        rc = arrival_init(&w->arrival, &a->process, a->rate);
    if (rc && !err[0])
        ts_errf(err, errlen, "bad arrival process");
    /* every worker draws the same global schedule */
    rng_seed(&w->arrival_rng, w->run->cfg->seed ^ 0x61727269766c);
    return rc;
}

/* The worker's share of each class: arrivals, statistics. */
static int cls_init(struct worker *w, char *err, size_t errlen)
{
    const struct runner_config *cfg = w->run->cfg;
    w->cls = ts_calloc(cfg->nclasses, sizeof(*w->cls));
    if (!w->cls)
        goto oom;
    w->ncls = (uint32_t)cfg->nclasses;
    for (uint32_t k = 0; k < w->ncls; k++) {
        const struct runner_class *rc = &cfg->classes[k];
        struct wclass *c = &w->cls[k];
        if (run_stats_new(&c->res.stats) || hdr_new_latency(&c->res.iter_latency))
            goto oom;
        if (rc->traffic->has_gen) {
            c->res.nintents = (uint32_t)promptgen_nintents(&rc->traffic->gen);
            c->res.intent_sent = ts_calloc(c->res.nintents ? c->res.nintents : 1, sizeof(uint64_t));
            if (!c->res.intent_sent)
                goto oom;
        }
        uint32_t nsteps = traffic_nsteps(rc->traffic);
        if (rc->traffic->has_flow) {
            c->res.steps = ts_calloc(nsteps, sizeof(*c->res.steps));
            if (!c->res.steps)
                goto oom;
            c->res.nsteps = nsteps;
            for (uint32_t i = 0; i < nsteps; i++) {
                if (run_stats_new(&c->res.steps[i]))
                    goto oom;
            }
        }
        if (rc->mode != RUNNER_OPEN || rc->times)
            continue;
        const struct runner_arrival *a = &rc->arrival;
        int rc2;
        if (a->stages)
            rc2 = arrival_parse_stages(&c->arrival, &a->process, a->rate, a->stages, err, errlen);
        else
            rc2 = arrival_init(&c->arrival, &a->process, a->rate);
        if (rc2) {
            if (!err[0])
                ts_errf(err, errlen, "class '%s': bad arrival process", rc->name);
            return rc2;
        }
        c->arrival_inited = true;
        rng_seed(&c->arrival_rng, cfg->seed ^ 0x61727269766c ^ rng_mix64(k + 1));
    }
    return 0;
oom:
    ts_errf(err, errlen, "out of memory");
    return -ENOMEM;
}

static void cls_release(struct worker *w)
{
    for (uint32_t k = 0; w->cls && k < w->ncls; k++) {
        struct wclass *c = &w->cls[k];
        if (c->arrival_inited)
            arrival_release(&c->arrival);
        runner_class_result_release(&c->res);
    }
    ts_free(w->cls);
    w->cls = NULL;
}

int worker_init(struct worker *w, struct runner *run, uint32_t index, char *err, size_t errlen)
{
    memset(w, 0, sizeof(*w));
    w->run = run;
    w->index = index;
    pthread_mutex_init(&w->mail_lock, NULL);
    openai_decoder_init(&w->decoder);
    if (quality_scratch_new(&w->qscratch)) {
        ts_errf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    rng_seed(&w->rng, run->cfg->seed + 0x9e3779b97f4a7c15ull * (index + 1));
    int rc = uv_loop_init(&w->loop);
    if (rc) {
        ts_errf(err, errlen, "event loop: %s", uv_strerror(rc));
        return rc;
    }
    w->loop_inited = true;
    if ((rc = run_stats_new(&w->active)) || (rc = run_stats_new(&w->spare))) {
        ts_errf(err, errlen, "out of memory");
        return rc;
    }
    if (run->cfg->make_tokcount && (rc = run->cfg->make_tokcount(run->cfg->tokcount_arg, &w->tc))) {
        ts_errf(err, errlen, "out of memory");
        return rc;
    }
    if (run->cfg->nclasses) {
        if ((rc = cls_init(w, err, errlen)))
            return rc;
    } else if (run->cfg->mode == RUNNER_OPEN && (rc = build_arrival(w, err, errlen))) {
        return rc;
    }
    if ((rc = uv_async_init(&w->loop, &w->cmd, on_cmd))) {
        ts_errf(err, errlen, "async: %s", uv_strerror(rc));
        return rc;
    }
    w->cmd.data = w;
    w->cmd_inited = true;
    w->handles++;
    if ((rc = ptimer_init(&w->loop, &w->timer))) {
        ts_errf(err, errlen, "timer: %s", strerror(-rc));
        return rc;
    }
    w->timer.data = w;
    w->timer_inited = true;
    w->handles++;
    if ((rc = uv_timer_init(&w->loop, &w->cancel_timer))) {
        ts_errf(err, errlen, "timer: %s", uv_strerror(rc));
        return rc;
    }
    w->cancel_timer.data = w;
    w->cancel_inited = true;
    w->handles++;
    struct http_client_config ccfg = run->cfg->client;
    ccfg.between_reads = between_reads;
    ccfg.between_reads_arg = w;
    if ((rc = http_client_init(&w->client, &w->loop, &ccfg))) {
        ts_errf(err, errlen, "HTTP client: %s", ts_strerror(rc));
        return rc;
    }
    w->client_inited = true;
    w->handles++;
    if ((rc = uv_check_init(&w->loop, &w->check))) {
        ts_errf(err, errlen, "check handle: %s", uv_strerror(rc));
        return rc;
    }
    (void)uv_idle_init(&w->loop, &w->rx_idle); /* cannot fail */
    w->rx_idle.data = w;
    w->check.data = w;
    w->check_inited = true;
    w->handles += 2;
    if ((rc = uv_check_start(&w->check, on_check))) {
        ts_errf(err, errlen, "check handle: %s", uv_strerror(rc));
        return rc;
    }
    return 0;
}
