/*
 * docset.c - finding and checking the inputs of `tokenstorm report` (see docset.h).
 */
#include "report/docset.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/file.h"
#include "base/log.h"
#include "report/recover.h"
#include "report/result.h"

#define SCAN_MAX 4096 /* directory entries looked at in one directory */

/* ---- lenient getters ---------------------------------------------------------- */

double report_json_num(const json_t *obj, const char *key)
{
    const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    return json_is_number(v) ? json_number_value(v) : NAN;
}

long long report_json_int(const json_t *obj, const char *key)
{
    const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    return json_is_integer(v) ? (long long)json_integer_value(v) : 0;
}

const char *report_json_str(const json_t *obj, const char *key)
{
    const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

const json_t *report_json_obj(const json_t *obj, const char *key)
{
    const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    return json_is_object(v) ? v : NULL;
}

const json_t *report_json_arr(const json_t *obj, const char *key)
{
    const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    return json_is_array(v) ? v : NULL;
}

/* ---- the set ------------------------------------------------------------------------ */

void report_docset_init(struct report_docset *set)
{
    set->docs = NULL;
    set->n = 0;
}

static void doc_release(struct report_doc *d)
{
    for (size_t i = 0; i < d->nsteps; i++)
        doc_release(&d->steps[i]);
    ts_free(d->steps);
    run_stats_free(d->stats);
    if (d->topo)
        topo_release(d->topo);
    ts_free(d->topo);
    json_decref(d->doc);
    ts_free(d->name);
    ts_free(d->path);
    memset(d, 0, sizeof(*d));
}

void report_docset_release(struct report_docset *set)
{
    for (size_t i = 0; i < set->n; i++)
        doc_release(&set->docs[i]);
    ts_free(set->docs);
    report_docset_init(set);
}

size_t report_docset_count(const struct report_docset *set, enum report_doc_kind k)
{
    size_t n = 0;
    for (size_t i = 0; i < set->n; i++)
        n += set->docs[i].kind == k;
    return n;
}

/* ---- loading one document --------------------------------------------------------------- */

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Reads and parses path into *out; 0 or an error with "path: reason" in err. */
static int load_json_file(const char *path, json_t **out, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    json_error_t je;
    int rc = file_read_all(path, REPORT_FILE_MAX, &text, &len, err, errlen);

    if (rc)
        return rc;
    *out = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    ts_free(text);
    if (!*out) {
        ts_errf(err, errlen, "%s: not valid JSON: line %d column %d: %s", path, je.line, je.column,
                je.text);
        return TS_PARSE;
    }
    return 0;
}

/* Fills a run from its result document (a new reference is taken). */
static int doc_load_result(struct report_doc *d, json_t *doc, const char *path, char *err,
                           size_t errlen)
{
    char why[256];
    const json_t *sum = report_json_obj(doc, "summary");
    const json_t *tl = json_object_get(doc, "timeline");
    int rc;

    if (!sum) {
        ts_errf(err, errlen, "%s: result has no \"summary\" object", path);
        return TS_PARSE;
    }
    if (tl && !json_is_array(tl)) {
        ts_errf(err, errlen, "%s: result \"timeline\" is not an array", path);
        return TS_PARSE;
    }
    rc = result_read_stats(doc, &d->stats, why, sizeof(why));
    if (rc) {
        ts_errf(err, errlen, "%s: %s", path, rc == -ENOMEM ? "out of memory" : why);
        return rc;
    }
    const json_t *gc = report_json_obj(sum, "goodput_config");
    struct goodput_cfg g = {0};
    if (gc) {
        double v;
        g.ttft_ms = (v = report_json_num(gc, "ttft_ms")) > 0 ? v : 0;
        g.tpot_ms = (v = report_json_num(gc, "tpot_ms")) > 0 ? v : 0;
        g.e2el_ms = (v = report_json_num(gc, "e2el_ms")) > 0 ? v : 0;
    }
    double dur = report_json_num(sum, "duration"),
           peak = report_json_num(sum, "max_output_tokens_per_s");
    run_summary_compute(&d->sum, d->stats, isfinite(dur) ? dur : 0, isfinite(peak) ? peak : 0, &g);
    run_summary_set_window(&d->sum, tl, report_json_num(report_json_obj(doc, "run"), "warmup_s"),
                           report_json_num(report_json_obj(sum, "window"), "send_end_s"));
    json_incref(doc);
    d->doc = doc;
    d->kind = REPORT_DOC_RESULT;
    return 0;
}

/* A topology.json: its graph read back and checked (analysis/topo.h). */
static int doc_load_topology(struct report_doc *d, json_t *doc, const char *path, char *err,
                             size_t errlen)
{
    char why[512];
    int rc;

    if (!(d->topo = ts_calloc(1, sizeof(*d->topo)))) {
        ts_errf(err, errlen, "%s: out of memory", path);
        return -ENOMEM;
    }
    topo_init(d->topo);
    if ((rc = topo_from_json(d->topo, doc, why, sizeof(why)))) {
        ts_errf(err, errlen, "%s: %s", path, why);
        return rc;
    }
    json_incref(doc);
    d->doc = doc;
    d->kind = REPORT_DOC_TOPOLOGY;
    return 0;
}

/* The mirror.json of `proxy --mirror-out`: its counts must be whole numbers
 * and its histograms objects (or null), so that what is drawn is what the
 * proxy wrote. */
static int doc_load_mirror(struct report_doc *d, json_t *doc, const char *path, char *err,
                           size_t errlen)
{
    static const char *const counts[] = {"sampled", "mirrored", "dropped", "compared", "cut"};
    static const char *const hists[] = {"latency_diff_s", "similarity"};
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        const json_t *v = json_object_get(doc, counts[i]);
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            ts_errf(err, errlen, "%s: %s: expected a count (a whole number >= 0)", path, counts[i]);
            return TS_PARSE;
        }
    }
    for (size_t i = 0; i < sizeof(hists) / sizeof(hists[0]); i++) {
        const json_t *v = json_object_get(doc, hists[i]);
        if (v && !json_is_object(v) && !json_is_null(v)) {
            ts_errf(err, errlen, "%s: %s: expected an object or null", path, hists[i]);
            return TS_PARSE;
        }
    }
    const json_t *e = json_object_get(doc, "errors");
    if (e && !json_is_object(e)) {
        ts_errf(err, errlen, "%s: errors: expected an object", path);
        return TS_PARSE;
    }
    json_incref(doc);
    d->doc = doc;
    d->kind = REPORT_DOC_MIRROR;
    return 0;
}

