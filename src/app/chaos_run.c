/*
 * chaos_run.c - the run of a chaos experiment (chaos_run.h): the load as a
 * child process, the fault phases on their schedule, the rollbacks, the
 * proxies' own delay, then the judgement written to experiment.json and
 * printed.
 */
#include "app/chaos_run.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "base/file.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "app/experiment.h"
#include "app/live_host.h"
#include "app/sweep.h"
#include "base/buf.h"
#include "report/html_page.h"
#include "report/outdir.h"
#include "report/runfiles.h"

#define POLL_NS    (10 * TS_NS_PER_MS)
#define KILL_GRACE (15 * TS_NS_PER_S)

static volatile sig_atomic_t stop_flag; /* the first of SIGINT / SIGTERM that came, or 0 */

static void on_signal(int sig)
{
    if (!stop_flag)
        stop_flag = sig;
}

struct phase_state {
    bool applied, removed;
    uint64_t applied_ns, removed_ns;
    char error[256];
};

/* A proxy the phases use: its own forward delay before and after the load. */
struct proxy_watch {
    const char *url; /* its control API (a phase's url) */
    struct scrape_hist before, after;
    char error[256];
};

struct chaos {
    const struct experiment *e;
    const char *file, *out_dir; /* from struct chaos_opts; out_dir is od.path */
    struct outdir od;           /* the results' directory, claimed for the experiment's life */
    struct phase_state ph[EXP_MAX_PHASES];
    struct proxy_watch px[EXP_MAX_PHASES];
    size_t npx;
    pid_t pid;
    bool child_done, forwarded;
    int status;
    uint64_t kill_at;
    bool quiet;
    /* the load's command line: this binary's `run` into rundir, stdout to runtxt */
    char exe[PATH_MAX], rundir[PATH_MAX], runtxt[PATH_MAX];
    const char *args[EXP_MAX_LOAD_ARGS + 10];
    /* --ui: the live page, the load's own dashboard, the time of the last frame */
    struct live_host *ui;
    char ui_arg[80];
    int ui_child_port;
    uint64_t t0, ui_drawn_ns;
    json_t *final; /* experiment.json once judged (for the last frame), or NULL */
    const char *ui_host;
    const char *ui_token; /* --ui's token: the load's dashboard wants it too */
};

static void ui_draw(struct chaos *c);

/* Sleeps ns; a signal may end it early (the callers poll stop_flag). */
static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / TS_NS_PER_S), (long)(ns % TS_NS_PER_S)};
    (void)nanosleep(&ts, NULL);
}

/* Reaps the child if it ended; true when it has. */
static bool child_poll(struct chaos *c)
{
    if (c->child_done)
        return true;
    int st;
    pid_t r = waitpid(c->pid, &st, WNOHANG);
    if (r == c->pid || (r < 0 && errno != EINTR)) {
        c->child_done = true;
        c->status = r == c->pid ? st : -1;
    }
    return c->child_done;
}

/* Asks the load to stop (once), then kills it after the grace. The signal
 * that stopped the experiment is passed on as it came (the load's
 * result.json records it); a load past its deadline gets SIGINT. */
static void child_stop(struct chaos *c)
{
    uint64_t now = ts_now_ns();
    if (c->child_done)
        return;
    if (!c->forwarded) {
        int sig = stop_flag == SIGTERM ? SIGTERM : SIGINT;
        (void)kill(-c->pid, sig); /* the group may be gone: child_poll reaps it */
        c->forwarded = true;
        c->kill_at = now + KILL_GRACE;
    } else if (now >= c->kill_at) {
        (void)kill(-c->pid, SIGKILL);
    }
}

/* Waits for the load to end; past deadline (or on a signal) stops it. */
static void child_wait(struct chaos *c, uint64_t deadline)
{
    while (!child_poll(c)) {
        if (stop_flag || ts_now_ns() >= deadline)
            child_stop(c);
        if (c->ui && ts_now_ns() - c->ui_drawn_ns >= TS_NS_PER_S)
            ui_draw(c);
        sleep_ns(POLL_NS);
    }
}

/* ---- --ui: the live page ---- */

