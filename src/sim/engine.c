#include "sim/engine.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/dist.h"
#include "base/rng.h"

enum seq_state {
    SEQ_FREE = 0,
    SEQ_WAITING = 1,
    SEQ_RUNNING = 2,
    SEQ_DONE = 3, /* finished or cancelled during dispatch; recycled after it */
};

/*
 * One request. known tokens = prompt + generated; computed = tokens whose KV
 * is in the cache. While running, a step schedules `sched` of the
 * known - computed tokens still to compute; when computed reaches known, the
 * seq yields its next output token.
 */
struct sim_seq {
    void *req;
    struct sim_seq *prev, *next; /* running, waiting or limbo list; free list */
    uint32_t prompt;
    uint32_t output;
    uint32_t
        reserve; /* reserve-max: output tokens to reserve, >= output (sim_engine_set_reserve) */
    uint32_t generated;
    uint32_t computed;
    uint32_t blocks;
    uint32_t sched; /* tokens in the step in progress */
    uint32_t preemptions;
    /* prefix caching: hashes[0..nhash) of the full prompt blocks; held[0..nheld) the cached
     * blocks this seq references (always its leading blocks); one allocation */
    uint64_t *hashes;
    struct pc_block **held;
    uint32_t nhash, nheld;
    uint32_t cached; /* prompt tokens found cached at the first admission */
    uint8_t state;
    bool decoding;  /* yielded a token since its last admission */
    bool cancelled; /* gone from the caller's view: no more callbacks */
    uint64_t arrival_ns;
    uint64_t eligible_ns; /* the API server has handed it to the engine (tokenised) */
    uint64_t admitted_ns;
    uint64_t first_token_ns;
    uint64_t last_token_ns;
};

struct seq_list {
    struct sim_seq *head, *tail;
    uint32_t n;
};

enum ev_type {
    EV_TOKEN,
    EV_FINISH,
    EV_PREEMPT,
    EV_ADMIT,
};

struct sim_event {
    struct sim_seq *seq;
    uint32_t index;
    uint32_t type;
    uint64_t deliver_ns; /* EV_TOKEN: when the API server has sent it */
};

/*
 * A block of the prefix cache: the KV of one full prompt block, known by its
 * chained hash. ref counts the running seqs holding it; at ref 0 it is idle,
 * on the LRU list (head = evicted first), and counts as free.
 */
struct pc_block {
    uint64_t hash;
    uint32_t ref;
    struct pc_block *prev, *next; /* idle list; free list */
};

struct pc_list {
    struct pc_block *head, *tail;
    uint64_t n;
};

#define FREE_SEQS_MAX 1024 /* records kept for reuse; beyond, they are freed */
#define STEP_MS_MAX   1e9  /* clamp of one step (11.6 days) before the ns conversion */

struct sim_engine {
    struct sim_profile prof;
    struct sim_profile_caps caps;  /* in effect (KV may be resized) */
    struct sim_profile_caps caps0; /* from the profile */
    struct sim_engine_ops ops;
    void *ctx;

    struct seq_list running; /* admission order: tail = most recently admitted */
    struct seq_list waiting; /* FCFS; preempted seqs go to the head */
    struct seq_list limbo;   /* done during dispatch, recycled after it */
    struct sim_seq *free_seqs;
    uint32_t n_free_seqs;

    struct sim_seq **slots; /* req -> seq, open addressing, linear probing */
    size_t nslots;          /* power of two */
    size_t nused;

    uint64_t blocks_used; /* blocks held by running seqs, a shared cached block once */

    /* prefix cache: hash -> block (open addressing, linear probing) */
    struct pc_block **pc_slots;
    size_t pc_nslots; /* power of two, 0 until the first insert */
    size_t pc_n;      /* blocks in the cache, held or idle */
    struct pc_list pc_idle;
    struct pc_block *pc_free; /* spare records, at most the peak of pc_n */
    uint64_t pc_queries, pc_hits, pc_evictions;

    bool busy;
    uint64_t step_start;
    uint64_t step_end; /* without a stall */
    uint64_t step_ns;
    uint32_t batch_tokens;
    uint32_t batch_seqs;
    uint64_t stall_until;
    uint64_t ready_at;
    uint64_t api_free_ns; /* the API server's serial queue is busy until then */
    uint32_t round_steps; /* steps of the round in progress (multi-step), 0 if idle */

    struct sim_event *ev;
    size_t nev, ev_cap;
    bool dispatching;

    struct rng rng;
    struct dist jitter; /* truncnormal(1, sigma) cut at 1 +- 3 sigma; unused if sigma 0 */

    uint64_t preemptions_total;
    uint64_t generation_tokens_total;
    uint64_t prompt_tokens_total;
    uint64_t prefill_tokens_total;
    uint64_t steps_total;
    uint64_t requests_finished;
    uint64_t requests_cancelled;
    uint64_t requests_rejected;
};

/* ---- lists ---- */

static void list_push_tail(struct seq_list *l, struct sim_seq *s)
{
    s->next = NULL;
    s->prev = l->tail;
    if (l->tail)
        l->tail->next = s;
    else
        l->head = s;
    l->tail = s;
    l->n++;
}

