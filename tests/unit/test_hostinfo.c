/*
 * test_hostinfo.c - the client machine's description: the CPU model from
 * cpuinfo files of x86 and ARM shapes, and the fields uname gives.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/hostinfo.h"

/* Writes text to a temporary file; returns its path (static buffer). */
static const char *cpuinfo(const char *text)
{
    static char path[64];
    snprintf(path, sizeof(path), "/tmp/ts-cpuinfo-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void test_model_name_first(void **state)
{
    struct host_info h;
    (void)state;
    const char *p = cpuinfo("processor\t: 0\nvendor_id\t: GenuineIntel\n"
                            "model name\t:  Fake CPU @ 2.00GHz  \nprocessor\t: 1\n"
                            "model name\t: Other\n");
    host_info_get(&h, p);
    unlink(p);
    assert_string_equal(h.cpu_model, "Fake CPU @ 2.00GHz");
    assert_true(h.cores >= 1);
    assert_true(h.kernel[0] != '\0');
    assert_string_equal(h.os, "Linux");
    assert_true(h.arch[0] != '\0');
}

/* ARM: no "model name"; "Hardware" is preferred to "Processor", wherever it is. */
static void test_arm_fallbacks(void **state)
{
    struct host_info h;
    (void)state;
    const char *p = cpuinfo("Processor\t: AArch64 Processor rev 4\nBogoMIPS\t: 38.40\n"
                            "Hardware\t: Vendor Board X\n");
    host_info_get(&h, p);
    unlink(p);
    assert_string_equal(h.cpu_model, "Vendor Board X");
    p = cpuinfo("Processor\t: AArch64 Processor rev 4\nHardware\t:   \n");
    host_info_get(&h, p);
    unlink(p);
    assert_string_equal(h.cpu_model, "AArch64 Processor rev 4");
}

/* No file, or nothing in it: empty, not an error. */
static void test_unknown(void **state)
{
    struct host_info h;
    (void)state;
    host_info_get(&h, "/nonexistent/cpuinfo");
    assert_string_equal(h.cpu_model, "");
    const char *p = cpuinfo("flags\t: fpu vme\n");
    host_info_get(&h, p);
    unlink(p);
    assert_string_equal(h.cpu_model, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_name_first),
        cmocka_unit_test(test_arm_fallbacks),
        cmocka_unit_test(test_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
