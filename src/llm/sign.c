#include "sign.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>

static int mac_of(const unsigned char *key, size_t key_len, const unsigned char prev[32],
                  uint64_t seq, const char *data, size_t len, unsigned char out[32])
{
    unsigned char be[8];
    for (int i = 0; i < 8; i++)
        be[i] = (unsigned char)(seq >> (56 - 8 * i));
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    if (!mac)
        return -EIO;
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(mac);
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string("digest", (char *)"SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    size_t n = 0;
    int ok = ctx && EVP_MAC_init(ctx, key, key_len, params) && EVP_MAC_update(ctx, prev, 32) &&
             EVP_MAC_update(ctx, be, 8) && EVP_MAC_update(ctx, (const unsigned char *)data, len) &&
             EVP_MAC_final(ctx, out, &n, 32) && n == 32;
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(mac);
    return ok ? 0 : -EIO;
}

static void to_hex(const unsigned char *b, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[2 * n] = '\0';
}

static int from_hex(const char *s, unsigned char out[32])
{
    for (int i = 0; i < 64; i++) {
        char c = s[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0)
            return -1;
        if (i % 2 == 0)
            out[i / 2] = (unsigned char)(v << 4);
        else
            out[i / 2] |= (unsigned char)v;
    }
    return 0;
}

int chunk_signer_init(struct chunk_signer *s, const void *key, size_t key_len)
{
    if (key_len == 0 || key_len > SIGN_KEY_MAX)
        return -EINVAL;
    memset(s, 0, sizeof(*s));
    memcpy(s->key, key, key_len);
    s->key_len = key_len;
    return 0;
}

int chunk_sign(struct chunk_signer *s, const char *data, size_t len, char id[SIGN_ID_MAX])
{
    unsigned char mac[32];
    int rc = mac_of(s->key, s->key_len, s->prev, s->seq, data, len, mac);
    if (rc)
        return rc;
    char prev_hex[65], mac_hex[65];
    to_hex(s->prev, 32, prev_hex);
    to_hex(mac, 32, mac_hex);
    snprintf(id, SIGN_ID_MAX, "%llu.%s.%s", (unsigned long long)s->seq, prev_hex, mac_hex);
    memcpy(s->prev, mac, 32);
    s->seq++;
    return 0;
}

int chunk_verifier_init(struct chunk_verifier *v, const void *key, size_t key_len)
{
    if (key_len == 0 || key_len > SIGN_KEY_MAX)
        return -EINVAL;
    memset(v, 0, sizeof(*v));
    memcpy(v->key, key, key_len);
    v->key_len = key_len;
    return 0;
}

/* The window remembers the 64 SEQs below next_seq: bit i is SEQ next_seq-1-i. */
static bool seen(const struct chunk_verifier *v, uint64_t seq)
{
    uint64_t back = v->next_seq - 1 - seq;
    return back < 64 && (v->seen_mask >> back) & 1;
}

static void mark_seen(struct chunk_verifier *v, uint64_t seq)
{
    uint64_t back = v->next_seq - 1 - seq;
    if (back < 64)
        v->seen_mask |= 1ull << back;
}

enum chunk_verdict chunk_verify(struct chunk_verifier *v, const char *id, size_t id_len,
                                const char *data, size_t len)
{
    /* SEQ.PREV.MAC */
    uint64_t seq = 0;
    size_t i = 0;
    while (i < id_len && i < 20 && id[i] >= '0' && id[i] <= '9')
        seq = seq * 10 + (uint64_t)(id[i++] - '0');
    unsigned char prev[32], mac[32], want[32];
    if (i == 0 || id_len != i + 1 + 64 + 1 + 64 || id[i] != '.' || id[i + 65] != '.' ||
        from_hex(id + i + 1, prev) || from_hex(id + i + 66, mac)) {
        v->unsigned_events++;
        return CHUNK_UNSIGNED;
    }
    if (mac_of(v->key, v->key_len, prev, seq, data, len, want) || memcmp(want, mac, 32)) {
        v->forged++;
        return CHUNK_FORGED;
    }
    if (seq < v->next_seq) {
        if (seen(v, seq)) {
            v->duplicates++;
            return CHUNK_DUPLICATE;
        }
        mark_seen(v, seq);
        v->reorders++;
        if (v->missing)
            v->missing--;
        return CHUNK_REORDER;
    }
    enum chunk_verdict verdict = CHUNK_OK;
    if (seq > v->next_seq || (seq > 0 && memcmp(prev, v->last, 32))) {
        verdict = CHUNK_GAP;
        v->gaps++;
        v->missing += seq - v->next_seq;
    } else {
        v->ok++;
    }
    uint64_t shift = seq + 1 - v->next_seq;
    v->seen_mask = shift >= 64 ? 0 : v->seen_mask << shift;
    v->next_seq = seq + 1;
    mark_seen(v, seq);
    memcpy(v->last, mac, 32);
    return verdict;
}