static void list_push_head(struct seq_list *l, struct sim_seq *s)
{
    s->prev = NULL;
    s->next = l->head;
    if (l->head)
        l->head->prev = s;
    else
        l->tail = s;
    l->head = s;
    l->n++;
}

static void list_remove(struct seq_list *l, struct sim_seq *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        l->head = s->next;
    if (s->next)
        s->next->prev = s->prev;
    else
        l->tail = s->prev;
    s->prev = s->next = NULL;
    l->n--;
}

/* ---- req -> seq map ---- */

static size_t ptr_hash(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

/* Slot index of req, or SIZE_MAX. */
static size_t map_find(const struct sim_engine *e, const void *req)
{
    size_t mask = e->nslots - 1;
    for (size_t i = ptr_hash(req) & mask;; i = (i + 1) & mask) {
        if (!e->slots[i])
            return SIZE_MAX;
        if (e->slots[i]->req == req)
            return i;
    }
}

static void map_put(struct sim_seq **slots, size_t nslots, struct sim_seq *s)
{
    size_t mask = nslots - 1;
    size_t i = ptr_hash(s->req) & mask;
    while (slots[i])
        i = (i + 1) & mask;
    slots[i] = s;
}

static int map_insert(struct sim_engine *e, struct sim_seq *s)
{
    if ((e->nused + 1) * 2 > e->nslots) {
        size_t n = e->nslots * 2;
        struct sim_seq **slots = ts_calloc(n, sizeof(*slots));
        if (!slots)
            return -ENOMEM;
        for (size_t i = 0; i < e->nslots; i++) {
            if (e->slots[i])
                map_put(slots, n, e->slots[i]);
        }
        ts_free(e->slots);
        e->slots = slots;
        e->nslots = n;
    }
    map_put(e->slots, e->nslots, s);
    e->nused++;
    return 0;
}

/* Backward-shift deletion keeps probe chains intact without tombstones. */
static void map_remove_at(struct sim_engine *e, size_t i)
{
    size_t mask = e->nslots - 1;
    e->slots[i] = NULL;
    e->nused--;
    for (size_t j = (i + 1) & mask; e->slots[j]; j = (j + 1) & mask) {
        size_t home = ptr_hash(e->slots[j]->req) & mask;
        /* Move j back to the hole at i unless its home lies cyclically in (i, j]. */
        bool stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) {
            e->slots[i] = e->slots[j];
            e->slots[j] = NULL;
            i = j;
        }
    }
}

/* ---- records ---- */

static struct sim_seq *seq_get(struct sim_engine *e)
{
    struct sim_seq *s = e->free_seqs;
    if (s) {
        e->free_seqs = s->next;
        e->n_free_seqs--;
    } else {
        s = ts_malloc(sizeof(*s));
        if (!s)
            return NULL;
    }
    memset(s, 0, sizeof(*s));
    return s;
}

static void seq_put(struct sim_engine *e, struct sim_seq *s)
{
    ts_free(s->hashes);
    s->hashes = NULL;
    s->held = NULL;
    s->nhash = s->nheld = 0;
    if (e->n_free_seqs >= FREE_SEQS_MAX) {
        ts_free(s);
        return;
    }
    s->state = SEQ_FREE;
    s->req = NULL;
    s->next = e->free_seqs;
    e->free_seqs = s;
    e->n_free_seqs++;
}

static uint64_t blocks_for(const struct sim_engine *e, uint64_t tokens)
{
    return (tokens + e->prof.block_size - 1) / e->prof.block_size;
}

/* Blocks not held by a running seq: empty ones and idle cached ones (evicted on demand). */
static uint64_t free_blocks(const struct sim_engine *e)
{
    return e->caps.kv_blocks > e->blocks_used ? e->caps.kv_blocks - e->blocks_used : 0;
}

/* ---- prefix cache ---- */

static size_t pc_find_slot(const struct sim_engine *e, uint64_t hash)
{
    if (!e->pc_nslots)
        return SIZE_MAX;
    size_t mask = e->pc_nslots - 1;
    for (size_t i = rng_mix64(hash) & mask;; i = (i + 1) & mask) {
        if (!e->pc_slots[i])
            return SIZE_MAX;
        if (e->pc_slots[i]->hash == hash)
            return i;
    }
}

static struct pc_block *pc_find(const struct sim_engine *e, uint64_t hash)
{
    size_t i = pc_find_slot(e, hash);
    return i == SIZE_MAX ? NULL : e->pc_slots[i];
}

static void pc_put(struct pc_block **slots, size_t nslots, struct pc_block *b)
{
    size_t mask = nslots - 1;
    size_t i = rng_mix64(b->hash) & mask;
    while (slots[i])
        i = (i + 1) & mask;
    slots[i] = b;
}

/* Adds b (its hash not in the table). 0 or -ENOMEM (then nothing changed). */
static int pc_insert(struct sim_engine *e, struct pc_block *b)
{
    if ((e->pc_n + 1) * 2 > e->pc_nslots) {
        size_t n = e->pc_nslots ? e->pc_nslots * 2 : 1024;
        struct pc_block **slots = ts_calloc(n, sizeof(*slots));
        if (!slots)
            return -ENOMEM;
        for (size_t i = 0; i < e->pc_nslots; i++) {
            if (e->pc_slots[i])
                pc_put(slots, n, e->pc_slots[i]);
        }
        ts_free(e->pc_slots);
        e->pc_slots = slots;
        e->pc_nslots = n;
    }
    pc_put(e->pc_slots, e->pc_nslots, b);
    e->pc_n++;
    return 0;
}

