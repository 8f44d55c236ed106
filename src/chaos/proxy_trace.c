/*
 * proxy_trace.c - the chaos proxy's OpenTelemetry spans (see proxy_trace.h).
 */
#include "chaos/proxy_trace.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "base/clock.h"

/* Host and port of an http(s)://[user@]host[:port][/...] URL. */
static void upstream_host(const char *url, char *host, size_t n, int *port)
{
    host[0] = '\0';
    *port = -1;
    const char *s = strstr(url, "://");
    if (!s)
        return;
    bool tls = strncmp(url, "https", 5) == 0;
    s += 3;
    size_t len = strcspn(s, "/?#");
    const char *at = memchr(s, '@', len);
    if (at) {
        len -= (size_t)(at + 1 - s);
        s = at + 1;
    }
    const char *hend = s + len;
    const char *colon = NULL;
    if (*s == '[') { /* [v6]:port: the brackets are not part of server.address */
        const char *rb = memchr(s, ']', len);
        if (!rb)
            return;
        colon = rb + 1 < hend && rb[1] == ':' ? rb + 1 : NULL;
        hend = rb;
        s++;
    } else {
        colon = memchr(s, ':', len);
        if (colon)
            hend = colon;
    }
    size_t hl = (size_t)(hend - s);
    if (!hl || hl >= n)
        return;
    memcpy(host, s, hl);
    host[hl] = '\0';
    *port = tls ? 443 : 80;
    if (colon) {
        int p = 0;
        const char *c = colon + 1;
        for (; *c >= '0' && *c <= '9' && p <= 65535; c++)
            p = p * 10 + (*c - '0');
        if (c > colon + 1 && p > 0 && p <= 65535)
            *port = p;
    }
}

static void seed_ids(struct proxy_tracer *tr)
{
    uint64_t seed;
    if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed))
        seed = ts_wall_ns() ^ ((uint64_t)(uintptr_t)tr << 17);
    rng_seed(&tr->ids, seed);
}

void proxy_tracer_init(struct proxy_tracer *tr, struct otlp_exporter *e, bool all,
                       const char *upstream)
{
    memset(tr, 0, sizeof(*tr));
    tr->exporter = e;
    tr->all = all;
    upstream_host(upstream ? upstream : "", tr->server_address, sizeof(tr->server_address),
                  &tr->server_port);
    tr->address = tr->server_address;
    seed_ids(tr);
}

void proxy_tracer_init_from(struct proxy_tracer *tr, const struct proxy_tracer *base)
{
    memset(tr, 0, sizeof(*tr));
    tr->exporter = base->exporter;
    tr->all = base->all;
    tr->address = base->address;
    tr->server_port = base->server_port;
    seed_ids(tr);
}

void proxy_trace_begin(struct proxy_trace *t, struct proxy_tracer *tr,
                       const struct http_request *req, uint64_t now_unix_ns)
{
    t->on = false;
    t->status = 0;
    t->traceparent[0] = '\0';
    if (!tr->exporter)
        return;
    const char *tp = http_request_header(req, "traceparent");
    struct trace_context tc;
    if (!tp || traceparent_parse(tp, strlen(tp), &tc) != 0)
        return;
    struct otlp_span *s = &t->span;
    otlp_span_init(s);
    memcpy(s->trace_id, tc.trace_id, TRACE_ID_LEN);
    memcpy(s->parent_span_id, tc.span_id, SPAN_ID_LEN);
    do {
        uint64_t v = rng_next_u64(&tr->ids);
        memcpy(s->span_id, &v, SPAN_ID_LEN);
    } while (!trace_id_valid(s->span_id, SPAN_ID_LEN));
    struct trace_context up = tc;
    memcpy(up.span_id, s->span_id, SPAN_ID_LEN);
    if (traceparent_format(&up, t->traceparent, sizeof(t->traceparent)) != 0)
        return;
    s->kind = OTLP_KIND_SERVER;
    s->start_unix_ns = now_unix_ns;
    s->name_prefix = "tokenstorm.proxy";
    otlp_copy_str(s->http_method, sizeof(s->http_method), req->method);
    otlp_copy_str(s->url_path, sizeof(s->url_path), req->path);
    s->server_address = tr->address && tr->address[0] ? tr->address : NULL;
    s->server_port = tr->server_port;
    s->faults_count = 0;
    t->on = true;
}

static bool has_event(const struct otlp_span *s, const char *name)
{
    for (unsigned i = 0; i < s->n_events; i++) {
        const struct otlp_event *ev = &s->events[i];
        for (unsigned k = ev->first_attr; k < (unsigned)ev->first_attr + ev->n_attrs; k++)
            if (strcmp(s->event_attrs[k].key, "tokenstorm.fault.name") == 0 &&
                strncmp(s->event_text + s->event_attrs[k].off, name, 63) == 0)
                return true;
    }
    return false;
}

/* The key parameters of f as attributes of the span's last event. */
static void fault_params(struct otlp_span *s, const struct fault *f)
{
    const struct fault_params *pa = &f->params;
    char v[64];
    if (f->type == FAULT_HTTP_ABORT)
        (void)otlp_span_event_int(s, "tokenstorm.fault.status", pa->status);
    if (pa->has_delay && dist_format(&pa->delay, v, sizeof(v)))
        (void)otlp_span_event_str(s, "tokenstorm.fault.delay", v);
    if (pa->has_bytes)
        (void)otlp_span_event_int(s, "tokenstorm.fault.bytes", (int64_t)pa->bytes);
    if (pa->has_rate) {
        snprintf(v, sizeof(v), "%g", pa->rate);
        (void)otlp_span_event_str(s, "tokenstorm.fault.rate", v);
    }
}

void proxy_trace_fault(struct proxy_trace *t, const struct fault *f, uint64_t now_unix_ns)
{
    struct otlp_span *s = &t->span;
    if (!t->on || has_event(s, f->name))
        return;
    s->faults_count++;
    if (otlp_span_add_event(s, "tokenstorm.fault", now_unix_ns) != 0)
        return;
    (void)otlp_span_event_str(s, "tokenstorm.fault.name", f->name);
    (void)otlp_span_event_str(s, "tokenstorm.fault.type", fault_type_name(f->type));
    fault_params(s, f);
}

bool proxy_trace_finish(struct proxy_trace *t, struct proxy_tracer *tr, struct fault *const *hits,
                        size_t n, uint64_t now_unix_ns)
{
    if (!t->on)
        return false;
    t->on = false;
    struct otlp_span *s = &t->span;
    for (size_t i = 0; i < n; i++) {
        t->on = true; /* proxy_trace_fault wants it on */
        proxy_trace_fault(t, hits[i], s->start_unix_ns);
        t->on = false;
    }
    s->end_unix_ns = now_unix_ns > s->start_unix_ns ? now_unix_ns : s->start_unix_ns;
    if (t->status > 0) {
        s->http_status = t->status;
        if (t->status >= 500) {
            s->status = OTLP_STATUS_ERROR;
            snprintf(s->error_type, sizeof(s->error_type), "%d", t->status);
        }
    } else {
        s->status = OTLP_STATUS_ERROR;
        otlp_copy_str(s->error_type, sizeof(s->error_type), "response_cut");
    }
    if (s->faults_count == 0 && !tr->all)
        return false;
    if (otlp_exporter_push(tr->exporter, s) != 0)
        return false;
    tr->spans++;
    return true;
}
