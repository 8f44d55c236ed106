/*
 * tokenstorm sim - the simulator as a standalone OpenAI-compatible server:
 * the options; serving them is app/serve_sim.h.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include "base/log.h"
#include "base/units.h"
#include "app/serve_sim.h"
#include "cmd/cmd.h"
#include "cmd/cmd_opts.h"
#include "cmd/cmd_common.h"
#include "net/addr.h"
#include "sim/server.h"
#include "ts_config.h"

#define SIM_DEFAULT_PROFILE "llama3-8b-a100"
#define SIM_MAX_SETS        64

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: tokenstorm sim [OPTIONS]\n"
        "       tokenstorm sim calibrate [OPTIONS] RESULT_DIR...   (fit a profile to your\n"
        "                                 server's results; see its --help)\n\n"
        "An OpenAI-compatible simulator of a continuous-batching LLM server (vLLM-like):\n"
        "/v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models, /health,\n"
        "/metrics, and /v1/realtime (OpenAI Realtime over WebSocket, text). Latency\n"
        "follows an engine model with a token budget, KV-cache blocks, queueing and\n"
        "preemption, so load curves have the knees a GPU server has.\n\n"
        "options:\n"
        "  --listen HOST:PORT     where to listen (default 127.0.0.1:8000; port 0 = any)\n"
        "  --profile NAME         model/hardware preset (default " SIM_DEFAULT_PROFILE
        "; see --list-profiles)\n"
        "  --config FILE.yaml     profile overrides (keys as for --set; 'base: PRESET'; default\n"
        "                         none)\n"
        "  --set KEY=VALUE        override one profile field (repeatable)\n"
        "  --model NAME           served model id (default: the profile's)\n"
        "  --any-model            accept any model name instead of answering 404\n"
        "  --no-noise             exact step times (no jitter, no stalls)\n"
        "  --seed N               seed of the noise and of the generated text (default 1)\n"
        "  --answer-len DIST      natural answer length in tokens when the request does not\n"
        "                         set ignore_eos (default lognormal:180,0.7; max_tokens caps\n"
        "                         it, as run --output-len sets)\n"
        "  --answers FILE.jsonl   {\"prompt\":..,\"answer\":..} lines: known questions get\n"
        "                         their reference answer (default none: generated text)\n"
        "  --trace-log FILE.jsonl ground truth per request: arrival, admission, each\n"
        "                         token's send time, finish (default none)\n"
        "  --header-timeout DUR   cut clients whose headers take longer (default 10s)\n"
        "  --sign-chunks KEY      put a chained HMAC-SHA256 signature on every stream event\n"
        "                         (in the SSE id field, a realtime delta's \"sig\"; run\n"
        "                         --integrity hmac checks it; default none)\n"
        "  --admin                the admin API for chaos faults: POST/GET/DELETE\n"
        "                         /admin/faults (kv_shrink, stall, cold_start, error_rate;\n"
        "                         docs/CHAOS.md)\n"
        "  --api-key KEY          every /v1 request (and the /v1/realtime upgrade) needs\n"
        "                         'Authorization: Bearer KEY', else 401 as OpenAI answers\n"
        "                         (default none: any key is taken)\n"
        "  --api-token TOKEN      the admin API needs 'Authorization: Bearer TOKEN' (also\n"
        "                         TOKENSTORM_API_TOKEN); required with --admin on an\n"
        "                         address other machines can reach\n"
        "  --api-insecure         --admin on such an address without a token (warns)\n"
        "  --vector-docs FILE     passages of the vector store (POST "
        "/v1/vector_stores/ID/search):\n"
        "                         JSONL "
        "{\"text\":..,\"id\":..,\"filename\":..,\"attributes\":{..}}\n"
        "                         or plain text, one passage a line (default: 200 built-in\n"
        "                         passages on 20 topics)\n"
        "  --vector-store-id ID   the store's id besides vs_default\n"
        "  --vector-latency DUR   fixed time of a search (default 2ms; 0 = none)\n"
        "  --vector-doc-latency DUR  time per passage searched (default 1us)\n"
        "  --vector-data SPEC     a raw-vector corpus for GET /v1/vectors and POST\n"
        "                         /v1/vectors/search ({\"vector\":[..],\"k\":10,\"nprobe\":64}):\n"
        "                         gen:N[xD][:CLUSTERS[:SPREAD]] (clustered Gaussian data,\n"
        "                         seeded) or a .fvecs / .npy file (docs/VECTOR.md; default\n"
        "                         none: those endpoints answer 404)\n"
        "  --vector-index F       FAISS factory string of its index: IVF256,Flat, IVF256,PQ16,\n"
        "                         HNSW32, ... (default Flat: exact; needs a FAISS build);\n"
        "                         without --vector-data it indexes the text store's passages\n"
        "                         (then its search time is real, not --vector-latency)\n"
        "  --vector-nprobe N      IVF lists searched when a request names none (default 1)\n"
        "  --vector-ef-search N   HNSW efSearch when a request names none (default 16)\n"
        "  --vector-seed N        seed of a generated corpus (default 0; the same in run)\n"
        "  --replay DIR           a stand-in for a recorded service: answer POSTs from a\n"
        "                         recording (proxy --record DIR) with its timing, matched\n"
        "                         by body hash, then model, then path (docs/SIMULATOR.md;\n"
        "                         default none)\n"
        "  --ignore-disconnect    a client that leaves does not stop its generation (vLLM\n"
        "                         aborts it): a half-closed connection still gets the whole\n"
        "                         answer; models the server of a timeout cascade\n"
        "  --grace DUR            on SIGINT/SIGTERM, let streams finish this long (default 10s)\n"
        "  --list-profiles        print the presets and every settable key, then exit\n"
        "  -q, --quiet            no progress or status lines;\n"
        "                         errors and the result still print)\n"
        "  -v, --verbose          debug logging\n"
        "  -h, --help             this text\n"
        "      --version          print the version\n\n"
        "examples:\n"
        "  tokenstorm sim --listen 127.0.0.1:8000\n"
        "  tokenstorm sim --profile llama3-70b-4xh100 --set max_num_seqs=128\n"
        "  tokenstorm sim --profile tiny --no-noise --trace-log truth.jsonl\n"
        "  tokenstorm sim --vector-docs kb.jsonl --vector-latency 20ms\n"
        "  tokenstorm sim --vector-data gen:20000x64 --vector-index IVF256,Flat\n"
        "  curl -N localhost:8000/v1/chat/completions -H 'content-type: application/json' \\\n"
        "       -d "
        "'{\"model\":\"meta-llama/"
        "Llama-3.1-8B-Instruct\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":"
        "\"hi\"}]}'"
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
        printf("  %-34s %s: KV %llu tokens, max_num_seqs %u, step >= %.2f ms, knee %.0f tokens\n",
               *n, p.model, (unsigned long long)caps.kv_tokens, caps.max_seqs, caps.min_step_ms,
               caps.knee_tokens);
    }
    printf("\nkeys (--set KEY=VALUE, or in --config FILE.yaml):\n");
    for (const char *const *k = sim_profile_keys(); *k; k++)
        printf("  %-24s %s\n", *k, sim_profile_key_help(*k));
}

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
    OPT_API_TOKEN,
    OPT_API_KEY,
    OPT_API_INSECURE,
    OPT_VECTOR_DATA,
    OPT_VECTOR_INDEX,
    OPT_VECTOR_NPROBE,
    OPT_VECTOR_EF,
    OPT_VECTOR_SEED,
    OPT_IGNORE_DISCONNECT,
    OPT_REPLAY,
};

/* The command line, as given; build_profile and resolve_listen finish cfg. */
struct sim_opts {
    const char *listen, *profile_name, *config, *model, *seed, *api_token;
    bool api_insecure;
    const char *sets[SIM_MAX_SETS];
    size_t nsets;
    bool no_noise;
    uint64_t grace_ns;
    struct sim_server_config cfg;
    char host[ADDR_HOST_MAX]; /* cfg.host */
};

