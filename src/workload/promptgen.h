/*
 * promptgen.h - deterministic prompt generation from a prompt schema, and
 * context-window-aware assembly of chat requests.
 *
 * PROMPT SCHEMA
 *
 * A schema (struct promptgen_cfg, filled by the scenario parser) is a list of
 * intents. Each intent has a weight, one or more templates and the slots its
 * templates refer to:
 *
 *   intent "support", weight 3, system "You are a support agent.",
 *     templates: "My {{product}} broke after {{ days }} days. {{context}}"
 *     slots:     product = [router (weight 5), modem (weight 1)]
 *                days    = [2, 5, 30]
 *     input:     lognormal:800,0.5   (target tokens of the user message)
 *
 * Templates: `{{name}}` is replaced by a value of the intent's slot `name`
 * (blanks inside the braces are allowed: `{{ name }}`). Names are 1 to
 * PROMPTGEN_MAX_NAME bytes of [A-Za-z0-9_.-]. The builtin `{{context}}`
 * marks where padding text goes (at most once per template); no slot may be
 * called "context". There is no escape for a literal "{{"; a "{{" without a
 * "}}" after it is an error, a lone "}}" is plain text. Slot values are
 * inserted as they are (a "{{" inside a value is not expanded).
 *
 * Padding: when the intent has an input distribution, a length N is drawn
 * (clamped to 1..PROMPTGEN_MAX_INPUT_TOKENS). If the rendered template counts
 * fewer than N tokens, text of the built-in corpus (workload/corpus.h, read in a
 * circle from a drawn word) is inserted at `{{context}}` - or, in a template
 * without it, appended after "\n\n" - so that the user text counts exactly N
 * tokens by the counter. Token counts of joined texts need not add up (a
 * blank line at the end of the padding merges with a line end after it, BPE
 * merges across the seam), so the cut is counted and adjusted; when the seam
 * makes N unreachable from the drawn word, the next words of the corpus are
 * tried (up to 8), and failing that the closest count below N is used. A template that alone counts N or more tokens is used as it
 * is, never cut. Without an input distribution `{{context}}` renders empty.
 *
 * Shared prefixes: with prefix_pool = P > 0 the generator builds P long
 * documents at init. Entry k starts with the header "k. Reference document:\n"
 * (so entries differ from their first token on, for k < 1000 with the
 * approximate counter and with tokenizers that keep 1-3 digits in one token)
 * followed by corpus text from a drawn word; its length L_k is drawn from
 * prefix_tokens with an rng seeded from (seed, k), clamped to
 * 1..PROMPTGEN_MAX_PREFIX_TOKENS, and the entry counts exactly L_k tokens by
 * the counter given to promptgen_init() (padding as above; a header longer
 * than L_k is kept whole: promptgen_prefix_tokens() tells the real count).
 * A share prefix_ratio of turns carries entry k at the start of its system
 * text, so requests with the same entry share a byte-identical prefix.
 *
 * DRAW ORDER (fixed; changing it changes every generated workload)
 *
 * promptgen_turn(g, tc, key) seeds one rng from (cfg->seed, key) and draws:
 *   1. the intent, by weight;
 *   2. the template of that intent, uniformly;
 *   3. one value for each distinct slot of that template, in the order of the
 *      slots' first appearance in the template (by the slot's weights, or
 *      uniformly); a slot used twice gets the same value both times, and
 *      slots the template does not use draw nothing;
 *   4. when the intent has an input distribution: N, then the corpus word the
 *      padding starts from (drawn even when no padding is needed);
 *   5. the output length (max_tokens) from the intent's output distribution,
 *      or cfg->output, clamped to 1..PROMPTS_MAX_OUTPUT_TOKENS;
 *   6. when prefix_pool > 0: a uniform number u in [0, 1); when
 *      u < prefix_ratio, the pool entry, uniformly.
 *
 * THREADS
 *
 * After promptgen_init() a struct promptgen is read-only: any number of
 * threads may call promptgen_turn() and the getters at once. A counter from
 * tokcount_tokenizer_new() is not thread-safe, so each thread passes its own
 * (all of the same tokenizer as the one given to promptgen_init(), or the
 * pool lengths will not match the counts of turns).
 *
 * CHAT ASSEMBLY
 *
 * chat_assemble() (at the end of this file) writes a chat "messages" array
 * that fits a model's context window, trimming history and retrieved context.
 */
