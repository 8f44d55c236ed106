/*
 * proxy_api.c - the chaos proxy's REST control API (toxiproxy-like):
 *
 *   GET    /health           200 {"status":"ok"}
 *   GET    /faults           200 {"faults":[fault, ...]}
 *   POST   /faults           a spec -> 201 fault; 400 {"error": msg}; 409 duplicate name
 *   GET    /faults/{name}    200 fault; 404
 *   PUT    /faults/{name}    a spec (its name, if any, must be {name}) -> 200
 *                            replaced (counters kept, window restarted) or 201 added
 *   DELETE /faults/{name}    204; 404
 *   POST   /reset            204: every fault removed
 *   GET    /metrics          Prometheus text
 *   GET    /chain            200 retries and orphaned work: totals and the time
 *                            series (chain_json; ?since_ns=N: buckets from N on)
 *   DELETE /chain            204: those counters and the series zeroed
 *
 * Errors are JSON objects {"error": "message"}. With cfg.api_token set,
 * every request but GET /health needs "Authorization: Bearer TOKEN" (401
 * otherwise; net/ctlauth.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/clock.h"
#include "chaos/proxy.h"
#include "net/ctlauth.h"
#include "telemetry/prom.h"

#define API_BODY_MAX (1u << 20)

static void api_json(struct http_request *req, int status, json_t *j)
{
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s) {
        (void)http_respond(req, 500, "application/json", NULL, "{\"error\":\"out of memory\"}", 25);
        return;
    }
    size_t n = strlen(s);
    struct buf b;
    buf_init(&b, n + 2);
    if (buf_append(&b, s, n) == 0 && buf_append_char(&b, '\n') == 0)
        (void)http_respond(req, status, "application/json", NULL, b.data, b.len);
    else
        (void)http_respond(req, 500, NULL, NULL, "", 0);
    buf_release(&b);
    free(s);
}

static void api_error(struct http_request *req, int status, const char *msg)
{
    api_json(req, status, json_pack("{s:s}", "error", msg));
}

static void api_fault(struct http_request *req, int status, const struct fault *f)
{
    api_json(req, status, fault_to_json(f, ts_now_ns()));
}

/* Parses the request body as one spec; on failure answers 400 and returns -EINVAL. */
static int api_spec(struct http_request *req, const char *path_name, struct fault *f)
{
    char err[512];
    json_error_t je;
    json_t *j = json_loadb(req->body, req->body_len, 0, &je);
    if (!j) {
        ts_errf(err, sizeof err, "body: not JSON: %s (line %d, column %d)", je.text, je.line,
                je.column);
        api_error(req, 400, err);
        return -EINVAL;
    }
    if (path_name && json_is_object(j) && !json_object_get(j, "name"))
        (void)json_object_set_new(j, "name", json_string(path_name));
    int rc = fault_parse_json(j, f, err, sizeof err);
    json_decref(j);
    if (rc) {
        api_error(req, 400, err);
        return rc;
    }
    if (path_name && strcmp(f->name, path_name) != 0) {
        ts_errf(err, sizeof err, "name: '%s' differs from the URL's '%s'", f->name, path_name);
        api_error(req, 400, err);
        return -EINVAL;
    }
    return 0;
}

/* The WebSocket pass-through's counters (proxy_ws.c). */
static int ws_metrics(struct proxy *p, struct buf *out)
{
    int rc = prom_metric(out, "tokenstorm_proxy_websocket_connections_total",
                         "WebSocket upgrades relayed (the upstream answered 101).", "counter",
                         (double)atomic_load(&p->ws_connections));
    if (!rc)
        rc = prom_header(out, "tokenstorm_proxy_websocket_messages_total",
                         "WebSocket messages passed on, after the frame faults.", "counter");
    static const char *const dirs[] = {"upstream", "downstream"};
    for (int d = 0; d < 2 && !rc; d++) {
        const char *labels[] = {"direction", dirs[d]};
        rc = prom_sample(out, "tokenstorm_proxy_websocket_messages_total", labels, 1,
                         (double)atomic_load(&p->ws_messages[d]));
    }
    return rc;
}

/* GET /health: up, and how it sends (io_uring, or write(2) and why). */
static void api_health(struct proxy *p, struct http_request *req)
{
    const char *why = "";
    bool on = proxy_io_uring(p, &why);
    api_json(req, 200,
             on ? json_pack("{s:s,s:b}", "status", "ok", "io_uring", 1)
                : json_pack("{s:s,s:b,s:s}", "status", "ok", "io_uring", 0, "io_uring_off", why));
}

