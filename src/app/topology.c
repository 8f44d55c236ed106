/*
 * topology.c - `tokenstorm topology` (topology.h): the scan, trace files,
 * the live OTLP/HTTP receiver, and the outputs.
 */
#include "app/topology.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/file.h"
#include "net/addr.h"
#include "net/body_decode.h"
#include "net/http_server.h"
#include "net/stopsig.h"
#include "report/topo_svg.h"
#include "telemetry/otlp_read.h"

#define RX_BODY_MAX (32u << 20) /* an export's decoded body */

struct receiver {
    struct http_server server;
    struct stopsig signals;
    uv_timer_t timer;
    bool timer_on, stopping;
    struct otlp_spans *spans;
    const struct topology_opts *o;
    FILE *save;
    uint64_t posts, refused;
};

static void rx_stop(struct receiver *rx)
{
    if (rx->stopping)
        return;
    rx->stopping = true;
    if (rx->timer_on)
        uv_close((uv_handle_t *)&rx->timer, NULL);
    stopsig_close(&rx->signals);
    (void)http_server_shutdown(&rx->server, 1000, NULL);
}

static void on_signal(struct stopsig *s, int signum)
{
    (void)signum;
    rx_stop(s->data);
}

static void on_timer(uv_timer_t *t)
{
    rx_stop(t->data);
}

static int collect(void *ctx, const char *data, size_t len)
{
    struct buf *b = ctx;
    return buf_append(b, data, len);
}

static void answer(struct http_request *req, int status, const char *msg)
{
    char body[384];
    json_t *s = json_string(msg);
    char *q = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
    snprintf(body, sizeof(body), status == 200 ? "{}" : "{\"code\":3,\"message\":%s}",
             q ? q : "\"error\"");
    free(q);
    json_decref(s);
    (void)http_respond(req, status, "application/json", NULL, body, strlen(body));
}

/* The request's body, gunzipped when it says so, into out. */
static int body_of(struct http_request *req, struct buf *out, char *err, size_t errlen)
{
    const char *enc = http_request_header(req, "content-encoding");
    struct body_decoder *d = NULL;
    int rc = body_decoder_new(enc, &d, err, errlen);
    if (rc)
        return rc;
    if (!d)
        return buf_append(out, req->body, req->body_len);
    rc = body_decoder_feed(d, req->body, req->body_len, collect, out, err, errlen);
    if (rc == -ENOMEM || rc == TS_TOOBIG)
        ts_errf(err, errlen, "decoded body over %u bytes", RX_BODY_MAX);
    if (!rc && !body_decoder_complete(d)) {
        ts_errf(err, errlen, "%s body cut short", body_decoder_name(d));
        rc = TS_PARSE;
    }
    body_decoder_free(d);
    return rc;
}

static void save_body(struct receiver *rx, const char *data, size_t len)
{
    json_t *doc = json_loadb(data, len, 0, NULL);
    if (!doc)
        return;
    if (json_dumpf(doc, rx->save, JSON_COMPACT) || fputc('\n', rx->save) == EOF)
        fprintf(stderr, "tokenstorm topology: cannot write --save-traces\n");
    json_decref(doc);
}

static void on_request(struct http_request *req, void *ctx)
{
    struct receiver *rx = ctx;
    if (strcmp(req->path, "/v1/traces")) {
        answer(req, 404, "only POST /v1/traces (OTLP/HTTP traces) is served here");
        return;
    }
    if (strcmp(req->method, "POST")) {
        answer(req, 405, "POST an ExportTraceServiceRequest to /v1/traces");
        return;
    }
    const char *ct = http_request_header(req, "content-type");
    if (!ct || strncasecmp(ct, "application/json", 16)) {
        rx->refused++;
        answer(req, 415,
               "only OTLP/JSON is read (Content-Type: application/json); "
               "protobuf bodies are refused: set the exporter's protocol to http/json");
        return;
    }
    char err[256] = "";
    struct buf body;
    buf_init(&body, RX_BODY_MAX);
    int rc = body_of(req, &body, err, sizeof(err));
    if (!rc) {
        size_t before = rx->spans->n;
        rc = otlp_read_json(rx->spans, body.data ? body.data : "", body.len, err, sizeof(err));
        if (!rc && rx->save)
            save_body(rx, body.data, body.len);
        if (!rc)
            rx->posts++;
        (void)before;
    }
    buf_release(&body);
    if (rc) {
        rx->refused++;
        answer(req, rc == -ENOTSUP ? 415 : 400, err);
        return;
    }
    answer(req, 200, "");
    if (rx->o->listen_spans && rx->spans->n + rx->spans->dropped >= rx->o->listen_spans)
        rx_stop(rx);
}

