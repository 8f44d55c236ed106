/*
 * tokenstorm proxy - the chaos proxy in front of an LLM service: the
 * options and --check; serving them is app/serve_proxy.h.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

#include "base/units.h"
#include "app/serve_proxy.h"
#include "chaos/fault.h"
#include "chaos/proxy.h"
#include "cmd/cmd.h"
#include "cmd/cmd_opts.h"
#include "cmd/cmd_common.h"
#include "net/addr.h"
#include "telemetry/otlp.h"
#include "ts_config.h"

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: tokenstorm proxy --upstream URL [OPTIONS]\n\n"
        "A chaos proxy: forwards every request to URL (http:// or https://) and injects the\n"
        "faults that are active: HTTP aborts (429 with Retry-After, 5xx), delays, truncated\n"
        "bodies, rewritten headers, and SSE / LLM / RAG faults on streamed and JSON answers.\n"
        "With no fault active it is transparent. Faults come from --faults FILE.yaml and\n"
        "the REST control API; a request can ask for one with an x-tokenstorm-fault header.\n"
        "WebSocket upgrades (the Realtime API) are relayed to ws:// or wss:// with frame\n"
        "faults on the server's events: ws_delay, ws_drop, ws_duplicate, ws_truncate,\n"
        "ws_close, ws_stall. See docs/CHAOS.md.\n\n"
        "options:\n"
        "  --upstream URL         the service to forward to (required)\n"
        "  --listen HOST:PORT     where the proxy listens (default 127.0.0.1:9000; 0 = any)\n"
        "  --api HOST:PORT        the control API (default 127.0.0.1:9001; 0 = any port)\n"
        "  --no-api               run without the control API\n"
        "  --api-token TOKEN      require 'Authorization: Bearer TOKEN' on the control API\n"
        "                         (also TOKENSTORM_API_TOKEN); needed to bind it to an\n"
        "                         address other machines can reach (default none)\n"
        "  --api-insecure         serve a control API on such an address without a token\n"
        "                         (prints a warning: anyone who reaches it steers traffic)\n"
        "  --faults FILE.yaml     faults to start with ({faults: [spec, ...]}; default none:\n"
        "                         transparent until the control API adds some)\n"
        "  --seed N               seed of the probability rolls (default 1)\n"
        "  --threads N|auto       loop threads serving clients (default 1; auto: one per\n"
        "                         core, at most 64). The kernel spreads connections over\n"
        "                         them; use more than 1 for hundreds of busy streams\n"
        "  --no-io-uring          send to clients with write(2), not io_uring (also\n"
        "                         TOKENSTORM_IO_URING=0; default: io_uring where the kernel\n"
        "                         allows it, else write(2), said once at start)\n"
        "  --insecure             do not verify the upstream's TLS certificate\n"
        "  --cacert FILE          CA bundle for the upstream's certificate (default: the\n"
        "                         system's)\n"
        "  --timeout-connect DUR  upstream connect timeout (default 10s)\n"
        "  --grace DUR            on SIGINT/SIGTERM, let requests finish this long (default 5s)\n"
        "  --otlp-endpoint URL    export an OpenTelemetry span (OTLP/HTTP JSON) for each\n"
        "                         request with a traceparent that got a fault, with a\n"
        "                         \"tokenstorm.fault\" event per fault (also\n"
        "                         OTEL_EXPORTER_OTLP_*; default none)\n"
        "  --otlp-all             also export spans of traced requests without a fault\n"
        "  --retry-window DUR     attempts with one key within DUR of the last one's end are\n"
        "                         retries of one request (default 60s; retry amplification)\n"
        "  --retry-key HEADER     the idempotency header that links attempts (default\n"
        "                         Idempotency-Key; without it, method + path + body hash)\n"
        "  --orphan-max DUR       after a client left, read what its upstream still sends\n"
        "                         this long at most (default 60s; orphaned work)\n"
        "  --record DIR           write every exchange to DIR/rec-NNNNNN.jsonl (request,\n"
        "                         upstream status, headers, each event with its time;\n"
        "                         Authorization, api-key and cookies redacted; docs/CHAOS.md;\n"
        "                         default none)\n"
        "  --redact POINTER       also redact these request body fields (repeatable; '*'\n"
        "                         matches every element: /messages/*/content)\n"
        "  --record-max SIZE      delete the oldest files past this (default 1G)\n"
        "  --record-file-max SIZE a new file after this (default 64M)\n"
        "  --record-memory-max SIZE the exchanges being recorded hold at most this, as\n"
        "                         written (default 256M): past it an exchange keeps its\n"
        "                         first events, outcome recorder_full\n"
        "  --mirror URL           shadow traffic: also send each request to URL (the client\n"
        "                         only gets the primary's answer); both timed and compared\n"
        "                         in /metrics (tokenstorm_proxy_mirror_*; default none)\n"
        "  --mirror-share P       mirror this share of the requests (default 100%%)\n"
        "  --mirror-max N         mirror calls in flight at most; beyond, requests are not\n"
        "                         mirrored and counted as dropped (default 64)\n"
        "  --mirror-out DIR       also write the compared pairs, every 2 s and at the end:\n"
        "                         DIR/primary and DIR/mirror (result.json each: 'tokenstorm\n"
        "                         compare DIR/primary DIR/mirror'), DIR/mirror.json\n"
        "                         (drops, one-sided errors, similarity; default none)\n"
        "  --check                parse --faults, print them as JSON and exit\n"
        "  -q, --quiet            no progress or status lines;\n"
        "                         errors and the result still print)\n"
        "  -v, --verbose          debug logging\n"
        "  -h, --help             this text\n\n"
        "On start it prints the bound URLs:\n"
        "  tokenstorm proxy: listening on http://127.0.0.1:9000 -> http://127.0.0.1:8000\n"
        "  tokenstorm proxy: control API on http://127.0.0.1:9001\n\n"
        "examples:\n"
        "  tokenstorm sim --listen 127.0.0.1:8000 &\n"
        "  tokenstorm proxy --upstream http://127.0.0.1:8000 --faults examples/faults.yaml\n"
        "  curl -X POST localhost:9001/faults -d "
        "'{\"name\":\"storm\",\"type\":\"http_abort\",\"status\":429,\"probability\":0.2}'\n"
        "  curl localhost:9001/metrics\n"
        "  curl localhost:9001/chain      # retry amplification and orphaned work, per 250 ms\n"
        "  curl localhost:9000/v1/models -H 'x-tokenstorm-fault-abort: 503'\n"
        "  tokenstorm run --target http://127.0.0.1:9000 --rate 5 --duration 30s\n");
}