/* --record: lines written and dropped, exchanges cut, the budget's use. */
static int record_metrics(struct proxy *p, struct buf *out)
{
    if (!p->recorder)
        return 0;
    struct recorder_stats st;
    recorder_stats(p->recorder, &st);
    int rc = prom_metric(out, "tokenstorm_proxy_recorded_total",
                         "Exchanges queued as lines of the recording (--record).", "counter",
                         (double)st.written);
    if (!rc)
        rc = prom_header(out, "tokenstorm_proxy_record_dropped_total",
                         "Exchanges left out of the recording: more than 64 MiB of lines waited "
                         "for the disk (disk), or the request alone did not fit "
                         "--record-memory-max (memory).",
                         "counter");
    const char *disk[] = {"reason", "disk"}, *mem[] = {"reason", "memory"};
    if (!rc)
        rc = prom_sample(out, "tokenstorm_proxy_record_dropped_total", disk, 1, (double)st.dropped);
    if (!rc)
        rc = prom_sample(out, "tokenstorm_proxy_record_dropped_total", mem, 1, (double)st.skipped);
    if (!rc)
        rc = prom_header(out, "tokenstorm_proxy_record_cut_total",
                         "Exchanges recorded with their events from some point left out: the line "
                         "would pass what a reader takes (line), or the exchanges in progress held "
                         "--record-memory-max (memory).",
                         "counter");
    const char *why[] = {"line", "memory"};
    for (int i = 0; i < RECORDER_CUT_COUNT && !rc; i++) {
        const char *labels[] = {"reason", why[i]};
        rc = prom_sample(out, "tokenstorm_proxy_record_cut_total", labels, 1, (double)st.cut[i]);
    }
    if (!rc)
        rc = prom_metric(out, "tokenstorm_proxy_record_memory_bytes",
                         "Bytes (as written) the exchanges being recorded hold; at most "
                         "--record-memory-max.",
                         "gauge", (double)st.inflight);
    return rc;
}

/* proxy_metrics with faults_mu held. */
static int metrics_locked(struct proxy *p, struct buf *out)
{
    int rc =
        prom_metric(out, "tokenstorm_proxy_requests_total", "Requests received by the chaos proxy.",
                    "counter", (double)p->requests_total);
    if (!rc)
        rc = prom_metric(out, "tokenstorm_proxy_io_uring",
                         "1 when the proxy sends to clients through io_uring, 0 with write(2).",
                         "gauge", proxy_io_uring(p, NULL));
    uint64_t sends, submits;
    proxy_io_uring_counts(p, &sends, &submits);
    if (!rc)
        rc = prom_metric(out, "tokenstorm_proxy_io_uring_sends_total",
                         "Sends to clients handed to the kernel through io_uring.", "counter",
                         (double)sends);
    if (!rc)
        rc = prom_metric(out, "tokenstorm_proxy_io_uring_submits_total",
                         "System calls (io_uring_enter) that handed those sends over: sends / "
                         "submits is the batch.",
                         "counter", (double)submits);
    if (!rc)
        rc = prom_metric(out, "tokenstorm_proxy_requests_in_flight",
                         "Requests being handled by the chaos proxy.", "gauge",
                         (double)p->in_flight);
    if (!rc)
        rc = prom_metric(out, "tokenstorm_proxy_upstream_errors_total",
                         "Upstream calls that failed (connect, TLS, timeout, reset).", "counter",
                         (double)p->upstream_errors);
    if (!rc)
        rc = prom_metric(out, "tokenstorm_proxy_header_faults_total",
                         "Injections asked for by x-tokenstorm-fault-abort/-delay headers.",
                         "counter", (double)p->header_faults);
    if (!rc)
        rc = ws_metrics(p, out);
    if (!rc)
        rc = record_metrics(p, out);
    if (!rc)
        rc = prom_metric(out, "tokenstorm_faults_active", "Faults in the set.", "gauge",
                         (double)p->faults.n);
    const char *names[] = {"tokenstorm_faults_injected_total", "tokenstorm_faults_matched_total"};
    const char *helps[] = {"Times each fault was injected.",
                           "Requests each fault matched (before its probability roll)."};
    for (int k = 0; k < 2 && !rc; k++) {
        rc = prom_header(out, names[k], helps[k], "counter");
        for (size_t i = 0; i < p->faults.n && !rc; i++) {
            struct fault *f = p->faults.v[i];
            const char *labels[] = {"fault", f->name, "type", fault_type_name(f->type)};
            uint64_t v = k == 0 ? atomic_load(&f->injected) : atomic_load(&f->matched);
            rc = prom_sample(out, names[k], labels, 2, (double)v);
        }
    }
    if (!rc) {
        struct prom_hist h; /* the sum of the workers' (same bounds, set before threads) */
        prom_hist_init(&h, p->workers[0].forward_delay.bounds, p->workers[0].forward_delay.nbounds);
        for (int i = 0; i < p->n_workers; i++) {
            struct proxy_worker *w = &p->workers[i];
            pthread_mutex_lock(&w->hist_mu);
            for (size_t b = 0; b <= h.nbounds; b++)
                h.counts[b] += w->forward_delay.counts[b];
            h.sum += w->forward_delay.sum;
            h.count += w->forward_delay.count;
            pthread_mutex_unlock(&w->hist_mu);
        }
        rc = prom_header(out, "tokenstorm_proxy_forward_delay_seconds",
                         "The proxy's own delay on pass-through body pieces: from the kernel's "
                         "receive time of the upstream bytes to their write to the client.",
                         "histogram");
        if (!rc)
            rc = prom_histogram(out, "tokenstorm_proxy_forward_delay_seconds", NULL, 0, &h);
    }
    if (!rc)
        rc = prom_header(out, "tokenstorm_proxy_worker_requests_total",
                         "Requests received by each of the proxy's loop threads (--threads).",
                         "counter");
    for (int i = 0; i < p->n_workers && !rc; i++) {
        char idx[16];
        snprintf(idx, sizeof idx, "%d", i);
        const char *labels[] = {"worker", idx};
        rc = prom_sample(out, "tokenstorm_proxy_worker_requests_total", labels, 1,
                         (double)atomic_load(&p->workers[i].requests));
    }
    if (!rc)
        rc = chain_metrics(&p->chain, out);
    if (!rc)
        rc = proxy_mirror_metrics(p, out);
    return rc;
}

