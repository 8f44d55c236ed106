/*
 * tokenstorm run - the main job: load a target (or the built-in simulator),
 * measure every stream, print a summary and write the result files.
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/slo.h"
#include "analysis/summary.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/units.h"
#include "cmd/cmd.h"
#include "cmd/cmd_common.h"
#include "cmd/cmd_opts.h"
#include "app/run_job.h"
#include "app/run_pg.h"
#include "app/run_quality.h"
#include "app/ranks.h"
#include "load/runner.h"
#include "load/target.h"
#include "net/addr.h"
#include "report/result.h"
#include "report/text.h"
#include "sim/thread.h"
#include "ts_config.h"

/* --help, second half: output, distribution, the simulator, examples. */
static void usage_rest(FILE *out)
{
    fprintf(
        out,
        "output:\n"
        "  --out DIR              result directory (default ./tokenstorm-results/<time>-run);\n"
        "                         refused if it holds results or another process writes it\n"
        "  --force                remove the results already in --out first (result.json,\n"
        "                         requests.jsonl, latency.hlog, rank-N/; nothing else)\n"
        "  --save-requests        write requests.jsonl, one line per request\n"
        "  --save-chunk-times     requests.jsonl lines also hold chunk_us: when each chunk\n"
        "                         with choices arrived, us from the request's start (the\n"
        "                         first 65536 per request); implies --save-requests\n"
        "  --json                 print result.json on stdout instead of the summary\n"
        "  --metrics-listen H:P   serve live Prometheus metrics on http://H:P/metrics while the\n"
        "                         run goes on (e.g. 127.0.0.1:9464; port 0 = any free port;\n"
        "                         default none)\n"
        "  --metrics-linger DUR   keep /metrics up this long after the run (default 0s)\n"
        "  --ui H:P               a live dashboard at http://H:P/ (the report's charts, updated\n"
        "                         every second; a stop button); /metrics is served there too.\n"
        "                         Loopback by default; elsewhere it needs --api-token TOKEN (or\n"
        "                         TOKENSTORM_API_TOKEN; the browser passes it as ?token=) or\n"
        "                         --api-insecure\n"
        "  --server-metrics URL   scrape the target's Prometheus endpoint during the run (vLLM,\n"
        "                         TGI, SGLang names): running/waiting requests, KV-cache usage,\n"
        "                         preemptions, server TTFT -> result.json \"server_timeline\";\n"
        "                         'auto' = the target's host and port, path /metrics\n"
        "                         (default none)\n"
        "  --server-metrics-interval DUR  how often (default 1s)\n"
        "  --otlp-endpoint URL    export one OpenTelemetry span per request (OTLP/HTTP JSON) to\n"
        "                         URL (/v1/traces added when missing); also the standard\n"
        "                         $OTEL_EXPORTER_OTLP_* variables (docs/OBSERVABILITY.md;\n"
        "                         default none)\n"
        "  -q, --quiet            no progress or status lines;\n"
        "                         errors and the result still print)\n"
        "  -v, --verbose          debug logging\n"
        "distributed (docs/DISTRIBUTED.md):\n"
        "  --shard i/N            send only share i of N of the run (0 <= i < N); run N such\n"
        "                         processes (e.g. a Kubernetes Indexed Job), then merge their\n"
        "                         results; under mpirun/srun (MPI build) ranks share by "
        "themselves\n"
        "  --start-at TIME        start the schedule at this wall-clock instant (Unix seconds or\n"
        "                         2026-01-01T12:00:00Z), so that shards on several machines\n"
        "                         start together (clocks synchronised by NTP/PTP; default:\n"
        "                         at once)\n"
        "built-in simulator (no --target):\n"
        "  --sim-profile NAME     (default llama3-8b-a100)   --sim-set KEY=VALUE (repeatable)\n"
        "\nexamples:\n"
        "  tokenstorm run\n"
        "  tokenstorm run --target http://127.0.0.1:8000/v1 --rate 20 --duration 60s\n"
        "  tokenstorm run --target http://gpu:8000 --concurrency 64 --requests 2000 \\\n"
        "      --input-len lognormal:1024,0.6 --slo 'ttft.p95<2s' --slo 'error_rate<1%%'\n"
        "  tokenstorm run --rate 5 --stages '20s:50,20s:50,10s:0' --goodput 'ttft:500 tpot:50'\n"
        "  tokenstorm run --target http://gpu:8000/v1 --rate 20 \\\n"
        "      --server-metrics http://gpu:8000/metrics\n"
        "  mpirun -n 4 tokenstorm run --target http://gpu:8000/v1 --rate 400 --duration 5m\n"
        "\nexit codes: 0 ok, 1 an SLO failed, 2 usage error, 3 the run failed or no request\n"
        "succeeded (the dominant error is named), 130 SIGINT, 143 SIGTERM (results so far\n"
        "are written)\n");
}