enum {
    OPT_UPSTREAM = 256,
    OPT_LISTEN,
    OPT_API,
    OPT_NO_API,
    OPT_FAULTS,
    OPT_SEED,
    OPT_INSECURE,
    OPT_NO_IO_URING,
    OPT_CACERT,
    OPT_CONNECT_TIMEOUT,
    OPT_GRACE,
    OPT_CHECK,
    OPT_OTLP_ENDPOINT,
    OPT_OTLP_ALL,
    OPT_THREADS,
    OPT_API_TOKEN,
    OPT_API_INSECURE,
    OPT_RETRY_WINDOW,
    OPT_RETRY_KEY,
    OPT_ORPHAN_MAX,
    OPT_RECORD,
    OPT_REDACT,
    OPT_RECORD_MAX,
    OPT_RECORD_FILE_MAX,
    OPT_RECORD_MEMORY_MAX,
    OPT_MIRROR,
    OPT_MIRROR_SHARE,
    OPT_MIRROR_MAX,
    OPT_MIRROR_OUT,
    OPT_VERSION,
};

/* The command line, as given; resolve_addresses finishes serve.cfg. */
struct proxy_opts {
    struct serve_proxy_opts serve; /* cfg, faults_path, quiet; the rest in cmd_proxy */
    const char *listen, *api, *otlp_endpoint, *api_token;
    uint64_t grace_ns, connect_ns;
    bool check, api_insecure;
    struct recorder_config record;
    const char *redact[RECORDER_MAX_REDACT];
    char host[ADDR_HOST_MAX], api_host[ADDR_HOST_MAX]; /* serve.cfg's hosts */
};

