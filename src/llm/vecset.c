/*
 * vecset.c - generated, read and exactly searched vector sets (vecset.h).
 */
#include "llm/vecset.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/file.h"
#include "base/rng.h"

bool vecgen_is_spec(const char *spec)
{
    return spec && !strncmp(spec, "gen:", 4);
}

/* A decimal count in [lo, hi] at *p, moving *p past it. */
static bool take_count(const char **p, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (!isdigit((unsigned char)**p))
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(*p, &end, 10);
    if (errno || v < lo || v > hi)
        return false;
    *p = end;
    *out = v;
    return true;
}

int vecgen_parse(const char *spec, struct vecgen *g, char *err, size_t errlen)
{
    const char *p = spec + (vecgen_is_spec(spec) ? 4 : 0);
    uint64_t n = 0, dim = 64, clusters = 64;
    double spread = 1.0;
    bool ok = vecgen_is_spec(spec) && take_count(&p, 1, VECSET_MAX_N, &n);
    if (ok && *p == 'x')
        p++, ok = take_count(&p, 1, VECSET_MAX_DIM, &dim);
    if (ok && *p == ':')
        p++, ok = take_count(&p, 1, 65536, &clusters);
    if (ok && *p == ':') {
        char *end;
        spread = strtod(p + 1, &end);
        ok = end != p + 1 && spread > 0 && spread <= 10;
        p = end;
    }
    if (!ok || *p) {
        ts_errf(err, errlen,
                "'%.80s': expected gen:N[xD][:CLUSTERS[:SPREAD]] (N 1..%u, D 1..%u, "
                "CLUSTERS 1..65536, 0 < SPREAD <= 10), e.g. gen:20000x64",
                spec, VECSET_MAX_N, VECSET_MAX_DIM);
        return -EINVAL;
    }
    if (n * dim * sizeof(float) > VECSET_MAX_FILE || clusters * dim > VECSET_MAX_CENTRES) {
        ts_errf(err, errlen,
                "'%.80s': too large (N x D at most %zu floats, CLUSTERS x D at most %u)", spec,
                VECSET_MAX_FILE / sizeof(float), VECSET_MAX_CENTRES);
        return -EINVAL;
    }
    g->n = n;
    g->dim = dim;
    g->clusters = clusters;
    g->spread = spread;
    return 0;
}