/* --help: the vector-search options. */
static void usage_vector(FILE *out)
{
    fprintf(out,
            "vector search (--endpoint vector-search; docs/VECTOR.md):\n"
            "  --vector-data SPEC     the corpus: gen:N[xD][:CLUSTERS[:SPREAD]] or a .fvecs/.npy\n"
            "                         file (default gen:20000x64); the built-in simulator holds\n"
            "                         it, and the exact ground truth is computed over it\n"
            "  --vector-index F       the built-in simulator's FAISS index (IVF256,Flat,\n"
            "                         IVF256,PQ16, HNSW32, ...; default Flat)\n"
            "  --vector-queries SPEC  gen:N (default gen:1000: the corpus's distribution), a\n"
            "                         .fvecs/.npy file, or text:FILE (a prompts JSONL whose\n"
            "                         texts the target's /v1/embeddings embeds before the\n"
            "                         run); request i searches query i mod N\n"
            "  --vector-truth FILE    true neighbours (.ivecs/.npy, a row per query) instead of\n"
            "                         an exact search before the run (the default)\n"
            "  --vector-k K           neighbours asked for and recall@K (default 10)\n"
            "  --nprobe N             IVF lists to search, sent in every request (default none:\n"
            "                         the server's own)\n"
            "  --ef-search N          HNSW efSearch, sent in every request (default none)\n"
            "  --vector-seed N        seed of generated corpus and queries (default 0)\n"
            "  --vector-api T         any REST vector database (default none: the simulator's\n"
            "                         native body): a preset (tokenstorm, qdrant,\n"
            "                         milvus, chroma: written from their API references, not\n"
            "                         run live here) or @FILE, a template {path, body with\n"
            "                         \"{{vector}}\" \"{{k}}\" \"{{nprobe}}\" \"{{ef_search}}\",\n"
            "                         results and id JSON pointers}; its path replaces\n"
            "                         --target's (docs/VECTOR.md)\n"
            "  --vector-collection C  {{collection}} in a template (default bench)\n"
            "  --target postgresql://...  pgvector through libpq (closed loop, --concurrency\n"
            "                         connections): SELECT ID FROM TABLE ORDER BY COLUMN <-> $1\n"
            "                         LIMIT k, --nprobe as ivfflat.probes, --ef-search as\n"
            "                         hnsw.ef_search\n"
            "  --pg-table T, --pg-column C, --pg-id I  (default items, embedding, id)\n");
}

