/*
 * alloc.h - every allocation of tokenstorm goes through here.
 *
 * One place means tests can fail the Nth allocation (curl's torture mode):
 * ts_alloc_fail_after(n) makes the (n+1)th allocation from now return NULL,
 * and every later one too until ts_alloc_fail_after(-1) turns it off;
 * ts_alloc_fail_once(n) fails the (n+1)th only, so a test can see the code
 * recover from one failure.
 * ts_free(NULL) is a no-op. The functions are thread-safe.
 */
#ifndef TS_BASE_ALLOC_H
#define TS_BASE_ALLOC_H

#include <stdbool.h>
#include <stddef.h>

void *ts_malloc(size_t n);
void *ts_calloc(size_t count, size_t size);
void *ts_realloc(void *p, size_t n);
void ts_free(void *p);
/* Returns a heap copy of s (ts_free it), or NULL on failure or s == NULL. */
char *ts_strdup(const char *s);
/* Returns a NUL-terminated heap copy of the first n bytes of s, or NULL. */
char *ts_strndup(const char *s, size_t n);

/* ts_malloc / ts_free in the shape of libraries' allocator hooks that pass
 * a user pointer (PCRE2's general context, ...); data is ignored. */
void *ts_malloc_hook(size_t n, void *data);
void ts_free_hook(void *p, void *data);

/* Test hook: fail allocations after n more succeed; n < 0 disables. */
void ts_alloc_fail_after(long n);
/* Test hook: fail only the allocation after n more succeed; n < 0 disables. */
void ts_alloc_fail_once(long n);
/* true while the failure ts_alloc_fail_once() asked for has not happened yet. */
bool ts_alloc_fail_once_pending(void);

#endif
