/*
 * live_ui.c - the live dashboard of a run (see live_ui.h).
 */
#include "app/live_ui.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis/summary.h"
#include "base/log.h"
#include "net/ctlauth.h"
#include "report/docset.h"
#include "report/html.h"
#include "report/result.h"

int live_ui_init(struct live_ui *ui, const char *title, const char *token, const json_t *config,
                 double warmup_s, const struct goodput_cfg *goodput)
{
    memset(ui, 0, sizeof(*ui));
    snprintf(ui->title, sizeof(ui->title), "%s", title ? title : "tokenstorm run");
    ui->token = token;
    ui->warmup_s = warmup_s > 0 ? warmup_s : 0;
    if (goodput)
        ui->goodput = *goodput;
    buf_init(&ui->frame, LIVE_UI_FRAME_MAX);
    if (config && !(ui->config = json_deep_copy(config)))
        return -ENOMEM;
    return buf_append_str(&ui->frame, "<section><p class=\"note\">The run is starting: the "
                                      "first figures come after its first second.</p></section>");
}

void live_ui_release(struct live_ui *ui)
{
    json_decref(ui->config);
    buf_release(&ui->frame);
    ui->config = NULL;
}

/* ---- viewers ---- */

static void viewer_drop(struct live_ui *ui, size_t i)
{
    ui->viewers[i] = ui->viewers[--ui->nviewers];
}

static void on_viewer_abort(struct http_request *req)
{
    struct live_ui *ui = req->user;
    for (size_t i = 0; i < ui->nviewers; i++) {
        if (ui->viewers[i] == req) {
            viewer_drop(ui, i);
            (void)http_stream_end(req);
            return;
        }
    }
}

/* The "inner" event: the port of the running step's dashboard ("" for none). */
static int send_inner(struct http_request *req, int port)
{
    char ev[64];
    int n = port > 0 ? snprintf(ev, sizeof(ev), "event: inner\ndata: %d\n\n", port)
                     : snprintf(ev, sizeof(ev), "event: inner\ndata: \n\n");
    int rc = http_stream_write(req, ev, (size_t)n);
    return rc == TS_AGAIN ? 0 : rc;
}

/* Writes the frame as one server-sent event, a data: line per line of HTML. */
static int send_event(struct http_request *req, const char *event, const struct buf *frame)
{
    struct buf ev;
    const char *s = buf_cstr(frame), *end = s + frame->len;
    int rc;

    buf_init(&ev, LIVE_UI_FRAME_MAX + LIVE_UI_FRAME_MAX / 8);
    rc = buf_appendf(&ev, "event: %s\n", event);
    while (!rc && s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t len = nl ? (size_t)(nl - s) : (size_t)(end - s);
        rc = buf_append_str(&ev, "data: ");
        rc = rc ? rc : buf_append(&ev, s, len);
        rc = rc ? rc : buf_append_char(&ev, '\n');
        s += len + (nl != NULL);
    }
    rc = rc ? rc : buf_append_char(&ev, '\n');
    if (!rc)
        rc = http_stream_write(req, ev.data, ev.len);
    buf_release(&ev);
    return rc == TS_AGAIN ? 0 : rc; /* a slow viewer: the queue's own bound cuts it */
}

static void serve_events(struct http_request *req, struct live_ui *ui)
{
    if (ui->ended) {
        if (!http_stream_begin(req, 200, "text/event-stream", "Cache-Control: no-store\r\n"))
            (void)send_event(req, "end", &ui->frame);
        (void)http_stream_end(req);
        return;
    }
    if (ui->nviewers == LIVE_UI_MAX_VIEWERS) {
        (void)http_respond(req, 503, "text/plain; charset=utf-8", NULL, "too many viewers\n", 17);
        return;
    }
    if (http_stream_begin(req, 200, "text/event-stream", "Cache-Control: no-store\r\n") ||
        (ui->inner_port && send_inner(req, ui->inner_port)) ||
        send_event(req, "frame", &ui->frame)) {
        (void)http_stream_end(req);
        return;
    }
    req->user = ui;
    http_request_on_abort(req, on_viewer_abort);
    ui->viewers[ui->nviewers++] = req;
}

static void serve_page(struct http_request *req, struct live_ui *ui)
{
    struct buf page;
    buf_init(&page, LIVE_UI_FRAME_MAX + (64u << 10));
    if (report_html_live_page(ui->title, buf_cstr(&ui->frame), "events", "stop", &page))
        (void)http_respond(req, 500, "text/plain; charset=utf-8", NULL, "cannot draw the page\n",
                           21);
    else
        (void)http_respond(req, 200, "text/html; charset=utf-8", "Cache-Control: no-store\r\n",
                           page.data, page.len);
    buf_release(&page);
}