/* --help: what it does and the options up to the checks (usage_rest: the rest). */
static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: tokenstorm run [OPTIONS] [SCENARIO.yaml]\n\n"
        "Loads an OpenAI-compatible service with streaming requests and measures what users\n"
        "feel: TTFT, ITL, TPOT, end-to-end latency, throughput, goodput, errors by class.\n"
        "With no --target it starts the built-in simulator on a loopback port.\n\n"
        "scenario files (docs/SCENARIOS.md): traffic classes, prompt schemas, sessions, flows:\n"
        "  SCENARIO.yaml          run the file's classes; --duration, --requests, --warmup,\n"
        "                         --seed... given here win over it; what a class sets itself\n"
        "                         (--rate, --concurrency, --input-len, --no-stream...) is refused\n"
        "  --check                validate the file and exit\n"
        "  --dry-run DIR          write the generated requests and the workload summary, send\n"
        "                         nothing (default: off)\n"
        "  --dry-run-requests N   iterations per class in a dry run (default 100)\n"
        "  --tokenizer FILE       tokenizer.json or tiktoken file: exact input lengths; counts\n"
        "                         answers (checked against server usage: docs/METRICS.md;\n"
        "                         default none: an approximation, server usage when given)\n\n"
        "target:\n"
        "  --target URL           server root, base URL ending in /v1, or a full endpoint URL\n"
        "                         (default: the built-in simulator on a loopback port)\n"
        "  --model NAME           model to ask for (default: the first of /v1/models)\n"
        "  --api-key KEY          bearer token (default: $OPENAI_API_KEY); never printed or saved\n"
        "  --header 'K: V'        extra request header (repeatable; default none)\n"
        "  --endpoint E           chat (default), completions, embeddings, vector-search\n"
        "                         (POST /v1/vectors/search; recall@k per answer, below), or\n"
        "                         realtime: the chat requests as OpenAI Realtime\n"
        "                         response.create events over WebSocket (ws://, /v1/realtime\n"
        "                         next to the target's chat URL)\n"
        "  --transport T          realtime: websocket (default), or auto: SSE to the chat URL\n"
        "                         when the upgrade is refused (400/404/405/426/501), counted\n"
        "  --ws-frames SPEC.json  a WebSocket gateway's own JSON frames: the URL, the request\n"
        "                         frame's template and JSON pointers to the delta, end,\n"
        "                         usage and error (docs/REALTIME.md; default none: OpenAI's)\n"
        "  --insecure             do not verify TLS certificates\n"
        "  --http2                use HTTP/2 where the server offers it\n"
        "load (default: open loop, Poisson arrivals, 10 requests/s for 20s; --concurrency N\n"
        "alone: closed loop, N users; --rate and --concurrency: open loop with a cap):\n"
        "  --rate R               requests per second, open loop (default 10 when neither\n"
        "                         --concurrency nor --stages is given); more than 0\n"
        "  --arrival A            poisson (default), constant, gamma:B (B = burstiness)\n"
        "  --ramp-to R2           open loop: rise linearly from --rate to R2 over --duration\n"
        "                         (default: no ramp)\n"
        "  --stages S             open loop, k6-like: '30s:10,1m:50,30s:0' (duration:rate, ...;\n"
        "                         default none)\n"
        "  --concurrency N        closed loop: N users; with --rate: cap on requests in flight\n"
        "                         (default none: open loop, no cap)\n"
        "  --think DIST           closed loop: think time in seconds between requests (default\n"
        "                         none)\n"
        "  --ramp-users DUR       closed loop: start users evenly over DUR (default 0s: at once)\n"
        "  --duration DUR         sending window after warm-up (default 20s; with --requests\n"
        "                         or --stages alone: until they are done); more than 0\n"
        "  --requests N           stop after N requests (default: no limit); 1 or more\n"
        "  --warmup DUR           sent but not counted (default 0s)\n"
        "  --drain DUR            at the end wait this long for requests in flight, then cut\n"
        "                         them (default 30s)\n"
        "  --replay DIR           send a recording's requests (proxy --record DIR) at their\n"
        "                         recorded times; each answer is scored against the recorded\n"
        "                         one (rouge_l, bleu4, exact_match: docs/QUALITY.md;\n"
        "                         default none)\n"
        "  --speed F              --replay: F times as fast (default 1)\n"
        "  --loop                 --replay: start again at the end (until --duration)\n"
        "  --cancel SPEC          impatient users: abandon a share of the streams mid-way,\n"
        "                         'after:uniform:0.5s-3s,share:20%%' (outcome \"cancelled\",\n"
        "                         not an error; with --server-metrics shows whether the\n"
        "                         server's running requests drop; default none)\n"
        "  --workers N            load threads (default: number of cores)\n"
        "  --seed N               seed of prompts, lengths and arrivals (default 1)\n"
        "workload:\n"
        "  --input-len DIST       prompt tokens: fixed:N, uniform:A-B, normal:M,S,\n"
        "                         lognormal:MEAN,SIGMA, empirical:FILE (default "
        "lognormal:512,0.5)\n"
        "  --output-len DIST      max_tokens per request (default uniform:64-256)\n"
        "  --prompts FILE.jsonl   prompts from a file ({\"prompt\"} or {\"messages\"} lines;\n"
        "                         default: synthetic text of --input-len tokens)\n"
        "  --system-prompt TEXT   a system message for every chat request (default none)\n"
        "  --no-ignore-eos        let the server stop early (default sends ignore_eos)\n"
        "  --no-stream            non-streamed requests (no TTFT, TTFC, ITL or TPOT: SLOs and\n"
        "                         --goodput on them are refused; E2EL and tokens are measured)\n"
        "  --body JSON            merged into every request body, e.g. '{\"temperature\":0}'\n"
        "                         (default none)\n"
        "timeouts:\n"
        "  --timeout-connect DUR  (default 10s)    --timeout-ttfb DUR (default 5m)\n"
        "  --timeout-idle DUR     between chunks (default 2m)   --timeout DUR total (default\n"
        "                         none); every timeout is more than 0\n"
        "  --no-kernel-timestamps time stream bytes when they are read, not by their kernel\n"
        "                         arrival (SO_TIMESTAMPNS; HTTP/1.1 only; see docs/METRICS.md)\n"
        "  --http-engine auto|curl  plain http:// HTTP/1.1 on the own engine (auto, the\n"
        "                         default) or on libcurl like TLS, HTTP/2 and proxies\n"
        "checks:\n"
        "  --slo EXPR             e.g. 'ttft.p95<2100ms', 'error_rate<0.3%%', 'goodput>5/s'\n"
        "                         (default none)\n"
        "                         (repeatable; exit code 1 when one fails; 2 at start when\n"
        "                         the options cannot evaluate it, e.g. goodput without\n"
        "                         --goodput); names as in compare --fail-on work too\n"
        "  --goodput 'ttft:MS tpot:MS e2el:MS'  what a good request is (vLLM's --goodput;\n"
        "                         default none: goodput not measured)\n"
        "answer quality (references come from a --prompts file's \"reference\" fields):\n"
        "  --quality-regex RE     every answer must match RE (PCRE2; default none)\n"
        "  --quality-json[=K,..]  every answer must be JSON (an object with keys K,..; default\n"
        "                         none)\n"
        "  --quality-min SPEC     a quality-ok answer: 'rouge_l:0.5 bleu4:0.2 exact regex json'\n"
        "                         (default none)\n"
        "  --dual-sla SPEC        windows of requests meeting quality and latency (--goodput):\n"
        "                         'window=50,quality=0.9,latency=0.9'; slo: dual_sla>=95%%\n"
        "                         (default none)\n"
        "  --consistency[=SPEC]   similarity of answers to repeated prompts:\n"
        "                         'threshold=0.8,window=20,k=3'; slo: consistency>=0.8\n"
        "                         (default none; the SPEC's defaults are those shown)\n"
        "  --integrity hmac       verify chained chunk signatures (sim --sign-chunks KEY);\n"
        "                         key from --integrity-key or $TOKENSTORM_INTEGRITY_KEY\n");
    usage_vector(out);
    usage_rest(out);
}

