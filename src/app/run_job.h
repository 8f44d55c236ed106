/*
 * run_job.h - `tokenstorm run` as a library call: the parsed options and the
 * job that carries them out. The command file parses argv into struct
 * run_opts; run_job() does the rest and returns the process exit code
 * (TS_EXIT_*: 0 ok, 1 an SLO failed, 2 usage, 3 could not run, 130
 * interrupted).
 */
#ifndef TS_APP_RUN_JOB_H
#define TS_APP_RUN_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "app/ranks.h"
#include "app/run_quality.h"
#include "net/addr.h"

struct option;

#define RUN_MAX_HEADERS 64
#define RUN_MAX_SLOS    64

struct run_opts {
    const char *target, *model, *api_key, *endpoint, *arrival, *stages, *think, *input_len,
        *output_len, *prompts, *system_prompt, *body, *out_dir, *goodput, *sim_profile, *integrity,
        *integrity_key, *metrics_listen;
    char metrics_host[ADDR_HOST_MAX];
    int metrics_port;
    /* --ui HOST:PORT: the live dashboard on the metrics address (live_ui.h);
     * ui_token: the token it enforces (net/ctlauth.h), NULL for none */
    bool ui;
    const char *ui_token;
    const char *api_token; /* --api-token, for --ui on a routable address */
    bool api_insecure;     /* --api-insecure */
    uint64_t metrics_linger_ns;
    const char *server_metrics; /* --server-metrics URL */
    uint64_t server_metrics_interval_ns;
    struct shard shard;        /* --shard i/N; {0, 0} = the whole run */
    uint64_t start_at_ns;      /* --start-at, wall clock; 0 = now */
    const char *otlp_endpoint; /* --otlp-endpoint URL */
    const char *headers[RUN_MAX_HEADERS];
    size_t nheaders;
    const char *slos[RUN_MAX_SLOS];
    size_t nslos;
    const char *sim_sets[64];
    size_t nsim_sets;
    double rate, ramp_to;
    uint32_t concurrency, workers;
    uint64_t requests, seed;
    uint64_t duration_ns, warmup_ns, drain_ns, ramp_users_ns;
    uint64_t t_connect, t_ttfb, t_idle, t_total;
    bool insecure, http2, no_ignore_eos, no_stream, save_requests, json, quiet;
    bool save_chunk_times; /* requests.jsonl lines carry chunk_us */
    bool force;            /* --force: clear the results already in --out (report/outdir.h) */
    /* scenario files (app/run_scenario.h) */
    const char *scenario;  /* the YAML file, or NULL */
    bool check;            /* --check: validate and exit */
    const char *dry_run;   /* --dry-run DIR: write the requests, send nothing */
    uint64_t dry_run_n;    /* --dry-run-requests: iterations per class (default 100) */
    const char *tokenizer; /* --tokenizer FILE */
    bool duration_given, drain_given, seed_given;
    bool no_kernel_timestamps; /* time stream bytes when read, not by the kernel's arrival */
    bool http_engine_curl;     /* libcurl for plain http:// too (--http-engine curl) */
    struct run_quality_opts quality;
    /* the command's getopt_long table: result.json's command line is
     * redacted by it (abbreviated options resolve as getopt resolved them) */
    const struct option *options;
};

struct goodput_cfg;
/* Parses "ttft:MS tpot:MS e2el:MS" (any of them) into g; 0 or -EINVAL with a message. */
TS_MUST_CHECK int run_parse_goodput(const char *s, struct goodput_cfg *g, char *err, size_t errlen);

/*
 * Carries out the run described by o; returns the exit code. argc/argv are
 * the process's, for MPI_Init under mpirun (see app/ranks.h).
 *
 * Ownership: o stays the caller's. run_job works on a copy of it, frees
 * nothing o holds and leaves nothing for the caller to free: it compiles
 * o->quality's regex into its copy and frees that before it returns (a regex
 * the caller compiled into o->quality itself is left alone: the caller frees
 * it with run_quality_release). The strings o points to must stay valid for
 * the call.
 */
int run_job(const struct run_opts *o, int *argc, char ***argv);

#endif
