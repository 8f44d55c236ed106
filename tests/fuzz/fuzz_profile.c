/*
 * Fuzzes the profile parsers of src/sim and, with every profile they accept,
 * the engine model.
 *
 * The input is read twice: as a YAML profile file on top of the "tiny"
 * preset, and as `--set key=value` lines. Error messages must be
 * NUL-terminated within their buffer. A profile that validates must survive a
 * get/set round trip of every key unchanged; then a small workload derived
 * from the input bytes runs through an engine built from it, and every
 * request that finishes must have had exactly its output tokens, numbered
 * 0, 1, 2, ...
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim/engine.h"
#include "sim/profile.h"

#define INPUT_MAX  65536
#define REQS_MAX   16
#define STEPS_MAX  3000
#define SEQS_LIMIT 1024 /* keeps one run's memory small */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct freq {
    uint32_t output;
    uint32_t ntok;
    int finished;
    int cancelled;
};

static void on_token(void *ctx, void *req, uint32_t index, uint64_t now)
{
    struct freq *r = req;
    if (r->finished || r->cancelled || index != r->ntok)
        abort();
    r->ntok++;
}

static void on_finish(void *ctx, void *req, uint64_t now)
{
    struct freq *r = req;
    if (r->finished || r->cancelled || r->ntok != r->output)
        abort();
    r->finished = 1;
}

static const struct sim_engine_ops ops = {.on_token = on_token, .on_finish = on_finish};

static uint64_t mix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void run_engine(struct sim_profile *p, const uint8_t *data, size_t size)
{
    if (p->max_num_seqs > SEQS_LIMIT)
        p->max_num_seqs = SEQS_LIMIT; /* still <= max_num_batched_tokens */
    struct sim_engine *e = sim_engine_new(p, &ops, NULL);
    if (!e)
        abort(); /* the profile validated */
    uint64_t seed = size;
    for (size_t i = 0; i < size && i < 64; i++)
        seed = seed * 131 + data[i];
    struct freq reqs[REQS_MAX] = {0};
    int n = 1 + (int)(mix(&seed) % REQS_MAX);
    uint32_t mml = p->max_model_len;
    uint64_t now = 0;
    for (int i = 0; i < n; i++) {
        uint32_t span = mml < 4096 ? mml : 4096;
        uint32_t prompt = 1 + (uint32_t)(mix(&seed) % span);
        uint32_t room = mml - prompt + 1; /* prompt + output may reach mml + 1: -E2BIG */
        uint32_t output = 1 + (uint32_t)(mix(&seed) % (room < 64 ? room : 64));
        reqs[i].output = output;
        int rc = sim_engine_submit(e, &reqs[i], prompt, output, now);
        if (rc == -E2BIG && (uint64_t)prompt + output <= mml)
            abort(); /* validate() promises max_model_len fits */
        if (rc != 0)
            reqs[i].cancelled = 1;
    }
    for (int step = 0; step < STEPS_MAX; step++) {
        uint64_t d = sim_engine_step(e, now);
        if (d == 0)
            break;
        uint64_t r = mix(&seed);
        if (r % 97 == 0) {
            struct freq *c = &reqs[(r >> 8) % (uint64_t)n];
            if (!c->finished && !c->cancelled) {
                sim_engine_cancel(e, c);
                c->cancelled = 1;
            }
        }
        now += d;
    }
    struct sim_engine_stats st;
    sim_engine_stats(e, &st);
    if (st.running + st.waiting == 0) {
        if (st.kv_blocks_used != 0)
            abort();
        for (int i = 0; i < n; i++) {
            if (!reqs[i].cancelled && !reqs[i].finished)
                abort();
        }
    }
    sim_engine_free(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > INPUT_MAX)
        return 0;
    char err[256];
    struct sim_profile p;
    if (sim_profile_preset("tiny", &p) != 0)
        abort();

    /* As --set lines. */
    struct sim_profile q = p;
    char line[512];
    size_t pos = 0;
    for (int lines = 0; pos < size && lines < 64; lines++) {
        size_t len = 0;
        while (pos < size && data[pos] != '\n' && len < sizeof(line) - 1)
            line[len++] = (char)data[pos++];
        while (pos < size && data[pos] != '\n')
            pos++;
        pos++;
        line[len] = '\0';
        memset(err, 'x', sizeof(err));
        if (sim_profile_set_kv(&q, line, err, sizeof(err)) != 0 && !memchr(err, '\0', sizeof(err)))
            abort();
    }

    /* As a YAML file. */
    memset(err, 'x', sizeof(err));
    int rc = sim_profile_load_yaml_mem(&p, "fuzz.yaml", (const char *)data, size, err, sizeof(err));
    if (!memchr(err, '\0', sizeof(err)))
        abort();
    if (rc != 0 || sim_profile_validate(&p, err, sizeof(err)) != 0)
        return 0;

    const char *const *keys = sim_profile_keys();
    for (int i = 0; keys[i]; i++) {
        char text[160];
        struct sim_profile r = p;
        if (sim_profile_get(&p, keys[i], text, sizeof(text)) != 0 ||
            sim_profile_set(&r, keys[i], text, err, sizeof(err)) != 0 ||
            memcmp(&r, &p, sizeof(p)) != 0)
            abort();
    }
    run_engine(&p, data, size);
    return 0;
}
