/*
 * html_groups.c - tables of per-group summaries for the HTML report (see
 * html_groups.h).
 */
#include "report/html_groups.h"

#include <string.h>

#include "report/html_page.h"
#include "report/svg.h"

enum col_fmt { COL_COUNT, COL_RATE, COL_PER_S, COL_MS, COL_BOOL, COL_RAW };

static const struct {
    const char *key, *title;
    enum col_fmt fmt;
} known_cols[] = {
    {"requests", "requests", COL_COUNT},
    {"completed", "completed", COL_COUNT},
    {"failed", "failed", COL_COUNT},
    {"error_rate", "error rate", COL_RATE},
    {"request_throughput", "req/s", COL_PER_S},
    {"goodput_rps", "goodput req/s", COL_PER_S},
    {"ttft_p50_ms", "TTFT p50 (ms)", COL_MS},
    {"ttft_p99_ms", "TTFT p99 (ms)", COL_MS},
    {"tpot_p50_ms", "TPOT p50 (ms)", COL_MS},
    {"tpot_p99_ms", "TPOT p99 (ms)", COL_MS},
    {"itl_p99_ms", "ITL p99 (ms)", COL_MS},
    {"e2el_p50_ms", "E2EL p50 (ms)", COL_MS},
    {"e2el_p99_ms", "E2EL p99 (ms)", COL_MS},
    {"slo_pass", "SLO", COL_BOOL},
};

#define GROUP_COLS_MAX 16

/* One cell of the group table, v formatted as its column says (a missing value is "-"). */
static int group_cell(struct buf *b, const json_t *v, enum col_fmt fmt)
{
    char buf[64];
    const char *text = NULL;
    const char *cls = "";

    if (!v || json_is_null(v)) {
        text = "-";
    } else if (fmt == COL_BOOL && json_is_boolean(v)) {
        text = json_is_true(v) ? "pass" : "FAIL";
        cls = json_is_true(v) ? " class=\"pass\"" : " class=\"fail\"";
    } else if (json_is_number(v)) {
        double x = json_number_value(v);
        switch (fmt) {
        case COL_RATE:
            text = html_fmt_pct(x, buf, sizeof(buf));
            break;
        case COL_PER_S:
            text = html_fmt_num(x, 2, buf, sizeof(buf));
            break;
        case COL_MS:
            text = html_fmt_ms(x, buf, sizeof(buf));
            break;
        default:
            text = html_fmt_scalar(v, buf, sizeof(buf));
        }
    } else {
        text = html_fmt_scalar(v, buf, sizeof(buf));
    }
    if (!text)
        text = "";
    int rc = buf_appendf(b, "<td%s>", cls);
    rc = rc ? rc : svg_escape(b, text);
    return rc ? rc : buf_append_str(b, "</td>");
}

int report_html_group_table(struct buf *out, const char *id, const char *title,
                            const json_t *groups)
{
    const char *cols[GROUP_COLS_MAX];
    enum col_fmt fmts[GROUP_COLS_MAX];
    size_t ncols = 0;
    const char *gname, *key;
    const json_t *g, *v;
    int rc;

    if (!json_is_object(groups) || json_object_size(groups) == 0)
        return 0;
    /* Known keys first, in their order, when any group has them. */
    for (size_t k = 0; k < sizeof(known_cols) / sizeof(known_cols[0]); k++) {
        json_object_foreach((json_t *)groups, gname, g)
        {
            if (json_is_object(g) && json_object_get(g, known_cols[k].key) &&
                ncols < GROUP_COLS_MAX) {
                cols[ncols] = known_cols[k].key;
                fmts[ncols++] = known_cols[k].fmt;
                break;
            }
        }
    }
    json_object_foreach((json_t *)groups, gname, g)
    {
        if (!json_is_object(g))
            continue;
        json_object_foreach((json_t *)g, key, v)
        {
            bool seen = false;
            if (json_is_object(v) || json_is_array(v))
                continue;
            for (size_t i = 0; i < ncols && !seen; i++)
                seen = !strcmp(cols[i], key);
            if (!seen && ncols < GROUP_COLS_MAX) {
                cols[ncols] = key;
                fmts[ncols++] = COL_RAW;
            }
        }
    }
    rc = buf_append_str(out, "<div class=\"tablewrap\"><table class=\"groups\"");
    if (!rc && id) {
        rc = buf_append_str(out, " id=\"");
        rc = rc ? rc : svg_escape(out, id);
        rc = rc ? rc : buf_append_char(out, '"');
    }
    rc = rc ? rc : buf_append_char(out, '>');
    if (!rc && title) {
        rc = buf_append_str(out, "<caption>");
        rc = rc ? rc : svg_escape(out, title);
        rc = rc ? rc : buf_append_str(out, "</caption>");
    }
    rc = rc ? rc : buf_append_str(out, "<tr><th>group</th>");
    for (size_t i = 0; !rc && i < ncols; i++) {
        const char *t = cols[i];
        for (size_t k = 0; k < sizeof(known_cols) / sizeof(known_cols[0]); k++)
            if (!strcmp(known_cols[k].key, cols[i]))
                t = known_cols[k].title;
        rc = buf_append_str(out, "<th>");
        rc = rc ? rc : svg_escape(out, t);
        rc = rc ? rc : buf_append_str(out, "</th>");
    }
    rc = rc ? rc : buf_append_str(out, "</tr>\n");
    json_object_foreach((json_t *)groups, gname, g)
    {
        if (rc)
            break;
        rc = buf_append_str(out, "<tr><td>");
        rc = rc ? rc : svg_escape(out, gname);
        rc = rc ? rc : buf_append_str(out, "</td>");
        for (size_t i = 0; !rc && i < ncols; i++)
            rc = group_cell(out, json_is_object(g) ? json_object_get(g, cols[i]) : NULL, fmts[i]);
        rc = rc ? rc : buf_append_str(out, "</tr>\n");
    }
    return rc ? rc : buf_append_str(out, "</table></div>\n");
}