/* Where an option that is a plain string goes; NULL for the others. */
static const char **string_slot(struct sim_opts *o, int c)
{
    switch (c) {
    case OPT_LISTEN:
        return &o->listen;
    case OPT_PROFILE:
        return &o->profile_name;
    case OPT_CONFIG:
        return &o->config;
    case OPT_MODEL:
        return &o->model;
    case OPT_SEED:
        return &o->seed;
    case OPT_OUTPUT_LEN:
        return &o->cfg.output_len;
    case OPT_ANSWERS:
        return &o->cfg.answers_path;
    case OPT_TRACE_LOG:
        return &o->cfg.trace_log_path;
    case OPT_VECTOR_DOCS:
        return &o->cfg.vector_docs_path;
    case OPT_VECTOR_ID:
        return &o->cfg.vector_store_id;
    case OPT_VECTOR_DATA:
        return &o->cfg.vector_data;
    case OPT_VECTOR_INDEX:
        return &o->cfg.vector_index;
    case OPT_SIGN:
        return &o->cfg.sign_key;
    default:
        return NULL;
    }
}

/* --vector-latency, --vector-doc-latency: 0 is kept apart from "not given". */
static int vector_duration(struct sim_opts *o, int c, const char *arg)
{
    uint64_t ns;
    if (units_parse_duration_ns(arg, &ns)) {
        fprintf(stderr, "tokenstorm sim: bad duration '%s' (e.g. 2ms, 500us, 0)\n", arg);
        return TS_EXIT_USAGE;
    }
    *(c == OPT_VECTOR_LATENCY ? &o->cfg.vector_latency_ns : &o->cfg.vector_doc_ns) =
        ns ? ns : SIM_DURATION_ZERO;
    return -1;
}