/* One phase's row: when it is planned, and what happened to it so far. */
static void ui_phase_row(struct html_page *p, const struct chaos *c, size_t i)
{
    const struct exp_phase *ph = &c->e->phases[i];
    const struct phase_state *s = &c->ph[i];
    const char *type = json_string_value(json_object_get(ph->spec, "type"));

    html_emit(p, "<tr><td>");
    html_esc(p, ph->name);
    html_emit(p, "</td><td>");
    html_esc(p, type ? type : "?");
    html_emitf(p, " (%s)</td><td class=\"num\">%.1f</td><td class=\"num\">%.1f</td><td>",
               ph->target == EXP_TARGET_PROXY ? "proxy" : "sim", (double)ph->at_ns / 1e9,
               (double)(ph->at_ns + ph->for_ns) / 1e9);
    if (s->error[0] && !s->applied) {
        html_emit(p, "<span class=\"bad\">not applied: ");
        html_esc(p, s->error);
        html_emit(p, "</span>");
    } else if (s->removed) {
        html_emitf(p, "done: on at +%.1f s, off at +%.1f s", (double)(s->applied_ns - c->t0) / 1e9,
                   (double)(s->removed_ns - c->t0) / 1e9);
    } else if (s->applied) {
        html_emitf(p, "<b>on</b> since +%.1f s", (double)(s->applied_ns - c->t0) / 1e9);
    } else {
        html_emit(p, "pending");
    }
    html_emit(p, "</td></tr>\n");
}

/* A judged window of experiment.json ("baseline", a phase, recovery) as a row. */
static void ui_window_row(struct html_page *p, const json_t *w, const char *label)
{
    const json_t *pr;
    size_t i;
    html_emit(p, "<tr><td>");
    html_esc(p, label);
    html_emitf(
        p, "</td><td class=\"num\">%.1f-%.1f s</td><td class=\"num\">%lld</td><td>%s</td><td>",
        json_number_value(json_object_get(w, "from_s")),
        json_number_value(json_object_get(w, "to_s")),
        (long long)json_integer_value(json_object_get(w, "requests")),
        json_is_true(json_object_get(w, "holds")) ? "holds" : "<span class=\"bad\">broken</span>");
    json_array_foreach(json_object_get(w, "probes"), i, pr)
    {
        const char *slo = json_string_value(json_object_get(pr, "slo"));
        const char *act = json_string_value(json_object_get(pr, "actual_text"));
        html_emit(p, i ? "; " : "");
        html_esc(p, slo ? slo : "?");
        html_emit(p, ": ");
        html_esc(p, act ? act : "n/a");
        html_emit(p, json_is_true(json_object_get(pr, "holds")) ? " ok" : " <b>fail</b>");
    }
    html_emit(p, "</td></tr>\n");
}

/* The verdict and its windows, once judged. */
static void ui_verdict(struct html_page *p, const json_t *doc)
{
    const json_t *w, *rec = json_object_get(doc, "recovery");
    const char *v = json_string_value(json_object_get(doc, "verdict"));
    const char *error = json_string_value(json_object_get(doc, "error"));
    size_t i;

    html_emit(p, "<h3>Verdict</h3><p id=\"chaos-verdict\">");
    if (v)
        html_esc(p, v);
    else if (json_is_true(json_object_get(doc, "interrupted")))
        html_emit(p, "none: the experiment was stopped");
    else
        html_emit(p, "none");
    if (error) {
        html_emit(p, " (");
        html_esc(p, error);
        html_emit(p, ")");
    }
    html_emit(p, "</p>\n");
    if (!json_is_object(json_object_get(doc, "baseline")))
        return;
    html_emit(p, "<table id=\"chaos-windows\"><tr><th>window</th><th>time</th><th>requests</th>"
                 "<th>hypothesis</th><th>probes</th></tr>\n");
    ui_window_row(p, json_object_get(doc, "baseline"), "before the faults");
    json_array_foreach(json_object_get(doc, "phases"), i, w)
    {
        char label[96];
        snprintf(label, sizeof(label), "during '%.60s'",
                 json_string_value(json_object_get(w, "name")));
        ui_window_row(p, w, label);
    }
    json_array_foreach(rec, i, w) ui_window_row(p, w, "after");
    html_emit(p, "</table>\n");
}

/* The page's frame: the experiment, its phases so far, the verdict once judged. */
static void ui_draw(struct chaos *c)
{
    struct buf out;
    struct html_page p = {.out = &out};
    uint64_t now = ts_now_ns();

    if (!c->ui)
        return;
    c->ui_drawn_ns = now;
    buf_init(&out, 4u << 20);
    html_emit(&p, "<section id=\"chaos\"><h2>Experiment: ");
    html_esc(&p, c->e->title);
    html_emit(&p, "</h2>\n<p class=\"note\">");
    if (c->e->description) {
        html_esc(&p, c->e->description);
        html_emit(&p, " &middot; ");
    }
    if (c->final)
        html_emit(&p, "judged");
    else if (c->t0)
        html_emitf(&p, "the load has run %.0f s", (double)(now - c->t0) / 1e9);
    else
        html_emit(&p, "starting");
    html_emit(&p, "</p>\n<h3>Fault phases</h3><table id=\"chaos-phases\"><tr><th>phase</th>"
                  "<th>fault</th><th>on at (s)</th><th>off at (s)</th><th>state</th></tr>\n");
    for (size_t i = 0; i < c->e->nphases; i++)
        ui_phase_row(&p, c, i);
    html_emit(&p, "</table>\n");
    if (c->final)
        ui_verdict(&p, c->final);
    html_emit(&p, "</section>\n");
    html_page_release(&p);
    if (p.rc || live_host_publish(c->ui, out.data, out.len, c->final ? 0 : c->ui_child_port))
        ts_warn("tokenstorm chaos: --ui: cannot draw the page");
    buf_release(&out);
}

