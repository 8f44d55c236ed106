/*
 * suggest.c - `tokenstorm chaos suggest` (suggest.h): the topology's traits,
 * the ranking of the fault modes, the experiment files.
 */
#include "app/suggest.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/file.h"
#include "base/tsjson.h"
#include "chaos/faultmodes.h"

#define REASON_MAX 1024

struct pick {
    const struct fault_mode *m;
    double score, coverage;
    bool flagged;
    double over_ms; /* the shortest timeout in the hit layer, 0: none */
    char reason[REASON_MAX];
};

static const char *jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* "LABEL (file:line)" of a node. */
static void node_name(json_t *n, char *out, size_t cap)
{
    json_t *line = json_object_get(n, "line");
    if (*jstr(n, "file") && json_is_integer(line))
        snprintf(out, cap, "%s %s (%s:%lld)", jstr(n, "kind"), jstr(n, "label"), jstr(n, "file"),
                 (long long)json_integer_value(line));
    else
        snprintf(out, cap, "%s %s", jstr(n, "kind"), jstr(n, "label"));
}

static bool node_trait(json_t *n, const char *trait)
{
    if (!strcmp(trait, "streaming"))
        return json_is_true(json_object_get(n, "streaming"));
    if (!strcmp(trait, "retries"))
        return json_integer_value(json_object_get(n, "max_retries")) > 0 ||
               json_integer_value(json_object_get(n, "retry_attempts")) > 1;
    if (!strcmp(trait, "tools"))
        return !strcmp(jstr(n, "kind"), "tool");
    if (!strcmp(trait, "rag"))
        return !strcmp(jstr(n, "layer"), "vector");
    if (!strcmp(trait, "errors"))
        return json_number_value(json_object_get(n, "error_rate")) > 0;
    return false;
}

/* Traits only a run's result can show (docs/CHAOS.md "Ranking"). */
static const char *const result_only[] = {"rate_limited", "server_errors", "timeouts", "truncated",
                                          "kv_pressure",  "tenants",       NULL};

static bool is_result_only(const char *trait)
{
    for (const char *const *p = result_only; *p; p++)
        if (!strcmp(trait, *p))
            return true;
    return false;
}

static double num_at(json_t *o, const char *a, const char *b)
{
    return json_number_value(json_object_get(json_object_get(o, a), b));
}

/* A trait shown by result.json; what shows it into why. */
static bool result_holds(json_t *res, const char *trait, char *why, size_t cap)
{
    double n = 0;
    const char *what = NULL;
    if (!strcmp(trait, "streaming") &&
        json_is_true(json_object_get(json_object_get(res, "run"), "stream")))
        return snprintf(why, cap, "the run streamed its answers"), true;
    if (!strcmp(trait, "rate_limited"))
        n = num_at(res, "outcomes", "http_429"), what = "HTTP 429 answers";
    else if (!strcmp(trait, "server_errors"))
        n = num_at(res, "outcomes", "http_5xx"), what = "HTTP 5xx answers";
    else if (!strcmp(trait, "truncated"))
        n = num_at(res, "outcomes", "truncated"), what = "truncated streams";
    else if (!strcmp(trait, "errors"))
        n = num_at(res, "summary", "failed"), what = "failed requests";
    else if (!strcmp(trait, "timeouts")) {
        static const char *k[] = {"timeout_connect", "timeout_ttfb", "timeout_idle",
                                  "timeout_total"};
        for (int i = 0; i < 4; i++)
            n += num_at(res, "outcomes", k[i]);
        what = "timed-out requests";
    } else if (!strcmp(trait, "tenants")) {
        json_t *t = json_object_get(res, "by_tenant");
        n = json_is_object(t) ? (double)json_object_size(t) : 0;
        what = "tenants";
    } else if (!strcmp(trait, "kv_pressure")) {
        size_t i;
        json_t *s;
        double kv = 0, pre = 0;
        json_array_foreach(json_object_get(res, "server_timeline"), i, s)
        {
            kv = fmax(kv, json_number_value(json_object_get(s, "kv_usage")));
            pre = fmax(pre, json_number_value(json_object_get(s, "preemptions_total")));
        }
        if (kv >= 0.8 || pre > 0)
            return snprintf(why, cap, "the server's KV cache reached %.0f%% with %.0f preemptions",
                            kv * 100, pre),
                   true;
        return false;
    }
    if (!what || !(n > 0))
        return false;
    snprintf(why, cap, "the run saw %.0f %s", n, what);
    return true;
}