static double gauss(struct rng *r)
{
    double u = rng_uniform01(r), v = rng_uniform01(r);
    if (u < 1e-300)
        u = 1e-300;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

int vecset_generate(const struct vecgen *g, uint64_t stream, size_t n, struct vecset *out)
{
    memset(out, 0, sizeof(*out));
    if (n < 1 || n > VECSET_MAX_N || g->dim < 1 || g->dim > VECSET_MAX_DIM || g->clusters < 1 ||
        g->clusters > 65536 || !(g->spread > 0))
        return -EINVAL;
    float *centres = ts_malloc(g->clusters * g->dim * sizeof(float));
    float *v = ts_malloc(n * g->dim * sizeof(float));
    if (!centres || !v) {
        ts_free(centres);
        ts_free(v);
        return -ENOMEM;
    }
    struct rng r;
    rng_seed(&r, rng_mix64(g->seed));
    for (size_t i = 0; i < g->clusters * g->dim; i++)
        centres[i] = (float)(2.0 * rng_uniform01(&r) - 1.0);
    for (size_t i = 0; i < n; i++) {
        rng_seed(&r, rng_mix64(g->seed ^ rng_mix64((stream + 1) * 0x9e3779b97f4a7c15ull + i)));
        const float *c = centres + rng_range(&r, 0, g->clusters - 1) * g->dim;
        for (size_t d = 0; d < g->dim; d++)
            v[i * g->dim + d] = c[d] + (float)(g->spread * gauss(&r));
    }
    ts_free(centres);
    out->n = n;
    out->dim = g->dim;
    out->v = v;
    return 0;
}

void vecset_release(struct vecset *s)
{
    ts_free(s->v);
    memset(s, 0, sizeof(*s));
}

void ivecset_release(struct ivecset *s)
{
    ts_free(s->v);
    memset(s, 0, sizeof(*s));
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcasecmp(s + n - m, suffix);
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/*
 * The layout of an .fvecs/.ivecs file: records of int32 dim + dim 4-byte
 * values, all of one dim. Sets *n and *dim.
 */
static int xvecs_shape(const char *name, const unsigned char *data, size_t len, size_t *n,
                       size_t *dim, char *err, size_t errlen)
{
    if (len < 4) {
        ts_errf(err, errlen, "%s: empty or shorter than one record", name);
        return TS_PARSE;
    }
    uint32_t d = le32(data);
    if (d < 1 || d > VECSET_MAX_DIM) {
        ts_errf(err, errlen, "%s: record 1: dimension %" PRIu32 " out of 1..%u", name, d,
                VECSET_MAX_DIM);
        return TS_PARSE;
    }
    size_t rec = 4 + (size_t)d * 4;
    if (len % rec) {
        ts_errf(err, errlen, "%s: %zu bytes is not a whole number of %zu-byte records", name, len,
                rec);
        return TS_PARSE;
    }
    for (size_t i = 0; i < len / rec; i++)
        if (le32(data + i * rec) != d) {
            ts_errf(err, errlen, "%s: record %zu: dimension %" PRIu32 ", the first had %" PRIu32,
                    name, i + 1, le32(data + i * rec), d);
            return TS_PARSE;
        }
    if (len / rec > VECSET_MAX_N) {
        ts_errf(err, errlen, "%s: more than %u records", name, VECSET_MAX_N);
        return TS_TOOBIG;
    }
    *n = len / rec;
    *dim = d;
    return 0;
}

/* Skips spaces in the npy header text. */
static const char *npy_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

/* Matches the literal lit after optional spaces. */
static bool npy_lit(const char **p, const char *end, const char *lit)
{
    const char *q = npy_ws(*p, end);
    size_t n = strlen(lit);
    if ((size_t)(end - q) < n || memcmp(q, lit, n))
        return false;
    *p = q + n;
    return true;
}

static bool npy_num(const char **p, const char *end, uint64_t *out)
{
    const char *q = npy_ws(*p, end);
    uint64_t v = 0;
    const char *s = q;
    while (q < end && *q >= '0' && *q <= '9' && q - s < 12)
        v = v * 10 + (uint64_t)(*q++ - '0');
    if (q == s || (q < end && *q >= '0' && *q <= '9'))
        return false;
    *p = q;
    *out = v;
    return true;
}

/*
 * The header of an .npy file: descr ('<f4', '<i4' or '<i8' -> *elem 'f', 'i'
 * or 'l'), a 2-D C-order shape, and where the data starts.
 */
static int npy_header(const char *name, const unsigned char *data, size_t len, char *elem,
                      size_t *rows, size_t *cols, size_t *off, char *err, size_t errlen)
{
    static const char descrs[][6] = {"'<f4'", "'<i4'", "'<i8'"};
    static const char elems[] = {'f', 'i', 'l'};
    if (len < 10 || memcmp(data, "\x93NUMPY", 6) || data[6] < 1 || data[6] > 3) {
        ts_errf(err, errlen, "%s: not a NumPy .npy file of format 1, 2 or 3", name);
        return TS_PARSE;
    }
    size_t hl =
        data[6] == 1 ? (size_t)data[8] | (size_t)data[9] << 8 : (len < 12 ? 0 : le32(data + 8));
    size_t start = data[6] == 1 ? 10 : 12;
    if (hl == 0 || hl > 65536 || start + hl > len) {
        ts_errf(err, errlen, "%s: the header length is out of the file", name);
        return TS_PARSE;
    }
    const char *p = (const char *)data + start, *end = p + hl;
    int which = -1;
    bool ok = npy_lit(&p, end, "{") && npy_lit(&p, end, "'descr'") && npy_lit(&p, end, ":");
    for (int i = 0; ok && which < 0 && i < 3; i++)
        if (npy_lit(&p, end, descrs[i]))
            which = i;
    uint64_t r = 0, c = 0;
    ok = ok && which >= 0 && npy_lit(&p, end, ",") && npy_lit(&p, end, "'fortran_order'") &&
         npy_lit(&p, end, ":") && npy_lit(&p, end, "False") && npy_lit(&p, end, ",") &&
         npy_lit(&p, end, "'shape'") && npy_lit(&p, end, ":") && npy_lit(&p, end, "(") &&
         npy_num(&p, end, &r) && npy_lit(&p, end, ",") && npy_num(&p, end, &c) &&
         npy_lit(&p, end, ")");
    if (ok)
        (void)npy_lit(&p, end, ",");
    ok = ok && npy_lit(&p, end, "}");
    if (!ok) {
        ts_errf(err, errlen,
                "%s: header: expected {'descr': '<f4'|'<i4'|'<i8', 'fortran_order': False, "
                "'shape': (N, D), } (a C-order 2-D array)",
                name);
        return TS_PARSE;
    }
    size_t esz = which == 2 ? 8 : 4;
    if (r < 1 || r > VECSET_MAX_N || c < 1 || c > VECSET_MAX_DIM ||
        r * c * esz != len - start - hl) {
        ts_errf(err, errlen,
                "%s: shape (%" PRIu64 ", %" PRIu64 ") out of range (N 1..%u, D 1..%u) or not "
                "the size of the data",
                name, r, c, VECSET_MAX_N, VECSET_MAX_DIM);
        return TS_PARSE;
    }
    *elem = elems[which];
    *rows = r;
    *cols = c;
    *off = start + hl;
    return 0;
}

int vecset_load_mem(const char *name, const unsigned char *data, size_t len, struct vecset *out,
                    char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    bool npy = ends_with(name, ".npy");
    if (!npy && !ends_with(name, ".fvecs")) {
        ts_errf(err, errlen, "%s: expected a .fvecs or .npy file", name);
        return -EINVAL;
    }
    size_t n, dim, off = 0;
    char elem = 'f';
    int rc = npy ? npy_header(name, data, len, &elem, &n, &dim, &off, err, errlen)
                 : xvecs_shape(name, data, len, &n, &dim, err, errlen);
    if (rc)
        return rc;
    if (elem != 'f') {
        ts_errf(err, errlen, "%s: expected float32 ('<f4') vectors", name);
        return TS_PARSE;
    }
    float *v = ts_malloc(n * dim * sizeof(float));
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *row = data + off + (npy ? i * dim * 4 : i * (dim + 1) * 4 + 4);
        for (size_t d = 0; d < dim; d++) {
            uint32_t bits = le32(row + d * 4);
            float f;
            memcpy(&f, &bits, sizeof(f));
            if (!isfinite(f)) {
                ts_errf(err, errlen, "%s: record %zu: value %zu is not finite", name, i + 1, d + 1);
                ts_free(v);
                return TS_PARSE;
            }
            v[i * dim + d] = f;
        }
    }
    out->n = n;
    out->dim = dim;
    out->v = v;
    return 0;
}

int ivecset_load_mem(const char *name, const unsigned char *data, size_t len, struct ivecset *out,
                     char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    bool npy = ends_with(name, ".npy");
    if (!npy && !ends_with(name, ".ivecs")) {
        ts_errf(err, errlen, "%s: expected an .ivecs or .npy file", name);
        return -EINVAL;
    }
    size_t n, k, off = 0;
    char elem = 'i';
    int rc = npy ? npy_header(name, data, len, &elem, &n, &k, &off, err, errlen)
                 : xvecs_shape(name, data, len, &n, &k, err, errlen);
    if (rc)
        return rc;
    if (elem == 'f') {
        ts_errf(err, errlen, "%s: expected integer ids ('<i4' or '<i8')", name);
        return TS_PARSE;
    }
    int32_t *v = ts_malloc(n * k * sizeof(int32_t));
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < k; j++) {
            int64_t id;
            if (elem == 'l') {
                const unsigned char *p = data + off + (i * k + j) * 8;
                id = (int64_t)((uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32);
            } else {
                const unsigned char *p =
                    data + off + (npy ? (i * k + j) * 4 : i * (k + 1) * 4 + 4 + j * 4);
                id = (int32_t)le32(p);
            }
            if (id < -1 || id > INT32_MAX) {
                ts_errf(err, errlen, "%s: record %zu: id %" PRId64 " out of -1..%d", name, i + 1,
                        id, INT32_MAX);
                ts_free(v);
                return TS_PARSE;
            }
            v[i * k + j] = (int32_t)id;
        }
    out->n = n;
    out->k = k;
    out->v = v;
    return 0;
}

static int load_file(const char *path, char **data, size_t *len, char *err, size_t errlen)
{
    return file_read_all(path, VECSET_MAX_FILE, data, len, err, errlen);
}

int vecset_load(const char *path, struct vecset *out, char *err, size_t errlen)
{
    char *data = NULL;
    size_t len = 0;
    memset(out, 0, sizeof(*out));
    int rc = load_file(path, &data, &len, err, errlen);
    if (!rc)
        rc = vecset_load_mem(path, (const unsigned char *)data, len, out, err, errlen);
    ts_free(data);
    return rc;
}

int ivecset_load(const char *path, struct ivecset *out, char *err, size_t errlen)
{
    char *data = NULL;
    size_t len = 0;
    memset(out, 0, sizeof(*out));
    int rc = load_file(path, &data, &len, err, errlen);
    if (!rc)
        rc = ivecset_load_mem(path, (const unsigned char *)data, len, out, err, errlen);
    ts_free(data);
    return rc;
}

/* Inserts (d, id) into the sorted best-k list of length *m (<= k). */
static void keep_best(float *bd, int32_t *bi, size_t *m, size_t k, float d, int32_t id)
{
    if (*m == k && d >= bd[k - 1])
        return;
    size_t j = *m < k ? (*m)++ : k - 1;
    while (j > 0 && bd[j - 1] > d) {
        bd[j] = bd[j - 1];
        bi[j] = bi[j - 1];
        j--;
    }
    bd[j] = d;
    bi[j] = id;
}

int vecset_knn_exact(const struct vecset *base, const struct vecset *queries, size_t k,
                     int32_t *ids)
{
    if (k < 1 || k > VECSET_MAX_K || k > base->n || base->dim != queries->dim)
        return -EINVAL;
    float *bd = ts_malloc(k * sizeof(float));
    if (!bd)
        return -ENOMEM;
    size_t dim = base->dim;
    for (size_t q = 0; q < queries->n; q++) {
        const float *x = queries->v + q * dim;
        int32_t *bi = ids + q * k;
        size_t m = 0;
        for (size_t i = 0; i < base->n; i++) {
            const float *y = base->v + i * dim;
            float s = 0;
            for (size_t d = 0; d < dim; d++)
                s += (x[d] - y[d]) * (x[d] - y[d]);
            keep_best(bd, bi, &m, k, s, (int32_t)i);
        }
    }
    ts_free(bd);
    return 0;
}

double vec_recall(const int64_t *got, size_t ngot, const int32_t *truth, size_t k)
{
    size_t hit = 0;
    for (size_t j = 0; j < k; j++) {
        if (truth[j] < 0)
            continue;
        for (size_t i = 0; i < ngot; i++)
            if (got[i] == truth[j]) {
                hit++;
                break;
            }
    }
    return k ? (double)hit / (double)k : 0;
}
