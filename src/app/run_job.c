/*
 * run_job.c - what `tokenstorm run` does once its options are parsed: start
 * the built-in simulator when there is no target, resolve the target and the
 * model, build the workload and the runner's configuration, run, and write
 * the summary and the result files.
 */
#include "app/run_job.h"
#include "app/live_ui.h"

#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/ioctl.h>

#include "analysis/slo.h"
#include "analysis/summary.h"
#include "base/file.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "base/hostinfo.h"
#include "base/log.h"
#include "base/units.h"
#include "app/ranks.h"
#include "app/run_pg.h"
#include "app/run_scenario.h"
#include "llm/recording.h"
#include "load/runner.h"
#include "llm/wsframes.h"
#include "load/target.h"
#include "workload/replay.h"
#include "net/addr.h"
#include "report/outdir.h"
#include "report/console.h"
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
            ts_errf(err, errlen, "goodput: expected 'ttft:MS tpot:MS e2el:MS', got '%s'", tok);
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
            ts_errf(err, errlen, "goodput: unknown metric '%s' (ttft, tpot, e2el)", tok);
            return -EINVAL;
        }
    }
    return 0;
}

struct progress {
    bool tty;
    bool quiet;
    bool no_ttft;          /* the run streams nothing: no TTFT to show */
    uint64_t requests_max; /* --requests N: the line counts sent/N and an ETA */
    uint64_t last_line_ns;
    struct ranks_group *group; /* MPI: rank 0 shows the sum of the ranks */
    struct live_ui *ui;        /* --ui: the live dashboard (this process's requests), or NULL */
};

/* The terminal's columns (0 when unknown: the line is not cut). */
static unsigned term_width(void)
{
    struct winsize ws;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) != 0)
        return 0;
    return ws.ws_col;
}

