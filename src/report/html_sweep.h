/*
 * html_sweep.h - one sweep's section of the HTML report ("sweep<N>", N
 * counting the sweeps of the page from 1): the plan and target, headline
 * cards (knee, max goodput within the SLOs, critical load), the charts
 * (html_sweep_charts.h), the steps table and the interference table.
 */
#ifndef TS_REPORT_HTML_SWEEP_H
#define TS_REPORT_HTML_SWEEP_H

#include "report/docset.h"
#include "report/html_page.h"

/* Appends the section of sweep d, numbered ++p->nsweep. */
void html_sweep_section(struct html_page *p, const struct report_doc *d);

#endif
