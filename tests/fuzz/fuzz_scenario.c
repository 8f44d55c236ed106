/*
 * Fuzzes scenario files (scenario/scenario.h) and the YAML walk under them
 * (scenario/yamlwalk.h): scenario_load_mem on the input.
 *
 * Checks: the error message is NUL-terminated within its buffer and names
 * the file; a failed load leaves *out owning nothing; a loaded scenario has
 * 1..SCENARIO_MAX_CLASSES classes with names, in-range flow indexes, and the
 * open/closed rule holds.
 *
 * Relative paths resolve under a directory that does not exist. Inputs that
 * could name device files (a slot file or an empirical distribution is read
 * at load time) are skipped, and stdin is /dev/null, so no read can block.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scenario/scenario.h"

#define INPUT_MAX (256 * 1024)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    int fd = open("/dev/null", O_RDONLY);
    if (fd >= 0 && fd != 0) {
        dup2(fd, 0);
        close(fd);
    }
    return 0;
}

static int mentions(const uint8_t *data, size_t size, const char *word)
{
    size_t n = strlen(word);
    for (size_t i = 0; i + n <= size; i++)
        if (!memcmp(data + i, word, n))
            return 1;
    return 0;
}

static void check(const struct scenario *s)
{
    if (s->nclasses < 1 || s->nclasses > SCENARIO_MAX_CLASSES || !s->name || !s->path)
        abort();
    for (size_t i = 0; i < s->nclasses; i++) {
        const struct scenario_class *k = &s->classes[i];
        if (!k->name || scenario_class_find(s, k->name) != k)
            abort();
        if (k->open == (k->users != 0) || k->nslos > SCENARIO_MAX_SLOS)
            abort();
        if (k->has_flow) {
            const struct flow_def *f = &k->flow;
            if (f->n < 1 || f->n > SCENARIO_MAX_STEPS)
                abort();
            for (size_t j = 0; j < f->n; j++) {
                const struct flow_step_def *st = &f->steps[j];
                for (size_t d = 0; d < st->ndeps; d++)
                    if (st->deps[d] >= f->n)
                        abort();
                if (st->fallback >= (int32_t)f->n || st->fallback == (int32_t)j ||
                    (st->fallback >= 0 && !f->steps[st->fallback].fallback_only))
                    abort();
            }
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > INPUT_MAX || mentions(data, size, "dev") || mentions(data, size, "proc") ||
        mentions(data, size, "sys"))
        return 0;
    struct scenario s;
    char err[512];
    memset(err, 'x', sizeof(err));
    int rc = scenario_load_mem(&s, "fuzz.yaml", "/nonexistent-fuzz-dir", (const char *)data, size,
                               err, sizeof(err));
    if (!memchr(err, '\0', sizeof(err)))
        abort();
    if (rc != 0) {
        if (strncmp(err, "fuzz.yaml", 9) || s.classes || s.path || s.nclasses)
            abort();
        return 0;
    }
    check(&s);
    scenario_release(&s);
    return 0;
}
