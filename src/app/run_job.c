/*
 * run_job.c - what `tokenstorm run` does once its options are parsed: start
 * the built-in simulator when there is no target, resolve the target and the
 * model, build the workload and the runner's configuration, run, and write
 * the summary and the result files.
 */
#include "app/run_job.h"

#include <arpa/inet.h>
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
#include "app/dist.h"
#include "app/run_scenario.h"
#include "load/runner.h"
#include "load/target.h"
#include "net/addr.h"
#include "report/result.h"
#include "report/text.h"
#include "sim/thread.h"
#include "ts_config.h"

int run_parse_goodput(const char *s, struct goodput_cfg *g, char *err, size_t errlen)
{
    char copy[256];
    snprintf(copy, sizeof(copy), "%s", s);
    char *save = NULL;
    for (char *tok = strtok_r(copy, " ,", &save); tok; tok = strtok_r(NULL, " ,", &save)) {
        char *colon = strchr(tok, ':');
        char *end;
        double v = colon ? strtod(colon + 1, &end) : 0;
        if (!colon || end == colon + 1 || *end || !(v > 0)) {
            snprintf(err, errlen, "goodput: expected 'ttft:MS tpot:MS e2el:MS', got '%s'", tok);
            return -EINVAL;
        }
        *colon = '\0';
        if (!strcmp(tok, "ttft"))
            g->ttft_ms = v;
        else if (!strcmp(tok, "tpot"))
            g->tpot_ms = v;
        else if (!strcmp(tok, "e2el"))
            g->e2el_ms = v;
        else {
            snprintf(err, errlen, "goodput: unknown metric '%s' (ttft, tpot, e2el)", tok);
            return -EINVAL;
        }
    }
    return 0;
}

struct progress {
    bool tty;
    bool quiet;
    uint64_t last_line_ns;
    struct dist_group *group; /* MPI: rank 0 shows the sum of the ranks */
};

static void on_tick(const struct runner_progress *p, void *arg)
{
    struct progress *pg = arg;
    struct runner_progress all;
    struct runner_point all_last;
    if (pg->group) {
        if (!dist_group_progress(pg->group, p, &all, &all_last))
            return; /* a rank > 0: its progress went to rank 0 */
        p = &all;
    }
    if (pg->quiet)
        return;
    char remain[32] = "";
    if (p->total_s > 0 && !p->draining)
        snprintf(remain, sizeof(remain), "/%.0fs", p->total_s);
    char line[256];
    snprintf(line, sizeof(line),
             "%s%5.0fs%s  sent %llu  done %llu  err %llu  in-flight %llu  %.1f req/s  %.0f tok/s"
             "  TTFT p50 %.0f ms p99 %.0f ms",
             p->draining ? "draining " : "", p->elapsed_s, remain, (unsigned long long)p->sent,
             (unsigned long long)p->completed, (unsigned long long)p->errors,
             (unsigned long long)p->in_flight, p->rate, p->tokens_per_s, p->last->ttft_p50_ms,
             p->last->ttft_p99_ms);
    if (pg->tty) {
        fprintf(stderr, "\r\033[K%s", line);
    } else {
        uint64_t now = ts_now_ns();
        if (now - pg->last_line_ns < 5 * TS_NS_PER_S)
            return;
        pg->last_line_ns = now;
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
}

/* --metrics-listen: the URL, once bound (port 0 picks one). */
static void on_metrics_listen(const char *host, int port, void *arg)
{
    bool v6 = strchr(host, ':') != NULL;
    fprintf(stderr, "tokenstorm run: metrics on http://%s%s%s:%d/metrics\n", v6 ? "[" : "", host,
            v6 ? "]" : "", port);
}

/* Right before time 0: the MPI barrier, then --start-at. */
struct start_gate {
    struct dist_group *group;
    uint64_t start_at_ns;
};

static void before_start(void *arg)
{
    struct start_gate *g = arg;
    dist_group_barrier(g->group);
    uint64_t late = start_at_wait(g->start_at_ns);
    if (late > 100 * TS_NS_PER_MS)
        ts_warn("--start-at: started %.3f s late (the process came up after the instant)",
                (double)late / 1e9);
}

/* ---- result files ---- */

static int make_dirs(const char *path, char *err, size_t errlen)
{
    char tmp[1024];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) && errno != EEXIST)
            goto fail;
        *p = '/';
    }
    if (mkdir(tmp, 0755) && errno != EEXIST)
        goto fail;
    return 0;