/* Backward-shift deletion, as for the req map. */
static void pc_remove_at(struct sim_engine *e, size_t i)
{
    size_t mask = e->pc_nslots - 1;
    e->pc_slots[i] = NULL;
    e->pc_n--;
    for (size_t j = (i + 1) & mask; e->pc_slots[j]; j = (j + 1) & mask) {
        size_t home = rng_mix64(e->pc_slots[j]->hash) & mask;
        bool stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) {
            e->pc_slots[i] = e->pc_slots[j];
            e->pc_slots[j] = NULL;
            i = j;
        }
    }
}

static void pc_idle_push(struct pc_list *l, struct pc_block *b)
{
    b->next = NULL;
    b->prev = l->tail;
    if (l->tail)
        l->tail->next = b;
    else
        l->head = b;
    l->tail = b;
    l->n++;
}

static void pc_idle_remove(struct pc_list *l, struct pc_block *b)
{
    if (b->prev)
        b->prev->next = b->next;
    else
        l->head = b->next;
    if (b->next)
        b->next->prev = b->prev;
    else
        l->tail = b->prev;
    b->prev = b->next = NULL;
    l->n--;
}

/*
 * Idle cached blocks occupy free blocks until they are needed: evicts the
 * least recently used ones while held plus idle blocks exceed the cache.
 */
static void pc_make_room(struct sim_engine *e)
{
    while (e->pc_idle.n && e->blocks_used + e->pc_idle.n > e->caps.kv_blocks) {
        struct pc_block *b = e->pc_idle.head;
        pc_idle_remove(&e->pc_idle, b);
        size_t i = pc_find_slot(e, b->hash);
        assert(i != SIZE_MAX);
        pc_remove_at(e, i);
        b->next = e->pc_free;
        e->pc_free = b;
        e->pc_evictions++;
    }
}

/* Takes a reference on b for a seq; an idle block leaves the LRU list and is in use again. */
static void pc_ref(struct sim_engine *e, struct pc_block *b)
{
    if (b->ref++ == 0) {
        pc_idle_remove(&e->pc_idle, b);
        e->blocks_used++;
    }
}

/*
 * Frees the KV blocks of s: its own blocks at once, its cached ones when no
 * other seq holds them (they stay cached, idle). Like vLLM, the last blocks
 * of the prompt are queued for eviction before the first ones.
 */
static void seq_release_blocks(struct sim_engine *e, struct sim_seq *s)
{
    e->blocks_used -= s->blocks - s->nheld;
    for (uint32_t i = s->nheld; i-- > 0;) {
        struct pc_block *b = s->held[i];
        if (--b->ref == 0) {
            e->blocks_used--;
            pc_idle_push(&e->pc_idle, b);
        }
    }
    s->nheld = 0;
    s->blocks = 0;
}

/*
 * The cached prefix of s if it were admitted now: its longest run of leading
 * blocks in the cache, stopping before the last known token (which is always
 * computed, to yield a token). Fills s->held[0..n) without taking references.
 */
static uint32_t pc_lookup(const struct sim_engine *e, struct sim_seq *s)
{
    uint64_t known = (uint64_t)s->prompt + s->generated;
    uint64_t limit = (known - 1) / e->prof.block_size;
    if (limit > s->nhash)
        limit = s->nhash;
    uint32_t n = 0;
    while (n < limit) {
        struct pc_block *b = pc_find(e, s->hashes[n]);
        if (!b)
            break;
        s->held[n++] = b;
    }
    return n;
}

/*
 * Puts the full prompt blocks s has computed into the cache (its own block
 * becomes the cached one; if another seq cached the same block meanwhile, s
 * shares that one and frees its copy). Out of memory: the rest stay private.
 */
static void pc_commit(struct sim_engine *e, struct sim_seq *s)
{
    uint32_t full = (s->computed < s->prompt ? s->computed : s->prompt) / e->prof.block_size;
    if (full > s->nhash)
        full = s->nhash;
    while (s->nheld < full) {
        uint64_t h = s->hashes[s->nheld];
        struct pc_block *b = pc_find(e, h);
        if (b) {
            if (b->ref++ == 0)
                pc_idle_remove(&e->pc_idle, b); /* it was free; our copy is freed instead */
            else
                e->blocks_used--; /* our copy is freed, the shared one was counted */
        } else {
            b = e->pc_free;
            if (b)
                e->pc_free = b->next;
            else if (!(b = ts_malloc(sizeof(*b))))
                return;
            memset(b, 0, sizeof(*b));
            b->hash = h;
            b->ref = 1;
            if (pc_insert(e, b) != 0) {
                b->next = e->pc_free;
                e->pc_free = b;
                return;
            }
        }
        s->held[s->nheld++] = b;
    }
}

