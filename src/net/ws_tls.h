/*
 * ws_tls.h - TLS for the WebSocket client (wss://): OpenSSL over memory
 * BIOs, so the socket stays libuv's. Ciphertext read from the socket goes in
 * with ws_tls_feed(); plaintext to send goes through ws_tls_write(); both
 * leave the ciphertext to send in *out. Not for other users.
 */
#ifndef TS_NET_WS_TLS_H
#define TS_NET_WS_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"
#include "base/err.h"

struct ws_tls;

/*
 * A client session for host (SNI and, unless insecure, the certificate's
 * name and chain against the system's trust store; SSL_CERT_FILE and
 * SSL_CERT_DIR are honoured as by OpenSSL). Its ClientHello is appended to
 * out. Returns 0 with *t, or -ENOMEM / -EIO (err says why).
 */
TS_MUST_CHECK int ws_tls_new(const char *host, bool insecure, struct buf *out, struct ws_tls **t,
                             char *err, size_t errlen);
void ws_tls_free(struct ws_tls *t);

/*
 * Ciphertext from the socket: advances the handshake (*ready once it is
 * done) and appends the plaintext that came to plain, and what must be sent
 * to out. Returns 0, or -EIO with err (handshake or verification failed,
 * bad record), TS_CLOSED (the peer's close_notify).
 */
TS_MUST_CHECK int ws_tls_feed(struct ws_tls *t, const char *data, size_t len, struct buf *plain,
                              struct buf *out, bool *ready, char *err, size_t errlen);

/* Plaintext to send (the handshake must be done): its records appended to
 * out. 0, or -EIO. */
TS_MUST_CHECK int ws_tls_write(struct ws_tls *t, const void *data, size_t len, struct buf *out);

#endif
