/*
 * tokenstorm proxy - the chaos proxy in front of an LLM service.
 */
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "base/log.h"
#include "base/units.h"
#include "chaos/proxy.h"
#include "cmd/cmd.h"
#include "net/addr.h"
#include "telemetry/otlp.h"

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
        "See docs/CHAOS.md.\n\n"
        "options:\n"
        "  --upstream URL         the service to forward to (required)\n"
        "  --listen HOST:PORT     where the proxy listens (default 127.0.0.1:9000; 0 = any)\n"
        "  --api HOST:PORT        the control API (default 127.0.0.1:9001; 0 = any port)\n"
        "  --no-api               run without the control API\n"
        "  --faults FILE.yaml     faults to start with ({faults: [spec, ...]})\n"
        "  --seed N               seed of the probability rolls (default 1)\n"
        "  --threads N|auto       loop threads serving clients (default 1; auto: one per\n"
        "                         core, at most 64). The kernel spreads connections over\n"
        "                         them; use more than 1 for hundreds of busy streams\n"
        "  --insecure             do not verify the upstream's TLS certificate\n"
        "  --cacert FILE          CA bundle for the upstream's certificate\n"
        "  --connect-timeout DUR  upstream connect timeout (default 10s)\n"
        "  --grace DUR            on SIGINT/SIGTERM, let requests finish this long (default 5s)\n"
        "  --otlp-endpoint URL    export an OpenTelemetry span (OTLP/HTTP JSON) for each\n"
        "                         request with a traceparent that got a fault, with a\n"
        "                         \"tokenstorm.fault\" event per fault (also "
        "OTEL_EXPORTER_OTLP_*)\n"
        "  --otlp-all             also export spans of traced requests without a fault\n"
        "  --check                parse --faults, print them as JSON and exit\n"
        "  -q, --quiet            print nothing but errors\n"
        "  -v, --verbose          debug logging\n"
        "  -h, --help             this text\n\n"
        "On start it prints the bound URLs:\n"
        "  tokenstorm proxy: listening on http://127.0.0.1:9000 -> http://127.0.0.1:8000\n"
        "  tokenstorm proxy: control API on http://127.0.0.1:9001\n\n"
        "examples:\n"
        "  tokenstorm sim --listen 127.0.0.1:8000 &\n"
        "  tokenstorm proxy --upstream http://127.0.0.1:8000 --faults examples/chaos/faults.yaml\n"
        "  curl -X POST localhost:9001/faults -d "
        "'{\"name\":\"storm\",\"type\":\"http_abort\",\"status\":429,\"probability\":0.2}'\n"
        "  curl localhost:9001/metrics\n"
        "  curl localhost:9000/v1/models -H 'x-tokenstorm-fault-abort: 503'\n"
        "  tokenstorm run --target http://127.0.0.1:9000 --rate 5 --duration 30s\n");
}

struct proxy_main {
    struct proxy proxy;
    uv_signal_t sigint, sigterm;
    uint64_t grace_ms;
    bool stopping;
};

static void on_proxy_closed(struct proxy *p)
{
    struct proxy_main *m = (struct proxy_main *)((char *)p - offsetof(struct proxy_main, proxy));
    uv_close((uv_handle_t *)&m->sigint, NULL);
    uv_close((uv_handle_t *)&m->sigterm, NULL);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct proxy_main *m = h->data;
    if (m->stopping)
        return;
    m->stopping = true;
    ts_info("proxy: %s: finishing requests (grace %llu ms)",
            signum == SIGINT ? "SIGINT" : "SIGTERM", (unsigned long long)m->grace_ms);
    proxy_shutdown(&m->proxy, m->grace_ms, on_proxy_closed);
}

static const char *bracket(const char *host, int open)
{
    return strchr(host, ':') ? (open ? "[" : "]") : "";
}