/*
 * Applies and removes the phases on their schedule from t0 while the load
 * runs. Returns 0, 1 when interrupted, or -1 when a fault could not be
 * applied or the load ended before the last phase.
 */
static int run_phases(struct chaos *c, uint64_t t0, char *err, size_t errlen)
{
    const struct experiment *e = c->e;
    for (;;) {
        if (stop_flag)
            return 1;
        uint64_t now = ts_now_ns(), next = UINT64_MAX;
        bool left = false;
        for (size_t i = 0; i < e->nphases; i++) {
            const struct exp_phase *p = &e->phases[i];
            struct phase_state *s = &c->ph[i];
            uint64_t on = t0 + p->at_ns, off = on + p->for_ns;
            if (!s->applied && now >= on) {
                if (experiment_apply(p, s->error, sizeof(s->error))) {
                    ts_errf(err, errlen, "phase '%s': %s", p->name, s->error);
                    return -1;
                }
                s->applied = true;
                s->applied_ns = ts_now_ns();
                c->ui_drawn_ns = 0; /* a new frame at once */
                if (!c->quiet)
                    fprintf(stderr, "tokenstorm chaos: +%.1fs phase '%s' on\n",
                            (double)(s->applied_ns - t0) / 1e9, p->name);
            }
            if (s->applied && !s->removed && now >= off) {
                uint64_t before = ts_now_ns();
                if (experiment_remove(p, s->error, sizeof(s->error)))
                    ts_warn("tokenstorm chaos: phase '%s': %s (the rollbacks try again)", p->name,
                            s->error);
                s->removed = true;
                s->removed_ns = before;
                c->ui_drawn_ns = 0;
                if (!c->quiet)
                    fprintf(stderr, "tokenstorm chaos: +%.1fs phase '%s' off\n",
                            (double)(before - t0) / 1e9, p->name);
            }
            if (!s->removed) {
                left = true;
                uint64_t t = s->applied ? off : on;
                next = t < next ? t : next;
            }
        }
        if (c->ui && ts_now_ns() - c->ui_drawn_ns >= TS_NS_PER_S)
            ui_draw(c);
        if (!left)
            return 0;
        if (child_poll(c)) {
            ts_errf(err, errlen, "the load ended before the last fault phase (see run.txt)");
            return -1;
        }
        now = ts_now_ns();
        sleep_ns(next > now ? (next - now < POLL_NS ? next - now : POLL_NS) : 0);
    }
}

/* Deletes every fault the experiment added, then the file's rollbacks. */
static json_t *rollbacks(struct chaos *c)
{
    const struct experiment *e = c->e;
    json_t *arr = json_array();
    char err[256];
    for (size_t i = 0; i < e->nphases; i++) {
        if (!c->ph[i].applied)
            continue;
        int rc = experiment_remove(&e->phases[i], err, sizeof(err));
        if (rc)
            ts_error("tokenstorm chaos: rollback of phase '%s': %s", e->phases[i].name, err);
        json_array_append_new(arr, json_pack("{s:s,s:s,s:b,s:s?}", "phase", e->phases[i].name,
                                             "action", e->phases[i].remove_path, "ok", rc == 0,
                                             "error", rc ? err : NULL));
    }
    for (size_t i = 0; i < e->nrollbacks; i++) {
        const struct exp_rollback *r = &e->rollbacks[i];
        int rc = experiment_rollback(r, err, sizeof(err));
        if (rc)
            ts_error("tokenstorm chaos: rollback %s %s: %s", r->method, r->url, err);
        json_array_append_new(arr, json_pack("{s:s,s:s,s:b,s:s?}", "method", r->method, "url",
                                             r->url, "ok", rc == 0, "error", rc ? err : NULL));
    }
    return arr;
}

/* Writes doc to path through a temporary file. */
static int write_json(const char *path, const json_t *doc)
{
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if (json_dump_file(doc, tmp, JSON_INDENT(2))) {
        unlink(tmp);
        return -EIO;
    }
    if (rename(tmp, path)) {
        int rc = -errno;
        unlink(tmp);
        return rc;
    }
    return 0;
}