fail:;
    int e = errno;
    snprintf(err, errlen, "cannot create %.200s: %s", tmp, strerror(e));
    return -e;
}

static json_t *timeline_json(const struct runner_result *r)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < r->ntimeline; i++) {
        const struct runner_point *p = &r->timeline[i];
        json_array_append_new(
            a,
            json_pack("{s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f}", "t_s", p->t_s,
                      "sent", (json_int_t)p->sent, "completed", (json_int_t)p->completed, "errors",
                      (json_int_t)p->errors, "in_flight", (json_int_t)p->in_flight, "output_tokens",
                      (json_int_t)p->output_tokens, "chunks", (json_int_t)p->chunks, "ttft_p50_ms",
                      p->ttft_p50_ms, "ttft_p99_ms", p->ttft_p99_ms, "e2el_p50_ms", p->e2el_p50_ms,
                      "lag_p99_ms", p->lag_p99_ms));
    }
    return a;
}

static json_t *config_json(const struct run_opts *o, const char *url, const char *model,
                           const char *sim_profile)
{
    json_t *j =
        json_pack("{s:s, s:s, s:s?, s:s}", "target", url, "model", model, "simulator_profile",
                  sim_profile, "endpoint", o->endpoint ? o->endpoint : "chat");
    if (!j)
        return NULL;
    if (o->concurrency && !o->rate && !o->stages) {
        json_object_set_new(j, "mode", json_string("closed"));
        json_object_set_new(j, "users", json_integer(o->concurrency));
        if (o->think)
            json_object_set_new(j, "think", json_string(o->think));
    } else {
        json_object_set_new(j, "mode", json_string("open"));
        json_object_set_new(j, "rate", json_real(o->rate));
        json_object_set_new(j, "arrival", json_string(o->arrival ? o->arrival : "poisson"));
        if (o->stages)
            json_object_set_new(j, "stages", json_string(o->stages));
        if (o->ramp_to > 0)
            json_object_set_new(j, "ramp_to", json_real(o->ramp_to));
        if (o->concurrency)
            json_object_set_new(j, "max_concurrency", json_integer(o->concurrency));
    }
    json_object_set_new(j, "duration_s", json_real((double)o->duration_ns / 1e9));
    json_object_set_new(j, "requests", json_integer((json_int_t)o->requests));
    json_object_set_new(j, "seed", json_integer((json_int_t)o->seed));
    json_object_set_new(j, "input_len",
                        json_string(o->input_len ? o->input_len : "lognormal:512,0.5"));
    json_object_set_new(j, "output_len",
                        json_string(o->output_len ? o->output_len : "uniform:64-256"));
    json_object_set_new(j, "stream", json_boolean(!o->no_stream));
    json_object_set_new(j, "ignore_eos", json_boolean(!o->no_ignore_eos));
    /* which client engine plain http:// calls ran on (TLS and HTTP/2: always curl) */
    json_object_set_new(j, "http_engine", json_string(o->http_engine_curl ? "curl" : "auto"));
    json_object_set_new(j, "kernel_timestamps",
                        json_boolean(!o->http2 && !o->no_kernel_timestamps));
    if (o->prompts)
        json_object_set_new(j, "prompts", json_string(o->prompts));
    return j;
}

/* ---- --dry-run ---- */