#ifndef TS_WORKLOAD_PROMPTGEN_H
#define TS_WORKLOAD_PROMPTGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/dist.h"
#include "base/err.h"
#include "llm/tokcount.h"

#define PROMPTGEN_MAX_NAME          64u        /* bytes of an intent or slot name */
#define PROMPTGEN_MAX_INTENTS       4096u      /* intents of a schema */
#define PROMPTGEN_MAX_TEMPLATES     65536u     /* templates of an intent */
#define PROMPTGEN_MAX_SLOTS         256u       /* slots of an intent */
#define PROMPTGEN_MAX_VALUES        1000000u   /* values of a slot (and lines of a slot file) */
#define PROMPTGEN_MAX_VALUE         65536u     /* bytes of a slot value (and of a file line) */
#define PROMPTGEN_MAX_TEMPLATE      (1u << 20) /* bytes of a template or system prompt */
#define PROMPTGEN_MAX_INPUT_TOKENS  (1u << 20) /* drawn input lengths are clamped to 1..this */
#define PROMPTGEN_MAX_PREFIX_POOL   100000u    /* entries of the shared-prefix pool */
#define PROMPTGEN_MAX_PREFIX_TOKENS (1u << 20) /* drawn entry lengths: 1..this */
#define PROMPTGEN_MAX_POOL_BYTES    ((size_t)1 << 30)  /* all pool entries together */
#define PROMPTGEN_MAX_TEXT          ((size_t)64 << 20) /* bytes of one generated text */

/* Values for {{name}} in templates. */
struct promptgen_slot {
    char *name;
    char **values; /* n >= 1 valid UTF-8 strings */
    size_t n;
    double *weights; /* NULL: uniform; else n finite weights >= 0, not all 0 */
};

struct promptgen_intent {
    char *name;       /* unique within the schema */
    double weight;    /* finite, > 0 */
    char *system;     /* NULL: the schema's system prompt */
    char **templates; /* >= 1, chosen uniformly */
    size_t ntemplates;
    struct promptgen_slot *slots;
    size_t nslots;
    struct dist input; /* target tokens of the user message */
    bool has_input;
    struct dist output; /* max_tokens; without it cfg->output */
    bool has_output;
};

/*
 * A schema. Every pointer inside is owned (ts_malloc'd) and every string is
 * NUL-terminated valid UTF-8. A zeroed struct is empty.
 */
struct promptgen_cfg {
    char *system; /* default system prompt or NULL */
    struct promptgen_intent *intents;
    size_t nintents;    /* >= 1 */
    struct dist output; /* default output tokens */
    /* shared prefixes: a pool of long documents reused by a share of turns */
    uint32_t prefix_pool;      /* 0 = off */
    struct dist prefix_tokens; /* length of each pool entry */
    double prefix_ratio;       /* 0..1: share of turns that carry a pool prefix */
    uint64_t seed;
};

/* Frees every string, array and distribution inside c and zeroes it. NULL is a no-op. */
void promptgen_cfg_release(struct promptgen_cfg *c);

/*
 * Reads the values of slot s from the file at path: one value per line; empty
 * lines, lines of blanks and lines whose first non-blank byte is '#' are
 * skipped; a CR before the line end is dropped. A line is either the value
 * itself, or "value<TAB>weight" when it holds a tab: the part after the last
 * tab is the weight (a finite number >= 0, blanks around it allowed) and the
 * value (not empty) is what comes before. Lines without a weight weigh 1;
 * when no line has one, s->weights stays NULL (uniform). Values must be valid
 * UTF-8 without NUL bytes. Limits: PROMPTGEN_MAX_VALUES lines (skipped ones
 * included) of at most PROMPTGEN_MAX_VALUE bytes each.
 *
 * s->values and s->weights must be NULL and s->n 0 (s->name is not touched).
 * Returns 0 with at least one value in s (free it with the cfg, or with
 * promptgen_slot_release()); or, with s unchanged and a message in err
 * (truncated to errlen, err may be NULL):
 *   -errno    the file cannot be opened or read ("slots.txt: No such file or directory");
 *   TS_PARSE  a bad line or no value at all ("slots.txt:3: bad weight 'x'");
 *   TS_TOOBIG a line or the line count over the limit ("slots.txt:9: line longer than 65536 bytes");
 *   -EINVAL   s already holds values;
 *   -ENOMEM.
 * Blocking file I/O: call it while setting up.
 */
