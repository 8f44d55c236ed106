#include "target.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "llm/errbody.h"

static bool ends_with(const char *s, size_t len, const char *suffix)
{
    size_t n = strlen(suffix);
    return len >= n && !memcmp(s + len - n, suffix, n);
}

int target_resolve(const char *target, enum workload_endpoint ep, char endpoint_url[TARGET_URL_MAX],
                   char models_url[TARGET_URL_MAX], char *err, size_t errlen)
{
    if (strncmp(target, "http://", 7) && strncmp(target, "https://", 8)) {
        ts_errf(err, errlen, "--target '%s': expected an http:// or https:// URL", target);
        return -EINVAL;
    }
    size_t len = strlen(target);
    while (len > 8 && target[len - 1] == '/')
        len--;
    if (len + 32 >= TARGET_URL_MAX) {
        ts_errf(err, errlen, "--target: URL too long");
        return -EINVAL;
    }
    const char *path = workload_endpoint_path(ep); /* "/v1/chat/completions" */
    static const char *const known[] = {"/v1/chat/completions", "/v1/completions", "/v1/embeddings",
                                        "/chat/completions",    "/completions",    "/embeddings"};
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        if (ends_with(target, len, known[i])) {
            /* a full endpoint URL: POST to it as given */
            snprintf(endpoint_url, TARGET_URL_MAX, "%.*s", (int)len, target);
            size_t base = len - strlen(known[i]);
            snprintf(models_url, TARGET_URL_MAX, "%.*s%s", (int)base, target,
                     known[i][1] == 'v' ? "/v1/models" : "/models");
            return 0;
        }
    }
    if (ends_with(target, len, "/v1")) {
        snprintf(endpoint_url, TARGET_URL_MAX, "%.*s%s", (int)len, target, path + 3);
        snprintf(models_url, TARGET_URL_MAX, "%.*s/models", (int)len, target);
    } else {
        snprintf(endpoint_url, TARGET_URL_MAX, "%.*s%s", (int)len, target, path);
        snprintf(models_url, TARGET_URL_MAX, "%.*s/v1/models", (int)len, target);
    }
    return 0;
}

