/*
 * hostinfo.h - the machine a run's client ran on, as result.json records it
 * (docs/METRICS.md): CPU model, online cores, kernel, OS and architecture.
 * No hostname, no user name, no address: results are shared.
 */
#ifndef TS_BASE_HOSTINFO_H
#define TS_BASE_HOSTINFO_H

#include <stddef.h>

#define HOST_INFO_FIELD_MAX 128

struct host_info {
    char cpu_model[HOST_INFO_FIELD_MAX]; /* "" when unknown */
    unsigned cores;                      /* online CPUs; 0 when unknown */
    char kernel[HOST_INFO_FIELD_MAX];    /* uname release, e.g. "6.1.0-18-amd64"; "" unknown */
    char os[HOST_INFO_FIELD_MAX];        /* uname sysname, e.g. "Linux" */
    char arch[HOST_INFO_FIELD_MAX];      /* uname machine, e.g. "x86_64" */
};

/*
 * Fills *h from uname(2), sysconf(_SC_NPROCESSORS_ONLN) and cpuinfo_path
 * (NULL: /proc/cpuinfo; its first "model name", else "Hardware", else
 * "Processor" line; at most 4096 lines of up to 1 KiB are read). Never fails:
 * what cannot be found is left empty (0 for cores). Strings are
 * NUL-terminated, truncated to HOST_INFO_FIELD_MAX - 1 bytes, blanks trimmed.
 */
void host_info_get(struct host_info *h, const char *cpuinfo_path);

#endif
