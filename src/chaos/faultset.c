/*
 * faultset.c - the active faults of a proxy and the per-request roll.
 */
#include "chaos/faultset.h"

#include <fnmatch.h>
#include <sys/types.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"

void faultset_init(struct faultset *fs, uint64_t seed)
{
    memset(fs, 0, sizeof *fs);
    rng_seed(&fs->rng, seed);
}

void faultset_release(struct faultset *fs)
{
    faultset_reset(fs);
    ts_free(fs->v);
    fs->v = NULL;
    fs->cap = 0;
}

static ssize_t find(const struct faultset *fs, const char *name)
{
    for (size_t i = 0; i < fs->n; i++)
        if (strcmp(fs->v[i]->name, name) == 0)
            return (ssize_t)i;
    return -1;
}

struct fault *faultset_get(const struct faultset *fs, const char *name)
{
    ssize_t i = find(fs, name);
    return i < 0 ? NULL : fs->v[i];
}

int faultset_add(struct faultset *fs, const struct fault *spec, uint64_t now_ns)
{
    if (find(fs, spec->name) >= 0)
        return -EEXIST;
    if (fs->n >= FAULTSET_MAX)
        return TS_TOOBIG;
    if (fs->n == fs->cap) {
        size_t cap = fs->cap ? fs->cap * 2 : 8;
        struct fault **v = ts_realloc(fs->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        fs->v = v;
        fs->cap = cap;
    }
    struct fault *f = fault_new(spec);
    if (!f)
        return -ENOMEM;
    f->added_ns = now_ns;
    fs->v[fs->n++] = f;
    fs->generation++;
    return 0;
}

int faultset_replace(struct faultset *fs, const struct fault *spec, uint64_t now_ns)
{
    ssize_t i = find(fs, spec->name);
    if (i < 0)
        return -ENOENT;
    struct fault *f = fault_new(spec);
    if (!f)
        return -ENOMEM;
    struct fault *old = fs->v[i];
    f->added_ns = now_ns;
    atomic_store(&f->injected, atomic_load(&old->injected));
    atomic_store(&f->matched, atomic_load(&old->matched));
    fs->v[i] = f;
    fault_unref(old);
    fs->generation++;
    return 0;
}

int faultset_remove(struct faultset *fs, const char *name)
{
    ssize_t i = find(fs, name);
    if (i < 0)
        return -ENOENT;
    fault_unref(fs->v[i]);
    memmove(&fs->v[i], &fs->v[i + 1], (fs->n - (size_t)i - 1) * sizeof fs->v[0]);
    fs->n--;
    fs->generation++;
    return 0;
}

void faultset_reset(struct faultset *fs)
{
    for (size_t i = 0; i < fs->n; i++)
        fault_unref(fs->v[i]);
    fs->n = 0;
    fs->generation++;
}

bool faultset_wants_model(const struct faultset *fs)
{
    for (size_t i = 0; i < fs->n; i++)
        if (fs->v[i]->match.model[0])
            return true;
    return false;
}

static const char *req_header(const struct fault_request *r, const char *name)
{
    for (size_t i = 0; i < r->n_headers; i++)
        if (strcasecmp(r->headers[i].name, name) == 0)
            return r->headers[i].value;
    return NULL;
}

/* Prefix match on path segments' text: "/v1/chat" matches "/v1/chat" and
 * "/v1/chat/completions" (and "/v1/chatx": a plain text prefix). */
static bool path_matches(const struct fault_match *m, const char *path)
{
    if (!m->path[0])
        return true;
    if (!path)
        return false;
    if (m->path_glob)
        return fnmatch(m->path, path, 0) == 0;
    return strncmp(path, m->path, strlen(m->path)) == 0;
}

bool fault_matches(const struct fault *f, const struct fault_request *r)
{
    const struct fault_match *m = &f->match;
    if (!r)
        return true;
    if (!path_matches(m, r->path))
        return false;
    if (m->method[0] && (!r->method || strcasecmp(m->method, r->method) != 0))
        return false;
    if (m->header_name[0]) {
        const char *v = req_header(r, m->header_name);
        if (!v || (m->header_value[0] && strcmp(v, m->header_value) != 0))
            return false;
    }
    if (m->model[0] && (!r->model || strcmp(m->model, r->model) != 0))
        return false;
    if (m->tenant[0]) {
        const char *v = req_header(r, m->tenant_header);
        if (!v || strcmp(v, m->tenant) != 0)
            return false;
    }
    return true;
}

size_t faultset_roll(struct faultset *fs, const struct fault_request *r, unsigned families,
                     uint64_t now_ns, struct fault **out, size_t max)
{
    size_t k = 0;
    for (size_t i = 0; i < fs->n && k < max; i++) {
        struct fault *f = fs->v[i];
        if (!(families & (1u << fault_type_family(f->type))))
            continue;
        if (!fault_active(f, now_ns) || !fault_matches(f, r))
            continue;
        atomic_fetch_add_explicit(&f->matched, 1, memory_order_relaxed);
        bool hit;
        if (f->probability >= 1)
            hit = true;
        else if (f->probability <= 0)
            hit = false;
        else
            hit = rng_uniform01(&fs->rng) < f->probability;
        if (hit)
            out[k++] = fault_ref(f);
    }
    return k;
}