static void pc_free_all(struct sim_engine *e)
{
    for (size_t i = 0; i < e->pc_nslots; i++)
        ts_free(e->pc_slots[i]);
    ts_free(e->pc_slots);
    while (e->pc_free) {
        struct pc_block *b = e->pc_free;
        e->pc_free = b->next;
        ts_free(b);
    }
}

static void ev_push(struct sim_engine *e, struct sim_seq *s, enum ev_type type, uint32_t index)
{
    /* ev_cap bounds one dispatch: (steps + 1) per running seq + preemptions + admissions. */
    assert(e->nev < e->ev_cap);
    e->ev[e->nev++] = (struct sim_event){.seq = s, .index = index, .type = type};
}

static uint32_t sched_steps(const struct sim_profile *p)
{
    return p->num_scheduler_steps > 1 ? p->num_scheduler_steps : 1;
}

/* Time through the API server's serial queue: starts at max(now, free), takes cost_ms. */
static uint64_t api_queue(struct sim_engine *e, uint64_t now, double cost_ms)
{
    if (!(cost_ms > 0))
        return now;
    uint64_t start = e->api_free_ns > now ? e->api_free_ns : now;
    e->api_free_ns = start + (uint64_t)llround(cost_ms * 1e6);
    return e->api_free_ns;
}

/* ---- lifecycle ---- */

struct sim_engine *sim_engine_new(const struct sim_profile *p, const struct sim_engine_ops *ops,
                                  void *ctx)
{
    if (!p || !ops || (!ops->on_token && !ops->on_token_at) || !ops->on_finish)
        return NULL;
    if (sim_profile_validate(p, NULL, 0) != 0)
        return NULL;
    struct sim_engine *e = ts_calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->prof = *p;
    if (sim_profile_derive(p, &e->caps0) != 0)
        goto out_free_engine;
    e->caps = e->caps0;
    e->ops = *ops;
    e->ctx = ctx;
    e->nslots = 64;
    e->slots = ts_calloc(e->nslots, sizeof(*e->slots));
    if (!e->slots)
        goto out_free_engine;
    e->ev_cap = (sched_steps(p) + 3) * (size_t)p->max_num_seqs + 8;
    e->ev = ts_malloc(e->ev_cap * sizeof(*e->ev));
    if (!e->ev)
        goto out_free_slots;
    rng_seed(&e->rng, p->seed);
    double sd = p->jitter_sigma;
    if (sd > 0 && dist_init_truncnormal(&e->jitter, 1.0, sd, 1.0 - 3 * sd, 1.0 + 3 * sd) != 0)
        goto out_free_ev;
    return e;

out_free_ev:
    ts_free(e->ev);
out_free_slots:
    ts_free(e->slots);
out_free_engine:
    ts_free(e);
    return NULL;
}

static void list_free(struct seq_list *l)
{
    struct sim_seq *s = l->head;
    while (s) {
        struct sim_seq *next = s->next;
        ts_free(s->hashes);
        ts_free(s);
        s = next;
    }
    l->head = l->tail = NULL;
    l->n = 0;
}

void sim_engine_free(struct sim_engine *e)
{
    if (!e)
        return;
    assert(!e->dispatching);
    list_free(&e->running);
    list_free(&e->waiting);
    list_free(&e->limbo);
    while (e->free_seqs) {
        struct sim_seq *s = e->free_seqs;
        e->free_seqs = s->next;
        ts_free(s);
    }
    pc_free_all(e);
    ts_free(e->ev);
    ts_free(e->slots);
    ts_free(e);
}

/* ---- requests ---- */

int sim_engine_submit(struct sim_engine *e, void *req, uint32_t prompt_tokens,
                      uint32_t output_tokens, uint64_t now_ns)
{
    return sim_engine_submit_prefix(e, req, prompt_tokens, output_tokens, NULL, 0, now_ns);
}

int sim_engine_submit_prefix(struct sim_engine *e, void *req, uint32_t prompt_tokens,
                             uint32_t output_tokens, const uint64_t *block_hashes,
                             uint32_t n_hashes, uint64_t now_ns)
{
    if (prompt_tokens == 0 || output_tokens == 0 || n_hashes > prompt_tokens / e->prof.block_size ||
        (n_hashes && !block_hashes))
        return -EINVAL;
    if (map_find(e, req) != SIZE_MAX)
        return -EEXIST;
    if (now_ns < e->ready_at) {
        e->requests_rejected++;
        return -EAGAIN;
    }
    uint64_t total = (uint64_t)prompt_tokens + output_tokens;
    if (total > e->prof.max_model_len ||
        blocks_for(e, prompt_tokens) + e->caps.watermark_blocks > e->caps.kv_blocks ||
        blocks_for(e, total) > e->caps.kv_blocks) {
        e->requests_rejected++;
        return -E2BIG;
    }
    if (e->prof.max_waiting && e->waiting.n >= e->prof.max_waiting) {
        e->requests_rejected++;
        return -EBUSY;
    }
    struct sim_seq *s = seq_get(e);
    if (!s)
        return -ENOMEM;
    s->req = req;
    s->prompt = prompt_tokens;
    s->output = output_tokens;
    s->arrival_ns = now_ns;
    s->eligible_ns = api_queue(
        e, now_ns, e->prof.api_ms_per_request + e->prof.api_ms_per_prompt_token * prompt_tokens);
    if (e->prof.prefix_caching && n_hashes) {
        s->hashes = ts_malloc((size_t)n_hashes * (sizeof(*s->hashes) + sizeof(*s->held)));
        if (!s->hashes) {
            seq_put(e, s);
            return -ENOMEM;
        }
        memcpy(s->hashes, block_hashes, (size_t)n_hashes * sizeof(*s->hashes));
        s->held = (struct pc_block **)(void *)(s->hashes + n_hashes);
        s->nhash = n_hashes;
    }
    if (map_insert(e, s) != 0) {
        seq_put(e, s);
        return -ENOMEM;
    }
    s->state = SEQ_WAITING;
    list_push_tail(&e->waiting, s);
    return 0;
}

