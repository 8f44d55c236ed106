/*
 * html.c - the self-contained HTML report page (see html.h): its frame (head
 * with the style sheet, navigation, footer) around the sections, which are
 * written by html_overview, html_dist, html_sweep and html_run on one
 * struct html_page (html_page.h).
 */
#include "report/html.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "report/html_dist.h"
#include "report/html_overview.h"
#include "report/html_page.h"
#include "report/html_run.h"
#include "report/html_sweep.h"
#include "report/html_topo.h"
#include "ts_config.h"

/* ---- page frame -------------------------------------------------------------------- */

static const char page_css[] =
    ":root{--fg:#1f2328;--muted:#59636e;--line:#d8dee4;--bg:#f4f6f8;--ok:#1a7f37;--bad:#c62828}\n"
    "*{box-sizing:border-box}\n"
    "body{margin:0;font:14px/1.45 'DejaVu Sans',Helvetica,Arial,sans-serif;color:var(--fg);"
    "background:var(--bg)}\n"
    "header{background:#1f2937;color:#fff;padding:18px 28px}\n"
    "header h1{margin:0;font-size:22px;font-weight:600}\n"
    "header .meta{color:#cbd5e1;font-size:13px;margin-top:4px}\n"
    "nav{background:#fff;border-bottom:1px solid var(--line);padding:8px 28px;font-size:13px}\n"
    "nav a{color:#0b62c4;text-decoration:none;margin-right:16px;white-space:nowrap}\n"
    "main{max-width:1320px;margin:0 auto;padding:8px 24px 40px}\n"
    "section{background:#fff;border:1px solid var(--line);border-radius:8px;padding:16px 20px;"
    "margin:18px 0}\n"
    "h2{font-size:19px;margin:0 0 6px}\n"
    "h3{font-size:15px;margin:18px 0 8px}\n"
    ".sub{color:var(--muted);font-size:13px;margin:0 0 12px}\n"
    ".cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(128px,1fr));gap:8px;"
    "margin:8px 0 4px}\n"
    ".cards.wide{grid-template-columns:repeat(auto-fill,minmax(250px,1fr))}\n"
    ".card{border:1px solid var(--line);border-radius:6px;padding:9px 12px;background:#fafbfc}\n"
    ".card .k{font-size:12px;color:var(--muted)}\n"
    ".card .v{font-size:21px;font-weight:600;margin:2px 0;white-space:nowrap}\n"
    ".card .u{font-size:13px;font-weight:400;color:var(--muted)}\n"
    ".card .s{font-size:12px;color:var(--muted)}\n"
    ".card.bad .v{color:var(--bad)} .card.good .v{color:var(--ok)}\n"
    ".charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(500px,1fr));gap:14px}\n"
    "figure.chart{margin:0}\n"
    ".ts-chart{width:100%;height:auto;display:block;border:1px solid #eceff2;border-radius:4px}\n"
    ".tablewrap{overflow-x:auto}\n"
    "table{border-collapse:collapse;font-size:13px;margin:6px 0 12px}\n"
    "caption{text-align:left;font-weight:600;padding:4px 0}\n"
    "caption.note{font-weight:400}\n"
    "th,td{padding:4px 10px;border-bottom:1px solid #eceff2;text-align:right;white-space:nowrap}\n"
    "th{background:#f3f4f6;font-weight:600;white-space:normal;vertical-align:bottom}\n"
    "td:first-child,th:first-child{text-align:left}\n"
    "td.l,th.l{text-align:left}\n"
    "tr.sep td{background:#fafbfc;color:var(--muted);font-size:12px}\n"
    ".pass{color:var(--ok);font-weight:600} .fail{color:var(--bad);font-weight:600}\n"
    ".err{color:var(--bad)}\n"
    ".note{color:var(--muted);font-size:13px}\n"
    "details{margin-top:10px} details summary{cursor:pointer;color:var(--muted)}\n"
    ".two{display:flex;flex-wrap:wrap;gap:28px;align-items:flex-start}\n";

