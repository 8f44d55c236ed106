/*
 * tokenstorm sim - the simulator as a standalone OpenAI-compatible server.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "base/log.h"
#include "base/units.h"
#include "cmd/cmd.h"
#include "net/addr.h"
#include "sim/server.h"
#include "ts_config.h"

#define SIM_DEFAULT_PROFILE "llama3-8b-a100"

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: tokenstorm sim [OPTIONS]\n\n"
        "An OpenAI-compatible simulator of a continuous-batching LLM server (vLLM-like):\n"
        "/v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models, /health,\n"
        "/metrics. Latency follows an engine model with a token budget, KV-cache blocks,\n"
        "queueing and preemption, so load curves have the knees a GPU server has.\n\n"
        "options:\n"
        "  --listen HOST:PORT     where to listen (default 127.0.0.1:8000; port 0 = any)\n"
        "  --profile NAME         model/hardware preset (default " SIM_DEFAULT_PROFILE
        "; see --list-profiles)\n"
        "  --config FILE.yaml     profile overrides (keys as for --set; 'base: PRESET')\n"
        "  --set KEY=VALUE        override one profile field (repeatable)\n"
        "  --model NAME           served model id (default: the profile's)\n"
        "  --any-model            accept any model name instead of answering 404\n"
        "  --no-noise             exact step times (no jitter, no stalls)\n"
        "  --seed N               seed of the noise and of the generated text\n"
        "  --output-len DIST      natural answer length in tokens when ignore_eos is not\n"
        "                         set (default lognormal:180,0.7)\n"
        "  --answers FILE.jsonl   {\"prompt\":..,\"answer\":..} lines: known questions get\n"
        "                         their reference answer\n"
        "  --trace-log FILE.jsonl ground truth per request: arrival, admission, each\n"
        "                         token's send time, finish\n"
        "  --header-timeout DUR   cut clients whose headers take longer (default 10s)\n"
        "  --sign-chunks KEY      put a chained HMAC-SHA256 signature on every stream event\n"
        "                         (in the SSE id field; run --integrity hmac checks it)\n"
        "  --admin                the admin API for chaos faults: POST/GET/DELETE\n"
        "                         /admin/faults (kv_shrink, stall, cold_start, error_rate;\n"
        "                         docs/CHAOS.md)\n"
        "  --vector-docs FILE     passages of the vector store (POST "
        "/v1/vector_stores/ID/search):\n"
        "                         JSONL "
        "{\"text\":..,\"id\":..,\"filename\":..,\"attributes\":{..}}\n"
        "                         or plain text, one passage a line (default: 200 built-in\n"
        "                         passages on 20 topics)\n"
        "  --vector-store-id ID   the store's id besides vs_default\n"
        "  --vector-latency DUR   fixed time of a search (default 2ms; 0 = none)\n"
        "  --vector-doc-latency DUR  time per passage searched (default 1us)\n"
        "  --grace DUR            on SIGINT/SIGTERM, let streams finish this long (default 10s)\n"
        "  --list-profiles        print the presets and every settable key, then exit\n"
        "  -q, --quiet            print nothing but errors\n"
        "  -v, --verbose          debug logging\n"
        "  -h, --help             this text\n"
        "      --version          print the version\n\n"
        "examples:\n"
        "  tokenstorm sim --listen 127.0.0.1:8000\n"
        "  tokenstorm sim --profile llama3-70b-4xh100 --set max_num_seqs=128\n"
        "  tokenstorm sim --profile tiny --no-noise --trace-log truth.jsonl\n"
        "  tokenstorm sim --vector-docs kb.jsonl --vector-latency 20ms\n"
        "  curl -N localhost:8000/v1/chat/completions -H 'content-type: application/json' \\\n"
        "       -d "
        "'{\"model\":\"x\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}'"
        "\n");
}

static void list_profiles(void)
{
    printf("presets:\n");
    for (const char *const *n = sim_profile_names(); *n; n++) {
        struct sim_profile p;
        struct sim_profile_caps caps;
        if (sim_profile_preset(*n, &p) || sim_profile_derive(&p, &caps))
            continue;
        printf("  %-20s %s: KV %llu tokens, max_num_seqs %u, step >= %.2f ms, knee %.0f tokens\n",
               *n, p.model, (unsigned long long)caps.kv_tokens, caps.max_seqs, caps.min_step_ms,
               caps.knee_tokens);
    }
    printf("\nkeys (--set KEY=VALUE, or in --config FILE.yaml):\n");
    for (const char *const *k = sim_profile_keys(); *k; k++)
        printf("  %-24s %s\n", *k, sim_profile_key_help(*k));
}

struct sim_main {
    struct sim_server *server;
    uv_signal_t sigint, sigterm;
    uint64_t grace_ms;
    int signals_open;
    bool stopping;
};

static void on_signal_closed(uv_handle_t *h)
{
    struct sim_main *m = h->data;
    m->signals_open--;
}

static void on_server_closed(struct sim_server *s, void *arg)
{
    struct sim_main *m = arg;
    uv_close((uv_handle_t *)&m->sigint, on_signal_closed);
    uv_close((uv_handle_t *)&m->sigterm, on_signal_closed);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct sim_main *m = h->data;
    if (m->stopping)
        return;
    m->stopping = true;
    ts_info("sim: %s: finishing streams (grace %llu ms)", signum == SIGINT ? "SIGINT" : "SIGTERM",
            (unsigned long long)m->grace_ms);
    sim_server_shutdown(m->server, m->grace_ms, on_server_closed, m);
}

int cmd_sim(int argc, char **argv)
{
    enum {
        OPT_LISTEN = 256,
        OPT_PROFILE,
        OPT_CONFIG,
        OPT_SET,
        OPT_MODEL,
        OPT_ANY_MODEL,
        OPT_NO_NOISE,
        OPT_SEED,
        OPT_OUTPUT_LEN,
        OPT_ANSWERS,
        OPT_TRACE_LOG,
        OPT_HEADER_TIMEOUT,
        OPT_GRACE,
        OPT_LIST,
        OPT_SIGN,
        OPT_ADMIN,
        OPT_VECTOR_DOCS,
        OPT_VECTOR_ID,
        OPT_VECTOR_LATENCY,
        OPT_VECTOR_DOC_LATENCY,
        OPT_VERSION,
    };
    static const struct option opts[] = {
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"profile", required_argument, NULL, OPT_PROFILE},
        {"config", required_argument, NULL, OPT_CONFIG},
        {"set", required_argument, NULL, OPT_SET},
        {"model", required_argument, NULL, OPT_MODEL},
        {"any-model", no_argument, NULL, OPT_ANY_MODEL},
        {"no-noise", no_argument, NULL, OPT_NO_NOISE},
        {"seed", required_argument, NULL, OPT_SEED},
        {"output-len", required_argument, NULL, OPT_OUTPUT_LEN},
        {"answers", required_argument, NULL, OPT_ANSWERS},
        {"trace-log", required_argument, NULL, OPT_TRACE_LOG},
        {"header-timeout", required_argument, NULL, OPT_HEADER_TIMEOUT},
        {"grace", required_argument, NULL, OPT_GRACE},
        {"list-profiles", no_argument, NULL, OPT_LIST},
        {"sign-chunks", required_argument, NULL, OPT_SIGN},
        {"admin", no_argument, NULL, OPT_ADMIN},
        {"vector-docs", required_argument, NULL, OPT_VECTOR_DOCS},
        {"vector-store-id", required_argument, NULL, OPT_VECTOR_ID},
        {"vector-latency", required_argument, NULL, OPT_VECTOR_LATENCY},
        {"vector-doc-latency", required_argument, NULL, OPT_VECTOR_DOC_LATENCY},
        {"quiet", no_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    const char *listen = "127.0.0.1:8000";
    const char *profile_name = SIM_DEFAULT_PROFILE;
    const char *config = NULL;
    const char *model = NULL;
    const char *seed = NULL;
    const char *sets[64];
    size_t nsets = 0;
    bool no_noise = false;
    struct sim_server_config cfg = {0};
    uint64_t grace_ns = 10 * 1000000000ull;
    char err[512];
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "qvh", opts, NULL)) != -1) {
        switch (c) {
        case OPT_LISTEN:
            listen = optarg;
            break;
        case OPT_PROFILE:
            profile_name = optarg;
            break;
        case OPT_CONFIG:
            config = optarg;
            break;
        case OPT_SET:
            if (nsets == sizeof(sets) / sizeof(sets[0])) {
                fprintf(stderr, "tokenstorm sim: too many --set options\n");
                return TS_EXIT_USAGE;
            }
            sets[nsets++] = optarg;
            break;
        case OPT_MODEL:
            model = optarg;
            break;
        case OPT_ANY_MODEL:
            cfg.any_model = true;
            break;
        case OPT_ADMIN:
            cfg.admin = true;
            break;
        case OPT_NO_NOISE:
            no_noise = true;
            break;
        case OPT_SEED:
            seed = optarg;
            break;
        case OPT_OUTPUT_LEN:
            cfg.output_len = optarg;
            break;
        case OPT_ANSWERS:
            cfg.answers_path = optarg;
            break;
        case OPT_TRACE_LOG:
            cfg.trace_log_path = optarg;
            break;
        case OPT_VECTOR_DOCS:
            cfg.vector_docs_path = optarg;
            break;
        case OPT_VECTOR_ID:
            cfg.vector_store_id = optarg;
            break;
        case OPT_VECTOR_LATENCY:
        case OPT_VECTOR_DOC_LATENCY: {
            uint64_t ns;
            if (units_parse_duration_ns(optarg, &ns)) {
                fprintf(stderr, "tokenstorm sim: bad duration '%s' (e.g. 2ms, 500us, 0)\n", optarg);
                return TS_EXIT_USAGE;
            }
            *(c == OPT_VECTOR_LATENCY ? &cfg.vector_latency_ns : &cfg.vector_doc_ns) =
                ns ? ns : SIM_DURATION_ZERO;
            break;
        }
        case OPT_HEADER_TIMEOUT:
        case OPT_GRACE: {
            uint64_t ns;
            if (units_parse_duration_ns(optarg, &ns)) {
                fprintf(stderr, "tokenstorm sim: bad duration '%s' (e.g. 500ms, 10s)\n", optarg);
                return TS_EXIT_USAGE;
            }
            if (c == OPT_GRACE)
                grace_ns = ns;
            else
                cfg.header_timeout_ms = ns / 1000000 ? ns / 1000000 : 1;
            break;
        }
        case OPT_LIST:
            list_profiles();
            return TS_EXIT_OK;
        case OPT_SIGN:
            cfg.sign_key = optarg;
            break;
        case 'q':
            cfg.quiet = true;
            ts_log_set_level(TS_LOG_WARN);
            break;
        case 'v':
            ts_log_set_level(TS_LOG_DEBUG);
            break;
        case 'h':
            usage(stdout);
            return TS_EXIT_OK;
        case OPT_VERSION:
            printf("tokenstorm %s\n", TS_VERSION);
            return TS_EXIT_OK;
        default:
            usage(stderr);
            return TS_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tokenstorm sim: unexpected argument '%s'\n", argv[optind]);
        return TS_EXIT_USAGE;
    }
    if (sim_profile_preset(profile_name, &cfg.profile)) {
        fprintf(stderr, "tokenstorm sim: unknown profile '%s'; presets:", profile_name);
        for (const char *const *n = sim_profile_names(); *n; n++)
            fprintf(stderr, " %s", *n);
        fprintf(stderr, "\n");
        return TS_EXIT_USAGE;
    }
    if (config && sim_profile_load_yaml(&cfg.profile, config, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm sim: %s\n", err);
        return TS_EXIT_USAGE;
    }
    for (size_t i = 0; i < nsets; i++) {
        if (sim_profile_set_kv(&cfg.profile, sets[i], err, sizeof(err))) {
            fprintf(stderr, "tokenstorm sim: --set %s: %s\n", sets[i], err);
            return TS_EXIT_USAGE;
        }
    }
    if (no_noise && sim_profile_set(&cfg.profile, "noise", "false", err, sizeof(err)))
        return TS_EXIT_USAGE;
    if (seed && sim_profile_set(&cfg.profile, "seed", seed, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm sim: --seed: %s\n", err);
        return TS_EXIT_USAGE;
    }
    if (model && sim_profile_set(&cfg.profile, "model", model, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm sim: --model: %s\n", err);
        return TS_EXIT_USAGE;
    }
    if (sim_profile_validate(&cfg.profile, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm sim: profile %s: %s\n", cfg.profile.name, err);
        return TS_EXIT_USAGE;
    }
    char host[ADDR_HOST_MAX];
    if (addr_parse(listen, "127.0.0.1", host, &cfg.port, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm sim: --listen: %s\n", err);
        return TS_EXIT_USAGE;
    }
    cfg.host = host;

    uv_loop_t loop;
    if (uv_loop_init(&loop)) {
        fprintf(stderr, "tokenstorm sim: cannot create the event loop\n");
        return TS_EXIT_FAIL;
    }
    struct sim_main m = {.grace_ms = grace_ns / 1000000};
    int rc = sim_server_start(&loop, &cfg, &m.server, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "tokenstorm sim: %s\n", err);
        (void)uv_loop_close(&loop);
        return TS_EXIT_FAIL;
    }
    uv_signal_init(&loop, &m.sigint);
    uv_signal_init(&loop, &m.sigterm);
    m.sigint.data = m.sigterm.data = &m;
    m.signals_open = 2;
    uv_signal_start(&m.sigint, on_signal, SIGINT);
    uv_signal_start(&m.sigterm, on_signal, SIGTERM);

    struct sim_profile_caps caps;
    if (!cfg.quiet && sim_profile_derive(&cfg.profile, &caps) == 0) {
        printf("tokenstorm sim: listening on http://%s%s%s:%d\n", strchr(host, ':') ? "[" : "",
               host, strchr(host, ':') ? "]" : "", sim_server_port(m.server));
        printf("  profile %s, model %s\n", cfg.profile.name, cfg.profile.model);
        printf("  KV cache %llu tokens (%llu blocks of %u), max_num_seqs %u, "
               "max_num_batched_tokens %u, max_model_len %u\n",
               (unsigned long long)caps.kv_tokens, (unsigned long long)caps.kv_blocks,
               cfg.profile.block_size, caps.max_seqs, cfg.profile.max_num_batched_tokens,
               cfg.profile.max_model_len);
        printf("  step >= %.3f ms, knee %.0f batch tokens, noise %s\n", caps.min_step_ms,
               caps.knee_tokens, cfg.profile.noise ? "on" : "off");
        fflush(stdout);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    struct sim_server_stats st;
    sim_server_stats(m.server, &st);
    sim_server_free(m.server);
    rc = uv_loop_close(&loop);
    if (rc)
        ts_warn("sim: event loop closed with handles open");
    if (!cfg.quiet)
        printf("tokenstorm sim: stopped: %llu requests, %llu finished, %llu cancelled, "
               "%llu refused (429)\n",
               (unsigned long long)st.requests, (unsigned long long)st.finished,
               (unsigned long long)st.cancelled, (unsigned long long)st.rejected_429);
    return TS_EXIT_OK;
}