int cmd_proxy(int argc, char **argv)
{
    enum {
        OPT_UPSTREAM = 256,
        OPT_LISTEN,
        OPT_API,
        OPT_NO_API,
        OPT_FAULTS,
        OPT_SEED,
        OPT_INSECURE,
        OPT_CACERT,
        OPT_CONNECT_TIMEOUT,
        OPT_GRACE,
        OPT_CHECK,
        OPT_OTLP_ENDPOINT,
        OPT_OTLP_ALL,
        OPT_THREADS,
    };
    static const struct option opts[] = {
        {"upstream", required_argument, NULL, OPT_UPSTREAM},
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"api", required_argument, NULL, OPT_API},
        {"no-api", no_argument, NULL, OPT_NO_API},
        {"faults", required_argument, NULL, OPT_FAULTS},
        {"seed", required_argument, NULL, OPT_SEED},
        {"insecure", no_argument, NULL, OPT_INSECURE},
        {"cacert", required_argument, NULL, OPT_CACERT},
        {"connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT},
        {"grace", required_argument, NULL, OPT_GRACE},
        {"check", no_argument, NULL, OPT_CHECK},
        {"otlp-endpoint", required_argument, NULL, OPT_OTLP_ENDPOINT},
        {"otlp-all", no_argument, NULL, OPT_OTLP_ALL},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"quiet", no_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *listen = "127.0.0.1:9000", *api = "127.0.0.1:9001", *faults = NULL;
    const char *otlp_endpoint = NULL;
    struct proxy_config cfg = {.api = true, .seed = 1};
    uint64_t grace_ns = 5000000000ull, connect_ns = 10000000000ull;
    bool quiet = false, check = false;
    char err[1024];
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "qvh", opts, NULL)) != -1) {
        switch (c) {
        case OPT_UPSTREAM:
            cfg.upstream = optarg;
            break;
        case OPT_LISTEN:
            listen = optarg;
            break;
        case OPT_API:
            api = optarg;
            cfg.api = true;
            break;
        case OPT_NO_API:
            cfg.api = false;
            break;
        case OPT_FAULTS:
            faults = optarg;
            break;
        case OPT_SEED: {
            char *end;
            cfg.seed = strtoull(optarg, &end, 10);
            if (!*optarg || *end) {
                fprintf(stderr, "tokenstorm proxy: --seed: expected an integer, got '%s'\n",
                        optarg);
                return TS_EXIT_USAGE;
            }
            break;
        }
        case OPT_INSECURE:
            cfg.insecure = true;
            break;
        case OPT_CACERT:
            cfg.ca_file = optarg;
            break;
        case OPT_CONNECT_TIMEOUT:
        case OPT_GRACE:
            if (units_parse_duration_ns(optarg, c == OPT_GRACE ? &grace_ns : &connect_ns) != 0) {
                fprintf(stderr, "tokenstorm proxy: --%s: expected a duration (\"5s\"), got '%s'\n",
                        c == OPT_GRACE ? "grace" : "connect-timeout", optarg);
                return TS_EXIT_USAGE;
            }
            break;
        case OPT_CHECK:
            check = true;
            break;
        case OPT_OTLP_ENDPOINT:
            otlp_endpoint = optarg;
            break;
        case OPT_OTLP_ALL:
            cfg.otlp_all = true;
            break;
        case OPT_THREADS: {
            bool aut = strcmp(optarg, "auto") == 0;
            char *end = NULL;
            long n = aut ? (long)uv_available_parallelism() : strtol(optarg, &end, 10);
            if (aut && n > PROXY_THREADS_MAX)
                n = PROXY_THREADS_MAX;
            if ((!aut && (!*optarg || *end)) || n < 1 || n > PROXY_THREADS_MAX) {
                fprintf(stderr, "tokenstorm proxy: --threads: expected 1..%d or auto, got '%s'\n",
                        PROXY_THREADS_MAX, optarg);
                return TS_EXIT_USAGE;
            }
            cfg.threads = (int)n;
            break;
        }
        case 'q':
            quiet = true;
            break;
        case 'v':
            ts_log_set_level(TS_LOG_DEBUG);
            break;
        case 'h':
            usage(stdout);
            return TS_EXIT_OK;
        default:
            usage(stderr);
            return TS_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tokenstorm proxy: unexpected argument '%s'\n", argv[optind]);
        return TS_EXIT_USAGE;
    }
    json_t *specs = NULL;
    if (faults && fault_file_load(faults, &specs, err, sizeof err) != 0) {
        fprintf(stderr, "tokenstorm proxy: --faults: %s\n", err);
        return TS_EXIT_USAGE;
    }
    if (check) {
        json_t *out = json_array();
        size_t i;
        json_t *v;
        int ok = out != NULL;
        json_array_foreach(specs, i, v)
        {
            struct fault f;
            char msg[512];
            if (fault_parse_json(v, &f, msg, sizeof msg) != 0) {
                fprintf(stderr, "tokenstorm proxy: %s: faults[%zu]: %s\n", faults, i, msg);
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
        json_decref(specs);
        return ok ? TS_EXIT_OK : TS_EXIT_USAGE;
    }
    if (!cfg.upstream) {
        fprintf(stderr, "tokenstorm proxy: --upstream URL is required\n\n");
        usage(stderr);
        json_decref(specs);
        return TS_EXIT_USAGE;
    }
    char host[ADDR_HOST_MAX], api_host[ADDR_HOST_MAX];
    if (addr_parse(listen, "127.0.0.1", host, &cfg.listen_port, err, sizeof err) ||
        (cfg.api && addr_parse(api, "127.0.0.1", api_host, &cfg.api_port, err, sizeof err))) {
        fprintf(stderr, "tokenstorm proxy: %s: %s\n", cfg.api ? "--listen/--api" : "--listen", err);
        json_decref(specs);
        return TS_EXIT_USAGE;
    }
    cfg.listen_host = host;
    cfg.api_host = api_host;
    cfg.connect_timeout_ms = (uint32_t)(connect_ns / 1000000 ? connect_ns / 1000000 : 1);
    struct otlp_config otlp;
    otlp_config_init(&otlp);
    if (otlp_config_from_env(&otlp, otlp_endpoint, err, sizeof err) != 0) {
        fprintf(stderr, "tokenstorm proxy: %s\n", err);
        otlp_config_release(&otlp);
        json_decref(specs);
        return TS_EXIT_USAGE;
    }
    if (http_client_global_init()) {
        fprintf(stderr, "tokenstorm proxy: cannot initialise libcurl\n");
        otlp_config_release(&otlp);
        json_decref(specs);
        return TS_EXIT_FAIL;
    }
    if (otlp.endpoint && otlp_exporter_new(&otlp, &cfg.otlp, err, sizeof err) != 0) {
        fprintf(stderr, "tokenstorm proxy: OTLP exporter: %s\n", err);
        otlp_config_release(&otlp);
        json_decref(specs);
        http_client_global_cleanup();
        return TS_EXIT_FAIL;
    }
    otlp_config_release(&otlp);

    uv_loop_t loop;
    if (uv_loop_init(&loop)) {
        fprintf(stderr, "tokenstorm proxy: cannot create the event loop\n");
        otlp_exporter_close(cfg.otlp, NULL);
        json_decref(specs);
        http_client_global_cleanup();
        return TS_EXIT_FAIL;
    }
    struct proxy_main m = {.grace_ms = grace_ns / 1000000};
    int exit_code = TS_EXIT_OK;
    int rc = proxy_init(&m.proxy, &loop, &cfg, err, sizeof err);
    if (rc) {
        fprintf(stderr, "tokenstorm proxy: %s\n", err);
        uv_run(&loop, UV_RUN_DEFAULT);
        exit_code = TS_EXIT_USAGE;
        goto out_loop;
    }
    uv_signal_init(&loop, &m.sigint);
    uv_signal_init(&loop, &m.sigterm);
    m.sigint.data = m.sigterm.data = &m;
    if (specs && proxy_add_faults(&m.proxy, specs, err, sizeof err) != 0) {
        fprintf(stderr, "tokenstorm proxy: %s: %s\n", faults, err);
        exit_code = TS_EXIT_USAGE;
        proxy_shutdown(&m.proxy, 0, on_proxy_closed);
        uv_run(&loop, UV_RUN_DEFAULT);
        goto out_loop;
    }
    if (proxy_listen(&m.proxy, err, sizeof err) != 0) {
        fprintf(stderr, "tokenstorm proxy: %s\n", err);
        exit_code = TS_EXIT_FAIL;
        proxy_shutdown(&m.proxy, 0, on_proxy_closed);
        uv_run(&loop, UV_RUN_DEFAULT);
        goto out_loop;
    }
    uv_signal_start(&m.sigint, on_signal, SIGINT);
    uv_signal_start(&m.sigterm, on_signal, SIGTERM);
    if (!quiet) {
        char thr[48] = "";
        if (m.proxy.n_workers > 1)
            snprintf(thr, sizeof thr, " (%d loop threads)", m.proxy.n_workers);
        printf("tokenstorm proxy: listening on http://%s%s%s:%d -> %s%s\n", bracket(host, 1), host,
               bracket(host, 0), proxy_port(&m.proxy), m.proxy.upstream, thr);
        if (cfg.api)
            printf("tokenstorm proxy: control API on http://%s%s%s:%d\n", bracket(api_host, 1),
                   api_host, bracket(api_host, 0), proxy_api_port(&m.proxy));
        printf("tokenstorm proxy: %zu fault(s) loaded, seed %" PRIu64 "\n", m.proxy.faults.n,
               cfg.seed);
        fflush(stdout);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    if (!quiet)
        printf("tokenstorm proxy: stopped: %llu requests, %llu upstream errors\n",
               (unsigned long long)m.proxy.requests_total,
               (unsigned long long)m.proxy.upstream_errors);
out_loop:
    if (uv_loop_close(&loop))
        ts_warn("proxy: event loop closed with handles open");
    if (cfg.otlp) { /* after the loop: no request pushes any more */
        struct otlp_stats st;
        otlp_exporter_close(cfg.otlp, &st);
        if (!quiet) {
            char line[256];
            otlp_stats_format(&st, line, sizeof line);
            printf("tokenstorm proxy: %s\n", line);
        }
    }
    json_decref(specs);
    http_client_global_cleanup();
    return exit_code;
}