/* <head> with the style sheet, and the page header: title, what it shows, version. */
static void page_head(struct html_page *p, const struct report_docset *set,
                      const struct report_html_opts *opts)
{
    const char *title = opts && opts->title ? opts->title : "tokenstorm report";
    html_emit(p,
              "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
              "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>");
    html_esc(p, title);
    if (set->n == 1) {
        html_emit(p, " - ");
        html_esc(p, set->docs[0].name);
    }
    html_emitf(p, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<header><h1>", page_css);
    html_esc(p, title);
    html_emit(p, "</h1><div class=\"meta\">");
    size_t nres = report_docset_count(set, REPORT_DOC_RESULT);
    size_t nsw = report_docset_count(set, REPORT_DOC_SWEEP);
    size_t ntopo = report_docset_count(set, REPORT_DOC_TOPOLOGY);
    if (nres)
        html_emitf(p, "%zu run%s", nres, nres == 1 ? "" : "s");
    if (nsw)
        html_emitf(p, "%s%zu sweep%s", nres ? ", " : "", nsw, nsw == 1 ? "" : "s");
    if (ntopo)
        html_emitf(p, "%s%zu topolog%s", nres || nsw ? ", " : "", ntopo, ntopo == 1 ? "y" : "ies");
    html_emit(p, ": ");
    for (size_t i = 0; i < set->n; i++) {
        if (i)
            html_emit(p, ", ");
        html_esc(p, set->docs[i].name);
    }
    html_emitf(p, " &middot; tokenstorm %s", TS_VERSION);
    if (opts && opts->generated) {
        html_emit(p, " &middot; generated ");
        html_esc(p, opts->generated);
    }
    html_emit(p, "</div></header>\n");
}

/* The navigation bar to every section, and the opening of <main>. */
static void page_nav(struct html_page *p, const struct report_docset *set)
{
    size_t nres = report_docset_count(set, REPORT_DOC_RESULT);
    int run = 0, sweep = 0, topo = 0, mirror = 0;
    html_emit(p, "<nav>");
    if (nres)
        html_emit(p,
                  "<a href=\"#overview\">Overview</a><a href=\"#distributions\">Distributions</a>");
    for (size_t i = 0; i < set->n; i++) {
        const struct report_doc *d = &set->docs[i];
        if (d->kind == REPORT_DOC_SWEEP)
            html_emitf(p, "<a href=\"#sweep%d\">Sweep ", ++sweep);
        else if (d->kind == REPORT_DOC_TOPOLOGY)
            html_emitf(p, "<a href=\"#topo%d\">Topology ", ++topo);
        else if (d->kind == REPORT_DOC_MIRROR)
            html_emitf(p, "<a href=\"#mirror%d\">Mirror ", ++mirror);
        else
            html_emitf(p, "<a href=\"#run%d\">Run ", ++run);
        html_esc(p, d->name);
        html_emit(p, "</a>");
    }
    html_emit(p, "</nav>\n<main>\n");
}

/* ---- a mirror (proxy --mirror-out) ------------------------------------------------------------ */

/* One row of the mirror's table: a label and a number (or "-"). */
static void mirror_row(struct html_page *p, const char *label, double v, bool sign)
{
    html_emitf(p, "<tr><td class=\"l\">%s</td><td>", label);
    if (isfinite(v) && sign)
        html_emitf(p, "%+.3f", v);
    else if (isfinite(v))
        html_emitf(p, "%.3f", v);
    else
        html_emit(p, "-");
    html_emit(p, "</td></tr>\n");
}

/* The pairs of `proxy --mirror-out DIR` (DIR/mirror.json): what was mirrored
 * and compared, the errors on one side, the latency difference and how alike
 * the answers were; the two runs are sections of their own. */
static void mirror_section(struct html_page *p, const struct report_doc *d, int n)
{
    const json_t *o = d->doc, *e = json_object_get(o, "errors");
    const json_t *lat = json_object_get(o, "latency_diff_s"),
                 *sim = json_object_get(o, "similarity");
    html_emitf(p, "<section id=\"mirror%d\"><h2>Mirror: ", n);
    html_esc(p, d->name);
    html_emit(p, "</h2>\n<p class=\"sub\">Each sampled request was sent to the primary and the "
                 "mirror; the two runs are the sections <em>primary</em> and <em>mirror</em>.</p>\n"
                 "<div class=\"tablewrap\"><table class=\"num\">\n");
    html_emitf(p,
               "<tr><td class=\"l\">pairs sampled / mirrored / dropped / compared / cut</td>"
               "<td>%lld / %lld / %lld / %lld / %lld</td></tr>\n",
               report_json_int(o, "sampled"), report_json_int(o, "mirrored"),
               report_json_int(o, "dropped"), report_json_int(o, "compared"),
               report_json_int(o, "cut"));
    html_emitf(p,
               "<tr><td class=\"l\">errors on the primary only / the mirror only / both</td>"
               "<td>%lld / %lld / %lld</td></tr>\n",
               report_json_int(e, "primary_only"), report_json_int(e, "mirror_only"),
               report_json_int(e, "both"));
    mirror_row(p, "mean latency difference, mirror - primary (s)", report_json_num(lat, "mean"),
               true);
    mirror_row(p, "answer similarity, ROUGE-L F: mean", report_json_num(sim, "mean"), false);
    mirror_row(p, "answer similarity: min", report_json_num(sim, "min"), false);
    html_emitf(p, "<tr><td class=\"l\">pairs with text on both sides</td><td>%lld</td></tr>\n",
               report_json_int(sim, "count"));
    html_emit(p, "</table></div>\n</section>\n");
}

/* ---- the page ------------------------------------------------------------------------------- */

int report_html_build(const struct report_docset *set, const struct report_html_opts *opts,
                      struct buf *out)
{
    struct html_page p = {.out = out};

    if (!set->n)
        return -EINVAL;
    page_head(&p, set, opts);
    page_nav(&p, set);
    html_overview_section(&p, set);
    html_distributions_section(&p, set);
    for (size_t i = 0; i < set->n; i++)
        if (set->docs[i].kind == REPORT_DOC_SWEEP)
            html_sweep_section(&p, &set->docs[i]);
    for (size_t i = 0; i < set->n; i++)
        if (set->docs[i].kind == REPORT_DOC_RESULT)
            html_run_section(&p, &set->docs[i]);
    for (size_t i = 0, n = 0; i < set->n; i++)
        if (set->docs[i].kind == REPORT_DOC_MIRROR)
            mirror_section(&p, &set->docs[i], (int)++n);
    for (size_t i = 0; i < set->n; i++)
        if (set->docs[i].kind == REPORT_DOC_TOPOLOGY)
            html_topo_section(&p, &set->docs[i]);
    html_emit(&p,
              "</main>\n<footer style=\"text-align:center;color:#59636e;font-size:12px;"
              "padding:0 0 24px\">Made by <code>tokenstorm report</code>. Latencies are measured "
              "from each request's intended send time (coordinated omission corrected); see "
              "docs/METRICS.md for every definition.</footer>\n</body>\n</html>\n");
    html_page_release(&p);
    return p.rc;
}

/* ---- the live dashboard --------------------------------------------------------------------- */

int report_html_live_frame(const struct report_docset *set, struct buf *out)
{
    struct html_page p = {.out = out};

    if (!set->n)
        return -EINVAL;
    for (size_t i = 0; i < set->n; i++)
        if (set->docs[i].kind == REPORT_DOC_SWEEP)
            html_sweep_section(&p, &set->docs[i]);
    if (report_docset_count(set, REPORT_DOC_RESULT)) {
        html_overview_section(&p, set);
        html_distributions_section(&p, set);
    }
    for (size_t i = 0; i < set->n; i++)
        if (set->docs[i].kind == REPORT_DOC_RESULT)
            html_run_section(&p, &set->docs[i]);
    html_page_release(&p);
    return p.rc;
}

/* Replaces #frame on each "frame" event; "end" freezes it and says so; the
 * button posts the stop once. No other request, no external resource. */
static const char live_script[] =
    "const q=location.search,st=document.getElementById('status'),"
    "btn=document.getElementById('stop'),fr=document.getElementById('frame');\n"
    "const es=new EventSource(EVENTS+q);\n"
    "es.addEventListener('frame',e=>{fr.innerHTML=e.data;"
    "st.textContent='live: updated '+new Date().toLocaleTimeString();});\n"
    "es.addEventListener('end',e=>{fr.innerHTML=e.data;st.textContent='the run is over: "
    "final results';btn.disabled=true;es.close();});\n"
    "es.onerror=()=>{st.textContent='disconnected from the run';};\n"
    "const inn=document.getElementById('inner');\n"
    "es.addEventListener('inner',e=>{const p=e.data.trim();if(!p){inn.hidden=true;inn.innerHTML='';"
    "return;}const u=location.protocol+'//'+location.hostname+':'+p+'/'+q;"
    "const f=inn.querySelector('iframe');if(f&&f.dataset.port===p)return;"
    "inn.innerHTML='<h2>The running step, live</h2><p class=\"note\"><a></a></p>"
    "<iframe style=\"width:100%;height:1600px;border:1px solid #d1d9e0\"></iframe>';"
    "inn.querySelector('a').href=u;inn.querySelector('a').textContent=u;"
    "const g=inn.querySelector('iframe');g.dataset.port=p;g.src=u;inn.hidden=false;});\n"
    "btn.onclick=()=>{btn.disabled=true;fetch(STOP+q,{method:'POST'}).then(r=>{"
    "st.textContent=r.ok?'stopping: the results are being written':'stop refused: '+r.status;"
    "});};\n";

/* s as a JavaScript string literal (JSON, with '/' escaped so no "</script>" can close the tag). */
static void emit_js_string(struct html_page *p, const char *s)
{
    json_t *v = json_string(s);
    char *text = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_ESCAPE_SLASH) : NULL;

    if (text)
        html_emit(p, text);
    else if (!p->rc)
        p->rc = -ENOMEM;
    free(text);
    json_decref(v);
}

int report_html_live_page(const char *title, const char *frame, const char *events,
                          const char *stop, struct buf *out)
{
    struct html_page p = {.out = out};

    html_emit(&p, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                  "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                  "<title>");
    html_esc(&p, title);
    html_emitf(&p,
               "</title>\n<style>\n%s#stop{float:right;margin-top:-4px}</style>\n</head>\n"
               "<body>\n<header><button id=\"stop\" type=\"button\">Stop the run</button><h1>",
               page_css);
    html_esc(&p, title);
    html_emitf(&p,
               "</h1><div class=\"meta\"><span id=\"status\">live</span> &middot; tokenstorm "
               "%s</div></header>\n<main id=\"frame\">\n",
               TS_VERSION);
    html_emit(&p, frame);
    html_emit(&p, "</main>\n<section id=\"inner\" hidden></section>\n<script>\nconst EVENTS=");
    emit_js_string(&p, events);
    html_emit(&p, ",STOP=");
    emit_js_string(&p, stop);
    html_emitf(&p, ";\n%s</script>\n</body>\n</html>\n", live_script);
    html_page_release(&p);
    return p.rc;
}