int sim_engine_set_reserve(struct sim_engine *e, void *req, uint32_t max_output)
{
    size_t i = map_find(e, req);
    if (i == SIZE_MAX)
        return -ENOENT;
    struct sim_seq *s = e->slots[i];
    if (s->state != SEQ_WAITING || s->admitted_ns)
        return -EBUSY;
    uint64_t room = e->prof.max_model_len > s->prompt ? e->prof.max_model_len - s->prompt : 0;
    s->reserve = max_output < room ? max_output : (uint32_t)room;
    return 0;
}

void sim_engine_cancel(struct sim_engine *e, void *req)
{
    size_t i = map_find(e, req);
    if (i == SIZE_MAX)
        return;
    struct sim_seq *s = e->slots[i];
    map_remove_at(e, i);
    s->cancelled = true;
    switch (s->state) {
    case SEQ_RUNNING:
        list_remove(&e->running, s);
        seq_release_blocks(e, s);
        break;
    case SEQ_WAITING:
        list_remove(&e->waiting, s);
        break;
    default: /* SEQ_DONE: finished in this dispatch, already in limbo */
        return;
    }
    e->requests_cancelled++;
    if (e->dispatching) {
        /* Events of this dispatch may still point at s: recycle it after. */
        s->state = SEQ_DONE;
        list_push_tail(&e->limbo, s);
    } else {
        seq_put(e, s);
    }
}

/* ---- steps ---- */

static void preempt(struct sim_engine *e, struct sim_seq *s)
{
    list_remove(&e->running, s);
    seq_release_blocks(e, s);
    s->computed = 0;
    s->sched = 0;
    s->decoding = false;
    s->preemptions++;
    e->preemptions_total++;
    s->state = SEQ_WAITING;
    /* Victims come newest first, so pushing each to the head keeps admission order. */
    list_push_head(&e->waiting, s);
    ev_push(e, s, EV_PREEMPT, 0);
}

/* Applies the step in progress: computed tokens, output tokens, finished seqs. */
static void step_complete(struct sim_engine *e, uint64_t now)
{
    e->busy = false;
    e->steps_total += e->round_steps;
    struct sim_seq *s = e->running.head;
    while (s) {
        struct sim_seq *next = s->next;
        if (s->sched) {
            if (!s->decoding)
                e->prefill_tokens_total += s->sched;
            s->computed += s->sched;
            s->sched = 0;
            if (s->nheld < s->nhash)
                pc_commit(e, s);
            /* a decode round of k steps yields k tokens at its end (a burst) */
            while (s->computed >= s->prompt + s->generated && s->generated < s->output) {
                uint32_t index = s->generated++;
                if (index == 0) {
                    s->first_token_ns = now;
                    e->prompt_tokens_total += s->prompt;
                }
                s->last_token_ns = now;
                s->decoding = true;
                e->generation_tokens_total++;
                ev_push(e, s, EV_TOKEN, index);
                e->ev[e->nev - 1].deliver_ns = api_queue(e, now, e->prof.api_ms_per_event);
            }
            if (s->generated == s->output) {
                list_remove(&e->running, s);
                seq_release_blocks(e, s);
                s->state = SEQ_DONE;
                list_push_tail(&e->limbo, s);
                e->requests_finished++;
                ev_push(e, s, EV_FINISH, 0);
            }
        }
        s = next;
    }
}

struct batch {
    uint32_t budget; /* tokens left in the step's budget */
    uint32_t tokens; /* tokens of the first step (decodes + prefill chunks): N_new */
    uint32_t steps;  /* steps in this round: 1, or up to num_scheduler_steps for decodes only */
    uint32_t prefill_seqs;
    uint32_t prefill_tokens;
    double sum_chunk2;
    uint32_t seqs_at[SIM_SCHED_STEPS_MAX]; /* decoding seqs computing in step j of the round */
    uint64_t ctx_at[SIM_SCHED_STEPS_MAX];  /* the context tokens they attend over in step j */
};

static void batch_prefill(struct batch *b, struct sim_seq *s)
{
    uint32_t left = s->prompt + s->generated - s->computed;
    uint32_t chunk = left < b->budget ? left : b->budget;
    s->sched = chunk;
    b->budget -= chunk;
    b->tokens += chunk;
    b->prefill_seqs++;
    b->prefill_tokens += chunk;
    b->sum_chunk2 += (double)chunk * (double)chunk;
}