/* The fault windows in ms since the run's start; -1 for phases never applied. */
static void windows_of(const struct chaos *c, uint64_t run_start, uint64_t run_end,
                       struct exp_window *w)
{
    for (size_t i = 0; i < c->e->nphases; i++) {
        const struct phase_state *s = &c->ph[i];
        w[i].from_ms = w[i].to_ms = -1;
        if (!s->applied)
            continue;
        uint64_t a = s->applied_ns > run_start ? s->applied_ns - run_start : 0;
        uint64_t b = s->removed ? s->removed_ns : run_end;
        b = b > run_start ? b - run_start : 0;
        w[i].from_ms = (double)a / 1e6;
        w[i].to_ms = (double)(b > a ? b : a) / 1e6;
    }
}

/* result.json's and experiment.json's "faults": each applied phase with its window. */
static json_t *faults_json(const struct experiment *e, const struct exp_window *w)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < e->nphases; i++) {
        if (w[i].from_ms < 0)
            continue;
        const char *type = json_string_value(json_object_get(e->phases[i].spec, "type"));
        json_array_append_new(
            arr, json_pack("{s:s,s:f,s:f,s:s,s:s,s:s}", "name", e->phases[i].name, "start_s",
                           w[i].from_ms / 1e3, "end_s", w[i].to_ms / 1e3, "type", type ? type : "",
                           "target", e->phases[i].target == EXP_TARGET_PROXY ? "proxy" : "sim",
                           "url", e->phases[i].url));
    }
    return arr;
}

/* One judged window and its probes, as a line each. */
static void print_window(const json_t *w, const char *label)
{
    const json_t *probes = json_object_get(w, "probes"), *p;
    size_t i;
    printf("  %-22s %5.1f-%5.1f s %5lld req  %s\n", label,
           json_number_value(json_object_get(w, "from_s")),
           json_number_value(json_object_get(w, "to_s")),
           (long long)json_integer_value(json_object_get(w, "requests")),
           json_is_true(json_object_get(w, "holds")) ? "holds" : "BROKEN");
    json_array_foreach(probes, i, p)
    {
        printf("      %-28s %-14s %s\n", json_string_value(json_object_get(p, "slo")),
               json_string_value(json_object_get(p, "actual_text")),
               json_is_true(json_object_get(p, "holds")) ? "ok" : "FAIL");
    }
    json_array_foreach(json_object_get(w, "proxies"), i, p)
    {
        const json_t *amp = json_object_get(p, "amplification");
        const json_t *o = json_object_get(p, "orphaned");
        char by[256] = "";
        size_t n = 0;
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)json_object_get(p, "amplification_by_trigger"), k, v)
        {
            if (n < sizeof(by) && json_is_number(v))
                n += (size_t)snprintf(by + n, sizeof(by) - n, "%s%s %.2f", n ? ", " : " (", k,
                                      json_number_value(v));
        }
        if (n && n < sizeof(by) - 1)
            strcat(by, ")");
        char ampv[32] = "n/a";
        if (json_is_number(amp))
            snprintf(ampv, sizeof(ampv), "%.2f", json_number_value(amp));
        printf("      proxy %s: amplification %s%s, orphaned %.0f tokens %.2f s\n",
               json_string_value(json_object_get(p, "url")), ampv, by,
               json_number_value(json_object_get(o, "tokens")),
               json_number_value(json_object_get(o, "seconds")));
    }
}

/* The windows (unless quiet) and the verdict on stdout. */
static void print_report(const json_t *rep, const struct experiment *e, bool quiet)
{
    const json_t *phases = json_object_get(rep, "phases"), *w;
    const json_t *rec = json_object_get(rep, "recovery");
    size_t i;
    if (!quiet) {
        printf("experiment: %s\n", e->title);
        print_window(json_object_get(rep, "baseline"), "before the faults");
        json_array_foreach(phases, i, w)
        {
            char label[80];
            snprintf(label, sizeof(label), "during '%.60s'",
                     json_string_value(json_object_get(w, "name")));
            print_window(w, label);
        }
        size_t n = json_array_size(rec);
        if (n)
            print_window(json_array_get(rec, n - 1), n > 1 ? "after (first holding)" : "after");
        if (n > 1 && !json_is_true(json_object_get(json_array_get(rec, n - 1), "holds")))
            printf("  (%zu recovery windows, none held)\n", n);
    }
    const char *v = json_string_value(json_object_get(rep, "verdict"));
    double t = json_number_value(json_object_get(rep, "recovery_s"));
    bool rs = json_is_number(json_object_get(rep, "recovery_s"));
    bool dev = json_is_true(json_object_get(rep, "deviated"));
    if (!strcmp(v, "steady"))
        printf("verdict: steady (the hypothesis held throughout)\n");
    else if (!strcmp(v, "deviated"))
        printf("verdict: deviated (broke its tolerance during the faults), recovered after "
               "%.1f s\n",
               t);
    else if (!strcmp(v, "recovered"))
        printf("verdict: recovered after %.1f s (within tolerance during the faults)\n", t);
    else if (!strcmp(v, "not_recovered"))
        printf("verdict: not recovered%s: %s\n", dev ? " (deviated during the faults)" : "",
               rs ? "slower than max_recovery"
                  : "the hypothesis did not hold again before the load ended");
    else
        printf("verdict: unsteady (the hypothesis did not hold before the first fault)\n");
}

