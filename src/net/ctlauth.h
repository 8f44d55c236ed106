/*
 * ctlauth.h - who may use a control surface: the proxy's control API, the
 * simulator's admin API, and any other endpoint that changes what a running
 * process does to traffic.
 *
 * The rule (docs/CHAOS.md "Control surfaces"): a control surface binds
 * loopback by default. On any other address it needs a bearer token
 * (`--api-token TOKEN`, or TOKENSTORM_API_TOKEN in the environment), or
 * `--api-insecure`, which starts it open with a warning. When a token is
 * set, every request must carry "Authorization: Bearer TOKEN", on loopback
 * too; the comparison takes the same time whatever the guess. The token is
 * borrowed, never copied into logs, results or traces.
 */
#ifndef TS_NET_CTLAUTH_H
#define TS_NET_CTLAUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "net/http_server.h"

#define CTLAUTH_TOKEN_ENV "TOKENSTORM_API_TOKEN"
/* Tokens are 1..CTLAUTH_TOKEN_MAX bytes of visible ASCII (no spaces). */
#define CTLAUTH_TOKEN_MAX 512

/* true for 127.0.0.0/8, ::1 (and ::ffff:127.x) and "localhost": hosts that
 * only this machine can reach. Any other name or address is not. */
bool ctlauth_is_loopback(const char *host);

/*
 * Decides whether a control surface named `what` ("the control API") may
 * listen on host. token: the --api-token value, or NULL to take
 * TOKENSTORM_API_TOKEN (an empty one counts as none); *token_out is the one
 * to enforce (borrowed from argv or the environment), or NULL for none.
 * Returns 0, or -EINVAL with a message naming the way out when host is not
 * loopback and there is no token and !insecure, or when the token is not
 * 1..CTLAUTH_TOKEN_MAX visible ASCII characters. With insecure and no token
 * on a routable host it returns 0 and puts a warning in warn (empty
 * otherwise) for the caller to print.
 */
TS_MUST_CHECK int ctlauth_setup(const char *what, const char *host, const char *token,
                                bool insecure, const char **token_out, char *warn, size_t warnlen,
                                char *err, size_t errlen);

/* true when token is NULL, or req carries "Authorization: Bearer <token>". */
bool ctlauth_allows(const struct http_request *req, const char *token);

/*
 * Like ctlauth_allows(), but the token may also come as the query parameter
 * "token" (percent-decoded): for a browser page whose EventSource cannot
 * send headers (the run's live dashboard). A URL is easier to leak than a
 * header (history, proxies' logs): use it only where a browser needs it.
 */
bool ctlauth_allows_query(const struct http_request *req, const char *token);

/* Answers 401 {"error": ...} with "WWW-Authenticate: Bearer". */
void ctlauth_deny(struct http_request *req);

#endif