static int parse_u64(const char *opt, const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-') {
        fprintf(stderr, "tokenstorm run: %s: expected a whole number, got '%s'\n", opt, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_dur(const char *opt, const char *s, uint64_t *out)
{
    if (units_parse_duration_ns(s, out)) {
        fprintf(stderr, "tokenstorm run: %s: expected a duration like 500ms, 30s, 5m; got '%s'\n",
                opt, s);
        return -1;
    }
    return 0;
}

static int parse_rate(const char *opt, const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || (*end && strcmp(end, "/s")) || !(v >= 0) || v > 1e7) {
        fprintf(stderr, "tokenstorm run: %s: expected requests per second, got '%s'\n", opt, s);
        return -1;
    }
    if (v == 0 && !strcmp(opt, "--rate")) {
        fprintf(stderr, "tokenstorm run: --rate: must be more than 0 requests/s (for a closed "
                        "loop give --concurrency N instead)\n");
        return -1;
    }
    *out = v;
    return 0;
}

enum {
    O_TARGET = 256,
    O_MODEL,
    O_API_KEY,
    O_HEADER,
    O_ENDPOINT,
    O_TRANSPORT,
    O_WS_FRAMES,
    O_INSECURE,
    O_HTTP2,
    O_RATE,
    O_ARRIVAL,
    O_RAMP_TO,
    O_STAGES,
    O_CONCURRENCY,
    O_THINK,
    O_RAMP_USERS,
    O_DURATION,
    O_REQUESTS,
    O_WARMUP,
    O_DRAIN,
    O_CANCEL,
    O_REPLAY,
    O_SPEED,
    O_LOOP,
    O_WORKERS,
    O_SEED,
    O_INPUT_LEN,
    O_OUTPUT_LEN,
    O_PROMPTS,
    O_SYSTEM,
    O_NO_EOS,
    O_NO_STREAM,
    O_BODY,
    O_T_CONNECT,
    O_T_TTFB,
    O_T_IDLE,
    O_T_TOTAL,
    O_SLO,
    O_GOODPUT,
    O_OUT,
    O_FORCE,
    O_SAVE,
    O_SAVE_CHUNKS,
    O_JSON,
    O_SIM_PROFILE,
    O_SIM_SET,
    O_VECTOR_DATA,
    O_VECTOR_INDEX,
    O_VECTOR_QUERIES,
    O_VECTOR_TRUTH,
    O_VECTOR_K,
    O_NPROBE,
    O_EF_SEARCH,
    O_VECTOR_SEED,
    O_VECTOR_API,
    O_VECTOR_COLLECTION,
    O_PG_TABLE,
    O_PG_COLUMN,
    O_PG_ID,
    O_VERSION,
    O_INTEGRITY,
    O_INTEGRITY_KEY,
    O_METRICS_LISTEN,
    O_UI,
    O_API_TOKEN,
    O_API_INSECURE,
    O_METRICS_LINGER,
    O_SERVER_METRICS,
    O_SERVER_METRICS_INTERVAL,
    O_QUALITY,
    O_SHARD,
    O_START_AT,
    O_OTLP_ENDPOINT,
    O_CHECK,
    O_DRY_RUN,
    O_DRY_RUN_N,
    O_TOKENIZER,
    O_NO_KERNEL_TS,
    O_HTTP_ENGINE,
};

static const struct option run_options[] = {
    {"target", required_argument, NULL, O_TARGET},
    {"model", required_argument, NULL, O_MODEL},
    {"api-key", required_argument, NULL, O_API_KEY},
    {"header", required_argument, NULL, O_HEADER},
    {"endpoint", required_argument, NULL, O_ENDPOINT},
    {"transport", required_argument, NULL, O_TRANSPORT},
    {"ws-frames", required_argument, NULL, O_WS_FRAMES},
    {"insecure", no_argument, NULL, O_INSECURE},
    {"http2", no_argument, NULL, O_HTTP2},
    {"rate", required_argument, NULL, O_RATE},
    {"arrival", required_argument, NULL, O_ARRIVAL},
    {"ramp-to", required_argument, NULL, O_RAMP_TO},
    {"stages", required_argument, NULL, O_STAGES},
    {"concurrency", required_argument, NULL, O_CONCURRENCY},
    {"think", required_argument, NULL, O_THINK},
    {"ramp-users", required_argument, NULL, O_RAMP_USERS},
    {"duration", required_argument, NULL, O_DURATION},
    {"requests", required_argument, NULL, O_REQUESTS},
    {"warmup", required_argument, NULL, O_WARMUP},
    {"drain", required_argument, NULL, O_DRAIN},
    {"cancel", required_argument, NULL, O_CANCEL},
    {"replay", required_argument, NULL, O_REPLAY},
    {"speed", required_argument, NULL, O_SPEED},
    {"loop", no_argument, NULL, O_LOOP},
    {"workers", required_argument, NULL, O_WORKERS},
    {"seed", required_argument, NULL, O_SEED},
    {"input-len", required_argument, NULL, O_INPUT_LEN},
    {"output-len", required_argument, NULL, O_OUTPUT_LEN},
    {"prompts", required_argument, NULL, O_PROMPTS},
    {"system-prompt", required_argument, NULL, O_SYSTEM},
    {"no-ignore-eos", no_argument, NULL, O_NO_EOS},
    {"no-stream", no_argument, NULL, O_NO_STREAM},
    {"body", required_argument, NULL, O_BODY},
    {"timeout-connect", required_argument, NULL, O_T_CONNECT},
    {"timeout-ttfb", required_argument, NULL, O_T_TTFB},
    {"timeout-idle", required_argument, NULL, O_T_IDLE},
    {"timeout", required_argument, NULL, O_T_TOTAL},
    {"slo", required_argument, NULL, O_SLO},
    {"goodput", required_argument, NULL, O_GOODPUT},
    {"integrity", required_argument, NULL, O_INTEGRITY},
    {"integrity-key", required_argument, NULL, O_INTEGRITY_KEY},
    {"metrics-listen", required_argument, NULL, O_METRICS_LISTEN},
    {"ui", required_argument, NULL, O_UI},
    {"api-token", required_argument, NULL, O_API_TOKEN},
    {"api-insecure", no_argument, NULL, O_API_INSECURE},
    {"quality-regex", required_argument, NULL, O_QUALITY},
    {"quality-json", optional_argument, NULL, O_QUALITY},
    {"quality-min", required_argument, NULL, O_QUALITY},
    {"dual-sla", required_argument, NULL, O_QUALITY},
    {"consistency", optional_argument, NULL, O_QUALITY},
    {"metrics-linger", required_argument, NULL, O_METRICS_LINGER},
    {"server-metrics", required_argument, NULL, O_SERVER_METRICS},
    {"server-metrics-interval", required_argument, NULL, O_SERVER_METRICS_INTERVAL},
    {"shard", required_argument, NULL, O_SHARD},
    {"start-at", required_argument, NULL, O_START_AT},
    {"otlp-endpoint", required_argument, NULL, O_OTLP_ENDPOINT},
    {"check", no_argument, NULL, O_CHECK},
    {"dry-run", required_argument, NULL, O_DRY_RUN},
    {"dry-run-requests", required_argument, NULL, O_DRY_RUN_N},
    {"tokenizer", required_argument, NULL, O_TOKENIZER},
    {"no-kernel-timestamps", no_argument, NULL, O_NO_KERNEL_TS},
    {"http-engine", required_argument, NULL, O_HTTP_ENGINE},
    {"out", required_argument, NULL, O_OUT},
    {"force", no_argument, NULL, O_FORCE},
    {"save-requests", no_argument, NULL, O_SAVE},
    {"save-chunk-times", no_argument, NULL, O_SAVE_CHUNKS},
    {"json", no_argument, NULL, O_JSON},
    {"sim-profile", required_argument, NULL, O_SIM_PROFILE},
    {"sim-set", required_argument, NULL, O_SIM_SET},
    {"vector-data", required_argument, NULL, O_VECTOR_DATA},
    {"vector-index", required_argument, NULL, O_VECTOR_INDEX},
    {"vector-queries", required_argument, NULL, O_VECTOR_QUERIES},
    {"vector-truth", required_argument, NULL, O_VECTOR_TRUTH},
    {"vector-k", required_argument, NULL, O_VECTOR_K},
    {"nprobe", required_argument, NULL, O_NPROBE},
    {"ef-search", required_argument, NULL, O_EF_SEARCH},
    {"vector-seed", required_argument, NULL, O_VECTOR_SEED},
    {"vector-api", required_argument, NULL, O_VECTOR_API},
    {"vector-collection", required_argument, NULL, O_VECTOR_COLLECTION},
    {"pg-table", required_argument, NULL, O_PG_TABLE},
    {"pg-column", required_argument, NULL, O_PG_COLUMN},
    {"pg-id", required_argument, NULL, O_PG_ID},
    {"quiet", no_argument, NULL, 'q'},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, O_VERSION},
    {NULL, 0, NULL, 0},
};

