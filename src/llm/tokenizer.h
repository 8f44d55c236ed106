/*
 * tokenizer.h - BPE tokenizers of LLMs: Hugging Face tokenizer.json and tiktoken rank files.
 *
 * Two kinds of files load into one immutable struct tokenizer:
 *
 *  - A Hugging Face tokenizer.json with model.type "BPE": vocab, merges (as
 *    "a b" strings or ["a", "b"] pairs), added_tokens, and either
 *      . byte-level BPE (GPT-2, Llama-3, Qwen2): pre_tokenizer ByteLevel
 *        (use_regex with the GPT-2 pattern) or Sequence[Split(Regex), ByteLevel];
 *        the split regex runs with PCRE2 in UTF + UCP mode; tokens are spelt
 *        with GPT-2's byte-to-unicode mapping; or
 *      . SentencePiece-style BPE (Llama-2, Mistral): normalizer
 *        Prepend("▁") + Replace(" ", "▁") (or pre_tokenizer Metaspace), no
 *        pre-tokenizer regex, byte_fallback to <0xNN> tokens.
 *    model.ignore_merges (Llama-3) is honoured. Not applied: normalizers
 *    other than the SentencePiece ones (NFC of Qwen2 is accepted and ignored:
 *    the text is taken as already normalized), post-processors (no BOS is
 *    added: callers that want one add it), added tokens' lstrip/rstrip/
 *    single_word flags. Anything else is refused with a message.
 *  - A tiktoken rank file ("<base64 token> <rank>" per line) with the
 *    pre-tokenizer pattern and special tokens of cl100k_base or o200k_base.
 *
 * Encoding splits the text at special (added) tokens when asked, cuts each
 * span with the pre-tokenizer regex, and merges each piece by rank (lowest
 * rank first, leftmost on ties) with a heap over a linked list of symbols, so
 * a piece of n bytes costs O(n log n). Results for short pieces are cached per
 * session. Invalid UTF-8 is accepted: bytes that are not part of a valid
 * sequence never match the regex and are encoded as pieces of their own.
 *
 * A struct tokenizer is read-only after loading and may be shared by threads;
 * each thread encodes through its own struct tokenizer_session (regex match
 * data, scratch memory and a 2-way cache of 16384 pieces of up to 24 bytes,
 * about 1.2 MiB: SentencePiece text, cut only at "▁" runs, has more distinct
 * pieces than regex-split text and thrashed a 4096-slot cache).
 *
 * SentencePiece text has no pre-tokenizer; when no token has a "▁" after
 * another character (true of Llama-2 and Mistral) it is cut before each "▁" run,
 * which gives the same ids, else it is merged as one piece. Decoding it
 * shows the "▁" prepended to each span after a special token, so it is not an
 * exact inverse there (nor is Hugging Face's).
 */
#ifndef TS_LLM_TOKENIZER_H
#define TS_LLM_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>
#include "base/buf.h"
#include "base/err.h"

#define TOKENIZER_MAX_FILE      (64u << 20) /* bytes of a tokenizer file */
#define TOKENIZER_MAX_VOCAB     (1u << 21)  /* token ids (max id + 1) */
#define TOKENIZER_MAX_TOKEN_LEN 4096        /* bytes of one token */
#define TOKENIZER_MAX_PATTERN   4096        /* bytes of a pre-tokenizer regex */
#define TOKENIZER_MAX_TEXT      (64u << 20) /* bytes of text per encode call */
/* Bytes merged at once (about 50 bytes of scratch each); a longer piece (a 1 MiB
   run of letters) is cut into pieces of this size, where ids may then differ. */
#define TOKENIZER_MAX_PIECE   (1u << 20)
#define TOKENIZER_MAX_SPECIAL 65536 /* added / special tokens */

struct tokenizer;
struct tokenizer_session;