/* Takes one more KV block for s if one is free (evicting an idle cached one). */
static bool block_take(struct sim_engine *e, struct sim_seq *s)
{
    if (free_blocks(e) == 0)
        return false;
    s->blocks++;
    e->blocks_used++;
    pc_make_room(e);
    return true;
}

/* Pass 1: one token per decoding seq, preempting from the tail for new blocks. */
static bool schedule_decodes(struct sim_engine *e, struct batch *b)
{
    bool preempted = false;
    struct sim_seq *s = e->running.head;
    while (s && b->budget > 0) {
        if (!s->decoding) {
            s = s->next;
            continue;
        }
        uint64_t need = blocks_for(e, (uint64_t)s->computed + 1);
        bool self = false;
        while (s->blocks < need && !block_take(e, s)) {
            struct sim_seq *victim = e->running.tail;
            preempt(e, victim);
            preempted = true;
            if (victim == s) {
                self = true;
                break;
            }
        }
        if (self)
            break; /* s was the tail: nothing after it */
        s->sched = 1;
        b->budget--;
        b->tokens++;
        b->seqs_at[0]++;
        b->ctx_at[0] += (uint64_t)s->computed + 1;
        s = s->next;
    }
    return preempted;
}

/*
 * Multi-step: a batch of decodes only becomes a round of up to
 * num_scheduler_steps steps. Each seq runs min(steps, tokens it has left)
 * of them, as far as free KV blocks allow (never preempting for a later step).
 */
static void extend_round(struct sim_engine *e, struct batch *b)
{
    uint32_t n = sched_steps(&e->prof);
    if (n <= 1 || b->prefill_seqs || b->seqs_at[0] == 0)
        return;
    for (struct sim_seq *s = e->running.head; s; s = s->next) {
        if (!s->decoding || s->sched != 1)
            continue;
        uint32_t k = 1;
        while (k < n && s->generated + k < s->output) {
            if (s->blocks < blocks_for(e, (uint64_t)s->computed + k + 1) && !block_take(e, s))
                break;
            b->seqs_at[k]++;
            b->ctx_at[k] += (uint64_t)s->computed + k + 1;
            k++;
        }
        s->sched = k;
        if (k > b->steps)
            b->steps = k;
    }
}

/* KV blocks a request needs to be admitted: its known tokens, or all it may ever hold. */
static uint64_t admit_blocks(const struct sim_engine *e, const struct sim_seq *s)
{
    if (e->prof.sched_policy == SIM_SCHED_RESERVE_MAX)
        return blocks_for(e,
                          (uint64_t)s->prompt + (s->reserve > s->output ? s->reserve : s->output));
    return blocks_for(e, (uint64_t)s->prompt + s->generated);
}

/*
 * Pass 3: FCFS admission while the head has passed the API server, fits above
 * the watermark and (prefill-first) its whole prefill fits in the budget left.
 */
static void schedule_admissions(struct sim_engine *e, struct batch *b, uint64_t now)
{
    struct sim_seq *s;
    while ((s = e->waiting.head) != NULL && e->running.n < e->caps.max_seqs && b->budget > 0 &&
           s->eligible_ns <= now) {
        uint64_t need = admit_blocks(e, s);
        /* cached blocks already held by others cost nothing; idle ones leave the free pool */
        uint32_t hit = s->nhash ? pc_lookup(e, s) : 0;
        uint64_t cost = need - hit;
        for (uint32_t i = 0; i < hit; i++)
            cost += s->held[i]->ref == 0;
        if (free_blocks(e) < cost + e->caps.watermark_blocks)
            break;
        if (e->prof.sched_policy == SIM_SCHED_PREFILL_FIRST && b->prefill_tokens > 0 &&
            s->prompt + s->generated - hit * e->prof.block_size > b->budget)
            break;
        list_remove(&e->waiting, s);
        list_push_tail(&e->running, s);
        s->state = SEQ_RUNNING;
        for (uint32_t i = 0; i < hit; i++)
            pc_ref(e, s->held[i]);
        s->nheld = hit;
        s->blocks = (uint32_t)need;
        e->blocks_used += need - hit;
        pc_make_room(e);
        s->computed = hit * e->prof.block_size;
        if (e->prof.prefix_caching) {
            e->pc_queries += (uint64_t)s->prompt + s->generated;
            e->pc_hits += s->computed;
            if (s->preemptions == 0)
                s->cached = s->computed;
        }
        s->decoding = false;
        if (!s->admitted_ns)
            s->admitted_ns = now;
        batch_prefill(b, s);
        ev_push(e, s, EV_ADMIT, 0);
    }
}

/* The batch size a CUDA graph was captured for (vLLM: 1, 2, 4, then multiples of 8). */
static uint32_t graph_batch(const struct sim_profile *p, uint32_t seqs)
{
    if (!p->cuda_graph_max_batch || seqs > p->cuda_graph_max_batch || seqs <= 2)
        return seqs;
    if (seqs <= 4)
        return 4;
    return (seqs + 7) / 8 * 8;
}