/* The distinct proxies of the phases, and their forward delay now. */
static void proxies_before(struct chaos *c)
{
    for (size_t i = 0; i < c->e->nphases; i++) {
        const struct exp_phase *p = &c->e->phases[i];
        bool seen = p->target != EXP_TARGET_PROXY;
        for (size_t k = 0; k < c->npx && !seen; k++)
            seen = strcmp(c->px[k].url, p->url) == 0;
        if (seen)
            continue;
        struct proxy_watch *w = &c->px[c->npx++];
        w->url = p->url;
        if (experiment_proxy_delay(w->url, &w->before, w->error, sizeof(w->error)))
            ts_warn("tokenstorm chaos: %s", w->error);
    }
}

/* The same proxies' forward delay after the load (those that answered before). */
static void proxies_after(struct chaos *c)
{
    for (size_t k = 0; k < c->npx; k++) {
        struct proxy_watch *w = &c->px[k];
        if (!w->error[0] && experiment_proxy_delay(w->url, &w->after, w->error, sizeof(w->error)))
            ts_warn("tokenstorm chaos: %s", w->error);
    }
}

/* A delay in seconds as "N us" below 1 ms, else "N.NN ms". */
static void print_delay(const json_t *v, char *out, size_t n)
{
    double s = json_real_value(v);
    if (s < 1e-3)
        snprintf(out, n, "%.0f us", s * 1e6);
    else
        snprintf(out, n, "%.2f ms", s * 1e3);
}

/* "proxies": what each proxy's own forward delay was during the experiment. */
static json_t *proxies_json(struct chaos *c)
{
    json_t *arr = json_array();
    for (size_t k = 0; arr && k < c->npx; k++) {
        struct proxy_watch *w = &c->px[k];
        json_t *d = w->error[0] ? NULL : exp_delay_json(&w->before, &w->after);
        json_t *o = json_pack("{s:s,s:o}", "url", w->url, "forward_delay", d ? d : json_null());
        if (o && w->error[0])
            json_object_set_new(o, "error", json_string(w->error));
        json_array_append_new(arr, o);
        if (c->quiet || !d)
            continue;
        char p50[32], p99[32];
        json_t *pieces = json_object_get(d, "pieces");
        print_delay(json_object_get(d, "p50_s"), p50, sizeof(p50));
        print_delay(json_object_get(d, "p99_s"), p99, sizeof(p99));
        if (json_integer_value(pieces) > 0)
            printf(
                "proxy %s: its own delay per forwarded piece p50 %s, p99 %s (%" JSON_INTEGER_FORMAT
                " pieces)\n",
                w->url, p50, p99, json_integer_value(pieces));
    }
    return arr;
}

/* Adds url to ch (once, while there is room). */
static void chains_add(struct exp_chains *ch, const char *url)
{
    for (size_t i = 0; i < ch->n; i++)
        if (!strcmp(ch->url[i], url))
            return;
    if (ch->n < EXP_MAX_PROBES)
        ch->url[ch->n++] = url;
}

/* What every proxy of the phases and the probes saw of the chain (GET
 * /chain), into ch and docs (owned: json_decref each). A proxy that does
 * not answer is warned about; probes on it do not hold. */
static void chains_fetch(const struct chaos *c, struct exp_chains *ch, json_t **docs)
{
    for (size_t k = 0; k < c->npx; k++)
        chains_add(ch, c->px[k].url);
    for (size_t i = 0; i < c->e->nprobes; i++)
        if (c->e->probes[i].proxy[0])
            chains_add(ch, c->e->probes[i].proxy);
    for (size_t i = 0; i < ch->n; i++) {
        char err[320];
        if (experiment_chain_fetch(ch->url[i], &docs[i], err, sizeof(err)))
            ts_warn("chaos: %s", err);
        ch->doc[i] = docs[i];
    }
}

/* experiment.json before the judgement: what ran, and the rollbacks (rb, taken). */
static json_t *doc_new(const struct chaos *c, json_t *rb, bool interrupted)
{
    const struct experiment *e = c->e;
    json_t *doc = json_object();
    json_object_set_new(doc, "schema", json_string("tokenstorm.chaos/1"));
    json_object_set_new(doc, "title", json_string(e->title));
    if (e->description)
        json_object_set_new(doc, "description", json_string(e->description));
    json_object_set_new(doc, "file", json_string(c->file));
    json_object_set_new(doc, "run_dir", json_string("run"));
    json_object_set_new(doc, "interrupted", json_boolean(interrupted));
    json_object_set_new(doc, "interrupted_by",
                        !interrupted           ? json_null()
                        : stop_flag == SIGTERM ? json_string("SIGTERM")
                                               : json_string("SIGINT"));
    json_object_set_new(doc, "rollbacks", rb);
    return doc;
}