int target_realtime_url(const char *chat_url, const char *model, char out[TARGET_URL_MAX],
                        char *err, size_t errlen)
{
    static const char suffix[] = "/chat/completions";
    size_t len = strlen(chat_url);
    bool tls = !strncmp(chat_url, "https://", 8);
    size_t skip = tls ? 8 : 7;
    if ((!tls && strncmp(chat_url, "http://", 7)) || !ends_with(chat_url, len, suffix)) {
        ts_errf(err, errlen, "'%s' is not a chat completions URL", chat_url);
        return -EINVAL;
    }
    char *m = curl_easy_escape(NULL, model, 0);
    if (!m) {
        ts_errf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int n = snprintf(out, TARGET_URL_MAX, "%s://%.*s/realtime?model=%s", tls ? "wss" : "ws",
                     (int)(len - skip - (sizeof(suffix) - 1)), chat_url + skip, m);
    curl_free(m);
    if (n < 0 || n >= TARGET_URL_MAX) {
        ts_errf(err, errlen, "the realtime URL is too long");
        return -EINVAL;
    }
    return 0;
}

static size_t collect(char *p, size_t size, size_t n, void *arg)
{
    struct buf *b = arg;
    return buf_append(b, p, size * n) ? 0 : size * n;
}

/* Why the GET of /v1/models did not happen, from curl's code: what a person
 * can check or change (a run on the same address would fail the same way). */
static const char *transport_hint(CURLcode cc, bool https)
{
    switch (cc) {
    case CURLE_COULDNT_CONNECT:
        return "nothing is listening there (connection refused or unreachable): is the server "
               "running, and is --target its address and port?";
    case CURLE_COULDNT_RESOLVE_HOST:
        return "the host name does not resolve: check --target";
    case CURLE_OPERATION_TIMEDOUT:
        return "no answer within 15 s: is the server up, and not behind a firewall?";
    case CURLE_SSL_CONNECT_ERROR:
        return https ? "the TLS handshake failed: if the port speaks plain HTTP, use http://"
                     : "the TLS handshake failed";
    case CURLE_PEER_FAILED_VERIFICATION:
        return "the server's TLS certificate is not trusted (--insecure skips the check)";
    case CURLE_GOT_NOTHING:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_RECV_ERROR:
        return https ? "the server did not answer in HTTP: is --target the right port?"
                     : "the server did not answer in HTTP: if the port speaks TLS, use "
                       "https://; else is --target the right port?";
    case CURLE_WRITE_ERROR:
        return "the answer is over 4 MiB: not a model list";
    default:
        return "could not reach the server";
    }
}

/* What an HTTP error status from /v1/models says to do. */
static const char *status_hint(long status)
{
    if (status == 401 || status == 403)
        return "the server refused the request: give its API key (--api-key or "
               "$OPENAI_API_KEY) or the header it wants (--header)";
    if (status == 404 || status == 405)
        return "no model list at this URL: check that --target is the server's root or its /v1 "
               "base URL; a server that serves chat without /v1/models needs --model";
    if (status >= 500)
        return "the server failed: see its message and logs";
    return "not a model list";
}

/*
 * Describes a failed GET of url into err: curl's code cc, else the HTTP
 * status, else the body that is not an OpenAI model list. Never suggests
 * --model where a run would fail the same way.
 */
static void describe_failure(const char *url, CURLcode cc, long status, const char *ctype,
                             const char *body, size_t len, char *err, size_t errlen)
{
    char what[256];
    bool https = !strncmp(url, "https://", 8);
    if (cc != CURLE_OK) {
        ts_errf(err, errlen, "cannot list models at %s: %s: %s", url, curl_easy_strerror(cc),
                transport_hint(cc, https));
        return;
    }
    if (status < 200 || status >= 300) {
        if (!errbody_describe(body, len, what, sizeof(what)))
            snprintf(what, sizeof(what), "empty body");
        ts_errf(err, errlen, "cannot list models at %s: HTTP %ld (%s): %s", url, status, what,
                status_hint(status));
        return;
    }
    json_error_t jerr;
    json_t *root = len ? json_loadb(body, len, 0, &jerr) : NULL;
    json_t *data = json_object_get(root, "data");
    if (!root) {
        errbody_printable(body, len < 80 ? len : 80, what, sizeof(what));
        ts_errf(err, errlen,
                "%s: the answer is not JSON (%s%s%s): not an OpenAI-compatible server at this "
                "URL; check --target",
                url, ctype ? ctype : "no content type", len ? ": " : ", empty", what);
    } else if (!json_is_array(data)) {
        ts_errf(err, errlen,
                "%s: the answer has no \"data\" list: not an OpenAI-compatible model list; "
                "check --target (give --model if the server serves chat without one)",
                url);
    } else if (!json_array_size(data)) {
        ts_errf(err, errlen,
                "%s: the server lists no model (\"data\" is empty): is a model "
                "loaded? give --model to ask for one by name",
                url);
    } else {
        ts_errf(err, errlen, "%s: data[0] has no string \"id\": not an OpenAI model list", url);
    }
    json_decref(root);
}

int target_discover_model(const char *models_url, const char *const *headers, size_t n_headers,
                          bool insecure, char *model, size_t n, char *err, size_t errlen)
{
    CURL *h = curl_easy_init();
    if (!h) {
        ts_errf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    struct curl_slist *list = NULL;
    for (size_t i = 0; i < n_headers; i++) {
        struct curl_slist *l = curl_slist_append(list, headers[i]);
        if (!l) {
            curl_slist_free_all(list);
            curl_easy_cleanup(h);
            ts_errf(err, errlen, "out of memory");
            return -ENOMEM;
        }
        list = l;
    }
    struct buf body;
    buf_init(&body, 4 << 20);
    curl_easy_setopt(h, CURLOPT_URL, models_url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 15000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (insecure) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    CURLcode cc = curl_easy_perform(h);
    long status = 0;
    char *ct = NULL;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
    char ctype[128] = "";
    if (ct)
        errbody_printable(ct, strlen(ct), ctype, sizeof(ctype));
    curl_slist_free_all(list);
    curl_easy_cleanup(h);
    int rc = 0;
    json_t *root = NULL;
    const json_t *id = NULL;
    if (cc == CURLE_OK && status >= 200 && status < 300) {
        json_error_t jerr;
        root = json_loadb(buf_cstr(&body), body.len, 0, &jerr);
        id = json_object_get(json_array_get(json_object_get(root, "data"), 0), "id");
    }
    if (!json_is_string(id)) {
        describe_failure(models_url, cc, status, ctype[0] ? ctype : NULL, buf_cstr(&body), body.len,
                         err, errlen);
        rc = cc != CURLE_OK || status < 200 || status >= 300 ? -EIO : TS_PARSE;
    } else if (json_string_length(id) >= n) {
        ts_errf(err, errlen, "%s: model id too long", models_url);
        rc = TS_TOOBIG;
    } else {
        snprintf(model, n, "%s", json_string_value(id));
    }
    json_decref(root);
    buf_release(&body);
    return rc;
}