TS_MUST_CHECK int promptgen_slot_load_file(struct promptgen_slot *s, const char *path, char *err,
                                           size_t errlen);

/* Frees the name, values and weights of s and zeroes it. NULL is a no-op. */
void promptgen_slot_release(struct promptgen_slot *s);

struct promptgen_icomp; /* a compiled intent (private) */

/* A prompt generator. Embedded by its owner; fields are private. */
struct promptgen {
    struct promptgen_cfg cfg; /* moved in by promptgen_init() */
    struct promptgen_icomp *ic;
    double *intent_cum; /* cumulative intent weights */
    char **pool;        /* prefix pool entries, NUL-terminated */
    size_t *pool_len;
    uint32_t *pool_tokens;
    uint32_t *starts; /* offsets of the corpus' word starts */
    size_t nstarts;
    const char *corpus;
    size_t corpus_len;
};

/*
 * Takes ownership of everything in *cfg (moves it into g and zeroes *cfg,
 * whatever the outcome), validates it, compiles the templates and builds the
 * prefix pool, counting tokens with tc (NULL: the approximate counter; only
 * used during the call).
 *
 * Returns 0 (release g with promptgen_release()), or, with g empty (releasing
 * it is harmless) and a message in err (truncated to errlen; err may be NULL):
 *   -EINVAL   an invalid schema (no intent, a bad weight, a duplicate name, an
 *             empty slot or template, invalid UTF-8, a prefix_ratio outside
 *             [0, 1], a limit above exceeded, a bad placeholder), e.g.
 *               intent 'support': template 2: unknown placeholder '{{prodcut}}';
 *                 did you mean 'product'?     (one line)
 *               intent 'support': template 1: '{{' at byte 7 is not closed by '}}'
 *             Templates are numbered from 1, bytes from 0.
 *   TS_TOOBIG the prefix pool would exceed PROMPTGEN_MAX_POOL_BYTES;
 *   -ENOMEM.
 * Building a large pool costs a few token counts of every entry: call it while
 * setting up.
 */
TS_MUST_CHECK int promptgen_init(struct promptgen *g, struct promptgen_cfg *cfg,
                                 const struct tokcount *tc, char *err, size_t errlen);

/* Frees everything g holds and zeroes it. NULL is a no-op. */
void promptgen_release(struct promptgen *g);

/* One generated user turn. */
struct promptgen_turn {
    uint32_t intent;         /* index of the intent */
    uint32_t template_index; /* index of the template within the intent */
    int32_t prefix;          /* pool entry used, -1 none */
    /* Owned (ts_malloc'd, NUL-terminated); NULL when there is none: the prefix
     * entry, "\n\n" and the system prompt, or just the one that is present. */
    char *system;
    size_t system_len;
    char *user; /* owned, NUL-terminated, never NULL after success */
    size_t user_len;
    uint32_t user_tokens;   /* count of user by the tc given to promptgen_turn() */
    uint32_t output_tokens; /* drawn max_tokens, 1..PROMPTS_MAX_OUTPUT_TOKENS */
};

/*
 * Generates the turn of `key` (see DRAW ORDER) with g initialised by
 * promptgen_init(): the result depends only on
 * the schema, its seed and key, so the same key always gives byte-identical
 * turns. tc counts tokens (NULL: the approximate counter). Returns 0 with
 * *out filled (promptgen_turn_release() it), or TS_TOOBIG (a text over
 * PROMPTGEN_MAX_TEXT) or -ENOMEM with *out zeroed (prefix -1).
 */
TS_MUST_CHECK int promptgen_turn(const struct promptgen *g, const struct tokcount *tc, uint64_t key,
                                 struct promptgen_turn *out);

/* Frees the texts of t and zeroes it. NULL is a no-op. */
void promptgen_turn_release(struct promptgen_turn *t);

/* Number of intents. */
size_t promptgen_nintents(const struct promptgen *g);

/* Name of intent i (owned by g), or NULL when i is out of range. */
const char *promptgen_intent_name(const struct promptgen *g, uint32_t i);

