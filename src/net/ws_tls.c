/*
 * ws_tls.c - OpenSSL over memory BIOs for the WebSocket client. See ws_tls.h.
 */
#include "net/ws_tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "base/alloc.h"

struct ws_tls {
    SSL *ssl;
    BIO *rbio, *wbio; /* owned by ssl */
};

static SSL_CTX *ctx;
static pthread_once_t ctx_once = PTHREAD_ONCE_INIT;

static void ctx_make(void)
{
    ctx = SSL_CTX_new(TLS_client_method());
    if (ctx) {
        SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
        (void)SSL_CTX_set_default_verify_paths(ctx);
    }
}

/* Moves what OpenSSL wrote into out. */
static int drain(struct ws_tls *t, struct buf *out)
{
    char tmp[16384];
    int n;
    while ((n = BIO_read(t->wbio, tmp, sizeof(tmp))) > 0)
        if (buf_append(out, tmp, (size_t)n))
            return -ENOMEM;
    return 0;
}

static void ssl_err(char *err, size_t errlen, const char *what, long verify)
{
    char msg[200];
    unsigned long e = ERR_get_error();
    ERR_error_string_n(e, msg, sizeof(msg));
    if (verify != X509_V_OK)
        ts_errf(err, errlen, "%s: certificate: %s", what, X509_verify_cert_error_string(verify));
    else
        ts_errf(err, errlen, "%s: %s", what, e ? msg : "failed");
    ERR_clear_error();
}

int ws_tls_new(const char *host, bool insecure, struct buf *out, struct ws_tls **tp, char *err,
               size_t errlen)
{
    *tp = NULL;
    pthread_once(&ctx_once, ctx_make);
    struct ws_tls *t = ctx ? ts_calloc(1, sizeof(*t)) : NULL;
    if (!t) {
        ts_errf(err, errlen, "TLS: out of memory");
        return -ENOMEM;
    }
    t->ssl = SSL_new(ctx);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    if (!t->ssl || !t->rbio || !t->wbio) {
        BIO_free(t->rbio);
        BIO_free(t->wbio);
        SSL_free(t->ssl);
        ts_free(t);
        ts_errf(err, errlen, "TLS: out of memory");
        return -ENOMEM;
    }
    SSL_set_bio(t->ssl, t->rbio, t->wbio);
    SSL_set_connect_state(t->ssl);
    unsigned char addr[16];
    bool ip = inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
    if (!ip)
        (void)SSL_set_tlsext_host_name(t->ssl, host);
    if (!insecure) {
        SSL_set_verify(t->ssl, SSL_VERIFY_PEER, NULL);
        X509_VERIFY_PARAM *vp = SSL_get0_param(t->ssl);
        if (ip ? !X509_VERIFY_PARAM_set1_ip_asc(vp, host) : !SSL_set1_host(t->ssl, host)) {
            ws_tls_free(t);
            ts_errf(err, errlen, "TLS: cannot check the name '%s'", host);
            return -EIO;
        }
    }
    (void)SSL_do_handshake(t->ssl);
    if (drain(t, out)) {
        ws_tls_free(t);
        ts_errf(err, errlen, "TLS: out of memory");
        return -ENOMEM;
    }
    *tp = t;
    return 0;
}

void ws_tls_free(struct ws_tls *t)
{
    if (!t)
        return;
    SSL_free(t->ssl); /* frees the BIOs */
    ts_free(t);
}

int ws_tls_feed(struct ws_tls *t, const char *data, size_t len, struct buf *plain, struct buf *out,
                bool *ready, char *err, size_t errlen)
{
    if (len && BIO_write(t->rbio, data, (int)len) != (int)len) {
        ts_errf(err, errlen, "TLS: out of memory");
        return -EIO;
    }
    if (!SSL_is_init_finished(t->ssl)) {
        int r = SSL_do_handshake(t->ssl);
        int rc = drain(t, out);
        if (rc)
            return rc;
        if (r != 1) {
            int e = SSL_get_error(t->ssl, r);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                return 0;
            ssl_err(err, errlen, "TLS handshake", SSL_get_verify_result(t->ssl));
            return -EIO;
        }
    }
    *ready = true;
    char tmp[16384];
    for (;;) {
        int n = SSL_read(t->ssl, tmp, sizeof(tmp));
        if (n > 0) {
            if (buf_append(plain, tmp, (size_t)n))
                return -ENOMEM;
            continue;
        }
        int e = SSL_get_error(t->ssl, n);
        int rc = drain(t, out);
        if (rc)
            return rc;
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
            return 0;
        if (e == SSL_ERROR_ZERO_RETURN)
            return TS_CLOSED;
        ssl_err(err, errlen, "TLS", X509_V_OK);
        return -EIO;
    }
}

int ws_tls_write(struct ws_tls *t, const void *data, size_t len, struct buf *out)
{
    while (len > 0) {
        int n = SSL_write(t->ssl, data, len > 1u << 30 ? 1 << 30 : (int)len);
        if (n <= 0) {
            ERR_clear_error();
            return -EIO;
        }
        data = (const char *)data + n;
        len -= (size_t)n;
    }
    return drain(t, out);
}
