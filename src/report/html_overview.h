/*
 * html_overview.h - the overview section of the HTML report ("overview"):
 * the headline cards of a single run, or a table comparing several runs
 * (id "runs-table", one colour per run as in the distribution charts).
 */
#ifndef TS_REPORT_HTML_OVERVIEW_H
#define TS_REPORT_HTML_OVERVIEW_H

#include "report/docset.h"
#include "report/html_page.h"

/* Appends the section for the runs of set; nothing when set has no run. */
void html_overview_section(struct html_page *p, const struct report_docset *set);

#endif