/*
 * What an option group's parser returns besides an exit code (>= 0) to stop
 * with: ARG_NEXT (taken, go on) or ARG_NOT_MINE (another group's option).
 */
enum { ARG_NEXT = -1, ARG_NOT_MINE = -2 };

/* A helper's verdict (0 or -1, the message printed) as a group's answer. */
static int next_or_usage(int bad)
{
    return bad ? TS_EXIT_USAGE : ARG_NEXT;
}

/* The defaults of every option, before argv is read. */
static void run_opts_defaults(struct run_opts *o)
{
    memset(o, 0, sizeof(*o));
    run_quality_init(&o->quality);
    run_vector_opts_init(&o->vector);
    o->seed = 1;
    o->duration_ns = 20 * TS_NS_PER_S;
    o->drain_ns = 30 * TS_NS_PER_S;
    o->speed = 1.0;
    o->t_connect = 10 * TS_NS_PER_S;
    o->t_ttfb = 300 * TS_NS_PER_S;
    o->t_idle = 120 * TS_NS_PER_S;
}

/* "target:" in --help: where the requests go and how they are sent. */
static int target_option(int c, const char *name, struct run_opts *o)
{
    (void)name;
    switch (c) {
    case O_TARGET:
        o->target = optarg;
        return ARG_NEXT;
    case O_MODEL:
        o->model = optarg;
        return ARG_NEXT;
    case O_API_KEY:
        o->api_key = optarg;
        return ARG_NEXT;
    case O_HEADER:
        if (o->nheaders == RUN_MAX_HEADERS - 2 || !strchr(optarg, ':') || strpbrk(optarg, "\r\n")) {
            fprintf(stderr, "tokenstorm run: --header: expected 'Name: value'\n");
            return TS_EXIT_USAGE;
        }
        o->headers[o->nheaders++] = optarg;
        return ARG_NEXT;
    case O_ENDPOINT:
        o->endpoint = optarg;
        return ARG_NEXT;
    case O_TRANSPORT:
        o->transport = optarg;
        return ARG_NEXT;
    case O_WS_FRAMES:
        o->ws_frames = optarg;
        return ARG_NEXT;
    case O_INSECURE:
        o->insecure = true;
        return ARG_NEXT;
    case O_HTTP2:
        o->http2 = true;
        return ARG_NEXT;
    default:
        return ARG_NOT_MINE;
    }
}

/* A whole number of at least 1 for opt: 0 cannot be meant (0 or -1, the message printed). */
static int parse_positive(const char *opt, const char *s, uint64_t *out)
{
    if (parse_u64(opt, s, out))
        return -1;
    if (*out == 0) {
        fprintf(stderr, "tokenstorm run: %s: must be 1 or more, got '%s'\n", opt, s);
        return -1;
    }
    return 0;
}

/* A duration above 0 for opt, where 0 cannot be meant (0 or -1, the message printed). */
static int parse_dur_positive(const char *opt, const char *s, uint64_t *out)
{
    if (parse_dur(opt, s, out))
        return -1;
    if (*out == 0) {
        fprintf(stderr, "tokenstorm run: %s: must be longer than 0, got '%s'\n", opt, s);
        return -1;
    }
    return 0;
}