static void on_tick(const struct runner_progress *p, void *arg)
{
    struct progress *pg = arg;
    struct runner_progress all;
    struct runner_point all_last;
    if (pg->ui)
        live_ui_tick(pg->ui, p);
    if (pg->group) {
        if (!ranks_group_progress(pg->group, p, &all, &all_last))
            return; /* a rank > 0: its progress went to rank 0 */
        p = &all;
    }
    if (pg->quiet)
        return;
    struct console_progress cp = {
        .elapsed_s = p->elapsed_s,
        .total_s = p->total_s,
        .requests_max = pg->requests_max,
        .sent = p->sent,
        .completed = p->completed,
        .errors = p->errors,
        .in_flight = p->in_flight,
        .rate = p->rate,
        .tokens_per_s = p->tokens_per_s,
        .draining = p->draining,
        .show_ttft = !pg->no_ttft,
        .ttft_p50_ms = p->last->ttft_p50_ms,
        .ttft_p99_ms = p->last->ttft_p99_ms,
    };
    char line[512];
    if (pg->tty) {
        console_progress_line(&cp, term_width(), line, sizeof line);
        fprintf(stderr, "\r\033[K%s", line);
    } else {
        uint64_t now = ts_now_ns();
        if (now - pg->last_line_ns < 5 * TS_NS_PER_S)
            return;
        pg->last_line_ns = now;
        console_progress_line(&cp, 0, line, sizeof line);
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
}

/* --ui: the dashboard's requests and its end, on the coordinator's thread. */
static void on_ui_request(struct http_request *req, void *arg)
{
    struct progress *pg = arg;
    live_ui_request(req, pg->ui);
}

static void on_ui_end(void *arg)
{
    struct progress *pg = arg;
    live_ui_end(pg->ui);
}

/* --metrics-listen: the URL, once bound (port 0 picks one). */
static void on_metrics_listen(const char *host, int port, void *arg)
{
    struct progress *pg = arg;
    bool v6 = strchr(host, ':') != NULL;
    if (pg->ui)
        fprintf(stderr, "tokenstorm run: dashboard on http://%s%s%s:%d/ (metrics at /metrics)\n",
                v6 ? "[" : "", host, v6 ? "]" : "", port);
    else
        fprintf(stderr, "tokenstorm run: metrics on http://%s%s%s:%d/metrics\n", v6 ? "[" : "",
                host, v6 ? "]" : "", port);
}

/* Right before time 0: the MPI barrier, then --start-at. */
struct start_gate {
    struct ranks_group *group;
    uint64_t start_at_ns;
};

static void before_start(void *arg)
{
    struct start_gate *g = arg;
    ranks_group_barrier(g->group);
    uint64_t late = start_at_wait(g->start_at_ns);
    if (late > 100 * TS_NS_PER_MS)
        ts_warn("--start-at: started %.3f s late (the process came up after the instant)",
                (double)late / 1e9);
}

/* ---- result files ---- */

static json_t *config_json(const struct run_opts *o, const char *url, const char *model,
                           const char *sim_profile)
{
    json_t *j = json_pack("{s:s, s:s, s:s?, s:s?}", "target", url, "model", model,
                          "simulator_profile", sim_profile, "endpoint",
                          o->scenario    ? NULL
                          : o->ws_frames ? "ws-frames"
                          : o->endpoint  ? o->endpoint
                                         : "chat");
    if (!j)
        return NULL;
    if (o->scenario) {
        /* the classes set the load and the requests (the "classes" array) */
        json_object_set_new(j, "mode", json_string("scenario"));
    } else if (o->concurrency && !o->rate && !o->stages) {
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
    if (o->cancel)
        json_object_set_new(j, "cancel", json_string(o->cancel));
    if (!o->scenario) {
        json_object_set_new(j, "input_len",
                            json_string(o->input_len ? o->input_len : "lognormal:512,0.5"));
        json_object_set_new(j, "output_len",
                            json_string(o->output_len ? o->output_len : "uniform:64-256"));
        json_object_set_new(j, "stream", json_boolean(!o->no_stream));
        json_object_set_new(j, "ignore_eos", json_boolean(!o->no_ignore_eos));
    }
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
    if (file_mkdirs(o->dry_run, err, sizeof(err)))
        goto out;
    if (scenario_run_tokenizer(&sr, o->tokenizer ? o->tokenizer : scn->target.tokenizer, err,
                               sizeof(err)) ||
        scenario_run_init(&sr, scn, base, model, o->requests, err, sizeof(err))) {
        code = TS_EXIT_USAGE;
        goto out;
    }
    snprintf(path, sizeof(path), "%s/requests.jsonl", o->dry_run);
    if (!(out = fopen(path, "w"))) {
        ts_errf(err, sizeof(err), "cannot write %.900s: %s", path, strerror(errno));
        goto out;
    }
    if (scenario_run_dry(&sr, o->dry_run_n ? o->dry_run_n : 100, out, &summary, err, sizeof(err)))
        goto out;
    if (fclose(out)) {
        out = NULL;
        ts_errf(err, sizeof(err), "%.900s: write error", path);
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

/* ---- the job ---- */

/*
 * Everything one run holds. It is zeroed (and the inits that cannot fail are
 * done) before the first step, so that the cleanup at the end of run_job()
 * can release every field whatever step failed.
 */
struct job {
    struct run_opts o; /* the caller's options, copied: the steps fill in and change it */
    char err[1024];
    bool done; /* --check or --dry-run ended the job before any load */
    /* the options, parsed */
    struct slo slos[RUN_MAX_SLOS];
    struct goodput_cfg goodput;
    enum workload_endpoint ep;
    struct dist think;
    struct run_cancel cancel; /* --cancel */
    /* --replay: the recording, its endpoint path and its send times */
    struct recording *rec;
    char replay_path[64];
    uint64_t *replay_times;
    size_t nreplay_times;
    json_t *overrides; /* --body */
    struct otlp_config otlp;
    /* the scenario file; sr is built by --check or, for the run, by configure_classes */
    struct scenario scn;
    struct scenario_run sr;
    /* MPI: the group of ranks (NULL when alone) and this process's rank */
    struct ranks_group *group;
    uint32_t rank;
    /* the target: given, or the built-in simulator */
    struct sim_thread *sim;
    const char *sim_profile;
    char target_buf[128];
    const char *target;
    char model[256];
    char url[TARGET_URL_MAX], models_url[TARGET_URL_MAX];
    char embed_url[TARGET_URL_MAX];   /* scenario vector classes' text queries */
    struct vector_embed_target embed; /* with embed_url */
    bool realtime;                    /* --endpoint realtime: the chat requests over WebSocket */
    char rt_url[TARGET_URL_MAX];      /* its ws:// URL */
    struct wsframes_spec wsf;         /* --ws-frames */
    bool has_wsf;
    char auth[1024];
    const char *headers[RUN_MAX_HEADERS + 2]; /* the API key, Content-Type and o.headers */
    size_t nheaders;
    struct trace_context trace_parent;
    bool has_trace_parent;
    struct workload_cfg wcfg;
    struct workload wl;
    struct run_vector vec; /* --endpoint vector-search: queries and ground truth */
    /* the result directory (claimed: locked, checked, cleared with --force) and the files
     * the runner writes as it goes */
    struct outdir od;
    char dir[1024];
    char rank_dir[1024]; /* MPI: each rank's requests.jsonl and latency.hlog */
    struct asyncw *requests_out;
    FILE *hlog;
    /* the runner's configuration and what it points to */
    struct runner_config rcfg;
    struct progress pg;
    struct live_ui ui; /* --ui: the dashboard (pg.ui points here when on) */
    struct start_gate gate;
    char metrics_url[TARGET_URL_MAX];
    /* the process's command line (after MPI took its arguments), for result.json */
    int argc;
    char **argv;
};

/* Copies the caller's options; the caller's compiled quality regex, if any,
 * stays the caller's (the job compiles its own in configure_extras). */
static void job_init(struct job *j, const struct run_opts *opts)
{
    memset(j, 0, sizeof(*j));
    j->o = *opts;
    j->o.quality.compiled = NULL;
    j->ep = WORKLOAD_CHAT;
    outdir_init(&j->od);
    otlp_config_init(&j->otlp);
}

/* --ws-frames SPEC.json: the spec read and checked (file, line and column). */
static int load_ws_frames(struct job *j)
{
    char *text = NULL;
    size_t len = 0;
    int rc = file_read_all(j->o.ws_frames, WSFRAMES_MAX_SPEC, &text, &len, j->err, sizeof(j->err));
    if (!rc)
        rc = wsframes_spec_parse(&j->wsf, text, len, j->o.ws_frames, j->err, sizeof(j->err));
    ts_free(text);
    if (rc) {
        fprintf(stderr, "tokenstorm run: --ws-frames: %s\n", j->err);
        return rc;
    }
    j->has_wsf = true;
    return 0;
}

/* --slo, --goodput, --endpoint: checked before anything is set up. */
static int parse_checks(struct job *j)
{
    const struct run_opts *o = &j->o;
    for (size_t i = 0; i < o->nslos; i++) {
        if (slo_parse(o->slos[i], &j->slos[i], j->err, sizeof(j->err))) {
            fprintf(stderr, "tokenstorm run: --slo: %s\n", j->err);
            return TS_EXIT_USAGE;
        }
    }
    if (o->goodput && run_parse_goodput(o->goodput, &j->goodput, j->err, sizeof(j->err))) {
        fprintf(stderr, "tokenstorm run: --%s\n", j->err);
        return TS_EXIT_USAGE;
    }
    j->realtime = (o->endpoint && !strcasecmp(o->endpoint, "realtime")) || o->ws_frames;
    if (o->ws_frames && o->endpoint && strcasecmp(o->endpoint, "realtime") &&
        strcasecmp(o->endpoint, "chat")) {
        fprintf(stderr, "tokenstorm run: --ws-frames sends chat requests: drop --endpoint %s\n",
                o->endpoint);
        return TS_EXIT_USAGE;
    }
    if (o->ws_frames && load_ws_frames(j))
        return TS_EXIT_USAGE;
    if (o->endpoint && !j->realtime && workload_endpoint_parse(o->endpoint, &j->ep)) {
        fprintf(stderr, "tokenstorm run: --endpoint: expected chat, completions, embeddings, "
                        "vector-search or realtime\n");
        return TS_EXIT_USAGE;
    }
    if (o->transport && strcmp(o->transport, "auto") && strcmp(o->transport, "websocket")) {
        fprintf(stderr, "tokenstorm run: --transport: expected websocket or auto\n");
        return TS_EXIT_USAGE;
    }
    if (o->transport && !j->realtime) {
        fprintf(stderr, "tokenstorm run: --transport needs --endpoint realtime\n");
        return TS_EXIT_USAGE;
    }
    if (j->realtime && o->no_stream) {
        fprintf(stderr, "tokenstorm run: --endpoint realtime always streams: drop --no-stream\n");
        return TS_EXIT_USAGE;
    }
    const struct run_vector_opts *v = &o->vector;
    if (j->ep != WORKLOAD_VECTOR_SEARCH &&
        (v->data || v->index || v->queries || v->truth || v->k || v->has_nprobe ||
         v->has_ef_search || v->api || v->collection || v->pg_table || v->pg_column || v->pg_id)) {
        fprintf(stderr, "tokenstorm run: the --vector-*, --nprobe and --ef-search options need "
                        "--endpoint vector-search\n");
        return TS_EXIT_USAGE;
    }
    if (((o->speed > 0 && o->speed != 1.0) || o->loop) && !o->replay) {
        fprintf(stderr, "tokenstorm run: --speed and --loop need --replay DIR\n");
        return TS_EXIT_USAGE;
    }
    if (o->replay && (o->scenario || o->prompts || o->rate > 0 || o->stages || o->endpoint)) {
        fprintf(stderr, "tokenstorm run: --replay sends the recorded requests at their times: "
                        "not with a scenario, --prompts, --rate, --stages or --endpoint\n");
        return TS_EXIT_USAGE;
    }
    return 0;
}

/* --replay DIR: the recording and the endpoint it was sent to. */
static int load_replay(struct job *j)
{
    const struct run_opts *o = &j->o;
    char msg[512];
    if (!o->replay)
        return 0;
    if (recording_load(o->replay, &j->rec, msg, sizeof msg)) {
        fprintf(stderr, "tokenstorm run: --replay: %s\n", msg);
        return TS_EXIT_USAGE;
    }
    if (j->rec->skipped)
        ts_warn("--replay: %llu lines skipped; the first: %s", (unsigned long long)j->rec->skipped,
                msg);
    if (j->rec->websocket)
        ts_warn("--replay: %llu WebSocket sessions in the recording are not replayed",
                (unsigned long long)j->rec->websocket);
    if (replay_endpoint(j->rec, j->replay_path, sizeof j->replay_path, &j->ep, j->err,
                        sizeof(j->err))) {
        fprintf(stderr, "tokenstorm run: %s\n", j->err);
        return TS_EXIT_USAGE;
    }
    return 0;
}

/* Why the run sends no streamed request ("" when it may send some). */
static const char *no_stream_why(const struct job *j)
{
    if (j->o.scenario) {
        for (size_t k = 0; k < j->scn.nclasses; k++) {
            if (scenario_class_streams(&j->scn.classes[k]))
                return "";
        }
        return "no class of the scenario streams";
    }
    if (j->ep == WORKLOAD_EMBEDDINGS)
        return "--endpoint embeddings";
    if (j->ep == WORKLOAD_VECTOR_SEARCH)
        return "--endpoint vector-search";
    return j->o.no_stream ? "--no-stream" : "";
}

/* What the run was given that SLOs can need (enum slo_needs); references
 * only once the workload is built (known), or always with a scenario file,
 * whose classes' prompt files may hold them. */
static unsigned slo_have(const struct job *j, bool known_refs)
{
    const struct run_opts *o = &j->o;
    unsigned have = 0;
    if (goodput_cfg_enabled(&j->goodput))
        have |= SLO_NEEDS_GOODPUT;
    if (o->quality.regex)
        have |= SLO_NEEDS_REGEX;
    if (o->quality.json)
        have |= SLO_NEEDS_JSON;
    if (o->quality.dual_sla)
        have |= SLO_NEEDS_DUAL_SLA;
    if (o->quality.consistency)
        have |= SLO_NEEDS_CONSISTENCY;
    if (!no_stream_why(j)[0])
        have |= SLO_NEEDS_STREAM;
    if (!known_refs || o->scenario || o->replay)
        have |= SLO_NEEDS_REFERENCE;
    for (size_t i = 0; known_refs && j->wl.has_prompts && i < j->wl.prompts.n; i++) {
        if (j->wl.prompts.v[i].has_ref) {
            have |= SLO_NEEDS_REFERENCE;
            break;
        }
    }
    return have;
}

/* An --slo, or a scenario class's slos:, that the run could not give a
 * value (goodput without --goodput, a quality metric without what it
 * measures) is a usage error before any load, not "n/a FAIL" at the end. */
static int check_slo_needs(const struct job *j, bool known_refs)
{
    const char *why = no_stream_why(j);
    char err[SLO_EXPR_MAX + 256];
    if (why[0] && goodput_cfg_needs_stream(&j->goodput)) {
        fprintf(stderr,
                "tokenstorm run: --goodput '%s': ttft and tpot need streamed requests, and this "
                "run streams none (%s); judge e2el instead\n",
                j->o.goodput, why);
        return TS_EXIT_USAGE;
    }
    if (j->o.scenario && scenario_check_streams(&j->scn, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm run: %s: %s\n", j->o.scenario, err);
        return TS_EXIT_USAGE;
    }
    unsigned have = slo_have(j, known_refs);
    if (!known_refs && j->o.scenario && scenario_check_slo_needs(&j->scn, have, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm run: %s: %s\n", j->o.scenario, err);
        return TS_EXIT_USAGE;
    }
    for (size_t i = 0; i < j->o.nslos; i++) {
        char name[SLO_EXPR_MAX];
        unsigned lack = slo_needs(&j->slos[i]) & ~have;
        if (lack & SLO_NEEDS_STREAM) {
            fprintf(stderr,
                    "tokenstorm run: --slo '%s': %s needs streamed requests, and this run "
                    "streams none (%s): a non-streamed answer arrives whole, so only e2el, "
                    "tokens and throughput are measured\n",
                    j->slos[i].expr, slo_metric_written(&j->slos[i], name, sizeof(name)), why);
            return TS_EXIT_USAGE;
        }
        const char *what = run_slo_lack(lack);
        if (what) {
            fprintf(stderr, "tokenstorm run: --slo '%s': %s needs %s\n", j->slos[i].expr,
                    slo_metric_written(&j->slos[i], name, sizeof(name)), what);
            return TS_EXIT_USAGE;
        }
    }
    return 0;
}

/* --think, --body and the OpenTelemetry settings (--otlp-endpoint and the
 * OTEL_* variables): the options that hold memory until the job ends. */
static int parse_resources(struct job *j)
{
    const struct run_opts *o = &j->o;
    if (o->think && dist_parse(&j->think, o->think, j->err, sizeof(j->err))) {
        fprintf(stderr, "tokenstorm run: --think: %s\n", j->err);
        return TS_EXIT_USAGE;
    }
    if (o->cancel && run_cancel_parse(&j->cancel, o->cancel, j->err, sizeof(j->err))) {
        fprintf(stderr, "tokenstorm run: %s\n", j->err);
        return TS_EXIT_USAGE;
    }
    if (o->body) {
        json_error_t jerr;
        j->overrides = json_loads(o->body, 0, &jerr);
        if (!json_is_object(j->overrides)) {
            fprintf(stderr, "tokenstorm run: --body: expected a JSON object%s%s\n",
                    j->overrides ? "" : ": ", j->overrides ? "" : jerr.text);
            return TS_EXIT_USAGE;
        }
    }
    int rc = otlp_config_from_env(&j->otlp, o->otlp_endpoint, j->err, sizeof(j->err));
    if (rc) {
        fprintf(stderr, "tokenstorm run: %s\n", rc == -ENOMEM ? "out of memory" : j->err);
        return rc == -ENOMEM ? TS_EXIT_FAIL : TS_EXIT_USAGE;
    }
    return 0;
}

/* The scenario's tokenizer (--tokenizer first) and its classes, into j->sr. */
static int build_classes(struct job *j, const char *base, const char *model)
{
    const char *tokenizer = j->o.tokenizer ? j->o.tokenizer : j->scn.target.tokenizer;
    int rc = scenario_run_tokenizer(&j->sr, tokenizer, j->err, sizeof(j->err));
    if (rc)
        return rc;
    return scenario_run_init(&j->sr, &j->scn, base, model, j->o.requests, j->err, sizeof(j->err));
}

/* --check: describes the file, then builds the classes too (templates,
 * prompt and dataset files, tokenizer) so that every error shows; the
 * description is taken first because building moves the prompt schemas out. */
static int check_scenario(struct job *j)
{
    const struct run_opts *o = &j->o;
    char *desc = NULL;
    size_t desc_len = 0;
    FILE *mem = open_memstream(&desc, &desc_len);
    if (mem) {
        scenario_print_check(mem, &j->scn);
        fclose(mem);
    }
    int code = TS_EXIT_OK;
    if (build_classes(j, o->target ? o->target : "http://127.0.0.1:8000/v1",
                      o->model ? o->model : "default")) {
        fprintf(stderr, "tokenstorm run: %s: %s\n", o->scenario, j->err);
        code = TS_EXIT_USAGE;
    } else if (check_slo_needs(j, false)) {
        code = TS_EXIT_USAGE;
    } else if (desc) {
        fputs(desc, stdout);
    }
    free(desc);
    return code;
}

/* A scenario file: loaded, and its settings fill in the options the command
 * line left out; --check and --dry-run end the job here (j->done). */
static int load_scenario(struct job *j)
{
    if (!j->o.scenario)
        return 0;
    if (scenario_refuse_opts(&j->o, j->err, sizeof(j->err))) {
        fprintf(stderr, "tokenstorm run: %s\n", j->err);
        return TS_EXIT_USAGE;
    }
    int rc = scenario_load(&j->scn, j->o.scenario, j->err, sizeof(j->err));
    if (rc) {
        fprintf(stderr, "tokenstorm run: %s\n", j->err);
        return rc == -ENOMEM ? TS_EXIT_FAIL : TS_EXIT_USAGE;
    }
    scenario_apply_opts(&j->scn, &j->o);
    if (j->o.check) {
        j->done = true;
        return check_scenario(j);
    }
    if (j->o.dry_run) {
        j->done = true;
        return run_dry(&j->o, &j->scn);
    }
    return 0;
}

/* MPI (mpirun/srun): each rank runs shard rank/N, not with an explicit
 * --shard; rank 0 speaks for the job. */
static int join_group(struct job *j, int *argc, char ***argv)
{
    if (!j->o.shard.count && ranks_group_join(&j->group, argc, argv, j->err, sizeof(j->err))) {
        fprintf(stderr, "tokenstorm run: %s\n", j->err);
        return TS_EXIT_USAGE;
    }
    j->rank = ranks_group_rank(j->group);
    if (j->rank)
        j->o.quiet = true;
    if (j->group && !j->o.target && !j->rank)
        ts_warn("no --target: every rank starts its own simulator");
    return 0;
}

/* No --target: the built-in simulator on a loopback port, and its model. */
static int start_simulator(struct job *j)
{
    const struct run_opts *o = &j->o;
    struct sim_server_config scfg = {0};
    j->target = o->target;
    if (j->target)
        return 0;
    j->sim_profile = o->sim_profile ? o->sim_profile : "llama3-8b-a100";
    if (sim_profile_preset(j->sim_profile, &scfg.profile)) {
        fprintf(stderr, "tokenstorm run: unknown --sim-profile '%s'\n", j->sim_profile);
        return TS_EXIT_USAGE;
    }
    for (size_t i = 0; i < o->nsim_sets; i++) {
        if (sim_profile_set_kv(&scfg.profile, o->sim_sets[i], j->err, sizeof(j->err))) {
            fprintf(stderr, "tokenstorm run: --sim-set %s: %s\n", o->sim_sets[i], j->err);
            return TS_EXIT_USAGE;
        }
    }
    if (sim_profile_validate(&scfg.profile, j->err, sizeof(j->err))) {
        fprintf(stderr, "tokenstorm run: simulator profile: %s\n", j->err);
        return TS_EXIT_USAGE;
    }
    scfg.host = "127.0.0.1";
    scfg.quiet = true;
    scfg.any_model = true;
    if (j->ep == WORKLOAD_VECTOR_SEARCH && !o->scenario) {
        /* the simulator holds the corpus the ground truth is computed over */
        scfg.vector_data = o->vector.data ? o->vector.data : RUN_VECTOR_DEFAULT_DATA;
        scfg.vector_index = o->vector.index;
        scfg.vector_seed = o->vector.seed;
    }
    for (size_t k = 0; o->scenario && k < j->scn.nclasses; k++) {
        const struct scenario_vector *v = &j->scn.classes[k].vector;
        if (j->scn.classes[k].endpoint != WORKLOAD_VECTOR_SEARCH)
            continue;
        /* one corpus: the scenario parser made every vector class agree on it */
        scfg.vector_data = v->data ? v->data : RUN_VECTOR_DEFAULT_DATA;
        scfg.vector_index = v->index;
        scfg.vector_seed = v->seed;
        break;
    }
    if (sim_thread_start(&scfg, &j->sim, j->err, sizeof(j->err))) {
        fprintf(stderr, "tokenstorm run: cannot start the simulator: %s\n", j->err);
        /* a corpus or index the options describe wrongly is theirs to fix */
        return strncmp(j->err, "--vector-", 9) ? TS_EXIT_FAIL : TS_EXIT_USAGE;
    }
    snprintf(j->target_buf, sizeof(j->target_buf), "http://127.0.0.1:%d/v1",
             sim_thread_port(j->sim));
    j->target = j->target_buf;
    snprintf(j->model, sizeof(j->model), "%s", scfg.profile.model);
    return 0; /* the header names it (print_header) */
}

/* The request headers: the API key (which never leaves this process except
 * to the target) and --header, where a traceparent becomes every request's
 * parent instead of a header. */
static int build_headers(struct job *j)
{
    const struct run_opts *o = &j->o;
    const char *key = o->api_key ? o->api_key : getenv("OPENAI_API_KEY");
    if (key && *key) {
        snprintf(j->auth, sizeof(j->auth), "Authorization: Bearer %s", key);
        j->headers[j->nheaders++] = j->auth;
    }
    j->headers[j->nheaders++] = "Content-Type: application/json";
    for (size_t i = 0; i < o->nheaders; i++) {
        int tp = reqtrace_header_parent(o->headers[i], &j->trace_parent);
        if (tp < 0) {
            fprintf(stderr, "tokenstorm run: --header traceparent: not a valid W3C value\n");
            return TS_EXIT_USAGE;
        }
        j->has_trace_parent |= tp == 1;
        if (!tp)
            j->headers[j->nheaders++] = o->headers[i];
    }
    return 0;
}

/* The endpoint's URL, the headers and the model (--model, the simulator's,
 * or the first the target lists). */
static int resolve_target(struct job *j)
{
    const struct run_opts *o = &j->o;
    if (target_resolve(j->target, j->ep, j->url, j->models_url, j->err, sizeof(j->err))) {
        fprintf(stderr, "tokenstorm run: %s\n", j->err);
        return TS_EXIT_USAGE;
    }
    if (o->vector.api && j->ep == WORKLOAD_VECTOR_SEARCH) {
        /* template mode: the template's path on the target's host */
        int rc = run_vector_api_load(&o->vector, &j->vec, j->err, sizeof(j->err));
        if (!rc && run_vector_api_url(&j->vec, j->target, j->url, sizeof(j->url))) {
            snprintf(j->err, sizeof(j->err), "--vector-api: the URL is too long");
            rc = -EINVAL;
        }
        if (rc) {
            fprintf(stderr, "tokenstorm run: %s\n", j->err);
            return TS_EXIT_USAGE;
        }
    }
    int code = build_headers(j);
    if (code)
        return code;
    if (o->model) {
        snprintf(j->model, sizeof(j->model), "%s", o->model);
    } else if (!j->model[0] &&
               (j->ep != WORKLOAD_VECTOR_SEARCH || vector_embed_is_spec(o->vector.queries)) &&
               target_discover_model(j->models_url, j->headers, j->nheaders, o->insecure, j->model,
                                     sizeof(j->model), j->err, sizeof(j->err))) {
        fprintf(stderr, "tokenstorm run: %s\n", j->err);
        return TS_EXIT_FAIL;
    }
    if (j->has_wsf) {
        snprintf(j->rt_url, sizeof(j->rt_url), "%s", j->wsf.url);
    } else if (j->realtime &&
               target_realtime_url(j->url, j->model, j->rt_url, j->err, sizeof(j->err))) {
        fprintf(stderr, "tokenstorm run: --endpoint realtime: %s\n", j->err);
        return TS_EXIT_USAGE;
    }
    return 0;
}

/* The embeddings URL next to a models URL (".../v1/models" -> ".../v1/embeddings"). */
static bool embeddings_url(const char *models_url, char *out, size_t n)
{
    size_t l = strlen(models_url);
    if (l < 7 || strcmp(models_url + l - 7, "/models"))
        return false;
    int w = snprintf(out, n, "%.*s/embeddings", (int)(l - 7), models_url);
    return w > 0 && (size_t)w < n;
}

/* The requests of a run without a scenario: synthetic, or from --prompts. */
static int build_workload(struct job *j)
{
    const struct run_opts *o = &j->o;
    struct workload_cfg *w = &j->wcfg;
    workload_cfg_init(w);
    w->endpoint = j->ep;
    w->model = j->model;
    w->input_tokens = o->input_len ? o->input_len : "lognormal:512,0.5";
    w->output_tokens = o->output_len ? o->output_len : "uniform:64-256";
    w->ignore_eos = !o->no_ignore_eos;
    w->stream = !o->no_stream && j->ep != WORKLOAD_EMBEDDINGS;
    w->system_prompt = o->system_prompt;
    w->prompts_path = o->prompts;
    w->body_overrides = j->overrides;
    w->seed = o->seed;
    if (j->ep == WORKLOAD_VECTOR_SEARCH && !o->scenario) {
        struct run_vector_api api = j->vec.api; /* run_vector_prepare starts afresh */
        memset(&j->vec.api, 0, sizeof(j->vec.api));
        struct run_vector_opts vo = o->vector;
        char eurl[TARGET_URL_MAX];
        struct vector_embed_target et = {eurl, j->model, j->headers, j->nheaders, o->insecure};
        if (!o->vector.api && embeddings_url(j->models_url, eurl, sizeof(eurl)))
            vo.embed = &et; /* text queries: the target embeds them */
        int rc = run_vector_prepare(&vo, &j->vec, j->err, sizeof(j->err));
        j->vec.api = api;
        if (rc) {
            fprintf(stderr, "tokenstorm run: %s\n", j->err);
            return TS_EXIT_USAGE;
        }
        if (run_vector_overrides(&o->vector, &j->overrides)) {
            fprintf(stderr, "tokenstorm run: out of memory\n");
            return TS_EXIT_FAIL;
        }
        char path[1200];
        snprintf(path, sizeof(path), "%s/vector_truth.ivecs", j->rank_dir);
        if (strcmp(j->vec.truth_method, "file") &&
            run_vector_write_truth(&j->vec, path, j->err, sizeof(j->err)))
            ts_warn("%s", j->err);
        w->body_overrides = j->vec.api.prefix ? NULL : j->overrides;
        w->vectors = &j->vec.queries;
        w->vector_k = o->vector.k;
        w->vector_prefix = j->vec.api.prefix;
        w->vector_suffix = j->vec.api.suffix;
        if (!o->quiet && !o->json)
            fprintf(stderr, "tokenstorm run: %zu query vectors, ground truth (%s) in %.2f s\n",
                    j->vec.queries.n, j->vec.truth_method, j->vec.truth_s);
    }
    if (o->replay) {
        if (workload_init_replay(&j->wl, j->rec, j->replay_path, &j->replay_times,
                                 &j->nreplay_times, j->err, sizeof(j->err))) {
            fprintf(stderr, "tokenstorm run: %s\n", j->err);
            return TS_EXIT_FAIL;
        }
        return 0;
    }
    if (!o->scenario && workload_init(&j->wl, w, j->err, sizeof(j->err))) {
        fprintf(stderr, "tokenstorm run: %s\n", j->err);
        return TS_EXIT_USAGE;
    }
    return 0;
}

/* The result directory, before anything is sent: --out, or one named after
 * the time (MPI: rank 0's name, claimed by rank 0, and a folder per rank).
 * Refused (TS_EXIT_USAGE) when it is not a writable directory, holds results
 * (without --force) or another process writes it (report/outdir.h). */
static int claim_dir(struct job *j)
{
    const struct run_opts *o = &j->o;
    if (o->out_dir)
        snprintf(j->dir, sizeof(j->dir), "%s", o->out_dir);
    else
        outdir_default_name(j->dir, sizeof(j->dir), "run");
    ranks_group_bcast(j->group, j->dir, sizeof(j->dir)); /* MPI: rank 0's (the time differs) */
    snprintf(j->rank_dir, sizeof(j->rank_dir), "%s", j->dir);
    if (j->group)
        snprintf(j->rank_dir, sizeof(j->rank_dir), "%.990s/rank-%u", j->dir, j->rank);
    if (j->rank == 0 &&
        outdir_claim(&j->od, j->dir, o->force ? OUTDIR_FORCE : 0, j->err, sizeof(j->err))) {
        fprintf(stderr, "tokenstorm run: --out: %s\n", j->err);
        return TS_EXIT_USAGE;
    }
    if (j->od.removed)
        fprintf(stderr, "tokenstorm run: --force: removed from %s: %s\n", j->dir, j->od.note);
    ranks_group_barrier(j->group); /* MPI: the other ranks write into it once it is cleared */
    if (file_mkdirs(j->rank_dir, j->err, sizeof(j->err))) {
        fprintf(stderr, "tokenstorm run: --out: %s\n", j->err);
        return TS_EXIT_USAGE;
    }
    return 0;
}

/* requests.jsonl and latency.hlog in the directory claim_dir made. */
static int open_files(struct job *j)
{
    const struct run_opts *o = &j->o;
    char path[1200];
    if (o->save_requests) {
        snprintf(path, sizeof(path), "%s/requests.jsonl", j->rank_dir);
        if (asyncw_open(path, 0, &j->requests_out, j->err, sizeof(j->err))) {
            fprintf(stderr, "tokenstorm run: %s\n", j->err);
            return TS_EXIT_FAIL;
        }
    }
    snprintf(path, sizeof(path), "%s/latency.hlog", j->rank_dir);
    j->hlog = fopen(path, "w");
    if (!j->hlog)
        ts_warn("cannot write %s: %s", path, strerror(errno));
    return 0;
}

/* Closes what open_files opened, saying what did not reach the disk. */
static void close_files(struct job *j)
{
    if (j->hlog)
        fclose(j->hlog);
    if (j->requests_out) {
        uint64_t dropped = asyncw_dropped(j->requests_out);
        if (asyncw_close(j->requests_out))
            ts_warn("requests.jsonl: write error");
        if (dropped)
            ts_warn("requests.jsonl: %llu bytes dropped (the disk did not keep up)",
                    (unsigned long long)dropped);
    }
}

/* The load itself: target, workload, open or closed loop, workers, HTTP
 * client settings. */
static int configure_load(struct job *j)
{
    const struct run_opts *o = &j->o;
    struct runner_config *r = &j->rcfg;
    bool open = o->rate > 0 || o->stages || o->replay;
    *r = (struct runner_config){
        .url = j->url,
        .realtime_url = j->realtime ? j->rt_url : NULL,
        .realtime_fallback = j->realtime && o->transport && !strcmp(o->transport, "auto"),
        .wsframes = j->has_wsf ? &j->wsf : NULL,
        .headers = j->headers,
        .n_headers = j->nheaders,
        .workload = &j->wl,
        .vector_truth = j->vec.truth.v ? &j->vec.truth : NULL,
        .vector_results = j->vec.api.results,
        .vector_id = j->vec.api.id,
        .mode = open ? RUNNER_OPEN : RUNNER_CLOSED,
        .users = o->concurrency,
        .think = o->think ? &j->think : NULL,
        .ramp_users_ns = o->ramp_users_ns,
        .max_concurrency = open ? o->concurrency : 0,
        .duration_ns = o->duration_ns,
        .max_requests = o->requests,
        .warmup_ns = o->warmup_ns,
        .drain_ns = o->drain_ns,
        .cancel = o->cancel ? &j->cancel : NULL,
        .workers = o->workers,
        .seed = o->seed,
        .goodput = j->goodput,
        .requests_out = j->requests_out,
        .chunk_times = o->save_chunk_times,
        .hlog = j->hlog,
        .handle_signals = true,
        .on_tick = on_tick,
    };
    if (!r->workers) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        r->workers = n < 1 ? 1 : n > RUNNER_MAX_WORKERS ? RUNNER_MAX_WORKERS : (uint32_t)n;
    }
    if (o->arrival &&
        arrival_process_parse(&r->arrival.process, o->arrival, j->err, sizeof(j->err))) {
        fprintf(stderr, "tokenstorm run: --arrival: %s\n", j->err);
        return TS_EXIT_USAGE;
    } else if (!o->arrival) {
        r->arrival.process.kind = ARRIVAL_POISSON;
    }
    r->arrival.rate = o->rate;
    r->arrival.stages = o->stages;
    if (o->replay) {
        r->arrival.times = j->replay_times;
        r->arrival.ntimes = j->nreplay_times;
        r->arrival.speed = o->speed > 0 ? o->speed : 1.0;
        r->arrival.loop = o->loop;
        r->arrival.rate = 1;                /* unused: the times are the schedule */
        if (!o->duration_given && !o->loop) /* the recording's length, then the end */
            r->duration_ns =
                (uint64_t)((double)j->replay_times[j->nreplay_times - 1] / r->arrival.speed) +
                1000000;
    }
    if (o->ramp_to > 0) {
        r->arrival.ramp_to = o->ramp_to;
        r->arrival.ramp_ns = o->duration_ns;
    }
    http_client_config_default(&r->client);
    r->client.connect_timeout_ms = (uint32_t)(o->t_connect / TS_NS_PER_MS);
    r->client.ttfb_timeout_ms = (uint32_t)(o->t_ttfb / TS_NS_PER_MS);
    r->client.idle_timeout_ms = (uint32_t)(o->t_idle / TS_NS_PER_MS);
    r->client.total_timeout_ms = (uint32_t)(o->t_total / TS_NS_PER_MS);
    r->client.insecure = o->insecure;
    r->client.version = o->http2 ? HTTP_CLIENT_HTTP2_TLS : HTTP_CLIENT_HTTP1;
    /* time stream bytes by their kernel arrival, not by when curl reads them */
    r->client.rx_timestamps = !o->http2 && !o->no_kernel_timestamps;
    r->client.engine = o->http_engine_curl ? HTTP_CLIENT_ENGINE_CURL : HTTP_CLIENT_ENGINE_AUTO;
    return 0;
}

static void config_effective(json_t *c, const struct job *j);

/* What goes around the load: progress, --server-metrics, the shard and the
 * start (MPI: one run id, a barrier), answer quality, --integrity, --ui. */
static int configure_extras(struct job *j)
{
    const struct run_opts *o = &j->o;
    struct runner_config *r = &j->rcfg;
    j->pg = (struct progress){.tty = isatty(STDERR_FILENO),
                              .quiet = o->quiet || o->json,
                              .no_ttft = no_stream_why(j)[0] != '\0',
                              .requests_max = o->scenario ? 0 : o->requests,
                              .group = j->group};
    r->tick_arg = &j->pg;
    if (o->ui && !j->rank) {
        json_t *conf = config_json(o, j->url, j->model, j->sim_profile);
        if (conf)
            config_effective(conf, j);
        int rc = conf ? live_ui_init(&j->ui, "tokenstorm run", o->ui_token, conf,
                                     (double)o->warmup_ns / 1e9, &j->goodput)
                      : -ENOMEM;
        json_decref(conf);
        if (rc) {
            live_ui_release(&j->ui);
            fprintf(stderr, "tokenstorm run: --ui: out of memory\n");
            return TS_EXIT_FAIL;
        }
        j->pg.ui = &j->ui;
    }
    if (o->server_metrics && !j->rank) { /* MPI: one server timeline, from rank 0 */
        snprintf(j->metrics_url, sizeof(j->metrics_url), "%s", o->server_metrics);
        if (!strcmp(o->server_metrics, "auto") &&
            scrape_url_from_target(j->url, j->metrics_url, sizeof(j->metrics_url))) {
            fprintf(stderr, "tokenstorm run: --server-metrics auto: no URL from '%s'\n", j->url);
            return TS_EXIT_USAGE;
        }
        r->server_metrics.url = j->metrics_url;
        r->server_metrics.interval_ns = o->server_metrics_interval_ns;
        r->server_metrics.insecure = o->insecure;
    }
    r->shard = j->group ? ranks_group_shard(j->group) : o->shard;
    if (j->group) {
        r->run_id = splitmix64_next(&(uint64_t){ts_wall_ns() ^ (uint64_t)getpid()});
        ranks_group_bcast(j->group, &r->run_id, sizeof(r->run_id)); /* one run id for all */
    }
    j->gate = (struct start_gate){.group = j->group, .start_at_ns = o->start_at_ns};
    r->before_start = before_start; /* start together */
    r->before_start_arg = &j->gate;
    if (run_quality_apply(&j->o.quality, r, j->err, sizeof(j->err))) {
        fprintf(stderr, "tokenstorm run: %s\n", j->err);
        return TS_EXIT_USAGE;
    }
    if (o->integrity) {
        r->integrity_key = o->integrity_key ? o->integrity_key : getenv("TOKENSTORM_INTEGRITY_KEY");
        if (!r->integrity_key) {
            fprintf(stderr, "tokenstorm run: --integrity hmac needs --integrity-key or "
                            "$TOKENSTORM_INTEGRITY_KEY\n");
            return TS_EXIT_USAGE;
        }
    }
    return 0;
}

/* What the run exports while it goes: --metrics-listen and the requests'
 * trace context (OTLP spans, --header traceparent, the temperature). */
static void configure_exports(struct job *j)
{
    static const char *const ep_names[] = {"chat", "completions", "embeddings", "vector-search"};
    const struct run_opts *o = &j->o;
    struct runner_config *r = &j->rcfg;
    if (o->metrics_listen) {
        r->metrics = (struct runner_metrics){
            .host = o->metrics_host,
            .port = o->metrics_port,
            .linger_ns = o->metrics_linger_ns,
            .info = {.model = j->model,
                     .endpoint = j->has_wsf    ? "ws-frames"
                                 : j->realtime ? "realtime"
                                               : ep_names[j->ep],
                     .url = j->url,
                     .stream = j->wcfg.stream,
                     .goodput = goodput_cfg_enabled(&j->goodput)},
            .on_listen = on_metrics_listen,
        };
        if (o->ui && j->pg.ui) {
            r->metrics.on_request = on_ui_request;
            r->metrics.on_end = on_ui_end;
        }
    }
    r->trace = (struct reqtrace_config){
        .otlp = j->otlp.endpoint ? &j->otlp : NULL,
        .model = j->model,
        .scenario = "run",
        .has_parent = j->has_trace_parent,
        .parent = j->trace_parent,
    };
    json_t *temperature = json_object_get(j->overrides, "temperature");
    if (json_is_number(temperature)) {
        r->trace.temperature = json_number_value(temperature);
        r->trace.has_temperature = true;
    }
}

/* A scenario's classes against the target's base URL (for the classes'
 * endpoints and {{target}} in flows); without one, --tokenizer alone gives
 * exact synthetic input lengths and counts output tokens when there is no
 * usage. */
static int configure_classes(struct job *j)
{
    const struct run_opts *o = &j->o;
    struct runner_config *r = &j->rcfg;
    if (o->scenario) {
        char base[TARGET_URL_MAX];
        snprintf(base, sizeof(base), "%s", j->models_url);
        size_t bl = strlen(base);
        if (bl > 7 && !strcmp(base + bl - 7, "/models"))
            base[bl - 7] = '\0';
        if (embeddings_url(j->models_url, j->embed_url, sizeof(j->embed_url))) {
            j->embed = (struct vector_embed_target){j->embed_url, j->model, j->headers, j->nheaders,
                                                    o->insecure};
            j->sr.embed = &j->embed;
        }
        if (build_classes(j, base, j->model)) {
            fprintf(stderr, "tokenstorm run: %s\n", j->err);
            return TS_EXIT_USAGE;
        }
        r->classes = j->sr.classes;
        r->nclasses = j->sr.n;
        r->make_tokcount = scenario_run_make_tokcount;
        r->tokcount_arg = &j->sr;
        r->trace.scenario = j->scn.name ? j->scn.name : "scenario";
    } else if (o->tokenizer) {
        if (scenario_run_tokenizer(&j->sr, o->tokenizer, j->err, sizeof(j->err))) {
            fprintf(stderr, "tokenstorm run: %s\n", j->err);
            return TS_EXIT_USAGE;
        }
        r->make_tokcount = scenario_run_make_tokcount;
        r->tokcount_arg = &j->sr;
    }
    return 0;
}

/* The runner's whole configuration, checked. */
static int configure_runner(struct job *j)
{
    int code;
    if ((code = configure_load(j)) || (code = configure_extras(j)))
        return code;
    configure_exports(j);
    if ((code = configure_classes(j)))
        return code;
    if (runner_config_check(&j->rcfg, j->err, sizeof(j->err))) {
        fprintf(stderr, "tokenstorm run: %s\n", j->err);
        return TS_EXIT_USAGE;
    }
    return 0;
}

/* ---- what result.json records of the options ---- */

/* A duration option in seconds; 0 (unset, unbounded) is null. */
static json_t *seconds_or_null(uint64_t ns)
{
    return ns ? json_real((double)ns / 1e9) : json_null();
}

/* --header: the names only (values can be credentials). */
static json_t *header_names(const struct run_opts *o)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < o->nheaders; i++) {
        const char *colon = strchr(o->headers[i], ':');
        size_t n = colon ? (size_t)(colon - o->headers[i]) : strlen(o->headers[i]);
        while (n && (o->headers[i][n - 1] == ' ' || o->headers[i][n - 1] == '\t'))
            n--;
        json_array_append_new(a, json_stringn(o->headers[i], n));
    }
    return a;
}

/* --slo as given, and --goodput's thresholds (null when off). */
static void config_checks(json_t *c, const struct job *j)
{
    json_t *slos = json_array();
    for (size_t i = 0; slos && i < j->o.nslos; i++)
        json_array_append_new(slos, json_string(j->o.slos[i]));
    json_object_set_new(c, "slo", slos);
    json_t *g = goodput_cfg_enabled(&j->goodput) ? json_object() : json_null();
    if (json_is_object(g)) {
        if (j->goodput.ttft_ms > 0)
            json_object_set_new(g, "ttft_ms", json_real(j->goodput.ttft_ms));
        if (j->goodput.tpot_ms > 0)
            json_object_set_new(g, "tpot_ms", json_real(j->goodput.tpot_ms));
        if (j->goodput.e2el_ms > 0)
            json_object_set_new(g, "e2el_ms", json_real(j->goodput.e2el_ms));
    }
    json_object_set_new(c, "goodput", g);
}

/* The effective options config_json() leaves out (docs/METRICS.md, "run"). */
static void config_effective(json_t *c, const struct job *j)
{
    const struct run_opts *o = &j->o;
    const struct run_quality_opts *q = &o->quality;
    json_object_set_new(c, "requested_duration_s", seconds_or_null(o->duration_ns));
    json_object_set_new(c, "drain_s", json_real((double)o->drain_ns / 1e9));
    if (o->ramp_users_ns)
        json_object_set_new(c, "ramp_users_s", json_real((double)o->ramp_users_ns / 1e9));
    json_object_set_new(c, "timeouts",
                        json_pack("{s:o, s:o, s:o, s:o}", "connect_s",
                                  seconds_or_null(o->t_connect), "ttfb_s",
                                  seconds_or_null(o->t_ttfb), "idle_s", seconds_or_null(o->t_idle),
                                  "total_s", seconds_or_null(o->t_total)));
    json_object_set_new(c, "headers", header_names(o));
    json_object_set_new(c, "api_key_set", json_boolean(j->auth[0] != '\0'));
    json_object_set_new(c, "body", j->overrides ? json_deep_copy(j->overrides) : json_null());
    config_checks(c, j);
    json_object_set_new(c, "http_version", json_string(o->http2 ? "http2" : "http1.1"));
    json_object_set_new(c, "insecure", json_boolean(o->insecure));
    json_object_set_new(c, "scenario", o->scenario ? json_string(o->scenario) : json_null());
    json_object_set_new(c, "tokenizer", o->tokenizer ? json_string(o->tokenizer) : json_null());
    json_object_set_new(c, "system_prompt",
                        o->system_prompt ? json_string(o->system_prompt) : json_null());
    json_object_set_new(c, "integrity", o->integrity ? json_string(o->integrity) : json_null());
    json_t *sets = json_array();
    for (size_t i = 0; sets && i < o->nsim_sets; i++)
        json_array_append_new(sets, json_string(o->sim_sets[i]));
    json_object_set_new(c, "sim_set", sets);
    if (j->ep == WORKLOAD_VECTOR_SEARCH)
        json_object_set_new(c, "vector", run_vector_config_json(&o->vector, &j->vec));
    if (q->regex || q->json || q->target_set || q->dual_sla || q->consistency)
        json_object_set_new(c, "quality",
                            json_pack("{s:s?, s:b, s:b, s:b, s:b}", "regex", q->regex, "json",
                                      q->json, "min_set", q->target_set, "dual_sla", q->dual_sla,
                                      "consistency", q->consistency));
}

/* What must not appear in result.json: the API key, the integrity key and
 * the values of credential-like --header; at most max, into out. */
static size_t report_secrets(const struct job *j, const char **out, size_t max)
{
    const struct run_opts *o = &j->o;
    size_t n = 0;
    const char *key = o->api_key ? o->api_key : getenv("OPENAI_API_KEY");
    if (key && *key && n < max)
        out[n++] = key;
    if (j->rcfg.integrity_key && n < max)
        out[n++] = j->rcfg.integrity_key;
    for (size_t i = 0; i < o->nheaders && n < max; i++) {
        const char *colon = strchr(o->headers[i], ':');
        size_t nl = colon ? (size_t)(colon - o->headers[i]) : 0;
        while (nl && (o->headers[i][nl - 1] == ' ' || o->headers[i][nl - 1] == '\t'))
            nl--;
        if (!colon || !result_secret_header(o->headers[i], nl))
            continue;
        const char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        out[n++] = v; /* "Bearer x": the whole value (the scrub also sees "x" alone if long) */
    }
    return n;
}

/* Why the run stopped early, for run.interrupted_by (NULL: it did not). */
static const char *interrupted_by(const struct runner_result *res)
{
    if (!res->interrupted)
        return NULL;
    return res->stop_signal == SIGINT ? "SIGINT" : res->stop_signal == SIGTERM ? "SIGTERM" : "stop";
}

/* ---- the report ---- */

/* What result.json and the summary are made of (the json_t are owned). */
struct report {
    struct run_summary sum;
    json_t *quality, *timeline, *config, *server_timeline, *server_info, *doc;
    size_t class_failed;  /* scenario classes that failed their checks */
    char no_success[320]; /* why no request succeeded ("" when some did) */
};

/* The "config" object of result.json: the options, and what the run chose. */
static json_t *report_config(const struct job *j, const struct runner_result *res)
{
    const struct runner_config *r = &j->rcfg;
    json_t *conf = config_json(&j->o, j->realtime ? j->rt_url : j->url, j->model, j->sim_profile);
    if (!conf)
        return NULL;
    char id[32];
    snprintf(id, sizeof(id), "%016llx", (unsigned long long)res->run_id);
    json_object_set_new(conf, "run_id", json_string(id));
    json_object_set_new(conf, "start_mono_ns", json_integer((json_int_t)res->start_mono_ns));
    json_object_set_new(conf, "workers", json_integer(r->workers));
    config_effective(conf, j);
    if (r->shard.count > 1) {
        char sh[32];
        snprintf(sh, sizeof(sh), "%u/%u", r->shard.index, r->shard.count);
        json_object_set_new(conf, j->group ? "mpi_ranks" : "shard",
                            j->group ? json_integer(r->shard.count) : json_string(sh));
    }
    return conf;
}

/* The headline numbers and the parts of result.json, from the run's result. */
static void report_compute(const struct job *j, const struct runner_result *res, struct report *rp)
{
    const struct runner_config *r = &j->rcfg;
    run_summary_compute(&rp->sum, res->total, res->duration_s, res->peak_output_tps, &j->goodput);
    if (r->quality.dual_sla)
        rp->sum.quality.dual_sla = dual_sla_attainment(&res->dual_sla);
    if (res->consistency) {
        struct consistency_summary cs;
        consistency_get(res->consistency, &cs);
        rp->sum.quality.consistency = cs.mean_similarity;
    }
    const struct quality_stats *qs = &res->total->quality;
    if (qs->requests || r->quality.dual_sla || res->consistency)
        rp->quality = quality_stats_to_json(qs, r->quality.dual_sla ? &res->dual_sla : NULL,
                                            res->consistency);
    rp->timeline = runner_timeline_json(res->timeline, res->ntimeline);
    run_summary_set_window(&rp->sum, rp->timeline, (double)j->o.warmup_ns / 1e9, res->send_end_s);
    rp->config = report_config(j, res);
    if (r->server_metrics.url) {
        rp->server_timeline = scrape_timeline_json(&res->server);
        rp->server_info = scrape_info_json(&res->server, &r->server_metrics);
        if (res->server.failures && !j->o.quiet)
            fprintf(stderr, "tokenstorm run: server metrics: %llu of %llu scrapes failed (%s)\n",
                    (unsigned long long)res->server.failures,
                    (unsigned long long)res->server.scrapes, res->server.last_error);
    }
}

/* result.json: built (with the OTLP export's fate and a scenario's classes
 * and workload) and written; TS_EXIT_FAIL if it could not be. */
static int report_write(struct job *j, const struct runner_result *res, struct report *rp)
{
    const char *secrets[RUN_MAX_HEADERS + 2];
    struct host_info host;
    host_info_get(&host, NULL);
    struct result_info info = {
        .config = rp->config,
        .started_wall_ns = res->started_wall_ns,
        .warmup_s = (double)j->o.warmup_ns / 1e9,
        .end_cut = res->end_cut,
        .slos = j->slos,
        .nslos = j->o.nslos,
        .timeline = rp->timeline,
        .server_timeline = rp->server_timeline,
        .server_metrics = rp->server_info,
        .quality = rp->quality,
        .argc = j->argc,
        .argv = j->argv,
        .options = j->o.options,
        .secrets = secrets,
        .nsecrets = report_secrets(j, secrets, sizeof(secrets) / sizeof(secrets[0])),
        .interrupted_by = interrupted_by(res),
        .host = &host,
    };
    if (result_build(res->total, &rp->sum, &info, &rp->doc)) {
        fprintf(stderr, "tokenstorm run: cannot build result.json\n");
        return TS_EXIT_FAIL;
    }
    if (res->otlp_enabled)
        json_object_set_new(rp->doc, "otlp", otlp_stats_json(&res->otlp));
    if (rp->no_success[0])
        json_object_set_new(rp->doc, "no_success", json_string(rp->no_success));
    if (j->o.scenario) {
        json_object_set_new(rp->doc, "classes",
                            scenario_run_results(&j->sr, res, &rp->class_failed));
        /* the workload's make-up: the first iterations of each class, as generated */
        json_t *wsum = NULL;
        char werr[256] = "";
        if (!scenario_run_dry(&j->sr, 1000, NULL, &wsum, werr, sizeof(werr)))
            json_object_set_new(rp->doc, "workload", wsum);
        else
            ts_warn("workload summary: %s", werr);
    }
    char path[1200];
    snprintf(path, sizeof(path), "%s/result.json", j->dir);
    if (result_write_file(rp->doc, path, j->err, sizeof(j->err))) {
        fprintf(stderr, "tokenstorm run: %s\n", j->err);
        return TS_EXIT_FAIL;
    }
    return TS_EXIT_OK;
}

/* The result on stdout (--json: result.json; else the summary, the SLOs, a
 * scenario's classes); returns the number of SLOs that failed. */
static size_t report_print(const struct job *j, const struct runner_result *res,
                           const struct report *rp)
{
    const struct run_opts *o = &j->o;
    size_t failed = 0;
    if (o->json) {
        if (rp->doc) {
            char *text = json_dumps(rp->doc, JSON_INDENT(2));
            if (text)
                printf("%s\n", text);
            free(text);
        }
        for (size_t i = 0; i < o->nslos; i++) {
            double actual;
            failed += !slo_eval(&j->slos[i], &rp->sum, &actual);
        }
        return failed;
    }
    struct run_summary sum = rp->sum; /* with what its latency table counts */
    if (o->scenario && scenario_run_has_steps(&j->sr, res))
        sum.latency_scope = "every call of every flow step; each step apart below";
    if (report_text_summary(stdout, res->total, &sum))
        ts_warn("cannot print the summary");
    report_text_legend(stdout, res->total);
    if (o->scenario)
        scenario_run_print_steps(stdout, &j->sr, res);
    if (o->nslos && report_text_slo(stdout, j->slos, o->nslos, &rp->sum, &failed))
        ts_warn("cannot print the summary");
    if (o->scenario)
        scenario_run_print(stdout, &j->sr, res);
    if (res->otlp_enabled) {
        char line[192];
        otlp_stats_format(&res->otlp, line, sizeof(line));
        printf("\n%s\n", line);
    }
    printf("\nresults: %s/\n", j->dir);
    return failed;
}

/*
 * Whether the run showed nothing works: no measured request of the run (or
 * of a scenario class that sent any) ended ok, or a flow or session class
 * ran iterations and none succeeded (each HTTP call may have been ok). Writes why into rp->no_success
 * ("class 'x': " first for a class) and returns true. An interrupted run is
 * not judged: it ended early on purpose.
 */
static bool judge_success(const struct job *j, const struct runner_result *res, struct report *rp)
{
    char why[256];
    if (res->interrupted)
        return false;
    if (run_stats_none_ok(res->total, why, sizeof(why))) {
        snprintf(rp->no_success, sizeof(rp->no_success), "%s", why);
        return true;
    }
    for (size_t k = 0; j->o.scenario && k < res->nclasses && k < j->sr.n; k++) {
        const struct run_stats *cs = res->classes[k].stats;
        if ((cs && cs->requests && run_stats_none_ok(cs, why, sizeof(why))) ||
            scenario_class_none_ok(&j->sr, res, k, why, sizeof(why))) {
            snprintf(rp->no_success, sizeof(rp->no_success), "class '%.40s': %s",
                     j->sr.traffic[k].name, why);
            return true;
        }
    }
    return false;
}

/* Writes and prints the result; the exit code says how the run went:
 * interrupted (130 / 143) before a run that could not be carried out (3),
 * before failed SLOs (1). */
static int report(struct job *j, const struct runner_result *res)
{
    struct report rp;
    memset(&rp, 0, sizeof(rp));
    if (j->o.scenario)
        scenario_run_total_recall(&j->sr, res->total);
    report_compute(j, res, &rp);
    bool no_success = judge_success(j, res, &rp);
    int code = report_write(j, res, &rp);
    size_t failed = report_print(j, res, &rp) + rp.class_failed;
    if (code == TS_EXIT_OK && failed)
        code = TS_EXIT_SLO;
    if (no_success) {
        fprintf(stderr, "tokenstorm run: %s\n", rp.no_success);
        code = TS_EXIT_FAIL;
    }
    if (res->interrupted)
        code = ts_exit_stopped(res->stop_signal);
    json_decref(rp.doc);
    json_decref(rp.timeline);
    json_decref(rp.server_timeline);
    json_decref(rp.server_info);
    json_decref(rp.config);
    json_decref(rp.quality);
    return code;
}

/* Runs the load and reports it; MPI: rank 0 merges every rank's
 * measurements into its result first, and alone reports. */
/* Before the first progress line: what is loaded, how, how long, where the results go. */
static void print_header(const struct job *j)
{
    static const char *const ep_names[] = {"chat", "completions", "embeddings"};
    const struct run_opts *o = &j->o;
    const struct runner_config *r = &j->rcfg;
    char arrival[32], text[4096];
    if (j->pg.quiet || j->rank)
        return;
    if (r->arrival.process.kind == ARRIVAL_GAMMA)
        snprintf(arrival, sizeof arrival, "gamma:%g", r->arrival.process.burstiness);
    else
        snprintf(arrival, sizeof arrival, "%s",
                 r->arrival.process.kind == ARRIVAL_CONSTANT ? "constant" : "poisson");
    struct console_header h = {
        .target = j->url,
        .sim = j->sim ? j->sim_profile : NULL,
        .model = j->model[0] ? j->model : NULL,
        .endpoint = (size_t)j->ep < 3 ? ep_names[j->ep] : NULL,
        .scenario = o->scenario,
        .classes = j->sr.n,
        .open = r->mode == RUNNER_OPEN,
        .arrival = arrival,
        .rate = o->rate,
        .ramp_to = o->ramp_to,
        .stages = o->stages,
        .concurrency = o->concurrency,
        .duration_s = (double)o->duration_ns / 1e9,
        .requests = o->requests,
        .warmup_s = (double)o->warmup_ns / 1e9,
        .out_dir = j->dir,
    };
    console_header_text(&h, text, sizeof text);
    fputs(text, stderr);
    fflush(stderr);
}

static int run_load(struct job *j)
{
    struct runner_result res;
    int code = TS_EXIT_OK;
    print_header(j);
    if (runner_run(&j->rcfg, &res, j->err, sizeof(j->err))) {
        fprintf(stderr, "tokenstorm run: the run failed: %s\n", j->err);
        return TS_EXIT_FAIL;
    }
    if (j->group && ranks_group_merge(j->group, &res, (double)j->o.warmup_ns / 1e9, &j->goodput,
                                      j->err, sizeof(j->err))) {
        fprintf(stderr, "tokenstorm run: merging the ranks' results: %s\n", j->err);
        code = TS_EXIT_FAIL;
    }
    if (j->group && (code || j->rank)) {
        if (!code && res.interrupted)
            code = ts_exit_stopped(res.stop_signal);
    } else {
        if (j->pg.tty && !j->pg.quiet)
            fprintf(stderr, "\n");
        code = report(j, &res);
    }
    runner_result_release(&res);
    return code;
}

/* ---- main ---- */

/* The steps in order; the labels below undo what they set up, in reverse. */
int run_job(const struct run_opts *opts, int *argc, char ***argv)
{
    struct job j;
    int code;

    job_init(&j, opts);
    if ((code = parse_checks(&j)))
        return code;
    if (j.ep == WORKLOAD_VECTOR_SEARCH && run_pg_target(opts->target))
        return run_pg(opts); /* pgvector through libpq: its own closed loop (app/run_pg.h) */
    if ((code = parse_resources(&j)) || (code = load_replay(&j)))
        goto out_options;
    if (http_client_global_init()) {
        fprintf(stderr, "tokenstorm run: cannot initialise libcurl\n");
        code = TS_EXIT_FAIL;
        goto out_options;
    }
    if ((code = load_scenario(&j)) || j.done || (code = check_slo_needs(&j, false)))
        goto out_scenario;
    if ((code = join_group(&j, argc, argv)) || (code = claim_dir(&j)))
        goto out_dir;
    if ((code = start_simulator(&j)))
        goto out_dir;
    j.argc = *argc;
    j.argv = *argv;
    if ((code = resolve_target(&j)) || (code = build_workload(&j)))
        goto out_sim;
    if ((code = check_slo_needs(&j, true)))
        goto out_workload;
    if ((code = open_files(&j)))
        goto out_workload;
    if (!(code = configure_runner(&j)))
        code = run_load(&j);
    if (j.pg.ui)
        live_ui_release(&j.ui);
    close_files(&j);
out_workload:
    workload_release(&j.wl);
out_sim:
    run_vector_release(&j.vec);
    if (j.sim)
        sim_thread_stop(j.sim, 0);
out_dir:
    outdir_release(&j.od); /* after result.json: a reader waits for the lock */
out_scenario:
    scenario_run_release(&j.sr);
    scenario_release(&j.scn);
    http_client_global_cleanup(); /* initialised right before the scenario was loaded */
out_options:
    run_quality_release(&j.o.quality);
    json_decref(j.overrides);
    dist_release(&j.think);
    run_cancel_release(&j.cancel);
    recording_free(j.rec);
    ts_free(j.replay_times);
    otlp_config_release(&j.otlp);
    if (j.has_wsf)
        wsframes_spec_release(&j.wsf);
    /* last: after a failure it aborts the MPI job, so everything else goes first */
    ranks_group_leave(j.group, code);
    return code;
}
