/*
 * html_run.h - one run's section of the HTML report ("run<N>", N counting
 * the runs of the page from 1): run description, SLO verdicts, latency
 * table, timeline charts and ITL heatmap (html_run_charts.h), outcomes, HTTP
 * status classes, tokens and streams, answer quality, group tables
 * (html_groups.h) and the run configuration.
 */
#ifndef TS_REPORT_HTML_RUN_H
#define TS_REPORT_HTML_RUN_H

#include "report/docset.h"
#include "report/html_page.h"

/* Appends the section of result d, numbered ++p->nrun. */
void html_run_section(struct html_page *p, const struct report_doc *d);

#endif
