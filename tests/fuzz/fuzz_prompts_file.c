/*
 * Fuzzes the JSONL prompts-file parser (prompts_parse) on raw bytes, then
 * the workload built on whatever it accepted: every stored prompt must be
 * well-formed JSON of the right kind, and every request body built from the
 * file must parse as a JSON object. A rejected file must leave the struct
 * empty and name the file in its message.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "workload/prompts.h"
#include "workload/workload.h"

#define INPUT_MAX (256 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_prompts(const char *text, size_t len, unsigned flags)
{
    struct prompts p;
    char err[256] = "";
    prompts_init(&p);
    int rc = prompts_parse(&p, text, len, "fuzz.jsonl", flags, err, sizeof(err));
    if (rc != 0) {
        if (p.n != 0 || p.v != NULL || p.pool.len != 0 || strncmp(err, "fuzz.jsonl", 10) != 0)
            abort();
        return;
    }
    for (size_t i = 0; i < prompts_count(&p); i++) {
        const struct prompt_entry *e = prompts_get(&p, i);
        const char *js = prompts_json(&p, e);
        if (strlen(js) != e->json_len)
            abort();
        json_t *v = json_loadb(js, e->json_len, JSON_DECODE_ANY, NULL);
        if (!v || (e->kind == PROMPT_TEXT ? !json_is_string(v) : !json_is_array(v)))
            abort();
        if (e->kind == PROMPT_MESSAGES && (flags & PROMPTS_TEXT_ONLY))
            abort();
        json_decref(v);
        const char *ref = prompts_reference(&p, e);
        if (ref && strlen(ref) != e->ref_len)
            abort();
        if (e->max_tokens > PROMPTS_MAX_OUTPUT_TOKENS)
            abort();
    }
    prompts_release(&p);
}

static void check_workload(const char *text, size_t len, enum workload_endpoint ep, bool shuffle)
{
    struct workload_cfg cfg;
    workload_cfg_init(&cfg);
    cfg.endpoint = ep;
    cfg.model = "fuzz";
    cfg.prompts_data = text;
    cfg.prompts_len = len;
    cfg.shuffle = shuffle;
    cfg.embed_batch = 2;
    cfg.output_tokens = "uniform:1-64";
    if (ep == WORKLOAD_CHAT)
        cfg.system_prompt = "Be brief.";
    struct workload w;
    char err[256];
    if (workload_init(&w, &cfg, err, sizeof(err)) != 0)
        return;
    for (uint64_t i = 0; i < 4; i++) {
        struct work_item it;
        if (workload_item(&w, i * 977, &it) != 0)
            abort();
        json_t *body = json_loadb(it.body, it.body_len, 0, NULL);
        if (!json_is_object(body))
            abort();
        json_decref(body);
        work_item_release(&it);
    }
    workload_release(&w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > INPUT_MAX)
        return 0;
    const char *text = (const char *)data;
    check_prompts(text, size, 0);
    check_prompts(text, size, PROMPTS_TEXT_ONLY);
    unsigned sel = size ? data[size - 1] : 0;
    check_workload(text, size, (enum workload_endpoint)(sel % 3), sel & 4);
    return 0;
}
