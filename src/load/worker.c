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

void worker_post(struct worker *w, unsigned bits)
{
    atomic_fetch_or(&w->cmd_bits, bits);
    uv_async_send(&w->cmd);
}

/* ---- closed-loop users: a min-heap of wake-up times ---- */

static int heap_push(struct worker *w, uint64_t at, uint32_t user)
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
    w->heap[i] = (struct wake){at, user};
    return 0;
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

static bool sending_allowed(struct worker *w, uint64_t now)
{
    return !atomic_load(&w->run->stop) && now < w->run->end_send_ns;
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
    exch_start(w, index, intended, user);
}

static void on_timer(struct ptimer *t)
{
    struct worker *w = t->data;
    const struct runner_config *cfg = w->run->cfg;
    uint64_t now = ts_now_ns();
    if (!sending_allowed(w, now)) {
        stop_sending(w);
        return;
    }
    if (cfg->mode == RUNNER_OPEN) {
        while (w->next_at && w->next_at <= now + SEND_SLACK_NS) {
            if (cfg->max_concurrency &&
                w->n_inflight * w->run->nworkers * shard_n(&cfg->shard) >= cfg->max_concurrency) {
                break; /* wait for a slot; the lag shows the wait */
            }
            exch_start(w, w->next_index, w->next_at, 0);
            next_arrival(w);
            if (w->closing)
                return;
        }
        if (!w->next_at) {
            stop_sending(w);
            return;
        }
    } else {
        while (w->heap_len && w->heap[0].at_ns <= now + SEND_SLACK_NS && !w->sending_over) {
            struct wake wk = heap_pop(w);
            send_closed(w, wk.at_ns, wk.user);
        }
    }
    arm(w);
}

/* Arms the timer for the next thing to send (unless waiting for a slot). */
static void arm(struct worker *w)
{
    const struct runner_config *cfg = w->run->cfg;
    if (w->sending_over || w->closing)
        return;
    uint64_t at;
    if (cfg->mode == RUNNER_OPEN) {
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
    int rc = ptimer_start_at(&w->timer, at, on_timer);
    if (rc)
        ts_error("worker %u: timer: %s", w->index, strerror(-rc));
}

void worker_request_done(struct worker *w, struct exch *x, uint32_t user)
{
    const struct runner_config *cfg = w->run->cfg;
    uint64_t end = x->rec.end_ns;
    exch_finish(x);
    if (cfg->mode == RUNNER_CLOSED && !w->sending_over) {
        double think = cfg->think ? dist_sample(cfg->think, &w->rng) : 0;
        uint64_t at = end + (think > 0 ? (uint64_t)(think * 1e9) : 0);
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

static void on_client_closed(struct http_client *c, void *arg)
{
    struct worker *w = arg;
    w->handles--;
    ptimer_close(&w->timer, on_ptimer_closed);
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
            break;
        }
        w->users_active++;
    }
}

void *worker_main(void *arg)
{
    struct worker *w = arg;
    const struct runner_config *cfg = w->run->cfg;
    if (cfg->mode == RUNNER_OPEN) {
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
                if (w->cmd_inited)
                    uv_close((uv_handle_t *)&w->cmd, on_handle_closed);
            }
        }
        while (w->handles > 0)
            uv_run(&w->loop, UV_RUN_ONCE);
        if (uv_loop_close(&w->loop))
            ts_warn("worker %u: loop closed with open handles", w->index);
    }
    openai_decoder_release(&w->decoder);
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
    if (a->stages)
        rc = arrival_parse_stages(&w->arrival, &a->process, a->rate, a->stages, err, errlen);
    else if (a->ramp_ns)
        rc = arrival_init_ramp(&w->arrival, &a->process, a->rate, a->ramp_to, a->ramp_ns);
    else
        rc = arrival_init(&w->arrival, &a->process, a->rate);
    if (rc && !err[0])
        snprintf(err, errlen, "bad arrival process");
    /* every worker draws the same global schedule */
    rng_seed(&w->arrival_rng, w->run->cfg->seed ^ 0x61727269766c);
    return rc;
}

int worker_init(struct worker *w, struct runner *run, uint32_t index, char *err, size_t errlen)
{
    memset(w, 0, sizeof(*w));
    w->run = run;
    w->index = index;
    pthread_mutex_init(&w->mail_lock, NULL);
    openai_decoder_init(&w->decoder);
    if (quality_scratch_new(&w->qscratch)) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    rng_seed(&w->rng, run->cfg->seed + 0x9e3779b97f4a7c15ull * (index + 1));
    int rc = uv_loop_init(&w->loop);
    if (rc) {
        snprintf(err, errlen, "event loop: %s", uv_strerror(rc));
        return rc;
    }
    w->loop_inited = true;
    if ((rc = run_stats_new(&w->active)) || (rc = run_stats_new(&w->spare))) {
        snprintf(err, errlen, "out of memory");
        return rc;
    }
    if (run->cfg->mode == RUNNER_OPEN && (rc = build_arrival(w, err, errlen)))
        return rc;
    if ((rc = uv_async_init(&w->loop, &w->cmd, on_cmd))) {
        snprintf(err, errlen, "async: %s", uv_strerror(rc));
        return rc;
    }
    w->cmd.data = w;
    w->cmd_inited = true;
    w->handles++;
    if ((rc = ptimer_init(&w->loop, &w->timer))) {
        snprintf(err, errlen, "timer: %s", strerror(-rc));
        return rc;
    }
    w->timer.data = w;
    w->timer_inited = true;
    w->handles++;
    if ((rc = http_client_init(&w->client, &w->loop, &run->cfg->client))) {
        snprintf(err, errlen, "HTTP client: %s", ts_strerror(rc));
        return rc;
    }
    w->client_inited = true;
    w->handles++;
    if ((rc = uv_check_init(&w->loop, &w->check))) {
        snprintf(err, errlen, "check handle: %s", uv_strerror(rc));
        return rc;
    }
    (void)uv_idle_init(&w->loop, &w->rx_idle); /* cannot fail */
    w->rx_idle.data = w;
    w->check.data = w;
    w->check_inited = true;
    w->handles += 2;
    if ((rc = uv_check_start(&w->check, on_check))) {
        snprintf(err, errlen, "check handle: %s", uv_strerror(rc));
        return rc;
    }
    return 0;
}
