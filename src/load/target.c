#include "target.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"

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

static size_t collect(char *p, size_t size, size_t n, void *arg)
{
    struct buf *b = arg;
    return buf_append(b, p, size * n) ? 0 : size * n;
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
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(list);
    curl_easy_cleanup(h);
    int rc = 0;
    if (cc != CURLE_OK) {
        ts_errf(err, errlen, "cannot list models at %s: %s (give --model)", models_url,
                curl_easy_strerror(cc));
        rc = -EIO;
    } else if (status != 200) {
        ts_errf(err, errlen, "cannot list models at %s: HTTP %ld (give --model)", models_url,
                status);
        rc = -EIO;
    } else {
        json_error_t jerr;
        json_t *root = json_loadb(buf_cstr(&body), body.len, 0, &jerr);
        json_t *id = json_object_get(json_array_get(json_object_get(root, "data"), 0), "id");
        if (!json_is_string(id)) {
            ts_errf(err, errlen, "%s: no model id in the answer (give --model)", models_url);
            rc = TS_PARSE;
        } else if (json_string_length(id) >= n) {
            ts_errf(err, errlen, "%s: model id too long", models_url);
            rc = TS_TOOBIG;
        } else {
            snprintf(model, n, "%s", json_string_value(id));
        }
        json_decref(root);
    }
    buf_release(&body);
    return rc;
}