void live_ui_request(struct http_request *req, struct live_ui *ui)
{
    static const char text[] = "text/plain; charset=utf-8";
    bool get = !strcmp(req->method, "GET") || !strcmp(req->method, "HEAD");

    if (!ctlauth_allows_query(req, ui->token)) {
        ctlauth_deny(req);
        return;
    }
    if (!strcmp(req->path, "/") && get) {
        serve_page(req, ui);
    } else if (!strcmp(req->path, "/events") && get) {
        serve_events(req, ui);
    } else if (!strcmp(req->path, "/status") && get) {
        char body[128];
        int n =
            snprintf(body, sizeof(body), "{\"frames\":%llu,\"viewers\":%zu,\"ended\":%s}\n",
                     (unsigned long long)ui->frames, ui->nviewers, ui->ended ? "true" : "false");
        (void)http_respond(req, 200, "application/json", "Cache-Control: no-store\r\n", body,
                           (size_t)n);
    } else if (!strcmp(req->path, "/stop") && !strcmp(req->method, "POST")) {
        if (!ui->ended) {
            ts_info("stop asked from the dashboard");
            if (ui->on_stop)
                ui->on_stop();
            else
                runner_stop();
        }
        (void)http_respond(req, 202, text, NULL, "stopping\n", 9);
    } else if (!strcmp(req->path, "/") || !strcmp(req->path, "/events") ||
               !strcmp(req->path, "/stop")) {
        (void)http_respond(req, 405, text, NULL, "method not allowed\n", 19);
    } else {
        (void)http_respond(req, 404, text, NULL, "not found\n", 10);
    }
}

/* ---- frames ---- */

/* The highest rate of content chunks over a whole second after the warm-up. */
static double peak_tps(const struct runner_point *tl, size_t n, double warmup_s)
{
    double peak = 0;
    for (size_t i = 0; i < n; i++) {
        double t0 = i ? tl[i - 1].t_s : 0, len = tl[i].t_s - t0;
        if (len > 0.5 && t0 >= warmup_s - 1e-9 && (double)tl[i].chunks / len > peak)
            peak = (double)tl[i].chunks / len;
    }
    return peak;
}

/* The report's sections for the result so far, into ui->frame. */
static int draw(struct live_ui *ui, const struct runner_progress *pr)
{
    struct run_summary sum;
    struct report_docset set;
    json_t *timeline = runner_timeline_json(pr->timeline, pr->ntimeline), *doc = NULL;
    double dur = pr->elapsed_s - ui->warmup_s;
    char err[256];
    int rc = timeline ? 0 : -ENOMEM;

    run_summary_compute(&sum, pr->total, dur > 0 ? dur : 0,
                        peak_tps(pr->timeline, pr->ntimeline, ui->warmup_s), &ui->goodput);
    run_summary_set_window(&sum, timeline, ui->warmup_s, NAN);
    struct result_info info = {
        .config = ui->config, .warmup_s = ui->warmup_s, .timeline = timeline};
    rc = rc ? rc : result_build(pr->total, &sum, &info, &doc);
    report_docset_init(&set);
    rc = rc ? rc : report_docset_add_json(&set, doc, "live", "(live)", NULL, err, sizeof(err));
    if (!rc) {
        buf_reset(&ui->frame);
        rc = report_html_live_frame(&set, &ui->frame);
    }
    report_docset_release(&set);
    json_decref(doc);
    json_decref(timeline);
    return rc;
}

/* Sends the newest frame (and the inner port when it changed) to every viewer. */
static void broadcast(struct live_ui *ui, bool inner)
{
    ui->frames++;
    for (size_t i = 0; i < ui->nviewers;) {
        if ((inner && send_inner(ui->viewers[i], ui->inner_port)) ||
            send_event(ui->viewers[i], "frame", &ui->frame)) {
            struct http_request *req = ui->viewers[i];
            viewer_drop(ui, i);
            (void)http_stream_end(req);
        } else {
            i++;
        }
    }
}

void live_ui_tick(struct live_ui *ui, const struct runner_progress *pr)
{
    if (ui->ended || !pr->total)
        return;
    int rc = draw(ui, pr);
    if (rc) {
        ts_warn("run --ui: cannot draw the dashboard: %s", ts_strerror(rc));
        return;
    }
    broadcast(ui, false);
}

int live_ui_publish(struct live_ui *ui, const char *html, size_t len, int inner_port)
{
    if (ui->ended)
        return 0;
    buf_reset(&ui->frame);
    int rc = buf_append(&ui->frame, html, len);
    if (rc)
        return rc;
    bool inner = inner_port != ui->inner_port;
    ui->inner_port = inner_port;
    broadcast(ui, inner);
    return 0;
}

void live_ui_end(struct live_ui *ui)
{
    if (ui->ended)
        return;
    ui->ended = true;
    while (ui->nviewers) {
        struct http_request *req = ui->viewers[0];
        viewer_drop(ui, 0);
        if (ui->inner_port)
            (void)send_inner(req, 0);
        (void)send_event(req, "end", &ui->frame);
        (void)http_stream_end(req);
    }
}