/* Number of prefix pool entries (cfg->prefix_pool). */
uint32_t promptgen_prefix_count(const struct promptgen *g);

/* Text of pool entry k (owned by g, NUL-terminated) with its length in *len
 * (when len is not NULL), or NULL when k is out of range. */
const char *promptgen_prefix_text(const struct promptgen *g, uint32_t k, size_t *len);

/* Token count of pool entry k by the init counter (0 when out of range). */
uint32_t promptgen_prefix_tokens(const struct promptgen *g, uint32_t k);

/*
 * CONTEXT-WINDOW-AWARE CHAT ASSEMBLY
 *
 * chat_assemble() appends to out a compact JSON array of messages:
 *
 *   [{"role":"system","content":S},H1,...,Hn,{"role":"user","content":U}]
 *
 * with S = system (the message is left out when system is NULL), the history
 * messages Hi in order, and U = user, or, when context is not NULL and not
 * empty, "Context:\n" + context + "\n\n" + user. Strings are escaped by
 * jansson and must be valid UTF-8.
 *
 * Tokens are counted as OpenAI's cookbook counts them (workload/prompts.h): each
 * message costs CHAT_TOKENS_PER_MESSAGE + tokens(role) + tokens(content), the
 * request adds CHAT_TOKENS_PER_REPLY; tokens by tc (NULL: approximate).
 *
 * Budget = context_tokens - margin - output_tokens (0 when that is negative).
 * While the request counts more than the budget:
 *   1. the oldest history is dropped a unit at a time; a unit is the oldest
 *      kept message and every following message up to the next "user" one
 *      (a user question with its assistant answer, and any tool messages), so
 *      the kept history starts with a user message and stays paired;
 *   2. then the retrieved context is cut from its end at a token boundary
 *      (tokcount_prefix); a context cut to nothing is left out with its
 *      "Context:\n" and "\n\n".
 * The system prompt and the current user instruction are never trimmed; if
 * the request is still over the budget it is written anyway with res->over.
 * context_tokens 0 (or cfg NULL) means unlimited: nothing is trimmed.
 * Pure: no I/O, no shared state; thread-safe with a thread-safe tc.
 */
struct chat_msg {
    const char *role;    /* NUL-terminated */
    const char *content; /* len bytes */
    size_t len;
};

/*
 * A model's chat template, to count a request's tokens exactly instead of by
 * the per-message overhead above: each message costs the tokens of
 * `message` with "{role}" and "{content}" replaced (the whole rendered text
 * counted at once, so tokens that cross the boundaries count right), and the
 * request adds the tokens of `bos` + `reply` (the generation prompt). E.g.
 * Llama-3: message "<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>",
 * reply "<|start_header_id|>assistant<|end_header_id|>\n\n", bos "<|begin_of_text|>".
 * Special tokens count as one token each only with a tokenizer that knows
 * them (tokcount counts them as text otherwise).
 */
struct chat_template {
    const char *message; /* NULL: no template (the per-message overhead) */
    const char *reply;   /* may be NULL */
    const char *bos;     /* may be NULL */
};

struct assemble_cfg {
    uint32_t context_tokens;          /* the model's window; 0 = unlimited (no trimming) */
    uint32_t margin;                  /* safety margin tokens */
    uint32_t output_tokens;           /* reserved for the answer */
    const struct chat_template *tmpl; /* NULL: the per-message overhead */
};

struct assemble_result {
    uint32_t prompt_tokens;      /* of what was written, counted as above (saturates) */
    uint32_t dropped_messages;   /* history messages removed (oldest first) */
    uint32_t context_cut_tokens; /* tokens removed from the retrieved context */
    bool over;                   /* still above the budget after all trimming */
};

/*
 * Assembles a request as described above. Returns 0 with *res filled, or,
 * with out as it was and *res zeroed: TS_TOOBIG (out's cap), -EINVAL (a text
 * that is not valid UTF-8, a NULL role, system or user pointer with a length),
 * -ENOMEM. user may be NULL only with user_len 0.
 */
TS_MUST_CHECK int chat_assemble(const struct tokcount *tc, const char *system, size_t system_len,
                                const struct chat_msg *history, size_t nhistory,
                                const char *context, size_t context_len, const char *user,
                                size_t user_len, const struct assemble_cfg *cfg, struct buf *out,
                                struct assemble_result *res);

#endif