/* --vector-nprobe, --vector-ef-search, --vector-seed. */
static int vector_number(struct sim_opts *o, int c, const char *arg)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    unsigned long long max = c == OPT_VECTOR_SEED ? UINT64_MAX : 65536;
    if (errno || end == arg || *end || arg[0] == '-' || v > max) {
        fprintf(stderr, "tokenstorm sim: --%s: expected an integer 0..%llu, got '%s'\n",
                c == OPT_VECTOR_SEED ? "vector-seed"
                : c == OPT_VECTOR_EF ? "vector-ef-search"
                                     : "vector-nprobe",
                max, arg);
        return TS_EXIT_USAGE;
    }
    if (c == OPT_VECTOR_SEED)
        o->cfg.vector_seed = v;
    else
        *(c == OPT_VECTOR_EF ? &o->cfg.vector_ef : &o->cfg.vector_nprobe) = (uint32_t)v;
    return -1;
}

/* --header-timeout (at least 1 ms), --grace. */
static int server_duration(struct sim_opts *o, int c, const char *arg)
{
    uint64_t ns;
    if (units_parse_duration_ns(arg, &ns)) {
        fprintf(stderr, "tokenstorm sim: bad duration '%s' (e.g. 500ms, 10s)\n", arg);
        return TS_EXIT_USAGE;
    }
    if (c == OPT_GRACE)
        o->grace_ns = ns;
    else
        o->cfg.header_timeout_ms = ns / 1000000 ? ns / 1000000 : 1;
    return -1;
}

/* One option c (with its argument arg) into o. Returns -1 to go on, or the exit code. */
static int take_option(struct sim_opts *o, int c, const char *arg)
{
    const char **slot = string_slot(o, c);
    if (slot) {
        *slot = arg;
        return -1;
    }
    switch (c) {
    case OPT_SET:
        if (o->nsets == SIM_MAX_SETS) {
            fprintf(stderr, "tokenstorm sim: too many --set options\n");
            return TS_EXIT_USAGE;
        }
        o->sets[o->nsets++] = arg;
        return -1;
    case OPT_ANY_MODEL:
        o->cfg.any_model = true;
        return -1;
    case OPT_ADMIN:
        o->cfg.admin = true;
        return -1;
    case OPT_API_TOKEN:
        o->api_token = arg;
        return -1;
    case OPT_API_KEY:
        o->cfg.api_key = arg;
        return -1;
    case OPT_API_INSECURE:
        o->api_insecure = true;
        return -1;
    case OPT_IGNORE_DISCONNECT:
        o->cfg.ignore_disconnect = true;
        return -1;
    case OPT_REPLAY:
        o->cfg.replay_dir = arg;
        return -1;
    case OPT_NO_NOISE:
        o->no_noise = true;
        return -1;
    case OPT_VECTOR_LATENCY:
    case OPT_VECTOR_DOC_LATENCY:
        return vector_duration(o, c, arg);
    case OPT_VECTOR_NPROBE:
    case OPT_VECTOR_EF:
    case OPT_VECTOR_SEED:
        return vector_number(o, c, arg);
    case OPT_HEADER_TIMEOUT:
    case OPT_GRACE:
        return server_duration(o, c, arg);
    case OPT_LIST:
        list_profiles();
        return TS_EXIT_OK;
    case 'q':
        o->cfg.quiet = true;
        ts_log_set_level(TS_LOG_WARN);
        return -1;
    case OPT_VERSION:
        return cmd_common_flag('V', usage);
    default: /* -v, -h, or what cmd_getopt said was wrong */
        return cmd_common_flag(c, usage);
    }
}