static int start_receiver(struct receiver *rx, uv_loop_t *loop)
{
    char host[ADDR_HOST_MAX], err[256];
    int port;
    if (addr_parse(rx->o->otlp_listen, "127.0.0.1", host, &port, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm topology: --otlp-listen: %s\n", err);
        return TS_EXIT_USAGE;
    }
    struct http_server_config cfg = {.host = host, .port = port, .max_body_bytes = RX_BODY_MAX};
    if (http_server_init(&rx->server, loop, &cfg, on_request, rx)) {
        fprintf(stderr, "tokenstorm topology: --otlp-listen %s: not an IP address\n", host);
        return TS_EXIT_USAGE;
    }
    int rc = http_server_listen(&rx->server);
    if (!rc)
        rc = stopsig_start(&rx->signals, loop, on_signal, rx);
    if (rc) {
        fprintf(stderr, "tokenstorm topology: --otlp-listen %s: %s\n", rx->o->otlp_listen,
                uv_strerror(rc));
        rx_stop(rx);
        return TS_EXIT_FAIL;
    }
    if (rx->o->listen_ns) {
        uv_timer_init(loop, &rx->timer);
        rx->timer.data = rx;
        rx->timer_on = true;
        uv_timer_start(&rx->timer, on_timer, rx->o->listen_ns / 1000000 + 1, 0);
    }
    printf("tokenstorm topology: OTLP/HTTP receiver listening on http://%s%s%s:%d/v1/traces\n",
           strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "",
           http_server_port(&rx->server));
    fflush(stdout);
    return 0;
}

/* Receives spans until a signal, --listen-for or --until-spans. Returns an
 * exit code; *signum is the signal that stopped it (0: none). */
static int receive(const struct topology_opts *o, struct otlp_spans *spans, int *signum)
{
    struct receiver rx = {.spans = spans, .o = o};
    rx.signals.signum = 0;
    if (o->save_traces && !(rx.save = fopen(o->save_traces, "w"))) {
        fprintf(stderr, "tokenstorm topology: --save-traces %s: %s\n", o->save_traces,
                strerror(errno));
        return TS_EXIT_USAGE;
    }
    uv_loop_t loop;
    if (uv_loop_init(&loop)) {
        if (rx.save)
            fclose(rx.save);
        return TS_EXIT_FAIL;
    }
    int code = start_receiver(&rx, &loop);
    if (code == TS_EXIT_USAGE && !rx.server.loop) {
        uv_loop_close(&loop);
        if (rx.save)
            fclose(rx.save);
        return code;
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    *signum = rx.signals.signum;
    if (uv_loop_close(&loop))
        fprintf(stderr, "tokenstorm topology: a handle was left open\n");
    if (rx.save && fclose(rx.save)) {
        fprintf(stderr, "tokenstorm topology: --save-traces %s: write failed\n", o->save_traces);
        code = TS_EXIT_FAIL;
    }
    fprintf(stderr, "tokenstorm topology: received %llu exports, %zu spans (%llu refused)\n",
            (unsigned long long)rx.posts, spans->n, (unsigned long long)rx.refused);
    return code;
}

static int read_traces(const struct topology_opts *o, struct otlp_spans *spans)
{
    char err[512];
    for (size_t i = 0; i < o->n_traces; i++) {
        char *data = NULL;
        size_t len = 0;
        if (file_read_all(o->traces[i], TOPOLOGY_TRACE_FILE_MAX, &data, &len, err, sizeof(err))) {
            fprintf(stderr, "tokenstorm topology: --traces %s\n", err);
            return TS_EXIT_USAGE;
        }
        int rc = otlp_read_json(spans, data, len, err, sizeof(err));
        ts_free(data);
        if (rc) {
            fprintf(stderr, "tokenstorm topology: %s: %s\n", o->traces[i], err);
            return TS_EXIT_USAGE;
        }
    }
    return 0;
}

static int write_file(const char *dir, const char *name, const char *data, size_t len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f)) {
        fprintf(stderr, "tokenstorm topology: cannot write %s: %s\n", path, strerror(errno));
        return TS_EXIT_FAIL;
    }
    return 0;
}

