/*
 * tap_int.h - internals of the per-response stream tap (stream_tap.c) shared
 * with its fault families (sse_faults.c, llm_faults.c, rag_faults.c) and the
 * unit tests. Not a public interface: the proxy uses fault.h only.
 *
 * Every function here is pure: it works on bytes, jansson values and a
 * caller's rng, never on sockets or clocks.
 */
#ifndef TS_CHAOS_TAP_INT_H
#define TS_CHAOS_TAP_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/rng.h"
#include "chaos/fault.h"
#include "llm/openai_chunk.h"
#include "llm/jsonptr.h"

/* ---- JSON output (tap_json.c part of stream_tap.c) ---- */

enum tap_json_flags {
    /* print reals as the shortest text that reads back as the same float32
     * (embeddings); otherwise the shortest that reads back as the same double */
    TAP_JSON_FLOAT32 = 1 << 0,
};

/*
 * Appends v as compact JSON (no blanks, object members in their stored order,
 * which jansson keeps as parsed) to out. Strings are escaped like
 * openai_json_escape ('"', '\\', control characters; UTF-8 unchanged). Reals
 * are printed with the fewest digits that round-trip and always look like
 * reals ("1.0"). Returns 0, -ENOMEM or TS_TOOBIG (out may then hold a part).
 */
TS_MUST_CHECK int tap_json_dump(struct buf *out, const json_t *v, unsigned flags);

/* Parses len bytes as one JSON value (NUL bytes in strings allowed); returns
 * a new reference or NULL when it is not JSON. */
json_t *tap_json_load(const char *s, size_t len);

/* ---- SSE chunk rewrites (sse_faults.c) ---- */

struct openai_memo;

/* What a chunk carries, from its JSON (see tap_chunk_flags). */
enum tap_chunk_flags {
    TAP_CHUNK_TOKEN = 1 << 0,  /* a choice has non-empty content, text, reasoning or tool calls */
    TAP_CHUNK_ROLE = 1 << 1,   /* a choice carries delta.role */
    TAP_CHUNK_FINISH = 1 << 2, /* a choice has a non-null finish_reason */
    TAP_CHUNK_USAGE = 1 << 3,  /* a non-null "usage" member */
    TAP_CHUNK_ERROR = 1 << 4,  /* an "error" member or "object":"error" */
};

/* Classifies a decoded chunk object (NULL gives 0). A member that is null
 * counts as absent, as in llm/openai_chunk.h. */
unsigned tap_chunk_flags(const json_t *chunk);

/* The same flags from a chunk llm/openai_chunk.h decoded. */
unsigned tap_flags_of_chunk(const struct openai_chunk *ch);

/*
 * An event's flags without a DOM, for taps whose faults need no more than
 * them (stalls, throttles, truncations counted in tokens): decoded with d
 * and the stream's memo *memo (llm/openai_memo.h, usually no parse at all),
 * and where the decoder refuses the chunk (a known field of a wrong type),
 * from its JSON as tap_chunk_flags() reads it. Equal to
 * tap_chunk_flags(tap_json_load(data, len)) on every input (fuzz_tap_flags).
 */
unsigned tap_event_flags(struct openai_decoder *d, struct openai_memo **memo, const char *data,
                         size_t len);

/*
 * The text member of choice i that carries streamed output: delta.content
 * (chat) or text (completions), if it is a string; NULL otherwise. A
 * borrowed reference.
 */
json_t *tap_chunk_text(json_t *chunk, size_t i);

/* Sets every choices[].finish_reason that is not null to null. Returns the
 * number changed. */
size_t sse_drop_finish(json_t *chunk);

/*
 * Writes the serialized chunk with raw bytes 0xff 0xfe put inside the first
 * choice's content (or text) string, at a character boundary in its middle,
 * to out (reset first). Returns 0, TS_AGAIN when the chunk has no such
 * string (nothing written), -ENOMEM, TS_TOOBIG.
 */
TS_MUST_CHECK int sse_invalid_utf8(json_t *chunk, struct buf *out);

/* Cuts a serialized event payload in half: the first max(1, len/2) bytes
 * (len >= 2) stay; returns the new length. */
size_t sse_malformed_len(size_t len);

/* The default data of an injected error event (vLLM-like), NUL-terminated. */
extern const char SSE_ERROR_EVENT_DEFAULT[];

/*
 * The data of sse_error_event's event into out (reset first): with no text
 * SSE_ERROR_EVENT_DEFAULT; with a text, the same OpenAI error object with
 * the text as error.message (JSON-escaped), or the text itself if p->raw.
 * Returns 0, -ENOMEM or TS_TOOBIG.
 */
TS_MUST_CHECK int sse_error_data(const struct fault_params *p, struct buf *out);

/*
 * A permutation of 0..n-1 into perm (n <= 64) drawn from r that is not the
 * identity when n >= 2.
 */
void sse_shuffle_perm(size_t *perm, size_t n, struct rng *r);

/* ---- LLM semantics (llm_faults.c) ---- */

#define LLM_HALLU_HOLD_MAX 64 /* bytes of a run held for the next piece */

