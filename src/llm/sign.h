/*
 * sign.h - chained HMAC signatures on stream chunks (`sim --sign-chunks KEY`,
 * `run --integrity hmac`).
 *
 * The signer gives every SSE event of one stream an id field
 *     id: SEQ.PREV.MAC
 * SEQ counts events from 0; MAC = HMAC-SHA256(key, PREV || be64(SEQ) || DATA)
 * in lower-case hex, where DATA is the event's data and PREV is the MAC of
 * the previous event (64 zeros for the first). Each event carries PREV, so a
 * verifier can check every event on its own (a forged or altered event fails
 * its MAC) and check the chain (PREV must be the MAC it accepted last): a
 * missing event shows as a SEQ jump, a repeated one as a SEQ already seen,
 * a reordered one as a SEQ below the next expected. Clients that do not know
 * the scheme ignore the id field, as the SSE spec lets them.
 */
#ifndef TS_LLM_SIGN_H
#define TS_LLM_SIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define SIGN_KEY_MAX 256
#define SIGN_ID_MAX  160 /* "SEQ.PREV.MAC" with its NUL */

struct chunk_signer {
    unsigned char key[SIGN_KEY_MAX];
    size_t key_len;
    uint64_t seq;
    unsigned char prev[32];
};

/* key_len 1..SIGN_KEY_MAX; returns 0 or -EINVAL. */
TS_MUST_CHECK int chunk_signer_init(struct chunk_signer *s, const void *key, size_t key_len);
/* Writes the id of the next event (with data[0..len)) into id. 0 or -EIO. */
TS_MUST_CHECK int chunk_sign(struct chunk_signer *s, const char *data, size_t len,
                             char id[SIGN_ID_MAX]);

enum chunk_verdict {
    CHUNK_OK = 0,    /* next in the chain, MAC valid */
    CHUNK_GAP,       /* MAC valid, but SEQ skipped some events (see missing) */
    CHUNK_DUPLICATE, /* MAC valid, SEQ already accepted */
    CHUNK_REORDER,   /* MAC valid, SEQ lower than expected and not seen (it was
                     * counted missing: missing goes down by one) */
    CHUNK_FORGED,    /* MAC does not match: altered or not signed with the key */
    CHUNK_UNSIGNED,  /* no id, or not of the SEQ.PREV.MAC form */
};

struct chunk_verifier {
    unsigned char key[SIGN_KEY_MAX];
    size_t key_len;
    uint64_t next_seq;
    unsigned char last[32];
    uint64_t seen_mask; /* the 64 SEQs below next_seq: which were accepted */
    /* counts */
    uint64_t ok, gaps, missing, duplicates, reorders, forged, unsigned_events;
};

TS_MUST_CHECK int chunk_verifier_init(struct chunk_verifier *v, const void *key, size_t key_len);
/* Checks one event; counts it; returns the verdict. */
enum chunk_verdict chunk_verify(struct chunk_verifier *v, const char *id, size_t id_len,
                                const char *data, size_t len);

#endif