/*
 * The fault windows into doc and the run's result.json (res, read from
 * path), so a report of the run shows them. A result.json that cannot be
 * rewritten is warned about: the judgement does not need it.
 */
static void add_faults(const struct chaos *c, json_t *doc, json_t *res, const char *path,
                       const struct exp_window *w)
{
    json_t *faults = faults_json(c->e, w);
    json_object_set(doc, "faults", faults);
    json_object_set_new(res, "faults", faults);
    if (write_json(path, res))
        ts_warn("tokenstorm chaos: cannot add the fault windows to %s", path);
}

/* Judges the finished run and writes experiment.json; returns the exit code. */
static int judge(struct chaos *c, json_t *rb, bool interrupted, const char *failure)
{
    const struct experiment *e = c->e;
    const char *dir = c->out_dir;
    char path[PATH_MAX], err[512] = "";
    json_t *res = NULL, *doc = doc_new(c, rb, interrupted), *rep = NULL;
    const json_t *run;
    struct exp_requests *reqs = NULL;
    struct exp_window w[EXP_MAX_PHASES];
    struct exp_chains ch = {0};
    json_t *docs[EXP_MAX_PROBES] = {0};
    enum exp_verdict v = EXP_UNSTEADY;
    uint64_t start;
    double dur;
    int code = failure ? TS_EXIT_FAIL : TS_EXIT_OK;

    snprintf(path, sizeof(path), "%s/run/result.json", dir);
    if (runfiles_load_result(path, &res, err, sizeof(err))) {
        if (!failure)
            failure = err;
        code = TS_EXIT_FAIL;
        goto out;
    }
    run = json_object_get(res, "run");
    start = (uint64_t)json_integer_value(json_object_get(run, "start_mono_ns"));
    dur = json_number_value(json_object_get(run, "duration_s"));
    if (!start) {
        failure = "result.json has no run.start_mono_ns";
        code = TS_EXIT_FAIL;
        goto out;
    }
    windows_of(c, start, start + (uint64_t)(dur * 1e9), w);
    add_faults(c, doc, res, path, w);
    snprintf(path, sizeof(path), "%s/run/requests.jsonl", dir);
    if (exp_requests_load(path, &reqs, err, sizeof(err))) {
        if (!failure)
            failure = err;
        code = TS_EXIT_FAIL;
        goto out;
    }
    ch.run_start_ns = start;
    chains_fetch(c, &ch, docs);
    if (experiment_judge_chains(e, reqs, w, 0, &ch, &v, &rep)) {
        failure = "out of memory";
        code = TS_EXIT_FAIL;
        goto out;
    }
    json_object_update(doc, rep);
    if (!interrupted && !failure)
        code = exp_verdict_exit(v);
    if (!interrupted && !failure)
        print_report(rep, e, c->quiet);
    json_object_set_new(doc, "proxies", proxies_json(c));
out:
    if (interrupted)
        code = ts_exit_stopped(stop_flag);
    if (failure) {
        json_object_set_new(doc, "error", json_string(failure));
        fprintf(stderr, "tokenstorm chaos: %s\n", failure);
    }
    if (interrupted || failure)
        json_object_set_new(doc, "verdict", json_null());
    json_object_set_new(doc, "exit_code", json_integer(code));
    if (c->ui)
        c->final = json_incref(doc);
    snprintf(path, sizeof(path), "%s/experiment.json", dir);
    if (write_json(path, doc)) {
        fprintf(stderr, "tokenstorm chaos: cannot write %s\n", path);
        if (!code)
            code = TS_EXIT_FAIL;
    }
    exp_requests_free(reqs);
    for (size_t i = 0; i < ch.n; i++)
        json_decref(docs[i]);
    json_decref(rep);
    json_decref(res);
    json_decref(doc);
    return code;
}

/*
 * The load's command line and its folders: this binary's `run` with the
 * file's load arguments, its requests saved into DIR/run, its summary into
 * DIR/run.txt. Returns 0, or -1 with the message printed.
 */