static int run_dry(const struct run_opts *o, struct scenario *scn)
{
    char err[1024] = "";
    struct scenario_run sr;
    memset(&sr, 0, sizeof(sr));
    const char *base = o->target ? o->target : "http://127.0.0.1:8000/v1";
    const char *model = o->model ? o->model : "default";
    char path[1200];
    FILE *out = NULL;
    json_t *summary = NULL;
    int code = TS_EXIT_FAIL;
    if (make_dirs(o->dry_run, err, sizeof(err)))
        goto out;
    if (scenario_run_tokenizer(&sr, o->tokenizer ? o->tokenizer : scn->target.tokenizer, err,
                               sizeof(err)) ||
        scenario_run_init(&sr, scn, base, model, o->requests, err, sizeof(err))) {
        code = TS_EXIT_USAGE;
        goto out;
    }
    snprintf(path, sizeof(path), "%s/requests.jsonl", o->dry_run);
    if (!(out = fopen(path, "w"))) {
        snprintf(err, sizeof(err), "cannot write %.900s: %s", path, strerror(errno));
        goto out;
    }
    if (scenario_run_dry(&sr, o->dry_run_n ? o->dry_run_n : 100, out, &summary, err, sizeof(err)))
        goto out;
    if (fclose(out)) {
        out = NULL;
        snprintf(err, sizeof(err), "%.900s: write error", path);
        goto out;
    }
    out = NULL;
    snprintf(path, sizeof(path), "%s/workload.json", o->dry_run);
    if (result_write_file(summary, path, err, sizeof(err)))
        goto out;
    if (!o->quiet) {
        char *text = json_dumps(summary, JSON_INDENT(2));
        if (text && o->json)
            printf("%s\n", text);
        free(text);
        if (!o->json)
            printf("dry run: requests in %s/requests.jsonl, summary in %s\n", o->dry_run, path);
    }
    code = TS_EXIT_OK;
out:
    if (code != TS_EXIT_OK)
        fprintf(stderr, "tokenstorm run: %s\n", err);
    if (out)
        fclose(out);
    json_decref(summary);
    scenario_run_release(&sr);
    return code;
}

/* ---- main ---- */