/* A whole number in 1..max for opt, or a usage error. */
static int parse_count(const char *opt, const char *s, uint64_t max, uint32_t *out)
{
    uint64_t v;
    if (parse_u64(opt, s, &v))
        return TS_EXIT_USAGE;
    if (v < 1 || v > max) {
        fprintf(stderr, "tokenstorm run: %s must be 1..%u\n", opt, (unsigned)max);
        return TS_EXIT_USAGE;
    }
    *out = (uint32_t)v;
    return ARG_NEXT;
}

/* "load:" in --help: how many requests, when, from how many threads. */
static int load_option(int c, const char *name, struct run_opts *o)
{
    (void)name;
    switch (c) {
    case O_RATE:
        return next_or_usage(parse_rate("--rate", optarg, &o->rate));
    case O_ARRIVAL:
        o->arrival = optarg;
        return ARG_NEXT;
    case O_RAMP_TO:
        return next_or_usage(parse_rate("--ramp-to", optarg, &o->ramp_to));
    case O_STAGES:
        o->stages = optarg;
        return ARG_NEXT;
    case O_CONCURRENCY:
        return parse_count("--concurrency", optarg, RUNNER_MAX_USERS, &o->concurrency);
    case O_THINK:
        o->think = optarg;
        return ARG_NEXT;
    case O_RAMP_USERS:
        return next_or_usage(parse_dur("--ramp-users", optarg, &o->ramp_users_ns));
    case O_DURATION:
        o->duration_given = true;
        return next_or_usage(parse_dur_positive("--duration", optarg, &o->duration_ns));
    case O_REQUESTS:
        return next_or_usage(parse_positive("--requests", optarg, &o->requests));
    case O_WARMUP:
        return next_or_usage(parse_dur("--warmup", optarg, &o->warmup_ns));
    case O_DRAIN:
        o->drain_given = true;
        return next_or_usage(parse_dur("--drain", optarg, &o->drain_ns));
    case O_CANCEL:
        o->cancel = optarg;
        return ARG_NEXT;
    case O_REPLAY:
        o->replay = optarg;
        return ARG_NEXT;
    case O_SPEED: {
        char *end;
        o->speed = strtod(optarg, &end);
        if (end == optarg || *end || !(o->speed > 0 && o->speed <= 1e6)) {
            fprintf(stderr,
                    "tokenstorm run: --speed: expected a factor > 0 (2: twice as fast), "
                    "got '%s'\n",
                    optarg);
            return TS_EXIT_USAGE;
        }
        return ARG_NEXT;
    }
    case O_LOOP:
        o->loop = true;
        return ARG_NEXT;
    case O_WORKERS:
        return parse_count("--workers", optarg, RUNNER_MAX_WORKERS, &o->workers);
    case O_SEED:
        o->seed_given = true;
        return next_or_usage(parse_u64("--seed", optarg, &o->seed));
    default:
        return ARG_NOT_MINE;
    }
}

/* "workload:" and the scenario options in --help: what each request asks. */
static int workload_option(int c, const char *name, struct run_opts *o)
{
    (void)name;
    switch (c) {
    case O_INPUT_LEN:
        o->input_len = optarg;
        return ARG_NEXT;
    case O_OUTPUT_LEN:
        o->output_len = optarg;
        return ARG_NEXT;
    case O_PROMPTS:
        o->prompts = optarg;
        return ARG_NEXT;
    case O_SYSTEM:
        o->system_prompt = optarg;
        return ARG_NEXT;
    case O_NO_EOS:
        o->no_ignore_eos = true;
        return ARG_NEXT;
    case O_NO_STREAM:
        o->no_stream = true;
        return ARG_NEXT;
    case O_BODY:
        o->body = optarg;
        return ARG_NEXT;
    case O_CHECK:
        o->check = true;
        return ARG_NEXT;
    case O_DRY_RUN:
        o->dry_run = cmd_tidy_dir(optarg);
        return ARG_NEXT;
    case O_DRY_RUN_N:
        return next_or_usage(parse_positive("--dry-run-requests", optarg, &o->dry_run_n));
    case O_TOKENIZER:
        o->tokenizer = optarg;
        return ARG_NEXT;
    default:
        return ARG_NOT_MINE;
    }
}

/* "timeouts:" in --help, with the client's timing and engine choices. */
static int timeout_option(int c, const char *name, struct run_opts *o)
{
    (void)name;
    switch (c) {
    case O_T_CONNECT:
        return next_or_usage(parse_dur_positive("--timeout-connect", optarg, &o->t_connect));
    case O_T_TTFB:
        return next_or_usage(parse_dur_positive("--timeout-ttfb", optarg, &o->t_ttfb));
    case O_T_IDLE:
        return next_or_usage(parse_dur_positive("--timeout-idle", optarg, &o->t_idle));
    case O_T_TOTAL:
        return next_or_usage(parse_dur_positive("--timeout", optarg, &o->t_total));
    case O_NO_KERNEL_TS:
        o->no_kernel_timestamps = true;
        return ARG_NEXT;
    case O_HTTP_ENGINE:
        if (!strcmp(optarg, "auto")) {
            o->http_engine_curl = false;
        } else if (!strcmp(optarg, "curl")) {
            o->http_engine_curl = true;
        } else {
            fprintf(stderr, "tokenstorm run: --http-engine: '%s' is not auto or curl\n", optarg);
            return TS_EXIT_USAGE;
        }
        return ARG_NEXT;
    default:
        return ARG_NOT_MINE;
    }
}