/* A step directory name must stay inside the sweep's directory. */
static bool safe_dir_name(const char *s)
{
    return s && *s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

static int doc_load_sweep(struct report_doc *d, json_t *doc, const char *path, const char *dir,
                          char *err, size_t errlen)
{
    const json_t *steps = report_json_arr(doc, "steps");
    size_t n;

    if (!steps) {
        ts_errf(err, errlen, "%s: sweep has no \"steps\" array", path);
        return TS_PARSE;
    }
    n = json_array_size(steps);
    if (n > REPORT_STEPS_MAX) {
        ts_errf(err, errlen, "%s: sweep has %zu steps (at most %d)", path, n, REPORT_STEPS_MAX);
        return TS_TOOBIG;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *st = json_array_get(steps, i);
        if (!json_is_object(st) || !isfinite(report_json_num(st, "load"))) {
            ts_errf(err, errlen, "%s: sweep step %zu is not an object with a numeric \"load\"",
                    path, i + 1);
            return TS_PARSE;
        }
        const json_t *sd = json_object_get(st, "dir");
        if (sd && !json_is_null(sd) && !safe_dir_name(json_string_value(sd))) {
            ts_errf(err, errlen, "%s: sweep step %zu: \"dir\" must be a plain directory name", path,
                    i + 1);
            return TS_PARSE;
        }
    }
    json_incref(doc);
    d->doc = doc;
    d->kind = REPORT_DOC_SWEEP;
    if (n && !(d->steps = ts_calloc(n, sizeof(*d->steps)))) {
        ts_errf(err, errlen, "%s: out of memory", path);
        return -ENOMEM;
    }
    d->nsteps = n;
    for (size_t i = 0; dir && i < n; i++) {
        const char *sd = report_json_str(json_array_get(steps, i), "dir");
        char file[PATH_MAX];
        json_t *sdoc = NULL;
        int rc;

        d->steps[i].kind = REPORT_DOC_RESULT;
        if (!sd ||
            (size_t)snprintf(file, sizeof(file), "%s/%s/result.json", dir, sd) >= sizeof(file) ||
            !is_file(file))
            continue;
        if ((rc = load_json_file(file, &sdoc, err, errlen)))
            return rc;
        if (!json_is_object(sdoc) ||
            strcmp(report_json_str(sdoc, "schema") ? report_json_str(sdoc, "schema") : "",
                   RESULT_SCHEMA)) {
            json_decref(sdoc);
            ts_errf(err, errlen, "%s: not a " RESULT_SCHEMA " document", file);
            return TS_PARSE;
        }
        rc = doc_load_result(&d->steps[i], sdoc, file, err, errlen);
        json_decref(sdoc);
        if (rc)
            return rc;
        d->steps[i].name = ts_strdup(sd);
        d->steps[i].path = ts_strdup(file);
        if (!d->steps[i].name || !d->steps[i].path) {
            ts_errf(err, errlen, "%s: out of memory", file);
            return -ENOMEM;
        }
    }
    return 0;
}

/* name, or name#2, #3 ... when the set has it already. */
static char *unique_name(const struct report_docset *set, const char *name)
{
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", name);
    for (int k = 2; k < 100000; k++) {
        bool taken = false;
        for (size_t i = 0; i < set->n && !taken; i++)
            taken = !strcmp(set->docs[i].name, buf);
        if (!taken)
            break;
        snprintf(buf, sizeof(buf), "%.490s#%d", name, k);
    }
    return ts_strdup(buf);
}

int report_docset_add_json(struct report_docset *set, json_t *doc, const char *name,
                           const char *path, const char *dir, char *err, size_t errlen)
{
    const char *schema = report_json_str(doc, "schema");
    struct report_doc d;
    int rc;

    memset(&d, 0, sizeof(d));
    if (set->n >= REPORT_DOCS_MAX) {
        ts_errf(err, errlen, "%s: too many inputs (at most %d)", path, REPORT_DOCS_MAX);
        return TS_TOOBIG;
    }
    if (!json_is_object(doc)) {
        ts_errf(err, errlen, "%s: not a JSON object", path);
        return TS_PARSE;
    }
    if (schema && !strcmp(schema, RESULT_SCHEMA)) {
        rc = doc_load_result(&d, doc, path, err, errlen);
    } else if (schema && !strcmp(schema, REPORT_SWEEP_SCHEMA)) {
        rc = doc_load_sweep(&d, doc, path, dir, err, errlen);
    } else if (schema && !strcmp(schema, REPORT_MIRROR_SCHEMA)) {
        rc = doc_load_mirror(&d, doc, path, err, errlen);
    } else if (!schema && json_object_get(doc, "tokenstorm_topology")) {
        rc = doc_load_topology(&d, doc, path, err, errlen);
    } else {
        ts_errf(err, errlen,
                "%s: not a tokenstorm result, sweep, mirror or topology (schema %s%.60s%s; "
                "expected \"" RESULT_SCHEMA "\", \"" REPORT_SWEEP_SCHEMA
                "\" or \"" REPORT_MIRROR_SCHEMA "\", or \"tokenstorm_topology\": 1)",
                path, schema ? "\"" : "", schema ? schema : "missing", schema ? "\"" : "");
        rc = TS_PARSE;
    }
    if (!rc) {
        d.name = unique_name(set, name);
        d.path = ts_strdup(path);
        if (!d.name || !d.path) {
            ts_errf(err, errlen, "%s: out of memory", path);
            rc = -ENOMEM;
        }
    }
    struct report_doc *grown = rc ? NULL : ts_realloc(set->docs, (set->n + 1) * sizeof(*grown));
    if (!rc && !grown) {
        ts_errf(err, errlen, "%s: out of memory", path);
        rc = -ENOMEM;
    }
    if (rc) {
        doc_release(&d);
        return rc;
    }
    set->docs = grown;
    set->docs[set->n++] = d;
    return 0;
}

/* The last component of path, without trailing slashes, into buf. "." and "" use the cwd's name. */
static void base_name(const char *path, char *buf, size_t n)
{
    char tmp[PATH_MAX];
    size_t len = strlen(path);

    while (len > 1 && path[len - 1] == '/')
        len--;
    snprintf(tmp, sizeof(tmp), "%.*s", (int)len, path);
    if (!strcmp(tmp, ".") || !strcmp(tmp, "..") || !*tmp) {
        char real[PATH_MAX];
        if (realpath(*tmp ? tmp : ".", real))
            snprintf(tmp, sizeof(tmp), "%s", real);
    }
    const char *slash = strrchr(tmp, '/');
    const char *base = slash && slash[1] ? slash + 1 : tmp;
    size_t blen = strlen(base);
    if (blen >= n)
        blen = n - 1;
    memcpy(buf, base, blen);
    buf[blen] = '\0';
}

/* Loads one file; dir is its directory, name_hint the name to give it. */
static int add_file(struct report_docset *set, const char *file, const char *dir, const char *name,
                    char *err, size_t errlen)
{
    json_t *doc = NULL;
    int rc = load_json_file(file, &doc, err, errlen);
    if (rc)
        return rc;
    rc = report_docset_add_json(set, doc, name, file, dir, err, errlen);
    json_decref(doc);
    return rc;
}

/* A run that never finished: its result rebuilt from latency.hlog and requests.jsonl. */
static int add_recovered(struct report_docset *set, const char *dir, const char *name, char *err,
                         size_t errlen)
{
    json_t *doc = NULL;
    int rc = recover_result(dir, &doc, err, errlen);
    if (rc)
        return rc;
    rc = report_docset_add_json(set, doc, name, dir, dir, err, errlen);
    json_decref(doc);
    return rc;
}

/* A directory's result.json or sweep.json (or a run to recover); 1 when it held neither. */
static int add_run_or_sweep(struct report_docset *set, const char *dir, const char *name, char *err,
                            size_t errlen)
{
    static const char *const names[2] = {"result.json", "sweep.json"};
    char file[PATH_MAX];

    for (int i = 0; i < 2; i++) {
        if ((size_t)snprintf(file, sizeof(file), "%s/%s", dir, names[i]) >= sizeof(file))
            continue;
        if (is_file(file))
            return add_file(set, file, dir, name, err, errlen);
    }
    if (recover_possible(dir))
        return add_recovered(set, dir, name, err, errlen);
    return 1;
}

/* A directory holding result.json or sweep.json (or a run to recover), and/or
 * topology.json; 1 when it held none. */
static int add_run_dir(struct report_docset *set, const char *dir, char *err, size_t errlen)
{
    char file[PATH_MAX], name[256];

    base_name(dir, name, sizeof(name));
    int rc = add_run_or_sweep(set, dir, name, err, errlen);
    if (rc < 0 || (size_t)snprintf(file, sizeof(file), "%s/topology.json", dir) >= sizeof(file) ||
        !is_file(file))
        return rc;
    return add_file(set, file, dir, name, err, errlen);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Each subdirectory of dir that is a run or sweep directory, in name order. */
static int add_parent_dir(struct report_docset *set, const char *dir, char *err, size_t errlen)
{
    DIR *dp = opendir(dir);
    char **names = NULL;
    size_t n = 0, found = 0;
    int rc = 0;

    if (!dp) {
        ts_errf(err, errlen, "%s: %s", dir, strerror(errno));
        return -errno;
    }
    if (!(names = ts_calloc(SCAN_MAX, sizeof(*names)))) {
        closedir(dp);
        ts_errf(err, errlen, "%s: out of memory", dir);
        return -ENOMEM;
    }
    for (struct dirent *e; n < SCAN_MAX && (e = readdir(dp));) {
        if (e->d_name[0] == '.')
            continue;
        if (!(names[n] = ts_strdup(e->d_name))) {
            rc = -ENOMEM;
            ts_errf(err, errlen, "%s: out of memory", dir);
            break;
        }
        n++;
    }
    closedir(dp);
    qsort(names, n, sizeof(*names), cmp_str);
    for (size_t i = 0; !rc && i < n; i++) {
        char sub[PATH_MAX];
        if ((size_t)snprintf(sub, sizeof(sub), "%s/%s", dir, names[i]) >= sizeof(sub) ||
            !is_dir(sub))
            continue;
        rc = add_run_dir(set, sub, err, errlen);
        if (rc == -EBUSY) { /* a run still going on: the others are reported */
            ts_warn("%s", err);
            rc = 1;
        }
        if (rc == 1)
            rc = 0;
        else if (rc == 0)
            found++;
    }
    for (size_t i = 0; i < n; i++)
        ts_free(names[i]);
    ts_free(names);
    char file[PATH_MAX], name[256];
    if (!rc && (size_t)snprintf(file, sizeof(file), "%s/mirror.json", dir) < sizeof(file) &&
        is_file(file)) { /* proxy --mirror-out DIR: the pairs beside DIR/primary and DIR/mirror */
        base_name(dir, name, sizeof(name));
        rc = add_file(set, file, dir, name, err, errlen);
        found += rc == 0;
    }
    if (!rc && !found) {
        ts_errf(err, errlen,
                "%s: no result.json, sweep.json or topology.json in it or in its subdirectories",
                dir);
        rc = -ENOENT;
    }
    return rc;
}

int report_docset_add_path(struct report_docset *set, const char *path, char *err, size_t errlen)
{
    size_t before = set->n;
    int rc;

    if (is_dir(path)) {
        rc = add_run_dir(set, path, err, errlen);
        if (rc == 1)
            rc = add_parent_dir(set, path, err, errlen);
    } else {
        char dir[PATH_MAX], name[256];
        const char *slash = strrchr(path, '/');
        const char *file = slash ? slash + 1 : path;
        snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
        if (slash == path)
            snprintf(dir, sizeof(dir), "/");
        if (!strcmp(file, "result.json") || !strcmp(file, "sweep.json") ||
            !strcmp(file, "topology.json")) {
            base_name(dir, name, sizeof(name));
        } else {
            size_t len = strlen(file);
            if (len > 5 && !strcmp(file + len - 5, ".json"))
                len -= 5;
            snprintf(name, sizeof(name), "%.*s", (int)len, file);
        }
        rc = add_file(set, path, dir, name, err, errlen);
    }
    if (rc) {
        while (set->n > before)
            doc_release(&set->docs[--set->n]);
    }
    return rc;
}