/* Whether the precondition holds; what shows it into why. */
static bool holds(json_t *topo, json_t *res, const char *when, char *why, size_t cap)
{
    const char *arg = strchr(when, ':') + 1;
    size_t i;
    json_t *x;
    char name[256];
    if (res && !strncmp(when, "trait:", 6) && result_holds(res, arg, why, cap))
        return true;
    if (!topo)
        return false;
    if (!strncmp(when, "flag:", 5)) {
        json_array_foreach(json_object_get(topo, "flags"), i, x) if (!strcmp(jstr(x, "kind"), arg))
        {
            snprintf(why, cap, "%s", jstr(x, "message"));
            return true;
        }
        return false;
    }
    json_array_foreach(json_object_get(topo, "nodes"), i, x)
    {
        bool ok = !strncmp(when, "kind:", 5)    ? !strcmp(jstr(x, "kind"), arg)
                  : !strncmp(when, "layer:", 6) ? !strcmp(jstr(x, "layer"), arg)
                                                : node_trait(x, arg);
        if (!ok)
            continue;
        node_name(x, name, sizeof(name));
        if (!strncmp(when, "kind:", 5))
            snprintf(why, cap, "the chain has %s", name);
        else if (!strncmp(when, "layer:", 6))
            snprintf(why, cap, "%s is in the %s layer", name, arg);
        else
            snprintf(why, cap, "%s: %s", name, arg);
        return true;
    }
    return false;
}

/* The shortest timeout (ms) written for a node of layer, or on an edge into one. */
static double shortest_timeout(json_t *topo, const char *layer)
{
    double best = 0;
    size_t i;
    json_t *x;
    json_t *nodes = json_object_get(topo, "nodes");
    json_array_foreach(nodes, i, x)
    {
        double t = json_number_value(json_object_get(x, "timeout_ms"));
        if (!strcmp(jstr(x, "layer"), layer) && t > 0 && (best == 0 || t < best))
            best = t;
    }
    json_array_foreach(json_object_get(topo, "edges"), i, x)
    {
        double t = json_number_value(json_object_get(x, "timeout_ms"));
        size_t k;
        json_t *n;
        json_array_foreach(nodes, k, n) if (t > 0 && !strcmp(jstr(n, "id"), jstr(x, "to")) &&
                                            !strcmp(jstr(n, "layer"), layer) &&
                                            (best == 0 || t < best)) best = t;
    }
    return best;
}

/* Whether the sources given can show the precondition at all. */
static bool checkable(json_t *topo, json_t *res, const char *when)
{
    if (!strncmp(when, "trait:", 6)) {
        const char *t = when + 6;
        bool by_result = is_result_only(t) || !strcmp(t, "streaming") || !strcmp(t, "errors");
        return (res && by_result) || (topo && !is_result_only(t));
    }
    return topo != NULL;
}

/* A risk flag, or a failure the run saw: concrete evidence (suggest.h). */
static bool evidence(const char *when)
{
    return !strncmp(when, "flag:", 5) ||
           (!strncmp(when, "trait:", 6) && is_result_only(when + 6) && strcmp(when + 6, "tenants"));
}

/* Scores one mode; false when none of its preconditions holds. Coverage
 * counts only the preconditions the sources given can show. */
static bool score_mode(json_t *topo, json_t *res, const struct fault_mode *m, struct pick *p)
{
    memset(p, 0, sizeof(*p));
    p->m = m;
    size_t matched = 0, o = 0, checked = 0;
    for (size_t i = 0; i < m->n_when; i++) {
        char why[400];
        checked += checkable(topo, res, m->when[i]);
        if (!holds(topo, res, m->when[i], why, sizeof(why)))
            continue;
        matched++;
        p->flagged |= evidence(m->when[i]);
        if (o < sizeof(p->reason) - 1)
            o += (size_t)snprintf(p->reason + o, sizeof(p->reason) - o, "%s%s", o ? "; " : "", why);
    }
    if (!matched)
        return false;
    p->coverage = (double)matched / (double)(checked ? checked : 1);
    p->score = m->risk * (0.4 + 0.6 * p->coverage) * (p->flagged ? 1.5 : 1.0);
    if (p->score > 1)
        p->score = 1;
    p->over_ms = topo ? shortest_timeout(topo, m->hits) : 0;
    return true;
}