/* "checks:" and "answer quality:" in --help: what the run is judged by. */
static int check_option(int c, const char *name, struct run_opts *o)
{
    char err[512];

    switch (c) {
    case O_SLO:
        if (o->nslos == RUN_MAX_SLOS) {
            fprintf(stderr, "tokenstorm run: too many --slo\n");
            return TS_EXIT_USAGE;
        }
        o->slos[o->nslos++] = optarg;
        return ARG_NEXT;
    case O_GOODPUT:
        o->goodput = optarg;
        return ARG_NEXT;
    case O_INTEGRITY:
        if (strcmp(optarg, "hmac")) {
            fprintf(stderr, "tokenstorm run: --integrity: only 'hmac' is supported\n");
            return TS_EXIT_USAGE;
        }
        o->integrity = optarg;
        return ARG_NEXT;
    case O_INTEGRITY_KEY:
        o->integrity_key = optarg;
        return ARG_NEXT;
    case O_QUALITY:
        if (run_quality_option(&o->quality, name, optarg, err, sizeof(err)) < 0) {
            fprintf(stderr, "tokenstorm run: %s\n", err);
            return TS_EXIT_USAGE;
        }
        return ARG_NEXT;
    default:
        return ARG_NOT_MINE;
    }
}

/* --metrics-listen (or --ui) HOST:PORT: an IP address (a name would need a lookup). */
static int parse_metrics_listen(const char *s, struct run_opts *o)
{
    char aerr[128];
    unsigned char ip[16];

    if (o->metrics_listen && strcmp(o->metrics_listen, s)) {
        fprintf(stderr, "tokenstorm run: --ui serves /metrics too: give --ui and "
                        "--metrics-listen the same address, or only --ui\n");
        return TS_EXIT_USAGE;
    }
    if (addr_parse(s, "127.0.0.1", o->metrics_host, &o->metrics_port, aerr, sizeof(aerr))) {
        fprintf(stderr, "tokenstorm run: --metrics-listen: %s\n", aerr);
        return TS_EXIT_USAGE;
    }
    if (inet_pton(AF_INET, o->metrics_host, ip) != 1 &&
        inet_pton(AF_INET6, o->metrics_host, ip) != 1) {
        fprintf(stderr,
                "tokenstorm run: --metrics-listen: '%s' is not an IP address "
                "(e.g. 127.0.0.1:9464)\n",
                o->metrics_host);
        return TS_EXIT_USAGE;
    }
    o->metrics_listen = s;
    return ARG_NEXT;
}

/* --server-metrics URL|auto and its interval. */
static int server_metrics_option(int c, struct run_opts *o)
{
    if (c == O_SERVER_METRICS) {
        if (strncmp(optarg, "http://", 7) && strncmp(optarg, "https://", 8) &&
            strcmp(optarg, "auto")) {
            fprintf(stderr, "tokenstorm run: --server-metrics: expected an http:// or "
                            "https:// URL such as http://127.0.0.1:8000/metrics, or "
                            "'auto'\n");
            return TS_EXIT_USAGE;
        }
        o->server_metrics = optarg;
        return ARG_NEXT;
    }
    if (parse_dur("--server-metrics-interval", optarg, &o->server_metrics_interval_ns))
        return TS_EXIT_USAGE;
    if (o->server_metrics_interval_ns < SCRAPE_MIN_INTERVAL_NS) {
        fprintf(stderr, "tokenstorm run: --server-metrics-interval: at least 100ms\n");
        return TS_EXIT_USAGE;
    }
    return ARG_NEXT;
}

/* "output:" in --help: files, stdout, live metrics and traces, logging. */
static int output_option(int c, const char *name, struct run_opts *o)
{
    (void)name;
    switch (c) {
    case O_OUT:
        o->out_dir = cmd_tidy_dir(optarg);
        return ARG_NEXT;
    case O_FORCE:
        o->force = true;
        return ARG_NEXT;
    case O_SAVE:
        o->save_requests = true;
        return ARG_NEXT;
    case O_SAVE_CHUNKS:
        o->save_requests = o->save_chunk_times = true;
        return ARG_NEXT;
    case O_JSON:
        o->json = true;
        return ARG_NEXT;
    case O_METRICS_LISTEN:
        return parse_metrics_listen(optarg, o);
    case O_UI:
        o->ui = true;
        return parse_metrics_listen(optarg, o);
    case O_API_TOKEN:
        o->api_token = optarg;
        return ARG_NEXT;
    case O_API_INSECURE:
        o->api_insecure = true;
        return ARG_NEXT;
    case O_METRICS_LINGER:
        return next_or_usage(parse_dur("--metrics-linger", optarg, &o->metrics_linger_ns));
    case O_SERVER_METRICS:
    case O_SERVER_METRICS_INTERVAL:
        return server_metrics_option(c, o);
    case O_OTLP_ENDPOINT:
        o->otlp_endpoint = optarg;
        return ARG_NEXT;
    case 'q':
        o->quiet = true;
        return ARG_NEXT;
    case 'v':
        ts_log_set_level(TS_LOG_DEBUG);
        return ARG_NEXT;
    default:
        return ARG_NOT_MINE;
    }
}