/* State of hallucination injection across the content of one stream. */
struct llm_hallu {
    uint64_t seed;
    double rate;
    uint64_t candidates;           /* entities and numbers seen so far */
    uint64_t replaced;             /* of which replaced */
    bool sentence_start;           /* the next word starts a sentence */
    bool prev_word;                /* the previous text ended inside a letter run */
    bool prev_digit;               /* the previous text ended inside a digit run */
    bool hold;                     /* a run at the end of a piece may be held (default) */
    char held[LLM_HALLU_HOLD_MAX]; /* the run held from the previous piece */
    size_t held_len;
    json_int_t held_index; /* the choice index the held run belongs to */
};

void llm_hallu_init(struct llm_hallu *h, uint64_t seed, double rate);

/*
 * Rewrites one piece of answer text (s, n bytes) into out (appended). The
 * candidates are whole runs, found on word boundaries: a named entity (an
 * ASCII word of 2+ letters starting with a capital, not at a sentence start
 * and not glued to non-ASCII letters) and a number (ASCII digits, with
 * groups after '.' or ',': "2,100,000", "3.14"; not glued to letters). Each
 * is replaced with probability rate by a plausible wrong one of its kind: a
 * name from a fixed list (an acronym for an all-capitals word), a year
 * (1000..2099) by another year 1..40 years away, a digit by another digit,
 * another plain number by itself times 0.5..1.5, a number with separators or
 * leading zeros by one of the same shape and first digit.
 *
 * A run that reaches the end of the piece and could go on in the next one
 * (a number, or a capitalised candidate word, shorter than
 * LLM_HALLU_HOLD_MAX) is not written: it is held and read in front of the
 * next piece, so "Fr" + "ance" is judged as "France". llm_hallu_flush
 * writes a held run when no piece follows. With h->hold false nothing is
 * held, and a run that continues one of the previous piece is left alone.
 *
 * Decisions depend only on the seed and the position of the candidate in
 * the stream, so a seed always gives the same output. Only ASCII runs are
 * replaced by ASCII, so valid UTF-8 stays valid. Returns 0, -ENOMEM,
 * TS_TOOBIG.
 */
TS_MUST_CHECK int llm_hallu_text(struct llm_hallu *h, const char *s, size_t n, struct buf *out);

/* Writes the held run, if any (as the end of the text), into out
 * (appended). Returns 0 or a negative code. */
TS_MUST_CHECK int llm_hallu_flush(struct llm_hallu *h, struct buf *out);

/*
 * Whether h holds a run that the chunk cannot carry on: a chunk that is not
 * one choice with a text of the held run's choice index. The caller then
 * writes the held run first (llm_hallu_flush into llm_text_chunk).
 */
bool llm_hallu_owes(const struct llm_hallu *h, json_t *chunk);

/*
 * Applies llm_hallu_text to every streamed text of a chunk (delta.content,
 * text) or message.content of a whole completion. A run is held only in a
 * chunk of one choice and not when last (the whole text is there: a
 * non-streamed body); with last the held run is written at the end.
 * Returns the number of strings changed, or a negative code.
 */
int llm_hallu_chunk(struct llm_hallu *h, json_t *chunk, struct buf *scratch, bool last);

/*
 * A content chunk made from a copy of tmpl (same id, object, created,
 * model): one choice of that index with delta.content (chat) or text
 * (completions) s (n bytes) and finish_reason null, no usage. NULL on
 * -ENOMEM.
 */
json_t *llm_text_chunk(const json_t *tmpl, json_int_t index, const char *s, size_t n);

/*
 * Breaks the JSON an answer forms by removing the last '}' or ']' of text s
 * (n bytes) into out (appended). Returns 0 if one was removed, TS_AGAIN if s
 * has none (out unchanged), or a negative code.
 */
TS_MUST_CHECK int llm_drop_last_closer(const char *s, size_t n, struct buf *out);

/* Whether s (n bytes) contains '}' or ']'. */
bool llm_has_closer(const char *s, size_t n);

/*
 * A chunk that ends the output with finish_reason "length", made from a copy
 * of tmpl (same id, object, created, model; choices with index 0, an empty
 * delta (chat) or text "" (completions), logprobs null). NULL on -ENOMEM.
 */
json_t *llm_length_chunk(const json_t *tmpl);

/*
 * Perturbs every embedding of an embeddings response body (data[].embedding,
 * arrays of numbers or base64 float32 strings): Gaussian noise whose L2 norm
 * is norm times the vector's norm (norm <= 0: none), then mask_rate of the
 * dimensions (rounded to the nearest count) set to 0 (chosen at random
 * without repetition). Base64 vectors are re-encoded. Returns the number of
 * vectors changed, or -ENOMEM.
 */
int llm_embeddings_perturb(json_t *root, double norm, double mask_rate, struct rng *r);

/* ---- RAG (rag_faults.c) ---- */

/*
 * RFC 6901 JSON pointer lookup: the same as llm/jsonptr.h's jsonptr_get,
 * which the RAG faults use; kept under this name for the tap's tests.
 */
static inline json_t *json_pointer_get(json_t *root, const char *ptr, size_t len)
{
    return jsonptr_get(root, ptr, len);
}

/*
 * Applies one RAG fault (rag_empty, rag_shuffle, rag_irrelevant,
 * rag_lower_scores) to the array(s) f->params.pointer addresses in root
 * (several pointers may be given, separated by ','; shuffles of several
 * arrays of the same length use the same permutation, so parallel arrays as
 * in Chroma's response stay aligned). Returns the number of arrays changed
 * (0: none found), or -ENOMEM.
 */
int rag_apply(json_t *root, const struct fault *f, uint64_t seed);

#endif
