/*
 * hostinfo.c - the client machine's description (see hostinfo.h).
 */
#include "base/hostinfo.h"

#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#define CPUINFO_MAX_LINES 4096

/* Copies s (len bytes) into out without leading and trailing blanks. */
static void copy_trimmed(char *out, size_t n, const char *s, size_t len)
{
    while (len && (*s == ' ' || *s == '\t')) {
        s++;
        len--;
    }
    while (len &&
           (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\n' || s[len - 1] == '\r'))
        len--;
    snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), s);
}

/* The value of the first line "KEY<blanks>: VALUE" of f with key in keys, by
 * preference order; "" when none. */
static void cpu_model_from(FILE *f, char *out, size_t n)
{
    static const char *const keys[] = {"model name", "Hardware", "Processor"};
    char line[1024];
    int best = 3;

    out[0] = '\0';
    for (int i = 0; i < CPUINFO_MAX_LINES && best > 0 && fgets(line, sizeof(line), f); i++) {
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        size_t klen = (size_t)(colon - line);
        while (klen && (line[klen - 1] == ' ' || line[klen - 1] == '\t'))
            klen--;
        for (int k = 0; k < best; k++) {
            char value[HOST_INFO_FIELD_MAX];
            if (strlen(keys[k]) != klen || strncmp(line, keys[k], klen))
                continue;
            copy_trimmed(value, sizeof(value), colon + 1, strlen(colon + 1));
            if (value[0]) {
                snprintf(out, n, "%s", value);
                best = k;
            }
            break;
        }
    }
}

void host_info_get(struct host_info *h, const char *cpuinfo_path)
{
    struct utsname u;

    memset(h, 0, sizeof(*h));
    if (uname(&u) == 0) {
        copy_trimmed(h->kernel, sizeof(h->kernel), u.release, strlen(u.release));
        copy_trimmed(h->os, sizeof(h->os), u.sysname, strlen(u.sysname));
        copy_trimmed(h->arch, sizeof(h->arch), u.machine, strlen(u.machine));
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    h->cores = n > 0 ? (unsigned)n : 0;
    FILE *f = fopen(cpuinfo_path ? cpuinfo_path : "/proc/cpuinfo", "r");
    if (f) {
        cpu_model_from(f, h->cpu_model, sizeof(h->cpu_model));
        fclose(f);
    }
}