/* "distributed:" and "built-in simulator:" in --help. */
static int shard_sim_option(int c, const char *name, struct run_opts *o)
{
    char serr[200];

    (void)name;
    switch (c) {
    case O_SHARD:
        if (shard_parse(optarg, &o->shard, serr, sizeof(serr))) {
            fprintf(stderr, "tokenstorm run: --shard: %s\n", serr);
            return TS_EXIT_USAGE;
        }
        return ARG_NEXT;
    case O_START_AT:
        if (start_at_parse(optarg, &o->start_at_ns, serr, sizeof(serr))) {
            fprintf(stderr, "tokenstorm run: --start-at: %s\n", serr);
            return TS_EXIT_USAGE;
        }
        return ARG_NEXT;
    case O_SIM_PROFILE:
        o->sim_profile = optarg;
        return ARG_NEXT;
    case O_SIM_SET:
        if (o->nsim_sets == sizeof(o->sim_sets) / sizeof(o->sim_sets[0])) {
            fprintf(stderr, "tokenstorm run: too many --sim-set\n");
            return TS_EXIT_USAGE;
        }
        o->sim_sets[o->nsim_sets++] = optarg;
        return ARG_NEXT;
    default:
        return ARG_NOT_MINE;
    }
}

/* --help, --version, or an option getopt rejected (it said which). */
static int help_option(int c)
{
    return cmd_common_flag(c == O_VERSION ? 'V' : c, usage);
}

/* "vector search:" in --help. */
static int vector_option(int c, const char *name, struct run_opts *o)
{
    struct run_vector_opts *v = &o->vector;
    uint64_t n;
    switch (c) {
    case O_VECTOR_DATA:
        v->data = optarg;
        return ARG_NEXT;
    case O_VECTOR_INDEX:
        v->index = optarg;
        return ARG_NEXT;
    case O_VECTOR_QUERIES:
        v->queries = optarg;
        return ARG_NEXT;
    case O_VECTOR_TRUTH:
        v->truth = optarg;
        return ARG_NEXT;
    case O_VECTOR_API:
        v->api = optarg;
        return ARG_NEXT;
    case O_VECTOR_COLLECTION:
        v->collection = optarg;
        return ARG_NEXT;
    case O_PG_TABLE:
        v->pg_table = optarg;
        return ARG_NEXT;
    case O_PG_COLUMN:
        v->pg_column = optarg;
        return ARG_NEXT;
    case O_PG_ID:
        v->pg_id = optarg;
        return ARG_NEXT;
    case O_VECTOR_K:
        return parse_count("--vector-k", optarg, VECSET_MAX_K, &v->k);
    case O_VECTOR_SEED:
        return next_or_usage(parse_u64("--vector-seed", optarg, &v->seed));
    case O_NPROBE:
    case O_EF_SEARCH:
        if (parse_u64(c == O_NPROBE ? "--nprobe" : "--ef-search", optarg, &n))
            return TS_EXIT_USAGE;
        if (n > 65536) {
            fprintf(stderr, "tokenstorm run: --%s must be 0..65536\n", name);
            return TS_EXIT_USAGE;
        }
        *(c == O_NPROBE ? &v->nprobe : &v->ef_search) = (int64_t)n;
        *(c == O_NPROBE ? &v->has_nprobe : &v->has_ef_search) = true;
        return ARG_NEXT;
    default:
        return ARG_NOT_MINE;
    }
}

/* Hands option c (long name `name`) to its group; ARG_NEXT or an exit code. */
static int parse_option(int c, const char *name, struct run_opts *o)
{
    static int (*const groups[])(int, const char *, struct run_opts *) = {
        target_option, load_option,   workload_option,  timeout_option,
        check_option,  output_option, shard_sim_option, vector_option,
    };

    for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
        int rc = groups[i](c, name, o);
        if (rc != ARG_NOT_MINE)
            return rc;
    }
    return help_option(c);
}

/*
 * The scenario file (at most one), then the defaults that depend on what
 * was given: --duration is the file's, or unbounded with --requests or
 * --stages; no load option at all is 10 requests/s, Poisson.
 */
static int finish_args(int argc, char **argv, struct run_opts *o)
{
    if (optind < argc)
        o->scenario = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "tokenstorm run: unexpected argument '%s' (one scenario file at most)\n",
                argv[optind]);
        return TS_EXIT_USAGE;
    }
    if ((o->check || o->dry_run) && !o->scenario) {
        fprintf(stderr, "tokenstorm run: --check and --dry-run need a scenario file\n");
        return TS_EXIT_USAGE;
    }
    if (o->scenario) {
        if (!o->duration_given)
            o->duration_ns = 0; /* the file's, or until the classes' requests are done */
        return ARG_NEXT;
    }
    if (o->requests && !o->duration_given)
        o->duration_ns = 0; /* --requests alone: run until they are done */
    if (!o->rate && !o->concurrency && !o->stages && !o->replay && !run_pg_target(o->target))
        o->rate = 10; /* the default workload: 10 requests/s, Poisson (pgvector: closed loop) */
    if (o->stages)
        o->duration_ns = o->duration_given ? o->duration_ns : 0;
    return ARG_NEXT;
}

/* Returns -1 (ARG_NEXT) to go on, or the exit code to return. */
static int parse_args(int argc, char **argv, struct run_opts *o)
{
    int c, opt_index = 0;

    run_opts_defaults(o);
    o->options = run_options;
    optind = 1;
    while ((c = cmd_getopt("run", argc, argv, "qvh", run_options, &opt_index)) != -1) {
        int rc = parse_option(c, run_options[opt_index].name, o);
        if (rc != ARG_NEXT)
            return rc;
    }
    return finish_args(argc, argv, o);
}

int cmd_run(int argc, char **argv)
{
    struct run_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (o.ui) {
        rc = cmd_ctlauth_setup("tokenstorm run", "--ui", "the dashboard (--ui)", o.metrics_host,
                               o.api_token, o.api_insecure, &o.ui_token);
        if (rc >= 0)
            return rc;
    }
    return run_job(&o, &argc, &argv);
}