/* argv into o. Returns -1 to go on, or the exit code (help, a bad option). */
static int parse_args(int argc, char **argv, struct sim_opts *o)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"profile", required_argument, NULL, OPT_PROFILE},
        {"config", required_argument, NULL, OPT_CONFIG},
        {"set", required_argument, NULL, OPT_SET},
        {"model", required_argument, NULL, OPT_MODEL},
        {"any-model", no_argument, NULL, OPT_ANY_MODEL},
        {"no-noise", no_argument, NULL, OPT_NO_NOISE},
        {"seed", required_argument, NULL, OPT_SEED},
        {"answer-len", required_argument, NULL, OPT_OUTPUT_LEN},
        {"output-len", required_argument, NULL, OPT_OUTPUT_LEN}, /* old name */
        {"answers", required_argument, NULL, OPT_ANSWERS},
        {"trace-log", required_argument, NULL, OPT_TRACE_LOG},
        {"header-timeout", required_argument, NULL, OPT_HEADER_TIMEOUT},
        {"grace", required_argument, NULL, OPT_GRACE},
        {"list-profiles", no_argument, NULL, OPT_LIST},
        {"sign-chunks", required_argument, NULL, OPT_SIGN},
        {"admin", no_argument, NULL, OPT_ADMIN},
        {"api-token", required_argument, NULL, OPT_API_TOKEN},
        {"api-key", required_argument, NULL, OPT_API_KEY},
        {"api-insecure", no_argument, NULL, OPT_API_INSECURE},
        {"ignore-disconnect", no_argument, NULL, OPT_IGNORE_DISCONNECT},
        {"replay", required_argument, NULL, OPT_REPLAY},
        {"vector-docs", required_argument, NULL, OPT_VECTOR_DOCS},
        {"vector-store-id", required_argument, NULL, OPT_VECTOR_ID},
        {"vector-latency", required_argument, NULL, OPT_VECTOR_LATENCY},
        {"vector-doc-latency", required_argument, NULL, OPT_VECTOR_DOC_LATENCY},
        {"vector-data", required_argument, NULL, OPT_VECTOR_DATA},
        {"vector-index", required_argument, NULL, OPT_VECTOR_INDEX},
        {"vector-nprobe", required_argument, NULL, OPT_VECTOR_NPROBE},
        {"vector-ef-search", required_argument, NULL, OPT_VECTOR_EF},
        {"vector-seed", required_argument, NULL, OPT_VECTOR_SEED},
        {"quiet", no_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    int c, rc;
    *o = (struct sim_opts){
        .listen = "127.0.0.1:8000",
        .profile_name = SIM_DEFAULT_PROFILE,
        .grace_ns = 10 * 1000000000ull,
    };
    optind = 1;
    while ((c = cmd_getopt("sim", argc, argv, "qvh", opts, NULL)) != -1) {
        if ((rc = take_option(o, c, optarg)) >= 0)
            return rc;
    }
    if (optind < argc) {
        fprintf(stderr, "tokenstorm sim: unexpected argument '%s'\n", argv[optind]);
        return TS_EXIT_USAGE;
    }
    return -1;
}

/*
 * The profile: the preset, then --config, the --set options, --no-noise,
 * --seed, --model, in that order, validated. Returns -1, or the exit code
 * with the message printed.
 */
static int build_profile(struct sim_opts *o)
{
    struct sim_profile *p = &o->cfg.profile;
    char err[512];
    if (sim_profile_preset(o->profile_name, p)) {
        fprintf(stderr, "tokenstorm sim: unknown profile '%s'; presets:", o->profile_name);
        for (const char *const *n = sim_profile_names(); *n; n++)
            fprintf(stderr, " %s", *n);
        fprintf(stderr, "\n");
        return TS_EXIT_USAGE;
    }
    if (o->config && sim_profile_load_yaml(p, o->config, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm sim: %s\n", err);
        return TS_EXIT_USAGE;
    }
    for (size_t i = 0; i < o->nsets; i++) {
        if (sim_profile_set_kv(p, o->sets[i], err, sizeof(err))) {
            fprintf(stderr, "tokenstorm sim: --set %s: %s\n", o->sets[i], err);
            return TS_EXIT_USAGE;
        }
    }
    if (o->no_noise && sim_profile_set(p, "noise", "false", err, sizeof(err)))
        return TS_EXIT_USAGE;
    if (o->seed && sim_profile_set(p, "seed", o->seed, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm sim: --seed: %s\n", err);
        return TS_EXIT_USAGE;
    }
    if (o->model && sim_profile_set(p, "model", o->model, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm sim: --model: %s\n", err);
        return TS_EXIT_USAGE;
    }
    if (sim_profile_validate(p, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm sim: profile %s: %s\n", p->name, err);
        return TS_EXIT_USAGE;
    }
    return -1;
}

/* --listen into cfg.host and cfg.port. Returns -1, or the exit code with the message printed. */
static int resolve_listen(struct sim_opts *o)
{
    char err[512];
    if (addr_parse(o->listen, "127.0.0.1", o->host, &o->cfg.port, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm sim: --listen: %s\n", err);
        return TS_EXIT_USAGE;
    }
    o->cfg.host = o->host;
    if (o->cfg.admin)
        return cmd_ctlauth_setup("tokenstorm sim", NULL, "the admin API (--admin)", o->host,
                                 o->api_token, o->api_insecure, &o->cfg.admin_token);
    return -1;
}

int cmd_sim(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "calibrate") == 0)
        return cmd_sim_calibrate(argc - 1, argv + 1);
    struct sim_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc < 0)
        rc = build_profile(&o);
    if (rc < 0)
        rc = resolve_listen(&o);
    if (rc < 0)
        rc = serve_sim(&o.cfg, o.grace_ns / 1000000);
    return rc;
}