enum tokenizer_kind {
    TOKENIZER_AUTO = 0, /* file_load: tokenizer.json if it starts with '{', else tiktoken
                           with the encoding guessed from the file name (o200k or cl100k) */
    TOKENIZER_HF_JSON,
    TOKENIZER_CL100K,
    TOKENIZER_O200K,
};

enum tokenizer_flags {
    /* Text equal to a special / added token is encoded as that token's id
       (leftmost, longest first). Without it all text is ordinary text. */
    TOKENIZER_SPECIAL = 1 << 0,
};

/* Ids produced by encode: caller-owned, grown as needed up to max ids. */
struct tokenizer_ids {
    uint32_t *v;
    size_t len;
    size_t cap;
    size_t max;
};
/* Empties ids and sets its cap (0 means TOKENIZER_MAX_TEXT). */
void tokenizer_ids_init(struct tokenizer_ids *ids, size_t max);
void tokenizer_ids_release(struct tokenizer_ids *ids);

/*
 * Loads a tokenizer from len bytes of tokenizer.json. Returns 0 with *out set
 * (tokenizer_free it), TS_PARSE (bad JSON, unsupported or inconsistent model;
 * err says what and where, e.g. "merges[12]: token \"x\" not in vocab"),
 * TS_TOOBIG (a limit above) or -ENOMEM.
 */
TS_MUST_CHECK int tokenizer_load_hf_json(const char *data, size_t len, struct tokenizer **out,
                                         char *err, size_t errlen);
/*
 * Loads a tiktoken rank file of kind TOKENIZER_CL100K or TOKENIZER_O200K
 * (which fixes the regex and the special tokens). Same returns; err names the
 * line of a bad entry.
 */
TS_MUST_CHECK int tokenizer_load_tiktoken(const char *data, size_t len, enum tokenizer_kind kind,
                                          struct tokenizer **out, char *err, size_t errlen);
/* Reads path (capped at TOKENIZER_MAX_FILE) and loads it as kind. Same returns,
   plus negative errno when the file cannot be read. */
TS_MUST_CHECK int tokenizer_load_file(const char *path, enum tokenizer_kind kind,
                                      struct tokenizer **out, char *err, size_t errlen);
/* Frees t; NULL is a no-op. Sessions of t must be freed first. */
void tokenizer_free(struct tokenizer *t);

/* Number of token ids (largest id + 1; some ids below may be unused). */
size_t tokenizer_vocab_size(const struct tokenizer *t);
/* Id of the token spelt exactly as the bytes s[0..n) (a special token's
   content or a decoded vocab entry), or -1. */
long tokenizer_token_id(const struct tokenizer *t, const char *s, size_t n);

/* A per-thread encoder over t (which must outlive it); NULL when out of memory. */
struct tokenizer_session *tokenizer_session_new(const struct tokenizer *t);
void tokenizer_session_free(struct tokenizer_session *s);

/*
 * Appends the ids of text[0..len) to out. Returns 0, TS_TOOBIG (text over
 * TOKENIZER_MAX_TEXT or out over its max; out then holds a prefix), -ENOMEM,
 * or TS_PARSE if the regex engine fails (err says why). Flags: enum tokenizer_flags.
 */
TS_MUST_CHECK int tokenizer_encode(struct tokenizer_session *s, const char *text, size_t len,
                                   unsigned flags, struct tokenizer_ids *out);
/* Stores in *count the number of ids encode would produce; same returns. */
TS_MUST_CHECK int tokenizer_count(struct tokenizer_session *s, const char *text, size_t len,
                                  unsigned flags, size_t *count);
/*
 * Appends the bytes of ids[0..n) to out (bytes, not necessarily valid UTF-8 when
 * a sequence is cut). SentencePiece tokenizers turn "▁" into spaces and drop
 * the one space the encoder prepended. Returns 0, -EINVAL for an id that is not
 * a token (nothing of that id is appended), or TS_TOOBIG from out.
 */
TS_MUST_CHECK int tokenizer_decode(const struct tokenizer *t, const uint32_t *ids, size_t n,
                                   struct buf *out);
#endif