/* Greedy picks spread over the fault layers (suggest.h). Returns how many. */
static size_t rank(struct pick *all, size_t n, size_t max, struct pick *out)
{
    size_t k = 0;
    bool *used = ts_calloc(n ? n : 1, sizeof(bool));
    if (!used)
        return 0;
    while (k < max) {
        size_t best = SIZE_MAX;
        double best_w = -1;
        for (size_t i = 0; i < n; i++) {
            if (used[i])
                continue;
            size_t same = 0;
            for (size_t j = 0; j < k; j++)
                same += !strcmp(out[j].m->layer, all[i].m->layer);
            double w = all[i].score * pow(0.7, (double)same);
            if (w > best_w + 1e-12) {
                best_w = w;
                best = i;
            }
        }
        if (best == SIZE_MAX)
            break;
        used[best] = true;
        out[k++] = all[best];
    }
    ts_free(used);
    return k;
}

static void fmt_dur(uint64_t ns, char *out, size_t cap)
{
    if (ns % 1000000000ull == 0)
        snprintf(out, cap, "%llus", (unsigned long long)(ns / 1000000000ull));
    else
        snprintf(out, cap, "%llums", (unsigned long long)(ns / 1000000ull));
}

static int yaml_str(struct buf *b, const char *s)
{
    json_t *j = json_string(s);
    char *q = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    int rc = q ? buf_append_str(b, q) : -ENOMEM;
    free(q);
    json_decref(j);
    return rc;
}

/* A comment block: text cut into lines, each "# ". */
static int comment(struct buf *b, const char *head, const char *text)
{
    int rc = buf_appendf(b, "# %s", head);
    size_t col = strlen(head) + 2;
    for (const char *p = text; *p && !rc; p++) {
        char c = *p == '\n' || *p == '\r' ? ' ' : *p;
        if (col > 90 && c == ' ') {
            rc = buf_append_str(b, "\n#   ");
            col = 4;
            continue;
        }
        rc = buf_append_char(b, c);
        col++;
    }
    return rc ? rc : buf_append_char(b, '\n');
}

static int write_header(struct buf *b, const struct pick *p, size_t rank_i, size_t n)
{
    const struct fault_mode *m = p->m;
    int rc =
        buf_appendf(b,
                    "# Suggested by tokenstorm chaos suggest: rank %zu of %zu, score %.2f "
                    "(risk %.1f, coverage %.2f%s)\n",
                    rank_i, n, p->score, m->risk, p->coverage, p->flagged ? ", a risk flag" : "");
    rc |= buf_appendf(b, "# Fault mode: %s (%s layer, hits the %s layer; from %s)\n", m->id,
                      m->layer, m->hits, m->source);
    rc |= buf_append_str(b, "# Symptoms:");
    for (size_t i = 0; i < m->n_symptoms; i++)
        rc |= buf_appendf(b, " %s", m->symptoms[i]);
    rc |= buf_append_char(b, '\n');
    rc |= comment(b, "Why: ", p->reason);
    return rc;
}