/* The modelled time of a round in ms, before noise (docs/SIMULATOR.md "Step time"). */
static double round_ms(const struct sim_engine *e, const struct batch *b)
{
    const struct sim_profile *p = &e->prof;
    double ms = p->t_sched_ms_per_seq * (double)(b->seqs_at[0] + b->prefill_seqs);
    for (uint32_t j = 0; j < b->steps; j++) {
        uint32_t seqs = b->seqs_at[j] + (j == 0 ? b->prefill_seqs : 0);
        uint32_t tokens = b->seqs_at[j] + (j == 0 ? b->prefill_tokens : 0);
        if (j > 0 || b->prefill_seqs == 0)
            tokens = graph_batch(p, tokens);
        ms += p->t_fix_ms + fmax(p->t_w_ms, p->b_ms_per_token * (double)tokens) +
              e->caps.k_kv_ms_per_token * (double)b->ctx_at[j] +
              p->t_sample_ms_per_seq * (double)seqs;
    }
    return ms + p->c_pf_ms * b->sum_chunk2;
}

static uint64_t step_duration_ns(struct sim_engine *e, const struct batch *b)
{
    const struct sim_profile *p = &e->prof;
    double ms = round_ms(e, b);
    if (p->noise) {
        /* Only noisy steps draw: a seed and a sequence of steps give one sequence of times. */
        double m = p->jitter_sigma > 0 ? dist_sample(&e->jitter, &e->rng) : 1.0;
        double u = rng_uniform01(&e->rng);
        ms *= m;
        if (u < p->stall_prob)
            ms += p->stall_ms;
    }
    if (!(ms < STEP_MS_MAX))
        ms = STEP_MS_MAX;
    long long ns = llround(ms * 1e6);
    return ns < 1 ? 1 : (uint64_t)ns;
}

/* Prefill-first (vLLM V0 without chunked prefill): prefills pause every decode. */
static void schedule_prefill_first(struct sim_engine *e, struct batch *b, uint64_t now)
{
    for (struct sim_seq *s = e->running.head; s && b->budget > 0; s = s->next) {
        if (!s->decoding)
            batch_prefill(b, s);
    }
    schedule_admissions(e, b, now);
    if (b->tokens == 0)
        schedule_decodes(e, b);
}

/* Mixed (vLLM V1, TensorRT-LLM in-flight batching): decodes, then prefill chunks, then new. */
static void schedule_mixed(struct sim_engine *e, struct batch *b, uint64_t now)
{
    bool preempted = schedule_decodes(e, b);
    for (struct sim_seq *s = e->running.head; s && b->budget > 0; s = s->next) {
        if (!s->decoding)
            batch_prefill(b, s);
    }
    /* Like vLLM, no admissions in a step that had to preempt (unless it is empty). */
    if (!preempted || b->tokens == 0)
        schedule_admissions(e, b, now);
}

/* Builds the next step at `now`; leaves the engine idle if there is nothing to do. */
static void step_schedule(struct sim_engine *e, uint64_t now)
{
    struct batch b = {.budget = e->prof.max_num_batched_tokens, .steps = 1};
    if (e->prof.sched_policy == SIM_SCHED_PREFILL_FIRST)
        schedule_prefill_first(e, &b, now);
    else
        schedule_mixed(e, &b, now);
    extend_round(e, &b);

    e->batch_tokens = b.tokens;
    e->batch_seqs = b.seqs_at[0] + b.prefill_seqs;
    if (b.tokens == 0) {
        e->round_steps = 0;
        e->step_ns = 0;
        /* Only requests still in the API server: wait for the first with an empty step. */
        struct sim_seq *h = e->waiting.head;
        e->busy = h && h->eligible_ns > now;
        if (e->busy) {
            e->step_start = now;
            e->step_end = (now > e->stall_until ? now : e->stall_until) + (h->eligible_ns - now);
        }
        return;
    }
    e->busy = true;
    e->round_steps = b.steps;
    e->step_ns = step_duration_ns(e, &b);
    e->step_start = now;
    e->step_end = (now > e->stall_until ? now : e->stall_until) + e->step_ns;
}

/* Runs the callbacks collected since the last dispatch, then recycles done seqs. */
static void dispatch(struct sim_engine *e, uint64_t now)
{
    e->dispatching = true;
    for (size_t i = 0; i < e->nev; i++) {
        struct sim_event ev = e->ev[i];
        struct sim_seq *s = ev.seq;
        if (s->cancelled)
            continue;
        switch (ev.type) {
        case EV_TOKEN:
            if (e->ops.on_token_at)
                e->ops.on_token_at(e->ctx, s->req, ev.index, now, ev.deliver_ns);
            else
                e->ops.on_token(e->ctx, s->req, ev.index, now);
            break;
        case EV_FINISH:
            e->ops.on_finish(e->ctx, s->req, now);
            if (!s->cancelled) {
                size_t slot = map_find(e, s->req);
                assert(slot != SIZE_MAX);
                map_remove_at(e, slot);
                s->cancelled = true;
            }
            break;
        case EV_PREEMPT:
            if (e->ops.on_preempt)
                e->ops.on_preempt(e->ctx, s->req, now);
            break;
        case EV_ADMIT:
            if (e->ops.on_admit)
                e->ops.on_admit(e->ctx, s->req, now);
            break;
        }
    }
    e->nev = 0;
    e->dispatching = false;
    struct sim_seq *s;
    while ((s = e->limbo.head) != NULL) {
        list_remove(&e->limbo, s);
        seq_put(e, s);
    }
}