int proxy_metrics(struct proxy *p, struct buf *out)
{
    pthread_mutex_lock(&p->faults_mu);
    int rc = metrics_locked(p, out);
    pthread_mutex_unlock(&p->faults_mu);
    return rc;
}

static void api_metrics(struct proxy *p, struct http_request *req)
{
    struct buf b;
    buf_init(&b, 4u << 20);
    if (metrics_locked(p, &b) == 0)
        (void)http_respond(req, 200, PROM_CONTENT_TYPE, NULL, b.data, b.len);
    else
        (void)http_respond(req, 500, NULL, NULL, "", 0);
    buf_release(&b);
}

static void api_list(struct proxy *p, struct http_request *req)
{
    json_t *arr = json_array();
    uint64_t now = ts_now_ns();
    for (size_t i = 0; arr && i < p->faults.n; i++) {
        if (json_array_append_new(arr, fault_to_json(p->faults.v[i], now)) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    api_json(req, 200, arr ? json_pack("{s:o}", "faults", arr) : NULL);
}

static void api_method(struct http_request *req, const char *allow)
{
    char extra[96];
    snprintf(extra, sizeof extra, "Allow: %s\r\n", allow);
    const char *msg = "{\"error\":\"method not allowed\"}\n";
    (void)http_respond(req, 405, "application/json", extra, msg, strlen(msg));
}

/* GET /chain[?since_ns=N], DELETE /chain. */
static void api_chain(struct proxy *p, struct http_request *req)
{
    if (strcmp(req->method, "DELETE") == 0) {
        chain_reset(&p->chain);
        (void)http_respond(req, 204, NULL, NULL, "", 0);
        return;
    }
    if (strcmp(req->method, "GET") != 0) {
        api_method(req, "GET, DELETE");
        return;
    }
    uint64_t since = 0;
    const char *q = strchr(req->url, '?');
    if (q && strncmp(q + 1, "since_ns=", 9) == 0) {
        char *end;
        unsigned long long v = strtoull(q + 10, &end, 10);
        if (end == q + 10 || (*end && *end != '&')) {
            api_error(req, 400, "since_ns: expected a number of nanoseconds");
            return;
        }
        since = v;
    }
    api_json(req, 200, chain_json(&p->chain, since));
}

static void api_one(struct proxy *p, struct http_request *req, const char *name)
{
    const char *m = req->method;
    struct fault spec;
    uint64_t now = ts_now_ns();
    if (strcmp(m, "GET") == 0) {
        struct fault *f = faultset_get(&p->faults, name);
        if (f)
            api_fault(req, 200, f);
        else
            api_error(req, 404, "no such fault");
    } else if (strcmp(m, "DELETE") == 0) {
        if (faultset_remove(&p->faults, name) == 0)
            (void)http_respond(req, 204, NULL, NULL, "", 0);
        else
            api_error(req, 404, "no such fault");
    } else if (strcmp(m, "PUT") == 0) {
        if (api_spec(req, name, &spec) != 0)
            return;
        bool exists = faultset_get(&p->faults, name) != NULL;
        int rc = exists ? faultset_replace(&p->faults, &spec, now)
                        : faultset_add(&p->faults, &spec, now);
        if (rc == TS_TOOBIG)
            api_error(req, 400, "too many faults");
        else if (rc)
            api_error(req, 500, "out of memory");
        else
            api_fault(req, exists ? 200 : 201, faultset_get(&p->faults, name));
    } else {
        api_method(req, "GET, PUT, DELETE");
    }
}

static void api_dispatch(struct proxy *p, struct http_request *req)
{
    const char *path = req->path;
    const char *m = req->method;
    if (strcmp(path, "/health") != 0 && !ctlauth_allows(req, p->cfg.api_token)) {
        ctlauth_deny(req);
        return;
    }
    if (req->body_len > API_BODY_MAX) {
        api_error(req, 413, "body too large");
        return;
    }
    if (strcmp(path, "/health") == 0) {
        if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0)
            api_health(p, req);
        else
            api_method(req, "GET");
    } else if (strcmp(path, "/metrics") == 0) {
        if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0)
            api_metrics(p, req);
        else
            api_method(req, "GET");
    } else if (strcmp(path, "/chain") == 0) {
        api_chain(p, req);
    } else if (strcmp(path, "/reset") == 0) {
        if (strcmp(m, "POST") == 0) {
            faultset_reset(&p->faults);
            (void)http_respond(req, 204, NULL, NULL, "", 0);
        } else {
            api_method(req, "POST");
        }
    } else if (strcmp(path, "/faults") == 0 || strcmp(path, "/faults/") == 0) {
        if (strcmp(m, "GET") == 0) {
            api_list(p, req);
        } else if (strcmp(m, "POST") == 0) {
            struct fault spec;
            if (api_spec(req, NULL, &spec) != 0)
                return;
            int rc = faultset_add(&p->faults, &spec, ts_now_ns());
            if (rc == -EEXIST) {
                char msg[256];
                snprintf(msg, sizeof msg, "a fault named '%s' exists (PUT /faults/%s changes it)",
                         spec.name, spec.name);
                api_error(req, 409, msg);
            } else if (rc == TS_TOOBIG) {
                api_error(req, 400, "too many faults");
            } else if (rc) {
                api_error(req, 500, "out of memory");
            } else {
                api_fault(req, 201, faultset_get(&p->faults, spec.name));
            }
        } else {
            api_method(req, "GET, POST");
        }
    } else if (strncmp(path, "/faults/", 8) == 0 && path[8] && !strchr(path + 8, '/')) {
        api_one(p, req, path + 8);
    } else {
        api_error(req, 404, "not found (GET /faults, /metrics, /health; POST /reset)");
    }
}

void proxy_api_handle(struct http_request *req, void *ctx)
{
    struct proxy *p = ctx;
    pthread_mutex_lock(&p->faults_mu);
    api_dispatch(p, req);
    pthread_mutex_unlock(&p->faults_mu);
}

int proxy_add_faults(struct proxy *p, const json_t *specs, char *err, size_t errlen)
{
    size_t i;
    json_t *v;
    uint64_t now = ts_now_ns();
    json_array_foreach((json_t *)specs, i, v)
    {
        struct fault f;
        char msg[448];
        int rc = fault_parse_json(v, &f, msg, sizeof msg);
        if (rc) {
            ts_errf(err, errlen, "faults[%zu]: %s", i, msg);
            return rc;
        }
        pthread_mutex_lock(&p->faults_mu);
        rc = faultset_add(&p->faults, &f, now);
        pthread_mutex_unlock(&p->faults_mu);
        if (rc == -EEXIST)
            ts_errf(err, errlen, "faults[%zu]: a fault named '%s' is already defined", i, f.name);
        else if (rc)
            ts_errf(err, errlen, "faults[%zu]: %s", i, ts_strerror(rc));
        if (rc)
            return rc;
    }
    return 0;
}
