#include "prom.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void prom_hist_init(struct prom_hist *h, const double *bounds, size_t nbounds)
{
    memset(h, 0, sizeof(*h));
    h->bounds = bounds;
    h->nbounds = nbounds > PROM_MAX_BUCKETS ? PROM_MAX_BUCKETS : nbounds;
}

void prom_hist_observe(struct prom_hist *h, double v)
{
    size_t i = 0;
    while (i < h->nbounds && v > h->bounds[i])
        i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

int prom_header(struct buf *out, const char *name, const char *help, const char *type)
{
    return buf_appendf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static int append_value(struct buf *out, double v)
{
    if (isnan(v))
        return buf_append_str(out, "NaN");
    if (isinf(v))
        return buf_append_str(out, v > 0 ? "+Inf" : "-Inf");
    if (v == (double)(int64_t)v && fabs(v) < 1e15)
        return buf_appendf(out, "%lld", (long long)v);
    return buf_appendf(out, "%.17g", v);
}

static int append_escaped(struct buf *out, const char *s)
{
    for (; *s; s++) {
        int rc;
        if (*s == '\\')
            rc = buf_append_str(out, "\\\\");
        else if (*s == '"')
            rc = buf_append_str(out, "\\\"");
        else if (*s == '\n')
            rc = buf_append_str(out, "\\n");
        else
            rc = buf_append_char(out, *s);
        if (rc)
            return rc;
    }
    return 0;
}

/* name{a="x",b="y"[,extra="v"]} */
static int append_series(struct buf *out, const char *name, const char *suffix,
                         const char *const *labels, size_t nlabels, const char *extra_name,
                         const char *extra_value)
{
    int rc = buf_appendf(out, "%s%s", name, suffix);
    if (rc || (!nlabels && !extra_name))
        return rc;
    if ((rc = buf_append_char(out, '{')))
        return rc;
    for (size_t i = 0; i < nlabels; i++) {
        if ((rc = buf_appendf(out, "%s%s=\"", i ? "," : "", labels[2 * i])) ||
            (rc = append_escaped(out, labels[2 * i + 1])) || (rc = buf_append_char(out, '"')))
            return rc;
    }
    if (extra_name) {
        if ((rc = buf_appendf(out, "%s%s=\"", nlabels ? "," : "", extra_name)) ||
            (rc = append_escaped(out, extra_value)) || (rc = buf_append_char(out, '"')))
            return rc;
    }
    return buf_append_char(out, '}');
}

int prom_metric(struct buf *out, const char *name, const char *help, const char *type, double value)
{
    int rc = prom_header(out, name, help, type);
    return rc ? rc : prom_sample(out, name, NULL, 0, value);
}

int prom_sample(struct buf *out, const char *name, const char *const *labels, size_t nlabels,
                double value)
{
    int rc;
    if ((rc = append_series(out, name, "", labels, nlabels, NULL, NULL)) ||
        (rc = buf_append_char(out, ' ')) || (rc = append_value(out, value)))
        return rc;
    return buf_append_char(out, '\n');
}

int prom_histogram(struct buf *out, const char *name, const char *const *labels, size_t nlabels,
                   const struct prom_hist *h)
{
    uint64_t cumulative = 0;
    char le[64];
    int rc;
    for (size_t i = 0; i <= h->nbounds; i++) {
        cumulative += h->counts[i];
        if (i < h->nbounds)
            snprintf(le, sizeof(le), "%g", h->bounds[i]);
        else
            snprintf(le, sizeof(le), "+Inf");
        if ((rc = append_series(out, name, "_bucket", labels, nlabels, "le", le)) ||
            (rc = buf_appendf(out, " %llu\n", (unsigned long long)cumulative)))
            return rc;
    }
    if ((rc = append_series(out, name, "_sum", labels, nlabels, NULL, NULL)) ||
        (rc = buf_append_char(out, ' ')) || (rc = append_value(out, h->sum)) ||
        (rc = buf_append_char(out, '\n')) ||
        (rc = append_series(out, name, "_count", labels, nlabels, NULL, NULL)) ||
        (rc = buf_appendf(out, " %llu\n", (unsigned long long)h->count)))
        return rc;
    return 0;
}