/* The graph in one format into b ("json", "dot", "mermaid", "text"). */
static int render(const struct topo_graph *g, const char *fmt, struct buf *b)
{
    if (!strcmp(fmt, "json")) {
        json_t *doc = topo_to_json(g);
        char *s = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        json_decref(doc);
        int rc = s ? buf_append_str(b, s) : -ENOMEM;
        free(s);
        return rc ? rc : buf_append_char(b, '\n');
    }
    if (!strcmp(fmt, "dot"))
        return topo_write_dot(g, b);
    if (!strcmp(fmt, "svg"))
        return topo_svg_render(g, b);
    if (!strcmp(fmt, "html"))
        return topo_html_render(g, b);
    if (!strcmp(fmt, "mermaid"))
        return topo_write_mermaid(g, b);
    return topo_write_text(g, b);
}

static int outputs(const struct topology_opts *o, const struct topo_graph *g)
{
    static const char *fmts[] = {"json", "dot", "mermaid", "svg", "html"};
    static const char *names[] = {"topology.json", "topology.dot", "topology.mmd", "topology.svg",
                                  "topology.html"};
    struct buf b;
    char err[512];
    if (o->out_dir && file_mkdirs(o->out_dir, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm topology: %s\n", err);
        return TS_EXIT_FAIL;
    }
    for (int i = 0; o->out_dir && i < 5; i++) {
        buf_init(&b, 256u << 20);
        int rc = render(g, fmts[i], &b);
        int code = rc ? TS_EXIT_FAIL : write_file(o->out_dir, names[i], b.data, b.len);
        buf_release(&b);
        if (code)
            return code;
    }
    buf_init(&b, 256u << 20);
    int rc = render(g, o->format ? o->format : "text", &b);
    if (!rc && fwrite(b.data, 1, b.len, stdout) != b.len)
        rc = -EIO;
    buf_release(&b);
    return rc ? TS_EXIT_FAIL : 0;
}

int topology_job(const struct topology_opts *o)
{
    struct topo_graph *g = ts_calloc(1, sizeof(*g));
    if (!g)
        return TS_EXIT_FAIL;
    topo_init(g);
    struct otlp_spans spans;
    otlp_spans_init(&spans, 0);
    char err[512];
    int code = 0, signum = 0;
    if (o->source) {
        const char *py = o->python ? o->python : getenv("TOKENSTORM_PYTHON");
        int rc = topology_scan(g, py && *py ? py : "python3", o->source, o->max_files,
                               o->scan_timeout_ns, err, sizeof(err));
        if (rc) {
            fprintf(stderr, "tokenstorm topology: %s\n", err);
            code = rc == -ENOTDIR ? TS_EXIT_USAGE : TS_EXIT_FAIL;
            goto out;
        }
        for (size_t i = 0; i < g->n_errors; i++)
            fprintf(stderr, "tokenstorm topology: %s/%s:%d: %s\n", o->source, g->errors[i].file,
                    g->errors[i].line, g->errors[i].message);
    }
    if ((code = read_traces(o, &spans)))
        goto out;
    if (o->otlp_listen && (code = receive(o, &spans, &signum)))
        goto out;
    if (spans.rejected)
        fprintf(stderr, "tokenstorm topology: %llu malformed spans skipped (first: %s)\n",
                (unsigned long long)spans.rejected, spans.first_error);
    if (topo_add_spans(g, &spans) || topo_finish(g)) {
        fprintf(stderr, "tokenstorm topology: out of memory or over the graph's bounds\n");
        code = TS_EXIT_FAIL;
        goto out;
    }
    code = outputs(o, g);
    if (!code && signum)
        code = ts_exit_stopped(signum);
out:
    otlp_spans_release(&spans);
    topo_release(g);
    ts_free(g);
    return code;
}
