#include "base/alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_long fail_countdown = -1;
static atomic_long once_countdown = -1;

static int should_fail(void)
{
    if (atomic_load_explicit(&once_countdown, memory_order_relaxed) >= 0 &&
        atomic_fetch_sub_explicit(&once_countdown, 1, memory_order_relaxed) == 0)
        return 1; /* the counter is negative from now on: one failure only */
    long v = atomic_load_explicit(&fail_countdown, memory_order_relaxed);
    if (v < 0)
        return 0;
    if (v == 0)
        return 1;
    atomic_fetch_sub_explicit(&fail_countdown, 1, memory_order_relaxed);
    return 0;
}

void ts_alloc_fail_after(long n)
{
    atomic_store(&fail_countdown, n < 0 ? -1 : n);
}

void ts_alloc_fail_once(long n)
{
    atomic_store(&once_countdown, n < 0 ? -1 : n);
}

bool ts_alloc_fail_once_pending(void)
{
    return atomic_load(&once_countdown) >= 0;
}

void *ts_malloc(size_t n)
{
    if (should_fail())
        return NULL;
    return malloc(n ? n : 1);
}

void *ts_calloc(size_t count, size_t size)
{
    if (should_fail())
        return NULL;
    return calloc(count ? count : 1, size ? size : 1);
}

void *ts_realloc(void *p, size_t n)
{
    if (should_fail())
        return NULL;
    return realloc(p, n ? n : 1);
}

void ts_free(void *p)
{
    free(p);
}

void *ts_malloc_hook(size_t n, void *data)
{
    (void)data;
    return ts_malloc(n);
}

void ts_free_hook(void *p, void *data)
{
    (void)data;
    ts_free(p);
}

char *ts_strndup(const char *s, size_t n)
{
    if (!s)
        return NULL;
    char *d = ts_malloc(n + 1);
    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *ts_strdup(const char *s)
{
    return s ? ts_strndup(s, strlen(s)) : NULL;
}