/* --seed N. Returns -1, or the exit code with the message printed. */
static int parse_seed(struct proxy_opts *o, const char *arg)
{
    char *end;
    o->serve.cfg.seed = strtoull(arg, &end, 10);
    if (!*arg || *end) {
        fprintf(stderr, "tokenstorm proxy: --seed: expected an integer, got '%s'\n", arg);
        return TS_EXIT_USAGE;
    }
    return -1;
}

/* --threads N|auto (auto: one per core, at most PROXY_THREADS_MAX). Returns -1 or the exit code. */
static int parse_threads(struct proxy_opts *o, const char *arg)
{
    bool aut = strcmp(arg, "auto") == 0;
    char *end = NULL;
    long n = aut ? (long)uv_available_parallelism() : strtol(arg, &end, 10);
    if (aut && n > PROXY_THREADS_MAX)
        n = PROXY_THREADS_MAX;
    if ((!aut && (!*arg || *end)) || n < 1 || n > PROXY_THREADS_MAX) {
        fprintf(stderr, "tokenstorm proxy: --threads: expected 1..%d or auto, got '%s'\n",
                PROXY_THREADS_MAX, arg);
        return TS_EXIT_USAGE;
    }
    o->serve.cfg.threads = (int)n;
    return -1;
}

/* --timeout-connect, --grace, --retry-window, --orphan-max. Returns -1 or the exit code. */
static int parse_duration(struct proxy_opts *o, int c, const char *arg)
{
    static const struct {
        int opt;
        const char *name;
    } names[] = {{OPT_GRACE, "grace"},
                 {OPT_CONNECT_TIMEOUT, "timeout-connect"},
                 {OPT_RETRY_WINDOW, "retry-window"},
                 {OPT_ORPHAN_MAX, "orphan-max"}};
    uint64_t *to[] = {&o->grace_ns, &o->connect_ns, &o->serve.cfg.retry_window_ns,
                      &o->serve.cfg.orphan_max_ns};
    size_t k = 0;
    while (k < 3 && names[k].opt != c)
        k++;
    if (units_parse_duration_ns(arg, to[k]) != 0 || (k >= 2 && *to[k] == 0)) {
        fprintf(stderr, "tokenstorm proxy: --%s: expected a duration (\"5s\"), got '%s'\n",
                names[k].name, arg);
        return TS_EXIT_USAGE;
    }
    return -1;
}

/* --mirror, --mirror-share, --mirror-max, --mirror-out. Returns -1 or the exit code. */
static int take_mirror_option(struct proxy_config *cfg, int c, const char *arg)
{
    if (c == OPT_MIRROR || c == OPT_MIRROR_OUT) {
        *(c == OPT_MIRROR ? &cfg->mirror_url : &cfg->mirror_out) = arg;
        return -1;
    }
    char *end;
    double v = strtod(arg, &end);
    bool pct = c == OPT_MIRROR_SHARE && *end == '%';
    if (pct) {
        v /= 100;
        end++;
    }
    bool ok = end != arg && !*end &&
              (c == OPT_MIRROR_SHARE ? v > 0 && v <= 1 : v >= 1 && v <= 100000 && v == (int)v);
    if (!ok) {
        fprintf(stderr, "tokenstorm proxy: --%s: expected %s, got '%s'\n",
                c == OPT_MIRROR_SHARE ? "mirror-share" : "mirror-max",
                c == OPT_MIRROR_SHARE ? "a share in (0%, 100%]" : "a count 1..100000", arg);
        return TS_EXIT_USAGE;
    }
    if (c == OPT_MIRROR_SHARE)
        cfg->mirror_share = v;
    else
        cfg->mirror_max = (int)v;
    return -1;
}