static int prepare_load(struct chaos *c)
{
    const struct experiment *e = c->e;
    char err[1024];
    size_t n = 0;
    ssize_t len = readlink("/proc/self/exe", c->exe, sizeof(c->exe) - 1);
    if (len <= 0) {
        fprintf(stderr, "tokenstorm chaos: cannot find my own binary\n");
        return -1;
    }
    c->exe[len] = '\0';
    snprintf(c->rundir, sizeof(c->rundir), "%s/run", c->out_dir);
    snprintf(c->runtxt, sizeof(c->runtxt), "%s/run.txt", c->out_dir);
    if (file_mkdirs(c->rundir, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm chaos: %s\n", err);
        return -1;
    }
    c->args[n++] = c->exe;
    c->args[n++] = "run";
    for (size_t i = 0; i < e->nload; i++)
        c->args[n++] = e->load[i];
    if (c->ui && (c->ui_child_port = live_host_free_port(c->ui_host))) {
        bool v6 = strchr(c->ui_host, ':') != NULL;
        snprintf(c->ui_arg, sizeof(c->ui_arg), "%s%s%s:%d", v6 ? "[" : "", c->ui_host,
                 v6 ? "]" : "", c->ui_child_port);
        c->args[n++] = "--ui";
        c->args[n++] = c->ui_arg;
    }
    c->args[n++] = "--save-requests";
    c->args[n++] = "--out";
    c->args[n++] = c->rundir;
    c->args[n++] = "-q";
    c->args[n] = NULL;
    return 0;
}

/*
 * SIGINT and SIGTERM set stop_flag while the experiment runs (the load has
 * its own process group: child_stop passes the stop on). Returns 0, or -1
 * with the message printed and nothing changed.
 */
static int signals_catch(struct sigaction *old_int, struct sigaction *old_term)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    int rc = sigaction(SIGINT, &sa, old_int) ? -errno : 0;
    if (!rc && sigaction(SIGTERM, &sa, old_term)) {
        rc = -errno;
        (void)sigaction(SIGINT, old_int, NULL);
    }
    if (rc) {
        fprintf(stderr, "tokenstorm chaos: cannot catch SIGINT/SIGTERM: %s\n", strerror(-rc));
        return -1;
    }
    stop_flag = 0;
    return 0;
}

/* Puts back the handlers signals_catch found (cannot fail: they were valid). */
static void signals_restore(const struct sigaction *old_int, const struct sigaction *old_term)
{
    (void)sigaction(SIGINT, old_int, NULL);
    (void)sigaction(SIGTERM, old_term, NULL);
}

/* Why a load that was not stopped counts as failed (exit status other than 0 or 1), in failure. */
static void load_status(const struct chaos *c, char *failure, size_t n)
{
    if (c->status < 0 || !WIFEXITED(c->status) ||
        (WEXITSTATUS(c->status) != 0 && WEXITSTATUS(c->status) != 1))
        snprintf(failure, n, "the load failed (exit status %d; see %.300s)",
                 c->status >= 0 && WIFEXITED(c->status) ? WEXITSTATUS(c->status) : -1, c->runtxt);
}

/*
 * Starts the load. With --ui and a token, the load's dashboard gets it in
 * its environment only: this process keeps its own TOKENSTORM_API_TOKEN,
 * the one it sends to the proxies and simulators it steers.
 */
static int spawn_load(struct chaos *c, char *err, size_t errlen)
{
    const char *old = c->ui_token ? getenv("TOKENSTORM_API_TOKEN") : NULL;
    char *saved = old ? strdup(old) : NULL;
    int rc;
    if (c->ui_token && ((old && !saved) || setenv("TOKENSTORM_API_TOKEN", c->ui_token, 1))) {
        free(saved);
        ts_errf(err, errlen, "--ui: cannot pass the token on: out of memory");
        return -ENOMEM;
    }
    rc = sweep_spawn(c->args, c->runtxt, &c->pid, err, errlen);
    if (c->ui_token) {
        if (saved)
            (void)setenv("TOKENSTORM_API_TOKEN", saved, 1);
        else
            (void)unsetenv("TOKENSTORM_API_TOKEN");
    }
    free(saved);
    return rc;
}

/*
 * The experiment proper: the load, the phases, the rollbacks (always, before
 * the load winds down), then the judgement. Returns the exit code.
 */
