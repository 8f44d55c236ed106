/*
 * live_ui.h - the live dashboard of a run: `tokenstorm run --ui HOST:PORT`
 * (docs/REPORTS.md, "The live dashboard").
 *
 * The run's own HTTP server (the one of --metrics-listen, on the runner's
 * coordinator loop; /metrics is served there too) answers:
 *   GET /          the page: the report's sections for the run so far, and
 *                  the one script that keeps them current;
 *   GET /events    server-sent events: a "frame" event a second (the same
 *                  sections, drawn again) and an "end" event with the final
 *                  frame when the run is over;
 *   GET /status    {"frames": N, "viewers": N, "ended": bool}, for scripts;
 *   POST /stop     ends the run as Ctrl-C does (results written; exit 130).
 * A sweep's or an experiment's page (app/live_host.h) is served by the same
 * code, with frames drawn by their owner (live_ui_publish) and an "inner"
 * event naming the port of the running step's own dashboard.
 * A frame is the HTML report of the result so far: result_build() over the
 * merged measurements and the timeline, read back as a report document and
 * drawn by report_html_live_frame(). One renderer for the report and the
 * dashboard, not two.
 *
 * Access: the surface follows net/ctlauth.h (loopback by default; a token on
 * any other address, --api-token or TOKENSTORM_API_TOKEN). With a token, a
 * request carries it as "Authorization: Bearer TOKEN" or, since a browser's
 * EventSource cannot set headers, as the query "?token=TOKEN" (the page
 * passes its own query on). At most LIVE_UI_MAX_VIEWERS event streams at once
 * (more get 503). Everything here runs on the coordinator's thread.
 */
#ifndef TS_APP_LIVE_UI_H
#define TS_APP_LIVE_UI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "analysis/stats.h"
#include "base/buf.h"
#include "load/runner.h"
#include "net/http_server.h"

#define LIVE_UI_MAX_VIEWERS 8
#define LIVE_UI_FRAME_MAX   (8u << 20)

struct live_ui {
    char title[160];
    const char *token; /* borrowed; NULL: no token */
    json_t *config;    /* owned copy: the result's "run" */
    struct goodput_cfg goodput;
    double warmup_s;
    struct http_request *viewers[LIVE_UI_MAX_VIEWERS];
    size_t nviewers;
    struct buf frame; /* the newest frame (HTML) */
    uint64_t frames;  /* frames drawn */
    bool ended;
    /* What POST /stop calls (NULL: runner_stop(), the run's Ctrl-C). */
    void (*on_stop)(void);
    /* A sweep or chaos page: the port of the running step's own dashboard
     * (same host), sent as an "inner" event; 0 for none. */
    int inner_port;
};

/* Sets up ui (config copied; token borrowed). 0 or -ENOMEM. */
TS_MUST_CHECK int live_ui_init(struct live_ui *ui, const char *title, const char *token,
                               const json_t *config, double warmup_s,
                               const struct goodput_cfg *goodput);
/* Frees what ui owns; every viewer must have been ended (live_ui_end). */
void live_ui_release(struct live_ui *ui);

/* The runner's on_request: answers every path but /metrics. */
void live_ui_request(struct http_request *req, struct live_ui *ui);
/* Draws a frame from pr (total, timeline) and sends it to every viewer. */
void live_ui_tick(struct live_ui *ui, const struct runner_progress *pr);
/*
 * A frame drawn elsewhere (a sweep's or an experiment's page, app/live_host.h):
 * copies html as the newest frame and sends it to every viewer, with the
 * "inner" event when inner_port changed. 0, -ENOMEM or TS_TOOBIG.
 */
TS_MUST_CHECK int live_ui_publish(struct live_ui *ui, const char *html, size_t len, int inner_port);
/* The run is over: sends the last frame as "end" and ends every stream. */
void live_ui_end(struct live_ui *ui);

#endif