/* One option c (with its argument arg) into o. Returns -1 to go on, or the exit code. */
static int take_option(struct proxy_opts *o, int c, const char *arg)
{
    struct proxy_config *cfg = &o->serve.cfg;
    switch (c) {
    case OPT_UPSTREAM:
        cfg->upstream = arg;
        return -1;
    case OPT_LISTEN:
        o->listen = arg;
        return -1;
    case OPT_API:
        o->api = arg;
        cfg->api = true;
        return -1;
    case OPT_NO_API:
        cfg->api = false;
        return -1;
    case OPT_FAULTS:
        o->serve.faults_path = arg;
        return -1;
    case OPT_SEED:
        return parse_seed(o, arg);
    case OPT_INSECURE:
        cfg->insecure = true;
        return -1;
    case OPT_NO_IO_URING:
        cfg->no_io_uring = true;
        return -1;
    case OPT_CACERT:
        cfg->ca_file = arg;
        return -1;
    case OPT_CONNECT_TIMEOUT:
    case OPT_GRACE:
    case OPT_RETRY_WINDOW:
    case OPT_ORPHAN_MAX:
        return parse_duration(o, c, arg);
    case OPT_RECORD:
        o->record.dir = arg;
        cfg->record = &o->record;
        return -1;
    case OPT_REDACT:
        if (o->record.nredact == RECORDER_MAX_REDACT) {
            fprintf(stderr, "tokenstorm proxy: --redact: at most %d\n", RECORDER_MAX_REDACT);
            return TS_EXIT_USAGE;
        }
        o->redact[o->record.nredact++] = arg;
        o->record.redact = o->redact;
        return -1;
    case OPT_RECORD_MAX:
    case OPT_RECORD_FILE_MAX:
    case OPT_RECORD_MEMORY_MAX: {
        uint64_t *to = c == OPT_RECORD_MAX        ? &o->record.max_total
                       : c == OPT_RECORD_FILE_MAX ? &o->record.max_file
                                                  : &o->record.max_inflight;
        if (units_parse_size(arg, to) != 0 || *to < 4096) {
            fprintf(stderr,
                    "tokenstorm proxy: --%s: expected a size of at least 4K (\"64M\"), got '%s'\n",
                    c == OPT_RECORD_MAX        ? "record-max"
                    : c == OPT_RECORD_FILE_MAX ? "record-file-max"
                                               : "record-memory-max",
                    arg);
            return TS_EXIT_USAGE;
        }
        return -1;
    }
    case OPT_MIRROR:
    case OPT_MIRROR_SHARE:
    case OPT_MIRROR_MAX:
    case OPT_MIRROR_OUT:
        return take_mirror_option(&o->serve.cfg, c, arg);
    case OPT_RETRY_KEY:
        if (!*arg || strpbrk(arg, " :\r\n")) {
            fprintf(stderr, "tokenstorm proxy: --retry-key: expected a header name, got '%s'\n",
                    arg);
            return TS_EXIT_USAGE;
        }
        cfg->retry_key = arg;
        return -1;
    case OPT_CHECK:
        o->check = true;
        return -1;
    case OPT_OTLP_ENDPOINT:
        o->otlp_endpoint = arg;
        return -1;
    case OPT_OTLP_ALL:
        cfg->otlp_all = true;
        return -1;
    case OPT_THREADS:
        return parse_threads(o, arg);
    case OPT_API_TOKEN:
        o->api_token = arg;
        return -1;
    case OPT_API_INSECURE:
        o->api_insecure = true;
        return -1;
    case 'q':
        o->serve.quiet = true;
        return -1;
    case OPT_VERSION:
        return cmd_common_flag('V', usage);
    default: /* -v, -h, or what cmd_getopt said was wrong */
        return cmd_common_flag(c, usage);
    }
}