static int write_experiment(struct buf *b, const struct suggest_opts *o, const struct pick *p,
                            size_t rank_i, size_t n)
{
    const struct fault_mode *m = p->m;
    char delay[32], at[24], dur[24], total[24], title[320], desc[512];
    json_t *spec = fault_mode_spec(m, p->over_ms, delay, sizeof(delay));
    if (!spec)
        return -ENOMEM;
    char *fault = json_dumps(spec, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(spec);
    if (!fault)
        return -ENOMEM;
    uint64_t for_ns = o->for_ns ? o->for_ns : m->for_ns;
    fmt_dur(o->at_ns, at, sizeof(at));
    fmt_dur(for_ns, dur, sizeof(dur));
    fmt_dur(o->at_ns + for_ns + o->recover_ns, total, sizeof(total));
    snprintf(title, sizeof(title), "%s", m->title);
    char why[200];
    const char *d = strstr(m->why, "{delay}");
    if (d)
        snprintf(why, sizeof(why), "%.*s%s%s", (int)(d - m->why), m->why, delay, d + 7);
    else
        snprintf(why, sizeof(why), "%s", m->why);
    snprintf(desc, sizeof(desc), "%s for %s, %s after the load starts.", why, dur, at);
    int rc = write_header(b, p, rank_i, n);
    rc |= buf_append_str(b, "title: ");
    rc |= yaml_str(b, title);
    rc |= buf_append_str(b, "\ndescription: ");
    rc |= yaml_str(b, desc);
    rc |= buf_append_str(b, "\nsteady-state-hypothesis:\n  probes:\n");
    for (size_t i = 0; i < m->n_probes; i++) {
        rc |= buf_append_str(b, "    - slo: ");
        rc |= yaml_str(b, m->probe_slo[i]);
        if (m->probe_during[i][0]) {
            rc |= buf_append_str(b, "\n      during: ");
            rc |= yaml_str(b, m->probe_during[i]);
        }
        rc |= buf_append_char(b, '\n');
    }
    rc |= buf_appendf(b, "method:\n  - name: %s\n    at: %s\n    for: %s\n    %s: ", m->id, at, dur,
                      m->via_sim ? "sim" : "proxy");
    rc |= yaml_str(b, m->via_sim ? o->sim_admin : o->proxy_api);
    rc |= buf_appendf(b, "\n    fault: %s\nload: [\"--target\", ", fault);
    rc |= yaml_str(b, o->target);
    rc |= buf_append_str(b, ", \"--rate\", ");
    rc |= yaml_str(b, o->rate);
    rc |= buf_appendf(b, ", \"--duration\", \"%s\"", total);
    for (size_t i = 0; i < o->n_load_args; i++) {
        rc |= buf_append_str(b, ", ");
        rc |= yaml_str(b, o->load_args[i]);
    }
    rc |= buf_append_str(b, "]\n");
    free(fault);
    return rc ? -ENOMEM : 0;
}

static int load_topology(const char *path, json_t **out)
{
    char *data = NULL, err[512];
    size_t len = 0;
    if (file_read_all(path, SUGGEST_TOPO_MAX, &data, &len, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm chaos suggest: --topology %s\n", err);
        return TS_EXIT_USAGE;
    }
    json_error_t je;
    json_t *doc = json_loadb(data, len, 0, &je);
    ts_free(data);
    if (!doc || json_integer_value(json_object_get(doc, "tokenstorm_topology")) != 1 ||
        !json_is_array(json_object_get(doc, "nodes")) ||
        !json_is_array(json_object_get(doc, "edges")) ||
        !json_is_array(json_object_get(doc, "flags"))) {
        fprintf(stderr, "tokenstorm chaos suggest: %s: %s\n", path,
                doc ? "not a tokenstorm topology (tokenstorm_topology: 1, nodes, edges, flags)"
                    : je.text);
        json_decref(doc);
        return TS_EXIT_USAGE;
    }
    *out = doc;
    return 0;
}

/* DIR/result.json of a run; its target's base URL into target. */
static int load_result(const char *dir, json_t **out, char *target, size_t cap)
{
    char path[4096], err[512];
    snprintf(path, sizeof(path), "%s/result.json", dir);
    char *data = NULL;
    size_t len = 0;
    if (file_read_all(path, SUGGEST_TOPO_MAX, &data, &len, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm chaos suggest: --result %s\n", err);
        return TS_EXIT_USAGE;
    }
    json_error_t je;
    json_t *doc = json_loadb(data, len, 0, &je);
    ts_free(data);
    if (!json_is_object(doc) || !json_is_object(json_object_get(doc, "run")) ||
        !json_is_object(json_object_get(doc, "outcomes"))) {
        fprintf(stderr, "tokenstorm chaos suggest: %s: not a tokenstorm result (%s)\n", path,
                doc ? "no run or outcomes" : je.text);
        json_decref(doc);
        return TS_EXIT_USAGE;
    }
    const char *t = jstr(json_object_get(doc, "run"), "target");
    const char *v1 = strstr(t, "/v1/");
    snprintf(target, cap, "%.*s", (int)(v1 ? v1 - t + 3 : (long)strlen(t)), t);
    *out = doc;
    return 0;
}

static int load_catalogue(const struct suggest_opts *o, struct fault_catalogue *cat)
{
    char err[768];
    if (fault_catalogue_builtin(cat, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm chaos suggest: %s\n", err);
        return TS_EXIT_FAIL;
    }
    for (size_t i = 0; i < o->n_catalogues; i++) {
        char *data = NULL;
        size_t len = 0;
        int rc = file_read_all(o->catalogues[i], FM_FILE_MAX, &data, &len, err, sizeof(err));
        if (!rc)
            rc = fault_catalogue_add(cat, data, len, o->catalogues[i], err, sizeof(err));
        ts_free(data);
        if (rc) {
            fprintf(stderr, "tokenstorm chaos suggest: %s\n", err);
            return TS_EXIT_USAGE;
        }
    }
    return 0;
}

static json_t *pick_json(const struct pick *p, const char *file)
{
    json_t *o = json_object();
    int rc = tsjson_put(o, "id", json_string(p->m->id));
    rc |= tsjson_put(o, "title", json_string(p->m->title));
    rc |= tsjson_put(o, "layer", json_string(p->m->layer));
    rc |= tsjson_put(o, "hits", json_string(p->m->hits));
    rc |= tsjson_put(o, "score", tsjson_num(round(p->score * 1000) / 1000));
    rc |= tsjson_put(o, "risk", tsjson_num(p->m->risk));
    rc |= tsjson_put(o, "coverage", tsjson_num(round(p->coverage * 1000) / 1000));
    rc |= tsjson_put(o, "reason", json_string(p->reason));
    if (file)
        rc |= tsjson_put(o, "file", json_string(file));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Writes the experiment files and suggestions.json, prints the ranking. */
static int emit(const struct suggest_opts *o, const struct pick *picks, size_t k)
{
    char err[512], path[4096], name[96];
    if (o->out_dir && file_mkdirs(o->out_dir, err, sizeof(err))) {
        fprintf(stderr, "tokenstorm chaos suggest: %s\n", err);
        return TS_EXIT_FAIL;
    }
    json_t *list = json_array();
    int code = list ? 0 : TS_EXIT_FAIL;
    for (size_t i = 0; i < k && !code; i++) {
        snprintf(name, sizeof(name), "%02zu-%s.yaml", i + 1, picks[i].m->id);
        if (o->out_dir) {
            struct buf b;
            buf_init(&b, 1u << 20);
            snprintf(path, sizeof(path), "%s/%s", o->out_dir, name);
            FILE *f = NULL;
            if (write_experiment(&b, o, &picks[i], i + 1, k) || !(f = fopen(path, "w")) ||
                fwrite(b.data, 1, b.len, f) != b.len) {
                fprintf(stderr, "tokenstorm chaos suggest: cannot write %s\n", path);
                code = TS_EXIT_FAIL;
            }
            if (f && fclose(f))
                code = TS_EXIT_FAIL;
            buf_release(&b);
        }
        if (json_array_append_new(list, pick_json(&picks[i], o->out_dir ? name : NULL)))
            code = TS_EXIT_FAIL;
        if (!o->format || strcmp(o->format, "json"))
            printf("%zu. %-24s %.2f  %-14s %s\n   why: %s\n", i + 1, picks[i].m->id, picks[i].score,
                   picks[i].m->layer, picks[i].m->title, picks[i].reason);
    }
    if (!code && o->out_dir) {
        snprintf(path, sizeof(path), "%s/suggestions.json", o->out_dir);
        if (json_dump_file(list, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER))
            code = TS_EXIT_FAIL;
    }
    if (!code && o->format && !strcmp(o->format, "json")) {
        json_dumpf(list, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        putchar('\n');
    }
    json_decref(list);
    return code;
}

int suggest_job(const struct suggest_opts *o)
{
    json_t *topo = NULL, *res = NULL;
    struct fault_catalogue cat = {0};
    struct pick *all = NULL, *picks = NULL;
    char run_target[512] = "";
    struct suggest_opts eff = *o;
    int code = o->topology ? load_topology(o->topology, &topo) : 0;
    if (!code && o->result)
        code = load_result(o->result, &res, run_target, sizeof(run_target));
    if (!eff.target)
        eff.target = run_target[0] ? run_target : "http://127.0.0.1:9000/v1";
    if (!code)
        code = load_catalogue(o, &cat);
    if (code)
        goto out;
    all = ts_calloc(cat.n ? cat.n : 1, sizeof(*all));
    picks = ts_calloc(cat.n ? cat.n : 1, sizeof(*picks));
    if (!all || !picks) {
        code = TS_EXIT_FAIL;
        goto out;
    }
    size_t n = 0;
    for (size_t i = 0; i < cat.n; i++)
        n += score_mode(topo, res, &cat.modes[i], &all[n]);
    size_t k = rank(all, n, o->max < n ? o->max : n, picks);
    if (!k)
        fprintf(stderr, "tokenstorm chaos suggest: no fault mode applies to this target\n");
    code = emit(&eff, picks, k);
out:
    ts_free(all);
    ts_free(picks);
    fault_catalogue_release(&cat);
    json_decref(topo);
    json_decref(res);
    return code;
}
