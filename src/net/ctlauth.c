/*
 * ctlauth.c - see ctlauth.h.
 */
#include "net/ctlauth.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

bool ctlauth_is_loopback(const char *host)
{
    struct in_addr v4;
    struct in6_addr v6;
    if (!host)
        return false;
    if (!strcasecmp(host, "localhost"))
        return true;
    if (inet_pton(AF_INET, host, &v4) == 1)
        return (ntohl(v4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &v6) == 1) {
        if (IN6_IS_ADDR_LOOPBACK(&v6))
            return true;
        return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
    }
    return false;
}

static bool token_valid(const char *t)
{
    size_t n = strlen(t);
    if (!n || n > CTLAUTH_TOKEN_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (t[i] <= ' ' || t[i] > '~')
            return false;
    }
    return true;
}

int ctlauth_setup(const char *what, const char *host, const char *token, bool insecure,
                  const char **token_out, char *warn, size_t warnlen, char *err, size_t errlen)
{
    if (!token) {
        token = getenv(CTLAUTH_TOKEN_ENV);
        if (token && !*token)
            token = NULL;
    }
    *token_out = NULL;
    if (warnlen)
        warn[0] = '\0';
    if (token) {
        if (!token_valid(token)) {
            ts_errf(err, errlen,
                    "the API token must be 1 to %d visible ASCII characters without spaces",
                    CTLAUTH_TOKEN_MAX);
            return -EINVAL;
        }
        *token_out = token;
        return 0;
    }
    if (ctlauth_is_loopback(host))
        return 0;
    if (!insecure) {
        ts_errf(err, errlen,
                "%s would listen on %s, which other machines can reach, without a token: "
                "give --api-token TOKEN (or set %s), bind 127.0.0.1, or accept an open "
                "door with --api-insecure",
                what, host, CTLAUTH_TOKEN_ENV);
        return -EINVAL;
    }
    ts_errf(warn, warnlen,
            "warning: %s listens on %s without a token (--api-insecure): anyone who can "
            "reach it can change the traffic",
            what, host);
    return 0;
}

/* Compares in time that depends on the secret's length only. */
static bool secret_equal(const char *guess, size_t glen, const char *secret, size_t slen)
{
    volatile unsigned char d = glen != slen;
    for (size_t i = 0; i < slen; i++)
        d |= (unsigned char)secret[i] ^ (unsigned char)(i < glen ? guess[i] : 0);
    return d == 0;
}

bool ctlauth_allows(const struct http_request *req, const char *token)
{
    if (!token)
        return true;
    const char *h = http_request_header(req, "authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return false;
    h += 7;
    while (*h == ' ')
        h++;
    size_t n = strlen(h);
    while (n && (h[n - 1] == ' ' || h[n - 1] == '\t'))
        n--;
    return secret_equal(h, n, token, strlen(token));
}

bool ctlauth_allows_query(const struct http_request *req, const char *token)
{
    if (ctlauth_allows(req, token))
        return true;
    for (const char *q = req->query; q && *q;) {
        size_t len = strcspn(q, "&");
        if (len > 6 && !strncmp(q, "token=", 6) && len - 6 <= 3 * CTLAUTH_TOKEN_MAX) {
            int n = 0;
            char *v = curl_easy_unescape(NULL, q + 6, (int)(len - 6), &n);
            bool ok = v && n >= 0 && secret_equal(v, (size_t)n, token, strlen(token));
            curl_free(v);
            if (ok)
                return true;
        }
        q += len + (q[len] == '&');
    }
    return false;
}

void ctlauth_deny(struct http_request *req)
{
    static const char body[] = "{\"error\":\"unauthorized: this control API needs "
                               "'Authorization: Bearer <token>'\"}\n";
    (void)http_respond(req, 401, "application/json", "WWW-Authenticate: Bearer\r\n", body,
                       sizeof(body) - 1);
}