/* argv into o. Returns -1 to go on, or the exit code (help, a bad option). */
static int parse_args(int argc, char **argv, struct proxy_opts *o)
{
    static const struct option opts[] = {
        {"upstream", required_argument, NULL, OPT_UPSTREAM},
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"api", required_argument, NULL, OPT_API},
        {"no-api", no_argument, NULL, OPT_NO_API},
        {"faults", required_argument, NULL, OPT_FAULTS},
        {"seed", required_argument, NULL, OPT_SEED},
        {"insecure", no_argument, NULL, OPT_INSECURE},
        {"no-io-uring", no_argument, NULL, OPT_NO_IO_URING},
        {"cacert", required_argument, NULL, OPT_CACERT},
        {"timeout-connect", required_argument, NULL, OPT_CONNECT_TIMEOUT},
        {"connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT}, /* old name */
        {"grace", required_argument, NULL, OPT_GRACE},
        {"check", no_argument, NULL, OPT_CHECK},
        {"otlp-endpoint", required_argument, NULL, OPT_OTLP_ENDPOINT},
        {"otlp-all", no_argument, NULL, OPT_OTLP_ALL},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"api-token", required_argument, NULL, OPT_API_TOKEN},
        {"api-insecure", no_argument, NULL, OPT_API_INSECURE},
        {"retry-window", required_argument, NULL, OPT_RETRY_WINDOW},
        {"retry-key", required_argument, NULL, OPT_RETRY_KEY},
        {"orphan-max", required_argument, NULL, OPT_ORPHAN_MAX},
        {"record", required_argument, NULL, OPT_RECORD},
        {"redact", required_argument, NULL, OPT_REDACT},
        {"record-max", required_argument, NULL, OPT_RECORD_MAX},
        {"record-file-max", required_argument, NULL, OPT_RECORD_FILE_MAX},
        {"record-memory-max", required_argument, NULL, OPT_RECORD_MEMORY_MAX},
        {"mirror", required_argument, NULL, OPT_MIRROR},
        {"mirror-share", required_argument, NULL, OPT_MIRROR_SHARE},
        {"mirror-max", required_argument, NULL, OPT_MIRROR_MAX},
        {"mirror-out", required_argument, NULL, OPT_MIRROR_OUT},
        {"quiet", no_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    int c, rc;
    *o = (struct proxy_opts){
        .serve = {.cfg = {.api = true, .seed = 1}},
        .listen = "127.0.0.1:9000",
        .api = "127.0.0.1:9001",
        .grace_ns = 5000000000ull,
        .connect_ns = 10000000000ull,
    };
    optind = 1;
    while ((c = cmd_getopt("proxy", argc, argv, "qvh", opts, NULL)) != -1) {
        if ((rc = take_option(o, c, optarg)) >= 0)
            return rc;
    }
    if (optind < argc) {
        fprintf(stderr, "tokenstorm proxy: unexpected argument '%s'\n", argv[optind]);
        return TS_EXIT_USAGE;
    }
    if (o->serve.cfg.mirror_out && !o->serve.cfg.mirror_url) {
        fprintf(stderr, "tokenstorm proxy: --mirror-out needs --mirror URL\n");
        return TS_EXIT_USAGE;
    }
    if (o->record.nredact && !o->record.dir) {
        fprintf(stderr, "tokenstorm proxy: --redact needs --record DIR\n");
        return TS_EXIT_USAGE;
    }
    return -1;
}

/* --check: every spec of the --faults file (specs; NULL: none) as the proxy reads it, on stdout. */
static int print_faults(const char *path, const json_t *specs)
{
    json_t *out = json_array();
    size_t i;
    json_t *v;
    int ok = out != NULL;
    json_array_foreach(specs, i, v)
    {
        struct fault f;
        char msg[512];
        if (fault_parse_json(v, &f, msg, sizeof msg) != 0) {
            fprintf(stderr, "tokenstorm proxy: %s: faults[%zu]: %s\n", path, i, msg);
            ok = 0;
            break;
        }
        if (json_array_append_new(out, fault_to_json(&f, 0)) != 0)
            ok = 0;
    }
    if (ok) {
        char *s = json_dumps(out, JSON_INDENT(2));
        if (s)
            printf("%s\n", s);
        free(s);
    }
    json_decref(out);
    return ok ? TS_EXIT_OK : TS_EXIT_USAGE;
}

/*
 * --upstream (required), --listen and --api into serve.cfg, and the times in
 * ms. Returns -1, or the exit code with the message printed.
 */
static int resolve_addresses(struct proxy_opts *o)
{
    struct proxy_config *cfg = &o->serve.cfg;
    char err[1024];
    if (!cfg->upstream) {
        fprintf(stderr, "tokenstorm proxy: --upstream URL is required; see 'tokenstorm proxy "
                        "--help'\n");
        return TS_EXIT_USAGE;
    }
    if (addr_parse(o->listen, "127.0.0.1", o->host, &cfg->listen_port, err, sizeof err) ||
        (cfg->api &&
         addr_parse(o->api, "127.0.0.1", o->api_host, &cfg->api_port, err, sizeof err))) {
        fprintf(stderr, "tokenstorm proxy: %s: %s\n", cfg->api ? "--listen/--api" : "--listen",
                err);
        return TS_EXIT_USAGE;
    }
    cfg->listen_host = o->host;
    cfg->api_host = o->api_host;
    const char *ur = getenv("TOKENSTORM_IO_URING");
    if (ur && *ur) {
        if (!strcmp(ur, "0") || !strcasecmp(ur, "off") || !strcasecmp(ur, "no"))
            cfg->no_io_uring = true;
        else if (strcmp(ur, "1") && strcasecmp(ur, "on") && strcasecmp(ur, "yes")) {
            fprintf(stderr,
                    "tokenstorm proxy: TOKENSTORM_IO_URING: expected 0/off or 1/on, "
                    "got '%.40s'\n",
                    ur);
            return TS_EXIT_USAGE;
        }
    }
    if (cfg->api) {
        int rc = cmd_ctlauth_setup("tokenstorm proxy", "--api", "the control API", o->api_host,
                                   o->api_token, o->api_insecure, &cfg->api_token);
        if (rc >= 0)
            return rc;
    }
    cfg->connect_timeout_ms = (uint32_t)(o->connect_ns / 1000000 ? o->connect_ns / 1000000 : 1);
    o->serve.grace_ms = o->grace_ns / 1000000;
    return -1;
}

int cmd_proxy(int argc, char **argv)
{
    struct proxy_opts o;
    struct otlp_config otlp;
    json_t *specs = NULL;
    char err[1024];
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (o.serve.faults_path && fault_file_load(o.serve.faults_path, &specs, err, sizeof err) != 0) {
        fprintf(stderr, "tokenstorm proxy: --faults: %s\n", err);
        rc = TS_EXIT_USAGE;
        goto out;
    }
    if (o.check) {
        rc = print_faults(o.serve.faults_path, specs);
        goto out_specs;
    }
    if ((rc = resolve_addresses(&o)) >= 0)
        goto out_specs;
    otlp_config_init(&otlp);
    if (otlp_config_from_env(&otlp, o.otlp_endpoint, err, sizeof err) != 0) {
        fprintf(stderr, "tokenstorm proxy: %s\n", err);
        rc = TS_EXIT_USAGE;
        goto out_otlp;
    }
    o.serve.faults = specs;
    o.serve.otlp = &otlp;
    rc = serve_proxy(&o.serve);
out_otlp:
    otlp_config_release(&otlp);
out_specs:
    json_decref(specs);
out:
    return rc;
}