static int execute(struct chaos *c)
{
    const struct experiment *e = c->e;
    char err[1024], failure[512] = "";

    proxies_before(c);
    if (spawn_load(c, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm chaos: %s\n", err);
        return TS_EXIT_FAIL;
    }
    uint64_t t0 = ts_now_ns();
    c->t0 = t0;
    ui_draw(c);
    uint64_t deadline = t0 + sweep_run_deadline_ns((const char *const *)e->load, e->nload);
    if (!c->quiet)
        fprintf(stderr,
                "tokenstorm chaos: '%s': load started (pid %d), %zu phases, results in %s\n",
                e->title, (int)c->pid, e->nphases, c->out_dir);
    int r = run_phases(c, t0, failure, sizeof(failure));
    bool interrupted = r == 1 || stop_flag;
    if (r != 0)
        child_stop(c); /* end the load now: rollbacks first, judgement of what ran */
    json_t *rb = rollbacks(c);
    child_wait(c, r == 0 ? deadline : ts_now_ns() + KILL_GRACE);
    interrupted |= stop_flag != 0;
    proxies_after(c);
    if (!interrupted && !failure[0])
        load_status(c, failure, sizeof(failure));
    int code = judge(c, rb, interrupted, failure[0] ? failure : NULL);
    ui_draw(c);
    return code;
}

/*
 * The results' directory (--out, or one named after the time), claimed
 * before any fault or load is sent: TS_EXIT_USAGE when it is not a writable
 * directory, holds results (without --force) or another process writes it.
 */
static int claim_dir(struct chaos *c, const struct chaos_opts *o)
{
    char dir[PATH_MAX], err[1200];
    if (o->out_dir)
        snprintf(dir, sizeof(dir), "%s", o->out_dir);
    else
        outdir_default_name(dir, sizeof(dir), "chaos");
    if (outdir_claim(&c->od, dir, o->force ? OUTDIR_FORCE : 0, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm chaos: --out: %s\n", err);
        return TS_EXIT_USAGE;
    }
    if (c->od.removed)
        fprintf(stderr, "tokenstorm chaos: --force: removed from %s: %s\n", dir, c->od.note);
    c->out_dir = c->od.path;
    return TS_EXIT_OK;
}

/* --ui's stop button: as Ctrl-C (called on the page's thread: only a flag). */
static void ui_stop(void)
{
    on_signal(SIGINT);
}

/*
 * --ui: the page on its own thread; the load's dashboard on the same host
 * (the token in its environment, not its argv). 0, or the exit code.
 */
static int ui_open(struct chaos *c, const struct chaos_opts *o)
{
    char err[512];
    if (!o->ui_host)
        return 0;
    for (size_t i = 0; i < c->e->nload; i++) {
        const char *a = c->e->load[i];
        if (!strncmp(a, "--ui", 4) || !strncmp(a, "--metrics-listen", 16)) {
            fprintf(stderr,
                    "tokenstorm chaos: --ui: the load's options in %s have %s: the "
                    "experiment gives the load its own dashboard\n",
                    c->file, a);
            return TS_EXIT_USAGE;
        }
    }
    c->ui_token = o->ui_token;
    if (live_host_open(o->ui_host, o->ui_port, "tokenstorm chaos", o->ui_token, ui_stop, &c->ui,
                       err, sizeof(err))) {
        fprintf(stderr, "tokenstorm chaos: --ui: %s\n", err);
        return TS_EXIT_FAIL;
    }
    c->ui_host = o->ui_host;
    bool v6 = strchr(o->ui_host, ':') != NULL;
    fprintf(stderr, "tokenstorm chaos: dashboard on http://%s%s%s:%d/\n", v6 ? "[" : "", o->ui_host,
            v6 ? "]" : "", live_host_port(c->ui));
    ui_draw(c);
    return 0;
}

/* --check: the file is valid; what it holds, in one line. */
static void print_check(const char *file, const struct experiment *e)
{
    printf("%s: ok: %zu probes, %zu phases, faults end at %.1f s\n", file, e->nprobes, e->nphases,
           (double)experiment_faults_end_ns(e) / 1e9);
}

int chaos_run(const struct chaos_opts *o)
{
    struct experiment *e = NULL;
    struct chaos *c = NULL;
    struct sigaction old_int, old_term;
    char err[1024];
    int code = TS_EXIT_USAGE;

    if (experiment_load(o->file, &e, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm chaos: %s\n", err);
        goto out;
    }
    if (o->check) {
        print_check(o->file, e);
        code = TS_EXIT_OK;
        goto out_free_experiment;
    }
    code = TS_EXIT_FAIL;
    c = ts_calloc(1, sizeof(*c));
    if (c)
        outdir_init(&c->od);
    if (!c) {
        fprintf(stderr, "tokenstorm chaos: cannot find my own binary\n");
        goto out_free_experiment;
    }
    c->e = e;
    c->file = o->file;
    c->quiet = o->quiet;
    if ((code = claim_dir(c, o)))
        goto out_free_chaos;
    if ((code = ui_open(c, o)))
        goto out_release_dir;
    code = TS_EXIT_FAIL;
    if (prepare_load(c) || signals_catch(&old_int, &old_term))
        goto out_release_dir;
    code = execute(c);
    signals_restore(&old_int, &old_term);
out_release_dir:
    live_host_close(c->ui, c->final ? 1000 : 0);
    json_decref(c->final);
    outdir_release(&c->od);
out_free_chaos:
    ts_free(c);
out_free_experiment:
    experiment_free(e);
out:
    return code;
}