static uint64_t due(const struct sim_engine *e)
{
    return e->step_end > e->stall_until ? e->step_end : e->stall_until;
}

uint64_t sim_engine_step(struct sim_engine *e, uint64_t now_ns)
{
    assert(!e->dispatching);
    if (e->busy) {
        uint64_t d = due(e);
        if (now_ns < d)
            return d - now_ns;
        step_complete(e, now_ns);
    }
    /* A second round only when callbacks submitted work to an engine left idle. */
    for (int round = 0; round < 2; round++) {
        step_schedule(e, now_ns);
        dispatch(e, now_ns);
        if (e->busy || (e->running.n == 0 && e->waiting.n == 0))
            break;
    }
    return e->busy ? due(e) - now_ns : 0;
}

uint64_t sim_engine_next_due(const struct sim_engine *e)
{
    return e->busy ? due(e) : 0;
}

/* ---- introspection ---- */

void sim_engine_stats(const struct sim_engine *e, struct sim_engine_stats *st)
{
    memset(st, 0, sizeof(*st));
    st->running = e->running.n;
    st->waiting = e->waiting.n;
    st->kv_blocks_used = e->blocks_used;
    st->kv_blocks_total = e->caps.kv_blocks;
    st->kv_usage = e->caps.kv_blocks ? (double)e->blocks_used / (double)e->caps.kv_blocks : 0;
    st->preemptions_total = e->preemptions_total;
    st->generation_tokens_total = e->generation_tokens_total;
    st->prompt_tokens_total = e->prompt_tokens_total;
    st->prefill_tokens_total = e->prefill_tokens_total;
    st->steps_total = e->steps_total;
    st->requests_finished = e->requests_finished;
    st->requests_cancelled = e->requests_cancelled;
    st->requests_rejected = e->requests_rejected;
    st->prefix_cache_queries = e->pc_queries;
    st->prefix_cache_hits = e->pc_hits;
    st->prefix_cache_blocks = e->pc_n;
    st->prefix_cache_evictions = e->pc_evictions;
    if (e->busy) {
        st->batch_tokens = e->batch_tokens;
        st->batch_seqs = e->batch_seqs;
        st->step_ns = e->step_ns;
    }
}

int sim_engine_req_info(const struct sim_engine *e, const void *req, struct sim_req_info *info)
{
    size_t i = map_find(e, req);
    if (i == SIZE_MAX)
        return -ENOENT;
    const struct sim_seq *s = e->slots[i];
    memset(info, 0, sizeof(*info));
    info->state = s->state == SEQ_RUNNING   ? SIM_REQ_RUNNING
                  : s->state == SEQ_WAITING ? SIM_REQ_WAITING
                                            : SIM_REQ_FINISHED;
    info->prompt_tokens = s->prompt;
    info->output_tokens = s->output;
    info->generated = s->generated;
    info->preemptions = s->preemptions;
    info->cached_tokens = s->cached;
    info->arrival_ns = s->arrival_ns;
    info->admitted_ns = s->admitted_ns;
    info->first_token_ns = s->first_token_ns;
    info->last_token_ns = s->last_token_ns;
    return 0;
}

const struct sim_profile *sim_engine_profile(const struct sim_engine *e)
{
    return &e->prof;
}

void sim_engine_caps(const struct sim_engine *e, struct sim_profile_caps *caps)
{
    *caps = e->caps;
}

/* ---- admin hooks ---- */

int sim_engine_set_kv_capacity(struct sim_engine *e, uint64_t tokens, uint64_t now_ns)
{
    if (e->dispatching)
        return -EBUSY;
    uint64_t blocks = tokens ? tokens / e->prof.block_size : e->caps0.kv_blocks;
    uint64_t wm = (uint64_t)floor(e->prof.watermark * (double)blocks);
    if (blocks == 0 || blocks_for(e, e->prof.max_model_len) + wm > blocks)
        return -EINVAL;
    e->caps.kv_blocks = blocks;
    e->caps.kv_tokens = blocks * e->prof.block_size;
    e->caps.watermark_blocks = wm;
    e->caps.max_seqs = e->prof.max_num_seqs;
    if ((uint64_t)e->caps.max_seqs > blocks)
        e->caps.max_seqs = (uint32_t)blocks;
    while (e->blocks_used > blocks && e->running.tail)
        preempt(e, e->running.tail);
    pc_make_room(e);
    dispatch(e, now_ns);
    return 0;
}

void sim_engine_stall_until(struct sim_engine *e, uint64_t until_ns)
{
    /* a step started during the stall waits behind it: a shorter stall pulls it forward */
    if (e->busy && until_ns < e->stall_until && e->step_end > e->step_start + e->step_ns) {
        uint64_t from = e->step_start > until_ns ? e->step_start : until_ns;
        e->step_end = from + e->step_ns;
    }
    e->stall_until = until_ns;
}

void sim_engine_set_ready_at(struct sim_engine *e, uint64_t ready_ns)
{
    e->ready_at = ready_ns;
}

bool sim_engine_ready(const struct sim_engine *e, uint64_t now_ns)
{
    return now_ns >= e->ready_at;
}