int run_job(struct run_opts *opts, int *argc, char ***argv)
{
    struct run_opts o = *opts;
    int rc;
    char err[1024];
    int exit_code = TS_EXIT_OK;
    struct scenario scn;
    memset(&scn, 0, sizeof(scn));
    struct scenario_run sr;
    memset(&sr, 0, sizeof(sr));

    struct slo slos[RUN_MAX_SLOS];
    for (size_t i = 0; i < o.nslos; i++) {
        if (slo_parse(o.slos[i], &slos[i], err, sizeof(err))) {
            fprintf(stderr, "tokenstorm run: --slo: %s\n", err);
            return TS_EXIT_USAGE;
        }
    }
    struct goodput_cfg goodput = {0};
    if (o.goodput && run_parse_goodput(o.goodput, &goodput, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm run: --%s\n", err);
        return TS_EXIT_USAGE;
    }
    enum workload_endpoint ep = WORKLOAD_CHAT;
    if (o.endpoint && workload_endpoint_parse(o.endpoint, &ep)) {
        fprintf(stderr, "tokenstorm run: --endpoint: expected chat, completions or embeddings\n");
        return TS_EXIT_USAGE;
    }
    struct dist think;
    memset(&think, 0, sizeof(think));
    if (o.think && dist_parse(&think, o.think, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm run: --think: %s\n", err);
        return TS_EXIT_USAGE;
    }
    json_t *overrides = NULL;
    if (o.body) {
        json_error_t jerr;
        overrides = json_loads(o.body, 0, &jerr);
        if (!json_is_object(overrides)) {
            fprintf(stderr, "tokenstorm run: --body: expected a JSON object%s%s\n",
                    overrides ? "" : ": ", overrides ? "" : jerr.text);
            json_decref(overrides);
            dist_release(&think);
            return TS_EXIT_USAGE;
        }
    }
    /* OpenTelemetry traces: --otlp-endpoint and the OTEL_* variables */
    struct otlp_config otlp;
    otlp_config_init(&otlp);
    if ((rc = otlp_config_from_env(&otlp, o.otlp_endpoint, err, sizeof(err)))) {
        fprintf(stderr, "tokenstorm run: %s\n", rc == -ENOMEM ? "out of memory" : err);
        otlp_config_release(&otlp);
        json_decref(overrides);
        dist_release(&think);
        return rc == -ENOMEM ? TS_EXIT_FAIL : TS_EXIT_USAGE;
    }
    if (http_client_global_init()) {
        fprintf(stderr, "tokenstorm run: cannot initialise libcurl\n");
        otlp_config_release(&otlp);
        return TS_EXIT_FAIL;
    }
    struct sim_thread *sim = NULL;
    struct dist_group *group = NULL;
    if (o.scenario) {
        int lrc = scenario_load(&scn, o.scenario, err, sizeof(err));
        if (lrc) {
            fprintf(stderr, "tokenstorm run: %s\n", err);
            exit_code = lrc == -ENOMEM ? TS_EXIT_FAIL : TS_EXIT_USAGE;
            goto out;
        }
        scenario_apply_opts(&scn, &o);
        if (o.check) {
            /* build the classes too: templates, prompt and dataset files, tokenizer
             * (the description first: building moves the prompt schemas out) */
            char *desc = NULL;
            size_t desc_len = 0;
            FILE *mem = open_memstream(&desc, &desc_len);
            if (mem) {
                scenario_print_check(mem, &scn);
                fclose(mem);
            }
            if (scenario_run_tokenizer(&sr, o.tokenizer ? o.tokenizer : scn.target.tokenizer, err,
                                       sizeof(err)) ||
                scenario_run_init(&sr, &scn, o.target ? o.target : "http://127.0.0.1:8000/v1",
                                  o.model ? o.model : "default", o.requests, err, sizeof(err))) {
                fprintf(stderr, "tokenstorm run: %s: %s\n", o.scenario, err);
                free(desc);
                exit_code = TS_EXIT_USAGE;
                goto out;
            }
            if (desc)
                fputs(desc, stdout);
            free(desc);
            goto out;
        }
        if (o.dry_run) {
            exit_code = run_dry(&o, &scn);
            goto out;
        }
    }
    /* the target: given, or the built-in simulator */
    char target_buf[128];
    const char *target = o.target;
    char model[256] = "";
    const char *sim_profile = NULL;
    /* MPI (mpirun/srun): each rank runs shard rank/N; not with an explicit --shard */
    if (!o.shard.count && dist_group_join(&group, argc, argv, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm run: %s\n", err);
        exit_code = TS_EXIT_USAGE;
        goto out;
    }
    uint32_t rank = dist_group_rank(group);
    if (rank)
        o.quiet = true; /* rank 0 speaks for the job */
    if (group && !target && !rank)
        ts_warn("no --target: every rank starts its own simulator");
    if (!target) {
        struct sim_server_config scfg = {0};
        sim_profile = o.sim_profile ? o.sim_profile : "llama3-8b-a100";
        if (sim_profile_preset(sim_profile, &scfg.profile)) {
            fprintf(stderr, "tokenstorm run: unknown --sim-profile '%s'\n", sim_profile);
            exit_code = TS_EXIT_USAGE;
            goto out;
        }
        for (size_t i = 0; i < o.nsim_sets; i++) {
            if (sim_profile_set_kv(&scfg.profile, o.sim_sets[i], err, sizeof(err))) {
                fprintf(stderr, "tokenstorm run: --sim-set %s: %s\n", o.sim_sets[i], err);
                exit_code = TS_EXIT_USAGE;
                goto out;
            }
        }
        if (sim_profile_validate(&scfg.profile, err, sizeof(err))) {
            fprintf(stderr, "tokenstorm run: simulator profile: %s\n", err);
            exit_code = TS_EXIT_USAGE;
            goto out;
        }
        scfg.host = "127.0.0.1";
        scfg.quiet = true;
        scfg.any_model = true;
        if (sim_thread_start(&scfg, &sim, err, sizeof(err))) {
            fprintf(stderr, "tokenstorm run: cannot start the simulator: %s\n", err);
            exit_code = TS_EXIT_FAIL;
            goto out;
        }
        snprintf(target_buf, sizeof(target_buf), "http://127.0.0.1:%d/v1", sim_thread_port(sim));
        target = target_buf;
        snprintf(model, sizeof(model), "%s", scfg.profile.model);
        if (!o.quiet && !o.json)
            fprintf(stderr, "tokenstorm run: no --target: simulator '%s' on %s\n", sim_profile,
                    target);
    }
    char url[TARGET_URL_MAX], models_url[TARGET_URL_MAX];
    if (target_resolve(target, ep, url, models_url, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm run: %s\n", err);
        exit_code = TS_EXIT_USAGE;
        goto out;
    }
    /* headers: the API key never leaves this process except to the target */
    char auth[1024] = "";
    const char *headers[RUN_MAX_HEADERS];
    size_t nheaders = 0;
    const char *key = o.api_key ? o.api_key : getenv("OPENAI_API_KEY");
    if (key && *key) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", key);
        headers[nheaders++] = auth;
    }
    headers[nheaders++] = "Content-Type: application/json";
    struct trace_context trace_parent = {0};
    bool has_trace_parent = false;
    for (size_t i = 0; i < o.nheaders; i++) {
        /* --header traceparent: every request joins that trace as a child */
        int tp = reqtrace_header_parent(o.headers[i], &trace_parent);
        if (tp < 0) {
            fprintf(stderr, "tokenstorm run: --header traceparent: not a valid W3C value\n");
            exit_code = TS_EXIT_USAGE;
            goto out;
        }
        has_trace_parent |= tp == 1;
        if (!tp)
            headers[nheaders++] = o.headers[i];
    }
    if (o.model)
        snprintf(model, sizeof(model), "%s", o.model);
    else if (!model[0] && target_discover_model(models_url, headers, nheaders, o.insecure, model,
                                                sizeof(model), err, sizeof(err))) {
        fprintf(stderr, "tokenstorm run: %s\n", err);
        exit_code = TS_EXIT_FAIL;
        goto out;
    }

    struct workload_cfg wcfg;
    workload_cfg_init(&wcfg);
    wcfg.endpoint = ep;
    wcfg.model = model;
    wcfg.input_tokens = o.input_len ? o.input_len : "lognormal:512,0.5";
    wcfg.output_tokens = o.output_len ? o.output_len : "uniform:64-256";
    wcfg.ignore_eos = !o.no_ignore_eos;
    wcfg.stream = !o.no_stream && ep != WORKLOAD_EMBEDDINGS;
    wcfg.system_prompt = o.system_prompt;
    wcfg.prompts_path = o.prompts;
    wcfg.body_overrides = overrides;
    wcfg.seed = o.seed;
    struct workload wl;
    memset(&wl, 0, sizeof(wl));
    if (!o.scenario && workload_init(&wl, &wcfg, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm run: %s\n", err);
        exit_code = TS_EXIT_USAGE;
        goto out;
    }

    /* the result directory */
    char dir[1024];
    if (o.out_dir) {
        snprintf(dir, sizeof(dir), "%s", o.out_dir);
    } else {
        char stamp[32];
        ts_wall_format(ts_wall_ns(), stamp, sizeof(stamp));
        stamp[19] = '\0'; /* 2026-11-29T17:31:48 */
        for (char *p = stamp; *p; p++)
            if (*p == ':')
                *p = '-';
        snprintf(dir, sizeof(dir), "tokenstorm-results/%sZ-run", stamp);
    }
    dist_group_bcast(group, dir, sizeof(dir)); /* MPI: rank 0's name (the time differs) */
    char rank_dir[sizeof(dir)]; /* MPI: each rank's requests.jsonl and latency.hlog */
    snprintf(rank_dir, sizeof(rank_dir), "%s", dir);
    if (group)
        snprintf(rank_dir, sizeof(rank_dir), "%.990s/rank-%u", dir, rank);
    if (make_dirs(rank_dir, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm run: %s\n", err);
        exit_code = TS_EXIT_FAIL;
        goto out_workload;
    }
    char path[1200];
    struct asyncw *requests_out = NULL;
    if (o.save_requests) {
        snprintf(path, sizeof(path), "%s/requests.jsonl", rank_dir);
        if (asyncw_open(path, 0, &requests_out, err, sizeof(err))) {
            fprintf(stderr, "tokenstorm run: %s\n", err);
            exit_code = TS_EXIT_FAIL;
            goto out_workload;
        }
    }
    snprintf(path, sizeof(path), "%s/latency.hlog", rank_dir);
    FILE *hlog = fopen(path, "w");
    if (!hlog)
        ts_warn("cannot write %s: %s", path, strerror(errno));

    struct runner_config rcfg = {
        .url = url,
        .headers = headers,
        .n_headers = nheaders,
        .workload = &wl,
        .mode = (o.rate > 0 || o.stages) ? RUNNER_OPEN : RUNNER_CLOSED,
        .users = o.concurrency,
        .think = o.think ? &think : NULL,
        .ramp_users_ns = o.ramp_users_ns,
        .max_concurrency = (o.rate > 0 || o.stages) ? o.concurrency : 0,
        .duration_ns = o.duration_ns,
        .max_requests = o.requests,
        .warmup_ns = o.warmup_ns,
        .drain_ns = o.drain_ns,
        .workers = o.workers,
        .seed = o.seed,
        .goodput = goodput,
        .requests_out = requests_out,
        .hlog = hlog,
        .handle_signals = true,
        .on_tick = on_tick,
    };
    if (!rcfg.workers) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        rcfg.workers = n < 1 ? 1 : n > RUNNER_MAX_WORKERS ? RUNNER_MAX_WORKERS : (uint32_t)n;
    }
    if (o.arrival && arrival_process_parse(&rcfg.arrival.process, o.arrival, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm run: --arrival: %s\n", err);
        exit_code = TS_EXIT_USAGE;
        goto out_files;
    } else if (!o.arrival) {
        rcfg.arrival.process.kind = ARRIVAL_POISSON;
    }
    rcfg.arrival.rate = o.rate;
    rcfg.arrival.stages = o.stages;
    if (o.ramp_to > 0) {
        rcfg.arrival.ramp_to = o.ramp_to;
        rcfg.arrival.ramp_ns = o.duration_ns;
    }
    http_client_config_default(&rcfg.client);
    rcfg.client.connect_timeout_ms = (uint32_t)(o.t_connect / TS_NS_PER_MS);
    rcfg.client.ttfb_timeout_ms = (uint32_t)(o.t_ttfb / TS_NS_PER_MS);
    rcfg.client.idle_timeout_ms = (uint32_t)(o.t_idle / TS_NS_PER_MS);
    rcfg.client.total_timeout_ms = (uint32_t)(o.t_total / TS_NS_PER_MS);
    rcfg.client.insecure = o.insecure;
    rcfg.client.version = o.http2 ? HTTP_CLIENT_HTTP2_TLS : HTTP_CLIENT_HTTP1;
    /* time stream bytes by their kernel arrival, not by when curl reads them */
    rcfg.client.rx_timestamps = !o.http2 && !o.no_kernel_timestamps;
    rcfg.client.engine = o.http_engine_curl ? HTTP_CLIENT_ENGINE_CURL : HTTP_CLIENT_ENGINE_AUTO;
    struct progress pg = {.tty = isatty(STDERR_FILENO), .quiet = o.quiet || o.json, .group = group};
    rcfg.tick_arg = &pg;
    char metrics_url[TARGET_URL_MAX];
    if (o.server_metrics && !rank) { /* MPI: one server timeline, from rank 0 */
        snprintf(metrics_url, sizeof(metrics_url), "%s", o.server_metrics);
        if (!strcmp(o.server_metrics, "auto") &&
            scrape_url_from_target(url, metrics_url, sizeof(metrics_url))) {
            fprintf(stderr, "tokenstorm run: --server-metrics auto: no URL from '%s'\n", url);
            exit_code = TS_EXIT_USAGE;
            goto out_files;
        }
        rcfg.server_metrics.url = metrics_url;
        rcfg.server_metrics.interval_ns = o.server_metrics_interval_ns;
        rcfg.server_metrics.insecure = o.insecure;
    }
    rcfg.shard = group ? dist_group_shard(group) : o.shard;
    if (group) {
        rcfg.run_id = splitmix64_next(&(uint64_t){ts_wall_ns() ^ (uint64_t)getpid()});
        dist_group_bcast(group, &rcfg.run_id, sizeof(rcfg.run_id)); /* one run id for all */
    }
    struct start_gate gate = {.group = group, .start_at_ns = o.start_at_ns};
    rcfg.before_start = before_start; /* start together */
    rcfg.before_start_arg = &gate;
    if (run_quality_apply(&o.quality, &rcfg, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm run: %s\n", err);
        exit_code = TS_EXIT_USAGE;
        goto out_files;
    }
    if (o.integrity) {
        rcfg.integrity_key = o.integrity_key ? o.integrity_key : getenv("TOKENSTORM_INTEGRITY_KEY");
        if (!rcfg.integrity_key) {
            fprintf(stderr, "tokenstorm run: --integrity hmac needs --integrity-key or "
                            "$TOKENSTORM_INTEGRITY_KEY\n");
            exit_code = TS_EXIT_USAGE;
            goto out_files;
        }
    }
    if (o.metrics_listen) {
        static const char *const ep_names[] = {"chat", "completions", "embeddings"};
        rcfg.metrics = (struct runner_metrics){
            .host = o.metrics_host,
            .port = o.metrics_port,
            .linger_ns = o.metrics_linger_ns,
            .info = {.model = model,
                     .endpoint = ep_names[ep],
                     .url = url,
                     .stream = wcfg.stream,
                     .goodput = goodput_cfg_enabled(&goodput)},
            .on_listen = on_metrics_listen,
        };
    }
    rcfg.trace = (struct reqtrace_config){
        .otlp = otlp.endpoint ? &otlp : NULL,
        .model = model,
        .scenario = "run",
        .has_parent = has_trace_parent,
        .parent = trace_parent,
    };
    json_t *temperature = json_object_get(overrides, "temperature");
    if (json_is_number(temperature)) {
        rcfg.trace.temperature = json_number_value(temperature);
        rcfg.trace.has_temperature = true;
    }
    if (o.scenario) {
        /* the target's base URL, for the classes' endpoints and {{target}} in flows */
        char base[TARGET_URL_MAX];
        snprintf(base, sizeof(base), "%s", models_url);
        size_t bl = strlen(base);
        if (bl > 7 && !strcmp(base + bl - 7, "/models"))
            base[bl - 7] = '\0';
        if (scenario_run_tokenizer(&sr, o.tokenizer ? o.tokenizer : scn.target.tokenizer, err,
                                   sizeof(err)) ||
            scenario_run_init(&sr, &scn, base, model, o.requests, err, sizeof(err))) {
            fprintf(stderr, "tokenstorm run: %s\n", err);
            exit_code = TS_EXIT_USAGE;
            goto out_files;
        }
        rcfg.classes = sr.classes;
        rcfg.nclasses = sr.n;
        rcfg.make_tokcount = scenario_run_make_tokcount;
        rcfg.tokcount_arg = &sr;
        rcfg.trace.scenario = scn.name ? scn.name : "scenario";
    } else if (o.tokenizer) {
        /* exact synthetic input lengths, output tokens counted here when no usage */
        if (scenario_run_tokenizer(&sr, o.tokenizer, err, sizeof(err))) {
            fprintf(stderr, "tokenstorm run: %s\n", err);
            exit_code = TS_EXIT_USAGE;
            goto out_files;
        }
        rcfg.make_tokcount = scenario_run_make_tokcount;
        rcfg.tokcount_arg = &sr;
    }
    if (runner_config_check(&rcfg, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm run: %s\n", err);
        exit_code = TS_EXIT_USAGE;
        goto out_files;
    }

    struct runner_result res;
    if (runner_run(&rcfg, &res, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm run: the run failed: %s\n", err);
        exit_code = TS_EXIT_FAIL;
        goto out_files;
    }
    if (group) { /* MPI: rank 0 merges every rank's measurements into res and reports */
        if (dist_group_merge(group, &res, (double)o.warmup_ns / 1e9, &goodput, err, sizeof(err))) {
            fprintf(stderr, "tokenstorm run: merging the ranks' results: %s\n", err);
            exit_code = TS_EXIT_FAIL;
        }
        if (exit_code || rank) {
            if (!exit_code && res.interrupted)
                exit_code = TS_EXIT_INTERRUPTED;
            runner_result_release(&res);
            goto out_files;
        }
    }
    if (pg.tty && !pg.quiet)
        fprintf(stderr, "\n");

    struct run_summary sum;
    run_summary_compute(&sum, res.total, res.duration_s, res.peak_output_tps, &goodput);
    if (rcfg.quality.dual_sla)
        sum.quality.dual_sla = dual_sla_attainment(&res.dual_sla);
    if (res.consistency) {
        struct consistency_summary cs;
        consistency_get(res.consistency, &cs);
        sum.quality.consistency = cs.mean_similarity;
    }
    const struct quality_stats *qs = &res.total->quality;
    json_t *quality = (qs->requests || rcfg.quality.dual_sla || res.consistency)
                          ? quality_stats_to_json(qs, rcfg.quality.dual_sla ? &res.dual_sla : NULL,
                                                  res.consistency)
                          : NULL;
    json_t *tl = timeline_json(&res);
    json_t *conf = config_json(&o, url, model, sim_profile);
    if (conf) {
        char id[32];
        snprintf(id, sizeof(id), "%016llx", (unsigned long long)res.run_id);
        json_object_set_new(conf, "run_id", json_string(id));
        json_object_set_new(conf, "start_mono_ns", json_integer((json_int_t)res.start_mono_ns));
        json_object_set_new(conf, "workers", json_integer(rcfg.workers));
        if (rcfg.shard.count > 1) {
            char sh[32];
            snprintf(sh, sizeof(sh), "%u/%u", rcfg.shard.index, rcfg.shard.count);
            json_object_set_new(conf, group ? "mpi_ranks" : "shard",
                                group ? json_integer(rcfg.shard.count) : json_string(sh));
        }
    }
    json_t *server_tl = NULL, *server_info = NULL;
    if (rcfg.server_metrics.url) {
        server_tl = scrape_timeline_json(&res.server);
        server_info = scrape_info_json(&res.server, &rcfg.server_metrics);
        if (res.server.failures && !o.quiet)
            fprintf(stderr, "tokenstorm run: server metrics: %llu of %llu scrapes failed (%s)\n",
                    (unsigned long long)res.server.failures, (unsigned long long)res.server.scrapes,
                    res.server.last_error);
    }
    struct result_info info = {
        .config = conf,
        .started_wall_ns = res.started_wall_ns,
        .warmup_s = (double)o.warmup_ns / 1e9,
        .end_cut = res.end_cut,
        .slos = slos,
        .nslos = o.nslos,
        .timeline = tl,
        .server_timeline = server_tl,
        .server_metrics = server_info,
        .quality = quality,
    };
    json_t *doc = NULL;
    size_t class_failed = 0;
    if (result_build(res.total, &sum, &info, &doc)) {
        fprintf(stderr, "tokenstorm run: cannot build result.json\n");
        exit_code = TS_EXIT_FAIL;
    } else {
        if (res.otlp_enabled)
            json_object_set_new(doc, "otlp", otlp_stats_json(&res.otlp));
        if (o.scenario) {
            json_object_set_new(doc, "classes", scenario_run_results(&sr, &res, &class_failed));
            /* the workload's make-up: the first iterations of each class, as generated */
            json_t *wsum = NULL;
            char werr[256] = "";
            if (!scenario_run_dry(&sr, 1000, NULL, &wsum, werr, sizeof(werr)))
                json_object_set_new(doc, "workload", wsum);
            else
                ts_warn("workload summary: %s", werr);
        }
        snprintf(path, sizeof(path), "%s/result.json", dir);
        if (result_write_file(doc, path, err, sizeof(err))) {
            fprintf(stderr, "tokenstorm run: %s\n", err);
            exit_code = TS_EXIT_FAIL;
        }
    }
    size_t failed = 0;
    if (o.json) {
        if (doc) {
            char *text = json_dumps(doc, JSON_INDENT(2));
            if (text)
                printf("%s\n", text);
            free(text);
        }
        for (size_t i = 0; i < o.nslos; i++) {
            double actual;
            failed += !slo_eval(&slos[i], &sum, &actual);
        }
    } else {
        if (report_text_summary(stdout, res.total, &sum) ||
            (o.nslos && report_text_slo(stdout, slos, o.nslos, &sum, &failed)))
            ts_warn("cannot print the summary");
        if (o.scenario)
            scenario_run_print(stdout, &sr, &res);
        if (res.otlp_enabled) {
            char line[192];
            otlp_stats_format(&res.otlp, line, sizeof(line));
            printf("\n%s\n", line);
        }
        printf("\nresults: %s/\n", dir);
    }
    failed += class_failed;
    if (exit_code == TS_EXIT_OK && failed)
        exit_code = TS_EXIT_SLO;
    if (res.interrupted)
        exit_code = TS_EXIT_INTERRUPTED;
    json_decref(doc);
    json_decref(tl);
    json_decref(server_tl);
    json_decref(server_info);
    json_decref(conf);
    json_decref(quality);
    runner_result_release(&res);
out_files:
    if (hlog)
        fclose(hlog);
    if (requests_out) {
        uint64_t dropped = asyncw_dropped(requests_out);
        if (asyncw_close(requests_out))
            ts_warn("requests.jsonl: write error");
        if (dropped)
            ts_warn("requests.jsonl: %llu bytes dropped (the disk did not keep up)",
                    (unsigned long long)dropped);
    }
out_workload:
    workload_release(&wl);
out:
    scenario_run_release(&sr);
    scenario_release(&scn);
    if (sim)
        sim_thread_stop(sim, 0);
    run_quality_release(&o.quality);
    json_decref(overrides);
    dist_release(&think);
    otlp_config_release(&otlp);
    http_client_global_cleanup();
    dist_group_leave(group, exit_code); /* MPI: after a failure, aborts the job */
    return exit_code;
}
